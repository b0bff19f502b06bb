/* test_cli.c: the `peat` command end to end: verdicts of known kernels, exit codes, bad input. */
#include <criterion/criterion.h>

#include "harness/cli/options.h"

#include <fcntl.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_run.h"

static void setup(void)
{
    tmpdir_make("cli");
}

static void teardown(void)
{
    tmpdir_remove();
}

static char *read_json(const char *dir)
{
    static char buf[1 << 16];
    char p[400];
    snprintf(p, sizeof p, "%s/%s/signature.json", tmpdir, dir);
    slurp(p, buf, sizeof buf);
    return buf;
}

#define SMALL "--iters 12 --calls 12"

TestSuite(cli, .init = setup, .fini = teardown, .timeout = 300);

Test(cli, gemm_new_within_bound)
{
    int rc = peat("run --kernel gemm_new " SMALL " --out %s/a", tmpdir);
    cr_assert_eq(rc, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", rc, out_buf, err_buf);
    cr_assert(strstr(out_buf, "WITHIN_BOUND"), "verdict table:\n%s", out_buf);
    char *j = read_json("a");
    cr_assert(strstr(j, "\"class\": \"WITHIN_BOUND\""), "signature.json:\n%.2000s", j);
    cr_assert(strstr(j, "\"verdict\": \"PASS\""));
    char p[400];
    struct stat st;
    const char *files[] = {"campaign.h5", "summary.md", "junit.xml", "report.html"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/a/%s", tmpdir, files[i]);
        cr_assert_eq(stat(p, &st), 0, "%s missing", files[i]);
    }
    static char html[1 << 20];
    snprintf(p, sizeof p, "%s/a/report.html", tmpdir);
    slurp(p, html, sizeof html);
    cr_assert(strstr(html, "WITHIN_BOUND") && strstr(html, "<svg") && strstr(html, "<polyline"),
              "report.html lacks the finding or its plots");
    snprintf(p, sizeof p, "%s/a/campaign.h5.partial", tmpdir);
    cr_assert_neq(stat(p, &st), 0, "a finished run must not leave a .partial file");
}

Test(cli, gemm_bf16_reduced_precision_about_8_bits)
{
    int rc = peat("run --kernel gemm_bf16 " SMALL " --out %s/b", tmpdir);
    cr_assert_eq(rc, 0, "declared bf16 is a WARN, not a failure; exit %d\n%s\n%s", rc, out_buf,
                 err_buf);
    char *j = read_json("b");
    cr_assert(strstr(j, "\"class\": \"REDUCED_PRECISION\""), "signature.json:\n%.2000s", j);
    const char *b = strstr(j, "bits=");
    cr_assert_not_null(b, "no bits= parameter");
    double bits = atof(b + 5);
    cr_assert(bits >= 7.0 && bits <= 9.5, "effective bits %.2f, expected about 8", bits);
}

/* One element wrong per call, at the same index: the permutation keeps it where it was (the
 * differential diagnosis), a structural defect. */
Test(cli, plugin_corrupting_one_element_is_structural)
{
    int rc = peat("run --plugin %s/libplugin_test_gemms.so --kernel test_gemm_corrupt " SMALL
                  " --out %s/c",
                  PEAT_TEST_PLUGIN_DIR, tmpdir);
    cr_assert_eq(rc, 1, "a corrupting kernel must fail; exit %d\n%s\n%s", rc, out_buf, err_buf);
    char *j = read_json("c");
    cr_assert(strstr(j, "\"class\": \"STRUCTURAL\""), "signature.json:\n%.2000s", j);
    cr_assert(strstr(j, "\"experiment\": \"permutation\""), "signature.json:\n%.2000s", j);
    cr_assert(strstr(j, "\"verdict\": \"FAIL\""));
}

/* A plugin whose kernel calls host functions loads into `peat` (it exports the host API) and
 * runs a whole campaign: an honestly reordered GEMM passes. */
Test(cli, plugin_calling_the_host_api_runs)
{
    int rc =
        peat("run --plugin %s/libplugin_host_api.so --kernel host_api_gemm " SMALL " --out %s/h",
             PEAT_TEST_PLUGIN_DIR, tmpdir);
    cr_assert_eq(rc, 0, "exit %d\n%s\n%s", rc, out_buf, err_buf);
    char *j = read_json("h");
    cr_assert(strstr(j, "\"class\": \"WITHIN_BOUND\""), "signature.json:\n%.2000s", j);
    cr_assert(strstr(j, "\"kernel_failures\": 0"), "signature.json:\n%.2000s", j);
}

Test(cli, crashing_kernel_does_not_take_the_campaign_down)
{
    int rc = peat("run --plugin %s/libplugin_test_gemms.so --kernel test_gemm_crash --iters 4 "
                  "--calls 3 --out %s/d",
                  PEAT_TEST_PLUGIN_DIR, tmpdir);
    cr_assert_eq(rc, 1, "exit %d\n%s\n%s", rc, out_buf, err_buf);
    /* "crashed with signal 11", or an exit code where a sanitizer catches the fault first */
    cr_assert(strstr(out_buf, "crashed"), "stdout:\n%s", out_buf);
    char *j = read_json("d");
    cr_assert(strstr(j, "\"kernel_failures\": 3"), "signature.json:\n%.2000s", j);
}

Test(cli, hanging_kernel_is_killed_at_the_deadline)
{
    int rc =
        peat("run --plugin %s/libplugin_test_gemms.so --kernel test_gemm_hang --iters 2 --calls 1 "
             "--timeout 0.5 --out %s/h",
             PEAT_TEST_PLUGIN_DIR, tmpdir);
    cr_assert_eq(rc, 1, "exit %d\n%s\n%s", rc, out_buf, err_buf);
    cr_assert(strstr(out_buf, "hung"), "stdout:\n%s", out_buf);
}

Test(cli, unknown_kernel_lists_available)
{
    int rc = peat("run --kernel gemm_nwe --out %s/e", tmpdir);
    cr_assert_eq(rc, 2);
    cr_assert_eq(count_lines(err_buf), 1, "one line expected, got:\n%s", err_buf);
    cr_assert(strstr(err_buf, "unknown kernel 'gemm_nwe'") && strstr(err_buf, "gemm_new"), "%s",
              err_buf);
}

Test(cli, malformed_arguments)
{
    const char *bad[] = {"run --kernel gemm_new --iters abc",
                         "run --kernel gemm_new --iters -3",
                         "run --kernel gemm_new --calls",
                         "run --kernel gemm_new --frobnicate",
                         "run",
                         "frobnicate",
                         "run --kernel gemm_new --flow nosuchflow",
                         "run --kernel gemm_new --backend quantum",
                         "run --kernel gemm_new --seed 1x",
                         "run --kernel gemm_new --timeout -1",
                         "help nosuchcommand",
                         "run --kernel softmax_online --flow mlp",
                         "run --kernel gemm_exact",
                         "run --kernel gemm_new --compress 0",
                         "run --kernel gemm_new --compress 101",
                         "run --kernel gemm_new --compress some"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = peat("%s --out %s/m%zu", bad[i], tmpdir, i);
        cr_assert_eq(rc, 2, "`peat %s` exited %d", bad[i], rc);
        cr_assert_eq(count_lines(err_buf), 1, "`peat %s`: one line expected, got:\n%s", bad[i],
                     err_buf);
        cr_assert(strncmp(err_buf, "peat: error: ", 13) == 0, "%s", err_buf);
    }
}

Test(cli, unwritable_output_directory)
{
    int rc = peat("run --kernel gemm_new " SMALL " --out /proc/peat-cannot-write-here");
    cr_assert_eq(rc, 2, "exit %d: %s", rc, err_buf);
    cr_assert_eq(count_lines(err_buf), 1, "%s", err_buf);
    char file[300];
    snprintf(file, sizeof file, "%s/plainfile", tmpdir);
    FILE *f = fopen(file, "w");
    fputs("x", f);
    fclose(f);
    rc = peat("run --kernel gemm_new " SMALL " --out %s/sub", file);
    cr_assert_eq(rc, 2, "an output path under a regular file must be refused");
}

Test(cli, finished_campaign_is_never_overwritten)
{
    cr_assert_eq(peat("run --kernel gemm_new --iters 4 --calls 2 --out %s/f", tmpdir), 0, "%s",
                 err_buf);
    char p[300];
    snprintf(p, sizeof p, "%s/f/campaign.h5", tmpdir);
    struct stat before, after;
    cr_assert_eq(stat(p, &before), 0);
    int rc = peat("run --kernel gemm_new --iters 4 --calls 2 --out %s/f", tmpdir);
    cr_assert_eq(rc, 2);
    cr_assert(strstr(err_buf, "already holds a finished campaign"), "%s", err_buf);
    cr_assert_eq(stat(p, &after), 0);
    cr_assert_eq(before.st_mtime, after.st_mtime);
    cr_assert_eq(before.st_size, after.st_size);
}

Test(cli, inspect_refuses_bad_files)
{
    char p[300];
    snprintf(p, sizeof p, "%s/not.h5", tmpdir);
    FILE *f = fopen(p, "w");
    fputs("this is not an HDF5 file\n", f);
    fclose(f);
    int rc = peat("inspect %s", p);
    cr_assert_eq(rc, 2);
    cr_assert_eq(count_lines(err_buf), 1, "%s", err_buf);

    cr_assert_eq(peat("run --kernel gemm_new --iters 4 --calls 4 --out %s/g", tmpdir), 0, "%s",
                 err_buf);
    char src[300], cut[300], cmd[800];
    snprintf(src, sizeof src, "%s/g/campaign.h5", tmpdir);
    snprintf(cut, sizeof cut, "%s/cut.h5", tmpdir);
    cr_assert_eq(peat("inspect %s", src), 0, "inspect of a good file: %s", err_buf);
    struct stat st;
    stat(src, &st);
    snprintf(cmd, sizeof cmd, "head -c %lld %s > %s", (long long)st.st_size / 2, src, cut);
    cr_assert_eq(system(cmd), 0);
    rc = peat("inspect %s", cut);
    cr_assert_eq(rc, 2, "a truncated file must be refused, exit %d", rc);
    cr_assert_eq(count_lines(err_buf), 1, "%s", err_buf);
    rc = peat("inspect %s/does-not-exist.h5", tmpdir);
    cr_assert_eq(rc, 2);
}

/* Runs `peat ARGS` under a deadline of `secs` (coreutils timeout: exit 124 if it hangs),
 * capturing stdout and stderr; returns the exit status. */
static int peat_deadline(int secs, const char *fmt, ...)
{
    char args[1024], cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "timeout -s KILL %d %s %s >%s/stdout 2>%s/stderr", secs,
             PEAT_TEST_BIN, args, tmpdir, tmpdir);
    int rc = system(cmd);
    char e[300];
    snprintf(e, sizeof e, "%s/stderr", tmpdir);
    slurp(e, err_buf, sizeof err_buf);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

/* Copies src to dst with `len` bytes at `at` either flipped (flip) or zeroed. */
static void damaged_copy(const char *src, const char *dst, long at, long len, int flip)
{
    FILE *f = fopen(src, "rb");
    cr_assert_not_null(f);
    static char buf[1 << 24];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    cr_assert((size_t)(at + len) <= n, "damage at %ld past the file's %zu bytes", at, n);
    for (long i = at; i < at + len; i++) buf[i] = flip ? (char)(buf[i] ^ 0xff) : 0;
    f = fopen(dst, "wb");
    cr_assert_eq(fwrite(buf, 1, n, f), n);
    fclose(f);
}

/* A damaged object header (issue 15: one byte at 1838, 4 KiB zeroed at 1500, and here one byte
 * in each object header of the file) used to send `run --resume` into HDF5's metadata retry
 * loop for good; now inspect and resume finish within the deadline, refusing in one line or
 * (damage to something a run does not need) completing. */
Test(cli, damaged_object_headers_are_refused_fast)
{
    cr_assert_eq(peat("run --kernel gemm_new " SMALL " --out %s/good", tmpdir), 0, "%s", err_buf);
    char src[300], dir[300], part[400];
    snprintf(src, sizeof src, "%s/good/campaign.h5", tmpdir);
    snprintf(dir, sizeof dir, "%s/dmg", tmpdir);
    snprintf(part, sizeof part, "%s/campaign.h5.partial", dir);
    long at[64], len[64];
    int n = 0;
    at[n] = 1838, len[n++] = 1;
    at[n] = 1500, len[n++] = 4096;
    FILE *f = fopen(src, "rb");
    static char buf[1 << 24];
    size_t size = fread(buf, 1, sizeof buf, f);
    fclose(f);
    for (size_t i = 0; i + 4 <= size && n < 64; i++)
        if (memcmp(buf + i, "OHDR", 4) == 0) at[n] = (long)i + 6, len[n++] = 1;
    cr_assert_gt(n, 12, "only %d object headers found", n);
    int refused = 0;
    for (int k = 0; k < n; k++) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir '%s'", dir, dir);
        cr_assert_eq(system(cmd), 0);
        damaged_copy(src, part, at[k], len[k], len[k] == 1);
        int rc = peat_deadline(20, "inspect %s", part);
        cr_assert(rc == 0 || rc == 2, "inspect, damage at %ld: exit %d (hung?): %s", at[k], rc,
                  err_buf);
        if (rc == 2) cr_assert_eq(count_lines(err_buf), 1, "damage at %ld: %s", at[k], err_buf);
        rc = peat_deadline(60, "run --resume --kernel gemm_new " SMALL " --out %s", dir);
        cr_assert(rc == 0 || rc == 2, "resume, damage at %ld: exit %d (hung?): %s", at[k], rc,
                  err_buf);
        if (rc == 2) cr_assert_eq(count_lines(err_buf), 1, "damage at %ld: %s", at[k], err_buf);
        refused += rc == 2;
    }
    cr_assert_gt(refused, n / 2, "only %d of %d damaged files were refused", refused, n);
}

