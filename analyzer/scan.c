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

void peat_analyzer_partial_init(peat_partial *p)
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
static void gross_note(peat_partial *p, int64_t i, int64_t rows, int64_t cols, float t, float xr,
                       double bound)
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
    int64_t r = i / cols % rows, c = i % cols;
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

/* The block steps are inlined into each clone of peat_analyzer_scan_unit so that they are compiled
 * for its target (a call would run the baseline code). */
#if defined(__GNUC__)
#define INLINE_BLOCK inline __attribute__((always_inline))
#else
#define INLINE_BLOCK inline
#endif

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
    /* a flush loses a tiny nonzero value: an error where the exact result is 0 is none */
    if (ax < FLT_MIN && ax > 0.0) p->n_err_subnormal_exact++;
    if (t == 0.0f && x != 0.0) {
        p->n_zero_introduced++;
        p->max_exact_at_zero = nan_max(p->max_exact_at_zero, ax);
    }
}
/* Elements per block: each block is read once into arrays and its arithmetic done in branch-free
 * loops over the arrays (the compiler vectorises them); only the bit patterns of differing
 * elements, the sketch counters, rare cases and the sample are visited element by element. */
#define BLK 64
/* Floating-point sums run in LANES interleaved partial sums (element j of a block joins lane
 * j % LANES), so that they vectorise; the lanes are added in a fixed order at the end of a unit,
 * so a unit's sums, and the signature, are the same bits for any number of threads. */
#define LANES 4

/* One block's values and derived quantities; cond[] bits say which statistics an element joins. */
enum { C_FIN = 1, C_REL = 2, C_SCALE = 4, C_BIAS = 8, C_ERR = 16, C_TOWARD = 32 };
enum { X_FIN = 1, X_NZ = 2, X_SOK = 4 }; /* exact finite, non-zero, scale >= FLT_MIN */
typedef struct block {
    int64_t lo, n, nv; /* first element, elements, elements rounded up to LANES (padding) */
    /* the exact side, shared by the test values of a pair (peat_analyzer_scan_pair) */
    double x[BLK], m[BLK], ax[BLK], bnd[BLK], inv[BLK]; /* inv: 1 / scale (1 if X_SOK unset) */
    int64_t xc[BLK];                                    /* X_* flags of the exact value */
    /* one test value's side */
    double t[BLK], aerr[BLK], e[BLK], rel[BLK], a[BLK], dd[BLK], err[BLK];
    int64_t slot_e[BLK], slot_rel[BLK]; /* sketch counter slots */
    int64_t cond[BLK];
    uint64_t prio[BLK];         /* sampling priorities */
    uint32_t bt[BLK], br[BLK];  /* bits of the test value and of the exact one rounded to fp32 */
    int32_t fx[BLK], diff[BLK]; /* exact finite; test bits differ from the rounded exact bits */
} block;

/* Sums and extremes of a unit, in locals while it streams, one per lane. The bias moments are
 * plain sums of d and d^2 (d is an error in units of its scale, O(1), so no cancellation matters),
 * turned into (mean, M2) per unit and combined with Chan et al.'s formula. */
typedef struct hot {
    int64_t n_fx, n_tnan, n_diff, n_zero, n_equal; /* finite exact; NaN test, != rounded, ... */
    int64_t n_fin[LANES], n_rel[LANES], n_relmag[LANES], n_bias[LANES], n_signed[LANES],
        n_toward[LANES];
    double sumsq_exact[LANES], sum_abs[LANES], sumsq_abs[LANES], sum_rel[LANES], sum_norm[LANES],
        sumsq_norm[LANES], sumsq_relmag[LANES], b_s1[LANES], b_s2[LANES];
    double max_exact[LANES], max_abs[LANES], max_rel[LANES], max_norm[LANES],
        min_exact_nonzero[LANES], min_pos_e[LANES], min_pos_rel[LANES];
    uint32_t mant_or; /* OR of the significands (with the implicit bit) of normal test values */
} hot;

static void hot_init(hot *h)
{
    memset(h, 0, sizeof *h);
    for (int l = 0; l < LANES; l++)
        h->min_exact_nonzero[l] = h->min_pos_e[l] = h->min_pos_rel[l] = INFINITY;
}

