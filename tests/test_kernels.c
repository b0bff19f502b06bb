/* test_kernels.c: every candidate kernel against the exact kernel of its op, within its rounding
 * bound. */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "golden/golden.h"
#include "harness/runtime/builtin.h"
#include "peat/peat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U32 0x1p-24 /* fp32 unit roundoff */
#define U16 0x1p-11 /* fp16 */
#define UBF 0x1p-8  /* bf16 */
/* Largest absolute error of one rounding into the subnormal range (half the smallest spacing):
 * the eta of the standard model fl(x op y) = (x op y)(1 + d) + e, |e| <= eta. bf16 shares fp32's
 * exponent range. */
#define ETA32 0x1p-150
#define ETA16 0x1p-25

static void setup(void)
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK, "registry init: %s", peat_error_last());
}

TestSuite(kernels, .init = setup);

static double gamma_k(double k, double u)
{
    return k * u / (1.0 - k * u);
}

/* The error model a candidate is held to, per output element:
 *   |cand - exact| <= (c gamma_K(u) + extra) mag + c K eta,
 * K = the op's depth, mag = peat_golden_magnitude. c is a modest constant for the few roundings
 * an op has beyond its K-term reduction (scale, divide, exp, rescale); extra = gamma_m(u_low)
 * carries the m roundings a reduced-precision kernel makes at its boundary (inputs, output). */
typedef struct bound_model {
    double u, extra, eta, c;
} bound_model;

/* peat_golden_magnitude already weighs each term by the roundings the golden algorithm puts on
 * it; a reordered algorithm (online rescaling, reciprocal multiply, blocked partial sums) puts at
 * most about as many again, hence c = 2. */
static const bound_model FP32 = {U32, 0.0, ETA32, 2.0};

/* One op call: params and owned inputs. */
typedef struct call {
    peat_op_kind op;
    peat_op_params p;
    int n_in;
    peat_tensor *in[PEAT_MAX_IO];
} call;

static void call_free(call *c)
{
    for (int k = 0; k < c->n_in; k++) peat_tensor_free(c->in[k]);
    memset(c, 0, sizeof *c);
}

static peat_tensor *t_uniform(peat_rng_t *r, int64_t n, double lo, double hi)
{
    peat_tensor *t = NULL;
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &t), PEAT_OK, "alloc %lld", (long long)n);
    peat_rng_fill_uniform(r, t, lo, hi);
    return t;
}

static peat_tensor *t_gauss(peat_rng_t *r, int64_t n, double sigma)
{
    peat_tensor *t = NULL;
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &t), PEAT_OK, "alloc %lld", (long long)n);
    peat_rng_fill_gaussian(r, t, sigma);
    return t;
}

/* F32 copy of an F64 tensor (exact outputs fed back as inputs, e.g. O and L to attention_bwd). */
static peat_tensor *t_from(const peat_tensor *src)
{
    peat_tensor *t = NULL;
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, peat_tensor_numel(src), &t), PEAT_OK);
    for (int64_t i = 0; i < peat_tensor_numel(src); i++)
        peat_f32(t)[i] = (float)peat_tensor_get(src, i);
    return t;
}

/* Runs kernel name on c with outputs of dtype dt; the caller frees the outputs. */
static peat_args run_named(const char *name, const call *c, peat_dtype dt)
{
    const peat_kernel *k = peat_registry_find(name);
    cr_assert_not_null(k, "kernel %s is not registered", name);
    peat_args a = peat_args_make(c->op, &c->p, c->n_in, (const peat_tensor *const *)c->in, 0, NULL);
    cr_assert_eq(peat_op_alloc_outputs(&a, dt), PEAT_OK, "%s: alloc outputs: %s", name,
                 peat_error_last());
    peat_status st = peat_kernel_run(k, &a);
    cr_assert_eq(st, PEAT_OK, "%s failed: %s (%s)", name, peat_error_last(), peat_error_where());
    return a;
}

static peat_args run_exact(const call *c)
{
    char name[64];
    snprintf(name, sizeof name, "%s_exact", peat_op_name(c->op));
    return run_named(name, c, PEAT_DTYPE_F64);
}

/* Worst err/bound ratio of candidate `name` against the exact kernel over every output element
 * under model m; with check set, asserts every element is within its bound. */
static double bound_ratio(const char *name, const call *c, bound_model m, int check)
{
    peat_args ex = run_exact(c), ca = run_named(name, c, PEAT_DTYPE_F32);
    double K = (double)peat_op_info_get(c->op)->depth(&c->p);
    double g = gamma_k(K, m.u);
    cr_assert(g > 0.0 && g < 1.0, "%s: bound model unusable (K=%g, u=%g)", name, K, m.u);
    double worst = 0.0;
    for (int o = 0; o < ex.n_out; o++) {
        int64_t n = peat_tensor_numel(ex.out[o]);
        double *mag = malloc((size_t)n * sizeof *mag);
        cr_assert_not_null(mag);
        cr_assert_eq(peat_golden_magnitude(&ex, o, ex.out[o], mag), PEAT_OK, "magnitude: %s",
                     peat_error_last());
        for (int64_t i = 0; i < n; i++) {
            double e = peat_tensor_get(ex.out[o], i), x = peat_tensor_get(ca.out[o], i);
            double bound = (m.c * g + m.extra) * mag[i] + m.c * K * m.eta, err = fabs(x - e);
            cr_assert(isfinite(x), "%s out %d [%lld]: candidate %g is not finite (exact %.9g)",
                      name, o, (long long)i, x, e);
            if (check)
                cr_assert(err <= bound,
                          "%s out %d [%lld]: |cand - exact| = %.3g exceeds bound %.3g (cand %.9g, "
                          "exact %.9g, "
                          "mag %.3g, K %g)",
                          name, o, (long long)i, err, bound, x, e, mag[i], K);
            if (bound > 0.0 && err / bound > worst) worst = err / bound;
        }
        free(mag);
    }
    peat_args_free_outputs(&ex);
    peat_args_free_outputs(&ca);
    cr_log_info("%s on %s: worst err/bound = %.3g", name, peat_op_name(c->op), worst);
    return worst;
}

static double expect_within(const char *name, const call *c, bound_model m)
{
    return bound_ratio(name, c, m, 1);
}

/* Number of output elements where candidate and golden differ in any bit. */
static int64_t count_diff_vs_golden(const char *name, const call *c)
{
    char gname[64];
    snprintf(gname, sizeof gname, "%s_golden", peat_op_name(c->op));
    peat_args g = run_named(gname, c, PEAT_DTYPE_F32), ca = run_named(name, c, PEAT_DTYPE_F32);
    int64_t nd = 0;
    for (int o = 0; o < g.n_out; o++) {
        const float *x = peat_f32(g.out[o]), *y = peat_f32(ca.out[o]);
        for (int64_t i = 0; i < peat_tensor_numel(g.out[o]); i++)
            nd += memcmp(&x[i], &y[i], sizeof x[i]) != 0;
    }
    peat_args_free_outputs(&g);
    peat_args_free_outputs(&ca);
    return nd;
}

