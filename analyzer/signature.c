/* signature.c: turns an accumulator into a fixed-schema signature (quantiles from sketches, ranks
 * from the sample). */
#include "analyzer/internal.h"

#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The estimator's offset c (docs/signature.md derives it): the rms relative error of rounding to
 * p bits is s1 u_p with s1 = 1/sqrt(8 ln 2); a GEMM whose operands are both rounded reads
 * sqrt(2) (pi/2) s1 u_p, an output rounded once reads s1 u_p; c centres the two readings on p. */
static double eff_bits_offset(void)
{
    double s1 = 1.0 / sqrt(8.0 * log(2.0));
    return log2(s1) + 0.5 * log2(3.14159265358979323846 / sqrt(2.0));
}

double peat_analyzer_eff_bits(double rms_rel_mag)
{
    if (isnan(rms_rel_mag)) return NAN;
    if (rms_rel_mag <= 0.0) return 53.0; /* no measurable error: as exact as the fp64 reference */
    double b = -log2(rms_rel_mag) + eff_bits_offset();
    return b > 53.0 ? 53.0 : b < 0.0 ? 0.0 : b;
}

/* Merged per-thread sketches (integer counts: the same sum in any order); where one thread did
 * all the work, its own sketches (norm, rel point at them, nothing is copied). */
typedef struct sketches {
    peat_sketch merged_norm, merged_rel;
    const peat_sketch *norm, *rel;
} sketches;

static peat_status sketches_merge(const peat_analyzer_acc_t *acc, sketches *m)
{
    memset(m, 0, sizeof *m);
    int used = 0, last = 0;
    for (int t = 0; t < PEAT_ANALYZER_MAX_THREADS; t++)
        if (acc->w[t]) used++, last = t;
    if (used == 1) {
        m->norm = &acc->w[last]->norm, m->rel = &acc->w[last]->rel;
        return PEAT_OK;
    }
    PEAT_TRY(peat_analyzer_sketch_init(&m->merged_norm));
    peat_status st = peat_analyzer_sketch_init(&m->merged_rel);
    for (int t = 0; st == PEAT_OK && t < PEAT_ANALYZER_MAX_THREADS; t++) {
        if (!acc->w[t]) continue;
        peat_analyzer_sketch_merge(&m->merged_norm, &acc->w[t]->norm);
        peat_analyzer_sketch_merge(&m->merged_rel, &acc->w[t]->rel);
    }
    m->norm = &m->merged_norm, m->rel = &m->merged_rel;
    return st;
}

static void sketches_free(sketches *m)
{
    peat_analyzer_sketch_free(&m->merged_norm);
    peat_analyzer_sketch_free(&m->merged_rel);
}

/* Quantiles from the sketches: within 2^-7 relative of the exact ones over all elements. */
static void quantiles(const peat_analyzer_acc_t *acc, const sketches *m, peat_signature *s)
{
    const peat_sketch *q = m->norm;
    if (q->n > 0) {
        s->p50_norm = peat_analyzer_sketch_quantile(q, 0.5);
        s->p99_norm = peat_analyzer_sketch_quantile(q, 0.99);
        /* top 1% (at least one element) of the squared normalised errors */
        double tot = acc->tot.sumsq_norm, hi = peat_analyzer_sketch_top_sumsq(q, (q->n + 99) / 100);
        s->top1pct_share = tot > 0.0 ? (hi < tot ? hi / tot : 1.0) : 0.0;
    }
    if (m->rel->n > 0) s->median_rel = peat_analyzer_sketch_quantile(m->rel, 0.5);
}

/* Scratch of the rank statistics for a sample of m of a set of n entries (n >= m), allocated once
 * per signature (one allocation, so its pages fault in once and huge pages can serve it): the
 * sample's columns and priorities (only a and d in a lean take, whose other columns are the
 * other side's of a pair), two more columns, a permutation and the sorts' words. Every byte is
 * written before it is read, and on a virtual machine a first write to fresh memory costs about as
 * much as the work on it, so it is kept small: ranks overwrite their columns, and a key's copy and
 * priorities give way to r and the steps once the key's order is known. */
typedef struct rank_ws {
    double *cols;   /* 5 m (2 m lean): the sample's columns */
    uint64_t *prio; /* m (none lean): their priorities */
    double *col;    /* 2 m: a key's filtered copy, then r, and the steps */
    uint64_t *tie;  /* the second m of col, while a key is sorted: its elements' priorities */
    uint64_t *sort; /* max(n, 2 m): the take's copy of the priorities, then a sort's words and
                       radix scratch, or a median's keys */
    uint32_t *perm; /* m */
    size_t bytes;   /* of the one allocation */
} rank_ws;

