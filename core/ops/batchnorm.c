/* batchnorm.c: batch normalization in training mode (batch statistics per channel over N and S,
 * the running statistics updated) and its backward; the references are golden/batchnorm.c. */
#include "core/opdesc.h"

#include <math.h>
#include <stdlib.h>

#define P(k) (a->p.i[k])

/* ---- shapes: i = N, C, S ; f = eps, momentum ---- */

static peat_status bn_check(const peat_args *a)
{
    PEAT_TRY(peat_op_positive(a, 3));
    int64_t N = P(0), C = P(1), S = P(2), n = N * C * S;
    if ((double)N * C * S > 4e9)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: absurd shape", peat_op_name(a->op));
    if (N * S < 2)
        return PEAT_ERROR(PEAT_ERR_SHAPE,
                          "%s: one value per channel (N S = 1): no batch statistics",
                          peat_op_name(a->op));
    if (!(a->p.f[0] > 0.0))
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: eps must be > 0", peat_op_name(a->op));
    if (!(a->p.f[1] >= 0.0 && a->p.f[1] <= 1.0))
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: momentum must be in [0, 1]", peat_op_name(a->op));
    PEAT_TRY(peat_op_expect(a, a->in[0], "X", PEAT_DTYPE_F32, n));
    PEAT_TRY(peat_op_expect(a, a->in[1], "gamma", PEAT_DTYPE_F32, C));
    if (a->op == PEAT_OP_BATCHNORM) {
        static const char *in[] = {"beta", "running_mean", "running_var"};
        static const char *out[] = {"mean", "rstd", "running_mean'", "running_var'"};
        for (int k = 0; k < 3; k++)
            PEAT_TRY(peat_op_expect(a, a->in[2 + k], in[k], PEAT_DTYPE_F32, C));
        PEAT_TRY(peat_op_expect(a, peat_op_out(a, 0), "Y", PEAT_DTYPE_F32, n));
        for (int k = 0; k < 4; k++)
            PEAT_TRY(peat_op_expect(a, peat_op_out(a, 1 + k), out[k], PEAT_DTYPE_F32, C));
        return PEAT_OK;
    }
    PEAT_TRY(peat_op_expect(a, a->in[2], "mean", PEAT_DTYPE_F32, C));
    PEAT_TRY(peat_op_expect(a, a->in[3], "rstd", PEAT_DTYPE_F32, C));
    PEAT_TRY(peat_op_expect(a, a->in[4], "dY", PEAT_DTYPE_F32, n));
    PEAT_TRY(peat_op_expect(a, peat_op_out(a, 0), "dX", PEAT_DTYPE_F32, n));
    PEAT_TRY(peat_op_expect(a, peat_op_out(a, 1), "dgamma", PEAT_DTYPE_F32, C));
    return peat_op_expect(a, peat_op_out(a, 2), "dbeta", PEAT_DTYPE_F32, C);
}
static peat_status bn_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    peat_op_out_shape(nd, s, 0, 3, P(0), P(1), P(2), 0);
    int n_out = a->op == PEAT_OP_BATCHNORM ? 5 : 3;
    for (int k = 1; k < n_out; k++) peat_op_out_shape(nd, s, k, 1, P(1), 0, 0, 0);
    return PEAT_OK;
}
/* a channel's statistics sum its N S values */
static int64_t bn_depth(const peat_op_params *p)
{
    return p->i[0] * p->i[2];
}
static double bn_flops(const peat_op_params *p)
{
    return 6.0 * (double)p->i[0] * p->i[1] * p->i[2];
}

/* ---- rounding bound (docs/bounds.md, "batch norm") ----
 * As layer norm's, each channel a row of M = N S values gathered with stride: the mean (M A,
 * A = mean |x|), the variance's relative error (M + 4) and rstd's rho, Y's products and add; the
 * running statistics add momentum times the statistic's error, the two products and the add, or
 * the lerp form's difference (either grouping), and the unbiased factor M / (M - 1). */
