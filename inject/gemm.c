/* gemm.c: fp32 GEMM in other summation orders or with a narrow running sum, for the models. */
#include "inject/internal.h"

#include <stdlib.h>

static inline float opA(const float *A, int tA, int64_t M, int64_t K, int64_t i, int64_t k)
{
    return tA ? A[k * M + i] : A[i * K + k];
}
static inline float opB(const float *B, int tB, int64_t K, int64_t N, int64_t k, int64_t j)
{
    return tB ? B[j * K + k] : B[k * N + j];
}

static inline float add(const peat_inject_gemm_variant *v, float s, float x)
{
    float r = s + x;
    return v->round_acc ? peat_inject_round(r, v->fmt, v->bits) : r;
}

static float sum_range(const peat_inject_gemm_variant *v, const float *p, int64_t lo, int64_t hi)
{
    float s = 0.0f;
    for (int64_t k = lo; k < hi; k++) s = add(v, s, p[k]);
    return s;
}

/* Pairwise (cascade) summation: halves summed separately then added, error ~ log2(K) u. */
static float sum_pairwise(const peat_inject_gemm_variant *v, const float *p, int64_t lo, int64_t hi)
{
    if (hi - lo <= 2) return sum_range(v, p, lo, hi);
    int64_t mid = lo + (hi - lo) / 2;
    return add(v, sum_pairwise(v, p, lo, mid), sum_pairwise(v, p, mid, hi));
}

static float sum_products(const peat_inject_gemm_variant *v, const float *p, int64_t K, float *part,
                          int *perm)
{
    switch (v->order) {
    case PEAT_ORDER_FORWARD:
        return sum_range(v, p, 0, K);
    case PEAT_ORDER_REVERSE: {
        float s = 0.0f;
        for (int64_t k = K - 1; k >= 0; k--) s = add(v, s, p[k]);
        return s;
    }
    case PEAT_ORDER_PAIRWISE:
        return sum_pairwise(v, p, 0, K);
    case PEAT_ORDER_SPLIT:
    case PEAT_ORDER_SPLIT_RANDOM: {
        int S = v->split < K ? v->split : (int)K;
        for (int c = 0; c < S; c++) part[c] = sum_range(v, p, K * c / S, K * (c + 1) / S);
        for (int c = 0; c < S; c++) perm[c] = c;
        if (v->order == PEAT_ORDER_SPLIT_RANDOM)
            for (int c = S - 1; c > 0; c--) { /* Fisher-Yates: the order atomics would land in */
                int r = (int)peat_rng_int(v->rng, (uint64_t)c + 1);
                int t = perm[c];
                perm[c] = perm[r];
                perm[r] = t;
            }
        float s = 0.0f;
        for (int c = 0; c < S; c++) s = add(v, s, part[perm[c]]);
        return s;
    }
    }
    return 0.0f;
}

peat_status peat_inject_gemm(const peat_args *a, const peat_inject_gemm_variant *v)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], B = a->p.i[5];
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    int S = v->split > 1 ? v->split : 1;
    float *prod = malloc((size_t)K * sizeof *prod);
    float *part = malloc((size_t)S * sizeof *part);
    int *perm = malloc((size_t)S * sizeof *perm);
    if (!prod || !part || !perm) {
        free(prod);
        free(part);
        free(perm);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "inject gemm: K=%lld", (long long)K);
    }
    for (int64_t b = 0; b < B; b++) {
        const float *A = peat_f32(a->in[0]) + b * M * K, *Bm = peat_f32(a->in[1]) + b * K * N;
        const float *C = beta != 0.0f ? peat_f32(a->in[2]) + b * M * N : NULL;
        float *D = peat_f32(a->out[0]) + b * M * N;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                for (int64_t k = 0; k < K; k++)
                    prod[k] = opA(A, tA, M, K, i, k) * opB(Bm, tB, K, N, k, j);
                float s = sum_products(v, prod, K, part, perm);
                /* the same epilogue as the golden GEMM, so only the order differs */
                D[i * N + j] = C ? alpha * s + beta * C[i * N + j] : alpha * s;
            }
    }
    free(prod);
    free(part);
    free(perm);
    return PEAT_OK;
}
