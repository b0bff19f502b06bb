/* gemm.c: fp32 GEMM in other summation orders or with a narrow running sum, for the models. */
#include "inject/internal.h"

#include <stdlib.h>
#include <string.h>

static inline float add(const peat_inject_gemm_variant *v, float s, float x)
{
    float r = s + x;
    return v->round_acc ? peat_inject_round(r, v->fmt, v->bits) : r;
}

/* The sums run over a whole output row at once (j innermost, contiguous), each element going
 * through exactly the additions the per-element definition says: s_j = add(s_j, a_k b_kj). */
typedef struct rowsum {
    const peat_inject_gemm_variant *v;
    const float *a;  /* op(A) row i: K values */
    const float *Bt; /* op(B) as K rows of N (contiguous) */
    int64_t N;
    float **scratch; /* pairwise: one row per recursion level */
} rowsum;

/* s_j += x b_j over a k step of the plain (no narrow running sum) fp32 sum, four steps a pass in
 * the same per-element order as four passes (the split-K with atomics' order runs here; the
 * other plain orders run four rows at a time in gemm_rows.c). */
static void acc4(float *restrict s, int64_t N, const float *x, const float *restrict b0,
                 const float *restrict b1, const float *restrict b2, const float *restrict b3)
{
    for (int64_t j = 0; j < N; j++)
        s[j] = (((s[j] + x[0] * b0[j]) + x[1] * b1[j]) + x[2] * b2[j]) + x[3] * b3[j];
}

static void acc1(float *restrict s, int64_t N, float x, const float *restrict b)
{
    for (int64_t j = 0; j < N; j++) s[j] += x * b[j];
}

/* s = sum over k in [lo, hi) in increasing k (or decreasing when rev). */
static void sum_range(const rowsum *R, int64_t lo, int64_t hi, int rev, float *s)
{
    for (int64_t j = 0; j < R->N; j++) s[j] = 0.0f;
    if (R->v->round_acc) {
        for (int64_t t = lo; t < hi; t++) {
            int64_t k = rev ? hi - 1 - (t - lo) : t;
            const float *b = R->Bt + k * R->N;
            for (int64_t j = 0; j < R->N; j++) s[j] = add(R->v, s[j], R->a[k] * b[j]);
        }
        return;
    }
    int64_t t = lo, N = R->N;
    for (; t + 4 <= hi; t += 4) {
        int64_t k[4];
        float x[4];
        for (int q = 0; q < 4; q++) {
            k[q] = rev ? hi - 1 - (t + q - lo) : t + q;
            x[q] = R->a[k[q]];
        }
        acc4(s, N, x, R->Bt + k[0] * N, R->Bt + k[1] * N, R->Bt + k[2] * N, R->Bt + k[3] * N);
    }
    for (; t < hi; t++) {
        int64_t k = rev ? hi - 1 - (t - lo) : t;
        acc1(s, N, R->a[k], R->Bt + k * N);
    }
}

/* Pairwise (cascade) summation: halves summed separately then added, error ~ log2(K) u. */
static void sum_pairwise(const rowsum *R, int64_t lo, int64_t hi, float *out, int depth)
{
    if (hi - lo <= 2) {
        sum_range(R, lo, hi, 0, out);
        return;
    }
    int64_t mid = lo + (hi - lo) / 2;
    float *right = R->scratch[depth];
    sum_pairwise(R, lo, mid, out, depth + 1);
    sum_pairwise(R, mid, hi, right, depth + 1);
    for (int64_t j = 0; j < R->N; j++) out[j] = add(R->v, out[j], right[j]);
}

/* Split-K: S contiguous chunks summed in order, then the partials added in chunk order or, per
 * element, in a random order (what atomics do). */
static void sum_split(const rowsum *R, int64_t K, float *out, float *part, int *perm)
{
    const peat_inject_gemm_variant *v = R->v;
    int S = v->split < K ? v->split : (int)K;
    for (int c = 0; c < S; c++) sum_range(R, K * c / S, K * (c + 1) / S, 0, part + c * R->N);
    for (int64_t j = 0; j < R->N; j++) {
        for (int c = 0; c < S; c++) perm[c] = c;
        if (v->order == PEAT_ORDER_SPLIT_RANDOM)
            for (int c = S - 1; c > 0; c--) { /* Fisher-Yates */
                int r = (int)peat_rng_int(v->rng, (uint64_t)c + 1);
                int t = perm[c];
                perm[c] = perm[r];
                perm[r] = t;
            }
        float s = 0.0f;
        for (int c = 0; c < S; c++) s = add(v, s, part[perm[c] * R->N + j]);
        out[j] = s;
    }
}

