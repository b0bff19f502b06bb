/* h3_llama.c: RMSNorm, SwiGLU, RoPE, grouped-query attention and SiLU kernels of the third
 * held-out set (forward and backward). */
#include "heldout3.h"

/* ---- RMSNorm ---- */

enum { RMS_LANES2, RMS_BY_CM1, RMS_GAMMA_SQ, RMS_RSTD_F16, RMS_LAST_ROW_PREV };

static void rms_fwd(const peat_args *a, int mode)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    float eps = (float)a->p.f[0], prev = 1.0f;
    const float *g = CF(a->in[1]);
    for (int64_t r = 0; r < R; r++) {
        const float *x = CF(a->in[0]) + r * C;
        float *y = F(a->out[0]) + r * C, s0 = 0.0f, s1 = 0.0f;
        for (int64_t j = 0; j + 1 < C; j += 2) s0 += x[j] * x[j], s1 += x[j + 1] * x[j + 1];
        if (C % 2) s0 += x[C - 1] * x[C - 1];
        float ss = s0 + s1;
        float ms = mode == RMS_BY_CM1 && C > 1 ? ss / (float)(C - 1) : ss / (float)C;
        float rs = 1.0f / sqrtf(ms + eps);
        if (mode == RMS_RSTD_F16) rs = h3_f16(rs);
        if (mode == RMS_LAST_ROW_PREV && r == R - 1 && R > 1) rs = prev;
        for (int64_t j = 0; j < C; j++)
            y[j] = mode == RMS_GAMMA_SQ ? x[j] * rs * g[j] * g[j] : x[j] * rs * g[j];
        F(a->out[1])[r] = rs;
        prev = rs;
    }
}

#define RMS_K(name, mode)                                                                          \
    static peat_status name(const peat_args *a, const peat_kernel *self)                           \
    {                                                                                              \
        (void)self;                                                                                \
        rms_fwd(a, mode);                                                                          \
        return PEAT_OK;                                                                            \
    }
RMS_K(rms_lanes2, RMS_LANES2)
RMS_K(rms_by_cm1, RMS_BY_CM1)
RMS_K(rms_gamma_sq, RMS_GAMMA_SQ)
RMS_K(rms_rstd_f16, RMS_RSTD_F16)
RMS_K(rms_last_row_prev, RMS_LAST_ROW_PREV)

/* backward without the rstd^2 of the projection term: dX = rstd (g - x mean(g x)) */
static peat_status rms_bwd_no_rstd_sq(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *gam = CF(a->in[1]), *rstd = CF(a->in[2]);
    float *dg = F(a->out[1]);
    for (int64_t j = 0; j < C; j++) dg[j] = 0.0f;
    for (int64_t r = 0; r < R; r++) {
        const float *x = CF(a->in[0]) + r * C, *dy = CF(a->in[3]) + r * C;
        float *dx = F(a->out[0]) + r * C, rs = rstd[r], sgx = 0.0f;
        for (int64_t j = 0; j < C; j++) sgx += dy[j] * gam[j] * x[j];
        sgx /= (float)C;
        for (int64_t j = 0; j < C; j++) {
            dx[j] = rs * (dy[j] * gam[j] - x[j] * sgx);
            dg[j] += dy[j] * x[j] * rs;
        }
    }
    return PEAT_OK;
}

/* ---- SwiGLU ---- */

/* Y = silu(U) G: gate and up swapped */
static peat_status swiglu_swapped(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *g = CF(a->in[0]), *u = CF(a->in[1]);
    float *y = F(a->out[0]);
    for (int64_t i = 0; i < a->p.i[0]; i++) y[i] = u[i] * h3_sigmoid(u[i]) * g[i];
    return PEAT_OK;
}

/* the sigmoid as e^g / (1 + e^g): Inf / Inf = NaN once e^g overflows (g > 88.7) */
static peat_status swiglu_exp_ratio(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *g = CF(a->in[0]), *u = CF(a->in[1]);
    float *y = F(a->out[0]);
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float e = expf(g[i]);
        y[i] = g[i] * (e / (1.0f + e)) * u[i];
    }
    return PEAT_OK;
}

