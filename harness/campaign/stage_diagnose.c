/* stage_diagnose.c: the diagnose stage of `peat run`: when the numeric primary finding fails,
 * one call that fails on its own (a recorded call first, then a failing probe) becomes the base,
 * the experiments of analyzer/experiment.h run on it, and detector/diagnose.c keeps the class
 * whose prediction held (docs/detector.md, "Differential diagnosis"). */
#include "analyzer/experiment.h"
#include "analyzer/probe.h"
#include "core/opdesc.h"
#include "core/clock.h"
#include "harness/campaign/stages.h"
#include "harness/campaign/work.h"

#include "golden/golden.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RECORDED 4 /* distinct recorded calls tried as the base */

/* One call through exact, golden and candidate, judged, with its signed errors per output. */
typedef struct judged {
    peat_args c, g, e;
    int kernel_failed;
    peat_probe_outcome po;
    peat_signature sc, sg;
    double *err[PEAT_MAX_IO], *mag[PEAT_MAX_IO]; /* errors in bounds; the bound's magnitudes */
    int64_t n[PEAT_MAX_IO];
    int small;              /* no gross error in any output */
    int none_beyond;        /* no output beyond the bound: every one marked failing */
    int toward_zero;        /* errors read signed toward or away from zero (signs_toward_zero) */
    int fails[PEAT_MAX_IO]; /* output with a gross error (beyond PEAT_GROSS_FACTOR bounds, or not
                               finite), or beyond the bound where no output has a gross error:
                               the outputs the defect reaches */
} judged;

static void judged_free(judged *j)
{
    peat_campaign_probe_call_free(&j->c, &j->g, &j->e);
    for (int o = 0; o < PEAT_MAX_IO; o++) free(j->err[o]), free(j->mag[o]);
    memset(j, 0, sizeof *j);
}

static peat_status errors_of(judged *j)
{
    int64_t depth = peat_op_info_get(j->c.op)->depth(&j->c.p);
    for (int o = 0; o < j->c.n_out; o++) {
        int64_t n = peat_tensor_numel(j->e.out[o]);
        j->mag[o] = malloc((size_t)(n ? n : 1) * sizeof *j->mag[o]);
        j->err[o] = malloc((size_t)(n ? n : 1) * sizeof *j->err[o]);
        if (!j->mag[o] || !j->err[o]) return PEAT_ERROR(PEAT_ERR_NOMEM, "experiment errors");
        PEAT_TRY(peat_golden_magnitude(&j->c, o, j->e.out[o], j->mag[o]));
        peat_analyzer_exp_errors(j->c.out[o], j->e.out[o], j->mag[o], depth, j->err[o]);
        j->n[o] = n;
        for (int64_t i = 0; i < n && !j->fails[o]; i++)
            j->fails[o] = isnan(j->err[o][i]) || fabs(j->err[o][i]) > PEAT_GROSS_FACTOR;
    }
    /* no gross error anywhere (a slip of a few bounds): the outputs beyond the bound are those
     * the defect reaches; none beyond it either (a statistical finding): every output */
    int any = 0;
    for (int o = 0; o < j->c.n_out; o++) any |= j->fails[o];
    j->small = !any;
    for (int o = 0; o < j->c.n_out && !any; o++)
        for (int64_t i = 0; i < j->n[o] && !j->fails[o]; i++)
            j->fails[o] = fabs(j->err[o][i]) > 1.0;
    for (int o = 0; o < j->c.n_out; o++) any |= j->fails[o];
    j->none_beyond = !any;
    for (int o = 0; o < j->c.n_out && !any; o++) j->fails[o] = 1;
    return PEAT_OK;
}

/* Each error signed toward or away from zero (times the exact value's sign). On a base with no
 * gross error (errors of a few bounds, as roundings make) the jitter reads them so: a rounding
 * toward zero is then one-signed whatever the values, and the jitter, which keeps every value's
 * sign, does not keep its errors' signs for it. A gross error keeps its own sign: an output zeroed
 * or replaced is as far from the exact value as the value itself, and its sign is what the jitter
 * reads. */
static void signs_toward_zero(judged *j)
{
    for (int o = 0; o < j->c.n_out; o++) {
        const double *ex = j->e.out[o]->data;
        for (int64_t i = 0; i < j->n[o]; i++)
            if (ex[i] < 0.0) j->err[o][i] = -j->err[o][i];
    }
}

