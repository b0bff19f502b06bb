/* test_core.c: the harness core: dtypes, tensors, rng, op checks, registry, exec hooks, profiler,
 * plugins, and the GEMM slice (exact, golden, gemm_new, gemm_bf16). */
#include <criterion/criterion.h>

#include "golden/golden.h"
#include "harness/runtime/builtin.h"
#include "core/check.h"
#include "core/record.h"
#include "peat/backend.h"
#include "peat/plugin.h"

#include <gsl/gsl_rng.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static void init(void)
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK, "%s", peat_error_last());
}

/* ---- dtypes ---- */

Test(dtype, bf16_known_patterns)
{
    cr_assert_eq(peat_f32_to_bf16(1.0f), 0x3f80);
    cr_assert_eq(peat_f32_to_bf16(-2.0f), 0xc000);
    cr_assert_eq(peat_f32_to_bf16(0.0f), 0x0000);
    cr_assert_eq(peat_f32_to_bf16(-0.0f), 0x8000);
    cr_assert_eq(peat_f32_to_bf16(INFINITY), 0x7f80);
    cr_assert_eq(peat_f32_to_bf16(-INFINITY), 0xff80);
    /* 1 + 2^-8 is exactly halfway between bf16 1.0 and 1+2^-7: ties to even (1.0) */
    cr_assert_eq(peat_f32_to_bf16(peat_f32_from_bits(0x3f808000)), 0x3f80);
    /* 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6: ties to even (up) */
    cr_assert_eq(peat_f32_to_bf16(peat_f32_from_bits(0x3f818000)), 0x3f82);
    /* just above halfway rounds up */
    cr_assert_eq(peat_f32_to_bf16(peat_f32_from_bits(0x3f808001)), 0x3f81);
    /* max float rounds to Inf in bf16 (overflow carries into the exponent) */
    cr_assert_eq(peat_f32_to_bf16(peat_f32_from_bits(0x7f7fffff)), 0x7f80);
    /* NaN stays NaN (quiet) even when the payload lives in the low bits only */
    uint16_t h = peat_f32_to_bf16(peat_f32_from_bits(0x7f800001));
    cr_assert((h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0, "NaN became 0x%04x", h);
    /* subnormal float: bf16 keeps fp32's exponent range */
    cr_assert_eq(peat_f32_to_bf16(peat_f32_from_bits(0x00010000)), 0x0001);
    cr_assert_eq(peat_f32_bits(peat_bf16_to_f32(0x3f80)), 0x3f800000u);
    cr_assert_eq(peat_f32_to_bf16_rtz(peat_f32_from_bits(0x3f81ffff)), 0x3f81,
                 "RTZ must drop the bits");
}

Test(dtype, f16_known_patterns)
{
    cr_assert_eq(peat_f32_to_f16(1.0f), 0x3c00);
    cr_assert_eq(peat_f32_to_f16(-2.0f), 0xc000);
    cr_assert_eq(peat_f32_to_f16(65504.0f), 0x7bff, "max half");
    cr_assert_eq(peat_f32_to_f16(65520.0f), 0x7c00, "halfway above max rounds to Inf");
    cr_assert_eq(peat_f32_to_f16(65519.0f), 0x7bff);
    cr_assert_eq(peat_f32_to_f16(1e6f), 0x7c00);
    cr_assert_eq(peat_f32_to_f16(INFINITY), 0x7c00);
    cr_assert_eq(peat_f32_to_f16(ldexpf(1.0f, -14)), 0x0400, "min normal");
    cr_assert_eq(peat_f32_to_f16(ldexpf(1.0f, -24)), 0x0001, "min subnormal");
    cr_assert_eq(peat_f32_to_f16(ldexpf(1.0f, -25)), 0x0000,
                 "half of min subnormal ties to even 0");
    cr_assert_eq(peat_f32_to_f16(ldexpf(1.5f, -25)), 0x0001, "above half rounds up");
    cr_assert_eq(peat_f32_to_f16(ldexpf(3.0f, -25)), 0x0002, "1.5 ulp ties to even 2");
    /* 1 + 2^-11 is halfway between 1 and 1+2^-10: ties to even */
    cr_assert_eq(peat_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00);
    cr_assert_eq(peat_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3c02);
    uint16_t n = peat_f32_to_f16(NAN);
    cr_assert((n & 0x7c00) == 0x7c00 && (n & 0x3ff) != 0, "NaN became 0x%04x", n);
    cr_assert_eq(peat_f16_to_f32(0x0001), ldexpf(1.0f, -24));
    cr_assert_eq(peat_f16_to_f32(0x7bff), 65504.0f);
    cr_assert(isinf(peat_f16_to_f32(0xfc00)) && peat_f16_to_f32(0xfc00) < 0);
    /* every finite half round-trips exactly */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00) continue;
        float f = peat_f16_to_f32((uint16_t)h);
        cr_assert_eq(peat_f32_to_f16(f), h, "half 0x%04x did not round-trip", h);
    }
}

