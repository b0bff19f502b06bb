/* test_scale_run.c: `peat run --shard I/N` and `peat merge` of its shards (docs/scale-out.md):
 * 2 and 3 shards, run in any order, merge into the single-process run's runtime curves, weight
 * distances, verdicts, checkpoints and findings (seed 5); shard 0 alone leaves the campaign
 * pending; a missing shard is named with its runs and nothing is written until it is run; a
 * shard of another seed or count is refused; what --shard cannot split is refused in one line. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run_check.h"
#include "scale_check.h"

static char tmpdir[256];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/peat-test-run-shard-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(run_shard, .init = setup, .fini = teardown, .timeout = 600);

/* A band of 4 and three frequencies: 6 runs beside the golden one (#1..#6), so each of 3 shards
 * trains two of them; the default checkpoints ("last") of the faulty runs travel in the files. */
#define RUN_ARGS                                                                                   \
    "run --kernel gemm_new --flow mlp --iters 12 --calls 16 --no-probes --runtime-band 4 "         \
    "--runtime-freq 1,1/3,p=0.5 --quiet"
#define N_FREQS 3

/* A command in tmpdir, its stderr into tmpdir/err: its exit status. */
static int sh(const char *fmt, const char *a, const char *b)
{
    char cmd[2000], line[1600];
    snprintf(line, sizeof line, fmt, a, b);
    snprintf(cmd, sizeof cmd, "cd '%s' && %s >>out 2>err", tmpdir, line);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static int peat_run(int seed, const char *shard, const char *dir)
{
    char opts[200];
    snprintf(opts, sizeof opts, "--seed %d%s%s --out %s", seed, shard ? " --shard " : "",
             shard ? shard : "", dir);
    return sh("%s " RUN_ARGS " %s", PEAT_TEST_BIN, opts);
}

static int peat_merge(const char *dir)
{
    return sh("%s merge %s", PEAT_TEST_BIN, dir);
}

static const char *err_text(void)
{
    static char err[4096];
    char p[400];
    snprintf(p, sizeof p, "%s/err", tmpdir);
    text_read(p, err, sizeof err);
    return err;
}

static int exists(const char *dir, const char *name)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s/%s", tmpdir, dir, name);
    return access(p, F_OK) == 0;
}

/* The single-process run with seed 5 in tmpdir/single: its exit status (0 pass, 1 fail). */
static int single_run(void)
{
    int rc = peat_run(5, NULL, "single");
    cr_assert(rc == 0 || rc == 1, "the single run exited %d: %s", rc, err_text());
    return rc;
}

static void assert_same_as_single(const char *dir)
{
    char a[400], b[400];
    snprintf(a, sizeof a, "%s/single/campaign.h5", tmpdir);
    snprintf(b, sizeof b, "%s/%s/campaign.h5", tmpdir, dir);
    assert_same_datasets(a, b, dir);
    assert_same_judgement(a, b, dir, N_FREQS);
}

Test(run_shard, shards_merged_equal_the_single_process_run_for_2_and_3)
{
    int rc1 = single_run();
    for (int n = 2; n <= 3; n++) {
        char dir[16], spec[32];
        snprintf(dir, sizeof dir, "s%d", n);
        /* the shards are independent: the last first, shard 0 last */
        for (int i = n - 1; i >= 0; i--) {
            snprintf(spec, sizeof spec, "%d/%d", i, n);
            cr_assert_eq(peat_run(5, spec, dir), 0, "shard %s: %s", spec, err_text());
        }
        cr_assert(exists(dir, "campaign.h5.partial") && !exists(dir, "campaign.h5") &&
                      !exists(dir, "report.html"),
                  "shard 0 leaves its campaign pending, without reports");
        cr_assert_eq(peat_merge(dir), rc1, "peat merge exits as the single run: %s", err_text());
        cr_assert(exists(dir, "campaign.h5") && exists(dir, "report.html") &&
                      !exists(dir, "campaign.h5.partial"),
                  "the merge completes the campaign and its reports");
        snprintf(spec, sizeof spec, "run-shard-0-of-%d.bin", n);
        cr_assert(!exists(dir, spec), "the shard files were taken in and removed");
        assert_same_as_single(dir);
    }
}

