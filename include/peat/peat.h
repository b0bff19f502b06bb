/* peat.h: the host API of PEAT (errors, dtypes, tensors, rng, op table, registry, execution); the
 * types it works on are the plugin ABI in peat/plugin.h. */
#ifndef PEAT_PEAT_H
#define PEAT_PEAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "peat/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status: one enum, one error path ------------------------------------------------------ */

PEAT_API const char *peat_status_str(peat_status s);

/* The single place errors are reported: records "file:line: message" as the last error of this
 * thread and returns code. Put a breakpoint here to catch every failure. */
PEAT_API peat_status peat_error_set(peat_status code, const char *file, int line, const char *fmt,
                                    ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
#define PEAT_ERROR(code, ...) peat_error_set((code), __FILE__, __LINE__, __VA_ARGS__)
/* The message of the last error (without location), "" if none. */
PEAT_API const char *peat_error_last(void);
/* "file:line" where the last error was raised. */
PEAT_API const char *peat_error_where(void);
PEAT_API void peat_error_clear(void);

/* Sets up the core once (thread-safe, idempotent): GSL errors then go through peat_error_set
 * instead of GSL's default handler, which aborts the process. The registry and the rng call it;
 * a program that calls GSL before either may call it first. */
PEAT_API void peat_core_init(void);

#define PEAT_TRY(expr)                                                                             \
    do {                                                                                           \
        peat_status peat_try_s_ = (expr);                                                          \
        if (peat_try_s_ != PEAT_OK) return peat_try_s_;                                            \
    } while (0)

/* ---- dtypes ---------------------------------------------------------------------------------- */

PEAT_API size_t peat_dtype_size(peat_dtype t);
PEAT_API const char *peat_dtype_name(peat_dtype t);
/* Parses "f64", "fp32", "bf16", "f16"/"fp16", "i32"; PEAT_ERR_NOTFOUND otherwise. */
PEAT_API peat_status peat_dtype_parse(const char *s, peat_dtype *out);

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
PEAT_API uint16_t peat_f32_to_bf16(float x);
PEAT_API float peat_bf16_to_f32(uint16_t h);
PEAT_API uint16_t peat_f32_to_f16(float x);
PEAT_API float peat_f16_to_f32(uint16_t h);
/* x rounded to the format and back: the value a kernel storing in that format sees. */
PEAT_API float peat_round_bf16(float x);
PEAT_API float peat_round_f16(float x);
/* x rounded to nearest even to fp8 format fmt (PEAT_FP8_E4M3 or PEAT_FP8_E5M2), subnormals
 * kept, saturated to +-the largest finite value (as fp8 casts with saturation do), NaN kept; and
 * that largest finite value (448, 57344). */
PEAT_API float peat_round_fp8(float x, int fmt);
PEAT_API float peat_fp8_max(int fmt);
/* Round-toward-zero variants (truncation). */
PEAT_API uint16_t peat_f32_to_bf16_rtz(float x);
/* Unit roundoff u of a format (2^-p for p significand bits including the implicit one). */
PEAT_API double peat_dtype_unit_roundoff(peat_dtype t);
/* Significand bits including the implicit bit (53, 24, 8, 11). */
PEAT_API int peat_dtype_mantissa_bits(peat_dtype t);

/* ---- tensors: host memory, row-major, contiguous --------------------------------------------- */

/* Allocates a zero-filled tensor; absurd shapes (negative, overflow, > 2^34 elements) are refused.
 */
PEAT_API peat_status peat_tensor_alloc(peat_dtype t, int ndim, const int64_t *shape,
                                       peat_tensor **out);
/* Wraps caller memory (not freed by peat_tensor_free). */
PEAT_API peat_status peat_tensor_wrap(peat_dtype t, int ndim, const int64_t *shape, void *data,
                                      peat_tensor **out);
PEAT_API peat_status peat_tensor_clone(const peat_tensor *src, peat_tensor **out);
/* Frees a tensor made by peat_tensor_alloc*, _wrap or _clone (and its data unless wrapped); never
 * one the caller laid out itself. */
PEAT_API void peat_tensor_free(peat_tensor *t);
PEAT_API int64_t peat_tensor_numel(const peat_tensor *t);
PEAT_API size_t peat_tensor_nbytes(const peat_tensor *t);
/* Shape helpers for call sites: peat_tensor_alloc2(F32, rows, cols, &t). */
PEAT_API peat_status peat_tensor_alloc1(peat_dtype t, int64_t n0, peat_tensor **out);
PEAT_API peat_status peat_tensor_alloc2(peat_dtype t, int64_t n0, int64_t n1, peat_tensor **out);
PEAT_API peat_status peat_tensor_alloc3(peat_dtype t, int64_t n0, int64_t n1, int64_t n2,
                                        peat_tensor **out);
PEAT_API peat_status peat_tensor_alloc4(peat_dtype t, int64_t n0, int64_t n1, int64_t n2,
                                        int64_t n3, peat_tensor **out);
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
PEAT_API double peat_tensor_get(const peat_tensor *t, int64_t i);
PEAT_API void peat_tensor_set(peat_tensor *t, int64_t i, double v);

/* ---- rng: seeded (xoshiro256** as a GSL generator); seeds are explicit and recorded -----------
 */

typedef struct peat_rng peat_rng_t;
PEAT_API peat_rng_t *peat_rng_new(uint64_t seed);
PEAT_API void peat_rng_free(peat_rng_t *r);
PEAT_API uint64_t peat_rng_seed(const peat_rng_t *r);
PEAT_API double peat_rng_uniform(peat_rng_t *r);                /* [0,1) */
PEAT_API double peat_rng_gaussian(peat_rng_t *r, double sigma); /* N(0, sigma^2) */
PEAT_API uint64_t peat_rng_int(peat_rng_t *r, uint64_t n);      /* [0,n) */
PEAT_API void peat_rng_fill_uniform(peat_rng_t *r, peat_tensor *t, double lo, double hi);
PEAT_API void peat_rng_fill_gaussian(peat_rng_t *r, peat_tensor *t, double sigma);
/* One splitmix64 step: advances *x by the golden gamma and returns its mixed value (a stateless
 * stream of well-spread 64-bit draws; xoshiro's seeding). */
PEAT_API uint64_t peat_splitmix64(uint64_t *x);
/* Derives an independent seed for a named sub-stream (flows, data, injectors). */
PEAT_API uint64_t peat_seed_derive(uint64_t seed, const char *stream);

/* ---- ops ------------------------------------------------------------------------------------- */

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

/* A set of op kinds: bit PEAT_OP_BIT(op) for op (64 op kinds at most). */
typedef uint64_t peat_op_mask;
#define PEAT_OP_BIT(op) ((uint64_t)1 << (op))

PEAT_API const peat_op_info *peat_op_info_get(peat_op_kind op);
PEAT_API peat_status peat_op_parse(const char *name, peat_op_kind *out);
PEAT_API const char *peat_op_name(peat_op_kind op);
/* The aten ops (comma separated, "" for none) the PyTorch bridge maps to op; NULL out of range. */
PEAT_API const char *peat_op_aten(peat_op_kind op);
/* Validates a call against its op (count, dtypes, shapes). */
PEAT_API peat_status peat_op_check(const peat_args *a);
/* Allocates outputs of the right shape with the given float dtype (F32 for golden/candidate,
 * F64 for exact). */
PEAT_API peat_status peat_op_alloc_outputs(peat_args *a, peat_dtype out_dtype);
PEAT_API void peat_args_free_outputs(peat_args *a);

/* ---- kernels and the registry ---------------------------------------------------------------- */

PEAT_API const char *peat_role_name(peat_kernel_role r);

/* Registers a kernel (the descriptor is copied; strings must outlive the registry). A name may
 * exist once per backend (gemm_new on cpu and on opencl); a (name, backend) pair registered twice
 * is refused. */
PEAT_API peat_status peat_registry_add(const peat_kernel *k);
/* The first kernel of that name (built-in CPU kernels register first). */
PEAT_API const peat_kernel *peat_registry_find(const char *name);
/* The kernel of that name on that backend (NULL or "auto": peat_registry_find). */
PEAT_API const peat_kernel *peat_registry_find_on(const char *name, const char *backend);
PEAT_API const peat_kernel *peat_registry_role(peat_op_kind op, peat_kernel_role role,
                                               const char *backend);
PEAT_API int peat_registry_count(void);
PEAT_API const peat_kernel *peat_registry_at(int i);
/* Runs kernel k on host tensors a: validates the call first, then calls the kernel (a device
 * kernel through its backend: inputs staged to the device, outputs read back). */
PEAT_API peat_status peat_kernel_run(const peat_kernel *k, const peat_args *a);
/* Seconds the last device kernel run by this thread through peat_kernel_run took, measured with
 * the backend's events (the kernel alone: not the staging copies); 0 before any. */
PEAT_API double peat_kernel_last_device_seconds(void);

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

PEAT_API peat_status peat_exec_alloc(const char *flow_name, uint64_t seed, peat_exec_t **out);
PEAT_API void peat_exec_free(peat_exec_t *ex);
/* Runs every op whose kernel is not set through the golden kernel of `backend` ("cpu" by
 * default; "opencl", "cuda", "hip": the whole flow on that device, tensors staged per call).
 * Refused when the backend has no golden GEMM; an op without a golden on the backend fails at
 * its first call (a campaign checks its flow's ops before it starts). */
PEAT_API peat_status peat_exec_set_backend(peat_exec_t *ex, const char *backend);
/* Replaces the kernel used for op (default: golden). NULL restores golden. */
PEAT_API peat_status peat_exec_set_kernel(peat_exec_t *ex, peat_op_kind op, const peat_kernel *k);
PEAT_API const peat_kernel *peat_exec_kernel(const peat_exec_t *ex, peat_op_kind op);
PEAT_API peat_status peat_exec_add_hook(peat_exec_t *ex, peat_hook_fn fn, void *user);
/* Removes every hook (an exec that outlives its profilers). */
PEAT_API void peat_exec_clear_hooks(peat_exec_t *ex);
PEAT_API void peat_exec_set_iter(peat_exec_t *ex, int64_t iter);
PEAT_API int64_t peat_exec_iter(const peat_exec_t *ex);
PEAT_API uint64_t peat_exec_seed(const peat_exec_t *ex);
PEAT_API int64_t peat_exec_calls(const peat_exec_t *ex);
/* Runs one op call through the active kernel, with hooks. */
PEAT_API peat_status peat_exec_op(peat_exec_t *ex, const char *layer, peat_phase phase,
                                  peat_args *a);

/* Convenience for call sites: fills a peat_args. */
PEAT_API peat_args peat_args_make(peat_op_kind op, const peat_op_params *p, int n_in,
                                  const peat_tensor *const *in, int n_out, peat_tensor *const *out);

/* Host side: loads a plugin and registers its kernels; returns the number registered. The plugin
 * is first loaded and registered in a child process, so that one that crashes or exits there is
 * an error (PEAT_ERR_ABI) instead of the end of the caller. */
PEAT_API peat_status peat_plugin_load(const char *path, int *n_registered);

#ifdef __cplusplus
}
#endif
#endif
