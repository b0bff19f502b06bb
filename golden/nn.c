/* nn.c: exact (fp64) and golden (fp32, sequential) kernels of the non-GEMM, non-attention ops. */
#include "golden/golden.h"
#include "golden/refkit.h"

#include <math.h>
#include <string.h>

/* Two versions of every op follow. The exact one loads its float inputs as doubles and does all
 * arithmetic with double and libm's double functions. The golden one is the plainest fp32 code:
 * float storage, float accumulators, terms added in index order, one thread. Both write every
 * element of every output. */

#define INV_SQRT2   0.70710678118654752440
#define INV_SQRT2PI 0.39894228040143267794

/* Loads inputs 0..n-1 of a as doubles (all float) or fails. */
#define LOAD(n, ...)                                                                               \
    double *in_[n];                                                                                \
    do {                                                                                           \
        static const int ix_[n] = {__VA_ARGS__};                                                   \
        PEAT_TRY(peat_golden_load_n(a, n, ix_, in_));                                              \
    } while (0)
#define UNLOAD(n) peat_golden_free_n(n, in_)

/* ---- bias_add: i = R, C, S ; Y[r,c,s] = X[r,c,s] + b[c] ---- */

static peat_status bias_add_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    LOAD(2, 0, 1);
    double *y = peat_f64(a->out[0]);
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (r * C + c) * S + s;
                y[i] = in_[0][i] + in_[1][c];
            }
    UNLOAD(2);
    return PEAT_OK;
}

static peat_status bias_add_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    const float *x = peat_f32(a->in[0]), *b = peat_f32(a->in[1]);
    float *y = peat_f32(a->out[0]);
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (r * C + c) * S + s;
                y[i] = x[i] + b[c];
            }
    return PEAT_OK;
}

/* ---- bias_add_bwd: db[c] = sum over r, then s, of dY[r,c,s] ---- */

static peat_status bias_add_bwd_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    LOAD(1, 0);
    double *db = peat_f64(a->out[0]);
    for (int64_t c = 0; c < C; c++) {
        double acc = 0.0;
        for (int64_t r = 0; r < R; r++)
            for (int64_t s = 0; s < S; s++) acc += in_[0][(r * C + c) * S + s];
        db[c] = acc;
    }
    UNLOAD(1);
    return PEAT_OK;
}

static peat_status bias_add_bwd_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    const float *dy = peat_f32(a->in[0]);
    float *db = peat_f32(a->out[0]);
    for (int64_t c = 0; c < C; c++) {
        float acc = 0.0f;
        for (int64_t r = 0; r < R; r++)
            for (int64_t s = 0; s < S; s++) acc += dy[(r * C + c) * S + s];
        db[c] = acc;
    }
    return PEAT_OK;
}

/* ---- relu: Y = max(X, 0) ; relu_bwd: dX = dY * (X > 0) ---- */

static peat_status relu_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t n = a->p.i[0];
    LOAD(1, 0);
    double *y = peat_f64(a->out[0]);
    for (int64_t i = 0; i < n; i++) y[i] = in_[0][i] > 0.0 ? in_[0][i] : 0.0;
    UNLOAD(1);
    return PEAT_OK;
}

static peat_status relu_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t n = a->p.i[0];
    const float *x = peat_f32(a->in[0]);
    float *y = peat_f32(a->out[0]);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    return PEAT_OK;
}

static peat_status relu_bwd_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t n = a->p.i[0];
    LOAD(2, 0, 1);
    double *dx = peat_f64(a->out[0]);
    for (int64_t i = 0; i < n; i++) dx[i] = in_[0][i] > 0.0 ? in_[1][i] : 0.0;
    UNLOAD(2);
    return PEAT_OK;
}

static peat_status relu_bwd_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t n = a->p.i[0];
    const float *x = peat_f32(a->in[0]), *dy = peat_f32(a->in[1]);
    float *dx = peat_f32(a->out[0]);
    for (int64_t i = 0; i < n; i++) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
    return PEAT_OK;
}

/* ---- gelu: Y = 0.5 X (1 + erf(X/sqrt2)) ; gelu_bwd: dX = dY (Phi(X) + X phi(X)) ---- */

