/* detector.c: ordered sufficient conditions that name the error model a signature shows. */
#include "detector/detector.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Thresholds (docs/detector.md says why each has its value). They were set on paper and on the
 * design cases of docs/detector.md, never on the test cases of tests/test_detector.c. */
#define RMS_SAME_MAX        3.0  /* candidate rms error within this factor of golden's: "as good" */
#define RMS_WORSE_MIN       4.0  /* dense rules need at least this factor */
#define DENSE_TOP1_MAX      0.5  /* top 1% of elements carry at most half the squared error */
#define SINGLE_BIT_MIN      0.9  /* share of gross errors that are one flipped bit */
#define ONE_BIT_MIN         0.9  /* share of those at the same bit position */
#define ONE_WAY             0.98 /* share of single-bit errors that set (or clear) the bit */
#define FEW_FRAC            0.01 /* "few elements": at most 1% of the elements ... */
#define FEW_ABS             2    /* ... or at most 2 */
#define STUCK_MIN_STRIDED   8    /* gross errors needed before a lane stride counts as evidence */
#define TILE_FILL_MIN       0.75 /* gross errors fill at least 3/4 of their bounding box */
#define TILE_SHARE_MAX      0.5  /* and the box covers at most half the tensor */
#define TILE_MIN            4    /* a block has at least 4 elements */
#define TOWARD_ZERO_MIN     0.75 /* truncation: >= 3/4 of the errors shrink |x| */
#define BIAS_T_MIN          6.0  /* with a t statistic beyond 6 sigma */
#define LOWBIT_RATIO        2.5  /* low-bit stuck: set/clear imbalance at one bit */
#define LOWBIT_EXCESS       0.1  /* affecting >= 10% of elements more than golden */
#define LOWBIT_Z            10.0
#define SMOOTH_MAX          0.2  /* von Neumann ratio of a smooth error */
#define SMOOTH_SIGN_MAX     0.05 /* sign changes per step of a smooth error */
#define NOISE_CORR_MIN      0.5  /* relative noise: error rank-correlates with |x| */
#define NOISE_CORR_GAIN     0.15 /* clearly more than golden's own correlation */
#define NOISE_ROUGH_MIN     0.5  /* and random from element to element (rounded inputs are not) */
#define STORAGE_BITS_MAX    16   /* outputs that all fit in <= 16 bits were stored narrow */
#define PREC_SLACK_BITS     1.5  /* declared format: measured bits within 1.5 of its bits */
#define APPROX_SMALL        1e-3 /* approx is small when max error <= 1e-3 of max |exact| */
#define WRONG_BITS_MAX      3.0 /* fewer effective bits than fp8 e5m2 keeps: no format explains it */
#define WRONG_GROSS_MIN     0.05 /* and gross errors in at least 5% of the elements */
#define ZERO_SHARE          0.9  /* an unwritten region: >= 90% of the gross errors are zeros */
#define FORMULA_GROSS_MIN   0.05 /* a formula error: gross errors in >= 5% of the elements ... */
#define FORMULA_BEYOND_BF16 131072.0 /* ... and (biased) beyond 2^17 bounds: bf16 truncating */

const char *peat_detector_finding_name(peat_finding_class c)
{
    static const char *names[PEAT_FIND_COUNT] = {"BIT_EXACT",
                                                 "WITHIN_BOUND",
                                                 "REDUCED_PRECISION",
                                                 "TRUNCATION",
                                                 "FTZ",
                                                 "RANGE",
                                                 "BITFLIP",
                                                 "STUCK_BIT",
                                                 "STRUCTURAL",
                                                 "NAN",
                                                 "NOISE",
                                                 "APPROX",
                                                 "NONDETERMINISTIC",
                                                 "WRONG_RESULT",
                                                 "OUT_OF_BOUND",
                                                 "UNKNOWN",
                                                 "TRAINING_EQUIVALENT",
                                                 "DEGRADES",
                                                 "DIVERGES",
                                                 "DUE",
                                                 "OUT_OF_BOUNDS_WRITE",
                                                 "INPUT_MUTATION",
                                                 "STATEFUL"};
    return (unsigned)c < PEAT_FIND_COUNT ? names[c] : "?";
}

peat_finding_class peat_detector_finding_parse(const char *name)
{
    for (int c = 0; c < PEAT_FIND_COUNT; c++)
        if (!strcmp(peat_detector_finding_name((peat_finding_class)c), name))
            return (peat_finding_class)c;
    if (!strcmp(name, "TILE")) return PEAT_FIND_TILE; /* the name STRUCTURAL had before */
    return PEAT_FIND_COUNT;
}

const char *peat_detector_acceptance_name(peat_acceptance a)
{
    switch (a) {
    case PEAT_ACCEPT_PASS:
        return "PASS";
    case PEAT_ACCEPT_WARN:
        return "WARN";
    case PEAT_ACCEPT_FAIL:
        return "FAIL";
    }
    return "?";
}

peat_acceptance peat_detector_verdict(const peat_finding *f, int n)
{
    peat_acceptance v = PEAT_ACCEPT_PASS;
    for (int i = 0; i < n; i++)
        if (f[i].accept > v) v = f[i].accept;
    return v;
}

peat_detector_ctx peat_detector_ctx_from_kernel(const peat_kernel *k)
{
    peat_detector_ctx c = {PEAT_DTYPE_F32, PEAT_DTYPE_F32, PEAT_DTYPE_F32, NAN, NAN};
    if (k) {
        c.declared_in = k->in_dtype;
        c.declared_out = k->out_dtype;
        c.declared_acc = k->acc_dtype;
    }
    return c;
}

/* ---- the findings list ------------------------------------------------------------------------
 */

typedef struct out_list {
    peat_finding *f;
    int n, max;
    peat_finding scratch; /* findings past max are built here and dropped */
} out_list;

