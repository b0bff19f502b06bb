/* latency_cli.c: what `peat calibrate-latency`, `peat predict` and `peat run --budget` do with the
 * predictor: calibrate (or reuse the cache), predict a campaign, fit one to a budget. */
#include "harness/latency_cli.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "harness/harness.h"

static void print_clock(FILE *f, const peat_latency_env *env)
{
    if (env->clock.mhz > 0)
        fprintf(f, "clock: %.0f MHz from %s%s\n", env->clock.mhz, env->clock.source,
                env->steady ? ", steady after warm-up" : ", NOT steady after warm-up");
    else
        fprintf(f, "clock: unknown here (no cpufreq, NVML or ROCm SMI): timings carry no clock "
                   "and predictions are not clock-scaled\n");
}

peat_status peat_latency_cli_calibrate(const char *backend, const char *cache_dir, int force,
                                       FILE *out)
{
    PEAT_TRY(peat_builtin_init());
    double t0 = peat_predictor_now();
    peat_latency_env env;
    PEAT_TRY(peat_latency_env_open(backend, &env));
    peat_pred_table t;
    peat_latency_calib c;
    PEAT_TRY(peat_latency_calibrate(&env, cache_dir, force, &t, &c, out));
    fprintf(out, "device: %s (%d units, SIMD %d, %.2f GFLOP/s a unit, %.1f GB/s)\n", env.dev.name,
            env.dev.units, env.dev.simd_width, env.dev.peak_flops / 1e9, env.dev.bandwidth / 1e9);
    print_clock(out, &env);
    fprintf(out, "%-26s %-8s %6s %12s %12s\n", "kernel", "class", "points", "overhead us",
            "largest ms");
    for (int i = 0; i < t.n; i++) {
        const peat_pred_ktable *k = &t.k[i];
        fprintf(out, "%-26s %-8s %6d %12.2f %12.3f\n", k->kernel,
                k->cls == PEAT_PRED_COMPUTE ? "compute" : "memory", k->n, 1e6 * k->overhead_s,
                1e3 * k->t[k->n - 1]);
    }
    fprintf(out, "cache: %s\n", c.cache_path);
    fprintf(out,
            "calibrated %d kernels and harness steps, reused %d from the cache; calibration cost "
            "%.2f s (%.2f s with device description and warm-up)\n",
            c.n_calibrated, c.n_reused, c.cost_s, peat_predictor_now() - t0);
    peat_predictor_table_free(&t);
    return PEAT_OK;
}

peat_status peat_latency_flow_for(const peat_kernel *k, const char *flow, const char **out)
{
    if (flow) {
        if (!peat_flow_describe(flow))
            return PEAT_ERROR(PEAT_ERR_NOTFOUND, "unknown flow '%s'", flow);
        if (!(peat_flow_op_mask(flow) & (1u << k->op)))
            return PEAT_ERROR(PEAT_ERR_INVAL, "flow '%s' never calls %s", flow,
                              peat_op_name(k->op));
        *out = flow;
        return PEAT_OK;
    }
    const char *const *names = peat_flow_names();
    for (int i = 0; names[i]; i++)
        if (peat_flow_op_mask(names[i]) & (1u << k->op)) {
            *out = names[i];
            return PEAT_OK;
        }
    return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "no built-in flow calls %s", peat_op_name(k->op));
}

peat_status peat_latency_model_open(const peat_latency_opts *o, peat_latency_model *m)
{
    memset(m, 0, sizeof *m);
    PEAT_TRY(peat_builtin_init());
    m->kernel = peat_registry_find(o->kernel ? o->kernel : "");
    if (!m->kernel)
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "unknown kernel '%s'", o->kernel ? o->kernel : "");
    PEAT_TRY(peat_latency_flow_for(m->kernel, o->flow, &m->flow));
    const char *be =
        o->backend && strcmp(o->backend, "auto") != 0 ? o->backend : m->kernel->backend;
    PEAT_TRY(peat_latency_env_open(be, &m->env));
    peat_latency_calib c;
    PEAT_TRY(peat_latency_calibrate(&m->env, o->cache_dir, 0, &m->table, &c, o->log));
    m->calib_s = c.cost_s;
    peat_status st = peat_latency_flow_capture(m->flow, &o->flow_cfg, &m->calls);
    if (st == PEAT_OK) st = peat_latency_costs(&m->table, &m->env, m->kernel, &m->calls, &m->costs);
    if (st != PEAT_OK) peat_latency_model_close(m);
    return st;
}

