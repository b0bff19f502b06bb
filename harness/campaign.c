/* campaign.c: runs one validation campaign: profile the golden flow, replay the recorded calls
 * through the candidate (isolated in a child process), analyse, detect, report. */
#define _DEFAULT_SOURCE
#include "harness/campaign.h"
#include "harness/harness.h"

#include "analyzer/analyzer.h"
#include "golden/golden.h"
#include "store/store.h"
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
int64_t peat_campaign_default_iters(const char *flow)
{
    if (strcmp(flow, "mlp") == 0) return 200;
    return 60; /* cnn, gpt, gpt_unfused: ~15-20 ms a step */
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
        return PEAT_ERROR(PEAT_ERR_IO, "cannot create output directory %s: %s", buf,
                          strerror(errno));
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

/* ---- policy specs ---- */

peat_status peat_iter_spec_check(const char *spec)
{
    if (!spec || !strcmp(spec, "last") || !strcmp(spec, "none")) return PEAT_OK;
    if (!strncmp(spec, "every:", 6)) {
        char *end;
        long long n = strtoll(spec + 6, &end, 10);
        if (*end || n < 1)
            return PEAT_ERROR(PEAT_ERR_INVAL, "bad iteration list '%s' (every:N needs N >= 1)",
                              spec);
        return PEAT_OK;
    }
    const char *c = spec;
    while (*c) {
        char *end;
        long long v = strtoll(c, &end, 10);
        if (end == c || v < 0 || (*end && *end != ','))
            return PEAT_ERROR(PEAT_ERR_INVAL,
                              "bad iteration list '%s' (last, none, every:N or 0,10,20)", spec);
        c = *end ? end + 1 : end;
    }
    return PEAT_OK;
}

int peat_iter_spec_match(const char *spec, int64_t it, int64_t iters)
{
    if (!spec || !strcmp(spec, "none")) return 0;
    if (!strcmp(spec, "last")) return it == iters - 1;
    if (!strncmp(spec, "every:", 6)) {
        long long n = atoll(spec + 6);
        return n > 0 && (it % n == n - 1 || it == iters - 1);
    }
    for (const char *c = spec; *c;) {
        char *end;
        long long v = strtoll(c, &end, 10);
        if (v == it) return 1;
        c = *end ? end + 1 : end;
    }
    return 0;
}

peat_status peat_op_mask_parse(const char *list, uint32_t *mask)
{
    *mask = 0;
    if (!list || !strcmp(list, "all")) {
        *mask = (PEAT_OP_COUNT >= 32) ? 0xffffffffu : ((1u << PEAT_OP_COUNT) - 1u);
        return PEAT_OK;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        peat_op_kind op;
        if (peat_op_parse(t, &op) != PEAT_OK)
            return PEAT_ERROR(PEAT_ERR_INVAL, "unknown op '%s' in op list '%s' (see `peat list`)",
                              t, list);
        *mask |= 1u << op;
    }
    if (!*mask) return PEAT_ERROR(PEAT_ERR_INVAL, "empty op list");
    return PEAT_OK;
}

peat_status peat_compress_parse(const char *spec, int *deflate_level, int *min_saving_pct)
{
    *deflate_level = 0;
    *min_saving_pct = 0;
    if (!spec || !strcmp(spec, "auto")) return PEAT_OK;
    if (!strcmp(spec, "all")) {
        *min_saving_pct = -1;
        return PEAT_OK;
    }
    if (!strcmp(spec, "none")) {
        *deflate_level = -1;
        return PEAT_OK;
    }
    char *end = NULL;
    long pct = strtol(spec, &end, 10);
    if (end != spec && (*end == 0 || (*end == '%' && end[1] == 0)) && pct >= 1 && pct <= 100) {
        *min_saving_pct = (int)pct;
        return PEAT_OK;
    }
    return PEAT_ERROR(PEAT_ERR_INVAL,
                      "--compress must be auto, all, none or a percent 1..100, got '%s'", spec);
}

peat_status peat_phase_parse(const char *list, int *fwd, int *bwd, int *opt)
{
    *fwd = *bwd = *opt = 0;
    if (!list) return PEAT_OK;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "fwd"))
            *fwd = 1;
        else if (!strcmp(t, "bwd"))
            *bwd = 1;
        else if (!strcmp(t, "opt"))
            *opt = 1;
        else
            return PEAT_ERROR(PEAT_ERR_INVAL, "unknown phase '%s' (fwd, bwd, opt)", t);
    }
    if (!*fwd && !*bwd && !*opt) return PEAT_ERROR(PEAT_ERR_INVAL, "empty phase list");
    return PEAT_OK;
}

