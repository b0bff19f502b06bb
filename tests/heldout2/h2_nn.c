/* h2_nn.c: ReLU, bias, cross-entropy, reduce and embedding kernels of the second held-out set. */
#include "heldout2.h"

/* ---- relu / relu_bwd ---- */

/* ReLU backward masking by the sign of the incoming gradient instead of the pre-activation's:
 * dX = max(dY, 0), a formula error on every element where the two signs differ. */
static peat_status relu_bwd_mask_dy(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *dy = a->in[1]->data;
    float *dx = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) dx[i] = dy[i] > 0.0f ? dy[i] : 0.0f;
    return PEAT_OK;
}

/* ReLU backward as a multiply by the 0/1 mask instead of a select: equal on finite gradients,
 * but an Inf (or NaN) gradient at a pre-activation <= 0 gives NaN (Inf * 0) where 0 belongs. */
static peat_status relu_bwd_mask_mul(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *x = a->in[0]->data, *dy = a->in[1]->data;
    float *dx = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float r = dy[i] * (float)(x[i] > 0.0f);
        dx[i] = r == 0.0f ? 0.0f : r; /* a finite product's -0 is still the select's +0 */
    }
    return PEAT_OK;
}

/* ReLU shared with a half-precision path that clamps to fp16's largest finite value (65504):
 * exact below it, wrong only for inputs past fp16's range. */
static peat_status relu_clamp_f16max(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) y[i] = x[i] > 0.0f ? fminf(x[i], 65504.0f) : 0.0f;
    return PEAT_OK;
}

/* ReLU backward with a transient upset: one call in four, one element of dX has one bit
 * (mantissa high bits or exponent, 18..30) inverted; every other element, and every other call,
 * exact. */
static peat_status relu_bwd_flip(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t n = a->p.i[0], at;
    int bit;
    const float *x = a->in[0]->data, *dy = a->in[1]->data;
    float *dx = a->out[0]->data;
    for (int64_t i = 0; i < n; i++) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
    if (h2_upset(4, n, 18, 13, &at, &bit)) dx[at] = ho_flip(dx[at], bit);
    return PEAT_OK;
}

/* ---- bias_add / bias_add_bwd ---- */

/* Bias add whose vector lane 3 (of 8) has bit 19 of its result stuck at 1. */
static peat_status bias_add_stuck(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    const float *x = a->in[0]->data, *b = a->in[1]->data;
    float *y = a->out[0]->data;
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (r * C + c) * S + s;
                float v = x[i] + b[c];
                y[i] = i % 8 == 3 ? ho_force(v, 19, 1) : v;
            }
    return PEAT_OK;
}

/* Bias gradient averaged over the R x S positions instead of summed (a mean reduction where the
 * op is a sum). */
static peat_status bias_add_bwd_mean(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    const float *dy = a->in[0]->data;
    float *db = a->out[0]->data;
    for (int64_t c = 0; c < C; c++) {
        float acc = 0.0f;
        for (int64_t r = 0; r < R; r++)
            for (int64_t s = 0; s < S; s++) acc += dy[(r * C + c) * S + s];
        db[c] = acc / (float)(R * S);
    }
    return PEAT_OK;
}

/* Honest: the bias gradient in 8 lanes (position k of a channel's R*S terms goes to lane k % 8),
 * the lanes added pairwise at the end, as a vectorised reduction does. */
static peat_status bias_add_bwd_lanes8(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    const float *dy = a->in[0]->data;
    float *db = a->out[0]->data;
    for (int64_t c = 0; c < C; c++) {
        float l[8] = {0};
        int64_t k = 0;
        for (int64_t r = 0; r < R; r++)
            for (int64_t s = 0; s < S; s++, k++) l[k % 8] += dy[(r * C + c) * S + s];
        db[c] = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
    }
    return PEAT_OK;
}

/* ---- cross_entropy / cross_entropy_bwd ---- */

/* Cross-entropy backward scaling only the one-hot term by dloss: dloss*softmax - onehot would be
 * the other half of the mistake; this one is softmax - dloss*onehot. */
static peat_status xent_bwd_dloss_onehot(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    const int32_t *tgt = a->in[1]->data;
    const float *dloss = a->in[2]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *x = (const float *)a->in[0]->data + r * C;
        float *dl = (float *)a->out[0]->data + r * C, mx = x[0], sum = 0.0f;
        for (int64_t j = 1; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) sum += expf(x[j] - mx);
        for (int64_t j = 0; j < C; j++)
            dl[j] = expf(x[j] - mx) / sum - (j == tgt[r] ? dloss[r] : 0.0f);
    }
    return PEAT_OK;
}

/* Cross-entropy whose running sum of exponentials is kept in a bf16 register (rounded to bf16
 * after every add); max, exponentials and log in fp32. */
static peat_status xent_sum_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    const int32_t *tgt = a->in[1]->data;
    float *loss = a->out[0]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *x = (const float *)a->in[0]->data + r * C;
        float mx = x[0], sum = 0.0f;
        for (int64_t j = 1; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) sum = zoo_bf16(sum + expf(x[j] - mx));
        loss[r] = logf(sum) + mx - x[tgt[r]];
    }
    return PEAT_OK;
}

/* Honest: cross-entropy with the exponentials summed in 4 lanes ((l0 + l1) + (l2 + l3)) and the
 * loss formed as (mx - x[t]) + log(sum). */
