/* runtime.c: training impact: the golden noise band and the TRAINING_EQUIVALENT / DEGRADES /
 * DIVERGES rules for a run with a faulty kernel in the loop (docs/fault-injection.md). */
#include "detector/detector.h"

#include <gsl/gsl_cdf.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The band is a prediction test (docs/fault-injection.md says why each value is what it is;
 * none was fitted to a test or a flow). The R band members are R exchangeable honest runs; a
 * statistic X of a candidate that is one more honest run satisfies
 * (X - mean) / (sd sqrt(1 + 1/R)) ~ t(R - 1) when X is normal (the classic prediction interval),
 * so a bound of mean + k sd sqrt(1 + 1/R), k the t quantile at a / m, is exceeded with
 * probability a / m; over m tested statistics (Bonferroni) at most a. */
#define BAND_ALPHA     0.01  /* per-run false-alarm rate: half for the loss, half for accuracy */
#define LOSS_WINDOWS   4     /* the loss is tested as its mean over each quarter of the run */
#define LOSS_REL_FLOOR 0.005 /* effect-size floor: a window-mean loss within 0.5% is no change */
#define LOSS_ABS_FLOOR 1e-4  /* and within 1e-4 nats when the loss is near 0 */
#define ACC_ABS_FLOOR  0.02  /* two points of held-out accuracy */
#define WDIST_FACTOR   4.0   /* weight drift note: honest reorderings drift apart at one pace */
#define WDIST_FLOOR    1e-5  /* ~100 fp32 roundings of relative drift: under it runs are equal */
#define PERSIST        3     /* a drift counts when it lasts 3 iterations */
#define EXPLODE_FACTOR 3.0   /* loss above 3x the band's highest loss so far: an explosion */
/* The drift test of a candidate (PEAT_DETECTOR_DRIFT_FAIL in detector.h): X, the smallest drift
 * ratio over the last window (the weights' distance from the golden run over WDIST_FACTOR x the
 * honest reruns' + WDIST_FLOOR), is nonnegative and heavy-tailed (an honest run can take another
 * trajectory: cnn seed 4, pairwise, ended at 56), so no normal model holds; Markov's inequality
 * needs only its mean: P(X >= F) <= E[X] / F. E[X] <= 1 (the note's scale; measured 0.03-0.75 per
 * flow on 320 honest runs, bench_band), so F = 1 / 0.25% = 400 bounds the test's false-alarm
 * rate by 0.25% whatever the tail's shape. */

const char *peat_detector_runtime_class_name(peat_runtime_class c)
{
    static const char *n[PEAT_RUNTIME_CLASS_COUNT] = {"TRAINING_EQUIVALENT", "DEGRADES", "DIVERGES",
                                                      "DUE"};
    return (unsigned)c < PEAT_RUNTIME_CLASS_COUNT ? n[c] : "?";
}

peat_acceptance peat_detector_runtime_acceptance(peat_runtime_class c)
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
    free(b->win_start);
    free(b->win_mean);
    free(b->win_sd);
    free(b->eval_win);
    free(b->acc_mean);
    free(b->acc_sd);
    memset(b, 0, sizeof *b);
}

static void minmax(double *lo, double *hi, double x)
{
    if (isnan(x)) return;
    if (isnan(*lo) || x < *lo) *lo = x;
    if (isnan(*hi) || x > *hi) *hi = x;
}

double peat_detector_band_factor(int df, double a)
{
    return gsl_cdf_tdist_Qinv(a, df < 1 ? 1 : df);
}

/* Mean and sample sd of the R finite values x[0..R) (sd 0 with fewer than 2). */
static void mean_sd(const double *x, int R, double *mean, double *sd)
{
    double s = 0.0, q = 0.0;
    int k = 0;
    for (int r = 0; r < R; r++)
        if (isfinite(x[r])) s += x[r], k++;
    *mean = k ? s / k : NAN;
    for (int r = 0; r < R; r++)
        if (isfinite(x[r])) q += (x[r] - *mean) * (x[r] - *mean);
    *sd = k > 1 ? sqrt(q / (k - 1)) : 0.0;
}

/* The mean loss of a curve over iterations [a, b) (NaN if any is not finite). */
static double window_mean(const double *loss, int64_t a, int64_t b)
{
    double s = 0.0;
    for (int64_t t = a; t < b; t++) s += loss[t];
    return b > a ? s / (double)(b - a) : NAN;
}

