/* probe_ops.c: value and shape probes for every op kind beyond GEMM (docs/detector.md has the
 * coverage table): the ranges a formula can leave (logits of +-100 and shifted by 1e4, -inf
 * masks, huge means over tiny spreads, GELU at +-10 and on subnormals, tiny second moments and
 * huge gradients, mixed magnitudes) and the shapes blocked loops get wrong (conv strides, pads,
 * 1x1 and whole-image kernels, batch 1; attention head dims; repeated and last embedding
 * indices; reduction lengths off every block size up to 64). */
#include "analyzer/probe_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

peat_probe *peat_analyzer_probe_clone(peat_probe_set *s, const peat_record *rec,
                                      peat_probe_kind kind, peat_probe_tag tag, const char *label)
{
    peat_probe *p = peat_analyzer_probe_add(s, kind, tag, label);
    if (!p) return NULL;
    p->args.op = rec->op, p->args.p = rec->p;
    for (int k = 0; k < rec->n_in; k++) {
        peat_tensor *t = NULL;
        if (peat_tensor_clone(rec->in[k], &t) != PEAT_OK) return NULL;
        p->args.in[k] = t, p->args.n_in = k + 1;
    }
    return p;
}

static float *data_of(peat_probe *p, int k)
{
    return (float *)((peat_tensor *)p->args.in[k])->data;
}

static int64_t numel_of(const peat_probe *p, int k)
{
    return peat_tensor_numel(p->args.in[k]);
}

static double maxabs(const peat_tensor *t)
{
    const float *x = t->data;
    double m = 0.0;
    for (int64_t i = 0; i < peat_tensor_numel(t); i++)
        if (isfinite(x[i]) && fabs(x[i]) > m) m = fabs(x[i]);
    return m > 0.0 ? m : 1.0;
}

/* A clone of rec with input k mapped to shift + scale x. */
static peat_status scaled(peat_probe_set *s, const peat_record *rec, peat_probe_tag tag,
                          const char *label, int k, double scale, double shift)
{
    peat_probe *p = peat_analyzer_probe_clone(s, rec, PEAT_PROBE_VALUE, tag, label);
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe %s", label);
    float *x = data_of(p, k);
    for (int64_t i = 0; i < numel_of(p, k); i++) x[i] = (float)(shift + scale * (double)x[i]);
    return PEAT_OK;
}

/* ---- value probes ---- */

/* logits spread to +-100 (exp overflows past 88.7 without the max shift), then also shifted by
 * 1e4 (every logit large: a sum of exponentials or a shift-free log-sum-exp overflows) */
static peat_status logit_values(peat_probe_set *s, const peat_record *rec)
{
    double sc = 100.0 / maxabs(rec->in[0]);
    PEAT_TRY(scaled(s, rec, PEAT_PROBE_TAG_OVERFLOW, "value logits spread to +-100", 0, sc, 0.0));
    PEAT_TRY(scaled(s, rec, PEAT_PROBE_TAG_OVERFLOW, "value logits shifted by 1e4", 0, 1.0, 1e4));
    /* a confidently wrong prediction: the target's logit 120 below the row's max (its
     * probability underflows fp32, its log does not) */
    PEAT_TRY(scaled(s, rec, PEAT_PROBE_TAG_OVERFLOW,
                    "value target logit 120 below the row max (confidently wrong)", 0, sc, 0.0));
    peat_probe *p = &s->p[s->n - 1];
    int64_t R = rec->p.i[0], C = rec->p.i[1];
    const int32_t *t = rec->in[1]->data;
    float *x = data_of(p, 0);
    for (int64_t r = 0; r < R; r++) {
        float mx = -INFINITY;
        for (int64_t j = 0; j < C; j++) mx = x[r * C + j] > mx ? x[r * C + j] : mx;
        if (C > 1) x[r * C + t[r]] = mx - 120.0f;
    }
    return PEAT_OK;
}

/* row r sees columns 0..r mod C, the rest -inf (a causal mask, at least one finite entry) */
static peat_status softmax_mask(peat_probe_set *s, const peat_record *rec)
{
    peat_probe *p = peat_analyzer_probe_clone(s, rec, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_NONE,
                                              "value -inf causal mask");
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "mask probe");
    int64_t R = rec->p.i[0], C = rec->p.i[1];
    float *x = data_of(p, 0);
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = r % C + 1; j < C; j++) x[r * C + j] = -INFINITY;
    return PEAT_OK;
}

