/* gemm.c: exact (fp64 accumulation) and plain (sequential fp32) GEMM, and its magnitude; the
 * golden GEMM (OpenBLAS) is gemm_blas.c's. */
#include "golden/golden.h"
#include "peat/backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Columns per block: a block's accumulator row (fp64: 2 KiB) stays in L1 while the k loop streams
 * the packed B block. Blocking over columns and packing change no element's operation order: each
 * element is still summed over k in order, so results are bit-identical to the plain triple loop
 * (tests/test_golden.c checks it). */
#define GEMM_NB 256

/* The vector width both kernels declare (.cfg.vec_width): B's packed rows and the accumulator row
 * are padded to whole vectors (zero columns), so every column loop runs whole vectors and no
 * scalar epilogue, and B's rows start on vector boundaries: the cost of a call follows its N
 * rounded up to this width, as the predictor models it, and not where N and the allocation fall.
 * The padded columns are computed and dropped; no element's order changes. */
#define GEMM_VW 4

static int64_t round_up(int64_t n, int64_t m)
{
    return (n + m - 1) / m * m;
}

/* op(X) of a row-major X stored rows x cols before transposition, packed as its rows r x c, rows
 * ld apart, zero-padded (optionally |x|): the kernels then read both operands contiguously. */
#define DEFINE_PACK(NAME, T, ABS)                                                                  \
    static void NAME(const float *X, int tX, int64_t r, int64_t c, int64_t ld, int absval, T *P)   \
    {                                                                                              \
        for (int64_t i = 0; i < r; i++) {                                                          \
            for (int64_t k = 0; k < c; k++) {                                                      \
                T v = tX ? X[k * r + i] : X[i * c + k];                                            \
                P[i * ld + k] = absval ? ABS(v) : v;                                               \
            }                                                                                      \
            for (int64_t k = c; k < ld; k++) P[i * ld + k] = 0;                                    \
        }                                                                                          \
    }
DEFINE_PACK(pack_f32, float, fabsf)
DEFINE_PACK(pack_f64, double, fabs)

/* D (M x N) = A (M x K) B (K x ldb, ldb = N rounded up to GEMM_VW), each element summed over k in
 * order with one rounding per add, in T (double: exact; float: the golden order). Four k steps
 * per pass over the accumulator row, and the last 1-3 in one pass too, so that a step costs about
 * the same wherever K falls against the unroll. */
#define DEFINE_MM(NAME, T)                                                                         \
    static void NAME(const T *restrict A, const T *restrict B, int64_t M, int64_t N, int64_t K,    \
                     int64_t ldb, T *restrict D)                                                   \
    {                                                                                              \
        _Alignas(64) T acc[GEMM_NB];                                                               \
        for (int64_t jb = 0; jb < N; jb += GEMM_NB) {                                              \
            int64_t nb = N - jb < GEMM_NB ? N - jb : GEMM_NB, nv = round_up(nb, GEMM_VW);          \
            for (int64_t i = 0; i < M; i++) {                                                      \
                for (int64_t j = 0; j < nv; j++) acc[j] = 0;                                       \
                const T *a = A + i * K;                                                            \
                int64_t k = 0;                                                                     \
                for (; k + 4 <= K; k += 4) {                                                       \
                    const T *restrict b0 = B + k * ldb + jb, *restrict b1 = b0 + ldb;              \
                    const T *restrict b2 = b1 + ldb, *restrict b3 = b2 + ldb;                      \
                    for (int64_t j = 0; j < nv; j++)                                               \
                        acc[j] =                                                                   \
                            (((acc[j] + a[k] * b0[j]) + a[k + 1] * b1[j]) + a[k + 2] * b2[j]) +    \
                            a[k + 3] * b3[j];                                                      \
                }                                                                                  \
                const T *restrict b0 = B + k * ldb + jb, *restrict b1 = b0 + ldb;                  \
                const T *restrict b2 = b1 + ldb;                                                   \
                if (K - k == 3)                                                                    \
                    for (int64_t j = 0; j < nv; j++)                                               \
                        acc[j] = ((acc[j] + a[k] * b0[j]) + a[k + 1] * b1[j]) + a[k + 2] * b2[j];  \
                else if (K - k == 2)                                                               \
                    for (int64_t j = 0; j < nv; j++)                                               \
                        acc[j] = (acc[j] + a[k] * b0[j]) + a[k + 1] * b1[j];                       \
                else if (K - k == 1)                                                               \
                    for (int64_t j = 0; j < nv; j++) acc[j] += a[k] * b0[j];                       \
                memcpy(D + i * N + jb, acc, (size_t)nb * sizeof *acc);                             \
            }                                                                                      \
        }                                                                                          \
    }
DEFINE_MM(mm_f64, double)
DEFINE_MM(mm_f32, float)

/* One allocation for packed A (M x K) and B (K x ldb), B starting at a 64-byte boundary past A
 * (malloc's blocks are at least 16-byte aligned), as the calibration's round shapes fall. */
