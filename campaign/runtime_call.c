/* runtime_call.c: the candidate in the training loop of a runtime FI run, through the isolated
 * worker (harness/isolate_worker.c) or in-process under a watchdog (--no-isolate). */
#include "campaign/runtime_call.h"
#include "campaign/isolate.h"
#include "campaign/isolate_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct peat_runtime_call {
    const peat_kernel *k;
    peat_isolate_worker *w; /* NULL: in-process */
    double timeout_s;
    int ended;
    char why[256];
};

static peat_status isolated_swap(void *user, const peat_kernel *active, const peat_args *a,
                                 const peat_call_info *info)
{
    (void)active;
    peat_runtime_call *c = user;
    if (c->ended) return PEAT_ERROR(PEAT_ERR_KERNEL, "%s", c->why);
    peat_call_outcome out;
    char why[200];
    PEAT_TRY(peat_campaign_isolate_worker_call(c->w, a, c->timeout_s, &out, why, sizeof why));
    if (out == PEAT_CALL_DONE) return PEAT_OK;
    c->ended = 1;
    snprintf(c->why, sizeof c->why, "%s (iteration %lld, call %lld of the op)", why,
             (long long)info->iter, (long long)info->op_call_index);
    return PEAT_ERROR(PEAT_ERR_KERNEL, "%s", c->why);
}

static peat_status watched_swap(void *user, const peat_kernel *active, const peat_args *a,
                                const peat_call_info *info)
{
    (void)active;
    (void)info;
    peat_runtime_call *c = user;
    return peat_campaign_isolate_watched_run(c->k, a, c->timeout_s);
}

peat_status peat_campaign_runtime_call_setup(const peat_kernel *k, int isolate, double timeout_s,
                                             peat_exec_swap *s, peat_runtime_call **out)
{
    peat_runtime_call *c = calloc(1, sizeof *c);
    if (!c) return PEAT_ERROR(PEAT_ERR_NOMEM, "runtime call");
    c->k = k, c->timeout_s = timeout_s;
    if (isolate) {
        /* the kernel's state carries from call to call within the run, as in training; the
         * child starts here, before the band's threads do (a fork among running threads can
         * leave the child waiting on a lock no thread of its own will release) */
        peat_status st = peat_campaign_isolate_worker_create(k, 1, &c->w);
        if (st == PEAT_OK) st = peat_campaign_isolate_worker_start(c->w);
        if (st != PEAT_OK) {
            peat_campaign_isolate_worker_free(c->w);
            free(c);
            return st;
        }
    }
    s->kernel = NULL;
    s->fn = isolate ? isolated_swap : watched_swap;
    s->user = c;
    *out = c;
    return PEAT_OK;
}

int peat_campaign_runtime_call_ended(const peat_runtime_call *c, char *why, size_t nwhy)
{
    if (!c || !c->ended) return 0;
    snprintf(why, nwhy, "%s", c->why);
    return 1;
}

void peat_campaign_runtime_call_free(peat_runtime_call *c)
{
    if (!c) return;
    peat_campaign_isolate_worker_free(c->w);
    free(c);
}
