/* h7_resnet.c: the seventh held-out set's kernels of the ResNet flow (batch norm, pooling,
 * convolution), the optimizers and the fp8 GEMM. */
#include "heldout7.h"

/* ---- batch norm: i = N C S ; f = eps, momentum ; X gamma beta rm rv -> Y mean rstd rm' rv' ----
 */

/* normalised by the unbiased variance (M - 1), the one the running variance takes */
static peat_status bn_var_unbiased(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t N = PI(0), C = PI(1), S = PI(2);
    double M = (double)(N * S), eps = PF(0), mom = PF(1), Mu = M > 1.0 ? M - 1.0 : 1.0;
    for (int64_t c = 0; c < C; c++) {
        double m = 0.0, v = 0.0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) m += IN(0)[(n * C + c) * S + s];
        m /= M;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                double d = IN(0)[(n * C + c) * S + s] - m;
                v += d * d;
            }
        double rs = 1.0 / sqrt(v / Mu + eps);
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                OUT(0)[i] = (float)((IN(0)[i] - m) * rs * IN(1)[c] + IN(2)[c]);
            }
        OUT(1)[c] = (float)m, OUT(2)[c] = (float)rs;
        OUT(3)[c] = (float)((1.0 - mom) * IN(3)[c] + mom * m);
        OUT(4)[c] = (float)((1.0 - mom) * IN(4)[c] + mom * v / Mu);
    }
    return PEAT_OK;
}
/* honest: fp32 two passes, each channel's sums over the images joined pairwise */
static peat_status bn_two_pass_pairwise(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t N = PI(0), C = PI(1), S = PI(2);
    float M = (float)(N * S), eps = (float)PF(0), mom = (float)PF(1);
    float *part = malloc((size_t)(N > 0 ? N : 1) * sizeof *part);
    if (!part) return PEAT_ERR_NOMEM;
    for (int64_t c = 0; c < C; c++) {
        float st[2] = {0.0f, 0.0f};
        for (int pass = 0; pass < 2; pass++) {
            for (int64_t n = 0; n < N; n++) {
                float t = 0.0f;
                for (int64_t s = 0; s < S; s++) {
                    float x = IN(0)[(n * C + c) * S + s];
                    t += pass ? (x - st[0]) * (x - st[0]) : x;
                }
                part[n] = t;
            }
            for (int64_t w = 1; w < N; w *= 2)
                for (int64_t q = 0; q + w < N; q += 2 * w) part[q] += part[q + w];
            st[pass] = (N ? part[0] : 0.0f) / M;
        }
        float m = st[0], v = st[1], rs = 1.0f / sqrtf(v + eps);
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                OUT(0)[i] = (IN(0)[i] - m) * rs * IN(1)[c] + IN(2)[c];
            }
        OUT(1)[c] = m, OUT(2)[c] = rs;
        OUT(3)[c] = (1.0f - mom) * IN(3)[c] + mom * m;
        OUT(4)[c] = (1.0f - mom) * IN(4)[c] + mom * (v * M / (M > 1.0f ? M - 1.0f : 1.0f));
    }
    free(part);
    return PEAT_OK;
}

/* backward: X gamma mean rstd dY -> dX dgamma dbeta */
enum { BNB_NO_XHAT, BNB_DX_F16 };

static void bn_bwd_d(const peat_args *a, int kind)
{
    int64_t N = PI(0), C = PI(1), S = PI(2);
    double M = (double)(N * S);
    for (int64_t c = 0; c < C; c++) {
        double m = IN(2)[c], rs = IN(3)[c], g = IN(1)[c], sdy = 0.0, sdx = 0.0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                sdy += IN(4)[i], sdx += IN(4)[i] * (IN(0)[i] - m) * rs;
            }
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                double xh = (IN(0)[i] - m) * rs;
                /* BNB_NO_XHAT: the x-hat term of the projection left out */
                double dx =
                    g * rs * (IN(4)[i] - sdy / M - (kind == BNB_NO_XHAT ? 0.0 : xh * sdx / M));
                float f = (float)dx;
                OUT(0)[i] = kind == BNB_DX_F16 ? zoo_f16(f) : f;
            }
        OUT(1)[c] = (float)sdx, OUT(2)[c] = (float)sdy;
    }
}
static peat_status bn_bwd_no_xhat(const peat_args *a, const peat_kernel *self)
{
    (void)self, bn_bwd_d(a, BNB_NO_XHAT);
    return PEAT_OK;
}
/* dX stored in fp16 (a half-precision activation gradient) */
static peat_status bn_bwd_dx_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self, bn_bwd_d(a, BNB_DX_F16);
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

