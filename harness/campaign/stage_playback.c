/* stage_playback.c: the playback stage: every recorded call replayed through the candidate
 * (isolated, harness/isolate/isolate.c), its outputs and the golden's measured against the exact
 * ones; calls that crash, hang, exit or write where they must not are counted for the detect stage.
 */
#include "golden/golden.h"
#include "peat/backend.h"
#include "harness/isolate/isolate.h"
#include "harness/campaign/progress.h"
#include "harness/scale/ranks.h"
#include "harness/scale/scale.h"
#include "harness/campaign/stages.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The plane an output's structure is read in, along the op's own axes: attention [B,H,T,D]
 * (and its logsumexp [B,H,T], its gradients) as heads of T x D; conv and pooling [N,C,H,W]
 * outputs as images x channels of H x W; a batched GEMM's [B,M,N] as B planes of M x N; everything
 * else as the matrix of its last axis (rows x columns for GEMM). An unwritten last query tile or
 * output row block is then one edge of the plane. */
void peat_campaign_playback_plane(const peat_args *in, int o, const peat_tensor *exact,
                                  int64_t *rows, int64_t *cols)
{
    int64_t n = peat_tensor_numel(exact);
    *cols = exact->shape[exact->ndim - 1];
    *rows = n / *cols;
    int attn = in->op == PEAT_OP_ATTENTION || in->op == PEAT_OP_ATTENTION_BWD;
    int conv = in->op == PEAT_OP_CONV2D || in->op == PEAT_OP_CONV2D_BWD_DATA ||
               in->op == PEAT_OP_MAXPOOL2D || in->op == PEAT_OP_MAXPOOL2D_BWD ||
               in->op == PEAT_OP_AVGPOOL2D || in->op == PEAT_OP_AVGPOOL2D_BWD;
    if (attn && exact->ndim == 4) *rows = exact->shape[2];
    if (attn && exact->ndim == 3 && o == 1) *rows = exact->shape[2], *cols = 1;
    if (conv && exact->ndim == 4) *rows = exact->shape[2];
    if (in->op == PEAT_OP_GEMM && exact->ndim == 3) *rows = exact->shape[1]; /* batch of M x N */
}

/* How output o of a call is analysed: its depth, terms, plane, and an input of the output's size
 * (it lets the analyzer see input-dependent, smooth errors; NULL when none). */
typedef struct out_view {
    int64_t depth, terms, rows, cols;
    const peat_tensor *x;
} out_view;

static out_view view_of(const peat_args *in, int o, const peat_tensor *exact)
{
    out_view v = {.depth = peat_op_info_get(in->op)->depth(&in->p),
                  .terms = peat_golden_terms(in, o)};
    peat_campaign_playback_plane(in, o, exact, &v.rows, &v.cols);
    int64_t n = peat_tensor_numel(exact);
    v.x = in->n_in > 0 && peat_tensor_numel(in->in[0]) == n ? in->in[0] : NULL;
    return v;
}

/* The report's error histograms, the worst call's error map and the coverage table. */
static void plots_add(peat_plot_data *plots, int64_t call, const out_view *v,
                      const peat_tensor *test, const peat_tensor *golden, const peat_tensor *exact,
                      const double *mag)
{
    if (test->dtype != PEAT_DTYPE_F32 || golden->dtype != PEAT_DTYPE_F32) return;
    int64_t n = peat_tensor_numel(exact);
    const double *ex = (const double *)exact->data;
    peat_campaign_plot_add(plots, 0, peat_f32(test), ex, mag, v->depth, n / v->cols, v->cols, call);
    peat_campaign_plot_add(plots, 1, peat_f32(golden), ex, mag, v->depth, n / v->cols, v->cols,
                           call);
}

