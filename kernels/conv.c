/* conv.c: im2col + blocked-GEMM candidates for conv2d forward, backward-data and backward-filter.
 */
#include "core/conv_geom.h"
#include "peat/backend.h"
#include "kernels/kcommon.h"
#include "kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

/* Y_n [O, OH*OW] = W [O, C*KH*KW] x col_n. */
static peat_status conv_im2col(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    peat_conv_geom g = peat_conv_geom_get(&a->p);
    const float *x = peat_f32(a->in[0]), *w = peat_f32(a->in[1]);
    float *y = peat_f32(a->out[0]), *col;
    PEAT_TRY(peat_conv_col_alloc(&g, self->name, &col));
    peat_status st = PEAT_OK;
    for (int64_t n = 0; n < g.N && st == PEAT_OK; n++) {
        peat_conv_im2col(&g, x + n * g.C * g.H * g.W, col);
        peat_kernels_view A = {w, g.ckk, 1}, B = {col, g.ohw, 1};
        st = peat_kernels_gemm_blocked(g.O, g.ohw, g.ckk, A, B, y + n * g.O * g.ohw, g.ohw, 0,
                                       &self->cfg);
    }
    free(col);
    return st;
}

/* dcol_n [C*KH*KW, OH*OW] = W^T x dY_n, then col2im into dX_n. */
static peat_status conv_im2col_bwd_data(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    peat_conv_geom g = peat_conv_geom_get(&a->p);
    const float *dy = peat_f32(a->in[0]), *w = peat_f32(a->in[1]);
    float *dx = peat_f32(a->out[0]), *col;
    PEAT_TRY(peat_conv_col_alloc(&g, self->name, &col));
    memset(dx, 0, (size_t)(g.N * g.C * g.H * g.W) * sizeof *dx);
    peat_status st = PEAT_OK;
    for (int64_t n = 0; n < g.N && st == PEAT_OK; n++) {
        peat_kernels_view A = {w, 1, g.ckk}, B = {dy + n * g.O * g.ohw, g.ohw, 1};
        st = peat_kernels_gemm_blocked(g.ckk, g.ohw, g.O, A, B, col, g.ohw, 0, &self->cfg);
        if (st == PEAT_OK) peat_conv_col2im(&g, col, dx + n * g.C * g.H * g.W);
    }
    free(col);
    return st;
}

/* dW [O, C*KH*KW] = sum_n dY_n x col_n^T: one blocked GEMM per image accumulated into dW. */
static peat_status conv_im2col_bwd_filter(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    peat_conv_geom g = peat_conv_geom_get(&a->p);
    const float *x = peat_f32(a->in[0]), *dy = peat_f32(a->in[1]);
    float *dw = peat_f32(a->out[0]), *col;
    PEAT_TRY(peat_conv_col_alloc(&g, self->name, &col));
    peat_status st = PEAT_OK;
    for (int64_t n = 0; n < g.N && st == PEAT_OK; n++) {
        peat_conv_im2col(&g, x + n * g.C * g.H * g.W, col);
        peat_kernels_view A = {dy + n * g.O * g.ohw, g.ohw, 1}, B = {col, 1, g.ohw};
        st = peat_kernels_gemm_blocked(g.O, g.ckk, g.ohw, A, B, dw, g.ckk, n > 0, &self->cfg);
    }
    free(col);
    return st;
}

static const peat_kernel conv_kernels[] = {
    {.name = "conv_im2col",
     .op = PEAT_OP_CONV2D,
     .role = PEAT_ROLE_CANDIDATE,
     .backend = PEAT_BACKEND_HOST,
     .in_dtype = PEAT_DTYPE_F32,
     .out_dtype = PEAT_DTYPE_F32,
     .acc_dtype = PEAT_DTYPE_F32,
     .cfg = {.tile_m = 32, .tile_n = 64, .tile_k = 64, .threads = 1, .vec_width = 1},
     .fn = conv_im2col,
     .desc = "conv2d as im2col + 32x64x64-blocked fp32 GEMM (per-slice partial sums)"},
    {.name = "conv_im2col_bwd_data",
     .op = PEAT_OP_CONV2D_BWD_DATA,
     .role = PEAT_ROLE_CANDIDATE,
     .backend = PEAT_BACKEND_HOST,
     .in_dtype = PEAT_DTYPE_F32,
     .out_dtype = PEAT_DTYPE_F32,
     .acc_dtype = PEAT_DTYPE_F32,
     .cfg = {.tile_m = 32, .tile_n = 64, .tile_k = 64, .threads = 1, .vec_width = 1},
     .fn = conv_im2col_bwd_data,
     .desc = "conv2d backward-data as blocked GEMM W^T dY + col2im scatter-add"},
    {.name = "conv_im2col_bwd_filter",
     .op = PEAT_OP_CONV2D_BWD_FILTER,
     .role = PEAT_ROLE_CANDIDATE,
     .backend = PEAT_BACKEND_HOST,
     .in_dtype = PEAT_DTYPE_F32,
     .out_dtype = PEAT_DTYPE_F32,
     .acc_dtype = PEAT_DTYPE_F32,
     .cfg = {.tile_m = 32, .tile_n = 64, .tile_k = 64, .threads = 1, .vec_width = 1},
     .fn = conv_im2col_bwd_filter,
     .desc = "conv2d backward-filter as im2col + blocked GEMM dY col^T, summed per image"},
};

peat_status peat_kernels_register_conv(void)
{
    return peat_kernels_add_all(conv_kernels, (int)(sizeof conv_kernels / sizeof conv_kernels[0]));
}
