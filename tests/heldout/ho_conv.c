/* ho_conv.c: held-out convolutions (NCHW, zero padding): a forward accumulating with
 * round-toward-zero FMAs, a stride slip confined to the last output-channel block, a stuck bit in
 * one lane of the output vector, a backward-data with the taps flipped, a backward-filter that
 * accumulates each output row in bf16, a backward-filter adding its per-image partials in a racy
 * order; and an honest scatter-form backward-data. */
#include "heldout.h"

#include <stdlib.h>

typedef struct cd {
    int64_t N, C, H, W, O, KH, KW, s, p, OH, OW;
} cd;

static cd cd_of(const peat_args *a)
{
    const int64_t *i = a->p.i;
    cd d = {i[0], i[1], i[2], i[3], i[4], i[5], i[6], i[7], i[8], 0, 0};
    d.OH = (d.H + 2 * d.p - d.KH) / d.s + 1;
    d.OW = (d.W + 2 * d.p - d.KW) / d.s + 1;
    return d;
}

#define XI(n, c, h, w)   ((((n)*d.C + (c)) * d.H + (h)) * d.W + (w))
#define WI(o, c, kh, kw) ((((o)*d.C + (c)) * d.KH + (kh)) * d.KW + (kw))
#define YI(n, o, h, w)   ((((n)*d.O + (o)) * d.OH + (h)) * d.OW + (w))

/* ---- forward ---- */

/* TRUNCATION. The direct convolution's inner product uses fused multiply-adds that round toward
 * zero (__fmaf_rz for __fmaf_rn): every one of the C KH KW steps truncates, so the error grows with
 * the window and always points toward zero. */
static peat_status fwd_rz(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    cd d = cd_of(a);
    const float *x = a->in[0]->data, *w = a->in[1]->data;
    float *y = a->out[0]->data;
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t o = 0; o < d.O; o++)
            for (int64_t oh = 0; oh < d.OH; oh++)
                for (int64_t ow = 0; ow < d.OW; ow++) {
                    float acc = 0.0f;
                    for (int64_t c = 0; c < d.C; c++)
                        for (int64_t kh = 0; kh < d.KH; kh++) {
                            int64_t ih = oh * d.s - d.p + kh;
                            if (ih < 0 || ih >= d.H) continue;
                            for (int64_t kw = 0; kw < d.KW; kw++) {
                                int64_t iw = ow * d.s - d.p + kw;
                                if (iw < 0 || iw >= d.W) continue;
                                acc = ho_fma_rz(x[XI(n, c, ih, iw)], w[WI(o, c, kh, kw)], acc);
                            }
                        }
                    y[YI(n, o, oh, ow)] = acc;
                }
    return PEAT_OK;
}

/* The plain forward for output channel o, its filter read at wbase + (c KH + kh) KW + kw. */
static float fwd_px(const peat_args *a, const cd *dp, int64_t n, int64_t oh, int64_t ow,
                    int64_t wbase)
{
    cd d = *dp;
    const float *x = a->in[0]->data, *w = a->in[1]->data;
    float acc = 0.0f;
    for (int64_t c = 0; c < d.C; c++)
        for (int64_t kh = 0; kh < d.KH; kh++) {
            int64_t ih = oh * d.s - d.p + kh;
            if (ih < 0 || ih >= d.H) continue;
            for (int64_t kw = 0; kw < d.KW; kw++) {
                int64_t iw = ow * d.s - d.p + kw;
                if (iw < 0 || iw >= d.W) continue;
                acc += x[XI(n, c, ih, iw)] * w[wbase + (c * d.KH + kh) * d.KW + kw];
            }
        }
    return acc;
}

/* STRUCTURAL. Output channels go in blocks of 4. The last block is the remainder path (written for
 * O % 4 != 0), which steps its filter pointer by KH KW per channel instead of C KH KW: channel
 * o0 + t of that block reads the filter t KH KW floats past o0's, a slice of o0's own filter and
 * the next ones. Right when C == 1 (the two strides agree) and on every block but the last. */
static peat_status last_oc_block(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    cd d = cd_of(a);
    int64_t o_last = d.O > 0 ? (d.O - 1) / 4 * 4 : 0;
    float *y = a->out[0]->data;
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t o = 0; o < d.O; o++) {
            int64_t wb =
                o < o_last ? WI(o, 0, 0, 0) : WI(o_last, 0, 0, 0) + (o - o_last) * d.KH * d.KW;
            for (int64_t oh = 0; oh < d.OH; oh++)
                for (int64_t ow = 0; ow < d.OW; ow++)
                    y[YI(n, o, oh, ow)] = fwd_px(a, &d, n, oh, ow, wb);
        }
    return PEAT_OK;
}

