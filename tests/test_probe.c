/* test_probe.c: probes, arithmetic properties, stratified coverage and the zoo kernels through
 * `peat run` (known answers: the kernels are built to differ in one property each). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "analyzer/probe.h"
#include "harness/run/run.h"
#include "harness/campaign/campaign.h"
#include "harness/runtime/builtin.h"

static void setup(void)
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK);
    static int loaded;
    if (!loaded)
        cr_assert_eq(peat_plugin_load(PEAT_TEST_ZOO, NULL), PEAT_OK, "%s", peat_error_last());
    loaded = 1;
}

/* The property call through kernel `name`. */
static peat_gemm_props props_of(const char *name)
{
    const peat_kernel *k = peat_registry_find(name);
    cr_assert(k, "kernel %s registered", name);
    peat_args a;
    cr_assert_eq(peat_analyzer_gemm_props_call(&a), PEAT_OK);
    cr_assert_eq(peat_op_alloc_outputs(&a, PEAT_DTYPE_F32), PEAT_OK);
    cr_assert_eq(peat_kernel_run(k, &a), PEAT_OK);
    peat_gemm_props p;
    peat_analyzer_gemm_props_read(a.out[0], &p);
    peat_args_free_outputs(&a);
    for (int i = 0; i < a.n_in; i++) peat_tensor_free((peat_tensor *)a.in[i]);
    return p;
}

Test(probe, properties_of_builtin_and_zoo_gemms, .init = setup)
{
    struct {
        const char *k;
        int in_bits, range16, acc_bits;
        const char *round;
        int sub_in, sub_out;
    } want[] = {
        {"gemm_golden", 24, 0, 24, "RN", 1, 1},
        {"gemm_new", 24, 0, 24, "RN", 1, 1},
        {"gemm_bf16", 8, 0, 24, "RN", 1, 1},
        {"gemm_fp16", 11, 1, 24, "RN", 0, 0},
        {"zoo_gemm_acc_fp16", 11, 1, 11, "RN", 0, 0},
        {"zoo_gemm_acc_bf16", 8, 0, 8, "RN", 1, 0},
        {"zoo_gemm_tf32_inputs", 11, 0, 24, "RN", 1, 1},
        {"zoo_gemm_rtz", 24, 0, 24, "RZ", 1, 1},
        {"zoo_gemm_ftz", 24, 0, 24, "RN", 0, 0},
        {"zoo_gemm_kahan", 24, 0, 24, "RN", 1, 1},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        peat_gemm_props p = props_of(want[i].k);
        cr_expect_eq(p.input_bits, want[i].in_bits, "%s input bits %d", want[i].k, p.input_bits);
        cr_expect_eq(p.input_range16, want[i].range16, "%s fp16 range", want[i].k);
        cr_expect_eq(p.acc_bits, want[i].acc_bits, "%s acc bits %d", want[i].k, p.acc_bits);
        cr_expect_str_eq(p.rounding, want[i].round, "%s rounding %s", want[i].k, p.rounding);
        cr_expect_eq(p.subnormal_in, want[i].sub_in, "%s subnormal inputs", want[i].k);
        cr_expect_eq(p.subnormal_out, want[i].sub_out, "%s subnormal products", want[i].k);
    }
}

static peat_campaign_result *run(const char *kernel, const char *flow, int probes)
{
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    char out[256];
    snprintf(out, sizeof out, "test-out/probe-%s-%s", kernel, flow);
    o.kernel = kernel, o.flow = flow, o.out_dir = out, o.force = 1, o.quiet = 1;
    o.no_probes = !probes;
    if (strcmp(flow, "mlp")) o.iters = 20;
    peat_campaign_result *r = malloc(sizeof *r);
    cr_assert_eq(peat_run_campaign(&o, r), PEAT_OK, "%s", peat_error_last());
    return r;
}

