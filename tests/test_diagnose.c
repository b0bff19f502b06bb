/* test_diagnose.c: the differential diagnosis. Its experiments keep the op's meaning (a
 * permutation's map, checked through the exact kernel; small integers exact in bf16), its read-outs
 * measure what they say on constructed errors, its decision follows each experiment's outcome, and
 * whole campaigns of constructed defects are decided by the experiment that tells their
 * explanations apart. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/experiment.h"
#include "detector/detector.h"
#include "harness/campaign/campaign.h"
#include "harness/run/run.h"
#include "harness/runtime/builtin.h"
#include "peat/plugin.h"
#include "predictor/predictor.h"

static void setup(void)
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK, "registry init: %s", peat_error_last());
}

/* ---- experiments keep the op's meaning ---- */

static peat_tensor *gauss(peat_rng_t *r, int nd, const int64_t *shape)
{
    peat_tensor *t = NULL;
    cr_assert_eq(peat_tensor_alloc(PEAT_DTYPE_F32, nd, shape, &t), PEAT_OK);
    peat_rng_fill_gaussian(r, t, 1.0);
    return t;
}

/* The exact kernel's first output on a call (F64). */
static peat_args exact_of(const peat_args *in)
{
    const peat_kernel *ek = peat_registry_role(in->op, PEAT_ROLE_EXACT, "cpu");
    cr_assert_not_null(ek, "exact %s", peat_op_name(in->op));
    peat_args e = *in;
    e.n_out = 0;
    cr_assert_eq(peat_op_alloc_outputs(&e, PEAT_DTYPE_F64), PEAT_OK);
    cr_assert_eq(peat_kernel_run(ek, &e), PEAT_OK, "%s", peat_error_last());
    return e;
}

/* Permuting the inputs permutes output 0 as the experiment's map says. */
static void check_permutation(peat_args *base)
{
    peat_experiment ex;
    cr_assert_eq(peat_analyzer_experiment_make(base, PEAT_EXP_PERMUTE, 7, &ex), PEAT_OK, "%s: %s",
                 peat_op_name(base->op), peat_error_last());
    peat_args eb = exact_of(base), ep = exact_of(&ex.args);
    int64_t n = peat_tensor_numel(eb.out[0]);
    cr_assert_eq(ex.n_src, n, "%s: map of %lld for %lld outputs", peat_op_name(base->op),
                 (long long)ex.n_src, (long long)n);
    const double *b = eb.out[0]->data, *p = ep.out[0]->data;
    int64_t moved = 0;
    for (int64_t i = 0; i < n; i++) {
        cr_assert(fabs(p[i] - b[ex.src[i]]) <= 1e-12 * (fabs(b[ex.src[i]]) + 1e-30) + 1e-300,
                  "%s: output %lld is %.17g, base output %lld is %.17g", peat_op_name(base->op),
                  (long long)i, p[i], (long long)ex.src[i], b[ex.src[i]]);
        moved += ex.src[i] != i;
    }
    cr_expect_gt(moved, 0, "%s: the permutation moved nothing", peat_op_name(base->op));
    /* the outputs of the op's second size (a norm's statistics) by their own map */
    for (int o = 1; o < eb.n_out && ex.src2; o++) {
        if (peat_tensor_numel(eb.out[o]) != ex.n_src2 || ex.n_src2 == n) continue;
        const double *b2 = eb.out[o]->data, *p2 = ep.out[o]->data;
        for (int64_t i = 0; i < ex.n_src2; i++)
            cr_assert(fabs(p2[i] - b2[ex.src2[i]]) <= 1e-12 * fabs(b2[ex.src2[i]]) + 1e-300,
                      "%s output %d: [%lld] is %.17g, base [%lld] is %.17g", peat_op_name(base->op),
                      o, (long long)i, p2[i], (long long)ex.src2[i], b2[ex.src2[i]]);
    }
    peat_args_free_outputs(&eb);
    peat_args_free_outputs(&ep);
    peat_analyzer_experiment_free(&ex);
    for (int k = 0; k < base->n_in; k++) peat_tensor_free((peat_tensor *)base->in[k]);
}

