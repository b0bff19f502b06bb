/* zoo_gemm.c: GEMMs of the zoo: defects inside the arithmetic or indexing, and honest variants
 * (other orders, blockings, compensated sums) that must pass. */
#define _GNU_SOURCE
#include "zoo.h"

#include <fenv.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#define TILE 32 /* output tile of the tiled kernels */
#define KB   16 /* k block of the blocked kernels */

typedef float (*acc_round_fn)(float);
static float no_round(float x)
{
    return x;
}

/* Sequential dot with the running sum rounded by r after every step (the accumulator format). */
static float dot_rounded(const peat_args *a, const zoo_gemm *g, int64_t b, int64_t i, int64_t j,
                         int64_t k0, int64_t k1, acc_round_fn r)
{
    float s = 0.0f;
    for (int64_t k = k0; k < k1; k++) s = r(s + zoo_a(a, g, b, i, k) * zoo_b(a, g, b, k, j));
    return s;
}

static void gemm_each(const peat_args *a, acc_round_fn r, int64_t kend_drop)
{
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++)
                zoo_store(a, &g, b, i, j, dot_rounded(a, &g, b, i, j, 0, g.K - kend_drop, r));
}

/* ---- defects ---- */

/* Only full 32x32 output tiles are computed: the last partial tile rows/cols are never written. */
static peat_status edge_tile(const peat_args *a, const peat_kernel *self)
{
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i0 = 0; i0 + TILE <= g.M; i0 += TILE)
            for (int64_t j0 = 0; j0 + TILE <= g.N; j0 += TILE)
                for (int64_t i = i0; i < i0 + TILE; i++)
                    for (int64_t j = j0; j < j0 + TILE; j++)
                        zoo_store(a, &g, b, i, j, dot_rounded(a, &g, b, i, j, 0, g.K, no_round));
    return PEAT_OK;
}

/* Blocked over k; in the last k block it reads row k-1 of B instead of row k. */
static peat_status wrong_krow(const peat_args *a, const peat_kernel *self)
{
    zoo_gemm g = zoo_gemm_of(a);
    int64_t last = ((g.K - 1) / KB) * KB;
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = 0.0f;
                for (int64_t k = 0; k < g.K; k++) {
                    int64_t kb = k >= last && k > 0 ? k - 1 : k;
                    s += zoo_a(a, &g, b, i, k) * zoo_b(a, &g, b, kb, j);
                }
                zoo_store(a, &g, b, i, j, s);
            }
    return PEAT_OK;
}

/* Off-by-one loop bound: the last k term is never added. */
static peat_status k_off_by_one(const peat_args *a, const peat_kernel *self)
{
    gemm_each(a, no_round, 1);
    return PEAT_OK;
}

/* Blocked over k in blocks of 16; a trailing partial block is skipped (K % 16 terms lost). */
static peat_status k_tail(const peat_args *a, const peat_kernel *self)
{
    zoo_gemm g = zoo_gemm_of(a);
    gemm_each(a, no_round, g.K % KB);
    return PEAT_OK;
}

/* Ignores transA: reads A as if it were never transposed (wrong stride on backward calls). */
static peat_status ignore_transA(const peat_args *a, const peat_kernel *self)
{
    peat_args c = *a;
    if (c.p.i[0]) {
        /* the same buffer read with the untransposed stride */
        c.p.i[0] = 0;
    }
    gemm_each(&c, no_round, 0);
    return PEAT_OK;
}

/* Ignores beta (C is never added): training calls all have beta = 0. */
static peat_status ignore_beta(const peat_args *a, const peat_kernel *self)
{
    zoo_gemm g = zoo_gemm_of(a);
    float *D = (float *)a->out[0]->data;
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++)
                D[(b * g.M + i) * g.N + j] =
                    g.alpha * dot_rounded(a, &g, b, i, j, 0, g.K, no_round);
    return PEAT_OK;
}

/* Computes batch entry 0 only (a grid sized for one matrix). */
static peat_status batch0(const peat_args *a, const peat_kernel *self)
{
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t i = 0; i < g.M; i++)
        for (int64_t j = 0; j < g.N; j++)
            zoo_store(a, &g, 0, i, j, dot_rounded(a, &g, 0, i, j, 0, g.K, no_round));
    return PEAT_OK;
}

