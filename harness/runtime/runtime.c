/* runtime.c: runtime fault injection: the golden run, the band reruns and the faulty runs train
 * in lockstep; curves, band, verdicts, and what goes into the campaign file. */
#include "core/test_hooks.h"
#include "peat/backend.h"
#include "harness/runtime/runtime.h"

#include "core/clock.h"
#include "core/iter_spec.h"
#include "harness/runtime/golden_log.h"
#include "harness/runtime/builtin.h"
#include "harness/runtime/call.h"
#include "harness/scale/ranks.h"
#include "inject/inject.h"
#include "predictor/predictor.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Band reruns: honest orders shipped kernels use (inject's `reorder`; other ops: the exact result
 * rounded to fp32), in the order a larger band adds them (docs/detector.md, "The band's reorder
 * GEMMs"): GEMM's forward loop (naive kernels, framework fallbacks: the plain golden's order), a
 * serial split-K through the golden's library (chunks accumulated into the output), a blocked
 * pairwise sum of library GEMMs (a split-K reduced as a tree), then the per-element pairwise
 * tree and the reversed loop. */
static const char *const band_specs[PEAT_RUNTIME_MAX_BAND - 1] = {
    "reorder(order=forward)", "reorder(order=blas_split,split=4)",
    "reorder(order=blas_pairwise,block=16)", "reorder(order=pairwise)", "reorder(order=reverse)"};

/* One training run of the lockstep. */
typedef struct member {
    peat_exec_t *ex;
    peat_flow_t *f;
    peat_inject_model_t *m;
    peat_inject_swap sw;
    peat_runtime_run *run;
    double *tdist;           /* per iteration x weight tensor distances (not for the golden run) */
    peat_runtime_call *call; /* how the candidate is called (faulty runs of a kernel) */
    int local;               /* trained by this rank (always, without ranks) */
    /* the golden run from the profile's log (f and ex are the log's): its iterations replayed,
     * trained on past them; the iteration whose weights f holds (-1: the log's last) */
    const peat_runtime_golden_log *log;
    int64_t loaded;
} member;

typedef struct lockstep {
    const peat_runtime_opts *o;
    peat_runtime_result *res;
    member mem[PEAT_RUNTIME_MAX_BAND + PEAT_RUNTIME_MAX_FREQS];
    int n;
    int n_w;                   /* weight tensors (the first n_w state tensors) */
    int *w_idx;                /* their state indices */
    float *gbuf;               /* a replayed golden iteration's weights (measure) */
    const float **gw;          /* the golden weights measure compares with, tensor by tensor */
    int64_t iters, cap, every; /* iterations to train (steering moves it), room for, eval step */
    int ranks;                 /* o->n_ranks > 1: the members are split across MPI ranks */
    int merge;                 /* `peat merge` of run shards: every run comes from a shard */
    peat_scale_pack ck; /* with ranks: this rank's checkpoints, written (rank 0) at the end */
} lockstep;

/* The band's orders on this machine: band_specs in their order, but an order that gives the
 * golden GEMM's own sums moved to the end of the list. Which orders those are depends on the
 * golden: OpenBLAS picks its kernel by CPU, and a generic one (a CPU model it does not know) adds
 * in the forward order, as the plain golden (PEAT_BLAS=0) does; a band member in that order would
 * repeat the golden run and leave the band one run short of the R its false-alarm rate is stated
 * for. An order counts as the golden's when, on random normal inputs, fewer than a quarter of the
 * outputs differ in more than half of the probe shapes below; a different order changes most
 * outputs' last bits (0.5 to 0.9 of them, docs/detector.md). */
static const char *band_order[PEAT_RUNTIME_MAX_BAND - 1];
static pthread_once_t band_once = PTHREAD_ONCE_INIT;

static const int64_t band_probe[][3] = {{16, 16, 64},  {64, 32, 32},  {96, 64, 32},
                                        {128, 10, 64}, {32, 64, 256}, {33, 17, 48}};
enum { BAND_PROBES = sizeof band_probe / sizeof band_probe[0] };

/* diff[i] += 1 for each probe shape on which order i's outputs differ from the golden's in a
 * quarter or more; 0 when a probe could not run (diff untouched for the rest). Each shape's
 * golden result is computed once and compared with every order's. */
static int band_probe_run(const peat_kernel *golden, peat_inject_model_t *const *m, int n,
                          int *diff)
{
    int ran = 1;
    for (int s = 0; s < BAND_PROBES && ran; s++) {
        int64_t M = band_probe[s][0], N = band_probe[s][1], K = band_probe[s][2];
        peat_tensor *A = NULL, *B = NULL, *G = NULL, *R = NULL;
        peat_args a;
        memset(&a, 0, sizeof a);
        a.op = PEAT_OP_GEMM, a.n_in = 2, a.n_out = 1;
        a.p.i[2] = M, a.p.i[3] = N, a.p.i[4] = K, a.p.i[5] = 1, a.p.f[0] = 1.0;
        ran = !peat_tensor_alloc2(PEAT_DTYPE_F32, M, K, &A) &&
              !peat_tensor_alloc2(PEAT_DTYPE_F32, K, N, &B) &&
              !peat_tensor_alloc2(PEAT_DTYPE_F32, M, N, &G) &&
              !peat_tensor_alloc2(PEAT_DTYPE_F32, M, N, &R);
        if (ran) {
            peat_rng_t *rng = peat_rng_new((uint64_t)s + 1);
            peat_rng_fill_gaussian(rng, A, 1.0);
            peat_rng_fill_gaussian(rng, B, 1.0);
            peat_rng_free(rng);
            a.in[0] = A, a.in[1] = B, a.out[0] = G;
            ran = peat_kernel_run(golden, &a) == PEAT_OK;
            a.out[0] = R;
        }
        for (int i = 0; i < n && ran; i++) {
            ran = peat_inject_run(m[i], golden, &a, 1) == PEAT_OK;
            int64_t differ = 0;
            for (int64_t e = 0; ran && e < M * N; e++) differ += peat_f32(G)[e] != peat_f32(R)[e];
            diff[i] += ran && 4 * differ >= M * N;
        }
        peat_tensor_free(A), peat_tensor_free(B), peat_tensor_free(G), peat_tensor_free(R);
    }
    return ran;
}

void peat_runtime_band_order(const peat_kernel *golden, const char **out)
{
    enum { N = PEAT_RUNTIME_MAX_BAND - 1 };
    peat_inject_model_t *m[N] = {0};
    int diff[N] = {0}, same[N] = {0}, parsed = 1, n = 0;
    for (int i = 0; i < N && parsed; i++)
        parsed = peat_inject_model_parse(band_specs[i], &m[i]) == PEAT_OK;
    /* no golden or a probe that could not run: the listed order */
    if (golden && parsed && band_probe_run(golden, m, N, diff))
        for (int i = 0; i < N; i++) same[i] = 2 * diff[i] < BAND_PROBES;
    for (int i = 0; i < N; i++) peat_inject_model_free(m[i]);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < N; i++)
            if (same[i] == pass) out[n++] = band_specs[i];
}

static void band_order_init(void)
{
    const peat_kernel *golden = NULL;
    if (peat_runtime_builtin_init() == PEAT_OK)
        golden = peat_registry_find_on("gemm_golden", PEAT_BACKEND_HOST);
    peat_runtime_band_order(golden, band_order);
}

const char *peat_runtime_band_listed(int r)
{
    return r >= 1 && r < PEAT_RUNTIME_MAX_BAND ? band_specs[r - 1] : NULL;
}

const char *peat_runtime_band_spec(int r)
{
    if (r < 1 || r >= PEAT_RUNTIME_MAX_BAND) return NULL;
    pthread_once(&band_once, band_order_init);
    return band_order[r - 1];
}

