/* acc.c: streams output tensors into the analyzer's accumulator (counts, moments, bits, samples).
 */
#include "analyzer/internal.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Half the smallest fp32 subnormal: the absolute error one rounding in gradual underflow adds. */
#define ETA_F32 0x1p-150

double peat_analyzer_bound(double mag, int64_t depth)
{
    const double u = 0x1p-24;
    double ku = (double)(depth > 0 ? depth : 1) * u;
    /* gamma_K is undefined for K u >= 1; beyond K u = 1/2 the first-order K u is used instead,
     * which only matters for K > 2^23, where the bound is meaningless anyway */
    double gamma = ku < 0.5 ? ku / (1.0 - ku) : ku;
    return gamma * mag + (double)((depth > 0 ? depth : 1) + 1) * ETA_F32;
}

peat_analyzer_acc_t *peat_analyzer_acc_alloc(const char *kernel, peat_op_kind op)
{
    peat_analyzer_acc_t *acc = calloc(1, sizeof *acc);
    if (!acc) return NULL;
    snprintf(acc->kernel, sizeof acc->kernel, "%s", kernel ? kernel : "");
    acc->op = op;
    acc->hash = 1469598103934665603ull;
    acc->min_exact_at_inf = NAN;
    acc->max_exact_at_zero = NAN;
    acc->min_exact_nonzero = NAN;
    acc->repeat_max_diff = -1.0;
    acc->cap_s = PEAT_ANALYZER_MAX_SAMPLES;
    /* fixed seed: the same adds in the same order keep the same samples */
    acc->rng = 0x9e3779b97f4a7c15ull;
    return acc;
}

void peat_analyzer_acc_free(peat_analyzer_acc_t *acc)
{
    if (!acc) return;
    free(acc->s);
    free(acc);
}

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Reservoir sampling (algorithm R): every finite element has the same chance to be kept, so
 * strided fault patterns cannot alias with the sampling as a fixed decimation would. */
static peat_status sample_push(peat_analyzer_acc_t *acc, const peat_sample *x)
{
    int64_t i = acc->n_seen++;
    if (acc->n_s < acc->cap_s) {
        if (acc->n_s == acc->alloc_s) {
            /* grow geometrically so that small accumulators stay small */
            int64_t want = acc->alloc_s ? acc->alloc_s * 2 : 4096;
            if (want > acc->cap_s) want = acc->cap_s;
            peat_sample *ns = realloc(acc->s, (size_t)want * sizeof *ns);
            if (!ns) return PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer: %lld samples", (long long)want);
            acc->s = ns;
            acc->alloc_s = want;
        }
        acc->s[acc->n_s++] = *x;
        return PEAT_OK;
    }
    uint64_t j = splitmix(&acc->rng) % (uint64_t)(i + 1);
    if (j < (uint64_t)acc->cap_s) acc->s[j] = *x;
    return PEAT_OK;
}

/* Maps float bits to integers that order like the values (-0 and +0 both map to 0). */
static int64_t ordered(float f)
{
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return i >= 0 ? (int64_t)i : -(int64_t)(i & 0x7fffffff);
}

static int ulp_bin(int64_t d)
{
    if (d <= 2) return (int)d;
    int b = 2; /* 3-4 -> bin 3, 5-8 -> bin 4, ..., 513-1024 -> bin 11, >1024 -> bin 12 */
    int64_t hi = 4;
    while (d > hi && b < PEAT_ULP_BINS - 2) {
        hi *= 2;
        b++;
    }
    return d > hi ? PEAT_ULP_BINS - 1 : b + 1;
}

