/* backend.cu: the CUDA backend, and the HIP backend from this same source (vendors/hip.h aliases
 * the names): one stream and two timing events per device, PEAT's device kernels (the shared
 * core/device/kernels.cl, compiled here as CUDA) launched by name, cuBLAS/hipBLAS as the golden
 * GEMM where present (HIP without hipBLAS: the reference device kernel). */
#ifdef __HIP_PLATFORM_AMD__
#include "vendors/hip.h"
#else
#include <cublas_v2.h>
#include <cuda_runtime.h>
#define PEAT_GPU_BACKEND_NAME "cuda"
#define PEAT_GPU_BLAS_NAME    "cuBLAS"
#define PEAT_GPU_CAPS         PEAT_BACKEND_CAP_CLOCK_NVML
#define PEAT_HAVE_VENDOR_BLAS 1
#endif

#include "core/backend_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* the device kernels of every op, in the dialect shared with OpenCL */
#include "kernels.cl"

/* Every runtime call goes through here: the failing statement and location are reported. */
#define PEAT_GPU_CHECK(call)                                                                       \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return peat_error_set(PEAT_ERR_BACKEND, __FILE__, __LINE__, "%s: %s failed: %s",       \
                                  PEAT_GPU_BACKEND_NAME, #call, cudaGetErrorString(e_));           \
    } while (0)

typedef struct {
    cudaStream_t stream;
    cudaEvent_t t0, t1;
#ifdef PEAT_HAVE_VENDOR_BLAS
    cublasHandle_t blas;
#endif
} gpu_ctx;

static gpu_ctx *ctx_of(peat_backend_t b)
{
    return (gpu_ctx *)b->context;
}

static const char *gpu_name(peat_backend_t)
{
    return PEAT_GPU_BACKEND_NAME;
}

static int gpu_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver or no device: not an error, just none */
        return 0;
    }
    return n;
}

static peat_status gpu_init(peat_backend_t b)
{
    gpu_ctx *c = (gpu_ctx *)calloc(1, sizeof *c);
    if (!c) return PEAT_ERROR(PEAT_ERR_NOMEM, "gpu context");
    b->context = c;
    PEAT_GPU_CHECK(cudaSetDevice(b->device));
    PEAT_GPU_CHECK(cudaStreamCreate(&c->stream));
    PEAT_GPU_CHECK(cudaEventCreate(&c->t0));
    PEAT_GPU_CHECK(cudaEventCreate(&c->t1));
    return PEAT_OK;
}

static void gpu_release(peat_backend_t b)
{
    gpu_ctx *c = ctx_of(b);
    if (!c) return;
#ifdef PEAT_HAVE_VENDOR_BLAS
    if (c->blas) (void)cublasDestroy(c->blas);
#endif
    if (c->t0) (void)cudaEventDestroy(c->t0);
    if (c->t1) (void)cudaEventDestroy(c->t1);
    if (c->stream) (void)cudaStreamDestroy(c->stream);
    free(c);
    b->context = NULL;
}

/* FP32 lanes per SM from the compute capability (NVIDIA's CUDA C Programming Guide, "Arithmetic
 * Instructions" throughput table: 64 on 6.0, 7.x and 8.0; 128 on 5.x, 6.1/6.2 and 8.6 onward);
 * AMD's CUs have 64 (four SIMD16, or two SIMD32). 0 when the runtime does not say. */
static int gpu_fp32_lanes(int device)
{
#ifdef __HIP_PLATFORM_AMD__
    (void)device;
    return 64;
#else
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
        return 0;
    if (major == 6) return minor == 0 ? 64 : 128;
    if (major == 7 || (major == 8 && minor == 0)) return 64;
    return major >= 5 ? 128 : 0;
#endif
}

