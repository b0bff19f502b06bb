/* fails_on_purpose.c: a Criterion suite whose one test fails on purpose. ctest runs it with the
 * arguments every suite runs with (PEAT_CRITERION_ARGS) and passes only when the failing
 * assertion's message is in the output (test_runner_config): a quiet or silenced runner would hide
 * why a real test failed. */
#include <criterion/criterion.h>

static int times(int a, int b)
{
    return a * b - 1; /* the planted bug */
}

Test(runner, failing_assertion_prints_its_message)
{
    int got = times(6, 7);
    cr_assert_eq(got, 42, "runner check: 6 x 7 came out %d, not 42", got);
}
