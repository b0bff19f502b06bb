/* h5_llama.c: the fifth held-out set's kernels of the LLaMA block: RMSNorm, SiLU, SwiGLU, RoPE
 * and (grouped-query) attention. */
#include "heldout5.h"

/* ---- RMSNorm: i = R, C ; f = eps ; X, gamma -> Y, rstd ---- */

enum { RN_Y_F16, RN_NO_EPS };

static void rmsnorm_d(const peat_args *a, int kind)
{
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        double ss = 0.0;
        for (int64_t j = 0; j < C; j++) ss += (double)x[j] * x[j];
        double rs = kind == RN_NO_EPS ? (double)(1.0f / sqrtf((float)(ss / (double)C)))
                                      : 1.0 / sqrt(ss / (double)C + PF(0));
        for (int64_t j = 0; j < C; j++) {
            float y = (float)(x[j] * rs * IN(1)[j]);
            OUT(0)[r * C + j] = kind == RN_Y_F16 ? zoo_f16(y) : y;
        }
        OUT(1)[r] = (float)rs;
    }
}
/* Y stored through an fp16 buffer */
static peat_status rmsnorm_y_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self, rmsnorm_d(a, RN_Y_F16);
    return PEAT_OK;
}
/* eps left out: 1 / sqrt(mean x^2), Inf on a zero row and 0 x Inf there */
static peat_status rmsnorm_no_eps(const peat_args *a, const peat_kernel *self)
{
    (void)self, rmsnorm_d(a, RN_NO_EPS);
    return PEAT_OK;
}

/* honest: four lanes of squares, rsqrt as 1 / sqrtf, gamma applied after x rstd */
static peat_status rmsnorm_lanes4(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        float l[4] = {0};
        for (int64_t j = 0; j < C; j++) l[j % 4] = fmaf(x[j], x[j], l[j % 4]);
        float rs = 1.0f / sqrtf(((l[0] + l[2]) + (l[1] + l[3])) / (float)C + (float)PF(0));
        for (int64_t j = 0; j < C; j++) OUT(0)[r * C + j] = (x[j] * rs) * IN(1)[j];
        OUT(1)[r] = rs;
    }
    return PEAT_OK;
}

/* backward: X, gamma, rstd, dY -> dX, dgamma */
enum { RNB_DG_NO_RSTD, RNB_DOT_BF16 };

static peat_status rmsnorm_bwd_d(const peat_args *a, int kind)
{
    int64_t R = PI(0), C = PI(1);
    double *dg = calloc((size_t)C, sizeof *dg);
    if (!dg) return PEAT_ERR_NOMEM;
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C, *dy = IN(3) + r * C, *gam = IN(1);
        double rs = IN(2)[r], sgx = 0.0;
        float sgx_b = 0.0f;
        for (int64_t j = 0; j < C; j++) {
            sgx += (double)dy[j] * gam[j] * x[j];
            sgx_b = zoo_bf16(sgx_b + dy[j] * gam[j] * x[j]);
        }
        if (kind == RNB_DOT_BF16) sgx = sgx_b;
        sgx /= (double)C;
        for (int64_t j = 0; j < C; j++) {
            OUT(0)[r * C + j] = (float)(rs * (dy[j] * gam[j] - x[j] * rs * rs * sgx));
            dg[j] += kind == RNB_DG_NO_RSTD ? (double)dy[j] * x[j] : (double)dy[j] * x[j] * rs;
        }
    }
    for (int64_t j = 0; j < C; j++) OUT(1)[j] = (float)dg[j];
    free(dg);
    return PEAT_OK;
}
/* dgamma as sum dY x, the rstd left out */
static peat_status rmsnorm_bwd_dg_no_rstd(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return rmsnorm_bwd_d(a, RNB_DG_NO_RSTD);
}
/* the row's sum of dY gamma x accumulated in bf16 */
static peat_status rmsnorm_bwd_dot_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return rmsnorm_bwd_d(a, RNB_DOT_BF16);
}

/* ---- SiLU: i = n ; X -> Y ; backward X, dY -> dX ---- */

