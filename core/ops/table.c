/* table.c: the op table: one line per op kind, pointing at its descriptor file (core/ops/), and
 * the check that every op has every trait. */
#include "core/opdesc.h"

#include <stdio.h>
#include <string.h>

/* One line per op kind: its descriptor peat_opd_<name> (core/ops/<file>.c) and its enum value. */
#define PEAT_OP_TABLE(X)                                                                           \
    X(gemm, GEMM)                                                                                  \
    X(conv2d, CONV2D)                                                                              \
    X(conv2d_bwd_data, CONV2D_BWD_DATA)                                                            \
    X(conv2d_bwd_filter, CONV2D_BWD_FILTER)                                                        \
    X(bias_add, BIAS_ADD)                                                                          \
    X(bias_add_bwd, BIAS_ADD_BWD)                                                                  \
    X(relu, RELU)                                                                                  \
    X(relu_bwd, RELU_BWD)                                                                          \
    X(gelu, GELU)                                                                                  \
    X(gelu_bwd, GELU_BWD)                                                                          \
    X(softmax, SOFTMAX)                                                                            \
    X(softmax_bwd, SOFTMAX_BWD)                                                                    \
    X(layernorm, LAYERNORM)                                                                        \
    X(layernorm_bwd, LAYERNORM_BWD)                                                                \
    X(attention, ATTENTION)                                                                        \
    X(attention_bwd, ATTENTION_BWD)                                                                \
    X(embedding, EMBEDDING)                                                                        \
    X(embedding_bwd, EMBEDDING_BWD)                                                                \
    X(cross_entropy, CROSS_ENTROPY)                                                                \
    X(cross_entropy_bwd, CROSS_ENTROPY_BWD)                                                        \
    X(adamw, ADAMW)                                                                                \
    X(sgd, SGD)                                                                                    \
    X(reduce, REDUCE)                                                                              \
    X(rmsnorm, RMSNORM)                                                                            \
    X(rmsnorm_bwd, RMSNORM_BWD)                                                                    \
    X(silu, SILU)                                                                                  \
    X(silu_bwd, SILU_BWD)                                                                          \
    X(swiglu, SWIGLU)                                                                              \
    X(swiglu_bwd, SWIGLU_BWD)                                                                      \
    X(rope, ROPE)                                                                                  \
    X(rope_bwd, ROPE_BWD)                                                                          \
    X(batchnorm, BATCHNORM)                                                                        \
    X(batchnorm_bwd, BATCHNORM_BWD)                                                                \
    X(maxpool2d, MAXPOOL2D)                                                                        \
    X(maxpool2d_bwd, MAXPOOL2D_BWD)                                                                \
    X(avgpool2d, AVGPOOL2D)                                                                        \
    X(avgpool2d_bwd, AVGPOOL2D_BWD)                                                                \
    X(gemm_fp8, GEMM_FP8)

#define DECLARE(name, kind) extern const peat_op_desc peat_opd_##name;
PEAT_OP_TABLE(DECLARE)
#undef DECLARE

#define ROW(name, kind) [PEAT_OP_##kind] = &peat_opd_##name,
static const peat_op_desc *const table[PEAT_OP_COUNT] = {PEAT_OP_TABLE(ROW)};
#undef ROW

const peat_op_desc *peat_op_desc_get(peat_op_kind op)
{
    if ((int)op < 0 || op >= PEAT_OP_COUNT) return NULL;
    return table[op];
}

static void missing(char *buf, size_t cap, const char *trait)
{
    size_t n = strlen(buf);
    snprintf(buf + n, cap > n ? cap - n : 0, "%s%s", n ? "," : "", trait);
}

const char *peat_op_desc_missing(peat_op_kind op, char *buf, size_t cap)
{
    if (cap) buf[0] = 0;
    const peat_op_desc *d = peat_op_desc_get(op);
    if (!d) {
        snprintf(buf, cap, "descriptor");
        return buf;
    }
    const peat_op_info *i = &d->info;
#define NEED(cond, name)                                                                           \
    if (!(cond)) missing(buf, cap, name)
    NEED(i->op == op, "op");
    NEED(i->name && i->name[0], "name");
    NEED(i->n_in_min >= 1 && i->n_in_max >= i->n_in_min && i->n_in_max <= PEAT_MAX_IO, "arity");
    NEED(i->n_out >= 1 && i->n_out <= PEAT_MAX_IO, "outputs");
    NEED(i->check, "check");
    NEED(i->out_shapes, "out_shapes");
    NEED(i->depth, "depth");
    NEED(i->flops, "flops");
    NEED(d->magnitude, "magnitude");
    NEED(d->terms, "terms");
    NEED(d->probes, "probes");
    NEED(d->perm, "perm");
    NEED(d->integers, "integers");
    NEED(d->invariant, "invariant");
    NEED(d->cal_params, "cal_params");
    NEED(d->input_shapes, "input_shapes");
    NEED(d->gemm_view, "gemm_view");
    NEED(d->amp_masks, "amp_masks");
    NEED(d->aten, "aten");
#undef NEED
    return buf;
}
