/* stage_plan.c: the plan stage (`peat run --budget`): the predictor sizes the campaign to fit the
 * budget, and the campaign follows the plan (harness/campaign/view.h: its deadline steers
 * playback and runtime FI while the run goes slower or faster than predicted; docs/predictor.md).
 */
#include "harness/latency/latency_cli.h"
#include "harness/campaign/view.h"

#include <stdio.h>
#include <string.h>

/* Refuses --budget beside the options it decides or cannot plan. */
static peat_status budget_check(const peat_campaign_opts *o)
{
    if (o->resume) return PEAT_ERROR(PEAT_ERR_INVAL, "--budget plans a new campaign, not --resume");
    if (o->capture)
        return PEAT_ERROR(PEAT_ERR_INVAL, "--budget plans a built-in flow's run, not --capture");
    if (o->iters || o->calls)
        return PEAT_ERROR(PEAT_ERR_INVAL, "--budget chooses --iters and --calls: give one or the "
                                          "other");
    return PEAT_OK;
}

peat_status peat_latency_stage_plan(peat_campaign *c)
{
    const peat_campaign_opts *o = peat_campaign_view_opts(c);
    if (!o->budget) return PEAT_OK;
    peat_campaign_plan pl;
    memset(&pl, 0, sizeof pl);
    PEAT_TRY(peat_latency_duration_parse(o->budget, &pl.budget_s));
    PEAT_TRY(budget_check(o));
    const char *kernel = peat_campaign_view_kernel(c)->name, *flow = peat_campaign_view_flow(c);
    peat_latency_opts lo = {.kernel = kernel,
                            .flow = flow,
                            .backend = peat_campaign_view_backend(c),
                            .cache_dir = o->cache_dir,
                            .flow_cfg = peat_campaign_flow_config(o),
                            .run = o,
                            /* calibration's one-line notes (a candidate that could not be timed) */
                            .log = o->quiet ? NULL : stderr};
    peat_latency_model m;
    PEAT_TRY(peat_latency_model_init(&lo, &m));
    pl.t_plan = peat_clock_now() - peat_campaign_view_t_start(c);
    peat_status st =
        peat_latency_budget(&m, pl.budget_s - pl.t_plan, peat_campaign_default_iters(flow),
                            PEAT_CAMPAIGN_DEFAULT_CALLS, &pl.plan);
    peat_pred_limits l;
    if (st == PEAT_OK || st == PEAT_ERR_INVAL) {
        peat_status lst = peat_latency_limits(&m.calls, o, peat_campaign_default_iters(flow),
                                              PEAT_CAMPAIGN_DEFAULT_CALLS, &l);
        if (lst != PEAT_OK) st = lst;
    }
    if (st == PEAT_ERR_INVAL) {
        /* said in the user's terms: their budget against the minimum, planning included */
        peat_predictor_plan_cost(&m.costs, &l.min);
        st = PEAT_ERROR(PEAT_ERR_INVAL,
                        "--budget %s is too small: the smallest useful campaign (%lld iterations, "
                        "%lld calls of %s on flow %s) needs %.1f s, %.1f s of it planning",
                        o->budget, (long long)l.min.iters, (long long)l.min.calls, kernel, flow,
                        pl.t_plan + l.min.total_s, pl.t_plan);
    }
    if (st == PEAT_OK) {
        pl.ok = 1;
        pl.costs = m.costs;
        pl.min_calls = l.min.calls, pl.min_iters = l.min.runtime_iters;
        pl.max_iters = l.max.runtime_iters;
        snprintf(pl.note, sizeof pl.note,
                 "planned %lld iterations, %lld calls; clock %s; core share %.2f%s",
                 (long long)pl.plan.iters, (long long)pl.plan.calls,
                 m.env.clock.mhz > 0 ? m.env.clock.source
                                     : "unknown (no cpufreq, NVML or ROCm SMI)",
                 m.env.core_share, m.calib_s > 0 ? "; calibrated first" : "");
    }
    peat_campaign_plan_follow(c, &pl);
    peat_latency_model_close(&m);
    return st;
}