static peat_status bn_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                          const peat_tensor *exact_out, double *mag)
{
    (void)n, (void)exact_out;
    int64_t N = P(0), C = P(1), S = P(2);
    double eps = a->p.f[0], mom = a->p.f[1], M = (double)(N * S);
    const double *x = in->x[0], *g = in->x[1], *b = in->x[2], *rm = in->x[3], *rv = in->x[4];
    for (int64_t c = 0; c < C; c++) {
        double m = 0.0, A = 0.0, var = 0.0, Ad = 0.0;
        for (int64_t k = 0; k < N; k++)
            for (int64_t s = 0; s < S; s++)
                m += x[(k * C + c) * S + s], A += fabs(x[(k * C + c) * S + s]);
        m /= M, A /= M;
        for (int64_t k = 0; k < N; k++)
            for (int64_t s = 0; s < S; s++) {
                double d = x[(k * C + c) * S + s] - m;
                var += d * d, Ad += fabs(d);
            }
        var /= M, Ad /= M;
        /* rho as layer norm's (the variance's error peat_op_var_err) */
        double ev = peat_op_var_err(M, var, A, Ad), rs = 1.0 / sqrt(var + eps),
               rho = 0.5 * (ev + 2.0 * eps) / (var + eps) + 2.0,
               rho_y = 0.5 * ((M + 4.0) * var + 2.0 * eps) / (var + eps) + 2.0; /* layer norm's */
        if (o == 1) mag[c] = A;
        if (o == 2) mag[c] = rs * rho / M;
        if (o == 3) {
            double r1 = (1.0 - mom) * rm[c] + mom * m;
            mag[c] = (fabs(mom) * M * A + 2.0 * fabs((1.0 - mom) * rm[c]) + 2.0 * fabs(mom * m) +
                      3.0 * fabs(mom * (m - rm[c])) + fabs(r1)) /
                     M;
        }
        if (o == 4) {
            double vu = var * M / (M - 1.0), r1 = (1.0 - mom) * rv[c] + mom * vu;
            mag[c] =
                (fabs(mom) * (ev * M / (M - 1.0) + 2.0 * vu) + 2.0 * fabs((1.0 - mom) * rv[c]) +
                 2.0 * fabs(mom * vu) + 3.0 * fabs(mom * (vu - rv[c])) + fabs(r1)) /
                M;
        }
        if (o != 0) continue;
        for (int64_t k = 0; k < N; k++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (k * C + c) * S + s;
                double d = x[i] - m, y = d * rs * g[c] + b[c];
                mag[i] = (fabs(g[c]) * rs * (M * A + fabs(d) * (3.0 + rho_y)) + fabs(y)) / M;
            }
    }
    return PEAT_OK;
}

/* dX = rstd (g - mean g - xhat mean(g xhat)), g = dY gamma: layer norm's centred rule per
 * channel; dgamma = sum dY xhat (M + 2 roundings a term), dbeta = sum dY */
static peat_status bn_bwd_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                              const peat_tensor *exact_out, double *mag)
{
    (void)n, (void)exact_out;
    int64_t N = P(0), C = P(1), S = P(2);
    double M = (double)(N * S), K = M;
    const double *x = in->x[0], *gam = in->x[1], *mean = in->x[2], *rstd = in->x[3], *dY = in->x[4];
    for (int64_t c = 0; c < C; c++) {
        double rs = rstd[c], sg = 0.0, sgx = 0.0, S1 = 0.0, S2 = 0.0, adg = 0.0, adb = 0.0;
        for (int64_t k = 0; k < N; k++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (k * C + c) * S + s;
                double xh = (x[i] - mean[c]) * rs, g = dY[i] * gam[c];
                sg += g, sgx += g * xh, S1 += fabs(g), S2 += fabs(g * xh);
                adg += fabs(dY[i] * xh), adb += fabs(dY[i]);
            }
        /* dgamma = rstd sum dY (x - mean) in one-pass forms: its 2M underflow roundings times
         * rstd */
        if (o == 1)
            mag[c] =
                (M + 2.0) * adg / K + peat_op_underflow_mag((int64_t)K, 2.0 * M * fabs(rs) + 1.0);
        if (o == 2) mag[c] = M * adb / K;
        if (o != 0) continue;
        sg /= M, sgx /= M, S1 /= M, S2 /= M;
        for (int64_t k = 0; k < N; k++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (k * C + c) * S + s;
                double xh = (x[i] - mean[c]) * rs, g = dY[i] * gam[c];
                double t = fabs(g) + (M + 1.0) * S1 + fabs(g - sg) + fabs(xh) * (M + 4.0) * S2 +
                           3.0 * fabs(xh * sgx) + 2.0 * fabs(g - sg - xh * sgx);
                /* in gradual underflow (subnormal dY): the sums' roundings, 2^-150 each, reach
                 * dX through the means (1/M each) and x-hat's product with rstd, then the final
                 * gamma rstd: 2 + |gamma rstd| (6 + 2 |xhat| (rstd + 1)) of them */
                double uf = 2.0 + fabs(gam[c] * rs) * (6.0 + 2.0 * fabs(xh) * (fabs(rs) + 1.0));
                mag[i] = fabs(rs) * t / K + peat_op_underflow_mag((int64_t)K, uf);
            }
    }
    return PEAT_OK;
}

