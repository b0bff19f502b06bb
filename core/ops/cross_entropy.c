/* cross_entropy.c: the cross-entropy loss per row (logsumexp(row) - row[target]) and its
 * backward (dlogits = dloss (softmax - onehot)). */
#include "core/opdesc.h"
#include "core/ops/rowkit.h"

#include <math.h>
#include <stdlib.h>

#define P(k) (a->p.i[k])

static peat_status xent_check(const peat_args *a)
{
    PEAT_TRY(peat_op_positive(a, 2));
    PEAT_TRY(peat_op_expect(a, a->in[0], "logits", PEAT_DTYPE_F32, P(0) * P(1)));
    PEAT_TRY(peat_op_expect(a, a->in[1], "target", PEAT_DTYPE_I32, P(0)));
    if (a->in[1]) {
        const int32_t *t = peat_i32(a->in[1]);
        for (int64_t r = 0; r < P(0); r++)
            if (t[r] < 0 || t[r] >= P(1))
                return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: target[%lld] = %d outside [0,%lld)",
                                  peat_op_name(a->op), (long long)r, t[r], (long long)P(1));
    }
    if (a->op == PEAT_OP_CROSS_ENTROPY)
        return peat_op_expect(a, peat_op_out(a, 0), "loss", PEAT_DTYPE_F32, P(0));
    PEAT_TRY(peat_op_expect(a, a->in[2], "dloss", PEAT_DTYPE_F32, P(0)));
    return peat_op_expect(a, peat_op_out(a, 0), "dlogits", PEAT_DTYPE_F32, P(0) * P(1));
}
static peat_status xent_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    return a->op == PEAT_OP_CROSS_ENTROPY ? peat_op_rows_shapes(a, nd, s)
                                          : peat_op_rc_shapes(a, nd, s);
}

static peat_status xent_rule(const peat_args *a, const peat_op_mag_in *in, int bwd, double *mag)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    const int32_t *tgt = peat_i32(a->in[1]);
    double *p = malloc((size_t)C * sizeof *p);
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "cross_entropy magnitude row");
    for (int64_t r = 0; r < R; r++) {
        const double *x = in->x[0] + r * C;
        double mx, lnS, lam;
        peat_opk_row_softmax(x, C, p, &mx, &lnS, &lam);
        if (!bwd) {
            /* loss = (log S + max) - x_t (golden) or -((x_t - max) - log S) (log_softmax then
             * nll): S's error (lam + C-1), log, the two adds of either grouping */
            double loss = lnS + mx - x[tgt[r]];
            mag[r] = (lam + (double)C - 1.0 + (R_LOG + R_LOG2) * lnS + fabs(lnS + mx) +
                      fabs(x[tgt[r]] - mx) + fabs(loss)) /
                     (double)C;
            continue;
        }
        double dl = fabs(in->x[2][r]);
        /* dlogits = dloss (p_j - onehot), p_j either e_j / S (golden: p_j's error as in
         * softmax) or exp(logp_j), logp_j = (x_j - max) - log S (PyTorch's log_softmax
         * backward: the shift, log S's error and its rounding, the second subtraction, all
         * amplified by exp); then the subtraction and the dloss product */
        for (int64_t j = 0; j < C; j++) {
            double oh = j == tgt[r] ? 1.0 : 0.0, d = fabs(x[j] - mx);
            double rel =
                (R_SHIFT + 1.0) * d + R_EXP + lam + (double)C + (R_LOG + R_LOG2 + 1.0) * lnS + 1.0;
            mag[r * C + j] = dl * (p[j] * rel + 2.0 * fabs(p[j] - oh)) / (double)C;
        }
    }
    free(p);
    return PEAT_OK;
}

static peat_status xent_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                            const peat_tensor *exact_out, double *mag)
{
    (void)o, (void)n, (void)exact_out;
    return xent_rule(a, in, 0, mag);
}
static peat_status xent_bwd_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                                const peat_tensor *exact_out, double *mag)
{
    (void)o, (void)n, (void)exact_out;
    return xent_rule(a, in, 1, mag);
}

/* logits spread to +-100 (exp overflows past 88.7 without the max shift), then also shifted by
 * 1e4 (every logit large: a sum of exponentials or a shift-free log-sum-exp overflows) */
