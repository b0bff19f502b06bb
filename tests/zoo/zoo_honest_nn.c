/* zoo_honest_nn.c: honest kernels in the orders frameworks ship (expected PASS): PyTorch's
 * softmax (max-shifted, times 1/sum), layer norm by Welford, GELU in its erfc and 1 + erf forms,
 * cross-entropy as log-softmax + nll, attention as SDPA's math path (scaled Q and K, softmax,
 * P V), a direct conv in filter-outer order, pairwise and 8-lane blocked reductions. */
#include "zoo.h"

#include <stdlib.h>

#define SQRT1_2 0.70710678118654752440

/* ---- softmax: at::softmax on CPU: max, exp(x - max) stored and summed, times 1 / sum ---- */
static peat_status softmax_torch(const peat_args *a, const peat_kernel *self)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C, mx = -INFINITY, s = 0.0f;
        for (int64_t j = 0; j < C; j++) mx = xr[j] > mx ? xr[j] : mx;
        for (int64_t j = 0; j < C; j++) s += yr[j] = expf(xr[j] - mx);
        float inv = 1.0f / s;
        for (int64_t j = 0; j < C; j++) yr[j] *= inv;
    }
    return PEAT_OK;
}

/* ---- layer norm by Welford (one pass: running mean and M2), outputs Y, mean, rstd ---- */
static peat_status layernorm_welford(const peat_args *a, const peat_kernel *self)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    float eps = (float)a->p.f[0];
    const float *X = a->in[0]->data, *gm = a->in[1]->data, *bt = a->in[2]->data;
    float *Y = a->out[0]->data, *M = a->out[1]->data, *RS = a->out[2]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *x = X + r * C;
        float mean = 0.0f, m2 = 0.0f;
        for (int64_t j = 0; j < C; j++) {
            float d = x[j] - mean;
            mean += d / (float)(j + 1);
            m2 += d * (x[j] - mean);
        }
        float rstd = 1.0f / sqrtf(m2 / (float)C + eps);
        for (int64_t j = 0; j < C; j++) Y[r * C + j] = (x[j] - mean) * rstd * gm[j] + bt[j];
        M[r] = mean, RS[r] = rstd;
    }
    return PEAT_OK;
}

/* ---- GELU: erfc form (0.5 x erfc(-x / sqrt2)) and PyTorch's x 0.5 (1 + erf(x / sqrt2)) ---- */
static peat_status gelu_erfc(const peat_args *a, const peat_kernel *self)
{
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) y[i] = 0.5f * x[i] * erfcf(-x[i] * (float)SQRT1_2);
    return PEAT_OK;
}
static peat_status gelu_x_xerf(const peat_args *a, const peat_kernel *self)
{
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++)
        y[i] = 0.5f * (x[i] + x[i] * erff(x[i] * (float)SQRT1_2));
    return PEAT_OK;
}
static peat_status gelu_1perf(const peat_args *a, const peat_kernel *self)
{
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++)
        y[i] = x[i] * 0.5f * (1.0f + erff(x[i] * (float)SQRT1_2));
    return PEAT_OK;
}

/* ---- cross-entropy as log_softmax then nll_loss (PyTorch's F.cross_entropy) ---- */
static peat_status xent_logsoftmax_nll(const peat_args *a, const peat_kernel *self)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = a->in[0]->data;
    const int32_t *t = a->in[1]->data;
    float *loss = a->out[0]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        float mx = -INFINITY, s = 0.0f;
        for (int64_t j = 0; j < C; j++) mx = xr[j] > mx ? xr[j] : mx;
        for (int64_t j = 0; j < C; j++) s += expf(xr[j] - mx);
        float lse = logf(s);
        float logp = (xr[t[r]] - mx) - lse; /* log_softmax: x - max - log(sum) */
        loss[r] = -logp;
    }
    return PEAT_OK;
}