/* ---- flow choice ---- */

static peat_status choose_flow(const peat_campaign_opts *o, const peat_kernel *k, const char **flow)
{
    const char *const *names = peat_flow_names();
    /* the op mask follows the optimizer: an SGD kernel needs --optimizer sgd */
    peat_flow_config fc;
    memset(&fc, 0, sizeof fc);
    fc.optimizer = o->optimizer && !strcmp(o->optimizer, "sgd") ? PEAT_OPTIM_SGD : PEAT_OPTIM_ADAMW;
    if (o->flow) {
        int known = 0;
        for (int i = 0; names[i]; i++) known |= strcmp(names[i], o->flow) == 0;
        if (!known)
            return PEAT_ERROR(PEAT_ERR_NOTFOUND, "unknown flow '%s' (see `peat list`)", o->flow);
        if (!(peat_flow_op_mask_for(o->flow, &fc) & (1u << k->op)))
            return PEAT_ERROR(PEAT_ERR_INVAL, "flow '%s' never calls %s, the op of kernel '%s'",
                              o->flow, peat_op_name(k->op), k->name);
        *flow = o->flow;
        return PEAT_OK;
    }
    for (int i = 0; names[i]; i++)
        if (peat_flow_op_mask_for(names[i], &fc) & (1u << k->op)) {
            *flow = names[i];
            return PEAT_OK;
        }
    return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "no built-in flow calls %s (kernel '%s')%s",
                      peat_op_name(k->op), k->name,
                      k->op == PEAT_OP_SGD ? "; SGD updates run with --optimizer sgd" : "");
}

/* ---- profile ---- */

typedef struct {
    peat_record_list list; /* records of the candidate's op, for playback */
    peat_store_t *store;
    peat_op_kind keep_op;
    int64_t skipped_existing, stored;
} profile_sink;

/* Writes a record to the store unless a resumed file has it; keeps those of the candidate's op
 * in memory for playback. */
static peat_status sink_both(void *user, peat_record *r)
{
    profile_sink *ps = user;
    if (ps->store) {
        if (peat_store_call_has(ps->store, r->id))
            ps->skipped_existing++;
        else {
            peat_status st = peat_store_call_write(ps->store, r);
            if (st != PEAT_OK) {
                peat_record_free(r);
                return st;
            }
            ps->stored++;
        }
    }
    if (r->op != ps->keep_op) {
        peat_record_free(r);
        return PEAT_OK;
    }
    return peat_record_list_sink(&ps->list, r);
}

typedef struct {
    const char *spec;
    int64_t iters;
} iter_sel;

static int iter_selected(void *user, int64_t it)
{
    iter_sel *s = user;
    return peat_iter_spec_match(s->spec, it, s->iters);
}

typedef struct {
    int64_t n;
    uint32_t mask;
} count_hook_state;

static peat_status count_hook(void *user, const peat_kernel *k, const peat_args *a,
                              const peat_call_info *info, int after)
{
    count_hook_state *c = user;
    if (!after && (c->mask & (1u << a->op))) c->n++;
    return PEAT_OK;
}

