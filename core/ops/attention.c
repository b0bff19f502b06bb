/* attention.c: scaled dot-product attention (causal or not; outputs O and the row logsumexp L)
 * and its backward (dQ, dK, dV from Q, K, V, O, L and dO), layout [B,H,T,D]. */
#include "core/opdesc.h"
#include "core/ops/rowkit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define P(k) (a->p.i[k])

/* Grouped-query attention: i[5] K/V heads (0: as many as the query heads), each shared by a
 * group of H / i[5] consecutive query heads. */
static int64_t kv_heads(const peat_op_params *p)
{
    return p->i[5] > 0 ? p->i[5] : p->i[1];
}
/* the K/V plane (batch entry, K/V head) query plane bh reads */
static int64_t kv_plane(const peat_op_params *p, int64_t bh)
{
    int64_t H = p->i[1], G = H / kv_heads(p);
    return bh / H * kv_heads(p) + bh % H / G;
}

/* ---- attention: i = B H T D causal ; f = scale ---- */
static peat_status attn_check(const peat_args *a)
{
    PEAT_TRY(peat_op_positive(a, 4));
    if (P(4) < 0 || P(4) > 1)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: causal must be 0 or 1", peat_op_name(a->op));
    if (P(5) < 0 || P(5) > P(1) || P(1) % kv_heads(&a->p))
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: %lld K/V heads do not divide %lld query heads",
                          peat_op_name(a->op), (long long)P(5), (long long)P(1));
    int64_t n = P(0) * P(1) * P(2) * P(3), nl = P(0) * P(1) * P(2);
    int64_t nkv = P(0) * kv_heads(&a->p) * P(2) * P(3);
    if ((double)n > 4e9) return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: absurd shape", peat_op_name(a->op));
    static const char *fw[] = {"Q", "K", "V"}, *bw[] = {"Q", "K", "V", "O", "L", "dO"};
    if (a->op == PEAT_OP_ATTENTION) {
        for (int k = 0; k < 3; k++)
            PEAT_TRY(peat_op_expect(a, a->in[k], fw[k], PEAT_DTYPE_F32, k ? nkv : n));
        PEAT_TRY(peat_op_expect(a, peat_op_out(a, 0), "O", PEAT_DTYPE_F32, n));
        return peat_op_expect(a, peat_op_out(a, 1), "L", PEAT_DTYPE_F32, nl);
    }
    for (int k = 0; k < 6; k++)
        PEAT_TRY(peat_op_expect(a, a->in[k], bw[k], PEAT_DTYPE_F32,
                                k == 4             ? nl
                                : k == 1 || k == 2 ? nkv
                                                   : n));
    for (int k = 0; k < 3; k++)
        PEAT_TRY(peat_op_expect(a, peat_op_out(a, k), fw[k], PEAT_DTYPE_F32, k ? nkv : n));
    return PEAT_OK;
}

static peat_status attn_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    peat_op_out_shape(nd, s, 0, 4, P(0), P(1), P(2), P(3));
    if (a->op == PEAT_OP_ATTENTION)
        peat_op_out_shape(nd, s, 1, 3, P(0), P(1), P(2), 0);
    else {
        peat_op_out_shape(nd, s, 1, 4, P(0), kv_heads(&a->p), P(2), P(3));
        peat_op_out_shape(nd, s, 2, 4, P(0), kv_heads(&a->p), P(2), P(3));
    }
    return PEAT_OK;
}

/* the longest sum: a score's D products or a row's T keys; in the backward, dK and dV's T
 * queries of each of the group's H / K/V-heads query heads */
static int64_t attn_depth(const peat_op_params *p)
{
    return p->i[2] > p->i[3] ? p->i[2] : p->i[3];
}
static int64_t attn_bwd_depth(const peat_op_params *p)
{
    int64_t t = p->i[2] * (p->i[1] / kv_heads(p));
    return t > p->i[3] ? t : p->i[3];
}

static double attn_flops(const peat_op_params *p)
{
    return 4.0 * p->i[0] * p->i[1] * p->i[2] * p->i[2] * p->i[3] * (p->i[4] ? 0.5 : 1.0);
}

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

static peat_status attn_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n_out,
                            const peat_tensor *exact_out, double *mag)
{
    (void)n_out, (void)exact_out;
    int64_t B = a->p.i[0], H = a->p.i[1], T = a->p.i[2], D = a->p.i[3], causal = a->p.i[4];
    double scale = a->p.f[0], K = (double)peat_op_info_get(a->op)->depth(&a->p);
    double *s = malloc((size_t)T * sizeof *s), *ls = malloc((size_t)T * sizeof *ls);
    if (!s || !ls) {
        free(s), free(ls);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "attention magnitude row");
    }
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t kv = kv_plane(&a->p, bh);
        const double *q = in->x[0] + bh * T * D, *k = in->x[1] + kv * T * D;
        const double *v = in->x[2] + kv * T * D;
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

