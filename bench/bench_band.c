/* bench_band.c: the runtime band's measured false-alarm rate (honest reorder runs judged against
 * the band, one fresh training seed each) per flow, the candidate loop rule's (drift included),
 * its detection rate on the zoo's defects that change training, and the shadow check's cost
 * (--shadow: the stage with and without it; docs/fault-injection.md). */
#include "harness/campaign/campaign.h"
#include "harness/runtime/builtin.h"
#include "harness/runtime/runtime.h"
#include "models/models.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Honest candidates: GEMM orders no band rerun uses (the band has pairwise and split 4). */
static const char *const honest_specs[] = {
    "reorder(order=reverse)", "reorder(order=split,split=16)", "reorder(order=split,split=2)"};
/* With --extra the band list's later orders are judged too: the candidate is an order the list
 * does not hold. */
static const char *const extra_specs[] = {"reorder(order=split,split=16)",
                                          "reorder(order=split,split=8)",
                                          "reorder(order=split,split=2)"};

typedef struct bench_opts {
    const char *flows;
    int seeds;
    int64_t iters; /* 0 = the flow's default */
    int width;     /* 0 = the flow's default */
    int band;      /* R */
    int seed0;     /* the first honest seed (shards of one measurement run side by side) */
    double max_s; /* no new seed after this many wall seconds (0 = none): the row counts what ran */
    int extra;    /* also judge the band reruns past R (every order in the band list) */
    const char *zoo, *manifest;
    const char *curves; /* --curves FILE: every run's curves appended as TSV (evidence) */
    int shadow;         /* --shadow: the stage's time with and without the shadow check */
} bench_opts;

static void usage(void)
{
    fprintf(stderr, "usage: bench_band [--flows mlp,cnn,gpt,gpt_unfused] [--seeds N (20)] "
                    "[--iters N (flow default)] [--width N] [--band R (3)] "
                    "[--seed0 S (0)] [--max-seconds T] [--extra] [--zoo LIB --manifest TSV] "
                    "[--curves FILE] [--shadow]\n");
}

static int parse(int argc, char **argv, bench_opts *o)
{
    *o = (bench_opts){"mlp,cnn,gpt,gpt_unfused", 20, 0, 0, 3, 0, 0, 0, NULL, NULL, NULL, 0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--extra") || !strcmp(argv[i], "--shadow")) {
            *(argv[i][2] == 'e' ? &o->extra : &o->shadow) = 1;
            continue;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage(), -1;
        if (!strcmp(argv[i], "--flows"))
            o->flows = v;
        else if (!strcmp(argv[i], "--seeds"))
            o->seeds = atoi(v);
        else if (!strcmp(argv[i], "--iters"))
            o->iters = atoll(v);
        else if (!strcmp(argv[i], "--width"))
            o->width = atoi(v);
        else if (!strcmp(argv[i], "--band"))
            o->band = atoi(v);
        else if (!strcmp(argv[i], "--seed0"))
            o->seed0 = atoi(v);
        else if (!strcmp(argv[i], "--max-seconds"))
            o->max_s = atof(v);
        else if (!strcmp(argv[i], "--zoo"))
            o->zoo = v;
        else if (!strcmp(argv[i], "--manifest"))
            o->manifest = v;
        else if (!strcmp(argv[i], "--curves"))
            o->curves = v;
        else
            return usage(), -1;
        i++;
    }
    if (o->seeds < 1 || o->seed0 < 0 || o->max_s < 0 || o->iters < 0 || o->width < 0 ||
        o->band < 2 || o->band > PEAT_RUNTIME_MAX_BAND || (o->zoo && !o->manifest))
        return usage(), -1;
    return 0;
}

static peat_runtime_opts run_opts(const bench_opts *b, const char *flow, uint64_t seed)
{
    peat_runtime_opts o;
    memset(&o, 0, sizeof o);
    o.flow = flow;
    o.cfg.seed = seed;
    o.cfg.width = b->width;
    o.cfg.weight_decay = -1;
    o.iters = b->iters > 0 ? b->iters : peat_campaign_default_iters(flow);
    o.op = PEAT_OP_GEMM;
    (void)peat_freq_schedule_parse("1", &o.freqs); /* valid text: parses without fail */
    /* --extra: the lockstep trains every order of the band list; the band is its first R */
    o.band_runs = b->extra ? PEAT_RUNTIME_MAX_BAND : b->band;
    return o;
}

/* Wilson 95% interval of k of n. */
static void wilson(int k, int n, double *lo, double *hi)
{
    double z = 1.959964, p = (double)k / n, d = 1 + z * z / n;
    double c = (p + z * z / (2.0 * n)) / d;
    double h = z / d * sqrt(p * (1 - p) / n + z * z / (4.0 * n * n));
    *lo = fmax(c - h, 0.0), *hi = fmin(c + h, 1.0);
}