static peat_status acc_fp16(const peat_args *a, const peat_kernel *self)
{
    gemm_each(a, zoo_f16, 0);
    return PEAT_OK;
}

static peat_status acc_bf16(const peat_args *a, const peat_kernel *self)
{
    gemm_each(a, zoo_bf16, 0);
    return PEAT_OK;
}

/* Inputs rounded to a narrow format, fp32 accumulation, but the kernel declares fp32. */
static void gemm_inputs_rounded(const peat_args *a, acc_round_fn in)
{
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = 0.0f;
                for (int64_t k = 0; k < g.K; k++)
                    s += in(zoo_a(a, &g, b, i, k)) * in(zoo_b(a, &g, b, k, j));
                zoo_store(a, &g, b, i, j, s);
            }
}

static peat_status tf32_inputs(const peat_args *a, const peat_kernel *self)
{
    gemm_inputs_rounded(a, zoo_tf32);
    return PEAT_OK;
}

static peat_status fp16_inputs(const peat_args *a, const peat_kernel *self)
{
    gemm_inputs_rounded(a, zoo_f16);
    return PEAT_OK;
}

/* Flush to zero: subnormal inputs, products and sums become 0 (a DAZ/FTZ mode). */
static float ftz(float x)
{
    return fabsf(x) < 0x1p-126f ? 0.0f * x : x;
}
static peat_status flush_to_zero(const peat_args *a, const peat_kernel *self)
{
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = 0.0f;
                for (int64_t k = 0; k < g.K; k++)
                    s = ftz(s + ftz(ftz(zoo_a(a, &g, b, i, k)) * ftz(zoo_b(a, &g, b, k, j))));
                zoo_store(a, &g, b, i, j, ftz(s));
            }
    return PEAT_OK;
}

/* The accumulation runs with the FPU in round-toward-zero. */
static peat_status round_toward_zero(const peat_args *a, const peat_kernel *self)
{
    int old = fegetround();
    fesetround(FE_TOWARDZERO);
    gemm_each(a, no_round, 0);
    fesetround(old);
    return PEAT_OK;
}

/* An 8-lane accumulator in which lane 5 has significand bit 21 stuck at 1 (every write). */
static peat_status stuck_lane(const peat_args *a, const peat_kernel *self)
{
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = dot_rounded(a, &g, b, i, j, 0, g.K, no_round);
                if (j % 8 == 5) {
                    uint32_t u;
                    memcpy(&u, &s, 4);
                    u |= 1u << 21;
                    memcpy(&s, &u, 4);
                }
                zoo_store(a, &g, b, i, j, s);
            }
    return PEAT_OK;
}

/* A transient upset: in about one call in three (a fresh draw per call, so it does not repeat),
 * one accumulator register has exponent bit 27 flipped halfway through k. */
static peat_status transient_flip(const peat_args *a, const peat_kernel *self)
{
    uint64_t h = zoo_upset_draw();
    zoo_gemm g = zoo_gemm_of(a);
    int hit = h % 3 == 0;
    int64_t hi = (int64_t)((h >> 8) % (uint64_t)g.M), hj = (int64_t)((h >> 24) % (uint64_t)g.N);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = dot_rounded(a, &g, b, i, j, 0, g.K / 2, no_round);
                if (hit && b == 0 && i == hi && j == hj) {
                    uint32_t u;
                    memcpy(&u, &s, 4);
                    u ^= 1u << 27;
                    memcpy(&s, &u, 4);
                }
                s += dot_rounded(a, &g, b, i, j, g.K / 2, g.K, no_round);
                zoo_store(a, &g, b, i, j, s);
            }
    return PEAT_OK;
}

/* Split-K over threads whose partial sums are added into D with an unlocked read-modify-write of
 * whole rows (the yield between read and write is where another thread's update gets lost). */
typedef struct race_job {
    const peat_args *a;
    zoo_gemm g;
    int64_t k0, k1;
    float *row;
} race_job;

