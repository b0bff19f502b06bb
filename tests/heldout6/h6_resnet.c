/* h6_resnet.c: the sixth held-out set's kernels of the ResNet flow, the optimizers and the fp8
 * GEMM. */
#include "heldout6.h"

/* ---- batch norm: i = N C S ; f = eps, momentum ; X gamma beta rm rv -> Y mean rstd rm' rv' ----
 */

static void bn_d(const peat_args *a, int stale_rm, int mean_f16)
{
    int64_t N = PI(0), C = PI(1), S = PI(2);
    double M = (double)(N * S), eps = PF(0), mom = PF(1);
    for (int64_t c = 0; c < C; c++) {
        double m = 0.0, v = 0.0;
        float mh = 0.0f;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                m += IN(0)[(n * C + c) * S + s];
                mh = zoo_f16(mh + IN(0)[(n * C + c) * S + s]);
            }
        m = mean_f16 ? (double)zoo_f16((float)(mh / M)) : m / M;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                double d = IN(0)[(n * C + c) * S + s] - m;
                v += d * d;
            }
        v /= M;
        double rs = 1.0 / sqrt(v + eps);
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                OUT(0)[i] = (float)((IN(0)[i] - m) * rs * IN(1)[c] + IN(2)[c]);
            }
        OUT(1)[c] = (float)m, OUT(2)[c] = (float)rs;
        /* stale_rm: the running mean passed through unchanged */
        OUT(3)[c] = stale_rm ? IN(3)[c] : (float)((1.0 - mom) * IN(3)[c] + mom * m);
        OUT(4)[c] = (float)((1.0 - mom) * IN(4)[c] + mom * v * M / (M > 1.0 ? M - 1.0 : 1.0));
    }
}
static peat_status bn_running_mean_stale(const peat_args *a, const peat_kernel *self)
{
    (void)self, bn_d(a, 1, 0);
    return PEAT_OK;
}
/* the mean summed in fp16 */
static peat_status bn_mean_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self, bn_d(a, 0, 1);
    return PEAT_OK;
}

/* backward: X gamma mean rstd dY -> dX dgamma dbeta */
enum { BNB_OK, BNB_DBETA_MEAN, BNB_CH0_DG };

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
                OUT(0)[i] = (float)(g * rs * (IN(4)[i] - sdy / M - xh * sdx / M));
            }
        OUT(1)[c] = kind == BNB_CH0_DG && c == 0 ? 0.0f : (float)sdx;
        OUT(2)[c] = (float)(kind == BNB_DBETA_MEAN ? sdy / M : sdy);
    }
}
/* dbeta as the mean of dY */
static peat_status bn_bwd_dbeta_mean(const peat_args *a, const peat_kernel *self)
{
    (void)self, bn_bwd_d(a, BNB_DBETA_MEAN);
    return PEAT_OK;
}
/* channel 0's dgamma left at zero */
static peat_status bn_bwd_ch0_dg(const peat_args *a, const peat_kernel *self)
{
    (void)self, bn_bwd_d(a, BNB_CH0_DG);
    return PEAT_OK;
}
/* honest: two passes in fp32, the centred form */
static peat_status bn_bwd_two_pass(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t N = PI(0), C = PI(1), S = PI(2);
    float M = (float)(N * S);
    for (int64_t c = 0; c < C; c++) {
        float m = IN(2)[c], rs = IN(3)[c], g = IN(1)[c], sdy = 0.0f, sdx = 0.0f;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                float xh = (IN(0)[i] - m) * rs;
                sdy += IN(4)[i], sdx = fmaf(IN(4)[i], xh, sdx);
            }
        float a1 = sdy / M, a2 = sdx / M, k = g * rs;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                float xh = (IN(0)[i] - m) * rs;
                OUT(0)[i] = k * (IN(4)[i] - a1 - xh * a2);
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

/* max pooling whose last output column is never written (left at zero) */
static peat_status maxpool_last_col(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    pd d = pd_of(a);
    memset(OUT(0), 0, (size_t)(d.N * d.C * d.OH * d.OW) * sizeof(float));
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW - (d.OW > 1); ow++) {
                float best = -INFINITY;
                for (int64_t kh = 0; kh < d.K; kh++)
                    for (int64_t kw = 0; kw < d.K; kw++) {
                        int64_t i = at(&d, nc, oh, ow, kh, kw);
                        if (i >= 0 && IN(0)[i] > best) best = IN(0)[i];
                    }
                OUT(0)[(nc * d.OH + oh) * d.OW + ow] = best;
            }
    return PEAT_OK;
}

