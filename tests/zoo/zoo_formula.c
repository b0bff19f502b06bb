/* zoo_formula.c: formula errors of moderate size: each kernel computes, reproducibly and for
 * every element, a function other than its op's (AdamW's second-moment correction, layernorm's
 * variance divisor, softmax's exponential base, GELU's tanh constant). No format or rounding
 * mode explains them. */
#include "zoo.h"

/* AdamW dividing sqrt(v) by bc2 instead of sqrt(bc2): the update is 1/sqrt(bc2) times too small
 * (31.6x at step 1 with beta2 = 0.999, 4x by step ~60). */
static peat_status adamw_bc2(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t n = a->p.i[0], t = a->p.i[1];
    float lr = (float)a->p.f[0], b1 = (float)a->p.f[1], b2 = (float)a->p.f[2];
    float eps = (float)a->p.f[3], wd = (float)a->p.f[4];
    float bc1 = (float)(1.0 - pow(a->p.f[1], (double)t));
    float bc2 = (float)(1.0 - pow(a->p.f[2], (double)t));
    const float *pi = a->in[0]->data, *gi = a->in[1]->data, *mi = a->in[2]->data,
                *vi = a->in[3]->data;
    float *po = a->out[0]->data, *mo = a->out[1]->data, *vo = a->out[2]->data;
    for (int64_t i = 0; i < n; i++) {
        float p = pi[i], g = gi[i];
        float m = b1 * mi[i] + (1.0f - b1) * g, v = b2 * vi[i] + (1.0f - b2) * g * g;
        float denom = sqrtf(v) / bc2 + eps; /* the bug: sqrt(v / bc2) is meant */
        po[i] = p - lr * ((m / bc1) / denom + wd * p);
        mo[i] = m, vo[i] = v;
    }
    return PEAT_OK;
}

/* Layernorm with the unbiased variance (divisor C - 1, torch.var's default) where the op takes
 * the biased one (divisor C): rstd sqrt((C-1)/C) too small, every output scaled by it. */
static peat_status layernorm_unbiased(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    float eps = (float)a->p.f[0];
    const float *gm = a->in[1]->data, *bt = a->in[2]->data;
    for (int64_t i = 0; i < R; i++) {
        const float *x = (const float *)a->in[0]->data + i * C;
        float *y = (float *)a->out[0]->data + i * C;
        float s = 0.0f, v = 0.0f;
        for (int64_t j = 0; j < C; j++) s += x[j];
        float mean = s / (float)C;
        for (int64_t j = 0; j < C; j++) v += (x[j] - mean) * (x[j] - mean);
        float rstd = 1.0f / sqrtf(v / (float)(C - 1) + eps);
        for (int64_t j = 0; j < C; j++) y[j] = (x[j] - mean) * rstd * gm[j] + bt[j];
        ((float *)a->out[1]->data)[i] = mean;
        ((float *)a->out[2]->data)[i] = rstd;
    }
    return PEAT_OK;
}

/* Softmax through exp2f without the log2(e) factor: softmax(x ln 2), too flat. */
static peat_status softmax_exp2(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    for (int64_t i = 0; i < R; i++) {
        const float *x = (const float *)a->in[0]->data + i * C;
        float *y = (float *)a->out[0]->data + i * C;
        float mx = -INFINITY, s = 0.0f;
        for (int64_t j = 0; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) s += y[j] = exp2f(x[j] - mx);
        for (int64_t j = 0; j < C; j++) y[j] /= s;
    }
    return PEAT_OK;
}

/* GELU's tanh form with 2/sqrt(pi) (1.128) where sqrt(2/pi) (0.798) belongs. */
static peat_status gelu_wrong_const(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(1.1283792f * (v + 0.044715f * v * v * v)));
    }
    return PEAT_OK;
}

int zoo_register_formula(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("zoo_adamw_bc2", PEAT_OP_ADAMW, adamw_bc2,
                   "AdamW dividing sqrt(v) by bc2 instead of sqrt(bc2)"),
        ZOO_KERNEL("zoo_layernorm_unbiased", PEAT_OP_LAYERNORM, layernorm_unbiased,
                   "layernorm with the unbiased (C - 1) variance"),
        ZOO_KERNEL("zoo_softmax_exp2", PEAT_OP_SOFTMAX, softmax_exp2,
                   "softmax through exp2 without the log2(e) factor"),
        ZOO_KERNEL("zoo_gelu_wrong_const", PEAT_OP_GELU, gelu_wrong_const,
                   "tanh GELU with 2/sqrt(pi) for sqrt(2/pi)"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
