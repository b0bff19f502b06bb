/* test_inject.c: every pseudo-error model has its documented effect, per seed, and bad specs fail.
 */
#include <criterion/criterion.h>

#include "inject/inject.h"
#include "harness/runtime/builtin.h"
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

TestSuite(inject, .init = setup);

/* A GEMM call D[M,N] = A[M,K] B[K,N] with owned inputs and one F32 output. */
typedef struct gemm {
    peat_tensor *A, *B, *D;
    peat_args a;
    int M, N, K;
} gemm;

static gemm gemm_new(int M, int N, int K, uint64_t seed, double scale_a, double scale_b)
{
    gemm g = {.M = M, .N = N, .K = K};
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, M, K, &g.A), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, K, N, &g.B), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, M, N, &g.D), PEAT_OK);
    peat_rng_t *r = peat_rng_new(seed);
    peat_rng_fill_gaussian(r, g.A, scale_a);
    peat_rng_fill_gaussian(r, g.B, scale_b);
    peat_rng_free(r);
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[2] = M, p.i[3] = N, p.i[4] = K, p.i[5] = 1, p.f[0] = 1.0;
    const peat_tensor *in[2] = {g.A, g.B};
    peat_tensor *out[1] = {g.D};
    g.a = peat_args_make(PEAT_OP_GEMM, &p, 2, in, 1, out);
    return g;
}

static void gemm_free(gemm *g)
{
    peat_tensor_free(g->A);
    peat_tensor_free(g->B);
    peat_tensor_free(g->D);
}

static const peat_kernel *kern(const char *name)
{
    const peat_kernel *k = peat_registry_find(name);
    cr_assert_not_null(k, "kernel %s registered", name);
    return k;
}

/* Golden output of g into a new tensor. */
static peat_tensor *golden_out(const gemm *g)
{
    peat_tensor *D;
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, g->M, g->N, &D), PEAT_OK);
    peat_args a = g->a;
    a.out[0] = D;
    cr_assert_eq(peat_kernel_run(kern("gemm_plain"), &a), PEAT_OK, "%s", peat_error_last());
    return D;
}

static peat_tensor *exact_out(const gemm *g)
{
    peat_tensor *E;
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F64, g->M, g->N, &E), PEAT_OK);
    peat_args a = g->a;
    a.out[0] = E;
    cr_assert_eq(peat_kernel_run(kern("gemm_exact"), &a), PEAT_OK, "%s", peat_error_last());
    return E;
}

/* Runs spec on g with seed into g->D. */
static void inject(gemm *g, const char *spec, uint64_t seed)
{
    peat_inject_model_t *m;
    cr_assert_eq(peat_inject_model_parse(spec, &m), PEAT_OK, "parse %s: %s", spec,
                 peat_error_last());
    cr_assert_eq(peat_inject_run(m, kern("gemm_plain"), &g->a, seed), PEAT_OK, "run %s: %s", spec,
                 peat_error_last());
    peat_inject_model_free(m);
}

static int same_bits(float a, float b)
{
    return peat_f32_bits(a) == peat_f32_bits(b);
}

/* sum_k |a_ik b_kj| for the bound of element (i,j). */
static double mag_of(const gemm *g, int i, int j)
{
    double s = 0.0;
    for (int k = 0; k < g->K; k++)
        s += fabs((double)peat_f32(g->A)[i * g->K + k] * peat_f32(g->B)[k * g->N + j]);
    return s;
}

/* x truncated to p significand bits (the test's own reference). */
static double trunc_p(double x, int p)
{
    if (x == 0.0 || !isfinite(x)) return x;
    int e;
    double m = frexp(x, &e);
    return ldexp(trunc(ldexp(m, p)), e - p);
}

static double gamma_k(int k)
{
    return k * 0x1p-24 / (1.0 - k * 0x1p-24);
}

/* ---- parsing --------------------------------------------------------------------------------- */

Test(inject, every_catalogue_model_parses_and_round_trips)
{
    const char *cat = peat_inject_catalogue();
    cr_assert_not_null(cat);
    int lines = 0;
    for (const char *p = cat; *p;) {
        char name[32];
        int len = 0;
        while (p[len] && p[len] != ' ' && p[len] != '(' && len < 31) len++;
        memcpy(name, p, (size_t)len);
        name[len] = '\0';
        peat_inject_model_t *m, *m2;
        cr_assert_eq(peat_inject_model_parse(name, &m), PEAT_OK, "catalogue model %s: %s", name,
                     peat_error_last());
        /* the canonical spec names every parameter and parses to itself */
        const char *spec = peat_inject_model_spec(m);
        cr_assert_eq(strncmp(spec, name, strlen(name)), 0, "spec %s starts with %s", spec, name);
        cr_assert_eq(peat_inject_model_parse(spec, &m2), PEAT_OK, "%s: %s", spec,
                     peat_error_last());
        cr_assert_str_eq(peat_inject_model_spec(m2), spec);
        peat_inject_model_free(m);
        peat_inject_model_free(m2);
        lines++;
        const char *nl = strchr(p, '\n');
        cr_assert_not_null(nl, "one line per model");
        cr_assert_gt(nl - p, (long)strlen(name) + 10, "model %s has a description", name);
        p = nl + 1;
    }
    cr_assert_eq(lines, 13, "13 models in the catalogue, got %d", lines);
}

