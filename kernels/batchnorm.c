/* batchnorm.c: batch norm candidates: channel statistics by Welford's update in one pass over
 * N and S (as cuDNN's and PyTorch's CPU kernels), rstd folded into a per-channel scale and shift
 * (Y = x a + b); a backward with its three channel sums in one pass. */
#include "kernels/kcommon.h"
#include "kernels/kernels.h"
#include "peat/backend.h"

#include <math.h>

static peat_status bn_welford(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    int64_t N = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    float eps = (float)a->p.f[0], mom = (float)a->p.f[1];
    const float *x = peat_f32(a->in[0]), *g = peat_f32(a->in[1]), *b = peat_f32(a->in[2]);
    const float *rm = peat_f32(a->in[3]), *rv = peat_f32(a->in[4]);
    float *y = peat_f32(a->out[0]);
    for (int64_t c = 0; c < C; c++) {
        float mean = 0.0f, m2 = 0.0f, cnt = 0.0f;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                float v = x[(n * C + c) * S + s], d = v - mean;
                cnt += 1.0f;
                mean += d / cnt;
                m2 += d * (v - mean);
            }
        float var = m2 / cnt, rs = 1.0f / sqrtf(var + eps);
        float scale = g[c] * rs, shift = b[c] - mean * scale;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                y[i] = x[i] * scale + shift;
            }
        peat_f32(a->out[1])[c] = mean, peat_f32(a->out[2])[c] = rs;
        peat_f32(a->out[3])[c] = rm[c] + mom * (mean - rm[c]);
        peat_f32(a->out[4])[c] = rv[c] + mom * (m2 / (cnt - 1.0f) - rv[c]);
    }
    return PEAT_OK;
}

/* dX = rstd gamma (dY - mean(dY) - xhat mean(dY xhat)) with both means from one pass */
static peat_status bn_onepass_bwd(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    int64_t N = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    float invM = 1.0f / (float)(N * S);
    const float *x = peat_f32(a->in[0]), *gm = peat_f32(a->in[1]), *mean = peat_f32(a->in[2]);
    const float *rstd = peat_f32(a->in[3]), *dy = peat_f32(a->in[4]);
    float *dx = peat_f32(a->out[0]), *dg = peat_f32(a->out[1]), *db = peat_f32(a->out[2]);
    for (int64_t c = 0; c < C; c++) {
        float m = mean[c], rs = rstd[c], sdy = 0.0f, sdyx = 0.0f;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                sdy += dy[i], sdyx += dy[i] * (x[i] - m);
            }
        float k = gm[c] * rs, mdy = sdy * invM, mdyx = sdyx * rs * invM;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                dx[i] = k * (dy[i] - mdy - (x[i] - m) * rs * mdyx);
            }
        dg[c] = sdyx * rs, db[c] = sdy;
    }
    return PEAT_OK;
}

static const peat_kernel batchnorm_kernels[] = {
    PEAT_KERNELS_F32("batchnorm_welford", PEAT_OP_BATCHNORM, bn_welford,
                     "batch norm with Welford channel statistics, Y = x scale + shift, fp32"),
    PEAT_KERNELS_F32("batchnorm_onepass_bwd", PEAT_OP_BATCHNORM_BWD, bn_onepass_bwd,
                     "batch norm backward, the channel sums in one pass, fp32"),
};

peat_status peat_kernels_register_batchnorm(void)
{
    return peat_kernels_add_all(batchnorm_kernels,
                                (int)(sizeof batchnorm_kernels / sizeof batchnorm_kernels[0]));
}
