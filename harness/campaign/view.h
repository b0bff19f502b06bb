/* view.h: a campaign as the rooms above it see it (the report and plan stages of harness/report
 * and harness/latency): what it was asked (options, kernel, flow, backend) and what it found (its
 * result), read through accessors, the campaign's own state (stages.h) hidden; and the one thing
 * they hand it, a plan to follow (--budget). */
#ifndef PEAT_CAMPAIGN_VIEW_H
#define PEAT_CAMPAIGN_VIEW_H

#include "harness/campaign/campaign.h"
#include "predictor/predictor.h"

typedef struct peat_campaign peat_campaign;

const peat_campaign_opts *peat_campaign_view_opts(const peat_campaign *c);
const peat_campaign_result *peat_campaign_view_result(const peat_campaign *c);
/* The candidate under test, the flow it trains in and the backend's name (after resolve). */
const peat_kernel *peat_campaign_view_kernel(const peat_campaign *c);
const char *peat_campaign_view_flow(const peat_campaign *c);
const char *peat_campaign_view_backend(const peat_campaign *c);
/* peat_clock_now() when the campaign began. */
double peat_campaign_view_t_start(const peat_campaign *c);

/* What the plan stage decided for a --budget run (harness/latency/stage_plan.c). */
typedef struct peat_campaign_plan {
    double budget_s;       /* the budget */
    double t_plan;         /* seconds from the campaign's start to the plan */
    int ok;                /* a plan fits the budget (else only budget_s and t_plan are kept) */
    peat_pred_plan plan;   /* iterations, calls, predicted seconds per stage */
    peat_pred_costs costs; /* the model's unit costs, which steer the stages after the plan */
    int64_t min_calls;     /* playback never stops before these */
    int64_t min_iters;     /* nor runtime FI below these */
    int64_t max_iters;     /* runtime FI grows to at most these when the run is ahead */
    char note[160];        /* "planned N iterations, M calls; clock ...; core share ..." */
} peat_campaign_plan;

/* The campaign follows plan p (plan.c): its iterations and calls, its predictions in the result,
 * and a deadline of t_start + budget that steers playback and runtime FI while the run goes
 * slower or faster than predicted. */
void peat_campaign_plan_follow(peat_campaign *c, const peat_campaign_plan *p);

#endif
