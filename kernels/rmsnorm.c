/* rmsnorm.c: RMSNorm candidates: the forward with the sum of squares over 8 lanes (a vector
 * unit's or a warp's partial sums, joined pairwise) and the reciprocal square root folded into
 * gamma; a fused backward whose dgamma is summed per block of rows first (as a GPU kernel sums
 * per thread block, then across blocks). */
#include "kernels/kcommon.h"
#include "kernels/kernels.h"
#include "peat/backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RMS_LANES    8
#define RMS_BWD_ROWS 32

/* sum over the row of f(j) in RMS_LANES interleaved partial sums, joined pairwise */
static float lanes_join(float *s)
{
    for (int w = RMS_LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) s[l] += s[l + w];
    return s[0];
}

static peat_status rmsnorm_lanes(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    float eps = (float)a->p.f[0], invC = 1.0f / (float)C;
    const float *x = peat_f32(a->in[0]), *g = peat_f32(a->in[1]);
    float *y = peat_f32(a->out[0]), *rstd = peat_f32(a->out[1]);
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        float s[RMS_LANES] = {0};
        for (int64_t j = 0; j < C; j++) s[j % RMS_LANES] += xr[j] * xr[j];
        float rs = 1.0f / sqrtf(lanes_join(s) * invC + eps);
        for (int64_t j = 0; j < C; j++) y[r * C + j] = xr[j] * (rs * g[j]);
        rstd[r] = rs;
    }
    return PEAT_OK;
}

/* dX = rstd g - x (rstd^3 mean(g x)) with g = dY gamma (the coefficient once per row);
 * dgamma = sum_r dY x rstd, per block of RMS_BWD_ROWS rows first. */
static peat_status rmsnorm_lanes_bwd(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = peat_f32(a->in[0]), *gam = peat_f32(a->in[1]), *rstd = peat_f32(a->in[2]);
    const float *dy = peat_f32(a->in[3]);
    float *dx = peat_f32(a->out[0]), *dg = peat_f32(a->out[1]), invC = 1.0f / (float)C;
    float *blk = malloc((size_t)C * sizeof *blk);
    if (!blk)
        return PEAT_ERROR(PEAT_ERR_NOMEM, "%s: %lld floats of block partials", self->name,
                          (long long)C);
    memset(dg, 0, (size_t)C * sizeof *dg);
    for (int64_t r0 = 0; r0 < R; r0 += RMS_BWD_ROWS) {
        int64_t r1 = r0 + RMS_BWD_ROWS < R ? r0 + RMS_BWD_ROWS : R;
        memset(blk, 0, (size_t)C * sizeof *blk);
        for (int64_t r = r0; r < r1; r++) {
            const float *xr = x + r * C, *gr = dy + r * C;
            float rs = rstd[r], s[RMS_LANES] = {0};
            for (int64_t j = 0; j < C; j++) {
                s[j % RMS_LANES] += gr[j] * gam[j] * xr[j];
                blk[j] += gr[j] * xr[j] * rs;
            }
            float c = rs * rs * rs * (lanes_join(s) * invC);
            for (int64_t j = 0; j < C; j++) dx[r * C + j] = rs * (gr[j] * gam[j]) - c * xr[j];
        }
        for (int64_t j = 0; j < C; j++) dg[j] += blk[j];
    }
    free(blk);
    return PEAT_OK;
}

static const peat_kernel rmsnorm_kernels[] = {
    {.name = "rmsnorm_lanes",
     .op = PEAT_OP_RMSNORM,
     .role = PEAT_ROLE_CANDIDATE,
     .backend = PEAT_BACKEND_HOST,
     .in_dtype = PEAT_DTYPE_F32,
     .out_dtype = PEAT_DTYPE_F32,
     .acc_dtype = PEAT_DTYPE_F32,
     .cfg = {.threads = 1, .vec_width = RMS_LANES},
     .fn = rmsnorm_lanes,
     .desc = "RMSNorm, sum of squares in 8 lanes joined pairwise, rstd folded into gamma, fp32"},
    {.name = "rmsnorm_lanes_bwd",
     .op = PEAT_OP_RMSNORM_BWD,
     .role = PEAT_ROLE_CANDIDATE,
     .backend = PEAT_BACKEND_HOST,
     .in_dtype = PEAT_DTYPE_F32,
     .out_dtype = PEAT_DTYPE_F32,
     .acc_dtype = PEAT_DTYPE_F32,
     .cfg = {.tile_m = RMS_BWD_ROWS, .threads = 1, .vec_width = RMS_LANES},
     .fn = rmsnorm_lanes_bwd,
     .desc = "fused RMSNorm backward, 8-lane row sums, dgamma summed per 32-row block"},
};

peat_status peat_kernels_register_rmsnorm(void)
{
    return peat_kernels_add_all(rmsnorm_kernels,
                                (int)(sizeof rmsnorm_kernels / sizeof rmsnorm_kernels[0]));
}