/* dgamma, dbeta sum over the channel's M values; dX is a per-value op */
static int64_t bn_bwd_terms(const peat_op_params *p, int o, int64_t depth)
{
    (void)p;
    return o == 0 ? 1 : depth;
}

/* ---- probes: a large mean over a small spread (1000 + 0.01 x); the backward with the mean
 * 100 x the spread (x + 100 / rstd, its saved mean with it) ---- */
static peat_status bn_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    (void)seed;
    const peat_record *rec = recs->items[0];
    /* channels of zeros (a dead channel: a variance of 0, eps alone keeps rstd finite) */
    PEAT_TRY(peat_op_probe_zero_rows(s, rec, 0, rec->p.i[0], rec->p.i[1], rec->p.i[2],
                                     "value channels of zeros (every 4th channel)"));
    return peat_op_probe_scaled(s, rec, PEAT_PROBE_TAG_CANCEL,
                                "value large mean over small spread (1000 + 0.01 x)", 0, 0.01,
                                1000.0);
}
static peat_status bn_bwd_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    (void)seed;
    const peat_record *rec = recs->items[0];
    peat_args *p = peat_op_probe_clone(s, rec, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_CANCEL,
                                       "value mean 100 x the spread (x + 100 / rstd)");
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "batchnorm_bwd probe");
    int64_t N = rec->p.i[0], C = rec->p.i[1], S = rec->p.i[2];
    float *x = peat_op_probe_f32(p, 0), *mean = peat_op_probe_f32(p, 2);
    const float *rstd = peat_op_probe_f32(p, 3);
    for (int64_t c = 0; c < C; c++) {
        float sh = 100.0f / rstd[c];
        mean[c] += sh;
        for (int64_t k = 0; k < N; k++)
            for (int64_t j = 0; j < S; j++) x[(k * C + c) * S + j] += sh;
    }
    return PEAT_OK;
}

/* ---- small integers (forward): X as -1, 0, 1 whose every channel mean has at most 8 bits,
 * gamma and beta as -1, 0, 1, the running variance 1: the mean is then exact whatever the
 * order or format (>= 8 bits) of its sum (a narrow accumulator is told from a formula) ---- */
static unsigned bn_integers(peat_args *a)
{
    int64_t N = P(0), C = P(1), S = P(2);
    peat_op_int_short_means(a, 0, C, N * S, S, S, C * S);
    peat_op_int_values(a, 1), peat_op_int_values(a, 2), peat_op_int_values(a, 3);
    peat_op_int_fill(a, 4, 1.0f);
    return 1u << 1;
}

