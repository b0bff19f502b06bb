/* test_reports.c: a finished campaign's reports written again from its file alone (`peat report
 * DIR`, `peat run --resume DIR` when they are missing): equal to the run's own outside their time
 * fields; unfinished, damaged or absent campaigns refused in one line. */
#include <criterion/criterion.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_run.h"

#include <hdf5.h>

static const char *const reports[] = {"signature.json", "summary.md", "junit.xml", "report.html"};
#define N_REPORTS 4

static void setup(void)
{
    tmpdir_make("reports");
}

static void teardown(void)
{
    tmpdir_remove();
}

TestSuite(reports, .init = setup, .fini = teardown, .timeout = 300);

/* Masks what measures time, nothing else: a junit time="..." value, signature.json's timing_s
 * line, and a number followed by " s" (seconds, as the table, summary.md and report.html write
 * them). */
static void mask_timing(char *s)
{
    char *o = s;
    for (const char *p = s; *p;) {
        if (!strncmp(p, "\"timing_s\":", 11)) {
            o += sprintf(o, "\"timing_s\": T");
            p = strchr(p, '\n') ? strchr(p, '\n') : p + strlen(p);
            continue;
        }
        if (!strncmp(p, "time=\"", 6)) {
            o += sprintf(o, "time=\"T\"");
            p = strchr(p + 6, '"') + 1;
            continue;
        }
        const char *q = p;
        while (isdigit((unsigned char)*q) || *q == '.') q++;
        if (q > p && isdigit((unsigned char)*p) && q[0] == ' ' && q[1] == 's' &&
            !isalpha((unsigned char)q[2])) {
            *o++ = 'T';
            p = q;
            continue;
        }
        if (q > p) {
            memmove(o, p, (size_t)(q - p));
            o += q - p, p = q;
        } else
            *o++ = *p++;
    }
    *o = 0;
}

static char a_buf[1 << 20], b_buf[1 << 20];

/* Reads tmpdir/rel into buf, asserting it is there and not empty. */
static void read_rel(const char *rel, char *buf, size_t n)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", tmpdir, rel);
    slurp(p, buf, n);
    cr_assert(buf[0], "%s is missing or empty", p);
}

/* Every report of tmpdir/dir equals its copy in tmpdir/saved once time is masked. */
static void reports_equal(const char *dir, const char *saved)
{
    for (int i = 0; i < N_REPORTS; i++) {
        char ra[300], rb[300];
        snprintf(ra, sizeof ra, "%s/%s", saved, reports[i]);
        snprintf(rb, sizeof rb, "%s/%s", dir, reports[i]);
        read_rel(ra, a_buf, sizeof a_buf);
        read_rel(rb, b_buf, sizeof b_buf);
        mask_timing(a_buf);
        mask_timing(b_buf);
        size_t k = 0;
        while (a_buf[k] && a_buf[k] == b_buf[k]) k++;
        cr_assert(!strcmp(a_buf, b_buf),
                  "%s regenerated differs from the run's own at byte %zu: run '%.60s' vs "
                  "regenerated '%.60s'",
                  reports[i], k, a_buf + k, b_buf + k);
    }
}

/* The verdict table of a run's stdout (from its header on), time masked. */
static void table_of(const char *out, char *buf, size_t n)
{
    const char *t = strstr(out, "\nkernel ");
    cr_assert(t, "no verdict table in: %.300s", out);
    snprintf(buf, n, "%s", t);
    mask_timing(buf);
}

static void reports_move(const char *dir, const char *saved)
{
    cr_assert_eq(sh("mkdir '%s/%s' && cd '%s/%s' && mv signature.json summary.md junit.xml "
                    "report.html '%s/%s/'",
                    tmpdir, saved, tmpdir, dir, tmpdir, saved),
                 0, "%s", err_buf);
}

/* Runs a campaign into dir, moves its reports to saved, regenerates them, compares. */
static void regenerate_and_compare(const char *dir, const char *saved, const char *args)
{
    static char table_run[1 << 16], table_regen[1 << 16];
    int rc = peat("run %s --out %s/%s", args, tmpdir, dir);
    cr_assert(rc == 0 || rc == 1, "run exit %d: %s", rc, err_buf);
    table_of(out_buf, table_run, sizeof table_run);
    reports_move(dir, saved);
    int rc2 = peat("report %s/%s", tmpdir, dir);
    cr_assert_eq(rc2, rc, "peat report exits %d, the run %d: %s", rc2, rc, err_buf);
    cr_assert_eq(err_buf[0], 0, "peat report wrote to stderr: %s", err_buf);
    table_of(out_buf, table_regen, sizeof table_regen);
    cr_assert(!strcmp(table_run, table_regen), "terminal tables differ:\n%s\n---\n%s", table_run,
              table_regen);
    reports_equal(dir, saved);
}

Test(reports, regenerated_reports_equal_the_runs_own)
{
    regenerate_and_compare("pass", "pass-saved", "--kernel gemm_new --iters 12 --calls 6 --seed 5");
}

