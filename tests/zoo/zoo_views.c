/* zoo_views.c: partial tiles behind views: kernels that walk an output in tiles along one axis
 * and never compute the last partial tile (it keeps the zeros PEAT hands out). In the flat view
 * of the output the skipped rows repeat once per head or channel; on the op's own axes they are
 * one edge. */
#include "zoo.h"

#include <stdlib.h>

#define QTILE  4 /* attention: query rows per tile */
#define ROWBLK 4 /* conv: output rows per block */

/* Causal or full attention over [B,H,T,D], query tiles of QTILE rows: only full tiles run. */
static peat_status attention_last_qtile(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t B = a->p.i[0], H = a->p.i[1], T = a->p.i[2], D = a->p.i[3], causal = a->p.i[4];
    float scale = (float)a->p.f[0];
    float *s = malloc((size_t)T * sizeof *s);
    if (!s) return PEAT_ERR_NOMEM;
    const float *Q = a->in[0]->data, *K = a->in[1]->data, *V = a->in[2]->data;
    float *O = a->out[0]->data, *L = a->out[1]->data;
    int64_t full = T / QTILE * QTILE; /* the bug: rows full..T-1 are never visited */
    for (int64_t bh = 0; bh < B * H; bh++) {
        const float *q = Q + bh * T * D, *k = K + bh * T * D, *v = V + bh * T * D;
        for (int64_t i = 0; i < full; i++) {
            int64_t je = causal ? i + 1 : T;
            float mx = -INFINITY, sum = 0.0f;
            for (int64_t j = 0; j < je; j++) {
                float dot = 0.0f;
                for (int64_t e = 0; e < D; e++) dot += q[i * D + e] * k[j * D + e];
                s[j] = scale * dot;
                mx = s[j] > mx ? s[j] : mx;
            }
            for (int64_t j = 0; j < je; j++) sum += s[j] = expf(s[j] - mx);
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

/* Direct NCHW conv2d over output row blocks of ROWBLK rows: only full blocks run. */
static peat_status conv_last_rowblock(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const int64_t *p = a->p.i;
    int64_t N = p[0], C = p[1], H = p[2], W = p[3], O = p[4], KH = p[5], KW = p[6], st = p[7],
            pd = p[8];
    int64_t OH = (H + 2 * pd - KH) / st + 1, OW = (W + 2 * pd - KW) / st + 1;
    int64_t full = OH / ROWBLK * ROWBLK; /* the bug: rows full..OH-1 are never visited */
    const float *x = a->in[0]->data, *w = a->in[1]->data;
    float *y = a->out[0]->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t oh = 0; oh < full; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    float acc = 0.0f;
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t kh = 0; kh < KH; kh++) {
                            int64_t ih = oh * st - pd + kh;
                            if (ih < 0 || ih >= H) continue;
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t iw = ow * st - pd + kw;
                                if (iw < 0 || iw >= W) continue;
                                acc += x[((n * C + c) * H + ih) * W + iw] *
                                       w[((o * C + c) * KH + kh) * KW + kw];
                            }
                        }
                    y[((n * O + o) * OH + oh) * OW + ow] = acc;
                }
    return PEAT_OK;
}

int zoo_register_views(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("zoo_attention_last_qtile", PEAT_OP_ATTENTION, attention_last_qtile,
                   "attention in query tiles of 4: the last partial tile never computed"),
        ZOO_KERNEL("zoo_conv_last_rowblock", PEAT_OP_CONV2D, conv_last_rowblock,
                   "conv2d in output row blocks of 4: the last partial block never computed"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