/* ---- conv2d family ---- */

static call conv_call(peat_op_kind op, uint64_t seed, int64_t N, int64_t C, int64_t H, int64_t W,
                      int64_t O, int64_t KH, int64_t KW, int64_t S, int64_t P)
{
    call c = {.op = op, .n_in = 2};
    int64_t v[9] = {N, C, H, W, O, KH, KW, S, P};
    memcpy(c.p.i, v, sizeof v);
    int64_t OH = (H + 2 * P - KH) / S + 1, OW = (W + 2 * P - KW) / S + 1;
    int64_t nx = N * C * H * W, nw = O * C * KH * KW, ny = N * O * OH * OW;
    peat_rng_t *r = peat_rng_new(seed);
    if (op == PEAT_OP_CONV2D)
        c.in[0] = t_uniform(r, nx, -1, 1), c.in[1] = t_uniform(r, nw, -1, 1);
    else if (op == PEAT_OP_CONV2D_BWD_DATA)
        c.in[0] = t_uniform(r, ny, -1, 1), c.in[1] = t_uniform(r, nw, -1, 1);
    else
        c.in[0] = t_uniform(r, nx, -1, 1), c.in[1] = t_uniform(r, ny, -1, 1);
    peat_rng_free(r);
    return c;
}

/* Shapes: odd sizes, stride 2, padding, more output channels than tile_m (32), a 1x1 image. */
static const int64_t conv_shapes[][9] = {
    {2, 3, 7, 6, 5, 3, 3, 1, 1}, {1, 16, 9, 9, 33, 3, 3, 2, 1}, {3, 5, 11, 10, 4, 2, 3, 1, 0},
    {1, 1, 1, 1, 1, 1, 1, 1, 0}, {2, 70, 5, 5, 3, 1, 1, 1, 0},  {1, 2, 12, 12, 70, 5, 5, 3, 2},
};

static void conv_family(peat_op_kind op, const char *name)
{
    for (size_t s = 0; s < sizeof conv_shapes / sizeof conv_shapes[0]; s++) {
        const int64_t *v = conv_shapes[s];
        call c = conv_call(op, 100 + s, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]);
        expect_within(name, &c, FP32);
        call_free(&c);
    }
}

Test(kernels, conv_im2col_within_bound)
{
    conv_family(PEAT_OP_CONV2D, "conv_im2col");
}
Test(kernels, conv_im2col_bwd_data_within_bound)
{
    conv_family(PEAT_OP_CONV2D_BWD_DATA, "conv_im2col_bwd_data");
}
Test(kernels, conv_im2col_bwd_filter_within_bound)
{
    conv_family(PEAT_OP_CONV2D_BWD_FILTER, "conv_im2col_bwd_filter");
}

/* ---- softmax ---- */

static call softmax_call(uint64_t seed, int64_t R, int64_t C, double lo, double hi)
{
    call c = {.op = PEAT_OP_SOFTMAX, .n_in = 1};
    c.p.i[0] = R, c.p.i[1] = C;
    peat_rng_t *r = peat_rng_new(seed);
    c.in[0] = t_uniform(r, R * C, lo, hi);
    peat_rng_free(r);
    return c;
}

Test(kernels, softmax_online_within_bound)
{
    call c = softmax_call(1, 5, 37, -6, 6);
    expect_within("softmax_online", &c, FP32);
    call_free(&c);
    c = softmax_call(2, 1, 1, -6, 6); /* a single element: y = 1 exactly */
    expect_within("softmax_online", &c, FP32);
    call_free(&c);
    /* logits near 1000: exp without the max shift would overflow (expf(89) = inf) */
    c = softmax_call(3, 3, 100, 1000, 1020);
    expect_within("softmax_online", &c, FP32);
    call_free(&c);
    /* a spread of 2e4: most terms underflow, the max moves many times along the row */
    c = softmax_call(4, 2, 64, -1e4, 1e4);
    expect_within("softmax_online", &c, FP32);
    call_free(&c);
    /* increasing rows rescale the running sum at every element */
    c = softmax_call(5, 2, 40, 0, 1);
    for (int64_t i = 0; i < 80; i++) peat_f32(c.in[0])[i] = 0.25f * (float)(i % 40);
    expect_within("softmax_online", &c, FP32);
    call_free(&c);
}

/* The exp2 forms that Triton, CUDA's fast exp and FlashAttention ship: exp2((x - m) log2 e) rounds
 * the argument twice more than exp(x - m) (the product and log2 e itself), which the softmax
 * family's bound admits (docs/bounds.md); the rows where that matters are those with a large
 * spread |x - m|, where the old rule read 1.46x. */
Test(kernels, softmax_exp2_within_bound)
{
    const double spans[][2] = {{-6, 6}, {1000, 1020}, {-1e4, 1e4}, {-80, 0}, {-300, 300}};
    for (int s = 0; s < 5; s++) {
        call c = softmax_call(60 + s, 4, 64, spans[s][0], spans[s][1]);
        expect_within("softmax_exp2", &c, FP32);
        call_free(&c);
    }
    /* a row of the large-logit probe (gpt_unfused, seed 3): the max 33.35 stands 65 above
     * x_0 = -31.66, neither near 0, so x - m rounds, then the product by log2 e and log2 e itself.
     * The rule charging the shift once, y_0 (|x_0 - m| + 2 + lam + C + 1) / C, reads 1.43 on
     * x_0; the exp2 rule's three charges admit it */
    static const float row[8] = {-31.65546417236328f,
                                 4.131543159484863f,
                                 22.71636962890625f,
                                 33.35419845581055f,
                                 -31.044719696044922f,
                                 9.989395141601562f,
                                 -4e10f,
                                 -4e10f};
    call c = softmax_call(66, 1, 8, 0, 1);
    memcpy(peat_f32(c.in[0]), row, sizeof row);
    peat_args ca = run_named("softmax_exp2", &c, PEAT_DTYPE_F32);
    double m = row[3], S = 0.0, lam1 = 0.0, p[8], u = 0x1p-24, g = 8 * u / (1 - 8 * u);
    for (int j = 0; j < 8; j++) S += p[j] = exp((double)row[j] - m);
    for (int j = 0; j < 8; j++) p[j] /= S, lam1 += p[j] > 0 ? p[j] * (fabs(row[j] - m) + 2) : 0;
    double once = p[0] * (fabs(row[0] - m) + 2 + lam1 + 8 + 1) / 8;
    double err0 = fabs(peat_f32(ca.out[0])[0] - p[0]);
    cr_assert_gt(err0 / (g * once), 1.0,
                 "x_0's error is %.3g x the shift-once rule: the row no "
                 "longer shows why the exp2 form needs more",
                 err0 / (g * once));
    peat_args_free_outputs(&ca);
    cr_log_info("softmax_exp2 on the probe row: %.3g x the exp2 bound",
                expect_within("softmax_exp2", &c, FP32));
    call_free(&c);
}

