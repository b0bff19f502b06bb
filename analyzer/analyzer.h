/* analyzer.h: error metrics of a kernel's outputs against the exact reference -> signatures. */
#ifndef PEAT_ANALYZER_H
#define PEAT_ANALYZER_H

#include <stddef.h>
#include <stdint.h>

#include "peat/peat.h"

#define PEAT_SIGNATURE_VERSION 1
#define PEAT_ULP_BINS          13 /* ULP distance bins: 0, 1, 2, 3-4, 5-8, ..., 2^9+1-2^10, >2^10 */
#define PEAT_BIT_POSITIONS     32
/* An error of more than this many times the rounding bound is "gross": no rounding, however
 * unlucky or however different the order, produces it. Structural statistics (bit pattern,
 * spatial box, lane stride) are taken over gross errors only (see docs/signature.md). */
#define PEAT_GROSS_FACTOR 16.0
/* Elements kept for the rank statistics (correlation, smoothness): a uniform sample of this size
 * gives Spearman's rho within +-0.01 at 95% (docs/signature.md); quantiles need no sample. */
#define PEAT_ANALYZER_MAX_SAMPLES (1 << 17)

/* A fixed-schema summary of one kernel's error distribution over all analysed calls. Errors are
 * taken against the exact (fp64) output. "bound" is gamma_K(u) * mag + (K+1) 2^-150 with u the unit
 * roundoff of the working precision (fp32), K the op's accumulation depth, and the second term the
 * absolute error gradual underflow may add. Fields that cannot be computed are NaN (null in JSON).
 * docs/signature.md defines every field. */
typedef struct peat_signature {
    int version; /* PEAT_SIGNATURE_VERSION */
    char kernel[64];
    char op[32];
    int64_t n_calls;      /* output tensors added (one per output of each call) */
    int64_t n_elems;      /* elements compared */
    int64_t depth_max;    /* largest K seen */
    int64_t n_exact_zero; /* elements whose exact value is 0 */
    /* non-finite values in the test output where the exact value is finite */
    int64_t n_nan, n_inf;
    /* elements equal to the exact value rounded to fp32 (RN) */
    int64_t n_equal_rounded;
    /* elements whose error is not 0 */
    int64_t n_nonzero_err;
    /* FNV-1a hash of the test values' fp32 bit patterns in the order added: equal hashes over the
     * same calls mean bit-identical outputs */
    uint64_t test_hash;
    /* scale of the exact values (finite elements) */
    double max_abs_exact, rms_exact;
    /* absolute error |test - exact| over finite elements */
    double max_abs, mean_abs, rms_abs;
    /* relative error |test - exact| / |exact| over elements with exact != 0 */
    double max_rel, mean_rel, median_rel;
    /* bound-normalised error e_i = |test - exact| / bound_i over finite elements */
    double max_norm, mean_norm, p50_norm, p99_norm;
    int64_t n_over_bound;   /* e_i > 1, plus non-finite test values (exact finite) */
    double frac_over_bound; /* n_over_bound / n_elems */
    /* error relative to the l2-type magnitude s_i = mag_i / sqrt(K): used for effective precision
     */
    double rms_rel_mag; /* rms(|err_i| / s_i) over elements with s_i >= FLT_MIN */
    double eff_bits;    /* effective significand bits (see docs/signature.md) */
    /* signed error toward/away from zero: d_i = (test - exact) sign(exact) / s_i;
     * bias_t = mean(d) / (stddev(d) / sqrt(n)), a t statistic (negative = toward zero) */
    double bias_t;
    double frac_err_negative; /* fraction of non-zero errors that move toward zero in |x| */
    /* ULP distance histogram (fractions) between test and exact rounded to fp32 */
    double ulp_hist[PEAT_ULP_BINS];
    double max_ulp;
    /* per bit position (0 = lsb of fp32 mantissa, 31 = sign), fraction of compared elements in
     * which test XOR round_f32(exact) has that bit set; bit_set / bit_clr split it by direction
     * (reference bit 0 and test bit 1 / reference 1 and test 0) */
    double bit_hist[PEAT_BIT_POSITIONS];
    double bit_set[PEAT_BIT_POSITIONS];
    double bit_clr[PEAT_BIT_POSITIONS];
    /* most significand bits any finite normal test value uses (24 for fp32 results; p for values
     * stored in a p-bit format) */
    int test_mant_bits;
    /* concentration: share of the total squared normalised error carried by the top 1% of
     * elements (1 = all error in a few elements, ~0.01 for uniform) */
    double top1pct_share;
    /* elements with error over the bound (e_i > 1) whose 0 < |exact| < FLT_MIN */
    int64_t n_err_subnormal_exact;
    /* range: where Inf and flushed zeros appear (0 / NaN when none) */
    double min_exact_at_inf;   /* smallest |exact| whose test value is +-Inf */
    double max_exact_finite;   /* largest |exact| whose test value is finite */
    int64_t n_zero_introduced; /* test == 0, exact != 0, over the bound */
    double max_exact_at_zero;  /* largest |exact| among those */
    double min_exact_nonzero;  /* smallest |exact| (!= 0) whose test value is finite, != 0 */
    /* gross errors (e_i > PEAT_GROSS_FACTOR, or non-finite test): count and structure */
    int64_t n_gross;
    /* fraction of gross errors whose XOR against round_f32(exact), above the element's rounding
     * noise bits, is one single bit; the histogram of that bit; how many of those set it */
    double gross_single_bit;
    double gross_bit[PEAT_BIT_POSITIONS];
    double gross_dir_set; /* fraction of single-bit gross errors where the bit went 0 -> 1 */
    int64_t gross_stride; /* gcd of flat index distances between gross errors of a tensor */
    /* spatial (2-D view rows x cols of each tensor): bounding box of the gross errors */
    double box_fill;                          /* sum of gross errors / sum of their boxes' areas */
    double box_share;                         /* sum of box areas / sum of numel of those tensors */
    int64_t box_rows, box_cols;               /* box of the tensor with the most gross errors */
    int64_t box_tensor_rows, box_tensor_cols; /* that tensor's 2-D view */
    int box_at_bottom, box_at_right;          /* that box touches the last row / last column */
    /* fraction of gross errors in tensors whose box touches the last row or column */
    double frac_err_in_last_tile;
    /* input dependence: Spearman rho of |err|/s with |exact|/s; NaN if n/a */
    double corr_err_input;
    /* smoothness of the signed relative error err/exact as a function of the input value (when
     * given) or of the exact value, whichever is smoother: median successive difference over
     * sqrt(2) MAD in that order (~1 for independent errors, ~0 for a smooth function), and sign
     * changes per step (~0.5 for independent errors) */
    double err_roughness;
    double err_sign_changes;
    /* repeatability: max abs difference between two runs on the same input (0 = deterministic,
     * negative = not measured) */
    double repeat_max_diff;
    int64_t repeat_n_diff; /* elements that differed between the runs */
    /* per call (each output tensor, each repeated call; "few" = at most max(2, 1%) of the
     * tensor's elements, PEAT_FEW_PER_CALL): the transient rule decides call by call */
    int64_t gross_tensors;      /* output tensors with at least one gross error */
    int64_t gross_tensors_many; /* ... with more than a few */
    int64_t repeat_calls;       /* calls run twice */
    int64_t repeat_calls_diff;  /* ... whose two runs differed */
    int64_t repeat_calls_many;  /* ... in more than 2 x a few elements (two runs, a few each) */
} peat_signature;

