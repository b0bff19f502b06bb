/* zoo_honest_bwd.c: honest kernels in PyTorch's CPU orders for layer norm (forward as
 * x * rstd + (-rstd * mean), backward as a x dy gamma + b x + c), softmax and GELU backward, and
 * attention backward along SDPA's math path (P recomputed by a softmax, dS = P (dP - rowsum(dP P)),
 * q and k scaled by sqrt(scale)); expected PASS. */
#include "zoo.h"

#include <stdlib.h>

/* LayerNormKernelImplInternal: two-pass moments, then Y = (x scale + bias) gamma + beta with
 * scale = rstd, bias = -rstd mean */
static peat_status layernorm_torch(const peat_args *a, const peat_kernel *self)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    float eps = (float)a->p.f[0];
    const float *X = a->in[0]->data, *gm = a->in[1]->data, *bt = a->in[2]->data;
    float *Y = a->out[0]->data, *M = a->out[1]->data, *RS = a->out[2]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *x = X + r * C;
        float s = 0.0f, q = 0.0f;
        for (int64_t j = 0; j < C; j++) s += x[j];
        float mean = s / (float)C;
        for (int64_t j = 0; j < C; j++) q += (x[j] - mean) * (x[j] - mean);
        float rstd = 1.0f / sqrtf(q / (float)C + eps), bias = -rstd * mean;
        for (int64_t j = 0; j < C; j++) Y[r * C + j] = (x[j] * rstd + bias) * gm[j] + bt[j];
        M[r] = mean, RS[r] = rstd;
    }
    return PEAT_OK;
}

/* LayerNormBackwardKernelImplInternal: ds = sum dy gamma x, db = sum dy gamma;
 * b = (db mean - ds) rstd^3 / C, c = -b mean - db rstd / C; dX = rstd dy gamma + b x + c;
 * dgamma += dy (x - mean) rstd, dbeta += dy */
static peat_status layernorm_bwd_torch(const peat_args *a, const peat_kernel *self)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *X = a->in[0]->data, *gm = a->in[1]->data, *mean = a->in[2]->data,
                *rstd = a->in[3]->data, *dY = a->in[4]->data;
    float *dX = a->out[0]->data, *dg = a->out[1]->data, *db = a->out[2]->data;
    float inv = 1.0f / (float)C;
    for (int64_t j = 0; j < C; j++) dg[j] = 0.0f, db[j] = 0.0f;
    for (int64_t r = 0; r < R; r++) {
        const float *x = X + r * C, *dy = dY + r * C;
        float ds = 0.0f, dbs = 0.0f, m = mean[r], rs = rstd[r];
        for (int64_t j = 0; j < C; j++) ds += dy[j] * gm[j] * x[j], dbs += dy[j] * gm[j];
        float b = (dbs * m - ds) * rs * rs * rs * inv, c = -b * m - dbs * rs * inv;
        for (int64_t j = 0; j < C; j++) {
            dX[r * C + j] = rs * dy[j] * gm[j] + b * x[j] + c;
            dg[j] += dy[j] * (x[j] - m) * rs, db[j] += dy[j];
        }
    }
    return PEAT_OK;
}

/* _softmax_backward_data on CPU: dx = y dy - y sum(dy y) */
static peat_status softmax_bwd_torch(const peat_args *a, const peat_kernel *self)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *Y = a->in[0]->data, *dY = a->in[1]->data;
    float *dX = a->out[0]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *y = Y + r * C, *dy = dY + r * C;
        float dot = 0.0f;
        for (int64_t j = 0; j < C; j++) dot += dy[j] * y[j];
        for (int64_t j = 0; j < C; j++) dX[r * C + j] = y[j] * dy[j] - y[j] * dot;
    }
    return PEAT_OK;
}

/* GeluBackward (erf): cdf = 0.5 (1 + erf(x / sqrt2)), pdf = exp(-x^2 / 2) / sqrt(2 pi),
 * dx = dy (cdf + x pdf) */
static peat_status gelu_bwd_torch(const peat_args *a, const peat_kernel *self)
{
    const float *x = a->in[0]->data, *dy = a->in[1]->data;
    float *dx = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float cdf = 0.5f * (1.0f + erff(x[i] * 0.70710678f));
        float pdf = expf(-0.5f * x[i] * x[i]) * 0.39894228f;
        dx[i] = dy[i] * (cdf + x[i] * pdf);
    }
    return PEAT_OK;
}

