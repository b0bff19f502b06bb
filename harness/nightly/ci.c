/* ci.c: `peat ci SUITE`: expands the suite into kernel x flow x backend items, runs each as its
 * own `peat run` process (a crash, hang or error of one never stops the others), reads back each
 * item's signature.json, applies the suite's allowances, diffs against a baseline. */
#define _DEFAULT_SOURCE
#include "harness/nightly/ci.h"
#include "core/clock.h"
#include "core/dir_tree.h"
#include "harness/campaign/campaign.h"
#include "harness/runtime/builtin.h"
#include "harness/campaign/progress.h"
#include "harness/nightly/jsonread.h"
#include "harness/report/report.h"

#include "models/models.h"
#include "peat/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum { ST_PASS, ST_WARN, ST_FAIL, ST_ERROR, ST_SKIP };
static const char *const status_names[] = {"PASS", "WARN", "FAIL", "ERROR", "SKIP"};

/* ---- plan: the suite's items ---- */

static peat_status item_add(peat_ci_result *res, const peat_kernel *k, const char *flow,
                            const char *backend, const peat_suite_kernel *sk)
{
    if (res->n_items == PEAT_CI_MAX_ITEMS)
        return PEAT_ERROR(PEAT_ERR_INVAL, "%s: more than %d items", res->suite.path,
                          PEAT_CI_MAX_ITEMS);
    peat_ci_item *it = &res->items[res->n_items++];
    memset(it, 0, sizeof *it);
    snprintf(it->kernel, sizeof it->kernel, "%s", k->name);
    snprintf(it->flow, sizeof it->flow, "%s", flow);
    snprintf(it->backend, sizeof it->backend, "%s", backend);
    snprintf(it->op, sizeof it->op, "%s", peat_op_name(k->op));
    char leaf[sizeof it->dir - sizeof "items/"];
    snprintf(leaf, sizeof leaf, "%s-%s-%s", k->name, flow, backend);
    peat_campaign_safe_name(leaf);
    snprintf(it->dir, sizeof it->dir, "items/%s", leaf);
    it->budget_s = sk->budget_s;
    it->max_norm = it->eff_bits = it->rms_ratio = NAN;
    return PEAT_OK;
}

/* The flows of a suite kernel that call its op ("auto": the first built-in flow that does). */
static peat_status kernel_flows(const peat_suite *s, const peat_suite_kernel *sk,
                                const peat_kernel *k, const char *out[], int *n)
{
    const char *const *names = peat_models_flow_names();
    *n = 0;
    int any = sk->n_flows == 0 || (sk->n_flows == 1 && !strcmp(sk->flows[0], "auto"));
    for (int i = 0; names[i] && (!any || *n == 0); i++) {
        int listed = any;
        for (int j = 0; j < sk->n_flows && !listed; j++) listed = !strcmp(sk->flows[j], names[i]);
        if (listed && (peat_models_flow_op_mask(names[i]) & PEAT_OP_BIT(k->op)))
            out[(*n)++] = names[i];
    }
    for (int j = 0; j < sk->n_flows && !any; j++) {
        int known = 0;
        for (int i = 0; names[i]; i++) known |= !strcmp(names[i], sk->flows[j]);
        if (!known)
            return PEAT_ERROR(PEAT_ERR_NOTFOUND, "%s:%d: unknown flow '%s' (see `peat list`)",
                              s->path, sk->line, sk->flows[j]);
    }
    if (*n == 0)
        return PEAT_ERROR(PEAT_ERR_INVAL, "%s:%d: no listed flow calls %s, the op of kernel '%s'",
                          s->path, sk->line, peat_op_name(k->op), k->name);
    return PEAT_OK;
}

/* A suite's backend is "auto" or one this build has (the backend registry's names, cpu and any
 * of opencl, cuda, hip): one that is not built in refuses the suite before anything runs. */
static peat_status backend_check(const peat_suite *s, const peat_suite_kernel *sk, const char *be)
{
    if (!strcmp(be, "auto")) return PEAT_OK;
    const char *built = peat_backend_list(); /* "opencl,cpu" */
    size_t n = strlen(be);
    for (const char *p = built; *p; p = *p ? p + 1 : p) {
        if (!strncmp(p, be, n) && (p[n] == ',' || !p[n])) return PEAT_OK;
        p += strcspn(p, ",");
    }
    return PEAT_ERROR(PEAT_ERR_INVAL,
                      "%s:%d: backend '%s' is not built in (this build has: auto, %s; "
                      "docs/devices.md)",
                      s->path, sk->line, be, built);
}

