/* opdesc.h: the op descriptor. Every op kind is one file of core/ops/ that fills one
 * peat_op_desc per direction (forward, backward) with every trait the modules ask for: its
 * parameters and shape rules, its rounding-bound rule (magnitude, terms), its probes, its
 * permutation layout for the diagnosis, its cost features and synthetic calls for the predictor,
 * its autocast policy and the aten names it maps. core/ops/table.c lists them; the modules ask
 * the table (peat_op_desc_get) and switch on no op kind. docs/ops.md, "Adding an op". */
#ifndef PEAT_CORE_OPDESC_H
#define PEAT_CORE_OPDESC_H

#include "core/record.h"
#include "peat/peat.h"

/* ---- probes: what the analyzer runs beyond the recorded calls ---- */

typedef enum peat_probe_kind {
    PEAT_PROBE_SHAPE = 0, /* awkward sizes, long K, batch, transposes */
    PEAT_PROBE_VALUE,     /* subnormals, near overflow, cancellation, large logits, ... */
    PEAT_PROBE_KIND_COUNT
} peat_probe_kind;

/* What a value probe pushes on: the detector reads NaN/Inf on an "overflow" probe as a range
 * finding and errors on a "subnormal" probe as flush-to-zero. */
typedef enum peat_probe_tag {
    PEAT_PROBE_TAG_NONE = 0,
    PEAT_PROBE_TAG_SUBNORMAL,
    PEAT_PROBE_TAG_OVERFLOW,
    PEAT_PROBE_TAG_CANCEL,
    PEAT_PROBE_TAG_EXACT,
    PEAT_PROBE_TAG_EXTENT /* the recorded values at other extents (rows, row lengths, sequence
                             lengths): what fails there follows the shape, not the values */
} peat_probe_tag;

/* Where an op's probe generator puts its probes (the analyzer's probe set): add() appends an
 * empty probe and returns its arguments (op, params and inputs are the generator's to set;
 * tensors it puts there belong to the set), NULL when out of memory. */
typedef struct peat_probe_sink {
    void *ctx;
    peat_args *(*add)(void *ctx, peat_probe_kind kind, peat_probe_tag tag, const char *label);
} peat_probe_sink;

/* ---- permutation layout: how an op's outputs follow its inputs' axes ---- */

enum { PEAT_PERM_PAIRS_ADJACENT = 1, PEAT_PERM_PAIRS_HALVES = 2, PEAT_PERM_REVERSE = 3 };

/* One tensor as [P, R, C] (planes, rows, columns), each axis moved by one of the op's drawn
 * permutations (an index into peat_op_perm.len) or by none (-1). */
typedef struct peat_op_perm_view {
    int64_t P, R, C;
    int ap, ar, ac;
} peat_op_perm_view;

typedef struct peat_op_perm {
    int64_t len[3]; /* the permutations drawn, in order (<= 1: none) */
    /* how permutation k moves its len[k] indices: 0 any way; PEAT_PERM_PAIRS_ADJACENT or
     * PEAT_PERM_PAIRS_HALVES as pairs that stay together and in order ((2j, 2j+1), or (j,
     * j + len/2): RoPE's rotated pairs in its two layouts), len[k] even; PEAT_PERM_REVERSE
     * reversed (i to len - 1 - i: a plane's row-major pixels reversed turn the image by 180
     * degrees) */
    int pairs[3];
    unsigned in_mask; /* inputs permuted (bit k for input k) */
    peat_op_perm_view in[PEAT_MAX_IO];
    peat_op_perm_view out; /* where the elements of each output of its size come from */
    /* the same for the outputs of a second size (a norm's per-row or per-channel statistics,
     * its dgamma and dbeta; all zero: none) */
    peat_op_perm_view out2;
} peat_op_perm;

/* ---- predictor: the GEMM an op's work amounts to ---- */

typedef struct peat_op_gemm_view {
    int64_t batch, m, n, k;
    double scale; /* share of the m x n x k work done (0.5: a causal mask) */
} peat_op_gemm_view;