static peat_status run_alloc(peat_runtime_run *r, int64_t n, int64_t ne, const char *label)
{
    snprintf(r->label, sizeof r->label, "%s", label);
    r->loss = calloc((size_t)n + 1, sizeof *r->loss);
    r->wdist = calloc((size_t)n + 1, sizeof *r->wdist);
    r->nonfinite = calloc((size_t)n + 1, sizeof *r->nonfinite);
    r->eval_acc = calloc((size_t)ne + 1, sizeof *r->eval_acc);
    r->first_nonfinite = -1;
    r->ended_iter = -1;
    if (!r->loss || !r->wdist || !r->nonfinite || !r->eval_acc)
        return PEAT_ERROR(PEAT_ERR_NOMEM, "runtime curves of %lld iterations", (long long)n);
    return PEAT_OK;
}

static void run_free(peat_runtime_run *r)
{
    free(r->loss);
    free(r->wdist);
    free(r->nonfinite);
    free(r->eval_acc);
    memset(r, 0, sizeof *r);
}

void peat_runtime_result_free(peat_runtime_result *res)
{
    for (int i = 0; i < PEAT_RUNTIME_MAX_BAND; i++) run_free(&res->band[i]);
    for (int i = 0; i < PEAT_RUNTIME_MAX_FREQS; i++) run_free(&res->faulty[i]);
    free(res->eval_iter);
    peat_detector_band_free(&res->b);
    memset(res, 0, sizeof *res);
}

/* A member: its own exec and flow (same seed: same init and batches), its swap if any. */
static peat_status member_setup(lockstep *L, member *m, const char *spec, const peat_freq *freq)
{
    const peat_runtime_opts *o = L->o;
    m->loaded = -1;
    int64_t logged = peat_runtime_golden_log_iters(o->golden);
    if (!spec && !freq && logged > 0 &&
        (peat_runtime_golden_log_trains_on(o->golden) || L->cap <= logged)) {
        /* the golden run: the profile's, replayed (a restored log only as far as it goes) */
        m->log = o->golden;
        m->ex = peat_runtime_golden_log_exec(o->golden);
        m->f = peat_runtime_golden_log_flow(o->golden);
        return PEAT_OK;
    }
    PEAT_TRY(peat_exec_alloc(o->flow, o->cfg.seed, &m->ex));
    PEAT_TRY(peat_models_flow_alloc(o->flow, &o->cfg, m->ex, &m->f));
    if (!spec && !freq) return PEAT_OK; /* the golden run */
    peat_exec_swap s;
    memset(&s, 0, sizeof s);
    s.op = o->op;
    s.every = 1;
    if (freq) { /* a faulty run: the window, layers and phases of the options */
        s.every = freq->every, s.prob = freq->prob;
        s.seed = peat_seed_derive(o->cfg.seed, freq->label);
        s.iter_lo = o->iter_lo, s.iter_hi = o->iter_hi;
        s.phases = o->phases;
        s.layers = o->layers;
    }
    if (freq && o->candidate) {
        PEAT_TRY(peat_runtime_call_setup(o->candidate, o->isolate, o->kernel_timeout_s, &o->shadow,
                                         &s, &m->call));
    } else {
        PEAT_TRY(peat_inject_model_parse(spec, &m->m));
        m->sw.m = m->m;
        m->sw.seed = o->model_seed;
        if (freq) m->sw.kernel = o->model_kernel; /* band reruns reorder the golden */
        s.fn = peat_inject_swap_run;
        s.user = &m->sw;
    }
    return peat_exec_set_swap(m->ex, &s);
}

/* Weight tensors: the state entries that are not optimizer slots. */
static peat_status weights_find(lockstep *L)
{
    peat_flow_t *f = L->mem[0].f;
    int n = peat_models_flow_state_count(f);
    L->w_idx = malloc((size_t)n * sizeof *L->w_idx);
    if (!L->w_idx) return PEAT_ERROR(PEAT_ERR_NOMEM, "weight list");
    for (int i = 0; i < n; i++) {
        const char *name;
        peat_models_flow_state(f, i, &name);
        if (peat_runtime_golden_log_is_weight(name)) L->w_idx[L->n_w++] = i;
    }
    L->gw = malloc((size_t)(L->n_w > 0 ? L->n_w : 1) * sizeof *L->gw);
    if (!L->gw) return PEAT_ERROR(PEAT_ERR_NOMEM, "weight list");
    if (L->mem[0].log) {
        L->gbuf =
            malloc((size_t)peat_runtime_golden_log_numel(L->mem[0].log) * sizeof *L->gbuf + 1);
        if (!L->gbuf) return PEAT_ERROR(PEAT_ERR_NOMEM, "the golden run's weights");
    }
    return PEAT_OK;
}

/* The iterations to train, and the evaluations that go with them: every L->every-th and the
 * last; those already past keep their place (a new total is never below done + 1). */
static void iters_set(lockstep *L, int64_t iters)
{
    peat_runtime_result *res = L->res;
    L->iters = res->n = iters;
    res->n_eval = 0;
    for (int i = 0; i < L->n; i++) peat_runtime_call_last_iter(L->mem[i].call, iters - 1);
    for (int64_t t = 0; t < iters; t++)
        if ((t + 1) % L->every == 0 || t == iters - 1) res->eval_iter[res->n_eval++] = t;
}

static peat_status lockstep_setup(lockstep *L)
{
    const peat_runtime_opts *o = L->o;
    peat_runtime_result *res = L->res;
    int R = o->band_runs > 0 ? o->band_runs : PEAT_RUNTIME_DEFAULT_BAND;
    if (R < 2 || R > PEAT_RUNTIME_MAX_BAND)
        return PEAT_ERROR(PEAT_ERR_INVAL, "runtime band: %d runs (2..%d)", R,
                          PEAT_RUNTIME_MAX_BAND);
    if (!o->candidate && !o->model)
        return PEAT_ERROR(PEAT_ERR_INVAL, "runtime: neither a candidate kernel nor a model");
    if (o->freqs.n < 1 || o->freqs.n > PEAT_RUNTIME_MAX_FREQS)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "runtime: %d frequencies (1..%d; peat_freq_schedule_parse)", o->freqs.n,
                          PEAT_RUNTIME_MAX_FREQS);
    L->every = o->eval_every > 0 ? o->eval_every : peat_predictor_runtime_eval_every(o->iters);
    L->cap = o->steer && o->max_iters > o->iters ? o->max_iters : o->iters;
    res->eval_iter = malloc((size_t)(L->cap / L->every + 2) * sizeof *res->eval_iter);
    if (!res->eval_iter) return PEAT_ERROR(PEAT_ERR_NOMEM, "eval list");
    iters_set(L, o->iters);
    int64_t cap_eval = L->cap / L->every + 1;
    L->ranks = o->n_ranks > 1;
    if (L->ranks && o->steer)
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED,
                          "runtime FI steered by a budget does not split across MPI ranks");
    for (int r = 0; r < R; r++, res->n_band++) {
        member *m = &L->mem[L->n];
        m->local = !L->n || peat_scale_ranks_owner(L->n, o->n_ranks) == o->rank;
        if (r && o->band_in) m->local = 0; /* the golden cache's */
        L->n++;
        m->run = &res->band[r];
        PEAT_TRY(run_alloc(m->run, L->cap, cap_eval, r ? peat_runtime_band_spec(r) : "golden"));
        if (m->local) PEAT_TRY(member_setup(L, m, r ? peat_runtime_band_spec(r) : NULL, NULL));
    }
    for (int q = 0; q < o->freqs.n; q++) {
        const peat_freq *t = &o->freqs.f[q];
        member *m = &L->mem[L->n];
        m->local = peat_scale_ranks_owner(L->n, o->n_ranks) == o->rank;
        L->n++;
        m->run = &res->faulty[res->n_faulty++];
        char label[64];
        snprintf(label, sizeof label, "%.40s @ %.20s", o->candidate ? o->candidate->name : o->model,
                 t->label);
        PEAT_TRY(run_alloc(m->run, L->cap, cap_eval, label));
        snprintf(m->run->freq, sizeof m->run->freq, "%.31s", t->label);
        if (m->local) PEAT_TRY(member_setup(L, m, o->model, t));
    }
    PEAT_TRY(weights_find(L));
    iters_set(L, L->iters); /* the candidates' calls now exist: their last iteration */
    for (int i = 1; i < L->n; i++) {
        /* rank 0 receives the other ranks' distances; those ranks keep only their own */
        if (!L->mem[i].local && o->rank != 0 && !L->merge) continue;
        L->mem[i].tdist = calloc((size_t)(L->cap * L->n_w) + 1, sizeof(double));
        if (!L->mem[i].tdist) return PEAT_ERROR(PEAT_ERR_NOMEM, "weight distances");
    }
    return PEAT_OK;
}

