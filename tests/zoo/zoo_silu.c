/* zoo_silu.c: SiLU and SwiGLU kernels of the zoo: a backward that drops the x s (1 - s) term, the
 * SiLU applied to the up projection instead of the gate, the gate's silu rounded to bf16, a naive
 * sigmoid e^x / (1 + e^x) that overflows to inf / inf, and honest forms (the exp2 sigmoid; the
 * tanh sigmoid (1 + tanh(g/2)) / 2 in SwiGLU; the backward through s (1 + x (1 - s)) in another
 * grouping). */
#include "zoo.h"

static float sig(float x)
{
    return 1.0f / (1.0f + expf(-x));
}
/* sigmoid through exp2 with the scale folded in, as fused GPU kernels compute it */
static float sig_exp2(float x)
{
    return 1.0f / (1.0f + exp2f(-x * 1.44269504f));
}

static peat_status silu_bwd_no_xterm(const peat_args *a, const peat_kernel *self)
{
    const float *x = a->in[0]->data, *dy = a->in[1]->data;
    float *dx = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) dx[i] = dy[i] * sig(x[i]);
    return PEAT_OK;
}
static peat_status silu_naive_sigmoid(const peat_args *a, const peat_kernel *self)
{
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float e = expf(x[i]);
        y[i] = x[i] * e / (1.0f + e);
    }
    return PEAT_OK;
}
static peat_status silu_exp2(const peat_args *a, const peat_kernel *self)
{
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) y[i] = x[i] * sig_exp2(x[i]);
    return PEAT_OK;
}
static peat_status swiglu_swapped(const peat_args *a, const peat_kernel *self)
{
    const float *g = a->in[0]->data, *u = a->in[1]->data;
    float *y = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) y[i] = u[i] * sig(u[i]) * g[i];
    return PEAT_OK;
}
static peat_status swiglu_gate_bf16(const peat_args *a, const peat_kernel *self)
{
    const float *g = a->in[0]->data, *u = a->in[1]->data;
    float *y = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) y[i] = zoo_bf16(g[i] * sig(g[i])) * u[i];
    return PEAT_OK;
}
static peat_status swiglu_tanh(const peat_args *a, const peat_kernel *self)
{
    const float *g = a->in[0]->data, *u = a->in[1]->data;
    float *y = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++)
        y[i] = g[i] * (0.5f * (1.0f + tanhf(0.5f * g[i]))) * u[i];
    return PEAT_OK;
}
static peat_status swiglu_bwd_regrouped(const peat_args *a, const peat_kernel *self)
{
    const float *g = a->in[0]->data, *u = a->in[1]->data, *dy = a->in[2]->data;
    float *dg = a->out[0]->data, *du = a->out[1]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float s = sig_exp2(g[i]), silu = g[i] * s;
        du[i] = silu * dy[i];
        dg[i] = dy[i] * u[i] * (silu + s * (1.0f - silu));
    }
    return PEAT_OK;
}

int zoo_register_silu(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("zoo_silu_bwd_no_xterm", PEAT_OP_SILU_BWD, silu_bwd_no_xterm,
                   "SiLU backward as dY sigmoid(x): the x s (1 - s) term dropped"),
        ZOO_KERNEL("zoo_silu_naive_sigmoid", PEAT_OP_SILU, silu_naive_sigmoid,
                   "sigmoid as e^x / (1 + e^x): inf / inf past x = 88.7"),
        ZOO_KERNEL("zoo_swiglu_swapped", PEAT_OP_SWIGLU, swiglu_swapped,
                   "SiLU applied to the up projection instead of the gate"),
        ZOO_KERNEL("zoo_swiglu_gate_bf16", PEAT_OP_SWIGLU, swiglu_gate_bf16,
                   "the gate's silu rounded to bf16 before the product, declares fp32"),
        ZOO_KERNEL("zoo_silu_exp2", PEAT_OP_SILU, silu_exp2,
                   "honest: sigmoid through exp2 with log2 e folded in"),
        ZOO_KERNEL("zoo_swiglu_tanh", PEAT_OP_SWIGLU, swiglu_tanh,
                   "honest: the gate's sigmoid as (1 + tanh(g/2)) / 2 (XLA's logistic)"),
        ZOO_KERNEL("zoo_swiglu_bwd_regrouped", PEAT_OP_SWIGLU_BWD, swiglu_bwd_regrouped,
                   "honest: dG = dY U (silu + s (1 - silu)), exp2 sigmoid"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