/* The exact kernels use 1 + erf(z) = erfc(-z): for X << 0 the sum 1 + erf cancels to nothing even
 * in double, and the reference must stay accurate where the working-precision code is not. */
static peat_status gelu_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t n = a->p.i[0];
    LOAD(1, 0);
    double *y = peat_f64(a->out[0]);
    for (int64_t i = 0; i < n; i++) {
        double x = in_[0][i];
        y[i] = 0.5 * x * erfc(-x * INV_SQRT2);
    }
    UNLOAD(1);
    return PEAT_OK;
}

static peat_status gelu_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t n = a->p.i[0];
    const float *x = peat_f32(a->in[0]);
    float *y = peat_f32(a->out[0]);
    for (int64_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)INV_SQRT2));
    return PEAT_OK;
}

static peat_status gelu_bwd_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t n = a->p.i[0];
    LOAD(2, 0, 1);
    double *dx = peat_f64(a->out[0]);
    for (int64_t i = 0; i < n; i++) {
        double x = in_[0][i];
        double cdf = 0.5 * erfc(-x * INV_SQRT2), pdf = exp(-0.5 * x * x) * INV_SQRT2PI;
        dx[i] = in_[1][i] * (cdf + x * pdf);
    }
    UNLOAD(2);
    return PEAT_OK;
}

static peat_status gelu_bwd_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t n = a->p.i[0];
    const float *x = peat_f32(a->in[0]), *dy = peat_f32(a->in[1]);
    float *dx = peat_f32(a->out[0]);
    for (int64_t i = 0; i < n; i++) {
        float cdf = 0.5f * (1.0f + erff(x[i] * (float)INV_SQRT2));
        float pdf = expf(-0.5f * x[i] * x[i]) * (float)INV_SQRT2PI;
        dx[i] = dy[i] * (cdf + x[i] * pdf);
    }
    return PEAT_OK;
}

/* ---- softmax: i = R, C ; each row: Y = exp(X - max) / sum exp(X - max) ---- */

static peat_status softmax_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    LOAD(1, 0);
    double *y = peat_f64(a->out[0]);
    for (int64_t r = 0; r < R; r++) {
        const double *x = in_[0] + r * C;
        double *yr = y + r * C, mx = x[0], sum = 0.0;
        for (int64_t j = 1; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) sum += yr[j] = exp(x[j] - mx);
        for (int64_t j = 0; j < C; j++) yr[j] /= sum;
    }
    UNLOAD(1);
    return PEAT_OK;
}

static peat_status softmax_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    for (int64_t r = 0; r < R; r++) {
        const float *x = peat_f32(a->in[0]) + r * C;
        float *y = peat_f32(a->out[0]) + r * C, mx = x[0], sum = 0.0f;
        for (int64_t j = 1; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) sum += y[j] = expf(x[j] - mx);
        for (int64_t j = 0; j < C; j++) y[j] /= sum;
    }
    return PEAT_OK;
}

/* ---- softmax_bwd: in Y, dY ; dX = Y (dY - sum(dY Y)) per row ---- */

static peat_status softmax_bwd_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    LOAD(2, 0, 1);
    double *dx = peat_f64(a->out[0]);
    for (int64_t r = 0; r < R; r++) {
        const double *y = in_[0] + r * C, *dy = in_[1] + r * C;
        double dot = 0.0;
        for (int64_t j = 0; j < C; j++) dot += dy[j] * y[j];
        for (int64_t j = 0; j < C; j++) dx[r * C + j] = y[j] * (dy[j] - dot);
    }
    UNLOAD(2);
    return PEAT_OK;
}

static peat_status softmax_bwd_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    for (int64_t r = 0; r < R; r++) {
        const float *y = peat_f32(a->in[0]) + r * C, *dy = peat_f32(a->in[1]) + r * C;
        float *dx = peat_f32(a->out[0]) + r * C, dot = 0.0f;
        for (int64_t j = 0; j < C; j++) dot += dy[j] * y[j];
        for (int64_t j = 0; j < C; j++) dx[j] = y[j] * (dy[j] - dot);
    }
    return PEAT_OK;
}

