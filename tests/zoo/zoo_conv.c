/* zoo_conv.c: conv2d kernels of the zoo (direct NCHW): two defects inside the loops, one honest
 * reorder. */
#include "zoo.h"

typedef struct cdims {
    int64_t N, C, H, W, O, KH, KW, s, p, OH, OW;
} cdims;

static cdims cdims_of(const peat_args *a)
{
    const int64_t *i = a->p.i;
    cdims d = {i[0], i[1], i[2], i[3], i[4], i[5], i[6], i[7], i[8], 0, 0};
    d.OH = (d.H + 2 * d.p - d.KH) / d.s + 1;
    d.OW = (d.W + 2 * d.p - d.KW) / d.s + 1;
    return d;
}

typedef float (*rnd_fn)(float);
static float keep(float x)
{
    return x;
}

/* Direct conv; right_pad_bug: the right padding is not checked, so the last output column reads
 * the next row's first pixels instead of zeros; rev: channels summed last to first. */
static void conv(const peat_args *a, rnd_fn acc_round, int right_pad_bug, int rev)
{
    cdims d = cdims_of(a);
    const float *x = a->in[0]->data, *w = a->in[1]->data;
    float *y = a->out[0]->data;
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t o = 0; o < d.O; o++)
            for (int64_t oh = 0; oh < d.OH; oh++)
                for (int64_t ow = 0; ow < d.OW; ow++) {
                    float acc = 0.0f;
                    for (int64_t cc = 0; cc < d.C; cc++) {
                        int64_t c = rev ? d.C - 1 - cc : cc;
                        for (int64_t kh = 0; kh < d.KH; kh++) {
                            int64_t ih = oh * d.s - d.p + kh;
                            if (ih < 0 || ih >= d.H) continue;
                            for (int64_t kw = 0; kw < d.KW; kw++) {
                                int64_t iw = ow * d.s - d.p + kw;
                                if (iw < 0 || (!right_pad_bug && iw >= d.W)) continue;
                                /* with the bug, iw == W reads element 0 of the next row */
                                int64_t idx = ((n * d.C + c) * d.H + ih) * d.W + iw;
                                int64_t lim = d.N * d.C * d.H * d.W;
                                float xv = idx < lim ? x[idx] : 0.0f;
                                acc = acc_round(acc +
                                                xv * w[((o * d.C + c) * d.KH + kh) * d.KW + kw]);
                            }
                        }
                    }
                    y[((n * d.O + o) * d.OH + oh) * d.OW + ow] = acc;
                }
}

static peat_status right_pad(const peat_args *a, const peat_kernel *self)
{
    conv(a, keep, 1, 0);
    return PEAT_OK;
}
static peat_status acc_fp16(const peat_args *a, const peat_kernel *self)
{
    conv(a, zoo_f16, 0, 0);
    return PEAT_OK;
}
static peat_status reverse_c(const peat_args *a, const peat_kernel *self)
{
    conv(a, keep, 0, 1);
    return PEAT_OK;
}

/* Stride bug: the input row is indexed with stride 1 (oh - p + kh) whatever the stride is. */
static peat_status stride1(const peat_args *a, const peat_kernel *self)
{
    peat_args c = *a;
    cdims d = cdims_of(a);
    if (d.s == 1) {
        conv(a, keep, 0, 0);
        return PEAT_OK;
    }
    const float *x = a->in[0]->data, *w = a->in[1]->data;
    float *y = a->out[0]->data;
    (void)c;
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t o = 0; o < d.O; o++)
            for (int64_t oh = 0; oh < d.OH; oh++)
                for (int64_t ow = 0; ow < d.OW; ow++) {
                    float acc = 0.0f;
                    for (int64_t ch = 0; ch < d.C; ch++)
                        for (int64_t kh = 0; kh < d.KH; kh++) {
                            int64_t ih = oh - d.p + kh;
                            if (ih < 0 || ih >= d.H) continue;
                            for (int64_t kw = 0; kw < d.KW; kw++) {
                                int64_t iw = ow * d.s - d.p + kw;
                                if (iw < 0 || iw >= d.W) continue;
                                acc += x[((n * d.C + ch) * d.H + ih) * d.W + iw] *
                                       w[((o * d.C + ch) * d.KH + kh) * d.KW + kw];
                            }
                        }
                    y[((n * d.O + o) * d.OH + oh) * d.OW + ow] = acc;
                }
    return PEAT_OK;
}

int zoo_register_conv(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("zoo_conv_right_pad", PEAT_OP_CONV2D, right_pad,
                   "right padding unchecked: last column reads the next row"),
        ZOO_KERNEL("zoo_conv_acc_fp16", PEAT_OP_CONV2D, acc_fp16,
                   "accumulates in fp16, declares fp32"),
        ZOO_KERNEL("zoo_conv_stride_rows", PEAT_OP_CONV2D, stride1,
                   "input rows indexed with stride 1 on strided convs"),
        ZOO_KERNEL("zoo_conv_reverse", PEAT_OP_CONV2D, reverse_c,
                   "honest: channels summed last to first"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
