/* conv_geom.c: the conv2d geometry and the im2col / col2im data movement (conv_geom.h). */
#include "core/conv_geom.h"

#include <stdlib.h>

peat_conv_geom peat_conv_geom_get(const peat_op_params *p)
{
    peat_conv_geom g = {p->i[0], p->i[1], p->i[2], p->i[3], p->i[4], p->i[5], p->i[6],
                        p->i[7], p->i[8], 0,       0,       0,       0};
    g.OH = (g.H + 2 * g.P - g.KH) / g.S + 1;
    g.OW = (g.W + 2 * g.P - g.KW) / g.S + 1;
    g.ckk = g.C * g.KH * g.KW;
    g.ohw = g.OH * g.OW;
    return g;
}

void peat_conv_im2col(const peat_conv_geom *g, const float *x, float *col)
{
    for (int64_t c = 0; c < g->C; c++)
        for (int64_t kh = 0; kh < g->KH; kh++)
            for (int64_t kw = 0; kw < g->KW; kw++) {
                float *row = col + ((c * g->KH + kh) * g->KW + kw) * g->ohw;
                for (int64_t oh = 0; oh < g->OH; oh++) {
                    int64_t ih = oh * g->S - g->P + kh;
                    for (int64_t ow = 0; ow < g->OW; ow++) {
                        int64_t iw = ow * g->S - g->P + kw;
                        int in = ih >= 0 && ih < g->H && iw >= 0 && iw < g->W;
                        row[oh * g->OW + ow] = in ? x[(c * g->H + ih) * g->W + iw] : 0.0f;
                    }
                }
            }
}

void peat_conv_col2im(const peat_conv_geom *g, const float *col, float *dx)
{
    for (int64_t c = 0; c < g->C; c++)
        for (int64_t kh = 0; kh < g->KH; kh++)
            for (int64_t kw = 0; kw < g->KW; kw++) {
                const float *row = col + ((c * g->KH + kh) * g->KW + kw) * g->ohw;
                for (int64_t oh = 0; oh < g->OH; oh++) {
                    int64_t ih = oh * g->S - g->P + kh;
                    if (ih < 0 || ih >= g->H) continue;
                    for (int64_t ow = 0; ow < g->OW; ow++) {
                        int64_t iw = ow * g->S - g->P + kw;
                        if (iw >= 0 && iw < g->W)
                            dx[(c * g->H + ih) * g->W + iw] += row[oh * g->OW + ow];
                    }
                }
            }
}

peat_status peat_conv_col_alloc(const peat_conv_geom *g, const char *who, float **col)
{
    *col = malloc((size_t)(g->ckk * g->ohw) * sizeof **col);
    if (!*col)
        return PEAT_ERROR(PEAT_ERR_NOMEM, "%s: im2col buffer of %lld floats", who,
                          (long long)(g->ckk * g->ohw));
    return PEAT_OK;
}
