/* rules_probe.c: findings from the probe stage (arithmetic properties, probe calls) and their
 * combination with the recorded calls' findings into one primary finding. */
#include "detector/detector.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* the bits WRONG_RESULT leaves (detector.c's WRONG_BITS_MAX: fewer than fp8 e5m2 keeps) */
#define PROBE_WRONG_BITS 3.0

static peat_finding *add(peat_finding *out, int *n, int max, peat_finding_class c,
                         peat_acceptance acc, const char *params)
{
    if (*n >= max) return NULL;
    peat_finding *f = &out[(*n)++];
    memset(f, 0, sizeof *f);
    f->cls = c, f->accept = acc, f->confidence = 0.95;
    snprintf(f->params, sizeof f->params, "%s", params);
    return f;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
evid(peat_finding *f, const char *fmt, ...)
{
    if (!f || f->n_evidence >= PEAT_MAX_EVIDENCE) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->evidence[f->n_evidence++], sizeof f->evidence[0], fmt, ap);
    va_end(ap);
}

static const char *fmt_of_bits(int bits, int range16)
{
    if (bits == 11) return range16 ? "fp16" : "tf32";
    if (bits == 8) return "bf16";
    if (bits <= 4) return "fp8";
    return "narrow";
}

static int declared_narrow(peat_dtype d, int bits)
{
    int m = peat_dtype_mantissa_bits(d);
    return m > 0 && m < 24 && m <= bits + 1;
}

static void props_precision(const peat_gemm_props *c, const peat_gemm_props *g,
                            const peat_detector_ctx *ctx, peat_finding *out, int *n, int max)
{
    char p[128];
    /* a narrow accumulator rounds every term on its way in, so it also reads as narrow inputs:
     * inputs are named only where they are narrower than the accumulator */
    if (c->input_bits < g->input_bits && c->input_bits < c->acc_bits) {
        int ok = ctx && declared_narrow(ctx->declared_in, c->input_bits);
        const char *fm = fmt_of_bits(c->input_bits, c->input_range16);
        snprintf(p, sizeof p, "where=inputs,fmt=%s,bits=%d", fm, c->input_bits);
        peat_finding *f = add(out, n, max, PEAT_FIND_REDUCED_PRECISION,
                              ok ? PEAT_ACCEPT_WARN : PEAT_ACCEPT_FAIL, p);
        evid(f,
             "inputs keep %d significand bits (golden %d): A = 2^12 (1 + 2^-k) survives only "
             "for k < %d; %s",
             c->input_bits, g->input_bits, c->input_bits,
             c->input_range16 ? "2^17 overflows: fp16's range" : "fp32's range kept");
        evid(f, "%s",
             ok ? "the kernel declares this input format (WARN)"
                : "the kernel declares fp32 inputs: undeclared (FAIL)");
    }
    if (c->acc_bits < g->acc_bits) {
        int ok = ctx && declared_narrow(ctx->declared_acc, c->acc_bits);
        snprintf(p, sizeof p, "where=accumulation,fmt=%s,bits=%d", fmt_of_bits(c->acc_bits, 1),
                 c->acc_bits);
        peat_finding *f = add(out, n, max, PEAT_FIND_REDUCED_PRECISION,
                              ok ? PEAT_ACCEPT_WARN : PEAT_ACCEPT_FAIL, p);
        evid(f,
             "the accumulator keeps %d significand bits (golden %d): 2^12 + 2^(12-k) is exact "
             "only for k < %d; error grows with K, large sums saturate or overflow%s",
             c->acc_bits, g->acc_bits, c->acc_bits,
             c->input_bits == c->acc_bits ? " (inputs read as narrow too: they pass through it)"
                                          : "");
        evid(f, "%s",
             ok ? "the kernel declares this accumulator (WARN)"
                : "the kernel declares fp32 accumulation: undeclared (FAIL)");
    }
}

