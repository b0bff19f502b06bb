/* h5_nn.c: the fifth held-out set's kernels of the older op kinds: softmax, layer norm, GELU,
 * cross-entropy, convolution, reduce, embedding, bias, GEMM and the fp8 GEMM. */
#include "heldout5.h"

/* ---- softmax: i = R, C ; backward Y, dY -> dX ---- */

/* the row's sum of y dy accumulated in bf16 */
static peat_status softmax_bwd_dot_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        const float *y = IN(0) + r * C, *dy = IN(1) + r * C;
        float s = 0.0f;
        for (int64_t j = 0; j < C; j++) s = zoo_bf16(s + y[j] * dy[j]);
        for (int64_t j = 0; j < C; j++) OUT(0)[r * C + j] = (float)(y[j] * ((double)dy[j] - s));
    }
    return PEAT_OK;
}
/* honest: the dot in four fma lanes, dX = y (dy - dot) in fp32 */
static peat_status softmax_bwd_lanes4(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        const float *y = IN(0) + r * C, *dy = IN(1) + r * C;
        float l[4] = {0};
        for (int64_t j = 0; j < C; j++) l[j % 4] = fmaf(y[j], dy[j], l[j % 4]);
        float s = (l[0] + l[1]) + (l[2] + l[3]);
        for (int64_t j = 0; j < C; j++) OUT(0)[r * C + j] = y[j] * (dy[j] - s);
    }
    return PEAT_OK;
}
/* the probabilities truncated to fp16's precision (stored through a half buffer, low bits cut) */
static peat_status softmax_trunc_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        double mx = -INFINITY, s = 0.0;
        for (int64_t j = 0; j < C; j++) mx = fmax(mx, x[j]);
        for (int64_t j = 0; j < C; j++) s += exp((double)x[j] - mx);
        for (int64_t j = 0; j < C; j++)
            OUT(0)[r * C + j] = ho_f16_rz((float)(exp((double)x[j] - mx) / s));
    }
    return PEAT_OK;
}

/* ---- layer norm: i = R, C ; f = eps ---- */

/* gamma read through an fp16 copy of the weights */
static peat_status layernorm_gamma_f16(const peat_args *a, const peat_kernel *self)
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
            OUT(0)[r * C + j] = (float)((x[j] - m) * rs * zoo_f16(IN(1)[j]) + IN(2)[j]);
        OUT(1)[r] = (float)m, OUT(2)[r] = (float)rs;
    }
    return PEAT_OK;
}

/* backward: X, gamma, mean, rstd, dY -> dX, dgamma, dbeta */
static peat_status layernorm_bwd_d(const peat_args *a, int no_mean_term, int fp32)
{
    int64_t R = PI(0), C = PI(1);
    double *dg = calloc((size_t)C, sizeof *dg), *db = calloc((size_t)C, sizeof *db);
    if (!dg || !db) {
        free(dg), free(db);
        return PEAT_ERR_NOMEM;
    }
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C, *dy = IN(4) + r * C, *gam = IN(1);
        double m = IN(2)[r], rs = IN(3)[r], sg = 0.0, sgx = 0.0;
        float sgf = 0.0f, sgxf = 0.0f;
        for (int64_t j = 0; j < C; j++) {
            double g = (double)dy[j] * gam[j], xh = (x[j] - m) * rs;
            sg += g, sgx += g * xh;
            float gf = dy[j] * gam[j], xhf = (x[j] - IN(2)[r]) * IN(3)[r];
            sgf += gf, sgxf = fmaf(gf, xhf, sgxf);
            dg[j] += dy[j] * xh, db[j] += dy[j];
        }
        sg /= (double)C, sgx /= (double)C;
        float sgm = sgf / (float)C, sgxm = sgxf / (float)C;
        for (int64_t j = 0; j < C; j++) {
            double g = (double)dy[j] * gam[j], xh = (x[j] - m) * rs;
            if (fp32) {
                float gf = dy[j] * gam[j], xhf = (x[j] - IN(2)[r]) * IN(3)[r];
                OUT(0)[r * C + j] = IN(3)[r] * (gf - sgm - xhf * sgxm);
            } else
                OUT(0)[r * C + j] = (float)(rs * (g - (no_mean_term ? 0.0 : sg) - xh * sgx));
        }
    }
    for (int64_t j = 0; j < C; j++) OUT(1)[j] = (float)dg[j], OUT(2)[j] = (float)db[j];
    free(dg), free(db);
    return PEAT_OK;
}
/* dX without the mean of dY gamma */
static peat_status layernorm_bwd_no_mean(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return layernorm_bwd_d(a, 1, 0);
}
/* honest: dX in fp32 from the row's two sums (the second by fma), dgamma and dbeta summed over
 * rows */
static peat_status layernorm_bwd_fp32(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return layernorm_bwd_d(a, 0, 1);
}

/* ---- GELU: i = n ; X -> Y ; backward X, dY -> dX ---- */