Test(dtype, unit_roundoff_and_parse)
{
    cr_assert_eq(peat_dtype_unit_roundoff(PEAT_DTYPE_F32), ldexp(1.0, -24));
    cr_assert_eq(peat_dtype_unit_roundoff(PEAT_DTYPE_BF16), ldexp(1.0, -8));
    cr_assert_eq(peat_dtype_mantissa_bits(PEAT_DTYPE_F16), 11);
    peat_dtype t;
    cr_assert_eq(peat_dtype_parse("fp16", &t), PEAT_OK);
    cr_assert_eq(t, PEAT_DTYPE_F16);
    cr_assert_eq(peat_dtype_parse("f8", &t), PEAT_ERR_NOTFOUND);
    cr_assert(strstr(peat_error_last(), "f8") != NULL);
}

/* ---- tensors, rng ---- */

Test(tensor, absurd_shapes_refused)
{
    peat_tensor *t = NULL;
    int64_t neg[2] = {4, -1}, huge[3] = {1LL << 20, 1LL << 20, 1LL << 20};
    cr_assert_eq(peat_tensor_alloc(PEAT_DTYPE_F32, 2, neg, &t), PEAT_ERR_SHAPE);
    cr_assert_null(t);
    cr_assert_eq(peat_tensor_alloc(PEAT_DTYPE_F32, 3, huge, &t), PEAT_ERR_SHAPE);
    cr_assert_eq(peat_tensor_alloc(PEAT_DTYPE_F32, 5, neg, &t), PEAT_ERR_SHAPE);
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, 3, 5, &t), PEAT_OK);
    cr_assert_eq(peat_tensor_numel(t), 15);
    cr_assert_eq(peat_tensor_nbytes(t), 60);
    peat_tensor_free(t);
}

#ifndef NDEBUG
/* Debug and sanitizer builds: a broken precondition (an element outside the tensor) aborts with
 * its message instead of reading past the buffer. */
Test(check, broken_precondition_aborts, .signal = SIGABRT)
{
    peat_tensor *t;
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, 4, &t), PEAT_OK);
    peat_tensor_get(t, 4);
    cr_assert_fail("peat_tensor_get(t, 4) of a 4-element tensor returned");
}
#else
/* Release builds (NDEBUG): PEAT_ASSERT costs nothing and stops nothing. */
Test(check, compiled_out_in_release)
{
    int reached = 0;
    PEAT_ASSERT(reached == 1, "a Release build does not check this");
    reached = 1;
    cr_assert_eq(reached, 1, "a false PEAT_ASSERT stopped a Release build");
}
#endif

