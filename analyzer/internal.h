/* internal.h: the analyzer's accumulator layout, shared by the files of analyzer/ only. */
#ifndef PEAT_ANALYZER_INTERNAL_H
#define PEAT_ANALYZER_INTERNAL_H

#include "analyzer/analyzer.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

/* ---- log-bucketed quantile sketch (sketch.c) ---------------------------------------------------
 * A positive value v = 2^e (1 + f) falls in bucket (e, top SKETCH_SUB_BITS bits of f): buckets are
 * 2^-6 of an octave wide, so the bucket's midpoint is within 2^-7 (0.78%) of every value in it
 * (the DDSketch guarantee with a log-linear index read straight from the double's bits). Counts
 * are integers: sketches merge by adding counts, in any order, with identical results. */
#define SKETCH_SUB_BITS 6
#define SKETCH_EXP_MIN  (-128) /* 0 < v < 2^-128 counts as "low" (reported as the exact min) */
#define SKETCH_EXP_MAX  128    /* v >= 2^128 (and +Inf) counts as "high" (reported as the max) */
#define SKETCH_BUCKETS  ((SKETCH_EXP_MAX - SKETCH_EXP_MIN) << SKETCH_SUB_BITS)

/* Counter slots past the buckets: zeros, values below 2^SKETCH_EXP_MIN, values from
 * 2^SKETCH_EXP_MAX up (and +Inf). */
#define SKETCH_SLOT_ZERO SKETCH_BUCKETS
#define SKETCH_SLOT_LOW  (SKETCH_BUCKETS + 1)
#define SKETCH_SLOT_HIGH (SKETCH_BUCKETS + 2)
#define SKETCH_SLOTS     (SKETCH_BUCKETS + 3)

typedef struct peat_sketch {
    int64_t n;
    double min_pos, max; /* exact smallest positive and largest value added (merge: min / max) */
    double sumsq_high;   /* sum of squares of the "high" values (the top share needs them) */
    int64_t *count;      /* SKETCH_SLOTS counters */
} peat_sketch;

peat_status peat_analyzer_sketch_init(peat_sketch *s);
void peat_analyzer_sketch_free(peat_sketch *s);
/* Bucket of a positive finite double: its biased exponent and top SKETCH_SUB_BITS fraction bits,
 * shifted so that 2^SKETCH_EXP_MIN is bucket 0. */
#define SKETCH_BIAS ((int64_t)(SKETCH_EXP_MIN + 1023) << SKETCH_SUB_BITS)

/* The counter slot of v >= 0 (not NaN), read from its bits without branches. */
static inline int64_t peat_sketch_slot(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    int64_t b = (int64_t)(u >> (52 - SKETCH_SUB_BITS)) - SKETCH_BIAS;
    int64_t r = b >= SKETCH_BUCKETS ? SKETCH_SLOT_HIGH : b;
    r = b < 0 ? SKETCH_SLOT_LOW : r;
    return v == 0.0 ? SKETCH_SLOT_ZERO : r;
}

/* Adds v >= 0 (NaN is ignored). The streaming pass does the same in bulk: slots per element,
 * count, extremes and n per unit. */
static inline void peat_sketch_add(peat_sketch *s, double v)
{
    if (!(v >= 0.0)) return; /* NaN */
    s->n++;
    if (v > s->max) s->max = v;
    if (v > 0.0 && v < s->min_pos) s->min_pos = v;
    int64_t k = peat_sketch_slot(v);
    s->count[k]++;
    if (k == SKETCH_SLOT_HIGH) s->sumsq_high += v * v;
}

/* dst += src (counts add; exact extremes combine). */
void peat_analyzer_sketch_merge(peat_sketch *dst, const peat_sketch *src);
/* The q-quantile with the interpolation of gsl_stats_quantile_from_sorted_data (rank q (n-1),
 * linear between neighbours); NaN when empty. Within 2^-7 relative of the exact quantile. */
double peat_analyzer_sketch_quantile(const peat_sketch *s, double q);
/* Sum of v^2 over the largest `top` values (bucket midpoints; "high" values exactly). */
double peat_analyzer_sketch_top_sumsq(const peat_sketch *s, int64_t top);