/* The window that holds iteration t. */
static int window_of(const peat_runtime_band *b, int64_t t)
{
    int w = 0;
    while (w + 1 < b->windows && t >= b->win_start[w + 1]) w++;
    return w;
}

/* The iteration of evaluation e (the curve's, or evenly spread to the last iteration). */
static int64_t eval_iter_of(const peat_runtime_curve *c, int64_t e)
{
    return c->eval_iter ? c->eval_iter[e] : (e + 1) * c->n / c->n_eval - 1;
}

static peat_status band_alloc(peat_runtime_band *b, int64_t n, int64_t ne, int W)
{
    b->loss_lo = malloc((size_t)(n + 1) * sizeof(double));
    b->loss_hi = malloc((size_t)(n + 1) * sizeof(double));
    b->wdist_hi = malloc((size_t)(n + 1) * sizeof(double));
    b->acc_lo = malloc((size_t)(ne + 1) * sizeof(double));
    b->acc_hi = malloc((size_t)(ne + 1) * sizeof(double));
    b->eval_win = malloc((size_t)(ne + 1) * sizeof(int));
    b->acc_mean = malloc((size_t)(W + 1) * sizeof(double));
    b->acc_sd = malloc((size_t)(W + 1) * sizeof(double));
    b->win_start = malloc((size_t)(W + 1) * sizeof(int64_t));
    b->win_mean = malloc((size_t)(W + 1) * sizeof(double));
    b->win_sd = malloc((size_t)(W + 1) * sizeof(double));
    if (b->loss_lo && b->loss_hi && b->wdist_hi && b->acc_lo && b->acc_hi && b->eval_win &&
        b->acc_mean && b->acc_sd && b->win_start && b->win_mean && b->win_sd)
        return PEAT_OK;
    peat_detector_band_free(b);
    return PEAT_ERROR(PEAT_ERR_NOMEM, "band of %lld iterations", (long long)n);
}

/* The mean of a run's held-out accuracies in window w (NaN: none there, or one not measured). */
static double acc_window_mean(const peat_runtime_band *b, const double *acc, int w)
{
    double s = 0.0;
    int k = 0;
    for (int64_t e = 0; e < b->n_eval; e++)
        if (b->eval_win[e] == w) s += acc[e], k++;
    return k ? s / k : NAN;
}

/* Per window: the members' window-mean losses and held-out accuracies, their means and sds. */
static void band_windows(const peat_runtime_curve *m, int R, peat_runtime_band *b)
{
    double x[64];
    for (int w = 0; w < b->windows; w++) {
        for (int r = 0; r < R && r < 64; r++)
            x[r] = window_mean(m[r].loss, b->win_start[w], b->win_start[w + 1]);
        mean_sd(x, R < 64 ? R : 64, &b->win_mean[w], &b->win_sd[w]);
    }
    for (int64_t e = 0; e < b->n_eval; e++) {
        b->acc_lo[e] = b->acc_hi[e] = NAN;
        for (int r = 0; r < R && r < 64; r++)
            minmax(&b->acc_lo[e], &b->acc_hi[e], m[r].eval_acc[e]);
    }
    b->acc_windows = 0;
    for (int w = 0; w < b->windows; w++) {
        for (int r = 0; r < R && r < 64; r++) x[r] = acc_window_mean(b, m[r].eval_acc, w);
        b->acc_mean[w] = b->acc_sd[w] = NAN;
        int any = 0;
        for (int64_t e = 0; e < b->n_eval; e++) any |= b->eval_win[e] == w;
        if (!any) continue;
        mean_sd(x, R < 64 ? R : 64, &b->acc_mean[w], &b->acc_sd[w]);
        b->acc_windows++;
    }
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
    int W = n < LOSS_WINDOWS ? (int)(n > 0 ? n : 1) : LOSS_WINDOWS;
    PEAT_TRY(band_alloc(out, n, ne, W));
    out->n = n, out->n_eval = ne, out->members = R, out->windows = W;
    out->alpha = BAND_ALPHA;
    for (int w = 0; w <= W; w++) out->win_start[w] = n * w / W;
    for (int64_t e = 0; e < ne; e++) out->eval_win[e] = window_of(out, eval_iter_of(&m[0], e));
    for (int64_t t = 0; t < n; t++) {
        out->loss_lo[t] = out->loss_hi[t] = NAN;
        out->wdist_hi[t] = 0.0;
        for (int r = 0; r < R; r++) {
            minmax(&out->loss_lo[t], &out->loss_hi[t], m[r].loss[t]);
            if (m[r].wdist && m[r].wdist[t] > out->wdist_hi[t]) out->wdist_hi[t] = m[r].wdist[t];
        }
    }
    band_windows(m, R, out);
    /* half the rate for the loss windows, half for the accuracy windows (Bonferroni) */
    out->loss_k = peat_detector_band_factor(R - 1, BAND_ALPHA / 2.0 / W);
    out->acc_k = peat_detector_band_factor(
        R - 1, BAND_ALPHA / 2.0 / (out->acc_windows > 0 ? out->acc_windows : 1));
    return PEAT_OK;
}

