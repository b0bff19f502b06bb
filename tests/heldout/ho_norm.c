/* ho_norm.c: held-out layer norms (outputs Y, mean, rstd; biased variance) and their backward
 * (dX, dgamma, dbeta): eps added outside the square root, a mean summed relative to a shift
 * kept in fp16, a parallel Welford merge without its empty-lane guard, the last block of 64 rows
 * skipped, a backward without the mean term, dgamma/dbeta reduced in bf16, a transient upset; and
 * an honest two-pass kernel with Kahan sums. */
#include "heldout.h"

typedef struct ln_io {
    int64_t R, C;
    float eps;
    const float *X, *gm, *bt;
    float *Y, *M, *RS;
} ln_io;

static ln_io ln_of(const peat_args *a)
{
    ln_io l = {a->p.i[0],      a->p.i[1],       (float)a->p.f[0], a->in[0]->data, a->in[1]->data,
               a->in[2]->data, a->out[0]->data, a->out[1]->data,  a->out[2]->data};
    return l;
}

/* Writes row r's outputs from its mean and rstd. */
static void ln_emit(const ln_io *l, int64_t r, float mean, float rstd)
{
    const float *x = l->X + r * l->C;
    float *y = l->Y + r * l->C;
    for (int64_t j = 0; j < l->C; j++) y[j] = (x[j] - mean) * rstd * l->gm[j] + l->bt[j];
    l->M[r] = mean, l->RS[r] = rstd;
}

/* The plain two-pass row (mean, then the mean of squared deviations). */
static void ln_row(const ln_io *l, int64_t r)
{
    const float *x = l->X + r * l->C;
    float s = 0.0f, v = 0.0f;
    for (int64_t j = 0; j < l->C; j++) s += x[j];
    float mean = s / (float)l->C;
    for (int64_t j = 0; j < l->C; j++) v += (x[j] - mean) * (x[j] - mean);
    ln_emit(l, r, mean, 1.0f / sqrtf(v / (float)l->C + l->eps));
}

/* WRONG_RESULT. rstd = 1 / (sqrt(var) + eps): eps added outside the square root (the RMS-style
 * slip). A small formula error, relative size about eps / sigma - eps / (2 sigma^2), on every
 * element of Y and on rstd. */
static peat_status eps_outside(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    ln_io l = ln_of(a);
    for (int64_t r = 0; r < l.R; r++) {
        const float *x = l.X + r * l.C;
        float s = 0.0f, v = 0.0f;
        for (int64_t j = 0; j < l.C; j++) s += x[j];
        float mean = s / (float)l.C;
        for (int64_t j = 0; j < l.C; j++) v += (x[j] - mean) * (x[j] - mean);
        ln_emit(&l, r, mean, 1.0f / (sqrtf(v / (float)l.C) + l.eps));
    }
    return PEAT_OK;
}

/* RANGE. Two-pass layer norm whose first pass sums relative to a shift, to keep the running sum
 * small: K = the row's first element, kept in a half register, mean = K + sum(x - K) / C; the
 * second pass is the usual mean of squared deviations. The shift only has to lie near the data,
 * so its fp16 rounding costs nothing while |x0| stays within fp16's range; once |x0| passes 65504
 * the shift is Inf, x - K is -Inf and the row's mean, rstd and Y are NaN. */
static peat_status pivot_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    ln_io l = ln_of(a);
    for (int64_t r = 0; r < l.R; r++) {
        const float *x = l.X + r * l.C;
        float K = zoo_f16(x[0]), s1 = 0.0f, v = 0.0f;
        for (int64_t j = 0; j < l.C; j++) s1 += x[j] - K;
        float mean = K + s1 / (float)l.C;
        for (int64_t j = 0; j < l.C; j++) v += (x[j] - mean) * (x[j] - mean);
        ln_emit(&l, r, mean, 1.0f / sqrtf(v / (float)l.C + l.eps));
    }
    return PEAT_OK;
}

