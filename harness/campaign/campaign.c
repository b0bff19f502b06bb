/* campaign.c: one validation campaign's state, and the loop that runs a list of its stages on it
 * (stages.h; the list of `peat run` is harness/run/pipeline.c). */
#include "harness/runtime/golden_log.h"
#include "harness/isolate/isolate.h"
#include "harness/runtime/runtime.h"
#include "harness/campaign/stages.h"
#include "core/child_fds.h"
#include "core/clock.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void peat_campaign_opts_default(peat_campaign_opts *o)
{
    memset(o, 0, sizeof *o);
    o->backend = "auto";
    o->seed = 1;
    o->isolate = 1;
    o->kernel_timeout_s = 30.0;
    o->hang_policy = "skip";
    o->repeats = 8; /* a fault in 1 call of 3 shows in 8 repeated calls with p = 1 - (4/9)^8 */
    /* the candidate in place of the golden on every call: valid text, parsed without fail */
    (void)peat_freq_schedule_parse(PEAT_RUNTIME_DEFAULT_FREQS, &o->runtime_freq);
}

/* Default training length per flow: enough iterations for the loss to move, small enough that
 * `peat run` stays well inside a minute on two cores. */
int64_t peat_campaign_default_iters(const char *flow)
{
    if (strcmp(flow, "mlp") == 0 || strcmp(flow, "mlp_silu") == 0) return 200;
    return 60; /* cnn, gpt, gpt_unfused, llama: ~15-20 ms a step */
}

void peat_campaign_init(peat_campaign *c, const peat_campaign_opts *o, peat_campaign_result *res)
{
    memset(c, 0, sizeof *c);
    memset(res, 0, sizeof *res);
    c->o = o;
    c->res = res;
    c->t_start = peat_clock_now();
    c->in_frac_below_normal = c->in_frac_above_max = NAN;
    c->lock_fd = -1;
}

void peat_campaign_free(peat_campaign *c)
{
    peat_store_close(c->store);
    c->store = NULL;
    peat_record_list_clear(&c->recs);
    if (c->rt) peat_runtime_result_free(c->rt);
    free(c->rt);
    c->rt = NULL;
    peat_runtime_golden_log_free(c->golden);
    c->golden = NULL;
    c->res->rt = NULL;
    peat_analyzer_acc_free(c->acc_cand);
    peat_analyzer_acc_free(c->acc_gold);
    c->acc_cand = c->acc_gold = NULL;
    peat_child_fd_drop(c->lock_fd);
    if (c->lock_fd >= 0) close(c->lock_fd); /* releases the output directory */
    c->lock_fd = -1;
}

void peat_campaign_skip(peat_campaign *c, const char *stage, const char *why)
{
    int cap = (int)(sizeof c->skipped / sizeof c->skipped[0]);
    if (c->n_skipped >= cap) return;
    c->skipped[c->n_skipped].stage = stage;
    snprintf(c->skipped[c->n_skipped].why, sizeof c->skipped[0].why, "%s", why);
    c->n_skipped++;
}

int peat_campaign_stage_list(const peat_campaign *c, peat_store_stage *out, int max)
{
    int n = c->n_stages;
    const peat_campaign_stage *stages = c->stages;
    for (int i = 0; i < n && i < max; i++) {
        out[i].name = stages[i].name;
        out[i].objects = stages[i].writes;
        out[i].skipped = NULL;
        for (int j = 0; j < c->n_skipped; j++)
            if (!strcmp(c->skipped[j].stage, stages[i].name)) out[i].skipped = c->skipped[j].why;
    }
    return n;
}

double peat_campaign_cpu_s(void)
{
    struct rusage a, b;
    getrusage(RUSAGE_SELF, &a);
    getrusage(RUSAGE_CHILDREN, &b);
    return (double)(a.ru_utime.tv_sec + a.ru_stime.tv_sec + b.ru_utime.tv_sec + b.ru_stime.tv_sec) +
           1e-6 * (double)(a.ru_utime.tv_usec + a.ru_stime.tv_usec + b.ru_utime.tv_usec +
                           b.ru_stime.tv_usec);
}

/* Adds a stage's wall seconds dt and CPU seconds dc to its reported clock. */
static void clock_add(peat_campaign_result *res, peat_campaign_clock clock, double dt, double dc)
{
    double *t[] = {NULL,          &res->t_profile, &res->t_playback, &res->t_analyze,
                   &res->t_probe, &res->t_runtime};
    double *c[] = {&res->cpu_other,   &res->cpu_profile, &res->cpu_playback,
                   &res->cpu_analyze, &res->cpu_probe,   &res->cpu_runtime};
    if (t[clock]) *t[clock] += dt;
    *c[clock] += dc;
}

peat_status peat_campaign_stages_run(const peat_campaign_stage *stages, int n,
                                     const peat_campaign_opts *o, peat_campaign_result *res)
{
    peat_campaign c;
    peat_campaign_init(&c, o, res);
    c.stages = stages, c.n_stages = n;
    peat_status st = PEAT_OK;
    for (int i = 0; st == PEAT_OK && i < n; i++) {
        double t0 = peat_clock_now(), c0 = peat_campaign_cpu_s();
        /* the total a stage reports is the time of every stage before it */
        res->t_total = t0 - c.t_start;
        if (o->on_stage) o->on_stage(o->on_stage_user, stages[i].name);
        st = stages[i].run(&c);
        /* the stage's isolated workers end with it: their CPU is counted (a child's is once it
         * is reaped) and nothing of theirs, a lock on the output directory, outlives the run */
        peat_isolate_workers_close();
        clock_add(res, stages[i].clock, peat_clock_now() - t0, peat_campaign_cpu_s() - c0);
    }
    peat_campaign_free(&c);
    return st;
}

peat_status peat_campaign_mkdir_p(const char *path)
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

/* The flow's configuration from the training options. */
peat_flow_config peat_campaign_flow_config(const peat_campaign_opts *o)
{
    peat_flow_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.seed = o->seed;
    cfg.weight_decay = -1.0;
    cfg.task = o->task;
    cfg.batch = o->batch, cfg.width = o->width, cfg.depth = o->depth, cfg.seq = o->seq;
    /* the option table admits only the preset names: a bad one is left to the flow's check */
    if (o->size && peat_models_flow_size_parse(o->size, &cfg.size) != PEAT_OK) cfg.size = -1;
    if (o->precision && peat_models_flow_precision_parse(o->precision, &cfg.precision) != PEAT_OK)
        cfg.precision = -1;
    cfg.loss_scale_init = o->loss_scale_init;
    cfg.loss_scale_interval = o->loss_scale_interval;
    cfg.lr = o->lr;
    cfg.optimizer = !o->optimizer                      ? PEAT_OPTIM_DEFAULT
                    : !strncmp(o->optimizer, "sgd", 3) ? PEAT_OPTIM_SGD
                                                       : PEAT_OPTIM_ADAMW;
    cfg.nesterov = o->optimizer && !strcmp(o->optimizer, "sgd_nesterov");
    return cfg;
}

const peat_campaign_opts *peat_campaign_view_opts(const peat_campaign *c)
{
    return c->o;
}

const peat_campaign_result *peat_campaign_view_result(const peat_campaign *c)
{
    return c->res;
}

const peat_kernel *peat_campaign_view_kernel(const peat_campaign *c)
{
    return c->k;
}

const char *peat_campaign_view_flow(const peat_campaign *c)
{
    return c->flow;
}

const char *peat_campaign_view_backend(const peat_campaign *c)
{
    return c->backend_name;
}

double peat_campaign_view_t_start(const peat_campaign *c)
{
    return c->t_start;
}
