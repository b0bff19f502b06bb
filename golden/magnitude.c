/* magnitude.c: per-element magnitude (sum of |terms|) of each op's computation, for error bounds.
 */
#include "golden/golden.h"
#include "golden/refkit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

peat_status peat_golden_gemm_magnitude(const peat_args *a, double *mag);

/* How every rule below is derived (docs/ops.md has the table). A first-order rounding analysis of
 * the golden algorithm (fp32, natural order) bounds its error by u * sum_t r_t |t|, where t runs
 * over the terms and intermediates of the computation and r_t counts the roundings t passes
 * through (a libm call counts 2, erf 3, i.e. up to 1 and 1.5 ulp; an argument error that exp()
 * amplifies counts |argument|). With K the op's depth (core/ops.c) we return
 *     mag = (1/K) sum_t r_t |t|,   so that   |x_hat - x| <= gamma_K mag   (gamma_K >= K u).
 * For a plain reduction r_t <= K and mag is the classic sum of |terms|. Everything is computed in
 * double from the inputs, so exact_out is only needed by ops this file does not know. Terms of
 * second order in u are left out (e.g. the squared mean error in layernorm's variance, which only
 * matters for rows constant to ~C u). */

/* Libm error allowances, in units of u (see above). */
#define R_EXP 2.0
#define R_LOG 2.0
/* Roundings an exponential's argument x - m passes through, amplified by exp: the shift (exp(x -
 * m)), and in the exp2 form Triton's tl.exp, CUDA's fast exp and FlashAttention compile to,
 * exp2((x - m) log2 e), the product and log2 e's own rounding as well (docs/bounds.md) */
#define R_SHIFT 3.0
/* log S evaluated as log2(S) ln 2 (the exp2 forms' logsumexp): the product and ln 2's rounding */
#define R_LOG2 2.0
#define R_ERF  3.0

#define INV_SQRT2   0.70710678118654752440
#define INV_SQRT2PI 0.39894228040143267794

/* Inputs of a as doubles (I32 inputs stay NULL). */
typedef struct mag_in {
    double *x[PEAT_MAX_IO];
} mag_in;

static void mag_in_free(mag_in *m)
{
    for (int k = 0; k < PEAT_MAX_IO; k++) free(m->x[k]);
}

static peat_status mag_in_load(const peat_args *a, mag_in *m)
{
    memset(m, 0, sizeof *m);
    for (int k = 0; k < a->n_in; k++) {
        if (a->in[k]->dtype == PEAT_DTYPE_I32) continue;
        peat_status s = peat_golden_load(a->in[k], &m->x[k]);
        if (s != PEAT_OK) {
            mag_in_free(m);
            return s;
        }
    }
    return PEAT_OK;
}

/* For ops whose golden is a plain sum of products (conv family, bias and embedding backward, row
 * sum), the magnitude is the exact kernel run on |inputs|: one loop nest per idea. */
static peat_status mag_abs_run(const peat_args *a, const mag_in *in, int64_t n, double *mag)
{
    const peat_kernel *k = peat_golden_nn_exact(a->op);
    if (!k) return PEAT_ERROR(PEAT_ERR_INTERNAL, "no exact kernel for %s", peat_op_name(a->op));
    peat_args b = *a;
    peat_tensor *abs_in[PEAT_MAX_IO] = {0}, *out = NULL;
    int64_t shp = n;
    peat_status s = peat_tensor_wrap(PEAT_DTYPE_F64, 1, &shp, mag, &out);
    for (int i = 0; i < a->n_in && s == PEAT_OK; i++) {
        if (!in->x[i]) continue; /* I32 indices pass through unchanged */
        int64_t m = peat_tensor_numel(a->in[i]);
        s = peat_tensor_alloc(PEAT_DTYPE_F64, 1, &m, &abs_in[i]);
        if (s != PEAT_OK) break;
        for (int64_t j = 0; j < m; j++) peat_f64(abs_in[i])[j] = fabs(in->x[i][j]);
        b.in[i] = abs_in[i];
    }
    if (s == PEAT_OK) {
        b.n_out = 1;
        b.out[0] = out;
        s = k->fn(&b, k);
    }
    for (int i = 0; i < PEAT_MAX_IO; i++) peat_tensor_free(abs_in[i]);
    peat_tensor_free(out);
    return s;
}

/* ---- elementwise ---- */

