/* test_detector.c: every rule fires on its injected model through the real golden GEMM, stays
 * silent on clean kernels, and the catalogue's confusion matrix has its diagonal. The shapes and
 * seeds here were not used to set the thresholds (docs/detector.md lists the design cases). */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "analyzer/analyzer.h"
#include "harness/runtime/builtin.h"
#include "detector/detector.h"
#include "harness/run/calibrate.h"
#include "golden/golden.h"
#include "inject/inject.h"
#include "peat/peat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void setup(void)
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK, "registry init: %s", peat_error_last());
}

TestSuite(detector, .init = setup);

/* DATA_LARGE_F16: DATA_LARGE rounded to fp16 values, the inputs an amp-fp16 flow hands a GEMM */
typedef enum data_kind {
    DATA_NORMAL = 0,
    DATA_SUBNORMAL,
    DATA_LARGE,
    DATA_TINY_A,
    DATA_LARGE_F16
} data_kind;

typedef struct shape {
    int M, N, K;
} shape;

/* Test shapes and seeds (the thresholds were designed on 64x48 and 48x40 with other seeds). */
static const shape SHAPES[] = {{40, 56, 96}, {33, 70, 300}, {56, 24, 40}};
static const uint64_t SEEDS[] = {2024, 31337};

/* One GEMM call with its exact output and magnitudes. */
typedef struct call {
    peat_tensor *A, *B, *E, *D;
    double *mag;
    peat_args a; /* out[0] = D (F32) */
    shape s;
} call;

static call call_new(shape s, uint64_t seed, data_kind kind)
{
    call c = {.s = s};
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, s.M, s.K, &c.A), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, s.K, s.N, &c.B), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, s.M, s.N, &c.D), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F64, s.M, s.N, &c.E), PEAT_OK);
    /* output standard deviation ~ sa sb sqrt(K): ~1e-38 straddles FLT_MIN, ~3e4 crosses 65504 */
    double sa = 1.0, sb = 1.0;
    if (kind == DATA_SUBNORMAL) sa = 1e-19, sb = 1e-19 / sqrt((double)s.K);
    if (kind == DATA_LARGE || kind == DATA_LARGE_F16) sa = 3e4 / sqrt((double)s.K);
    if (kind == DATA_TINY_A) sa = 2e-6; /* A far below fp16's smallest normal 6.1e-5 */
    peat_rng_t *r = peat_rng_new(seed);
    peat_rng_fill_gaussian(r, c.A, sa);
    peat_rng_fill_gaussian(r, c.B, sb);
    peat_rng_free(r);
    for (int64_t i = 0; kind == DATA_LARGE_F16 && i < s.M * s.K; i++)
        peat_f32(c.A)[i] = peat_round_f16(peat_f32(c.A)[i]);
    for (int64_t i = 0; kind == DATA_LARGE_F16 && i < s.K * s.N; i++)
        peat_f32(c.B)[i] = peat_round_f16(peat_f32(c.B)[i]);
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[2] = s.M, p.i[3] = s.N, p.i[4] = s.K, p.i[5] = 1, p.f[0] = 1.0;
    const peat_tensor *in[2] = {c.A, c.B};
    peat_tensor *oe[1] = {c.E}, *od[1] = {c.D};
    peat_args ae = peat_args_make(PEAT_OP_GEMM, &p, 2, in, 1, oe);
    cr_assert_eq(peat_kernel_run(peat_registry_find("gemm_exact"), &ae), PEAT_OK, "%s",
                 peat_error_last());
    c.mag = malloc(sizeof(double) * (size_t)(s.M * s.N));
    cr_assert_not_null(c.mag);
    cr_assert_eq(peat_golden_magnitude(&ae, 0, c.E, c.mag), PEAT_OK, "%s", peat_error_last());
    c.a = peat_args_make(PEAT_OP_GEMM, &p, 2, in, 1, od);
    return c;
}

static void call_free(call *c)
{
    peat_tensor_free(c->A), peat_tensor_free(c->B), peat_tensor_free(c->E), peat_tensor_free(c->D);
    free(c->mag);
}

/* Runs the candidate (a kernel, or the golden with model m) on c into c->D. */
static void run_cand(call *c, const peat_kernel *k, const peat_inject_model_t *m, uint64_t seed)
{
    peat_status st = m ? peat_inject_run(m, k, &c->a, seed) : peat_kernel_run(k, &c->a);
    cr_assert_eq(st, PEAT_OK, "%s: %s", m ? peat_inject_model_spec(m) : k->name, peat_error_last());
}

