/* test_robust_inputs.c: a kernel that makes its read-only inputs writable (mprotect) and changes
 * them is still INPUT_MUTATION: the inputs are compared after every call, whatever happened to
 * their pages (tests/plugins/plugin_unprotect.c). */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "cli_run.h"

#define UNPROTECT PEAT_TEST_PLUGIN_DIR "/libplugin_unprotect.so"

static void setup(void)
{
    tmpdir_make("inputs");
}

static void teardown(void)
{
    tmpdir_remove();
}

TestSuite(robust_inputs, .init = setup, .fini = teardown, .timeout = 300);

Test(robust_inputs, input_made_writable_and_changed_is_input_mutation)
{
    /* the persistent worker, a fork per call, and in-process (--no-isolate) playback */
    static const struct {
        const char *env, *opt;
    } modes[] = {{"", ""}, {"PEAT_ISOLATE=fork", ""}, {"", "--no-isolate"}};
    for (int m = 0; m < 3; m++) {
        int rc = sh("%s %s run --kernel test_gemm_unprotect_mutate --plugin %s %s --iters 12 "
                    "--calls 6 --out %s/u%d",
                    modes[m].env, PEAT_TEST_BIN, UNPROTECT, modes[m].opt, tmpdir, m);
        cr_assert_eq(rc, 1, "mode %d: rc %d\n%s%s", m, rc, out_buf, err_buf);
        cr_assert_not_null(strstr(out_buf, "INPUT_MUTATION calls=6"), "mode %d:\n%s", m, out_buf);
        cr_assert_not_null(strstr(out_buf, "wrote into input 1 at element 2"), "mode %d:\n%s", m,
                           out_buf);
        cr_assert_not_null(strstr(out_buf, "verdict: FAIL"), "mode %d:\n%s", m, out_buf);
    }
}