Test(rng, seeded_and_derived)
{
    peat_rng_t *a = peat_rng_new(7), *b = peat_rng_new(7), *c = peat_rng_new(8);
    int same_c = 1;
    for (int i = 0; i < 100; i++) {
        double x = peat_rng_uniform(a), y = peat_rng_uniform(b), z = peat_rng_uniform(c);
        cr_assert_eq(x, y, "same seed must give the same stream");
        same_c &= x == z;
    }
    cr_assert(!same_c, "different seeds gave the same stream");
    cr_assert_neq(peat_seed_derive(1, "data"), peat_seed_derive(1, "init"));
    cr_assert_eq(peat_seed_derive(1, "data"), peat_seed_derive(1, "data"));
    peat_rng_free(a), peat_rng_free(b), peat_rng_free(c);
}

/* The first n uniform draws of the stream of seed. */
static void draws(uint64_t seed, double *x, int n)
{
    peat_rng_t *r = peat_rng_new(seed);
    cr_assert_not_null(r);
    for (int i = 0; i < n; i++) x[i] = peat_rng_uniform(r);
    peat_rng_free(r);
}

/* Every distinct 64-bit seed has its own stream: seeds differing only above bit 32 (which a
 * 32-bit seed drops), and 0 against 4357 (mt19937's stand-in for 0), among them. */
Test(rng, distinct_64_bit_seeds_give_distinct_streams)
{
    const uint64_t pairs[][2] = {
        {0, 4357},
        {1, (1ull << 32) + 1},
        {0, 1ull << 32},
        {7, 7 | (1ull << 63)},
        {0xffffffffull, 0xffffffffull | (1ull << 40)},
        {12345, 12345 ^ 0xffffffff00000000ull},
    };
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        double a[16], b[16];
        draws(pairs[p][0], a, 16);
        draws(pairs[p][1], b, 16);
        int same = 0;
        for (int i = 0; i < 16; i++) same += a[i] == b[i];
        cr_assert_lt(same, 16, "seeds %llu and %llu give the same stream",
                     (unsigned long long)pairs[p][0], (unsigned long long)pairs[p][1]);
        cr_assert_lt(same, 2, "seeds %llu and %llu share %d of 16 draws",
                     (unsigned long long)pairs[p][0], (unsigned long long)pairs[p][1], same);
    }
}

/* The generator is xoshiro256** with its state filled by splitmix64 from the seed: for seed 0
 * the state is splitmix64's first four outputs from 0 (published constants), and the first
 * output is rotl(s1 * 5, 7) * 9, whose top 53 bits make the first uniform draw. */
Test(rng, known_first_draw)
{
    const uint64_t s1 = 0x6e789e6aa1b965f4ull; /* splitmix64's second output from 0 */
    uint64_t x = s1 * 5;
    x = ((x << 7) | (x >> 57)) * 9;
    double want = (double)(x >> 11) * 0x1p-53, got;
    draws(0, &got, 1);
    cr_assert_eq(got, want, "first draw of seed 0: %.17g, expected %.17g", got, want);
}

/* GSL's default error handler aborts the process; after peat_core_init a GSL error is the
 * thread's last error and the call returns its error value. */
Test(rng, gsl_errors_are_reported_not_fatal)
{
    peat_core_init();
    peat_error_clear();
    gsl_rng *r = gsl_rng_alloc(gsl_rng_taus2);
    cr_assert_not_null(r);
    unsigned long v = gsl_rng_uniform_int(r, 0); /* n = 0: GSL_EINVAL */
    gsl_rng_free(r);
    cr_assert_eq(v, 0);
    cr_assert(strstr(peat_error_last(), "GSL: ") && strstr(peat_error_last(), "invalid"),
              "the GSL error was not recorded: '%s'", peat_error_last());
}

/* ---- GEMM slice ---- */

typedef struct {
    peat_tensor *A, *B, *C;
    peat_op_params p;
} gemm_case;

