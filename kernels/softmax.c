/* softmax.c: online-softmax forward (one max/sum pass) and a lane-split fused backward. */
#include "kernels/kcommon.h"
#include "kernels/kernels.h"

#include <math.h>

/* Lanes of the backward dot product: a SIMD kernel keeps this many partial sums. */
#define SOFTMAX_BWD_LANES 8

/* Milakov & Gimelshein's online normaliser: the running max m and the running sum d of
 * exp(x - m) are updated together in one read of the row (d is rescaled when m grows), then one
 * pass writes exp(x - m) * (1/d). */
static peat_status softmax_online(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = peat_f32(a->in[0]);
    float *y = peat_f32(a->out[0]);
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        float m = -INFINITY, d = 0.0f;
        for (int64_t c = 0; c < C; c++) {
            float v = xr[c];
            if (v > m) {
                d = d * expf(m - v) + 1.0f;
                m = v;
            } else if (v > -INFINITY) { /* -inf - -inf would poison d with NaN */
                d += expf(v - m);
            }
        }
        float inv = 1.0f / d;
        for (int64_t c = 0; c < C; c++) yr[c] = expf(xr[c] - m) * inv;
    }
    return PEAT_OK;
}

/* dX = Y (dY - sum(dY Y)): the dot product is split over SOFTMAX_BWD_LANES interleaved partial
 * sums, combined pairwise at the end, as a vectorised kernel does. */
static peat_status softmax_online_bwd(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *y = peat_f32(a->in[0]), *dy = peat_f32(a->in[1]);
    float *dx = peat_f32(a->out[0]);
    for (int64_t r = 0; r < R; r++) {
        const float *yr = y + r * C, *gr = dy + r * C;
        float lane[SOFTMAX_BWD_LANES] = {0};
        for (int64_t c = 0; c < C; c++) lane[c % SOFTMAX_BWD_LANES] += gr[c] * yr[c];
        for (int w = SOFTMAX_BWD_LANES / 2; w > 0; w /= 2)
            for (int l = 0; l < w; l++) lane[l] += lane[l + w];
        float s = lane[0];
        for (int64_t c = 0; c < C; c++) dx[r * C + c] = yr[c] * (gr[c] - s);
    }
    return PEAT_OK;
}

static const peat_kernel softmax_kernels[] = {
    {.name = "softmax_online",
     .op = PEAT_OP_SOFTMAX,
     .role = PEAT_ROLE_CANDIDATE,
     .backend = "cpu",
     .in_dtype = PEAT_DTYPE_F32,
     .out_dtype = PEAT_DTYPE_F32,
     .acc_dtype = PEAT_DTYPE_F32,
     .cfg = {.threads = 1, .vec_width = 1},
     .fn = softmax_online,
     .desc = "softmax with a single online max/sum pass, then one normalise pass"},
    {.name = "softmax_online_bwd",
     .op = PEAT_OP_SOFTMAX_BWD,
     .role = PEAT_ROLE_CANDIDATE,
     .backend = "cpu",
     .in_dtype = PEAT_DTYPE_F32,
     .out_dtype = PEAT_DTYPE_F32,
     .acc_dtype = PEAT_DTYPE_F32,
     .cfg = {.threads = 1, .vec_width = SOFTMAX_BWD_LANES},
     .fn = softmax_online_bwd,
     .desc = "softmax backward, dot(dY,Y) over 8 interleaved lanes"},
};

peat_status peat_kernels_register_softmax(void)
{
    return peat_kernels_add_all(softmax_kernels,
                                (int)(sizeof softmax_kernels / sizeof softmax_kernels[0]));
}