/* STUCK_BIT. The output row is written through 4-wide vector stores; lane 3 of the store unit has
 * significand bit 19 stuck at 0: every output with ow % 4 == 3 loses that bit when it is set. */
static peat_status stuck_lane(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    cd d = cd_of(a);
    float *y = a->out[0]->data;
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t o = 0; o < d.O; o++)
            for (int64_t oh = 0; oh < d.OH; oh++)
                for (int64_t ow = 0; ow < d.OW; ow++) {
                    float v = fwd_px(a, &d, n, oh, ow, WI(o, 0, 0, 0));
                    y[YI(n, o, oh, ow)] = ow % 4 == 3 ? ho_force(v, 19, 0) : v;
                }
    return PEAT_OK;
}

/* ---- backward data: in dY, W ; out dX ---- */

/* dX[n, c, h, w] gathered from the outputs whose window covers (h, w); flip reads the filter
 * rotated by 180 degrees. */
static void bwd_data_gather(const peat_args *a, int flip)
{
    cd d = cd_of(a);
    const float *dy = a->in[0]->data, *w = a->in[1]->data;
    float *dx = a->out[0]->data;
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t c = 0; c < d.C; c++)
            for (int64_t h = 0; h < d.H; h++)
                for (int64_t x_ = 0; x_ < d.W; x_++) {
                    float acc = 0.0f;
                    for (int64_t o = 0; o < d.O; o++)
                        for (int64_t kh = 0; kh < d.KH; kh++) {
                            int64_t th = h + d.p - kh;
                            if (th < 0 || th % d.s || th / d.s >= d.OH) continue;
                            for (int64_t kw = 0; kw < d.KW; kw++) {
                                int64_t tw = x_ + d.p - kw;
                                if (tw < 0 || tw % d.s || tw / d.s >= d.OW) continue;
                                int64_t fh = flip ? d.KH - 1 - kh : kh;
                                int64_t fw = flip ? d.KW - 1 - kw : kw;
                                acc += dy[YI(n, o, th / d.s, tw / d.s)] * w[WI(o, c, fh, fw)];
                            }
                        }
                    dx[XI(n, c, h, x_)] = acc;
                }
}

/* WRONG_RESULT. The backward-data pass is written as "a convolution of dY with the flipped
 * filter", and then the gather indexes the filter flipped as well: correlation and convolution
 * mixed up, so every gradient pixel takes the 180-degree-rotated taps. */
static peat_status bwd_data_flip(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    bwd_data_gather(a, 1);
    return PEAT_OK;
}

/* Honest (PASS). The scatter (col2im) form: zero dX, then every dY element adds dy w into the
 * pixels its window covers, output by output; fp32, another order of the same terms. */
static peat_status bwd_data_scatter(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    cd d = cd_of(a);
    const float *dy = a->in[0]->data, *w = a->in[1]->data;
    float *dx = a->out[0]->data;
    memset(dx, 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof *dx);
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t o = 0; o < d.O; o++)
            for (int64_t oh = 0; oh < d.OH; oh++)
                for (int64_t ow = 0; ow < d.OW; ow++) {
                    float g = dy[YI(n, o, oh, ow)];
                    for (int64_t c = 0; c < d.C; c++)
                        for (int64_t kh = 0; kh < d.KH; kh++) {
                            int64_t ih = oh * d.s - d.p + kh;
                            if (ih < 0 || ih >= d.H) continue;
                            for (int64_t kw = 0; kw < d.KW; kw++) {
                                int64_t iw = ow * d.s - d.p + kw;
                                if (iw < 0 || iw >= d.W) continue;
                                dx[XI(n, c, ih, iw)] += g * w[WI(o, c, kh, kw)];
                            }
                        }
                }
    return PEAT_OK;
}

/* ---- backward filter: in X, dY ; out dW ---- */

/* The contribution of image n to dW[o, c, kh, kw], one output row oh at a time: each row's
 * sum over ow rounded by row_acc after every step, rows added in fp32. */
