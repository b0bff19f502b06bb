/* bench_store.c: bytes and write speed of the campaign store against a naive store and raw fwrite,
 * and the store's share of a default run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/record.h"
#include "core/clock.h"
#include "harness/run/run.h"
#include "harness/runtime/builtin.h"
#include "store/store.h"
#include "harness/campaign/campaign.h"
#include "models/models.h"

/* The default campaign of `peat run` (harness/campaign/campaign.c): record CALLS calls of the
 * candidate's op spread over the default iterations, metrics every iteration, a checkpoint at
 * the last one. Each flow is measured with the op its default candidate validates. */
#define CALLS PEAT_CAMPAIGN_DEFAULT_CALLS
#define REPEATS                                                                                    \
    3 /* PEAT_BENCH_REPEATS overrides (e.g. for perf); PEAT_BENCH_PHASES=1 times                   \
         create/calls/metrics/state/close */

typedef struct {
    const char *flow;
    peat_op_kind op;
} campaign;

static const campaign campaigns[] = {
    {"mlp", PEAT_OP_GEMM},
    {"cnn", PEAT_OP_CONV2D},
    {"gpt", PEAT_OP_ATTENTION},
};

static double now(void)
{
    return peat_clock_now();
}

/* Counts every call of the op in every iteration: what a naive store would write. */
typedef struct {
    peat_op_kind op; /* PEAT_OP_COUNT: every op */
    int64_t calls;
    double bytes; /* inputs + golden outputs + exact (F64) outputs */
} naive_count;

static peat_status count_hook(void *user, const peat_kernel *k, const peat_args *a,
                              const peat_call_info *info, int after)
{
    naive_count *c = user;
    (void)k;
    (void)info;
    if (!after || (c->op != PEAT_OP_COUNT && a->op != c->op)) return PEAT_OK;
    c->calls++;
    for (int i = 0; i < a->n_in; i++) c->bytes += (double)peat_tensor_nbytes(a->in[i]);
    for (int o = 0; o < a->n_out; o++)
        c->bytes +=
            (double)peat_tensor_nbytes(a->out[o]) + 8.0 * (double)peat_tensor_numel(a->out[o]);
    return PEAT_OK;
}

typedef struct {
    peat_record_list recs;
    int n_state;
    peat_tensor *state[128];
    const char *state_name[128];
    double loss[1024], acc[1024];
    int64_t iters;
    naive_count all, every_op;
} profile;

static int fail(const char *what)
{
    fprintf(stderr, "bench_store: %s: %s (%s)\n", what, peat_error_last(), peat_error_where());
    return 1;
}

/* Runs the golden flow with the default recording policy; keeps records, metrics, checkpoint. */
static int profile_run(const campaign *c, uint64_t seed, profile *p)
{
    peat_flow_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.seed = seed;
    cfg.weight_decay = -1.0;
    /* calls of the op per iteration, from one step, to spread CALLS records over the run */
    naive_count one = {c->op, 0, 0};
    peat_exec_t *ex = NULL;
    peat_flow_t *f = NULL;
    peat_flow_metrics m;
    if (peat_exec_alloc(c->flow, seed, &ex) || peat_exec_add_hook(ex, count_hook, &one) ||
        peat_models_flow_alloc(c->flow, &cfg, ex, &f) || peat_models_flow_step(f, &m))
        return fail("counting step");
    peat_models_flow_free(f);
    peat_exec_free(ex);
    p->iters = peat_campaign_default_iters(c->flow);
    if (p->iters > 1024) return fail("default iterations exceed the bench's metric buffer");
    int64_t total = one.calls * p->iters;
    peat_profile_policy pol;
    memset(&pol, 0, sizeof pol);
    pol.op_mask = PEAT_OP_BIT(c->op);
    pol.every_k = total > CALLS ? total / CALLS : 1;
    pol.max_calls = CALLS;
    p->all = (naive_count){c->op, 0, 0};
    p->every_op = (naive_count){PEAT_OP_COUNT, 0, 0};
    peat_profiler_t *prof = peat_profiler_new(&pol, peat_record_list_sink, &p->recs);
    if (!prof || peat_exec_alloc(c->flow, seed, &ex) || peat_profiler_attach(prof, ex) ||
        peat_exec_add_hook(ex, count_hook, &p->all) ||
        peat_exec_add_hook(ex, count_hook, &p->every_op) ||
        peat_models_flow_alloc(c->flow, &cfg, ex, &f))
        return fail("profile setup");
    for (int64_t it = 0; it < p->iters; it++) {
        if (peat_models_flow_step(f, &m)) return fail("profile step");
        p->loss[it] = m.loss;
        p->acc[it] = m.accuracy;
    }
    if (peat_profiler_status(prof)) return fail("profiler");
    p->n_state = peat_models_flow_state_count(f);
    if (p->n_state > 128) p->n_state = 128;
    for (int i = 0; i < p->n_state; i++) {
        const char *name;
        peat_tensor *t = peat_models_flow_state(f, i, &name);
        if (peat_tensor_clone(t, &p->state[i])) return fail("state clone");
        p->state_name[i] = strdup(name);
    }
    peat_models_flow_free(f);
    peat_exec_free(ex);
    peat_profiler_free(prof);
    return 0;
}