static peat_runtime_curve curve(const peat_runtime_result *r, const peat_runtime_run *m)
{
    peat_runtime_curve c = {r->n,      m->loss,     m->wdist,    m->nonfinite,
                            r->n_eval, m->eval_acc, r->eval_iter};
    return c;
}

typedef struct tally {
    int judged, alarms, drift, transient, stat, seeds, seeds_alarm;
    int loop; /* judged as a candidate kernel would be: FAIL by the loop rule (drift included) */
    double worst;
} tally;

static void count(tally *t, const peat_runtime_verdict *v, const peat_runtime_band *b,
                  const char *flow, int s, const char *label, double secs)
{
    t->judged++;
    t->alarms += v->cls != PEAT_RUNTIME_EQUIVALENT;
    peat_runtime_verdict cand = *v; /* the same run as a candidate fp32 kernel's */
    peat_detector_runtime_candidate(&cand, 0, 0);
    t->loop += peat_detector_runtime_verdict_acceptance(&cand) == PEAT_ACCEPT_FAIL;
    t->drift += v->drift;
    t->transient += v->transient;
    t->stat += v->loss_t > b->loss_k;
    if (v->loss_excess > t->worst) t->worst = v->loss_excess;
    /* one line per judged run as it ends: a measurement stopped early still counts what it ran */
    int alarm = v->cls != PEAT_RUNTIME_EQUIVALENT;
    fprintf(stderr, "bench_band: %s seed %d %s: %s%s%s, loss t %.2f (k %.2f), %.1f s%s%s\n", flow,
            s, label, peat_detector_runtime_class_name(v->cls), v->drift ? " (drift)" : "",
            v->transient ? " (transient)" : "", v->loss_t, b->loss_k, secs,
            alarm || v->transient ? ": " : "", alarm || v->transient ? v->evidence : "");
}

/* One seed with --extra: the band of the first R runs, every later band rerun and the honest
 * candidate judged against it (the same band for all: their alarms are not independent, so the
 * table also counts seeds with any alarm). */
static peat_status judge_extra(const bench_opts *b, peat_runtime_result *r, tally *t,
                               const char *flow, int s)
{
    peat_runtime_curve m[PEAT_RUNTIME_MAX_BAND];
    for (int i = 0; i < b->band; i++) m[i] = curve(r, &r->band[i]);
    peat_runtime_band band;
    PEAT_TRY(peat_detector_band_build(m, b->band, &band));
    int before = t->alarms;
    peat_status st = PEAT_OK;
    for (int i = b->band; st == PEAT_OK && i <= r->n_band; i++) {
        const peat_runtime_run *run = i < r->n_band ? &r->band[i] : &r->faulty[0];
        peat_runtime_curve c = curve(r, run);
        peat_runtime_verdict v;
        st = peat_detector_runtime_judge(&band, &c, &v);
        if (st == PEAT_OK) count(t, &v, &band, flow, s, run->label, r->t_total);
    }
    t->seeds_alarm += t->alarms > before;
    peat_detector_band_free(&band);
    return st;
}

/* --curves: one row per run and point (flow, seed, run, kind, iteration, value): the loss's
 * mean over each 1/20 of the run (kind "loss", iteration = the window's first), every held-out
 * evaluation ("acc") and the weight distance at the window's end ("wdist"). */
static void write_curves(const bench_opts *b, const peat_runtime_result *r, const char *flow, int s)
{
    if (!b->curves) return;
    FILE *f = fopen(b->curves, "a");
    if (!f) {
        fprintf(stderr, "bench_band: cannot append to %s\n", b->curves);
        return;
    }
    for (int i = 0; i <= r->n_band; i++) {
        const peat_runtime_run *m = i < r->n_band ? &r->band[i] : &r->faulty[0];
        if (i == r->n_band && r->n_faulty < 1) break;
        for (int w = 0; w < 20; w++) {
            int64_t a = r->n * w / 20, e = r->n * (w + 1) / 20;
            double sum = 0;
            for (int64_t t = a; t < e; t++) sum += m->loss[t];
            if (e > a)
                fprintf(f, "%s\t%d\t%s\tloss\t%lld\t%.9g\n%s\t%d\t%s\twdist\t%lld\t%.9g\n", flow, s,
                        m->label, (long long)a, sum / (double)(e - a), flow, s, m->label,
                        (long long)(e - 1), m->wdist[e - 1]);
        }
        for (int64_t k = 0; k < r->n_eval; k++)
            fprintf(f, "%s\t%d\t%s\tacc\t%lld\t%.9g\n", flow, s, m->label,
                    (long long)r->eval_iter[k], m->eval_acc[k]);
    }
    fclose(f);
}

