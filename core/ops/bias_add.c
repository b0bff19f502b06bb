/* bias_add.c: the per-channel bias add (Y[r,c,s] = X[r,c,s] + b[c]; S = 1 for a linear layer)
 * and its backward, the bias gradient (db[c] = sum over r and s of dY). */
#include "core/opdesc.h"

#include <math.h>

#define P(k) (a->p.i[k])

static peat_status bias_check(const peat_args *a)
{
    PEAT_TRY(peat_op_positive(a, 3));
    int64_t n = P(0) * P(1) * P(2);
    if (a->op == PEAT_OP_BIAS_ADD) {
        PEAT_TRY(peat_op_expect(a, a->in[0], "X", PEAT_DTYPE_F32, n));
        PEAT_TRY(peat_op_expect(a, a->in[1], "b", PEAT_DTYPE_F32, P(1)));
        return peat_op_expect(a, peat_op_out(a, 0), "Y", PEAT_DTYPE_F32, n);
    }
    PEAT_TRY(peat_op_expect(a, a->in[0], "dY", PEAT_DTYPE_F32, n));
    return peat_op_expect(a, peat_op_out(a, 0), "db", PEAT_DTYPE_F32, P(1));
}
static peat_status bias_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    if (a->op == PEAT_OP_BIAS_ADD)
        peat_op_out_shape(nd, s, 0, 3, P(0), P(1), P(2), 0);
    else
        peat_op_out_shape(nd, s, 0, 1, P(1), 0, 0, 0);
    return PEAT_OK;
}
static int64_t bias_bwd_depth(const peat_op_params *p)
{
    return p->i[0] * p->i[2];
}
static double bias_flops(const peat_op_params *p)
{
    return (double)p->i[0] * p->i[1] * p->i[2];
}

/* bias add: one add, |y| */
static peat_status bias_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                            const peat_tensor *exact_out, double *mag)
{
    (void)o, (void)exact_out;
    int64_t C = a->p.i[1], S = a->p.i[2];
    for (int64_t i = 0; i < n; i++) mag[i] = fabs(in->x[0][i] + in->x[1][(i / S) % C]);
    return PEAT_OK;
}

/* the bias gradient is a plain sum: the exact kernel on |dY| */
static peat_status bias_bwd_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                                const peat_tensor *exact_out, double *mag)
{
    (void)o, (void)exact_out;
    return peat_op_mag_abs(a, in, n, mag);
}

/* rows (the bias [C] keeps its place) */
static int bias_perm(const peat_args *a, peat_op_perm *out)
{
    int64_t R = P(0);
    out->len[0] = R;
    out->in_mask = 1u;
    out->in[0] = peat_op_view(1, R, peat_tensor_numel(a->in[0]) / R, -1, 0, -1);
    out->out = peat_op_view(1, R, P(1) * P(2), -1, 0, -1);
    return 1;
}

/* the gradient's channels (the sum runs over rows and spatial positions) */
static int bias_bwd_perm(const peat_args *a, peat_op_perm *out)
{
    out->len[0] = P(1);
    out->in_mask = 1u;
    out->in[0] = peat_op_view(P(0), P(1), P(2), -1, 0, -1);
    out->out = peat_op_view(1, 1, P(1), -1, -1, 0);
    return 1;
}

static void bias_cal(int n, int off, peat_op_params *p)
{
    peat_op_params_set(p, 3, (int64_t[]){4 * n + off, n, 2});
}
static void bias_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                        peat_dtype dt[])
{
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 3, p->i[0], p->i[1], p->i[2], 0, PEAT_DTYPE_F32);
    peat_op_shape(nd, s, dt, &k, 1, p->i[1], 0, 0, 0, PEAT_DTYPE_F32);
    *n_in = k;
}
static void bias_bwd_inputs(const peat_op_params *p, int *n_in, int nd[],
                            int64_t s[][PEAT_MAX_DIMS], peat_dtype dt[])
{
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 3, p->i[0], p->i[1], p->i[2], 0, PEAT_DTYPE_F32);
    *n_in = k;
}

const peat_op_desc peat_opd_bias_add = {
    .info = {PEAT_OP_BIAS_ADD, "bias_add", 2, 2, 1, 0, bias_check, bias_shapes, peat_op_depth_one,
             bias_flops},
    .magnitude = bias_mag,
    .terms = peat_op_terms_one,
    .probes = peat_op_probes_none,
    .range_low = 1u << 0 | 1u << 1, /* X and b */
    .range_high = 1u << 0 | 1u << 1,
    .perm = bias_perm,
    .integers = peat_op_integers_none,
    .invariant = peat_op_invariant_none,
    .cal_params = bias_cal,
    .input_shapes = bias_inputs,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "",
};

/* ---- small integers: dY as -1, 0, 1, at most PEAT_OP_INT_TERMS nonzero terms per channel ---- */
static unsigned bias_bwd_integers(peat_args *a)
{
    int64_t R = P(0), C = P(1), S = P(2), st = peat_op_int_stride(R * S);
    peat_op_int_values(a, 0);
    float *x = (float *)a->in[0]->data;
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t s = 0; s < S; s++)
                if ((r * S + s + c) % st) x[(r * C + c) * S + s] = 0.0f;
    return 1u;
}

const peat_op_desc peat_opd_bias_add_bwd = {
    .info = {PEAT_OP_BIAS_ADD_BWD, "bias_add_bwd", 1, 1, 1, 1, bias_check, bias_shapes,
             bias_bwd_depth, bias_flops},
    .magnitude = bias_bwd_mag,
    .terms = peat_op_terms_depth,
    .probes = peat_op_probes_none,
    .range_low = 1u << 0, /* dY */
    .range_high = 1u << 0,
    .perm = bias_bwd_perm,
    .integers = bias_bwd_integers,
    .invariant = peat_op_invariant_none,
    .cal_params = bias_cal,
    .input_shapes = bias_bwd_inputs,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "sum",
};