static gemm_case make_gemm(int tA, int tB, int64_t M, int64_t N, int64_t K, double alpha,
                           double beta, uint64_t seed)
{
    gemm_case g;
    memset(&g, 0, sizeof g);
    g.p.i[0] = tA, g.p.i[1] = tB, g.p.i[2] = M, g.p.i[3] = N, g.p.i[4] = K, g.p.i[5] = 1;
    g.p.f[0] = alpha, g.p.f[1] = beta;
    peat_rng_t *r = peat_rng_new(seed);
    peat_tensor_alloc2(PEAT_DTYPE_F32, tA ? K : M, tA ? M : K, &g.A);
    peat_tensor_alloc2(PEAT_DTYPE_F32, tB ? N : K, tB ? K : N, &g.B);
    peat_tensor_alloc2(PEAT_DTYPE_F32, M, N, &g.C);
    peat_rng_fill_gaussian(r, g.A, 1.0);
    peat_rng_fill_gaussian(r, g.B, 1.0);
    peat_rng_fill_gaussian(r, g.C, 1.0);
    peat_rng_free(r);
    return g;
}

static void free_gemm(gemm_case *g)
{
    peat_tensor_free(g->A), peat_tensor_free(g->B), peat_tensor_free(g->C);
}

static peat_tensor *run_gemm(const char *kernel, gemm_case *g)
{
    const peat_kernel *k = peat_registry_find(kernel);
    cr_assert_not_null(k, "kernel %s not registered", kernel);
    const peat_tensor *in[3] = {g->A, g->B, g->C};
    peat_args a = peat_args_make(PEAT_OP_GEMM, &g->p, g->p.f[1] != 0 ? 3 : 2, in, 0, NULL);
    cr_assert_eq(
        peat_op_alloc_outputs(&a, k->role == PEAT_ROLE_EXACT ? PEAT_DTYPE_F64 : PEAT_DTYPE_F32),
        PEAT_OK);
    cr_assert_eq(peat_kernel_run(k, &a), PEAT_OK, "%s: %s", kernel, peat_error_last());
    return a.out[0];
}

Test(gemm, exact_hand_computed, .init = init)
{
    /* A = [1 2; 3 4], B = [5 6; 7 8], C = [1 1; 1 1], alpha 2, beta -1, A transposed on input */
    float a[] = {1, 3, 2, 4}, b[] = {5, 6, 7, 8}, c[] = {1, 1, 1, 1};
    int64_t s[2] = {2, 2};
    gemm_case g;
    memset(&g, 0, sizeof g);
    peat_tensor_wrap(PEAT_DTYPE_F32, 2, s, a, &g.A);
    peat_tensor_wrap(PEAT_DTYPE_F32, 2, s, b, &g.B);
    peat_tensor_wrap(PEAT_DTYPE_F32, 2, s, c, &g.C);
    g.p.i[0] = 1, g.p.i[2] = 2, g.p.i[3] = 2, g.p.i[4] = 2, g.p.i[5] = 1, g.p.f[0] = 2,
    g.p.f[1] = -1;
    /* AB = [19 22; 43 50] -> 2AB - C = [37 43; 85 99] */
    const double want[] = {37, 43, 85, 99};
    const char *ks[] = {"gemm_exact", "gemm_golden", "gemm_new", "gemm_bf16"};
    for (int k = 0; k < 4; k++) {
        peat_tensor *d = run_gemm(ks[k], &g);
        for (int i = 0; i < 4; i++)
            cr_assert_eq(peat_tensor_get(d, i), want[i], "%s element %d: %g != %g", ks[k], i,
                         peat_tensor_get(d, i), want[i]);
        peat_tensor_free(d);
    }
    free_gemm(&g);
}

/* max_i |x_i - exact_i| / (gamma_K u mag_i) */
static double max_bound_ratio(const peat_tensor *x, const peat_tensor *ex, gemm_case *g, int64_t K,
                              double u)
{
    int64_t n = peat_tensor_numel(ex);
    double *mag = malloc((size_t)n * sizeof *mag);
    const peat_tensor *in[3] = {g->A, g->B, g->C};
    peat_args a = peat_args_make(PEAT_OP_GEMM, &g->p, g->p.f[1] != 0 ? 3 : 2, in, 0, NULL);
    cr_assert_eq(peat_golden_magnitude(&a, 0, ex, mag), PEAT_OK);
    double gk = K * u / (1 - K * u), worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(peat_tensor_get(x, i) - peat_tensor_get(ex, i)) / (gk * mag[i]);
        if (e > worst) worst = e;
    }
    free(mag);
    return worst;
}

