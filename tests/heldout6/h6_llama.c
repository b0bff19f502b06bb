/* h6_llama.c: the sixth held-out set's kernels of the LLaMA block: RMSNorm, SiLU, SwiGLU, RoPE
 * and (grouped-query) attention. */
#include "heldout6.h"

/* ---- RMSNorm: i = R, C ; f = eps ; X, gamma -> Y, rstd ---- */

static void rmsnorm_d(const peat_args *a, int gamma_shift)
{
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        double ss = 0.0;
        for (int64_t j = 0; j < C; j++) ss += (double)x[j] * x[j];
        double rs = 1.0 / sqrt(ss / (double)C + PF(0));
        for (int64_t j = 0; j < C; j++) {
            int64_t jg = gamma_shift && j + 1 < C ? j + 1 : j;
            OUT(0)[r * C + j] = (float)(x[j] * rs * IN(1)[jg]);
        }
        OUT(1)[r] = (float)rs;
    }
}
/* rstd stored in bf16 (Y computed with the full rstd) */
static peat_status rmsnorm_rstd_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self, rmsnorm_d(a, 0);
    for (int64_t r = 0; r < PI(0); r++) OUT(1)[r] = zoo_bf16(OUT(1)[r]);
    return PEAT_OK;
}
/* gamma read one column ahead */
static peat_status rmsnorm_gamma_shift(const peat_args *a, const peat_kernel *self)
{
    (void)self, rmsnorm_d(a, 1);
    return PEAT_OK;
}
/* honest: fp32 fma sum of squares, rstd = 1 / sqrtf, Y = (x rstd) gamma */
static peat_status rmsnorm_fma(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        float ss = 0.0f;
        for (int64_t j = 0; j < C; j++) ss = fmaf(x[j], x[j], ss);
        float rs = 1.0f / sqrtf(ss / (float)C + (float)PF(0));
        for (int64_t j = 0; j < C; j++) OUT(0)[r * C + j] = (x[j] * rs) * IN(1)[j];
        OUT(1)[r] = rs;
    }
    return PEAT_OK;
}

/* backward: X, gamma, rstd, dY -> dX, dgamma; dgamma over the first half of the rows only */
static peat_status rmsnorm_bwd_dg_half(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1), Rh = R > 1 ? (R + 1) / 2 : R;
    double *dg = calloc((size_t)C, sizeof *dg);
    if (!dg) return PEAT_ERR_NOMEM;
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C, *dy = IN(3) + r * C, *gam = IN(1);
        double rs = IN(2)[r], sgx = 0.0;
        for (int64_t j = 0; j < C; j++) sgx += (double)dy[j] * gam[j] * x[j];
        sgx /= (double)C;
        for (int64_t j = 0; j < C; j++) {
            OUT(0)[r * C + j] = (float)(rs * (dy[j] * gam[j] - x[j] * rs * rs * sgx));
            if (r < Rh) dg[j] += (double)dy[j] * x[j] * rs;
        }
    }
    for (int64_t j = 0; j < C; j++) OUT(1)[j] = (float)dg[j];
    free(dg);
    return PEAT_OK;
}

/* ---- SiLU, SwiGLU ---- */

/* backward with dX stored through fp16 */
static peat_status silu_bwd_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        double x = IN(0)[i], s = ho_sigmoid(x);
        OUT(0)[i] = zoo_f16((float)(IN(1)[i] * s * (1.0 + x * (1.0 - s))));
    }
    return PEAT_OK;
}
/* backward whose dG uses (1 + g s) for (1 + g (1 - s)) */
static peat_status swiglu_bwd_dg_sign(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        double g = IN(0)[i], u = IN(1)[i], dy = IN(2)[i], s = ho_sigmoid(g);
        OUT(0)[i] = (float)(dy * u * s * (1.0 + g * s));
        OUT(1)[i] = (float)(dy * g * s);
    }
    return PEAT_OK;
}
/* Y truncated to fp16's precision (low bits cut) */
static peat_status swiglu_trunc_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        double g = IN(0)[i];
        OUT(0)[i] = ho_f16_rz((float)(g * ho_sigmoid(g) * IN(1)[i]));
    }
    return PEAT_OK;
}
/* honest: s = 1 / (1 + expf(-g)), y = (g s) u, fp32 */
static peat_status swiglu_split(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        float g = IN(0)[i], s = 1.0f / (1.0f + expf(-g));
        OUT(0)[i] = (g * s) * IN(1)[i];
    }
    return PEAT_OK;
}