/* The block's exact values and magnitudes as doubles; the padding up to a multiple of LANES is
 * NaN, which no statistic takes (its cond is 0). */
static INLINE_BLOCK void block_load_x(const peat_scan_in *in, int64_t lo, int64_t n, block *b)
{
    b->lo = lo, b->n = n, b->nv = (n + LANES - 1) / LANES * LANES;
    if (in->x)
        memcpy(b->x, in->x + lo, (size_t)n * sizeof *b->x);
    else
        for (int64_t j = 0; j < n; j++) b->x[j] = peat_tensor_get(in->exact_t, lo + j);
    if (in->mag)
        memcpy(b->m, in->mag + lo, (size_t)n * sizeof *b->m);
    else
        for (int64_t j = 0; j < n; j++) b->m[j] = fabs(b->x[j]);
    for (int64_t j = n; j < b->nv; j++) b->x[j] = b->m[j] = NAN;
}

/* The test values of one side (NaN padding). */
static INLINE_BLOCK void block_load_t(const peat_scan_in *in, block *b)
{
    if (in->t)
        for (int64_t j = 0; j < b->n; j++) b->t[j] = in->t[b->lo + j];
    else
        for (int64_t j = 0; j < b->n; j++) b->t[j] = (float)peat_tensor_get(in->test_t, b->lo + j);
    for (int64_t j = b->n; j < b->nv; j++) b->t[j] = NAN;
}

/* What depends on the exact value only: |exact|, the bound gamma mag + eta, the scale
 * s = mag / sqrt(terms) and its inverse, without branches. */
static INLINE_BLOCK void block_xside(const peat_scan_in *in, block *b)
{
    const double gamma = in->gamma, eta = in->eta, isk = in->inv_sqrt_k;
    for (int64_t j = 0; j < b->nv; j++) {
        double x = b->x[j], ax = fabs(x), sc = b->m[j] * isk;
        int fin = ax <= DBL_MAX, nz = x != 0.0, sok = sc >= FLT_MIN;
        double inv = 1.0 / (sok ? sc : 1.0);
        b->ax[j] = ax;
        b->bnd[j] = gamma * b->m[j] + eta;
        b->inv[j] = inv;
        b->xc[j] = fin * X_FIN | nz * X_NZ | sok * X_SOK;
    }
}

/* Sum of a statistic's lanes, in lane order. */
static double lanes_sum(const double *v)
{
    return (v[0] + v[1]) + (v[2] + v[3]);
}

static int64_t lanes_count(const int64_t *v)
{
    return v[0] + v[1] + v[2] + v[3];
}

static double lanes_max(const double *v)
{
    double m = v[0];
    for (int l = 1; l < LANES; l++) m = v[l] > m ? v[l] : m;
    return m;
}

static double lanes_min(const double *v)
{
    double m = v[0];
    for (int l = 1; l < LANES; l++) m = v[l] < m ? v[l] : m;
    return m;
}

/* Four-lane vectors (GCC and clang vector extensions: AVX2 registers in the AVX2 clone, pairs of
 * SSE2 registers in the baseline one; the same operations, so the same bits). The helpers are
 * always inlined, never called across an ABI boundary (CMakeLists.txt: -Wno-psabi). */
typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4i __attribute__((vector_size(32)));
typedef uint64_t v4q __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef uint32_t v4u __attribute__((vector_size(16)));
typedef int32_t v4s __attribute__((vector_size(16)));
static INLINE_BLOCK v4d ld_d(const double *p)
{
    v4d v;
    memcpy(&v, p, sizeof v);
    return v;
}
static INLINE_BLOCK v4i ld_i(const int64_t *p)
{
    v4i v;
    memcpy(&v, p, sizeof v);
    return v;
}
static INLINE_BLOCK v4d v_abs(v4d x)
{
    return (v4d)((v4i)x & INT64_MAX);
}
/* a where m is set, +0 elsewhere */
static INLINE_BLOCK v4d v_sel(v4i m, v4d a)
{
    return (v4d)(m & (v4i)a);
}
/* per lane: a where m is set, else b */
static INLINE_BLOCK v4d v_if(v4i m, v4d a, v4d b)
{
    return (v4d)((m & (v4i)a) | (~m & (v4i)b));
}
/* per lane: a where m is set and a > cur (a < cur for v_min), else cur */
static INLINE_BLOCK v4d v_max(v4i m, v4d a, v4d cur)
{
    return v_if(m & (a > cur), a, cur);
}
static INLINE_BLOCK v4d v_min(v4i m, v4d a, v4d cur)
{
    return v_if(m & (a < cur), a, cur);
}

