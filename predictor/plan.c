/* plan.c: campaign cost from per-unit costs, and the budget planner (largest plan that fits). */
#include "predictor/predictor.h"

#include <math.h>
#include <stdio.h>

const char *peat_predictor_stage_name(peat_pred_stage s)
{
    static const char *n[PEAT_STAGE_COUNT] = {"profile",   "playback",   "probes",
                                              "fi-trials", "runtime-fi", "fixed"};
    return s >= 0 && s < PEAT_STAGE_COUNT ? n[s] : "?";
}

void peat_predictor_plan_cost(const peat_pred_costs *c, peat_pred_plan *p)
{
    p->stage_s[PEAT_STAGE_PROFILE] =
        c->setup_s + (double)p->iters * c->iter_s + (double)p->calls * c->record_s;
    p->stage_s[PEAT_STAGE_PLAYBACK] = (double)p->calls * c->replay_s;
    if (c->analysis.n > 0 && p->calls > 0)
        p->stage_s[PEAT_STAGE_PLAYBACK] +=
            peat_predictor_ktable_eval(&c->analysis, (double)p->calls * c->elems_per_call);
    /* the i-th isolated call forks a process holding i records: on average half of them */
    if (c->isolate.n > 0)
        p->stage_s[PEAT_STAGE_PLAYBACK] +=
            (double)p->calls *
            peat_predictor_ktable_eval(&c->isolate, 0.5 * (double)p->calls * c->bytes_per_call);
    p->stage_s[PEAT_STAGE_PROBES] = (double)p->probes * c->probe_s;
    p->stage_s[PEAT_STAGE_FI] = (double)p->trials * c->trial_s;
    p->stage_s[PEAT_STAGE_RUNTIME] =
        (double)p->runtime_freqs * (double)p->runtime_iters * c->runtime_iter_s;
    p->stage_s[PEAT_STAGE_FIXED] = c->fixed_s;
    p->total_s = 0;
    for (int s = 0; s < PEAT_STAGE_COUNT; s++) p->total_s += p->stage_s[s];
}

static int64_t lerp(int64_t lo, int64_t hi, double f)
{
    return lo + (int64_t)floor(f * (double)(hi - lo));
}

/* The plan at fraction f of the way from min to max, every count scaled together. */
static peat_pred_plan at(const peat_pred_costs *c, const peat_pred_limits *l, double f)
{
    peat_pred_plan p = l->min;
    p.iters = lerp(l->min.iters, l->max.iters, f);
    p.calls = lerp(l->min.calls, l->max.calls, f);
    p.probes = lerp(l->min.probes, l->max.probes, f);
    p.trials = lerp(l->min.trials, l->max.trials, f);
    p.runtime_freqs = (int)lerp(l->min.runtime_freqs, l->max.runtime_freqs, f);
    p.runtime_iters = lerp(l->min.runtime_iters, l->max.runtime_iters, f);
    peat_predictor_plan_cost(c, &p);
    return p;
}

peat_status peat_predictor_plan_fit(const peat_pred_costs *c, const peat_pred_limits *l,
                                    double budget_s, peat_pred_plan *out)
{
    peat_pred_plan lo = at(c, l, 0.0);
    if (lo.total_s > budget_s)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "budget %.1f s is too small: the smallest useful campaign (%lld "
                          "iterations, %lld calls) needs %.1f s",
                          budget_s, (long long)lo.iters, (long long)lo.calls, lo.total_s);
    peat_pred_plan hi = at(c, l, 1.0);
    if (hi.total_s <= budget_s) {
        *out = hi;
        return PEAT_OK;
    }
    /* total cost is non-decreasing in f (every count is): bisection to the last f that fits */
    double a = 0.0, b = 1.0;
    for (int it = 0; it < 60; it++) {
        double m = 0.5 * (a + b);
        if (at(c, l, m).total_s <= budget_s)
            a = m;
        else
            b = m;
    }
    *out = at(c, l, a);
    return PEAT_OK;
}
