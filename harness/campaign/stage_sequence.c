/* stage_sequence.c: the sequence stage: the candidate keeps its state across sequences of recorded
 * calls (one worker for all of them, as in one training run) built to expose state: the same
 * buffers holding new data, new buffers holding the same data, repeats, output buffers pre-filled
 * with varied contents, training order and shuffled, inputs changed in a few elements, and a run
 * of 1000 calls. Each call's outputs are compared with the same call's in a
 * fresh process: a kernel whose output leaves the bound there is STATEFUL (docs/detector.md). */
#include "harness/isolate/isolate_impl.h"
#include "peat/backend.h"
#include "harness/campaign/stages.h"
#include "golden/golden.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEQ_REFS_MAX 8 /* recorded calls the sequences draw from */
/* The long sequence's calls: past any warm-up or switch of up to this many calls (the stated
 * reach); the calls of a training run past it are the runtime stage's, whose shadow check takes
 * every 16th and the whole last iteration (docs/fault-injection.md). A fixed count keeps the
 * stage's cost that of a few small calls at every size (gpt base makes 3400 GEMM calls) */
#define SEQ_LONG 1000
/* A sequence call is stateful when its output leaves the op's rounding bound (max error over the
 * bound above 1, what every honest evaluation order meets: docs/bounds.md) by more than this
 * factor over the same call's error in a fresh process: a kernel that is already beyond the bound
 * (a narrower format) is judged against itself, and honest nondeterminism (another order on each
 * call) stays inside the bound */
#define SEQ_STATE_FACTOR 2.0
#define SEQ_SPARSE       4 /* elements of each input a "few elements changed" call changes */

typedef struct seq_ref {
    peat_record *r;
    peat_tensor *fresh[PEAT_MAX_IO]; /* the candidate's outputs in a fresh process */
    double fresh_norm;               /* their largest error over the bound */
    int group;                       /* calls of one shape share a group */
} seq_ref;

typedef struct seq_run {
    peat_campaign *c;
    peat_isolate_worker *w; /* isolated: one worker keeping the kernel's state; NULL in-process */
    seq_ref ref[SEQ_REFS_MAX];
    int n_ref;
    peat_tensor *prev[PEAT_MAX_IO]; /* the last call's outputs */
    int64_t calls, stateful, varied;
    int nondet; /* the same call twice in fresh processes disagreed: no output is compared */
    char first[256];
    const char *kind;
    char ran[256]; /* "kind calls, ..." */
    uint64_t rng;
} seq_run;

/* ---- judging one output against the fresh call's ---- */

/* Element e's error over its bound: Inf for a non-finite value where the exact one is finite, 0
 * where both are non-finite. */
static double over_bound(float x, double e, double mag, int64_t depth)
{
    if (!isfinite(x)) return isfinite(e) ? INFINITY : 0.0;
    double d = fabs((double)x - e), b = peat_analyzer_bound(mag, depth);
    return b > 0 ? d / b : d > 0 ? INFINITY : 0.0;
}

/* The largest error over the bound of outputs t of record r (*all), and (with fresh, the same
 * call's outputs in a fresh process) the largest where fresh's element is within the bound
 * (*fresh_ok), and how many of those differ from fresh's (*differ_ok): a sequence call that
 * differs only where the fresh call is already wrong (an unwritten edge holding whatever its
 * buffer held) shows the fresh call's defect, not a new one. */
static peat_status out_norm(const peat_record *r, peat_tensor *const *t, peat_tensor *const *fresh,
                            double *all, double *fresh_ok, int64_t *differ_ok)
{
    peat_args in = peat_record_args(r);
    int64_t depth = peat_op_info_get(r->op)->depth(&r->p);
    *all = *fresh_ok = 0.0;
    *differ_ok = 0;
    for (int o = 0; o < r->n_out; o++) {
        int64_t n = peat_tensor_numel(r->exact[o]);
        double *mag = malloc((size_t)(n > 0 ? n : 1) * sizeof *mag);
        if (!mag) return PEAT_ERROR(PEAT_ERR_NOMEM, "magnitudes");
        peat_status st = peat_golden_magnitude(&in, o, r->exact[o], mag);
        const double *e = r->exact[o]->data;
        const float *x = t[o]->data, *f = fresh ? fresh[o]->data : NULL;
        for (int64_t i = 0; st == PEAT_OK && i < n; i++) {
            double q = over_bound(x[i], e[i], mag[i], depth);
            if (q > *all) *all = q;
            if (!f || over_bound(f[i], e[i], mag[i], depth) > 1.0) continue;
            if (q > *fresh_ok) *fresh_ok = q;
            *differ_ok += memcmp(&x[i], &f[i], sizeof x[i]) != 0;
        }
        free(mag);
        PEAT_TRY(st);
    }
    return PEAT_OK;
}