/* nll_loss_backward then log_softmax_backward: dx_j = g_j - exp(logp_j) sum_k g_k with
 * g = -dloss onehot(t), logp the saved log_softmax */
static peat_status xent_bwd_torch(const peat_args *a, const peat_kernel *self)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = a->in[0]->data, *dl = a->in[2]->data;
    const int32_t *t = a->in[1]->data;
    float *dx = a->out[0]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        float mx = -INFINITY, s = 0.0f;
        for (int64_t j = 0; j < C; j++) mx = xr[j] > mx ? xr[j] : mx;
        for (int64_t j = 0; j < C; j++) s += expf(xr[j] - mx);
        float lse = logf(s), gsum = -dl[r];
        for (int64_t j = 0; j < C; j++) {
            float g = j == t[r] ? -dl[r] : 0.0f, logp = (xr[j] - mx) - lse;
            dx[r * C + j] = g - expf(logp) * gsum;
        }
    }
    return PEAT_OK;
}

/* ---- attention, SDPA math path: q and k each scaled by sqrt(scale), scores, -inf mask,
 * softmax (max, exp, sum, times 1/sum), then P V; L = max + log(sum) ---- */
static void sdpa_row(const float *q, const float *k, const float *v, int64_t n, int64_t D, float rs,
                     float *s, float *o, float *L)
{
    float mx = -INFINITY, sum = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        float dot = 0.0f;
        for (int64_t e = 0; e < D; e++) dot += (q[e] * rs) * (k[j * D + e] * rs);
        s[j] = dot;
        mx = dot > mx ? dot : mx;
    }
    for (int64_t j = 0; j < n; j++) sum += s[j] = expf(s[j] - mx);
    float inv = 1.0f / sum;
    for (int64_t j = 0; j < n; j++) s[j] *= inv;
    for (int64_t e = 0; e < D; e++) {
        float acc = 0.0f;
        for (int64_t j = 0; j < n; j++) acc += s[j] * v[j * D + e];
        o[e] = acc;
    }
    *L = mx + logf(sum);
}

static peat_status attention_sdpa_math(const peat_args *a, const peat_kernel *self)
{
    int64_t BH = a->p.i[0] * a->p.i[1], T = a->p.i[2], D = a->p.i[3], causal = a->p.i[4];
    float rs = sqrtf((float)a->p.f[0]);
    float *s = malloc((size_t)T * sizeof *s);
    if (!s) return PEAT_ERR_NOMEM;
    const float *Q = a->in[0]->data, *K = a->in[1]->data, *V = a->in[2]->data;
    float *O = a->out[0]->data, *L = a->out[1]->data;
    for (int64_t bh = 0; bh < BH; bh++)
        for (int64_t i = 0; i < T; i++)
            sdpa_row(Q + (bh * T + i) * D, K + bh * T * D, V + bh * T * D, causal ? i + 1 : T, D,
                     rs, s, O + (bh * T + i) * D, L + bh * T + i);
    free(s);
    return PEAT_OK;
}

/* ---- conv2d direct, filter taps outer: for each (kh, kw) a pass over channels ---- */
static peat_status conv_direct_taps(const peat_args *a, const peat_kernel *self)
{
    const int64_t *p = a->p.i;
    int64_t N = p[0], C = p[1], H = p[2], W = p[3], O = p[4], KH = p[5], KW = p[6], st = p[7],
            pd = p[8];
    int64_t OH = (H + 2 * pd - KH) / st + 1, OW = (W + 2 * pd - KW) / st + 1;
    const float *X = a->in[0]->data, *Wt = a->in[1]->data;
    float *Y = a->out[0]->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    float acc = 0.0f;
                    for (int64_t kh = 0; kh < KH; kh++)
                        for (int64_t kw = 0; kw < KW; kw++) {
                            int64_t ih = oh * st - pd + kh, iw = ow * st - pd + kw;
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                            for (int64_t c = 0; c < C; c++)
                                acc += X[((n * C + c) * H + ih) * W + iw] *
                                       Wt[((o * C + c) * KH + kh) * KW + kw];
                        }
                    Y[((n * O + o) * OH + oh) * OW + ow] = acc;
                }
    return PEAT_OK;
}

