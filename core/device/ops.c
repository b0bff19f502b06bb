/* ops.c: the host side of PEAT's device kernels (core/device/kernels.cl): for every op kind a
 * golden that launches the reference kernel (or the vendor BLAS for GEMM), and the device
 * candidates; written once against peat_backend_launch, so CUDA, HIP and OpenCL share it. */
#include "core/backend_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Launch arguments: a long, a float, a tensor's buffer (the address of its data field). */
#define KL(v)      ((peat_karg){sizeof(int64_t), &(int64_t){(int64_t)(v)}})
#define KF(v)      ((peat_karg){sizeof(float), &(float){(float)(v)}})
#define KB(t)      ((peat_karg){sizeof(void *), &(t)->data})
#define NARGS(arr) ((int)(sizeof(arr) / sizeof((arr)[0])))

enum { GROUP = 64 };

static peat_backend_t dev_of(const peat_args *a)
{
    return peat_device_backend(a->dev);
}

/* One work-item per element of a range of n. */
static peat_status launch1(const peat_args *a, const char *kernel, int64_t n, int nargs,
                           const peat_karg *args)
{
    if (n <= 0) return PEAT_OK;
    peat_launch l = {kernel, 1, {(size_t)n, 1, 1}, {GROUP, 1, 1}, nargs, args};
    return peat_backend_launch(dev_of(a), &l);
}

/* ---- GEMM ---- */

/* C's buffer when beta != 0; D's otherwise (never read then: has_c is 0). */
static peat_tensor *gemm_c(const peat_args *a)
{
    return a->p.f[1] != 0.0 ? (peat_tensor *)a->in[2] : a->out[0];
}

static peat_status gemm_launch(const peat_args *a, const char *kernel, size_t tile)
{
    const int64_t *i = a->p.i;
    int64_t M = i[2], N = i[3], Bn = i[5];
    peat_karg args[] = {KL(i[0]),     KL(i[1]),      KL(M),         KL(N),
                        KL(i[4]),     KF(a->p.f[0]), KF(a->p.f[1]), KL(a->p.f[1] != 0.0),
                        KB(a->in[0]), KB(a->in[1]),  KB(gemm_c(a)), KB(a->out[0])};
    size_t t = tile ? tile : 8;
    peat_launch l = {kernel, 3, {(size_t)N, (size_t)M, (size_t)Bn}, {t, t, 1}, NARGS(args), args};
    return peat_backend_launch(dev_of(a), &l);
}

static peat_status gemm_golden(const peat_args *a, const peat_kernel *self)
{
    peat_backend_t b = dev_of(a);
    if (b->iface->gemm) return b->iface->gemm(b, a);
    return gemm_launch(a, "pk_gemm_ref", 0);
}

static peat_status gemm_new(const peat_args *a, const peat_kernel *self)
{
    return gemm_launch(a, "pk_gemm_tiled", 16);
}

/* ---- conv2d ---- */

static peat_status conv_launch(const peat_args *a, const char *kernel, int64_t n)
{
    const int64_t *i = a->p.i;
    int64_t OH = (i[2] + 2 * i[8] - i[5]) / i[7] + 1, OW = (i[3] + 2 * i[8] - i[6]) / i[7] + 1;
    peat_karg args[] = {KL(i[0]), KL(i[1]),     KL(i[2]),     KL(i[3]),     KL(i[4]),
                        KL(i[5]), KL(i[6]),     KL(i[7]),     KL(i[8]),     KL(OH),
                        KL(OW),   KB(a->in[0]), KB(a->in[1]), KB(a->out[0])};
    return launch1(a, kernel, n, NARGS(args), args);
}

static peat_status conv2d(const peat_args *a, const peat_kernel *self)
{
    return conv_launch(a, "pk_conv2d", peat_tensor_numel(a->out[0]));
}
static peat_status conv2d_bwd_data(const peat_args *a, const peat_kernel *self)
{
    return conv_launch(a, "pk_conv2d_bwd_data", peat_tensor_numel(a->out[0]));
}
static peat_status conv2d_bwd_filter(const peat_args *a, const peat_kernel *self)
{
    return conv_launch(a, "pk_conv2d_bwd_filter", peat_tensor_numel(a->out[0]));
}

/* ---- bias, activations ---- */

