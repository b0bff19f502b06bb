/* h8_resnet.c: the eighth held-out set's kernels of the ResNet flow (batch norm, pooling,
 * convolution), SGD and the fp8 GEMM. */
#include "heldout8.h"

/* ---- batch norm: i = N C S ; f = eps, momentum ; X gamma beta rm rv -> Y mean rstd rm' rv' ----
 */

enum { BN_RV_NO_MOMENTUM, BN_NO_BETA };

static void bn_d(const peat_args *a, int kind)
{
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
        double rs = 1.0 / sqrt(v / M + eps), beta = kind == BN_NO_BETA ? 0.0 : IN(2)[c];
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                OUT(0)[i] = (float)((IN(0)[i] - m) * rs * IN(1)[c] + beta);
            }
        OUT(1)[c] = (float)m, OUT(2)[c] = (float)rs;
        OUT(3)[c] = (float)((1.0 - mom) * IN(3)[c] + mom * m);
        /* BN_RV_NO_MOMENTUM: the running variance replaced by the batch's */
        OUT(4)
        [c] = (float)(kind == BN_RV_NO_MOMENTUM ? v / Mu : (1.0 - mom) * IN(4)[c] + mom * v / Mu);
    }
}
static peat_status bn_rv_no_momentum(const peat_args *a, const peat_kernel *self)
{
    (void)self, bn_d(a, BN_RV_NO_MOMENTUM);
    return PEAT_OK;
}
static peat_status bn_no_beta(const peat_args *a, const peat_kernel *self)
{
    (void)self, bn_d(a, BN_NO_BETA);
    return PEAT_OK;
}

/* backward: X gamma mean rstd dY -> dX dgamma dbeta */
/* dgamma and dbeta summed over the images in an order drawn per call (image blocks racing) */
static peat_status bn_bwd_race(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t N = PI(0), C = PI(1), S = PI(2);
    double M = (double)(N * S);
    int64_t *ord = malloc((size_t)(N > 0 ? N : 1) * sizeof *ord);
    if (!ord) return PEAT_ERR_NOMEM;
    uint64_t seed = zoo_upset_draw();
    for (int64_t c = 0; c < C; c++) {
        double m = IN(2)[c], rs = IN(3)[c], g = IN(1)[c], sdy = 0.0, sdx = 0.0;
        float fdy = 0.0f, fdx = 0.0f;
        ho_shuffle(ord, N, ho_next(&seed));
        for (int64_t q = 0; q < N; q++) {
            float pdy = 0.0f, pdx = 0.0f;
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (ord[q] * C + c) * S + s;
                float xh = (float)((IN(0)[i] - m) * rs);
                pdy += IN(4)[i], pdx += IN(4)[i] * xh;
                sdy += IN(4)[i], sdx += IN(4)[i] * (IN(0)[i] - m) * rs;
            }
            fdy += pdy, fdx += pdx;
        }
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                double xh = (IN(0)[i] - m) * rs;
                OUT(0)[i] = (float)(g * rs * (IN(4)[i] - sdy / M - xh * sdx / M));
            }
        OUT(1)[c] = fdx, OUT(2)[c] = fdy;
    }
    free(ord);
    return PEAT_OK;
}
/* honest: the coefficients folded (k = gamma rstd, a = mean dY, b = mean dY x-hat), dX = k (dY -
 * a - x-hat b) with fma, fp32 */
static peat_status bn_bwd_folded(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t N = PI(0), C = PI(1), S = PI(2);
    float M = (float)(N * S);
    for (int64_t c = 0; c < C; c++) {
        float m = IN(2)[c], rs = IN(3)[c], sdy = 0.0f, sdx = 0.0f;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                sdy += IN(4)[i], sdx = fmaf(IN(4)[i], (IN(0)[i] - m) * rs, sdx);
            }
        float k = IN(1)[c] * rs, av = sdy / M, bv = sdx / M;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                float xh = (IN(0)[i] - m) * rs;
                OUT(0)[i] = k * fmaf(-xh, bv, IN(4)[i] - av);
            }
        OUT(1)[c] = sdx, OUT(2)[c] = sdy;
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
static int64_t argmax(const pd *d, const float *x, int64_t nc, int64_t oh, int64_t ow)
{
    int64_t best = -1;
    for (int64_t kh = 0; kh < d->K; kh++)
        for (int64_t kw = 0; kw < d->K; kw++) {
            int64_t i = at(d, nc, oh, ow, kh, kw);
            if (i >= 0 && (best < 0 || x[i] > x[best])) best = i;
        }
    return best;
}