static peat_status gelu_values(peat_probe_set *s, const peat_record *rec)
{
    double m = maxabs(rec->in[0]);
    PEAT_TRY(scaled(s, rec, PEAT_PROBE_TAG_OVERFLOW, "value x spread to +-10", 0, 10.0 / m, 0.0));
    PEAT_TRY(scaled(s, rec, PEAT_PROBE_TAG_OVERFLOW, "value x spread to +-30", 0, 30.0 / m, 0.0));
    return scaled(s, rec, PEAT_PROBE_TAG_SUBNORMAL, "value subnormal x (x 2^-130)", 0, 0x1p-130,
                  0.0);
}

static peat_status adamw_values(peat_probe_set *s, const peat_record *rec)
{
    PEAT_TRY(scaled(s, rec, PEAT_PROBE_TAG_SUBNORMAL, "value tiny second moment (v x 1e-30)", 3,
                    1e-30, 0.0));
    PEAT_TRY(
        scaled(s, rec, PEAT_PROBE_TAG_OVERFLOW, "value huge gradients (g x 1e12)", 1, 1e12, 0.0));
    peat_probe *p = peat_analyzer_probe_clone(s, rec, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_NONE,
                                              "value zero gradient and moments (g = m = v = 0)");
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "adamw probe");
    for (int k = 1; k < 4; k++) memset(data_of(p, k), 0, (size_t)numel_of(p, k) * sizeof(float));
    return PEAT_OK;
}

/* A reduce probe of REDUCE_ROWS rows of length len, the recorded values cycled: enough outputs
 * for the statistical rules (a recorded call may hold a single row). */
#define REDUCE_ROWS 256
static peat_probe *reduce_probe(peat_probe_set *s, const peat_record *rec, peat_probe_kind kind,
                                peat_probe_tag tag, const char *label, int64_t len)
{
    peat_probe *p = peat_analyzer_probe_add(s, kind, tag, label);
    peat_tensor *t = NULL;
    if (!p || peat_tensor_alloc2(PEAT_DTYPE_F32, REDUCE_ROWS, len, &t) != PEAT_OK) return NULL;
    p->args.op = rec->op, p->args.p = rec->p;
    p->args.p.i[0] = REDUCE_ROWS, p->args.p.i[1] = len;
    p->args.in[0] = t, p->args.n_in = 1;
    const float *x = rec->in[0]->data;
    int64_t n = peat_tensor_numel(rec->in[0]);
    float *y = t->data;
    /* recorded values times a hashed factor in [0.5, 1.5): their signs and scale, but rows that
     * do not repeat each other's rounding errors */
    for (int64_t e = 0; e < REDUCE_ROWS * len; e++) {
        uint64_t h = (uint64_t)(e + 1) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
        y[e] = x[(e * 7919) % n] * (float)(0.5 + (double)(h >> 11) * 0x1p-53);
    }
    return p;
}

/* alternating magnitudes 1 and 1e6, and halves +x, -x(1 + 2^-20) that cancel */
static peat_status reduce_values(peat_probe_set *s, const peat_record *rec)
{
    int64_t C = rec->p.i[1];
    peat_probe *p = reduce_probe(s, rec, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_NONE,
                                 "value mixed magnitudes (x 1 and x 1e6)", C);
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "reduce probe");
    float *x = data_of(p, 0);
    for (int64_t i = 0; i < numel_of(p, 0); i++) x[i] *= i % 2 ? 1e6f : 1.0f;
    /* each row's second half negates its first: the terms cancel late in any order (as the
     * GEMM cancellation probe), so no order is favoured */
    int64_t L = C + C % 2;
    p = reduce_probe(s, rec, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_CANCEL,
                     "value cancelling halves (+x, -x(1 + 2^-20))", L);
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "reduce probe");
    x = data_of(p, 0);
    for (int64_t r = 0; r < REDUCE_ROWS; r++)
        for (int64_t j = L / 2; j < L; j++)
            x[r * L + j] = -x[r * L + j - L / 2] * (1.0f + 0x1p-20f);
    return PEAT_OK;
}