/* One flow's honest runs: false alarms (DEGRADES or DIVERGES) and drift notes. */
static int honest_flow(const bench_opts *b, const char *flow)
{
    tally t = {0, 0, 0, 0, 0, 0, 0, 0, -INFINITY};
    double t0 = peat_clock_now();
    for (int s = b->seed0; s < b->seed0 + b->seeds; s++) {
        if (b->max_s > 0 && peat_clock_now() - t0 > b->max_s) break;
        peat_runtime_opts o = run_opts(b, flow, 1000 + (uint64_t)s);
        o.model = (b->extra ? extra_specs : honest_specs)[s % 3];
        o.model_seed = (uint64_t)s;
        peat_runtime_result r;
        peat_status st = peat_runtime_run_all(&o, &r);
        if (st == PEAT_OK) write_curves(b, &r, flow, s);
        if (st == PEAT_OK && b->extra) st = judge_extra(b, &r, &t, flow, s);
        if (st != PEAT_OK) {
            fprintf(stderr, "bench_band: %s seed %d: %s\n", flow, s, peat_error_last());
            peat_runtime_result_free(&r);
            return -1;
        }
        if (!b->extra) {
            int before = t.alarms;
            count(&t, &r.verdict[0], &r.b, flow, s, o.model, r.t_total);
            t.seeds_alarm += t.alarms > before;
        }
        t.seeds++;
        peat_runtime_result_free(&r);
    }
    if (t.seeds == 0) return printf("| %-11s | no seed within --max-seconds |\n", flow), 0;
    double lo, hi, llo, lhi;
    wilson(t.alarms, t.judged, &lo, &hi);
    wilson(t.loop, t.judged, &llo, &lhi);
    printf("| %-11s | %6lld | %5d | %5d | %6d | %6d | %5.1f%% [%4.1f, %4.1f] | %5d | %10d | %5d "
           "| %9d | %+9.2f%% | %4d | %5.1f%% [%4.1f, %4.1f] |\n",
           flow, (long long)(b->iters > 0 ? b->iters : peat_campaign_default_iters(flow)), b->width,
           t.seeds, t.judged, t.alarms, 100.0 * t.alarms / t.judged, 100 * lo, 100 * hi,
           t.seeds_alarm, t.stat, t.drift, t.transient, 100 * t.worst, t.loop,
           100.0 * t.loop / t.judged, 100 * llo, 100 * lhi);
    fflush(stdout);
    return 0;
}

/* Whether a run changes training by the band's own effect sizes, measured against the golden
 * run alone (no noise test): a window-mean loss more than max(0.5%, 1e-4) above the golden's, an
 * evaluation 2 points below, or a non-finite value. This is the ground truth the detection rate
 * is scored against. */
static int affects_training(const peat_runtime_result *r)
{
    const peat_runtime_run *g = &r->band[0], *c = &r->faulty[0];
    if (c->first_nonfinite >= 0) return 1;
    for (int w = 0; w < 4; w++) {
        int64_t a = r->n * w / 4, e = r->n * (w + 1) / 4;
        double sg = 0, sc = 0;
        for (int64_t t = a; t < e; t++) sg += g->loss[t], sc += c->loss[t];
        if (e > a && (sc - sg) / (double)(e - a) > fmax(0.005 * fabs(sg / (double)(e - a)), 1e-4))
            return 1;
    }
    for (int64_t k = 0; k < r->n_eval; k++)
        if (g->eval_acc[k] - c->eval_acc[k] >= 0.02) return 1;
    return 0;
}

static int zoo_flow(const bench_opts *b, const char *flow, int *n_aff, int *n_det, int *n_other)
{
    FILE *f = fopen(b->manifest, "r");
    if (!f) return fprintf(stderr, "bench_band: cannot read %s\n", b->manifest), -1;
    char line[256], k[64], fl[32], ex[32], kind[16];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || sscanf(line, "%63s %31s %31s %15s", k, fl, ex, kind) != 4) continue;
        if (strcmp(fl, flow) || strcmp(kind, "defect")) continue;
        const peat_kernel *kern = peat_registry_find(k);
        if (!kern) continue;
        peat_runtime_opts o = run_opts(b, flow, 1);
        o.candidate = kern;
        o.op = kern->op;
        peat_runtime_result r;
        if (peat_runtime_run_all(&o, &r) == PEAT_OK) {
            write_curves(b, &r, flow, 1);
            int aff = affects_training(&r), det = r.verdict[0].cls != PEAT_RUNTIME_EQUIVALENT;
            *n_aff += aff, *n_det += aff && det, *n_other += !aff && det;
            printf("  %-34s %-10s %-20s %s\n", k, aff ? "affects" : "no effect",
                   peat_detector_runtime_class_name(r.verdict[0].cls),
                   r.verdict[0].drift ? "drift" : "");
            fflush(stdout);
        }
        peat_runtime_result_free(&r);
    }
    fclose(f);
    return 0;
}