/* max pooling backward (X, dY -> dX): each window's gradient sent to every input equal to its
 * maximum (ties all take it), where one input, the window's first maximum, should */
static peat_status maxpool_bwd_ties(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    pd d = pd_of(a);
    memset(OUT(0), 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof(float));
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                float best = -INFINITY, g = IN(1)[(nc * d.OH + oh) * d.OW + ow];
                for (int64_t kh = 0; kh < d.K; kh++)
                    for (int64_t kw = 0; kw < d.K; kw++) {
                        int64_t i = at(&d, nc, oh, ow, kh, kw);
                        if (i >= 0 && IN(0)[i] > best) best = IN(0)[i];
                    }
                for (int64_t kh = 0; kh < d.K; kh++)
                    for (int64_t kw = 0; kw < d.K; kw++) {
                        int64_t i = at(&d, nc, oh, ow, kh, kw);
                        if (i >= 0 && IN(0)[i] == best) OUT(0)[i] += g;
                    }
            }
    return PEAT_OK;
}
/* honest: the argmax kept per output (first maximum, as the forward records it), then one
 * scatter-add pass over the outputs */
static peat_status maxpool_bwd_argmax(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    pd d = pd_of(a);
    memset(OUT(0), 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof(float));
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                float best = -INFINITY;
                int64_t arg = -1;
                for (int64_t kh = 0; kh < d.K; kh++)
                    for (int64_t kw = 0; kw < d.K; kw++) {
                        int64_t i = at(&d, nc, oh, ow, kh, kw);
                        if (i >= 0 && (arg < 0 || IN(0)[i] > best)) best = IN(0)[i], arg = i;
                    }
                if (arg >= 0) OUT(0)[arg] += IN(1)[(nc * d.OH + oh) * d.OW + ow];
            }
    return PEAT_OK;
}

/* average pooling that divides border windows by the inputs they cover (count_include_pad off)
 * where the padded zeros count */
static peat_status avgpool_exclude_pad(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    pd d = pd_of(a);
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                double s = 0.0;
                int64_t cnt = 0;
                for (int64_t kh = 0; kh < d.K; kh++)
                    for (int64_t kw = 0; kw < d.K; kw++) {
                        int64_t i = at(&d, nc, oh, ow, kh, kw);
                        if (i >= 0) s += IN(0)[i], cnt++;
                    }
                OUT(0)[(nc * d.OH + oh) * d.OW + ow] = (float)(s / (double)(cnt ? cnt : 1));
            }
    return PEAT_OK;
}
/* average pooling backward (dY -> dX) accumulated in bf16 */
static peat_status avgpool_bwd_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    pd d = pd_of(a);
    memset(OUT(0), 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof(float));
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                float g = IN(0)[(nc * d.OH + oh) * d.OW + ow] / (float)(d.K * d.K);
                for (int64_t kh = 0; kh < d.K; kh++)
                    for (int64_t kw = 0; kw < d.K; kw++) {
                        int64_t i = at(&d, nc, oh, ow, kh, kw);
                        if (i >= 0) OUT(0)[i] = zoo_bf16(OUT(0)[i] + g);
                    }
            }
    return PEAT_OK;
}

/* ---- SGD: i = n nesterov ; f = lr momentum wd ; p g mom -> p' mom' ---- */

/* the learning rate folded into the momentum buffer (mom' = mu mom + lr g, p' = p - mom'), a
 * different rule from torch's under the same buffer */
