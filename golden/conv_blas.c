/* conv_blas.c: the golden fp32 conv2d, forward and both backward directions, as im2col (or
 * col2im) around the golden GEMM's library (OpenBLAS's sgemm, one thread; the plain loop when no
 * BLAS is built in), as cuDNN's and PyTorch's CPU convolutions are GEMM-shaped. The direct loops
 * stay registered as conv2d_plain and its backward twins (golden/nn.c). Layout NCHW, weights
 * OIHW, zero padding; params i = N, C, H, W, O, KH, KW, stride, pad. */
#include "golden/golden.h"
#include "golden/refkit.h"

#include <stdlib.h>
#include <string.h>

typedef struct cdims {
    int64_t N, C, H, W, O, KH, KW, s, p, OH, OW;
    int64_t K, L; /* the GEMM's inner size C KH KW and the output plane OH OW */
} cdims;

static cdims cdims_of(const peat_op_params *p)
{
    cdims d = {.N = p->i[0],
               .C = p->i[1],
               .H = p->i[2],
               .W = p->i[3],
               .O = p->i[4],
               .KH = p->i[5],
               .KW = p->i[6],
               .s = p->i[7],
               .p = p->i[8]};
    d.OH = (d.H + 2 * d.p - d.KH) / d.s + 1;
    d.OW = (d.W + 2 * d.p - d.KW) / d.s + 1;
    d.K = d.C * d.KH * d.KW, d.L = d.OH * d.OW;
    return d;
}

/* col[(c KH + kh) KW + kw][oh OW + ow] = x[c][oh s - p + kh][ow s - p + kw] (0 outside). */
static void im2col(const cdims *d, const float *x, float *col)
{
    for (int64_t c = 0; c < d->C; c++)
        for (int64_t kh = 0; kh < d->KH; kh++)
            for (int64_t kw = 0; kw < d->KW; kw++) {
                float *row = col + ((c * d->KH + kh) * d->KW + kw) * d->L;
                for (int64_t oh = 0; oh < d->OH; oh++) {
                    int64_t h = oh * d->s - d->p + kh;
                    for (int64_t ow = 0; ow < d->OW; ow++) {
                        int64_t w = ow * d->s - d->p + kw;
                        int in = h >= 0 && h < d->H && w >= 0 && w < d->W;
                        row[oh * d->OW + ow] = in ? x[(c * d->H + h) * d->W + w] : 0.0f;
                    }
                }
            }
}

/* The transpose: dx[c][h][w] += col[...][oh OW + ow] for every tap inside the image, taps in the
 * order (c, kh, kw, oh, ow); dx zeroed first. */
static void col2im(const cdims *d, const float *col, float *dx)
{
    memset(dx, 0, (size_t)(d->C * d->H * d->W) * sizeof *dx);
    for (int64_t c = 0; c < d->C; c++)
        for (int64_t kh = 0; kh < d->KH; kh++)
            for (int64_t kw = 0; kw < d->KW; kw++) {
                const float *row = col + ((c * d->KH + kh) * d->KW + kw) * d->L;
                for (int64_t oh = 0; oh < d->OH; oh++) {
                    int64_t h = oh * d->s - d->p + kh;
                    if (h < 0 || h >= d->H) continue;
                    for (int64_t ow = 0; ow < d->OW; ow++) {
                        int64_t w = ow * d->s - d->p + kw;
                        if (w >= 0 && w < d->W)
                            dx[(c * d->H + h) * d->W + w] += row[oh * d->OW + ow];
                    }
                }
            }
}

static peat_status col_alloc(const cdims *d, float **col, const char *what)
{
    *col = malloc((size_t)(d->K * d->L + 1) * sizeof **col);
    return *col ? PEAT_OK
                : PEAT_ERROR(PEAT_ERR_NOMEM, "%s: im2col buffer of %lld x %lld", what,
                             (long long)d->K, (long long)d->L);
}

/* y[n] (O x L) = W (O x K) col(x[n]) (K x L). */
peat_status peat_golden_conv2d_blas_run(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    cdims d = cdims_of(&a->p);
    const float *x = peat_f32(a->in[0]), *w = peat_f32(a->in[1]);
    float *y = peat_f32(a->out[0]), *col;
    PEAT_TRY(col_alloc(&d, &col, "conv2d_golden"));
    for (int64_t n = 0; n < d.N; n++) {
        im2col(&d, x + n * d.C * d.H * d.W, col);
        peat_golden_gemm_krange(0, 0, d.O, d.L, d.K, 0, d.K, 1.0f, w, col, 0.0f, y + n * d.O * d.L);
    }
    free(col);
    return PEAT_OK;
}

/* dcol (K x L) = W^T dy[n] (O x L), then dx[n] = col2im(dcol). */
peat_status peat_golden_conv2d_bwd_data_blas_run(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    cdims d = cdims_of(&a->p);
    const float *dy = peat_f32(a->in[0]), *w = peat_f32(a->in[1]);
    float *dx = peat_f32(a->out[0]), *col;
    PEAT_TRY(col_alloc(&d, &col, "conv2d_bwd_data_golden"));
    for (int64_t n = 0; n < d.N; n++) {
        peat_golden_gemm_krange(1, 0, d.K, d.L, d.O, 0, d.O, 1.0f, w, dy + n * d.O * d.L, 0.0f,
                                col);
        col2im(&d, col, dx + n * d.C * d.H * d.W);
    }
    free(col);
    return PEAT_OK;
}

/* dW (O x K) = sum over images, in order, of dy[n] (O x L) col(x[n])^T (L x K). */
peat_status peat_golden_conv2d_bwd_filter_blas_run(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    cdims d = cdims_of(&a->p);
    const float *x = peat_f32(a->in[0]), *dy = peat_f32(a->in[1]);
    float *dw = peat_f32(a->out[0]), *col;
    PEAT_TRY(col_alloc(&d, &col, "conv2d_bwd_filter_golden"));
    if (d.N < 1) memset(dw, 0, (size_t)(d.O * d.K) * sizeof *dw);
    for (int64_t n = 0; n < d.N; n++) {
        im2col(&d, x + n * d.C * d.H * d.W, col);
        peat_golden_gemm_krange(0, 1, d.O, d.K, d.L, 0, d.L, 1.0f, dy + n * d.O * d.L, col,
                                n ? 1.0f : 0.0f, dw);
    }
    free(col);
    return PEAT_OK;
}