Test(probe, mlp_default_campaign_covers_every_gemm_stratum, .init = setup)
{
    peat_campaign_result *r = run("gemm_new", "mlp", 0);
    const peat_coverage *c = &r->coverage;
    int fwd = 0, bwd = 0;
    cr_assert_geq(c->n, 6, "mlp has forward and backward GEMMs of several layers: %d strata", c->n);
    for (int i = 0; i < c->n; i++) {
        cr_expect_gt(c->s[i].recorded, 0, "stratum %s never recorded", c->s[i].label);
        cr_expect_gt(c->s[i].recorded, 1, "stratum %s: calls spread over the run", c->s[i].label);
        fwd += strstr(c->s[i].label, " fwd ") != NULL,
            bwd += strstr(c->s[i].label, " bwd ") != NULL;
    }
    cr_expect(fwd > 0 && bwd > 0, "forward (%d) and backward (%d) strata", fwd, bwd);
    cr_expect_eq(peat_campaign_coverage_missed(c), 0);
    free(r);
}

Test(probe, ftz_gemm_fails_through_the_value_probes, .init = setup)
{
    peat_campaign_result *r = run("zoo_gemm_ftz", "mlp", 1);
    cr_expect_eq(r->verdict, PEAT_ACCEPT_FAIL);
    cr_expect_eq(r->findings[0].cls, PEAT_FIND_FTZ, "primary %s",
                 peat_detector_finding_name(r->findings[0].cls));
    free(r);
    /* without probes the training data never holds a subnormal: it passes, which is why the
     * probes exist */
    r = run("zoo_gemm_ftz", "mlp", 0);
    cr_expect_neq(r->findings[0].cls, PEAT_FIND_FTZ);
    free(r);
}

Test(probe, unwritten_edge_gemm_is_structural_on_every_flow, .init = setup)
{
    const char *flows[] = {"mlp", "cnn", "gpt", "gpt_unfused"};
    for (int i = 0; i < 4; i++) {
        peat_campaign_result *r = run("zoo_gemm_edge_tile", flows[i], 1);
        cr_expect_eq(r->findings[0].cls, PEAT_FIND_STRUCTURAL, "%s: primary %s(%s)", flows[i],
                     peat_detector_finding_name(r->findings[0].cls), r->findings[0].params);
        cr_expect(strstr(r->findings[0].params, "boundary") != NULL, "%s: region in %s", flows[i],
                  r->findings[0].params);
        cr_expect(strstr(r->findings[0].params, "tile=32") != NULL, "%s: tile inferred: %s",
                  flows[i], r->findings[0].params);
        free(r);
    }
}

/* Property rules on constructed property sets: each differing property names its finding, and
 * an fp32 round-to-nearest kernel (any order) is silent. */
Test(probe, property_rules, .init = setup)
{
    peat_gemm_props g = {.input_bits = 24,
                         .acc_bits = 24,
                         .rounding = "RN",
                         .subnormal_in = 1,
                         .subnormal_out = 1,
                         .subnormal16 = 1,
                         .nan_prop = 1};
    peat_detector_ctx fp32 = peat_detector_ctx_from_kernel(NULL);
    peat_finding f[8];
    peat_gemm_props c = g;
    c.block = 2, c.extra_bits = 3; /* order and extra bits are informational */
    cr_expect_eq(peat_detector_props(&c, &g, &fp32, f, 8), 0, "honest order flagged");
    c = g, snprintf(c.rounding, sizeof c.rounding, "RZ");
    cr_assert_eq(peat_detector_props(&c, &g, &fp32, f, 8), 1);
    cr_expect_eq(f[0].cls, PEAT_FIND_TRUNCATION);
    cr_expect_str_eq(f[0].params, "mode=RZ");
    c = g, c.subnormal_in = c.subnormal_out = 0;
    cr_assert_eq(peat_detector_props(&c, &g, &fp32, f, 8), 1);
    cr_expect_eq(f[0].cls, PEAT_FIND_FTZ);
    c = g, c.input_bits = 8;
    cr_assert_eq(peat_detector_props(&c, &g, &fp32, f, 8), 1);
    cr_expect(f[0].cls == PEAT_FIND_REDUCED_PRECISION && strstr(f[0].params, "where=inputs"));
    cr_expect_eq(f[0].accept, PEAT_ACCEPT_FAIL, "undeclared bf16 inputs fail");
    peat_detector_ctx bf16 = fp32;
    bf16.declared_in = PEAT_DTYPE_BF16;
    peat_detector_props(&c, &g, &bf16, f, 8);
    cr_expect_eq(f[0].accept, PEAT_ACCEPT_WARN, "declared bf16 inputs warn");
    c = g, c.input_bits = c.acc_bits = 11, c.input_range16 = 1, c.subnormal_in = 0;
    cr_assert_eq(peat_detector_props(&c, &g, &fp32, f, 8), 1, "a narrow accumulator: one finding");
    cr_expect(strstr(f[0].params, "where=accumulation,fmt=fp16") != NULL, "%s", f[0].params);
}

