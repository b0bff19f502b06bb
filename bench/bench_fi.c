/* bench_fi.c: fault-injection costs: the idle swap hook against plain training (bit-identical,
 * overhead), playback FI trials per second per op and model with one trial's cost over one
 * golden call of the same records, and the speed-up of trials from 1 to 2 threads. */
#define _DEFAULT_SOURCE
#include "harness/campaign/campaign.h"
#include "core/clock.h"
#include "harness/run/run.h"
#include "harness/fi/fi.h"
#include "harness/runtime/builtin.h"
#include "inject/inject.h"
#include "models/models.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* CPU time of this thread: the machine may be shared, and single-threaded ratios should not
 * depend on what else runs. */
static double cpu_now(void)
{
    return peat_clock_thread_cpu();
}

/* mlp for n iterations, with the swap installed or not; CPU seconds; loss of the last step. */
static double train(int swap, int n, double *loss, uint64_t *hash)
{
    peat_flow_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.seed = 1;
    cfg.weight_decay = -1;
    peat_exec_t *ex;
    peat_flow_t *f;
    if (peat_exec_alloc("mlp", 1, &ex) != PEAT_OK) exit(1);
    peat_exec_swap s = {.op = PEAT_OP_GEMM, .kernel = peat_registry_find("gemm_new"), .every = 0};
    if (swap && peat_exec_set_swap(ex, &s) != PEAT_OK) exit(1);
    if (peat_models_flow_alloc("mlp", &cfg, ex, &f) != PEAT_OK) exit(1);
    double t0 = cpu_now();
    for (int i = 0; i < n; i++) {
        peat_flow_metrics m;
        if (peat_models_flow_step(f, &m) != PEAT_OK) exit(1);
        *loss = m.loss;
    }
    double t = cpu_now() - t0;
    /* FNV-1a over every state tensor: equal hashes = bit-identical training */
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < peat_models_flow_state_count(f); i++) {
        const peat_tensor *w = peat_models_flow_state(f, i, NULL);
        const unsigned char *b = w->data;
        for (size_t k = 0; k < peat_tensor_nbytes(w); k++) h = (h ^ b[k]) * 0x100000001b3ull;
    }
    *hash = h;
    peat_models_flow_free(f);
    peat_exec_free(ex);
    return t;
}

static void bench_idle_hook(void)
{
    const int n = 60, reps = 5;
    double best[2] = {1e30, 1e30}, loss[2];
    uint64_t hash[2];
    for (int r = 0; r < reps; r++) /* alternating, best of reps: side by side in one run */
        for (int s = 0; s < 2; s++) {
            double t = train(s, n, &loss[s], &hash[s]);
            if (t < best[s]) best[s] = t;
        }
    printf("## idle swap hook (mlp, %d iterations, best of %d, thread CPU time)\n\n", n, reps);
    printf("| run | s | ratio | bit-identical |\n|---|---:|---:|---|\n");
    printf("| plain training | %.4f | 1.000 | |\n", best[0]);
    printf("| swap hook installed, frequency 0 | %.4f | %.3f | %s |\n\n", best[1],
           best[1] / best[0], hash[0] == hash[1] && loss[0] == loss[1] ? "yes" : "NO");
}

/* Mean CPU time of the golden kernel over the records of op in the campaign file. */
static double golden_call_time(const char *h5, peat_op_kind op, int64_t *n_rec)
{
    peat_store_t *s;
    if (peat_store_open(h5, 0, &s) != PEAT_OK) exit(1);
    double t = 0;
    int64_t n = 0;
    for (int64_t i = 0; i < peat_store_call_count(s); i++) {
        peat_record *r;
        if (peat_store_call_read(s, i, &r) != PEAT_OK) exit(1);
        if (r->op == op) {
            peat_args a = peat_record_args(r);
            peat_op_alloc_outputs(&a, PEAT_DTYPE_F32);
            const peat_kernel *g = peat_registry_role(op, PEAT_ROLE_GOLDEN, "cpu");
            double t0 = cpu_now();
            for (int k = 0; k < 5; k++) peat_kernel_run(g, &a);
            t += (cpu_now() - t0) / 5;
            n++;
            peat_args_free_outputs(&a);
        }
        peat_record_free(r);
    }
    peat_store_close(s);
    *n_rec = n;
    return n ? t / (double)n : 0;
}

static void copy_campaign(const char *from, const char *to)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", to, from, to);
    if (system(cmd) != 0) exit(1);
}

/* One FI campaign on a fresh copy of the campaign; trials/s (CPU-bound, one thread: the thread's
 * CPU time equals its wall time on an idle core; reported from the run's own clock). */
