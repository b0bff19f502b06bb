/* layernorm.c: layer normalization (two-pass biased variance; outputs Y, mean, rstd) and its
 * backward (dX, dgamma, dbeta from the saved mean and rstd). */
#include "core/opdesc.h"

#include <math.h>

#define P(k) (a->p.i[k])

/* ---- layernorm: i = R C ; f = eps ---- */
static peat_status ln_check(const peat_args *a)
{
    PEAT_TRY(peat_op_positive(a, 2));
    int64_t R = P(0), C = P(1);
    if (!(a->p.f[0] > 0.0))
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: eps must be > 0", peat_op_name(a->op));
    PEAT_TRY(peat_op_expect(a, a->in[0], "X", PEAT_DTYPE_F32, R * C));
    PEAT_TRY(peat_op_expect(a, a->in[1], "gamma", PEAT_DTYPE_F32, C));
    if (a->op == PEAT_OP_LAYERNORM) {
        PEAT_TRY(peat_op_expect(a, a->in[2], "beta", PEAT_DTYPE_F32, C));
        PEAT_TRY(peat_op_expect(a, peat_op_out(a, 0), "Y", PEAT_DTYPE_F32, R * C));
        PEAT_TRY(peat_op_expect(a, peat_op_out(a, 1), "mean", PEAT_DTYPE_F32, R));
        return peat_op_expect(a, peat_op_out(a, 2), "rstd", PEAT_DTYPE_F32, R);
    }
    PEAT_TRY(peat_op_expect(a, a->in[2], "mean", PEAT_DTYPE_F32, R));
    PEAT_TRY(peat_op_expect(a, a->in[3], "rstd", PEAT_DTYPE_F32, R));
    PEAT_TRY(peat_op_expect(a, a->in[4], "dY", PEAT_DTYPE_F32, R * C));
    PEAT_TRY(peat_op_expect(a, peat_op_out(a, 0), "dX", PEAT_DTYPE_F32, R * C));
    PEAT_TRY(peat_op_expect(a, peat_op_out(a, 1), "dgamma", PEAT_DTYPE_F32, C));
    return peat_op_expect(a, peat_op_out(a, 2), "dbeta", PEAT_DTYPE_F32, C);
}

static peat_status ln_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    peat_op_out_shape(nd, s, 0, 2, P(0), P(1), 0, 0);
    if (a->op == PEAT_OP_LAYERNORM) {
        peat_op_out_shape(nd, s, 1, 1, P(0), 0, 0, 0);
        peat_op_out_shape(nd, s, 2, 1, P(0), 0, 0, 0);
    } else {
        peat_op_out_shape(nd, s, 1, 1, P(1), 0, 0, 0);
        peat_op_out_shape(nd, s, 2, 1, P(1), 0, 0, 0);
    }
    return PEAT_OK;
}

static int64_t ln_bwd_depth(const peat_op_params *p)
{
    return p->i[0] > p->i[1] ? p->i[0] : p->i[1];
}

static peat_status ln_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                          const peat_tensor *exact_out, double *mag)
{
    (void)n, (void)exact_out;
    int64_t R = a->p.i[0], C = a->p.i[1];
    double eps = a->p.f[0], Cd = (double)C;
    const double *g = in->x[1], *b = in->x[2];
    for (int64_t r = 0; r < R; r++) {
        const double *x = in->x[0] + r * C;
        double m = 0.0, A = 0.0, var = 0.0;
        for (int64_t j = 0; j < C; j++) m += x[j], A += fabs(x[j]);
        m /= Cd, A /= Cd;
        for (int64_t j = 0; j < C; j++) var += (x[j] - m) * (x[j] - m);
        var /= Cd;
        double rs = 1.0 / sqrt(var + eps);
        /* var: diff, square, C-1 adds, divide -> (C+3) var; + eps (eps's own rounding and the
         * add); sqrt halves, then sqrt and 1/ round once each: rho = rstd's relative error / u.
         * (Batch norm's rstd also counts a running mean's error and the mean's error in every
         * deviation, peat_op_var_err; layer norm's rows do not yet: on the 1e4 + 0.01 x probe
         * the wider rstd bound leaves a bf16 kernel's wrong rstd as one element a row, which the
         * bit-flip rule reads as flips; docs/bounds.md.) */
        double rho = 0.5 * ((Cd + 4.0) * var + 2.0 * eps) / (var + eps) + 2.0;
        if (o == 1) {
            mag[r] = A; /* mean: C-1 adds and a divide, each term |x|/C */
            continue;
        }
        if (o == 2) {
            mag[r] = rs * rho / Cd;
            continue;
        }
        /* y = ((x - mean) rstd) gamma + beta: the mean's error (C A), the subtraction, rstd's
         * error, two products, then the add */
        for (int64_t j = 0; j < C; j++) {
            double d = x[j] - m, y = d * rs * g[j] + b[j];
            mag[r * C + j] = (fabs(g[j]) * rs * (Cd * A + fabs(d) * (3.0 + rho)) + fabs(y)) / Cd;
        }
    }
    return PEAT_OK;
}