Test(kernels, cross_entropy_exp2_within_bound)
{
    const double spans[][2] = {{-6, 6}, {-80, 80}, {1000, 1020}};
    for (int s = 0; s < 3; s++) {
        int64_t R = 7, C = 50;
        call c = {.op = PEAT_OP_CROSS_ENTROPY, .n_in = 2};
        c.p.i[0] = R, c.p.i[1] = C;
        peat_rng_t *r = peat_rng_new(70 + (uint64_t)s);
        c.in[0] = t_uniform(r, R * C, spans[s][0], spans[s][1]);
        cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_I32, R, &c.in[1]), PEAT_OK);
        for (int64_t i = 0; i < R; i++) peat_i32(c.in[1])[i] = (int32_t)((i * 13) % C);
        peat_rng_free(r);
        expect_within("cross_entropy_exp2", &c, FP32);
        call_free(&c);
    }
}

Test(kernels, softmax_online_masked_entries)
{
    /* -inf entries (masked logits), including a row that starts with them, must act exactly
     * like entries whose exp underflows: the same row with -200 there (exp(-200 - max) is 0 in
     * fp32) gives bit-identical output, masked entries get exactly 0, and that row is within the
     * bound. (The magnitude rule is not defined at -inf, so the bound is checked on the -200 row.)
     */
    call c = softmax_call(6, 2, 9, -3, 3), f = softmax_call(6, 2, 9, -3, 3);
    const int masked[4] = {0, 1, 5, 17};
    for (int k = 0; k < 4; k++)
        peat_f32(c.in[0])[masked[k]] = -INFINITY, peat_f32(f.in[0])[masked[k]] = -200.0f;
    expect_within("softmax_online", &f, FP32);
    peat_args am = run_named("softmax_online", &c, PEAT_DTYPE_F32),
              af = run_named("softmax_online", &f, PEAT_DTYPE_F32);
    const float *ym = peat_f32(am.out[0]), *yf = peat_f32(af.out[0]);
    for (int k = 0; k < 4; k++)
        cr_assert(ym[masked[k]] == 0.0f, "masked entry %d got %g, expected 0", masked[k],
                  ym[masked[k]]);
    for (int i = 0; i < 18; i++)
        cr_assert(memcmp(&ym[i], &yf[i], sizeof ym[i]) == 0,
                  "entry %d: %.9g with -inf masks, %.9g with -200", i, ym[i], yf[i]);
    peat_args_free_outputs(&am);
    peat_args_free_outputs(&af);
    call_free(&c);
    call_free(&f);
}

static call softmax_bwd_call(uint64_t seed, int64_t R, int64_t C)
{
    call s = softmax_call(seed, R, C, -4, 4);
    peat_args ex = run_exact(&s);
    call c = {.op = PEAT_OP_SOFTMAX_BWD, .n_in = 2};
    c.p = s.p;
    peat_rng_t *r = peat_rng_new(seed + 1000);
    c.in[0] = t_from(ex.out[0]);
    c.in[1] = t_gauss(r, R * C, 1.0);
    peat_rng_free(r);
    peat_args_free_outputs(&ex);
    call_free(&s);
    return c;
}

Test(kernels, softmax_online_bwd_within_bound)
{
    const int64_t shapes[][2] = {{5, 37}, {1, 1}, {3, 300}, {4, 8}};
    for (int s = 0; s < 4; s++) {
        call c = softmax_bwd_call(10 + s, shapes[s][0], shapes[s][1]);
        expect_within("softmax_online_bwd", &c, FP32);
        call_free(&c);
    }
}

/* ---- layernorm ---- */

static call layernorm_call(uint64_t seed, int64_t R, int64_t C, double offset, double sigma)
{
    call c = {.op = PEAT_OP_LAYERNORM, .n_in = 3};
    c.p.i[0] = R, c.p.i[1] = C, c.p.f[0] = 1e-5;
    peat_rng_t *r = peat_rng_new(seed);
    c.in[0] = t_gauss(r, R * C, sigma);
    for (int64_t i = 0; i < R * C; i++) peat_f32(c.in[0])[i] += (float)offset;
    c.in[1] = t_uniform(r, C, 0.5, 1.5);
    c.in[2] = t_uniform(r, C, -0.5, 0.5);
    peat_rng_free(r);
    return c;
}

Test(kernels, layernorm_welford_within_bound)
{
    call c = layernorm_call(20, 7, 45, 0.0, 1.0);
    expect_within("layernorm_welford", &c, FP32);
    call_free(&c);
    c = layernorm_call(21, 1, 1, 0.0, 1.0); /* one column: var 0, Y = beta */
    expect_within("layernorm_welford", &c, FP32);
    call_free(&c);
    c = layernorm_call(22, 4, 300, 10.0, 1.0); /* an offset ten times the spread */
    expect_within("layernorm_welford", &c, FP32);
    call_free(&c);
    c = layernorm_call(23, 3, 64, 0.0, 1e3); /* large magnitudes */
    expect_within("layernorm_welford", &c, FP32);
    call_free(&c);
}

static call layernorm_bwd_call(uint64_t seed, int64_t R, int64_t C)
{
    call f = layernorm_call(seed, R, C, 0.0, 1.0);
    peat_args ex = run_exact(&f);
    call c = {.op = PEAT_OP_LAYERNORM_BWD, .n_in = 5};
    c.p = f.p;
    peat_rng_t *r = peat_rng_new(seed + 1000);
    c.in[0] = f.in[0], c.in[1] = f.in[1], f.in[0] = f.in[1] = NULL;
    c.in[2] = t_from(ex.out[1]);
    c.in[3] = t_from(ex.out[2]);
    c.in[4] = t_gauss(r, R * C, 1.0);
    peat_rng_free(r);
    peat_args_free_outputs(&ex);
    call_free(&f);
    return c;
}

Test(kernels, layernorm_welford_bwd_within_bound)
{
    /* 70 rows: three blocks of 32 rows, the last one partial */
    const int64_t shapes[][2] = {{7, 45}, {1, 1}, {70, 20}, {1, 200}};
    for (int s = 0; s < 4; s++) {
        call c = layernorm_bwd_call(30 + s, shapes[s][0], shapes[s][1]);
        expect_within("layernorm_welford_bwd", &c, FP32);
        call_free(&c);
    }
}

/* ---- gelu: the tanh form against the erf GELU ---- */

/* max_x |gelu_tanh(x) - gelu(x)| over |x| <= 5, evaluated in double on a 1e-5 grid (the
 * difference is even in x): 4.7324e-4 at |x| = 2.6989; for the derivatives 8.6845e-4 at
 * |x| = 2.0187; for |x| > 5 the value difference stays below 1.3e-6. */
#define GELU_TANH_MAXDEV     4.7324e-4
#define GELU_TANH_BWD_MAXDEV 8.6845e-4

/* Candidate minus exact on a dense grid of [-5, 5]; returns the largest |difference| and
 * asserts none exceeds maxdev plus fp32 rounding of the result (4 u |exact| + 4 u). */
