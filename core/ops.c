/* ops.c: the op table: names, arity, shape rules, accumulation depth and flop counts. */
#include "peat/peat.h"

#include <stdio.h>
#include <string.h>

#define P(k) (a->p.i[k])

static int64_t numel_or(const peat_tensor *t)
{
    return t ? peat_tensor_numel(t) : -1;
}

/* Checks that tensor t (input or output `what`) has dtype dt and n elements. */
static peat_status expect(const peat_args *a, const peat_tensor *t, const char *what, peat_dtype dt,
                          int64_t n)
{
    if (!t) return PEAT_OK; /* outputs may be absent when only inputs are checked */
    if (t->dtype != dt && !(dt == PEAT_DTYPE_F32 && t->dtype == PEAT_DTYPE_F64))
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: %s has dtype %s, expected %s", peat_op_name(a->op),
                          what, peat_dtype_name(t->dtype), peat_dtype_name(dt));
    if (numel_or(t) != n)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: %s has %lld elements, expected %lld",
                          peat_op_name(a->op), what, (long long)numel_or(t), (long long)n);
    return PEAT_OK;
}

static peat_status positive(const peat_args *a, int n)
{
    for (int k = 0; k < n; k++)
        if (a->p.i[k] <= 0 || a->p.i[k] > (1LL << 31))
            return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: param i[%d] = %lld is not a sane size",
                              peat_op_name(a->op), k, (long long)a->p.i[k]);
    return PEAT_OK;
}

static const peat_tensor *OUT(const peat_args *a, int k)
{
    return k < a->n_out ? a->out[k] : NULL;
}
static void shp(int *nd, int64_t s[][PEAT_MAX_DIMS], int o, int n, int64_t d0, int64_t d1,
                int64_t d2, int64_t d3)
{
    nd[o] = n;
    s[o][0] = d0, s[o][1] = d1, s[o][2] = d2, s[o][3] = d3;
}

/* ---- GEMM ---- */
static peat_status gemm_check(const peat_args *a)
{
    int64_t M = P(2), N = P(3), K = P(4), B = P(5);
    if (P(0) < 0 || P(0) > 1 || P(1) < 0 || P(1) > 1)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "gemm: transA/transB must be 0 or 1");
    if (B <= 0 || B > (1 << 20) || M <= 0 || N <= 0 || K <= 0 || M > (1LL << 31) ||
        N > (1LL << 31) || K > (1LL << 31) || (double)B * M * N > 4e9 || (double)B * M * K > 4e9 ||
        (double)B * K * N > 4e9)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "gemm: absurd shape M=%lld N=%lld K=%lld batch=%lld",
                          (long long)M, (long long)N, (long long)K, (long long)B);
    PEAT_TRY(expect(a, a->in[0], "A", PEAT_DTYPE_F32, B * M * K));
    PEAT_TRY(expect(a, a->in[1], "B", PEAT_DTYPE_F32, B * K * N));
    if (a->p.f[1] != 0.0) {
        if (a->n_in < 3) return PEAT_ERROR(PEAT_ERR_SHAPE, "gemm: beta != 0 needs input C");
        PEAT_TRY(expect(a, a->in[2], "C", PEAT_DTYPE_F32, B * M * N));
    }
    return expect(a, OUT(a, 0), "D", PEAT_DTYPE_F32, B * M * N);
}
static peat_status gemm_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    if (P(5) > 1)
        shp(nd, s, 0, 3, P(5), P(2), P(3), 0);
    else
        shp(nd, s, 0, 2, P(2), P(3), 0, 0);
    return PEAT_OK;
}
static int64_t gemm_depth(const peat_op_params *p)
{
    return p->i[4] + (p->f[1] != 0.0);
}
static double gemm_flops(const peat_op_params *p)
{
    return 2.0 * (double)p->i[5] * (double)p->i[2] * (double)p->i[3] * (double)p->i[4];
}

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
    PEAT_TRY(positive(a, 8));
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
        PEAT_TRY(expect(a, a->in[0], "X", PEAT_DTYPE_F32, nx));
        PEAT_TRY(expect(a, a->in[1], "W", PEAT_DTYPE_F32, nw));
        return expect(a, OUT(a, 0), "Y", PEAT_DTYPE_F32, ny);
    case PEAT_OP_CONV2D_BWD_DATA:
        PEAT_TRY(expect(a, a->in[0], "dY", PEAT_DTYPE_F32, ny));
        PEAT_TRY(expect(a, a->in[1], "W", PEAT_DTYPE_F32, nw));
        return expect(a, OUT(a, 0), "dX", PEAT_DTYPE_F32, nx);
    default:
        PEAT_TRY(expect(a, a->in[0], "X", PEAT_DTYPE_F32, nx));
        PEAT_TRY(expect(a, a->in[1], "dY", PEAT_DTYPE_F32, ny));
        return expect(a, OUT(a, 0), "dW", PEAT_DTYPE_F32, nw);
    }
}
static peat_status conv_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    if (a->op == PEAT_OP_CONV2D)
        shp(nd, s, 0, 4, P(0), P(4), conv_oh(&a->p), conv_ow(&a->p));
    else if (a->op == PEAT_OP_CONV2D_BWD_DATA)
        shp(nd, s, 0, 4, P(0), P(1), P(2), P(3));
    else
        shp(nd, s, 0, 4, P(4), P(1), P(5), P(6));
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