/* Signature of the candidate on c, with a repeat run as a runner would do it: a new seed for
 * transient models, the same seed (the same simulated kernel) otherwise. */
static peat_signature cand_sig(call *c, const peat_kernel *k, const peat_inject_model_t *m,
                               uint64_t seed)
{
    peat_analyzer_acc_t *acc = peat_analyzer_acc_new(k->name, PEAT_OP_GEMM);
    cr_assert_not_null(acc);
    run_cand(c, k, m,
             m && peat_inject_model_transient(m) ? peat_seed_derive(seed, "repeat") : seed);
    peat_tensor *first;
    cr_assert_eq(peat_tensor_clone(c->D, &first), PEAT_OK);
    run_cand(c, k, m, seed);
    peat_analyzer_acc_add_repeat(acc, first, c->D);
    cr_assert_eq(peat_analyzer_acc_add(acc, c->D, c->E, c->mag, c->s.K, c->s.M, c->s.N), PEAT_OK,
                 "%s", peat_error_last());
    peat_signature s;
    cr_assert_eq(peat_analyzer_signature(acc, &s), PEAT_OK);
    peat_analyzer_acc_free(acc);
    peat_tensor_free(first);
    return s;
}

static const peat_kernel *kern(const char *name)
{
    const peat_kernel *k = peat_registry_find(name);
    cr_assert_not_null(k, "kernel %s", name);
    return k;
}

/* Findings for the candidate (kernel name, or spec on the golden GEMM) on one call. */
static int detect(call *c, const char *kernel, const char *spec, uint64_t seed,
                  const peat_detector_ctx *ctx, peat_finding *f, int max)
{
    peat_signature g = cand_sig(c, kern("gemm_golden"), NULL, seed);
    peat_inject_model_t *m = NULL;
    if (spec)
        cr_assert_eq(peat_inject_model_parse(spec, &m), PEAT_OK, "%s: %s", spec, peat_error_last());
    peat_signature s = cand_sig(c, kern(kernel ? kernel : "gemm_golden"), m, seed);
    peat_inject_model_free(m);
    int n = peat_detector_run(&s, &g, ctx, f, max);
    cr_assert_geq(n, 1, "the detector always says something");
    return n;
}

static void show(const char *what, const peat_finding *f, int n)
{
    for (int i = 0; i < n; i++) {
        cr_log_info("%s: %s(%s) %s", what, peat_detector_finding_name(f[i].cls), f[i].params,
                    peat_detector_acceptance_name(f[i].accept));
        for (int e = 0; e < f[i].n_evidence; e++) cr_log_info("    %s", f[i].evidence[e]);
    }
}

static int has_class(const peat_finding *f, int n, peat_finding_class c)
{
    for (int i = 0; i < n; i++)
        if (f[i].cls == c) return 1;
    return 0;
}

/* ---- clean kernels --------------------------------------------------------------------------- */

Test(detector, golden_against_itself_is_bit_exact)
{
    call c = call_new(SHAPES[0], SEEDS[0], DATA_NORMAL);
    peat_finding f[4];
    int n = detect(&c, "gemm_golden", NULL, 1, NULL, f, 4);
    cr_assert_eq(n, 1);
    cr_assert_eq(f[0].cls, PEAT_FIND_BIT_EXACT, "got %s", peat_detector_finding_name(f[0].cls));
    cr_assert_eq(f[0].accept, PEAT_ACCEPT_PASS);
    call_free(&c);
}

Test(detector, honest_reorders_and_blocking_are_within_bound)
{
    static const char *specs[] = {"reorder", "reorder(order=pairwise)",
                                  "reorder(order=split,split=5)", NULL};
    for (size_t si = 0; si < 3; si++)
        for (size_t ki = 0; ki < 2; ki++) {
            call c = call_new(SHAPES[si], SEEDS[ki], DATA_NORMAL);
            for (int m = 0; m < 4; m++) {
                peat_finding f[4];
                const char *spec = specs[m], *kernel = spec ? NULL : "gemm_new";
                int n = detect(&c, kernel, spec, SEEDS[ki] + 7, NULL, f, 4);
                if (f[0].cls != PEAT_FIND_WITHIN_BOUND && f[0].cls != PEAT_FIND_BIT_EXACT)
                    show(spec ? spec : kernel, f, n);
                cr_assert_eq(n, 1, "%s: one finding", spec ? spec : kernel);
                cr_assert(f[0].cls == PEAT_FIND_WITHIN_BOUND || f[0].cls == PEAT_FIND_BIT_EXACT,
                          "%s on %dx%dx%d: %s", spec ? spec : kernel, c.s.M, c.s.N, c.s.K,
                          peat_detector_finding_name(f[0].cls));
                cr_assert_eq(peat_detector_verdict(f, n), PEAT_ACCEPT_PASS);
            }
            call_free(&c);
        }
}

