/* test_analyzer.c: signatures of constructed error distributions with hand-known answers. */
#include <criterion/criterion.h>

#include "analyzer/analyzer.h"
#include "analyzer/internal.h" /* the sample's size, for the bound's rescue */
#include "harness/runtime/builtin.h"
#include "golden/golden.h"
#include "peat/peat.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void setup(void)
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK, "registry init: %s", peat_error_last());
}

TestSuite(analyzer, .init = setup);

/* A test/exact pair of n elements (test F32, exact F64), owned together. */
typedef struct pair {
    peat_tensor *t, *x;
    int64_t n;
} pair;

static pair pair_new(int64_t n)
{
    pair p = {NULL, NULL, n};
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &p.t), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F64, n, &p.x), PEAT_OK);
    return p;
}

static void pair_free(pair *p)
{
    peat_tensor_free(p->t);
    peat_tensor_free(p->x);
}

/* Signature of one tensor added with mag = |exact| (NULL), depth k, view rows x cols. */
static peat_signature sig_of(const pair *p, const double *mag, int64_t k, int64_t rows,
                             int64_t cols)
{
    peat_analyzer_acc_t *acc = peat_analyzer_acc_new("t", PEAT_OP_GEMM);
    cr_assert_not_null(acc);
    cr_assert_eq(peat_analyzer_acc_add(acc, p->t, p->x, mag, k, rows, cols), PEAT_OK, "%s",
                 peat_error_last());
    peat_signature s;
    cr_assert_eq(peat_analyzer_signature(acc, &s), PEAT_OK, "%s", peat_error_last());
    peat_analyzer_acc_free(acc);
    return s;
}

/* x rounded to p significand bits, to nearest even (the test's own reference implementation). */
static double round_p(double x, int p)
{
    if (x == 0.0 || !isfinite(x)) return x;
    int e;
    double m = frexp(x, &e);
    return ldexp(nearbyint(ldexp(m, p)), e - p);
}

static double trunc_p(double x, int p)
{
    if (x == 0.0 || !isfinite(x)) return x;
    int e;
    double m = frexp(x, &e);
    return ldexp(trunc(ldexp(m, p)), e - p);
}

Test(analyzer, zero_error_on_representable_values)
{
    /* exact values that fp32 holds exactly: the correctly rounded answer has no error at all */
    pair p = pair_new(100);
    for (int i = 0; i < 100; i++) {
        double v = (i - 50) * 0.375;
        peat_f64(p.x)[i] = v;
        peat_f32(p.t)[i] = (float)v;
    }
    peat_signature s = sig_of(&p, NULL, 1, 10, 10);
    cr_assert_eq(s.version, PEAT_SIGNATURE_VERSION);
    cr_assert_eq(s.n_elems, 100);
    cr_assert_eq(s.n_exact_zero, 1, "one element is exactly 0, got %lld",
                 (long long)s.n_exact_zero);
    cr_assert_eq(s.n_equal_rounded, 100);
    cr_assert_eq(s.n_nonzero_err, 0);
    cr_assert_eq(s.max_abs, 0.0);
    cr_assert_eq(s.max_norm, 0.0);
    cr_assert_eq(s.n_over_bound, 0);
    cr_assert_eq(s.eff_bits, 53.0, "no error reads as 53 bits, got %g", s.eff_bits);
    cr_assert_eq(s.ulp_hist[0], 1.0, "all at 0 ulp, got %g", s.ulp_hist[0]);
    for (int b = 0; b < PEAT_BIT_POSITIONS; b++) cr_assert_eq(s.bit_hist[b], 0.0, "bit %d", b);
    cr_assert_eq(s.n_gross, 0);
    cr_assert_eq(s.repeat_max_diff, -1.0, "repeatability not measured reads -1");
    pair_free(&p);
}

Test(analyzer, single_element_error_of_known_size)
{
    /* 64 elements of exact value 1, one of them 16 ulps high: 1 + 2^-19 (ulp(1) = 2^-23).
     * With K = 1 and mag = 1 the bound is gamma_1 = 2^-24 / (1 - 2^-24) plus 2 * 2^-150, so
     * e = 2^-19 / bound = 32 (1 - 2^-24) to the last digits: over the bound and gross (> 16). */
    pair p = pair_new(64);
    for (int i = 0; i < 64; i++) peat_f64(p.x)[i] = 1.0, peat_f32(p.t)[i] = 1.0f;
    peat_f32(p.t)[37] = (float)(1.0 + 0x1p-19);
    peat_signature s = sig_of(&p, NULL, 1, 8, 8);
    double bound = (0x1p-24 / (1.0 - 0x1p-24)) + 2.0 * 0x1p-150;
    cr_assert_eq(s.max_abs, 0x1p-19, "max_abs %a", s.max_abs);
    cr_assert_float_eq(s.mean_abs, 0x1p-19 / 64.0, 1e-30);
    cr_assert_float_eq(s.rms_abs, 0x1p-19 / 8.0, 1e-30, "rms = err / sqrt(64)");
    cr_assert_float_eq(s.max_norm, 0x1p-19 / bound, 1e-9);
    cr_assert_eq(s.n_over_bound, 1);
    cr_assert_eq(s.n_gross, 1);
    cr_assert_eq(s.n_nonzero_err, 1);
    cr_assert_eq(s.n_equal_rounded, 63);
    cr_assert_eq(s.max_ulp, 16.0, "16 ulps, got %g", s.max_ulp);
    cr_assert_float_eq(s.ulp_hist[5], 1.0 / 64.0, 1e-15, "16 ulps lands in bin 9-16");
    cr_assert_float_eq(s.ulp_hist[0], 63.0 / 64.0, 1e-15);
    /* 1.0 = 0x3f800000 and 1 + 2^-19 = 0x3f800010: only bit 4 differs, set in the test value */
    cr_assert_float_eq(s.bit_hist[4], 1.0 / 64.0, 1e-15);
    cr_assert_float_eq(s.bit_set[4], 1.0 / 64.0, 1e-15);
    cr_assert_eq(s.bit_clr[4], 0.0);
    cr_assert_eq(s.gross_single_bit, 1.0);
    cr_assert_eq(s.gross_bit[4], 1.0);
    cr_assert_eq(s.gross_dir_set, 1.0);
    cr_assert_float_eq(s.top1pct_share, 1.0, 1e-12, "one element carries all error");
    /* element 37 is row 4, col 5 of the 8x8 view */
    cr_assert_eq(s.box_rows, 1);
    cr_assert_eq(s.box_cols, 1);
    cr_assert_float_eq(s.box_fill, 1.0, 1e-15);
    cr_assert_float_eq(s.box_share, 1.0 / 64.0, 1e-15);
    cr_assert_eq(s.frac_err_negative, 0.0, "the error moves away from zero");
    pair_free(&p);
}

Test(analyzer, ulp_distances_fill_the_documented_bins)
{
    /* exact = 1.5, test = 1.5 + k ulps for k below; bins: 0,1,2,3-4,5-8,9-16,...,>1024 */
    static const int k[] = {0, 1, 2, 3, 4, 5, 8, 9, 16, 17, 512, 513, 1024, 1025, 5000};
    static const int bin[] = {0, 1, 2, 3, 3, 4, 4, 5, 5, 6, 10, 11, 11, 12, 12};
    int n = (int)(sizeof k / sizeof k[0]);
    pair p = pair_new(n);
    uint32_t base = peat_f32_bits(1.5f);
    for (int i = 0; i < n; i++) {
        peat_f64(p.x)[i] = 1.5;
        peat_f32(p.t)[i] = peat_f32_from_bits(base + (uint32_t)k[i]);
    }
    peat_signature s = sig_of(&p, NULL, 1, 1, n);
    double want[PEAT_ULP_BINS] = {0};
    for (int i = 0; i < n; i++) want[bin[i]] += 1.0 / n;
    for (int b = 0; b < PEAT_ULP_BINS; b++)
        cr_assert_float_eq(s.ulp_hist[b], want[b], 1e-12, "bin %d: %g, expected %g", b,
                           s.ulp_hist[b], want[b]);
    cr_assert_eq(s.max_ulp, 5000.0);
    pair_free(&p);
}

Test(analyzer, ulp_distance_crosses_zero)
{
    /* from +2 subnormal steps to -1 step: 3 representable values apart */
    pair p = pair_new(1);
    peat_f64(p.x)[0] = 2.0 * 0x1p-149;
    peat_f32(p.t)[0] = -0x1p-149f;
    peat_signature s = sig_of(&p, NULL, 1, 1, 1);
    cr_assert_eq(s.max_ulp, 3.0, "got %g", s.max_ulp);
    cr_assert_eq(s.bit_set[31], 1.0, "the sign bit went 0 -> 1");
    pair_free(&p);
}