/* ---- bias: i = R C S ---- */
static peat_status bias_check(const peat_args *a)
{
    PEAT_TRY(positive(a, 3));
    int64_t n = P(0) * P(1) * P(2);
    if (a->op == PEAT_OP_BIAS_ADD) {
        PEAT_TRY(expect(a, a->in[0], "X", PEAT_DTYPE_F32, n));
        PEAT_TRY(expect(a, a->in[1], "b", PEAT_DTYPE_F32, P(1)));
        return expect(a, OUT(a, 0), "Y", PEAT_DTYPE_F32, n);
    }
    PEAT_TRY(expect(a, a->in[0], "dY", PEAT_DTYPE_F32, n));
    return expect(a, OUT(a, 0), "db", PEAT_DTYPE_F32, P(1));
}
static peat_status bias_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    if (a->op == PEAT_OP_BIAS_ADD)
        shp(nd, s, 0, 3, P(0), P(1), P(2), 0);
    else
        shp(nd, s, 0, 1, P(1), 0, 0, 0);
    return PEAT_OK;
}
static int64_t bias_depth(const peat_op_params *p)
{
    return 1;
}
static int64_t bias_bwd_depth(const peat_op_params *p)
{
    return p->i[0] * p->i[2];
}
static double bias_flops(const peat_op_params *p)
{
    return (double)p->i[0] * p->i[1] * p->i[2];
}

/* ---- elementwise: i = n ---- */
static peat_status ew_check(const peat_args *a)
{
    PEAT_TRY(positive(a, 1));
    for (int k = 0; k < a->n_in; k++)
        PEAT_TRY(expect(a, a->in[k], k ? "dY" : "X", PEAT_DTYPE_F32, P(0)));
    return expect(a, OUT(a, 0), a->n_in > 1 ? "dX" : "Y", PEAT_DTYPE_F32, P(0));
}
static peat_status ew_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    shp(nd, s, 0, 1, P(0), 0, 0, 0);
    return PEAT_OK;
}
static int64_t one_depth(const peat_op_params *p)
{
    return 1;
}
static double ew_flops(const peat_op_params *p)
{
    return (double)p->i[0] * 8;
}

/* ---- rowwise: softmax, reduce, cross-entropy: i = R C ---- */
static peat_status softmax_check(const peat_args *a)
{
    PEAT_TRY(positive(a, 2));
    int64_t n = P(0) * P(1);
    for (int k = 0; k < a->n_in; k++)
        PEAT_TRY(expect(a, a->in[k], k ? "dY" : "X", PEAT_DTYPE_F32, n));
    return expect(a, OUT(a, 0), "Y", PEAT_DTYPE_F32, n);
}
static peat_status rc_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    shp(nd, s, 0, 2, P(0), P(1), 0, 0);
    return PEAT_OK;
}
static int64_t row_depth(const peat_op_params *p)
{
    return p->i[1];
}
/* a mean is C-1 adds and a divide, or the sum times a rounded 1/C: one rounding more */
static int64_t reduce_depth(const peat_op_params *p)
{
    return p->i[1] + (p->i[2] == 1);
}
static double row_flops(const peat_op_params *p)
{
    return 5.0 * p->i[0] * p->i[1];
}