Test(detector, within_bound_evidence_carries_the_numbers)
{
    call c = call_new(SHAPES[1], SEEDS[1], DATA_NORMAL);
    peat_finding f[4];
    int n = detect(&c, NULL, "reorder", 3, NULL, f, 4);
    cr_assert_eq(f[0].cls, PEAT_FIND_WITHIN_BOUND);
    cr_assert_geq(f[0].n_evidence, 1);
    double a, b;
    cr_assert_eq(sscanf(f[0].evidence[0],
                        "max error %lf x the fp32 bound; candidate rms error %lfx golden's", &a,
                        &b),
                 2, "evidence: %s", f[0].evidence[0]);
    cr_assert(a >= 0.0 && a <= 1.0, "max error %g x bound", a);
    cr_assert(b > 0.3 && b < 3.0, "rms ratio %g", b);
    (void)n;
    call_free(&c);
}

/* ---- every rule fires on its model ------------------------------------------------------------
 */

typedef struct expect {
    const char *model; /* catalogue name */
    const char *spec;  /* what is injected */
    data_kind data;
    peat_finding_class cls;
    const char *param; /* substring of the finding's params, or NULL */
} expect;

static const expect EXPECT[] = {
    {"reorder", "reorder(order=reverse)", DATA_NORMAL, PEAT_FIND_WITHIN_BOUND, NULL},
    {"precision", "precision(fmt=bf16,where=inputs)", DATA_NORMAL, PEAT_FIND_REDUCED_PRECISION,
     "bits=7"},
    {"truncate", "truncate", DATA_NORMAL, PEAT_FIND_TRUNCATION, NULL},
    /* outputs cut to bf16: every low bit cleared is the format's, not a stuck bit */
    {"truncate", "truncate(bits=8)", DATA_NORMAL, PEAT_FIND_TRUNCATION, NULL},
    {"ftz", "ftz", DATA_SUBNORMAL, PEAT_FIND_FTZ, NULL},
    {"range", "range(fmt=fp16)", DATA_LARGE, PEAT_FIND_RANGE, "fmt=fp16"},
    {"bitflip", "bitflip(bit=27,count=2)", DATA_NORMAL, PEAT_FIND_BITFLIP, "bit=27"},
    {"stuck", "stuck(bit=26,value=1,stride=3)", DATA_NORMAL, PEAT_FIND_STUCK_BIT, "bit=26,value=1"},
    {"tile", "tile(rows=8,cols=4,kind=stale)", DATA_NORMAL, PEAT_FIND_TILE, "rows=8,cols=4"},
    {"boundary", "boundary(rows=2,kind=random)", DATA_NORMAL, PEAT_FIND_TILE, "boundary,rows=2"},
    {"nan", "nan(count=4)", DATA_NORMAL, PEAT_FIND_NAN, "nan=4"},
    {"noise", "noise(sigma=3e-5)", DATA_NORMAL, PEAT_FIND_NOISE, NULL},
    {"approx", "approx(fn=smooth,amp=3e-4)", DATA_NORMAL, PEAT_FIND_APPROX, NULL},
    {"nondeterministic", "nondeterministic(split=6)", DATA_NORMAL, PEAT_FIND_NONDETERMINISTIC,
     NULL},
};
#define N_EXPECT ((int)(sizeof EXPECT / sizeof EXPECT[0]))

