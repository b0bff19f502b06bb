/* test_sequence.c: the sequence stage (harness/campaign/stage_sequence.c): kernels whose outputs
 * depend on their call history read STATEFUL and FAIL, each caught by the sequence built for its
 * mechanism (named in the evidence); kernels whose state changes nothing they compute, and the
 * built-in candidates, pass as before. The kernels are the zoo's (tests/zoo/zoo_state.c). */
#include "cli_run.h"

static void setup(void)
{
    tmpdir_make("sequence");
}

static void teardown(void)
{
    tmpdir_remove();
}

TestSuite(sequence, .init = setup, .fini = teardown, .timeout = 600);

/* `peat run` of a zoo kernel on mlp (runtime FI left out: the sequences are what is tested). */
static int run_zoo(const char *kernel, const char *extra)
{
    return sh("%s run --plugin %s --kernel %s --flow mlp --no-runtime --no-probes --out %s/%s "
              "--force %s",
              PEAT_TEST_BIN, PEAT_TEST_ZOO, kernel, tmpdir, kernel, extra);
}

/* The kernel FAILs with STATEFUL first, its evidence naming the sequence that caught it. */
static void stateful_by(const char *kernel, const char *sequence)
{
    int rc = run_zoo(kernel, "");
    cr_assert_eq(rc, 1, "%s: exit %d, not FAIL: %s%s", kernel, rc, out_buf, err_buf);
    const char *f = strstr(out_buf, "STATEFUL");
    cr_assert(f, "%s: no STATEFUL finding: %s", kernel, out_buf);
    cr_assert(strstr(out_buf, "verdict: FAIL"), "%s", out_buf);
    char want[96];
    snprintf(want, sizeof want, "first: %s, call", sequence);
    cr_assert(strstr(f, want), "%s: caught, but not by the %s sequence: %s", kernel, sequence, f);
}

Test(sequence, a_cache_keyed_by_pointers_is_caught_in_training_order)
{
    stateful_by("zoo_state_ptr_cache", "training-order");
}

Test(sequence, one_layers_data_reused_for_another_is_caught_in_training_order)
{
    stateful_by("zoo_state_layer_leak", "training-order");
}

Test(sequence, a_warm_up_keyed_by_pointer_is_caught_on_the_same_buffers)
{
    stateful_by("zoo_state_warmup_by_ptr", "same-buffers");
}

Test(sequence, buffers_captured_once_are_caught_with_new_buffers)
{
    stateful_by("zoo_state_captured_ptrs", "new-buffers");
}

Test(sequence, accumulating_into_or_reading_the_output_is_caught_with_prefilled_outputs)
{
    stateful_by("zoo_state_accumulate", "prefilled-outputs");
    stateful_by("zoo_state_stale_output", "prefilled-outputs");
}

Test(sequence, a_cache_keyed_by_a_cheap_hash_is_caught_when_a_few_elements_change)
{
    stateful_by("zoo_state_hash_cache", "few-elements-changed");
}

Test(sequence, a_switch_after_200_calls_is_caught_in_the_long_run)
{
    stateful_by("zoo_state_switch_after_n", "long");
}

/* Another order on each call stays inside the bound: NONDETERMINISTIC, not STATEFUL. */
Test(sequence, another_order_on_each_call_reads_nondeterministic)
{
    int rc = run_zoo("zoo_state_nondet_repeat", "");
    cr_assert(strstr(out_buf, "NONDETERMINISTIC"), "exit %d: %s%s", rc, out_buf, err_buf);
    cr_assert(strstr(out_buf, "STATEFUL") == NULL, "%s", out_buf);
}

Test(sequence, honest_state_passes)
{
    const char *honest[] = {"zoo_state_honest_workspace", "zoo_state_honest_plan_cache",
                            "zoo_state_honest_lazy_table", "zoo_state_honest_thread_scratch"};
    for (size_t i = 0; i < sizeof honest / sizeof honest[0]; i++) {
        int rc = run_zoo(honest[i], "");
        cr_assert_eq(rc, 0, "%s: exit %d: %s%s", honest[i], rc, out_buf, err_buf);
        cr_assert(strstr(out_buf, "verdict: PASS"), "%s: %s", honest[i], out_buf);
        cr_assert(strstr(out_buf, "sequences (calls, the kernel's state kept): training-order"),
                  "%s: no sequences line: %s", honest[i], out_buf);
        cr_assert(strstr(out_buf, ", 0 stateful"), "%s: %s", honest[i], out_buf);
    }
}

/* The coverage line lists every sequence, the long one 1000 calls; --no-sequences leaves them
 * out. */
Test(sequence, the_coverage_line_lists_every_sequence)
{
    cr_assert_eq(sh("%s run --kernel gemm_new --no-runtime --out %s/g", PEAT_TEST_BIN, tmpdir), 0,
                 "%s", err_buf);
    const char *kinds[] = {
        "training-order ",    "same-buffers ", "new-buffers ",          "repeats ",
        "prefilled-outputs ", "shuffled ",     "few-elements-changed ", "long 1000;"};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        cr_assert(strstr(out_buf, kinds[i]), "no %s sequence: %s", kinds[i], out_buf);
    cr_assert(strstr(out_buf, "verdict: PASS"), "%s", out_buf);
    cr_assert_eq(sh("%s run --kernel gemm_new --no-runtime --no-sequences --out %s/n",
                    PEAT_TEST_BIN, tmpdir),
                 0, "%s", err_buf);
    cr_assert(strstr(out_buf, "sequences (") == NULL, "--no-sequences ran them: %s", out_buf);
}
