/* stage_plan.c: the plan stage (`peat run --budget`): the predictor sizes the campaign to fit the
 * budget, and the plan's deadline steers playback while the run goes slower or faster than
 * predicted (docs/predictor.md). */
#include "harness/latency_cli.h"
#include "harness/stages.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

/* The run's predicted time per reported clock, from the plan and its unit costs. */
static void predicted_clocks(peat_campaign_result *res, const peat_pred_costs *c,
                             const peat_pred_plan *p)
{
    double sig =
        c->analysis.n > 0
            ? peat_predictor_ktable_eval(&c->analysis, (double)p->calls * c->elems_per_call)
            : 0.0;
    res->pred_profile = p->stage_s[PEAT_STAGE_PROFILE];
    res->pred_playback = p->stage_s[PEAT_STAGE_PLAYBACK] - sig;
    res->pred_analyze = sig + p->stage_s[PEAT_STAGE_FIXED];
    res->pred_total = res->t_plan + p->total_s;
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

peat_status peat_stage_plan(peat_campaign *c)
{
    const peat_campaign_opts *o = c->o;
    if (!o->budget) return PEAT_OK;
    double budget = 0;
    PEAT_TRY(peat_latency_duration_parse(o->budget, &budget));
    if (o->resume) return PEAT_ERROR(PEAT_ERR_INVAL, "--budget plans a new campaign, not --resume");
    if (o->iters || o->calls)
        return PEAT_ERROR(PEAT_ERR_INVAL, "--budget chooses --iters and --calls: give one or the "
                                          "other");
    peat_latency_opts lo = {.kernel = c->k->name,
                            .flow = c->flow,
                            .backend = c->backend_name,
                            .cache_dir = o->cache_dir,
                            .flow_cfg = peat_campaign_flow_config(o)};
    peat_latency_model m;
    PEAT_TRY(peat_latency_model_open(&lo, &m));
    peat_campaign_result *res = c->res;
    res->budget_s = budget;
    res->t_plan = peat_now() - c->t_start;
    peat_pred_plan p;
    peat_status st =
        peat_latency_budget(&m, budget - res->t_plan, peat_campaign_default_iters(c->flow),
                            PEAT_CAMPAIGN_DEFAULT_CALLS, &p);
    if (st == PEAT_ERR_INVAL) {
        /* said in the user's terms: their budget against the minimum, planning included */
        peat_pred_limits l;
        peat_latency_limits(peat_campaign_default_iters(c->flow), PEAT_CAMPAIGN_DEFAULT_CALLS, &l);
        peat_predictor_plan_cost(&m.costs, &l.min);
        st = PEAT_ERROR(PEAT_ERR_INVAL,
                        "--budget %s is too small: the smallest useful campaign (%lld iterations, "
                        "%lld calls of %s on flow %s) needs %.1f s, %.1f s of it planning",
                        o->budget, (long long)l.min.iters, (long long)l.min.calls, c->k->name,
                        c->flow, res->t_plan + l.min.total_s, res->t_plan);
    }
    if (st == PEAT_OK) {
        c->iters = p.iters, c->calls = p.calls;
        c->planned = 1;
        c->deadline = c->t_start + budget;
        c->costs = m.costs;
        c->core_share = m.env.core_share;
        c->cpu_planned = cpu_seconds();
        predicted_clocks(res, &m.costs, &p);
        snprintf(res->plan_note, sizeof res->plan_note, "clock %s; core share %.2f%s",
                 m.env.clock.mhz > 0 ? m.env.clock.source
                                     : "unknown (no cpufreq, NVML or ROCm SMI)",
                 m.env.core_share, m.calib_s > 0 ? "; calibrated first" : "");
    }
    peat_latency_model_close(&m);
    return st;
}

/* What the campaign still needs once `replayed` calls are replayed (the one about to run
 * included), as the load of a shared machine changes under a plan: the calls at the pace the
 * replayed ones actually went (the profile stage's pace before there are a few), the closing
 * signatures (CPU seconds predicted) at the share of a core the CPU-bound profile stage got
 * (playback's own share is no measure: the parent sleeps while a child runs the candidate). */
static double tail_s(peat_campaign *c, int64_t replayed)
{
    const peat_pred_costs *k = &c->costs;
    double now = peat_now(), cpu = cpu_seconds(), n = (double)replayed;
    double iso =
        k->isolate.n ? peat_predictor_ktable_eval(&k->isolate, 0.5 * n * k->bytes_per_call) : 0;
    if (replayed == 1) {
        /* the profile stage is CPU-bound in this process: its share of a core is the one the
         * closing signatures will get */
        c->t_playback = now, c->cpu_playback = cpu;
        double prof = c->res->pred_profile;
        c->slow = prof > 0 ? c->res->t_profile / prof : 1.0;
        c->share =
            c->res->t_profile > 0 ? (cpu - c->cpu_planned) / c->res->t_profile : c->core_share;
    } else if (replayed > 8 && now > c->t_playback) {
        double pred = (n - 1) * (k->replay_s + iso);
        if (pred > 0) c->slow = (now - c->t_playback) / pred;
    }
    double slow = c->slow < 0.8 ? 0.8 : c->slow;
    double share = c->share > 0.05 ? c->share : 0.05;
    double sig_cpu =
        k->analysis.n
            ? peat_predictor_ktable_eval(&k->analysis, n * k->elems_per_call) * c->core_share
            : 0.0;
    return slow * (k->replay_s + iso) + sig_cpu / share + k->fixed_s;
}

int peat_stage_plan_stop(peat_campaign *c, int64_t replayed)
{
    return c->planned && peat_now() + tail_s(c, replayed) > c->deadline;
}
