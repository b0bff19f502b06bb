/* test_fi.c: fault injection: outcome classes from constructed cases, Wilson intervals and trial
 * counts against known values, the swap hook's schedule (idle = bit-identical training), runtime
 * verdicts on every flow, the band rules on constructed curves, crash-safe tables and a killed
 * playback FI campaign that resumes with no trial lost or doubled. */
#include <criterion/criterion.h>

#include "analyzer/analyzer.h"
#include "harness/run/run.h"
#include "detector/detector.h"
#include "golden/golden.h"
#include "harness/campaign/campaign.h"
#include "harness/fi/fi.h"
#include "harness/runtime/builtin.h"
#include "harness/runtime/golden_log.h"
#include "harness/runtime/runtime.h"
#include "harness/fi/fi_propagate.h"
#include "inject/inject.h"
#include "models/models.h"
#include "store/store_test.h"
#include "store/store.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[256];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/peat-test-fi-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK, "registry init: %s", peat_error_last());
}

static void teardown(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(fi, .init = setup, .fini = teardown, .timeout = 600);

/* ---- a constructed GEMM call with its golden, exact outputs and bounds ---- */

typedef struct call {
    peat_tensor *A, *B, *G, *E, *D;
    double *bound;
    peat_args a; /* inputs A, B; output D (scratch) */
    peat_inject_ref ref;
} call;

/* A GEMM call with its golden (gemm_plain: the plain loop, whose order `reorder(order=forward)`
 * repeats bit for bit), exact output and bounds. */
static call call_new(int M, int N, int K, uint64_t seed)
{
    call c;
    memset(&c, 0, sizeof c);
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, M, K, &c.A), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, K, N, &c.B), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, M, N, &c.G), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, M, N, &c.D), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F64, M, N, &c.E), PEAT_OK);
    peat_rng_t *r = peat_rng_new(seed);
    peat_rng_fill_gaussian(r, c.A, 1.0);
    peat_rng_fill_gaussian(r, c.B, 1.0);
    peat_rng_free(r);
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[2] = M, p.i[3] = N, p.i[4] = K, p.i[5] = 1, p.f[0] = 1.0;
    const peat_tensor *in[2] = {c.A, c.B};
    peat_tensor *g[1] = {c.G}, *e[1] = {c.E}, *d[1] = {c.D};
    peat_args ga = peat_args_make(PEAT_OP_GEMM, &p, 2, in, 1, g);
    peat_args ea = peat_args_make(PEAT_OP_GEMM, &p, 2, in, 1, e);
    cr_assert_eq(peat_kernel_run(peat_registry_find("gemm_plain"), &ga), PEAT_OK);
    cr_assert_eq(peat_kernel_run(peat_registry_role(PEAT_OP_GEMM, PEAT_ROLE_EXACT, "cpu"), &ea),
                 PEAT_OK);
    c.bound = malloc((size_t)(M * N) * sizeof *c.bound);
    cr_assert_eq(peat_golden_magnitude(&ga, 0, c.E, c.bound), PEAT_OK);
    for (int i = 0; i < M * N; i++) c.bound[i] = peat_analyzer_bound(c.bound[i], K);
    c.a = peat_args_make(PEAT_OP_GEMM, &p, 2, in, 1, d);
    c.ref.n_out = 1;
    c.ref.golden[0] = c.G, c.ref.exact[0] = c.E, c.ref.bound[0] = c.bound;
    return c;
}

static void call_free(call *c)
{
    peat_tensor_free(c->A), peat_tensor_free(c->B), peat_tensor_free(c->G);
    peat_tensor_free(c->E), peat_tensor_free(c->D);
    free(c->bound);
}

/* One planned trial of spec at site on the call; returns the trial. */
static peat_inject_trial trial(call *c, const char *spec, peat_inject_site site, int64_t index)
{
    peat_inject_model_t *m;
    cr_assert_eq(peat_inject_model_parse(spec, &m), PEAT_OK, "%s", peat_error_last());
    peat_inject_trial t;
    cr_assert_eq(peat_inject_trial_plan(m, site, 7, index, 1, &t), PEAT_OK);
    cr_assert_eq(peat_inject_trial_run(m, peat_registry_find("gemm_plain"), &c->a, &c->ref, &t),
                 PEAT_OK, "%s: %s", spec, peat_error_last());
    peat_inject_model_free(m);
    return t;
}

Test(fi, outcome_classes_from_constructed_cases)
{
    call c = call_new(24, 20, 64, 11);
    /* the (plain) golden's own order: the same bits */
    peat_inject_trial t = trial(&c, "reorder(order=forward)", PEAT_INJECT_SITE_OUTPUT, 0);
    cr_assert_eq(t.outcome, PEAT_INJECT_MASKED, "forward order: %s, %lld differ",
                 peat_inject_outcome_name(t.outcome), (long long)t.n_diff);
    /* one ulp in one element: 2^-23 |y| against a bound of 64 2^-24 mag >= 32 ulps */
    t = trial(&c, "bitflip(bit=0)", PEAT_INJECT_SITE_OUTPUT, 0);
    cr_assert_eq(t.outcome, PEAT_INJECT_TOLERABLE, "bit 0: %s",
                 peat_inject_outcome_name(t.outcome));
    cr_assert_eq(t.n_diff, 1);
    cr_assert_eq(t.n_over, 0);
    /* exponent bit 27: the element scaled by 2^16 or 2^-16, finite, far beyond the bound */
    t = trial(&c, "bitflip(bit=27)", PEAT_INJECT_SITE_OUTPUT, 0);
    cr_assert_eq(t.outcome, PEAT_INJECT_SDC, "bit 27: %s", peat_inject_outcome_name(t.outcome));
    cr_assert_eq(t.n_over, 1);
    cr_assert_eq(t.n_diff, 1);
    cr_assert_gt(t.max_norm, 1.0);
    /* NaN where golden is finite */
    t = trial(&c, "nan(count=2)", PEAT_INJECT_SITE_OUTPUT, 0);
    cr_assert_eq(t.outcome, PEAT_INJECT_DUE);
    cr_assert_eq(t.n_nonfinite, 2);
    /* the accumulator: NaN in a running sum reaches the output; its lowest bit does not matter */
    t = trial(&c, "nan", PEAT_INJECT_SITE_ACC, 3);
    cr_assert_eq(t.outcome, PEAT_INJECT_DUE);
    t = trial(&c, "bitflip(bit=0)", PEAT_INJECT_SITE_ACC, 3);
    cr_assert(t.outcome == PEAT_INJECT_MASKED || t.outcome == PEAT_INJECT_TOLERABLE,
              "acc bit 0: %s", peat_inject_outcome_name(t.outcome));
    /* an input's sign bit: many outputs change, by far more than rounding */
    t = trial(&c, "bitflip(bit=31)", PEAT_INJECT_SITE_INPUT, 5);
    cr_assert(t.target == 0 || t.target == 1);
    cr_assert_eq(t.outcome, PEAT_INJECT_SDC, "input sign: %s", peat_inject_outcome_name(t.outcome));
    cr_assert_geq(t.n_over, 1);
    call_free(&c);
}

Test(fi, trials_reproduce_from_their_record)
{
    call c = call_new(16, 16, 32, 3);
    const char *specs[3] = {"bitflip(bit=-1,count=3)", "tile(rows=4,cols=4,kind=random)", "nan"};
    const peat_inject_site sites[3] = {PEAT_INJECT_SITE_OUTPUT, PEAT_INJECT_SITE_INPUT,
                                       PEAT_INJECT_SITE_ACC};
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < 5; i++) {
            peat_inject_trial a = trial(&c, specs[s], sites[s], i);
            float *first = malloc(16 * 16 * sizeof *first);
            memcpy(first, c.D->data, 16 * 16 * sizeof *first);
            /* rerun from the record: the resolved spec, site and seed */
            peat_inject_model_t *m;
            cr_assert_eq(peat_inject_model_parse(a.spec, &m), PEAT_OK);
            peat_inject_trial b = a;
            cr_assert_eq(
                peat_inject_trial_run(m, peat_registry_find("gemm_plain"), &c.a, &c.ref, &b),
                PEAT_OK);
            cr_assert_eq(memcmp(first, c.D->data, 16 * 16 * sizeof *first), 0,
                         "%s trial %d: outputs differ on rerun", a.spec, i);
            cr_assert_eq(b.outcome, a.outcome);
            cr_assert_eq(b.n_diff, a.n_diff);
            peat_inject_model_free(m);
            free(first);
        }
    call_free(&c);
}

