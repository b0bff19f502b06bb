/* test_golden.c: exact and golden kernels: hand cases, rounding bounds, finite differences. */
#include <criterion/criterion.h>

#include "golden/golden.h"
#include "golden_cases.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void setup(void)
{
    peat_status s = peat_golden_register();
    cr_assert_eq(s, PEAT_OK, "peat_golden_register: %s", peat_error_last());
}
TestSuite(golden, .init = setup);

/* ---- helpers ------------------------------------------------------------------------------- */

#define NA(arr) ((int64_t)(sizeof(arr) / sizeof((arr)[0])))

static peat_tensor *ti(int64_t n, const int32_t *v)
{
    peat_tensor *t = NULL;
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_I32, n, &t), PEAT_OK, "alloc i32[%lld]",
                 (long long)n);
    memcpy(t->data, v, (size_t)n * sizeof(int32_t));
    return t;
}
/* F64 copy of a float tensor (exact kernels accept F64 inputs; I32 is cloned as is). */
static peat_tensor *to_f64(const peat_tensor *s)
{
    peat_tensor *t = NULL;
    if (s->dtype == PEAT_DTYPE_I32) {
        cr_assert_eq(peat_tensor_clone(s, &t), PEAT_OK, "clone");
        return t;
    }
    int64_t n = peat_tensor_numel(s);
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F64, n, &t), PEAT_OK, "alloc f64");
    for (int64_t i = 0; i < n; i++) peat_f64(t)[i] = peat_tensor_get(s, i);
    return t;
}

/* Runs <op>_exact and <op>_golden on the same fp32 inputs and compares output o with the hand
 * values want[]: exact to 1e-13 relative (the hand values carry 16+ digits), golden to a few
 * fp32 roundings (1e-6 relative to max(1, |want|)). */
static void hand(peat_op_kind op, const peat_op_params *p, int n_in, peat_tensor *const *in, int o,
                 const double *want, int64_t n)
{
    char name[64];
    static const char *sfx[] = {"exact", "golden"};
    for (int r = 0; r < 2; r++) {
        snprintf(name, sizeof name, "%s_%s", peat_op_name(op), sfx[r]);
        peat_args a = run_k(name, op, p, n_in, in);
        cr_assert_eq(peat_tensor_numel(a.out[o]), n, "%s out %d has %lld elements, hand case %lld",
                     name, o, (long long)peat_tensor_numel(a.out[o]), (long long)n);
        double rtol = r == 0 ? 1e-13 : 1e-6;
        for (int64_t i = 0; i < n; i++) {
            double got = peat_tensor_get(a.out[o], i);
            cr_assert(fabs(got - want[i]) <= rtol * fmax(1.0, fabs(want[i])),
                      "%s out %d [%lld]: got %.17g, hand value %.17g", name, o, (long long)i, got,
                      want[i]);
        }
        peat_args_free_outputs(&a);
    }
}

/* ---- registration ---------------------------------------------------------------------------- */

Test(golden, every_op_has_exact_and_golden)
{
    char name[64];
    for (int op = 0; op < PEAT_OP_COUNT; op++) {
        for (int r = 0; r < 2; r++) {
            snprintf(name, sizeof name, "%s_%s", peat_op_name((peat_op_kind)op),
                     r ? "golden" : "exact");
            const peat_kernel *k = peat_registry_find(name);
            cr_assert_not_null(k, "no kernel '%s'", name);
            cr_assert_eq(k->op, (peat_op_kind)op, "%s implements %s", name, peat_op_name(k->op));
            cr_assert_eq(k->role, r ? PEAT_ROLE_GOLDEN : PEAT_ROLE_EXACT, "%s has role %s", name,
                         peat_role_name(k->role));
            cr_assert_eq(k->out_dtype, r ? PEAT_DTYPE_F32 : PEAT_DTYPE_F64, "%s out dtype %s", name,
                         peat_dtype_name(k->out_dtype));
            cr_assert_eq(k->acc_dtype, r ? PEAT_DTYPE_F32 : PEAT_DTYPE_F64, "%s acc dtype %s", name,
                         peat_dtype_name(k->acc_dtype));
            cr_assert_eq(k->in_dtype, PEAT_DTYPE_F32, "%s in dtype %s", name,
                         peat_dtype_name(k->in_dtype));
            cr_assert_str_eq(k->backend, "cpu", "%s backend", name);
            cr_assert(k->desc && k->desc[0], "%s has no description", name);
        }
    }
}

/* ---- hand-computed cases, one per op ------------------------------------------------------- */

Test(golden, hand_bias_add)
{
    /* R=1 C=2 S=2: X = [c0: 1 2 | c1: 3 4], b = [0.5, -1] -> [1.5 2.5 | 2 3] */
    peat_op_params p = {.i = {1, 2, 2}};
    peat_tensor *in[2] = {tf(4, (float[]){1, 2, 3, 4}), tf(2, (float[]){0.5f, -1})};
    hand(PEAT_OP_BIAS_ADD, &p, 2, in, 0, (double[]){1.5, 2.5, 2, 3}, 4);
    free_all(2, in);
}

Test(golden, hand_gemm_fp8)
{
    /* A = [1 2; 3 4] (e4m3), B = [0.5 -1; 1.5 2] (e5m2), scale_a 2, scale_b 0.25, beta 1 with
     * C = [1 1; 1 1]: 0.5 AB + C, AB = [3.5 3; 7.5 5] -> [2.75 2.5; 4.75 3.5] */
    peat_op_params p = {.i = {0, 0, 2, 2, 2, 1, PEAT_FP8_E4M3, PEAT_FP8_E5M2},
                        .f = {2.0, 1.0, 0.25}};
    peat_tensor *in[3] = {tf(4, (float[]){1, 2, 3, 4}), tf(4, (float[]){0.5f, -1, 1.5f, 2}),
                          tf(4, (float[]){1, 1, 1, 1})};
    hand(PEAT_OP_GEMM_FP8, &p, 3, in, 0, (double[]){2.75, 2.5, 4.75, 3.5}, 4);
    free_all(3, in);
}

Test(golden, hand_bias_add_bwd)
{
    /* R=2 C=2 S=2: dY = r0[c0: 1 2, c1: 3 4] r1[c0: 5 6, c1: 7 8]: db0 = 1+2+5+6 = 14,
     * db1 = 3+4+7+8 = 22 */
    peat_op_params p = {.i = {2, 2, 2}};
    peat_tensor *in[1] = {tf(8, (float[]){1, 2, 3, 4, 5, 6, 7, 8})};
    hand(PEAT_OP_BIAS_ADD_BWD, &p, 1, in, 0, (double[]){14, 22}, 2);
    free_all(1, in);
}

Test(golden, hand_relu)
{
    peat_op_params p = {.i = {4}};
    peat_tensor *in[1] = {tf(4, (float[]){-2, -0.0f, 0.5f, 3})};
    hand(PEAT_OP_RELU, &p, 1, in, 0, (double[]){0, 0, 0.5, 3}, 4);
    free_all(1, in);
    /* dX = dY where X > 0; X = 0 counts as not positive */
    peat_tensor *bw[2] = {tf(4, (float[]){-1, 0, 2, 3}), tf(4, (float[]){5, 6, 7, 8})};
    hand(PEAT_OP_RELU_BWD, &p, 2, bw, 0, (double[]){0, 0, 7, 8}, 4);
    free_all(2, bw);
}

Test(golden, hand_gelu)
{
    /* 0.5 x (1 + erf(x/sqrt2)) = x Phi(x): Phi(1) = 0.84134474606854293, Phi(2) =
     * 0.97724986805182079, Phi(-1) = 1 - Phi(1) */
    peat_op_params p = {.i = {4}};
    peat_tensor *in[1] = {tf(4, (float[]){0, 1, -1, 2})};
    hand(PEAT_OP_GELU, &p, 1, in, 0,
         (double[]){0, 0.8413447460685429, -0.15865525393145707, 1.9544997361036416}, 4);
    free_all(1, in);
    /* GELU'(x) = Phi(x) + x phi(x), phi(1) = 0.24197072451914337, phi(2) = 0.053990966513188063:
     * x=0: 0.5; x=1: 1.0833154705876864; x=-1: 0.15865525393145707 - 0.24197072451914337;
     * x=2: 0.97724986805182079 + 0.10798193302637613; times dY = [1, 2, 1, -1] */
    peat_tensor *bw[2] = {tf(4, (float[]){0, 1, -1, 2}), tf(4, (float[]){1, 2, 1, -1})};
    hand(PEAT_OP_GELU_BWD, &p, 2, bw, 0,
         (double[]){0.5, 2 * 1.0833154705876864, -0.08331547058768629, -1.085231801078197}, 4);
    free_all(2, bw);
}

Test(golden, hand_softmax)
{
    /* row 0 = [-1, 0, 1]: e^x / (e^-1 + 1 + e), S = 4.0861612696304874;
     * row 1 = [1000, 1000]: 1/2 each (only the max shift keeps exp from overflowing) */
    peat_op_params p = {.i = {1, 3}};
    peat_tensor *in[1] = {tf(3, (float[]){-1, 0, 1})};
    hand(PEAT_OP_SOFTMAX, &p, 1, in, 0,
         (double[]){0.09003057317038046, 0.24472847105479767, 0.6652409557748219}, 3);
    free_all(1, in);
    peat_op_params p2 = {.i = {1, 2}};
    peat_tensor *in2[1] = {tf(2, (float[]){1000, 1000})};
    hand(PEAT_OP_SOFTMAX, &p2, 1, in2, 0, (double[]){0.5, 0.5}, 2);
    free_all(1, in2);
}

Test(golden, hand_softmax_bwd)
{
    /* Y = [0.5 0.25 0.25], dY = [1 2 3]: sum dY Y = 0.5 + 0.5 + 0.75 = 1.75;
     * dX = [0.5 (1 - 1.75), 0.25 (2 - 1.75), 0.25 (3 - 1.75)] = [-0.375, 0.0625, 0.3125] */
    peat_op_params p = {.i = {1, 3}};
    peat_tensor *in[2] = {tf(3, (float[]){0.5f, 0.25f, 0.25f}), tf(3, (float[]){1, 2, 3})};
    hand(PEAT_OP_SOFTMAX_BWD, &p, 2, in, 0, (double[]){-0.375, 0.0625, 0.3125}, 3);
    free_all(2, in);
}

Test(golden, hand_layernorm)
{
    /* X = [1 2 3 4]: mean 2.5, biased var (2.25 + 0.25 + 0.25 + 2.25)/4 = 1.25,
     * rstd = 1/sqrt(1.25 + 1e-5) = 0.89442361331261800; xhat = [-1.5 -0.5 0.5 1.5] rstd;
     * gamma = [1 1 2 0.5], beta = [0 0 1 0] -> Y = [-1.5 r, -0.5 r, r + 1, 0.75 r] */
    peat_op_params p = {.i = {1, 4}, .f = {1e-5}};
    peat_tensor *in[3] = {tf(4, (float[]){1, 2, 3, 4}), tf(4, (float[]){1, 1, 2, 0.5f}),
                          tf(4, (float[]){0, 0, 1, 0})};
    hand(PEAT_OP_LAYERNORM, &p, 3, in, 0,
         (double[]){-1.3416354199689269, -0.447211806656309, 1.894423613312618, 0.6708177099844634},
         4);
    hand(PEAT_OP_LAYERNORM, &p, 3, in, 1, (double[]){2.5}, 1);
    hand(PEAT_OP_LAYERNORM, &p, 3, in, 2, (double[]){0.894423613312618}, 1);
    free_all(3, in);
}

Test(golden, hand_layernorm_bwd)
{
    /* X = [0 1 2] with given mean 1 and rstd 2: xhat = [-2 0 2]; gamma = [1 2 3], dY = [1 1 1]:
     * g = dY gamma = [1 2 3], mean(g) = 2, mean(g xhat) = (-2 + 0 + 6)/3 = 4/3;
     * dX = 2 (g - 2 - xhat 4/3) = 2 [-1 + 8/3, 0, 1 - 8/3] = [10/3, 0, -10/3];
     * dgamma = dY xhat = [-2 0 2], dbeta = dY = [1 1 1] (one row) */
    peat_op_params p = {.i = {1, 3}, .f = {1e-5}};
    peat_tensor *in[5] = {tf(3, (float[]){0, 1, 2}), tf(3, (float[]){1, 2, 3}), tf(1, (float[]){1}),
                          tf(1, (float[]){2}), tf(3, (float[]){1, 1, 1})};
    hand(PEAT_OP_LAYERNORM_BWD, &p, 5, in, 0, (double[]){10.0 / 3, 0, -10.0 / 3}, 3);
    hand(PEAT_OP_LAYERNORM_BWD, &p, 5, in, 1, (double[]){-2, 0, 2}, 3);
    hand(PEAT_OP_LAYERNORM_BWD, &p, 5, in, 2, (double[]){1, 1, 1}, 3);
    free_all(5, in);
}

