/* bench_analyzer.c: analyzer throughput against memcpy (1 core, all cores), and where a default
 * campaign's time goes, stage by stage, for every flow (tables). */
#include "analyzer/analyzer.h"
#include "core/clock.h"
#include "harness/run/run.h"
#include "harness/campaign/campaign.h"
#include "harness/runtime/builtin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One-core figures are timed in the thread's own CPU time, so that other processes on a shared
 * machine do not count; all-core figures need the wall clock. */
static int thread_cpu_timer;
static double now(void)
{
    return thread_cpu_timer ? peat_clock_thread_cpu() : peat_clock_now();
}

static int fail(const char *what)
{
    fprintf(stderr, "bench_analyzer: %s: %s\n", what, peat_error_last());
    return 1;
}

/* One triple as the playback stage holds it: candidate and golden fp32, exact fp64. */
typedef struct triple {
    peat_tensor *cand, *gold, *exact;
    int64_t n;
} triple;

/* Exact values spread over a few octaves with both signs; the candidate and golden differ from
 * them by a few fp32 roundings (the golden by one, the candidate by a relative 2^-22 more). */
static int triple_make(int64_t n, triple *t)
{
    t->n = n;
    if (peat_tensor_alloc1(PEAT_DTYPE_F32, n, &t->cand) ||
        peat_tensor_alloc1(PEAT_DTYPE_F32, n, &t->gold) ||
        peat_tensor_alloc1(PEAT_DTYPE_F64, n, &t->exact))
        return fail("alloc");
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(s >> 11) * 0x1p-53, v = (double)((s >> 3) & 0xff) / 256.0;
        double x = (u - 0.5) * 16.0;
        peat_f64(t->exact)[i] = x;
        peat_f32(t->gold)[i] = (float)x;
        peat_f32(t->cand)[i] = (float)(x * (1.0 + (v - 0.5) * 0x1p-21));
    }
    return 0;
}

static void triple_free(triple *t)
{
    peat_tensor_free(t->cand), peat_tensor_free(t->gold), peat_tensor_free(t->exact);
}

/* Seconds for one memcpy of the triple's bytes (best of reps). */
static double time_memcpy(const triple *t, void *dst, int reps)
{
    size_t n4 = (size_t)t->n * 4, n8 = (size_t)t->n * 8;
    double best = 1e30;
    memset(dst, 1, n4 + n4 + n8); /* fault the pages in first */
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        memcpy(dst, t->cand->data, n4);
        memcpy((char *)dst + n4, t->gold->data, n4);
        memcpy((char *)dst + 2 * n4, t->exact->data, n8);
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    return best;
}

/* The triple into both accumulators: one pass for the pair (as playback does), or two adds. */
static int add_triple(peat_analyzer_acc_t *c, peat_analyzer_acc_t *g, const triple *t, int pair)
{
    if (pair)
        return peat_analyzer_acc_add_pair(c, t->cand, g, t->gold, t->exact, NULL, 64, 64, 1, t->n,
                                          NULL) != PEAT_OK;
    return peat_analyzer_acc_add_terms(c, t->cand, t->exact, NULL, 64, 64, 1, t->n, NULL) ||
           peat_analyzer_acc_add_terms(g, t->gold, t->exact, NULL, 64, 64, 1, t->n, NULL);
}

/* Adds the triple to both accumulators until each holds at least 2^21 elements (16 times the
 * sample's size), as in a campaign well under way: the sample is full and its threshold low. */
static int warm_up(peat_analyzer_acc_t *c, peat_analyzer_acc_t *g, const triple *t)
{
    for (int64_t done = 0; done < ((int64_t)1 << 21); done += t->n)
        if (add_triple(c, g, t, 1)) return fail("add");
    return 0;
}

/* Seconds for the analyzer's pass over the triple (candidate and golden against exact; best of
 * reps): into fresh accumulators each time (warm = 0), or reps more adds into one pair of
 * accumulators warmed up to 2^21 elements; and the seconds of the two signatures at the end. */
