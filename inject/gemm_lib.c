/* gemm_lib.c: the library orders of the reorder model: split-K and blocked pairwise sums whose
 * parts are the golden GEMM's own library calls (OpenBLAS's sgemm on one thread, as the golden;
 * the plain forward loop when the golden is the plain loop). They are the orders tuned kernels
 * ship (a serial split-K that accumulates its chunks into the output; a parallel split-K whose
 * partials are reduced as a tree) and run at the library's speed, so the runtime band's reruns
 * train about as fast as the golden run (docs/detector.md, "The band's reorder GEMMs"). */
#include "inject/internal.h"

#include "golden/golden.h"

#include <stdlib.h>
#include <string.h>

typedef struct lib_call {
    int tA, tB;
    int64_t M, N, K;
    const float *A, *B;
} lib_call;

/* Serial split-K: chunk c = [K c / S, K (c + 1) / S) of S = min(split, K) chunks, each one
 * library GEMM that adds alpha times its chunk into D (the first one with the call's beta C, as
 * the golden, the next ones with beta = 1): D = ((alpha p_0 + beta C) + alpha p_1) + ... */
static void lib_split(const lib_call *c, int split, float alpha, float beta, const float *C,
                      float *D)
{
    int64_t S = split < c->K ? split : c->K;
    if (S < 1) S = 1;
    if (beta != 0.0f && C != D) memmove(D, C, (size_t)(c->M * c->N) * sizeof *D);
    for (int64_t q = 0; q < S; q++)
        peat_golden_gemm_krange(c->tA, c->tB, c->M, c->N, c->K, c->K * q / S, c->K * (q + 1) / S,
                                alpha, c->A, c->B, q ? 1.0f : beta, D);
}

/* Blocked pairwise over [lo, hi): a range of fewer than 2 block terms is a leaf, one library
 * GEMM (alpha 1, beta 0) into out; a longer one is halved at lo + (hi - lo) / 2 (both halves
 * keep at least block terms), out = left + right elementwise. tmp[d] holds depth d's right half. */
static void lib_pairwise(const lib_call *c, int64_t block, int64_t lo, int64_t hi, float *out,
                         float **tmp, int depth)
{
    if (hi - lo < 2 * block) {
        peat_golden_gemm_krange(c->tA, c->tB, c->M, c->N, c->K, lo, hi, 1.0f, c->A, c->B, 0.0f,
                                out);
        return;
    }
    int64_t mid = lo + (hi - lo) / 2, n = c->M * c->N;
    float *right = tmp[depth];
    lib_pairwise(c, block, lo, mid, out, tmp, depth + 1);
    lib_pairwise(c, block, mid, hi, right, tmp, depth + 1);
    for (int64_t i = 0; i < n; i++) out[i] += right[i];
}

/* Levels of right halves the tree over K terms needs (its depth below the root). */
static int pairwise_depth(int64_t K, int64_t block)
{
    int d = 0;
    for (int64_t n = K; n >= 2 * block; n -= n / 2) d++; /* the larger half is the deeper one */
    return d;
}

peat_status peat_inject_gemm_lib(const peat_args *a, const peat_inject_gemm_variant *v)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], B = a->p.i[5];
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    int64_t block = v->block > 0 ? v->block : 1;
    int depth = v->order == PEAT_ORDER_BLAS_PAIRWISE ? pairwise_depth(K, block) : 0;
    /* the pairwise sum and its right halves: one M x N buffer a level, plus the sum itself */
    float *buf = NULL, *tmp[64];
    if (v->order == PEAT_ORDER_BLAS_PAIRWISE) {
        buf = malloc(((size_t)(depth + 1) * (size_t)(M * N) + 1) * sizeof *buf);
        if (!buf)
            return PEAT_ERROR(PEAT_ERR_NOMEM, "inject gemm (blas_pairwise): %lldx%lld x %d",
                              (long long)M, (long long)N, depth + 1);
        for (int d = 0; d < depth && d < 64; d++) tmp[d] = buf + (size_t)(d + 1) * (size_t)(M * N);
    }
    for (int64_t b = 0; b < B; b++) {
        lib_call c = {
            tA, tB, M, N, K, peat_f32(a->in[0]) + b * M * K, peat_f32(a->in[1]) + b * K * N};
        const float *C = beta != 0.0f ? peat_f32(a->in[2]) + b * M * N : NULL;
        float *D = peat_f32(a->out[0]) + b * M * N;
        if (v->order == PEAT_ORDER_BLAS_SPLIT) {
            lib_split(&c, v->split > 1 ? v->split : 1, alpha, beta, C, D);
            continue;
        }
        if (K == 0) { /* no terms: the sum is 0, as the golden's */
            for (int64_t i = 0; i < M * N; i++) buf[i] = 0.0f;
        } else {
            lib_pairwise(&c, block, 0, K, buf, tmp, 0);
        }
        /* the golden's epilogue (inject/gemm.c), so only the order differs */
        for (int64_t i = 0; i < M * N; i++)
            D[i] = C ? alpha * buf[i] + beta * C[i] : alpha * buf[i];
    }
    free(buf);
    return PEAT_OK;
}