static void lockstep_free(lockstep *L)
{
    for (int i = 0; i < L->n; i++) {
        if (!L->mem[i].log) { /* a replayed golden run's flow is the log's */
            peat_models_flow_free(L->mem[i].f);
            peat_exec_free(L->mem[i].ex);
        }
        peat_inject_model_free(L->mem[i].m);
        peat_runtime_call_free(L->mem[i].call);
        free(L->mem[i].tdist);
    }
    free(L->w_idx);
    free(L->gw);
    free(L->gbuf);
    peat_scale_pack_free(&L->ck);
}

/* ||x - y|| / ||y|| (or ||x|| when y is 0) over n floats, and the non-finite values of x. */
static double rel_l2(const float *x, const float *y, int64_t n, int64_t *nonfinite)
{
    double d = 0.0, s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) {
            (*nonfinite)++;
            continue;
        }
        double e = (double)x[i] - (double)y[i];
        d += e * e;
        s += (double)y[i] * y[i];
    }
    if (*nonfinite) return INFINITY;
    return s > 0.0 ? sqrt(d / s) : sqrt(d);
}

double peat_runtime_distance_s(peat_flow_t *f)
{
    int n = peat_models_flow_state_count(f), reps = 0;
    double spent = 0;
    volatile double sink = 0; /* the passes' results land here, so they are not elided */
    /* repeated to a millisecond at least: one pass over a small model's weights is microseconds */
    while (spent < 1e-3 && reps < 1000) {
        double a = peat_clock_thread_cpu();
        for (int i = 0; i < n; i++) {
            const char *name = NULL;
            const peat_tensor *w = peat_models_flow_state(f, i, &name);
            int64_t nf = 0;
            if (name && peat_runtime_golden_log_is_weight(name))
                sink += rel_l2(peat_f32(w), peat_f32(w), peat_tensor_numel(w), &nf);
        }
        spent += peat_clock_thread_cpu() - a;
        reps++;
    }
    (void)sink;
    return spent / reps;
}

/* After iteration t: each member's distance from the golden run, tensor by tensor (a replayed
 * golden iteration's weights read back from the log). */
static peat_status measure(lockstep *L, int64_t t)
{
    const member *g = &L->mem[0];
    int replayed = g->log && t < peat_runtime_golden_log_iters(g->log);
    if (replayed) PEAT_TRY(peat_runtime_golden_log_read(g->log, t, L->gbuf));
    int64_t off = 0;
    for (int k = 0; k < L->n_w; k++) {
        const peat_tensor *w = peat_models_flow_state(g->f, L->w_idx[k], NULL);
        L->gw[k] = replayed ? L->gbuf + off : peat_f32(w);
        off += peat_tensor_numel(w);
    }
    for (int i = 0; i < L->n; i++) {
        member *m = &L->mem[i];
        if (!m->local) continue; /* another rank's */
        double worst = 0.0;
        int64_t nf = 0;
        for (int k = 0; k < L->n_w; k++) {
            const peat_tensor *w = peat_models_flow_state(m->f, L->w_idx[k], NULL);
            int64_t nfk = 0, n = peat_tensor_numel(w);
            double d = rel_l2(i ? peat_f32(w) : L->gw[k], L->gw[k], n, &nfk);
            nf += nfk;
            if (m->tdist) m->tdist[t * L->n_w + k] = d;
            if (d > worst || isnan(d)) worst = d;
        }
        m->run->wdist[t] = worst;
        m->run->nonfinite[t] = nf;
        if ((nf || !isfinite(m->run->loss[t])) && m->run->first_nonfinite < 0)
            m->run->first_nonfinite = t;
    }
    return PEAT_OK;
}

/* A checkpoint kept in memory: iteration, member, then each tensor's name, type, shape and
 * bytes. */
static peat_status ckpt_pack(peat_scale_pack *p, int64_t t, int32_t i, int n,
                             const peat_tensor **ts, const char **names)
{
    int32_t nt = n;
    peat_scale_pack_put(p, &t, sizeof t);
    peat_scale_pack_put(p, &i, sizeof i);
    peat_scale_pack_put(p, &nt, sizeof nt);
    for (int k = 0; k < n; k++) {
        int32_t dt = (int32_t)ts[k]->dtype, nd = ts[k]->ndim;
        uint64_t nb = peat_tensor_nbytes(ts[k]);
        peat_scale_pack_put_str(p, names[k]);
        peat_scale_pack_put(p, &dt, sizeof dt);
        peat_scale_pack_put(p, &nd, sizeof nd);
        peat_scale_pack_put(p, ts[k]->shape, (size_t)nd * sizeof ts[k]->shape[0]);
        peat_scale_pack_put(p, &nb, sizeof nb);
        peat_scale_pack_put(p, ts[k]->data, (size_t)nb);
    }
    return p->err ? PEAT_ERROR(PEAT_ERR_NOMEM, "a runtime checkpoint kept for rank 0") : PEAT_OK;
}

static peat_status checkpoint(lockstep *L, member *m, int64_t t)
{
    int n = peat_models_flow_state_count(m->f);
    const peat_tensor **ts = malloc((size_t)n * sizeof *ts);
    const char **names = malloc((size_t)n * sizeof *names);
    char tag[32];
    snprintf(tag, sizeof tag, "runtime %.23s", m->run->freq);
    peat_status st = ts && names ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "checkpoint list");
    for (int i = 0; st == PEAT_OK && i < n; i++) ts[i] = peat_models_flow_state(m->f, i, &names[i]);
    if (st == PEAT_OK && L->ranks) /* kept for rank 0, which writes them all in order at the end */
        st = ckpt_pack(&L->ck, t, (int32_t)(m - L->mem), n, ts, names);
    else if (st == PEAT_OK && !peat_store_state_has(L->o->store, t, tag))
        st = peat_store_state_write(L->o->store, t, tag, n, ts, names);
    free(ts);
    free(names);
    return st;
}

/* The members train on up to `threads` threads, in lockstep: every iteration all step (in
 * parallel), then one thread measures distances and writes checkpoints, then evaluations run (in
 * parallel). Each member's own computation stays sequential, so the results do not depend on the
 * thread count. */
typedef struct lock_shared {
    pthread_barrier_t bar;
    pthread_mutex_t mu;
    pthread_cond_t go;
    int open; /* the barrier is set up for the threads that started */
    int T;
    peat_status st; /* first error */
    /* members handed out this iteration (steps, evaluations): a thread takes the next one when
     * it is free, the slowest kind first (faulty runs, band reruns, the golden run last), so a
     * slow candidate does not leave the other thread waiting at the barrier */
    int next_step, next_eval;
} lock_shared;

typedef struct lock_thread {
    lockstep *L;
    int tid;
    lock_shared *sh;
} lock_thread;

static void fail(lock_thread *w, peat_status st)
{
    pthread_mutex_lock(&w->sh->mu);
    if (w->sh->st == PEAT_OK) w->sh->st = st;
    pthread_mutex_unlock(&w->sh->mu);
}

