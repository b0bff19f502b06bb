/* latency_predict.c: a campaign's predicted cost: the op calls of one training iteration, each
 * call's cost in every role, per-unit stage costs for the planner, and the `peat predict` report.
 */
#include "harness/latency.h"

#include <stdlib.h>

typedef struct capture {
    peat_latency_flow *f;
    peat_status st;
} capture;

static peat_status capture_hook(void *user, const peat_kernel *k, const peat_args *a,
                                const peat_call_info *info, int after)
{
    capture *c = user;
    peat_latency_flow *f = c->f;
    if (after) return PEAT_OK;
    if (f->n == f->cap) {
        int64_t cap = f->cap ? 2 * f->cap : 64;
        peat_latency_call *n = realloc(f->calls, sizeof *n * (size_t)cap);
        if (!n) return c->st = PEAT_ERROR(PEAT_ERR_NOMEM, "flow calls");
        f->calls = n, f->cap = cap;
    }
    f->calls[f->n++] = (peat_latency_call){a->op, a->p, info->phase};
    return PEAT_OK;
}

peat_status peat_latency_flow_capture(const char *flow, const peat_flow_config *cfg,
                                      peat_latency_flow *out)
{
    memset(out, 0, sizeof *out);
    capture c = {out, PEAT_OK};
    peat_exec_t *ex = NULL;
    peat_flow_t *f = NULL;
    peat_flow_metrics m;
    PEAT_TRY(peat_exec_create(flow, cfg->seed, &ex));
    peat_status st = peat_exec_add_hook(ex, capture_hook, &c);
    if (st == PEAT_OK) st = peat_flow_create(flow, cfg, ex, &f);
    if (st == PEAT_OK) st = peat_flow_step(f, &m);
    peat_flow_free(f);
    peat_exec_free(ex);
    if (st == PEAT_OK) st = c.st;
    if (st != PEAT_OK) peat_latency_flow_free(out);
    return st;
}

void peat_latency_flow_free(peat_latency_flow *f)
{
    free(f->calls);
    memset(f, 0, sizeof *f);
}