/* Combination: a failing probe beats a passing aggregate; an overflow probe's NaN reads RANGE;
 * an edge region on a probe is STRUCTURAL with the tile size from two shapes. */
Test(probe, combination, .init = setup)
{
    peat_finding rec = {.cls = PEAT_FIND_WITHIN_BOUND, .accept = PEAT_ACCEPT_PASS}, out[8];
    peat_probe_outcome pr[3];
    memset(pr, 0, sizeof pr);
    snprintf(pr[0].label, sizeof pr[0].label, "value large logits");
    pr[0].tag = PEAT_PROBE_TAG_OVERFLOW;
    pr[0].f.cls = PEAT_FIND_NAN, pr[0].f.accept = PEAT_ACCEPT_FAIL;
    int n = peat_detector_combine(&rec, 1, pr, 1, NULL, 0, out, 8);
    cr_assert_geq(n, 2);
    cr_expect_eq(out[0].cls, PEAT_FIND_RANGE, "got %s", peat_detector_finding_name(out[0].cls));
    for (int i = 1; i < 3; i++) {
        pr[i].f.cls = PEAT_FIND_WRONG_RESULT, pr[i].f.accept = PEAT_ACCEPT_FAIL;
        pr[i].edge = (peat_edge_region){
            .rows = i == 1 ? 33 : 65, .cols = 40, .edge_rows = 1, .n_gross = 40, .confined = 1};
    }
    n = peat_detector_combine(&rec, 1, pr + 1, 2, NULL, 0, out, 8);
    cr_expect_eq(out[0].cls, PEAT_FIND_STRUCTURAL, "got %s",
                 peat_detector_finding_name(out[0].cls));
    cr_expect(strstr(out[0].params, "tile=32") != NULL, "%s", out[0].params);
    /* nothing fails: the recorded finding stays primary */
    n = peat_detector_combine(&rec, 1, NULL, 0, NULL, 0, out, 8);
    cr_expect(n == 1 && out[0].cls == PEAT_FIND_WITHIN_BOUND);
}

/* A region on one probe alone, while the recorded calls show gross errors spread beyond any
 * region (WRONG_RESULT), is not the explanation: WRONG_RESULT is primary and the region stays a
 * secondary finding. The same region on two probes, or on one that nothing contradicts, is
 * STRUCTURAL; whole planes wrong on a probe are STRUCTURAL with the planes named. */
static int has(const peat_finding *f, int n, peat_finding_class c)
{
    for (int i = 0; i < n; i++)
        if (f[i].cls == c) return 1;
    return 0;
}

