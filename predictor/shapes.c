/* shapes.c: synthetic calls for calibration: one size family per op (params from a size n), the
 * op's input shapes, and inputs filled with valid random values. */
#include "predictor/predictor.h"
#include "peat/backend.h"

#include <math.h>
#include <stdlib.h>

/* Calibration sizes span tiny calls (overhead-dominated) to calls of a few milliseconds; the
 * held-out sizes fall between them and use dimensions off every tile grid. */
static const int cal_sizes[] = {2, 4, 8, 12, 20, 28, 40, 56, 80, 96};
static const int odd_sizes[] = {6, 16, 34, 48, 68, 88};

int peat_predictor_sizes(peat_op_kind op, int odd, int *sizes, int max)
{
    const int *s = odd ? odd_sizes : cal_sizes;
    int n = odd ? (int)(sizeof odd_sizes / sizeof odd_sizes[0])
                : (int)(sizeof cal_sizes / sizeof cal_sizes[0]);
    if (n > max) n = max;
    for (int i = 0; i < n; i++) sizes[i] = s[i];
    return n;
}

static void set(peat_op_params *p, int count, const int64_t *v)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < count; i++) p->i[i] = v[i] > 0 ? v[i] : 1;
}

void peat_predictor_shape(peat_op_kind op, int n, int odd, peat_op_params *p)
{
    int64_t a = odd ? 1 : 0; /* held-out dims: +1 / -1 off the family's round numbers */
    switch (op) {
    case PEAT_OP_GEMM:
        set(p, 6, (int64_t[]){0, 0, n + a, n - a, n + 2 * a, 1});
        p->i[0] = p->i[1] = 0;
        p->f[0] = 1.0;
        break;
    case PEAT_OP_CONV2D:
    case PEAT_OP_CONV2D_BWD_DATA:
    case PEAT_OP_CONV2D_BWD_FILTER:
        /* N C H W O KH KW stride pad */
        set(p, 9,
            (int64_t[]){1 + n / 16, 1 + n / 24, 6 + n / 8 + a, 6 + n / 8, 4 + n / 12 + a, 3, 3, 1,
                        1});
        break;
    case PEAT_OP_ATTENTION:
    case PEAT_OP_ATTENTION_BWD:
        set(p, 5, (int64_t[]){1, 2, 2 + n / 2 + a, 8 + n / 8, 1});
        p->f[0] = 0.25;
        break;
    case PEAT_OP_BIAS_ADD:
    case PEAT_OP_BIAS_ADD_BWD:
        set(p, 3, (int64_t[]){4 * n + a, n, 2});
        break;
    case PEAT_OP_SOFTMAX:
    case PEAT_OP_SOFTMAX_BWD:
    case PEAT_OP_LAYERNORM:
    case PEAT_OP_LAYERNORM_BWD:
    case PEAT_OP_CROSS_ENTROPY:
    case PEAT_OP_CROSS_ENTROPY_BWD:
    case PEAT_OP_REDUCE:
        set(p, 2, (int64_t[]){2 * n + a, 2 * n + 3 * a});
        p->i[2] = 0;
        p->f[0] = 1e-5;
        break;
    case PEAT_OP_EMBEDDING:
    case PEAT_OP_EMBEDDING_BWD:
        set(p, 3, (int64_t[]){4 * n + a, 64, 4 + n / 2});
        break;
    case PEAT_OP_ADAMW:
    case PEAT_OP_SGD:
        set(p, 2, (int64_t[]){16 * n * n + a, 1});
        p->f[0] = 1e-3, p->f[1] = 0.9, p->f[2] = 0.999, p->f[3] = 1e-8, p->f[4] = 0.01;
        break;
    default: /* elementwise */
        set(p, 1, (int64_t[]){16 * n * n + a});
        break;
    }
}

static void shape(int *nd, int64_t s[][PEAT_MAX_DIMS], peat_dtype *dt, int *k, int d, int64_t a,
                  int64_t b, int64_t c, int64_t e, peat_dtype t)
{
    nd[*k] = d;
    s[*k][0] = a, s[*k][1] = b, s[*k][2] = c, s[*k][3] = e;
    dt[*k] = t;
    (*k)++;
}