Test(gemm, fp32_kernels_within_bound_all_transposes, .init = init)
{
    const int64_t shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 65, 129}, {64, 64, 300}, {5, 200, 17}};
    for (int s = 0; s < 5; s++)
        for (int t = 0; t < 4; t++) {
            gemm_case g = make_gemm(t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], 0.75,
                                    t == 3 ? 0.5 : 0.0, 100 + s * 4 + t);
            peat_tensor *ex = run_gemm("gemm_exact", &g), *go = run_gemm("gemm_golden", &g),
                        *nw = run_gemm("gemm_new", &g);
            int64_t K = shapes[s][2] + (t == 3);
            double rg = max_bound_ratio(go, ex, &g, K, ldexp(1, -24));
            double rn = max_bound_ratio(nw, ex, &g, K, ldexp(1, -24));
            cr_assert(rg <= 1.0, "golden over the fp32 bound (%.3g) shape %d trans %d", rg, s, t);
            cr_assert(rn <= 1.0, "gemm_new over the fp32 bound (%.3g) shape %d trans %d", rn, s, t);
            peat_tensor_free(ex), peat_tensor_free(go), peat_tensor_free(nw);
            free_gemm(&g);
        }
}

Test(gemm, gemm_new_is_not_the_golden, .init = init)
{
    /* K > 128: gemm_new sums k blocks separately; a secret call to the golden would be bit-exact */
    gemm_case g = make_gemm(0, 0, 16, 16, 512, 1.0, 0.0, 9);
    peat_tensor *go = run_gemm("gemm_golden", &g), *nw = run_gemm("gemm_new", &g);
    int diff = 0;
    for (int64_t i = 0; i < 256; i++) diff += peat_tensor_get(go, i) != peat_tensor_get(nw, i);
    cr_assert(diff > 10, "gemm_new matches gemm_golden bit for bit on %d of 256 elements",
              256 - diff);
    peat_tensor_free(go), peat_tensor_free(nw);
    free_gemm(&g);
}

Test(gemm, bf16_error_at_bf16_level, .init = init)
{
    gemm_case g = make_gemm(0, 1, 32, 32, 256, 1.0, 0.0, 11);
    peat_tensor *ex = run_gemm("gemm_exact", &g), *bf = run_gemm("gemm_bf16", &g);
    double r32 = max_bound_ratio(bf, ex, &g, 256, ldexp(1, -24));
    /* each product carries two input roundings, |d| <= 2u + u^2 at u = 2^-8, plus fp32
     * accumulation (gamma_256(2^-24) ~ 1.5e-5): gamma_3(2^-8) = 0.0119 covers both */
    double r8 = max_bound_ratio(bf, ex, &g, 3, ldexp(1, -8));
    cr_assert(r32 > 4.0, "bf16 GEMM should exceed the fp32 bound, max ratio %.3g", r32);
    cr_assert(r8 <= 1.0, "bf16 GEMM over the bf16 bound (%.3g)", r8);
    peat_tensor_free(ex), peat_tensor_free(bf);
    free_gemm(&g);
}

