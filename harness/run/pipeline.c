/* pipeline.c: `peat run`'s pipeline: the stages of one campaign in order, from the floors that
 * hold them (harness/campaign/, harness/latency/'s plan, harness/report/). */
#include "harness/latency/latency_cli.h"
#include "harness/campaign/stages.h"
#include "harness/report/report.h"
#include "harness/run/run.h"

#include "harness/scale/ranks.h"
#include "harness/scale/scale.h"

#include <string.h>

/* The pipeline of `peat run`, in order (docs/architecture.md; how to add one: stages.h). */
static const peat_campaign_stage stages[] = {
    {"resolve", peat_campaign_stage_resolve, PEAT_CLOCK_NONE, NULL},
    {"plan", peat_latency_stage_plan, PEAT_CLOCK_NONE, NULL},
    {"open", peat_campaign_stage_open, PEAT_CLOCK_NONE, NULL},
    {"profile", peat_campaign_stage_profile, PEAT_CLOCK_PROFILE,
     "/tensors/index /calls/index /states/index /metrics/index " PEAT_STORE_AMP_TABLE},
    {"playback", peat_campaign_stage_playback, PEAT_CLOCK_PLAYBACK, NULL},
    {"sequence", peat_campaign_stage_sequence, PEAT_CLOCK_PLAYBACK, NULL},
    {"probe", peat_campaign_stage_probe, PEAT_CLOCK_PROBE, NULL},
    {"analyze", peat_campaign_stage_analyze, PEAT_CLOCK_ANALYZE, NULL},
    {"detect", peat_campaign_stage_detect, PEAT_CLOCK_ANALYZE, NULL},
    {"diagnose", peat_campaign_stage_diagnose, PEAT_CLOCK_PROBE, NULL},
    {"runtime", peat_campaign_stage_runtime, PEAT_CLOCK_RUNTIME,
     "/runtime/curves /runtime/weight_distance /runtime/verdicts"},
    {"commit", peat_campaign_stage_commit, PEAT_CLOCK_ANALYZE, "/signatures/index /report/state"},
    {"report", peat_report_stage, PEAT_CLOCK_NONE, NULL},
};

/* `mpirun -n N peat run`, ranks > 0 (docs/scale-out.md): the kernel and flow, this rank's share
 * of the playback and probe items, then of the runtime FI runs for rank 0; rank 0 runs every
 * other stage and writes alone. */
static const peat_campaign_stage rank_stages[] = {
    {"resolve", peat_campaign_stage_resolve, PEAT_CLOCK_NONE, NULL},
    {"items", peat_campaign_stage_items_rank, PEAT_CLOCK_PLAYBACK, NULL},
    {"runtime", peat_campaign_stage_runtime_rank, PEAT_CLOCK_RUNTIME, NULL},
};

/* `peat run --shard I/N`, I > 0 (docs/scale-out.md): the kernel and flow, then this shard's
 * runtime FI runs into its file; shard 0 runs `stages` (its runtime stage keeps its runs for the
 * merge, and commit leaves the campaign partial). */
static const peat_campaign_stage shard_stages[] = {
    {"resolve", peat_campaign_stage_resolve, PEAT_CLOCK_NONE, NULL},
    {"runtime", peat_campaign_stage_runtime, PEAT_CLOCK_RUNTIME, NULL},
};

/* The reports, unless shard 0's runtime verdicts wait for `peat merge`. */
static peat_status report_unless_pending(peat_campaign *c)
{
    return c->shard_pending ? PEAT_OK : peat_report_stage(c);
}

/* `peat merge` of run shards: `stages` with the same names and outputs (the manifest's list),
 * those shard 0 ran kept as its partial campaign holds them. */
static const peat_campaign_stage merge_stages[] = {
    {"resolve", peat_campaign_stage_resolve, PEAT_CLOCK_NONE, NULL},
    {"plan", peat_campaign_stage_kept, PEAT_CLOCK_NONE, NULL},
    {"open", peat_campaign_stage_reopen, PEAT_CLOCK_NONE, NULL},
    {"profile", peat_campaign_stage_kept, PEAT_CLOCK_PROFILE,
     "/tensors/index /calls/index /states/index /metrics/index " PEAT_STORE_AMP_TABLE},
    {"playback", peat_campaign_stage_kept, PEAT_CLOCK_PLAYBACK, NULL},
    {"sequence", peat_campaign_stage_kept, PEAT_CLOCK_PLAYBACK, NULL},
    {"probe", peat_campaign_stage_kept, PEAT_CLOCK_PROBE, NULL},
    {"analyze", peat_campaign_stage_kept, PEAT_CLOCK_ANALYZE, NULL},
    {"detect", peat_campaign_stage_kept, PEAT_CLOCK_ANALYZE, NULL},
    {"diagnose", peat_campaign_stage_kept, PEAT_CLOCK_PROBE, NULL},
    {"runtime", peat_campaign_stage_runtime_merge, PEAT_CLOCK_RUNTIME,
     "/runtime/curves /runtime/weight_distance /runtime/verdicts"},
    {"commit", peat_campaign_stage_commit, PEAT_CLOCK_ANALYZE, "/signatures/index /report/state"},
    {"report", peat_report_stage, PEAT_CLOCK_NONE, NULL},
};

#define COUNT(a) ((int)(sizeof a / sizeof a[0]))

peat_status peat_run_campaign(const peat_campaign_opts *o, peat_campaign_result *res)
{
    if (peat_scale_ranks_active() && peat_scale_mpi_rank() > 0)
        return peat_campaign_stages_run(rank_stages, COUNT(rank_stages), o, res);
    peat_scale_shard sh = {0, 1};
    if (o->n_merge_shards > 0)
        return peat_campaign_stages_run(merge_stages, COUNT(merge_stages), o, res);
    if (o->shard) PEAT_TRY(peat_scale_shard_parse(o->shard, &sh));
    if (sh.i > 0) return peat_campaign_stages_run(shard_stages, COUNT(shard_stages), o, res);
    if (o->shard) {
        peat_campaign_stage s0[COUNT(stages)];
        memcpy(s0, stages, sizeof s0);
        s0[COUNT(stages) - 1].run = report_unless_pending;
        return peat_campaign_stages_run(s0, COUNT(s0), o, res);
    }
    return peat_campaign_stages_run(stages, COUNT(stages), o, res);
}