/* ---- bounded uniform sample (sample.c) ---------------------------------------------------------
 * Bottom-k sampling: every element gets a pseudo-random priority from a bijective hash of its
 * (call number, index), and the sample is the k elements of smallest priority. That is a uniform
 * sample without replacement that depends only on which elements were added, never on the order
 * of adding or on how the work was split: per-thread samples merge into the same set. */
#define PEAT_SAMPLE_K PEAT_ANALYZER_MAX_SAMPLES

/* One sampled element: what correlations and smoothness need. NaN = not applicable. */
typedef struct peat_sample {
    uint64_t prio; /* sampling priority (unique per element) */
    double inv_s;  /* 1 / s_i, 0 when s_i < FLT_MIN (the columns' a and b are derived from it) */
    double key;    /* input value the element is a function of (NaN when none was given) */
    double x;      /* exact value */
    double d;      /* signed error test - exact */
} peat_sample;

/* Memory for the analyzer's large buffers (mem.c: the sample, the sketches, a signature's
 * scratch), zeroed, mapped apart from the heap and advised MADV_DONTFORK: the isolation forks once
 * per candidate call, and a fork write-protects every private page the parent has, so the
 * analysis's next write to each of them faulted (about 2 us each on a virtual machine). From
 * 2 MiB up it is also 2 MiB-aligned (huge pages serve it where the system gives them unadvised),
 * but not advised MADV_HUGEPAGE (compaction stalls, mem.c). NULL when it cannot be had. Freed
 * with peat_analyzer_big_free and the same size. Under AddressSanitizer, calloc and free serve
 * instead. */
void *peat_analyzer_big_new(size_t bytes);
void peat_analyzer_big_free(void *p, size_t bytes);

/* A sampled element's values without its priority: the set keeps priorities in an array of their
 * own, so that a cut reads 8 bytes per entry and moves only the entries it drops. */
typedef struct peat_sample_val {
    double inv_s, key, x, d; /* as in peat_sample */
} peat_sample_val;

typedef struct peat_sample_set {
    uint64_t *prio;     /* priorities of the entries, n of them */
    peat_sample_val *v; /* their values, in the same slots */
    int64_t n, cap;     /* cap = k + k/2: a full buffer is cut back to its k smallest */
    int64_t k;
    uint64_t thresh; /* priorities above this can no longer enter (UINT64_MAX until first cut) */
    uint64_t *key;   /* the cut's scratch for one histogram bin's priorities, kept between cuts */
} peat_sample_set;

peat_status peat_analyzer_sample_set_init(peat_sample_set *ss, int64_t k);
void peat_analyzer_sample_set_free(peat_sample_set *ss);
/* Priority of element i of the call with number call: splitmix64's finaliser (a bijection with
 * full avalanche) of the id (call, i) packed into one word, unique for i < 2^40 and call < 2^24,
 * so priorities never tie and the k smallest are one well-defined set. The id is
 * PEAT_SAMPLE_ID0(call) ^ i; PEAT_SAMPLE_MIX finalises it in place, on a uint64_t or on a vector
 * of them (the pass computes four at a time), with the same constants. */
#define PEAT_SAMPLE_ID0(call) (((uint64_t)(call) << 40) ^ 0x9e3779b97f4a7c15ull)
#define PEAT_SAMPLE_MIX(z)                                                                         \
    ((z) = ((z) ^ ((z) >> 30)) * 0xbf58476d1ce4e5b9ull,                                            \
     (z) = ((z) ^ ((z) >> 27)) * 0x94d049bb133111ebull, (z) ^= (z) >> 31)
static inline uint64_t peat_sample_prio(int64_t call, int64_t i)
{
    uint64_t z = PEAT_SAMPLE_ID0(call) ^ (uint64_t)i;
    PEAT_SAMPLE_MIX(z);
    return z;
}
void peat_analyzer_sample_set_push(peat_sample_set *ss, const peat_sample *x);
/* The set's k entries of smallest priority, in the set's own order, copied column by column
 * into contiguous arrays (one sequential pass; the statistics then stream them); ss is not
 * changed, so it stays open for pushes. The set's order depends on how the pushes were split
 * among threads, so no statistic may depend on it: ranks and medians do not, Spearman's sums of
 * half-integer ranks are exact, and the sorts along a key order equal keys by priority. */
