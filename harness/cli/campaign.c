/* campaign.c: runs one validation campaign: profile the golden flow, replay the recorded calls
 * through the candidate (isolated in a child process), analyse, detect, report. */
#define _DEFAULT_SOURCE
#include "harness/cli/campaign.h"

#include "analyzer/analyzer.h"
#include "golden/golden.h"
#include "harness/store/store.h"
#include "peat/backend.h"
#include "peat/plugin.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double peat_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void peat_campaign_opts_default(peat_campaign_opts *o)
{
    memset(o, 0, sizeof *o);
    o->backend = "auto";
    o->seed = 1;
    o->isolate = 1;
    o->kernel_timeout_s = 30.0;
    o->repeats = 2;
}

/* Default training length per flow: enough iterations for the loss to move, small enough that
 * `peat run` stays well inside a minute on two cores. */
static int64_t default_iters(const char *flow)
{
    if (strcmp(flow, "mlp") == 0) return 60;
    if (strcmp(flow, "cnn") == 0) return 30;
    if (strcmp(flow, "gpt") == 0) return 30;
    return 30;
}

static peat_status mkdir_p(const char *path)
{
    char buf[512];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return PEAT_ERROR(PEAT_ERR_INVAL, "output path too long");
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return PEAT_ERROR(PEAT_ERR_IO, "cannot create directory %s: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return PEAT_ERROR(PEAT_ERR_IO, "cannot create output directory %s: %s", buf, strerror(errno));
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
        return PEAT_ERROR(PEAT_ERR_IO, "output path %s is not a directory", buf);
    if (access(buf, W_OK) != 0)
        return PEAT_ERROR(PEAT_ERR_IO, "output directory %s is not writable", buf);
    return PEAT_OK;
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* ---- flow choice ---- */

static peat_status choose_flow(const peat_campaign_opts *o, const peat_kernel *k, const char **flow)
{
    const char *const *names = peat_flow_names();
    if (o->flow) {
        int known = 0;
        for (int i = 0; names[i]; i++) known |= strcmp(names[i], o->flow) == 0;
        if (!known) return PEAT_ERROR(PEAT_ERR_NOTFOUND, "unknown flow '%s' (see `peat list`)", o->flow);
        if (!(peat_flow_op_mask(o->flow) & (1u << k->op)))
            return PEAT_ERROR(PEAT_ERR_INVAL, "flow '%s' never calls %s, the op of kernel '%s'",
                              o->flow, peat_op_name(k->op), k->name);
        *flow = o->flow;
        return PEAT_OK;
    }
    for (int i = 0; names[i]; i++)
        if (peat_flow_op_mask(names[i]) & (1u << k->op)) {
            *flow = names[i];
            return PEAT_OK;
        }
    return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "no built-in flow calls %s (kernel '%s')",
                      peat_op_name(k->op), k->name);
}

/* ---- profile ---- */

typedef struct {
    peat_record_list list;
    peat_store_t *store;
    int64_t skipped_existing;
} profile_sink;

/* Keeps every record for playback; writes it to the store unless a resumed file has it. */
static peat_status sink_both(void *user, peat_record *r)
{
    profile_sink *ps = user;
    if (ps->store) {
        if (peat_store_call_has(ps->store, r->id)) ps->skipped_existing++;
        else {
            peat_status st = peat_store_call_write(ps->store, r);
            if (st != PEAT_OK) {
                peat_record_free(r);
                return st;
            }
        }
    }
    return peat_record_list_sink(&ps->list, r);
}

typedef struct {
    int64_t n;
    peat_op_kind op;
} count_hook_state;

static peat_status count_hook(void *user, const peat_kernel *k, const peat_args *a,
                              const peat_call_info *info, int after)
{
    count_hook_state *c = user;
    if (!after && a->op == c->op) c->n++;
    return PEAT_OK;
}

/* Calls of op per training step (one probe step on a throwaway flow instance). */
static peat_status calls_per_step(const char *flow, const peat_flow_config *cfg, peat_op_kind op,
                                  int64_t *n)
{
    peat_exec_t *ex = NULL;
    peat_flow_t *f = NULL;
    count_hook_state c = {0, op};
    peat_flow_metrics m;
    PEAT_TRY(peat_exec_create(flow, cfg->seed, &ex));
    peat_status st = peat_exec_add_hook(ex, count_hook, &c);
    if (st == PEAT_OK) st = peat_flow_create(flow, cfg, ex, &f);
    if (st == PEAT_OK) st = peat_flow_step(f, &m);
    peat_flow_free(f);
    peat_exec_free(ex);
    *n = c.n;
    return st;
}

/* ---- playback: the candidate in a child process ---- */

static void *shared_alloc(size_t n)
{
    void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Allocates outputs for a call in shared memory so that a child can fill them. */
static peat_status alloc_shared_outputs(peat_args *a, peat_tensor **tmpl, int n)
{
    for (int o = 0; o < n; o++) {
        size_t nb = peat_tensor_nbytes(tmpl[o]);
        void *mem = shared_alloc(nb);
        if (!mem) return PEAT_ERROR(PEAT_ERR_NOMEM, "shared output buffer of %zu bytes", nb);
        PEAT_TRY(peat_tensor_wrap(PEAT_DTYPE_F32, tmpl[o]->ndim, tmpl[o]->shape, mem, &a->out[o]));
    }
    a->n_out = n;
    return PEAT_OK;
}

static void free_shared_outputs(peat_args *a)
{
    for (int o = 0; o < a->n_out; o++) {
        if (!a->out[o]) continue;
        munmap(a->out[o]->data, peat_tensor_nbytes(a->out[o]));
        peat_tensor_free(a->out[o]);
        a->out[o] = NULL;
    }
}

/* Runs k on a; isolated: in a forked child with a deadline, so that a crashing or hanging
 * candidate is reported instead of taking the campaign down. why gets a one-line reason. */
static peat_status run_candidate(const peat_kernel *k, const peat_args *a, int isolate, double timeout,
                                 char *why, size_t nwhy)
{
    why[0] = 0;
    if (!isolate) {
        peat_status st = peat_kernel_run(k, a);
        if (st != PEAT_OK) snprintf(why, nwhy, "%s", peat_error_last());
        return st;
    }
    int *child_status = shared_alloc(sizeof(int) + 256);
    if (!child_status) return PEAT_ERROR(PEAT_ERR_NOMEM, "shared status");
    char *child_msg = (char *)(child_status + 1);
    *child_status = -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        munmap(child_status, sizeof(int) + 256);
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "fork failed: %s", strerror(errno));
    }
    if (pid == 0) {
        peat_status st = peat_kernel_run(k, a);
        *child_status = (int)st;
        if (st != PEAT_OK) snprintf(child_msg, 256, "%s", peat_error_last());
        _exit(0);
    }
    double t0 = peat_now();
    int wst = 0;
    pid_t w = 0;
    long sleep_us = 50;
    while ((w = waitpid(pid, &wst, WNOHANG)) == 0) {
        if (peat_now() - t0 > timeout) {
            kill(pid, SIGKILL);
            waitpid(pid, &wst, 0);
            snprintf(why, nwhy, "kernel '%s' hung: killed after %.0f s", k->name, timeout);
            munmap(child_status, sizeof(int) + 256);
            return PEAT_ERR_KERNEL;
        }
        usleep((useconds_t)sleep_us);
        if (sleep_us < 20000) sleep_us *= 2;
    }
    peat_status st = PEAT_OK;
    if (w < 0) {
        snprintf(why, nwhy, "waitpid failed: %s", strerror(errno));
        st = PEAT_ERR_INTERNAL;
    } else if (WIFSIGNALED(wst)) {
        snprintf(why, nwhy, "kernel '%s' crashed with signal %d (%s)", k->name, WTERMSIG(wst),
                 strsignal(WTERMSIG(wst)));
        st = PEAT_ERR_KERNEL;
    } else if (*child_status != PEAT_OK) {
        snprintf(why, nwhy, "kernel '%s' failed: %s", k->name,
                 *child_status == -1 ? "exited without finishing" : child_msg);
        st = PEAT_ERR_KERNEL;
    }
    munmap(child_status, sizeof(int) + 256);
    return st;
}

