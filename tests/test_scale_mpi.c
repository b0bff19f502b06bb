/* test_scale_mpi.c (label mpi, only in builds with MPI): `mpirun -n 2` and `mpirun -n 3
 * --oversubscribe peat inject` give the trial table, rates and reference signatures of the
 * single-process run with the same seed, and a job whose rank was killed resumes under another
 * rank count to the identical result; `mpirun -n N peat run` gives the single process's runtime
 * curves, checkpoints, verdicts and findings and (its playback and probes split across the ranks
 * too) its signatures, probes, counts of misbehaving calls and signature.json, also for kernels
 * that write out of bounds or hang; a rank that fails is named with its runs, recorded calls or
 * probes, a run without a runtime stage lets the waiting ranks go, and --budget is refused under
 * mpirun. */
#include <criterion/criterion.h>

#include "harness/runtime/builtin.h"
#include "harness/campaign/result_store.h"
#include "harness/runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "run_check.h"
#include "scale_check.h"

static char tmpdir[256];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/peat-test-mpi-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK, "registry init: %s", peat_error_last());
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
    cr_assert_eq(peat_fi_run(&o, &r), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(r.n_trials, 90);
    peat_fi_result_free(&r);
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
        text_read(p, err, sizeof err);
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
    cr_assert_neq(mpi_inject("PEAT_TEST_HOOKS=kill-rank=1:8", 3, dir), 0, "the job failed");
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

Test(mpi, killed_suite_resumes_under_another_rank_count_running_only_the_unfinished_item)
{
    char cmd[4000];
    /* the plan: #0 gemm_new, #1 softmax_online, #2 gelu_tanh; under -n 3 rank i runs #i. The
     * job is killed while rank 1 runs its item and before rank 2 wrote its ci.json; rank 0's
     * merge never ran. Then -n 2 --resume, against a baseline; then a better baseline. */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 && "
             "printf '[suite]\\nname = ranks\\nkernels = gemm_new, softmax_online, "
             "gelu_tanh\\nflows = auto\\nbackends = cpu\\niters = 2\\ncalls = 4\\nseed = 3\\n' "
             ">s.suite && %s ci s.suite --out single --baseline B --update-baseline --quiet "
             ">/dev/null; %s --oversubscribe -n 3 %s ci s.suite --out r --quiet >/dev/null "
             "2>&1 || exit 3; rm r/ci.json r/shard-1-of-3/ci.json r/shard-2-of-3/ci.json; "
             "d=$(echo r/shard-1-of-3/items/softmax_online-*-cpu); mv $d/campaign.h5 "
             "$d/campaign.h5.partial; g=$(echo r/shard-0-of-3/items/gemm_new-*-cpu); "
             "ino=$(stat -c %%i $g/signature.json); %s --oversubscribe -n 2 %s ci s.suite --out r "
             "--resume >resume.out 2>resume.err || exit 4; grep -q 'resumed: 2 of the 3 items' "
             "resume.out || exit 5; [ \"$(stat -c %%i r/shard-0-of-2/items/${g##*/}/"
             "signature.json)\" = \"$ino\" ] || exit 6; for x in single r; do sed -E "
             "'s/\"seconds\": [0-9.]+//; s/\"dir\": \"[^\"]*\"//' $x/ci.json >$x.cmp || exit 7; "
             "done; cmp -s single.cmp r.cmp || exit 8; %s --oversubscribe -n 2 %s ci s.suite "
             "--out r --resume --baseline B --quiet >/dev/null 2>&1 || exit 9; sed -i -E "
             "'/\"candidate\"/ s/\"eff_bits\":[-0-9.e+]+/\"eff_bits\":99/' "
             "B/items/${g##*/}/signature.json; %s --oversubscribe -n 2 %s ci s.suite --out r "
             "--resume --baseline B --quiet >/dev/null 2>&1; [ $? = 1 ] || exit 10",
             tmpdir, PEAT_TEST_BIN, PEAT_TEST_MPIRUN, PEAT_TEST_BIN, PEAT_TEST_MPIRUN,
             PEAT_TEST_BIN, PEAT_TEST_MPIRUN, PEAT_TEST_BIN, PEAT_TEST_MPIRUN, PEAT_TEST_BIN);
    int rc = system(cmd);
    cr_assert(WIFEXITED(rc), "the suite runs ended");
    cr_assert_eq(WEXITSTATUS(rc), 0,
                 "exit %d: 3 the first job failed, 4 the resumed job failed, 5 it did not take "
                 "2 of 3 items, 6 gemm_new ran again, 7 a result missing, 8 ci.json differs from "
                 "the single run's, 9 the baseline run failed, 10 a regression against the "
                 "baseline did not fail the job",
                 WEXITSTATUS(rc));
}

