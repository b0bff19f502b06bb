/* h3_resnet.c: batch norm, pooling and SGD kernels of the third held-out set. */
#include "heldout3.h"

/* ---- batch norm (training mode) ---- */

enum { BN_RV_BIASED, BN_MOMENTUM_SWAPPED };

static void bn_fwd(const peat_args *a, int mode)
{
    int64_t N = a->p.i[0], C = a->p.i[1], S = a->p.i[2], M = N * S;
    float eps = (float)a->p.f[0], mom = (float)a->p.f[1];
    const float *x = CF(a->in[0]), *g = CF(a->in[1]), *b = CF(a->in[2]);
    const float *rm = CF(a->in[3]), *rv = CF(a->in[4]);
    for (int64_t c = 0; c < C; c++) {
        float sum = 0.0f, sq = 0.0f;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) sum += x[(n * C + c) * S + s];
        float mean = sum / (float)M;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                float d = x[(n * C + c) * S + s] - mean;
                sq += d * d;
            }
        float var = sq / (float)M, rs = 1.0f / sqrtf(var + eps);
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                F(a->out[0])[i] = (x[i] - mean) * rs * g[c] + b[c];
            }
        F(a->out[1])[c] = mean, F(a->out[2])[c] = rs;
        float uvar = mode == BN_RV_BIASED || M < 2 ? var : sq / (float)(M - 1);
        if (mode == BN_MOMENTUM_SWAPPED) {
            F(a->out[3])[c] = mom * rm[c] + (1.0f - mom) * mean;
            F(a->out[4])[c] = mom * rv[c] + (1.0f - mom) * uvar;
        } else {
            F(a->out[3])[c] = (1.0f - mom) * rm[c] + mom * mean;
            F(a->out[4])[c] = (1.0f - mom) * rv[c] + mom * uvar;
        }
    }
}

static peat_status bn_rv_biased(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    bn_fwd(a, BN_RV_BIASED);
    return PEAT_OK;
}
static peat_status bn_momentum_swapped(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    bn_fwd(a, BN_MOMENTUM_SWAPPED);
    return PEAT_OK;
}

enum { BNB_EXPANDED, BNB_DGAMMA_BF16, BNB_CH0_GAMMA1 };

static void bn_bwd(const peat_args *a, int mode)
{
    int64_t N = a->p.i[0], C = a->p.i[1], S = a->p.i[2], M = N * S;
    const float *x = CF(a->in[0]), *g = CF(a->in[1]), *mean = CF(a->in[2]);
    const float *rstd = CF(a->in[3]), *dy = CF(a->in[4]);
    for (int64_t c = 0; c < C; c++) {
        float db = 0.0f, dg = 0.0f, mu = mean[c], rs = rstd[c];
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                db += dy[i];
                dg += dy[i] * (x[i] - mu) * rs;
                if (mode == BNB_DGAMMA_BF16) dg = zoo_bf16(dg);
            }
        float gam = mode == BNB_CH0_GAMMA1 && c == 0 && C > 1 ? g[1] : g[c];
        /* dX = k1 dY + k2 + k3 xhat */
        float k1 = gam * rs, k2 = -k1 * db / (float)M, k3 = -k1 * dg / (float)M;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                F(a->out[0])[i] = k1 * dy[i] + k2 + k3 * ((x[i] - mu) * rs);
            }
        F(a->out[1])[c] = dg, F(a->out[2])[c] = db;
    }
}

static peat_status bn_bwd_expanded(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    bn_bwd(a, BNB_EXPANDED);
    return PEAT_OK;
}
static peat_status bn_bwd_dgamma_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    bn_bwd(a, BNB_DGAMMA_BF16);
    return PEAT_OK;
}
static peat_status bn_bwd_ch0_gamma1(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    bn_bwd(a, BNB_CH0_GAMMA1);
    return PEAT_OK;
}

/* ---- pooling ---- */

typedef struct pool {
    int64_t N, C, H, W, K, s, p, OH, OW;
} pool;

static pool pool_of(const peat_args *a)
{
    const int64_t *i = a->p.i;
    pool q = {i[0], i[1], i[2], i[3], i[4], i[5], i[6], 0, 0};
    q.OH = (q.H + 2 * q.p - q.K) / q.s + 1;
    q.OW = (q.W + 2 * q.p - q.K) / q.s + 1;
    return q;
}

/* max over a (K-1) x (K-1) window: the window's last row and column never looked at */
static peat_status maxpool_short_window(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    pool q = pool_of(a);
    int64_t k = q.K > 1 ? q.K - 1 : 1;
    for (int64_t nc = 0; nc < q.N * q.C; nc++)
        for (int64_t oh = 0; oh < q.OH; oh++)
            for (int64_t ow = 0; ow < q.OW; ow++) {
                float m = -INFINITY;
                for (int64_t u = 0; u < k; u++)
                    for (int64_t v = 0; v < k; v++) {
                        int64_t h = oh * q.s - q.p + u, w = ow * q.s - q.p + v;
                        if (h < 0 || h >= q.H || w < 0 || w >= q.W) continue;
                        float x = CF(a->in[0])[(nc * q.H + h) * q.W + w];
                        m = x > m ? x : m;
                    }
                F(a->out[0])[(nc * q.OH + oh) * q.OW + ow] = m;
            }
    return PEAT_OK;
}