Test(golden, hand_attention)
{
    /* B=H=1, T=2, D=1, scale 1: Q = [1, 1], K = [0, 1], V = [2, 4]. Scores of either query are
     * [0, 1]; unmasked: O = (2 + 4e)/(1 + e) = 3.4621171572600096, L = ln(1 + e) =
     * 1.3132616875182228 for both rows. Causal: row 0 sees key 0 only: O0 = 2, L0 = 0. */
    peat_tensor *in[3] = {tf(2, (float[]){1, 1}), tf(2, (float[]){0, 1}), tf(2, (float[]){2, 4})};
    peat_op_params p = {.i = {1, 1, 2, 1, 0}, .f = {1.0}};
    hand(PEAT_OP_ATTENTION, &p, 3, in, 0, (double[]){3.4621171572600096, 3.4621171572600096}, 2);
    hand(PEAT_OP_ATTENTION, &p, 3, in, 1, (double[]){1.3132616875182228, 1.3132616875182228}, 2);
    p.i[4] = 1;
    hand(PEAT_OP_ATTENTION, &p, 3, in, 0, (double[]){2, 3.4621171572600096}, 2);
    hand(PEAT_OP_ATTENTION, &p, 3, in, 1, (double[]){0, 1.3132616875182228}, 2);
    free_all(3, in);
}

Test(golden, hand_attention_bwd)
{
    /* Same head, causal, dO = [1, 0]: only query 0 carries gradient and it attends to key 0 alone
     * with P = exp(0 - L0) = 1: dV = P^T dO = [1, 0]; dP_00 = dO0 V0 = 2, Dl_0 = dO0 O0 = 2, so
     * dS = 0 and dQ = dK = 0. */
    peat_tensor *in[6] = {tf(2, (float[]){1, 1}),
                          tf(2, (float[]){0, 1}),
                          tf(2, (float[]){2, 4}),
                          tf(2, (float[]){2, 3.4621171572600096f}),
                          tf(2, (float[]){0, 1.3132616875182228f}),
                          tf(2, (float[]){1, 0})};
    peat_op_params p = {.i = {1, 1, 2, 1, 1}, .f = {1.0}};
    hand(PEAT_OP_ATTENTION_BWD, &p, 6, in, 0, (double[]){0, 0}, 2);
    hand(PEAT_OP_ATTENTION_BWD, &p, 6, in, 1, (double[]){0, 0}, 2);
    hand(PEAT_OP_ATTENTION_BWD, &p, 6, in, 2, (double[]){1, 0}, 2);
    /* Non-causal, T=2, D=1, Q = [0, 0] (uniform P = 1/2), L = ln 2, V = [1, 3] (O = 2),
     * dO = [1, 1]: dV_j = sum_i P_ij dO_i = 1 each; dP_ij = V_j = [1, 3], Dl_i = O_i = 2,
     * dS_ij = 0.5 ([1 3] - 2) = [-0.5, 0.5]; dQ_i = sum_j dS_ij K_j with K = [1, 2] -> 0.5;
     * dK_j = sum_i dS_ij Q_i = 0 */
    free_all(6, in);
    peat_tensor *in2[6] = {tf(2, (float[]){0, 0}),
                           tf(2, (float[]){1, 2}),
                           tf(2, (float[]){1, 3}),
                           tf(2, (float[]){2, 2}),
                           tf(2, (float[]){0.69314718055994531f, 0.69314718055994531f}),
                           tf(2, (float[]){1, 1})};
    p.i[4] = 0;
    /* L is ln 2 rounded to fp32, so P = 2^-1 exp(ln2 - fl(ln2)): the hand values hold to ~1e-8 */
    peat_args a = run_k("attention_bwd_exact", PEAT_OP_ATTENTION_BWD, &p, 6, in2);
    peat_args g = run_k("attention_bwd_golden", PEAT_OP_ATTENTION_BWD, &p, 6, in2);
    double want[3][2] = {{0.5, 0.5}, {0, 0}, {1, 1}};
    for (int o = 0; o < 3; o++)
        for (int i = 0; i < 2; i++) {
            cr_assert(fabs(peat_tensor_get(a.out[o], i) - want[o][i]) < 1e-7,
                      "exact out %d[%d] = %.17g, hand %g", o, i, peat_tensor_get(a.out[o], i),
                      want[o][i]);
            cr_assert(fabs(peat_tensor_get(g.out[o], i) - want[o][i]) < 1e-6,
                      "golden out %d[%d] = %.9g, hand %g", o, i, peat_tensor_get(g.out[o], i),
                      want[o][i]);
        }
    peat_args_free_outputs(&a);
    peat_args_free_outputs(&g);
    free_all(6, in2);
}

Test(golden, hand_embedding)
{
    /* table 3x2 = [[1 2] [3 4] [5 6]], idx = [2 0 2] -> [[5 6] [1 2] [5 6]] */
    peat_op_params p = {.i = {3, 3, 2}};
    peat_tensor *in[2] = {tf(6, (float[]){1, 2, 3, 4, 5, 6}), ti(3, (int32_t[]){2, 0, 2})};
    hand(PEAT_OP_EMBEDDING, &p, 2, in, 0, (double[]){5, 6, 1, 2, 5, 6}, 6);
    free_all(2, in);
    /* dY = [[1 2] [3 4] [5 6]] scattered by idx [2 0 2]: row 0 += [3 4], row 2 += [1 2] + [5 6],
     * row 1 untouched (must be written as 0) */
    peat_tensor *bw[2] = {ti(3, (int32_t[]){2, 0, 2}), tf(6, (float[]){1, 2, 3, 4, 5, 6})};
    hand(PEAT_OP_EMBEDDING_BWD, &p, 2, bw, 0, (double[]){3, 4, 0, 0, 6, 8}, 6);
    free_all(2, bw);
}

Test(golden, hand_cross_entropy)
{
    /* row 0 = [0 0 0], target 1: ln 3 = 1.0986122886681098;
     * row 1 = [1 2 3], target 2: ln(e + e^2 + e^3) - 3 = 0.40760596444438013 */
    peat_op_params p = {.i = {2, 3}};
    peat_tensor *in[2] = {tf(6, (float[]){0, 0, 0, 1, 2, 3}), ti(2, (int32_t[]){1, 2})};
    hand(PEAT_OP_CROSS_ENTROPY, &p, 2, in, 0, (double[]){1.0986122886681098, 0.40760596444438013},
         2);
    /* bwd, dloss = [2, 0]: row 0 = 2 (1/3 - [0 1 0]) = [2/3, -4/3, 2/3]; row 1 = 0 */
    peat_tensor *bw[3] = {in[0], in[1], tf(2, (float[]){2, 0})};
    hand(PEAT_OP_CROSS_ENTROPY_BWD, &p, 3, bw, 0, (double[]){2.0 / 3, -4.0 / 3, 2.0 / 3, 0, 0, 0},
         6);
    free_all(2, in);
    peat_tensor_free(bw[2]);
}

Test(golden, hand_reduce)
{
    /* X = [[1 2 3] [4 5 -6]]: sums [6 3], means [2 1] */
    peat_op_params p = {.i = {2, 3, 0}};
    peat_tensor *in[1] = {tf(6, (float[]){1, 2, 3, 4, 5, -6})};
    hand(PEAT_OP_REDUCE, &p, 1, in, 0, (double[]){6, 3}, 2);
    p.i[2] = 1;
    hand(PEAT_OP_REDUCE, &p, 1, in, 0, (double[]){2, 1}, 2);
    free_all(1, in);
}

Test(golden, hand_conv2d)
{
    /* 1x1x3x3 image 1..9, one 2x2 filter [[1 0] [0 -1]], stride 1, pad 0:
     * Y[i][j] = X[i][j] - X[i+1][j+1] = -4 everywhere (2x2) */
    peat_op_params p = {.i = {1, 1, 3, 3, 1, 2, 2, 1, 0}};
    peat_tensor *img = tf(9, (float[]){1, 2, 3, 4, 5, 6, 7, 8, 9});
    peat_tensor *in[2] = {img, tf(4, (float[]){1, 0, 0, -1})};
    hand(PEAT_OP_CONV2D, &p, 2, in, 0, (double[]){-4, -4, -4, -4}, 4);
    peat_tensor_free(in[1]);
    /* 3x3 ones filter, stride 2, pad 1: OH = (3 + 2 - 3)/2 + 1 = 2; each output sums the 2x2
     * in-image corner of its window: [1+2+4+5, 2+3+5+6, 4+5+7+8, 5+6+8+9] = [12 16 24 28] */
    peat_op_params q = {.i = {1, 1, 3, 3, 1, 3, 3, 2, 1}};
    float ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    peat_tensor *w1 = tf(9, ones);
    peat_tensor *in2[2] = {img, w1};
    hand(PEAT_OP_CONV2D, &q, 2, in2, 0, (double[]){12, 16, 24, 28}, 4);
    /* backward data of that conv with dY = [1 2 3 4]: each pixel collects the dY of the windows
     * covering it: corners 1,2,3,4; edges (0,1): 1+2, (1,0): 1+3, (1,2): 2+4, (2,1): 3+4;
     * centre: all four = 10 */
    peat_tensor *dy = tf(4, (float[]){1, 2, 3, 4});
    peat_tensor *bd[2] = {dy, w1};
    hand(PEAT_OP_CONV2D_BWD_DATA, &q, 2, bd, 0, (double[]){1, 3, 2, 4, 10, 6, 3, 7, 4}, 9);
    /* backward filter with dY = [1 0 0 0]: dW[kh][kw] = X[kh-1][kw-1] (zero outside) =
     * [[0 0 0] [0 1 2] [0 4 5]] */
    peat_tensor *dy1 = tf(4, (float[]){1, 0, 0, 0});
    peat_tensor *bf[2] = {img, dy1};
    hand(PEAT_OP_CONV2D_BWD_FILTER, &q, 2, bf, 0, (double[]){0, 0, 0, 0, 1, 2, 0, 4, 5}, 9);
    peat_tensor_free(img), peat_tensor_free(w1), peat_tensor_free(dy), peat_tensor_free(dy1);
}

Test(golden, hand_sgd)
{
    /* p = 1, g = 0.5, mom = 2, lr 0.1, momentum 0.9, wd 0.01:
     * mom' = 0.9*2 + 0.5 + 0.01*1 = 2.31 ; p' = 1 - 0.1*2.31 = 0.769 */
    peat_op_params p = {.i = {1}, .f = {0.1, 0.9, 0.01}};
    peat_tensor *in[3] = {tf(1, (float[]){1}), tf(1, (float[]){0.5f}), tf(1, (float[]){2})};
    hand(PEAT_OP_SGD, &p, 3, in, 0, (double[]){0.769}, 1);
    hand(PEAT_OP_SGD, &p, 3, in, 1, (double[]){2.31}, 1);
    free_all(3, in);
}

Test(golden, hand_sgd_nesterov)
{
    /* the same with nesterov: mom' = 2.31 as before; the step is (g + wd p) + momentum mom' =
     * 0.51 + 2.079 = 2.589 ; p' = 1 - 0.2589 = 0.7411 */
    peat_op_params p = {.i = {1, 1}, .f = {0.1, 0.9, 0.01}};
    peat_tensor *in[3] = {tf(1, (float[]){1}), tf(1, (float[]){0.5f}), tf(1, (float[]){2})};
    hand(PEAT_OP_SGD, &p, 3, in, 0, (double[]){0.7411}, 1);
    hand(PEAT_OP_SGD, &p, 3, in, 1, (double[]){2.31}, 1);
    free_all(3, in);
}

Test(golden, hand_adamw)
{
    /* step 1 from zero moments: p = 1, g = 0.5, lr 0.1, b1 0.9, b2 0.999, eps 1e-8, wd 0.01:
     * m' = 0.1*0.5 = 0.05, v' = 0.001*0.25 = 2.5e-4, mhat = 0.05/0.1 = 0.5, vhat = 2.5e-4/1e-3
     * = 0.25, p' = 1 - 0.1 (0.5/(0.5 + 1e-8) + 0.01) = 0.899000002 (to 1e-16) */
    peat_op_params p = {.i = {1, 1}, .f = {0.1, 0.9, 0.999, 1e-8, 0.01}};
    peat_tensor *in[4] = {tf(1, (float[]){1}), tf(1, (float[]){0.5f}), tf(1, (float[]){0}),
                          tf(1, (float[]){0})};
    hand(PEAT_OP_ADAMW, &p, 4, in, 0, (double[]){0.899000002}, 1);
    hand(PEAT_OP_ADAMW, &p, 4, in, 1, (double[]){0.05}, 1);
    hand(PEAT_OP_ADAMW, &p, 4, in, 2, (double[]){2.5e-4}, 1);
    free_all(4, in);
    /* step 2 with p = 1, g = -1, m = 0.05, v = 2.5e-4 (given as fp32, so the exact check uses the
     * formula on those fp32 values): m' = 0.045 - 0.1 = -0.055, v' = 0.999*2.5e-4 + 1e-3,
     * bias corrections 1 - 0.81 = 0.19 and 1 - 0.998001 = 0.001999 */
    p.i[1] = 2;
    float m0 = 0.05f, v0 = 2.5e-4f;
    double m1 = 0.9 * m0 + 0.1 * -1.0, v1 = 0.999 * v0 + 0.001 * 1.0;
    double p1 = 1.0 - 0.1 * ((m1 / 0.19) / (sqrt(v1 / 0.001999) + 1e-8) + 0.01 * 1.0);
    peat_tensor *in2[4] = {tf(1, (float[]){1}), tf(1, (float[]){-1}), tf(1, &m0), tf(1, &v0)};
    hand(PEAT_OP_ADAMW, &p, 4, in2, 0, (double[]){p1}, 1);
    hand(PEAT_OP_ADAMW, &p, 4, in2, 1, (double[]){m1}, 1);
    hand(PEAT_OP_ADAMW, &p, 4, in2, 2, (double[]){v1}, 1);
    /* by hand in decimal: mhat = -0.055/0.19 = -0.28947368, vhat = 0.00124975/0.001999 =
     * 0.62518759, sqrt = 0.79068805, p' = 1 - 0.1 (-0.36610255 + 0.01) = 1.03561035 */
    cr_assert(fabs(p1 - 1.0356103522) < 1e-6, "formula gives p' = %.10g, hand value 1.0356103522",
              p1);
    free_all(4, in2);
}