static void mag_gelu(const double *x, int64_t n, double *mag)
{
    /* y = 0.5 x (1 + erf(x/sqrt2)): argument scaling <= 1u of erf (|z erf'(z)| <= 0.49, two
     * roundings), erf itself, the add and the product: r = 1 + R_ERF + 1 + 1 on the terms. */
    for (int64_t i = 0; i < n; i++)
        mag[i] = (3.0 + R_ERF) * 0.5 * fabs(x[i]) * (1.0 + fabs(erf(x[i] * INV_SQRT2)));
}

static void mag_gelu_bwd(const double *x, const double *dy, int64_t n, double *mag)
{
    /* dX = dY (0.5 (1 + erf) + x phi(x)): the cdf part as in gelu plus the sum and the dY product;
     * phi's exponent -x^2/2 carries a rounding of size x^2/2 u into exp, then exp, the constant,
     * two products, the sum and the dY product. */
    for (int64_t i = 0; i < n; i++) {
        double xi = x[i], cdf_t = 0.5 * (1.0 + fabs(erf(xi * INV_SQRT2)));
        double xphi = fabs(xi) * exp(-0.5 * xi * xi) * INV_SQRT2PI;
        mag[i] = fabs(dy[i]) * ((4.0 + R_ERF) * cdf_t + (0.5 * xi * xi + 5.0 + R_EXP) * xphi);
    }
}

/* ---- row-wise ---- */

/* Softmax of one row and the two sums the rules need: lam = sum_k p_k (R_SHIFT |x_k - max| +
 * R_EXP)
 * (the p-weighted error of the exponentials) and ln S = log sum exp(x - max). */
static void row_softmax(const double *x, int64_t C, double *p, double *mx, double *lnS, double *lam)
{
    double m = x[0], s = 0.0, l = 0.0;
    for (int64_t j = 1; j < C; j++) m = x[j] > m ? x[j] : m;
    for (int64_t j = 0; j < C; j++) s += p[j] = exp(x[j] - m);
    /* a masked (-inf) entry has p = 0 and contributes nothing (not 0 * inf) */
    for (int64_t j = 0; j < C; j++)
        p[j] /= s, l += p[j] > 0.0 ? p[j] * (R_SHIFT * fabs(x[j] - m) + R_EXP) : 0.0;
    *mx = m, *lnS = log(s), *lam = l;
}

static peat_status mag_softmax(const peat_args *a, const mag_in *in, double *mag)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    for (int64_t r = 0; r < R; r++) {
        const double *x = in->x[0] + r * C;
        double *p = mag + r * C, mx, lnS, lam;
        row_softmax(x, C, p, &mx, &lnS, &lam);
        /* y_j = e_j / S or e_j * (1 / S) (PyTorch): e_j's own error, S's (lam + C-1 adds) and
         * the division, or the reciprocal and the product (one rounding more) */
        for (int64_t j = 0; j < C; j++)
            p[j] = p[j] > 0.0 ? p[j] * (R_SHIFT * fabs(x[j] - mx) + R_EXP + lam + (double)C + 1.0) /
                                    (double)C
                              : 0.0;
    }
    return PEAT_OK;
}

static peat_status mag_softmax_bwd(const peat_args *a, const mag_in *in, double *mag)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    for (int64_t r = 0; r < R; r++) {
        const double *y = in->x[0] + r * C, *dy = in->x[1] + r * C;
        double dot = 0.0, adot = 0.0;
        for (int64_t j = 0; j < C; j++) dot += dy[j] * y[j], adot += fabs(dy[j] * y[j]);
        /* dot: C products and adds; then dY - dot and the product with Y round once each */
        for (int64_t j = 0; j < C; j++)
            mag[r * C + j] = fabs(y[j]) * (adot + 2.0 * fabs(dy[j] - dot) / (double)C);
    }
    return PEAT_OK;
}