/* ---- layernorm: i = R, C ; f = eps ; in X, gamma, beta ; out Y, mean, rstd (two-pass var) ---- */

static peat_status layernorm_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    double eps = a->p.f[0];
    LOAD(3, 0, 1, 2);
    double *y = peat_f64(a->out[0]), *mean = peat_f64(a->out[1]), *rstd = peat_f64(a->out[2]);
    for (int64_t r = 0; r < R; r++) {
        const double *x = in_[0] + r * C;
        double m = 0.0, var = 0.0;
        for (int64_t j = 0; j < C; j++) m += x[j];
        m /= (double)C;
        for (int64_t j = 0; j < C; j++) var += (x[j] - m) * (x[j] - m);
        var /= (double)C;
        double rs = 1.0 / sqrt(var + eps);
        for (int64_t j = 0; j < C; j++) y[r * C + j] = (x[j] - m) * rs * in_[1][j] + in_[2][j];
        mean[r] = m, rstd[r] = rs;
    }
    UNLOAD(3);
    return PEAT_OK;
}

static peat_status layernorm_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    float eps = (float)a->p.f[0];
    const float *g = peat_f32(a->in[1]), *b = peat_f32(a->in[2]);
    for (int64_t r = 0; r < R; r++) {
        const float *x = peat_f32(a->in[0]) + r * C;
        float *y = peat_f32(a->out[0]) + r * C, m = 0.0f, var = 0.0f;
        for (int64_t j = 0; j < C; j++) m += x[j];
        m /= (float)C;
        for (int64_t j = 0; j < C; j++) var += (x[j] - m) * (x[j] - m);
        var /= (float)C;
        float rs = 1.0f / sqrtf(var + eps);
        for (int64_t j = 0; j < C; j++) y[j] = (x[j] - m) * rs * g[j] + b[j];
        peat_f32(a->out[1])[r] = m, peat_f32(a->out[2])[r] = rs;
    }
    return PEAT_OK;
}

/* ---- layernorm_bwd: in X, gamma, mean, rstd, dY ; out dX, dgamma, dbeta ----
 * xhat = (x - mean) rstd, g = dY gamma:  dX = rstd (g - mean_C(g) - xhat mean_C(g xhat)),
 * dgamma = sum_r dY xhat, dbeta = sum_r dY. */

static peat_status layernorm_bwd_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    LOAD(5, 0, 1, 2, 3, 4);
    const double *X = in_[0], *gam = in_[1], *mean = in_[2], *rstd = in_[3], *dY = in_[4];
    double *dx = peat_f64(a->out[0]), *dg = peat_f64(a->out[1]), *db = peat_f64(a->out[2]);
    for (int64_t j = 0; j < C; j++) dg[j] = 0.0, db[j] = 0.0;
    for (int64_t r = 0; r < R; r++) {
        const double *x = X + r * C, *dy = dY + r * C;
        double sg = 0.0, sgx = 0.0;
        for (int64_t j = 0; j < C; j++) {
            double xh = (x[j] - mean[r]) * rstd[r], g = dy[j] * gam[j];
            sg += g, sgx += g * xh;
        }
        sg /= (double)C, sgx /= (double)C;
        for (int64_t j = 0; j < C; j++) {
            double xh = (x[j] - mean[r]) * rstd[r], g = dy[j] * gam[j];
            dx[r * C + j] = rstd[r] * (g - sg - xh * sgx);
            dg[j] += dy[j] * xh, db[j] += dy[j];
        }
    }
    UNLOAD(5);
    return PEAT_OK;
}

static peat_status layernorm_bwd_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *gam = peat_f32(a->in[1]), *mean = peat_f32(a->in[2]), *rstd = peat_f32(a->in[3]);
    float *dg = peat_f32(a->out[1]), *db = peat_f32(a->out[2]);
    for (int64_t j = 0; j < C; j++) dg[j] = 0.0f, db[j] = 0.0f;
    for (int64_t r = 0; r < R; r++) {
        const float *x = peat_f32(a->in[0]) + r * C, *dy = peat_f32(a->in[4]) + r * C;
        float *dx = peat_f32(a->out[0]) + r * C, sg = 0.0f, sgx = 0.0f;
        for (int64_t j = 0; j < C; j++) {
            float xh = (x[j] - mean[r]) * rstd[r], g = dy[j] * gam[j];
            sg += g, sgx += g * xh;
        }
        sg /= (float)C, sgx /= (float)C;
        for (int64_t j = 0; j < C; j++) {
            float xh = (x[j] - mean[r]) * rstd[r], g = dy[j] * gam[j];
            dx[j] = rstd[r] * (g - sg - xh * sgx);
            dg[j] += dy[j] * xh, db[j] += dy[j];
        }
    }
    return PEAT_OK;
}