/* Runs golden (twice: it must be bit-reproducible) and exact on the case. */
static void run_pair(const gcase *c, peat_args *g, peat_args *e)
{
    char name[64];
    snprintf(name, sizeof name, "%s_golden", peat_op_name(c->op));
    *g = run_k(name, c->op, &c->p, c->n_in, c->in);
    peat_args g2 = run_k(name, c->op, &c->p, c->n_in, c->in);
    for (int o = 0; o < g->n_out; o++)
        cr_assert(memcmp(g->out[o]->data, g2.out[o]->data, peat_tensor_nbytes(g->out[o])) == 0,
                  "%s out %d differs between two runs on the same input", name, o);
    peat_args_free_outputs(&g2);
    snprintf(name, sizeof name, "%s_exact", peat_op_name(c->op));
    *e = run_k(name, c->op, &c->p, c->n_in, c->in);
}

Test(golden, golden_within_rounding_bound_of_exact)
{
    for (size_t k = 0; k < sizeof all_ops / sizeof all_ops[0]; k++)
        for (int variant = 0; variant < 2; variant++)
            for (uint64_t seed = 1; seed <= 3; seed++) {
                gcase c = make_case(all_ops[k], variant, 1000 * k + 10 * (uint64_t)variant + seed);
                peat_args g, e;
                run_pair(&c, &g, &e);
                for (int o = 0; o < e.n_out; o++) {
                    int64_t bad;
                    double w = bound_ratio(&c, &g, &e, o, 0, &bad);
                    cr_assert_eq(bad, 0,
                                 "%s (variant %d, seed %llu) out %d: %lld elements beyond "
                                 "gamma_K mag, worst |golden-exact| = %.3g x bound",
                                 peat_op_name(c.op), variant, (unsigned long long)seed, o,
                                 (long long)bad, w);
                }
                peat_args_free_outputs(&g);
                peat_args_free_outputs(&e);
                gcase_free(&c);
            }
}

/* The conv goldens (im2col + the golden GEMM's library) and the direct loops they replaced
 * (_plain), on the shapes the probes use (strides 1-3, pads 0-2, 1x1, a kernel as large as the
 * padded input, batch 1, odd sizes): each within gamma_K mag of exact in every direction, and
 * the two goldens different orders (their outputs differ somewhere). */
Test(golden, conv_goldens_within_bound_on_probe_shapes)
{
    static const int64_t shapes[][9] = {{2, 3, 7, 6, 4, 3, 3, 1, 1},  {1, 5, 9, 9, 3, 3, 3, 2, 0},
                                        {2, 4, 11, 7, 5, 3, 3, 3, 2}, {3, 8, 5, 5, 6, 1, 1, 1, 0},
                                        {1, 2, 4, 4, 3, 4, 4, 1, 0},  {1, 3, 5, 5, 2, 7, 7, 1, 1},
                                        {2, 16, 6, 6, 8, 3, 3, 1, 1}};
    static const peat_op_kind ops[3] = {PEAT_OP_CONV2D, PEAT_OP_CONV2D_BWD_DATA,
                                        PEAT_OP_CONV2D_BWD_FILTER};
    int differ = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int d = 0; d < 3; d++) {
            const int64_t *v = shapes[k];
            int64_t OH = (v[2] + 2 * v[8] - v[5]) / v[7] + 1,
                    OW = (v[3] + 2 * v[8] - v[6]) / v[7] + 1;
            gcase c;
            memset(&c, 0, sizeof c);
            c.op = ops[d];
            memcpy(c.p.i, v, 9 * sizeof *v);
            peat_rng_t *r = peat_rng_new(500 + 10 * k + (uint64_t)d);
            peat_tensor *x = rnd(r, v[0] * v[1] * v[2] * v[3], 0, 1);
            peat_tensor *w = rnd(r, v[4] * v[1] * v[5] * v[6], 0, 0.5);
            peat_tensor *dy = rnd(r, v[0] * v[4] * OH * OW, 0, 1);
            peat_rng_free(r);
            peat_tensor *in[3][2] = {{x, w}, {dy, w}, {x, dy}};
            c.n_in = 2, c.in[0] = in[d][0], c.in[1] = in[d][1];
            char ex[64], gold[64], plain[64];
            snprintf(ex, sizeof ex, "%s_exact", peat_op_name(c.op));
            snprintf(gold, sizeof gold, "%s_golden", peat_op_name(c.op));
            snprintf(plain, sizeof plain, "%s_plain", peat_op_name(c.op));
            peat_args e = run_k(ex, c.op, &c.p, 2, c.in), g = run_k(gold, c.op, &c.p, 2, c.in);
            peat_args q = run_k(plain, c.op, &c.p, 2, c.in);
            int64_t bad_g, bad_q;
            double wg = bound_ratio(&c, &g, &e, 0, 0, &bad_g),
                   wq = bound_ratio(&c, &q, &e, 0, 0, &bad_q);
            cr_assert(bad_g == 0 && bad_q == 0,
                      "%s shape %zu: %lld (golden, worst %.3g) and %lld (plain, worst %.3g) "
                      "elements beyond gamma_K mag",
                      peat_op_name(c.op), k, (long long)bad_g, wg, (long long)bad_q, wq);
            differ += memcmp(g.out[0]->data, q.out[0]->data, peat_tensor_nbytes(g.out[0])) != 0;
            peat_args_free_outputs(&e), peat_args_free_outputs(&g), peat_args_free_outputs(&q);
            peat_tensor_free(x), peat_tensor_free(w), peat_tensor_free(dy);
        }
    cr_assert_gt(differ, 0, "the im2col golden gave the direct loops' bits on every shape");
}

/* The bound must not be vacuous: the same outputs stored in bf16 (8-bit significand) break it
 * for every op and output, or a candidate that loses precision would pass unnoticed. */
Test(golden, bf16_storage_breaks_the_bound)
{
    for (size_t k = 0; k < sizeof all_ops / sizeof all_ops[0]; k++) {
        gcase c = make_case(all_ops[k], 0, 77 + k);
        peat_args g, e;
        run_pair(&c, &g, &e);
        for (int o = 0; o < e.n_out; o++) {
            int64_t bad;
            double w = bound_ratio(&c, &g, &e, o, 1, &bad);
            cr_assert(bad > 0,
                      "%s out %d: bf16-rounded golden stays within gamma_K mag (worst "
                      "%.3g x bound): the magnitude is too loose",
                      peat_op_name(c.op), o, w);
        }
        peat_args_free_outputs(&g);
        peat_args_free_outputs(&e);
        gcase_free(&c);
    }
}

Test(golden, hand_rmsnorm)
{
    /* X = [1 2 3 4]: mean square (1 + 4 + 9 + 16)/4 = 7.5, rstd = 1/sqrt(7.5 + 1e-6)
     * = 0.36514834992107; gamma = [1 1 2 0.5] -> Y = [r, 2r, 6r, 2r] */
    peat_op_params p = {.i = {1, 4}, .f = {1e-6}};
    peat_tensor *in[2] = {tf(4, (float[]){1, 2, 3, 4}), tf(4, (float[]){1, 1, 2, 0.5f})};
    double r = 1.0 / sqrt(7.5 + 1e-6);
    hand(PEAT_OP_RMSNORM, &p, 2, in, 0, (double[]){r, 2 * r, 6 * r, 2 * r}, 4);
    hand(PEAT_OP_RMSNORM, &p, 2, in, 1, (double[]){r}, 1);
    free_all(2, in);
}

Test(golden, hand_rmsnorm_bwd)
{
    /* X = [1 -1 2] with given rstd 0.5; gamma = [1 2 1], dY = [1 1 2]: g = [1 2 2],
     * mean(g x) = (1 - 2 + 4)/3 = 1; dX = 0.5 (g - x 0.25 1) = 0.5 [0.75, 2.25, 1.5]
     * = [0.375, 1.125, 0.75]; dgamma = dY x rstd = [0.5, -0.5, 2] (one row) */
    peat_op_params p = {.i = {1, 3}, .f = {1e-6}};
    peat_tensor *in[4] = {tf(3, (float[]){1, -1, 2}), tf(3, (float[]){1, 2, 1}),
                          tf(1, (float[]){0.5f}), tf(3, (float[]){1, 1, 2})};
    hand(PEAT_OP_RMSNORM_BWD, &p, 4, in, 0, (double[]){0.375, 1.125, 0.75}, 3);
    hand(PEAT_OP_RMSNORM_BWD, &p, 4, in, 1, (double[]){0.5, -0.5, 2}, 3);
    free_all(4, in);
}

Test(golden, hand_silu_and_swiglu)
{
    /* sigmoid(0) = 1/2, sigmoid(2) = 1/(1 + e^-2) = 0.8807970779778823, sigmoid(-2) = 1 - that:
     * silu = [0, 1.7615941559557646, -0.2384058440442351]; swiglu with U = [3, 2, -1] */
    double s2 = 1.0 / (1.0 + exp(-2.0));
    peat_op_params p = {.i = {3}};
    peat_tensor *x = tf(3, (float[]){0, 2, -2}), *u = tf(3, (float[]){3, 2, -1});
    hand(PEAT_OP_SILU, &p, 1, (peat_tensor *[]){x}, 0, (double[]){0, 2 * s2, -2 * (1 - s2)}, 3);
    hand(PEAT_OP_SWIGLU, &p, 2, (peat_tensor *[]){x, u}, 0, (double[]){0, 4 * s2, 2 * (1 - s2)}, 3);
    /* silu'(0) = 1/2; silu'(2) = s (1 + 2 (1 - s)); with dY = U */
    double d2 = s2 * (1 + 2 * (1 - s2)), dm2 = (1 - s2) * (1 - 2 * s2);
    hand(PEAT_OP_SILU_BWD, &p, 2, (peat_tensor *[]){x, u}, 0, (double[]){1.5, 2 * d2, -dm2}, 3);
    /* swiglu backward with dY = [1 1 1]: dG = U silu'(G), dU = silu(G) */
    peat_tensor *one = tf(3, (float[]){1, 1, 1});
    hand(PEAT_OP_SWIGLU_BWD, &p, 3, (peat_tensor *[]){x, u, one}, 0, (double[]){1.5, 2 * d2, -dm2},
         3);
    hand(PEAT_OP_SWIGLU_BWD, &p, 3, (peat_tensor *[]){x, u, one}, 1,
         (double[]){0, 2 * s2, -2 * (1 - s2)}, 3);
    peat_tensor_free(x), peat_tensor_free(u), peat_tensor_free(one);
}

Test(golden, hand_rope)
{
    /* one head, T = 2, D = 4, base 10000, half-split pairs (x[j], x[j+2]): j = 0 rotates by the
     * position t (frequency 1), j = 1 by t / 100 (10000^(-2/4)). Row 0 (t = 0) is unchanged;
     * row 1, X = [1 0 0 1]: pair 0 (1, 0) -> (cos 1, sin 1), pair 1 (0, 1) -> (-sin .01, cos .01).
     * Interleaved pairs (x[0], x[1]) and (x[2], x[3]) of the same row: (1, 0) -> (cos 1, sin 1)
     * and (0, 1) -> (-sin .01, cos .01) in the order x0 x1 x2 x3. The backward rotates back. */
    peat_op_params p = {.i = {1, 1, 2, 4, 1, 0}, .f = {10000.0}};
    peat_tensor *x = tf(8, (float[]){1, 2, 3, 4, 1, 0, 0, 1});
    double c1 = cos(1.0), s1 = sin(1.0), c2 = cos(0.01), s2 = sin(0.01);
    hand(PEAT_OP_ROPE, &p, 1, (peat_tensor *[]){x}, 0, (double[]){1, 2, 3, 4, c1, -s2, s1, c2}, 8);
    hand(PEAT_OP_ROPE_BWD, &p, 1, (peat_tensor *[]){x}, 0, (double[]){1, 2, 3, 4, c1, s2, -s1, c2},
         8);
    p.i[4] = 0;
    hand(PEAT_OP_ROPE, &p, 1, (peat_tensor *[]){x}, 0, (double[]){1, 2, 3, 4, c1, s1, -s2, c2}, 8);
    peat_tensor_free(x);
}

/* ---- backward ops against central differences of the exact forward op -------------------- */

/* J(inputs) = sum_i wt[i] * out0[i] of exact forward `fwd` run on F64 inputs. */
static double objective(const peat_kernel *k, peat_args *a, const double *wt)
{
    peat_status s = peat_kernel_run(k, a);
    cr_assert_eq(s, PEAT_OK, "%s: %s", k->name, peat_error_last());
    double J = 0.0;
    for (int64_t i = 0; i < peat_tensor_numel(a->out[0]); i++) J += wt[i] * peat_f64(a->out[0])[i];
    return J;
}