static float bwd_filter_img(const peat_args *a, const cd *dp, int64_t n, int64_t o, int64_t c,
                            int64_t kh, int64_t kw, float (*row_acc)(float))
{
    cd d = *dp;
    const float *x = a->in[0]->data, *dy = a->in[1]->data;
    float acc = 0.0f;
    for (int64_t oh = 0; oh < d.OH; oh++) {
        int64_t ih = oh * d.s - d.p + kh;
        if (ih < 0 || ih >= d.H) continue;
        float r = 0.0f;
        for (int64_t ow = 0; ow < d.OW; ow++) {
            int64_t iw = ow * d.s - d.p + kw;
            if (iw < 0 || iw >= d.W) continue;
            r = row_acc(r + x[XI(n, c, ih, iw)] * dy[YI(n, o, oh, ow)]);
        }
        acc += r;
    }
    return acc;
}

static float keep(float x)
{
    return x;
}

/* REDUCED_PRECISION. The inner reduction along each output row (OW terms) runs in a bf16
 * accumulator (a bf16 MMA with bf16 accumulate), the rows and images are then added in fp32: only
 * the innermost partial sums lose precision. */
static peat_status bwd_filter_bf16_rows(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    cd d = cd_of(a);
    float *dw = a->out[0]->data;
    for (int64_t o = 0; o < d.O; o++)
        for (int64_t c = 0; c < d.C; c++)
            for (int64_t kh = 0; kh < d.KH; kh++)
                for (int64_t kw = 0; kw < d.KW; kw++) {
                    float acc = 0.0f;
                    for (int64_t n = 0; n < d.N; n++)
                        acc += bwd_filter_img(a, &d, n, o, c, kh, kw, zoo_bf16);
                    dw[WI(o, c, kh, kw)] = acc;
                }
    return PEAT_OK;
}

/* NONDETERMINISTIC. One block per image computes its dW partial and adds it into dW with an
 * atomic add: the images' partials land in whatever order the blocks finish, drawn afresh on every
 * call (zoo_upset_draw), so the same call gives other low bits from run to run. */
static peat_status bwd_filter_race(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    cd d = cd_of(a);
    float *dw = a->out[0]->data;
    int64_t *order = malloc((size_t)(d.N > 0 ? d.N : 1) * sizeof *order);
    float *part = malloc((size_t)(d.N > 0 ? d.N : 1) * sizeof *part);
    if (!order || !part) {
        free(order), free(part);
        return PEAT_ERR_NOMEM;
    }
    ho_shuffle(order, d.N, zoo_upset_draw());
    for (int64_t o = 0; o < d.O; o++)
        for (int64_t c = 0; c < d.C; c++)
            for (int64_t kh = 0; kh < d.KH; kh++)
                for (int64_t kw = 0; kw < d.KW; kw++) {
                    for (int64_t n = 0; n < d.N; n++)
                        part[n] = bwd_filter_img(a, &d, n, o, c, kh, kw, keep);
                    float acc = 0.0f;
                    for (int64_t t = 0; t < d.N; t++) acc += part[order[t]];
                    dw[WI(o, c, kh, kw)] = acc;
                }
    free(order), free(part);
    return PEAT_OK;
}

int ho_register_conv(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("ho_conv_rz", PEAT_OP_CONV2D, fwd_rz,
                   "direct conv accumulating with round-toward-zero FMAs"),
        ZOO_KERNEL("ho_conv_last_oc_block", PEAT_OP_CONV2D, last_oc_block,
                   "last block of 4 output channels steps its filter by KH KW, not C KH KW"),
        ZOO_KERNEL("ho_conv_stuck_lane", PEAT_OP_CONV2D, stuck_lane,
                   "lane 3 of the 4-wide output store has significand bit 19 stuck at 0"),
        ZOO_KERNEL("ho_conv_bwd_data_flip", PEAT_OP_CONV2D_BWD_DATA, bwd_data_flip,
                   "backward-data reads the filter rotated by 180 degrees"),
        ZOO_KERNEL("ho_conv_bwd_data_scatter", PEAT_OP_CONV2D_BWD_DATA, bwd_data_scatter,
                   "honest: scatter (col2im) form of backward-data, fp32"),
        ZOO_KERNEL("ho_conv_bwd_filter_bf16_rows", PEAT_OP_CONV2D_BWD_FILTER, bwd_filter_bf16_rows,
                   "backward-filter row partials (OW terms) accumulated in bf16"),
        ZOO_KERNEL("ho_conv_bwd_filter_race", PEAT_OP_CONV2D_BWD_FILTER, bwd_filter_race,
                   "backward-filter per-image partials added in a per-call random order"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