Test(analyzer, nonfinite_and_flushed_values)
{
    pair p = pair_new(8);
    double x[8] = {1.0, 2.0, 3.0e5, 4.0, 1e-39, 2e-39, 5.0, 6.0};
    for (int i = 0; i < 8; i++) peat_f64(p.x)[i] = x[i], peat_f32(p.t)[i] = (float)x[i];
    peat_f32(p.t)[0] = NAN;
    peat_f32(p.t)[2] = INFINITY;
    peat_f32(p.t)[4] = 0.0f; /* a subnormal flushed */
    peat_signature s = sig_of(&p, NULL, 1, 1, 8);
    cr_assert_eq(s.n_nan, 1);
    cr_assert_eq(s.n_inf, 1);
    cr_assert_eq(s.min_exact_at_inf, 3.0e5);
    cr_assert_eq(s.max_exact_finite, 6.0, "largest |exact| with a finite test value, got %g",
                 s.max_exact_finite);
    cr_assert_eq(s.n_zero_introduced, 1);
    cr_assert_eq(s.max_exact_at_zero, 1e-39);
    cr_assert_eq(s.n_err_subnormal_exact, 1);
    cr_assert_eq(s.n_over_bound, 3, "NaN, Inf and the flushed subnormal, got %lld",
                 (long long)s.n_over_bound);
    cr_assert_float_eq(s.frac_over_bound, 3.0 / 8.0, 1e-15);
    cr_assert_eq(s.min_exact_nonzero, 2e-39, "smallest nonzero exact with a nonzero test value");
    pair_free(&p);
}

/* rms relative error of rounding to p bits; returns the eff_bits reading for n random values. */
static double eff_bits_elementwise(int p, uint64_t seed)
{
    int n = 4096;
    pair q = pair_new(n);
    peat_rng_t *r = peat_rng_new(seed);
    for (int i = 0; i < n; i++) {
        double v = peat_rng_gaussian(r, 3.0);
        peat_f64(q.x)[i] = v;
        peat_f32(q.t)[i] = (float)round_p(v, p);
    }
    peat_signature s = sig_of(&q, NULL, 1, 1, n);
    peat_rng_free(r);
    pair_free(&q);
    return s.eff_bits;
}

Test(analyzer, eff_bits_of_an_output_rounded_to_p_bits)
{
    /* docs/signature.md: an elementwise output rounded once to p bits reads p + 0.58 */
    static const int ps[] = {4, 8, 11, 16};
    for (int i = 0; i < 4; i++) {
        double b = eff_bits_elementwise(ps[i], 11 + (uint64_t)i);
        cr_assert(fabs(b - ps[i]) <= 1.0, "p=%d read %.2f bits", ps[i], b);
        cr_assert(fabs(b - (ps[i] + 0.58)) <= 0.25, "p=%d read %.2f, the derivation says %.2f",
                  ps[i], b, ps[i] + 0.58);
    }
}

/* A GEMM [M,K] x [K,N] with gaussian inputs; where = 0: inputs rounded to p bits then the golden
 * GEMM; where = 1: the golden output rounded to p bits. Returns eff_bits against the exact GEMM. */
static double eff_bits_gemm(int p, int K, int where, uint64_t seed)
{
    int M = 24, N = 20;
    peat_tensor *A, *B, *Ar, *Br, *D, *E;
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, M, K, &A), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, K, N, &B), PEAT_OK);
    peat_rng_t *r = peat_rng_new(seed);
    peat_rng_fill_gaussian(r, A, 1.0);
    peat_rng_fill_gaussian(r, B, 1.0);
    peat_rng_free(r);
    cr_assert_eq(peat_tensor_clone(A, &Ar), PEAT_OK);
    cr_assert_eq(peat_tensor_clone(B, &Br), PEAT_OK);
    if (where == 0) {
        for (int i = 0; i < M * K; i++) peat_f32(Ar)[i] = (float)round_p(peat_f32(A)[i], p);
        for (int i = 0; i < K * N; i++) peat_f32(Br)[i] = (float)round_p(peat_f32(B)[i], p);
    }
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, M, N, &D), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F64, M, N, &E), PEAT_OK);
    peat_op_params pp;
    memset(&pp, 0, sizeof pp);
    pp.i[2] = M, pp.i[3] = N, pp.i[4] = K, pp.i[5] = 1, pp.f[0] = 1.0;
    const peat_tensor *in[2] = {A, B}, *inr[2] = {Ar, Br};
    peat_tensor *od[1] = {D}, *oe[1] = {E};
    peat_args ag = peat_args_make(PEAT_OP_GEMM, &pp, 2, inr, 1, od);
    peat_args ae = peat_args_make(PEAT_OP_GEMM, &pp, 2, in, 1, oe);
    cr_assert_eq(peat_kernel_run(peat_registry_find("gemm_golden"), &ag), PEAT_OK, "%s",
                 peat_error_last());
    cr_assert_eq(peat_kernel_run(peat_registry_find("gemm_exact"), &ae), PEAT_OK, "%s",
                 peat_error_last());
    if (where == 1)
        for (int i = 0; i < M * N; i++) peat_f32(D)[i] = (float)round_p(peat_f32(D)[i], p);
    double *mag = malloc(sizeof(double) * M * N);
    cr_assert_not_null(mag);
    cr_assert_eq(peat_golden_magnitude(&ae, 0, E, mag), PEAT_OK);
    pair q = {D, E, M * N};
    peat_signature s = sig_of(&q, mag, K, M, N);
    free(mag);
    peat_tensor_free(A), peat_tensor_free(B), peat_tensor_free(Ar), peat_tensor_free(Br);
    pair_free(&q);
    return s.eff_bits;
}

Test(analyzer, eff_bits_of_gemm_with_rounded_inputs_or_output)
{
    static const int ks[] = {16, 64, 256, 1024}, ps[] = {4, 8, 11, 16};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            for (int where = 0; where < 2; where++) {
                double b =
                    eff_bits_gemm(ps[j], ks[i], where, 500 + (uint64_t)(8 * i + 2 * j + where));
                cr_assert(fabs(b - ps[j]) <= 1.0, "K=%d p=%d %s rounded: read %.2f bits", ks[i],
                          ps[j], where ? "output" : "inputs", b);
            }
}

Test(analyzer, eff_bits_of_plain_fp32_gemm_falls_with_depth)
{
    /* golden fp32 accumulation: ~24 - log2(sqrt(K)) bits, well above any narrow format */
    double b16 = eff_bits_gemm(24, 16, 1, 42), b1024 = eff_bits_gemm(24, 1024, 1, 43);
    cr_assert(b16 > 21.0 && b16 < 25.0, "K=16 fp32 GEMM read %.2f bits", b16);
    cr_assert(b1024 < b16 - 1.5, "K=1024 (%.2f) should read clearly fewer bits than K=16 (%.2f)",
              b1024, b16);
}

Test(analyzer, truncation_is_a_signed_bias)
{
    int n = 2000;
    pair t = pair_new(n), r = pair_new(n);
    peat_rng_t *g = peat_rng_new(9);
    for (int i = 0; i < n; i++) {
        double v = peat_rng_gaussian(g, 1.0);
        peat_f64(t.x)[i] = peat_f64(r.x)[i] = v;
        peat_f32(t.t)[i] = (float)trunc_p(v, 12);
        peat_f32(r.t)[i] = (float)round_p(v, 12);
    }
    peat_rng_free(g);
    peat_signature st = sig_of(&t, NULL, 1, 1, n), sr = sig_of(&r, NULL, 1, 1, n);
    cr_assert_eq(st.frac_err_negative, 1.0, "every truncation error shrinks |x|, got %g",
                 st.frac_err_negative);
    cr_assert(st.bias_t < -20.0, "bias t of truncation %g", st.bias_t);
    cr_assert(fabs(sr.frac_err_negative - 0.5) < 0.05, "RN: %g toward zero", sr.frac_err_negative);
    cr_assert(fabs(sr.bias_t) < 4.0, "RN is unbiased, t = %g", sr.bias_t);
    cr_assert_eq(st.test_mant_bits, 12);
    cr_assert_eq(sr.test_mant_bits, 12);
    pair_free(&t), pair_free(&r);
}

