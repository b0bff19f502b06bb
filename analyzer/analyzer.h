/* analyzer.h: error metrics of a kernel's outputs against the exact reference -> signatures. */
#ifndef PEAT_ANALYZER_H
#define PEAT_ANALYZER_H

#include "peat/peat.h"

#define PEAT_SIGNATURE_VERSION 1
#define PEAT_ULP_BINS 12   /* ULP distance bins: 0, 1, 2, 3-4, 5-8, ..., 2^9+1-2^10, >2^10 */
#define PEAT_BIT_POSITIONS 32

/* A fixed-schema summary of one kernel's error distribution over all analysed calls. Errors are
 * taken against the exact (fp64) output. "bound" is gamma_K(u) * mag with u the unit roundoff of
 * the working precision (fp32) and K the op's accumulation depth. */
typedef struct peat_signature {
    int version;                 /* PEAT_SIGNATURE_VERSION */
    char kernel[64];
    char op[32];
    int64_t n_calls;
    int64_t n_elems;             /* elements compared */
    int64_t n_exact_zero;        /* elements whose exact value is 0 */
    /* non-finite values in the test output where the exact value is finite */
    int64_t n_nan, n_inf;
    /* elements equal to the exact value rounded to fp32 (RN) */
    int64_t n_equal_rounded;
    /* elements whose error is not 0 */
    int64_t n_nonzero_err;
    /* absolute error |test - exact| over finite elements */
    double max_abs, mean_abs, rms_abs;
    /* relative error |test - exact| / |exact| over elements with exact != 0 */
    double max_rel, mean_rel, median_rel;
    /* bound-normalised error e_i = |test - exact| / (gamma_K u * mag_i) */
    double max_norm, mean_norm, p50_norm, p99_norm;
    double frac_over_bound;      /* fraction of elements with e_i > 1 */
    /* error relative to the l2-type magnitude: used for effective precision */
    double rms_rel_mag;          /* rms(|err_i| / mag_i) over elements with mag_i > 0 */
    double eff_bits;             /* effective significand bits (see docs/signature.md) */
    /* signed error: mean(err/mag) / (stddev/sqrt(n)) : a t statistic for bias */
    double bias_t;
    double frac_err_negative;    /* fraction of non-zero errors that move toward zero in |x| */
    /* ULP distance histogram (fractions) between test and exact rounded to fp32 */
    double ulp_hist[PEAT_ULP_BINS];
    double max_ulp;
    /* per bit position (0 = lsb of fp32 mantissa, 31 = sign), fraction of compared elements in
     * which test XOR round_f32(exact) has that bit set */
    double bit_hist[PEAT_BIT_POSITIONS];
    /* concentration: share of the total squared normalised error carried by the top 1% of
     * elements (1 = all error in a few elements, ~0.01 for uniform) */
    double top1pct_share;
    /* elements with error (e_i > 1) restricted to errors at small |exact| < FLT_MIN */
    int64_t n_err_subnormal_exact;
    /* structure: errors over bound located in the last rows/cols only (boundary) */
    double frac_err_in_last_tile;
    /* correlation of |err|/mag with |exact|/mag... input-dependence (Spearman rho), NaN if n/a */
    double corr_err_input;
    /* repeatability: max abs difference between two runs on the same input (0 = deterministic,
     * negative = not measured) */
    double repeat_max_diff;
} peat_signature;

/* Accumulates error samples of one kernel over many calls. */
typedef struct peat_analyzer_acc peat_analyzer_acc_t;
peat_analyzer_acc_t *peat_analyzer_acc_alloc(const char *kernel, peat_op_kind op);
void peat_analyzer_acc_free(peat_analyzer_acc_t *acc);
/* Adds one output tensor: test (F32 values, any float dtype), exact (F64), mag (per element, from
 * peat_golden_magnitude), depth (op depth K), and the tensor's 2-D view (rows, cols) for
 * spatial structure (rows*cols == numel; pass rows=1 if not a matrix). */
peat_status peat_analyzer_acc_add(peat_analyzer_acc_t *acc, const peat_tensor *test,
                                  const peat_tensor *exact, const double *mag, int64_t depth,
                                  int64_t rows, int64_t cols);
/* Records a repeatability measurement (two runs of the same kernel on the same input). */
void peat_analyzer_acc_add_repeat(peat_analyzer_acc_t *acc, const peat_tensor *run1,
                                  const peat_tensor *run2);
/* Computes the signature of what was added so far. */
peat_status peat_analyzer_signature(const peat_analyzer_acc_t *acc, peat_signature *out);

/* JSON object for one signature (fixed key order) into buf; returns bytes needed like snprintf. */
int peat_signature_to_json(const peat_signature *s, char *buf, size_t n);

#endif