static peat_status rank_ws_alloc(rank_ws *ws, size_t n, size_t m, int lean)
{
    size_t sort = n > 2 * m ? n : 2 * m, cols = lean ? 2 * m : 6 * m;
    ws->bytes = (cols + 2 * m + sort) * sizeof(double) + m * sizeof *ws->perm;
    void *mem = peat_analyzer_big_new(ws->bytes);
    if (!mem) return PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer: rank statistics of %zu", n);
    ws->cols = mem;
    ws->prio = lean ? NULL : (uint64_t *)(ws->cols + 5 * m);
    ws->col = ws->cols + cols;
    ws->tie = (uint64_t *)(ws->col + m);
    ws->sort = (uint64_t *)(ws->col + 2 * m);
    ws->perm = (uint32_t *)(ws->sort + sort);
    return PEAT_OK;
}

/* Ranks of v[0..n) (1-based, ties get their mean rank), in place. */
static void ranks_in_place(double *v, size_t n, rank_ws *ws)
{
    peat_analyzer_sample_ranks(v, n, v, ws->sort);
}

/* Pearson correlation of x and y (two passes); NaN when either is constant. */
static double pearson(const double *x, const double *y, size_t n)
{
    double mx = 0.0, my = 0.0, sxx = 0.0, syy = 0.0, sxy = 0.0;
    for (size_t i = 0; i < n; i++) mx += x[i], my += y[i];
    mx /= (double)n, my /= (double)n;
    for (size_t i = 0; i < n; i++) {
        double dx = x[i] - mx, dy = y[i] - my;
        sxx += dx * dx, syy += dy * dy, sxy += dx * dy;
    }
    return sxx > 0.0 && syy > 0.0 ? sxy / sqrt(sxx * syy) : NAN;
}

/* The elements the input correlation uses are those whose a and b are defined, and a and b are
 * undefined together (NaN where the element's scale is below FLT_MIN;
 * peat_analyzer_sample_cols_take): keeps a column's defined values, in order, in place; returns
 * their number. */
static size_t corr_compact(double *col, size_t m)
{
    size_t n = 0;
    for (size_t i = 0; i < m; i++) {
        col[n] = col[i];
        n += !isnan(col[i]);
    }
    return n;
}

/* Spearman rho of |err|/s against |exact|/s: near 0 when the error does not scale with the value
 * (errors of rounded inputs), clearly positive when it does (relative noise, rounded outputs).
 * The columns a and b are replaced by their ranks. */
static void input_correlation(peat_sample_cols *v, rank_ws *ws, peat_signature *s)
{
    s->corr_err_input = NAN;
    size_t n = corr_compact(v->a, v->n);
    corr_compact(v->b, v->n);
    if (n < 16) return;
    ranks_in_place(v->a, n, ws);
    ranks_in_place(v->b, n, ws);
    s->corr_err_input = pearson(v->a, v->b, n);
}

/* Median successive difference of r taken in key order (perm), and the sign changes per step;
 * w is scratch of n. */
static void steps_of(const double *r, const uint32_t *perm, size_t n, double *w, rank_ws *ws,
                     double *mdiff, double *changes)
{
    size_t flips = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        double a = r[perm[i]], b = r[perm[i + 1]];
        w[i] = fabs(b - a);
        if ((a < 0.0 && b > 0.0) || (a > 0.0 && b < 0.0)) flips++;
    }
    *mdiff = peat_analyzer_sample_median(w, n - 1, ws->sort);
    *changes = (double)flips / (double)(n - 1);
}

/* The scale a roughness is measured against (w is scratch of n): the spread sqrt(2) MAD(r), or
 * the level |median r| when that is larger. A relative error that is one constant up to rounding
 * (a wrong factor: its steps are fp32 rounding, so is its spread) is then as smooth as it is:
 * steps tiny beside the error itself. Unbiased errors (noise, rounding) have a level near 0 and
 * keep their reading; a one-sided uniform one (truncation) drops by at most 1/sqrt(2). */
static double spread_of(const double *r, size_t n, double *w, rank_ws *ws)
{
    double med = peat_analyzer_sample_median(r, n, ws->sort);
    for (size_t i = 0; i < n; i++) w[i] = fabs(r[i] - med);
    return fmax(sqrt(2.0) * peat_analyzer_sample_median(w, n, ws->sort), fabs(med));
}