static peat_status gpu_device_info(peat_backend_t b, peat_device_info *out)
{
    cudaDeviceProp p;
    PEAT_GPU_CHECK(cudaGetDeviceProperties(&p, b->device));
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->index = b->device;
    out->mem_bytes = p.totalGlobalMem;
    out->compute_units = p.multiProcessorCount;
    /* the peak (boost) clock the runtime reports; the clock under load is sampled through NVML /
     * ROCm SMI by the predictor */
    int clock_khz = 0;
    out->clock_mhz = 0.0;
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, b->device) == cudaSuccess &&
        clock_khz > 0)
        out->clock_mhz = clock_khz / 1000.0;
    out->fp32_lanes = gpu_fp32_lanes(b->device);
    /* the attributes, not cudaDeviceProp's memory fields (gone from CUDA 13's struct) */
    int khz = 0, bits = 0;
    out->mem_bandwidth = 0.0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, b->device) == cudaSuccess &&
        cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, b->device) == cudaSuccess &&
        khz > 0 && bits > 0)
        out->mem_bandwidth = 2.0 * (double)khz * 1e3 * (double)bits / 8.0;
    return PEAT_OK;
}

static peat_status gpu_alloc(peat_backend_t b, size_t n, void **out)
{
    PEAT_GPU_CHECK(cudaSetDevice(b->device));
    PEAT_GPU_CHECK(cudaMalloc(out, n ? n : 1));
    PEAT_GPU_CHECK(cudaMemsetAsync(*out, 0, n ? n : 1, ctx_of(b)->stream));
    return PEAT_OK;
}

static void gpu_free(peat_backend_t b, void *p)
{
    (void)cudaStreamSynchronize(ctx_of(b)->stream); /* the buffer may still be in use */
    (void)cudaFree(p);
}

static peat_status gpu_h2d(peat_backend_t b, void *dst, const void *src, size_t n)
{
    gpu_ctx *c = ctx_of(b);
    PEAT_GPU_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, c->stream));
    PEAT_GPU_CHECK(cudaStreamSynchronize(c->stream));
    return PEAT_OK;
}

static peat_status gpu_d2h(peat_backend_t b, void *dst, const void *src, size_t n)
{
    gpu_ctx *c = ctx_of(b);
    PEAT_GPU_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, c->stream));
    PEAT_GPU_CHECK(cudaStreamSynchronize(c->stream));
    return PEAT_OK;
}

static peat_status gpu_sync(peat_backend_t b)
{
    PEAT_GPU_CHECK(cudaStreamSynchronize(ctx_of(b)->stream));
    return PEAT_OK;
}