Test(detector, each_rule_fires_on_its_model)
{
    for (int e = 0; e < N_EXPECT; e++) {
        call c = call_new(SHAPES[e % 3], SEEDS[e % 2], EXPECT[e].data);
        peat_finding f[4];
        int n = detect(&c, NULL, EXPECT[e].spec, 555 + (uint64_t)e, NULL, f, 4);
        if (f[0].cls != EXPECT[e].cls) show(EXPECT[e].spec, f, n);
        cr_assert_eq(f[0].cls, EXPECT[e].cls, "%s: primary finding %s, expected %s", EXPECT[e].spec,
                     peat_detector_finding_name(f[0].cls),
                     peat_detector_finding_name(EXPECT[e].cls));
        if (EXPECT[e].param)
            cr_assert(strstr(f[0].params, EXPECT[e].param) != NULL, "%s: params '%s' lack '%s'",
                      EXPECT[e].spec, f[0].params, EXPECT[e].param);
        cr_assert_geq(f[0].n_evidence, 1, "%s: evidence", EXPECT[e].spec);
        /* the evidence quotes numbers */
        cr_assert(strpbrk(f[0].evidence[0], "0123456789") != NULL, "%s: %s", EXPECT[e].spec,
                  f[0].evidence[0]);
        /* transient faults land elsewhere on a repeat: nondeterminism is reported besides */
        peat_inject_model_t *m;
        cr_assert_eq(peat_inject_model_parse(EXPECT[e].spec, &m), PEAT_OK);
        cr_assert_eq(has_class(f, n, PEAT_FIND_NONDETERMINISTIC), peat_inject_model_transient(m),
                     "%s: NONDETERMINISTIC reported iff the model is transient", EXPECT[e].spec);
        peat_inject_model_free(m);
        call_free(&c);
    }
}

Test(detector, single_corrupted_element_is_caught)
{
    /* one element far off, but not a single-bit pattern: out of bound, naming the count */
    call c = call_new(SHAPES[2], SEEDS[1], DATA_NORMAL);
    peat_signature g = cand_sig(&c, kern("gemm_golden"), NULL, 1);
    run_cand(&c, kern("gemm_golden"), NULL, 1);
    peat_f32(c.D)[17] = -3.0f * peat_f32(c.D)[17] + 1.0f;
    peat_analyzer_acc_t *acc = peat_analyzer_acc_new("one", PEAT_OP_GEMM);
    cr_assert_eq(peat_analyzer_acc_add(acc, c.D, c.E, c.mag, c.s.K, c.s.M, c.s.N), PEAT_OK);
    peat_signature s;
    cr_assert_eq(peat_analyzer_signature(acc, &s), PEAT_OK);
    peat_analyzer_acc_free(acc);
    peat_finding f[4];
    int n = peat_detector_run(&s, &g, NULL, f, 4);
    cr_assert(f[0].cls == PEAT_FIND_OUT_OF_BOUND || f[0].cls == PEAT_FIND_BITFLIP, "got %s",
              peat_detector_finding_name(f[0].cls));
    cr_assert_eq(peat_detector_verdict(f, n), PEAT_ACCEPT_FAIL);
    cr_assert(strstr(f[0].evidence[0], "1 ") == f[0].evidence[0] ||
                  strstr(f[0].evidence[0], " 1 ") != NULL,
              "evidence counts the one element: %s", f[0].evidence[0]);
    call_free(&c);
}

/* ---- acceptance: declared precision ------------------------------------------------------------
 */

Test(detector, declared_reduced_precision_warns_undeclared_fails)
{
    static const struct {
        const char *kernel;
        double bits;
    } lowp[] = {{"gemm_bf16", 8.0}, {"gemm_fp16", 11.0}};
    for (int i = 0; i < 2; i++) {
        call c = call_new(SHAPES[i], SEEDS[i], DATA_NORMAL);
        const peat_kernel *k = kern(lowp[i].kernel);
        peat_detector_ctx ctx = peat_detector_ctx_from_kernel(k);
        peat_finding f[4], u[4];
        int n = detect(&c, lowp[i].kernel, NULL, 9, &ctx, f, 4);
        cr_assert_eq(f[0].cls, PEAT_FIND_REDUCED_PRECISION, "%s: %s", lowp[i].kernel,
                     peat_detector_finding_name(f[0].cls));
        double bits;
        cr_assert_eq(sscanf(f[0].params, "bits=%lf", &bits), 1, "params %s", f[0].params);
        cr_assert(fabs(bits - lowp[i].bits) <= 1.0, "%s reads %.1f bits", lowp[i].kernel, bits);
        cr_assert_eq(f[0].accept, PEAT_ACCEPT_WARN, "declared %s: WARN",
                     peat_dtype_name(k->in_dtype));
        cr_assert_eq(peat_detector_verdict(f, n), PEAT_ACCEPT_WARN);
        /* the same kernel claiming fp32 throughout */
        int m = detect(&c, lowp[i].kernel, NULL, 9, NULL, u, 4);
        cr_assert_eq(u[0].cls, PEAT_FIND_REDUCED_PRECISION);
        cr_assert_eq(peat_detector_verdict(u, m), PEAT_ACCEPT_FAIL,
                     "undeclared precision loss fails");
        call_free(&c);
    }
}