Test(diagnose, permutations_keep_the_op, .init = setup)
{
    peat_rng_t *r = peat_rng_new(11);
    for (int t = 0; t < 4; t++) { /* GEMM: every transpose, a batch, beta */
        peat_args a = {.op = PEAT_OP_GEMM};
        int tA = t & 1, tB = t >> 1;
        int64_t M = 7, N = 5, K = 9, B = 2;
        a.p.i[0] = tA, a.p.i[1] = tB, a.p.i[2] = M, a.p.i[3] = N, a.p.i[4] = K, a.p.i[5] = B;
        a.p.f[0] = 1.0, a.p.f[1] = t == 3 ? 0.5 : 0.0;
        a.in[0] = gauss(r, 3, (int64_t[]){B, tA ? K : M, tA ? M : K});
        a.in[1] = gauss(r, 3, (int64_t[]){B, tB ? N : K, tB ? K : N});
        a.n_in = 2;
        if (t == 3) a.in[2] = gauss(r, 3, (int64_t[]){B, M, N}), a.n_in = 3;
        check_permutation(&a);
    }
    peat_args s = {.op = PEAT_OP_SOFTMAX, .n_in = 1};
    s.p.i[0] = 6, s.p.i[1] = 10;
    s.in[0] = gauss(r, 2, (int64_t[]){6, 10});
    check_permutation(&s);
    peat_args l = {.op = PEAT_OP_LAYERNORM, .n_in = 3};
    l.p.i[0] = 5, l.p.i[1] = 12, l.p.f[0] = 1e-5;
    l.in[0] = gauss(r, 2, (int64_t[]){5, 12});
    l.in[1] = gauss(r, 1, (int64_t[]){12}), l.in[2] = gauss(r, 1, (int64_t[]){12});
    check_permutation(&l);
    peat_args bn = {.op = PEAT_OP_BATCHNORM, .n_in = 5};
    bn.p.i[0] = 3, bn.p.i[1] = 4, bn.p.i[2] = 5, bn.p.f[0] = 1e-5, bn.p.f[1] = 0.1;
    bn.in[0] = gauss(r, 3, (int64_t[]){3, 4, 5});
    for (int k = 1; k < 5; k++) bn.in[k] = gauss(r, 1, (int64_t[]){4});
    float *rv = ((peat_tensor *)bn.in[4])->data;
    for (int i = 0; i < 4; i++) rv[i] = fabsf(rv[i]) + 0.5f;
    check_permutation(&bn);
    peat_args rd = {.op = PEAT_OP_REDUCE, .n_in = 1};
    rd.p.i[0] = 4, rd.p.i[1] = 9;
    rd.in[0] = gauss(r, 2, (int64_t[]){4, 9});
    check_permutation(&rd);
    peat_args bb = {.op = PEAT_OP_BIAS_ADD_BWD, .n_in = 1};
    bb.p.i[0] = 3, bb.p.i[1] = 6, bb.p.i[2] = 4;
    bb.in[0] = gauss(r, 3, (int64_t[]){3, 6, 4});
    check_permutation(&bb);
    peat_args at = {.op = PEAT_OP_ATTENTION, .n_in = 3};
    at.p.i[0] = 2, at.p.i[1] = 2, at.p.i[2] = 5, at.p.i[3] = 4, at.p.i[4] = 1, at.p.f[0] = 0.5;
    for (int k = 0; k < 3; k++) at.in[k] = gauss(r, 4, (int64_t[]){2, 2, 5, 4});
    check_permutation(&at);
    for (int bwd = 0; bwd < 2; bwd++) { /* conv: images and channels */
        peat_args cv = {.op = bwd ? PEAT_OP_CONV2D_BWD_DATA : PEAT_OP_CONV2D, .n_in = 2};
        int64_t N = 3, C = 2, H = 6, W = 5, O = 4, KH = 3, KW = 2, stride = 1, pad = 1;
        int64_t OH = (H + 2 * pad - KH) / stride + 1, OW = (W + 2 * pad - KW) / stride + 1;
        int64_t q[] = {N, C, H, W, O, KH, KW, stride, pad};
        memcpy(cv.p.i, q, sizeof q);
        cv.in[0] =
            bwd ? gauss(r, 4, (int64_t[]){N, O, OH, OW}) : gauss(r, 4, (int64_t[]){N, C, H, W});
        cv.in[1] = gauss(r, 4, (int64_t[]){O, C, KH, KW});
        check_permutation(&cv);
    }
    /* pooling: planes, and each plane turned by 180 degrees where the windows tile it evenly */
    static const int64_t pq[][7] = {{2, 3, 6, 4, 2, 2, 0}, {1, 2, 5, 7, 3, 1, 1}};
    for (int s2 = 0; s2 < 2; s2++)
        for (int op = 0; op < 4; op++) {
            static const peat_op_kind ops[4] = {PEAT_OP_MAXPOOL2D, PEAT_OP_MAXPOOL2D_BWD,
                                                PEAT_OP_AVGPOOL2D, PEAT_OP_AVGPOOL2D_BWD};
            const int64_t *q = pq[s2];
            int64_t OH = (q[2] + 2 * q[6] - q[4]) / q[5] + 1,
                    OW = (q[3] + 2 * q[6] - q[4]) / q[5] + 1;
            peat_args pa = {.op = ops[op]};
            memcpy(pa.p.i, q, 7 * sizeof *q);
            const int64_t xs[4] = {q[0], q[1], q[2], q[3]}, ys[4] = {q[0], q[1], OH, OW};
            if (op != 3) pa.in[pa.n_in++] = gauss(r, 4, xs);
            if (op % 2) pa.in[pa.n_in++] = gauss(r, 4, ys);
            check_permutation(&pa);
        }
    peat_args ad = {.op = PEAT_OP_ADAMW, .n_in = 4};
    ad.p.i[0] = 17, ad.p.i[1] = 3;
    ad.p.f[0] = 1e-3, ad.p.f[1] = 0.9, ad.p.f[2] = 0.999, ad.p.f[3] = 1e-8, ad.p.f[4] = 0.01;
    for (int k = 0; k < 4; k++) ad.in[k] = gauss(r, 1, (int64_t[]){17});
    float *v = ((peat_tensor *)ad.in[3])->data;
    for (int i = 0; i < 17; i++) v[i] = fabsf(v[i]);
    check_permutation(&ad);
    peat_rng_free(r);
}

/* RoPE's permutation moves planes and rotated pairs whole, in order, in either layout: its input
 * is the base's at the map (each pair then turns by its new index's angle, so the outputs are not
 * the base's: what stays with the index is a structural defect). */
Test(diagnose, rope_pairs_move_whole, .init = setup)
{
    peat_rng_t *r = peat_rng_new(12);
    for (int half = 0; half < 2; half++) {
        int64_t B = 1, H = 2, T = 3, D = 8, h = D / 2;
        peat_args a = {.op = PEAT_OP_ROPE, .n_in = 1};
        int64_t v[6] = {B, H, T, D, half, 0};
        memcpy(a.p.i, v, sizeof v);
        a.p.f[0] = 10000.0;
        a.in[0] = gauss(r, 4, (int64_t[]){B, H, T, D});
        peat_experiment ex;
        cr_assert_eq(peat_analyzer_experiment_make(&a, PEAT_EXP_PERMUTE, 7, &ex), PEAT_OK, "%s",
                     peat_error_last());
        const float *x = a.in[0]->data, *xp = ex.args.in[0]->data;
        int64_t moved = 0, n = B * H * T * D;
        cr_assert_eq(ex.n_src, n, "map of %lld for %lld values", (long long)ex.n_src, (long long)n);
        for (int64_t i = 0; i < n; i++) {
            cr_assert_eq(xp[i], x[ex.src[i]], "layout %d: value %lld not from %lld", half,
                         (long long)i, (long long)ex.src[i]);
            int64_t d = i % D, mate = half ? (d < h ? i + h : i - h) : (d % 2 ? i - 1 : i + 1);
            cr_assert_eq(ex.src[mate] - ex.src[i], mate - i,
                         "layout %d: the pair of %lld split by the permutation", half,
                         (long long)i);
            moved += ex.src[i] % D != d;
        }
        cr_expect_gt(moved, 0, "layout %d: no pair moved", half);
        peat_analyzer_experiment_free(&ex);
        peat_tensor_free((peat_tensor *)a.in[0]);
    }
    peat_rng_free(r);
}