/* The share of the errors beyond the bound, on the outputs the call fails, that shrink |x| (the
 * error's sign against the exact value's); NaN with fewer than 8 such errors. */
static double shrink_share(const judged *j)
{
    int64_t n = 0, in = 0;
    for (int o = 0; o < j->c.n_out; o++) {
        if (!j->fails[o]) continue;
        const double *ex = j->e.out[o]->data;
        for (int64_t i = 0; i < j->n[o]; i++) {
            double e = j->err[o][i];
            if (!(fabs(e) > 1.0) || ex[i] == 0.0) continue;
            n++, in += (e < 0.0) == (ex[i] > 0.0);
        }
    }
    return n >= 8 ? (double)in / (double)n : NAN;
}

static peat_status run_judged(const peat_campaign *c, const peat_campaign_opts *o,
                              const peat_args *in, const peat_detector_ctx *ctx, int recorded,
                              judged *j)
{
    memset(j, 0, sizeof *j);
    char why[256];
    peat_status st = peat_campaign_probe_call(o, c->k, in, &j->c, &j->g, &j->e, why, sizeof why);
    if (st == PEAT_ERR_KERNEL) {
        j->kernel_failed = 1;
        return PEAT_OK;
    }
    PEAT_TRY(st);
    PEAT_TRY(peat_campaign_probe_judge(c->k, &j->c, &j->g, &j->e, ctx, &j->po, &j->sc, &j->sg));
    /* a recorded call is a call of training, not a crafted one: the statistical rules a probe's
     * judgement only warns with (truncation, noise, a low-bit imbalance) count on it */
    peat_finding f[8];
    if (recorded && peat_detector_run(&j->sc, &j->sg, ctx, f, 8) > 0) j->po.f = f[0];
    return errors_of(j);
}

static int64_t excess(int64_t a, int64_t b)
{
    return a > b ? a - b : 0;
}

/* The call fails on its own: the detector fails it, or it holds non-finite values the golden
 * does not, or (a call of fewer than TINY outputs, where the detector's statistical rules only
 * warn) gross errors the golden does not. An accepted deviation (a small approximation's WARN)
 * is no failure to explain. */
#define TINY 256
static int fails(const judged *j)
{
    return !j->kernel_failed && (j->po.f.accept == PEAT_ACCEPT_FAIL ||
                                 j->sc.n_nan + j->sc.n_inf > j->sg.n_nan + j->sg.n_inf ||
                                 (j->sc.n_elems < TINY && j->sc.n_gross > j->sg.n_gross));
}

/* The base's description and read-outs into d. */
static void base_facts(const judged *b, const char *label, peat_diagnosis *d)
{
    snprintf(d->base, sizeof d->base, "%s", label);
    d->base_f = b->po.f;
    d->base_n = b->sc.n_elems;
    d->base_gross = excess(b->sc.n_gross, b->sg.n_gross);
    d->base_nonfinite = excess(b->sc.n_nan + b->sc.n_inf, b->sg.n_nan + b->sg.n_inf);
    int64_t sub = excess(b->sc.n_err_subnormal_exact, b->sg.n_err_subnormal_exact);
    /* a flush leaves zeros (as the FTZ rule asks): tiny values merely less accurate are none */
    int flushed = 2 * excess(b->sc.n_zero_introduced, b->sg.n_zero_introduced) >= sub;
    d->base_subnormal =
        b->sc.n_over_bound > 0 && flushed ? (double)sub / (double)b->sc.n_over_bound : 0.0;
    d->base_eff_bits = b->sc.eff_bits;
    d->base_toward_zero = !isnan(b->sc.frac_err_negative) && b->sc.frac_err_negative >= 0.75 &&
                          !isnan(b->sc.bias_t) && b->sc.bias_t <= -6.0;
    d->n_outputs = b->c.n_out;
    const peat_op_desc *od = peat_op_desc_get(b->c.op);
    d->base_invariant = od ? od->invariant(&b->c) : NAN;
    d->base_invariant_golden = od ? od->invariant(&b->g) : NAN;
    d->outputs[0] = 0;
    d->base_n_failing = 0;
    for (int o = 0; o < b->c.n_out; o++)
        if (b->fails[o]) {
            d->base_n_failing += b->n[o];
            size_t w = strlen(d->outputs);
            snprintf(d->outputs + w, sizeof d->outputs - w, "%s%d", w ? "+" : "", o);
        }
    if (b->c.op == PEAT_OP_GEMM) d->gemm_m = b->c.p.i[2], d->gemm_n = b->c.p.i[3];
    /* the first failing output plane by plane (heads, batch entries, images x channels) */
    int o = 0;
    while (o < b->c.n_out && !b->fails[o]) o++;
    if (o == b->c.n_out || b->c.out[o]->dtype != PEAT_DTYPE_F32) return;
    int64_t rows = 0, cols = 0;
    peat_edge_region r;
    memset(&r, 0, sizeof r);
    peat_campaign_playback_plane(&b->c, o, b->e.out[o], &rows, &cols);
    if (rows > 0 && cols > 0 &&
        peat_analyzer_edge_region(b->c.out[o], b->e.out[o], b->mag[o],
                                  peat_op_info_get(b->c.op)->depth(&b->c.p), rows, cols,
                                  &r) == PEAT_OK) {
        d->base_plane_confined = r.plane_confined;
        d->base_planes = r.planes, d->base_wrong_planes = r.wrong_planes;
        d->base_first_wrong_plane = r.first_wrong_plane;
    }
    peat_error_clear();
}