/* backward whose dU products round toward zero */
static peat_status swiglu_bwd_du_rz(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *g = CF(a->in[0]), *u = CF(a->in[1]), *dy = CF(a->in[2]);
    float *dg = F(a->out[0]), *du = F(a->out[1]);
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float s = h3_sigmoid(g[i]), si = g[i] * s;
        dg[i] = dy[i] * u[i] * (s * (1.0f + g[i] * (1.0f - s)));
        du[i] = ho_rz((double)dy[i] * (double)si);
    }
    return PEAT_OK;
}

/* ---- RoPE ---- */

enum { ROPE_DOUBLE, ROPE_BASE_1000, ROPE_ANGLE_F16, ROPE_LAST_PAIR, ROPE_FP32 };

static void rope_rows(const peat_args *a, int mode, int backward, int cos_only)
{
    int64_t B = a->p.i[0], H = a->p.i[1], T = a->p.i[2], D = a->p.i[3], pos0 = a->p.i[5];
    int layout = (int)a->p.i[4];
    double base = mode == ROPE_BASE_1000 ? 1000.0 : a->p.f[0];
    const float *x = CF(a->in[0]);
    float *y = F(a->out[0]);
    for (int64_t row = 0; row < B * H * T; row++) {
        int64_t t = row % T, p = pos0 + t;
        const float *xr = x + row * D;
        float *yr = y + row * D;
        for (int64_t j = 0; j < D / 2; j++) {
            int64_t ia, ib;
            h3_rope_pair(j, D, layout, &ia, &ib);
            float c, s;
            if (mode == ROPE_DOUBLE) {
                double ang = (double)p * pow(base, -(double)(2 * j) / (double)D);
                c = (float)cos(ang), s = (float)sin(ang);
            } else {
                float ang = h3_rope_angle(p, j, D, base);
                if (mode == ROPE_ANGLE_F16) ang = h3_f16(ang);
                c = cosf(ang), s = sinf(ang);
            }
            if (mode == ROPE_LAST_PAIR && j == D / 2 - 1) c = 1.0f, s = 0.0f;
            if (cos_only) s = 0.0f;
            if (backward) s = -s;
            float xa = xr[ia], xb = xr[ib];
            yr[ia] = xa * c - xb * s;
            yr[ib] = xa * s + xb * c;
        }
    }
}

#define ROPE_K(name, mode, bwd, cos_only)                                                          \
    static peat_status name(const peat_args *a, const peat_kernel *self)                           \
    {                                                                                              \
        (void)self;                                                                                \
        rope_rows(a, mode, bwd, cos_only);                                                         \
        return PEAT_OK;                                                                            \
    }
ROPE_K(rope_double, ROPE_DOUBLE, 0, 0)
ROPE_K(rope_base_1000, ROPE_BASE_1000, 0, 0)
ROPE_K(rope_angle_f16, ROPE_ANGLE_F16, 0, 0)
ROPE_K(rope_last_pair, ROPE_LAST_PAIR, 0, 0)
ROPE_K(rope_bwd_cos_only, ROPE_FP32, 1, 1)

/* ---- grouped-query attention (forward) ---- */

enum { GQA_EXPAND, GQA_MODULO, GQA_SCALE_G };

