/* conv.c: the 2-D convolution (NCHW, square stride, symmetric zero padding) and its two
 * backward directions, data (dX) and filter (dW). */
#include "core/opdesc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define P(k) (a->p.i[k])

/* ---- conv2d family: i = N C H W O KH KW stride pad ---- */
static int64_t conv_oh(const peat_op_params *p)
{
    return (p->i[2] + 2 * p->i[8] - p->i[5]) / p->i[7] + 1;
}

static int64_t conv_ow(const peat_op_params *p)
{
    return (p->i[3] + 2 * p->i[8] - p->i[6]) / p->i[7] + 1;
}

static peat_status conv_common(const peat_args *a)
{
    PEAT_TRY(peat_op_positive(a, 8));
    if (P(8) < 0 || P(8) >= P(5) || P(8) >= P(6))
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: pad %lld must be in [0, kernel size)",
                          peat_op_name(a->op), (long long)P(8));
    if (P(2) + 2 * P(8) < P(5) || P(3) + 2 * P(8) < P(6))
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: kernel larger than padded image",
                          peat_op_name(a->op));
    if ((double)P(0) * P(1) * P(2) * P(3) > 4e9 || (double)P(4) * P(1) * P(5) * P(6) > 4e9)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: absurd shape", peat_op_name(a->op));
    return PEAT_OK;
}

static peat_status conv_check(const peat_args *a)
{
    PEAT_TRY(conv_common(a));
    const peat_op_params *p = &a->p;
    int64_t nx = P(0) * P(1) * P(2) * P(3), nw = P(4) * P(1) * P(5) * P(6);
    int64_t ny = P(0) * P(4) * conv_oh(p) * conv_ow(p);
    switch (a->op) {
    case PEAT_OP_CONV2D:
        PEAT_TRY(peat_op_expect(a, a->in[0], "X", PEAT_DTYPE_F32, nx));
        PEAT_TRY(peat_op_expect(a, a->in[1], "W", PEAT_DTYPE_F32, nw));
        return peat_op_expect(a, peat_op_out(a, 0), "Y", PEAT_DTYPE_F32, ny);
    case PEAT_OP_CONV2D_BWD_DATA:
        PEAT_TRY(peat_op_expect(a, a->in[0], "dY", PEAT_DTYPE_F32, ny));
        PEAT_TRY(peat_op_expect(a, a->in[1], "W", PEAT_DTYPE_F32, nw));
        return peat_op_expect(a, peat_op_out(a, 0), "dX", PEAT_DTYPE_F32, nx);
    default:
        PEAT_TRY(peat_op_expect(a, a->in[0], "X", PEAT_DTYPE_F32, nx));
        PEAT_TRY(peat_op_expect(a, a->in[1], "dY", PEAT_DTYPE_F32, ny));
        return peat_op_expect(a, peat_op_out(a, 0), "dW", PEAT_DTYPE_F32, nw);
    }
}

static peat_status conv_out_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    if (a->op == PEAT_OP_CONV2D)
        peat_op_out_shape(nd, s, 0, 4, P(0), P(4), conv_oh(&a->p), conv_ow(&a->p));
    else if (a->op == PEAT_OP_CONV2D_BWD_DATA)
        peat_op_out_shape(nd, s, 0, 4, P(0), P(1), P(2), P(3));
    else
        peat_op_out_shape(nd, s, 0, 4, P(4), P(1), P(5), P(6));
    return PEAT_OK;
}

static int64_t conv_depth(const peat_op_params *p)
{
    return p->i[1] * p->i[5] * p->i[6];
}

static int64_t conv_bwd_data_depth(const peat_op_params *p)
{
    int64_t s = p->i[7] > 0 ? p->i[7] : 1;
    return p->i[4] * ((p->i[5] + s - 1) / s) * ((p->i[6] + s - 1) / s);
}

static int64_t conv_bwd_filter_depth(const peat_op_params *p)
{
    return p->i[0] * conv_oh(p) * conv_ow(p);
}

static double conv_flops(const peat_op_params *p)
{
    return 2.0 * p->i[0] * p->i[4] * conv_oh(p) * conv_ow(p) * p->i[1] * p->i[5] * p->i[6];
}

