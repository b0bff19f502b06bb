/* scan.c: the streaming pass over one unit of elements: counts, moments, bits, sketches, sample. */
#include "analyzer/internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define HASH_P1 0x9e3779b185ebca87ull
#define HASH_P2 0xc2b2ae3d27d4eb4full

static uint64_t rotl64(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

void peat_partial_init(peat_partial *p)
{
    memset(p, 0, sizeof *p);
    p->min_exact_at_inf = NAN;
    p->max_exact_at_zero = NAN;
    p->min_exact_nonzero = NAN;
}

/* Maps float bits to integers that order like the values (-0 and +0 both map to 0). */
static int64_t ordered(uint32_t u)
{
    int32_t i = (int32_t)u;
    return i >= 0 ? (int64_t)i : -(int64_t)(u & 0x7fffffffu);
}

static int ulp_bin(int64_t d)
{
    if (d <= 2) return (int)d;
    /* 3-4 -> bin 3, 5-8 -> bin 4, ..., 513-1024 -> bin 11, >1024 -> bin 12 */
    int b = 64 - __builtin_clzll((uint64_t)(d - 1)) + 1;
    return b > PEAT_ULP_BINS - 1 ? PEAT_ULP_BINS - 1 : b;
}

/* Significand bits a normal float uses: 24 minus its trailing zero bits. */
static int mant_bits_used(uint32_t u)
{
    uint32_t e = (u >> 23) & 0xff;
    if (e == 0 || e == 0xff) return 0;
    return 24 - __builtin_ctz((u & 0x7fffff) | 0x800000);
}

static int64_t gcd64(int64_t a, int64_t b)
{
    if (a < 0) a = -a;
    if (b < 0) b = -b;
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static double nan_min(double a, double b)
{
    return isnan(a) || b < a ? b : a;
}

static double nan_max(double a, double b)
{
    return isnan(a) || b > a ? b : a;
}

/* A gross error: where its XOR pattern sits above the element's rounding noise and where it is. */
static void gross_note(peat_partial *p, int64_t i, int64_t cols, float t, float xr, double bound)
{
    p->n_gross++;
    uint32_t x = peat_f32_bits(t) ^ peat_f32_bits(xr);
    /* bits that honest rounding noise of up to `bound` can touch: ceil(log2(bound/ulp)) + 1 */
    double ax = fabs((double)xr);
    double ulp =
        isfinite(ax) && ax < FLT_MAX ? (double)nextafterf((float)ax, INFINITY) - ax : 0x1p104;
    int w = 0;
    if (ulp > 0 && bound > ulp)
        w = (int)ceil(log2(bound / ulp)) + 1;
    else if (ulp > 0)
        w = 1;
    if (w > 23) w = 23; /* rounding noise lives in the significand only */
    uint32_t high = x & ~((1u << w) - 1u);
    if (high && !(high & (high - 1))) {
        int b = __builtin_ctz(high);
        p->n_gross_single++;
        p->gross_bit[b]++;
        if (peat_f32_bits(t) >> b & 1u) p->n_gross_set++;
    }
    int64_t r = i / cols, c = i % cols;
    if (p->box_n == 0) {
        p->box_first = i;
        p->box_g = 0;
        p->box_r0 = p->box_r1 = r;
        p->box_c0 = p->box_c1 = c;
    } else {
        p->box_g = gcd64(p->box_g, i - p->box_first);
        p->box_r0 = r < p->box_r0 ? r : p->box_r0;
        p->box_r1 = r > p->box_r1 ? r : p->box_r1;
        p->box_c0 = c < p->box_c0 ? c : p->box_c0;
        p->box_c1 = c > p->box_c1 ? c : p->box_c1;
    }
    p->box_n++;
}

/* Bits of test XOR round_f32(exact), split by direction; ULP distance. */
static void bits_note(peat_partial *p, uint32_t bt, uint32_t br, int t_nan)
{
    uint32_t xo = bt ^ br;
    p->n_bits++;
    for (uint32_t m = xo; m; m &= m - 1) {
        int b = __builtin_ctz(m);
        if (bt >> b & 1u)
            p->bit_set[b]++;
        else
            p->bit_clr[b]++;
    }
    if (t_nan) return;
    int64_t d = ordered(bt) - ordered(br);
    d = d < 0 ? -d : d;
    p->n_ulp++;
    p->ulp_count[ulp_bin(d)]++;
    if ((double)d > p->max_ulp) p->max_ulp = (double)d;
}

/* The reference itself left the range: only agreement can be judged. */
static void nonfinite_exact(peat_partial *p, double x, float t)
{
    int same = isnan(x) ? isnan(t) : t == (float)x;
    if (same)
        p->n_equal_rounded++;
    else
        p->n_nonzero_err++, p->n_over_bound++, p->n_gross++;
}

/* A non-finite test value where the exact one is finite. */
static void nonfinite_test(peat_partial *p, double x, float t)
{
    if (isnan(t))
        p->n_nan++;
    else {
        p->n_inf++;
        p->min_exact_at_inf = nan_min(p->min_exact_at_inf, fabs(x));
    }
    p->n_nonzero_err++;
    p->n_over_bound++;
}

/* An error beyond the bound: where it sits in the range. */
static void over_bound(peat_partial *p, double x, float t)
{
    double ax = fabs(x);
    p->n_over_bound++;
    if (ax < FLT_MIN) p->n_err_subnormal_exact++;
    if (t == 0.0f && x != 0.0) {
        p->n_zero_introduced++;
        p->max_exact_at_zero = nan_max(p->max_exact_at_zero, ax);
    }
}

/* Scale-relative error (effective bits, bias) and, for sampled elements, the sample. */
static void scaled_note(const peat_scan_in *in, int64_t i, double x, double err, double m,
                        peat_partial *p, peat_worker *w)
{
    double s = m * in->inv_sqrt_k;
    if (!(s >= FLT_MIN)) return;
    double inv = 1.0 / s, a = fabs(err) * inv;
    p->n_relmag++;
    p->sumsq_relmag += a * a;
    if (x != 0.0) {
        double dd = (x > 0 ? err : -err) * inv, delta = dd - p->bias_mean;
        p->n_bias++;
        p->bias_mean += delta / (double)p->n_bias;
        p->bias_m2 += delta * (dd - p->bias_mean);
    }
}

static void sample_note(const peat_scan_in *in, int64_t i, uint64_t prio, double x, double err,
                        double m, peat_worker *w)
{
    double s = m * in->inv_sqrt_k;
    peat_sample smp = {.prio = prio,
                       .a = NAN,
                       .b = NAN,
                       .d = err,
                       .x = x,
                       .key = in->input ? peat_tensor_get(in->input, i) : NAN};
    if (s >= FLT_MIN) smp.a = fabs(err) / s, smp.b = fabs(x) / s;
    w->stage[w->n_stage++] = smp;
    if (w->n_stage == PEAT_WORKER_STAGE) peat_worker_flush(w);
}

/* One element whose exact value is finite. */
static void element(const peat_scan_in *in, int64_t i, double x, float t, peat_partial *p,
                    peat_worker *w)
{
    float xr = (float)x; /* RN to fp32, the best an fp32 kernel can return */
    uint32_t bt = peat_f32_bits(t), br = peat_f32_bits(xr);
    double ax = fabs(x), m = in->mag ? in->mag[i] : ax;
    double bound = in->gamma * m + in->eta;
    if (x == 0.0) p->n_exact_zero++;
    bits_note(p, bt, br, isnan(t));
    if (t == xr) p->n_equal_rounded++;
    if (!isfinite(t)) {
        nonfinite_test(p, x, t);
        gross_note(p, i, in->cols, t, xr, bound);
        return;
    }
    int mb = mant_bits_used(bt);
    if (mb > p->test_mant_bits) p->test_mant_bits = mb;
    double err = (double)t - x, aerr = fabs(err);
    if (ax > p->max_exact_finite) p->max_exact_finite = ax;
    if (ax > p->max_abs_exact) p->max_abs_exact = ax;
    p->sumsq_exact += x * x;
    p->n_fin++;
    p->sum_abs += aerr;
    p->sumsq_abs += aerr * aerr;
    if (aerr > p->max_abs) p->max_abs = aerr;
    if (err != 0.0) {
        p->n_nonzero_err++;
        p->n_err_signed++;
        if (fabs((double)t) < ax) p->n_toward_zero++;
    }
    if (x != 0.0) {
        double rel = aerr / ax;
        p->n_rel++;
        p->sum_rel += rel;
        if (rel > p->max_rel) p->max_rel = rel;
        peat_sketch_add(&w->rel, rel);
        if (t != 0.0f) p->min_exact_nonzero = nan_min(p->min_exact_nonzero, ax);
    }
    double e = aerr / bound;
    p->sum_norm += e;
    p->sumsq_norm += e * e;
    if (e > p->max_norm) p->max_norm = e;
    peat_sketch_add(&w->norm, e);
    if (e > 1.0) over_bound(p, x, t);
    if (e > PEAT_GROSS_FACTOR) gross_note(p, i, in->cols, t, xr, bound);
    scaled_note(in, i, x, err, m, p, w);
    uint64_t prio = peat_sample_prio(in->call, i);
    if (prio <= w->thresh) sample_note(in, i, prio, x, err, m, w);
}

void peat_scan_unit(const peat_scan_in *in, int64_t lo, int64_t hi, peat_partial *p, peat_worker *w)
{
    /* four hash lanes (xxHash64's round) so that the multiplies overlap */
    uint64_t h[4] = {HASH_P1 + HASH_P2, HASH_P2, 0, (uint64_t)0 - HASH_P1};
    for (int64_t i = lo; i < hi; i++) {
        double x = in->x ? in->x[i] : peat_tensor_get(in->exact_t, i);
        float t = in->t ? in->t[i] : (float)peat_tensor_get(in->test_t, i);
        p->n_elems++;
        h[i & 3] = rotl64(h[i & 3] + peat_f32_bits(t) * HASH_P2, 31) * HASH_P1;
        if (isfinite(x))
            element(in, i, x, t, p, w);
        else
            nonfinite_exact(p, x, t);
    }
    p->hash = rotl64(h[0], 1) + rotl64(h[1], 7) + rotl64(h[2], 12) + rotl64(h[3], 18) +
              (uint64_t)(hi - lo);
}

void peat_partial_merge(peat_partial *d, const peat_partial *s)
{
    /* counts */
    d->n_elems += s->n_elems, d->n_exact_zero += s->n_exact_zero, d->n_nan += s->n_nan;
    d->n_inf += s->n_inf, d->n_equal_rounded += s->n_equal_rounded;
    d->n_nonzero_err += s->n_nonzero_err, d->n_fin += s->n_fin, d->n_rel += s->n_rel;
    d->n_over_bound += s->n_over_bound, d->n_err_subnormal_exact += s->n_err_subnormal_exact;
    d->n_relmag += s->n_relmag, d->n_err_signed += s->n_err_signed;
    d->n_toward_zero += s->n_toward_zero, d->n_ulp += s->n_ulp, d->n_bits += s->n_bits;
    d->n_zero_introduced += s->n_zero_introduced, d->n_gross += s->n_gross;
    d->n_gross_single += s->n_gross_single, d->n_gross_set += s->n_gross_set;
    for (int b = 0; b < PEAT_ULP_BINS; b++) d->ulp_count[b] += s->ulp_count[b];
    for (int b = 0; b < PEAT_BIT_POSITIONS; b++) {
        d->bit_set[b] += s->bit_set[b], d->bit_clr[b] += s->bit_clr[b];
        d->gross_bit[b] += s->gross_bit[b];
    }
    d->hash = rotl64(d->hash + s->hash * HASH_P2, 31) * HASH_P1;
    /* sums (in unit order: the same for any number of threads) */
    d->sumsq_exact += s->sumsq_exact, d->sum_abs += s->sum_abs, d->sumsq_abs += s->sumsq_abs;
    d->sum_rel += s->sum_rel, d->sum_norm += s->sum_norm, d->sumsq_norm += s->sumsq_norm;
    d->sumsq_relmag += s->sumsq_relmag;
    /* Welford: Chan et al.'s pairwise combination of (n, mean, M2) */
    if (s->n_bias > 0) {
        int64_t n = d->n_bias + s->n_bias;
        double delta = s->bias_mean - d->bias_mean;
        d->bias_m2 +=
            s->bias_m2 + delta * delta * (double)d->n_bias * (double)s->n_bias / (double)n;
        d->bias_mean += delta * (double)s->n_bias / (double)n;
        d->n_bias = n;
    }
    /* extremes */
    d->max_abs_exact = s->max_abs_exact > d->max_abs_exact ? s->max_abs_exact : d->max_abs_exact;
    d->max_abs = s->max_abs > d->max_abs ? s->max_abs : d->max_abs;
    d->max_rel = s->max_rel > d->max_rel ? s->max_rel : d->max_rel;
    d->max_norm = s->max_norm > d->max_norm ? s->max_norm : d->max_norm;
    d->max_ulp = s->max_ulp > d->max_ulp ? s->max_ulp : d->max_ulp;
    d->test_mant_bits =
        s->test_mant_bits > d->test_mant_bits ? s->test_mant_bits : d->test_mant_bits;
    d->max_exact_finite =
        s->max_exact_finite > d->max_exact_finite ? s->max_exact_finite : d->max_exact_finite;
    if (!isnan(s->min_exact_at_inf))
        d->min_exact_at_inf = nan_min(d->min_exact_at_inf, s->min_exact_at_inf);
    if (!isnan(s->max_exact_at_zero))
        d->max_exact_at_zero = nan_max(d->max_exact_at_zero, s->max_exact_at_zero);
    if (!isnan(s->min_exact_nonzero))
        d->min_exact_nonzero = nan_min(d->min_exact_nonzero, s->min_exact_nonzero);
    /* the gross errors' box and lane stride: first index, gcd of distances from it */
    if (s->box_n > 0 && d->box_n == 0) {
        d->box_n = s->box_n, d->box_first = s->box_first, d->box_g = s->box_g;
        d->box_r0 = s->box_r0, d->box_r1 = s->box_r1, d->box_c0 = s->box_c0, d->box_c1 = s->box_c1;
    } else if (s->box_n > 0) {
        d->box_g = gcd64(gcd64(d->box_g, s->box_g), s->box_first - d->box_first);
        d->box_r0 = s->box_r0 < d->box_r0 ? s->box_r0 : d->box_r0;
        d->box_r1 = s->box_r1 > d->box_r1 ? s->box_r1 : d->box_r1;
        d->box_c0 = s->box_c0 < d->box_c0 ? s->box_c0 : d->box_c0;
        d->box_c1 = s->box_c1 > d->box_c1 ? s->box_c1 : d->box_c1;
        d->box_n += s->box_n;
    }
}
