/* gemm.c: the candidate gemm_new: a cache-blocked, packed, register-tiled fp32 GEMM (BLIS-like),
 * an honest implementation of its own algorithm and summation order. */
#include "kernels/kernels.h"
#include "peat/backend.h"

#include <stdlib.h>
#include <string.h>

enum { MC = 64, KC = 128, NC = 256, MR = 4, NR = 8 };

/* Packs op(A)[i0:i0+mc, k0:k0+kc] into MR-row panels: pa[(ir/MR)*kc*MR + k*MR + r]. */
static void pack_a(const float *A, int tA, int64_t M, int64_t K, int64_t i0, int64_t k0, int64_t mc,
                   int64_t kc, float *pa)
{
    for (int64_t ir = 0; ir < mc; ir += MR)
        for (int64_t k = 0; k < kc; k++)
            for (int64_t r = 0; r < MR; r++) {
                int64_t i = i0 + ir + r, kk = k0 + k;
                float v = ir + r < mc ? (tA ? A[kk * M + i] : A[i * K + kk]) : 0.0f;
                pa[ir * kc + k * MR + r] = v;
            }
}

/* Packs op(B)[k0:k0+kc, j0:j0+nc] into NR-column panels: pb[(jr/NR)*kc*NR + k*NR + c]. */
static void pack_b(const float *B, int tB, int64_t K, int64_t N, int64_t k0, int64_t j0, int64_t kc,
                   int64_t nc, float *pb)
{
    for (int64_t jr = 0; jr < nc; jr += NR)
        for (int64_t k = 0; k < kc; k++)
            for (int64_t c = 0; c < NR; c++) {
                int64_t j = j0 + jr + c, kk = k0 + k;
                float v = jr + c < nc ? (tB ? B[j * K + kk] : B[kk * N + j]) : 0.0f;
                pb[jr * kc + k * NR + c] = v;
            }
}

/* MR x NR register tile with two accumulator sets (even and odd k) that hide the add latency,
 * as a tuned micro-kernel does; the partial sums of this k block start at zero and are added to
 * the output afterwards: the reordering every blocked GEMM makes. Each row's NR sums are one
 * vector held in a register (separate products and sums: this file builds without FMA
 * contraction, so every clone below gives the same bits). */
typedef float v8 __attribute__((vector_size(NR * sizeof(float))));
_Static_assert(MR == 4 && NR == 8, "micro_kernel holds 4 rows of 8");

static inline __attribute__((always_inline)) v8 ld8(const float *p)
{
    v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline __attribute__((always_inline)) void micro_kernel(int64_t kc, const float *pa,
                                                               const float *pb, float acc[MR][NR])
{
    v8 c00 = {0}, c01 = {0}, c02 = {0}, c03 = {0}, c10 = {0}, c11 = {0}, c12 = {0}, c13 = {0};
    int64_t k = 0;
    for (; k + 1 < kc; k += 2) {
        const float *a0 = pa + k * MR, *a1 = a0 + MR;
        v8 b0 = ld8(pb + k * NR), b1 = ld8(pb + (k + 1) * NR);
        c00 = c00 + a0[0] * b0, c10 = c10 + a1[0] * b1;
        c01 = c01 + a0[1] * b0, c11 = c11 + a1[1] * b1;
        c02 = c02 + a0[2] * b0, c12 = c12 + a1[2] * b1;
        c03 = c03 + a0[3] * b0, c13 = c13 + a1[3] * b1;
    }
    if (k < kc) {
        const float *a0 = pa + k * MR;
        v8 b0 = ld8(pb + k * NR);
        c00 = c00 + a0[0] * b0, c01 = c01 + a0[1] * b0;
        c02 = c02 + a0[2] * b0, c03 = c03 + a0[3] * b0;
    }
    v8 t[MR] = {c00 + c10, c01 + c11, c02 + c12, c03 + c13};
    memcpy(acc, t, sizeof t);
}

/* An AVX2 clone where the CPU has it (chosen at load time), without FMA. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define GEMM_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define GEMM_CLONES
#endif

GEMM_CLONES
static peat_status gemm_new(const peat_args *a, const peat_kernel *self)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], Bn = a->p.i[5];
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    float *pa = malloc(sizeof(float) * (size_t)(MC + MR) * KC);
    float *pb = malloc(sizeof(float) * (size_t)(NC + NR) * KC);
    float *acc = malloc(sizeof(float) * (size_t)M * N);
    if (!pa || !pb || !acc) {
        free(pa), free(pb), free(acc);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "gemm_new workspace");
    }
    for (int64_t b = 0; b < Bn; b++) {
        const float *A = peat_f32(a->in[0]) + b * M * K, *Bm = peat_f32(a->in[1]) + b * K * N;
        const float *C = beta != 0.0f ? peat_f32(a->in[2]) + b * M * N : NULL;
        float *D = peat_f32(a->out[0]) + b * M * N;
        memset(acc, 0, sizeof(float) * (size_t)M * N);
        for (int64_t j0 = 0; j0 < N; j0 += NC) {
            int64_t nc = N - j0 < NC ? N - j0 : NC;
            for (int64_t k0 = 0; k0 < K; k0 += KC) {
                int64_t kc = K - k0 < KC ? K - k0 : KC;
                pack_b(Bm, tB, K, N, k0, j0, kc, nc, pb);
                for (int64_t i0 = 0; i0 < M; i0 += MC) {
                    int64_t mc = M - i0 < MC ? M - i0 : MC;
                    pack_a(A, tA, M, K, i0, k0, mc, kc, pa);
                    for (int64_t jr = 0; jr < nc; jr += NR)
                        for (int64_t ir = 0; ir < mc; ir += MR) {
                            float t[MR][NR];
                            micro_kernel(kc, pa + ir * kc, pb + jr * kc, t);
                            for (int r = 0; r < MR && ir + r < mc; r++)
                                for (int q = 0; q < NR && jr + q < nc; q++)
                                    acc[(i0 + ir + r) * N + j0 + jr + q] += t[r][q];
                        }
                }
            }
        }
        /* D may alias C: each element reads C before writing D */
        for (int64_t i = 0; i < M * N; i++)
            D[i] = C ? alpha * acc[i] + beta * C[i] : alpha * acc[i];
    }
    free(pa), free(pb), free(acc);
    return PEAT_OK;
}

peat_status peat_kernels_register_gemm(void)
{
    static const peat_kernel ks[] = {
        {.name = "gemm_new",
         .op = PEAT_OP_GEMM,
         .role = PEAT_ROLE_CANDIDATE,
         .backend = PEAT_BACKEND_HOST,
         .in_dtype = PEAT_DTYPE_F32,
         .out_dtype = PEAT_DTYPE_F32,
         .acc_dtype = PEAT_DTYPE_F32,
         .cfg = {.tile_m = MC, .tile_n = NC, .tile_k = KC, .threads = 1, .vec_width = NR},
         .fn = gemm_new,
         .desc =
             "packed cache-blocked fp32 GEMM, 4x8 register tile, 2 accumulators, k blocks of 128"},
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        peat_kernel c = ks[i];
        c.flags |= PEAT_KERNEL_REENTRANT; /* no state between calls */
        PEAT_TRY(peat_registry_add(&c));
    }
    return PEAT_OK;
}