/* Inputs of the ops with a GEMM view (GEMM, conv2d family, attention); 0 for the others. */
static int compute_inputs(peat_op_kind op, const peat_op_params *p, int *nd,
                          int64_t s[][PEAT_MAX_DIMS], peat_dtype *dt, int *k)
{
    const int64_t *i = p->i;
    const peat_dtype F = PEAT_DTYPE_F32;
    int64_t oh = (i[2] + 2 * i[8] - i[5]) / (i[7] > 0 ? i[7] : 1) + 1;
    int64_t ow = (i[3] + 2 * i[8] - i[6]) / (i[7] > 0 ? i[7] : 1) + 1;
    switch (op) {
    case PEAT_OP_GEMM:
        shape(nd, s, dt, k, 3, i[5], i[0] ? i[4] : i[2], i[0] ? i[2] : i[4], 0, F);
        shape(nd, s, dt, k, 3, i[5], i[1] ? i[3] : i[4], i[1] ? i[4] : i[3], 0, F);
        if (p->f[1] != 0.0) shape(nd, s, dt, k, 3, i[5], i[2], i[3], 0, F);
        return 1;
    case PEAT_OP_CONV2D:
        shape(nd, s, dt, k, 4, i[0], i[1], i[2], i[3], F);
        shape(nd, s, dt, k, 4, i[4], i[1], i[5], i[6], F);
        return 1;
    case PEAT_OP_CONV2D_BWD_DATA:
        shape(nd, s, dt, k, 4, i[0], i[4], oh, ow, F);
        shape(nd, s, dt, k, 4, i[4], i[1], i[5], i[6], F);
        return 1;
    case PEAT_OP_CONV2D_BWD_FILTER:
        shape(nd, s, dt, k, 4, i[0], i[1], i[2], i[3], F);
        shape(nd, s, dt, k, 4, i[0], i[4], oh, ow, F);
        return 1;
    case PEAT_OP_ATTENTION:
    case PEAT_OP_ATTENTION_BWD: /* Q K V (O L dO) */
        for (int r = 0; r < 3; r++) shape(nd, s, dt, k, 4, i[0], i[1], i[2], i[3], F);
        if (op == PEAT_OP_ATTENTION_BWD) {
            shape(nd, s, dt, k, 4, i[0], i[1], i[2], i[3], F);
            shape(nd, s, dt, k, 3, i[0], i[1], i[2], 0, F);
            shape(nd, s, dt, k, 4, i[0], i[1], i[2], i[3], F);
        }
        return 1;
    default:
        return 0;
    }
}

void peat_predictor_inputs(peat_op_kind op, const peat_op_params *p, int *n_in, int nd[],
                           int64_t s[][PEAT_MAX_DIMS], peat_dtype dt[])
{
    const int64_t *i = p->i;
    const peat_dtype F = PEAT_DTYPE_F32, I = PEAT_DTYPE_I32;
    int k = 0;
    if (compute_inputs(op, p, nd, s, dt, &k)) {
        *n_in = k;
        return;
    }
    switch (op) {
    case PEAT_OP_BIAS_ADD:
        shape(nd, s, dt, &k, 3, i[0], i[1], i[2], 0, F);
        shape(nd, s, dt, &k, 1, i[1], 0, 0, 0, F);
        break;
    case PEAT_OP_BIAS_ADD_BWD:
        shape(nd, s, dt, &k, 3, i[0], i[1], i[2], 0, F);
        break;
    case PEAT_OP_RELU:
    case PEAT_OP_GELU:
        shape(nd, s, dt, &k, 1, i[0], 0, 0, 0, F);
        break;
    case PEAT_OP_RELU_BWD:
    case PEAT_OP_GELU_BWD:
        for (int r = 0; r < 2; r++) shape(nd, s, dt, &k, 1, i[0], 0, 0, 0, F);
        break;
    case PEAT_OP_SOFTMAX:
    case PEAT_OP_REDUCE:
        shape(nd, s, dt, &k, 2, i[0], i[1], 0, 0, F);
        break;
    case PEAT_OP_SOFTMAX_BWD:
        for (int r = 0; r < 2; r++) shape(nd, s, dt, &k, 2, i[0], i[1], 0, 0, F);
        break;
    case PEAT_OP_LAYERNORM:
        shape(nd, s, dt, &k, 2, i[0], i[1], 0, 0, F);
        for (int r = 0; r < 2; r++) shape(nd, s, dt, &k, 1, i[1], 0, 0, 0, F);
        break;
    case PEAT_OP_LAYERNORM_BWD: /* X, gamma, mean, rstd, dY */
        shape(nd, s, dt, &k, 2, i[0], i[1], 0, 0, F);
        shape(nd, s, dt, &k, 1, i[1], 0, 0, 0, F);
        for (int r = 0; r < 2; r++) shape(nd, s, dt, &k, 1, i[0], 0, 0, 0, F);
        shape(nd, s, dt, &k, 2, i[0], i[1], 0, 0, F);
        break;
    case PEAT_OP_EMBEDDING:
        shape(nd, s, dt, &k, 2, i[1], i[2], 0, 0, F);
        shape(nd, s, dt, &k, 1, i[0], 0, 0, 0, I);
        break;
    case PEAT_OP_EMBEDDING_BWD:
        shape(nd, s, dt, &k, 1, i[0], 0, 0, 0, I);
        shape(nd, s, dt, &k, 2, i[0], i[2], 0, 0, F);
        break;
    case PEAT_OP_CROSS_ENTROPY:
    case PEAT_OP_CROSS_ENTROPY_BWD:
        shape(nd, s, dt, &k, 2, i[0], i[1], 0, 0, F);
        shape(nd, s, dt, &k, 1, i[0], 0, 0, 0, I);
        if (op == PEAT_OP_CROSS_ENTROPY_BWD) shape(nd, s, dt, &k, 1, i[0], 0, 0, 0, F);
        break;
    case PEAT_OP_ADAMW:
    case PEAT_OP_SGD:
        for (int r = 0; r < (op == PEAT_OP_ADAMW ? 4 : 3); r++)
            shape(nd, s, dt, &k, 1, i[0], 0, 0, 0, F);
        break;
    default:
        break;
    }
    *n_in = k;
}

