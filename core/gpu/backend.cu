/* backend.cu: the GPU backend (CUDA, or HIP through vendors/hip.h from this same source) and the
 * GPU GEMM kernels: gemm_gpu_blas (golden: cuBLAS/hipBLAS fp32) and gemm_gpu_tiled (candidate). */
#ifdef __HIP_PLATFORM_AMD__
#include "vendors/hip.h"
#else
#include <cublas_v2.h>
#include <cuda_runtime.h>
#define PEAT_GPU_BACKEND_NAME "cuda"
#define PEAT_HAVE_VENDOR_BLAS 1
#endif

#include "core/backend_impl.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* Every runtime call goes through here: the failing statement and location are reported. */
#define PEAT_GPU_CHECK(call)                                                                       \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return peat_error_set(PEAT_ERR_BACKEND, __FILE__, __LINE__, "%s: %s failed: %s",       \
                                  PEAT_GPU_BACKEND_NAME, #call, cudaGetErrorString(e_));           \
    } while (0)

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

static peat_status gpu_device_info(peat_backend_t b, peat_device_info *out)
{
    cudaDeviceProp p;
    PEAT_GPU_CHECK(cudaGetDeviceProperties(&p, b->device));
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->index = b->device;
    out->mem_bytes = p.totalGlobalMem;
    out->compute_units = p.multiProcessorCount;
    out->clock_mhz = 0.0; /* sampled through NVML / ROCm SMI by the predictor */
    return PEAT_OK;
}

static peat_status gpu_alloc(peat_backend_t b, size_t n, void **out)
{
    PEAT_GPU_CHECK(cudaSetDevice(b->device));
    PEAT_GPU_CHECK(cudaMalloc(out, n ? n : 1));
    PEAT_GPU_CHECK(cudaMemset(*out, 0, n ? n : 1));
    return PEAT_OK;
}

static void gpu_free(peat_backend_t, void *p)
{
    (void)cudaFree(p);
}

static peat_status gpu_h2d(peat_backend_t, void *dst, const void *src, size_t n)
{
    PEAT_GPU_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
    return PEAT_OK;
}

static peat_status gpu_d2h(peat_backend_t, void *dst, const void *src, size_t n)
{
    PEAT_GPU_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
    return PEAT_OK;
}

static peat_status gpu_sync(peat_backend_t)
{
    PEAT_GPU_CHECK(cudaDeviceSynchronize());
    return PEAT_OK;
}

static double gpu_timer(peat_backend_t)
{
    (void)cudaDeviceSynchronize();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Host-only table: hipcc's device pass must not see a constant global of host functions. */
#if !defined(__HIP_DEVICE_COMPILE__)
extern "C" const struct peat_backend_iface peat_backend_gpu_iface = {
    gpu_name, gpu_device_count, gpu_device_info, gpu_alloc, gpu_free,
    gpu_h2d,  gpu_d2h,          gpu_sync,        gpu_timer, NULL,
};
#endif

/* ---- GEMM kernels (host tensors in, host tensors out: they stage through device memory) ---- */

enum { TILE = 16 };

/* Shared-memory tiled fp32 GEMM for one batch entry: each thread owns one output element and
 * accumulates k in tiles of 16 (the order differs from the sequential golden). */
__global__ void gemm_tiled_kernel(int tA, int tB, long M, long N, long K, float alpha, float beta,
                                  const float *A, const float *B, const float *C, float *D)
{
    __shared__ float as[TILE][TILE + 1], bs[TILE][TILE + 1];
    long i = blockIdx.y * TILE + threadIdx.y, j = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (long k0 = 0; k0 < K; k0 += TILE) {
        long ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        as[threadIdx.y][threadIdx.x] =
            (i < M && ka < K) ? (tA ? A[ka * M + i] : A[i * K + ka]) : 0.0f;
        bs[threadIdx.y][threadIdx.x] =
            (kb < K && j < N) ? (tB ? B[j * K + kb] : B[kb * N + j]) : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; k++) acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
        __syncthreads();
    }
    if (i < M && j < N) D[i * N + j] = C ? alpha * acc + beta * C[i * N + j] : alpha * acc;
}

typedef struct {
    float *A, *B, *C, *D;
} gemm_dev;

static void gemm_dev_free(gemm_dev *d)
{
    (void)cudaFree(d->A), (void)cudaFree(d->B), (void)cudaFree(d->C), (void)cudaFree(d->D);
}

static peat_status gemm_stage_in(const peat_args *a, gemm_dev *d)
{
    memset(d, 0, sizeof *d);
    size_t na = peat_tensor_nbytes(a->in[0]), nb = peat_tensor_nbytes(a->in[1]);
    size_t nd = peat_tensor_nbytes(a->out[0]);
    PEAT_GPU_CHECK(cudaMalloc((void **)&d->A, na));
    PEAT_GPU_CHECK(cudaMalloc((void **)&d->B, nb));
    PEAT_GPU_CHECK(cudaMalloc((void **)&d->D, nd));
    PEAT_GPU_CHECK(cudaMemcpy(d->A, a->in[0]->data, na, cudaMemcpyHostToDevice));
    PEAT_GPU_CHECK(cudaMemcpy(d->B, a->in[1]->data, nb, cudaMemcpyHostToDevice));
    if (a->p.f[1] != 0.0) {
        PEAT_GPU_CHECK(cudaMalloc((void **)&d->C, nd));
        PEAT_GPU_CHECK(cudaMemcpy(d->C, a->in[2]->data, nd, cudaMemcpyHostToDevice));
    }
    return PEAT_OK;
}