static int same_outputs(const seq_ref *ref, peat_tensor *const *t)
{
    for (int o = 0; o < ref->r->n_out; o++)
        if (memcmp(ref->fresh[o]->data, t[o]->data, peat_tensor_nbytes(t[o])) != 0) return 0;
    return 1;
}

static peat_status fresh_call(seq_run *S, const seq_ref *ref, peat_tensor **out);

/* Whether fresh processes reproduce ref's fresh outputs: SEQ_CONFIRM more fresh calls, all
 * bit-identical to the first. A kernel whose fresh calls disagree (an upset drawn per call, a
 * race) is nondeterministic: what a sequence call shows of it is no state. */
#define SEQ_CONFIRM     3
#define SEQ_CONFIRM_MAX 4 /* stateful readings confirmed so (the rest follow the first ones) */
static peat_status fresh_reproduces(seq_run *S, const seq_ref *ref, int *same)
{
    *same = 1;
    /* in one process a "fresh" call is only another call: the kernel's state answers it too */
    if (!(S->c->o->isolate && peat_backend_can_fork(S->c->k->backend))) return PEAT_OK;
    for (int k = 0; k < SEQ_CONFIRM && *same; k++) {
        peat_tensor *again[PEAT_MAX_IO] = {NULL};
        peat_status st = fresh_call(S, ref, again);
        if (st == PEAT_OK) *same = same_outputs(ref, again);
        for (int o = 0; o < PEAT_MAX_IO; o++) peat_tensor_free(again[o]);
        if (st == PEAT_ERR_KERNEL)
            *same = 0;
        else
            PEAT_TRY(st);
    }
    return PEAT_OK;
}

/* A sequence call's outputs t against the fresh call's: identical, inside the bound (another
 * order: counted, and fed to the repeat statistics), or stateful (the first one described), once
 * fresh processes are seen to reproduce their own answer. */
static peat_status judge(seq_run *S, const seq_ref *ref, peat_tensor *const *t, const char *how)
{
    S->calls++;
    if (S->nondet || same_outputs(ref, t)) return PEAT_OK;
    double all, norm;
    int64_t differ;
    PEAT_TRY(out_norm(ref->r, t, ref->fresh, &all, &norm, &differ));
    if (differ == 0) return PEAT_OK; /* only where the fresh call is wrong too: its finding */
    if (!(norm > 1.0 && norm > SEQ_STATE_FACTOR * ref->fresh_norm)) {
        S->varied++;
        for (int o = 0; o < ref->r->n_out; o++)
            peat_analyzer_acc_add_repeat(S->c->acc_cand, ref->fresh[o], t[o]);
        return PEAT_OK;
    }
    if (S->stateful < SEQ_CONFIRM_MAX) {
        int same;
        PEAT_TRY(fresh_reproduces(S, ref, &same));
        if (!same) { /* nondeterministic after all: no state can be read from its calls */
            S->nondet = 1, S->stateful = 0, S->first[0] = 0;
            return PEAT_OK;
        }
    }
    if (S->stateful++ == 0)
        snprintf(S->first, sizeof S->first,
                 "%s, call %lld (record %llu%s): max error %.3g x the bound, the same call in a "
                 "fresh process %.3g",
                 S->kind, (long long)S->calls, (unsigned long long)ref->r->id, how, norm,
                 ref->fresh_norm);
    return PEAT_OK;
}

/* ---- running one call ---- */

typedef enum { FILL_SENTINEL, FILL_NAN, FILL_PREV, FILL_GOLDEN, FILL_RANDOM } seq_fill;

