/* test_write_errors.c: a file-size limit (setrlimit(RLIMIT_FSIZE) in a forked child that runs the
 * peat binary: real EFBIG) and a full device (reports written through a symlink to /dev/full:
 * real ENOSPC) in run, report, inject and calibrate-latency: one line naming the file and the
 * cause, a non-zero exit (never SIGXFSZ), and what was recorded kept (resumable, regenerable). */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_run.h"

#define SMALL "--iters 12 --calls 6 --seed 3"

static void setup(void)
{
    tmpdir_make("wfail");
}

static void teardown(void)
{
    tmpdir_remove();
}

TestSuite(write_errors, .init = setup, .fini = teardown, .timeout = 300);

/* Runs `peat ARGS` (split at spaces) with the file-size limit at limit bytes, SIGXFSZ at its
 * default (peat must ignore it itself), stdout and stderr captured as peat() does. Returns the
 * wait status. */
static int peat_limited(rlim_t limit, const char *args)
{
    char copy[2048], *argv[64], p[400];
    int n = 0;
    snprintf(copy, sizeof copy, "%s", args);
    argv[n++] = PEAT_TEST_BIN;
    for (char *t = strtok(copy, " "); t && n < 63; t = strtok(NULL, " ")) argv[n++] = t;
    argv[n] = NULL;
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        snprintf(p, sizeof p, "%s/stdout", tmpdir);
        int o = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        snprintf(p, sizeof p, "%s/stderr", tmpdir);
        int e = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0) _exit(120);
        struct rlimit rl = {limit, limit};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(121);
        signal(SIGXFSZ, SIG_DFL);
        execv(argv[0], argv);
        _exit(122);
    }
    int ws = 0;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    snprintf(p, sizeof p, "%s/stdout", tmpdir);
    slurp(p, out_buf, sizeof out_buf);
    snprintf(p, sizeof p, "%s/stderr", tmpdir);
    slurp(p, err_buf, sizeof err_buf);
    return ws;
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* stderr is one line holding the file and the cause. */
static void one_line(const char *file, const char *cause)
{
    cr_assert_eq(lines(err_buf), 1, "not one line on stderr: %s", err_buf);
    cr_assert(strstr(err_buf, file), "the line does not name %s: %s", file, err_buf);
    cr_assert(strstr(err_buf, cause), "the line does not say '%s': %s", cause, err_buf);
}

/* The limited child exited 2 (not killed by SIGXFSZ or anything else). */
static void exited_2(int ws, const char *what)
{
    cr_assert(!WIFSIGNALED(ws), "%s: killed by signal %d", what,
              WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 2, "%s: exit %d, want 2: %s", what,
              WIFEXITED(ws) ? WEXITSTATUS(ws) : -1, err_buf);
}

static int exists(const char *rel)
{
    char p[600];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", tmpdir, rel);
    return stat(p, &sb) == 0;
}

/* The JSON verdict of stdout without its "out" field (where the run went). */
static void verdict_of(const char *out, char *buf, size_t n)
{
    const char *o = strstr(out, ", \"out\"");
    cr_assert(o && out[0] == '{', "no JSON verdict: %s", out);
    snprintf(buf, n, "%.*s", (int)(o - out), out);
}

Test(write_errors, run_over_the_file_size_limit_is_one_line_and_resumes)
{
    static char full[4096], resumed[4096];
    cr_assert_eq(peat("run --kernel gemm_new " SMALL " --json --out %s/whole", tmpdir), 0, "%s",
                 err_buf);
    verdict_of(out_buf, full, sizeof full);
    char args[600];
    snprintf(args, sizeof args, "run --kernel gemm_new " SMALL " --json --out %s/lim", tmpdir);
    /* 400 KiB: the campaign file (about 1.6 MB) passes it while profiling */
    int ws = peat_limited(400 * 1024, args);
    exited_2(ws, "run under the limit");
    one_line("lim/campaign.h5.partial", "file too large (file-size limit)");
    cr_assert(exists("lim/campaign.h5.partial") && !exists("lim/campaign.h5"),
              "the unfinished campaign is not kept as such");
    /* what was recorded is kept: the run continues without the limit, to the same verdict */
    cr_assert_eq(peat("run --resume %s/lim --json", tmpdir), 0, "resume: %s", err_buf);
    verdict_of(out_buf, resumed, sizeof resumed);
    cr_assert_str_eq(resumed, full, "resumed verdict differs from an uninterrupted run's");
}

Test(write_errors, reports_over_the_file_size_limit_are_one_line_and_regenerate)
{
    cr_assert_eq(peat("run --kernel gemm_new " SMALL " --quiet --out %s/r", tmpdir), 0, "%s",
                 err_buf);
    cr_assert_eq(sh("cd %s/r && rm signature.json summary.md junit.xml report.html", tmpdir), 0);
    char args[600];
    snprintf(args, sizeof args, "report %s/r", tmpdir);
    /* 40 KiB: signature.json, summary.md and junit.xml fit, report.html (about 90 KB) does not */
    int ws = peat_limited(40 * 1024, args);
    exited_2(ws, "report under the limit");
    one_line("r/report.html", "file too large (file-size limit)");
    cr_assert(!exists("r/report.html") && !exists("r/report.html.tmp"),
              "a cut report.html (or its .tmp) was left behind");
    cr_assert_eq(peat("report %s/r", tmpdir), 0, "%s", err_buf);
    cr_assert(exists("r/report.html"), "report.html not regenerated");
}