Test(run_shard, missing_shard_is_named_with_its_runs_and_its_run_completes_the_merge)
{
    single_run();
    cr_assert_eq(peat_run(5, "0/3", "m"), 0, "%s", err_text());
    cr_assert_eq(peat_run(5, "2/3", "m"), 0, "%s", err_text());
    cr_assert_eq(peat_merge("m"), 2, "a merge without shard 1 fails");
    const char *err = err_text();
    /* shard 1 of 3 trains #1 (the first band rerun) and #4 (the first frequency) */
    char runs[300];
    snprintf(runs, sizeof runs, "shard 1/3 missing (its runtime runs: %s, gemm_new @ 1)",
             peat_runtime_band_spec(1));
    cr_assert(strstr(err, runs) && strstr(err, "--shard 1/3") &&
                  strchr(err, '\n') == strrchr(err, '\n'),
              "one line naming shard 1 and its runs (%s): %s", runs, err);
    cr_assert(!exists("m", "campaign.h5") && exists("m", "campaign.h5.partial") &&
                  exists("m", "run-shard-0-of-3.bin") && exists("m", "run-shard-2-of-3.bin"),
              "nothing was written or removed");
    cr_assert_eq(peat_run(5, "1/3", "m"), 0, "%s", err_text());
    cr_assert(peat_merge("m") <= 1, "the merge completes: %s", err_text());
    assert_same_as_single("m");
}

Test(run_shard, shards_of_another_seed_or_count_are_refused)
{
    cr_assert_eq(peat_run(5, "0/2", "a"), 0, "%s", err_text());
    cr_assert_eq(peat_run(6, "1/2", "b"), 0, "%s", err_text());
    cr_assert_eq(sh("cp %s/run-shard-1-of-2.bin %s/", "b", "a"), 0);
    cr_assert_eq(peat_merge("a"), 2, "a shard of seed 6 is refused");
    cr_assert(strstr(err_text(), "run-shard-1-of-2.bin is not a shard of this campaign: seed 6, "
                                 "not 5"),
              "the seed is named: %s", err_text());
    cr_assert(!exists("a", "campaign.h5") && exists("a", "campaign.h5.partial"),
              "nothing was written");
    cr_assert_eq(peat_run(5, "1/3", "c"), 0, "%s", err_text());
    cr_assert_eq(sh("cp %s/run-shard-1-of-3.bin %s/ && rm a/run-shard-1-of-2.bin", "c", "a"), 0);
    cr_assert_eq(peat_merge("a"), 2, "a shard of another count is refused");
    cr_assert(strstr(err_text(), "a shard of 3, not 2"), "the count is named: %s", err_text());
    cr_assert(!exists("a", "campaign.h5"), "nothing was written");
}

/* A shard trained with another golden GEMM (PEAT_BLAS=0: the plain loop, the forward order, which
 * goes to the end of its band) trains another order as band rerun 1: the merge refuses it, naming
 * both, rather than judge that run under this machine's name. Where the plain golden's band is
 * this machine's (OpenBLAS's generic kernel adds in the forward order too) there is nothing to
 * tell apart: skipped, and said. */
Test(run_shard, shard_that_trained_another_band_order_is_refused)
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK, "%s", peat_error_last());
    const char *plain[PEAT_RUNTIME_MAX_BAND - 1];
    peat_runtime_band_order(peat_registry_find_on("gemm_plain", "cpu"), plain);
    if (!strcmp(plain[0], peat_runtime_band_spec(1)))
        cr_skip_test("the plain golden's band is this machine's (%s first)", plain[0]);
    cr_assert_eq(peat_run(5, "0/3", "m"), 0, "%s", err_text());
    cr_assert_eq(peat_run(5, "2/3", "m"), 0, "%s", err_text());
    cr_assert_eq(
        sh("PEAT_BLAS=0 %s " RUN_ARGS " --seed 5 --shard 1/3 --out %s", PEAT_TEST_BIN, "m"), 0,
        "%s", err_text());
    cr_assert_eq(peat_merge("m"), 2, "the merge refuses shard 1");
    char want[400];
    snprintf(want, sizeof want, "trained runtime run 1 as %s, here it is %s", plain[0],
             peat_runtime_band_spec(1));
    cr_assert(strstr(err_text(), want), "%s: %s", want, err_text());
    cr_assert(!exists("m", "campaign.h5") && exists("m", "campaign.h5.partial"),
              "nothing was written");
}

Test(run_shard, what_a_shard_cannot_split_is_refused_in_one_line)
{
    static const char *const cases[][2] = {
        {"0/2 --no-runtime", "not with --no-runtime"},
        {"0/1", "N >= 2"},
        {"0/2 --budget 30s", "not with --budget"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cr_assert_eq(peat_run(5, cases[k][0], "r"), 2, "--shard %s is refused", cases[k][0]);
        const char *err = err_text();
        cr_assert(strstr(err, cases[k][1]) && strchr(err, '\n') == strrchr(err, '\n'),
                  "--shard %s: one line saying '%s': %s", cases[k][0], cases[k][1], err);
        cr_assert(!exists("r", ""), "nothing was run");
    }
}
