/* latency_cli.c: what `peat calibrate-latency`, `peat predict` and `peat run --budget` do with the
 * predictor: calibrate (or reuse the cache), predict a campaign, fit one to a budget. */
#include "harness/latency/latency_cli.h"

#include <stdlib.h>
#include <string.h>

#include "harness/runtime/builtin.h"
#include "harness/runtime/runtime.h"

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
    PEAT_TRY(peat_runtime_builtin_init());
    double t0 = peat_predictor_now();
    peat_latency_env env;
    PEAT_TRY(peat_latency_env_init(backend, &env));
    peat_pred_table t;
    peat_latency_calib c;
    PEAT_TRY(peat_latency_calibrate(&env, cache_dir, force, NULL, &t, &c, out));
    char bw[32] = "bandwidth unknown";
    if (env.dev.bandwidth > 0) snprintf(bw, sizeof bw, "%.1f GB/s", env.dev.bandwidth / 1e9);
    fprintf(out, "device: %s (%d units, SIMD %d, %.2f GFLOP/s a unit, %s)\n", env.dev.name,
            env.dev.units, env.dev.simd_width, env.dev.peak_flops / 1e9, bw);
    print_clock(out, &env);
    fprintf(out, "%-26s %-8s %6s %12s %12s\n", "kernel", "class", "points", "overhead us",
            "largest ms");
    const peat_kernel *held = peat_latency_work_kernel(PEAT_WORK_HELD);
    for (int i = 0; i < t.n; i++) {
        const peat_pred_ktable *k = &t.k[i];
        if (!strcmp(k->kernel, held->name)) { /* a size, not a time */
            fprintf(out, "%-26s %-8s %6d %12s %9.1f MB\n", k->kernel, "bytes", k->n, "-",
                    k->t[k->n - 1] / 1e6);
            continue;
        }
        fprintf(out, "%-26s %-8s %6d %12.2f %12.3f\n", k->kernel,
                k->cls == PEAT_PRED_COMPUTE ? "compute" : "memory", k->n, 1e6 * k->overhead_s,
                1e3 * k->t[k->n - 1]);
    }
    fprintf(out, "cache: %s\n", c.cache_path);
    fprintf(out,
            "calibrated %d kernels and harness steps, reused %d from the cache; calibration cost "
            "%.2f s (%.2f s with device description and warm-up)\n",
            c.n_calibrated, c.n_reused, c.cost_s, peat_predictor_now() - t0);
    if (c.n_failed)
        fprintf(out, "%d candidate kernel(s) could not be timed (above): left out of the table\n",
                c.n_failed);
    long timings, quiet;
    peat_predictor_gate_stats(&timings, &quiet);
    if (timings > quiet)
        fprintf(out,
                "quiet gate: %ld of %ld kernel timings left out, taken while the core ran slow "
                "(probe over %.2fx its best)\n",
                timings - quiet, timings, PEAT_PRED_QUIET);
    peat_predictor_table_free(&t);
    return PEAT_OK;
}

peat_status peat_latency_flow_for(const peat_kernel *k, const char *flow, const char **out)
{
    if (flow) {
        if (!peat_models_flow_describe(flow))
            return PEAT_ERROR(PEAT_ERR_NOTFOUND, "unknown flow '%s'", flow);
        if (!(peat_models_flow_op_mask(flow) & PEAT_OP_BIT(k->op)))
            return PEAT_ERROR(PEAT_ERR_INVAL, "flow '%s' never calls %s", flow,
                              peat_op_name(k->op));
        *out = flow;
        return PEAT_OK;
    }
    const char *const *names = peat_models_flow_names();
    for (int i = 0; names[i]; i++)
        if (peat_models_flow_op_mask(names[i]) & PEAT_OP_BIT(k->op)) {
            *out = names[i];
            return PEAT_OK;
        }
    return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "no built-in flow calls %s", peat_op_name(k->op));
}

peat_status peat_latency_model_init(const peat_latency_opts *o, peat_latency_model *m)
{
    memset(m, 0, sizeof *m);
    PEAT_TRY(peat_runtime_builtin_init());
    if (o->run)
        m->run = *o->run;
    else
        peat_campaign_opts_default(&m->run);
    m->kernel = peat_registry_find(o->kernel ? o->kernel : "");
    if (!m->kernel)
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "unknown kernel '%s'", o->kernel ? o->kernel : "");
    PEAT_TRY(peat_latency_flow_for(m->kernel, o->flow, &m->flow));
    const char *be =
        o->backend && strcmp(o->backend, "auto") != 0 ? o->backend : m->kernel->backend;
    PEAT_TRY(peat_latency_env_init(be, &m->env));
    peat_latency_calib c;
    PEAT_TRY(peat_latency_calibrate(&m->env, o->cache_dir, 0, m->kernel, &m->table, &c, o->log));
    int band = m->run.runtime_band > 0 ? m->run.runtime_band : PEAT_RUNTIME_DEFAULT_BAND;
    peat_status st = m->run.no_runtime
                         ? PEAT_OK
                         : peat_latency_calibrate_band(&m->env, m->kernel->op, band, &m->table, &c);
    m->calib_s = c.cost_s;
    peat_latency_env_speed(&m->env, &m->table);
    if (st == PEAT_OK)
        st = peat_latency_flow_capture(m->flow, &o->flow_cfg, m->kernel->op, &m->calls);
    if (st == PEAT_OK)
        st = peat_latency_costs(&m->table, &m->env, m->kernel, &m->calls, &m->run, &m->costs);
    if (st != PEAT_OK) peat_latency_model_close(m);
    return st;
}

void peat_latency_model_close(peat_latency_model *m)
{
    peat_predictor_table_free(&m->table);
    peat_latency_flow_free(&m->calls);
}

peat_status peat_latency_plan_for(const peat_latency_model *m, int64_t iters, int64_t calls,
                                  peat_pred_plan *p)
{
    PEAT_TRY(peat_latency_plan_counts(&m->calls, &m->run, iters, calls, p));
    peat_predictor_plan_cost(&m->costs, p);
    return PEAT_OK;
}

peat_status peat_latency_cli_predict(const peat_latency_opts *o, int64_t iters, int64_t calls,
                                     FILE *out)
{
    peat_latency_model m;
    PEAT_TRY(peat_latency_model_init(o, &m));
    peat_pred_plan p;
    peat_status st = peat_latency_plan_for(&m, iters, calls, &p);
    if (st == PEAT_OK)
        peat_latency_print(out, &m.env, m.kernel, m.flow, &m.table, &m.calls, &m.costs, &p);
    if (st == PEAT_OK && m.calib_s > 0) fprintf(out, "(calibrated first: %.2f s)\n", m.calib_s);
    peat_latency_model_close(&m);
    return st;
}

peat_status peat_latency_budget(const peat_latency_model *m, double budget_s, int64_t default_iters,
                                int64_t default_calls, peat_pred_plan *plan)
{
    peat_pred_limits l;
    PEAT_TRY(peat_latency_limits(&m->calls, &m->run, default_iters, default_calls, &l));
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
