/* plugin_ctor_print.c: test plugin whose constructor and register function print to stdout
 * (which in peat is the report's: --json), with one honest GEMM. */
#include "peat/plugin.h"

#include <stdio.h>

__attribute__((constructor)) static void hello(void)
{
    printf("noise from a plugin constructor\n");
}

static peat_status gemm(const peat_args *a, const peat_kernel *self)
{
    (void)self;
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
    return PEAT_OK;
}

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    static const peat_kernel k = {.name = "test_gemm_printing",
                                  .op = PEAT_OP_GEMM,
                                  .backend = "cpu",
                                  .in_dtype = PEAT_DTYPE_F32,
                                  .out_dtype = PEAT_DTYPE_F32,
                                  .acc_dtype = PEAT_DTYPE_F32,
                                  .fn = gemm,
                                  .desc = "test: prints from its constructor"};
    printf("noise from peat_plugin_register\n");
    return host->register_kernel(&k) == PEAT_OK ? 0 : 1;
}