static peat_status values(peat_probe_set *s, const peat_record *rec)
{
    switch (rec->op) {
    case PEAT_OP_CROSS_ENTROPY:
    case PEAT_OP_CROSS_ENTROPY_BWD:
        return logit_values(s, rec);
    case PEAT_OP_SOFTMAX:
        PEAT_TRY(scaled(s, rec, PEAT_PROBE_TAG_OVERFLOW, "value logits spread to +-100", 0,
                        100.0 / maxabs(rec->in[0]), 0.0));
        return softmax_mask(s, rec);
    case PEAT_OP_LAYERNORM:
        return scaled(s, rec, PEAT_PROBE_TAG_CANCEL,
                      "value huge mean over tiny spread (1e4 + 0.01 x)", 0, 0.01, 1e4);
    case PEAT_OP_LAYERNORM_BWD: {
        /* rows shifted by 100 x their spread, the saved mean with them (rstd unchanged) */
        peat_probe *p = peat_analyzer_probe_clone(s, rec, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_CANCEL,
                                                  "value mean 100 x the spread (x + 100 / rstd)");
        if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "layernorm_bwd probe");
        int64_t R = rec->p.i[0], C = rec->p.i[1];
        float *x = data_of(p, 0), *mean = data_of(p, 2);
        const float *rstd = data_of(p, 3);
        for (int64_t r = 0; r < R; r++) {
            float sh = 100.0f / rstd[r];
            mean[r] += sh;
            for (int64_t j = 0; j < C; j++) x[r * C + j] += sh;
        }
        return PEAT_OK;
    }
    case PEAT_OP_GELU:
    case PEAT_OP_GELU_BWD:
        return gelu_values(s, rec);
    case PEAT_OP_ADAMW:
        return adamw_values(s, rec);
    case PEAT_OP_SGD:
        return scaled(s, rec, PEAT_PROBE_TAG_OVERFLOW, "value huge gradients (g x 1e12)", 1, 1e12,
                      0.0);
    case PEAT_OP_REDUCE:
        return reduce_values(s, rec);
    default:
        return PEAT_OK;
    }
}

/* ---- shape probes ---- */

static double rms(const peat_tensor *t)
{
    const float *x = t->data;
    double s = 0.0;
    int64_t n = peat_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) s += isfinite(x[i]) ? (double)x[i] * x[i] : 0.0;
    return n > 0 && s > 0.0 ? sqrt(s / (double)n) : 1.0;
}

/* A probe of rec's op with params q and new Gaussian inputs of the given sizes, each at the rms
 * of the recorded input it replaces. */
static peat_status fresh(peat_probe_set *s, const peat_record *rec, peat_rng_t *r,
                         const peat_op_params *q, const int64_t *sizes, int n_in, const char *label)
{
    peat_probe *p = peat_analyzer_probe_add(s, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE, label);
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe list");
    p->args.op = rec->op, p->args.p = *q;
    for (int k = 0; k < n_in; k++) {
        peat_tensor *t = NULL;
        PEAT_TRY(peat_tensor_alloc(PEAT_DTYPE_F32, 1, &sizes[k], &t));
        p->args.in[k] = t, p->args.n_in = k + 1;
        peat_rng_fill_gaussian(r, t, rms(rec->in[k]));
    }
    return PEAT_OK;
}

/* conv: strides 1-3, pads, odd sizes, 1x1, a kernel as large as the (padded) input, batch 1.
 * Batches above 1 grow until the output holds 256 elements, enough for the statistical rules. */
static peat_status conv_shapes(peat_probe_set *s, const peat_record *rec, peat_rng_t *r)
{
    static const int64_t cf[][7] = {/* N H W KH KW stride pad */
                                    {1, 7, 9, 3, 3, 1, 1},   {2, 9, 7, 3, 3, 2, 1},
                                    {2, 11, 13, 5, 5, 3, 2}, {2, 8, 8, 1, 1, 1, 0},
                                    {1, 5, 5, 5, 5, 1, 0},   {2, 6, 5, 2, 3, 2, 1},
                                    {2, 4, 4, 3, 3, 3, 2}};
    int64_t C = rec->p.i[1], O = rec->p.i[4];
    char label[96];
    for (size_t i = 0; i < sizeof cf / sizeof cf[0]; i++) {
        peat_op_params q = rec->p;
        int64_t N = cf[i][0], H = cf[i][1], W = cf[i][2], KH = cf[i][3], KW = cf[i][4];
        int64_t st = cf[i][5], pd = cf[i][6];
        int64_t OH = (H + 2 * pd - KH) / st + 1, OW = (W + 2 * pd - KW) / st + 1;
        while (N > 1 && N < 64 && N * O * OH * OW < 256) N *= 2;
        q.i[0] = N, q.i[2] = H, q.i[3] = W, q.i[5] = KH, q.i[6] = KW, q.i[7] = st, q.i[8] = pd;
        int64_t nx = N * C * H * W, nw = O * C * KH * KW, ny = N * O * OH * OW;
        int64_t sz[2] = {nx, nw};
        if (rec->op == PEAT_OP_CONV2D_BWD_DATA) sz[0] = ny;
        if (rec->op == PEAT_OP_CONV2D_BWD_FILTER) sz[1] = ny;
        snprintf(label, sizeof label, "shape N%lld %lldx%lld k%lldx%lld stride %lld pad %lld",
                 (long long)N, (long long)H, (long long)W, (long long)KH, (long long)KW,
                 (long long)st, (long long)pd);
        PEAT_TRY(fresh(s, rec, r, &q, sz, 2, label));
    }
    return PEAT_OK;
}

