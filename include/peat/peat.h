/* peat.h: the public C API of PEAT (status, dtypes, tensors, ops, kernels, execution). */
#ifndef PEAT_PEAT_H
#define PEAT_PEAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PEAT_VERSION_STRING "0.1.0"

/* ---- status: one enum, one error path ------------------------------------------------------ */

typedef enum peat_status {
    PEAT_OK = 0,
    PEAT_ERR_INVAL,       /* bad argument, malformed spec */
    PEAT_ERR_NOMEM,       /* allocation failed */
    PEAT_ERR_IO,          /* file could not be read or written */
    PEAT_ERR_FORMAT,      /* file is damaged, foreign or of another schema version */
    PEAT_ERR_NOTFOUND,    /* unknown name (kernel, flow, op, record) */
    PEAT_ERR_SHAPE,       /* shapes or params do not fit the op */
    PEAT_ERR_BACKEND,     /* device or vendor runtime failure */
    PEAT_ERR_ABI,         /* plugin ABI version mismatch */
    PEAT_ERR_UNSUPPORTED, /* valid request this build or kernel cannot serve */
    PEAT_ERR_NUMERIC,     /* NaN/Inf where a finite value is required */
    PEAT_ERR_KERNEL,      /* kernel crashed, hung or reported failure */
    PEAT_ERR_INTERNAL,
    PEAT_STATUS_COUNT
} peat_status;

const char *peat_status_str(peat_status s);

/* The single place errors are reported: records "file:line: message" as the last error of this
 * thread and returns code. Put a breakpoint here to catch every failure. */
