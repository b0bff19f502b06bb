/* golden_cases.h: random op calls for every op kind (shapes and values of the kind training
 * produces) and the gamma_K bound check against the exact reference, shared by the tests of the
 * CPU goldens (test_golden.c) and of the device goldens (test_opencl_gpu.c). Test-only. */
#ifndef PEAT_TESTS_GOLDEN_CASES_H
#define PEAT_TESTS_GOLDEN_CASES_H

#include <criterion/criterion.h>

#include "golden/golden.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* fp32 unit roundoff and the classic gamma_K = K u / (1 - K u) */
#define U32 (1.0 / 16777216.0)
static double gamma_k(int64_t K)
{
    return (double)K * U32 / (1.0 - (double)K * U32);
}

static peat_tensor *tf(int64_t n, const float *v)
{
    peat_tensor *t = NULL;
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, n, &t), PEAT_OK, "alloc f32[%lld]",
                 (long long)n);
    if (v) memcpy(t->data, v, (size_t)n * sizeof(float));
    return t;
}
static peat_tensor *rnd(peat_rng_t *r, int64_t n, double mean, double sigma)
{
    peat_tensor *t = tf(n, NULL);
    for (int64_t i = 0; i < n; i++) peat_f32(t)[i] = (float)(mean + peat_rng_gaussian(r, sigma));
    return t;
}
static void free_all(int n, peat_tensor **t)
{
    for (int k = 0; k < n; k++) peat_tensor_free(t[k]), t[k] = NULL;
}

static const peat_kernel *kern(const char *name)
{
    const peat_kernel *k = peat_registry_find(name);
    cr_assert_not_null(k, "kernel '%s' is not registered", name);
    return k;
}

/* Runs kernel `name` on inputs in[] with freshly allocated outputs of its out dtype. */
static peat_args run_k(const char *name, peat_op_kind op, const peat_op_params *p, int n_in,
                       peat_tensor *const *in)
{
    const peat_kernel *k = kern(name);
    peat_args a = peat_args_make(op, p, n_in, (const peat_tensor *const *)in, 0, NULL);
    cr_assert_eq(peat_op_alloc_outputs(&a, k->out_dtype), PEAT_OK, "%s outputs: %s", name,
                 peat_error_last());
    peat_status s = peat_kernel_run(k, &a);
    cr_assert_eq(s, PEAT_OK, "%s failed: %s", name, peat_error_last());
    return a;
}

/* ---- random cases: golden vs exact within gamma_K * magnitude ------------------------------- */

/* One call with fp32 inputs drawn for op (shapes small, values of the kind training produces:
 * wide logits, layernorm rows off zero, a proper softmax fed to softmax_bwd, O and L from the
 * golden forward fed to attention_bwd). variant picks a second configuration. */
typedef struct gcase {
    peat_op_kind op;
    peat_op_params p;
    int n_in;
    peat_tensor *in[PEAT_MAX_IO];
} gcase;

static void gcase_free(gcase *c)
{
    free_all(c->n_in, c->in);
}

static peat_tensor *rnd_idx(peat_rng_t *r, int64_t n, int64_t lim)
{
    peat_tensor *t = NULL;
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_I32, n, &t), PEAT_OK, "alloc idx");
    for (int64_t i = 0; i < n; i++) peat_i32(t)[i] = (int32_t)peat_rng_int(r, (uint64_t)lim);
    return t;
}

/* Output o of golden forward `name` as a new F32 tensor (to feed a backward op). */
static peat_tensor *fwd_out(const char *name, peat_op_kind op, const peat_op_params *p, int n_in,
                            peat_tensor *const *in, int o)
{
    peat_args a = run_k(name, op, p, n_in, in);
    peat_tensor *t = a.out[o];
    a.out[o] = NULL;
    peat_args_free_outputs(&a);
    return t;
}

