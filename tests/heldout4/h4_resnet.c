/* h4_resnet.c: the fourth held-out set's kernels of the ResNet flow and the optimizers: batch
 * norm, pooling, SGD and AdamW. */
#include "heldout4.h"

/* ---- batch norm: i = N C S ; f = eps, momentum ; X gamma beta rm rv -> Y mean rstd rm' rv' ----
 */

enum { BN_ONEPASS, BN_EPS_OUT, BN_LAST_CH };

static void bn_d(const peat_args *a, int kind)
{
    int64_t N = PI(0), C = PI(1), S = PI(2);
    double M = (double)(N * S), eps = PF(0), mom = PF(1), prev_m = 0.0;
    for (int64_t c = 0; c < C; c++) {
        double m = 0.0, v = 0.0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) m += IN(0)[(n * C + c) * S + s];
        m /= M;
        /* the last channel centred on the channel before it's mean (an index off by one) */
        double mc = kind == BN_LAST_CH && c == C - 1 && C > 1 ? prev_m : m;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                double d = IN(0)[(n * C + c) * S + s] - mc;
                v += d * d;
            }
        v /= M;
        double rs = kind == BN_EPS_OUT ? 1.0 / (sqrt(v) + eps) : 1.0 / sqrt(v + eps);
        float rsf = (float)rs;
        if (kind == BN_ONEPASS) {
            /* E[x^2] - E[x]^2 in fp32: negative under a large mean, and its root NaN */
            float sx = 0.0f, sxx = 0.0f;
            for (int64_t n = 0; n < N; n++)
                for (int64_t s = 0; s < S; s++) {
                    float x = IN(0)[(n * C + c) * S + s];
                    sx += x, sxx += x * x;
                }
            float mf = sx / (float)M, vf = sxx / (float)M - mf * mf;
            rsf = 1.0f / sqrtf(vf + (float)eps); /* NaN where vf + eps < 0 */
        }
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                OUT(0)
                [i] = kind == BN_ONEPASS
                          ? (float)((IN(0)[i] - m) * (double)rsf * IN(1)[c] + IN(2)[c])
                          : (float)((IN(0)[i] - mc) * rs * IN(1)[c] + IN(2)[c]);
            }
        OUT(1)[c] = (float)mc, OUT(2)[c] = kind == BN_ONEPASS ? rsf : (float)rs;
        OUT(3)[c] = (float)((1.0 - mom) * IN(3)[c] + mom * mc);
        OUT(4)[c] = (float)((1.0 - mom) * IN(4)[c] + mom * v * M / (M - 1.0));
        prev_m = m;
    }
}
static peat_status bn_onepass(const peat_args *a, const peat_kernel *self)
{
    (void)self, bn_d(a, BN_ONEPASS);
    return PEAT_OK;
}
static peat_status bn_eps_outside(const peat_args *a, const peat_kernel *self)
{
    (void)self, bn_d(a, BN_EPS_OUT);
    return PEAT_OK;
}
static peat_status bn_last_channel(const peat_args *a, const peat_kernel *self)
{
    (void)self, bn_d(a, BN_LAST_CH);
    return PEAT_OK;
}

/* backward with dbeta summed in fp16: X gamma mean rstd dY -> dX dgamma dbeta */
static peat_status bn_bwd_dbeta_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t N = PI(0), C = PI(1), S = PI(2);
    double M = (double)(N * S);
    for (int64_t c = 0; c < C; c++) {
        double m = IN(2)[c], rs = IN(3)[c], g = IN(1)[c], sdy = 0.0, sdx = 0.0;
        float db16 = 0.0f;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                double dy = IN(4)[i];
                sdy += dy, sdx += dy * (IN(0)[i] - m) * rs;
                db16 = zoo_f16(db16 + IN(4)[i]);
            }
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                double xh = (IN(0)[i] - m) * rs;
                OUT(0)[i] = (float)(g * rs * (IN(4)[i] - sdy / M - xh * sdx / M));
            }
        OUT(1)[c] = (float)sdx, OUT(2)[c] = db16;
    }
    return PEAT_OK;
}