/* Winograd F(2x2, 3x3) (cuDNN's and most libraries' algorithm for 3x3 stride-1 convolutions):
 * Y = A^T [sum_c (G g_c G^T) . (B^T d_c B)] A over 2x2 output tiles from output (0, 0). Each
 * operation rounds once, so the error is within gamma_k of the same bilinear form on absolute
 * values, |A^T| [sum_c (|G| |g_c| |G^T|) . (|B^T| |d_c| |B|)] |A|, with k the roundings on one
 * path: the filter's transform (two levels of 3-term sums, 4), the input's (2), the product (1),
 * the channel sum (C) and the output's transform (two levels of 3-term sums, 4): C + 11. The
 * transformed values can exceed the direct terms (|B^T d B| adds 4 inputs), which the direct
 * sum of |x| |w| over the window does not cover (docs/bounds.md). */
static const double W_BT[4][4] = {{1, 0, 1, 0}, {0, 1, 1, 0}, {0, 1, 1, 0}, {0, 1, 0, 1}};
static const double W_G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, 0.5, 0.5}, {0, 0, 1}};
static const double W_AT[2][4] = {{1, 1, 1, 0}, {0, 1, 1, 1}};

/* The Winograd form on absolute values of a 3x3 stride-1 convolution of x (N, Ci, H, W) with
 * pad, into out (N, Co, OH, OW), OH = H + 2 pad - 2, where it exceeds what out holds, scaled to
 * the direct depth 9 Ci the bound applies: the forward reads W (O, C, 3, 3) as it is (Co = O,
 * Ci = C); the backward data, a convolution of dY with pad 2 - pad, reads it flipped (Co = C,
 * Ci = O). */
static peat_status wino_mag(const double *x, const double *w, int flip, int64_t N, int64_t Ci,
                            int64_t Co, int64_t H, int64_t W, int64_t pad, double *out)
{
    int64_t OH = H + 2 * pad - 2, OW = W + 2 * pad - 2;
    double *U = malloc((size_t)(Co * Ci * 16 + Ci * 16) * sizeof *U);
    if (!U) return PEAT_ERROR(PEAT_ERR_NOMEM, "winograd magnitude");
    double *V = U + Co * Ci * 16;
    for (int64_t co = 0; co < Co; co++)
        for (int64_t ci = 0; ci < Ci; ci++) {
            double g[3][3], t[4][3];
            for (int r = 0; r < 3; r++)
                for (int c = 0; c < 3; c++)
                    g[r][c] = fabs(flip ? w[((ci * Co + co) * 3 + 2 - r) * 3 + 2 - c]
                                        : w[((co * Ci + ci) * 3 + r) * 3 + c]);
            for (int p = 0; p < 4; p++)
                for (int c = 0; c < 3; c++)
                    t[p][c] = W_G[p][0] * g[0][c] + W_G[p][1] * g[1][c] + W_G[p][2] * g[2][c];
            for (int p = 0; p < 4; p++)
                for (int q = 0; q < 4; q++)
                    U[(co * Ci + ci) * 16 + p * 4 + q] =
                        t[p][0] * W_G[q][0] + t[p][1] * W_G[q][1] + t[p][2] * W_G[q][2];
        }
    double gk = peat_op_gamma(Ci + 11) / peat_op_gamma(9 * Ci);
    for (int64_t n = 0; n < N; n++)
        for (int64_t th = 0; th < OH; th += 2)
            for (int64_t tw = 0; tw < OW; tw += 2) {
                for (int64_t ci = 0; ci < Ci; ci++) {
                    double d[4][4], t[4][4];
                    for (int u = 0; u < 4; u++)
                        for (int v = 0; v < 4; v++) {
                            int64_t ih = th - pad + u, iw = tw - pad + v;
                            d[u][v] = ih < 0 || ih >= H || iw < 0 || iw >= W
                                          ? 0.0
                                          : fabs(x[((n * Ci + ci) * H + ih) * W + iw]);
                        }
                    for (int p = 0; p < 4; p++)
                        for (int v = 0; v < 4; v++)
                            t[p][v] = W_BT[p][0] * d[0][v] + W_BT[p][1] * d[1][v] +
                                      W_BT[p][2] * d[2][v] + W_BT[p][3] * d[3][v];
                    for (int p = 0; p < 4; p++)
                        for (int q = 0; q < 4; q++)
                            V[ci * 16 + p * 4 + q] = t[p][0] * W_BT[q][0] + t[p][1] * W_BT[q][1] +
                                                     t[p][2] * W_BT[q][2] + t[p][3] * W_BT[q][3];
                }
                for (int64_t co = 0; co < Co; co++) {
                    double m[16] = {0};
                    for (int64_t ci = 0; ci < Ci; ci++)
                        for (int e = 0; e < 16; e++)
                            m[e] += U[(co * Ci + ci) * 16 + e] * V[ci * 16 + e];
                    for (int i = 0; i < 2 && th + i < OH; i++)
                        for (int j = 0; j < 2 && tw + j < OW; j++) {
                            double y = 0.0;
                            for (int p = 0; p < 4; p++)
                                for (int q = 0; q < 4; q++)
                                    y += W_AT[i][p] * m[p * 4 + q] * W_AT[j][q];
                            double *o = &out[((n * Co + co) * OH + th + i) * OW + tw + j];
                            *o = fmax(*o, gk * y);
                        }
                }
            }
    free(U);
    return PEAT_OK;
}

