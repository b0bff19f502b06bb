/* stage_commit.c: the commit stage: the signatures go into the campaign file, which is then named
 * complete (campaign.h5.partial -> campaign.h5). Every stage that adds to the file runs before. */
#include "harness/stages.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Adds both signatures (as JSON) to the campaign file. */
static peat_status store_signatures(const char *h5, const peat_campaign_result *res)
{
    peat_store_t *s = NULL;
    PEAT_TRY(peat_store_open(h5, 1, &s));
    const peat_signature *sig[2] = {&res->cand, &res->golden};
    peat_status st = PEAT_OK;
    for (int i = 0; i < 2 && st == PEAT_OK; i++) {
        int n = peat_signature_to_json(sig[i], NULL, 0) + 1;
        char *js = malloc((size_t)n);
        if (!js)
            st = PEAT_ERROR(PEAT_ERR_NOMEM, "signature json");
        else {
            peat_signature_to_json(sig[i], js, (size_t)n);
            st = peat_store_signature_write(s, sig[i]->kernel, js);
            free(js);
        }
    }
    peat_status cst = peat_store_close(s);
    return st != PEAT_OK ? st : cst;
}

peat_status peat_stage_commit(peat_campaign *c)
{
    /* the file is named complete only once every stage's output is in it */
    PEAT_TRY(store_signatures(c->partial, c->res));
    if (rename(c->partial, c->h5) != 0)
        return PEAT_ERROR(PEAT_ERR_IO, "cannot finish %s: %s", c->h5, strerror(errno));
    return PEAT_OK;
}