static void sum_row(const rowsum *R, int64_t K, float *out, float *part, int *perm)
{
    switch (R->v->order) {
    case PEAT_ORDER_FORWARD:
        sum_range(R, 0, K, 0, out);
        return;
    case PEAT_ORDER_REVERSE:
        sum_range(R, 0, K, 1, out);
        return;
    case PEAT_ORDER_PAIRWISE:
        sum_pairwise(R, 0, K, out, 0);
        return;
    case PEAT_ORDER_SPLIT:
    case PEAT_ORDER_SPLIT_RANDOM:
        sum_split(R, K, out, part, perm);
        return;
    default: /* the library orders go to gemm_lib.c */
        return;
    }
}

typedef struct gemm_ws {
    float *arow, *Bt, *sum, *part, *scratch_mem;
    float *scratch[64];
    int *perm;
} gemm_ws;

static void ws_free(gemm_ws *w)
{
    free(w->arow), free(w->Bt), free(w->sum), free(w->part), free(w->scratch_mem), free(w->perm);
}

static peat_status ws_alloc(gemm_ws *w, int64_t N, int64_t K, int S)
{
    memset(w, 0, sizeof *w);
    w->arow = malloc((size_t)(K + 1) * sizeof(float));
    w->Bt = malloc((size_t)(K * N + 1) * sizeof(float));
    w->sum = malloc((size_t)(N + 1) * sizeof(float));
    w->part = malloc((size_t)(S * N + 1) * sizeof(float));
    w->scratch_mem = malloc((size_t)(64 * N + 1) * sizeof(float));
    w->perm = malloc((size_t)S * sizeof(int));
    if (!w->arow || !w->Bt || !w->sum || !w->part || !w->scratch_mem || !w->perm) {
        ws_free(w);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "inject gemm: K=%lld N=%lld", (long long)K, (long long)N);
    }
    for (int d = 0; d < 64; d++) w->scratch[d] = w->scratch_mem + d * N;
    return PEAT_OK;
}

peat_status peat_inject_gemm(const peat_args *a, const peat_inject_gemm_variant *v)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], B = a->p.i[5];
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    if (v->order == PEAT_ORDER_BLAS_SPLIT || v->order == PEAT_ORDER_BLAS_PAIRWISE)
        return peat_inject_gemm_lib(a, v);
    if (!v->round_acc && v->order != PEAT_ORDER_SPLIT_RANDOM) return peat_inject_gemm_rows(a, v);
    int S = v->split > 1 ? v->split : 1;
    gemm_ws w;
    PEAT_TRY(ws_alloc(&w, N, K, S));
    rowsum R = {v, w.arow, w.Bt, N, w.scratch};
    for (int64_t b = 0; b < B; b++) {
        const float *A = peat_f32(a->in[0]) + b * M * K, *Bm = peat_f32(a->in[1]) + b * K * N;
        const float *C = beta != 0.0f ? peat_f32(a->in[2]) + b * M * N : NULL;
        float *D = peat_f32(a->out[0]) + b * M * N;
        /* op(B) row-major: B itself, or B^T gathered once per batch entry */
        R.Bt = tB ? w.Bt : Bm;
        for (int64_t k = 0; tB && k < K; k++)
            for (int64_t j = 0; j < N; j++) w.Bt[k * N + j] = Bm[j * K + k];
        for (int64_t i = 0; i < M; i++) {
            for (int64_t k = 0; k < K; k++) w.arow[k] = tA ? A[k * M + i] : A[i * K + k];
            sum_row(&R, K, w.sum, w.part, w.perm);
            /* the same epilogue as the golden GEMM, so only the order differs */
            for (int64_t j = 0; j < N; j++)
                D[i * N + j] = C ? alpha * w.sum[j] + beta * C[i * N + j] : alpha * w.sum[j];
        }
    }
    ws_free(&w);
    return PEAT_OK;
}
