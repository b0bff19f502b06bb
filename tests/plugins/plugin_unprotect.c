/* plugin_unprotect.c: test plugin whose GEMM makes its read-only input writable (mprotect) and
 * then changes it, dodging the page protection: only a comparison of the inputs after the call
 * sees it (tests/test_robust_inputs.c). */
#define _DEFAULT_SOURCE /* mprotect's PROT_* with sysconf */
#include "peat/plugin.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

/* Correct output (the plain loop), so that only the input's change can fail it. */
static void gemm_ref(const peat_args *a)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], B = a->p.i[5];
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    for (int64_t b = 0; b < B; b++) {
        const float *A = (const float *)a->in[0]->data + b * M * K;
        const float *Bm = (const float *)a->in[1]->data + b * K * N;
        const float *C = beta != 0.0f ? (const float *)a->in[2]->data + b * M * N : NULL;
        float *D = (float *)a->out[0]->data + b * M * N;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                float s = 0.0f;
                for (int64_t k = 0; k < K; k++)
                    s += (tA ? A[k * M + i] : A[i * K + k]) * (tB ? Bm[j * K + k] : Bm[k * N + j]);
                D[i * N + j] = C ? alpha * s + beta * C[i * N + j] : alpha * s;
            }
    }
}

/* The output first, then input B's pages made writable and its element 2 overwritten. */
static peat_status gemm_unprotect_mutate(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    gemm_ref(a);
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), p = (uintptr_t)a->in[1]->data;
    if (mprotect((void *)(p & ~(pg - 1)), pg + (p & (pg - 1)) + 16, PROT_READ | PROT_WRITE) != 0)
        return PEAT_ERR_KERNEL;
    ((float *)a->in[1]->data)[2] = 2.5e21f;
    return PEAT_OK;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    static const peat_kernel k = {.name = "test_gemm_unprotect_mutate",
                                  .op = PEAT_OP_GEMM,
                                  .backend = "cpu",
                                  .in_dtype = PEAT_DTYPE_F32,
                                  .out_dtype = PEAT_DTYPE_F32,
                                  .acc_dtype = PEAT_DTYPE_F32,
                                  .fn = gemm_unprotect_mutate,
                                  .desc = "test: mprotects input B writable, overwrites B[2]"};
    return host->register_kernel(&k) == PEAT_OK ? 0 : 1;
}
