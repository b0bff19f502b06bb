/* h7_nn.c: the seventh held-out set's kernels of the older op kinds: GEMM, layer norm, softmax,
 * GELU, cross-entropy and the bias gradient. */
#include "heldout7.h"

/* ---- GEMM ---- */

static float dot_d(const peat_args *a, const zoo_gemm *g, int64_t b, int64_t i, int64_t j,
                   int64_t K)
{
    double s = 0.0;
    for (int64_t k = 0; k < K; k++) s += (double)zoo_a(a, g, b, i, k) * zoo_b(a, g, b, k, j);
    return (float)s;
}
/* beta ignored: C never added */
static peat_status gemm_beta_ignored(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++)
                OUT(0)[(b * g.M + i) * g.N + j] = g.alpha * dot_d(a, &g, b, i, j, g.K);
    return PEAT_OK;
}
/* A and B rounded to tf32 (10 explicit significand bits) before the products */
static peat_status gemm_tf32_inputs(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                double s = 0.0;
                for (int64_t k = 0; k < g.K; k++)
                    s += (double)zoo_tf32(zoo_a(a, &g, b, i, k)) * zoo_tf32(zoo_b(a, &g, b, k, j));
                zoo_store(a, &g, b, i, j, (float)s);
            }
    return PEAT_OK;
}
/* rows past the last full tile of 8 (M not a multiple of 8) drop the last K term */
static peat_status gemm_m_tail8(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    int64_t Mf = g.M / 8 * 8;
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++)
                zoo_store(a, &g, b, i, j,
                          dot_d(a, &g, b, i, j, i >= Mf && g.K > 1 ? g.K - 1 : g.K));
    return PEAT_OK;
}
/* a transient upset: in about one call of four, one output element has one bit (10..30) flipped */
static peat_status gemm_upset(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    uint64_t h = zoo_upset_draw();
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) zoo_store(a, &g, b, i, j, dot_d(a, &g, b, i, j, g.K));
    if (h % 4 == 0) {
        int64_t n = g.B * g.M * g.N, at = (int64_t)((h >> 8) % (uint64_t)(n > 0 ? n : 1));
        OUT(0)[at] = ho_flip(OUT(0)[at], 10 + (int)((h >> 40) % 21));
    }
    return PEAT_OK;
}
/* B packed once and the packed copy reused while B's address stays the same (a pre-packed weight
 * cache that misses in-place updates of the weights) */
static peat_status gemm_packed_b_cache(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    static const void *key;
    static float *packed;
    static int64_t nkey;
    zoo_gemm g = zoo_gemm_of(a);
    int64_t nb = ho_numel(a->in[1]);
    if (key != a->in[1]->data || nkey != nb || !packed) {
        float *p = realloc(packed, (size_t)(nb > 0 ? nb : 1) * sizeof *p);
        if (!p) return PEAT_ERR_NOMEM;
        packed = p, key = a->in[1]->data, nkey = nb;
        memcpy(packed, a->in[1]->data, (size_t)nb * sizeof *packed);
    }
    /* the products read B from the packed copy (same layout as B) */
    peat_tensor bt = *a->in[1];
    bt.data = packed;
    peat_args c = *a;
    c.in[1] = &bt;
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++)
                zoo_store(&c, &g, b, i, j, dot_d(&c, &g, b, i, j, g.K));
    return PEAT_OK;
}
/* honest: K in blocks of 64, each block an fp32 fma chain, the blocks' sums added in order */
static peat_status gemm_k64_blocks(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = 0.0f;
                for (int64_t k0 = 0; k0 < g.K; k0 += 64) {
                    float t = 0.0f;
                    for (int64_t k = k0; k < g.K && k < k0 + 64; k++)
                        t = fmaf(zoo_a(a, &g, b, i, k), zoo_b(a, &g, b, k, j), t);
                    s += t;
                }
                zoo_store(a, &g, b, i, j, s);
            }
    return PEAT_OK;
}

/* ---- layer norm: i = R, C ; f = eps ---- */