/* A campaign file this user may not read is "permission denied", not "not an HDF5 file". Run as
 * root, the check drops to user nobody (root reads any file). */
Test(cli, unreadable_file_says_permission_denied)
{
    cr_assert_eq(peat("run --kernel gemm_new --iters 4 --calls 4 --out %s/p", tmpdir), 0, "%s",
                 err_buf);
    char p[300], e[300];
    snprintf(p, sizeof p, "%s/p/campaign.h5", tmpdir);
    snprintf(e, sizeof e, "%s/stderr", tmpdir);
    cr_assert_eq(chmod(p, 0), 0);
    cr_assert_eq(chmod(tmpdir, 0755), 0); /* nobody may walk to the file, not read it */
    char dirp[300];
    snprintf(dirp, sizeof dirp, "%s/p", tmpdir);
    cr_assert_eq(chmod(dirp, 0755), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int fd = open(e, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || dup2(fd, 2) < 0 || dup2(fd, 1) < 0) _exit(90);
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(91);
        execl(PEAT_TEST_BIN, PEAT_TEST_BIN, "inspect", p, (char *)NULL);
        _exit(92);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    slurp(e, err_buf, sizeof err_buf);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "exit status %d: %s", st, err_buf);
    cr_assert(strstr(err_buf, "permission denied"), "message: %s", err_buf);
    cr_assert_eq(count_lines(err_buf), 1, "%s", err_buf);
}