/* Output o's buffer pre-filled as asked (the sentinel the guards put there is the default). */
static void prefill(seq_run *S, peat_args *a, seq_fill fill, const peat_tensor *golden_of)
{
    for (int o = 0; o < a->n_out; o++) {
        float *d = a->out[o]->data;
        int64_t n = peat_tensor_numel(a->out[o]);
        const peat_tensor *src = fill == FILL_PREV     ? S->prev[o]
                                 : fill == FILL_GOLDEN ? golden_of
                                                       : NULL;
        for (int64_t x = 0; x < n && fill != FILL_SENTINEL; x++) {
            if (fill == FILL_NAN)
                d[x] = NAN;
            else if (src && peat_tensor_numel(src) == n)
                d[x] = ((const float *)src->data)[x];
            else
                d[x] = (float)((int64_t)(peat_splitmix64(&S->rng) >> 40) - (1 << 23)) * 0x1p-20f;
        }
    }
}

/* The candidate on ref's call, its outputs pre-filled as asked, the kernel's state kept from the
 * calls before; judged against ref's fresh outputs. A call that does not complete is counted
 * stateful (a kernel that crashes or hangs only after the calls before it) and ends the
 * sequences (PEAT_ERR_KERNEL). */
static peat_status seq_call(seq_run *S, seq_ref *ref, seq_fill fill, const peat_tensor *golden_of,
                            const char *how)
{
    const peat_record *r = ref->r;
    peat_args a = peat_record_args(r);
    PEAT_TRY(peat_isolate_outputs_alloc(&a, r->golden, r->n_out));
    prefill(S, &a, fill, golden_of);
    peat_call_outcome oc = PEAT_CALL_FAILED;
    char why[256] = "";
    const peat_campaign_opts *o = S->c->o;
    peat_status st =
        S->w ? peat_isolate_worker_call(S->w, &a, o->kernel_timeout_s, &oc, why, sizeof why)
             : peat_isolate_call(S->c->k, &a, 0, o->kernel_timeout_s, &oc, why, sizeof why);
    if (st == PEAT_OK && oc != PEAT_CALL_DONE) {
        S->calls++;
        if (S->stateful++ == 0)
            snprintf(S->first, sizeof S->first, "%s, call %lld: %.150s", S->kind,
                     (long long)S->calls, why);
        st = PEAT_ERR_KERNEL; /* no more sequences: each further hang would cost a --timeout */
    } else if (st == PEAT_OK) {
        st = judge(S, ref, a.out, how);
    }
    for (int k = 0; st == PEAT_OK && k < r->n_out; k++) {
        peat_tensor_free(S->prev[k]);
        S->prev[k] = NULL;
        st = peat_tensor_clone(a.out[k], &S->prev[k]);
    }
    peat_isolate_outputs_free(&a);
    return st;
}

/* ---- the references: a few recorded calls and their fresh outputs ---- */

static int same_shape(const peat_record *x, const peat_record *y)
{
    if (memcmp(&x->p, &y->p, sizeof x->p) || x->n_in != y->n_in) return 0;
    for (int k = 0; k < x->n_in; k++)
        if (x->in[k]->ndim != y->in[k]->ndim ||
            memcmp(x->in[k]->shape, y->in[k]->shape, sizeof x->in[k]->shape))
            return 0;
    return 1;
}

/* Up to SEQ_REFS_MAX records, two of each shape where the flow has two (a shape's calls then
 * share buffers with new data), smallest outputs first (the long sequence runs on them). */