static peat_finding *emit(out_list *o, peat_finding_class c, double conf, peat_acceptance acc,
                          const char *params_fmt, ...)
{
    peat_finding *f = o->n < o->max ? &o->f[o->n] : &o->scratch;
    memset(f, 0, sizeof *f);
    f->cls = c;
    f->confidence = conf;
    f->accept = acc;
    va_list ap;
    va_start(ap, params_fmt);
    vsnprintf(f->params, sizeof f->params, params_fmt, ap);
    va_end(ap);
    if (o->n < o->max) o->n++;
    return f;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
ev(peat_finding *f, const char *fmt, ...)
{
    if (f->n_evidence >= PEAT_MAX_EVIDENCE) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->evidence[f->n_evidence++], sizeof f->evidence[0], fmt, ap);
    va_end(ap);
}

/* ---- derived quantities -----------------------------------------------------------------------
 */

typedef struct facts {
    const peat_signature *c, *g;
    double env;        /* the bound envelope the candidate must stay in (bound units) */
    double rr;         /* candidate rms error / golden's */
    int64_t gross;     /* gross errors beyond golden's */
    int64_t nonfinite; /* NaN/Inf introduced beyond golden's */
    int top_bit;       /* most common single-bit position among gross errors */
    double top_bit_share;
    int dense; /* error spread over many elements */
} facts;

static double ratio(double a, double b)
{
    if (isnan(a) || isnan(b)) return NAN;
    if (b > 0.0) return a / b;
    return a > 0.0 ? INFINITY : 1.0;
}

static facts facts_of(const peat_signature *c, const peat_signature *g)
{
    facts x = {.c = c, .g = g};
    /* golden may exceed the worst-case bound itself (transcendental functions are not correctly
     * rounded): then "as good as golden" means within twice golden's own envelope */
    x.env = g->max_norm > 1.0 ? 2.0 * g->max_norm : 1.0;
    x.rr = ratio(c->rms_rel_mag, g->rms_rel_mag);
    x.gross = c->n_gross - g->n_gross;
    x.nonfinite = (c->n_nan + c->n_inf) - (g->n_nan + g->n_inf);
    x.top_bit = 0;
    for (int b = 1; b < PEAT_BIT_POSITIONS; b++)
        if (c->gross_bit[b] > c->gross_bit[x.top_bit]) x.top_bit = b;
    x.top_bit_share = c->gross_bit[x.top_bit];
    x.dense = !isnan(c->top1pct_share) && c->top1pct_share <= DENSE_TOP1_MAX;
    return x;
}

static const char *fmt_for_bits(int p)
{
    switch (p) {
    case 8:
        return "bf16";
    case 11:
        return "fp16";
    case 4:
        return "fp8";
    default:
        return NULL;
    }
}

/* Narrowest significand the kernel declares (inputs, accumulation or output), 24 if none. */
static int declared_bits(const peat_detector_ctx *ctx, int *acc_narrow)
{
    *acc_narrow = 0;
    if (!ctx) return 24;
    int p = 24;
    peat_dtype d[3] = {ctx->declared_in, ctx->declared_acc, ctx->declared_out};
    for (int i = 0; i < 3; i++) {
        int m = peat_dtype_mantissa_bits(d[i]);
        if (m > 0 && m < p) p = m;
        if (i == 1 && m > 0 && m < 24) *acc_narrow = 1;
    }
    return p;
}

/* ---- rules: each returns 1 when it fired ------------------------------------------------------
 */

static int rule_bit_exact(const facts *x, out_list *o)
{
    const peat_signature *c = x->c, *g = x->g;
    if (c->n_elems == g->n_elems && c->test_hash == g->test_hash) {
        peat_finding *f = emit(o, PEAT_FIND_BIT_EXACT, 0.99, PEAT_ACCEPT_PASS, "ref=golden");
        ev(f, "outputs bit-identical to golden's over %lld elements (hash %016llx)",
           (long long)c->n_elems, (unsigned long long)c->test_hash);
        return 1;
    }
    if (c->n_elems > 0 && c->n_equal_rounded == c->n_elems) {
        peat_finding *f = emit(o, PEAT_FIND_BIT_EXACT, 0.99, PEAT_ACCEPT_PASS, "ref=exact_rn");
        ev(f, "all %lld elements equal the exact result rounded to fp32 (correctly rounded)",
           (long long)c->n_elems);
        return 1;
    }
    return 0;
}

static int rule_range(const facts *x, out_list *o)
{
    const peat_signature *c = x->c, *g = x->g;
    int over = c->n_inf > g->n_inf && !isnan(c->min_exact_at_inf) &&
               c->min_exact_at_inf >= c->max_exact_finite * (1.0 - 1e-3);
    /* every output flushed is an underflow only where the values are tiny (below fp16's normal
     * range); an all-zero output of ordinary values is an unwritten one */
    int under =
        c->n_zero_introduced > g->n_zero_introduced && !isnan(c->max_exact_at_zero) &&
        c->max_exact_at_zero >= FLT_MIN &&
        (isnan(c->min_exact_nonzero) ? c->max_exact_at_zero < 0x1p-14
                                     : c->max_exact_at_zero <= c->min_exact_nonzero * (1.0 + 1e-3));
    if (!over && !under) return 0;
    /* values lost below a narrow format's range are the range's doing only where they are most
     * of what fails: a narrow storage also rounds every ordinary value beyond the bound, and that
     * precision is what training meets (the flushes are its tail) */
    if (!over && 2 * (c->n_zero_introduced - g->n_zero_introduced) < c->n_over_bound &&
        c->test_mant_bits > 0 && c->test_mant_bits <= STORAGE_BITS_MAX)
        return 0;
    /* name the format whose limits bracket the thresholds: fp16 overflows from 65520 (max
     * 65504) and rounds to 0 at or below 2^-25; bf16 overflows near FLT_MAX */
    const char *fmt = "?";
    if (over && c->max_exact_finite <= 65520.0 && c->min_exact_at_inf >= 65504.0)
        fmt = "fp16";
    else if (over && c->min_exact_at_inf >= 3.38e38)
        fmt = "bf16";
    else if (!over && !isnan(c->min_exact_nonzero) && c->max_exact_at_zero >= 0x1p-26 &&
             c->max_exact_at_zero <= 0x1p-25 * (1.0 + 1e-6) &&
             c->min_exact_nonzero >= 0x1p-25 * (1.0 - 1e-3))
        fmt = "fp16";
    peat_finding *f = emit(o, PEAT_FIND_RANGE, 0.9, PEAT_ACCEPT_FAIL, "fmt=%s", fmt);
    if (over)
        ev(f,
           "%lld elements became Inf, all where |exact| >= %.6g; every finite output has "
           "|exact| <= %.6g",
           (long long)(c->n_inf - g->n_inf), c->min_exact_at_inf, c->max_exact_finite);
    if (under && !isnan(c->min_exact_nonzero))
        ev(f,
           "%lld elements flushed to 0 beyond the bound, all where |exact| <= %.6g (above "
           "FLT_MIN); every nonzero output has |exact| >= %.6g",
           (long long)(c->n_zero_introduced - g->n_zero_introduced), c->max_exact_at_zero,
           c->min_exact_nonzero);
    else if (under)
        ev(f, "all %lld nonzero results flushed to 0 (largest |exact| %.6g, above FLT_MIN)",
           (long long)(c->n_zero_introduced - g->n_zero_introduced), c->max_exact_at_zero);
    return 1;
}