/* The elements a roughness uses along one key (exact != 0, and an input for the input key): the
 * key into key, r = err / exact into r and the priority into tie (any may be NULL); returns their
 * number. The input key keeps a subset of the exact key's elements, in the same order, so the
 * same count means the same r. */
static size_t rough_filter(const peat_sample_cols *v, int use_input, double *key, double *r,
                           uint64_t *tie)
{
    size_t n = 0;
    for (size_t i = 0; i < v->n; i++) {
        if (v->x[i] == 0.0 || (use_input && isnan(v->key[i]))) continue;
        if (key) key[n] = use_input ? v->key[i] : v->x[i];
        if (r) r[n] = v->d[i] / v->x[i];
        if (tie) tie[n] = v->prio[i];
        n++;
    }
    return n;
}

/* A key's roughness and sign changes from r (n elements) in key order perm; w is scratch of n.
 * *spread and *spread_n carry sqrt(2) MAD(r) between the two keys. */
static void rough_finish(const double *r, const uint32_t *perm, size_t n, double *w, rank_ws *ws,
                         double *spread, size_t *spread_n, double *rough, double *changes)
{
    double mdiff;
    steps_of(r, perm, n, w, ws, &mdiff, changes);
    if (*spread_n != n) *spread = spread_of(r, n, w, ws), *spread_n = n;
    if (*spread > 0.0)
        *rough = mdiff / *spread;
    else if (mdiff == 0.0)
        *rough = 0.0;
}

/* Roughness of the signed relative error r = err / exact along one key (input or exact value):
 * median |r[i+1] - r[i]| / (sqrt(2) MAD(r)) in key order. Independent errors give ~1 (the
 * difference of two independent draws spreads sqrt(2) wider); a smooth function of the key gives
 * ~0. The relative error cancels a factor the approximation multiplies (dY in a backward op);
 * medians keep the few elements whose relative error is noise (cancellation in a tail) from
 * deciding. Also returns the sign changes per step. One radix sort by the key. */
static void roughness_along(const peat_sample_cols *v, int use_input, rank_ws *ws, double *spread,
                            size_t *spread_n, double *rough, double *changes)
{
    *rough = *changes = NAN;
    double *key = ws->col, *r = key, *w = key + v->n; /* r and the steps once the order is known */
    size_t n = rough_filter(v, use_input, key, NULL, ws->tie);
    if (n < 16) return;
    peat_analyzer_sample_argsort(key, ws->tie, n, ws->perm, ws->sort);
    rough_filter(v, use_input, NULL, r, NULL);
    rough_finish(r, ws->perm, n, w, ws, spread, spread_n, rough, changes);
}

/* The smoother of the two keys' readings counts (an approximation is a function of one of them,
 * noise of neither). */
static void smoother(peat_signature *s, double r1, double c1, double r2, double c2)
{
    s->err_roughness = r1;
    s->err_sign_changes = c1;
    if (!isnan(r2) && (isnan(r1) || r2 < r1)) {
        s->err_roughness = r2;
        s->err_sign_changes = c2;
    }
}

/* Smoothness along the input when one was given and along the exact value. */
static void smoothness(const peat_sample_cols *v, rank_ws *ws, peat_signature *s)
{
    double r1, c1, r2, c2, spread = NAN;
    size_t spread_n = 0;
    roughness_along(v, 0, ws, &spread, &spread_n, &r1, &c1);
    roughness_along(v, 1, ws, &spread, &spread_n, &r2, &c2);
    smoother(s, r1, c1, r2, c2);
}

static double frac(int64_t a, int64_t b)
{
    return b > 0 ? (double)a / (double)b : 0.0;
}

