/* h2_attn.c: attention backward kernels of the second held-out set. Per head (b, h): P =
 * exp(scale Q K^T - L) (recomputed from the saved L), dV = P^T dO, dP = dO V^T, Dl_i = sum_d
 * dO_id O_id, dS = P (dP - Dl), dQ = scale dS K, dK = scale dS^T Q; masked entries P = dS = 0. */
#include "heldout2.h"

enum { AB_NO_DL, AB_P_BF16, AB_EXP_RATIO, AB_DK_LAST_HEAD };

static peat_status attention_bwd_mode(const peat_args *a, int mode)
{
    int64_t B = a->p.i[0], H = a->p.i[1], T = a->p.i[2], D = a->p.i[3], causal = a->p.i[4];
    float scale = (float)a->p.f[0];
    int64_t TD = T * D;
    float *P = malloc((size_t)(2 * T * T) * sizeof *P);
    if (!P) return PEAT_ERR_NOMEM;
    float *dS = P + T * T;
    for (int64_t bh = 0; bh < B * H; bh++) {
        const float *q = (const float *)a->in[0]->data + bh * TD;
        const float *k = (const float *)a->in[1]->data + bh * TD;
        const float *v = (const float *)a->in[2]->data + bh * TD;
        const float *o = (const float *)a->in[3]->data + bh * TD;
        const float *l = (const float *)a->in[4]->data + bh * T;
        const float *dO = (const float *)a->in[5]->data + bh * TD;
        float *dq = (float *)a->out[0]->data + bh * TD, *dk = (float *)a->out[1]->data + bh * TD;
        float *dv = (float *)a->out[2]->data + bh * TD;
        for (int64_t i = 0; i < T; i++) {
            float Dl = 0.0f;
            for (int64_t e = 0; e < D; e++) Dl += dO[i * D + e] * o[i * D + e];
            if (mode == AB_NO_DL) Dl = 0.0f; /* the bug: the row correction is dropped */
            for (int64_t j = 0; j < T; j++) {
                if (causal && j > i) {
                    P[i * T + j] = 0.0f, dS[i * T + j] = 0.0f;
                    continue;
                }
                float dot = 0.0f, dp = 0.0f;
                for (int64_t e = 0; e < D; e++) dot += q[i * D + e] * k[j * D + e];
                for (int64_t e = 0; e < D; e++) dp += dO[i * D + e] * v[j * D + e];
                float p;
                if (mode == AB_EXP_RATIO) /* exp(s) / exp(L): overflows past s, L ~ 88.7 */
                    p = expf(scale * dot) / expf(l[i]);
                else
                    p = expf(scale * dot - l[i]);
                if (mode == AB_P_BF16) p = zoo_bf16(p);
                P[i * T + j] = p, dS[i * T + j] = p * (dp - Dl);
            }
        }
        int skip_dk = mode == AB_DK_LAST_HEAD && bh == B * H - 1;
        for (int64_t t = 0; t < T; t++)
            for (int64_t e = 0; e < D; e++) {
                float aq = 0.0f, ak = 0.0f, av = 0.0f;
                for (int64_t u = 0; u < T; u++) {
                    aq += dS[t * T + u] * k[u * D + e];
                    ak += dS[u * T + t] * q[u * D + e];
                    av += P[u * T + t] * dO[u * D + e];
                }
                dq[t * D + e] = scale * aq, dv[t * D + e] = av;
                dk[t * D + e] = skip_dk ? 0.0f : scale * ak;
            }
    }
    free(P);
    return PEAT_OK;
}

/* dS = P dP: the softmax-backward correction Dl (rowsum of dO * O) dropped. */
static peat_status attention_bwd_no_dl(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return attention_bwd_mode(a, AB_NO_DL);
}
/* The recomputed probabilities P held in bf16 (for the dV and dS products). */
static peat_status attention_bwd_p_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return attention_bwd_mode(a, AB_P_BF16);
}
/* P recomputed as exp(s) / exp(L) instead of exp(s - L): the same value to a few ulps while both
 * exponentials are finite and normal; Inf / Inf (NaN) or 0 past fp32's exponent range. */
static peat_status attention_bwd_exp_ratio(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return attention_bwd_mode(a, AB_EXP_RATIO);
}
/* The last (batch, head) block's dK is never written back (zero); every other output exact. */
static peat_status attention_bwd_dk_last_head(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return attention_bwd_mode(a, AB_DK_LAST_HEAD);
}

int h2_register_attention(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h2_attention_bwd_no_dl", PEAT_OP_ATTENTION_BWD, attention_bwd_no_dl,
                   "attention backward with dS = P dP (row correction Dl dropped)"),
        ZOO_KERNEL("h2_attention_bwd_p_bf16", PEAT_OP_ATTENTION_BWD, attention_bwd_p_bf16,
                   "attention backward with the recomputed P held in bf16"),
        ZOO_KERNEL("h2_attention_bwd_exp_ratio", PEAT_OP_ATTENTION_BWD, attention_bwd_exp_ratio,
                   "attention backward recomputing P as exp(s)/exp(L)"),
        ZOO_KERNEL("h2_attention_bwd_dk_last_head", PEAT_OP_ATTENTION_BWD,
                   attention_bwd_dk_last_head,
                   "attention backward leaving the last head's dK zero"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
