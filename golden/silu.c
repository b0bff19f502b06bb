/* silu.c: SiLU (x sigmoid(x)) and the SwiGLU product (silu(G) U) with their backward ops, exact
 * (fp64) and golden (fp32: sigmoid as 1 / (1 + exp(-x)), as PyTorch computes it). */
#include "golden/golden.h"
#include "golden/refkit.h"

#include <math.h>

static double sig(double x)
{
    return 1.0 / (1.0 + exp(-x));
}
static float sigf(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

static peat_status silu_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    double *x = NULL;
    PEAT_TRY(peat_golden_load(a->in[0], &x));
    for (int64_t i = 0; i < a->p.i[0]; i++) peat_f64(a->out[0])[i] = x[i] * sig(x[i]);
    free(x);
    return PEAT_OK;
}

static peat_status silu_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    const float *x = peat_f32(a->in[0]);
    for (int64_t i = 0; i < a->p.i[0]; i++) peat_f32(a->out[0])[i] = x[i] * sigf(x[i]);
    return PEAT_OK;
}

/* dX = dY s (1 + x (1 - s)) */
static peat_status silu_bwd_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    double *in[2];
    PEAT_TRY(peat_golden_load_n(a, 2, (const int[]){0, 1}, in));
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        double x = in[0][i], s = sig(x);
        peat_f64(a->out[0])[i] = in[1][i] * s * (1.0 + x * (1.0 - s));
    }
    peat_golden_free_n(2, in);
    return PEAT_OK;
}

static peat_status silu_bwd_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    const float *x = peat_f32(a->in[0]), *dy = peat_f32(a->in[1]);
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float s = sigf(x[i]);
        peat_f32(a->out[0])[i] = dy[i] * s * (1.0f + x[i] * (1.0f - s));
    }
    return PEAT_OK;
}

/* Y = silu(G) U */
static peat_status swiglu_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    double *in[2];
    PEAT_TRY(peat_golden_load_n(a, 2, (const int[]){0, 1}, in));
    for (int64_t i = 0; i < a->p.i[0]; i++)
        peat_f64(a->out[0])[i] = in[0][i] * sig(in[0][i]) * in[1][i];
    peat_golden_free_n(2, in);
    return PEAT_OK;
}

static peat_status swiglu_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    const float *g = peat_f32(a->in[0]), *u = peat_f32(a->in[1]);
    for (int64_t i = 0; i < a->p.i[0]; i++) peat_f32(a->out[0])[i] = g[i] * sigf(g[i]) * u[i];
    return PEAT_OK;
}

/* dG = dY U s (1 + g (1 - s)), dU = dY g s */
static peat_status swiglu_bwd_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    double *in[3];
    PEAT_TRY(peat_golden_load_n(a, 3, (const int[]){0, 1, 2}, in));
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        double g = in[0][i], u = in[1][i], dy = in[2][i], s = sig(g);
        peat_f64(a->out[0])[i] = dy * u * s * (1.0 + g * (1.0 - s));
        peat_f64(a->out[1])[i] = dy * g * s;
    }
    peat_golden_free_n(3, in);
    return PEAT_OK;
}

static peat_status swiglu_bwd_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    const float *g = peat_f32(a->in[0]), *u = peat_f32(a->in[1]), *dy = peat_f32(a->in[2]);
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float s = sigf(g[i]);
        peat_f32(a->out[0])[i] = dy[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
        peat_f32(a->out[1])[i] = dy[i] * g[i] * s;
    }
    return PEAT_OK;
}

peat_status peat_golden_register_silu(void)
{
    static const peat_kernel ks[] = {
        PEAT_GOLDEN_EXACT("silu_exact", PEAT_OP_SILU, silu_exact, "SiLU x sigmoid(x) in fp64"),
        PEAT_GOLDEN_GOLDEN("silu_golden", PEAT_OP_SILU, silu_golden,
                           "SiLU x / (1 + exp(-x)) in fp32"),
        PEAT_GOLDEN_EXACT("silu_bwd_exact", PEAT_OP_SILU_BWD, silu_bwd_exact,
                          "SiLU backward in fp64"),
        PEAT_GOLDEN_GOLDEN("silu_bwd_golden", PEAT_OP_SILU_BWD, silu_bwd_golden,
                           "SiLU backward dY s (1 + x (1 - s)) in fp32"),
        PEAT_GOLDEN_EXACT("swiglu_exact", PEAT_OP_SWIGLU, swiglu_exact,
                          "SwiGLU product silu(G) U in fp64"),
        PEAT_GOLDEN_GOLDEN("swiglu_golden", PEAT_OP_SWIGLU, swiglu_golden,
                           "SwiGLU product silu(G) U in fp32"),
        PEAT_GOLDEN_EXACT("swiglu_bwd_exact", PEAT_OP_SWIGLU_BWD, swiglu_bwd_exact,
                          "SwiGLU backward (dG, dU) in fp64"),
        PEAT_GOLDEN_GOLDEN("swiglu_bwd_golden", PEAT_OP_SWIGLU_BWD, swiglu_bwd_golden,
                           "SwiGLU backward (dG, dU) in fp32"),
    };
    return peat_golden_add_all(ks, (int)(sizeof ks / sizeof ks[0]));
}
