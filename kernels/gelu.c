/* gelu.c: the tanh-approximated GELU and its derivative (a deliberately different function). */
#include "kernels/kcommon.h"
#include "peat/backend.h"
#include "kernels/kernels.h"

#include <math.h>

/* sqrt(2/pi) and the cubic coefficient of Hendrycks & Gimpel's approximation. */
#define GELU_K 0.7978845608028654f
#define GELU_C 0.044715f

/* Beyond this |x| the derivative is 0 or 1 to fp32 precision; guarding it keeps x^2 from
 * overflowing into inf * 0 = NaN. */
#define GELU_BWD_SATURATE 1.0e4f

/* Y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Its largest deviation from the erf GELU
 * is 4.73e-4 absolute (at |x| = 2.699; see docs/kernels.md): an approx(tanh) error by design. */
static peat_status gelu_tanh(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    int64_t n = a->p.i[0];
    const float *x = peat_f32(a->in[0]);
    float *y = peat_f32(a->out[0]);
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        float t = tanhf(GELU_K * (v + GELU_C * v * v * v));
        y[i] = 0.5f * v * (1.0f + t);
    }
    return PEAT_OK;
}

/* dX = dY (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)), the exact
 * derivative of the tanh form (largest deviation from the erf GELU' is 8.68e-4 at |x| = 2.019). */
static peat_status gelu_tanh_bwd(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    int64_t n = a->p.i[0];
    const float *x = peat_f32(a->in[0]), *dy = peat_f32(a->in[1]);
    float *dx = peat_f32(a->out[0]);
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], d;
        if (fabsf(v) > GELU_BWD_SATURATE) {
            d = v > 0.0f ? 1.0f : 0.0f;
        } else {
            float t = tanhf(GELU_K * (v + GELU_C * v * v * v));
            d = 0.5f * (1.0f + t) +
                0.5f * v * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_C * v * v);
        }
        dx[i] = dy[i] * d;
    }
    return PEAT_OK;
}

static const peat_kernel gelu_kernels[] = {
    PEAT_KERNELS_F32("gelu_tanh", PEAT_OP_GELU, gelu_tanh,
                     "GELU via the tanh approximation (max 4.7e-4 from erf GELU)"),
    PEAT_KERNELS_F32("gelu_tanh_bwd", PEAT_OP_GELU_BWD, gelu_tanh_bwd,
                     "derivative of the tanh-approximated GELU (max 8.7e-4 from erf GELU')"),
};

peat_status peat_kernels_register_gelu(void)
{
    return peat_kernels_add_all(gelu_kernels, (int)(sizeof gelu_kernels / sizeof gelu_kernels[0]));
}