/* peat_sketch_slot of four values (>= 0 or NaN) at once. */
static INLINE_BLOCK v4i v_slot(v4d v)
{
    const v4d zero = {0.0, 0.0, 0.0, 0.0};
    v4i b = (v4i)((v4q)v >> (52 - SKETCH_SUB_BITS)) - SKETCH_BIAS;
    v4i high = b >= SKETCH_BUCKETS, low = b < 0, z = v == zero;
    v4i r = (high & SKETCH_SLOT_HIGH) | (~high & b);
    r = (low & SKETCH_SLOT_LOW) | (~low & r);
    return (z & SKETCH_SLOT_ZERO) | (~z & r);
}

/* One side's errors against |exact|, the bound and the scale, without branches. */
static INLINE_BLOCK void block_errors(block *b)
{
    const v4d zero = {0.0, 0.0, 0.0, 0.0}, one = {1.0, 1.0, 1.0, 1.0};
    const v4d big = {DBL_MAX, DBL_MAX, DBL_MAX, DBL_MAX};
    for (int64_t j = 0; j < b->nv; j += LANES) {
        v4d x = ld_d(b->x + j), t = ld_d(b->t + j), ax = ld_d(b->ax + j);
        v4d inv = ld_d(b->inv + j), bnd = ld_d(b->bnd + j);
        v4i xc = ld_i(b->xc + j);
        v4d err = t - x, aerr = v_abs(err);
        v4i fin = ((xc & X_FIN) != 0) & (v_abs(t) <= big);
        v4i nz = (xc & X_NZ) != 0, sok = (xc & X_SOK) != 0, pos = x > zero;
        v4d e = aerr / bnd, rel = aerr / v_if(nz, ax, one);
        v4d dd = v_if(pos, err, -err) * inv;
        v4i ne = err != zero, toward = ne & (v_abs(t) < ax);
        v4i cond = fin & (C_FIN | (nz & C_REL) | (sok & C_SCALE) | (sok & nz & C_BIAS) |
                          (ne & C_ERR) | (toward & C_TOWARD));
        v4d a = aerr * inv;
        v4i se = v_slot(e), sr = v_slot(rel);
        memcpy(b->err + j, &err, sizeof err), memcpy(b->aerr + j, &aerr, sizeof aerr);
        memcpy(b->e + j, &e, sizeof e), memcpy(b->rel + j, &rel, sizeof rel);
        memcpy(b->a + j, &a, sizeof a), memcpy(b->dd + j, &dd, sizeof dd);
        memcpy(b->cond + j, &cond, sizeof cond);
        memcpy(b->slot_e + j, &se, sizeof se), memcpy(b->slot_rel + j, &sr, sizeof sr);
    }
}

/* The block's sums and extremes, each masked by its condition (selects, not branches); element j
 * joins lane j % LANES. Masks are -1 where set, so subtracting one counts it. */