/* attention forward at other head dims (scale 1/sqrt(D)) */
static peat_status attention_dims(peat_probe_set *s, const peat_record *rec, peat_rng_t *r)
{
    static const int64_t dims[] = {1, 3, 17, 65};
    char label[96];
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        if (dims[i] == rec->p.i[3]) continue;
        peat_op_params q = rec->p;
        q.i[3] = dims[i], q.f[0] = 1.0 / sqrt((double)dims[i]);
        int64_t n = q.i[0] * q.i[1] * q.i[2] * q.i[3], sz[3] = {n, n, n};
        snprintf(label, sizeof label, "shape head dim D=%lld (recorded %lld)", (long long)dims[i],
                 (long long)rec->p.i[3]);
        PEAT_TRY(fresh(s, rec, r, &q, sz, 3, label));
    }
    return PEAT_OK;
}

/* embedding: every token the same; every third token the last index V-1 */
static peat_status embedding_idx(peat_probe_set *s, const peat_record *rec)
{
    int k = rec->op == PEAT_OP_EMBEDDING ? 1 : 0;
    int64_t V = rec->p.i[1];
    peat_probe *p = peat_analyzer_probe_clone(s, rec, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE,
                                              "shape every token the same index");
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "embedding probe");
    int32_t *ix = (int32_t *)data_of(p, k);
    for (int64_t i = 1; i < numel_of(p, k); i++) ix[i] = ix[0];
    p = peat_analyzer_probe_clone(s, rec, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE,
                                  "shape the last index (V-1) every third token");
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "embedding probe");
    ix = (int32_t *)data_of(p, k);
    for (int64_t i = 0; i < numel_of(p, k); i += 3) ix[i] = (int32_t)(V - 1);
    return PEAT_OK;
}

/* reductions: row lengths that leave a remainder for every block size up to 64 (1..9 and one
 * either side of 16, 32, 64, 128), the recorded values cycled */
static peat_status reduce_lengths(peat_probe_set *s, const peat_record *rec)
{
    static const int64_t lens[] = {1, 2, 3, 4, 5, 6, 7, 9, 15, 17, 31, 33, 63, 65, 127, 129};
    char label[96];
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        if (lens[i] == rec->p.i[1]) continue;
        snprintf(label, sizeof label, "shape row length %lld (recorded %lld)", (long long)lens[i],
                 (long long)rec->p.i[1]);
        if (!reduce_probe(s, rec, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE, label, lens[i]))
            return PEAT_ERROR(PEAT_ERR_NOMEM, "reduce probe");
    }
    return PEAT_OK;
}

static peat_status shapes(peat_probe_set *s, const peat_record *rec, peat_rng_t *r)
{
    switch (rec->op) {
    case PEAT_OP_CONV2D:
    case PEAT_OP_CONV2D_BWD_DATA:
    case PEAT_OP_CONV2D_BWD_FILTER:
        return conv_shapes(s, rec, r);
    case PEAT_OP_ATTENTION:
        return attention_dims(s, rec, r);
    case PEAT_OP_EMBEDDING:
    case PEAT_OP_EMBEDDING_BWD:
        return embedding_idx(s, rec);
    case PEAT_OP_REDUCE:
        return reduce_lengths(s, rec);
    default:
        return PEAT_OK;
    }
}

/* ---- the two ends of the range, on every op ---- */

/* The inputs an op's outputs scale with when they alone are scaled, the others (indices, the
 * saved statistics a backward reads: mean, rstd, logsumexp, softmax outputs) kept consistent:
 * bit k set for input k (0: none). */