/* Small integers: every value +-1 or 0, at most 64 nonzero terms per dot product, so every
 * partial sum is an integer below 2^8 (exact in bf16, fp16 and fp32 whatever the order). */
Test(diagnose, small_integers_are_exact_in_bf16, .init = setup)
{
    peat_rng_t *r = peat_rng_new(3);
    peat_args a = {.op = PEAT_OP_GEMM, .n_in = 2};
    int64_t M = 9, N = 11, K = 300;
    a.p.i[2] = M, a.p.i[3] = N, a.p.i[4] = K, a.p.i[5] = 1, a.p.f[0] = 1.0;
    a.in[0] = gauss(r, 3, (int64_t[]){1, M, K});
    a.in[1] = gauss(r, 3, (int64_t[]){1, K, N});
    peat_experiment ex;
    cr_assert_eq(peat_analyzer_experiment_make(&a, PEAT_EXP_INTEGERS, 1, &ex), PEAT_OK);
    const float *A = ex.args.in[0]->data, *B = ex.args.in[1]->data;
    for (int64_t i = 0; i < M * K; i++) cr_assert(A[i] == 0 || fabsf(A[i]) == 1, "A %g", A[i]);
    for (int64_t i = 0; i < K * N; i++) cr_assert(B[i] == 0 || fabsf(B[i]) == 1, "B %g", B[i]);
    for (int64_t i = 0; i < M; i++) {
        int nz = 0;
        for (int64_t k = 0; k < K; k++) nz += A[i * K + k] != 0;
        cr_expect_leq(nz, 64, "row %lld has %d nonzero terms", (long long)i, nz);
        cr_expect_gt(nz, 8, "row %lld has only %d nonzero terms", (long long)i, nz);
    }
    /* the op is not linear in general: softmax has no integer experiment */
    peat_args s = {.op = PEAT_OP_SOFTMAX, .n_in = 1};
    s.p.i[0] = 2, s.p.i[1] = 3;
    s.in[0] = a.in[0];
    peat_experiment none;
    cr_expect_eq(peat_analyzer_experiment_make(&s, PEAT_EXP_INTEGERS, 1, &none), PEAT_ERR_NOTFOUND);
    peat_analyzer_experiment_free(&ex);
    peat_tensor_free((peat_tensor *)a.in[0]);
    peat_tensor_free((peat_tensor *)a.in[1]);
    peat_rng_free(r);
}

/* Every other op's small-integer form (its descriptor's): on a synthetic call of two shapes, the
 * golden kernel gives the exact value on every output the form names whose exact values are short
 * (8 significand bits), and at least one output is; the ops without a form say so. */
Test(diagnose, small_integers_of_every_op_are_exact, .init = setup)
{
    int covered = 0;
    for (int op = 0; op < PEAT_OP_COUNT; op++) {
        const peat_kernel *g = peat_registry_role((peat_op_kind)op, PEAT_ROLE_GOLDEN, "cpu");
        if (op == PEAT_OP_GEMM || !g) continue;
        for (int odd = 0; odd < 2; odd++) {
            peat_op_params p;
            peat_predictor_shape((peat_op_kind)op, 16, odd, &p);
            peat_pred_call c;
            cr_assert_eq(peat_predictor_call_alloc(g, &p, 11, &c), PEAT_OK, "%s: %s",
                         peat_op_name((peat_op_kind)op), peat_error_last());
            peat_experiment ex;
            peat_status st = peat_analyzer_experiment_make(&c.a, PEAT_EXP_INTEGERS, 1, &ex);
            peat_predictor_call_free(&c);
            if (st == PEAT_ERR_NOTFOUND) continue;
            cr_assert_eq(st, PEAT_OK, "%s: %s", peat_op_name((peat_op_kind)op), peat_error_last());
            cr_assert_neq(ex.exact_mask, 0u, "%s", peat_op_name((peat_op_kind)op));
            peat_args ga = ex.args;
            ga.n_out = 0;
            cr_assert_eq(peat_op_alloc_outputs(&ga, PEAT_DTYPE_F32), PEAT_OK);
            cr_assert_eq(peat_kernel_run(g, &ga), PEAT_OK, "%s", peat_error_last());
            peat_args ea = exact_of(&ex.args);
            int shorts = 0;
            for (int o = 0; o < ga.n_out; o++) {
                if (!(ex.exact_mask >> o & 1u)) continue;
                const double *e = ea.out[o]->data;
                const float *t = ga.out[o]->data;
                int64_t n = peat_tensor_numel(ga.out[o]), is_short = 1, nonzero = 0;
                for (int64_t i = 0; i < n && is_short; i++) {
                    int ex2;
                    double m = ldexp(frexp(e[i], &ex2), 8);
                    is_short = m == floor(m);
                    nonzero += e[i] != 0.0;
                }
                if (!is_short) continue;
                shorts++;
                cr_expect_gt(nonzero, 0, "%s output %d: all zero", peat_op_name((peat_op_kind)op),
                             o);
                for (int64_t i = 0; i < n; i++)
                    cr_assert_eq((double)t[i], e[i],
                                 "%s output %d [%lld]: golden %.9g, exact %.17g",
                                 peat_op_name((peat_op_kind)op), o, (long long)i, t[i], e[i]);
            }
            cr_expect_gt(shorts, 0, "%s (%s): no output short on small integers",
                         peat_op_name((peat_op_kind)op), odd ? "odd" : "even");
            covered++;
            peat_args_free_outputs(&ga);
            peat_args_free_outputs(&ea);
            peat_analyzer_experiment_free(&ex);
        }
    }
    /* reduce, bias_add_bwd, embedding_bwd, softmax_bwd, layernorm (its mean), layernorm_bwd,
     * rmsnorm_bwd, batchnorm (its mean), batchnorm_bwd, maxpool2d_bwd and the three
     * convolutions, at two shapes each */
    cr_expect_eq(covered, 2 * 13, "%d op shapes with a small-integer form", covered);
}