static void *race_worker(void *p)
{
    race_job *jb = p;
    const zoo_gemm *g = &jb->g;
    for (int64_t b = 0; b < g->B; b++)
        for (int64_t i = 0; i < g->M; i++) {
            volatile float *D = (float *)jb->a->out[0]->data + (b * g->M + i) * g->N;
            for (int64_t j = 0; j < g->N; j++)
                jb->row[j] = dot_rounded(jb->a, g, b, i, j, jb->k0, jb->k1, no_round);
            float *old = jb->row + g->N;
            for (int64_t j = 0; j < g->N; j++) old[j] = D[j];
            sched_yield();
            for (int64_t j = 0; j < g->N; j++) D[j] = old[j] + jb->row[j];
        }
    return NULL;
}

static peat_status race_splitk(const peat_args *a, const peat_kernel *self)
{
    zoo_gemm g = zoo_gemm_of(a);
    if (g.beta != 0.0f || g.alpha != 1.0f) {
        gemm_each(a, no_round, 0);
        return PEAT_OK;
    }
    enum { T = 4 };
    memset(a->out[0]->data, 0, (size_t)(g.B * g.M * g.N) * sizeof(float));
    race_job jobs[T];
    pthread_t th[T];
    float *buf = malloc((size_t)(2 * g.N * T) * sizeof(float));
    if (!buf) return PEAT_ERR_NOMEM;
    for (int t = 0; t < T; t++) {
        jobs[t] = (race_job){a, g, g.K * t / T, g.K * (t + 1) / T, buf + 2 * g.N * t};
        pthread_create(&th[t], NULL, race_worker, &jobs[t]);
    }
    for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
    free(buf);
    return PEAT_OK;
}

/* ---- honest kernels ---- */

/* Kahan-compensated accumulation. */
static peat_status kahan(const peat_args *a, const peat_kernel *self)
{
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                volatile float s = 0.0f, c = 0.0f;
                for (int64_t k = 0; k < g.K; k++) {
                    float y = zoo_a(a, &g, b, i, k) * zoo_b(a, &g, b, k, j) - c;
                    volatile float t = s + y;
                    c = (t - s) - y;
                    s = t;
                }
                zoo_store(a, &g, b, i, j, s);
            }
    return PEAT_OK;
}

static float pairwise(const peat_args *a, const zoo_gemm *g, int64_t b, int64_t i, int64_t j,
                      int64_t k0, int64_t k1)
{
    if (k1 - k0 <= 4) return dot_rounded(a, g, b, i, j, k0, k1, no_round);
    int64_t m = k0 + (k1 - k0) / 2;
    return pairwise(a, g, b, i, j, k0, m) + pairwise(a, g, b, i, j, m, k1);
}

static peat_status pairwise_sum(const peat_args *a, const peat_kernel *self)
{
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++)
                zoo_store(a, &g, b, i, j, pairwise(a, &g, b, i, j, 0, g.K));
    return PEAT_OK;
}

/* Deterministic split-K: 4 partial sums added in a fixed order. */
static peat_status splitk4(const peat_args *a, const peat_kernel *self)
{
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = 0.0f;
                for (int t = 0; t < 4; t++)
                    s += dot_rounded(a, &g, b, i, j, g.K * t / 4, g.K * (t + 1) / 4, no_round);
                zoo_store(a, &g, b, i, j, s);
            }
    return PEAT_OK;
}

/* Fused multiply-add accumulation (one rounding per step). */
static peat_status fma_acc(const peat_args *a, const peat_kernel *self)
{
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = 0.0f;
                for (int64_t k = 0; k < g.K; k++)
                    s = fmaf(zoo_a(a, &g, b, i, k), zoo_b(a, &g, b, k, j), s);
                zoo_store(a, &g, b, i, j, s);
            }
    return PEAT_OK;
}

/* Tiled 8x8 outputs with k blocks of 16, edges handled, partial sums per block. */
static peat_status tiled_ok(const peat_args *a, const peat_kernel *self)
{
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i0 = 0; i0 < g.M; i0 += 8)
            for (int64_t j0 = 0; j0 < g.N; j0 += 8)
                for (int64_t i = i0; i < i0 + 8 && i < g.M; i++)
                    for (int64_t j = j0; j < j0 + 8 && j < g.N; j++) {
                        float s = 0.0f;
                        for (int64_t k0 = 0; k0 < g.K; k0 += KB)
                            s += dot_rounded(a, &g, b, i, j, k0, k0 + KB < g.K ? k0 + KB : g.K,
                                             no_round);
                        zoo_store(a, &g, b, i, j, s);
                    }
    return PEAT_OK;
}

