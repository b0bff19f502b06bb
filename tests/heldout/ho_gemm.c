/* ho_gemm.c: held-out GEMMs: a half-precision tail block, a k-step reduction rounding toward
 * zero, denormal inputs treated as zero, a square-shape fast path, a column-tail mask off by one,
 * a strided-batched launch one entry short, alpha applied twice; and an honest kernel with eight
 * interleaved accumulators. */
#include "heldout.h"

/* fp32 dot of output (b, i, j) over k in [k0, k1), in k order */
static float dot(const peat_args *a, const zoo_gemm *g, int64_t b, int64_t i, int64_t j, int64_t k0,
                 int64_t k1)
{
    float s = 0.0f;
    for (int64_t k = k0; k < k1; k++) s += zoo_a(a, g, b, i, k) * zoo_b(a, g, b, k, j);
    return s;
}

/* REDUCED_PRECISION. k runs in blocks of 32; the full blocks go through the fp32 path, but the
 * last k block (the remainder handler, written for a half-precision MMA tile and reused here) keeps
 * its partial sum in an fp16 accumulator before adding it to the fp32 one. Only part of the
 * reduction loses precision: all of it when K <= 32, the last 32 terms otherwise. */
static peat_status lastk_fp16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    int64_t last = g.K > 0 ? (g.K - 1) / 32 * 32 : 0;
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = dot(a, &g, b, i, j, 0, last), t = 0.0f;
                for (int64_t k = last; k < g.K; k++)
                    t = zoo_f16(t + zoo_a(a, &g, b, i, k) * zoo_b(a, &g, b, k, j));
                zoo_store(a, &g, b, i, j, s + t);
            }
    return PEAT_OK;
}

/* TRUNCATION. The k loop runs in steps of 4 (one 4-deep MMA per step); each step's 4-term partial
 * is an ordinary fp32 dot, but the accumulation of the steps' partials and the alpha / beta
 * epilogue use round-toward-zero adds (the __fadd_rz / __fmaf_rz intrinsics where the _rn ones
 * were meant): K/4 + 1 roundings, every one biased toward zero. */
static peat_status splitk_rz(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    float *D = a->out[0]->data;
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = 0.0f;
                for (int64_t k0 = 0; k0 < g.K; k0 += 4)
                    s = ho_add_rz(s, dot(a, &g, b, i, j, k0, k0 + 4 < g.K ? k0 + 4 : g.K));
                int64_t o = (b * g.M + i) * g.N + j;
                float c = g.beta != 0.0f ? ((const float *)a->in[2]->data)[o] : 0.0f;
                D[o] =
                    g.beta != 0.0f ? ho_fma_rz(g.alpha, s, g.beta * c) : ho_rz((double)g.alpha * s);
            }
    return PEAT_OK;
}

/* FTZ. The operand loads run with denormals-are-zero: a subnormal element of A or B reads as a
 * signed 0 (products and sums keep gradual underflow, only the inputs are flushed). */
static peat_status daz_inputs(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = 0.0f;
                for (int64_t k = 0; k < g.K; k++)
                    s += ho_ftz(zoo_a(a, &g, b, i, k)) * ho_ftz(zoo_b(a, &g, b, k, j));
                zoo_store(a, &g, b, i, j, s);
            }
    return PEAT_OK;
}

/* STRUCTURAL. Square problems (M == N) take a "symmetric-friendly" fast path whose store writes the
 * tile column-major: D[j][i] receives element (i, j). Every non-square call is right; square ones
 * come out transposed (plus beta C read at the transposed place). */
static peat_status square_transposed(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    int sq = g.M == g.N;
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = dot(a, &g, b, i, j, 0, g.K);
                if (sq)
                    zoo_store(a, &g, b, j, i, s);
                else
                    zoo_store(a, &g, b, i, j, s);
            }
    return PEAT_OK;
}

/* STRUCTURAL. Output columns in tiles of 16; when N is not a multiple of 16 the last (partial) tile
 * masks its loads with `jj < N % 16 - 1` (off by one): its last column never loads A or B, so its
 * accumulator stays 0 and the epilogue stores alpha 0 + beta C there. Calls with N % 16 == 0 are
 * exact. */
static peat_status ntail_mask(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    int64_t rem = g.N % 16, j0 = g.N - rem;
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                int live = j < j0 || j - j0 < rem - 1;
                zoo_store(a, &g, b, i, j, live ? dot(a, &g, b, i, j, 0, g.K) : 0.0f);
            }
    return PEAT_OK;
}

/* STRUCTURAL. Batched calls (batch > 1) go through a strided-batched launch whose count is taken
 * as the last batch index (batch - 1): the last matrix of the batch is never computed and its
 * output keeps what the buffer held. Single-matrix calls take the plain path and are right. */
static peat_status skip_last_batch(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    int64_t nb = g.B > 1 ? g.B - 1 : 1;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++)
                zoo_store(a, &g, b, i, j, dot(a, &g, b, i, j, 0, g.K));
    return PEAT_OK;
}

/* WRONG_RESULT. A "fused scale" folds alpha into the A operand as it is loaded, and the epilogue,
 * unchanged, still multiplies by alpha: D = alpha^2 A B + beta C. Exact when alpha == 1 (most
 * calls); every element of a call with alpha != 1 (attention's scaled products) is off by the
 * factor alpha. */
static peat_status alpha_twice(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = 0.0f;
                for (int64_t k = 0; k < g.K; k++)
                    s += (g.alpha * zoo_a(a, &g, b, i, k)) * zoo_b(a, &g, b, k, j);
                zoo_store(a, &g, b, i, j, s);
            }
    return PEAT_OK;
}

/* Honest (PASS). Eight accumulators, term k into lane k mod 8 (an 8-wide SIMD register), reduced
 * at the end as ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)); fp32 throughout. */
static peat_status acc8(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float l[8] = {0};
                for (int64_t k = 0; k < g.K; k++)
                    l[k % 8] += zoo_a(a, &g, b, i, k) * zoo_b(a, &g, b, k, j);
                zoo_store(a, &g, b, i, j,
                          ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])));
            }
    return PEAT_OK;
}

int ho_register_gemm(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("ho_gemm_lastk_fp16", PEAT_OP_GEMM, lastk_fp16,
                   "last k block of 32 accumulated in fp16, the rest in fp32"),
        ZOO_KERNEL("ho_gemm_splitk_rz", PEAT_OP_GEMM, splitk_rz,
                   "4-deep k steps' partials and epilogue added with round-toward-zero"),
        ZOO_KERNEL("ho_gemm_daz_inputs", PEAT_OP_GEMM, daz_inputs,
                   "subnormal A and B elements read as zero (DAZ loads)"),
        ZOO_KERNEL("ho_gemm_square_transposed", PEAT_OP_GEMM, square_transposed,
                   "square (M == N) fast path stores the result transposed"),
        ZOO_KERNEL("ho_gemm_ntail_mask", PEAT_OP_GEMM, ntail_mask,
                   "partial last column tile masks off its last column (N % 16 != 0)"),
        ZOO_KERNEL("ho_gemm_skip_last_batch", PEAT_OP_GEMM, skip_last_batch,
                   "strided-batched launch of batch - 1 entries: last matrix never computed"),
        ZOO_KERNEL("ho_gemm_alpha_twice", PEAT_OP_GEMM, alpha_twice,
                   "alpha folded into A's loads and applied again in the epilogue"),
        ZOO_KERNEL("ho_gemm_acc8", PEAT_OP_GEMM, acc8,
                   "honest: 8 interleaved fp32 accumulators reduced pairwise"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