/* Compares analytic dJ/d(in[wrt]) (an F64 output of the exact backward kernel) with central
 * differences of the exact forward op, in double: h = 1e-5 leaves a truncation error ~h^2 and a
 * cancellation error ~1e-16 |J| / h, both far below the 1e-6 tolerance, while a wrong term in a
 * backward formula shows up at the size of the gradient itself. */
static void fd_check(const char *fwd, const peat_op_params *p, int n_in, peat_tensor *const *in,
                     int wrt, const double *wt, const peat_tensor *analytic, const char *what)
{
    const peat_kernel *k = kern(fwd);
    peat_tensor *x[PEAT_MAX_IO];
    for (int j = 0; j < n_in; j++) x[j] = to_f64(in[j]);
    peat_args a = peat_args_make(k->op, p, n_in, (const peat_tensor *const *)x, 0, NULL);
    cr_assert_eq(peat_op_alloc_outputs(&a, PEAT_DTYPE_F64), PEAT_OK, "alloc");
    int64_t n = peat_tensor_numel(x[wrt]);
    cr_assert_eq(peat_tensor_numel(analytic), n, "%s: gradient has %lld elements, input %lld", what,
                 (long long)peat_tensor_numel(analytic), (long long)n);
    double scale = 1.0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(peat_tensor_get(analytic, i)));
    const double h = 1e-5;
    for (int64_t i = 0; i < n; i++) {
        double *xi = &peat_f64(x[wrt])[i], x0 = *xi;
        *xi = x0 + h;
        double jp = objective(k, &a, wt);
        *xi = x0 - h;
        double jm = objective(k, &a, wt);
        *xi = x0;
        double fd = (jp - jm) / (2 * h), an = peat_tensor_get(analytic, i);
        cr_assert(fabs(fd - an) <= 1e-6 * scale,
                  "%s[%lld]: backward gives %.10g, central "
                  "difference of %s gives %.10g",
                  what, (long long)i, an, fwd, fd);
    }
    peat_args_free_outputs(&a);
    free_all(n_in, x);
}

static double *weights(peat_rng_t *r, int64_t n)
{
    double *w = malloc((size_t)n * sizeof *w);
    cr_assert_not_null(w, "weights");
    for (int64_t i = 0; i < n; i++) w[i] = peat_rng_gaussian(r, 1.0);
    return w;
}
/* dY for a backward call: the FD weights as an F64 tensor. */
static peat_tensor *wt_tensor(const double *w, int64_t n)
{
    peat_tensor *t = NULL;
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F64, n, &t), PEAT_OK, "alloc");
    memcpy(t->data, w, (size_t)n * sizeof *w);
    return t;
}
/* Runs exact kernel `name` on F64 copies of in[] (I32 kept). */
static peat_args run_exact64(const char *name, peat_op_kind op, const peat_op_params *p, int n_in,
                             peat_tensor *const *in)
{
    peat_tensor *x[PEAT_MAX_IO];
    for (int j = 0; j < n_in; j++) x[j] = in[j]->dtype == PEAT_DTYPE_F64 ? in[j] : to_f64(in[j]);
    peat_args a = run_k(name, op, p, n_in, x);
    for (int j = 0; j < n_in; j++)
        if (x[j] != in[j]) peat_tensor_free(x[j]);
    return a;
}

Test(golden, fd_conv2d_bwd_data_and_filter)
{
    peat_rng_t *r = peat_rng_new(11);
    /* stride 2 pad 1; stride 1 pad 0; stride 2 with an input row no window reaches (H=6, K=3) */
    int64_t cfg[3][9] = {
        {2, 2, 5, 4, 3, 3, 3, 2, 1}, {1, 2, 4, 5, 2, 2, 3, 1, 0}, {1, 1, 6, 6, 2, 3, 3, 2, 0}};
    for (int c = 0; c < 3; c++) {
        peat_op_params p;
        memset(&p, 0, sizeof p);
        memcpy(p.i, cfg[c], sizeof cfg[c]);
        int64_t N = p.i[0], C = p.i[1], H = p.i[2], W = p.i[3], O = p.i[4], KH = p.i[5],
                KW = p.i[6];
        int64_t OH = (H + 2 * p.i[8] - KH) / p.i[7] + 1, OW = (W + 2 * p.i[8] - KW) / p.i[7] + 1;
        peat_tensor *in[2] = {rnd(r, N * C * H * W, 0, 1), rnd(r, O * C * KH * KW, 0, 1)};
        double *w = weights(r, N * O * OH * OW);
        peat_tensor *dy = wt_tensor(w, N * O * OH * OW);
        peat_tensor *bd[2] = {dy, in[1]}, *bf[2] = {in[0], dy};
        peat_args d = run_exact64("conv2d_bwd_data_exact", PEAT_OP_CONV2D_BWD_DATA, &p, 2, bd);
        fd_check("conv2d_exact", &p, 2, in, 0, w, d.out[0], "conv2d dX");
        peat_args f = run_exact64("conv2d_bwd_filter_exact", PEAT_OP_CONV2D_BWD_FILTER, &p, 2, bf);
        fd_check("conv2d_exact", &p, 2, in, 1, w, f.out[0], "conv2d dW");
        peat_args_free_outputs(&d), peat_args_free_outputs(&f);
        peat_tensor_free(dy), free(w), free_all(2, in);
    }
    peat_rng_free(r);
}

Test(golden, fd_bias_add_bwd)
{
    peat_rng_t *r = peat_rng_new(12);
    peat_op_params p = {.i = {3, 4, 5}};
    peat_tensor *in[2] = {rnd(r, 60, 0, 1), rnd(r, 4, 0, 1)};
    double *w = weights(r, 60);
    peat_tensor *dy = wt_tensor(w, 60);
    peat_args b = run_exact64("bias_add_bwd_exact", PEAT_OP_BIAS_ADD_BWD, &p, 1, &dy);
    fd_check("bias_add_exact", &p, 2, in, 1, w, b.out[0], "bias_add db");
    peat_args_free_outputs(&b), peat_tensor_free(dy), free(w), free_all(2, in);
    peat_rng_free(r);
}

Test(golden, fd_relu_and_gelu_bwd)
{
    peat_rng_t *r = peat_rng_new(13);
    peat_op_params p = {.i = {64}};
    /* ReLU: inputs at least 0.1 away from the kink, where the central difference is exact */
    peat_tensor *x = rnd(r, 64, 0, 2);
    for (int i = 0; i < 64; i++) {
        float v = peat_f32(x)[i];
        peat_f32(x)[i] = v >= 0 ? v + 0.1f : v - 0.1f;
    }
    double *w = weights(r, 64);
    peat_tensor *dy = wt_tensor(w, 64);
    peat_tensor *bw[2] = {x, dy};
    peat_args a = run_exact64("relu_bwd_exact", PEAT_OP_RELU_BWD, &p, 2, bw);
    fd_check("relu_exact", &p, 1, &x, 0, w, a.out[0], "relu dX");
    peat_args_free_outputs(&a);
    peat_args g = run_exact64("gelu_bwd_exact", PEAT_OP_GELU_BWD, &p, 2, bw);
    fd_check("gelu_exact", &p, 1, &x, 0, w, g.out[0], "gelu dX");
    peat_args_free_outputs(&g), peat_tensor_free(dy), free(w), peat_tensor_free(x);
    peat_rng_free(r);
}

Test(golden, fd_softmax_bwd)
{
    peat_rng_t *r = peat_rng_new(14);
    peat_op_params p = {.i = {3, 7}};
    peat_tensor *x = rnd(r, 21, 0, 2);
    double *w = weights(r, 21);
    peat_args y = run_exact64("softmax_exact", PEAT_OP_SOFTMAX, &p, 1, &x);
    peat_tensor *dy = wt_tensor(w, 21);
    peat_tensor *bw[2] = {y.out[0], dy};
    peat_args b = run_exact64("softmax_bwd_exact", PEAT_OP_SOFTMAX_BWD, &p, 2, bw);
    fd_check("softmax_exact", &p, 1, &x, 0, w, b.out[0], "softmax dX");
    peat_args_free_outputs(&b), peat_args_free_outputs(&y), peat_tensor_free(dy), free(w);
    peat_tensor_free(x), peat_rng_free(r);
}

Test(golden, fd_layernorm_bwd)
{
    peat_rng_t *r = peat_rng_new(15);
    peat_op_params p = {.i = {3, 6}, .f = {1e-5}};
    peat_tensor *in[3] = {rnd(r, 18, 0.5, 1), rnd(r, 6, 1, 0.3), rnd(r, 6, 0, 0.5)};
    double *w = weights(r, 18);
    /* the backward reads the forward's mean and rstd: pass them in double */
    peat_args y = run_exact64("layernorm_exact", PEAT_OP_LAYERNORM, &p, 3, in);
    peat_tensor *dy = wt_tensor(w, 18), *g64 = to_f64(in[1]), *x64 = to_f64(in[0]);
    peat_tensor *bw[5] = {x64, g64, y.out[1], y.out[2], dy};
    peat_args b = run_exact64("layernorm_bwd_exact", PEAT_OP_LAYERNORM_BWD, &p, 5, bw);
    fd_check("layernorm_exact", &p, 3, in, 0, w, b.out[0], "layernorm dX");
    fd_check("layernorm_exact", &p, 3, in, 1, w, b.out[1], "layernorm dgamma");
    fd_check("layernorm_exact", &p, 3, in, 2, w, b.out[2], "layernorm dbeta");
    peat_args_free_outputs(&b), peat_args_free_outputs(&y), peat_tensor_free(dy);
    peat_tensor_free(g64), peat_tensor_free(x64), free(w), free_all(3, in), peat_rng_free(r);
}

Test(golden, fd_rmsnorm_bwd)
{
    peat_rng_t *r = peat_rng_new(17);
    peat_op_params p = {.i = {3, 6}, .f = {1e-6}};
    peat_tensor *in[2] = {rnd(r, 18, 0.5, 1), rnd(r, 6, 1, 0.3)};
    double *w = weights(r, 18);
    /* the backward reads the forward's rstd: pass it in double */
    peat_args y = run_exact64("rmsnorm_exact", PEAT_OP_RMSNORM, &p, 2, in);
    peat_tensor *dy = wt_tensor(w, 18), *g64 = to_f64(in[1]), *x64 = to_f64(in[0]);
    peat_tensor *bw[4] = {x64, g64, y.out[1], dy};
    peat_args b = run_exact64("rmsnorm_bwd_exact", PEAT_OP_RMSNORM_BWD, &p, 4, bw);
    fd_check("rmsnorm_exact", &p, 2, in, 0, w, b.out[0], "rmsnorm dX");
    fd_check("rmsnorm_exact", &p, 2, in, 1, w, b.out[1], "rmsnorm dgamma");
    peat_args_free_outputs(&b), peat_args_free_outputs(&y), peat_tensor_free(dy);
    peat_tensor_free(g64), peat_tensor_free(x64), free(w), free_all(2, in), peat_rng_free(r);
}

Test(golden, fd_silu_and_swiglu_bwd)
{
    peat_rng_t *r = peat_rng_new(18);
    peat_op_params p = {.i = {40}};
    peat_tensor *in[2] = {rnd(r, 40, 0, 3), rnd(r, 40, 0, 1)};
    double *w = weights(r, 40);
    peat_tensor *dy = wt_tensor(w, 40), *g64 = to_f64(in[0]), *u64 = to_f64(in[1]);
    peat_args b =
        run_exact64("silu_bwd_exact", PEAT_OP_SILU_BWD, &p, 2, (peat_tensor *[]){g64, dy});
    fd_check("silu_exact", &p, 1, in, 0, w, b.out[0], "silu dX");
    peat_args_free_outputs(&b);
    b = run_exact64("swiglu_bwd_exact", PEAT_OP_SWIGLU_BWD, &p, 3, (peat_tensor *[]){g64, u64, dy});
    fd_check("swiglu_exact", &p, 2, in, 0, w, b.out[0], "swiglu dG");
    fd_check("swiglu_exact", &p, 2, in, 1, w, b.out[1], "swiglu dU");
    peat_args_free_outputs(&b), peat_tensor_free(dy), peat_tensor_free(g64), peat_tensor_free(u64);
    free(w), free_all(2, in), peat_rng_free(r);
}

Test(golden, fd_rope_bwd)
{
    peat_rng_t *r = peat_rng_new(19);
    for (int lay = 0; lay < 2; lay++) {
        peat_op_params p = {.i = {1, 2, 3, 6, lay, 5}, .f = {10000.0}};
        peat_tensor *in[1] = {rnd(r, 36, 0, 1)};
        double *w = weights(r, 36);
        peat_tensor *dy = wt_tensor(w, 36);
        peat_args b = run_exact64("rope_bwd_exact", PEAT_OP_ROPE_BWD, &p, 1, (peat_tensor *[]){dy});
        fd_check("rope_exact", &p, 1, in, 0, w, b.out[0], lay ? "rope dX (half)" : "rope dX");
        peat_args_free_outputs(&b), peat_tensor_free(dy), free(w), free_all(1, in);
    }
    peat_rng_free(r);
}

