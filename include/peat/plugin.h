/* plugin.h: the versioned plugin ABI: the types a kernel sees (status, dtypes, tensors, op params,
 * args, the kernel descriptor) and the table a plugin registers its kernels through.
 *
 * A plugin is a shared library that exports two functions:
 *
 *     int peat_plugin_abi_version(void);   // PEAT_PLUGIN_ABI_VERSION of the header built with
 *     int peat_plugin_register(const peat_plugin_host *host);   // 0 on success
 *
 * PEAT loads it with dlopen, calls peat_plugin_abi_version() first and refuses the library
 * (PEAT_ERR_ABI, one clear line) unless the number is in PEAT_PLUGIN_ABI_OLDEST ..
 * PEAT_PLUGIN_ABI_VERSION (2..6): a plugin built against an older header in that range loads
 * through a compatibility shim (docs/plugin-abi.md, "Older plugins"). Only then it calls
 * peat_plugin_register(), in which the plugin calls host->register_kernel() once per kernel.
 * Kernels receive peat_args and must fill every output element. A "cpu" kernel gets tensors in
 * host memory. A device kernel (backend "cuda", "hip" or "opencl") gets tensors whose data are
 * device buffers (a device pointer on CUDA/HIP, a cl_mem on OpenCL) and, in a->dev, the stream or
 * queue to launch on: PEAT stages the inputs to the device, times the kernel with the backend's
 * events, and reads the outputs back. Descriptor strings must live as long as the library.
 *
 * This header alone is enough to write a plugin. A plugin may also include "peat/peat.h" and
 * call the host API (peat_tensor_numel, peat_error_set, ...): the peat executable exports it.
 *
 * The version changes whenever a type below changes layout or meaning. See docs/plugin-abi.md. */
#ifndef PEAT_PLUGIN_H
#define PEAT_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* PEAT's version: defined here only (CMakeLists.txt reads its project version from this line). */
#define PEAT_VERSION_STRING "0.1.0"

/* Marks the host API (the headers of include/peat): PEAT builds with -fvisibility=hidden, and the
 * peat executable (and a shared libpeat) export these declarations alone. A plugin built with
 * -fvisibility=hidden marks its two entry points PEAT_API too (they are declared below). */
#if defined(__GNUC__) || defined(__clang__)
#define PEAT_API __attribute__((visibility("default")))
#else
#define PEAT_API
#endif

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

typedef enum peat_dtype {
    PEAT_DTYPE_F64 = 0,
    PEAT_DTYPE_F32,
    PEAT_DTYPE_BF16,
    PEAT_DTYPE_F16,
    PEAT_DTYPE_I32,
    PEAT_DTYPE_COUNT
} peat_dtype;

#define PEAT_MAX_DIMS 4