/* subnormal outputs flushed to zero */
static peat_status silu_ftz(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        double x = IN(0)[i];
        OUT(0)[i] = ho_ftz((float)(x * ho_sigmoid(x)));
    }
    return PEAT_OK;
}
/* honest: x times the reciprocal of 1 + expf(-x), fp32 */
static peat_status silu_recip(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        float x = IN(0)[i];
        OUT(0)[i] = x * (1.0f / (1.0f + expf(-x)));
    }
    return PEAT_OK;
}
/* backward with sigmoid(-x) where sigmoid(x) belongs in the x (1 - s) term */
static peat_status silu_bwd_sig_neg(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        double x = IN(0)[i], s = ho_sigmoid(x), sn = ho_sigmoid(-x);
        OUT(0)[i] = (float)(IN(1)[i] * s * (1.0 + x * (1.0 - sn)));
    }
    return PEAT_OK;
}

/* ---- SwiGLU: i = n ; G, U -> Y = silu(G) U ; backward G, U, dY -> dG, dU ---- */

/* right for its first 60 calls in a process, then Y rounded to bf16 (a fast path after a
 * warm-up) */
static peat_status swiglu_warmup_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    static int64_t calls;
    int fast = ++calls > 60;
    for (int64_t i = 0; i < PI(0); i++) {
        double g = IN(0)[i];
        float y = (float)(g * ho_sigmoid(g) * IN(1)[i]);
        OUT(0)[i] = fast ? zoo_bf16(y) : y;
    }
    return PEAT_OK;
}
/* backward whose dU is dY U sigmoid(G) (U where G belongs) */
static peat_status swiglu_bwd_du_u(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        double g = IN(0)[i], u = IN(1)[i], dy = IN(2)[i], s = ho_sigmoid(g);
        OUT(0)[i] = (float)(dy * u * s * (1.0 + g * (1.0 - s)));
        OUT(1)[i] = (float)(dy * u * s);
    }
    return PEAT_OK;
}

/* ---- RoPE: i = B H T D layout pos0 ; f = base ---- */

enum { RP_NO_POS0, RP_COS_F16 };

static void rope_d(const peat_args *a, int kind)
{
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), half = PI(4), h = D / 2;
    int64_t pos0 = kind == RP_NO_POS0 ? 0 : PI(5);
    double sign = a->op == PEAT_OP_ROPE_BWD ? -1.0 : 1.0;
    for (int64_t bh = 0; bh < B * H; bh++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < h; j++) {
                int64_t r = bh * T + t, i0 = r * D + (half ? j : 2 * j),
                        i1 = r * D + (half ? j + h : 2 * j + 1);
                double x0 = IN(0)[i0], x1 = IN(0)[i1];
                double ang = (double)(pos0 + t) * pow(PF(0), -2.0 * (double)j / (double)D);
                double c = cos(ang), sn = sign * sin(ang);
                if (kind == RP_COS_F16) c = zoo_f16((float)c);
                OUT(0)[i0] = (float)(x0 * c - x1 * sn);
                OUT(0)[i1] = (float)(x0 * sn + x1 * c);
            }
}
/* backward that ignores the position offset pos0 */
static peat_status rope_bwd_no_pos0(const peat_args *a, const peat_kernel *self)
{
    (void)self, rope_d(a, RP_NO_POS0);
    return PEAT_OK;
}
/* the cosine table in fp16 (the sine in fp32) */
static peat_status rope_cos_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self, rope_d(a, RP_COS_F16);
    return PEAT_OK;
}
/* honest: Hugging Face's form: inv_freq = 1 / base^(2j/D) in fp32, the angle pos inv_freq as an
 * fp32 product, cosf and sinf, the rotation in fp32 */
static peat_status rope_hf_f32(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), half = PI(4), pos0 = PI(5), h = D / 2;
    float sign = a->op == PEAT_OP_ROPE_BWD ? -1.0f : 1.0f;
    for (int64_t bh = 0; bh < B * H; bh++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < h; j++) {
                float inv = 1.0f / powf((float)PF(0), (float)(2 * j) / (float)D);
                float ang = (float)(pos0 + t) * inv, c = cosf(ang), sn = sign * sinf(ang);
                int64_t r = bh * T + t, i0 = r * D + (half ? j : 2 * j),
                        i1 = r * D + (half ? j + h : 2 * j + 1);
                float x0 = IN(0)[i0], x1 = IN(0)[i1];
                OUT(0)[i0] = x0 * c - x1 * sn;
                OUT(0)[i1] = x0 * sn + x1 * c;
            }
    return PEAT_OK;
}

/* ---- attention: i = B H T D causal Hkv ; f = scale ; Q K V -> O, L ---- */

