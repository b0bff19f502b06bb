/* test_scale.c: scale-out without MPI (docs/scale-out.md): shards assigned by id cover every item
 * once; `peat inject --shard I/N` runs merged with `peat merge` give the trial table, rates and
 * reference signatures of the unsharded run with the same seed, whatever N; a missing shard is
 * named with its trials and nothing is written until it is rerun; a killed shard resumes to the
 * identical result; shards of another campaign or another shard count are refused. */
#include <criterion/criterion.h>

#include "harness/campaign/campaign.h"
#include "harness/runtime/builtin.h"
#include "harness/scale/scale.h"
#include "harness/fi/fi.h"
#include "harness/fi/fi_shard.h"
#include "harness/run/run.h"
#include "store/store.h"

#include "scale_check.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[256];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/peat-test-scale-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK, "registry init: %s", peat_error_last());
}

static void teardown(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(scale, .init = setup, .fini = teardown, .timeout = 600);

Test(scale, shards_by_id_cover_every_item_once)
{
    for (int n = 1; n <= 7; n++)
        for (int64_t id = 0; id < 200; id++) {
            int owners = 0;
            for (int i = 0; i < n; i++)
                owners += peat_scale_shard_mine((peat_scale_shard){i, n}, id);
            cr_assert_eq(owners, 1, "item %lld has %d owners among %d shards", (long long)id,
                         owners, n);
        }
    peat_scale_shard s;
    cr_assert_eq(peat_scale_shard_parse("2/5", &s), PEAT_OK);
    cr_assert(s.i == 2 && s.n == 5, "2/5 parsed as %d/%d", s.i, s.n);
    const char *bad[] = {"5/5", "-1/3", "1/0", "1", "1/2x", "a/b", ""};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        cr_assert_eq(peat_scale_shard_parse(bad[k], &s), PEAT_ERR_INVAL, "'%s' accepted", bad[k]);
}

Test(scale, fi_shards_merged_equal_the_single_run_for_any_count)
{
    char base[300], single[300], dir[300];
    snprintf(base, sizeof base, "%s/base", tmpdir);
    snprintf(single, sizeof single, "%s/single", tmpdir);
    make_campaign(base, 11);
    copy_dir(base, single);
    peat_fi_opts o;
    fi_opts(&o, single, NULL);
    o.threads = 1;
    peat_fi_result r;
    cr_assert_eq(peat_fi_run(&o, &r), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(r.n_trials, 90);
    peat_fi_result_free(&r);
    const int counts[] = {1, 2, 3, 7};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        int n = counts[c];
        snprintf(dir, sizeof dir, "%s/n%d", tmpdir, n);
        copy_dir(base, dir);
        for (int i = n - 1; i >= 0; i--) run_shard(dir, i, n, 0); /* any order */
        cr_assert_eq(trial_rows(dir), 0, "a shard writes only its own file");
        cr_assert_eq(peat_fi_merge(dir, NULL, 0, 0, &r), PEAT_OK, "merge of %d: %s", n,
                     peat_error_last());
        cr_assert_eq(r.n_merged, 90, "%d shards: %lld trials merged", n, (long long)r.n_merged);
        peat_fi_result_free(&r);
        assert_same_fi(single, dir);
        /* merging again adds nothing */
        cr_assert_eq(peat_fi_merge(dir, NULL, 0, 0, &r), PEAT_OK, "%s", peat_error_last());
        cr_assert_eq(r.n_merged, 0);
        cr_assert_eq(r.n_trials, 90);
        peat_fi_result_free(&r);
    }
}

Test(scale, missing_shard_is_named_and_its_rerun_completes_the_merge)
{
    char base[300], single[300], dir[300];
    snprintf(base, sizeof base, "%s/base", tmpdir);
    snprintf(single, sizeof single, "%s/single", tmpdir);
    snprintf(dir, sizeof dir, "%s/sh", tmpdir);
    make_campaign(base, 5);
    copy_dir(base, single);
    copy_dir(base, dir);
    peat_fi_opts o;
    fi_opts(&o, single, NULL);
    peat_fi_result r;
    cr_assert_eq(peat_fi_run(&o, &r), PEAT_OK, "%s", peat_error_last());
    peat_fi_result_free(&r);
    run_shard(dir, 0, 3, 0);
    run_shard(dir, 2, 3, 0);
    cr_assert_eq(peat_fi_merge(dir, NULL, 0, 0, &r), PEAT_ERR_NOTFOUND, "merge without shard 1");
    const char *msg = peat_error_last();
    cr_assert(strstr(msg, "shard 1/3 missing") && strstr(msg, "#1, #4") &&
                  !strstr(msg, "shard 0/3") && !strstr(msg, "shard 2/3") && !strchr(msg, '\n'),
              "the message names shard 1 and its trials alone, in one line: %s", msg);
    peat_fi_result_free(&r);
    cr_assert_eq(trial_rows(dir), 0, "nothing merged while a shard is missing");
    /* shard 1, killed after 8 of its rows, then resumed */
    pid_t pid = fork();
    if (pid == 0) {
        run_shard(dir, 1, 3, 8);
        _exit(3);
    }
    int ws;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL, "the shard was killed");
    cr_assert_eq(peat_fi_merge(dir, NULL, 0, 0, &r), PEAT_ERR_NOTFOUND);
    cr_assert(strstr(peat_error_last(), "shard 1/3 incomplete: 22 of its 30"),
              "a killed shard is incomplete: %s", peat_error_last());
    peat_fi_result_free(&r);
    fi_opts(&o, dir, "1/3");
    cr_assert_eq(peat_fi_run(&o, &r), PEAT_OK, "resume: %s", peat_error_last());
    cr_assert_eq(r.n_resumed, 8, "the killed shard's rows were kept");
    cr_assert_eq(r.n_run, 22);
    peat_fi_result_free(&r);
    cr_assert_eq(peat_fi_merge(dir, NULL, 0, 0, &r), PEAT_OK, "%s", peat_error_last());
    peat_fi_result_free(&r);
    assert_same_fi(single, dir);
}