peat_status
peat_campaign_playback_accumulate_mag(peat_analyzer_acc_t *ac, peat_analyzer_acc_t *ag,
                                      peat_plot_data *plots, int64_t call, const peat_args *in,
                                      int o, const peat_tensor *test, const peat_tensor *golden,
                                      const peat_tensor *exact, const double *mag, double *t_an)
{
    double t1 = peat_clock_now();
    out_view v = view_of(in, o, exact);
    /* one pass over the exact values for both */
    peat_status st = peat_analyzer_acc_add_pair(ac, test, ag, golden, exact, mag, v.depth, v.terms,
                                                v.rows, v.cols, v.x);
    if (st == PEAT_OK) plots_add(plots, call, &v, test, golden, exact, mag);
    *t_an += peat_clock_now() - t1;
    return st;
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
    double t0 = peat_clock_now();
    peat_status st = peat_golden_magnitude(in, o, exact, mag);
    *t_ref += peat_clock_now() - t0;
    if (st == PEAT_OK)
        st = peat_campaign_playback_accumulate_mag(ac, ag, plots, call, in, o, test, golden, exact,
                                                   mag, t_an);
    free(mag);
    return st;
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

/* Files the call under its coverage group (layer, phase, first output's 2-D view). */
static void plot_call_end(peat_campaign *c, const peat_record *r)
{
    static const char *const phases[] = {"fwd", "bwd", "opt"};
    const peat_tensor *o0 = r->golden[0];
    int64_t cols = o0->shape[o0->ndim - 1];
    peat_campaign_plot_call_end(&c->res->plots, r->layer, phases[r->phase % 3],
                                peat_tensor_numel(o0) / cols, cols, r->iter);
}

/* One replayed call: what the rank that replays it (i mod ranks under mpirun; the process itself
 * otherwise) hands the analysis, which takes the calls in order (under mpirun the rank's own
 * analysis of it too, placed in its turn). */
typedef struct play_item {
    int done;    /* replayed (a rank that met a hang leaves its later calls undone) */
    int32_t out; /* peat_call_outcome */
    char why[256];
    int n_out, repeated;             /* repeated: the second run completed (--repeats) */
    peat_tensor *exact[PEAT_MAX_IO]; /* from another rank: into the record when taken */
    peat_tensor *test[PEAT_MAX_IO];  /* the candidate's outputs */
    peat_tensor *again[PEAT_MAX_IO]; /* its second run's */
    double *mag[PEAT_MAX_IO];        /* the exact outputs' magnitudes */
    unsigned char *parts; /* under mpirun: each output's analysis (candidate's, golden's) */
    double t_ref;         /* seconds of exact outputs and magnitudes */
} play_item;

static void item_free(play_item *it)
{
    for (int o = 0; o < PEAT_MAX_IO; o++) {
        peat_tensor_free(it->exact[o]);
        peat_tensor_free(it->test[o]);
        peat_tensor_free(it->again[o]);
        free(it->mag[o]);
    }
    free(it->parts);
    memset(it, 0, sizeof *it);
}

static int usable(int32_t out)
{
    return out != PEAT_CALL_FAILED && out != PEAT_CALL_HUNG && out != PEAT_CALL_DUE;
}

/* The candidate's outputs of a call (isolated), copied out of the guarded buffers into dst. */
static peat_status call_outputs(peat_campaign *c, const peat_record *r, int isolate,
                                peat_tensor **dst, int32_t *out, char *why, size_t n)
{
    peat_args a = peat_record_args(r);
    PEAT_TRY(peat_isolate_outputs_alloc(&a, r->golden, r->n_out));
    peat_call_outcome oc;
    peat_status st = peat_isolate_call(c->k, &a, isolate, c->o->kernel_timeout_s, &oc, why, n);
    if (st == PEAT_OK) *out = (int32_t)oc;
    for (int o = 0; o < r->n_out && st == PEAT_OK && usable(*out); o++)
        st = peat_tensor_clone(a.out[o], &dst[o]);
    peat_isolate_outputs_free(&a);
    return st;
}

/* Replays record i through the candidate (its inputs are never written: the kernel gets copies):
 * its exact outputs (kept in the record), the candidate's outputs and their magnitudes, and for
 * the first --repeats calls a second run (determinism). */
static peat_status replay(peat_campaign *c, int64_t i, int isolate, play_item *it)
{
    peat_record *r = c->recs.items[i];
    double t0 = peat_clock_now();
    PEAT_TRY(peat_record_compute_exact(r));
    it->t_ref += peat_clock_now() - t0;
    it->n_out = r->n_out, it->done = 1;
    PEAT_TRY(call_outputs(c, r, isolate, it->test, &it->out, it->why, sizeof it->why));
    if (!usable(it->out)) return PEAT_OK;
    peat_args in = peat_record_args(r);
    t0 = peat_clock_now();
    for (int o = 0; o < r->n_out; o++) {
        it->mag[o] = malloc((size_t)peat_tensor_numel(r->exact[o]) * sizeof(double));
        if (!it->mag[o]) return PEAT_ERROR(PEAT_ERR_NOMEM, "magnitude buffer");
        PEAT_TRY(peat_golden_magnitude(&in, o, r->exact[o], it->mag[o]));
    }
    it->t_ref += peat_clock_now() - t0;
    if (i >= c->o->repeats) return PEAT_OK;
    /* a second run that fails adds nothing: the first run's failure is counted */
    int32_t again = PEAT_CALL_FAILED;
    char why[256];
    PEAT_TRY(call_outputs(c, r, isolate, it->again, &again, why, sizeof why));
    it->repeated = again == PEAT_CALL_DONE;
    return PEAT_OK;
}

/* The analysis of replayed call i, in record order: its failure counted (*hung set when the
 * kernel hung), or its outputs added to both accumulators (candidate's and golden's against the
 * exact ones) and the plots, and a second run compared bitwise (determinism). */
/* Output o of a call another rank analysed (its parts: candidate's, golden's) placed in the
 * accumulators in this call's turn, and its plots. */
static void place(peat_campaign *c, const peat_record *r, const peat_args *a, int o,
                  const play_item *it)
{
    double t0 = peat_clock_now();
    size_t ps = peat_analyzer_part_size();
    peat_analyzer_acc_apply_part(c->acc_cand, it->parts + (2 * (size_t)o) * ps);
    peat_analyzer_acc_apply_part(c->acc_gold, it->parts + (2 * (size_t)o + 1) * ps);
    out_view v = view_of(a, o, r->exact[o]);
    plots_add(&c->res->plots, (int64_t)r->id, &v, it->test[o], r->golden[o], r->exact[o],
              it->mag[o]);
    c->res->t_analyzer += peat_clock_now() - t0;
}

static peat_status analyse(peat_campaign *c, int64_t i, play_item *it, int *hung)
{
    peat_record *r = c->recs.items[i];
    for (int o = 0; o < it->n_out; o++)
        if (it->exact[o] && !r->exact[o]) r->exact[o] = it->exact[o], it->exact[o] = NULL;
    c->res->t_reference += it->t_ref;
    if (!usable(it->out)) {
        *hung = note_failure(c->res, r, (peat_call_outcome)it->out, it->why);
        return PEAT_OK;
    }
    note_stray_write(c->res, r, (peat_call_outcome)it->out, it->why);
    peat_args a = peat_record_args(r);
    a.n_out = r->n_out;
    for (int o = 0; o < r->n_out; o++) a.out[o] = it->test[o];
    peat_status st = PEAT_OK;
    for (int o = 0; o < r->n_out && st == PEAT_OK; o++)
        if (it->parts)
            place(c, r, &a, o, it);
        else
            st = peat_campaign_playback_accumulate_mag(
                c->acc_cand, c->acc_gold, &c->res->plots, (int64_t)r->id, &a, o, it->test[o],
                r->golden[o], r->exact[o], it->mag[o], &c->res->t_analyzer);
    if (st == PEAT_OK) plot_call_end(c, r);
    for (int o = 0; o < r->n_out && st == PEAT_OK && it->repeated; o++)
        peat_analyzer_acc_add_repeat(c->acc_cand, it->test[o], it->again[o]);
    return st;
}

/* a kernel that hung once is declared hung: its other calls would each cost the deadline */
static int skip_after_hang(const peat_campaign *c)
{
    return !c->o->hang_policy || strcmp(c->o->hang_policy, "wait") != 0;
}

/* The playback loop of one process: each call replayed and analysed in turn. */
static peat_status play_alone(peat_campaign *c, int isolate, peat_progress *pr)
{
    for (int64_t i = 0; i < c->recs.n; i++) {
        int hung = 0;
        peat_campaign_progress_step(pr, i, NULL);
        if (c->playback_stop && c->playback_stop(c, i + 1)) {
            c->res->n_budget_skipped = c->recs.n - i;
            break;
        }
        play_item it = {0};
        peat_status st = replay(c, i, isolate, &it);
        if (st == PEAT_OK) st = analyse(c, i, &it, &hung);
        item_free(&it);
        PEAT_TRY(st);
        if (hung && skip_after_hang(c)) {
            c->res->n_hang_skipped = c->recs.n - i - 1;
            c->res->n_kernel_failures += c->res->n_hang_skipped;
            break;
        }
    }
    return PEAT_OK;
}

/* A rank's analysis of call i: each output streamed as add number at + o into this rank's own
 * accumulators ac, ag (their sketches and sample join rank 0's at the end), its own statistics
 * into it->parts, placed by rank 0 in the call's turn. */
static peat_status parts_of(peat_campaign *c, int64_t i, int64_t at, play_item *it,
                            peat_analyzer_acc_t *ac, peat_analyzer_acc_t *ag)
{
    peat_record *r = c->recs.items[i];
    size_t ps = peat_analyzer_part_size();
    it->parts = malloc(2 * (size_t)r->n_out * ps);
    if (!it->parts) return PEAT_ERROR(PEAT_ERR_NOMEM, "analysis parts");
    peat_args a = peat_record_args(r);
    for (int o = 0; o < r->n_out; o++) {
        out_view v = view_of(&a, o, r->exact[o]);
        PEAT_TRY(peat_analyzer_acc_add_pair_part(ac, it->test[o], ag, r->golden[o], r->exact[o],
                                                 it->mag[o], v.depth, v.terms, v.rows, v.cols, v.x,
                                                 at + o, it->parts + 2 * (size_t)o * ps,
                                                 it->parts + (2 * (size_t)o + 1) * ps));
    }
    return PEAT_OK;
}

static int play_isolated(const peat_campaign *c)
{
    /* a GPU runtime initialised in this process does not survive fork: GPU kernels run
     * in-process */
    return c->o->isolate && peat_backend_can_fork(c->k->backend);
}

/* This rank's calls (i mod ranks == rank) replayed into items[i], up to its first hang, and
 * analysed into ac, ag (at: each call's first add index, were every call before it analysed). */
static peat_status replay_share(peat_campaign *c, int isolate, play_item *items, const int64_t *at,
                                peat_analyzer_acc_t *ac, peat_analyzer_acc_t *ag)
{
    int rank = peat_scale_mpi_rank(), ranks = peat_scale_mpi_size();
    for (int64_t i = rank; i < c->recs.n; i += ranks) {
        PEAT_TRY(replay(c, i, isolate, &items[i]));
        if (usable(items[i].out)) PEAT_TRY(parts_of(c, i, at[i], &items[i], ac, ag));
        if (items[i].out == PEAT_CALL_HUNG && skip_after_hang(c)) break;
    }
    return PEAT_OK;
}

/* Each call's first add index in one process whose every earlier call was analysed. */
static int64_t *add_indices(const peat_campaign *c)
{
    int64_t *at = calloc((size_t)(c->recs.n ? c->recs.n : 1), sizeof *at);
    for (int64_t i = 1; at && i < c->recs.n; i++) at[i] = at[i - 1] + c->recs.items[i - 1]->n_out;
    return at;
}

/* This rank's calls replayed and analysed into fresh accumulators *ac, *ag. */
static peat_status share_run(peat_campaign *c, play_item *items, peat_analyzer_acc_t **ac,
                             peat_analyzer_acc_t **ag)
{
    int64_t *at = add_indices(c);
    *ac = peat_analyzer_acc_new(c->k->name, c->k->op);
    *ag = peat_analyzer_acc_new(c->k->name, c->k->op);
    /* a rank's share of the node's cores (the parts are the same on any number of threads) */
    int t = (int)(sysconf(_SC_NPROCESSORS_ONLN) / peat_scale_mpi_local_size());
    peat_analyzer_acc_set_threads(*ac, t > 0 ? t : 1);
    peat_status st = at && *ac && *ag ? replay_share(c, play_isolated(c), items, at, *ac, *ag)
                                      : PEAT_ERROR(PEAT_ERR_NOMEM, "playback analysis");
    free(at);
    return st;
}

static void item_put(peat_scale_pack *p, int64_t i, const play_item *it)
{
    peat_scale_pack_put(p, &i, sizeof i);
    int32_t h[3] = {it->out, it->n_out, it->repeated};
    peat_scale_pack_put(p, h, sizeof h);
    peat_scale_pack_put_str(p, it->why);
    peat_scale_pack_put(p, &it->t_ref, sizeof it->t_ref);
    for (int o = 0; o < it->n_out; o++) {
        peat_scale_pack_put_tensor(p, it->exact[o]);
        peat_scale_pack_put_tensor(p, it->test[o]);
        peat_scale_pack_put_tensor(p, it->again[o]);
        int64_t n = it->mag[o] && it->exact[o] ? peat_tensor_numel(it->exact[o]) : 0;
        peat_scale_pack_put(p, &n, sizeof n);
        peat_scale_pack_put(p, it->mag[o], (size_t)n * sizeof(double));
    }
    int32_t parts = it->parts != NULL;
    peat_scale_pack_put(p, &parts, sizeof parts);
    if (parts) peat_scale_pack_put(p, it->parts, 2 * (size_t)it->n_out * peat_analyzer_part_size());
}

/* One item of a rank's answer into items[] (its index checked against the rank's share). */
static void item_get(peat_scale_pack *p, int64_t n_items, int r, int ranks, play_item *items)
{
    int64_t i = -1;
    int32_t h[3];
    peat_scale_pack_get(p, &i, sizeof i);
    peat_scale_pack_get(p, h, sizeof h);
    if (p->err || i < 0 || i >= n_items || i % ranks != r || items[i].done || h[1] < 0 ||
        h[1] > PEAT_MAX_IO) {
        p->err = 1;
        return;
    }
    play_item *it = &items[i];
    it->done = 1, it->out = h[0], it->n_out = h[1], it->repeated = h[2];
    snprintf(it->why, sizeof it->why, "%s", peat_scale_pack_get_str(p));
    peat_scale_pack_get(p, &it->t_ref, sizeof it->t_ref);
    for (int o = 0; o < it->n_out && !p->err; o++) {
        it->exact[o] = peat_scale_pack_get_tensor(p);
        it->test[o] = peat_scale_pack_get_tensor(p);
        it->again[o] = peat_scale_pack_get_tensor(p);
        int64_t n = 0;
        peat_scale_pack_get(p, &n, sizeof n);
        if (p->err || n < 0 || (n && (!it->exact[o] || n != peat_tensor_numel(it->exact[o])))) {
            p->err = 1;
            return;
        }
        it->mag[o] = n ? malloc((size_t)n * sizeof(double)) : NULL;
        if (n && !it->mag[o]) p->err = 1;
        if (n && it->mag[o]) peat_scale_pack_get(p, it->mag[o], (size_t)n * sizeof(double));
    }
    if (!p->err && usable(it->out))
        for (int o = 0; o < it->n_out; o++)
            if (!it->test[o] || !it->mag[o]) p->err = 1;
    int32_t parts = 0;
    peat_scale_pack_get(p, &parts, sizeof parts);
    size_t np = 2 * (size_t)it->n_out * peat_analyzer_part_size();
    if (!p->err && parts && (it->parts = malloc(np ? np : 1)) == NULL) p->err = 1;
    if (!p->err && parts) peat_scale_pack_get(p, it->parts, np);
}

/* An accumulator's sketches and sample, sized, into the answer. */
static peat_status spill_put(const peat_analyzer_acc_t *acc, peat_scale_pack *out)
{
    int64_t n = (int64_t)peat_analyzer_acc_spill_size(acc);
    unsigned char *b = malloc((size_t)n);
    if (!b) return PEAT_ERROR(PEAT_ERR_NOMEM, "the analysis for rank 0");
    peat_status st = peat_analyzer_acc_spill(acc, b);
    peat_scale_pack_put(out, &n, sizeof n);
    peat_scale_pack_put(out, b, (size_t)n);
    free(b);
    return st;
}

peat_status peat_campaign_playback_share(peat_campaign *c, peat_scale_pack *in,
                                         peat_scale_pack *out)
{
    (void)in;
    play_item *items = calloc((size_t)(c->recs.n ? c->recs.n : 1), sizeof *items);
    if (!items) return PEAT_ERROR(PEAT_ERR_NOMEM, "playback items");
    peat_analyzer_acc_t *ac = NULL, *ag = NULL;
    peat_status st = share_run(c, items, &ac, &ag);
    int64_t n = 0;
    for (int64_t i = 0; i < c->recs.n; i++) n += items[i].done;
    peat_scale_pack_put(out, &n, sizeof n);
    for (int64_t i = 0; i < c->recs.n; i++) {
        if (items[i].done) {
            /* the exact outputs stay in this rank's record: a copy goes to rank 0 */
            for (int o = 0; o < items[i].n_out; o++)
                items[i].exact[o] = c->recs.items[i]->exact[o], c->recs.items[i]->exact[o] = NULL;
            item_put(out, i, &items[i]);
        }
        item_free(&items[i]);
    }
    free(items);
    if (st == PEAT_OK) st = spill_put(ac, out);
    if (st == PEAT_OK) st = spill_put(ag, out);
    peat_analyzer_acc_free(ac);
    peat_analyzer_acc_free(ag);
    return st;
}

/* "#1, #4, ..." : the items of rank r of ranks among n. */
static void share_names(int r, int ranks, int64_t n, char *buf, size_t cap)
{
    if (r >= n)
        snprintf(buf, cap, "none");
    else if (r + ranks >= n)
        snprintf(buf, cap, "#%d", r);
    else
        snprintf(buf, cap, "#%d, #%lld, ...", r, (long long)(r + ranks));
}

/* Rank 0: every other rank's answer into items[] (each rank's taken even after a failure, so
 * that no rank waits for rank 0); the first failure names the rank and its calls. */
/* A rank's spilled accumulators (candidate's, golden's). */
typedef struct spill {
    void *b[2];
    size_t n[2];
} spill;

static void spill_get(peat_scale_pack *p, spill *sp)
{
    for (int k = 0; k < 2 && !p->err; k++) {
        int64_t n = -1;
        peat_scale_pack_get(p, &n, sizeof n);
        if (p->err || n < 0 || (size_t)n > p->n - p->at || !(sp->b[k] = malloc((size_t)n + 1))) {
            p->err = 1;
            return;
        }
        sp->n[k] = (size_t)n;
        peat_scale_pack_get(p, sp->b[k], (size_t)n);
    }
}

static peat_status take_shares(peat_campaign *c, play_item *items, int64_t n_items, spill *sp,
                               peat_status st)
{
    int ranks = peat_scale_mpi_size();
    for (int r = 1; r < ranks; r++) {
        peat_scale_pack p;
        peat_status rs = peat_scale_ranks_take(r, "playback", &p);
        int64_t n = 0;
        peat_scale_pack_get(&p, &n, sizeof n);
        for (int64_t k = 0; k < n && rs == PEAT_OK && !p.err; k++)
            item_get(&p, n_items, r, ranks, items);
        if (rs == PEAT_OK && sp) spill_get(&p, &sp[r]);
        if (rs == PEAT_OK && p.err)
            rs = PEAT_ERROR(PEAT_ERR_FORMAT, "rank %d of %d: its playback answer is cut short", r,
                            ranks);
        peat_scale_pack_free(&p);
        if (rs != PEAT_OK && st == PEAT_OK) {
            char names[64], why[768];
            share_names(r, ranks, c->recs.n, names, sizeof names);
            snprintf(why, sizeof why, "%s", peat_error_last());
            st = PEAT_ERROR(rs, "%s (its recorded calls: %s)", why, names);
        }
    }
    return st;
}

/* Whether the ranks' own analysis of their calls holds: every call was replayed and usable, so
 * each call's add index was the one the ranks assumed; then their sketches and samples join the
 * accumulators. Otherwise their calls are analysed here from their outputs. */
static peat_status parts_or_not(peat_campaign *c, play_item *items, spill *sp)
{
    int whole = 1;
    for (int64_t i = 0; i < c->recs.n; i++)
        whole &= items[i].done && usable(items[i].out) && items[i].parts != NULL;
    for (int r = 0; whole && r < peat_scale_mpi_size(); r++) whole &= sp[r].b[0] && sp[r].b[1];
    for (int64_t i = 0; !whole && i < c->recs.n; i++) {
        free(items[i].parts);
        items[i].parts = NULL;
    }
    for (int r = 0; whole && r < peat_scale_mpi_size(); r++) {
        PEAT_TRY(peat_analyzer_acc_absorb(c->acc_cand, sp[r].b[0], sp[r].n[0]));
        PEAT_TRY(peat_analyzer_acc_absorb(c->acc_gold, sp[r].b[1], sp[r].n[1]));
    }
    return PEAT_OK;
}

/* Rank 0's share as every rank's: its calls replayed and analysed into accumulators of its own,
 * spilled into sp (placed with the others' where every call was usable). */
static peat_status own_share(peat_campaign *c, play_item *items, spill *sp)
{
    peat_analyzer_acc_t *acc[2] = {NULL, NULL};
    peat_status st = share_run(c, items, &acc[0], &acc[1]);
    for (int k = 0; k < 2 && st == PEAT_OK; k++) {
        sp->n[k] = peat_analyzer_acc_spill_size(acc[k]);
        sp->b[k] = malloc(sp->n[k]);
        st = sp->b[k] ? peat_analyzer_acc_spill(acc[k], sp->b[k])
                      : PEAT_ERROR(PEAT_ERR_NOMEM, "the analysis of rank 0's calls");
    }
    peat_analyzer_acc_free(acc[0]);
    peat_analyzer_acc_free(acc[1]);
    return st;
}

/* The calls in record order, as one process analyses them (up to the first hang, when hangs are
 * skipped). */
static peat_status analyse_all(peat_campaign *c, play_item *items, peat_progress *pr)
{
    for (int64_t i = 0; i < c->recs.n; i++) {
        int hung = 0;
        peat_campaign_progress_step(pr, i, NULL);
        if (!items[i].done)
            return PEAT_ERROR(PEAT_ERR_INTERNAL, "playback: call #%lld was not replayed",
                              (long long)i);
        PEAT_TRY(analyse(c, i, &items[i], &hung));
        if (hung && skip_after_hang(c)) {
            c->res->n_hang_skipped = c->recs.n - i - 1;
            c->res->n_kernel_failures += c->res->n_hang_skipped;
            break;
        }
    }
    return PEAT_OK;
}

/* Under mpirun: the calls replayed on every rank (call i on rank i mod N), and analysed there
 * where every call was usable; rank 0 places them in record order, as one process does. */
static peat_status play_ranks(peat_campaign *c, peat_progress *pr)
{
    peat_scale_pack msg = {0};
    peat_campaign_items_records_put(c, &msg);
    peat_status st = msg.err ? PEAT_ERROR(PEAT_ERR_NOMEM, "the records for the ranks")
                             : peat_scale_ranks_tell('P', &msg);
    peat_scale_pack_free(&msg);
    PEAT_TRY(st);
    int ranks = peat_scale_mpi_size();
    play_item *items = calloc((size_t)(c->recs.n ? c->recs.n : 1), sizeof *items);
    spill *sp = calloc((size_t)ranks, sizeof *sp);
    if (!items || !sp) st = PEAT_ERROR(PEAT_ERR_NOMEM, "playback items");
    if (st == PEAT_OK) st = own_share(c, items, &sp[0]);
    if (st != PEAT_OK) {
        char why[768];
        snprintf(why, sizeof why, "%s", peat_error_last());
        st = PEAT_ERROR(st, "rank 0 failed in playback: %s", why);
    }
    st = take_shares(c, items, items ? c->recs.n : 0, sp, st);
    if (st == PEAT_OK) st = parts_or_not(c, items, sp);
    if (st == PEAT_OK) st = analyse_all(c, items, pr);
    for (int64_t i = 0; items && i < c->recs.n; i++) item_free(&items[i]);
    for (int r = 0; sp && r < ranks; r++) free(sp[r].b[0]), free(sp[r].b[1]);
    free(items);
    free(sp);
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
    PEAT_ASSERT(c->k && c->flow,
                "playback runs after resolve (stage order: harness/run/pipeline.c)");
    const peat_kernel *gold = peat_registry_role(c->k->op, PEAT_ROLE_GOLDEN, c->k->backend);
    if (!gold)
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "no golden CPU kernel for %s", peat_op_name(c->k->op));
    c->acc_cand = peat_analyzer_acc_new(c->k->name, c->k->op);
    c->acc_gold = peat_analyzer_acc_new(stored_golden_name(c, gold), c->k->op);
    if (!c->acc_cand || !c->acc_gold) return PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer");
    peat_progress pr;
    peat_campaign_progress_begin(&pr, stdout, c->o->quiet, "playback", c->recs.n);
    PEAT_TRY(peat_campaign_items_split(c) ? play_ranks(c, &pr)
                                          : play_alone(c, play_isolated(c), &pr));
    peat_campaign_progress_step(&pr, c->recs.n, NULL);
    peat_campaign_progress_end(&pr);
    peat_campaign_plot_finish(&c->res->plots);
    return PEAT_OK;
}