static peat_status mag_cross_entropy(const peat_args *a, const mag_in *in, int bwd, double *mag)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    const int32_t *tgt = peat_i32(a->in[1]);
    double *p = malloc((size_t)C * sizeof *p);
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "cross_entropy magnitude row");
    for (int64_t r = 0; r < R; r++) {
        const double *x = in->x[0] + r * C;
        double mx, lnS, lam;
        row_softmax(x, C, p, &mx, &lnS, &lam);
        if (!bwd) {
            /* loss = (log S + max) - x_t (golden) or -((x_t - max) - log S) (log_softmax then
             * nll): S's error (lam + C-1), log, the two adds of either grouping */
            double loss = lnS + mx - x[tgt[r]];
            mag[r] = (lam + (double)C - 1.0 + (R_LOG + R_LOG2) * lnS + fabs(lnS + mx) +
                      fabs(x[tgt[r]] - mx) + fabs(loss)) /
                     (double)C;
            continue;
        }
        double dl = fabs(in->x[2][r]);
        /* dlogits = dloss (p_j - onehot), p_j either e_j / S (golden: p_j's error as in
         * softmax) or exp(logp_j), logp_j = (x_j - max) - log S (PyTorch's log_softmax
         * backward: the shift, log S's error and its rounding, the second subtraction, all
         * amplified by exp); then the subtraction and the dloss product */
        for (int64_t j = 0; j < C; j++) {
            double oh = j == tgt[r] ? 1.0 : 0.0, d = fabs(x[j] - mx);
            double rel =
                (R_SHIFT + 1.0) * d + R_EXP + lam + (double)C + (R_LOG + R_LOG2 + 1.0) * lnS + 1.0;
            mag[r * C + j] = dl * (p[j] * rel + 2.0 * fabs(p[j] - oh)) / (double)C;
        }
    }
    free(p);
    return PEAT_OK;
}

static peat_status mag_layernorm(const peat_args *a, int o, const mag_in *in, double *mag)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    double eps = a->p.f[0], Cd = (double)C;
    const double *g = in->x[1], *b = in->x[2];
    for (int64_t r = 0; r < R; r++) {
        const double *x = in->x[0] + r * C;
        double m = 0.0, A = 0.0, var = 0.0;
        for (int64_t j = 0; j < C; j++) m += x[j], A += fabs(x[j]);
        m /= Cd, A /= Cd;
        for (int64_t j = 0; j < C; j++) var += (x[j] - m) * (x[j] - m);
        var /= Cd;
        double rs = 1.0 / sqrt(var + eps);
        /* var: diff, square, C-1 adds, divide -> (C+3) var; + eps (eps's own rounding and the
         * add); sqrt halves, then sqrt and 1/ round once each: rho = rstd's relative error / u */
        double rho = 0.5 * ((Cd + 4.0) * var + 2.0 * eps) / (var + eps) + 2.0;
        if (o == 1) {
            mag[r] = A; /* mean: C-1 adds and a divide, each term |x|/C */
            continue;
        }
        if (o == 2) {
            mag[r] = rs * rho / Cd;
            continue;
        }
        /* y = ((x - mean) rstd) gamma + beta: the mean's error (C A), the subtraction, rstd's
         * error, two products, then the add */
        for (int64_t j = 0; j < C; j++) {
            double d = x[j] - m, y = d * rs * g[j] + b[j];
            mag[r * C + j] = (fabs(g[j]) * rs * (Cd * A + fabs(d) * (3.0 + rho)) + fabs(y)) / Cd;
        }
    }
    return PEAT_OK;
}

/* Layer norm backward in PyTorch's CPU order, from raw sums: ds = sum g x, db = sum g (g = dY
 * gamma), b = (db mean - ds) rstd^3 / C, c = -b mean - db rstd / C, dX = rstd g + b x + c. With
 * a mean large against the spread, b x and c cancel: the error is |x| times b's, not the
 * centred form's (docs/bounds.md). eb, ec: errors / u of b and c. */
typedef struct ln_bwd_row {
    double db, ds, adb, ads; /* the sums and their sums of |terms| */
    double m, rs, b, c, eb, ec;
} ln_bwd_row;

static void ln_bwd_raw_init(ln_bwd_row *w, double m, double rs, double Cd)
{
    double dm = w->db * m, diff = dm - w->ds, r3 = rs * rs * rs;
    w->m = m, w->rs = rs;
    w->b = diff * r3 / Cd, w->c = -w->b * m - w->db * rs / Cd;
    /* ds: products and C-1 adds ((C+1) sum |g x|); db m: db's C roundings at |m|, the product;
     * the subtraction, rstd^3 (three products) and 1/C (two) */
    double ediff = (Cd + 1.0) * w->ads + fabs(m) * Cd * w->adb + fabs(dm) + fabs(diff);
    w->eb = r3 / Cd * (ediff + 5.0 * fabs(diff));
    /* c: b's error at |m|, its product, db's error and two products at |db rstd / C|, the add */
    w->ec =
        fabs(m) * w->eb + fabs(w->b * m) + rs * w->adb + 3.0 * fabs(w->db * rs / Cd) + fabs(w->c);
}