static double record_bytes(const peat_record *r)
{
    double b = 0;
    for (int k = 0; k < r->n_in; k++) b += (double)peat_tensor_nbytes(r->in[k]);
    for (int k = 0; k < r->n_out; k++) {
        if (r->golden[k]) b += (double)peat_tensor_nbytes(r->golden[k]);
        if (r->exact[k]) b += (double)peat_tensor_nbytes(r->exact[k]);
    }
    return b;
}

/* PEAT: every record, the metrics and the checkpoint, durably; returns seconds, file bytes. */
typedef struct {
    const char *name;
    int deflate_level, min_saving_pct;
} store_cfg;

/* The store settings compared: the default, every tensor compressed, nothing compressed. */
#define NCFG 3
static store_cfg cfgs[NCFG] = {{"PEAT", 0, 0}, {"P-all", 0, -1}, {"P-none", -1, 0}};

static int peat_write(const profile *p, const char *path, const store_cfg *cfg, double *secs,
                      double *file_bytes)
{
    unlink(path);
    peat_store_meta meta;
    memset(&meta, 0, sizeof meta);
    snprintf(meta.flow, sizeof meta.flow, "bench");
    meta.deflate_level = cfg->deflate_level;
    meta.min_saving_pct = cfg->min_saving_pct;
    double t0 = now();
    peat_store_t *s = NULL;
    if (peat_store_create(path, &meta, &s)) return fail("create");
    double tc = now();
    for (int64_t i = 0; i < p->recs.n; i++)
        if (peat_store_call_write(s, p->recs.items[i])) return fail("call write");
    double tm = now();
    for (int64_t it = 0; it < p->iters; it++)
        if (peat_store_metrics_append(s, it, p->loss[it], p->acc[it])) return fail("metrics");
    double ts = now();
    if (peat_store_state_write(s, p->iters - 1, "checkpoint", p->n_state,
                               (const peat_tensor *const *)p->state, p->state_name))
        return fail("checkpoint");
    double t3 = now();
    if (peat_store_close(s)) return fail("close");
    *secs = now() - t0;
    if (getenv("PEAT_BENCH_PHASES"))
        fprintf(stderr,
                "%-6s create %.2f ms calls %.2f ms metrics %.2f ms state %.2f ms close %.2f ms\n",
                cfg->name, 1e3 * (tc - t0), 1e3 * (tm - tc), 1e3 * (ts - tm), 1e3 * (t3 - ts),
                1e3 * (now() - t3));
    struct stat sb;
    *file_bytes = stat(path, &sb) == 0 ? (double)sb.st_size : 0;
    return 0;
}