static peat_fi_result fi_run_opts(const char *base, const char *work, const char *model,
                                  const char *ops, const char *site, int64_t trials, int threads,
                                  const char *layers, int local_only)
{
    copy_campaign(base, work);
    peat_fi_opts o;
    peat_fi_opts_default(&o);
    o.campaign = work;
    o.models = model;
    o.ops = ops;
    o.site = site;
    o.trials = trials;
    o.threads = threads;
    o.quiet = 1;
    o.signature_trials = 1;
    o.layers = layers;
    o.local_only = local_only;
    peat_fi_result r;
    if (peat_fi_run(&o, &r) != PEAT_OK) {
        fprintf(stderr, "bench_fi: %s\n", peat_error_last());
        exit(1);
    }
    return r;
}

/* The local view alone (the op-level cost the tables below measure). */
static peat_fi_result fi_once(const char *base, const char *work, const char *model,
                              const char *ops, const char *site, int64_t trials, int threads)
{
    return fi_run_opts(base, work, model, ops, site, trials, threads, NULL, 1);
}

/* CPU seconds of one golden training step of the flow (default config), over n steps. */
static double step_time(const char *flow, int n)
{
    peat_flow_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.seed = 1;
    cfg.weight_decay = -1;
    peat_exec_t *ex;
    peat_flow_t *f;
    if (peat_exec_alloc(flow, 1, &ex) != PEAT_OK ||
        peat_models_flow_alloc(flow, &cfg, ex, &f) != PEAT_OK)
        exit(1);
    double t0 = cpu_now();
    for (int i = 0; i < n; i++) {
        peat_flow_metrics m;
        if (peat_models_flow_step(f, &m) != PEAT_OK) exit(1);
    }
    double t = (cpu_now() - t0) / n;
    peat_models_flow_free(f);
    peat_exec_free(ex);
    return t;
}

/* A default campaign of `peat run --kernel gemm_new --flow F` into dir. */
static void default_campaign(const char *flow, const char *dir)
{
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    o.kernel = "gemm_new";
    o.flow = flow;
    o.out_dir = dir;
    o.quiet = 1;
    o.isolate = 0;
    o.no_runtime = 1;
    o.no_probes = 1;
    peat_campaign_result cr;
    if (peat_run_campaign(&o, &cr) != PEAT_OK) {
        fprintf(stderr, "bench_fi: campaign: %s\n", peat_error_last());
        exit(1);
    }
}

/* Local-only against propagated trials, wall clock of the whole trial (records loaded and
 * prepared, and for the propagated view the replay and the step bands), one thread. */
static void bench_views(const char *base)
{
    static const struct {
        const char *flow;
        int64_t trials;
    } flows[] = {{"mlp", 3000}, {"gpt", 300}};
    printf("## local-only vs propagated trials (default campaign of gemm_new, bitflip(bit=-1) "
           "on gemm outputs, 1 thread; trials/s by the wall clock of the whole trial: records "
           "loaded and prepared, replay and step bands; the cost ratio in CPU time, which a "
           "shared machine does not inflate)\n\n");
    printf("| flow | trials | local-only trials/s | propagated trials/s | training step ms CPU | "
           "propagated trial ms CPU | propagated trial / step |\n"
           "|---|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < sizeof flows / sizeof flows[0]; i++) {
        char dir[400], work[420];
        snprintf(dir, sizeof dir, "%s/%s", base, flows[i].flow);
        snprintf(work, sizeof work, "%s/%s-work", base, flows[i].flow);
        default_campaign(flows[i].flow, dir);
        double step = step_time(flows[i].flow, 20);
        peat_fi_result l = fi_run_opts(dir, work, "bitflip(bit=-1)", "gemm", "output",
                                       flows[i].trials, 1, NULL, 1);
        peat_fi_result p = fi_run_opts(dir, work, "bitflip(bit=-1)", "gemm", "output",
                                       flows[i].trials, 1, NULL, 0);
        double pt = p.n_run ? p.t_cpu / (double)p.n_run : 0;
        printf("| %s | %lld | %.0f | %.0f | %.2f | %.2f | %.2f |\n", flows[i].flow,
               (long long)p.n_run, l.trials_per_s, p.trials_per_s, 1e3 * step, 1e3 * pt,
               step > 0 ? pt / step : 0);
        peat_fi_result_free(&l);
        peat_fi_result_free(&p);
    }
    printf("\n");
}

static void rate_cell(const peat_inject_tally *t, int64_t k, int64_t n)
{
    peat_inject_rate w = peat_inject_wilson(k, n, 1.959964);
    printf(" %.1f%% [%.1f, %.1f] |", 100 * w.p, 100 * w.lo, 100 * w.hi);
    (void)t;
}

/* `peat inject --model 'bitflip(bit=-1)' --trials 3000 --layer fc1` on the default mlp
 * campaign: both views side by side. */