static double ln_bwd_raw_err(const ln_bwd_row *w, double x, double g)
{
    double bx = w->b * x, t = w->rs * g;
    return 2.0 * fabs(t) + fabs(x) * w->eb + fabs(bx) + fabs(t + bx) + w->ec + fabs(t + bx + w->c);
}

static peat_status mag_layernorm_bwd(const peat_args *a, int o, const mag_in *in, double *mag)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    double K = (double)peat_op_info_get(a->op)->depth(&a->p), Cd = (double)C, Rd = (double)R;
    const double *X = in->x[0], *gam = in->x[1], *mean = in->x[2], *rstd = in->x[3], *dY = in->x[4];
    if (o == 1 || o == 2) {
        /* dgamma = sum_r dY xhat (xhat: 2 roundings, product 1, R-1 adds); dbeta = sum_r dY */
        for (int64_t c = 0; c < C; c++) {
            double s = 0.0;
            for (int64_t r = 0; r < R; r++) {
                double xh = (X[r * C + c] - mean[r]) * rstd[r];
                s += o == 1 ? (Rd + 2.0) * fabs(dY[r * C + c] * xh) : Rd * fabs(dY[r * C + c]);
            }
            mag[c] = s / K;
        }
        return PEAT_OK;
    }
    for (int64_t r = 0; r < R; r++) {
        const double *x = X + r * C, *dy = dY + r * C;
        double sg = 0.0, sgx = 0.0, S1 = 0.0, S2 = 0.0, rs = rstd[r];
        ln_bwd_row raw = {0};
        for (int64_t j = 0; j < C; j++) {
            double xh = (x[j] - mean[r]) * rs, g = dy[j] * gam[j];
            sg += g, sgx += g * xh, S1 += fabs(g), S2 += fabs(g * xh);
            raw.db += g, raw.ds += g * x[j], raw.adb += fabs(g), raw.ads += fabs(g * x[j]);
        }
        sg /= Cd, sgx /= Cd, S1 /= Cd, S2 /= Cd;
        ln_bwd_raw_init(&raw, mean[r], rs, Cd);
        /* dX = rstd ((g - sg) - xhat sgx): g (1 rounding), sg's terms (C+1), sgx's terms (C+4),
         * xhat (2) and its product (1), the two subtractions and the rstd product */
        for (int64_t j = 0; j < C; j++) {
            double xh = (x[j] - mean[r]) * rs, g = dy[j] * gam[j];
            double t = fabs(g) + (Cd + 1.0) * S1 + fabs(g - sg) + fabs(xh) * (Cd + 4.0) * S2 +
                       3.0 * fabs(xh * sgx) + 2.0 * fabs(g - sg - xh * sgx);
            double e = fabs(rs) * t, e_raw = ln_bwd_raw_err(&raw, x[j], g);
            mag[r * C + j] = (e > e_raw ? e : e_raw) / K;
        }
    }
    return PEAT_OK;
}

/* ---- attention ---- */

/* Per-(query i, key j) quantities of a head shared by forward and backward rules:
 * s = scale q.k, lam_s = error of s / u = D |scale| sum_e|q k| + 2|s| (dot, scale's rounding,
 * product). */
static void attn_score(const double *q, const double *k, int64_t D, double scale, double *s,
                       double *lam_s)
{
    double dot = 0.0, adot = 0.0;
    for (int64_t e = 0; e < D; e++) dot += q[e] * k[e], adot += fabs(q[e] * k[e]);
    *s = scale * dot;
    *lam_s = (double)D * fabs(scale) * adot + 2.0 * fabs(*s);
}

