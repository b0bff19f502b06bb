/* stage_commit.c: the commit stage: the signatures go into the campaign file, which is then named
 * complete (campaign.h5.partial -> campaign.h5). Every stage that adds to the file runs before. */
#include "harness/campaign/result_store.h"
#include "harness/campaign/stages.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Adds both signatures (as JSON) and the report state to the campaign file, then its manifest
 * (every stage, what it wrote; docs/hdf5-schema.md): the last write before the file is named
 * complete. */
static peat_status store_signatures(const peat_campaign *c)
{
    const peat_campaign_result *res = c->res;
    peat_store_t *s = NULL;
    PEAT_TRY(peat_store_open(c->partial, 1, &s));
    const peat_signature *sig[2] = {&res->cand, &res->golden};
    peat_status st = PEAT_OK;
    for (int i = 0; i < 2 && st == PEAT_OK; i++) {
        int n = peat_analyzer_signature_to_json(sig[i], NULL, 0) + 1;
        char *js = malloc((size_t)n);
        if (!js)
            st = PEAT_ERROR(PEAT_ERR_NOMEM, "signature json");
        else {
            peat_analyzer_signature_to_json(sig[i], js, (size_t)n);
            st = peat_store_signature_write(s, sig[i]->kernel, js);
            free(js);
        }
    }
    /* what the reports are made from, so that `peat report DIR` can write them again */
    if (st == PEAT_OK) st = peat_campaign_state_write(s, c->o, res);
    peat_store_stage list[32];
    int n = peat_campaign_stage_list(c, list, 32);
    if (st == PEAT_OK) st = peat_store_manifest_write(s, list, n < 32 ? n : 32);
    peat_status cst = peat_store_close(s);
    return st != PEAT_OK ? st : cst;
}

/* --shard 0/N: the result so far (runtime pending) into the partial campaign, for the merge. */
static peat_status park(const peat_campaign *c)
{
    peat_store_t *s = NULL;
    PEAT_TRY(peat_store_open(c->partial, 1, &s));
    peat_status st = peat_campaign_state_write(s, c->o, c->res);
    peat_status cst = peat_store_close(s);
    return st != PEAT_OK ? st : cst;
}

peat_status peat_campaign_stage_commit(peat_campaign *c)
{
    if (c->shard_pending) return park(c);
    /* the file is named complete only once every stage's output is in it */
    PEAT_TRY(store_signatures(c));
    if (rename(c->partial, c->h5) != 0)
        return PEAT_ERROR(PEAT_ERR_IO, "cannot finish %s: %s", c->h5, strerror(errno));
    return PEAT_OK;
}