Test(analyzer, spatial_box_of_a_block_and_of_edge_rows)
{
    /* 16x16 of exact 1.0; a 4x3 block at rows 5-8, cols 2-4 zeroed */
    pair p = pair_new(256);
    for (int i = 0; i < 256; i++) peat_f64(p.x)[i] = 1.0, peat_f32(p.t)[i] = 1.0f;
    for (int r = 5; r < 9; r++)
        for (int c = 2; c < 5; c++) peat_f32(p.t)[r * 16 + c] = 0.0f;
    peat_signature s = sig_of(&p, NULL, 1, 16, 16);
    cr_assert_eq(s.n_gross, 12);
    cr_assert_eq(s.box_rows, 4);
    cr_assert_eq(s.box_cols, 3);
    cr_assert_float_eq(s.box_fill, 1.0, 1e-15);
    cr_assert_float_eq(s.box_share, 12.0 / 256.0, 1e-15);
    cr_assert_eq(s.box_at_bottom, 0);
    cr_assert_eq(s.box_at_right, 0);
    cr_assert_eq(s.n_zero_introduced, 12);
    cr_assert_eq(s.gross_single_bit, 0.0, "1.0 -> 0.0 clears many bits");
    /* the last two rows wrong instead */
    for (int i = 0; i < 256; i++) peat_f32(p.t)[i] = i >= 14 * 16 ? 2.0f : 1.0f;
    s = sig_of(&p, NULL, 1, 16, 16);
    cr_assert_eq(s.box_rows, 2);
    cr_assert_eq(s.box_cols, 16);
    cr_assert_eq(s.box_at_bottom, 1);
    cr_assert_eq(s.box_tensor_rows, 16);
    cr_assert_float_eq(s.frac_err_in_last_tile, 1.0, 1e-15);
    pair_free(&p);
}

Test(analyzer, strided_single_bit_errors)
{
    /* bit 25 (an exponent bit, 1 for |x| in [1,2)) cleared in every 4th element from 2: x / 16 */
    int n = 400;
    pair p = pair_new(n);
    for (int i = 0; i < n; i++) {
        double v = 1.0 + i / 512.0;
        peat_f64(p.x)[i] = v;
        float f = (float)v;
        peat_f32(p.t)[i] = i % 4 == 2 ? peat_f32_from_bits(peat_f32_bits(f) & ~(1u << 25)) : f;
    }
    peat_signature s = sig_of(&p, NULL, 1, 20, 20);
    cr_assert_eq(s.n_gross, 100);
    cr_assert_eq(s.gross_stride, 4, "lane distance 4, got %lld", (long long)s.gross_stride);
    cr_assert_eq(s.gross_single_bit, 1.0);
    cr_assert_eq(s.gross_bit[25], 1.0);
    cr_assert_eq(s.gross_dir_set, 0.0, "the bit was cleared");
    cr_assert_float_eq(s.bit_clr[25], 0.25, 1e-15);
    cr_assert_eq(s.bit_set[25], 0.0);
    pair_free(&p);
}

Test(analyzer, smooth_error_vs_independent_noise)
{
    /* err = 1e-4 x sin(x) (a smooth function of the input) vs err = 1e-4 x N(0,1) */
    int n = 5000;
    pair sm = pair_new(n), no = pair_new(n);
    peat_tensor *xin;
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &xin), PEAT_OK);
    peat_rng_t *g = peat_rng_new(77);
    for (int i = 0; i < n; i++) {
        double x = peat_rng_uniform(g) * 8.0 - 4.0;
        double y = 1.0 + x * x; /* exact output, never 0 */
        peat_f32(xin)[i] = (float)x;
        peat_f64(sm.x)[i] = peat_f64(no.x)[i] = y;
        peat_f32(sm.t)[i] = (float)(y * (1.0 + 1e-4 * sin(x)));
        peat_f32(no.t)[i] = (float)(y * (1.0 + 1e-4 * peat_rng_gaussian(g, 1.0)));
    }
    peat_rng_free(g);
    peat_signature ss, sn;
    peat_analyzer_acc_t *a = peat_analyzer_acc_new("s", PEAT_OP_GELU);
    cr_assert_eq(peat_analyzer_acc_add_input(a, sm.t, sm.x, NULL, 1, 1, n, xin), PEAT_OK);
    cr_assert_eq(peat_analyzer_signature(a, &ss), PEAT_OK);
    peat_analyzer_acc_free(a);
    a = peat_analyzer_acc_new("n", PEAT_OP_GELU);
    cr_assert_eq(peat_analyzer_acc_add_input(a, no.t, no.x, NULL, 1, 1, n, xin), PEAT_OK);
    cr_assert_eq(peat_analyzer_signature(a, &sn), PEAT_OK);
    peat_analyzer_acc_free(a);
    cr_assert(ss.err_roughness < 0.1, "smooth error: roughness %g", ss.err_roughness);
    cr_assert(ss.err_sign_changes < 0.01, "sin changes sign 3 times over 5000 points: %g",
              ss.err_sign_changes);
    cr_assert(sn.err_roughness > 0.8 && sn.err_roughness < 1.2, "noise: roughness %g",
              sn.err_roughness);
    cr_assert(fabs(sn.err_sign_changes - 0.5) < 0.05, "noise: sign changes %g",
              sn.err_sign_changes);
    peat_tensor_free(xin);
    pair_free(&sm), pair_free(&no);
}

Test(analyzer, input_correlation_of_relative_and_absolute_errors)
{
    /* depth 4, mag = 1 (s = 1/2): relative noise |err|/s = 2e-3 |x| |N| against |x|/s = 2 |x|.
     * log|x| and log|N| of two half-normals have equal variance, so the logs correlate with
     * r = 1/sqrt(2); ranks of a gaussian pair give rho = (6/pi) asin(r/2) = 0.69. Additive noise
     * of the scale s does not depend on x: rho ~ 0 (+-1/sqrt(n)). */
    int n = 3000;
    pair rel = pair_new(n), add = pair_new(n);
    double *mag = malloc(sizeof(double) * n);
    cr_assert_not_null(mag);
    peat_rng_t *g = peat_rng_new(123);
    for (int i = 0; i < n; i++) {
        double x = peat_rng_gaussian(g, 2.0);
        mag[i] = 1.0;
        peat_f64(rel.x)[i] = peat_f64(add.x)[i] = x;
        peat_f32(rel.t)[i] = (float)(x * (1.0 + 1e-3 * peat_rng_gaussian(g, 1.0)));
        peat_f32(add.t)[i] = (float)(x + 1e-3 * 0.5 * peat_rng_gaussian(g, 1.0));
    }
    peat_rng_free(g);
    peat_signature sr = sig_of(&rel, mag, 4, 1, n), sa = sig_of(&add, mag, 4, 1, n);
    cr_assert(fabs(sr.corr_err_input - 0.69) < 0.06, "relative noise: rho %g, expected 0.69",
              sr.corr_err_input);
    cr_assert(fabs(sa.corr_err_input) < 0.07, "additive noise: rho %g", sa.corr_err_input);
    free(mag);
    pair_free(&rel), pair_free(&add);
}

Test(analyzer, quantiles_and_means_over_several_tensors)
{
    /* two tensors: errors 1..100 ulps-at-1 and none; mean and median are hand-known */
    pair a = pair_new(100), b = pair_new(100);
    for (int i = 0; i < 100; i++) {
        peat_f64(a.x)[i] = peat_f64(b.x)[i] = 1.0;
        peat_f32(a.t)[i] = (float)(1.0 + (i + 1) * 0x1p-23);
        peat_f32(b.t)[i] = 1.0f;
    }
    peat_analyzer_acc_t *acc = peat_analyzer_acc_new("q", PEAT_OP_GEMM);
    cr_assert_eq(peat_analyzer_acc_add(acc, a.t, a.x, NULL, 1, 10, 10), PEAT_OK);
    cr_assert_eq(peat_analyzer_acc_add(acc, b.t, b.x, NULL, 1, 10, 10), PEAT_OK);
    peat_signature s;
    cr_assert_eq(peat_analyzer_signature(acc, &s), PEAT_OK);
    peat_analyzer_acc_free(acc);
    cr_assert_eq(s.n_calls, 2);
    cr_assert_eq(s.n_elems, 200);
    /* relative errors: 100 zeros and k 2^-23 for k = 1..100: mean 50.5/2 2^-23, median 0.5 2^-23 */
    cr_assert_float_eq(s.mean_rel, 25.25 * 0x1p-23, 1e-15);
    /* the median comes from the sketch: within its documented relative accuracy 2^-7 */
    cr_assert(fabs(s.median_rel / (0.5 * 0x1p-23) - 1.0) <= 0x1p-7, "median_rel %a", s.median_rel);
    cr_assert_eq(s.max_rel, 100 * 0x1p-23);
    pair_free(&a), pair_free(&b);
}