/* Calls of the ops in mask per training step (one probe step on a throwaway flow instance). */
static peat_status calls_per_step(const char *flow, const peat_flow_config *cfg, uint32_t mask,
                                  int64_t *n)
{
    peat_exec_t *ex = NULL;
    peat_flow_t *f = NULL;
    count_hook_state c = {0, mask};
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
static peat_status run_candidate(const peat_kernel *k, const peat_args *a, int isolate,
                                 double timeout, char *why, size_t nwhy)
{
    why[0] = 0;
    if (!isolate) {
        /* the call's shapes come from a valid record: any error is the kernel's failure */
        peat_status st = peat_kernel_run(k, a);
        if (st == PEAT_OK) return PEAT_OK;
        snprintf(why, nwhy, "kernel '%s' failed: %s", k->name, peat_error_last());
        return PEAT_ERR_KERNEL;
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
    } else if (*child_status == -1 && WIFEXITED(wst) && WEXITSTATUS(wst) != 0) {
        /* a sanitizer or the kernel itself turned the fault into an exit */
        snprintf(why, nwhy, "kernel '%s' crashed (exit code %d before returning)", k->name,
                 WEXITSTATUS(wst));
        st = PEAT_ERR_KERNEL;
    } else if (*child_status != PEAT_OK) {
        snprintf(why, nwhy, "kernel '%s' failed: %s", k->name,
                 *child_status == -1 ? "exited without finishing" : child_msg);
        st = PEAT_ERR_KERNEL;
    }
    munmap(child_status, sizeof(int) + 256);
    return st;
}

/* Adds output o of a call to both accumulators (candidate's and golden's outputs against the
 * exact one), with the output's magnitude (computed once), depth, terms and 2-D view. */
static peat_status acc_output(peat_analyzer_acc_t *cand, peat_analyzer_acc_t *gold,
                              const peat_args *in, int o, const peat_tensor *test,
                              const peat_tensor *golden, const peat_tensor *exact)
{
    int64_t n = peat_tensor_numel(exact);
    double *mag = malloc((size_t)n * sizeof *mag);
    if (!mag) return PEAT_ERROR(PEAT_ERR_NOMEM, "magnitude buffer");
    peat_status st = peat_golden_magnitude(in, o, exact, mag);
    int64_t cols = exact->shape[exact->ndim - 1], depth = peat_op_info_get(in->op)->depth(&in->p);
    int64_t terms = peat_golden_terms(in, o);
    /* an input of the output's size lets the analyzer see input-dependent (smooth) errors */
    const peat_tensor *x = in->n_in > 0 && peat_tensor_numel(in->in[0]) == n ? in->in[0] : NULL;
    if (st == PEAT_OK)
        st = peat_analyzer_acc_add_terms(cand, test, exact, mag, depth, terms, n / cols, cols, x);
    if (st == PEAT_OK)
        st = peat_analyzer_acc_add_terms(gold, golden, exact, mag, depth, terms, n / cols, cols, x);
    free(mag);
    return st;
}

typedef struct {
    peat_analyzer_acc_t *cand, *gold;
} accs;

static peat_status playback(const peat_campaign_opts *o, const peat_kernel *k,
                            peat_record_list *recs, accs *A, peat_campaign_result *res)
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
                snprintf(res->kernel_failure, sizeof res->kernel_failure,
                         "call %lld (%.40s, iter %lld): %.150s", (long long)r->id, r->layer,
                         (long long)r->iter, why);
            free_shared_outputs(&a);
            continue;
        }
        if (st != PEAT_OK) {
            free_shared_outputs(&a);
            return st;
        }
        for (int out = 0; out < r->n_out && st == PEAT_OK; out++)
            st = acc_output(A->cand, A->gold, &a, out, a.out[out], r->golden[out], r->exact[out]);
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

/* Saves the flow's weights and optimizer state as the "checkpoint" snapshot of iteration it. */
static peat_status save_checkpoint(peat_store_t *store, int64_t it, peat_flow_t *f)
{
    int n = peat_flow_state_count(f);
    const peat_tensor **t = malloc((size_t)n * sizeof *t);
    const char **names = malloc((size_t)n * sizeof *names);
    peat_status st = t && names ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "checkpoint list");
    for (int i = 0; st == PEAT_OK && i < n; i++) t[i] = peat_flow_state(f, i, &names[i]);
    if (st == PEAT_OK) st = peat_store_state_write(store, it, "checkpoint", n, t, names);
    free(t);
    free(names);
    return st;
}

/* Initialises the flow from the last checkpoint in another campaign file: every state tensor
 * must be found by name with the same shape (a checkpoint of another model is refused). */