/* The read-outs on constructed errors: a smooth error kept, independent draws redrawn; gross
 * errors at fixed positions vs moved with a map. */
Test(diagnose, readouts_measure_what_they_say)
{
    enum { N = 4000 };
    static double b[N], same[N], redrawn[N], moved[N];
    static int64_t src[N];
    peat_rng_t *r = peat_rng_new(5);
    for (int i = 0; i < N; i++) {
        b[i] = 50.0 * sin(0.01 * i);
        same[i] = b[i] * (1.0 + 0.01 * (2 * peat_rng_uniform(r) - 1));
        redrawn[i] = peat_rng_gaussian(r, 50.0);
        src[i] = (i * 7 + 3) % N;
    }
    cr_expect_gt(peat_analyzer_exp_corr(b, same, NULL, N, 1.0), 0.95);
    cr_expect_lt(fabs(peat_analyzer_exp_corr(b, redrawn, NULL, N, 1.0)), 0.1);
    /* gross errors (beyond 16 bounds) on the first 100 elements; moved: where the map sends them */
    for (int i = 0; i < N; i++) b[i] = i < 100 ? 100.0 : 0.5;
    for (int i = 0; i < N; i++) moved[i] = src[i] < 100 ? 100.0 : 0.5;
    cr_expect_float_eq(peat_analyzer_exp_overlap(b, b, NULL, N), 1.0, 1e-12);
    cr_expect_lt(peat_analyzer_exp_overlap(b, moved, NULL, N), 0.1);
    cr_expect_float_eq(peat_analyzer_exp_overlap(b, moved, src, N), 1.0, 1e-12);
    peat_rng_free(r);
}

/* ---- the decision, experiment by experiment ---- */

static peat_finding failing(peat_finding_class c, const char *params)
{
    peat_finding f;
    memset(&f, 0, sizeof f);
    f.cls = c, f.accept = PEAT_ACCEPT_FAIL, f.confidence = 0.8;
    snprintf(f.params, sizeof f.params, "%s", params);
    snprintf(f.experiment, sizeof f.experiment, "recorded calls");
    f.n_evidence = 1;
    snprintf(f.evidence[0], sizeof f.evidence[0], "old evidence");
    return f;
}

static peat_diagnosis base_diag(int64_t n, int64_t gross)
{
    peat_diagnosis d;
    memset(&d, 0, sizeof d);
    d.ran = 1;
    snprintf(d.base, sizeof d.base, "recorded call 1 (fc1)");
    d.base_n = n, d.base_gross = gross, d.base_eff_bits = 9.0, d.n_outputs = 1;
    for (int k = 0; k < PEAT_EXP_COUNT; k++) d.exp[k].corr = d.exp[k].stay = d.exp[k].follow = NAN;
    return d;
}

static peat_finding decided(const peat_finding *was, const peat_diagnosis *d)
{
    peat_finding out;
    cr_assert_eq(peat_detector_diagnose(was, d, &out), 1);
    cr_expect_neq(out.experiment[0], 0, "no deciding experiment named");
    cr_expect_eq(out.accept, was->accept, "the acceptance never changes");
    return out;
}

static peat_finding decided_from(peat_finding_class c, const char *params, const peat_diagnosis *d)
{
    peat_finding was = failing(c, params);
    return decided(&was, d);
}

#define EXPECT_CLASS(f, c, exp)                                                                    \
    do {                                                                                           \
        cr_expect_eq((f).cls, c, "class %s, expected %s", peat_detector_finding_name((f).cls),     \
                     peat_detector_finding_name(c));                                               \
        cr_expect_str_eq((f).experiment, exp, "decided by %s", (f).experiment);                    \
    } while (0)