/* max pooling whose last output row is never written (zeros) */
static peat_status maxpool_last_row(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    pd d = pd_of(a);
    memset(OUT(0), 0, (size_t)(d.N * d.C * d.OH * d.OW) * sizeof(float));
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH - (d.OH > 1); oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                int64_t b = argmax(&d, IN(0), nc, oh, ow);
                OUT(0)[(nc * d.OH + oh) * d.OW + ow] = b >= 0 ? IN(0)[b] : 0.0f;
            }
    return PEAT_OK;
}
/* max pooling backward (X, dY -> dX) that reads dY at (ow, oh) where the output is square (a
 * transposed index) */
static peat_status maxpool_bwd_dy_transposed(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    pd d = pd_of(a);
    memset(OUT(0), 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof(float));
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                int64_t b = argmax(&d, IN(0), nc, oh, ow);
                int64_t y =
                    d.OH == d.OW ? (nc * d.OH + ow) * d.OW + oh : (nc * d.OH + oh) * d.OW + ow;
                if (b >= 0) OUT(0)[b] += IN(1)[y];
            }
    return PEAT_OK;
}
/* average pooling backward (dY -> dX) flushing subnormal results to zero */
static peat_status avgpool_bwd_ftz(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    pd d = pd_of(a);
    int64_t n = d.N * d.C * d.H * d.W;
    double *acc = calloc((size_t)(n > 0 ? n : 1), sizeof *acc);
    if (!acc) return PEAT_ERR_NOMEM;
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                double g = IN(0)[(nc * d.OH + oh) * d.OW + ow] / (double)(d.K * d.K);
                for (int64_t kh = 0; kh < d.K; kh++)
                    for (int64_t kw = 0; kw < d.K; kw++) {
                        int64_t i = at(&d, nc, oh, ow, kh, kw);
                        if (i >= 0) acc[i] += g;
                    }
            }
    for (int64_t i = 0; i < n; i++) OUT(0)[i] = ho_ftz((float)acc[i]);
    free(acc);
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
static float conv_at(const peat_args *a, const cd *d, int64_t n, int64_t o, int64_t oh, int64_t ow)
{
    double s = 0.0;
    for (int64_t c = 0; c < d->C; c++)
        for (int64_t kh = 0; kh < d->KH; kh++)
            for (int64_t kw = 0; kw < d->KW; kw++) {
                int64_t i = xat(d, n, c, oh * d->st - d->pad + kh, ow * d->st - d->pad + kw);
                if (i >= 0)
                    s += (double)IN(0)[i] * IN(1)[((o * d->C + c) * d->KH + kh) * d->KW + kw];
            }
    return (float)s;
}
/* forward with a transient upset: in about one call of three, one output has bit 24 flipped */
static peat_status conv_upset(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    cd d = cd_of(a);
    int64_t n = d.N * d.O * d.OH * d.OW;
    for (int64_t b = 0; b < d.N; b++)
        for (int64_t o = 0; o < d.O; o++)
            for (int64_t oh = 0; oh < d.OH; oh++)
                for (int64_t ow = 0; ow < d.OW; ow++)
                    OUT(0)[((b * d.O + o) * d.OH + oh) * d.OW + ow] = conv_at(a, &d, b, o, oh, ow);
    uint64_t h = zoo_upset_draw();
    if (h % 3 == 0 && n > 0) {
        int64_t i = (int64_t)((h >> 8) % (uint64_t)n);
        OUT(0)[i] = ho_flip(OUT(0)[i], 24);
    }
    return PEAT_OK;
}
/* backward filter (X, dY -> dW) over all images but the last */
static peat_status conv_bwd_filter_skip_last(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    cd d = cd_of(a);
    int64_t Ne = d.N > 1 ? d.N - 1 : d.N;
    for (int64_t o = 0; o < d.O; o++)
        for (int64_t c = 0; c < d.C; c++)
            for (int64_t kh = 0; kh < d.KH; kh++)
                for (int64_t kw = 0; kw < d.KW; kw++) {
                    double s = 0.0;
                    for (int64_t n = 0; n < Ne; n++)
                        for (int64_t oh = 0; oh < d.OH; oh++)
                            for (int64_t ow = 0; ow < d.OW; ow++) {
                                int64_t i =
                                    xat(&d, n, c, oh * d.st - d.pad + kh, ow * d.st - d.pad + kw);
                                if (i >= 0)
                                    s += (double)IN(0)[i] *
                                         IN(1)[((n * d.O + o) * d.OH + oh) * d.OW + ow];
                            }
                    OUT(0)[((o * d.C + c) * d.KH + kh) * d.KW + kw] = (float)s;
                }
    return PEAT_OK;
}
/* honest: backward data (dY, W -> dX) as a gather per input pixel, fp32, output channels outer */
static peat_status conv_bwd_data_gather(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    cd d = cd_of(a);
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t c = 0; c < d.C; c++)
            for (int64_t ih = 0; ih < d.H; ih++)
                for (int64_t iw = 0; iw < d.W; iw++) {
                    float s = 0.0f;
                    for (int64_t o = 0; o < d.O; o++)
                        for (int64_t kh = 0; kh < d.KH; kh++)
                            for (int64_t kw = 0; kw < d.KW; kw++) {
                                int64_t th = ih + d.pad - kh, tw = iw + d.pad - kw;
                                if (th < 0 || tw < 0 || th % d.st || tw % d.st) continue;
                                int64_t oh = th / d.st, ow = tw / d.st;
                                if (oh >= d.OH || ow >= d.OW) continue;
                                s = fmaf(IN(0)[((n * d.O + o) * d.OH + oh) * d.OW + ow],
                                         IN(1)[((o * d.C + c) * d.KH + kh) * d.KW + kw], s);
                            }
                    OUT(0)[((n * d.C + c) * d.H + ih) * d.W + iw] = s;
                }
    return PEAT_OK;
}