/* Layer norm backward in PyTorch's CPU order, from raw sums: ds = sum g x, db = sum g (g = dY
 * gamma), b = (db mean - ds) rstd^3 / C, c = -b mean - db rstd / C, dX = rstd g + b x + c. With
 * a mean large against the spread, b x and c cancel: the error is |x| times b's, not the
 * centred form's (docs/bounds.md). eb, ec: errors / u of b and c. */
typedef struct ln_bwd_row {
    double db, ds, adb, ads; /* the sums and their sums of |terms| */
    double m, rs, b, c, eb, ec;
} ln_bwd_row;

static void ln_bwd_raw_init(ln_bwd_row *w, double m, double rs, double Cd)
{
    double dm = w->db * m, diff = dm - w->ds, r3 = rs * rs * rs;
    w->m = m, w->rs = rs;
    w->b = diff * r3 / Cd, w->c = -w->b * m - w->db * rs / Cd;
    /* ds: products and C-1 adds ((C+1) sum |g x|); db m: db's C roundings at |m|, the product;
     * the subtraction, rstd^3 (three products) and 1/C (two) */
    double ediff = (Cd + 1.0) * w->ads + fabs(m) * Cd * w->adb + fabs(dm) + fabs(diff);
    w->eb = r3 / Cd * (ediff + 5.0 * fabs(diff));
    /* c: b's error at |m|, its product, db's error and two products at |db rstd / C|, the add */
    w->ec =
        fabs(m) * w->eb + fabs(w->b * m) + rs * w->adb + 3.0 * fabs(w->db * rs / Cd) + fabs(w->c);
}

static double ln_bwd_raw_err(const ln_bwd_row *w, double x, double g)
{
    double bx = w->b * x, t = w->rs * g;
    return 2.0 * fabs(t) + fabs(x) * w->eb + fabs(bx) + fabs(t + bx) + w->ec + fabs(t + bx + w->c);
}