/* Valid contents: indices inside their range, positive rstd and v, finite logsumexp. */
static void fill(peat_rng_t *r, peat_op_kind op, const peat_op_params *p, int idx, peat_tensor *t)
{
    if (t->dtype == PEAT_DTYPE_I32) {
        int64_t range = p->i[1]; /* vocabulary or classes */
        for (int64_t e = 0; e < peat_tensor_numel(t); e++)
            peat_i32(t)[e] = (int32_t)peat_rng_int(r, (uint64_t)range);
        return;
    }
    int positive = (op == PEAT_OP_LAYERNORM_BWD && idx == 3) || (op == PEAT_OP_ADAMW && idx == 3);
    peat_rng_fill_uniform(r, t, positive ? 0.5 : -1.0, positive ? 1.5 : 1.0);
}

peat_status peat_predictor_call_alloc(const peat_kernel *k, const peat_op_params *p, uint64_t seed,
                                      peat_pred_call *c)
{
    memset(c, 0, sizeof *c);
    int nd[PEAT_MAX_IO], n_in = 0;
    int64_t s[PEAT_MAX_IO][PEAT_MAX_DIMS];
    peat_dtype dt[PEAT_MAX_IO];
    peat_predictor_inputs(k->op, p, &n_in, nd, s, dt);
    peat_rng_t *r = peat_rng_new(seed);
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "rng");
    peat_status st = PEAT_OK;
    double bytes = 0;
    for (int i = 0; st == PEAT_OK && i < n_in; i++) {
        st = peat_tensor_alloc(dt[i], nd[i], s[i], &c->in[i]);
        if (st == PEAT_OK) fill(r, k->op, p, i, c->in[i]);
        if (st == PEAT_OK) bytes += (double)peat_tensor_nbytes(c->in[i]);
    }
    /* further input sets for CPU kernels (device kernels stage their inputs per call) */
    c->n_sets = 1;
    if (st == PEAT_OK && bytes > 0 && (!k->backend || peat_backend_on_host(k->backend)))
        c->n_sets = (int)fmin(PEAT_PRED_SETS, ceil(PEAT_PRED_VARY_BYTES / bytes));
    for (int i = 0; st == PEAT_OK && c->n_sets > 1 && i < n_in; i++) {
        st = peat_tensor_alloc1(dt[i], c->n_sets * peat_tensor_numel(c->in[i]), &c->pool[i]);
        if (st == PEAT_OK) fill(r, k->op, p, i, c->pool[i]);
        /* set 0: the values the call was made with */
        if (st == PEAT_OK) memcpy(c->pool[i]->data, c->in[i]->data, peat_tensor_nbytes(c->in[i]));
    }
    peat_rng_free(r);
    c->a = peat_args_make(k->op, p, n_in, (const peat_tensor *const *)c->in, 0, NULL);
    if (st == PEAT_OK) st = peat_op_alloc_outputs(&c->a, k->out_dtype);
    if (st != PEAT_OK) peat_predictor_call_free(c);
    return st;
}

void peat_predictor_call_free(peat_pred_call *c)
{
    peat_args_free_outputs(&c->a);
    for (int i = 0; i < PEAT_MAX_IO; i++) peat_tensor_free(c->in[i]), peat_tensor_free(c->pool[i]);
    memset(c, 0, sizeof *c);
}