/* Raw: the same logical bytes with fwrite, flushed to the kernel after each record (the same
 * durability against a killed process as the store's per-record flush). Without with_exact,
 * only what PEAT keeps: the exact outputs, which PEAT recomputes on read, are left out. */
static int raw_write(const profile *p, const char *path, int with_exact, double *secs)
{
    double t0 = now();
    FILE *f = fopen(path, "wb");
    if (!f) return 1;
    int bad = 0;
    for (int64_t i = 0; i < p->recs.n; i++) {
        const peat_record *r = p->recs.items[i];
        for (int k = 0; k < r->n_in; k++)
            bad |= fwrite(r->in[k]->data, 1, peat_tensor_nbytes(r->in[k]), f) !=
                   peat_tensor_nbytes(r->in[k]);
        for (int k = 0; k < r->n_out; k++) {
            if (r->golden[k])
                bad |= fwrite(r->golden[k]->data, 1, peat_tensor_nbytes(r->golden[k]), f) !=
                       peat_tensor_nbytes(r->golden[k]);
            if (r->exact[k] && with_exact)
                bad |= fwrite(r->exact[k]->data, 1, peat_tensor_nbytes(r->exact[k]), f) !=
                       peat_tensor_nbytes(r->exact[k]);
        }
        bad |= fflush(f) != 0;
    }
    for (int64_t it = 0; it < p->iters; it++) {
        double row[3] = {(double)it, p->loss[it], p->acc[it]};
        bad |= fwrite(row, sizeof row, 1, f) != 1;
        bad |= fflush(f) != 0;
    }
    for (int i = 0; i < p->n_state; i++)
        bad |= fwrite(p->state[i]->data, 1, peat_tensor_nbytes(p->state[i]), f) !=
               peat_tensor_nbytes(p->state[i]);
    bad |= fclose(f) != 0;
    *secs = now() - t0;
    unlink(path);
    return bad;
}

typedef struct {
    const char *flow;
    peat_op_kind op;
    int64_t iters, op_calls, all_calls, records;
    double naive_every_op, naive_op, naive_rec, logical;
    double bytes[NCFG], t_peat[NCFG], t_raw, t_kept;
} result;

/* The store's share of a default `peat run --kernel gemm_new --flow F` (every stage, this
 * process): seconds inside store calls over the run's wall time, measured in the same run. */
static int share_run(const char *flow, const char *dir, double *t_run, double *t_store,
                     double *file_mb)
{
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    o.kernel = "gemm_new";
    o.flow = flow;
    o.quiet = 1;
    o.argv = "bench_store";
    char out[512], cmd[600], h5[600];
    snprintf(out, sizeof out, "%s/peat-bench-share-%s-%d", dir, flow, (int)getpid());
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    if (system(cmd) != 0) return 1;
    o.out_dir = out;
    peat_campaign_result res;
    double s0 = peat_store_busy_seconds(), t0 = now();
    if (peat_run_campaign(&o, &res) != PEAT_OK) return fail("default run");
    *t_run = now() - t0;
    *t_store = peat_store_busy_seconds() - s0;
    snprintf(h5, sizeof h5, "%s/campaign.h5", out);
    struct stat sb;
    *file_mb = stat(h5, &sb) == 0 ? (double)sb.st_size / 1e6 : 0;
    return system(cmd) != 0;
}