static peat_status mag_attention(const peat_args *a, int o, const mag_in *in, double *mag)
{
    int64_t B = a->p.i[0], H = a->p.i[1], T = a->p.i[2], D = a->p.i[3], causal = a->p.i[4];
    double scale = a->p.f[0], K = (double)peat_op_info_get(a->op)->depth(&a->p);
    double *s = malloc((size_t)T * sizeof *s), *ls = malloc((size_t)T * sizeof *ls);
    if (!s || !ls) {
        free(s), free(ls);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "attention magnitude row");
    }
    for (int64_t bh = 0; bh < B * H; bh++) {
        const double *q = in->x[0] + bh * T * D, *k = in->x[1] + bh * T * D;
        const double *v = in->x[2] + bh * T * D;
        for (int64_t i = 0; i < T; i++) {
            int64_t n = causal ? i + 1 : T;
            double mx = -INFINITY, S = 0.0, lam = 0.0;
            for (int64_t j = 0; j < n; j++) {
                attn_score(q + i * D, k + j * D, D, scale, &s[j], &ls[j]);
                mx = s[j] > mx ? s[j] : mx;
            }
            /* lam_j = error of log e_j / u: the score's, the shift's rounding, exp's */
            for (int64_t j = 0; j < n; j++) {
                ls[j] += R_SHIFT * fabs(s[j] - mx) + R_EXP;
                S += s[j] = exp(s[j] - mx);
            }
            for (int64_t j = 0; j < n; j++) s[j] /= S, lam += s[j] * ls[j];
            if (o == 1) {
                /* L = max + log S: S's error (lam + n-1), log, the add; in the exp2 form
                 * (max + log2 S) ln 2: the product and ln 2's rounding */
                double L = mx + log(S);
                mag[bh * T + i] = (lam + (double)n + R_LOG * log(S) + (1.0 + R_LOG2) * fabs(L)) / K;
                continue;
            }
            /* O = (sum_j e_j v_j) / S: each term e_j's error, its product and n-1 adds; then S's
             * error and the division */
            for (int64_t e = 0; e < D; e++) {
                double t = 0.0, O = 0.0;
                for (int64_t j = 0; j < n; j++) {
                    t += s[j] * fabs(v[j * D + e]) * (ls[j] + (double)n);
                    O += s[j] * v[j * D + e];
                }
                mag[(bh * T + i) * D + e] = (t + fabs(O) * (lam + (double)n)) / K;
            }
        }
    }
    free(s), free(ls);
    return PEAT_OK;
}

static peat_status mag_attention_bwd(const peat_args *a, int o, const mag_in *in, double *mag)
{
    int64_t B = a->p.i[0], H = a->p.i[1], T = a->p.i[2], D = a->p.i[3], causal = a->p.i[4];
    double scale = a->p.f[0], K = (double)peat_op_info_get(a->op)->depth(&a->p);
    size_t TT = (size_t)(T * T);
    /* P, dS and the error bounds (/u) of P and dS for one head */
    double *P = malloc(TT * sizeof *P), *eP = malloc(TT * sizeof *eP);
    double *dS = malloc(TT * sizeof *dS), *eS = malloc(TT * sizeof *eS);
    if (!P || !eP || !dS || !eS) {
        free(P), free(eP), free(dS), free(eS);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "attention_bwd magnitude scratch");
    }
    int64_t TD = T * D;
    for (int64_t bh = 0; bh < B * H; bh++) {
        const double *q = in->x[0] + bh * TD, *k = in->x[1] + bh * TD, *v = in->x[2] + bh * TD;
        const double *O = in->x[3] + bh * TD, *L = in->x[4] + bh * T, *dO = in->x[5] + bh * TD;
        for (int64_t i = 0; i < T; i++) {
            double Dl = 0.0, W = 0.0;
            for (int64_t e = 0; e < D; e++)
                Dl += dO[i * D + e] * O[i * D + e], W += fabs(dO[i * D + e] * O[i * D + e]);
            for (int64_t j = 0; j < T; j++) {
                size_t ij = (size_t)(i * T + j);
                if (causal && j > i) {
                    P[ij] = eP[ij] = dS[ij] = eS[ij] = 0.0;
                    continue;
                }
                double s, lam, dp = 0.0, G = 0.0;
                attn_score(q + i * D, k + j * D, D, scale, &s, &lam);
                for (int64_t e = 0; e < D; e++)
                    dp += dO[i * D + e] * v[j * D + e], G += fabs(dO[i * D + e] * v[j * D + e]);
                /* p = exp(s - L): score error, the subtraction, exp; in the exp2 form
                 * exp2(s c - L log2 e) (FlashAttention-2), L's product by log2 e as well */
                double p = exp(s - L[i]), pi = lam + R_SHIFT * fabs(s - L[i]) + fabs(L[i]) + R_EXP;
                P[ij] = p, eP[ij] = p * pi;
                /* dS = p (dp - Dl): p's error, both dot products (D each), the subtraction and the
                 * product */
                dS[ij] = p * (dp - Dl);
                eS[ij] = p * ((pi + 2.0) * fabs(dp - Dl) + (double)D * (G + W));
            }
        }
        for (int64_t t = 0; t < T; t++)
            for (int64_t e = 0; e < D; e++) {
                double acc = 0.0, val = 0.0;
                for (int64_t u = 0; u < T; u++) {
                    size_t tu = (size_t)(t * T + u), ut = (size_t)(u * T + t);
                    if (o == 0) /* dQ = scale sum_u dS_tu k_u: dS's error, product, T-1 adds */
                        acc += fabs(k[u * D + e]) * (eS[tu] + (double)T * fabs(dS[tu])),
                            val += dS[tu] * k[u * D + e];
                    else if (o == 1) /* dK = scale sum_u dS_ut q_u */
                        acc += fabs(q[u * D + e]) * (eS[ut] + (double)T * fabs(dS[ut])),
                            val += dS[ut] * q[u * D + e];
                    else /* dV = sum_u P_ut dO_u */
                        acc += fabs(dO[u * D + e]) * (eP[ut] + (double)T * P[ut]);
                }
                /* dQ, dK: then the scale's rounding and its product */
                mag[bh * TD + t * D + e] =
                    o == 2 ? acc / K : (fabs(scale) * acc + 2.0 * fabs(scale * val)) / K;
            }
    }
    free(P), free(eP), free(dS), free(eS);
    return PEAT_OK;
}

