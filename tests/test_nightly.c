/* test_nightly.c: nightly CI: suite and policy files, the JSON reader, `peat diff` (planted
 * regression named, same seed quiet), `peat ci` over examples/nightly.suite and with failing
 * items, baselines, and the published formats (signature.json against docs/signature.schema.json,
 * junit.xml against tests/junit.xsd). */
#include <criterion/criterion.h>

#include "harness/nightly/ci.h"
#include "harness/cli/cmdline.h"
#include "harness/nightly/diff.h"
#include "harness/nightly/jsonread.h"
#include "harness/campaign/plots.h"
#include "analyzer/analyzer.h"
#include "harness/nightly/suite.h"
#include "harness/runtime/builtin.h"
#include "peat/backend.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_run.h"

static void setup(void)
{
    tmpdir_make("nightly");
}

static void teardown(void)
{
    tmpdir_remove();
}

TestSuite(nightly, .init = setup, .fini = teardown, .timeout = 600);

static void spit(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

static int count_of(const char *s, const char *needle)
{
    int n = 0;
    for (const char *c = s; (c = strstr(c, needle)); c += strlen(needle)) n++;
    return n;
}

#define PLUGIN PEAT_TEST_PLUGIN_DIR "/libplugin_test_gemms.so"
#define SMALL  "--iters 8 --calls 8"

/* ---- suite and policy files ---- */

Test(nightly, example_suite_parses)
{
    peat_suite s;
    cr_assert_eq(peat_nightly_suite_load(PEAT_TEST_SOURCE_DIR "/examples/nightly.suite", &s),
                 PEAT_OK, "%s", peat_error_last());
    cr_assert_str_eq(s.name, "builtin-candidates");
    cr_assert_eq(s.n_kernels, 18, "the example suite covers the 18 built-in candidates, got %d",
                 s.n_kernels);
    cr_assert_eq(s.policy.fail_on, PEAT_ACCEPT_WARN);
    cr_assert_eq(s.kernels[0].iters, 4, "[suite] iters reaches every kernel");
    cr_assert_eq(s.kernels[17].calls, 4);
    cr_assert_eq(s.kernels[0].budget_s, 120.0);
    cr_assert(peat_nightly_policy_allows(&s.policy, "gemm_bf16", PEAT_FIND_REDUCED_PRECISION,
                                         "bits=7.5,storage=24"));
    cr_assert(!peat_nightly_policy_allows(&s.policy, "gemm_bf16", PEAT_FIND_REDUCED_PRECISION,
                                          "bits=5.2"),
              "bits>=6 must not allow 5.2 bits");
    cr_assert(
        !peat_nightly_policy_allows(&s.policy, "gemm_new", PEAT_FIND_REDUCED_PRECISION, "bits=7.5"),
        "an allowance is for its kernel only");
    cr_assert(!peat_nightly_policy_allows(&s.policy, "gemm_bf16", PEAT_FIND_OUT_OF_BOUND, ""));
    cr_assert(peat_nightly_policy_allows(&s.policy, "gelu_tanh", PEAT_FIND_APPROX, ""));
}

Test(nightly, suite_kernel_sections_override_and_plugins_resolve)
{
    char p[400];
    snprintf(p, sizeof p, "%s/s.suite", tmpdir);
    spit(p, "[suite]\nkernels = a, b\niters = 5\nbudget = 2m\nplugin = libx.so\nsize = small\n"
            "[kernel b]\niters = 7\nflows = mlp gpt\nallow = NOISE\nsize = base\n"
            "[kernel c]\ncalls = 3\n[accept]\nallow = * TILE rows<=2\n"
            "[thresholds]\neff-bits-drop = 0.5\n");
    peat_suite s;
    cr_assert_eq(peat_nightly_suite_load(p, &s), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(s.n_kernels, 3, "a, b and the section-only c");
    cr_assert_eq(s.kernels[0].iters, 5);
    cr_assert_eq(s.kernels[1].iters, 7, "[kernel b] overrides [suite]");
    cr_assert_eq(s.kernels[1].n_flows, 2);
    cr_assert_str_eq(s.kernels[1].flows[1], "gpt");
    cr_assert_eq(s.kernels[2].calls, 3);
    cr_assert_str_eq(s.kernels[0].size, "small", "[suite]'s size is every kernel's");
    cr_assert_str_eq(s.kernels[1].size, "base", "[kernel b] overrides the size");
    cr_assert_eq(s.kernels[2].budget_s, 120.0);
    cr_assert_eq(s.policy.th.eff_bits_drop, 0.5);
    cr_assert_eq(s.policy.th.max_norm_ratio, 2.0, "unset thresholds keep their defaults");
    char want[600];
    snprintf(want, sizeof want, "%s/libx.so", tmpdir);
    cr_assert_str_eq(s.plugins[0], want, "plugins are relative to the suite file");
    cr_assert(peat_nightly_policy_allows(&s.policy, "b", PEAT_FIND_NOISE, ""));
    cr_assert(peat_nightly_policy_allows(&s.policy, "anything", PEAT_FIND_TILE, "rows=2,cols=9"));
    cr_assert(!peat_nightly_policy_allows(&s.policy, "anything", PEAT_FIND_TILE, "rows=3"));
    cr_assert(!peat_nightly_policy_allows(&s.policy, "anything", PEAT_FIND_TILE, "cols=1"),
              "a condition on a parameter the finding lacks does not hold");
}

Test(nightly, bad_suite_files_give_one_line_naming_the_line)
{
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"[suite]\nkernels = a\niter = 3\n", "s.suite:3: unknown key 'iter'"},
        {"[suite]\nkernels = a\niters = many\n", "s.suite:3: expected an integer"},
        {"[suite]\nkernels = a\nbudget = 3 weeks\n", "s.suite:3: bad duration"},
        {"[suite]\nkernels = a\nsize = huge\n", "s.suite:3: size 'huge': tiny, small or base"},
        {"[suit]\nkernels = a\n", "s.suite:2: unknown section [suit]"},
        {"[suite]\nkernels a\n", "s.suite:2: expected `key = value`"},
        {"[suite]\nkernels = a\n[kernel a]\nallow = PRECISION\n", "s.suite:4: unknown finding"},
        {"[suite]\nkernels = a\n[kernel a]\nallow = NOISE bits=3\n", "s.suite:4: bad condition"},
        {"[suite]\nkernels = a\n[accept]\nfail-on = sometimes\n", "s.suite:4: fail-on must be"},
        {"[suite]\nname = x\n", "no kernels"},
        {"[suite\nkernels = a\n", "s.suite:1: expected `[section]`"},
    };
    char p[400];
    snprintf(p, sizeof p, "%s/s.suite", tmpdir);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        spit(p, bad[i].text);
        peat_suite s;
        cr_assert_neq(peat_nightly_suite_load(p, &s), PEAT_OK, "case %zu was accepted", i);
        const char *m = peat_error_last();
        cr_assert(strstr(m, bad[i].want), "case %zu: '%s' lacks '%s'", i, m, bad[i].want);
        cr_assert_null(strchr(m, '\n'), "case %zu: more than one line", i);
        /* the same through the command: exit 2, one line, nothing run */
        int rc = sh("%s ci %s --out %s/o%zu", PEAT_TEST_BIN, p, tmpdir, i);
        cr_assert_eq(rc, 2, "case %zu: peat ci exited %d", i, rc);
        cr_assert_eq(count_lines(err_buf), 1, "case %zu: %s", i, err_buf);
    }
}