/* ---- embedding: i = N, V, D ; Y[n,:] = table[idx[n],:] ; bwd scatter-adds dY into zeros ---- */

static peat_status embedding_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t N = a->p.i[0], D = a->p.i[2];
    const int32_t *idx = peat_i32(a->in[1]);
    LOAD(1, 0);
    double *y = peat_f64(a->out[0]);
    for (int64_t n = 0; n < N; n++)
        for (int64_t d = 0; d < D; d++) y[n * D + d] = in_[0][(int64_t)idx[n] * D + d];
    UNLOAD(1);
    return PEAT_OK;
}

static peat_status embedding_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t N = a->p.i[0], D = a->p.i[2];
    const int32_t *idx = peat_i32(a->in[1]);
    const float *tab = peat_f32(a->in[0]);
    float *y = peat_f32(a->out[0]);
    /* a row is copied whole: the same bits as an element loop, but without its exit branch, which
     * this project's CPU mispredicts on rows of 20 elements or more (the loop ran 0.26 ns an
     * element at D = 19 and 0.58 ns at D = 20, a step no size model can place; memcpy goes smoothly
     * from 0.57 ns at D = 5 to 0.05 ns at D = 52) */
    for (int64_t n = 0; n < N; n++)
        memcpy(y + n * D, tab + (int64_t)idx[n] * D, (size_t)D * sizeof *y);
    return PEAT_OK;
}

static peat_status embedding_bwd_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t N = a->p.i[0], V = a->p.i[1], D = a->p.i[2];
    const int32_t *idx = peat_i32(a->in[0]);
    LOAD(1, 1);
    double *dt = peat_f64(a->out[0]);
    for (int64_t i = 0; i < V * D; i++) dt[i] = 0.0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t d = 0; d < D; d++) dt[(int64_t)idx[n] * D + d] += in_[0][n * D + d];
    UNLOAD(1);
    return PEAT_OK;
}

static peat_status embedding_bwd_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t N = a->p.i[0], V = a->p.i[1], D = a->p.i[2];
    const int32_t *idx = peat_i32(a->in[0]);
    const float *dy = peat_f32(a->in[1]);
    float *dt = peat_f32(a->out[0]);
    for (int64_t i = 0; i < V * D; i++) dt[i] = 0.0f;
    for (int64_t n = 0; n < N; n++)
        for (int64_t d = 0; d < D; d++) dt[(int64_t)idx[n] * D + d] += dy[n * D + d];
    return PEAT_OK;
}

/* ---- cross_entropy: i = R, C ; loss[r] = logsumexp(row) - row[target] ---- */

static peat_status cross_entropy_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    const int32_t *tgt = peat_i32(a->in[1]);
    LOAD(1, 0);
    double *loss = peat_f64(a->out[0]);
    for (int64_t r = 0; r < R; r++) {
        const double *x = in_[0] + r * C;
        double mx = x[0], sum = 0.0;
        for (int64_t j = 1; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) sum += exp(x[j] - mx);
        loss[r] = log(sum) + mx - x[tgt[r]];
    }
    UNLOAD(1);
    return PEAT_OK;
}

static peat_status cross_entropy_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    const int32_t *tgt = peat_i32(a->in[1]);
    float *loss = peat_f32(a->out[0]);
    for (int64_t r = 0; r < R; r++) {
        const float *x = peat_f32(a->in[0]) + r * C;
        float mx = x[0], sum = 0.0f;
        for (int64_t j = 1; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) sum += expf(x[j] - mx);
        loss[r] = logf(sum) + mx - x[tgt[r]];
    }
    return PEAT_OK;
}

