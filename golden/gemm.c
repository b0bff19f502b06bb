/* gemm.c: exact (fp64 accumulation) and golden (plain sequential fp32) GEMM, and its magnitude. */
#include "golden/golden.h"

#include <math.h>
#include <stdlib.h>

/* Element (r,c) of op(X) for a row-major X stored as rows x cols before transposition. */
static inline float opA(const float *A, int tA, int64_t M, int64_t K, int64_t i, int64_t k)
{
    return tA ? A[k * M + i] : A[i * K + k];
}
static inline float opB(const float *B, int tB, int64_t K, int64_t N, int64_t k, int64_t j)
{
    return tB ? B[j * K + k] : B[k * N + j];
}

/* Exact: products of fp32 values are exact in fp64; the fp64 sum's error (~K 2^-53) is far below
 * the fp32 errors being measured (~K 2^-24). */
static peat_status gemm_exact(const peat_args *a, const peat_kernel *self)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], B = a->p.i[5];
    double alpha = a->p.f[0], beta = a->p.f[1];
    double *acc = malloc((size_t)N * sizeof *acc);
    if (!acc) return PEAT_ERROR(PEAT_ERR_NOMEM, "gemm_exact row");
    for (int64_t b = 0; b < B; b++) {
        const float *A = peat_f32(a->in[0]) + b * M * K, *Bm = peat_f32(a->in[1]) + b * K * N;
        const float *C = beta != 0.0 ? peat_f32(a->in[2]) + b * M * N : NULL;
        double *D = peat_f64(a->out[0]) + b * M * N;
        for (int64_t i = 0; i < M; i++) {
            for (int64_t j = 0; j < N; j++) acc[j] = 0.0;
            for (int64_t k = 0; k < K; k++) {
                double x = opA(A, tA, M, K, i, k);
                for (int64_t j = 0; j < N; j++) acc[j] += x * (double)opB(Bm, tB, K, N, k, j);
            }
            for (int64_t j = 0; j < N; j++)
                D[i * N + j] = alpha * acc[j] + (C ? beta * (double)C[i * N + j] : 0.0);
        }
    }
    free(acc);
    return PEAT_OK;
}

/* Golden: each output element summed over k in order in fp32, then scaled: the reference every
 * fp32 GEMM is compared with. The i-k-j loop keeps that order per element while streaming B. */
static peat_status gemm_golden(const peat_args *a, const peat_kernel *self)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], B = a->p.i[5];
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    float *acc = malloc((size_t)N * sizeof *acc);
    if (!acc) return PEAT_ERROR(PEAT_ERR_NOMEM, "gemm_golden row");
    for (int64_t b = 0; b < B; b++) {
        const float *A = peat_f32(a->in[0]) + b * M * K, *Bm = peat_f32(a->in[1]) + b * K * N;
        const float *C = beta != 0.0f ? peat_f32(a->in[2]) + b * M * N : NULL;
        float *D = peat_f32(a->out[0]) + b * M * N;
        for (int64_t i = 0; i < M; i++) {
            for (int64_t j = 0; j < N; j++) acc[j] = 0.0f;
            for (int64_t k = 0; k < K; k++) {
                float x = opA(A, tA, M, K, i, k);
                for (int64_t j = 0; j < N; j++) acc[j] += x * opB(Bm, tB, K, N, k, j);
            }
            for (int64_t j = 0; j < N; j++)
                D[i * N + j] = C ? alpha * acc[j] + beta * C[i * N + j] : alpha * acc[j];
        }
    }
    free(acc);
    return PEAT_OK;
}

/* mag_ij = sum_k |alpha a_ik b_kj| + |beta c_ij|: the classic bound's right-hand side. */
peat_status peat_golden_gemm_magnitude(const peat_args *a, double *mag)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], B = a->p.i[5];
    double alpha = fabs(a->p.f[0]), beta = fabs(a->p.f[1]);
    for (int64_t b = 0; b < B; b++) {
        const float *A = peat_f32(a->in[0]) + b * M * K, *Bm = peat_f32(a->in[1]) + b * K * N;
        const float *C = beta != 0.0 ? peat_f32(a->in[2]) + b * M * N : NULL;
        double *D = mag + b * M * N;
        for (int64_t i = 0; i < M; i++) {
            for (int64_t j = 0; j < N; j++) D[i * N + j] = 0.0;
            for (int64_t k = 0; k < K; k++) {
                double x = fabs((double)opA(A, tA, M, K, i, k));
                for (int64_t j = 0; j < N; j++)
                    D[i * N + j] += x * fabs((double)opB(Bm, tB, K, N, k, j));
            }
            for (int64_t j = 0; j < N; j++)
                D[i * N + j] = alpha * D[i * N + j] + (C ? beta * fabs((double)C[i * N + j]) : 0.0);
        }
    }
    return PEAT_OK;
}

peat_status peat_golden_register_gemm(void)
{
    static const peat_kernel ks[] = {
        {.name = "gemm_exact",
         .op = PEAT_OP_GEMM,
         .role = PEAT_ROLE_EXACT,
         .backend = "cpu",
         .in_dtype = PEAT_DTYPE_F32,
         .out_dtype = PEAT_DTYPE_F64,
         .acc_dtype = PEAT_DTYPE_F64,
         .fn = gemm_exact,
         .desc = "fp64-accumulating reference GEMM"},
        {.name = "gemm_golden",
         .op = PEAT_OP_GEMM,
         .role = PEAT_ROLE_GOLDEN,
         .backend = "cpu",
         .in_dtype = PEAT_DTYPE_F32,
         .out_dtype = PEAT_DTYPE_F32,
         .acc_dtype = PEAT_DTYPE_F32,
         .fn = gemm_golden,
         .desc = "trusted fp32 GEMM, sequential k order"},
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) PEAT_TRY(peat_registry_add(&ks[i]));
    return PEAT_OK;
}
