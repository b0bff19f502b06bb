/* stage_analyze.c: the analyze stage: the candidate's and the golden's error distributions
 * summarised as signatures (analyzer/), the two together on two threads, sharing the sorts that
 * depend only on the exact values. */
#include "harness/campaign/stages.h"

peat_status peat_campaign_stage_analyze(peat_campaign *c)
{
    double t0 = peat_clock_now();
    peat_status st =
        peat_analyzer_signature_pair(c->acc_cand, &c->res->cand, c->acc_gold, &c->res->golden);
    c->res->t_signatures = peat_clock_now() - t0;
    return st;
}
