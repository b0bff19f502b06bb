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

/* The block steps are inlined into each clone of peat_scan_unit so that they are compiled for its
 * target (a call would run the baseline code). */
#if defined(__GNUC__)
#define INLINE_BLOCK inline __attribute__((always_inline))
#else
#define INLINE_BLOCK inline
#endif

/* Per-block bit counters: one byte per bit position (a block has at most 64 < 255 elements), so
 * an element adds its 32 bits in one vector step instead of a loop over its set bits. */
typedef struct bitcount {
    uint8_t set[PEAT_BIT_POSITIONS], clr[PEAT_BIT_POSITIONS];
} bitcount;

/* Adds the block's byte counters to the partial's. */
static void bits_flush(const bitcount *bc, peat_partial *p)
{
    for (int b = 0; b < PEAT_BIT_POSITIONS; b++) p->bit_set[b] += bc->set[b];
    for (int b = 0; b < PEAT_BIT_POSITIONS; b++) p->bit_clr[b] += bc->clr[b];
}

/* Bits of test XOR round_f32(exact) where they differ, split by direction, and the ULP distance
 * (equal elements are counted in bulk: hot_fold). */
static INLINE_BLOCK void bits_note(peat_partial *p, bitcount *bc, uint32_t bt, uint32_t br,
                                   int t_nan)
{
    uint32_t xo = bt ^ br, s = xo & bt, c = xo & ~bt;
    for (int b = 0; b < PEAT_BIT_POSITIONS; b++) bc->set[b] += (uint8_t)(s >> b & 1u);
    for (int b = 0; b < PEAT_BIT_POSITIONS; b++) bc->clr[b] += (uint8_t)(c >> b & 1u);
    if (t_nan) return;
    int64_t d = ordered(bt) - ordered(br);
    d = d < 0 ? -d : d;
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

/* Elements per block: each block is read once into arrays, its arithmetic done in branch-free
 * loops over the arrays (the compiler vectorises them), and only what depends on bits, rare cases
 * and the sample is done element by element. */
#define BLK 64

/* One block's values and derived quantities; cond[] bits say which statistics an element joins. */
enum { C_FIN = 1, C_REL = 2, C_SCALE = 4, C_BIAS = 8, C_ERR = 16, C_TOWARD = 32 };
typedef struct block {
    int64_t lo, n;
    double x[BLK], t[BLK], m[BLK];
    double aerr[BLK], e[BLK], rel[BLK], a[BLK], dd[BLK], err[BLK], inv_s[BLK];
    int64_t slot_e[BLK], slot_rel[BLK]; /* sketch counter slots */
    int64_t cond[BLK];
} block;

/* Sums and extremes of a unit, in locals while it streams; in element order, as before. The bias
 * moments are plain sums of d and d^2 (d is an error in units of its scale, O(1), so no
 * cancellation matters), turned into (mean, M2) per unit and combined with Chan et al.'s formula.
 */
typedef struct hot {
    int64_t n_fx, n_tnan, n_diff; /* finite exact; of those NaN test, and test != rounded exact */
    int64_t n_fin, n_rel, n_relmag, n_bias, n_signed, n_toward, n_equal, n_zero;
    double sumsq_exact, sum_abs, sumsq_abs, sum_rel, sum_norm, sumsq_norm, sumsq_relmag;
    double b_s1, b_s2;
    double max_exact, max_abs, max_rel, max_norm, min_exact_nonzero, min_pos_e, min_pos_rel;
    uint32_t mant_or; /* OR of the significands (with the implicit bit) of normal test values */
} hot;

static INLINE_BLOCK void block_load(const peat_scan_in *in, int64_t lo, int64_t n, block *b)
{
    b->lo = lo, b->n = n;
    for (int64_t j = 0; j < n; j++) {
        b->x[j] = in->x ? in->x[lo + j] : peat_tensor_get(in->exact_t, lo + j);
        b->t[j] = in->t ? in->t[lo + j] : (float)peat_tensor_get(in->test_t, lo + j);
    }
    if (in->mag)
        memcpy(b->m, in->mag + lo, (size_t)n * sizeof *b->m);
    else
        for (int64_t j = 0; j < n; j++) b->m[j] = fabs(b->x[j]);
}

/* Errors against |exact|, the bound and the scale s = mag / sqrt(terms), without branches. */
static INLINE_BLOCK void block_errors(const peat_scan_in *in, block *b)
{
    const double gamma = in->gamma, eta = in->eta, isk = in->inv_sqrt_k;
    for (int64_t j = 0; j < b->n; j++) {
        double x = b->x[j], t = b->t[j], ax = fabs(x), err = t - x, aerr = fabs(err);
        double sc = b->m[j] * isk;
        int fin = (ax <= DBL_MAX) & (fabs(t) <= DBL_MAX), nz = x != 0.0, sok = sc >= FLT_MIN;
        double inv = 1.0 / (sok ? sc : 1.0);
        b->err[j] = err;
        b->aerr[j] = aerr;
        b->e[j] = aerr / (gamma * b->m[j] + eta);
        b->rel[j] = aerr / (nz ? ax : 1.0);
        b->slot_e[j] = peat_sketch_slot(b->e[j]);
        b->slot_rel[j] = peat_sketch_slot(b->rel[j]);
        b->a[j] = aerr * inv;
        b->dd[j] = (x > 0 ? err : -err) * inv;
        b->inv_s[j] = sok ? inv : 0.0;
        b->cond[j] = fin * (C_FIN | nz * C_REL | sok * C_SCALE | (sok & nz) * C_BIAS |
                            (err != 0.0) * C_ERR | ((err != 0.0) & (fabs(t) < ax)) * C_TOWARD);
    }
}

/* The block's sums and extremes, each masked by its condition (selects, not branches). */
static INLINE_BLOCK void block_sums(const block *b, hot *h)
{
    for (int64_t j = 0; j < b->n; j++) {
        int c = b->cond[j];
        int fin = c & C_FIN, rel = c & C_REL, sc = c & C_SCALE, bias = c & C_BIAS;
        double x = b->x[j], ax = fabs(x), aerr = b->aerr[j], e = b->e[j], r = b->rel[j];
        h->n_fin += fin != 0, h->n_rel += rel != 0, h->n_relmag += sc != 0, h->n_bias += bias != 0;
        h->n_signed += (c & C_ERR) != 0, h->n_toward += (c & C_TOWARD) != 0;
        h->sumsq_exact += fin ? x * x : 0.0;
        h->sum_abs += fin ? aerr : 0.0;
        h->sumsq_abs += fin ? aerr * aerr : 0.0;
        h->sum_rel += rel ? r : 0.0;
        h->sum_norm += fin ? e : 0.0;
        h->sumsq_norm += fin ? e * e : 0.0;
        h->sumsq_relmag += sc ? b->a[j] * b->a[j] : 0.0;
        h->b_s1 += bias ? b->dd[j] : 0.0;
        h->b_s2 += bias ? b->dd[j] * b->dd[j] : 0.0;
        h->max_exact = fin && ax > h->max_exact ? ax : h->max_exact;
        h->max_abs = fin && aerr > h->max_abs ? aerr : h->max_abs;
        h->max_rel = rel && r > h->max_rel ? r : h->max_rel;
        h->max_norm = fin && e > h->max_norm ? e : h->max_norm;
        h->min_pos_e = fin && e > 0.0 && e < h->min_pos_e ? e : h->min_pos_e;
        h->min_pos_rel = rel && r > 0.0 && r < h->min_pos_rel ? r : h->min_pos_rel;
        int nzt = rel && b->t[j] != 0.0;
        h->min_exact_nonzero = nzt && ax < h->min_exact_nonzero ? ax : h->min_exact_nonzero;
    }
}

static void sample_note(const peat_scan_in *in, int64_t i, uint64_t prio, const block *b, int j,
                        peat_worker *w)
{
    double x = b->x[j], err = b->err[j], inv_s = b->inv_s[j];
    peat_sample smp = {.prio = prio,
                       .a = NAN,
                       .b = NAN,
                       .d = err,
                       .x = x,
                       .key = in->input ? peat_tensor_get(in->input, i) : NAN};
    if (inv_s > 0.0) smp.a = fabs(err) * inv_s, smp.b = fabs(x) * inv_s;
    w->stage[w->n_stage++] = smp;
    if (w->n_stage == PEAT_WORKER_STAGE) peat_worker_flush(w);
}

/* What needs the bits or is rare: bit and ULP patterns, sketches, over-bound and gross errors,
 * non-finite values, the sample. */
static INLINE_BLOCK void block_bits(const peat_scan_in *in, const block *b, hot *h, peat_partial *p,
                                    peat_worker *w)
{
    bitcount bc;
    memset(&bc, 0, sizeof bc);
    for (int j = 0; j < b->n; j++) {
        int64_t i = b->lo + j;
        double x = b->x[j];
        float t = (float)b->t[j];
        if (!(fabs(x) <= DBL_MAX)) {
            nonfinite_exact(p, x, t);
            continue;
        }
        float xr = (float)x; /* RN to fp32, the best an fp32 kernel can return */
        uint32_t bt = peat_f32_bits(t), br = peat_f32_bits(xr);
        int t_nan = isnan(t);
        h->n_fx++, h->n_zero += x == 0.0, h->n_tnan += t_nan, h->n_equal += t == xr;
        if (bt != br) {
            h->n_diff += !t_nan;
            bits_note(p, &bc, bt, br, t_nan);
        }
        if (!(b->cond[j] & C_FIN)) {
            nonfinite_test(p, x, t);
            gross_note(p, i, in->cols, t, xr, in->gamma * b->m[j] + in->eta);
            continue;
        }
        uint32_t ex = (bt >> 23) & 0xff;
        h->mant_or |= ex != 0 && ex != 0xff ? (bt & 0x7fffff) | 0x800000 : 0;
        /* the sketches' counts here; their n and extremes per unit (sketch_fold) */
        if (b->cond[j] & C_REL) w->rel.count[b->slot_rel[j]]++;
        w->norm.count[b->slot_e[j]]++;
        if (b->slot_e[j] == SKETCH_SLOT_HIGH) w->norm.sumsq_high += b->e[j] * b->e[j];
        if (b->slot_rel[j] == SKETCH_SLOT_HIGH && (b->cond[j] & C_REL))
            w->rel.sumsq_high += b->rel[j] * b->rel[j];
        if (b->e[j] > 1.0) over_bound(p, x, t);
        if (b->e[j] > PEAT_GROSS_FACTOR)
            gross_note(p, i, in->cols, t, xr, in->gamma * b->m[j] + in->eta);
        uint64_t prio = peat_sample_prio(in->call, i);
        if (prio <= w->thresh) sample_note(in, i, prio, b, j, w);
    }
    bits_flush(&bc, p);
}

/* Folds a unit's locals into its partial. */
static void hot_fold(const hot *h, peat_partial *p)
{
    p->n_fin += h->n_fin, p->n_rel += h->n_rel, p->n_relmag += h->n_relmag;
    p->n_err_signed += h->n_signed, p->n_toward_zero += h->n_toward;
    p->n_nonzero_err += h->n_signed, p->n_equal_rounded += h->n_equal;
    p->n_exact_zero += h->n_zero;
    p->n_bits += h->n_fx;
    p->n_ulp += h->n_fx - h->n_tnan;
    p->ulp_count[0] += h->n_fx - h->n_tnan - h->n_diff; /* bit-equal: 0 ulps */
    p->sumsq_exact += h->sumsq_exact, p->sum_abs += h->sum_abs, p->sumsq_abs += h->sumsq_abs;
    p->sum_rel += h->sum_rel, p->sum_norm += h->sum_norm, p->sumsq_norm += h->sumsq_norm;
    p->sumsq_relmag += h->sumsq_relmag;
    p->max_exact_finite = h->max_exact > p->max_exact_finite ? h->max_exact : p->max_exact_finite;
    p->max_abs_exact = h->max_exact > p->max_abs_exact ? h->max_exact : p->max_abs_exact;
    p->max_abs = h->max_abs > p->max_abs ? h->max_abs : p->max_abs;
    p->max_rel = h->max_rel > p->max_rel ? h->max_rel : p->max_rel;
    p->max_norm = h->max_norm > p->max_norm ? h->max_norm : p->max_norm;
    if (h->min_exact_nonzero < INFINITY)
        p->min_exact_nonzero = nan_min(p->min_exact_nonzero, h->min_exact_nonzero);
    /* most significand bits any normal value uses: 24 minus the fewest trailing zeros */
    int mb = h->mant_or ? 24 - __builtin_ctz(h->mant_or) : 0;
    p->test_mant_bits = mb > p->test_mant_bits ? mb : p->test_mant_bits;
    if (h->n_bias > 0) {
        double n = (double)h->n_bias, mean = h->b_s1 / n, m2 = h->b_s2 - h->b_s1 * mean;
        peat_partial u;
        peat_partial_init(&u);
        u.n_bias = h->n_bias;
        u.bias_mean = mean;
        u.bias_m2 = m2 > 0.0 ? m2 : 0.0;
        peat_partial_merge(p, &u);
    }
}

/* A unit's count of values and their extremes join a sketch (its counts were added per element). */
static void sketch_fold(peat_sketch *s, int64_t n, double max, double min_pos)
{
    s->n += n;
    s->max = max > s->max ? max : s->max;
    s->min_pos = min_pos < s->min_pos ? min_pos : s->min_pos;
}

/* Four hash lanes (xxHash64's round) over the test bits, so that the multiplies overlap. */
static INLINE_BLOCK void block_hash(const block *b, uint64_t h[4])
{
    for (int64_t j = 0; j < b->n; j++) {
        uint64_t v = peat_f32_bits((float)b->t[j]) * HASH_P2;
        h[j & 3] = rotl64(h[j & 3] + v, 31) * HASH_P1;
    }
}

/* An AVX2 clone where the CPU has it (chosen at load time): without FMA, so every operation
 * rounds exactly as in the baseline clone and the results are the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define SCAN_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SCAN_CLONES
#endif
SCAN_CLONES
void peat_scan_unit(const peat_scan_in *in, int64_t lo, int64_t hi, peat_partial *p, peat_worker *w)
{
    hot h;
    memset(&h, 0, sizeof h);
    h.min_exact_nonzero = h.min_pos_e = h.min_pos_rel = INFINITY;
    uint64_t hl[4] = {HASH_P1 + HASH_P2, HASH_P2, 0, (uint64_t)0 - HASH_P1};
    block b;
    for (int64_t i = lo; i < hi; i += BLK) {
        block_load(in, i, hi - i < BLK ? hi - i : BLK, &b);
        block_errors(in, &b);
        block_sums(&b, &h);
        block_bits(in, &b, &h, p, w);
        block_hash(&b, hl);
    }
    p->n_elems += hi - lo;
    hot_fold(&h, p);
    sketch_fold(&w->norm, h.n_fin, h.max_norm, h.min_pos_e);
    sketch_fold(&w->rel, h.n_rel, h.max_rel, h.min_pos_rel);
    p->hash = rotl64(hl[0], 1) + rotl64(hl[1], 7) + rotl64(hl[2], 12) + rotl64(hl[3], 18) +
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