/* One head of the math-path backward; P, dP scratch of T*T. */
static void sdpa_bwd_head(const float *q, const float *k, const float *v, const float *dO,
                          int64_t T, int64_t D, int causal, float rs, float *P, float *dP,
                          float *dq, float *dk, float *dv)
{
    for (int64_t i = 0; i < T; i++) {
        int64_t n = causal ? i + 1 : T;
        float mx = -INFINITY, sum = 0.0f, dot = 0.0f;
        for (int64_t j = 0; j < T; j++) {
            float s = 0.0f;
            for (int64_t e = 0; e < D; e++) s += (q[i * D + e] * rs) * (k[j * D + e] * rs);
            P[i * T + j] = j < n ? s : -INFINITY;
            mx = j < n && s > mx ? s : mx;
        }
        for (int64_t j = 0; j < T; j++) sum += P[i * T + j] = expf(P[i * T + j] - mx);
        for (int64_t j = 0; j < T; j++) P[i * T + j] *= 1.0f / sum;
        for (int64_t j = 0; j < T; j++) {
            float s = 0.0f;
            for (int64_t e = 0; e < D; e++) s += dO[i * D + e] * v[j * D + e];
            dP[i * T + j] = s, dot += s * P[i * T + j];
        }
        for (int64_t j = 0; j < T; j++) dP[i * T + j] = P[i * T + j] * (dP[i * T + j] - dot);
    }
    for (int64_t t = 0; t < T; t++)
        for (int64_t e = 0; e < D; e++) {
            float aq = 0.0f, ak = 0.0f, av = 0.0f;
            for (int64_t u = 0; u < T; u++) {
                aq += dP[t * T + u] * (k[u * D + e] * rs);
                ak += dP[u * T + t] * (q[u * D + e] * rs);
                av += P[u * T + t] * dO[u * D + e];
            }
            dq[t * D + e] = aq * rs, dk[t * D + e] = ak * rs, dv[t * D + e] = av;
        }
}

static peat_status attention_bwd_math(const peat_args *a, const peat_kernel *self)
{
    int64_t BH = a->p.i[0] * a->p.i[1], T = a->p.i[2], D = a->p.i[3];
    float rs = sqrtf((float)a->p.f[0]);
    float *P = malloc((size_t)(T * T) * sizeof *P), *dP = malloc((size_t)(T * T) * sizeof *dP);
    if (!P || !dP) {
        free(P), free(dP);
        return PEAT_ERR_NOMEM;
    }
    const float *Q = a->in[0]->data, *K = a->in[1]->data, *V = a->in[2]->data, *dO = a->in[5]->data;
    float *dQ = a->out[0]->data, *dK = a->out[1]->data, *dV = a->out[2]->data;
    for (int64_t h = 0; h < BH; h++) {
        int64_t o = h * T * D;
        sdpa_bwd_head(Q + o, K + o, V + o, dO + o, T, D, (int)a->p.i[4], rs, P, dP, dQ + o, dK + o,
                      dV + o);
    }
    free(P), free(dP);
    return PEAT_OK;
}

int zoo_register_honest_bwd(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("zoo_layernorm_torch", PEAT_OP_LAYERNORM, layernorm_torch,
                   "honest: PyTorch CPU layer norm, (x rstd + (-rstd mean)) gamma + beta"),
        ZOO_KERNEL("zoo_layernorm_bwd_torch", PEAT_OP_LAYERNORM_BWD, layernorm_bwd_torch,
                   "honest: PyTorch CPU layer norm backward, rstd dy gamma + b x + c"),
        ZOO_KERNEL("zoo_softmax_bwd_torch", PEAT_OP_SOFTMAX_BWD, softmax_bwd_torch,
                   "honest: PyTorch CPU softmax backward, y dy - y sum(dy y)"),
        ZOO_KERNEL("zoo_gelu_bwd_torch", PEAT_OP_GELU_BWD, gelu_bwd_torch,
                   "honest: PyTorch GELU backward, dy (cdf + x pdf)"),
        ZOO_KERNEL("zoo_attention_bwd_math", PEAT_OP_ATTENTION_BWD, attention_bwd_math,
                   "honest: SDPA math-path backward (P by softmax, dS = P (dP - rowsum(dP P)))"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
