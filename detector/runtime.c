/* runtime.c: training impact: the golden noise band and the TRAINING_EQUIVALENT / DEGRADES /
 * DIVERGES rules for a run with a faulty kernel in the loop (docs/fault-injection.md). */
#include "detector/detector.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Margins (docs/fault-injection.md says why each has its value; none was fitted to a test).
 * A band of R = 3 runs is the range of 3 samples: a 4th honest run falls outside it with
 * probability 1/2 at any point, so the band is widened by twice its own width, plus a floor for
 * iterations where the members happen to agree. */
#define BAND_SPREAD_K  2.0  /* widen by this many times the band's width ... */
#define LOSS_REL_FLOOR 0.02 /* ... and at least 2% of the loss (batches differ by more) */
#define LOSS_ABS_FLOOR 1e-3 /* and 1e-3 nats when the loss is near 0 */
#define WDIST_FACTOR   4.0  /* honest reorderings drift apart chaotically, all at one pace */
#define WDIST_FLOOR    1e-5 /* ~100 fp32 roundings of relative drift: under it runs are equal */
#define ACC_ABS_FLOOR  0.02 /* two points of held-out accuracy */
#define PERSIST        3    /* a per-iteration excursion counts when it lasts 3 iterations */
#define EXPLODE_FACTOR 3.0  /* loss above 3x the band's highest loss so far: an explosion */

const char *peat_runtime_class_name(peat_runtime_class c)
{
    static const char *n[PEAT_RUNTIME_CLASS_COUNT] = {"TRAINING_EQUIVALENT", "DEGRADES",
                                                      "DIVERGES"};
    return (unsigned)c < PEAT_RUNTIME_CLASS_COUNT ? n[c] : "?";
}

peat_acceptance peat_runtime_acceptance(peat_runtime_class c)
{
    return c == PEAT_RUNTIME_EQUIVALENT ? PEAT_ACCEPT_PASS
           : c == PEAT_RUNTIME_DEGRADES ? PEAT_ACCEPT_WARN
                                        : PEAT_ACCEPT_FAIL;
}

void peat_detector_band_free(peat_runtime_band *b)
{
    free(b->loss_lo);
    free(b->loss_hi);
    free(b->wdist_hi);
    free(b->acc_lo);
    free(b->acc_hi);
    memset(b, 0, sizeof *b);
}

static void minmax(double *lo, double *hi, double x)
{
    if (isnan(x)) return;
    if (isnan(*lo) || x < *lo) *lo = x;
    if (isnan(*hi) || x > *hi) *hi = x;
}

peat_status peat_detector_band_build(const peat_runtime_curve *m, int R, peat_runtime_band *out)
{
    memset(out, 0, sizeof *out);
    if (R < 2) return PEAT_ERROR(PEAT_ERR_INVAL, "band: %d member(s), need at least 2", R);
    int64_t n = m[0].n, ne = m[0].n_eval;
    for (int r = 1; r < R; r++)
        if (m[r].n != n || m[r].n_eval != ne)
            return PEAT_ERROR(PEAT_ERR_INVAL, "band: member %d has %lld iterations, member 0 %lld",
                              r, (long long)m[r].n, (long long)n);
    out->n = n, out->n_eval = ne, out->members = R;
    out->loss_lo = malloc((size_t)(n + 1) * sizeof(double));
    out->loss_hi = malloc((size_t)(n + 1) * sizeof(double));
    out->wdist_hi = malloc((size_t)(n + 1) * sizeof(double));
    out->acc_lo = malloc((size_t)(ne + 1) * sizeof(double));
    out->acc_hi = malloc((size_t)(ne + 1) * sizeof(double));
    if (!out->loss_lo || !out->loss_hi || !out->wdist_hi || !out->acc_lo || !out->acc_hi) {
        peat_detector_band_free(out);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "band of %lld iterations", (long long)n);
    }
    for (int64_t t = 0; t < n; t++) {
        out->loss_lo[t] = out->loss_hi[t] = NAN;
        out->wdist_hi[t] = 0.0;
        for (int r = 0; r < R; r++) {
            minmax(&out->loss_lo[t], &out->loss_hi[t], m[r].loss[t]);
            if (m[r].wdist && m[r].wdist[t] > out->wdist_hi[t]) out->wdist_hi[t] = m[r].wdist[t];
        }
    }
    for (int64_t e = 0; e < ne; e++) {
        out->acc_lo[e] = out->acc_hi[e] = NAN;
        for (int r = 0; r < R; r++) minmax(&out->acc_lo[e], &out->acc_hi[e], m[r].eval_acc[e]);
    }
    return PEAT_OK;
}