/* ---- conv2d by Winograd F(2x2, 3x3) (cuDNN's algorithm for 3x3 stride-1 layers): per 2x2
 * output tile, the filter transformed by G, the input tile by B^T, their products summed over
 * the channels and transformed back by A^T, all fp32; other shapes by the direct taps ---- */
static peat_status conv_winograd(const peat_args *a, const peat_kernel *self)
{
    const int64_t *p = a->p.i;
    int64_t N = p[0], C = p[1], H = p[2], W = p[3], O = p[4], pd = p[8];
    if (p[5] != 3 || p[6] != 3 || p[7] != 1) return conv_direct_taps(a, self);
    int64_t OH = H + 2 * pd - 2, OW = W + 2 * pd - 2;
    const float *X = a->in[0]->data, *Wt = a->in[1]->data;
    float *Y = a->out[0]->data;
    float *U = malloc((size_t)(O * C * 16 + C * 16) * sizeof *U);
    if (!U) return PEAT_ERR_NOMEM;
    float *V = U + O * C * 16;
    for (int64_t o = 0; o < O; o++)
        for (int64_t c = 0; c < C; c++) {
            const float *g = Wt + (o * C + c) * 9;
            float t[4][3], *u = U + (o * C + c) * 16;
            for (int j = 0; j < 3; j++) {
                t[0][j] = g[j], t[3][j] = g[6 + j];
                t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
                t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
            }
            for (int i = 0; i < 4; i++) {
                u[i * 4 + 0] = t[i][0], u[i * 4 + 3] = t[i][2];
                u[i * 4 + 1] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
                u[i * 4 + 2] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
            }
        }
    for (int64_t n = 0; n < N; n++)
        for (int64_t th = 0; th < OH; th += 2)
            for (int64_t tw = 0; tw < OW; tw += 2) {
                for (int64_t c = 0; c < C; c++) {
                    float d[4][4], t[4][4], *v = V + c * 16;
                    for (int i = 0; i < 4; i++)
                        for (int j = 0; j < 4; j++) {
                            int64_t ih = th - pd + i, iw = tw - pd + j;
                            d[i][j] = ih < 0 || ih >= H || iw < 0 || iw >= W
                                          ? 0.0f
                                          : X[((n * C + c) * H + ih) * W + iw];
                        }
                    for (int j = 0; j < 4; j++) {
                        t[0][j] = d[0][j] - d[2][j], t[1][j] = d[1][j] + d[2][j];
                        t[2][j] = d[2][j] - d[1][j], t[3][j] = d[1][j] - d[3][j];
                    }
                    for (int i = 0; i < 4; i++) {
                        v[i * 4 + 0] = t[i][0] - t[i][2], v[i * 4 + 1] = t[i][1] + t[i][2];
                        v[i * 4 + 2] = t[i][2] - t[i][1], v[i * 4 + 3] = t[i][1] - t[i][3];
                    }
                }
                for (int64_t o = 0; o < O; o++) {
                    float m[16] = {0}, t[2][4];
                    for (int64_t c = 0; c < C; c++)
                        for (int e = 0; e < 16; e++)
                            m[e] += U[(o * C + c) * 16 + e] * V[c * 16 + e];
                    for (int j = 0; j < 4; j++) {
                        t[0][j] = m[j] + m[4 + j] + m[8 + j];
                        t[1][j] = m[4 + j] - m[8 + j] - m[12 + j];
                    }
                    for (int i = 0; i < 2 && th + i < OH; i++) {
                        float *y = Y + ((n * O + o) * OH + th + i) * OW + tw;
                        y[0] = t[i][0] + t[i][1] + t[i][2];
                        if (tw + 1 < OW) y[1] = t[i][1] - t[i][2] - t[i][3];
                    }
                }
            }
    free(U);
    return PEAT_OK;
}