Test(detector, declared_bf16_does_not_excuse_fp8)
{
    call c = call_new(SHAPES[0], SEEDS[1], DATA_NORMAL);
    peat_detector_ctx ctx = {PEAT_DTYPE_BF16, PEAT_DTYPE_F32, PEAT_DTYPE_F32, NAN, NAN};
    peat_finding f[4];
    int n = detect(&c, NULL, "precision(fmt=fp8,where=inputs)", 4, &ctx, f, 4);
    cr_assert_eq(f[0].cls, PEAT_FIND_REDUCED_PRECISION);
    cr_assert_eq(peat_detector_verdict(f, n), PEAT_ACCEPT_FAIL, "4 bits measured, 8 declared");
    call_free(&c);
}

/* Fraction of nonzero values of A and B below fp16's smallest normal, as the runner measures it. */
static double frac_below_fp16_normal(const call *c)
{
    int64_t n = 0, below = 0;
    const peat_tensor *t[2] = {c->A, c->B};
    for (int k = 0; k < 2; k++)
        for (int64_t i = 0; i < peat_tensor_numel(t[k]); i++) {
            double a = fabs((double)peat_f32(t[k])[i]);
            if (a == 0.0) continue;
            n++;
            below += a < 0x1p-14;
        }
    return (double)below / (double)n;
}

Test(detector, fp16_input_underflow_is_named)
{
    for (int i = 0; i < 2; i++) {
        call c = call_new(SHAPES[i], SEEDS[i], DATA_TINY_A);
        peat_detector_ctx ctx = peat_detector_ctx_from_kernel(kern("gemm_fp16"));
        ctx.in_frac_below_normal = frac_below_fp16_normal(&c);
        ctx.in_frac_above_max = 0.0;
        double na = (double)peat_tensor_numel(c.A), nb = (double)peat_tensor_numel(c.B);
        cr_assert(ctx.in_frac_below_normal > 0.99 * na / (na + nb),
                  "every value of A is tiny, measured %.3f", ctx.in_frac_below_normal);
        peat_finding f[4];
        int n = detect(&c, "gemm_fp16", NULL, 5, &ctx, f, 4);
        show("fp16 underflow", f, n);
        cr_assert(has_class(f, n, PEAT_FIND_RANGE), "fp16 input underflow must be named RANGE");
        for (int k = 0; k < n; k++)
            if (f[k].cls == PEAT_FIND_RANGE)
                cr_assert(strstr(f[k].params, "underflow"), "params: %s", f[k].params);
        cr_assert_eq(peat_detector_verdict(f, n), PEAT_ACCEPT_FAIL);
        call_free(&c);
        /* the same kernel on in-range inputs: its declared precision, a warning */
        c = call_new(SHAPES[i], SEEDS[i], DATA_NORMAL);
        ctx.in_frac_below_normal = frac_below_fp16_normal(&c);
        n = detect(&c, "gemm_fp16", NULL, 5, &ctx, f, 4);
        cr_assert_eq(f[0].cls, PEAT_FIND_REDUCED_PRECISION, "in-range fp16 inputs: %s",
                     peat_detector_finding_name(f[0].cls));
        cr_assert_eq(peat_detector_verdict(f, n), PEAT_ACCEPT_WARN);
        call_free(&c);
    }
}

/* An fp32 kernel that stores its outputs in fp16, on outputs around 1e-5 (fp16's subnormal range):
 * every output loses precision and the few nearest 0 flush. The precision is what fails (the
 * flushes are its tail): REDUCED_PRECISION, not RANGE. */
Test(detector, fp16_storage_below_its_range_is_precision)
{
    for (int i = 0; i < 2; i++) {
        call c = call_new(SHAPES[i], SEEDS[i], DATA_TINY_A);
        peat_finding f[4];
        int n = detect(&c, NULL, "precision(fmt=fp16,where=output)", 5, NULL, f, 4);
        show("fp16 storage of tiny outputs", f, n);
        cr_assert_eq(f[0].cls, PEAT_FIND_REDUCED_PRECISION, "fp16 storage: primary %s (%s)",
                     peat_detector_finding_name(f[0].cls), f[0].params);
        cr_assert(strstr(f[0].params, "storage=11"), "params: %s", f[0].params);
        call_free(&c);
    }
}