int peat_detector_props(const peat_gemm_props *c, const peat_gemm_props *g,
                        const peat_detector_ctx *ctx, peat_finding *out, int max)
{
    int n = 0;
    if (!c || !g) return 0;
    /* subnormals: only where the inputs keep fp32's range (fp16 inputs underflow instead) */
    if (!c->input_range16 && c->acc_bits >= g->acc_bits && c->input_bits >= g->input_bits &&
        ((g->subnormal_in && !c->subnormal_in) || (g->subnormal_out && !c->subnormal_out))) {
        peat_finding *f = add(out, &n, max, PEAT_FIND_FTZ, PEAT_ACCEPT_FAIL, "");
        if (f)
            snprintf(f->params, sizeof f->params, "inputs=%s,products=%s",
                     c->subnormal_in ? "kept" : "flushed", c->subnormal_out ? "kept" : "flushed");
        evid(f,
             "2^-130 x 1 gives %s, 2^-70 x 2^-70 gives %s (golden keeps %s/%s): subnormals "
             "flushed to zero",
             c->subnormal_in ? "2^-130" : "0", c->subnormal_out ? "2^-140" : "0",
             g->subnormal_in ? "both" : "-", g->subnormal_out ? "" : "-");
    }
    if (strcmp(c->rounding, g->rounding) && strcmp(c->rounding, "?") && strcmp(g->rounding, "?")) {
        char p[64];
        snprintf(p, sizeof p, "mode=%s", c->rounding);
        peat_finding *f = add(out, &n, max, PEAT_FIND_TRUNCATION, PEAT_ACCEPT_FAIL, p);
        evid(f,
             "rounding mode %s where golden rounds %s: 2^12 + 0.25, 0.75 and 0.5 ulp (and their "
             "negatives) round %s",
             c->rounding, g->rounding,
             !strcmp(c->rounding, "RZ") ? "toward zero" : "the other way");
    }
    props_precision(c, g, ctx, out, &n, max);
    if (g->nan_prop && !c->nan_prop) {
        peat_finding *f = add(out, &n, max, PEAT_FIND_NAN, PEAT_ACCEPT_FAIL, "propagation=no");
        evid(f, "a NaN or Inf input does not reach the output (golden propagates both)");
    }
    return n;
}

static int has_class(const peat_finding *out, int n, peat_finding_class c)
{
    for (int i = 0; i < n; i++)
        if (out[i].cls == c) return 1;
    return 0;
}

/* How specific a class is: a localized, exact or structural explanation beats a statistical
 * one; lower ranks win the primary slot. */
static int rank(const peat_finding *f)
{
    switch (f->cls) {
    case PEAT_FIND_STUCK_BIT:
    case PEAT_FIND_BITFLIP:
        return 1;
    case PEAT_FIND_NONDETERMINISTIC:
        return f->accept == PEAT_ACCEPT_FAIL ? 2 : 12;
    case PEAT_FIND_TILE:
        return 3;
    case PEAT_FIND_WRONG_RESULT:
        return 4;
    case PEAT_FIND_FTZ:
        return 5;
    case PEAT_FIND_RANGE:
        return 6;
    case PEAT_FIND_NAN:
        return 7;
    case PEAT_FIND_TRUNCATION:
        return 8;
    case PEAT_FIND_REDUCED_PRECISION:
        return 9;
    case PEAT_FIND_NOISE:
        return 10;
    case PEAT_FIND_APPROX:
        return 11;
    case PEAT_FIND_OUT_OF_BOUND:
        return 13;
    case PEAT_FIND_UNKNOWN:
        return 14;
    default:
        return 99;
    }
}

/* A probe's finding as the detector reads it in context: NaN or Inf, or an unexplained error,
 * that appears only on a probe pushing values toward overflow is a range finding. */
/* An edge region on one call: every gross error in the trailing rows or columns of the view. */
static peat_finding edge_finding(const peat_probe_outcome *p)
{
    const peat_edge_region *r = &p->edge;
    peat_finding f;
    memset(&f, 0, sizeof f);
    f.cls = PEAT_FIND_TILE, f.accept = PEAT_ACCEPT_FAIL, f.confidence = 0.9;
    int rows = r->edge_rows > 0 && r->edge_rows < r->rows;
    snprintf(f.params, sizeof f.params, "boundary,%s=%lld,shape=%lldx%lld", rows ? "rows" : "cols",
             (long long)(rows ? r->edge_rows : r->edge_cols), (long long)r->rows,
             (long long)r->cols);
    evid(&f,
         "all %lld gross errors lie in the last %lld row(s) and %lld column(s) of the %lldx%lld "
         "output: an edge region (unwritten or mis-indexed last tile)",
         (long long)r->n_gross, (long long)r->edge_rows, (long long)r->edge_cols,
         (long long)r->rows, (long long)r->cols);
    evid(&f, "seen on probe \"%.80s\"", p->label);
    return f;
}

