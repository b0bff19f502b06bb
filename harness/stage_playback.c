/* stage_playback.c: the playback stage: every recorded call replayed through the candidate
 * (isolated, harness/isolate.c), its outputs and the golden's measured against the exact ones. */
#include "golden/golden.h"
#include "harness/isolate.h"
#include "harness/stages.h"

#include <stdlib.h>
#include <string.h>

/* Adds output o of a call to both accumulators (candidate's and golden's outputs against the
 * exact one), with the output's magnitude (computed once), depth, terms and 2-D view. */
static peat_status acc_output(peat_campaign *c, const peat_args *in, int o, const peat_tensor *test,
                              const peat_tensor *golden, const peat_tensor *exact)
{
    int64_t n = peat_tensor_numel(exact);
    double *mag = malloc((size_t)n * sizeof *mag);
    if (!mag) return PEAT_ERROR(PEAT_ERR_NOMEM, "magnitude buffer");
    peat_status st = peat_golden_magnitude(in, o, exact, mag);
    int64_t cols = exact->shape[exact->ndim - 1], depth = peat_op_info_get(in->op)->depth(&in->p);
    int64_t terms = peat_golden_terms(in, o);
    /* an input of the output's size lets the analyzer see input-dependent (smooth) errors */
    const peat_tensor *x = in->n_in > 0 && peat_tensor_numel(in->in[0]) == n ? in->in[0] : NULL;
    if (st == PEAT_OK)
        st = peat_analyzer_acc_add_terms(c->acc_cand, test, exact, mag, depth, terms, n / cols,
                                         cols, x);
    if (st == PEAT_OK)
        st = peat_analyzer_acc_add_terms(c->acc_gold, golden, exact, mag, depth, terms, n / cols,
                                         cols, x);
    free(mag);
    return st;
}

/* A call the candidate failed on (crash, hang, error): counted, the first one described. */
static void note_failure(peat_campaign_result *res, const peat_record *r, const char *why)
{
    if (res->n_kernel_failures++ == 0)
        snprintf(res->kernel_failure, sizeof res->kernel_failure,
                 "call %lld (%.40s, iter %lld): %.150s", (long long)r->id, r->layer,
                 (long long)r->iter, why);
}

/* Determinism: runs the call a second time and has the candidate's accumulator compare the two
 * outputs bitwise (a second run that fails adds nothing: the first run's failure is counted). */
static peat_status repeat_call(peat_campaign *c, const peat_record *r, int isolate,
                               const peat_args *first)
{
    char why[256];
    peat_args b = peat_record_args(r);
    PEAT_TRY(peat_isolate_outputs_alloc(&b, r->golden, r->n_out));
    if (peat_isolate_run(c->k, &b, isolate, c->o->kernel_timeout_s, why, sizeof why) == PEAT_OK)
        for (int out = 0; out < r->n_out; out++)
            peat_analyzer_acc_add_repeat(c->acc_cand, first->out[out], b.out[out]);
    peat_isolate_outputs_free(&b);
    return PEAT_OK;
}

/* Replays record i through the candidate and accumulates its errors. */
static peat_status replay(peat_campaign *c, int64_t i, int isolate)
{
    peat_record *r = c->recs.items[i];
    PEAT_TRY(peat_record_compute_exact(r));
    peat_args a = peat_record_args(r);
    PEAT_TRY(peat_isolate_outputs_alloc(&a, r->golden, r->n_out));
    char why[256];
    peat_status st = peat_isolate_run(c->k, &a, isolate, c->o->kernel_timeout_s, why, sizeof why);
    if (st == PEAT_ERR_KERNEL) {
        note_failure(c->res, r, why);
        st = PEAT_OK;
    } else {
        for (int out = 0; out < r->n_out && st == PEAT_OK; out++)
            st = acc_output(c, &a, out, a.out[out], r->golden[out], r->exact[out]);
        if (st == PEAT_OK && i < c->o->repeats) st = repeat_call(c, r, isolate, &a);
    }
    peat_isolate_outputs_free(&a);
    return st;
}

peat_status peat_stage_playback(peat_campaign *c)
{
    const peat_kernel *gold = peat_registry_role(c->k->op, PEAT_ROLE_GOLDEN, c->k->backend);
    if (!gold)
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "no golden CPU kernel for %s", peat_op_name(c->k->op));
    c->acc_cand = peat_analyzer_acc_alloc(c->k->name, c->k->op);
    c->acc_gold = peat_analyzer_acc_alloc(gold->name, c->k->op);
    if (!c->acc_cand || !c->acc_gold) return PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer");
    /* a GPU runtime initialised in this process does not survive fork: GPU kernels run
     * in-process */
    int isolate = c->o->isolate && strcmp(c->k->backend, "cpu") == 0;
    for (int64_t i = 0; i < c->recs.n; i++) PEAT_TRY(replay(c, i, isolate));
    return PEAT_OK;
}
