/* h8_nn.c: the eighth held-out set's kernels of the older op kinds: GEMM, layer norm, softmax,
 * GELU, cross-entropy, reduce and bias. */
#include "heldout8.h"

/* ---- GEMM ---- */

static double dot_d(const peat_args *a, const zoo_gemm *g, int64_t b, int64_t i, int64_t j,
                    int64_t K)
{
    double s = 0.0;
    for (int64_t k = 0; k < K; k++) s += (double)zoo_a(a, g, b, i, k) * zoo_b(a, g, b, k, j);
    return s;
}
/* an unrolled-by-2 loop that drops the last term when K is odd */
static peat_status gemm_odd_k_drop(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++)
                zoo_store(a, &g, b, i, j, (float)dot_d(a, &g, b, i, j, g.K / 2 * 2));
    return PEAT_OK;
}
/* lane 3 of every 4 output columns with significand bit 12 stuck at 0 */
static peat_status gemm_stuck_lane3(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                zoo_store(a, &g, b, i, j, (float)dot_d(a, &g, b, i, j, g.K));
                float *y = &OUT(0)[(b * g.M + i) * g.N + j];
                if (j % 4 == 3) *y = ho_force(*y, 12, 0);
            }
    return PEAT_OK;
}
/* after ten calls a "fast path" accumulates in bf16 */
static peat_status gemm_warmup_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    static int calls;
    int fast = ++calls > 10;
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = 0.0f;
                for (int64_t k = 0; k < g.K; k++) {
                    s += zoo_a(a, &g, b, i, k) * zoo_b(a, &g, b, k, j);
                    if (fast) s = zoo_bf16(s);
                }
                zoo_store(a, &g, b, i, j, s);
            }
    return PEAT_OK;
}
/* honest: K in four splits, each an fp32 sum, joined pairwise */
static peat_status gemm_split4(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float h[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                for (int64_t k = 0; k < g.K; k++)
                    h[k * 4 / g.K] += zoo_a(a, &g, b, i, k) * zoo_b(a, &g, b, k, j);
                zoo_store(a, &g, b, i, j, (h[0] + h[1]) + (h[2] + h[3]));
            }
    return PEAT_OK;
}

/* ---- layer norm: i = R, C ; f = eps ---- */

/* Y stored through fp16 */
static peat_status layernorm_y_f16(const peat_args *a, const peat_kernel *self)
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
            OUT(0)[r * C + j] = zoo_f16((float)((x[j] - m) * rs * IN(1)[j] + IN(2)[j]));
        OUT(1)[r] = (float)m, OUT(2)[r] = (float)rs;
    }
    return PEAT_OK;
}
/* honest: two passes in fp32 with fma, rstd = 1 / sqrtf */
static peat_status layernorm_fma(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        float m = 0.0f, v = 0.0f;
        for (int64_t j = 0; j < C; j++) m += x[j];
        m /= (float)C;
        for (int64_t j = 0; j < C; j++) v = fmaf(x[j] - m, x[j] - m, v);
        float rs = 1.0f / sqrtf(v / (float)C + (float)PF(0));
        for (int64_t j = 0; j < C; j++)
            OUT(0)[r * C + j] = fmaf((x[j] - m) * rs, IN(1)[j], IN(2)[j]);
        OUT(1)[r] = m, OUT(2)[r] = rs;
    }
    return PEAT_OK;
}
/* backward (X, gamma, mean, rstd, dY -> dX, dgamma, dbeta) whose dX leaves out mean(dY gamma) */
static peat_status layernorm_bwd_no_sg(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    double *dg = calloc((size_t)C, sizeof *dg), *db = calloc((size_t)C, sizeof *db);
    if (!dg || !db) {
        free(dg), free(db);
        return PEAT_ERR_NOMEM;
    }
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C, *dy = IN(4) + r * C, *gam = IN(1);
        double m = IN(2)[r], rs = IN(3)[r], sgx = 0.0;
        for (int64_t j = 0; j < C; j++) {
            double xh = (x[j] - m) * rs;
            sgx += (double)dy[j] * gam[j] * xh, dg[j] += dy[j] * xh, db[j] += dy[j];
        }
        sgx /= (double)C;
        for (int64_t j = 0; j < C; j++)
            OUT(0)[r * C + j] = (float)(rs * ((double)dy[j] * gam[j] - (x[j] - m) * rs * sgx));
    }
    for (int64_t j = 0; j < C; j++) OUT(1)[j] = (float)dg[j], OUT(2)[j] = (float)db[j];
    free(dg), free(db);
    return PEAT_OK;
}

/* ---- softmax backward (Y, dY -> dX): the row's dot summed in an order drawn per call ---- */