/* Items of one suite kernel: its flows x the listed backends it runs on ("auto": its own). */
static peat_status expand_kernel(peat_ci_result *res, const peat_suite_kernel *sk)
{
    const peat_suite *s = &res->suite;
    const peat_kernel *k = peat_registry_find(sk->name);
    if (!k || k->role == PEAT_ROLE_EXACT)
        return PEAT_ERROR(PEAT_ERR_NOTFOUND,
                          "%s:%d: '%s' is no kernel to validate (see `peat list`)", s->path,
                          sk->line, sk->name);
    const char *flows[16];
    int nf;
    PEAT_TRY(kernel_flows(s, sk, k, flows, &nf));
    int nb = sk->n_backends ? sk->n_backends : 1;
    for (int b = 0; b < nb; b++) {
        const char *be = sk->n_backends ? sk->backends[b] : "auto";
        PEAT_TRY(backend_check(s, sk, be));
        /* a kernel name may exist once per backend (gemm_new: cpu, opencl, cuda, hip): a listed
         * backend runs the kernel's implementation there, where it has one */
        const peat_kernel *kb = peat_registry_find_on(sk->name, be);
        if (!kb || kb->role == PEAT_ROLE_EXACT) continue;
        for (int f = 0; f < nf; f++) PEAT_TRY(item_add(res, kb, flows[f], kb->backend, sk));
    }
    return PEAT_OK;
}

static peat_status plan(const peat_ci_opts *o, peat_ci_result *res)
{
    peat_suite *s = &res->suite;
    PEAT_TRY(peat_nightly_suite_load(o->suite, s));
    if (o->policy) PEAT_TRY(peat_nightly_policy_load(o->policy, &s->policy));
    PEAT_TRY(peat_runtime_builtin_init());
    for (int i = 0; i < s->n_plugins; i++) PEAT_TRY(peat_plugin_load(s->plugins[i], NULL));
    for (int i = 0; i < s->n_kernels; i++) PEAT_TRY(expand_kernel(res, &s->kernels[i]));
    for (int i = 0; i < res->n_items; i++) {
        peat_ci_item *it = &res->items[i];
        if (peat_backend_available(it->backend)) continue;
        char be[sizeof it->backend];
        memcpy(be, it->backend, sizeof be);
        snprintf(it->status, sizeof it->status, "SKIP");
        snprintf(it->error, sizeof it->error, "backend %s has no device here", be);
    }
    return PEAT_OK;
}

peat_status peat_nightly_ci_plan(const char *suite, const char *policy, peat_ci_result *res)
{
    peat_ci_opts o;
    memset(&o, 0, sizeof o);
    o.suite = suite, o.policy = policy;
    return plan(&o, res);
}

/* ---- run one item as `peat run` ---- */

typedef struct argbuf {
    char *argv[48];
    char store[4096];
    int n;
    size_t used;
} argbuf;