enum { AT_OK, AT_KV0, AT_LSE_LOG2, AT_S_BF16 };

static int64_t kv_of(const peat_args *a, int64_t bh)
{
    int64_t H = PI(1), Hkv = PI(5) > 0 ? PI(5) : H;
    return bh / H * Hkv + bh % H / (H / Hkv);
}

static peat_status attention_d(const peat_args *a, int kind)
{
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), causal = PI(4);
    int64_t Hkv = PI(5) > 0 ? PI(5) : H;
    double *s = malloc((size_t)T * sizeof *s);
    if (!s) return PEAT_ERR_NOMEM;
    for (int64_t bh = 0; bh < B * H; bh++) {
        /* every query head of an image on that image's first K/V head */
        int64_t kv = kind == AT_KV0 ? bh / H * Hkv : kv_of(a, bh);
        const float *q = IN(0) + bh * T * D, *k = IN(1) + kv * T * D, *v = IN(2) + kv * T * D;
        for (int64_t i = 0; i < T; i++) {
            int64_t je = causal ? i + 1 : T;
            double mx = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < je; j++) {
                double d = 0.0;
                for (int64_t e = 0; e < D; e++) d += (double)q[i * D + e] * k[j * D + e];
                s[j] = PF(0) * d;
                if (kind == AT_S_BF16) s[j] = zoo_bf16((float)s[j]);
                mx = fmax(mx, s[j]);
            }
            for (int64_t j = 0; j < je; j++) sum += s[j] = exp(s[j] - mx);
            for (int64_t e = 0; e < D; e++) {
                double o = 0.0;
                for (int64_t j = 0; j < je; j++) o += s[j] / sum * v[j * D + e];
                OUT(0)[(bh * T + i) * D + e] = (float)o;
            }
            double L = mx + log(sum);
            OUT(1)[bh * T + i] = (float)(kind == AT_LSE_LOG2 ? L / log(2.0) : L);
        }
    }
    free(s);
    return PEAT_OK;
}
static peat_status attention_kv0(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return attention_d(a, AT_KV0);
}
static peat_status attention_lse_log2(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return attention_d(a, AT_LSE_LOG2);
}
static peat_status attention_s_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return attention_d(a, AT_S_BF16);
}
/* O kept per Q pointer: a call whose Q sits where an earlier call's did returns that call's O
 * and L (an output cache keyed by address) */
static peat_status attention_ptr_cache(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    static const void *key;
    static float *o, *l;
    static int64_t no, nl;
    int64_t n0 = ho_numel(a->out[0]), n1 = ho_numel(a->out[1]);
    if (key == a->in[0]->data && o && no == n0 && nl == n1) {
        memcpy(OUT(0), o, (size_t)n0 * sizeof *o);
        memcpy(OUT(1), l, (size_t)n1 * sizeof *l);
        return PEAT_OK;
    }
    peat_status st = attention_d(a, AT_OK);
    if (st != PEAT_OK) return st;
    float *no_ = realloc(o, (size_t)n0 * sizeof *o),
          *nl_ = no_ ? realloc(l, (size_t)n1 * sizeof *l) : NULL;
    if (no_) o = no_;
    if (!no_ || !nl_) return PEAT_OK;
    l = nl_, no = n0, nl = n1, key = a->in[0]->data;
    memcpy(o, OUT(0), (size_t)n0 * sizeof *o);
    memcpy(l, OUT(1), (size_t)n1 * sizeof *l);
    return PEAT_OK;
}
/* honest: FlashAttention-2's form: key tiles of 16, scores scaled by scale log2(e), exp2f of
 * the running-max-shifted scores, the row sum rescaled as the maximum grows, L = (m + log2 l)
 * ln 2, fp32 throughout */
