/* bench_predictor.c: latency prediction error (MAPE against the median of repeated measurements)
 * on held-out shapes never used in calibration, per kernel, beside a roofline and a
 * NeuSight-style tile/wave baseline with one fitted utilisation; then predicted vs actual time
 * per campaign stage. Usage: bench_predictor [--backend B] [--repeats R] [--kernels a,b] */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/runtime/builtin.h"
#include "harness/run/run.h"
#include "harness/campaign/campaign.h"
#include "harness/latency/latency.h"
#include "harness/latency/latency_cli.h"
#include "predictor/predictor.h"

#define MIN_S 0.002 /* per timing: at least 3 calls and 2 ms */

typedef struct errs {
    double model, roof, neu;
    int n;
    peat_pred_class cls;
} errs;

/* Roofline: the slower of compute at peak and traffic at full bandwidth, on the units used. */
static double roofline(const peat_kernel *k, const peat_pred_device *d, const peat_op_params *p)
{
    const peat_op_info *info = peat_op_info_get(k->op);
    int units = d->edge_tiles_padded ? d->units : (k->cfg.threads > 1 ? k->cfg.threads : 1);
    double tc = info->flops(p) / (d->peak_flops * units);
    double tm = peat_predictor_call_bytes(k, p) / d->bandwidth;
    return tc > tm ? tc : tm;
}

/* NeuSight-style: waves x whole-tile flops at peak (bytes at bandwidth for ops without tiles),
 * divided by one utilisation fitted per kernel; the unscaled time here. */
static double neusight_raw(const peat_kernel *k, const peat_pred_device *d, const peat_op_params *p)
{
    peat_pred_gemm_view v;
    peat_pred_waves w;
    if (peat_predictor_gemm_view(k->op, p, &v) && peat_predictor_waves(&k->cfg, d, &v, &w) == 0)
        return (double)w.waves * w.tile_flops / d->peak_flops;
    return peat_predictor_call_bytes(k, p) / d->bandwidth;
}

/* The one utilisation of the NeuSight baseline: geometric-mean fit on the calibration shapes. */
static double fit_utilisation(const peat_kernel *k, const peat_pred_device *d,
                              const peat_pred_ktable *kt)
{
    int sizes[PEAT_PRED_MAX_POINTS];
    int n = peat_predictor_sizes(k->op, 0, sizes, PEAT_PRED_MAX_POINTS);
    double s = 0;
    for (int i = 0; i < n; i++) {
        peat_op_params p;
        peat_predictor_shape(k->op, sizes[i], 0, &p);
        double x = peat_predictor_x(k, d, kt->cls, &p);
        s += log(neusight_raw(k, d, &p) / peat_predictor_ktable_eval(kt, x));
    }
    return exp(s / n);
}

static peat_status bench_kernel(const peat_kernel *k, const peat_pred_device *d, int repeats,
                                errs *e)
{
    /* calibration and held-out shapes timed in the same sweeps: both see the same load, so
     * the error measured is the model's, not the machine's drift between two moments */
    int cal[PEAT_PRED_MAX_POINTS], sizes[PEAT_PRED_MAX_POINTS], nc = 0, n = 0;
    double t_cal[PEAT_PRED_MAX_POINTS], meas[PEAT_PRED_MAX_POINTS];
    memset(e, 0, sizeof *e);
    PEAT_TRY(peat_predictor_time_families(k, repeats, MIN_S, &nc, cal, t_cal, &n, sizes, meas));
    peat_pred_ktable kt;
    /* as calibration fits it: outliers timed again, a size-specific one left out */
    PEAT_TRY(peat_predictor_ktable_refine(k, d, nc, cal, t_cal, MIN_S, &kt));
    if (getenv("PEAT_BENCH_VERBOSE"))
        for (int i = 0; i < kt.n; i++) printf("    calibration x=%.3g t=%.3g\n", kt.x[i], kt.t[i]);
    peat_pred_table tab = {.dev = *d};
    PEAT_TRY(peat_predictor_table_add(&tab, &kt));
    double u = fit_utilisation(k, d, &kt);
    peat_status st = PEAT_OK;
    for (int i = 0; st == PEAT_OK && i < n; i++) {
        peat_op_params p;
        double t = meas[i], pred = 0;
        peat_predictor_shape(k->op, sizes[i], 1, &p);
        st = peat_predictor_call(&tab, k, &p, 0, &pred);
        if (st != PEAT_OK) break;
        if (getenv("PEAT_BENCH_VERBOSE"))
            printf("    %s n=%d x=%.3g measured %.3g predicted %.3g (%+.0f%%)\n", k->name, sizes[i],
                   peat_predictor_x(k, d, kt.cls, &p), t, pred, 100 * (pred - t) / t);
        e->model += fabs(pred - t) / t;
        e->roof += fabs(roofline(k, d, &p) - t) / t;
        e->neu += fabs(neusight_raw(k, d, &p) / u - t) / t;
        e->n++;
    }
    e->cls = kt.cls;
    peat_predictor_table_free(&tab);
    return st;
}