typedef struct peat_sample_cols {
    size_t n;
    /* a = |err| / s_i and b = |exact| / s_i (NaN when s_i < FLT_MIN), then the peat_sample
     * fields key, x, d; n each (one allocation) */
    double *a, *b, *key, *x, *d;
    uint64_t *prio; /* the entries' priorities (unique: the order of equal keys) */
} peat_sample_cols;
/* cols holds 5 min(n, k) doubles for c's columns, prio min(n, k) words and scratch n words, for
 * a set of n entries. Lean (prio NULL): only a and d are taken (cols holds 2 min(n, k)); b, key,
 * x and prio are NULL, for a caller that has them from a set of the same entries. */
void peat_analyzer_sample_cols_take(const peat_sample_set *ss, double *cols, uint64_t *prio,
                                    uint64_t *scratch, peat_sample_cols *c);
/* perm = the order of v[0..n) ascending (NaN never passed in, -0 before +0; n < 2^32), equal
 * values in the order of tie (unique values) or, when tie is NULL, of their index; LSD radix sort
 * on the order-preserving 64-bit image of the doubles: O(n), at most six passes. scratch holds
 * 2 n words. */
void peat_analyzer_sample_argsort(const double *v, const uint64_t *tie, size_t n, uint32_t *perm,
                                  uint64_t *scratch);
/* rank[i] = the rank of v[i] among v[0..n) (1-based; equal values, -0 and +0 too, get their mean
 * rank; NaN never passed in; n < 2^32), from the same radix sort, without a permutation: equal
 * values are found from the sorted words' high halves, and whole keys are read only where those
 * are equal. rank may be v. scratch holds 2 n words. */
void peat_analyzer_sample_ranks(const double *v, size_t n, double *rank, uint64_t *scratch);
/* The median of v[0..n) (the middle value, or the mean of the two middle ones; NaN for n = 0),
 * by the histogram select the sample's cut also uses (order_stats in sample.c) on the values'
 * order-preserving images. v is not changed; scratch holds n words. */
double peat_analyzer_sample_median(const double *v, size_t n, uint64_t *scratch);

/* ---- streaming element pass (scan.c) -----------------------------------------------------------
 */

/* Elements per work unit: each unit's floating-point sums are kept apart and merged in unit
 * order, so results are the same whatever the number of threads. */
#define PEAT_ANALYZER_CHUNK 16384

/* What one unit of elements adds: counts, sums, extremes. Merged in unit order (acc.c). */
typedef struct peat_partial {
    int64_t n_elems, n_exact_zero, n_nan, n_inf, n_equal_rounded, n_nonzero_err, n_fin;
    double max_abs_exact, sumsq_exact, sum_abs, sumsq_abs, max_abs;
    int64_t n_rel;
    double sum_rel, max_rel;
    double sum_norm, sumsq_norm, max_norm;
    int64_t n_over_bound, n_err_subnormal_exact, n_relmag;
    double sumsq_relmag;
    int64_t n_bias;
    double bias_mean, bias_m2;
    int64_t n_err_signed, n_toward_zero;
    int64_t n_ulp, ulp_count[PEAT_ULP_BINS];
    double max_ulp;
    int64_t n_bits, bit_set[PEAT_BIT_POSITIONS], bit_clr[PEAT_BIT_POSITIONS];
    int test_mant_bits;
    double min_exact_at_inf, max_exact_finite, max_exact_at_zero, min_exact_nonzero;
    int64_t n_zero_introduced;
    int64_t n_gross, n_gross_single, n_gross_set, gross_bit[PEAT_BIT_POSITIONS];
    /* gross errors of this unit: first index, gcd of distances from it, bounding box */
    int64_t box_n, box_first, box_g, box_r0, box_r1, box_c0, box_c1;
    uint64_t hash; /* hash of the unit's test bits */
} peat_partial;

/* Per-thread state: integer sketches (they merge exactly in any order) and a small staging area
 * for sampled elements, flushed into the accumulator's one sample under its lock (the sample is a
 * set: the order of flushes does not change it). */
#define PEAT_WORKER_STAGE 256
typedef struct peat_worker {
    peat_sketch norm, rel;
    struct peat_analyzer_acc *acc;
    uint64_t thresh;     /* the shared sample's entry threshold at the last flush */
    uint64_t add_thresh; /* the add's own bound (add_bound in acc.c) */
    int64_t add_below;   /* elements of the add this worker saw with a priority <= add_thresh */
    int n_stage;
    peat_sample stage[PEAT_WORKER_STAGE];
} peat_worker;

