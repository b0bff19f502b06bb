/* softmax.c: the row softmax (max-shifted) and its backward (dX = Y (dY - sum(dY Y))). */
#include "core/opdesc.h"
#include "core/ops/rowkit.h"

#include <math.h>

#define P(k) (a->p.i[k])

static peat_status softmax_check(const peat_args *a)
{
    PEAT_TRY(peat_op_positive(a, 2));
    int64_t n = P(0) * P(1);
    for (int k = 0; k < a->n_in; k++)
        PEAT_TRY(peat_op_expect(a, a->in[k], k ? "dY" : "X", PEAT_DTYPE_F32, n));
    return peat_op_expect(a, peat_op_out(a, 0), "Y", PEAT_DTYPE_F32, n);
}

static peat_status softmax_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                               const peat_tensor *exact_out, double *mag)
{
    (void)o, (void)n, (void)exact_out;
    int64_t R = a->p.i[0], C = a->p.i[1];
    for (int64_t r = 0; r < R; r++) {
        const double *x = in->x[0] + r * C;
        double *p = mag + r * C, mx, lnS, lam;
        peat_opk_row_softmax(x, C, p, &mx, &lnS, &lam);
        /* y_j = e_j / S or e_j * (1 / S) (PyTorch): e_j's own error, S's (lam + C-1 adds) and
         * the division, or the reciprocal and the product (one rounding more) */
        for (int64_t j = 0; j < C; j++)
            p[j] = p[j] > 0.0 ? p[j] * (R_SHIFT * fabs(x[j] - mx) + R_EXP + lam + (double)C + 1.0) /
                                    (double)C
                              : 0.0;
    }
    return PEAT_OK;
}

static peat_status softmax_bwd_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                                   const peat_tensor *exact_out, double *mag)
{
    (void)o, (void)n, (void)exact_out;
    int64_t R = a->p.i[0], C = a->p.i[1];
    for (int64_t r = 0; r < R; r++) {
        const double *y = in->x[0] + r * C, *dy = in->x[1] + r * C;
        double dot = 0.0, adot = 0.0;
        for (int64_t j = 0; j < C; j++) dot += dy[j] * y[j], adot += fabs(dy[j] * y[j]);
        /* dot: C products and adds; then dY - dot and the product with Y round once each */
        for (int64_t j = 0; j < C; j++)
            mag[r * C + j] = fabs(y[j]) * (adot + 2.0 * fabs(dy[j] - dot) / (double)C);
    }
    return PEAT_OK;
}

/* row r sees columns 0..r mod C, the rest -inf (a causal mask, at least one finite entry) */
static peat_status softmax_mask(peat_probe_sink *s, const peat_record *rec)
{
    peat_args *p = peat_op_probe_clone(s, rec, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_NONE,
                                       "value -inf causal mask");
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "mask probe");
    int64_t R = rec->p.i[0], C = rec->p.i[1];
    float *x = peat_op_probe_f32(p, 0);
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = r % C + 1; j < C; j++) x[r * C + j] = -INFINITY;
    return PEAT_OK;
}

/* row counts and row lengths; large logits and logits shifted by +100; logits spread to +-100
 * (exp overflows past 88.7 without the max shift); a -inf causal mask */
static peat_status softmax_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    (void)seed;
    const peat_record *rec = recs->items[0];
    PEAT_TRY(peat_op_probe_row_counts(s, rec, 0));
    PEAT_TRY(peat_op_probe_row_lengths(s, rec));
    PEAT_TRY(peat_op_probe_from_record(s, rec, PEAT_PROBE_TAG_OVERFLOW, "value large logits (x40)",
                                       0, 40.0, 0.0, -1));
    PEAT_TRY(peat_op_probe_from_record(s, rec, PEAT_PROBE_TAG_OVERFLOW,
                                       "value logits shifted by +100", 0, 1.0, 100.0, -1));
    PEAT_TRY(peat_op_probe_scaled(s, rec, PEAT_PROBE_TAG_OVERFLOW, "value logits spread to +-100",
                                  0, 100.0 / peat_op_maxabs(rec->in[0]), 0.0));
    return softmax_mask(s, rec);
}

static int softmax_perm(const peat_args *a, peat_op_perm *out)
{
    return peat_op_perm_rows_cols(a, out, 0, 0, 0);
}

static void softmax_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                           peat_dtype dt[])
{
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 2, p->i[0], p->i[1], 0, 0, PEAT_DTYPE_F32);
    *n_in = k;
}
static void softmax_bwd_inputs(const peat_op_params *p, int *n_in, int nd[],
                               int64_t s[][PEAT_MAX_DIMS], peat_dtype dt[])
{
    int k = 0;
    for (int r = 0; r < 2; r++)
        peat_op_shape(nd, s, dt, &k, 2, p->i[0], p->i[1], 0, 0, PEAT_DTYPE_F32);
    *n_in = k;
}

/* a normal output whatever the logits' scale: the large end only (through the logits) */
const peat_op_desc peat_opd_softmax = {
    .info = {PEAT_OP_SOFTMAX, "softmax", 1, 1, 1, 0, softmax_check, peat_op_rc_shapes,
             peat_op_row_depth, peat_op_row_flops},
    .magnitude = softmax_mag,
    .terms = peat_op_terms_one,
    .probes = softmax_probes,
    .range_low = 0,
    .range_high = 1u << 0, /* the logits */
    .perm = softmax_perm,
    .integers = peat_op_integers_none,
    .invariant = peat_op_invariant_none,
    .cal_params = peat_op_row_cal,
    .input_shapes = softmax_inputs,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "_safe_softmax,_softmax",
};

/* ---- small integers (backward): Y and dY as -1, 0, 1, at most PEAT_OP_INT_TERMS terms of each
 * row's dot nonzero: dX = y (dy - dot) is then exact ---- */
static unsigned softmax_bwd_integers(peat_args *a)
{
    int64_t R = P(0), C = P(1), st = peat_op_int_stride(C);
    peat_op_int_values(a, 0), peat_op_int_values(a, 1);
    float *dy = (float *)a->in[1]->data;
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = 0; j < C; j++)
            if ((j + r) % st) dy[r * C + j] = 0.0f;
    return 1u;
}

const peat_op_desc peat_opd_softmax_bwd = {
    .info = {PEAT_OP_SOFTMAX_BWD, "softmax_bwd", 2, 2, 1, 1, softmax_check, peat_op_rc_shapes,
             peat_op_row_depth, peat_op_row_flops},
    .magnitude = softmax_bwd_mag,
    .terms = peat_op_terms_one,
    .probes = peat_op_probes_none,
    .range_low = 1u << 1, /* dY */
    .range_high = 1u << 1,
    .perm = softmax_perm,
    .integers = softmax_bwd_integers,
    .invariant = peat_op_invariant_none,
    .cal_params = peat_op_row_cal,
    .input_shapes = softmax_bwd_inputs,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "_softmax_backward_data",
};
