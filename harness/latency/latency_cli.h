/* latency_cli.h: the predictor's commands (calibrate-latency, predict) and the budget planning of
 * `peat run --budget`, as functions the CLI's option tables call. */
#ifndef PEAT_HARNESS_LATENCY_CLI_H
#define PEAT_HARNESS_LATENCY_CLI_H

#include <stdio.h>

#include "harness/latency/latency.h"

typedef struct peat_latency_opts {
    const char *kernel, *flow, *backend, *cache_dir;
    peat_flow_config flow_cfg; /* seed and sizes as the campaign will use them */
    FILE *log;                 /* cache warnings; NULL = silent */
    /* the run options that choose the stages and their settings (probes, runtime FI runs and
     * frequencies, repeats, isolation): the campaign's own; NULL = `peat run`'s defaults */
    const peat_campaign_opts *run;
} peat_latency_opts;

/* A calibrated model of one kernel on one flow: env, table, the flow's calls, unit costs. */
typedef struct peat_latency_model {
    const peat_kernel *kernel;
    const char *flow;
    peat_latency_env env;
    peat_pred_table table;
    peat_latency_flow calls;
    peat_pred_costs costs;
    peat_campaign_opts run; /* the run options predicted (pointers are the caller's) */
    double calib_s;         /* calibration it needed (0: all from the cache) */
} peat_latency_model;

peat_status peat_latency_model_init(const peat_latency_opts *o, peat_latency_model *m);
void peat_latency_model_close(peat_latency_model *m);
/* The flow a kernel is validated on: flow if given (checked), else the first that calls its op. */
peat_status peat_latency_flow_for(const peat_kernel *k, const char *flow, const char **out);
/* Cost of a campaign of iters iterations recording calls calls, with the model's run options. */
peat_status peat_latency_plan_for(const peat_latency_model *m, int64_t iters, int64_t calls,
                                  peat_pred_plan *p);
/* The largest campaign that fits budget_s (refused, with the minimum, when none does). */
peat_status peat_latency_budget(const peat_latency_model *m, double budget_s, int64_t default_iters,
                                int64_t default_calls, peat_pred_plan *plan);

/* `peat calibrate-latency [--backend B] [--force]` */
peat_status peat_latency_cli_calibrate(const char *backend, const char *cache_dir, int force,
                                       FILE *out);
/* `peat predict --kernel K [--flow F]`, for a campaign of iters x calls */
peat_status peat_latency_cli_predict(const peat_latency_opts *o, int64_t iters, int64_t calls,
                                     FILE *out);
/* "90s", "90", "5m", "1h" -> seconds */
peat_status peat_latency_duration_parse(const char *s, double *seconds);

/* The plan stage of `peat run --budget` (stage_plan.c): sizes the campaign to the budget and
 * hands the campaign the plan it follows (harness/campaign/view.h). */
struct peat_campaign;
peat_status peat_latency_stage_plan(struct peat_campaign *c);

#endif