Test(fi, output_models_from_golden_copy_equal_a_rerun)
{
    /* starting an output-only model from the recorded golden outputs is the same as running the
     * golden kernel: checked bit for bit against peat_inject_run */
    call c = call_new(20, 12, 40, 5);
    const char *specs[4] = {"bitflip(bit=-1,count=4)", "stuck(bit=3,stride=5)",
                            "tile(kind=random,rows=4,cols=4)", "noise(sigma=1e-3)"};
    for (int s = 0; s < 4; s++) {
        peat_inject_trial t = trial(&c, specs[s], PEAT_INJECT_SITE_OUTPUT, 2);
        peat_tensor *ref;
        cr_assert_eq(peat_tensor_clone(c.D, &ref), PEAT_OK);
        peat_inject_model_t *m;
        cr_assert_eq(peat_inject_model_parse(t.spec, &m), PEAT_OK);
        cr_assert_eq(peat_inject_run(m, peat_registry_find("gemm_plain"), &c.a, t.seed), PEAT_OK);
        cr_assert_eq(memcmp(ref->data, c.D->data, peat_tensor_nbytes(ref)), 0, "%s", t.spec);
        peat_inject_model_free(m);
        peat_tensor_free(ref);
    }
    call_free(&c);
}

Test(fi, drawn_bits_cover_all_positions)
{
    peat_inject_model_t *m;
    cr_assert_eq(peat_inject_model_parse("bitflip(bit=-1)", &m), PEAT_OK);
    int seen[32] = {0};
    for (int i = 0; i < 1000; i++) {
        peat_inject_trial t;
        cr_assert_eq(peat_inject_trial_plan(m, PEAT_INJECT_SITE_OUTPUT, 1, i, 10, &t), PEAT_OK);
        cr_assert(t.bit >= 0 && t.bit < 32 && t.record >= 0 && t.record < 10);
        char want[32];
        snprintf(want, sizeof want, "bitflip(bit=%d,", t.bit);
        cr_assert(strstr(t.spec, want), "resolved spec %s names bit %d", t.spec, t.bit);
        seen[t.bit]++;
    }
    for (int b = 0; b < 32; b++) cr_assert_gt(seen[b], 10, "bit %d drawn %d times", b, seen[b]);
    peat_inject_model_free(m);
}

/* ---- statistics ---- */

Test(fi, wilson_intervals_match_known_values)
{
    double z = peat_inject_z(0.95);
    cr_assert_float_eq(z, 1.959964, 1e-6);
    /* (k, n, lo, hi): Wilson 1927 / Newcombe 1998 values */
    const double cases[][4] = {{0, 10, 0.0, 0.2775},
                               {5, 10, 0.2366, 0.7634},
                               {50, 100, 0.4038, 0.5962},
                               {10, 10, 0.7225, 1.0}};
    for (int i = 0; i < 4; i++) {
        peat_inject_rate w = peat_inject_wilson((int64_t)cases[i][0], (int64_t)cases[i][1], z);
        cr_assert_float_eq(w.lo, cases[i][2], 1e-4, "%g/%g lo %g", cases[i][0], cases[i][1], w.lo);
        cr_assert_float_eq(w.hi, cases[i][3], 1e-4, "%g/%g hi %g", cases[i][0], cases[i][1], w.hi);
    }
    cr_assert(isnan(peat_inject_wilson(1, 0, z).p));
    /* NVBitFI-style: about 1000 injections for +-3.1% at 95%; 1068 for +-3% */
    cr_assert_eq(peat_inject_trials_for_margin(0.031, 0.95, 0), 1000);
    cr_assert_eq(peat_inject_trials_for_margin(0.03, 0.95, 0), 1068);
    /* a finite population of 500 faults needs fewer */
    cr_assert_lt(peat_inject_trials_for_margin(0.03, 0.95, 500), 500);
}

Test(fi, rate_tables_group_and_count)
{
    peat_inject_trial t[6];
    memset(t, 0, sizeof t);
    const int bits[6] = {3, 3, 30, -1, 30, 31};
    const peat_inject_outcome out[6] = {PEAT_INJECT_TOLERABLE, PEAT_INJECT_MASKED, PEAT_INJECT_SDC,
                                        PEAT_INJECT_DUE,       PEAT_INJECT_DUE,    PEAT_INJECT_SDC};
    for (int i = 0; i < 6; i++) {
        snprintf(t[i].model, sizeof t[i].model, "%s", bits[i] < 0 ? "nan" : "bitflip(bit=-1)");
        snprintf(t[i].layer, sizeof t[i].layer, "fc%d", i % 2);
        t[i].bit = bits[i], t[i].outcome = out[i], t[i].op = PEAT_OP_GEMM;
        t[i].phase = i < 3 ? PEAT_PHASE_FWD : PEAT_PHASE_BWD;
    }
    peat_inject_table tab;
    cr_assert_eq(peat_inject_table_build(t, 6, PEAT_INJECT_BY_BIT, &tab), PEAT_OK);
    cr_assert_eq(tab.n, 32, "a row per bit position");
    cr_assert_eq(tab.rows[3].t.total, 2);
    cr_assert_eq(tab.rows[30].t.n[PEAT_INJECT_SDC], 1);
    cr_assert_eq(tab.rows[30].t.n[PEAT_INJECT_DUE], 1);
    cr_assert_eq(tab.rows[0].t.total, 0);
    peat_inject_table_free(&tab);
    cr_assert_eq(peat_inject_table_build(t, 6, PEAT_INJECT_BY_MODEL, &tab), PEAT_OK);
    cr_assert_eq(tab.n, 2);
    cr_assert_eq(tab.rows[0].t.total, 5);
    cr_assert_eq(tab.rows[1].t.n[PEAT_INJECT_DUE], 1);
    peat_inject_table_free(&tab);
    cr_assert_eq(peat_inject_table_build(t, 6, PEAT_INJECT_BY_PHASE, &tab), PEAT_OK);
    cr_assert_eq(tab.n, 2);
    cr_assert_eq(tab.rows[1].t.total, 3);
    peat_inject_table_free(&tab);
}

Test(fi, frequency_syntax)
{
    peat_freq_schedule s;
    cr_assert_eq(peat_freq_schedule_parse("1,1/100,0,p=0.25", &s), PEAT_OK, "%s",
                 peat_error_last());
    cr_assert_eq(s.n, 4);
    cr_assert(s.f[0].kind == PEAT_FREQ_EVERY && s.f[0].every == 1 && s.f[0].prob == 0);
    cr_assert(s.f[1].kind == PEAT_FREQ_EVERY && s.f[1].every == 100);
    cr_assert(s.f[2].kind == PEAT_FREQ_EVERY && s.f[2].every == 0);
    cr_assert(s.f[3].kind == PEAT_FREQ_PROB && s.f[3].every == 0 && s.f[3].prob == 0.25);
    const char *labels[] = {"1", "1/100", "0", "p=0.25"};
    for (int i = 0; i < 4; i++) cr_assert_str_eq(s.f[i].label, labels[i]);
    cr_assert_float_eq(peat_freq_share(&s.f[1]), 0.01, 1e-15);
    cr_assert_eq(peat_freq_share(&s.f[2]), 0.0);
    const char *bad[] = {"2", "1/0", "3/10", "p=0", "p=2", "x", "1/", "", "1,1,1,1,1"};
    for (int i = 0; i < 9; i++) {
        cr_assert_eq(peat_freq_schedule_parse(bad[i], &s), PEAT_ERR_INVAL, "'%s'", bad[i]);
        cr_assert_eq(s.n, 0, "'%s'", bad[i]);
    }
    cr_assert_eq(peat_freq_schedule_parse("1,1,1,1,1", &s), PEAT_ERR_INVAL);
    cr_assert_str_eq(peat_error_last(), "--runtime-freq: 1 to 4 frequencies, got 5");
    cr_assert_eq(peat_freq_schedule_parse("1,3/10", &s), PEAT_ERR_INVAL);
    cr_assert_str_eq(peat_error_last(),
                     "runtime frequency '3/10': use 1, 1/K (every K-th call), 0 or p=P");
}

/* ---- the swap hook ---- */

static peat_status nan_swap(void *user, const peat_kernel *k, const peat_args *a,
                            const peat_call_info *info)
{
    PEAT_TRY(peat_kernel_run(k, a));
    peat_f32(a->out[0])[0] = NAN;
    return PEAT_OK;
}