static gcase make_case(peat_op_kind op, int variant, uint64_t seed)
{
    gcase c = {.op = op};
    peat_rng_t *r = peat_rng_new(seed);
    cr_assert_not_null(r, "rng");
    int64_t *i = c.p.i;
    double *f = c.p.f;
    switch (op) {
    case PEAT_OP_GEMM:
        i[0] = variant, i[1] = !variant, i[2] = 5, i[3] = 7, i[4] = 33, i[5] = 2, f[0] = 1.5,
        f[1] = 0.5;
        c.n_in = 3;
        c.in[0] = rnd(r, 2 * 5 * 33, 0, 1), c.in[1] = rnd(r, 2 * 33 * 7, 0, 1),
        c.in[2] = rnd(r, 2 * 5 * 7, 0, 1);
        break;
    case PEAT_OP_GEMM_FP8: {
        /* e4m3 A, e5m2 B (variant 1: the other way, transposed), scales 2^-3 and 3, beta 0.5 */
        i[0] = variant, i[1] = !variant, i[2] = 5, i[3] = 7, i[4] = 33, i[5] = 2;
        i[6] = variant, i[7] = !variant, f[0] = 0.125, f[1] = 0.5, f[2] = 3.0;
        c.n_in = 3;
        c.in[0] = rnd(r, 2 * 5 * 33, 0, 100), c.in[1] = rnd(r, 2 * 33 * 7, 0, 100),
        c.in[2] = rnd(r, 2 * 5 * 7, 0, 1);
        for (int k = 0; k < 2; k++)
            for (int64_t e = 0; e < peat_tensor_numel(c.in[k]); e++)
                peat_f32(c.in[k])[e] = peat_round_fp8(peat_f32(c.in[k])[e], (int)i[6 + k]);
        break;
    }
    case PEAT_OP_CONV2D:
    case PEAT_OP_CONV2D_BWD_DATA:
    case PEAT_OP_CONV2D_BWD_FILTER: {
        /* variant 0: stride 2, pad 1, 3x3; variant 1: stride 1, pad 0, 2x3 */
        int64_t N = 2, C = 3, H = 7, W = 6, O = 4, KH = variant ? 2 : 3, KW = 3,
                s = variant ? 1 : 2, P = variant ? 0 : 1;
        int64_t OH = (H + 2 * P - KH) / s + 1, OW = (W + 2 * P - KW) / s + 1;
        int64_t v[9] = {N, C, H, W, O, KH, KW, s, P};
        memcpy(i, v, sizeof v);
        c.n_in = 2;
        peat_tensor *x = rnd(r, N * C * H * W, 0, 1), *w = rnd(r, O * C * KH * KW, 0, 0.5);
        peat_tensor *dy = rnd(r, N * O * OH * OW, 0, 1);
        if (op == PEAT_OP_CONV2D)
            c.in[0] = x, c.in[1] = w, peat_tensor_free(dy);
        else if (op == PEAT_OP_CONV2D_BWD_DATA)
            c.in[0] = dy, c.in[1] = w, peat_tensor_free(x);
        else
            c.in[0] = x, c.in[1] = dy, peat_tensor_free(w);
        break;
    }
    case PEAT_OP_BIAS_ADD:
        i[0] = 3, i[1] = 4, i[2] = 5, c.n_in = 2;
        c.in[0] = rnd(r, 60, 0, 1), c.in[1] = rnd(r, 4, 0, 1);
        break;
    case PEAT_OP_BIAS_ADD_BWD:
        i[0] = 6, i[1] = 4, i[2] = 5, c.n_in = 1;
        c.in[0] = rnd(r, 120, 0, 1);
        break;
    case PEAT_OP_RELU:
    case PEAT_OP_GELU:
        i[0] = 257, c.n_in = 1;
        c.in[0] = rnd(r, 257, 0, 3);
        break;
    case PEAT_OP_RELU_BWD:
    case PEAT_OP_GELU_BWD:
        i[0] = 257, c.n_in = 2;
        c.in[0] = rnd(r, 257, 0, 3), c.in[1] = rnd(r, 257, 0, 1);
        break;
    case PEAT_OP_SOFTMAX:
        i[0] = 4, i[1] = 37, c.n_in = 1;
        c.in[0] = rnd(r, 4 * 37, 0, 4);
        break;
    case PEAT_OP_SOFTMAX_BWD: {
        i[0] = 4, i[1] = 37, c.n_in = 2;
        peat_tensor *x = rnd(r, 4 * 37, 0, 2);
        c.in[0] = fwd_out("softmax_golden", PEAT_OP_SOFTMAX, &c.p, 1, &x, 0);
        c.in[1] = rnd(r, 4 * 37, 0, 1);
        peat_tensor_free(x);
        break;
    }
    case PEAT_OP_LAYERNORM:
        i[0] = 5, i[1] = 48, f[0] = 1e-5, c.n_in = 3;
        c.in[0] = rnd(r, 5 * 48, variant ? 3.0 : 0.0, 1.5), c.in[1] = rnd(r, 48, 1, 0.3),
        c.in[2] = rnd(r, 48, 0, 0.5);
        break;
    case PEAT_OP_LAYERNORM_BWD: {
        /* R > C in one variant so depth max(R, C) is set by either side */
        int64_t R = variant ? 40 : 5, C = variant ? 12 : 48;
        i[0] = R, i[1] = C, f[0] = 1e-5, c.n_in = 5;
        peat_tensor *fin[3] = {rnd(r, R * C, 0.5, 1.5), rnd(r, C, 1, 0.3), rnd(r, C, 0, 0.5)};
        c.in[0] = fin[0], c.in[1] = fin[1];
        c.in[2] = fwd_out("layernorm_golden", PEAT_OP_LAYERNORM, &c.p, 3, fin, 1);
        c.in[3] = fwd_out("layernorm_golden", PEAT_OP_LAYERNORM, &c.p, 3, fin, 2);
        c.in[4] = rnd(r, R * C, 0, 1);
        peat_tensor_free(fin[2]);
        break;
    }
    case PEAT_OP_SILU:
    case PEAT_OP_SILU_BWD:
        /* variant 1 reaches the saturated tails (|x| up to about 20) */
        i[0] = 300, c.n_in = op == PEAT_OP_SILU ? 1 : 2;
        c.in[0] = rnd(r, 300, 0, variant ? 8 : 2);
        if (op == PEAT_OP_SILU_BWD) c.in[1] = rnd(r, 300, 0, 1);
        break;
    case PEAT_OP_SWIGLU:
    case PEAT_OP_SWIGLU_BWD:
        i[0] = 300, c.n_in = op == PEAT_OP_SWIGLU ? 2 : 3;
        c.in[0] = rnd(r, 300, 0, variant ? 8 : 2), c.in[1] = rnd(r, 300, 0, 1);
        if (op == PEAT_OP_SWIGLU_BWD) c.in[2] = rnd(r, 300, 0, 1);
        break;
    case PEAT_OP_BATCHNORM:
    case PEAT_OP_BATCHNORM_BWD: {
        /* channels off zero (variant 1: an offset three times the spread) */
        int64_t N = 3, C = 4, S = 10, n = N * C * S;
        i[0] = N, i[1] = C, i[2] = S, f[0] = 1e-5, f[1] = 0.1;
        peat_tensor *x = rnd(r, n, variant ? 3.0 : 0.0, 1.5), *g = rnd(r, C, 1, 0.3);
        peat_tensor *b = rnd(r, C, 0, 0.5), *rm = rnd(r, C, 0, 0.5), *rv = tf(C, NULL);
        for (int64_t k = 0; k < C; k++) peat_f32(rv)[k] = (float)(0.5 + peat_rng_uniform(r));
        if (op == PEAT_OP_BATCHNORM) {
            c.n_in = 5, c.in[0] = x, c.in[1] = g, c.in[2] = b, c.in[3] = rm, c.in[4] = rv;
            break;
        }
        peat_tensor *fin[5] = {x, g, b, rm, rv};
        c.n_in = 5, c.in[0] = x, c.in[1] = g;
        c.in[2] = fwd_out("batchnorm_golden", PEAT_OP_BATCHNORM, &c.p, 5, fin, 1);
        c.in[3] = fwd_out("batchnorm_golden", PEAT_OP_BATCHNORM, &c.p, 5, fin, 2);
        c.in[4] = rnd(r, n, 0, 1);
        peat_tensor_free(b), peat_tensor_free(rm), peat_tensor_free(rv);
        break;
    }
    case PEAT_OP_MAXPOOL2D:
    case PEAT_OP_MAXPOOL2D_BWD:
    case PEAT_OP_AVGPOOL2D:
    case PEAT_OP_AVGPOOL2D_BWD: {
        /* variant 0: 2x2 stride 2; 1: 3x3 stride 2 pad 1 (overlapping windows) */
        int64_t N = 2, C = 3, H = 7, W = 8, K = variant ? 3 : 2, st = 2, pad = variant ? 1 : 0;
        int64_t OH = (H + 2 * pad - K) / st + 1, OW = (W + 2 * pad - K) / st + 1;
        int64_t v[7] = {N, C, H, W, K, st, pad};
        memcpy(i, v, sizeof v);
        int bwd = op == PEAT_OP_MAXPOOL2D_BWD || op == PEAT_OP_AVGPOOL2D_BWD;
        c.n_in = 0;
        if (op != PEAT_OP_AVGPOOL2D_BWD) c.in[c.n_in++] = rnd(r, N * C * H * W, 0, 1);
        if (bwd) c.in[c.n_in++] = rnd(r, N * C * OH * OW, 0, 1);
        break;
    }
    case PEAT_OP_ROPE:
    case PEAT_OP_ROPE_BWD: {
        /* variant 0: half-split pairs from position 0; 1: interleaved from position 300 */
        int64_t B = 2, H = 2, T = 9, D = 8, n = B * H * T * D;
        i[0] = B, i[1] = H, i[2] = T, i[3] = D, i[4] = !variant, i[5] = variant ? 300 : 0;
        f[0] = 10000.0, c.n_in = 1;
        c.in[0] = rnd(r, n, 0, 1);
        break;
    }
    case PEAT_OP_RMSNORM:
        i[0] = 5, i[1] = 48, f[0] = 1e-6, c.n_in = 2;
        c.in[0] = rnd(r, 5 * 48, variant ? 3.0 : 0.0, 1.5), c.in[1] = rnd(r, 48, 1, 0.3);
        break;
    case PEAT_OP_RMSNORM_BWD: {
        int64_t R = variant ? 40 : 5, C = variant ? 12 : 48;
        i[0] = R, i[1] = C, f[0] = 1e-6, c.n_in = 4;
        c.in[0] = rnd(r, R * C, 0.5, 1.5), c.in[1] = rnd(r, C, 1, 0.3);
        c.in[2] = fwd_out("rmsnorm_golden", PEAT_OP_RMSNORM, &c.p, 2, c.in, 1);
        c.in[3] = rnd(r, R * C, 0, 1);
        break;
    }
    case PEAT_OP_ATTENTION:
    case PEAT_OP_ATTENTION_BWD: {
        /* variant 1: causal and grouped-query (4 query heads on 2 K/V heads) */
        int64_t B = 2, H = variant ? 4 : 2, Hkv = 2, T = 9, D = 8, n = B * H * T * D,
                nkv = B * Hkv * T * D;
        i[0] = B, i[1] = H, i[2] = T, i[3] = D, i[4] = variant, i[5] = Hkv;
        f[0] = 1.0 / sqrt((double)D);
        c.in[0] = rnd(r, n, 0, 1.5), c.in[1] = rnd(r, nkv, 0, 1.5), c.in[2] = rnd(r, nkv, 0, 1);
        c.n_in = 3;
        if (op == PEAT_OP_ATTENTION_BWD) {
            c.in[3] = fwd_out("attention_golden", PEAT_OP_ATTENTION, &c.p, 3, c.in, 0);
            c.in[4] = fwd_out("attention_golden", PEAT_OP_ATTENTION, &c.p, 3, c.in, 1);
            c.in[5] = rnd(r, n, 0, 1);
            c.n_in = 6;
        }
        break;
    }
    case PEAT_OP_EMBEDDING:
        i[0] = 13, i[1] = 7, i[2] = 5, c.n_in = 2;
        c.in[0] = rnd(r, 35, 0, 1), c.in[1] = rnd_idx(r, 13, 7);
        break;
    case PEAT_OP_EMBEDDING_BWD:
        i[0] = 13, i[1] = 7, i[2] = 5, c.n_in = 2;
        c.in[0] = rnd_idx(r, 13, 7), c.in[1] = rnd(r, 65, 0, 1);
        break;
    case PEAT_OP_CROSS_ENTROPY:
    case PEAT_OP_CROSS_ENTROPY_BWD:
        i[0] = 6, i[1] = 11, c.n_in = 2;
        c.in[0] = rnd(r, 66, 0, 3), c.in[1] = rnd_idx(r, 6, 11);
        if (op == PEAT_OP_CROSS_ENTROPY_BWD) c.in[2] = rnd(r, 6, 0.2, 0.1), c.n_in = 3;
        break;
    case PEAT_OP_ADAMW: {
        i[0] = 300, i[1] = variant ? 1 : 7;
        f[0] = 1e-3, f[1] = 0.9, f[2] = 0.999, f[3] = 1e-8, f[4] = 0.01;
        c.n_in = 4;
        c.in[0] = rnd(r, 300, 0, 1), c.in[1] = rnd(r, 300, 0, 1e-2), c.in[2] = rnd(r, 300, 0, 1e-2);
        c.in[3] = tf(300, NULL);
        for (int k = 0; k < 300; k++) peat_f32(c.in[3])[k] = (float)(1e-4 * peat_rng_uniform(r));
        break;
    }
    case PEAT_OP_SGD:
        i[0] = 300, f[0] = 0.05, f[1] = 0.9, f[2] = 5e-4, c.n_in = 3;
        c.in[0] = rnd(r, 300, 0, 1), c.in[1] = rnd(r, 300, 0, 0.1), c.in[2] = rnd(r, 300, 0, 0.1);
        break;
    case PEAT_OP_REDUCE:
        i[0] = 6, i[1] = 50, i[2] = variant, c.n_in = 1;
        c.in[0] = rnd(r, 300, 0.5, 1);
        break;
    default:
        cr_assert_fail("no random case for %s", peat_op_name(op));
    }
    peat_rng_free(r);
    return c;
}

