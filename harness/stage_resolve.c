/* stage_resolve.c: the resolve stage (plugins, kernel, backend and device, flow, run size) and,
 * after plan, the open stage (output directory, the campaign file created or reopened to resume).
 */
#define _DEFAULT_SOURCE /* gethostname */
#include "harness/harness.h"
#include "harness/stages.h"
#include "golden/golden.h"
#include "peat/plugin.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

peat_status peat_mkdir_p(const char *path)
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

static void utc_stamp(char *buf, size_t n, const char *fmt)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, fmt, &tm);
}

/* Registers the built-ins and the plugins, and finds the candidate (not the exact reference). */
static peat_status resolve_kernel(peat_campaign *c)
{
    const peat_campaign_opts *o = c->o;
    PEAT_TRY(peat_builtin_init());
    for (int i = 0; i < o->n_plugins; i++) PEAT_TRY(peat_plugin_load(o->plugins[i], NULL));
    if (!o->kernel || !o->kernel[0]) return PEAT_ERROR(PEAT_ERR_INVAL, "--kernel NAME is required");
    /* a named backend must be built and see a device before anything else is said about it */
    if (o->backend && strcmp(o->backend, "auto") != 0) {
        peat_backend_t be;
        PEAT_TRY(peat_backend_get(o->backend, &be));
    }
    /* --backend picks the implementation where a name exists on several (gemm_new: cpu, opencl) */
    c->k = peat_registry_find_on(o->kernel, o->backend);
    if (!c->k && peat_registry_find(o->kernel))
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "kernel '%s' has no implementation on backend '%s'",
                          o->kernel, o->backend);
    if (!c->k) {
        char names[1024] = "";
        for (int i = 0; i < peat_registry_count(); i++) {
            const peat_kernel *k = peat_registry_at(i);
            if (k->role != PEAT_ROLE_CANDIDATE) continue;
            if (strlen(names) + strlen(k->name) + 3 < sizeof names) {
                if (names[0]) strcat(names, ", ");
                strcat(names, k->name);
            }
        }
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "unknown kernel '%s'; available candidates: %s",
                          o->kernel, names);
    }
    if (c->k->role == PEAT_ROLE_EXACT)
        return PEAT_ERROR(PEAT_ERR_INVAL, "'%s' is the exact reference, not a kernel to validate",
                          c->k->name);
    return PEAT_OK;
}

/* Opens the selected backend ("auto": the kernel's own; an explicit one must match it) for the
 * device description the campaign file records. */
static peat_status resolve_backend(peat_campaign *c)
{
    const peat_kernel *k = c->k;
    const char *want =
        !c->o->backend || strcmp(c->o->backend, "auto") == 0 ? k->backend : c->o->backend;
    peat_backend_t be = NULL;
    PEAT_TRY(peat_backend_open(want, 0, &be));
    peat_status st = peat_backend_device_info(be, &c->dev);
    snprintf(c->backend_name, sizeof c->backend_name, "%s", peat_backend_name(be));
    snprintf(c->res->backend, sizeof c->res->backend, "%s", c->backend_name);
    if (strcmp(c->backend_name, "cpu") == 0)
        snprintf(c->res->blas, sizeof c->res->blas, "%s", peat_golden_blas_describe());
    peat_backend_close(be);
    if (st != PEAT_OK) return st;
    if (strcmp(c->backend_name, k->backend) != 0)
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED,
                          "kernel '%s' runs on backend '%s', selected backend is '%s'", k->name,
                          k->backend, c->backend_name);
    return PEAT_OK;
}

/* Options that would silently do nothing in this flow or this run are refused. */
static peat_status check_flow_options(const peat_campaign *c)
{
    const peat_campaign_opts *o = c->o;
    if (o->seq && strncmp(c->flow, "gpt", 3) != 0)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "--seq applies to the gpt flows only (flow '%s' has no "
                          "sequence)",
                          c->flow);
    PEAT_TRY(peat_iter_spec_check_range(o->checkpoint_iters, c->iters, "checkpoints"));
    return peat_iter_spec_check_range(o->activation_iters, c->iters, "activations");
}