static peat_status bias_add(const peat_args *a, const peat_kernel *self)
{
    const int64_t *i = a->p.i;
    peat_karg args[] = {KL(i[0]), KL(i[1]), KL(i[2]), KB(a->in[0]), KB(a->in[1]), KB(a->out[0])};
    return launch1(a, "pk_bias_add", i[0] * i[1] * i[2], NARGS(args), args);
}
static peat_status bias_add_bwd(const peat_args *a, const peat_kernel *self)
{
    const int64_t *i = a->p.i;
    peat_karg args[] = {KL(i[0]), KL(i[1]), KL(i[2]), KB(a->in[0]), KB(a->out[0])};
    return launch1(a, "pk_bias_add_bwd", i[1], NARGS(args), args);
}

/* Elementwise ops of one or two inputs: n, inputs..., output. */
static peat_status eltwise(const peat_args *a, const char *kernel)
{
    peat_karg args[] = {KL(a->p.i[0]), KB(a->in[0]), KB(a->in[a->n_in - 1]), KB(a->out[0])};
    if (a->n_in == 1) args[2] = args[3];
    return launch1(a, kernel, a->p.i[0], a->n_in + 2, args);
}
static peat_status relu(const peat_args *a, const peat_kernel *self)
{
    return eltwise(a, "pk_relu");
}
static peat_status relu_bwd(const peat_args *a, const peat_kernel *self)
{
    return eltwise(a, "pk_relu_bwd");
}
static peat_status gelu(const peat_args *a, const peat_kernel *self)
{
    return eltwise(a, "pk_gelu");
}
static peat_status gelu_bwd(const peat_args *a, const peat_kernel *self)
{
    return eltwise(a, "pk_gelu_bwd");
}

/* ---- row ops: R, C [, eps], inputs..., outputs...; one work-item per row unless `n` says ---- */

static peat_status rows(const peat_args *a, const char *kernel, int with_eps, int64_t n)
{
    peat_karg args[3 + 2 * PEAT_MAX_IO] = {KL(a->p.i[0]), KL(a->p.i[1]), KF(a->p.f[0])};
    int k = with_eps ? 3 : 2; /* the values live as long as this block: no literal in an if */
    for (int j = 0; j < a->n_in; j++) args[k++] = KB(a->in[j]);
    for (int j = 0; j < a->n_out; j++) args[k++] = KB(a->out[j]);
    return launch1(a, kernel, n ? n : a->p.i[0], k, args);
}
static peat_status softmax(const peat_args *a, const peat_kernel *self)
{
    return rows(a, "pk_softmax", 0, 0);
}
static peat_status softmax_online(const peat_args *a, const peat_kernel *self)
{
    return rows(a, "pk_softmax_online", 0, 0);
}
static peat_status softmax_bwd(const peat_args *a, const peat_kernel *self)
{
    return rows(a, "pk_softmax_bwd", 0, 0);
}
static peat_status layernorm(const peat_args *a, const peat_kernel *self)
{
    return rows(a, "pk_layernorm", 1, 0);
}
static peat_status layernorm_welford(const peat_args *a, const peat_kernel *self)
{
    return rows(a, "pk_layernorm_welford", 1, 0);
}
static peat_status cross_entropy(const peat_args *a, const peat_kernel *self)
{
    return rows(a, "pk_cross_entropy", 0, 0);
}
static peat_status cross_entropy_bwd(const peat_args *a, const peat_kernel *self)
{
    return rows(a, "pk_cross_entropy_bwd", 0, 0);
}

/* in: X, gamma, mean, rstd, dY ; out: dX, dgamma, dbeta: one kernel per row, one per column. */
static peat_status layernorm_bwd(const peat_args *a, const peat_kernel *self)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    peat_karg dx[] = {KL(R),        KL(C),        KB(a->in[0]), KB(a->in[1]),
                      KB(a->in[2]), KB(a->in[3]), KB(a->in[4]), KB(a->out[0])};
    PEAT_TRY(launch1(a, "pk_layernorm_bwd_dx", R, NARGS(dx), dx));
    peat_karg dg[] = {KL(R),        KL(C),        KB(a->in[0]),  KB(a->in[2]),
                      KB(a->in[3]), KB(a->in[4]), KB(a->out[1]), KB(a->out[2])};
    return launch1(a, "pk_layernorm_bwd_dg", C, NARGS(dg), dg);
}

