/* h4_llama.c: the fourth held-out set's kernels of the LLaMA block: RMSNorm, SiLU, SwiGLU, RoPE
 * and (grouped-query) attention. */
#include "heldout4.h"

/* ---- RMSNorm: i = R, C ; f = eps ; X, gamma -> Y, rstd ---- */

static void rmsnorm_d(const peat_args *a, int centred, int rstd_f16)
{
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        double m = 0.0, ss = 0.0;
        if (centred) {
            for (int64_t j = 0; j < C; j++) m += x[j];
            m /= (double)C;
        }
        for (int64_t j = 0; j < C; j++) ss += (x[j] - m) * (x[j] - m);
        double rs = 1.0 / sqrt(ss / (double)C + PF(0));
        if (rstd_f16) rs = zoo_f16((float)rs);
        for (int64_t j = 0; j < C; j++) OUT(0)[r * C + j] = (float)(x[j] * rs * IN(1)[j]);
        OUT(1)[r] = (float)rs;
    }
}

/* the rows centred first (layer norm's mean subtracted from the sum of squares) */
static peat_status rmsnorm_centred(const peat_args *a, const peat_kernel *self)
{
    (void)self, rmsnorm_d(a, 1, 0);
    return PEAT_OK;
}

/* right for its first 40 calls in a process, then rstd in fp16 (a fast path switched on after a
 * warm-up) */
static peat_status rmsnorm_warmup(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    static int64_t calls;
    rmsnorm_d(a, 0, ++calls > 40);
    return PEAT_OK;
}

/* honest: the sum of squares in eight lanes joined pairwise, 1 / sqrtf, x (rstd gamma) */
static peat_status rmsnorm_lanes8(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        float l[8] = {0};
        for (int64_t j = 0; j < C; j++) l[j % 8] += x[j] * x[j];
        float s = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
        float rs = 1.0f / sqrtf(s / (float)C + (float)PF(0));
        for (int64_t j = 0; j < C; j++) OUT(0)[r * C + j] = x[j] * (rs * IN(1)[j]);
        OUT(1)[r] = rs;
    }
    return PEAT_OK;
}

/* backward: X, gamma, rstd, dY -> dX, dgamma */
static void rmsnorm_bwd_d(const peat_args *a, int xhat_bf16, int daz)
{
    int64_t R = PI(0), C = PI(1);
    double *dg = calloc((size_t)C, sizeof *dg);
    if (!dg) return;
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C, *dy = IN(3) + r * C, *gam = IN(1);
        double rs = IN(2)[r], sgx = 0.0;
        for (int64_t j = 0; j < C; j++) {
            double xv = daz ? ho_ftz(x[j]) : x[j], dv = daz ? ho_ftz(dy[j]) : dy[j];
            sgx += dv * gam[j] * xv;
        }
        sgx /= (double)C;
        for (int64_t j = 0; j < C; j++) {
            double xv = daz ? ho_ftz(x[j]) : x[j], dv = daz ? ho_ftz(dy[j]) : dy[j];
            double xh = xv * rs;
            if (xhat_bf16) xh = zoo_bf16((float)xh);
            OUT(0)[r * C + j] = (float)(rs * (dv * gam[j] - xh * rs * sgx));
            dg[j] += dv * xh;
        }
    }
    for (int64_t j = 0; j < C; j++) OUT(1)[j] = (float)dg[j];
    free(dg);
}
static peat_status rmsnorm_bwd_xhat_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self, rmsnorm_bwd_d(a, 1, 0);
    return PEAT_OK;
}
static peat_status rmsnorm_bwd_daz(const peat_args *a, const peat_kernel *self)
{
    (void)self, rmsnorm_bwd_d(a, 0, 1);
    return PEAT_OK;
}

/* ---- SiLU, SwiGLU ---- */

/* backward with the sigmoid in fp16 */
static peat_status silu_bwd_sig_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        double x = IN(0)[i], s = zoo_f16((float)ho_sigmoid(x));
        OUT(0)[i] = (float)(IN(1)[i] * s * (1.0 + x * (1.0 - s)));
    }
    return PEAT_OK;
}

/* the gate through GELU instead of SiLU */
static peat_status swiglu_gelu_gate(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) OUT(0)[i] = (float)(h4_gelu(IN(0)[i]) * IN(1)[i]);
    return PEAT_OK;
}

/* backward whose dU saturates at fp16's largest value (a half buffer's saturating store) */
static peat_status swiglu_bwd_du_sat(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        double g = IN(0)[i], u = IN(1)[i], dy = IN(2)[i], s = ho_sigmoid(g);
        double du = dy * g * s;
        OUT(0)[i] = (float)(dy * u * s * (1.0 + g * (1.0 - s)));
        OUT(1)[i] = (float)(du > 65504.0 ? 65504.0 : du < -65504.0 ? -65504.0 : du);
    }
    return PEAT_OK;
}

/* ---- RoPE: i = B H T D layout pos0 ; f = base ---- */