/* "A few" elements of an n-element tensor: at most 2, or 1% of it. */
static inline int64_t peat_few_per_call(int64_t n)
{
    int64_t f = n / 100;
    return f > 2 ? f : 2;
}

/* Accumulates error samples of one kernel over many calls. */
typedef struct peat_analyzer_acc peat_analyzer_acc_t;
peat_analyzer_acc_t *peat_analyzer_acc_new(const char *kernel, peat_op_kind op);
void peat_analyzer_acc_free(peat_analyzer_acc_t *acc);
/* Bytes the analyzer's accumulators and signatures have mapped where a fork does not copy them
 * (MADV_DONTFORK; 0 where the heap serves them, as under AddressSanitizer): the resident size a
 * fork copies is the process's less these, at most. */
size_t peat_analyzer_unforked_bytes(void);
/* Threads an add may use (default, and n <= 0: the online CPUs, at most 64). The signature is
 * bit-identical for any number. */
void peat_analyzer_acc_set_threads(peat_analyzer_acc_t *acc, int n);
/* Adds one output tensor: test (F32 values, any float dtype), exact (F64), mag (per element, from
 * peat_golden_magnitude; NULL = |exact|), depth (op depth K), and the tensor's plane view (rows,
 * cols) for spatial structure along the op's own axes: rows*cols divides numel, and a tensor of
 * several planes (heads x [T, D] for attention, images x channels x [OH, OW] for conv) is
 * folded onto one plane (pass rows = numel / cols for a plain matrix, rows=1 if not a matrix). */
peat_status peat_analyzer_acc_add(peat_analyzer_acc_t *acc, const peat_tensor *test,
                                  const peat_tensor *exact, const double *mag, int64_t depth,
                                  int64_t rows, int64_t cols);
/* Same, with the input value each output element is a function of (elementwise ops: X, same
 * numel as test; NULL = none). Smoothness is then measured along the input instead of along the
 * exact output, which separates an approximated function from noise for non-monotone ops. */
peat_status peat_analyzer_acc_add_input(peat_analyzer_acc_t *acc, const peat_tensor *test,
                                        const peat_tensor *exact, const double *mag, int64_t depth,
                                        int64_t rows, int64_t cols, const peat_tensor *input);