Test(ops, bad_shapes_refused, .init = init)
{
    gemm_case g = make_gemm(0, 0, 4, 4, 4, 1.0, 0.0, 1);
    const peat_kernel *k = peat_registry_find("gemm_golden");
    const peat_tensor *in[2] = {g.A, g.B};
    peat_args a = peat_args_make(PEAT_OP_GEMM, &g.p, 2, in, 0, NULL);
    cr_assert_eq(peat_op_alloc_outputs(&a, PEAT_DTYPE_F32), PEAT_OK);
    a.p.i[4] = 5; /* K no longer matches A and B */
    cr_assert_eq(peat_kernel_run(k, &a), PEAT_ERR_SHAPE);
    cr_assert(strstr(peat_error_last(), "A has 16 elements, expected 20") != NULL, "message: %s",
              peat_error_last());
    a.p.i[4] = 4;
    a.p.f[1] = 1.0; /* beta without C */
    cr_assert_eq(peat_kernel_run(k, &a), PEAT_ERR_SHAPE);
    a.p.f[1] = 0.0;
    a.p.i[2] = -3;
    cr_assert_eq(peat_kernel_run(k, &a), PEAT_ERR_SHAPE);
    a.p.i[2] = 4;
    cr_assert_eq(peat_kernel_run(peat_registry_find("gemm_exact"), &a), PEAT_ERR_INVAL,
                 "exact needs f64 outputs");
    peat_args_free_outputs(&a);
    free_gemm(&g);
    peat_op_kind op;
    cr_assert_eq(peat_op_parse("softmax", &op), PEAT_OK);
    cr_assert_eq(op, PEAT_OP_SOFTMAX);
    cr_assert_eq(peat_op_parse("sofmax", &op), PEAT_ERR_NOTFOUND);
}

/* ---- registry, exec, hooks ---- */

Test(registry, duplicates_and_roles, .init = init)
{
    const peat_kernel *g = peat_registry_find("gemm_golden");
    cr_assert_not_null(g);
    cr_assert_eq(peat_registry_add(g), PEAT_ERR_INVAL, "a name registered twice must be refused");
    cr_assert_eq(peat_registry_role(PEAT_OP_GEMM, PEAT_ROLE_EXACT, "cpu"),
                 peat_registry_find("gemm_exact"));
    for (int op = 0; op < PEAT_OP_COUNT; op++) {
        cr_assert_not_null(peat_registry_role((peat_op_kind)op, PEAT_ROLE_EXACT, "cpu"),
                           "no exact kernel for %s", peat_op_name((peat_op_kind)op));
        cr_assert_not_null(peat_registry_role((peat_op_kind)op, PEAT_ROLE_GOLDEN, "cpu"),
                           "no golden kernel for %s", peat_op_name((peat_op_kind)op));
    }
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK, "init is idempotent");
}

typedef struct {
    int before, after;
    int64_t last_index;
} hook_count;

static peat_status counting_hook(void *u, const peat_kernel *k, const peat_args *a,
                                 const peat_call_info *info, int after)
{
    hook_count *h = u;
    if (after)
        h->after++;
    else
        h->before++;
    h->last_index = info->call_index;
    return PEAT_OK;
}

Test(exec, hooks_and_kernel_swap, .init = init)
{
    peat_exec_t *ex;
    cr_assert_eq(peat_exec_alloc("test", 5, &ex), PEAT_OK);
    hook_count h = {0, 0, -1};
    peat_exec_add_hook(ex, counting_hook, &h);
    gemm_case g = make_gemm(0, 0, 8, 8, 200, 1.0, 0.0, 3);
    const peat_tensor *in[2] = {g.A, g.B};
    peat_args a = peat_args_make(PEAT_OP_GEMM, &g.p, 2, in, 0, NULL);
    peat_op_alloc_outputs(&a, PEAT_DTYPE_F32);
    cr_assert_eq(peat_exec_op(ex, "l0", PEAT_PHASE_FWD, &a), PEAT_OK);
    float first = peat_f32(a.out[0])[0];
    cr_assert_eq(peat_exec_kernel(ex, PEAT_OP_GEMM), peat_registry_find("gemm_golden"));
    cr_assert_eq(peat_exec_set_kernel(ex, PEAT_OP_GEMM, peat_registry_find("gemm_bf16")), PEAT_OK);
    cr_assert_eq(peat_exec_op(ex, "l0", PEAT_PHASE_FWD, &a), PEAT_OK);
    cr_assert_neq(peat_f32(a.out[0])[0], first, "swapped kernel must change the result");
    cr_assert_eq(peat_exec_set_kernel(ex, PEAT_OP_GEMM, peat_registry_find("gemm_exact")),
                 PEAT_ERR_INVAL);
    cr_assert_eq(peat_exec_set_kernel(ex, PEAT_OP_SOFTMAX, peat_registry_find("gemm_new")),
                 PEAT_ERR_INVAL);
    cr_assert_eq(h.before, 2);
    cr_assert_eq(h.after, 2);
    cr_assert_eq(h.last_index, 1);
    cr_assert_eq(peat_exec_calls(ex), 2);
    peat_args_free_outputs(&a);
    free_gemm(&g);
    peat_exec_free(ex);
}

