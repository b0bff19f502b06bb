/* stage_playback.c: the playback stage: every recorded call replayed through the candidate
 * (isolated, campaign/isolate.c), its outputs and the golden's measured against the exact ones;
 * calls that crash, hang, exit or write where they must not are counted for the detect stage. */
#include "golden/golden.h"
#include "campaign/isolate.h"
#include "campaign/progress.h"
#include "campaign/stages.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The plane an output's structure is read in, along the op's own axes: attention [B,H,T,D]
 * (and its logsumexp [B,H,T], its gradients) as heads of T x D; conv [N,C,H,W] outputs as
 * images x channels of H x W; a batched GEMM's [B,M,N] as B planes of M x N; everything else
 * as the matrix of its last axis (rows x columns for GEMM). An unwritten last query tile or output
 * row block is then one edge of the plane. */
void peat_campaign_playback_plane(const peat_args *in, int o, const peat_tensor *exact,
                                  int64_t *rows, int64_t *cols)
{
    int64_t n = peat_tensor_numel(exact);
    *cols = exact->shape[exact->ndim - 1];
    *rows = n / *cols;
    int attn = in->op == PEAT_OP_ATTENTION || in->op == PEAT_OP_ATTENTION_BWD;
    int conv = in->op == PEAT_OP_CONV2D || in->op == PEAT_OP_CONV2D_BWD_DATA;
    if (attn && exact->ndim == 4) *rows = exact->shape[2];
    if (attn && exact->ndim == 3 && o == 1) *rows = exact->shape[2], *cols = 1;
    if (conv && exact->ndim == 4) *rows = exact->shape[2];
    if (in->op == PEAT_OP_GEMM && exact->ndim == 3) *rows = exact->shape[1]; /* batch of M x N */
}

peat_status peat_campaign_playback_accumulate(peat_analyzer_acc_t *ac, peat_analyzer_acc_t *ag,
                                              peat_plot_data *plots, int64_t call,
                                              const peat_args *in, int o, const peat_tensor *test,
                                              const peat_tensor *golden, const peat_tensor *exact,
                                              double *t_ref, double *t_an)
{
    int64_t n = peat_tensor_numel(exact);
    double *mag = malloc((size_t)n * sizeof *mag);
    if (!mag) return PEAT_ERROR(PEAT_ERR_NOMEM, "magnitude buffer");
    double t0 = peat_campaign_now();
    peat_status st = peat_golden_magnitude(in, o, exact, mag);
    double t1 = peat_campaign_now();
    *t_ref += t1 - t0;
    int64_t rows, cols, depth = peat_op_info_get(in->op)->depth(&in->p);
    peat_campaign_playback_plane(in, o, exact, &rows, &cols);
    int64_t terms = peat_golden_terms(in, o);
    /* an input of the output's size lets the analyzer see input-dependent (smooth) errors */
    const peat_tensor *x = in->n_in > 0 && peat_tensor_numel(in->in[0]) == n ? in->in[0] : NULL;
    /* one pass over the exact values for both */
    if (st == PEAT_OK)
        st = peat_analyzer_acc_add_pair(ac, test, ag, golden, exact, mag, depth, terms, rows, cols,
                                        x);
    /* the report's error histograms, the worst call's error map and the coverage table */
    if (st == PEAT_OK && test->dtype == PEAT_DTYPE_F32 && golden->dtype == PEAT_DTYPE_F32) {
        const double *ex = (const double *)exact->data;
        peat_campaign_plot_add(plots, 0, peat_f32(test), ex, mag, depth, n / cols, cols, call);
        peat_campaign_plot_add(plots, 1, peat_f32(golden), ex, mag, depth, n / cols, cols, call);
    }
    *t_an += peat_campaign_now() - t1;
    free(mag);
    return st;
}

/* Adds output o of a call to both accumulators (candidate's and golden's outputs against the
 * exact one), with the output's magnitude (computed once), depth, terms and 2-D view. */
static peat_status acc_output(peat_campaign *c, int64_t call, const peat_args *in, int o,
                              const peat_tensor *test, const peat_tensor *golden,
                              const peat_tensor *exact)
{
    return peat_campaign_playback_accumulate(c->acc_cand, c->acc_gold, &c->res->plots, call, in, o,
                                             test, golden, exact, &c->res->t_reference,
                                             &c->res->t_analyzer);
}

/* Counts a misbehaving call in *n and describes the first one in first. */
static void note(int64_t *n, char *first, size_t cap, const peat_record *r, const char *why)
{
    if ((*n)++ == 0)
        snprintf(first, cap, "call %lld (%.40s, iter %lld): %.150s", (long long)r->id, r->layer,
                 (long long)r->iter, why);
}

/* A call without usable outputs (crash, hang, error, early exit): counted as a failure; an exit
 * also as a DUE. Returns whether the kernel hung. */
static int note_failure(peat_campaign_result *res, const peat_record *r, peat_call_outcome out,
                        const char *why)
{
    if (out == PEAT_CALL_DUE) {
        res->n_kernel_failures++;
        note(&res->n_due, res->due, sizeof res->due, r, why);
    } else
        note(&res->n_kernel_failures, res->kernel_failure, sizeof res->kernel_failure, r, why);
    return out == PEAT_CALL_HUNG;
}

/* A completed call that wrote where it must not: its outputs still count. */
static void note_stray_write(peat_campaign_result *res, const peat_record *r, peat_call_outcome out,
                             const char *why)
{
    if (out == PEAT_CALL_OOB_WRITE)
        note(&res->n_oob_writes, res->oob_write, sizeof res->oob_write, r, why);
    if (out == PEAT_CALL_INPUT_MUTATION)
        note(&res->n_input_mutations, res->input_mutation, sizeof res->input_mutation, r, why);
}