Test(analyzer, repeatability)
{
    pair p = pair_new(10);
    peat_tensor *r2;
    for (int i = 0; i < 10; i++) peat_f32(p.t)[i] = (float)i;
    cr_assert_eq(peat_tensor_clone(p.t, &r2), PEAT_OK);
    peat_analyzer_acc_t *acc = peat_analyzer_acc_new("r", PEAT_OP_GEMM);
    peat_analyzer_acc_add_repeat(acc, p.t, r2);
    peat_signature s;
    cr_assert_eq(peat_analyzer_signature(acc, &s), PEAT_OK);
    cr_assert_eq(s.repeat_max_diff, 0.0, "identical runs");
    peat_f32(r2)[3] += 0.5f;
    peat_f32(r2)[7] -= 0.25f;
    peat_analyzer_acc_add_repeat(acc, p.t, r2);
    cr_assert_eq(peat_analyzer_signature(acc, &s), PEAT_OK);
    cr_assert_eq(s.repeat_max_diff, 0.5);
    cr_assert_eq(s.repeat_n_diff, 2);
    peat_analyzer_acc_free(acc);
    peat_tensor_free(r2);
    pair_free(&p);
}

Test(analyzer, hash_tells_identical_outputs)
{
    pair p = pair_new(50);
    for (int i = 0; i < 50; i++) peat_f64(p.x)[i] = i * 0.1, peat_f32(p.t)[i] = (float)(i * 0.1);
    peat_signature a = sig_of(&p, NULL, 1, 5, 10), b = sig_of(&p, NULL, 1, 5, 10);
    cr_assert_eq(a.test_hash, b.test_hash);
    peat_f32(p.t)[49] = nextafterf(peat_f32(p.t)[49], 0.0f);
    b = sig_of(&p, NULL, 1, 5, 10);
    cr_assert_neq(a.test_hash, b.test_hash, "one ulp in one element changes the hash");
    pair_free(&p);
}

Test(analyzer, bad_arguments)
{
    pair p = pair_new(6);
    peat_analyzer_acc_t *acc = peat_analyzer_acc_new("b", PEAT_OP_GEMM);
    cr_assert_eq(peat_analyzer_acc_add(acc, p.t, p.x, NULL, 0, 2, 3), PEAT_ERR_INVAL, "depth 0");
    cr_assert_eq(peat_analyzer_acc_add(acc, p.t, p.x, NULL, 1, 4, 2), PEAT_ERR_SHAPE,
                 "view 4x2 != 6");
    cr_assert_eq(peat_analyzer_acc_add(acc, NULL, p.x, NULL, 1, 2, 3), PEAT_ERR_INVAL);
    peat_tensor *other;
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F64, 7, &other), PEAT_OK);
    cr_assert_eq(peat_analyzer_acc_add(acc, p.t, other, NULL, 1, 2, 3), PEAT_ERR_SHAPE);
    cr_assert(strstr(peat_error_last(), "7") != NULL, "message names the size: %s",
              peat_error_last());
    peat_signature s;
    cr_assert_eq(peat_analyzer_signature(acc, &s), PEAT_OK);
    cr_assert_eq(s.n_elems, 0, "refused adds leave nothing behind");
    cr_assert(isnan(s.eff_bits));
    peat_tensor_free(other);
    peat_analyzer_acc_free(acc);
    pair_free(&p);
}

Test(analyzer, json_has_fixed_keys_and_nulls)
{
    pair p = pair_new(4);
    for (int i = 0; i < 4; i++) peat_f64(p.x)[i] = 1.0 + i, peat_f32(p.t)[i] = (float)(1.0 + i);
    peat_signature s = sig_of(&p, NULL, 1, 2, 2);
    int need = peat_analyzer_signature_to_json(&s, NULL, 0);
    cr_assert_gt(need, 100);
    char *buf = malloc((size_t)need + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(peat_analyzer_signature_to_json(&s, buf, (size_t)need + 1), need);
    cr_assert_eq((int)strlen(buf), need);
    const char *head = "{\"version\":1,\"kernel\":\"t\",\"op\":\"gemm\",";
    cr_assert(strncmp(buf, head, strlen(head)) == 0, "starts: %.60s", buf);
    cr_assert(buf[need - 1] == '}');
    /* no errors: the bias t statistic is undefined and written as null */
    cr_assert(strstr(buf, "\"bias_t\":null") != NULL, "%s", buf);
    cr_assert(strstr(buf, "\"eff_bits\":53,") != NULL, "%s", buf);
    cr_assert(!strstr(buf, ":nan") && !strstr(buf, ":-nan") && !strstr(buf, ":inf") &&
                  !strstr(buf, ":-inf"),
              "no bare nan/inf: %s", buf);
    /* the keys come in one fixed order */
    const char *k1 = strstr(buf, "\"max_norm\""), *k2 = strstr(buf, "\"eff_bits\""),
               *k3 = strstr(buf, "\"repeat_n_diff\"");
    cr_assert(k1 && k2 && k3 && k1 < k2 && k2 < k3, "key order");
    /* a short buffer is filled as far as it goes and the needed size still returned */
    char small[16];
    cr_assert_eq(peat_analyzer_signature_to_json(&s, small, sizeof small), need);
    cr_assert_eq(strlen(small), sizeof small - 1);
    free(buf);
    pair_free(&p);
}

/* ---- streaming estimators: sketch accuracy, merging, thread count --------------------------- */

#include "analyzer/internal.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The exact q-quantile of sorted v[0..n) with gsl_stats_quantile_from_sorted_data's definition. */
static double exact_quantile(const double *v, int64_t n, double q)
{
    double pos = q * (double)(n - 1);
    int64_t lo = (int64_t)floor(pos);
    double f = pos - (double)lo;
    return lo + 1 < n ? v[lo] + f * (v[lo + 1] - v[lo]) : v[lo];
}

Test(analyzer, sketch_quantiles_within_the_stated_accuracy)
{
    /* three known shapes: exponential (rate 1), log-normal over ~30 octaves (sigma 5 in ln), and
     * a quarter exact zeros with the rest uniform on [1e-3, 1e3]; every quantile must be within
     * 2^-7 relative of the exact one (docs/signature.md) */
    int64_t n = 200000;
    double *v = malloc(sizeof(double) * n);
    cr_assert_not_null(v);
    peat_rng_t *g = peat_rng_new(2024);
    static const double qs[] = {0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999};
    for (int shape = 0; shape < 3; shape++) {
        peat_sketch s;
        cr_assert_eq(peat_analyzer_sketch_init(&s), PEAT_OK);
        for (int64_t i = 0; i < n; i++) {
            double u = peat_rng_uniform(g);
            v[i] = shape == 0   ? -log(1.0 - u)
                   : shape == 1 ? exp(peat_rng_gaussian(g, 5.0))
                   : u < 0.25   ? 0.0
                                : 1e-3 + (u - 0.25) / 0.75 * (1e3 - 1e-3);
            peat_sketch_add(&s, v[i]);
        }
        qsort(v, (size_t)n, sizeof *v, cmp_double);
        for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++) {
            double want = exact_quantile(v, n, qs[k]),
                   got = peat_analyzer_sketch_quantile(&s, qs[k]);
            double err = want == 0.0 ? fabs(got) : fabs(got / want - 1.0);
            cr_assert(err <= 0x1p-7, "shape %d q %g: sketch %.10g, exact %.10g (rel %.3g)", shape,
                      qs[k], got, want, err);
        }
        peat_analyzer_sketch_free(&s);
    }
    peat_rng_free(g);
    free(v);
}