static double gpu_timer(peat_backend_t b)
{
    (void)cudaStreamSynchronize(ctx_of(b)->stream);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static peat_status gpu_time_begin(peat_backend_t b)
{
    PEAT_GPU_CHECK(cudaEventRecord(ctx_of(b)->t0, ctx_of(b)->stream));
    return PEAT_OK;
}

static peat_status gpu_time_end(peat_backend_t b, double *seconds)
{
    gpu_ctx *c = ctx_of(b);
    float ms = 0.0f;
    PEAT_GPU_CHECK(cudaEventRecord(c->t1, c->stream));
    PEAT_GPU_CHECK(cudaEventSynchronize(c->t1));
    PEAT_GPU_CHECK(cudaEventElapsedTime(&ms, c->t0, c->t1));
    *seconds = 1e-3 * (double)ms;
    return PEAT_OK;
}

static peat_status gpu_device_fill(peat_backend_t b, peat_device *d)
{
    d->backend = PEAT_GPU_BACKEND_NAME;
    d->index = b->device;
    d->queue = (void *)ctx_of(b)->stream;
    d->context = d->device = NULL;
    return PEAT_OK;
}

/* ---- launches by name: every kernel of kernels.cl ---- */

#define PK(name)                                                                                   \
    {                                                                                              \
#name, (const void *)name                                                                  \
    }
static const struct {
    const char *name;
    const void *fn;
} pk_table[] = {
    PK(pk_copy),
    PK(pk_gemm_ref),
    PK(pk_gemm_tiled),
    PK(pk_conv2d),
    PK(pk_conv2d_bwd_data),
    PK(pk_conv2d_bwd_filter),
    PK(pk_bias_add),
    PK(pk_bias_add_bwd),
    PK(pk_relu),
    PK(pk_relu_bwd),
    PK(pk_gelu),
    PK(pk_gelu_bwd),
    PK(pk_softmax),
    PK(pk_softmax_online),
    PK(pk_softmax_bwd),
    PK(pk_layernorm),
    PK(pk_layernorm_welford),
    PK(pk_layernorm_bwd_dx),
    PK(pk_layernorm_bwd_dg),
    PK(pk_attention),
    PK(pk_attention_flash),
    PK(pk_attention_bwd_dq),
    PK(pk_attention_bwd_dkv),
    PK(pk_embedding),
    PK(pk_embedding_bwd),
    PK(pk_cross_entropy),
    PK(pk_cross_entropy_bwd),
    PK(pk_reduce),
    PK(pk_adamw),
    PK(pk_sgd),
};

static peat_status gpu_launch(peat_backend_t b, const peat_launch *l)
{
    const void *fn = NULL;
    for (size_t i = 0; i < sizeof pk_table / sizeof pk_table[0] && !fn; i++)
        if (strcmp(pk_table[i].name, l->kernel) == 0) fn = pk_table[i].fn;
    if (!fn)
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "%s: no kernel '%s'", PEAT_GPU_BACKEND_NAME,
                          l->kernel);
    void *argv[32];
    if (l->nargs > 32) return PEAT_ERROR(PEAT_ERR_INTERNAL, "%s: too many arguments", l->kernel);
    for (int i = 0; i < l->nargs; i++) argv[i] = (void *)l->args[i].value;
    unsigned g[3] = {1, 1, 1}, t[3] = {1, 1, 1};
    for (int d = 0; d < l->dims; d++) {
        t[d] = (unsigned)l->local[d];
        g[d] = (unsigned)((l->global[d] + l->local[d] - 1) / l->local[d]);
    }
    PEAT_GPU_CHECK(cudaLaunchKernel(fn, dim3(g[0], g[1], g[2]), dim3(t[0], t[1], t[2]), argv, 0,
                                    ctx_of(b)->stream));
    return PEAT_OK;
}

#ifdef PEAT_HAVE_VENDOR_BLAS
/* Row-major D = op(A) op(B) [+ beta C] computed as the column-major D^T = op(B)^T op(A)^T. */
static peat_status gpu_gemm(peat_backend_t b, const peat_args *a)
{
    gpu_ctx *c = ctx_of(b);
    if (!c->blas && cublasCreate(&c->blas) != CUBLAS_STATUS_SUCCESS)
        return PEAT_ERROR(PEAT_ERR_BACKEND, "%s: cannot create a BLAS handle",
                          PEAT_GPU_BACKEND_NAME);
    cublasSetStream(c->blas, c->stream);
    const int64_t *i = a->p.i;
    int tA = (int)i[0], tB = (int)i[1];
    long M = i[2], N = i[3], K = i[4], Bn = i[5];
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    float *D = (float *)a->out[0]->data;
    if (beta != 0.0f)
        PEAT_GPU_CHECK(cudaMemcpyAsync(D, a->in[2]->data, peat_tensor_nbytes(a->out[0]),
                                       cudaMemcpyDeviceToDevice, c->stream));
    cublasStatus_t s = cublasSgemmStridedBatched(
        c->blas, tB ? CUBLAS_OP_T : CUBLAS_OP_N, tA ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M,
        (int)K, &alpha, (const float *)a->in[1]->data, tB ? (int)K : (int)N, K * N,
        (const float *)a->in[0]->data, tA ? (int)M : (int)K, M * K, &beta, D, (int)N, M * N,
        (int)Bn);
    if (s != CUBLAS_STATUS_SUCCESS)
        return PEAT_ERROR(PEAT_ERR_BACKEND, "%s: sgemm status %d", PEAT_GPU_BACKEND_NAME, (int)s);
    return PEAT_OK;
}
#endif

/* ---- tensor cores (CUDA only): gemm_bf16 / gemm_fp16 through WMMA ---- */

#if !defined(__HIP_PLATFORM_AMD__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

