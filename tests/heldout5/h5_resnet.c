/* h5_resnet.c: the fifth held-out set's kernels of the ResNet flow and the optimizers: batch
 * norm, pooling, SGD and AdamW. */
#include "heldout5.h"

/* ---- batch norm: i = N C S ; f = eps, momentum ; X gamma beta rm rv -> Y mean rstd rm' rv' ----
 */

enum { BN_MOM_IGNORED, BN_Y_TRUNC, BN_FIRST_IMAGE };

static void bn_d(const peat_args *a, int kind)
{
    int64_t N = PI(0), C = PI(1), S = PI(2);
    int64_t Ns = kind == BN_FIRST_IMAGE ? 1 : N; /* the statistics of the first image only */
    double M = (double)(Ns * S), eps = PF(0), mom = kind == BN_MOM_IGNORED ? 1.0 : PF(1);
    for (int64_t c = 0; c < C; c++) {
        double m = 0.0, v = 0.0;
        for (int64_t n = 0; n < Ns; n++)
            for (int64_t s = 0; s < S; s++) m += IN(0)[(n * C + c) * S + s];
        m /= M;
        for (int64_t n = 0; n < Ns; n++)
            for (int64_t s = 0; s < S; s++) {
                double d = IN(0)[(n * C + c) * S + s] - m;
                v += d * d;
            }
        v /= M;
        double rs = 1.0 / sqrt(v + eps);
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                float y = (float)((IN(0)[i] - m) * rs * IN(1)[c] + IN(2)[c]);
                /* the mask chosen on the integer side: GCC 12.2 at -O1/-O2 folds
                 * `c ? ho_bf16_rz(y) : y` to y (the scored build had no truncation) */
                OUT(0)[i] = ho_from_bits(ho_bits(y) & (kind == BN_Y_TRUNC ? 0xffff0000u : ~0u));
            }
        OUT(1)[c] = (float)m, OUT(2)[c] = (float)rs;
        OUT(3)[c] = (float)((1.0 - mom) * IN(3)[c] + mom * m);
        OUT(4)[c] = (float)((1.0 - mom) * IN(4)[c] + mom * v * M / (M > 1.0 ? M - 1.0 : 1.0));
    }
}
/* the running statistics replaced by the batch's (momentum taken as 1) */
static peat_status bn_mom_ignored(const peat_args *a, const peat_kernel *self)
{
    (void)self, bn_d(a, BN_MOM_IGNORED);
    return PEAT_OK;
}
/* Y truncated to bf16 (a bf16 store by dropping the low half) */
static peat_status bn_y_trunc(const peat_args *a, const peat_kernel *self)
{
    (void)self, bn_d(a, BN_Y_TRUNC);
    return PEAT_OK;
}
/* the batch statistics over the first image only */
static peat_status bn_first_image(const peat_args *a, const peat_kernel *self)
{
    (void)self, bn_d(a, BN_FIRST_IMAGE);
    return PEAT_OK;
}
/* honest: Welford over chunks of 32 values in fp32, the chunks merged with Chan's formula */
static peat_status bn_welford_chunks(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t N = PI(0), C = PI(1), S = PI(2), M = N * S;
    float eps = (float)PF(0), mom = (float)PF(1);
    for (int64_t c = 0; c < C; c++) {
        float m = 0.0f, m2 = 0.0f, cnt = 0.0f;
        for (int64_t q0 = 0; q0 < M; q0 += 32) {
            float cm = 0.0f, cm2 = 0.0f, cc = 0.0f;
            for (int64_t q = q0; q < M && q < q0 + 32; q++) {
                float x = IN(0)[(q / S * C + c) * S + q % S], d = x - cm;
                cc += 1.0f, cm += d / cc, cm2 += d * (x - cm);
            }
            float tot = cnt + cc, d = cm - m;
            m += d * (cc / tot), m2 += cm2 + d * d * (cnt * cc / tot), cnt = tot;
        }
        float var = m2 / (float)M, rs = 1.0f / sqrtf(var + eps);
        for (int64_t q = 0; q < M; q++) {
            int64_t i = (q / S * C + c) * S + q % S;
            OUT(0)[i] = (IN(0)[i] - m) * (rs * IN(1)[c]) + IN(2)[c];
        }
        OUT(1)[c] = m, OUT(2)[c] = rs;
        OUT(3)[c] = (1.0f - mom) * IN(3)[c] + mom * m;
        OUT(4)[c] = (1.0f - mom) * IN(4)[c] + mom * (m2 / (float)(M > 1 ? M - 1 : 1));
    }
    return PEAT_OK;
}

