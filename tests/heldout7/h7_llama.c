/* h7_llama.c: the seventh held-out set's kernels of the LLaMA block: RMSNorm, SiLU, SwiGLU, RoPE
 * and (grouped-query) attention, forward and backward. */
#include "heldout7.h"

/* ---- RMSNorm: i = R, C ; f = eps ; X, gamma -> Y, rstd ---- */

enum { RN_OK, RN_EPS_OUTSIDE };

static void rmsnorm_d(const peat_args *a, int kind)
{
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        double ss = 0.0;
        for (int64_t j = 0; j < C; j++) ss += (double)x[j] * x[j];
        /* RN_EPS_OUTSIDE: 1 / (sqrt(ms) + eps) for 1 / sqrt(ms + eps) */
        double rs = kind == RN_EPS_OUTSIDE ? 1.0 / (sqrt(ss / (double)C) + PF(0))
                                           : 1.0 / sqrt(ss / (double)C + PF(0));
        for (int64_t j = 0; j < C; j++) {
            OUT(0)[r * C + j] = (float)(x[j] * rs * IN(1)[j]);
        }
        OUT(1)[r] = (float)rs;
    }
}
static peat_status rmsnorm_eps_outside(const peat_args *a, const peat_kernel *self)
{
    (void)self, rmsnorm_d(a, RN_EPS_OUTSIDE);
    return PEAT_OK;
}
/* Y cut to bf16's precision (low half of the word dropped) */
static peat_status rmsnorm_y_trunc_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self, rmsnorm_d(a, RN_OK);
    /* an unconditional pass: GCC 12.2 folds `c ? ho_bf16_rz(y) : y` to y */
    for (int64_t i = 0; i < PI(0) * PI(1); i++) OUT(0)[i] = ho_bf16_rz(OUT(0)[i]);
    return PEAT_OK;
}
/* honest: four fp32 lanes of squares joined pairwise, rstd = 1 / sqrtf, Y = x (rstd gamma) */
static peat_status rmsnorm_lanes_rsqrt(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        float l[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int64_t j = 0; j < C; j++) l[j % 4] = fmaf(x[j], x[j], l[j % 4]);
        float ss = (l[0] + l[1]) + (l[2] + l[3]);
        float rs = 1.0f / sqrtf(ss / (float)C + (float)PF(0));
        for (int64_t j = 0; j < C; j++) OUT(0)[r * C + j] = x[j] * (rs * IN(1)[j]);
        OUT(1)[r] = rs;
    }
    return PEAT_OK;
}

/* backward: X, gamma, rstd, dY -> dX, dgamma */
enum { RB_DOT_NO_GAMMA, RB_RECOMPUTE_NO_EPS };

static void rmsnorm_bwd_d(const peat_args *a, int kind)
{
    int64_t R = PI(0), C = PI(1);
    for (int64_t j = 0; j < C; j++) OUT(1)[j] = 0.0f;
    double *dg = calloc((size_t)C, sizeof *dg);
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C, *dy = IN(3) + r * C, *gam = IN(1);
        double rs = IN(2)[r], sgx = 0.0;
        if (kind == RB_RECOMPUTE_NO_EPS) {
            /* rstd recomputed from X (a fused backward), without eps: Inf on a row of zeros */
            double ss = 0.0;
            for (int64_t j = 0; j < C; j++) ss += (double)x[j] * x[j];
            rs = 1.0 / sqrt(ss / (double)C);
        }
        for (int64_t j = 0; j < C; j++)
            sgx += (double)dy[j] * (kind == RB_DOT_NO_GAMMA ? 1.0 : gam[j]) * x[j];
        sgx /= (double)C;
        for (int64_t j = 0; j < C; j++) {
            OUT(0)[r * C + j] = (float)(rs * (dy[j] * gam[j] - x[j] * rs * rs * sgx));
            if (dg) dg[j] += (double)dy[j] * x[j] * rs;
        }
    }
    for (int64_t j = 0; j < C && dg; j++) OUT(1)[j] = (float)dg[j];
    free(dg);
}
/* the dot of the dX correction without gamma: mean(dY x) for mean(dY gamma x) */
static peat_status rmsnorm_bwd_dot_no_gamma(const peat_args *a, const peat_kernel *self)
{
    (void)self, rmsnorm_bwd_d(a, RB_DOT_NO_GAMMA);
    return PEAT_OK;
}
static peat_status rmsnorm_bwd_no_eps(const peat_args *a, const peat_kernel *self)
{
    (void)self, rmsnorm_bwd_d(a, RB_RECOMPUTE_NO_EPS);
    return PEAT_OK;
}

