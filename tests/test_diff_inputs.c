/* test_diff_inputs.c: `peat diff` on malformed or wrong-shaped inputs: every one is an input error
 * (one line, exit 2), never a regression (exit 1, kept for real ones) nor a pass. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"

static void setup(void)
{
    tmpdir_make("diffin");
}

static void teardown(void)
{
    tmpdir_remove();
}

TestSuite(diff_inputs, .init = setup, .fini = teardown, .timeout = 300);

static char good[1 << 16];

/* A real campaign in tmpdir/p and its signature.json text in good. */
static void real_campaign(void)
{
    cr_assert_eq(peat("run --kernel gemm_new --iters 12 --calls 6 --quiet --out %s/p", tmpdir), 0,
                 "%s", err_buf);
    char p[400];
    snprintf(p, sizeof p, "%s/p/signature.json", tmpdir);
    slurp(p, good, sizeof good);
    cr_assert(strlen(good) > 100);
}

static void put(const char *name, const char *text, size_t n)
{
    char p[400];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(text, 1, n, f), n);
    fclose(f);
}

static void put_str(const char *name, const char *text)
{
    put(name, text, strlen(text));
}

/* good with the first `from` replaced by `to`, as name. */
static void put_edit(const char *name, const char *from, const char *to)
{
    static char t[1 << 17];
    const char *at = strstr(good, from);
    cr_assert(at, "'%s' is not in signature.json", from);
    snprintf(t, sizeof t, "%.*s%s%s", (int)(at - good), good, to, at + strlen(from));
    put_str(name, t);
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* `peat diff` with name as OLD and as NEW against the real campaign: exit 2, one line naming
 * the file, nothing on stdout. */
static void refused(const char *name)
{
    for (int order = 0; order < 2; order++) {
        int rc = order ? peat("diff %s/%s %s/p", tmpdir, name, tmpdir)
                       : peat("diff %s/p %s/%s", tmpdir, tmpdir, name);
        cr_assert_eq(rc, 2, "%s as %s: exit %d, want 2 (stdout: %.200s; stderr: %.200s)", name,
                     order ? "OLD" : "NEW", rc, out_buf, err_buf);
        cr_assert_eq(lines(err_buf), 1, "%s: not one line: %s", name, err_buf);
        cr_assert(strstr(err_buf, name), "%s: the line does not name the file: %s", name, err_buf);
        cr_assert_eq(out_buf[0], 0, "%s: stdout not empty: %s", name, out_buf);
    }
}

Test(diff_inputs, a_real_regression_exits_1_and_an_equal_campaign_0)
{
    real_campaign();
    cr_assert_eq(peat("diff %s/p %s/p", tmpdir, tmpdir), 0, "%s%s", out_buf, err_buf);
    put_edit("fail.json", "\"verdict\": \"PASS\"", "\"verdict\": \"FAIL\"");
    cr_assert_eq(peat("diff %s/p %s/fail.json", tmpdir, tmpdir), 1, "%s%s", out_buf, err_buf);
    cr_assert(strstr(out_buf, "REGRESSION"), "%s", out_buf);
}

Test(diff_inputs, text_that_is_not_json_is_an_input_error)
{
    real_campaign();
    put("truncated.json", good, strlen(good) / 2);
    refused("truncated.json");
    put("truncated_early.json", good, 1);
    refused("truncated_early.json");
    put_str("empty.json", "");
    refused("empty.json");
    put_str("blank.json", " \n\t\n");
    refused("blank.json");
    static const unsigned char bin[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0xff, 0xfe, 0x80};
    put("binary.json", (const char *)bin, sizeof bin);
    refused("binary.json");
    put("binary_after.json", good, strlen(good) + 1); /* the whole text, then a NUL byte */
    refused("binary_after.json");
    put_edit("nan.json", "\"seed\": 1", "\"seed\": NaN");
    refused("nan.json");
    put_edit("inf.json", "\"seed\": 1", "\"seed\": Infinity");
    refused("inf.json");
    put_edit("huge.json", "\"seed\": 1", "\"seed\": 1e999");
    refused("huge.json");
    put_edit("huge_neg.json", "\"seed\": 1", "\"seed\": -1e400");
    refused("huge_neg.json");
    static char deep[40000];
    memset(deep, '[', 20000);
    memset(deep + 20000, ']', 19999);
    put("deep.json", deep, 39999);
    refused("deep.json");
    put_str("two_docs.json", "{\"verdict\": \"PASS\"} {\"verdict\": \"PASS\"}");
    refused("two_docs.json");
}

Test(diff_inputs, json_of_the_wrong_shape_is_an_input_error)
{
    real_campaign();
    put_str("array.json", "[1, 2, 3]");
    refused("array.json");
    put_str("number.json", "42");
    refused("number.json");
    put_str("string.json", "\"PASS\"");
    refused("string.json");
    put_str("null.json", "null");
    refused("null.json");
    put_str("object_empty.json", "{}");
    refused("object_empty.json");
    put_str("verdict_only.json", "{\"verdict\": \"PASS\"}");
    refused("verdict_only.json");
    /* [the signature] as an array of it */
    static char arr[1 << 17];
    snprintf(arr, sizeof arr, "[%s]", good);
    put_str("wrapped.json", arr);
    refused("wrapped.json");
}

Test(diff_inputs, fields_missing_or_of_the_wrong_type_are_an_input_error)
{
    real_campaign();
    put_edit("verdict_number.json", "\"verdict\": \"PASS\"", "\"verdict\": 5");
    refused("verdict_number.json");
    put_edit("verdict_unknown.json", "\"verdict\": \"PASS\"", "\"verdict\": \"MAYBE\"");
    refused("verdict_unknown.json");
    put_edit("verdict_missing.json", "\"verdict\": \"PASS\"", "\"verdikt\": \"PASS\"");
    refused("verdict_missing.json");
    put_edit("seed_string.json", "\"seed\": 1", "\"seed\": \"1\"");
    refused("seed_string.json");
    put_edit("kernel_number.json", "\"kernel\": \"gemm_new\"", "\"kernel\": 7");
    refused("kernel_number.json");
    put_edit("candidate_string.json", "\"candidate\": {", "\"candidate\": \"x\", \"c2\": {");
    refused("candidate_string.json");
    put_edit("candidate_missing.json", "\"candidate\": {", "\"kandidate\": {");
    refused("candidate_missing.json");
    put_edit("eff_bits_string.json", "\"eff_bits\":", "\"eff_bits\": \"22\", \"x\":");
    refused("eff_bits_string.json");
    put_edit("eff_bits_missing.json", "\"eff_bits\":", "\"eff_bitz\":");
    refused("eff_bits_missing.json");
    put_edit("findings_object.json", "\"findings\": [", "\"findings\": {}, \"f2\": [");
    refused("findings_object.json");
    put_edit("finding_number.json", "\"findings\": [", "\"findings\": [5, ");
    refused("finding_number.json");
    put_edit("acceptance_unknown.json", "\"acceptance\": \"PASS\"", "\"acceptance\": \"OK\"");
    refused("acceptance_unknown.json");
    put_edit("evidence_numbers.json", "\"evidence\": [", "\"evidence\": [1, ");
    refused("evidence_numbers.json");
    put_edit("training_array.json", "\"training\": {", "\"training\": [], \"t2\": {");
    refused("training_array.json");
    put_edit("timing_missing.json", "\"timing_s\": {", "\"timing\": {");
    refused("timing_missing.json");
}

/* A suite result in tmpdir/name/ci.json with the items text given. */
static void put_suite(const char *name, const char *items)
{
    char p[400], t[2000];
    snprintf(p, sizeof p, "mkdir -p %s/%s", tmpdir, name);
    cr_assert_eq(system(p), 0);
    snprintf(p, sizeof p, "%s/ci.json", name);
    snprintf(t, sizeof t, "{\"suite\": \"s\", \"verdict\": \"PASS\", \"items\": %s}", items);
    put_str(p, t);
}

Test(diff_inputs, suite_results_of_the_wrong_shape_are_an_input_error)
{
    real_campaign();
    /* a valid suite of one item whose campaign is tmpdir/p */
    put_suite("s_ok", "[{\"kernel\": \"gemm_new\", \"flow\": \"mlp\", \"backend\": \"cpu\", "
                      "\"status\": \"PASS\", \"dir\": \"../p\"}]");
    cr_assert_eq(peat("diff %s/s_ok %s/s_ok", tmpdir, tmpdir), 0, "%s%s", out_buf, err_buf);
    /* a signature.json where a suite result is expected, and the other way round */
    cr_assert_eq(peat("diff %s/s_ok %s/p", tmpdir, tmpdir), 2, "%s", out_buf);
    cr_assert_eq(lines(err_buf), 1, "%s", err_buf);
    cr_assert_eq(peat("diff %s/p/signature.json %s/s_ok/ci.json", tmpdir, tmpdir), 2, "%s",
                 out_buf);
    cr_assert_eq(lines(err_buf), 1, "%s", err_buf);
    static const char *const bad[][2] = {
        {"s_items_object", "{}"},
        {"s_item_number", "[5]"},
        {"s_status_missing", "[{\"kernel\": \"gemm_new\", \"flow\": \"mlp\", \"backend\": \"cpu\", "
                             "\"dir\": \"../p\"}]"},
        {"s_status_unknown", "[{\"kernel\": \"gemm_new\", \"flow\": \"mlp\", \"backend\": \"cpu\", "
                             "\"status\": \"GREAT\", \"dir\": \"../p\"}]"},
        {"s_kernel_number", "[{\"kernel\": 1, \"flow\": \"mlp\", \"backend\": \"cpu\", "
                            "\"status\": \"PASS\", \"dir\": \"../p\"}]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        put_suite(bad[i][0], bad[i][1]);
        char name[64];
        snprintf(name, sizeof name, "%s/ci.json", bad[i][0]);
        for (int order = 0; order < 2; order++) {
            int rc = order ? peat("diff %s/%s %s/s_ok", tmpdir, bad[i][0], tmpdir)
                           : peat("diff %s/s_ok %s/%s", tmpdir, tmpdir, bad[i][0]);
            cr_assert_eq(rc, 2, "%s: exit %d, want 2 (%s%s)", bad[i][0], rc, out_buf, err_buf);
            cr_assert_eq(lines(err_buf), 1, "%s: %s", bad[i][0], err_buf);
            cr_assert(strstr(err_buf, name), "%s: the line does not name it: %s", bad[i][0],
                      err_buf);
        }
    }
    /* an item whose campaign's signature.json is malformed */
    put_edit("q_sig.json", "\"verdict\": \"PASS\"", "\"verdict\": 3");
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/q && cp %s/q_sig.json %s/q/signature.json", tmpdir,
             tmpdir, tmpdir);
    cr_assert_eq(system(cmd), 0);
    put_suite("s_badsig", "[{\"kernel\": \"gemm_new\", \"flow\": \"mlp\", \"backend\": \"cpu\", "
                          "\"status\": \"PASS\", \"dir\": \"../q\"}]");
    cr_assert_eq(peat("diff %s/s_ok %s/s_badsig", tmpdir, tmpdir), 2, "%s%s", out_buf, err_buf);
    cr_assert(lines(err_buf) == 1 && strstr(err_buf, "q/signature.json"), "%s", err_buf);
}