static peat_status sgd_lr_in_mom(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    double lr = PF(0), mu = PF(1), wd = PF(2);
    for (int64_t i = 0; i < PI(0); i++) {
        double p = IN(0)[i], g = IN(1)[i] + wd * p, m = mu * IN(2)[i] + lr * g;
        double d = PI(1) ? lr * g + mu * m : m;
        OUT(0)[i] = (float)(p - d), OUT(1)[i] = (float)m;
    }
    return PEAT_OK;
}

/* ---- AdamW: i = n t ; f = lr b1 b2 eps wd ; p g m v -> p' m' v' ---- */

/* the decay not scaled by the learning rate: p (1 - wd) */
static peat_status adamw_wd_no_lr(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    double lr = PF(0), b1 = PF(1), b2 = PF(2), eps = PF(3), wd = PF(4);
    double bc1 = 1.0 - pow(b1, (double)PI(1)), bc2 = 1.0 - pow(b2, (double)PI(1));
    for (int64_t i = 0; i < PI(0); i++) {
        double p = IN(0)[i], g = IN(1)[i];
        double m = b1 * IN(2)[i] + (1.0 - b1) * g, v = b2 * IN(3)[i] + (1.0 - b2) * g * g;
        OUT(0)[i] = (float)(p * (1.0 - wd) - lr * (m / bc1) / (sqrt(v / bc2) + eps));
        OUT(1)[i] = (float)m, OUT(2)[i] = (float)v;
    }
    return PEAT_OK;
}
/* honest: torch's _single_tensor_adamw in fp32: p *= 1 - lr wd; m.lerp_(g, 1 - b1);
 * v = b2 v + (1 - b2) g g; denom = sqrt(v) / sqrt(bc2) + eps; p -= (lr / bc1) m / denom */
static peat_status adamw_torch_form(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    float lr = (float)PF(0), b1 = (float)PF(1), b2 = (float)PF(2), eps = (float)PF(3),
          wd = (float)PF(4);
    float bc1 = 1.0f - powf(b1, (float)PI(1)), bc2 = 1.0f - powf(b2, (float)PI(1));
    float step = lr / bc1, sbc2 = sqrtf(bc2);
    for (int64_t i = 0; i < PI(0); i++) {
        float p = IN(0)[i] * (1.0f - lr * wd), g = IN(1)[i], m0 = IN(2)[i];
        float m = fmaf(1.0f - b1, g - m0, m0), v = b2 * IN(3)[i] + (1.0f - b2) * g * g;
        float den = sqrtf(v) / sbc2 + eps;
        OUT(0)[i] = p - step * (m / den), OUT(1)[i] = m, OUT(2)[i] = v;
    }
    return PEAT_OK;
}

/* ---- fp8 GEMM: i = tA tB M N K batch fmtA fmtB ; f = scale_a beta scale_b ---- */

/* B's scale never applied (only A's) */
static peat_status gemm_fp8_no_scale_b(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    double sa = PF(0), beta = PF(1);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                double s = 0.0;
                for (int64_t k = 0; k < g.K; k++)
                    s += (double)zoo_a(a, &g, b, i, k) * zoo_b(a, &g, b, k, j);
                double y = s * sa;
                if (beta != 0.0)
                    y += beta * ((const float *)a->in[2]->data)[(b * g.M + i) * g.N + j];
                OUT(0)[(b * g.M + i) * g.N + j] = (float)y;
            }
    return PEAT_OK;
}

/* ---- convolution: i = N C H W O KH KW stride pad ---- */

typedef struct cd {
    int64_t N, C, H, W, O, KH, KW, st, pad, OH, OW;
} cd;
static cd cd_of(const peat_args *a)
{
    cd d = {PI(0), PI(1), PI(2), PI(3), PI(4), PI(5), PI(6), PI(7), PI(8), 0, 0};
    d.OH = (d.H + 2 * d.pad - d.KH) / d.st + 1, d.OW = (d.W + 2 * d.pad - d.KW) / d.st + 1;
    return d;
}
static int64_t xat(const cd *d, int64_t n, int64_t c, int64_t ih, int64_t iw)
{
    return ih < 0 || ih >= d->H || iw < 0 || iw >= d->W ? -1
                                                        : ((n * d->C + c) * d->H + ih) * d->W + iw;
}

