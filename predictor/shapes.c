/* shapes.c: synthetic calls for calibration: one size family per op (params from a size n) and
 * the op's input shapes, from its descriptor (core/ops/<op>.c), and inputs filled with valid
 * random values. */
#include "predictor/predictor.h"
#include "core/opdesc.h"
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

void peat_predictor_shape(peat_op_kind op, int n, int odd, peat_op_params *p)
{
    const peat_op_desc *d = peat_op_desc_get(op);
    memset(p, 0, sizeof *p);
    if (d) d->cal_params(n, odd ? 1 : 0, p);
}

void peat_predictor_inputs(peat_op_kind op, const peat_op_params *p, int *n_in, int nd[],
                           int64_t s[][PEAT_MAX_DIMS], peat_dtype dt[])
{
    const peat_op_desc *d = peat_op_desc_get(op);
    *n_in = 0;
    if (d) d->input_shapes(p, n_in, nd, s, dt);
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
    const peat_op_desc *d = peat_op_desc_get(op);
    int positive = d && (d->positive_inputs >> idx & 1u);
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
