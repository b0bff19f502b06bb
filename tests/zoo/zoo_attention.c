/* zoo_attention.c: attention kernels of the zoo ([B,H,T,D]; outputs O and the row logsumexp
 * L): a causal mask off by one, a wrong scale, softmax without max subtraction, and an honest
 * online (flash-style) kernel. */
#include "zoo.h"

#include <stdlib.h>

typedef struct adims {
    int64_t B, H, T, D, causal;
    float scale;
} adims;

/* mask_shift: keys j < i + 1 + mask_shift are visible (0 = correct); scale_fix: use
 * 1/sqrt(T) instead of the given scale; no_max: exp without max subtraction. */
typedef struct attn_bug {
    int mask_shift, scale_fix, no_max;
} attn_bug;

static peat_status attn(const peat_args *a, attn_bug bug)
{
    adims d = {a->p.i[0], a->p.i[1], a->p.i[2], a->p.i[3], a->p.i[4], (float)a->p.f[0]};
    float scale = bug.scale_fix ? 1.0f / sqrtf((float)d.T) : d.scale;
    float *s = malloc((size_t)d.T * sizeof *s);
    if (!s) return PEAT_ERR_NOMEM;
    const float *Q = a->in[0]->data, *K = a->in[1]->data, *V = a->in[2]->data;
    float *O = a->out[0]->data, *L = a->out[1]->data;
    for (int64_t bh = 0; bh < d.B * d.H; bh++) {
        const float *q = Q + bh * d.T * d.D, *k = K + bh * d.T * d.D, *v = V + bh * d.T * d.D;
        for (int64_t i = 0; i < d.T; i++) {
            int64_t je = d.causal ? i + 1 + bug.mask_shift : d.T;
            if (je > d.T) je = d.T;
            float mx = -INFINITY, sum = 0.0f;
            for (int64_t j = 0; j < je; j++) {
                float dot = 0.0f;
                for (int64_t e = 0; e < d.D; e++) dot += q[i * d.D + e] * k[j * d.D + e];
                s[j] = scale * dot;
                mx = s[j] > mx ? s[j] : mx;
            }
            if (bug.no_max) mx = 0.0f;
            for (int64_t j = 0; j < je; j++) sum += s[j] = expf(s[j] - mx);
            for (int64_t e = 0; e < d.D; e++) {
                float acc = 0.0f;
                for (int64_t j = 0; j < je; j++) acc += s[j] * v[j * d.D + e];
                O[(bh * d.T + i) * d.D + e] = acc / sum;
            }
            L[bh * d.T + i] = mx + logf(sum);
        }
    }
    free(s);
    return PEAT_OK;
}

static peat_status mask_off_by_one(const peat_args *a, const peat_kernel *self)
{
    return attn(a, (attn_bug){1, 0, 0});
}
static peat_status wrong_scale(const peat_args *a, const peat_kernel *self)
{
    return attn(a, (attn_bug){0, 1, 0});
}
static peat_status no_max(const peat_args *a, const peat_kernel *self)
{
    return attn(a, (attn_bug){0, 0, 1});
}

/* Online softmax over key blocks of 8: running max, rescaled sum and output accumulator. */
static peat_status online(const peat_args *a, const peat_kernel *self)
{
    adims d = {a->p.i[0], a->p.i[1], a->p.i[2], a->p.i[3], a->p.i[4], (float)a->p.f[0]};
    float *acc = malloc((size_t)d.D * sizeof *acc);
    if (!acc) return PEAT_ERR_NOMEM;
    const float *Q = a->in[0]->data, *K = a->in[1]->data, *V = a->in[2]->data;
    float *O = a->out[0]->data, *L = a->out[1]->data;
    for (int64_t bh = 0; bh < d.B * d.H; bh++) {
        const float *q = Q + bh * d.T * d.D, *k = K + bh * d.T * d.D, *v = V + bh * d.T * d.D;
        for (int64_t i = 0; i < d.T; i++) {
            int64_t je = d.causal ? i + 1 : d.T;
            float mx = -INFINITY, sum = 0.0f;
            for (int64_t e = 0; e < d.D; e++) acc[e] = 0.0f;
            for (int64_t j = 0; j < je; j++) {
                float dot = 0.0f;
                for (int64_t e = 0; e < d.D; e++) dot += q[i * d.D + e] * k[j * d.D + e];
                float sc = d.scale * dot;
                if (sc > mx) {
                    float c = expf(mx - sc);
                    sum *= c;
                    for (int64_t e = 0; e < d.D; e++) acc[e] *= c;
                    mx = sc;
                }
                float p = expf(sc - mx);
                sum += p;
                for (int64_t e = 0; e < d.D; e++) acc[e] += p * v[j * d.D + e];
            }
            for (int64_t e = 0; e < d.D; e++) O[(bh * d.T + i) * d.D + e] = acc[e] / sum;
            L[bh * d.T + i] = mx + logf(sum);
        }
    }
    free(acc);
    return PEAT_OK;
}

int zoo_register_attention(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("zoo_attention_mask_off_by_one", PEAT_OP_ATTENTION, mask_off_by_one,
                   "causal mask lets each query see the next key"),
        ZOO_KERNEL("zoo_attention_wrong_scale", PEAT_OP_ATTENTION, wrong_scale,
                   "uses 1/sqrt(T) instead of the given scale"),
        ZOO_KERNEL("zoo_attention_no_max", PEAT_OP_ATTENTION, no_max,
                   "exp without max subtraction: overflows on large scores"),
        ZOO_KERNEL("zoo_attention_online", PEAT_OP_ATTENTION, online,
                   "honest: online softmax, one pass over keys"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