Test(probe, a_lone_region_does_not_outweigh_a_spread_error, .init = setup)
{
    peat_finding wrong = {.cls = PEAT_FIND_WRONG_RESULT, .accept = PEAT_ACCEPT_FAIL},
                 within = {.cls = PEAT_FIND_WITHIN_BOUND, .accept = PEAT_ACCEPT_PASS}, out[8];
    peat_probe_outcome pr[3];
    memset(pr, 0, sizeof pr);
    for (int i = 0; i < 2; i++) {
        snprintf(pr[i].label, sizeof pr[i].label, "shape %d", i);
        pr[i].f.cls = PEAT_FIND_WRONG_RESULT, pr[i].f.accept = PEAT_ACCEPT_FAIL;
        pr[i].edge = (peat_edge_region){
            .rows = i ? 2 : 5, .cols = 2, .edge_rows = 1, .n_gross = 2, .confined = 1};
    }
    int n = peat_detector_combine(&wrong, 1, pr, 1, NULL, 0, out, 8);
    cr_expect_eq(out[0].cls, PEAT_FIND_WRONG_RESULT, "lone region vs spread errors: got %s (%s)",
                 peat_detector_finding_name(out[0].cls), out[0].params);
    cr_expect(has(out, n, PEAT_FIND_STRUCTURAL), "the region stays a secondary finding");
    n = peat_detector_combine(&wrong, 1, pr, 2, NULL, 0, out, 8);
    cr_expect_eq(out[0].cls, PEAT_FIND_STRUCTURAL, "a region on two probes: got %s",
                 peat_detector_finding_name(out[0].cls));
    n = peat_detector_combine(&within, 1, pr, 1, NULL, 0, out, 8);
    cr_expect_eq(out[0].cls, PEAT_FIND_STRUCTURAL, "an uncontradicted region: got %s",
                 peat_detector_finding_name(out[0].cls));
    /* a second probe with spread errors contradicts as the recorded calls do */
    pr[2].f.cls = PEAT_FIND_WRONG_RESULT, pr[2].f.accept = PEAT_ACCEPT_FAIL;
    pr[1] = pr[2];
    n = peat_detector_combine(&within, 1, pr, 2, NULL, 0, out, 8);
    cr_expect_eq(out[0].cls, PEAT_FIND_WRONG_RESULT, "lone region vs a spread probe: got %s",
                 peat_detector_finding_name(out[0].cls));
    memset(&pr[0].edge, 0, sizeof pr[0].edge);
    pr[0].edge = (peat_edge_region){.rows = 17,
                                    .cols = 33,
                                    .n_gross = 1122,
                                    .planes = 3,
                                    .wrong_planes = 2,
                                    .first_wrong_plane = 1,
                                    .plane_confined = 1};
    n = peat_detector_combine(&within, 1, pr, 1, NULL, 0, out, 8);
    cr_expect_eq(out[0].cls, PEAT_FIND_STRUCTURAL, "whole planes wrong: got %s",
                 peat_detector_finding_name(out[0].cls));
    cr_expect(strstr(out[0].params, "planes,wrong=2/3,first=1") != NULL, "%s", out[0].params);
}

/* One campaign without the runtime stage (the verdict of the recorded calls and probes). */
static peat_campaign_result *run_opt(const char *kernel, const char *flow, int probes,
                                     const char *optimizer)
{
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    char out[256];
    /* the test's process id in the folder: two tests run the same kernel and flow, and Criterion
     * may run them side by side (each test is a process of its own) */
    snprintf(out, sizeof out, "test-out/probe-%s-%s-%ld", kernel, flow, (long)getpid());
    o.kernel = kernel, o.flow = flow, o.out_dir = out, o.force = 1, o.quiet = 1;
    o.no_probes = !probes, o.no_runtime = 1, o.iters = 20, o.calls = 24;
    if (optimizer) o.optimizer = optimizer;
    peat_campaign_result *r = malloc(sizeof *r);
    cr_assert_eq(peat_run_campaign(&o, r), PEAT_OK, "%s", peat_error_last());
    return r;
}

/* The orders PyTorch ships and other honest formulations (tests/zoo/zoo_honest_*.c) pass on
 * their flow, probes included: the bounds come from the op, not from the golden's order. */
Test(probe, honest_framework_orders_pass, .init = setup)
{
    static const char *k[][3] = {
        {"zoo_adamw_torch_single", "mlp", NULL},
        {"zoo_adamw_torch_foreach", "mlp", NULL},
        {"zoo_adamw_torch_fused", "mlp", NULL},
        {"zoo_adamw_apex", "mlp", NULL},
        {"zoo_sgd_torch", "mlp", "sgd"},
        {"zoo_sgd_torch_nesterov", "mlp", "sgd_nesterov"},
        {"zoo_sgd_torch_nesterov", "cnn", "sgd_nesterov"},
        {"zoo_softmax_torch", "gpt_unfused", NULL},
        {"zoo_layernorm_welford", "gpt", NULL},
        {"zoo_gelu_erfc", "gpt", NULL},
        {"zoo_gelu_x_xerf", "gpt", NULL},
        {"zoo_xent_logsoftmax_nll", "mlp", NULL},
        {"zoo_xent_bwd_torch", "mlp", NULL},
        {"zoo_attention_sdpa_math", "gpt", NULL},
        {"zoo_conv_direct_taps", "cnn", NULL},
        {"zoo_conv_winograd", "cnn", NULL},
        {"zoo_conv_winograd", "resnet", NULL},
        {"zoo_reduce_pairwise", "mlp", NULL},
        {"zoo_reduce_blocked", "gpt", NULL},
        {"zoo_layernorm_torch", "gpt", NULL},
        {"zoo_layernorm_bwd_torch", "gpt", NULL},
        {"zoo_softmax_bwd_torch", "gpt_unfused", NULL},
        {"zoo_gelu_bwd_torch", "gpt", NULL},
        {"zoo_attention_bwd_math", "gpt", NULL},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        peat_campaign_result *r = run_opt(k[i][0], k[i][1], 1, k[i][2]);
        cr_expect_eq(r->verdict, PEAT_ACCEPT_PASS, "%s on %s: verdict %s, primary %s %s", k[i][0],
                     k[i][1], peat_detector_acceptance_name(r->verdict),
                     peat_detector_finding_name(r->findings[0].cls), r->findings[0].params);
        free(r);
    }
}