Test(analyzer, merged_sketches_equal_one_sketch_over_the_union)
{
    /* three parts merged in two different orders, against one sketch that saw everything */
    peat_sketch all, part[3], m1, m2;
    cr_assert_eq(peat_analyzer_sketch_init(&all), PEAT_OK);
    cr_assert_eq(peat_analyzer_sketch_init(&m1), PEAT_OK);
    cr_assert_eq(peat_analyzer_sketch_init(&m2), PEAT_OK);
    for (int k = 0; k < 3; k++) cr_assert_eq(peat_analyzer_sketch_init(&part[k]), PEAT_OK);
    peat_rng_t *g = peat_rng_new(7);
    for (int i = 0; i < 90000; i++) {
        /* zeros, tiny ("low"), ordinary and huge ("high") values all occur */
        double u = peat_rng_uniform(g);
        double v = u < 0.1 ? 0.0 : u < 0.15 ? 1e-45 * u : u > 0.99 ? 1e300 * u : exp(40 * u - 20);
        peat_sketch_add(&all, v);
        peat_sketch_add(&part[i % 3], v);
    }
    peat_rng_free(g);
    peat_analyzer_sketch_merge(&m1, &part[0]), peat_analyzer_sketch_merge(&m1, &part[1]);
    peat_analyzer_sketch_merge(&m1, &part[2]);
    peat_analyzer_sketch_merge(&m2, &part[2]), peat_analyzer_sketch_merge(&m2, &part[1]);
    peat_analyzer_sketch_merge(&m2, &part[0]);
    const peat_sketch *m[2] = {&m1, &m2};
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(m[k]->n, all.n);
        cr_assert(all.count[SKETCH_SLOT_ZERO] > 0 && all.count[SKETCH_SLOT_LOW] > 0 &&
                      all.count[SKETCH_SLOT_HIGH] > 0,
                  "zeros, low and high values all occur");
        cr_assert_eq(m[k]->sumsq_high, all.sumsq_high);
        cr_assert_eq(m[k]->min_pos, all.min_pos);
        cr_assert_eq(m[k]->max, all.max);
        cr_assert_eq(memcmp(m[k]->count, all.count, SKETCH_SLOTS * sizeof *all.count), 0,
                     "merge order %d: bucket counts differ from the single sketch", k);
        for (double q = 0.0; q <= 1.0; q += 0.125)
            cr_assert_eq(peat_analyzer_sketch_quantile(m[k], q),
                         peat_analyzer_sketch_quantile(&all, q), "q %g", q);
        cr_assert_eq(peat_analyzer_sketch_top_sumsq(m[k], 900),
                     peat_analyzer_sketch_top_sumsq(&all, 900));
    }
    peat_analyzer_sketch_free(&all), peat_analyzer_sketch_free(&m1), peat_analyzer_sketch_free(&m2);
    for (int k = 0; k < 3; k++) peat_analyzer_sketch_free(&part[k]);
}

/* A tensor of n elements with every kind of element the pass distinguishes: rounding noise,
 * gross single-bit errors on a stride, NaN, Inf, flushed zeros, exact zeros, non-finite exact. */
static void varied_pair(pair *p, peat_tensor *in, uint64_t seed)
{
    peat_rng_t *g = peat_rng_new(seed);
    for (int64_t i = 0; i < p->n; i++) {
        double x = peat_rng_gaussian(g, 3.0);
        float t = (float)(x * (1.0 + 1e-6 * peat_rng_gaussian(g, 1.0)));
        if (i % 997 == 5) t = peat_f32_from_bits(peat_f32_bits((float)x) ^ (1u << 27));
        if (i % 20011 == 7) t = NAN;
        if (i % 30011 == 9) t = INFINITY;
        if (i % 7001 == 3) x = 1e-39, t = 0.0f;
        if (i % 5003 == 1) x = 0.0, t = 0.0f;
        if (i == 12345) x = INFINITY, t = INFINITY;
        peat_f64(p->x)[i] = x;
        peat_f32(p->t)[i] = t;
        peat_f32(in)[i] = (float)(x / 3.0);
    }
    peat_rng_free(g);
}

/* Every 1013th element of p becomes 0.75 exactly, with its input 0.25 and a test value a few
 * ulps off that differs from element to element: equal keys with different errors, whose order
 * along a key must not depend on the order the threads sampled them in. */
static void tied_keys(pair *p, peat_tensor *in)
{
    for (int64_t i = 4; i < p->n; i += 1013) {
        peat_f64(p->x)[i] = 0.75;
        peat_f32(p->t)[i] = 0.75f + (float)(i % 7 - 3) * 0x1p-23f;
        peat_f32(in)[i] = 0.25f;
    }
}

Test(analyzer, same_signature_for_any_number_of_threads)
{
    /* 5 units and a partial one per tensor, two tensors; 1, 2, 3 and 8 threads must give the
     * same signature to the last bit (compared through the JSON, which prints %.17g) */
    int64_t n = 5 * PEAT_ANALYZER_CHUNK + 128;
    pair a = pair_new(n), b = pair_new(n);
    peat_tensor *ia, *ib;
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &ia), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &ib), PEAT_OK);
    varied_pair(&a, ia, 11);
    varied_pair(&b, ib, 12);
    tied_keys(&a, ia), tied_keys(&b, ib);
    static char ref[16384], got[16384];
    static const int threads[] = {1, 2, 3, 8};
    for (int k = 0; k < 4; k++) {
        peat_analyzer_acc_t *acc = peat_analyzer_acc_new("th", PEAT_OP_GEMM);
        cr_assert_not_null(acc);
        peat_analyzer_acc_set_threads(acc, threads[k]);
        cr_assert_eq(peat_analyzer_acc_add_terms(acc, a.t, a.x, NULL, 64, 64, n / 128, 128, ia),
                     PEAT_OK, "%s", peat_error_last());
        cr_assert_eq(peat_analyzer_acc_add_terms(acc, b.t, b.x, NULL, 16, 4, 1, n, ib), PEAT_OK);
        peat_signature s;
        cr_assert_eq(peat_analyzer_signature(acc, &s), PEAT_OK, "%s", peat_error_last());
        peat_analyzer_acc_free(acc);
        cr_assert_eq(s.n_elems, 2 * n);
        cr_assert(s.n_gross > 0 && s.n_nan > 0 && s.n_inf > 0 && s.n_zero_introduced > 0,
                  "the data exercise the rare paths");
        int len = peat_analyzer_signature_to_json(&s, k ? got : ref, sizeof ref);
        cr_assert(len > 0 && len < (int)sizeof ref);
        if (k) cr_assert_str_eq(got, ref, "%d threads differ from 1 thread", threads[k]);
    }
    peat_tensor_free(ia), peat_tensor_free(ib);
    pair_free(&a), pair_free(&b);
}

/* The JSON of acc's signature into js (freed by the caller). */
static char *json_sig(const peat_signature *s)
{
    int len = peat_analyzer_signature_to_json(s, NULL, 0) + 1;
    char *js = malloc((size_t)len);
    cr_assert_not_null(js);
    peat_analyzer_signature_to_json(s, js, (size_t)len);
    return js;
}

static char *json_of(const peat_analyzer_acc_t *acc)
{
    peat_signature s;
    cr_assert_eq(peat_analyzer_signature(acc, &s), PEAT_OK, "%s", peat_error_last());
    return json_sig(&s);
}

Test(analyzer, pair_add_equals_two_adds)
{
    /* A candidate and a golden-like output (the same exact values, the golden rounded once) added
     * as a pair must leave each accumulator exactly as its own add does: compared through the
     * JSON (%.17g), for one-unit and many-unit tensors (the larger one above the sample's bound),
     * on 1 and 2 threads, with an explicit magnitude and an input key. */
    static const int64_t sizes[] = {1000, 3 * PEAT_ANALYZER_CHUNK + 77, 300000};
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        int64_t n = sizes[z];
        pair a = pair_new(n);
        peat_tensor *in, *gold;
        cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &in), PEAT_OK);
        cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &gold), PEAT_OK);
        varied_pair(&a, in, 31 + z);
        double *mag = malloc(sizeof(double) * (size_t)n);
        cr_assert_not_null(mag);
        for (int64_t i = 0; i < n; i++) {
            mag[i] = fabs(peat_f64(a.x)[i]) * 2.0;
            peat_f32(gold)[i] = (float)peat_f64(a.x)[i];
        }
        for (int threads = 1; threads <= 2; threads++) {
            peat_analyzer_acc_t *pc = peat_analyzer_acc_new("c", PEAT_OP_GEMM);
            peat_analyzer_acc_t *pg = peat_analyzer_acc_new("g", PEAT_OP_GEMM);
            peat_analyzer_acc_t *sc = peat_analyzer_acc_new("c", PEAT_OP_GEMM);
            peat_analyzer_acc_t *sg = peat_analyzer_acc_new("g", PEAT_OP_GEMM);
            cr_assert(pc && pg && sc && sg);
            peat_analyzer_acc_set_threads(pc, threads);
            peat_analyzer_acc_set_threads(sc, threads);
            peat_analyzer_acc_set_threads(sg, threads);
            for (int rep = 0; rep < 2; rep++) { /* a second call: priorities differ per call */
                cr_assert_eq(
                    peat_analyzer_acc_add_pair(pc, a.t, pg, gold, a.x, mag, 32, 8, 1, n, in),
                    PEAT_OK, "%s", peat_error_last());
                cr_assert_eq(peat_analyzer_acc_add_terms(sc, a.t, a.x, mag, 32, 8, 1, n, in),
                             PEAT_OK);
                cr_assert_eq(peat_analyzer_acc_add_terms(sg, gold, a.x, mag, 32, 8, 1, n, in),
                             PEAT_OK);
            }
            char *j1 = json_of(pc), *j2 = json_of(sc), *j3 = json_of(pg), *j4 = json_of(sg);
            cr_assert_str_eq(j1, j2, "candidate side, n %lld, %d threads", (long long)n, threads);
            cr_assert_str_eq(j3, j4, "golden side, n %lld, %d threads", (long long)n, threads);
            free(j1), free(j2), free(j3), free(j4);
            cr_assert_neq(peat_analyzer_acc_add_pair(pc, a.t, pc, gold, a.x, mag, 32, 8, 1, n, in),
                          PEAT_OK, "one accumulator twice");
            cr_assert_neq(
                peat_analyzer_acc_add_pair(pc, a.t, NULL, gold, a.x, mag, 32, 8, 1, n, in),
                PEAT_OK);
            peat_analyzer_acc_free(pc), peat_analyzer_acc_free(pg);
            peat_analyzer_acc_free(sc), peat_analyzer_acc_free(sg);
        }
        free(mag);
        peat_tensor_free(in), peat_tensor_free(gold);
        pair_free(&a);
    }
}

