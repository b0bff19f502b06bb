/* kcommon.c: the blocked fp32 GEMM loop and descriptor helpers shared by the candidate kernels. */
#include "kernels/kcommon.h"

#include <string.h>

peat_status peat_kernels_io_check(const peat_args *a, const peat_kernel *self)
{
    for (int k = 0; k < a->n_in; k++) {
        peat_dtype t = a->in[k]->dtype;
        if (t != PEAT_DTYPE_F32 && t != PEAT_DTYPE_I32)
            return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "%s: input %d has dtype %s, expected f32",
                              self->name, k, peat_dtype_name(t));
    }
    for (int k = 0; k < a->n_out; k++)
        if (!a->out[k] || a->out[k]->dtype != PEAT_DTYPE_F32)
            return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "%s: output %d must be f32", self->name, k);
    return PEAT_OK;
}

peat_status peat_kernels_gemm_blocked(int64_t M, int64_t N, int64_t K, peat_kernels_view A,
                                      peat_kernels_view B, float *C, int64_t ldc, int accumulate,
                                      const peat_kernel_config *cfg)
{
    int64_t tm = cfg->tile_m, tn = cfg->tile_n, tk = cfg->tile_k;
    if (tm <= 0 || tn <= 0 || tk <= 0 || tm * tn > PEAT_KERNELS_TILE_MAX)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "blocked gemm: tile %lldx%lldx%lld unusable (tile_m*tile_n <= %d)",
                          (long long)tm, (long long)tn, (long long)tk, PEAT_KERNELS_TILE_MAX);
    float acc[PEAT_KERNELS_TILE_MAX];
    for (int64_t i0 = 0; i0 < M; i0 += tm) {
        int64_t mb = M - i0 < tm ? M - i0 : tm;
        for (int64_t j0 = 0; j0 < N; j0 += tn) {
            int64_t nb = N - j0 < tn ? N - j0 : tn;
            for (int64_t i = 0; i < mb; i++)
                for (int64_t j = 0; j < nb; j++)
                    if (!accumulate) C[(i0 + i) * ldc + j0 + j] = 0.0f;
            for (int64_t k0 = 0; k0 < K; k0 += tk) {
                int64_t kb = K - k0 < tk ? K - k0 : tk;
                memset(acc, 0, (size_t)(mb * nb) * sizeof acc[0]);
                for (int64_t i = 0; i < mb; i++) {
                    const float *arow = A.p + (i0 + i) * A.rs;
                    float *crow = acc + i * nb;
                    for (int64_t k = 0; k < kb; k++) {
                        float aik = arow[(k0 + k) * A.cs];
                        const float *brow = B.p + (k0 + k) * B.rs + j0 * B.cs;
                        for (int64_t j = 0; j < nb; j++) crow[j] += aik * brow[j * B.cs];
                    }
                }
                /* the slice's partial sums join C only now: this is the blocked order */
                for (int64_t i = 0; i < mb; i++)
                    for (int64_t j = 0; j < nb; j++) C[(i0 + i) * ldc + j0 + j] += acc[i * nb + j];
            }
        }
    }
    return PEAT_OK;
}

peat_status peat_kernels_add_all(const peat_kernel *ks, int n)
{
    for (int k = 0; k < n; k++) {
        peat_kernel c = ks[k];
        c.flags |= PEAT_KERNEL_REENTRANT; /* the built-in kernels keep no state between calls */
        PEAT_TRY(peat_registry_add(&c));
    }
    return PEAT_OK;
}