/* gamma and beta swapped: y = xhat beta + gamma */
static peat_status layernorm_gamma_beta_swap(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        double m = 0.0, v = 0.0;
        for (int64_t j = 0; j < C; j++) m += x[j];
        m /= (double)C;
        for (int64_t j = 0; j < C; j++) v += (x[j] - m) * (x[j] - m);
        double rs = 1.0 / sqrt(v / (double)C + PF(0));
        for (int64_t j = 0; j < C; j++)
            OUT(0)[r * C + j] = (float)((x[j] - m) * rs * IN(2)[j] + IN(1)[j]);
        OUT(1)[r] = (float)m, OUT(2)[r] = (float)rs;
    }
    return PEAT_OK;
}
/* backward (X, gamma, mean, rstd, dY -> dX, dgamma, dbeta) whose dgamma and dbeta add the rows
 * in an order drawn per call (row blocks racing on atomics), fp32 */
static peat_status layernorm_bwd_dg_race(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    int64_t *ord = malloc((size_t)(R > 0 ? R : 1) * sizeof *ord);
    if (!ord) return PEAT_ERR_NOMEM;
    ho_shuffle(ord, R, zoo_upset_draw());
    for (int64_t j = 0; j < C; j++) OUT(1)[j] = 0.0f, OUT(2)[j] = 0.0f;
    for (int64_t q = 0; q < R; q++) {
        int64_t r = ord[q];
        const float *x = IN(0) + r * C, *dy = IN(4) + r * C, *gam = IN(1);
        double m = IN(2)[r], rs = IN(3)[r], sg = 0.0, sgx = 0.0;
        for (int64_t j = 0; j < C; j++) {
            double xh = (x[j] - m) * rs, g = (double)dy[j] * gam[j];
            sg += g, sgx += g * xh;
            OUT(1)[j] += (float)(dy[j] * xh), OUT(2)[j] += dy[j];
        }
        sg /= (double)C, sgx /= (double)C;
        for (int64_t j = 0; j < C; j++) {
            double xh = (x[j] - m) * rs, g = (double)dy[j] * gam[j];
            OUT(0)[r * C + j] = (float)(rs * (g - sg - xh * sgx));
        }
    }
    free(ord);
    return PEAT_OK;
}

/* ---- softmax: i = R, C ---- */

/* the row's first element used as its maximum: exp overflows once another passes it by 88.7 */
static peat_status softmax_max_first(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        float m = x[0], s = 0.0f;
        for (int64_t j = 0; j < C; j++) s += expf(x[j] - m);
        for (int64_t j = 0; j < C; j++) OUT(0)[r * C + j] = expf(x[j] - m) / s;
    }
    return PEAT_OK;
}
/* after six calls a "fast path" keeps the exponentials in fp16 */
static peat_status softmax_warmup_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    static int calls;
    int fast = ++calls > 6;
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        double m = -INFINITY, s = 0.0;
        for (int64_t j = 0; j < C; j++) m = fmax(m, x[j]);
        for (int64_t j = 0; j < C; j++) {
            float e = (float)exp(x[j] - m), e16 = zoo_f16(e);
            OUT(0)[r * C + j] = fast ? e16 : e, s += OUT(0)[r * C + j];
        }
        for (int64_t j = 0; j < C; j++) OUT(0)[r * C + j] = (float)(OUT(0)[r * C + j] / s);
    }
    return PEAT_OK;
}
/* honest: one online pass (running max, the sum rescaled), exp2 of log2(e)-scaled differences,
 * then the normalisation pass, fp32 */
static peat_status softmax_online_exp2(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float l2e = 1.44269504f;
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        float m = -INFINITY, s = 0.0f;
        for (int64_t j = 0; j < C; j++) {
            float mn = fmaxf(m, x[j]);
            s = s * exp2f((m - mn) * l2e) + exp2f((x[j] - mn) * l2e), m = mn;
        }
        float inv = 1.0f / s;
        for (int64_t j = 0; j < C; j++) OUT(0)[r * C + j] = exp2f((x[j] - m) * l2e) * inv;
    }
    return PEAT_OK;
}

/* ---- GELU ---- */

/* the tanh form with 0.44715 for 0.044715 */
static peat_status gelu_const_typo(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        double x = IN(0)[i];
        OUT(0)[i] = (float)(0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.44715 * x * x * x))));
    }
    return PEAT_OK;
}
/* backward (X, dY -> dX) with bit 14 of every result stuck at 1 */
static peat_status gelu_bwd_stuck14(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        double x = IN(0)[i], cdf = 0.5 * (1.0 + erf(x / sqrt(2.0))),
               pdf = exp(-0.5 * x * x) * 0.3989422804014327;
        OUT(0)[i] = ho_force((float)(IN(1)[i] * (cdf + x * pdf)), 14, 1);
    }
    return PEAT_OK;
}

/* ---- cross-entropy: i = R, C ---- */