/* ---- RoPE: i = B H T D layout pos0 ; f = base ---- */

static void rope_d(const peat_args *a, int kind)
{
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), half = PI(4), pos0 = PI(5), h = D / 2;
    double sign = a->op == PEAT_OP_ROPE_BWD ? -1.0 : 1.0;
    for (int64_t bh = 0; bh < B * H; bh++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < h; j++) {
                int64_t r = bh * T + t, i0 = r * D + (half ? j : 2 * j),
                        i1 = r * D + (half ? j + h : 2 * j + 1);
                double x0 = IN(0)[i0], x1 = IN(0)[i1];
                /* kind 1: the exponent 2j/D in integer arithmetic (0 for every j < D/2); kind 2:
                 * the last position left unrotated */
                double e = kind == 1 ? (double)(2 * j / D) : 2.0 * (double)j / (double)D;
                if (kind == 2 && t == T - 1 && T > 1) {
                    OUT(0)[i0] = (float)x0, OUT(0)[i1] = (float)x1;
                    continue;
                }
                double ang = (double)(pos0 + t) * pow(PF(0), -e);
                double c = cos(ang), sn = sign * sin(ang);
                OUT(0)[i0] = (float)(x0 * c - x1 * sn);
                OUT(0)[i1] = (float)(x0 * sn + x1 * c);
            }
}
static peat_status rope_int_exponent(const peat_args *a, const peat_kernel *self)
{
    (void)self, rope_d(a, 1);
    return PEAT_OK;
}
static peat_status rope_bwd_last_pos(const peat_args *a, const peat_kernel *self)
{
    (void)self, rope_d(a, 2);
    return PEAT_OK;
}
/* honest: the angle in double, cos and sin rounded to fp32, the rotation in fp32 */
static peat_status rope_table_f32(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), half = PI(4), pos0 = PI(5), h = D / 2;
    float sign = a->op == PEAT_OP_ROPE_BWD ? -1.0f : 1.0f;
    for (int64_t bh = 0; bh < B * H; bh++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < h; j++) {
                double ang = (double)(pos0 + t) * pow(PF(0), -2.0 * (double)j / (double)D);
                float c = (float)cos(ang), sn = sign * (float)sin(ang);
                int64_t r = bh * T + t, i0 = r * D + (half ? j : 2 * j),
                        i1 = r * D + (half ? j + h : 2 * j + 1);
                float x0 = IN(0)[i0], x1 = IN(0)[i1];
                OUT(0)[i0] = x0 * c - x1 * sn;
                OUT(0)[i1] = x0 * sn + x1 * c;
            }
    return PEAT_OK;
}

/* ---- attention: i = B H T D causal Hkv ; f = scale ; Q K V -> O, L ---- */

static int64_t kv_of(const peat_args *a, int64_t bh)
{
    int64_t H = PI(1), Hkv = PI(5) > 0 ? PI(5) : H;
    return bh / H * Hkv + bh % H / (H / Hkv);
}

enum { AT_OK, AT_O_BF16, AT_LSE_NOMAX };

static peat_status attention_d(const peat_args *a, int kind)
{
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), causal = PI(4);
    double *s = malloc((size_t)T * sizeof *s);
    if (!s) return PEAT_ERR_NOMEM;
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t kv = kv_of(a, bh);
        const float *q = IN(0) + bh * T * D, *k = IN(1) + kv * T * D, *v = IN(2) + kv * T * D;
        for (int64_t i = 0; i < T; i++) {
            int64_t je = causal ? i + 1 : T;
            double mx = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < je; j++) {
                double d = 0.0;
                for (int64_t e = 0; e < D; e++) d += (double)q[i * D + e] * k[j * D + e];
                s[j] = PF(0) * d, mx = fmax(mx, s[j]);
            }
            float lse_nomax = 0.0f;
            for (int64_t j = 0; j < je; j++) lse_nomax += expf((float)s[j]);
            for (int64_t j = 0; j < je; j++) sum += s[j] = exp(s[j] - mx);
            for (int64_t e = 0; e < D; e++) {
                double o = 0.0;
                for (int64_t j = 0; j < je; j++) o += s[j] / sum * v[j * D + e];
                float of = (float)o;
                OUT(0)[(bh * T + i) * D + e] = kind == AT_O_BF16 ? zoo_bf16(of) : of;
            }
            /* the row's logsumexp without the max shift: Inf once a score passes 88.7 */
            OUT(1)[bh * T + i] = kind == AT_LSE_NOMAX ? logf(lse_nomax) : (float)(mx + log(sum));
        }
    }
    free(s);
    return PEAT_OK;
}
static peat_status attention_o_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return attention_d(a, AT_O_BF16);
}
static peat_status attention_lse_nomax(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return attention_d(a, AT_LSE_NOMAX);
}
/* honest: K and V repeated per query head (repeat_interleave), scores as an fp32 GEMM, softmax
 * with the max shift, P V in fp32 */