Test(nightly, suite_naming_unknown_kernel_or_flow_is_refused_before_running)
{
    char p[400];
    snprintf(p, sizeof p, "%s/s.suite", tmpdir);
    spit(p, "[suite]\nkernels = gemm_new, gemm_nwe\n");
    cr_assert_eq(sh("%s ci %s --out %s/o1", PEAT_TEST_BIN, p, tmpdir), 2);
    cr_assert(strstr(err_buf, "s.suite:2: 'gemm_nwe' is no kernel"), "%s", err_buf);
    struct stat st;
    char o[400];
    snprintf(o, sizeof o, "%s/o1/items/gemm_new-mlp-cpu", tmpdir);
    cr_assert_neq(stat(o, &st), 0, "nothing may run when the suite is bad");
    /* the command line itself: one SUITE, known options */
    const char *bad[] = {"ci",
                         "ci a.suite b.suite",
                         "ci --frobnicate x.suite",
                         "ci x.suite --out",
                         "ci x.suite --update-baseline",
                         "diff onlyone",
                         "diff a b c"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(sh("%s %s", PEAT_TEST_BIN, bad[i]), 2, "`peat %s`", bad[i]);
        cr_assert_eq(count_lines(err_buf), 1, "`peat %s`: %s", bad[i], err_buf);
    }
    spit(p, "[suite]\nkernels = softmax_online\nflows = mlp\n");
    cr_assert_eq(sh("%s ci %s --out %s/o2", PEAT_TEST_BIN, p, tmpdir), 2);
    cr_assert(strstr(err_buf, "no listed flow calls softmax"), "%s", err_buf);
}

/* A suite may name any backend this build has (the backend registry's names), and only those. */
Test(nightly, suite_backends_are_the_built_ones)
{
    char p[400], built[64], want[256];
    snprintf(p, sizeof p, "%s/cl.suite", tmpdir);
    spit(p, "[suite]\nkernels = gemm_new\nbackends = opencl\n");
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK, "%s", peat_error_last());
    snprintf(built, sizeof built, "%s", peat_backend_list());
    char padded[80];
    snprintf(padded, sizeof padded, ",%s,", built);
    peat_ci_result *res = calloc(1, sizeof *res);
    cr_assert_not_null(res);
    peat_status st = peat_nightly_ci_plan(p, NULL, res);
    if (strstr(padded, ",opencl,")) {
        cr_assert_eq(st, PEAT_OK, "an opencl suite where opencl is built (%s): %s", built,
                     peat_error_last());
        cr_assert_eq(res->n_items, 1, "gemm_new on opencl, its first flow: %d items", res->n_items);
        cr_assert_str_eq(res->items[0].backend, "opencl", "the item runs on the listed backend");
        cr_assert_str_eq(res->items[0].dir, "items/gemm_new-mlp-opencl");
    } else {
        cr_assert_neq(st, PEAT_OK, "an opencl suite where only %s is built", built);
        snprintf(want, sizeof want,
                 "cl.suite:2: backend 'opencl' is not built in (this build has: "
                 "auto, %s;",
                 built);
        cr_assert(strstr(peat_error_last(), want), "the error names the built backends: %s",
                  peat_error_last());
    }
    peat_nightly_ci_result_free(res);
    free(res);
    /* a backend no build has: refused before anything runs, in one line naming the built ones
     * (at the line of the kernel it was listed for) */
    spit(p, "[suite]\nkernels = gemm_new\nbackends = cpu, vulkan\n");
    cr_assert_eq(sh("%s ci %s --out %s/o", PEAT_TEST_BIN, p, tmpdir), 2, "%s", err_buf);
    cr_assert_eq(count_lines(err_buf), 1, "one line: %s", err_buf);
    snprintf(want, sizeof want,
             "cl.suite:2: backend 'vulkan' is not built in (this build has: auto, %s; "
             "docs/devices.md)",
             built);
    cr_assert(strstr(err_buf, want), "wanted \"%s\" in: %s", want, err_buf);
    struct stat sb;
    snprintf(p, sizeof p, "%s/o/items/gemm_new-mlp-cpu", tmpdir);
    cr_assert_neq(stat(p, &sb), 0, "nothing may run when a backend is refused");
}

/* ---- JSON reader ---- */