static peat_status load_checkpoint(const char *path, peat_flow_t *f)
{
    peat_store_t *src = NULL;
    PEAT_TRY(peat_store_open(path, 0, &src));
    int64_t best = -1, iter;
    char tag[32];
    int n;
    for (int64_t i = 0; i < peat_store_state_count(src); i++)
        if (peat_store_state_info(src, i, &iter, tag, &n) == PEAT_OK &&
            !strcmp(tag, "checkpoint") && iter > best)
            best = iter;
    peat_status st = PEAT_OK;
    peat_store_state *cp = NULL;
    if (best < 0)
        st = PEAT_ERROR(PEAT_ERR_NOTFOUND, "%s holds no checkpoint to finetune from", path);
    if (st == PEAT_OK) st = peat_store_state_read(src, best, "checkpoint", &cp);
    for (int i = 0; st == PEAT_OK && i < peat_flow_state_count(f); i++) {
        const char *name;
        peat_tensor *dst = peat_flow_state(f, i, &name);
        int j = 0;
        while (j < cp->n && strcmp(cp->names[j], name)) j++;
        if (j == cp->n)
            st = PEAT_ERROR(PEAT_ERR_FORMAT, "checkpoint in %s has no tensor '%s': another model?",
                            path, name);
        else if (peat_tensor_numel(cp->t[j]) != peat_tensor_numel(dst) ||
                 cp->t[j]->dtype != dst->dtype)
            st = PEAT_ERROR(PEAT_ERR_FORMAT, "checkpoint tensor '%s' in %s has another shape", name,
                            path);
        else
            memcpy(dst->data, cp->t[j]->data, peat_tensor_nbytes(dst));
    }
    if (st == PEAT_OK) peat_flow_set_step(f, best + 1);
    peat_store_state_free(cp);
    peat_store_close(src);
    return st;
}

static void utc_stamp(char *buf, size_t n, const char *fmt)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, fmt, &tm);
}

typedef struct {
    double below, above;
} input_range;

/* Fractions of nonzero float input values below the smallest normal and above the largest finite
 * value of fmt (NaN when fmt is not a narrow float format). */
static input_range measure_input_range(const peat_record_list *recs, peat_dtype fmt)
{
    input_range r = {NAN, NAN};
    double lo, hi;
    if (fmt == PEAT_DTYPE_F16)
        lo = 0x1p-14, hi = 65504.0;
    else if (fmt == PEAT_DTYPE_BF16)
        lo = 0x1p-126, hi = 3.3895313892515355e38;
    else
        return r;
    int64_t n = 0, below = 0, above = 0;
    for (int64_t i = 0; i < recs->n; i++)
        for (int k = 0; k < recs->items[i]->n_in; k++) {
            const peat_tensor *t = recs->items[i]->in[k];
            if (t->dtype != PEAT_DTYPE_F32) continue;
            const float *x = peat_f32(t);
            for (int64_t e = 0; e < peat_tensor_numel(t); e++) {
                double a = fabs((double)x[e]);
                if (a == 0.0) continue;
                n++;
                below += a < lo;
                above += a > hi;
            }
        }
    if (n > 0) r.below = (double)below / (double)n, r.above = (double)above / (double)n;
    return r;
}

/* Adds both signatures to the finished campaign file (the analyze stage's output). */
static peat_status store_signatures(const char *h5, const peat_campaign_result *res)
{
    peat_store_t *s = NULL;
    PEAT_TRY(peat_store_open(h5, 1, &s));
    const peat_signature *sig[2] = {&res->cand, &res->golden};
    peat_status st = PEAT_OK;
    for (int i = 0; i < 2 && st == PEAT_OK; i++) {
        int n = peat_signature_to_json(sig[i], NULL, 0) + 1;
        char *js = malloc((size_t)n);
        if (!js)
            st = PEAT_ERROR(PEAT_ERR_NOMEM, "signature json");
        else {
            peat_signature_to_json(sig[i], js, (size_t)n);
            st = peat_store_signature_write(s, sig[i]->kernel, js);
            free(js);
        }
    }
    peat_status cst = peat_store_close(s);
    return st != PEAT_OK ? st : cst;
}

