/* layernorm.c: Welford one-pass layernorm (fp32, bf16, fp16 boundaries) and a fused backward. */
#include "kernels/kcommon.h"
#include "peat/backend.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Rows whose dgamma/dbeta contributions one "block" of the backward sums before joining the
 * totals (a GPU kernel reduces per thread block first, then across blocks). */
#define LN_BWD_ROWS 32

typedef float (*ln_round_fn)(float);

static float round_none(float x)
{
    return x;
}

/* One pass of Welford's update per row: mean and M2 = sum (x - mean)^2 without a second read
 * and without the cancellation of E[x^2] - E[x]^2. Values pass through rnd at the kernel's
 * boundary (inputs as read, Y as stored); mean and rstd stay fp32 like the stats of real
 * mixed-precision layernorms. */
static peat_status ln_welford(const peat_args *a, ln_round_fn rnd)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    float eps = (float)a->p.f[0];
    const float *x = peat_f32(a->in[0]), *gamma = peat_f32(a->in[1]), *beta = peat_f32(a->in[2]);
    float *y = peat_f32(a->out[0]), *mean_out = peat_f32(a->out[1]),
          *rstd_out = peat_f32(a->out[2]);
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        float mean = 0.0f, m2 = 0.0f;
        for (int64_t c = 0; c < C; c++) {
            float v = rnd(xr[c]);
            float d = v - mean;
            mean += d / (float)(c + 1);
            m2 += d * (v - mean);
        }
        float rstd = 1.0f / sqrtf(m2 / (float)C + eps);
        for (int64_t c = 0; c < C; c++)
            y[r * C + c] = rnd((rnd(xr[c]) - mean) * rstd * rnd(gamma[c]) + rnd(beta[c]));
        mean_out[r] = mean;
        rstd_out[r] = rstd;
    }
    return PEAT_OK;
}

static peat_status layernorm_welford(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    return ln_welford(a, round_none);
}

/* Storage stays F32: rounding at the boundary is numerically identical to bf16/fp16 storage. */
static peat_status layernorm_bf16(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    return ln_welford(a, peat_round_bf16);
}

static peat_status layernorm_fp16(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    return ln_welford(a, peat_round_f16);
}

/* dX = rstd (g - mean(g) - xhat mean(g xhat)) with g = dY gamma, both means from one pass per row;
 * dgamma = sum_r dY xhat and dbeta = sum_r dY are summed per block of LN_BWD_ROWS rows first. */
static peat_status layernorm_welford_bwd(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = peat_f32(a->in[0]), *gamma = peat_f32(a->in[1]), *mean = peat_f32(a->in[2]);
    const float *rstd = peat_f32(a->in[3]), *dy = peat_f32(a->in[4]);
    float *dx = peat_f32(a->out[0]), *dgamma = peat_f32(a->out[1]), *dbeta = peat_f32(a->out[2]);
    float *blk = malloc((size_t)(2 * C) * sizeof *blk);
    if (!blk)
        return PEAT_ERROR(PEAT_ERR_NOMEM, "%s: %lld floats of block partials", self->name,
                          (long long)(2 * C));
    float *bg = blk, *bb = blk + C;
    memset(dgamma, 0, (size_t)C * sizeof *dgamma);
    memset(dbeta, 0, (size_t)C * sizeof *dbeta);
    float invC = 1.0f / (float)C;
    for (int64_t r0 = 0; r0 < R; r0 += LN_BWD_ROWS) {
        int64_t r1 = r0 + LN_BWD_ROWS < R ? r0 + LN_BWD_ROWS : R;
        memset(blk, 0, (size_t)(2 * C) * sizeof *blk);
        for (int64_t r = r0; r < r1; r++) {
            const float *xr = x + r * C, *gr = dy + r * C;
            float mu = mean[r], rs = rstd[r], s1 = 0.0f, s2 = 0.0f;
            for (int64_t c = 0; c < C; c++) {
                float xh = (xr[c] - mu) * rs, g = gr[c] * gamma[c];
                s1 += g;
                s2 += g * xh;
                bg[c] += gr[c] * xh;
                bb[c] += gr[c];
            }
            s1 *= invC;
            s2 *= invC;
            for (int64_t c = 0; c < C; c++) {
                float xh = (xr[c] - mu) * rs;
                dx[r * C + c] = rs * (gr[c] * gamma[c] - s1 - xh * s2);
            }
        }
        for (int64_t c = 0; c < C; c++) {
            dgamma[c] += bg[c];
            dbeta[c] += bb[c];
        }
    }
    free(blk);
    return PEAT_OK;
}

#define LN_DESC(nm, fn_, dt, d)                                                                    \
    {                                                                                              \
        .name = nm, .op = PEAT_OP_LAYERNORM, .role = PEAT_ROLE_CANDIDATE,                          \
        .backend = PEAT_BACKEND_HOST, .in_dtype = dt, .out_dtype = PEAT_DTYPE_F32,                 \
        .acc_dtype = PEAT_DTYPE_F32, .cfg = {.threads = 1, .vec_width = 1}, .fn = fn_, .desc = d   \
    }

static const peat_kernel layernorm_kernels[] = {
    LN_DESC("layernorm_welford", layernorm_welford, PEAT_DTYPE_F32,
            "layernorm with Welford mean/variance in one pass, fp32"),
    LN_DESC("layernorm_bf16", layernorm_bf16, PEAT_DTYPE_BF16,
            "Welford layernorm, X/gamma/beta/Y in bf16, fp32 statistics"),
    LN_DESC("layernorm_fp16", layernorm_fp16, PEAT_DTYPE_F16,
            "Welford layernorm, X/gamma/beta/Y in fp16, fp32 statistics"),
    {.name = "layernorm_welford_bwd",
     .op = PEAT_OP_LAYERNORM_BWD,
     .role = PEAT_ROLE_CANDIDATE,
     .backend = PEAT_BACKEND_HOST,
     .in_dtype = PEAT_DTYPE_F32,
     .out_dtype = PEAT_DTYPE_F32,
     .acc_dtype = PEAT_DTYPE_F32,
     .cfg = {.tile_m = LN_BWD_ROWS, .threads = 1, .vec_width = 1},
     .fn = layernorm_welford_bwd,
     .desc = "fused layernorm backward, one pass per row, dgamma/dbeta summed per 32-row block"},
};

peat_status peat_kernels_register_layernorm(void)
{
    return peat_kernels_add_all(layernorm_kernels,
                                (int)(sizeof layernorm_kernels / sizeof layernorm_kernels[0]));
}