/* forward (X, W -> Y) summed in an fp16 accumulator */
static peat_status conv_acc_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    cd d = cd_of(a);
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t o = 0; o < d.O; o++)
            for (int64_t oh = 0; oh < d.OH; oh++)
                for (int64_t ow = 0; ow < d.OW; ow++) {
                    float s = 0.0f;
                    for (int64_t c = 0; c < d.C; c++)
                        for (int64_t kh = 0; kh < d.KH; kh++)
                            for (int64_t kw = 0; kw < d.KW; kw++) {
                                int64_t i =
                                    xat(&d, n, c, oh * d.st - d.pad + kh, ow * d.st - d.pad + kw);
                                if (i >= 0)
                                    s = zoo_f16(s +
                                                IN(0)[i] *
                                                    IN(1)[((o * d.C + c) * d.KH + kh) * d.KW + kw]);
                            }
                    OUT(0)[((n * d.O + o) * d.OH + oh) * d.OW + ow] = s;
                }
    return PEAT_OK;
}
/* honest: im2col, then each output an fp32 dot over the column in (kh, kw, c) order, as a
 * channels-last GEMM walks it */
static peat_status conv_im2col_hwc(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    cd d = cd_of(a);
    int64_t KK = d.C * d.KH * d.KW;
    float *col = malloc((size_t)(KK > 0 ? KK : 1) * sizeof *col);
    if (!col) return PEAT_ERR_NOMEM;
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                int64_t q = 0;
                for (int64_t kh = 0; kh < d.KH; kh++)
                    for (int64_t kw = 0; kw < d.KW; kw++)
                        for (int64_t c = 0; c < d.C; c++) {
                            int64_t i =
                                xat(&d, n, c, oh * d.st - d.pad + kh, ow * d.st - d.pad + kw);
                            col[q++] = i >= 0 ? IN(0)[i] : 0.0f;
                        }
                for (int64_t o = 0; o < d.O; o++) {
                    float s = 0.0f;
                    q = 0;
                    for (int64_t kh = 0; kh < d.KH; kh++)
                        for (int64_t kw = 0; kw < d.KW; kw++)
                            for (int64_t c = 0; c < d.C; c++)
                                s = fmaf(col[q++], IN(1)[((o * d.C + c) * d.KH + kh) * d.KW + kw],
                                         s);
                    OUT(0)[((n * d.O + o) * d.OH + oh) * d.OW + ow] = s;
                }
            }
    free(col);
    return PEAT_OK;
}
/* backward data (dY, W -> dX): the output channels' sum in an order drawn per call (blocks of
 * channels finishing in any order) */
static peat_status conv_bwd_data_race(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    cd d = cd_of(a);
    int64_t *ord = malloc((size_t)(d.O > 0 ? d.O : 1) * sizeof *ord);
    if (!ord) return PEAT_ERR_NOMEM;
    uint64_t seed = zoo_upset_draw();
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t c = 0; c < d.C; c++)
            for (int64_t ih = 0; ih < d.H; ih++)
                for (int64_t iw = 0; iw < d.W; iw++) {
                    ho_shuffle(ord, d.O, ho_next(&seed));
                    float s = 0.0f;
                    for (int64_t q = 0; q < d.O; q++) {
                        int64_t o = ord[q];
                        float t = 0.0f;
                        for (int64_t kh = 0; kh < d.KH; kh++)
                            for (int64_t kw = 0; kw < d.KW; kw++) {
                                int64_t th = ih + d.pad - kh, tw = iw + d.pad - kw;
                                if (th < 0 || tw < 0 || th % d.st || tw % d.st) continue;
                                int64_t oh = th / d.st, ow = tw / d.st;
                                if (oh >= d.OH || ow >= d.OW) continue;
                                t += IN(0)[((n * d.O + o) * d.OH + oh) * d.OW + ow] *
                                     IN(1)[((o * d.C + c) * d.KH + kh) * d.KW + kw];
                            }
                        s += t;
                    }
                    OUT(0)[((n * d.C + c) * d.H + ih) * d.W + iw] = s;
                }
    free(ord);
    return PEAT_OK;
}
/* backward filter (X, dY -> dW) that walks the input with stride 1 whatever the stride */
static peat_status conv_bwd_filter_stride1(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    cd d = cd_of(a);
    for (int64_t o = 0; o < d.O; o++)
        for (int64_t c = 0; c < d.C; c++)
            for (int64_t kh = 0; kh < d.KH; kh++)
                for (int64_t kw = 0; kw < d.KW; kw++) {
                    double s = 0.0;
                    for (int64_t n = 0; n < d.N; n++)
                        for (int64_t oh = 0; oh < d.OH; oh++)
                            for (int64_t ow = 0; ow < d.OW; ow++) {
                                int64_t i = xat(&d, n, c, oh - d.pad + kh, ow - d.pad + kw);
                                if (i >= 0)
                                    s += (double)IN(0)[i] *
                                         IN(1)[((n * d.O + o) * d.OH + oh) * d.OW + ow];
                            }
                    OUT(0)[((o * d.C + c) * d.KH + kh) * d.KW + kw] = (float)s;
                }
    return PEAT_OK;
}