static INLINE_BLOCK void block_sums(const block *b, hot *h)
{
    v4i n_fin = ld_i(h->n_fin), n_rel = ld_i(h->n_rel), n_relmag = ld_i(h->n_relmag);
    v4i n_bias = ld_i(h->n_bias), n_signed = ld_i(h->n_signed), n_toward = ld_i(h->n_toward);
    v4d sx2 = ld_d(h->sumsq_exact), sa = ld_d(h->sum_abs), sa2 = ld_d(h->sumsq_abs);
    v4d sr = ld_d(h->sum_rel), sn = ld_d(h->sum_norm), sn2 = ld_d(h->sumsq_norm);
    v4d srm2 = ld_d(h->sumsq_relmag), bs1 = ld_d(h->b_s1), bs2 = ld_d(h->b_s2);
    v4d mxx = ld_d(h->max_exact), mxa = ld_d(h->max_abs), mxr = ld_d(h->max_rel);
    v4d mxn = ld_d(h->max_norm), mnz = ld_d(h->min_exact_nonzero);
    v4d mne = ld_d(h->min_pos_e), mnr = ld_d(h->min_pos_rel);
    const v4d zero = {0.0, 0.0, 0.0, 0.0};
    for (int64_t j = 0; j < b->nv; j += LANES) {
        v4i c = ld_i(b->cond + j);
        v4i fin = (c & C_FIN) != 0, rel = (c & C_REL) != 0, sc = (c & C_SCALE) != 0;
        v4i bias = (c & C_BIAS) != 0;
        v4d x = ld_d(b->x + j), ax = v_abs(x), aerr = ld_d(b->aerr + j), e = ld_d(b->e + j);
        v4d r = ld_d(b->rel + j), a = ld_d(b->a + j), dd = ld_d(b->dd + j), t = ld_d(b->t + j);
        n_fin -= fin, n_rel -= rel, n_relmag -= sc, n_bias -= bias;
        n_signed -= (c & C_ERR) != 0, n_toward -= (c & C_TOWARD) != 0;
        sx2 += v_sel(fin, x * x);
        sa += v_sel(fin, aerr);
        sa2 += v_sel(fin, aerr * aerr);
        sr += v_sel(rel, r);
        sn += v_sel(fin, e);
        sn2 += v_sel(fin, e * e);
        srm2 += v_sel(sc, a * a);
        bs1 += v_sel(bias, dd);
        bs2 += v_sel(bias, dd * dd);
        mxx = v_max(fin, ax, mxx);
        mxa = v_max(fin, aerr, mxa);
        mxr = v_max(rel, r, mxr);
        mxn = v_max(fin, e, mxn);
        mne = v_min(fin & (e > zero), e, mne);
        mnr = v_min(rel & (r > zero), r, mnr);
        mnz = v_min(rel & (t != zero), ax, mnz);
    }
    memcpy(h->n_fin, &n_fin, sizeof n_fin), memcpy(h->n_rel, &n_rel, sizeof n_rel);
    memcpy(h->n_relmag, &n_relmag, sizeof n_relmag), memcpy(h->n_bias, &n_bias, sizeof n_bias);
    memcpy(h->n_signed, &n_signed, sizeof n_signed);
    memcpy(h->n_toward, &n_toward, sizeof n_toward);
    memcpy(h->sumsq_exact, &sx2, sizeof sx2), memcpy(h->sum_abs, &sa, sizeof sa);
    memcpy(h->sumsq_abs, &sa2, sizeof sa2), memcpy(h->sum_rel, &sr, sizeof sr);
    memcpy(h->sum_norm, &sn, sizeof sn), memcpy(h->sumsq_norm, &sn2, sizeof sn2);
    memcpy(h->sumsq_relmag, &srm2, sizeof srm2), memcpy(h->b_s1, &bs1, sizeof bs1);
    memcpy(h->b_s2, &bs2, sizeof bs2);
    memcpy(h->max_exact, &mxx, sizeof mxx), memcpy(h->max_abs, &mxa, sizeof mxa);
    memcpy(h->max_rel, &mxr, sizeof mxr), memcpy(h->max_norm, &mxn, sizeof mxn);
    memcpy(h->min_exact_nonzero, &mnz, sizeof mnz), memcpy(h->min_pos_e, &mne, sizeof mne);
    memcpy(h->min_pos_rel, &mnr, sizeof mnr);
}

/* Bit patterns against the exact value rounded to fp32 (RN, the best an fp32 kernel can return),
 * the counts that need only them, and the sampling priorities (splitmix64's finaliser of the
 * element's id, as peat_sample_prio), four elements at a time. The padding's exact value is NaN,
 * so it is never finite and joins no count. */
static INLINE_BLOCK void block_patterns_x(block *b)
{
    const v4d big = {DBL_MAX, DBL_MAX, DBL_MAX, DBL_MAX};
    for (int64_t j = 0; j < b->nv; j += LANES) {
        v4d x = ld_d(b->x + j);
        v4u br = (v4u) __builtin_convertvector(x, v4f);
        v4s fx32 = __builtin_convertvector(v_abs(x) <= big, v4s);
        memcpy(b->br + j, &br, sizeof br), memcpy(b->fx + j, &fx32, sizeof fx32);
    }
}