static void refs_pick(seq_run *S)
{
    const peat_record_list *l = &S->c->recs;
    int64_t *order = malloc((size_t)(l->n > 0 ? l->n : 1) * sizeof *order);
    if (!order) return;
    for (int64_t i = 0; i < l->n; i++) order[i] = i;
    for (int64_t i = 1; i < l->n; i++) /* by output size, record order kept among equals */
        for (int64_t j = i; j > 0 && peat_tensor_numel(l->items[order[j - 1]]->golden[0]) >
                                         peat_tensor_numel(l->items[order[j]]->golden[0]);
             j--) {
            int64_t t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    int groups = 0;
    for (int64_t i = 0; i < l->n && S->n_ref < SEQ_REFS_MAX; i++) {
        peat_record *r = l->items[order[i]];
        int g = -1, in_group = 0;
        for (int k = 0; k < S->n_ref; k++)
            if (same_shape(S->ref[k].r, r)) g = S->ref[k].group, in_group++;
        if (in_group >= 2) continue;
        S->ref[S->n_ref].r = r;
        S->ref[S->n_ref++].group = g >= 0 ? g : groups++;
    }
    free(order);
}

/* The candidate's outputs of ref's call in a fresh process (the playback's isolation: no state
 * carried) into out. PEAT_ERR_KERNEL when it does not complete: playback reports such a kernel. */
static peat_status fresh_call(seq_run *S, const seq_ref *ref, peat_tensor **out)
{
    int isolate = S->c->o->isolate && peat_backend_can_fork(S->c->k->backend);
    peat_args a = peat_record_args(ref->r);
    PEAT_TRY(peat_isolate_outputs_alloc(&a, ref->r->golden, ref->r->n_out));
    peat_call_outcome oc;
    char why[256];
    peat_status st =
        peat_isolate_call(S->c->k, &a, isolate, S->c->o->kernel_timeout_s, &oc, why, sizeof why);
    for (int o = 0; st == PEAT_OK && oc == PEAT_CALL_DONE && o < ref->r->n_out; o++)
        st = peat_tensor_clone(a.out[o], &out[o]);
    peat_isolate_outputs_free(&a);
    PEAT_TRY(st);
    return oc == PEAT_CALL_DONE ? PEAT_OK : PEAT_ERR_KERNEL;
}

/* A call's exact outputs and the candidate's from a fresh process, twice: a kernel whose fresh
 * calls disagree with each other (a race, a clock-driven upset) is nondeterministic, and its
 * sequence calls' differences say nothing about state (S->nondet). */
static peat_status fresh_of(seq_run *S, seq_ref *ref)
{
    PEAT_TRY(peat_record_compute_exact(ref->r));
    PEAT_TRY(fresh_call(S, ref, ref->fresh));
    peat_tensor *again[PEAT_MAX_IO] = {NULL};
    peat_status st = fresh_call(S, ref, again);
    if (st == PEAT_OK && !same_outputs(ref, again)) S->nondet = 1;
    for (int o = 0; o < PEAT_MAX_IO; o++) peat_tensor_free(again[o]);
    PEAT_TRY(st);
    double unused;
    int64_t none;
    return out_norm(ref->r, ref->fresh, NULL, &ref->fresh_norm, &unused, &none);
}

static void ref_free(seq_ref *ref)
{
    for (int o = 0; o < PEAT_MAX_IO; o++) peat_tensor_free(ref->fresh[o]);
    memset(ref->fresh, 0, sizeof ref->fresh);
}

/* ---- the sequences ---- */

static void ran_add(seq_run *S, const char *kind, int64_t calls)
{
    size_t n = strlen(S->ran);
    snprintf(S->ran + n, sizeof S->ran - n, "%s%s %lld", n ? ", " : "", kind, (long long)calls);
}

/* A sequence: its kind set for the evidence, the calls it made added to the coverage line. */
#define SEQ(S, name, body)                                                                         \
    do {                                                                                           \
        int64_t c0_ = (S)->calls;                                                                  \
        (S)->kind = name;                                                                          \
        body;                                                                                      \
        ran_add(S, name, (S)->calls - c0_);                                                        \
    } while (0)

/* The calls of each shape in turn on the same buffers, their data new each call. */
static peat_status seq_same_buffers(seq_run *S)
{
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < S->n_ref; i++) {
            int mates = 0;
            for (int k = 0; k < S->n_ref; k++) mates += S->ref[k].group == S->ref[i].group;
            if (mates > 1) PEAT_TRY(seq_call(S, &S->ref[i], FILL_SENTINEL, NULL, ""));
        }
    return PEAT_OK;
}

