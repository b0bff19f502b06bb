/* latency_predict.c: a campaign's predicted cost: the op calls of one training iteration and one
 * evaluation, each call's cost in every role, and per-unit costs of every stage `peat run` runs
 * (profile, playback, probes, analyze, runtime FI) for the planner.
 */
#include "harness/latency/latency.h"
#include "peat/backend.h"

#include "harness/isolate/isolate.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/runtime/golden_log.h"
#include "harness/runtime/runtime.h"
#include "harness/campaign/golden_cache.h"
#include "harness/campaign/work.h"

typedef struct capture {
    peat_latency_flow *f;
    peat_status st;
    int recording; /* the profiler's records are kept (the first training step only) */
    int counting;  /* calls are listed (the first step and the first evaluation) */
} capture;

static peat_status capture_hook(void *user, const peat_kernel *k, const peat_args *a,
                                const peat_call_info *info, int after)
{
    capture *c = user;
    peat_latency_flow *f = c->f;
    if (after || !c->counting) return PEAT_OK;
    if (f->n == f->cap) {
        int64_t cap = f->cap ? 2 * f->cap : 64;
        peat_latency_call *n = realloc(f->calls, sizeof *n * (size_t)cap);
        if (!n) return c->st = PEAT_ERROR(PEAT_ERR_NOMEM, "flow calls");
        f->calls = n, f->cap = cap;
    }
    f->calls[f->n++] = (peat_latency_call){a->op, a->p, info->phase};
    return PEAT_OK;
}

/* Keeps the records of the training step (as profile records them), drops the evaluation's. */
static peat_status capture_sink(void *user, peat_record *r)
{
    capture *c = user;
    if (!c->recording) {
        peat_record_free(r);
        return PEAT_OK;
    }
    return peat_record_list_sink(&c->f->op, r);
}

static double flow_state_bytes(peat_flow_t *f)
{
    double b = 0;
    for (int i = 0; i < peat_models_flow_state_count(f); i++) {
        const peat_tensor *t = peat_models_flow_state(f, i, NULL);
        b += (double)peat_tensor_numel(t) * (double)peat_dtype_size(t->dtype);
    }
    return b;
}

/* Median CPU seconds of 3 more steps (eval 0) or evaluations (eval 1) of f: the first of each
 * pays for first-touch allocations that the rest of a run does not. */
static peat_status time_more(peat_flow_t *f, int eval, double *s)
{
    double t[3];
    for (int i = 0; i < 3; i++) {
        peat_flow_metrics m;
        double t0 = peat_latency_thread_cpu_s();
        PEAT_TRY(eval ? peat_models_flow_eval(f, &m) : peat_models_flow_step(f, &m));
        t[i] = peat_latency_thread_cpu_s() - t0;
    }
    double lo = t[0] < t[1] ? t[0] : t[1], hi = t[0] < t[1] ? t[1] : t[0];
    *s = t[2] < lo ? lo : (t[2] > hi ? hi : t[2]);
    return PEAT_OK;
}

/* Runtime FI trains its runs side by side: a step there shares the CPUs (hyperthreads, caches,
 * memory bandwidth) with the other threads' steps and, on each thread, the caches with the
 * run stepped before it. Measured: two flows on each of T threads (T = min(CPUs, 2)), stepping
 * alternately, all threads at once from a common start until the first has stepped for
 * SIDE_MIN_S (at least 3 pairs each); CPU seconds of a step against step_s alone. Before
 * December 1st each thread stepped 3 pairs from its own start: mlp's 0.12 ms steps were over
 * before the second thread ran, the factor read 1.0 and its runtime FI ran 1.2x the prediction. */
#define SIDE_MIN_S 0.02
typedef struct side_flow {
    peat_exec_t *ex[2];
    peat_flow_t *f[2];
    double cpu;
    int steps;
    peat_status st;
    pthread_barrier_t *start;
    volatile int *stop;
} side_flow;

static void *side_run(void *arg)
{
    side_flow *s = arg;
    peat_flow_metrics m;
    pthread_barrier_wait(s->start);
    double t0 = peat_latency_thread_cpu_s(), w0 = peat_clock_now();
    for (int i = 0; s->st == PEAT_OK && (i < 3 || !__atomic_load_n(s->stop, __ATOMIC_RELAXED));
         i++) {
        for (int j = 0; j < 2 && s->st == PEAT_OK; j++)
            s->st = peat_models_flow_step(s->f[j], &m), s->steps++;
        /* the first to have stepped long enough stops both: they overlap to the end */
        if (i >= 2 && (peat_clock_now() - w0 >= SIDE_MIN_S || i >= 10000))
            __atomic_store_n(s->stop, 1, __ATOMIC_RELAXED);
    }
    s->cpu = peat_latency_thread_cpu_s() - t0;
    return NULL;
}

static peat_status side_by_side(const char *flow, const peat_flow_config *cfg, double alone,
                                double *factor)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int T = cpus >= 2 ? 2 : 1;
    side_flow s[2];
    memset(s, 0, sizeof s);
    volatile int stop = 0;
    pthread_barrier_t start;
    peat_status st = PEAT_OK;
    peat_flow_metrics m;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < 2 && st == PEAT_OK; j++) {
            st = peat_exec_alloc(flow, cfg->seed, &s[t].ex[j]);
            if (st == PEAT_OK) st = peat_models_flow_alloc(flow, cfg, s[t].ex[j], &s[t].f[j]);
            if (st == PEAT_OK) st = peat_models_flow_step(s[t].f[j], &m); /* first touch */
        }
    pthread_t th;
    int started = 0;
    if (st == PEAT_OK && T > 1 && pthread_barrier_init(&start, NULL, 2) == 0) {
        for (int t = 0; t < T; t++) s[t].start = &start, s[t].stop = &stop;
        started = pthread_create(&th, NULL, side_run, &s[1]) == 0;
        if (!started) pthread_barrier_destroy(&start);
    }
    if (st == PEAT_OK && !started) {
        /* one thread (one CPU, or no second thread): the two flows alternating on it */
        T = 1;
        if (pthread_barrier_init(&start, NULL, 1) != 0)
            st = PEAT_ERROR(PEAT_ERR_INTERNAL, "side-by-side timing: barrier");
        s[0].start = &start, s[0].stop = &stop;
    }
    if (st == PEAT_OK) side_run(&s[0]);
    if (started) pthread_join(th, NULL);
    if (st == PEAT_OK) pthread_barrier_destroy(&start);
    double cpu = 0;
    int steps = 0;
    for (int t = 0; t < 2; t++) {
        if (st == PEAT_OK && t < T) st = s[t].st;
        if (t < T) cpu += s[t].cpu, steps += s[t].steps;
        for (int j = 0; j < 2; j++) peat_models_flow_free(s[t].f[j]), peat_exec_free(s[t].ex[j]);
    }
    *factor = st == PEAT_OK && steps > 0 && alone > 0 ? cpu / steps / alone : 1.0;
    return st;
}