Test(diagnose, decisions_follow_the_experiments)
{
    peat_finding oob = failing(PEAT_FIND_OUT_OF_BOUND, "n=5");
    /* NaN that goes away at 2^-16: an overflow; NaN that stays: a NaN source */
    peat_diagnosis d = base_diag(1000, 10);
    d.base_nonfinite = 10;
    d.exp[PEAT_EXP_SCALE_DOWN] = (peat_exp_outcome){.ran = 1, .fails = 0, .n = 1000};
    peat_finding f = decided(&oob, &d);
    EXPECT_CLASS(f, PEAT_FIND_RANGE, "scale 2^-16");
    d.exp[PEAT_EXP_SCALE_DOWN].fails = 1, d.exp[PEAT_EXP_SCALE_DOWN].n_nonfinite = 10;
    f = decided(&oob, &d);
    EXPECT_CLASS(f, PEAT_FIND_NAN, "scale 2^-16");
    cr_expect(strstr(f.ruled_out, "RANGE") != NULL, "ruled out %s", f.ruled_out);
    /* errors only where the exact result is subnormal */
    d = base_diag(1000, 1000);
    d.base_subnormal = 1.0;
    d.exp[PEAT_EXP_SCALE_UP] = (peat_exp_outcome){.ran = 1, .fails = 0};
    f = decided_from(PEAT_FIND_WRONG_RESULT, "", &d);
    EXPECT_CLASS(f, PEAT_FIND_FTZ, "scale 2^+32");
    /* ... also on a large-values probe whose errors go away at 2^-16 (the flush first) */
    d.base_overflow = 1;
    d.exp[PEAT_EXP_SCALE_DOWN] = (peat_exp_outcome){.ran = 1, .fails = 0, .n = 1000};
    f = decided_from(PEAT_FIND_RANGE, "", &d);
    EXPECT_CLASS(f, PEAT_FIND_FTZ, "scale 2^+32");
    /* whole planes of the base wrong, the others within the bound: a plane map, unless the
     * permutation moved the errors with the values */
    d = base_diag(1000, 750);
    d.base_plane_confined = 1, d.base_planes = 4, d.base_wrong_planes = 3;
    d.base_first_wrong_plane = 1;
    d.exp[PEAT_EXP_JITTER] = (peat_exp_outcome){.ran = 1, .fails = 1, .corr = 0.99};
    f = decided_from(PEAT_FIND_WRONG_RESULT, "", &d);
    EXPECT_CLASS(f, PEAT_FIND_STRUCTURAL, "base call planes");
    cr_expect_str_eq(f.params, "planes,wrong=3/4,first=1", "params %s", f.params);
    d.base_gross = 400; /* confined: the permutation is read, and here the errors follow */
    d.exp[PEAT_EXP_PERMUTE] = (peat_exp_outcome){.ran = 1, .fails = 1, .stay = 0.1, .follow = 0.95};
    f = decided_from(PEAT_FIND_WRONG_RESULT, "", &d);
    EXPECT_CLASS(f, PEAT_FIND_WRONG_RESULT, "jitter");
    /* a flush (or range) finding stands against a rounding reading of the recorded base, unless
     * a probe made it (its experiment or its params say so): then what the recorded values show,
     * a narrower format, is what training meets */
    d = base_diag(1000, 900);
    d.exp[PEAT_EXP_JITTER] = (peat_exp_outcome){.ran = 1, .fails = 1, .corr = 0.03};
    peat_finding ftz = failing(PEAT_FIND_FTZ, "n=900");
    f = decided(&ftz, &d);
    EXPECT_CLASS(f, PEAT_FIND_FTZ, "jitter");
    snprintf(ftz.experiment, sizeof ftz.experiment, "probe: value subnormal outputs");
    f = decided(&ftz, &d);
    EXPECT_CLASS(f, PEAT_FIND_REDUCED_PRECISION, "jitter");
    f = decided_from(PEAT_FIND_RANGE, "overflow,probe=value x 1e4", &d);
    EXPECT_CLASS(f, PEAT_FIND_REDUCED_PRECISION, "jitter");
    /* a region is read within the outputs the base fails: 8 gross errors among 1000 elements
     * are a region of a big output, but not of the 8-element output (a running mean) they fill */
    d = base_diag(1000, 8);
    d.exp[PEAT_EXP_JITTER] = (peat_exp_outcome){.ran = 1, .fails = 1, .corr = 0.99};
    f = decided_from(PEAT_FIND_TILE, "boundary,cols=7", &d);
    EXPECT_CLASS(f, PEAT_FIND_STRUCTURAL, "jitter");
    d.base_n_failing = 8;
    f = decided_from(PEAT_FIND_TILE, "boundary,cols=7", &d);
    EXPECT_CLASS(f, PEAT_FIND_WRONG_RESULT, "jitter");
    /* another function on the recorded values at another extent: a path (STRUCTURAL shape);
     * rounding there stays rounding (a loss that grows with the length) */
    d = base_diag(1000, 900);
    d.base_extent = 1;
    d.exp[PEAT_EXP_JITTER] = (peat_exp_outcome){.ran = 1, .fails = 1, .corr = 0.99};
    f = decided_from(PEAT_FIND_WRONG_RESULT, "", &d);
    EXPECT_CLASS(f, PEAT_FIND_STRUCTURAL, "jitter");
    cr_expect_str_eq(f.params, "shape", "params %s", f.params);
    d.exp[PEAT_EXP_JITTER].corr = 0.05;
    f = decided_from(PEAT_FIND_WRONG_RESULT, "", &d);
    EXPECT_CLASS(f, PEAT_FIND_REDUCED_PRECISION, "jitter");
    /* errors that stay at their positions under a permutation: structural */
    d = base_diag(1000, 40);
    d.exp[PEAT_EXP_PERMUTE] = (peat_exp_outcome){.ran = 1, .fails = 1, .stay = 0.95, .follow = 0.1};
    f = decided_from(PEAT_FIND_WRONG_RESULT, "", &d);
    EXPECT_CLASS(f, PEAT_FIND_STRUCTURAL, "permutation");
    /* errors that move with the values, kept by a jitter: a formula */
    d.exp[PEAT_EXP_PERMUTE].stay = 0.1, d.exp[PEAT_EXP_PERMUTE].follow = 0.95;
    d.exp[PEAT_EXP_JITTER] = (peat_exp_outcome){.ran = 1, .fails = 1, .corr = 0.97};
    f = decided_from(PEAT_FIND_TILE, "rows=4", &d);
    EXPECT_CLASS(f, PEAT_FIND_WRONG_RESULT, "jitter");
    /* ... redrawn by the jitter: rounding (toward zero: truncation) */
    d.exp[PEAT_EXP_JITTER].corr = 0.05;
    f = decided_from(PEAT_FIND_BITFLIP, "bit=3,count=2", &d);
    EXPECT_CLASS(f, PEAT_FIND_REDUCED_PRECISION, "jitter");
    d.base_toward_zero = 1;
    f = decided(&oob, &d);
    EXPECT_CLASS(f, PEAT_FIND_TRUNCATION, "jitter");
    /* a lower precision whose errors all shrink |x| is a truncation to it */
    f = decided_from(PEAT_FIND_REDUCED_PRECISION, "bits=8", &d);
    EXPECT_CLASS(f, PEAT_FIND_TRUNCATION, "jitter");
    /* a failing approximation (a smooth deviation beyond 1e-3 of the scale) kept by the jitter
     * is another function */
    d.exp[PEAT_EXP_JITTER].corr = 0.99;
    f = decided_from(PEAT_FIND_APPROX, "max_abs=0.02", &d);
    EXPECT_CLASS(f, PEAT_FIND_WRONG_RESULT, "jitter");
    /* a failing NOISE that repeats is rounding when the jitter redraws it */
    d.exp[PEAT_EXP_JITTER].corr = 0.02;
    d.base_toward_zero = 0;
    f = decided_from(PEAT_FIND_NOISE, "sigma=0.002", &d);
    EXPECT_CLASS(f, PEAT_FIND_REDUCED_PRECISION, "jitter");
    /* a region seen on one probe shape, the base wrong everywhere and kept by the jitter: a
     * formula; seen on several shapes (a tile inferred), it stands */
    peat_diagnosis dense = base_diag(1000, 900);
    dense.exp[PEAT_EXP_JITTER] = (peat_exp_outcome){.ran = 1, .fails = 1, .corr = 0.99};
    f = decided_from(PEAT_FIND_TILE, "boundary,rows=3,shape=8x16", &dense);
    EXPECT_CLASS(f, PEAT_FIND_WRONG_RESULT, "jitter");
    f = decided_from(PEAT_FIND_TILE, "boundary,rows=1,shape=33x65,tile=32", &dense);
    EXPECT_CLASS(f, PEAT_FIND_STRUCTURAL, "jitter");
    /* a large-value probe as the base, its finite errors gone at 2^-16: saturation, a range */
    peat_diagnosis sat = base_diag(500, 40);
    sat.base_overflow = 1;
    sat.exp[PEAT_EXP_SCALE_DOWN] = (peat_exp_outcome){.ran = 1, .fails = 0, .max_norm = 0.3};
    sat.exp[PEAT_EXP_JITTER] = (peat_exp_outcome){.ran = 1, .fails = 1, .corr = 0.99};
    f = decided_from(PEAT_FIND_REDUCED_PRECISION, "bits=4.6", &sat);
    EXPECT_CLASS(f, PEAT_FIND_RANGE, "scale 2^-16");
    /* a jitter in between decides nothing: OUT_OF_BOUND stays, saying what was tried */
    d.exp[PEAT_EXP_JITTER].corr = 0.6;
    f = decided(&oob, &d);
    EXPECT_CLASS(f, PEAT_FIND_OUT_OF_BOUND, "recorded calls");
    cr_expect(strstr(f.evidence[f.n_evidence - 1], "jitter") != NULL, "tried: %s",
              f.evidence[f.n_evidence - 1]);
    /* small integers decide before the jitter (GEMM): exact there is rounding, wrong a formula */
    d = base_diag(1000, 900);
    d.exp[PEAT_EXP_JITTER] = (peat_exp_outcome){.ran = 1, .fails = 1, .corr = 0.99};
    d.exp[PEAT_EXP_INTEGERS] = (peat_exp_outcome){.ran = 1, .fails = 0};
    f = decided_from(PEAT_FIND_REDUCED_PRECISION, "where=accumulation,fmt=fp16,bits=11", &d);
    EXPECT_CLASS(f, PEAT_FIND_REDUCED_PRECISION, "small integers");
    cr_expect_str_eq(f.params, "where=accumulation,fmt=fp16,bits=11", "params kept: %s", f.params);
    d.exp[PEAT_EXP_INTEGERS].fails = 1;
    f = decided_from(PEAT_FIND_RANGE, "", &d);
    EXPECT_CLASS(f, PEAT_FIND_WRONG_RESULT, "small integers");
    /* a GEMM wrong at its shape and right one row or column further: a shape path */
    d.gemm_m = d.gemm_n = 64;
    d.exp[PEAT_EXP_SHAPE_M] = (peat_exp_outcome){.ran = 1, .fails = 0};
    d.exp[PEAT_EXP_SHAPE_N] = (peat_exp_outcome){.ran = 1, .fails = 0};
    f = decided(&oob, &d);
    EXPECT_CLASS(f, PEAT_FIND_STRUCTURAL, "shape axis");
    cr_expect(strstr(f.params, "square") != NULL, "params %s", f.params);
    /* classes the experiments are not asked about */
    peat_finding stuck = failing(PEAT_FIND_STUCK_BIT, "bit=21"), out;
    cr_expect_eq(peat_detector_diagnose(&stuck, &d, &out), 0);
    peat_finding transient = failing(PEAT_FIND_BITFLIP, "transient,count=3");
    cr_expect_eq(peat_detector_diagnose(&transient, &d, &out), 0);
    peat_finding warn = failing(PEAT_FIND_REDUCED_PRECISION, "");
    warn.accept = PEAT_ACCEPT_WARN;
    cr_expect_eq(peat_detector_diagnose(&warn, &d, &out), 0);
}