/* Grouped-query attention (4 query heads over 2 K/V heads, and over 1): the goldens within the
 * bound of the exact kernels, forward and backward; the backward's dK, dV (a sum over each
 * group's query heads) against central differences of the exact forward. */
static void gqa_bound(const gcase *c, const peat_args *t, const peat_args *e, const char *who)
{
    for (int o = 0; o < e->n_out; o++) {
        int64_t bad;
        double w = bound_ratio(c, t, e, o, 0, &bad);
        cr_assert_eq(bad, 0,
                     "%s (%lld K/V heads) out %d: %lld elements beyond the bound (worst %.3g)", who,
                     (long long)c->p.i[5], o, (long long)bad, w);
    }
}

Test(golden, gqa_within_bound_and_backward_by_central_differences)
{
    for (int64_t hkv = 2; hkv >= 1; hkv--) {
        peat_rng_t *r = peat_rng_new(40 + (uint64_t)hkv);
        int64_t B = 2, H = 4, T = 7, D = 8, n = B * H * T * D, nkv = B * hkv * T * D;
        gcase c = {.op = PEAT_OP_ATTENTION, .n_in = 3};
        int64_t v[6] = {B, H, T, D, 1, hkv};
        memcpy(c.p.i, v, sizeof v);
        c.p.f[0] = 1.0 / sqrt((double)D);
        c.in[0] = rnd(r, n, 0, 1.5), c.in[1] = rnd(r, nkv, 0, 1.5), c.in[2] = rnd(r, nkv, 0, 1);
        peat_args g, e;
        run_pair(&c, &g, &e);
        gqa_bound(&c, &g, &e, "attention_golden");
        /* the backward on the golden forward's O and L */
        gcase cb = {.op = PEAT_OP_ATTENTION_BWD, .p = c.p, .n_in = 6};
        cb.in[0] = c.in[0], cb.in[1] = c.in[1], cb.in[2] = c.in[2];
        cb.in[3] = g.out[0], cb.in[4] = g.out[1], cb.in[5] = rnd(r, n, 0, 1);
        peat_args gb, eb;
        run_pair(&cb, &gb, &eb);
        gqa_bound(&cb, &gb, &eb, "attention_bwd_golden");
        /* dK and dV by central differences of sum(dO . O) through the exact forward: O from
         * exact-in-double inputs, L from them too, so the backward reads consistent values */
        double *w = malloc((size_t)n * sizeof *w);
        cr_assert_not_null(w, "weights");
        for (int64_t i = 0; i < n; i++) w[i] = peat_f32(cb.in[5])[i];
        peat_args y = run_exact64("attention_exact", PEAT_OP_ATTENTION, &c.p, 3, c.in);
        peat_tensor *x[3] = {to_f64(c.in[0]), to_f64(c.in[1]), to_f64(c.in[2])};
        peat_tensor *dO = wt_tensor(w, n);
        peat_tensor *bw[6] = {x[0], x[1], x[2], y.out[0], y.out[1], dO};
        peat_args b = run_exact64("attention_bwd_exact", PEAT_OP_ATTENTION_BWD, &c.p, 6, bw);
        fd_check("attention_exact", &c.p, 3, c.in, 0, w, b.out[0], "GQA dQ");
        fd_check("attention_exact", &c.p, 3, c.in, 1, w, b.out[1], "GQA dK");
        fd_check("attention_exact", &c.p, 3, c.in, 2, w, b.out[2], "GQA dV");
        peat_args_free_outputs(&b), peat_args_free_outputs(&y), peat_tensor_free(dO);
        free_all(3, x), free(w);
        peat_args_free_outputs(&gb), peat_args_free_outputs(&eb);
        peat_tensor_free(cb.in[5]);
        peat_args_free_outputs(&g), peat_args_free_outputs(&e);
        gcase_free(&c), peat_rng_free(r);
    }
}

Test(golden, fd_batchnorm_and_pool_bwd)
{
    peat_rng_t *r = peat_rng_new(20);
    /* batch norm: dX, dgamma, dbeta of sum(w Y) through the exact forward */
    peat_op_params p = {.i = {2, 3, 5}, .f = {1e-5, 0.1}};
    peat_tensor *in[5] = {rnd(r, 30, 0.5, 1), rnd(r, 3, 1, 0.3), rnd(r, 3, 0, 0.5), rnd(r, 3, 0, 1),
                          tf(3, (float[]){1, 1, 1})};
    double *w = weights(r, 30);
    peat_args y = run_exact64("batchnorm_exact", PEAT_OP_BATCHNORM, &p, 5, in);
    peat_tensor *dy = wt_tensor(w, 30), *x64 = to_f64(in[0]), *g64 = to_f64(in[1]);
    peat_tensor *bw[5] = {x64, g64, y.out[1], y.out[2], dy};
    peat_args b = run_exact64("batchnorm_bwd_exact", PEAT_OP_BATCHNORM_BWD, &p, 5, bw);
    fd_check("batchnorm_exact", &p, 5, in, 0, w, b.out[0], "batchnorm dX");
    fd_check("batchnorm_exact", &p, 5, in, 1, w, b.out[1], "batchnorm dgamma");
    fd_check("batchnorm_exact", &p, 5, in, 2, w, b.out[2], "batchnorm dbeta");
    peat_args_free_outputs(&b), peat_args_free_outputs(&y), peat_tensor_free(dy);
    peat_tensor_free(x64), peat_tensor_free(g64), free(w), free_all(5, in);
    /* pooling, 3x3 windows stride 2 pad 1 over 7x6 (overlapping): OH 4, OW 3 */
    peat_op_params q = {.i = {1, 2, 7, 6, 3, 2, 1}};
    peat_tensor *x[1] = {rnd(r, 84, 0, 1)};
    w = weights(r, 24);
    dy = wt_tensor(w, 24);
    x64 = to_f64(x[0]);
    b = run_exact64("maxpool2d_bwd_exact", PEAT_OP_MAXPOOL2D_BWD, &q, 2,
                    (peat_tensor *[]){x64, dy});
    fd_check("maxpool2d_exact", &q, 1, x, 0, w, b.out[0], "maxpool2d dX");
    peat_args_free_outputs(&b);
    b = run_exact64("avgpool2d_bwd_exact", PEAT_OP_AVGPOOL2D_BWD, &q, 1, (peat_tensor *[]){dy});
    fd_check("avgpool2d_exact", &q, 1, x, 0, w, b.out[0], "avgpool2d dX");
    peat_args_free_outputs(&b), peat_tensor_free(dy), peat_tensor_free(x64), free(w);
    free_all(1, x), peat_rng_free(r);
}

Test(golden, fd_attention_bwd)
{
    peat_rng_t *r = peat_rng_new(16);
    for (int causal = 0; causal < 2; causal++) {
        int64_t B = 1, H = 2, T = 4, D = 3, n = B * H * T * D;
        peat_op_params p = {.i = {B, H, T, D, causal}, .f = {0.7}};
        peat_tensor *in[3] = {rnd(r, n, 0, 1), rnd(r, n, 0, 1), rnd(r, n, 0, 1)};
        double *w = weights(r, n);
        peat_args y = run_exact64("attention_exact", PEAT_OP_ATTENTION, &p, 3, in);
        peat_tensor *dO = wt_tensor(w, n);
        peat_tensor *q = to_f64(in[0]), *k = to_f64(in[1]), *v = to_f64(in[2]);
        peat_tensor *bw[6] = {q, k, v, y.out[0], y.out[1], dO};
        peat_args b = run_exact64("attention_bwd_exact", PEAT_OP_ATTENTION_BWD, &p, 6, bw);
        fd_check("attention_exact", &p, 3, in, 0, w, b.out[0], causal ? "causal dQ" : "dQ");
        fd_check("attention_exact", &p, 3, in, 1, w, b.out[1], causal ? "causal dK" : "dK");
        fd_check("attention_exact", &p, 3, in, 2, w, b.out[2], causal ? "causal dV" : "dV");
        peat_args_free_outputs(&b), peat_args_free_outputs(&y), peat_tensor_free(dO);
        peat_tensor_free(q), peat_tensor_free(k), peat_tensor_free(v), free(w), free_all(3, in);
    }
    peat_rng_free(r);
}

Test(golden, fd_embedding_bwd)
{
    peat_rng_t *r = peat_rng_new(17);
    /* idx repeats row 3 and never uses rows 0 and 4 (their gradient must be 0) */
    peat_op_params p = {.i = {5, 5, 3}};
    peat_tensor *in[2] = {rnd(r, 15, 0, 1), ti(5, (int32_t[]){3, 1, 3, 2, 3})};
    double *w = weights(r, 15);
    peat_tensor *dy = wt_tensor(w, 15);
    peat_tensor *bw[2] = {in[1], dy};
    peat_args b = run_exact64("embedding_bwd_exact", PEAT_OP_EMBEDDING_BWD, &p, 2, bw);
    fd_check("embedding_exact", &p, 2, in, 0, w, b.out[0], "embedding dtable");
    peat_args_free_outputs(&b), peat_tensor_free(dy), free(w), free_all(2, in), peat_rng_free(r);
}

Test(golden, fd_cross_entropy_bwd)
{
    peat_rng_t *r = peat_rng_new(18);
    peat_op_params p = {.i = {4, 6}};
    peat_tensor *in[2] = {rnd(r, 24, 0, 2), ti(4, (int32_t[]){0, 5, 2, 2})};
    double *w = weights(r, 4);
    peat_tensor *dl = wt_tensor(w, 4);
    peat_tensor *bw[3] = {in[0], in[1], dl};
    peat_args b = run_exact64("cross_entropy_bwd_exact", PEAT_OP_CROSS_ENTROPY_BWD, &p, 3, bw);
    fd_check("cross_entropy_exact", &p, 2, in, 0, w, b.out[0], "cross_entropy dlogits");
    peat_args_free_outputs(&b), peat_tensor_free(dl), free(w), free_all(2, in), peat_rng_free(r);
}

/* ---- optimizers: outputs aliasing inputs ---------------------------------------------------- */

/* Runs `name` once into fresh outputs and once in place (out[o] wraps the data of in[alias[o]]);
 * both must agree bit for bit. */
static void alias_check(const char *name, const gcase *c, const int *alias, int n_out)
{
    const peat_kernel *k = kern(name);
    peat_tensor *x[PEAT_MAX_IO], *y[PEAT_MAX_IO];
    for (int j = 0; j < c->n_in; j++) x[j] = k->role == PEAT_ROLE_EXACT ? to_f64(c->in[j]) : NULL;
    if (k->role != PEAT_ROLE_EXACT)
        for (int j = 0; j < c->n_in; j++)
            cr_assert_eq(peat_tensor_clone(c->in[j], &x[j]), PEAT_OK, "clone");
    peat_args ref = run_k(name, c->op, &c->p, c->n_in, x);
    for (int o = 0; o < n_out; o++) {
        peat_tensor *src = x[alias[o]];
        cr_assert_eq(peat_tensor_wrap(src->dtype, src->ndim, src->shape, src->data, &y[o]), PEAT_OK,
                     "wrap");
    }
    peat_args a = peat_args_make(c->op, &c->p, c->n_in, (const peat_tensor *const *)x, n_out, y);
    cr_assert_eq(peat_kernel_run(k, &a), PEAT_OK, "%s in place: %s", name, peat_error_last());
    for (int o = 0; o < n_out; o++)
        cr_assert(memcmp(y[o]->data, ref.out[o]->data, peat_tensor_nbytes(y[o])) == 0,
                  "%s: in-place output %d differs from the out-of-place one", name, o);
    free_all(n_out, y);
    peat_args_free_outputs(&ref);
    free_all(c->n_in, x);
}

Test(golden, optimizer_outputs_may_alias_inputs)
{
    gcase a = make_case(PEAT_OP_ADAMW, 0, 21), s = make_case(PEAT_OP_SGD, 0, 22);
    int adamw_alias[3] = {0, 2, 3}, sgd_alias[2] = {0, 2};
    alias_check("adamw_golden", &a, adamw_alias, 3);
    alias_check("adamw_exact", &a, adamw_alias, 3);
    alias_check("sgd_golden", &s, sgd_alias, 2);
    alias_check("sgd_exact", &s, sgd_alias, 2);
    gcase_free(&a), gcase_free(&s);
}

/* ---- refusals ------------------------------------------------------------------------------- */

/* Runs kernel `name` with outputs of its own dtype shaped for p_out and expects status want. */
static void expect_refused(const char *name, const peat_op_params *p, int n_in,
                           peat_tensor *const *in, peat_status want, const char *why)
{
    const peat_kernel *k = kern(name);
    peat_args a = peat_args_make(k->op, p, n_in, (const peat_tensor *const *)in, 0, NULL);
    peat_status s = peat_op_alloc_outputs(&a, k->out_dtype);
    if (s == PEAT_OK) s = peat_kernel_run(k, &a);
    cr_assert_eq(s, want, "%s with %s: status %s, expected %s (%s)", name, why, peat_status_str(s),
                 peat_status_str(want), peat_error_last());
    peat_args_free_outputs(&a);
}