/* ---- permutation: channels (with their parameters and statistics) and batch entries ---- */
static int bn_perm(const peat_args *a, peat_op_perm *out)
{
    int64_t N = P(0), C = P(1), S = P(2);
    out->len[0] = C, out->len[1] = N;
    for (int k = 0; k < a->n_in; k++) {
        out->in_mask |= 1u << k;
        out->in[k] = peat_tensor_numel(a->in[k]) == C ? peat_op_view(1, 1, C, -1, -1, 0)
                                                      : peat_op_view(N, C, S, 1, 0, -1);
    }
    out->out = peat_op_view(N, C, S, 1, 0, -1);
    out->out2 = peat_op_view(1, 1, C, -1, -1, 0); /* mean, rstd, running stats; dgamma, dbeta */
    return 1;
}

static void bn_cal(int n, int off, peat_op_params *p)
{
    peat_op_params_set(p, 3, (int64_t[]){2 + n / 16 + off, 4 + n / 8, 16 + 2 * n});
    p->f[0] = 1e-5, p->f[1] = 0.1;
}
static void bn_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                      peat_dtype dt[])
{
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 3, p->i[0], p->i[1], p->i[2], 0, PEAT_DTYPE_F32);
    for (int r = 0; r < 4; r++) peat_op_shape(nd, s, dt, &k, 1, p->i[1], 0, 0, 0, PEAT_DTYPE_F32);
    *n_in = k;
}
static void bn_bwd_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                          peat_dtype dt[])
{
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 3, p->i[0], p->i[1], p->i[2], 0, PEAT_DTYPE_F32);
    for (int r = 0; r < 3; r++) peat_op_shape(nd, s, dt, &k, 1, p->i[1], 0, 0, 0, PEAT_DTYPE_F32);
    peat_op_shape(nd, s, dt, &k, 3, p->i[0], p->i[1], p->i[2], 0, PEAT_DTYPE_F32);
    *n_in = k;
}

const peat_op_desc peat_opd_batchnorm = {
    .info = {PEAT_OP_BATCHNORM, "batchnorm", 5, 5, 5, 0, bn_check, bn_shapes, bn_depth, bn_flops},
    .magnitude = bn_mag,
    .terms = peat_op_terms_one,
    .probes = bn_probes,
    .range_low = 1u << 1 | 1u << 2, /* gamma, beta: Y scales with them */
    .range_high = 1u << 0,          /* X */
    .perm = bn_perm,
    .integers = bn_integers,
    .invariant = peat_op_invariant_none,
    .cal_params = bn_cal,
    .input_shapes = bn_inputs,
    .positive_inputs = 1u << 4, /* running_var */
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "native_batch_norm",
};

/* ---- small integers (backward): X, gamma, dY as -1, 0, 1, at most PEAT_OP_INT_TERMS of a
 * channel's dY nonzero, the saved mean 1 and rstd 2 (neither 0 nor 1, which would hide a formula
 * that drops the mean or misplaces a power of rstd; both exact): dgamma and dbeta are then exact,
 * dX where N S is a power of two ---- */
static unsigned bn_bwd_integers(peat_args *a)
{
    int64_t N = P(0), C = P(1), S = P(2), st = peat_op_int_stride(N * S);
    peat_op_int_values(a, 0), peat_op_int_values(a, 1), peat_op_int_values(a, 4);
    peat_op_int_fill(a, 2, 1.0f), peat_op_int_fill(a, 3, 2.0f);
    float *dy = (float *)a->in[4]->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t s = 0; s < S; s++)
                if ((n * S + s + c) % st) dy[(n * C + c) * S + s] = 0.0f;
    return 0x7u;
}

const peat_op_desc peat_opd_batchnorm_bwd = {
    .info = {PEAT_OP_BATCHNORM_BWD, "batchnorm_bwd", 5, 5, 3, 1, bn_check, bn_shapes, bn_depth,
             bn_flops},
    .magnitude = bn_bwd_mag,
    .terms = bn_bwd_terms,
    .probes = bn_bwd_probes,
    .range_low = 1u << 4, /* dY */
    .range_high = 1u << 4,
    .perm = bn_perm,
    .integers = bn_bwd_integers,
    .invariant = peat_op_invariant_none,
    .cal_params = bn_cal,
    .input_shapes = bn_bwd_inputs,
    .positive_inputs = 1u << 3, /* rstd */
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "native_batch_norm_backward",
};
