/* test_formula.c: the formula rule (WRONG_RESULT `formula`) on constructed errors of known size
 * and shape: a smooth, reproducible function other than the op's is WRONG_RESULT; errors of the
 * same size that a coarser format or rounding mode leaves (the output stored in bf16 or fp16,
 * truncated to bf16) read as that format, and unbiased random noise of that size as NOISE. The
 * exact values are computed here in fp64 (known answers), the golden is the exact value
 * rounded to fp32, every case has a fixed seed. */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "analyzer/analyzer.h"
#include "harness/runtime/builtin.h"
#include "detector/detector.h"
#include "golden/golden.h"
#include "peat/peat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 20000 };

static void setup(void)
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK, "registry init: %s", peat_error_last());
}

TestSuite(formula, .init = setup);

typedef enum formula_case {
    CASE_SCALE, /* output * (1 + 2e-3): a wrong constant factor */
    CASE_SQRT,  /* x / c2 where x / sqrt(c2) belongs (AdamW's bias correction), c2 = 1 - 0.999^2000
                 */
    CASE_GELU_CONST, /* tanh GELU with 2/sqrt(pi) where sqrt(2/pi) belongs, against the erf GELU */
    CASE_BF16,       /* the exact output rounded to nearest bf16 */
    CASE_FP16,       /* ... to nearest fp16 */
    CASE_BF16_RTZ,   /* ... truncated (toward zero) to bf16 */
    CASE_NOISE,      /* exact * (1 + 1e-3 g), g ~ N(0, 1), the same draw on both runs */
} formula_case;