Test(scale, shards_of_another_campaign_or_count_are_refused)
{
    char a[300], b[300], cmd[1400];
    snprintf(a, sizeof a, "%s/a", tmpdir);
    snprintf(b, sizeof b, "%s/b", tmpdir);
    make_campaign(a, 1);
    make_campaign(b, 2);
    run_shard(a, 0, 2, 0);
    run_shard(a, 1, 2, 0);
    run_shard(b, 0, 2, 0);
    /* b's shard 0 next to a's shard 1: another seed */
    char s0[400], s1[400];
    snprintf(s0, sizeof s0, "%s/fi-shard-0-of-2.h5", b);
    snprintf(s1, sizeof s1, "%s/fi-shard-1-of-2.h5", a);
    const char *mixed[2] = {s0, s1};
    peat_fi_result r;
    cr_assert_eq(peat_fi_merge(a, mixed, 2, 0, &r), PEAT_ERR_INVAL);
    cr_assert(strstr(peat_error_last(), "seed 2") && strstr(peat_error_last(), "seed 1"),
              "names both seeds: %s", peat_error_last());
    peat_fi_result_free(&r);
    /* a shard of 3 beside shards of 2 */
    run_shard(a, 2, 3, 0);
    cr_assert_eq(peat_fi_merge(a, NULL, 0, 0, &r), PEAT_ERR_INVAL);
    cr_assert(strstr(peat_error_last(), "mismatched shards"), "%s", peat_error_last());
    peat_fi_result_free(&r);
    cr_assert_eq(trial_rows(a), 0, "nothing written by a refused merge");
    /* the command line: one line on stderr, exit 2 */
    snprintf(cmd, sizeof cmd, "%s merge '%s' '%s' 2>'%s/err' >/dev/null", PEAT_TEST_BIN, b, s1,
             tmpdir);
    int rc = system(cmd);
    cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "peat merge of a foreign shard exits 2");
}

/* A suite of three small items (seconds each). */
static void suite_write(const char *path)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("[suite]\nname = shards\nkernels = gemm_new, gemm_bf16, softmax_online\nflows = "
          "auto\nbackends = cpu\niters = 2\ncalls = 4\nseed = 3\nbudget = 120s\n\n[accept]\n"
          "fail-on = warn\n\n[kernel gemm_bf16]\nallow = REDUCED_PRECISION bits>=6\n"
          "allow = DEGRADES\n",
          f);
    fclose(f);
}