/* ---- pooling: i = N C H W K stride pad ---- */

typedef struct pd {
    int64_t N, C, H, W, K, st, pad, OH, OW;
} pd;
static pd pd_of(const peat_args *a)
{
    pd d = {PI(0), PI(1), PI(2), PI(3), PI(4), PI(5), PI(6), 0, 0};
    d.OH = (d.H + 2 * d.pad - d.K) / d.st + 1, d.OW = (d.W + 2 * d.pad - d.K) / d.st + 1;
    return d;
}
static int64_t at(const pd *d, int64_t nc, int64_t oh, int64_t ow, int64_t kh, int64_t kw)
{
    int64_t ih = oh * d->st - d->pad + kh, iw = ow * d->st - d->pad + kw;
    return ih < 0 || ih >= d->H || iw < 0 || iw >= d->W ? -1 : (nc * d->H + ih) * d->W + iw;
}

/* max pooling backward that drops the last output column's gradient */
static peat_status maxpool_bwd_last_col(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    pd d = pd_of(a);
    memset(OUT(0), 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof(float));
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW - (d.OW > 1); ow++) {
                int64_t best = -1;
                for (int64_t kh = 0; kh < d.K; kh++)
                    for (int64_t kw = 0; kw < d.K; kw++) {
                        int64_t i = at(&d, nc, oh, ow, kh, kw);
                        if (i >= 0 && (best < 0 || IN(0)[i] > IN(0)[best])) best = i;
                    }
                if (best >= 0) OUT(0)[best] += IN(1)[(nc * d.OH + oh) * d.OW + ow];
            }
    return PEAT_OK;
}

/* average pooling divided by K instead of K^2 */
static peat_status avgpool_div_k(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    pd d = pd_of(a);
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                double s = 0.0;
                for (int64_t kh = 0; kh < d.K; kh++)
                    for (int64_t kw = 0; kw < d.K; kw++) {
                        int64_t i = at(&d, nc, oh, ow, kh, kw);
                        if (i >= 0) s += IN(0)[i];
                    }
                OUT(0)[(nc * d.OH + oh) * d.OW + ow] = (float)(s / (double)d.K);
            }
    return PEAT_OK;
}

/* honest: average pooling backward as dY times 1 / K^2, added window by window */
static peat_status avgpool_bwd_recip(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    pd d = pd_of(a);
    float r = 1.0f / (float)(d.K * d.K);
    memset(OUT(0), 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof(float));
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                float g = IN(0)[(nc * d.OH + oh) * d.OW + ow] * r;
                for (int64_t kh = 0; kh < d.K; kh++)
                    for (int64_t kw = 0; kw < d.K; kw++) {
                        int64_t i = at(&d, nc, oh, ow, kh, kw);
                        if (i >= 0) OUT(0)[i] += g;
                    }
            }
    return PEAT_OK;
}

/* ---- SGD: i = n nesterov ; f = lr momentum wd ; p g mom -> p' mom' ---- */

/* dampening equal to the momentum: mom' = mu mom + (1 - mu)(g + wd p) */
static peat_status sgd_dampening(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    double lr = PF(0), mu = PF(1), wd = PF(2);
    for (int64_t i = 0; i < PI(0); i++) {
        double p = IN(0)[i], g = IN(1)[i] + wd * p, m = mu * IN(2)[i] + (1.0 - mu) * g;
        double d = PI(1) ? g + mu * m : m;
        OUT(0)[i] = (float)(p - lr * d), OUT(1)[i] = (float)m;
    }
    return PEAT_OK;
}

/* ---- AdamW: i = n t ; f = lr b1 b2 eps wd ; p g m v -> p' m' v' ---- */

