/* stage_plan.c: the plan stage (`peat run --budget`): the predictor sizes the campaign to fit the
 * budget, and the plan's deadline steers playback while the run goes slower or faster than
 * predicted (docs/predictor.md). */
#include "harness/latency_cli.h"
#include "harness/stages.h"

#include <stdio.h>
#include <string.h>

/* The run's predicted time per reported clock, from the plan. */
static void predicted_clocks(peat_campaign_result *res, const peat_pred_plan *p)
{
    res->pred_profile = p->stage_s[PEAT_STAGE_PROFILE];
    res->pred_playback = p->stage_s[PEAT_STAGE_PLAYBACK];
    res->pred_probe = p->stage_s[PEAT_STAGE_PROBES];
    res->pred_analyze = p->stage_s[PEAT_STAGE_ANALYZE];
    res->pred_runtime = p->stage_s[PEAT_STAGE_RUNTIME];
    res->pred_total = res->t_plan + p->total_s;
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
                            .flow_cfg = peat_campaign_flow_config(o),
                            .run = o};
    peat_latency_model m;
    PEAT_TRY(peat_latency_model_open(&lo, &m));
    peat_campaign_result *res = c->res;
    res->budget_s = budget;
    res->t_plan = peat_now() - c->t_start;
    peat_pred_plan p;
    peat_status st =
        peat_latency_budget(&m, budget - res->t_plan, peat_campaign_default_iters(c->flow),
                            PEAT_CAMPAIGN_DEFAULT_CALLS, &p);
    peat_pred_limits l;
    if (st == PEAT_OK || st == PEAT_ERR_INVAL) {
        peat_status lst = peat_latency_limits(&m.calls, o, peat_campaign_default_iters(c->flow),
                                              PEAT_CAMPAIGN_DEFAULT_CALLS, &l);
        if (lst != PEAT_OK) st = lst;
    }
    if (st == PEAT_ERR_INVAL) {
        /* said in the user's terms: their budget against the minimum, planning included */
        peat_predictor_plan_cost(&m.costs, &l.min);
        st = PEAT_ERROR(PEAT_ERR_INVAL,
                        "--budget %s is too small: the smallest useful campaign (%lld iterations, "
                        "%lld calls of %s on flow %s) needs %.1f s, %.1f s of it planning",
                        o->budget, (long long)l.min.iters, (long long)l.min.calls, c->k->name,
                        c->flow, res->t_plan + l.min.total_s, res->t_plan);
    }
    if (st == PEAT_OK) {
        c->iters = p.iters, c->calls = p.calls;
        c->min_calls = l.min.calls, c->min_iters = l.min.runtime_iters;
        c->planned = 1;
        c->deadline = c->t_start + budget;
        c->costs = m.costs;
        c->plan = p;
        predicted_clocks(res, &p);
        res->plan_iters = p.iters, res->plan_calls = p.calls;
        snprintf(res->plan_note, sizeof res->plan_note,
                 "planned %lld iterations, %lld calls; clock %s; core share %.2f%s",
                 (long long)p.iters, (long long)p.calls,
                 m.env.clock.mhz > 0 ? m.env.clock.source
                                     : "unknown (no cpufreq, NVML or ROCm SMI)",
                 m.env.core_share, m.calib_s > 0 ? "; calibrated first" : "");
    }
    peat_latency_model_close(&m);
    return st;
}

/* What the campaign still needs once `replayed` calls are replayed (the one about to run
 * included), as the load of a shared machine changes under a plan: the calls at the pace the
 * replayed ones actually went (the profile stage's pace before there are a few), and the stages
 * after playback (probes, analyze, runtime FI) as predicted, at the pace the profile stage went
 * against its prediction (like them, CPU-bound in this process; playback's own pace is no
 * measure of them: the parent sleeps while a child runs the candidate). */