/* ---- cross_entropy_bwd: in logits, target, dloss ; dlogits = dloss (softmax - onehot) ---- */

static peat_status cross_entropy_bwd_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    const int32_t *tgt = peat_i32(a->in[1]);
    LOAD(2, 0, 2);
    double *dl = peat_f64(a->out[0]);
    for (int64_t r = 0; r < R; r++) {
        const double *x = in_[0] + r * C;
        double mx = x[0], sum = 0.0;
        for (int64_t j = 1; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) sum += exp(x[j] - mx);
        for (int64_t j = 0; j < C; j++)
            dl[r * C + j] = in_[1][r] * (exp(x[j] - mx) / sum - (j == tgt[r] ? 1.0 : 0.0));
    }
    UNLOAD(2);
    return PEAT_OK;
}

static peat_status cross_entropy_bwd_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    const int32_t *tgt = peat_i32(a->in[1]);
    const float *dloss = peat_f32(a->in[2]);
    for (int64_t r = 0; r < R; r++) {
        const float *x = peat_f32(a->in[0]) + r * C;
        float *dl = peat_f32(a->out[0]) + r * C, mx = x[0], sum = 0.0f;
        for (int64_t j = 1; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) sum += expf(x[j] - mx);
        for (int64_t j = 0; j < C; j++)
            dl[j] = dloss[r] * (expf(x[j] - mx) / sum - (j == tgt[r] ? 1.0f : 0.0f));
    }
    return PEAT_OK;
}

/* ---- reduce: i = R, C, mode ; Y[r] = sum of row r (mode 0) or its mean (mode 1) ---- */

/* Row sums of an R x C matrix, each row's terms added in index order in T. Four rows go side by
 * side, each its own chain: the same bits as one row at a time, but the additions of four rows
 * overlap whatever C is (one row's chain of dependent adds overlapped the next row's only while
 * both fit the CPU's reorder window: 0.27-0.35 ns an element, varying with C; side by side,
 * 0.12-0.14 ns from C = 12 on). */
#define ROW_SUMS(name, T)                                                                          \
    static void name(int64_t R, int64_t C, const T *x, T *y)                                       \
    {                                                                                              \
        int64_t r = 0;                                                                             \
        for (; r + 4 <= R; r += 4) {                                                               \
            const T *x0 = x + r * C, *x1 = x0 + C, *x2 = x1 + C, *x3 = x2 + C;                     \
            T s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                                      \
            for (int64_t j = 0; j < C; j++) s0 += x0[j], s1 += x1[j], s2 += x2[j], s3 += x3[j];    \
            y[r] = s0, y[r + 1] = s1, y[r + 2] = s2, y[r + 3] = s3;                                \
        }                                                                                          \
        for (; r < R; r++) {                                                                       \
            T s = 0;                                                                               \
            for (int64_t j = 0; j < C; j++) s += x[r * C + j];                                     \
            y[r] = s;                                                                              \
        }                                                                                          \
    }
ROW_SUMS(row_sums_f64, double)
ROW_SUMS(row_sums_f32, float)

static peat_status reduce_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    LOAD(1, 0);
    double *y = peat_f64(a->out[0]);
    row_sums_f64(R, C, in_[0], y);
    if (a->p.i[2] == 1)
        for (int64_t r = 0; r < R; r++) y[r] /= (double)C;
    UNLOAD(1);
    return PEAT_OK;
}

static peat_status reduce_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = peat_f32(a->in[0]);
    float *y = peat_f32(a->out[0]);
    row_sums_f32(R, C, x, y);
    if (a->p.i[2] == 1)
        for (int64_t r = 0; r < R; r++) y[r] /= (float)C;
    return PEAT_OK;
}

/* ---- conv2d family: i = N, C, H, W, O, KH, KW, stride, pad ; NCHW, zero padding ---- */

typedef struct conv_dims {
    int64_t N, C, H, W, O, KH, KW, s, p, OH, OW;
} conv_dims;

static conv_dims conv_dims_of(const peat_op_params *p)
{
    conv_dims d = {p->i[0], p->i[1], p->i[2], p->i[3], p->i[4], p->i[5],
                   p->i[6], p->i[7], p->i[8], 0,       0};
    d.OH = (d.H + 2 * d.p - d.KH) / d.s + 1;
    d.OW = (d.W + 2 * d.p - d.KW) / d.s + 1;
    return d;
}