static peat_status reduce(const peat_args *a, const peat_kernel *self)
{
    const int64_t *i = a->p.i;
    peat_karg args[] = {KL(i[0]), KL(i[1]), KL(i[2]), KB(a->in[0]), KB(a->out[0])};
    return launch1(a, "pk_reduce", i[0], NARGS(args), args);
}

/* ---- attention: i = B, H, T, D, causal ; f = scale ---- */

enum { FLASH_MAX_D = 256 }; /* pk_attention_flash keeps one output row in registers */

static peat_status attention_launch(const peat_args *a, const char *kernel, int64_t n, int first,
                                    int count)
{
    const int64_t *i = a->p.i;
    int64_t Hkv = i[5] > 0 ? i[5] : i[1]; /* grouped-query attention: Hkv K/V heads */
    peat_karg args[7 + 2 * PEAT_MAX_IO] = {KL(i[0] * i[1]), KL(i[1]), KL(Hkv),      KL(i[2]),
                                           KL(i[3]),        KL(i[4]), KF(a->p.f[0])};
    int k = 7;
    for (int j = 0; j < a->n_in; j++) args[k++] = KB(a->in[j]);
    for (int j = first; j < first + count; j++) args[k++] = KB(a->out[j]);
    return launch1(a, kernel, n, k, args);
}
static peat_status attention(const peat_args *a, const peat_kernel *self)
{
    return attention_launch(a, "pk_attention", a->p.i[0] * a->p.i[1] * a->p.i[2], 0, 2);
}
static peat_status attention_flash(const peat_args *a, const peat_kernel *self)
{
    if (a->p.i[3] > FLASH_MAX_D)
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "attention_flash: head dimension %lld > %d",
                          (long long)a->p.i[3], FLASH_MAX_D);
    return attention_launch(a, "pk_attention_flash", a->p.i[0] * a->p.i[1] * a->p.i[2], 0, 2);
}
static peat_status attention_bwd(const peat_args *a, const peat_kernel *self)
{
    const int64_t *i = a->p.i;
    int64_t Hkv = i[5] > 0 ? i[5] : i[1];
    PEAT_TRY(attention_launch(a, "pk_attention_bwd_dq", i[0] * i[1] * i[2] * i[3], 0, 1));
    return attention_launch(a, "pk_attention_bwd_dkv", i[0] * Hkv * i[2] * i[3], 1, 2);
}

/* ---- RMSNorm, SiLU, SwiGLU, RoPE ---- */

static peat_status rmsnorm(const peat_args *a, const peat_kernel *self)
{
    return rows(a, "pk_rmsnorm", 1, 0);
}
static peat_status rmsnorm_lanes(const peat_args *a, const peat_kernel *self)
{
    return rows(a, "pk_rmsnorm_lanes", 1, 0);
}
/* in: X, gamma, rstd, dY ; out: dX, dgamma: one kernel per row, one per column */
static peat_status rmsnorm_bwd(const peat_args *a, const peat_kernel *self)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    peat_karg dx[] = {KL(R),        KL(C),        KB(a->in[0]), KB(a->in[1]),
                      KB(a->in[2]), KB(a->in[3]), KB(a->out[0])};
    PEAT_TRY(launch1(a, "pk_rmsnorm_bwd_dx", R, NARGS(dx), dx));
    peat_karg dg[] = {KL(R), KL(C), KB(a->in[0]), KB(a->in[2]), KB(a->in[3]), KB(a->out[1])};
    return launch1(a, "pk_rmsnorm_bwd_dg", C, NARGS(dg), dg);
}
static peat_status silu(const peat_args *a, const peat_kernel *self)
{
    return eltwise(a, "pk_silu");
}
static peat_status silu_bwd(const peat_args *a, const peat_kernel *self)
{
    return eltwise(a, "pk_silu_bwd");
}
/* n, inputs..., outputs... */
static peat_status eltwise_n(const peat_args *a, const char *kernel)
{
    peat_karg args[1 + 2 * PEAT_MAX_IO] = {KL(a->p.i[0])};
    int k = 1;
    for (int j = 0; j < a->n_in; j++) args[k++] = KB(a->in[j]);
    for (int j = 0; j < a->n_out; j++) args[k++] = KB(a->out[j]);
    return launch1(a, kernel, a->p.i[0], k, args);
}
static peat_status swiglu(const peat_args *a, const peat_kernel *self)
{
    return eltwise_n(a, "pk_swiglu");
}
static peat_status swiglu_bwd(const peat_args *a, const peat_kernel *self)
{
    return eltwise_n(a, "pk_swiglu_bwd");
}
/* i = B H T D layout pos0 ; f = base: one work-item per rotated pair */
static peat_status rope(const peat_args *a, const peat_kernel *self)
{
    const int64_t *i = a->p.i;
    int64_t BHT = i[0] * i[1] * i[2];
    peat_karg args[] = {KL(BHT),
                        KL(i[2]),
                        KL(i[3]),
                        KL(i[4]),
                        KL(i[5]),
                        KF(a->p.f[0]),
                        KF(a->op == PEAT_OP_ROPE_BWD ? -1.0 : 1.0),
                        KB(a->in[0]),
                        KB(a->out[0])};
    return launch1(a, "pk_rope", BHT * (i[3] / 2), NARGS(args), args);
}