static peat_status reduce_check(const peat_args *a)
{
    PEAT_TRY(positive(a, 2));
    if (P(2) < 0 || P(2) > 1) return PEAT_ERROR(PEAT_ERR_SHAPE, "reduce: mode must be 0 or 1");
    PEAT_TRY(expect(a, a->in[0], "X", PEAT_DTYPE_F32, P(0) * P(1)));
    return expect(a, OUT(a, 0), "Y", PEAT_DTYPE_F32, P(0));
}
static peat_status rows_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    shp(nd, s, 0, 1, P(0), 0, 0, 0);
    return PEAT_OK;
}

static peat_status xent_check(const peat_args *a)
{
    PEAT_TRY(positive(a, 2));
    PEAT_TRY(expect(a, a->in[0], "logits", PEAT_DTYPE_F32, P(0) * P(1)));
    PEAT_TRY(expect(a, a->in[1], "target", PEAT_DTYPE_I32, P(0)));
    if (a->in[1]) {
        const int32_t *t = peat_i32(a->in[1]);
        for (int64_t r = 0; r < P(0); r++)
            if (t[r] < 0 || t[r] >= P(1))
                return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: target[%lld] = %d outside [0,%lld)",
                                  peat_op_name(a->op), (long long)r, t[r], (long long)P(1));
    }
    if (a->op == PEAT_OP_CROSS_ENTROPY) return expect(a, OUT(a, 0), "loss", PEAT_DTYPE_F32, P(0));
    PEAT_TRY(expect(a, a->in[2], "dloss", PEAT_DTYPE_F32, P(0)));
    return expect(a, OUT(a, 0), "dlogits", PEAT_DTYPE_F32, P(0) * P(1));
}
static peat_status xent_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    return a->op == PEAT_OP_CROSS_ENTROPY ? rows_shapes(a, nd, s) : rc_shapes(a, nd, s);
}

/* ---- layernorm: i = R C ; f = eps ---- */
static peat_status ln_check(const peat_args *a)
{
    PEAT_TRY(positive(a, 2));
    int64_t R = P(0), C = P(1);
    if (!(a->p.f[0] > 0.0))
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: eps must be > 0", peat_op_name(a->op));
    PEAT_TRY(expect(a, a->in[0], "X", PEAT_DTYPE_F32, R * C));
    PEAT_TRY(expect(a, a->in[1], "gamma", PEAT_DTYPE_F32, C));
    if (a->op == PEAT_OP_LAYERNORM) {
        PEAT_TRY(expect(a, a->in[2], "beta", PEAT_DTYPE_F32, C));
        PEAT_TRY(expect(a, OUT(a, 0), "Y", PEAT_DTYPE_F32, R * C));
        PEAT_TRY(expect(a, OUT(a, 1), "mean", PEAT_DTYPE_F32, R));
        return expect(a, OUT(a, 2), "rstd", PEAT_DTYPE_F32, R);
    }
    PEAT_TRY(expect(a, a->in[2], "mean", PEAT_DTYPE_F32, R));
    PEAT_TRY(expect(a, a->in[3], "rstd", PEAT_DTYPE_F32, R));
    PEAT_TRY(expect(a, a->in[4], "dY", PEAT_DTYPE_F32, R * C));
    PEAT_TRY(expect(a, OUT(a, 0), "dX", PEAT_DTYPE_F32, R * C));
    PEAT_TRY(expect(a, OUT(a, 1), "dgamma", PEAT_DTYPE_F32, C));
    return expect(a, OUT(a, 2), "dbeta", PEAT_DTYPE_F32, C);
}
static peat_status ln_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    shp(nd, s, 0, 2, P(0), P(1), 0, 0);
    if (a->op == PEAT_OP_LAYERNORM) {
        shp(nd, s, 1, 1, P(0), 0, 0, 0);
        shp(nd, s, 2, 1, P(0), 0, 0, 0);
    } else {
        shp(nd, s, 1, 1, P(1), 0, 0, 0);
        shp(nd, s, 2, 1, P(1), 0, 0, 0);
    }
    return PEAT_OK;
}
static int64_t ln_bwd_depth(const peat_op_params *p)
{
    return p->i[0] > p->i[1] ? p->i[0] : p->i[1];
}