static peat_status attention_exp2_tiles16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), causal = PI(4);
    float sl2 = (float)PF(0) * 1.44269504088896341f;
    float *acc = malloc((size_t)D * sizeof *acc);
    if (!acc) return PEAT_ERR_NOMEM;
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t kv = kv_of(a, bh);
        const float *q = IN(0) + bh * T * D, *k = IN(1) + kv * T * D, *v = IN(2) + kv * T * D;
        for (int64_t i = 0; i < T; i++) {
            int64_t je = causal ? i + 1 : T;
            float m = -INFINITY, l = 0.0f;
            for (int64_t e = 0; e < D; e++) acc[e] = 0.0f;
            for (int64_t j0 = 0; j0 < je; j0 += 16) {
                int64_t j1 = j0 + 16 < je ? j0 + 16 : je;
                float st[16], mt = m;
                for (int64_t j = j0; j < j1; j++) {
                    float d = 0.0f;
                    for (int64_t e = 0; e < D; e++) d = fmaf(q[i * D + e], k[j * D + e], d);
                    st[j - j0] = d * sl2, mt = fmaxf(mt, st[j - j0]);
                }
                float corr = exp2f(m - mt), lt = 0.0f;
                for (int64_t e = 0; e < D; e++) acc[e] *= corr;
                for (int64_t j = j0; j < j1; j++) {
                    float p = exp2f(st[j - j0] - mt);
                    lt += p;
                    for (int64_t e = 0; e < D; e++) acc[e] = fmaf(p, v[j * D + e], acc[e]);
                }
                l = l * corr + lt, m = mt;
            }
            float rl = 1.0f / l;
            for (int64_t e = 0; e < D; e++) OUT(0)[(bh * T + i) * D + e] = acc[e] * rl;
            OUT(1)[bh * T + i] = (m + log2f(l)) * 0.69314718055994531f;
        }
    }
    free(acc);
    return PEAT_OK;
}

int h5_register_llama(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h5_rmsnorm_y_f16", PEAT_OP_RMSNORM, rmsnorm_y_f16, "Y through fp16"),
        ZOO_KERNEL("h5_rmsnorm_no_eps", PEAT_OP_RMSNORM, rmsnorm_no_eps, "eps left out"),
        ZOO_KERNEL("h5_rmsnorm_lanes4", PEAT_OP_RMSNORM, rmsnorm_lanes4,
                   "honest: four fma lanes, 1 / sqrtf"),
        ZOO_KERNEL("h5_rmsnorm_bwd_dg_no_rstd", PEAT_OP_RMSNORM_BWD, rmsnorm_bwd_dg_no_rstd,
                   "dgamma without rstd"),
        ZOO_KERNEL("h5_rmsnorm_bwd_dot_bf16", PEAT_OP_RMSNORM_BWD, rmsnorm_bwd_dot_bf16,
                   "the row dot in bf16"),
        ZOO_KERNEL("h5_silu_ftz", PEAT_OP_SILU, silu_ftz, "subnormal outputs flushed"),
        ZOO_KERNEL("h5_silu_recip", PEAT_OP_SILU, silu_recip, "honest: x (1 / (1 + expf(-x)))"),
        ZOO_KERNEL("h5_silu_bwd_sig_neg", PEAT_OP_SILU_BWD, silu_bwd_sig_neg,
                   "sigmoid(-x) in the x (1 - s) term"),
        ZOO_KERNEL("h5_swiglu_warmup_bf16", PEAT_OP_SWIGLU, swiglu_warmup_bf16,
                   "Y in bf16 after 60 calls"),
        ZOO_KERNEL("h5_swiglu_bwd_du_u", PEAT_OP_SWIGLU_BWD, swiglu_bwd_du_u,
                   "dU = dY U sigmoid(G)"),
        ZOO_KERNEL("h5_rope_bwd_no_pos0", PEAT_OP_ROPE_BWD, rope_bwd_no_pos0,
                   "the position offset ignored"),
        ZOO_KERNEL("h5_rope_cos_f16", PEAT_OP_ROPE, rope_cos_f16, "the cosine table in fp16"),
        ZOO_KERNEL("h5_rope_hf_f32", PEAT_OP_ROPE, rope_hf_f32,
                   "honest: fp32 inv_freq and angles (Hugging Face)"),
        ZOO_KERNEL("h5_attention_kv0", PEAT_OP_ATTENTION, attention_kv0,
                   "every query head on the first K/V head"),
        ZOO_KERNEL("h5_attention_lse_log2", PEAT_OP_ATTENTION, attention_lse_log2,
                   "L in log2 units"),
        ZOO_KERNEL("h5_attention_s_bf16", PEAT_OP_ATTENTION, attention_s_bf16,
                   "the scores rounded to bf16"),
        ZOO_KERNEL("h5_attention_ptr_cache", PEAT_OP_ATTENTION, attention_ptr_cache,
                   "O cached by Q's address"),
        ZOO_KERNEL("h5_attention_exp2_tiles16", PEAT_OP_ATTENTION, attention_exp2_tiles16,
                   "honest: FlashAttention-2, exp2, key tiles of 16"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