static double gelu(double x)
{
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

/* The candidate's output for input x with exact GELU e (g: a standard normal draw). */
static float cand_of(formula_case c, double x, double e, double g)
{
    switch (c) {
    case CASE_SCALE:
        return (float)(e * (1.0 + 2e-3));
    case CASE_SQRT:
        return (float)(e / sqrt(1.0 - pow(0.999, 2000.0)));
    case CASE_GELU_CONST:
        return (float)(0.5 * x * (1.0 + tanh(1.1283791670955126 * (x + 0.044715 * x * x * x))));
    case CASE_BF16:
        return peat_round_bf16((float)e);
    case CASE_FP16:
        return peat_round_f16((float)e);
    case CASE_BF16_RTZ:
        return peat_bf16_to_f32(peat_f32_to_bf16_rtz((float)e));
    case CASE_NOISE:
        return (float)(e * (1.0 + 1e-3 * g));
    }
    return 0.0f;
}

/* The signature of `test` against `exact` as an elementwise op's (the input given, one rounding
 * deep), with a repeat run that gives the same bits (the candidate is reproducible). */
static peat_signature sig_of(const char *name, const peat_tensor *test, const peat_tensor *exact,
                             const double *mag, const peat_tensor *x)
{
    peat_analyzer_acc_t *acc = peat_analyzer_acc_new(name, PEAT_OP_GELU);
    cr_assert_not_null(acc);
    peat_analyzer_acc_add_repeat(acc, test, test);
    cr_assert_eq(peat_analyzer_acc_add_input(acc, test, exact, mag, 1, 1, N, x), PEAT_OK, "%s",
                 peat_error_last());
    peat_signature s;
    cr_assert_eq(peat_analyzer_signature(acc, &s), PEAT_OK, "%s", peat_error_last());
    peat_analyzer_acc_free(acc);
    return s;
}

/* Findings for one case: inputs x ~ N(0, 1) (seed) through the GELU op as the runner sees it
 * (the exact kernel's fp64 output, the op's magnitudes, the golden kernel), the candidate's
 * output constructed from the exact one; a kernel declaring fp32 throughout. */
static int detect_case(formula_case c, uint64_t seed, peat_finding *f, int max)
{
    peat_tensor *X, *G, *E, *Y, *Z;
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, N, &X), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, N, &Z), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, N, &G), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, N, &Y), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F64, N, &E), PEAT_OK);
    peat_rng_t *r = peat_rng_new(seed);
    peat_rng_fill_gaussian(r, X, 1.0);
    peat_rng_fill_gaussian(r, Z, 1.0); /* the noise case's draws */
    peat_rng_free(r);
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = N;
    const peat_tensor *in[1] = {X};
    peat_tensor *oe[1] = {E}, *og[1] = {G};
    peat_args ae = peat_args_make(PEAT_OP_GELU, &p, 1, in, 1, oe),
              ag = peat_args_make(PEAT_OP_GELU, &p, 1, in, 1, og);
    const peat_kernel *ek = peat_registry_role(PEAT_OP_GELU, PEAT_ROLE_EXACT, "cpu"),
                      *gk = peat_registry_role(PEAT_OP_GELU, PEAT_ROLE_GOLDEN, "cpu");
    cr_assert(ek && gk, "exact and golden gelu registered");
    cr_assert_eq(peat_kernel_run(ek, &ae), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(peat_kernel_run(gk, &ag), PEAT_OK, "%s", peat_error_last());
    double *mag = malloc(sizeof(double) * N);
    cr_assert_not_null(mag);
    cr_assert_eq(peat_golden_magnitude(&ae, 0, E, mag), PEAT_OK, "%s", peat_error_last());
    for (int i = 0; i < N; i++) {
        double x = peat_f32(X)[i], e = peat_f64(E)[i];
        cr_assert_float_eq(e, gelu(x), 1e-12 * (1.0 + fabs(e)), "exact gelu(%g)", x);
        peat_f32(Y)[i] = cand_of(c, x, e, peat_f32(Z)[i]);
    }
    peat_signature sg = sig_of("golden", G, E, mag, X), sc = sig_of("cand", Y, E, mag, X);
    peat_detector_ctx ctx = peat_detector_ctx_from_kernel(NULL);
    int n = peat_detector_run(&sc, &sg, &ctx, f, max);
    cr_assert_geq(n, 1, "the detector always says something");
    cr_log_info("case %d seed %llu: rough %.3f, sign changes %.3f, bias t %.1f, corr %.2f, "
                "max_norm %.3g, %d bits on the grid",
                (int)c, (unsigned long long)seed, sc.err_roughness, sc.err_sign_changes, sc.bias_t,
                sc.corr_err_input, sc.max_norm, sc.test_mant_bits);
    for (int i = 0; i < n; i++) {
        cr_log_info("case %d seed %llu: %s(%s) %s", (int)c, (unsigned long long)seed,
                    peat_detector_finding_name(f[i].cls), f[i].params,
                    peat_detector_acceptance_name(f[i].accept));
        for (int e = 0; e < f[i].n_evidence; e++) cr_log_info("    %s", f[i].evidence[e]);
    }
    free(mag);
    peat_tensor_free(X), peat_tensor_free(Z), peat_tensor_free(G), peat_tensor_free(Y);
    peat_tensor_free(E);
    return n;
}

static int has_class(const peat_finding *f, int n, peat_finding_class c)
{
    for (int i = 0; i < n; i++)
        if (f[i].cls == c) return 1;
    return 0;
}

static const uint64_t SEEDS[] = {4242, 90210};

/* Smooth, reproducible, another function: WRONG_RESULT formula, FAIL, whatever the size (a
 * 2e-3 scale factor keeps ~11 effective bits, the c2 case and the GELU constant ~6). */
Test(formula, smooth_formula_errors_are_wrong_result)
{
    const formula_case cs[] = {CASE_SCALE, CASE_SQRT, CASE_GELU_CONST};
    for (size_t s = 0; s < sizeof SEEDS / sizeof SEEDS[0]; s++)
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
            peat_finding f[6];
            int n = detect_case(cs[i], SEEDS[s], f, 6);
            cr_expect_eq(f[0].cls, PEAT_FIND_WRONG_RESULT,
                         "case %d seed %llu: %s(%s), expected "
                         "WRONG_RESULT",
                         (int)cs[i], (unsigned long long)SEEDS[s],
                         peat_detector_finding_name(f[0].cls), f[0].params);
            cr_expect_eq(peat_detector_verdict(f, n), PEAT_ACCEPT_FAIL, "case %d: a formula fails",
                         (int)cs[i]);
        }
}

