/* bench_ranks.c: items per second of scale-out on this machine, 1 rank against 2 (mpirun -n 2):
 * playback FI trials (`peat inject`, one thread per rank), suite items (`peat ci`: whole
 * campaigns, each its profile, playback, probes and runtime-FI runs) and the runtime-FI runs of
 * one `peat run` (split across the ranks; the rest of the campaign stays on rank 0), with the
 * ratio, in one run.
 * Wall clock of the whole command (start-up, merge and reports included). Needs a build with MPI
 * (PEAT_MPI) and mpirun on PATH or at the configured path. */
#define _DEFAULT_SOURCE
#include "core/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#ifndef PEAT_BENCH_MPIRUN
#define PEAT_BENCH_MPIRUN "mpirun"
#endif

static char dir[256];

static double now(void)
{
    return peat_clock_now();
}

/* CPU seconds of every finished child (the commands, the ranks mpirun started) so far. */
static double children_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

static double last_cpu; /* CPU seconds of the last timed command */

/* Runs a shell command; its wall seconds (exits on failure). */
static double timed(const char *cmd)
{
    double c0 = children_cpu();
    double t0 = now();
    int rc = system(cmd);
    double t = now() - t0;
    last_cpu = children_cpu() - c0;
    if (rc != 0 && rc != 256) { /* peat ci exits 1 for a failing item: still a result */
        fprintf(stderr, "bench_ranks: `%s` failed (%d)\n", cmd, rc);
        exit(1);
    }
    return t;
}

static const char *mpi_env = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1";

/* FI trials per second with ranks 1 (no mpirun) or 2, on a fresh copy of the campaign. */
static double fi_rate(const char *peat, int ranks, int trials, int local_only)
{
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "rm -rf %s/fi && cp -r %s/c %s/fi", dir, dir, dir);
    timed(cmd);
    char launch[400] = "";
    if (ranks > 1)
        snprintf(launch, sizeof launch, "%s %s -n %d", mpi_env, PEAT_BENCH_MPIRUN, ranks);
    snprintf(cmd, sizeof cmd,
             "%s %s inject --campaign %s/fi --model 'bitflip(bit=-1)' --trials %d --threads 1 "
             "--quiet %s >/dev/null",
             launch, peat, dir, trials, local_only ? "--local-only" : "");
    double r = trials / timed(cmd);
    last_cpu /= trials;
    return r;
}

static double suite_rate(const char *peat, int ranks, int items)
{
    char cmd[2000];
    char launch[400] = "";
    if (ranks > 1)
        snprintf(launch, sizeof launch, "%s %s -n %d", mpi_env, PEAT_BENCH_MPIRUN, ranks);
    snprintf(cmd, sizeof cmd,
             "rm -rf %s/s%d && %s %s ci %s/b.suite --out %s/s%d --quiet >/dev/null", dir, ranks,
             launch, peat, dir, dir, ranks);
    double r = items / timed(cmd);
    last_cpu /= items;
    return r;
}

static double runtime_s; /* the last `peat run`'s runtime FI stage, as its verdict line says */

/* A stage's seconds in a campaign's signature.json ("timing_s": {..., "playback": 0.251, ...}). */
static double stage_s(const char *json, const char *stage)
{
    char line[4096], key[64];
    snprintf(key, sizeof key, "\"%s\": ", stage);
    double v = 0;
    FILE *f = fopen(json, "r");
    while (f && fgets(line, sizeof line, f)) {
        const char *t = strstr(line, "\"timing_s\"");
        const char *k = t ? strstr(t, key) : NULL;
        if (k) v = atof(k + strlen(key));
    }
    if (f) fclose(f);
    return v;
}

/* The playback and probe stages of one `peat run --no-runtime` with ranks 1 or 2: their seconds
 * (as the campaign records them) into *play, *probe; the whole command's wall seconds back. */
/* Probes in a signature.json (one {"probe": ...} object a line). */
static int probes_of(const char *json)
{
    char line[4096];
    int n = 0;
    FILE *f = fopen(json, "r");
    while (f && fgets(line, sizeof line, f)) n += strstr(line, "{\"probe\": ") != NULL;
    if (f) fclose(f);
    return n;
}

static int n_probes; /* of the last items_run */

static double items_run(const char *peat, int ranks, const char *args, double *play, double *probe)
{
    char cmd[2000], js[400];
    char launch[400] = "";
    if (ranks > 1)
        snprintf(launch, sizeof launch, "%s %s -n %d", mpi_env, PEAT_BENCH_MPIRUN, ranks);
    snprintf(cmd, sizeof cmd, "rm -rf %s/p%d && %s %s run %s --out %s/p%d >/dev/null", dir, ranks,
             launch, peat, args, dir, ranks);
    double t = timed(cmd);
    snprintf(js, sizeof js, "%s/p%d/signature.json", dir, ranks);
    *play = stage_s(js, "playback");
    *probe = stage_s(js, "probes");
    n_probes = probes_of(js);
    return t;
}

/* Runtime-FI runs (beside the golden one) per second of one `peat run` with ranks 1 or 2: the
 * whole command's wall clock; runtime_s gets the runtime stage's. */
static double run_rate(const char *peat, int ranks, int runs, const char *args)
{
    char cmd[2000], out[300], line[4096];
    char launch[400] = "";
    if (ranks > 1)
        snprintf(launch, sizeof launch, "%s %s -n %d", mpi_env, PEAT_BENCH_MPIRUN, ranks);
    snprintf(out, sizeof out, "%s/run%d.log", dir, ranks);
    snprintf(cmd, sizeof cmd, "rm -rf %s/r%d && %s %s run %s --out %s/r%d >%s", dir, ranks, launch,
             peat, args, dir, ranks, out);
    double t = timed(cmd);
    last_cpu /= runs;
    runtime_s = 0;
    FILE *f = fopen(out, "r");
    while (f && fgets(line, sizeof line, f)) {
        const char *v = strstr(line, "runtime FI ");
        if (!strncmp(line, "verdict:", 8) && v) runtime_s = atof(v + 11);
    }
    if (f) fclose(f);
    return runs / t;
}