/* ---- optimizers (depth 1: mag is the whole error / u) ----
 * The rule is the union over the orders frameworks ship (docs/bounds.md): the golden's
 * p - lr (mhat / (sqrt(vhat) + eps) + wd p); PyTorch's single-tensor and foreach orders (decay
 * p (1 - lr wd) first, m.lerp_(g, 1 - b1), v b2 + (1 - b2) g g, sqrt(v) / sqrt(bc2) + eps,
 * p + (-lr / bc1) m / denom); its fused kernel (p -= lr wd p, m = b1 m + (1 - b1) g). Each
 * intermediate is charged the largest rounding count any of them gives it, and a scalar formed
 * per call (lr / bc1, sqrt(bc2), 1 - lr wd) up to 3 roundings. */

#define R_SCALAR 3.0

/* m' = b1 m + c1 g (fused) or m + c1 (g - m) (lerp: the difference, the weight's rounding, the
 * product, the add): the larger error / u. */
static double adamw_em(double b1, double c1, double m, double g, double m1)
{
    double fused = 2.0 * fabs(b1 * m) + 2.0 * fabs(c1 * g) + fabs(m1);
    double lerp = 3.0 * fabs(c1 * (g - m)) + fabs(m1);
    return fused > lerp ? fused : lerp;
}

/* The error / u of p' given the moments m1, v1 and their errors em, ev. */
static double adamw_ep(const peat_args *a, double p, double m1, double v1, double em, double ev)
{
    int64_t t = a->p.i[1];
    double lr = a->p.f[0], b1 = a->p.f[1], b2 = a->p.f[2], eps = a->p.f[3], wd = a->p.f[4];
    double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
    /* sq = sqrt(v1 / bc2), either as sqrt(v / bc2) or sqrt(v) / sqrt(bc2): v's error halved, the
     * divide, sqrt and the rounded scalar */
    double sq = sqrt(v1 / bc2), den = sq + eps;
    double esq = (v1 > 0.0 ? 0.5 * ev / sqrt(v1 * bc2) : 0.0) + (2.0 + R_SCALAR) * sq;
    double eden = esq + fabs(eps) + den; /* eps's rounding and the add */
    /* U = (lr / bc1) m / den in any grouping: m's error, den's, the scalars and two operations */
    double step = fabs(lr / bc1), U = step * m1 / den;
    double eU = step * em / den + fabs(U) * (eden / den + 2.0 + 2.0 * R_SCALAR);
    /* decay: golden lr (q + wd p) (wd p rounded twice, the inner add, the lr product), or
     * p (1 - lr wd) / p - (lr wd) p first (the scalar and the product at |p|) */
    double pd = p * (1.0 - lr * wd), inner = fabs(U / lr + wd * p);
    double edec = 2.0 * fabs(pd) + fabs(lr * wd * p) * (2.0 + R_SCALAR) + 2.0 * fabs(lr) * inner;
    return edec + eU + fabs(pd - U);
}

static void mag_adamw(const peat_args *a, int o, const mag_in *in, double *mag)
{
    int64_t n = a->p.i[0];
    double b1 = a->p.f[1], b2 = a->p.f[2];
    double c1 = 1.0 - b1, c2 = 1.0 - b2;
    for (int64_t i = 0; i < n; i++) {
        double p = in->x[0][i], g = in->x[1][i], m = in->x[2][i], v = in->x[3][i];
        /* v' = b2 v + c2 g g (every order: the two coefficients, the products, the add) */
        double m1 = b1 * m + c1 * g, v1 = b2 * v + c2 * g * g;
        double em = adamw_em(b1, c1, m, g, m1);
        double ev = 2.0 * fabs(b2 * v) + 3.0 * fabs(c2 * g * g) + fabs(v1);
        mag[i] = o == 1 ? em : o == 2 ? ev : adamw_ep(a, p, m1, v1, em, ev);
    }
}