Test(inject, parse_fills_given_values_and_defaults)
{
    peat_inject_model_t *m;
    cr_assert_eq(peat_inject_model_parse(" bitflip ( bit = 7 , count=3 ) ", &m), PEAT_OK, "%s",
                 peat_error_last());
    cr_assert_str_eq(peat_inject_model_spec(m), "bitflip(bit=7,count=3,out=0)");
    peat_inject_model_free(m);
    cr_assert_eq(peat_inject_model_parse("precision(where=output,fmt=fp16)", &m), PEAT_OK);
    cr_assert_str_eq(peat_inject_model_spec(m), "precision(fmt=fp16,where=output,bits=8)");
    peat_inject_model_free(m);
    cr_assert_eq(peat_inject_model_parse("noise(sigma=2.5e-4)", &m), PEAT_OK);
    cr_assert_str_eq(peat_inject_model_spec(m), "noise(sigma=0.00025)");
    peat_inject_model_free(m);
    cr_assert_eq(peat_inject_model_parse("truncate()", &m), PEAT_OK);
    cr_assert_str_eq(peat_inject_model_spec(m), "truncate(bits=24)");
    peat_inject_model_free(m);
}

static void parse_fails(const char *spec, const char *must_mention)
{
    peat_inject_model_t *m = (peat_inject_model_t *)1;
    peat_error_clear();
    cr_assert_eq(peat_inject_model_parse(spec, &m), PEAT_ERR_INVAL, "'%s' must be refused", spec);
    cr_assert_null(m, "no model on failure");
    const char *msg = peat_error_last();
    cr_assert(strstr(msg, must_mention) != NULL, "message for '%s' names '%s': %s", spec,
              must_mention, msg);
    cr_assert(strchr(msg, '\n') == NULL, "one line: %s", msg);
}

Test(inject, parse_errors_name_what_is_wrong)
{
    parse_fails("bitflop(bit=3)", "bitflop");
    parse_fails("bitflip(bits=3)", "bits");
    parse_fails("bitflip(bit=32)", "bit=32");
    parse_fails("bitflip(bit=abc)", "abc");
    parse_fails("bitflip(bit=2.5)", "integer");
    parse_fails("bitflip(count=0)", "count=0");
    parse_fails("bitflip(bit=3,bit=4)", "twice");
    parse_fails("bitflip(bit=3", "expected");
    parse_fails("bitflip(bit=3) x", "unexpected");
    parse_fails("precision(fmt=fp7)", "fp7");
    parse_fails("noise(sigma=-1)", "sigma=-1");
    parse_fails("stuck(stride=4,offset=4)", "offset");
    parse_fails("boundary(rows=0,cols=0)", "rows or cols");
    parse_fails("", "unknown model");
    peat_inject_model_t *m;
    cr_assert_eq(peat_inject_model_parse(NULL, &m), PEAT_ERR_INVAL);
}

/* ---- models ---------------------------------------------------------------------------------- */

Test(inject, bitflip_flips_exactly_that_bit_in_exactly_count_elements)
{
    gemm g = gemm_new(20, 30, 16, 1, 1.0, 1.0);
    peat_tensor *G = golden_out(&g);
    inject(&g, "bitflip(bit=30,count=7)", 99);
    int n = 0;
    for (int i = 0; i < 600; i++) {
        uint32_t x = peat_f32_bits(peat_f32(g.D)[i]) ^ peat_f32_bits(peat_f32(G)[i]);
        if (x) {
            n++;
            cr_assert_eq(x, 1u << 30, "element %d: XOR %08x", i, x);
        }
    }
    cr_assert_eq(n, 7, "%d elements flipped", n);
    peat_tensor_free(G);
    gemm_free(&g);
}

Test(inject, same_seed_same_faults_other_seed_other_faults)
{
    static const char *specs[] = {"bitflip(bit=20,count=5)", "noise(sigma=1e-3)",
                                  "tile(rows=4,cols=4,kind=random)", "nan(count=3)",
                                  "nondeterministic"};
    gemm g = gemm_new(16, 16, 8, 2, 1.0, 1.0);
    peat_tensor *first;
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, 16, 16, &first), PEAT_OK);
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        inject(&g, specs[s], 1000);
        memcpy(first->data, g.D->data, peat_tensor_nbytes(g.D));
        inject(&g, specs[s], 1000);
        cr_assert_eq(memcmp(first->data, g.D->data, peat_tensor_nbytes(g.D)), 0,
                     "%s: seed 1000 twice", specs[s]);
        inject(&g, specs[s], 1001);
        cr_assert_neq(memcmp(first->data, g.D->data, peat_tensor_nbytes(g.D)), 0,
                      "%s: seeds 1000/1001", specs[s]);
    }
    peat_tensor_free(first);
    gemm_free(&g);
}

