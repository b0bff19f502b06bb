/* ho_softmax.c: held-out row softmax, softmax backward, cross-entropy and its backward: a
 * diagonal-only softmax Jacobian, the softmax's reciprocal kept in fp16, label smoothing nobody
 * asked for, a gradient that ignores dloss, shifts by the target logit instead of the max (range),
 * a dense one-hot dot with log(softmax) (0 log 0); and honest exp2-form softmax and
 * reciprocal-form cross-entropy backward. */
#include "heldout.h"

#define LOG2E 1.44269504088896340736f

/* ---- softmax: i = R, C ---- */

/* REDUCED_PRECISION. Max-shifted exponentials and their sum in fp32, but the reciprocal of the sum
 * is kept in a half register before the scaling pass: every probability carries fp16's relative
 * error (2^-11) of that one factor. */
static peat_status softmax_inv_fp16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    for (int64_t r = 0; r < R; r++) {
        const float *x = (const float *)a->in[0]->data + r * C;
        float *y = (float *)a->out[0]->data + r * C, mx = -INFINITY, s = 0.0f;
        for (int64_t j = 0; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) s += y[j] = expf(x[j] - mx);
        float inv = zoo_f16(1.0f / s);
        for (int64_t j = 0; j < C; j++) y[j] *= inv;
    }
    return PEAT_OK;
}

/* Honest (PASS). The GPU form: exp2((x - max) log2 e), the sum over 4 interleaved lanes reduced
 * pairwise, then a multiply by the reciprocal of the sum; fp32. */
static peat_status softmax_exp2_lanes(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    for (int64_t r = 0; r < R; r++) {
        const float *x = (const float *)a->in[0]->data + r * C;
        float *y = (float *)a->out[0]->data + r * C, mx = -INFINITY, l[4] = {0};
        for (int64_t j = 0; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) l[j % 4] += y[j] = exp2f((x[j] - mx) * LOG2E);
        float inv = 1.0f / ((l[0] + l[1]) + (l[2] + l[3]));
        for (int64_t j = 0; j < C; j++) y[j] *= inv;
    }
    return PEAT_OK;
}

/* ---- softmax_bwd: in Y, dY ; dX = Y (dY - sum(dY Y)) ---- */

/* WRONG_RESULT. Only the diagonal of the softmax Jacobian: dX = Y dY (1 - Y), i.e. the sum
 * sum_k dY_k Y_k replaced by its own term dY_j Y_j (the sigmoid derivative used for softmax). */
static peat_status softmax_bwd_diag(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t n = a->p.i[0] * a->p.i[1];
    const float *y = a->in[0]->data, *dy = a->in[1]->data;
    float *dx = a->out[0]->data;
    for (int64_t i = 0; i < n; i++) dx[i] = y[i] * dy[i] * (1.0f - y[i]);
    return PEAT_OK;
}

/* ---- cross_entropy: i = R, C ; in logits, target ; loss = logsumexp(row) - row[target] ---- */

/* WRONG_RESULT. Label smoothing 0.1 hard-wired into the loss (copied from a training script that
 * used it): loss = lse - (0.9 x_t + 0.1 mean_j x_j) instead of lse - x_t. */
static peat_status xent_label_smooth(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    const int32_t *t = a->in[1]->data;
    float *loss = a->out[0]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *x = (const float *)a->in[0]->data + r * C;
        float mx = -INFINITY, s = 0.0f, sx = 0.0f;
        for (int64_t j = 0; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) s += expf(x[j] - mx), sx += x[j];
        loss[r] = logf(s) + mx - (0.9f * x[t[r]] + 0.1f * sx / (float)C);
    }
    return PEAT_OK;
}

/* RANGE. The loss as softplus of the other logits relative to the target,
 * log1p(sum_{j != t} exp(x_j - x_t)): accurate while every logit is within ~88 of the target, but
 * exp overflows to Inf (and the loss with it) once some logit leads the target by more, where
 * the exact loss is simply about that lead. */
static peat_status xent_softplus(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    const int32_t *t = a->in[1]->data;
    float *loss = a->out[0]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *x = (const float *)a->in[0]->data + r * C;
        float s = 0.0f;
        for (int64_t j = 0; j < C; j++)
            if (j != t[r]) s += expf(x[j] - x[t[r]]);
        loss[r] = log1pf(s);
    }
    return PEAT_OK;
}

/* NAN. The loss as the dense dot -sum_j onehot_j log(softmax_j) (the textbook formula, coded with
 * the one-hot vector): while every probability is positive the zeros of the one-hot drop their
 * terms, but once some non-target probability underflows to 0 (a logit ~104 below the max) its
 * term is 0 * log(0) = 0 * -Inf = NaN. */