/* NAN. A 64-lane parallel Welford: element j goes to lane j % 64, then the lanes merge pairwise in
 * a tree, mean_ab = mean_a + delta n_b / n_ab, with no guard for two empty lanes: when C <= 62 some
 * pair of neighbouring lanes is empty, n_ab = 0 and the merge computes 0 / 0. The NaN then reaches
 * every lane, the row's mean, rstd and all of Y. Rows of 63 or more elements are right. */
static peat_status welford_empty(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    ln_io l = ln_of(a);
    for (int64_t r = 0; r < l.R; r++) {
        const float *x = l.X + r * l.C;
        float n[64] = {0}, mu[64] = {0}, m2[64] = {0};
        for (int64_t j = 0; j < l.C; j++) {
            int q = (int)(j % 64);
            n[q] += 1.0f;
            float d = x[j] - mu[q];
            mu[q] += d / n[q];
            m2[q] += d * (x[j] - mu[q]);
        }
        for (int w = 1; w < 64; w *= 2)
            for (int q = 0; q + w < 64; q += 2 * w) {
                float na = n[q], nb = n[q + w], nab = na + nb, delta = mu[q + w] - mu[q];
                mu[q] += delta * nb / nab;
                m2[q] += m2[q + w] + delta * delta * na * nb / nab;
                n[q] = nab;
            }
        ln_emit(&l, r, mu[0], 1.0f / sqrtf(m2[0] / (float)l.C + l.eps));
    }
    return PEAT_OK;
}

/* STRUCTURAL. Rows go in blocks of 64: the main loop covers (R - 1) / 64 full blocks and a tail
 * loop runs only when R % 64 != 0. When R is a multiple of 64 the last full block falls between the
 * two and is skipped: its rows (Y, mean, rstd) are never written. Other row counts are right. */
static peat_status tail_rows64(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    ln_io l = ln_of(a);
    int64_t main_rows = l.R > 0 ? (l.R - 1) / 64 * 64 : 0;
    for (int64_t r = 0; r < main_rows; r++) ln_row(&l, r);
    if (l.R % 64)
        for (int64_t r = main_rows; r < l.R; r++) ln_row(&l, r);
    return PEAT_OK;
}

/* Kahan-compensated sum of f(j) for j in [0, n). */
#define KAHAN(res, n, expr)                                                                        \
    do {                                                                                           \
        float s_ = 0.0f, c_ = 0.0f;                                                                \
        for (int64_t j = 0; j < (n); j++) {                                                        \
            float y_ = (expr)-c_, t_ = s_ + y_;                                                    \
            c_ = (t_ - s_) - y_;                                                                   \
            s_ = t_;                                                                               \
        }                                                                                          \
        (res) = s_;                                                                                \
    } while (0)

/* Honest (PASS). Two-pass layer norm whose two sums (of x, of (x - mean)^2) are Kahan-compensated;
 * fp32 throughout. */
static peat_status kahan(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    ln_io l = ln_of(a);
    for (int64_t r = 0; r < l.R; r++) {
        const float *x = l.X + r * l.C;
        float s, v;
        KAHAN(s, l.C, x[j]);
        float mean = s / (float)l.C;
        KAHAN(v, l.C, (x[j] - mean) * (x[j] - mean));
        ln_emit(&l, r, mean, 1.0f / sqrtf(v / (float)l.C + l.eps));
    }
    return PEAT_OK;
}

/* ---- backward: in X, gamma, mean, rstd, dY ; out dX, dgamma, dbeta ---- */

typedef float (*rnd_fn)(float);
static float keep(float x)
{
    return x;
}