/* Output row o and kernel row k read input row o*s - p + k. Each loop below visits only the
 * terms whose input lies inside the image, in the natural order, so the sums are the ones a loop
 * checking every term adds, bit for bit (tests/test_golden.c), without a branch per term: those
 * branches ran the same call at two or three speeds 10-30% apart from one timing to the next
 * (a conv2d_golden call 0.25-0.36 ms). */

static int64_t floor_div(int64_t a, int64_t b)
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/* The kernel taps k in [*lo, *hi) that output o reads inside [0, lim): 0 <= o*s - p + k < lim. */
static void conv_taps(int64_t o, int64_t s, int64_t p, int64_t lim, int64_t K, int64_t *lo,
                      int64_t *hi)
{
    int64_t base = o * s - p;
    *lo = base < 0 ? -base : 0;
    *hi = lim - base < K ? lim - base : K;
    if (*hi < *lo) *hi = *lo;
}

/* The outputs o in [*lo, *hi) of [0, O) that tap k reads inside [0, lim): 0 <= o*s - p + k <
 * lim, i.e. ceil((p - k) / s) <= o <= floor((lim - 1 + p - k) / s). */
static void conv_outs(int64_t k, int64_t s, int64_t p, int64_t lim, int64_t O, int64_t *lo,
                      int64_t *hi)
{
    int64_t a = -floor_div(k - p, s), b = floor_div(lim - 1 + p - k, s) + 1;
    *lo = a > 0 ? a : 0;
    *hi = b < O ? b : O;
    if (*hi < *lo) *hi = *lo;
}

/* The taps of input position i that land on an output in [0, O): k <= i + p, (i + p - k) % s
 * == 0 and (i + p - k) / s < O; the first such k in *k0 (ascending by s), their count returned.
 * Output o = (i + p - k) / s falls by one from tap to tap. */
static int64_t conv_gather(int64_t i, int64_t s, int64_t p, int64_t O, int64_t K, int64_t *k0)
{
    int64_t t = i + p, first = t % s, least = t - (O - 1) * s; /* k >= least keeps o < O */
    if (first < least) first += (least - first + s - 1) / s * s;
    *k0 = first;
    int64_t last = t < K - 1 ? t : K - 1;
    return last >= first ? (last - first) / s + 1 : 0;
}

#define X_AT(n, c, h, w)   (((n)*d.C + (c)) * d.H + (h)) * d.W + (w)
#define W_AT(o, c, kh, kw) (((o)*d.C + (c)) * d.KH + (kh)) * d.KW + (kw)
#define Y_AT(n, o, oh, ow) (((n)*d.O + (o)) * d.OH + (oh)) * d.OW + (ow)

/* The three conv directions, each once per precision: T is double (exact) or float (golden);
 * the accumulation order is the natural one (c, kh, kw / o, kh, kw / n, oh, ow). */
#define CONV_FWD(T, x, w, y)                                                                       \
    for (int64_t n = 0; n < d.N; n++)                                                              \
        for (int64_t o = 0; o < d.O; o++)                                                          \
            for (int64_t oh = 0; oh < d.OH; oh++) {                                                \
                int64_t h0, h1;                                                                    \
                conv_taps(oh, d.s, d.p, d.H, d.KH, &h0, &h1);                                      \
                for (int64_t ow = 0; ow < d.OW; ow++) {                                            \
                    int64_t w0, w1, iw = ow * d.s - d.p;                                           \
                    conv_taps(ow, d.s, d.p, d.W, d.KW, &w0, &w1);                                  \
                    T acc = 0;                                                                     \
                    for (int64_t c = 0; c < d.C; c++)                                              \
                        for (int64_t kh = h0; kh < h1; kh++) {                                     \
                            int64_t xi = X_AT(n, c, oh * d.s - d.p + kh, iw),                      \
                                    wi = W_AT(o, c, kh, 0);                                        \
                            for (int64_t kw = w0; kw < w1; kw++) acc += x[xi + kw] * w[wi + kw];   \
                        }                                                                          \
                    y[Y_AT(n, o, oh, ow)] = acc;                                                   \
                }                                                                                  \
            }