/* ---- magnitude: the op's inputs as doubles ---- */

typedef struct peat_op_mag_in {
    double *x[PEAT_MAX_IO]; /* NULL for I32 inputs (read them from the args) */
} peat_op_mag_in;

typedef struct peat_op_desc {
    /* name, arity, shape check, output shapes, depth, flops (peat.h) */
    peat_op_info info;

    /* Rounding bound (docs/ops.md, docs/bounds.md): per-element magnitude of the n elements of
     * output o such that an honest fp32 kernel's error is <= gamma_depth * mag; exact_out is
     * output o of the exact kernel (for rules that need it). */
    peat_status (*magnitude)(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                             const peat_tensor *exact_out, double *mag);
    /* How many comparably sized, independently rounded terms make up each element of output o
     * (1 for a value dominated by its own inputs), at most the depth. */
    int64_t (*terms)(const peat_op_params *p, int o, int64_t depth);

    /* Probes: the op's own shape and value probes built from the recorded calls (recs holds
     * calls of this op, at least one), with a generator seeded from seed. */
    peat_status (*probes)(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed);
    /* The inputs an output scales with when they alone are scaled, the others (indices, saved
     * statistics) kept consistent: the subnormal end of the range probe (bit k: input k). */
    unsigned range_low;
    /* The inputs scaled to 2^17 for the large end of the range probe (0: none). */
    unsigned range_high;

    /* Diagnosis: the permutation of rows, columns, planes or elements the outputs follow (0
     * when the op has none: embeddings, a filter gradient). */
    int (*perm)(const peat_args *a, peat_op_perm *out);

    /* Diagnosis: the small-integers experiment. Rewrites a's inputs (a copy the experiment owns)
     * so that the op's arithmetic is exact in every order and every format of >= 8 significand
     * bits (values of -1, 0, 1 with at most PEAT_OP_INT_TERMS nonzero terms per sum; saved
     * statistics as mean 1 and rstd 2), and returns the outputs (bit o) that are then exact; 0
     * when the op has no such form (a root, an exponential), a's inputs untouched. */
    unsigned (*integers)(peat_args *a);
    /* Diagnosis: how far a call's outputs (a->out, any kernel's) break an identity the exact op
     * keeps whatever its parameters (RoPE's rotation keeps each pair's length): the largest
     * relative departure; NAN when the op has none. A rounded coefficient breaks it at its
     * format's precision, another angle or formula that is still the identity's kind keeps it. */
    double (*invariant)(const peat_args *a);

    /* Predictor: the calibration family (params of size n; `off` 1 moves the dims off round
     * numbers for held-out shapes), the input shapes and dtypes of a call, inputs that must be
     * positive (bit k), and the GEMM view of the work (0 when there is none). */
    void (*cal_params)(int n, int off, peat_op_params *p);
    void (*input_shapes)(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                         peat_dtype dt[]);
    unsigned positive_inputs;
    int (*gemm_view)(const peat_op_params *p, peat_op_gemm_view *v);

    /* Autocast (mixed-precision flows): inputs cast to half (bit k) and outputs returned in
     * half, for an op on autocast's lower-precision list (0, 0: the op runs in fp32). */
    void (*amp_masks)(const peat_args *a, unsigned *in, unsigned *out);

    /* The aten ops (comma separated) the PyTorch bridge maps to this op ("" for none). */
    const char *aten;
} peat_op_desc;

/* The descriptor of op (NULL when out of range). */
const peat_op_desc *peat_op_desc_get(peat_op_kind op);
/* Names of the traits op lacks, comma separated, into buf ("" when it has them all). A trait
 * an op does not have by nature (no permutation, no GEMM view) is a function that says so. */
const char *peat_op_desc_missing(peat_op_kind op, char *buf, size_t cap);

/* ---- helpers the descriptor files share (core/ops/kit.c) ---- */

/* Loads a's float inputs as doubles (I32 inputs stay NULL). */
peat_status peat_op_mag_in_load(const peat_args *a, peat_op_mag_in *m);
void peat_op_mag_in_free(peat_op_mag_in *m);
/* The exact kernel of a's op run on |inputs| (indices unchanged): the magnitude of a plain sum
 * of products. */
