/* signature.c: turns an accumulator into a fixed-schema signature (quantiles and ranks via GSL). */
#include "analyzer/internal.h"

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The estimator's offset c (docs/signature.md derives it): the rms relative error of rounding to
 * p bits is s1 u_p with s1 = 1/sqrt(8 ln 2); a GEMM whose operands are both rounded reads
 * sqrt(2) (pi/2) s1 u_p, an output rounded once reads s1 u_p; c centres the two readings on p. */
static double eff_bits_offset(void)
{
    double s1 = 1.0 / sqrt(8.0 * log(2.0));
    return log2(s1) + 0.5 * log2(3.14159265358979323846 / sqrt(2.0));
}

double peat_analyzer_eff_bits(double rms_rel_mag)
{
    if (isnan(rms_rel_mag)) return NAN;
    if (rms_rel_mag <= 0.0) return 53.0; /* no measurable error: as exact as the fp64 reference */
    double b = -log2(rms_rel_mag) + eff_bits_offset();
    return b > 53.0 ? 53.0 : b < 0.0 ? 0.0 : b;
}

/* Sorted copy of one field of the samples, NaNs dropped. */
static peat_status sorted_field(const peat_analyzer_acc_t *acc, size_t off, double **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (acc->n_s == 0) return PEAT_OK;
    double *v = malloc((size_t)acc->n_s * sizeof *v);
    if (!v) return PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer: sort buffer of %lld", (long long)acc->n_s);
    size_t k = 0;
    for (int64_t i = 0; i < acc->n_s; i++) {
        double x;
        memcpy(&x, (const char *)&acc->s[i] + off, sizeof x);
        if (!isnan(x)) v[k++] = x;
    }
    gsl_sort(v, 1, k);
    *out = v;
    *n = k;
    return PEAT_OK;
}

static peat_status quantiles(const peat_analyzer_acc_t *acc, peat_signature *s)
{
    double *v;
    size_t n;
    PEAT_TRY(sorted_field(acc, offsetof(peat_sample, norm), &v, &n));
    if (n > 0) {
        s->p50_norm = gsl_stats_quantile_from_sorted_data(v, 1, n, 0.5);
        s->p99_norm = gsl_stats_quantile_from_sorted_data(v, 1, n, 0.99);
        /* top 1% (at least one element) of the squared normalised errors */
        size_t top = (n + 99) / 100;
        double tot = 0.0, hi = 0.0;
        for (size_t i = 0; i < n; i++) {
            double q = v[i] * v[i];
            tot += q;
            if (i >= n - top) hi += q;
        }
        s->top1pct_share = tot > 0.0 ? hi / tot : 0.0;
    }
    free(v);
    PEAT_TRY(sorted_field(acc, offsetof(peat_sample, rel), &v, &n));
    if (n > 0) s->median_rel = gsl_stats_median_from_sorted_data(v, 1, n);
    free(v);
    return PEAT_OK;
}

/* Spearman rho of |err|/s against |exact|/s: near 0 when the error does not scale with the value
 * (errors of rounded inputs), clearly positive when it does (relative noise, rounded outputs). */
static peat_status input_correlation(const peat_analyzer_acc_t *acc, peat_signature *s)
{
    s->corr_err_input = NAN;
    size_t n = 0;
    for (int64_t i = 0; i < acc->n_s; i++)
        if (!isnan(acc->s[i].a) && !isnan(acc->s[i].b)) n++;
    if (n < 16) return PEAT_OK;
    double *buf = malloc(4 * n * sizeof *buf);
    if (!buf) return PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer: correlation buffer of %zu", n);
    double *x = buf, *y = buf + n, *work = buf + 2 * n;
    size_t k = 0;
    for (int64_t i = 0; i < acc->n_s; i++)
        if (!isnan(acc->s[i].a) && !isnan(acc->s[i].b)) x[k] = acc->s[i].a, y[k++] = acc->s[i].b;
    double sx = gsl_stats_sd(x, 1, n), sy = gsl_stats_sd(y, 1, n);
    if (sx > 0.0 && sy > 0.0) s->corr_err_input = gsl_stats_spearman(x, 1, y, 1, n, work);
    free(buf);
    return PEAT_OK;
}