/* a plain sum of products: the exact kernel on |inputs|; for a 3x3 stride-1 forward or
 * backward-data convolution, also the Winograd form's (the larger of the two) */
static peat_status conv_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                            const peat_tensor *exact_out, double *mag)
{
    (void)o, (void)exact_out;
    PEAT_TRY(peat_op_mag_abs(a, in, n, mag));
    if (P(5) != 3 || P(6) != 3 || P(7) != 1 || a->op == PEAT_OP_CONV2D_BWD_FILTER) return PEAT_OK;
    if (a->op == PEAT_OP_CONV2D)
        return wino_mag(in->x[0], in->x[1], 0, P(0), P(1), P(4), P(2), P(3), P(8), mag);
    return wino_mag(in->x[0], in->x[1], 1, P(0), P(4), P(1), conv_oh(&a->p), conv_ow(&a->p),
                    2 - P(8), mag);
}

/* conv: strides 1-3, pads, odd sizes, 1x1, a kernel as large as the (padded) input, batch 1.
 * Batches above 1 grow until the output holds 256 elements, enough for the statistical rules. */
static peat_status conv_shapes(peat_probe_sink *s, const peat_record *rec, peat_rng_t *r)
{
    static const int64_t cf[][7] = {/* N H W KH KW stride pad */
                                    {1, 7, 9, 3, 3, 1, 1},   {2, 9, 7, 3, 3, 2, 1},
                                    {2, 11, 13, 5, 5, 3, 2}, {2, 8, 8, 1, 1, 1, 0},
                                    {1, 5, 5, 5, 5, 1, 0},   {2, 6, 5, 2, 3, 2, 1},
                                    {2, 4, 4, 3, 3, 3, 2}};
    int64_t C = rec->p.i[1], O = rec->p.i[4];
    char label[96];
    for (size_t i = 0; i < sizeof cf / sizeof cf[0]; i++) {
        peat_op_params q = rec->p;
        int64_t N = cf[i][0], H = cf[i][1], W = cf[i][2], KH = cf[i][3], KW = cf[i][4];
        int64_t st = cf[i][5], pd = cf[i][6];
        int64_t OH = (H + 2 * pd - KH) / st + 1, OW = (W + 2 * pd - KW) / st + 1;
        while (N > 1 && N < 64 && N * O * OH * OW < 256) N *= 2;
        q.i[0] = N, q.i[2] = H, q.i[3] = W, q.i[5] = KH, q.i[6] = KW, q.i[7] = st, q.i[8] = pd;
        int64_t nx = N * C * H * W, nw = O * C * KH * KW, ny = N * O * OH * OW;
        int64_t sz[2] = {nx, nw};
        if (rec->op == PEAT_OP_CONV2D_BWD_DATA) sz[0] = ny;
        if (rec->op == PEAT_OP_CONV2D_BWD_FILTER) sz[1] = ny;
        snprintf(label, sizeof label, "shape N%lld %lldx%lld k%lldx%lld stride %lld pad %lld",
                 (long long)N, (long long)H, (long long)W, (long long)KH, (long long)KW,
                 (long long)st, (long long)pd);
        PEAT_TRY(peat_op_probe_fresh(s, rec, r, &q, sz, 2, label));
    }
    return PEAT_OK;
}

static peat_status conv_probes_run(peat_probe_sink *s, const peat_record *rec, uint64_t seed)
{
    peat_rng_t *r = peat_rng_new(seed ^ 0x6f70732070726fbull);
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe rng");
    peat_status st = conv_shapes(s, rec, r);
    peat_rng_free(r);
    return st;
}

