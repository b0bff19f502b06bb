/* zoo_rmsnorm.c: RMSNorm kernels of the zoo: eps added outside the square root, the sum of
 * squares accumulated in bf16, a backward that treats rstd as a constant (drops the term its
 * dependence on X gives), and two honest forms (the sum of squares of x / max|x|, as overflow-safe
 * norms compute it; a backward in the factored order). Outputs Y, rstd; dX, dgamma. */
#include "zoo.h"

typedef float (*rnd_fn)(float);
static float keep(float x)
{
    return x;
}

/* One row. mode 0: rstd = 1/sqrt(ms + eps); 1: 1/(sqrt(ms) + eps); 2: ms from (x / max|x|)^2
 * scaled back. r rounds the running sum of squares. */
static void rms_row(const peat_args *a, int64_t i, int mode, rnd_fn r)
{
    int64_t C = a->p.i[1];
    float eps = (float)a->p.f[0];
    const float *x = (const float *)a->in[0]->data + i * C, *g = a->in[1]->data;
    float *y = (float *)a->out[0]->data + i * C, ss = 0.0f, ms;
    if (mode == 2) {
        float mx = 0.0f;
        for (int64_t j = 0; j < C; j++) mx = fabsf(x[j]) > mx ? fabsf(x[j]) : mx;
        if (mx == 0.0f) mx = 1.0f;
        for (int64_t j = 0; j < C; j++) ss += (x[j] / mx) * (x[j] / mx);
        ms = ss / (float)C * mx * mx;
    } else {
        for (int64_t j = 0; j < C; j++) ss = r(ss + x[j] * x[j]);
        ms = ss / (float)C;
    }
    float rs = mode == 1 ? 1.0f / (sqrtf(ms) + eps) : 1.0f / sqrtf(ms + eps);
    for (int64_t j = 0; j < C; j++) y[j] = x[j] * rs * g[j];
    ((float *)a->out[1]->data)[i] = rs;
}

static peat_status eps_outside(const peat_args *a, const peat_kernel *self)
{
    for (int64_t i = 0; i < a->p.i[0]; i++) rms_row(a, i, 1, keep);
    return PEAT_OK;
}
static peat_status sumsq_bf16(const peat_args *a, const peat_kernel *self)
{
    for (int64_t i = 0; i < a->p.i[0]; i++) rms_row(a, i, 0, zoo_bf16);
    return PEAT_OK;
}
static peat_status scaled(const peat_args *a, const peat_kernel *self)
{
    for (int64_t i = 0; i < a->p.i[0]; i++) rms_row(a, i, 2, keep);
    return PEAT_OK;
}

/* Backward. full 1: dX = rstd (g - x rstd^2 mean(g x)); 0: dX = rstd g (rstd taken as a
 * constant). dgamma = sum_r dY x rstd either way. */
static void rms_bwd(const peat_args *a, int full)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *X = a->in[0]->data, *gam = a->in[1]->data, *rstd = a->in[2]->data;
    const float *dY = a->in[3]->data;
    float *dX = a->out[0]->data, *dg = a->out[1]->data;
    for (int64_t j = 0; j < C; j++) dg[j] = 0.0f;
    for (int64_t r = 0; r < R; r++) {
        const float *x = X + r * C, *dy = dY + r * C;
        float rs = rstd[r], s = 0.0f;
        for (int64_t j = 0; j < C; j++) s += dy[j] * gam[j] * x[j];
        s /= (float)C;
        for (int64_t j = 0; j < C; j++) {
            float g = dy[j] * gam[j];
            dX[r * C + j] = full ? rs * (g - x[j] * (rs * rs * s)) : rs * g;
            dg[j] += dy[j] * (x[j] * rs);
        }
    }
}
static peat_status bwd_const_rstd(const peat_args *a, const peat_kernel *self)
{
    rms_bwd(a, 0);
    return PEAT_OK;
}
static peat_status bwd_factored(const peat_args *a, const peat_kernel *self)
{
    rms_bwd(a, 1);
    return PEAT_OK;
}

int zoo_register_rmsnorm(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("zoo_rmsnorm_eps_outside", PEAT_OP_RMSNORM, eps_outside,
                   "rstd = 1 / (sqrt(mean x^2) + eps): eps outside the square root"),
        ZOO_KERNEL("zoo_rmsnorm_sumsq_bf16", PEAT_OP_RMSNORM, sumsq_bf16,
                   "sum of squares accumulated in bf16, declares fp32"),
        ZOO_KERNEL("zoo_rmsnorm_bwd_const_rstd", PEAT_OP_RMSNORM_BWD, bwd_const_rstd,
                   "backward with rstd taken as a constant: dX = rstd dY gamma"),
        ZOO_KERNEL("zoo_rmsnorm_scaled", PEAT_OP_RMSNORM, scaled,
                   "honest: mean square of x / max|x|, scaled back (overflow-safe)"),
        ZOO_KERNEL("zoo_rmsnorm_bwd_factored", PEAT_OP_RMSNORM_BWD, bwd_factored,
                   "honest: backward as rstd (g - x rstd^2 mean(g x))"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