static int rule_ftz(const facts *x, out_list *o)
{
    const peat_signature *c = x->c, *g = x->g;
    int64_t extra = c->n_err_subnormal_exact - g->n_err_subnormal_exact;
    if (extra <= 0 || (double)c->n_err_subnormal_exact < 0.9 * (double)c->n_over_bound) return 0;
    /* a flush leaves zeros: tiny values merely less accurate (an unnormalised intermediate
     * rounded in the subnormal range) are not flushed */
    if (2 * (c->n_zero_introduced - g->n_zero_introduced) < extra) return 0;
    peat_finding *f = emit(o, PEAT_FIND_FTZ, 0.9, PEAT_ACCEPT_FAIL, "n=%lld", (long long)extra);
    ev(f,
       "%lld of %lld errors beyond the bound are where 0 < |exact| < FLT_MIN (1.18e-38): "
       "subnormal results lost",
       (long long)c->n_err_subnormal_exact, (long long)c->n_over_bound);
    if (c->n_zero_introduced > 0)
        ev(f, "%lld of them are outputs flushed to 0 (largest such |exact| %.3g)",
           (long long)c->n_zero_introduced, c->max_exact_at_zero);
    return 1;
}

static int single_bit_pattern(const facts *x)
{
    return x->gross > 0 && x->c->gross_single_bit >= SINGLE_BIT_MIN &&
           x->top_bit_share >= ONE_BIT_MIN;
}

static int rule_stuck(const facts *x, out_list *o)
{
    const peat_signature *c = x->c;
    if (!single_bit_pattern(x)) return 0;
    int one_way = c->gross_dir_set >= ONE_WAY || c->gross_dir_set <= 1.0 - ONE_WAY;
    int many = (double)c->n_gross > FEW_FRAC * (double)c->n_elems;
    int strided = c->gross_stride > 1 && c->n_gross >= STUCK_MIN_STRIDED;
    if (!one_way || !(many || strided)) return 0;
    int value = c->gross_dir_set >= ONE_WAY;
    /* every output on a grid of test_mant_bits significand bits has the bits below it cleared:
     * a bit "stuck" at 0 there is the narrower format's (a value stored as bf16, truncated or
     * rounded), which the precision rules name */
    if (!value && c->test_mant_bits > 0 && x->top_bit < 24 - c->test_mant_bits) return 0;
    peat_finding *f =
        emit(o, PEAT_FIND_STUCK_BIT, 0.85, PEAT_ACCEPT_FAIL, "bit=%d,value=%d,stride=%lld",
             x->top_bit, value, (long long)c->gross_stride);
    ev(f, "%lld elements (%.2f%%) off by a single bit, %.0f%% of them at bit %d",
       (long long)c->n_gross, 100.0 * (double)c->n_gross / (double)c->n_elems,
       100.0 * x->top_bit_share, x->top_bit);
    ev(f, "the bit is always %s (%.0f%% of cases): forced, not flipped", value ? "set" : "cleared",
       100.0 * (value ? c->gross_dir_set : 1.0 - c->gross_dir_set));
    if (c->gross_stride > 1)
        ev(f, "affected elements lie on a lane pattern: flat index distances share the factor %lld",
           (long long)c->gross_stride);
    return 1;
}

static int rule_bitflip(const facts *x, out_list *o)
{
    const peat_signature *c = x->c;
    if (!single_bit_pattern(x)) return 0;
    int few = c->n_gross <= FEW_ABS || (double)c->n_gross <= FEW_FRAC * (double)c->n_elems;
    if (!few) return 0;
    peat_finding *f = emit(o, PEAT_FIND_BITFLIP, 0.85, PEAT_ACCEPT_FAIL, "bit=%d,count=%lld",
                           x->top_bit, (long long)c->n_gross);
    ev(f,
       "%lld of %lld elements wrong, each by one flipped bit (%.0f%% at bit %d); max error "
       "%.3g x the bound",
       (long long)c->n_gross, (long long)c->n_elems, 100.0 * x->top_bit_share, x->top_bit,
       c->max_norm);
    ev(f, "all other elements as accurate as golden: median error %.3g x the bound (golden %.3g)",
       c->p50_norm, x->g->p50_norm);
    return 1;
}