/* ---- SiLU: X -> Y ; X, dY -> dX ---- */

/* the sigmoid rounded to fp16 before the product */
static peat_status silu_sig_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        float s = zoo_f16((float)ho_sigmoid(IN(0)[i]));
        OUT(0)[i] = (float)((double)IN(0)[i] * s);
    }
    return PEAT_OK;
}
/* backward with the sigmoid's derivative s (1 - s) for SiLU's s (1 + x (1 - s)) */
static peat_status silu_bwd_sig_deriv(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        double s = ho_sigmoid(IN(0)[i]);
        OUT(0)[i] = (float)(IN(1)[i] * s * (1.0 - s));
    }
    return PEAT_OK;
}
/* honest: the backward through the forward's output, dX = dY (s + y (1 - s)), fp32 */
static peat_status silu_bwd_via_y(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        float x = IN(0)[i], s = 1.0f / (1.0f + expf(-x)), y = x * s;
        OUT(0)[i] = IN(1)[i] * (s + y * (1.0f - s));
    }
    return PEAT_OK;
}

/* ---- SwiGLU: G, U -> Y ; G, U, dY -> dG, dU ---- */

/* U read through bf16 (an up projection kept in bf16) */
static peat_status swiglu_u_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        double g = IN(0)[i];
        OUT(0)[i] = (float)(g * ho_sigmoid(g) * zoo_bf16(IN(1)[i]));
    }
    return PEAT_OK;
}
/* backward whose dU flushes subnormal results to zero */
static peat_status swiglu_bwd_du_ftz(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        double g = IN(0)[i], u = IN(1)[i], dy = IN(2)[i], s = ho_sigmoid(g);
        OUT(0)[i] = (float)(dy * u * s * (1.0 + g * (1.0 - s)));
        OUT(1)[i] = ho_ftz((float)(dy * g * s));
    }
    return PEAT_OK;
}

/* ---- RoPE: i = B H T D layout pos0 ; f = base ---- */

enum { RP_LAYOUT_IGNORED, RP_Y_F16 };

static void rope_d(const peat_args *a, int kind)
{
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), half = PI(4), pos0 = PI(5), h = D / 2;
    double sign = a->op == PEAT_OP_ROPE_BWD ? -1.0 : 1.0;
    /* RP_LAYOUT_IGNORED: the interleaved pairs whatever the layout says */
    if (kind == RP_LAYOUT_IGNORED) half = 0;
    for (int64_t bh = 0; bh < B * H; bh++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < h; j++) {
                int64_t r = bh * T + t, i0 = r * D + (half ? j : 2 * j),
                        i1 = r * D + (half ? j + h : 2 * j + 1);
                double ang = (double)(pos0 + t) * pow(PF(0), -2.0 * (double)j / (double)D);
                double x0 = IN(0)[i0], x1 = IN(0)[i1], c = cos(ang), sn = sign * sin(ang);
                float y0 = (float)(x0 * c - x1 * sn), y1 = (float)(x0 * sn + x1 * c);
                OUT(0)[i0] = kind == RP_Y_F16 ? zoo_f16(y0) : y0;
                OUT(0)[i1] = kind == RP_Y_F16 ? zoo_f16(y1) : y1;
            }
}
static peat_status rope_layout_ignored(const peat_args *a, const peat_kernel *self)
{
    (void)self, rope_d(a, RP_LAYOUT_IGNORED);
    return PEAT_OK;
}
/* the backward's dX stored through fp16 */
static peat_status rope_bwd_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self, rope_d(a, RP_Y_F16);
    return PEAT_OK;
}

/* ---- attention: i = B H T D causal Hkv ; f = scale ; Q K V -> O, L ---- */

static int64_t kv_of(const peat_args *a, int64_t bh)
{
    int64_t H = PI(1), Hkv = PI(5) > 0 ? PI(5) : H;
    return bh / H * Hkv + bh % H / (H / Hkv);
}

enum { AT_PEEK, AT_SUM_F16 };

