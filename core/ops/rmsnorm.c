/* rmsnorm.c: the RMSNorm op and its backward (include/peat/plugin.h has the semantics; the
 * references are golden/rmsnorm.c). Every trait of the two ops is here: shapes, the rounding
 * bound, probes, the permutation layout, the predictor's synthetic calls and the aten names. */
#include "core/opdesc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- shapes: i = R, C ; f = eps ---- */

static peat_status rms_check(const peat_args *a)
{
    PEAT_TRY(peat_op_positive(a, 2));
    int64_t R = a->p.i[0], C = a->p.i[1];
    if ((double)R * (double)C > 4e9)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: absurd shape %lld x %lld", peat_op_name(a->op),
                          (long long)R, (long long)C);
    if (!(a->p.f[0] > 0.0))
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: eps must be > 0", peat_op_name(a->op));
    PEAT_TRY(peat_op_expect(a, a->in[0], "X", PEAT_DTYPE_F32, R * C));
    PEAT_TRY(peat_op_expect(a, a->in[1], "gamma", PEAT_DTYPE_F32, C));
    if (a->op == PEAT_OP_RMSNORM) {
        PEAT_TRY(peat_op_expect(a, peat_op_out(a, 0), "Y", PEAT_DTYPE_F32, R * C));
        return peat_op_expect(a, peat_op_out(a, 1), "rstd", PEAT_DTYPE_F32, R);
    }
    PEAT_TRY(peat_op_expect(a, a->in[2], "rstd", PEAT_DTYPE_F32, R));
    PEAT_TRY(peat_op_expect(a, a->in[3], "dY", PEAT_DTYPE_F32, R * C));
    PEAT_TRY(peat_op_expect(a, peat_op_out(a, 0), "dX", PEAT_DTYPE_F32, R * C));
    return peat_op_expect(a, peat_op_out(a, 1), "dgamma", PEAT_DTYPE_F32, C);
}

static peat_status rms_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    peat_op_out_shape(nd, s, 0, 2, R, C, 0, 0);
    if (a->op == PEAT_OP_RMSNORM)
        peat_op_out_shape(nd, s, 1, 1, R, 0, 0, 0);
    else
        peat_op_out_shape(nd, s, 1, 1, C, 0, 0, 0);
    return PEAT_OK;
}

/* forward: the row's sum of squares (C terms); backward: the same row sum for dX, the column
 * sum over R rows for dgamma */
static int64_t rms_depth(const peat_op_params *p)
{
    return p->i[1];
}
static int64_t rms_bwd_depth(const peat_op_params *p)
{
    return p->i[0] > p->i[1] ? p->i[0] : p->i[1];
}
static double rms_flops(const peat_op_params *p)
{
    return 4.0 * (double)p->i[0] * (double)p->i[1];
}
static double rms_bwd_flops(const peat_op_params *p)
{
    return 9.0 * (double)p->i[0] * (double)p->i[1];
}

/* ---- rounding bound (docs/bounds.md, "RMSNorm") ----
 * rstd: x^2 (1 rounding), C-1 adds, the divide by C (or a product with a rounded 1/C), eps's own
 * rounding and the add, then 1/sqrt: sqrt halves the relative error before it. Honest forms
 * round 1/sqrt as sqrt then a divide (2), or as a reciprocal square root of up to 2 ulp (CUDA's
 * rsqrtf: 4 units of u): rho = rstd's relative error / u. */
static double rms_rho(double ms, double eps, double C)
{
    return 0.5 * ((C + 2.0) * ms + 2.0 * eps) / (ms + eps) + 4.0;
}

static peat_status rms_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                           const peat_tensor *exact_out, double *mag)
{
    (void)n, (void)exact_out;
    int64_t R = a->p.i[0], C = a->p.i[1];
    double eps = a->p.f[0], Cd = (double)C;
    const double *g = in->x[1];
    for (int64_t r = 0; r < R; r++) {
        const double *x = in->x[0] + r * C;
        double ss = 0.0;
        for (int64_t j = 0; j < C; j++) ss += x[j] * x[j];
        double ms = ss / Cd, rs = 1.0 / sqrt(ms + eps), rho = rms_rho(ms, eps, Cd);
        if (o == 1) {
            mag[r] = rs * rho / Cd;
            continue;
        }
        /* Y = x rstd gamma: rstd's error and two products, in either order */
        for (int64_t j = 0; j < C; j++) mag[r * C + j] = fabs(x[j] * rs * g[j]) * (2.0 + rho) / Cd;
    }
    return PEAT_OK;
}

/* Backward, with g = dY gamma and S = mean_C(g x): dX = rstd g - x rstd^3 S. Errors: g (1), S's
 * terms (g, the product, C-1 adds, the divide: C+2 at |g x|), the product chain rstd^3 S x in any
 * association (4), rstd g (1), the subtraction (1) and, in the factored form rstd (g - x rstd^2
 * S), the outer product (1): bounded by counting both. dgamma = sum_r dY x rstd: two products and
 * R-1 adds. */