static int rule_tile(const facts *x, out_list *o)
{
    const peat_signature *c = x->c;
    /* zeros filling a box at the output's edge are an unwritten region whatever its size (a
     * batch entry or a whole tile row never written); other boxes must be at most half */
    int unwritten = c->n_zero_introduced >= (int64_t)(ZERO_SHARE * (double)c->n_gross) &&
                    (c->box_at_bottom || c->box_at_right) && c->box_share < 1.0;
    if (x->gross < TILE_MIN || isnan(c->box_fill) || c->box_fill < TILE_FILL_MIN ||
        (c->box_share > TILE_SHARE_MAX && !unwritten) || (c->gross_single_bit >= SINGLE_BIT_MIN))
        return 0;
    /* a block is a block: one wrong element per tensor is a wrong element, not a tile */
    if (c->box_rows * c->box_cols < TILE_MIN) return 0;
    int brow = c->box_at_bottom && c->box_cols == c->box_tensor_cols;
    int bcol = c->box_at_right && c->box_rows == c->box_tensor_rows;
    const char *kind =
        c->n_zero_introduced >= (int64_t)(0.9 * (double)c->n_gross) ? "zero" : "wrong";
    peat_finding *f;
    if (brow || bcol)
        f = emit(o, PEAT_FIND_TILE, 0.85, PEAT_ACCEPT_FAIL,
                 "boundary,%s=%lld,kind=%s,shape=%lldx%lld", brow ? "rows" : "cols",
                 (long long)(brow ? c->box_rows : c->box_cols), kind, (long long)c->box_tensor_rows,
                 (long long)c->box_tensor_cols);
    else
        f = emit(o, PEAT_FIND_TILE, 0.85, PEAT_ACCEPT_FAIL,
                 "rows=%lld,cols=%lld,kind=%s,shape=%lldx%lld", (long long)c->box_rows,
                 (long long)c->box_cols, kind, (long long)c->box_tensor_rows,
                 (long long)c->box_tensor_cols);
    ev(f,
       "%lld gross errors fill %.0f%% of a %lldx%lld block of the %lldx%lld output (%.1f%% of it)",
       (long long)c->n_gross, 100.0 * c->box_fill, (long long)c->box_rows, (long long)c->box_cols,
       (long long)c->box_tensor_rows, (long long)c->box_tensor_cols, 100.0 * c->box_share);
    if (brow || bcol)
        ev(f, "the block is the last %lld %s: an unhandled edge tile",
           (long long)(brow ? c->box_rows : c->box_cols), brow ? "row(s)" : "column(s)");
    if (c->n_zero_introduced > 0)
        ev(f, "%lld of them are zeros where the exact value is not",
           (long long)c->n_zero_introduced);
    return 1;
}

static int rule_nan(const facts *x, out_list *o)
{
    const peat_signature *c = x->c;
    if (x->nonfinite <= 0) return 0;
    peat_finding *f =
        emit(o, PEAT_FIND_NAN, 0.95, PEAT_ACCEPT_FAIL, "nan=%lld,inf=%lld",
             (long long)(c->n_nan - x->g->n_nan), (long long)(c->n_inf - x->g->n_inf));
    ev(f, "%lld NaN and %lld Inf outputs where the exact result is finite (golden has %lld)",
       (long long)c->n_nan, (long long)c->n_inf, (long long)(x->g->n_nan + x->g->n_inf));
    return 1;
}

/* Whether the transient evidence holds call by call: some call run twice gave two different
 * outputs, every such call differs in a few elements only (a race or an order change differs in
 * many), and no output tensor holds more than a few gross errors. Decided per call, so that an
 * op with 4-16 outputs a call (a bias gradient) is judged by its calls, not by the share of all
 * elements one upset makes. Signatures without per-call counts: the aggregate test. */
static int transient_evidence(const facts *x)
{
    const peat_signature *c = x->c;
    /* NaN/Inf introduced: the NAN rule names them (unwritten memory), transient or not */
    if (!(c->repeat_max_diff > 0.0) || x->gross <= 0 || x->nonfinite > 0) return 0;
    if (c->repeat_calls > 0)
        return c->repeat_calls_diff > 0 && c->repeat_calls_many == 0 && c->gross_tensors > 0 &&
               c->gross_tensors_many == 0;
    double few = FEW_FRAC * (double)c->n_elems;
    return (double)x->gross <= few && (double)c->repeat_n_diff <= (few > FEW_ABS ? few : FEW_ABS);
}

/* A few gross errors per call that do not repeat: a transient upset (SDC), not nondeterminism. */
static int rule_transient(const facts *x, out_list *o)
{
    const peat_signature *c = x->c;
    if (!transient_evidence(x)) return 0;
    double rate = (double)x->gross / (double)(c->n_calls > 0 ? c->n_calls : 1);
    /* the bit is named only where the errors are single-bit: a flip inside an accumulator is
     * spread by the terms added after it */
    peat_finding *f =
        c->gross_single_bit >= SINGLE_BIT_MIN
            ? emit(o, PEAT_FIND_BITFLIP, 0.8, PEAT_ACCEPT_FAIL,
                   "transient,bit=%d,count=%lld,rate=%.3g", x->top_bit, (long long)x->gross, rate)
            : emit(o, PEAT_FIND_BITFLIP, 0.8, PEAT_ACCEPT_FAIL, "transient,count=%lld,rate=%.3g",
                   (long long)x->gross, rate);
    ev(f,
       "%lld gross errors over %lld calls (%.3g per call), max %.3g x the bound; all other "
       "elements as accurate as golden",
       (long long)x->gross, (long long)c->n_calls,
       (double)x->gross / (double)(c->n_calls > 0 ? c->n_calls : 1), c->max_norm);
    ev(f,
       "%lld of %lld calls run twice gave different outputs, each in a few elements only (%lld in "
       "all): the error does not repeat, a transient upset (SDC), not an order-dependent "
       "reduction; at most a few gross errors in each of the %lld calls that have any",
       (long long)c->repeat_calls_diff, (long long)c->repeat_calls, (long long)c->repeat_n_diff,
       (long long)c->gross_tensors);
    if (c->gross_single_bit > 0)
        ev(f, "%.0f%% of them differ from the rounded exact value in one bit (most often bit %d)",
           100.0 * c->gross_single_bit, x->top_bit);
    return 1;
}