static int selected(const char *list, const char *name)
{
    if (!list) return 1;
    size_t n = strlen(name);
    for (const char *p = strstr(list, name); p; p = strstr(p + 1, name))
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return 1;
    return 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

enum { ST_PROFILE, ST_PLAYBACK, ST_PROBES, ST_ANALYZE, ST_RUNTIME, ST_OTHER, ST_TOTAL, ST_N };
static const char *const st_names[ST_N] = {"profile", "playback", "probes", "analyze",
                                           "runtime", "other",    "total"};

/* Actual wall seconds per stage of a finished campaign ("other": resolve, plan, open, report). */
static void actual_stages(const peat_campaign_result *r, double total, double a[ST_N])
{
    a[ST_PROFILE] = r->t_profile, a[ST_PLAYBACK] = r->t_playback, a[ST_PROBES] = r->t_probe;
    a[ST_ANALYZE] = r->t_analyze, a[ST_RUNTIME] = r->t_runtime, a[ST_TOTAL] = total;
    a[ST_OTHER] =
        total - a[ST_PROFILE] - a[ST_PLAYBACK] - a[ST_PROBES] - a[ST_ANALYZE] - a[ST_RUNTIME];
}

/* The same in CPU seconds (this process and its children). */
static void actual_cpu(const peat_campaign_result *r, double a[ST_N])
{
    a[ST_PROFILE] = r->cpu_profile, a[ST_PLAYBACK] = r->cpu_playback, a[ST_PROBES] = r->cpu_probe;
    a[ST_ANALYZE] = r->cpu_analyze, a[ST_RUNTIME] = r->cpu_runtime, a[ST_OTHER] = r->cpu_other;
    a[ST_TOTAL] = 0;
    for (int s = 0; s < ST_TOTAL; s++) a[ST_TOTAL] += a[s];
}

static peat_status run_campaign(const char *flow, const char *backend, const char *budget,
                                peat_campaign_result *r, double *total)
{
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    o.kernel = "gemm_new", o.flow = flow, o.backend = backend, o.quiet = 1, o.force = 1;
    o.budget = budget;
    char dir[96];
    snprintf(dir, sizeof dir, "/tmp/peat-bench-pred-%d-%s", (int)getpid(), flow);
    o.out_dir = dir;
    double t0 = peat_predictor_now();
    peat_status st = peat_run_campaign(&o, r);
    *total = peat_predictor_now() - t0;
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "bench_predictor: could not remove %s\n", dir);
    return st;
}

/* The default campaign of a flow (`peat run --kernel gemm_new --flow F`), predicted per stage
 * (from the same run options) just before each of `repeats` runs, as `peat predict` then `peat
 * run` would: a shared core's speed changes over seconds, and the prediction reads it at its
 * warm-up. Prints the medians of predictions and of actual times and judges the median of the
 * runs' errors. Returns the median predicted total; *ok cleared when a stage of over 0.5 s misses
 * 15%. */