Test(nightly, json_reader_known_answers)
{
    peat_json v;
    const char *text = "{\"a\": {\"b\": [1, -2.5e3, true, null, \"x\\u00e9\\ud83d\\ude00\\n\"]},"
                       " \"n\": null, \"s\": \"q\\\"\\\\/\"}";
    cr_assert_eq(peat_nightly_json_parse(text, "t", &v), PEAT_OK, "%s", peat_error_last());
    const peat_json *b = peat_nightly_json_path(&v, "a.b");
    cr_assert_not_null(b);
    cr_assert_eq(b->n, 5);
    cr_assert_eq(b->items[1].num, -2500.0);
    cr_assert_eq(b->items[2].kind, PEAT_JSON_BOOL);
    cr_assert_eq(b->items[3].kind, PEAT_JSON_NULL);
    cr_assert_str_eq(b->items[4].str, "x\xc3\xa9\xf0\x9f\x98\x80\n", "UTF-8 of \\u escapes");
    cr_assert_str_eq(peat_nightly_json_str(&v, "s", ""), "q\"\\/");
    cr_assert(isnan(peat_nightly_json_num(&v, "n")), "null reads as NaN");
    cr_assert(isnan(peat_nightly_json_num(&v, "a.missing")));
    peat_nightly_json_free(&v);
    static const char *const bad[] = {"{\"a\" 1}",    "[1,]",      "{\"a\": 01}",
                                      "[1] 2",        "\"\x01\"",  "[0x10]",
                                      "{\"a\": tru}", "[\"\\q\"]", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_neq(peat_nightly_json_parse(bad[i], "t", &v), PEAT_OK, "'%s' was accepted",
                      bad[i]);
        cr_assert(strstr(peat_error_last(), "t:1: bad JSON"), "%s", peat_error_last());
    }
    char deep[200];
    memset(deep, '[', 100);
    deep[100] = 0;
    cr_assert_neq(peat_nightly_json_parse(deep, "t", &v), PEAT_OK, "nesting is limited");
}

/* ---- peat diff ---- */

/* A signature.json with the fields the diff reads. */
static void write_sig(const char *dir, const char *verdict, const char *finding, double bits,
                      double max_norm, double eval_loss, double total_s)
{
    char p[400], text[2000];
    snprintf(p, sizeof p, "%s/%s", tmpdir, dir);
    mkdir(p, 0777);
    snprintf(p, sizeof p, "%s/%s/signature.json", tmpdir, dir);
    snprintf(text, sizeof text,
             "{\"kernel\": \"k\", \"flow\": \"mlp\", \"backend\": \"cpu\", \"seed\": 1, "
             "\"kernel_failures\": 0, \"verdict\": \"%s\", \"findings\": [{\"class\": \"%s\", "
             "\"params\": \"\", \"acceptance\": \"%s\", \"evidence\": [\"why\"]}], "
             "\"candidate\": {\"eff_bits\": %g, \"max_norm\": %g, \"frac_over_bound\": 0, "
             "\"n_nan\": 0, \"n_inf\": 0}, \"training\": {\"eval_loss\": %g, \"eval_accuracy\": "
             "0.9}, \"timing_s\": {\"total\": %g}}",
             verdict, finding, verdict, bits, max_norm, eval_loss, total_s);
    spit(p, text);
}

static int entries_with(const peat_diff *d, const char *text, int regression)
{
    int n = 0;
    for (int i = 0; i < d->n; i++)
        n += d->e[i].regression == regression && strstr(d->e[i].what, text) != NULL;
    return n;
}