/* ---- SGD: i = n nesterov ; f = lr momentum wd ; p g mom -> p' mom' ---- */

/* the parameter stepped with the new momentum, the momentum buffer written back unchanged */
static peat_status sgd_mom_stale(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    double lr = PF(0), mu = PF(1), wd = PF(2);
    for (int64_t i = 0; i < PI(0); i++) {
        double p = IN(0)[i], g = IN(1)[i] + wd * p, m = mu * IN(2)[i] + g;
        double dd = PI(1) ? g + mu * m : m;
        OUT(0)[i] = (float)(p - lr * dd), OUT(1)[i] = IN(2)[i];
    }
    return PEAT_OK;
}

/* ---- fp8 GEMM: i = tA tB M N K batch fmtA fmtB ; f = scale_a beta scale_b ---- */

/* the K sum in a bf16 accumulator */
static peat_status gemm_fp8_acc_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    double sab = PF(0) * PF(2), beta = PF(1);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = 0.0f;
                for (int64_t k = 0; k < g.K; k++)
                    s = zoo_bf16(s + zoo_a(a, &g, b, i, k) * zoo_b(a, &g, b, k, j));
                double y = (double)s * sab;
                if (beta != 0.0)
                    y += beta * ((const float *)a->in[2]->data)[(b * g.M + i) * g.N + j];
                OUT(0)[(b * g.M + i) * g.N + j] = (float)y;
            }
    return PEAT_OK;
}

int h8_register_resnet(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h8_batchnorm_rv_no_momentum", PEAT_OP_BATCHNORM, bn_rv_no_momentum,
                   "running variance replaced"),
        ZOO_KERNEL("h8_batchnorm_no_beta", PEAT_OP_BATCHNORM, bn_no_beta, "beta never added"),
        ZOO_KERNEL("h8_batchnorm_bwd_race", PEAT_OP_BATCHNORM_BWD, bn_bwd_race,
                   "dgamma, dbeta images in a drawn order"),
        ZOO_KERNEL("h8_batchnorm_bwd_folded", PEAT_OP_BATCHNORM_BWD, bn_bwd_folded,
                   "honest: folded coefficients"),
        ZOO_KERNEL("h8_maxpool_last_row", PEAT_OP_MAXPOOL2D, maxpool_last_row,
                   "last output row unwritten"),
        ZOO_KERNEL("h8_maxpool_bwd_dy_transposed", PEAT_OP_MAXPOOL2D_BWD, maxpool_bwd_dy_transposed,
                   "dY read transposed"),
        ZOO_KERNEL("h8_avgpool_bwd_ftz", PEAT_OP_AVGPOOL2D_BWD, avgpool_bwd_ftz,
                   "dX flushes subnormals"),
        ZOO_KERNEL("h8_conv_upset", PEAT_OP_CONV2D, conv_upset, "bit 24 flipped, 1 call in 3"),
        ZOO_KERNEL("h8_conv_bwd_filter_skip_last", PEAT_OP_CONV2D_BWD_FILTER,
                   conv_bwd_filter_skip_last, "last image left out"),
        ZOO_KERNEL("h8_conv_bwd_data_gather", PEAT_OP_CONV2D_BWD_DATA, conv_bwd_data_gather,
                   "honest: gather, fp32"),
        ZOO_KERNEL("h8_sgd_mom_stale", PEAT_OP_SGD, sgd_mom_stale, "momentum not written back"),
        ZOO_KERNEL("h8_gemm_fp8_acc_bf16", PEAT_OP_GEMM_FP8, gemm_fp8_acc_bf16, "K sum in bf16"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