static void rope_d(const peat_args *a, int64_t pos_shift, int skip_last_head)
{
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), half = PI(4), pos0 = PI(5), h = D / 2;
    double sign = a->op == PEAT_OP_ROPE_BWD ? -1.0 : 1.0;
    for (int64_t bh = 0; bh < B * H; bh++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < h; j++) {
                int64_t r = bh * T + t, i0 = r * D + (half ? j : 2 * j),
                        i1 = r * D + (half ? j + h : 2 * j + 1);
                double x0 = IN(0)[i0], x1 = IN(0)[i1];
                if (skip_last_head && bh % H == H - 1 && H > 1) {
                    OUT(0)[i0] = (float)x0, OUT(0)[i1] = (float)x1;
                    continue;
                }
                double ang =
                    (double)(pos0 + t + pos_shift) * pow(PF(0), -2.0 * (double)j / (double)D);
                double c = cos(ang), sn = sign * sin(ang);
                OUT(0)[i0] = (float)(x0 * c - x1 * sn);
                OUT(0)[i1] = (float)(x0 * sn + x1 * c);
            }
}
static peat_status rope_pos_plus1(const peat_args *a, const peat_kernel *self)
{
    (void)self, rope_d(a, 1, 0);
    return PEAT_OK;
}
static peat_status rope_bwd_last_head(const peat_args *a, const peat_kernel *self)
{
    (void)self, rope_d(a, 0, 1);
    return PEAT_OK;
}

/* ---- attention: i = B H T D causal Hkv ; f = scale ; Q K V -> O, L ---- */

enum { AT_SCALE_D1, AT_P_BF16, AT_LAST_DIM };

static int64_t kv_of(const peat_args *a, int64_t bh)
{
    int64_t H = PI(1), Hkv = PI(5) > 0 ? PI(5) : H;
    return bh / H * Hkv + bh % H / (H / Hkv);
}

static void attention_d(const peat_args *a, int kind)
{
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), causal = PI(4);
    double scale = kind == AT_SCALE_D1 ? 1.0 / sqrt((double)D + 1.0) : PF(0);
    double *s = malloc((size_t)T * sizeof *s);
    if (!s) return;
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t kv = kv_of(a, bh);
        const float *q = IN(0) + bh * T * D, *k = IN(1) + kv * T * D, *v = IN(2) + kv * T * D;
        for (int64_t i = 0; i < T; i++) {
            int64_t je = causal ? i + 1 : T;
            double mx = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < je; j++) {
                double d = 0.0;
                for (int64_t e = 0; e < D; e++) d += (double)q[i * D + e] * k[j * D + e];
                s[j] = scale * d, mx = fmax(mx, s[j]);
            }
            for (int64_t j = 0; j < je; j++) sum += s[j] = exp(s[j] - mx);
            for (int64_t e = 0; e < D; e++) {
                double o = 0.0;
                for (int64_t j = 0; j < je; j++) {
                    double p = s[j] / sum;
                    if (kind == AT_P_BF16) p = zoo_bf16((float)p);
                    o += p * v[j * D + e];
                }
                if (kind == AT_LAST_DIM && e == D - 1) o = v[(je - 1) * D + e];
                OUT(0)[(bh * T + i) * D + e] = (float)o;
            }
            OUT(1)[bh * T + i] = (float)(mx + log(sum));
        }
    }
    free(s);
}
static peat_status attention_scale_d1(const peat_args *a, const peat_kernel *self)
{
    (void)self, attention_d(a, AT_SCALE_D1);
    return PEAT_OK;
}
static peat_status attention_p_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self, attention_d(a, AT_P_BF16);
    return PEAT_OK;
}
static peat_status attention_last_dim(const peat_args *a, const peat_kernel *self)
{
    (void)self, attention_d(a, AT_LAST_DIM);
    return PEAT_OK;
}

/* online softmax over the keys from the last to the first, fp32, with no guard for a masked key
 * met first: exp(-inf - (-inf)) is NaN on every causal row but the last */
static peat_status attention_reverse_online(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), causal = PI(4);
    float scale = (float)PF(0);
    float *acc = malloc((size_t)D * sizeof *acc);
    if (!acc) return PEAT_ERR_NOMEM;
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t kv = kv_of(a, bh);
        const float *q = IN(0) + bh * T * D, *k = IN(1) + kv * T * D, *v = IN(2) + kv * T * D;
        for (int64_t i = 0; i < T; i++) {
            float m = -INFINITY, l = 0.0f;
            for (int64_t e = 0; e < D; e++) acc[e] = 0.0f;
            for (int64_t j = T - 1; j >= 0; j--) {
                float sc = -INFINITY;
                if (!causal || j <= i) {
                    sc = 0.0f;
                    for (int64_t e = 0; e < D; e++) sc += q[i * D + e] * k[j * D + e];
                    sc *= scale;
                }
                float mn = fmaxf(m, sc), corr = expf(m - mn), p = expf(sc - mn);
                l = l * corr + p;
                for (int64_t e = 0; e < D; e++) acc[e] = acc[e] * corr + p * v[j * D + e];
                m = mn;
            }
            for (int64_t e = 0; e < D; e++) OUT(0)[(bh * T + i) * D + e] = acc[e] / l;
            OUT(1)[bh * T + i] = m + logf(l);
        }
    }
    free(acc);
    return PEAT_OK;
}