/* Counts, moments and extremes of the streamed pass. */
static void moments(const peat_partial *p, peat_signature *s)
{
    s->n_elems = p->n_elems;
    s->n_exact_zero = p->n_exact_zero;
    s->n_nan = p->n_nan;
    s->n_inf = p->n_inf;
    s->n_equal_rounded = p->n_equal_rounded;
    s->n_nonzero_err = p->n_nonzero_err;
    s->test_hash = p->hash;
    double nf = (double)p->n_fin;
    s->max_abs_exact = p->max_abs_exact;
    s->rms_exact = p->n_fin ? sqrt(p->sumsq_exact / nf) : NAN;
    s->max_abs = p->max_abs;
    s->mean_abs = p->n_fin ? p->sum_abs / nf : NAN;
    s->rms_abs = p->n_fin ? sqrt(p->sumsq_abs / nf) : NAN;
    s->max_rel = p->max_rel;
    s->mean_rel = p->n_rel ? p->sum_rel / (double)p->n_rel : NAN;
    s->max_norm = p->max_norm;
    s->mean_norm = p->n_fin ? p->sum_norm / nf : NAN;
    s->n_over_bound = p->n_over_bound;
    s->frac_over_bound = frac(p->n_over_bound, p->n_elems);
    s->rms_rel_mag = p->n_relmag ? sqrt(p->sumsq_relmag / (double)p->n_relmag) : NAN;
    s->eff_bits = peat_analyzer_eff_bits(s->rms_rel_mag);
    s->bias_t = NAN;
    if (p->n_bias >= 2) {
        double sd = sqrt(p->bias_m2 / (double)(p->n_bias - 1));
        if (sd > 0.0) s->bias_t = p->bias_mean / (sd / sqrt((double)p->n_bias));
    }
    s->frac_err_negative = p->n_err_signed ? frac(p->n_toward_zero, p->n_err_signed) : NAN;
}

/* ULP and bit histograms, and where in the range errors sit. */
static void bits_and_range(const peat_partial *p, peat_signature *s)
{
    for (int b = 0; b < PEAT_ULP_BINS; b++) s->ulp_hist[b] = frac(p->ulp_count[b], p->n_ulp);
    s->max_ulp = p->max_ulp;
    for (int b = 0; b < PEAT_BIT_POSITIONS; b++) {
        s->bit_set[b] = frac(p->bit_set[b], p->n_bits);
        s->bit_clr[b] = frac(p->bit_clr[b], p->n_bits);
        s->bit_hist[b] = s->bit_set[b] + s->bit_clr[b];
    }
    s->test_mant_bits = p->test_mant_bits;
    s->n_err_subnormal_exact = p->n_err_subnormal_exact;
    s->min_exact_at_inf = p->min_exact_at_inf;
    s->max_exact_finite = p->max_exact_finite;
    s->n_zero_introduced = p->n_zero_introduced;
    s->max_exact_at_zero = p->max_exact_at_zero;
    s->min_exact_nonzero = p->min_exact_nonzero;
}

/* Gross errors: bit pattern, lane stride and spatial box. */
static void gross(const peat_analyzer_acc_t *acc, peat_signature *s)
{
    const peat_partial *p = &acc->tot;
    s->n_gross = p->n_gross;
    s->gross_single_bit = p->n_gross ? frac(p->n_gross_single, p->n_gross) : NAN;
    for (int b = 0; b < PEAT_BIT_POSITIONS; b++)
        s->gross_bit[b] = frac(p->gross_bit[b], p->n_gross_single);
    s->gross_dir_set = p->n_gross_single ? frac(p->n_gross_set, p->n_gross_single) : NAN;
    s->gross_stride = acc->gross_stride;
    s->box_fill = acc->box_area_sum ? frac(acc->box_gross_sum, acc->box_area_sum) : NAN;
    s->box_share = acc->box_numel_sum ? frac(acc->box_area_sum, acc->box_numel_sum) : NAN;
    s->box_rows = acc->box_rows;
    s->box_cols = acc->box_cols;
    s->box_tensor_rows = acc->box_tensor_rows;
    s->box_tensor_cols = acc->box_tensor_cols;
    s->box_at_bottom = acc->box_at_bottom;
    s->box_at_right = acc->box_at_right;
    s->frac_err_in_last_tile =
        acc->box_gross_sum ? frac(acc->gross_at_edge, acc->box_gross_sum) : NAN;
}

/* Quantiles from the merged sketches. */
static peat_status distribution(const peat_analyzer_acc_t *acc, peat_signature *s)
{
    sketches sk;
    peat_status st = sketches_merge(acc, &sk);
    if (st == PEAT_OK) quantiles(acc, &sk, s);
    sketches_free(&sk);
    return st;
}