Test(inject, precision_inputs_equals_rounding_inputs_then_golden)
{
    gemm g = gemm_new(12, 10, 32, 3, 1.0, 1.0);
    peat_tensor *A0, *B0;
    cr_assert_eq(peat_tensor_clone(g.A, &A0), PEAT_OK);
    cr_assert_eq(peat_tensor_clone(g.B, &B0), PEAT_OK);
    inject(&g, "precision(fmt=bf16,where=inputs)", 5);
    /* the inputs are untouched */
    cr_assert_eq(memcmp(A0->data, g.A->data, peat_tensor_nbytes(g.A)), 0, "A modified");
    cr_assert_eq(memcmp(B0->data, g.B->data, peat_tensor_nbytes(g.B)), 0, "B modified");
    /* reference: round the inputs ourselves, run the golden GEMM */
    for (int i = 0; i < 12 * 32; i++) peat_f32(A0)[i] = peat_round_bf16(peat_f32(A0)[i]);
    for (int i = 0; i < 32 * 10; i++) peat_f32(B0)[i] = peat_round_bf16(peat_f32(B0)[i]);
    gemm r = g;
    r.A = A0, r.B = B0;
    r.a.in[0] = A0, r.a.in[1] = B0;
    peat_tensor *R = golden_out(&r);
    for (int i = 0; i < 120; i++)
        cr_assert(same_bits(peat_f32(g.D)[i], peat_f32(R)[i]), "element %d: %a vs %a", i,
                  peat_f32(g.D)[i], peat_f32(R)[i]);
    peat_tensor_free(R);
    peat_tensor_free(A0);
    peat_tensor_free(B0);
    gemm_free(&g);
}

Test(inject, precision_output_rounds_the_golden_output)
{
    gemm g = gemm_new(9, 11, 20, 4, 1.0, 1.0);
    peat_tensor *G = golden_out(&g);
    inject(&g, "precision(fmt=fp16,where=output)", 5);
    for (int i = 0; i < 99; i++)
        cr_assert(same_bits(peat_f32(g.D)[i], peat_round_f16(peat_f32(G)[i])), "element %d", i);
    inject(&g, "precision(fmt=bits,bits=5,where=output)", 5);
    for (int i = 0; i < 99; i++) {
        uint32_t m = peat_f32_bits(peat_f32(g.D)[i]) & 0x7fffffu;
        cr_assert_eq(m & ((1u << 19) - 1), 0u, "element %d keeps only 5 significand bits: %08x", i,
                     m);
        cr_assert(fabsf(peat_f32(g.D)[i] - peat_f32(G)[i]) <= 0x1p-5f * fabsf(peat_f32(G)[i]),
                  "element %d: RN error <= u_5 |x|", i);
    }
    peat_tensor_free(G);
    gemm_free(&g);
}