/* A formula error of any size: another function, computed the same way every time. Dense
 * (gross errors, beyond 16 bounds, in >= 5% of the elements), reproducible (the repeats agree),
 * not on a narrower grid (a coarser format stores fewer bits: the storage rule), and systematic:
 * a signed bias beyond 6 sigma in an error that is not smooth and exceeds 2^17 fp32 bounds
 * somewhere (rounding to any format and noise are unbiased; no 16-bit format, even truncating,
 * errs that far), or a smooth deviation too large for an approximation (fast exp/tanh/erf
 * forms keep 1e-3 of the scale; smaller smooth ones, biased as they are, are APPROX).
 * A kernel that declares a narrower format is left to the precision rules. */
static int formula_evidence(const facts *x, const peat_detector_ctx *ctx, int *smooth)
{
    const peat_signature *c = x->c;
    int acc_narrow;
    if (declared_bits(ctx, &acc_narrow) < 24 || x->nonfinite > 0) return 0;
    if (c->repeat_max_diff > 0.0 || c->test_mant_bits <= STORAGE_BITS_MAX) return 0;
    if (x->gross <= 0 || (double)x->gross < FORMULA_GROSS_MIN * (double)c->n_elems) return 0;
    if (c->gross_single_bit >= SINGLE_BIT_MIN) return 0; /* a bit pattern: the bit rules */
    double rel = c->max_abs_exact > 0 ? c->max_abs / c->max_abs_exact : INFINITY;
    int is_smooth = !isnan(c->err_roughness) && c->err_roughness <= SMOOTH_MAX &&
                    c->err_sign_changes <= SMOOTH_SIGN_MAX;
    /* a smooth error within 1e-3 of the scale is an approximation (APPROX), biased or not */
    *smooth = is_smooth && rel > APPROX_SMALL;
    /* bf16 (8 bits), the coarsest 16-bit format, rounds 2^16 times coarser than fp32; toward
     * zero, twice that: a larger error is beyond what any such format or mode explains */
    int beyond_formats = c->max_norm > FORMULA_BEYOND_BF16;
    return *smooth || (!is_smooth && beyond_formats && fabs(c->bias_t) >= BIAS_T_MIN);
}

static int rule_formula(const facts *x, const peat_detector_ctx *ctx, out_list *o)
{
    const peat_signature *c = x->c;
    int smooth = 0;
    if (!formula_evidence(x, ctx, &smooth)) return 0;
    peat_finding *f = emit(o, PEAT_FIND_WRONG_RESULT, 0.8, PEAT_ACCEPT_FAIL,
                           "formula,bits=%.1f,gross=%.3f,bias_t=%.1f", c->eff_bits,
                           (double)x->gross / (double)c->n_elems, c->bias_t);
    ev(f,
       "another function, the same every time: %lld of %lld elements (%.1f%%) beyond %g bounds, "
       "the repeated calls bit-identical, outputs on fp32's grid (%d bits, no narrower format)",
       (long long)x->gross, (long long)c->n_elems, 100.0 * (double)x->gross / (double)c->n_elems,
       PEAT_GROSS_FACTOR, c->test_mant_bits);
    if (smooth)
        ev(f,
           "the error is a smooth function of the input (successive-difference ratio %.3f, sign "
           "changes %.3f per step) and %.2g of the output scale: beyond what an approximation "
           "keeps (1e-3)",
           c->err_roughness, c->err_sign_changes, c->max_abs / c->max_abs_exact);
    else
        ev(f,
           "the errors are biased (t = %.1f; rounding to any format and noise are unbiased, "
           "|t| < 6): a systematic deviation, not precision",
           c->bias_t);
    ev(f, "effective precision %.1f bits (golden %.1f); max error %.3g x the bound", c->eff_bits,
       x->g->eff_bits, c->max_norm);
    return 1;
}

/* Gross errors in many elements with next to no correct bits left: no precision format explains
 * them (fp8 e5m2 still keeps 3 bits); the arithmetic computes another function. */
static int rule_wrong_result(const facts *x, const peat_detector_ctx *ctx, out_list *o)
{
    const peat_signature *c = x->c;
    /* inputs outside a declared narrow format's range lose every bit legitimately: that is the
     * input-range finding (rule 16a), not another function */
    if (ctx && (ctx->in_frac_below_normal >= 1e-3 || ctx->in_frac_above_max >= 1e-3)) return 0;
    if (x->gross <= 0 || (double)x->gross < WRONG_GROSS_MIN * (double)c->n_elems ||
        isnan(c->eff_bits) || c->eff_bits > WRONG_BITS_MAX || c->gross_single_bit >= SINGLE_BIT_MIN)
        return 0;
    peat_finding *f =
        emit(o, PEAT_FIND_WRONG_RESULT, 0.85, PEAT_ACCEPT_FAIL, "bits=%.1f,gross=%.3f", c->eff_bits,
             (double)x->gross / (double)c->n_elems);
    ev(f,
       "%lld of %lld elements (%.1f%%) wrong by more than %g bounds; effective precision %.1f "
       "bits (golden %.1f)",
       (long long)c->n_gross, (long long)c->n_elems,
       100.0 * (double)c->n_gross / (double)c->n_elems, PEAT_GROSS_FACTOR, c->eff_bits,
       x->g->eff_bits);
    ev(f, "fewer correct bits than even fp8 (e5m2) keeps: not a precision choice but another "
          "function (wrong index, bound, mask or scale)");
    ev(f, "max error %.3g x the bound; median %.3g x", c->max_norm, c->p50_norm);
    return 1;
}

/* A bit position (above the two rounding-level bits) set or cleared far more often than the other
 * way round, in many elements: a stuck low bit that stays within the bound. */
static double bit_excess(const facts *x, int b)
{
    const peat_signature *c = x->c, *g = x->g;
    return fabs((c->bit_set[b] - c->bit_clr[b]) - (g->bit_set[b] - g->bit_clr[b]));
}