peat_status peat_error_set(peat_status code, const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
#define PEAT_ERROR(code, ...) peat_error_set((code), __FILE__, __LINE__, __VA_ARGS__)
/* The message of the last error (without location), "" if none. */
const char *peat_error_last(void);
/* "file:line" where the last error was raised. */
const char *peat_error_where(void);
void peat_error_clear(void);

#define PEAT_TRY(expr)                                                                             \
    do {                                                                                           \
        peat_status peat_try_s_ = (expr);                                                          \
        if (peat_try_s_ != PEAT_OK) return peat_try_s_;                                            \
    } while (0)

/* ---- dtypes ---------------------------------------------------------------------------------- */

typedef enum peat_dtype {
    PEAT_DTYPE_F64 = 0,
    PEAT_DTYPE_F32,
    PEAT_DTYPE_BF16,
    PEAT_DTYPE_F16,
    PEAT_DTYPE_I32,
    PEAT_DTYPE_COUNT
} peat_dtype;

size_t peat_dtype_size(peat_dtype t);
const char *peat_dtype_name(peat_dtype t);
/* Parses "f64", "fp32", "bf16", "f16"/"fp16", "i32"; PEAT_ERR_NOTFOUND otherwise. */
peat_status peat_dtype_parse(const char *s, peat_dtype *out);

/* The bits of a float and back (memcpy: no aliasing games). */
static inline uint32_t peat_f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static inline float peat_f32_from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Round-to-nearest-even conversions with IEEE NaN/Inf/subnormal handling. */
uint16_t peat_f32_to_bf16(float x);
float peat_bf16_to_f32(uint16_t h);
uint16_t peat_f32_to_f16(float x);
float peat_f16_to_f32(uint16_t h);
/* x rounded to the format and back: the value a kernel storing in that format sees. */
float peat_round_bf16(float x);
float peat_round_f16(float x);
/* Round-toward-zero variants (truncation). */
uint16_t peat_f32_to_bf16_rtz(float x);
/* Unit roundoff u of a format (2^-p for p significand bits including the implicit one). */
double peat_dtype_unit_roundoff(peat_dtype t);
/* Significand bits including the implicit bit (53, 24, 8, 11). */
int peat_dtype_mantissa_bits(peat_dtype t);

/* ---- tensors: host memory, row-major, contiguous --------------------------------------------- */

#define PEAT_MAX_DIMS 4

typedef struct peat_tensor {
    peat_dtype dtype;
    int ndim;
    int64_t shape[PEAT_MAX_DIMS];
    void *data;
    int owns_data;
} peat_tensor;

/* Allocates a zero-filled tensor; absurd shapes (negative, overflow, > 2^34 elements) are refused.
 */
peat_status peat_tensor_alloc(peat_dtype t, int ndim, const int64_t *shape, peat_tensor **out);
/* Wraps caller memory (not freed by peat_tensor_free). */
peat_status peat_tensor_wrap(peat_dtype t, int ndim, const int64_t *shape, void *data,
                             peat_tensor **out);
peat_status peat_tensor_clone(const peat_tensor *src, peat_tensor **out);
void peat_tensor_free(peat_tensor *t);
int64_t peat_tensor_numel(const peat_tensor *t);
size_t peat_tensor_nbytes(const peat_tensor *t);
/* Shape helpers for call sites: peat_tensor_alloc2(F32, rows, cols, &t). */
peat_status peat_tensor_alloc1(peat_dtype t, int64_t n0, peat_tensor **out);
peat_status peat_tensor_alloc2(peat_dtype t, int64_t n0, int64_t n1, peat_tensor **out);
peat_status peat_tensor_alloc3(peat_dtype t, int64_t n0, int64_t n1, int64_t n2, peat_tensor **out);
peat_status peat_tensor_alloc4(peat_dtype t, int64_t n0, int64_t n1, int64_t n2, int64_t n3,
                               peat_tensor **out);
static inline float *peat_f32(const peat_tensor *t)
{
    return (float *)t->data;
}
static inline double *peat_f64(const peat_tensor *t)
{
    return (double *)t->data;
}
static inline int32_t *peat_i32(const peat_tensor *t)
{
    return (int32_t *)t->data;
}
/* Element i as double, whatever the dtype. */
double peat_tensor_get(const peat_tensor *t, int64_t i);
void peat_tensor_set(peat_tensor *t, int64_t i, double v);

/* ---- rng: seeded (GSL mt19937 underneath); seeds are explicit and recorded ------------------- */

typedef struct peat_rng peat_rng_t;
peat_rng_t *peat_rng_alloc(uint64_t seed);
void peat_rng_free(peat_rng_t *r);
uint64_t peat_rng_seed(const peat_rng_t *r);
double peat_rng_uniform(peat_rng_t *r);                /* [0,1) */
double peat_rng_gaussian(peat_rng_t *r, double sigma); /* N(0, sigma^2) */
uint64_t peat_rng_int(peat_rng_t *r, uint64_t n);      /* [0,n) */
void peat_rng_fill_uniform(peat_rng_t *r, peat_tensor *t, double lo, double hi);
void peat_rng_fill_gaussian(peat_rng_t *r, peat_tensor *t, double sigma);
/* Derives an independent seed for a named sub-stream (flows, data, injectors). */
uint64_t peat_seed_derive(uint64_t seed, const char *stream);

/* ---- ops ------------------------------------------------------------------------------------- */
/* Every op is a pure function of its inputs and params. All float tensors of a flow are F32
 * (working precision); index tensors are I32. Exact kernels take the same inputs and write F64
 * outputs. Params use the slots named below (unused slots are 0). Layout is row-major, NCHW for
 * images, [B,H,T,D] for attention. Outputs never alias inputs unless said ("may alias"). */

typedef enum peat_op_kind {
    /* i: transA, transB, M, N, K, batch(>=1) ; f: alpha, beta
     * in: A [batch, transA? KxM : MxK], B [batch, transB? NxK : KxN], C [batch,M,N] (only when
     * beta != 0) ; out: D [batch,M,N] = alpha*op(A)op(B) + beta*C (D may alias C) */
    PEAT_OP_GEMM = 0,
    /* i: N, C, H, W, O, KH, KW, stride, pad ; in: X [N,C,H,W], Wt [O,C,KH,KW] ;
     * out: Y [N,O,OH,OW], OH = (H + 2 pad - KH)/stride + 1 */
    PEAT_OP_CONV2D,
    /* same i ; in: dY [N,O,OH,OW], Wt ; out: dX [N,C,H,W] */
    PEAT_OP_CONV2D_BWD_DATA,
    /* same i ; in: X, dY ; out: dW [O,C,KH,KW] */
    PEAT_OP_CONV2D_BWD_FILTER,
    /* i: R, C, S ; in: X [R,C,S], b [C] ; out: Y = X + b (per channel c; S=1 for a linear layer) */
    PEAT_OP_BIAS_ADD,
    /* i: R, C, S ; in: dY [R,C,S] ; out: db [C] = sum over R and S */
    PEAT_OP_BIAS_ADD_BWD,
    /* i: n ; in: X ; out: Y = max(X,0) */
    PEAT_OP_RELU,
    /* i: n ; in: X (pre-activation), dY ; out: dX = dY * (X > 0) */
    PEAT_OP_RELU_BWD,
    /* i: n ; in: X ; out: Y = 0.5 X (1 + erf(X/sqrt2)) (the exact GELU) */
    PEAT_OP_GELU,
    /* i: n ; in: X, dY ; out: dX = dY * GELU'(X) */
    PEAT_OP_GELU_BWD,
    /* i: R, C ; in: X [R,C] ; out: Y = softmax over each row */
    PEAT_OP_SOFTMAX,
    /* i: R, C ; in: Y (softmax output), dY ; out: dX = Y * (dY - sum(dY*Y)) */
    PEAT_OP_SOFTMAX_BWD,
    /* i: R, C ; f: eps ; in: X [R,C], gamma [C], beta [C] ;
     * out: Y [R,C], mean [R], rstd [R] (rstd = 1/sqrt(var + eps), biased var) */
    PEAT_OP_LAYERNORM,
    /* i: R, C ; f: eps ; in: X, gamma, mean, rstd, dY ; out: dX [R,C], dgamma [C], dbeta [C] */
    PEAT_OP_LAYERNORM_BWD,
    /* i: B, H, T, D, causal ; f: scale ; in: Q, K, V [B,H,T,D] ;
     * out: O [B,H,T,D], L [B,H,T] (row logsumexp of scale*QK^T after the causal mask) */
    PEAT_OP_ATTENTION,
    /* same i, f ; in: Q, K, V, O, L, dO ; out: dQ, dK, dV */
    PEAT_OP_ATTENTION_BWD,
    /* i: N, V, D ; in: table [V,D], idx I32 [N] ; out: Y [N,D] = table[idx] */
    PEAT_OP_EMBEDDING,
    /* i: N, V, D ; in: idx I32 [N], dY [N,D] ; out: dtable [V,D] (scatter-add into zeros) */
    PEAT_OP_EMBEDDING_BWD,
    /* i: R, C ; in: logits [R,C], target I32 [R] ; out: loss [R] = logsumexp(row) - row[target] */
    PEAT_OP_CROSS_ENTROPY,
    /* i: R, C ; in: logits, target, dloss [R] ; out: dlogits [R,C] = dloss*(softmax - onehot) */
    PEAT_OP_CROSS_ENTROPY_BWD,
    /* i: n, step t (>=1) ; f: lr, beta1, beta2, eps, weight_decay ; in: param, grad, m, v ;
     * out: param', m', v' (decoupled weight decay: p -= lr*(mhat/(sqrt(vhat)+eps) + wd*p)) ;
     * outputs may alias the matching inputs */
    PEAT_OP_ADAMW,
    /* i: n ; f: lr, momentum, weight_decay ; in: param, grad, mom ; out: param', mom'
     * (mom' = momentum*mom + grad + wd*param ; param' = param - lr*mom') ; may alias */
    PEAT_OP_SGD,
    /* i: R, C, mode (0 sum, 1 mean) ; in: X [R,C] ; out: Y [R] (reduce each row) */
    PEAT_OP_REDUCE,
    PEAT_OP_COUNT
} peat_op_kind;

#define PEAT_PARAM_I 12
#define PEAT_PARAM_F 8
typedef struct peat_op_params {
    int64_t i[PEAT_PARAM_I];
    double f[PEAT_PARAM_F];
} peat_op_params;

#define PEAT_MAX_IO 8

/* One invocation: op, params, inputs, outputs. */
typedef struct peat_args {
    peat_op_kind op;
    peat_op_params p;
    int n_in, n_out;
    const peat_tensor *in[PEAT_MAX_IO];
    peat_tensor *out[PEAT_MAX_IO];
} peat_args;

typedef struct peat_op_info {
    peat_op_kind op;
    const char *name;       /* "gemm", "conv2d_bwd_data", ... */
    int n_in_min, n_in_max; /* inputs accepted */
    int n_out;
    int is_backward;
    /* Validates shapes/dtypes/params of a call (out tensors may be NULL: then only inputs).
     * Returns PEAT_ERR_SHAPE with a message naming what differs. */
    peat_status (*check)(const peat_args *a);
    /* Shapes of the outputs for these params (fills ndim/shape of out_shape[0..n_out-1]). */
    peat_status (*out_shapes)(const peat_args *a, int *ndim, int64_t shape[][PEAT_MAX_DIMS]);
    /* Length of the longest accumulation one output element goes through (K of gamma_K). */
    int64_t (*depth)(const peat_op_params *p);
    /* Floating-point operations of one call (for the predictor). */
    double (*flops)(const peat_op_params *p);
} peat_op_info;

const peat_op_info *peat_op_info_get(peat_op_kind op);
peat_status peat_op_parse(const char *name, peat_op_kind *out);
const char *peat_op_name(peat_op_kind op);
/* Validates a call against its op (count, dtypes, shapes). */
peat_status peat_op_check(const peat_args *a);
/* Allocates outputs of the right shape with the given float dtype (F32 for golden/candidate,
 * F64 for exact). */
peat_status peat_op_alloc_outputs(peat_args *a, peat_dtype out_dtype);
void peat_args_free_outputs(peat_args *a);

/* ---- kernels and the registry ---------------------------------------------------------------- */

typedef enum peat_kernel_role {
    PEAT_ROLE_EXACT = 0, /* fp64 accumulation, the reference errors are measured against */
    PEAT_ROLE_GOLDEN,    /* trusted working-precision kernel */
    PEAT_ROLE_CANDIDATE  /* under validation */
} peat_kernel_role;
const char *peat_role_name(peat_kernel_role r);

/* Declared launch/tiling config; the predictor reads it. 0 = not applicable. */
typedef struct peat_kernel_config {
    int tile_m, tile_n, tile_k;
    int threads, blocks_per_sm;
    int vec_width;
    int split_k;
} peat_kernel_config;

struct peat_kernel;
typedef peat_status (*peat_kernel_fn)(const peat_args *a, const struct peat_kernel *self);

typedef struct peat_kernel {
    const char *name;
    peat_op_kind op;
    peat_kernel_role role;
    const char *backend;  /* "cpu", "cuda", "hip" */
    peat_dtype in_dtype;  /* precision the kernel reads its inputs in (F32 storage, may round) */
    peat_dtype out_dtype; /* precision of its outputs (F64 for exact) */
    peat_dtype acc_dtype; /* accumulation precision */
    peat_kernel_config cfg;
    peat_kernel_fn fn;
    const char *desc; /* one line for `peat list` */
    void *user;       /* kernel-private data (plugins) */
} peat_kernel;

/* Registers a kernel (the descriptor is copied; strings must outlive the registry). A name
 * registered twice is refused. */
peat_status peat_registry_add(const peat_kernel *k);
const peat_kernel *peat_registry_find(const char *name);
const peat_kernel *peat_registry_role(peat_op_kind op, peat_kernel_role role, const char *backend);
int peat_registry_count(void);
const peat_kernel *peat_registry_at(int i);
/* Registers every built-in kernel (exact, golden, candidates) once; idempotent. */
peat_status peat_registry_init(void);
/* Runs kernel k on a: validates the call first, then calls the kernel. */
peat_status peat_kernel_run(const peat_kernel *k, const peat_args *a);

/* ---- execution context: flows run every op through it ---------------------------------------- */

typedef enum peat_phase { PEAT_PHASE_FWD = 0, PEAT_PHASE_BWD = 1, PEAT_PHASE_OPT = 2 } peat_phase;

/* Where a call came from. */
typedef struct peat_call_info {
    const char *flow;
    const char *layer;
    int64_t iter;
    peat_phase phase;
    int64_t call_index;    /* global index of this call in the run (0-based) */
    int64_t op_call_index; /* index among calls of the same op kind */
} peat_call_info;

typedef struct peat_exec peat_exec_t;

/* Hook called before (after == 0) and after (after == 1) every op call. An after-hook may modify
 * the outputs (runtime fault injection). Returning non-OK aborts the call with that status. */
typedef peat_status (*peat_hook_fn)(void *user, const peat_kernel *k, const peat_args *a,
                                    const peat_call_info *info, int after);

peat_status peat_exec_create(const char *flow_name, uint64_t seed, peat_exec_t **out);
void peat_exec_free(peat_exec_t *ex);
/* Replaces the kernel used for op (default: golden). NULL restores golden. */
peat_status peat_exec_set_kernel(peat_exec_t *ex, peat_op_kind op, const peat_kernel *k);
const peat_kernel *peat_exec_kernel(const peat_exec_t *ex, peat_op_kind op);
peat_status peat_exec_add_hook(peat_exec_t *ex, peat_hook_fn fn, void *user);
void peat_exec_set_iter(peat_exec_t *ex, int64_t iter);
int64_t peat_exec_iter(const peat_exec_t *ex);
uint64_t peat_exec_seed(const peat_exec_t *ex);
int64_t peat_exec_calls(const peat_exec_t *ex);
/* Runs one op call through the active kernel, with hooks. */
peat_status peat_exec_op(peat_exec_t *ex, const char *layer, peat_phase phase, peat_args *a);

/* Convenience for call sites: fills a peat_args. */
peat_args peat_args_make(peat_op_kind op, const peat_op_params *p, int n_in,
                         const peat_tensor *const *in, int n_out, peat_tensor *const *out);

#ifdef __cplusplus
}
#endif
#endif