/* ---- whole campaigns of constructed defects ---- */

/* GEMM taking another path on square shapes: D gets alpha * (sum + 1) when M == N. */
static peat_status gemm_square_path(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const int64_t *q = a->p.i;
    int tA = (int)q[0], tB = (int)q[1];
    int64_t M = q[2], N = q[3], K = q[4], B = q[5] > 0 ? q[5] : 1;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                const float *A = (const float *)a->in[0]->data + b * M * K,
                            *Bm = (const float *)a->in[1]->data + b * K * N;
                double s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += (double)(tA ? A[k * M + i] : A[i * K + k]) *
                         (tB ? Bm[j * K + k] : Bm[k * N + j]);
                if (M == N) s += 1.0;
                float *D = (float *)a->out[0]->data + b * M * N;
                float c =
                    a->p.f[1] != 0 ? ((const float *)a->in[2]->data)[b * M * N + i * N + j] : 0;
                D[i * N + j] = (float)(a->p.f[0] * s + a->p.f[1] * c);
            }
    return PEAT_OK;
}

/* Softmax whose row sum is rounded to bf16: a narrower format in one step. */
static peat_status softmax_sum_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    for (int64_t i = 0; i < R; i++) {
        const float *x = (const float *)a->in[0]->data + i * C;
        float *y = (float *)a->out[0]->data + i * C, mx = -INFINITY;
        double s = 0;
        for (int64_t j = 0; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) s += y[j] = expf(x[j] - mx);
        int e;
        double m = frexp(s, &e);
        float sb = (float)ldexp(nearbyint(ldexp(m, 8)), e - 8);
        for (int64_t j = 0; j < C; j++) y[j] /= sb;
    }
    return PEAT_OK;
}