/* ---- batch norm: i = N C S ; f = eps momentum: one work-item per channel ---- */

static peat_status batchnorm_launch(const peat_args *a, const char *kernel)
{
    const int64_t *i = a->p.i;
    peat_karg args[5 + 2 * PEAT_MAX_IO] = {KL(i[0]), KL(i[1]), KL(i[2]), KF(a->p.f[0]),
                                           KF(a->p.f[1])};
    int k = 5;
    for (int j = 0; j < a->n_in; j++) args[k++] = KB(a->in[j]);
    for (int j = 0; j < a->n_out; j++) args[k++] = KB(a->out[j]);
    return launch1(a, kernel, i[1], k, args);
}
static peat_status batchnorm(const peat_args *a, const peat_kernel *self)
{
    return batchnorm_launch(a, "pk_batchnorm");
}
static peat_status batchnorm_welford(const peat_args *a, const peat_kernel *self)
{
    return batchnorm_launch(a, "pk_batchnorm_welford");
}
static peat_status batchnorm_bwd(const peat_args *a, const peat_kernel *self)
{
    const int64_t *i = a->p.i;
    peat_karg args[3 + 2 * PEAT_MAX_IO] = {KL(i[0]), KL(i[1]), KL(i[2])};
    int k = 3;
    for (int j = 0; j < a->n_in; j++) args[k++] = KB(a->in[j]);
    for (int j = 0; j < a->n_out; j++) args[k++] = KB(a->out[j]);
    return launch1(a, "pk_batchnorm_bwd", i[1], k, args);
}

/* ---- pooling: i = N C H W K stride pad; one work-item per output (forward) or input pixel
 * (backward, gathered: no atomics) ---- */

static peat_status pool(const peat_args *a, const char *kernel, int bwd, int is_max)
{
    const int64_t *i = a->p.i;
    int64_t OH = (i[2] + 2 * i[6] - i[4]) / i[5] + 1, OW = (i[3] + 2 * i[6] - i[4]) / i[5] + 1;
    /* is_max (the backward's only), then the geometry: the literals live as long as this block */
    peat_karg geo[] = {KL(is_max), KL(i[0] * i[1]), KL(i[2]), KL(i[3]), KL(i[4]),
                       KL(i[5]),   KL(i[6]),        KL(OH),   KL(OW)};
    peat_karg args[NARGS(geo) + 3];
    int k = 0;
    for (int j = bwd ? 0 : 1; j < NARGS(geo); j++) args[k++] = geo[j];
    /* the backward reads X and dY (average pooling: dY in X's place too, never read) */
    args[k++] = KB(a->in[0]);
    if (bwd) args[k++] = KB(a->in[a->n_in - 1]);
    args[k++] = KB(a->out[0]);
    return launch1(a, kernel, i[0] * i[1] * (bwd ? i[2] * i[3] : OH * OW), k, args);
}
static peat_status maxpool2d(const peat_args *a, const peat_kernel *self)
{
    return pool(a, "pk_maxpool2d", 0, 1);
}
static peat_status maxpool2d_bwd(const peat_args *a, const peat_kernel *self)
{
    return pool(a, "pk_pool2d_bwd", 1, 1);
}
static peat_status avgpool2d(const peat_args *a, const peat_kernel *self)
{
    return pool(a, "pk_avgpool2d", 0, 0);
}
static peat_status avgpool2d_bwd(const peat_args *a, const peat_kernel *self)
{
    return pool(a, "pk_pool2d_bwd", 1, 0);
}