static double tail_s(peat_campaign *c, int64_t replayed)
{
    const peat_pred_costs *k = &c->costs;
    const peat_pred_plan *p = &c->plan;
    double now = peat_now(), n = (double)replayed;
    double iso =
        k->isolate.n
            ? peat_predictor_ktable_eval(&k->isolate, k->base_bytes + 0.5 * n * k->bytes_per_call)
            : 0;
    double prof = c->res->pred_profile, prof_cpu = p->stage_cpu_s[PEAT_STAGE_PROFILE];
    if (replayed == 1) {
        /* playback's pace in wall seconds per predicted CPU second (its costs are CPU seconds),
         * the profile stage's until calls are replayed; later stages' pace against their wall
         * prediction */
        c->t_playback = now;
        c->slow = prof_cpu > 0 ? c->res->t_profile / prof_cpu : 1.0;
        c->later_slow = prof > 0 ? c->res->t_profile / prof : 1.0;
    } else if (replayed > 8 && now > c->t_playback) {
        double pred = (n - 1) * (k->replay_s + iso);
        if (pred > 0) c->slow = (now - c->t_playback) / pred;
    }
    double floor_slow = 0.8 / (k->share > 0 ? k->share : 1.0);
    double slow = c->slow < floor_slow ? floor_slow : c->slow;
    double later = c->later_slow < 0.8 ? 0.8 : c->later_slow;
    /* the stages after playback with the calls replayed so far (the signatures grow with them),
     * runtime FI at its smallest: it is cut to the time left itself (plan_runtime_iters), so
     * playback, the campaign's main evidence, keeps its calls before runtime FI its length */
    peat_pred_plan rest = *p;
    rest.calls = replayed;
    if (rest.runtime_iters > c->min_iters) rest.runtime_iters = c->min_iters;
    peat_predictor_plan_cost(k, &rest);
    double after = rest.stage_s[PEAT_STAGE_PROBES] + rest.stage_s[PEAT_STAGE_ANALYZE] +
                   rest.stage_s[PEAT_STAGE_RUNTIME] + rest.stage_s[PEAT_STAGE_OTHER];
    return slow * (k->replay_s + iso) + later * after;
}

int peat_stage_plan_stop(peat_campaign *c, int64_t replayed)
{
    if (!c->planned) return 0;
    /* the pace is measured from the first call on; the smallest useful campaign's calls are
     * always replayed (a verdict needs them) */
    double tail = tail_s(c, replayed);
    return replayed > c->min_calls && peat_now() + tail > c->deadline;
}

/* Runtime FI's iterations under a plan: the planned ones, or as many as still fit before the
 * deadline when the run is behind (the runs train from scratch, so fewer iterations are a
 * shorter run, not a broken one), at the pace the stages so far went against their prediction;
 * never below the smallest campaign's. */
int64_t peat_stage_plan_runtime_iters(peat_campaign *c)
{
    const peat_campaign_result *r = c->res;
    if (!c->planned || c->plan.runtime_iters <= 0) return c->iters;
    /* the prediction of what ran: playback may have replayed fewer calls than planned */
    peat_pred_plan ran = c->plan;
    ran.calls = r->n_records - r->n_budget_skipped;
    peat_predictor_plan_cost(&c->costs, &ran);
    double pred = r->pred_profile + ran.stage_s[PEAT_STAGE_PLAYBACK] +
                  ran.stage_s[PEAT_STAGE_PROBES] + ran.stage_s[PEAT_STAGE_ANALYZE];
    double done = r->t_profile + r->t_playback + r->t_probe + r->t_analyze;
    double pace = pred > 0 ? done / pred : 1.0;
    if (pace < 0.5) pace = 0.5;
    if (pace > 4.0) pace = 4.0;
    double left = c->deadline - peat_now() - pace * c->plan.stage_s[PEAT_STAGE_OTHER];
    return peat_predictor_runtime_fit(&c->costs, &c->plan, c->min_iters, pace, left);
}
