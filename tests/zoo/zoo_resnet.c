/* zoo_resnet.c: batch norm and pooling kernels of the zoo: normalising with the unbiased
 * variance, a backward without the mean-gradient term, max pooling where the zero padding can win,
 * a max-pooling backward that drops the last output row's gradients, average pooling that divides
 * by the valid elements only, and window sums in bf16. */
#include "zoo.h"

static peat_status bn_unbiased(const peat_args *a, const peat_kernel *self)
{
    int64_t N = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    float eps = (float)a->p.f[0], mom = (float)a->p.f[1], M = (float)(N * S);
    const float *x = a->in[0]->data, *g = a->in[1]->data, *b = a->in[2]->data;
    const float *rm = a->in[3]->data, *rv = a->in[4]->data;
    float *y = a->out[0]->data;
    for (int64_t c = 0; c < C; c++) {
        float m = 0.0f, v = 0.0f;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) m += x[(n * C + c) * S + s];
        m /= M;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                float d = x[(n * C + c) * S + s] - m;
                v += d * d;
            }
        float vu = v / (M - 1.0f), rs = 1.0f / sqrtf(vu + eps); /* the defect: M - 1 */
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                y[i] = (x[i] - m) * rs * g[c] + b[c];
            }
        ((float *)a->out[1]->data)[c] = m, ((float *)a->out[2]->data)[c] = rs;
        ((float *)a->out[3]->data)[c] = (1.0f - mom) * rm[c] + mom * m;
        ((float *)a->out[4]->data)[c] = (1.0f - mom) * rv[c] + mom * vu;
    }
    return PEAT_OK;
}

static peat_status bn_bwd_no_mean(const peat_args *a, const peat_kernel *self)
{
    int64_t N = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    float M = (float)(N * S);
    const float *x = a->in[0]->data, *gm = a->in[1]->data, *mean = a->in[2]->data;
    const float *rstd = a->in[3]->data, *dy = a->in[4]->data;
    float *dx = a->out[0]->data, *dg = a->out[1]->data, *db = a->out[2]->data;
    for (int64_t c = 0; c < C; c++) {
        float sgx = 0.0f, sdy = 0.0f, sdx = 0.0f, rs = rstd[c];
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                float xh = (x[i] - mean[c]) * rs;
                sgx += dy[i] * gm[c] * xh, sdy += dy[i], sdx += dy[i] * xh;
            }
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                float xh = (x[i] - mean[c]) * rs; /* the defect: no - mean(g) */
                dx[i] = rs * (dy[i] * gm[c] - xh * sgx / M);
            }
        dg[c] = sdx, db[c] = sdy;
    }
    return PEAT_OK;
}

typedef struct zp {
    int64_t NC, H, W, K, st, pad, OH, OW;
} zp;
static zp zp_of(const peat_args *a)
{
    const int64_t *i = a->p.i;
    zp d = {i[0] * i[1], i[2], i[3], i[4], i[5], i[6], 0, 0};
    d.OH = (d.H + 2 * d.pad - d.K) / d.st + 1, d.OW = (d.W + 2 * d.pad - d.K) / d.st + 1;
    return d;
}
/* the window's elements: value, or (valid 0) the padding */
static float zp_at(const zp *d, const float *x, int64_t nc, int64_t oh, int64_t ow, int64_t kh,
                   int64_t kw, int *valid, int64_t *idx)
{
    int64_t ih = oh * d->st - d->pad + kh, iw = ow * d->st - d->pad + kw;
    *valid = ih >= 0 && ih < d->H && iw >= 0 && iw < d->W;
    *idx = *valid ? (nc * d->H + ih) * d->W + iw : -1;
    return *valid ? x[*idx] : 0.0f;
}

static peat_status maxpool_pad_wins(const peat_args *a, const peat_kernel *self)
{
    zp d = zp_of(a);
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t nc = 0; nc < d.NC; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                float best = -INFINITY;
                for (int64_t kh = 0; kh < d.K; kh++)
                    for (int64_t kw = 0; kw < d.K; kw++) {
                        int v;
                        int64_t i;
                        float e = zp_at(&d, x, nc, oh, ow, kh, kw, &v, &i); /* padding: 0 */
                        best = e > best ? e : best;
                    }
                y[(nc * d.OH + oh) * d.OW + ow] = best;
            }
    return PEAT_OK;
}

static peat_status maxpool_bwd_last_row(const peat_args *a, const peat_kernel *self)
{
    zp d = zp_of(a);
    const float *x = a->in[0]->data, *dy = a->in[1]->data;
    float *dx = a->out[0]->data;
    memset(dx, 0, (size_t)(d.NC * d.H * d.W) * sizeof *dx);
    for (int64_t nc = 0; nc < d.NC; nc++)
        for (int64_t oh = 0; oh < d.OH - 1; oh++) /* the defect: the last output row skipped */
            for (int64_t ow = 0; ow < d.OW; ow++) {
                int64_t best = -1;
                for (int64_t kh = 0; kh < d.K; kh++)
                    for (int64_t kw = 0; kw < d.K; kw++) {
                        int v;
                        int64_t i;
                        zp_at(&d, x, nc, oh, ow, kh, kw, &v, &i);
                        if (v && (best < 0 || x[i] > x[best])) best = i;
                    }
                dx[best] += dy[(nc * d.OH + oh) * d.OW + ow];
            }
    return PEAT_OK;
}

static void avg(const peat_args *a, int exclude_pad, int bf16)
{
    zp d = zp_of(a);
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t nc = 0; nc < d.NC; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                float s = 0.0f;
                int cnt = 0;
                for (int64_t kh = 0; kh < d.K; kh++)
                    for (int64_t kw = 0; kw < d.K; kw++) {
                        int v;
                        int64_t i;
                        float e = zp_at(&d, x, nc, oh, ow, kh, kw, &v, &i);
                        s = bf16 ? zoo_bf16(s + e) : s + e, cnt += v;
                    }
                y[(nc * d.OH + oh) * d.OW + ow] = s / (float)(exclude_pad ? cnt : d.K * d.K);
            }
}
static peat_status avgpool_exclude_pad(const peat_args *a, const peat_kernel *self)
{
    avg(a, 1, 0);
    return PEAT_OK;
}
static peat_status avgpool_sum_bf16(const peat_args *a, const peat_kernel *self)
{
    avg(a, 0, 1);
    return PEAT_OK;
}

int zoo_register_resnet(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("zoo_batchnorm_unbiased", PEAT_OP_BATCHNORM, bn_unbiased,
                   "normalises with the unbiased (M - 1) variance"),
        ZOO_KERNEL("zoo_batchnorm_bwd_no_mean", PEAT_OP_BATCHNORM_BWD, bn_bwd_no_mean,
                   "backward without the mean(dY gamma) term"),
        ZOO_KERNEL("zoo_maxpool_pad_wins", PEAT_OP_MAXPOOL2D, maxpool_pad_wins,
                   "the zero padding takes part in the max"),
        ZOO_KERNEL("zoo_maxpool_bwd_last_row", PEAT_OP_MAXPOOL2D_BWD, maxpool_bwd_last_row,
                   "backward dropping the last output row's gradients"),
        ZOO_KERNEL("zoo_avgpool_exclude_pad", PEAT_OP_AVGPOOL2D, avgpool_exclude_pad,
                   "divides by the valid elements (count_include_pad=False)"),
        ZOO_KERNEL("zoo_avgpool_sum_bf16", PEAT_OP_AVGPOOL2D, avgpool_sum_bf16,
                   "window sums in bf16, declares fp32"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