/* the window's sum (padding as zeros) pairwise (pairwise = 1) or rounded toward zero, then / K^2 */
static void avgpool(const peat_args *a, int pairwise)
{
    pool q = pool_of(a);
    float buf[1024];
    for (int64_t nc = 0; nc < q.N * q.C; nc++)
        for (int64_t oh = 0; oh < q.OH; oh++)
            for (int64_t ow = 0; ow < q.OW; ow++) {
                int64_t n = 0;
                float acc = 0.0f;
                for (int64_t u = 0; u < q.K; u++)
                    for (int64_t v = 0; v < q.K; v++) {
                        int64_t h = oh * q.s - q.p + u, w = ow * q.s - q.p + v;
                        float x = h < 0 || h >= q.H || w < 0 || w >= q.W
                                      ? 0.0f
                                      : CF(a->in[0])[(nc * q.H + h) * q.W + w];
                        if (pairwise && n < 1024)
                            buf[n++] = x;
                        else
                            acc = pairwise ? acc + x : ho_add_rz(acc, x);
                    }
                while (pairwise && n > 1) {
                    int64_t h = n / 2;
                    for (int64_t i = 0; i < h; i++) buf[i] = buf[2 * i] + buf[2 * i + 1];
                    if (n % 2) buf[h] = buf[n - 1];
                    n = h + n % 2;
                }
                float sum = pairwise ? (n ? buf[0] : 0.0f) + acc : acc;
                float kk = (float)(q.K * q.K);
                F(a->out[0])
                [(nc * q.OH + oh) * q.OW + ow] =
                    pairwise ? sum / kk : ho_rz((double)sum / (double)kk);
            }
}

static peat_status avgpool_pairwise(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    avgpool(a, 1);
    return PEAT_OK;
}
static peat_status avgpool_rz(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    avgpool(a, 0);
    return PEAT_OK;
}

/* backward built with FTZ/DAZ: subnormal gradients read and written as zero */
static peat_status avgpool_bwd_ftz(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    pool q = pool_of(a);
    float *dx = F(a->out[0]);
    for (int64_t i = 0; i < q.N * q.C * q.H * q.W; i++) dx[i] = 0.0f;
    float kk = (float)(q.K * q.K);
    for (int64_t nc = 0; nc < q.N * q.C; nc++)
        for (int64_t oh = 0; oh < q.OH; oh++)
            for (int64_t ow = 0; ow < q.OW; ow++) {
                float g = ho_ftz(ho_ftz(CF(a->in[0])[(nc * q.OH + oh) * q.OW + ow]) / kk);
                for (int64_t u = 0; u < q.K; u++)
                    for (int64_t v = 0; v < q.K; v++) {
                        int64_t h = oh * q.s - q.p + u, w = ow * q.s - q.p + v;
                        if (h < 0 || h >= q.H || w < 0 || w >= q.W) continue;
                        float *d = &dx[(nc * q.H + h) * q.W + w];
                        *d = ho_ftz(*d + g);
                    }
            }
    return PEAT_OK;
}

/* ---- SGD ---- */

/* weight decay added to the gradient and again into the momentum */
static peat_status sgd_wd_twice(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    float lr = (float)a->p.f[0], mu = (float)a->p.f[1], wd = (float)a->p.f[2];
    const float *p = CF(a->in[0]), *g = CF(a->in[1]), *m = CF(a->in[2]);
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float gw = g[i] + wd * p[i];
        float mo = mu * m[i] + gw + wd * p[i];
        float pn = a->p.i[1] ? p[i] - lr * (gw + mu * mo) : p[i] - lr * mo;
        F(a->out[1])[i] = mo;
        F(a->out[0])[i] = pn;
    }
    return PEAT_OK;
}

int h3_register_resnet(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h3_batchnorm_running_var_biased", PEAT_OP_BATCHNORM, bn_rv_biased,
                   "running variance updated with the biased variance"),
        ZOO_KERNEL("h3_batchnorm_momentum_swapped", PEAT_OP_BATCHNORM, bn_momentum_swapped,
                   "running statistics with momentum and 1 - momentum swapped"),
        ZOO_KERNEL("h3_batchnorm_bwd_expanded", PEAT_OP_BATCHNORM_BWD, bn_bwd_expanded,
                   "honest: dX = k1 dY + k2 + k3 xhat per channel"),
        ZOO_KERNEL("h3_batchnorm_bwd_dgamma_bf16", PEAT_OP_BATCHNORM_BWD, bn_bwd_dgamma_bf16,
                   "dgamma accumulated in bf16"),
        ZOO_KERNEL("h3_batchnorm_bwd_ch0_gamma1", PEAT_OP_BATCHNORM_BWD, bn_bwd_ch0_gamma1,
                   "channel 0's dX with channel 1's gamma"),
        ZOO_KERNEL("h3_maxpool_short_window", PEAT_OP_MAXPOOL2D, maxpool_short_window,
                   "max over a (K-1) x (K-1) window"),
        ZOO_KERNEL("h3_avgpool_pairwise", PEAT_OP_AVGPOOL2D, avgpool_pairwise,
                   "honest: window sums pairwise"),
        ZOO_KERNEL("h3_avgpool_rz", PEAT_OP_AVGPOOL2D, avgpool_rz,
                   "window sum and divide rounded toward zero"),
        ZOO_KERNEL("h3_avgpool_bwd_ftz", PEAT_OP_AVGPOOL2D_BWD, avgpool_bwd_ftz,
                   "backward with subnormals flushed"),
        ZOO_KERNEL("h3_sgd_wd_twice", PEAT_OP_SGD, sgd_wd_twice, "weight decay applied twice"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