/* The largest window-mean loss no honest run exceeds but with the band's rate: the prediction
 * bound, or the effect-size floor above the members' mean when that is wider. */
static double loss_bound(const peat_runtime_band *b, int w)
{
    double mean = b->win_mean[w];
    double stat = b->loss_k * b->win_sd[w] * sqrt(1.0 + 1.0 / b->members);
    double floor = fmax(LOSS_REL_FLOOR * fabs(mean), LOSS_ABS_FLOOR);
    return mean + fmax(stat, floor);
}

static double acc_bound(const peat_runtime_band *b, int w)
{
    double stat = b->acc_k * b->acc_sd[w] * sqrt(1.0 + 1.0 / b->members);
    return b->acc_mean[w] - fmax(stat, ACC_ABS_FLOOR);
}

void peat_detector_band_widened(const peat_runtime_band *b, int64_t t, double *loss_lo,
                                double *loss_hi, double *wdist_hi)
{
    int w = window_of(b, t);
    double m = loss_bound(b, w) - b->win_mean[w];
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

/* The weight-drift note: the first iteration of PERSIST consecutive iterations whose distance
 * from the golden run is beyond WDIST_FACTOR x the honest reruns' largest (-1 if none). */
static int64_t drift_of(const peat_runtime_band *b, const peat_runtime_curve *c,
                        peat_runtime_verdict *v)
{
    int64_t run = 0, first = -1;
    int64_t last = b->win_start[b->windows - 1];
    v->drift_end = c->wdist ? INFINITY : 0.0;
    for (int64_t t = 0; c->wdist && t < c->n; t++) {
        double r = c->wdist[t] / (WDIST_FACTOR * b->wdist_hi[t] + WDIST_FLOOR);
        if (r > v->wdist_ratio) v->wdist_ratio = r;
        if (t >= last && !(r >= v->drift_end)) v->drift_end = r; /* NaN counts as the smallest */
        run = r > 1.0 ? run + 1 : 0;
        if (first < 0 && (run == PERSIST || (run > 0 && run == c->n))) first = t - run + 1;
    }
    v->weights_out = v->drift_end > PEAT_DETECTOR_DRIFT_FAIL;
    return first;
}

/* Where a metric left its bound: the first window outside (-1 if none) and whether the last
 * window it is measured in is outside too. */
typedef struct excursion {
    int first, last_out;
} excursion;

/* The windows whose mean loss is above its bound; the largest excess and t statistic. */
static excursion loss_excursion(const peat_runtime_band *b, const peat_runtime_curve *c,
                                peat_runtime_verdict *v)
{
    excursion x = {-1, 0};
    for (int w = 0; w < b->windows; w++) {
        double hi = loss_bound(b, w);
        double m = window_mean(c->loss, b->win_start[w], b->win_start[w + 1]);
        double ex = hi > 0.0 ? (m - hi) / hi : m - hi;
        if (ex > v->loss_excess) v->loss_excess = ex;
        if (ex > 0.0 && x.first < 0) x.first = w;
        x.last_out = ex > 0.0;
        double sd = b->win_sd[w] * sqrt(1.0 + 1.0 / b->members);
        double z = sd > 0.0 ? (m - b->win_mean[w]) / sd : m > b->win_mean[w] ? INFINITY : 0.0;
        if (z > v->loss_t || w == 0) v->loss_t = z;
    }
    return x;
}

/* The windows whose mean held-out accuracy is below its bound; the largest drop. */
static excursion acc_excursion(const peat_runtime_band *b, const peat_runtime_curve *c,
                               peat_runtime_verdict *v)
{
    excursion x = {-1, 0};
    for (int w = 0; w < b->windows; w++) {
        if (isnan(b->acc_mean[w])) continue; /* no evaluation in this window */
        double drop = acc_bound(b, w) - acc_window_mean(b, c->eval_acc, w);
        if (isnan(drop)) continue;
        if (drop > v->acc_drop) v->acc_drop = drop;
        if (drop > 0.0 && x.first < 0) x.first = w;
        x.last_out = drop > 0.0;
    }
    return x;
}

/* Appends "; note: ..." sentences (a transient excursion, weight drift) to the evidence. */
static void evidence_notes(peat_runtime_verdict *v, int n)
{
    char exc[40];
    excess_format(exc, sizeof exc, v->loss_excess);
    if (v->transient && n > 0 && (size_t)n < sizeof v->evidence)
        n += snprintf(v->evidence + n, sizeof v->evidence - (size_t)n,
                      "; note: left the band from iteration %lld and came back by the last "
                      "quarter (window-mean loss at most %s its bound, accuracy up to %.3g below)",
                      (long long)v->transient_iter, exc, fmax(v->acc_drop, 0.0));
    if (v->drift && n > 0 && (size_t)n < sizeof v->evidence)
        snprintf(v->evidence + n, sizeof v->evidence - (size_t)n,
                 "; note: weight drift from iteration %lld, %.3gx the honest reruns' distance",
                 (long long)v->drift_iter, v->wdist_ratio);
}

/* DEGRADES when the last window's mean loss or mean held-out accuracy is outside its bound (where
 * training ends), or when an earlier window is and the weights had left the honest reruns'
 * distance (drift) before that window ended (a defect moves training off the honest
 * trajectories). An earlier window outside with the weights as close to the golden run as the
 * reruns' and the last window inside is a transient excursion, a note: honest long runs wander
 * and come back (docs/fault-injection.md, "Band and verdict rules"). */
static void judge_degrades(const peat_runtime_band *b, const peat_runtime_curve *c,
                           peat_runtime_verdict *v)
{
    excursion xl = loss_excursion(b, c, v), xa = acc_excursion(b, c, v);
    v->drift_iter = drift_of(b, c, v);
    v->drift = v->drift_iter >= 0;
    /* the earlier of the two first windows outside (-1 when neither left) */
    int first = xa.first < 0 || (xl.first >= 0 && xl.first <= xa.first) ? xl.first : xa.first;
    int drifted = first >= 0 && v->drift && v->drift_iter < b->win_start[first + 1];
    if (!xl.last_out && !xa.last_out && !drifted) {
        v->cls = PEAT_RUNTIME_EQUIVALENT;
        v->transient = first >= 0;
        v->transient_iter = first >= 0 ? b->win_start[first] : -1;
        int n = snprintf(v->evidence, sizeof v->evidence,
                         "inside the golden band at the end of %lld iterations (false-alarm rate "
                         "%.2g): last-quarter mean loss %.4g, its bound %.4g",
                         (long long)c->n, b->alpha, v->end_mean, v->end_bound);
        evidence_notes(v, n);
        return;
    }
    v->cls = PEAT_RUNTIME_DEGRADES;
    /* the metric that ends outside, or (a drifted excursion) the one that left first */
    int loss = xl.last_out || (!xa.last_out && first == xl.first);
    snprintf(v->metric, sizeof v->metric, "%s", loss ? "loss" : "accuracy");
    v->iter = b->win_start[first];
    char exc[24], wr[16];
    excess_format(exc, sizeof exc, v->loss_excess);
    ratio_format(wr, sizeof wr, v->wdist_ratio);
    snprintf(v->evidence, sizeof v->evidence,
             "leaves the golden band from iteration %lld and %s (%s): "
             "window-mean loss at most %s its bound, accuracy up to %.3g below it, weight "
             "distance up to %s the honest reruns'",
             (long long)v->iter,
             xl.last_out || xa.last_out ? "ends outside it" : "its weights drift off", v->metric,
             exc, fmax(v->acc_drop, 0.0), wr);
}

peat_status peat_detector_runtime_judge(const peat_runtime_band *b, const peat_runtime_curve *c,
                                        peat_runtime_verdict *v)
{
    memset(v, 0, sizeof *v);
    v->iter = v->drift_iter = v->transient_iter = -1;
    v->loss_excess = -INFINITY;
    if (!b || !c || c->n != b->n || c->n_eval != b->n_eval || c->n < 1)
        return PEAT_ERROR(PEAT_ERR_INVAL, "runtime judge: the run and the band differ in length");
    v->final_loss = c->loss[c->n - 1];
    /* the band a line quotes is the test's (the members' range widened by the last window's
     * margin), so that "inside" and "outside" read the same as the verdict */
    double whi;
    peat_detector_band_widened(b, c->n - 1, &v->band_lo, &v->band_hi, &whi);
    int W = b->windows - 1;
    v->end_mean = window_mean(c->loss, b->win_start[W], b->win_start[W + 1]);
    v->end_bound = loss_bound(b, W);
    if (judge_diverges(b, c, v)) return PEAT_OK;
    judge_degrades(b, c, v);
    return PEAT_OK;
}

peat_finding peat_detector_runtime_finding(const peat_runtime_verdict *v, const char *run,
                                           int64_t swapped)
{
    peat_finding f;
    memset(&f, 0, sizeof f);
    f.cls = v->cls == PEAT_RUNTIME_EQUIVALENT ? PEAT_FIND_TRAINING_EQUIVALENT
            : v->cls == PEAT_RUNTIME_DEGRADES ? PEAT_FIND_DEGRADES
            : v->cls == PEAT_RUNTIME_DUE      ? PEAT_FIND_DUE
                                              : PEAT_FIND_DIVERGES;
    f.confidence = 1.0;
    f.accept = peat_detector_runtime_verdict_acceptance(v);
    if (v->iter >= 0)
        snprintf(f.params, sizeof f.params, "iter=%lld metric=%s", (long long)v->iter, v->metric);
    snprintf(f.evidence[0], sizeof f.evidence[0], "runtime FI, %.40s (%lld calls swapped): %.160s",
             run, (long long)swapped, v->evidence);
    f.n_evidence = 1;
    if (v->cls == PEAT_RUNTIME_DEGRADES && v->candidate)
        snprintf(f.evidence[f.n_evidence++], sizeof f.evidence[0], "%s",
                 v->explained ? "a candidate whose training degrades fails, but the kernel "
                                "declares a narrower format, which explains it: WARN"
                              : "a candidate whose training degrades fails (no declared narrower "
                                "format explains it)");
    return f;
}

int peat_detector_band_still(const peat_runtime_band *b)
{
    for (int64_t t = 0; b && b->wdist_hi && t < b->n; t++)
        if (b->wdist_hi[t] != 0.0) return 0;
    return b && b->wdist_hi;
}

void peat_detector_runtime_candidate(peat_runtime_verdict *v, int declared, int unscaled)
{
    v->candidate = 1;
    v->explained = declared;
    if (v->cls != PEAT_RUNTIME_EQUIVALENT || !v->weights_out) return;
    if (unscaled) {
        /* ulp-level differences grow chaotically in training (a flow's own pace); a band that
         * never moved measured none, and every call was inside its envelope */
        char wr[16];
        ratio_format(wr, sizeof wr, v->drift_end);
        size_t n = strlen(v->evidence);
        snprintf(v->evidence + n, sizeof v->evidence - n,
                 "%sweights end %s the floor of the honest distance, not judged: the band's "
                 "reruns were bit-identical to the golden run (no honest drift measured) and "
                 "every call in the loop was inside its envelope",
                 n ? "; " : "", wr);
        return;
    }
    /* loss and accuracy inside, the weights ended far off every honest trajectory */
    v->cls = PEAT_RUNTIME_DEGRADES;
    v->iter = v->drift_iter >= 0 ? v->drift_iter : v->iter;
    snprintf(v->metric, sizeof v->metric, "weights");
    char wr[16], lo[16];
    ratio_format(wr, sizeof wr, v->drift_end);
    snprintf(lo, sizeof lo, "%.0fx", PEAT_DETECTOR_DRIFT_FAIL);
    snprintf(v->evidence, sizeof v->evidence,
             "its weights end off the honest trajectories: through the last quarter at least %s "
             "the honest reruns' distance (limit %s, false-alarm rate %.2g) from iteration %lld; "
             "last-quarter mean loss %.4g, its bound %.4g",
             wr, lo, PEAT_DETECTOR_DRIFT_ALPHA, (long long)v->drift_iter, v->end_mean,
             v->end_bound);
}

peat_acceptance peat_detector_runtime_verdict_acceptance(const peat_runtime_verdict *v)
{
    if (v->cls == PEAT_RUNTIME_DEGRADES && v->candidate)
        return v->explained ? PEAT_ACCEPT_WARN : PEAT_ACCEPT_FAIL;
    return peat_detector_runtime_acceptance(v->cls);
}
