/* gemm_rows.c: the reorder models' plain fp32 sums (forward, reverse, pairwise, split-K in chunk
 * order) four output rows at a time: each element goes through exactly the additions its order's
 * per-element definition says (tests/test_inject.c checks it bit for bit), while a load of B
 * serves four rows. The runtime band's reruns train with these GEMMs. */
#include "inject/internal.h"

#include <stdlib.h>
#include <string.h>

#define RB 4 /* rows a tile */

typedef struct tile {
    const float *a;  /* op(A)'s RB rows, K apart (rows past M are zeros, their sums dropped) */
    const float *Bt; /* op(B) as K rows of N */
    int64_t N, K;
    float **scratch; /* pairwise: one RB x N tile per recursion level */
} tile;

/* s[r][j] += a[r][k..k+3] b[k..k+3][j], the four k in order, for the RB rows. */
static void acc4(float *restrict s, int64_t N, const float *a, int64_t K, const float *restrict b0,
                 const float *restrict b1, const float *restrict b2, const float *restrict b3)
{
    for (int r = 0; r < RB; r++) {
        float x0 = a[r * K], x1 = a[r * K + 1], x2 = a[r * K + 2], x3 = a[r * K + 3];
        float *restrict sr = s + r * N;
        for (int64_t j = 0; j < N; j++)
            sr[j] = (((sr[j] + x0 * b0[j]) + x1 * b1[j]) + x2 * b2[j]) + x3 * b3[j];
    }
}

/* s = sum over k in [lo, hi), increasing (or decreasing when rev), for the RB rows. */
static void t_range(const tile *T, int64_t lo, int64_t hi, int rev, float *restrict s)
{
    int64_t N = T->N, K = T->K;
    memset(s, 0, (size_t)(RB * N) * sizeof *s);
    int64_t t = lo;
    for (; t + 4 <= hi; t += 4) {
        if (!rev) {
            const float *b = T->Bt + t * N;
            acc4(s, N, T->a + t, K, b, b + N, b + 2 * N, b + 3 * N);
            continue;
        }
        /* k = hi-1-(t-lo) down to hi-4-(t-lo): gathered into increasing slots */
        int64_t k0 = hi - 1 - (t - lo);
        float x[RB * 4];
        for (int r = 0; r < RB; r++)
            for (int q = 0; q < 4; q++) x[r * 4 + q] = T->a[r * K + k0 - q];
        const float *b = T->Bt + k0 * N;
        acc4(s, N, x, 4, b, b - N, b - 2 * N, b - 3 * N);
    }
    for (; t < hi; t++) {
        int64_t k = rev ? hi - 1 - (t - lo) : t;
        const float *restrict b = T->Bt + k * N;
        for (int r = 0; r < RB; r++) {
            float x = T->a[r * K + k], *restrict sr = s + r * N;
            for (int64_t j = 0; j < N; j++) sr[j] += x * b[j];
        }
    }
}

/* A pairwise node of 1-4 terms in one pass, in the tree's own order (gemm.c's pair_leaf). */
static void t_leaf(const tile *T, int64_t lo, int64_t n, float *restrict out)
{
    int64_t N = T->N, K = T->K;
    const float *restrict b0 = T->Bt + lo * N; /* rows past n: never read */
    const float *restrict b1 = n > 1 ? b0 + N : b0, *restrict b2 = n > 2 ? b1 + N : b1;
    const float *restrict b3 = n > 3 ? b2 + N : b2;
    for (int r = 0; r < RB; r++) {
        const float *a = T->a + r * K + lo;
        float *restrict o = out + r * N;
        if (n == 1)
            for (int64_t j = 0; j < N; j++) o[j] = 0.0f + a[0] * b0[j];
        else if (n == 2)
            for (int64_t j = 0; j < N; j++) o[j] = (0.0f + a[0] * b0[j]) + a[1] * b1[j];
        else if (n == 3)
            for (int64_t j = 0; j < N; j++)
                o[j] = (0.0f + a[0] * b0[j]) + ((0.0f + a[1] * b1[j]) + a[2] * b2[j]);
        else
            for (int64_t j = 0; j < N; j++)
                o[j] =
                    ((0.0f + a[0] * b0[j]) + a[1] * b1[j]) + ((0.0f + a[2] * b2[j]) + a[3] * b3[j]);
    }
}