/* backward: X gamma mean rstd dY -> dX dgamma dbeta */
enum { BNB_DG_X, BNB_LAST_CH };

static void bn_bwd_d(const peat_args *a, int kind)
{
    int64_t N = PI(0), C = PI(1), S = PI(2);
    double M = (double)(N * S);
    for (int64_t c = 0; c < C; c++) {
        double m = IN(2)[c], rs = IN(3)[c], g = IN(1)[c], sdy = 0.0, sdx = 0.0, sdxr = 0.0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                double dy = IN(4)[i];
                sdy += dy, sdx += dy * (IN(0)[i] - m) * rs, sdxr += dy * IN(0)[i];
            }
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                double xh = (IN(0)[i] - m) * rs;
                /* the last channel's dX never written: left at zero */
                OUT(0)
                [i] = kind == BNB_LAST_CH && c == C - 1 && C > 1
                          ? 0.0f
                          : (float)(g * rs * (IN(4)[i] - sdy / M - xh * sdx / M));
            }
        OUT(1)[c] = (float)(kind == BNB_DG_X ? sdxr : sdx), OUT(2)[c] = (float)sdy;
    }
}
/* dgamma as sum dY x (x where x-hat belongs) */
static peat_status bn_bwd_dg_x(const peat_args *a, const peat_kernel *self)
{
    (void)self, bn_bwd_d(a, BNB_DG_X);
    return PEAT_OK;
}
static peat_status bn_bwd_last_ch(const peat_args *a, const peat_kernel *self)
{
    (void)self, memset(OUT(0), 0, (size_t)ho_numel(a->out[0]) * sizeof(float));
    bn_bwd_d(a, BNB_LAST_CH);
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
static int64_t at(const pd *d, int64_t nc, int64_t oh, int64_t ow, int64_t kh, int64_t kw,
                  int64_t st)
{
    int64_t ih = oh * st - d->pad + kh, iw = ow * st - d->pad + kw;
    return ih < 0 || ih >= d->H || iw < 0 || iw >= d->W ? -1 : (nc * d->H + ih) * d->W + iw;
}
static int64_t argmax(const peat_args *a, const pd *d, int64_t nc, int64_t oh, int64_t ow,
                      int64_t st)
{
    int64_t best = -1;
    for (int64_t kh = 0; kh < d->K; kh++)
        for (int64_t kw = 0; kw < d->K; kw++) {
            int64_t i = at(d, nc, oh, ow, kh, kw, st);
            if (i >= 0 && (best < 0 || IN(0)[i] > IN(0)[best])) best = i;
        }
    return best;
}

/* max pooling with the window size as its stride (the stride argument ignored) */
static peat_status maxpool_stride_k(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    pd d = pd_of(a);
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                int64_t b = argmax(a, &d, nc, oh, ow, d.K);
                if (b < 0) b = argmax(a, &d, nc, oh, ow, d.st);
                OUT(0)[(nc * d.OH + oh) * d.OW + ow] = b >= 0 ? IN(0)[b] : 0.0f;
            }
    return PEAT_OK;
}
/* max pooling backward whose dX is accumulated in fp16 */
static peat_status maxpool_bwd_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    pd d = pd_of(a);
    memset(OUT(0), 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof(float));
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                int64_t b = argmax(a, &d, nc, oh, ow, d.st);
                if (b >= 0)
                    OUT(0)[b] = zoo_f16(OUT(0)[b] + zoo_f16(IN(1)[(nc * d.OH + oh) * d.OW + ow]));
            }
    return PEAT_OK;
}
/* honest: max pooling backward gathered per input pixel (each pixel sums the dY of the windows
 * whose first maximum it is, windows in row-major order) */
