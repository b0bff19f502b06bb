/* plan.c: campaign cost from per-unit costs, and the budget planner (largest plan that fits). */
#include "predictor/predictor.h"

#include <math.h>
#include <stdio.h>

const char *peat_predictor_stage_name(peat_pred_stage s)
{
    static const char *n[PEAT_STAGE_COUNT] = {"profile",    "playback",  "probes", "analyze",
                                              "runtime-fi", "fi-trials", "other"};
    return s >= 0 && s < PEAT_STAGE_COUNT ? n[s] : "?";
}

int64_t peat_predictor_runtime_eval_every(int64_t iters)
{
    return iters >= PEAT_PRED_RUNTIME_EVALS ? iters / PEAT_PRED_RUNTIME_EVALS : 1;
}

int64_t peat_predictor_runtime_evals(int64_t iters)
{
    /* as harness/runtime/runtime.c schedules them: every interval, and the last */
    return peat_predictor_evals_every(iters, peat_predictor_runtime_eval_every(iters));
}

double peat_predictor_isolate_s(const peat_pred_costs *c, int64_t calls)
{
    if (c->isolate.n <= 0) return 0.0;
    return peat_predictor_ktable_eval(&c->isolate, c->base_bytes + c->held_bytes +
                                                       (double)calls * c->bytes_per_call);
}

/* Playback: the calls replayed (the first `repeats` twice), each isolated from a process that
 * holds every record (the profile stage recorded them all before). */
static double playback_s(const peat_pred_costs *c, const peat_pred_plan *p)
{
    double n = (double)p->calls;
    double rep = (double)(p->repeats < p->calls ? p->repeats : p->calls);
    double s = n * c->replay_s + rep * c->repeat_s;
    if (p->calls > 0) s += (n + rep) * peat_predictor_isolate_s(c, p->calls);
    return s;
}

/* Probes fork from the same process. */
static double probes_s(const peat_pred_costs *c, const peat_pred_plan *p)
{
    if (p->probes <= 0) return 0.0;
    double fork = peat_predictor_isolate_s(c, p->calls);
    return (double)p->probes * (c->probe_s + fork) + c->probe_fixed_s +
           (double)c->probe_fixed_forks * fork;
}

/* Wall seconds of CPU work on one thread. */
static double on_thread(const peat_pred_costs *c, double cpu)
{
    return cpu / (c->share > 0 ? c->share : 1.0);
}

/* Wall seconds of a lockstep step: it waits for its busiest thread, and all threads share the
 * cores the process gets. */
static double lockstep(const peat_pred_costs *c, double crit, double total)
{
    double cores = c->cores > 0 ? c->cores : (c->share > 0 ? c->share : 1.0);
    double a = on_thread(c, crit), b = total / cores;
    return a > b ? a : b;
}

/* Runtime FI's CPU seconds grow by the contention of its runs side by side (the unit costs are
 * measured on one run alone). */
static double contended(const peat_pred_costs *c, double cpu)
{
    return (c->contention > 1.0 ? c->contention : 1.0) * cpu;
}

/* Wall seconds of one runtime-FI iteration (eval 0) or evaluation (eval 1) of every run. */
static double runtime_unit(const peat_pred_costs *c, int eval)
{
    return eval
               ? lockstep(c, contended(c, c->runtime_eval_crit_s), contended(c, c->runtime_eval_s))
               : lockstep(c, contended(c, c->runtime_iter_crit_s), contended(c, c->runtime_iter_s));
}

void peat_predictor_plan_cost(const peat_pred_costs *c, peat_pred_plan *p)
{
    double *cpu = p->stage_cpu_s;
    cpu[PEAT_STAGE_PROFILE] =
        c->setup_s + (double)p->iters * c->iter_s + (double)p->calls * c->record_s;
    cpu[PEAT_STAGE_PLAYBACK] = playback_s(c, p);
    cpu[PEAT_STAGE_PROBES] = probes_s(c, p);
    double sig =
        c->analysis.n > 0 && p->calls > 0
            ? peat_predictor_ktable_eval(&c->analysis, (double)p->calls * c->elems_per_call)
            : 0.0;
    cpu[PEAT_STAGE_ANALYZE] = c->analyze_fixed_s + sig;
    double evals = (double)peat_predictor_runtime_evals(p->runtime_iters);
    double iters = (double)p->runtime_iters;
    cpu[PEAT_STAGE_RUNTIME] = p->runtime_iters > 0
                                  ? c->runtime_fixed_s + contended(c, iters * c->runtime_iter_s +
                                                                          evals * c->runtime_eval_s)
                                  : 0.0;
    cpu[PEAT_STAGE_FI] = (double)p->trials * c->trial_s;
    cpu[PEAT_STAGE_OTHER] = c->other_s;
    p->total_s = p->total_cpu_s = 0;
    for (int s = 0; s < PEAT_STAGE_COUNT; s++) {
        p->stage_s[s] = on_thread(c, cpu[s]);
        /* the candidate's and the golden's signatures are computed on two threads */
        if (s == PEAT_STAGE_ANALYZE)
            p->stage_s[s] = on_thread(c, c->analyze_fixed_s) + lockstep(c, 0.5 * sig, sig);
        if (s == PEAT_STAGE_RUNTIME && p->runtime_iters > 0)
            p->stage_s[s] = on_thread(c, c->runtime_fixed_s) + iters * runtime_unit(c, 0) +
                            evals * runtime_unit(c, 1);
        p->total_s += p->stage_s[s];
        p->total_cpu_s += cpu[s];
    }
}