/* The jitter's correlation over the elements beyond one bound, or, where fewer than 8 are (a
 * per-channel output such as a running variance, a few of its values over), beyond a quarter of
 * one: still above the rounding noise an honest output keeps (a tenth of the bound, typically),
 * which the jitter redraws. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double jitter_corr_of(const double *b, const double *x, int64_t n)
{
    double r = peat_analyzer_exp_corr(b, x, NULL, n, 1.0);
    if (!isnan(r)) return r;
    r = peat_analyzer_exp_corr(b, x, NULL, n, 0.25);
    if (!isnan(r) || n < 80) return r;
    /* nothing near the bound (a statistical finding: errors several times the golden's, all
     * inside it): the largest tenth of the base's errors, where the candidate's departure
     * dominates its own rounding */
    double *a = malloc((size_t)n * sizeof *a);
    if (!a) return r;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(b[i])) a[m++] = fabs(b[i]);
    double t = NAN;
    if (m >= 80) {
        qsort(a, (size_t)m, sizeof *a, cmp_double);
        t = a[m - m / 10];
    }
    free(a);
    return t > 0.0 ? peat_analyzer_exp_corr(b, x, NULL, n, t) : r;
}

/* Correlation of the jittered call's errors with the base's, over the outputs the base fails. */
static double jitter_corr(const judged *b, const judged *x)
{
    int64_t n = 0;
    for (int o = 0; o < b->c.n_out; o++)
        if (b->fails[o] && x->n[o] == b->n[o]) n += b->n[o];
    double *cb = malloc((size_t)(n ? n : 1) * sizeof *cb),
           *cx = malloc((size_t)(n ? n : 1) * sizeof *cx);
    double r = NAN;
    if (cb && cx) {
        int64_t k = 0;
        for (int o = 0; o < b->c.n_out; o++)
            if (b->fails[o] && x->n[o] == b->n[o]) {
                memcpy(cb + k, b->err[o], (size_t)b->n[o] * sizeof *cb);
                memcpy(cx + k, x->err[o], (size_t)b->n[o] * sizeof *cx);
                k += b->n[o];
            }
        r = jitter_corr_of(cb, cx, n);
    }
    free(cb), free(cx);
    return r;
}

/* x as a value of at most 8 significand bits (bf16's): what every format of >= 8 bits holds */
static int short_value(double x)
{
    if (x == 0.0) return 1;
    if (!isfinite(x)) return 0;
    int e;
    double m = ldexp(frexp(x, &e), 8);
    return m == floor(m) && e > -120 && e < 120;
}

/* The small-integers experiment of an op other than GEMM read by exactness, on the outputs the
 * base fails whose exact values are short: there every honest order and every format of >= 8
 * bits gives the exact value, so an element that differs is another function. Wrong: at least
 * 1% of the elements read (8 at most, 1 at least). NOTFOUND when no output qualifies. */
