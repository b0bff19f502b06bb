/* conv_blas.c: the golden fp32 conv2d, forward and both backward directions, as im2col (or
 * col2im) around the golden GEMM's library (OpenBLAS's sgemm, one thread; the plain loop when no
 * BLAS is built in), as cuDNN's and PyTorch's CPU convolutions are GEMM-shaped. The direct loops
 * stay registered as conv2d_plain and its backward twins (golden/nn.c). Layout NCHW, weights
 * OIHW, zero padding (core/conv_geom.h). */
#include "core/conv_geom.h"
#include "golden/golden.h"
#include "golden/refkit.h"

#include <stdlib.h>
#include <string.h>

/* y[n] (O x L) = W (O x K) col(x[n]) (K x L). */
peat_status peat_golden_conv2d_blas_run(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    peat_conv_geom d = peat_conv_geom_get(&a->p);
    const float *x = peat_f32(a->in[0]), *w = peat_f32(a->in[1]);
    float *y = peat_f32(a->out[0]), *col;
    PEAT_TRY(peat_conv_col_alloc(&d, self->name, &col));
    for (int64_t n = 0; n < d.N; n++) {
        peat_conv_im2col(&d, x + n * d.C * d.H * d.W, col);
        peat_golden_gemm_krange(0, 0, d.O, d.ohw, d.ckk, 0, d.ckk, 1.0f, w, col, 0.0f,
                                y + n * d.O * d.ohw);
    }
    free(col);
    return PEAT_OK;
}

/* dcol (K x L) = W^T dy[n] (O x L), then dx[n] = col2im(dcol). */
peat_status peat_golden_conv2d_bwd_data_blas_run(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    peat_conv_geom d = peat_conv_geom_get(&a->p);
    const float *dy = peat_f32(a->in[0]), *w = peat_f32(a->in[1]);
    float *dx = peat_f32(a->out[0]), *col;
    PEAT_TRY(peat_conv_col_alloc(&d, self->name, &col));
    memset(dx, 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof *dx);
    for (int64_t n = 0; n < d.N; n++) {
        peat_golden_gemm_krange(1, 0, d.ckk, d.ohw, d.O, 0, d.O, 1.0f, w, dy + n * d.O * d.ohw,
                                0.0f, col);
        peat_conv_col2im(&d, col, dx + n * d.C * d.H * d.W);
    }
    free(col);
    return PEAT_OK;
}

/* dW (O x K) = sum over images, in order, of dy[n] (O x L) col(x[n])^T (L x K). */
peat_status peat_golden_conv2d_bwd_filter_blas_run(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    peat_conv_geom d = peat_conv_geom_get(&a->p);
    const float *x = peat_f32(a->in[0]), *dy = peat_f32(a->in[1]);
    float *dw = peat_f32(a->out[0]), *col;
    PEAT_TRY(peat_conv_col_alloc(&d, self->name, &col));
    if (d.N < 1) memset(dw, 0, (size_t)(d.O * d.ckk) * sizeof *dw);
    for (int64_t n = 0; n < d.N; n++) {
        peat_conv_im2col(&d, x + n * d.C * d.H * d.W, col);
        peat_golden_gemm_krange(0, 1, d.O, d.ckk, d.ohw, 0, d.ohw, 1.0f, dy + n * d.O * d.ohw, col,
                                n ? 1.0f : 0.0f, dw);
    }
    free(col);
    return PEAT_OK;
}
