/* stages.h: the campaign's shared state and its stages (one file per stage): the campaign room's
 * own header, and the pipeline's that lists the stages (harness/run/pipeline.c). The rooms above
 * read a campaign through view.h and time its work through work.h. */
#ifndef PEAT_HARNESS_STAGES_H
#define PEAT_HARNESS_STAGES_H

#include "analyzer/analyzer.h"
#include "core/check.h"
#include "harness/campaign/campaign.h"
#include "harness/campaign/checkpoint.h"
#include "harness/campaign/golden_cache.h"
#include "harness/campaign/view.h"
#include "harness/campaign/work.h"
#include "peat/backend.h"
#include "predictor/predictor.h"
#include "store/store.h"

/*
 * How `peat run` is built
 * -----------------------
 * peat_run_campaign (harness/run/pipeline.c) is the list of stages below, run in order on one
 * peat_campaign by peat_campaign_stages_run; the first stage that fails ends the campaign with
 * its status, and peat_campaign_free releases whatever the stages left in the struct. Two stages
 * live on the floors above this one: "plan" (harness/latency/stage_plan.c: it times these stages'
 * work) and "report" (harness/report/); both see the campaign through view.h. The plan stage
 * hands the campaign a plan, which plan.c follows through the fields below (playback's stop and
 * runtime FI's steering); no stage here calls up into the planner.
 *
 * Adding a stage (plan, probe, runtime FI, FI trials, ...):
 *   1. write harness/campaign/stage_<name>.c with one entry point
 *        peat_status peat_stage_<name>(peat_campaign *c);
 *      that reads what earlier stages left in *c and writes its own part of it (add the
 *      fields it needs to peat_campaign below, under a comment naming the stage, and release
 *      them in peat_campaign_free);
 *   2. declare it at the end of this file;
 *   3. add one line to the stage table in harness/run/pipeline.c, where it belongs in the pipeline,
 * with the clock its time counts towards. A stage must not reach back into the internals of
 * another: it reads the fields documented here. Stages that add to the campaign file do it before
 * "commit", which closes the file and names it complete; only "report" comes after it.
 */

/* Which reported time a stage's wall time adds to (peat_campaign_result.t_*). */
typedef enum {
    PEAT_CLOCK_NONE,
    PEAT_CLOCK_PROFILE,
    PEAT_CLOCK_PLAYBACK,
    PEAT_CLOCK_ANALYZE,
    PEAT_CLOCK_PROBE,
    PEAT_CLOCK_RUNTIME,
} peat_campaign_clock;

struct peat_campaign;
/* One stage of the pipeline: its name, entry point, the clock its time counts towards, and the
 * tables of the campaign file it writes (the manifest lists them). */
typedef struct peat_campaign_stage {
    const char *name;
    peat_status (*run)(struct peat_campaign *c);
    peat_campaign_clock clock;
    const char *writes;
} peat_campaign_stage;