/* the tanh form with tanh(z) = (e^2z - 1) / (e^2z + 1): Inf / Inf past z = 44 */
static peat_status gelu_exp_ratio(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        float x = IN(0)[i], z = 0.7978845608f * (x + 0.044715f * x * x * x), e = expf(2.0f * z);
        OUT(0)[i] = 0.5f * x * (1.0f + (e - 1.0f) / (e + 1.0f));
    }
    return PEAT_OK;
}
/* backward whose density is exp(-x^2) (the 1/2 left out) */
static peat_status gelu_bwd_pdf(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        double x = IN(0)[i];
        double d = 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-x * x) / 2.5066282746310002;
        OUT(0)[i] = (float)(IN(1)[i] * d);
    }
    return PEAT_OK;
}
/* backward with subnormal results flushed */
static peat_status gelu_bwd_ftz(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    for (int64_t i = 0; i < PI(0); i++) {
        double x = IN(0)[i];
        double d = 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / 2.5066282746310002;
        OUT(0)[i] = ho_ftz((float)(IN(1)[i] * d));
    }
    return PEAT_OK;
}

/* ---- cross-entropy backward: i = R, C ; logits, target, dloss -> dlogits ---- */

/* dloss ignored (taken as 1) */
static peat_status xent_bwd_no_dloss(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    const int32_t *t = a->in[1]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *x = IN(0) + r * C;
        double mx = -INFINITY, s = 0.0;
        for (int64_t j = 0; j < C; j++) mx = fmax(mx, x[j]);
        for (int64_t j = 0; j < C; j++) s += exp(x[j] - mx);
        for (int64_t j = 0; j < C; j++)
            OUT(0)[r * C + j] = (float)(exp(x[j] - mx) / s - (j == t[r] ? 1.0 : 0.0));
    }
    return PEAT_OK;
}

/* ---- convolution: i = N C H W O KH KW stride pad ; X, W -> Y ---- */

/* each input channel's window summed in fp32, the channels' sums joined in bf16 */
static peat_status conv_chan_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t N = PI(0), C = PI(1), H = PI(2), W = PI(3), O = PI(4), KH = PI(5), KW = PI(6);
    int64_t st = PI(7), pad = PI(8), OH = (H + 2 * pad - KH) / st + 1,
            OW = (W + 2 * pad - KW) / st + 1;
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    float acc = 0.0f;
                    for (int64_t c = 0; c < C; c++) {
                        float s = 0.0f;
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t ih = oh * st - pad + kh, iw = ow * st - pad + kw;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                s += IN(0)[((n * C + c) * H + ih) * W + iw] *
                                     IN(1)[((o * C + c) * KH + kh) * KW + kw];
                            }
                        acc = zoo_bf16(acc + s);
                    }
                    OUT(0)[((n * O + o) * OH + oh) * OW + ow] = acc;
                }
    return PEAT_OK;
}

/* ---- reduce: i = R, C, mode ---- */

/* a half accumulator that saturates at 65504 (the sum's magnitude clamped), the result in fp32 */
static peat_status reduce_sat_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1);
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t j = 0; j < C; j++) {
            s += IN(0)[r * C + j];
            s = s > 65504.0 ? 65504.0 : s < -65504.0 ? -65504.0 : s;
        }
        OUT(0)[r] = (float)(PI(2) == 1 ? s / (double)C : s);
    }
    return PEAT_OK;
}

/* ---- embedding backward: i = N, V, D ; idx, dY -> dtable ---- */

/* scatter-add in arrival order: the tokens added in a fresh order each call (atomics) */
static peat_status embedding_bwd_atomic(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t N = PI(0), V = PI(1), D = PI(2);
    const int32_t *idx = a->in[0]->data;
    int64_t *perm = malloc((size_t)(N > 0 ? N : 1) * sizeof *perm);
    if (!perm) return PEAT_ERR_NOMEM;
    ho_shuffle(perm, N, zoo_upset_draw());
    memset(OUT(0), 0, (size_t)(V * D) * sizeof(float));
    for (int64_t k = 0; k < N; k++) {
        int64_t n = perm[k];
        for (int64_t d = 0; d < D; d++) OUT(0)[(int64_t)idx[n] * D + d] += IN(1)[n * D + d];
    }
    free(perm);
    return PEAT_OK;
}

/* ---- bias gradient: i = R, C, S ; dY -> db ---- */

/* db accumulated in bf16 */
static peat_status bias_add_bwd_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = PI(0), C = PI(1), S = PI(2);
    for (int64_t c = 0; c < C; c++) {
        float acc = 0.0f;
        for (int64_t r = 0; r < R; r++)
            for (int64_t s = 0; s < S; s++) acc = zoo_bf16(acc + IN(0)[(r * C + c) * S + s]);
        OUT(0)[c] = acc;
    }
    return PEAT_OK;
}

/* ---- GEMM ---- */

/* the columns of a partial last tile of 16 (N not a multiple of 16) summed over K rounded down
 * to a multiple of 8 */
static peat_status gemm_edge_tile_k8(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    zoo_gemm g = zoo_gemm_of(a);
    int64_t n16 = g.N / 16 * 16, k8 = g.K / 8 * 8;
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                double s = 0.0;
                int64_t ke = j >= n16 && g.N % 16 && k8 > 0 ? k8 : g.K;
                for (int64_t k = 0; k < ke; k++)
                    s += (double)zoo_a(a, &g, b, i, k) * zoo_b(a, &g, b, k, j);
                zoo_store(a, &g, b, i, j, (float)s);
            }
    return PEAT_OK;
}