/* The next member to step (or evaluate), -1 when all are taken or a run failed. */
static int claim(lock_thread *w, int *next)
{
    pthread_mutex_lock(&w->sh->mu);
    int n = w->L->n, i = -1;
    while (w->sh->st == PEAT_OK && *next < n && i < 0) {
        i = n - 1 - (*next)++;
        if (!w->L->mem[i].local) i = -1; /* another rank's */
    }
    pthread_mutex_unlock(&w->sh->mu);
    return i;
}

static void claims_reset(lock_thread *w, int *next)
{
    pthread_mutex_lock(&w->sh->mu);
    *next = 0;
    pthread_mutex_unlock(&w->sh->mu);
}

static int ok(lock_thread *w)
{
    pthread_mutex_lock(&w->sh->mu);
    int r = w->sh->st == PEAT_OK;
    pthread_mutex_unlock(&w->sh->mu);
    return r;
}

/* Serial part of iteration t (thread 0): distances, non-finite counts, checkpoints. */
static peat_status after_step(lockstep *L, int64_t t)
{
    const peat_runtime_opts *o = L->o;
    PEAT_TRY(measure(L, t));
    for (int i = L->res->n_band; (o->store || L->ranks) && o->checkpoint_iters && i < L->n; i++)
        if (L->mem[i].local && peat_iter_spec_match(o->checkpoint_iters, t, L->iters))
            PEAT_TRY(checkpoint(L, &L->mem[i], t));
    return PEAT_OK;
}

/* Steering after `done` iterations: the total the caller's deadline allows, within done + 1
 * (the next iteration is the last) .. the room the curves have. */
static void steer(lockstep *L, int64_t done, double loop_s)
{
    if (done >= L->iters) return;
    int64_t n = L->o->steer(L->o->steer_user, done, L->every, loop_s);
    if (n < done + 1) n = done + 1;
    if (n > L->cap) n = L->cap;
    if (n != L->iters) iters_set(L, n);
}

/* One iteration (eval 0) or held-out evaluation (eval 1) of member m; a run whose candidate
 * crashed, hung, exited or wrote astray stops there (its loss and accuracy NaN from then on),
 * the others go on. */
static peat_status member_step(member *m, int64_t t, peat_flow_metrics *fm, int eval)
{
    fm->loss = fm->accuracy = NAN;
    if (m->run->ended_iter >= 0) return PEAT_OK;
    int64_t logged = peat_runtime_golden_log_iters(m->log);
    if (t < logged) { /* a replayed golden iteration: its loss; evaluated on its weights */
        if (!eval) {
            fm->loss = peat_runtime_golden_log_loss(m->log, t);
            return PEAT_OK;
        }
        if (m->loaded != t) PEAT_TRY(peat_runtime_golden_log_load(m->log, t, m->f));
        m->loaded = t;
        return peat_models_flow_eval(m->f, fm);
    }
    if (m->log && m->loaded >= 0 && m->loaded != logged - 1) /* on from the log's last */
        PEAT_TRY(peat_runtime_golden_log_load(m->log, logged - 1, m->f));
    m->loaded = -1;
    peat_status st = eval ? peat_models_flow_eval(m->f, fm) : peat_models_flow_step(m->f, fm);
    if (st != PEAT_OK && peat_runtime_call_ended(m->call, m->run->ended, sizeof m->run->ended)) {
        m->run->ended_iter = t;
        fm->loss = fm->accuracy = NAN;
        return PEAT_OK;
    }
    return st;
}

static void *lock_worker(void *arg)
{
    lock_thread *w = arg;
    lockstep *L = w->L;
    pthread_mutex_lock(&w->sh->mu);
    while (!w->sh->open) pthread_cond_wait(&w->sh->go, &w->sh->mu);
    pthread_mutex_unlock(&w->sh->mu);
    int64_t e = 0;
    double t0 = peat_clock_now();
    for (int64_t t = 0; t < L->iters; t++) {
        /* evaluation claims ended at the last barrier; none start before the next one */
        if (w->tid == 0) claims_reset(w, &w->sh->next_eval);
        for (int i; (i = claim(w, &w->sh->next_step)) >= 0;) {
            peat_flow_metrics fm;
            peat_status st = member_step(&L->mem[i], t, &fm, 0);
            if (st != PEAT_OK) fail(w, st);
            L->mem[i].run->loss[t] = fm.loss;
        }
        pthread_barrier_wait(&w->sh->bar);
        /* steps are claimed again only after the next barrier */
        if (w->tid == 0) claims_reset(w, &w->sh->next_step);
        if (w->tid == 0 && ok(w)) {
            peat_status st = after_step(L, t);
            if (st != PEAT_OK) fail(w, st);
        }
        int eval = e < L->res->n_eval && L->res->eval_iter[e] == t;
        for (int i; eval && (i = claim(w, &w->sh->next_eval)) >= 0;) {
            peat_flow_metrics fm;
            peat_status st = member_step(&L->mem[i], t, &fm, 1);
            if (st != PEAT_OK) fail(w, st);
            L->mem[i].run->eval_acc[e] = fm.accuracy;
        }
        e += eval;
        pthread_barrier_wait(&w->sh->bar);
        if (L->o->steer) {
            /* one thread moves the total while the others wait: all read it after the barrier */
            if (w->tid == 0) steer(L, t + 1, peat_clock_now() - t0);
            pthread_barrier_wait(&w->sh->bar);
        }
    }
    return NULL;
}

static peat_status lockstep_run(lockstep *L)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int T = L->o->threads > 0 ? L->o->threads : (int)(cpus > 1 ? cpus : 1), mine = 0;
    for (int i = 0; i < L->n; i++) mine += L->mem[i].local;
    if (T > mine) T = mine;
    lock_shared sh = {.st = PEAT_OK};
    pthread_mutex_init(&sh.mu, NULL);
    pthread_cond_init(&sh.go, NULL);
    lock_thread w[PEAT_RUNTIME_MAX_BAND + PEAT_RUNTIME_MAX_FREQS];
    pthread_t th[PEAT_RUNTIME_MAX_BAND + PEAT_RUNTIME_MAX_FREQS];
    int started = 1; /* this thread is worker 0; the barrier counts those that started */
    for (int i = 0; i < T; i++) w[i] = (lock_thread){L, i, &sh};
    while (started < T && pthread_create(&th[started], NULL, lock_worker, &w[started]) == 0)
        started++;
    pthread_barrier_init(&sh.bar, NULL, (unsigned)started);
    pthread_mutex_lock(&sh.mu);
    sh.T = started;
    sh.open = 1;
    pthread_cond_broadcast(&sh.go);
    pthread_mutex_unlock(&sh.mu);
    lock_worker(&w[0]);
    for (int i = 1; i < started; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&sh.bar);
    pthread_cond_destroy(&sh.go);
    pthread_mutex_destroy(&sh.mu);
    for (int i = 0; i < L->n; i++) {
        if (!L->mem[i].local) continue;
        L->mem[i].run->swapped = peat_exec_swapped(L->mem[i].ex);
        peat_runtime_call_shadow(L->mem[i].call, &L->mem[i].run->shadow);
    }
    return sh.st;
}

static peat_runtime_curve curve_of(const peat_runtime_result *res, const peat_runtime_run *r)
{
    peat_runtime_curve c = {res->n,      r->loss,     r->wdist,      r->nonfinite,
                            res->n_eval, r->eval_acc, res->eval_iter};
    return c;
}

/* Whether a kernel declares a format narrower than fp32 for its inputs, accumulation or outputs
 * (bf16, fp16: what explains a candidate's degradation, detector.h). */
static int declares_narrow(const peat_kernel *k)
{
    const peat_dtype d[3] = {k->in_dtype, k->acc_dtype, k->out_dtype};
    for (int i = 0; i < 3; i++)
        if (d[i] == PEAT_DTYPE_BF16 || d[i] == PEAT_DTYPE_F16) return 1;
    return 0;
}