/* One step and one evaluation of a throwaway flow, hooked (their calls listed), then a few more
 * of each timed. */
static peat_status capture_run(const char *flow, const peat_flow_config *cfg, peat_op_kind op,
                               capture *c)
{
    peat_exec_t *ex = NULL;
    peat_flow_t *f = NULL;
    peat_flow_metrics m;
    peat_profile_policy pol;
    memset(&pol, 0, sizeof pol);
    /* the first step only: the timed steps after it must not pay for recording */
    pol.op_mask = PEAT_OP_BIT(op), pol.every_k = 1, pol.iter_lo = 0, pol.iter_hi = 1;
    peat_profiler_t *prof = op < PEAT_OP_COUNT ? peat_profiler_new(&pol, capture_sink, c) : NULL;
    PEAT_TRY(peat_exec_alloc(flow, cfg->seed, &ex));
    peat_status st = peat_exec_add_hook(ex, capture_hook, c);
    if (st == PEAT_OK && prof) st = peat_profiler_attach(prof, ex);
    double t0 = peat_latency_thread_cpu_s();
    if (st == PEAT_OK) st = peat_models_flow_alloc(flow, cfg, ex, &f);
    c->f->create_s = peat_latency_thread_cpu_s() - t0;
    if (st == PEAT_OK) st = peat_models_flow_step(f, &m);
    c->f->n_step = c->f->n;
    c->recording = 0;
    if (st == PEAT_OK) st = peat_models_flow_eval(f, &m);
    c->counting = 0;
    if (st == PEAT_OK) st = time_more(f, 0, &c->f->step_s);
    if (st == PEAT_OK) st = time_more(f, 1, &c->f->eval_s);
    if (st == PEAT_OK) c->f->state_bytes = flow_state_bytes(f);
    if (st == PEAT_OK) c->f->distance_s = peat_runtime_distance_s(f);
    peat_models_flow_free(f);
    if (st == PEAT_OK) st = side_by_side(flow, cfg, c->f->step_s, &c->f->side_factor);
    peat_exec_free(ex);
    peat_profiler_free(prof);
    return st;
}

peat_status peat_latency_flow_capture(const char *flow, const peat_flow_config *cfg,
                                      peat_op_kind op, peat_latency_flow *out)
{
    memset(out, 0, sizeof *out);
    capture c = {out, PEAT_OK, 1, 1};
    peat_status st = capture_run(flow, cfg, op, &c);
    if (st == PEAT_OK) st = c.st;
    /* the probe stage makes its calls from the recorded ones (shapes beyond them, their scale) */
    if (st == PEAT_OK && out->op.n > 0)
        st = peat_analyzer_probe_set_make(&out->op, cfg->seed, &out->probes);
    if (st != PEAT_OK) peat_latency_flow_free(out);
    return st;
}

void peat_latency_flow_free(peat_latency_flow *f)
{
    free(f->calls);
    peat_record_list_clear(&f->op);
    peat_analyzer_probe_set_free(&f->probes);
    memset(f, 0, sizeof *f);
}

/* Seconds of a call of kernel k (0 and a NOTFOUND status when k is not calibrated). */
static peat_status kernel_s(const peat_pred_table *t, const peat_latency_env *env,
                            const peat_kernel *k, const peat_op_params *p, double *s)
{
    *s = 0;
    if (!k) return PEAT_OK;
    /* CPU seconds at this machine's speed now; the plan turns them into wall seconds */
    peat_status st = peat_predictor_call(t, k, p, env->clock.mhz, s);
    if (st == PEAT_ERR_NOTFOUND && k->role == PEAT_ROLE_CANDIDATE) {
        /* a candidate that could not be timed (it crashed, exited or hung in calibration):
         * its op's golden kernel stands in */
        const peat_kernel *g = peat_registry_role(k->op, PEAT_ROLE_GOLDEN, k->backend);
        if (g) st = peat_predictor_call(t, g, p, env->clock.mhz, s);
    }
    PEAT_TRY(st);
    *s *= env->slowdown > 0 ? env->slowdown : 1.0;
    return PEAT_OK;
}

static double out_elems(peat_op_kind op, const peat_op_params *p)
{
    peat_args a;
    memset(&a, 0, sizeof a);
    a.op = op, a.p = *p;
    const peat_op_info *info = peat_op_info_get(op);
    int nd[PEAT_MAX_IO];
    int64_t s[PEAT_MAX_IO][PEAT_MAX_DIMS];
    double n = 0;
    if (info->out_shapes(&a, nd, s) != PEAT_OK) return 0;
    for (int o = 0; o < info->n_out; o++) {
        double e = 1;
        for (int d = 0; d < nd[o]; d++) e *= (double)s[o][d];
        n += e;
    }
    return n;
}

/* CPU seconds of harness work w at x, at this machine's speed now. */
static double work_s(const peat_pred_table *t, const peat_latency_env *env, peat_latency_work w,
                     double x)
{
    return peat_latency_work_s(t, w, x) * (env->slowdown > 0 ? env->slowdown : 1.0);
}

/* Errors of one call's elements added to both accumulators, at the per-element rate of a
 * default campaign's total (the signatures come at the end, in the analyze stage). */