/* Under amp-fp16 the flow hands gemm_fp16 fp16 values: it is then as exact as the golden (its
 * input rounding changes nothing), even where the outputs exceed fp16's range. A kernel that lets
 * such outputs overflow to Inf (fp16 output storage) is still RANGE: loss scaling cannot help a
 * forward activation beyond 65504. */
Test(detector, amp_fp16_inputs_output_overflow_is_still_range)
{
    for (int i = 0; i < 2; i++) {
        call c = call_new(SHAPES[i], SEEDS[i], DATA_LARGE_F16);
        peat_detector_ctx ctx = peat_detector_ctx_from_kernel(kern("gemm_fp16"));
        ctx.in_frac_below_normal = frac_below_fp16_normal(&c);
        ctx.in_frac_above_max = 0.0; /* fp16 values */
        int64_t big = 0;
        for (int64_t e = 0; e < peat_tensor_numel(c.E); e++) big += fabs(peat_f64(c.E)[e]) > 65520;
        cr_assert_gt(big, 0, "the constructed outputs exceed fp16's range");
        peat_finding f[4];
        int n = detect(&c, "gemm_fp16", NULL, 5, &ctx, f, 4);
        show("gemm_fp16 on fp16 inputs", f, n);
        cr_assert_eq(f[0].cls, PEAT_FIND_WITHIN_BOUND, "fp16 inputs: gemm_fp16 is honest, got %s",
                     peat_detector_finding_name(f[0].cls));
        n = detect(&c, "gemm_fp16", "range(fmt=fp16)", 5, &ctx, f, 4);
        show("gemm_fp16 + fp16 output overflow", f, n);
        cr_assert(has_class(f, n, PEAT_FIND_RANGE), "output overflow must be RANGE");
        cr_assert_eq(peat_detector_verdict(f, n), PEAT_ACCEPT_FAIL);
        call_free(&c);
    }
}

/* ---- gelu_tanh: a small smooth input-dependent deviation ----------------------------------------
 */

static void gelu_case(peat_op_kind op, const char *cand, uint64_t seed, double sd)
{
    int n = 6000;
    peat_tensor *X, *dY, *Y, *E;
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &X), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &dY), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &Y), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F64, n, &E), PEAT_OK);
    peat_rng_t *r = peat_rng_new(seed);
    peat_rng_fill_gaussian(r, X, sd);
    peat_rng_fill_gaussian(r, dY, 1.0);
    peat_rng_free(r);
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = n;
    const peat_tensor *in[2] = {X, dY};
    int nin = op == PEAT_OP_GELU ? 1 : 2;
    peat_tensor *oy[1] = {Y}, *oe[1] = {E};
    peat_args a = peat_args_make(op, &p, nin, in, 1, oy),
              ae = peat_args_make(op, &p, nin, in, 1, oe);
    const peat_kernel *ek = peat_registry_role(op, PEAT_ROLE_EXACT, "cpu"),
                      *gk = peat_registry_role(op, PEAT_ROLE_GOLDEN, "cpu");
    cr_assert(ek && gk, "exact and golden %s registered", peat_op_name(op));
    cr_assert_eq(peat_kernel_run(ek, &ae), PEAT_OK, "%s", peat_error_last());
    double *mag = malloc(sizeof(double) * (size_t)n);
    cr_assert_not_null(mag);
    cr_assert_eq(peat_golden_magnitude(&ae, 0, E, mag), PEAT_OK);
    peat_signature sg, sc;
    const peat_kernel *ks[2] = {gk, kern(cand)};
    peat_signature *sig[2] = {&sg, &sc};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(peat_kernel_run(ks[i], &a), PEAT_OK, "%s", peat_error_last());
        peat_analyzer_acc_t *acc = peat_analyzer_acc_new(ks[i]->name, op);
        /* elementwise op: the runner passes the input, the error is a function of it */
        cr_assert_eq(peat_analyzer_acc_add_input(acc, Y, E, mag, 1, 1, n, X), PEAT_OK);
        cr_assert_eq(peat_analyzer_signature(acc, sig[i]), PEAT_OK);
        peat_analyzer_acc_free(acc);
    }
    peat_detector_ctx ctx = peat_detector_ctx_from_kernel(ks[1]);
    peat_finding f[4];
    int nf = peat_detector_run(&sc, &sg, &ctx, f, 4);
    if (f[0].cls != PEAT_FIND_APPROX) show(cand, f, nf);
    cr_assert_eq(f[0].cls, PEAT_FIND_APPROX, "%s: %s", cand, peat_detector_finding_name(f[0].cls));
    cr_assert_eq(peat_detector_verdict(f, nf), PEAT_ACCEPT_WARN, "%s: small approximation warns",
                 cand);
    cr_assert(strstr(f[0].evidence[0], "small smooth input-dependent deviation, not a bug") != NULL,
              "%s", f[0].evidence[0]);
    free(mag);
    peat_tensor_free(X), peat_tensor_free(dY), peat_tensor_free(Y), peat_tensor_free(E);
}