static peat_status predict_default(const char *flow, const char *backend, double pred[ST_N],
                                   double pcpu[ST_N], double *min_s)
{
    /* the options and flow of `peat run --kernel gemm_new --flow F`, as its plan stage reads them
     */
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    o.kernel = "gemm_new", o.flow = flow, o.backend = backend;
    peat_latency_opts lo = {.kernel = "gemm_new", .flow = flow, .backend = backend, .run = &o};
    lo.flow_cfg = peat_campaign_flow_config(&o);
    peat_latency_model m;
    peat_pred_plan p;
    PEAT_TRY(peat_latency_model_init(&lo, &m));
    peat_status st = peat_latency_plan_for(&m, peat_campaign_default_iters(flow),
                                           PEAT_CAMPAIGN_DEFAULT_CALLS, &p);
    peat_pred_limits l;
    if (st == PEAT_OK)
        st = peat_latency_limits(&m.calls, &m.run, peat_campaign_default_iters(flow),
                                 PEAT_CAMPAIGN_DEFAULT_CALLS, &l);
    if (st == PEAT_OK) peat_predictor_plan_cost(&m.costs, &l.min), *min_s = l.min.total_s;
    if (st == PEAT_OK && getenv("PEAT_BENCH_VERBOSE"))
        peat_latency_print(stderr, &m.env, m.kernel, m.flow, &m.table, &m.calls, &m.costs, &p);
    peat_latency_model_close(&m);
    PEAT_TRY(st);
    static const peat_pred_stage of[ST_TOTAL] = {PEAT_STAGE_PROFILE, PEAT_STAGE_PLAYBACK,
                                                 PEAT_STAGE_PROBES,  PEAT_STAGE_ANALYZE,
                                                 PEAT_STAGE_RUNTIME, PEAT_STAGE_OTHER};
    for (int s = 0; s < ST_TOTAL; s++) pred[s] = p.stage_s[of[s]], pcpu[s] = p.stage_cpu_s[of[s]];
    pred[ST_TOTAL] = p.total_s, pcpu[ST_TOTAL] = p.total_cpu_s;
    return PEAT_OK;
}

/* Each prediction and run is made in a fresh process (this program again, `--child`), as `peat
 * run --budget` plans and runs in one: a process that has already run campaigns holds more
 * memory, and every isolation fork copies its page tables (gpt's playback ran 0.70 s here in the
 * fourth campaign of one process against 0.41-0.48 s in fresh ones). */
static char self_exe[4096];

static FILE *child(const char *args)
{
    char cmd[sizeof self_exe + 512];
    snprintf(cmd, sizeof cmd, "'%s' --child %.500s", self_exe, args);
    fflush(stdout);
    return popen(cmd, "r");
}

/* The child's one result line, after the tag, into buf; 0 when there is none. */
static int child_line(FILE *f, const char *tag, char *buf, size_t n)
{
    char line[4096];
    int found = 0;
    size_t tl = strlen(tag);
    while (fgets(line, sizeof line, f))
        if (!found && !strncmp(line, tag, tl)) {
            size_t m = strlen(line + tl);
            if (m >= n) m = n - 1;
            memcpy(buf, line + tl, m);
            buf[m] = 0;
            found = 1;
        }
    return pclose(f) == 0 && found;
}

/* --child default FLOW BACKEND: one prediction and one run, printed on one line. */
static int child_default(const char *flow, const char *backend)
{
    double pw[ST_N], pc[ST_N], a[ST_N], b[ST_N], total = 0, mins = 0;
    peat_campaign_result r;
    if (predict_default(flow, backend, pw, pc, &mins) != PEAT_OK ||
        run_campaign(flow, backend, NULL, &r, &total) != PEAT_OK) {
        printf("ERROR %s\n", peat_error_last());
        return 1;
    }
    actual_stages(&r, total, a);
    actual_cpu(&r, b);
    printf("DEFAULT %.6g", mins);
    for (int s = 0; s < ST_N; s++) printf(" %.6g %.6g %.6g %.6g", pw[s], pc[s], a[s], b[s]);
    printf("\n");
    return 0;
}