static double analyze_s(const peat_pred_table *t, const peat_latency_env *env, double elems)
{
    double total = elems * (double)PEAT_CAMPAIGN_DEFAULT_CALLS;
    return work_s(t, env, PEAT_WORK_ANALYZE, total) / total * elems;
}

peat_status peat_latency_call_cost(const peat_pred_table *t, const peat_latency_env *env,
                                   const peat_kernel *k, const peat_latency_call *call,
                                   peat_latency_callcost *cc)
{
    memset(cc, 0, sizeof *cc);
    const char *be = env->dev.backend;
    PEAT_TRY(kernel_s(t, env, peat_registry_role(call->op, PEAT_ROLE_GOLDEN, be), &call->p,
                      &cc->golden_s));
    PEAT_TRY(kernel_s(t, env, peat_registry_role(call->op, PEAT_ROLE_EXACT, PEAT_BACKEND_HOST),
                      &call->p, &cc->exact_s));
    if (k) PEAT_TRY(kernel_s(t, env, k, &call->p, &cc->candidate_s));
    const peat_kernel *g = peat_registry_role(call->op, PEAT_ROLE_GOLDEN, PEAT_BACKEND_HOST);
    cc->bytes = g ? peat_predictor_call_bytes(g, &call->p) : 0;
    cc->elems = out_elems(call->op, &call->p);
    cc->record_s = cc->exact_s + work_s(t, env, PEAT_WORK_RECORD, cc->bytes);
    /* the bound's magnitudes cost about an exact call (sums of |terms| in fp64); isolation
     * depends on the whole campaign: the plan adds it */
    cc->replay_s = cc->candidate_s + cc->exact_s + analyze_s(t, env, cc->elems);
    return PEAT_OK;
}

/* ---- what a training step and an evaluation cost, for each kind of run ---- */

/* Kernel calls timed at the flow's own shapes, each (kernel, shape) once: a step repeats its
 * shapes, and runtime FI's swapped kernels are the flow's thin and batched GEMMs, which the size
 * families (square, fixed aspect) extrapolate badly (docs/predictor.md). */
#define SHAPE_MEMO 96
typedef struct shape_memo {
    int n;
    const peat_kernel *failed; /* a candidate that failed to be timed: not tried again */
    const peat_kernel *k[SHAPE_MEMO];
    peat_op_params p[SHAPE_MEMO];
    double s[SHAPE_MEMO];
} shape_memo;

typedef struct shape_job {
    const peat_kernel *k;
    peat_op_params p;
    double s; /* the child's result */
} shape_job;

static peat_status shape_job_run(void *arg)
{
    shape_job *j = arg;
    peat_pred_call c;
    PEAT_TRY(peat_predictor_call_alloc(j->k, &j->p, 0x5eed, &c));
    peat_status st = peat_predictor_time_call(j->k, &c, 0, 5, &j->s);
    peat_predictor_call_free(&c);
    return st;
}

static peat_status shape_candidate_s(const peat_pred_table *t, const peat_latency_env *env,
                                     const peat_kernel *k, const peat_op_params *p, double *s,
                                     int *failed)
{
    shape_job *j = peat_isolate_shared(sizeof *j);
    if (!j) return PEAT_ERROR(PEAT_ERR_NOMEM, "timing job");
    j->k = k, j->p = *p;
    char why[256];
    /* six calls of a training step's size: seconds mean it hangs */
    peat_status st = peat_isolate_work(k->name, shape_job_run, j, 2.0, why, sizeof why);
    *s = j->s;
    peat_isolate_shared_free(j, sizeof *j);
    *failed = st == PEAT_ERR_KERNEL;
    return *failed ? kernel_s(t, env, k, p, s) : st;
}

/* CPU seconds of one call of k at p, timed now (median of 5 after a first call), from the memo
 * when timed already; from the table (kernel_s) once the memo is full or off the CPU. */
static peat_status shape_s(shape_memo *m, const peat_pred_table *t, const peat_latency_env *env,
                           const peat_kernel *k, const peat_op_params *p, double *s)
{
    for (int i = 0; i < m->n; i++)
        if (m->k[i] == k && !memcmp(&m->p[i], p, sizeof *p)) return *s = m->s[i], PEAT_OK;
    if (m->n == SHAPE_MEMO || !peat_backend_on_host(k->backend)) return kernel_s(t, env, k, p, s);
    if (k->role == PEAT_ROLE_CANDIDATE) {
        /* code under test is timed in a forked child; one that fails there is costed from the
         * table (its op's golden kernel when it has no row), and not timed again */
        if (m->failed == k) return kernel_s(t, env, k, p, s);
        int failed = 0;
        PEAT_TRY(shape_candidate_s(t, env, k, p, s, &failed));
        if (failed) m->failed = k;
    } else {
        peat_pred_call c;
        PEAT_TRY(peat_predictor_call_alloc(k, p, 0x5eed, &c));
        peat_status st = peat_predictor_time_call(k, &c, 0, 5, s);
        peat_predictor_call_free(&c);
        PEAT_TRY(st);
    }
    m->k[m->n] = k, m->p[m->n] = *p, m->s[m->n++] = *s;
    return PEAT_OK;
}

/* Seconds of calls [lo, hi) of the flow with the golden kernels, and how much more the candidate's
 * op calls cost through kernel `swap` (NULL: none) instead of the golden one: from the tables, or,
 * with a memo, both timed at the calls' own shapes. */
static peat_status calls_s(const peat_pred_table *t, const peat_latency_env *env,
                           const peat_latency_flow *fl, int64_t lo, int64_t hi,
                           const peat_kernel *swap, shape_memo *memo, double *golden_s,
                           double *extra_s)
{
    double dispatch = work_s(t, env, PEAT_WORK_DISPATCH, 1);
    *golden_s = 0, *extra_s = 0;
    for (int64_t i = lo; i < hi; i++) {
        const peat_latency_call *c = &fl->calls[i];
        const peat_kernel *gk = peat_registry_role(c->op, PEAT_ROLE_GOLDEN, env->dev.backend);
        double g = 0, s = 0;
        PEAT_TRY(kernel_s(t, env, gk, &c->p, &g));
        *golden_s += g + dispatch;
        if (!swap || c->op != swap->op) continue;
        if (memo && gk) {
            PEAT_TRY(shape_s(memo, t, env, gk, &c->p, &g));
            PEAT_TRY(shape_s(memo, t, env, swap, &c->p, &s));
        } else {
            PEAT_TRY(kernel_s(t, env, swap, &c->p, &s));
        }
        *extra_s += s - g;
    }
    return PEAT_OK;
}

