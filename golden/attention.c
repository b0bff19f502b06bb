/* attention.c: exact (fp64) and golden (fp32) scaled-dot-product attention, forward and backward.
 */
#include "golden/golden.h"
#include "golden/refkit.h"

#include <math.h>
#include <stdlib.h>

/* Layout [B,H,T,D]; one (b,h) head is a contiguous T x D block, its L a contiguous T row.
 * Forward:  S = scale Q K^T (j > i masked out when causal), L_i = logsumexp_j S_ij,
 *           O_i = sum_j exp(S_ij - L_i) V_j.
 * Backward: P = exp(scale Q K^T - L) (recomputed from the given L, as FlashAttention does),
 *           dV = P^T dO, dP = dO V^T, Dl_i = sum_d dO_id O_id, dS = P (dP - Dl),
 *           dQ = scale dS K, dK = scale dS^T Q. Masked entries have P = 0 and take no part. */

typedef struct attn_dims {
    int64_t B, H, T, D, causal;
    int64_t Hkv; /* K/V heads (grouped-query attention: H / Hkv query heads share one) */
} attn_dims;

static attn_dims attn_dims_of(const peat_op_params *p)
{
    attn_dims d = {p->i[0], p->i[1], p->i[2], p->i[3], p->i[4], p->i[5] > 0 ? p->i[5] : p->i[1]};
    return d;
}

/* the K/V plane query plane bh reads */
static int64_t attn_kv(const attn_dims *d, int64_t bh)
{
    return bh / d->H * d->Hkv + bh % d->H / (d->H / d->Hkv);
}

/* Keys visible from query i: j < jend(i). */
static int64_t attn_jend(const attn_dims *d, int64_t i)
{
    return d->causal ? i + 1 : d->T;
}

static peat_status attention_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    attn_dims d = attn_dims_of(&a->p);
    double scale = a->p.f[0];
    double *in[3], *s = malloc((size_t)d.T * sizeof *s);
    static const int ix[3] = {0, 1, 2};
    if (!s) return PEAT_ERROR(PEAT_ERR_NOMEM, "attention_exact: score row of %lld", (long long)d.T);
    peat_status st = peat_golden_load_n(a, 3, ix, in);
    if (st != PEAT_OK) {
        free(s);
        return st;
    }
    double *O = peat_f64(a->out[0]), *L = peat_f64(a->out[1]);
    for (int64_t bh = 0; bh < d.B * d.H; bh++) {
        int64_t kv = attn_kv(&d, bh);
        const double *q = in[0] + bh * d.T * d.D, *k = in[1] + kv * d.T * d.D;
        const double *v = in[2] + kv * d.T * d.D;
        for (int64_t i = 0; i < d.T; i++) {
            int64_t je = attn_jend(&d, i);
            double mx = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < je; j++) {
                double dot = 0.0;
                for (int64_t e = 0; e < d.D; e++) dot += q[i * d.D + e] * k[j * d.D + e];
                s[j] = scale * dot;
                mx = s[j] > mx ? s[j] : mx;
            }
            for (int64_t j = 0; j < je; j++) sum += s[j] = exp(s[j] - mx);
            for (int64_t e = 0; e < d.D; e++) {
                double acc = 0.0;
                for (int64_t j = 0; j < je; j++) acc += s[j] * v[j * d.D + e];
                O[(bh * d.T + i) * d.D + e] = acc / sum;
            }
            L[bh * d.T + i] = mx + log(sum);
        }
    }
    peat_golden_free_n(3, in);
    free(s);
    return PEAT_OK;
}

/* The golden's GEMM-shaped parts go through the golden GEMM's library call
 * (peat_golden_gemm_krange: OpenBLAS's sgemm on one thread, or the plain loop with PEAT_BLAS=0),
 * as cuBLAS carries them on NVIDIA: per head S = scale Q K^T (T x T; masked entries computed, then
 * zeroed) and U = P V; the row max, exponentials and sums and O = U / sum stay fp32 loops. */