/* ---- attention: i = B H T D causal ; f = scale ---- */
static peat_status attn_check(const peat_args *a)
{
    PEAT_TRY(positive(a, 4));
    if (P(4) < 0 || P(4) > 1)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: causal must be 0 or 1", peat_op_name(a->op));
    int64_t n = P(0) * P(1) * P(2) * P(3), nl = P(0) * P(1) * P(2);
    if ((double)n > 4e9) return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: absurd shape", peat_op_name(a->op));
    static const char *fw[] = {"Q", "K", "V"}, *bw[] = {"Q", "K", "V", "O", "L", "dO"};
    if (a->op == PEAT_OP_ATTENTION) {
        for (int k = 0; k < 3; k++) PEAT_TRY(expect(a, a->in[k], fw[k], PEAT_DTYPE_F32, n));
        PEAT_TRY(expect(a, OUT(a, 0), "O", PEAT_DTYPE_F32, n));
        return expect(a, OUT(a, 1), "L", PEAT_DTYPE_F32, nl);
    }
    for (int k = 0; k < 6; k++)
        PEAT_TRY(expect(a, a->in[k], bw[k], PEAT_DTYPE_F32, k == 4 ? nl : n));
    for (int k = 0; k < 3; k++) PEAT_TRY(expect(a, OUT(a, k), fw[k], PEAT_DTYPE_F32, n));
    return PEAT_OK;
}
static peat_status attn_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    shp(nd, s, 0, 4, P(0), P(1), P(2), P(3));
    if (a->op == PEAT_OP_ATTENTION)
        shp(nd, s, 1, 3, P(0), P(1), P(2), 0);
    else {
        shp(nd, s, 1, 4, P(0), P(1), P(2), P(3));
        shp(nd, s, 2, 4, P(0), P(1), P(2), P(3));
    }
    return PEAT_OK;
}
static int64_t attn_depth(const peat_op_params *p)
{
    return p->i[2] > p->i[3] ? p->i[2] : p->i[3];
}
static double attn_flops(const peat_op_params *p)
{
    return 4.0 * p->i[0] * p->i[1] * p->i[2] * p->i[2] * p->i[3] * (p->i[4] ? 0.5 : 1.0);
}

/* ---- embedding: i = N V D ---- */
static peat_status emb_check(const peat_args *a)
{
    PEAT_TRY(positive(a, 3));
    int64_t N = P(0), V = P(1), D = P(2);
    const peat_tensor *idx = a->op == PEAT_OP_EMBEDDING ? a->in[1] : a->in[0];
    PEAT_TRY(expect(a, idx, "idx", PEAT_DTYPE_I32, N));
    if (idx) {
        const int32_t *t = peat_i32(idx);
        for (int64_t r = 0; r < N; r++)
            if (t[r] < 0 || t[r] >= V)
                return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: idx[%lld] = %d outside [0,%lld)",
                                  peat_op_name(a->op), (long long)r, t[r], (long long)V);
    }
    if (a->op == PEAT_OP_EMBEDDING) {
        PEAT_TRY(expect(a, a->in[0], "table", PEAT_DTYPE_F32, V * D));
        return expect(a, OUT(a, 0), "Y", PEAT_DTYPE_F32, N * D);
    }
    PEAT_TRY(expect(a, a->in[1], "dY", PEAT_DTYPE_F32, N * D));
    return expect(a, OUT(a, 0), "dtable", PEAT_DTYPE_F32, V * D);
}
static peat_status emb_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    if (a->op == PEAT_OP_EMBEDDING)
        shp(nd, s, 0, 2, P(0), P(2), 0, 0);
    else
        shp(nd, s, 0, 2, P(1), P(2), 0, 0);
    return PEAT_OK;
}
static int64_t emb_bwd_depth(const peat_op_params *p)
{
    return p->i[0];
}
static double emb_flops(const peat_op_params *p)
{
    return (double)p->i[0] * p->i[2];
}