/* The scale case's error is smooth, so the rule says so (and is not reading the bit count):
 * ~11 effective bits, more than WRONG_RESULT's 3. */
Test(formula, a_moderate_formula_error_is_named_by_its_smoothness)
{
    peat_finding f[6];
    detect_case(CASE_SCALE, SEEDS[0], f, 6);
    cr_assert_eq(f[0].cls, PEAT_FIND_WRONG_RESULT, "%s", peat_detector_finding_name(f[0].cls));
    cr_expect(strncmp(f[0].params, "formula,", 8) == 0, "the formula rule fired: %s", f[0].params);
    double bits = 0;
    cr_assert_eq(sscanf(f[0].params, "formula,bits=%lf", &bits), 1, "%s", f[0].params);
    cr_expect(bits > 6.0 && bits < 12.0, "a 2e-3 scale error keeps ~11 bits, got %.1f", bits);
    int smooth = 0;
    for (int e = 0; e < f[0].n_evidence; e++) smooth |= strstr(f[0].evidence[e], "smooth") != NULL;
    cr_expect(smooth, "the evidence names a smooth error");
}

/* The same magnitude from a coarser format: the output's grid gives it away. Rounded to bf16 or
 * fp16: REDUCED_PRECISION (8 or 11 bits, FAIL: fp32 declared); truncated to bf16: TRUNCATION
 * with REDUCED_PRECISION beside it. Never WRONG_RESULT. */
Test(formula, the_same_size_from_a_format_is_precision)
{
    const formula_case cs[] = {CASE_BF16, CASE_FP16, CASE_BF16_RTZ};
    const int bits[] = {8, 11, 8};
    for (size_t s = 0; s < sizeof SEEDS / sizeof SEEDS[0]; s++)
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
            peat_finding f[6];
            int n = detect_case(cs[i], SEEDS[s], f, 6);
            cr_expect(!has_class(f, n, PEAT_FIND_WRONG_RESULT),
                      "case %d seed %llu: WRONG_RESULT "
                      "for a format",
                      (int)cs[i], (unsigned long long)SEEDS[s]);
            peat_finding_class want =
                cs[i] == CASE_BF16_RTZ ? PEAT_FIND_TRUNCATION : PEAT_FIND_REDUCED_PRECISION;
            cr_expect_eq(f[0].cls, want, "case %d seed %llu: %s(%s), expected %s", (int)cs[i],
                         (unsigned long long)SEEDS[s], peat_detector_finding_name(f[0].cls),
                         f[0].params, peat_detector_finding_name(want));
            int k = -1;
            for (int j = 0; j < n && k < 0; j++)
                if (f[j].cls == PEAT_FIND_REDUCED_PRECISION) k = j;
            cr_assert_geq(k, 0, "case %d: REDUCED_PRECISION among the findings", (int)cs[i]);
            int st = 0;
            const char *p = strstr(f[k].params, "storage=");
            cr_assert(p && sscanf(p, "storage=%d", &st) == 1, "the output's grid named: %s",
                      f[k].params);
            cr_expect_eq(st, bits[i], "case %d: stored in %d bits, the format keeps %d", (int)cs[i],
                         st, bits[i]);
        }
}

/* Unbiased random noise of the same size (relative sigma 1e-3), reproducible: NOISE. The
 * repeats agree, so what keeps it from the formula rule is that it is neither smooth nor
 * biased. */
Test(formula, unbiased_noise_of_that_size_is_noise)
{
    for (size_t s = 0; s < sizeof SEEDS / sizeof SEEDS[0]; s++) {
        peat_finding f[6];
        int n = detect_case(CASE_NOISE, SEEDS[s], f, 6);
        cr_expect_eq(f[0].cls, PEAT_FIND_NOISE, "seed %llu: %s(%s), expected NOISE",
                     (unsigned long long)SEEDS[s], peat_detector_finding_name(f[0].cls),
                     f[0].params);
        cr_expect(!has_class(f, n, PEAT_FIND_WRONG_RESULT), "seed %llu: noise read as a formula",
                  (unsigned long long)SEEDS[s]);
    }
}