static peat_status attention_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    attn_dims d = attn_dims_of(&a->p);
    float scale = (float)a->p.f[0];
    float *S = malloc((size_t)(d.T * d.T + d.T) * sizeof *S);
    if (!S) return PEAT_ERROR(PEAT_ERR_NOMEM, "attention_golden: %lld^2 scores", (long long)d.T);
    float *rs = S + d.T * d.T; /* the rows' sums */
    float *O = peat_f32(a->out[0]), *L = peat_f32(a->out[1]);
    for (int64_t bh = 0; bh < d.B * d.H; bh++) {
        int64_t kv = attn_kv(&d, bh);
        const float *q = peat_f32(a->in[0]) + bh * d.T * d.D;
        const float *k = peat_f32(a->in[1]) + kv * d.T * d.D;
        const float *v = peat_f32(a->in[2]) + kv * d.T * d.D;
        float *o = O + bh * d.T * d.D;
        peat_golden_gemm_krange(0, 1, d.T, d.T, d.D, 0, d.D, scale, q, k, 0.0f, S);
        for (int64_t i = 0; i < d.T; i++) {
            int64_t je = attn_jend(&d, i);
            float *s = S + i * d.T, mx = -INFINITY, sum = 0.0f;
            for (int64_t j = 0; j < je; j++) mx = s[j] > mx ? s[j] : mx;
            for (int64_t j = 0; j < je; j++) sum += s[j] = expf(s[j] - mx);
            for (int64_t j = je; j < d.T; j++) s[j] = 0.0f; /* masked: no part in P V */
            rs[i] = sum;
            L[bh * d.T + i] = mx + logf(sum);
        }
        /* a masked P entry is 0, and 0 x a non-finite value of V is NaN: with one in V the
         * rows sum over their visible keys alone, as the exact kernel does */
        int finite = 1;
        for (int64_t x = 0; x < d.T * d.D && finite; x++) finite = isfinite(v[x]);
        if (finite || !d.causal)
            peat_golden_gemm_krange(0, 0, d.T, d.D, d.T, 0, d.T, 1.0f, S, v, 0.0f, o);
        else
            for (int64_t i = 0; i < d.T; i++)
                for (int64_t e = 0; e < d.D; e++) {
                    float acc = 0.0f;
                    for (int64_t j = 0; j < attn_jend(&d, i); j++)
                        acc += S[i * d.T + j] * v[j * d.D + e];
                    o[i * d.D + e] = acc;
                }
        for (int64_t i = 0; i < d.T; i++)
            for (int64_t e = 0; e < d.D; e++) o[i * d.D + e] /= rs[i];
    }
    free(S);
    return PEAT_OK;
}

/* One head of the backward pass in precision REAL (EXPF: its exponential): dQ, dK, dV from Q,
 * K, V, O, the row logsumexp L and dO, through the head's T x T probabilities P and their
 * gradient dS (scratch): the exact kernel's loop nest, in double (the golden backward below
 * takes the same steps with its five products through the golden GEMM). */