/* Largest |golden - exact| / (gamma_K mag) over the elements of output o (0 where both are 0);
 * *bad counts elements above 1. round_bf16 first rounds the golden output to bf16. */
static double bound_ratio(const gcase *c, const peat_args *g, const peat_args *e, int o,
                          int round_bf16, int64_t *bad)
{
    peat_args a = peat_args_make(c->op, &c->p, c->n_in, (const peat_tensor *const *)c->in, 0, NULL);
    int64_t n = peat_tensor_numel(e->out[o]);
    double *mag = malloc((size_t)n * sizeof *mag);
    cr_assert_not_null(mag, "mag");
    peat_status s = peat_golden_magnitude(&a, o, e->out[o], mag);
    cr_assert_eq(s, PEAT_OK, "magnitude of %s out %d: %s", peat_op_name(c->op), o,
                 peat_error_last());
    double gk = gamma_k(peat_op_info_get(c->op)->depth(&c->p)), worst = 0.0;
    *bad = 0;
    for (int64_t i = 0; i < n; i++) {
        float gv = peat_f32(g->out[o])[i];
        if (round_bf16) gv = peat_round_bf16(gv);
        double err = fabs((double)gv - peat_f64(e->out[o])[i]);
        cr_assert(mag[i] >= 0.0 && isfinite(mag[i]), "%s out %d mag[%lld] = %g",
                  peat_op_name(c->op), o, (long long)i, mag[i]);
        double ratio = err == 0.0 ? 0.0 : err / (gk * mag[i]);
        if (ratio > 1.0) (*bad)++;
        if (ratio > worst) worst = ratio;
    }
    free(mag);
    return worst;
}