#define CONV_BWD_DATA(T, dy, w, dx)                                                                \
    for (int64_t n = 0; n < d.N; n++)                                                              \
        for (int64_t c = 0; c < d.C; c++)                                                          \
            for (int64_t h = 0; h < d.H; h++) {                                                    \
                int64_t kh0, nkh = conv_gather(h, d.s, d.p, d.OH, d.KH, &kh0);                     \
                for (int64_t x_ = 0; x_ < d.W; x_++) {                                             \
                    int64_t kw0, nkw = conv_gather(x_, d.s, d.p, d.OW, d.KW, &kw0);                \
                    T acc = 0;                                                                     \
                    for (int64_t o = 0; o < d.O; o++)                                              \
                        for (int64_t i = 0; i < nkh; i++) {                                        \
                            int64_t kh = kh0 + i * d.s, oh = (h + d.p - kh) / d.s;                 \
                            int64_t yi = Y_AT(n, o, oh, (x_ + d.p - kw0) / d.s);                   \
                            int64_t wi = W_AT(o, c, kh, kw0);                                      \
                            for (int64_t j = 0; j < nkw; j++) acc += dy[yi - j] * w[wi + j * d.s]; \
                        }                                                                          \
                    dx[X_AT(n, c, h, x_)] = acc;                                                   \
                }                                                                                  \
            }
#define CONV_BWD_FILTER(T, x, dy, dw)                                                              \
    for (int64_t o = 0; o < d.O; o++)                                                              \
        for (int64_t c = 0; c < d.C; c++)                                                          \
            for (int64_t kh = 0; kh < d.KH; kh++) {                                                \
                int64_t oh0, oh1;                                                                  \
                conv_outs(kh, d.s, d.p, d.H, d.OH, &oh0, &oh1);                                    \
                for (int64_t kw = 0; kw < d.KW; kw++) {                                            \
                    int64_t ow0, ow1;                                                              \
                    conv_outs(kw, d.s, d.p, d.W, d.OW, &ow0, &ow1);                                \
                    T acc = 0;                                                                     \
                    for (int64_t n = 0; n < d.N; n++)                                              \
                        for (int64_t oh = oh0; oh < oh1; oh++) {                                   \
                            int64_t xi = X_AT(n, c, oh * d.s - d.p + kh, kw - d.p);                \
                            int64_t yi = Y_AT(n, o, oh, 0);                                        \
                            for (int64_t ow = ow0; ow < ow1; ow++)                                 \
                                acc += x[xi + ow * d.s] * dy[yi + ow];                             \
                        }                                                                          \
                    dw[W_AT(o, c, kh, kw)] = acc;                                                  \
                }                                                                                  \
            }

static peat_status conv2d_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    conv_dims d = conv_dims_of(&a->p);
    LOAD(2, 0, 1);
    const double *x = in_[0], *w = in_[1];
    double *y = peat_f64(a->out[0]);
    CONV_FWD(double, x, w, y)
    UNLOAD(2);
    return PEAT_OK;
}

static peat_status conv2d_plain(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    conv_dims d = conv_dims_of(&a->p);
    const float *x = peat_f32(a->in[0]), *w = peat_f32(a->in[1]);
    float *y = peat_f32(a->out[0]);
    CONV_FWD(float, x, w, y)
    return PEAT_OK;
}

static peat_status conv2d_bwd_data_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    conv_dims d = conv_dims_of(&a->p);
    LOAD(2, 0, 1);
    const double *dy = in_[0], *w = in_[1];
    double *dx = peat_f64(a->out[0]);
    CONV_BWD_DATA(double, dy, w, dx)
    UNLOAD(2);
    return PEAT_OK;
}

static peat_status conv2d_bwd_data_plain(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    conv_dims d = conv_dims_of(&a->p);
    const float *dy = peat_f32(a->in[0]), *w = peat_f32(a->in[1]);
    float *dx = peat_f32(a->out[0]);
    CONV_BWD_DATA(float, dy, w, dx)
    return PEAT_OK;
}