Test(cli, bad_plugins_refused)
{
    int rc = peat("run --plugin %s/libplugin_bad_abi.so --kernel x --out %s/p",
                  PEAT_TEST_PLUGIN_DIR, tmpdir);
    cr_assert_eq(rc, 2);
    cr_assert(strstr(err_buf, "ABI"), "%s", err_buf);
    cr_assert_eq(count_lines(err_buf), 1, "%s", err_buf);
}

Test(cli, list_and_help)
{
    cr_assert_eq(peat("list"), 0);
    cr_assert(strstr(out_buf, "gemm_new") && strstr(out_buf, "gemm_bf16") && strstr(out_buf, "mlp"),
              "%s", out_buf);
    cr_assert_eq(peat("--help"), 0);
    cr_assert(strstr(out_buf, "usage: peat"));
    cr_assert_eq(peat("help run"), 0);
    cr_assert(strstr(out_buf, "--kernel"));
    cr_assert_eq(peat("run --help"), 0);
    cr_assert(strstr(out_buf, "--resume"));
}

Test(cli, compress_setting_reaches_the_file)
{
    const char *modes[3] = {"all", "none", "30"};
    const char *want[3] = {"(every tensor)", "storage      uncompressed", "where it saves >= 30%"};
    for (int m = 0; m < 3; m++) {
        int rc = peat("run --kernel gemm_new %s --compress %s --quiet --out %s/c%d", SMALL,
                      modes[m], tmpdir, m);
        cr_assert_eq(rc, 0, "--compress %s: exit %d: %s", modes[m], rc, err_buf);
        rc = peat("inspect %s/c%d/campaign.h5", tmpdir, m);
        cr_assert_eq(rc, 0, "inspect: %s", err_buf);
        cr_assert(strstr(out_buf, want[m]), "--compress %s: inspect says\n%s", modes[m], out_buf);
    }
    /* every tensor compressed: nothing in the uncompressed pools */
    peat("inspect %s/c0/campaign.h5", tmpdir);
    cr_assert(strstr(out_buf, "uncompressed (would save too little)              0 B"), "%s",
              out_buf);
}