static INLINE_BLOCK void block_patterns(const peat_scan_in *in, block *b, hot *h, peat_worker *w)
{
    v4i n_fx = {0}, n_tnan = {0}, n_diff = {0}, n_zero = {0}, n_equal = {0}, n_below = {0};
    const v4q bound = {w->add_thresh, w->add_thresh, w->add_thresh, w->add_thresh};
    v4u mant_or = {0};
    const v4d zero = {0.0, 0.0, 0.0, 0.0};
    const v4q iota = {0, 1, 2, 3};
    const uint64_t id0 = PEAT_SAMPLE_ID0(in->call);
    for (int64_t j = 0; j < b->nv; j += LANES) {
        v4d x = ld_d(b->x + j), t = ld_d(b->t + j);
        v4u br;
        v4s fx32;
        memcpy(&br, b->br + j, sizeof br), memcpy(&fx32, b->fx + j, sizeof fx32);
        v4f tf = __builtin_convertvector(t, v4f), xf = (v4f)br;
        v4u bt = (v4u)tf;
        v4i fx = __builtin_convertvector(fx32, v4i), tn = t != t;
        v4i eq = __builtin_convertvector(tf == xf, v4i),
            ne = __builtin_convertvector(bt != br, v4i);
        v4i df = fx & ne;
        n_fx -= fx, n_zero -= fx & (x == zero), n_tnan -= fx & tn, n_equal -= fx & eq;
        n_diff -= df & ~tn;
        v4i fin64 = (ld_i(b->cond + j) & C_FIN) != 0;
        v4s fin = __builtin_convertvector(fin64, v4s);
        v4u ex = (bt >> 23) & 0xffu;
        v4u normal = (v4u)fin & (v4u)(ex != 0u) & (v4u)(ex != 0xffu);
        mant_or |= normal & ((bt & 0x7fffffu) | 0x800000u);
        v4s df32 = __builtin_convertvector(df, v4s);
        memcpy(b->bt + j, &bt, sizeof bt), memcpy(b->diff + j, &df32, sizeof df32);
        v4q z = id0 ^ ((uint64_t)(b->lo + j) + iota);
        PEAT_SAMPLE_MIX(z);
        memcpy(b->prio + j, &z, sizeof z);
        n_below -= fin64 & (v4i)(z <= bound);
    }
    int64_t cnt[6][LANES];
    memcpy(cnt[5], &n_below, sizeof n_below);
    w->add_below += lanes_count(cnt[5]);
    memcpy(cnt[0], &n_fx, sizeof n_fx), memcpy(cnt[1], &n_tnan, sizeof n_tnan);
    memcpy(cnt[2], &n_diff, sizeof n_diff), memcpy(cnt[3], &n_zero, sizeof n_zero);
    memcpy(cnt[4], &n_equal, sizeof n_equal);
    h->n_fx += lanes_count(cnt[0]), h->n_tnan += lanes_count(cnt[1]);
    h->n_diff += lanes_count(cnt[2]), h->n_zero += lanes_count(cnt[3]);
    h->n_equal += lanes_count(cnt[4]);
    h->mant_or |= mant_or[0] | mant_or[1] | mant_or[2] | mant_or[3];
}

/* Four hash lanes (xxHash64's round: lane j % 4 takes element j) over the test bits, so that the
 * multiplies overlap; padding lanes keep their state. */
static INLINE_BLOCK void block_hash(const block *b, uint64_t h[4])
{
    v4q hv;
    memcpy(&hv, h, sizeof hv);
    const v4i iota = {0, 1, 2, 3};
    for (int64_t j = 0; j < b->nv; j += LANES) {
        v4u bt;
        memcpy(&bt, b->bt + j, sizeof bt);
        v4q v = __builtin_convertvector(bt, v4q) * HASH_P2;
        v4q r = hv + v;
        r = ((r << 31) | (r >> 33)) * HASH_P1;
        v4q live = (v4q)((iota + j) < b->n);
        hv = (live & r) | (~live & hv);
    }
    memcpy(h, &hv, sizeof hv);
}

/* Per-block bit counters: one byte per bit position (a block has at most 64 < 255 elements). */
typedef struct bitcount {
    uint8_t set[PEAT_BIT_POSITIONS], clr[PEAT_BIT_POSITIONS];
} bitcount;