void peat_latency_model_close(peat_latency_model *m)
{
    peat_predictor_table_free(&m->table);
    peat_latency_flow_free(&m->calls);
}

/* The plan a campaign with these counts runs (stages this build has; the others stay 0). */
void peat_latency_plan_for(const peat_latency_model *m, int64_t iters, int64_t calls,
                           peat_pred_plan *p)
{
    memset(p, 0, sizeof *p);
    p->iters = iters, p->calls = calls;
    peat_predictor_plan_cost(&m->costs, p);
}

peat_status peat_latency_cli_predict(const peat_latency_opts *o, int64_t iters, int64_t calls,
                                     FILE *out)
{
    peat_latency_model m;
    PEAT_TRY(peat_latency_model_open(o, &m));
    peat_pred_plan p;
    peat_latency_plan_for(&m, iters, calls, &p);
    peat_latency_print(out, &m.env, m.kernel, m.flow, &m.table, &m.calls, &p);
    /* the stages this build does not run yet, per unit, so that their plans can be costed */
    fprintf(out,
            "\nper unit of the other stages: probe %.3f ms, FI trial %.3f ms, runtime-FI "
            "iteration %.2f ms (not run by `peat run` in this build)\n",
            1e3 * m.costs.probe_s, 1e3 * m.costs.trial_s, 1e3 * m.costs.runtime_iter_s);
    if (m.calib_s > 0) fprintf(out, "(calibrated first: %.2f s)\n", m.calib_s);
    peat_latency_model_close(&m);
    return PEAT_OK;
}

peat_status peat_latency_budget(const peat_latency_model *m, double budget_s, int64_t default_iters,
                                int64_t default_calls, peat_pred_plan *plan)
{
    peat_pred_limits l;
    peat_latency_limits(default_iters, default_calls, &l);
    return peat_predictor_plan_fit(&m->costs, &l, budget_s, plan);
}

peat_status peat_latency_duration_parse(const char *s, double *seconds)
{
    char *end = NULL;
    double v = s ? strtod(s, &end) : 0;
    if (!s || end == s || !(v > 0))
        return PEAT_ERROR(PEAT_ERR_INVAL, "duration '%s': want e.g. 90s, 5m, 1h", s ? s : "");
    double mul = 1;
    if (strcmp(end, "") == 0 || strcmp(end, "s") == 0)
        mul = 1;
    else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
        mul = 60;
    else if (strcmp(end, "h") == 0)
        mul = 3600;
    else
        return PEAT_ERROR(PEAT_ERR_INVAL, "duration '%s': unit must be s, m or h", s);
    *seconds = v * mul;
    if (*seconds > 7 * 86400) return PEAT_ERROR(PEAT_ERR_INVAL, "duration '%s' over a week", s);
    return PEAT_OK;
}

static void flow_cfg_from(const peat_campaign_opts *o, peat_flow_config *c)
{
    memset(c, 0, sizeof *c);
    c->seed = o->seed;
    c->weight_decay = -1.0;
    c->task = o->task;
    c->batch = o->batch, c->width = o->width, c->depth = o->depth, c->seq = o->seq;
    c->lr = o->lr;
    c->optimizer = o->optimizer && !strcmp(o->optimizer, "sgd") ? PEAT_OPTIM_SGD : PEAT_OPTIM_ADAMW;
}

/* CPU seconds of this process and its finished children (the isolated candidate calls). */
static double cpu_seconds(void)
{
    struct rusage a, b;
    getrusage(RUSAGE_SELF, &a);
    getrusage(RUSAGE_CHILDREN, &b);
    return (double)(a.ru_utime.tv_sec + a.ru_stime.tv_sec + b.ru_utime.tv_sec + b.ru_stime.tv_sec) +
           1e-6 * (double)(a.ru_utime.tv_usec + a.ru_stime.tv_usec + b.ru_utime.tv_usec +
                           b.ru_stime.tv_usec);
}

/* What the campaign still needs once `replayed` calls are replayed (the one about to run
 * included), as the load of a shared machine changes under a plan: the calls at the pace the
 * replayed ones actually went (the profile stage's pace before there are a few), the closing
 * analysis (CPU seconds predicted) at the share of a core the process gets now. */