static double gelu_grid(const char *name, peat_op_kind op, double maxdev)
{
    const int64_t n = 10001;
    call c = {.op = op, .n_in = op == PEAT_OP_GELU ? 1 : 2};
    c.p.i[0] = n;
    for (int k = 0; k < c.n_in; k++)
        cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &c.in[k]), PEAT_OK, "alloc %lld",
                     (long long)n);
    for (int64_t i = 0; i < n; i++) {
        peat_f32(c.in[0])[i] = (float)(-5.0 + 10.0 * (double)i / (double)(n - 1));
        if (c.n_in == 2) peat_f32(c.in[1])[i] = 1.0f; /* dY = 1: dX is GELU' itself */
    }
    peat_args ex = run_exact(&c), ca = run_named(name, &c, PEAT_DTYPE_F32);
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double e = peat_f64(ex.out[0])[i], x = peat_f32(ca.out[0])[i], d = fabs(x - e);
        cr_assert(d <= maxdev + 4 * U32 * (fabs(e) + 1.0),
                  "%s(%g) = %.9g vs exact %.9g: |diff| %.3g > %.3g", name, peat_f32(c.in[0])[i], x,
                  e, d, maxdev);
        worst = d > worst ? d : worst;
    }
    peat_args_free_outputs(&ex);
    peat_args_free_outputs(&ca);
    call_free(&c);
    cr_log_info("%s: max |tanh form - erf form| on [-5,5] = %.5g", name, worst);
    return worst;
}

Test(kernels, gelu_tanh_deviation_is_the_known_one)
{
    double w = gelu_grid("gelu_tanh", PEAT_OP_GELU, GELU_TANH_MAXDEV);
    /* the grid passes within 5e-4 of |x| = 2.699, so the known deviation must show almost fully:
     * a kernel that secretly computed the erf GELU would show ~1e-7 here */
    cr_assert(w > 0.99 * GELU_TANH_MAXDEV,
              "gelu_tanh deviates at most %.3g from erf GELU, expected %.3g", w, GELU_TANH_MAXDEV);
}

Test(kernels, gelu_tanh_bwd_deviation_is_the_known_one)
{
    double w = gelu_grid("gelu_tanh_bwd", PEAT_OP_GELU_BWD, GELU_TANH_BWD_MAXDEV);
    cr_assert(w > 0.99 * GELU_TANH_BWD_MAXDEV,
              "gelu_tanh_bwd deviates at most %.3g from GELU', expected %.3g", w,
              GELU_TANH_BWD_MAXDEV);
}

/* The candidates compute the documented tanh formula to fp32 rounding: a double evaluation of
 * it is the reference. First-order error of the fp32 evaluation: z = k (x + c x^3) is off by a few
 * u |z|, tanh adds (1 - t^2) of that plus ~1 ulp, the rest a few roundings of the terms; 8u of
 * those terms bounds it. A wrong coefficient (0.0447 for 0.044715) misses this by 100x. */
Test(kernels, gelu_tanh_is_the_documented_formula)
{
    const double k = 0.79788456080286535588, cc = 0.044715;
    const int64_t n = 4001;
    call c = {.op = PEAT_OP_GELU_BWD, .n_in = 2};
    c.p.i[0] = n;
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &c.in[0]), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &c.in[1]), PEAT_OK);
    for (int64_t i = 0; i < n; i++)
        peat_f32(c.in[0])[i] = (float)(-8.0 + 16.0 * (double)i / (double)(n - 1)),
        peat_f32(c.in[1])[i] = 1.0f;
    peat_args b = run_named("gelu_tanh_bwd", &c, PEAT_DTYPE_F32);
    c.op = PEAT_OP_GELU, c.n_in = 1;
    peat_args f = run_named("gelu_tanh", &c, PEAT_DTYPE_F32);
    c.n_in = 2;
    for (int64_t i = 0; i < n; i++) {
        double x = peat_f32(c.in[0])[i], z = k * (x + cc * x * x * x), t = tanh(z), s = 1.0 - t * t;
        double y = 0.5 * x * (1.0 + t), dpoly = k * (1.0 + 3.0 * cc * x * x);
        double d = 0.5 * (1.0 + t) + 0.5 * x * s * dpoly,
               dt = 1.0 + s * fabs(z); /* t's error / u */
        double by = 8 * U32 * (fabs(y) + 0.5 * fabs(x) * dt);
        double bd =
            8 * U32 * (0.5 * (1.0 + t) + fabs(0.5 * x * s * dpoly) + (0.5 + fabs(x) * dpoly) * dt);
        double ey = fabs(peat_f32(f.out[0])[i] - y), ed = fabs(peat_f32(b.out[0])[i] - d);
        cr_assert(ey <= by, "gelu_tanh(%.7g) = %.9g, formula %.9g: |diff| %.3g > %.3g", x,
                  peat_f32(f.out[0])[i], y, ey, by);
        cr_assert(ed <= bd, "gelu_tanh_bwd(%.7g) = %.9g, formula %.9g: |diff| %.3g > %.3g", x,
                  peat_f32(b.out[0])[i], d, ed, bd);
    }
    peat_args_free_outputs(&f);
    peat_args_free_outputs(&b);
    call_free(&c);
}

Test(kernels, gelu_tanh_tails)
{
    /* far tails: GELU(x) -> x and -> -0, GELU'(x) -> 1 and 0, without NaN from x^3 overflowing */
    const float xs[] = {-1e30f, -50.0f, -7.0f, 0.0f, 7.0f, 50.0f, 1e30f};
    const double y_want[] = {0.0, 0.0, 0.0, 0.0, 7.0, 50.0, 1e30},
                 d_want[] = {0, 0, 0, 0.5, 1, 1, 1};
    call c = {.op = PEAT_OP_GELU_BWD, .n_in = 2};
    c.p.i[0] = 7;
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, 7, &c.in[0]), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, 7, &c.in[1]), PEAT_OK);
    for (int i = 0; i < 7; i++) peat_f32(c.in[0])[i] = xs[i], peat_f32(c.in[1])[i] = 1.0f;
    peat_args b = run_named("gelu_tanh_bwd", &c, PEAT_DTYPE_F32);
    c.op = PEAT_OP_GELU, c.n_in = 1;
    peat_args f = run_named("gelu_tanh", &c, PEAT_DTYPE_F32);
    c.n_in = 2;
    for (int i = 0; i < 7; i++) {
        double y = peat_f32(f.out[0])[i], d = peat_f32(b.out[0])[i];
        /* |x| = 7: erf GELU differs from x or 0 by x Phi(-7) ~ 1e-11; the tanh form by ~1e-9 */
        cr_assert(fabs(y - y_want[i]) <= 1e-6 * fabs(y_want[i]) + 1e-6,
                  "gelu_tanh(%g) = %g, expected %g", xs[i], y, y_want[i]);
        cr_assert(fabs(d - d_want[i]) <= 1e-6, "gelu_tanh_bwd(%g) = %g, expected %g", xs[i], d,
                  d_want[i]);
    }
    peat_args_free_outputs(&f);
    peat_args_free_outputs(&b);
    call_free(&c);
}

/* ---- attention ---- */