/* Median of v[0..n) (reorders v). */
static double median_of(double *v, size_t n)
{
    gsl_sort(v, 1, n);
    return gsl_stats_median_from_sorted_data(v, 1, n);
}

/* Roughness of the signed relative error r = err / exact along one key (input or exact value):
 * median |r[i+1] - r[i]| / (sqrt(2) MAD(r)) in key order. Independent errors give ~1 (the
 * difference of two independent draws spreads sqrt(2) wider); a smooth function of the key gives
 * ~0. The relative error cancels a factor the approximation multiplies (dY in a backward op);
 * medians keep the few elements whose relative error is noise (cancellation in a tail) from
 * deciding. Also returns the sign changes per step. */
static peat_status roughness_along(const peat_analyzer_acc_t *acc, int use_input, double *rough,
                                   double *changes)
{
    *rough = *changes = NAN;
    size_t n = 0;
    for (int64_t i = 0; i < acc->n_s; i++) {
        const peat_sample *p = &acc->s[i];
        if (p->x != 0.0 && !(use_input && isnan(p->key))) n++;
    }
    if (n < 16) return PEAT_OK;
    double *key = malloc(n * sizeof *key), *r = malloc(n * sizeof *r), *w = malloc(n * sizeof *w);
    size_t *perm = malloc(n * sizeof *perm);
    peat_status st = PEAT_OK;
    if (!key || !r || !w || !perm) {
        st = PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer: smoothness buffers of %zu", n);
        goto done;
    }
    size_t k = 0;
    for (int64_t i = 0; i < acc->n_s; i++) {
        const peat_sample *p = &acc->s[i];
        if (p->x == 0.0 || (use_input && isnan(p->key))) continue;
        key[k] = use_input ? p->key : p->x;
        r[k++] = p->d / p->x;
    }
    gsl_sort_index(perm, key, 1, n);
    size_t flips = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        double a = r[perm[i]], b = r[perm[i + 1]];
        w[i] = fabs(b - a);
        if ((a < 0.0 && b > 0.0) || (a > 0.0 && b < 0.0)) flips++;
    }
    double mdiff = median_of(w, n - 1);
    memcpy(w, r, n * sizeof *w);
    double med = median_of(w, n);
    for (size_t i = 0; i < n; i++) w[i] = fabs(r[i] - med);
    double mad = median_of(w, n);
    if (mad > 0.0)
        *rough = mdiff / (sqrt(2.0) * mad);
    else if (mdiff == 0.0)
        *rough = 0.0;
    *changes = (double)flips / (double)(n - 1);
done:
    free(key);
    free(r);
    free(w);
    free(perm);
    return st;
}

/* Smoothness along the input when one was given and along the exact value; the smoother reading
 * counts (an approximation is a function of one of them, noise of neither). */
static peat_status smoothness(const peat_analyzer_acc_t *acc, peat_signature *s)
{
    double r1, c1, r2, c2;
    PEAT_TRY(roughness_along(acc, 0, &r1, &c1));
    PEAT_TRY(roughness_along(acc, 1, &r2, &c2));
    s->err_roughness = r1;
    s->err_sign_changes = c1;
    if (!isnan(r2) && (isnan(r1) || r2 < r1)) {
        s->err_roughness = r2;
        s->err_sign_changes = c2;
    }
    return PEAT_OK;
}

static double frac(int64_t a, int64_t b)
{
    return b > 0 ? (double)a / (double)b : 0.0;
}