static unsigned free_inputs(peat_op_kind op)
{
    switch (op) {
    case PEAT_OP_RELU:
    case PEAT_OP_BIAS_ADD_BWD:
    case PEAT_OP_EMBEDDING:
    case PEAT_OP_REDUCE:
    case PEAT_OP_CONV2D_BWD_DATA:
        return 1u << 0;
    case PEAT_OP_RELU_BWD:
    case PEAT_OP_SOFTMAX_BWD:
    case PEAT_OP_EMBEDDING_BWD:
    case PEAT_OP_CONV2D_BWD_FILTER:
        return 1u << 1;
    case PEAT_OP_BIAS_ADD:
        return 1u << 0 | 1u << 1;
    case PEAT_OP_LAYERNORM:
        return 1u << 1 | 1u << 2; /* gamma, beta: Y scales with them */
    case PEAT_OP_LAYERNORM_BWD:
        return 1u << 4; /* dY */
    case PEAT_OP_ATTENTION:
        return 1u << 2; /* V */
    case PEAT_OP_ATTENTION_BWD:
        return 1u << 5; /* dO */
    case PEAT_OP_CROSS_ENTROPY_BWD:
        return 1u << 2; /* dloss */
    default:
        /* GEMM and conv2d (probe.c), GELU (its own), softmax and cross entropy (a normal output
         * whatever the inputs' scale); the optimizers: a dozen roundings an element, where the
         * bound of a depth-1 op allows two units of 2^-150 (their own tiny-moment probes) */
        return 0;
    }
}

/* The free inputs scaled so that their largest magnitude is `to`. */
static peat_status scaled_free(peat_probe_set *s, const peat_record *rec, peat_probe_tag tag,
                               const char *label, unsigned mask, double to)
{
    peat_probe *p = peat_analyzer_probe_clone(s, rec, PEAT_PROBE_VALUE, tag, label);
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe %s", label);
    for (int k = 0; k < rec->n_in; k++) {
        if (!(mask >> k & 1u) || rec->in[k]->dtype != PEAT_DTYPE_F32) continue;
        double sc = to / maxabs(rec->in[k]);
        float *x = data_of(p, k);
        for (int64_t i = 0; i < numel_of(p, k); i++) x[i] = (float)(sc * (double)x[i]);
    }
    return PEAT_OK;
}

/* Every op's outputs pushed to the two ends of fp32's range through the inputs they scale
 * with: subnormal outputs (a flush to zero anywhere shows), and values past fp16's 65504 (an
 * fp16 intermediate overflows; fp32 is far from its own limit). Softmax, cross entropy and
 * attention get the large end through their logits and scores; layernorm through its inputs. */
static peat_status range_ends(peat_probe_set *s, const peat_record *rec)
{
    unsigned m = free_inputs(rec->op);
    if (m)
        PEAT_TRY(scaled_free(s, rec, PEAT_PROBE_TAG_SUBNORMAL,
                             "value subnormal outputs (inputs they scale with to 2^-130)", m,
                             0x1p-130));
    unsigned big = m;
    switch (rec->op) {
    case PEAT_OP_SOFTMAX:
    case PEAT_OP_CROSS_ENTROPY:
    case PEAT_OP_CROSS_ENTROPY_BWD:
    case PEAT_OP_LAYERNORM:
        big = 1u << 0; /* logits, X */
        break;
    case PEAT_OP_ATTENTION:
        big = 1u << 0 | 1u << 1; /* Q and K: scores of 2^34 x D x scale */
        break;
    case PEAT_OP_ADAMW:
    case PEAT_OP_SGD:
    case PEAT_OP_EMBEDDING_BWD:
        big = 0; /* their own huge-gradient probes; scatter-adds of large rows say nothing new */
        break;
    default:
        break;
    }
    if (!big) return PEAT_OK;
    return scaled_free(s, rec, PEAT_PROBE_TAG_OVERFLOW,
                       "value beyond fp16's range (inputs to 2^17 = 131072)", big, 0x1p17);
}

peat_status peat_analyzer_probe_ops(peat_probe_set *s, const peat_record *rec, uint64_t seed)
{
    peat_rng_t *r = peat_rng_new(seed ^ 0x6f70732070726fbull);
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe rng");
    peat_status st = shapes(s, rec, r);
    if (st == PEAT_OK) st = values(s, rec);
    if (st == PEAT_OK) st = range_ends(s, rec);
    peat_rng_free(r);
    return st;
}