/* Everything but the rank statistics. */
static peat_status signature_head(const peat_analyzer_acc_t *acc, peat_signature *s)
{
    if (!acc || !s) return PEAT_ERROR(PEAT_ERR_INVAL, "analyzer: NULL accumulator or signature");
    memset(s, 0, sizeof *s);
    s->version = PEAT_SIGNATURE_VERSION;
    snprintf(s->kernel, sizeof s->kernel, "%s", acc->kernel);
    snprintf(s->op, sizeof s->op, "%s", peat_op_name(acc->op));
    s->n_calls = acc->n_calls;
    s->depth_max = acc->depth_max;
    s->median_rel = s->p50_norm = s->p99_norm = s->top1pct_share = NAN;
    s->corr_err_input = s->err_roughness = s->err_sign_changes = NAN;
    moments(&acc->tot, s);
    bits_and_range(&acc->tot, s);
    gross(acc, s);
    s->repeat_max_diff = acc->repeat_max_diff;
    s->repeat_n_diff = acc->repeat_n_diff;
    s->gross_tensors = acc->gross_tensors;
    s->gross_tensors_many = acc->gross_tensors_many;
    s->repeat_calls = acc->repeat_calls;
    s->repeat_calls_diff = acc->repeat_calls_diff;
    s->repeat_calls_many = acc->repeat_calls_many;
    return distribution(acc, s);
}

/* The sample's k entries of smallest priority copied into columns in ws (the accumulator stays
 * open for more adds); lean: only a and d. */
static peat_status sample_take(const peat_analyzer_acc_t *acc, rank_ws *ws, peat_sample_cols *v,
                               int lean)
{
    size_t n = (size_t)acc->smp.n, k = (size_t)acc->smp.k, m = n < k ? n : k;
    PEAT_TRY(rank_ws_alloc(ws, n, m, lean));
    peat_analyzer_sample_cols_take(&acc->smp, ws->cols, ws->prio, ws->sort, v);
    return PEAT_OK;
}

peat_status peat_analyzer_signature(const peat_analyzer_acc_t *acc, peat_signature *s)
{
    PEAT_TRY(signature_head(acc, s));
    rank_ws ws = {0};
    peat_sample_cols v;
    PEAT_TRY(sample_take(acc, &ws, &v, 0));
    input_correlation(&v, &ws, s);
    smoothness(&v, &ws, s);
    peat_analyzer_big_free(ws.cols, ws.bytes);
    return PEAT_OK;
}

/* ---- a candidate's and the golden's signatures together --------------------------------------
 */

typedef struct pair_side {
    const peat_analyzer_acc_t *acc;
    peat_signature *s;
    rank_ws ws;
    peat_sample_cols v;
    peat_status st;
    char why[256]; /* the error message, which is per thread */
} pair_side;

/* What the two sides share when their samples hold the same elements (same): side 0's columns
 * but a and d, the ranks of |exact|/s (side 0's b) and the orders of the exact and input keys. */
typedef struct pair_ctx {
    pair_side side[2];
    int same;
    size_t n_corr, n_x, n_in;
    uint32_t *perm_x, *perm_in; /* side 1's and side 0's own permutations, which sort them */
} pair_ctx;

/* Runs fn for side 0 on the calling thread and for side 1 on another (or after it, if no thread
 * can be had). */
typedef struct pair_run {
    void (*fn)(pair_ctx *, int);
    pair_ctx *ctx;
} pair_run;

static void *pair_thread(void *arg)
{
    pair_run *r = arg;
    r->fn(r->ctx, 1);
    return NULL;
}

static void pair_both(pair_ctx *c, void (*fn)(pair_ctx *, int))
{
    pair_run r = {fn, c};
    pthread_t tid;
    int threaded = pthread_create(&tid, NULL, pair_thread, &r) == 0;
    fn(c, 0);
    if (threaded)
        pthread_join(tid, NULL);
    else
        fn(c, 1);
}

/* The two sets hold the same entries in the same order with the same priorities, scales, inputs
 * and exact values (only the errors differ): then their samples are the same elements, and every
 * column but a and d is the same. */
static int sets_same(const peat_sample_set *x, const peat_sample_set *y)
{
    size_t n = (size_t)x->n;
    if (y->n != x->n || y->k != x->k) return 0;
    if (n == 0) return 1; /* two empty sets (their arrays may be NULL) */
    if (memcmp(x->prio, y->prio, n * sizeof *x->prio)) return 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&x->v[i], &y->v[i], offsetof(peat_sample_val, d))) return 0;
    return 1;
}

/* Each side's head and take; side 1 takes only a and d where the sets are the same (it borrows
 * side 0's other columns after the take). */
static void phase_take(pair_ctx *c, int k)
{
    pair_side *p = &c->side[k];
    p->st = signature_head(p->acc, p->s);
    if (k == 1 && p->st == PEAT_OK && c->side[0].acc)
        c->same = sets_same(&c->side[0].acc->smp, &p->acc->smp);
    if (p->st == PEAT_OK) p->st = sample_take(p->acc, &p->ws, &p->v, k == 1 && c->same);
    if (p->st != PEAT_OK) snprintf(p->why, sizeof p->why, "%s", peat_error_last());
}