Test(detector, gelu_tanh_is_a_small_smooth_deviation)
{
    gelu_case(PEAT_OP_GELU, "gelu_tanh", 2718, 1.5);
    gelu_case(PEAT_OP_GELU, "gelu_tanh", 161, 3.0);
    gelu_case(PEAT_OP_GELU_BWD, "gelu_tanh_bwd", 2718, 1.5);
}

/* ---- the confusion matrix over the catalogue ----------------------------------------------------
 */

Test(detector, confusion_matrix_over_the_catalogue)
{
    /* every catalogue model has a calibration case (a new model without one fails here) */
    const char *cat = peat_inject_catalogue();
    for (const char *p = cat; *p;) {
        size_t len = strcspn(p, " (");
        int found = 0;
        for (int e = 0; e < peat_run_calibrate_cases(); e++)
            found |= strlen(peat_run_calibrate_case_model(e)) == len &&
                     strncmp(peat_run_calibrate_case_model(e), p, len) == 0;
        cr_assert(found, "catalogue model '%.*s' has no calibration case", (int)len, p);
        p = strchr(p, '\n');
        cr_assert_not_null(p);
        p++;
    }
    /* `peat calibrate` on random shapes (M, N in 16..128, K in 16..512) and seeds */
    enum { TRIALS = 6 };
    int counts[64][PEAT_FIND_COUNT];
    cr_assert_leq(peat_run_calibrate_cases(), 64);
    cr_assert_eq(peat_run_calibrate(2718, TRIALS, counts, NULL), PEAT_OK, "%s", peat_error_last());
    int diag = 0;
    for (int e = 0; e < peat_run_calibrate_cases(); e++) {
        int ok = counts[e][peat_run_calibrate_case_expect(e)];
        cr_assert_geq(ok, TRIALS - 1, "%s: %s in %d of %d trials", peat_run_calibrate_case_model(e),
                      peat_detector_finding_name(peat_run_calibrate_case_expect(e)), ok, TRIALS);
        diag += ok;
    }
    cr_assert_geq(diag * 100, 95 * TRIALS * peat_run_calibrate_cases(), "diagonal %d", diag);
}

/* ---- plumbing ----------------------------------------------------------------------------------
 */

Test(detector, names_verdict_and_empty_signatures)
{
    for (int i = 0; i < PEAT_FIND_COUNT; i++) {
        cr_assert_str_neq(peat_detector_finding_name((peat_finding_class)i), "?");
        for (int j = 0; j < i; j++)
            cr_assert_str_neq(peat_detector_finding_name((peat_finding_class)i),
                              peat_detector_finding_name((peat_finding_class)j));
    }
    cr_assert_str_eq(peat_detector_acceptance_name(PEAT_ACCEPT_WARN), "WARN");
    peat_finding f[3] = {
        {.accept = PEAT_ACCEPT_PASS}, {.accept = PEAT_ACCEPT_FAIL}, {.accept = PEAT_ACCEPT_WARN}};
    cr_assert_eq(peat_detector_verdict(f, 3), PEAT_ACCEPT_FAIL);
    cr_assert_eq(peat_detector_verdict(f, 1), PEAT_ACCEPT_PASS);
    cr_assert_eq(peat_detector_verdict(f, 0), PEAT_ACCEPT_PASS);
    peat_signature empty;
    memset(&empty, 0, sizeof empty);
    peat_finding out[2];
    cr_assert_eq(peat_detector_run(&empty, &empty, NULL, out, 2), 1);
    cr_assert_eq(out[0].cls, PEAT_FIND_UNKNOWN);
    cr_assert_eq(peat_detector_run(&empty, &empty, NULL, out, 0), 0, "no room: nothing written");
}

/* ---- one list from every source (peat_detector_assemble, docs/detector.md "Order of findings") */