peat_status peat_analyzer_signature(const peat_analyzer_acc_t *acc, peat_signature *s)
{
    if (!acc || !s) return PEAT_ERROR(PEAT_ERR_INVAL, "analyzer: NULL accumulator or signature");
    memset(s, 0, sizeof *s);
    s->version = PEAT_SIGNATURE_VERSION;
    snprintf(s->kernel, sizeof s->kernel, "%s", acc->kernel);
    snprintf(s->op, sizeof s->op, "%s", peat_op_name(acc->op));
    s->n_calls = acc->n_calls;
    s->n_elems = acc->n_elems;
    s->depth_max = acc->depth_max;
    s->n_exact_zero = acc->n_exact_zero;
    s->n_nan = acc->n_nan;
    s->n_inf = acc->n_inf;
    s->n_equal_rounded = acc->n_equal_rounded;
    s->n_nonzero_err = acc->n_nonzero_err;
    s->test_hash = acc->hash;
    double nf = (double)acc->n_fin;
    s->max_abs_exact = acc->max_abs_exact;
    s->rms_exact = acc->n_fin ? sqrt(acc->sumsq_exact / nf) : NAN;
    s->max_abs = acc->max_abs;
    s->mean_abs = acc->n_fin ? acc->sum_abs / nf : NAN;
    s->rms_abs = acc->n_fin ? sqrt(acc->sumsq_abs / nf) : NAN;
    s->max_rel = acc->max_rel;
    s->mean_rel = acc->n_rel ? acc->sum_rel / (double)acc->n_rel : NAN;
    s->median_rel = NAN;
    s->max_norm = acc->max_norm;
    s->mean_norm = acc->n_fin ? acc->sum_norm / nf : NAN;
    s->p50_norm = s->p99_norm = NAN;
    s->top1pct_share = NAN;
    s->n_over_bound = acc->n_over_bound;
    s->frac_over_bound = frac(acc->n_over_bound, acc->n_elems);
    s->rms_rel_mag = acc->n_relmag ? sqrt(acc->sumsq_relmag / (double)acc->n_relmag) : NAN;
    s->eff_bits = peat_analyzer_eff_bits(s->rms_rel_mag);
    s->bias_t = NAN;
    if (acc->n_bias >= 2) {
        double sd = sqrt(acc->bias_m2 / (double)(acc->n_bias - 1));
        if (sd > 0.0) s->bias_t = acc->bias_mean / (sd / sqrt((double)acc->n_bias));
    }
    s->frac_err_negative = acc->n_err_signed ? frac(acc->n_toward_zero, acc->n_err_signed) : NAN;
    for (int b = 0; b < PEAT_ULP_BINS; b++) s->ulp_hist[b] = frac(acc->ulp_count[b], acc->n_ulp);
    s->max_ulp = acc->max_ulp;
    for (int b = 0; b < PEAT_BIT_POSITIONS; b++) {
        s->bit_set[b] = frac(acc->bit_set[b], acc->n_bits);
        s->bit_clr[b] = frac(acc->bit_clr[b], acc->n_bits);
        s->bit_hist[b] = s->bit_set[b] + s->bit_clr[b];
    }
    s->test_mant_bits = acc->test_mant_bits;
    s->n_err_subnormal_exact = acc->n_err_subnormal_exact;
    s->min_exact_at_inf = acc->min_exact_at_inf;
    s->max_exact_finite = acc->max_exact_finite;
    s->n_zero_introduced = acc->n_zero_introduced;
    s->max_exact_at_zero = acc->max_exact_at_zero;
    s->min_exact_nonzero = acc->min_exact_nonzero;
    s->n_gross = acc->n_gross;
    s->gross_single_bit = acc->n_gross ? frac(acc->n_gross_single, acc->n_gross) : NAN;
    for (int b = 0; b < PEAT_BIT_POSITIONS; b++)
        s->gross_bit[b] = frac(acc->gross_bit[b], acc->n_gross_single);
    s->gross_dir_set = acc->n_gross_single ? frac(acc->n_gross_set, acc->n_gross_single) : NAN;
    s->gross_stride = acc->gross_stride;
    s->box_fill = acc->box_area_sum ? frac(acc->box_gross_sum, acc->box_area_sum) : NAN;
    s->box_share = acc->box_numel_sum ? frac(acc->box_area_sum, acc->box_numel_sum) : NAN;
    s->box_rows = acc->box_rows;
    s->box_cols = acc->box_cols;
    s->box_tensor_rows = acc->box_tensor_rows;
    s->box_tensor_cols = acc->box_tensor_cols;
    s->box_at_bottom = acc->box_at_bottom;
    s->box_at_right = acc->box_at_right;
    s->frac_err_in_last_tile =
        acc->box_gross_sum ? frac(acc->gross_at_edge, acc->box_gross_sum) : NAN;
    s->repeat_max_diff = acc->repeat_max_diff;
    s->repeat_n_diff = acc->repeat_n_diff;
    PEAT_TRY(quantiles(acc, s));
    PEAT_TRY(input_correlation(acc, s));
    PEAT_TRY(smoothness(acc, s));
    return PEAT_OK;
}