static peat_status attention_d(const peat_args *a, int kind)
{
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), causal = PI(4);
    double *s = malloc((size_t)T * sizeof *s);
    if (!s) return PEAT_ERR_NOMEM;
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t kv = kv_of(a, bh);
        const float *q = IN(0) + bh * T * D, *k = IN(1) + kv * T * D, *v = IN(2) + kv * T * D;
        for (int64_t i = 0; i < T; i++) {
            /* AT_PEEK: the causal mask lets each query see one key ahead */
            int64_t je = !causal ? T : kind == AT_PEEK && i + 2 <= T ? i + 2 : i + 1;
            double mx = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < je; j++) {
                double d = 0.0;
                for (int64_t e = 0; e < D; e++) d += (double)q[i * D + e] * k[j * D + e];
                s[j] = PF(0) * d, mx = fmax(mx, s[j]);
            }
            float sh = 0.0f;
            for (int64_t j = 0; j < je; j++) {
                s[j] = exp(s[j] - mx), sum += s[j];
                sh = zoo_f16(sh + (float)s[j]);
            }
            /* AT_SUM_F16: the softmax's denominator summed in an fp16 register */
            if (kind == AT_SUM_F16) sum = sh;
            for (int64_t e = 0; e < D; e++) {
                double o = 0.0;
                for (int64_t j = 0; j < je; j++) o += s[j] / sum * v[j * D + e];
                OUT(0)[(bh * T + i) * D + e] = (float)o;
            }
            OUT(1)[bh * T + i] = (float)(mx + log(sum));
        }
    }
    free(s);
    return PEAT_OK;
}
static peat_status attention_causal_peek(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return attention_d(a, AT_PEEK);
}
static peat_status attention_sum_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return attention_d(a, AT_SUM_F16);
}
/* honest: FlashAttention's form: key tiles of 8, an online max and sum with exp2 of
 * log2(e)-scaled scores, O rescaled per tile, all fp32 */
static peat_status attention_flash_exp2(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), causal = PI(4);
    const float l2e = 1.44269504f, sc = (float)PF(0) * l2e;
    float *o = malloc((size_t)D * sizeof *o), p[8];
    if (!o) return PEAT_ERR_NOMEM;
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t kv = kv_of(a, bh);
        const float *q = IN(0) + bh * T * D, *k = IN(1) + kv * T * D, *v = IN(2) + kv * T * D;
        for (int64_t i = 0; i < T; i++) {
            int64_t je = causal ? i + 1 : T;
            float m = -INFINITY, l = 0.0f;
            for (int64_t e = 0; e < D; e++) o[e] = 0.0f;
            for (int64_t j0 = 0; j0 < je; j0 += 8) {
                int64_t n = je - j0 < 8 ? je - j0 : 8;
                float mt = m;
                for (int64_t u = 0; u < n; u++) {
                    float d = 0.0f;
                    for (int64_t e = 0; e < D; e++) d = fmaf(q[i * D + e], k[(j0 + u) * D + e], d);
                    p[u] = d * sc, mt = fmaxf(mt, p[u]);
                }
                float corr = exp2f(m - mt), lt = 0.0f;
                for (int64_t u = 0; u < n; u++) p[u] = exp2f(p[u] - mt), lt += p[u];
                l = l * corr + lt;
                for (int64_t e = 0; e < D; e++) {
                    float acc = o[e] * corr;
                    for (int64_t u = 0; u < n; u++) acc = fmaf(p[u], v[(j0 + u) * D + e], acc);
                    o[e] = acc;
                }
                m = mt;
            }
            for (int64_t e = 0; e < D; e++) OUT(0)[(bh * T + i) * D + e] = o[e] / l;
            OUT(1)[bh * T + i] = (m + log2f(l)) / l2e;
        }
    }
    free(o);
    return PEAT_OK;
}

/* backward: Q K V O L dO -> dQ dK dV (dK, dV summed over each K/V head's query heads); dK
 * without the softmax scale */