static peat_status judge(const peat_runtime_opts *o, peat_runtime_result *res)
{
    peat_runtime_curve m[PEAT_RUNTIME_MAX_BAND];
    for (int r = 0; r < res->n_band; r++) m[r] = curve_of(res, &res->band[r]);
    PEAT_TRY(peat_detector_band_build(m, res->n_band, &res->b));
    for (int j = 0; j < res->n_faulty; j++) {
        peat_runtime_curve c = curve_of(res, &res->faulty[j]);
        PEAT_TRY(peat_detector_runtime_judge(&res->b, &c, &res->verdict[j]));
        const peat_runtime_shadow *sh = &res->faulty[j].shadow;
        if (o->candidate)
            peat_detector_runtime_candidate(&res->verdict[j], declares_narrow(o->candidate),
                                            peat_detector_band_still(&res->b) && sh->calls > 0 &&
                                                sh->checked == sh->calls && sh->bad == 0);
        const peat_runtime_run *r = &res->faulty[j];
        if (r->ended_iter < 0) continue;
        /* the run never finished: what its call did is the verdict, not its curves */
        peat_runtime_verdict *v = &res->verdict[j];
        v->cls = PEAT_RUNTIME_DUE, v->iter = r->ended_iter;
        snprintf(v->metric, sizeof v->metric, "call");
        snprintf(v->evidence, sizeof v->evidence, "%s", r->ended);
    }
    return PEAT_OK;
}

/* ---- ranks (`mpirun -n N peat run`): what the other ranks trained, to rank 0 ---- */

static void member_pack(peat_scale_pack *p, const lockstep *L, int i)
{
    const member *m = &L->mem[i];
    const peat_runtime_run *r = m->run;
    int64_t n = L->res->n, ne = L->res->n_eval, w = m->tdist ? L->n_w : 0;
    int32_t idx = i;
    peat_scale_pack_put(p, &idx, sizeof idx);
    peat_scale_pack_put_str(p, r->label);
    peat_scale_pack_put(p, &n, sizeof n);
    peat_scale_pack_put(p, &ne, sizeof ne);
    peat_scale_pack_put(p, &w, sizeof w);
    peat_scale_pack_put(p, r->loss, (size_t)n * sizeof *r->loss);
    peat_scale_pack_put(p, r->wdist, (size_t)n * sizeof *r->wdist);
    peat_scale_pack_put(p, r->nonfinite, (size_t)n * sizeof *r->nonfinite);
    peat_scale_pack_put(p, r->eval_acc, (size_t)ne * sizeof *r->eval_acc);
    peat_scale_pack_put(p, &r->first_nonfinite, sizeof r->first_nonfinite);
    peat_scale_pack_put(p, &r->swapped, sizeof r->swapped);
    peat_scale_pack_put(p, &r->ended_iter, sizeof r->ended_iter);
    peat_scale_pack_put_str(p, r->ended);
    if (w) peat_scale_pack_put(p, m->tdist, (size_t)(n * w) * sizeof *m->tdist);
}

/* Rank `from`'s member into L: it must be one rank 0 left to that rank, of the same length
 * (from < 0: a band rerun of the golden cache). */
static peat_status member_unpack(peat_scale_pack *p, lockstep *L, int from)
{
    int32_t idx = -1;
    int64_t n = 0, ne = 0, w = 0;
    peat_scale_pack_get(p, &idx, sizeof idx);
    char label[sizeof L->mem[0].run->label];
    snprintf(label, sizeof label, "%s", peat_scale_pack_get_str(p));
    peat_scale_pack_get(p, &n, sizeof n);
    peat_scale_pack_get(p, &ne, sizeof ne);
    peat_scale_pack_get(p, &w, sizeof w);
    const char *who = L->merge ? "shard" : "rank";
    char whom[48]; /* who sent it, for the errors */
    if (from < 0)
        snprintf(whom, sizeof whom, "the golden cache");
    else
        snprintf(whom, sizeof whom, "%s %d", who, from);
    /* the golden run comes from shard 0 in a merge; from no rank (rank 0 trained it); the cache
     * holds band reruns only */
    int lo = L->merge && from == 0 ? 0 : 1, hi = from < 0 ? L->res->n_band : L->n;
    if (p->err || idx < lo || idx >= hi || L->mem[idx].local ||
        (from >= 0 && peat_scale_ranks_owner(idx, L->o->n_ranks) != from) || n != L->res->n ||
        ne != L->res->n_eval || (w && w != L->n_w) || !L->mem[idx].tdist != !w)
        return PEAT_ERROR(PEAT_ERR_FORMAT,
                          "%s sent runtime run %d of %lld iterations, not one of its own "
                          "of %lld",
                          whom, (int)idx, (long long)n, (long long)L->res->n);
    /* the band's orders follow the golden GEMM's (peat_runtime_band_order): a run
     * trained elsewhere as another order would be judged under the wrong name */
    if (strcmp(label, L->mem[idx].run->label))
        return PEAT_ERROR(PEAT_ERR_FORMAT,
                          "%s trained runtime run %d as %s, here it is %s: train the %ss and "
                          "merge them on machines with the same golden GEMM (BLAS library and "
                          "CPU kind)",
                          whom, (int)idx, label, L->mem[idx].run->label, who);
    member *m = &L->mem[idx];
    peat_runtime_run *r = m->run;
    peat_scale_pack_get(p, r->loss, (size_t)n * sizeof *r->loss);
    peat_scale_pack_get(p, r->wdist, (size_t)n * sizeof *r->wdist);
    peat_scale_pack_get(p, r->nonfinite, (size_t)n * sizeof *r->nonfinite);
    peat_scale_pack_get(p, r->eval_acc, (size_t)ne * sizeof *r->eval_acc);
    peat_scale_pack_get(p, &r->first_nonfinite, sizeof r->first_nonfinite);
    peat_scale_pack_get(p, &r->swapped, sizeof r->swapped);
    peat_scale_pack_get(p, &r->ended_iter, sizeof r->ended_iter);
    snprintf(r->ended, sizeof r->ended, "%s", peat_scale_pack_get_str(p));
    if (w) peat_scale_pack_get(p, m->tdist, (size_t)(n * w) * sizeof *m->tdist);
    m->local = 1; /* its curves are here now */
    return p->err ? PEAT_ERROR(PEAT_ERR_FORMAT, "%s's runtime run %d is cut short", whom, (int)idx)
                  : PEAT_OK;
}

/* A kept checkpoint: where it starts in its buffer, for the order one process writes them in
 * (iteration, then member). */
typedef struct ckpt_at {
    int64_t t;
    int32_t i;
    peat_scale_pack *p;
    size_t at;
} ckpt_at;