static peat_status conv2d_bwd_filter_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    conv_dims d = conv_dims_of(&a->p);
    LOAD(2, 0, 1);
    const double *x = in_[0], *dy = in_[1];
    double *dw = peat_f64(a->out[0]);
    CONV_BWD_FILTER(double, x, dy, dw)
    UNLOAD(2);
    return PEAT_OK;
}

static peat_status conv2d_bwd_filter_plain(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    conv_dims d = conv_dims_of(&a->p);
    const float *x = peat_f32(a->in[0]), *dy = peat_f32(a->in[1]);
    float *dw = peat_f32(a->out[0]);
    CONV_BWD_FILTER(float, x, dy, dw)
    return PEAT_OK;
}

/* ---- registration ---- */

#define PAIR(op_, opk, what)                                                                       \
    PEAT_GOLDEN_EXACT(#op_ "_exact", opk, op_##_exact, what " in fp64"),                           \
        PEAT_GOLDEN_GOLDEN(#op_ "_golden", opk, op_##_golden, what " in fp32, sequential")

#define CONV(op_, opk, direct, blas)                                                               \
    PEAT_GOLDEN_EXACT(#op_ "_exact", opk, op_##_exact, direct " in fp64"),                         \
        PEAT_GOLDEN_GOLDEN(#op_ "_golden", opk, peat_golden_##op_##_blas_run,                      \
                           blas " (OpenBLAS, one thread; the plain loop without BLAS)"),           \
        PEAT_GOLDEN_GOLDEN(#op_ "_plain", opk, op_##_plain,                                        \
                           direct " in fp32, sequential (the golden before OpenBLAS)")

static const peat_kernel nn_kernels[] = {
    PAIR(bias_add, PEAT_OP_BIAS_ADD, "per-channel bias add"),
    PAIR(bias_add_bwd, PEAT_OP_BIAS_ADD_BWD, "bias gradient (sum over rows and spatial)"),
    PAIR(relu, PEAT_OP_RELU, "ReLU"),
    PAIR(relu_bwd, PEAT_OP_RELU_BWD, "ReLU backward"),
    PAIR(cross_entropy, PEAT_OP_CROSS_ENTROPY, "cross-entropy loss per row"),
    PAIR(cross_entropy_bwd, PEAT_OP_CROSS_ENTROPY_BWD, "cross-entropy backward"),
    PAIR(reduce, PEAT_OP_REDUCE, "row sum / mean"),
    PAIR(gelu, PEAT_OP_GELU, "exact (erf) GELU"),
    PAIR(gelu_bwd, PEAT_OP_GELU_BWD, "exact (erf) GELU backward"),
    PAIR(softmax, PEAT_OP_SOFTMAX, "row softmax (max-shifted)"),
    PAIR(softmax_bwd, PEAT_OP_SOFTMAX_BWD, "row softmax backward"),
    PAIR(layernorm, PEAT_OP_LAYERNORM, "layernorm (two-pass variance)"),
    PAIR(layernorm_bwd, PEAT_OP_LAYERNORM_BWD, "layernorm backward (dX, dgamma, dbeta)"),
    PAIR(embedding, PEAT_OP_EMBEDDING, "embedding gather"),
    PAIR(embedding_bwd, PEAT_OP_EMBEDDING_BWD, "embedding scatter-add backward"),
    /* conv: the op's golden (the first of its role) is im2col + the golden GEMM's library
     * (golden/conv_blas.c); the direct loops stay as the _plain goldens */
    CONV(conv2d, PEAT_OP_CONV2D, "direct NCHW conv2d", "conv2d as im2col + sgemm"),
    CONV(conv2d_bwd_data, PEAT_OP_CONV2D_BWD_DATA, "direct conv2d backward-data (gather)",
         "conv2d backward-data as sgemm W^T dY + col2im"),
    CONV(conv2d_bwd_filter, PEAT_OP_CONV2D_BWD_FILTER, "direct conv2d backward-filter",
         "conv2d backward-filter as sgemm dY col^T, summed per image"),
};

peat_status peat_golden_register_nn(void)
{
    return peat_golden_add_all(nn_kernels, (int)(sizeof nn_kernels / sizeof nn_kernels[0]));
}