Test(inject, same_order_and_identity_rounding_reproduce_golden_bit_for_bit)
{
    /* forward order is the golden's order; rounding the running sum to 24 bits changes nothing */
    gemm g = gemm_new(8, 12, 50, 6, 1.0, 1.0);
    peat_tensor *G = golden_out(&g);
    inject(&g, "reorder(order=forward)", 1);
    cr_assert_eq(memcmp(G->data, g.D->data, peat_tensor_nbytes(G)), 0, "forward order == golden");
    inject(&g, "precision(fmt=bits,bits=24,where=acc)", 1);
    cr_assert_eq(memcmp(G->data, g.D->data, peat_tensor_nbytes(G)), 0,
                 "acc rounded to 24 bits == golden");
    peat_tensor_free(G);
    gemm_free(&g);
    /* batched, both operands transposed, alpha and beta: the same epilogue as the golden */
    peat_tensor *A, *B, *C, *D1, *D2;
    cr_assert_eq(peat_tensor_alloc3(PEAT_DTYPE_F32, 3, 7, 5, &A), PEAT_OK); /* [batch, K, M] */
    cr_assert_eq(peat_tensor_alloc3(PEAT_DTYPE_F32, 3, 6, 7, &B), PEAT_OK); /* [batch, N, K] */
    cr_assert_eq(peat_tensor_alloc3(PEAT_DTYPE_F32, 3, 5, 6, &C), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc3(PEAT_DTYPE_F32, 3, 5, 6, &D1), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc3(PEAT_DTYPE_F32, 3, 5, 6, &D2), PEAT_OK);
    peat_rng_t *r = peat_rng_new(61);
    peat_rng_fill_gaussian(r, A, 1.0), peat_rng_fill_gaussian(r, B, 1.0),
        peat_rng_fill_gaussian(r, C, 1.0);
    peat_rng_free(r);
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = 1, p.i[1] = 1, p.i[2] = 5, p.i[3] = 6, p.i[4] = 7, p.i[5] = 3, p.f[0] = 0.75,
    p.f[1] = -1.5;
    const peat_tensor *in[3] = {A, B, C};
    peat_tensor *o1[1] = {D1}, *o2[1] = {D2};
    peat_args a1 = peat_args_make(PEAT_OP_GEMM, &p, 3, in, 1, o1),
              a2 = peat_args_make(PEAT_OP_GEMM, &p, 3, in, 1, o2);
    cr_assert_eq(peat_kernel_run(kern("gemm_plain"), &a1), PEAT_OK, "%s", peat_error_last());
    peat_inject_model_t *m;
    cr_assert_eq(peat_inject_model_parse("reorder(order=forward)", &m), PEAT_OK);
    cr_assert_eq(peat_inject_run(m, kern("gemm_plain"), &a2, 1), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(memcmp(D1->data, D2->data, peat_tensor_nbytes(D1)), 0,
                 "batched transposed GEMM with beta");
    peat_inject_model_free(m);
    peat_tensor_free(A), peat_tensor_free(B), peat_tensor_free(C), peat_tensor_free(D1),
        peat_tensor_free(D2);
}

/* Element (i, j) of g summed over k in [lo, hi) by the per-element definition of each order. */
static float ref_range(const gemm *g, int i, int j, int lo, int hi, int rev)
{
    float s = 0.0f;
    for (int t = lo; t < hi; t++) {
        int k = rev ? hi - 1 - (t - lo) : t;
        s += peat_f32(g->A)[i * g->K + k] * peat_f32(g->B)[k * g->N + j];
    }
    return s;
}

static float ref_pairwise(const gemm *g, int i, int j, int lo, int hi)
{
    if (hi - lo <= 2) return ref_range(g, i, j, lo, hi, 0);
    int mid = lo + (hi - lo) / 2;
    float l = ref_pairwise(g, i, j, lo, mid);
    return l + ref_pairwise(g, i, j, mid, hi);
}

static float ref_split(const gemm *g, int i, int j, int S)
{
    S = S < g->K ? S : g->K;
    float s = 0.0f;
    for (int c = 0; c < S; c++) s += ref_range(g, i, j, g->K * c / S, g->K * (c + 1) / S, 0);
    return s;
}

Test(inject, reorders_sum_each_element_in_their_defined_order_bit_for_bit)
{
    /* the register tiles (4 rows x 16 columns, pairwise nodes of up to four terms in one, the
     * tree walked without recursion) must add each element's terms exactly as the per-element
     * definition does, for every K remainder and tree shape, and for whole and part column
     * panels (N = 37: two panels of 16 and one of 5) */
    static const int Ks[] = {1, 2, 3, 4, 5, 6, 7, 9, 13, 31, 64, 67, 130, 257};
    for (size_t q = 0; q < sizeof Ks / sizeof Ks[0]; q++) {
        gemm g = gemm_new(q % 2 ? 3 : 9, 37, Ks[q], 80 + q, 1.0, 1.0); /* whole and part tiles */
        static const char *specs[] = {"reorder(order=forward)", "reorder(order=reverse)",
                                      "reorder(order=pairwise)", "reorder(order=split,split=4)"};
        for (int s = 0; s < 4; s++) {
            inject(&g, specs[s], 1);
            for (int i = 0; i < g.M; i++)
                for (int j = 0; j < g.N; j++) {
                    float want = s == 0   ? ref_range(&g, i, j, 0, g.K, 0)
                                 : s == 1 ? ref_range(&g, i, j, 0, g.K, 1)
                                 : s == 2 ? ref_pairwise(&g, i, j, 0, g.K)
                                          : ref_split(&g, i, j, 4);
                    float got = peat_f32(g.D)[i * g.N + j];
                    cr_assert(same_bits(got, want), "%s K=%d (%d,%d): %a, definition %a", specs[s],
                              g.K, i, j, (double)got, (double)want);
                }
        }
        gemm_free(&g);
    }
}

Test(inject, reorders_stay_within_the_fp32_bound)
{
    static const char *specs[] = {"reorder", "reorder(order=pairwise)",
                                  "reorder(order=split,split=3)", "nondeterministic"};
    gemm g = gemm_new(10, 14, 200, 7, 1.0, 1.0);
    peat_tensor *G = golden_out(&g), *E = exact_out(&g);
    for (size_t s = 0; s < 4; s++) {
        inject(&g, specs[s], 3);
        int differ = 0;
        for (int i = 0; i < 10; i++)
            for (int j = 0; j < 14; j++) {
                double d = fabs(peat_f32(g.D)[i * 14 + j] - peat_f64(E)[i * 14 + j]);
                cr_assert_leq(d, gamma_k(200) * mag_of(&g, i, j), "%s (%d,%d)", specs[s], i, j);
                differ += !same_bits(peat_f32(g.D)[i * 14 + j], peat_f32(G)[i * 14 + j]);
            }
        cr_assert_gt(differ, 10, "%s changes the rounding of many elements (%d)", specs[s], differ);
    }
    peat_tensor_free(G);
    peat_tensor_free(E);
    gemm_free(&g);
}

/* The library orders (inject/gemm_lib.c) against the fp64 exact GEMM: within the fp32 bound
 * gamma_K sum |a b|, and another rounding than the golden on many elements. */
Test(inject, library_orders_stay_within_the_fp32_bound)
{
    static const char *specs[] = {"reorder(order=blas_split)", "reorder(order=blas_split,split=3)",
                                  "reorder(order=blas_pairwise)",
                                  "reorder(order=blas_pairwise,block=5)"};
    gemm g = gemm_new(10, 14, 200, 9, 1.0, 1.0);
    peat_tensor *E = exact_out(&g), *G;
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, 10, 14, &G), PEAT_OK);
    peat_args ga = g.a;
    ga.out[0] = G;
    cr_assert_eq(peat_kernel_run(kern("gemm_golden"), &ga), PEAT_OK, "%s", peat_error_last());
    for (size_t s = 0; s < 4; s++) {
        inject(&g, specs[s], 1);
        int differ = 0;
        for (int i = 0; i < 10; i++)
            for (int j = 0; j < 14; j++) {
                double d = fabs(peat_f32(g.D)[i * 14 + j] - peat_f64(E)[i * 14 + j]);
                cr_assert_leq(d, gamma_k(200) * mag_of(&g, i, j), "%s (%d,%d): %g from exact",
                              specs[s], i, j, d);
                differ += !same_bits(peat_f32(g.D)[i * 14 + j], peat_f32(G)[i * 14 + j]);
            }
        cr_assert_gt(differ, 10, "%s rounds many elements unlike the golden (%d of 140)", specs[s],
                     differ);
    }
    peat_tensor_free(G);
    peat_tensor_free(E);
    gemm_free(&g);
}