static double loss_margin(const peat_runtime_band *b, int64_t t)
{
    double lo = b->loss_lo[t], hi = b->loss_hi[t];
    double floor = fmax(LOSS_REL_FLOOR * fabs(0.5 * (lo + hi)), LOSS_ABS_FLOOR);
    return fmax(BAND_SPREAD_K * (hi - lo), floor);
}

void peat_detector_band_widened(const peat_runtime_band *b, int64_t t, double *loss_lo,
                                double *loss_hi, double *wdist_hi)
{
    double m = loss_margin(b, t);
    *loss_lo = b->loss_lo[t] - m;
    *loss_hi = b->loss_hi[t] + m;
    *wdist_hi = WDIST_FACTOR * b->wdist_hi[t] + WDIST_FLOOR;
}

/* A ratio for people: 2.5x, 340x, 2.3e+36x (not 36 digits). */
static void ratio_format(char *buf, size_t n, double x)
{
    snprintf(buf, n, !isfinite(x) ? "%g" : fabs(x) < 1e4 ? "%.1fx" : "%.2gx", x);
}

/* The loss against the band's top: "+4.8% over" or "2.1% below" (never "+0.0%" for below). */
static void excess_format(char *buf, size_t n, double e)
{
    snprintf(buf, n, e >= 0.0 ? "%+.1f%% over" : "%.1f%% below", 100.0 * fabs(e));
}

/* DIVERGES: the first iteration with a non-finite loss or weight, or a loss above
 * EXPLODE_FACTOR x the band's highest loss up to then. */
static int judge_diverges(const peat_runtime_band *b, const peat_runtime_curve *c,
                          peat_runtime_verdict *v)
{
    double top = 0.0;
    for (int64_t t = 0; t < c->n; t++) {
        if (isfinite(b->loss_hi[t]) && b->loss_hi[t] > top) top = b->loss_hi[t];
        int64_t nf = c->nonfinite ? c->nonfinite[t] : 0;
        int explode = isfinite(c->loss[t]) && top > 0.0 && c->loss[t] > EXPLODE_FACTOR * top;
        if (isfinite(c->loss[t]) && nf == 0 && !explode) continue;
        v->cls = PEAT_RUNTIME_DIVERGES;
        v->iter = t;
        snprintf(v->metric, sizeof v->metric, "%s", explode ? "loss" : "nonfinite");
        char ratio[32];
        ratio_format(ratio, sizeof ratio, c->loss[t] / top);
        if (explode)
            snprintf(v->evidence, sizeof v->evidence,
                     "loss exploded at iteration %lld: %.4g, %s the band's highest loss %.4g",
                     (long long)t, c->loss[t], ratio, top);
        else
            snprintf(v->evidence, sizeof v->evidence,
                     "first non-finite value at iteration %lld (loss %g, %lld non-finite weights)",
                     (long long)t, c->loss[t], (long long)nf);
        return 1;
    }
    return 0;
}

/* The first run of PERSIST consecutive iterations with excess[t] > 0; -1 if none. */
static int64_t first_excursion(const double *excess, int64_t n)
{
    int64_t run = 0;
    for (int64_t t = 0; t < n; t++) {
        run = excess[t] > 0.0 ? run + 1 : 0;
        if (run == PERSIST || (run > 0 && run == n)) return t - run + 1;
    }
    return -1;
}

/* Fills the per-iteration excesses (loss above the widened band, relative to its top; distance
 * over the widened distance, minus 1) and their maxima. */
static void excesses(const peat_runtime_band *b, const peat_runtime_curve *c, double *le,
                     double *we, peat_runtime_verdict *v)
{
    for (int64_t t = 0; t < c->n; t++) {
        double lo, hi, wd;
        peat_detector_band_widened(b, t, &lo, &hi, &wd);
        le[t] = hi > 0.0 ? (c->loss[t] - hi) / hi : c->loss[t] - hi;
        we[t] = c->wdist ? c->wdist[t] / wd - 1.0 : -1.0;
        if (le[t] > v->loss_excess) v->loss_excess = le[t];
        if (we[t] + 1.0 > v->wdist_ratio) v->wdist_ratio = we[t] + 1.0;
    }
}

