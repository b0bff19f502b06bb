/* ho_gelu.c: held-out GELU kernels (exact, erf-based GELU): a backward that drops the x of the
 * x phi(x) term, a forward with a stuck bit in one vector lane, and an honest backward through
 * erfc. */
#include "heldout.h"

#define INV_SQRT2   0.70710678118654752440f
#define INV_SQRT2PI 0.39894228040143267794f

/* WRONG_RESULT. GELU'(x) = Phi(x) + x phi(x); the kernel writes Phi(x) + phi(x) (the product rule
 * applied to x Phi(x) with d/dx x taken as the factor of phi): off by (1 - x) phi(x) wherever
 * phi(x) matters (|x| below ~4). */
static peat_status bwd_no_x(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *x = a->in[0]->data, *dy = a->in[1]->data;
    float *dx = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float cdf = 0.5f * (1.0f + erff(x[i] * INV_SQRT2));
        float pdf = expf(-0.5f * x[i] * x[i]) * INV_SQRT2PI;
        dx[i] = dy[i] * (cdf + pdf);
    }
    return PEAT_OK;
}

/* STUCK_BIT. The forward is right, but its results leave through 16-wide vector stores whose lane 6
 * has significand bit 20 stuck at 1: every element with i % 16 == 6 has that bit set. */
static peat_status fwd_stuck_lane(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float v = 0.5f * x[i] * (1.0f + erff(x[i] * INV_SQRT2));
        y[i] = i % 16 == 6 ? ho_force(v, 20, 1) : v;
    }
    return PEAT_OK;
}

/* Honest (PASS). GELU'(x) with Phi(x) = 0.5 erfc(-x / sqrt2) (no cancellation for x << 0) and
 * phi(x) = exp(-x^2 / 2) / sqrt(2 pi); fp32. */
static peat_status bwd_erfc(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *x = a->in[0]->data, *dy = a->in[1]->data;
    float *dx = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float cdf = 0.5f * erfcf(-x[i] * INV_SQRT2);
        float pdf = INV_SQRT2PI * expf(-0.5f * (x[i] * x[i]));
        dx[i] = dy[i] * (cdf + x[i] * pdf);
    }
    return PEAT_OK;
}

int ho_register_gelu(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("ho_gelu_bwd_no_x", PEAT_OP_GELU_BWD, bwd_no_x,
                   "GELU backward as Phi(x) + phi(x): the x of x phi(x) dropped"),
        ZOO_KERNEL("ho_gelu_stuck_lane", PEAT_OP_GELU, fwd_stuck_lane,
                   "lane 6 of 16 has significand bit 20 stuck at 1"),
        ZOO_KERNEL("ho_gelu_bwd_erfc", PEAT_OP_GELU_BWD, bwd_erfc,
                   "honest: GELU backward with Phi = 0.5 erfc(-x/sqrt2)"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