/* honest: FlashAttention's forward in fp32: key tiles of 4, a running max per row, the tile's
 * probabilities and P V rescaled when the max grows, masked tiles skipped */
static peat_status attention_tiles4(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t B = PI(0), H = PI(1), T = PI(2), D = PI(3), causal = PI(4);
    float scale = (float)PF(0);
    float *acc = malloc((size_t)D * sizeof *acc);
    if (!acc) return PEAT_ERR_NOMEM;
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t kv = kv_of(a, bh);
        const float *q = IN(0) + bh * T * D, *k = IN(1) + kv * T * D, *v = IN(2) + kv * T * D;
        for (int64_t i = 0; i < T; i++) {
            int64_t je = causal ? i + 1 : T;
            float m = -INFINITY, l = 0.0f;
            for (int64_t e = 0; e < D; e++) acc[e] = 0.0f;
            for (int64_t j0 = 0; j0 < je; j0 += 4) {
                int64_t j1 = j0 + 4 < je ? j0 + 4 : je;
                float s[4], mt = m;
                for (int64_t j = j0; j < j1; j++) {
                    float d = 0.0f;
                    for (int64_t e = 0; e < D; e++) d += q[i * D + e] * k[j * D + e];
                    s[j - j0] = d * scale, mt = fmaxf(mt, s[j - j0]);
                }
                float corr = expf(m - mt), lt = 0.0f;
                for (int64_t e = 0; e < D; e++) acc[e] *= corr;
                for (int64_t j = j0; j < j1; j++) {
                    float p = expf(s[j - j0] - mt);
                    lt += p;
                    for (int64_t e = 0; e < D; e++) acc[e] += p * v[j * D + e];
                }
                l = l * corr + lt, m = mt;
            }
            for (int64_t e = 0; e < D; e++) OUT(0)[(bh * T + i) * D + e] = acc[e] / l;
            OUT(1)[bh * T + i] = m + logf(l);
        }
    }
    free(acc);
    return PEAT_OK;
}

int h4_register_llama(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h4_rmsnorm_centred", PEAT_OP_RMSNORM, rmsnorm_centred, "rows centred first"),
        ZOO_KERNEL("h4_rmsnorm_warmup", PEAT_OP_RMSNORM, rmsnorm_warmup,
                   "rstd in fp16 after 40 calls"),
        ZOO_KERNEL("h4_rmsnorm_lanes8", PEAT_OP_RMSNORM, rmsnorm_lanes8,
                   "honest: eight lanes, pairwise join"),
        ZOO_KERNEL("h4_rmsnorm_bwd_xhat_bf16", PEAT_OP_RMSNORM_BWD, rmsnorm_bwd_xhat_bf16,
                   "x rstd rounded to bf16 in dX and dgamma"),
        ZOO_KERNEL("h4_rmsnorm_bwd_daz", PEAT_OP_RMSNORM_BWD, rmsnorm_bwd_daz,
                   "subnormal inputs read as zero"),
        ZOO_KERNEL("h4_silu_bwd_sig_f16", PEAT_OP_SILU_BWD, silu_bwd_sig_f16,
                   "the sigmoid in fp16"),
        ZOO_KERNEL("h4_swiglu_gelu_gate", PEAT_OP_SWIGLU, swiglu_gelu_gate,
                   "the gate through GELU"),
        ZOO_KERNEL("h4_swiglu_bwd_du_sat", PEAT_OP_SWIGLU_BWD, swiglu_bwd_du_sat,
                   "dU saturated at 65504"),
        ZOO_KERNEL("h4_rope_pos_plus1", PEAT_OP_ROPE, rope_pos_plus1, "positions one ahead"),
        ZOO_KERNEL("h4_rope_bwd_last_head", PEAT_OP_ROPE_BWD, rope_bwd_last_head,
                   "the last head not rotated back"),
        ZOO_KERNEL("h4_attention_scale_d1", PEAT_OP_ATTENTION, attention_scale_d1,
                   "scale 1 / sqrt(D + 1), the caller's ignored"),
        ZOO_KERNEL("h4_attention_p_bf16", PEAT_OP_ATTENTION, attention_p_bf16,
                   "the probabilities rounded to bf16 before P V"),
        ZOO_KERNEL("h4_attention_last_dim", PEAT_OP_ATTENTION, attention_last_dim,
                   "O's last column copied from V"),
        ZOO_KERNEL("h4_attention_reverse_online", PEAT_OP_ATTENTION, attention_reverse_online,
                   "keys last to first, no masked-first guard"),
        ZOO_KERNEL("h4_attention_tiles4", PEAT_OP_ATTENTION, attention_tiles4,
                   "honest: FlashAttention forward, key tiles of 4"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