static int rule_stuck_lowbit(const facts *x, out_list *o)
{
    const peat_signature *c = x->c, *g = x->g;
    /* only where the errors stay inside the bound (a stuck high bit is gross and caught above) */
    if (c->test_mant_bits < 24 || g->test_mant_bits < 24 || c->n_elems == 0 || c->max_norm > x->env)
        return 0;
    int best = -1;
    double best_z = 0.0;
    for (int b = 2; b < 23; b++) {
        double s = c->bit_set[b], r = c->bit_clr[b];
        double excess = bit_excess(x, b);
        double hi = s > r ? s : r, lo = s > r ? r : s;
        double z = fabs(s - r) / sqrt((s + r) / (double)c->n_elems + 1e-300);
        /* one isolated position: trailing zeros of few-bit results bias a whole run of low bits */
        int isolated = bit_excess(x, b - 1) < 0.5 * excess && bit_excess(x, b + 1) < 0.5 * excess;
        if (excess >= LOWBIT_EXCESS && hi >= LOWBIT_RATIO * lo && z >= LOWBIT_Z && isolated &&
            z > best_z)
            best = b, best_z = z;
    }
    if (best < 0) return 0;
    int value = c->bit_set[best] > c->bit_clr[best];
    peat_finding *f =
        emit(o, PEAT_FIND_STUCK_BIT, 0.7, PEAT_ACCEPT_FAIL, "bit=%d,value=%d", best, value);
    ev(f,
       "bit %d differs from the rounded exact value in %.1f%% of elements, %.1f%% %s vs %.1f%% "
       "%s (golden: %.1f%% / %.1f%%)",
       best, 100.0 * c->bit_hist[best], 100.0 * (value ? c->bit_set[best] : c->bit_clr[best]),
       value ? "set" : "cleared", 100.0 * (value ? c->bit_clr[best] : c->bit_set[best]),
       value ? "cleared" : "set", 100.0 * g->bit_set[best], 100.0 * g->bit_clr[best]);
    ev(f, "max error %.3g x the bound: within it, but not a rounding pattern", c->max_norm);
    return 1;
}

static int rule_truncation(const facts *x, out_list *o)
{
    const peat_signature *c = x->c, *g = x->g;
    if (isnan(c->frac_err_negative) || isnan(c->bias_t) || c->frac_err_negative < TOWARD_ZERO_MIN ||
        c->bias_t > -BIAS_T_MIN || (!isnan(g->frac_err_negative) && g->frac_err_negative >= 0.65))
        return 0;
    peat_finding *f = emit(o, PEAT_FIND_TRUNCATION, 0.85, PEAT_ACCEPT_FAIL, "toward_zero=%.2f",
                           c->frac_err_negative);
    ev(f, "%.0f%% of the non-zero errors shrink |x| (golden: %.0f%%); bias t = %.1f",
       100.0 * c->frac_err_negative, 100.0 * g->frac_err_negative, c->bias_t);
    ev(f, "max error %.3g x the bound; rms error %.2fx golden's", c->max_norm, x->rr);
    return 1;
}

static void precision_finding(const facts *x, const peat_detector_ctx *ctx, out_list *o,
                              int storage_bits)
{
    const peat_signature *c = x->c, *g = x->g;
    int acc_narrow;
    int p = declared_bits(ctx, &acc_narrow);
    /* accumulating in a narrow format loses another ~log2(sqrt(K)) bits: declared, so allowed */
    double slack = PREC_SLACK_BITS +
                   (acc_narrow ? 0.5 * log2((double)(c->depth_max > 1 ? c->depth_max : 1)) : 0.0);
    int ok = p < 24 && c->eff_bits >= (double)p - slack;
    const char *fn = fmt_for_bits(storage_bits < 24 ? storage_bits : (int)lround(c->eff_bits));
    peat_finding *f;
    if (storage_bits < 24)
        f = emit(o, PEAT_FIND_REDUCED_PRECISION, 0.85, ok ? PEAT_ACCEPT_WARN : PEAT_ACCEPT_FAIL,
                 "bits=%.1f,storage=%d", c->eff_bits, storage_bits);
    else
        f = emit(o, PEAT_FIND_REDUCED_PRECISION, 0.8, ok ? PEAT_ACCEPT_WARN : PEAT_ACCEPT_FAIL,
                 "bits=%.1f", c->eff_bits);
    ev(f, "effective precision %.1f bits (golden %.1f); rms error %.3gx golden's", c->eff_bits,
       g->eff_bits, x->rr);
    if (storage_bits < 24)
        ev(f, "every output fits in %d significand bits (%s-like storage)", storage_bits,
           fn ? fn : "narrow");
    else
        ev(f,
           "dense errors (top 1%% of elements carry %.0f%% of it), not scaling with |x| "
           "(rank correlation %.2f): rounded inputs%s%s",
           100.0 * c->top1pct_share, c->corr_err_input, fn ? ", like " : "", fn ? fn : "");
    ev(f, "max error %.3g x the fp32 bound, %.1f%% of elements beyond it", c->max_norm,
       100.0 * c->frac_over_bound);
    if (p < 24)
        ev(f, "kernel declares %d-bit arithmetic: measured %.1f bits is %s", p, c->eff_bits,
           ok ? "consistent with it (WARN)" : "below it (FAIL)");
    else
        ev(f, "kernel declares fp32 throughout: the precision loss is undeclared (FAIL)");
}

static int rule_precision_storage(const facts *x, const peat_detector_ctx *ctx, out_list *o)
{
    const peat_signature *c = x->c, *g = x->g;
    if (c->test_mant_bits <= 0 || c->test_mant_bits > STORAGE_BITS_MAX || g->test_mant_bits < 24 ||
        x->rr < 2.0)
        return 0;
    precision_finding(x, ctx, o, c->test_mant_bits);
    return 1;
}

