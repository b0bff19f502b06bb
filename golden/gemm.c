/* gemm.c: exact (fp64 accumulation) and golden (plain sequential fp32) GEMM, and its magnitude. */
#include "golden/golden.h"

#include <math.h>
#include <stdlib.h>

/* Columns per block: a block's accumulator row (fp64: 2 KiB) stays in L1 while the k loop streams
 * the packed B block. Blocking over columns and packing change no element's operation order: each
 * element is still summed over k in order, so results are bit-identical to the plain triple loop
 * (tests/test_golden.c checks it). */
#define GEMM_NB 256

/* op(X) of a row-major X stored rows x cols before transposition, packed as its rows r x c
 * (float copy, or double, optionally |x|): the kernels then read both operands contiguously. */
static void pack_f32(const float *X, int tX, int64_t r, int64_t c, float *P)
{
    for (int64_t i = 0; i < r; i++)
        for (int64_t k = 0; k < c; k++) P[i * c + k] = tX ? X[k * r + i] : X[i * c + k];
}

static void pack_f64(const float *X, int tX, int64_t r, int64_t c, int absval, double *P)
{
    for (int64_t i = 0; i < r; i++)
        for (int64_t k = 0; k < c; k++) {
            double v = tX ? X[k * r + i] : X[i * c + k];
            P[i * c + k] = absval ? fabs(v) : v;
        }
}

/* D (M x N) = A (M x K) B (K x N), fp64, each element summed over k in order. */
static void mm_f64(const double *restrict A, const double *restrict B, int64_t M, int64_t N,
                   int64_t K, double *restrict D)
{
    for (int64_t jb = 0; jb < N; jb += GEMM_NB) {
        int64_t nb = N - jb < GEMM_NB ? N - jb : GEMM_NB;
        for (int64_t i = 0; i < M; i++) {
            double *restrict d = D + i * N + jb;
            for (int64_t j = 0; j < nb; j++) d[j] = 0.0;
            const double *a = A + i * K;
            int64_t k = 0;
            /* four k steps per pass over d: each element still adds its terms in k order, one
             * rounding per add, but d is loaded and stored a quarter as often */
            for (; k + 4 <= K; k += 4) {
                const double *restrict b0 = B + k * N + jb, *restrict b1 = b0 + N;
                const double *restrict b2 = b1 + N, *restrict b3 = b2 + N;
                for (int64_t j = 0; j < nb; j++)
                    d[j] = (((d[j] + a[k] * b0[j]) + a[k + 1] * b1[j]) + a[k + 2] * b2[j]) +
                           a[k + 3] * b3[j];
            }
            for (; k < K; k++) {
                const double *restrict b = B + k * N + jb;
                for (int64_t j = 0; j < nb; j++) d[j] += a[k] * b[j];
            }
        }
    }
}

/* The same in fp32 (the golden order: sequential k per element, one rounding per add). */
static void mm_f32(const float *restrict A, const float *restrict B, int64_t M, int64_t N,
                   int64_t K, float *restrict D)
{
    for (int64_t jb = 0; jb < N; jb += GEMM_NB) {
        int64_t nb = N - jb < GEMM_NB ? N - jb : GEMM_NB;
        for (int64_t i = 0; i < M; i++) {
            float *restrict d = D + i * N + jb;
            for (int64_t j = 0; j < nb; j++) d[j] = 0.0f;
            const float *a = A + i * K;
            int64_t k = 0;
            /* four k steps per pass over d: each element still adds its terms in k order, one
             * rounding per add, but d is loaded and stored a quarter as often */
            for (; k + 4 <= K; k += 4) {
                const float *restrict b0 = B + k * N + jb, *restrict b1 = b0 + N;
                const float *restrict b2 = b1 + N, *restrict b3 = b2 + N;
                for (int64_t j = 0; j < nb; j++)
                    d[j] = (((d[j] + a[k] * b0[j]) + a[k + 1] * b1[j]) + a[k + 2] * b2[j]) +
                           a[k + 3] * b3[j];
            }
            for (; k < K; k++) {
                const float *restrict b = B + k * N + jb;
                for (int64_t j = 0; j < nb; j++) d[j] += a[k] * b[j];
            }
        }
    }
}