static peat_status maxpool_bwd_gather(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    pd d = pd_of(a);
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t ih = 0; ih < d.H; ih++)
            for (int64_t iw = 0; iw < d.W; iw++) {
                int64_t i = (nc * d.H + ih) * d.W + iw;
                float g = 0.0f;
                for (int64_t oh = 0; oh < d.OH; oh++)
                    for (int64_t ow = 0; ow < d.OW; ow++) {
                        int64_t h0 = oh * d.st - d.pad, w0 = ow * d.st - d.pad;
                        if (ih < h0 || ih >= h0 + d.K || iw < w0 || iw >= w0 + d.K) continue;
                        if (argmax(a, &d, nc, oh, ow, d.st) == i)
                            g += IN(1)[(nc * d.OH + oh) * d.OW + ow];
                    }
                OUT(0)[i] = g;
            }
    return PEAT_OK;
}
/* average pooling backward that never scatters the last output row's windows */
static peat_status avgpool_bwd_last_row(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    pd d = pd_of(a);
    memset(OUT(0), 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof(float));
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH - (d.OH > 1); oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                double g = IN(0)[(nc * d.OH + oh) * d.OW + ow] / (double)(d.K * d.K);
                for (int64_t kh = 0; kh < d.K; kh++)
                    for (int64_t kw = 0; kw < d.K; kw++) {
                        int64_t i = at(&d, nc, oh, ow, kh, kw, d.st);
                        if (i >= 0) OUT(0)[i] = (float)(OUT(0)[i] + g);
                    }
            }
    return PEAT_OK;
}

/* ---- SGD: i = n nesterov ; f = lr momentum wd ; p g mom -> p' mom' ---- */

enum { SGD_WD_AFTER, SGD_MOM_BF16 };

static void sgd_d(const peat_args *a, int kind)
{
    double lr = PF(0), mu = PF(1), wd = PF(2);
    for (int64_t i = 0; i < PI(0); i++) {
        double p = IN(0)[i], g = IN(1)[i];
        /* weight decay added to the step after the momentum, not to the gradient before it */
        double gm = kind == SGD_WD_AFTER ? g : g + wd * p, m = mu * IN(2)[i] + gm;
        if (kind == SGD_MOM_BF16) m = zoo_bf16((float)m);
        double d = PI(1) ? gm + mu * m : m;
        if (kind == SGD_WD_AFTER) d += wd * p;
        OUT(0)[i] = (float)(p - lr * d), OUT(1)[i] = (float)m;
    }
}
static peat_status sgd_wd_after(const peat_args *a, const peat_kernel *self)
{
    (void)self, sgd_d(a, SGD_WD_AFTER);
    return PEAT_OK;
}
static peat_status sgd_mom_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self, sgd_d(a, SGD_MOM_BF16);
    return PEAT_OK;
}
/* honest: fp32 with fused multiply-adds, as a fused SGD kernel writes it */
static peat_status sgd_fma(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    float lr = (float)PF(0), mu = (float)PF(1), wd = (float)PF(2);
    for (int64_t i = 0; i < PI(0); i++) {
        float p = IN(0)[i], g = fmaf(wd, p, IN(1)[i]), m = fmaf(mu, IN(2)[i], g);
        float d = PI(1) ? fmaf(mu, m, g) : m;
        OUT(0)[i] = fmaf(-lr, d, p), OUT(1)[i] = m;
    }
    return PEAT_OK;
}

/* ---- AdamW: i = n t ; f = lr b1 b2 eps wd ; p g m v -> p' m' v' ---- */

enum { AD_NO_BC1, AD_P_TRUNC };