static const peat_op_kind all_ops[] = {PEAT_OP_GEMM,
                                       PEAT_OP_CONV2D,
                                       PEAT_OP_CONV2D_BWD_DATA,
                                       PEAT_OP_CONV2D_BWD_FILTER,
                                       PEAT_OP_BIAS_ADD,
                                       PEAT_OP_BIAS_ADD_BWD,
                                       PEAT_OP_RELU,
                                       PEAT_OP_RELU_BWD,
                                       PEAT_OP_GELU,
                                       PEAT_OP_GELU_BWD,
                                       PEAT_OP_SOFTMAX,
                                       PEAT_OP_SOFTMAX_BWD,
                                       PEAT_OP_LAYERNORM,
                                       PEAT_OP_LAYERNORM_BWD,
                                       PEAT_OP_ATTENTION,
                                       PEAT_OP_ATTENTION_BWD,
                                       PEAT_OP_EMBEDDING,
                                       PEAT_OP_EMBEDDING_BWD,
                                       PEAT_OP_CROSS_ENTROPY,
                                       PEAT_OP_CROSS_ENTROPY_BWD,
                                       PEAT_OP_ADAMW,
                                       PEAT_OP_SGD,
                                       PEAT_OP_REDUCE,
                                       PEAT_OP_RMSNORM,
                                       PEAT_OP_RMSNORM_BWD,
                                       PEAT_OP_SILU,
                                       PEAT_OP_SILU_BWD,
                                       PEAT_OP_SWIGLU,
                                       PEAT_OP_SWIGLU_BWD,
                                       PEAT_OP_ROPE,
                                       PEAT_OP_ROPE_BWD,
                                       PEAT_OP_BATCHNORM,
                                       PEAT_OP_BATCHNORM_BWD,
                                       PEAT_OP_MAXPOOL2D,
                                       PEAT_OP_MAXPOOL2D_BWD,
                                       PEAT_OP_AVGPOOL2D,
                                       PEAT_OP_AVGPOOL2D_BWD,
                                       PEAT_OP_GEMM_FP8};