/* Adds one output tensor to an accumulator with its magnitude and 2-D view. */
static peat_status acc_output(peat_analyzer_acc_t *acc, const peat_args *in, int o,
                              const peat_tensor *test, const peat_tensor *exact, int64_t depth)
{
    int64_t n = peat_tensor_numel(exact);
    double *mag = malloc((size_t)n * sizeof *mag);
    if (!mag) return PEAT_ERROR(PEAT_ERR_NOMEM, "magnitude buffer");
    peat_status st = peat_golden_magnitude(in, o, exact, mag);
    int64_t cols = exact->shape[exact->ndim - 1];
    if (st == PEAT_OK) st = peat_analyzer_acc_add(acc, test, exact, mag, depth, n / cols, cols);
    free(mag);
    return st;
}

typedef struct {
    peat_analyzer_acc_t *cand, *gold;
} accs;

static peat_status playback(const peat_campaign_opts *o, const peat_kernel *k, peat_record_list *recs,
                            accs *A, peat_campaign_result *res)
{
    for (int64_t i = 0; i < recs->n; i++) {
        peat_record *r = recs->items[i];
        PEAT_TRY(peat_record_compute_exact(r));
        peat_args a = peat_record_args(r);
        PEAT_TRY(alloc_shared_outputs(&a, r->golden, r->n_out));
        char why[256];
        peat_status st = run_candidate(k, &a, o->isolate, o->kernel_timeout_s, why, sizeof why);
        if (st == PEAT_ERR_KERNEL) {
            if (res->n_kernel_failures++ == 0)
                snprintf(res->kernel_failure, sizeof res->kernel_failure, "call %lld (%.40s, iter %lld): %.150s",
                         (long long)r->id, r->layer, (long long)r->iter, why);
            free_shared_outputs(&a);
            continue;
        }
        if (st != PEAT_OK) {
            free_shared_outputs(&a);
            return st;
        }
        int64_t depth = peat_op_info_get(r->op)->depth(&r->p);
        for (int out = 0; out < r->n_out && st == PEAT_OK; out++) {
            st = acc_output(A->cand, &a, out, a.out[out], r->exact[out], depth);
            if (st == PEAT_OK) st = acc_output(A->gold, &a, out, r->golden[out], r->exact[out], depth);
        }
        /* determinism: the first calls run a second time and are compared bitwise */
        if (st == PEAT_OK && i < o->repeats) {
            peat_args b = peat_record_args(r);
            st = alloc_shared_outputs(&b, r->golden, r->n_out);
            if (st == PEAT_OK &&
                run_candidate(k, &b, o->isolate, o->kernel_timeout_s, why, sizeof why) == PEAT_OK)
                for (int out = 0; out < r->n_out; out++)
                    peat_analyzer_acc_add_repeat(A->cand, a.out[out], b.out[out]);
            free_shared_outputs(&b);
        }
        free_shared_outputs(&a);
        if (st != PEAT_OK) return st;
    }
    return PEAT_OK;
}