/* ci.json of two suite results, timings and item folders aside, are the same. */
static void assert_same_suite(const char *a, const char *b)
{
    char cmd[1600];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && for d in '%s' '%s'; do sed -E 's/\"seconds\": [0-9.]+//; "
             "s/\"dir\": \"[^\"]*\"//' \"$d/ci.json\" > \"$d.cmp\"; done && cmp -s '%s.cmp' "
             "'%s.cmp'",
             tmpdir, a, b, a, b);
    cr_assert_eq(system(cmd), 0, "ci.json of %s and %s differ beyond timings and folders", a, b);
}

Test(scale, suite_shards_merged_equal_the_single_run)
{
    char suite[300], cmd[2000];
    snprintf(suite, sizeof suite, "%s/s.suite", tmpdir);
    suite_write(suite);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s ci s.suite --out single --quiet >/dev/null; "
             "%s ci s.suite --out sh --shard 1/2 --quiet >/dev/null; "
             "%s merge sh >/dev/null 2>merge1.err; echo $? >merge1.rc; "
             "%s ci s.suite --out sh --shard 0/2 --quiet >/dev/null; "
             "%s merge sh >merge2.out 2>&1; echo $? >merge2.rc",
             tmpdir, PEAT_TEST_BIN, PEAT_TEST_BIN, PEAT_TEST_BIN, PEAT_TEST_BIN, PEAT_TEST_BIN);
    cr_assert_eq(system(cmd), 0);
    char path[400], buf[2048];
    snprintf(path, sizeof path, "%s/merge1.err", tmpdir);
    text_read(path, buf, sizeof buf);
    cr_assert(strstr(buf, "shard 0/2 missing (2 items: #0 gemm_new mlp cpu, #2 softmax_online"),
              "the missing shard is named with its items: %s", buf);
    snprintf(path, sizeof path, "%s/merge1.rc", tmpdir);
    FILE *f = fopen(path, "r");
    int rc = -1;
    cr_assert(f && fscanf(f, "%d", &rc) == 1);
    fclose(f);
    cr_assert_eq(rc, 2, "a merge with a shard missing exits 2");
    /* the single run exits 0 (every item passes or is allowed): the merge too */
    snprintf(path, sizeof path, "%s/merge2.rc", tmpdir);
    f = fopen(path, "r");
    cr_assert(f && fscanf(f, "%d", &rc) == 1);
    fclose(f);
    cr_assert_eq(rc, 0, "the merged suite passes as the single run does");
    assert_same_suite("single", "sh");
}

Test(scale, a_rank_takes_gpu_local_rank_mod_the_node_devices)
{
    char dev[32];
    cr_assert_eq(peat_scale_gpu_choose(NULL, 0, 3, dev, sizeof dev), 0, "no GPU, none chosen");
    cr_assert_str_eq(dev, "");
    const int want[6] = {0, 1, 2, 3, 0, 1};
    for (int r = 0; r < 6; r++) {
        cr_assert_eq(peat_scale_gpu_choose("", 4, r, dev, sizeof dev), 1);
        cr_assert_eq(atoi(dev), want[r], "rank %d of 4 GPUs took %s", r, dev);
    }
    /* a scheduler's list (Slurm --gres): the rank's entry of it */
    const char *list = "5,7,GPU-ab12";
    const char *names[4] = {"5", "7", "GPU-ab12", "5"};
    for (int r = 0; r < 4; r++) {
        cr_assert_eq(peat_scale_gpu_choose(list, 8, r, dev, sizeof dev), 1);
        cr_assert_str_eq(dev, names[r], "rank %d of list %s took %s", r, list, dev);
    }
}

/* The number a command wrote into tmpdir/name (-1: none). */
static int number_in(const char *name)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "r");
    int v = -1;
    if (f && fscanf(f, "%d", &v) != 1) v = -1;
    if (f) fclose(f);
    return v;
}

/* The inode of tmpdir/rel's signature.json (0: none): a campaign moved keeps it, a rerun
 * writes a new file. */