/* ---- optimizers: i = n (, t) ---- */
static peat_status optim_check(const peat_args *a)
{
    PEAT_TRY(positive(a, 1));
    if (a->op == PEAT_OP_ADAMW && P(1) < 1)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "adamw: step must be >= 1");
    if (a->op == PEAT_OP_SGD && P(1) != 0 && P(1) != 1)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "sgd: nesterov must be 0 or 1");
    static const char *an[] = {"param", "grad", "m", "v"}, *sn[] = {"param", "grad", "mom"};
    int nin = a->op == PEAT_OP_ADAMW ? 4 : 3;
    for (int k = 0; k < nin; k++)
        PEAT_TRY(expect(a, a->in[k], a->op == PEAT_OP_ADAMW ? an[k] : sn[k], PEAT_DTYPE_F32, P(0)));
    for (int k = 0; k < a->n_out; k++) PEAT_TRY(expect(a, a->out[k], "out", PEAT_DTYPE_F32, P(0)));
    return PEAT_OK;
}
static peat_status optim_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    int n = a->op == PEAT_OP_ADAMW ? 3 : 2;
    for (int k = 0; k < n; k++) shp(nd, s, k, 1, P(0), 0, 0, 0);
    return PEAT_OK;
}
static double optim_flops(const peat_op_params *p)
{
    return 12.0 * p->i[0];
}

#define OP(k, nm, imin, imax, no, bw, chk, shp_, dep, fl)                                          \
    [k] = {k, nm, imin, imax, no, bw, chk, shp_, dep, fl}
static const peat_op_info op_table[PEAT_OP_COUNT] = {
    OP(PEAT_OP_GEMM, "gemm", 2, 3, 1, 0, gemm_check, gemm_shapes, gemm_depth, gemm_flops),
    OP(PEAT_OP_CONV2D, "conv2d", 2, 2, 1, 0, conv_check, conv_shapes, conv_depth, conv_flops),
    OP(PEAT_OP_CONV2D_BWD_DATA, "conv2d_bwd_data", 2, 2, 1, 1, conv_check, conv_shapes,
       conv_bwd_data_depth, conv_flops),
    OP(PEAT_OP_CONV2D_BWD_FILTER, "conv2d_bwd_filter", 2, 2, 1, 1, conv_check, conv_shapes,
       conv_bwd_filter_depth, conv_flops),
    OP(PEAT_OP_BIAS_ADD, "bias_add", 2, 2, 1, 0, bias_check, bias_shapes, bias_depth, bias_flops),
    OP(PEAT_OP_BIAS_ADD_BWD, "bias_add_bwd", 1, 1, 1, 1, bias_check, bias_shapes, bias_bwd_depth,
       bias_flops),
    OP(PEAT_OP_RELU, "relu", 1, 1, 1, 0, ew_check, ew_shapes, one_depth, ew_flops),
    OP(PEAT_OP_RELU_BWD, "relu_bwd", 2, 2, 1, 1, ew_check, ew_shapes, one_depth, ew_flops),
    OP(PEAT_OP_GELU, "gelu", 1, 1, 1, 0, ew_check, ew_shapes, one_depth, ew_flops),
    OP(PEAT_OP_GELU_BWD, "gelu_bwd", 2, 2, 1, 1, ew_check, ew_shapes, one_depth, ew_flops),
    OP(PEAT_OP_SOFTMAX, "softmax", 1, 1, 1, 0, softmax_check, rc_shapes, row_depth, row_flops),
    OP(PEAT_OP_SOFTMAX_BWD, "softmax_bwd", 2, 2, 1, 1, softmax_check, rc_shapes, row_depth,
       row_flops),
    OP(PEAT_OP_LAYERNORM, "layernorm", 3, 3, 3, 0, ln_check, ln_shapes, row_depth, row_flops),
    OP(PEAT_OP_LAYERNORM_BWD, "layernorm_bwd", 5, 5, 3, 1, ln_check, ln_shapes, ln_bwd_depth,
       row_flops),
    OP(PEAT_OP_ATTENTION, "attention", 3, 3, 2, 0, attn_check, attn_shapes, attn_depth, attn_flops),
    OP(PEAT_OP_ATTENTION_BWD, "attention_bwd", 6, 6, 3, 1, attn_check, attn_shapes, attn_depth,
       attn_flops),
    OP(PEAT_OP_EMBEDDING, "embedding", 2, 2, 1, 0, emb_check, emb_shapes, one_depth, emb_flops),
    OP(PEAT_OP_EMBEDDING_BWD, "embedding_bwd", 2, 2, 1, 1, emb_check, emb_shapes, emb_bwd_depth,
       emb_flops),
    OP(PEAT_OP_CROSS_ENTROPY, "cross_entropy", 2, 2, 1, 0, xent_check, xent_shapes, row_depth,
       row_flops),
    OP(PEAT_OP_CROSS_ENTROPY_BWD, "cross_entropy_bwd", 3, 3, 1, 1, xent_check, xent_shapes,
       row_depth, row_flops),
    OP(PEAT_OP_ADAMW, "adamw", 4, 4, 3, 0, optim_check, optim_shapes, one_depth, optim_flops),
    OP(PEAT_OP_SGD, "sgd", 3, 3, 2, 0, optim_check, optim_shapes, one_depth, optim_flops),
    OP(PEAT_OP_REDUCE, "reduce", 1, 1, 1, 0, reduce_check, rows_shapes, reduce_depth, row_flops),
};