Test(cli, config_file_and_overrides)
{
    char cfg[300];
    snprintf(cfg, sizeof cfg, "%s/peat.ini", tmpdir);
    FILE *f = fopen(cfg, "w");
    fputs("# campaign settings\n[run]\nkernel = gemm_new\niters = 5\ncalls = "
          "3\n[record]\nrecord-phase = fwd\n",
          f);
    fclose(f);
    int rc = peat("run --config %s --calls 4 --out %s/cfg", cfg, tmpdir);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err_buf);
    char *j = read_json("cfg");
    cr_assert(strstr(j, "\"records\": 4"),
              "--calls on the command line must override the file:\n%.600s", j);
    f = fopen(cfg, "w");
    fputs("kernel gemm_new\n", f);
    fclose(f);
    rc = peat("run --config %s --out %s/cfg2", cfg, tmpdir);
    cr_assert_eq(rc, 2);
    cr_assert(strstr(err_buf, "peat.ini:1"), "the error must name the line: %s", err_buf);
    rc = peat("run --config %s/missing.ini --out %s/cfg3", tmpdir, tmpdir);
    cr_assert_eq(rc, 2);
}

/* The parser honours each row of the option table: integer options take their bounds and refuse
 * one past them, real options refuse their (open) bounds, choices take each choice and nothing
 * else; every error names the option. */