peat_status peat_campaign_run(const peat_campaign_opts *o, peat_campaign_result *res)
{
    memset(res, 0, sizeof *res);
    double t_start = peat_now();
    PEAT_TRY(peat_builtin_init());
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
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "unknown kernel '%s'; available candidates: %s",
                          o->kernel, names);
    }
    if (k->role == PEAT_ROLE_EXACT)
        return PEAT_ERROR(PEAT_ERR_INVAL, "'%s' is the exact reference, not a kernel to validate",
                          k->name);
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
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED,
                          "kernel '%s' runs on backend '%s', selected backend is '%s'", k->name,
                          k->backend, backend_name);

    const char *flow = NULL;
    PEAT_TRY(choose_flow(o, k, &flow));
    snprintf(res->flow, sizeof res->flow, "%s", flow);
    int64_t iters = o->iters > 0 ? o->iters : peat_campaign_default_iters(flow);
    int64_t calls = o->calls > 0 ? o->calls : PEAT_CAMPAIGN_DEFAULT_CALLS;
    if (o->iters < 0 || o->calls < 0 || iters > 1000000 || calls > 1000000)
        return PEAT_ERROR(PEAT_ERR_INVAL, "--iters and --calls must be in 1..1000000");

    /* output directory and campaign file */
    char stamp[32];
    if (o->out_dir)
        snprintf(res->out_dir, sizeof res->out_dir, "%s", o->out_dir);
    else {
        utc_stamp(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ");
        snprintf(res->out_dir, sizeof res->out_dir, "peat-out/%s-%s-%s", k->name, flow, stamp);
    }
    PEAT_TRY(mkdir_p(res->out_dir));
    char h5[600], partial[620];
    snprintf(h5, sizeof h5, "%s/campaign.h5", res->out_dir);
    snprintf(partial, sizeof partial, "%s.partial", h5);
    if (file_exists(h5) && !o->force)
        return PEAT_ERROR(
            PEAT_ERR_IO, "%s already holds a finished campaign (use another --out or --force)", h5);
    if (file_exists(partial) && !o->resume && !o->force)
        return PEAT_ERROR(PEAT_ERR_IO,
                          "%s holds an unfinished campaign: continue it with --resume, or --force",
                          partial);

    /* everything that decides what is recorded: a resumed run must use the same */
    char policy[256];
    snprintf(policy, sizeof policy,
             "calls=%lld ops=%s every=%lld iters=%lld:%lld phase=%s checkpoints=%s activations=%s "
             "optimizer=%s task=%d finetune=%s sizes=%d,%d,%d,%d lr=%g",
             (long long)calls, o->record_ops ? o->record_ops : "kernel", (long long)o->record_every,
             (long long)o->record_iter_lo, (long long)o->record_iter_hi,
             o->record_phase ? o->record_phase : "all",
             o->checkpoint_iters ? o->checkpoint_iters : "last",
             o->activation_iters ? o->activation_iters : "none",
             o->optimizer ? o->optimizer : "adamw", o->task,
             o->finetune_from ? o->finetune_from : "-", o->batch, o->width, o->depth, o->seq,
             o->lr);
    peat_store_t *store = NULL;
    if (o->resume && !file_exists(partial))
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "--resume: no unfinished campaign (%s) to continue",
                          partial);
    if (o->resume) {
        PEAT_TRY(peat_store_open(partial, 1, &store));
        peat_store_meta m;
        peat_status st = peat_store_meta_get(store, &m);
        if (st == PEAT_OK && (strcmp(m.kernel, k->name) || strcmp(m.flow, flow) ||
                              m.seed != o->seed || m.iters != iters)) {
            st = PEAT_ERROR(
                PEAT_ERR_INVAL,
                "--resume: %s was started with --kernel %s --flow %s --seed %llu --iters %lld; "
                "give the same options",
                partial, m.kernel, m.flow, (unsigned long long)m.seed, (long long)m.iters);
        } else if (st == PEAT_OK && strcmp(m.policy, policy) != 0) {
            st = PEAT_ERROR(PEAT_ERR_INVAL,
                            "--resume: recording options differ from the interrupted run's (%s)",
                            m.policy);
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
        snprintf(m.policy, sizeof m.policy, "%s", policy);
        snprintf(m.dtypes, sizeof m.dtypes, "storage f32, kernel in %s acc %s out %s, exact f64",
                 peat_dtype_name(k->in_dtype), peat_dtype_name(k->acc_dtype),
                 peat_dtype_name(k->out_dtype));
        snprintf(m.build, sizeof m.build, "%s, %s", PEAT_BUILD_TYPE, __VERSION__);
        if (dev.clock_mhz > 0) snprintf(m.clocks, sizeof m.clocks, "cpu0 %.0f MHz", dev.clock_mhz);
        gethostname(m.host, sizeof m.host - 1);
        PEAT_TRY(peat_compress_parse(o->compress, &m.deflate_level, &m.min_saving_pct));
        PEAT_TRY(peat_store_create(partial, &m, &store));
    }

    /* ---- profile: the golden flow, recording a spread sample of the op's calls ---- */
    double t0 = peat_now();
    peat_flow_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.seed = o->seed;
    cfg.weight_decay = -1.0;
    cfg.task = o->task;
    cfg.batch = o->batch, cfg.width = o->width, cfg.depth = o->depth, cfg.seq = o->seq,
    cfg.lr = o->lr;
    cfg.optimizer =
        o->optimizer && !strcmp(o->optimizer, "sgd") ? PEAT_OPTIM_SGD : PEAT_OPTIM_ADAMW;
    peat_profile_policy pol;
    memset(&pol, 0, sizeof pol);
    peat_status st = PEAT_OK;
    if (o->record_ops) st = peat_op_mask_parse(o->record_ops, &pol.op_mask);
    pol.op_mask |= 1u << k->op; /* the candidate's op is always recorded: playback needs it */
    if (st == PEAT_OK) st = peat_phase_parse(o->record_phase, &pol.fwd, &pol.bwd, &pol.opt);
    int64_t per_step = 0;
    if (st == PEAT_OK) st = calls_per_step(flow, &cfg, pol.op_mask, &per_step);
    int64_t window = (o->record_iter_hi > 0 ? o->record_iter_hi : iters) - o->record_iter_lo;
    int64_t total = per_step * (window > 0 ? window : 0);
    pol.every_k = o->record_every > 0 ? o->record_every : (total > calls ? total / calls : 1);
    pol.max_calls = calls;
    pol.iter_lo = o->record_iter_lo;
    pol.iter_hi = o->record_iter_hi;
    profile_sink ps, acts;
    memset(&ps, 0, sizeof ps);
    memset(&acts, 0, sizeof acts);
    ps.store = acts.store = store;
    ps.keep_op = k->op;
    acts.keep_op = PEAT_OP_COUNT; /* activations are stored, not replayed */
    iter_sel act_sel = {o->activation_iters, iters};
    peat_profile_policy apol;
    memset(&apol, 0, sizeof apol);
    apol.fwd = 1;
    apol.every_k = 1;
    apol.iter_filter = iter_selected;
    apol.iter_filter_user = &act_sel;
    int want_acts = o->activation_iters && strcmp(o->activation_iters, "none") != 0;
    peat_exec_t *ex = NULL;
    peat_flow_t *f = NULL;
    peat_profiler_t *prof = peat_profiler_alloc(&pol, sink_both, &ps);
    peat_profiler_t *aprof = want_acts ? peat_profiler_alloc(&apol, sink_both, &acts) : NULL;
    if (st == PEAT_OK && (!prof || (want_acts && !aprof)))
        st = PEAT_ERROR(PEAT_ERR_NOMEM, "profiler");
    if (st == PEAT_OK) st = peat_exec_create(flow, o->seed, &ex);
    if (st == PEAT_OK) st = peat_profiler_attach(prof, ex);
    if (st == PEAT_OK && aprof) st = peat_profiler_attach(aprof, ex);
    if (st == PEAT_OK) st = peat_flow_create(flow, &cfg, ex, &f);
    if (st == PEAT_OK && o->finetune_from) st = load_checkpoint(o->finetune_from, f);
    const char *ckpt = o->checkpoint_iters ? o->checkpoint_iters : "last";
    for (int64_t it = 0; st == PEAT_OK && it < iters; it++) {
        peat_flow_metrics m;
        st = peat_flow_step(f, &m);
        if (st == PEAT_OK && !isfinite(m.loss))
            st = PEAT_ERROR(PEAT_ERR_NUMERIC, "golden training diverged: loss %g at iteration %lld",
                            m.loss, (long long)it);
        if (it == 0) res->loss_first = m.loss;
        res->loss_last = m.loss;
        if (st == PEAT_OK && !peat_store_metrics_has(store, it))
            st = peat_store_metrics_append(store, it, m.loss, m.accuracy);
        if (st == PEAT_OK && peat_iter_spec_match(ckpt, it, iters)) {
            if (!peat_store_state_has(store, it, "checkpoint")) st = save_checkpoint(store, it, f);
            res->n_checkpoints++;
        }
    }
    if (st == PEAT_OK) {
        peat_flow_metrics m;
        st = peat_flow_eval(f, &m);
        res->eval_loss = m.loss;
        res->eval_accuracy = m.accuracy;
    }
    peat_flow_free(f);
    peat_exec_free(ex);
    peat_profiler_free(prof);
    peat_profiler_free(aprof);
    peat_status cst = peat_store_close(store);
    if (st == PEAT_OK) st = cst;
    res->n_records = ps.list.n;
    res->n_activation_records = acts.stored + acts.skipped_existing;
    res->n_stored_records = ps.stored + acts.stored;
    res->t_profile = peat_now() - t0;
    if (st != PEAT_OK) {
        peat_record_list_clear(&ps.list);
        return st;
    }
    if (ps.list.n == 0) {
        peat_record_list_clear(&ps.list);
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "no %s calls were recorded in flow %s (check the --record-* window)",
                          peat_op_name(k->op), flow);
    }

    /* where the kernel declares a narrow input format: how many input values leave its range */
    input_range in_range = measure_input_range(&ps.list, k->in_dtype);

    /* ---- playback + analyze ---- */
    t0 = peat_now();
    accs A = {
        peat_analyzer_acc_alloc(k->name, k->op),
        peat_analyzer_acc_alloc(peat_registry_role(k->op, PEAT_ROLE_GOLDEN, "cpu")->name, k->op)};
    if (!A.cand || !A.gold) st = PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer");
    /* a GPU runtime initialised in this process does not survive fork: GPU kernels run in-process
     */
    peat_campaign_opts po = *o;
    po.isolate = o->isolate && strcmp(k->backend, "cpu") == 0;
    if (st == PEAT_OK) st = playback(&po, k, &ps.list, &A, res);
    res->t_playback = peat_now() - t0;
    t0 = peat_now();
    if (st == PEAT_OK) st = peat_analyzer_signature(A.cand, &res->cand);
    if (st == PEAT_OK) st = peat_analyzer_signature(A.gold, &res->golden);
    peat_analyzer_acc_free(A.cand);
    peat_analyzer_acc_free(A.gold);
    peat_record_list_clear(&ps.list);
    if (st != PEAT_OK) return st;

    /* ---- detect ---- */
    peat_detector_ctx dctx = peat_detector_ctx_from_kernel(k);
    dctx.in_frac_below_normal = in_range.below;
    dctx.in_frac_above_max = in_range.above;
    if (res->n_kernel_failures > 0) {
        peat_finding *fd = &res->findings[0];
        memset(fd, 0, sizeof *fd);
        fd->cls = PEAT_FIND_OUT_OF_BOUND;
        fd->confidence = 1.0;
        snprintf(fd->params, sizeof fd->params, "failed_calls=%lld",
                 (long long)res->n_kernel_failures);
        snprintf(fd->evidence[0], sizeof fd->evidence[0],
                 "the kernel failed on %lld of %lld calls; first: %.170s",
                 (long long)res->n_kernel_failures, (long long)res->n_records, res->kernel_failure);
        fd->n_evidence = 1;
        fd->accept = PEAT_ACCEPT_FAIL;
        res->n_findings = 1;
    }
    if (res->n_kernel_failures < res->n_records)
        res->n_findings += peat_detector_run(
            &res->cand, &res->golden, &dctx, res->findings + res->n_findings,
            (int)(sizeof res->findings / sizeof res->findings[0]) - res->n_findings);
    res->verdict = peat_detector_verdict(res->findings, res->n_findings);
    /* the file is named complete only once every stage's output is in it */
    PEAT_TRY(store_signatures(partial, res));
    if (rename(partial, h5) != 0)
        return PEAT_ERROR(PEAT_ERR_IO, "cannot finish %s: %s", h5, strerror(errno));
    res->t_analyze = peat_now() - t0;
    res->t_total = peat_now() - t_start;
    return peat_report_write(o, res);
}