Test(nightly, diff_names_each_regression_with_old_and_new_value)
{
    write_sig("old", "PASS", "WITHIN_BOUND", 22.6, 0.2, 0.60, 10);
    write_sig("new", "FAIL", "REDUCED_PRECISION", 10.1, 3.1, 0.66, 45);
    peat_policy pol;
    peat_nightly_policy_default(&pol);
    peat_diff d;
    memset(&d, 0, sizeof d);
    char o[400], n[400];
    snprintf(o, sizeof o, "%s/old", tmpdir);
    snprintf(n, sizeof n, "%s/new", tmpdir);
    cr_assert_eq(peat_nightly_diff_paths(o, n, &pol.th, &d), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(entries_with(&d, "verdict PASS -> FAIL", 1), 1);
    cr_assert_eq(entries_with(&d, "new finding REDUCED_PRECISION", 1), 1);
    cr_assert_eq(entries_with(&d, "effective bits 22.6 -> 10.1", 1), 1);
    cr_assert_eq(entries_with(&d, "max error/bound 0.2 -> 3.1", 1), 1);
    cr_assert_eq(entries_with(&d, "held-out loss 0.6 -> 0.66", 1), 1, "+10%% > the 5%% threshold");
    cr_assert_eq(entries_with(&d, "cost: total time 10.0 s -> 45.0 s", 1), 1);
    cr_assert_eq(d.n_regressions, 6);
    peat_nightly_diff_free(&d);
    /* under the thresholds: 0.6 bits, max/bound within the bound, +4% loss, 2.5x time: quiet */
    write_sig("new", "PASS", "WITHIN_BOUND", 22.0, 0.9, 0.624, 25);
    memset(&d, 0, sizeof d);
    cr_assert_eq(peat_nightly_diff_paths(o, n, &pol.th, &d), PEAT_OK);
    cr_assert_eq(d.n_regressions, 0, "first: %s", d.n ? d.e[0].what : "");
    peat_nightly_diff_free(&d);
    /* a policy file moves the thresholds */
    char p[400];
    snprintf(p, sizeof p, "%s/tight.policy", tmpdir);
    spit(p, "[thresholds]\neff-bits-drop = 0.5\ntime-ratio = 2\n");
    cr_assert_eq(peat_nightly_policy_load(p, &pol), PEAT_OK, "%s", peat_error_last());
    memset(&d, 0, sizeof d);
    cr_assert_eq(peat_nightly_diff_paths(o, n, &pol.th, &d), PEAT_OK);
    cr_assert_eq(entries_with(&d, "effective bits 22.6 -> 22.0", 1), 1);
    cr_assert_eq(entries_with(&d, "cost", 1), 1);
    cr_assert_eq(d.n_regressions, 2);
    peat_nightly_diff_free(&d);
}

#define NIGHTLY_RUN                                                                                \
    "%s run --plugin " PLUGIN " --kernel test_gemm_nightly " SMALL " --quiet --out %s/%s"

Test(nightly, diff_detects_a_planted_regression_and_is_quiet_on_the_same_seed)
{
    cr_assert_eq(sh(NIGHTLY_RUN, PEAT_TEST_BIN, tmpdir, "a"), 0, "%s", err_buf);
    cr_assert_eq(sh(NIGHTLY_RUN, PEAT_TEST_BIN, tmpdir, "b"), 0, "%s", err_buf);
    cr_assert_eq(sh("PEAT_TEST_REGRESS=1 " NIGHTLY_RUN, PEAT_TEST_BIN, tmpdir, "c"), 1,
                 "bf16 operands behind an fp32 declaration fail");
    int rc = sh("%s diff %s/a %s/b", PEAT_TEST_BIN, tmpdir, tmpdir);
    cr_assert_eq(rc, 0, "same seed: exit %d\n%s", rc, out_buf);
    cr_assert_eq(count_of(out_buf, "REGRESSION"), 0, "%s", out_buf);
    cr_assert(strstr(out_buf, "no regressions (1 campaign compared)"), "%s", out_buf);
    rc = sh("%s diff %s/a %s/c", PEAT_TEST_BIN, tmpdir, tmpdir);
    cr_assert_eq(rc, 1, "a regression exits 1, got %d\n%s", rc, out_buf);
    cr_assert(strstr(out_buf, "REGRESSION test_gemm_nightly/mlp/cpu: verdict PASS -> FAIL"), "%s",
              out_buf);
    cr_assert(strstr(out_buf, "new finding REDUCED_PRECISION"), "%s", out_buf);
    const char *eb = strstr(out_buf, "effective bits ");
    cr_assert_not_null(eb, "%s", out_buf);
    double from, to;
    cr_assert_eq(sscanf(eb, "effective bits %lf -> %lf", &from, &to), 2);
    cr_assert(from > 20 && to > 6.5 && to < 8.5, "bits %g -> %g: fp32 to bf16 expected", from, to);
    /* --json: the same entries, machine-readable */
    cr_assert_eq(sh("%s diff %s/a %s/c --json", PEAT_TEST_BIN, tmpdir, tmpdir), 1);
    peat_json j;
    cr_assert_eq(peat_nightly_json_parse(out_buf, "stdout", &j), PEAT_OK, "%s", peat_error_last());
    /* the five of the signature and the runtime stage's DEGRADES: a candidate's weights far
     * off the honest runs' (past the loop rule's limit) degrade its training, and an undeclared
     * bf16 explains nothing (docs/fault-injection.md, "band and verdict rules") */
    cr_assert_eq(peat_nightly_json_num(&j, "regressions"), 6.0, "%s", out_buf);
    cr_assert(strstr(out_buf, "new finding DEGRADES"), "%s", out_buf);
    peat_nightly_json_free(&j);
    /* bad inputs: one line, exit 2 */
    cr_assert_eq(sh("%s diff %s/a %s/nothing", PEAT_TEST_BIN, tmpdir, tmpdir), 2);
    cr_assert_eq(count_lines(err_buf), 1, "%s", err_buf);
    cr_assert_eq(sh("%s diff %s/a", PEAT_TEST_BIN, tmpdir), 2);
    cr_assert_eq(
        sh("%s diff %s/a %s/b --policy %s/none.policy", PEAT_TEST_BIN, tmpdir, tmpdir, tmpdir), 2);
}

/* ---- peat ci ---- */

static int ci_item_count(const peat_json *ci, const char *status)
{
    const peat_json *items = peat_nightly_json_get(ci, "items");
    int n = 0;
    for (int i = 0; items && i < items->n; i++)
        n += !strcmp(peat_nightly_json_str(&items->items[i], "status", ""), status);
    return n;
}

static void load_ci(const char *dir, peat_json *ci)
{
    char p[400];
    snprintf(p, sizeof p, "%s/%s/ci.json", tmpdir, dir);
    cr_assert_eq(peat_nightly_json_load(p, ci), PEAT_OK, "%s", peat_error_last());
}

static int xsd_valid(const char *xml)
{
    return sh("xmllint --noout --schema %s/tests/junit.xsd %s", PEAT_TEST_SOURCE_DIR, xml) == 0;
}

Test(nightly, ci_over_the_example_suite)
{
    int rc = sh("%s ci %s/examples/nightly.suite --out %s/ci", PEAT_TEST_BIN, PEAT_TEST_SOURCE_DIR,
                tmpdir);
    cr_assert_eq(rc, 0, "exit %d\n%s\n%s", rc, out_buf, err_buf);
    cr_assert(strstr(out_buf, "[18/18] adamw_fused mlp cpu: PASS"),
              "not a TTY: a plain line per item\n%s", out_buf);
    peat_json ci;
    load_ci("ci", &ci);
    cr_assert_eq(peat_nightly_json_get(&ci, "items")->n, 18, "a row per kernel x flow x backend");
    cr_assert_eq(ci_item_count(&ci, "PASS"), 18, "allowed findings pass; the rest is clean");
    cr_assert_str_eq(peat_nightly_json_str(&ci, "verdict", ""), "PASS");
    peat_nightly_json_free(&ci);
    char p[400];
    static char text[1 << 17];
    snprintf(p, sizeof p, "%s/ci/report.html", tmpdir);
    slurp(p, text, sizeof text);
    cr_assert_eq(count_of(text, "<tr><td><a href=\"items/"), 18, "report.html: a row per item");
    /* 7 rows show an allowed finding: the suite allows one for the five reduced-precision
     * kernels and the two gelu_tanh kernels (APPROX); a PASS row names what was allowed, not the
     * clean finding beside it */
    cr_assert_eq(count_of(text, "(allowed)"), 7, "7 rows with an allowed finding");
    cr_assert(strstr(text, "APPROX") != NULL, "gelu_tanh's allowed APPROX finding is shown");
    snprintf(p, sizeof p, "%s/ci/summary.md", tmpdir);
    slurp(p, text, sizeof text);
    cr_assert_eq(count_of(text, "\n| `"), 18, "summary.md: a table row per item");
    snprintf(p, sizeof p, "%s/ci/junit.xml", tmpdir);
    cr_assert(xsd_valid(p), "junit.xml fails the XSD: %s", err_buf);
    slurp(p, text, sizeof text);
    cr_assert_eq(count_of(text, "<testcase "), 18);
    cr_assert_eq(count_of(text, "<failure"), 0);
}

Test(nightly, ci_failing_and_broken_items_never_stop_the_others)
{
    char p[400];
    snprintf(p, sizeof p, "%s/mixed.suite", tmpdir);
    spit(p, "[suite]\nname = mixed\nplugin = " PLUGIN "\n"
            "kernels = test_gemm_corrupt, gemm_bf16, test_gemm_hang, gemm_new\n"
            "flows = mlp\niters = 4\ncalls = 4\n"
            "[kernel test_gemm_hang]\nbudget = 3s\n");
    int rc = sh("%s ci %s --out %s/m --json", PEAT_TEST_BIN, p, tmpdir);
    cr_assert_eq(rc, 2, "an item without a verdict (hang past its budget) exits 2, got %d\n%s\n%s",
                 rc, out_buf, err_buf);
    peat_json j;
    cr_assert_eq(peat_nightly_json_parse(out_buf, "stdout", &j), PEAT_OK, "--json: %s", out_buf);
    cr_assert_str_eq(peat_nightly_json_str(&j, "verdict", ""), "ERROR");
    peat_nightly_json_free(&j);
    peat_json ci;
    load_ci("m", &ci);
    const peat_json *items = peat_nightly_json_get(&ci, "items");
    cr_assert_eq(items->n, 4);
    cr_assert_str_eq(peat_nightly_json_str(&items->items[0], "status", ""), "FAIL");
    cr_assert_str_eq(peat_nightly_json_str(&items->items[1], "status", ""), "WARN",
                     "fail-on=fail: an undeclared-by-suite bf16 finding stays a warning");
    cr_assert_str_eq(peat_nightly_json_str(&items->items[2], "status", ""), "ERROR");
    cr_assert(strstr(peat_nightly_json_str(&items->items[2], "error", ""), "budget of 3 s"));
    cr_assert_str_eq(peat_nightly_json_str(&items->items[3], "status", ""), "PASS",
                     "the item after the hang still ran");
    peat_nightly_json_free(&ci);
    snprintf(p, sizeof p, "%s/m/junit.xml", tmpdir);
    cr_assert(xsd_valid(p), "junit.xml fails the XSD: %s", err_buf);
    static char x[1 << 16];
    slurp(p, x, sizeof x);
    cr_assert(strstr(x, "failures=\"1\" errors=\"1\""), "%s", x);
    cr_assert(strstr(x, "<failure type=\"STRUCTURAL\" message=\"STRUCTURAL positions"),
              "the failure message is the finding with its evidence:\n%s", x);
    /* without the hang: a FAIL exits 1; with fail-on = warn and no allowance the WARN fails too */
    snprintf(p, sizeof p, "%s/warn.suite", tmpdir);
    spit(p, "[suite]\nkernels = gemm_bf16, gemm_new\nflows = mlp\niters = 4\ncalls = 4\n"
            "[accept]\nfail-on = warn\n");
    cr_assert_eq(sh("%s ci %s --out %s/w --quiet", PEAT_TEST_BIN, p, tmpdir), 1, "%s", out_buf);
    spit(p, "[suite]\nkernels = gemm_bf16, gemm_new\nflows = mlp\niters = 4\ncalls = 4\n"
            "[accept]\nfail-on = warn\nallow = gemm_bf16 REDUCED_PRECISION bits>=6\n"
            "allow = gemm_bf16 DEGRADES\n");
    cr_assert_eq(sh("%s ci %s --out %s/w2 --quiet", PEAT_TEST_BIN, p, tmpdir), 0, "%s", out_buf);
}

/* peat ci --budget: an item the suite does not fix (iters, calls) runs `peat run --budget` with
 * the time left over the items left; a fixed item runs as set; a share too small for a campaign
 * is that item's ERROR, and the others still run. */
Test(nightly, ci_budget_plans_the_items_it_may)
{
    char p[400];
    snprintf(p, sizeof p, "%s/budget.suite", tmpdir);
    spit(p, "[suite]\nname = budget\nkernels = gemm_new, softmax_online\nflows = auto\n"
            "[kernel softmax_online]\niters = 4\ncalls = 4\n");
    /* the latency table calibrated first, in a cache of the test's own: a cold cache's
     * calibration (~4 s) is part of the first planned item's planning, whatever ran before */
    cr_assert_eq(sh("PEAT_CACHE_DIR=%s/cache %s calibrate-latency", tmpdir, PEAT_TEST_BIN), 0, "%s",
                 err_buf);
    /* the budget from what this build needs (a sanitizer build runs several times slower): the
     * smallest campaign the planner states, 4x over for each of the two items (its planning
     * times kernels until they are quiet, so on a loaded machine it took 3.4x the probe's
     * statement in one CI run) */
    cr_assert_eq(sh("PEAT_CACHE_DIR=%s/cache %s run --kernel gemm_new --flow mlp --budget 0.1s "
                    "--out %s/probe",
                    tmpdir, PEAT_TEST_BIN, tmpdir),
                 2);
    const char *needs = strstr(err_buf, "needs ");
    double min_s = 0;
    cr_assert(needs && sscanf(needs, "needs %lf s", &min_s) == 1 && min_s > 0, "%s", err_buf);
    double budget = 2 * 4 * min_s;
    int rc = sh("PEAT_CACHE_DIR=%s/cache %s ci %s --out %s/b --budget %.2fs", tmpdir, PEAT_TEST_BIN,
                p, tmpdir, budget);
    cr_assert_eq(rc, 0, "rc %d\n%s\n%s", rc, out_buf, err_buf);
    char said[64];
    snprintf(said, sizeof said, "of a %.0f s budget", budget);
    cr_assert(strstr(out_buf, said), "%s", out_buf);
    peat_json ci;
    load_ci("b", &ci);
    cr_assert_float_eq(peat_nightly_json_num(&ci, "budget_s"), budget, 0.01);
    const peat_json *items = peat_nightly_json_get(&ci, "items");
    cr_assert_eq(items->n, 2);
    const peat_json *g = &items->items[0], *s = &items->items[1];
    cr_assert_str_eq(peat_nightly_json_str(g, "kernel", ""), "gemm_new");
    /* the first of two items: the budget, less the moments before it started, over 2 */
    double plan = peat_nightly_json_num(g, "planned_s");
    cr_assert(plan > 0.8 * budget / 2 && plan <= budget / 2 + 0.01, "planned %g s of %g", plan,
              budget);
    cr_assert(strstr(peat_nightly_json_str(g, "command", ""), "--budget "), "%s",
              peat_nightly_json_str(g, "command", ""));
    cr_assert_str_eq(peat_nightly_json_str(g, "status", ""), "PASS");
    cr_assert(isnan(peat_nightly_json_num(s, "planned_s")), "a fixed item is not planned");
    cr_assert_null(strstr(peat_nightly_json_str(s, "command", ""), "--budget"));
    cr_assert(strstr(peat_nightly_json_str(s, "command", ""), "--iters 4"));
    cr_assert_str_eq(peat_nightly_json_str(s, "status", ""), "PASS");
    peat_nightly_json_free(&ci);
    /* too small a share: the planned item reaches no verdict and says why, the fixed one runs */
    rc = sh("PEAT_CACHE_DIR=%s/cache %s ci %s --out %s/s --budget 0.4s --quiet", tmpdir,
            PEAT_TEST_BIN, p, tmpdir);
    cr_assert_eq(rc, 2, "rc %d\n%s\n%s", rc, out_buf, err_buf);
    load_ci("s", &ci);
    items = peat_nightly_json_get(&ci, "items");
    cr_assert_str_eq(peat_nightly_json_str(&items->items[0], "status", ""), "ERROR");
    cr_assert(strstr(peat_nightly_json_str(&items->items[0], "error", ""), "too small"), "%s",
              peat_nightly_json_str(&items->items[0], "error", ""));
    peat_nightly_json_free(&ci);
    /* a bad time is refused before anything runs */
    rc = sh("%s ci %s --out %s/x --budget soon", PEAT_TEST_BIN, p, tmpdir);
    cr_assert_eq(rc, 2);
    cr_assert(strstr(err_buf, "--budget 'soon'"), "%s", err_buf);
    snprintf(p, sizeof p, "%s/x/ci.json", tmpdir);
    cr_assert_neq(access(p, F_OK), 0, "nothing ran");
}

Test(nightly, ci_baseline_names_tonights_regression)
{
    char p[400];
    snprintf(p, sizeof p, "%s/n.suite", tmpdir);
    spit(p, "[suite]\nname = nightly\nplugin = " PLUGIN "\nkernels = test_gemm_nightly, gemm_new\n"
            "flows = mlp\niters = 6\ncalls = 6\n");
    const char *run = "%s%s ci %s --out %s/%s --baseline %s/base %s --quiet";
    cr_assert_eq(sh(run, "", PEAT_TEST_BIN, p, tmpdir, "night1", tmpdir, "--update-baseline"), 0,
                 "first night, empty baseline: %s %s", out_buf, err_buf);
    char b[400];
    snprintf(b, sizeof b, "%s/base/items/gemm_new-mlp-cpu/signature.json", tmpdir);
    cr_assert_eq(access(b, F_OK), 0, "--update-baseline keeps each item's signature.json");
    cr_assert_eq(sh(run, "", PEAT_TEST_BIN, p, tmpdir, "night2", tmpdir, ""), 0,
                 "same code, same seed: no regression\n%s", out_buf);
    peat_json ci;
    load_ci("night2", &ci);
    cr_assert_eq(peat_nightly_json_num(&ci, "baseline.regressions"), 0.0);
    cr_assert(peat_nightly_json_path(&ci, "baseline.compared")->num == 1.0);
    peat_nightly_json_free(&ci);
    cr_assert_eq(sh(run, "PEAT_TEST_REGRESS=1 ", PEAT_TEST_BIN, p, tmpdir, "night3", tmpdir, ""),
                 1);
    load_ci("night3", &ci);
    cr_assert(peat_nightly_json_num(&ci, "baseline.regressions") >= 3.0);
    peat_nightly_json_free(&ci);
    char s[400];
    static char md[1 << 16];
    snprintf(s, sizeof s, "%s/night3/summary.md", tmpdir);
    slurp(s, md, sizeof md);
    cr_assert(strstr(md, "- `test_gemm_nightly/mlp/cpu`: effective bits "),
              "summary.md names the regression:\n%s", md);
    cr_assert_null(strstr(md, "`gemm_new/mlp/cpu`: "), "gemm_new did not regress:\n%s", md);
    /* both nights' results compare with `peat diff` too */
    char n2[300], n3[300];
    snprintf(n2, sizeof n2, "%s/night2", tmpdir);
    snprintf(n3, sizeof n3, "%s/night3", tmpdir);
    cr_assert_eq(sh("%s diff %s %s", PEAT_TEST_BIN, n2, n3), 1);
    cr_assert(strstr(out_buf, "REGRESSION test_gemm_nightly/mlp/cpu: verdict PASS -> FAIL"), "%s",
              out_buf);
    cr_assert_eq(sh("%s diff %s %s/night1", PEAT_TEST_BIN, n2, tmpdir), 0, "%s", out_buf);
}

/* ---- published formats ---- */

/* Validates a JSON file against docs/signature.schema.json with Debian's python3-jsonschema. */
static int schema_valid(const char *json)
{
    return sh("/usr/bin/python3 -c 'import json,sys,jsonschema; "
              "s=json.load(open(sys.argv[1])); jsonschema.Draft202012Validator.check_schema(s); "
              "jsonschema.Draft202012Validator(s).validate(json.load(open(sys.argv[2])))' "
              "%s/docs/signature.schema.json %s",
              PEAT_TEST_SOURCE_DIR, json) == 0;
}

Test(nightly, signature_json_validates_against_the_published_schema)
{
    cr_assert_eq(sh("/usr/bin/python3 -c 'import jsonschema'"), 0,
                 "python3-jsonschema is missing: scripts/install-deps.sh installs it");
    cr_assert_eq(sh("%s run --kernel gemm_new " SMALL " --quiet --out %s/p", PEAT_TEST_BIN, tmpdir),
                 0);
    cr_assert_eq(sh("%s run --plugin " PLUGIN " --kernel test_gemm_corrupt " SMALL
                    " --quiet --out %s/f",
                    PEAT_TEST_BIN, tmpdir),
                 1);
    char p[400], bad[400];
    snprintf(p, sizeof p, "%s/p/signature.json", tmpdir);
    cr_assert(schema_valid(p), "a passing run: %s", err_buf);
    snprintf(p, sizeof p, "%s/f/signature.json", tmpdir);
    cr_assert(schema_valid(p), "a failing run with findings: %s", err_buf);
    /* the schema is not vacuous: an unknown verdict, a missing field, a fraction over 1 fail */
    static const char *const breakages[] = {
        "s/\"verdict\": \"FAIL\"/\"verdict\": \"MAYBE\"/",
        "s/\"eff_bits\":[^,]*,//",
        "s/\"frac_over_bound\":[^,]*,/\"frac_over_bound\":1.5,/",
        "s/\"class\": \"STRUCTURAL\"/\"class\": \"GREMLINS\"/",
        "s/, \"experiment\": \"permutation\"//",
    };
    for (size_t i = 0; i < sizeof breakages / sizeof breakages[0]; i++) {
        snprintf(bad, sizeof bad, "%s/bad%zu.json", tmpdir, i);
        cr_assert_eq(sh("sed '%s' %s > %s", breakages[i], p, bad), 0);
        cr_assert(!schema_valid(bad), "breakage %zu (%s) passed the schema", i, breakages[i]);
    }
}

Test(nightly, junit_xml_validates_against_the_xsd)
{
    cr_assert_eq(sh("xmllint --version"), 0, "xmllint is missing: apt-get install libxml2-utils");
    cr_assert_eq(sh("%s run --kernel gemm_new " SMALL " --quiet --out %s/p", PEAT_TEST_BIN, tmpdir),
                 0);
    cr_assert_eq(sh("%s run --plugin " PLUGIN " --kernel test_gemm_corrupt " SMALL
                    " --quiet --out %s/f",
                    PEAT_TEST_BIN, tmpdir),
                 1);
    char p[400];
    static char x[1 << 15];
    snprintf(p, sizeof p, "%s/p/junit.xml", tmpdir);
    cr_assert(xsd_valid(p), "%s", err_buf);
    slurp(p, x, sizeof x);
    cr_assert(strstr(x, "<testcase classname=\"peat.mlp.cpu\" name=\"gemm_new.gemm\""), "%s", x);
    cr_assert_null(strstr(x, "<failure"), "%s", x);
    snprintf(p, sizeof p, "%s/f/junit.xml", tmpdir);
    cr_assert(xsd_valid(p), "%s", err_buf);
    slurp(p, x, sizeof x);
    cr_assert_eq(count_of(x, "<failure type=\"STRUCTURAL\" message=\"STRUCTURAL positions"), 1,
                 "%s", x);
    cr_assert(strstr(x, "stay at the same output positions"),
              "the message carries the evidence:\n%s", x);
    /* the XSD is not vacuous: a suite without its errors count fails it */
    char bad[400];
    snprintf(bad, sizeof bad, "%s/bad.xml", tmpdir);
    cr_assert_eq(sh("sed 's/ errors=\"0\"//g' %s > %s", p, bad), 0);
    cr_assert(!xsd_valid(bad), "a testsuite without errors= passed the XSD");
}

/* ---- the recorded command line ---- */

Test(nightly, cmdline_join_and_split_round_trip)
{
    char *in[] = {"peat", "run", "--out", "dir with space", "--plugin", "it's.so", "--x=1"};
    char line[512], store[512], *w[16];
    int n;
    cr_assert_eq(peat_cli_cmdline_join(7, in, line, sizeof line), PEAT_OK);
    cr_assert_str_eq(line, "peat run --out 'dir with space' --plugin 'it'\\''s.so' --x=1");
    cr_assert_eq(peat_cli_cmdline_split(line, w, 16, &n, store, sizeof store), PEAT_OK);
    cr_assert_eq(n, 7);
    for (int i = 0; i < 7; i++) cr_assert_str_eq(w[i], in[i]);
    char small[16];
    cr_assert_neq(peat_cli_cmdline_join(7, in, small, sizeof small), PEAT_OK,
                  "too long is refused");
}

/* ---- the terminal ---- */

Test(nightly, progress_bars_on_a_tty_plain_lines_otherwise_quiet_and_json)
{
    cr_assert_eq(sh("command -v script"), 0, "script (util-linux) runs a command on a pty");
    /* on a pseudo-terminal: a redrawn bar with an ETA */
    int rc = sh("script -qfec '%s run --kernel gemm_new " SMALL " --out %s/t' /dev/null",
                PEAT_TEST_BIN, tmpdir);
    cr_assert_eq(rc, 0, "%s", out_buf);
    cr_assert(strstr(out_buf, "\rprofile [") && strstr(out_buf, "ETA"), "no bar:\n%s", out_buf);
    cr_assert(strstr(out_buf, "\rplayback ["), "%s", out_buf);
    cr_assert(strstr(out_buf, "WITHIN_BOUND"), "the verdict table follows:\n%s", out_buf);
    /* in a log: plain lines, no carriage returns or escapes */
    cr_assert_eq(sh("%s run --kernel gemm_new " SMALL " --out %s/p", PEAT_TEST_BIN, tmpdir), 0);
    cr_assert(strstr(out_buf, "profile: 8 steps\n") && strstr(out_buf, "playback: 8/8 done"), "%s",
              out_buf);
    cr_assert_null(strchr(out_buf, '\r'), "%s", out_buf);
    cr_assert_null(strchr(out_buf, '\033'), "%s", out_buf);
    /* --quiet: the table only; --json: one JSON object and nothing else */
    cr_assert_eq(sh("%s run --kernel gemm_new " SMALL " --quiet --out %s/q", PEAT_TEST_BIN, tmpdir),
                 0);
    cr_assert_null(strstr(out_buf, "profile:"), "%s", out_buf);
    cr_assert(strstr(out_buf, "verdict: PASS"), "%s", out_buf);
    cr_assert_eq(sh("%s run --kernel gemm_new " SMALL " --json --out %s/j", PEAT_TEST_BIN, tmpdir),
                 0);
    peat_json j;
    cr_assert_eq(peat_nightly_json_parse(out_buf, "stdout", &j), PEAT_OK,
                 "--json printed more:\n%s", out_buf);
    cr_assert_str_eq(peat_nightly_json_str(&j, "verdict", ""), "PASS");
    cr_assert_str_eq(peat_nightly_json_str(&j, "findings", "x"), "x", "findings is an array");
    /* WITHIN_BOUND and the runtime stage's TRAINING_EQUIVALENT */
    cr_assert_eq(peat_nightly_json_get(&j, "findings")->n, 2);
    peat_nightly_json_free(&j);
}

/* ---- report data gathered in playback ---- */

Test(nightly, plot_data_known_answers)
{
    cr_assert_eq(peat_campaign_plot_err_bin(0.0), 0);
    cr_assert_eq(peat_campaign_plot_err_bin(ldexp(1, -12)), 1);
    cr_assert_eq(peat_campaign_plot_err_bin(0.75), 12, "[2^-1, 2^0)");
    cr_assert_eq(peat_campaign_plot_err_bin(1.0), 13, "[2^0, 2^1): at the bound");
    cr_assert_eq(peat_campaign_plot_err_bin(64.0), PEAT_PLOT_ERR_BINS - 1);
    cr_assert_eq(peat_campaign_plot_err_bin(INFINITY), PEAT_PLOT_ERR_BINS - 1);
    cr_assert_eq(peat_campaign_plot_err_bin(NAN), PEAT_PLOT_ERR_BINS - 1);
    /* a 2 x 3 output, exact 1 everywhere, magnitude 1, depth 4: one element 3 bounds off */
    static peat_plot_data p;
    memset(&p, 0, sizeof p);
    double exact[6] = {1, 1, 1, 1, 1, 1}, mag[6] = {1, 1, 1, 1, 1, 1};
    double bound = peat_analyzer_bound(1.0, 4);
    float test[6] = {1, 1, 1, 1, 1, (float)(1 + 3 * bound)}, gold[6] = {1, 1, 1, 1, 1, 1};
    peat_campaign_plot_add(&p, 0, test, exact, mag, 4, 2, 3, 7);
    peat_campaign_plot_add(&p, 1, gold, exact, mag, 4, 2, 3, 7);
    peat_campaign_plot_call_end(&p, "fc1", "fwd", 2, 3, 0);
    peat_campaign_plot_add(&p, 0, gold, exact, mag, 4, 2, 3, 8);
    peat_campaign_plot_add(&p, 1, gold, exact, mag, 4, 2, 3, 8);
    peat_campaign_plot_call_end(&p, "fc1", "fwd", 2, 3, 5);
    peat_campaign_plot_add(&p, 0, gold, exact, mag, 4, 2, 3, 9);
    peat_campaign_plot_add(&p, 1, gold, exact, mag, 4, 2, 3, 9);
    peat_campaign_plot_call_end(&p, "fc2", "bwd", 2, 3, 2);
    peat_campaign_plot_finish(&p);
    double e = ((double)test[5] - 1) / bound; /* 3, up to fp32 rounding of 1 + 3 bound */
    cr_assert_eq(p.worst_call, 7, "call 7 holds the worst error");
    cr_assert(fabs(p.worst_e - e) < 1e-12, "worst %g, want %g", p.worst_e, e);
    cr_assert_eq(p.grid_rows, 2);
    cr_assert_eq(p.grid_cols, 3);
    cr_assert(fabs(p.grid[1 * 3 + 2] - e) < 1e-5 && p.grid[0] == 0, "the error sits at (1, 2)");
    cr_assert(fabs(p.err_hist[0][peat_campaign_plot_err_bin(e)] - 1.0 / 18) < 1e-15,
              "1 of 18 elements");
    cr_assert_eq(p.err_hist[0][0], 17.0 / 18);
    cr_assert_eq(p.err_hist[1][0], 1.0);
    cr_assert_eq(p.n_coverage, 2, "fc1/fwd and fc2/bwd");
    cr_assert_eq(p.coverage[0].calls, 2);
    cr_assert_eq(p.coverage[0].iter_lo, 0);
    cr_assert_eq(p.coverage[0].iter_hi, 5);
    cr_assert(fabs(p.coverage[0].max_e[0] - e) < 1e-12);
    cr_assert_eq(p.coverage[1].max_e[0], 0.0);
    cr_assert_str_eq(p.coverage[1].phase, "bwd");
}