/* Determinism: runs the call a second time and has the candidate's accumulator compare the two
 * outputs bitwise (a second run that fails adds nothing: the first run's failure is counted). */
static peat_status repeat_call(peat_campaign *c, const peat_record *r, int isolate,
                               const peat_args *first)
{
    char why[256];
    peat_args b = peat_record_args(r);
    PEAT_TRY(peat_campaign_isolate_outputs_alloc(&b, r->golden, r->n_out));
    peat_call_outcome out;
    peat_status st = peat_campaign_isolate_call(c->k, &b, isolate, c->o->kernel_timeout_s, &out,
                                                why, sizeof why);
    if (st == PEAT_OK && out == PEAT_CALL_DONE)
        for (int o = 0; o < r->n_out; o++)
            peat_analyzer_acc_add_repeat(c->acc_cand, first->out[o], b.out[o]);
    peat_campaign_isolate_outputs_free(&b);
    return st;
}

/* Files the call under its coverage group (layer, phase, first output's 2-D view). */
static void plot_call_end(peat_campaign *c, const peat_record *r)
{
    static const char *const phases[] = {"fwd", "bwd", "opt"};
    const peat_tensor *o0 = r->golden[0];
    int64_t cols = o0->shape[o0->ndim - 1];
    peat_campaign_plot_call_end(&c->res->plots, r->layer, phases[r->phase % 3],
                                peat_tensor_numel(o0) / cols, cols, r->iter);
}

/* Replays record i through the candidate (its inputs are never written: the kernel gets copies)
 * and accumulates its errors; *hung is set when the kernel hung. */
static peat_status replay(peat_campaign *c, int64_t i, int isolate, int *hung)
{
    peat_record *r = c->recs.items[i];
    double t0 = peat_campaign_now();
    PEAT_TRY(peat_record_compute_exact(r));
    c->res->t_reference += peat_campaign_now() - t0;
    peat_args a = peat_record_args(r);
    PEAT_TRY(peat_campaign_isolate_outputs_alloc(&a, r->golden, r->n_out));
    char why[256];
    peat_call_outcome out;
    peat_status st = peat_campaign_isolate_call(c->k, &a, isolate, c->o->kernel_timeout_s, &out,
                                                why, sizeof why);
    if (st == PEAT_OK && (out == PEAT_CALL_FAILED || out == PEAT_CALL_HUNG || out == PEAT_CALL_DUE))
        *hung = note_failure(c->res, r, out, why);
    else if (st == PEAT_OK) {
        note_stray_write(c->res, r, out, why);
        for (int o = 0; o < r->n_out && st == PEAT_OK; o++)
            st = acc_output(c, (int64_t)r->id, &a, o, a.out[o], r->golden[o], r->exact[o]);
        if (st == PEAT_OK) plot_call_end(c, r);
        if (st == PEAT_OK && i < c->o->repeats) st = repeat_call(c, r, isolate, &a);
    }
    peat_campaign_isolate_outputs_free(&a);
    return st;
}

/* Whose outputs the stored goldens are: the golden kernel's, or for calls captured from PyTorch
 * torch's own (the records name the aten op and dtype: "torch:aten.mm[f32]"; "torch" when they
 * differ). */
static const char *stored_golden_name(const peat_campaign *c, const peat_kernel *gold)
{
    if (!c->o->capture || c->recs.n == 0) return gold->name;
    const char *first = c->recs.items[0]->golden_kernel;
    for (int64_t i = 1; i < c->recs.n; i++)
        if (strcmp(c->recs.items[i]->golden_kernel, first) != 0) return "torch";
    return first;
}

peat_status peat_campaign_stage_playback(peat_campaign *c)
{
    PEAT_ASSERT(c->k && c->flow, "playback runs after resolve (stage order: run/pipeline.c)");
    const peat_kernel *gold = peat_registry_role(c->k->op, PEAT_ROLE_GOLDEN, c->k->backend);
    if (!gold)
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "no golden CPU kernel for %s", peat_op_name(c->k->op));
    c->acc_cand = peat_analyzer_acc_new(c->k->name, c->k->op);
    c->acc_gold = peat_analyzer_acc_new(stored_golden_name(c, gold), c->k->op);
    if (!c->acc_cand || !c->acc_gold) return PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer");
    /* a GPU runtime initialised in this process does not survive fork: GPU kernels run
     * in-process */
    int isolate = c->o->isolate && strcmp(c->k->backend, "cpu") == 0;
    peat_progress pr;
    peat_campaign_progress_begin(&pr, stdout, c->o->quiet, "playback", c->recs.n);
    /* a kernel that hung once is declared hung: its other calls would each cost the deadline */
    int skip_after_hang = !c->o->hang_policy || strcmp(c->o->hang_policy, "wait") != 0;
    for (int64_t i = 0; i < c->recs.n; i++) {
        int hung = 0;
        peat_campaign_progress_step(&pr, i, NULL);
        if (c->playback_stop && c->playback_stop(c, i + 1)) {
            c->res->n_budget_skipped = c->recs.n - i;
            break;
        }
        PEAT_TRY(replay(c, i, isolate, &hung));
        if (hung && skip_after_hang) {
            c->res->n_hang_skipped = c->recs.n - i - 1;
            c->res->n_kernel_failures += c->res->n_hang_skipped;
            break;
        }
    }
    peat_campaign_progress_step(&pr, c->recs.n, NULL);
    peat_campaign_progress_end(&pr);
    peat_campaign_plot_finish(&c->res->plots);
    return PEAT_OK;
}