static unsigned long signature_inode(const char *rel)
{
    char path[600];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s/signature.json", tmpdir, rel);
    return stat(path, &sb) == 0 ? (unsigned long)sb.st_ino : 0;
}

Test(scale, killed_suite_shards_resume_under_another_count_running_only_the_unfinished_item)
{
    char suite[300], cmd[3000];
    snprintf(suite, sizeof suite, "%s/s.suite", tmpdir);
    suite_write(suite);
    /* the plan: #0 gemm_new, #1 gemm_bf16, #2 softmax_online; shard i/3 holds item #i */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s ci s.suite --out single --baseline B --update-baseline --quiet "
             ">/dev/null && for i in 0 1 2; do %s ci s.suite --out sh --shard $i/3 --quiet "
             ">/dev/null || exit 3; done",
             tmpdir, PEAT_TEST_BIN, PEAT_TEST_BIN);
    cr_assert_eq(system(cmd), 0, "the single run and the three shards ran");
    /* shard 1/3 killed while its item ran: no ci.json, its campaign unfinished */
    snprintf(cmd, sizeof cmd,
             "cd '%s/sh' && rm shard-1-of-3/ci.json && d=$(echo shard-1-of-3/items/gemm_bf16-*-cpu)"
             " && mv $d/campaign.h5 $d/campaign.h5.partial && basename $d >../bf16 && "
             "basename shard-0-of-3/items/gemm_new-*-cpu >../g && "
             "basename shard-2-of-3/items/softmax_online-*-cpu >../sm",
             tmpdir);
    cr_assert_eq(system(cmd), 0);
    char g[128] = "", sm[128] = "", bf[128] = "", rel[300];
    const char *names[3] = {"g", "bf16", "sm"};
    char *dst[3] = {g, bf, sm};
    for (int k = 0; k < 3; k++) {
        snprintf(rel, sizeof rel, "%s/%s", tmpdir, names[k]);
        FILE *f = fopen(rel, "r");
        cr_assert(f && fscanf(f, "%127s", dst[k]) == 1, "item folder name %s", names[k]);
        fclose(f);
    }
    snprintf(rel, sizeof rel, "sh/shard-0-of-3/items/%s", g);
    unsigned long ino_g = signature_inode(rel);
    snprintf(rel, sizeof rel, "sh/shard-2-of-3/items/%s", sm);
    unsigned long ino_sm = signature_inode(rel);
    cr_assert(ino_g && ino_sm, "the finished shards' campaigns are there");
    /* without --resume the shard's folder is refused with a hint; --resume with --force too */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s ci s.suite --out sh --shard 0/3 --quiet >/dev/null 2>held.err; "
             "echo $? >held.rc; %s ci s.suite --out sh --shard 0/2 --resume --force >/dev/null "
             "2>rf.err; echo $? >rf.rc",
             tmpdir, PEAT_TEST_BIN, PEAT_TEST_BIN);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(number_in("held.rc"), 2, "a folder holding a result is refused");
    char buf[600];
    snprintf(rel, sizeof rel, "%s/held.err", tmpdir);
    text_read(rel, buf, sizeof buf);
    cr_assert(strstr(buf, "already holds a suite result") && strstr(buf, "--resume"),
              "the refusal suggests --resume: %s", buf);
    cr_assert_eq(number_in("rf.rc"), 2, "--resume with --force is refused");
    /* resumed as 2 shards, in any order, then merged */
    snprintf(
        cmd, sizeof cmd,
        "cd '%s' && %s ci s.suite --out sh --shard 1/2 --resume --quiet >/dev/null && %s ci "
        "s.suite --out sh --shard 0/2 --resume >resume0.out && %s merge sh >/dev/null; echo $? "
        ">merge.rc",
        tmpdir, PEAT_TEST_BIN, PEAT_TEST_BIN, PEAT_TEST_BIN);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(number_in("merge.rc"), 0, "the resumed suite passes as the single run does");
    assert_same_suite("single", "sh");
    /* #0 and #2 (now shard 0/2's) were taken, not rerun; #1 (now shard 1/2's) ran again */
    snprintf(rel, sizeof rel, "sh/shard-0-of-2/items/%s", g);
    cr_assert_eq(signature_inode(rel), ino_g, "gemm_new was moved into shard 0/2, not rerun");
    snprintf(rel, sizeof rel, "sh/shard-0-of-2/items/%s", sm);
    cr_assert_eq(signature_inode(rel), ino_sm, "softmax_online was moved, not rerun");
    snprintf(rel, sizeof rel, "sh/shard-1-of-2/items/%s", bf);
    cr_assert_neq(signature_inode(rel), 0, "gemm_bf16 ran again in shard 1/2");
    snprintf(rel, sizeof rel, "%s/resume0.out", tmpdir);
    text_read(rel, buf, sizeof buf);
    cr_assert(strstr(buf, "resumed: 2 of the 2 items"), "shard 0/2 says what it took: %s", buf);
    snprintf(rel, sizeof rel, "%s/sh/shard-0-of-3/ci.json", tmpdir);
    cr_assert(access(rel, F_OK) != 0, "the results of 3 shards are superseded");
    /* the merge compares with the baseline as peat ci does: the single run's passes, a better
     * one is a regression */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s merge sh --baseline B >/dev/null; echo $? >merge1.rc; sed -i -E "
             "'/\"candidate\"/ s/\"eff_bits\":[-0-9.e+]+/\"eff_bits\":99/' "
             "B/items/%s/signature.json && %s merge sh --baseline B >merge2.out; echo $? "
             ">merge2.rc",
             tmpdir, PEAT_TEST_BIN, g, PEAT_TEST_BIN);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(number_in("merge1.rc"), 0, "no regression against the single run's baseline");
    cr_assert_eq(number_in("merge2.rc"), 1, "a regression against the baseline fails the merge");
    snprintf(rel, sizeof rel, "%s/sh/ci.json", tmpdir);
    static char js[1 << 16];
    text_read(rel, js, sizeof js);
    cr_assert(strstr(js, "\"compared\": true, \"regressions\": 1"),
              "the merged ci.json holds the comparison");
    /* a campaign of another command (here another seed) is never taken: every item reruns */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && sed 's/seed = 3/seed = 4/' s.suite >s4.suite && %s ci s4.suite --out "
             "single --resume >resume4.out; grep -c -- '--seed 4' single/ci.json >seed4.n",
             tmpdir, PEAT_TEST_BIN);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(number_in("seed4.n"), 3, "every item ran with the new seed");
    snprintf(rel, sizeof rel, "%s/resume4.out", tmpdir);
    text_read(rel, buf, sizeof buf);
    cr_assert(!strstr(buf, "resumed"), "no item of seed 3 was taken: %s", buf);
}

