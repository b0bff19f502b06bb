/* batchnorm.c: batch normalization in training mode and its backward, exact (fp64) and golden
 * (fp32, two-pass statistics per channel over N and S in index order). The backward reads the
 * mean and rstd it is given. */
#include "golden/golden.h"
#include "golden/refkit.h"

#include <math.h>

/* Y, mean, rstd, running mean and variance (unbiased) of channel statistics over M = N S */
static peat_status bn_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t N = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    double eps = a->p.f[0], mom = a->p.f[1], M = (double)(N * S), *in[5];
    PEAT_TRY(peat_golden_load_n(a, 5, (const int[]){0, 1, 2, 3, 4}, in));
    double *y = peat_f64(a->out[0]), *mean = peat_f64(a->out[1]), *rstd = peat_f64(a->out[2]);
    for (int64_t c = 0; c < C; c++) {
        double m = 0.0, var = 0.0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) m += in[0][(n * C + c) * S + s];
        m /= M;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                double d = in[0][(n * C + c) * S + s] - m;
                var += d * d;
            }
        var /= M;
        double rs = 1.0 / sqrt(var + eps);
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                y[i] = (in[0][i] - m) * rs * in[1][c] + in[2][c];
            }
        mean[c] = m, rstd[c] = rs;
        peat_f64(a->out[3])[c] = (1.0 - mom) * in[3][c] + mom * m;
        peat_f64(a->out[4])[c] = (1.0 - mom) * in[4][c] + mom * var * M / (M - 1.0);
    }
    peat_golden_free_n(5, in);
    return PEAT_OK;
}

static peat_status bn_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t N = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    float eps = (float)a->p.f[0], mom = (float)a->p.f[1], M = (float)(N * S);
    const float *x = peat_f32(a->in[0]), *g = peat_f32(a->in[1]), *b = peat_f32(a->in[2]);
    const float *rm = peat_f32(a->in[3]), *rv = peat_f32(a->in[4]);
    float *y = peat_f32(a->out[0]);
    for (int64_t c = 0; c < C; c++) {
        float m = 0.0f, var = 0.0f;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) m += x[(n * C + c) * S + s];
        m /= M;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                float d = x[(n * C + c) * S + s] - m;
                var += d * d;
            }
        var /= M;
        float rs = 1.0f / sqrtf(var + eps);
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                y[i] = (x[i] - m) * rs * g[c] + b[c];
            }
        peat_f32(a->out[1])[c] = m, peat_f32(a->out[2])[c] = rs;
        peat_f32(a->out[3])[c] = (1.0f - mom) * rm[c] + mom * m;
        peat_f32(a->out[4])[c] = (1.0f - mom) * rv[c] + mom * (var * (M / (M - 1.0f)));
    }
    return PEAT_OK;
}

/* xhat = (x - mean) rstd, g = dY gamma: dX = rstd (g - mean(g) - xhat mean(g xhat)),
 * dgamma = sum dY xhat, dbeta = sum dY (means and sums over N and S per channel) */
static peat_status bn_bwd_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t N = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    double M = (double)(N * S), *in[5];
    PEAT_TRY(peat_golden_load_n(a, 5, (const int[]){0, 1, 2, 3, 4}, in));
    double *dx = peat_f64(a->out[0]), *dg = peat_f64(a->out[1]), *db = peat_f64(a->out[2]);
    for (int64_t c = 0; c < C; c++) {
        double m = in[2][c], rs = in[3][c], gam = in[1][c], sg = 0.0, sgx = 0.0, sdy = 0.0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                double xh = (in[0][i] - m) * rs, dy = in[4][i];
                sg += dy * gam, sgx += dy * gam * xh, sdy += dy;
            }
        double sdx = 0.0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                double xh = (in[0][i] - m) * rs, dy = in[4][i];
                dx[i] = rs * (dy * gam - sg / M - xh * sgx / M);
                sdx += dy * xh;
            }
        dg[c] = sdx, db[c] = sdy;
    }
    peat_golden_free_n(5, in);
    return PEAT_OK;
}

static peat_status bn_bwd_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t N = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    float M = (float)(N * S);
    const float *x = peat_f32(a->in[0]), *gm = peat_f32(a->in[1]), *mean = peat_f32(a->in[2]);
    const float *rstd = peat_f32(a->in[3]), *dY = peat_f32(a->in[4]);
    float *dx = peat_f32(a->out[0]), *dg = peat_f32(a->out[1]), *db = peat_f32(a->out[2]);
    for (int64_t c = 0; c < C; c++) {
        float m = mean[c], rs = rstd[c], gam = gm[c], sg = 0.0f, sgx = 0.0f, sdy = 0.0f, sdx = 0.0f;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                float xh = (x[i] - m) * rs;
                sg += dY[i] * gam, sgx += dY[i] * gam * xh, sdy += dY[i], sdx += dY[i] * xh;
            }
        sg /= M, sgx /= M;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                float xh = (x[i] - m) * rs;
                dx[i] = rs * (dY[i] * gam - sg - xh * sgx);
            }
        dg[c] = sdx, db[c] = sdy;
    }
    return PEAT_OK;
}

peat_status peat_golden_register_batchnorm(void)
{
    static const peat_kernel ks[] = {
        PEAT_GOLDEN_EXACT("batchnorm_exact", PEAT_OP_BATCHNORM, bn_exact,
                          "batch norm (training: batch statistics, running stats) in fp64"),
        PEAT_GOLDEN_GOLDEN("batchnorm_golden", PEAT_OP_BATCHNORM, bn_golden,
                           "batch norm, two-pass channel statistics in fp32"),
        PEAT_GOLDEN_EXACT("batchnorm_bwd_exact", PEAT_OP_BATCHNORM_BWD, bn_bwd_exact,
                          "batch norm backward (dX, dgamma, dbeta) in fp64"),
        PEAT_GOLDEN_GOLDEN("batchnorm_bwd_golden", PEAT_OP_BATCHNORM_BWD, bn_bwd_golden,
                           "batch norm backward in fp32, sequential"),
    };
    return peat_golden_add_all(ks, (int)(sizeof ks / sizeof ks[0]));
}