/* Latent range bugs: the flows' logits and activations stay small, so without probes these
 * pass; the value probes push an intermediate out of fp32's range and the detector names it. */
Test(probe, latent_range_defects_only_probes_catch, .init = setup)
{
    static const char *k[][2] = {{"zoo_xent_no_max", "mlp"},
                                 {"zoo_xent_bwd_no_max", "mlp"},
                                 {"zoo_xent_log_of_softmax", "mlp"},
                                 {"zoo_gelu_tanh_exp", "gpt"}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        peat_campaign_result *r = run_opt(k[i][0], k[i][1], 1, NULL);
        cr_expect_eq(r->verdict, PEAT_ACCEPT_FAIL, "%s: verdict %s with probes", k[i][0],
                     peat_detector_acceptance_name(r->verdict));
        cr_expect_eq(r->findings[0].cls, PEAT_FIND_RANGE, "%s: primary %s (%s), expected RANGE",
                     k[i][0], peat_detector_finding_name(r->findings[0].cls),
                     r->findings[0].params);
        free(r);
        r = run_opt(k[i][0], k[i][1], 0, NULL);
        cr_expect_neq(r->verdict, PEAT_ACCEPT_FAIL, "%s fails without probes: not latent", k[i][0]);
        free(r);
    }
}

/* Every op kind the flows record gets probes (the coverage table of docs/detector.md). */
Test(probe, every_op_kind_gets_probes, .init = setup)
{
    static const char *k[][2] = {
        {"zoo_xent_logsoftmax_nll", "mlp"}, {"zoo_xent_bwd_torch", "mlp"},
        {"zoo_gelu_erfc", "gpt"},           {"zoo_adamw_torch_single", "mlp"},
        {"zoo_conv_direct_taps", "cnn"},    {"zoo_reduce_pairwise", "mlp"},
        {"zoo_attention_sdpa_math", "gpt"},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        peat_campaign_result *r = run_opt(k[i][0], k[i][1], 1, NULL);
        int shape = 0, value = 0;
        for (int j = 0; j < r->n_probes; j++)
            shape += r->probes[j].kind == PEAT_PROBE_SHAPE,
                value += r->probes[j].kind == PEAT_PROBE_VALUE;
        cr_expect_gt(shape + value, 1, "%s: %d probes", k[i][0], r->n_probes);
        if (strstr(k[i][0], "conv") || strstr(k[i][0], "reduce") || strstr(k[i][0], "attention"))
            cr_expect_geq(shape, 4, "%s: %d shape probes", k[i][0], shape);
        if (!strstr(k[i][0], "conv") && !strstr(k[i][0], "attention_sdpa"))
            cr_expect_geq(value, 1, "%s: %d value probes", k[i][0], value);
        free(r);
    }
}

/* ---- constructed defects that one new probe each must catch ---- */

/* direct conv whose input row/column ignores the stride (oh + kh - pad) */
static peat_status conv_no_stride(const peat_args *a, const peat_kernel *self)
{
    const int64_t *p = a->p.i;
    int64_t N = p[0], C = p[1], H = p[2], W = p[3], O = p[4], KH = p[5], KW = p[6], pd = p[8];
    int64_t OH = (H + 2 * pd - KH) / p[7] + 1, OW = (W + 2 * pd - KW) / p[7] + 1;
    const float *X = a->in[0]->data, *Wt = a->in[1]->data;
    float *Y = a->out[0]->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t y = 0; y < OH; y++)
                for (int64_t x = 0; x < OW; x++) {
                    float acc = 0.0f;
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t ih = y + kh - pd, iw = x + kw - pd;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                acc += X[((n * C + c) * H + ih) * W + iw] *
                                       Wt[((o * C + c) * KH + kh) * KW + kw];
                            }
                    Y[((n * O + o) * OH + y) * OW + x] = acc;
                }
    return PEAT_OK;
}