/* Trains mlp for n iterations with an optional swap; returns the flow (caller frees both). */
static void train(const peat_exec_swap *s, int n, peat_exec_t **ex, peat_flow_t **f, double *loss)
{
    peat_flow_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.seed = 5;
    cfg.weight_decay = -1;
    cr_assert_eq(peat_exec_alloc("mlp", 5, ex), PEAT_OK);
    if (s) cr_assert_eq(peat_exec_set_swap(*ex, s), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(peat_models_flow_alloc("mlp", &cfg, *ex, f), PEAT_OK);
    for (int i = 0; i < n; i++) {
        peat_flow_metrics m;
        cr_assert_eq(peat_models_flow_step(*f, &m), PEAT_OK);
        loss[i] = m.loss;
    }
}

Test(fi, idle_hook_is_bit_identical_to_plain_training)
{
    peat_exec_t *e0, *e1;
    peat_flow_t *f0, *f1;
    double l0[15], l1[15];
    train(NULL, 15, &e0, &f0, l0);
    /* frequency 0: a swap that would corrupt every call it ran, never run */
    peat_exec_swap s = {.op = PEAT_OP_GEMM, .fn = nan_swap, .every = 0};
    train(&s, 15, &e1, &f1, l1);
    cr_assert_gt(peat_exec_swap_eligible(e1), 0);
    cr_assert_eq(peat_exec_swapped(e1), 0);
    cr_assert_eq(memcmp(l0, l1, sizeof l0), 0, "losses differ");
    for (int i = 0; i < peat_models_flow_state_count(f0); i++) {
        const char *name;
        peat_tensor *a = peat_models_flow_state(f0, i, &name),
                    *b = peat_models_flow_state(f1, i, NULL);
        cr_assert_eq(memcmp(a->data, b->data, peat_tensor_nbytes(a)), 0, "%s differs", name);
    }
    peat_models_flow_free(f0), peat_models_flow_free(f1), peat_exec_free(e0), peat_exec_free(e1);
}

Test(fi, swap_schedule_every_k_probability_phase_layer_window)
{
    peat_exec_t *ex;
    peat_flow_t *f;
    double l[10];
    peat_exec_swap s = {.op = PEAT_OP_GEMM, .kernel = peat_registry_find("gemm_new"), .every = 10};
    train(&s, 10, &ex, &f, l);
    int64_t n = peat_exec_swap_eligible(ex);
    cr_assert_eq(peat_exec_swapped(ex), (n + 9) / 10, "every 10th of %lld", (long long)n);
    peat_models_flow_free(f), peat_exec_free(ex);
    /* only backward calls from iteration 4 to 6 */
    peat_exec_swap w = s;
    w.every = 1, w.phases = 1u << PEAT_PHASE_BWD, w.iter_lo = 4, w.iter_hi = 7;
    train(&w, 10, &ex, &f, l);
    int64_t per_iter = peat_exec_swap_eligible(ex) / 3;
    cr_assert_gt(per_iter, 0);
    cr_assert_eq(peat_exec_swap_eligible(ex), 3 * per_iter);
    cr_assert_eq(peat_exec_swapped(ex), peat_exec_swap_eligible(ex));
    peat_models_flow_free(f), peat_exec_free(ex);
    /* probability: the same seed draws the same calls */
    peat_exec_swap p = s;
    p.every = 0, p.prob = 0.3, p.seed = 9;
    train(&p, 10, &ex, &f, l);
    int64_t k1 = peat_exec_swapped(ex), e1 = peat_exec_swap_eligible(ex);
    peat_models_flow_free(f), peat_exec_free(ex);
    train(&p, 10, &ex, &f, l);
    cr_assert_eq(peat_exec_swapped(ex), k1);
    cr_assert(k1 > 0 && k1 < e1, "%lld of %lld swapped at p = 0.3", (long long)k1, (long long)e1);
    peat_models_flow_free(f), peat_exec_free(ex);
    /* a layer list that names no layer of the flow: nothing is eligible */
    peat_exec_swap q = s;
    q.layers = "no_such_layer,nor*this";
    train(&q, 3, &ex, &f, l);
    cr_assert_eq(peat_exec_swap_eligible(ex), 0);
    peat_models_flow_free(f), peat_exec_free(ex);
}

/* ---- runtime FI ---- */

static peat_runtime_result runtime(const char *flow, int iters, const char *model, const char *freq)
{
    peat_runtime_opts o;
    memset(&o, 0, sizeof o);
    o.flow = flow;
    o.cfg.seed = 1;
    o.cfg.weight_decay = -1;
    o.iters = iters;
    o.op = PEAT_OP_GEMM;
    o.model = model;
    o.model_seed = 3;
    cr_assert_eq(peat_freq_schedule_parse(freq, &o.freqs), PEAT_OK, "%s", peat_error_last());
    peat_runtime_result r;
    cr_assert_eq(peat_runtime_run_all(&o, &r), PEAT_OK, "%s: %s", flow, peat_error_last());
    return r;
}

/* The profile's golden training for k iterations, logged as the profile stage logs it. */
static peat_runtime_golden_log *golden_logged(const peat_runtime_opts *o, int64_t k)
{
    peat_exec_t *ex = NULL;
    peat_flow_t *f = NULL;
    peat_runtime_golden_log *g = NULL;
    cr_assert_eq(peat_exec_alloc(o->flow, o->cfg.seed, &ex), PEAT_OK);
    cr_assert_eq(peat_models_flow_alloc(o->flow, &o->cfg, ex, &f), PEAT_OK, "%s",
                 peat_error_last());
    cr_assert_eq(peat_runtime_golden_log_open(f, tmpdir, k, UINT64_MAX, &g), PEAT_OK);
    cr_assert_not_null(g, "a log under %s", tmpdir);
    for (int64_t t = 0; t < k; t++) {
        peat_flow_metrics m;
        cr_assert_eq(peat_models_flow_step(f, &m), PEAT_OK);
        peat_runtime_golden_log_append(g, m.loss);
    }
    peat_runtime_golden_log_keep(g, f, ex);
    cr_assert_eq(peat_runtime_golden_log_iters(g), k);
    return g;
}

static void runs_same(const peat_runtime_run *a, const peat_runtime_run *b, int64_t n,
                      int64_t n_eval, const char *what)
{
    cr_assert_str_eq(a->label, b->label, "%s", what);
    cr_assert(!memcmp(a->loss, b->loss, (size_t)n * sizeof *a->loss), "%s: %s loss", what,
              a->label);
    cr_assert(!memcmp(a->wdist, b->wdist, (size_t)n * sizeof *a->wdist), "%s: %s distance", what,
              a->label);
    cr_assert(!memcmp(a->nonfinite, b->nonfinite, (size_t)n * sizeof *a->nonfinite),
              "%s: %s non-finite", what, a->label);
    cr_assert(!memcmp(a->eval_acc, b->eval_acc, (size_t)n_eval * sizeof *a->eval_acc),
              "%s: %s accuracy", what, a->label);
    cr_assert_eq(a->first_nonfinite, b->first_nonfinite, "%s: %s", what, a->label);
    cr_assert_eq(a->swapped, b->swapped, "%s: %s", what, a->label);
}

/* The band's golden run replayed from the profile's log is the golden run trained again, bit for
 * bit, in every run's curves and verdicts: when the log covers the runs, when it is longer, and
 * when the runs train on past it (from the log's flow at its last iteration, whose weights the
 * replayed evaluations had replaced); fp32 and amp-fp16 (the loss scaler's state goes on). */
Test(fi, golden_run_replayed_from_the_profile_is_the_golden_run)
{
    static const struct {
        const char *flow;
        int precision;
        int64_t logged, iters;
        const char *model;
    } cases[] = {{"mlp", 0, 12, 12, "reorder"},
                 {"mlp", 0, 20, 12, "bitflip(bit=30)"},
                 {"mlp", 0, 5, 12, "reorder"},
                 {"mlp", 1, 7, 12, "reorder"},
                 {"cnn", 0, 4, 10, "reorder"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        peat_runtime_opts o;
        memset(&o, 0, sizeof o);
        o.flow = cases[c].flow;
        o.cfg.seed = 1;
        o.cfg.weight_decay = -1;
        o.cfg.precision = cases[c].precision;
        o.iters = cases[c].iters;
        o.op = PEAT_OP_GEMM;
        o.model = cases[c].model;
        o.model_seed = 3;
        cr_assert_eq(peat_freq_schedule_parse("1,1/3", &o.freqs), PEAT_OK);
        o.eval_every = 2;
        char what[96];
        snprintf(what, sizeof what, "%s precision %d, %lld logged, %lld trained", o.flow,
                 o.cfg.precision, (long long)cases[c].logged, (long long)o.iters);
        peat_runtime_result a, b;
        cr_assert_eq(peat_runtime_run_all(&o, &a), PEAT_OK, "%s: %s", what, peat_error_last());
        peat_runtime_golden_log *g = golden_logged(&o, cases[c].logged);
        o.golden = g;
        cr_assert_eq(peat_runtime_run_all(&o, &b), PEAT_OK, "%s: %s", what, peat_error_last());
        cr_assert_eq(a.n, b.n, "%s", what);
        cr_assert_eq(a.n_eval, b.n_eval, "%s", what);
        cr_assert_eq(a.n_band, b.n_band, "%s", what);
        cr_assert_eq(a.n_faulty, b.n_faulty, "%s", what);
        for (int j = 0; j < a.n_band; j++) runs_same(&a.band[j], &b.band[j], a.n, a.n_eval, what);
        for (int j = 0; j < a.n_faulty; j++) {
            runs_same(&a.faulty[j], &b.faulty[j], a.n, a.n_eval, what);
            cr_assert_eq(a.verdict[j].cls, b.verdict[j].cls, "%s: verdict %d", what, j);
            cr_assert_eq(a.verdict[j].iter, b.verdict[j].iter, "%s: verdict %d", what, j);
        }
        peat_runtime_result_free(&a);
        peat_runtime_result_free(&b);
        peat_runtime_golden_log_free(g);
    }
}

/* A scripted steering: the new total it returns after `done` iterations, and what it saw. */
typedef struct script {
    int64_t keep, grow_at, grow_to, cut_at, cut_to;
    int64_t seen[64], n_seen, every;
} script;

static int64_t scripted(void *user, int64_t done, int64_t every, double loop_s)
{
    script *s = user;
    cr_assert(loop_s >= 0);
    if (s->n_seen < 64) s->seen[s->n_seen++] = done;
    s->every = every;
    if (done >= s->cut_at) return s->cut_to;
    return done >= s->grow_at ? s->grow_to : s->keep;
}

static peat_runtime_result steered(script *sc, int64_t iters, int64_t max_iters)
{
    peat_runtime_opts o;
    memset(&o, 0, sizeof o);
    o.flow = "mlp";
    o.cfg.seed = 1;
    o.cfg.weight_decay = -1;
    o.iters = iters;
    o.op = PEAT_OP_GEMM;
    o.model = "reorder";
    cr_assert_eq(peat_freq_schedule_parse("1", &o.freqs), PEAT_OK);
    o.steer = scripted, o.steer_user = sc, o.max_iters = max_iters;
    peat_runtime_result r;
    cr_assert_eq(peat_runtime_run_all(&o, &r), PEAT_OK, "%s", peat_error_last());
    return r;
}

/* Steering moves the runs' length while they train: grown past the planned 20 (within the room
 * of 40), evaluations keep their every-4 schedule (20 / PEAT_PRED_RUNTIME_EVALS) and the last
 * iteration gets one; cut, the next iteration is the last. The callback is asked after every
 * iteration but the last. */
Test(fi, runtime_steering_grows_and_cuts_the_runs)
{
    script sc = {.keep = 20, .grow_at = 5, .grow_to = 31, .cut_at = 1000};
    peat_runtime_result r = steered(&sc, 20, 40);
    cr_assert_eq(r.n, 31);
    cr_assert_eq(sc.every, 4, "every 20 / 5");
    cr_assert_eq(r.n_eval, 8, "7 every 4, and the last");
    for (int64_t e = 0; e < 7; e++) cr_assert_eq(r.eval_iter[e], 4 * e + 3);
    cr_assert_eq(r.eval_iter[7], 30);
    cr_assert_eq(sc.n_seen, 30);
    for (int64_t i = 0; i < sc.n_seen; i++) cr_assert_eq(sc.seen[i], i + 1);
    for (int j = 0; j < r.n_band; j++) cr_assert(isfinite(r.band[j].loss[30]));
    peat_runtime_result_free(&r);

    script grow_too_far = {.keep = 20, .grow_at = 1, .grow_to = 1000, .cut_at = 1000};
    r = steered(&grow_too_far, 20, 25);
    cr_assert_eq(r.n, 25, "never beyond max_iters");
    peat_runtime_result_free(&r);

    script cut = {.keep = 20, .grow_at = 1000, .cut_at = 6, .cut_to = 2};
    r = steered(&cut, 20, 40);
    cr_assert_eq(r.n, 7, "cut after 6: the 7th is the last");
    cr_assert_eq(r.n_eval, 2, "iteration 4 and the last");
    cr_assert_eq(r.eval_iter[0], 3);
    cr_assert_eq(r.eval_iter[1], 6);
    peat_runtime_result_free(&r);
}

Test(fi, reorder_in_the_loop_is_training_equivalent_on_every_flow)
{
    const char *flows[4] = {"mlp", "cnn", "gpt", "gpt_unfused"};
    for (int i = 0; i < 4; i++) {
        /* `reorder` (reversed k) is not one of the band's orders: an honest kernel unseen */
        /* few iterations: the gpt flows cost ~40 ms a step, and 4 runs train in lockstep */
        peat_runtime_result r = runtime(flows[i], i < 2 ? 12 : 6, "reorder", "1");
        cr_assert_eq(r.n_faulty, 1);
        cr_assert_gt(r.faulty[0].swapped, 0);
        cr_assert_eq(r.verdict[0].cls, PEAT_RUNTIME_EQUIVALENT, "%s: %s (%s)", flows[i],
                     peat_detector_runtime_class_name(r.verdict[0].cls), r.verdict[0].evidence);
        peat_runtime_result_free(&r);
    }
}

Test(fi, exponent_flip_every_tenth_gemm_output_breaks_mlp_training)
{
    peat_runtime_result r = runtime("mlp", 30, "bitflip(bit=30)", "1/10");
    const peat_runtime_verdict *v = &r.verdict[0];
    cr_assert(v->cls == PEAT_RUNTIME_DIVERGES || v->cls == PEAT_RUNTIME_DEGRADES, "%s",
              peat_detector_runtime_class_name(v->cls));
    cr_assert(v->iter >= 0 && v->iter < 30, "iteration %lld", (long long)v->iter);
    cr_assert_gt(r.faulty[0].swapped, 0);
    peat_runtime_result_free(&r);
}

/* ---- band rules on constructed curves ---- */

/* The tolerance factor is Student's t quantile: for 2 degrees of freedom in closed form,
 * k^2 = (1 - 2a)^2 / (2a(1 - a)). */
Test(fi, band_factor_is_the_t_quantile)
{
    double a = 0.01 / 2 / 4, k = sqrt((1 - 2 * a) * (1 - 2 * a) / (2 * a * (1 - a)));
    cr_assert_float_eq(peat_detector_band_factor(2, a), k, 1e-9 * k, "t_2 at %g: %g, expected %g",
                       a, peat_detector_band_factor(2, a), k);
    /* 1 degree of freedom: Cauchy, k = tan(pi (1/2 - a)) */
    cr_assert_float_eq(peat_detector_band_factor(1, a), tan(3.14159265358979323846 * (0.5 - a)),
                       1e-6);
}

/* Three members whose window means are mean - 0.01, mean, mean + 0.01 (sd 0.01, R = 3): the loss
 * bound of each window is mean + k 0.01 sqrt(4/3), k = t_2 at 0.01 / 2 / 4 (19.96); accuracy
 * members equal (sd 0): the 2-point floor. */
Test(fi, band_rules_on_constructed_curves)
{
    enum { N = 40 };
    double l[3][N], w[3][N], lc[N], wc[N], acc[3][2], accc[2] = {0.8, 0.8};
    for (int r = 0; r < 3; r++) {
        for (int t = 0; t < N; t++) l[r][t] = 2.0 - 0.04 * t + 0.01 * (r - 1), w[r][t] = 1e-4 * r;
        acc[r][0] = acc[r][1] = 0.8;
    }
    peat_runtime_curve m[3];
    for (int r = 0; r < 3; r++) m[r] = (peat_runtime_curve){N, l[r], w[r], NULL, 2, acc[r], NULL};
    peat_runtime_band b;
    cr_assert_eq(peat_detector_band_build(m, 3, &b), PEAT_OK);
    cr_assert_eq(b.windows, 4);
    double k = peat_detector_band_factor(2, 0.01 / 8), margin = k * 0.01 * sqrt(4.0 / 3.0);
    cr_assert_float_eq(b.win_sd[3], 0.01, 1e-12, "window sd %g", b.win_sd[3]);
    peat_runtime_curve c = {N, lc, wc, NULL, 2, accc, NULL};
    peat_runtime_verdict v;
    /* just inside the bound in the last window, then just outside */
    for (int t = 0; t < N; t++) lc[t] = 2.0 - 0.04 * t + (t >= 30 ? 0.98 * margin : 0.0);
    for (int t = 0; t < N; t++) wc[t] = 1e-4;
    cr_assert_eq(peat_detector_runtime_judge(&b, &c, &v), PEAT_OK);
    cr_assert_eq(v.cls, PEAT_RUNTIME_EQUIVALENT, "0.98 of the margin: %s", v.evidence);
    cr_assert_float_eq(v.loss_t, 0.98 * k, 1e-9, "t statistic %g, expected %g", v.loss_t, 0.98 * k);
    for (int t = 30; t < N; t++) lc[t] += 0.04 * margin;
    cr_assert_eq(peat_detector_runtime_judge(&b, &c, &v), PEAT_OK);
    cr_assert_eq(v.cls, PEAT_RUNTIME_DEGRADES, "1.02 of the margin: %s", v.evidence);
    cr_assert_eq(v.iter, 30, "the last window starts at 30, got %lld", (long long)v.iter);
    cr_assert_str_eq(v.metric, "loss");
    /* weights 10x further than the honest reruns from iteration 5, loss on the members' mean:
     * a drift note, not a warning */
    for (int t = 0; t < N; t++) lc[t] = 2.0 - 0.04 * t, wc[t] = t >= 5 ? 10 * 2e-4 * 4 : 1e-4;
    cr_assert_eq(peat_detector_runtime_judge(&b, &c, &v), PEAT_OK);
    cr_assert_eq(v.cls, PEAT_RUNTIME_EQUIVALENT, "drift alone: %s", v.evidence);
    cr_assert(v.drift && v.drift_iter == 5, "drift %d from %lld", v.drift, (long long)v.drift_iter);
    cr_assert(strstr(v.evidence, "drift"), "%s", v.evidence);
    /* accuracy: 1 point below equal members is inside the 2-point floor, 3 points is not */
    accc[1] = 0.79;
    cr_assert_eq(peat_detector_runtime_judge(&b, &c, &v), PEAT_OK);
    cr_assert_eq(v.cls, PEAT_RUNTIME_EQUIVALENT, "%s", v.evidence);
    accc[1] = 0.77;
    cr_assert_eq(peat_detector_runtime_judge(&b, &c, &v), PEAT_OK);
    cr_assert_eq(v.cls, PEAT_RUNTIME_DEGRADES, "%s", v.evidence);
    cr_assert_str_eq(v.metric, "accuracy");
    accc[1] = 0.8;
    /* a NaN loss at iteration 13 */
    lc[13] = NAN;
    cr_assert_eq(peat_detector_runtime_judge(&b, &c, &v), PEAT_OK);
    cr_assert_eq(v.cls, PEAT_RUNTIME_DIVERGES);
    cr_assert_eq(v.iter, 13);
    /* an explosion: loss 10x the band's highest */
    lc[13] = 2.0;
    lc[11] = 25.0;
    cr_assert_eq(peat_detector_runtime_judge(&b, &c, &v), PEAT_OK);
    cr_assert_eq(v.cls, PEAT_RUNTIME_DIVERGES);
    cr_assert_eq(v.iter, 11);
    peat_detector_band_free(&b);
}

/* Equal members (sd 0): the effect-size floor, 0.5% of the window-mean loss. */
Test(fi, band_floor_holds_when_members_agree)
{
    enum { N = 8 };
    double l[N], lc[N], acc[1] = {0.5};
    for (int t = 0; t < N; t++) l[t] = 1.0;
    peat_runtime_curve m[2] = {{N, l, NULL, NULL, 1, acc, NULL}, {N, l, NULL, NULL, 1, acc, NULL}};
    peat_runtime_band b;
    cr_assert_eq(peat_detector_band_build(m, 2, &b), PEAT_OK);
    peat_runtime_curve c = {N, lc, NULL, NULL, 1, acc, NULL};
    peat_runtime_verdict v;
    for (int t = 0; t < N; t++) lc[t] = 1.004;
    cr_assert_eq(peat_detector_runtime_judge(&b, &c, &v), PEAT_OK);
    cr_assert_eq(v.cls, PEAT_RUNTIME_EQUIVALENT, "0.4%%: %s", v.evidence);
    for (int t = 0; t < N; t++) lc[t] = 1.006;
    cr_assert_eq(peat_detector_runtime_judge(&b, &c, &v), PEAT_OK);
    cr_assert_eq(v.cls, PEAT_RUNTIME_DEGRADES, "0.6%%: %s", v.evidence);
    peat_detector_band_free(&b);
}

/* Where training ends decides: a window before the last outside its bound, the last inside, is
 * a transient note; the last window outside is DEGRADES from the first window outside. The
 * held-out accuracy is judged on its window means the same way. */
Test(fi, band_judges_the_last_window_and_notes_a_transient_excursion)
{
    enum { N = 40 };
    double l[3][N], w[3][N], lc[N], wc[N], acc[3][4], accc[4];
    int64_t ev[4] = {9, 19, 29, 39};
    for (int r = 0; r < 3; r++) {
        for (int t = 0; t < N; t++) l[r][t] = 2.0 - 0.04 * t + 0.001 * (r - 1), w[r][t] = 1e-4 * r;
        for (int e = 0; e < 4; e++) acc[r][e] = 0.5 + 0.1 * e;
    }
    for (int t = 0; t < N; t++) wc[t] = 1e-4;
    peat_runtime_curve m[3];
    for (int r = 0; r < 3; r++) m[r] = (peat_runtime_curve){N, l[r], w[r], NULL, 4, acc[r], ev};
    peat_runtime_band b;
    cr_assert_eq(peat_detector_band_build(m, 3, &b), PEAT_OK);
    cr_assert_eq(b.acc_windows, 4, "one evaluation a window: %d", b.acc_windows);
    peat_runtime_curve c = {N, lc, wc, NULL, 4, accc, ev};
    peat_runtime_verdict v;
    /* a loss spike 50% over the members in window 1 (iterations 10-19), back in the last */
    for (int t = 0; t < N; t++) lc[t] = l[1][t] * (t >= 10 && t < 20 ? 1.5 : 1.0);
    for (int e = 0; e < 4; e++) accc[e] = acc[1][e];
    cr_assert_eq(peat_detector_runtime_judge(&b, &c, &v), PEAT_OK);
    cr_assert_eq(v.cls, PEAT_RUNTIME_EQUIVALENT, "a spike that ends: %s", v.evidence);
    cr_assert(v.transient && v.transient_iter == 10, "transient %d from %lld", v.transient,
              (long long)v.transient_iter);
    cr_assert(strstr(v.evidence, "came back"), "%s", v.evidence);
    /* the same spike with the weights 10x the reruns' distance from iteration 5: DEGRADES */
    for (int t = 5; t < N; t++) wc[t] = 10 * (4 * 2e-4 + 1e-5);
    cr_assert_eq(peat_detector_runtime_judge(&b, &c, &v), PEAT_OK);
    cr_assert_eq(v.cls, PEAT_RUNTIME_DEGRADES, "a spike off the honest trajectories: %s",
                 v.evidence);
    cr_assert(v.iter == 10 && v.drift_iter == 5, "from %lld, drift from %lld", (long long)v.iter,
              (long long)v.drift_iter);
    cr_assert(strstr(v.evidence, "drift off"), "%s", v.evidence);
    /* drift that starts after the excursion's window: the note again */
    for (int t = 0; t < N; t++) wc[t] = t >= 25 ? 10 * (4 * 2e-4 + 1e-5) : 1e-4;
    cr_assert_eq(peat_detector_runtime_judge(&b, &c, &v), PEAT_OK);
    cr_assert_eq(v.cls, PEAT_RUNTIME_EQUIVALENT, "drift after the spike: %s", v.evidence);
    cr_assert(v.transient && v.drift, "transient %d drift %d", v.transient, v.drift);
    for (int t = 0; t < N; t++) wc[t] = 1e-4;
    /* the same spike in the last window: DEGRADES from iteration 30 */
    for (int t = 0; t < N; t++) lc[t] = l[1][t] * (t >= 30 ? 1.5 : 1.0);
    cr_assert_eq(peat_detector_runtime_judge(&b, &c, &v), PEAT_OK);
    cr_assert_eq(v.cls, PEAT_RUNTIME_DEGRADES, "%s", v.evidence);
    cr_assert_eq(v.iter, 30);
    cr_assert_str_eq(v.metric, "loss");
    /* accuracy 10 points low at the first evaluation only: a note; at the last: DEGRADES */
    for (int t = 0; t < N; t++) lc[t] = l[1][t];
    accc[0] -= 0.1;
    cr_assert_eq(peat_detector_runtime_judge(&b, &c, &v), PEAT_OK);
    cr_assert_eq(v.cls, PEAT_RUNTIME_EQUIVALENT, "%s", v.evidence);
    cr_assert(v.transient && v.transient_iter == 0, "transient from %lld",
              (long long)v.transient_iter);
    accc[0] += 0.1, accc[3] -= 0.1;
    cr_assert_eq(peat_detector_runtime_judge(&b, &c, &v), PEAT_OK);
    cr_assert_eq(v.cls, PEAT_RUNTIME_DEGRADES, "%s", v.evidence);
    cr_assert_str_eq(v.metric, "accuracy");
    cr_assert_float_eq(v.acc_drop, 0.08, 1e-9,
                       "10 points below equal members, 8 below the floor: %g", v.acc_drop);
    peat_detector_band_free(&b);
}

static double gauss(uint64_t *s)
{
    double u[2];
    for (int i = 0; i < 2; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        u[i] = ((double)(*s >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2.0 * log(u[0])) * cos(2.0 * 3.14159265358979323846 * u[1]);
}

/* The stated false-alarm rate, measured: R + 1 exchangeable normal runs (4 one-iteration windows,
 * scale 1 around a loss of 100, so the floors are far below the t margin), the last judged
 * against the band of the others. The loss half of the rate is 0.5%: 1 - (1 - 0.005/4)^4. */
Test(fi, band_false_alarm_rate_matches_its_statement)
{
    enum { N = 4, TRIALS = 40000, R = 3 };
    uint64_t s = 12345;
    int alarms = 0, notes = 0;
    double l[R + 1][N];
    for (int i = 0; i < TRIALS; i++) {
        for (int r = 0; r <= R; r++)
            for (int t = 0; t < N; t++) l[r][t] = 100.0 + gauss(&s);
        peat_runtime_curve m[R + 1];
        for (int r = 0; r <= R; r++)
            m[r] = (peat_runtime_curve){N, l[r], NULL, NULL, 0, NULL, NULL};
        peat_runtime_band b;
        cr_assert_eq(peat_detector_band_build(m, R, &b), PEAT_OK);
        peat_runtime_verdict v;
        cr_assert_eq(peat_detector_runtime_judge(&b, &m[R], &v), PEAT_OK);
        alarms += v.cls != PEAT_RUNTIME_EQUIVALENT;
        notes += v.transient;
        peat_detector_band_free(&b);
    }
    /* the verdict tests the last window at a = 0.005 / 4; an earlier window outside with the
     * last inside is a transient note: (1 - (1 - a)^3) (1 - a) */
    double a = 0.005 / 4, rate = (double)alarms / TRIALS, want = a;
    double nrate = (double)notes / TRIALS, nwant = (1 - pow(1 - a, 3)) * (1 - a);
    /* 40000 trials: the binomial sd at 0.125% is 0.018%; 4 sd either side */
    cr_assert(fabs(rate - want) < 4 * sqrt(want * (1 - want) / TRIALS),
              "false-alarm rate %.4f%%, stated %.4f%%", 100 * rate, 100 * want);
    cr_assert(fabs(nrate - nwant) < 4 * sqrt(nwant * (1 - nwant) / TRIALS),
              "transient-note rate %.4f%%, expected %.4f%%", 100 * nrate, 100 * nwant);
}

/* ---- campaign file: tables and the playback FI campaign ---- */

/* A small finished campaign (mlp, 16 GEMM records) in dir. */
static void make_campaign(const char *dir)
{
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    o.kernel = "gemm_new";
    o.flow = "mlp";
    o.iters = 8;
    o.calls = 16;
    o.out_dir = dir;
    o.quiet = 1;
    o.isolate = 0;
    o.no_runtime = 1;
    peat_campaign_result r;
    cr_assert_eq(peat_run_campaign(&o, &r), PEAT_OK, "campaign: %s", peat_error_last());
}

Test(fi, table_rows_survive_reopen_and_columns_are_checked)
{
    char dir[300], path[320];
    snprintf(dir, sizeof dir, "%s/c", tmpdir);
    make_campaign(dir);
    snprintf(path, sizeof path, "%s/campaign.h5", dir);
    peat_store_t *s;
    cr_assert_eq(peat_store_open(path, 1, &s), PEAT_OK);
    /* a stage table of the file (run without the runtime stage: empty) */
    const char *tp = PEAT_STORE_RUNTIME_WDIST;
    const peat_store_col *cols = peat_store_runtime_wdist_cols; /* run, iter, tensor, distance */
    peat_store_table_t *t;
    cr_assert(!peat_store_table_present(s, tp));
    cr_assert_eq(peat_store_table_open(s, tp, cols, 4, &t), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(peat_store_table_rows(t), 0);
    peat_store_value v[8] = {{.s = "a"},      {.i = -5}, {.s = "w"}, {.d = 0.25},
                             {.s = "bcdefg"}, {.i = 7},  {.s = "x"}, {.d = NAN}};
    cr_assert_eq(peat_store_table_append(t, v, 2), PEAT_OK);
    char long_name[80];
    memset(long_name, 'n', 64);
    long_name[64] = 0;
    peat_store_value too_long[4] = {{.s = long_name}, {.i = 0}, {.s = ""}, {.d = 0}};
    cr_assert_eq(peat_store_table_append(t, too_long, 1), PEAT_ERR_INVAL);
    peat_store_table_close(t);
    cr_assert_eq(peat_store_close(s), PEAT_OK);
    cr_assert_eq(peat_store_open(path, 0, &s), PEAT_OK);
    cr_assert(peat_store_table_present(s, tp));
    cr_assert_eq(peat_store_table_open(s, tp, cols, 4, &t), PEAT_OK);
    cr_assert_eq(peat_store_table_rows(t), 2);
    peat_store_value g;
    cr_assert_eq(peat_store_table_get(t, 1, 0, &g), PEAT_OK);
    cr_assert_str_eq(g.s, "bcdefg");
    cr_assert_eq(peat_store_table_get(t, 0, 1, &g), PEAT_OK);
    cr_assert_eq(g.i, -5);
    cr_assert_eq(peat_store_table_get(t, 1, 3, &g), PEAT_OK);
    cr_assert(isnan(g.d));
    peat_store_table_close(t);
    const peat_store_col other[2] = {{"run", PEAT_STORE_COL_STR, 64},
                                     {"iter", PEAT_STORE_COL_F64, 0}};
    cr_assert_eq(peat_store_table_open(s, tp, other, 2, &t), PEAT_ERR_FORMAT);
    cr_assert_eq(peat_store_table_open(s, "/test/none", cols, 4, &t), PEAT_ERR_NOTFOUND);
    cr_assert_eq(peat_store_close(s), PEAT_OK);
}

static void fi_opts(peat_fi_opts *o, const char *dir)
{
    peat_fi_opts_default(o);
    o->campaign = dir;
    o->models = "bitflip(bit=-1);nan;tile(rows=4,cols=4,kind=random)";
    o->trials = 60;
    o->threads = 2;
    o->batch = 16;
    o->signature_trials = 4;
    o->quiet = 1;
}

Test(fi, killed_fi_campaign_resumes_with_no_trial_lost_or_doubled)
{
    char dir[300], clean[300], cmd[800];
    snprintf(dir, sizeof dir, "%s/c", tmpdir);
    snprintf(clean, sizeof clean, "%s/clean", tmpdir);
    make_campaign(dir);
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", dir, clean);
    cr_assert_eq(system(cmd), 0);
    /* killed right after its 3rd durable batch */
    pid_t pid = fork();
    if (pid == 0) {
        peat_fi_opts o;
        fi_opts(&o, dir);
        o.debug_kill_after = 40;
        peat_fi_result r;
        peat_fi_run(&o, &r);
        _exit(3); /* not reached: the kill comes first */
    }
    int ws;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL, "the child was killed");
    peat_fi_opts o;
    fi_opts(&o, dir);
    peat_fi_result r;
    cr_assert_eq(peat_fi_run(&o, &r), PEAT_OK, "resume: %s", peat_error_last());
    cr_assert_eq(r.n_resumed, 48, "three batches of 16 were in the file");
    cr_assert_eq(r.n_run, 3 * 60 - 48);
    cr_assert_eq(r.n_trials, 3 * 60, "no trial doubled");
    /* every (model, index) exactly once, and the same outcomes as an uninterrupted campaign */
    peat_fi_result c;
    fi_opts(&o, clean);
    o.threads = 1;
    cr_assert_eq(peat_fi_run(&o, &c), PEAT_OK, "clean: %s", peat_error_last());
    cr_assert_eq(c.n_trials, r.n_trials);
    for (int64_t i = 0; i < c.n_trials; i++) {
        int found = 0;
        for (int64_t j = 0; j < r.n_trials; j++) {
            if (strcmp(r.trials[j].model, c.trials[i].model) ||
                r.trials[j].index != c.trials[i].index)
                continue;
            found++;
            cr_assert_eq(r.trials[j].outcome, c.trials[i].outcome);
            cr_assert_eq(r.trials[j].seed, c.trials[i].seed);
            cr_assert_eq(r.trials[j].n_diff, c.trials[i].n_diff);
            cr_assert_eq(r.trials[j].prop, c.trials[i].prop, "%s #%lld: propagated %s vs %s",
                         c.trials[i].model, (long long)c.trials[i].index,
                         peat_inject_outcome_name(r.trials[j].prop),
                         peat_inject_outcome_name(c.trials[i].prop));
            cr_assert(r.trials[j].prop < PEAT_INJECT_OUTCOME_COUNT, "every trial was followed");
            cr_assert_eq(r.trials[j].d_loss, c.trials[i].d_loss);
        }
        cr_assert_eq(found, 1, "%s #%lld found %d times", c.trials[i].model,
                     (long long)c.trials[i].index, found);
    }
    /* a bit-level series gets 32 bit rows; nan trials are all DUE */
    cr_assert_eq(r.tab[PEAT_INJECT_BY_BIT].n, 32);
    const peat_inject_table *mt = &r.tab[PEAT_INJECT_BY_MODEL];
    for (int i = 0; i < mt->n; i++)
        if (!strncmp(mt->rows[i].key, "nan", 3)) cr_assert_eq(mt->rows[i].t.n[PEAT_INJECT_DUE], 60);
    /* the reference signatures are in the file */
    char path[400];
    snprintf(path, sizeof path, "%s/campaign.h5", dir);
    peat_store_t *s;
    cr_assert_eq(peat_store_open(path, 0, &s), PEAT_OK);
    char *js = NULL;
    cr_assert_eq(peat_store_signature_read(s, "fi:nan(count=1,value=nan,out=0)@output", &js),
                 PEAT_OK, "%s", peat_error_last());
    cr_assert(strstr(js, "\"n_nan\""));
    free(js);
    peat_store_close(s);
    peat_fi_result_free(&r);
    peat_fi_result_free(&c);
}

/* The band's reruns are the orders docs/detector.md lists ("The band's reorder GEMMs": "1.
 * `spec`" ... in the order a larger band adds them), each parses and runs on a GEMM, and there
 * are no more members than the list. */
Test(fi, band_members_are_the_documented_orders)
{
    FILE *f = fopen(PEAT_TEST_SOURCE_DIR "/docs/detector.md", "rb");
    cr_assert_not_null(f, "docs/detector.md readable");
    static char doc[1 << 20];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = 0;
    const char *sec = strstr(doc, "## The band's reorder GEMMs");
    cr_assert_not_null(sec, "docs/detector.md has the band section");
    const char *end = strstr(sec + 3, "\n## ");
    int r = 1;
    for (; peat_runtime_band_listed(r); r++) {
        const char *spec = peat_runtime_band_listed(r);
        char item[160];
        snprintf(item, sizeof item, "\n%d. `%s`", r, spec);
        const char *at = strstr(sec, item);
        cr_assert(at && (!end || at < end), "band rerun %d (%s) is item %d of the docs' list", r,
                  spec, r);
        peat_inject_model_t *m;
        cr_assert_eq(peat_inject_model_parse(spec, &m), PEAT_OK, "%s: %s", spec, peat_error_last());
        peat_inject_model_free(m);
    }
    char item[16];
    snprintf(item, sizeof item, "\n%d. `", r);
    const char *extra = strstr(sec, item);
    cr_assert(!extra || (end && extra > end), "the docs list a band member %d the code lacks", r);
    cr_assert_eq(r - 1, PEAT_RUNTIME_MAX_BAND - 1, "%d band reruns listed", r - 1);
    /* this machine's band: the listed orders, each once */
    for (int i = 1; i < r; i++) {
        int found = 0;
        for (int j = 1; j < r; j++)
            found += !strcmp(peat_runtime_band_spec(j), peat_runtime_band_listed(i));
        cr_assert_eq(found, 1, "%s is %d times in this machine's band", peat_runtime_band_listed(i),
                     found);
    }
}

/* An order that gives the golden's own sums goes to the end of the band: with the plain forward
 * loop as the golden (a generic BLAS kernel, or PEAT_BLAS=0), the forward member would repeat the
 * golden run. Known answers: forward is gemm_plain's definition; reverse and the pairwise tree
 * change most outputs' last bits. */
Test(fi, band_orders_that_repeat_the_golden_go_last)
{
    const peat_kernel *plain = peat_registry_find_on("gemm_plain", "cpu");
    cr_assert_not_null(plain, "gemm_plain registered");
    const char *order[PEAT_RUNTIME_MAX_BAND - 1];
    peat_runtime_band_order(plain, order);
    enum { N = PEAT_RUNTIME_MAX_BAND - 1 };
    int at_fwd = -1, at_rev = -1, at_pw = -1;
    for (int i = 0; i < N; i++) {
        cr_assert_not_null(order[i], "order %d", i);
        if (!strcmp(order[i], "reorder(order=forward)")) at_fwd = i;
        if (!strcmp(order[i], "reorder(order=reverse)")) at_rev = i;
        if (!strcmp(order[i], "reorder(order=pairwise)")) at_pw = i;
    }
    cr_assert_eq(at_fwd, N - 1, "the forward order repeats gemm_plain: last, not %d", at_fwd);
    cr_assert(at_pw >= 0 && at_rev > at_pw, "pairwise (%d) then reverse (%d), as listed", at_pw,
              at_rev);
    /* the orders that stay keep the listed order */
    int last = -1;
    for (int i = 0; i < N - 1; i++) {
        int listed = 0;
        while (listed < N && strcmp(peat_runtime_band_listed(listed + 1), order[i])) listed++;
        cr_assert(listed > last, "%s out of the listed order", order[i]);
        last = listed;
    }
}

/* The runtime stage inside `peat run`: a verdict per frequency joins the findings, and the
 * curves, verdicts and faulty checkpoints are in the finished campaign file. */
Test(fi, runtime_stage_in_a_campaign)
{
    char dir[300], path[320];
    snprintf(dir, sizeof dir, "%s/rt", tmpdir);
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    o.kernel = "gemm_new";
    o.flow = "mlp";
    o.iters = 12;
    o.calls = 8;
    o.out_dir = dir;
    o.quiet = 1;
    o.isolate = 0;
    cr_assert_eq(peat_freq_schedule_parse("1,1/10", &o.runtime_freq), PEAT_OK);
    peat_campaign_result r;
    cr_assert_eq(peat_run_campaign(&o, &r), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(r.n_runtime, 2);
    int found = 0;
    for (int i = 0; i < r.n_findings; i++)
        found += r.findings[i].cls == PEAT_FIND_TRAINING_EQUIVALENT;
    cr_assert_eq(found, 2, "one TRAINING_EQUIVALENT finding per frequency");
    cr_assert_eq(r.verdict, PEAT_ACCEPT_PASS);
    cr_assert_gt(r.runtime_swapped[0], 9 * r.runtime_swapped[1], "1/10 swaps a tenth");
    snprintf(path, sizeof path, "%s/campaign.h5", dir);
    peat_store_t *s;
    cr_assert_eq(peat_store_open(path, 0, &s), PEAT_OK);
    const peat_store_col vcols[3] = {{"run", PEAT_STORE_COL_STR, 64},
                                     {"freq", PEAT_STORE_COL_STR, 32},
                                     {"verdict", PEAT_STORE_COL_STR, 24}};
    peat_store_table_t *t;
    /* a prefix of the columns is not the table: the check names the difference */
    cr_assert_eq(peat_store_table_open(s, "/runtime/verdicts", vcols, 3, &t), PEAT_ERR_FORMAT);
    cr_assert(peat_store_table_exists(s, "/runtime/curves"));
    cr_assert(peat_store_state_has(s, 11, "runtime 1/10"), "faulty checkpoint at the last iter");
    cr_assert(peat_store_state_has(s, 11, "checkpoint"));
    peat_store_close(s);
}

/* `peat inject` through the binary: a run, and usage errors with exit status 2. */
Test(fi, inject_command_line)
{
    char dir[300], cmd[1200];
    snprintf(dir, sizeof dir, "%s/c", tmpdir);
    make_campaign(dir);
    snprintf(cmd, sizeof cmd,
             "%s inject --campaign %s --model 'nan;bitflip(bit=-1)' --trials 40 --threads 2 "
             "--quiet >%s/out 2>&1",
             PEAT_TEST_BIN, dir, tmpdir);
    int st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "peat inject failed");
    snprintf(cmd, sizeof cmd,
             "grep -q 'propagated view' %s/out && test -s %s/fi-summary.md && test -s "
             "%s/fi-report.html",
             tmpdir, dir, dir);
    cr_assert_eq(system(cmd), 0, "tables and reports written");
    const char *bad[3] = {"--model nan", "--campaign DIR --model 'nosuch'",
                          "--campaign DIR --model nan --site elsewhere"};
    for (int i = 0; i < 3; i++) {
        char args[300];
        snprintf(args, sizeof args, "%s", bad[i]);
        char *p = strstr(args, "DIR");
        if (p) {
            char rest[300];
            snprintf(rest, sizeof rest, "%s", p + 3);
            snprintf(p, sizeof args - (size_t)(p - args), "%s%s", dir, rest);
        }
        snprintf(cmd, sizeof cmd, "%s inject %s >/dev/null 2>%s/err", PEAT_TEST_BIN, args, tmpdir);
        st = system(cmd);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "'%s': exit 2 expected", args);
    }
}

/* ---- propagated outcomes of constructed faults with known effects ---- */

/* The first record of (layer, phase) in a campaign's file, with its index. */
static peat_record *record_of(peat_store_t *s, const char *layer, peat_phase ph)
{
    for (int64_t i = 0; i < peat_store_call_count(s); i++) {
        peat_record *r = NULL;
        cr_assert_eq(peat_store_call_read(s, i, &r), PEAT_OK, "%s", peat_error_last());
        if (r->op == PEAT_OP_GEMM && !strcmp(r->layer, layer) && r->phase == ph) return r;
        peat_record_free(r);
    }
    cr_assert_fail("no %s gemm record of layer %s", ph == PEAT_PHASE_FWD ? "fwd" : "bwd", layer);
    return NULL;
}

/* Faulty outputs: a copy of the record's golden outputs, element e of output 0 set to v. */
static void faulty_make(const peat_record *r, int64_t e, float v, peat_args *a)
{
    *a = peat_record_args(r);
    cr_assert_eq(peat_op_alloc_outputs(a, PEAT_DTYPE_F32), PEAT_OK);
    for (int o = 0; o < a->n_out; o++)
        memcpy(a->out[o]->data, r->golden[o]->data, peat_tensor_nbytes(r->golden[o]));
    peat_f32(a->out[0])[e] = v;
}

Test(fi, propagated_class_of_faults_with_known_effects)
{
    char dir[300], path[320];
    snprintf(dir, sizeof dir, "%s/c", tmpdir);
    make_campaign(dir);
    snprintf(path, sizeof path, "%s/campaign.h5", dir);
    peat_store_t *s;
    cr_assert_eq(peat_store_open(path, 0, &s), PEAT_OK);
    peat_store_meta meta;
    cr_assert_eq(peat_store_meta_get(s, &meta), PEAT_OK);
    peat_record *fc1 = record_of(s, "fc1", PEAT_PHASE_FWD),
                *fc3 = record_of(s, "fc3", PEAT_PHASE_FWD);
    int64_t iters[2] = {fc1->iter, fc3->iter};
    peat_fi_prop_t *p;
    cr_assert_eq(peat_fi_prop_alloc(&meta, iters, 2, &p), PEAT_OK, "%s", peat_error_last());
    peat_fi_prop_worker_t *w;
    cr_assert_eq(peat_fi_prop_worker_alloc(p, &w), PEAT_OK, "%s", peat_error_last());
    const peat_inject_step_band *band = peat_fi_prop_band(p, fc3->iter);
    cr_assert(band && band->loss > 0 && band->w > 0, "honest reorderings move loss and weights");

    /* fc1's pre-activation: an element far below zero (the bias is near 0 this early) with its
     * lowest mantissa bit flipped stays negative: the ReLU zeroes it, the backward pass only
     * reads its sign: loss, predictions and update bit-identical */
    const float *g = peat_f32(fc1->golden[0]);
    int64_t e = 0;
    while (e < peat_tensor_numel(fc1->golden[0]) && !(g[e] < -0.5f)) e++;
    cr_assert_lt(e, peat_tensor_numel(fc1->golden[0]), "a negative pre-activation");
    peat_args a;
    faulty_make(fc1, e, peat_f32_from_bits(peat_f32_bits(g[e]) ^ 1u), &a);
    peat_inject_trial t;
    memset(&t, 0, sizeof t);
    cr_assert_eq(peat_fi_prop_trial(w, fc1, &a, &t), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(t.prop, PEAT_INJECT_MASKED, "a flip the ReLU zeroes is MASKED, got %s",
                 peat_inject_outcome_name(t.prop));
    peat_args_free_outputs(&a);

    /* the same element made positive and large: the step changes (not MASKED) */
    faulty_make(fc1, e, 64.0f, &a);
    cr_assert_eq(peat_fi_prop_trial(w, fc1, &a, &t), PEAT_OK);
    cr_assert_neq(t.prop, PEAT_INJECT_MASKED, "a value through the ReLU is not masked");
    peat_args_free_outputs(&a);

    /* a NaN in the logits: the loss is NaN: DUE */
    faulty_make(fc3, 0, NAN, &a);
    cr_assert_eq(peat_fi_prop_trial(w, fc3, &a, &t), PEAT_OK);
    cr_assert_eq(t.prop, PEAT_INJECT_DUE, "a NaN logit is DUE, got %s",
                 peat_inject_outcome_name(t.prop));
    peat_args_free_outputs(&a);

    /* a large logit of the wrong sign: row 0's largest logit product (its class; the bias is
     * near 0 this early) replaced by -100, as a sign flip of a large logit would: that row's
     * class changes: SDC with the prediction changed */
    const float *z = peat_f32(fc3->golden[0]);
    int64_t C = fc3->golden[0]->shape[1], best = 0;
    for (int64_t c = 1; c < C; c++)
        if (z[c] > z[best]) best = c;
    faulty_make(fc3, best, -100.0f, &a);
    cr_assert_eq(peat_fi_prop_trial(w, fc3, &a, &t), PEAT_OK);
    cr_assert_eq(t.prop, PEAT_INJECT_SDC, "got %s", peat_inject_outcome_name(t.prop));
    cr_assert_geq(t.pred_changed, 1, "row 0's predicted class changes");
    peat_args_free_outputs(&a);

    /* an honest reordering of the faulted call is within the step's band: never SDC */
    peat_inject_model_t *m;
    cr_assert_eq(peat_inject_model_parse("reorder(order=split,split=16)", &m), PEAT_OK);
    a = peat_record_args(fc3);
    cr_assert_eq(peat_op_alloc_outputs(&a, PEAT_DTYPE_F32), PEAT_OK);
    cr_assert_eq(
        peat_inject_run(m, peat_registry_role(PEAT_OP_GEMM, PEAT_ROLE_GOLDEN, "cpu"), &a, 1),
        PEAT_OK);
    cr_assert_eq(peat_fi_prop_trial(w, fc3, &a, &t), PEAT_OK);
    cr_assert(t.prop == PEAT_INJECT_MASKED || t.prop == PEAT_INJECT_TOLERABLE,
              "an honest order is MASKED or TOLERABLE, got %s (d_loss %g band %g, d_w %g band %g)",
              peat_inject_outcome_name(t.prop), t.d_loss, band->loss, t.d_w, band->w);
    peat_args_free_outputs(&a);
    peat_inject_model_free(m);

    peat_fi_prop_worker_free(w);
    peat_fi_prop_free(p);
    peat_record_free(fc1);
    peat_record_free(fc3);
    peat_store_close(s);
}

/* `peat run --runtime-model`: an exponent flip every 10th call of the golden GEMM diverges
 * training (exit 1), a flip of the mantissa's last bit stays in the band (exit 0). */
Test(fi, runtime_model_on_the_golden_kernel_from_the_command_line)
{
    const char *bits[2] = {"30", "0"};
    const char *want[2] = {"DIVERGES", "TRAINING_EQUIVALENT"};
    for (int k = 0; k < 2; k++) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd,
                 "%s run --kernel gemm_golden --runtime-model 'bitflip(bit=%s)' --runtime-freq "
                 "1/10 --no-probes --no-isolate --out %s/rm%s >%s/rm.out 2>&1",
                 PEAT_TEST_BIN, bits[k], tmpdir, bits[k], tmpdir);
        int st = system(cmd);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == (k == 0 ? 1 : 0),
                  "bit %s: exit %d, expected %d", bits[k], WEXITSTATUS(st), k == 0 ? 1 : 0);
        snprintf(cmd, sizeof cmd, "grep -q 'bitflip(bit=%s) @ 1/10 .*%s' %s/rm.out", bits[k],
                 want[k], tmpdir);
        cr_assert_eq(system(cmd), 0, "bit %s: no %s row in the runtime table", bits[k], want[k]);
    }
    /* a malformed model is refused before anything runs */
    char cmd[600];
    snprintf(cmd, sizeof cmd,
             "%s run --kernel gemm_golden --runtime-model 'bitflip(bit=99)' --out %s/bad "
             ">/dev/null 2>&1",
             PEAT_TEST_BIN, tmpdir);
    int st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "bad model: exit 2");
}