static peat_status rms_bwd_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                               const peat_tensor *exact_out, double *mag)
{
    (void)n, (void)exact_out;
    int64_t R = a->p.i[0], C = a->p.i[1];
    double K = (double)rms_bwd_depth(&a->p), Cd = (double)C, Rd = (double)R;
    const double *X = in->x[0], *gam = in->x[1], *rstd = in->x[2], *dY = in->x[3];
    if (o == 1) {
        for (int64_t c = 0; c < C; c++) {
            double s = 0.0;
            for (int64_t r = 0; r < R; r++) s += fabs(dY[r * C + c] * X[r * C + c] * rstd[r]);
            mag[c] = (Rd + 1.0) * s / K;
        }
        return PEAT_OK;
    }
    for (int64_t r = 0; r < R; r++) {
        const double *x = X + r * C, *dy = dY + r * C;
        double rs = rstd[r], S = 0.0, S1 = 0.0;
        for (int64_t j = 0; j < C; j++)
            S += dy[j] * gam[j] * x[j], S1 += fabs(dy[j] * gam[j] * x[j]);
        S /= Cd, S1 /= Cd;
        for (int64_t j = 0; j < C; j++) {
            double g = dy[j] * gam[j], h = x[j] * rs * rs * S, d = rs * (g - h);
            double e = rs * (2.0 * fabs(g) + fabs(x[j]) * rs * rs * (Cd + 2.0) * S1 +
                             5.0 * fabs(h) + 2.0 * fabs(g - h)) +
                       fabs(d);
            mag[r * C + j] = e / K;
        }
    }
    return PEAT_OK;
}

static int64_t rms_bwd_terms(const peat_op_params *p, int o, int64_t depth)
{
    (void)depth;
    return o == 0 ? 1 : p->i[0]; /* dX is a row op; dgamma sums over the R rows */
}

/* ---- probes ---- */

/* rstd [R] of rows x [R, C] (the backward's input 2, consistent with its X) */
static void rstd_of(const float *x, int64_t R, int64_t C, double eps, float *rstd)
{
    for (int64_t r = 0; r < R; r++) {
        double ss = 0.0;
        for (int64_t j = 0; j < C; j++) ss += (double)x[r * C + j] * x[r * C + j];
        rstd[r] = (float)(1.0 / sqrt(ss / (double)C + eps));
    }
}

/* Row lengths off every block size up to 128 (a kernel that drops a row's tail or reads past
 * it), new Gaussian inputs at the recorded scale; and X small against sqrt(eps) (eps outside the
 * square root, or forgotten, shows only there). */
static peat_status rms_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    const peat_record *rec = recs->items[0];
    int bwd = rec->op == PEAT_OP_RMSNORM_BWD;
    static const int64_t lens[] = {1, 3, 7, 17, 33, 65, 129};
    peat_rng_t *r = peat_rng_new(seed ^ 0x726d736e6f726dull);
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe rng");
    peat_status st = PEAT_OK;
    char label[96];
    int64_t R = rec->p.i[0];
    for (size_t i = 0; st == PEAT_OK && i < sizeof lens / sizeof lens[0]; i++) {
        int64_t C = lens[i];
        if (C == rec->p.i[1]) continue;
        snprintf(label, sizeof label, "shape row length %lld (recorded %lld)", (long long)C,
                 (long long)rec->p.i[1]);
        peat_args *a = s->add(s->ctx, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE, label);
        if (!a) {
            st = PEAT_ERROR(PEAT_ERR_NOMEM, "rmsnorm probe");
            break;
        }
        a->op = rec->op, a->p = rec->p, a->p.i[1] = C;
        const int64_t sz[4] = {R * C, C, R, R * C};
        for (int k = 0; st == PEAT_OK && k < rec->n_in; k++) {
            peat_tensor *t = NULL;
            st = peat_tensor_alloc(PEAT_DTYPE_F32, 1, &sz[k], &t);
            if (st != PEAT_OK) break;
            a->in[k] = t, a->n_in = k + 1;
            peat_rng_fill_gaussian(r, t, peat_op_rms(rec->in[k]));
        }
        /* the backward's rstd consistent with its X */
        if (st == PEAT_OK && bwd)
            rstd_of(peat_op_probe_f32(a, 0), R, C, rec->p.f[0], peat_op_probe_f32(a, 2));
    }
    peat_rng_free(r);
    if (st != PEAT_OK) return st;
    double sc = 1e-3 * sqrt(rec->p.f[0]) / peat_op_maxabs(rec->in[0]);
    peat_args *a = peat_op_probe_clone(s, rec, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_NONE,
                                       "value X small against sqrt(eps) (mean square 1e-6 eps)");
    if (!a) return PEAT_ERROR(PEAT_ERR_NOMEM, "rmsnorm probe");
    float *x = peat_op_probe_f32(a, 0);
    for (int64_t i = 0; i < peat_op_probe_numel(a, 0); i++) x[i] = (float)(sc * (double)x[i]);
    if (bwd) rstd_of(x, R, rec->p.i[1], rec->p.f[0], peat_op_probe_f32(a, 2));
    if (bwd) return PEAT_OK;
    /* rows of zeros (padding tokens: a mean square of 0, eps alone keeps rstd finite) */
    return peat_op_probe_zero_rows(s, rec, 0, 1, R, rec->p.i[1],
                                   "value rows of zeros (every 4th row)");
}

