/* experiment.c: the differential diagnosis's experiments, built from one call, and their
 * read-outs (analyzer/experiment.h). */
#include "analyzer/experiment.h"

#include "analyzer/analyzer.h"
#include "core/opdesc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define JITTER 0x1p-5 /* relative: 4 ulps of bf16, 64 of fp16: every such rounding redrawn */
#define SCALE_DOWN                                                                                 \
    -16 /* a probe past fp16's range (2^17) back to ordinary values; a NaN source stays */
#define SCALE_UP  32
#define INT_TERMS 64 /* nonzero terms per dot: sums stay below 2^8, exact in bf16 */

const char *peat_analyzer_exp_name(peat_exp_kind k)
{
    static const char *names[PEAT_EXP_COUNT] = {"jitter",      "small integers", "permutation",
                                                "scale 2^-16", "scale 2^+32",    "shape M+1",
                                                "shape N+1"};
    return (unsigned)k < PEAT_EXP_COUNT ? names[k] : "?";
}

void peat_analyzer_experiment_free(peat_experiment *e)
{
    for (int k = 0; k < e->args.n_in; k++) peat_tensor_free((peat_tensor *)e->args.in[k]);
    free(e->src);
    free(e->src2);
    memset(e, 0, sizeof *e);
}

static peat_status clone_inputs(const peat_args *base, peat_experiment *e)
{
    e->args.op = base->op, e->args.p = base->p;
    for (int k = 0; k < base->n_in; k++) {
        peat_tensor *t = NULL;
        PEAT_TRY(peat_tensor_clone(base->in[k], &t));
        e->args.in[k] = t, e->args.n_in = k + 1;
    }
    return PEAT_OK;
}

static void scale_inputs(peat_experiment *e, int pow2)
{
    for (int k = 0; k < e->args.n_in; k++) {
        peat_tensor *t = (peat_tensor *)e->args.in[k];
        if (t->dtype != PEAT_DTYPE_F32) continue;
        float *x = t->data;
        for (int64_t i = 0; i < peat_tensor_numel(t); i++) x[i] = ldexpf(x[i], pow2);
    }
}

static void jitter_inputs(peat_experiment *e, peat_rng_t *r)
{
    for (int k = 0; k < e->args.n_in; k++) {
        peat_tensor *t = (peat_tensor *)e->args.in[k];
        if (t->dtype != PEAT_DTYPE_F32) continue;
        float *x = t->data;
        for (int64_t i = 0; i < peat_tensor_numel(t); i++)
            x[i] *= (float)(1.0 + JITTER * (2.0 * peat_rng_uniform(r) - 1.0));
    }
}

/* ---- GEMM: small integers and one axis at a time ---- */

static int64_t rms_sign(const float *x, int64_t n, double *rms)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    *rms = n > 0 ? sqrt(s / (double)n) : 0.0;
    return n;
}

/* +-1 where |x| > rms / 2, else 0; A keeps only k = 0 mod stride (at most INT_TERMS per dot). */
static void integer_values(peat_tensor *t, int64_t rows, int64_t cols, int k_is_col, int64_t stride)
{
    float *x = t->data;
    double rms;
    int64_t n = rms_sign(x, peat_tensor_numel(t), &rms);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = k_is_col ? i % cols : i / cols % rows;
        float v = fabsf(x[i]) > 0.5 * rms ? (x[i] > 0 ? 1.0f : -1.0f) : 0.0f;
        x[i] = stride > 1 && k % stride ? 0.0f : v;
    }
}

static peat_status gemm_integers(const peat_args *base, peat_experiment *e)
{
    PEAT_TRY(clone_inputs(base, e));
    const int64_t *q = base->p.i;
    int tA = (int)q[0], tB = (int)q[1];
    int64_t M = q[2], N = q[3], K = q[4];
    int64_t stride = (K + INT_TERMS - 1) / INT_TERMS;
    /* A is [M x K] (K its columns) or transposed [K x M] (K its rows) */
    integer_values((peat_tensor *)e->args.in[0], tA ? K : M, tA ? M : K, !tA, stride);
    integer_values((peat_tensor *)e->args.in[1], tB ? N : K, tB ? K : N, 0, 1);
    if (e->args.n_in > 2) {
        peat_tensor *c = (peat_tensor *)e->args.in[2];
        float *x = c->data;
        for (int64_t i = 0; i < peat_tensor_numel(c); i++)
            x[i] = nearbyintf(fmaxf(-4, fminf(4, x[i])));
    }
    (void)N;
    return PEAT_OK;
}