static peat_status attn_bwd_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n_out,
                                const peat_tensor *exact_out, double *mag)
{
    (void)n_out, (void)exact_out;
    int64_t B = a->p.i[0], H = a->p.i[1], T = a->p.i[2], D = a->p.i[3], causal = a->p.i[4];
    double scale = a->p.f[0], K = (double)peat_op_info_get(a->op)->depth(&a->p);
    size_t TT = (size_t)(T * T);
    /* P, dS and the error bounds (/u) of P and dS for one head */
    double *P = malloc(TT * sizeof *P), *eP = malloc(TT * sizeof *eP);
    double *dS = malloc(TT * sizeof *dS), *eS = malloc(TT * sizeof *eS);
    /* dK, dV (o 1, 2) of a K/V head sum over its group's query heads: their terms gathered
     * here (acc: the sums of |terms|; val: dK's value) before the scale is applied */
    int64_t TD = T * D, Gn = H / kv_heads(&a->p), nkv = B * kv_heads(&a->p) * TD;
    double *accs = o ? calloc((size_t)(2 * nkv), sizeof *accs) : NULL;
    if (!P || !eP || !dS || !eS || (o && !accs)) {
        free(P), free(eP), free(dS), free(eS), free(accs);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "attention_bwd magnitude scratch");
    }
    double Tn = (double)(T * Gn); /* the terms of a dK or dV sum */
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t kv = kv_plane(&a->p, bh);
        const double *q = in->x[0] + bh * TD, *k = in->x[1] + kv * TD, *v = in->x[2] + kv * TD;
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
                    else if (o == 1) /* dK = scale sum over the group's u of dS_ut q_u */
                        acc += fabs(q[u * D + e]) * (eS[ut] + Tn * fabs(dS[ut])),
                            val += dS[ut] * q[u * D + e];
                    else /* dV = sum over the group's u of P_ut dO_u */
                        acc += fabs(dO[u * D + e]) * (eP[ut] + Tn * P[ut]);
                }
                if (o) {
                    accs[kv * TD + t * D + e] += acc, accs[nkv + kv * TD + t * D + e] += val;
                    continue;
                }
                /* dQ: then the scale's rounding and its product */
                mag[bh * TD + t * D + e] = (fabs(scale) * acc + 2.0 * fabs(scale * val)) / K;
            }
    }
    for (int64_t i = 0; o && i < nkv; i++) {
        double acc = accs[i], val = accs[nkv + i];
        /* dK: then the scale's rounding and its product */
        mag[i] = o == 2 ? acc / K : (fabs(scale) * acc + 2.0 * fabs(scale * val)) / K;
    }
    free(P), free(eP), free(dS), free(eS), free(accs);
    return PEAT_OK;
}

/* attention forward at other head dims (scale 1/sqrt(D)) */
static peat_status attention_dims(peat_probe_sink *s, const peat_record *rec, peat_rng_t *r)
{
    static const int64_t dims[] = {1, 3, 17, 65};
    char label[96];
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        if (dims[i] == rec->p.i[3]) continue;
        peat_op_params q = rec->p;
        q.i[3] = dims[i], q.f[0] = 1.0 / sqrt((double)dims[i]);
        int64_t n = q.i[0] * q.i[1] * q.i[2] * q.i[3];
        int64_t nkv = q.i[0] * kv_heads(&q) * q.i[2] * q.i[3], sz[3] = {n, nkv, nkv};
        snprintf(label, sizeof label, "shape head dim D=%lld (recorded %lld)", (long long)dims[i],
                 (long long)rec->p.i[3]);
        PEAT_TRY(peat_op_probe_fresh(s, rec, r, &q, sz, 3, label));
    }
    return PEAT_OK;
}

/* grouped-query attention with twice the query and K/V heads (the group size kept): where a
 * query head's K/V head is h / (H / Hkv) and not some other map of h (h mod Hkv is the same map
 * when Hkv = 1) */
static peat_status attention_heads(peat_probe_sink *s, const peat_record *rec, peat_rng_t *r)
{
    int64_t H = rec->p.i[1], Hkv = kv_heads(&rec->p);
    if (Hkv >= H) return PEAT_OK; /* no groups: the op as an ABI 4 kernel knows it */
    peat_op_params q = rec->p;
    q.i[1] = 2 * H, q.i[5] = 2 * Hkv;
    int64_t n = q.i[0] * q.i[1] * q.i[2] * q.i[3], nkv = q.i[0] * q.i[5] * q.i[2] * q.i[3];
    int64_t sz[3] = {n, nkv, nkv};
    char label[160];
    snprintf(label, sizeof label, "shape heads H=%lld Hkv=%lld (recorded %lld, %lld)",
             (long long)q.i[1], (long long)q.i[5], (long long)H, (long long)Hkv);
    return peat_op_probe_fresh(s, rec, r, &q, sz, 3, label);
}

/* sequence lengths; large scores (Q, K x12); other head dims; more heads (grouped-query) */
static peat_status attn_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    const peat_record *rec = recs->items[0];
    PEAT_TRY(peat_op_probe_row_counts(s, rec, 1));
    PEAT_TRY(peat_op_probe_from_record(s, rec, PEAT_PROBE_TAG_OVERFLOW,
                                       "value large scores (Q, K x12)", 0, 12.0, 0.0, 1));
    peat_rng_t *r = peat_rng_new(seed ^ 0x6f70732070726fbull);
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe rng");
    peat_status st = attention_dims(s, rec, r);
    if (st == PEAT_OK) st = attention_heads(s, rec, r);
    peat_rng_free(r);
    return st;
}

