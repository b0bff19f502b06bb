/* h8_llama.c: the eighth held-out set's kernels of the LLaMA block: RMSNorm, SiLU, SwiGLU, RoPE
 * and (grouped-query) attention, forward and backward. */
#include "heldout8.h"

/* ---- RMSNorm: i = R, C ; f = eps ; X, gamma -> Y, rstd ---- */

/* the sum of squares in an fp16 accumulator */
static peat_status rmsnorm_ss_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        float ss = 0.0f;
        for (int64_t j = 0; j < C; j++) ss = zoo_f16(ss + x[j] * x[j]);
        double rs = 1.0 / sqrt((double)ss / (double)C + PF(0));
        for (int64_t j = 0; j < C; j++) OUT(0)[r * C + j] = (float)(x[j] * rs * IN(1)[j]);
        OUT(1)[r] = (float)rs;
    }
    return PEAT_OK;
}
/* gamma never applied */
static peat_status rmsnorm_no_gamma(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        double ss = 0.0;
        for (int64_t j = 0; j < C; j++) ss += (double)x[j] * x[j];
        double rs = 1.0 / sqrt(ss / (double)C + PF(0));
        for (int64_t j = 0; j < C; j++) OUT(0)[r * C + j] = (float)(x[j] * rs);
        OUT(1)[r] = (float)rs;
    }
    return PEAT_OK;
}
/* honest: the overflow-safe form: squares of x / max|x| in fp32, rstd = 1 / (max|x| sqrt(ms +
 * eps / max^2)) */
static peat_status rmsnorm_scaled(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    float eps = (float)PF(0);
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        float amax = 0.0f, ss = 0.0f;
        for (int64_t j = 0; j < C; j++) amax = fmaxf(amax, fabsf(x[j]));
        float rs;
        if (amax == 0.0f) {
            rs = 1.0f / sqrtf(eps);
        } else {
            float inv = 1.0f / amax;
            for (int64_t j = 0; j < C; j++) {
                float s = x[j] * inv;
                ss = fmaf(s, s, ss);
            }
            rs = inv / sqrtf(ss / (float)C + eps * inv * inv);
        }
        for (int64_t j = 0; j < C; j++) OUT(0)[r * C + j] = x[j] * rs * IN(1)[j];
        OUT(1)[r] = rs;
    }
    return PEAT_OK;
}
/* backward (X, gamma, rstd, dY -> dX, dgamma) with dgamma accumulated over the rows in bf16 */
static peat_status rmsnorm_bwd_dg_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    for (int64_t j = 0; j < C; j++) OUT(1)[j] = 0.0f;
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C, *dy = IN(3) + r * C, *gam = IN(1);
        double rs = IN(2)[r], sgx = 0.0;
        for (int64_t j = 0; j < C; j++) sgx += (double)dy[j] * gam[j] * x[j];
        sgx /= (double)C;
        for (int64_t j = 0; j < C; j++) {
            OUT(0)[r * C + j] = (float)(rs * (dy[j] * gam[j] - x[j] * rs * rs * sgx));
            OUT(1)[j] = zoo_bf16(OUT(1)[j] + (float)(dy[j] * x[j] * rs));
        }
    }
    return PEAT_OK;
}

/* ---- SiLU ---- */

/* the sigmoid as exp(x) / (1 + exp(x)): Inf / Inf past x = 88.7 */
static peat_status silu_exp_ratio(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        float x = IN(0)[i], e = expf(x);
        OUT(0)[i] = x * (e / (1.0f + e));
    }
    return PEAT_OK;
}
/* honest: x / (1 + expf(-x)) in fp32 */
static peat_status silu_div(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) OUT(0)[i] = IN(0)[i] / (1.0f + expf(-IN(0)[i]));
    return PEAT_OK;
}
/* backward with dX cut to bf16's precision (low half dropped) */
static peat_status silu_bwd_trunc(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        double x = IN(0)[i], s = ho_sigmoid(x);
        OUT(0)[i] = (float)(IN(1)[i] * s * (1.0 + x * (1.0 - s)));
    }
    for (int64_t i = 0; i < PI(0); i++) OUT(0)[i] = ho_bf16_rz(OUT(0)[i]);
    return PEAT_OK;
}

/* ---- SwiGLU ---- */

/* the gate's sigmoid in bf16 */
static peat_status swiglu_gate_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        double g = IN(0)[i];
        OUT(0)[i] = (float)(g * zoo_bf16((float)ho_sigmoid(g)) * IN(1)[i]);
    }
    return PEAT_OK;
}
/* backward whose dG leaves out U */
static peat_status swiglu_bwd_dg_no_u(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        double g = IN(0)[i], dy = IN(2)[i], s = ho_sigmoid(g);
        OUT(0)[i] = (float)(dy * s * (1.0 + g * (1.0 - s)));
        OUT(1)[i] = (float)(dy * g * s);
    }
    return PEAT_OK;
}