/* One call's data in other buffers (another layout of the worker's shared file). */
static peat_status seq_new_buffers(seq_run *S)
{
    for (int shift = 1; shift <= 3; shift++) {
        if (S->w) peat_isolate_worker_shift(S->w, shift);
        peat_status st = seq_call(S, &S->ref[0], FILL_SENTINEL, NULL, ", other buffers");
        if (S->w) peat_isolate_worker_shift(S->w, 0);
        PEAT_TRY(st);
    }
    return PEAT_OK;
}

static peat_status seq_repeats(seq_run *S)
{
    for (int k = 0; k < 4; k++)
        PEAT_TRY(seq_call(S, &S->ref[0], FILL_SENTINEL, NULL, ", repeated"));
    return PEAT_OK;
}

/* The output buffers holding NaN, the previous call's outputs, another call's golden outputs, a
 * random pattern: a kernel that reads them (accumulates into them) answers differently. */
static peat_status seq_prefilled(seq_run *S)
{
    int j = S->n_ref > 1 && S->ref[1].group == S->ref[0].group ? 1 : 0;
    const peat_tensor *other_golden = S->ref[j].r->golden[0];
    PEAT_TRY(seq_call(S, &S->ref[0], FILL_NAN, NULL, ", outputs pre-filled with NaN"));
    PEAT_TRY(seq_call(S, &S->ref[j], FILL_SENTINEL, NULL, ""));
    PEAT_TRY(seq_call(S, &S->ref[0], FILL_PREV, NULL, ", outputs holding the previous call's"));
    PEAT_TRY(seq_call(S, &S->ref[0], FILL_GOLDEN, other_golden,
                      ", outputs holding another call's golden outputs"));
    return seq_call(S, &S->ref[0], FILL_RANDOM, NULL, ", outputs pre-filled with a random pattern");
}

static peat_status seq_order(seq_run *S, int shuffled)
{
    int idx[SEQ_REFS_MAX];
    for (int i = 0; i < S->n_ref; i++) idx[i] = i;
    for (int pass = 0; pass < (shuffled ? 2 : 1); pass++) {
        for (int i = S->n_ref - 1; shuffled && i > 0; i--) {
            int k = (int)(peat_splitmix64(&S->rng) % (uint64_t)(i + 1)), t = idx[i];
            idx[i] = idx[k], idx[k] = t;
        }
        for (int i = 0; i < S->n_ref; i++)
            PEAT_TRY(seq_call(S, &S->ref[idx[i]], FILL_SENTINEL, NULL, ""));
    }
    return PEAT_OK;
}

/* A call whose inputs differ from the one before in a few elements: a cache keyed by a cheap hash
 * of the inputs (a few sampled elements) answers with the earlier call's outputs. */
static peat_status seq_sparse(seq_run *S)
{
    peat_record *r0 = S->ref[0].r, *t = calloc(1, sizeof *t);
    if (!t) return PEAT_ERROR(PEAT_ERR_NOMEM, "changed call");
    *t = *r0; /* its params, golden outputs (shapes) and provenance; inputs and exact its own */
    memset(t->exact, 0, sizeof t->exact);
    peat_status st = PEAT_OK;
    for (int k = 0; k < r0->n_in; k++) {
        t->in[k] = NULL;
        if (st == PEAT_OK) st = peat_tensor_clone(r0->in[k], &t->in[k]);
        if (st != PEAT_OK || t->in[k]->dtype != PEAT_DTYPE_F32) continue;
        float *x = t->in[k]->data;
        int64_t n = peat_tensor_numel(t->in[k]);
        for (int j = 0; j < SEQ_SPARSE && n > 0; j++) {
            int64_t at = (int64_t)(peat_splitmix64(&S->rng) % (uint64_t)n);
            x[at] += (1.0f + fabsf(x[at])) * 8.0f;
        }
    }
    seq_ref ch = {.r = t, .group = -1};
    if (st == PEAT_OK) st = fresh_of(S, &ch);
    int skip = st == PEAT_ERR_KERNEL; /* the changed call fails fresh too: nothing to compare */
    if (skip) st = PEAT_OK;
    if (st == PEAT_OK && !skip) st = seq_call(S, &S->ref[0], FILL_SENTINEL, NULL, "");
    if (st == PEAT_OK && !skip)
        st = seq_call(S, &ch, FILL_SENTINEL, NULL, ", a few input elements changed");
    ref_free(&ch);
    for (int k = 0; k < t->n_in; k++) peat_tensor_free(t->in[k]);
    for (int o = 0; o < t->n_out; o++) peat_tensor_free(t->exact[o]);
    free(t);
    return st;
}