/* A known cancellation: row i's 64 terms are 2^24 at k = 0, 1 at k = 16 and 17, -2^24 at k = 48
 * (times 2^i), zero elsewhere. Summed in k order (the golden's chain, gemm_plain, the forward
 * reorder), 2^24 + 1 rounds back to 2^24 (a tie, to even) twice and the ones are lost: 0. The
 * library orders sum chunks of 16 first (each chunk's sum exact in any order: 2^24, 2, -2^24,
 * 0), so 2^24 + 2 is kept: 2 x 2^i, the exact answer. */
Test(inject, library_orders_keep_what_the_forward_chain_cancels)
{
    gemm g = gemm_new(3, 5, 64, 1, 1.0, 1.0);
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 64; k++) {
            float t = k == 0 ? 0x1p24f : k == 16 || k == 17 ? 1.0f : k == 48 ? -0x1p24f : 0.0f;
            peat_f32(g.A)[i * 64 + k] = ldexpf(t, i);
        }
    for (int k = 0; k < 64; k++)
        for (int j = 0; j < 5; j++) peat_f32(g.B)[k * 5 + j] = 1.0f;
    static const char *specs[] = {"reorder(order=forward)", "reorder(order=blas_split,split=4)",
                                  "reorder(order=blas_pairwise,block=16)"};
    peat_tensor *G;
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, 3, 5, &G), PEAT_OK);
    peat_args ga = g.a;
    ga.out[0] = G;
    cr_assert_eq(peat_kernel_run(kern("gemm_golden"), &ga), PEAT_OK, "%s", peat_error_last());
    for (int s = 0; s < 3; s++) {
        inject(&g, specs[s], 1);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 5; j++) {
                float got = peat_f32(g.D)[i * 5 + j], want = s == 0 ? 0.0f : ldexpf(2.0f, i);
                cr_assert(same_bits(got, want), "%s (%d,%d): %a, expected %a", specs[s], i, j,
                          (double)got, (double)want);
                /* the golden (OpenBLAS's micro-kernel chains each element over k, as the plain
                 * loop does) loses the ones too: the library orders must not equal it here */
                float gold = peat_f32(G)[i * 5 + j];
                if (s > 0)
                    cr_assert(!same_bits(got, gold), "%s (%d,%d) equals the golden %a", specs[s], i,
                              j, (double)gold);
            }
    }
    peat_tensor_free(G);
    gemm_free(&g);
}

/* Transposed, batched, alpha and beta: blas_split equals its definition composed of golden GEMM
 * calls on copies of each K chunk (the first with the call's beta C, the next with beta 1), and
 * blas_pairwise its tree of golden leaves (alpha 1, beta 0) added pairwise, then alpha s + beta C:
 * where a chunk starts in the operands (leading dimensions, batch offsets) changes no bit. */
static void chunk_copy(const float *X, int tX, int64_t rows, int64_t cols, int64_t k0, int64_t k1,
                       int k_is_col, float *out)
{
    /* X holds op(X) (rows x cols) transposed when tX; keep K range [k0, k1) of op(X) in the
     * same storage layout, contiguous */
    int64_t nk = k1 - k0;
    if (k_is_col) { /* op(A): rows M, K columns */
        for (int64_t i = 0; i < rows; i++)
            for (int64_t k = 0; k < nk; k++) {
                float v = tX ? X[(k0 + k) * rows + i] : X[i * cols + k0 + k];
                if (tX)
                    out[k * rows + i] = v;
                else
                    out[i * nk + k] = v;
            }
    } else { /* op(B): K rows, N columns */
        for (int64_t k = 0; k < nk; k++)
            for (int64_t j = 0; j < cols; j++) {
                float v = tX ? X[j * rows + k0 + k] : X[(k0 + k) * cols + j];
                if (tX)
                    out[j * nk + k] = v;
                else
                    out[k * cols + j] = v;
            }
    }
}

static void golden_chunk(const float *A, const float *B, int64_t M, int64_t N, int64_t K,
                         int64_t k0, int64_t k1, double alpha, double beta, const float *C,
                         float *D)
{
    peat_tensor *a, *b, *c, *d;
    int64_t nk = k1 - k0;
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, nk, M, &a), PEAT_OK); /* tA = 1 */
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, N, nk, &b), PEAT_OK); /* tB = 1 */
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, M, N, &c), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, M, N, &d), PEAT_OK);
    chunk_copy(A, 1, M, K, k0, k1, 1, peat_f32(a));
    chunk_copy(B, 1, K, N, k0, k1, 0, peat_f32(b));
    if (C) memcpy(peat_f32(c), C, (size_t)(M * N) * sizeof(float));
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = 1, p.i[1] = 1, p.i[2] = M, p.i[3] = N, p.i[4] = nk, p.i[5] = 1;
    p.f[0] = alpha, p.f[1] = beta;
    const peat_tensor *in[3] = {a, b, c};
    peat_tensor *out[1] = {d};
    peat_args ar = peat_args_make(PEAT_OP_GEMM, &p, 3, in, 1, out);
    cr_assert_eq(peat_kernel_run(kern("gemm_golden"), &ar), PEAT_OK, "%s", peat_error_last());
    memcpy(D, peat_f32(d), (size_t)(M * N) * sizeof(float));
    peat_tensor_free(a), peat_tensor_free(b), peat_tensor_free(c), peat_tensor_free(d);
}