Test(cli, option_table_ranges_are_what_the_parser_enforces)
{
    const peat_cli_cmd *cmd = &peat_cli_run;
    for (int i = 0; i < cmd->n_opts; i++) {
        const peat_cli_opt *opt = &cmd->opts[i];
        char name[64], good[2][64], bad[2][64];
        int n_good = 0, n_bad = 0;
        snprintf(name, sizeof name, "--%s", opt->name);
        if (opt->kind == PEAT_CLI_INT || opt->kind == PEAT_CLI_I64 || opt->kind == PEAT_CLI_U64) {
            snprintf(good[n_good++], 64, "%.0f", opt->lo);
            snprintf(bad[n_bad++], 64, "%.0f", opt->lo - 1);
            if (opt->hi < PEAT_CLI_NO_MAX) {
                snprintf(good[n_good++], 64, "%.0f", opt->hi);
                snprintf(bad[n_bad++], 64, "%.0f", opt->hi + 1);
            }
        } else if (opt->kind == PEAT_CLI_REAL) {
            snprintf(good[n_good++], 64, "%.17g", (opt->lo + opt->hi) / 2);
            snprintf(bad[n_bad++], 64, "%.17g", opt->lo);
            snprintf(bad[n_bad++], 64, "%.17g", opt->hi);
        } else if (opt->kind == PEAT_CLI_CHOICE) {
            snprintf(good[n_good++], 64, "%.*s", (int)strcspn(opt->choices, "|"), opt->choices);
            snprintf(good[n_good++], 64, "%s", strrchr(opt->choices, '|') + 1);
            snprintf(bad[n_bad++], 64, "no-such-choice");
        }
        for (int g = 0; g < n_good; g++) {
            peat_campaign_opts o;
            peat_campaign_opts_default(&o);
            char *argv[2] = {name, good[g]};
            cr_assert_eq(peat_cli_parse(cmd, 2, argv, &o), PEAT_OK, "%s %s refused: %s", name,
                         good[g], peat_error_last());
        }
        for (int b = 0; b < n_bad; b++) {
            peat_campaign_opts o;
            peat_campaign_opts_default(&o);
            char *argv[2] = {name, bad[b]};
            cr_assert_eq(peat_cli_parse(cmd, 2, argv, &o), PEAT_ERR_INVAL, "%s %s accepted", name,
                         bad[b]);
            cr_assert(strstr(peat_error_last(), name), "the error must name %s: %s", name,
                      peat_error_last());
        }
    }
}

