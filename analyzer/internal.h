/* internal.h: the analyzer's accumulator layout, shared by acc.c and signature.c only. */
#ifndef PEAT_ANALYZER_INTERNAL_H
#define PEAT_ANALYZER_INTERNAL_H

#include "analyzer/analyzer.h"

/* One sampled element: what quantiles, correlations and smoothness need. NaN = not applicable. */
typedef struct peat_sample {
    double norm; /* e_i = |err| / bound */
    double rel;  /* |err| / |exact| (NaN when exact == 0) */
    double a;    /* |err| / s_i (NaN when s_i < FLT_MIN) */
    double b;    /* |exact| / s_i (NaN when s_i < FLT_MIN) */
    double key;  /* input value the element is a function of (NaN when none was given) */
    double x;    /* exact value */
    double d;    /* signed error test - exact */
} peat_sample;

struct peat_analyzer_acc {
    char kernel[64];
    peat_op_kind op;
    int64_t n_calls, n_elems, depth_max, n_exact_zero, n_nan, n_inf;
    int64_t n_equal_rounded, n_nonzero_err;
    uint64_t hash;
    /* finite elements */
    int64_t n_fin;
    double max_abs_exact, sumsq_exact, sum_abs, sumsq_abs, max_abs;
    int64_t n_rel;
    double sum_rel, max_rel;
    double sum_norm, max_norm;
    int64_t n_over_bound, n_err_subnormal_exact;
    int64_t n_relmag;
    double sumsq_relmag;
    /* Welford over d_i (signed toward-zero error / s_i) */
    int64_t n_bias;
    double bias_mean, bias_m2;
    int64_t n_err_signed, n_toward_zero;
    /* ulp and bits */
    int64_t n_ulp, ulp_count[PEAT_ULP_BINS];
    double max_ulp;
    int64_t n_bits, bit_set[PEAT_BIT_POSITIONS], bit_clr[PEAT_BIT_POSITIONS];
    int test_mant_bits;
    /* range */
    double min_exact_at_inf, max_exact_finite, max_exact_at_zero, min_exact_nonzero;
    int64_t n_zero_introduced;
    /* gross errors */
    int64_t n_gross, n_gross_single, n_gross_set, gross_bit[PEAT_BIT_POSITIONS];
    int64_t gross_stride;
    int64_t box_gross_sum, box_area_sum, box_numel_sum, gross_at_edge;
    int64_t box_best_n, box_rows, box_cols, box_tensor_rows, box_tensor_cols;
    int box_at_bottom, box_at_right;
    /* repeatability */
    double repeat_max_diff;
    int64_t repeat_n_diff;
    /* reservoir of samples */
    peat_sample *s;
    int64_t n_s, alloc_s, cap_s, n_seen;
    uint64_t rng;
};

#endif