static peat_status exact_readout(const judged *b, const judged *x, unsigned mask,
                                 peat_exp_outcome *out)
{
    /* a base within the bound everywhere (a statistical finding, every output marked failing)
     * says nothing of which output the defect is in */
    if (b->none_beyond) return PEAT_ERR_NOTFOUND;
    unsigned use = 0;
    for (int o = 0; o < x->c.n_out; o++) {
        if (!(mask >> o & 1u) || !b->fails[o] || x->c.out[o]->dtype != PEAT_DTYPE_F32) continue;
        const double *ex = x->e.out[o]->data;
        int ok = 1;
        for (int64_t i = 0; i < x->n[o] && ok; i++) ok = short_value(ex[i]);
        if (ok) use |= 1u << o;
    }
    if (!use) return PEAT_ERR_NOTFOUND;
    int64_t n = 0, wrong = 0;
    for (int o = 0; o < x->c.n_out; o++) {
        if (!(use >> o & 1u)) continue;
        const double *ex = x->e.out[o]->data;
        const float *t = x->c.out[o]->data;
        for (int64_t i = 0; i < x->n[o]; i++) wrong += !((double)t[i] == ex[i]);
        n += x->n[o];
    }
    int64_t need = (n + 99) / 100;
    need = need < 1 ? 1 : need > 8 ? 8 : need;
    out->exact_outputs = use, out->n_exact = n, out->n_not_exact = wrong;
    out->fails = wrong >= need;
    return PEAT_OK;
}

/* An experiment is judged as its base is: by every rule when the base is a recorded call, as a
 * probe when it is one. */
static peat_status experiment_one(const peat_campaign *c, const peat_campaign_opts *o,
                                  const peat_detector_ctx *ctx, const judged *b, int recorded,
                                  peat_exp_kind k, peat_exp_outcome *out)
{
    memset(out, 0, sizeof *out);
    out->corr = out->stay = out->follow = out->corr_stay = out->corr_follow = NAN;
    for (int o = 0; o < PEAT_MAX_IO; o++) out->corr_out[o] = NAN;
    peat_experiment ex;
    peat_status st = peat_analyzer_experiment_make(&b->c, k, c->o->seed, &ex);
    if (st == PEAT_ERR_NOTFOUND) return PEAT_OK; /* does not apply to this op */
    PEAT_TRY(st);
    judged x;
    st = run_judged(c, o, &ex.args, ctx, recorded, &x);
    if (st == PEAT_OK && !x.kernel_failed && b->toward_zero) signs_toward_zero(&x);
    if (st == PEAT_OK && x.kernel_failed) out->ran = -1;
    if (st == PEAT_OK && !x.kernel_failed) {
        out->ran = 1;
        out->fails = fails(&x);
        out->f = x.po.f;
        out->n = x.sc.n_elems;
        out->n_gross = excess(x.sc.n_gross, x.sg.n_gross);
        out->n_nonfinite = excess(x.sc.n_nan + x.sc.n_inf, x.sg.n_nan + x.sg.n_inf);
        out->max_norm = x.sc.max_norm;
        if (k == PEAT_EXP_INTEGERS && ex.exact_mask &&
            exact_readout(b, &x, ex.exact_mask, out) == PEAT_ERR_NOTFOUND)
            out->ran = 0; /* no output the base fails is exact on small integers */
        if (k == PEAT_EXP_JITTER) {
            out->corr = jitter_corr(b, &x);
            for (int o = 0; o < PEAT_MAX_IO; o++)
                out->corr_out[o] = o < b->c.n_out && b->fails[o] && x.n[o] == b->n[o]
                                       ? jitter_corr_of(b->err[o], x.err[o], b->n[o])
                                       : NAN;
        }
        /* on the first output the base fails that the map fits (attention's dQ, dK and dV
         * share one shape: a defect in dK alone is read there) */
        int o = 0;
        while (o < b->c.n_out &&
               !(b->fails[o] && (b->n[o] == ex.n_src || (ex.src2 && b->n[o] == ex.n_src2))))
            o++;
        /* the map of that output's size (a norm's statistics and dgamma have their own) */
        const int64_t *src = o < b->c.n_out && b->n[o] == ex.n_src ? ex.src : ex.src2;
        if (k == PEAT_EXP_PERMUTE && o < b->c.n_out && x.n[o] == b->n[o]) {
            out->stay = peat_analyzer_exp_overlap(b->err[o], x.err[o], NULL, b->n[o]);
            out->follow = peat_analyzer_exp_overlap(b->err[o], x.err[o], src, b->n[o]);
            out->corr_stay = jitter_corr_of(b->err[o], x.err[o], b->n[o]);
            double *bm = malloc((size_t)(b->n[o] ? b->n[o] : 1) * sizeof *bm);
            if (bm) {
                for (int64_t i = 0; i < b->n[o]; i++) bm[i] = b->err[o][src[i]];
                out->corr_follow = jitter_corr_of(bm, x.err[o], b->n[o]);
            }
            free(bm);
        }
    }
    judged_free(&x);
    peat_analyzer_experiment_free(&ex);
    return st;
}