static peat_status ln_bwd_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                              const peat_tensor *exact_out, double *mag)
{
    (void)n, (void)exact_out;
    int64_t R = a->p.i[0], C = a->p.i[1];
    double K = (double)peat_op_info_get(a->op)->depth(&a->p), Cd = (double)C, Rd = (double)R;
    const double *X = in->x[0], *gam = in->x[1], *mean = in->x[2], *rstd = in->x[3], *dY = in->x[4];
    if (o == 1 || o == 2) {
        /* dgamma = sum_r dY xhat (xhat: 2 roundings, product 1, R-1 adds); dbeta = sum_r dY */
        for (int64_t c = 0; c < C; c++) {
            double s = 0.0;
            for (int64_t r = 0; r < R; r++) {
                double xh = (X[r * C + c] - mean[r]) * rstd[r];
                s += o == 1 ? (Rd + 2.0) * fabs(dY[r * C + c] * xh) : Rd * fabs(dY[r * C + c]);
            }
            mag[c] = s / K;
        }
        return PEAT_OK;
    }
    for (int64_t r = 0; r < R; r++) {
        const double *x = X + r * C, *dy = dY + r * C;
        double sg = 0.0, sgx = 0.0, S1 = 0.0, S2 = 0.0, rs = rstd[r];
        ln_bwd_row raw = {0};
        for (int64_t j = 0; j < C; j++) {
            double xh = (x[j] - mean[r]) * rs, g = dy[j] * gam[j];
            sg += g, sgx += g * xh, S1 += fabs(g), S2 += fabs(g * xh);
            raw.db += g, raw.ds += g * x[j], raw.adb += fabs(g), raw.ads += fabs(g * x[j]);
        }
        sg /= Cd, sgx /= Cd, S1 /= Cd, S2 /= Cd;
        ln_bwd_raw_init(&raw, mean[r], rs, Cd);
        /* dX = rstd ((g - sg) - xhat sgx): g (1 rounding), sg's terms (C+1), sgx's terms (C+4),
         * xhat (2) and its product (1), the two subtractions and the rstd product */
        for (int64_t j = 0; j < C; j++) {
            double xh = (x[j] - mean[r]) * rs, g = dy[j] * gam[j];
            double t = fabs(g) + (Cd + 1.0) * S1 + fabs(g - sg) + fabs(xh) * (Cd + 4.0) * S2 +
                       3.0 * fabs(xh * sgx) + 2.0 * fabs(g - sg - xh * sgx);
            double e = fabs(rs) * t, e_raw = ln_bwd_raw_err(&raw, x[j], g);
            mag[r * C + j] = (e > e_raw ? e : e_raw) / K;
        }
    }
    return PEAT_OK;
}

static int64_t ln_bwd_terms(const peat_op_params *p, int o, int64_t depth)
{
    (void)depth;
    return o == 0 ? 1 : p->i[0]; /* dX is a row op; dgamma, dbeta sum over the R rows */
}

/* row counts and row lengths; rows of zeros (a variance of 0: eps alone keeps rstd finite); a
 * large mean over a small spread (1000 + 0.01 x) and a huge one (1e4 + 0.01 x) */
static peat_status ln_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    (void)seed;
    const peat_record *rec = recs->items[0];
    PEAT_TRY(peat_op_probe_row_counts(s, rec, 0));
    PEAT_TRY(peat_op_probe_row_lengths(s, rec));
    PEAT_TRY(peat_op_probe_zero_rows(s, rec, 0, 1, rec->p.i[0], rec->p.i[1],
                                     "value rows of zeros (every 4th row)"));
    PEAT_TRY(peat_op_probe_from_record(s, rec, PEAT_PROBE_TAG_CANCEL,
                                       "value large mean over small spread (1000 + 0.01 x)", 0,
                                       0.01, 1000.0, -1));
    return peat_op_probe_scaled(s, rec, PEAT_PROBE_TAG_CANCEL,
                                "value huge mean over tiny spread (1e4 + 0.01 x)", 0, 0.01, 1e4);
}

/* rows shifted by 100 x their spread, the saved mean with them (rstd unchanged) */
static peat_status ln_bwd_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    (void)seed;
    const peat_record *rec = recs->items[0];
    peat_args *p = peat_op_probe_clone(s, rec, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_CANCEL,
                                       "value mean 100 x the spread (x + 100 / rstd)");
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "layernorm_bwd probe");
    int64_t R = rec->p.i[0], C = rec->p.i[1];
    float *x = peat_op_probe_f32(p, 0), *mean = peat_op_probe_f32(p, 2);
    const float *rstd = peat_op_probe_f32(p, 3);
    for (int64_t r = 0; r < R; r++) {
        float sh = 100.0f / rstd[r];
        mean[r] += sh;
        for (int64_t j = 0; j < C; j++) x[r * C + j] += sh;
    }
    return PEAT_OK;
}

/* ---- small integers (forward): X as -1, 0, 1 whose every row mean has at most 8 bits, gamma
 * and beta as -1, 0, 1: the mean is exact whatever the order or format (>= 8 bits) of its sum */