Test(reports, regenerated_reports_of_a_failing_kernel_with_runtime_runs_equal_the_runs_own)
{
    /* bf16 inputs: findings beyond the bound, probes, and two runtime FI runs with their curves
     * (report.html plots them over the band rebuilt from the file) */
    regenerate_and_compare("bf16", "bf16-saved",
                           "--kernel gemm_bf16 --iters 12 --calls 6 --seed 9 "
                           "--runtime-freq 1,1/4");
    read_rel("bf16/report.html", b_buf, sizeof b_buf);
    cr_assert(strstr(b_buf, "<polyline"), "report.html regenerated without its runtime plots");
}

Test(reports, json_verdict_is_the_same)
{
    cr_assert_lt(peat("run --kernel gemm_new --iters 12 --calls 6 --json --out %s/j", tmpdir), 2,
                 "%s", err_buf);
    static char first[1 << 16];
    snprintf(first, sizeof first, "%s", out_buf);
    cr_assert_lt(peat("report --json %s/j", tmpdir), 2, "%s", err_buf);
    cr_assert_str_eq(out_buf, first, "JSON verdict differs");
}

Test(reports, resume_regenerates_missing_reports_and_says_finished_when_whole)
{
    cr_assert_lt(peat("run --kernel gemm_new --iters 12 --calls 6 --out %s/r", tmpdir), 2, "%s",
                 err_buf);
    reports_move("r", "r-saved");
    cr_assert_lt(peat("run --resume %s/r", tmpdir), 2, "resume: %s", err_buf);
    cr_assert(strstr(out_buf, "writing them again"), "resume did not say what it did: %s", out_buf);
    reports_equal("r", "r-saved");
    /* one report lost: the --out form writes them again too */
    cr_assert_eq(sh("rm %s/r/summary.md", tmpdir), 0);
    cr_assert_lt(peat("run --kernel gemm_new --iters 12 --calls 6 --resume --out %s/r", tmpdir), 2,
                 "resume --out: %s", err_buf);
    reports_equal("r", "r-saved");
    /* all there: nothing to do, as before */
    cr_assert_eq(peat("run --resume %s/r", tmpdir), 2);
    cr_assert(strstr(err_buf, "finished"), "%s", err_buf);
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* `peat report ARG` exits 2 with one line on stderr containing want. */
static void refused(const char *arg, const char *want)
{
    cr_assert_eq(peat("report %s", arg), 2, "peat report %s did not exit 2: %s", arg, err_buf);
    cr_assert_eq(lines(err_buf), 1, "not one line: %s", err_buf);
    cr_assert(strstr(err_buf, want), "'%s' not in: %s", want, err_buf);
    cr_assert_eq(out_buf[0], 0, "stdout not empty: %s", out_buf);
}

Test(reports, unfinished_damaged_or_absent_campaigns_are_refused_in_one_line)
{
    char p[400], q[400];
    cr_assert_lt(peat("run --kernel gemm_new --iters 12 --calls 6 --quiet --out %s/ok", tmpdir), 2,
                 "%s", err_buf);
    snprintf(p, sizeof p, "%s/nothing-here", tmpdir);
    refused(p, "not a directory");
    snprintf(p, sizeof p, "%s/ok/campaign.h5", tmpdir);
    refused(p, "not a directory");
    cr_assert_eq(sh("mkdir %s/empty", tmpdir), 0);
    snprintf(p, sizeof p, "%s/empty", tmpdir);
    refused(p, "no campaign");
    /* an unfinished campaign has no reports to write: continue it */
    cr_assert_eq(sh("mkdir %s/part && cp %s/ok/campaign.h5 %s/part/campaign.h5.partial", tmpdir,
                    tmpdir, tmpdir),
                 0);
    snprintf(p, sizeof p, "%s/part", tmpdir);
    refused(p, "unfinished");
    /* truncated */
    cr_assert_eq(sh("mkdir %s/trunc && head -c 40000 %s/ok/campaign.h5 > %s/trunc/campaign.h5",
                    tmpdir, tmpdir, tmpdir),
                 0);
    snprintf(p, sizeof p, "%s/trunc", tmpdir);
    refused(p, "trunc/campaign.h5"); /* "is truncated" or "is not an HDF5 file" */
    /* the kept result deleted: the manifest says it was written, so the file is damaged */
    cr_assert_eq(sh("mkdir %s/gone && cp %s/ok/campaign.h5 %s/gone/", tmpdir, tmpdir, tmpdir), 0);
    snprintf(q, sizeof q, "%s/gone/campaign.h5", tmpdir);
    hid_t f = H5Fopen(q, H5F_ACC_RDWR, H5P_DEFAULT);
    cr_assert_geq(f, 0);
    cr_assert_geq(H5Ldelete(f, "/report/state", H5P_DEFAULT), 0);
    H5Fclose(f);
    snprintf(p, sizeof p, "%s/gone", tmpdir);
    refused(p, "damaged");
    cr_assert_eq(peat("report"), 2);
    cr_assert_eq(peat("report %s/ok %s/ok", tmpdir, tmpdir), 2);
}