static int worse_dense(const facts *x)
{
    return x->dense && !isnan(x->rr) && x->rr >= RMS_WORSE_MIN;
}

static int rule_approx(const facts *x, out_list *o)
{
    const peat_signature *c = x->c;
    if (!worse_dense(x) || isnan(c->err_roughness) || c->err_roughness > SMOOTH_MAX ||
        c->err_sign_changes > SMOOTH_SIGN_MAX)
        return 0;
    double rel = c->max_abs_exact > 0 ? c->max_abs / c->max_abs_exact : INFINITY;
    int small = rel <= APPROX_SMALL;
    peat_finding *f = emit(o, PEAT_FIND_APPROX, 0.8, small ? PEAT_ACCEPT_WARN : PEAT_ACCEPT_FAIL,
                           "max_abs=%.3g", c->max_abs);
    ev(f,
       "a small smooth input-dependent deviation, not a bug: the error varies smoothly with the "
       "input (successive-difference ratio %.3f, sign changes %.3f per step; noise gives ~1 and "
       "~0.5)",
       c->err_roughness, c->err_sign_changes);
    ev(f, "max error %.3g (%.2g of the largest |exact| %.3g); rms error %.3gx golden's", c->max_abs,
       rel, c->max_abs_exact, x->rr);
    if (!small) ev(f, "the deviation is larger than 1e-3 of the output scale (FAIL)");
    return 1;
}

static int rule_noise(const facts *x, out_list *o)
{
    const peat_signature *c = x->c, *g = x->g;
    if (!worse_dense(x) || isnan(c->corr_err_input) || c->corr_err_input < NOISE_CORR_MIN ||
        isnan(c->err_roughness) || c->err_roughness < NOISE_ROUGH_MIN ||
        (!isnan(g->corr_err_input) && c->corr_err_input < g->corr_err_input + NOISE_CORR_GAIN))
        return 0;
    /* median |N(0,1)| = 0.6745: the relative sigma from the median relative error */
    double sigma = c->median_rel / 0.6745;
    peat_finding *f = emit(o, PEAT_FIND_NOISE, 0.75, PEAT_ACCEPT_FAIL, "sigma=%.2g", sigma);
    ev(f,
       "dense unbiased error proportional to the value: rank correlation with |x| %.2f "
       "(golden %.2f), bias t = %.1f",
       c->corr_err_input, g->corr_err_input, c->bias_t);
    ev(f, "relative sigma ~%.2g (median relative error %.2g); rms error %.3gx golden's", sigma,
       c->median_rel, x->rr);
    return 1;
}

static int rule_precision(const facts *x, const peat_detector_ctx *ctx, out_list *o)
{
    if (!worse_dense(x)) return 0;
    precision_finding(x, ctx, o, 24);
    return 1;
}

static void within_evidence(const facts *x, peat_finding *f)
{
    const peat_signature *c = x->c, *g = x->g;
    if (x->env > 1.0)
        ev(f,
           "max error %.2f x the fp32 bound (golden's own max is %.2f x); candidate rms error "
           "%.2fx golden's",
           c->max_norm, g->max_norm, x->rr);
    else
        ev(f, "max error %.2f x the fp32 bound; candidate rms error %.2fx golden's", c->max_norm,
           x->rr);
}

static int rule_nondeterministic(const facts *x, out_list *o)
{
    const peat_signature *c = x->c;
    if (!(c->repeat_max_diff > 0.0)) return 0;
    int within = c->max_norm <= x->env && !(x->rr > RMS_SAME_MAX);
    peat_finding *f =
        emit(o, PEAT_FIND_NONDETERMINISTIC, 0.95, within ? PEAT_ACCEPT_WARN : PEAT_ACCEPT_FAIL,
             "max_diff=%.3g", c->repeat_max_diff);
    ev(f, "two runs on the same input differ in %lld elements, by up to %.3g",
       (long long)c->repeat_n_diff, c->repeat_max_diff);
    if (within) within_evidence(x, f);
    return 1;
}

static int rule_within(const facts *x, out_list *o)
{
    if (x->c->max_norm > x->env || x->rr > RMS_SAME_MAX || x->nonfinite > 0) return 0;
    peat_finding *f =
        emit(o, PEAT_FIND_WITHIN_BOUND, 0.9, PEAT_ACCEPT_PASS, "max_norm=%.3g", x->c->max_norm);
    within_evidence(x, f);
    return 1;
}

/* Errors beyond what the declared narrow input format explains, on inputs that leave that
 * format's normal range: the kernel's inputs underflow (or overflow) when rounded, as unscaled
 * gradients do in fp16. Reached only where the errors are otherwise unexplained. */
#define RANGE_INPUT_FRAC_MIN 1e-3
static int rule_input_range(const facts *x, const peat_detector_ctx *ctx, out_list *o)
{
    if (!ctx || !(ctx->declared_in == PEAT_DTYPE_F16 || ctx->declared_in == PEAT_DTYPE_BF16))
        return 0;
    double below = ctx->in_frac_below_normal, above = ctx->in_frac_above_max;
    int under = !isnan(below) && below >= RANGE_INPUT_FRAC_MIN,
        over = !isnan(above) && above >= RANGE_INPUT_FRAC_MIN;
    if (!under && !over) return 0;
    const char *fmt = ctx->declared_in == PEAT_DTYPE_F16 ? "fp16" : "bf16";
    double lo = ctx->declared_in == PEAT_DTYPE_F16 ? 0x1p-14 : FLT_MIN;
    double hi = ctx->declared_in == PEAT_DTYPE_F16 ? 65504.0 : 3.3895e38;
    peat_finding *f = emit(o, PEAT_FIND_RANGE, 0.75, PEAT_ACCEPT_FAIL, "fmt=%s,inputs=%s", fmt,
                           under && over ? "underflow+overflow"
                           : under       ? "underflow"
                                         : "overflow");
    if (under)
        ev(f,
           "%.2f%% of the kernel's nonzero input values lie below %s's smallest normal %.3g: "
           "rounded "
           "to %s they lose precision or flush to 0 (unscaled gradients; loss scaling avoids it)",
           100.0 * below, fmt, lo, fmt);
    if (over)
        ev(f, "%.2f%% of the input values exceed %s's largest finite %.6g", 100.0 * above, fmt, hi);
    ev(f,
       "%lld elements (%.2f%%) beyond the bound, max error %.3g x it, effective bits %.1f: more "
       "than "
       "%s rounding of in-range inputs explains",
       (long long)x->c->n_over_bound, 100.0 * x->c->frac_over_bound, x->c->max_norm, x->c->eff_bits,
       fmt);
    return 1;
}