static peat_status logit_values(peat_probe_sink *s, const peat_record *rec)
{
    double sc = 100.0 / peat_op_maxabs(rec->in[0]);
    PEAT_TRY(peat_op_probe_scaled(s, rec, PEAT_PROBE_TAG_OVERFLOW, "value logits spread to +-100",
                                  0, sc, 0.0));
    PEAT_TRY(peat_op_probe_scaled(s, rec, PEAT_PROBE_TAG_OVERFLOW, "value logits shifted by 1e4", 0,
                                  1.0, 1e4));
    /* a confidently wrong prediction: the target's logit 120 below the row's max (its
     * probability underflows fp32, its log does not) */
    peat_args *p = peat_op_probe_clone(s, rec, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_OVERFLOW,
                                       "value target logit 120 below the row max (confidently "
                                       "wrong)");
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "cross_entropy probe");
    int64_t R = rec->p.i[0], C = rec->p.i[1];
    const int32_t *t = rec->in[1]->data;
    float *x = peat_op_probe_f32(p, 0);
    for (int64_t i = 0; i < R * C; i++) x[i] = (float)(0.0 + sc * (double)x[i]);
    for (int64_t r = 0; r < R; r++) {
        float mx = -INFINITY;
        for (int64_t j = 0; j < C; j++) mx = x[r * C + j] > mx ? x[r * C + j] : mx;
        if (C > 1) x[r * C + t[r]] = mx - 120.0f;
    }
    return PEAT_OK;
}

static peat_status xent_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    (void)seed;
    return logit_values(s, recs->items[0]);
}

/* rows (a target, a loss, a dloss per row) */
static int xent_perm(const peat_args *a, peat_op_perm *out)
{
    int64_t R = P(0);
    out->len[0] = R;
    for (int k = 0; k < a->n_in; k++) {
        out->in_mask |= 1u << k;
        out->in[k] = peat_op_view(1, R, peat_tensor_numel(a->in[k]) / R, -1, 0, -1);
    }
    out->out = peat_op_view(1, R, a->op == PEAT_OP_CROSS_ENTROPY ? 1 : P(1), -1, 0, -1);
    return 1;
}

static void xent_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                        peat_dtype dt[])
{
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 2, p->i[0], p->i[1], 0, 0, PEAT_DTYPE_F32);
    peat_op_shape(nd, s, dt, &k, 1, p->i[0], 0, 0, 0, PEAT_DTYPE_I32);
    *n_in = k;
}
static void xent_bwd_inputs(const peat_op_params *p, int *n_in, int nd[],
                            int64_t s[][PEAT_MAX_DIMS], peat_dtype dt[])
{
    xent_inputs(p, n_in, nd, s, dt);
    int k = *n_in;
    peat_op_shape(nd, s, dt, &k, 1, p->i[0], 0, 0, 0, PEAT_DTYPE_F32);
    *n_in = k;
}

/* the forward's loss is a normal value whatever the logits' scale: the large end only */
const peat_op_desc peat_opd_cross_entropy = {
    .info = {PEAT_OP_CROSS_ENTROPY, "cross_entropy", 2, 2, 1, 0, xent_check, xent_shapes,
             peat_op_row_depth, peat_op_row_flops},
    .magnitude = xent_mag,
    .terms = peat_op_terms_one,
    .probes = xent_probes,
    .range_low = 0,
    .range_high = 1u << 0, /* the logits */
    .perm = xent_perm,
    .integers = peat_op_integers_none,
    .invariant = peat_op_invariant_none,
    .cal_params = peat_op_row_cal,
    .input_shapes = xent_inputs,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "_log_softmax,nll_loss_forward",
};

const peat_op_desc peat_opd_cross_entropy_bwd = {
    .info = {PEAT_OP_CROSS_ENTROPY_BWD, "cross_entropy_bwd", 3, 3, 1, 1, xent_check, xent_shapes,
             peat_op_row_depth, peat_op_row_flops},
    .magnitude = xent_bwd_mag,
    .terms = peat_op_terms_one,
    .probes = xent_probes,
    .range_low = 1u << 2,  /* dloss */
    .range_high = 1u << 0, /* the logits */
    .perm = xent_perm,
    .integers = peat_op_integers_none,
    .invariant = peat_op_invariant_none,
    .cal_params = peat_op_row_cal,
    .input_shapes = xent_bwd_inputs,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "_log_softmax_backward_data,nll_loss_backward",
};
