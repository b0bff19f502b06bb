/* amp.c: mixed-precision training of the flows as autocast and GradScaler do it: fp16 or bf16
 * inputs and outputs of the GEMM-shaped ops, fp32 elsewhere, dynamic loss scaling for fp16. */
#include "models/flow_impl.h"

#include <math.h>
#include <string.h>

static const char *const precision_names[PEAT_PRECISIONS] = {"fp32", "amp-fp16", "bf16"};

const char *peat_flow_precision_name(int precision)
{
    return precision >= 0 && precision < PEAT_PRECISIONS ? precision_names[precision] : "?";
}

peat_status peat_flow_precision_parse(const char *name, int *precision)
{
    for (int p = 0; p < PEAT_PRECISIONS; p++)
        if (name && strcmp(name, precision_names[p]) == 0) {
            *precision = p;
            return PEAT_OK;
        }
    return PEAT_ERROR(PEAT_ERR_INVAL, "unknown precision '%s' (fp32, amp-fp16 or bf16)",
                      name ? name : "");
}

float peat_models_amp_round(const peat_flow_t *f, float x)
{
    switch (f->cfg.precision) {
    case PEAT_PRECISION_AMP_FP16:
        return peat_round_f16(x);
    case PEAT_PRECISION_BF16:
        return peat_round_bf16(x);
    default:
        return x;
    }
}

/* Which inputs autocast casts to half (bit i) and which outputs it returns in half (bit i) for
 * an op on its lower-precision list; 0 and 0 for ops it runs in fp32 (softmax, layernorm, the
 * loss, the optimizer) or leaves in their input's type (elementwise ops: they run in fp32 on the
 * half values they are given; docs/flows.md). */
static void cast_masks(const peat_args *a, unsigned *in, unsigned *out)
{
    *in = *out = 0;
    switch (a->op) {
    case PEAT_OP_GEMM:
        /* A and B; a fused residual C stays fp32 and so does D = AB + C (half + fp32 is fp32) */
        *in = 0x3u;
        *out = a->n_in > 2 ? 0u : 0x1u;
        break;
    case PEAT_OP_CONV2D:
    case PEAT_OP_CONV2D_BWD_DATA:
    case PEAT_OP_CONV2D_BWD_FILTER:
        *in = 0x3u, *out = 0x1u;
        break;
    case PEAT_OP_ATTENTION:
        *in = 0x7u, *out = 0x1u;
        break; /* Q K V -> O; the row stats fp32 */
    case PEAT_OP_ATTENTION_BWD:
        *in = 0x2fu, *out = 0x7u;
        break; /* Q K V O dO -> dQ dK dV */
    default:
        break;
    }
}

/* A rounded copy of t in scratch slot k (reallocated when its shape differs). */
static peat_status cast_copy(peat_flow_t *f, int k, const peat_tensor *t, const peat_tensor **out)
{
    peat_tensor *c = f->amp.cast[k];
    if (!c || c->ndim != t->ndim || memcmp(c->shape, t->shape, sizeof(int64_t) * t->ndim) != 0) {
        peat_tensor_free(c);
        f->amp.cast[k] = NULL;
        PEAT_TRY(peat_tensor_alloc(PEAT_DTYPE_F32, t->ndim, t->shape, &f->amp.cast[k]));
        c = f->amp.cast[k];
    }
    const float *x = peat_f32(t);
    float *y = peat_f32(c);
    for (int64_t i = 0, n = peat_tensor_numel(t); i < n; i++) y[i] = peat_models_amp_round(f, x[i]);
    *out = c;
    return PEAT_OK;
}

peat_status peat_models_exec(peat_flow_t *f, const char *layer, peat_phase ph, peat_args *a)
{
    unsigned in_mask = 0, out_mask = 0;
    if (f->cfg.precision != PEAT_PRECISION_FP32) cast_masks(a, &in_mask, &out_mask);
    for (int k = 0; k < a->n_in; k++)
        if ((in_mask >> k & 1u) && a->in[k] && a->in[k]->dtype == PEAT_DTYPE_F32)
            PEAT_TRY(cast_copy(f, k, a->in[k], &a->in[k]));
    PEAT_TRY(peat_exec_op(f->ex, layer, ph, a));
    for (int k = 0; k < a->n_out; k++)
        if ((out_mask >> k & 1u) && a->out[k] && a->out[k]->dtype == PEAT_DTYPE_F32) {
            float *y = peat_f32(a->out[k]);
            for (int64_t i = 0, n = peat_tensor_numel(a->out[k]); i < n; i++)
                y[i] = peat_models_amp_round(f, y[i]);
        }
    return PEAT_OK;
}

double peat_models_amp_loss_scale(const peat_flow_t *f)
{
    return f->cfg.precision == PEAT_PRECISION_AMP_FP16 ? f->amp.scale : 1.0;
}

/* GradScaler: growth factor 2, backoff 0.5 (the interval and the first scale are options). */
#define AMP_GROWTH  2.0
#define AMP_BACKOFF 0.5

int peat_models_amp_unscale_update(peat_flow_t *f)
{
    if (f->cfg.precision != PEAT_PRECISION_AMP_FP16) return 0;
    /* unscale_: every gradient times the fp32 reciprocal of the scale, inf/nan looked for in the
     * results */
    float inv = (float)(1.0 / f->amp.scale);
    int found_inf = 0;
    for (int i = 0; i < f->n_params; i++) {
        float *g = peat_f32(f->params[i]->g);
        for (int64_t e = 0, n = peat_tensor_numel(f->params[i]->g); e < n; e++) {
            g[e] *= inv;
            found_inf |= !isfinite(g[e]);
        }
    }
    /* update() */
    if (found_inf) {
        f->amp.scale *= AMP_BACKOFF;
        f->amp.tracker = 0;
        f->amp.skipped++;
    } else if (++f->amp.tracker >= f->cfg.loss_scale_interval) {
        f->amp.scale *= AMP_GROWTH;
        f->amp.tracker = 0;
    }
    return found_inf;
}

void peat_models_amp_free(peat_flow_t *f)
{
    for (int k = 0; k < PEAT_MAX_IO; k++) {
        peat_tensor_free(f->amp.cast[k]);
        f->amp.cast[k] = NULL;
    }
}

double peat_flow_loss_scale(const peat_flow_t *f)
{
    return f ? peat_models_amp_loss_scale(f) : 1.0;
}

int64_t peat_flow_skipped_steps(const peat_flow_t *f)
{
    return f ? f->amp.skipped : 0;
}