static void bench_fc1(const char *base)
{
    char dir[400], work[420];
    snprintf(dir, sizeof dir, "%s/mlp", base);
    snprintf(work, sizeof work, "%s/mlp-work", base);
    peat_fi_result r = fi_run_opts(dir, work, "bitflip(bit=-1)", NULL, "output", 3000, 1, "fc1", 0);
    const peat_inject_tally *t = &r.tab[PEAT_INJECT_BY_MODEL].rows[0].t;
    printf("## bitflip(bit=-1) on fc1's outputs, default mlp campaign, 3000 trials: both views "
           "(rate [95%% Wilson interval])\n\n| view | MASKED | TOLERABLE | SDC | DUE | "
           "prediction changed |\n|---|---:|---:|---:|---:|---:|\n| propagated |");
    for (int o = 0; o < PEAT_INJECT_OUTCOME_COUNT; o++) rate_cell(t, t->prop[o], t->prop_total);
    rate_cell(t, t->pred_changed, t->prop_total);
    printf("\n| local |");
    for (int o = 0; o < PEAT_INJECT_OUTCOME_COUNT; o++) rate_cell(t, t->n[o], t->total);
    printf(" - |\n\n");
    peat_fi_result_free(&r);
}

static void bench_trials(const char *base, const char *work)
{
    char h5[600];
    snprintf(h5, sizeof h5, "%s/campaign.h5", base);
    static const struct {
        const char *op, *model, *site;
    } cases[] = {
        {"gemm", "bitflip(bit=-1)", "output"},
        {"gemm", "nan", "output"},
        {"gemm", "tile(kind=random)", "output"},
        {"gemm", "bitflip(bit=-1)", "input"},
        {"gemm", "bitflip(bit=-1)", "acc"},
        {"gemm", "reorder", "output"},
        {"relu", "bitflip(bit=-1)", "output"},
        {"relu", "bitflip(bit=-1)", "input"},
        {"bias_add_bwd", "bitflip(bit=-1)", "output"},
    };
    printf("## playback FI trials, local view (mlp records, 1 thread; cost includes "
           "classification and the durable batch writes; CPU time)\n\n");
    printf("| op | model | site | records | trials | trials/s | golden call us | trial us | "
           "trial / golden call |\n|---|---|---|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        peat_op_kind op;
        peat_op_parse(cases[i].op, &op);
        int64_t nrec;
        double g = golden_call_time(h5, op, &nrec);
        peat_fi_result r = fi_once(base, work, cases[i].model, cases[i].op, cases[i].site, 2000, 1);
        double trial = r.n_run > 0 ? r.t_cpu / (double)r.n_run : 0;
        printf("| %s | %s | %s | %lld | %lld | %.0f | %.1f | %.1f | %.2f |\n", cases[i].op,
               cases[i].model, cases[i].site, (long long)nrec, (long long)r.n_run,
               trial > 0 ? 1 / trial : 0, 1e6 * g, 1e6 * trial, g > 0 ? trial / g : 0);
        peat_fi_result_free(&r);
    }
    printf("\n");
}

static void bench_threads(const char *base, const char *work)
{
    printf("## trials over threads (gemm records, bitflip at the input site, wall time)\n\n");
    printf("| threads | trials | s | trials/s | speed-up |\n|---:|---:|---:|---:|---:|\n");
    double t1 = 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    for (int th = 1; th <= 2; th++) {
        peat_fi_result r = fi_once(base, work, "bitflip(bit=-1)", "gemm", "input", 3000, th);
        if (th == 1) t1 = r.t_run;
        printf("| %d | %lld | %.3f | %.0f | %.2f |\n", th, (long long)r.n_run, r.t_run,
               r.trials_per_s, r.t_run > 0 ? t1 / r.t_run : 0);
        peat_fi_result_free(&r);
    }
    printf("\n(%ld online CPUs; a speed-up under 2 on a shared machine is other load)\n", cpus);
}

int main(void)
{
    if (peat_runtime_builtin_init() != PEAT_OK) return 1;
    printf("# bench_fi: fault-injection costs, build %s\n\n", "Release");
    bench_idle_hook();
    char base[] = "/tmp/peat-bench-fi-XXXXXX";
    if (!mkdtemp(base)) return 1;
    char dir[300], work[300];
    snprintf(dir, sizeof dir, "%s/campaign", base);
    snprintf(work, sizeof work, "%s/work", base);
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    o.kernel = "gemm_new";
    o.flow = "mlp";
    o.iters = 20;
    o.calls = 96;
    o.record_ops = "gemm,relu,bias_add_bwd";
    o.out_dir = dir;
    o.quiet = 1;
    o.isolate = 0;
    o.no_runtime = 1;
    peat_campaign_result cr;
    if (peat_run_campaign(&o, &cr) != PEAT_OK) {
        fprintf(stderr, "bench_fi: campaign: %s\n", peat_error_last());
        return 1;
    }
    bench_trials(dir, work);
    bench_threads(dir, work);
    bench_views(base);
    bench_fc1(base);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    return system(cmd) == 0 ? 0 : 1;
}
