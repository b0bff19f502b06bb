/* bench_scale.c: what a campaign costs at each size preset (tiny, small, base) on gpt, cnn and
 * mlp, stage by stage, before (the plain golden GEMM) and after (OpenBLAS), side by side (and with
 * --retrain the band's golden run trained again instead of replayed); and
 * the activation ranges and GEMM shapes each preset trains with (docs/flows.md). */
#define _DEFAULT_SOURCE /* wait4 (a child's own peak RSS) and getloadavg */
#include "detector/detector.h"
#include "golden/golden.h"
#include "harness/campaign/campaign.h"
#include "harness/runtime/builtin.h"
#include "models/models.h"
#include "harness/run/run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* What one campaign child reports through its pipe. */
typedef struct row {
    int ok, verdict;
    double wall, profile, playback, probe, runtime, analysis;
    double cpu_profile, cpu_runtime;
    char blas[96];
} row;

/* The rows of a preset: after (this tree), before (the plain golden, a fork per call), retrain
 * (this tree with the band's golden run trained again instead of replayed from the profile). */
enum { AFTER, BEFORE, RETRAIN };
static const char *const mode_name[] = {"after", "before", "retrain"};

static void child_run(const char *kernel, const char *flow, const char *size, int mode,
                      int64_t iters, const char *out, int fd)
{
    if (mode == BEFORE) { /* the plain golden GEMM, a fork per isolated call */
        setenv("PEAT_BLAS", "0", 1);
        setenv("PEAT_ISOLATE", "fork", 1);
    }
    if (mode == RETRAIN) setenv("PEAT_NO_GOLDEN_LOG", "1", 1);
    row r;
    memset(&r, 0, sizeof r);
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    o.kernel = kernel, o.flow = flow, o.size = size, o.out_dir = out, o.force = 1, o.quiet = 1;
    o.iters = iters;
    peat_campaign_result *res = calloc(1, sizeof *res);
    if (res && peat_runtime_builtin_init() == PEAT_OK && peat_run_campaign(&o, res) == PEAT_OK) {
        r.ok = 1, r.verdict = (int)res->verdict;
        r.wall = res->t_total, r.profile = res->t_profile, r.playback = res->t_playback;
        r.probe = res->t_probe, r.runtime = res->t_runtime;
        /* the analyzer's pass over every element (in playback) and the two signatures */
        r.analysis = res->t_analyzer + res->t_signatures;
        r.cpu_profile = res->cpu_profile, r.cpu_runtime = res->cpu_runtime;
        snprintf(r.blas, sizeof r.blas, "%s", res->blas);
    } else {
        fprintf(stderr, "bench_scale: %s %s %s: %s\n", flow, size, kernel, peat_error_last());
    }
    if (write(fd, &r, sizeof r) != (ssize_t)sizeof r) _exit(2);
    _exit(0);
}

/* Runs one campaign in a child (its own peak RSS, its own choice of golden) and prints its row. */
static void one(const char *kernel, const char *flow, const char *size, int mode, int64_t iters)
{
    char out[256];
    snprintf(out, sizeof out, "bench-scale-out/%s-%s-%s", flow, size, mode_name[mode]);
    int fd[2];
    if (pipe(fd) != 0) return;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        child_run(kernel, flow, size, mode, iters, out, fd[1]);
    }
    close(fd[1]);
    row r;
    memset(&r, 0, sizeof r);
    ssize_t got = pid > 0 ? read(fd[0], &r, sizeof r) : -1;
    close(fd[0]);
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    int status = 0;
    if (pid > 0) wait4(pid, &status, 0, &ru);
    char h5[300];
    snprintf(h5, sizeof h5, "%s/campaign.h5", out);
    struct stat st;
    double mb = stat(h5, &st) == 0 ? (double)st.st_size / 1048576.0 : NAN;
    if (got != (ssize_t)sizeof r || !r.ok) {
        printf("%-4s %-5s %-7s  failed\n", flow, size, mode_name[mode]);
        return;
    }
    double tot = r.wall > 0 ? r.wall : 1;
    double cpu = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                 (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    printf("%-4s %-5s %-7s%7.1f %7.1f %7.1f %6.1f %7.1f %5.2f %5.2f %7.1f %6.0f  "
           "%3.0f/%3.0f/%3.0f/%3.0f "
           "%5.1f%% %7.1f  %s\n",
           flow, size, mode_name[mode], r.wall, r.profile, r.playback, r.probe, r.runtime,
           r.runtime / (r.profile > 0 ? r.profile : 1),
           r.cpu_runtime / (r.cpu_profile > 0 ? r.cpu_profile : 1), mb,
           (double)ru.ru_maxrss / 1024.0, 100 * r.profile / tot, 100 * r.playback / tot,
           100 * r.probe / tot, 100 * r.runtime / tot, 100 * r.analysis / tot, cpu,
           peat_detector_acceptance_name((peat_acceptance)r.verdict));
}