/* --shadow: one flow's runtime stage with gemm_new in the loop (isolated, as `peat run`), the
 * shadow check off and on, the best of three each (wall seconds; the shared machine's noise). */
static int shadow_flow(const bench_opts *b, const char *flow)
{
    double best[2] = {INFINITY, INFINITY};
    peat_runtime_shadow sh;
    memset(&sh, 0, sizeof sh);
    for (int rep = 0; rep < 3; rep++)
        for (int on = 0; on < 2; on++) {
            peat_runtime_opts o = run_opts(b, flow, 1);
            o.band_runs = b->band;
            o.candidate = peat_registry_find_on("gemm_new", "cpu");
            o.isolate = 1, o.kernel_timeout_s = 60;
            o.shadow.on = on;
            peat_runtime_result r;
            if (peat_runtime_run_all(&o, &r) != PEAT_OK)
                return fprintf(stderr, "bench_band: %s: %s\n", flow, peat_error_last()), -1;
            if (r.t_total < best[on]) best[on] = r.t_total;
            if (on) sh = r.faulty[0].shadow;
            peat_runtime_result_free(&r);
        }
    printf("| %-11s | %6lld | %8.2f | %8.2f | %5.2f | %6lld | %7lld | %6lld | %4lld | %7.2f |\n",
           flow, (long long)(b->iters > 0 ? b->iters : peat_campaign_default_iters(flow)), best[0],
           best[1], best[1] / best[0], (long long)sh.calls, (long long)sh.checked,
           (long long)sh.exact, (long long)sh.bad, sh.seconds);
    fflush(stdout);
    return 0;
}

static int shadow_table(const bench_opts *b)
{
    printf("## the shadow check's cost: the runtime stage with gemm_new in the loop (R = %d)\n\n"
           "| flow        |  iters | stage s  | +shadow  | ratio |  calls | checked |  exact "
           "|  bad | check s |\n|---|---|---|---|---|---|---|---|---|---|\n",
           b->band);
    char buf[128];
    snprintf(buf, sizeof buf, "%s", b->flows);
    char *save = NULL;
    for (char *fl = strtok_r(buf, ",", &save); fl; fl = strtok_r(NULL, ",", &save))
        if (shadow_flow(b, fl)) return 1;
    return 0;
}

int main(int argc, char **argv)
{
    bench_opts b;
    if (parse(argc, argv, &b)) return 2;
    if (peat_runtime_builtin_init() != PEAT_OK) return 1;
    if (b.zoo && peat_plugin_load(b.zoo, NULL) != PEAT_OK)
        return fprintf(stderr, "bench_band: %s\n", peat_error_last()), 1;
    if (b.shadow) return shadow_table(&b);
    printf("## runtime band: false alarms on honest runs (R = %d, alpha = 1%% per run)\n\n",
           b.band);
    printf("Each seed: a fresh training seed, the band (golden + %d reorder reruns) and %s in the "
           "loop, judged against the band; an alarm is DEGRADES or DIVERGES.\n\n",
           b.band - 1,
           b.extra ? "every later order of the band list plus one more honest GEMM order"
                   : "one more honest GEMM order");
    printf("| flow        |  iters | width | seeds | judged | alarms | rate [95%% Wilson]    | "
           "seeds w/ alarm | t > k only | drift | transient | max loss ex | loop FAIL | loop rate "
           "[95%% Wilson] |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    char buf[128];
    snprintf(buf, sizeof buf, "%s", b.flows);
    char *save = NULL;
    for (char *fl = strtok_r(buf, ",", &save); fl; fl = strtok_r(NULL, ",", &save))
        if (honest_flow(&b, fl)) return 1;
    if (!b.zoo) return 0;
    printf("\n## detection: the zoo's defects in the loop (seed 1)\n\n");
    int aff = 0, det = 0, other = 0;
    snprintf(buf, sizeof buf, "%s", b.flows);
    for (char *fl = strtok_r(buf, ",", &save); fl; fl = strtok_r(NULL, ",", &save))
        if (zoo_flow(&b, fl, &aff, &det, &other)) return 1;
    printf("\ntraining-affecting defects detected: %d of %d (%.0f%%); flagged without a "
           "measurable effect: %d\n",
           det, aff, aff ? 100.0 * det / aff : 0.0, other);
    return 0;
}
