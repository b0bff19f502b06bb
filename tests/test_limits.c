/* test_limits.c: peat under an address-space limit (setrlimit(RLIMIT_AS), as `ulimit -v` sets):
 * one line naming the limit and exit 2, or a PASS within it; never a hang (docs/cli.md,
 * "Resource limits"). */
#define _DEFAULT_SOURCE /* usleep */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_run.h"

static void setup(void)
{
    tmpdir_make("limits");
}

static void teardown(void)
{
    tmpdir_remove();
}

TestSuite(limits, .init = setup, .fini = teardown, .timeout = 600);

/* A guard against a hang only, far above any run's time: the test asserts outcomes, not times. */
enum { GUARD_S = 120 };

/* Runs `peat run --kernel gemm_new` in a child whose address space is limited to mib MiB,
 * stdout and stderr captured; returns its exit status (-1 when the guard had to kill it). */
static int run_limited(long mib, const char *out)
{
    char o[400], e[400], dir[400];
    snprintf(o, sizeof o, "%s/%s.out", tmpdir, out);
    snprintf(e, sizeof e, "%s/%s.err", tmpdir, out);
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, out);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        struct rlimit rl = {(rlim_t)mib << 20, (rlim_t)mib << 20};
        int fo = open(o, O_WRONLY | O_CREAT | O_TRUNC, 0644),
            fe = open(e, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0) _exit(120);
        if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(121);
        execl(PEAT_TEST_BIN, PEAT_TEST_BIN, "run", "--kernel", "gemm_new", "--out", dir,
              (char *)NULL);
        _exit(122);
    }
    int wst = 0;
    for (int waited = 0; waitpid(pid, &wst, WNOHANG) == 0; waited++) {
        if (waited >= GUARD_S * 10) {
            kill(pid, SIGKILL);
            waitpid(pid, &wst, 0);
            return -1;
        }
        usleep(100 * 1000);
    }
    slurp(o, out_buf, sizeof out_buf);
    slurp(e, err_buf, sizeof err_buf);
    return WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
}

Test(limits, address_space_limit_is_one_line_or_a_pass)
{
#if defined(__SANITIZE_ADDRESS__)
    cr_skip_test("AddressSanitizer reserves terabytes of address space: no run under ulimit -v");
#endif
    /* before: 128 and 256 MiB hung forever (OpenBLAS asking again for its 128 MiB buffer), 512
     * MiB ended with the isolation worker out of memory */
    static const long mib[] = {128, 256, 512};
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "as%ld", mib[i]);
        int rc = run_limited(mib[i], name);
        cr_assert_neq(rc, -1, "%ld MiB: still running after %d s (a hang)", mib[i], GUARD_S);
        if (rc == 0) {
            cr_assert_not_null(strstr(out_buf, "verdict: PASS"), "%ld MiB:\n%s", mib[i], out_buf);
            continue;
        }
        cr_assert_eq(rc, 2, "%ld MiB: exit %d\n%s%s", mib[i], rc, out_buf, err_buf);
        const char *nl = strchr(err_buf, '\n');
        cr_assert(nl && nl[1] == 0, "%ld MiB: not one line:\n%s", mib[i], err_buf);
        cr_assert_not_null(strstr(err_buf, "peat: error: the address-space limit (ulimit -v) is"),
                           "%ld MiB: %s", mib[i], err_buf);
        char want[64];
        snprintf(want, sizeof want, "is %ld KiB;", mib[i] << 10);
        cr_assert_not_null(strstr(err_buf, want), "%ld MiB: %s", mib[i], err_buf);
        cr_assert_not_null(strstr(err_buf, "needs at least"), "%ld MiB: %s", mib[i], err_buf);
    }
}

Test(limits, commands_that_run_nothing_are_not_refused)
{
#if defined(__SANITIZE_ADDRESS__)
    cr_skip_test("AddressSanitizer reserves terabytes of address space: no run under ulimit -v");
#endif
    /* `peat version` under 128 MiB: the check is for the commands that run kernels */
    int rc = sh("ulimit -v 131072; %s version", PEAT_TEST_BIN);
    cr_assert_eq(rc, 0, "rc %d\n%s%s", rc, out_buf, err_buf);
    cr_assert_not_null(strstr(out_buf, "peat "), "%s", out_buf);
}