static peat_status gqa(const peat_args *a, int mode)
{
    int64_t B = a->p.i[0], H = a->p.i[1], T = a->p.i[2], D = a->p.i[3];
    int causal = (int)a->p.i[4];
    int64_t Hkv = a->p.i[5] > 0 ? a->p.i[5] : H, G = H / Hkv;
    float scale = (float)a->p.f[0];
    if (mode == GQA_SCALE_G) scale *= sqrtf((float)G);
    float *s = malloc((size_t)T * sizeof *s);
    if (!s) return PEAT_ERR_NOMEM;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            int64_t kv = mode == GQA_MODULO ? h % Hkv : h / G;
            const float *Q = CF(a->in[0]) + ((b * H + h) * T) * D;
            const float *K = CF(a->in[1]) + ((b * Hkv + kv) * T) * D;
            const float *V = CF(a->in[2]) + ((b * Hkv + kv) * T) * D;
            float *O = F(a->out[0]) + ((b * H + h) * T) * D;
            float *L = F(a->out[1]) + (b * H + h) * T;
            for (int64_t t = 0; t < T; t++) {
                int64_t n = causal ? t + 1 : T;
                float m = -INFINITY, l = 0.0f;
                for (int64_t j = 0; j < n; j++) {
                    float d = 0.0f;
                    for (int64_t e = 0; e < D; e++) d += Q[t * D + e] * K[j * D + e];
                    s[j] = scale * d;
                    m = s[j] > m ? s[j] : m;
                }
                for (int64_t j = 0; j < n; j++) l += s[j] = expf(s[j] - m);
                for (int64_t e = 0; e < D; e++) {
                    float o = 0.0f;
                    for (int64_t j = 0; j < n; j++) o += s[j] * V[j * D + e];
                    O[t * D + e] = o / l;
                }
                L[t] = m + logf(l);
            }
        }
    free(s);
    return PEAT_OK;
}

static peat_status gqa_expand(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return gqa(a, GQA_EXPAND);
}
static peat_status gqa_modulo(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return gqa(a, GQA_MODULO);
}
static peat_status gqa_scale_g(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return gqa(a, GQA_SCALE_G);
}

/* ---- SiLU ---- */

/* honest: x (0.5 + 0.5 tanh(x / 2)) */
static peat_status silu_tanh(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *x = CF(a->in[0]);
    float *y = F(a->out[0]);
    for (int64_t i = 0; i < a->p.i[0]; i++) y[i] = x[i] * (0.5f + 0.5f * tanhf(0.5f * x[i]));
    return PEAT_OK;
}

/* a shortcut for "negligible" inputs: 0 below x = -20 (where x sigmoid(x) is about -4e-8) */
static peat_status silu_clamp_neg(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *x = CF(a->in[0]);
    float *y = F(a->out[0]);
    for (int64_t i = 0; i < a->p.i[0]; i++) y[i] = x[i] < -20.0f ? 0.0f : x[i] * h3_sigmoid(x[i]);
    return PEAT_OK;
}

static peat_status silu_out_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *x = CF(a->in[0]);
    float *y = F(a->out[0]);
    for (int64_t i = 0; i < a->p.i[0]; i++) y[i] = zoo_bf16(x[i] * h3_sigmoid(x[i]));
    return PEAT_OK;
}

/* backward as dY sigmoid(x): the x s (1 - s) term dropped */
static peat_status silu_bwd_no_xterm(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *x = CF(a->in[0]), *dy = CF(a->in[1]);
    float *dx = F(a->out[0]);
    for (int64_t i = 0; i < a->p.i[0]; i++) dx[i] = dy[i] * h3_sigmoid(x[i]);
    return PEAT_OK;
}

/* returns its previous output when handed the same input buffer and size again */
static peat_status silu_ptr_cache(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    static const void *last_in;
    static int64_t last_n;
    static float *last_out;
    static int64_t cap;
    int64_t n = a->p.i[0];
    const float *x = CF(a->in[0]);
    float *y = F(a->out[0]);
    if (last_in == a->in[0]->data && last_n == n && last_out) {
        memcpy(y, last_out, (size_t)n * sizeof *y);
        return PEAT_OK;
    }
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * h3_sigmoid(x[i]);
    if (n > cap) {
        float *b = realloc(last_out, (size_t)n * sizeof *b);
        if (!b) return PEAT_ERR_NOMEM;
        last_out = b, cap = n;
    }
    memcpy(last_out, y, (size_t)n * sizeof *y);
    last_in = a->in[0]->data, last_n = n;
    return PEAT_OK;
}