static int time_analyzer(const triple *t, int threads, int reps, int warm, int pair, double *pass,
                         double *sig)
{
    *pass = 1e30;
    peat_analyzer_acc_t *c = NULL, *g = NULL;
    for (int r = 0; r < reps; r++) {
        if (!c) {
            c = peat_analyzer_acc_new("cand", PEAT_OP_GEMM);
            g = peat_analyzer_acc_new("gold", PEAT_OP_GEMM);
            if (!c || !g) return fail("acc");
            peat_analyzer_acc_set_threads(c, threads);
            peat_analyzer_acc_set_threads(g, threads);
            if (warm && warm_up(c, g, t)) return 1;
        }
        double t0 = now();
        if (add_triple(c, g, t, pair)) return fail("add");
        double dt = now() - t0;
        *pass = dt < *pass ? dt : *pass;
        if (r < reps - 1 && warm) continue;
        peat_signature sc, sg;
        t0 = now();
        if (r == reps - 1 && peat_analyzer_signature_pair(c, &sc, g, &sg)) return fail("signature");
        *sig = now() - t0;
        peat_analyzer_acc_free(c);
        peat_analyzer_acc_free(g);
        c = g = NULL;
    }
    return 0;
}

static const char *human(int64_t bytes, char *buf, size_t n)
{
    if (bytes >= 1 << 20)
        snprintf(buf, n, "%lld MiB", (long long)(bytes >> 20));
    else
        snprintf(buf, n, "%lld KiB", (long long)(bytes >> 10));
    return buf;
}

static int throughput_table(int64_t max_bytes, int cores)
{
    printf(
        "## analyzer pass vs memcpy of the same bytes (fp32 candidate + fp32 golden + fp64 exact "
        "= 16 B/element; mag = |exact|, depth 64)\n\n");
    printf("(1 core: thread CPU time, best of several runs; %d cores: wall time, against a memcpy "
           "timed the same way; fresh: into new accumulators; warm: into accumulators that "
           "already hold 2^21 elements, as in a campaign under way; pair: candidate and golden in "
           "one pass "
           "(peat_analyzer_acc_add_pair, as playback does); two adds: one add each; signatures: "
           "wall ms of the last run's pair (peat_analyzer_signature_pair, as the analyze stage), "
           "%d cores)\n\n",
           cores, cores);
    printf("| triple bytes | elements | memcpy GB/s | 1 core GB/s (fresh, pair) | ratio | 1 core "
           "GB/s (warm, pair) | ratio | 1 core GB/s (warm, two adds) | ratio | %d cores GB/s "
           "(warm, pair) | ratio | signatures ms |\n",
           cores);
    printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int64_t bytes = 4096; bytes <= max_bytes; bytes *= 16) {
        triple t;
        int64_t n = bytes / 16;
        if (triple_make(n, &t)) return 1;
        void *dst = malloc((size_t)bytes);
        if (!dst) return fail("memcpy buffer");
        /* repeat small sizes so each figure is the best of many short runs */
        int reps = bytes <= (1 << 20) ? 30 : bytes <= (16 << 20) ? 5 : 2;
        double t1, t1w, t1s, tn, sig1, sign;
        thread_cpu_timer = 1;
        double tm = time_memcpy(&t, dst, reps * 4);
        if (time_analyzer(&t, 1, reps, 0, 1, &t1, &sig1) ||
            time_analyzer(&t, 1, reps, 1, 1, &t1w, &sig1) ||
            time_analyzer(&t, 1, reps, 1, 0, &t1s, &sig1))
            return 1;
        thread_cpu_timer = 0;
        double tmw = time_memcpy(&t, dst, reps * 4);
        if (time_analyzer(&t, 0, reps, 1, 1, &tn, &sign)) return 1;
        char hb[32];
        printf("| %s | %lld | %.2f | %.2f | %.3f | %.2f | %.3f | %.2f | %.3f | %.2f | %.3f | %.1f "
               "|\n",
               human(bytes, hb, sizeof hb), (long long)n, bytes / tm * 1e-9, bytes / t1 * 1e-9,
               tm / t1, bytes / t1w * 1e-9, tm / t1w, bytes / t1s * 1e-9, tm / t1s,
               bytes / tn * 1e-9, tmw / tn, 1e3 * sign);
        fflush(stdout);
        free(dst);
        triple_free(&t);
    }
    return 0;
}

/* Runs of each flow in the stage table: the one with the median analysis share is printed,
 * with the range of the shares beside it (run-to-run spread on a shared VM is large). */
#define STAGE_RUNS 5

/* One default `peat run --kernel gemm_new --flow F --no-runtime` into out; *cpu its CPU seconds
 * (all processes). */
