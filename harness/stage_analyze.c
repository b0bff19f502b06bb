/* stage_analyze.c: the analyze stage: the candidate's and the golden's error distributions
 * summarised as signatures (analyzer/), the two at once on two threads (each only reads its own
 * accumulator). */
#include "harness/stages.h"

#include <pthread.h>
#include <stdio.h>

typedef struct sig_job {
    const peat_analyzer_acc_t *acc;
    peat_signature *out;
    peat_status st;
    char why[512]; /* the error message, which is per thread */
} sig_job;

static void *sig_main(void *arg)
{
    sig_job *j = arg;
    j->st = peat_analyzer_signature(j->acc, j->out);
    if (j->st != PEAT_OK) snprintf(j->why, sizeof j->why, "%s", peat_error_last());
    return NULL;
}

peat_status peat_stage_analyze(peat_campaign *c)
{
    double t0 = peat_now();
    sig_job gold = {c->acc_gold, &c->res->golden, PEAT_OK, ""};
    pthread_t tid;
    int threaded = pthread_create(&tid, NULL, sig_main, &gold) == 0;
    peat_status st = peat_analyzer_signature(c->acc_cand, &c->res->cand);
    if (threaded)
        pthread_join(tid, NULL);
    else
        sig_main(&gold);
    c->res->t_signatures = peat_now() - t0;
    PEAT_TRY(st);
    return gold.st == PEAT_OK ? PEAT_OK : PEAT_ERROR(gold.st, "%s", gold.why);
}