/* ---- the other ops: their descriptor's small-integer form, judged output by output ---- */

static peat_status op_integers(const peat_args *base, peat_experiment *e)
{
    const peat_op_desc *d = peat_op_desc_get(base->op);
    if (!d || !d->integers) return PEAT_ERR_NOTFOUND;
    PEAT_TRY(clone_inputs(base, e));
    e->exact_mask = d->integers(&e->args);
    return e->exact_mask ? PEAT_OK : PEAT_ERR_NOTFOUND;
}

/* A [b][R][C] tensor grown to [b][R + dr][C + dc], new rows and columns copied cyclically. */
static peat_status grow(const peat_tensor *src, int64_t b, int64_t R, int64_t C, int64_t dr,
                        int64_t dc, peat_tensor **out)
{
    PEAT_TRY(peat_tensor_alloc3(PEAT_DTYPE_F32, b, R + dr, C + dc, out));
    const float *x = src->data;
    float *y = (*out)->data;
    for (int64_t p = 0; p < b; p++)
        for (int64_t r = 0; r < R + dr; r++)
            for (int64_t c = 0; c < C + dc; c++)
                y[(p * (R + dr) + r) * (C + dc) + c] = x[(p * R + r % R) * C + c % C];
    return PEAT_OK;
}

static peat_status gemm_shape(const peat_args *base, int grow_n, peat_experiment *e)
{
    const int64_t *q = base->p.i;
    int tA = (int)q[0], tB = (int)q[1];
    int64_t M = q[2], N = q[3], K = q[4], b = q[5] > 0 ? q[5] : 1;
    int64_t dm = !grow_n, dn = grow_n;
    e->args.op = base->op, e->args.p = base->p;
    e->args.p.i[2] = M + dm, e->args.p.i[3] = N + dn;
    peat_tensor *t = NULL;
    /* A: rows M (untransposed) or columns M (transposed); B: columns N or rows N */
    PEAT_TRY(grow(base->in[0], b, tA ? K : M, tA ? M : K, tA ? 0 : dm, tA ? dm : 0, &t));
    e->args.in[0] = t, e->args.n_in = 1;
    PEAT_TRY(grow(base->in[1], b, tB ? N : K, tB ? K : N, tB ? dn : 0, tB ? 0 : dn, &t));
    e->args.in[1] = t, e->args.n_in = 2;
    if (base->n_in > 2) {
        PEAT_TRY(grow(base->in[2], b, M, N, dm, dn, &t));
        e->args.in[2] = t, e->args.n_in = 3;
    }
    return PEAT_OK;
}

/* ---- permutations ---- */

static int64_t *perm_draw(peat_rng_t *r, int64_t n)
{
    int64_t *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    if (!p) return NULL;
    for (int64_t i = 0; i < n; i++) p[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)peat_rng_int(r, (uint64_t)i + 1), t = p[i];
        p[i] = p[j], p[j] = t;
    }
    /* never the identity: swap the first two if the draw left everything in place */
    int64_t fixed = 0;
    for (int64_t i = 0; i < n; i++) fixed += p[i] == i;
    if (n > 1 && fixed == n) p[0] = 1, p[1] = 0;
    return p;
}

/* The view [P][R][C] of a tensor, permuted: y[p][r][c] = x[pp[p]][pr[r]][pc[c]] (NULL: identity),
 * in place of input k; any element size. */
typedef struct view3 {
    int64_t P, R, C;
    const int64_t *pp, *pr, *pc;
} view3;

static int64_t view_src(const view3 *v, int64_t i)
{
    int64_t c = i % v->C, r = i / v->C % v->R, p = i / (v->C * v->R);
    return ((v->pp ? v->pp[p] : p) * v->R + (v->pr ? v->pr[r] : r)) * v->C + (v->pc ? v->pc[c] : c);
}