static call attention_call(uint64_t seed, int64_t B, int64_t H, int64_t T, int64_t D, int causal)
{
    call c = {.op = PEAT_OP_ATTENTION, .n_in = 3};
    int64_t v[5] = {B, H, T, D, causal};
    memcpy(c.p.i, v, sizeof v);
    c.p.f[0] = 1.0 / sqrt((double)D);
    peat_rng_t *r = peat_rng_new(seed);
    for (int k = 0; k < 3; k++) c.in[k] = t_gauss(r, B * H * T * D, 1.0);
    peat_rng_free(r);
    return c;
}

/* T: not a multiple of the 16-tile, exactly one tile, T = 1, shorter than a tile, several tiles. */
static const int64_t attn_shapes[][4] = {
    {1, 2, 37, 8}, {2, 1, 16, 5}, {1, 1, 1, 4}, {1, 1, 5, 3}, {1, 1, 50, 16}};

Test(kernels, attention_flash_within_bound)
{
    for (int causal = 0; causal <= 1; causal++)
        for (int s = 0; s < 5; s++) {
            const int64_t *v = attn_shapes[s];
            call c = attention_call(50 + s, v[0], v[1], v[2], v[3], causal);
            expect_within("attention_flash", &c, FP32);
            call_free(&c);
        }
}

Test(kernels, attention_exp2_within_bound)
{
    for (int causal = 0; causal <= 1; causal++)
        for (int s = 0; s < 5; s++) {
            const int64_t *v = attn_shapes[s];
            call c = attention_call(80 + s, v[0], v[1], v[2], v[3], causal);
            expect_within("attention_exp2", &c, FP32);
            call_free(&c);
        }
}

static call attention_bwd_call(uint64_t seed, int64_t B, int64_t H, int64_t T, int64_t D,
                               int causal)
{
    call f = attention_call(seed, B, H, T, D, causal);
    peat_args ex = run_exact(&f);
    call c = {.op = PEAT_OP_ATTENTION_BWD, .n_in = 6};
    c.p = f.p;
    for (int k = 0; k < 3; k++) c.in[k] = f.in[k], f.in[k] = NULL;
    c.in[3] = t_from(ex.out[0]);
    c.in[4] = t_from(ex.out[1]);
    peat_rng_t *r = peat_rng_new(seed + 1000);
    c.in[5] = t_gauss(r, B * H * T * D, 1.0);
    peat_rng_free(r);
    peat_args_free_outputs(&ex);
    call_free(&f);
    return c;
}

Test(kernels, attention_flash_bwd_within_bound)
{
    for (int causal = 0; causal <= 1; causal++)
        for (int s = 0; s < 5; s++) {
            const int64_t *v = attn_shapes[s];
            call c = attention_bwd_call(60 + s, v[0], v[1], v[2], v[3], causal);
            expect_within("attention_flash_bwd", &c, FP32);
            call_free(&c);
        }
}

/* grouped-query attention: 4 query heads over 2 and over 1 K/V head (i[5]) */
Test(kernels, attention_flash_gqa_within_bound)
{
    for (int64_t hkv = 2; hkv >= 1; hkv--)
        for (int causal = 0; causal <= 1; causal++) {
            int64_t B = 2, H = 4, T = 11, D = 8, n = B * H * T * D, nkv = B * hkv * T * D;
            call c = {.op = PEAT_OP_ATTENTION, .n_in = 3};
            int64_t v[6] = {B, H, T, D, causal, hkv};
            memcpy(c.p.i, v, sizeof v);
            c.p.f[0] = 1.0 / sqrt((double)D);
            peat_rng_t *r = peat_rng_new(70 + (uint64_t)(2 * hkv + causal));
            c.in[0] = t_gauss(r, n, 1.0), c.in[1] = t_gauss(r, nkv, 1.0);
            c.in[2] = t_gauss(r, nkv, 1.0);
            expect_within("attention_flash", &c, FP32);
            peat_args ex = run_exact(&c);
            call b = {.op = PEAT_OP_ATTENTION_BWD, .p = c.p, .n_in = 6};
            for (int k = 0; k < 3; k++) b.in[k] = c.in[k], c.in[k] = NULL;
            b.in[3] = t_from(ex.out[0]), b.in[4] = t_from(ex.out[1]), b.in[5] = t_gauss(r, n, 1.0);
            expect_within("attention_flash_bwd", &b, FP32);
            peat_args_free_outputs(&ex), call_free(&b), call_free(&c), peat_rng_free(r);
        }
}

/* ---- the LLaMA-block ops: RMSNorm, SiLU, SwiGLU, RoPE (each forward and backward) ---- */

static call ew_call(peat_op_kind op, uint64_t seed, int64_t n, int n_in, double sigma)
{
    call c = {.op = op, .n_in = n_in};
    c.p.i[0] = n;
    peat_rng_t *r = peat_rng_new(seed);
    for (int k = 0; k < n_in; k++) c.in[k] = t_gauss(r, n, k ? 1.0 : sigma);
    peat_rng_free(r);
    return c;
}

Test(kernels, llama_block_candidates_within_bound)
{
    /* SiLU and SwiGLU, the gate up to the sigmoid's saturated tails */
    for (int s = 0; s < 2; s++) {
        double sigma = s ? 10.0 : 1.5;
        call c = ew_call(PEAT_OP_SILU, 80 + s, 777, 1, sigma);
        expect_within("silu_split", &c, FP32), call_free(&c);
        c = ew_call(PEAT_OP_SILU_BWD, 82 + s, 777, 2, sigma);
        expect_within("silu_split_bwd", &c, FP32), call_free(&c);
        c = ew_call(PEAT_OP_SWIGLU, 84 + s, 777, 2, sigma);
        expect_within("swiglu_fused", &c, FP32), call_free(&c);
        c = ew_call(PEAT_OP_SWIGLU_BWD, 86 + s, 777, 3, sigma);
        expect_within("swiglu_fused_bwd", &c, FP32), call_free(&c);
    }
    /* RMSNorm: rows of 45 and of 1; its backward on the forward's rstd */
    static const int64_t rc[][2] = {{7, 45}, {4, 1}, {40, 12}};
    for (int s = 0; s < 3; s++) {
        int64_t R = rc[s][0], C = rc[s][1];
        call c = {.op = PEAT_OP_RMSNORM, .n_in = 2};
        c.p.i[0] = R, c.p.i[1] = C, c.p.f[0] = 1e-6;
        peat_rng_t *r = peat_rng_new(90 + (uint64_t)s);
        c.in[0] = t_gauss(r, R * C, 1.0), c.in[1] = t_uniform(r, C, 0.5, 1.5);
        expect_within("rmsnorm_lanes", &c, FP32);
        peat_args ex = run_exact(&c);
        call b = {.op = PEAT_OP_RMSNORM_BWD, .p = c.p, .n_in = 4};
        b.in[0] = c.in[0], b.in[1] = c.in[1], c.in[0] = c.in[1] = NULL;
        b.in[2] = t_from(ex.out[1]), b.in[3] = t_gauss(r, R * C, 1.0);
        expect_within("rmsnorm_lanes_bwd", &b, FP32);
        peat_args_free_outputs(&ex), call_free(&b), call_free(&c), peat_rng_free(r);
    }
    /* RoPE: both layouts, from position 0 and from 500 */
    for (int s = 0; s < 4; s++) {
        call c = {.op = s % 2 ? PEAT_OP_ROPE_BWD : PEAT_OP_ROPE, .n_in = 1};
        int64_t v[6] = {2, 3, 13, 16, s / 2, s / 2 ? 500 : 0};
        memcpy(c.p.i, v, sizeof v);
        c.p.f[0] = 10000.0;
        peat_rng_t *r = peat_rng_new(95 + (uint64_t)s);
        c.in[0] = t_gauss(r, 2 * 3 * 13 * 16, 1.0);
        expect_within(s % 2 ? "rope_table_bwd" : "rope_table", &c, FP32);
        call_free(&c), peat_rng_free(r);
    }
}