peat_status peat_op_mag_abs(const peat_args *a, const peat_op_mag_in *in, int64_t n, double *mag);
/* |exact value|: one rounding. */
peat_status peat_op_mag_value(const peat_args *a, const peat_tensor *exact_out, int64_t n,
                              double *mag);
/* gamma_K = K u / (1 - K u) of fp32 (u = 2^-24), the bound's relative factor for a depth of K
 * roundings; beyond K u = 1/2 the first-order K u (only for K > 2^23, where the bound is
 * meaningless anyway). */
double peat_op_gamma(int64_t depth);
/* The magnitude that makes the bound gamma_depth mag allow `roundings` roundings in gradual
 * underflow (2^-150 each: the bound's own absolute term assumes depth + 1 of them, unamplified):
 * what an op adds where later factors amplify them (a norm's rstd). */
double peat_op_underflow_mag(int64_t depth, double roundings);
/* terms of a reduction: the depth; of an elementwise or row op: 1. */
int64_t peat_op_terms_depth(const peat_op_params *p, int o, int64_t depth);
int64_t peat_op_terms_one(const peat_op_params *p, int o, int64_t depth);
/* No permutation, no GEMM view, no autocast cast, no probes of its own. */
int peat_op_perm_none(const peat_args *a, peat_op_perm *out);
unsigned peat_op_integers_none(peat_args *a);
double peat_op_invariant_none(const peat_args *a);
int peat_op_gemm_view_none(const peat_op_params *p, peat_op_gemm_view *v);
void peat_op_amp_none(const peat_args *a, unsigned *in, unsigned *out);
peat_status peat_op_probes_none(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed);

/* ---- the small-integers experiment's helpers (core/ops/kit.c) ---- */

#define PEAT_OP_INT_TERMS 64 /* nonzero terms per sum: partial sums below 2^7, exact in bf16 */

/* Input k's float values as -1, 0 or +1, a fixed draw per element (0 a quarter of them). */
void peat_op_int_values(peat_args *a, int k);
/* Input k set to the constant v (a saved mean 1, a saved rstd 2). */
void peat_op_int_fill(peat_args *a, int k, float v);
/* The stride that thins a reduction of `terms` terms to at most PEAT_OP_INT_TERMS nonzero ones,
 * ceil(terms / PEAT_OP_INT_TERMS): one kept in each run of `stride` along the reduction, the run's
 * phase shifted by the other indices (a diagonal), so that no row, column or channel is all
 * zeros and a defect confined to one stays visible. */
int64_t peat_op_int_stride(int64_t terms);
/* Input k's G groups of M values (a norm's rows or channels; member m of group g at
 * g gs + (m / S) os + m % S) as -1, 0, 1, thinned along a diagonal to at most PEAT_OP_INT_TERMS
 * nonzero, each group's sum then moved to a multiple of M's odd part: its mean, sum / M, has at
 * most 8 significand bits, exact in every format of >= 8 bits and any order of the sum. */
void peat_op_int_short_means(peat_args *a, int k, int64_t G, int64_t M, int64_t S, int64_t gs,
                             int64_t os);
/* Input k, an [R, C] gradient of a row op, thinned along a diagonal: at most PEAT_OP_INT_TERMS
 * terms in a row's sums and in a column's sums over the rows, none of them all zeros. */
void peat_op_int_sparse_rows_cols(peat_args *a, int k, int64_t R, int64_t C);

/* A view of one tensor. */
static inline peat_op_perm_view peat_op_view(int64_t P, int64_t R, int64_t C, int ap, int ar,
                                             int ac)
{
    peat_op_perm_view v = {P, R, C, ap, ar, ac};
    return v;
}

/* Probe builders: a probe with a writable copy of rec's inputs; the same with input k mapped to
 * shift + scale x; a probe of params q with new Gaussian inputs of the given sizes at the rms of
 * the recorded inputs they replace. */