/* Significand bits a normal float uses: 24 minus its trailing zero bits. */
static int mant_bits_used(float f)
{
    uint32_t u = peat_f32_bits(f);
    uint32_t e = (u >> 23) & 0xff;
    if (e == 0 || e == 0xff) return 0;
    uint32_t m = (u & 0x7fffff) | 0x800000;
    int tz = 0;
    while (!(m & 1u)) {
        m >>= 1;
        tz++;
    }
    return 24 - tz;
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

static int popcount32(uint32_t x)
{
    int c = 0;
    for (; x; x &= x - 1) c++;
    return c;
}

/* Per-tensor state of the gross errors' spatial box and lane stride. */
typedef struct gross_box {
    int64_t n, first, g, r0, r1, c0, c1;
} gross_box;

/* A gross error: where its XOR pattern sits above the element's rounding noise and where it is. */
static void gross_note(peat_analyzer_acc_t *acc, gross_box *bx, int64_t i, int64_t cols, float t,
                       float xr, double bound)
{
    acc->n_gross++;
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
    if (popcount32(high) == 1) {
        int b = 0;
        while (!(high >> b & 1u)) b++;
        acc->n_gross_single++;
        acc->gross_bit[b]++;
        if (peat_f32_bits(t) >> b & 1u) acc->n_gross_set++;
    }
    int64_t r = i / cols, c = i % cols;
    if (bx->n == 0) {
        bx->first = i;
        bx->g = 0;
        bx->r0 = bx->r1 = r;
        bx->c0 = bx->c1 = c;
    } else {
        bx->g = gcd64(bx->g, i - bx->first);
        if (r < bx->r0) bx->r0 = r;
        if (r > bx->r1) bx->r1 = r;
        if (c < bx->c0) bx->c0 = c;
        if (c > bx->c1) bx->c1 = c;
    }
    bx->n++;
}

static void box_finish(peat_analyzer_acc_t *acc, const gross_box *bx, int64_t rows, int64_t cols)
{
    if (bx->n == 0) return;
    int64_t h = bx->r1 - bx->r0 + 1, w = bx->c1 - bx->c0 + 1;
    int bottom = bx->r1 == rows - 1 && rows > 1, right = bx->c1 == cols - 1 && cols > 1;
    acc->box_gross_sum += bx->n;
    acc->box_area_sum += h * w;
    acc->box_numel_sum += rows * cols;
    if (bottom || right) acc->gross_at_edge += bx->n;
    if (bx->n >= 2) acc->gross_stride = gcd64(acc->gross_stride, bx->g);
    if (bx->n > acc->box_best_n) {
        acc->box_best_n = bx->n;
        acc->box_rows = h;
        acc->box_cols = w;
        acc->box_tensor_rows = rows;
        acc->box_tensor_cols = cols;
        acc->box_at_bottom = bottom;
        acc->box_at_right = right;
    }
}

static void hash_bits(peat_analyzer_acc_t *acc, uint32_t u)
{
    for (int k = 0; k < 4; k++) {
        acc->hash ^= (u >> (8 * k)) & 0xffu;
        acc->hash *= 1099511628211ull;
    }
}

peat_status peat_analyzer_acc_add_input(peat_analyzer_acc_t *acc, const peat_tensor *test,
                                        const peat_tensor *exact, const double *mag, int64_t depth,
                                        int64_t rows, int64_t cols, const peat_tensor *input)
{
    return peat_analyzer_acc_add_terms(acc, test, exact, mag, depth, depth, rows, cols, input);
}

peat_status peat_analyzer_acc_add_terms(peat_analyzer_acc_t *acc, const peat_tensor *test,
                                        const peat_tensor *exact, const double *mag, int64_t depth,
                                        int64_t terms, int64_t rows, int64_t cols,
                                        const peat_tensor *input)
{
    if (!acc || !test || !exact)
        return PEAT_ERROR(PEAT_ERR_INVAL, "analyzer: NULL accumulator or tensor");
    int64_t n = peat_tensor_numel(test);
    if (peat_tensor_numel(exact) != n)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "analyzer: test has %lld elements, exact %lld",
                          (long long)n, (long long)peat_tensor_numel(exact));
    if (input && peat_tensor_numel(input) != n)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "analyzer: input has %lld elements, test %lld",
                          (long long)peat_tensor_numel(input), (long long)n);
    if (depth <= 0)
        return PEAT_ERROR(PEAT_ERR_INVAL, "analyzer: depth %lld <= 0", (long long)depth);
    if (rows <= 0 || cols <= 0 || rows * cols != n)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "analyzer: view %lldx%lld does not cover %lld elements",
                          (long long)rows, (long long)cols, (long long)n);
    acc->n_calls++;
    if (depth > acc->depth_max) acc->depth_max = depth;
    if (terms <= 0 || terms > depth)
        return PEAT_ERROR(PEAT_ERR_INVAL, "analyzer: terms %lld outside 1..depth %lld",
                          (long long)terms, (long long)depth);
    double sqrt_k = sqrt((double)terms);
    gross_box bx = {0};
    for (int64_t i = 0; i < n; i++) {
        double x = peat_tensor_get(exact, i);
        float t =
            test->dtype == PEAT_DTYPE_F32 ? peat_f32(test)[i] : (float)peat_tensor_get(test, i);
        acc->n_elems++;
        hash_bits(acc, peat_f32_bits(t));
        if (!isfinite(x)) {
            /* the reference itself left the range: only agreement can be judged */
            float xr = (float)x;
            int same = isnan(x) ? isnan(t) : t == xr;
            if (same)
                acc->n_equal_rounded++;
            else
                acc->n_nonzero_err++, acc->n_over_bound++, acc->n_gross++;
            continue;
        }
        float xr = (float)x; /* RN to fp32, the best an fp32 kernel can return */
        if (x == 0.0) acc->n_exact_zero++;
        double m = mag ? mag[i] : fabs(x);
        double bound = peat_analyzer_bound(m, depth);
        /* bit pattern against the correctly rounded value */
        uint32_t bt = peat_f32_bits(t), br = peat_f32_bits(xr), xo = bt ^ br;
        acc->n_bits++;
        for (int b = 0; b < PEAT_BIT_POSITIONS; b++)
            if (xo >> b & 1u) {
                if (bt >> b & 1u)
                    acc->bit_set[b]++;
                else
                    acc->bit_clr[b]++;
            }
        if (!isnan(t)) {
            int64_t d = ordered(t) - ordered(xr);
            if (d < 0) d = -d;
            acc->n_ulp++;
            acc->ulp_count[ulp_bin(d)]++;
            if ((double)d > acc->max_ulp) acc->max_ulp = (double)d;
        }
        if (t == xr) acc->n_equal_rounded++;
        if (!isfinite(t)) {
            if (isnan(t))
                acc->n_nan++;
            else {
                acc->n_inf++;
                if (isnan(acc->min_exact_at_inf) || fabs(x) < acc->min_exact_at_inf)
                    acc->min_exact_at_inf = fabs(x);
            }
            acc->n_nonzero_err++;
            acc->n_over_bound++;
            gross_note(acc, &bx, i, cols, t, xr, bound);
            continue;
        }
        int mb = mant_bits_used(t);
        if (mb > acc->test_mant_bits) acc->test_mant_bits = mb;
        double ax = fabs(x), err = (double)t - x, aerr = fabs(err);
        if (ax > acc->max_exact_finite) acc->max_exact_finite = ax;
        if (ax > acc->max_abs_exact) acc->max_abs_exact = ax;
        acc->sumsq_exact += x * x;
        acc->n_fin++;
        acc->sum_abs += aerr;
        acc->sumsq_abs += aerr * aerr;
        if (aerr > acc->max_abs) acc->max_abs = aerr;
        if (err != 0.0) {
            acc->n_nonzero_err++;
            acc->n_err_signed++;
            if (fabs((double)t) < ax) acc->n_toward_zero++;
        }
        peat_sample smp = {.rel = NAN,
                           .a = NAN,
                           .b = NAN,
                           .d = err,
                           .x = x,
                           .key = input ? peat_tensor_get(input, i) : NAN};
        if (x != 0.0) {
            smp.rel = aerr / ax;
            acc->n_rel++;
            acc->sum_rel += smp.rel;
            if (smp.rel > acc->max_rel) acc->max_rel = smp.rel;
            if (t != 0.0f && (isnan(acc->min_exact_nonzero) || ax < acc->min_exact_nonzero))
                acc->min_exact_nonzero = ax;
        }
        double e = aerr / bound;
        smp.norm = e;
        acc->sum_norm += e;
        if (e > acc->max_norm) acc->max_norm = e;
        if (e > 1.0) {
            acc->n_over_bound++;
            if (ax < FLT_MIN) acc->n_err_subnormal_exact++;
            if (t == 0.0f && x != 0.0) {
                acc->n_zero_introduced++;
                if (isnan(acc->max_exact_at_zero) || ax > acc->max_exact_at_zero)
                    acc->max_exact_at_zero = ax;
            }
        }
        if (e > PEAT_GROSS_FACTOR) gross_note(acc, &bx, i, cols, t, xr, bound);
        double s = m / sqrt_k;
        if (s >= FLT_MIN) {
            smp.a = aerr / s;
            smp.b = ax / s;
            acc->n_relmag++;
            acc->sumsq_relmag += smp.a * smp.a;
            if (x != 0.0) {
                double dd = (x > 0 ? err : -err) / s, delta = dd - acc->bias_mean;
                acc->n_bias++;
                acc->bias_mean += delta / (double)acc->n_bias;
                acc->bias_m2 += delta * (dd - acc->bias_mean);
            }
        }
        PEAT_TRY(sample_push(acc, &smp));
    }
    box_finish(acc, &bx, rows, cols);
    return PEAT_OK;
}