Test(analyzer, signature_quantiles_and_rank_correlation_beyond_the_sample)
{
    /* 400000 elements, three times the sample: relative noise as in
     * input_correlation_of_relative_and_absolute_errors (rho = 0.69 for the whole population).
     * The sample of 2^17 gives rho within +-0.01 at 95% (0.02 is over 3.5 sigma); the quantiles
     * come from the sketch over every element: within 2^-7 of the exact ones. */
    int64_t n = 400000;
    pair p = pair_new(n);
    double *mag = malloc(sizeof(double) * n), *e = malloc(sizeof(double) * n);
    cr_assert(mag && e);
    peat_rng_t *g = peat_rng_new(99);
    for (int64_t i = 0; i < n; i++) {
        double x = peat_rng_gaussian(g, 2.0);
        mag[i] = 1.0;
        peat_f64(p.x)[i] = x;
        peat_f32(p.t)[i] = (float)(x * (1.0 + 1e-3 * peat_rng_gaussian(g, 1.0)));
        /* the test's own e_i = |t - x| / bound, bound = gamma_4 + 5 * 2^-150 */
        e[i] = fabs((double)peat_f32(p.t)[i] - x) / peat_analyzer_bound(1.0, 4);
    }
    peat_rng_free(g);
    peat_signature s = sig_of(&p, mag, 4, 1, n);
    cr_assert(fabs(s.corr_err_input - 0.69) < 0.02, "rho %g, population 0.69", s.corr_err_input);
    qsort(e, (size_t)n, sizeof *e, cmp_double);
    double p50 = exact_quantile(e, n, 0.5), p99 = exact_quantile(e, n, 0.99);
    cr_assert(fabs(s.p50_norm / p50 - 1.0) <= 0x1p-7, "p50 %g, exact %g", s.p50_norm, p50);
    cr_assert(fabs(s.p99_norm / p99 - 1.0) <= 0x1p-7, "p99 %g, exact %g", s.p99_norm, p99);
    free(mag), free(e);
    pair_free(&p);
}

Test(analyzer, sample_bound_that_proves_too_low_is_rescued)
{
    /* One add of 1.2 M elements stages only those below a bound where ~1.1 k of its priorities
     * fall, and counts how many finite ones did. Here 70% of the test values are NaN (never
     * sampled), so only ~0.33 k finite elements fall below it and the add must look again:
     * afterwards the sample holds at least k entries (without the second look: ~0.33 k), and the
     * rank correlation is the population's (relative noise as in
     * signature_quantiles_and_rank_correlation_beyond_the_sample: 0.69). */
    int64_t n = 1200000;
    pair p = pair_new(n);
    double *mag = malloc(sizeof(double) * n);
    cr_assert_not_null(mag);
    peat_rng_t *g = peat_rng_new(7);
    for (int64_t i = 0; i < n; i++) {
        double x = peat_rng_gaussian(g, 2.0);
        mag[i] = 1.0;
        peat_f64(p.x)[i] = x;
        float t = (float)(x * (1.0 + 1e-3 * peat_rng_gaussian(g, 1.0)));
        peat_f32(p.t)[i] = i % 10 < 7 ? NAN : t;
    }
    peat_rng_free(g);
    peat_analyzer_acc_t *acc = peat_analyzer_acc_new("rescue", PEAT_OP_GEMM);
    cr_assert_not_null(acc);
    cr_assert_eq(peat_analyzer_acc_add_terms(acc, p.t, p.x, mag, 4, 4, 1, n, NULL), PEAT_OK);
    cr_assert_geq(acc->smp.n, PEAT_SAMPLE_K, "sample of %lld after the add", (long long)acc->smp.n);
    peat_signature s;
    cr_assert_eq(peat_analyzer_signature(acc, &s), PEAT_OK);
    peat_analyzer_acc_free(acc);
    cr_assert(fabs(s.corr_err_input - 0.69) < 0.02, "rho %g, population 0.69", s.corr_err_input);
    free(mag);
    pair_free(&p);
}

/* FNV-1a 64 of a string: a short fingerprint of a signature's JSON. */
#define PINNED_SIGNATURE_FNV 0xc26245c967e794f0ull
#define PINNED_LARGE_FNV     0x2dc01a5b6a9e8645ull
static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* The signature JSON of a fixed input of n elements (every rare path, an explicit mag and
 * |exact|, an input key), written to js. */
static void pinned_json(int64_t n, char *js, size_t cap)
{
    pair a = pair_new(n);
    peat_tensor *in;
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &in), PEAT_OK);
    varied_pair(&a, in, 21);
    double *mag = malloc(sizeof(double) * (size_t)n);
    cr_assert_not_null(mag);
    for (int64_t i = 0; i < n; i++) mag[i] = fabs(peat_f64(a.x)[i]) * (1.0 + (double)(i % 7));
    peat_analyzer_acc_t *acc = peat_analyzer_acc_new("pin", PEAT_OP_GEMM);
    cr_assert_not_null(acc);
    cr_assert_eq(peat_analyzer_acc_add_terms(acc, a.t, a.x, mag, 32, 8, n / 64, 64, in), PEAT_OK,
                 "%s", peat_error_last());
    cr_assert_eq(peat_analyzer_acc_add_terms(acc, a.t, a.x, NULL, 16, 4, 1, n, NULL), PEAT_OK);
    peat_signature s;
    cr_assert_eq(peat_analyzer_signature(acc, &s), PEAT_OK, "%s", peat_error_last());
    peat_analyzer_acc_free(acc);
    int len = peat_analyzer_signature_to_json(&s, js, cap);
    cr_assert(len > 0 && len < (int)cap);
    free(mag);
    peat_tensor_free(in);
    pair_free(&a);
}

Test(analyzer, signature_json_pinned_across_pass_rewrites)
{
    /* The streaming pass is rewritten for speed under the rule that no result changes: this pins
     * the JSON of two fixed inputs, one below and one above the sample's size (so that the sample
     * is cut within one add), to the fingerprints that the pass of 8782c7d (before the speed
     * work) produced, on glibc x86-64, with one deliberate change since: the floating-point sums
     * run in four interleaved lanes (so that they vectorise), which moved rms_exact, mean_abs,
     * mean_rel, mean_norm, rms_rel_mag, bias_t and top1pct_share by at most 5e-15 relative and
     * nothing else (compared field by field on the first input). A change here means a signature
     * changed: find out why before updating a constant. */
    static char js[16384];
    pinned_json(3 * PEAT_ANALYZER_CHUNK + 192, js, sizeof js);
    cr_assert_eq(fnv1a(js), PINNED_SIGNATURE_FNV, "fingerprint %#llx of %s",
                 (unsigned long long)fnv1a(js), js);
    pinned_json(256 * 1024 + 64 * 7, js, sizeof js);
    cr_assert_eq(fnv1a(js), PINNED_LARGE_FNV, "large: fingerprint %#llx of %s",
                 (unsigned long long)fnv1a(js), js);
}

/* qsort comparator of 64-bit keys (for the reference answers below). */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s;
}

/* The set after any pushes holds exactly the k smallest priorities pushed (the cut finds the k-th
 * by a histogram of top bits and fills dropped slots from above k), with each value still beside
 * its own priority; checked against a full sort, for uniform priorities and for priorities
 * crowded into one histogram bin. */