/* Records with distinct parameters, in recorded order, at most MAX_RECORDED. */
static int distinct_records(const peat_record_list *recs, const peat_record **out)
{
    int n = 0;
    for (int64_t i = 0; i < recs->n && n < MAX_RECORDED; i++) {
        int seen = 0;
        for (int k = 0; k < n && !seen; k++)
            seen = !memcmp(&out[k]->p, &recs->items[i]->p, sizeof out[k]->p);
        if (!seen) out[n++] = recs->items[i];
    }
    return n;
}

/* The numeric primary finding (the runner's, the runtime's left out). */
static int numeric_primary(const peat_campaign *c, peat_finding *out)
{
    peat_finding_sources s = c->find;
    memset(&s.runner, 0, sizeof s.runner);
    s.runtime = NULL, s.n_runtime = 0, s.diagnosed = NULL;
    peat_finding f[16];
    int n = peat_detector_assemble(&s, f, 16);
    if (n > 0) *out = f[0];
    return n > 0;
}

/* The recorded call with the largest error of the playback (the report's worst call), when it
 * is among the records and not already in recs[0..n). */
static int worst_record(const peat_campaign *c, const peat_record **recs, int n)
{
    const peat_plot_data *pl = &c->res->plots;
    if (!pl->have_worst) return n;
    for (int64_t i = 0; i < c->recs.n; i++) {
        const peat_record *r = c->recs.items[i];
        if ((int64_t)r->id != pl->worst_call) continue;
        for (int k = 0; k < n; k++)
            if (recs[k] == r) return n;
        recs[n] = r;
        return n + 1;
    }
    return n;
}

/* Whether a call's exact outputs leave fp16's range somewhere (|x| > 65504): a probe of large
 * values for every kernel with a half accumulator or store, whatever its tag. */
static int beyond_fp16(const judged *j)
{
    for (int o = 0; o < j->c.n_out; o++) {
        const double *ex = j->e.out[o]->data;
        for (int64_t i = 0; i < j->n[o]; i++)
            if (fabs(ex[i]) > 65504.0 && isfinite(ex[i])) return 1;
    }
    return 0;
}

/* Tries the recorded calls (the worst call of the playback first: a defect that grows with
 * training, such as one channel read with another's gamma, is nil on the first calls, where
 * the gammas are still equal), then the failing probes (the one behind the primary first): the
 * first that fails on its own is the base (kept in *base, its label in d). */
