/* test_scale_mpi.c (label mpi, only in builds with MPI): `mpirun -n 2` and `mpirun -n 3
 * --oversubscribe peat inject` give the trial table, rates and reference signatures of the
 * single-process run with the same seed, and a job whose rank was killed resumes under another
 * rank count to the identical result. */
#include <criterion/criterion.h>

#include "campaign/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "scale_check.h"

static char tmpdir[256];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/peat-test-mpi-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    cr_assert_eq(peat_campaign_builtin_init(), PEAT_OK, "registry init: %s", peat_error_last());
}

static void teardown(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(mpi, .init = setup, .fini = teardown, .timeout = 600);

/* mpirun -n ranks peat inject (the options of fi_opts) on dir; env in front (may be ""). */
static int mpi_inject(const char *env, int ranks, const char *dir)
{
    char cmd[2000];
    snprintf(cmd, sizeof cmd,
             "%s OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 %s --oversubscribe -n "
             "%d %s inject --campaign '%s' --model '%s' --trials 30 --threads 2 --batch 8 "
             "--quiet >'%s/out' 2>'%s/err'",
             env, PEAT_TEST_MPIRUN, ranks, PEAT_TEST_BIN, dir, FI_MODELS, tmpdir, tmpdir);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static void single_run(const char *dir)
{
    peat_fi_opts o;
    fi_opts(&o, dir, NULL);
    o.threads = 1;
    o.signature_trials = 0; /* what the command line uses */
    peat_fi_result r;
    cr_assert_eq(peat_run_fi(&o, &r), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(r.n_trials, 90);
    peat_run_fi_result_free(&r);
}

Test(mpi, ranks_give_the_single_process_trials_and_signatures)
{
    char base[300], single[300], dir[300], err[4096];
    snprintf(base, sizeof base, "%s/base", tmpdir);
    snprintf(single, sizeof single, "%s/single", tmpdir);
    make_campaign(base, 3);
    copy_dir(base, single);
    single_run(single);
    for (int n = 2; n <= 3; n++) {
        snprintf(dir, sizeof dir, "%s/n%d", tmpdir, n);
        copy_dir(base, dir);
        int rc = mpi_inject("", n, dir);
        char p[400];
        snprintf(p, sizeof p, "%s/err", tmpdir);
        FILE *f = fopen(p, "r");
        size_t k = f ? fread(err, 1, sizeof err - 1, f) : 0;
        err[k] = 0;
        if (f) fclose(f);
        cr_assert_eq(rc, 0, "mpirun -n %d peat inject exited %d: %s", n, rc, err);
        assert_same_fi(single, dir);
        snprintf(p, sizeof p, "%s/fi-shard-0-of-%d.h5", dir, n);
        cr_assert(access(p, F_OK) != 0, "the ranks' files are removed once merged");
    }
}

Test(mpi, killed_rank_resumes_under_another_rank_count_to_the_same_result)
{
    char base[300], single[300], dir[300], p[400];
    snprintf(base, sizeof base, "%s/base", tmpdir);
    snprintf(single, sizeof single, "%s/single", tmpdir);
    snprintf(dir, sizeof dir, "%s/killed", tmpdir);
    make_campaign(base, 4);
    copy_dir(base, single);
    copy_dir(base, dir);
    single_run(single);
    /* rank 1 of 3 dies after its first durable batch of 8 trials */
    cr_assert_neq(mpi_inject("PEAT_TEST_KILL_RANK=1:8", 3, dir), 0, "the job failed");
    snprintf(p, sizeof p, "%s/fi-shard-1-of-3.h5", dir);
    cr_assert_eq(access(p, F_OK), 0, "the killed rank's trials are kept in its file");
    cr_assert_eq(mpi_inject("", 2, dir), 0, "the resumed job completes");
    assert_same_fi(single, dir);
    cr_assert(access(p, F_OK) != 0, "the left-over shard files were taken in and removed");
}

Test(mpi, suite_under_ranks_equals_the_single_run)
{
    char cmd[3000];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && printf '[suite]\\nname = ranks\\nkernels = gemm_new, softmax_online, "
             "gelu_tanh\\nflows = auto\\nbackends = cpu\\niters = 2\\ncalls = 4\\nseed = 3\\n' "
             ">s.suite && %s ci s.suite --out single --quiet >/dev/null; "
             "for n in 2 3; do OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 %s "
             "--oversubscribe -n $n %s ci s.suite --out r$n --quiet >/dev/null 2>r$n.err; "
             "done; for d in single r2 r3; do sed -E 's/\"seconds\": [0-9.]+//; "
             "s/\"dir\": \"[^\"]*\"//' $d/ci.json >$d.cmp || exit 3; done; "
             "cmp -s single.cmp r2.cmp || exit 4; cmp -s single.cmp r3.cmp || exit 5",
             tmpdir, PEAT_TEST_BIN, PEAT_TEST_MPIRUN, PEAT_TEST_BIN);
    int rc = system(cmd);
    cr_assert(WIFEXITED(rc), "the suite runs ended");
    cr_assert_eq(WEXITSTATUS(rc), 0,
                 "exit %d: 3 a result missing, 4/5 ci.json of -n 2/-n 3 differs from the single "
                 "run's",
                 WEXITSTATUS(rc));
}
