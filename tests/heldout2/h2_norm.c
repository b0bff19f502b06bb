/* h2_norm.c: softmax, layernorm and GELU kernels (forward and backward) of the second held-out
 * set. */
#include "heldout2.h"

#define INV_SQRT2   0.70710678118654752440f
#define INV_SQRT2PI 0.39894228040143267794f

/* ---- softmax / softmax_bwd ---- */

/* Softmax whose final division rounds toward zero (a divide unit left in RZ mode); max, exps and
 * the sum round to nearest. */
static peat_status softmax_rz_div(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    for (int64_t r = 0; r < R; r++) {
        const float *x = (const float *)a->in[0]->data + r * C;
        float *y = (float *)a->out[0]->data + r * C, mx = x[0], sum = 0.0f;
        for (int64_t j = 1; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) sum += y[j] = expf(x[j] - mx);
        for (int64_t j = 0; j < C; j++) y[j] = ho_rz((double)y[j] / (double)sum);
    }
    return PEAT_OK;
}

/* Softmax backward with the row term sum(dY) instead of sum(dY * Y). */
static peat_status softmax_bwd_sum_dy(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    for (int64_t r = 0; r < R; r++) {
        const float *y = (const float *)a->in[0]->data + r * C;
        const float *dy = (const float *)a->in[1]->data + r * C;
        float *dx = (float *)a->out[0]->data + r * C, dot = 0.0f;
        for (int64_t j = 0; j < C; j++) dot += dy[j];
        for (int64_t j = 0; j < C; j++) dx[j] = y[j] * (dy[j] - dot);
    }
    return PEAT_OK;
}

/* Softmax backward built in FTZ/DAZ mode: subnormal inputs read as zero and subnormal results
 * written as zero; every normal value is the golden arithmetic. */
static peat_status softmax_bwd_ftz(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    for (int64_t r = 0; r < R; r++) {
        const float *y = (const float *)a->in[0]->data + r * C;
        const float *dy = (const float *)a->in[1]->data + r * C;
        float *dx = (float *)a->out[0]->data + r * C, dot = 0.0f;
        for (int64_t j = 0; j < C; j++) dot = ho_ftz(dot + ho_ftz(ho_ftz(dy[j]) * ho_ftz(y[j])));
        for (int64_t j = 0; j < C; j++) dx[j] = ho_ftz(ho_ftz(y[j]) * ho_ftz(ho_ftz(dy[j]) - dot));
    }
    return PEAT_OK;
}

/* Honest: softmax backward with the row dot product in 4 lanes, combined pairwise (a vectorised
 * reduction). */
static peat_status softmax_bwd_lanes4(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    for (int64_t r = 0; r < R; r++) {
        const float *y = (const float *)a->in[0]->data + r * C;
        const float *dy = (const float *)a->in[1]->data + r * C;
        float *dx = (float *)a->out[0]->data + r * C, l[4] = {0};
        for (int64_t j = 0; j < C; j++) l[j % 4] += dy[j] * y[j];
        float dot = (l[0] + l[1]) + (l[2] + l[3]);
        for (int64_t j = 0; j < C; j++) dx[j] = y[j] * (dy[j] - dot);
    }
    return PEAT_OK;
}

/* ---- layernorm / layernorm_bwd ---- */

/* Layernorm whose normalised value xhat is held in bf16 before the affine step (mean and rstd
 * in fp32, and written exactly). */
static peat_status layernorm_xhat_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    float eps = (float)a->p.f[0];
    const float *g = a->in[1]->data, *b = a->in[2]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *x = (const float *)a->in[0]->data + r * C;
        float *y = (float *)a->out[0]->data + r * C, m = 0.0f, var = 0.0f;
        for (int64_t j = 0; j < C; j++) m += x[j];
        m /= (float)C;
        for (int64_t j = 0; j < C; j++) var += (x[j] - m) * (x[j] - m);
        var /= (float)C;
        float rs = 1.0f / sqrtf(var + eps);
        for (int64_t j = 0; j < C; j++) y[j] = zoo_bf16((x[j] - m) * rs) * g[j] + b[j];
        ((float *)a->out[1]->data)[r] = m, ((float *)a->out[2]->data)[r] = rs;
    }
    return PEAT_OK;
}

enum { LNB_DBETA_GAMMA, LNB_STUCK, LNB_ROWS_SHUFFLED };

/* The layernorm backward of the golden's formula, with one defect chosen by mode. */
static peat_status layernorm_bwd_mode(const peat_args *a, int mode)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *gam = a->in[1]->data, *mean = a->in[2]->data, *rstd = a->in[3]->data;
    float *dg = a->out[1]->data, *db = a->out[2]->data;
    int64_t *order = malloc((size_t)R * sizeof *order);
    if (!order) return PEAT_ERR_NOMEM;
    if (mode == LNB_ROWS_SHUFFLED) /* dgamma/dbeta by atomics: rows land in any order */
        ho_shuffle(order, R, zoo_upset_draw());
    else
        for (int64_t r = 0; r < R; r++) order[r] = r;
    for (int64_t j = 0; j < C; j++) dg[j] = 0.0f, db[j] = 0.0f;
    for (int64_t k = 0; k < R; k++) {
        int64_t r = order[k];
        const float *x = (const float *)a->in[0]->data + r * C;
        const float *dy = (const float *)a->in[4]->data + r * C;
        float *dx = (float *)a->out[0]->data + r * C, sg = 0.0f, sgx = 0.0f;
        for (int64_t j = 0; j < C; j++) {
            float xh = (x[j] - mean[r]) * rstd[r], g = dy[j] * gam[j];
            sg += g, sgx += g * xh;
        }
        sg /= (float)C, sgx /= (float)C;
        for (int64_t j = 0; j < C; j++) {
            float xh = (x[j] - mean[r]) * rstd[r], g = dy[j] * gam[j];
            float v = rstd[r] * (g - sg - xh * sgx);
            dx[j] = mode == LNB_STUCK && j % 16 == 5 ? ho_force(v, 16, 1) : v;
            dg[j] += dy[j] * xh;
            db[j] += mode == LNB_DBETA_GAMMA ? dy[j] * gam[j] : dy[j];
        }
    }
    free(order);
    return PEAT_OK;
}