int main(int argc, char **argv)
{
    const char *peat = argc > 1 ? argv[1] : "build/peat";
    int trials = argc > 2 ? atoi(argv[2]) : 40000;
    snprintf(dir, sizeof dir, "/tmp/peat-bench-ranks-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "%s run --kernel gemm_new --iters 40 --calls 32 --seed 7 --no-runtime --no-probes "
             "--quiet --out %s/c >/dev/null",
             peat, dir);
    timed(cmd);
    snprintf(cmd, sizeof cmd,
             "printf '[suite]\\nname = bench\\nkernels = gemm_new, gemm_bf16, softmax_online, "
             "layernorm_welford\\nflows = auto\\nbackends = cpu\\niters = 20\\ncalls = 16\\n"
             "seed = 1\\n' > %s/b.suite",
             dir);
    timed(cmd);
    printf("scale-out on this machine (%ld online CPUs), wall clock of the whole command\n\n",
           sysconf(_SC_NPROCESSORS_ONLN));
    double load[1] = {0};
    getloadavg(load, 1);
    printf("load average %.1f when it started; CPU: the commands' user + system seconds\n\n",
           load[0]);
    printf("| items | count | 1 rank items/s | 2 ranks items/s | 2 ranks / 1 | CPU ms an item, 1 "
           "rank | 2 ranks |\n|---|---:|---:|---:|---:|---:|---:|\n");
    snprintf(cmd, sizeof cmd, "%s %s -n 2 true", mpi_env, PEAT_BENCH_MPIRUN);
    double launch = timed(cmd);
    double a = fi_rate(peat, 1, trials, 1), ca = last_cpu, b = fi_rate(peat, 2, trials, 1);
    printf("| FI trials, local view | %d | %.0f | %.0f | %.2fx | %.3f | %.3f |\n", trials, a, b,
           b / a, 1e3 * ca, 1e3 * last_cpu);
    int tp = trials / 4;
    a = fi_rate(peat, 1, tp, 0), ca = last_cpu, b = fi_rate(peat, 2, tp, 0);
    printf("| FI trials, propagated | %d | %.0f | %.0f | %.2fx | %.3f | %.3f |\n", tp, a, b, b / a,
           1e3 * ca, 1e3 * last_cpu);
    a = suite_rate(peat, 1, 4), ca = last_cpu, b = suite_rate(peat, 2, 4);
    printf("| suite items (campaigns: playback, probes, runtime-FI runs) | 4 | %.2f | %.2f | "
           "%.2fx | %.0f | %.0f |\n",
           a, b, b / a, 1e3 * ca, 1e3 * last_cpu);
    /* 5 band reruns and 4 frequencies: 9 runs beside the golden one (rank 0 trains 4, rank 1 5) */
    const char *rargs = "--kernel gemm_new --flow mlp --iters 200 --calls 32 --seed 7 --no-probes "
                        "--runtime-band 6 --runtime-freq 1,1/2,1/4,1/10";
    a = run_rate(peat, 1, 9, rargs), ca = last_cpu;
    double ra = runtime_s, ta = 9 / a;
    b = run_rate(peat, 2, 9, rargs);
    double rb = runtime_s, tb = 9 / b;
    printf("| runtime-FI runs of one `peat run` (whole command) | 9 | %.2f | %.2f | %.2fx | %.0f | "
           "%.0f |\n",
           a, b, b / a, 1e3 * ca, 1e3 * last_cpu);
    printf("| the same, runtime FI stage alone | 9 | %.2f | %.2f | %.2fx | | |\n", 9 / ra, 9 / rb,
           ra / rb);
    /* playback and probes of one campaign: 96 recorded calls of gpt (each replayed through the
     * candidate, isolated, its exact outputs and magnitudes; the first 8 twice) and its probes */
    const char *pargs = "--kernel gemm_new --flow gpt --iters 8 --calls 96 --seed 7 --no-runtime "
                        "--quiet";
    double pa, qa, pb, qb;
    double wa = items_run(peat, 1, pargs, &pa, &qa), wb = items_run(peat, 2, pargs, &pb, &qb);
    printf("| recorded calls replayed (playback stage of one `peat run`) | 96 | %.0f | %.0f | "
           "%.2fx | | |\n",
           96 / pa, 96 / pb, pa / pb);
    printf("| probes (probe stage of the same run) | %d | %.0f | %.0f | %.2fx | | |\n", n_probes,
           n_probes / qa, n_probes / qb, qa / qb);
    printf("\n(`peat run --no-runtime` of those: %.2f s at 1 rank, %.2f s at 2 ranks)\n", wa, wb);
    printf(
        "\n(mpirun -n 2 alone: %.2f s of every 2-rank row; the merge rewrites every trial row on "
        "rank 0)\n",
        launch);
    printf("`peat run`: %.2f s at 1 rank, of which runtime FI %.2f s: serial part (start-up, "
           "profile, playback, analysis, commit, report, on rank 0 alone) %.2f s = %.0f%%; at 2 "
           "ranks %.2f s, runtime FI %.2f s\n",
           ta, ra, ta - ra, 100 * (ta - ra) / ta, tb, rb);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 1;
}