/* ---- RoPE: i = B H T D layout pos0 ; f = base ---- */

enum { RP_SIN_SIGN, RP_LAST_HEAD_POS0 };

static void rope_d(const peat_args *a, int kind)
{
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), half = PI(4), pos0 = PI(5), h = D / 2;
    double sign = a->op == PEAT_OP_ROPE_BWD ? -1.0 : 1.0;
    if (kind == RP_SIN_SIGN) sign = -sign; /* rotated the other way */
    for (int64_t bh = 0; bh < B * H; bh++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < h; j++) {
                int64_t r = bh * T + t, i0 = r * D + (half ? j : 2 * j),
                        i1 = r * D + (half ? j + h : 2 * j + 1);
                /* RP_LAST_HEAD_POS0: the last head's positions from 0, not pos0 + t */
                int64_t pos = kind == RP_LAST_HEAD_POS0 && bh % H == H - 1 && H > 1 ? t : pos0 + t;
                double ang = (double)pos * pow(PF(0), -2.0 * (double)j / (double)D);
                double x0 = IN(0)[i0], x1 = IN(0)[i1], c = cos(ang), sn = sign * sin(ang);
                OUT(0)[i0] = (float)(x0 * c - x1 * sn), OUT(0)[i1] = (float)(x0 * sn + x1 * c);
            }
}
static peat_status rope_sin_sign(const peat_args *a, const peat_kernel *self)
{
    (void)self, rope_d(a, RP_SIN_SIGN);
    return PEAT_OK;
}
static peat_status rope_last_head_pos0(const peat_args *a, const peat_kernel *self)
{
    (void)self, rope_d(a, RP_LAST_HEAD_POS0);
    return PEAT_OK;
}
/* honest: the pair as a complex number times (cos + i sin), fp32 with fma, angles in fp32 as
 * pos * inv_freq */
static peat_status rope_complex(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), half = PI(4), pos0 = PI(5), h = D / 2;
    float sign = a->op == PEAT_OP_ROPE_BWD ? -1.0f : 1.0f;
    for (int64_t bh = 0; bh < B * H; bh++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < h; j++) {
                float inv = (float)pow(PF(0), -2.0 * (double)j / (double)D);
                float ang = (float)(pos0 + t) * inv, c = cosf(ang), sn = sign * sinf(ang);
                int64_t r = bh * T + t, i0 = r * D + (half ? j : 2 * j),
                        i1 = r * D + (half ? j + h : 2 * j + 1);
                float x0 = IN(0)[i0], x1 = IN(0)[i1];
                OUT(0)[i0] = fmaf(x0, c, -x1 * sn), OUT(0)[i1] = fmaf(x0, sn, x1 * c);
            }
    return PEAT_OK;
}

/* ---- attention: i = B H T D causal Hkv ; f = scale ; Q K V -> O, L ---- */

static int64_t kv_of(const peat_args *a, int64_t bh)
{
    int64_t H = PI(1), Hkv = PI(5) > 0 ? PI(5) : H;
    return bh / H * Hkv + bh % H / (H / Hkv);
}

enum { AT_NO_SCALE, AT_O_TRUNC };

static peat_status attention_d(const peat_args *a, int kind)
{
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), causal = PI(4);
    double *s = malloc((size_t)T * sizeof *s), sc = kind == AT_NO_SCALE ? 1.0 : PF(0);
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
                s[j] = sc * d, mx = fmax(mx, s[j]);
            }
            for (int64_t j = 0; j < je; j++) sum += s[j] = exp(s[j] - mx);
            for (int64_t e = 0; e < D; e++) {
                double o = 0.0;
                for (int64_t j = 0; j < je; j++) o += s[j] / sum * v[j * D + e];
                OUT(0)[(bh * T + i) * D + e] = (float)o;
            }
            OUT(1)[bh * T + i] = (float)(mx + log(sum));
        }
    }
    free(s);
    if (kind == AT_O_TRUNC)
        for (int64_t n = 0; n < B * H * T * D; n++) OUT(0)[n] = ho_f16_rz(OUT(0)[n]);
    return PEAT_OK;
}
/* the softmax scale never applied */
static peat_status attention_no_scale(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return attention_d(a, AT_NO_SCALE);
}
/* O cut to fp16's precision (low 13 bits dropped) */
static peat_status attention_o_trunc(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return attention_d(a, AT_O_TRUNC);
}
/* honest: two passes over the keys (max, then exponentials and P V), fp32 */
static peat_status attention_two_pass(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), causal = PI(4);
    float *p = malloc((size_t)T * sizeof *p), *o = malloc((size_t)D * sizeof *o);
    if (!p || !o) {
        free(p), free(o);
        return PEAT_ERR_NOMEM;
    }
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t kv = kv_of(a, bh);
        const float *q = IN(0) + bh * T * D, *k = IN(1) + kv * T * D, *v = IN(2) + kv * T * D;
        for (int64_t i = 0; i < T; i++) {
            int64_t je = causal ? i + 1 : T;
            float mx = -INFINITY, l = 0.0f;
            for (int64_t j = 0; j < je; j++) {
                float d = 0.0f;
                for (int64_t e = 0; e < D; e++) d = fmaf(q[i * D + e], k[j * D + e], d);
                p[j] = d * (float)PF(0), mx = fmaxf(mx, p[j]);
            }
            for (int64_t e = 0; e < D; e++) o[e] = 0.0f;
            for (int64_t j = 0; j < je; j++) {
                float w = expf(p[j] - mx);
                l += w;
                for (int64_t e = 0; e < D; e++) o[e] = fmaf(w, v[j * D + e], o[e]);
            }
            for (int64_t e = 0; e < D; e++) OUT(0)[(bh * T + i) * D + e] = o[e] / l;
            OUT(1)[bh * T + i] = mx + logf(l);
        }
    }
    free(p), free(o);
    return PEAT_OK;
}

