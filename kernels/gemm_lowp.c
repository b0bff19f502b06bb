/* gemm_lowp.c: reduced-precision-input, fp32-accumulate GEMM candidates (gemm_bf16, gemm_fp16):
 * the mixed-precision GEMMs users build; and the fp8 GEMM candidate (gemm_fp8_new), which reads
 * fp8 values as they are and applies its two scales' fp32 product to the fp32 sums. */
#include "kernels/kcommon.h"
#include "peat/backend.h"
#include "kernels/kernels.h"

#include <stdlib.h>

/* A and B are rounded to the kernel's declared input format (in_dtype: bf16 or fp16) as such a
 * kernel loads them (F32 storage with rounding at the boundary is numerically identical to
 * bf16/fp16 storage); products and sums are fp32 through the blocked loop; C (when beta != 0)
 * stays fp32 like the fp32 C of a mixed-precision cuBLAS call. D may alias C, so each batch's
 * product goes to a scratch matrix before the epilogue. */
static peat_status gemm_lowp(const peat_args *a, const peat_kernel *self)
{
    int fp8 = self->op == PEAT_OP_GEMM_FP8;
    float (*rnd)(float) = self->in_dtype == PEAT_DTYPE_BF16 ? peat_round_bf16 : peat_round_f16;
    PEAT_TRY(peat_kernels_io_check(a, self));
    int64_t ta = a->p.i[0], tb = a->p.i[1], M = a->p.i[2], N = a->p.i[3], K = a->p.i[4];
    int64_t batch = a->p.i[5] > 0 ? a->p.i[5] : 1;
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    int64_t na = M * K, nb = K * N, nd = M * N;
    float *buf = malloc((size_t)(na + nb + nd) * sizeof *buf);
    if (!buf)
        return PEAT_ERROR(PEAT_ERR_NOMEM, "%s: scratch of %lld floats", self->name,
                          (long long)(na + nb + nd));
    float *ah = buf, *bh = buf + na, *acc = bh + nb;
    const float *A = peat_f32(a->in[0]), *B = peat_f32(a->in[1]);
    const float *C = a->p.f[1] != 0.0 ? peat_f32(a->in[2]) : NULL;
    float *Dm = peat_f32(a->out[0]);
    peat_status st = PEAT_OK;
    for (int64_t b = 0; b < batch && st == PEAT_OK; b++) {
        for (int64_t i = 0; i < na; i++) ah[i] = fp8 ? A[b * na + i] : rnd(A[b * na + i]);
        for (int64_t i = 0; i < nb; i++) bh[i] = fp8 ? B[b * nb + i] : rnd(B[b * nb + i]);
        peat_kernels_view va = ta ? (peat_kernels_view){ah, 1, M} : (peat_kernels_view){ah, K, 1};
        peat_kernels_view vb = tb ? (peat_kernels_view){bh, 1, K} : (peat_kernels_view){bh, N, 1};
        st = peat_kernels_gemm_blocked(M, N, K, va, vb, acc, N, 0, &self->cfg);
        for (int64_t i = 0; st == PEAT_OK && i < nd; i++) {
            float d = fp8 ? acc[i] * ((float)a->p.f[0] * (float)a->p.f[2]) : alpha * acc[i];
            if (C) d += beta * C[b * nd + i];
            Dm[b * nd + i] = d;
        }
    }
    free(buf);
    return st;
}

static const peat_kernel lowp_kernels[] = {
    {.name = "gemm_fp16",
     .op = PEAT_OP_GEMM,
     .role = PEAT_ROLE_CANDIDATE,
     .backend = PEAT_BACKEND_HOST,
     .in_dtype = PEAT_DTYPE_F16,
     .out_dtype = PEAT_DTYPE_F32,
     .acc_dtype = PEAT_DTYPE_F32,
     .cfg = {.tile_m = 32, .tile_n = 64, .tile_k = 64, .threads = 1, .vec_width = 1},
     .fn = gemm_lowp,
     .desc = "GEMM with A,B rounded to fp16, fp32 accumulate (32x64x64 blocks)"},
    {.name = "gemm_bf16",
     .op = PEAT_OP_GEMM,
     .role = PEAT_ROLE_CANDIDATE,
     .backend = PEAT_BACKEND_HOST,
     .in_dtype = PEAT_DTYPE_BF16,
     .out_dtype = PEAT_DTYPE_F32,
     .acc_dtype = PEAT_DTYPE_F32,
     .cfg = {.tile_m = 32, .tile_n = 64, .tile_k = 64, .threads = 1, .vec_width = 1},
     .fn = gemm_lowp,
     .desc = "GEMM with A,B rounded to bf16, fp32 accumulate (32x64x64 blocks)"},
    {.name = "gemm_fp8_new",
     .op = PEAT_OP_GEMM_FP8,
     .role = PEAT_ROLE_CANDIDATE,
     .backend = PEAT_BACKEND_HOST,
     .in_dtype = PEAT_DTYPE_F32,
     .out_dtype = PEAT_DTYPE_F32,
     .acc_dtype = PEAT_DTYPE_F32,
     .cfg = {.tile_m = 32, .tile_n = 64, .tile_k = 128, .threads = 1, .vec_width = 1},
     .fn = gemm_lowp,
     .desc = "fp8 GEMM (e4m3/e5m2 values), fp32 sums in 128-deep K blocks, the scales' fp32 "
             "product applied"},
};

peat_status peat_kernels_register_lowp(void)
{
    return peat_kernels_add_all(lowp_kernels, (int)(sizeof lowp_kernels / sizeof lowp_kernels[0]));
}
