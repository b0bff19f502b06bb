/* magnitude.c: the rounding-bound rule of a call's output, from its op's descriptor
 * (core/ops/<op>.c: docs/ops.md has the table, docs/bounds.md the derivations). */
#include "core/opdesc.h"
#include "golden/golden.h"

peat_status peat_golden_magnitude(const peat_args *a, int o, const peat_tensor *exact_out,
                                  double *mag)
{
    const peat_op_desc *d = peat_op_desc_get(a->op);
    if (!d) return PEAT_ERROR(PEAT_ERR_INVAL, "op kind %d out of range", (int)a->op);
    const peat_op_info *info = &d->info;
    if (o < 0 || o >= info->n_out)
        return PEAT_ERROR(PEAT_ERR_INVAL, "%s has no output %d", info->name, o);
    peat_args chk = *a;
    chk.n_out = 0; /* only the inputs are needed here */
    PEAT_TRY(peat_op_check(&chk));
    int nd[PEAT_MAX_IO] = {0};
    int64_t shp[PEAT_MAX_IO][PEAT_MAX_DIMS] = {{0}};
    PEAT_TRY(info->out_shapes(a, nd, shp));
    int64_t n = 1;
    for (int k = 0; k < nd[o]; k++) n *= shp[o][k];
    peat_op_mag_in in;
    PEAT_TRY(peat_op_mag_in_load(a, &in));
    peat_status s = d->magnitude(a, o, &in, n, exact_out, mag);
    peat_op_mag_in_free(&in);
    return s;
}

int64_t peat_golden_terms(const peat_args *a, int o)
{
    const peat_op_desc *d = peat_op_desc_get(a->op);
    if (!d) return 1;
    int64_t depth = d->info.depth(&a->p), t = d->terms(&a->p, o, depth);
    if (t < 1) t = 1;
    return t > depth ? depth : t;
}