/* GELU with a leaky slope below zero: x for x > 0 as GELU, plus 0.05 x for x < 0. */
static peat_status gelu_leaky(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        double v = x[i];
        y[i] = (float)(0.5 * v * (1.0 + erf(v / sqrt(2.0))) + (v < 0 ? 0.05 * v : 0.0));
    }
    return PEAT_OK;
}

/* RoPE whose last rotated pair turns by the first pair's angle: one pair of every row wrong,
 * whatever the values (either layout). */
static float bf16(float x)
{
    if (x == 0.0f || !isfinite(x)) return x;
    int e;
    double m = frexp((double)x, &e);
    return (float)ldexp(nearbyint(ldexp(m, 8)), e - 8);
}

/* RoPE by the angle table: the last pair of each row at pair 0's angle (table = 0), or every
 * cos and sin rounded to bf16 (table = 1: a position table cached in bf16) */
static peat_status rope_table(const peat_args *a, int table)
{
    const int64_t *q = a->p.i;
    int64_t B = q[0], H = q[1], T = q[2], D = q[3], half = q[4], pos0 = q[5], h = D / 2;
    double sign = a->op == PEAT_OP_ROPE_BWD ? -1.0 : 1.0;
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t r = 0; r < B * H * T; r++)
        for (int64_t j = 0; j < h; j++) {
            int64_t t = r % T, i0 = half ? j : 2 * j, i1 = half ? j + h : 2 * j + 1;
            int64_t jj = table == 0 && j == h - 1 ? 0 : j;
            double ang = (double)(pos0 + t) * pow(a->p.f[0], -2.0 * (double)jj / (double)D);
            double c = cos(ang), sn = sign * sin(ang), x0 = x[r * D + i0], x1 = x[r * D + i1];
            if (table == 1) c = bf16((float)c), sn = bf16((float)sn);
            y[r * D + i0] = (float)(x0 * c - x1 * sn);
            y[r * D + i1] = (float)(x0 * sn + x1 * c);
        }
    return PEAT_OK;
}
static peat_status rope_table_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return rope_table(a, 1);
}

static peat_status rope_last_pair(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return rope_table(a, 0);
}

/* Batch norm whose running variance takes the biased batch variance (1/M, not 1/(M-1)): a slip
 * of a few bounds in one small output, the others right. */
static peat_status bn_running_var_biased(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const peat_kernel *g = peat_registry_role(PEAT_OP_BATCHNORM, PEAT_ROLE_GOLDEN, "cpu");
    PEAT_TRY(peat_kernel_run(g, (peat_args *)a));
    int64_t N = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    double M = (double)(N * S), mom = a->p.f[1];
    const float *x = a->in[0]->data;
    float *rv = a->out[4]->data;
    for (int64_t c = 0; c < C; c++) {
        double m = 0, v = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < S; k++) m += x[(n * C + c) * S + k];
        m /= M;
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < S; k++) {
                double d = x[(n * C + c) * S + k] - m;
                v += d * d;
            }
        rv[c] = (float)((double)rv[c] - mom * v / (M - 1.0) / M);
    }
    return PEAT_OK;
}

/* batch norm backward by the golden, then dgamma's per-channel sum of dY x-hat again with a bf16
 * running sum (kind 0: a precision loss the jitter keeps, swamped terms), or dbeta as the sum of
 * dY gamma (kind 1: another function) */
static peat_status bn_bwd_redo(const peat_args *a, int kind)
{
    const peat_kernel *g = peat_registry_role(PEAT_OP_BATCHNORM_BWD, PEAT_ROLE_GOLDEN, "cpu");
    PEAT_TRY(peat_kernel_run(g, (peat_args *)a));
    int64_t N = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    const float *x = a->in[0]->data, *gam = a->in[1]->data, *mean = a->in[2]->data,
                *rstd = a->in[3]->data, *dy = a->in[4]->data;
    for (int64_t c = 0; c < C; c++) {
        float acc = 0.0f;
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < S; k++) {
                int64_t i = (n * C + c) * S + k;
                acc = kind == 0 ? bf16(acc + dy[i] * ((x[i] - mean[c]) * rstd[c]))
                                : acc + dy[i] * gam[c];
            }
        ((float *)a->out[kind == 0 ? 1 : 2]->data)[c] = acc;
    }
    return PEAT_OK;
}
static peat_status bn_bwd_dgamma_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return bn_bwd_redo(a, 0);
}
static peat_status bn_bwd_dbeta_gamma(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return bn_bwd_redo(a, 1);
}

/* reduce with a half accumulator that saturates at 65504: wrong only where a sum leaves fp16's
 * range, which no recorded call does and a large-value probe does, untagged or not */
static peat_status reduce_sat_f16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = a->in[0]->data;
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t j = 0; j < C; j++) s = fmax(-65504.0, fmin(65504.0, s + x[r * C + j]));
        ((float *)a->out[0]->data)[r] = (float)(a->p.i[2] == 1 ? s / (double)C : s);
    }
    return PEAT_OK;
}

/* fp8 GEMM whose fp32 running sum is cut to bf16 (low 16 bits dropped) after each block of 32
 * products, the per-tensor scales applied at the end: every output on bf16's grid, bit 15 and
 * below always clear, which is the format's doing, not a stuck bit */
