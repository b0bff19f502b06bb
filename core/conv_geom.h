/* conv_geom.h: the conv2d ops' geometry (params i = N C H W O KH KW stride pad; NCHW, weights
 * OIHW, zero padding) and the im2col / col2im data movement that the GEMM-shaped conv kernels
 * share: the golden's (golden/conv_blas.c) and the candidates' (kernels/conv.c). */
#ifndef PEAT_CORE_CONV_GEOM_H
#define PEAT_CORE_CONV_GEOM_H

#include "peat/peat.h"

typedef struct peat_conv_geom {
    int64_t N, C, H, W, O, KH, KW, S, P, OH, OW;
    int64_t ckk, ohw; /* the forward GEMM's inner size C KH KW and the pixels of an output map */
} peat_conv_geom;

peat_conv_geom peat_conv_geom_get(const peat_op_params *p);
/* Unfolds image x [C,H,W] into col [C*KH*KW, OH*OW] (zeros where the window hits padding). */
void peat_conv_im2col(const peat_conv_geom *g, const float *x, float *col);
/* Folds col [C*KH*KW, OH*OW] back into image dx [C,H,W] by scatter-add (the adjoint of im2col),
 * taps in (c, kh, kw, oh, ow) order; dx must be zeroed by the caller. */
void peat_conv_col2im(const peat_conv_geom *g, const float *col, float *dx);
/* A col buffer of C*KH*KW x OH*OW floats; `who` names the kernel in the out-of-memory error. */
peat_status peat_conv_col_alloc(const peat_conv_geom *g, const char *who, float **col);

#endif