Test(analyzer, sample_set_keeps_the_k_smallest_priorities)
{
    const int64_t k = 1000, n = 50000;
    for (int crowd = 0; crowd < 2; crowd++) {
        peat_sample_set ss;
        peat_analyzer_sample_set_init(&ss, k);
        uint64_t *pushed = malloc((size_t)n * sizeof *pushed), *all = malloc((size_t)n * 8), s = 7;
        cr_assert(pushed && all);
        for (int64_t i = 0; i < n; i++) {
            /* crowded: every priority shares its top 40 bits (so one histogram bin holds them
             * all); the low 24 bits are i times an odd number, a bijection, so they never tie */
            pushed[i] =
                crowd ? (0x5a5a5a5a5aull << 24) | (((uint64_t)i * 40503u) & 0xffffffu) : lcg(&s);
            peat_sample x = {.prio = pushed[i], .inv_s = 1.0, .key = NAN, .x = (double)i};
            peat_analyzer_sample_set_push(&ss, &x);
        }
        memcpy(all, pushed, (size_t)n * sizeof *all);
        qsort(all, (size_t)n, sizeof *all, cmp_u64);
        cr_assert_leq(ss.n, k + k / 2);
        cr_assert_geq(ss.n, k);
        uint64_t *got = malloc((size_t)ss.n * sizeof *got);
        cr_assert_not_null(got);
        memcpy(got, ss.prio, (size_t)ss.n * sizeof *got);
        qsort(got, (size_t)ss.n, sizeof *got, cmp_u64);
        for (int64_t i = 0; i < k; i++)
            cr_assert_eq(got[i], all[i], "crowd %d: rank %lld holds %llx, not %llx", crowd,
                         (long long)i, (unsigned long long)got[i], (unsigned long long)all[i]);
        for (int64_t i = 0; i < ss.n; i++) /* each value still beside its own priority */
            cr_assert_eq(ss.prio[i], pushed[(int64_t)ss.v[i].x], "crowd %d: slot %lld", crowd,
                         (long long)i);
        free(got), free(all), free(pushed);
        peat_analyzer_sample_set_free(&ss);
    }
}

/* The radix argsort is the order of the values, equal values in index order (stable) or in the
 * order of a tie-break word, on values with many exact ties, +-0, long runs of equal high halves
 * (over 32, so the run's own radix sort is used), negative numbers and subnormals; checked
 * against qsort of (value, tie-break, index) triples. */
typedef struct vi {
    double v;
    uint64_t t; /* tie-break: the index, or the tie word */
    uint32_t i;
} vi;
static int cmp_vi(const void *a, const void *b)
{
    const vi *x = a, *y = b;
    if (x->v < y->v) return -1;
    if (x->v > y->v) return 1;
    if (x->v == 0.0 && signbit(x->v) != signbit(y->v)) return signbit(x->v) ? -1 : 1;
    return (x->t > y->t) - (x->t < y->t);
}

/* The argsort of n such values, with tie words (unique hashes, as the sample's priorities) or
 * without (NULL: stable). */
static void argsort_check(int with_tie)
{
    const size_t n = 20001;
    double *v = malloc(n * sizeof *v);
    uint32_t *perm = malloc(n * sizeof *perm);
    uint64_t *scratch = malloc(2 * n * sizeof *scratch), s = 3;
    uint64_t *tie = malloc(n * sizeof *tie);
    vi *ref = malloc(n * sizeof *ref);
    cr_assert(v && perm && scratch && tie && ref);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = lcg(&s);
        switch (r % 6) {
        case 0:
            v[i] = (double)(int)((r >> 8) % 7) - 3.0;
            break; /* exact ties */
        case 1:
            v[i] = (r >> 9) & 1 ? -0.0 : 0.0;
            break; /* signed zeros */
        case 2:
            v[i] = 1.0 + (double)((r >> 8) & 0xfffff) * 0x1p-52;
            break; /* one high half */
        case 3:
            v[i] = ((double)(r >> 11) * 0x1p-53 - 0.5) * 1e6;
            break;
        case 4:
            v[i] = (double)(r >> 11) * 0x1p-53 * 0x1p-1060;
            break; /* subnormals */
        default:
            v[i] = -ldexp((double)(r >> 11) * 0x1p-53, (int)((r >> 3) % 60) - 30);
        }
        tie[i] = peat_sample_prio(7, (int64_t)i);
        ref[i] = (vi){v[i], with_tie ? tie[i] : i, (uint32_t)i};
    }
    peat_analyzer_sample_argsort(v, with_tie ? tie : NULL, n, perm, scratch);
    qsort(ref, n, sizeof *ref, cmp_vi);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(perm[i], ref[i].i, "position %zu: index %u, want %u (%g)", i, perm[i],
                     ref[i].i, ref[i].v);
    free(v), free(perm), free(scratch), free(tie), free(ref);
}

Test(analyzer, radix_argsort_is_the_stable_order)
{
    argsort_check(0);
}

Test(analyzer, radix_argsort_orders_equal_values_by_tie)
{
    argsort_check(1);
}

/* The radix ranks are the mean ranks of a comparison sort, on values with many exact ties, +-0
 * (equal, as == says), long runs of equal high halves and different exponents. */
Test(analyzer, radix_ranks_are_mean_ranks)
{
    const size_t n = 30011;
    double *v = malloc(n * sizeof *v), *rank = malloc(n * sizeof *rank);
    uint64_t *scratch = malloc(2 * n * sizeof *scratch), s = 5;
    vi *ref = malloc(n * sizeof *ref);
    cr_assert(v && rank && scratch && ref);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = lcg(&s);
        switch (r % 4) {
        case 0:
            v[i] = (double)((r >> 8) % 50);
            break; /* exact ties */
        case 1:
            v[i] = (r >> 9) & 1 ? -0.0 : 0.0;
            break; /* +-0: one group */
        case 2:
            v[i] = 2.0 + (double)((r >> 8) & 0xff) * 0x1p-50;
            break; /* equal high halves */
        default:
            v[i] = ldexp((double)(r >> 11) * 0x1p-53, (int)((r >> 3) % 40) - 20);
        }
        ref[i] = (vi){v[i] == 0.0 ? 0.0 : v[i], i, (uint32_t)i};
    }
    peat_analyzer_sample_ranks(v, n, rank, scratch);
    qsort(ref, n, sizeof *ref, cmp_vi);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && ref[j].v == ref[i].v) j++;
        for (size_t t = i; t < j; t++)
            cr_assert_eq(rank[ref[t].i], 0.5 * (double)(i + j + 1), "value %g: rank %g, want %g",
                         ref[t].v, rank[ref[t].i], 0.5 * (double)(i + j + 1));
        i = j;
    }
    free(v), free(rank), free(scratch), free(ref);
}

static int cmp_f64(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The histogram median equals the middle of the sorted values (mean of the two middle ones for
 * even n), for odd and even n, all-equal values, two values and values spread over sign and
 * exponent. */
Test(analyzer, histogram_median_is_the_middle_of_the_sorted_values)
{
    const size_t sizes[] = {1, 2, 3, 10, 1001, 4096, 65537};
    uint64_t s = 11;
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        for (int kind = 0; kind < 3; kind++) {
            size_t n = sizes[c];
            double *v = malloc(n * sizeof *v), *w = malloc(n * sizeof *w);
            uint64_t *scratch = malloc(n * sizeof *scratch);
            cr_assert(v && w && scratch);
            for (size_t i = 0; i < n; i++) {
                uint64_t r = lcg(&s);
                v[i] = kind == 0   ? 2.5
                       : kind == 1 ? (double)(r % 2) * 4.0 - 1.0
                                   : ldexp((double)(r >> 11) * 0x1p-53 - 0.3, (int)(r % 40) - 20);
            }
            memcpy(w, v, n * sizeof *w);
            qsort(w, n, sizeof *w, cmp_f64); /* the reference: a full sort */
            double want = n % 2 ? w[n / 2] : 0.5 * (w[n / 2 - 1] + w[n / 2]);
            double got = peat_analyzer_sample_median(v, n, scratch);
            cr_assert_eq(got, want, "n %zu kind %d: %.17g, want %.17g", n, kind, got, want);
            free(v), free(w), free(scratch);
        }
    }
}

/* Two accumulators that were never fed (every call of the kernel crashed): the pair gives two
 * empty signatures, as the single call does, and touches no array of the empty samples. */