/* ---- fp8 GEMM: i = tA tB M N K batch fmtA fmtB ; f = scale_a beta scale_b ---- */

static peat_status fp8_d(const peat_args *a, int scale_a_twice, int kblock)
{
    zoo_gemm g = zoo_gemm_of(a);
    float sa = (float)PF(0), sb = (float)PF(2), beta = (float)PF(1);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = 0.0f;
                if (kblock) {
                    for (int64_t k0 = 0; k0 < g.K; k0 += 16) {
                        float t = 0.0f;
                        for (int64_t k = k0; k < g.K && k < k0 + 16; k++)
                            t = fmaf(zoo_a(a, &g, b, i, k), zoo_b(a, &g, b, k, j), t);
                        s += t;
                    }
                } else {
                    double d = 0.0;
                    for (int64_t k = 0; k < g.K; k++)
                        d += (double)zoo_a(a, &g, b, i, k) * zoo_b(a, &g, b, k, j);
                    s = (float)d;
                }
                float y = scale_a_twice ? s * (sa * sa * sb) : s * (sa * sb);
                if (beta != 0.0f)
                    y += beta * ((const float *)a->in[2]->data)[(b * g.M + i) * g.N + j];
                OUT(0)[(b * g.M + i) * g.N + j] = y;
            }
    return PEAT_OK;
}
/* scale_a applied twice */
static peat_status gemm_fp8_sa_twice(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return fp8_d(a, 1, 0);
}
/* honest: fp32 fma accumulation in K blocks of 16, the blocks added in order, the scales'
 * product applied once */
static peat_status gemm_fp8_kblock16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return fp8_d(a, 0, 1);
}

int h5_register_nn(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h5_softmax_bwd_dot_bf16", PEAT_OP_SOFTMAX_BWD, softmax_bwd_dot_bf16,
                   "the row dot in bf16"),
        ZOO_KERNEL("h5_softmax_bwd_lanes4", PEAT_OP_SOFTMAX_BWD, softmax_bwd_lanes4,
                   "honest: four fma lanes"),
        ZOO_KERNEL("h5_softmax_trunc_f16", PEAT_OP_SOFTMAX, softmax_trunc_f16,
                   "probabilities truncated to fp16 precision"),
        ZOO_KERNEL("h5_layernorm_gamma_f16", PEAT_OP_LAYERNORM, layernorm_gamma_f16,
                   "gamma through fp16"),
        ZOO_KERNEL("h5_layernorm_bwd_no_mean", PEAT_OP_LAYERNORM_BWD, layernorm_bwd_no_mean,
                   "dX without mean(dY gamma)"),
        ZOO_KERNEL("h5_layernorm_bwd_fp32", PEAT_OP_LAYERNORM_BWD, layernorm_bwd_fp32,
                   "honest: fp32 dX from two row sums"),
        ZOO_KERNEL("h5_gelu_exp_ratio", PEAT_OP_GELU, gelu_exp_ratio,
                   "tanh as an exp ratio, Inf / Inf"),
        ZOO_KERNEL("h5_gelu_bwd_pdf", PEAT_OP_GELU_BWD, gelu_bwd_pdf, "density exp(-x^2)"),
        ZOO_KERNEL("h5_gelu_bwd_ftz", PEAT_OP_GELU_BWD, gelu_bwd_ftz, "subnormal results flushed"),
        ZOO_KERNEL("h5_xent_bwd_no_dloss", PEAT_OP_CROSS_ENTROPY_BWD, xent_bwd_no_dloss,
                   "dloss ignored"),
        ZOO_KERNEL("h5_conv_chan_bf16", PEAT_OP_CONV2D, conv_chan_bf16,
                   "channel sums joined in bf16"),
        ZOO_KERNEL("h5_reduce_sat_f16", PEAT_OP_REDUCE, reduce_sat_f16,
                   "a half accumulator saturating at 65504"),
        ZOO_KERNEL("h5_embedding_bwd_atomic", PEAT_OP_EMBEDDING_BWD, embedding_bwd_atomic,
                   "scatter-add in a fresh order each call"),
        ZOO_KERNEL("h5_bias_add_bwd_bf16", PEAT_OP_BIAS_ADD_BWD, bias_add_bwd_bf16,
                   "db accumulated in bf16"),
        ZOO_KERNEL("h5_gemm_edge_tile_k8", PEAT_OP_GEMM, gemm_edge_tile_k8,
                   "a partial last column tile summed over K rounded to 8"),
        ZOO_KERNEL("h5_gemm_fp8_sa_twice", PEAT_OP_GEMM_FP8, gemm_fp8_sa_twice,
                   "scale_a applied twice"),
        ZOO_KERNEL("h5_gemm_fp8_kblock16", PEAT_OP_GEMM_FP8, gemm_fp8_kblock16,
                   "honest: fp32 fma K blocks of 16"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