Test(golden, bad_calls_are_refused)
{
    peat_tensor *x6 = tf(6, (float[]){1, 2, 3, 4, 5, 6}), *x5 = tf(5, NULL);
    /* softmax 2x3 given 5 elements */
    peat_op_params sm = {.i = {2, 3}};
    expect_refused("softmax_golden", &sm, 1, &x5, PEAT_ERR_SHAPE, "5 elements for 2x3");
    /* cross-entropy target outside [0, C) */
    peat_tensor *ce[2] = {x6, ti(2, (int32_t[]){1, 3})};
    expect_refused("cross_entropy_exact", &sm, 2, ce, PEAT_ERR_SHAPE, "target 3 of 3 classes");
    /* conv2d with pad >= kernel size */
    peat_op_params cv = {.i = {1, 1, 2, 3, 1, 1, 1, 1, 1}};
    peat_tensor *cin[2] = {x6, tf(1, (float[]){1})};
    expect_refused("conv2d_golden", &cv, 2, cin, PEAT_ERR_SHAPE, "pad 1 with a 1x1 kernel");
    /* layernorm without a positive eps */
    peat_op_params ln = {.i = {2, 3}, .f = {0.0}};
    peat_tensor *lin[3] = {x6, tf(3, NULL), tf(3, NULL)};
    expect_refused("layernorm_golden", &ln, 3, lin, PEAT_ERR_SHAPE, "eps = 0");
    /* embedding index outside the table */
    peat_op_params em = {.i = {2, 3, 2}};
    peat_tensor *ein[2] = {x6, ti(2, (int32_t[]){0, -1})};
    expect_refused("embedding_exact", &em, 2, ein, PEAT_ERR_SHAPE, "idx -1");
    /* adamw at step 0 (bias correction would divide by zero) */
    peat_op_params ad = {.i = {6, 0}, .f = {1e-3, 0.9, 0.999, 1e-8, 0}};
    peat_tensor *ain[4] = {x6, x6, x6, x6};
    expect_refused("adamw_golden", &ad, 4, ain, PEAT_ERR_SHAPE, "step 0");
    /* a golden kernel does not read fp64 inputs (it would silently change precision) */
    peat_op_params rl = {.i = {6}};
    peat_tensor *x64 = to_f64(x6);
    expect_refused("relu_golden", &rl, 1, &x64, PEAT_ERR_UNSUPPORTED, "an F64 input");
    /* an exact kernel writes F64 only */
    peat_args a = peat_args_make(PEAT_OP_RELU, &rl, 1, (const peat_tensor *const *)&x6, 0, NULL);
    cr_assert_eq(peat_op_alloc_outputs(&a, PEAT_DTYPE_F32), PEAT_OK, "alloc");
    cr_assert_neq(peat_kernel_run(kern("relu_exact"), &a), PEAT_OK,
                  "relu_exact wrote an F32 output");
    peat_args_free_outputs(&a);
    peat_tensor_free(x64), peat_tensor_free(ce[1]), peat_tensor_free(cin[1]);
    peat_tensor_free(lin[1]), peat_tensor_free(lin[2]), peat_tensor_free(ein[1]);
    peat_tensor_free(x6), peat_tensor_free(x5);
}

/* ---- magnitude ------------------------------------------------------------------------------ */

Test(golden, magnitude_of_plain_sums_is_sum_of_abs_terms)
{
    /* conv 1x1x3x3 image with signs, 2x2 filter: mag = sum |x||w| per window;
     * X = [1 -2 3; -4 5 -6; 7 -8 9], W = [1 -1; 2 0.5]:
     * window (0,0): 1*1 + 2*1 + 4*2 + 5*0.5 = 13.5, (0,1): 2 + 3 + 10 + 3 = 18,
     * (1,0): 4 + 5 + 14 + 4 = 27, (1,1): 5 + 6 + 16 + 4.5 = 31.5 */
    peat_op_params p = {.i = {1, 1, 3, 3, 1, 2, 2, 1, 0}};
    peat_tensor *in[2] = {tf(9, (float[]){1, -2, 3, -4, 5, -6, 7, -8, 9}),
                          tf(4, (float[]){1, -1, 2, 0.5f})};
    peat_args a = peat_args_make(PEAT_OP_CONV2D, &p, 2, (const peat_tensor *const *)in, 0, NULL);
    double mag[4], want[4] = {13.5, 18, 27, 31.5};
    cr_assert_eq(peat_golden_magnitude(&a, 0, NULL, mag), PEAT_OK, "%s", peat_error_last());
    for (int i = 0; i < 4; i++)
        cr_assert_float_eq(mag[i], want[i], 1e-12, "conv mag[%d] = %g, hand %g", i, mag[i],
                           want[i]);
    /* reduce mean of [1 -2 3]: sum|x|/C = 2; bias_add_bwd of [1 -2 | 3 -4] (R=2, C=1, S=2): 10 */
    peat_op_params rp = {.i = {1, 3, 1}}, bp = {.i = {2, 1, 2}};
    peat_tensor *rx = tf(3, (float[]){1, -2, 3}), *bx = tf(4, (float[]){1, -2, 3, -4});
    peat_args ra = peat_args_make(PEAT_OP_REDUCE, &rp, 1, (const peat_tensor *const *)&rx, 0, NULL);
    peat_args ba =
        peat_args_make(PEAT_OP_BIAS_ADD_BWD, &bp, 1, (const peat_tensor *const *)&bx, 0, NULL);
    cr_assert_eq(peat_golden_magnitude(&ra, 0, NULL, mag), PEAT_OK, "%s", peat_error_last());
    cr_assert_float_eq(mag[0], 2.0, 1e-12, "reduce mean mag %g, hand 2", mag[0]);
    cr_assert_eq(peat_golden_magnitude(&ba, 0, NULL, mag), PEAT_OK, "%s", peat_error_last());
    cr_assert_float_eq(mag[0], 10.0, 1e-12, "bias_add_bwd mag %g, hand 10", mag[0]);
    /* an output index the op does not have is refused */
    cr_assert_eq(peat_golden_magnitude(&ra, 1, NULL, mag), PEAT_ERR_INVAL, "reduce has one output");
    free_all(2, in), peat_tensor_free(rx), peat_tensor_free(bx);
}

/* The plain triple loop every blocked GEMM here must equal bit for bit: element (i,j) of batch b
 * summed over k in order, in the accumulator type T (float: golden; double: exact, or the
 * magnitude with absval). */
static double ref_op(const float *X, int t, int64_t r, int64_t c, int64_t i, int64_t k, int ab)
{
    double v = t ? X[k * r + i] : X[i * c + k];
    return ab ? fabs(v) : v;
}

static void ref_gemm(const peat_op_params *p, peat_tensor *const *in, int ab, double *d64,
                     float *d32)
{
    int tA = (int)p->i[0], tB = (int)p->i[1];
    int64_t M = p->i[2], N = p->i[3], K = p->i[4], B = p->i[5];
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                const float *A = peat_f32(in[0]) + b * M * K, *Bm = peat_f32(in[1]) + b * K * N;
                double c = peat_f32(in[2])[b * M * N + i * N + j];
                double s = 0.0;
                float f = 0.0f;
                for (int64_t k = 0; k < K; k++) {
                    double x = ref_op(A, tA, M, K, i, k, ab), y = ref_op(Bm, tB, K, N, k, j, ab);
                    s += x * y;
                    f += (float)x * (float)y;
                }
                double al = ab ? fabs(p->f[0]) : p->f[0], be = ab ? fabs(p->f[1]) : p->f[1];
                d64[b * M * N + i * N + j] = al * s + (be != 0.0 ? be * (ab ? fabs(c) : c) : 0.0);
                d32[b * M * N + i * N + j] =
                    be != 0.0 ? (float)p->f[0] * f + (float)p->f[1] * (float)c : (float)p->f[0] * f;
            }
}

/* The reductions sum four rows side by side: each row must still equal the plain loop over its
 * terms in index order, bit for bit, for R on every remainder of four and C from 1 up, sum and
 * mean, golden (float) and exact (double). */
Test(golden, row_sums_equal_the_plain_loop_bit_for_bit)
{
    peat_rng_t *r = peat_rng_new(9);
    static const int64_t Rs[] = {1, 2, 3, 4, 5, 7, 8, 9}, Cs[] = {1, 3, 20, 71};
    for (size_t a = 0; a < sizeof Rs / sizeof Rs[0]; a++)
        for (size_t b = 0; b < sizeof Cs / sizeof Cs[0]; b++)
            for (int mean = 0; mean < 2; mean++) {
                int64_t R = Rs[a], C = Cs[b];
                peat_op_params p = {.i = {R, C, mean}};
                peat_tensor *in[1] = {rnd(r, R * C, 0.5, 1e3)};
                peat_args go = run_k("reduce_golden", PEAT_OP_REDUCE, &p, 1, in);
                peat_args ex = run_exact64("reduce_exact", PEAT_OP_REDUCE, &p, 1, in);
                for (int64_t i = 0; i < R; i++) {
                    float f = 0.0f;
                    double d = 0.0;
                    for (int64_t j = 0; j < C; j++)
                        f += peat_f32(in[0])[i * C + j], d += peat_f32(in[0])[i * C + j];
                    if (mean) f /= (float)C, d /= (double)C;
                    cr_assert(peat_f32(go.out[0])[i] == f,
                              "R %lld C %lld mean %d golden [%lld]: %a, plain loop %a",
                              (long long)R, (long long)C, mean, (long long)i,
                              peat_f32(go.out[0])[i], f);
                    cr_assert(peat_f64(ex.out[0])[i] == d,
                              "R %lld C %lld mean %d exact [%lld]: %a, plain loop %a", (long long)R,
                              (long long)C, mean, (long long)i, peat_f64(ex.out[0])[i], d);
                }
                peat_args_free_outputs(&go);
                peat_args_free_outputs(&ex);
                free_all(1, in);
            }
    peat_rng_free(r);
}

/* The conv loops visit only the taps inside the image: each output must equal the loop that
 * tests every tap (the kernels' former code), in the same order, bit for bit. The plain loops,
 * in T, over dims d = N C H W O KH KW s p OH OW: */
#define REF_CONV(T, dir, d, A, B, out)                                                             \
    do {                                                                                           \
        int64_t N = d[0], C = d[1], H = d[2], W = d[3], O = d[4], KH = d[5], KW = d[6], S = d[7],  \
                P = d[8], OH = d[9], OW = d[10];                                                   \
        if (dir == 0) /* Y[n,o,oh,ow] = sum_c,kh,kw X[n,c,ih,iw] W[o,c,kh,kw] */                   \
            for (int64_t n = 0; n < N; n++)                                                        \
                for (int64_t o = 0; o < O; o++)                                                    \
                    for (int64_t oh = 0; oh < OH; oh++)                                            \
                        for (int64_t ow = 0; ow < OW; ow++) {                                      \
                            T acc = 0;                                                             \
                            for (int64_t c = 0; c < C; c++)                                        \
                                for (int64_t kh = 0; kh < KH; kh++)                                \
                                    for (int64_t kw = 0; kw < KW; kw++) {                          \
                                        int64_t ih = oh * S - P + kh, iw = ow * S - P + kw;        \
                                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;      \
                                        acc += (T)A[((n * C + c) * H + ih) * W + iw] *             \
                                               (T)B[((o * C + c) * KH + kh) * KW + kw];            \
                                    }                                                              \
                            out[((n * O + o) * OH + oh) * OW + ow] = acc;                          \
                        }                                                                          \
        if (dir == 1) /* dX[n,c,h,w] = sum_o,kh,kw dY[n,o,oh,ow] W[o,c,kh,kw] */                   \
            for (int64_t n = 0; n < N; n++)                                                        \
                for (int64_t c = 0; c < C; c++)                                                    \
                    for (int64_t h = 0; h < H; h++)                                                \
                        for (int64_t x = 0; x < W; x++) {                                          \
                            T acc = 0;                                                             \
                            for (int64_t o = 0; o < O; o++)                                        \
                                for (int64_t kh = 0; kh < KH; kh++)                                \
                                    for (int64_t kw = 0; kw < KW; kw++) {                          \
                                        int64_t th = h + P - kh, tw = x + P - kw;                  \
                                        if (th < 0 || tw < 0 || th % S || tw % S) continue;        \
                                        if (th / S >= OH || tw / S >= OW) continue;                \
                                        acc += (T)A[((n * O + o) * OH + th / S) * OW + tw / S] *   \
                                               (T)B[((o * C + c) * KH + kh) * KW + kw];            \
                                    }                                                              \
                            out[((n * C + c) * H + h) * W + x] = acc;                              \
                        }                                                                          \
        if (dir == 2) /* dW[o,c,kh,kw] = sum_n,oh,ow X[n,c,ih,iw] dY[n,o,oh,ow] */                 \
            for (int64_t o = 0; o < O; o++)                                                        \
                for (int64_t c = 0; c < C; c++)                                                    \
                    for (int64_t kh = 0; kh < KH; kh++)                                            \
                        for (int64_t kw = 0; kw < KW; kw++) {                                      \
                            T acc = 0;                                                             \
                            for (int64_t n = 0; n < N; n++)                                        \
                                for (int64_t oh = 0; oh < OH; oh++)                                \
                                    for (int64_t ow = 0; ow < OW; ow++) {                          \
                                        int64_t ih = oh * S - P + kh, iw = ow * S - P + kw;        \
                                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;      \
                                        acc += (T)A[((n * C + c) * H + ih) * W + iw] *             \
                                               (T)B[((n * O + o) * OH + oh) * OW + ow];            \
                                    }                                                              \
                            out[((o * C + c) * KH + kh) * KW + kw] = acc;                          \
                        }                                                                          \
    } while (0)