/* ---- reductions (mode 0 sum, 1 mean) ---- */
static float pairwise(const float *x, int64_t n)
{
    if (n <= 8) {
        float s = 0.0f;
        for (int64_t j = 0; j < n; j++) s += x[j];
        return s;
    }
    return pairwise(x, n / 2) + pairwise(x + n / 2, n - n / 2);
}
static float blocked8(const float *x, int64_t n)
{
    float lane[8] = {0};
    for (int64_t j = 0; j < n; j++) lane[j % 8] += x[j];
    return ((lane[0] + lane[4]) + (lane[2] + lane[6])) +
           ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}
static void reduce_rows(const peat_args *a, float (*sum)(const float *, int64_t))
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t r = 0; r < R; r++) {
        float s = sum(x + r * C, C);
        y[r] = a->p.i[2] ? s * (1.0f / (float)C) : s; /* the mean as a reciprocal multiply */
    }
}
static peat_status reduce_pairwise(const peat_args *a, const peat_kernel *self)
{
    reduce_rows(a, pairwise);
    return PEAT_OK;
}
static peat_status reduce_blocked(const peat_args *a, const peat_kernel *self)
{
    reduce_rows(a, blocked8);
    return PEAT_OK;
}

int zoo_register_honest_nn(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("zoo_softmax_torch", PEAT_OP_SOFTMAX, softmax_torch,
                   "honest: PyTorch CPU softmax (max-shifted, times 1/sum)"),
        ZOO_KERNEL("zoo_layernorm_welford", PEAT_OP_LAYERNORM, layernorm_welford,
                   "honest: Welford one-pass mean and M2"),
        ZOO_KERNEL("zoo_gelu_erfc", PEAT_OP_GELU, gelu_erfc, "honest: 0.5 x erfc(-x/sqrt2)"),
        ZOO_KERNEL("zoo_gelu_1perf", PEAT_OP_GELU, gelu_1perf,
                   "honest: PyTorch x 0.5 (1 + erf(x/sqrt2))"),
        ZOO_KERNEL("zoo_gelu_x_xerf", PEAT_OP_GELU, gelu_x_xerf,
                   "honest: 0.5 (x + x erf(x/sqrt2))"),
        ZOO_KERNEL("zoo_xent_bwd_torch", PEAT_OP_CROSS_ENTROPY_BWD, xent_bwd_torch,
                   "honest: log_softmax_backward of nll_loss_backward: dloss (exp(logp) - onehot)"),
        ZOO_KERNEL("zoo_xent_logsoftmax_nll", PEAT_OP_CROSS_ENTROPY, xent_logsoftmax_nll,
                   "honest: log_softmax (max-shifted) then nll"),
        ZOO_KERNEL("zoo_attention_sdpa_math", PEAT_OP_ATTENTION, attention_sdpa_math,
                   "honest: SDPA math path (sqrt(scale) on q and k, softmax, P V)"),
        ZOO_KERNEL("zoo_conv_winograd", PEAT_OP_CONV2D, conv_winograd,
                   "honest: Winograd F(2x2, 3x3), fp32"),
        ZOO_KERNEL("zoo_conv_direct_taps", PEAT_OP_CONV2D, conv_direct_taps,
                   "honest: direct conv, filter taps outer, channels inner"),
        ZOO_KERNEL("zoo_reduce_pairwise", PEAT_OP_REDUCE, reduce_pairwise,
                   "honest: pairwise row sums, mean as sum * (1/C)"),
        ZOO_KERNEL("zoo_reduce_blocked", PEAT_OP_REDUCE, reduce_blocked,
                   "honest: 8-lane blocked row sums combined pairwise"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