static void arg(argbuf *a, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void arg(argbuf *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = sizeof a->store - a->used;
    int w = vsnprintf(a->store + a->used, room, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= room || a->n + 2 > (int)(sizeof a->argv / sizeof a->argv[0])) return;
    a->argv[a->n++] = a->store + a->used;
    a->argv[a->n] = NULL;
    a->used += (size_t)w + 1;
}

static void item_args(const peat_ci_opts *o, const peat_ci_result *res, peat_ci_item *it,
                      const peat_suite_kernel *sk, argbuf *a)
{
    const peat_suite *s = &res->suite;
    arg(a, "peat");
    arg(a, "run");
    arg(a, "--kernel"), arg(a, "%s", it->kernel);
    arg(a, "--flow"), arg(a, "%s", it->flow);
    arg(a, "--backend"), arg(a, "%s", it->backend);
    if (sk->iters) arg(a, "--iters"), arg(a, "%lld", (long long)sk->iters);
    if (sk->calls) arg(a, "--calls"), arg(a, "%lld", (long long)sk->calls);
    if (sk->size[0]) arg(a, "--size"), arg(a, "%s", sk->size);
    if (it->plan_s > 0) arg(a, "--budget"), arg(a, "%.2fs", it->plan_s);
    arg(a, "--seed"), arg(a, "%llu", (unsigned long long)s->seed);
    for (int i = 0; i < s->n_plugins; i++) arg(a, "--plugin"), arg(a, "%s", s->plugins[i]);
    arg(a, "--out"), arg(a, "%s/%s", res->out_dir, it->dir);
    /* --resume reruns an item over what an unfinished run left in its folder */
    if (o->force || o->resume) arg(a, "--force");
    arg(a, "--quiet");
    /* the command a person reruns: the same, with the output folder left to them */
    size_t len = 0;
    for (int i = 0; i < a->n && len < sizeof it->command; i++) {
        if (!strcmp(a->argv[i], "--out") || (i > 0 && !strcmp(a->argv[i - 1], "--out")) ||
            !strcmp(a->argv[i], "--quiet") || !strcmp(a->argv[i], "--force"))
            continue;
        len += (size_t)snprintf(it->command + len, sizeof it->command - len, "%s%s", len ? " " : "",
                                a->argv[i]);
    }
}

static double now_s(void)
{
    return peat_clock_now();
}

/* Waits for pid until the deadline (0: none); past it the child's process group is killed. */
static int wait_deadline(pid_t pid, double budget_s, int *timed_out)
{
    int st = 0;
    double t0 = now_s();
    *timed_out = 0;
    for (;;) {
        pid_t r = waitpid(pid, &st, budget_s > 0 ? WNOHANG : 0);
        if (r == pid) return st;
        if (r < 0 && errno != EINTR) return -1;
        if (budget_s > 0 && now_s() - t0 > budget_s) {
            kill(-pid, SIGKILL); /* the run and its per-call children */
            waitpid(pid, &st, 0);
            *timed_out = 1;
            return st;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* The last "peat: error: ..." line of an item's log (what it could not do). */
static void log_error(const char *log, char *out, size_t n)
{
    FILE *f = fopen(log, "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "peat: error: ", 13)) {
            line[strcspn(line, "\n")] = 0;
            snprintf(out, n, "%.250s", line + 13);
        }
    if (f) fclose(f);
}

static peat_status spawn_item(const char *self, argbuf *a, const char *log, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&at, 0);
    int e = posix_spawn(pid, self, &fa, &at, a->argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (e) return PEAT_ERROR(PEAT_ERR_IO, "cannot start %s: %s", self, strerror(e));
    return PEAT_OK;
}

static void item_read(const peat_policy *pol, peat_ci_item *it, const char *dir);

/* The item's `peat run` while it runs (0: none). It has a process group of its own (a deadline
 * kills it with its per-call children), so a signal ending peat ci would not reach it: the
 * handler ends it first, and --resume then finds its folder unfinished and free. */
static volatile sig_atomic_t child_pid;

static void on_end_signal(int sig)
{
    pid_t pid = (pid_t)child_pid;
    if (pid > 0) {
        kill(-pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void end_signals(int on)
{
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on ? on_end_signal : SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, NULL);
}

static void item_run(const peat_ci_opts *o, peat_ci_result *res, peat_ci_item *it,
                     const peat_suite_kernel *sk)
{
    argbuf a = {0};
    item_args(o, res, it, sk, &a);
    char dir[800], log[840];
    snprintf(dir, sizeof dir, "%s/%s", res->out_dir, it->dir);
    snprintf(log, sizeof log, "%s.log", dir);
    double t0 = now_s();
    pid_t pid;
    int timed_out = 0, st = -1;
    /* a planned run keeps to its plan within a few percent (docs/predictor.md): one far past
     * it is stuck, and is stopped before it spends the items' after it (twice its plan and half
     * a minute: room for a loaded machine or a sanitizer build, whose plans come from its own
     * slower calibration) */
    double limit = it->budget_s;
    if (it->plan_s > 0 && (!(limit > 0) || limit > 2 * it->plan_s + 30))
        limit = 2 * it->plan_s + 30;
    if (spawn_item(o->self, &a, log, &pid) == PEAT_OK) {
        child_pid = pid;
        st = wait_deadline(pid, limit, &timed_out);
        child_pid = 0;
    }
    it->seconds = now_s() - t0;
    it->exit_code = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    snprintf(it->status, sizeof it->status, "ERROR");
    if (timed_out && limit != it->budget_s) /* the plan's limit, not the suite's budget */
        snprintf(it->error, sizeof it->error, "over its plan of %.1f s by far (%.0f s): killed",
                 it->plan_s, limit);
    else if (timed_out)
        snprintf(it->error, sizeof it->error, "over its budget of %g s: killed", it->budget_s);
    else if (st == -1)
        snprintf(it->error, sizeof it->error, "%s", peat_error_last());
    else if (WIFSIGNALED(st))
        snprintf(it->error, sizeof it->error, "peat run killed by signal %d", WTERMSIG(st));
    else if (it->exit_code == 0 || it->exit_code == 1)
        item_read(&res->suite.policy, it, dir);
    else
        log_error(log, it->error, sizeof it->error);
    if (!strcmp(it->status, "ERROR") && !it->error[0])
        snprintf(it->error, sizeof it->error, "peat run exited %d (log: %s.log)", it->exit_code,
                 it->dir);
}

/* ---- read back an item's verdict ---- */

static int status_rank(const char *s)
{
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, status_names[i])) return i;
    return ST_ERROR;
}

static void copy_finding(const peat_policy *pol, const char *kernel, const peat_json *f,
                         peat_ci_finding *out)
{
    snprintf(out->cls, sizeof out->cls, "%s", peat_nightly_json_str(f, "class", "?"));
    snprintf(out->params, sizeof out->params, "%s", peat_nightly_json_str(f, "params", ""));
    snprintf(out->acceptance, sizeof out->acceptance, "%s",
             peat_nightly_json_str(f, "acceptance", "?"));
    const peat_json *ev = peat_nightly_json_get(f, "evidence");
    out->evidence[0] = 0;
    for (int e = 0; ev && ev->kind == PEAT_JSON_ARRAY && e < ev->n; e++)
        if (ev->items[e].kind == PEAT_JSON_STRING) {
            /* whole sentences only: one that does not fit is left out, and "..." says so */
            size_t len = strlen(out->evidence), add = strlen(ev->items[e].str) + 2;
            if (len + add + 5 >= sizeof out->evidence) {
                snprintf(out->evidence + len, sizeof out->evidence - len, "%s...", len ? "; " : "");
                break;
            }
            snprintf(out->evidence + len, sizeof out->evidence - len, "%s%s", len ? "; " : "",
                     ev->items[e].str);
        }
    peat_finding_class cls;
    out->allowed = peat_nightly_finding_class_parse(out->cls, &cls) == PEAT_OK &&
                   peat_nightly_policy_allows(pol, kernel, cls, out->params);
    peat_error_clear();
}

/* Status = the worst acceptance over the findings, an allowed finding counting as PASS. */
static void item_read(const peat_policy *pol, peat_ci_item *it, const char *dir)
{
    char path[900];
    snprintf(path, sizeof path, "%s/signature.json", dir);
    peat_json sig;
    if (peat_nightly_json_load(path, &sig) != PEAT_OK) {
        snprintf(it->error, sizeof it->error, "%s", peat_error_last());
        return;
    }
    snprintf(it->verdict, sizeof it->verdict, "%s", peat_nightly_json_str(&sig, "verdict", "?"));
    it->max_norm = peat_nightly_json_num(&sig, "candidate.max_norm");
    it->eff_bits = peat_nightly_json_num(&sig, "candidate.eff_bits");
    double gr = peat_nightly_json_num(&sig, "golden.rms_rel_mag");
    it->rms_ratio = gr > 0 ? peat_nightly_json_num(&sig, "candidate.rms_rel_mag") / gr : NAN;
    const peat_json *fs = peat_nightly_json_get(&sig, "findings");
    int worst = ST_PASS;
    for (int i = 0; fs && fs->kind == PEAT_JSON_ARRAY && i < fs->n; i++) {
        if (it->n_findings == PEAT_CI_MAX_FINDINGS) break;
        peat_ci_finding *f = &it->findings[it->n_findings++];
        copy_finding(pol, it->kernel, &fs->items[i], f);
        int r = f->allowed ? ST_PASS : status_rank(f->acceptance);
        worst = r > worst ? r : worst;
    }
    if (it->n_findings == 0) worst = status_rank(it->verdict);
    snprintf(it->status, sizeof it->status, "%s", status_names[worst]);
    peat_nightly_json_free(&sig);
}

/* ---- the suite ---- */

static void utc_stamp(char *buf, size_t n, const char *fmt)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, fmt, &tm);
}

static peat_status out_dir_prepare(const peat_ci_opts *o, peat_ci_result *res)
{
    char stamp[32];
    utc_stamp(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ");
    if (o->out_dir)
        snprintf(res->out_dir, sizeof res->out_dir, "%s", o->out_dir);
    else {
        char leaf[sizeof res->out_dir - sizeof "peat-ci/"];
        snprintf(leaf, sizeof leaf, "%s-%s", res->suite.name, stamp);
        peat_campaign_safe_name(leaf);
        snprintf(res->out_dir, sizeof res->out_dir, "peat-ci/%s", leaf);
    }
    if (res->shard.n > 0) { /* a shard's own folder inside OUT */
        size_t l = strlen(res->out_dir);
        peat_scale_shard_name("/shard-", res->shard, "", res->out_dir + l, sizeof res->out_dir - l);
    }
    char items[600], ci[600];
    snprintf(items, sizeof items, "%s/items", res->out_dir);
    snprintf(ci, sizeof ci, "%s/ci.json", res->out_dir);
    if (access(ci, F_OK) == 0 && !o->force && !o->resume)
        return PEAT_ERROR(PEAT_ERR_IO,
                          "%s already holds a suite result (use another --out, --resume to keep "
                          "its finished items, or --force to rerun them)",
                          res->out_dir);
    return peat_campaign_mkdir_p(items);
}

/* ---- --resume: items finished by an earlier run into the same folder ---- */

/* Splits a command line as peat records it (single quotes, '\'' for a quote) into words. */
static int words_split(const char *line, char *store, size_t cap, char **w, int max)
{
    int n = 0;
    size_t used = 0;
    for (const char *c = line;;) {
        c += strspn(c, " ");
        if (!*c) return n;
        if (n == max) return -1;
        w[n++] = store + used;
        for (; *c && *c != ' '; c++) {
            if (used + 2 >= cap) return -1;
            if (*c == '\\' && c[1] == '\'') {
                store[used++] = *++c;
            } else if (*c == '\'') {
                const char *end = strchr(c + 1, '\'');
                if (!end || used + (size_t)(end - c) + 1 >= cap) return -1;
                memcpy(store + used, c + 1, (size_t)(end - c - 1));
                used += (size_t)(end - c - 1);
                c = end;
            } else
                store[used++] = *c;
        }
        store[used++] = 0;
    }
}

/* The recorded command of a campaign as peat ci writes an item's command (without --out,
 * --quiet, --force), less its --budget, whose value goes to *plan_s (0: none). */
static int command_normal(const char *recorded, char *out, size_t n, double *plan_s)
{
    char store[2048], *w[96];
    int nw = words_split(recorded, store, sizeof store, w, 96);
    size_t len = 0;
    *plan_s = 0;
    out[0] = 0;
    for (int i = 0; i < nw && len < n; i++) {
        if (!strcmp(w[i], "--quiet") || !strcmp(w[i], "--force")) continue;
        if ((!strcmp(w[i], "--out") || !strcmp(w[i], "--budget")) && i + 1 < nw) {
            if (!strcmp(w[i], "--budget")) *plan_s = strtod(w[i + 1], NULL);
            i++;
            continue;
        }
        len += (size_t)snprintf(out + len, n - len, "%s%s", len ? " " : "", w[i]);
    }
    return nw > 0 && len < n;
}

/* Whether dir holds a finished campaign (campaign.h5, no .partial, every report) that this
 * suite's item would have written: the same peat version, kernel, flow, backend, seed and
 * command (--budget aside: *plan_s gets its value). */
static int item_finished(const peat_ci_result *res, const peat_ci_item *it, const char *dir,
                         double *plan_s)
{
    char h5[900], partial[920], path[900], cmd[sizeof it->command];
    struct stat sb;
    snprintf(h5, sizeof h5, "%s/campaign.h5", dir);
    snprintf(partial, sizeof partial, "%s/campaign.h5.partial", dir);
    if (stat(h5, &sb) != 0 || !S_ISREG(sb.st_mode) || stat(partial, &sb) == 0 ||
        peat_report_missing(dir))
        return 0;
    snprintf(path, sizeof path, "%s/signature.json", dir);
    peat_json sig;
    if (peat_nightly_json_load(path, &sig) != PEAT_OK) {
        peat_error_clear();
        return 0;
    }
    int same =
        !strcmp(peat_nightly_json_str(&sig, "peat_version", ""), PEAT_VERSION_STRING) &&
        !strcmp(peat_nightly_json_str(&sig, "kernel", ""), it->kernel) &&
        !strcmp(peat_nightly_json_str(&sig, "flow", ""), it->flow) &&
        !strcmp(peat_nightly_json_str(&sig, "backend", ""), it->backend) &&
        peat_nightly_json_num(&sig, "seed") == (double)res->suite.seed &&
        command_normal(peat_nightly_json_str(&sig, "command", ""), cmd, sizeof cmd, plan_s) &&
        !strcmp(cmd, it->command);
    peat_nightly_json_free(&sig);
    return same;
}

/* Moves the finished campaign at from (and its log) to the item's place to (replacing what an
 * unfinished run left there); 0 when it cannot (another file system: the item is rerun). */
static int item_move(const char *from, const char *to)
{
    if (peat_dir_tree_remove(to) != 0) return 0;
    if (rename(from, to) != 0) return 0;
    char lf[900], lt[900];
    snprintf(lf, sizeof lf, "%s.log", from);
    snprintf(lt, sizeof lt, "%s.log", to);
    if (rename(lf, lt) != 0) remove(lt); /* no stale log of another run beside it */
    return 1;
}

/* Takes item it from an earlier run into root (this folder's items/ first, then root/items and
 * every root/shard-I-of-N/items): its verdict read back as if it had just run. */
static int item_resume(const peat_ci_opts *o, peat_ci_result *res, peat_ci_item *it,
                       const peat_suite_kernel *sk, const char *root)
{
    argbuf a = {0};
    item_args(o, res, it, sk, &a); /* it->command, as the run would record it */
    char dst[800], pat[900];
    snprintf(dst, sizeof dst, "%s/%s", res->out_dir, it->dir);
    double plan = 0;
    int found = item_finished(res, it, dst, &plan);
    const char *name = strrchr(it->dir, '/') ? strrchr(it->dir, '/') + 1 : it->dir;
    for (int pass = 0; pass < 2 && !found; pass++) {
        glob_t g;
        if (pass == 0)
            snprintf(pat, sizeof pat, "%s/items/%s", root, name);
        else
            snprintf(pat, sizeof pat, "%s/shard-*-of-*/items/%s", root, name);
        if (glob(pat, 0, NULL, &g) != 0) continue;
        for (size_t k = 0; k < g.gl_pathc && !found; k++)
            if (strcmp(g.gl_pathv[k], dst) && item_finished(res, it, g.gl_pathv[k], &plan))
                found = item_move(g.gl_pathv[k], dst);
        globfree(&g);
    }
    if (!found) return 0;
    peat_json sig;
    char path[900];
    snprintf(path, sizeof path, "%s/signature.json", dst);
    if (peat_nightly_json_load(path, &sig) == PEAT_OK) {
        it->seconds = peat_nightly_json_num(&sig, "timing_s.total");
        if (isnan(it->seconds)) it->seconds = 0;
        /* peat run exits 1 on a failing verdict, 0 otherwise */
        it->exit_code = !strcmp(peat_nightly_json_str(&sig, "verdict", ""), "FAIL");
        peat_nightly_json_free(&sig);
    }
    peat_error_clear();
    it->plan_s = plan;
    memset(&a, 0, sizeof a);
    item_args(o, res, it, sk, &a); /* with the --budget it ran under */
    snprintf(it->status, sizeof it->status, "ERROR");
    item_read(&res->suite.policy, it, dst);
    it->resumed = 1;
    res->n_resumed++;
    return 1;
}

/* Under --resume, the suite results this run supersedes stop counting: every shard result of
 * another shard count (all of them for a whole-suite run) is renamed ci.json.superseded, so
 * `peat merge OUT` takes the shards of this count alone. Its items stay where they are until a
 * shard of this count takes them. */
static void results_supersede(const char *root, peat_scale_shard me)
{
    char pat[700];
    glob_t g;
    snprintf(pat, sizeof pat, "%s/shard-*-of-*/ci.json", root);
    if (glob(pat, 0, NULL, &g) != 0) return;
    for (size_t k = 0; k < g.gl_pathc; k++) {
        const char *base = strstr(g.gl_pathv[k] + strlen(root), "shard-"); /* root may end in / */
        int i, n;
        if (!base || sscanf(base, "shard-%d-of-%d/", &i, &n) != 2 || (me.n > 0 && n == me.n))
            continue;
        char to[800];
        snprintf(to, sizeof to, "%s.superseded", g.gl_pathv[k]);
        rename(g.gl_pathv[k], to);
    }
    globfree(&g);
}

static const peat_suite_kernel *suite_kernel_of(const peat_suite *s, const char *name)
{
    for (int i = 0; i < s->n_kernels; i++)
        if (!strcmp(s->kernels[i].name, name)) return &s->kernels[i];
    return &s->kernels[0];
}

/* Under peat ci --budget, what item i may plan to: the suite's time left over the items left to
 * run (a fixed item, whose iters or calls the suite sets, runs as set and is not planned). 0:
 * not planned; < 0: the time is spent. */
static double item_plan(const peat_ci_result *res, int i, double t0)
{
    const peat_suite_kernel *sk = suite_kernel_of(&res->suite, res->items[i].kernel);
    if (!(res->budget_s > 0) || sk->iters || sk->calls) return 0;
    int left = 0;
    for (int j = i; j < res->n_items; j++)
        left += strcmp(res->items[j].status, "SKIP") != 0 && !res->items[j].resumed &&
                peat_scale_shard_mine(res->shard, j);
    double share = (res->budget_s - (now_s() - t0)) / (left > 0 ? left : 1);
    return share > 0 ? share : -1;
}

static void run_items(const peat_ci_opts *o, peat_ci_result *res)
{
    peat_progress pr;
    /* --resume first takes every finished item, so the --budget is shared by the others */
    for (int i = 0; i < res->n_items && o->resume; i++)
        if (peat_scale_shard_mine(res->shard, i) && strcmp(res->items[i].status, "SKIP"))
            item_resume(o, res, &res->items[i], suite_kernel_of(&res->suite, res->items[i].kernel),
                        o->out_dir);
    peat_campaign_progress_begin(&pr, stdout, o->quiet, "peat ci", res->n_items);
    end_signals(1);
    double t0 = now_s();
    for (int i = 0; i < res->n_items; i++) {
        peat_ci_item *it = &res->items[i];
        if (!peat_scale_shard_mine(res->shard, i)) continue; /* another shard's item */
        if (!it->resumed) it->plan_s = strcmp(it->status, "SKIP") ? item_plan(res, i, t0) : 0;
        if (it->resumed) {
            /* taken by --resume above: its verdict is read back already */
        } else if (it->plan_s < 0) {
            it->plan_s = 0;
            snprintf(it->status, sizeof it->status, "ERROR");
            snprintf(it->error, sizeof it->error,
                     "not run: the suite's --budget of %g s was spent before it", res->budget_s);
        } else if (strcmp(it->status, "SKIP"))
            item_run(o, res, it, suite_kernel_of(&res->suite, it->kernel));
        res->counts[status_rank(it->status)]++;
        char planned[48] = "";
        char note[sizeof it->kernel + sizeof it->flow + sizeof it->backend + sizeof it->status +
                  sizeof it->error + sizeof planned + 64];
        if (it->plan_s > 0) snprintf(planned, sizeof planned, " of %.1f s planned", it->plan_s);
        snprintf(note, sizeof note, "[%d/%d] %s %s %s: %s%s%s (%.1f s%s%s)", i + 1, res->n_items,
                 it->kernel, it->flow, it->backend, it->status, it->error[0] ? ": " : "", it->error,
                 it->seconds, planned, it->resumed ? ", resumed from an earlier run" : "");
        peat_campaign_progress_step(&pr, i + 1, note);
    }
    end_signals(0);
    peat_campaign_progress_end(&pr);
}

peat_status peat_nightly_ci_baseline_check(const char *baseline, int update_baseline)
{
    if (update_baseline && !baseline)
        return PEAT_ERROR(PEAT_ERR_INVAL, "--update-baseline needs --baseline DIR");
    struct stat sb;
    /* a baseline is a directory (a first run may create it); a file there would be ignored */
    if (baseline && stat(baseline, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return PEAT_ERROR(PEAT_ERR_INVAL, "--baseline %s is not a directory", baseline);
    return PEAT_OK;
}

peat_status peat_nightly_ci_opts_check(const peat_ci_opts *o)
{
    PEAT_TRY(peat_nightly_ci_baseline_check(o->baseline, o->update_baseline));
    if (o->resume && o->force)
        return PEAT_ERROR(PEAT_ERR_INVAL, "--resume and --force exclude each other (--resume "
                                          "keeps the finished items, --force reruns them)");
    if (o->resume && !o->out_dir)
        return PEAT_ERROR(PEAT_ERR_INVAL, "--resume needs --out DIR, the suite run to finish");
    return PEAT_OK;
}

peat_status peat_nightly_ci_finish(peat_ci_result *res, const char *baseline, int update_baseline)
{
    /* ci.json first: the baseline diff reads it like any other suite result */
    PEAT_TRY(peat_nightly_ci_report_write(res));
    char prev[600];
    snprintf(prev, sizeof prev, "%s/ci.json", baseline ? baseline : "");
    if (baseline && access(prev, F_OK) == 0) { /* compared with the baseline's last result */
        PEAT_TRY(
            peat_nightly_diff_paths(baseline, res->out_dir, &res->suite.policy.th, &res->diff));
        res->baseline_compared = 1;
    }
    peat_acceptance fail_on = res->suite.policy.fail_on;
    int failed = res->counts[ST_FAIL] + (fail_on == PEAT_ACCEPT_WARN ? res->counts[ST_WARN] : 0);
    res->exit_code = res->counts[ST_ERROR] ? 2 : failed || res->diff.n_regressions ? 1 : 0;
    PEAT_TRY(peat_nightly_ci_report_write(res));
    if (update_baseline) PEAT_TRY(peat_nightly_ci_baseline_update(baseline, res));
    return PEAT_OK;
}

/* The items this run owns, with their numbers in the suite's plan (a shard keeps its own). */
static void shard_keep(peat_ci_result *res)
{
    int k = 0;
    res->n_planned = res->n_items;
    for (int i = 0; i < res->n_items; i++) {
        if (!peat_scale_shard_mine(res->shard, i)) continue;
        if (k != i) res->items[k] = res->items[i];
        res->ids[k++] = i;
    }
    res->n_items = k;
}

peat_status peat_nightly_ci_run(const peat_ci_opts *o, peat_ci_result *res)
{
    memset(res, 0, sizeof *res);
    double t0 = now_s();
    PEAT_TRY(peat_nightly_ci_opts_check(o));
    if (o->budget &&
        (peat_nightly_duration_parse(o->budget, &res->budget_s) != PEAT_OK || !(res->budget_s > 0)))
        return PEAT_ERROR(PEAT_ERR_INVAL, "--budget '%s': a positive time (90, 90s, 20m, 1h)",
                          o->budget);
    if (o->shard) PEAT_TRY(peat_scale_shard_parse(o->shard, &res->shard));
    if (o->shard && o->baseline)
        return PEAT_ERROR(PEAT_ERR_INVAL, "--baseline compares a whole suite: give it to the "
                                          "merge of the shards (`peat merge OUT --baseline DIR`)");
    if (o->policy) snprintf(res->policy_file, sizeof res->policy_file, "%s", o->policy);
    PEAT_TRY(plan(o, res));
    PEAT_TRY(out_dir_prepare(o, res));
    if (o->resume) results_supersede(o->out_dir, res->shard);
    peat_ci_opts oo = *o;
    char self[1024];
    if (!oo.self) {
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0)
            return PEAT_ERROR(PEAT_ERR_IO, "cannot find the peat executable (/proc/self/exe)");
        self[n] = 0;
        oo.self = self;
    }
    run_items(&oo, res);
    res->seconds = now_s() - t0;
    shard_keep(res);
    return peat_nightly_ci_finish(res, o->baseline, o->update_baseline);
}

void peat_nightly_ci_result_free(peat_ci_result *res)
{
    peat_nightly_diff_free(&res->diff);
}