/* row sums in blocks of 16; a partial last block is dropped */
static peat_status reduce_drop_tail(const peat_args *a, const peat_kernel *self)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t r = 0; r < R; r++) {
        float s = 0.0f;
        for (int64_t j = 0; j < (C / 16) * 16; j++) s += x[r * C + j];
        y[r] = a->p.i[2] ? s / (float)C : s;
    }
    return PEAT_OK;
}

/* softmax shifted by the row mean instead of the max: -inf entries make the mean -inf */
static peat_status softmax_mean_shift(const peat_args *a, const peat_kernel *self)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t r = 0; r < R; r++) {
        float m = 0.0f, s = 0.0f;
        for (int64_t j = 0; j < C; j++) m += x[r * C + j] / (float)C;
        for (int64_t j = 0; j < C; j++) s += y[r * C + j] = expf(x[r * C + j] - m);
        for (int64_t j = 0; j < C; j++) y[r * C + j] /= s;
    }
    return PEAT_OK;
}

/* GELU that flushes subnormal inputs to zero */
static peat_status gelu_ftz(const peat_args *a, const peat_kernel *self)
{
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++)
        y[i] = fabsf(x[i]) < 0x1p-126f ? 0.0f : 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
    return PEAT_OK;
}

/* AdamW whose update is mhat * (1 / sqrt(vhat)), eps forgotten: 0 * Inf on a zero state */
static peat_status adamw_no_eps(const peat_args *a, const peat_kernel *self)
{
    double b1 = a->p.f[1], b2 = a->p.f[2], t = (double)a->p.i[1];
    float lr = (float)a->p.f[0], wd = (float)a->p.f[4], fb1 = (float)b1, fb2 = (float)b2;
    float c1 = (float)(1 - b1), c2 = (float)(1 - b2);
    float bc1 = (float)(1 - pow(b1, t)), bc2 = (float)(1 - pow(b2, t));
    const float *P = a->in[0]->data, *G = a->in[1]->data, *M = a->in[2]->data, *V = a->in[3]->data;
    float *po = a->out[0]->data, *mo = a->out[1]->data, *vo = a->out[2]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float p = P[i], g = G[i], m = fb1 * M[i] + c1 * g, v = fb2 * V[i] + c2 * g * g;
        float upd = (m / bc1) * (1.0f / sqrtf(v / bc2));
        po[i] = p - lr * (upd + wd * p), mo[i] = m, vo[i] = v;
    }
    return PEAT_OK;
}

/* layer norm whose rstd is 1 / sqrt(var), eps forgotten: 0 x Inf on a row of zeros */
static peat_status layernorm_no_eps(const peat_args *a, const peat_kernel *self)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *X = a->in[0]->data, *g = a->in[1]->data, *b = a->in[2]->data;
    float *Y = a->out[0]->data, *mean = a->out[1]->data, *rstd = a->out[2]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *x = X + r * C;
        float m = 0.0f, v = 0.0f;
        for (int64_t j = 0; j < C; j++) m += x[j];
        m /= (float)C;
        for (int64_t j = 0; j < C; j++) v += (x[j] - m) * (x[j] - m);
        float rs = 1.0f / sqrtf(v / (float)C);
        for (int64_t j = 0; j < C; j++) Y[r * C + j] = (x[j] - m) * rs * g[j] + b[j];
        mean[r] = m, rstd[r] = rs;
    }
    return PEAT_OK;
}

/* embedding gather that clamps indices to V-2 (an off-by-one bound): the last row is never read */
static peat_status embedding_clamp(const peat_args *a, const peat_kernel *self)
{
    int64_t N = a->p.i[0], V = a->p.i[1], D = a->p.i[2];
    const float *tab = a->in[0]->data;
    const int32_t *idx = a->in[1]->data;
    float *y = a->out[0]->data;
    for (int64_t n = 0; n < N; n++) {
        int64_t r = idx[n] < V - 1 ? idx[n] : V - 2;
        memcpy(y + n * D, tab + r * D, (size_t)D * sizeof *y);
    }
    return PEAT_OK;
}