/* Batch norm over N = 4 images of S values (X: spread times a Gaussian plus shift) through
 * batchnorm_welford, and its backward on the exact forward's statistics with dY scaled by 2^dy_exp
 * through batchnorm_onepass_bwd. */
static void bn_case(uint64_t seed, int64_t S, double spread, float shift, int dy_exp)
{
    int64_t N = 4, C = 3, n = N * C * S;
    call c = {.op = PEAT_OP_BATCHNORM, .n_in = 5};
    c.p.i[0] = N, c.p.i[1] = C, c.p.i[2] = S, c.p.f[0] = 1e-5, c.p.f[1] = 0.1;
    peat_rng_t *r = peat_rng_new(seed);
    c.in[0] = t_gauss(r, n, spread), c.in[1] = t_uniform(r, C, 0.5, 1.5);
    c.in[2] = t_gauss(r, C, 0.5), c.in[3] = t_gauss(r, C, 0.5);
    c.in[4] = t_uniform(r, C, 0.5, 1.5);
    float *x = peat_f32(c.in[0]);
    for (int64_t i = 0; i < n; i++) x[i] += shift;
    expect_within("batchnorm_welford", &c, FP32);
    peat_args ex = run_exact(&c);
    call b = {.op = PEAT_OP_BATCHNORM_BWD, .p = c.p, .n_in = 5};
    b.in[0] = c.in[0], b.in[1] = c.in[1], c.in[0] = c.in[1] = NULL;
    b.in[2] = t_from(ex.out[1]), b.in[3] = t_from(ex.out[2]), b.in[4] = t_gauss(r, n, 1.0);
    float *dy = peat_f32(b.in[4]);
    for (int64_t i = 0; i < n; i++) dy[i] = ldexpf(dy[i], dy_exp);
    expect_within("batchnorm_onepass_bwd", &b, FP32);
    peat_args_free_outputs(&ex), call_free(&b), call_free(&c), peat_rng_free(r);
}

/* batch norm and pooling candidates (the backward on the exact forward's statistics) */
Test(kernels, resnet_block_candidates_within_bound)
{
    for (int s = 0; s < 2; s++) bn_case(100 + (uint64_t)s, s ? 1 : 25, 2.0, 0.0f, 0);
    /* the backward over M = 4 values (a 1x1 last stage) with a mean 10x the spread (rstd near
     * 100) and subnormal gradients: the roundings in gradual underflow, each up to 2^-150, are
     * amplified by gamma rstd^2 x-hat (docs/bounds.md, batch norm) */
    for (int s = 0; s < 2; s++) bn_case(120 + (uint64_t)s, 1, 0.01, 0.1f, s ? -140 : -130);
    static const int64_t cf[][3] = {{2, 2, 0}, {3, 2, 1}, {3, 1, 1}}; /* K stride pad */
    for (int s = 0; s < 3; s++) {
        int64_t N = 2, C = 3, H = 9, W = 7, K = cf[s][0], st = cf[s][1], pad = cf[s][2];
        int64_t OH = (H + 2 * pad - K) / st + 1, OW = (W + 2 * pad - K) / st + 1;
        int64_t v[7] = {N, C, H, W, K, st, pad};
        peat_rng_t *r = peat_rng_new(110 + (uint64_t)s);
        call c = {.n_in = 1};
        memcpy(c.p.i, v, sizeof v);
        c.in[0] = t_gauss(r, N * C * H * W, 1.0);
        c.op = PEAT_OP_MAXPOOL2D, expect_within("maxpool2d_cols", &c, FP32);
        c.op = PEAT_OP_AVGPOOL2D, expect_within("avgpool2d_recip", &c, FP32);
        call b = {.op = PEAT_OP_MAXPOOL2D_BWD, .p = c.p, .n_in = 2};
        b.in[0] = c.in[0], c.in[0] = NULL, b.in[1] = t_gauss(r, N * C * OH * OW, 1.0);
        expect_within("maxpool2d_gather_bwd", &b, FP32);
        call g = {.op = PEAT_OP_AVGPOOL2D_BWD, .p = c.p, .n_in = 1};
        g.in[0] = b.in[1], b.in[1] = NULL, b.n_in = 1;
        expect_within("avgpool2d_recip_bwd", &g, FP32);
        call_free(&g), call_free(&b), call_free(&c), peat_rng_free(r);
    }
}

/* ---- adamw ---- */

/* param uniform in [-prange, prange] */
static call adamw_call(uint64_t seed, int64_t n, int64_t t, double prange)
{
    call c = {.op = PEAT_OP_ADAMW, .n_in = 4};
    c.p.i[0] = n, c.p.i[1] = t;
    double f[5] = {1e-3, 0.9, 0.999, 1e-8, 0.01};
    memcpy(c.p.f, f, sizeof f);
    peat_rng_t *r = peat_rng_new(seed);
    c.in[0] = t_uniform(r, n, -prange, prange);
    c.in[1] = t_gauss(r, n, 1.0);
    c.in[2] = t_gauss(r, n, 0.1);
    c.in[3] = t_uniform(r, n, 0, 0.01);
    peat_rng_free(r);
    return c;
}

Test(kernels, adamw_fused_within_bound)
{
    const int64_t steps[] = {1, 2, 100, 100000};
    for (int s = 0; s < 4; s++) {
        call c = adamw_call(70 + s, 1000, steps[s], 1.0);
        expect_within("adamw_fused", &c, FP32);
        call_free(&c);
    }
}

Test(kernels, adamw_fused_in_place_equals_out_of_place)
{
    call c = adamw_call(75, 257, 3, 1.0);
    peat_args sep = run_named("adamw_fused", &c, PEAT_DTYPE_F32);
    peat_args al = peat_args_make(c.op, &c.p, 4, (const peat_tensor *const *)c.in, 3,
                                  (peat_tensor *const[]){c.in[0], c.in[2], c.in[3]});
    cr_assert_eq(peat_kernel_run(peat_registry_find("adamw_fused"), &al), PEAT_OK, "%s",
                 peat_error_last());
    const int src[3] = {0, 2, 3};
    for (int o = 0; o < 3; o++)
        cr_assert(memcmp(sep.out[o]->data, c.in[src[o]]->data, peat_tensor_nbytes(sep.out[o])) == 0,
                  "adamw_fused output %d differs when it aliases input %d", o, src[o]);
    peat_args_free_outputs(&sep);
    call_free(&c);
}

