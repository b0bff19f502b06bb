/* bench_golden_cache.c: the golden work paid once (harness/campaign/golden_cache.c), side by side
 * in one run: a nightly suite of GEMM candidates on one flow (`peat ci`, each item its own `peat
 * run`) with the golden cache against the same campaigns run independently without it, and a second
 * `peat run --size base --flow gpt` of another kernel against the first, set against one golden
 * training. Verdicts of each pair are compared: they must be identical.
 *
 * usage: bench_golden_cache [PEAT] [FLOW] [SIZE] [PART]   (build/peat, gpt, small, all)
 *   PART: suite (the suite against independent campaigns), base (warm and cold at base), all */
#define _DEFAULT_SOURCE
#include "core/clock.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char dir[256];

static double now(void)
{
    return peat_clock_now();
}

/* Runs a shell command; its wall seconds (exits on failure: 0 and 1 are verdicts). */
static double timed(const char *cmd)
{
    double t0 = now();
    int rc = system(cmd);
    if (rc != 0 && rc != 256) {
        fprintf(stderr, "bench_golden_cache: `%s` failed (%d)\n", cmd, rc);
        exit(1);
    }
    return now() - t0;
}

/* The first line of a file that starts with prefix, after it ("" if none). */
static void line_of(const char *path, const char *prefix, char *out, size_t n)
{
    out[0] = 0;
    FILE *f = fopen(path, "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, prefix, strlen(prefix))) {
            snprintf(out, n, "%.*s", (int)(n - 1), line + strlen(prefix));
            out[strcspn(out, "(\n")] = 0; /* the verdict, not the timings after it */
            break;
        }
    if (f) fclose(f);
}

/* Seconds of the profile stage a run's verdict line reports. */
static double profile_s(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    double s = -1;
    while (f && fgets(line, sizeof line, f)) {
        char *p = strstr(line, "; profile ");
        if (!strncmp(line, "verdict:", 8) && p) s = atof(p + 10);
    }
    if (f) fclose(f);
    return s;
}

static const char *kernels[] = {"gemm_new",   "gemm_bf16",   "gemm_fp16",
                                "gemm_plain", "gemm_golden", "example_gemm_rev"};
enum { NK = sizeof kernels / sizeof kernels[0] };