peat_args *peat_op_probe_clone(peat_probe_sink *s, const peat_record *rec, peat_probe_kind kind,
                               peat_probe_tag tag, const char *label);
peat_status peat_op_probe_scaled(peat_probe_sink *s, const peat_record *rec, peat_probe_tag tag,
                                 const char *label, int k, double scale, double shift);
peat_status peat_op_probe_fresh(peat_probe_sink *s, const peat_record *rec, peat_rng_t *r,
                                const peat_op_params *q, const int64_t *sizes, int n_in,
                                const char *label);
/* A probe of rec's inputs with every 5th element of input k exactly 0 (where an activation's
 * formula may divide by x or take 0 log 0: a kink, a removable singularity). */
peat_status peat_op_probe_zeros(peat_probe_sink *s, const peat_record *rec, int k);
/* The record with input k, viewed as [planes][rows][cols], zero on every 4th row of each plane
 * (a norm's rows or channels of zeros: padding tokens, a dead channel), labelled `label`. */
peat_status peat_op_probe_zero_rows(peat_probe_sink *s, const peat_record *rec, int k,
                                    int64_t planes, int64_t rows, int64_t cols, const char *label);
/* A probe of rec's inputs with inputs `which` and `which2` (-1: none) mapped to shift + scale x. */
peat_status peat_op_probe_from_record(peat_probe_sink *s, const peat_record *rec,
                                      peat_probe_tag tag, const char *label, int which,
                                      double scale, double shift, int which2);
/* Shape probes of a row-wise op (rows i[0], the first input [rows, i[1]] cycled, the others
 * kept) or, with seq, of attention (sequence i[2], Q K V [B,H,T,D] cycled along T): the recorded
 * values at row counts 1, 3, 7, 9, 17, 33, 65, one more, and 2m+3 (4m+1 for a sequence). */
peat_status peat_op_probe_row_counts(peat_probe_sink *s, const peat_record *rec, int seq);
/* Row-length probes of a row-wise op whose inputs are [R, C] rows and per-column vectors [C]
 * (softmax: X; layer norm: X, gamma, beta): the recorded values, up to 64 rows, each row and
 * vector cut short or cycled to lengths that leave a remainder for every vector width up to 128
 * (a loop's tail handled wrongly, or a row held in one warp). */
peat_status peat_op_probe_row_lengths(peat_probe_sink *s, const peat_record *rec);
/* Input k of a probe's args as floats, and its length. */
float *peat_op_probe_f32(peat_args *a, int k);
int64_t peat_op_probe_numel(const peat_args *a, int k);
/* Largest finite |x| of a float tensor (1 when all are 0); its rms over finite values (1 when
 * 0). */
double peat_op_maxabs(const peat_tensor *t);
double peat_op_rms(const peat_tensor *t);

/* Shape checks: tensor t (input or output `what`; NULL passes) has dtype dt (F64 may stand in for
 * F32) and n elements; params i[0..n-1] are sane sizes; output k of a (NULL when absent). */
peat_status peat_op_expect(const peat_args *a, const peat_tensor *t, const char *what,
                           peat_dtype dt, int64_t n);
peat_status peat_op_positive(const peat_args *a, int n);
const peat_tensor *peat_op_out(const peat_args *a, int k);
/* The error, in units of fp32's u, of a variance of n values computed in fp32 (var the exact
 * biased variance, A = mean |x|, Ad = mean |x - mean|; docs/bounds.md): the differences,
 * squares, n - 1 adds and the divide ((n + 4) var); a running mean's error (Welford's: each
 * update's rounding at the partial means' size, up to n u A / 2, times the deviations: n Ad A);
 * and the computed mean's error (up to n u A) carried by every deviation (n^2 u A^2, second
 * order, but A^2 / var is the mean-to-spread ratio squared). */
double peat_op_var_err(double n, double var, double A, double Ad);
/* Output o's shape: ndim n, dims d0..d3. */
void peat_op_out_shape(int *nd, int64_t s[][PEAT_MAX_DIMS], int o, int n, int64_t d0, int64_t d1,
                       int64_t d2, int64_t d3);