Test(scale, a_suite_run_stopped_by_sigterm_resumes_to_the_single_run)
{
    char suite[300], cmd[2000];
    snprintf(suite, sizeof suite, "%s/s.suite", tmpdir);
    suite_write(suite);
    /* stopped once its second item started (whenever that is, item #0 is finished then): peat
     * ci takes its running `peat run` down with it, so --resume finds that item's folder free */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s ci s.suite --out single --quiet >/dev/null; %s ci s.suite --out k "
             "--quiet >/dev/null & pid=$!; for t in $(seq 1200); do ls k/items/gemm_bf16-*.log "
             ">/dev/null 2>&1 && break; sleep 0.05; done; kill -TERM $pid; wait $pid; "
             "[ -e k/ci.json ] && exit 3; %s ci s.suite --out k --resume >resume.out; echo $? "
             ">resume.rc",
             tmpdir, PEAT_TEST_BIN, PEAT_TEST_BIN, PEAT_TEST_BIN);
    cr_assert_eq(system(cmd), 0, "the run was stopped before it wrote its result");
    cr_assert_eq(number_in("resume.rc"), 0, "the resumed suite passes as the single run does");
    assert_same_suite("single", "k");
    char buf[2048], path[400];
    snprintf(path, sizeof path, "%s/resume.out", tmpdir);
    text_read(path, buf, sizeof buf);
    cr_assert(strstr(buf, "resumed: ") && !strstr(buf, "ERROR"),
              "the finished item was taken and no item lacks a verdict: %s", buf);
}