/* subnormal and large inputs, then the shapes */
static peat_status conv_fwd_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    const peat_record *rec = recs->items[0];
    PEAT_TRY(peat_op_probe_from_record(s, rec, PEAT_PROBE_TAG_SUBNORMAL,
                                       "value subnormal inputs (x 2^-133)", 0, 0x1p-133, 0.0, -1));
    PEAT_TRY(peat_op_probe_from_record(s, rec, PEAT_PROBE_TAG_OVERFLOW,
                                       "value large inputs (X, W x64)", 0, 64.0, 0.0, 1));
    return conv_probes_run(s, rec, seed);
}
static peat_status conv_bwd_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    return conv_probes_run(s, recs->items[0], seed);
}

/* images (X or dY), and the channels the output has: the filter's output channels for the
 * forward (Y's), its input channels for backward-data (dX's) */
static int conv_perm(const peat_args *a, peat_op_perm *out)
{
    int64_t N = P(0), C = P(1), H = P(2), W = P(3), O = P(4), KK = P(5) * P(6);
    int64_t OH = conv_oh(&a->p), OW = conv_ow(&a->p);
    int fwd = a->op == PEAT_OP_CONV2D;
    out->len[0] = N, out->len[1] = fwd ? O : C;
    out->in_mask = 0x3u;
    out->in[0] =
        fwd ? peat_op_view(N, 1, C * H * W, 0, -1, -1) : peat_op_view(N, 1, O * OH * OW, 0, -1, -1);
    out->in[1] = fwd ? peat_op_view(1, O, C * KK, -1, 1, -1) : peat_op_view(O, C, KK, -1, 1, -1);
    out->out = fwd ? peat_op_view(N, O, OH * OW, 0, 1, -1) : peat_op_view(N, C, H * W, 0, 1, -1);
    return 1;
}

static void conv_cal(int n, int off, peat_op_params *p)
{
    /* N C H W O KH KW stride pad */
    peat_op_params_set(p, 9,
                       (int64_t[]){1 + n / 16, 1 + n / 24, 6 + n / 8 + off, 6 + n / 8,
                                   4 + n / 12 + off, 3, 3, 1, 1});
}
static void conv_fwd_inputs(const peat_op_params *p, int *n_in, int nd[],
                            int64_t s[][PEAT_MAX_DIMS], peat_dtype dt[])
{
    const int64_t *i = p->i;
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 4, i[0], i[1], i[2], i[3], PEAT_DTYPE_F32);
    peat_op_shape(nd, s, dt, &k, 4, i[4], i[1], i[5], i[6], PEAT_DTYPE_F32);
    *n_in = k;
}
static void conv_data_inputs(const peat_op_params *p, int *n_in, int nd[],
                             int64_t s[][PEAT_MAX_DIMS], peat_dtype dt[])
{
    const int64_t *i = p->i;
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 4, i[0], i[4], conv_oh(p), conv_ow(p), PEAT_DTYPE_F32);
    peat_op_shape(nd, s, dt, &k, 4, i[4], i[1], i[5], i[6], PEAT_DTYPE_F32);
    *n_in = k;
}
static void conv_filter_inputs(const peat_op_params *p, int *n_in, int nd[],
                               int64_t s[][PEAT_MAX_DIMS], peat_dtype dt[])
{
    const int64_t *i = p->i;
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 4, i[0], i[1], i[2], i[3], PEAT_DTYPE_F32);
    peat_op_shape(nd, s, dt, &k, 4, i[0], i[4], conv_oh(p), conv_ow(p), PEAT_DTYPE_F32);
    *n_in = k;
}

/* the implicit GEMM each direction computes (as conv_im2col does) */
static int64_t conv_ohw(const peat_op_params *p)
{
    return conv_oh(p) * conv_ow(p);
}
static int conv_fwd_view(const peat_op_params *p, peat_op_gemm_view *v)
{
    v->scale = 1.0, v->batch = 1;
    v->m = p->i[4], v->n = p->i[0] * conv_ohw(p), v->k = p->i[1] * p->i[5] * p->i[6];
    return 1;
}
static int conv_data_view(const peat_op_params *p, peat_op_gemm_view *v)
{
    v->scale = 1.0, v->batch = 1;
    v->m = p->i[1] * p->i[5] * p->i[6], v->n = p->i[0] * conv_ohw(p), v->k = p->i[4];
    return 1;
}
static int conv_filter_view(const peat_op_params *p, peat_op_gemm_view *v)
{
    v->scale = 1.0, v->batch = 1;
    v->m = p->i[4], v->n = p->i[1] * p->i[5] * p->i[6], v->k = p->i[0] * conv_ohw(p);
    return 1;
}

