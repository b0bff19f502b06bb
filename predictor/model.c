/* model.c: the latency model: GEMM views of ops, tile and wave arithmetic, bytes moved, the
 * compute/memory classing rule, and prediction of one call from a calibration table. */
#include "predictor/predictor.h"
#include "core/opdesc.h"

#include <math.h>

static int64_t ceil_div(int64_t a, int64_t b)
{
    return b > 0 ? (a + b - 1) / b : a;
}

int peat_predictor_gemm_view(peat_op_kind op, const peat_op_params *p, peat_pred_gemm_view *v)
{
    const peat_op_desc *d = peat_op_desc_get(op);
    peat_op_gemm_view g = {0, 0, 0, 0, 1.0};
    v->scale = 1.0;
    if (!d || !d->gemm_view(p, &g)) return 0;
    v->batch = g.batch, v->m = g.m, v->n = g.n, v->k = g.k, v->scale = g.scale;
    return 1;
}

peat_status peat_predictor_waves(const peat_kernel_config *cfg, const peat_pred_device *d,
                                 const peat_pred_gemm_view *v, peat_pred_waves *w)
{
    if (v->batch < 1 || v->m < 1 || v->n < 1 || v->k < 1)
        return PEAT_ERROR(PEAT_ERR_INVAL, "predictor: empty GEMM view");
    int64_t tm = cfg->tile_m > 0 ? cfg->tile_m : 1, tn = cfg->tile_n > 0 ? cfg->tile_n : 1;
    /* a kernel computes whole vectors: the N extent is rounded up to its vector width */
    int64_t vw = cfg->vec_width > 1 ? cfg->vec_width : 1;
    int64_t n = ceil_div(v->n, vw) * vw;
    /* units: a GPU grid's resident blocks; a CPU kernel's threads (undeclared = the caller's) */
    int64_t units;
    if (d->edge_tiles_padded)
        units = (int64_t)d->units * (cfg->blocks_per_sm > 0 ? cfg->blocks_per_sm : 1);
    else
        units = cfg->threads > 1 ? (cfg->threads < d->units ? cfg->threads : d->units) : 1;
    if (units < 1) units = 1;
    w->tiles = v->batch * ceil_div(v->m, tm) * ceil_div(n, tn);
    w->units = units;
    w->waves = ceil_div(w->tiles, units);
    w->tile_flops = 2.0 * (double)tm * (double)tn * (double)v->k * v->scale;
    if (d->edge_tiles_padded) {
        /* a partial tile keeps its whole block busy */
        w->work = (double)w->waves * w->tile_flops;
    } else {
        /* loops trimmed at the edges: a unit's share of the (vector-rounded) work, per wave */
        double total = 2.0 * (double)v->batch * (double)v->m * (double)n * (double)v->k * v->scale;
        w->work = (double)w->waves * total / (double)w->tiles;
    }
    return PEAT_OK;
}

static int64_t prod(int nd, const int64_t *s)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= s[d];
    return n;
}

double peat_predictor_call_bytes(const peat_kernel *k, const peat_op_params *p)
{
    peat_args a;
    memset(&a, 0, sizeof a);
    a.op = k->op;
    a.p = *p;
    const peat_op_info *info = peat_op_info_get(k->op);
    int nd[PEAT_MAX_IO];
    int64_t s[PEAT_MAX_IO][PEAT_MAX_DIMS];
    double bytes = 0;
    if (info && info->out_shapes && info->out_shapes(&a, nd, s) == PEAT_OK)
        for (int o = 0; o < info->n_out; o++)
            bytes += (double)prod(nd[o], s[o]) * (double)peat_dtype_size(k->out_dtype);
    int n_in = 0;
    int64_t in_shapes[PEAT_MAX_IO][PEAT_MAX_DIMS];
    int in_nd[PEAT_MAX_IO];
    peat_dtype in_dt[PEAT_MAX_IO];
    peat_predictor_inputs(k->op, p, &n_in, in_nd, in_shapes, in_dt);
    for (int i = 0; i < n_in; i++) bytes += (double)prod(in_nd[i], in_shapes[i]) * 4.0;
    return bytes;
}

peat_pred_class peat_predictor_classify(const peat_kernel *k, const peat_op_params *p,
                                        const peat_pred_device *d)
{
    peat_pred_gemm_view v;
    if (!peat_predictor_gemm_view(k->op, p, &v)) return PEAT_PRED_MEMORY;
    const peat_op_info *info = peat_op_info_get(k->op);
    double flops = info && info->flops ? info->flops(p) : 0.0;
    double bytes = peat_predictor_call_bytes(k, p);
    double ridge = d->bandwidth > 0 ? d->peak_flops / d->bandwidth : 0.0;
    return bytes > 0 && flops / bytes >= ridge ? PEAT_PRED_COMPUTE : PEAT_PRED_MEMORY;
}

double peat_predictor_x(const peat_kernel *k, const peat_pred_device *d, peat_pred_class cls,
                        const peat_op_params *p)
{
    peat_pred_gemm_view v;
    peat_pred_waves w;
    if (cls == PEAT_PRED_COMPUTE && peat_predictor_gemm_view(k->op, p, &v) &&
        peat_predictor_waves(&k->cfg, d, &v, &w) == PEAT_OK)
        return w.work;
    return peat_predictor_call_bytes(k, p);
}

peat_status peat_predictor_call(const peat_pred_table *t, const peat_kernel *k,
                                const peat_op_params *p, double clock_mhz, double *seconds)
{
    const peat_pred_ktable *kt = peat_predictor_table_find(t, k);
    if (!kt)
        return PEAT_ERROR(PEAT_ERR_NOTFOUND,
                          "kernel '%s' is not calibrated on this device (run peat "
                          "calibrate-latency)",
                          k->name);
    double x = peat_predictor_x(k, &t->dev, kt->cls, p);
    double s = peat_predictor_ktable_eval(kt, x);
    /* compute time follows the core clock; launch overhead and memory traffic do not */
    if (kt->cls == PEAT_PRED_COMPUTE && clock_mhz > 0 && kt->clock_mhz > 0)
        s = kt->overhead_s + (s - kt->overhead_s) * kt->clock_mhz / clock_mhz;
    *seconds = s;
    return PEAT_OK;
}