/* Whole planes of the output wrong (batch entries, images x channels, heads), the others
 * within the bound. */
static peat_finding plane_finding(const peat_probe_outcome *p)
{
    const peat_edge_region *r = &p->edge;
    peat_finding f;
    memset(&f, 0, sizeof f);
    f.cls = PEAT_FIND_TILE, f.accept = PEAT_ACCEPT_FAIL, f.confidence = 0.9;
    snprintf(f.params, sizeof f.params, "planes,wrong=%lld/%lld,first=%lld,shape=%lldx%lld",
             (long long)r->wrong_planes, (long long)r->planes, (long long)r->first_wrong_plane,
             (long long)r->rows, (long long)r->cols);
    evid(&f,
         "%lld of the output's %lld planes of %lldx%lld (batch entries, images x channels or "
         "heads) are wrong, from plane %lld; every other plane is within the fp32 bound: the "
         "op's leading axis is skipped or mis-indexed, not its formula",
         (long long)r->wrong_planes, (long long)r->planes, (long long)r->rows, (long long)r->cols,
         (long long)r->first_wrong_plane);
    evid(&f, "seen on probe \"%.80s\"", p->label);
    return f;
}

static peat_finding probe_finding_raw(const peat_probe_outcome *p);

static peat_finding probe_finding(const peat_probe_outcome *p)
{
    peat_finding f = probe_finding_raw(p);
    char name[96];
    snprintf(name, sizeof name, "probe: %.80s", p->label);
    peat_detector_tag(&f, name);
    return f;
}

static peat_finding probe_finding_raw(const peat_probe_outcome *p)
{
    if (p->edge.confined && p->f.accept == PEAT_ACCEPT_FAIL) return edge_finding(p);
    if (p->edge.plane_confined && p->f.accept == PEAT_ACCEPT_FAIL) return plane_finding(p);
    peat_finding f = p->f;
    /* NaN/Inf or a dense loss; a few isolated wrong elements are not a range effect */
    int blowup = f.cls == PEAT_FIND_NAN || f.cls == PEAT_FIND_WRONG_RESULT;
    if (p->tag == PEAT_PROBE_TAG_OVERFLOW && blowup) {
        f.cls = PEAT_FIND_RANGE;
        snprintf(f.params, sizeof f.params, "overflow,probe=%.60s", p->label);
        f.n_evidence = f.n_evidence < PEAT_MAX_EVIDENCE ? f.n_evidence : PEAT_MAX_EVIDENCE - 1;
        memmove(f.evidence[1], f.evidence[0], (size_t)f.n_evidence * sizeof f.evidence[0]);
        f.n_evidence++;
        snprintf(f.evidence[0], sizeof f.evidence[0],
                 "results blow up (NaN/Inf or gross errors) only on inputs of large magnitude "
                 "(probe \"%.60s\"): an intermediate leaves the format's range",
                 p->label);
        return f;
    }
    /* NaN/Inf or unexplained errors from finite, in-range inputs whose terms cancel: the
     * formula loses every bit (a negative variance, a difference of large squares) */
    /* an ill-conditioned probe: the golden itself leaves the bound, so an unexplained error
     * that still keeps more than WRONG_BITS bits is only "less accurate than golden there" */
    if (p->tag == PEAT_PROBE_TAG_CANCEL && f.cls == PEAT_FIND_OUT_OF_BOUND &&
        !(p->eff_bits <= PROBE_WRONG_BITS)) {
        f.accept = PEAT_ACCEPT_WARN;
        if (f.n_evidence < PEAT_MAX_EVIDENCE)
            snprintf(f.evidence[f.n_evidence++], sizeof f.evidence[0],
                     "on cancelling inputs (probe \"%.60s\") it keeps %.1f bits (golden %.1f): "
                     "less accurate than golden on ill-conditioned data, not lost (WARN)",
                     p->label, p->eff_bits, p->golden_eff_bits);
        return f;
    }
    if (p->tag == PEAT_PROBE_TAG_CANCEL &&
        (f.cls == PEAT_FIND_NAN || f.cls == PEAT_FIND_OUT_OF_BOUND)) {
        f.cls = PEAT_FIND_WRONG_RESULT;
        snprintf(f.params, sizeof f.params, "cancellation,probe=%.60s", p->label);
        if (f.n_evidence < PEAT_MAX_EVIDENCE)
            snprintf(f.evidence[f.n_evidence++], sizeof f.evidence[0],
                     "on inputs whose terms cancel (probe \"%.60s\") the result is lost (NaN/Inf "
                     "or unbounded error) although every input is finite and in range: a "
                     "numerically unstable formula",
                     p->label);
        return f;
    }
    if (f.n_evidence < PEAT_MAX_EVIDENCE)
        snprintf(f.evidence[f.n_evidence++], sizeof f.evidence[0], "seen on probe \"%.80s\"",
                 p->label);
    return f;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b, b = t;
    }
    return a;
}

