/* pool.c: max and average 2-D pooling (K x K windows, a stride, zero padding) and their backward
 * ops; the references are golden/pool.c. */
#include "core/opdesc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define P(k) (a->p.i[k])

/* ---- shapes: i = N, C, H, W, K, stride, pad ---- */

static int64_t pool_oh(const peat_op_params *p)
{
    return (p->i[2] + 2 * p->i[6] - p->i[4]) / (p->i[5] > 0 ? p->i[5] : 1) + 1;
}
static int64_t pool_ow(const peat_op_params *p)
{
    return (p->i[3] + 2 * p->i[6] - p->i[4]) / (p->i[5] > 0 ? p->i[5] : 1) + 1;
}
static int is_max(peat_op_kind op)
{
    return op == PEAT_OP_MAXPOOL2D || op == PEAT_OP_MAXPOOL2D_BWD;
}
static int is_bwd(peat_op_kind op)
{
    return op == PEAT_OP_MAXPOOL2D_BWD || op == PEAT_OP_AVGPOOL2D_BWD;
}

static peat_status pool_check(const peat_args *a)
{
    PEAT_TRY(peat_op_positive(a, 6));
    if (P(6) < 0 || 2 * P(6) > P(4))
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: pad %lld must be in [0, K/2]", peat_op_name(a->op),
                          (long long)P(6));
    if (P(2) + 2 * P(6) < P(4) || P(3) + 2 * P(6) < P(4))
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: window larger than the padded image",
                          peat_op_name(a->op));
    if ((double)P(0) * P(1) * P(2) * P(3) > 4e9)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: absurd shape", peat_op_name(a->op));
    int64_t nx = P(0) * P(1) * P(2) * P(3), ny = P(0) * P(1) * pool_oh(&a->p) * pool_ow(&a->p);
    if (!is_bwd(a->op)) {
        PEAT_TRY(peat_op_expect(a, a->in[0], "X", PEAT_DTYPE_F32, nx));
        return peat_op_expect(a, peat_op_out(a, 0), "Y", PEAT_DTYPE_F32, ny);
    }
    if (is_max(a->op)) {
        PEAT_TRY(peat_op_expect(a, a->in[0], "X", PEAT_DTYPE_F32, nx));
        PEAT_TRY(peat_op_expect(a, a->in[1], "dY", PEAT_DTYPE_F32, ny));
    } else
        PEAT_TRY(peat_op_expect(a, a->in[0], "dY", PEAT_DTYPE_F32, ny));
    return peat_op_expect(a, peat_op_out(a, 0), "dX", PEAT_DTYPE_F32, nx);
}
static peat_status pool_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    if (is_bwd(a->op))
        peat_op_out_shape(nd, s, 0, 4, P(0), P(1), P(2), P(3));
    else
        peat_op_out_shape(nd, s, 0, 4, P(0), P(1), pool_oh(&a->p), pool_ow(&a->p));
    return PEAT_OK;
}
/* the windows that cover one input: ceil(K / stride)^2 at most */
static int64_t overlap(const peat_op_params *p)
{
    int64_t w = (p->i[4] + p->i[5] - 1) / (p->i[5] > 0 ? p->i[5] : 1);
    return w * w;
}
/* max: no rounding; its backward sums the dY of the windows whose maximum an input is */
static int64_t max_bwd_depth(const peat_op_params *p)
{
    return overlap(p);
}
/* average: K^2 - 1 adds and the divide (or a product by 1 / K^2, one rounding more) */
static int64_t avg_depth(const peat_op_params *p)
{
    return p->i[4] * p->i[4] + 1;
}
static int64_t avg_bwd_depth(const peat_op_params *p)
{
    return overlap(p) + 1;
}
static double pool_flops(const peat_op_params *p)
{
    return (double)p->i[0] * p->i[1] * pool_oh(p) * pool_ow(p) * p->i[4] * p->i[4];
}

/* ---- rounding bounds ---- */

/* max: an exact op (any error is a bug); |y| keeps the bound scale-free */
static peat_status max_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                           const peat_tensor *exact_out, double *mag)
{
    (void)in, (void)o;
    return peat_op_mag_value(a, exact_out, n, mag);
}

/* max backward: the sum of |dY| over the windows whose first maximum the input is (the
 * maximum read from X as the exact kernel does) */
