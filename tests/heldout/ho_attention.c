/* ho_attention.c: held-out fused attention ([B, H, T, D]; outputs O and the row logsumexp L of
 * scale Q K^T after the causal mask): a scale of 1/D, P rounded to bf16 before P V, the row max
 * kept in fp16, V read from head 0 whatever the head, and a transient upset in O. Each is the same
 * row loop with one thing changed. */
#include "heldout.h"

#include <stdlib.h>

typedef struct attn_bug {
    int inv_d;   /* scale 1 / D instead of the given scale */
    int p_bf16;  /* P rounded to bf16 for the P V product (the row sum stays fp32) */
    int max_f16; /* the row max stored in fp16 */
    int v_head0; /* V's offset ignores the head index */
} attn_bug;

static peat_status attn(const peat_args *a, attn_bug bug)
{
    int64_t B = a->p.i[0], H = a->p.i[1], T = a->p.i[2], D = a->p.i[3], causal = a->p.i[4];
    float scale = bug.inv_d ? 1.0f / (float)D : (float)a->p.f[0];
    float *s = malloc((size_t)(T > 0 ? T : 1) * sizeof *s);
    if (!s) return PEAT_ERR_NOMEM;
    const float *Q = a->in[0]->data, *K = a->in[1]->data, *V = a->in[2]->data;
    float *O = a->out[0]->data, *L = a->out[1]->data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            int64_t bh = b * H + h;
            const float *q = Q + bh * T * D, *k = K + bh * T * D;
            const float *v = V + (bug.v_head0 ? b * H : bh) * T * D;
            for (int64_t i = 0; i < T; i++) {
                int64_t je = causal ? i + 1 : T;
                float mx = -INFINITY, sum = 0.0f;
                for (int64_t j = 0; j < je; j++) {
                    float dot = 0.0f;
                    for (int64_t e = 0; e < D; e++) dot += q[i * D + e] * k[j * D + e];
                    s[j] = scale * dot;
                    mx = s[j] > mx ? s[j] : mx;
                }
                if (bug.max_f16) mx = zoo_f16(mx);
                for (int64_t j = 0; j < je; j++) {
                    sum += s[j] = expf(s[j] - mx);
                    if (bug.p_bf16) s[j] = zoo_bf16(s[j]);
                }
                for (int64_t e = 0; e < D; e++) {
                    float acc = 0.0f;
                    for (int64_t j = 0; j < je; j++) acc += s[j] * v[j * D + e];
                    O[(bh * T + i) * D + e] = acc / sum;
                }
                L[bh * T + i] = mx + logf(sum);
            }
        }
    free(s);
    return PEAT_OK;
}

/* WRONG_RESULT. The kernel computes its own softmax scale as 1 / D (the head dimension, without
 * the square root) and ignores the one it is given (1 / sqrt(D)): scores sqrt(D) times too flat,
 * every O and L wrong. */
static peat_status scale_inv_d(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return attn(a, (attn_bug){.inv_d = 1});
}

/* REDUCED_PRECISION. FlashAttention-style: the unnormalised probabilities are cast to bf16 for the
 * second product (P V), while the row sum and L use their fp32 values: only the P V part of the
 * computation is at bf16 precision. */
static peat_status p_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return attn(a, (attn_bug){.p_bf16 = 1});
}

/* RANGE. The row max lives in a half-precision register. Softmax does not care which shift it is
 * given (the shift cancels, L = shift + log(sum) stays consistent), so the fp16 rounding of the max
 * costs nothing, until a score passes fp16's range (|s| > 65504): the shift becomes Inf, every
 * exp(s - Inf) is 0, and O = 0 / 0, L = Inf - Inf are NaN. */
static peat_status max_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return attn(a, (attn_bug){.max_f16 = 1});
}

/* STRUCTURAL. The V pointer is offset by the batch index only (b H T D, the head term left out):
 * head 0 is right, every other head attends over head 0's values. With the gpt flow's two heads,
 * exactly one head of every batch entry is wrong. */
static peat_status v_head0(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return attn(a, (attn_bug){.v_head0 = 1});
}

/* BITFLIP. A right attention, but in about one call in three (a fresh draw per call) one element
 * of O has bit 24 (an exponent bit) inverted: a transient upset in the output tile. */
static peat_status o_flip(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    peat_status st = attn(a, (attn_bug){0});
    if (st != PEAT_OK) return st;
    int64_t n = a->p.i[0] * a->p.i[1] * a->p.i[2] * a->p.i[3];
    uint64_t h = zoo_upset_draw();
    if (h % 3 == 0 && n > 0) {
        float *O = a->out[0]->data;
        int64_t e = (int64_t)((h >> 8) % (uint64_t)n);
        O[e] = ho_flip(O[e], 24);
    }
    return PEAT_OK;
}

int ho_register_attention(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("ho_attention_scale_inv_d", PEAT_OP_ATTENTION, scale_inv_d,
                   "softmax scale 1/D instead of the given 1/sqrt(D)"),
        ZOO_KERNEL("ho_attention_p_bf16", PEAT_OP_ATTENTION, p_bf16,
                   "P cast to bf16 for P V; row sum and L in fp32"),
        ZOO_KERNEL("ho_attention_max_f16", PEAT_OP_ATTENTION, max_f16,
                   "row max kept in fp16: NaN once a score passes 65504"),
        ZOO_KERNEL("ho_attention_v_head0", PEAT_OP_ATTENTION, v_head0,
                   "V offset ignores the head index: heads > 0 read head 0's V"),
        ZOO_KERNEL("ho_attention_o_flip", PEAT_OP_ATTENTION, o_flip,
                   "one O element has bit 24 flipped in ~1 call of 3"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