static void pairwise_ref(const float *A, const float *B, int64_t M, int64_t N, int64_t K,
                         int64_t lo, int64_t hi, int64_t block, float *out)
{
    if (hi - lo < 2 * block) {
        golden_chunk(A, B, M, N, K, lo, hi, 1.0, 0.0, NULL, out);
        return;
    }
    float *r = malloc((size_t)(M * N) * sizeof *r);
    int64_t mid = lo + (hi - lo) / 2;
    pairwise_ref(A, B, M, N, K, lo, mid, block, out);
    pairwise_ref(A, B, M, N, K, mid, hi, block, r);
    for (int64_t i = 0; i < M * N; i++) out[i] += r[i];
    free(r);
}

Test(inject, library_orders_are_their_definition_on_golden_calls)
{
    enum { M = 6, N = 9, K = 77, NB = 2 };
    peat_tensor *A, *B, *C, *D;
    cr_assert_eq(peat_tensor_alloc3(PEAT_DTYPE_F32, NB, K, M, &A), PEAT_OK); /* op(A) = A^T */
    cr_assert_eq(peat_tensor_alloc3(PEAT_DTYPE_F32, NB, N, K, &B), PEAT_OK); /* op(B) = B^T */
    cr_assert_eq(peat_tensor_alloc3(PEAT_DTYPE_F32, NB, M, N, &C), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc3(PEAT_DTYPE_F32, NB, M, N, &D), PEAT_OK);
    peat_rng_t *r = peat_rng_new(77);
    peat_rng_fill_gaussian(r, A, 1.0), peat_rng_fill_gaussian(r, B, 1.0),
        peat_rng_fill_gaussian(r, C, 1.0);
    peat_rng_free(r);
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = 1, p.i[1] = 1, p.i[2] = M, p.i[3] = N, p.i[4] = K, p.i[5] = NB, p.f[0] = 0.75,
    p.f[1] = -1.5;
    const peat_tensor *in[3] = {A, B, C};
    peat_tensor *out[1] = {D};
    peat_args a = peat_args_make(PEAT_OP_GEMM, &p, 3, in, 1, out);
    static const char *specs[] = {"reorder(order=blas_split,split=3)",
                                  "reorder(order=blas_pairwise,block=8)"};
    for (int s = 0; s < 2; s++) {
        peat_inject_model_t *m;
        cr_assert_eq(peat_inject_model_parse(specs[s], &m), PEAT_OK, "%s", peat_error_last());
        cr_assert_eq(peat_inject_run(m, kern("gemm_golden"), &a, 1), PEAT_OK, "%s",
                     peat_error_last());
        peat_inject_model_free(m);
        for (int b = 0; b < NB; b++) {
            const float *Ab = peat_f32(A) + b * K * M, *Bb = peat_f32(B) + b * N * K;
            const float *Cb = peat_f32(C) + b * M * N;
            float want[M * N];
            if (s == 0)
                for (int q = 0; q < 3; q++)
                    golden_chunk(Ab, Bb, M, N, K, K * q / 3, K * (q + 1) / 3, 0.75, q ? 1.0 : -1.5,
                                 q ? want : Cb, want);
            else {
                pairwise_ref(Ab, Bb, M, N, K, 0, K, 8, want);
                for (int i = 0; i < M * N; i++) want[i] = 0.75f * want[i] + -1.5f * Cb[i];
            }
            for (int i = 0; i < M * N; i++) {
                float got = peat_f32(D)[b * M * N + i];
                cr_assert(same_bits(got, want[i]), "%s batch %d element %d: %a, definition %a",
                          specs[s], b, i, (double)got, (double)want[i]);
            }
        }
    }
    peat_tensor_free(A), peat_tensor_free(B), peat_tensor_free(C), peat_tensor_free(D);
}

Test(inject, accumulating_in_bf16_stores_bf16_values)
{
    gemm g = gemm_new(6, 6, 64, 8, 1.0, 1.0);
    inject(&g, "precision(fmt=bf16,where=acc)", 1);
    for (int i = 0; i < 36; i++)
        cr_assert_eq(peat_f32_bits(peat_f32(g.D)[i]) & 0xffffu, 0u, "element %d is a bf16 value",
                     i);
    gemm_free(&g);
}

Test(inject, truncate_rounds_the_exact_result_toward_zero)
{
    gemm g = gemm_new(16, 16, 40, 9, 1.0, 1.0);
    peat_tensor *E = exact_out(&g);
    inject(&g, "truncate", 1);
    int below = 0;
    for (int i = 0; i < 256; i++) {
        float t = peat_f32(g.D)[i];
        double x = peat_f64(E)[i];
        cr_assert_leq(fabs((double)t), fabs(x), "element %d: |%a| > |%a|", i, t, x);
        /* the next float away from zero is beyond the exact value */
        cr_assert_gt(fabs((double)nextafterf(t, t < 0 ? -INFINITY : INFINITY)), fabs(x),
                     "element %d not the RTZ value", i);
        below += fabs((double)t) < fabs(x);
    }
    cr_assert_gt(below, 200, "truncation lowers nearly every inexact element (%d)", below);
    inject(&g, "truncate(bits=8)", 1);
    for (int i = 0; i < 256; i++)
        cr_assert_eq((double)peat_f32(g.D)[i], trunc_p(peat_f64(E)[i], 8),
                     "bits=8 truncates the exact value at %d", i);
    peat_tensor_free(E);
    gemm_free(&g);
}