/* One warp per 16x16 output tile: A and B tiles are rounded to the 16-bit format while loaded
 * into shared memory (zero-padded at the edges), multiplied on the tensor cores with fp32
 * accumulation (mma_sync), and alpha/beta applied in fp32. Architectures without the format's
 * WMMA (bf16 needs sm_80, fp16 sm_70) compile an empty body; the host refuses them first. */
#define PEAT_WMMA_KERNEL(name, T, CONV, MINARCH)                                                   \
    __global__ void name(long tA, long tB, long M, long N, long K, float alpha, float beta,        \
                         long has_c, const float *A, const float *B, const float *C, float *D)     \
    {                                                                                              \
        PEAT_WMMA_BODY(T, CONV, MINARCH)                                                           \
    }
#define PEAT_WMMA_BODY(T, CONV, MINARCH)                                                           \
    if (__CUDA_ARCH__ >= MINARCH) {                                                                \
        using namespace nvcuda;                                                                    \
        __shared__ T as[256], bs[256];                                                             \
        __shared__ float cs[256];                                                                  \
        long b = blockIdx.z, i0 = blockIdx.y * 16L, j0 = blockIdx.x * 16L;                         \
        const float *Ab = A + b * M * K, *Bb = B + b * K * N;                                      \
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;                                  \
        wmma::fill_fragment(acc, 0.0f);                                                            \
        for (long k0 = 0; k0 < K; k0 += 16) {                                                      \
            for (int e = threadIdx.x; e < 256; e += 32) {                                          \
                long r = e / 16, c = e % 16, i = i0 + r, ka = k0 + c, kb = k0 + r, j = j0 + c;     \
                as[e] = CONV((i < M && ka < K) ? (tA ? Ab[ka * M + i] : Ab[i * K + ka]) : 0.0f);   \
                bs[e] = CONV((kb < K && j < N) ? (tB ? Bb[j * K + kb] : Bb[kb * N + j]) : 0.0f);   \
            }                                                                                      \
            __syncwarp();                                                                          \
            wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;                     \
            wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;                     \
            wmma::load_matrix_sync(fa, as, 16);                                                    \
            wmma::load_matrix_sync(fb, bs, 16);                                                    \
            wmma::mma_sync(acc, fa, fb, acc);                                                      \
            __syncwarp();                                                                          \
        }                                                                                          \
        wmma::store_matrix_sync(cs, acc, 16, wmma::mem_row_major);                                 \
        __syncwarp();                                                                              \
        for (int e = threadIdx.x; e < 256; e += 32) {                                              \
            long i = i0 + e / 16, j = j0 + e % 16, o = b * M * N + i * N + j;                      \
            if (i < M && j < N) D[o] = has_c ? alpha * cs[e] + beta * C[o] : alpha * cs[e];        \
        }                                                                                          \
    }

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
PEAT_WMMA_KERNEL(pk_gemm_wmma_bf16, __nv_bfloat16, __float2bfloat16_rn, 800)
#else
__global__ void pk_gemm_wmma_bf16(long, long, long, long, long, float, float, long, const float *,
                                  const float *, const float *, float *)
{
}
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
PEAT_WMMA_KERNEL(pk_gemm_wmma_fp16, __half, __float2half_rn, 700)
#else
__global__ void pk_gemm_wmma_fp16(long, long, long, long, long, float, float, long, const float *,
                                  const float *, const float *, float *)
{
}
#endif