/* ---- activation ranges and GEMM shapes of a preset's training ---- */

typedef struct ranges {
    double fwd_max, bwd_max, logit_max;
    int64_t bwd_n, bwd_sub16; /* backward GEMM outputs, those 0 < |x| < fp16's smallest normal */
    char shapes[2048];
    int n_shapes;
} ranges;

static peat_status range_hook(void *user, const peat_kernel *k, const peat_args *a,
                              const peat_call_info *info, int after)
{
    ranges *g = user;
    if (!after || a->op != PEAT_OP_GEMM) return PEAT_OK;
    const float *y = peat_f32(a->out[0]);
    int64_t n = peat_tensor_numel(a->out[0]);
    int bwd = info->phase == PEAT_PHASE_BWD, head = info->layer && !strcmp(info->layer, "head");
    for (int64_t i = 0; i < n; i++) {
        double v = fabs((double)y[i]);
        if (bwd) {
            g->bwd_max = v > g->bwd_max ? v : g->bwd_max;
            g->bwd_n++;
            g->bwd_sub16 += v > 0 && v < 0x1p-14;
        } else {
            g->fwd_max = v > g->fwd_max ? v : g->fwd_max;
            if (head) g->logit_max = v > g->logit_max ? v : g->logit_max;
        }
    }
    char s[64];
    snprintf(s, sizeof s, " %lldx%lldx%lld", (long long)a->p.i[2], (long long)a->p.i[3],
             (long long)a->p.i[4]);
    if (!bwd && !strstr(g->shapes, s) && strlen(g->shapes) + strlen(s) < sizeof g->shapes) {
        strcat(g->shapes, s);
        g->n_shapes++;
    }
    return PEAT_OK;
}

static void ranges_of(const char *flow, int size, int steps)
{
    peat_flow_config c;
    memset(&c, 0, sizeof c);
    c.seed = 1, c.weight_decay = -1, c.size = size;
    peat_exec_t *ex = NULL;
    peat_flow_t *f = NULL;
    ranges g;
    memset(&g, 0, sizeof g);
    if (peat_exec_alloc(flow, 1, &ex) != PEAT_OK ||
        peat_models_flow_alloc(flow, &c, ex, &f) != PEAT_OK ||
        peat_exec_add_hook(ex, range_hook, &g) != PEAT_OK) {
        printf("%-4s %-5s failed: %s\n", flow, peat_models_flow_size_name(size), peat_error_last());
        peat_models_flow_free(f), peat_exec_free(ex);
        return;
    }
    peat_flow_metrics m;
    for (int s = 0; s < steps; s++)
        if (peat_models_flow_step(f, &m) != PEAT_OK) break;
    char logit[16] = "-"; /* mlp's logits are its last layer's GEMM ("fc3"), in fwd max */
    if (g.logit_max > 0) snprintf(logit, sizeof logit, "%.3g", g.logit_max);
    printf("%-4s %-5s %10.3g %10s %10.3g %9.2f%%  (M x N x K forward:%s)\n", flow,
           peat_models_flow_size_name(size), g.fwd_max, logit, g.bwd_max,
           g.bwd_n ? 100.0 * (double)g.bwd_sub16 / (double)g.bwd_n : 0.0, g.shapes);
    peat_models_flow_free(f);
    peat_exec_free(ex);
}