static peat_status gemm_tiled(const peat_args *a, const peat_kernel *)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    long M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], Bn = a->p.i[5];
    gemm_dev d;
    peat_status st = gemm_stage_in(a, &d);
    if (st == PEAT_OK) {
        dim3 block(TILE, TILE),
            grid((unsigned)((N + TILE - 1) / TILE), (unsigned)((M + TILE - 1) / TILE));
        for (long b = 0; b < Bn; b++)
            gemm_tiled_kernel<<<grid, block>>>(tA, tB, M, N, K, (float)a->p.f[0], (float)a->p.f[1],
                                               d.A + b * M * K, d.B + b * K * N,
                                               d.C ? d.C + b * M * N : NULL, d.D + b * M * N);
        cudaError_t e = cudaGetLastError();
        if (e == cudaSuccess)
            e = cudaMemcpy(a->out[0]->data, d.D, peat_tensor_nbytes(a->out[0]),
                           cudaMemcpyDeviceToHost);
        if (e != cudaSuccess)
            st = PEAT_ERROR(PEAT_ERR_BACKEND, "gemm_gpu_tiled: %s", cudaGetErrorString(e));
    }
    gemm_dev_free(&d);
    return st;
}

#ifdef PEAT_HAVE_VENDOR_BLAS
/* Row-major D = op(A) op(B) computed as the column-major D^T = op(B)^T op(A)^T. */
static peat_status gemm_blas(const peat_args *a, const peat_kernel *)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    long M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], Bn = a->p.i[5];
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    gemm_dev d;
    peat_status st = gemm_stage_in(a, &d);
    cublasHandle_t h = NULL;
    if (st == PEAT_OK && cublasCreate(&h) != CUBLAS_STATUS_SUCCESS)
        st = PEAT_ERROR(PEAT_ERR_BACKEND, "gemm_gpu_blas: cannot create a BLAS handle");
    if (st == PEAT_OK && d.C)
        if (cudaMemcpy(d.D, d.C, peat_tensor_nbytes(a->out[0]), cudaMemcpyDeviceToDevice) !=
            cudaSuccess)
            st = PEAT_ERROR(PEAT_ERR_BACKEND, "gemm_gpu_blas: copy of C failed");
    if (st == PEAT_OK) {
        cublasStatus_t bs = cublasSgemmStridedBatched(
            h, tB ? CUBLAS_OP_T : CUBLAS_OP_N, tA ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M,
            (int)K, &alpha, d.B, tB ? (int)K : (int)N, K * N, d.A, tA ? (int)M : (int)K, M * K,
            &beta, d.D, (int)N, M * N, (int)Bn);
        if (bs != CUBLAS_STATUS_SUCCESS)
            st = PEAT_ERROR(PEAT_ERR_BACKEND, "gemm_gpu_blas: sgemm status %d", (int)bs);
    }
    if (st == PEAT_OK && cudaMemcpy(a->out[0]->data, d.D, peat_tensor_nbytes(a->out[0]),
                                    cudaMemcpyDeviceToHost) != cudaSuccess)
        st = PEAT_ERROR(PEAT_ERR_BACKEND, "gemm_gpu_blas: copy back failed");
    if (h) cublasDestroy(h);
    gemm_dev_free(&d);
    return st;
}
#endif

static peat_kernel gpu_kernel(const char *name, peat_kernel_role role, peat_kernel_fn fn,
                              const char *desc)
{
    peat_kernel k;
    memset(&k, 0, sizeof k);
    k.name = name;
    k.op = PEAT_OP_GEMM;
    k.role = role;
    k.backend = PEAT_GPU_BACKEND_NAME;
    k.in_dtype = PEAT_DTYPE_F32;
    k.out_dtype = PEAT_DTYPE_F32;
    k.acc_dtype = PEAT_DTYPE_F32;
    k.cfg.tile_m = k.cfg.tile_n = k.cfg.tile_k = TILE;
    k.cfg.threads = TILE * TILE;
    k.fn = fn;
    k.desc = desc;
    return k;
}

extern "C" peat_status peat_gpu_register(void)
{
    peat_kernel t = gpu_kernel("gemm_gpu_tiled", PEAT_ROLE_CANDIDATE, gemm_tiled,
                               "GPU fp32 GEMM, 16x16 shared-memory tiles, one thread per element");
    PEAT_TRY(peat_registry_add(&t));
#ifdef PEAT_HAVE_VENDOR_BLAS
    peat_kernel g = gpu_kernel("gemm_gpu_blas", PEAT_ROLE_GOLDEN, gemm_blas,
                               "vendor BLAS fp32 SGEMM (no TF32)");
    PEAT_TRY(peat_registry_add(&g));
#endif
    return peat_backend_register(peat_backend_gpu_iface.get_name(NULL), &peat_backend_gpu_iface);
}