/* Seconds of a call of kernel k (0 and a NOTFOUND status when k is not calibrated). */
static peat_status kernel_s(const peat_pred_table *t, const peat_latency_env *env,
                            const peat_kernel *k, const peat_op_params *p, double *s)
{
    *s = 0;
    if (!k) return PEAT_OK;
    PEAT_TRY(peat_predictor_call(t, k, p, env->clock.mhz, s));
    *s /= env->core_share; /* CPU seconds to wall seconds on this (possibly shared) machine */
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

/* Analysis of one call's elements (added to the accumulators; the signatures come at the end),
 * at the per-element rate of a default campaign's total. */
static double analyze_s(const peat_pred_table *t, const peat_latency_env *env, double elems)
{
    double total = elems * 96.0;
    return peat_latency_work_s(t, PEAT_WORK_ANALYZE, total) / total * elems / env->core_share;
}

peat_status peat_latency_call_cost(const peat_pred_table *t, const peat_latency_env *env,
                                   const peat_kernel *k, const peat_latency_call *call,
                                   peat_latency_callcost *cc)
{
    memset(cc, 0, sizeof *cc);
    const char *be = env->dev.backend;
    PEAT_TRY(kernel_s(t, env, peat_registry_role(call->op, PEAT_ROLE_GOLDEN, be), &call->p,
                      &cc->golden_s));
    PEAT_TRY(kernel_s(t, env, peat_registry_role(call->op, PEAT_ROLE_EXACT, "cpu"), &call->p,
                      &cc->exact_s));
    if (k) PEAT_TRY(kernel_s(t, env, k, &call->p, &cc->candidate_s));
    const peat_kernel *g = peat_registry_role(call->op, PEAT_ROLE_GOLDEN, "cpu");
    cc->bytes = g ? peat_predictor_call_bytes(g, &call->p) : 0;
    cc->elems = out_elems(call->op, &call->p);
    cc->record_s =
        cc->exact_s + peat_latency_work_s(t, PEAT_WORK_RECORD, cc->bytes) / env->core_share;
    /* the bound's magnitudes cost about an exact call (sums of |terms| in fp64) */
    /* signatures and isolation depend on the whole campaign: peat_latency_costs adds them */
    cc->replay_s = cc->candidate_s + cc->exact_s + analyze_s(t, env, cc->elems);
    return PEAT_OK;
}

/* A CPU-clock curve as wall seconds on this machine. */
static void scale_wall(peat_pred_ktable *kt, double share)
{
    kt->overhead_s /= share;
    for (int i = 0; i < kt->n; i++) kt->t[i] /= share;
}

peat_status peat_latency_costs(const peat_pred_table *t, const peat_latency_env *env,
                               const peat_kernel *k, const peat_latency_flow *fl,
                               peat_pred_costs *c)
{
    memset(c, 0, sizeof *c);
    double dispatch = peat_latency_work_s(t, PEAT_WORK_DISPATCH, 1) / env->core_share;
    int64_t n_op = 0;
    double swap = 0, elems = 0, bytes = 0;
    for (int64_t i = 0; i < fl->n; i++) {
        peat_latency_callcost cc;
        int mine = fl->calls[i].op == k->op;
        PEAT_TRY(peat_latency_call_cost(t, env, mine ? k : NULL, &fl->calls[i], &cc));
        c->iter_s += cc.golden_s + dispatch;
        if (!mine) continue;
        n_op++;
        elems += cc.elems, bytes += cc.bytes;
        c->record_s += cc.record_s;
        c->replay_s += cc.replay_s;
        c->probe_s += cc.candidate_s + cc.golden_s + cc.exact_s + analyze_s(t, env, cc.elems);
        c->trial_s += analyze_s(t, env, cc.elems) + dispatch;
        swap += cc.candidate_s - cc.golden_s;
    }
    if (n_op == 0)
        return PEAT_ERROR(PEAT_ERR_INVAL, "the flow never calls %s", peat_op_name(k->op));
    c->record_s /= (double)n_op, c->replay_s /= (double)n_op;
    c->probe_s /= (double)n_op, c->trial_s /= (double)n_op;
    c->runtime_iter_s = c->iter_s + swap;
    const peat_pred_ktable *an =
        peat_predictor_table_find(t, peat_latency_work_kernel(PEAT_WORK_SIGNATURE));
    const peat_pred_ktable *iso =
        peat_predictor_table_find(t, peat_latency_work_kernel(PEAT_WORK_ISOLATE));
    if (an) c->analysis = *an;
    if (iso) c->isolate = *iso;
    c->elems_per_call = elems / (double)n_op;
    /* what the process holds per replayed call: the record's inputs and golden outputs (f32) and
     * exact outputs (f64); the analyzer's accumulators are bounded (sketches, a bottom-k sample) */
    c->bytes_per_call = bytes / (double)n_op + 8.0 * c->elems_per_call;
    scale_wall(&c->analysis, env->core_share);
    /* the profile stage's set-up: the step that counts calls, the flow's creation and the
     * held-out evaluation (a forward pass over more data): about three iterations */
    c->setup_s = 3.0 * c->iter_s;
    c->fixed_s = 0.0;
    return PEAT_OK;
}

void peat_latency_limits(int64_t default_iters, int64_t default_calls, peat_pred_limits *l)
{
    memset(l, 0, sizeof *l);
    /* the smallest campaign still worth a verdict: a few iterations for the loss to move and
     * enough calls for the analyzer's distributions (docs/predictor.md) */
    l->min.iters = default_iters < 10 ? default_iters : 10;
    l->min.calls = 8;
    l->max.iters = 20 * default_iters;
    l->max.calls = 40 * default_calls;
}

static void print_calls(FILE *f, const peat_latency_env *env, const peat_kernel *k,
                        const peat_pred_table *t, const peat_latency_flow *fl)
{
    fprintf(f, "per op call (%s calls of one iteration; ms):\n", peat_op_name(k->op));
    fprintf(f, "  %-5s %-28s %9s %9s %9s %9s %9s\n", "phase", "params", "golden", "candidate",
            "exact", "record", "replay");
    static const char *ph[] = {"fwd", "bwd", "opt"};
    for (int64_t i = 0; i < fl->n; i++) {
        const peat_latency_call *c = &fl->calls[i];
        if (c->op != k->op) continue;
        peat_latency_callcost cc;
        if (peat_latency_call_cost(t, env, k, c, &cc) != PEAT_OK) continue;
        char params[64];
        snprintf(params, sizeof params, "%lld,%lld,%lld,%lld,%lld,%lld", (long long)c->p.i[0],
                 (long long)c->p.i[1], (long long)c->p.i[2], (long long)c->p.i[3],
                 (long long)c->p.i[4], (long long)c->p.i[5]);
        fprintf(f, "  %-5s %-28s %9.4f %9.4f %9.4f %9.4f %9.4f\n", ph[c->phase], params,
                1e3 * cc.golden_s, 1e3 * cc.candidate_s, 1e3 * cc.exact_s, 1e3 * cc.record_s,
                1e3 * cc.replay_s);
    }
}

void peat_latency_print(FILE *f, const peat_latency_env *env, const peat_kernel *k,
                        const char *flow, const peat_pred_table *t, const peat_latency_flow *fl,
                        const peat_pred_plan *plan)
{
    fprintf(f, "device: %s (%d units, SIMD %d, %.1f GFLOP/s/unit, %.1f GB/s)\n", env->dev.name,
            env->dev.units, env->dev.simd_width, env->dev.peak_flops / 1e9,
            env->dev.bandwidth / 1e9);
    if (env->clock.mhz > 0)
        fprintf(f, "clock: %.0f MHz (%s)%s\n", env->clock.mhz, env->clock.source,
                env->steady ? "" : ", not steady after warm-up");
    else
        fprintf(f, "clock: unknown (no cpufreq, NVML or ROCm SMI here): predictions unscaled\n");
    fprintf(f, "core share: %.2f of a core (CPU seconds predicted, divided by it)\n",
            env->core_share);
    fprintf(f, "kernel %s, flow %s: %lld op calls per iteration\n\n", k->name, flow,
            (long long)fl->n);
    print_calls(f, env, k, t, fl);
    peat_pred_costs c;
    if (peat_latency_costs(t, env, k, fl, &c) != PEAT_OK) return;
    fprintf(f, "\nper iteration: golden %.2f ms, candidate in the loop %.2f ms\n", 1e3 * c.iter_s,
            1e3 * c.runtime_iter_s);
    fprintf(f,
            "\nper stage (%lld iterations, %lld calls, %lld probes, %lld FI trials, %d runtime "
            "frequencies x %lld iterations):\n",
            (long long)plan->iters, (long long)plan->calls, (long long)plan->probes,
            (long long)plan->trials, plan->runtime_freqs, (long long)plan->runtime_iters);
    for (int s = 0; s < PEAT_STAGE_COUNT; s++)
        fprintf(f, "  %-11s %9.2f s\n", peat_predictor_stage_name((peat_pred_stage)s),
                plan->stage_s[s]);
    fprintf(f, "  %-11s %9.2f s\n", "total", plan->total_s);
}