/* ---- mpirun -n N peat run: the runtime FI runs split across the ranks ---- */

/* band of 4 and two frequencies: 5 runs beside the golden one, so 3 ranks each train some; the
 * candidate (bf16 inputs) drifts from the golden weights from the first iteration; 16 recorded
 * calls (the first 8 run twice: determinism) and the probes split across the ranks too */
#define RUN_ARGS                                                                                   \
    "run --kernel gemm_bf16 --flow mlp --iters 12 --calls 16 --seed 5 "                            \
    "--runtime-freq 1,1/3 --runtime-band 4 --quiet"

/* peat run ARGS --out tmpdir/name, under mpirun with ranks > 0 (env in front, may be ""). */
static int peat_run_args(const char *env, int ranks, const char *args, const char *name)
{
    char cmd[2000], launcher[600] = "";
    if (ranks > 0)
        snprintf(launcher, sizeof launcher,
                 "%s OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 %s --oversubscribe "
                 "-n %d",
                 env, PEAT_TEST_MPIRUN, ranks);
    snprintf(cmd, sizeof cmd, "%s %s %s --out '%s/%s' >'%s/%s.out' 2>'%s/%s.err'", launcher,
             PEAT_TEST_BIN, args, tmpdir, name, tmpdir, name, tmpdir, name);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static int peat_run(const char *env, int ranks, const char *name)
{
    return peat_run_args(env, ranks, RUN_ARGS, name);
}

static void read_text(const char *name, char *buf, size_t n)
{
    char p[400];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    text_read(p, buf, n);
}

Test(mpi, run_under_ranks_equals_the_single_process_run)
{
    char single[400], dir[400], name[16], err[4096];
    int rc1 = peat_run("", 0, "single");
    read_text("single.err", err, sizeof err);
    cr_assert(rc1 == 0 || rc1 == 1, "the single run exited %d: %s", rc1, err);
    snprintf(single, sizeof single, "%s/single/campaign.h5", tmpdir);
    for (int n = 2; n <= 3; n++) {
        snprintf(name, sizeof name, "r%d", n);
        int rc = peat_run("", n, name);
        snprintf(dir, sizeof dir, "%s.err", name);
        read_text(dir, err, sizeof err);
        cr_assert_eq(rc, rc1, "mpirun -n %d peat run exited %d, the single run %d: %s", n, rc, rc1,
                     err);
        snprintf(dir, sizeof dir, "%s/%s/campaign.h5", tmpdir, name);
        assert_same_datasets(single, dir, name);
        assert_same_judgement(single, dir, name, 2);
        assert_same_analysis(single, dir, name);
        char sj[400], rj[400];
        snprintf(sj, sizeof sj, "%s/single/signature.json", tmpdir);
        snprintf(rj, sizeof rj, "%s/%s/signature.json", tmpdir, name);
        assert_same_signature_json(sj, rj, name);
    }
}

/* Kernels that misbehave on every call (isolated on every rank): stray writes counted and the
 * probes failed as one process does, a hang that ends the playback at the same call. */
Test(mpi, misbehaving_kernels_under_ranks_equal_the_single_process_run)
{
    static const char *const ks[] = {"test_gemm_write_after", "test_gemm_spin"};
    char args[1000], name[64], single[400], dir[400], err[4096];
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args,
                 "run --kernel %s --plugin %s/libplugin_hostile.so --iters 12 --calls 6 "
                 "--no-runtime --timeout 1 --quiet",
                 ks[k], PEAT_TEST_PLUGIN_DIR);
        snprintf(name, sizeof name, "%s-1", ks[k]);
        int rc1 = peat_run_args("", 0, args, name);
        cr_assert_eq(rc1, 1, "%s fails the single run (exit %d)", ks[k], rc1);
        snprintf(single, sizeof single, "%s/%s/campaign.h5", tmpdir, name);
        int n = 3 - k; /* the hang at -n 2: each rank meets one at its first call */
        snprintf(name, sizeof name, "%s-%d", ks[k], n);
        int rc = peat_run_args("", n, args, name);
        snprintf(dir, sizeof dir, "%s.err", name);
        read_text(dir, err, sizeof err);
        cr_assert_eq(rc, rc1, "mpirun -n %d peat run --kernel %s exited %d: %s", n, ks[k], rc, err);
        snprintf(dir, sizeof dir, "%s/%s/campaign.h5", tmpdir, name);
        assert_same_analysis(single, dir, name);
        peat_campaign_state st;
        state_of(dir, &st);
        cr_assert(k == 0 ? st.res.n_oob_writes == 6 && st.res.n_probes > 0
                         : st.res.n_hang_skipped == 5,
                  "%s: %lld stray writes, %lld calls skipped after the hang", ks[k],
                  (long long)st.res.n_oob_writes, (long long)st.res.n_hang_skipped);
        peat_campaign_state_free(&st);
    }
}