static unsigned ln_integers(peat_args *a)
{
    peat_op_int_short_means(a, 0, P(0), P(1), P(1), P(1), 0);
    peat_op_int_values(a, 1), peat_op_int_values(a, 2);
    return 1u << 1;
}

/* rows and columns of X (and dY); gamma, beta by columns; mean, rstd by rows */
static int ln_perm(const peat_args *a, peat_op_perm *out)
{
    peat_op_perm_rows_cols(a, out, 1u << 1 | 1u << 2, 0, 0);
    out->out2 = peat_op_view(1, 1, a->p.i[0], -1, -1, 0); /* mean, rstd */
    return 1;
}
static int ln_bwd_perm(const peat_args *a, peat_op_perm *out)
{
    peat_op_perm_rows_cols(a, out, 1u << 1, 1u << 2 | 1u << 3, 0);
    out->out2 = peat_op_view(1, 1, a->p.i[1], -1, -1, 1); /* dgamma, dbeta */
    return 1;
}

static void ln_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                      peat_dtype dt[])
{
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 2, p->i[0], p->i[1], 0, 0, PEAT_DTYPE_F32);
    for (int r = 0; r < 2; r++) peat_op_shape(nd, s, dt, &k, 1, p->i[1], 0, 0, 0, PEAT_DTYPE_F32);
    *n_in = k;
}
/* X, gamma, mean, rstd, dY */
static void ln_bwd_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                          peat_dtype dt[])
{
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 2, p->i[0], p->i[1], 0, 0, PEAT_DTYPE_F32);
    peat_op_shape(nd, s, dt, &k, 1, p->i[1], 0, 0, 0, PEAT_DTYPE_F32);
    for (int r = 0; r < 2; r++) peat_op_shape(nd, s, dt, &k, 1, p->i[0], 0, 0, 0, PEAT_DTYPE_F32);
    peat_op_shape(nd, s, dt, &k, 2, p->i[0], p->i[1], 0, 0, PEAT_DTYPE_F32);
    *n_in = k;
}

const peat_op_desc peat_opd_layernorm = {
    .info = {PEAT_OP_LAYERNORM, "layernorm", 3, 3, 3, 0, ln_check, ln_shapes, peat_op_row_depth,
             peat_op_row_flops},
    .magnitude = ln_mag,
    .terms = peat_op_terms_one,
    .probes = ln_probes,
    .range_low = 1u << 1 | 1u << 2, /* gamma, beta: Y scales with them */
    .range_high = 1u << 0,          /* X */
    .perm = ln_perm,
    .integers = ln_integers,
    .invariant = peat_op_invariant_none,
    .cal_params = peat_op_row_cal,
    .input_shapes = ln_inputs,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "native_layer_norm",
};

/* ---- small integers (backward): X, gamma, dY as -1, 0, 1 (dY sparse), the saved mean 1 and
 * rstd 2 (neither hides a dropped mean or a misplaced power of rstd): dgamma and dbeta are then
 * exact, dX where C is a power of two ---- */
static unsigned ln_bwd_integers(peat_args *a)
{
    peat_op_int_values(a, 0), peat_op_int_values(a, 1), peat_op_int_values(a, 4);
    peat_op_int_fill(a, 2, 1.0f), peat_op_int_fill(a, 3, 2.0f);
    peat_op_int_sparse_rows_cols(a, 4, P(0), P(1));
    return 0x7u;
}

const peat_op_desc peat_opd_layernorm_bwd = {
    .info = {PEAT_OP_LAYERNORM_BWD, "layernorm_bwd", 5, 5, 3, 1, ln_check, ln_shapes, ln_bwd_depth,
             peat_op_row_flops},
    .magnitude = ln_bwd_mag,
    .terms = ln_bwd_terms,
    .probes = ln_bwd_probes,
    .range_low = 1u << 4, /* dY */
    .range_high = 1u << 4,
    .perm = ln_bwd_perm,
    .integers = ln_bwd_integers,
    .invariant = peat_op_invariant_none,
    .cal_params = peat_op_row_cal,
    .input_shapes = ln_bwd_inputs,
    .positive_inputs = 1u << 3, /* rstd */
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "native_layer_norm_backward",
};
