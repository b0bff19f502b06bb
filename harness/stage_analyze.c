/* stage_analyze.c: the analyze stage: the candidate's and the golden's error distributions
 * summarised as signatures (analyzer/). */
#include "harness/stages.h"

peat_status peat_stage_analyze(peat_campaign *c)
{
    PEAT_TRY(peat_analyzer_signature(c->acc_cand, &c->res->cand));
    return peat_analyzer_signature(c->acc_gold, &c->res->golden);
}