static double budget_tail(void *user, int64_t replayed)
{
    peat_latency_run *lr = user;
    const peat_pred_costs *c = &lr->costs;
    double now = peat_predictor_now(), cpu = cpu_seconds(), n = (double)replayed;
    double iso =
        c->isolate.n ? peat_predictor_ktable_eval(&c->isolate, 0.5 * n * c->bytes_per_call) : 0;
    if (replayed == 1) {
        lr->t_playback = now, lr->cpu_playback = cpu;
        double prof = lr->plan.stage_s[PEAT_STAGE_PROFILE];
        lr->slow = prof > 0 ? (now - lr->t_start - lr->plan_s) / prof : 1.0;
        lr->share = lr->core_share;
    } else if (replayed > 8 && now > lr->t_playback) {
        double pred = (n - 1) * (c->replay_s + iso);
        lr->slow = pred > 0 ? (now - lr->t_playback) / pred : lr->slow;
        lr->share = (cpu - lr->cpu_playback) / (now - lr->t_playback);
    }
    double slow = lr->slow < 0.8 ? 0.8 : lr->slow;
    double share = lr->share > 0.05 ? lr->share : 0.05;
    double analysis_cpu =
        c->analysis.n
            ? peat_predictor_ktable_eval(&c->analysis, n * c->elems_per_call) * lr->core_share
            : 0;
    return slow * (c->replay_s + iso) + analysis_cpu / share + c->fixed_s;
}

peat_status peat_latency_run_plan(peat_campaign_opts *o, double budget_s, peat_latency_run *lr,
                                  FILE *out)
{
    memset(lr, 0, sizeof *lr);
    lr->budget_s = budget_s;
    lr->t_start = peat_predictor_now();
    peat_latency_opts lo = {
        .kernel = o->kernel, .flow = o->flow, .backend = o->backend, .log = out};
    flow_cfg_from(o, &lo.flow_cfg);
    peat_latency_model m;
    PEAT_TRY(peat_latency_model_open(&lo, &m));
    lr->core_share = m.env.core_share;
    lr->plan_s = peat_predictor_now() - lr->t_start;
    int64_t iters = peat_campaign_default_iters(m.flow);
    peat_status st = peat_latency_budget(&m, budget_s - lr->plan_s, iters,
                                         PEAT_CAMPAIGN_DEFAULT_CALLS, &lr->plan);
    if (st == PEAT_OK) {
        o->iters = lr->plan.iters, o->calls = lr->plan.calls;
        lr->costs = m.costs;
        o->deadline = lr->t_start + budget_s;
        o->tail_s = budget_tail;
        o->tail_user = lr;
        fprintf(out,
                "plan: %lld iterations, %lld calls on flow %s: %.1f s predicted of %.1f s budget "
                "(%.1f s spent planning%s; core share %.2f)\n",
                (long long)o->iters, (long long)o->calls, m.flow, lr->plan.total_s, budget_s,
                lr->plan_s, m.calib_s > 0 ? ", with calibration" : "", m.env.core_share);
        if (m.env.clock.mhz <= 0)
            fprintf(out, "plan: clock unknown here (no cpufreq, NVML or ROCm SMI); predictions "
                         "are not clock-scaled\n");
    }
    peat_latency_model_close(&m);
    return st;
}

void peat_latency_run_print(FILE *f, const peat_latency_run *lr, const peat_campaign_result *r)
{
    const peat_pred_plan *p = &lr->plan;
    double total = peat_predictor_now() - lr->t_start;
    double fixed = total - lr->plan_s - r->t_profile - r->t_playback - r->t_analyze;
    struct {
        const char *name;
        double pred, act;
    } rows[] = {
        {"plan", 0, lr->plan_s},
        {"profile", p->stage_s[PEAT_STAGE_PROFILE], r->t_profile},
        {"playback", p->stage_s[PEAT_STAGE_PLAYBACK], r->t_playback + r->t_analyze},
        {"set-up+report", p->stage_s[PEAT_STAGE_FIXED], fixed},
        {"total", lr->plan_s + p->total_s, total},
    };
    fprintf(f, "%-14s %10s %10s %8s\n", "stage", "predicted", "actual", "error");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        fprintf(f, "%-14s %9.2fs %9.2fs %+7.0f%%\n", rows[i].name, rows[i].pred, rows[i].act,
                rows[i].act > 0 && rows[i].pred > 0
                    ? 100 * (rows[i].pred - rows[i].act) / rows[i].act
                    : 0.0);
    fprintf(f, "budget %.1f s, used %.1f s (%+.0f%%)\n", lr->budget_s, total,
            100 * (total - lr->budget_s) / lr->budget_s);
    if (r->n_budget_skipped > 0)
        fprintf(f,
                "the run was slower than predicted: %lld of %lld recorded calls were not "
                "replayed, to end within the budget\n",
                (long long)r->n_budget_skipped, (long long)r->n_records);
}
