/* cli_run.h: what the end-to-end tests share: a scratch directory per test, running the peat
 * binary (or any shell command) with stdout and stderr captured, and reading files back. Each
 * test file includes it once; the functions are static inline so unused ones cost nothing. */
#ifndef PEAT_TESTS_CLI_RUN_H
#define PEAT_TESTS_CLI_RUN_H

#include <criterion/criterion.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static char tmpdir[256];
static char out_buf[1 << 16], err_buf[1 << 14];

/* Creates /tmp/peat-test-<suite>-XXXXXX as tmpdir (a suite's .init). */
static inline void tmpdir_make(const char *suite)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/peat-test-%s-XXXXXX", suite);
    cr_assert_not_null(mkdtemp(tmpdir));
}

/* Removes tmpdir and everything in it (a suite's .fini). */
static inline void tmpdir_remove(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

/* Reads at most n-1 bytes of path into buf ("" when it cannot be read). */
static inline void slurp(const char *path, char *buf, size_t n)
{
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    size_t k = fread(buf, 1, n - 1, f);
    buf[k] = 0;
    fclose(f);
}

/* Runs a shell command line (env assignments allowed in front), captures stdout and stderr into
 * out_buf and err_buf, returns its exit status. */
static inline int sh_v(const char *fmt, va_list ap)
{
    static char cmd[40000], full[41000]; /* room for paths of any length the tests try */
    char p[300];
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    snprintf(full, sizeof full, "%s >%s/stdout 2>%s/stderr", cmd, tmpdir, tmpdir);
    int rc = system(full);
    snprintf(p, sizeof p, "%s/stdout", tmpdir);
    slurp(p, out_buf, sizeof out_buf);
    snprintf(p, sizeof p, "%s/stderr", tmpdir);
    slurp(p, err_buf, sizeof err_buf);
    cr_assert(WIFEXITED(rc), "`%s` did not exit normally", cmd);
    return WEXITSTATUS(rc);
}

static inline int sh(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = sh_v(fmt, ap);
    va_end(ap);
    return rc;
}

/* Runs `peat ARGS` (the binary under test), captured as sh does. */
static inline int peat(const char *fmt, ...)
{
    static char args[36000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return sh("%s %s", PEAT_TEST_BIN, args);
}

static inline int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

#endif
