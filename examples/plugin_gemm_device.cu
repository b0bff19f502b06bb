/* plugin_gemm_device.cu: an example CUDA/HIP device plugin (one source for both): a GEMM in 16x16
 * shared-memory tiles. PEAT hands it device pointers and the stream to launch on; it stages the
 * inputs, times the kernel with events and reads the output back.
 * CUDA: nvcc -shared -Xcompiler -fPIC -I include examples/plugin_gemm_device.cu -o libmine_cu.so
 * HIP:  hipcc -shared -fPIC -I include examples/plugin_gemm_device.cu -o libmine_hip.so
 * Use:  peat run --plugin ./libmine_cu.so --kernel example_gemm_cuda --backend cuda */
#ifdef __HIP_PLATFORM_AMD__
#include <hip/hip_runtime.h>
#define cudaStream_t       hipStream_t
#define cudaGetLastError   hipGetLastError
#define cudaGetErrorString hipGetErrorString
#define cudaSuccess        hipSuccess
#define cudaError_t        hipError_t
#define BACKEND            "hip"
#define NAME               "example_gemm_hip"
#else
#include <cuda_runtime.h>
#define BACKEND "cuda"
#define NAME    "example_gemm_cuda"
#endif

#include "peat/plugin.h"

enum { T = 16 };

__global__ void ex_gemm(int tA, int tB, long M, long N, long K, float alpha, float beta,
                        const float *A, const float *B, const float *C, float *D)
{
    __shared__ float as[T][T + 1], bs[T][T + 1];
    long b = blockIdx.z, i = blockIdx.y * T + threadIdx.y, j = blockIdx.x * T + threadIdx.x;
    A += b * M * K, B += b * K * N;
    float acc = 0.0f;
    for (long k0 = 0; k0 < K; k0 += T) {
        long ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        as[threadIdx.y][threadIdx.x] =
            (i < M && ka < K) ? (tA ? A[ka * M + i] : A[i * K + ka]) : 0.0f;
        bs[threadIdx.y][threadIdx.x] =
            (kb < K && j < N) ? (tB ? B[j * K + kb] : B[kb * N + j]) : 0.0f;
        __syncthreads();
        for (int k = 0; k < T; k++) acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
        __syncthreads();
    }
    long o = b * M * N + i * N + j;
    if (i < M && j < N) D[o] = C ? alpha * acc + beta * C[o] : alpha * acc;
}

static const peat_plugin_host *host;

static peat_status gemm_dev(const peat_args *a, const peat_kernel *self)
{
    const int64_t *p = a->p.i;
    long M = p[2], N = p[3], K = p[4], Bn = p[5];
    /* tensor data are device pointers; C only when beta != 0 */
    const float *C = a->p.f[1] != 0.0 ? (const float *)a->in[2]->data : NULL;
    dim3 block(T, T), grid((unsigned)((N + T - 1) / T), (unsigned)((M + T - 1) / T), (unsigned)Bn);
    ex_gemm<<<grid, block, 0, (cudaStream_t)a->dev->queue>>>(
        (int)p[0], (int)p[1], M, N, K, (float)a->p.f[0], (float)a->p.f[1],
        (const float *)a->in[0]->data, (const float *)a->in[1]->data, C, (float *)a->out[0]->data);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return host->error(PEAT_ERR_BACKEND, __FILE__, __LINE__, NAME ": launch failed: %s",
                           cudaGetErrorString(e));
    return PEAT_OK; /* PEAT waits on the stream */
}

extern "C" int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

extern "C" int peat_plugin_register(const peat_plugin_host *h)
{
    host = h;
    peat_kernel k = {};
    k.name = NAME;
    k.op = PEAT_OP_GEMM;
    k.role = PEAT_ROLE_CANDIDATE;
    k.backend = BACKEND;
    k.in_dtype = k.out_dtype = k.acc_dtype = PEAT_DTYPE_F32;
    k.cfg.tile_m = k.cfg.tile_n = k.cfg.tile_k = T;
    k.cfg.threads = T * T;
    k.fn = gemm_dev;
    k.desc = "example " BACKEND " plugin: fp32 GEMM in 16x16 shared-memory tiles";
    return h->register_kernel(&k) == PEAT_OK ? 0 : 1;
}
