/* stage_open.c: the open stage, after plan: the output directory (held by a lock), and the
 * campaign file created, or reopened and checked to resume. */
#define _DEFAULT_SOURCE /* gethostname */
#include "harness/runtime/builtin.h"
#include "peat/backend.h"
#include "harness/campaign/stages.h"
#include "core/child_fds.h"
#include "peat/plugin.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
    peat_child_fd_hold(fd); /* a forked child must not keep the directory locked */
    return PEAT_OK;
}

void peat_campaign_safe_name(char *name)
{
    for (char *p = name; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '-' || ch == '_' || ch == '.';
        if (!ok) *p = '_';
    }
}

/* The output directory, and the campaign file's paths: refuses to overwrite a finished campaign
 * or to start over an unfinished one unless told to. */
/* A new folder peat-out/<kernel>-<flow>-<backend>-<UTC time>, made here (mkdir, atomic): two
 * runs in the same second get -2, -3, ... instead of one finding the other's campaign. */
static peat_status default_out_dir(peat_campaign *c)
{
    peat_campaign_result *res = c->res;
    char stamp[32];
    utc_stamp(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ");
    PEAT_TRY(peat_campaign_mkdir_p("peat-out"));
    char leaf[sizeof res->out_dir - sizeof "peat-out/" - 16];
    snprintf(leaf, sizeof leaf, "%s-%s-%s-%s", c->k->name, c->flow, c->backend_name, stamp);
    peat_campaign_safe_name(leaf);
    for (int n = 1; n <= 1000; n++) {
        char sfx[16] = "";
        if (n > 1) snprintf(sfx, sizeof sfx, "-%d", n);
        snprintf(res->out_dir, sizeof res->out_dir, "peat-out/%s%s", leaf, sfx);
        if (mkdir(res->out_dir, 0777) == 0) return PEAT_OK;
        if (errno != EEXIST)
            return PEAT_ERROR(PEAT_ERR_IO, "cannot create %s: %s", res->out_dir, strerror(errno));
    }
    return PEAT_ERROR(PEAT_ERR_IO, "peat-out/ holds 1000 runs of %s from this second", c->k->name);
}

static peat_status resolve_out_dir(peat_campaign *c)
{
    const peat_campaign_opts *o = c->o;
    peat_campaign_result *res = c->res;
    /* the campaign's paths are built in fixed buffers: a longer --out is refused, never cut */
    size_t room = sizeof res->out_dir - 1; /* h5 and partial have room for it and the names */
    if (o->out_dir && strlen(o->out_dir) > room)
        return PEAT_ERROR(PEAT_ERR_INVAL, "--out is %zu bytes long: at most %zu are supported",
                          strlen(o->out_dir), room);
    if (o->out_dir) {
        snprintf(res->out_dir, sizeof res->out_dir, "%s", o->out_dir);
        PEAT_TRY(peat_campaign_mkdir_p(res->out_dir));
    } else {
        PEAT_TRY(default_out_dir(c));
    }
    PEAT_TRY(lock_out_dir(c));
    snprintf(c->h5, sizeof c->h5, "%s/campaign.h5", res->out_dir);
    snprintf(c->partial, sizeof c->partial, "%s.partial", c->h5);
    struct stat sb;
    if ((stat(c->h5, &sb) == 0 && !S_ISREG(sb.st_mode)) ||
        (stat(c->partial, &sb) == 0 && !S_ISREG(sb.st_mode)))
        return PEAT_ERROR(PEAT_ERR_IO,
                          "%s/campaign.h5 or .partial is not a file (a directory?): "
                          "use another --out",
                          res->out_dir);
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
             o->optimizer                                                  ? o->optimizer
             : peat_models_flow_optimizer(c->flow, NULL) == PEAT_OPTIM_SGD ? "sgd"
                                                                           : "adamw",
             o->task, o->finetune_from ? o->finetune_from : "-", o->batch, o->width, o->depth,
             o->seq, o->lr);
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
                 peat_backend_on_host(c->backend_name) ? "cpu0" : "device max", c->dev.clock_mhz);
    gethostname(m.host, sizeof m.host - 1);
    PEAT_TRY(peat_campaign_compress_parse(o->compress, &m.deflate_level, &m.min_saving_pct));
    m.exact_max_bytes = o->record_exact ? -1 : 0; /* < 0: every call's exact outputs */
    char seed[700];
    if (peat_campaign_golden_cache_seed(c, seed, sizeof seed)) {
        if (peat_store_create_from(c->partial, &m, seed, &c->store) == PEAT_OK) return PEAT_OK;
        /* a damaged or vanished entry: this campaign trains its golden work itself */
        fprintf(stderr, "peat: golden cache: %s not used (%s)\n", seed, peat_error_last());
        c->gcache.hit = 0;
        unlink(c->partial);
    }
    return peat_store_create(c->partial, &m, &c->store);
}

/* After plan (which may size the run): the output directory and the campaign file. */
peat_status peat_campaign_stage_open(peat_campaign *c)
{
    PEAT_ASSERT(c->k && c->flow, "open runs after resolve (stage order: harness/run/pipeline.c)");
    PEAT_TRY(resolve_out_dir(c));
    policy_string(c);
    peat_campaign_golden_cache_find(c);
    return c->o->resume ? store_resume(c) : store_create(c);
}