static double default_stages(const char *flow, const char *backend, int repeats, double *min_s,
                             int *ok)
{
    enum { R = 15 };
    double pred[ST_N][R], pcpu[ST_N][R], act[ST_N][R], acpu[ST_N][R], err[ST_N][R], errc[ST_N][R];
    if (repeats > R) repeats = R;
    for (int rep = 0; rep < repeats; rep++) {
        char args[256], line[4096];
        snprintf(args, sizeof args, "default '%s' '%s'", flow, backend);
        FILE *f = child(args);
        if (!f || !child_line(f, "DEFAULT ", line, sizeof line)) {
            printf("%-11s child run failed\n", flow);
            return 0;
        }
        char *q = line;
        double mins = strtod(q, &q);
        if (rep == 0) *min_s = mins;
        for (int s = 0; s < ST_N; s++) {
            pred[s][rep] = strtod(q, &q), pcpu[s][rep] = strtod(q, &q);
            act[s][rep] = strtod(q, &q), acpu[s][rep] = strtod(q, &q);
            double a = act[s][rep], b = acpu[s][rep];
            err[s][rep] = a > 0 ? 100 * (pred[s][rep] - a) / a : 0;
            errc[s][rep] = b > 0 ? 100 * (pcpu[s][rep] - b) / b : 0;
        }
    }
    double total_pred = 0;
    for (int s = 0; s < ST_N; s++) {
        double pw = median(pred[s], repeats), a = median(act[s], repeats);
        double pc = median(pcpu[s], repeats), b = median(acpu[s], repeats);
        double e = median(err[s], repeats), ec = median(errc[s], repeats);
        int judged = a >= 0.5 || s == ST_TOTAL;
        if (judged && fabs(e) > 15) *ok = 0;
        printf("%-11s %-9s %9.2fs %9.2fs %+7.0f%%   %9.2fs %9.2fs %+7.0f%%%s\n", flow, st_names[s],
               pw, a, e, pc, b, ec, judged ? (fabs(e) <= 15 ? "" : "  MISSED") : "  (< 0.5 s)");
        if (s == ST_TOTAL) total_pred = pw;
    }
    return total_pred;
}

/* `peat run --budget B`: the whole run's wall time against B, and its own predicted vs actual
 * per stage. *ok cleared when the run ends outside B +- 15%. */
/* --child budget FLOW BACKEND B: one budgeted run, printed on one line. */
static int child_budget(const char *flow, const char *backend, const char *b)
{
    peat_campaign_result r;
    double total = 0, a[ST_N];
    if (run_campaign(flow, backend, b, &r, &total) != PEAT_OK) {
        printf("RESULT REFUSED %s\n", peat_error_last());
        return 0;
    }
    actual_stages(&r, total, a);
    printf("RESULT BUDGET %lld %lld %lld %.6g %.6g %.6g %.6g %.6g %.6g", (long long)r.plan_iters,
           (long long)r.plan_calls, (long long)r.n_budget_skipped, total, r.pred_profile,
           r.pred_playback, r.pred_probe, r.pred_analyze, r.pred_runtime);
    for (int s = 0; s < 5; s++) printf(" %.6g", a[s]);
    printf("\n");
    return 0;
}

static void budget_run(const char *flow, const char *backend, double budget, int *ok)
{
    char b[32], args[256], line[4096];
    snprintf(b, sizeof b, "%.1fs", budget);
    snprintf(args, sizeof args, "budget '%s' '%s' %s", flow, backend, b);
    FILE *f = child(args);
    if (!f || !child_line(f, "RESULT ", line, sizeof line) ||
        (strncmp(line, "BUDGET ", 7) && strncmp(line, "REFUSED ", 8))) {
        printf("%-11s %7s  child run failed\n", flow, b);
        *ok = 0;
        return;
    }
    if (!strncmp(line, "REFUSED ", 8)) {
        printf("%-11s %7s  refused: %s", flow, b, line + 8);
        /* as a user would: again at 1.1x the minimum the refusal states (the run's own
         * prediction of the smallest campaign, made at its own warm-up, can differ from this
         * process's by the load of the moment) */
        const char *q = strstr(line, "needs ");
        double need = q ? strtod(q + 6, NULL) : 0;
        if (need > budget) budget_run(flow, backend, 1.1 * need, ok);
        return;
    }
    char *q = line + 7;
    long long iters = strtoll(q, &q, 10), calls = strtoll(q, &q, 10), cut = strtoll(q, &q, 10);
    double total = strtod(q, &q), pred[5], a[5];
    for (int s = 0; s < 5; s++) pred[s] = strtod(q, &q);
    for (int s = 0; s < 5; s++) a[s] = strtod(q, &q);
    double e = 100 * (total - budget) / budget;
    int in = fabs(e) <= 15;
    *ok &= in;
    printf("%-11s %7s %6lld %6lld %6lld %8.2fs %+6.0f%%  %-6s", flow, b, iters, calls, cut, total,
           e, in ? "ok" : "MISSED");
    for (int s = 0; s < 5; s++) printf(" %5.2f/%-5.2f", pred[s], a[s]);
    printf("\n");
}

