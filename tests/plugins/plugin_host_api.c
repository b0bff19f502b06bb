/* plugin_host_api.c: test plugin whose kernel calls the host API (peat/peat.h): element counts,
 * dtype names, float data access and errors through peat_error_set; it loads only if the host
 * exports those functions. */
#include "peat/peat.h"

/* GEMM (params as docs/ops.md: transA, transB, M, N, K, batch; alpha, beta) with two partial
 * sums per element, even and odd k: an honest reordering of the golden loop. */
static peat_status host_api_gemm(const peat_args *a, const peat_kernel *self)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], B = a->p.i[5];
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    const int64_t want[3] = {B * M * K, B * K * N, B * M * N};
    for (int i = 0; i < a->n_in; i++) {
        if (a->in[i]->dtype != PEAT_DTYPE_F32)
            return PEAT_ERROR(PEAT_ERR_INVAL, "%s: input %d is %s, expected f32", self->name, i,
                              peat_dtype_name(a->in[i]->dtype));
        if (peat_tensor_numel(a->in[i]) != want[i])
            return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: input %d has %lld elements, expected %lld",
                              self->name, i, (long long)peat_tensor_numel(a->in[i]),
                              (long long)want[i]);
    }
    for (int64_t b = 0; b < B; b++) {
        const float *A = peat_f32(a->in[0]) + b * M * K, *Bm = peat_f32(a->in[1]) + b * K * N;
        const float *C = beta != 0.0f ? peat_f32(a->in[2]) + b * M * N : NULL;
        float *D = peat_f32(a->out[0]) + b * M * N;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                float s[2] = {0.0f, 0.0f};
                for (int64_t k = 0; k < K; k++)
                    s[k & 1] +=
                        (tA ? A[k * M + i] : A[i * K + k]) * (tB ? Bm[j * K + k] : Bm[k * N + j]);
                float dot = s[0] + s[1];
                D[i * N + j] = C ? alpha * dot + beta * C[i * N + j] : alpha * dot;
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
    static const peat_kernel k = {.name = "host_api_gemm",
                                  .op = PEAT_OP_GEMM,
                                  .backend = "cpu",
                                  .in_dtype = PEAT_DTYPE_F32,
                                  .out_dtype = PEAT_DTYPE_F32,
                                  .acc_dtype = PEAT_DTYPE_F32,
                                  .fn = host_api_gemm,
                                  .desc = "test: a GEMM written against the host API"};
    return host->register_kernel(&k) == PEAT_OK ? 0 : 1;
}