static peat_status max_bwd_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                               const peat_tensor *exact_out, double *mag)
{
    (void)o, (void)exact_out;
    int64_t NC = P(0) * P(1), H = P(2), W = P(3), K = P(4), st = P(5), pad = P(6);
    int64_t OH = pool_oh(&a->p), OW = pool_ow(&a->p);
    const double *x = in->x[0], *dy = in->x[1];
    for (int64_t i = 0; i < n; i++) mag[i] = 0.0;
    for (int64_t nc = 0; nc < NC; nc++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t best = -1;
                for (int64_t kh = 0; kh < K; kh++)
                    for (int64_t kw = 0; kw < K; kw++) {
                        int64_t ih = oh * st - pad + kh, iw = ow * st - pad + kw;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                        int64_t idx = (nc * H + ih) * W + iw;
                        if (best < 0 || x[idx] > x[best]) best = idx;
                    }
                mag[best] += fabs(dy[(nc * OH + oh) * OW + ow]);
            }
    return PEAT_OK;
}

/* average and its backward: plain sums, the exact kernel on |inputs| */
static peat_status avg_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                           const peat_tensor *exact_out, double *mag)
{
    (void)o, (void)exact_out;
    return peat_op_mag_abs(a, in, n, mag);
}

/* ---- probes: window, stride and padding combinations on odd image sides; for max pooling,
 * values on a coarse grid (ties in every window: the first maximum must win) ---- */
static peat_status pool_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    const peat_record *rec = recs->items[0];
    static const int64_t cf[][5] = {/* H W K stride pad */
                                    {7, 9, 3, 2, 1},
                                    {8, 8, 2, 1, 0},
                                    {9, 7, 3, 1, 1},
                                    {5, 5, 5, 1, 2},
                                    {6, 11, 2, 3, 1}};
    peat_rng_t *r = peat_rng_new(seed ^ 0x706f6f6cull);
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe rng");
    peat_status st = PEAT_OK;
    char label[96];
    for (size_t i = 0; st == PEAT_OK && i < sizeof cf / sizeof cf[0]; i++) {
        peat_op_params q = rec->p;
        q.i[2] = cf[i][0], q.i[3] = cf[i][1], q.i[4] = cf[i][2], q.i[5] = cf[i][3],
        q.i[6] = cf[i][4];
        int64_t nx = q.i[0] * q.i[1] * q.i[2] * q.i[3],
                ny = q.i[0] * q.i[1] * pool_oh(&q) * pool_ow(&q);
        int64_t sz[2];
        int n_in = rec->n_in;
        if (!is_bwd(rec->op))
            sz[0] = nx;
        else if (is_max(rec->op))
            sz[0] = nx, sz[1] = ny;
        else
            sz[0] = ny;
        snprintf(label, sizeof label, "shape %lldx%lld window %lld stride %lld pad %lld",
                 (long long)q.i[2], (long long)q.i[3], (long long)q.i[4], (long long)q.i[5],
                 (long long)q.i[6]);
        st = peat_op_probe_fresh(s, rec, r, &q, sz, n_in, label);
    }
    peat_rng_free(r);
    if (st != PEAT_OK || !is_max(rec->op)) return st;
    peat_args *p = peat_op_probe_clone(s, rec, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_NONE,
                                       "value ties (X on a grid of 4 levels)");
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "pool probe");
    float *x = peat_op_probe_f32(p, 0);
    for (int64_t i = 0; i < peat_op_probe_numel(p, 0); i++) x[i] = x[i] > 0.0f ? 1.0f : 0.0f;
    return PEAT_OK;
}

/* ---- permutation: the N C planes of every tensor, and, where the windows tile the padded
 * image evenly ((H + 2 pad - K) and (W + 2 pad - K) multiples of the stride), every plane turned
 * by 180 degrees (its row-major pixels reversed, input and output alike): the windows map onto
 * windows, so the exact result follows, and a defect tied to the last row or column stays there
 * while the values move to the first ---- */