#define ATTN_BWD_HEAD(REAL, EXPF)                                                                  \
    static void attn_bwd_head_##REAL(const attn_dims *d, REAL scale, const REAL *q, const REAL *k, \
                                     const REAL *v, const REAL *o, const REAL *l, const REAL *dO,  \
                                     REAL *dq, REAL *dk, REAL *dv, REAL *P, REAL *dS)              \
    {                                                                                              \
        for (int64_t i = 0; i < d->T; i++) {                                                       \
            REAL Dl = (REAL)0;                                                                     \
            for (int64_t e = 0; e < d->D; e++) Dl += dO[i * d->D + e] * o[i * d->D + e];           \
            for (int64_t j = 0; j < d->T; j++) {                                                   \
                if (j >= attn_jend(d, i)) {                                                        \
                    P[i * d->T + j] = (REAL)0, dS[i * d->T + j] = (REAL)0;                         \
                    continue;                                                                      \
                }                                                                                  \
                REAL dot = (REAL)0, dp = (REAL)0;                                                  \
                for (int64_t e = 0; e < d->D; e++) dot += q[i * d->D + e] * k[j * d->D + e];       \
                for (int64_t e = 0; e < d->D; e++) dp += dO[i * d->D + e] * v[j * d->D + e];       \
                REAL p = EXPF(scale * dot - l[i]);                                                 \
                P[i * d->T + j] = p, dS[i * d->T + j] = p * (dp - Dl);                             \
            }                                                                                      \
        }                                                                                          \
        for (int64_t t = 0; t < d->T; t++)                                                         \
            for (int64_t e = 0; e < d->D; e++) {                                                   \
                REAL aq = (REAL)0, ak = (REAL)0, av = (REAL)0;                                     \
                for (int64_t u = 0; u < d->T; u++) {                                               \
                    aq += dS[t * d->T + u] * k[u * d->D + e];                                      \
                    ak += dS[u * d->T + t] * q[u * d->D + e];                                      \
                    av += P[u * d->T + t] * dO[u * d->D + e];                                      \
                }                                                                                  \
                dq[t * d->D + e] = scale * aq, dk[t * d->D + e] = scale * ak;                      \
                dv[t * d->D + e] = av;                                                             \
            }                                                                                      \
    }
ATTN_BWD_HEAD(double, exp)

/* The backward kernels hold one head's T x T probabilities and their gradient at a time. */
static peat_status attention_bwd_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    attn_dims d = attn_dims_of(&a->p);
    double scale = a->p.f[0];
    double *in[6];
    static const int ix[6] = {0, 1, 2, 3, 4, 5};
    double *P = malloc((size_t)(d.T * d.T) * sizeof *P),
           *dS = malloc((size_t)(d.T * d.T) * sizeof *dS);
    if (!P || !dS) {
        free(P), free(dS);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "attention_bwd_exact: %lld^2 scratch", (long long)d.T);
    }
    peat_status st = peat_golden_load_n(a, 6, ix, in);
    if (st != PEAT_OK) {
        free(P), free(dS);
        return st;
    }
    double *dQ = peat_f64(a->out[0]), *dK = peat_f64(a->out[1]), *dV = peat_f64(a->out[2]);
    int64_t TD = d.T * d.D;
    /* a K/V head's dK, dV sum over its group's query heads: each head's into gk, gv, added */
    double *gk = malloc((size_t)(2 * TD) * sizeof *gk), *gv = gk ? gk + TD : NULL;
    if (!gk) {
        peat_golden_free_n(6, in);
        free(P), free(dS);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "attention_bwd_exact: dK, dV of one head");
    }
    for (int64_t i = 0; i < d.B * d.Hkv * TD; i++) dK[i] = 0.0, dV[i] = 0.0;
    for (int64_t bh = 0; bh < d.B * d.H; bh++) {
        int64_t kv = attn_kv(&d, bh);
        attn_bwd_head_double(&d, scale, in[0] + bh * TD, in[1] + kv * TD, in[2] + kv * TD,
                             in[3] + bh * TD, in[4] + bh * d.T, in[5] + bh * TD, dQ + bh * TD, gk,
                             gv, P, dS);
        for (int64_t i = 0; i < TD; i++) dK[kv * TD + i] += gk[i], dV[kv * TD + i] += gv[i];
    }
    free(gk);
    peat_golden_free_n(6, in);
    free(P), free(dS);
    return PEAT_OK;
}

/* The golden backward's five products go through the golden GEMM's library call, per head:
 * S = scale Q K^T, dP = dO V^T, dV = P^T dO, dQ = scale dS K, dK = scale dS^T Q; P, Dl and dS
 * are the fp32 loops of the exact kernel (masked entries 0, as there). */