/* An upper bound of the plan's total that never decreases as its counts grow: the runtime stage's
 * evaluations (every iters/E iterations, E = PEAT_PRED_RUNTIME_EVALS) step down at multiples of E
 * (2E - 1 at 2E - 1 iterations, E at 2E), and never exceed min(iters, 2E - 1), which does not.
 * The planner searches on it, so a larger budget never gets a smaller plan; the plan's own total
 * is at most this. */
static double total_bound(const peat_pred_costs *c, const peat_pred_plan *p)
{
    if (p->runtime_iters <= 0) return p->total_s;
    const int64_t most = 2 * PEAT_PRED_RUNTIME_EVALS - 1;
    int64_t bound = p->runtime_iters < most ? p->runtime_iters : most;
    double extra = (double)(bound - peat_predictor_runtime_evals(p->runtime_iters));
    return p->total_s + extra * runtime_unit(c, 1);
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
    p.repeats = lerp(l->min.repeats, l->max.repeats, f);
    p.probes = lerp(l->min.probes, l->max.probes, f);
    p.trials = lerp(l->min.trials, l->max.trials, f);
    p.runtime_runs = (int)lerp(l->min.runtime_runs, l->max.runtime_runs, f);
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
    /* the smallest campaign fits, its bound not (fewer evaluations than the bound's 2E - 1) */
    if (total_bound(c, &lo) > budget_s) {
        *out = lo;
        return PEAT_OK;
    }
    peat_pred_plan hi = at(c, l, 1.0);
    if (total_bound(c, &hi) <= budget_s) {
        *out = hi;
        return PEAT_OK;
    }
    /* the bound is non-decreasing in f (every count is): bisection to the last f that fits */
    double a = 0.0, b = 1.0;
    for (int it = 0; it < 60; it++) {
        double m = 0.5 * (a + b);
        peat_pred_plan pm = at(c, l, m);
        if (total_bound(c, &pm) <= budget_s)
            a = m;
        else
            b = m;
    }
    *out = at(c, l, a);
    return PEAT_OK;
}

int64_t peat_predictor_runtime_fit(const peat_pred_costs *c, const peat_pred_plan *p,
                                   int64_t min_iters, double pace, double left_s)
{
    peat_pred_plan q = *p;
    int64_t n = p->runtime_iters, lo = min_iters < n ? min_iters : n;
    for (; n > lo; n--) {
        q.runtime_iters = n;
        peat_predictor_plan_cost(c, &q);
        if (pace * q.stage_s[PEAT_STAGE_RUNTIME] <= left_s) break;
    }
    return n;
}

int64_t peat_predictor_evals_every(int64_t iters, int64_t every)
{
    if (iters < 1) return 0;
    if (every < 1) every = 1;
    return iters / every + (iters % every != 0);
}

/* Predicted wall seconds of iterations [0, n) with the evaluations at every `every`-th (the
 * last one's evaluation counted when last = 1). */
static double steer_pred(const peat_pred_costs *c, int64_t n, int64_t every, int last)
{
    double it = runtime_unit(c, 0), ev = runtime_unit(c, 1);
    int64_t evals = last ? peat_predictor_evals_every(n, every) : n / (every < 1 ? 1 : every);
    return (double)n * it + (double)evals * ev;
}

double peat_predictor_steer_pace(const peat_pred_costs *c, const peat_pred_steer *s)
{
    double pred = steer_pred(c, s->done, s->every, 0), took = s->elapsed_s;
    if (s->window_n >= PEAT_PRED_STEER_WINDOW && s->window_n <= s->done) {
        pred -= steer_pred(c, s->done - s->window_n, s->every, 0);
        took = s->window_s;
    }
    if (!(pred > 0) || !(took > 0)) return 1.0;
    double pace = took / pred;
    /* beyond these the model is not what went wrong: stay within what a load change does */
    return pace < 0.2 ? 0.2 : pace > 10.0 ? 10.0 : pace;
}

int64_t peat_predictor_runtime_steer(const peat_pred_costs *c, const peat_pred_steer *s)
{
    int64_t lo = s->done + 1 > s->min_iters ? s->done + 1 : s->min_iters;
    int64_t hi = s->max_iters > lo ? s->max_iters : lo;
    double pace = peat_predictor_steer_pace(c, s);
    double done = steer_pred(c, s->done, s->every, 0);
    /* the remaining time is not monotone in n (the last iteration's own evaluation): scan down */
    for (int64_t n = hi; n > lo; n--)
        if (pace * (steer_pred(c, n, s->every, 1) - done) <= s->left_s) return n;
    return lo;
}

int peat_predictor_playback_go(const peat_pred_costs *c, const peat_pred_plan *p,
                               const peat_pred_playback_steer *s)
{
    if (s->replayed <= s->min_calls) return 1;
    /* the stages after playback with the calls replayed so far (the signatures grow with
     * them), runtime FI at its smallest: playback, the campaign's main evidence, keeps its calls
     * before runtime FI its length */
    peat_pred_plan rest = *p;
    rest.calls = s->replayed;
    if (rest.runtime_iters > s->min_runtime_iters) rest.runtime_iters = s->min_runtime_iters;
    peat_predictor_plan_cost(c, &rest);
    double after = rest.stage_s[PEAT_STAGE_ANALYZE] + rest.stage_s[PEAT_STAGE_RUNTIME] +
                   rest.stage_s[PEAT_STAGE_OTHER];
    double call = c->replay_s + peat_predictor_isolate_s(c, p->calls);
    double tail = s->pace * (call + rest.stage_cpu_s[PEAT_STAGE_PROBES]) + s->later_pace * after;
    return tail <= s->left_s;
}