static void adamw_d(const peat_args *a, int eps_in_sqrt, int v_bf16)
{
    double lr = PF(0), b1 = PF(1), b2 = PF(2), eps = PF(3), wd = PF(4);
    double bc1 = 1.0 - pow(b1, (double)PI(1)), bc2 = 1.0 - pow(b2, (double)PI(1));
    for (int64_t i = 0; i < PI(0); i++) {
        double p = IN(0)[i], g = IN(1)[i];
        double m = b1 * IN(2)[i] + (1.0 - b1) * g, v = b2 * IN(3)[i] + (1.0 - b2) * g * g;
        if (v_bf16) v = zoo_bf16((float)v);
        double den = eps_in_sqrt ? sqrt(v / bc2 + eps) : sqrt(v / bc2) + eps;
        OUT(0)[i] = (float)(p - lr * ((m / bc1) / den + wd * p));
        OUT(1)[i] = (float)m, OUT(2)[i] = (float)v;
    }
}
static peat_status adamw_eps_in_sqrt(const peat_args *a, const peat_kernel *self)
{
    (void)self, adamw_d(a, 1, 0);
    return PEAT_OK;
}
static peat_status adamw_v_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self, adamw_d(a, 0, 1);
    return PEAT_OK;
}

/* honest: fused AdamW in fp32 with fused multiply-adds (moments as fma(b, old, (1 - b) g), the
 * step as p - lr (mhat / (sqrt(vhat) + eps)) - lr wd p) */
static peat_status adamw_fma(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    float lr = (float)PF(0), b1 = (float)PF(1), b2 = (float)PF(2), eps = (float)PF(3);
    float wd = (float)PF(4), c1 = (float)(1.0 - PF(1)), c2 = (float)(1.0 - PF(2));
    float bc1 = (float)(1.0 - pow(PF(1), (double)PI(1))),
          bc2 = (float)(1.0 - pow(PF(2), (double)PI(1)));
    for (int64_t i = 0; i < PI(0); i++) {
        float p = IN(0)[i], g = IN(1)[i];
        float m = fmaf(b1, IN(2)[i], c1 * g), v = fmaf(b2, IN(3)[i], c2 * g * g);
        float step = (m / bc1) / (sqrtf(v / bc2) + eps);
        OUT(0)[i] = fmaf(-lr, step, fmaf(-lr * wd, p, p));
        OUT(1)[i] = m, OUT(2)[i] = v;
    }
    return PEAT_OK;
}

int h4_register_resnet(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h4_batchnorm_onepass", PEAT_OP_BATCHNORM, bn_onepass,
                   "variance as E[x^2] - E[x]^2 in fp32, no clamp"),
        ZOO_KERNEL("h4_batchnorm_eps_outside", PEAT_OP_BATCHNORM, bn_eps_outside,
                   "1 / (sqrt(var) + eps)"),
        ZOO_KERNEL("h4_batchnorm_last_channel", PEAT_OP_BATCHNORM, bn_last_channel,
                   "the last channel centred on the previous channel's mean"),
        ZOO_KERNEL("h4_batchnorm_bwd_dbeta_f16", PEAT_OP_BATCHNORM_BWD, bn_bwd_dbeta_f16,
                   "dbeta summed in fp16"),
        ZOO_KERNEL("h4_maxpool_bwd_last_col", PEAT_OP_MAXPOOL2D_BWD, maxpool_bwd_last_col,
                   "the last output column's gradient dropped"),
        ZOO_KERNEL("h4_avgpool_div_k", PEAT_OP_AVGPOOL2D, avgpool_div_k, "divided by K"),
        ZOO_KERNEL("h4_avgpool_bwd_recip", PEAT_OP_AVGPOOL2D_BWD, avgpool_bwd_recip,
                   "honest: dY times 1 / K^2"),
        ZOO_KERNEL("h4_sgd_dampening", PEAT_OP_SGD, sgd_dampening, "dampening = momentum"),
        ZOO_KERNEL("h4_adamw_eps_in_sqrt", PEAT_OP_ADAMW, adamw_eps_in_sqrt,
                   "eps inside the square root"),
        ZOO_KERNEL("h4_adamw_v_bf16", PEAT_OP_ADAMW, adamw_v_bf16, "v' rounded to bf16"),
        ZOO_KERNEL("h4_adamw_fma", PEAT_OP_ADAMW, adamw_fma, "honest: fused multiply-adds"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