/* ---- reduced precision: within the bound at their own unit roundoff, and visibly not fp32 ---- */

static call gemm_call(uint64_t seed, int64_t M, int64_t N, int64_t K, int ta, int tb, int64_t batch,
                      double alpha, double beta)
{
    call c = {.op = PEAT_OP_GEMM, .n_in = beta != 0.0 ? 3 : 2};
    int64_t v[6] = {ta, tb, M, N, K, batch};
    memcpy(c.p.i, v, sizeof v);
    c.p.f[0] = alpha, c.p.f[1] = beta;
    peat_rng_t *r = peat_rng_new(seed);
    c.in[0] = t_uniform(r, batch * M * K, -1, 1);
    c.in[1] = t_uniform(r, batch * K * N, -1, 1);
    if (beta != 0.0) c.in[2] = t_uniform(r, batch * M * N, -1, 1);
    peat_rng_free(r);
    return c;
}

Test(kernels, gemm_fp16_within_fp16_bound)
{
    /* each product of fp16-rounded inputs is off by at most gamma_2(u16) relative, then fp32 sums;
     * eta: an input in fp16's subnormal range is off by up to 2^-25 absolute */
    const bound_model m = {U32, gamma_k(2, U16), ETA16, 2.0};
    call c = gemm_call(80, 17, 23, 150, 0, 0, 1, 1.0, 0.0);
    double w = expect_within("gemm_fp16", &c, m);
    cr_assert(bound_ratio("gemm_fp16", &c, FP32, 0) > 1.0,
              "gemm_fp16 is within the fp32 bound: inputs not rounded?");
    call_free(&c);
    c = gemm_call(81, 8, 9, 70, 1, 1, 2, 0.5, 2.0); /* transposes, batch, beta */
    expect_within("gemm_fp16", &c, m);
    call_free(&c);
    c = gemm_call(82, 1, 1, 1, 0, 1, 1, 1.0, 1.0);
    expect_within("gemm_fp16", &c, m);
    call_free(&c);
    cr_log_info("gemm_fp16 worst ratio %.3g", w);
}

/* gemm_fp8_new on fp8 values of both formats (K past its 128-deep blocks, transposes, a batch,
 * beta) is within the fp32 bound: fp8 products are exact in fp32 */
Test(kernels, gemm_fp8_new_within_fp32_bound)
{
    static const int64_t shapes[][8] = {
        {17, 23, 300, 0, 0, 1, PEAT_FP8_E4M3, PEAT_FP8_E4M3},
        {8, 9, 70, 1, 1, 2, PEAT_FP8_E5M2, PEAT_FP8_E4M3},
        {1, 1, 1, 0, 1, 1, PEAT_FP8_E4M3, PEAT_FP8_E5M2},
    };
    for (int s = 0; s < 3; s++) {
        const int64_t *q = shapes[s];
        call c = gemm_call(90 + (uint64_t)s, q[0], q[1], q[2], (int)q[3], (int)q[4], q[5], 1.0,
                           s == 1 ? 0.5 : 0.0);
        c.op = PEAT_OP_GEMM_FP8;
        c.p.i[6] = q[6], c.p.i[7] = q[7];
        c.p.f[0] = 0.25, c.p.f[2] = 3.0;
        for (int k = 0; k < 2; k++)
            for (int64_t e = 0; e < peat_tensor_numel(c.in[k]); e++)
                peat_f32(c.in[k])[e] = peat_round_fp8(64.0f * peat_f32(c.in[k])[e], (int)q[6 + k]);
        expect_within("gemm_fp8_new", &c, FP32);
        call_free(&c);
    }
}

Test(kernels, gemm_fp16_output_may_alias_c)
{
    call c = gemm_call(83, 9, 70, 33, 0, 1, 2, 1.5, -0.5);
    peat_args sep = run_named("gemm_fp16", &c, PEAT_DTYPE_F32);
    peat_args al = peat_args_make(c.op, &c.p, 3, (const peat_tensor *const *)c.in, 1, &c.in[2]);
    cr_assert_eq(peat_kernel_run(peat_registry_find("gemm_fp16"), &al), PEAT_OK, "%s",
                 peat_error_last());
    cr_assert(memcmp(sep.out[0]->data, c.in[2]->data, peat_tensor_nbytes(sep.out[0])) == 0,
              "gemm_fp16 gives a different D when D aliases C");
    peat_args_free_outputs(&sep);
    call_free(&c);
}

/* Every element of output o of kernel name on c is a value of the format (round(y) == y). */
static void expect_stored_in(const char *name, const call *c, int o, float (*rnd)(float),
                             const char *fmt)
{
    peat_args a = run_named(name, c, PEAT_DTYPE_F32);
    const float *y = peat_f32(a.out[o]);
    for (int64_t i = 0; i < peat_tensor_numel(a.out[o]); i++)
        cr_assert(rnd(y[i]) == y[i], "%s out %d [%lld] = %.9g is not a %s value", name, o,
                  (long long)i, y[i], fmt);
    peat_args_free_outputs(&a);
}

Test(kernels, layernorm_lowp_within_own_bound)
{
    /* X, gamma and beta are rounded on the way in and Y on the way out: gamma_3 at the format's u
     * on the terms of Y; mean and rstd are fp32 statistics of the rounded X */
    const char *names[2] = {"layernorm_bf16", "layernorm_fp16"};
    const double us[2] = {UBF, U16}, etas[2] = {ETA32, ETA16};
    for (int k = 0; k < 2; k++) {
        bound_model m = {U32, gamma_k(3, us[k]), etas[k], 2.0};
        call c = layernorm_call(90 + k, 7, 45, 0.0, 1.0);
        expect_within(names[k], &c, m);
        cr_assert(bound_ratio(names[k], &c, FP32, 0) > 1.0,
                  "%s is within the fp32 bound: not rounded?", names[k]);
        expect_stored_in(names[k], &c, 0, k ? peat_round_f16 : peat_round_bf16,
                         k ? "fp16" : "bf16");
        call_free(&c);
        c = layernorm_call(92 + k, 1, 1, 0.0, 1.0);
        expect_within(names[k], &c, m);
        call_free(&c);
    }
}

Test(kernels, attention_bf16_within_bf16_bound)
{
    /* Q, K, V rounded to bf16 (scores off by gamma_2(u_bf16) of their terms, P relatively by the
     * same through exp), O rounded once more: gamma_4(u_bf16) on the magnitude of O */
    const bound_model m = {U32, gamma_k(4, UBF), ETA32, 2.0};
    for (int causal = 0; causal <= 1; causal++) {
        call c = attention_call(95 + causal, 1, 2, 37, 8, causal);
        expect_within("attention_bf16", &c, m);
        cr_assert(bound_ratio("attention_bf16", &c, FP32, 0) > 1.0,
                  "attention_bf16 within fp32 bound: not rounded?");
        expect_stored_in("attention_bf16", &c, 0, peat_round_bf16, "bf16");
        call_free(&c);
    }
}