static void phase_alone(pair_ctx *c, int k)
{
    pair_side *p = &c->side[k];
    input_correlation(&p->v, &p->ws, p->s);
    smoothness(&p->v, &p->ws, p->s);
}

/* The sorts: each side ranks its own |err|/s; side 0 also ranks |exact|/s and orders the input
 * key, side 1 orders the exact key (three and two sorts). Ranks replace their columns. */
static void phase_sort(pair_ctx *c, int k)
{
    pair_side *p = &c->side[k];
    size_t m = p->v.n;
    double *key = p->ws.col;
    if (c->n_corr >= 16) {
        corr_compact(p->v.a, m);
        ranks_in_place(p->v.a, c->n_corr, &p->ws);
    }
    if (k == 0) {
        if (c->n_corr >= 16) {
            corr_compact(p->v.b, m);
            ranks_in_place(p->v.b, c->n_corr, &p->ws);
        }
        if (c->n_in >= 16) {
            rough_filter(&p->v, 1, key, NULL, p->ws.tie);
            peat_analyzer_sample_argsort(key, p->ws.tie, c->n_in, c->perm_in, p->ws.sort);
        }
    } else if (c->n_x >= 16) {
        rough_filter(&p->v, 0, key, NULL, p->ws.tie);
        peat_analyzer_sample_argsort(key, p->ws.tie, c->n_x, c->perm_x, p->ws.sort);
    }
}

/* Each side's statistics from the shared orders. */
static void phase_finish(pair_ctx *c, int k)
{
    pair_side *p = &c->side[k];
    size_t m = p->v.n;
    double *r = p->ws.col, *w = r + m;
    if (c->n_corr >= 16) p->s->corr_err_input = pearson(p->v.a, c->side[0].v.b, c->n_corr);
    double r1 = NAN, c1 = NAN, r2 = NAN, c2 = NAN, spread = NAN;
    size_t spread_n = 0;
    if (c->n_x >= 16) {
        rough_filter(&p->v, 0, NULL, r, NULL);
        rough_finish(r, c->perm_x, c->n_x, w, &p->ws, &spread, &spread_n, &r1, &c1);
    }
    if (c->n_in >= 16) {
        if (c->n_in != c->n_x) rough_filter(&p->v, 1, NULL, r, NULL);
        rough_finish(r, c->perm_in, c->n_in, w, &p->ws, &spread, &spread_n, &r2, &c2);
    }
    smoother(p->s, r1, c1, r2, c2);
}

/* The defined a of a sample (peat_analyzer_sample_cols_take: NaN where the scale is undefined). */
static size_t corr_count(const peat_sample_cols *v)
{
    size_t n = 0;
    for (size_t i = 0; i < v->n; i++) n += !isnan(v->a[i]);
    return n;
}

static void pair_shared(pair_ctx *c)
{
    peat_sample_cols *v = &c->side[0].v, *w = &c->side[1].v;
    w->b = v->b, w->key = v->key, w->x = v->x, w->prio = v->prio; /* side 1's lean take */
    c->n_corr = corr_count(v);
    c->n_x = rough_filter(v, 0, NULL, NULL, NULL);
    c->n_in = rough_filter(v, 1, NULL, NULL, NULL);
    c->perm_x = c->side[1].ws.perm, c->perm_in = c->side[0].ws.perm;
    pair_both(c, phase_sort);
    pair_both(c, phase_finish);
}

peat_status peat_analyzer_signature_pair(const peat_analyzer_acc_t *a, peat_signature *sa,
                                         const peat_analyzer_acc_t *b, peat_signature *sb)
{
    pair_ctx c;
    memset(&c, 0, sizeof c);
    c.side[0].acc = a, c.side[0].s = sa;
    c.side[1].acc = b, c.side[1].s = sb;
    pair_both(&c, phase_take);
    peat_status st = PEAT_OK;
    for (int k = 0; k < 2 && st == PEAT_OK; k++)
        if (c.side[k].st != PEAT_OK) st = PEAT_ERROR(c.side[k].st, "%s", c.side[k].why);
    if (st == PEAT_OK && c.same)
        pair_shared(&c);
    else if (st == PEAT_OK)
        pair_both(&c, phase_alone);
    peat_analyzer_big_free(c.side[0].ws.cols, c.side[0].ws.bytes);
    peat_analyzer_big_free(c.side[1].ws.cols, c.side[1].ws.bytes);
    return st;
}