/* ---- profile and playback ---- */

/* A training step and an evaluation are measured (fl->step_s, eval_s: the ops and everything the
 * flow does around them, with the caches as a run leaves them); the kernel model predicts how the
 * candidate and the band's models change them. */
static peat_status profile_costs(const peat_pred_table *t, const peat_latency_env *env,
                                 const peat_latency_flow *fl, peat_pred_costs *c)
{
    double step = fl->step_s, eval = fl->eval_s, create = fl->create_s;
    /* each recorded iteration appends its metrics row */
    c->iter_s = step + work_s(t, env, PEAT_WORK_METRICS, 1);
    /* the stratified sampler's counting step (a flow and one step), the recording flow, its last
     * checkpoint and the held-out evaluation */
    c->setup_s = 2 * create + step + work_s(t, env, PEAT_WORK_RECORD, fl->state_bytes) + eval;
    return PEAT_OK;
}

static peat_status playback_costs(const peat_pred_table *t, const peat_latency_env *env,
                                  const peat_kernel *k, const peat_latency_flow *fl,
                                  peat_pred_costs *c)
{
    int64_t n_op = 0;
    double elems = 0, bytes = 0;
    for (int64_t i = 0; i < fl->n_step; i++) {
        if (fl->calls[i].op != k->op) continue;
        peat_latency_callcost cc;
        PEAT_TRY(peat_latency_call_cost(t, env, k, &fl->calls[i], &cc));
        n_op++;
        elems += cc.elems, bytes += cc.bytes;
        c->record_s += cc.record_s;
        c->replay_s += cc.replay_s;
        c->replay_analysis_s += cc.exact_s + analyze_s(t, env, cc.elems);
        c->repeat_s += cc.candidate_s;
        c->trial_s += analyze_s(t, env, cc.elems) + work_s(t, env, PEAT_WORK_DISPATCH, 1);
    }
    if (n_op == 0)
        return PEAT_ERROR(PEAT_ERR_INVAL, "the flow never calls %s", peat_op_name(k->op));
    c->record_s /= (double)n_op, c->replay_s /= (double)n_op;
    c->replay_analysis_s /= (double)n_op;
    c->repeat_s /= (double)n_op, c->trial_s /= (double)n_op;
    c->elems_per_call = elems / (double)n_op;
    /* what the process holds per recorded call: its inputs and golden outputs (f32) and exact
     * outputs (f64); the analyzer's accumulators are bounded (sketches, a bottom-k sample) */
    c->bytes_per_call = bytes / (double)n_op + 8.0 * c->elems_per_call;
    return PEAT_OK;
}

/* ---- probes ---- */

/* One probe call as stage_probe.c runs it: exact and golden references, the candidate (the fork
 * is the plan's), the magnitudes of its output (for the errors and the edge region: about an
 * exact call each), two accumulators judged. */
static peat_status probe_s(const peat_pred_table *t, const peat_latency_env *env,
                           const peat_kernel *k, const peat_args *a, int judged, double *s)
{
    double e = 0, g = 0, cand = 0;
    PEAT_TRY(
        kernel_s(t, env, peat_registry_role(a->op, PEAT_ROLE_EXACT, PEAT_BACKEND_HOST), &a->p, &e));
    PEAT_TRY(kernel_s(t, env, peat_registry_role(a->op, PEAT_ROLE_GOLDEN, PEAT_BACKEND_HOST), &a->p,
                      &g));
    PEAT_TRY(kernel_s(t, env, k, &a->p, &cand));
    *s = e + g + cand;
    if (judged) *s += 2 * e + work_s(t, env, PEAT_WORK_JUDGE, out_elems(a->op, &a->p));
    return PEAT_OK;
}

static peat_status probe_costs(const peat_pred_table *t, const peat_latency_env *env,
                               const peat_kernel *k, const peat_latency_flow *fl,
                               peat_pred_costs *c)
{
    for (int i = 0; i < fl->probes.n; i++) {
        double s = 0;
        PEAT_TRY(probe_s(t, env, k, &fl->probes.p[i].args, 1, &s));
        c->probe_s += s / fl->probes.n;
    }
    if (k->op != PEAT_OP_GEMM) return PEAT_OK;
    /* GEMM's arithmetic-property call: references once, the candidate twice (each forked) */
    peat_args in;
    PEAT_TRY(peat_analyzer_gemm_props_call(&in));
    double s = 0, cand = 0;
    peat_status st = probe_s(t, env, k, &in, 0, &s);
    if (st == PEAT_OK) st = kernel_s(t, env, k, &in.p, &cand);
    for (int i = 0; i < in.n_in; i++) peat_tensor_free((peat_tensor *)in.in[i]);
    c->probe_fixed_s = s + cand;
    c->probe_fixed_forks = 2;
    return st;
}

/* ---- runtime FI ---- */

/* The runs runtime FI trains in lockstep, as harness/runtime/runtime.c sets them up from options o:
 * the golden run (replayed from the profile's log where there is one: its steps cost nothing, its
 * evaluations run), R - 1 band reruns (their `reorder` model on every call of the op), one run a
 * frequency with the candidate on that share of the calls. */
typedef struct runtime_runs {
    int n, band, replayed;
    const peat_kernel *swap[PEAT_RUNTIME_MAX_BAND + PEAT_RUNTIME_MAX_FREQS];
    double share[PEAT_RUNTIME_MAX_BAND + PEAT_RUNTIME_MAX_FREQS]; /* of the op's calls */
} runtime_runs;