static peat_status attention_bwd_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    attn_dims d = attn_dims_of(&a->p);
    float scale = (float)a->p.f[0];
    float *P = malloc((size_t)(d.T * d.T) * sizeof *P),
          *dS = malloc((size_t)(d.T * d.T) * sizeof *dS);
    if (!P || !dS) {
        free(P), free(dS);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "attention_bwd_golden: %lld^2 scratch", (long long)d.T);
    }
    int64_t TD = d.T * d.D;
    for (int64_t bh = 0; bh < d.B * d.H; bh++) {
        /* the group's first query head writes its K/V head's dK, dV; the others add to them */
        int64_t kv = attn_kv(&d, bh);
        float acc = bh % d.H % (d.H / d.Hkv) ? 1.0f : 0.0f;
        const float *q = peat_f32(a->in[0]) + bh * TD, *k = peat_f32(a->in[1]) + kv * TD;
        const float *v = peat_f32(a->in[2]) + kv * TD, *o = peat_f32(a->in[3]) + bh * TD;
        const float *l = peat_f32(a->in[4]) + bh * d.T, *dO = peat_f32(a->in[5]) + bh * TD;
        float *dq = peat_f32(a->out[0]) + bh * TD, *dk = peat_f32(a->out[1]) + kv * TD;
        float *dv = peat_f32(a->out[2]) + kv * TD;
        peat_golden_gemm_krange(0, 1, d.T, d.T, d.D, 0, d.D, scale, q, k, 0.0f, P);
        peat_golden_gemm_krange(0, 1, d.T, d.T, d.D, 0, d.D, 1.0f, dO, v, 0.0f, dS);
        for (int64_t i = 0; i < d.T; i++) {
            float Dl = 0.0f;
            for (int64_t e = 0; e < d.D; e++) Dl += dO[i * d.D + e] * o[i * d.D + e];
            for (int64_t j = 0; j < d.T; j++) {
                float *p = &P[i * d.T + j], *ds = &dS[i * d.T + j];
                if (j >= attn_jend(&d, i)) {
                    *p = 0.0f, *ds = 0.0f;
                    continue;
                }
                *p = expf(*p - l[i]);
                *ds = *p * (*ds - Dl);
            }
        }
        peat_golden_gemm_krange(1, 0, d.T, d.D, d.T, 0, d.T, 1.0f, P, dO, acc, dv);
        peat_golden_gemm_krange(0, 0, d.T, d.D, d.T, 0, d.T, scale, dS, k, 0.0f, dq);
        peat_golden_gemm_krange(1, 0, d.T, d.D, d.T, 0, d.T, scale, dS, q, acc, dk);
    }
    free(P), free(dS);
    return PEAT_OK;
}

static const peat_kernel attention_kernels[] = {
    PEAT_GOLDEN_EXACT("attention_exact", PEAT_OP_ATTENTION, attention_exact,
                      "softmax(scale QK^T [causal]) V and row logsumexp in fp64"),
    PEAT_GOLDEN_GOLDEN(
        "attention_golden", PEAT_OP_ATTENTION, attention_golden,
        "softmax(scale QK^T [causal]) V and row logsumexp in fp32, products by the golden GEMM"),
    PEAT_GOLDEN_EXACT("attention_bwd_exact", PEAT_OP_ATTENTION_BWD, attention_bwd_exact,
                      "attention backward (dQ, dK, dV) from recomputed P in fp64"),
    PEAT_GOLDEN_GOLDEN(
        "attention_bwd_golden", PEAT_OP_ATTENTION_BWD, attention_bwd_golden,
        "attention backward (dQ, dK, dV) from recomputed P in fp32, products by the golden GEMM"),
};

peat_status peat_golden_register_attention(void)
{
    return peat_golden_add_all(attention_kernels,
                               (int)(sizeof attention_kernels / sizeof attention_kernels[0]));
}