/* Adds the block's byte counters to the partial's. */
static void bits_flush(const bitcount *bc, peat_partial *p)
{
    for (int b = 0; b < PEAT_BIT_POSITIONS; b++) p->bit_set[b] += bc->set[b];
    for (int b = 0; b < PEAT_BIT_POSITIONS; b++) p->bit_clr[b] += bc->clr[b];
}

/* Adds bit k of the 32-bit word w to byte counter cnt[k], for all k at once: a byte shuffle
 * spreads the word's bytes over 32 lanes and a mask picks each lane's bit (no loop over bits). */
static INLINE_BLOCK void bit_lanes_add(uint8_t *cnt, uint32_t w)
{
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    typedef uint8_t bytes32 __attribute__((vector_size(32)));
    static const bytes32 which = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                  2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    static const bytes32 bit = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128,
                                1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    typedef uint32_t words8 __attribute__((vector_size(32)));
    words8 ws = {w, w, w, w, w, w, w, w};
    bytes32 v = (bytes32)ws, c; /* bytes 0..3 hold w (little-endian) */
#if defined(__clang__)
    (void)which;
    v = __builtin_shufflevector(v, v, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2,
                                2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
#else
    v = __builtin_shuffle(v, which);
#endif
    memcpy(&c, cnt, sizeof c);
    c += (bytes32)((v & bit) != 0) & 1;
    memcpy(cnt, &c, sizeof c);
#else
    for (int b = 0; b < PEAT_BIT_POSITIONS; b++) cnt[b] += (uint8_t)(w >> b & 1u);
#endif
}

/* Bits of test XOR round_f32(exact) where they differ, split by direction, and the ULP distance
 * (equal elements are counted in bulk: hot_fold). */
static INLINE_BLOCK void bits_note(peat_partial *p, bitcount *bc, uint32_t bt, uint32_t br,
                                   int t_nan)
{
    uint32_t xo = bt ^ br;
    bit_lanes_add(bc->set, xo & bt);
    bit_lanes_add(bc->clr, xo & ~bt);
    if (t_nan) return;
    int64_t d = ordered(bt) - ordered(br);
    d = d < 0 ? -d : d;
    p->ulp_count[ulp_bin(d)]++;
    if ((double)d > p->max_ulp) p->max_ulp = (double)d;
}

static void sample_note(const peat_scan_in *in, int64_t i, uint64_t prio, const block *b, int j,
                        peat_worker *w)
{
    double x = b->x[j], err = b->err[j], inv_s = (b->xc[j] & X_SOK) ? b->inv[j] : 0.0;
    double key = in->in ? (double)in->in[i] : in->input ? peat_tensor_get(in->input, i) : NAN;
    peat_sample smp = {.prio = prio, .inv_s = inv_s, .d = err, .x = x, .key = key};
    w->stage[w->n_stage++] = smp;
    if (w->n_stage == PEAT_WORKER_STAGE) peat_analyzer_worker_flush(w);
}

/* What needs one element at a time: bit and ULP patterns of differing elements, the sketch
 * counters, over-bound and gross errors, non-finite values, the sample. */
static INLINE_BLOCK void block_visit(const peat_scan_in *in, const block *b, peat_partial *p,
                                     peat_worker *w)
{
    bitcount bc;
    memset(&bc, 0, sizeof bc);
    int64_t *cn = w->norm.count, *cr = w->rel.count;
    for (int j = 0; j < b->n; j++) {
        int64_t i = b->lo + j;
        if (!b->fx[j]) { /* the reference itself left the range */
            nonfinite_exact(p, b->x[j], (float)b->t[j]);
            continue;
        }
        if (b->diff[j]) bits_note(p, &bc, b->bt[j], b->br[j], isnan(b->t[j]));
        int64_t c = b->cond[j];
        if (!(c & C_FIN)) {
            float t = (float)b->t[j];
            nonfinite_test(p, b->x[j], t);
            gross_note(p, i, in->rows, in->cols, t, (float)b->x[j], in->gamma * b->m[j] + in->eta);
            continue;
        }
        /* the sketches' counts here; their n and extremes per unit (sketch_fold) */
        if (c & C_REL) cr[b->slot_rel[j]]++;
        cn[b->slot_e[j]]++;
        if (b->slot_e[j] == SKETCH_SLOT_HIGH) w->norm.sumsq_high += b->e[j] * b->e[j];
        if (b->slot_rel[j] == SKETCH_SLOT_HIGH && (c & C_REL))
            w->rel.sumsq_high += b->rel[j] * b->rel[j];
        if (b->e[j] > 1.0) {
            float t = (float)b->t[j], xr = (float)b->x[j];
            over_bound(p, b->x[j], t);
            if (b->e[j] > PEAT_GROSS_FACTOR)
                gross_note(p, i, in->rows, in->cols, t, xr, in->gamma * b->m[j] + in->eta);
        }
        if (b->prio[j] <= w->thresh) sample_note(in, i, b->prio[j], b, j, w);
    }
    bits_flush(&bc, p);
}

/* The unit's bias moments as (n, mean, M2), combined into the partial's. */
static void bias_fold(const hot *h, peat_partial *p)
{
    int64_t nb = lanes_count(h->n_bias);
    if (nb == 0) return;
    double s1 = lanes_sum(h->b_s1), s2 = lanes_sum(h->b_s2);
    double n = (double)nb, mean = s1 / n, m2 = s2 - s1 * mean;
    peat_partial u;
    peat_analyzer_partial_init(&u);
    u.n_bias = nb;
    u.bias_mean = mean;
    u.bias_m2 = m2 > 0.0 ? m2 : 0.0;
    peat_analyzer_partial_merge(p, &u);
}

/* Folds a unit's locals into its partial. */
static void hot_fold(const hot *h, peat_partial *p)
{
    int64_t n_signed = lanes_count(h->n_signed);
    p->n_fin += lanes_count(h->n_fin), p->n_rel += lanes_count(h->n_rel);
    p->n_relmag += lanes_count(h->n_relmag);
    p->n_err_signed += n_signed, p->n_toward_zero += lanes_count(h->n_toward);
    p->n_nonzero_err += n_signed, p->n_equal_rounded += h->n_equal;
    p->n_exact_zero += h->n_zero;
    p->n_bits += h->n_fx;
    p->n_ulp += h->n_fx - h->n_tnan;
    p->ulp_count[0] += h->n_fx - h->n_tnan - h->n_diff; /* bit-equal: 0 ulps */
    p->sumsq_exact += lanes_sum(h->sumsq_exact), p->sum_abs += lanes_sum(h->sum_abs);
    p->sumsq_abs += lanes_sum(h->sumsq_abs), p->sum_rel += lanes_sum(h->sum_rel);
    p->sum_norm += lanes_sum(h->sum_norm), p->sumsq_norm += lanes_sum(h->sumsq_norm);
    p->sumsq_relmag += lanes_sum(h->sumsq_relmag);
    double mx = lanes_max(h->max_exact);
    p->max_exact_finite = mx > p->max_exact_finite ? mx : p->max_exact_finite;
    p->max_abs_exact = mx > p->max_abs_exact ? mx : p->max_abs_exact;
    double ma = lanes_max(h->max_abs), mr = lanes_max(h->max_rel), mn = lanes_max(h->max_norm);
    p->max_abs = ma > p->max_abs ? ma : p->max_abs;
    p->max_rel = mr > p->max_rel ? mr : p->max_rel;
    p->max_norm = mn > p->max_norm ? mn : p->max_norm;
    double mz = lanes_min(h->min_exact_nonzero);
    if (mz < INFINITY) p->min_exact_nonzero = nan_min(p->min_exact_nonzero, mz);
    /* most significand bits any normal value uses: 24 minus the fewest trailing zeros */
    int mb = h->mant_or ? 24 - __builtin_ctz(h->mant_or) : 0;
    p->test_mant_bits = mb > p->test_mant_bits ? mb : p->test_mant_bits;
    bias_fold(h, p);
}

/* A unit's count of values and their extremes join a sketch (its counts were added per element). */
static void sketch_fold(peat_sketch *s, int64_t n, double max, double min_pos)
{
    s->n += n;
    s->max = max > s->max ? max : s->max;
    s->min_pos = min_pos < s->min_pos ? min_pos : s->min_pos;
}

/* An AVX2 clone where the CPU has it (chosen at load time): without FMA, so every operation
 * rounds exactly as in the baseline clone and the results are the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define SCAN_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SCAN_CLONES
#endif
/* One test side's running state over a unit. */
typedef struct side {
    const peat_scan_in *in;
    peat_partial *p;
    peat_worker *w;
    hot h;
    uint64_t hl[4];
} side;

static INLINE_BLOCK void side_init(side *sd, const peat_scan_in *in, peat_partial *p,
                                   peat_worker *w)
{
    sd->in = in, sd->p = p, sd->w = w;
    hot_init(&sd->h);
    uint64_t h0[4] = {HASH_P1 + HASH_P2, HASH_P2, 0, (uint64_t)0 - HASH_P1};
    memcpy(sd->hl, h0, sizeof h0);
}

/* One side's work on a block whose exact side is loaded. */
static INLINE_BLOCK void side_block(side *sd, block *b)
{
    block_load_t(sd->in, b);
    block_errors(b);
    block_sums(b, &sd->h);
    block_patterns(sd->in, b, &sd->h, sd->w);
    block_visit(sd->in, b, sd->p, sd->w);
    block_hash(b, sd->hl);
}

static void side_finish(side *sd, int64_t n)
{
    peat_partial *p = sd->p;
    peat_worker *w = sd->w;
    p->n_elems += n;
    hot_fold(&sd->h, p);
    sketch_fold(&w->norm, lanes_count(sd->h.n_fin), lanes_max(sd->h.max_norm),
                lanes_min(sd->h.min_pos_e));
    sketch_fold(&w->rel, lanes_count(sd->h.n_rel), lanes_max(sd->h.max_rel),
                lanes_min(sd->h.min_pos_rel));
    const uint64_t *hl = sd->hl;
    p->hash =
        rotl64(hl[0], 1) + rotl64(hl[1], 7) + rotl64(hl[2], 12) + rotl64(hl[3], 18) + (uint64_t)n;
}

/* The unit scan for one or two test sides against one exact side (which in[0] describes: both
 * sides share exact, mag, depth, terms and cols); each side's results are exactly those of a
 * scan of it alone. */
static INLINE_BLOCK void scan_sides(const peat_scan_in *const *in, int n_sides, int64_t lo,
                                    int64_t hi, peat_partial *const *p, peat_worker *const *w)
{
    side sd[2];
    for (int k = 0; k < n_sides; k++) side_init(&sd[k], in[k], p[k], w[k]);
    block b;
    for (int64_t i = lo; i < hi; i += BLK) {
        block_load_x(in[0], i, hi - i < BLK ? hi - i : BLK, &b);
        block_xside(in[0], &b);
        block_patterns_x(&b);
        for (int k = 0; k < n_sides; k++) side_block(&sd[k], &b);
    }
    for (int k = 0; k < n_sides; k++) side_finish(&sd[k], hi - lo);
}

SCAN_CLONES
void peat_analyzer_scan_unit(const peat_scan_in *in, int64_t lo, int64_t hi, peat_partial *p,
                             peat_worker *w)
{
    scan_sides(&in, 1, lo, hi, &p, &w);
}

SCAN_CLONES
void peat_analyzer_scan_pair(const peat_scan_in *const in[2], int64_t lo, int64_t hi,
                             peat_partial *const p[2], peat_worker *const w[2])
{
    scan_sides(in, 2, lo, hi, p, w);
}

void peat_analyzer_scan_sample_above(const peat_scan_in *in, int64_t lo, int64_t hi, uint64_t above,
                                     peat_worker *w)
{
    block b;
    for (int64_t i = lo; i < hi; i += BLK) {
        block_load_x(in, i, hi - i < BLK ? hi - i : BLK, &b);
        block_xside(in, &b);
        block_load_t(in, &b);
        block_errors(&b);
        for (int j = 0; j < b.n; j++) {
            uint64_t prio = peat_sample_prio(in->call, b.lo + j);
            if ((b.cond[j] & C_FIN) && prio > above && prio <= w->thresh)
                sample_note(in, b.lo + j, prio, &b, j, w);
        }
    }
}

void peat_analyzer_partial_merge(peat_partial *d, const peat_partial *s)
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