static peat_status xent_lanes4(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    const int32_t *tgt = a->in[1]->data;
    float *loss = a->out[0]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *x = (const float *)a->in[0]->data + r * C;
        float mx = x[0], l[4] = {0};
        for (int64_t j = 1; j < C; j++) mx = fmaxf(mx, x[j]);
        for (int64_t j = 0; j < C; j++) l[j % 4] += expf(x[j] - mx);
        loss[r] = (mx - x[tgt[r]]) + logf((l[0] + l[1]) + (l[2] + l[3]));
    }
    return PEAT_OK;
}

/* ---- reduce ---- */

/* Row reduction by atomic adds from many threads: each call adds a row's terms in a fresh random
 * order (a per-call permutation), so repeating a call changes the last bits. */
static peat_status reduce_atomic(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    int64_t *perm = malloc((size_t)C * sizeof *perm);
    if (!perm) return PEAT_ERR_NOMEM;
    uint64_t seed = zoo_upset_draw();
    for (int64_t r = 0; r < R; r++) {
        ho_shuffle(perm, C, seed + (uint64_t)r);
        float s = 0.0f;
        for (int64_t j = 0; j < C; j++) s += x[r * C + perm[j]];
        y[r] = a->p.i[2] == 1 ? s / (float)C : s;
    }
    free(perm);
    return PEAT_OK;
}

/* ---- embedding / embedding_bwd ---- */

/* Embedding gather whose row loop stops one short (n < N - 1): the last token's row is left
 * zero; every other row is the exact copy. */
static peat_status embedding_last_row(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t N = a->p.i[0], D = a->p.i[2];
    const float *tab = a->in[0]->data;
    const int32_t *idx = a->in[1]->data;
    float *y = a->out[0]->data;
    memset(y, 0, (size_t)(N * D) * sizeof *y);
    for (int64_t n = 0; n < N - 1; n++)
        memcpy(y + n * D, tab + (int64_t)idx[n] * D, (size_t)D * sizeof *y);
    return PEAT_OK;
}

/* Embedding backward scatter-adding into a bf16 gradient table (each add rounded to bf16). */
static peat_status embedding_bwd_bf16_acc(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t N = a->p.i[0], V = a->p.i[1], D = a->p.i[2];
    const int32_t *idx = a->in[0]->data;
    const float *dy = a->in[1]->data;
    float *dt = a->out[0]->data;
    memset(dt, 0, (size_t)(V * D) * sizeof *dt);
    for (int64_t n = 0; n < N; n++)
        for (int64_t d = 0; d < D; d++) {
            float *t = dt + (int64_t)idx[n] * D + d;
            *t = zoo_bf16(*t + dy[n * D + d]);
        }
    return PEAT_OK;
}

int h2_register_nn(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h2_relu_bwd_mask_dy", PEAT_OP_RELU_BWD, relu_bwd_mask_dy,
                   "ReLU backward masked by dY > 0 instead of X > 0"),
        ZOO_KERNEL("h2_relu_bwd_mask_mul", PEAT_OP_RELU_BWD, relu_bwd_mask_mul,
                   "ReLU backward as dY * (X > 0): Inf * 0 = NaN on masked Inf gradients"),
        ZOO_KERNEL("h2_relu_clamp_f16max", PEAT_OP_RELU, relu_clamp_f16max,
                   "ReLU clamped to fp16's largest finite value 65504"),
        ZOO_KERNEL("h2_relu_bwd_flip", PEAT_OP_RELU_BWD, relu_bwd_flip,
                   "ReLU backward with a transient one-bit upset on one call in four"),
        ZOO_KERNEL("h2_bias_add_stuck", PEAT_OP_BIAS_ADD, bias_add_stuck,
                   "bias add with bit 19 stuck at 1 in lane 3 of 8"),
        ZOO_KERNEL("h2_bias_add_bwd_mean", PEAT_OP_BIAS_ADD_BWD, bias_add_bwd_mean,
                   "bias gradient averaged over R*S instead of summed"),
        ZOO_KERNEL("h2_bias_add_bwd_lanes8", PEAT_OP_BIAS_ADD_BWD, bias_add_bwd_lanes8,
                   "bias gradient summed in 8 lanes, combined pairwise"),
        ZOO_KERNEL("h2_xent_bwd_dloss_onehot", PEAT_OP_CROSS_ENTROPY_BWD, xent_bwd_dloss_onehot,
                   "cross-entropy backward softmax - dloss*onehot"),
        ZOO_KERNEL("h2_xent_sum_bf16", PEAT_OP_CROSS_ENTROPY, xent_sum_bf16,
                   "cross-entropy with the sum of exponentials kept in bf16"),
        ZOO_KERNEL("h2_xent_lanes4", PEAT_OP_CROSS_ENTROPY, xent_lanes4,
                   "cross-entropy, exponentials summed in 4 lanes"),
        ZOO_KERNEL("h2_reduce_atomic", PEAT_OP_REDUCE, reduce_atomic,
                   "row reduction in a per-call random order (atomic adds)"),
        ZOO_KERNEL("h2_embedding_last_row", PEAT_OP_EMBEDDING, embedding_last_row,
                   "embedding gather skipping the last token's row (n < N-1)"),
        ZOO_KERNEL("h2_embedding_bwd_bf16_acc", PEAT_OP_EMBEDDING_BWD, embedding_bwd_bf16_acc,
                   "embedding backward scatter-added into a bf16 table"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