/* the row's sum of exponentials in an fp16 accumulator */
static peat_status xent_lse_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    const int32_t *t = a->in[1]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        double mx = -INFINITY;
        float s = 0.0f;
        for (int64_t j = 0; j < C; j++) mx = fmax(mx, x[j]);
        for (int64_t j = 0; j < C; j++) s = zoo_f16(s + (float)exp(x[j] - mx));
        OUT(0)[r] = (float)(mx + log((double)s) - x[t[r]]);
    }
    return PEAT_OK;
}
/* honest: p = exp(x - m) / s in fp32, the target's 1 subtracted, times dloss */
static peat_status xent_bwd_sub(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    const int32_t *t = a->in[1]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        float mx = -INFINITY, s = 0.0f;
        for (int64_t j = 0; j < C; j++) mx = fmaxf(mx, x[j]);
        for (int64_t j = 0; j < C; j++) s += expf(x[j] - mx);
        for (int64_t j = 0; j < C; j++) {
            float p = expf(x[j] - mx) / s;
            OUT(0)[r * C + j] = (j == t[r] ? p - 1.0f : p) * IN(2)[r];
        }
    }
    return PEAT_OK;
}

/* ---- bias gradient: i = R, C, S ; dY -> db, subnormal sums flushed to zero ---- */

static peat_status bias_add_bwd_ftz(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1), S = PI(2);
    for (int64_t c = 0; c < C; c++) {
        double acc = 0.0;
        for (int64_t r = 0; r < R; r++)
            for (int64_t s = 0; s < S; s++) acc += IN(0)[(r * C + c) * S + s];
        OUT(0)[c] = ho_ftz((float)acc);
    }
    return PEAT_OK;
}

int h7_register_nn(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h7_gemm_beta_ignored", PEAT_OP_GEMM, gemm_beta_ignored, "C never added"),
        ZOO_KERNEL("h7_gemm_tf32_inputs", PEAT_OP_GEMM, gemm_tf32_inputs, "inputs in tf32"),
        ZOO_KERNEL("h7_gemm_m_tail8", PEAT_OP_GEMM, gemm_m_tail8,
                   "rows past the last tile of 8 drop a K term"),
        ZOO_KERNEL("h7_gemm_upset", PEAT_OP_GEMM, gemm_upset, "one bit flipped, 1 call in 4"),
        ZOO_KERNEL("h7_gemm_packed_b_cache", PEAT_OP_GEMM, gemm_packed_b_cache,
                   "B packed once per address"),
        ZOO_KERNEL("h7_gemm_k64_blocks", PEAT_OP_GEMM, gemm_k64_blocks, "honest: K blocks of 64"),
        ZOO_KERNEL("h7_layernorm_gamma_beta_swap", PEAT_OP_LAYERNORM, layernorm_gamma_beta_swap,
                   "gamma and beta swapped"),
        ZOO_KERNEL("h7_layernorm_bwd_dg_race", PEAT_OP_LAYERNORM_BWD, layernorm_bwd_dg_race,
                   "dgamma rows in a drawn order"),
        ZOO_KERNEL("h7_softmax_max_first", PEAT_OP_SOFTMAX, softmax_max_first, "x[0] as the max"),
        ZOO_KERNEL("h7_softmax_warmup_f16", PEAT_OP_SOFTMAX, softmax_warmup_f16,
                   "fp16 exponentials after six calls"),
        ZOO_KERNEL("h7_softmax_online_exp2", PEAT_OP_SOFTMAX, softmax_online_exp2,
                   "honest: online, exp2"),
        ZOO_KERNEL("h7_gelu_const_typo", PEAT_OP_GELU, gelu_const_typo, "0.44715 in the tanh"),
        ZOO_KERNEL("h7_gelu_bwd_stuck14", PEAT_OP_GELU_BWD, gelu_bwd_stuck14, "bit 14 stuck at 1"),
        ZOO_KERNEL("h7_xent_lse_f16", PEAT_OP_CROSS_ENTROPY, xent_lse_f16, "sum of exp in fp16"),
        ZOO_KERNEL("h7_xent_bwd_sub", PEAT_OP_CROSS_ENTROPY_BWD, xent_bwd_sub,
                   "honest: p - onehot"),
        ZOO_KERNEL("h7_bias_add_bwd_ftz", PEAT_OP_BIAS_ADD_BWD, bias_add_bwd_ftz,
                   "db flushes subnormals"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