static void avgpool_d(const peat_args *a, int y_f16)
{
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
                float y = (float)(s / (double)(d.K * d.K));
                OUT(0)[(nc * d.OH + oh) * d.OW + ow] = y_f16 ? zoo_f16(y) : y;
            }
}
/* average pooling with Y stored through fp16 */
static peat_status avgpool_y_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self, avgpool_d(a, 1);
    return PEAT_OK;
}
/* honest: the window summed in fp32, then divided by K^2 */
static peat_status avgpool_sum_div(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    pd d = pd_of(a);
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                float s = 0.0f;
                for (int64_t kh = 0; kh < d.K; kh++)
                    for (int64_t kw = 0; kw < d.K; kw++) {
                        int64_t i = at(&d, nc, oh, ow, kh, kw);
                        if (i >= 0) s += IN(0)[i];
                    }
                OUT(0)[(nc * d.OH + oh) * d.OW + ow] = s / (float)(d.K * d.K);
            }
    return PEAT_OK;
}
/* average pooling backward that divides dY by K, not K^2 */
static peat_status avgpool_bwd_div_k(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    pd d = pd_of(a);
    memset(OUT(0), 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof(float));
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                double g = IN(0)[(nc * d.OH + oh) * d.OW + ow] / (double)d.K;
                for (int64_t kh = 0; kh < d.K; kh++)
                    for (int64_t kw = 0; kw < d.K; kw++) {
                        int64_t i = at(&d, nc, oh, ow, kh, kw);
                        if (i >= 0) OUT(0)[i] = (float)(OUT(0)[i] + g);
                    }
            }
    return PEAT_OK;
}

/* ---- SGD: i = n nesterov ; f = lr momentum wd ; p g mom -> p' mom' ---- */

/* the Nesterov step whatever the flag says */
static peat_status sgd_nesterov_always(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    double lr = PF(0), mu = PF(1), wd = PF(2);
    for (int64_t i = 0; i < PI(0); i++) {
        double p = IN(0)[i], g = IN(1)[i] + wd * p, m = mu * IN(2)[i] + g;
        OUT(0)[i] = (float)(p - lr * (g + mu * m)), OUT(1)[i] = (float)m;
    }
    return PEAT_OK;
}

/* ---- AdamW: i = n t ; f = lr b1 b2 eps wd ; p g m v -> p' m' v' ---- */

/* the first moment stored in bf16 */
static peat_status adamw_m_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    double lr = PF(0), b1 = PF(1), b2 = PF(2), eps = PF(3), wd = PF(4);
    double bc1 = 1.0 - pow(b1, (double)PI(1)), bc2 = 1.0 - pow(b2, (double)PI(1));
    for (int64_t i = 0; i < PI(0); i++) {
        double p = IN(0)[i], g = IN(1)[i];
        double m = b1 * IN(2)[i] + (1.0 - b1) * g, v = b2 * IN(3)[i] + (1.0 - b2) * g * g;
        OUT(0)[i] = (float)(p - lr * ((m / bc1) / (sqrt(v / bc2) + eps) + wd * p));
        OUT(1)[i] = zoo_bf16((float)m), OUT(2)[i] = (float)v;
    }
    return PEAT_OK;
}

/* ---- fp8 GEMM: i = tA tB M N K batch fmtA fmtB ; f = scale_a beta scale_b ---- */