Test(golden, conv_loops_equal_the_tap_testing_loop_bit_for_bit)
{
    /* N C H W O KH KW stride pad: stride 1-3, pad 0 to kernel - 1 (edge outputs with most taps
     * outside), H != W, KH != KW, 1x1, an input row no window reaches, a 5x5 on a 4x4 image */
    static const int64_t cfg[][9] = {{2, 3, 7, 6, 4, 3, 3, 1, 1}, {1, 2, 9, 8, 3, 3, 2, 2, 1},
                                     {2, 2, 6, 6, 2, 3, 3, 2, 0}, {1, 3, 10, 7, 2, 5, 3, 3, 2},
                                     {1, 2, 5, 5, 3, 1, 1, 1, 0}, {1, 1, 4, 4, 2, 5, 5, 1, 2},
                                     {1, 2, 6, 5, 2, 3, 3, 2, 2}, {3, 1, 3, 8, 1, 3, 2, 1, 1}};
    static const char *const names[3][2] = {{"conv2d_plain", "conv2d_exact"},
                                            {"conv2d_bwd_data_plain", "conv2d_bwd_data_exact"},
                                            {"conv2d_bwd_filter_plain", "conv2d_bwd_filter_exact"}};
    static const peat_op_kind ops[3] = {PEAT_OP_CONV2D, PEAT_OP_CONV2D_BWD_DATA,
                                        PEAT_OP_CONV2D_BWD_FILTER};
    peat_rng_t *r = peat_rng_new(21);
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        const int64_t *i = cfg[c];
        int64_t OH = (i[2] + 2 * i[8] - i[5]) / i[7] + 1, OW = (i[3] + 2 * i[8] - i[6]) / i[7] + 1;
        int64_t d[11] = {i[0], i[1], i[2], i[3], i[4], i[5], i[6], i[7], i[8], OH, OW};
        int64_t nx = i[0] * i[1] * i[2] * i[3], nw = i[4] * i[1] * i[5] * i[6],
                ny = i[0] * i[4] * OH * OW;
        peat_op_params p;
        memset(&p, 0, sizeof p);
        memcpy(p.i, i, sizeof cfg[c]);
        peat_tensor *x = rnd(r, nx, 0, 1), *w = rnd(r, nw, 0, 1), *dy = rnd(r, ny, 0, 1);
        peat_tensor *ins[3][2] = {{x, w}, {dy, w}, {x, dy}};
        int64_t n_out[3] = {ny, nx, nw};
        for (int dir = 0; dir < 3; dir++) {
            const float *A = peat_f32(ins[dir][0]), *B = peat_f32(ins[dir][1]);
            float *rf = malloc(sizeof(float) * n_out[dir]);
            double *rd = malloc(sizeof(double) * n_out[dir]);
            cr_assert(rf && rd);
            REF_CONV(float, dir, d, A, B, rf);
            REF_CONV(double, dir, d, A, B, rd);
            peat_args go = run_k(names[dir][0], ops[dir], &p, 2, ins[dir]);
            peat_args ex = run_exact64(names[dir][1], ops[dir], &p, 2, ins[dir]);
            for (int64_t k = 0; k < n_out[dir]; k++) {
                cr_assert(peat_f32(go.out[0])[k] == rf[k], "%s case %zu [%lld]: %a, plain loop %a",
                          names[dir][0], c, (long long)k, peat_f32(go.out[0])[k], rf[k]);
                cr_assert(peat_f64(ex.out[0])[k] == rd[k], "%s case %zu [%lld]: %a, plain loop %a",
                          names[dir][1], c, (long long)k, peat_f64(ex.out[0])[k], rd[k]);
            }
            peat_args_free_outputs(&go), peat_args_free_outputs(&ex);
            free(rf), free(rd);
        }
        peat_tensor_free(x), peat_tensor_free(w), peat_tensor_free(dy);
    }
    peat_rng_free(r);
}

Test(golden, blocked_gemm_equals_the_plain_loop_bit_for_bit)
{
    /* N = 300 spans two column blocks (256 + 44); N = 301, 303, 5 and 2 end off the kernels'
     * vector width (4, zero-padded columns), K = 33..36 and 1 on every remainder of the four-step
     * k unroll; every transpose and beta 0 / 1.5, batch 2 */
    peat_rng_t *r = peat_rng_new(5);
    static const int64_t shapes[][2] = {{300, 33}, {301, 34}, {303, 35}, {5, 36}, {2, 1}};
    int64_t M = 7, B = 2;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t N = shapes[s][0], K = shapes[s][1];
        peat_tensor *in[3] = {rnd(r, B * M * K, 0, 1), rnd(r, B * K * N, 0.5, 1),
                              rnd(r, B * M * N, 0, 1)};
        double *d64 = malloc(sizeof(double) * B * M * N), *mag = malloc(sizeof(double) * B * M * N);
        float *d32 = malloc(sizeof(float) * B * M * N);
        cr_assert(d64 && mag && d32);
        for (int c = 0; c < 8; c++) {
            peat_op_params p = {.i = {c & 1, c >> 1 & 1, M, N, K, B},
                                .f = {-0.75, c >> 2 ? 1.5 : 0.0}};
            peat_args ex = run_k("gemm_exact", PEAT_OP_GEMM, &p, 3, in);
            peat_args go = run_k("gemm_plain", PEAT_OP_GEMM, &p, 3, in);
            cr_assert_eq(peat_golden_magnitude(&ex, 0, NULL, mag), PEAT_OK, "%s",
                         peat_error_last());
            for (int ab = 0; ab < 2; ab++) {
                ref_gemm(&p, in, ab, d64, d32);
                for (int64_t i = 0; i < B * M * N; i++) {
                    double got = ab ? mag[i] : peat_f64(ex.out[0])[i];
                    cr_assert(got == d64[i], "N %lld K %lld case %d %s [%lld]: %a, plain loop %a",
                              (long long)N, (long long)K, c, ab ? "magnitude" : "exact",
                              (long long)i, got, d64[i]);
                    if (!ab)
                        cr_assert(peat_f32(go.out[0])[i] == d32[i],
                                  "N %lld K %lld case %d golden [%lld]: %a vs %a", (long long)N,
                                  (long long)K, c, (long long)i, peat_f32(go.out[0])[i], d32[i]);
                }
            }
            peat_args_free_outputs(&ex);
            peat_args_free_outputs(&go);
        }
        free(d64), free(mag), free(d32);
        free_all(3, in);
    }
    peat_rng_free(r);
}

/* ---- bounds that admit every honest order (docs/bounds.md) ---- */

static double mag1(peat_op_kind op, const peat_op_params *p, int n_in, peat_tensor *const *in,
                   int o, int64_t n, double *mag)
{
    peat_args a = peat_args_make(op, p, n_in, (const peat_tensor *const *)in, 0, NULL);
    cr_assert_eq(peat_golden_magnitude(&a, o, NULL, mag), PEAT_OK, "%s", peat_error_last());
    return n > 0 ? mag[0] : 0.0;
}

Test(golden, adamw_bound_decay_first_by_hand)
{
    /* g = m = v = 0, p = 1, lr = wd = 0.5: the update is the decay alone. PyTorch's order forms
     * 1 - lr wd (one rounding) and multiplies (one rounding at |pd| = 0.75); the golden's
     * lr (wd p) rounds wd p twice (2 x 0.25, with R_SCALAR 3 more for the per-call scalar) and
     * lr times the inner sum 0.5 once more; then the final subtraction at |p'| = 0.75:
     * 2 x 0.75 + 0.25 x (2 + 3) + 2 x 0.5 x 0.5 + 0.75 = 4.0 */
    peat_op_params p = {.i = {1, 1}, .f = {0.5, 0.9, 0.999, 1e-8, 0.5}};
    peat_tensor *in[4] = {tf(1, (float[]){1}), tf(1, (float[]){0}), tf(1, (float[]){0}),
                          tf(1, (float[]){0})};
    double mag[1];
    double got = mag1(PEAT_OP_ADAMW, &p, 4, in, 0, 1, mag);
    cr_assert(fabs(got - 4.0) < 1e-12, "adamw p' magnitude %.17g, hand value 4", got);
    cr_assert_eq(mag1(PEAT_OP_ADAMW, &p, 4, in, 1, 1, mag), 0.0, "m' of zeros has no error");
    free_all(4, in);
}

/* PyTorch's _single_tensor_adamw order in fp32 (tests/zoo/zoo_honest_optim.c has the kernel):
 * within gamma_1 * mag on every element, and reaching a fair share of it (not vacuous). The
 * golden-order rule this replaced gave 2.2x on the mlp flow. */
Test(golden, adamw_bound_admits_pytorch_order)
{
    enum { N = 4096 };
    peat_op_params p = {.i = {N, 3}, .f = {3e-3, 0.9, 0.999, 1e-8, 0.01}};
    peat_tensor *in[4] = {NULL};
    for (int k = 0; k < 4; k++) cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, 1, N, &in[k]), 0);
    float *P = in[0]->data, *G = in[1]->data, *M = in[2]->data, *V = in[3]->data;
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double r = (double)(s >> 11) * 0x1p-53;
        P[i] = (float)(0.5 + r), G[i] = (float)(1e-3 * (r - 0.4)), M[i] = (float)(1e-4 * r);
        V[i] = (float)(1e-7 * (1.0 + r));
    }
    double *mag = malloc(N * sizeof *mag);
    mag1(PEAT_OP_ADAMW, &p, 4, in, 0, N, mag);
    double lr = p.f[0], b1 = p.f[1], b2 = p.f[2], bc1 = 1 - pow(b1, 3), bc2 = 1 - pow(b2, 3);
    float decay = (float)(1 - lr * p.f[4]), c1 = (float)(1 - b1), c2 = (float)(1 - b2);
    float step = (float)(lr / bc1), bc2s = (float)sqrt(bc2), eps = (float)p.f[3];
    double worst = 0.0, u = 0x1p-24, g1 = u / (1 - u);
    for (int i = 0; i < N; i++) {
        float pf = P[i] * decay, m = M[i] + c1 * (G[i] - M[i]), v = V[i] * (float)b2;
        v = v + c2 * G[i] * G[i];
        pf = pf + -step * m / (sqrtf(v) / bc2s + eps);
        double md = b1 * M[i] + (1 - b1) * G[i], vd = b2 * V[i] + (1 - b2) * G[i] * G[i];
        double pe = P[i] - lr * ((md / bc1) / (sqrt(vd / bc2) + p.f[3]) + p.f[4] * P[i]);
        double ratio = fabs(pf - pe) / (g1 * mag[i]);
        worst = ratio > worst ? ratio : worst;
    }
    cr_assert_leq(worst, 1.0, "PyTorch-order AdamW reaches %.3f x the bound", worst);
    cr_assert_geq(worst, 0.2, "bound vacuous: PyTorch-order AdamW reaches only %.3f x it", worst);
    free(mag);
    free_all(4, in);
}

/* apex's FusedAdam form: the hyperparameters as fp32 and every scalar formed from them in fp32
 * (1 - b1, 1 - b2, the bias corrections with powf), m = b1 m + (1 - b1) g, v likewise, p -= lr
 * (mhat / (sqrt(vhat) + eps) + wd p). 1 - 0.999f is 1.3e-5 off 0.001 (217 u): at step 1 with v = 0,
 * v' is that term alone. Every output within gamma_1 * mag on every element, v' reaching a fair
 * share of its bound (not vacuous). */
Test(golden, adamw_bound_admits_fp32_hyperparameters)
{
    enum { N = 4096 };
    for (int t = 1; t <= 3; t += 2) {
        peat_op_params p = {.i = {N, t}, .f = {3e-3, 0.9, 0.999, 1e-8, 0.01}};
        peat_tensor *in[4] = {NULL};
        for (int k = 0; k < 4; k++)
            cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, 1, N, &in[k]), 0);
        float *P = in[0]->data, *G = in[1]->data, *M = in[2]->data, *V = in[3]->data;
        uint64_t s = 777 + (uint64_t)t;
        for (int i = 0; i < N; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            double r = (double)(s >> 11) * 0x1p-53;
            P[i] = (float)(0.5 + r), G[i] = (float)(1e-3 * (r - 0.4));
            M[i] = t == 1 ? 0.0f : (float)(1e-4 * r), V[i] = t == 1 ? 0.0f : (float)(1e-7 * r);
        }
        double *mag[3];
        for (int o = 0; o < 3; o++) {
            mag[o] = malloc(N * sizeof *mag[o]);
            mag1(PEAT_OP_ADAMW, &p, 4, in, o, N, mag[o]);
        }
        float lr = (float)p.f[0], b1 = (float)p.f[1], b2 = (float)p.f[2], eps = (float)p.f[3],
              wd = (float)p.f[4];
        float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
        double e1 = p.f[1], e2 = p.f[2], ebc1 = 1 - pow(e1, t), ebc2 = 1 - pow(e2, t);
        double worst[3] = {0, 0, 0}, g1 = 0x1p-24 / (1 - 0x1p-24);
        for (int i = 0; i < N; i++) {
            float m = b1 * M[i] + (1.0f - b1) * G[i], v = b2 * V[i] + (1.0f - b2) * G[i] * G[i];
            float pf = P[i] - lr * ((m / bc1) / (sqrtf(v / bc2) + eps) + wd * P[i]);
            double md = e1 * M[i] + (1 - e1) * G[i], vd = e2 * V[i] + (1 - e2) * G[i] * G[i];
            double pe = P[i] - p.f[0] * ((md / ebc1) / (sqrt(vd / ebc2) + p.f[3]) + p.f[4] * P[i]);
            double got[3] = {pf, m, v}, want[3] = {pe, md, vd};
            for (int o = 0; o < 3; o++) {
                double ratio = fabs(got[o] - want[o]) / (g1 * mag[o][i]);
                worst[o] = ratio > worst[o] ? ratio : worst[o];
            }
        }
        for (int o = 0; o < 3; o++)
            cr_assert_leq(worst[o], 1.0,
                          "step %d output %d: fp32-hyperparameter AdamW at %.3f x "
                          "the bound",
                          t, o, worst[o]);
        cr_assert_geq(worst[2], 0.2, "step %d: v' bound vacuous (%.3f x)", t, worst[2]);
        for (int o = 0; o < 3; o++) free(mag[o]);
        free_all(4, in);
    }
}