Test(profiler, sampling_policy_and_exact, .init = init)
{
    peat_exec_t *ex;
    peat_exec_alloc("test", 5, &ex);
    peat_record_list list = {0};
    peat_profile_policy pol = {.op_mask = PEAT_OP_BIT(PEAT_OP_GEMM), .every_k = 3, .max_calls = 4};
    peat_profiler_t *pr = peat_profiler_new(&pol, peat_record_list_sink, &list);
    peat_profiler_attach(pr, ex);
    gemm_case g = make_gemm(0, 0, 4, 6, 5, 1.0, 0.0, 3);
    const peat_tensor *in[2] = {g.A, g.B};
    peat_args a = peat_args_make(PEAT_OP_GEMM, &g.p, 2, in, 0, NULL);
    peat_op_alloc_outputs(&a, PEAT_DTYPE_F32);
    for (int it = 0; it < 20; it++) {
        peat_exec_set_iter(ex, it);
        cr_assert_eq(peat_exec_op(ex, "fc", PEAT_PHASE_FWD, &a), PEAT_OK);
    }
    /* calls 0,3,6,9 recorded (every 3rd, capped at 4) */
    cr_assert_eq(list.n, 4);
    for (int i = 0; i < 4; i++) {
        peat_record *r = list.items[i];
        cr_assert_eq(r->call_index, 3 * i);
        cr_assert_eq(r->iter, 3 * i);
        cr_assert_str_eq(r->layer, "fc");
        cr_assert_str_eq(r->golden_kernel, "gemm_golden");
        cr_assert_eq(r->exact[0]->dtype, PEAT_DTYPE_F64);
        cr_assert_eq(memcmp(r->in[0]->data, g.A->data, peat_tensor_nbytes(g.A)), 0);
        cr_assert_eq(memcmp(r->golden[0]->data, a.out[0]->data, peat_tensor_nbytes(a.out[0])), 0);
    }
    peat_record_list_clear(&list);
    peat_profiler_free(pr);
    peat_args_free_outputs(&a);
    free_gemm(&g);
    peat_exec_free(ex);
}

/* ---- plugins ---- */

Test(plugin, load_and_abi_checks, .init = init)
{
    int n = 0;
    cr_assert_eq(peat_plugin_load(PEAT_TEST_PLUGIN_DIR "/libplugin_test_gemms.so", &n), PEAT_OK,
                 "%s", peat_error_last());
    cr_assert_eq(n, 6); /* corrupt, crash, hang, nightly, dropk, bf16 */
    const peat_kernel *k = peat_registry_find("test_gemm_corrupt");
    cr_assert_not_null(k);
    cr_assert_eq(k->role, PEAT_ROLE_CANDIDATE);
    cr_assert_eq(peat_plugin_load(PEAT_TEST_PLUGIN_DIR "/libplugin_bad_abi.so", &n), PEAT_ERR_ABI);
    char built[32], speaks[32];
    snprintf(built, sizeof built, "ABI %d,", PEAT_PLUGIN_ABI_VERSION + 41);
    snprintf(speaks, sizeof speaks, "speaks ABI %d:", PEAT_PLUGIN_ABI_VERSION);
    cr_assert(strstr(peat_error_last(), built) && strstr(peat_error_last(), speaks), "message: %s",
              peat_error_last());
    cr_assert_eq(peat_plugin_load(PEAT_TEST_PLUGIN_DIR "/libplugin_not_peat.so", &n), PEAT_ERR_ABI);
    cr_assert(strstr(peat_error_last(), "not a PEAT plugin"), "message: %s", peat_error_last());
    cr_assert_eq(peat_plugin_load("/nonexistent/libx.so", &n), PEAT_ERR_IO);
}