const peat_op_info *peat_op_info_get(peat_op_kind op)
{
    if ((int)op < 0 || op >= PEAT_OP_COUNT) return NULL;
    return &op_table[op];
}

const char *peat_op_name(peat_op_kind op)
{
    const peat_op_info *i = peat_op_info_get(op);
    return i ? i->name : "?";
}

peat_status peat_op_parse(const char *name, peat_op_kind *out)
{
    for (int k = 0; k < PEAT_OP_COUNT; k++)
        if (name && strcmp(op_table[k].name, name) == 0) {
            *out = (peat_op_kind)k;
            return PEAT_OK;
        }
    return PEAT_ERROR(PEAT_ERR_NOTFOUND, "unknown op '%s'", name ? name : "(null)");
}

peat_status peat_op_check(const peat_args *a)
{
    const peat_op_info *info = peat_op_info_get(a->op);
    if (!info) return PEAT_ERROR(PEAT_ERR_INVAL, "op kind %d out of range", (int)a->op);
    if (a->n_in < info->n_in_min || a->n_in > info->n_in_max)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: %d inputs given, expected %d..%d", info->name,
                          a->n_in, info->n_in_min, info->n_in_max);
    for (int k = 0; k < a->n_in; k++)
        if (!a->in[k] || !a->in[k]->data)
            return PEAT_ERROR(PEAT_ERR_INVAL, "%s: input %d is NULL", info->name, k);
    if (a->n_out != 0 && a->n_out != info->n_out)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: %d outputs given, expected %d", info->name, a->n_out,
                          info->n_out);
    return info->check(a);
}

peat_status peat_op_alloc_outputs(peat_args *a, peat_dtype dt)
{
    const peat_op_info *info = peat_op_info_get(a->op);
    if (!info) return PEAT_ERROR(PEAT_ERR_INVAL, "op kind %d out of range", (int)a->op);
    int nd[PEAT_MAX_IO] = {0};
    int64_t s[PEAT_MAX_IO][PEAT_MAX_DIMS] = {{0}};
    PEAT_TRY(info->out_shapes(a, nd, s));
    a->n_out = info->n_out;
    for (int k = 0; k < info->n_out; k++) {
        a->out[k] = NULL;
        peat_status st = peat_tensor_alloc(dt, nd[k], s[k], &a->out[k]);
        if (st != PEAT_OK) {
            peat_args_free_outputs(a);
            return st;
        }
    }
    return PEAT_OK;
}

void peat_args_free_outputs(peat_args *a)
{
    for (int k = 0; k < a->n_out; k++) {
        peat_tensor_free(a->out[k]);
        a->out[k] = NULL;
    }
}

peat_args peat_args_make(peat_op_kind op, const peat_op_params *p, int n_in,
                         const peat_tensor *const *in, int n_out, peat_tensor *const *out)
{
    peat_args a;
    memset(&a, 0, sizeof a);
    a.op = op;
    if (p) a.p = *p;
    a.n_in = n_in;
    a.n_out = n_out;
    for (int k = 0; k < n_in && k < PEAT_MAX_IO; k++) a.in[k] = in[k];
    for (int k = 0; k < n_out && k < PEAT_MAX_IO; k++) a.out[k] = out[k];
    return a;
}