typedef struct peat_campaign {
    const peat_campaign_opts *o;       /* the options, as parsed (never modified) */
    peat_campaign_opts o_own;          /* the options with a default the kernel decides (an fp8 GEMM
                                        * kernel's --precision fp8), when c->o points here */
    const peat_campaign_stage *stages; /* the pipeline this campaign runs (the manifest's list) */
    int n_stages;
    peat_campaign_result *res; /* what the report shows; filled stage by stage */
    double t_start;            /* peat_clock_now() when the campaign began */

    /* resolve: the kernel, its backend and device, the flow and the run's size */
    const peat_kernel *k;
    const char *flow;
    peat_device_info dev;
    char backend_name[16];
    int64_t iters, calls;
    char capture_flow[32]; /* --capture: the captured model's flow name ("torch:<model>") */
    /* plan (--budget): the model's unit costs, and the deadline that steers playback (the pace
     * of the replayed calls, the core share the process gets: stage_plan.c) */
    int planned;
    double deadline;
    peat_pred_costs costs;
    peat_pred_plan plan;
    int64_t min_calls; /* playback never stops before these */
    int64_t min_iters; /* nor runtime FI below these */
    int64_t max_iters; /* runtime FI grows to at most these when the run is ahead of its plan */
    double steer_s[PEAT_PRED_STEER_WINDOW]; /* runtime FI's last iterations: when each ended */
    double t_playback, slow, later_slow;
    /* the plan's rules for the stages after it (NULL without a plan): whether playback stops
     * before replayed call number `replayed` (1-based), runtime FI's iterations when it starts,
     * and its steering while the runs train (runtime.c: user is the campaign) */
    int (*playback_stop)(struct peat_campaign *c, int64_t replayed);
    int64_t (*runtime_iters)(struct peat_campaign *c);
    int64_t (*runtime_steer)(void *user, int64_t done, int64_t every, double loop_s);
    /* open: the campaign file (partial until commit) and what decides its records */
    char h5[600], partial[620];
    char policy[256];
    peat_campaign_golden_cache gcache; /* the golden work kept across runs (golden_cache.h) */
    int lock_fd;         /* flock on the output directory, held to the end (-1: none) */
    peat_store_t *store; /* open from "open" to the end of profile; later stages reopen it */

    /* profile: recorded calls of the kernel's op (to replay), and what the inputs hold */
    peat_record_list recs;
    double in_frac_below_normal, in_frac_above_max; /* NaN unless the kernel declares fp16/bf16 */

    /* playback: error accumulators (candidate's and golden's outputs against exact) */
    peat_analyzer_acc_t *acc_cand, *acc_gold;
    /* playback and probes under `mpirun -n N peat run`: the records went to the ranks */
    int recs_told;

    /* detect: the sources of the findings (the runtime stage adds its own and assembles again) */
    peat_finding_sources find;
    peat_finding find_signature[8], find_props[8];

    /* runtime: the curves of the golden, band and faulty runs (report.html plots them) */
    struct peat_runtime_result *rt;
    /* profile -> runtime: the profile's golden training, kept for the band's golden run */
    struct peat_runtime_golden_log *golden;
    /* runtime with --shard 0/N: the runs wait for the other shards; commit leaves the campaign
     * partial (its state only) and no report is written until `peat merge` */
    int shard_pending;

    /* stages that chose not to run, and why (the manifest records it; commit writes it) */
    struct {
        const char *stage;
        char why[96];
    } skipped[4];
    int n_skipped;
} peat_campaign;

/* Sets up c for a run of o into res (res is cleared). */
void peat_campaign_init(peat_campaign *c, const peat_campaign_opts *o, peat_campaign_result *res);
/* Releases what the stages left in c (records, accumulators, an open store). */
void peat_campaign_free(peat_campaign *c);

/* Runs the n stages in order on a campaign for o into res (each stage's time to its clock). */
peat_status peat_campaign_stages_run(const peat_campaign_stage *stages, int n,
                                     const peat_campaign_opts *o, peat_campaign_result *res);

/* The stages of this floor, in pipeline order (plan: harness/latency/; report: harness/report/). */
peat_status peat_campaign_stage_resolve(peat_campaign *c);  /* stage_resolve.c */
peat_status peat_campaign_stage_open(peat_campaign *c);     /* stage_open.c */
peat_status peat_campaign_stage_profile(peat_campaign *c);  /* stage_profile.c */
peat_status peat_campaign_stage_playback(peat_campaign *c); /* stage_playback.c */
/* The candidate keeping its state across call sequences, each call against the same call in a
 * fresh process (stage_sequence.c; STATEFUL in the runner's counts). */
peat_status peat_campaign_stage_sequence(peat_campaign *c); /* stage_sequence.c */
peat_status peat_campaign_stage_probe(peat_campaign *c);    /* stage_probe.c */
peat_status peat_campaign_stage_analyze(peat_campaign *c);  /* stage_analyze.c */
peat_status peat_campaign_stage_detect(peat_campaign *c);   /* stage_detect.c */
/* The differential diagnosis of a numeric failure (stage_diagnose.c): res->diagnosis, and the
 * decided finding joins the sources (c->find.diagnosed); judged again. */