/* alpha op(A) op(B) + beta C in fp64 into out (M x N per batch), or with absval the magnitude
 * |alpha| |op(A)| |op(B)| + |beta| |C|. Products of fp32 values are exact in fp64; the fp64 sum's
 * error (~K 2^-53) is far below the fp32 errors being measured (~K 2^-24). */
static peat_status gemm_f64(const peat_args *a, int absval, double *out)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], B = a->p.i[5];
    double alpha = absval ? fabs(a->p.f[0]) : a->p.f[0],
           beta = absval ? fabs(a->p.f[1]) : a->p.f[1];
    double *pa = malloc((size_t)(M * K + K * N + 1) * sizeof *pa);
    if (!pa)
        return PEAT_ERROR(PEAT_ERR_NOMEM, "gemm fp64 packing (%lldx%lldx%lld)", (long long)M,
                          (long long)N, (long long)K);
    double *pb = pa + M * K;
    for (int64_t b = 0; b < B; b++) {
        const float *C = beta != 0.0 ? peat_f32(a->in[2]) + b * M * N : NULL;
        double *D = out + b * M * N;
        pack_f64(peat_f32(a->in[0]) + b * M * K, tA, M, K, absval, pa);
        pack_f64(peat_f32(a->in[1]) + b * K * N, tB, K, N, absval, pb);
        mm_f64(pa, pb, M, N, K, D);
        for (int64_t i = 0; i < M * N; i++) {
            double c = C ? (absval ? fabs((double)C[i]) : (double)C[i]) : 0.0;
            D[i] = alpha * D[i] + (C ? beta * c : 0.0);
        }
    }
    free(pa);
    return PEAT_OK;
}

static peat_status gemm_exact(const peat_args *a, const peat_kernel *self)
{
    return gemm_f64(a, 0, peat_f64(a->out[0]));
}

/* Golden: each output element summed over k in order in fp32, then scaled: the reference every
 * fp32 GEMM is compared with. */
static peat_status gemm_golden(const peat_args *a, const peat_kernel *self)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], B = a->p.i[5];
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    float *pa = malloc((size_t)(M * K + K * N + 1) * sizeof *pa);
    if (!pa) return PEAT_ERROR(PEAT_ERR_NOMEM, "gemm_golden packing");
    float *pb = pa + M * K;
    for (int64_t b = 0; b < B; b++) {
        const float *C = beta != 0.0f ? peat_f32(a->in[2]) + b * M * N : NULL;
        float *D = peat_f32(a->out[0]) + b * M * N;
        pack_f32(peat_f32(a->in[0]) + b * M * K, tA, M, K, pa);
        pack_f32(peat_f32(a->in[1]) + b * K * N, tB, K, N, pb);
        mm_f32(pa, pb, M, N, K, D);
        for (int64_t i = 0; i < M * N; i++) D[i] = C ? alpha * D[i] + beta * C[i] : alpha * D[i];
    }
    free(pa);
    return PEAT_OK;
}

/* mag_ij = sum_k |alpha a_ik b_kj| + |beta c_ij|: the classic bound's right-hand side. */
peat_status peat_golden_gemm_magnitude(const peat_args *a, double *mag)
{
    return gemm_f64(a, 1, mag);
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
         .cfg = {.threads = 1, .vec_width = 1},
         .fn = gemm_exact,
         .desc = "fp64-accumulating reference GEMM"},
        {.name = "gemm_golden",
         .op = PEAT_OP_GEMM,
         .role = PEAT_ROLE_GOLDEN,
         .backend = "cpu",
         .in_dtype = PEAT_DTYPE_F32,
         .out_dtype = PEAT_DTYPE_F32,
         .acc_dtype = PEAT_DTYPE_F32,
         .cfg = {.threads = 1, .vec_width = 1},
         .fn = gemm_golden,
         .desc = "trusted fp32 GEMM, sequential k order"},
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) PEAT_TRY(peat_registry_add(&ks[i]));
    return PEAT_OK;
}