typedef struct peat_tensor {
    peat_dtype dtype;
    int ndim;
    int64_t shape[PEAT_MAX_DIMS];
    void *data; /* host memory, or a device buffer for a device kernel */
} peat_tensor;

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
    /* i: B, H, T, D, causal, Hkv ; f: scale ; in: Q [B,H,T,D], K, V [B,Hkv,T,D] ;
     * out: O [B,H,T,D], L [B,H,T] (row logsumexp of scale*QK^T after the causal mask).
     * ABI 5: Hkv K/V heads (grouped-query attention; 0 = H), query head h reads K/V head
     * h / (H / Hkv); kernels built for ABI 4 or older see only Hkv = 0 */
    PEAT_OP_ATTENTION,
    /* same i, f ; in: Q, K, V, O, L, dO ; out: dQ, dK, dV (dK, dV [B,Hkv,T,D]: each K/V head's
     * gradient sums over its group's query heads) */
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
    /* i: n, nesterov (0/1) ; f: lr, momentum, weight_decay ; in: param, grad, mom ;
     * out: param', mom' (mom' = momentum*mom + grad + wd*param ; param' = param - lr*mom', with
     * nesterov param - lr*((grad + wd*param) + momentum*mom')) ; may alias */
    PEAT_OP_SGD,
    /* i: R, C, mode (0 sum, 1 mean) ; in: X [R,C] ; out: Y [R] (reduce each row) */
    PEAT_OP_REDUCE,
    /* ABI 5. i: R, C ; f: eps ; in: X [R,C], gamma [C] ;
     * out: Y [R,C] = X rstd gamma, rstd [R] = 1/sqrt(mean over the row of X^2 + eps) */
    PEAT_OP_RMSNORM,
    /* i: R, C ; f: eps ; in: X, gamma, rstd, dY ; out: dX [R,C], dgamma [C]
     * (g = dY gamma: dX = rstd (g - X rstd^2 mean_C(g X)), dgamma = sum over rows of dY X rstd) */
    PEAT_OP_RMSNORM_BWD,
    /* ABI 5. i: n ; in: X ; out: Y = X sigmoid(X) (SiLU, swish) */
    PEAT_OP_SILU,
    /* i: n ; in: X, dY ; out: dX = dY s (1 + X (1 - s)), s = sigmoid(X) */
    PEAT_OP_SILU_BWD,
    /* i: n ; in: G (gate), U (up) ; out: Y = silu(G) U (the SwiGLU MLP's product) */
    PEAT_OP_SWIGLU,
    /* i: n ; in: G, U, dY ; out: dG = dY U silu'(G), dU = dY silu(G) */
    PEAT_OP_SWIGLU_BWD,
    /* i: B, H, T, D (even), layout (0: interleaved pairs (x[2j], x[2j+1]), as Meta's LLaMA;
     * 1: half-split pairs (x[j], x[j + D/2]), as Hugging Face's rotate_half), pos0 (the first
     * row's position) ; f: base (theta, 10000) ; in: X [B,H,T,D] ; out: Y, each pair rotated by
     * the angle (pos0 + t) base^(-2j/D) (rotary position embedding) */
    PEAT_OP_ROPE,
    /* same i, f ; in: dY ; out: dX, each pair rotated back by the same angle */
    PEAT_OP_ROPE_BWD,
    /* i: N, C, S (spatial size, H*W) ; f: eps, momentum ; in: X [N,C,S], gamma [C], beta [C],
     * running_mean [C], running_var [C] ; out: Y [N,C,S], mean [C], rstd [C] (batch statistics
     * over N and S, biased variance), running_mean' = (1 - momentum) running_mean + momentum
     * mean, running_var' likewise with the unbiased variance (training mode, as PyTorch) */
    PEAT_OP_BATCHNORM,
    /* same i, f ; in: X, gamma, mean, rstd, dY ; out: dX [N,C,S], dgamma [C], dbeta [C] */
    PEAT_OP_BATCHNORM_BWD,
    /* i: N, C, H, W, K (window K x K), stride, pad ; in: X [N,C,H,W] ;
     * out: Y [N,C,OH,OW], OH = (H + 2 pad - K) / stride + 1, the window's max (padding never
     * wins) */
    PEAT_OP_MAXPOOL2D,
    /* same i ; in: X, dY ; out: dX (each dY to its window's first maximum, summed where windows
     * overlap) */
    PEAT_OP_MAXPOOL2D_BWD,
    /* same i ; in: X ; out: Y, the window's mean over K x K (padding counted as zeros, PyTorch's
     * count_include_pad) */
    PEAT_OP_AVGPOOL2D,
    /* same i ; in: dY ; out: dX [N,C,H,W] (each dY / K^2 to its window's elements, summed) */
    PEAT_OP_AVGPOOL2D_BWD,
    /* ABI 6. i: transA, transB, M, N, K, batch, fmtA, fmtB (PEAT_FP8_E4M3 or PEAT_FP8_E5M2) ;
     * f: scale_a, beta, scale_b ; in: A and B laid out as GEMM's, their values fp8 values of
     * fmtA and fmtB held in F32 (the per-tensor scales kept apart), C [batch,M,N] when beta != 0 ;
     * out: D [batch,M,N] = scale_a scale_b op(A)op(B) + beta C, accumulated in fp32 (a product of
     * two fp8 values is exact in fp32). Forward and backward GEMMs (e4m3 activations and
     * weights, e5m2 gradients) are all this op. */
    PEAT_OP_GEMM_FP8,
    PEAT_OP_COUNT
} peat_op_kind;

/* fp8 formats (OCP 8-bit floating point): e4m3 (4 exponent bits, 3 mantissa bits, bias 7, no
 * infinities, largest 448) and e5m2 (5 and 2, bias 15, IEEE-like, largest finite 57344). */
enum { PEAT_FP8_E4M3 = 0, PEAT_FP8_E5M2 = 1 };

#define PEAT_PARAM_I 12
#define PEAT_PARAM_F 8
typedef struct peat_op_params {
    int64_t i[PEAT_PARAM_I];
    double f[PEAT_PARAM_F];
} peat_op_params;

#define PEAT_MAX_IO 8

/* Where a device kernel runs: handed to it in peat_args.dev (NULL for "cpu" kernels). Work must be
 * enqueued on `queue` (asynchronously is fine: PEAT waits on the queue after the kernel returns).
 */