Test(mpi, playback_and_probes_name_the_rank_that_failed)
{
    static const char *const env[] = {"PEAT_TEST_HOOKS=items-fail-rank=1",
                                      "PEAT_TEST_HOOKS=items-fail-rank=2:Q"};
    static const char *const says[] = {
        "peat: error: rank 1 of 2 failed in playback: test hook items-fail-rank: rank 1 fails on "
        "purpose (its recorded calls: #1, #3, ...)",
        "peat: error: rank 2 of 3 failed in probes: test hook items-fail-rank: rank 2 fails on "
        "purpose (its probes: #2, #5, ...)"};
    char err[4096], name[32], p[400];
    for (int k = 0; k < 2; k++) {
        snprintf(name, sizeof name, "items-failed-%d", k);
        int rc = peat_run(env[k], 2 + k, name);
        snprintf(p, sizeof p, "%s.err", name);
        read_text(p, err, sizeof err);
        cr_assert_eq(rc, 2, "the job failed (exit %d): %s", rc, err);
        cr_assert(strstr(err, says[k]), "rank 0 names the rank and its items (%s): %s", says[k],
                  err);
        snprintf(p, sizeof p, "%s/%s/campaign.h5", tmpdir, name);
        cr_assert(access(p, F_OK) != 0, "no campaign was completed without the rank's items");
    }
}

Test(mpi, run_names_the_rank_that_failed)
{
    char err[4096], p[400];
    int rc = peat_run("PEAT_TEST_HOOKS=runtime-fail-rank=1", 2, "failed");
    read_text("failed.err", err, sizeof err);
    cr_assert_eq(rc, 2, "the job failed (exit %d): %s", rc, err);
    /* runs 1..5 of the lockstep beside the golden one: rank 1 of 2 has 1, 3 and 5 */
    char runs[300];
    snprintf(runs, sizeof runs, "its runs: %s, %s, gemm_bf16 @ 1/3", peat_runtime_band_spec(1),
             peat_runtime_band_spec(3));
    cr_assert(strstr(err, "peat: error: rank 1 of 2 failed in runtime FI") && strstr(err, runs),
              "rank 0 names the rank and its runs (%s): %s", runs, err);
    snprintf(p, sizeof p, "%s/failed/campaign.h5", tmpdir);
    cr_assert(access(p, F_OK) != 0, "no campaign was completed without the rank's runs");
}

Test(mpi, run_without_runtime_stage_lets_the_ranks_go_and_budget_is_refused)
{
    char cmd[2000], err[4096];
    /* rank 0 ends without a runtime stage: the other ranks, waiting for it, end with it */
    snprintf(cmd, sizeof cmd,
             "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 %s "
             "--oversubscribe -n 3 %s run --kernel gemm_new --flow mlp --iters 4 --calls 8 "
             "--no-probes --no-runtime --quiet --out '%s/nr' >/dev/null 2>'%s/nr.err'",
             PEAT_TEST_MPIRUN, PEAT_TEST_BIN, tmpdir, tmpdir);
    int rc = system(cmd);
    read_text("nr.err", err, sizeof err);
    cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "mpirun -n 3 peat run --no-runtime: %d %s",
              WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, err);
    snprintf(cmd, sizeof cmd, "%s/nr/campaign.h5", tmpdir);
    cr_assert_eq(access(cmd, F_OK), 0, "rank 0 completed the campaign");
    /* --budget steers by the clock: refused in one line before anything runs */
    snprintf(cmd, sizeof cmd,
             "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 %s "
             "--oversubscribe -n 2 %s run --kernel gemm_new --budget 30s --out '%s/bu' "
             ">/dev/null 2>'%s/bu.err'",
             PEAT_TEST_MPIRUN, PEAT_TEST_BIN, tmpdir, tmpdir);
    rc = system(cmd);
    read_text("bu.err", err, sizeof err);
    cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "refused with exit 2: %s", err);
    cr_assert(strstr(err, "peat: error: peat run --budget does not split across MPI ranks"),
              "says why: %s", err);
    snprintf(cmd, sizeof cmd, "%s/bu", tmpdir);
    cr_assert(access(cmd, F_OK) != 0, "nothing was run");
}
