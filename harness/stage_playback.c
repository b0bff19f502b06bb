/* stage_playback.c: the playback stage: every recorded call replayed through the candidate
 * (isolated, harness/isolate.c), its outputs and the golden's measured against the exact ones. */
#include "golden/golden.h"
#include "harness/isolate.h"
#include "harness/progress.h"
#include "harness/stages.h"

#include <stdlib.h>
#include <string.h>

/* Adds output o of a call to both accumulators (candidate's and golden's outputs against the
 * exact one), with the output's magnitude (computed once), depth, terms and 2-D view. */
static peat_status acc_output(peat_campaign *c, int64_t call, const peat_args *in, int o,
                              const peat_tensor *test, const peat_tensor *golden,
                              const peat_tensor *exact)
{
    int64_t n = peat_tensor_numel(exact);
    double *mag = malloc((size_t)n * sizeof *mag);
    if (!mag) return PEAT_ERROR(PEAT_ERR_NOMEM, "magnitude buffer");
    double t0 = peat_now();
    peat_status st = peat_golden_magnitude(in, o, exact, mag);
    double t1 = peat_now();
    c->res->t_reference += t1 - t0;
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
    /* the report's error histograms, the worst call's error map and the coverage table */
    if (st == PEAT_OK && test->dtype == PEAT_DTYPE_F32 && golden->dtype == PEAT_DTYPE_F32) {
        const double *ex = (const double *)exact->data;
        peat_plot_add(&c->res->plots, 0, peat_f32(test), ex, mag, depth, n / cols, cols, call);
        peat_plot_add(&c->res->plots, 1, peat_f32(golden), ex, mag, depth, n / cols, cols, call);
    }
    c->res->t_analyzer += peat_now() - t1;
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

/* Files the call under its coverage group (layer, phase, first output's 2-D view). */
static void plot_call_end(peat_campaign *c, const peat_record *r)
{
    static const char *const phases[] = {"fwd", "bwd", "opt"};
    const peat_tensor *o0 = r->golden[0];
    int64_t cols = o0->shape[o0->ndim - 1];
    peat_plot_call_end(&c->res->plots, r->layer, phases[r->phase % 3], peat_tensor_numel(o0) / cols,
                       cols, r->iter);
}

/* Replays record i through the candidate and accumulates its errors. */
static peat_status replay(peat_campaign *c, int64_t i, int isolate)
{
    peat_record *r = c->recs.items[i];
    double t0 = peat_now();
    PEAT_TRY(peat_record_compute_exact(r));
    c->res->t_reference += peat_now() - t0;
    peat_args a = peat_record_args(r);
    PEAT_TRY(peat_isolate_outputs_alloc(&a, r->golden, r->n_out));
    char why[256];
    peat_status st = peat_isolate_run(c->k, &a, isolate, c->o->kernel_timeout_s, why, sizeof why);
    if (st == PEAT_ERR_KERNEL) {
        note_failure(c->res, r, why);
        st = PEAT_OK;
    } else {
        for (int out = 0; out < r->n_out && st == PEAT_OK; out++)
            st = acc_output(c, (int64_t)r->id, &a, out, a.out[out], r->golden[out], r->exact[out]);
        if (st == PEAT_OK) plot_call_end(c, r);
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
    peat_progress pr;
    peat_progress_begin(&pr, stdout, c->o->quiet, "playback", c->recs.n);
    for (int64_t i = 0; i < c->recs.n; i++) {
        peat_progress_step(&pr, i, NULL);
        if (peat_stage_plan_stop(c, i + 1)) {
            c->res->n_budget_skipped = c->recs.n - i;
            break;
        }
        PEAT_TRY(replay(c, i, isolate));
    }
    peat_progress_step(&pr, c->recs.n, NULL);
    peat_progress_end(&pr);
    peat_plot_finish(&c->res->plots);
    return PEAT_OK;
}