static void mag_sgd(const peat_args *a, int o, const mag_in *in, double *mag)
{
    int64_t n = a->p.i[0];
    double lr = a->p.f[0], mu = a->p.f[1], wd = a->p.f[2];
    for (int64_t i = 0; i < n; i++) {
        double p = in->x[0][i], g = in->x[1][i], m = in->x[2][i];
        /* mom' = mu m + g + wd p in either grouping: golden (mu m + g) + wd p, PyTorch
         * mu m + (g + wd p): mu and wd rounded and multiplied, both partial sums, the last add */
        double m1 = mu * m + g + wd * p;
        double em = 2.0 * fabs(mu * m) + fabs(mu * m + g) + fabs(g + wd * p) + 2.0 * fabs(wd * p) +
                    fabs(m1);
        /* nesterov's step d = (g + wd p) + mu mom' (PyTorch: g + wd p formed once, reused; the
         * golden forms it again): wd's rounding and product, that add, mom's error scaled by mu,
         * mu's rounding and product, the last add */
        double d = a->p.i[1] ? (g + wd * p) + mu * m1 : m1;
        double ed = a->p.i[1] ? 2.0 * fabs(wd * p) + fabs(g + wd * p) + fabs(mu) * em +
                                    2.0 * fabs(mu * m1) + fabs(d)
                              : em;
        /* p' = p - lr d: d's error scaled, lr's rounding and product, the subtraction */
        mag[i] = o == 1 ? em : fabs(lr) * ed + 2.0 * fabs(lr * d) + fabs(p - lr * d);
    }
}

/* bias add: one add, |y| */
static void mag_bias_add(const peat_args *a, const mag_in *in, int64_t n, double *mag)
{
    int64_t C = a->p.i[1], S = a->p.i[2];
    for (int64_t i = 0; i < n; i++) mag[i] = fabs(in->x[0][i] + in->x[1][(i / S) % C]);
}

/* relu: no rounding at all, so any error is a bug; |y| keeps the bound scale-free */
static void mag_relu(const mag_in *in, int64_t n, double *mag)
{
    for (int64_t i = 0; i < n; i++) mag[i] = in->x[0][i] > 0.0 ? in->x[0][i] : 0.0;
}

static void mag_relu_bwd(const mag_in *in, int64_t n, double *mag)
{
    for (int64_t i = 0; i < n; i++) mag[i] = in->x[0][i] > 0.0 ? fabs(in->x[1][i]) : 0.0;
}

/* embedding: a copy of the indexed rows */
static void mag_embedding(const peat_args *a, const mag_in *in, int64_t n, double *mag)
{
    int64_t D = a->p.i[2];
    const int32_t *idx = peat_i32(a->in[1]);
    for (int64_t i = 0; i < n; i++) mag[i] = fabs(in->x[0][(int64_t)idx[i / D] * D + i % D]);
}

/* An op this file has no rule for: the value itself (one rounding). */
static peat_status mag_value(const peat_args *a, const peat_tensor *exact_out, int64_t n,
                             double *mag)
{
    if (!exact_out || peat_tensor_numel(exact_out) != n)
        return PEAT_ERROR(PEAT_ERR_INVAL, "magnitude of %s needs the exact output",
                          peat_op_name(a->op));
    for (int64_t i = 0; i < n; i++) mag[i] = fabs(peat_tensor_get(exact_out, i));
    return PEAT_OK;
}