/* The tile size behind edge-region findings: the gcd of the first unwritten row (column) over
 * every shape where an edge region appeared; the shapes themselves as evidence. */
static void structural_region(peat_finding *primary, const peat_probe_outcome *pr, int n_pr)
{
    int64_t tile = 0;
    char shapes[200] = "";
    for (int i = 0; i < n_pr; i++) {
        peat_finding mf = probe_finding(&pr[i]);
        const peat_finding *f = &mf;
        long long n, r, c;
        const char *b = strstr(f->params, "boundary,");
        if (f->cls != PEAT_FIND_TILE || !b) continue;
        const char *sh = strstr(f->params, "shape=");
        if (!sh || sscanf(sh, "shape=%lldx%lld", &r, &c) != 2) continue;
        int rows = strstr(b, "rows=") == b + 9;
        if (sscanf(b + 9, rows ? "rows=%lld" : "cols=%lld", &n) != 1) continue;
        char one[48];
        snprintf(one, sizeof one, "%lldx%lld", r, c);
        if (strstr(shapes, one)) continue; /* each shape counts once */
        int64_t start = (rows ? r : c) - n;
        if (start > 0) tile = gcd64(tile, start);
        size_t w = strlen(shapes);
        if (w + 24 < sizeof shapes)
            snprintf(shapes + w, sizeof shapes - w, "%s%s", w ? ", " : "", one);
    }
    if (!shapes[0]) return;
    /* a tile size needs two shapes: one edge alone is any divisor of its start */
    if (tile > 1 && strchr(shapes, ',')) {
        size_t w = strlen(primary->params);
        snprintf(primary->params + w, sizeof primary->params - w, ",tile=%lld", (long long)tile);
    }
    evid(primary, "edge region at output views %s%s", shapes,
         tile > 1 && strchr(shapes, ',')
             ? "; first wrong row/column a multiple of the inferred tile"
             : "");
}

/* A recorded-call finding of a class a property test already found: one finding, the
 * property's parameters (exact tests) with the recorded calls' evidence after its own, and the
 * worse acceptance of the two. */
static void merge_into(peat_finding *into, const peat_finding *from)
{
    if (from->accept > into->accept) into->accept = from->accept;
    if (from->confidence > into->confidence) into->confidence = from->confidence;
    for (int e = 0; e < from->n_evidence && into->n_evidence < PEAT_MAX_EVIDENCE; e++) {
        char *d = into->evidence[into->n_evidence++];
        if (e == 0 && from->params[0])
            snprintf(d, sizeof into->evidence[0], "on the recorded calls (%.30s): %.190s",
                     from->params, from->evidence[e]);
        else
            snprintf(d, sizeof into->evidence[0], "%s", from->evidence[e]);
    }
}

/* Whether a probe's region is a lone one: STRUCTURAL says the errors are confined to a region
 * and the rest is right. A region on one call alone, while the recorded calls or other probes
 * show gross errors spread beyond any region (WRONG_RESULT), is the spread error's shape on that
 * one output (the one wrong row of a 2-row output is its last by chance), not a confined defect;
 * a region that recurs on two calls or more, or that nothing contradicts, stands. */
static int lone_region(const peat_finding *rec, int n_rec, const peat_probe_outcome *pr, int n_pr)
{
    int regions = 0, spread = 0;
    for (int i = 0; i < n_rec; i++) {
        if (rec[i].accept != PEAT_ACCEPT_FAIL) continue;
        regions += rec[i].cls == PEAT_FIND_TILE;
        spread |= rec[i].cls == PEAT_FIND_WRONG_RESULT;
    }
    for (int i = 0; i < n_pr; i++) {
        peat_finding m = probe_finding(&pr[i]);
        if (m.accept != PEAT_ACCEPT_FAIL) continue;
        regions += m.cls == PEAT_FIND_TILE;
        spread |= m.cls == PEAT_FIND_WRONG_RESULT;
    }
    return regions == 1 && spread;
}