static peat_status runtime_runs_of(const peat_kernel *k, const peat_campaign_opts *o,
                                   runtime_runs *rr)
{
    memset(rr, 0, sizeof *rr);
    rr->band = o->runtime_band > 0 ? o->runtime_band : PEAT_RUNTIME_DEFAULT_BAND;
    rr->replayed = peat_campaign_golden_log_wanted(o, k);
    for (int r = 0; r < rr->band; r++, rr->n++) {
        rr->swap[rr->n] = r ? peat_latency_band_kernel(k->op, r) : NULL;
        rr->share[rr->n] = r ? 1.0 : 0.0;
    }
    for (int q = 0; q < o->runtime_freq.n && q < PEAT_RUNTIME_MAX_FREQS; q++, rr->n++) {
        rr->swap[rr->n] = k;
        rr->share[rr->n] = peat_freq_share(&o->runtime_freq.f[q]);
    }
    return PEAT_OK;
}

/* CPU seconds of a step (lo = 0) or an evaluation (calls [lo, hi)) in all runs (*total), and on
 * the busiest thread (*crit), the runs spread over threads as runtime.c does (run i on thread
 * i mod T, T = min(CPUs, runs)): the measured one, with the swapped calls' difference. */
static peat_status lockstep_s(const peat_pred_table *t, const peat_latency_env *env,
                              const peat_latency_flow *fl, const runtime_runs *rr, int64_t lo,
                              int64_t hi, shape_memo *memo, double *crit, double *total)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int T = cpus > 1 ? (int)cpus : 1;
    if (T > rr->n) T = rr->n;
    double per[PEAT_RUNTIME_MAX_BAND + PEAT_RUNTIME_MAX_FREQS] = {0};
    double measured = lo == 0 ? fl->step_s : fl->eval_s;
    for (int i = 0; i < rr->n; i++) {
        double g = 0, extra = 0;
        if (i == 0 && lo == 0 && rr->replayed) continue; /* the golden run's steps: replayed */
        PEAT_TRY(calls_s(t, env, fl, lo, hi, rr->swap[i], memo, &g, &extra));
        per[i % T] += measured + rr->share[i] * extra;
    }
    *crit = *total = 0;
    for (int j = 0; j < T; j++) {
        *total += per[j];
        if (per[j] > *crit) *crit = per[j];
    }
    return PEAT_OK;
}

static peat_status runtime_costs(const peat_pred_table *t, const peat_latency_env *env,
                                 const peat_kernel *k, const peat_latency_flow *fl,
                                 const peat_campaign_opts *o, peat_pred_costs *c)
{
    runtime_runs rr;
    PEAT_TRY(runtime_runs_of(k, o, &rr));
    shape_memo *memo = calloc(1, sizeof *memo);
    if (!memo) return PEAT_ERROR(PEAT_ERR_NOMEM, "shape memo");
    peat_status st = lockstep_s(t, env, fl, &rr, 0, fl->n_step, memo, &c->runtime_iter_crit_s,
                                &c->runtime_iter_s);
    if (st == PEAT_OK)
        st = lockstep_s(t, env, fl, &rr, fl->n_step, fl->n, memo, &c->runtime_eval_crit_s,
                        &c->runtime_eval_s);
    free(memo);
    PEAT_TRY(st);
    /* after each iteration one thread measures every run's weights against the golden run's
     * while the others wait (harness/runtime/runtime.c): on the busiest thread's path (mlp: 75 us
     * an iteration, a sixth of its lockstep) */
    c->runtime_iter_crit_s += (double)rr.n * fl->distance_s;
    c->runtime_iter_s += (double)rr.n * fl->distance_s;
    /* every run's flow is created on one thread; each faulty run's last checkpoint is stored */
    c->runtime_fixed_s =
        (double)rr.n * fl->create_s +
        (double)(rr.n - rr.band) * work_s(t, env, PEAT_WORK_RECORD, fl->state_bytes);
    return PEAT_OK;
}