/* --layer and --phase choose the records, the selection names the series (its own resume), and
 * a rerun adds no signature row. The campaign and its injections, in this process, create no
 * HDF5 object in a file in SWMR write mode (HDF5's SWMR contract; the store refuses it). */
Test(fi, selection_makes_its_own_series_and_reruns_add_no_signature)
{
    char dir[300], path[320];
    snprintf(dir, sizeof dir, "%s/c", tmpdir);
    int64_t creates = peat_store_test_swmr_creates();
    make_campaign(dir);
    snprintf(path, sizeof path, "%s/campaign.h5", dir);
    peat_fi_opts o;
    peat_fi_opts_default(&o);
    o.campaign = dir;
    o.models = "bitflip(bit=-1)";
    o.trials = 40;
    o.threads = 1;
    o.quiet = 1;
    o.layers = "fc1";
    o.phases = "fwd";
    peat_fi_result r;
    cr_assert_eq(peat_fi_run(&o, &r), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(r.n_trials, 40);
    for (int64_t i = 0; i < r.n_trials; i++) {
        cr_assert_str_eq(r.trials[i].layer, "fc1", "trial %lld hit layer %s", (long long)i,
                         r.trials[i].layer);
        cr_assert_eq(r.trials[i].phase, PEAT_PHASE_FWD);
        cr_assert_str_eq(r.trials[i].select, "layer=fc1 phase=fwd");
    }
    peat_fi_result_free(&r);
    peat_store_t *s;
    cr_assert_eq(peat_store_open(path, 0, &s), PEAT_OK);
    int64_t sigs = peat_store_signature_count(s);
    peat_store_close(s);
    /* the same command again: nothing run, no signature row added */
    cr_assert_eq(peat_fi_run(&o, &r), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(r.n_run, 0, "a rerun resumes everything");
    peat_fi_result_free(&r);
    cr_assert_eq(peat_store_open(path, 0, &s), PEAT_OK);
    cr_assert_eq(peat_store_signature_count(s), sigs, "no duplicate fi: signature rows");
    peat_store_close(s);
    /* the same model over every record is another series */
    o.layers = NULL, o.phases = NULL;
    cr_assert_eq(peat_fi_run(&o, &r), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(r.n_run, 40, "a new series, not a resume of the fc1 one");
    cr_assert_eq(r.tab[PEAT_INJECT_BY_MODEL].n, 2, "two series in the file");
    peat_fi_result_free(&r);
    /* a layer no record has is refused with a message */
    o.layers = "nope";
    cr_assert_eq(peat_fi_run(&o, &r), PEAT_ERR_NOTFOUND);
    cr_assert_eq(peat_store_test_swmr_creates(), creates,
                 "objects were asked for in a file in SWMR write mode");
}