/* The rule of each op kind, applied to n elements of output o. */
static peat_status mag_dispatch(const peat_args *a, int o, const mag_in *in, int64_t n,
                                const peat_tensor *exact_out, double *mag)
{
    switch (a->op) {
    case PEAT_OP_CONV2D:
    case PEAT_OP_CONV2D_BWD_DATA:
    case PEAT_OP_CONV2D_BWD_FILTER:
    case PEAT_OP_BIAS_ADD_BWD:
    case PEAT_OP_EMBEDDING_BWD:
    /* reduce: the row sum of |x|; for the mean, sum|x|/C bounds u((C-1) sum|x| + |sum|)/C by
     * C u sum|x|/C, so the exact mean of |x| serves as well */
    case PEAT_OP_REDUCE:
        return mag_abs_run(a, in, n, mag);
    case PEAT_OP_BIAS_ADD:
        mag_bias_add(a, in, n, mag);
        return PEAT_OK;
    case PEAT_OP_RELU:
        mag_relu(in, n, mag);
        return PEAT_OK;
    case PEAT_OP_RELU_BWD:
        mag_relu_bwd(in, n, mag);
        return PEAT_OK;
    case PEAT_OP_EMBEDDING:
        mag_embedding(a, in, n, mag);
        return PEAT_OK;
    case PEAT_OP_GELU:
        mag_gelu(in->x[0], n, mag);
        return PEAT_OK;
    case PEAT_OP_GELU_BWD:
        mag_gelu_bwd(in->x[0], in->x[1], n, mag);
        return PEAT_OK;
    case PEAT_OP_SOFTMAX:
        return mag_softmax(a, in, mag);
    case PEAT_OP_SOFTMAX_BWD:
        return mag_softmax_bwd(a, in, mag);
    case PEAT_OP_CROSS_ENTROPY:
    case PEAT_OP_CROSS_ENTROPY_BWD:
        return mag_cross_entropy(a, in, a->op == PEAT_OP_CROSS_ENTROPY_BWD, mag);
    case PEAT_OP_LAYERNORM:
        return mag_layernorm(a, o, in, mag);
    case PEAT_OP_LAYERNORM_BWD:
        return mag_layernorm_bwd(a, o, in, mag);
    case PEAT_OP_ATTENTION:
        return mag_attention(a, o, in, mag);
    case PEAT_OP_ATTENTION_BWD:
        return mag_attention_bwd(a, o, in, mag);
    case PEAT_OP_ADAMW:
        mag_adamw(a, o, in, mag);
        return PEAT_OK;
    case PEAT_OP_SGD:
        mag_sgd(a, o, in, mag);
        return PEAT_OK;
    default:
        return mag_value(a, exact_out, n, mag);
    }
}

peat_status peat_golden_magnitude(const peat_args *a, int o, const peat_tensor *exact_out,
                                  double *mag)
{
    if (a->op == PEAT_OP_GEMM && o == 0) return peat_golden_gemm_magnitude(a, mag);
    const peat_op_info *info = peat_op_info_get(a->op);
    if (!info) return PEAT_ERROR(PEAT_ERR_INVAL, "op kind %d out of range", (int)a->op);
    if (o < 0 || o >= info->n_out)
        return PEAT_ERROR(PEAT_ERR_INVAL, "%s has no output %d", info->name, o);
    peat_args chk = *a;
    chk.n_out = 0; /* only the inputs are needed here */
    PEAT_TRY(peat_op_check(&chk));
    int nd[PEAT_MAX_IO] = {0};
    int64_t shp[PEAT_MAX_IO][PEAT_MAX_DIMS] = {{0}};
    PEAT_TRY(info->out_shapes(a, nd, shp));
    int64_t n = 1;
    for (int d = 0; d < nd[o]; d++) n *= shp[o][d];
    mag_in in;
    PEAT_TRY(mag_in_load(a, &in));
    peat_status s = mag_dispatch(a, o, &in, n, exact_out, mag);
    mag_in_free(&in);
    return s;
}

int64_t peat_golden_terms(const peat_args *a, int o)
{
    const peat_op_info *info = peat_op_info_get(a->op);
    if (!info) return 1;
    int64_t depth = info->depth(&a->p), t = 1;
    const int64_t *i = a->p.i;
    switch (a->op) {
    case PEAT_OP_GEMM:
    case PEAT_OP_CONV2D:
    case PEAT_OP_CONV2D_BWD_DATA:
    case PEAT_OP_CONV2D_BWD_FILTER:
    case PEAT_OP_BIAS_ADD_BWD:
    case PEAT_OP_REDUCE:
    case PEAT_OP_ATTENTION_BWD: /* dQ, dK, dV are sums over keys or queries */
        t = depth;
        break;
    case PEAT_OP_LAYERNORM_BWD: /* dX is a row op; dgamma, dbeta sum over the R rows */
        t = o == 0 ? 1 : i[0];
        break;
    case PEAT_OP_EMBEDDING_BWD: /* each table row gathers about N / V token gradients */
        t = i[1] > 0 ? i[0] / i[1] : 1;
        break;
    default:
        t = 1;
    }
    if (t < 1) t = 1;
    return t > depth ? depth : t;
}