static int cmp_elems(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ord holds m (output elements, index) pairs: sorts them by elements and writes the indices of
 * the smallest, the median and the largest into pick; returns how many (0 when m is 0). */
static int pick_three(double *ord, int64_t m, int64_t pick[3])
{
    qsort(ord, (size_t)m, 2 * sizeof *ord, cmp_elems);
    int n = 0;
    for (int q = 0; q < 3 && m > 0; q++) pick[n++] = (int64_t)ord[2 * (q * (m - 1) / 2) + 1];
    return n;
}

/* Playback's guards and isolation at this process's level, measured on three of the flow's own
 * calls of the op (the smallest, median and largest output): every replayed call pays the guards
 * (guarded outputs, input copies, the checks for stray writes), forked or not. A fork costs more
 * from a process that has built and trained a flow (its heap, its mappings) than from the
 * calibrating one at the same resident size, and a replayed call's fork more than the
 * calibration's one-element call (the parent's copy-on-write faults on the exact kernel's
 * buffers after it, the child's work on real ones): the isolation curve is shifted to what
 * forking measured here adds (at c->base_bytes) and keeps its slope. */
static peat_status isolation(const peat_pred_table *t, const peat_latency_env *env,
                             const peat_pred_ktable *iso, int isolate, const peat_kernel *k,
                             const peat_latency_flow *fl, peat_pred_costs *c)
{
    /* (output elements, call index) of the op's calls, sorted by elements */
    double *ord = malloc((size_t)(fl->n_step > 0 ? fl->n_step : 1) * 2 * sizeof *ord);
    if (!ord) return PEAT_ERROR(PEAT_ERR_NOMEM, "isolation calls");
    int64_t m = 0;
    for (int64_t i = 0; i < fl->n_step; i++)
        if (fl->calls[i].op == k->op)
            ord[2 * m] = out_elems(k->op, &fl->calls[i].p), ord[2 * m + 1] = (double)i, m++;
    int64_t pick[3];
    int n = pick_three(ord, m, pick);
    free(ord);
    peat_op_params p[3];
    for (int q = 0; q < n; q++) p[q] = fl->calls[pick[q]].p;
    /* timed with the op's golden kernel in the candidate's place: what is measured is the
     * harness's work around the call (its own cost is taken out), and a candidate is not run
     * in this process (it may crash or end it) */
    const peat_kernel *g = peat_registry_role(k->op, PEAT_ROLE_GOLDEN, PEAT_BACKEND_HOST);
    peat_latency_replay rn;
    memset(&rn, 0, sizeof rn);
    if (g) PEAT_TRY(peat_latency_replay_now(g, p, n, isolate, &rn));
    double now = rn.isolate_s, guard = rn.guard_s;
    /* playback's analysis of a call (magnitudes, both accumulators, plots), measured on the
     * flow's own calls after each as the campaign makes it, interpolated over output elements
     * for every call of the step: it replaces the tables' (the calibration's adds, back to back,
     * of 4096 synthetic elements: a small call pays more per element, and after the call and its
     * fork the accumulators are out of the caches and their heap pages fault on the first
     * write; mlp's calls took 2-3x the tables) */
    if (rn.n_analysis > 0) {
        peat_pred_ktable live;
        memset(&live, 0, sizeof live);
        PEAT_TRY(
            peat_predictor_ktable_build(&live, rn.n_analysis, rn.analysis_x, rn.analysis_t, 0.0));
        double sum = 0, tab = 0;
        int64_t m = 0;
        for (int64_t i = 0; i < fl->n_step; i++) {
            if (fl->calls[i].op != k->op) continue;
            sum += peat_predictor_ktable_eval(&live, out_elems(k->op, &fl->calls[i].p)), m++;
        }
        if (m > 0) {
            tab = c->replay_analysis_s;
            c->replay_analysis_s = sum / (double)m;
            c->replay_s += c->replay_analysis_s - tab;
            c->analysis_level = tab > 0 ? c->replay_analysis_s / tab : 0;
        }
    }
    /* every replayed call (and its repeat) goes through the guards, forked or not, and so does
     * every probe's candidate call (the arithmetic-property probe's two) */
    c->replay_s += guard, c->repeat_s += guard;
    c->probe_s += fl->probes.n > 0 ? guard : 0.0;
    c->probe_fixed_s += (double)c->probe_fixed_forks * guard;
    if (!isolate) return PEAT_OK;
    c->isolate = *iso;
    double at = peat_predictor_ktable_eval(iso, c->base_bytes), shift = now - at;
    if (shift < -0.5 * at) shift = -0.5 * at; /* a lucky measurement halves it at most */
    c->isolate.overhead_s += shift;
    for (int i = 0; i < c->isolate.n; i++) c->isolate.t[i] += shift;
    return PEAT_OK;
}

/* The probe stage at this process's level: three probes of the flow's set (the smallest, median
 * and largest output) and GEMM's arithmetic-property call, run by stage_probe.c's own code with
 * the op's golden kernel in the candidate's place, forked as the campaign forks them (a probe:
 * the mean of 2 runs after a first; the property call: 1 run after a first). A probe's harness work
 * (fresh accumulators, its signatures and detector, the edge region, guards, fork) is interpolated
 * over output elements for every probe of the set and replaces the tables' sum of it, which left
 * out what a probe's small adds and fresh accumulators pay in a process that has just forked (mlp's
 * probes ran 1.25x it); the candidate's own time is added from the tables, and the fork's growth
 * with the records resident stays the isolation curve's (plan.c adds it per probe: taken out here).
 */
static peat_status probes_now(const peat_pred_table *t, const peat_latency_env *env,
                              const peat_kernel *k, const peat_latency_flow *fl,
                              const peat_campaign_opts *o, peat_pred_costs *c)
{
    const peat_kernel *g = peat_registry_role(k->op, PEAT_ROLE_GOLDEN, PEAT_BACKEND_HOST);
    int n = fl->probes.n;
    if (!g || n == 0 || o->no_probes) return PEAT_OK;
    peat_campaign_opts po = *o;
    peat_detector_ctx ctx = peat_detector_ctx_from_kernel(g);
    double *ord = malloc(sizeof *ord * 2 * (size_t)n);
    if (!ord) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe timing");
    for (int i = 0; i < n; i++)
        ord[2 * i] = out_elems(k->op, &fl->probes.p[i].args.p), ord[2 * i + 1] = i;
    int64_t pick[3];
    int n_pick = pick_three(ord, n, pick);
    double x[3], tm[3];
    int m = 0;
    peat_probe_outcome out;
    peat_status st = PEAT_OK;
    for (int q = 0; q < n_pick && st == PEAT_OK; q++) {
        const peat_probe *pr = &fl->probes.p[pick[q]];
        double r[3];
        for (int rep = 0; rep < 3 && st == PEAT_OK; rep++) {
            double t0 = peat_campaign_cpu_s();
            memset(&out, 0, sizeof out);
            st = peat_campaign_stage_probe_one(&po, g, pr, &ctx, &out);
            r[rep] = peat_campaign_cpu_s() - t0;
        }
        if (st == PEAT_OK) x[m] = out_elems(k->op, &pr->args.p), tm[m++] = 0.5 * (r[1] + r[2]);
    }
    peat_pred_ktable live;
    memset(&live, 0, sizeof live);
    if (st == PEAT_OK) st = peat_predictor_ktable_build(&live, m, x, tm, 0.0);
    double sum = 0;
    for (int i = 0; i < n && st == PEAT_OK; i++) {
        const peat_args *a = &fl->probes.p[(int)ord[2 * i + 1]].args;
        double cand = 0, gold = 0;
        st = kernel_s(t, env, k, &a->p, &cand);
        if (st == PEAT_OK) st = kernel_s(t, env, g, &a->p, &gold);
        sum += peat_predictor_ktable_eval(&live, ord[2 * i]) + (cand - gold);
    }
    free(ord);
    PEAT_TRY(st);
    double fork = o->isolate ? peat_predictor_isolate_s(c, 0) : 0.0;
    c->probe_s = sum / n - fork;
    if (c->probe_s < 0) c->probe_s = 0;
    if (k->op != PEAT_OP_GEMM) return PEAT_OK;
    peat_campaign_result *res = calloc(1, sizeof *res);
    if (!res) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe timing");
    double r[2];
    for (int rep = 0; rep < 2 && st == PEAT_OK; rep++) {
        double t0 = peat_campaign_cpu_s();
        st = peat_campaign_stage_probe_props(&po, g, res);
        r[rep] = peat_campaign_cpu_s() - t0;
    }
    free(res);
    PEAT_TRY(st);
    /* the candidate runs twice there */
    peat_args in;
    PEAT_TRY(peat_analyzer_gemm_props_call(&in));
    double cand = 0, gold = 0;
    st = kernel_s(t, env, k, &in.p, &cand);
    if (st == PEAT_OK) st = kernel_s(t, env, g, &in.p, &gold);
    for (int i = 0; i < in.n_in; i++) peat_tensor_free((peat_tensor *)in.in[i]);
    PEAT_TRY(st);
    c->probe_fixed_s = r[1] + 2 * (cand - gold) - c->probe_fixed_forks * fork;
    if (c->probe_fixed_s < 0) c->probe_fixed_s = 0;
    return PEAT_OK;
}

peat_status peat_latency_costs(const peat_pred_table *t, const peat_latency_env *env,
                               const peat_kernel *k, const peat_latency_flow *fl,
                               const peat_campaign_opts *o, peat_pred_costs *c)
{
    peat_campaign_opts def;
    peat_campaign_opts_default(&def);
    if (!o) o = &def;
    memset(c, 0, sizeof *c);
    PEAT_TRY(profile_costs(t, env, fl, c));
    PEAT_TRY(playback_costs(t, env, k, fl, c));
    PEAT_TRY(probe_costs(t, env, k, fl, c));
    PEAT_TRY(runtime_costs(t, env, k, fl, o, c));
    const peat_pred_ktable *an =
        peat_predictor_table_find(t, peat_latency_work_kernel(PEAT_WORK_SIGNATURE));
    const peat_pred_ktable *iso =
        peat_predictor_table_find(t, peat_latency_work_kernel(PEAT_WORK_ISOLATE));
    if (an) c->analysis = *an;
    for (int i = 0; i < c->analysis.n; i++) c->analysis.t[i] *= env->slowdown;
    c->analysis.overhead_s *= env->slowdown;
    c->share = env->core_share;
    c->cores = env->cores;
    /* runtime FI's runs step side by side: slower than the step measured alone */
    c->contention = fl->side_factor > 1.0 ? fl->side_factor : 1.0;
    if (c->contention > 3.0) c->contention = 3.0; /* beyond, another job's burst: not the runs */
    c->base_bytes = peat_latency_rss_bytes();
    /* the accumulators at a default campaign's elements (bounded: flat once full) */
    c->held_bytes = peat_latency_work_s(t, PEAT_WORK_HELD,
                                        (double)PEAT_CAMPAIGN_DEFAULT_CALLS * c->elems_per_call);
    if (peat_backend_on_host(k->backend)) {
        PEAT_TRY(isolation(t, env, iso, iso && o->isolate, k, fl, c));
        PEAT_TRY(probes_now(t, env, k, fl, o, c));
    }
    /* the commit stage rewrites the campaign file's signatures (a file of the default's size) */
    c->analyze_fixed_s =
        work_s(t, env, PEAT_WORK_COMMIT, (double)PEAT_CAMPAIGN_DEFAULT_CALLS * c->bytes_per_call);
    return PEAT_OK;
}

peat_status peat_latency_plan_counts(const peat_latency_flow *fl, const peat_campaign_opts *o,
                                     int64_t iters, int64_t calls, peat_pred_plan *p)
{
    peat_campaign_opts def;
    peat_campaign_opts_default(&def);
    if (!o) o = &def;
    memset(p, 0, sizeof *p);
    p->iters = iters, p->calls = calls;
    p->repeats = o->repeats < calls ? o->repeats : calls;
    p->probes = o->no_probes ? 0 : fl->probes.n;
    if (o->no_runtime || o->finetune_from) return PEAT_OK;
    p->runtime_freqs = o->runtime_freq.n;
    p->runtime_runs =
        (o->runtime_band > 0 ? o->runtime_band : PEAT_RUNTIME_DEFAULT_BAND) + p->runtime_freqs;
    /* the runs train as long as the profiled one */
    p->runtime_iters = iters;
    return PEAT_OK;
}

peat_status peat_latency_limits(const peat_latency_flow *fl, const peat_campaign_opts *o,
                                int64_t default_iters, int64_t default_calls, peat_pred_limits *l)
{
    /* the smallest campaign still worth a verdict: a few iterations for the loss to move and
     * enough calls for the analyzer's distributions (docs/predictor.md) */
    int64_t min_iters = default_iters < 10 ? default_iters : 10;
    PEAT_TRY(peat_latency_plan_counts(fl, o, min_iters, 8, &l->min));
    return peat_latency_plan_counts(fl, o, 20 * default_iters, 40 * default_calls, &l->max);
}

/* The integer params of each op kind, as include/peat/plugin.h lists them: the header of the
 * params column. */
static const char *const param_names[PEAT_OP_COUNT] = {
    [PEAT_OP_GEMM] = "transA,transB,M,N,K,batch",
    [PEAT_OP_CONV2D] = "N,C,H,W,O,KH,KW,stride,pad",
    [PEAT_OP_CONV2D_BWD_DATA] = "N,C,H,W,O,KH,KW,stride,pad",
    [PEAT_OP_CONV2D_BWD_FILTER] = "N,C,H,W,O,KH,KW,stride,pad",
    [PEAT_OP_BIAS_ADD] = "R,C,S",
    [PEAT_OP_BIAS_ADD_BWD] = "R,C,S",
    [PEAT_OP_RELU] = "n",
    [PEAT_OP_RELU_BWD] = "n",
    [PEAT_OP_GELU] = "n",
    [PEAT_OP_GELU_BWD] = "n",
    [PEAT_OP_SOFTMAX] = "R,C",
    [PEAT_OP_SOFTMAX_BWD] = "R,C",
    [PEAT_OP_LAYERNORM] = "R,C",
    [PEAT_OP_LAYERNORM_BWD] = "R,C",
    [PEAT_OP_ATTENTION] = "B,H,T,D,causal",
    [PEAT_OP_ATTENTION_BWD] = "B,H,T,D,causal",
    [PEAT_OP_EMBEDDING] = "N,V,D",
    [PEAT_OP_EMBEDDING_BWD] = "N,V,D",
    [PEAT_OP_CROSS_ENTROPY] = "R,C",
    [PEAT_OP_CROSS_ENTROPY_BWD] = "R,C",
    [PEAT_OP_ADAMW] = "n,step",
    [PEAT_OP_SGD] = "n",
    [PEAT_OP_REDUCE] = "R,C,mode",
};

/* A call's named integer params, comma-separated (as many as the op names). */
static void params_text(peat_op_kind op, const peat_op_params *p, char *buf, size_t n)
{
    const char *names = param_names[op] ? param_names[op] : "";
    int count = names[0] ? 1 : 0;
    for (const char *c = names; *c; c++) count += *c == ',';
    buf[0] = 0;
    for (int i = 0; i < count && i < PEAT_PARAM_I; i++) {
        size_t w = strlen(buf);
        snprintf(buf + w, n - w, "%s%lld", i ? "," : "", (long long)p->i[i]);
    }
}

static void print_calls(FILE *f, const peat_latency_env *env, const peat_kernel *k,
                        const peat_pred_table *t, const peat_latency_flow *fl)
{
    fprintf(f, "per op call (%s calls of one iteration; ms):\n", peat_op_name(k->op));
    fprintf(f, "  %-5s %-28s %9s %9s %9s %9s %9s\n", "phase",
            param_names[k->op] ? param_names[k->op] : "params", "golden", "candidate", "exact",
            "record", "replay");
    static const char *ph[] = {"fwd", "bwd", "opt"};
    for (int64_t i = 0; i < fl->n_step; i++) {
        const peat_latency_call *c = &fl->calls[i];
        if (c->op != k->op) continue;
        peat_latency_callcost cc;
        if (peat_latency_call_cost(t, env, k, c, &cc) != PEAT_OK) continue;
        char params[64];
        params_text(k->op, &c->p, params, sizeof params);
        fprintf(f, "  %-5s %-28s %9.4f %9.4f %9.4f %9.4f %9.4f\n", ph[c->phase], params,
                1e3 * cc.golden_s, 1e3 * cc.candidate_s, 1e3 * cc.exact_s, 1e3 * cc.record_s,
                1e3 * cc.replay_s);
    }
}

void peat_latency_print(FILE *f, const peat_latency_env *env, const peat_kernel *k,
                        const char *flow, const peat_pred_table *t, const peat_latency_flow *fl,
                        const peat_pred_costs *c, const peat_pred_plan *plan)
{
    fprintf(f, "device: %s (%d units, SIMD %d, %.1f GFLOP/s/unit, %.1f GB/s)\n", env->dev.name,
            env->dev.units, env->dev.simd_width, env->dev.peak_flops / 1e9,
            env->dev.bandwidth / 1e9);
    if (env->clock.mhz > 0)
        fprintf(f, "clock: %.0f MHz (%s)%s\n", env->clock.mhz, env->clock.source,
                env->steady ? "" : ", not steady after warm-up");
    else
        fprintf(f, "clock: unknown (no cpufreq, NVML or ROCm SMI here): predictions unscaled\n");
    fprintf(f,
            "core share: %.2f of a core for one thread, %.2f cores for all (CPU seconds predicted, "
            "divided by them); speed: the reference call runs %.2fx its calibrated time (table "
            "predictions scaled by it)\n",
            env->core_share, env->cores, env->slowdown);
    fprintf(f, "kernel %s, flow %s: %lld op calls per iteration, %lld per evaluation\n\n", k->name,
            flow, (long long)fl->n_step, (long long)(fl->n - fl->n_step));
    print_calls(f, env, k, t, fl);
    double ops = 0, none = 0;
    calls_s(t, env, fl, 0, fl->n_step, NULL, NULL, &ops, &none);
    fprintf(f,
            "\nper unit (CPU): golden iteration %.2f ms measured (its ops %.2f ms from the kernel "
            "tables), evaluation %.2f ms measured, replayed call %.3f ms (its analysis %.3f ms, "
            "%.2fx the tables, measured on the flow's calls), probe %.3f ms, runtime-FI lockstep "
            "iteration %.2f ms (%d runs, their swapped kernels timed at the flow's shapes; x %.2f "
            "side by side), FI trial %.3f ms; isolation %.2f ms a call, forking at %.1f MB "
            "resident (%.1f MB the analyzer holds)\n",
            1e3 * fl->step_s, 1e3 * ops, 1e3 * fl->eval_s, 1e3 * c->replay_s,
            1e3 * c->replay_analysis_s, c->analysis_level > 0 ? c->analysis_level : 1.0,
            1e3 * c->probe_s, 1e3 * c->runtime_iter_s, plan->runtime_runs,
            c->contention > 1 ? c->contention : 1.0, 1e3 * c->trial_s,
            1e3 * peat_predictor_isolate_s(c, plan->calls),
            (c->base_bytes + c->held_bytes + (double)plan->calls * c->bytes_per_call) / 1e6,
            c->held_bytes / 1e6);
    fprintf(f,
            "\nper stage (%lld iterations, %lld calls (%lld repeated), %lld probes, runtime FI: "
            "%d runs (%d frequencies) x %lld iterations, %lld FI trials):\n",
            (long long)plan->iters, (long long)plan->calls, (long long)plan->repeats,
            (long long)plan->probes, plan->runtime_runs, plan->runtime_freqs,
            (long long)plan->runtime_iters, (long long)plan->trials);
    for (int s = 0; s < PEAT_STAGE_COUNT; s++)
        fprintf(f, "  %-11s %9.2f s\n", peat_predictor_stage_name((peat_pred_stage)s),
                plan->stage_s[s]);
    fprintf(f, "  %-11s %9.2f s\n", "total", plan->total_s);
}