static void conv_amp(const peat_args *a, unsigned *in, unsigned *out)
{
    (void)a;
    *in = 0x3u, *out = 0x1u;
}

/* the forward's own value probes (subnormal and large inputs): no generic range probe */
/* ---- small integers: the operands as -1, 0, 1, the terms of each output's sum thinned to at
 * most PEAT_OP_INT_TERMS nonzero (conv2d: W by its C KH KW taps; backward data: W by its O KH KW
 * taps; backward filter: dY by image and position) ---- */
static unsigned conv_integers(peat_args *a)
{
    int64_t N = P(0), C = P(1), H = P(2), W = P(3), O = P(4), KH = P(5), KW = P(6), st = P(7),
            pad = P(8), OH = (H + 2 * pad - KH) / st + 1, OW = (W + 2 * pad - KW) / st + 1;
    peat_op_int_values(a, 0), peat_op_int_values(a, 1);
    int64_t taps = KH * KW;
    if (a->op == PEAT_OP_CONV2D_BWD_FILTER) {
        float *dy = (float *)a->in[1]->data;
        int64_t s = peat_op_int_stride(N * OH * OW);
        for (int64_t n = 0; n < N; n++)
            for (int64_t o = 0; o < O; o++)
                for (int64_t q = 0; q < OH * OW; q++)
                    if ((n * OH * OW + q + o) % s) dy[(n * O + o) * OH * OW + q] = 0.0f;
        return 1u;
    }
    float *w = (float *)a->in[1]->data;
    int fwd = a->op == PEAT_OP_CONV2D;
    int64_t s = peat_op_int_stride((fwd ? C : O) * taps);
    for (int64_t o = 0; o < O; o++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t t = 0; t < taps; t++)
                if (((fwd ? c : o) * taps + t + (fwd ? o : c)) % s)
                    w[(o * C + c) * taps + t] = 0.0f;
    return 1u;
}

const peat_op_desc peat_opd_conv2d = {
    .info = {PEAT_OP_CONV2D, "conv2d", 2, 2, 1, 0, conv_check, conv_out_shapes, conv_depth,
             conv_flops},
    .magnitude = conv_mag,
    .terms = peat_op_terms_depth,
    .probes = conv_fwd_probes,
    .range_low = 0,
    .range_high = 0,
    .perm = conv_perm,
    .integers = conv_integers,
    .invariant = peat_op_invariant_none,
    .cal_params = conv_cal,
    .input_shapes = conv_fwd_inputs,
    .positive_inputs = 0,
    .gemm_view = conv_fwd_view,
    .amp_masks = conv_amp,
    .aten = "convolution",
};

const peat_op_desc peat_opd_conv2d_bwd_data = {
    .info = {PEAT_OP_CONV2D_BWD_DATA, "conv2d_bwd_data", 2, 2, 1, 1, conv_check, conv_out_shapes,
             conv_bwd_data_depth, conv_flops},
    .magnitude = conv_mag,
    .terms = peat_op_terms_depth,
    .probes = conv_bwd_probes,
    .range_low = 1u << 0, /* dY */
    .range_high = 1u << 0,
    .perm = conv_perm,
    .integers = conv_integers,
    .invariant = peat_op_invariant_none,
    .cal_params = conv_cal,
    .input_shapes = conv_data_inputs,
    .positive_inputs = 0,
    .gemm_view = conv_data_view,
    .amp_masks = conv_amp,
    .aten = "convolution_backward",
};

/* the filter gradient sums over images and positions: no permutation moves it */
const peat_op_desc peat_opd_conv2d_bwd_filter = {
    .info = {PEAT_OP_CONV2D_BWD_FILTER, "conv2d_bwd_filter", 2, 2, 1, 1, conv_check,
             conv_out_shapes, conv_bwd_filter_depth, conv_flops},
    .magnitude = conv_mag,
    .terms = peat_op_terms_depth,
    .probes = conv_bwd_probes,
    .range_low = 1u << 1, /* dY */
    .range_high = 1u << 1,
    .perm = peat_op_perm_none,
    .integers = conv_integers,
    .invariant = peat_op_invariant_none,
    .cal_params = conv_cal,
    .input_shapes = conv_filter_inputs,
    .positive_inputs = 0,
    .gemm_view = conv_filter_view,
    .amp_masks = conv_amp,
    .aten = "convolution_backward",
};