/* ---- the fp8 GEMM: its fp8 values are f32 values; the two scales one alpha, applied to the
 * fp32 sums as the CPU golden does ---- */

static peat_status gemm_fp8(const peat_args *a, const peat_kernel *self)
{
    peat_args b = *a;
    b.op = PEAT_OP_GEMM;
    b.p.f[0] = a->p.f[0] * a->p.f[2];
    b.p.f[2] = 0.0;
    return gemm_golden(&b, self);
}

/* ---- embedding ---- */

static peat_status embedding(const peat_args *a, const peat_kernel *self)
{
    const int64_t *i = a->p.i;
    peat_karg args[] = {KL(i[0]), KL(i[1]), KL(i[2]), KB(a->in[0]), KB(a->in[1]), KB(a->out[0])};
    return launch1(a, "pk_embedding", i[0] * i[2], NARGS(args), args);
}
static peat_status embedding_bwd(const peat_args *a, const peat_kernel *self)
{
    const int64_t *i = a->p.i;
    peat_karg args[] = {KL(i[0]), KL(i[1]), KL(i[2]), KB(a->in[0]), KB(a->in[1]), KB(a->out[0])};
    return launch1(a, "pk_embedding_bwd", i[1] * i[2], NARGS(args), args);
}

/* ---- optimizers: per-call scalars formed in double and rounded once, as the CPU golden ---- */

static peat_status adamw(const peat_args *a, const peat_kernel *self)
{
    const double *f = a->p.f;
    double t = (double)a->p.i[1];
    peat_karg args[] = {KL(a->p.i[0]),
                        KF(f[0]),
                        KF(f[1]),
                        KF(f[2]),
                        KF(f[3]),
                        KF(f[4]),
                        KF(1.0 - f[1]),
                        KF(1.0 - f[2]),
                        KF(1.0 - pow(f[1], t)),
                        KF(1.0 - pow(f[2], t)),
                        KB(a->in[0]),
                        KB(a->in[1]),
                        KB(a->in[2]),
                        KB(a->in[3]),
                        KB(a->out[0]),
                        KB(a->out[1]),
                        KB(a->out[2])};
    return launch1(a, "pk_adamw", a->p.i[0], NARGS(args), args);
}
static peat_status sgd(const peat_args *a, const peat_kernel *self)
{
    const double *f = a->p.f;
    peat_karg args[] = {KL(a->p.i[0]), KL(a->p.i[1]), KF(f[0]),     KF(f[1]),      KF(f[2]),
                        KB(a->in[0]),  KB(a->in[1]),  KB(a->in[2]), KB(a->out[0]), KB(a->out[1])};
    return launch1(a, "pk_sgd", a->p.i[0], NARGS(args), args);
}

/* ---- registration ---- */

typedef struct {
    peat_op_kind op;
    peat_kernel_fn fn;
} golden_entry;

static const golden_entry goldens[] = {
    {PEAT_OP_GEMM, gemm_golden},
    {PEAT_OP_CONV2D, conv2d},
    {PEAT_OP_CONV2D_BWD_DATA, conv2d_bwd_data},
    {PEAT_OP_CONV2D_BWD_FILTER, conv2d_bwd_filter},
    {PEAT_OP_BIAS_ADD, bias_add},
    {PEAT_OP_BIAS_ADD_BWD, bias_add_bwd},
    {PEAT_OP_RELU, relu},
    {PEAT_OP_RELU_BWD, relu_bwd},
    {PEAT_OP_GELU, gelu},
    {PEAT_OP_GELU_BWD, gelu_bwd},
    {PEAT_OP_SOFTMAX, softmax},
    {PEAT_OP_SOFTMAX_BWD, softmax_bwd},
    {PEAT_OP_LAYERNORM, layernorm},
    {PEAT_OP_LAYERNORM_BWD, layernorm_bwd},
    {PEAT_OP_ATTENTION, attention},
    {PEAT_OP_ATTENTION_BWD, attention_bwd},
    {PEAT_OP_EMBEDDING, embedding},
    {PEAT_OP_EMBEDDING_BWD, embedding_bwd},
    {PEAT_OP_CROSS_ENTROPY, cross_entropy},
    {PEAT_OP_CROSS_ENTROPY_BWD, cross_entropy_bwd},
    {PEAT_OP_ADAMW, adamw},
    {PEAT_OP_SGD, sgd},
    {PEAT_OP_REDUCE, reduce},
    {PEAT_OP_RMSNORM, rmsnorm},
    {PEAT_OP_RMSNORM_BWD, rmsnorm_bwd},
    {PEAT_OP_SILU, silu},
    {PEAT_OP_SILU_BWD, silu_bwd},
    {PEAT_OP_SWIGLU, swiglu},
    {PEAT_OP_SWIGLU_BWD, swiglu_bwd},
    {PEAT_OP_ROPE, rope},
    {PEAT_OP_ROPE_BWD, rope},
    {PEAT_OP_BATCHNORM, batchnorm},
    {PEAT_OP_BATCHNORM_BWD, batchnorm_bwd},
    {PEAT_OP_MAXPOOL2D, maxpool2d},
    {PEAT_OP_MAXPOOL2D_BWD, maxpool2d_bwd},
    {PEAT_OP_AVGPOOL2D, avgpool2d},
    {PEAT_OP_AVGPOOL2D_BWD, avgpool2d_bwd},
    {PEAT_OP_GEMM_FP8, gemm_fp8},
};