static int stage_run(const char *flow, const char *out, peat_campaign_result *r, double *cpu)
{
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    o.kernel = "gemm_new";
    o.flow = flow;
    o.out_dir = out;
    o.quiet = 1;
    o.force = 1;
    o.no_runtime = 1;
    memset(r, 0, sizeof *r);
    double c0 = peat_campaign_cpu_s();
    if (peat_run_campaign(&o, r) != PEAT_OK) return fail(flow);
    *cpu = peat_campaign_cpu_s() - c0;
    return 0;
}

static double stage_share(const peat_campaign_result *r)
{
    return (r->t_analyzer + r->t_signatures) / r->t_total;
}

/* The default `peat run --kernel gemm_new --flow F --no-runtime` of every flow, stage by stage
 * (the runtime-FI stage trains the model again: its cost is training, not analysis, so issue
 * 14's goals leave it out). */
static int stage_table(void)
{
    static const char *flows[] = {"mlp", "cnn", "gpt", "gpt_unfused"};
    char dir[] = "/tmp/peat-bench-analyzer-XXXXXX";
    if (!mkdtemp(dir)) return fail("mkdtemp");
    printf("\n## default `peat run --kernel gemm_new --flow F --no-runtime`: seconds per stage "
           "(share of the run); the run with the median analysis share of %d, and the range of "
           "the %d shares\n\n",
           STAGE_RUNS, STAGE_RUNS);
    printf("| flow | CPU s (all processes) | wall s | profile | playback: candidate (isolated) | "
           "playback: exact + magnitude | playback: analyzer pass | probes | signatures | detect + "
           "commit | analysis (pass + signatures) | analysis share, %d runs |\n",
           STAGE_RUNS);
    printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t f = 0; f < sizeof flows / sizeof flows[0]; f++) {
        char out[600];
        snprintf(out, sizeof out, "%s/%s", dir, flows[f]);
        peat_campaign_result runs[STAGE_RUNS];
        double cpus[STAGE_RUNS];
        for (int k = 0; k < STAGE_RUNS; k++)
            if (stage_run(flows[f], out, &runs[k], &cpus[k])) return 1;
        int lo = 0, hi = 0, med = 0;
        for (int k = 1; k < STAGE_RUNS; k++) {
            lo = stage_share(&runs[k]) < stage_share(&runs[lo]) ? k : lo;
            hi = stage_share(&runs[k]) > stage_share(&runs[hi]) ? k : hi;
        }
        for (int k = 0; k < STAGE_RUNS; k++) med = k != lo && k != hi ? k : med;
        const peat_campaign_result *r = &runs[med];
        double tot = r->t_total, cand = r->t_playback - r->t_reference - r->t_analyzer;
#define CELL(x) (x), 100.0 * (x) / tot
        printf("| %s | %.2f | %.2f | %.2f (%.0f%%) | %.2f (%.0f%%) | %.2f (%.0f%%) | %.3f (%.1f%%) "
               "| %.2f (%.0f%%) | %.3f (%.1f%%) | %.3f (%.1f%%) | %.3f (%.1f%%) | %.1f-%.1f%% |\n",
               flows[f], cpus[med], tot, CELL(r->t_profile), CELL(cand), CELL(r->t_reference),
               CELL(r->t_analyzer), CELL(r->t_probe), CELL(r->t_signatures),
               CELL(r->t_analyze - r->t_signatures), CELL(r->t_analyzer + r->t_signatures),
               100.0 * stage_share(&runs[lo]), 100.0 * stage_share(&runs[hi]));
#undef CELL
        fflush(stdout);
    }
    printf("\n(campaign files in %s)\n", dir);
    return 0;
}

int main(int argc, char **argv)
{
    int64_t max_mib = argc > 1 ? atoll(argv[1]) : 256;
    if (max_mib < 1 || max_mib > 4096) {
        fprintf(stderr, "usage: bench_analyzer [MAX_MIB (1..4096, default 256)] [--no-flows]\n");
        return 2;
    }
    if (peat_runtime_builtin_init() != PEAT_OK) return fail("init");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("# bench_analyzer: %ld online cores\n\n", cores);
    if (throughput_table(max_mib << 20, (int)cores)) return 1;
    if (argc > 2 && !strcmp(argv[2], "--no-flows")) return 0;
    return stage_table();
}