/* ---- permutation: rows and columns of X, Y, dY, dX; gamma, dgamma by columns; rstd by rows */

static int rms_perm(const peat_args *a, peat_op_perm *out)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    out->len[0] = R, out->len[1] = C;
    out->in[0] = peat_op_view(1, R, C, -1, 0, 1);
    out->in[1] = peat_op_view(1, 1, C, -1, -1, 1);
    out->in_mask = 0x3u;
    if (a->op == PEAT_OP_RMSNORM_BWD) {
        out->in[2] = peat_op_view(1, 1, R, -1, -1, 0);
        out->in[3] = peat_op_view(1, R, C, -1, 0, 1);
        out->in_mask = 0xfu;
    }
    out->out = peat_op_view(1, R, C, -1, 0, 1);
    /* rstd by rows (forward), dgamma by columns (backward) */
    out->out2 = a->op == PEAT_OP_RMSNORM_BWD ? peat_op_view(1, 1, C, -1, -1, 1)
                                             : peat_op_view(1, 1, R, -1, -1, 0);
    return 1;
}

/* ---- predictor ---- */

static void rms_cal(int n, int off, peat_op_params *p)
{
    peat_op_params_set(p, 2, (int64_t[]){2 * n + off, 2 * n + 3 * off});
    p->f[0] = 1e-5;
}

static void rms_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                       peat_dtype dt[])
{
    int64_t R = p->i[0], C = p->i[1];
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 2, R, C, 0, 0, PEAT_DTYPE_F32);
    peat_op_shape(nd, s, dt, &k, 1, C, 0, 0, 0, PEAT_DTYPE_F32);
    *n_in = k;
}

static void rms_bwd_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                           peat_dtype dt[])
{
    int64_t R = p->i[0], C = p->i[1];
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 2, R, C, 0, 0, PEAT_DTYPE_F32);
    peat_op_shape(nd, s, dt, &k, 1, C, 0, 0, 0, PEAT_DTYPE_F32);
    peat_op_shape(nd, s, dt, &k, 1, R, 0, 0, 0, PEAT_DTYPE_F32);
    peat_op_shape(nd, s, dt, &k, 2, R, C, 0, 0, PEAT_DTYPE_F32);
    *n_in = k;
}

const peat_op_desc peat_opd_rmsnorm = {
    .info = {PEAT_OP_RMSNORM, "rmsnorm", 2, 2, 2, 0, rms_check, rms_shapes, rms_depth, rms_flops},
    .magnitude = rms_mag,
    .terms = peat_op_terms_one,
    .probes = rms_probes,
    .range_low = 1u << 1,  /* gamma: Y scales with it */
    .range_high = 1u << 0, /* X: squares past fp16's range */
    .perm = rms_perm,
    .integers = peat_op_integers_none,
    .invariant = peat_op_invariant_none,
    .cal_params = rms_cal,
    .input_shapes = rms_inputs,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none, /* autocast runs it in fp32 */
    .aten = "",
};

/* ---- small integers (backward): X, gamma, dY as -1, 0, 1 (dY sparse), the saved rstd 2 (a
 * power of two that is not 1: a misplaced power of rstd stays visible):
 * dgamma is then exact, dX where C is a power of two ---- */
static unsigned rms_bwd_integers(peat_args *a)
{
    peat_op_int_values(a, 0), peat_op_int_values(a, 1), peat_op_int_values(a, 3);
    peat_op_int_fill(a, 2, 2.0f);
    peat_op_int_sparse_rows_cols(a, 3, a->p.i[0], a->p.i[1]);
    return 0x3u;
}

const peat_op_desc peat_opd_rmsnorm_bwd = {
    .info = {PEAT_OP_RMSNORM_BWD, "rmsnorm_bwd", 4, 4, 2, 1, rms_check, rms_shapes, rms_bwd_depth,
             rms_bwd_flops},
    .magnitude = rms_bwd_mag,
    .terms = rms_bwd_terms,
    .probes = rms_probes,
    .range_low = 1u << 3,  /* dY */
    .range_high = 1u << 3, /* dY */
    .perm = rms_perm,
    .integers = rms_bwd_integers,
    .invariant = peat_op_invariant_none,
    .cal_params = rms_cal,
    .input_shapes = rms_bwd_inputs,
    .positive_inputs = 1u << 2, /* rstd */
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "",
};