static void out_of_bound(const facts *x, out_list *o)
{
    const peat_signature *c = x->c;
    peat_finding *f = emit(o, PEAT_FIND_OUT_OF_BOUND, 0.7, PEAT_ACCEPT_FAIL, "n=%lld",
                           (long long)c->n_over_bound);
    ev(f, "%lld elements (%.2f%%) beyond the bound, max error %.3g x it (golden's max %.3g x)",
       (long long)c->n_over_bound, 100.0 * c->frac_over_bound, c->max_norm, x->g->max_norm);
    if (single_bit_pattern(x))
        ev(f,
           "%lld gross errors, %.0f%% single-bit at bit %d: neither few (bitflip) nor forced "
           "(stuck)",
           (long long)c->n_gross, 100.0 * x->top_bit_share, x->top_bit);
    if (c->n_gross > 0 && c->box_rows * c->box_cols <= TILE_MIN && c->n_calls > 0)
        ev(f,
           "%lld gross errors over %lld output tensors (%.2g per tensor); the worst tensor's fit "
           "in a "
           "%lldx%lld region of its %lldx%lld view: isolated wrong elements",
           (long long)c->n_gross, (long long)c->n_calls, (double)c->n_gross / (double)c->n_calls,
           (long long)c->box_rows, (long long)c->box_cols, (long long)c->box_tensor_rows,
           (long long)c->box_tensor_cols);
    ev(f, "rms error %.3gx golden's; matches no known error model", x->rr);
}

static void unknown(const facts *x, out_list *o, const char *why)
{
    const peat_signature *c = x->c;
    /* WARN: UNKNOWN is only reached with every error inside the bound envelope; errors beyond it
     * that no rule explains are OUT_OF_BOUND and FAIL */
    peat_finding *f = emit(o, PEAT_FIND_UNKNOWN, 0.5, PEAT_ACCEPT_WARN, "sig=attached");
    ev(f, "%s", why);
    ev(f, "max error %.3g x the bound, rms error %.3gx golden's, effective bits %.1f (golden %.1f)",
       c->max_norm, x->rr, c->eff_bits, x->g->eff_bits);
    ev(f, "top 1%% share %.2f, bias t %.1f, input correlation %.2f, roughness %.2f",
       c->top1pct_share, c->bias_t, c->corr_err_input, c->err_roughness);
}

int peat_detector_run(const peat_signature *cand, const peat_signature *golden,
                      const peat_detector_ctx *ctx, peat_finding *out, int max)
{
    out_list o = {.f = out, .n = 0, .max = max};
    if (!cand || !golden || !out || max <= 0) return 0;
    facts x = facts_of(cand, golden);
    if (cand->n_elems == 0 || golden->n_elems != cand->n_elems) {
        peat_finding *f = emit(&o, PEAT_FIND_UNKNOWN, 0.0, PEAT_ACCEPT_WARN, "sig=attached");
        ev(f, "nothing to compare: candidate has %lld elements, golden %lld",
           (long long)cand->n_elems, (long long)golden->n_elems);
        return o.n;
    }
    /* the first rule that fires names the primary finding; nondeterminism is reported besides */
    /* a transient upset is decided by its repeats before the pattern rules: a flip of one
     * exponent bit of values of one magnitude goes one way, like a stuck bit, but does not
     * repeat */
    int fired = rule_bit_exact(&x, &o) || rule_range(&x, &o) || rule_ftz(&x, &o) ||
                rule_transient(&x, &o) || rule_stuck(&x, &o) || rule_bitflip(&x, &o) ||
                rule_tile(&x, &o) || rule_nan(&x, &o) || rule_wrong_result(&x, ctx, &o) ||
                rule_formula(&x, ctx, &o) || rule_stuck_lowbit(&x, &o) || rule_truncation(&x, &o) ||
                rule_precision_storage(&x, ctx, &o) || rule_approx(&x, &o) || rule_noise(&x, &o) ||
                rule_precision(&x, ctx, &o);
    int primary = o.n ? o.f[0].cls : PEAT_FIND_COUNT;
    /* truncating to fewer bits, or storing in a narrow format that also overflows, is also a
     * precision loss: say both */
    if (fired && (primary == PEAT_FIND_TRUNCATION || primary == PEAT_FIND_RANGE) &&
        cand->test_mant_bits > 0 && cand->test_mant_bits <= STORAGE_BITS_MAX && x.rr >= 2.0)
        precision_finding(&x, ctx, &o, cand->test_mant_bits);
    /* a precision below the declared format's, on inputs that leave its range: say why */
    if (fired && primary == PEAT_FIND_REDUCED_PRECISION && o.f[0].accept == PEAT_ACCEPT_FAIL)
        rule_input_range(&x, ctx, &o);
    int nondet = rule_nondeterministic(&x, &o);
    if (fired) return o.n;
    if (!nondet && rule_within(&x, &o)) return o.n;
    if (cand->max_norm > x.env || x.nonfinite > 0) {
        if (!rule_input_range(&x, ctx, &o)) out_of_bound(&x, &o);
    } else if (!nondet || x.rr > RMS_SAME_MAX)
        unknown(&x, &o,
                "errors stay within the bound but are not like golden's and match no "
                "known model");
    return o.n;
}