static peat_status permute_input(peat_experiment *e, int k, view3 v)
{
    peat_tensor *t = (peat_tensor *)e->args.in[k];
    int64_t n = peat_tensor_numel(t);
    if (n != v.P * v.R * v.C)
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "permutation view of input %d", k);
    size_t es = peat_dtype_size(t->dtype);
    char *copy = malloc((size_t)n * es);
    if (!copy) return PEAT_ERROR(PEAT_ERR_NOMEM, "permutation");
    memcpy(copy, t->data, (size_t)n * es);
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)t->data + i * es, copy + view_src(&v, i) * es, es);
    free(copy);
    return PEAT_OK;
}

static peat_status set_src(int64_t **src, int64_t *n_src, view3 v)
{
    *n_src = v.P * v.R * v.C;
    *src = malloc((size_t)(*n_src > 0 ? *n_src : 1) * sizeof **src);
    if (!*src) return PEAT_ERROR(PEAT_ERR_NOMEM, "permutation map");
    for (int64_t i = 0; i < *n_src; i++) (*src)[i] = view_src(&v, i);
    return PEAT_OK;
}

static view3 v3(int64_t P, int64_t R, int64_t C, const int64_t *pp, const int64_t *pr,
                const int64_t *pc)
{
    view3 v = {P, R, C, pp, pr, pc};
    return v;
}

/* Permutations of n[0], n[1], n[2] elements (n 0 or 1: none, NULL). */
typedef struct perms {
    int64_t *p[3];
} perms;

static void perms_free(perms *q)
{
    for (int k = 0; k < 3; k++) free(q->p[k]);
}

/* A descriptor's view of one tensor, with the drawn permutations in place of their indices. */
static view3 view_of(const peat_op_perm_view *v, const perms *q)
{
    return v3(v->P, v->R, v->C, v->ap >= 0 ? q->p[v->ap] : NULL, v->ar >= 0 ? q->p[v->ar] : NULL,
              v->ac >= 0 ? q->p[v->ac] : NULL);
}

/* A permutation of n indices that moves pairs whole: pair j of the draw's n / 2 goes where pair
 * h[j] was, its two members in order (adjacent: 2j + e; halves: j + e n/2). */
static int64_t *pairs_draw(peat_rng_t *r, int64_t n, int mode)
{
    int64_t h = n / 2, *ph = perm_draw(r, h), *p = ph ? malloc((size_t)n * sizeof *p) : NULL;
    if (!p) {
        free(ph);
        return NULL;
    }
    for (int64_t j = 0; j < h; j++)
        for (int64_t e = 0; e < 2; e++) {
            if (mode == PEAT_PERM_PAIRS_ADJACENT)
                p[2 * j + e] = 2 * ph[j] + e;
            else
                p[j + e * h] = ph[j] + e * h;
        }
    free(ph);
    return p;
}

static peat_status perms_draw(peat_rng_t *r, const peat_op_perm *pm, perms *q)
{
    memset(q, 0, sizeof *q);
    for (int k = 0; k < 3; k++) {
        int64_t n = pm->len[k];
        int rev = pm->pairs[k] == PEAT_PERM_REVERSE;
        int pairs = !rev && pm->pairs[k] && n % 2 == 0;
        if (pairs ? n < 4 : n < 2) continue;
        if (rev && (q->p[k] = malloc((size_t)n * sizeof *q->p[k])))
            for (int64_t i = 0; i < n; i++) q->p[k][i] = n - 1 - i;
        else if (!rev)
            q->p[k] = pairs ? pairs_draw(r, n, pm->pairs[k]) : perm_draw(r, n);
        if (!q->p[k]) {
            perms_free(q);
            return PEAT_ERROR(PEAT_ERR_NOMEM, "permutation");
        }
    }
    return PEAT_OK;
}

/* The permutation experiment of an op whose outputs follow its inputs' rows, columns, planes
 * or elements, as its descriptor lays them out (core/ops/<op>.c); PEAT_ERR_NOTFOUND for the
 * others (embedding, conv backward-filter). */
static peat_status permute(const peat_args *a, peat_rng_t *r, peat_experiment *e)
{
    const peat_op_desc *d = peat_op_desc_get(a->op);
    peat_op_perm pm;
    memset(&pm, 0, sizeof pm);
    if (!d || !d->perm(a, &pm)) return PEAT_ERR_NOTFOUND;
    perms P;
    PEAT_TRY(perms_draw(r, &pm, &P));
    peat_status st = clone_inputs(a, e);
    for (int k = 0; k < a->n_in && st == PEAT_OK; k++)
        if (pm.in_mask >> k & 1u) st = permute_input(e, k, view_of(&pm.in[k], &P));
    if (st == PEAT_OK) st = set_src(&e->src, &e->n_src, view_of(&pm.out, &P));
    if (st == PEAT_OK && pm.out2.P * pm.out2.R * pm.out2.C > 0)
        st = set_src(&e->src2, &e->n_src2, view_of(&pm.out2, &P));
    perms_free(&P);
    return st;
}