int h3_register_llama(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h3_rmsnorm_lanes2", PEAT_OP_RMSNORM, rms_lanes2,
                   "honest: sum of squares in two lanes"),
        ZOO_KERNEL("h3_rmsnorm_by_c_minus_1", PEAT_OP_RMSNORM, rms_by_cm1,
                   "mean of squares over C - 1"),
        ZOO_KERNEL("h3_rmsnorm_gamma_squared", PEAT_OP_RMSNORM, rms_gamma_sq,
                   "applies gamma twice"),
        ZOO_KERNEL("h3_rmsnorm_rstd_f16", PEAT_OP_RMSNORM, rms_rstd_f16, "rstd rounded to fp16"),
        ZOO_KERNEL("h3_rmsnorm_last_row_prev_rstd", PEAT_OP_RMSNORM, rms_last_row_prev,
                   "the last row normalised with the row before's rstd"),
        ZOO_KERNEL("h3_rmsnorm_bwd_no_rstd_sq", PEAT_OP_RMSNORM_BWD, rms_bwd_no_rstd_sq,
                   "backward missing rstd^2 in the projection term"),
        ZOO_KERNEL("h3_swiglu_swapped", PEAT_OP_SWIGLU, swiglu_swapped, "silu(up) x gate"),
        ZOO_KERNEL("h3_swiglu_exp_ratio", PEAT_OP_SWIGLU, swiglu_exp_ratio,
                   "sigmoid as e^g / (1 + e^g)"),
        ZOO_KERNEL("h3_swiglu_bwd_du_rz", PEAT_OP_SWIGLU_BWD, swiglu_bwd_du_rz,
                   "dU rounded toward zero"),
        ZOO_KERNEL("h3_rope_double", PEAT_OP_ROPE, rope_double,
                   "honest: angles, cos and sin in double"),
        ZOO_KERNEL("h3_rope_base_1000", PEAT_OP_ROPE, rope_base_1000, "base 1000 hard-coded"),
        ZOO_KERNEL("h3_rope_angle_f16", PEAT_OP_ROPE, rope_angle_f16, "angles rounded to fp16"),
        ZOO_KERNEL("h3_rope_last_pair", PEAT_OP_ROPE, rope_last_pair,
                   "the last pair of each head left unrotated"),
        ZOO_KERNEL("h3_rope_bwd_cos_only", PEAT_OP_ROPE_BWD, rope_bwd_cos_only,
                   "backward without the sine terms"),
        ZOO_KERNEL("h3_gqa_expand", PEAT_OP_ATTENTION, gqa_expand,
                   "honest: K/V heads shared by index, two-pass softmax"),
        ZOO_KERNEL("h3_gqa_head_modulo", PEAT_OP_ATTENTION, gqa_modulo,
                   "query head h reads K/V head h mod Hkv"),
        ZOO_KERNEL("h3_gqa_scale_group", PEAT_OP_ATTENTION, gqa_scale_g,
                   "scale times sqrt(H / Hkv)"),
        ZOO_KERNEL("h3_silu_tanh", PEAT_OP_SILU, silu_tanh, "honest: x (1 + tanh(x/2)) / 2"),
        ZOO_KERNEL("h3_silu_clamp_neg", PEAT_OP_SILU, silu_clamp_neg, "0 below x = -20"),
        ZOO_KERNEL("h3_silu_out_bf16", PEAT_OP_SILU, silu_out_bf16, "output rounded to bf16"),
        ZOO_KERNEL("h3_silu_bwd_no_xterm", PEAT_OP_SILU_BWD, silu_bwd_no_xterm,
                   "backward dY sigmoid(x)"),
        ZOO_KERNEL("h3_silu_ptr_cache", PEAT_OP_SILU, silu_ptr_cache,
                   "previous output returned for the same input buffer"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
