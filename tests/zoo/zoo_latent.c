/* zoo_latent.c: latent range defects that the flows' small values never trigger and only the
 * probes reveal (expected RANGE: the error is an intermediate leaving fp32's range, Inf or NaN
 * where the op's value is finite): cross-entropy and its gradient without the max shift (exp
 * overflows once a logit passes ~88.7), cross-entropy as -log(softmax) (the target's probability
 * underflows to 0 once it trails the max by ~104), and a tanh-form GELU whose tanh is
 * (e^2y - 1) / (e^2y + 1) (Inf / Inf = NaN from |x| ~ 10). */
#include "zoo.h"

/* log(sum exp(x)) - x_t with no shift */
static peat_status xent_no_max(const peat_args *a, const peat_kernel *self)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = a->in[0]->data;
    const int32_t *t = a->in[1]->data;
    float *loss = a->out[0]->data;
    for (int64_t r = 0; r < R; r++) {
        float s = 0.0f;
        for (int64_t j = 0; j < C; j++) s += expf(x[r * C + j]);
        loss[r] = logf(s) - x[r * C + t[r]];
    }
    return PEAT_OK;
}

/* dloss (exp(x_j) / sum exp(x) - onehot) with no shift */
static peat_status xent_bwd_no_max(const peat_args *a, const peat_kernel *self)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = a->in[0]->data, *dl = a->in[2]->data;
    const int32_t *t = a->in[1]->data;
    float *dx = a->out[0]->data;
    for (int64_t r = 0; r < R; r++) {
        float s = 0.0f;
        for (int64_t j = 0; j < C; j++) s += expf(x[r * C + j]);
        for (int64_t j = 0; j < C; j++)
            dx[r * C + j] = dl[r] * (expf(x[r * C + j]) / s - (j == t[r] ? 1.0f : 0.0f));
    }
    return PEAT_OK;
}

/* -log(softmax(x)_t): max-shifted, but the probability is formed before the log */
static peat_status xent_log_of_softmax(const peat_args *a, const peat_kernel *self)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = a->in[0]->data;
    const int32_t *t = a->in[1]->data;
    float *loss = a->out[0]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        float mx = -INFINITY, s = 0.0f;
        for (int64_t j = 0; j < C; j++) mx = xr[j] > mx ? xr[j] : mx;
        for (int64_t j = 0; j < C; j++) s += expf(xr[j] - mx);
        loss[r] = -logf(expf(xr[t[r]] - mx) / s);
    }
    return PEAT_OK;
}

/* GELU 0.5 x (1 + tanh(y)), y = sqrt(2/pi)(x + 0.044715 x^3), tanh(y) = (e^2y - 1)/(e^2y + 1) */
static peat_status gelu_tanh_exp(const peat_args *a, const peat_kernel *self)
{
    const float *x = a->in[0]->data;
    float *out = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float v = x[i], y = 0.7978845608f * (v + 0.044715f * v * v * v), e = expf(2.0f * y);
        out[i] = 0.5f * v * (1.0f + (e - 1.0f) / (e + 1.0f));
    }
    return PEAT_OK;
}

int zoo_register_latent(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("zoo_xent_no_max", PEAT_OP_CROSS_ENTROPY, xent_no_max,
                   "log-sum-exp without the max shift: Inf past logit ~88.7"),
        ZOO_KERNEL("zoo_xent_bwd_no_max", PEAT_OP_CROSS_ENTROPY_BWD, xent_bwd_no_max,
                   "softmax gradient without the max shift: NaN past logit ~88.7"),
        ZOO_KERNEL("zoo_xent_log_of_softmax", PEAT_OP_CROSS_ENTROPY, xent_log_of_softmax,
                   "-log(softmax_t): Inf once the target trails the max by ~104"),
        ZOO_KERNEL("zoo_gelu_tanh_exp", PEAT_OP_GELU, gelu_tanh_exp,
                   "tanh GELU with tanh = (e^2y-1)/(e^2y+1): NaN from |x| ~ 10"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