/* Moves the staged samples into the accumulator's sample (locks it). */
void peat_analyzer_worker_flush(peat_worker *w);

/* One output tensor being added: everything a unit needs to read. */
typedef struct peat_scan_in {
    const float *t;  /* test values (F32) or NULL: then test_t is read element by element */
    const double *x; /* exact values (F64) or NULL: then exact_t */
    const float *in; /* input values (F32) or NULL: then input, where there is one */
    const peat_tensor *test_t, *exact_t, *input;
    const double *mag; /* NULL = |exact| */
    int64_t depth, cols, call;
    int64_t rows; /* rows of the plane view (a tensor of several planes folds onto one) */
    double gamma, eta, inv_sqrt_k;
} peat_scan_in;

void peat_analyzer_partial_init(peat_partial *p);
/* Adds src to dst (src's units follow dst's). */
void peat_analyzer_partial_merge(peat_partial *dst, const peat_partial *src);
/* Streams elements [lo, hi) of one tensor into p and w. */
void peat_analyzer_scan_unit(const peat_scan_in *in, int64_t lo, int64_t hi, peat_partial *p,
                             peat_worker *w);
/* The same for two test tensors against one exact tensor (in[0] and in[1] share exact, mag,
 * depth, terms and cols), read once: each side's results equal those of peat_analyzer_scan_unit. */
void peat_analyzer_scan_pair(const peat_scan_in *const in[2], int64_t lo, int64_t hi,
                             peat_partial *const p[2], peat_worker *const w[2]);
/* Stages into w the sample entries of elements [lo, hi) whose priority is above `above` (and
 * below the sample's threshold): the rare second look of an add whose bound proved too low. */
void peat_analyzer_scan_sample_above(const peat_scan_in *in, int64_t lo, int64_t hi, uint64_t above,
                                     peat_worker *w);

/* ---- the accumulator (acc.c) -------------------------------------------------------------------
 */

#define PEAT_ANALYZER_MAX_THREADS 64

struct peat_analyzer_acc {
    char kernel[64];
    peat_op_kind op;
    int64_t n_calls, depth_max;
    peat_partial tot; /* all units so far, merged in order */
    int64_t gross_stride;
    int64_t box_gross_sum, box_area_sum, box_numel_sum, gross_at_edge;
    int64_t box_best_n, box_rows, box_cols, box_tensor_rows, box_tensor_cols;
    int box_at_bottom, box_at_right;
    /* repeatability */
    double repeat_max_diff;
    int64_t repeat_n_diff;
    int64_t gross_tensors, gross_tensors_many; /* per output tensor (docs in analyzer.h) */
    int64_t repeat_calls, repeat_calls_diff, repeat_calls_many;
    /* per-thread sketches, merged when a signature is taken; the one sample behind its lock */
    int threads;
    peat_worker *w[PEAT_ANALYZER_MAX_THREADS];
    peat_sample_set smp;
    pthread_mutex_t smp_lock;
};

/* Quickselect for one key type (Hoare's partition, median-of-three pivot: runs of equal values
 * split evenly, so ties cost nothing extra): moves the want-th smallest (0-based) of v[0..n) to
 * v[want], smaller ones before it. One body for every key type the analyzer selects on. */
#define PEAT_ANALYZER_DEFINE_SELECT(name, T)                                                       \
    static void name(T *v, int64_t n, int64_t want)                                                \
    {                                                                                              \
        int64_t lo = 0, hi = n - 1;                                                                \
        while (lo < hi) {                                                                          \
            T a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi];                                     \
            T p = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));           \
            int64_t i = lo, j = hi;                                                                \
            while (i <= j) {                                                                       \
                while (v[i] < p) i++;                                                              \
                while (v[j] > p) j--;                                                              \
                if (i <= j) {                                                                      \
                    T t = v[i];                                                                    \
                    v[i++] = v[j];                                                                 \
                    v[j--] = t;                                                                    \
                }                                                                                  \
            }                                                                                      \
            if (want <= j)                                                                         \
                hi = j;                                                                            \
            else if (want >= i)                                                                    \
                lo = i;                                                                            \
            else                                                                                   \
                return;                                                                            \
        }                                                                                          \
    }

#endif