static void adamw_d(const peat_args *a, int kind)
{
    double lr = PF(0), b1 = PF(1), b2 = PF(2), eps = PF(3), wd = PF(4);
    double bc1 = kind == AD_NO_BC1 ? 1.0 : 1.0 - pow(b1, (double)PI(1)),
           bc2 = 1.0 - pow(b2, (double)PI(1));
    for (int64_t i = 0; i < PI(0); i++) {
        double p = IN(0)[i], g = IN(1)[i];
        double m = b1 * IN(2)[i] + (1.0 - b1) * g, v = b2 * IN(3)[i] + (1.0 - b2) * g * g;
        float pn = (float)(p - lr * ((m / bc1) / (sqrt(v / bc2) + eps) + wd * p));
        OUT(0)[i] = ho_from_bits(ho_bits(pn) & (kind == AD_P_TRUNC ? 0xffff0000u : ~0u));
        OUT(1)[i] = (float)m, OUT(2)[i] = (float)v;
    }
}
/* no bias correction of the first moment */
static peat_status adamw_no_bc1(const peat_args *a, const peat_kernel *self)
{
    (void)self, adamw_d(a, AD_NO_BC1);
    return PEAT_OK;
}
/* the parameter stored as bf16 by truncation (bf16 master weights, round toward zero) */
static peat_status adamw_p_trunc(const peat_args *a, const peat_kernel *self)
{
    (void)self, adamw_d(a, AD_P_TRUNC);
    return PEAT_OK;
}

int h5_register_resnet(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h5_batchnorm_mom_ignored", PEAT_OP_BATCHNORM, bn_mom_ignored,
                   "running stats replaced by the batch's"),
        ZOO_KERNEL("h5_batchnorm_y_trunc", PEAT_OP_BATCHNORM, bn_y_trunc, "Y truncated to bf16"),
        ZOO_KERNEL("h5_batchnorm_first_image", PEAT_OP_BATCHNORM, bn_first_image,
                   "statistics of the first image only"),
        ZOO_KERNEL("h5_batchnorm_welford_chunks", PEAT_OP_BATCHNORM, bn_welford_chunks,
                   "honest: chunked Welford, Chan's merge"),
        ZOO_KERNEL("h5_batchnorm_bwd_dg_x", PEAT_OP_BATCHNORM_BWD, bn_bwd_dg_x,
                   "dgamma = sum dY x"),
        ZOO_KERNEL("h5_batchnorm_bwd_last_ch", PEAT_OP_BATCHNORM_BWD, bn_bwd_last_ch,
                   "the last channel's dX left at zero"),
        ZOO_KERNEL("h5_maxpool_stride_k", PEAT_OP_MAXPOOL2D, maxpool_stride_k,
                   "the window size as the stride"),
        ZOO_KERNEL("h5_maxpool_bwd_f16", PEAT_OP_MAXPOOL2D_BWD, maxpool_bwd_f16,
                   "dX accumulated in fp16"),
        ZOO_KERNEL("h5_maxpool_bwd_gather", PEAT_OP_MAXPOOL2D_BWD, maxpool_bwd_gather,
                   "honest: gathered per input pixel"),
        ZOO_KERNEL("h5_avgpool_bwd_last_row", PEAT_OP_AVGPOOL2D_BWD, avgpool_bwd_last_row,
                   "the last output row's windows not scattered"),
        ZOO_KERNEL("h5_sgd_wd_after", PEAT_OP_SGD, sgd_wd_after,
                   "weight decay added after the momentum"),
        ZOO_KERNEL("h5_sgd_mom_bf16", PEAT_OP_SGD, sgd_mom_bf16, "momentum stored in bf16"),
        ZOO_KERNEL("h5_sgd_fma", PEAT_OP_SGD, sgd_fma, "honest: fused multiply-adds"),
        ZOO_KERNEL("h5_adamw_no_bc1", PEAT_OP_ADAMW, adamw_no_bc1, "no bias correction of m"),
        ZOO_KERNEL("h5_adamw_p_trunc", PEAT_OP_ADAMW, adamw_p_trunc,
                   "the parameter truncated to bf16"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