/* Traits shared by families of ops:
 * elementwise (i = n; inputs X, or X and dY, of n elements; one output of n): */
peat_status peat_op_ew_check(const peat_args *a);
peat_status peat_op_ew_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS]);
int64_t peat_op_depth_one(const peat_op_params *p);
double peat_op_ew_flops(const peat_op_params *p);
void peat_op_ew_cal(int n, int off, peat_op_params *p);
/* X [n]; X and dY [n] (a backward) */
void peat_op_ew_inputs1(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                        peat_dtype dt[]);
void peat_op_ew_inputs2(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                        peat_dtype dt[]);
int peat_op_perm_elements(const peat_args *a, peat_op_perm *out);
/* row-wise (i = R, C): depth C, 5 R C flops, one [R, C] or [R] output, the calibration family */
int64_t peat_op_row_depth(const peat_op_params *p);
double peat_op_row_flops(const peat_op_params *p);
peat_status peat_op_rc_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS]);
peat_status peat_op_rows_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS]);
void peat_op_row_cal(int n, int off, peat_op_params *p);
/* rows and columns of the [R, C] inputs, the inputs in cols_mask by columns ([C]) and in
 * rows_mask by rows ([R]); the output view [R, C], or [R] with out_rows */
int peat_op_perm_rows_cols(const peat_args *a, peat_op_perm *out, unsigned cols_mask,
                           unsigned rows_mask, int out_rows);

/* GEMM-shaped (i = transA, transB, M, N, K, batch; f[1] = beta, input C when it is nonzero):
 * the shape check and output shape, rows and columns permuted, the inputs of a synthetic call
 * (F32), the GEMM view; a probe of shape g whose A and B are drawn N(0, sa^2), N(0, sb^2) (C
 * when beta != 0), with p->op and f[0] = alpha set for the gemm op (the caller changes them for
 * another). */
typedef struct peat_op_gemm_shape {
    int64_t M, N, K;
    int tA, tB;
    int64_t batch;
    double alpha, beta;
} peat_op_gemm_shape;
peat_status peat_op_gemm_check(const peat_args *a);
double peat_op_gemm_flops(const peat_op_params *p);
void peat_op_gemm_cal(int n, int off, peat_op_params *p);
/* sum_k |f0 a_ik b_kj| (|f2| too, a scale) + |beta c_ij|: the exact kernel on |inputs|, |f| */
peat_status peat_op_gemm_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                             const peat_tensor *exact_out, double *mag);
peat_status peat_op_gemm_out_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS]);
int peat_op_gemm_perm(const peat_args *a, peat_op_perm *out);
void peat_op_gemm_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                         peat_dtype dt[]);
int peat_op_gemm_view_of(const peat_op_params *p, peat_op_gemm_view *v);
peat_status peat_op_gemm_probe(peat_probe_sink *s, peat_rng_t *r, peat_probe_kind kind,
                               peat_probe_tag tag, const char *label, peat_op_gemm_shape g,
                               double sa, double sb, peat_args **made);
/* GEMM's shape probes (awkward sizes, square ones, every transpose, a batch, K past kmax, alpha
 * and beta), each handed to finish (when not NULL) once made: another GEMM-shaped op's probes. */
typedef peat_status (*peat_op_probe_finish)(peat_args *p, void *ctx);
peat_status peat_op_gemm_shape_probes(peat_probe_sink *s, peat_rng_t *r, double sa, double sb,
                                      int64_t kmax, peat_op_probe_finish finish, void *ctx);
/* Synthetic shapes: sets ndim/shape/dtype of slot *k and advances it. */
void peat_op_shape(int *nd, int64_t s[][PEAT_MAX_DIMS], peat_dtype *dt, int *k, int d, int64_t a,
                   int64_t b, int64_t c, int64_t e, peat_dtype t);
/* params i[0..count-1] = v (each at least 1), the rest 0. */
void peat_op_params_set(peat_op_params *p, int count, const int64_t *v);

#endif
