/* zoo_gqa.c: a grouped-query attention backward whose dK and dV take only the first query head
 * of each group (the others' contributions dropped), written as the plain math path. */
#include "zoo.h"

#include <stdlib.h>

static peat_status gqa_bwd_first_head(const peat_args *a, const peat_kernel *self)
{
    int64_t B = a->p.i[0], H = a->p.i[1], T = a->p.i[2], D = a->p.i[3], causal = a->p.i[4];
    int64_t Hkv = a->p.i[5] > 0 ? a->p.i[5] : H, G = H / Hkv;
    float scale = (float)a->p.f[0];
    const float *Q = a->in[0]->data, *K = a->in[1]->data, *V = a->in[2]->data;
    const float *O = a->in[3]->data, *L = a->in[4]->data, *dO = a->in[5]->data;
    float *dQ = a->out[0]->data, *dK = a->out[1]->data, *dV = a->out[2]->data;
    memset(dK, 0, (size_t)(B * Hkv * T * D) * sizeof *dK);
    memset(dV, 0, (size_t)(B * Hkv * T * D) * sizeof *dV);
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t h = bh % H, kv = bh / H * Hkv + h / G, TD = T * D;
        const float *q = Q + bh * TD, *k = K + kv * TD, *v = V + kv * TD, *o = O + bh * TD;
        const float *l = L + bh * T, *go = dO + bh * TD;
        float *gq = dQ + bh * TD;
        int first = h % G == 0; /* the defect: the group's other heads never reach dK, dV */
        for (int64_t i = 0; i < T; i++) {
            float dl = 0.0f;
            for (int64_t d = 0; d < D; d++) dl += go[i * D + d] * o[i * D + d];
            for (int64_t d = 0; d < D; d++) gq[i * D + d] = 0.0f;
            for (int64_t j = 0; j < (causal ? i + 1 : T); j++) {
                float s = 0.0f, dp = 0.0f;
                for (int64_t d = 0; d < D; d++) s += q[i * D + d] * k[j * D + d];
                for (int64_t d = 0; d < D; d++) dp += go[i * D + d] * v[j * D + d];
                float p = expf(scale * s - l[i]), ds = p * (dp - dl) * scale;
                for (int64_t d = 0; d < D; d++) {
                    gq[i * D + d] += ds * k[j * D + d];
                    if (first) {
                        dK[kv * TD + j * D + d] += ds * q[i * D + d];
                        dV[kv * TD + j * D + d] += p * go[i * D + d];
                    }
                }
            }
        }
    }
    return PEAT_OK;
}

int zoo_register_gqa(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("zoo_attention_gqa_bwd_first_head", PEAT_OP_ATTENTION_BWD, gqa_bwd_first_head,
                   "grouped-query backward: dK, dV from the first query head of each group only"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
