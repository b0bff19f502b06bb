/* pool.c: pooling candidates: max pooling with the window scanned column-major (ties still
 * resolved to the row-major first maximum, as the op says), its backward gathering per input
 * instead of scattering per output; average pooling as a product by 1 / K^2, its backward
 * likewise. */
#include "kernels/kcommon.h"
#include "kernels/kernels.h"
#include "peat/backend.h"

#include <string.h>

typedef struct pd {
    int64_t NC, H, W, K, st, pad, OH, OW;
} pd;

static pd pd_of(const peat_op_params *p)
{
    pd d = {p->i[0] * p->i[1], p->i[2], p->i[3], p->i[4], p->i[5], p->i[6], 0, 0};
    d.OH = (d.H + 2 * d.pad - d.K) / d.st + 1, d.OW = (d.W + 2 * d.pad - d.K) / d.st + 1;
    return d;
}

/* the window's first maximum in row-major order, scanning column-major: a later element wins
 * only if larger, an earlier one (in row-major order) also if equal */
static int64_t argmax_cols(const pd *d, const float *x, int64_t nc, int64_t oh, int64_t ow)
{
    int64_t best = -1, bkh = 0, bkw = 0;
    for (int64_t kw = 0; kw < d->K; kw++)
        for (int64_t kh = 0; kh < d->K; kh++) {
            int64_t ih = oh * d->st - d->pad + kh, iw = ow * d->st - d->pad + kw;
            if (ih < 0 || ih >= d->H || iw < 0 || iw >= d->W) continue;
            int64_t i = (nc * d->H + ih) * d->W + iw;
            int earlier = kh < bkh || (kh == bkh && kw < bkw);
            if (best < 0 || x[i] > x[best] || (x[i] == x[best] && earlier))
                best = i, bkh = kh, bkw = kw;
        }
    return best;
}

static peat_status maxpool_cols(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    pd d = pd_of(&a->p);
    const float *x = peat_f32(a->in[0]);
    float *y = peat_f32(a->out[0]);
    for (int64_t nc = 0; nc < d.NC; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++)
                y[(nc * d.OH + oh) * d.OW + ow] = x[argmax_cols(&d, x, nc, oh, ow)];
    return PEAT_OK;
}

/* dX[i] = sum of dY over the windows whose maximum is i, windows visited per input */
static peat_status maxpool_gather_bwd(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    pd d = pd_of(&a->p);
    const float *x = peat_f32(a->in[0]), *dy = peat_f32(a->in[1]);
    float *dx = peat_f32(a->out[0]);
    for (int64_t nc = 0; nc < d.NC; nc++)
        for (int64_t ih = 0; ih < d.H; ih++)
            for (int64_t iw = 0; iw < d.W; iw++) {
                int64_t i = (nc * d.H + ih) * d.W + iw;
                float acc = 0.0f;
                for (int64_t oh = 0; oh < d.OH; oh++) {
                    int64_t kh = ih + d.pad - oh * d.st;
                    if (kh < 0 || kh >= d.K) continue;
                    for (int64_t ow = 0; ow < d.OW; ow++) {
                        int64_t kw = iw + d.pad - ow * d.st;
                        if (kw < 0 || kw >= d.K) continue;
                        if (argmax_cols(&d, x, nc, oh, ow) == i)
                            acc += dy[(nc * d.OH + oh) * d.OW + ow];
                    }
                }
                dx[i] = acc;
            }
    return PEAT_OK;
}

static peat_status avgpool_recip(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    pd d = pd_of(&a->p);
    const float *x = peat_f32(a->in[0]);
    float *y = peat_f32(a->out[0]), inv = 1.0f / (float)(d.K * d.K);
    for (int64_t nc = 0; nc < d.NC; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                float s = 0.0f;
                for (int64_t kw = 0; kw < d.K; kw++)
                    for (int64_t kh = 0; kh < d.K; kh++) {
                        int64_t ih = oh * d.st - d.pad + kh, iw = ow * d.st - d.pad + kw;
                        if (ih >= 0 && ih < d.H && iw >= 0 && iw < d.W)
                            s += x[(nc * d.H + ih) * d.W + iw];
                    }
                y[(nc * d.OH + oh) * d.OW + ow] = s * inv;
            }
    return PEAT_OK;
}

static peat_status avgpool_recip_bwd(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    pd d = pd_of(&a->p);
    const float *dy = peat_f32(a->in[0]);
    float *dx = peat_f32(a->out[0]), inv = 1.0f / (float)(d.K * d.K);
    for (int64_t nc = 0; nc < d.NC; nc++)
        for (int64_t ih = 0; ih < d.H; ih++)
            for (int64_t iw = 0; iw < d.W; iw++) {
                float acc = 0.0f;
                for (int64_t oh = 0; oh < d.OH; oh++) {
                    int64_t kh = ih + d.pad - oh * d.st;
                    if (kh < 0 || kh >= d.K) continue;
                    for (int64_t ow = 0; ow < d.OW; ow++) {
                        int64_t kw = iw + d.pad - ow * d.st;
                        if (kw >= 0 && kw < d.K) acc += dy[(nc * d.OH + oh) * d.OW + ow];
                    }
                }
                dx[(nc * d.H + ih) * d.W + iw] = acc * inv;
            }
    return PEAT_OK;
}

static const peat_kernel pool_kernels[] = {
    PEAT_KERNELS_F32("maxpool2d_cols", PEAT_OP_MAXPOOL2D, maxpool_cols,
                     "max pooling, windows scanned column-major, first maximum in row-major order"),
    PEAT_KERNELS_F32("maxpool2d_gather_bwd", PEAT_OP_MAXPOOL2D_BWD, maxpool_gather_bwd,
                     "max pooling backward gathered per input"),
    PEAT_KERNELS_F32("avgpool2d_recip", PEAT_OP_AVGPOOL2D, avgpool_recip,
                     "average pooling as the window sum times 1 / K^2, fp32"),
    PEAT_KERNELS_F32("avgpool2d_recip_bwd", PEAT_OP_AVGPOOL2D_BWD, avgpool_recip_bwd,
                     "average pooling backward gathered per input, times 1 / K^2"),
};

peat_status peat_kernels_register_pool(void)
{
    return peat_kernels_add_all(pool_kernels, (int)(sizeof pool_kernels / sizeof pool_kernels[0]));
}