/* Every default flow: the default campaign per stage, then --budget runs at a small budget
 * (0.6x the default campaign's predicted total, at least 1.2x the smallest campaign's, plus
 * planning) and a large one (1.5x the default's). */
static int bench_stages(const char *backend, int repeats)
{
    const char *const *flows = peat_models_flow_names();
    double pred_total[16] = {0}, min_total[16] = {0};
    int ok = 1, n = 0;
    printf("\nper-stage time of the default campaign (`peat run --kernel gemm_new --flow F`; wall "
           "seconds; predicted just before each of %d runs: medians of the predictions, of the "
           "actual times and of the runs' errors; stages under 0.5 s are shown, not judged):\n",
           repeats);
    printf("(cpu: this process and its children; the wall prediction is the cpu one over the core "
           "share and cores measured at warm-up, the load of a shared machine moves it)\n");
    printf("%-11s %-9s %10s %10s %8s   %10s %10s %8s\n", "flow", "stage", "wall pred", "actual",
           "error", "cpu pred", "actual", "error");
    for (n = 0; flows[n] && n < 16; n++)
        pred_total[n] = default_stages(flows[n], backend, repeats, &min_total[n], &ok);
    printf("\n`peat run --budget B` (B = 0.6x the default's predicted total, at least 1.2x the "
           "smallest campaign's + 1 s of planning, and 1.5x the default's): wall time against B, "
           "per stage predicted/actual wall s\n");
    printf("%-11s %7s %6s %6s %6s %9s %7s  %-6s %11s %11s %11s %11s %11s\n", "flow", "budget",
           "iters", "calls", "cut", "actual", "vs B", "goal", "profile", "playback", "probes",
           "analyze", "runtime");
    for (int i = 0; i < n; i++) {
        if (!(pred_total[i] > 0)) continue;
        double small = 0.6 * pred_total[i];
        if (small < 1.2 * min_total[i] + 1.0) small = 1.2 * min_total[i] + 1.0;
        budget_run(flows[i], backend, small, &ok);
        budget_run(flows[i], backend, 1.5 * pred_total[i], &ok);
    }
    return ok;
}

/* Percent of the gated timings taken since (all0, quiet0) that the quiet gate left out. */
static double slow_since(long all0, long quiet0)
{
    long all, quiet;
    peat_predictor_gate_stats(&all, &quiet);
    return all > all0 ? 100.0 * (double)(all - all0 - (quiet - quiet0)) / (double)(all - all0)
                      : 0.0;
}

