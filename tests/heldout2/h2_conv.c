/* h2_conv.c: conv2d backward-data and backward-filter kernels of the second held-out set (direct
 * loops, NCHW, zero padding). */
#include "heldout2.h"

enum { BD_PLAIN, BD_TF32, BD_FIRST_COL };

/* dX[n,c,h,w] = sum over o, kh, kw of dY[n,o,oh,ow] W[o,c,kh,kw], oh*s - p + kh = h (and the
 * same for w), with one defect chosen by mode. */
static peat_status bwd_data_mode(const peat_args *a, int mode)
{
    h2_conv d = h2_conv_of(a);
    const float *dy = a->in[0]->data, *wt = a->in[1]->data;
    float *dx = a->out[0]->data;
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t c = 0; c < d.C; c++)
            for (int64_t h = 0; h < d.H; h++)
                for (int64_t w = 0; w < d.W; w++) {
                    float acc = 0.0f;
                    for (int64_t o = 0; o < d.O; o++)
                        for (int64_t kh = 0; kh < d.KH; kh++) {
                            int64_t th = h + d.p - kh;
                            if (th < 0 || th % d.s || th / d.s >= d.OH) continue;
                            for (int64_t kw = 0; kw < d.KW; kw++) {
                                int64_t tw = w + d.p - kw;
                                if (tw < 0 || tw % d.s || tw / d.s >= d.OW) continue;
                                float g = dy[h2_y_at(&d, n, o, th / d.s, tw / d.s)];
                                float k = wt[h2_w_at(&d, o, c, kh, kw)];
                                if (mode == BD_TF32) g = zoo_tf32(g), k = zoo_tf32(k);
                                acc += g * k;
                            }
                        }
                    /* the first-column bug: the border column is never written back */
                    dx[h2_x_at(&d, n, c, h, w)] = mode == BD_FIRST_COL && w == 0 ? 0.0f : acc;
                }
    return PEAT_OK;
}

/* Backward-data on TF32 tensor cores: dY and W rounded to TF32, fp32 accumulation. */
static peat_status bwd_data_tf32(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return bwd_data_mode(a, BD_TF32);
}
/* Backward-data whose border handling skips column w = 0 of every dX plane (left zero); every
 * other element exact. */
static peat_status bwd_data_first_col(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return bwd_data_mode(a, BD_FIRST_COL);
}

enum { BF_PLAIN, BF_DAZ, BF_FLIP, BF_IMAGE_SPLIT };

/* dW[o,c,kh,kw] = sum over n, oh, ow of X[n,c,oh*s-p+kh,ow*s-p+kw] dY[n,o,oh,ow], with one
 * defect (or honest variant) chosen by mode. */
static peat_status bwd_filter_mode(const peat_args *a, int mode)
{
    h2_conv d = h2_conv_of(a);
    const float *x = a->in[0]->data, *dy = a->in[1]->data;
    float *dw = a->out[0]->data;
    for (int64_t o = 0; o < d.O; o++)
        for (int64_t c = 0; c < d.C; c++)
            for (int64_t kh = 0; kh < d.KH; kh++)
                for (int64_t kw = 0; kw < d.KW; kw++) {
                    float acc = 0.0f;
                    for (int64_t n = 0; n < d.N; n++) {
                        float part = 0.0f; /* this image's share (BF_IMAGE_SPLIT) */
                        for (int64_t oh = 0; oh < d.OH; oh++) {
                            int64_t h = oh * d.s - d.p + kh;
                            if (h < 0 || h >= d.H) continue;
                            for (int64_t ow = 0; ow < d.OW; ow++) {
                                int64_t w = ow * d.s - d.p + kw;
                                if (w < 0 || w >= d.W) continue;
                                float xv = x[h2_x_at(&d, n, c, h, w)];
                                float gv = dy[h2_y_at(&d, n, o, oh, ow)];
                                if (mode == BF_DAZ)
                                    acc = ho_ftz(acc + ho_ftz(ho_ftz(xv) * ho_ftz(gv)));
                                else if (mode == BF_IMAGE_SPLIT)
                                    part += xv * gv;
                                else
                                    acc += xv * gv;
                            }
                        }
                        if (mode == BF_IMAGE_SPLIT) acc += part;
                    }
                    dw[h2_w_at(&d, o, c, kh, kw)] = acc;
                }
    if (mode == BF_FLIP) {
        int64_t at;
        int bit;
        if (h2_upset(3, d.O * d.C * d.KH * d.KW, 20, 11, &at, &bit)) dw[at] = ho_flip(dw[at], bit);
    }
    return PEAT_OK;
}

/* Backward-filter built in FTZ/DAZ mode: subnormal operands, products and sums read and written
 * as zero. */
static peat_status bwd_filter_daz(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return bwd_filter_mode(a, BF_DAZ);
}
/* Backward-filter with a transient upset: one call in three, one weight gradient has one bit
 * (20..30) inverted. */
static peat_status bwd_filter_flip(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return bwd_filter_mode(a, BF_FLIP);
}
/* Honest: backward-filter with each image's contribution summed on its own, then the images'
 * partials added in order (a batch-split reduction). */
static peat_status bwd_filter_image_split(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return bwd_filter_mode(a, BF_IMAGE_SPLIT);
}

int h2_register_conv(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h2_conv_bwd_data_tf32", PEAT_OP_CONV2D_BWD_DATA, bwd_data_tf32,
                   "conv backward-data with dY and W rounded to TF32"),
        ZOO_KERNEL("h2_conv_bwd_data_first_col", PEAT_OP_CONV2D_BWD_DATA, bwd_data_first_col,
                   "conv backward-data leaving column w = 0 of dX unwritten (zero)"),
        ZOO_KERNEL("h2_conv_bwd_filter_daz", PEAT_OP_CONV2D_BWD_FILTER, bwd_filter_daz,
                   "conv backward-filter in FTZ/DAZ mode"),
        ZOO_KERNEL("h2_conv_bwd_filter_flip", PEAT_OP_CONV2D_BWD_FILTER, bwd_filter_flip,
                   "conv backward-filter with a transient one-bit upset on one call in three"),
        ZOO_KERNEL("h2_conv_bwd_filter_image_split", PEAT_OP_CONV2D_BWD_FILTER,
                   bwd_filter_image_split,
                   "conv backward-filter summed per image, then over images"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