/* the batch x heads planes of every input and output */
static int attn_perm(const peat_args *a, peat_op_perm *out)
{
    /* with fewer K/V heads a query head moves with its K/V head's group: the batch entries
     * alone */
    int64_t Pn = kv_heads(&a->p) == P(1) ? P(0) * P(1) : P(0);
    if (Pn < 2) return 0; /* one plane: nothing to move */
    out->len[0] = Pn;
    for (int k = 0; k < a->n_in; k++) {
        out->in_mask |= 1u << k;
        out->in[k] = peat_op_view(Pn, 1, peat_tensor_numel(a->in[k]) / Pn, 0, -1, -1);
    }
    out->out = peat_op_view(Pn, 1, P(0) * P(1) * P(2) * P(3) / Pn, 0, -1, -1);
    return 1;
}

static void attn_cal(int n, int off, peat_op_params *p)
{
    peat_op_params_set(p, 5, (int64_t[]){1, 2, 2 + n / 2 + off, 8 + n / 8, 1});
    p->f[0] = 0.25;
}
/* Q K V (O L dO) */
static void attn_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                        peat_dtype dt[])
{
    const int64_t *i = p->i;
    int k = 0;
    for (int r = 0; r < 3; r++)
        peat_op_shape(nd, s, dt, &k, 4, i[0], r ? kv_heads(p) : i[1], i[2], i[3], PEAT_DTYPE_F32);
    *n_in = k;
}
static void attn_bwd_inputs(const peat_op_params *p, int *n_in, int nd[],
                            int64_t s[][PEAT_MAX_DIMS], peat_dtype dt[])
{
    const int64_t *i = p->i;
    attn_inputs(p, n_in, nd, s, dt);
    int k = *n_in;
    peat_op_shape(nd, s, dt, &k, 4, i[0], i[1], i[2], i[3], PEAT_DTYPE_F32);
    peat_op_shape(nd, s, dt, &k, 3, i[0], i[1], i[2], 0, PEAT_DTYPE_F32);
    peat_op_shape(nd, s, dt, &k, 4, i[0], i[1], i[2], i[3], PEAT_DTYPE_F32);
    *n_in = k;
}

/* query tiles over key tiles, QK^T and PV: 2 x 2 T T D flops per head */
static int attn_gemm_view(const peat_op_params *p, peat_op_gemm_view *v)
{
    const int64_t *i = p->i;
    v->scale = 1.0;
    v->batch = i[0] * i[1], v->m = i[2], v->n = i[2], v->k = 2 * i[3];
    v->scale = i[4] ? 0.5 : 1.0;
    return 1;
}

/* Q K V -> O; the row stats fp32 */
static void attn_amp(const peat_args *a, unsigned *in, unsigned *out)
{
    (void)a;
    *in = 0x7u, *out = 0x1u;
}
/* Q K V O dO -> dQ dK dV */
static void attn_bwd_amp(const peat_args *a, unsigned *in, unsigned *out)
{
    (void)a;
    *in = 0x2fu, *out = 0x7u;
}

const peat_op_desc peat_opd_attention = {
    .info = {PEAT_OP_ATTENTION, "attention", 3, 3, 2, 0, attn_check, attn_shapes, attn_depth,
             attn_flops},
    .magnitude = attn_mag,
    .terms = peat_op_terms_one,
    .probes = attn_probes,
    .range_low = 1u << 2,            /* V */
    .range_high = 1u << 0 | 1u << 1, /* Q and K: scores of 2^34 x D x scale */
    .perm = attn_perm,
    .integers = peat_op_integers_none,
    .invariant = peat_op_invariant_none,
    .cal_params = attn_cal,
    .input_shapes = attn_inputs,
    .positive_inputs = 0,
    .gemm_view = attn_gemm_view,
    .amp_masks = attn_amp,
    .aten = "_scaled_dot_product_flash_attention_for_cpu",
};

/* dQ, dK, dV are sums over keys or queries */
const peat_op_desc peat_opd_attention_bwd = {
    .info = {PEAT_OP_ATTENTION_BWD, "attention_bwd", 6, 6, 3, 1, attn_check, attn_shapes,
             attn_bwd_depth, attn_flops},
    .magnitude = attn_bwd_mag,
    .terms = peat_op_terms_depth,
    .probes = peat_op_probes_none,
    .range_low = 1u << 5, /* dO */
    .range_high = 1u << 5,
    .perm = attn_perm,
    .integers = peat_op_integers_none,
    .invariant = peat_op_invariant_none,
    .cal_params = attn_cal,
    .input_shapes = attn_bwd_inputs,
    .positive_inputs = 0,
    .gemm_view = attn_gemm_view,
    .amp_masks = attn_bwd_amp,
    .aten = "_scaled_dot_product_flash_attention_for_cpu_backward",
};