static void utc_stamp(char *buf, size_t n, const char *fmt)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, fmt, &tm);
}

peat_status peat_campaign_run(const peat_campaign_opts *o, peat_campaign_result *res)
{
    memset(res, 0, sizeof *res);
    double t_start = peat_now();
    PEAT_TRY(peat_registry_init());
    for (int i = 0; i < o->n_plugins; i++) PEAT_TRY(peat_plugin_load(o->plugins[i], NULL));
    if (!o->kernel || !o->kernel[0]) return PEAT_ERROR(PEAT_ERR_INVAL, "--kernel NAME is required");
    const peat_kernel *k = peat_registry_find(o->kernel);
    if (!k) {
        char names[1024] = "";
        for (int i = 0; i < peat_registry_count(); i++) {
            const peat_kernel *c = peat_registry_at(i);
            if (c->role != PEAT_ROLE_CANDIDATE) continue;
            if (strlen(names) + strlen(c->name) + 3 < sizeof names) {
                if (names[0]) strcat(names, ", ");
                strcat(names, c->name);
            }
        }
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "unknown kernel '%s'; available candidates: %s", o->kernel, names);
    }
    if (k->role == PEAT_ROLE_EXACT)
        return PEAT_ERROR(PEAT_ERR_INVAL, "'%s' is the exact reference, not a kernel to validate", k->name);
    /* "auto" means the kernel's own backend; an explicit one must match it */
    const char *want = !o->backend || strcmp(o->backend, "auto") == 0 ? k->backend : o->backend;
    peat_backend_t be = NULL;
    PEAT_TRY(peat_backend_open(want, 0, &be));
    peat_device_info dev;
    peat_backend_device_info(be, &dev);
    const char *backend_name = peat_backend_name(be);
    int backend_ok = strcmp(backend_name, k->backend) == 0;
    peat_backend_close(be);
    if (!backend_ok)
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "kernel '%s' runs on backend '%s', selected backend is '%s'",
                          k->name, k->backend, backend_name);

    const char *flow;
    PEAT_TRY(choose_flow(o, k, &flow));
    snprintf(res->flow, sizeof res->flow, "%s", flow);
    int64_t iters = o->iters > 0 ? o->iters : default_iters(flow);
    int64_t calls = o->calls > 0 ? o->calls : 48;
    if (o->iters < 0 || o->calls < 0 || iters > 1000000 || calls > 1000000)
        return PEAT_ERROR(PEAT_ERR_INVAL, "--iters and --calls must be in 1..1000000");

    /* output directory and campaign file */
    char stamp[32];
    if (o->out_dir) snprintf(res->out_dir, sizeof res->out_dir, "%s", o->out_dir);
    else {
        utc_stamp(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ");
        snprintf(res->out_dir, sizeof res->out_dir, "peat-out/%s-%s-%s", k->name, flow, stamp);
    }
    PEAT_TRY(mkdir_p(res->out_dir));
    char h5[600], partial[620];
    snprintf(h5, sizeof h5, "%s/campaign.h5", res->out_dir);
    snprintf(partial, sizeof partial, "%s.partial", h5);
    if (file_exists(h5) && !o->force)
        return PEAT_ERROR(PEAT_ERR_IO, "%s already holds a finished campaign (use another --out or --force)", h5);
    if (file_exists(partial) && !o->resume && !o->force)
        return PEAT_ERROR(PEAT_ERR_IO, "%s holds an unfinished campaign: continue it with --resume, or --force", partial);

    peat_store_t *store = NULL;
    if (o->resume && file_exists(partial)) {
        PEAT_TRY(peat_store_open(partial, 1, &store));
        peat_store_meta m;
        peat_status st = peat_store_meta_get(store, &m);
        if (st == PEAT_OK && (strcmp(m.kernel, k->name) || strcmp(m.flow, flow) || m.seed != o->seed ||
                              m.iters != iters)) {
            st = PEAT_ERROR(PEAT_ERR_INVAL,
                            "--resume: %s was started with --kernel %s --flow %s --seed %llu --iters %lld; "
                            "give the same options",
                            partial, m.kernel, m.flow, (unsigned long long)m.seed, (long long)m.iters);
        }
        if (st != PEAT_OK) {
            peat_store_close(store);
            return st;
        }
    } else {
        if (file_exists(partial)) unlink(partial); /* --force */
        peat_store_meta m;
        memset(&m, 0, sizeof m);
        snprintf(m.flow, sizeof m.flow, "%s", flow);
        snprintf(m.kernel, sizeof m.kernel, "%s", k->name);
        snprintf(m.backend, sizeof m.backend, "%s", backend_name);
        snprintf(m.device, sizeof m.device, "%s", dev.name);
        m.seed = o->seed;
        m.iters = iters;
        snprintf(m.peat_version, sizeof m.peat_version, "%s", PEAT_VERSION_STRING);
        utc_stamp(m.created, sizeof m.created, "%Y-%m-%dT%H:%M:%SZ");
        snprintf(m.argv, sizeof m.argv, "%s", o->argv ? o->argv : "");
        PEAT_TRY(peat_store_create(partial, &m, &store));
    }

    /* ---- profile: the golden flow, recording a spread sample of the op's calls ---- */
    double t0 = peat_now();
    peat_flow_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.seed = o->seed;
    cfg.weight_decay = -1.0;
    int64_t per_step = 0;
    peat_status st = calls_per_step(flow, &cfg, k->op, &per_step);
    peat_profile_policy pol;
    memset(&pol, 0, sizeof pol);
    pol.op_mask = 1u << k->op;
    int64_t total = per_step * iters;
    pol.every_k = total > calls ? total / calls : 1;
    pol.max_calls = calls;
    profile_sink ps;
    memset(&ps, 0, sizeof ps);
    ps.store = store;
    peat_exec_t *ex = NULL;
    peat_flow_t *f = NULL;
    peat_profiler_t *prof = peat_profiler_alloc(&pol, sink_both, &ps);
    if (st == PEAT_OK && !prof) st = PEAT_ERROR(PEAT_ERR_NOMEM, "profiler");
    if (st == PEAT_OK) st = peat_exec_create(flow, o->seed, &ex);
    if (st == PEAT_OK) st = peat_profiler_attach(prof, ex);
    if (st == PEAT_OK) st = peat_flow_create(flow, &cfg, ex, &f);
    for (int64_t it = 0; st == PEAT_OK && it < iters; it++) {
        peat_flow_metrics m;
        st = peat_flow_step(f, &m);
        if (st == PEAT_OK && !isfinite(m.loss))
            st = PEAT_ERROR(PEAT_ERR_NUMERIC, "golden training diverged: loss %g at iteration %lld", m.loss, (long long)it);
        if (it == 0) res->loss_first = m.loss;
        res->loss_last = m.loss;
    }
    peat_flow_free(f);
    peat_exec_free(ex);
    peat_profiler_free(prof);
    peat_status cst = peat_store_close(store);
    if (st == PEAT_OK) st = cst;
    if (st == PEAT_OK && rename(partial, h5) != 0)
        st = PEAT_ERROR(PEAT_ERR_IO, "cannot finish %s: %s", h5, strerror(errno));
    res->n_records = ps.list.n;
    res->t_profile = peat_now() - t0;
    if (st != PEAT_OK) {
        peat_record_list_clear(&ps.list);
        return st;
    }
    if (ps.list.n == 0) {
        peat_record_list_clear(&ps.list);
        return PEAT_ERROR(PEAT_ERR_INVAL, "no %s calls were recorded in flow %s", peat_op_name(k->op), flow);
    }

    /* ---- playback + analyze ---- */
    t0 = peat_now();
    accs A = {peat_analyzer_acc_alloc(k->name, k->op),
              peat_analyzer_acc_alloc(peat_registry_role(k->op, PEAT_ROLE_GOLDEN, "cpu")->name, k->op)};
    if (!A.cand || !A.gold) st = PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer");
    if (st == PEAT_OK) st = playback(o, k, &ps.list, &A, res);
    res->t_playback = peat_now() - t0;
    t0 = peat_now();
    if (st == PEAT_OK) st = peat_analyzer_signature(A.cand, &res->cand);
    if (st == PEAT_OK) st = peat_analyzer_signature(A.gold, &res->golden);
    peat_analyzer_acc_free(A.cand);
    peat_analyzer_acc_free(A.gold);
    peat_record_list_clear(&ps.list);
    if (st != PEAT_OK) return st;

    /* ---- detect ---- */
    peat_detector_ctx dctx = {k->in_dtype, k->out_dtype, k->acc_dtype};
    if (res->n_kernel_failures > 0) {
        peat_finding *fd = &res->findings[0];
        memset(fd, 0, sizeof *fd);
        fd->cls = PEAT_FIND_OUT_OF_BOUND;
        fd->confidence = 1.0;
        snprintf(fd->params, sizeof fd->params, "failed_calls=%lld", (long long)res->n_kernel_failures);
        snprintf(fd->evidence[0], sizeof fd->evidence[0], "the kernel failed on %lld of %lld calls; first: %.170s",
                 (long long)res->n_kernel_failures, (long long)res->n_records, res->kernel_failure);
        fd->n_evidence = 1;
        fd->accept = PEAT_ACCEPT_FAIL;
        res->n_findings = 1;
    }
    if (res->n_kernel_failures < res->n_records)
        res->n_findings += peat_detector_run(&res->cand, &res->golden, &dctx, res->findings + res->n_findings,
                                             (int)(sizeof res->findings / sizeof res->findings[0]) - res->n_findings);
    res->verdict = peat_detector_verdict(res->findings, res->n_findings);
    res->t_analyze = peat_now() - t0;
    res->t_total = peat_now() - t_start;
    return peat_report_write(o, res);
}