#define TEST_KERNEL(nm, opk, f)                                                                    \
    {                                                                                              \
        .name = nm, .op = opk, .role = PEAT_ROLE_CANDIDATE, .backend = "cpu",                      \
        .in_dtype = PEAT_DTYPE_F32, .out_dtype = PEAT_DTYPE_F32, .acc_dtype = PEAT_DTYPE_F32,      \
        .fn = f, .desc = "constructed defect (tests/test_probe.c)"                                 \
    }

/* The first probe whose label contains `what`, FAILed with class c. */
static void expect_probe(const peat_campaign_result *r, const char *k, const char *what,
                         peat_finding_class c)
{
    int seen = 0, caught = 0;
    for (int j = 0; j < r->n_probes; j++) {
        const peat_probe_outcome *p = &r->probes[j];
        if (!strstr(p->label, what)) continue;
        seen++;
        caught += p->f.accept == PEAT_ACCEPT_FAIL && p->f.cls == c;
    }
    cr_expect_gt(seen, 0, "%s: no probe \"%s\" ran", k, what);
    cr_expect_gt(caught, 0, "%s: no probe \"%s\" failed it as %s (%d ran)", k, what,
                 peat_detector_finding_name(c), seen);
}

Test(probe, new_probes_catch_constructed_defects, .init = setup)
{
    static const peat_kernel ks[] = {
        TEST_KERNEL("t_conv_no_stride", PEAT_OP_CONV2D, conv_no_stride),
        TEST_KERNEL("t_reduce_drop_tail", PEAT_OP_REDUCE, reduce_drop_tail),
        TEST_KERNEL("t_softmax_mean_shift", PEAT_OP_SOFTMAX, softmax_mean_shift),
        TEST_KERNEL("t_gelu_ftz", PEAT_OP_GELU, gelu_ftz),
        TEST_KERNEL("t_adamw_no_eps", PEAT_OP_ADAMW, adamw_no_eps),
        TEST_KERNEL("t_embedding_clamp", PEAT_OP_EMBEDDING, embedding_clamp),
        TEST_KERNEL("t_layernorm_no_eps", PEAT_OP_LAYERNORM, layernorm_no_eps),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (!peat_registry_find(ks[i].name))
            cr_assert_eq(peat_registry_add(&ks[i]), PEAT_OK, "%s", peat_error_last());
    peat_campaign_result *r = run_opt("t_conv_no_stride", "cnn", 1, NULL);
    expect_probe(r, "t_conv_no_stride", "stride 3", PEAT_FIND_WRONG_RESULT);
    free(r);
    r = run_opt("t_reduce_drop_tail", "mlp", 1, NULL);
    expect_probe(r, "t_reduce_drop_tail", "row length 17", PEAT_FIND_WRONG_RESULT);
    free(r);
    r = run_opt("t_softmax_mean_shift", "gpt_unfused", 1, NULL);
    expect_probe(r, "t_softmax_mean_shift", "-inf causal mask", PEAT_FIND_NAN);
    free(r);
    r = run_opt("t_gelu_ftz", "gpt", 1, NULL);
    expect_probe(r, "t_gelu_ftz", "subnormal x", PEAT_FIND_FTZ);
    free(r);
    r = run_opt("t_adamw_no_eps", "mlp", 1, NULL);
    expect_probe(r, "t_adamw_no_eps", "zero gradient and moments", PEAT_FIND_NAN);
    free(r);
    r = run_opt("t_embedding_clamp", "gpt", 1, NULL);
    expect_probe(r, "t_embedding_clamp", "last index", PEAT_FIND_WRONG_RESULT);
    free(r);
    /* a row of zeros: eps alone keeps rstd finite; without it rstd is Inf (the probe rule's
     * RANGE: an infinite output from finite inputs) and Y is 0 x Inf */
    r = run_opt("t_layernorm_no_eps", "gpt", 1, NULL);
    expect_probe(r, "t_layernorm_no_eps", "rows of zeros", PEAT_FIND_RANGE);
    free(r);
}