/* backward: Q K V O L dO -> dQ dK dV; dV accumulated in bf16 */
static peat_status attention_bwd_dv_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), causal = PI(4);
    int64_t Hkv = PI(5) > 0 ? PI(5) : H;
    double sc = PF(0);
    double *P = malloc((size_t)(T * T) * sizeof *P), *dS = malloc((size_t)(T * T) * sizeof *dS);
    double *dk = calloc((size_t)(B * Hkv * T * D), sizeof *dk);
    if (!P || !dS || !dk) {
        free(P), free(dS), free(dk);
        return PEAT_ERR_NOMEM;
    }
    for (int64_t n = 0; n < B * Hkv * T * D; n++) OUT(2)[n] = 0.0f;
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
                double sk = 0.0;
                float *dv = &OUT(2)[(kv * T + j) * D + e];
                for (int64_t i = 0; i < T; i++) {
                    sk += dS[i * T + j] * q[i * D + e];
                    *dv = zoo_bf16(*dv + (float)(P[i * T + j] * dO[i * D + e]));
                }
                dk[(kv * T + j) * D + e] += sc * sk;
            }
    }
    for (int64_t n = 0; n < B * Hkv * T * D; n++) OUT(1)[n] = (float)dk[n];
    free(P), free(dS), free(dk);
    return PEAT_OK;
}

int h8_register_llama(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h8_rmsnorm_ss_f16", PEAT_OP_RMSNORM, rmsnorm_ss_f16, "squares summed in fp16"),
        ZOO_KERNEL("h8_rmsnorm_no_gamma", PEAT_OP_RMSNORM, rmsnorm_no_gamma, "gamma never applied"),
        ZOO_KERNEL("h8_rmsnorm_scaled", PEAT_OP_RMSNORM, rmsnorm_scaled,
                   "honest: overflow-safe scaled squares"),
        ZOO_KERNEL("h8_rmsnorm_bwd_dg_bf16", PEAT_OP_RMSNORM_BWD, rmsnorm_bwd_dg_bf16,
                   "dgamma accumulated in bf16"),
        ZOO_KERNEL("h8_silu_exp_ratio", PEAT_OP_SILU, silu_exp_ratio, "exp(x) / (1 + exp(x))"),
        ZOO_KERNEL("h8_silu_div", PEAT_OP_SILU, silu_div, "honest: x / (1 + exp(-x))"),
        ZOO_KERNEL("h8_silu_bwd_trunc", PEAT_OP_SILU_BWD, silu_bwd_trunc, "dX cut to bf16"),
        ZOO_KERNEL("h8_swiglu_gate_bf16", PEAT_OP_SWIGLU, swiglu_gate_bf16, "sigmoid in bf16"),
        ZOO_KERNEL("h8_swiglu_bwd_dg_no_u", PEAT_OP_SWIGLU_BWD, swiglu_bwd_dg_no_u, "dG without U"),
        ZOO_KERNEL("h8_rope_sin_sign", PEAT_OP_ROPE, rope_sin_sign, "rotated the other way"),
        ZOO_KERNEL("h8_rope_last_head_pos0", PEAT_OP_ROPE, rope_last_head_pos0,
                   "last head's positions from 0"),
        ZOO_KERNEL("h8_rope_complex", PEAT_OP_ROPE, rope_complex, "honest: complex product"),
        ZOO_KERNEL("h8_attention_no_scale", PEAT_OP_ATTENTION, attention_no_scale,
                   "scale never applied"),
        ZOO_KERNEL("h8_attention_o_trunc", PEAT_OP_ATTENTION, attention_o_trunc,
                   "O cut to fp16 precision"),
        ZOO_KERNEL("h8_attention_two_pass", PEAT_OP_ATTENTION, attention_two_pass,
                   "honest: two passes, fp32"),
        ZOO_KERNEL("h8_attention_bwd_dv_bf16", PEAT_OP_ATTENTION_BWD, attention_bwd_dv_bf16,
                   "dV accumulated in bf16"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