peat_status peat_analyzer_acc_add(peat_analyzer_acc_t *acc, const peat_tensor *test,
                                  const peat_tensor *exact, const double *mag, int64_t depth,
                                  int64_t rows, int64_t cols)
{
    return peat_analyzer_acc_add_input(acc, test, exact, mag, depth, rows, cols, NULL);
}

void peat_analyzer_acc_add_repeat(peat_analyzer_acc_t *acc, const peat_tensor *run1,
                                  const peat_tensor *run2)
{
    if (!acc || !run1 || !run2) return;
    int64_t n = peat_tensor_numel(run1);
    if (peat_tensor_numel(run2) != n) {
        /* different shapes can only mean the runs differ */
        acc->repeat_max_diff = INFINITY;
        return;
    }
    double mx = acc->repeat_max_diff > 0 ? acc->repeat_max_diff : 0.0;
    for (int64_t i = 0; i < n; i++) {
        double a = peat_tensor_get(run1, i), b = peat_tensor_get(run2, i);
        if (a == b || (isnan(a) && isnan(b))) continue;
        acc->repeat_n_diff++;
        double d = isfinite(a) && isfinite(b) ? fabs(a - b) : INFINITY;
        if (d > mx) mx = d;
    }
    acc->repeat_max_diff = mx;
}
