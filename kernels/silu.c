/* silu.c: SiLU and SwiGLU candidates: the sign-split sigmoid of fused activation kernels
 * (exp of a non-positive argument only: e^x / (1 + e^x) below 0, 1 / (1 + e^-x) above), the
 * backward in the expanded order dY (s + x s (1 - s)), and SwiGLU fused into one pass. */
#include "kernels/kcommon.h"
#include "kernels/kernels.h"
#include "peat/backend.h"

#include <math.h>

static float sig_split(float x)
{
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

static peat_status silu_split(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    const float *x = peat_f32(a->in[0]);
    float *y = peat_f32(a->out[0]);
    for (int64_t i = 0; i < a->p.i[0]; i++) y[i] = x[i] * sig_split(x[i]);
    return PEAT_OK;
}

static peat_status silu_split_bwd(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    const float *x = peat_f32(a->in[0]), *dy = peat_f32(a->in[1]);
    float *dx = peat_f32(a->out[0]);
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float s = sig_split(x[i]), xs = x[i] * s;
        dx[i] = dy[i] * (s + xs * (1.0f - s));
    }
    return PEAT_OK;
}

static peat_status swiglu_fused(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    const float *g = peat_f32(a->in[0]), *u = peat_f32(a->in[1]);
    float *y = peat_f32(a->out[0]);
    for (int64_t i = 0; i < a->p.i[0]; i++) y[i] = (g[i] * u[i]) * sig_split(g[i]);
    return PEAT_OK;
}

static peat_status swiglu_fused_bwd(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    const float *g = peat_f32(a->in[0]), *u = peat_f32(a->in[1]), *dy = peat_f32(a->in[2]);
    float *dg = peat_f32(a->out[0]), *du = peat_f32(a->out[1]);
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float s = sig_split(g[i]), gs = g[i] * s;
        du[i] = dy[i] * gs;
        dg[i] = (dy[i] * u[i]) * (s + gs * (1.0f - s));
    }
    return PEAT_OK;
}

static const peat_kernel silu_kernels[] = {
    PEAT_KERNELS_F32(
        "silu_split", PEAT_OP_SILU, silu_split,
        "SiLU with the sign-split sigmoid (exp of a non-positive argument only), fp32"),
    PEAT_KERNELS_F32("silu_split_bwd", PEAT_OP_SILU_BWD, silu_split_bwd,
                     "SiLU backward dY (s + x s (1 - s)), sign-split sigmoid, fp32"),
    PEAT_KERNELS_F32("swiglu_fused", PEAT_OP_SWIGLU, swiglu_fused,
                     "SwiGLU (g u) sigmoid(g) in one pass, sign-split sigmoid, fp32"),
    PEAT_KERNELS_F32("swiglu_fused_bwd", PEAT_OP_SWIGLU_BWD, swiglu_fused_bwd,
                     "SwiGLU backward in one pass (dG, dU), fp32"),
};

peat_status peat_kernels_register_silu(void)
{
    return peat_kernels_add_all(silu_kernels, (int)(sizeof silu_kernels / sizeof silu_kernels[0]));
}