/* The flow named by --flow (it must call the kernel's op), or the first flow that calls it. */
static peat_status resolve_flow(peat_campaign *c)
{
    const peat_campaign_opts *o = c->o;
    const peat_kernel *k = c->k;
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
        c->flow = o->flow;
    }
    for (int i = 0; !c->flow && names[i]; i++)
        if (peat_flow_op_mask_for(names[i], &fc) & (1u << k->op)) c->flow = names[i];
    if (!c->flow)
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "no built-in flow calls %s (kernel '%s')%s",
                          peat_op_name(k->op), k->name,
                          k->op == PEAT_OP_SGD ? "; SGD updates run with --optimizer sgd" : "");
    snprintf(c->res->flow, sizeof c->res->flow, "%s", c->flow);
    /* 0 means the default; the CLI's option table holds the accepted ranges */
    c->iters = c->o->iters > 0 ? c->o->iters : peat_campaign_default_iters(c->flow);
    c->calls = c->o->calls > 0 ? c->o->calls : PEAT_CAMPAIGN_DEFAULT_CALLS;
    return check_flow_options(c);
}

/* Holds the output directory for this run (an exclusive flock on DIR/.peat.lock, released when
 * peat ends): a second run into it is refused with the holder's pid and touches nothing. */
static peat_status lock_out_dir(peat_campaign *c)
{
    char path[600];
    snprintf(path, sizeof path, "%s/.peat.lock", c->res->out_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return PEAT_ERROR(PEAT_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char holder[32] = "";
        ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
        holder[n > 0 ? n : 0] = 0;
        holder[strcspn(holder, "\n")] = 0;
        close(fd);
        return PEAT_ERROR(PEAT_ERR_IO,
                          "%s is in use by another peat run (pid %s): wait for it, or use another "
                          "--out",
                          c->res->out_dir, holder[0] ? holder : "unknown");
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        close(fd);
        return PEAT_ERROR(PEAT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    }
    c->lock_fd = fd;
    return PEAT_OK;
}

/* The output directory, and the campaign file's paths: refuses to overwrite a finished campaign
 * or to start over an unfinished one unless told to. */
static peat_status resolve_out_dir(peat_campaign *c)
{
    const peat_campaign_opts *o = c->o;
    peat_campaign_result *res = c->res;
    if (o->out_dir)
        snprintf(res->out_dir, sizeof res->out_dir, "%s", o->out_dir);
    else {
        char stamp[32];
        utc_stamp(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ");
        snprintf(res->out_dir, sizeof res->out_dir, "peat-out/%s-%s-%s", c->k->name, c->flow,
                 stamp);
    }
    PEAT_TRY(peat_mkdir_p(res->out_dir));
    PEAT_TRY(lock_out_dir(c));
    snprintf(c->h5, sizeof c->h5, "%s/campaign.h5", res->out_dir);
    snprintf(c->partial, sizeof c->partial, "%s.partial", c->h5);
    if (file_exists(c->h5) && !o->force)
        return PEAT_ERROR(PEAT_ERR_IO,
                          "%s already holds a finished campaign (use another --out or --force)",
                          c->h5);
    if (file_exists(c->partial) && !o->resume && !o->force)
        return PEAT_ERROR(PEAT_ERR_IO,
                          "%s holds an unfinished campaign: continue it with --resume, or --force",
                          c->partial);
    if (o->resume && !file_exists(c->partial))
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "--resume: no unfinished campaign (%s) to continue",
                          c->partial);
    return PEAT_OK;
}

/* Everything that decides what is recorded: a resumed run must use the same. */
static void policy_string(peat_campaign *c)
{
    const peat_campaign_opts *o = c->o;
    snprintf(c->policy, sizeof c->policy,
             "calls=%lld ops=%s every=%lld iters=%lld:%lld phase=%s checkpoints=%s activations=%s "
             "optimizer=%s task=%d finetune=%s sizes=%d,%d,%d,%d lr=%g",
             (long long)c->calls, o->record_ops ? o->record_ops : "kernel",
             (long long)o->record_every, (long long)o->record_iter_lo, (long long)o->record_iter_hi,
             o->record_phase ? o->record_phase : "all",
             o->checkpoint_iters ? o->checkpoint_iters : "last",
             o->activation_iters ? o->activation_iters : "none",
             o->optimizer ? o->optimizer : "adamw", o->task,
             o->finetune_from ? o->finetune_from : "-", o->batch, o->width, o->depth, o->seq,
             o->lr);
    /* the size preset, only when not the default (files of tiny runs keep their policy text) */
    size_t n = strlen(c->policy);
    if (o->size && strcmp(o->size, "tiny") != 0 && n + 1 < sizeof c->policy)
        snprintf(c->policy + n, sizeof c->policy - n, " size=%s", o->size);
}

/* The interrupted campaign's file was started with these options (else PEAT_ERR_INVAL). */
static peat_status resume_options_check(peat_campaign *c)
{
    peat_store_t *s = NULL;
    PEAT_TRY(peat_store_open(c->partial, 0, &s));
    peat_store_meta m;
    peat_status st = peat_store_meta_get(s, &m);
    peat_store_close(s);
    PEAT_TRY(st);
    if (strcmp(m.kernel, c->k->name) || strcmp(m.flow, c->flow) || m.seed != c->o->seed ||
        m.iters != c->iters)
        return PEAT_ERROR(
            PEAT_ERR_INVAL,
            "--resume: %s was started with --kernel %s --flow %s --seed %llu --iters %lld; "
            "give the same options",
            c->partial, m.kernel, m.flow, (unsigned long long)m.seed, (long long)m.iters);
    if (strcmp(m.policy, c->policy) != 0)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "--resume: recording options differ from the interrupted run's (%s)",
                          m.policy);
    return PEAT_OK;
}

/* Says on stderr which records of the file were damaged: they are recorded again. */
static void resume_damage_say(const peat_campaign *c, const peat_store_resume_info *info)
{
    char ids[128] = "";
    size_t len = 0;
    for (int i = 0; i < info->n_ids && len < sizeof ids; i++)
        len += (size_t)snprintf(ids + len, sizeof ids - len, "%s%llu", i ? ", " : "",
                                (unsigned long long)info->damaged_ids[i]);
    fprintf(stderr,
            "peat: --resume: %lld damaged record%s in %s (call ids: %s; first: %s): %lld records "
            "from the first damaged one on are recorded again\n",
            (long long)info->damaged, info->damaged == 1 ? "" : "s", c->partial,
            ids[0] ? ids : "none", info->first_damaged, (long long)info->dropped);
}

/* Reopens the interrupted campaign's file, refusing one started with other options; every
 * record it keeps is read back against its hashes first. */
static peat_status store_resume(peat_campaign *c)
{
    PEAT_TRY(resume_options_check(c));
    peat_store_resume_info info;
    PEAT_TRY(peat_store_open_resume(c->partial, &info, &c->store));
    if (info.damaged > 0) resume_damage_say(c, &info);
    return PEAT_OK;
}

/* Creates the campaign file with its metadata (replacing an unfinished one under --force). */
static peat_status store_create(peat_campaign *c)
{
    const peat_campaign_opts *o = c->o;
    const peat_kernel *k = c->k;
    if (file_exists(c->partial)) unlink(c->partial);
    peat_store_meta m;
    memset(&m, 0, sizeof m);
    snprintf(m.flow, sizeof m.flow, "%s", c->flow);
    snprintf(m.kernel, sizeof m.kernel, "%s", k->name);
    snprintf(m.backend, sizeof m.backend, "%s", c->backend_name);
    snprintf(m.device, sizeof m.device, "%s", c->dev.name);
    m.seed = o->seed;
    m.iters = c->iters;
    snprintf(m.peat_version, sizeof m.peat_version, "%s", PEAT_VERSION_STRING);
    utc_stamp(m.created, sizeof m.created, "%Y-%m-%dT%H:%M:%SZ");
    snprintf(m.argv, sizeof m.argv, "%s", o->argv ? o->argv : "");
    snprintf(m.policy, sizeof m.policy, "%s", c->policy);
    snprintf(m.dtypes, sizeof m.dtypes, "storage f32, kernel in %s acc %s out %s, exact f64",
             peat_dtype_name(k->in_dtype), peat_dtype_name(k->acc_dtype),
             peat_dtype_name(k->out_dtype));
    snprintf(m.build, sizeof m.build, "%s, %s", PEAT_BUILD_TYPE, __VERSION__);
    snprintf(m.blas, sizeof m.blas, "%s", c->res->blas);
    if (c->dev.clock_mhz > 0)
        snprintf(m.clocks, sizeof m.clocks, "%s %.0f MHz",
                 strcmp(c->backend_name, "cpu") ? "device max" : "cpu0", c->dev.clock_mhz);
    gethostname(m.host, sizeof m.host - 1);
    PEAT_TRY(peat_compress_parse(o->compress, &m.deflate_level, &m.min_saving_pct));
    return peat_store_create(c->partial, &m, &c->store);
}

peat_status peat_stage_resolve(peat_campaign *c)
{
    PEAT_TRY(resolve_kernel(c));
    PEAT_TRY(resolve_backend(c));
    return resolve_flow(c);
}

/* After plan (which may size the run): the output directory and the campaign file. */
peat_status peat_stage_open(peat_campaign *c)
{
    PEAT_TRY(resolve_out_dir(c));
    policy_string(c);
    return c->o->resume ? store_resume(c) : store_create(c);
}