static int share_table(const char *dir)
{
    printf("\nthe store's share of a default run (`peat run --kernel gemm_new --flow F`, all "
           "stages,\nthis process): seconds inside store calls over the run's wall time\n\n");
    printf("%-4s %10s %10s %8s %12s\n", "flow", "run s", "store ms", "share", "campaign.h5");
    const char *only = getenv("PEAT_BENCH_FLOW");
    for (size_t c = 0; c < sizeof campaigns / sizeof campaigns[0]; c++) {
        if (only && strcmp(only, campaigns[c].flow) != 0) continue;
        double run = 0, store = 0, mb = 0;
        if (share_run(campaigns[c].flow, dir, &run, &store, &mb)) return 1;
        printf("%-4s %10.2f %10.1f %7.2f%% %9.3f MB\n", campaigns[c].flow, run, 1e3 * store,
               100.0 * store / run, mb);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    if (peat_runtime_builtin_init()) return fail("registry");
    if (getenv("PEAT_BENCH_MIN_SAVING")) /* the default configuration's threshold, to explore */
        cfgs[0].min_saving_pct = atoi(getenv("PEAT_BENCH_MIN_SAVING"));
    enum { NC = sizeof campaigns / sizeof campaigns[0] };
    result res[NC];
    memset(res, 0, sizeof res);
    int rc = 0;
    for (size_t c = 0; c < NC; c++) {
        const campaign *cp = &campaigns[c];
        result *R = &res[c];
        R->flow = cp->flow;
        R->op = cp->op;
        const char *only = getenv("PEAT_BENCH_FLOW"); /* one flow only (for perf) */
        if (only && strcmp(only, cp->flow) != 0) continue;
        profile *p = calloc(1, sizeof *p);
        if (!p || profile_run(cp, 42, p)) {
            rc = 1;
            free(p);
            continue;
        }
        double state_bytes = 0, metric_bytes = 24.0 * (double)p->iters, rec = 0;
        for (int i = 0; i < p->n_state; i++) state_bytes += (double)peat_tensor_nbytes(p->state[i]);
        for (int64_t i = 0; i < p->recs.n; i++) rec += record_bytes(p->recs.items[i]);
        R->iters = p->iters;
        R->op_calls = p->all.calls;
        R->all_calls = p->every_op.calls;
        R->records = p->recs.n;
        R->naive_every_op = p->every_op.bytes + state_bytes + metric_bytes;
        R->naive_op = p->all.bytes + state_bytes + metric_bytes;
        R->naive_rec = rec + state_bytes + metric_bytes;
        R->logical = R->naive_rec;
        R->t_raw = R->t_kept = 1e30;
        for (int m = 0; m < NCFG; m++) R->t_peat[m] = 1e30;
        char path[512], rawp[512];
        snprintf(path, sizeof path, "%s/peat-bench-store-%s.h5", dir, cp->flow);
        snprintf(rawp, sizeof rawp, "%s/peat-bench-store-%s.raw", dir, cp->flow);
        int repeats = getenv("PEAT_BENCH_REPEATS") ? atoi(getenv("PEAT_BENCH_REPEATS")) : REPEATS;
        for (int r = 0; r < repeats && !rc; r++) {
            double t;
            for (int m = 0; m < NCFG && !rc; m++) {
                if (peat_write(p, path, &cfgs[m], &t, &R->bytes[m])) rc = 1;
                R->t_peat[m] = t < R->t_peat[m] ? t : R->t_peat[m];
            }
            if (!rc && raw_write(p, rawp, 1, &t)) {
                fprintf(stderr, "bench_store: raw write to %s failed\n", rawp);
                rc = 1;
            }
            R->t_raw = t < R->t_raw ? t : R->t_raw;
            if (!rc && raw_write(p, rawp, 0, &t)) rc = 1;
            R->t_kept = t < R->t_kept ? t : R->t_kept;
        }
        if (!rc && getenv("PEAT_BENCH_KEEP"))
            peat_write(p, path, &cfgs[0], &R->t_raw, &R->bytes[0]); /* kept for `peat inspect` */
        else
            unlink(path);
        peat_record_list_clear(&p->recs);
        for (int i = 0; i < p->n_state; i++) {
            peat_tensor_free(p->state[i]);
            free((void *)p->state_name[i]);
        }
        free(p);
    }
    if (rc) return rc;
    const double mb = 1e6;
    printf(
        "PEAT campaign store: bytes on disk against naive stores (default campaigns: %d calls of "
        "the op spread\n"
        "over the run, metrics every iteration, a checkpoint at the last iteration; seed 42)\n\n",
        CALLS);
    printf("%-4s %-10s %5s %6s %6s %7s | %10s %10s %10s | %9s %9s %9s | %7s %7s %7s\n", "flow",
           "op", "iters", "calls", "op", "records", "naive-all", "naive-op", "naive-rec", "PEAT",
           "P-all", "P-none", "all/P", "op/P", "rec/P");
    for (size_t c = 0; c < NC; c++) {
        const result *R = &res[c];
        if (R->records == 0) continue; /* skipped by PEAT_BENCH_FLOW */
        printf("%-4s %-10s %5lld %6lld %6lld %7lld | %7.2f MB %7.2f MB %7.2f MB | %6.3f MB %6.3f "
               "MB %6.3f MB | %6.1fx %6.1fx %6.1fx\n",
               R->flow, peat_op_name(R->op), (long long)R->iters, (long long)R->all_calls,
               (long long)R->op_calls, (long long)R->records, R->naive_every_op / mb,
               R->naive_op / mb, R->naive_rec / mb, R->bytes[0] / mb, R->bytes[1] / mb,
               R->bytes[2] / mb, R->naive_every_op / R->bytes[0], R->naive_op / R->bytes[0],
               R->naive_rec / R->bytes[0]);
    }
    printf("\nnaive-all: every op call of every iteration; naive-op: every call of the recorded op "
           "in every\n"
           "iteration; naive-rec: only the calls PEAT recorded. Naive stores keep inputs, golden "
           "outputs and exact\n"
           "(f64) outputs uncompressed, plus the same checkpoint and metrics. PEAT: the default "
           "(shuffle + deflate\n"
           "for the tensors it shrinks by >= %d%%, the rest uncompressed); P-all: every tensor "
           "compressed\n"
           "(min_saving_pct -1); P-none: nothing compressed (deflate_level -1). Ratios are "
           "against PEAT.\n\n",
           cfgs[0].min_saving_pct ? cfgs[0].min_saving_pct : PEAT_STORE_MIN_SAVING_PCT_DEFAULT);
    int reps = getenv("PEAT_BENCH_REPEATS") ? atoi(getenv("PEAT_BENCH_REPEATS")) : REPEATS;
    printf("write speed, best of %d: logical bytes of the records, checkpoint and metrics per "
           "second\n"
           "(PEAT: create, every record durable when its write returns, close; raw: fwrite + "
           "fflush per record,\n"
           "fclose)\n\n",
           reps);
    printf("%-4s %10s | %10s %10s %10s %10s | %7s %9s %9s | %10s %8s\n", "flow", "logical",
           "PEAT MB/s", "P-all MB/s", "P-none", "raw MB/s", "P/raw", "P-all/raw", "P-none/raw",
           "raw-kept", "P/kept");
    for (size_t c = 0; c < NC; c++) {
        const result *R = &res[c];
        if (R->records == 0) continue; /* skipped by PEAT_BENCH_FLOW */
        printf("%-4s %7.2f MB | %10.1f %10.1f %10.1f %10.1f | %7.2f %9.2f %9.2f | %7.2f ms %8.2f\n",
               R->flow, R->logical / mb, R->logical / R->t_peat[0] / mb,
               R->logical / R->t_peat[1] / mb, R->logical / R->t_peat[2] / mb,
               R->logical / R->t_raw / mb, R->t_raw / R->t_peat[0], R->t_raw / R->t_peat[1],
               R->t_raw / R->t_peat[2], 1e3 * R->t_kept, R->t_kept / R->t_peat[0]);
    }
    printf("\nraw-kept: fwrite + fflush of only what PEAT keeps (the exact outputs left out: PEAT "
           "recomputes\nthem on read), in ms; P/kept: its time over PEAT's.\n");
    /* PEAT_BENCH_NO_SHARE=1: the tables above only (the default runs take most of the time) */
    return getenv("PEAT_BENCH_NO_SHARE") ? 0 : share_table(dir);
}