static void *pack_alloc(int64_t M, int64_t N, int64_t K, size_t size, int64_t *ldb, int64_t *offb)
{
    *ldb = round_up(N, GEMM_VW);
    *offb = round_up(M * K, (int64_t)(64 / size));
    return malloc((size_t)(*offb + K * *ldb + 1) * size);
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
    int64_t ldb, offb;
    double *pa = pack_alloc(M, N, K, sizeof *pa, &ldb, &offb);
    if (!pa)
        return PEAT_ERROR(PEAT_ERR_NOMEM, "gemm fp64 packing (%lldx%lldx%lld)", (long long)M,
                          (long long)N, (long long)K);
    double *pb = pa + offb;
    for (int64_t b = 0; b < B; b++) {
        const float *C = beta != 0.0 ? peat_f32(a->in[2]) + b * M * N : NULL;
        double *D = out + b * M * N;
        pack_f64(peat_f32(a->in[0]) + b * M * K, tA, M, K, K, absval, pa);
        pack_f64(peat_f32(a->in[1]) + b * K * N, tB, K, N, ldb, absval, pb);
        mm_f64(pa, pb, M, N, K, ldb, D);
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

/* The plain golden (gemm_plain): each output element summed over k in order in fp32, then
 * scaled; the golden itself when no BLAS was built in (gemm_blas.c). */
peat_status peat_golden_gemm_plain_run(const peat_args *a, const peat_kernel *self)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], B = a->p.i[5];
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    int64_t ldb, offb;
    float *pa = pack_alloc(M, N, K, sizeof *pa, &ldb, &offb);
    if (!pa) return PEAT_ERROR(PEAT_ERR_NOMEM, "gemm_golden packing");
    float *pb = pa + offb;
    for (int64_t b = 0; b < B; b++) {
        const float *C = beta != 0.0f ? peat_f32(a->in[2]) + b * M * N : NULL;
        float *D = peat_f32(a->out[0]) + b * M * N;
        pack_f32(peat_f32(a->in[0]) + b * M * K, tA, M, K, K, 0, pa);
        pack_f32(peat_f32(a->in[1]) + b * K * N, tB, K, N, ldb, 0, pb);
        mm_f32(pa, pb, M, N, K, ldb, D);
        for (int64_t i = 0; i < M * N; i++) D[i] = C ? alpha * D[i] + beta * C[i] : alpha * D[i];
    }
    free(pa);
    return PEAT_OK;
}

/* mag_ij = sum_k |alpha a_ik b_kj| + |beta c_ij|: the classic bound's right-hand side. */
/* The fp8 GEMM as a GEMM: its fp8 values are F32 values, the two scales one alpha (the golden
 * applies their fp32 product to the fp32 sums, as cuBLASLt's fp8 GEMM does) */
static peat_args fp8_as_gemm(const peat_args *a)
{
    peat_args b = *a;
    b.op = PEAT_OP_GEMM;
    b.p.f[0] = a->p.f[0] * a->p.f[2];
    b.p.f[2] = 0.0;
    return b;
}

static peat_status gemm_fp8_exact(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    peat_args b = fp8_as_gemm(a);
    return gemm_f64(&b, 0, peat_f64(a->out[0]));
}

static peat_status gemm_fp8_golden(const peat_args *a, const peat_kernel *self)
{
    peat_args b = fp8_as_gemm(a);
    return peat_golden_gemm_blas_run(&b, self);
}

/* One GEMM reference: fp32 inputs, its output and accumulator types, one thread. */
#define GEMM_REF(nm, opk, rl, dt, f, d)                                                            \
    {                                                                                              \
        .name = nm, .op = opk, .role = rl, .backend = PEAT_BACKEND_HOST,                           \
        .in_dtype = PEAT_DTYPE_F32, .out_dtype = dt, .acc_dtype = dt,                              \
        .cfg = {.threads = 1, .vec_width = GEMM_VW}, .fn = f, .desc = d                            \
    }

peat_status peat_golden_register_gemm(void)
{
    static const peat_kernel ks[] = {
        GEMM_REF("gemm_exact", PEAT_OP_GEMM, PEAT_ROLE_EXACT, PEAT_DTYPE_F64, gemm_exact,
                 "fp64-accumulating reference GEMM"),
        GEMM_REF("gemm_golden", PEAT_OP_GEMM, PEAT_ROLE_GOLDEN, PEAT_DTYPE_F32,
                 peat_golden_gemm_blas_run,
                 "trusted fp32 GEMM: OpenBLAS sgemm, one thread (the plain loop without BLAS)"),
        /* registered after gemm_golden, which is the op's golden (the first of its role) */
        GEMM_REF("gemm_plain", PEAT_OP_GEMM, PEAT_ROLE_GOLDEN, PEAT_DTYPE_F32,
                 peat_golden_gemm_plain_run,
                 "plain fp32 GEMM, sequential k order (the golden before OpenBLAS)"),
        GEMM_REF("gemm_fp8_exact", PEAT_OP_GEMM_FP8, PEAT_ROLE_EXACT, PEAT_DTYPE_F64,
                 gemm_fp8_exact, "fp8 GEMM in fp64 (the fp8 values exact, both scales applied)"),
        GEMM_REF("gemm_fp8_golden", PEAT_OP_GEMM_FP8, PEAT_ROLE_GOLDEN, PEAT_DTYPE_F32,
                 gemm_fp8_golden,
                 "fp8 GEMM: the fp8 values through the golden sgemm, fp32 accumulation, the "
                 "scales' product applied to the sums"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        peat_kernel c = ks[i];
        c.flags |= PEAT_KERNEL_REENTRANT; /* no state between calls */
        PEAT_TRY(peat_registry_add(&c));
    }
    return PEAT_OK;
}
