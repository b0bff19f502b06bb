/* rmsnorm.c: RMSNorm and its backward, exact (fp64) and golden (fp32, natural order).
 * Forward: rstd = 1/sqrt(mean_C(x^2) + eps), Y = x rstd gamma. Backward, with g = dY gamma:
 * dX = rstd (g - x rstd^2 mean_C(g x)), dgamma = sum over rows of dY x rstd. The backward reads
 * the rstd it is given (as the forward saved it), not a recomputed one. */
#include "golden/golden.h"
#include "golden/refkit.h"

#include <math.h>

static peat_status rmsnorm_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    double eps = a->p.f[0], *in[2];
    PEAT_TRY(peat_golden_load_n(a, 2, (const int[]){0, 1}, in));
    double *y = peat_f64(a->out[0]), *rstd = peat_f64(a->out[1]);
    for (int64_t r = 0; r < R; r++) {
        const double *x = in[0] + r * C;
        double ss = 0.0;
        for (int64_t j = 0; j < C; j++) ss += x[j] * x[j];
        double rs = 1.0 / sqrt(ss / (double)C + eps);
        for (int64_t j = 0; j < C; j++) y[r * C + j] = x[j] * rs * in[1][j];
        rstd[r] = rs;
    }
    peat_golden_free_n(2, in);
    return PEAT_OK;
}

static peat_status rmsnorm_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    float eps = (float)a->p.f[0];
    const float *g = peat_f32(a->in[1]);
    for (int64_t r = 0; r < R; r++) {
        const float *x = peat_f32(a->in[0]) + r * C;
        float *y = peat_f32(a->out[0]) + r * C, ss = 0.0f;
        for (int64_t j = 0; j < C; j++) ss += x[j] * x[j];
        float rs = 1.0f / sqrtf(ss / (float)C + eps);
        for (int64_t j = 0; j < C; j++) y[j] = x[j] * rs * g[j];
        peat_f32(a->out[1])[r] = rs;
    }
    return PEAT_OK;
}

static peat_status rmsnorm_bwd_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    double *in[4];
    PEAT_TRY(peat_golden_load_n(a, 4, (const int[]){0, 1, 2, 3}, in));
    const double *X = in[0], *gam = in[1], *rstd = in[2], *dY = in[3];
    double *dx = peat_f64(a->out[0]), *dg = peat_f64(a->out[1]);
    for (int64_t j = 0; j < C; j++) dg[j] = 0.0;
    for (int64_t r = 0; r < R; r++) {
        const double *x = X + r * C, *dy = dY + r * C;
        double rs = rstd[r], sgx = 0.0;
        for (int64_t j = 0; j < C; j++) sgx += dy[j] * gam[j] * x[j];
        sgx /= (double)C;
        for (int64_t j = 0; j < C; j++) {
            dx[r * C + j] = rs * (dy[j] * gam[j] - x[j] * rs * rs * sgx);
            dg[j] += dy[j] * x[j] * rs;
        }
    }
    peat_golden_free_n(4, in);
    return PEAT_OK;
}

static peat_status rmsnorm_bwd_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *gam = peat_f32(a->in[1]), *rstd = peat_f32(a->in[2]);
    float *dg = peat_f32(a->out[1]);
    for (int64_t j = 0; j < C; j++) dg[j] = 0.0f;
    for (int64_t r = 0; r < R; r++) {
        const float *x = peat_f32(a->in[0]) + r * C, *dy = peat_f32(a->in[3]) + r * C;
        float *dx = peat_f32(a->out[0]) + r * C, rs = rstd[r], sgx = 0.0f;
        for (int64_t j = 0; j < C; j++) sgx += dy[j] * gam[j] * x[j];
        sgx /= (float)C;
        for (int64_t j = 0; j < C; j++) {
            dx[j] = rs * (dy[j] * gam[j] - x[j] * rs * rs * sgx);
            dg[j] += dy[j] * x[j] * rs;
        }
    }
    return PEAT_OK;
}

peat_status peat_golden_register_rmsnorm(void)
{
    static const peat_kernel ks[] = {
        PEAT_GOLDEN_EXACT("rmsnorm_exact", PEAT_OP_RMSNORM, rmsnorm_exact, "RMSNorm in fp64"),
        PEAT_GOLDEN_GOLDEN("rmsnorm_golden", PEAT_OP_RMSNORM, rmsnorm_golden,
                           "RMSNorm in fp32, sequential"),
        PEAT_GOLDEN_EXACT("rmsnorm_bwd_exact", PEAT_OP_RMSNORM_BWD, rmsnorm_bwd_exact,
                          "RMSNorm backward (dX, dgamma) in fp64"),
        PEAT_GOLDEN_GOLDEN("rmsnorm_bwd_golden", PEAT_OP_RMSNORM_BWD, rmsnorm_bwd_golden,
                           "RMSNorm backward (dX, dgamma) in fp32, sequential"),
    };
    return peat_golden_add_all(ks, (int)(sizeof ks / sizeof ks[0]));
}
