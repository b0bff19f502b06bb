/* diagnose.c: differential diagnosis: the class of a failing kernel's error decided by the
 * experiments whose outcomes differ between the competing explanations (docs/detector.md,
 * "Differential diagnosis"). Each step names the experiment that decided and what it ruled out. */
#include "detector/detector.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Thresholds (docs/detector.md says why each has its value). */
#define CORR_FORMULA  0.8 /* jitter: a smooth function of the inputs keeps its errors */
#define CORR_ROUNDING 0.4 /* rounding errors redrawn: |corr| of independent draws stays below */
#define OVERLAP_SAME  0.8 /* permutation: errors where they were (or where the values went) */
#define OVERLAP_OTHER 0.5 /* ... and clearly not the other way */
#define CONFINED_MAX  0.5 /* a structural defect leaves at least half of the output right */
#define CONFINED_MIN                                                                               \
    1                     /* and a gross error to follow (one is enough: a random permutation      \
                             moves a value off its position with probability 1 - 1/n) */
#define SUBNORMAL_MIN 0.9 /* errors at |exact| < FLT_MIN: flush to zero */

int peat_detector_diagnosable(const peat_finding *f)
{
    if (!f || f->accept != PEAT_ACCEPT_FAIL) return 0;
    switch (f->cls) {
    case PEAT_FIND_WRONG_RESULT:
    case PEAT_FIND_REDUCED_PRECISION:
    case PEAT_FIND_TRUNCATION:
    case PEAT_FIND_FTZ:
    case PEAT_FIND_RANGE:
    case PEAT_FIND_TILE:
    case PEAT_FIND_NAN:
    case PEAT_FIND_OUT_OF_BOUND:
    case PEAT_FIND_APPROX: /* failing: a smooth deviation beyond what shipped approximations keep */
    case PEAT_FIND_NOISE: /* failing and deterministic (the repeats agree): rounding or a formula */
        return 1;
    case PEAT_FIND_BITFLIP: /* a flip that repeats is no upset: what else it is, the tests say */
        return !strstr(f->params, "transient");
    default:
        return 0;
    }
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

/* A new finding of class c (FAIL, as the one it replaces), params and the deciding experiment. */
static void decide(peat_finding *out, const peat_finding *was, peat_finding_class c,
                   const char *params, const char *experiment, const char *ruled_out)
{
    if (c == was->cls) { /* the class stands: its evidence follows the experiment's */
        *out = *was;
        int keep =
            was->n_evidence < PEAT_MAX_EVIDENCE - 2 ? was->n_evidence : PEAT_MAX_EVIDENCE - 2;
        memcpy(out->evidence[2], was->evidence[0], (size_t)keep * sizeof out->evidence[0]);
        out->n_evidence = keep + 2;
    } else {
        memset(out, 0, sizeof *out);
        out->cls = c, out->accept = was->accept, out->confidence = 0.9;
        snprintf(out->params, sizeof out->params, "%s", params);
        out->n_evidence = 2;
    }
    snprintf(out->experiment, sizeof out->experiment, "%s", experiment);
    snprintf(out->ruled_out, sizeof out->ruled_out, "%s", ruled_out);
}

static void set_ev(peat_finding *f, int i, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void set_ev(peat_finding *f, int i, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->evidence[i], sizeof f->evidence[0], fmt, ap);
    va_end(ap);
}

/* The experiments that ran, "jitter, permutation, ..." into buf. */
static void tried(const peat_diagnosis *d, char *buf, size_t n)
{
    buf[0] = 0;
    for (int k = 0; k < PEAT_EXP_COUNT; k++) {
        if (!d->exp[k].ran) continue;
        size_t w = strlen(buf);
        snprintf(buf + w, n - w, "%s%s%s", w ? ", " : "", peat_analyzer_exp_name((peat_exp_kind)k),
                 d->exp[k].ran < 0 ? " (kernel failed)" : "");
    }
    if (!buf[0]) snprintf(buf, n, "none applies to this op");
}

static const peat_exp_outcome *ran(const peat_diagnosis *d, peat_exp_kind k)
{
    return d->exp[k].ran == 1 ? &d->exp[k] : NULL;
}

/* The precision family (a rounding effect: exact on exactly representable data, redrawn by a
 * jitter): truncation when the errors shrink |x|, else a lower precision. */
static void rounding_class(const peat_finding *was, const peat_diagnosis *d, peat_finding *out,
                           const char *experiment, const char *why)
{
    /* a range or flush finding is of the same family (exact on exactly representable data, no
     * other function): it keeps its class and parameters (fp16's range under a GEMM's
     * unscaled gradients) */
    /* ... unless a probe made it and the base is a recorded call: then the rounding the
     * recorded values show is what training meets (an fp16 sum loses its small terms on every
     * call and overflows only on the probe's values) */
    int by_probe = strstr(was->params, "probe=") || !strncmp(was->experiment, "probe:", 6);
    int range_family = (was->cls == PEAT_FIND_RANGE || was->cls == PEAT_FIND_FTZ) &&
                       !(by_probe && !strncmp(d->base, "recorded", 8));
    /* a lower precision whose errors all shrink |x| is a truncation to it */
    peat_finding_class c = was->cls == PEAT_FIND_REDUCED_PRECISION && d->base_toward_zero
                               ? PEAT_FIND_TRUNCATION
                           : was->cls == PEAT_FIND_TRUNCATION ||
                                   was->cls == PEAT_FIND_REDUCED_PRECISION || range_family
                               ? was->cls
                           : d->base_toward_zero ? PEAT_FIND_TRUNCATION
                                                 : PEAT_FIND_REDUCED_PRECISION;
    char params[128];
    if (c == PEAT_FIND_RANGE || c == PEAT_FIND_FTZ)
        snprintf(params, sizeof params, "%s", was->params);
    else if (c == PEAT_FIND_TRUNCATION)
        snprintf(params, sizeof params, "toward_zero,bits=%.1f", d->base_eff_bits);
    else
        snprintf(params, sizeof params, "bits=%.1f%s%s", d->base_eff_bits,
                 d->n_outputs > 1 ? ",outputs=" : "", d->n_outputs > 1 ? d->outputs : "");
    decide(out, was, c, params, experiment, "WRONG_RESULT, STRUCTURAL");
    set_ev(out, 0, "%s", why);
    set_ev(out, 1,
           "on the base call (%.80s) the kernel keeps %.1f effective bits%s: a rounding effect, "
           "%s",
           d->base, d->base_eff_bits, d->base_toward_zero ? ", its errors shrink |x|" : "",
           c == PEAT_FIND_TRUNCATION ? "rounding toward zero"
           : c == PEAT_FIND_RANGE    ? "values beyond a narrower format's range"
           : c == PEAT_FIND_FTZ      ? "tiny values flushed"
                                     : "a narrower format somewhere");
}

/* Per output (an optimizer's parameter and moments; layernorm's Y, mean and rstd): one output's
 * errors kept by the jitter (another formula there) while another's are redrawn (a narrower
 * format there) is a formula error in the first, whatever the mixture reads. Writes why. */
static int per_output_formula(const peat_diagnosis *d, const peat_exp_outcome *jt, char *why,
                              size_t n)
{
    int kept = -1, redrawn = -1;
    for (int o = 0; o < PEAT_MAX_IO; o++) {
        double c = jt->corr_out[o];
        if (isnan(c)) continue;
        if (c >= CORR_FORMULA && kept < 0) kept = o;
        if (fabs(c) <= CORR_ROUNDING && redrawn < 0) redrawn = o;
    }
    if (kept < 0 || redrawn < 0 || d->n_outputs < 2) return 0;
    snprintf(why, n,
             "judged output by output: with every input moved by up to 3%% the errors of output "
             "%d stay (correlation %.2f), another formula there, while those of output %d are "
             "redrawn (%.2f), a rounding effect there",
             kept, jt->corr_out[kept], redrawn, jt->corr_out[redrawn]);
    return 1;
}

/* The base's gross errors leave at least half of the outputs they are in right (a whole output
 * wrong, a running mean never updated beside a right Y, is no region of it). */
static int confined_errors(const peat_diagnosis *d)
{
    int64_t n = d->base_n_failing > 0 ? d->base_n_failing : d->base_n;
    return d->base_gross >= CONFINED_MIN && (double)d->base_gross <= CONFINED_MAX * (double)n;
}

/* Each step returns 1 when its experiment decided (out written). */

/* 1. NaN or Inf from finite inputs: an intermediate overflowing goes away at smaller inputs; a
 * NaN source (0/0, sqrt or log of a negative, an uninitialised value) stays. */
static int step_nonfinite(const peat_finding *was, const peat_diagnosis *d, peat_finding *out)
{
    if (d->base_nonfinite <= 0) return 0;
    const peat_exp_outcome *sd = ran(d, PEAT_EXP_SCALE_DOWN);
    if (sd && sd->n_nonfinite == 0 && !sd->fails) {
        decide(out, was, PEAT_FIND_RANGE, "overflow", "scale 2^-16", "NAN");
        set_ev(out, 0,
               "%lld NaN/Inf outputs on the base call (%.80s); with every input scaled by "
               "2^-16 none is left and the outputs are within the bound",
               (long long)d->base_nonfinite, d->base);
        set_ev(out, 1,
               "an intermediate leaves the format's range on large values: a NaN "
               "source would stay at any scale");
        return 1;
    }
    decide(out, was, PEAT_FIND_NAN, "source", sd ? "scale 2^-16" : "base call", "RANGE");
    set_ev(out, 0, "%lld NaN/Inf outputs from finite inputs on the base call (%.80s)",
           (long long)d->base_nonfinite, d->base);
    if (sd)
        set_ev(out, 1,
               "they stay with every input scaled by 2^-16 (%lld non-finite there): not an "
               "overflow, a NaN source (0/0, a root or log of a negative, an unset value)",
               (long long)sd->n_nonfinite);
    else
        set_ev(out, 1, "scaling the inputs does not apply: the NaN source stands");
    return 1;
}

/* 3. a probe pushing values toward overflow as the base (the recorded calls pass), its finite
 * errors gone with the inputs scaled by 2^-16: the values saturate or lose their range only
 * when large (a clamp at a narrower format's maximum), not a precision or formula error, which
 * would stay at ordinary values. */
static int step_saturation(const peat_finding *was, const peat_diagnosis *d, peat_finding *out)
{
    const peat_exp_outcome *sd = ran(d, PEAT_EXP_SCALE_DOWN);
    if (!d->base_overflow || !sd || sd->fails) return 0;
    decide(out, was, PEAT_FIND_RANGE, "large values", "scale 2^-16",
           "REDUCED_PRECISION, WRONG_RESULT");
    set_ev(out, 0,
           "the errors of the base call (%.80s) come only with its large values: with every input "
           "scaled by 2^-16 the outputs are within the bound (max %.3g bounds)",
           d->base, sd->max_norm);
    set_ev(out, 1,
           "the recorded calls, of ordinary values, fail on none of their own: a "
           "precision or formula error would");
    return 1;
}

/* 2. errors only where the exact result is subnormal, as zeros: flushed (before the saturation
 * step: a probe of large values also makes the subnormal results a flush loses, and scaling it
 * down takes both away). */
static int step_flush(const peat_finding *was, const peat_diagnosis *d, peat_finding *out)
{
    if (d->base_subnormal < SUBNORMAL_MIN) return 0;
    const peat_exp_outcome *su = ran(d, PEAT_EXP_SCALE_UP);
    decide(out, was, PEAT_FIND_FTZ, was->cls == PEAT_FIND_FTZ ? was->params : "",
           su ? "scale 2^+32" : "base call", "REDUCED_PRECISION, WRONG_RESULT");
    set_ev(out, 0,
           "%.0f%% of the base call's errors beyond the bound are where 0 < |exact| < FLT_MIN",
           100.0 * d->base_subnormal);
    if (su)
        set_ev(out, 1, "with every input scaled by 2^32 the outputs are %s: %s",
               su->fails ? "still wrong" : "within the bound",
               su->fails ? "the flush is not all of it"
                         : "a precision or formula error would stay");
    else
        set_ev(out, 1, "the values are lost below the normal range, not rounded");
    return 1;
}

/* 4. structure: with the inputs permuted, the errors stay at their positions (decided) or move
 * with the values (*moved: structure ruled out for the steps after). */
static int step_permutation(const peat_finding *was, const peat_diagnosis *d, peat_finding *out,
                            int *moved)
{
    const peat_exp_outcome *pm = ran(d, PEAT_EXP_PERMUTE);
    int confined = confined_errors(d);
    *moved = 0;
    if (!pm || !confined || isnan(pm->stay) || isnan(pm->follow)) return 0;
    if (!(pm->stay >= OVERLAP_SAME && pm->follow <= OVERLAP_OTHER)) {
        *moved = pm->follow >= OVERLAP_SAME && pm->stay <= OVERLAP_OTHER;
        return 0;
    }
    char params[64];
    snprintf(params, sizeof params, "positions,n=%lld", (long long)d->base_gross);
    decide(out, was, PEAT_FIND_TILE, was->cls == PEAT_FIND_TILE ? was->params : params,
           "permutation", "WRONG_RESULT, REDUCED_PRECISION");
    set_ev(out, 0,
           "with the inputs permuted the gross errors stay at the same output positions "
           "(overlap %.2f) and do not follow the values (%.2f)",
           pm->stay, pm->follow);
    set_ev(out, 1,
           "%lld of %lld outputs wrong on the base call (%.80s), the rest right: a region "
           "of the output computed wrongly, whatever the values",
           (long long)d->base_gross, (long long)d->base_n, d->base);
    return 1;
}

/* 5. whole planes of the base wrong (batch entries, heads, images x channels), the others within
 * the bound, and the permutation did not move the errors with the values: a plane mapped or
 * skipped wrongly (a formula would reach every plane) */
static int step_planes(const peat_finding *was, const peat_diagnosis *d, peat_finding *out,
                       int moved)
{
    if (!d->base_plane_confined || moved) return 0;
    char params[96];
    snprintf(params, sizeof params, "planes,wrong=%lld/%lld,first=%lld",
             (long long)d->base_wrong_planes, (long long)d->base_planes,
             (long long)d->base_first_wrong_plane);
    decide(out, was, PEAT_FIND_TILE, was->cls == PEAT_FIND_TILE ? was->params : params,
           "base call planes", "WRONG_RESULT, REDUCED_PRECISION");
    set_ev(out, 0,
           "on the base call (%.80s) %lld of its %lld planes (batch entries, heads or images x "
           "channels) are wrong, the first at %lld, and every other plane is within the bound",
           d->base, (long long)d->base_wrong_planes, (long long)d->base_planes,
           (long long)d->base_first_wrong_plane);
    set_ev(out, 1,
           "a formula or precision error would reach every plane alike: a plane mapped, "
           "skipped or indexed wrongly");
    return 1;
}

/* 6. one axis at a time (GEMM): wrong at this shape, right one row or column further. */
static int step_shape(const peat_finding *was, const peat_diagnosis *d, peat_finding *out)
{
    const peat_exp_outcome *sm = ran(d, PEAT_EXP_SHAPE_M), *sn = ran(d, PEAT_EXP_SHAPE_N);
    if (!sm || !sn || sm->fails || sn->fails) return 0;
    char params[128];
    snprintf(params, sizeof params, "shape=%lldx%lld%s", (long long)d->gemm_m, (long long)d->gemm_n,
             d->gemm_m == d->gemm_n ? ",square" : "");
    decide(out, was, PEAT_FIND_TILE, params, "shape axis", "WRONG_RESULT, REDUCED_PRECISION");
    set_ev(out, 0,
           "wrong on the base call (%.80s, M=%lld N=%lld) but within the bound with one row "
           "more (M+1) and with one column more (N+1)",
           d->base, (long long)d->gemm_m, (long long)d->gemm_n);
    set_ev(out, 1,
           "a path taken only at this shape%s: a formula or precision error would "
           "follow the data to the neighbouring shapes",
           d->gemm_m == d->gemm_n ? " (square: M == N)" : "");
    return 1;
}

/* Which of rounding or another function the data-exact experiments say: small integers (GEMM),
 * where every order and format is exact, else the jitter, which redraws every rounding error
 * and keeps a smooth function's. The experiment's name (NULL: neither decided), *function, and
 * why. */
static const char *rounding_or_function(const peat_diagnosis *d, int *function, char *why, size_t n)
{
    const peat_exp_outcome *in = ran(d, PEAT_EXP_INTEGERS), *jt = ran(d, PEAT_EXP_JITTER);
    if (in && in->exact_outputs) {
        *function = in->fails;
        snprintf(why, n,
                 *function ? "on small integers (values -1, 0, 1, at most 64 nonzero terms per "
                             "sum), where every order and every format of >= 8 bits gives the "
                             "exact value, %lld of %lld outputs are not exact"
                           : "on small integers (values -1, 0, 1, at most 64 nonzero terms per "
                             "sum, every partial sum exact in bf16 and wider) %lld of %lld "
                             "outputs are not exact",
                 (long long)in->n_not_exact, (long long)in->n_exact);
        return "small integers";
    }
    if (in) {
        *function = in->fails;
        if (*function)
            snprintf(why, n,
                     "on small integers, where every order and every format of >= 8 bits is "
                     "exact, %lld of %lld outputs are still wrong (max %.3g bounds)",
                     (long long)in->n_gross, (long long)in->n, in->max_norm);
        else
            snprintf(why, n,
                     "on small integers (every partial sum exact in bf16 and wider, any order) "
                     "the outputs are within the bound (max %.3g bounds)",
                     in->max_norm);
        return "small integers";
    }
    /* the op's identity broken beyond fp32's reach but within a format of >= 7 bits (RoPE's
     * pair lengths: a cos/sin table rounded to bf16 or fp16 changes them by up to its precision;
     * a wrong angle keeps them): the coefficients were rounded, which the jitter, moving the
     * inputs and not the positions, keeps */
    double inv = d->base_invariant, floor_ = fmax(d->base_invariant_golden, 0x1p-22);
    if (!isnan(inv) && !isnan(d->base_invariant_golden) && inv > 16.0 * floor_ && inv <= 0x1p-6) {
        *function = 0;
        snprintf(why, n,
                 "the op's identity (a rotation keeps each pair's length) is broken by up to "
                 "%.3g on the base call, the golden's by %.3g: coefficients rounded to a format "
                 "of about %.0f bits, not another function of the same kind",
                 inv, d->base_invariant_golden, -log2(inv));
        return "base call invariant";
    }
    if (jt && per_output_formula(d, jt, why, n)) {
        *function = 1;
        return "jitter";
    }
    if (!jt || isnan(jt->corr) || (jt->corr < CORR_FORMULA && fabs(jt->corr) > CORR_ROUNDING))
        return NULL;
    *function = jt->corr >= CORR_FORMULA;
    snprintf(why, n,
             *function ? "with every input moved by up to 3%% the errors stay what they were "
                         "(correlation %.2f): a smooth function of the inputs"
                       : "with every input moved by up to 3%% the errors are redrawn "
                         "(correlation %.2f with the base call's): rounding, not a smooth "
                         "function of the inputs",
             jt->corr);
    return "jitter";
}

/* 7. rounding (the precision family) or another function (WRONG_RESULT; a region the
 * permutation did not move stays STRUCTURAL: a function error confined to positions). */
static int step_function(const peat_finding *was, const peat_diagnosis *d, peat_finding *out,
                         int moved)
{
    int function = 0;
    char why[256];
    const char *exp_name = rounding_or_function(d, &function, why, sizeof why);
    if (!exp_name) return 0;
    if (!function) {
        rounding_class(was, d, out, exp_name, why);
        return 1;
    }
    /* the region stands where the base keeps to a region too, or where it was seen on several
     * shapes (a tile) or whole planes: a base wrong everywhere says another function */
    int confined = confined_errors(d);
    int region = confined || strstr(was->params, "tile=") || strstr(was->params, "planes");
    if (was->cls == PEAT_FIND_TILE && !moved && region) {
        decide(out, was, PEAT_FIND_TILE, was->params, exp_name,
               "REDUCED_PRECISION, TRUNCATION, FTZ, RANGE");
        set_ev(out, 0, "%s: not a rounding effect", why);
        set_ev(out, 1,
               "the errors keep to the region the recorded calls or probes show (the "
               "permutation does not move them with the values)");
        return 1;
    }
    if (d->base_extent && !moved) {
        decide(out, was, PEAT_FIND_STRUCTURAL, "shape", exp_name,
               "WRONG_RESULT, REDUCED_PRECISION, TRUNCATION, FTZ, RANGE");
        set_ev(out, 0, "%s: not a rounding effect", why);
        set_ev(out, 1,
               "the base (%.80s) holds the recorded values at another extent, and the recorded "
               "calls pass: a path taken at this extent (a loop's tail, a tile), not a formula, "
               "which would be wrong on the recorded calls' values too",
               d->base);
        return 1;
    }
    char params[128];
    snprintf(params, sizeof params, "formula,bits=%.1f%s%s", d->base_eff_bits,
             d->n_outputs > 1 ? ",outputs=" : "", d->n_outputs > 1 ? d->outputs : "");
    decide(out, was, PEAT_FIND_WRONG_RESULT, params, exp_name,
           "REDUCED_PRECISION, TRUNCATION, FTZ, RANGE, STRUCTURAL");
    set_ev(out, 0, "%s: another function, not a rounding effect", why);
    set_ev(out, 1, "%s",
           moved ? "the errors follow the values when the inputs are permuted: not a region"
                 : "a rounding error (any narrower format or mode) would vanish on exact data "
                   "or be redrawn by the jitter");
    return 1;
}

/* The primary finding stands when nothing decided (no base, a cancellation probe as the base,
 * no experiment conclusive); OUT_OF_BOUND (and a repeating BITFLIP) says what was tried. */
static void stands(const peat_finding *was, const peat_diagnosis *d, peat_finding *out)
{
    *out = *was;
    if (d->base_cancel) {
        snprintf(out->experiment, sizeof out->experiment, "%.90s", d->base);
        return;
    }
    if (!out->experiment[0]) snprintf(out->experiment, sizeof out->experiment, "recorded calls");
    if (!d->base[0]) {
        if (was->cls == PEAT_FIND_OUT_OF_BOUND)
            ev(out, "no single recorded call or probe fails on its own, so no experiment could "
                    "tell the explanations apart: matches no known model");
        return;
    }
    if (was->cls == PEAT_FIND_OUT_OF_BOUND || was->cls == PEAT_FIND_BITFLIP) {
        char list[200];
        tried(d, list, sizeof list);
        ev(out, "experiments tried on %.80s: %.150s; none told the explanations apart", d->base,
           list);
    }
}

int peat_detector_diagnose(const peat_finding *was, const peat_diagnosis *d, peat_finding *out)
{
    if (!peat_detector_diagnosable(was) || !d || !d->ran) return 0;
    int moved = 0;
    if (!d->base[0] || d->base_cancel ||
        !(step_nonfinite(was, d, out) || step_flush(was, d, out) || step_saturation(was, d, out) ||
          step_permutation(was, d, out, &moved) || step_planes(was, d, out, moved) ||
          step_shape(was, d, out) || step_function(was, d, out, moved)))
        stands(was, d, out);
    return 1;
}