/* Values land in the fields the table names (spot checks of each kind), --name=value included. */
Test(cli, option_table_fills_the_campaign_options)
{
    char *argv[] = {"--kernel",
                    "gemm_bf16",
                    "--iters=7",
                    "--seed",
                    "12345678901",
                    "--timeout",
                    "2.5",
                    "--no-isolate",
                    "--record-iters",
                    "3:9",
                    "--plugin",
                    "a.so",
                    "--plugin",
                    "b.so",
                    "--optimizer",
                    "sgd",
                    "--task",
                    "1",
                    "--record-phase",
                    "fwd,bwd"};
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    cr_assert_eq(peat_cli_parse(&peat_cli_run, sizeof argv / sizeof argv[0], argv, &o), PEAT_OK,
                 "%s", peat_error_last());
    cr_assert_str_eq(o.kernel, "gemm_bf16");
    cr_assert_eq(o.iters, 7);
    cr_assert_eq(o.seed, 12345678901ull);
    cr_assert_float_eq(o.kernel_timeout_s, 2.5, 0);
    cr_assert_eq(o.isolate, 0);
    cr_assert(o.record_iter_lo == 3 && o.record_iter_hi == 9);
    cr_assert_eq(o.n_plugins, 2);
    cr_assert_str_eq(o.plugins[1], "b.so");
    cr_assert_str_eq(o.optimizer, "sgd");
    cr_assert_eq(o.task, 1);
    cr_assert_str_eq(o.record_phase, "fwd,bwd");
    cr_assert_eq(o.calls, 0, "an option not given keeps its default");
}

/* `peat help run` shows every option of the table, with its range where it has one. */
Test(cli, help_shows_every_option_of_the_table)
{
    cr_assert_eq(peat("help run"), 0);
    for (int i = 0; i < peat_cli_run.n_opts; i++) {
        char name[64];
        snprintf(name, sizeof name, "--%s", peat_cli_run.opts[i].name);
        cr_assert(strstr(out_buf, name), "help lacks %s:\n%s", name, out_buf);
    }
    cr_assert(strstr(out_buf, "1..1000000"), "the range of --iters is not shown:\n%s", out_buf);
}