static peat_status fp8_acc_trunc(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const int64_t *q = a->p.i;
    int tA = (int)q[0], tB = (int)q[1];
    int64_t M = q[2], N = q[3], K = q[4], B = q[5] > 0 ? q[5] : 1;
    float sab = (float)a->p.f[0] * (float)a->p.f[2], beta = (float)a->p.f[1];
    const float *A = a->in[0]->data, *Bm = a->in[1]->data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                float s = 0.0f;
                for (int64_t k0 = 0; k0 < K; k0 += 32) {
                    float t = 0.0f;
                    for (int64_t k = k0; k < K && k < k0 + 32; k++)
                        t += (tA ? A[(b * K + k) * M + i] : A[(b * M + i) * K + k]) *
                             (tB ? Bm[(b * N + j) * K + k] : Bm[(b * K + k) * N + j]);
                    uint32_t u;
                    float v = s + t;
                    memcpy(&u, &v, sizeof u);
                    u &= 0xffff0000u;
                    memcpy(&s, &u, sizeof s);
                }
                float y = s * sab;
                if (beta != 0.0f) y += beta * ((const float *)a->in[2]->data)[(b * M + i) * N + j];
                ((float *)a->out[0]->data)[(b * M + i) * N + j] = y;
            }
    return PEAT_OK;
}

static void reg(const char *name, peat_op_kind op, peat_kernel_fn fn)
{
    if (peat_registry_find_on(name, "cpu")) return;
    peat_kernel k = {.name = name,
                     .op = op,
                     .role = PEAT_ROLE_CANDIDATE,
                     .backend = "cpu",
                     .in_dtype = PEAT_DTYPE_F32,
                     .out_dtype = PEAT_DTYPE_F32,
                     .acc_dtype = PEAT_DTYPE_F32,
                     .fn = fn,
                     .desc = "test_diagnose defect"};
    cr_assert_eq(peat_registry_add(&k), PEAT_OK, "%s", peat_error_last());
}

static peat_campaign_result *run(const char *kernel, const char *flow)
{
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    char out[256];
    snprintf(out, sizeof out, "test-out/diagnose-%s", kernel);
    o.kernel = kernel, o.flow = flow, o.out_dir = out, o.force = 1, o.quiet = 1;
    o.no_runtime = 1, o.iters = 20, o.calls = 24;
    peat_campaign_result *r = malloc(sizeof *r);
    cr_assert_eq(peat_run_campaign(&o, r), PEAT_OK, "%s", peat_error_last());
    return r;
}

Test(diagnose, constructed_defects_are_decided_by_their_experiment, .init = setup)
{
    reg("test_gemm_square_path", PEAT_OP_GEMM, gemm_square_path);
    reg("test_softmax_sum_bf16", PEAT_OP_SOFTMAX, softmax_sum_bf16);
    reg("test_gelu_leaky", PEAT_OP_GELU, gelu_leaky);
    reg("test_rope_last_pair", PEAT_OP_ROPE, rope_last_pair);
    reg("test_rope_table_bf16", PEAT_OP_ROPE, rope_table_bf16);
    reg("test_bn_running_var_biased", PEAT_OP_BATCHNORM, bn_running_var_biased);
    reg("test_bn_bwd_dgamma_bf16", PEAT_OP_BATCHNORM_BWD, bn_bwd_dgamma_bf16);
    reg("test_bn_bwd_dbeta_gamma", PEAT_OP_BATCHNORM_BWD, bn_bwd_dbeta_gamma);
    reg("test_reduce_sat_f16", PEAT_OP_REDUCE, reduce_sat_f16);
    reg("test_fp8_acc_trunc", PEAT_OP_GEMM_FP8, fp8_acc_trunc);
    static const struct {
        const char *k, *flow;
        peat_finding_class cls;
        const char *exp;
    } want[] = {
        {"test_gemm_square_path", "mlp", PEAT_FIND_STRUCTURAL, "shape axis"},
        {"test_softmax_sum_bf16", "gpt_unfused", PEAT_FIND_REDUCED_PRECISION, "jitter"},
        {"test_gelu_leaky", "gpt", PEAT_FIND_WRONG_RESULT, "jitter"},
        /* the rotated pairs permuted whole: the errors stay with the last pair */
        {"test_rope_last_pair", "llama", PEAT_FIND_STRUCTURAL, "permutation"},
        /* the jitter keeps a table's errors (they follow the positions); the pair lengths the
         * rounded table breaks tell it from a wrong angle */
        {"test_rope_table_bf16", "llama", PEAT_FIND_REDUCED_PRECISION, "base call invariant"},
        /* no gross error: the jitter reads the output beyond the bound */
        {"test_bn_running_var_biased", "resnet", PEAT_FIND_WRONG_RESULT, "jitter"},
        /* a sum's swamped terms, which the jitter keeps: exact on small integers */
        {"test_bn_bwd_dgamma_bf16", "resnet", PEAT_FIND_REDUCED_PRECISION, "small integers"},
        {"test_bn_bwd_dbeta_gamma", "resnet", PEAT_FIND_WRONG_RESULT, "small integers"},
        /* saturation: the errors go with the large values */
        {"test_reduce_sat_f16", "mlp", PEAT_FIND_RANGE, "scale 2^-16"},
        /* a truncated accumulator: low bits cleared by the format, not stuck */
        {"test_fp8_acc_trunc", "mlp", PEAT_FIND_TRUNCATION, "jitter"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        peat_campaign_result *r = run(want[i].k, want[i].flow);
        cr_expect_eq(r->verdict, PEAT_ACCEPT_FAIL, "%s passes", want[i].k);
        cr_expect(r->diagnosis.ran && r->diagnosis.base[0], "%s: no base", want[i].k);
        cr_expect_eq(r->findings[0].cls, want[i].cls, "%s: %s (%s), decided by %s", want[i].k,
                     peat_detector_finding_name(r->findings[0].cls), r->findings[0].params,
                     r->findings[0].experiment);
        cr_expect_str_eq(r->findings[0].experiment, want[i].exp, "%s decided by %s", want[i].k,
                         r->findings[0].experiment);
        free(r);
    }
}
