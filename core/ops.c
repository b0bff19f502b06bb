/* ops.c: the op kinds' public interface: names, checks and output allocation, read from the op
 * table (core/ops/table.c: one descriptor file per op kind). */
#include "core/opdesc.h"

#include <stdio.h>
#include <string.h>

const peat_op_info *peat_op_info_get(peat_op_kind op)
{
    const peat_op_desc *d = peat_op_desc_get(op);
    return d ? &d->info : NULL;
}

const char *peat_op_aten(peat_op_kind op)
{
    const peat_op_desc *d = peat_op_desc_get(op);
    return d ? d->aten : NULL;
}

const char *peat_op_name(peat_op_kind op)
{
    const peat_op_info *i = peat_op_info_get(op);
    return i ? i->name : "?";
}

peat_status peat_op_parse(const char *name, peat_op_kind *out)
{
    for (int k = 0; k < PEAT_OP_COUNT; k++)
        if (name && strcmp(peat_op_name((peat_op_kind)k), name) == 0) {
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