static peat_finding made(peat_finding_class cls, peat_acceptance acc, const char *params)
{
    peat_finding f;
    memset(&f, 0, sizeof f);
    f.cls = cls, f.accept = acc;
    snprintf(f.params, sizeof f.params, "%s", params);
    return f;
}

/* Runner findings first (crash, early exit, stray write, input write), then the signature's in
 * their order, then the runtime runs': whatever order the sources were handed in. */
Test(detector, assemble_orders_runner_then_numeric_then_runtime)
{
    peat_finding sig[2] = {made(PEAT_FIND_WRONG_RESULT, PEAT_ACCEPT_FAIL, "bits=0.5"),
                           made(PEAT_FIND_NONDETERMINISTIC, PEAT_ACCEPT_FAIL, "repeats=2")};
    peat_finding rt[1] = {made(PEAT_FIND_DIVERGES, PEAT_ACCEPT_FAIL, "freq=1")};
    peat_finding_sources s;
    memset(&s, 0, sizeof s);
    s.runner = (peat_runner_counts){.n_records = 24,
                                    .n_failures = 5,
                                    .n_due = 2,
                                    .n_oob_writes = 1,
                                    .failure = "SIGSEGV",
                                    .due = "exit(3)",
                                    .oob_write = "after out[0]"};
    s.signature = sig, s.n_signature = 2, s.runtime = rt, s.n_runtime = 1;
    peat_finding out[8];
    int n = peat_detector_assemble(&s, out, 8);
    const peat_finding_class want[] = {PEAT_FIND_OUT_OF_BOUND,        PEAT_FIND_DUE,
                                       PEAT_FIND_OUT_OF_BOUNDS_WRITE, PEAT_FIND_WRONG_RESULT,
                                       PEAT_FIND_NONDETERMINISTIC,    PEAT_FIND_DIVERGES};
    cr_assert_eq(n, 6, "%d findings, expected 6", n);
    for (int i = 0; i < n; i++)
        cr_assert_eq(out[i].cls, want[i], "finding %d is %s, expected %s", i,
                     peat_detector_finding_name(out[i].cls), peat_detector_finding_name(want[i]));
    cr_assert_str_eq(out[0].params, "calls=3", "crashes = failures - early exits: %s",
                     out[0].params);
    cr_assert(strstr(out[1].evidence[0], "exit(3)"), "DUE evidence: %s", out[1].evidence[0]);
    cr_assert_eq(peat_detector_verdict(out, n), PEAT_ACCEPT_FAIL);
}

/* A full list keeps every runtime finding (they displace numeric findings from the end) and its
 * first finding; a list of one keeps only the first. */
Test(detector, assemble_keeps_runtime_findings_and_the_first_when_full)
{
    peat_finding sig[8];
    for (int i = 0; i < 8; i++) sig[i] = made(PEAT_FIND_UNKNOWN, PEAT_ACCEPT_WARN, "");
    sig[0] = made(PEAT_FIND_STUCK_BIT, PEAT_ACCEPT_FAIL, "bit=3");
    peat_finding rt[2] = {made(PEAT_FIND_DEGRADES, PEAT_ACCEPT_WARN, "freq=1"),
                          made(PEAT_FIND_TRAINING_EQUIVALENT, PEAT_ACCEPT_PASS, "freq=1/10")};
    peat_finding_sources s;
    memset(&s, 0, sizeof s);
    s.signature = sig, s.n_signature = 8, s.runtime = rt, s.n_runtime = 2;
    peat_finding out[8];
    int n = peat_detector_assemble(&s, out, 8);
    cr_assert_eq(n, 8, "%d findings in a list of 8", n);
    cr_assert_eq(out[0].cls, PEAT_FIND_STUCK_BIT, "first: %s",
                 peat_detector_finding_name(out[0].cls));
    cr_assert_eq(out[6].cls, PEAT_FIND_DEGRADES, "slot 6: %s",
                 peat_detector_finding_name(out[6].cls));
    cr_assert_eq(out[7].cls, PEAT_FIND_TRAINING_EQUIVALENT, "slot 7: %s",
                 peat_detector_finding_name(out[7].cls));
    n = peat_detector_assemble(&s, out, 1);
    cr_assert_eq(n, 1, "%d findings in a list of 1", n);
    cr_assert_eq(out[0].cls, PEAT_FIND_STUCK_BIT, "first of 1: %s",
                 peat_detector_finding_name(out[0].cls));
}