peat_status peat_campaign_stage_diagnose(peat_campaign *c);
/* The one place a campaign is judged: the findings assembled from src (peat_detector_assemble)
 * into res->findings, and res->verdict from them. */
void peat_campaign_judge(peat_campaign_result *res, const peat_finding_sources *src);
peat_status peat_campaign_stage_runtime(peat_campaign *c); /* stage_runtime.c */
/* `mpirun -n N peat run`, ranks > 0: the runtime stage's share of this rank (after resolve, at
 * rank 0's GO: runtime_ranks.h), nothing written, nothing printed. */
peat_status peat_campaign_stage_runtime_rank(peat_campaign *c);
/* `mpirun -n N peat run` (docs/scale-out.md): playback and probe items split by index, item i on
 * rank i mod N (stage_items_rank.c). Whether rank 0 splits this campaign's items; rank 0's
 * records into a message (once: a flag says whether they follow); ranks > 0: the stage that runs
 * this rank's share of each stage rank 0 splits, until GO or STOP; the shares themselves (the
 * message from rank 0 in, the answer out: stage_playback.c, stage_probe.c). */
struct peat_scale_pack;
int peat_campaign_items_split(const peat_campaign *c);
void peat_campaign_items_records_put(peat_campaign *c, struct peat_scale_pack *p);
peat_status peat_campaign_stage_items_rank(peat_campaign *c);
peat_status peat_campaign_playback_share(peat_campaign *c, struct peat_scale_pack *in,
                                         struct peat_scale_pack *out);
peat_status peat_campaign_probe_share(peat_campaign *c, struct peat_scale_pack *in,
                                      struct peat_scale_pack *out);
peat_status peat_campaign_stage_commit(peat_campaign *c); /* stage_commit.c */
/* `peat merge` of run shards (stage_merge.c, stage_runtime.c): shard 0's partial campaign
 * reopened (its result and skipped stages), the stages shard 0 ran kept as they are, and the
 * runtime stage's runs taken from the shard files, judged and stored. */
peat_status peat_campaign_stage_reopen(peat_campaign *c);
peat_status peat_campaign_stage_kept(peat_campaign *c);
peat_status peat_campaign_stage_runtime_merge(peat_campaign *c);
/* --capture (stage_capture.c): resolve's flow and size from the captured file, and profile's
 * work done by importing the captured calls instead of training a flow. */
peat_status peat_campaign_capture_resolve(peat_campaign *c);
peat_status peat_campaign_capture_import(peat_campaign *c);

/* Records that stage did not run in this campaign, and why (the manifest says so). */
void peat_campaign_skip(peat_campaign *c, const char *stage, const char *why);
/* The pipeline as the manifest records it: each stage of c->stages, the tables it
 * writes into the campaign file, and its skip reason in this campaign. Returns the count
 * (at most max filled). */
int peat_campaign_stage_list(const peat_campaign *c, peat_store_stage *out, int max);

/* Mixed-precision record of the profile's training (precision.c): per iteration the loss scale
 * and skipped steps into PEAT_STORE_AMP_TABLE (not at fp32), counts into the result. */
typedef struct peat_campaign_amp_log {
    int precision;
    peat_store_table_t *t; /* NULL at fp32 */
    int64_t last_iter;     /* last stored row's iteration (-1: none) */
    int64_t steps, skipped;
    double scale_first, scale_last;
} peat_campaign_amp_log;
peat_status peat_campaign_amp_begin(peat_campaign *c, const peat_flow_config *cfg,
                                    peat_campaign_amp_log *log);
peat_status peat_campaign_amp_step(peat_campaign_amp_log *log, int64_t it,
                                   const peat_flow_metrics *m);
void peat_campaign_amp_end(peat_campaign *c, peat_campaign_amp_log *log);

#endif