static peat_status xent_onehot_dot(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    const int32_t *t = a->in[1]->data;
    float *loss = a->out[0]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *x = (const float *)a->in[0]->data + r * C;
        float mx = -INFINITY, s = 0.0f, acc = 0.0f;
        for (int64_t j = 0; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) s += expf(x[j] - mx);
        for (int64_t j = 0; j < C; j++) {
            float onehot = j == t[r] ? 1.0f : 0.0f;
            acc += onehot * logf(expf(x[j] - mx) / s);
        }
        loss[r] = -acc;
    }
    return PEAT_OK;
}

/* ---- cross_entropy_bwd: in logits, target, dloss ; dlogits = dloss (softmax - onehot) ---- */

/* WRONG_RESULT. The fused loss-gradient kernel assumes reduction='sum' and never reads dloss:
 * dlogits = softmax - onehot, 1/dloss times the gradient asked for (R times too large for a mean
 * loss). */
static peat_status xent_bwd_no_dloss(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    const int32_t *t = a->in[1]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *x = (const float *)a->in[0]->data + r * C;
        float *dl = (float *)a->out[0]->data + r * C, mx = -INFINITY, s = 0.0f;
        for (int64_t j = 0; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) s += expf(x[j] - mx);
        for (int64_t j = 0; j < C; j++) dl[j] = expf(x[j] - mx) / s - (j == t[r] ? 1.0f : 0.0f);
    }
    return PEAT_OK;
}

/* RANGE. The softmax of the gradient shifted by the target logit instead of the row max (the
 * target "is usually the largest"): exact in value while no logit leads the target by more than
 * ~88, but then exp(x_j - x_t) overflows, the sum is Inf and Inf / Inf gives NaN for that logit
 * (and 0 for the others). */
static peat_status xent_bwd_shift_target(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    const int32_t *t = a->in[1]->data;
    const float *dloss = a->in[2]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *x = (const float *)a->in[0]->data + r * C;
        float *dl = (float *)a->out[0]->data + r * C, xt = x[t[r]], s = 0.0f;
        for (int64_t j = 0; j < C; j++) s += expf(x[j] - xt);
        for (int64_t j = 0; j < C; j++)
            dl[j] = dloss[r] * (expf(x[j] - xt) / s - (j == t[r] ? 1.0f : 0.0f));
    }
    return PEAT_OK;
}

/* Honest (PASS). Max-shifted exponentials stored, one reciprocal of their sum, then
 * dloss (e_j (1/S) - onehot_j); fp32. */
static peat_status xent_bwd_recip(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    const int32_t *t = a->in[1]->data;
    const float *dloss = a->in[2]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *x = (const float *)a->in[0]->data + r * C;
        float *dl = (float *)a->out[0]->data + r * C, mx = -INFINITY, s = 0.0f;
        for (int64_t j = 0; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) s += dl[j] = expf(x[j] - mx);
        float inv = 1.0f / s;
        for (int64_t j = 0; j < C; j++)
            dl[j] = dloss[r] * (dl[j] * inv - (j == t[r] ? 1.0f : 0.0f));
    }
    return PEAT_OK;
}

int ho_register_softmax(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("ho_softmax_inv_fp16", PEAT_OP_SOFTMAX, softmax_inv_fp16,
                   "reciprocal of the row sum kept in fp16"),
        ZOO_KERNEL("ho_softmax_exp2_lanes", PEAT_OP_SOFTMAX, softmax_exp2_lanes,
                   "honest: exp2((x - max) log2e), 4-lane sum, reciprocal multiply"),
        ZOO_KERNEL("ho_softmax_bwd_diag", PEAT_OP_SOFTMAX_BWD, softmax_bwd_diag,
                   "only the Jacobian's diagonal: Y dY (1 - Y)"),
        ZOO_KERNEL("ho_xent_label_smooth", PEAT_OP_CROSS_ENTROPY, xent_label_smooth,
                   "label smoothing 0.1 hard-wired into the loss"),
        ZOO_KERNEL("ho_xent_softplus", PEAT_OP_CROSS_ENTROPY, xent_softplus,
                   "log1p(sum exp(x_j - x_t)): Inf once a logit leads the target by ~88"),
        ZOO_KERNEL("ho_xent_onehot_dot", PEAT_OP_CROSS_ENTROPY, xent_onehot_dot,
                   "-sum onehot log(softmax): 0 log 0 = NaN once a probability underflows"),
        ZOO_KERNEL("ho_xent_bwd_no_dloss", PEAT_OP_CROSS_ENTROPY_BWD, xent_bwd_no_dloss,
                   "gradient softmax - onehot without the dloss factor"),
        ZOO_KERNEL("ho_xent_bwd_shift_target", PEAT_OP_CROSS_ENTROPY_BWD, xent_bwd_shift_target,
                   "softmax shifted by the target logit: NaN once a logit leads it by ~88"),
        ZOO_KERNEL("ho_xent_bwd_recip", PEAT_OP_CROSS_ENTROPY_BWD, xent_bwd_recip,
                   "honest: stored exponentials times 1/sum, minus onehot, times dloss"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