/* The backward with the mean term sg kept or not, and dgamma / dbeta accumulated through acc. */
static void ln_bwd(const peat_args *a, int with_mean, rnd_fn acc)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *X = a->in[0]->data, *gm = a->in[1]->data, *mean = a->in[2]->data,
                *rstd = a->in[3]->data, *dY = a->in[4]->data;
    float *dX = a->out[0]->data, *dg = a->out[1]->data, *db = a->out[2]->data;
    for (int64_t j = 0; j < C; j++) dg[j] = 0.0f, db[j] = 0.0f;
    for (int64_t r = 0; r < R; r++) {
        const float *x = X + r * C, *dy = dY + r * C;
        float sg = 0.0f, sgx = 0.0f;
        for (int64_t j = 0; j < C; j++) {
            float xh = (x[j] - mean[r]) * rstd[r], g = dy[j] * gm[j];
            sg += g, sgx += g * xh;
        }
        sg /= (float)C, sgx /= (float)C;
        for (int64_t j = 0; j < C; j++) {
            float xh = (x[j] - mean[r]) * rstd[r], g = dy[j] * gm[j];
            dX[r * C + j] = with_mean ? rstd[r] * (g - sg - xh * sgx) : rstd[r] * (g - xh * sgx);
            dg[j] = acc(dg[j] + dy[j] * xh), db[j] = acc(db[j] + dy[j]);
        }
    }
}

/* WRONG_RESULT. dX = rstd (g - mean(g) - xhat mean(g xhat)) with the mean(g) term dropped (the
 * gradient through the mean forgotten): off by rstd mean(g) on every element of a row. */
static peat_status bwd_no_mean(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    ln_bwd(a, 0, keep);
    return PEAT_OK;
}

/* REDUCED_PRECISION. dX is fp32, but the cross-row reductions dgamma and dbeta accumulate in bf16
 * buffers (rounded after every row). */
static peat_status bwd_dgamma_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    ln_bwd(a, 1, zoo_bf16);
    return PEAT_OK;
}

/* BITFLIP. A right backward, but in about one call in three (a fresh draw per call) one element of
 * dX has bit 23 (the exponent's lowest) inverted: that gradient doubles or halves. */
static peat_status bwd_flip(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    ln_bwd(a, 1, keep);
    int64_t n = a->p.i[0] * a->p.i[1];
    uint64_t h = zoo_upset_draw();
    if (h % 3 == 0 && n > 0) {
        float *dX = a->out[0]->data;
        int64_t e = (int64_t)((h >> 8) % (uint64_t)n);
        dX[e] = ho_flip(dX[e], 23);
    }
    return PEAT_OK;
}

int ho_register_norm(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("ho_layernorm_eps_outside", PEAT_OP_LAYERNORM, eps_outside,
                   "rstd = 1 / (sqrt(var) + eps): eps outside the square root"),
        ZOO_KERNEL("ho_layernorm_pivot_f16", PEAT_OP_LAYERNORM, pivot_f16,
                   "mean summed relative to a shift kept in fp16: NaN once |x0| > 65504"),
        ZOO_KERNEL("ho_layernorm_welford_empty", PEAT_OP_LAYERNORM, welford_empty,
                   "64-lane Welford merging two empty lanes as 0/0 (C <= 62)"),
        ZOO_KERNEL("ho_layernorm_tail_rows64", PEAT_OP_LAYERNORM, tail_rows64,
                   "last block of 64 rows skipped when R % 64 == 0"),
        ZOO_KERNEL("ho_layernorm_kahan", PEAT_OP_LAYERNORM, kahan,
                   "honest: two-pass with Kahan-compensated sums"),
        ZOO_KERNEL("ho_layernorm_bwd_no_mean", PEAT_OP_LAYERNORM_BWD, bwd_no_mean,
                   "dX without the mean(dY gamma) term"),
        ZOO_KERNEL("ho_layernorm_bwd_dgamma_bf16", PEAT_OP_LAYERNORM_BWD, bwd_dgamma_bf16,
                   "dgamma and dbeta accumulated over rows in bf16"),
        ZOO_KERNEL("ho_layernorm_bwd_flip", PEAT_OP_LAYERNORM_BWD, bwd_flip,
                   "one dX element has bit 23 flipped in ~1 call of 3"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