/* the ops with device goldens (CUDA/HIP, OpenCL): every op */
#define DEVICE_OPS ((int)(sizeof all_ops / sizeof all_ops[0]))

/* Runs kernel `name` of `backend` on case c (a device kernel: staged through the device). */
static inline peat_args run_on(const char *backend, const char *name, const gcase *c)
{
    const peat_kernel *k = peat_registry_find_on(name, backend);
    cr_assert_not_null(k, "%s is not registered on %s", name, backend);
    peat_args a = peat_args_make(c->op, &c->p, c->n_in, (const peat_tensor *const *)c->in, 0, NULL);
    cr_assert_eq(peat_op_alloc_outputs(&a, PEAT_DTYPE_F32), PEAT_OK, "%s outputs", name);
    cr_assert_eq(peat_kernel_run(k, &a), PEAT_OK, "%s: %s", name, peat_error_last());
    return a;
}

/* Kernel `name` of `backend` within gamma_K mag of exact for every output of case (op, variant). */
static inline void within_bound_on(const char *backend, const char *name, peat_op_kind op,
                                   int variant, uint64_t seed)
{
    gcase c = make_case(op, variant, seed);
    peat_args g = run_on(backend, name, &c);
    char ex[64];
    snprintf(ex, sizeof ex, "%s_exact", peat_op_name(op));
    peat_args e = run_k(ex, op, &c.p, c.n_in, c.in);
    for (int o = 0; o < e.n_out; o++) {
        int64_t bad;
        double w = bound_ratio(&c, &g, &e, o, 0, &bad);
        cr_assert_eq(bad, 0,
                     "%s on %s (variant %d) out %d: %lld elements beyond gamma_K mag, worst "
                     "%.3g x bound",
                     name, backend, variant, o, (long long)bad, w);
    }
    peat_args_free_outputs(&g);
    peat_args_free_outputs(&e);
    gcase_free(&c);
}

#endif