static void t_pairwise(const tile *T, int64_t lo, int64_t hi, float *restrict out, int depth)
{
    if (hi - lo <= 4) {
        t_leaf(T, lo, hi - lo, out);
        return;
    }
    int64_t mid = lo + (hi - lo) / 2;
    float *restrict right = T->scratch[depth];
    t_pairwise(T, lo, mid, out, depth + 1);
    t_pairwise(T, mid, hi, right, depth + 1);
    for (int64_t e = 0; e < RB * T->N; e++) out[e] += right[e];
}

/* Split-K in chunk order: S chunks summed forward, then s = ((0 + p_0) + p_1) + ... */
static void t_split(const tile *T, int S, float *restrict out, float *restrict part)
{
    int64_t n = RB * T->N, K = T->K;
    S = S < K ? S : (int)K;
    for (int c = 0; c < S; c++) t_range(T, K * c / S, K * (c + 1) / S, 0, part + c * n);
    memset(out, 0, (size_t)n * sizeof *out);
    for (int c = 0; c < S; c++)
        for (int64_t e = 0; e < n; e++) out[e] += part[c * n + e];
}

static void t_sum(const tile *T, const peat_inject_gemm_variant *v, float *out, float *part)
{
    switch (v->order) {
    case PEAT_ORDER_REVERSE:
        t_range(T, 0, T->K, 1, out);
        return;
    case PEAT_ORDER_PAIRWISE:
        t_pairwise(T, 0, T->K, out, 0);
        return;
    case PEAT_ORDER_SPLIT:
        t_split(T, v->split > 1 ? v->split : 1, out, part);
        return;
    default:
        t_range(T, 0, T->K, 0, out);
    }
}

/* Packs op(A)'s rows i0 .. i0+RB-1 (zeros past M) and op(B) of batch entry b. */
static void pack_rows(const float *A, int tA, int64_t M, int64_t K, int64_t i0, float *a)
{
    for (int r = 0; r < RB; r++)
        for (int64_t k = 0; k < K; k++)
            a[r * K + k] = i0 + r >= M ? 0.0f : tA ? A[k * M + i0 + r] : A[(i0 + r) * K + k];
}

peat_status peat_inject_gemm_rows(const peat_args *a, const peat_inject_gemm_variant *v)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], B = a->p.i[5];
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    int S = v->order == PEAT_ORDER_SPLIT && v->split > 1 ? v->split : 1, levels = 2;
    for (int64_t k = K; k > 4; k = (k + 1) / 2) levels++;
    size_t n = (size_t)(RB * N);
    float *mem = malloc(((size_t)(RB * K) + (size_t)(K * N) + n * (size_t)(1 + S + levels) + 1) *
                        sizeof *mem);
    float *scratch[64];
    if (!mem)
        return PEAT_ERROR(PEAT_ERR_NOMEM, "inject gemm: K=%lld N=%lld", (long long)K, (long long)N);
    float *arow = mem, *Bt = arow + RB * K, *sum = Bt + K * N, *part = sum + n;
    for (int d = 0; d < levels && d < 64; d++) scratch[d] = part + n * (size_t)(S + d);
    tile T = {arow, Bt, N, K, scratch};
    for (int64_t b = 0; b < B; b++) {
        const float *A = peat_f32(a->in[0]) + b * M * K, *Bm = peat_f32(a->in[1]) + b * K * N;
        const float *C = beta != 0.0f ? peat_f32(a->in[2]) + b * M * N : NULL;
        float *D = peat_f32(a->out[0]) + b * M * N;
        T.Bt = tB ? Bt : Bm;
        for (int64_t k = 0; tB && k < K; k++)
            for (int64_t j = 0; j < N; j++) Bt[k * N + j] = Bm[j * K + k];
        for (int64_t i0 = 0; i0 < M; i0 += RB) {
            pack_rows(A, tA, M, K, i0, arow);
            t_sum(&T, v, sum, part);
            /* the same epilogue as the golden GEMM, so only the order differs */
            for (int64_t i = i0; i < M && i < i0 + RB; i++)
                for (int64_t j = 0; j < N; j++) {
                    float s = sum[(i - i0) * N + j];
                    D[i * N + j] = C ? alpha * s + beta * C[i * N + j] : alpha * s;
                }
        }
    }
    free(mem);
    return PEAT_OK;
}