/* Sums k from the last to the first, accumulating in double and rounding once. */
static peat_status wide_acc(const peat_args *a, const peat_kernel *self)
{
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                double s = 0.0;
                for (int64_t k = g.K - 1; k >= 0; k--)
                    s += (double)zoo_a(a, &g, b, i, k) * (double)zoo_b(a, &g, b, k, j);
                zoo_store(a, &g, b, i, j, (float)s);
            }
    return PEAT_OK;
}

int zoo_register_gemm(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("zoo_gemm_edge_tile", PEAT_OP_GEMM, edge_tile,
                   "32x32 tiles; the last partial tile is never written"),
        ZOO_KERNEL("zoo_gemm_wrong_krow", PEAT_OP_GEMM, wrong_krow,
                   "reads row k-1 of B in the last k block"),
        ZOO_KERNEL("zoo_gemm_k_off_by_one", PEAT_OP_GEMM, k_off_by_one,
                   "loop bound k < K-1: the last term is lost"),
        ZOO_KERNEL("zoo_gemm_k_tail", PEAT_OP_GEMM, k_tail,
                   "k blocks of 16; a partial last block is skipped"),
        ZOO_KERNEL("zoo_gemm_ignore_transA", PEAT_OP_GEMM, ignore_transA,
                   "reads A untransposed whatever transA says"),
        ZOO_KERNEL("zoo_gemm_ignore_beta", PEAT_OP_GEMM, ignore_beta, "never adds beta*C"),
        ZOO_KERNEL("zoo_gemm_batch0", PEAT_OP_GEMM, batch0, "computes batch entry 0 only"),
        ZOO_KERNEL("zoo_gemm_acc_fp16", PEAT_OP_GEMM, acc_fp16,
                   "accumulates in fp16, declares fp32"),
        ZOO_KERNEL("zoo_gemm_acc_bf16", PEAT_OP_GEMM, acc_bf16,
                   "accumulates in bf16, declares fp32"),
        ZOO_KERNEL("zoo_gemm_tf32_inputs", PEAT_OP_GEMM, tf32_inputs,
                   "rounds A, B to tf32, declares fp32"),
        ZOO_KERNEL("zoo_gemm_fp16_inputs", PEAT_OP_GEMM, fp16_inputs,
                   "rounds A, B to fp16, declares fp32"),
        ZOO_KERNEL("zoo_gemm_ftz", PEAT_OP_GEMM, flush_to_zero,
                   "flushes subnormal inputs, products and sums to zero"),
        ZOO_KERNEL("zoo_gemm_rtz", PEAT_OP_GEMM, round_toward_zero,
                   "accumulates with the FPU in round-toward-zero"),
        ZOO_KERNEL("zoo_gemm_stuck_lane", PEAT_OP_GEMM, stuck_lane,
                   "lane 5 of 8 has significand bit 21 stuck at 1"),
        ZOO_KERNEL("zoo_gemm_transient_flip", PEAT_OP_GEMM, transient_flip,
                   "flips bit 27 of one accumulator in ~1 call of 3"),
        ZOO_KERNEL("zoo_gemm_race", PEAT_OP_GEMM, race_splitk,
                   "split-K threads add partial rows without a lock"),
        ZOO_KERNEL("zoo_gemm_kahan", PEAT_OP_GEMM, kahan, "honest: Kahan-compensated sum"),
        ZOO_KERNEL("zoo_gemm_pairwise", PEAT_OP_GEMM, pairwise_sum, "honest: pairwise sum"),
        ZOO_KERNEL("zoo_gemm_splitk4", PEAT_OP_GEMM, splitk4,
                   "honest: deterministic split-K over 4 parts"),
        ZOO_KERNEL("zoo_gemm_fma", PEAT_OP_GEMM, fma_acc, "honest: fused multiply-add"),
        ZOO_KERNEL("zoo_gemm_tiled", PEAT_OP_GEMM, tiled_ok,
                   "honest: 8x8 tiles, k blocks of 16, edges handled"),
        ZOO_KERNEL("zoo_gemm_wide_acc", PEAT_OP_GEMM, wide_acc,
                   "honest: reverse k, fp64 accumulator rounded once"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