/* The same with the number of comparably sized, independently rounded terms behind each output
 * element (terms <= depth): the statistical scale of an error is mag / sqrt(terms). It is depth
 * for dot products and sums (GEMM, conv, reductions) and 1 for ops whose error is dominated by
 * the element's own inputs (elementwise, softmax, layernorm outputs); see
 * peat_golden_terms. peat_analyzer_acc_add_input uses terms = depth. */
peat_status peat_analyzer_acc_add_terms(peat_analyzer_acc_t *acc, const peat_tensor *test,
                                        const peat_tensor *exact, const double *mag, int64_t depth,
                                        int64_t terms, int64_t rows, int64_t cols,
                                        const peat_tensor *input);
/* Adds the same output of two kernels, test_a into acc_a and test_b into acc_b (e.g. the
 * candidate's and the golden's), against one exact output in one pass: exact, mag and input are
 * read once. Each accumulator ends exactly as after its own peat_analyzer_acc_add_terms (the same
 * signature bits). The accumulators must differ; threads: acc_a's setting. */
peat_status peat_analyzer_acc_add_pair(peat_analyzer_acc_t *acc_a, const peat_tensor *test_a,
                                       peat_analyzer_acc_t *acc_b, const peat_tensor *test_b,
                                       const peat_tensor *exact, const double *mag, int64_t depth,
                                       int64_t terms, int64_t rows, int64_t cols,
                                       const peat_tensor *input);
/* The same pair add split in two, for adds made elsewhere (`mpirun -n N peat run`: a rank analyses
 * its calls, rank 0 places them): _part streams the output as add number `call` of both
 * accumulators (the sample's priorities derive from it), leaving the sketches and sample in acc_a
 * and acc_b and the add's own statistics in part_a and part_b (peat_analyzer_part_size bytes
 * each, plain bytes of this build); _apply_part adds those to an accumulator in the order the
 * adds come. Adds made with _part into one accumulator then spilled (_spill: its sketches and
 * sample, _spill_size bytes) and absorbed into another, with every part applied to that one in
 * add order, leave it bit for bit as peat_analyzer_acc_add_pair would have, provided `call` was
 * the add's index there. */
size_t peat_analyzer_part_size(void);
peat_status peat_analyzer_acc_add_pair_part(peat_analyzer_acc_t *acc_a, const peat_tensor *test_a,
                                            peat_analyzer_acc_t *acc_b, const peat_tensor *test_b,
                                            const peat_tensor *exact, const double *mag,
                                            int64_t depth, int64_t terms, int64_t rows,
                                            int64_t cols, const peat_tensor *input, int64_t call,
                                            void *part_a, void *part_b);
void peat_analyzer_acc_apply_part(peat_analyzer_acc_t *acc, const void *part);
size_t peat_analyzer_acc_spill_size(const peat_analyzer_acc_t *acc);
peat_status peat_analyzer_acc_spill(const peat_analyzer_acc_t *acc, void *buf);
peat_status peat_analyzer_acc_absorb(peat_analyzer_acc_t *acc, const void *buf, size_t n);
/* Records a repeatability measurement (two runs of the same kernel on the same input). */
void peat_analyzer_acc_add_repeat(peat_analyzer_acc_t *acc, const peat_tensor *run1,
                                  const peat_tensor *run2);
/* Computes the signature of what was added so far. */
peat_status peat_analyzer_signature(const peat_analyzer_acc_t *acc, peat_signature *out);
/* Both signatures of two accumulators fed the same calls (a candidate's and the golden's, as
 * peat_analyzer_acc_add_pair feeds them), on two threads. Where their samples hold the same
 * elements (they differ only where one kernel's value was not finite), the orders that depend
 * only on exact values and inputs are sorted once for both. Each signature is bit for bit what
 * peat_analyzer_signature gives. */
peat_status peat_analyzer_signature_pair(const peat_analyzer_acc_t *a, peat_signature *sa,
                                         const peat_analyzer_acc_t *b, peat_signature *sb);

/* Effective significand bits for a given rms_rel_mag (the estimator of docs/signature.md). */
double peat_analyzer_eff_bits(double rms_rel_mag);
/* The rounding bound of one element: gamma_K(2^-24) mag + (K+1) 2^-150. */
double peat_analyzer_bound(double mag, int64_t depth);
/* Its two coefficients for depth K, so that a loop over a tensor computes gamma mag + eta per
 * element (the same operations, so the same bits, as peat_analyzer_bound). */
void peat_analyzer_bound_coeffs(int64_t depth, double *gamma, double *eta);

/* JSON object for one signature (fixed key order) into buf; returns bytes needed like snprintf. */
int peat_analyzer_signature_to_json(const peat_signature *s, char *buf, size_t n);
/* s escaped as the inside of a JSON string (quote, backslash, control characters) into buf;
 * returns the length needed like snprintf. The one JSON string escaper (reports use it too). */
size_t peat_analyzer_json_escape(char *buf, size_t n, const char *s);

#endif