static peat_status fp8_d(const peat_args *a, int trunc16)
{
    zoo_gemm g = zoo_gemm_of(a);
    float sab = (float)PF(0) * (float)PF(2), beta = (float)PF(1);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = 0.0f, part[64];
                int64_t np = 0;
                for (int64_t k0 = 0; k0 < g.K; k0 += 32) {
                    float t = 0.0f;
                    for (int64_t k = k0; k < g.K && k < k0 + 32; k++)
                        t += zoo_a(a, &g, b, i, k) * zoo_b(a, &g, b, k, j);
                    if (np < 64)
                        part[np++] = t;
                    else
                        s += t;
                }
                if (trunc16) {
                    /* the running sum cut to bf16 after each block of 32 (a narrow accumulator
                     * register stored by dropping its low half) */
                    for (int64_t q = 0; q < np; q++) s = ho_bf16_rz(s + part[q]);
                } else {
                    for (int64_t w = 1; w < np; w *= 2)
                        for (int64_t q = 0; q + w < np; q += 2 * w) part[q] += part[q + w];
                    s += np ? part[0] : 0.0f;
                }
                float y = s * sab;
                if (beta != 0.0f)
                    y += beta * ((const float *)a->in[2]->data)[(b * g.M + i) * g.N + j];
                OUT(0)[(b * g.M + i) * g.N + j] = y;
            }
    return PEAT_OK;
}
static peat_status gemm_fp8_acc_trunc(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return fp8_d(a, 1);
}
/* honest: fp32 blocks of 32 products, the blocks joined pairwise */
static peat_status gemm_fp8_pairwise(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return fp8_d(a, 0);
}

int h6_register_resnet(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h6_batchnorm_running_mean_stale", PEAT_OP_BATCHNORM, bn_running_mean_stale,
                   "running mean not updated"),
        ZOO_KERNEL("h6_batchnorm_mean_f16", PEAT_OP_BATCHNORM, bn_mean_f16, "mean summed in fp16"),
        ZOO_KERNEL("h6_batchnorm_bwd_dbeta_mean", PEAT_OP_BATCHNORM_BWD, bn_bwd_dbeta_mean,
                   "dbeta as the mean of dY"),
        ZOO_KERNEL("h6_batchnorm_bwd_ch0_dg", PEAT_OP_BATCHNORM_BWD, bn_bwd_ch0_dg,
                   "channel 0's dgamma zero"),
        ZOO_KERNEL("h6_batchnorm_bwd_two_pass", PEAT_OP_BATCHNORM_BWD, bn_bwd_two_pass,
                   "honest: two fp32 passes"),
        ZOO_KERNEL("h6_maxpool_last_col", PEAT_OP_MAXPOOL2D, maxpool_last_col,
                   "the last output column unwritten"),
        ZOO_KERNEL("h6_avgpool_y_f16", PEAT_OP_AVGPOOL2D, avgpool_y_f16, "Y through fp16"),
        ZOO_KERNEL("h6_avgpool_sum_div", PEAT_OP_AVGPOOL2D, avgpool_sum_div,
                   "honest: sum then divide"),
        ZOO_KERNEL("h6_avgpool_bwd_div_k", PEAT_OP_AVGPOOL2D_BWD, avgpool_bwd_div_k,
                   "dY divided by K"),
        ZOO_KERNEL("h6_sgd_nesterov_always", PEAT_OP_SGD, sgd_nesterov_always,
                   "Nesterov whatever the flag"),
        ZOO_KERNEL("h6_adamw_m_bf16", PEAT_OP_ADAMW, adamw_m_bf16, "m' stored in bf16"),
        ZOO_KERNEL("h6_gemm_fp8_acc_trunc", PEAT_OP_GEMM_FP8, gemm_fp8_acc_trunc,
                   "the running sum cut to bf16 per block"),
        ZOO_KERNEL("h6_gemm_fp8_pairwise", PEAT_OP_GEMM_FP8, gemm_fp8_pairwise,
                   "honest: blocks of 32 joined pairwise"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