static int judge_degrades(const peat_runtime_band *b, const peat_runtime_curve *c,
                          peat_runtime_verdict *v)
{
    double *le = malloc((size_t)(c->n + 1) * sizeof *le),
           *we = malloc((size_t)(c->n + 1) * sizeof *we);
    if (!le || !we) {
        free(le);
        free(we);
        return -1;
    }
    excesses(b, c, le, we, v);
    int64_t tl = first_excursion(le, c->n), tw = first_excursion(we, c->n), ta = -1;
    for (int64_t e = 0; e < c->n_eval; e++) {
        double floor =
            b->acc_lo[e] - fmax(BAND_SPREAD_K * (b->acc_hi[e] - b->acc_lo[e]), ACC_ABS_FLOOR);
        double drop = floor - c->eval_acc[e];
        if (isnan(drop)) continue;
        if (drop > v->acc_drop) v->acc_drop = drop;
        if (drop > 0.0 && ta < 0) ta = e;
    }
    free(le);
    free(we);
    if (tl < 0 && tw < 0 && ta < 0) return 0;
    v->cls = PEAT_RUNTIME_DEGRADES;
    /* the earliest per-iteration excursion names the iteration; accuracy is only sampled */
    int loss_first = tl >= 0 && (tw < 0 || tl <= tw);
    v->iter = loss_first ? tl : tw >= 0 ? tw : -1;
    snprintf(v->metric, sizeof v->metric, "%s",
             loss_first ? "loss"
             : tw >= 0  ? "weights"
                        : "accuracy");
    char exc[40], wr[32];
    excess_format(exc, sizeof exc, v->loss_excess);
    ratio_format(wr, sizeof wr, v->wdist_ratio);
    snprintf(v->evidence, sizeof v->evidence,
             "leaves the golden band from iteration %lld (%s): loss at most %s its top, "
             "weight distance up to %s its width, accuracy up to %.3g below it",
             (long long)v->iter, v->metric, exc, wr, fmax(v->acc_drop, 0.0));
    return 1;
}

peat_status peat_detector_runtime_judge(const peat_runtime_band *b, const peat_runtime_curve *c,
                                        peat_runtime_verdict *v)
{
    memset(v, 0, sizeof *v);
    v->iter = -1;
    v->loss_excess = -INFINITY;
    if (!b || !c || c->n != b->n || c->n_eval != b->n_eval || c->n < 1)
        return PEAT_ERROR(PEAT_ERR_INVAL, "runtime judge: the run and the band differ in length");
    v->final_loss = c->loss[c->n - 1];
    v->band_lo = b->loss_lo[c->n - 1];
    v->band_hi = b->loss_hi[c->n - 1];
    if (judge_diverges(b, c, v)) return PEAT_OK;
    int d = judge_degrades(b, c, v);
    if (d < 0) return PEAT_ERROR(PEAT_ERR_NOMEM, "runtime judge");
    if (d == 0) {
        v->cls = PEAT_RUNTIME_EQUIVALENT;
        snprintf(v->evidence, sizeof v->evidence,
                 "inside the golden band over %lld iterations: final loss %.4g (band %.4g..%.4g), "
                 "weight distance at most %.3gx the band's margin",
                 (long long)c->n, v->final_loss, v->band_lo, v->band_hi, v->wdist_ratio);
    }
    return PEAT_OK;
}

peat_finding peat_runtime_finding(const peat_runtime_verdict *v, const char *run, int64_t swapped)
{
    peat_finding f;
    memset(&f, 0, sizeof f);
    f.cls = v->cls == PEAT_RUNTIME_EQUIVALENT ? PEAT_FIND_TRAINING_EQUIVALENT
            : v->cls == PEAT_RUNTIME_DEGRADES ? PEAT_FIND_DEGRADES
                                              : PEAT_FIND_DIVERGES;
    f.confidence = 1.0;
    f.accept = peat_runtime_acceptance(v->cls);
    if (v->iter >= 0)
        snprintf(f.params, sizeof f.params, "iter=%lld metric=%s", (long long)v->iter, v->metric);
    snprintf(f.evidence[0], sizeof f.evidence[0], "runtime FI, %.40s (%lld calls swapped): %.160s",
             run, (long long)swapped, v->evidence);
    f.n_evidence = 1;
    return f;
}