static int ckpt_cmp(const void *a, const void *b)
{
    const ckpt_at *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* Reads one kept checkpoint at p->at: its tensors into ts/names (data copied: aligned), or, with
 * ts NULL, only past it. */
static peat_status ckpt_read(peat_scale_pack *p, int64_t *t, int32_t *i, int32_t *n,
                             peat_tensor *ts, const char **names, int cap)
{
    peat_scale_pack_get(p, t, sizeof *t);
    peat_scale_pack_get(p, i, sizeof *i);
    peat_scale_pack_get(p, n, sizeof *n);
    if (p->err || *n < 0 || (ts && *n > cap))
        return PEAT_ERROR(PEAT_ERR_FORMAT, "a runtime checkpoint of another rank is cut short");
    for (int k = 0; k < *n && !p->err; k++) {
        const char *name = peat_scale_pack_get_str(p);
        int32_t dt = 0, nd = 0;
        uint64_t nb = 0;
        peat_scale_pack_get(p, &dt, sizeof dt);
        peat_scale_pack_get(p, &nd, sizeof nd);
        if (nd < 0 || nd > PEAT_MAX_DIMS) p->err = 1;
        int64_t shape[PEAT_MAX_DIMS] = {0};
        peat_scale_pack_get(p, shape, (size_t)(p->err ? 0 : nd) * sizeof shape[0]);
        peat_scale_pack_get(p, &nb, sizeof nb);
        if (p->err || nb > p->n - p->at) {
            p->err = 1;
            break;
        }
        if (ts) {
            memset(&ts[k], 0, sizeof ts[k]);
            ts[k].dtype = (peat_dtype)dt, ts[k].ndim = nd;
            memcpy(ts[k].shape, shape, sizeof shape);
            ts[k].data = malloc((size_t)nb + 1);
            if (!ts[k].data) return PEAT_ERROR(PEAT_ERR_NOMEM, "a runtime checkpoint");
            memcpy(ts[k].data, p->b + p->at, (size_t)nb);
            names[k] = name;
        }
        p->at += (size_t)nb;
    }
    return p->err ? PEAT_ERROR(PEAT_ERR_FORMAT, "a runtime checkpoint of another rank is cut short")
                  : PEAT_OK;
}

/* Rank 0: every rank's kept checkpoints (each pack read from its `at` to its end) into the
 * campaign file, in one process's order. */
static peat_status ckpts_write(lockstep *L, peat_scale_pack *packs, int n_packs)
{
    int n = 0, cap = 0;
    ckpt_at *all = NULL;
    peat_status st = PEAT_OK;
    for (int q = 0; st == PEAT_OK && q < n_packs; q++) {
        peat_scale_pack *p = &packs[q];
        while (st == PEAT_OK && p->at < p->n) {
            if (n == cap) {
                ckpt_at *a = realloc(all, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *a);
                if (!a) {
                    st = PEAT_ERROR(PEAT_ERR_NOMEM, "checkpoint list");
                    break;
                }
                all = a;
            }
            ckpt_at *c = &all[n++];
            c->p = p, c->at = p->at;
            int32_t nt;
            st = ckpt_read(p, &c->t, &c->i, &nt, NULL, NULL, 0);
            if (st == PEAT_OK && (c->i < L->res->n_band || c->i >= L->n))
                st = PEAT_ERROR(PEAT_ERR_FORMAT, "a runtime checkpoint of run %d", (int)c->i);
        }
    }
    if (n) qsort(all, (size_t)n, sizeof *all, ckpt_cmp);
    int ns = peat_models_flow_state_count(L->mem[0].f);
    peat_tensor *ts = calloc((size_t)ns + 1, sizeof *ts);
    const peat_tensor **tp = calloc((size_t)ns + 1, sizeof *tp);
    const char **names = calloc((size_t)ns + 1, sizeof *names);
    if (st == PEAT_OK && (!ts || !tp || !names)) st = PEAT_ERROR(PEAT_ERR_NOMEM, "checkpoint");
    for (int j = 0; st == PEAT_OK && j < n; j++) {
        int64_t t;
        int32_t i, nt = 0;
        all[j].p->at = all[j].at;
        st = ckpt_read(all[j].p, &t, &i, &nt, ts, names, ns);
        char tag[32];
        snprintf(tag, sizeof tag, "runtime %.23s", L->mem[i].run->freq);
        for (int k = 0; k < nt; k++) tp[k] = &ts[k];
        if (st == PEAT_OK && !peat_store_state_has(L->o->store, t, tag))
            st = peat_store_state_write(L->o->store, t, tag, nt, tp, names);
        for (int k = 0; k < nt; k++) free(ts[k].data), ts[k].data = NULL;
    }
    free(ts);
    free(tp);
    free(names);
    free(all);
    return st;
}

/* The runs another rank trained, by name, for its error. */
static void rank_runs(const lockstep *L, int r, char *out, size_t n)
{
    out[0] = 0;
    for (int i = 1; i < L->n; i++)
        if (peat_scale_ranks_owner(i, L->o->n_ranks) == r && strlen(out) + 4 < n)
            snprintf(out + strlen(out), n - strlen(out), "%s%s", out[0] ? ", " : "",
                     L->mem[i].run ? L->mem[i].run->label : "?");
}

/* What a rank sends rank 0 (and a shard keeps in its file): how many runs, each run trained
 * here from member `first` on (the golden run is member 0), then the kept checkpoints. */
static peat_status body_pack(const lockstep *L, peat_scale_pack *body, int first)
{
    int32_t mine = 0;
    for (int i = first; i < L->n; i++) mine += L->mem[i].local;
    peat_scale_pack_put(body, &mine, sizeof mine);
    for (int i = first; i < L->n; i++)
        if (L->mem[i].local) member_pack(body, L, i);
    peat_scale_pack_put(body, L->ck.b, L->ck.n);
    return body->err ? PEAT_ERROR(PEAT_ERR_NOMEM, "the runtime curves for rank 0") : PEAT_OK;
}

/* Rank (shard) r's runs from its body into L, its checkpoints left from body->at on. */
static peat_status body_take(lockstep *L, peat_scale_pack *body, int r)
{
    int32_t count = 0;
    peat_scale_pack_get(body, &count, sizeof count);
    peat_status rs = PEAT_OK;
    for (int k = 0; rs == PEAT_OK && k < count; k++) rs = member_unpack(body, L, r);
    return rs;
}

/* The error of rank (shard) r, its runs named after it. */
static peat_status runs_named(const lockstep *L, int r, peat_status rs)
{
    char runs[512], msg[1024];
    rank_runs(L, r, runs, sizeof runs);
    snprintf(msg, sizeof msg, "%s (its runs: %s)", peat_error_last(), runs);
    return PEAT_ERROR(rs, "%s", msg);
}

/* After the ranks trained (st: this rank's status): ranks > 0 answer rank 0 with their members
 * and checkpoints; rank 0 takes every rank's answer (all of them, whatever failed: a rank waiting
 * to be heard must not hang), its members into L and every checkpoint into the file. The first
 * failure is the error, naming its rank and runs. */
static peat_status ranks_exchange(lockstep *L, peat_status st)
{
    const peat_runtime_opts *o = L->o;
    if (o->rank != 0) {
        peat_scale_pack body = {0};
        if (st == PEAT_OK) st = body_pack(L, &body, 1);
        peat_status sent = peat_scale_ranks_answer(st, &body);
        peat_scale_pack_free(&body);
        return st != PEAT_OK ? st : sent;
    }
    peat_scale_pack *packs = calloc((size_t)o->n_ranks, sizeof *packs);
    if (!packs) return PEAT_ERROR(PEAT_ERR_NOMEM, "the ranks' answers");
    char first[1024] = "";
    for (int r = 1; r < o->n_ranks; r++) {
        peat_status rs = peat_scale_ranks_collect(r, &packs[r]);
        if (rs == PEAT_OK && st == PEAT_OK) rs = body_take(L, &packs[r], r); /* a whole lockstep */
        if (rs != PEAT_OK && st == PEAT_OK) {
            st = runs_named(L, r, rs);
            snprintf(first, sizeof first, "%s", peat_error_last());
        }
    }
    packs[0] = L->ck; /* rank 0's own, read from its start */
    packs[0].at = 0;
    if (st == PEAT_OK) st = ckpts_write(L, packs, o->n_ranks);
    for (int r = 1; r < o->n_ranks; r++) peat_scale_pack_free(&packs[r]);
    free(packs);
    if (first[0]) return PEAT_ERROR(st, "%s", first);
    return st;
}

/* ---- the campaign file: /runtime/curves, /runtime/weight_distance, /runtime/verdicts ---- */

/* their columns: store/store_schema.c (every campaign file is created with these tables) */
#define NCOLS(c) ((int)(sizeof c / sizeof c[0]))

/* Whether a (resumed) table already holds rows of this run. */
static int has_run(const peat_store_table_t *t, const char *label)
{
    peat_store_value v;
    for (int64_t i = 0; i < peat_store_table_rows(t); i++)
        if (peat_store_table_get(t, i, 0, &v) == PEAT_OK && !strcmp(v.s, label)) return 1;
    return 0;
}

static peat_status store_curve(peat_store_table_t *t, const peat_runtime_result *res,
                               const peat_runtime_run *r, const char *kind)
{
    if (has_run(t, r->label)) return PEAT_OK;
    peat_store_value *v = calloc((size_t)res->n * NCOLS(peat_store_runtime_curve_cols), sizeof *v);
    if (!v) return PEAT_ERROR(PEAT_ERR_NOMEM, "curve rows");
    for (int64_t i = 0, e = 0; i < res->n; i++) {
        peat_store_value *row = v + i * NCOLS(peat_store_runtime_curve_cols);
        int at_eval = e < res->n_eval && res->eval_iter[e] == i;
        row[0].s = r->label, row[1].s = kind, row[2].i = i, row[3].d = r->loss[i];
        row[4].d = r->wdist[i], row[5].i = r->nonfinite[i];
        row[6].d = at_eval ? r->eval_acc[e++] : NAN;
    }
    peat_status st = peat_store_table_append(t, v, res->n);
    free(v);
    return st;
}

static peat_status store_dists(peat_store_table_t *t, const lockstep *L, const member *m)
{
    if (has_run(t, m->run->label)) return PEAT_OK;
    int64_t n = L->res->n * L->n_w;
    peat_store_value *v = calloc((size_t)n * NCOLS(peat_store_runtime_wdist_cols) + 1, sizeof *v);
    if (!v) return PEAT_ERROR(PEAT_ERR_NOMEM, "distance rows");
    for (int64_t i = 0; i < n; i++) {
        peat_store_value *row = v + i * NCOLS(peat_store_runtime_wdist_cols);
        const char *name;
        peat_models_flow_state(L->mem[0].f, L->w_idx[i % L->n_w], &name);
        row[0].s = m->run->label, row[1].i = i / L->n_w, row[2].s = name, row[3].d = m->tdist[i];
    }
    peat_status st = peat_store_table_append(t, v, n);
    free(v);
    return st;
}

static peat_status store_verdicts(peat_store_table_t *t, const peat_runtime_result *res)
{
    for (int j = 0; j < res->n_faulty; j++) {
        const peat_runtime_run *r = &res->faulty[j];
        const peat_runtime_verdict *vd = &res->verdict[j];
        if (has_run(t, r->label)) continue;
        peat_store_value v[NCOLS(peat_store_runtime_verdict_cols)] = {
            {.s = r->label},
            {.s = r->freq},
            {.s = peat_detector_runtime_class_name(vd->cls)},
            {.i = vd->iter},
            {.s = vd->metric},
            {.d = vd->loss_excess},
            {.d = vd->wdist_ratio},
            {.d = vd->acc_drop},
            {.d = vd->final_loss},
            {.d = vd->band_lo},
            {.d = vd->band_hi},
            {.i = r->swapped},
            {.s = vd->evidence}};
        PEAT_TRY(peat_store_table_append(t, v, 1));
    }
    return PEAT_OK;
}

/* The runtime tables of the campaign file. They are created (or opened) when the stage begins,
 * before any checkpoint is written: the file is in SWMR write mode, which HDF5 documents for
 * appends to existing datasets; a dataset created after a session's large appends made HDF5
 * 1.10's flush fail ("slist not empty"), losing the stage at the small and base presets. */
typedef struct rt_tables {
    peat_store_table_t *curves, *dists, *verdicts;
} rt_tables;

static peat_status tables_open(peat_store_t *s, rt_tables *t)
{
    memset(t, 0, sizeof *t);
    PEAT_TRY(peat_store_table_open(s, PEAT_STORE_RUNTIME_CURVES, peat_store_runtime_curve_cols,
                                   NCOLS(peat_store_runtime_curve_cols), &t->curves));
    PEAT_TRY(peat_store_table_open(s, PEAT_STORE_RUNTIME_WDIST, peat_store_runtime_wdist_cols,
                                   NCOLS(peat_store_runtime_wdist_cols), &t->dists));
    return peat_store_table_open(s, PEAT_STORE_RUNTIME_VERDICTS, peat_store_runtime_verdict_cols,
                                 NCOLS(peat_store_runtime_verdict_cols), &t->verdicts);
}

static void tables_close(rt_tables *t)
{
    peat_store_table_close(t->curves);
    peat_store_table_close(t->dists);
    peat_store_table_close(t->verdicts);
}

static peat_status store_all(const lockstep *L, const rt_tables *t)
{
    const peat_runtime_result *res = L->res;
    peat_status st = PEAT_OK;
    for (int i = 0; st == PEAT_OK && i < L->n; i++) {
        const member *m = &L->mem[i];
        st = store_curve(t->curves, res, m->run,
                         i == 0            ? "golden"
                         : i < res->n_band ? "band"
                                           : "faulty");
        if (st == PEAT_OK && m->tdist) st = store_dists(t->dists, L, m);
    }
    if (st == PEAT_OK) st = store_verdicts(t->verdicts, res);
    return st;
}

/* One run's curve rows (label, from row `first` on, n rows in iteration order) into r; the
 * evaluation points are the golden run's (eval_iter), set before the other runs are read. */
static peat_status load_run(const peat_store_table_t *t, int64_t first, peat_runtime_result *res,
                            peat_runtime_run *r)
{
    int64_t n = res->n;
    r->loss = calloc((size_t)n, sizeof *r->loss), r->wdist = calloc((size_t)n, sizeof *r->wdist);
    r->nonfinite = calloc((size_t)n, sizeof *r->nonfinite);
    r->eval_acc = calloc((size_t)n + 1, sizeof *r->eval_acc);
    if (!r->loss || !r->wdist || !r->nonfinite || !r->eval_acc)
        return PEAT_ERROR(PEAT_ERR_NOMEM, "runtime curves");
    r->first_nonfinite = -1, r->ended_iter = -1;
    for (int64_t i = 0, e = 0; i < n; i++) {
        peat_store_value v[NCOLS(peat_store_runtime_curve_cols)];
        for (int c = 2; c < NCOLS(peat_store_runtime_curve_cols); c++)
            PEAT_TRY(peat_store_table_get(t, first + i, c, &v[c]));
        if (v[2].i != i)
            return PEAT_ERROR(PEAT_ERR_FORMAT, "/runtime/curves: run %s is not whole", r->label);
        r->loss[i] = v[3].d, r->wdist[i] = v[4].d, r->nonfinite[i] = v[5].i;
        if (e < res->n_eval && res->eval_iter[e] == i) r->eval_acc[e++] = v[6].d;
    }
    return PEAT_OK;
}

/* The evaluation points: the golden run's rows (its first n) with an accuracy. */
static peat_status load_evals(const peat_store_table_t *t, peat_runtime_result *res)
{
    res->eval_iter = calloc((size_t)res->n + 1, sizeof *res->eval_iter);
    if (!res->eval_iter) return PEAT_ERROR(PEAT_ERR_NOMEM, "runtime curves");
    for (int64_t i = 0; i < res->n; i++) {
        peat_store_value v;
        PEAT_TRY(peat_store_table_get(t, i, 6, &v));
        if (!isnan(v.d)) res->eval_iter[res->n_eval++] = i;
    }
    return PEAT_OK;
}

static peat_status load_curves(const peat_store_table_t *t, peat_runtime_result *res)
{
    int64_t rows = peat_store_table_rows(t);
    peat_store_value lab, kind;
    PEAT_TRY(peat_store_table_get(t, 0, 0, &lab));
    while (res->n < rows && peat_store_table_get(t, res->n, 0, &kind) == PEAT_OK &&
           !strcmp(kind.s, lab.s))
        res->n++;
    PEAT_TRY(load_evals(t, res));
    for (int64_t first = 0; first < rows; first += res->n) {
        PEAT_TRY(peat_store_table_get(t, first, 0, &lab));
        PEAT_TRY(peat_store_table_get(t, first, 1, &kind));
        int faulty = !strcmp(kind.s, "faulty");
        if ((faulty ? res->n_faulty >= PEAT_RUNTIME_MAX_FREQS
                    : res->n_band >= PEAT_RUNTIME_MAX_BAND) ||
            first + res->n > rows)
            return PEAT_ERROR(PEAT_ERR_FORMAT, "/runtime/curves holds runs of unequal lengths");
        peat_runtime_run *r = faulty ? &res->faulty[res->n_faulty++] : &res->band[res->n_band++];
        snprintf(r->label, sizeof r->label, "%s", lab.s);
        PEAT_TRY(load_run(t, first, res, r));
    }
    peat_runtime_curve m[PEAT_RUNTIME_MAX_BAND];
    for (int r = 0; r < res->n_band; r++) m[r] = curve_of(res, &res->band[r]);
    return res->n_band >= 2 ? peat_detector_band_build(m, res->n_band, &res->b) : PEAT_OK;
}

peat_status peat_runtime_result_load(peat_store_t *s, peat_runtime_result *res)
{
    memset(res, 0, sizeof *res);
    if (!peat_store_table_exists(s, PEAT_STORE_RUNTIME_CURVES)) return PEAT_ERR_NOTFOUND;
    peat_store_table_t *t = NULL;
    PEAT_TRY(peat_store_table_open(s, PEAT_STORE_RUNTIME_CURVES, peat_store_runtime_curve_cols,
                                   NCOLS(peat_store_runtime_curve_cols), &t));
    peat_status st = peat_store_table_rows(t) > 0 ? load_curves(t, res) : PEAT_ERR_NOTFOUND;
    peat_store_table_close(t);
    if (st != PEAT_OK) peat_runtime_result_free(res);
    return st;
}

/* The golden cache's band reruns into L (band_in), or this lockstep's packed for it (band_out). */
static peat_status band_cache(lockstep *L)
{
    const peat_runtime_opts *o = L->o;
    if (o->band_in) {
        peat_status st = body_take(L, o->band_in, -1);
        return st == PEAT_OK ? st
                             : PEAT_ERROR(st, "%s (PEAT_GOLDEN_CACHE=off trains the band here)",
                                          peat_error_last());
    }
    if (!o->band_out) return PEAT_OK;
    int32_t count = L->res->n_band - 1;
    peat_scale_pack_put(o->band_out, &count, sizeof count);
    for (int i = 1; i < L->res->n_band; i++) member_pack(o->band_out, L, i);
    return PEAT_OK; /* a pack that ran out of memory is not stored (err is set) */
}

peat_status peat_runtime_run_all(const peat_runtime_opts *o, peat_runtime_result *res)
{
    memset(res, 0, sizeof *res);
    double t0 = peat_clock_now();
    lockstep L;
    memset(&L, 0, sizeof L);
    L.o = o;
    L.res = res;
    rt_tables tabs;
    memset(&tabs, 0, sizeof tabs);
    L.ranks = o->n_ranks > 1;
    peat_status st = o->store ? tables_open(o->store, &tabs) : PEAT_OK;
    /* test hook (core/test_hooks.h): runtime-fail-rank=R fails rank R's runs */
    if (st == PEAT_OK && L.ranks && peat_test_hook_rank("runtime-fail-rank", o->rank, NULL, 0))
        st = PEAT_ERROR(PEAT_ERR_INTERNAL, "test hook runtime-fail-rank: rank %d fails on purpose",
                        o->rank);
    if (st == PEAT_OK) st = lockstep_setup(&L);
    if (st == PEAT_OK) st = lockstep_run(&L);
    if (st == PEAT_OK) st = band_cache(&L);
    if (o->shard) { /* a shard's runs, for `peat merge` to judge */
        if (st == PEAT_OK) st = body_pack(&L, o->shard, o->rank == 0 ? 0 : 1);
    } else if (L.ranks)
        st = ranks_exchange(&L, st);
    if (st == PEAT_OK && o->rank == 0 && !o->shard) st = judge(o, res);
    if (st == PEAT_OK && o->store) st = store_all(&L, &tabs);
    tables_close(&tabs);
    lockstep_free(&L);
    res->t_total = peat_clock_now() - t0;
    return st;
}

/* Every shard's runs into L (a shard that lacks one is named), then their checkpoints. */
static peat_status shards_take(lockstep *L, peat_scale_pack *bodies, int n)
{
    for (int r = 0; r < n; r++) {
        peat_status rs = body_take(L, &bodies[r], r);
        if (rs != PEAT_OK) return runs_named(L, r, rs);
    }
    for (int i = 0; i < L->n; i++)
        if (!L->mem[i].local) {
            int r = peat_scale_ranks_owner(i, L->o->n_ranks);
            return runs_named(L, r,
                              PEAT_ERROR(PEAT_ERR_FORMAT, "shard %d of %d lacks runtime run %s", r,
                                         L->o->n_ranks, L->mem[i].run->label));
        }
    return ckpts_write(L, bodies, n);
}

peat_status peat_runtime_merge(const peat_runtime_opts *o, peat_scale_pack *bodies, int n,
                               peat_runtime_result *res)
{
    memset(res, 0, sizeof *res);
    double t0 = peat_clock_now();
    peat_runtime_opts mo = *o;
    mo.rank = -1, mo.n_ranks = n, mo.shard = NULL; /* no run is trained here */
    lockstep L;
    memset(&L, 0, sizeof L);
    L.o = &mo, L.res = res, L.ranks = 1, L.merge = 1;
    rt_tables tabs;
    peat_status st = tables_open(o->store, &tabs);
    /* the golden run's flow is set up (its tensor names), not trained: shard 0 sends its run */
    if (st == PEAT_OK) st = lockstep_setup(&L);
    L.mem[0].local = 0;
    if (st == PEAT_OK) st = shards_take(&L, bodies, n);
    if (st == PEAT_OK) st = judge(o, res);
    if (st == PEAT_OK) st = store_all(&L, &tabs);
    tables_close(&tabs);
    lockstep_free(&L);
    res->t_total = peat_clock_now() - t0;
    return st;
}

int peat_runtime_shadow_finding(const peat_runtime_run *r, peat_finding *f)
{
    const peat_runtime_shadow *s = &r->shadow;
    if (!s->on || s->bad < 1) return 0;
    memset(f, 0, sizeof *f);
    f->cls = PEAT_FIND_OUT_OF_BOUND;
    f->confidence = 1.0;
    f->accept = PEAT_ACCEPT_FAIL;
    snprintf(f->params, sizeof f->params, "loop_call=%lld iter=%lld", (long long)s->bad_call,
             (long long)s->bad_iter);
    snprintf(f->evidence[0], sizeof f->evidence[0],
             "shadow check in the loop, %.24s: call %lld (iteration %lld, %.16s, op call %lld, "
             "%.24s) first left its envelope: error %.3g x the bound, golden %.3g (envelope %.3g)",
             r->label, (long long)s->bad_call, (long long)s->bad_iter,
             s->bad_layer[0] ? s->bad_layer : "-", (long long)s->bad_op_call, s->bad_shape,
             s->bad_cand, s->bad_gold, s->bad_env);
    snprintf(f->evidence[1], sizeof f->evidence[1],
             "%lld of %lld checked calls out of the envelope (%lld calls made, %lld against the "
             "exact result)",
             (long long)s->bad, (long long)s->checked, (long long)s->calls, (long long)s->exact);
    f->n_evidence = 2;
    return 1;
}