typedef struct peat_device {
    const char *backend; /* "cuda", "hip", "opencl" */
    int index;           /* device ordinal within the backend */
    void *queue;         /* cudaStream_t, hipStream_t or cl_command_queue to launch on */
    void *context;       /* cl_context on OpenCL; NULL on CUDA/HIP */
    void *device;        /* cl_device_id on OpenCL; NULL on CUDA/HIP */
} peat_device;           /* an OpenCL kernel builds its program with peat_plugin_host.cl_program */

/* One invocation: op, params, inputs, outputs (and, for device kernels, the device). */
typedef struct peat_args {
    peat_op_kind op;
    peat_op_params p;
    int n_in, n_out;
    const peat_tensor *in[PEAT_MAX_IO];
    peat_tensor *out[PEAT_MAX_IO];
    const peat_device *dev; /* set by PEAT for device kernels; NULL for "cpu" kernels */
} peat_args;

typedef enum peat_kernel_role {
    PEAT_ROLE_EXACT = 0, /* fp64 accumulation, the reference errors are measured against */
    PEAT_ROLE_GOLDEN,    /* trusted working-precision kernel */
    PEAT_ROLE_CANDIDATE  /* under validation */
} peat_kernel_role;

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
    const char *backend;  /* "cpu", "cuda", "hip", "opencl" (NULL = "cpu") */
    peat_dtype in_dtype;  /* precision the kernel reads its inputs in (F32 storage, may round) */
    peat_dtype out_dtype; /* precision of its outputs (F64 for exact) */
    peat_dtype acc_dtype; /* accumulation precision */
    peat_kernel_config cfg;
    peat_kernel_fn fn;
    const char *desc; /* one line for `peat list` */
    void *user;       /* kernel-private data (plugins) */
    unsigned flags;   /* PEAT_KERNEL_* bits (ABI 3; 0 for plugins built against ABI 2) */
} peat_kernel;

/* The kernel may be called from several threads at once (it keeps no state between calls, or
 * guards what it keeps). Without it (the default) PEAT never runs two calls of the kernel at the
 * same time: its calls are serialized, in whatever thread they come from (docs/plugin-abi.md). */
#define PEAT_KERNEL_REENTRANT 1u

/* 2: peat_args.dev and device kernels (backend cuda, hip, opencl get device buffers)
 * 3: peat_kernel.flags (PEAT_KERNEL_REENTRANT); plugins built for 2 still load (flags 0)
 * 4: PEAT's own fields left peat_tensor (owns_data) and peat_device (cl_program, host); OpenCL
 *    programs are built through peat_plugin_host.cl_program; plugins built for 2 and 3 still
 *    load (docs/plugin-abi.md: what they read is where it was)
 * 5: op kinds appended after PEAT_OP_REDUCE (rmsnorm, silu, swiglu, rope and their backward ops);
 * no layout changed, so plugins built for 2..4 load as before (their kernels name only the older
 * ops) */
/* 6: op kind PEAT_OP_GEMM_FP8 appended (and the fp8 format numbers); no layout changed, plugins
 * built for 2..5 load as before */
#define PEAT_PLUGIN_ABI_VERSION 6
#define PEAT_PLUGIN_ABI_OLDEST  2 /* the oldest plugin ABI this host still loads */

typedef struct peat_plugin_host {
    int abi_version; /* PEAT_PLUGIN_ABI_VERSION of the host */
    const char *peat_version;
    /* Registers one kernel; role is forced to PEAT_ROLE_CANDIDATE. */
    peat_status (*register_kernel)(const peat_kernel *k);
    /* Host helpers so that plugins need not link libpeat. */
    const char *(*op_name)(peat_op_kind op);
    peat_status (*error)(peat_status code, const char *file, int line, const char *fmt, ...);
    /* ABI 4. OpenCL only (PEAT_ERR_UNSUPPORTED elsewhere): the cl_program built from `source`
     * with `options` for the device a kernel was handed (peat_args.dev), compiled once per
     * process and cached by source text; the build log is in the error message when
     * compilation fails. The table lives as long as the process: a plugin may keep `host`. */
    peat_status (*cl_program)(const peat_device *dev, const char *source, const char *options,
                              void **program);
} peat_plugin_host;

typedef int (*peat_plugin_abi_version_fn)(void);
typedef int (*peat_plugin_register_fn)(const peat_plugin_host *host);
/* The plugin's two entry points (defined by the plugin; declared so that they are exported). */
PEAT_API int peat_plugin_abi_version(void);
PEAT_API int peat_plugin_register(const peat_plugin_host *host);

#ifdef __cplusplus
}
#endif
#endif