/* A plugin kernel written against the host API (peat_tensor_numel, peat_f32, peat_dtype_name,
 * PEAT_ERROR) loads, computes a GEMM within the fp32 bound on every transpose, and reports bad
 * input through the host's error state (the message the test reads is the one it set). */
Test(plugin, kernel_calls_the_host_api, .init = init)
{
    int n = 0;
    cr_assert_eq(peat_plugin_load(PEAT_TEST_PLUGIN_DIR "/libplugin_host_api.so", &n), PEAT_OK, "%s",
                 peat_error_last());
    cr_assert_eq(n, 1);
    const peat_kernel *k = peat_registry_find("host_api_gemm");
    cr_assert_not_null(k);
    for (int t = 0; t < 4; t++) {
        gemm_case g = make_gemm(t & 1, t >> 1, 19, 23, 129, 0.75, t == 3 ? 0.5 : 0.0, 500 + t);
        peat_tensor *ex = run_gemm("gemm_exact", &g), *pl = run_gemm("host_api_gemm", &g);
        double r = max_bound_ratio(pl, ex, &g, 129 + (t == 3), ldexp(1, -24));
        cr_assert(r > 0 && r <= 1.0, "plugin GEMM at %.3g x the fp32 bound, trans %d", r, t);
        peat_tensor_free(ex), peat_tensor_free(pl);
        free_gemm(&g);
    }
    /* bad input straight to the kernel (the host would refuse it before): an f64 operand */
    gemm_case g = make_gemm(0, 0, 4, 4, 4, 1.0, 0.0, 7);
    peat_tensor *a64 = NULL;
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F64, 4, 4, &a64), PEAT_OK);
    const peat_tensor *in[2] = {a64, g.B};
    peat_args a = peat_args_make(PEAT_OP_GEMM, &g.p, 2, in, 0, NULL);
    cr_assert_eq(peat_op_alloc_outputs(&a, PEAT_DTYPE_F32), PEAT_OK);
    peat_error_clear();
    cr_assert_eq(k->fn(&a, k), PEAT_ERR_INVAL);
    cr_assert_str_eq(peat_error_last(), "host_api_gemm: input 0 is f64, expected f32");
    peat_args_free_outputs(&a);
    peat_tensor_free(a64);
    free_gemm(&g);
}

Test(backend, cpu_interface)
{
    peat_backend_t b;
    cr_assert_eq(peat_backend_create("auto", 0, &b), PEAT_OK);
    cr_assert_str_eq(peat_backend_name(b), "cpu");
    peat_device_info info;
    cr_assert_eq(peat_backend_device_info(b, &info), PEAT_OK);
    cr_assert(info.compute_units >= 1);
    void *buf;
    cr_assert_eq(peat_backend_alloc(b, 64, &buf), PEAT_OK);
    char src[64], dst[64];
    for (int i = 0; i < 64; i++) src[i] = (char)i;
    cr_assert_eq(peat_backend_copy_h2d(b, buf, src, 64), PEAT_OK);
    cr_assert_eq(peat_backend_copy_d2h(b, dst, buf, 64), PEAT_OK);
    cr_assert_eq(memcmp(src, dst, 64), 0);
    cr_assert_eq(peat_backend_synchronize(b), PEAT_OK);
    double t0 = peat_backend_timer_now(b), t1 = peat_backend_timer_now(b);
    cr_assert(t1 >= t0);
    peat_backend_free(b, buf);
    peat_backend_close(b);
    cr_assert_eq(peat_backend_create("vulkan", 0, &b), PEAT_ERR_NOTFOUND);
    cr_assert_eq(peat_backend_create("cpu", 3, &b), PEAT_ERR_BACKEND);
}