Test(golden, sgd_nesterov_bound_by_hand)
{
    /* g = mom = 0, p = 1, lr = momentum = wd = 0.5. mom' = wd p = 0.5 with error terms
     * 2|wd p| + |g + wd p| + |mom'| = 1 + 0.5 + 0.5 = 2 (the momentum terms are 0). Without
     * nesterov p' = 0.75: 0.5 x 2 + 2 x 0.25 + 0.75 = 2.25. With it the step is d = 0.5 +
     * 0.5 x 0.5 = 0.75: 2|wd p| + |g + wd p| + |mu| 2 + 2|mu mom'| + |d| = 1 + 0.5 + 1 + 0.5 +
     * 0.75 = 3.75; p' = 0.625: 0.5 x 3.75 + 2 x 0.375 + 0.625 = 3.25 */
    peat_op_params p = {.i = {1, 1}, .f = {0.5, 0.5, 0.5}};
    peat_tensor *in[3] = {tf(1, (float[]){1}), tf(1, (float[]){0}), tf(1, (float[]){0})};
    double mag[1];
    double got = mag1(PEAT_OP_SGD, &p, 3, in, 0, 1, mag);
    cr_assert(fabs(got - 3.25) < 1e-12, "nesterov p' magnitude %.17g, hand value 3.25", got);
    got = mag1(PEAT_OP_SGD, &p, 3, in, 1, 1, mag);
    cr_assert(fabs(got - 2.0) < 1e-12, "mom' magnitude %.17g, hand value 2", got);
    p.i[1] = 0;
    got = mag1(PEAT_OP_SGD, &p, 3, in, 0, 1, mag);
    cr_assert(fabs(got - 2.25) < 1e-12, "plain p' magnitude %.17g, hand value 2.25", got);
    free_all(3, in);
}

/* PyTorch's _single_tensor_sgd with nesterov=True in fp32 (zoo_sgd_torch_nesterov): within
 * gamma_1 * mag on every element, and reaching a fair share of it (not vacuous). */
Test(golden, sgd_nesterov_bound_admits_pytorch_order)
{
    enum { N = 4096 };
    peat_op_params p = {.i = {N, 1}, .f = {0.05, 0.9, 5e-4}};
    peat_tensor *in[3] = {NULL};
    for (int k = 0; k < 3; k++) cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, 1, N, &in[k]), 0);
    float *P = in[0]->data, *G = in[1]->data, *M = in[2]->data;
    uint64_t s = 777;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double r = (double)(s >> 11) * 0x1p-53;
        P[i] = (float)(r - 0.5), G[i] = (float)(0.1 * (r - 0.45)), M[i] = (float)(0.2 * (0.3 - r));
    }
    double *mag = malloc(N * sizeof *mag);
    mag1(PEAT_OP_SGD, &p, 3, in, 0, N, mag);
    float lr = (float)p.f[0], mu = (float)p.f[1], wd = (float)p.f[2];
    double worst = 0.0, u = 0x1p-24, g1 = u / (1 - u);
    for (int i = 0; i < N; i++) {
        float g = G[i] + wd * P[i], b = M[i] * mu;
        b = b + g;
        float d = g + mu * b, pf = P[i] + -lr * d;
        double gd = G[i] + p.f[2] * P[i], bd = p.f[1] * M[i] + gd;
        double pe = P[i] - p.f[0] * (gd + p.f[1] * bd);
        double ratio = fabs(pf - pe) / (g1 * mag[i]);
        worst = ratio > worst ? ratio : worst;
    }
    cr_assert_leq(worst, 1.0, "PyTorch-order nesterov SGD reaches %.3f x the bound", worst);
    cr_assert_geq(worst, 0.2, "bound vacuous: nesterov SGD reaches only %.3f x it", worst);
    free(mag);
    free_all(3, in);
}

Test(golden, reduce_mean_depth_admits_reciprocal)
{
    /* a mean as sum * (1/C) rounds 1/C and the product: C roundings, one more than C-1 adds and
     * a divide share; sum keeps depth C */
    peat_op_params p = {.i = {2, 7, 1}};
    cr_assert_eq(peat_op_info_get(PEAT_OP_REDUCE)->depth(&p), 8, "mean depth");
    p.i[2] = 0;
    cr_assert_eq(peat_op_info_get(PEAT_OP_REDUCE)->depth(&p), 7, "sum depth");
}

Test(golden, cross_entropy_bounds_by_hand)
{
    /* one row x = (0, 0), target 0: p = (1/2, 1/2), max 0, S = 2, lam = sum p (3 |x - m| + 2) = 2,
     * loss = ln 2. Forward: (lam + C - 1 + 4 ln S + |ln S + m| + |x_t - m| + |loss|) / C
     * = (2 + 1 + 4 ln2 + ln2 + 0 + ln2) / 2 = 1.5 + 3 ln2. Backward with dloss = 1: each p_j
     * (4 |x_j - m| + 2 + lam + C + 5 ln S + 1) + 2 |p_j - onehot_j| over C
     * = (0.5 (7 + 5 ln2) + 1) / 2 = 2.25 + 1.25 ln2 */
    peat_op_params p = {.i = {1, 2}};
    peat_tensor *in[3] = {tf(2, (float[]){0, 0}), ti(1, (int32_t[]){0}), tf(1, (float[]){1})};
    double mag[2], ln2 = log(2.0);
    mag1(PEAT_OP_CROSS_ENTROPY, &p, 2, in, 0, 1, mag);
    cr_assert(fabs(mag[0] - (1.5 + 3 * ln2)) < 1e-12, "loss magnitude %.17g, hand %.17g", mag[0],
              1.5 + 3 * ln2);
    mag1(PEAT_OP_CROSS_ENTROPY_BWD, &p, 3, in, 0, 2, mag);
    for (int j = 0; j < 2; j++)
        cr_assert(fabs(mag[j] - (2.25 + 1.25 * ln2)) < 1e-12,
                  "dlogits[%d] magnitude %.17g, hand %.17g", j, mag[j], 2.25 + 1.25 * ln2);
    free_all(3, in);
}

Test(golden, softmax_bound_charges_the_exp2_shift_by_hand)
{
    /* x = (0, -1): m = 0, S = 1 + e^-1, p = (1/S, e^-1/S); lam = sum p (3 |x - m| + 2) =
     * 2 p0 + 5 p1; y_1: p1 (3 + 2 + lam + C + 1) / C = p1 (8 + lam) / 2: the shift |x - m| = 1
     * charged three times (the subtraction, the product by log2 e, log2 e's rounding) */
    peat_op_params p = {.i = {1, 2}};
    peat_tensor *in[1] = {tf(2, (float[]){0, -1})};
    double mag[2], S = 1.0 + exp(-1.0), p0 = 1.0 / S, p1 = exp(-1.0) / S, lam = 2 * p0 + 5 * p1;
    mag1(PEAT_OP_SOFTMAX, &p, 1, in, 0, 2, mag);
    cr_assert(fabs(mag[1] - p1 * (8.0 + lam) / 2.0) < 1e-12, "y_1 magnitude %.17g, hand %.17g",
              mag[1], p1 * (8.0 + lam) / 2.0);
    cr_assert(fabs(mag[0] - p0 * (5.0 + lam) / 2.0) < 1e-12, "y_0 magnitude %.17g, hand %.17g",
              mag[0], p0 * (5.0 + lam) / 2.0);
    free_all(1, in);
}

Test(golden, softmax_bound_with_masked_entries_by_hand)
{
    /* x = (0, -inf): p = (1, 0), lam = 1 (0 + 2) = 2; y_0: 1 (0 + 2 + 2 + 2 + 1) / 2 = 3.5, the
     * masked y_1 = 0 exactly: magnitude 0, not 0 * inf */
    peat_op_params p = {.i = {1, 2}};
    peat_tensor *in[1] = {tf(2, (float[]){0, -INFINITY})};
    double mag[2];
    mag1(PEAT_OP_SOFTMAX, &p, 1, in, 0, 2, mag);
    cr_assert(fabs(mag[0] - 3.5) < 1e-12, "y_0 magnitude %.17g, hand 3.5", mag[0]);
    cr_assert_eq(mag[1], 0.0, "masked y_1 magnitude %g, want 0", mag[1]);
    free_all(1, in);
}

/* PyTorch's cross-entropy gradient (log_softmax backward: exp(logp) - onehot) on rows with a
 * wide spread of logits stays within the bound, and reaches a fair share of it. */
Test(golden, cross_entropy_bwd_bound_admits_log_softmax_order)
{
    enum { R = 256, C = 10 };
    peat_rng_t *r = peat_rng_new(77);
    peat_op_params p = {.i = {R, C}};
    int32_t tg[R];
    for (int i = 0; i < R; i++) tg[i] = i % C;
    peat_tensor *in[3] = {rnd(r, R * C, 0.0, 6.0), ti(R, tg), rnd(r, R, 0.0, 1.0)};
    double *mag = malloc(R * C * sizeof *mag), worst = 0.0;
    mag1(PEAT_OP_CROSS_ENTROPY_BWD, &p, 3, in, 0, R * C, mag);
    const float *x = in[0]->data, *dl = in[2]->data;
    for (int i = 0; i < R; i++) {
        const float *xr = x + i * C;
        float mx = -INFINITY, s = 0.0f;
        double md = -INFINITY, sd = 0.0;
        for (int j = 0; j < C; j++) mx = fmaxf(mx, xr[j]), md = fmax(md, xr[j]);
        for (int j = 0; j < C; j++) s += expf(xr[j] - mx), sd += exp(xr[j] - md);
        float lse = logf(s);
        for (int j = 0; j < C; j++) {
            float oh = j == tg[i] ? 1.0f : 0.0f;
            float got = -dl[i] * oh - expf((xr[j] - mx) - lse) * -dl[i];
            double want = (double)dl[i] * (exp(xr[j] - md) / sd - oh);
            worst = fmax(worst, fabs(got - want) / (gamma_k(C) * mag[i * C + j]));
        }
    }
    cr_assert_leq(worst, 1.0, "log_softmax-order gradient reaches %.3f x the bound", worst);
    cr_assert_geq(worst, 0.05, "bound vacuous: the gradient reaches only %.3f x it", worst);
    free(mag);
    free_all(3, in);
    peat_rng_free(r);
}

/* The tanh form of the sigmoid, (1 + tanh(x/2)) / 2 (XLA's logistic, fast sigmoids of fused
 * kernels), keeps an absolute error of about u in s: on x from -40 to 40 (below -17 the whole
 * value is lost to 1 + tanh's cancellation) SiLU in that form stays within the bound and reaches
 * a fair share of it. A SiLU that rounds s to bf16 does not. */
Test(golden, silu_bound_admits_the_tanh_form)
{
    enum { N = 1601 };
    float xs[N];
    for (int i = 0; i < N; i++) xs[i] = -40.0f + 0.05f * (float)i + 0.001f;
    peat_op_params p = {.i = {N}};
    peat_tensor *in[1] = {tf(N, xs)};
    double *mag = malloc(N * sizeof *mag), worst = 0.0, worst_bf16 = 0.0;
    mag1(PEAT_OP_SILU, &p, 1, in, 0, N, mag);
    for (int i = 0; i < N; i++) {
        float x = xs[i], s = 0.5f * (1.0f + tanhf(0.5f * x)), y = x * s;
        union {
            float f;
            uint32_t u;
        } b = {.f = 1.0f / (1.0f + expf(-x))};
        b.u = (b.u + 0x8000u) & 0xffff0000u; /* s rounded to bf16 */
        double want = (double)x / (1.0 + exp(-(double)x));
        worst = fmax(worst, fabs(y - want) / (gamma_k(1) * mag[i]));
        worst_bf16 = fmax(worst_bf16, fabs(x * b.f - want) / (gamma_k(1) * mag[i]));
    }
    cr_assert_leq(worst, 1.0, "tanh-form SiLU reaches %.3f x the bound", worst);
    cr_assert_geq(worst, 0.05, "bound vacuous: the tanh form reaches only %.3f x it", worst);
    cr_assert_gt(worst_bf16, 10.0, "a bf16 sigmoid reaches only %.3f x the bound", worst_bf16);
    free(mag);
    free_all(1, in);
}