peat_status peat_analyzer_experiment_make(const peat_args *base, peat_exp_kind kind, uint64_t seed,
                                          peat_experiment *out)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    int gemm = base->op == PEAT_OP_GEMM;
    peat_status st = PEAT_OK;
    peat_rng_t *r = NULL;
    switch (kind) {
    case PEAT_EXP_JITTER:
        r = peat_rng_new(seed ^ 0x6a6974746572ull);
        st = r ? clone_inputs(base, out) : PEAT_ERROR(PEAT_ERR_NOMEM, "experiment rng");
        if (st == PEAT_OK) jitter_inputs(out, r);
        break;
    case PEAT_EXP_INTEGERS:
        st = gemm ? gemm_integers(base, out) : op_integers(base, out);
        break;
    case PEAT_EXP_PERMUTE:
        r = peat_rng_new(seed ^ 0x7065726dull);
        st = r ? permute(base, r, out) : PEAT_ERROR(PEAT_ERR_NOMEM, "experiment rng");
        break;
    case PEAT_EXP_SCALE_DOWN:
    case PEAT_EXP_SCALE_UP:
        st = clone_inputs(base, out);
        if (st == PEAT_OK) scale_inputs(out, kind == PEAT_EXP_SCALE_DOWN ? SCALE_DOWN : SCALE_UP);
        break;
    case PEAT_EXP_SHAPE_M:
    case PEAT_EXP_SHAPE_N:
        st = gemm ? gemm_shape(base, kind == PEAT_EXP_SHAPE_N, out) : PEAT_ERR_NOTFOUND;
        break;
    default:
        st = PEAT_ERR_NOTFOUND;
    }
    peat_rng_free(r);
    if (st != PEAT_OK) {
        out->args.op = base->op;
        peat_analyzer_experiment_free(out);
        out->kind = kind;
    }
    return st;
}

/* ---- read-outs ---- */

void peat_analyzer_exp_errors(const peat_tensor *test, const peat_tensor *exact, const double *mag,
                              int64_t depth, double *out)
{
    const float *t = test->data;
    const double *x = exact->data;
    for (int64_t i = 0; i < peat_tensor_numel(test); i++) {
        if (!isfinite(x[i])) {
            out[i] = 0.0;
            continue;
        }
        if (!isfinite(t[i])) {
            out[i] = NAN;
            continue;
        }
        double m = mag ? mag[i] : fabs(x[i]);
        out[i] = ((double)t[i] - x[i]) / peat_analyzer_bound(m, depth);
    }
}

static double squash(double x)
{
    return copysign(log1p(fabs(x)), x);
}

double peat_analyzer_exp_corr(const double *b, const double *e, const int64_t *src, int64_t n,
                              double thresh)
{
    double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        double y = e[i], x = b[src ? src[i] : i];
        if (isnan(x) || isnan(y) || (fabs(x) <= thresh && fabs(y) <= thresh)) continue;
        x = squash(x), y = squash(y);
        sx += x, sy += y, sxx += x * x, syy += y * y, sxy += x * y, m++;
    }
    if (m < 8) return NAN;
    double cxx = sxx - sx * sx / (double)m, cyy = syy - sy * sy / (double)m,
           cxy = sxy - sx * sy / (double)m;
    return cxx > 0 && cyy > 0 ? cxy / sqrt(cxx * cyy) : NAN;
}

static int is_gross(double x)
{
    return isnan(x) || fabs(x) > PEAT_GROSS_FACTOR;
}

double peat_analyzer_exp_overlap(const double *b, const double *e, const int64_t *src, int64_t n)
{
    int64_t both = 0, any = 0;
    for (int64_t i = 0; i < n; i++) {
        int gb = is_gross(b[src ? src[i] : i]), ge = is_gross(e[i]);
        both += gb && ge, any += gb || ge;
    }
    return any > 0 ? (double)both / (double)any : NAN;
}