static peat_status attention_repeat_kv(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), causal = PI(4);
    float *p = malloc((size_t)T * sizeof *p);
    if (!p) return PEAT_ERR_NOMEM;
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t kv = kv_of(a, bh);
        const float *q = IN(0) + bh * T * D, *k = IN(1) + kv * T * D, *v = IN(2) + kv * T * D;
        for (int64_t i = 0; i < T; i++) {
            int64_t je = causal ? i + 1 : T;
            float mx = -INFINITY, sum = 0.0f;
            for (int64_t j = 0; j < je; j++) {
                float d = 0.0f;
                for (int64_t e = 0; e < D; e++) d += q[i * D + e] * k[j * D + e];
                p[j] = d * (float)PF(0), mx = fmaxf(mx, p[j]);
            }
            for (int64_t j = 0; j < je; j++) sum += p[j] = expf(p[j] - mx);
            for (int64_t e = 0; e < D; e++) {
                float o = 0.0f;
                for (int64_t j = 0; j < je; j++) o += p[j] * v[j * D + e];
                OUT(0)[(bh * T + i) * D + e] = o / sum;
            }
            OUT(1)[bh * T + i] = mx + logf(sum);
        }
    }
    free(p);
    return PEAT_OK;
}

int h6_register_llama(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h6_rmsnorm_rstd_bf16", PEAT_OP_RMSNORM, rmsnorm_rstd_bf16,
                   "rstd stored in bf16"),
        ZOO_KERNEL("h6_rmsnorm_gamma_shift", PEAT_OP_RMSNORM, rmsnorm_gamma_shift,
                   "gamma read one column ahead"),
        ZOO_KERNEL("h6_rmsnorm_fma", PEAT_OP_RMSNORM, rmsnorm_fma, "honest: fp32 fma squares"),
        ZOO_KERNEL("h6_rmsnorm_bwd_dg_half", PEAT_OP_RMSNORM_BWD, rmsnorm_bwd_dg_half,
                   "dgamma over the first half of the rows"),
        ZOO_KERNEL("h6_silu_bwd_f16", PEAT_OP_SILU_BWD, silu_bwd_f16, "dX through fp16"),
        ZOO_KERNEL("h6_swiglu_bwd_dg_sign", PEAT_OP_SWIGLU_BWD, swiglu_bwd_dg_sign,
                   "dG with 1 + g s"),
        ZOO_KERNEL("h6_swiglu_trunc_f16", PEAT_OP_SWIGLU, swiglu_trunc_f16,
                   "Y truncated to fp16 precision"),
        ZOO_KERNEL("h6_swiglu_split", PEAT_OP_SWIGLU, swiglu_split, "honest: fp32 sigmoid"),
        ZOO_KERNEL("h6_rope_int_exponent", PEAT_OP_ROPE, rope_int_exponent,
                   "2j/D in integer arithmetic"),
        ZOO_KERNEL("h6_rope_bwd_last_pos", PEAT_OP_ROPE_BWD, rope_bwd_last_pos,
                   "the last position not rotated back"),
        ZOO_KERNEL("h6_rope_table_f32", PEAT_OP_ROPE, rope_table_f32,
                   "honest: double angles, fp32 cos/sin"),
        ZOO_KERNEL("h6_attention_o_bf16", PEAT_OP_ATTENTION, attention_o_bf16, "O rounded to bf16"),
        ZOO_KERNEL("h6_attention_lse_nomax", PEAT_OP_ATTENTION, attention_lse_nomax,
                   "L without the max shift"),
        ZOO_KERNEL("h6_attention_repeat_kv", PEAT_OP_ATTENTION, attention_repeat_kv,
                   "honest: K/V repeated, fp32"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
