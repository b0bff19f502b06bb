/* plan.c: a campaign following the plan of `peat run --budget` (view.h; the plan stage,
 * harness/latency/stage_plan.c, makes it): its size, its predictions, and the deadline that
 * steers playback and runtime FI while the run goes slower or faster than predicted
 * (docs/predictor.md). */
#include "harness/campaign/stages.h"

#include <string.h>

static int plan_stop(peat_campaign *c, int64_t replayed);
static int64_t plan_runtime_iters(peat_campaign *c);
static int64_t plan_runtime_steer(void *user, int64_t done, int64_t every, double loop_s);

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

void peat_campaign_plan_follow(peat_campaign *c, const peat_campaign_plan *pl)
{
    peat_campaign_result *res = c->res;
    res->budget_s = pl->budget_s;
    res->t_plan = pl->t_plan;
    if (!pl->ok) return;
    const peat_pred_plan *p = &pl->plan;
    c->iters = p->iters, c->calls = p->calls;
    c->min_calls = pl->min_calls, c->min_iters = pl->min_iters;
    c->max_iters = pl->max_iters;
    c->planned = 1;
    c->deadline = c->t_start + pl->budget_s;
    c->costs = pl->costs;
    c->plan = *p;
    predicted_clocks(res, p);
    /* the rules the stages after the plan follow (stages.h) */
    c->playback_stop = plan_stop;
    c->runtime_iters = plan_runtime_iters;
    c->runtime_steer = plan_runtime_steer;
    res->plan_iters = p->iters, res->plan_calls = p->calls;
    snprintf(res->plan_note, sizeof res->plan_note, "%s", pl->note);
}

/* Playback's steering before each replayed call (`replayed` of them with this one), as the load
 * of a shared machine changes under a plan: the calls at the pace the replayed ones actually
 * went (wall seconds per predicted CPU second; the profile stage's pace before there are a few),
 * probes at the same pace (forks too), the other stages after playback at the pace the profile
 * stage went against its prediction (CPU-bound in this process; playback's pace is no measure of
 * them: the parent sleeps while a child runs the candidate). */
static int plan_stop(peat_campaign *c, int64_t replayed)
{
    if (!c->planned) return 0;
    const peat_pred_costs *k = &c->costs;
    const peat_pred_plan *p = &c->plan;
    double now = peat_clock_now();
    double prof = c->res->pred_profile, prof_cpu = p->stage_cpu_s[PEAT_STAGE_PROFILE];
    if (replayed == 1) {
        c->t_playback = now;
        c->slow = prof_cpu > 0 ? c->res->t_profile / prof_cpu : 1.0;
        c->later_slow = prof > 0 ? c->res->t_profile / prof : 1.0;
    } else if (replayed > 8 && now > c->t_playback) {
        double pred =
            (double)(replayed - 1) * (k->replay_s + peat_predictor_isolate_s(k, p->calls));
        if (pred > 0) c->slow = (now - c->t_playback) / pred;
    }
    double floor_slow = 0.8 / (k->share > 0 ? k->share : 1.0);
    peat_pred_playback_steer s = {.replayed = replayed,
                                  .min_calls = c->min_calls,
                                  .min_runtime_iters = c->min_iters,
                                  .pace = c->slow < floor_slow ? floor_slow : c->slow,
                                  .later_pace = c->later_slow < 0.8 ? 0.8 : c->later_slow,
                                  .left_s = c->deadline - now};
    return !peat_predictor_playback_go(k, p, &s);
}

/* What follows runtime FI (the commit of the campaign file, the report), at the pace the stages
 * before went against their prediction. */
static double after_runtime_s(const peat_campaign *c)
{
    double later = c->later_slow < 0.8 ? 0.8 : c->later_slow;
    double share = c->costs.share > 0 ? c->costs.share : 1.0;
    return later * (c->costs.analyze_fixed_s / share + c->plan.stage_s[PEAT_STAGE_OTHER]);
}

/* Runtime FI's iterations when it starts under a plan: the planned ones, or as many as its own
 * prediction still fits before the deadline (never below the smallest campaign's). They are
 * steered while the runs train (plan_runtime_steer), at the pace they go: the stages
 * before, other work, say little about it. */
static int64_t plan_runtime_iters(peat_campaign *c)
{
    if (!c->planned || c->plan.runtime_iters <= 0) return c->iters;
    double left = c->deadline - peat_clock_now() - after_runtime_s(c);
    return peat_predictor_runtime_fit(&c->costs, &c->plan, c->min_iters, 1.0, left);
}

/* runtime.c's steering under a plan (user: the campaign): the runs' new total of iterations
 * after `done` of them took loop_s (peat_predictor_runtime_steer against the deadline). */
static int64_t plan_runtime_steer(void *user, int64_t done, int64_t every, double loop_s)
{
    peat_campaign *c = user;
    /* a ring of when the last iterations ended: the window's pace */
    int64_t w = done < PEAT_PRED_STEER_WINDOW ? done : PEAT_PRED_STEER_WINDOW;
    double *ring = c->steer_s, then = w == done ? 0.0 : ring[done % PEAT_PRED_STEER_WINDOW];
    ring[done % PEAT_PRED_STEER_WINDOW] = loop_s;
    peat_pred_steer s = {.done = done,
                         .every = every,
                         .elapsed_s = loop_s,
                         .window_n = w,
                         .window_s = loop_s - then,
                         .left_s = c->deadline - peat_clock_now() - after_runtime_s(c),
                         .min_iters = c->min_iters,
                         .max_iters = c->max_iters};
    int64_t n = peat_predictor_runtime_steer(&c->costs, &s);
    c->res->runtime_iters = n;
    return n;
}
