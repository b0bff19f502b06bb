/* h2_optim.c: AdamW kernels of the second held-out set. Per-call scalars are formed in double
 * and rounded once (as PyTorch's fp32 AdamW); outputs may alias inputs, so each element's inputs
 * are read before its outputs are written. */
#include "heldout2.h"

typedef struct h2_adam {
    int64_t n;
    float lr, b1, b2, eps, wd, c1, c2, bc1, bc2;
} h2_adam;

static h2_adam h2_adam_of(const peat_args *a)
{
    int64_t t = a->p.i[1];
    h2_adam h = {a->p.i[0],
                 (float)a->p.f[0],
                 (float)a->p.f[1],
                 (float)a->p.f[2],
                 (float)a->p.f[3],
                 (float)a->p.f[4],
                 (float)(1.0 - a->p.f[1]),
                 (float)(1.0 - a->p.f[2]),
                 (float)(1.0 - pow(a->p.f[1], (double)t)),
                 (float)(1.0 - pow(a->p.f[2], (double)t))};
    return h;
}

/* Adam with L2 regularisation where AdamW is asked for: the weight decay is folded into the
 * gradient (g + wd p) before the moments, and no decoupled decay is applied. */
static peat_status adamw_l2_coupled(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    h2_adam h = h2_adam_of(a);
    const float *pi = a->in[0]->data, *gi = a->in[1]->data, *mi = a->in[2]->data,
                *vi = a->in[3]->data;
    float *po = a->out[0]->data, *mo = a->out[1]->data, *vo = a->out[2]->data;
    for (int64_t i = 0; i < h.n; i++) {
        float p = pi[i], g = gi[i] + h.wd * pi[i], m = mi[i], v = vi[i];
        m = h.b1 * m + h.c1 * g;
        v = h.b2 * v + h.c2 * g * g;
        float mhat = m / h.bc1, vhat = v / h.bc2;
        po[i] = p - h.lr * (mhat / (sqrtf(vhat) + h.eps)), mo[i] = m, vo[i] = v;
    }
    return PEAT_OK;
}

/* AdamW whose moment updates and final parameter update add with round-toward-zero (every other
 * operation rounds to nearest). */
static peat_status adamw_rz(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    h2_adam h = h2_adam_of(a);
    const float *pi = a->in[0]->data, *gi = a->in[1]->data, *mi = a->in[2]->data,
                *vi = a->in[3]->data;
    float *po = a->out[0]->data, *mo = a->out[1]->data, *vo = a->out[2]->data;
    for (int64_t i = 0; i < h.n; i++) {
        float p = pi[i], g = gi[i], m = mi[i], v = vi[i];
        m = ho_add_rz(h.b1 * m, h.c1 * g);
        v = ho_add_rz(h.b2 * v, h.c2 * g * g);
        float mhat = m / h.bc1, vhat = v / h.bc2;
        po[i] = ho_add_rz(p, -(h.lr * (mhat / (sqrtf(vhat) + h.eps) + h.wd * p)));
        mo[i] = m, vo[i] = v;
    }
    return PEAT_OK;
}

/* AdamW with a transient upset in the first-moment state: one call in three, one m' element
 * has one bit (18..30) inverted after the parameter was updated from the right value. */
static peat_status adamw_m_flip(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    h2_adam h = h2_adam_of(a);
    const float *pi = a->in[0]->data, *gi = a->in[1]->data, *mi = a->in[2]->data,
                *vi = a->in[3]->data;
    float *po = a->out[0]->data, *mo = a->out[1]->data, *vo = a->out[2]->data;
    for (int64_t i = 0; i < h.n; i++) {
        float p = pi[i], g = gi[i], m = mi[i], v = vi[i];
        m = h.b1 * m + h.c1 * g;
        v = h.b2 * v + h.c2 * g * g;
        float mhat = m / h.bc1, vhat = v / h.bc2;
        po[i] = p - h.lr * (mhat / (sqrtf(vhat) + h.eps) + h.wd * p), mo[i] = m, vo[i] = v;
    }
    int64_t at;
    int bit;
    if (h2_upset(3, h.n, 18, 13, &at, &bit)) mo[at] = ho_flip(mo[at], bit);
    return PEAT_OK;
}

/* Honest: AdamW with fused multiply-adds (moments as fma(beta, m, (1-beta) g), the parameter
 * as fma(-lr, update, p)), one rounding fewer per step. */
static peat_status adamw_fma(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    h2_adam h = h2_adam_of(a);
    const float *pi = a->in[0]->data, *gi = a->in[1]->data, *mi = a->in[2]->data,
                *vi = a->in[3]->data;
    float *po = a->out[0]->data, *mo = a->out[1]->data, *vo = a->out[2]->data;
    for (int64_t i = 0; i < h.n; i++) {
        float p = pi[i], g = gi[i], m = mi[i], v = vi[i];
        m = fmaf(h.b1, m, h.c1 * g);
        v = fmaf(h.b2, v, h.c2 * g * g);
        float upd = fmaf(h.wd, p, (m / h.bc1) / (sqrtf(v / h.bc2) + h.eps));
        po[i] = fmaf(-h.lr, upd, p), mo[i] = m, vo[i] = v;
    }
    return PEAT_OK;
}

int h2_register_optim(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h2_adamw_l2_coupled", PEAT_OP_ADAMW, adamw_l2_coupled,
                   "Adam with L2 (decay folded into the gradient) instead of AdamW"),
        ZOO_KERNEL("h2_adamw_rz", PEAT_OP_ADAMW, adamw_rz,
                   "AdamW with round-toward-zero moment and parameter adds"),
        ZOO_KERNEL("h2_adamw_m_flip", PEAT_OP_ADAMW, adamw_m_flip,
                   "AdamW with a transient one-bit upset in m' on one call in three"),
        ZOO_KERNEL("h2_adamw_fma", PEAT_OP_ADAMW, adamw_fma, "AdamW with fused multiply-adds"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