static int listed(const char *list, const char *name)
{
    char buf[128];
    snprintf(buf, sizeof buf, ",%s,", list);
    char want[40];
    snprintf(want, sizeof want, ",%s,", name);
    return strstr(buf, want) != NULL;
}

int main(int argc, char **argv)
{
    const char *flows = "gpt,cnn,mlp", *sizes = "tiny,small,base", *kernel = "gemm_new";
    int before = 1, retrain = 0, ranges_only = 0;
    int64_t iters = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--flows") && i + 1 < argc)
            flows = argv[++i];
        else if (!strcmp(argv[i], "--sizes") && i + 1 < argc)
            sizes = argv[++i];
        else if (!strcmp(argv[i], "--kernel") && i + 1 < argc)
            kernel = argv[++i];
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--no-before"))
            before = 0;
        else if (!strcmp(argv[i], "--retrain"))
            retrain = 1;
        else if (!strcmp(argv[i], "--ranges"))
            ranges_only = 1;
        else {
            fprintf(stderr, "usage: bench_scale [--flows gpt,cnn,mlp] [--sizes tiny,small,base] "
                            "[--kernel K] [--iters N] [--no-before] [--retrain] [--ranges]\n");
            return 2;
        }
    }
    static const char *const fl[] = {"gpt", "cnn", "mlp"};
    static const char *const sz[] = {"tiny", "small", "base"};
    double load[3] = {0, 0, 0};
    getloadavg(load, 3);
    printf("# bench_scale: %ld online CPUs, load average %.1f %.1f %.1f at the start\n",
           sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2]);
    if (ranges_only) {
        if (peat_runtime_builtin_init() != PEAT_OK) return 1;
        printf("# activation ranges over 20 golden training steps: largest |forward GEMM output|, "
               "|logit|, |backward GEMM output|, share of backward outputs below fp16's normal "
               "range (2^-14)\nflow size   fwd max   logit max    bwd max  bwd<2^-14\n");
        for (int f = 0; f < 3; f++)
            for (int s = 0; s < 3; s++)
                if (listed(flows, fl[f]) && listed(sizes, sz[s])) ranges_of(fl[f], s, 20);
        return 0;
    }
    printf("# peat run --kernel %s --flow F --size S (seconds of wall time; rt/prof: runtime FI "
           "over profile, wall and CPU; shares: profile/playback/probes/runtime %% of the run; "
           "analysis: the analyzer's pass and signatures, %% of the run; CPU s: the run's user + "
           "system seconds, children included)\n",
           kernel);
    printf("flow size  golden    wall profile playbk probes runtime rt/pw rt/pc  h5 MB  RSS MB  "
           "shares %%        analysis  CPU s  verdict\n");
    for (int f = 0; f < 3; f++)
        for (int s = 0; s < 3; s++) {
            if (!listed(flows, fl[f]) || !listed(sizes, sz[s])) continue;
            if (before) one(kernel, fl[f], sz[s], BEFORE, iters);
            if (retrain) one(kernel, fl[f], sz[s], RETRAIN, iters);
            one(kernel, fl[f], sz[s], AFTER, iters);
        }
    printf("# before: the plain golden GEMM (PEAT_BLAS=0), a fork per isolated call "
           "(PEAT_ISOLATE=fork); after: %s, the persistent isolated worker, the band's golden "
           "run replayed from the profile; retrain (--retrain): after, but the golden run trained "
           "again (PEAT_NO_GOLDEN_LOG=1); all without checkpoints\n",
           "OpenBLAS sgemm on one thread (golden/gemm_blas.c)");
    return 0;
}