static peat_status find_base(const peat_campaign *c, const peat_campaign_opts *o,
                             const peat_detector_ctx *ctx, const peat_finding *primary,
                             const peat_probe_set *set, judged *base, peat_diagnosis *d)
{
    const peat_record *recs[MAX_RECORDED + 1];
    int nr = worst_record(c, recs, 0);
    const peat_record *rest[MAX_RECORDED];
    int nd = distinct_records(&c->recs, rest);
    for (int k = 0; k < nd; k++)
        if (!nr || rest[k] != recs[0]) recs[nr++] = rest[k];
    char label[96];
    for (int i = 0; i < nr; i++) {
        peat_args a = peat_record_args(recs[i]);
        PEAT_TRY(run_judged(c, o, &a, ctx, 1, base));
        if (fails(base)) {
            snprintf(label, sizeof label, "recorded call %lld (%.40s)",
                     (long long)recs[i]->call_index, recs[i]->layer);
            base_facts(base, label, d);
            return PEAT_OK;
        }
        judged_free(base);
    }
    int64_t np = set->n < c->res->n_probes ? set->n : c->res->n_probes;
    for (int pass = 0; pass < 2; pass++)
        for (int64_t i = 0; i < np; i++) {
            const peat_probe_outcome *po = &c->res->probes[i];
            int named = strstr(primary->experiment, po->label) != NULL;
            if (po->f.accept != PEAT_ACCEPT_FAIL || named != (pass == 0)) continue;
            PEAT_TRY(run_judged(c, o, &set->p[i].args, ctx, 0, base));
            if (fails(base)) {
                snprintf(label, sizeof label, "probe: %.80s", po->label);
                base_facts(base, label, d);
                d->base_cancel = po->tag == PEAT_PROBE_TAG_CANCEL;
                /* an overflow probe, or one whose exact outputs leave fp16's range (65504) */
                d->base_overflow = po->tag == PEAT_PROBE_TAG_OVERFLOW || beyond_fp16(base);
                d->base_extent = po->tag == PEAT_PROBE_TAG_EXTENT;
                return PEAT_OK;
            }
            judged_free(base);
        }
    return PEAT_OK;
}

peat_status peat_campaign_stage_diagnose(peat_campaign *c)
{
    peat_campaign_result *res = c->res;
    peat_finding primary;
    memset(&res->diagnosis, 0, sizeof res->diagnosis);
    res->have_diagnosed = 0;
    /* a kernel the runner caught (crashes, stray writes, state) has numeric findings that are its
     * consequences: nothing to tell apart */
    int runner = res->n_kernel_failures > 0 || res->n_oob_writes > 0 ||
                 res->n_input_mutations > 0 || res->n_stateful > 0;
    if (c->o->no_diagnose || runner || res->verdict != PEAT_ACCEPT_FAIL ||
        !numeric_primary(c, &primary) || !peat_detector_diagnosable(&primary) ||
        res->cand.repeat_max_diff > 0.0)
        return PEAT_OK; /* nothing numeric fails, or it is decided by the repeats */
    double t0 = peat_clock_now();
    peat_diagnosis *d = &res->diagnosis;
    d->ran = 1;
    peat_campaign_opts po = *c->o;
    po.isolate = c->o->isolate && peat_backend_can_fork(c->k->backend);
    peat_detector_ctx ctx = peat_detector_ctx_from_kernel(c->k);
    ctx.in_frac_below_normal = c->in_frac_below_normal;
    ctx.in_frac_above_max = c->in_frac_above_max;
    peat_probe_set set;
    memset(&set, 0, sizeof set);
    peat_status st =
        c->o->no_probes ? PEAT_OK : peat_analyzer_probe_set_make(&c->recs, c->o->seed, &set);
    judged base;
    memset(&base, 0, sizeof base);
    if (st == PEAT_OK) st = find_base(c, &po, &ctx, &primary, &set, &base, d);
    /* errors signed toward or away from zero on a base of small errors, or one whose errors
     * shrink |x| (a truncation to a narrower format: gross, but one-signed whatever the values;
     * the jitter keeps every value's sign and would keep its errors' signs with it) */
    double shrink = d->base[0] ? shrink_share(&base) : NAN;
    if (!isnan(shrink) && shrink >= 0.9) d->base_toward_zero = 1; /* on the outputs it fails */
    base.toward_zero = base.small || d->base_toward_zero;
    if (st == PEAT_OK && d->base[0] && base.toward_zero) signs_toward_zero(&base);
    for (int k = 0; k < PEAT_EXP_COUNT && st == PEAT_OK && d->base[0] && !d->base_cancel; k++)
        st = experiment_one(c, &po, &ctx, &base, !strncmp(d->base, "recorded", 8), (peat_exp_kind)k,
                            &d->exp[k]);
    judged_free(&base);
    peat_analyzer_probe_set_free(&set);
    d->seconds = peat_clock_now() - t0;
    PEAT_TRY(st);
    if (peat_detector_diagnose(&primary, d, &res->diagnosed)) {
        res->have_diagnosed = 1;
        c->find.diagnosed = &res->diagnosed;
        peat_campaign_judge(res, &c->find);
    }
    return PEAT_OK;
}