/* dbeta summed from dY * gamma (the gradient through gamma) instead of dY. */
static peat_status layernorm_bwd_dbeta_gamma(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return layernorm_bwd_mode(a, LNB_DBETA_GAMMA);
}
/* dX's lane 5 of 16 (columns j % 16 == 5) with bit 16 stuck at 1. */
static peat_status layernorm_bwd_stuck(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return layernorm_bwd_mode(a, LNB_STUCK);
}
/* dgamma and dbeta accumulated over rows in a per-call random order (atomic adds). */
static peat_status layernorm_bwd_dgamma_atomic(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return layernorm_bwd_mode(a, LNB_ROWS_SHUFFLED);
}

/* ---- gelu_bwd ---- */

/* GELU backward with Phi(X) held in bf16 (the pdf term and the products in fp32). */
static peat_status gelu_bwd_cdf_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *x = a->in[0]->data, *dy = a->in[1]->data;
    float *dx = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float cdf = zoo_bf16(0.5f * (1.0f + erff(x[i] * INV_SQRT2)));
        float pdf = expf(-0.5f * x[i] * x[i]) * INV_SQRT2PI;
        dx[i] = dy[i] * (cdf + x[i] * pdf);
    }
    return PEAT_OK;
}

/* GELU backward that recovers Phi(X) from the forward's value as GELU(X) / X: 0/0 = NaN at
 * X = 0 (where the derivative is 0.5). */
static peat_status gelu_bwd_xcdf(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *x = a->in[0]->data, *dy = a->in[1]->data;
    float *dx = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float gelu = 0.5f * (1.0f + erff(x[i] * INV_SQRT2)) * x[i];
        float pdf = expf(-0.5f * x[i] * x[i]) * INV_SQRT2PI;
        dx[i] = dy[i] * (gelu / x[i] + x[i] * pdf);
    }
    return PEAT_OK;
}

/* Honest: GELU backward evaluated in double (erfc form) and rounded once. */
static peat_status gelu_bwd_double(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *x = a->in[0]->data, *dy = a->in[1]->data;
    float *dx = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        double v = x[i];
        double cdf = 0.5 * erfc(-v * 0.70710678118654752440);
        double pdf = exp(-0.5 * v * v) * 0.39894228040143267794;
        dx[i] = (float)((double)dy[i] * (cdf + v * pdf));
    }
    return PEAT_OK;
}

int h2_register_norm(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h2_softmax_rz_div", PEAT_OP_SOFTMAX, softmax_rz_div,
                   "softmax whose final division rounds toward zero"),
        ZOO_KERNEL("h2_softmax_bwd_sum_dy", PEAT_OP_SOFTMAX_BWD, softmax_bwd_sum_dy,
                   "softmax backward with sum(dY) in place of sum(dY*Y)"),
        ZOO_KERNEL("h2_softmax_bwd_ftz", PEAT_OP_SOFTMAX_BWD, softmax_bwd_ftz,
                   "softmax backward in FTZ/DAZ mode"),
        ZOO_KERNEL("h2_softmax_bwd_lanes4", PEAT_OP_SOFTMAX_BWD, softmax_bwd_lanes4,
                   "softmax backward, row dot product in 4 lanes"),
        ZOO_KERNEL("h2_layernorm_xhat_bf16", PEAT_OP_LAYERNORM, layernorm_xhat_bf16,
                   "layernorm with the normalised value held in bf16"),
        ZOO_KERNEL("h2_layernorm_bwd_dbeta_gamma", PEAT_OP_LAYERNORM_BWD, layernorm_bwd_dbeta_gamma,
                   "layernorm backward, dbeta summed from dY*gamma"),
        ZOO_KERNEL("h2_layernorm_bwd_stuck", PEAT_OP_LAYERNORM_BWD, layernorm_bwd_stuck,
                   "layernorm backward, dX lane 5 of 16 with bit 16 stuck at 1"),
        ZOO_KERNEL("h2_layernorm_bwd_dgamma_atomic", PEAT_OP_LAYERNORM_BWD,
                   layernorm_bwd_dgamma_atomic,
                   "layernorm backward, dgamma/dbeta rows added in a per-call random order"),
        ZOO_KERNEL("h2_gelu_bwd_cdf_bf16", PEAT_OP_GELU_BWD, gelu_bwd_cdf_bf16,
                   "GELU backward with Phi(X) held in bf16"),
        ZOO_KERNEL("h2_gelu_bwd_xcdf", PEAT_OP_GELU_BWD, gelu_bwd_xcdf,
                   "GELU backward recovering Phi(X) as GELU(X)/X (NaN at X = 0)"),
        ZOO_KERNEL("h2_gelu_bwd_double", PEAT_OP_GELU_BWD, gelu_bwd_double,
                   "GELU backward in double, rounded once"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