/* SEQ_LONG calls, the smallest shape's calls in turn (new data in the same buffers each call): a
 * switch after N calls or a warm-up is reached here. */
static peat_status seq_long(seq_run *S, int64_t n)
{
    int mates[SEQ_REFS_MAX], m = 0;
    for (int i = 0; i < S->n_ref; i++)
        if (S->ref[i].group == S->ref[0].group) mates[m++] = i;
    for (int64_t k = 0; k < n && !S->stateful; k++)
        PEAT_TRY(seq_call(S, &S->ref[mates[k % m]], FILL_SENTINEL, NULL, ", late in a long run"));
    return PEAT_OK;
}

static peat_status sequences_run(seq_run *S)
{
    peat_status st = PEAT_OK;
    SEQ(S, "training-order", st = seq_order(S, 0));
    if (st == PEAT_OK) SEQ(S, "same-buffers", st = seq_same_buffers(S));
    if (st == PEAT_OK) SEQ(S, "new-buffers", st = seq_new_buffers(S));
    if (st == PEAT_OK) SEQ(S, "repeats", st = seq_repeats(S));
    if (st == PEAT_OK) SEQ(S, "prefilled-outputs", st = seq_prefilled(S));
    if (st == PEAT_OK) SEQ(S, "shuffled", st = seq_order(S, 1));
    if (st == PEAT_OK) SEQ(S, "few-elements-changed", st = seq_sparse(S));
    if (st == PEAT_OK) SEQ(S, "long", st = seq_long(S, SEQ_LONG));
    return st;
}

/* Whether the stage runs, and why not. */
static const char *skip_reason(const peat_campaign *c)
{
    if (c->o->no_sequences) return "--no-sequences";
    if (c->res->n_kernel_failures > 0 || c->res->n_oob_writes > 0 || c->res->n_input_mutations > 0)
        return "the kernel failed or wrote where it must not on a recorded call";
    if (c->recs.n == 0) return "no recorded calls";
    return NULL;
}

peat_status peat_campaign_stage_sequence(peat_campaign *c)
{
    PEAT_ASSERT(c->acc_cand, "sequence runs after playback (stage order: harness/run/pipeline.c)");
    const char *why = skip_reason(c);
    if (why) {
        peat_campaign_skip(c, "sequence", why);
        return PEAT_OK;
    }
    seq_run *S = calloc(1, sizeof *S);
    if (!S) return PEAT_ERROR(PEAT_ERR_NOMEM, "call sequences");
    S->c = c;
    S->rng = peat_seed_derive(c->o->seed, "sequences");
    refs_pick(S);
    int isolate = c->o->isolate && peat_backend_can_fork(c->k->backend);
    peat_status st = isolate ? peat_isolate_worker_create(c->k, 1, &S->w) : PEAT_OK;
    for (int i = 0; st == PEAT_OK && i < S->n_ref; i++) st = fresh_of(S, &S->ref[i]);
    if (st == PEAT_OK && S->n_ref > 0) st = sequences_run(S);
    if (st == PEAT_ERR_KERNEL) st = PEAT_OK; /* a fresh call failed: playback counted it */
    c->res->n_sequence_calls = S->calls;
    c->res->n_stateful = S->stateful;
    snprintf(c->res->stateful, sizeof c->res->stateful, "%s", S->first);
    snprintf(c->res->sequences, sizeof c->res->sequences, "%s%s", S->ran,
             S->nondet ? " (outputs not compared: the same call differs between fresh processes)"
                       : "");
    peat_isolate_worker_free(S->w);
    for (int i = 0; i < S->n_ref; i++) ref_free(&S->ref[i]);
    for (int o = 0; o < PEAT_MAX_IO; o++) peat_tensor_free(S->prev[o]);
    free(S);
    return st;
}