int h7_register_resnet(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h7_batchnorm_var_unbiased", PEAT_OP_BATCHNORM, bn_var_unbiased,
                   "normalised by the unbiased variance"),
        ZOO_KERNEL("h7_batchnorm_two_pass_pairwise", PEAT_OP_BATCHNORM, bn_two_pass_pairwise,
                   "honest: fp32 two passes, pairwise"),
        ZOO_KERNEL("h7_batchnorm_bwd_no_xhat", PEAT_OP_BATCHNORM_BWD, bn_bwd_no_xhat,
                   "dX without the x-hat term"),
        ZOO_KERNEL("h7_batchnorm_bwd_dx_f16", PEAT_OP_BATCHNORM_BWD, bn_bwd_dx_f16,
                   "dX stored in fp16"),
        ZOO_KERNEL("h7_maxpool_bwd_ties", PEAT_OP_MAXPOOL2D_BWD, maxpool_bwd_ties,
                   "every tied maximum takes the gradient"),
        ZOO_KERNEL("h7_maxpool_bwd_argmax", PEAT_OP_MAXPOOL2D_BWD, maxpool_bwd_argmax,
                   "honest: argmax then scatter"),
        ZOO_KERNEL("h7_avgpool_exclude_pad", PEAT_OP_AVGPOOL2D, avgpool_exclude_pad,
                   "padding not counted"),
        ZOO_KERNEL("h7_avgpool_bwd_bf16", PEAT_OP_AVGPOOL2D_BWD, avgpool_bwd_bf16,
                   "dX accumulated in bf16"),
        ZOO_KERNEL("h7_sgd_lr_in_mom", PEAT_OP_SGD, sgd_lr_in_mom, "lr folded into the momentum"),
        ZOO_KERNEL("h7_adamw_wd_no_lr", PEAT_OP_ADAMW, adamw_wd_no_lr, "decay not scaled by lr"),
        ZOO_KERNEL("h7_adamw_torch_form", PEAT_OP_ADAMW, adamw_torch_form,
                   "honest: torch's single-tensor form"),
        ZOO_KERNEL("h7_gemm_fp8_no_scale_b", PEAT_OP_GEMM_FP8, gemm_fp8_no_scale_b,
                   "B's scale not applied"),
        ZOO_KERNEL("h7_conv_acc_f16", PEAT_OP_CONV2D, conv_acc_f16, "summed in fp16"),
        ZOO_KERNEL("h7_conv_im2col_hwc", PEAT_OP_CONV2D, conv_im2col_hwc,
                   "honest: im2col, (kh, kw, c) order"),
        ZOO_KERNEL("h7_conv_bwd_data_race", PEAT_OP_CONV2D_BWD_DATA, conv_bwd_data_race,
                   "channel order drawn per call"),
        ZOO_KERNEL("h7_conv_bwd_filter_stride1", PEAT_OP_CONV2D_BWD_FILTER, conv_bwd_filter_stride1,
                   "stride ignored"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