Test(inject, ftz_flushes_only_subnormal_outputs)
{
    /* products ~1e-40: outputs straddle FLT_MIN */
    gemm g = gemm_new(12, 12, 16, 10, 1e-20, 1e-19);
    peat_tensor *G = golden_out(&g);
    inject(&g, "ftz", 1);
    int flushed = 0;
    for (int i = 0; i < 144; i++) {
        float y = peat_f32(G)[i], t = peat_f32(g.D)[i];
        if (y != 0.0f && fabsf(y) < FLT_MIN) {
            cr_assert_eq(t, 0.0f, "subnormal %a at %d kept", y, i);
            cr_assert_eq(signbit(t), signbit(y), "sign of the flushed zero at %d", i);
            flushed++;
        } else {
            cr_assert(same_bits(t, y), "normal value at %d changed", i);
        }
    }
    cr_assert_gt(flushed, 10, "the data has subnormal outputs (%d)", flushed);
    peat_tensor_free(G);
    gemm_free(&g);
}

Test(inject, range_fp16_overflows_to_inf_and_keeps_the_rest)
{
    gemm g = gemm_new(12, 12, 16, 11, 1e4, 2.0);
    peat_tensor *G = golden_out(&g);
    inject(&g, "range(fmt=fp16)", 1);
    int infs = 0;
    for (int i = 0; i < 144; i++) {
        float y = peat_f32(G)[i], t = peat_f32(g.D)[i];
        if (fabsf(y) >= 65520.0f) {
            cr_assert(isinf(t) && signbit(t) == signbit(y), "element %d: %g -> %g", i, y, t);
            infs++;
        } else {
            cr_assert(same_bits(t, y), "element %d in range changed", i);
        }
    }
    cr_assert_gt(infs, 5, "some outputs leave fp16's range (%d)", infs);
    peat_tensor_free(G);
    gemm_free(&g);
}

Test(inject, stuck_forces_one_bit_in_every_stride_th_lane)
{
    gemm g = gemm_new(10, 10, 8, 12, 1.0, 1.0);
    peat_tensor *G = golden_out(&g);
    inject(&g, "stuck(bit=2,value=1,stride=3,offset=1)", 1);
    for (int i = 0; i < 100; i++) {
        uint32_t y = peat_f32_bits(peat_f32(G)[i]), t = peat_f32_bits(peat_f32(g.D)[i]);
        if (i % 3 == 1)
            cr_assert_eq(t, y | 4u, "lane %d", i);
        else
            cr_assert_eq(t, y, "element %d off the lanes", i);
    }
    peat_tensor_free(G);
    gemm_free(&g);
    /* stuck at 0: the bit cleared on the lanes (GCC 12.2 at -O1/-O2 folds `c ? from_bits(bits(x) &
     * m) : x` to x; this model must not be written so) */
    g = gemm_new(10, 10, 8, 12, 1.0, 1.0);
    G = golden_out(&g);
    inject(&g, "stuck(bit=22,value=0,stride=2,offset=0)", 1);
    int cleared = 0;
    for (int i = 0; i < 100; i++) {
        uint32_t y = peat_f32_bits(peat_f32(G)[i]), t = peat_f32_bits(peat_f32(g.D)[i]);
        cr_assert_eq(t, i % 2 ? y : y & ~(1u << 22), "element %d", i);
        cleared += i % 2 == 0 && (y >> 22 & 1u);
    }
    cr_expect_gt(cleared, 10, "only %d lanes had bit 22 to clear", cleared);
    peat_tensor_free(G);
    gemm_free(&g);
}

Test(inject, tile_corrupts_one_aligned_block)
{
    gemm g = gemm_new(16, 16, 8, 13, 1.0, 1.0);
    peat_tensor *G = golden_out(&g);
    inject(&g, "tile(rows=4,cols=8,kind=zero)", 21);
    int r0 = -1, c0 = -1, n = 0;
    for (int i = 0; i < 256; i++)
        if (!same_bits(peat_f32(g.D)[i], peat_f32(G)[i])) {
            cr_assert_eq(peat_f32(g.D)[i], 0.0f, "zeroed");
            if (r0 < 0) r0 = i / 16, c0 = i % 16;
            cr_assert(i / 16 >= r0 && i / 16 < r0 + 4 && i % 16 >= c0 && i % 16 < c0 + 8,
                      "element %d outside the tile", i);
            n++;
        }
    cr_assert_eq(n, 32, "a 4x8 tile, got %d elements", n);
    cr_assert_eq(r0 % 4, 0, "tile rows aligned");
    cr_assert_eq(c0 % 8, 0, "tile cols aligned");
    /* stale: values of another tile of the same output */
    inject(&g, "tile(rows=4,cols=4,kind=stale)", 22);
    int moved = 0;
    for (int i = 0; i < 256; i++)
        if (!same_bits(peat_f32(g.D)[i], peat_f32(G)[i])) {
            int found = 0;
            for (int k = 0; k < 256 && !found; k++)
                found = same_bits(peat_f32(g.D)[i], peat_f32(G)[k]);
            cr_assert(found, "stale value at %d comes from the output", i);
            moved++;
        }
    cr_assert(moved > 0 && moved <= 16, "one 4x4 tile stale (%d)", moved);
    peat_tensor_free(G);
    gemm_free(&g);
}