/* Golden names are "<op>_golden", as on the CPU: the backend tells them apart. */
static char golden_names[PEAT_OP_COUNT][40];

static peat_kernel device_kernel(const char *backend, const char *name, peat_op_kind op,
                                 peat_kernel_role role, peat_kernel_fn fn, const char *desc)
{
    peat_kernel k;
    memset(&k, 0, sizeof k);
    k.name = name, k.op = op, k.role = role, k.backend = backend;
    k.in_dtype = k.out_dtype = k.acc_dtype = PEAT_DTYPE_F32;
    k.cfg.threads = GROUP;
    k.fn = fn, k.desc = desc;
    return k;
}

static peat_status register_candidates(const char *backend)
{
    peat_kernel c[] = {
        device_kernel(backend, "gemm_new", PEAT_OP_GEMM, PEAT_ROLE_CANDIDATE, gemm_new,
                      "device fp32 GEMM, 16x16 local/shared-memory tiles, k summed per tile"),
        device_kernel(backend, "softmax_online", PEAT_OP_SOFTMAX, PEAT_ROLE_CANDIDATE,
                      softmax_online, "device one-pass (online) softmax, running max rescale"),
        device_kernel(backend, "layernorm_welford", PEAT_OP_LAYERNORM, PEAT_ROLE_CANDIDATE,
                      layernorm_welford, "device layernorm with Welford's one-pass variance"),
        device_kernel(backend, "attention_flash", PEAT_OP_ATTENTION, PEAT_ROLE_CANDIDATE,
                      attention_flash, "device flash attention: one pass, running max and sum"),
        device_kernel(backend, "rmsnorm_lanes", PEAT_OP_RMSNORM, PEAT_ROLE_CANDIDATE, rmsnorm_lanes,
                      "device RMSNorm: 8 lanes joined pairwise, rstd into gamma"),
        device_kernel(backend, "batchnorm_welford", PEAT_OP_BATCHNORM, PEAT_ROLE_CANDIDATE,
                      batchnorm_welford, "device batch norm with Welford's one-pass variance"),
    };
    c[0].cfg.tile_m = c[0].cfg.tile_n = c[0].cfg.tile_k = 16;
    c[0].cfg.threads = 256;
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) PEAT_TRY(peat_registry_add(&c[i]));
    return PEAT_OK;
}

peat_status peat_device_ops_register(const char *backend, const struct peat_backend_iface *iface)
{
    for (size_t i = 0; i < sizeof goldens / sizeof goldens[0]; i++) {
        peat_op_kind op = goldens[i].op;
        snprintf(golden_names[op], sizeof golden_names[op], "%s_golden", peat_op_name(op));
        const char *desc = "device reference kernel, fp32, sequential accumulation";
        if (op == PEAT_OP_GEMM && iface->gemm) desc = iface->blas_name;
        peat_kernel k =
            device_kernel(backend, golden_names[op], op, PEAT_ROLE_GOLDEN, goldens[i].fn, desc);
        PEAT_TRY(peat_registry_add(&k));
    }
    return register_candidates(backend);
}