static int pool_perm(const peat_args *a, peat_op_perm *out)
{
    int64_t NC = P(0) * P(1), HW = P(2) * P(3), OHW = pool_oh(&a->p) * pool_ow(&a->p);
    int even = (P(2) + 2 * P(6) - P(4)) % P(5) == 0 && (P(3) + 2 * P(6) - P(4)) % P(5) == 0;
    if (NC < 2 && !even) return 0;
    out->len[0] = NC;
    if (even) {
        out->len[1] = HW, out->len[2] = OHW;
        out->pairs[1] = out->pairs[2] = PEAT_PERM_REVERSE;
    }
    for (int k = 0; k < a->n_in; k++) {
        int64_t n = peat_tensor_numel(a->in[k]) / NC;
        out->in_mask |= 1u << k;
        out->in[k] = peat_op_view(NC, 1, n, 0, -1, even ? (n == HW ? 1 : 2) : -1);
    }
    int64_t w = is_bwd(a->op) ? HW : OHW;
    out->out = peat_op_view(NC, 1, w, 0, -1, even ? (w == HW ? 1 : 2) : -1);
    return 1;
}

static void pool_cal(int n, int off, peat_op_params *p)
{
    peat_op_params_set(p, 7,
                       (int64_t[]){1 + n / 16, 2 + n / 8, 6 + n / 4 + off, 6 + n / 4, 2, 2, 0});
    p->i[6] = 0;
}
static void pool_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                        peat_dtype dt[])
{
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 4, p->i[0], p->i[1], p->i[2], p->i[3], PEAT_DTYPE_F32);
    *n_in = k;
}
static void max_bwd_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                           peat_dtype dt[])
{
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 4, p->i[0], p->i[1], p->i[2], p->i[3], PEAT_DTYPE_F32);
    peat_op_shape(nd, s, dt, &k, 4, p->i[0], p->i[1], pool_oh(p), pool_ow(p), PEAT_DTYPE_F32);
    *n_in = k;
}
static void avg_bwd_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                           peat_dtype dt[])
{
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 4, p->i[0], p->i[1], pool_oh(p), pool_ow(p), PEAT_DTYPE_F32);
    *n_in = k;
}

/* ---- small integers (max pooling backward): dY as -1, 0, 1, X kept (its maxima, ties and all,
 * stay where they were): each pixel sums at most ceil(K / stride)^2 of them ---- */
static unsigned max_bwd_integers(peat_args *a)
{
    peat_op_int_values(a, 1);
    return 1u;
}

#define POOL_DESC(sym, kind, nm, nin, bwd, depth, mag_, low, ins, ints, aten_)                     \
    const peat_op_desc sym = {                                                                     \
        .info = {kind, nm, nin, nin, 1, bwd, pool_check, pool_shapes, depth, pool_flops},          \
        .magnitude = mag_,                                                                         \
        .terms = peat_op_terms_depth,                                                              \
        .probes = pool_probes,                                                                     \
        .range_low = low,                                                                          \
        .range_high = low,                                                                         \
        .perm = pool_perm,                                                                         \
        .integers = ints,                                                                          \
        .invariant = peat_op_invariant_none,                                                       \
        .cal_params = pool_cal,                                                                    \
        .input_shapes = ins,                                                                       \
        .positive_inputs = 0,                                                                      \
        .gemm_view = peat_op_gemm_view_none,                                                       \
        .amp_masks = peat_op_amp_none,                                                             \
        .aten = aten_,                                                                             \
    }

/* the ranges through X (dY for a backward): outputs scale with them */
POOL_DESC(peat_opd_maxpool2d, PEAT_OP_MAXPOOL2D, "maxpool2d", 1, 0, peat_op_depth_one, max_mag,
          1u << 0, pool_inputs, peat_op_integers_none, "max_pool2d_with_indices");
POOL_DESC(peat_opd_maxpool2d_bwd, PEAT_OP_MAXPOOL2D_BWD, "maxpool2d_bwd", 2, 1, max_bwd_depth,
          max_bwd_mag, 1u << 1, max_bwd_inputs, max_bwd_integers,
          "max_pool2d_with_indices_backward");
POOL_DESC(peat_opd_avgpool2d, PEAT_OP_AVGPOOL2D, "avgpool2d", 1, 0, avg_depth, avg_mag, 1u << 0,
          pool_inputs, peat_op_integers_none, "avg_pool2d");
POOL_DESC(peat_opd_avgpool2d_bwd, PEAT_OP_AVGPOOL2D_BWD, "avgpool2d_bwd", 1, 1, avg_bwd_depth,
          avg_mag, 1u << 0, avg_bwd_inputs, peat_op_integers_none, "avg_pool2d_backward");