Test(inject, boundary_hits_the_last_rows_and_cols)
{
    gemm g = gemm_new(12, 9, 8, 14, 1.0, 1.0);
    peat_tensor *G = golden_out(&g);
    inject(&g, "boundary(rows=2,cols=1)", 1);
    for (int i = 0; i < 12; i++)
        for (int j = 0; j < 9; j++) {
            float t = peat_f32(g.D)[i * 9 + j];
            if (i >= 10 || j == 8)
                cr_assert_eq(t, 0.0f, "edge (%d,%d) zeroed", i, j);
            else
                cr_assert(same_bits(t, peat_f32(G)[i * 9 + j]), "inner (%d,%d) kept", i, j);
        }
    peat_tensor_free(G);
    gemm_free(&g);
}

Test(inject, nan_writes_count_nans)
{
    gemm g = gemm_new(8, 8, 8, 15, 1.0, 1.0);
    inject(&g, "nan(count=5)", 1);
    int n = 0;
    for (int i = 0; i < 64; i++) n += isnan(peat_f32(g.D)[i]);
    cr_assert_eq(n, 5);
    inject(&g, "nan(count=2,value=inf)", 1);
    n = 0;
    for (int i = 0; i < 64; i++) n += isinf(peat_f32(g.D)[i]);
    cr_assert_eq(n, 2);
    gemm_free(&g);
}

Test(inject, noise_has_the_requested_relative_sigma)
{
    gemm g = gemm_new(64, 64, 8, 16, 1.0, 1.0);
    peat_tensor *G = golden_out(&g);
    inject(&g, "noise(sigma=1e-3)", 4);
    double s = 0.0, m = 0.0;
    for (int i = 0; i < 4096; i++) {
        double r = (peat_f32(g.D)[i] - (double)peat_f32(G)[i]) / peat_f32(G)[i];
        m += r;
        s += r * r;
    }
    m /= 4096;
    double sd = sqrt(s / 4096 - m * m);
    /* sample sd of 4096 normals: relative precision 1/sqrt(2n) = 1.1% */
    cr_assert(fabs(sd - 1e-3) < 0.05e-3, "relative sd %g", sd);
    cr_assert(fabs(m) < 0.1e-3, "unbiased: mean %g", m);
    peat_tensor_free(G);
    gemm_free(&g);
}

Test(inject, approx_tanh_is_the_tanh_gelu_and_smooth_is_bounded)
{
    int n = 200;
    peat_tensor *X, *Y;
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &X), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &Y), PEAT_OK);
    for (int i = 0; i < n; i++) peat_f32(X)[i] = -5.0f + 0.05f * (float)i;
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = n;
    const peat_tensor *in[1] = {X};
    peat_tensor *out[1] = {Y};
    peat_args a = peat_args_make(PEAT_OP_GELU, &p, 1, in, 1, out);
    peat_inject_model_t *m;
    cr_assert_eq(peat_inject_model_parse("approx(fn=tanh)", &m), PEAT_OK);
    const peat_kernel *gk = peat_registry_role(PEAT_OP_GELU, PEAT_ROLE_GOLDEN, "cpu");
    cr_assert_not_null(gk);
    cr_assert_eq(peat_inject_run(m, gk, &a, 1), PEAT_OK, "%s", peat_error_last());
    for (int i = 0; i < n; i++) {
        double x = peat_f32(X)[i];
        double want = 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
        cr_assert(fabs(peat_f32(Y)[i] - want) <= 1e-6 * (1.0 + fabs(want)), "x=%g: %g vs %g", x,
                  peat_f32(Y)[i], want);
    }
    /* tanh is a GELU approximation: refused for other ops */
    gemm g = gemm_new(4, 4, 4, 17, 1.0, 1.0);
    cr_assert_eq(peat_inject_run(m, kern("gemm_plain"), &g.a, 1), PEAT_ERR_UNSUPPORTED);
    peat_inject_model_free(m);
    /* smooth: |y' - y| <= amp * rms(y) */
    peat_tensor *G = golden_out(&g);
    inject(&g, "approx(fn=smooth,amp=1e-3)", 1);
    double rms = 0.0;
    for (int i = 0; i < 16; i++) rms += (double)peat_f32(G)[i] * peat_f32(G)[i];
    rms = sqrt(rms / 16);
    int changed = 0;
    for (int i = 0; i < 16; i++) {
        double d = fabs(peat_f32(g.D)[i] - (double)peat_f32(G)[i]);
        cr_assert_leq(d, 1e-3 * rms * (1 + 1e-6) + 1e-6 * fabs(peat_f32(G)[i]), "element %d", i);
        changed += d > 0;
    }
    cr_assert_gt(changed, 8);
    peat_tensor_free(G);
    gemm_free(&g);
    peat_tensor_free(X);
    peat_tensor_free(Y);
}

Test(inject, refuses_exact_kernels_and_missing_outputs)
{
    gemm g = gemm_new(4, 4, 4, 18, 1.0, 1.0);
    peat_inject_model_t *m;
    cr_assert_eq(peat_inject_model_parse("bitflip(out=1)", &m), PEAT_OK);
    cr_assert_eq(peat_inject_run(m, kern("gemm_plain"), &g.a, 1), PEAT_ERR_INVAL,
                 "gemm has one output");
    cr_assert(strstr(peat_error_last(), "out=1") != NULL, "%s", peat_error_last());
    cr_assert_eq(peat_inject_run(m, kern("gemm_exact"), &g.a, 1), PEAT_ERR_INVAL,
                 "exact kernels write F64");
    peat_inject_model_free(m);
    gemm_free(&g);
}
