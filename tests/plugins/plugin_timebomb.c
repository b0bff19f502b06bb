/* plugin_timebomb.c: test plugin whose GEMM is correct for its first 50 calls in the process and
 * then leaves out the last K term: a defect that starts late (tests/torch: the shadow check of
 * peat_torch.swap names its first bad call). */
#include "peat/plugin.h"

#include <stdint.h>

#define GOOD_CALLS 50

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

/* D = alpha op(A) op(B) + beta C over the first K terms of each dot product. */
static void gemm_terms(const peat_args *a, int64_t K)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], Kf = a->p.i[4], B = a->p.i[5];
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    for (int64_t b = 0; b < B; b++) {
        const float *A = (const float *)a->in[0]->data + b * M * Kf;
        const float *Bm = (const float *)a->in[1]->data + b * Kf * N;
        const float *C = beta != 0.0f ? (const float *)a->in[2]->data + b * M * N : NULL;
        float *D = (float *)a->out[0]->data + b * M * N;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                float s = 0.0f;
                for (int64_t k = 0; k < K; k++)
                    s +=
                        (tA ? A[k * M + i] : A[i * Kf + k]) * (tB ? Bm[j * Kf + k] : Bm[k * N + j]);
                D[i * N + j] = C ? alpha * s + beta * C[i * N + j] : alpha * s;
            }
    }
}

static peat_status gemm_timebomb(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    static long calls; /* PEAT serializes the kernel's calls (no PEAT_KERNEL_REENTRANT) */
    int64_t K = a->p.i[4];
    gemm_terms(a, ++calls > GOOD_CALLS && K > 1 ? K - 1 : K);
    return PEAT_OK;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    static const peat_kernel k = {.name = "test_gemm_timebomb",
                                  .op = PEAT_OP_GEMM,
                                  .backend = "cpu",
                                  .in_dtype = PEAT_DTYPE_F32,
                                  .out_dtype = PEAT_DTYPE_F32,
                                  .acc_dtype = PEAT_DTYPE_F32,
                                  .fn = gemm_timebomb,
                                  .desc = "test: correct for 50 calls, then the last K term lost"};
    return host->register_kernel(&k) == PEAT_OK ? 0 : 1;
}
