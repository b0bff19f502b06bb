/* stage_merge.c: `peat merge` of `peat run --shard` files (docs/scale-out.md): shard 0's partial
 * campaign reopened with the result it kept, in place of the stages it ran. */
#include "harness/campaign/result_store.h"
#include "harness/scale/run_shard.h"
#include "harness/campaign/stages.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The stages shard 0 ran (profile, playback, probes, analysis, detection): kept as they are. */
peat_status peat_campaign_stage_kept(peat_campaign *c)
{
    (void)c;
    return PEAT_OK;
}

/* Shard 0's skipped stages, as its file says, for the manifest. */
static void skips_restore(peat_campaign *c, const peat_scale_run_shard *s0)
{
    for (int k = 0; k < s0->n_skipped; k++)
        for (int j = 0; j < c->n_stages; j++)
            if (!strcmp(c->stages[j].name, s0->skip_stage[k]))
                peat_campaign_skip(c, c->stages[j].name, s0->skip_why[k]);
}

peat_status peat_campaign_stage_reopen(peat_campaign *c)
{
    const peat_campaign_opts *o = c->o;
    const peat_scale_run_shard *s0 = &o->merge_shards[0];
    snprintf(c->h5, sizeof c->h5, "%s/campaign.h5", o->out_dir);
    snprintf(c->partial, sizeof c->partial, "%s.partial", c->h5);
    struct stat sb;
    if (stat(c->partial, &sb) != 0)
        return PEAT_ERROR(PEAT_ERR_NOTFOUND,
                          stat(c->h5, &sb) == 0
                              ? "merge of %s: its campaign is complete already (campaign.h5): "
                                "nothing to merge (nothing written)"
                              : "merge of %s: no campaign.h5.partial of shard 0: run shard 0 "
                                "(--shard 0/%d) with --out there; then merge again (nothing "
                                "written)",
                          o->out_dir, s0->sh.n);
    peat_store_t *s = NULL;
    peat_campaign_state *state = calloc(1, sizeof *state);
    if (!state) return PEAT_ERROR(PEAT_ERR_NOMEM, "campaign state");
    peat_status st = peat_store_open(c->partial, 0, &s);
    if (st == PEAT_OK && peat_campaign_state_read(s, state) != PEAT_OK)
        st = PEAT_ERROR(PEAT_ERR_FORMAT,
                        "merge of %s: shard 0 did not finish its campaign (campaign.h5.partial "
                        "holds no result): rerun it with --shard 0/%d --force; then merge again "
                        "(nothing written)",
                        o->out_dir, s0->sh.n);
    if (s) peat_store_close(s);
    if (st == PEAT_OK) {
        *c->res = state->res;             /* shard 0's result, the runtime verdicts pending */
        c->t_start -= state->res.t_total; /* the total counts shard 0's time, then the merge's */
        c->res->rt = NULL;
        snprintf(c->res->out_dir, sizeof c->res->out_dir, "%s", o->out_dir);
        skips_restore(c, s0);
    }
    peat_campaign_state_free(state);
    free(state);
    return st;
}