static peat_status attention_bwd_dk_noscale(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), causal = PI(4);
    int64_t Hkv = PI(5) > 0 ? PI(5) : H;
    double sc = PF(0);
    double *P = malloc((size_t)(T * T) * sizeof *P), *dS = malloc((size_t)(T * T) * sizeof *dS);
    double *dk = calloc((size_t)(B * Hkv * T * D), sizeof *dk),
           *dv = calloc((size_t)(B * Hkv * T * D), sizeof *dv);
    if (!P || !dS || !dk || !dv) {
        free(P), free(dS), free(dk), free(dv);
        return PEAT_ERR_NOMEM;
    }
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t kv = kv_of(a, bh);
        const float *q = IN(0) + bh * T * D, *k = IN(1) + kv * T * D, *v = IN(2) + kv * T * D,
                    *o = IN(3) + bh * T * D, *L = IN(4) + bh * T, *dO = IN(5) + bh * T * D;
        for (int64_t i = 0; i < T; i++) {
            double Dl = 0.0;
            for (int64_t e = 0; e < D; e++) Dl += (double)dO[i * D + e] * o[i * D + e];
            for (int64_t j = 0; j < T; j++) {
                P[i * T + j] = dS[i * T + j] = 0.0;
                if (causal && j > i) continue;
                double s = 0.0, dp = 0.0;
                for (int64_t e = 0; e < D; e++)
                    s += (double)q[i * D + e] * k[j * D + e],
                        dp += (double)dO[i * D + e] * v[j * D + e];
                P[i * T + j] = exp(sc * s - L[i]);
                dS[i * T + j] = P[i * T + j] * (dp - Dl);
            }
        }
        for (int64_t i = 0; i < T; i++)
            for (int64_t e = 0; e < D; e++) {
                double dq = 0.0;
                for (int64_t j = 0; j < T; j++) dq += dS[i * T + j] * k[j * D + e];
                OUT(0)[(bh * T + i) * D + e] = (float)(sc * dq);
            }
        for (int64_t j = 0; j < T; j++)
            for (int64_t e = 0; e < D; e++) {
                double sk = 0.0, sv = 0.0;
                for (int64_t i = 0; i < T; i++)
                    sk += dS[i * T + j] * q[i * D + e], sv += P[i * T + j] * dO[i * D + e];
                dk[(kv * T + j) * D + e] += sk, dv[(kv * T + j) * D + e] += sv;
            }
    }
    for (int64_t n = 0; n < B * Hkv * T * D; n++)
        OUT(1)[n] = (float)dk[n], OUT(2)[n] = (float)dv[n];
    free(P), free(dS), free(dk), free(dv);
    return PEAT_OK;
}

int h7_register_llama(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h7_rmsnorm_eps_outside", PEAT_OP_RMSNORM, rmsnorm_eps_outside,
                   "1 / (sqrt(ms) + eps)"),
        ZOO_KERNEL("h7_rmsnorm_y_trunc_bf16", PEAT_OP_RMSNORM, rmsnorm_y_trunc_bf16,
                   "Y cut to bf16 precision"),
        ZOO_KERNEL("h7_rmsnorm_lanes_rsqrt", PEAT_OP_RMSNORM, rmsnorm_lanes_rsqrt,
                   "honest: four fp32 lanes"),
        ZOO_KERNEL("h7_rmsnorm_bwd_dot_no_gamma", PEAT_OP_RMSNORM_BWD, rmsnorm_bwd_dot_no_gamma,
                   "mean(dY x) for mean(dY gamma x)"),
        ZOO_KERNEL("h7_rmsnorm_bwd_no_eps", PEAT_OP_RMSNORM_BWD, rmsnorm_bwd_no_eps,
                   "rstd recomputed without eps"),
        ZOO_KERNEL("h7_silu_sig_f16", PEAT_OP_SILU, silu_sig_f16, "sigmoid in fp16"),
        ZOO_KERNEL("h7_silu_bwd_sig_deriv", PEAT_OP_SILU_BWD, silu_bwd_sig_deriv,
                   "the sigmoid's derivative"),
        ZOO_KERNEL("h7_silu_bwd_via_y", PEAT_OP_SILU_BWD, silu_bwd_via_y, "honest: through y"),
        ZOO_KERNEL("h7_swiglu_u_bf16", PEAT_OP_SWIGLU, swiglu_u_bf16, "U read through bf16"),
        ZOO_KERNEL("h7_swiglu_bwd_du_ftz", PEAT_OP_SWIGLU_BWD, swiglu_bwd_du_ftz,
                   "dU flushes subnormals"),
        ZOO_KERNEL("h7_rope_layout_ignored", PEAT_OP_ROPE, rope_layout_ignored,
                   "interleaved pairs whatever the layout"),
        ZOO_KERNEL("h7_rope_bwd_f16", PEAT_OP_ROPE_BWD, rope_bwd_f16, "dX stored in fp16"),
        ZOO_KERNEL("h7_attention_causal_peek", PEAT_OP_ATTENTION, attention_causal_peek,
                   "the causal mask one key late"),
        ZOO_KERNEL("h7_attention_sum_f16", PEAT_OP_ATTENTION, attention_sum_f16,
                   "the softmax sum in fp16"),
        ZOO_KERNEL("h7_attention_flash_exp2", PEAT_OP_ATTENTION, attention_flash_exp2,
                   "honest: tiles of 8, online exp2"),
        ZOO_KERNEL("h7_attention_bwd_dk_noscale", PEAT_OP_ATTENTION_BWD, attention_bwd_dk_noscale,
                   "dK without the scale"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
