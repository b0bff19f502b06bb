/* softmax.c: online-softmax forward (one max/sum pass), the exp2 forms of softmax and
 * cross-entropy that Triton and fused kernels ship, and a lane-split fused backward. */
#include "kernels/kcommon.h"
#include "peat/backend.h"
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

#define LOG2E_F 1.44269504f
#define LN2_F   0.693147181f

/* The exp2 form Triton's tl.exp and CUDA's fast exp compile to: the row's max, then
 * e = exp2f((x - m) * log2(e)), one sum, e / sum (a Triton fused softmax). */
static peat_status softmax_exp2(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = peat_f32(a->in[0]);
    float *y = peat_f32(a->out[0]);
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C, m = -INFINITY, d = 0.0f;
        for (int64_t c = 0; c < C; c++) m = xr[c] > m ? xr[c] : m;
        for (int64_t c = 0; c < C; c++) d += yr[c] = exp2f((xr[c] - m) * LOG2E_F);
        for (int64_t c = 0; c < C; c++) yr[c] = yr[c] / d;
    }
    return PEAT_OK;
}

/* loss = logsumexp(row) - row[target] in the exp2 form of fused cross-entropy kernels (Liger's,
 * Triton's): the max, d = sum exp2f((x - m) log2(e)), lse = m + log2f(d) ln 2. */
static peat_status cross_entropy_exp2(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = peat_f32(a->in[0]);
    const int32_t *t = peat_i32(a->in[1]);
    float *loss = peat_f32(a->out[0]);
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        float m = -INFINITY, d = 0.0f;
        for (int64_t c = 0; c < C; c++) m = xr[c] > m ? xr[c] : m;
        for (int64_t c = 0; c < C; c++) d += exp2f((xr[c] - m) * LOG2E_F);
        loss[r] = (m + log2f(d) * LN2_F) - xr[t[r]];
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
    PEAT_KERNELS_F32("softmax_online", PEAT_OP_SOFTMAX, softmax_online,
                     "softmax with a single online max/sum pass, then one normalise pass"),
    PEAT_KERNELS_F32("softmax_exp2", PEAT_OP_SOFTMAX, softmax_exp2,
                     "softmax as Triton compiles it: exp2((x - max) log2 e), one sum, a division"),
    PEAT_KERNELS_F32(
        "cross_entropy_exp2", PEAT_OP_CROSS_ENTROPY, cross_entropy_exp2,
        "fused cross-entropy in the exp2 form: max, sum of exp2, lse = m + log2(d) ln 2"),
    {.name = "softmax_online_bwd",
     .op = PEAT_OP_SOFTMAX_BWD,
     .role = PEAT_ROLE_CANDIDATE,
     .backend = PEAT_BACKEND_HOST,
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