/* A symlink tmpdir/rel -> /dev/full, whose writes fail with ENOSPC (skips where it is absent). */
static void to_dev_full(const char *rel)
{
    struct stat sb;
    if (stat("/dev/full", &sb) != 0 || !S_ISCHR(sb.st_mode)) cr_skip_test("no /dev/full");
    char p[600];
    snprintf(p, sizeof p, "%s/%s", tmpdir, rel);
    cr_assert_eq(symlink("/dev/full", p), 0, "symlink %s", p);
}

Test(write_errors, reports_on_a_full_device_are_one_line_and_resume_writes_them)
{
    cr_assert_eq(sh("mkdir %s/full", tmpdir), 0);
    /* junit.xml is written to junit.xml.tmp first, renamed when whole: here that is the device */
    to_dev_full("full/junit.xml.tmp");
    cr_assert_eq(peat("run --kernel gemm_new " SMALL " --quiet --out %s/full", tmpdir), 2,
                 "a failed report must not pass: %s", err_buf);
    one_line("full/junit.xml", "no space left on device");
    cr_assert(exists("full/campaign.h5"), "the finished campaign was not kept");
    cr_assert(!exists("full/junit.xml"), "junit.xml exists although its write failed");
    cr_assert_eq(peat("run --resume %s/full", tmpdir), 0, "resume: %s", err_buf);
    cr_assert(exists("full/junit.xml") && exists("full/report.html"),
              "resume did not write the missing reports");
}

Test(write_errors, inject_over_the_limit_or_on_a_full_device_is_one_line)
{
    cr_assert_eq(peat("run --kernel gemm_new " SMALL " --quiet --out %s/i", tmpdir), 0, "%s",
                 err_buf);
    char args[600];
    snprintf(args, sizeof args,
             "inject --campaign %s/i --model bitflip(bit=30) --trials 12 --quiet", tmpdir);
    /* 1 MiB: less than the campaign file the trials are appended to */
    int ws = peat_limited(1024 * 1024, args);
    exited_2(ws, "inject under the limit");
    one_line("i/campaign.h5", "file too large (file-size limit)");
    to_dev_full("i/fi-summary.md.tmp");
    cr_assert_eq(
        peat("inject --campaign %s/i --model 'bitflip(bit=30)' --trials 12 --quiet", tmpdir), 2,
        "a failed FI report must not pass: %s", err_buf);
    one_line("i/fi-summary.md", "no space left on device");
    /* the trials are in the file: a rerun without the device reports them */
    cr_assert_eq(
        peat("inject --campaign %s/i --model 'bitflip(bit=30)' --trials 12 --quiet", tmpdir), 0,
        "%s", err_buf);
    cr_assert(exists("i/fi-summary.md") && exists("i/fi-report.html"));
}

Test(write_errors, calibrate_latency_never_exits_0_on_a_failed_write, .timeout = 600)
{
    char args[600];
    snprintf(args, sizeof args, "calibrate-latency --cache-dir %s/cache", tmpdir);
    cr_assert_eq(sh("mkdir %s/cache", tmpdir), 0);
    /* the calibration times the store on campaign files of its own: they meet the limit first */
    int ws = peat_limited(64 * 1024, args);
    exited_2(ws, "calibrate-latency under the limit");
    one_line(".h5", "file too large (file-size limit)");
    /* the cache itself on a full device: its name from a first calibration, then --force */
    cr_assert_eq(peat("%s", args), 0, "%s", err_buf);
    cr_assert_eq(sh("cd %s/cache && ls latency-*.h5", tmpdir), 0, "no cache written");
    char name[300];
    snprintf(name, sizeof name, "cache/%.*s.tmp", (int)strcspn(out_buf, "\n"), out_buf);
    to_dev_full(name);
    cr_assert_eq(peat("%s --force", args), 2, "calibrate-latency passed a failed cache write: %s",
                 err_buf);
    one_line("latency-", "no space left on device");
}

Test(write_errors, a_cache_dir_that_is_a_file_or_too_long_is_refused_before_any_work)
{
    cr_assert_eq(sh("touch %s/afile", tmpdir), 0);
    cr_assert_eq(peat("calibrate-latency --cache-dir %s/afile", tmpdir), 2, "%s", out_buf);
    one_line("afile", "Not a directory");
    cr_assert(!strstr(out_buf, "calibrat"), "it calibrated before refusing: %s", out_buf);
    static char longdir[700];
    int k = snprintf(longdir, sizeof longdir, "%s/", tmpdir);
    memset(longdir + k, 'd', 500);
    longdir[k + 500] = 0;
    cr_assert_eq(peat("calibrate-latency --cache-dir %s", longdir), 2, "%s", out_buf);
    one_line("cache directory", "at most");
}
