/* optim.c: exact (fp64) and golden (fp32) AdamW and SGD-with-momentum updates. */
#include "golden/golden.h"
#include "golden/refkit.h"

#include <math.h>

/* Optimizer outputs may alias their inputs (in-place update), so every kernel here reads all
 * inputs of element i before writing any output of element i, and touches no other element. */

/* ---- AdamW: i = n, t ; f = lr, beta1, beta2, eps, wd ; in p, g, m, v ; out p', m', v' ---- */

static peat_status adamw_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t n = a->p.i[0], t = a->p.i[1];
    double lr = a->p.f[0], b1 = a->p.f[1], b2 = a->p.f[2], eps = a->p.f[3], wd = a->p.f[4];
    double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
    double *po = peat_f64(a->out[0]), *mo = peat_f64(a->out[1]), *vo = peat_f64(a->out[2]);
    for (int64_t i = 0; i < n; i++) {
        double p = peat_tensor_get(a->in[0], i), g = peat_tensor_get(a->in[1], i);
        double m = peat_tensor_get(a->in[2], i), v = peat_tensor_get(a->in[3], i);
        m = b1 * m + (1.0 - b1) * g;
        v = b2 * v + (1.0 - b2) * g * g;
        double mhat = m / bc1, vhat = v / bc2;
        p = p - lr * (mhat / (sqrt(vhat) + eps) + wd * p);
        po[i] = p, mo[i] = m, vo[i] = v;
    }
    return PEAT_OK;
}

static peat_status adamw_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t n = a->p.i[0], t = a->p.i[1];
    /* Per-call scalars are formed in double and rounded once, as PyTorch's fp32 AdamW does, so
     * 1-beta2 is not the cancellation-ridden 1.0f-0.999f; the per-element math is pure fp32. */
    float lr = (float)a->p.f[0], b1 = (float)a->p.f[1], b2 = (float)a->p.f[2];
    float eps = (float)a->p.f[3], wd = (float)a->p.f[4];
    float c1 = (float)(1.0 - a->p.f[1]), c2 = (float)(1.0 - a->p.f[2]);
    float bc1 = (float)(1.0 - pow(a->p.f[1], (double)t));
    float bc2 = (float)(1.0 - pow(a->p.f[2], (double)t));
    const float *pi = peat_f32(a->in[0]), *gi = peat_f32(a->in[1]);
    const float *mi = peat_f32(a->in[2]), *vi = peat_f32(a->in[3]);
    float *po = peat_f32(a->out[0]), *mo = peat_f32(a->out[1]), *vo = peat_f32(a->out[2]);
    for (int64_t i = 0; i < n; i++) {
        float p = pi[i], g = gi[i], m = mi[i], v = vi[i];
        m = b1 * m + c1 * g;
        v = b2 * v + c2 * g * g;
        float mhat = m / bc1, vhat = v / bc2;
        p = p - lr * (mhat / (sqrtf(vhat) + eps) + wd * p);
        po[i] = p, mo[i] = m, vo[i] = v;
    }
    return PEAT_OK;
}

/* ---- SGD: i = n, nesterov ; f = lr, momentum, wd ; in p, g, mom ; out p', mom' ----
 * Nesterov (PyTorch's): the step is (g + wd p) + momentum mom' instead of mom'. */

static peat_status sgd_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t n = a->p.i[0];
    double lr = a->p.f[0], mu = a->p.f[1], wd = a->p.f[2];
    double *po = peat_f64(a->out[0]), *mo = peat_f64(a->out[1]);
    for (int64_t i = 0; i < n; i++) {
        double p = peat_tensor_get(a->in[0], i), g = peat_tensor_get(a->in[1], i);
        double m = peat_tensor_get(a->in[2], i);
        m = mu * m + g + wd * p;
        double d = a->p.i[1] ? (g + wd * p) + mu * m : m;
        po[i] = p - lr * d, mo[i] = m;
    }
    return PEAT_OK;
}

static peat_status sgd_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t n = a->p.i[0];
    float lr = (float)a->p.f[0], mu = (float)a->p.f[1], wd = (float)a->p.f[2];
    const float *pi = peat_f32(a->in[0]), *gi = peat_f32(a->in[1]), *mi = peat_f32(a->in[2]);
    float *po = peat_f32(a->out[0]), *mo = peat_f32(a->out[1]);
    for (int64_t i = 0; i < n; i++) {
        float p = pi[i], g = gi[i], m = mi[i];
        m = mu * m + g + wd * p;
        float d = a->p.i[1] ? (g + wd * p) + mu * m : m;
        po[i] = p - lr * d, mo[i] = m;
    }
    return PEAT_OK;
}

static const peat_kernel optim_kernels[] = {
    PEAT_GOLDEN_EXACT("adamw_exact", PEAT_OP_ADAMW, adamw_exact, "AdamW step in fp64"),
    PEAT_GOLDEN_GOLDEN("adamw_golden", PEAT_OP_ADAMW, adamw_golden,
                       "AdamW step in fp32 (scalars formed in fp64, as PyTorch)"),
    PEAT_GOLDEN_EXACT("sgd_exact", PEAT_OP_SGD, sgd_exact, "SGD with momentum in fp64"),
    PEAT_GOLDEN_GOLDEN("sgd_golden", PEAT_OP_SGD, sgd_golden, "SGD with momentum in fp32"),
};

peat_status peat_golden_register_optim(void)
{
    return peat_golden_add_all(optim_kernels,
                               (int)(sizeof optim_kernels / sizeof optim_kernels[0]));
}
