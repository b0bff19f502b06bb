/* sketch.c: mergeable log-bucketed quantile sketch (0.78% relative accuracy, integer counts). */
#include "analyzer/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

peat_status peat_analyzer_sketch_init(peat_sketch *s)
{
    memset(s, 0, sizeof *s);
    s->min_pos = INFINITY;
    s->count = peat_analyzer_big_new(SKETCH_SLOTS * sizeof *s->count); /* zeroed */
    if (!s->count) return PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer: quantile sketch");
    return PEAT_OK;
}

void peat_analyzer_sketch_free(peat_sketch *s)
{
    peat_analyzer_big_free(s->count, SKETCH_SLOTS * sizeof *s->count);
    s->count = NULL;
}

/* The buckets that can hold counts: from the smallest positive value's to the largest value's
 * (both kept exactly), so that walks over a sketch of a few octaves skip the other 16 k buckets.
 * Empty range (lo > hi) when no positive value was added. */
static void bucket_range(const peat_sketch *s, int64_t *lo, int64_t *hi)
{
    *lo = 0, *hi = -1;
    if (!(s->max > 0.0)) return;
    int64_t a = s->min_pos < INFINITY ? peat_sketch_slot(s->min_pos) : 0;
    int64_t b = peat_sketch_slot(s->max);
    *lo = a == SKETCH_SLOT_LOW ? 0 : a >= SKETCH_BUCKETS ? SKETCH_BUCKETS - 1 : a;
    *hi = b == SKETCH_SLOT_LOW ? -1 : b >= SKETCH_BUCKETS ? SKETCH_BUCKETS - 1 : b;
}

void peat_analyzer_sketch_merge(peat_sketch *dst, const peat_sketch *src)
{
    dst->n += src->n;
    /* sums of squares of "high" values are Inf or beyond 2^256: order cannot change them */
    dst->sumsq_high += src->sumsq_high;
    if (src->min_pos < dst->min_pos) dst->min_pos = src->min_pos;
    if (src->max > dst->max) dst->max = src->max;
    int64_t lo, hi;
    bucket_range(src, &lo, &hi);
    for (int64_t b = lo; b <= hi; b++) dst->count[b] += src->count[b];
    for (int64_t b = SKETCH_BUCKETS; b < SKETCH_SLOTS; b++) dst->count[b] += src->count[b];
}

/* Midpoint of bucket b: 2^e (1 + (j + 1/2) 2^-SUB). */
static double bucket_mid(int64_t b)
{
    int64_t e = (b >> SKETCH_SUB_BITS) + SKETCH_EXP_MIN;
    double j = (double)(b & ((1 << SKETCH_SUB_BITS) - 1));
    return ldexp(1.0 + (j + 0.5) / (double)(1 << SKETCH_SUB_BITS), (int)e);
}

/* The value of rank r (0-based, ascending): zeros, then "low" (as the exact min), the buckets'
 * midpoints, then "high" (as the exact max); clamped to the exact extremes. */
static double value_at(const peat_sketch *s, int64_t r)
{
    if (r < s->count[SKETCH_SLOT_ZERO]) return 0.0;
    r -= s->count[SKETCH_SLOT_ZERO];
    if (r < s->count[SKETCH_SLOT_LOW]) return s->min_pos;
    r -= s->count[SKETCH_SLOT_LOW];
    int64_t lo, hi;
    bucket_range(s, &lo, &hi);
    for (int64_t b = lo; b <= hi; b++) {
        if (r < s->count[b]) {
            double v = bucket_mid(b);
            return v < s->min_pos ? s->min_pos : v > s->max ? s->max : v;
        }
        r -= s->count[b];
    }
    return s->max;
}

double peat_analyzer_sketch_quantile(const peat_sketch *s, double q)
{
    if (s->n == 0) return NAN;
    double pos = q * (double)(s->n - 1);
    int64_t lo = (int64_t)floor(pos);
    double f = pos - (double)lo, v = value_at(s, lo);
    if (f > 0.0 && lo + 1 < s->n) v += f * (value_at(s, lo + 1) - v);
    return v;
}

double peat_analyzer_sketch_top_sumsq(const peat_sketch *s, int64_t top)
{
    int64_t n_high = s->count[SKETCH_SLOT_HIGH];
    int64_t take = top < n_high ? top : n_high;
    /* only all of "high" is known exactly; a part of it is taken at the max */
    double sum = take == n_high ? s->sumsq_high : (double)take * s->max * s->max;
    top -= take;
    int64_t lo, hi;
    bucket_range(s, &lo, &hi);
    for (int64_t b = hi; b >= lo && top > 0; b--) {
        if (!s->count[b]) continue;
        int64_t t = s->count[b] < top ? s->count[b] : top;
        double v = bucket_mid(b);
        if (v > s->max) v = s->max;
        sum += (double)t * v * v;
        /* the largest value of all is known exactly: use it for one of the bucket's */
        if (take == 0 && t > 0) sum += s->max * s->max - v * v, take = 1;
        top -= t;
    }
    if (top > 0) {
        int64_t t = top < s->count[SKETCH_SLOT_LOW] ? top : s->count[SKETCH_SLOT_LOW];
        sum += (double)t * s->min_pos * s->min_pos;
    }
    return sum;
}
