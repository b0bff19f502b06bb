/* h3_misc.c: fp8 GEMM, GEMM, layer norm, AdamW and cross-entropy kernels of the third held-out
 * set. */
#include "heldout3.h"

/* ---- fp8 GEMM: D = scale_a scale_b op(A) op(B) + beta C ---- */

enum { FP8_LANES4, FP8_ACC_F16, FP8_K16_TAIL, FP8_NO_TRANSB };

static void fp8_gemm(const peat_args *a, int mode)
{
    zoo_gemm g = zoo_gemm_of(a);
    g.alpha = (float)a->p.f[0] * (float)a->p.f[2];
    if (mode == FP8_NO_TRANSB) g.tB = 0;
    int64_t K = mode == FP8_K16_TAIL ? g.K / 16 * 16 : g.K;
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float l[4] = {0, 0, 0, 0}, s = 0.0f;
                for (int64_t k = 0; k < K; k++) {
                    float t = zoo_a(a, &g, b, i, k) * zoo_b(a, &g, b, k, j);
                    if (mode == FP8_LANES4)
                        l[k % 4] += t;
                    else
                        s = mode == FP8_ACC_F16 ? h3_f16(s + t) : s + t;
                }
                if (mode == FP8_LANES4) s = (l[0] + l[1]) + (l[2] + l[3]);
                zoo_store(a, &g, b, i, j, s);
            }
}

#define FP8_K(name, mode)                                                                          \
    static peat_status name(const peat_args *a, const peat_kernel *self)                           \
    {                                                                                              \
        (void)self;                                                                                \
        fp8_gemm(a, mode);                                                                         \
        return PEAT_OK;                                                                            \
    }
FP8_K(fp8_lanes4, FP8_LANES4)
FP8_K(fp8_acc_f16, FP8_ACC_F16)
FP8_K(fp8_k16_tail, FP8_K16_TAIL)
FP8_K(fp8_no_transb, FP8_NO_TRANSB)

/* ---- GEMM wrong only on square shapes: the last k term dropped when M == N ---- */

static peat_status gemm_square_drop(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    int64_t K = g.M == g.N && g.K > 1 ? g.K - 1 : g.K;
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = 0.0f;
                for (int64_t k = 0; k < K; k++) s += zoo_a(a, &g, b, i, k) * zoo_b(a, &g, b, k, j);
                zoo_store(a, &g, b, i, j, s);
            }
    return PEAT_OK;
}

/* ---- layer norm with eps outside the square root: rstd = 1 / (sqrt(var) + eps) ---- */

static peat_status layernorm_eps_outside(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    float eps = (float)a->p.f[0];
    const float *g = CF(a->in[1]), *bt = CF(a->in[2]);
    for (int64_t r = 0; r < R; r++) {
        const float *x = CF(a->in[0]) + r * C;
        float *y = F(a->out[0]) + r * C, sum = 0.0f, sq = 0.0f;
        for (int64_t j = 0; j < C; j++) sum += x[j];
        float mean = sum / (float)C;
        for (int64_t j = 0; j < C; j++) sq += (x[j] - mean) * (x[j] - mean);
        float rs = 1.0f / (sqrtf(sq / (float)C) + eps);
        for (int64_t j = 0; j < C; j++) y[j] = (x[j] - mean) * rs * g[j] + bt[j];
        F(a->out[1])[r] = mean, F(a->out[2])[r] = rs;
    }
    return PEAT_OK;
}

/* ---- AdamW with the bias corrections one step ahead (t + 1) ---- */

static peat_status adamw_bc_ahead(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t n = a->p.i[0], t = a->p.i[1] + 1;
    float lr = (float)a->p.f[0], b1 = (float)a->p.f[1], b2 = (float)a->p.f[2];
    float eps = (float)a->p.f[3], wd = (float)a->p.f[4];
    float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
    const float *p = CF(a->in[0]), *g = CF(a->in[1]), *m = CF(a->in[2]), *v = CF(a->in[3]);
    for (int64_t i = 0; i < n; i++) {
        float mi = b1 * m[i] + (1.0f - b1) * g[i];
        float vi = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
        float upd = (mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * p[i];
        F(a->out[1])[i] = mi, F(a->out[2])[i] = vi;
        F(a->out[0])[i] = p[i] - lr * upd;
    }
    return PEAT_OK;
}

/* ---- cross-entropy backward with the probabilities rounded to bf16 ---- */

static peat_status xent_bwd_p_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    const int32_t *t = (const int32_t *)a->in[1]->data;
    const float *dl = CF(a->in[2]);
    for (int64_t r = 0; r < R; r++) {
        const float *x = CF(a->in[0]) + r * C;
        float *dx = F(a->out[0]) + r * C, mx = x[0], sum = 0.0f;
        for (int64_t j = 1; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) sum += expf(x[j] - mx);
        for (int64_t j = 0; j < C; j++) {
            float p = zoo_bf16(expf(x[j] - mx) / sum);
            dx[j] = dl[r] * (p - (j == t[r] ? 1.0f : 0.0f));
        }
    }
    return PEAT_OK;
}

int h3_register_misc(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h3_gemm_fp8_lanes4", PEAT_OP_GEMM_FP8, fp8_lanes4,
                   "honest: fp8 GEMM, fp32 sums in 4 interleaved lanes"),
        ZOO_KERNEL("h3_gemm_fp8_acc_f16", PEAT_OP_GEMM_FP8, fp8_acc_f16,
                   "fp8 GEMM accumulating in fp16"),
        ZOO_KERNEL("h3_gemm_fp8_k16_tail", PEAT_OP_GEMM_FP8, fp8_k16_tail,
                   "fp8 GEMM over K blocks of 16, the remainder dropped"),
        ZOO_KERNEL("h3_gemm_fp8_no_transb", PEAT_OP_GEMM_FP8, fp8_no_transb,
                   "fp8 GEMM ignoring transB"),
        ZOO_KERNEL("h3_gemm_square_drop", PEAT_OP_GEMM, gemm_square_drop,
                   "GEMM dropping the last k term when M == N"),
        ZOO_KERNEL("h3_layernorm_eps_outside", PEAT_OP_LAYERNORM, layernorm_eps_outside,
                   "rstd = 1 / (sqrt(var) + eps)"),
        ZOO_KERNEL("h3_adamw_bc_ahead", PEAT_OP_ADAMW, adamw_bc_ahead,
                   "bias corrections of step t + 1"),
        ZOO_KERNEL("h3_xent_bwd_p_bf16", PEAT_OP_CROSS_ENTROPY_BWD, xent_bwd_p_bf16,
                   "probabilities rounded to bf16 in the backward"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