int peat_detector_combine(const peat_finding *rec, int n_rec, const peat_probe_outcome *pr,
                          int n_pr, const peat_finding *props, int n_props, peat_finding *out,
                          int max)
{
    /* the primary: a failing property first (exact tests), then the most specific failing
     * finding of the recorded calls or of any probe */
    const peat_finding *best = NULL;
    peat_finding mapped, best_copy;
    int best_rank = 1000;
    /* a kernel whose recorded calls change from run to run has no properties to read, even
     * where two runs of the crafted call happened to agree */
    int nondet = 0;
    for (int i = 0; i < n_rec; i++)
        nondet |= rec[i].cls == PEAT_FIND_NONDETERMINISTIC && rec[i].accept == PEAT_ACCEPT_FAIL;
    for (int i = 0; i < n_props && !nondet; i++)
        if (props[i].accept == PEAT_ACCEPT_FAIL && best_rank > 0) best = &props[i], best_rank = 0;
    for (int i = 0; i < n_rec; i++)
        if (rec[i].accept == PEAT_ACCEPT_FAIL && rank(&rec[i]) < best_rank)
            best = &rec[i], best_rank = rank(&rec[i]);
    /* a narrower format seen on the recorded calls also has a narrower range: its flushed or
     * overflowing range probes are consequences, not the primary mechanism */
    int narrow = has_class(rec, n_rec, PEAT_FIND_REDUCED_PRECISION) ||
                 has_class(props, n_props, PEAT_FIND_REDUCED_PRECISION);
    int lone = lone_region(rec, n_rec, pr, n_pr);
    for (int i = 0; i < n_pr; i++) {
        mapped = probe_finding(&pr[i]);
        int r = rank(&mapped);
        /* ... and its gross errors cluster by chance in a small output: an interior block
         * (not an edge region) on a probe is no structure then */
        int interior = mapped.cls == PEAT_FIND_TILE && !strstr(mapped.params, "boundary");
        if (narrow && (mapped.cls == PEAT_FIND_FTZ || mapped.cls == PEAT_FIND_RANGE || interior))
            r = 10;
        if (lone && mapped.cls == PEAT_FIND_TILE) r = rank(&(peat_finding){.cls = PEAT_FIND_FTZ});
        if (mapped.accept == PEAT_ACCEPT_FAIL && r < best_rank)
            best_copy = mapped, best = &best_copy, best_rank = r;
    }
    int n = 0;
    if (best && max > 0) {
        out[n++] = *best;
        peat_detector_tag(&out[0], best_rank == 0 ? "arithmetic property call" : "recorded calls");
        if (best->cls == PEAT_FIND_TILE) structural_region(&out[0], pr, n_pr);
    }
    for (int i = 0; i < n_props && n < max; i++)
        if (!has_class(out, n, props[i].cls)) {
            out[n] = props[i];
            peat_detector_tag(&out[n++], "arithmetic property call");
        }
    for (int i = 0; i < n_rec && n < max; i++) {
        peat_finding *same = NULL;
        for (int k = 0; k < n && !same; k++)
            if (out[k].cls == rec[i].cls) same = &out[k];
        if (!same) {
            out[n] = rec[i];
            peat_detector_tag(&out[n++], "recorded calls");
        } else if (!best)
            merge_into(same, &rec[i]);
    }
    for (int i = 0; i < n_pr && n < max; i++) {
        mapped = probe_finding(&pr[i]);
        /* the range a narrower format loses is said by its precision finding already */
        /* (an unexplained error on a probe at either end of the range too: a narrower format
         * rounds its subnormals to few bits or none) */
        int range_end =
            pr[i].tag == PEAT_PROBE_TAG_SUBNORMAL || pr[i].tag == PEAT_PROBE_TAG_OVERFLOW;
        int consequence = narrow && (mapped.cls == PEAT_FIND_FTZ || mapped.cls == PEAT_FIND_RANGE ||
                                     (mapped.cls == PEAT_FIND_OUT_OF_BOUND && range_end));
        if (mapped.accept == PEAT_ACCEPT_FAIL && !consequence && !has_class(out, n, mapped.cls))
            out[n++] = mapped;
    }
    return n;
}