/* ---- candidates are their own algorithm, not a call to the golden kernel ---- */

Test(kernels, candidates_differ_from_golden_where_they_reorder)
{
    struct {
        const char *name;
        call c;
    } cases[] = {
        /* K = C KH KW = 144 > tile_k 64: per-slice partial sums */
        {"conv_im2col", conv_call(PEAT_OP_CONV2D, 200, 1, 16, 9, 9, 33, 3, 3, 2, 1)},
        /* GEMM over O = 70 > tile_k, then col2im */
        {"conv_im2col_bwd_data",
         conv_call(PEAT_OP_CONV2D_BWD_DATA, 201, 1, 2, 12, 12, 70, 5, 5, 3, 2)},
        /* K = OH OW = 100 > tile_k */
        {"conv_im2col_bwd_filter",
         conv_call(PEAT_OP_CONV2D_BWD_FILTER, 202, 1, 3, 10, 10, 4, 3, 3, 1, 1)},
        /* multiply by 1/d instead of dividing */
        {"softmax_online", softmax_call(203, 4, 50, -4, 4)},
        /* 8-lane dot product */
        {"softmax_online_bwd", softmax_bwd_call(204, 4, 50)},
        /* Welford instead of two-pass statistics */
        {"layernorm_welford", layernorm_call(205, 4, 50, 0.0, 1.0)},
        /* dgamma/dbeta summed per 32-row block */
        {"layernorm_welford_bwd", layernorm_bwd_call(206, 70, 20)},
        /* online rescaling across three key tiles */
        {"attention_flash", attention_call(207, 1, 1, 40, 8, 0)},
        {"attention_flash_bwd", attention_bwd_call(208, 1, 1, 40, 8, 0)},
        /* multiplies by 1/(1-b^t) instead of dividing; params near 0 (a fresh bias) so the
         * update's last bits are not absorbed by p */
        {"adamw_fused", adamw_call(209, 1000, 3, 1e-4)},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int64_t nd = count_diff_vs_golden(cases[k].name, &cases[k].c);
        cr_assert(nd > 0, "%s is bit-identical to %s_golden on a case where its order differs",
                  cases[k].name, peat_op_name(cases[k].c.op));
        cr_log_info("%s: %lld elements differ from golden", cases[k].name, (long long)nd);
        call_free(&cases[k].c);
    }
}

/* ---- registry descriptors ---- */

Test(kernels, candidates_are_registered_with_declared_precision)
{
    struct {
        const char *name;
        peat_op_kind op;
        peat_dtype in;
    } want[] = {
        {"conv_im2col", PEAT_OP_CONV2D, PEAT_DTYPE_F32},
        {"conv_im2col_bwd_data", PEAT_OP_CONV2D_BWD_DATA, PEAT_DTYPE_F32},
        {"conv_im2col_bwd_filter", PEAT_OP_CONV2D_BWD_FILTER, PEAT_DTYPE_F32},
        {"softmax_online", PEAT_OP_SOFTMAX, PEAT_DTYPE_F32},
        {"softmax_online_bwd", PEAT_OP_SOFTMAX_BWD, PEAT_DTYPE_F32},
        {"layernorm_welford", PEAT_OP_LAYERNORM, PEAT_DTYPE_F32},
        {"layernorm_welford_bwd", PEAT_OP_LAYERNORM_BWD, PEAT_DTYPE_F32},
        {"layernorm_bf16", PEAT_OP_LAYERNORM, PEAT_DTYPE_BF16},
        {"layernorm_fp16", PEAT_OP_LAYERNORM, PEAT_DTYPE_F16},
        {"gelu_tanh", PEAT_OP_GELU, PEAT_DTYPE_F32},
        {"gelu_tanh_bwd", PEAT_OP_GELU_BWD, PEAT_DTYPE_F32},
        {"attention_flash", PEAT_OP_ATTENTION, PEAT_DTYPE_F32},
        {"attention_flash_bwd", PEAT_OP_ATTENTION_BWD, PEAT_DTYPE_F32},
        {"attention_bf16", PEAT_OP_ATTENTION, PEAT_DTYPE_BF16},
        {"adamw_fused", PEAT_OP_ADAMW, PEAT_DTYPE_F32},
        {"gemm_fp16", PEAT_OP_GEMM, PEAT_DTYPE_F16},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        const peat_kernel *kn = peat_registry_find(want[k].name);
        cr_assert_not_null(kn, "%s is not registered", want[k].name);
        cr_assert(kn->op == want[k].op && kn->role == PEAT_ROLE_CANDIDATE &&
                      strcmp(kn->backend, "cpu") == 0,
                  "%s: op %s role %s backend %s", want[k].name, peat_op_name(kn->op),
                  peat_role_name(kn->role), kn->backend);
        cr_assert(kn->in_dtype == want[k].in && kn->acc_dtype == PEAT_DTYPE_F32 &&
                      kn->out_dtype == PEAT_DTYPE_F32,
                  "%s: dtypes in %s acc %s out %s", want[k].name, peat_dtype_name(kn->in_dtype),
                  peat_dtype_name(kn->acc_dtype), peat_dtype_name(kn->out_dtype));
        cr_assert(kn->desc && kn->desc[0], "%s has no description", want[k].name);
    }
}

Test(kernels, candidates_refuse_f64_storage)
{
    /* peat_op_check lets F64 inputs stand for F32; a candidate must refuse, not misread them */
    call c = softmax_call(300, 2, 3, -1, 1);
    peat_tensor *d = NULL;
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F64, 6, &d), PEAT_OK);
    peat_tensor_free(c.in[0]);
    c.in[0] = d;
    peat_args a = peat_args_make(c.op, &c.p, 1, (const peat_tensor *const *)c.in, 0, NULL);
    cr_assert_eq(peat_op_alloc_outputs(&a, PEAT_DTYPE_F32), PEAT_OK);
    peat_status st = peat_kernel_run(peat_registry_find("softmax_online"), &a);
    cr_assert_eq(st, PEAT_ERR_UNSUPPORTED, "softmax_online on f64 input returned %s",
                 peat_status_str(st));
    peat_args_free_outputs(&a);
    call_free(&c);
}

Test(kernels, blocked_gemm_rejects_oversized_tiles)
{
    /* a plugin-style descriptor with a tile the stack register block cannot hold is refused */
    peat_kernel k = *peat_registry_find("conv_im2col");
    k.name = "conv_im2col_huge_tile";
    k.cfg.tile_m = 128, k.cfg.tile_n = 128;
    call c = conv_call(PEAT_OP_CONV2D, 301, 1, 1, 4, 4, 1, 3, 3, 1, 1);
    peat_args a = peat_args_make(c.op, &c.p, 2, (const peat_tensor *const *)c.in, 0, NULL);
    cr_assert_eq(peat_op_alloc_outputs(&a, PEAT_DTYPE_F32), PEAT_OK);
    peat_status st = peat_kernel_run(&k, &a);
    cr_assert_eq(st, PEAT_ERR_INVAL, "128x128 tile accepted (%s)", peat_status_str(st));
    peat_args_free_outputs(&a);
    call_free(&c);
}