/* Launches a WMMA GEMM on the stream PEAT hands device kernels, if the device has the format. */
static peat_status gemm_wmma(const peat_args *a, const void *fn, int min_major)
{
    cudaDeviceProp p;
    PEAT_GPU_CHECK(cudaGetDeviceProperties(&p, a->dev->index));
    if (p.major < min_major)
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED,
                          "%s: no tensor-core path for this format below sm_%d0", p.name,
                          min_major);
    int64_t tA = a->p.i[0], tB = a->p.i[1], M = a->p.i[2], N = a->p.i[3], K = a->p.i[4];
    int64_t has_c = a->p.f[1] != 0.0;
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    void *C = has_c ? a->in[2]->data : a->out[0]->data;
    void *argv[] = {&tA,
                    &tB,
                    &M,
                    &N,
                    &K,
                    &alpha,
                    &beta,
                    &has_c,
                    (void *)&a->in[0]->data,
                    (void *)&a->in[1]->data,
                    &C,
                    (void *)&a->out[0]->data};
    dim3 grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16), (unsigned)a->p.i[5]);
    PEAT_GPU_CHECK(cudaLaunchKernel(fn, grid, dim3(32), argv, 0, (cudaStream_t)a->dev->queue));
    return PEAT_OK;
}
static peat_status gemm_wmma_bf16(const peat_args *a, const peat_kernel *)
{
    return gemm_wmma(a, (const void *)pk_gemm_wmma_bf16, 8);
}
static peat_status gemm_wmma_fp16(const peat_args *a, const peat_kernel *)
{
    return gemm_wmma(a, (const void *)pk_gemm_wmma_fp16, 7);
}

static peat_status register_wmma(void)
{
    peat_kernel k[2];
    memset(k, 0, sizeof k);
    const char *names[2] = {"gemm_bf16", "gemm_fp16"};
    const char *desc[2] = {"tensor cores (WMMA 16x16x16): A,B rounded to bf16, fp32 accumulate",
                           "tensor cores (WMMA 16x16x16): A,B rounded to fp16, fp32 accumulate"};
    peat_kernel_fn fns[2] = {gemm_wmma_bf16, gemm_wmma_fp16};
    peat_dtype in[2] = {PEAT_DTYPE_BF16, PEAT_DTYPE_F16};
    for (int i = 0; i < 2; i++) {
        k[i].name = names[i], k[i].op = PEAT_OP_GEMM, k[i].role = PEAT_ROLE_CANDIDATE;
        k[i].backend = "cuda", k[i].in_dtype = in[i];
        k[i].out_dtype = k[i].acc_dtype = PEAT_DTYPE_F32;
        k[i].cfg.tile_m = k[i].cfg.tile_n = k[i].cfg.tile_k = 16, k[i].cfg.threads = 32;
        k[i].fn = fns[i], k[i].desc = desc[i];
        PEAT_TRY(peat_registry_add(&k[i]));
    }
    return PEAT_OK;
}
#endif

/* Host-only table: hipcc's device pass must not see a constant global of host functions. */
#if !defined(__HIP_DEVICE_COMPILE__)
static peat_backend_iface make_iface(void)
{
    peat_backend_iface f;
    memset(&f, 0, sizeof f);
    f.get_name = gpu_name, f.init = gpu_init, f.device_count = gpu_device_count;
    f.device_info = gpu_device_info, f.buffer_alloc = gpu_alloc, f.buffer_free = gpu_free;
    f.copy_h2d = gpu_h2d, f.copy_d2h = gpu_d2h, f.synchronize = gpu_sync;
    f.timer_now = gpu_timer, f.free = gpu_release, f.device_fill = gpu_device_fill;
    f.time_begin = gpu_time_begin, f.time_end = gpu_time_end, f.launch = gpu_launch;
    f.caps = PEAT_GPU_CAPS;
#ifdef PEAT_HAVE_VENDOR_BLAS
    f.gemm = gpu_gemm;
    f.blas_name = PEAT_GPU_BLAS_NAME " fp32 SGEMM (strided batched, no TF32)";
#endif
    return f;
}
static const peat_backend_iface gpu_iface = make_iface();

/* Registers the backend and PEAT's device kernels for it (no runtime call is made here). */
extern "C" peat_status peat_gpu_register(void)
{
    PEAT_TRY(peat_backend_register(PEAT_GPU_BACKEND_NAME, &gpu_iface));
#if !defined(__HIP_PLATFORM_AMD__)
    PEAT_TRY(register_wmma());
#endif
    return peat_device_ops_register(PEAT_GPU_BACKEND_NAME, &gpu_iface);
}
#endif