int main(int argc, char **argv)
{
    const char *peat = argc > 1 ? argv[1] : "build/peat";
    const char *flow = argc > 2 ? argv[2] : "gpt";
    const char *size = argc > 3 ? argv[3] : "small";
    const char *part = argc > 4 ? argv[4] : "all";
    int do_suite = strcmp(part, "base") != 0, do_base = strcmp(part, "suite") != 0;
    char plugin[PATH_MAX], cmd[8192], a[600], b[600];
    snprintf(plugin, sizeof plugin, "%s", peat);
    char *slash = strrchr(plugin, '/');
    snprintf(slash ? slash + 1 : plugin, sizeof plugin - (slash ? (size_t)(slash + 1 - plugin) : 0),
             "libpeat_example_gemm.so");
    snprintf(dir, sizeof dir, "/tmp/peat-bench-gcache-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    char abs_plugin[PATH_MAX];
    /* the suite file names its plugin relative to its own folder: an absolute path */
    int have_plugin = realpath(plugin, abs_plugin) != NULL;
    if (have_plugin) snprintf(plugin, sizeof plugin, "%s", abs_plugin);
    int nk = have_plugin ? NK : NK - 1;

    double t_suite = 0, t_alone = 0, t_cold = 0, t_warm = 0, t_base_alone = 0, golden_s = 0;
    int same = 1, base_same = 1;
    if (do_suite) {
        /* the suite, with the golden cache (empty at its start) */
        snprintf(cmd, sizeof cmd, "%s/suite.ini", dir);
        FILE *f = fopen(cmd, "w");
        if (!f) return 1;
        fprintf(f, "[suite]\nname = gcache\nflows = %s\nsize = %s\nseed = 1\n", flow, size);
        if (have_plugin) fprintf(f, "plugin = %s\n", plugin);
        for (int i = 0; i < nk; i++) fprintf(f, "kernels = %s\n", kernels[i]);
        fclose(f);
        snprintf(cmd, sizeof cmd,
                 "PEAT_CACHE_DIR=%s/cache %s ci %s/suite.ini --out %s/suite --quiet", dir, peat,
                 dir, dir);
        t_suite = timed(cmd);

        /* the same campaigns, each on its own, without the cache */
        for (int i = 0; i < nk; i++) {
            snprintf(cmd, sizeof cmd,
                     "PEAT_GOLDEN_CACHE=off %s run --kernel %s --flow %s --size %s --seed 1 %s%s "
                     "--out %s/alone-%d > %s/alone-%d.txt",
                     peat, kernels[i], flow, size, have_plugin ? "--plugin " : "",
                     have_plugin ? plugin : "", dir, i, dir, i);
            t_alone += timed(cmd);
            snprintf(a, sizeof a, "%s/alone-%d.txt", dir, i);
            char va[256], vb[256];
            line_of(a, "verdict: ", va, sizeof va);
            snprintf(b, sizeof b, "%s/suite/items/%s-%s-cpu.log", dir, kernels[i], flow);
            line_of(b, "verdict: ", vb, sizeof vb);
            if (strcmp(va, vb)) {
                same = 0;
                fprintf(stderr, "%s: alone '%s', in the suite '%s'\n", kernels[i], va, vb);
            }
        }
    }
    if (do_base) {
        /* base size: the first run trains the golden work and stores it, the second reuses it */
        snprintf(cmd, sizeof cmd,
                 "PEAT_CACHE_DIR=%s/cache %s run --kernel gemm_new --flow gpt --size base "
                 "--out %s/base-cold > %s/base-cold.txt",
                 dir, peat, dir, dir);
        t_cold = timed(cmd);
        snprintf(cmd, sizeof cmd,
                 "PEAT_CACHE_DIR=%s/cache %s run --kernel gemm_plain --flow gpt --size base "
                 "--out %s/base-warm > %s/base-warm.txt",
                 dir, peat, dir, dir);
        t_warm = timed(cmd);
        snprintf(cmd, sizeof cmd,
                 "PEAT_GOLDEN_CACHE=off %s run --kernel gemm_plain --flow gpt --size base "
                 "--out %s/base-alone > %s/base-alone.txt",
                 peat, dir, dir);
        t_base_alone = timed(cmd);
        snprintf(a, sizeof a, "%s/base-cold.txt", dir);
        golden_s = profile_s(a);
        char vw[256], vo[256];
        snprintf(a, sizeof a, "%s/base-warm.txt", dir);
        line_of(a, "verdict: ", vw, sizeof vw);
        snprintf(b, sizeof b, "%s/base-alone.txt", dir);
        line_of(b, "verdict: ", vo, sizeof vo);
        base_same = !strcmp(vw, vo);
    }
    printf("golden cache (%s; %d GEMM kernels on %s, size %s; 2 cores)\n\n", peat, nk, flow, size);
    printf("%-58s %9s %9s\n", "what", "seconds", "ratio");
    if (do_suite) printf("%-58s %9.1f %9s\n", "N independent campaigns, no cache", t_alone, "1.00");
    if (do_suite)
        printf("%-58s %9.1f %9.2f\n%-58s %9s\n",
               "peat ci suite of the same N, golden cache (empty at start)", t_suite,
               t_suite / t_alone, "  verdicts identical", same ? "yes" : "NO");
    if (!do_base) goto done;
    printf("%-58s %9.1f %9s\n", "golden training (profile of the cold gpt base run)", golden_s,
           "1.00");
    printf("%-58s %9.1f %9.2f\n", "gpt base gemm_new, cold (trains and stores)", t_cold,
           t_cold / golden_s);
    printf("%-58s %9.1f %9.2f\n", "gpt base gemm_plain, warm (golden work from the cache)", t_warm,
           t_warm / golden_s);
    printf("%-58s %9.1f %9.2f\n", "gpt base gemm_plain, no cache", t_base_alone,
           t_base_alone / golden_s);
    printf("%-58s %9s\n", "  verdicts identical (warm vs no cache)", base_same ? "yes" : "NO");
done:
    snprintf(cmd, sizeof cmd, "du -sh %s/cache/golden | cut -f1", dir);
    printf("cache size after the bench: ");
    fflush(stdout);
    if (system(cmd) != 0) printf("?\n");
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "bench_golden_cache: could not remove %s\n", dir);
    return same && base_same ? 0 : 1;
}