static peat_status softmax_bwd_race(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    int64_t *ord = malloc((size_t)(C > 0 ? C : 1) * sizeof *ord);
    if (!ord) return PEAT_ERR_NOMEM;
    uint64_t seed = zoo_upset_draw();
    for (int64_t r = 0; r < R; r++) {
        ho_shuffle(ord, C, ho_next(&seed));
        float dot = 0.0f;
        for (int64_t q = 0; q < C; q++) dot += IN(0)[r * C + ord[q]] * IN(1)[r * C + ord[q]];
        for (int64_t j = 0; j < C; j++)
            OUT(0)[r * C + j] = IN(0)[r * C + j] * (IN(1)[r * C + j] - dot);
    }
    free(ord);
    return PEAT_OK;
}

/* ---- GELU backward (X, dY -> dX): the CDF rounded to fp16 ---- */

static peat_status gelu_bwd_cdf_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        double x = IN(0)[i], cdf = zoo_f16((float)(0.5 * (1.0 + erf(x / sqrt(2.0))))),
               pdf = exp(-0.5 * x * x) * 0.3989422804014327;
        OUT(0)[i] = (float)(IN(1)[i] * (cdf + x * pdf));
    }
    return PEAT_OK;
}

/* ---- cross-entropy backward (logits, target, dloss -> dlogits), cached by the logits'
 * address ---- */

static peat_status xent_bwd_ptr_cache(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    static const void *key;
    static float *keep;
    static int64_t nk;
    int64_t R = PI(0), C = PI(1), n = R * C;
    if (key == a->in[0]->data && keep && nk == n) {
        memcpy(OUT(0), keep, (size_t)n * sizeof *keep);
        return PEAT_OK;
    }
    const int32_t *t = a->in[1]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        double mx = -INFINITY, s = 0.0;
        for (int64_t j = 0; j < C; j++) mx = fmax(mx, x[j]);
        for (int64_t j = 0; j < C; j++) s += exp(x[j] - mx);
        for (int64_t j = 0; j < C; j++)
            OUT(0)[r * C + j] = (float)(IN(2)[r] * (exp(x[j] - mx) / s - (j == t[r] ? 1.0 : 0.0)));
    }
    float *k = realloc(keep, (size_t)(n > 0 ? n : 1) * sizeof *k);
    if (!k) return PEAT_OK;
    keep = k, nk = n, key = a->in[0]->data;
    memcpy(keep, OUT(0), (size_t)n * sizeof *keep);
    return PEAT_OK;
}

/* ---- reduce: i = R C mode ; the mean divided by C - 1 ---- */

static peat_status reduce_mean_c1(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t j = 0; j < C; j++) s += IN(0)[r * C + j];
        OUT(0)[r] = (float)(PI(2) == 1 ? s / (double)(C > 1 ? C - 1 : 1) : s);
    }
    return PEAT_OK;
}

/* ---- bias add: i = R C S ; X, b -> Y cut toward zero to bf16's precision ---- */

static peat_status bias_add_trunc(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1), S = PI(2);
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (r * C + c) * S + s;
                OUT(0)[i] = IN(0)[i] + IN(1)[c];
            }
    for (int64_t i = 0; i < R * C * S; i++) OUT(0)[i] = ho_bf16_rz(OUT(0)[i]);
    return PEAT_OK;
}

int h8_register_nn(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h8_gemm_odd_k_drop", PEAT_OP_GEMM, gemm_odd_k_drop, "odd K's last term lost"),
        ZOO_KERNEL("h8_gemm_stuck_lane3", PEAT_OP_GEMM, gemm_stuck_lane3, "lane 3 bit 12 at 0"),
        ZOO_KERNEL("h8_gemm_warmup_bf16", PEAT_OP_GEMM, gemm_warmup_bf16,
                   "bf16 sums after ten calls"),
        ZOO_KERNEL("h8_gemm_split4", PEAT_OP_GEMM, gemm_split4, "honest: four K splits"),
        ZOO_KERNEL("h8_layernorm_y_f16", PEAT_OP_LAYERNORM, layernorm_y_f16, "Y through fp16"),
        ZOO_KERNEL("h8_layernorm_fma", PEAT_OP_LAYERNORM, layernorm_fma, "honest: fp32 fma"),
        ZOO_KERNEL("h8_layernorm_bwd_no_sg", PEAT_OP_LAYERNORM_BWD, layernorm_bwd_no_sg,
                   "dX without mean(dY gamma)"),
        ZOO_KERNEL("h8_softmax_bwd_race", PEAT_OP_SOFTMAX_BWD, softmax_bwd_race,
                   "dot in a drawn order"),
        ZOO_KERNEL("h8_gelu_bwd_cdf_f16", PEAT_OP_GELU_BWD, gelu_bwd_cdf_f16, "CDF in fp16"),
        ZOO_KERNEL("h8_xent_bwd_ptr_cache", PEAT_OP_CROSS_ENTROPY_BWD, xent_bwd_ptr_cache,
                   "cached by the logits' address"),
        ZOO_KERNEL("h8_reduce_mean_c1", PEAT_OP_REDUCE, reduce_mean_c1, "mean over C - 1"),
        ZOO_KERNEL("h8_bias_add_trunc", PEAT_OP_BIAS_ADD, bias_add_trunc, "Y cut to bf16"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