/* Every kernel of the device's backend: model MAPE on held-out shapes beside both baselines. */
static void bench_kernels(const peat_pred_device *d, int repeats, const char *only, int *n_ok,
                          int *n_all)
{
    printf("held-out shapes: dims off the calibration grid, sizes between calibration points; "
           "median of %d repeats\n\n",
           repeats);
    printf("%-26s %-8s %8s %9s %9s %7s  %s\n", "kernel", "class", "model", "roofline", "neusight",
           "slow", "goal (<=10%, best)");
    double t0 = peat_predictor_now(), sum = 0;
    long all0, quiet0;
    peat_predictor_gate_stats(&all0, &quiet0);
    for (int i = 0; i < peat_registry_count(); i++) {
        const peat_kernel *k = peat_registry_at(i);
        if (strcmp(k->backend, d->backend) != 0 || !selected(only, k->name)) continue;
        errs e;
        peat_status st = PEAT_OK;
        double slow = 0;
        /* a kernel timed mostly while the core ran slow (its sweeps ran out before a quiet phase
         * came; docs/predictor.md) is timed again after a pause, twice at most */
        for (int attempt = 0; attempt < 3; attempt++) {
            if (attempt) sleep(1);
            long all1, quiet1;
            peat_predictor_gate_stats(&all1, &quiet1);
            st = bench_kernel(k, d, repeats, &e);
            slow = slow_since(all1, quiet1);
            if (st != PEAT_OK || slow <= 50) break;
        }
        if (st != PEAT_OK || e.n == 0) {
            printf("%-26s failed: %s\n", k->name, peat_error_last());
            continue;
        }
        double m = 100 * e.model / e.n, r = 100 * e.roof / e.n, ns = 100 * e.neu / e.n;
        /* a device without a bandwidth or a peak (OpenCL reports neither) has no
         * baselines: the model is judged against the 10% goal alone */
        int base = d->peak_flops > 0 && d->bandwidth > 0;
        int ok = m <= 10.0 && (!base || (m < r && m < ns));
        char rb[16] = "n/a", nb[16] = "n/a";
        /* two decimals: near-proportional kernels put the model and the fitted baseline a few
         * hundredths of a point apart */
        if (base) snprintf(rb, sizeof rb, "%.2f%%", r), snprintf(nb, sizeof nb, "%.2f%%", ns);
        printf("%-26s %-8s %7.2f%% %9s %9s %6.0f%%  %s\n", k->name,
               e.cls == PEAT_PRED_COMPUTE ? "compute" : "memory", m, rb, nb, slow,
               ok ? "ok" : "MISSED");
        *n_ok += ok, (*n_all)++, sum += m;
    }
    long all, quiet;
    peat_predictor_gate_stats(&all, &quiet);
    printf("\n%d/%d kernels within 10%% MAPE and better than both baselines; mean MAPE %.1f%%; "
           "%.1f s; %.0f%% of %ld timings left out as slow (quiet gate)\n",
           *n_ok, *n_all, *n_all ? sum / *n_all : 0.0, peat_predictor_now() - t0,
           slow_since(all0, quiet0), all - all0);
}

int main(int argc, char **argv)
{
    const char *backend = "cpu", *only = NULL;
    int repeats = 5, stage_repeats = 3, stages_only = 0, kernels_only = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--backend"))
            backend = argv[i + 1];
        else if (!strcmp(argv[i], "--repeats"))
            repeats = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--kernels"))
            only = argv[i + 1];
        else if (!strcmp(argv[i], "--stage-repeats"))
            stage_repeats = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--stages-only"))
            stages_only = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--kernels-only"))
            kernels_only = atoi(argv[i + 1]);
    }
    if (repeats < 1 || repeats > 15) repeats = 5;
    if (stage_repeats < 1 || stage_repeats > 15) stage_repeats = 3;
    if (peat_runtime_builtin_init() != PEAT_OK) return 2;
    if (argc == 5 && !strcmp(argv[1], "--child") && !strcmp(argv[2], "default"))
        return child_default(argv[3], argv[4]);
    if (argc == 6 && !strcmp(argv[1], "--child") && !strcmp(argv[2], "budget"))
        return child_budget(argv[3], argv[4], argv[5]);
    ssize_t len = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (len <= 0) {
        fprintf(stderr, "bench_predictor: cannot find its own program: %s\n", strerror(errno));
        return 2;
    }
    self_exe[len] = 0;
    peat_pred_device d;
    peat_pred_clock clk;
    if (peat_latency_device(backend, &d, &clk) != PEAT_OK) {
        fprintf(stderr, "bench_predictor: %s\n", peat_error_last());
        return 2;
    }
    char bw[32] = "unknown";
    if (d.bandwidth > 0) snprintf(bw, sizeof bw, "%.1f GB/s", d.bandwidth / 1e9);
    printf("device: %s, %d units, SIMD %d, peak %.2f GFLOP/s/unit, bandwidth %s, clock %s\n",
           d.name, d.units, d.simd_width, d.peak_flops / 1e9, bw,
           clk.mhz > 0 ? clk.source : "unknown (no cpufreq/NVML/ROCm SMI here)");
    int n_ok = 0, n_all = 0;
    if (!stages_only) bench_kernels(&d, repeats, only, &n_ok, &n_all);
    int stages_ok = strcmp(backend, "cpu") != 0 || only || kernels_only
                        ? 1
                        : bench_stages(backend, stage_repeats);
    return n_ok == n_all && stages_ok ? 0 : 1;
}