Test(analyzer, signature_pair_of_empty_accumulators)
{
    peat_analyzer_acc_t *c = peat_analyzer_acc_new("c", PEAT_OP_GEMM);
    peat_analyzer_acc_t *g = peat_analyzer_acc_new("g", PEAT_OP_GEMM);
    cr_assert(c && g);
    peat_signature sc, sg, s1;
    cr_assert_eq(peat_analyzer_signature_pair(c, &sc, g, &sg), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(peat_analyzer_signature(c, &s1), PEAT_OK);
    cr_assert_eq(sc.n_elems, 0);
    cr_assert_eq(sg.n_elems, 0);
    cr_assert(isnan(sc.corr_err_input) && isnan(sg.err_roughness));
    char *a = json_sig(&sc), *b = json_sig(&s1);
    cr_assert_str_eq(a, b);
    free(a), free(b);
    peat_analyzer_acc_free(c), peat_analyzer_acc_free(g);
}

/* The pair of signatures is bit for bit the two signatures taken alone (compared through the
 * JSON, %.17g): with samples of the same elements (a candidate whose values are all finite: the
 * shared sorts), and with samples that differ (a candidate with NaN and Inf where the golden's
 * values are finite: each side alone), below and above the sample's size, with an input key and
 * without one, with keys that tie. */
Test(analyzer, signature_pair_equals_two_signatures)
{
    static const int64_t sizes[] = {1000, 300000};
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        for (int shared = 0; shared < 2; shared++) {
            for (int with_input = 0; with_input < 2; with_input++) {
                int64_t n = sizes[z];
                pair a = pair_new(n);
                peat_tensor *in, *gold;
                cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &in), PEAT_OK);
                cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &gold), PEAT_OK);
                varied_pair(&a, in, 77 + z);
                tied_keys(&a, in);
                for (int64_t i = 0; i < n; i++) {
                    double x = peat_f64(a.x)[i];
                    peat_f32(gold)[i] = (float)x;
                    if (shared && !isfinite(peat_f32(a.t)[i])) peat_f32(a.t)[i] = (float)x;
                }
                peat_analyzer_acc_t *c = peat_analyzer_acc_new("c", PEAT_OP_GEMM);
                peat_analyzer_acc_t *g = peat_analyzer_acc_new("g", PEAT_OP_GEMM);
                cr_assert(c && g);
                for (int rep = 0; rep < 2; rep++)
                    cr_assert_eq(peat_analyzer_acc_add_pair(c, a.t, g, gold, a.x, NULL, 32, 8, 1, n,
                                                            with_input ? in : NULL),
                                 PEAT_OK, "%s", peat_error_last());
                peat_signature sc, sg;
                cr_assert_eq(peat_analyzer_signature_pair(c, &sc, g, &sg), PEAT_OK, "%s",
                             peat_error_last());
                cr_assert(!isnan(sc.err_roughness) && !isnan(sg.corr_err_input),
                          "the rank statistics were computed");
                char *p1 = json_sig(&sc), *p2 = json_sig(&sg), *j1 = json_of(c), *j2 = json_of(g);
                cr_assert_str_eq(p1, j1, "candidate, n %lld, shared %d, input %d", (long long)n,
                                 shared, with_input);
                cr_assert_str_eq(p2, j2, "golden, n %lld, shared %d, input %d", (long long)n,
                                 shared, with_input);
                free(p1), free(p2), free(j1), free(j2);
                peat_analyzer_acc_free(c), peat_analyzer_acc_free(g);
                peat_tensor_free(in), peat_tensor_free(gold);
                pair_free(&a);
            }
        }
    }
    peat_signature s;
    cr_assert_neq(peat_analyzer_signature_pair(NULL, &s, NULL, &s), PEAT_OK);
}

/* `mpirun -n N peat run`: calls analysed on three "ranks" (call i on rank i mod 3, as add number
 * i, into each rank's own accumulators), their sketches and samples absorbed and their parts
 * placed in call order, give the signatures of one pair of accumulators fed every call in order,
 * bit for bit; enough elements that the sample is cut. */
Test(analyzer, parts_placed_in_order_equal_the_adds_in_order)
{
    enum { CALLS = 7, N = 60000, RANKS = 3 };
    peat_analyzer_acc_t *rc = peat_analyzer_acc_new("c", PEAT_OP_GEMM),
                        *rg = peat_analyzer_acc_new("g", PEAT_OP_GEMM),
                        *tc = peat_analyzer_acc_new("c", PEAT_OP_GEMM),
                        *tg = peat_analyzer_acc_new("g", PEAT_OP_GEMM), *sc[RANKS], *sg[RANKS];
    cr_assert(rc && rg && tc && tg);
    for (int r = 0; r < RANKS; r++) {
        sc[r] = peat_analyzer_acc_new("c", PEAT_OP_GEMM);
        sg[r] = peat_analyzer_acc_new("g", PEAT_OP_GEMM);
        cr_assert(sc[r] && sg[r]);
        peat_analyzer_acc_set_threads(sc[r], 1 + r); /* parts do not depend on threads */
    }
    size_t ps = peat_analyzer_part_size();
    unsigned char *parts = malloc(2 * CALLS * ps);
    uint64_t s = 12345;
    for (int i = 0; i < CALLS; i++) {
        int64_t n = N + 1000 * i;
        pair a = pair_new(n);
        peat_tensor *gold, *in;
        cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &gold), PEAT_OK);
        cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &in), PEAT_OK);
        for (int64_t j = 0; j < n; j++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            double x = ldexp((double)(s >> 11), -53) * 4.0 - 2.0;
            peat_f64(a.x)[j] = x;
            peat_f32(in)[j] = (float)x;
            peat_f32(a.t)[j] = (float)(x * (1.0 + 1e-6 * (double)((s >> 7) % 5)));
            peat_f32(gold)[j] = (float)x;
        }
        cr_assert_eq(peat_analyzer_acc_add_pair(rc, a.t, rg, gold, a.x, NULL, 32, 8, 1, n, in),
                     PEAT_OK, "%s", peat_error_last());
        int r = i % RANKS;
        cr_assert_eq(peat_analyzer_acc_add_pair_part(sc[r], a.t, sg[r], gold, a.x, NULL, 32, 8, 1,
                                                     n, in, i, parts + 2 * i * ps,
                                                     parts + (2 * i + 1) * ps),
                     PEAT_OK, "%s", peat_error_last());
        pair_free(&a);
        peat_tensor_free(gold);
        peat_tensor_free(in);
    }
    for (int r = RANKS - 1; r >= 0; r--) { /* any order */
        for (int k = 0; k < 2; k++) {
            peat_analyzer_acc_t *from = k ? sg[r] : sc[r], *to = k ? tg : tc;
            size_t n = peat_analyzer_acc_spill_size(from);
            void *b = malloc(n);
            cr_assert_eq(peat_analyzer_acc_spill(from, b), PEAT_OK);
            cr_assert_eq(peat_analyzer_acc_absorb(to, b, n), PEAT_OK, "%s", peat_error_last());
            cr_assert_neq(peat_analyzer_acc_absorb(to, b, n - 1), PEAT_OK, "a cut spill refused");
            free(b);
        }
    }
    for (int i = 0; i < CALLS; i++) {
        peat_analyzer_acc_apply_part(tc, parts + 2 * i * ps);
        peat_analyzer_acc_apply_part(tg, parts + (2 * i + 1) * ps);
    }
    peat_signature x[2], y[2];
    cr_assert_eq(peat_analyzer_signature_pair(rc, &x[0], rg, &x[1]), PEAT_OK);
    cr_assert_eq(peat_analyzer_signature_pair(tc, &y[0], tg, &y[1]), PEAT_OK);
    static char jx[1 << 16], jy[1 << 16];
    for (int k = 0; k < 2; k++) {
        peat_analyzer_signature_to_json(&x[k], jx, sizeof jx);
        peat_analyzer_signature_to_json(&y[k], jy, sizeof jy);
        cr_assert_str_eq(jy, jx, "side %d: the placed parts' signature differs", k);
        cr_assert(!memcmp(&x[k], &y[k], sizeof x[k]), "side %d: signature bits differ", k);
    }
    cr_assert_gt(x[0].n_elems, 2 * PEAT_SAMPLE_K, "enough elements to cut the sample");
    free(parts);
    for (int r = 0; r < RANKS; r++) peat_analyzer_acc_free(sc[r]), peat_analyzer_acc_free(sg[r]);
    peat_analyzer_acc_free(rc), peat_analyzer_acc_free(rg);
    peat_analyzer_acc_free(tc), peat_analyzer_acc_free(tg);
}
