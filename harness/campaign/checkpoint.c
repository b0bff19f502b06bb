/* checkpoint.c: a flow's weights and optimizer state saved into and loaded from campaign files
 * (profile saves them; finetuning, and stages that restart training, load them). */
#include "harness/campaign/stages.h"

#include <stdlib.h>
#include <string.h>

/* Saves the flow's weights and optimizer state as the "checkpoint" snapshot of iteration it. */
peat_status peat_campaign_checkpoint_save(peat_store_t *store, int64_t it, peat_flow_t *f)
{
    int n = peat_models_flow_state_count(f);
    const peat_tensor **t = malloc((size_t)n * sizeof *t);
    const char **names = malloc((size_t)n * sizeof *names);
    peat_status st = t && names ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "checkpoint list");
    for (int i = 0; st == PEAT_OK && i < n; i++) t[i] = peat_models_flow_state(f, i, &names[i]);
    if (st == PEAT_OK) st = peat_store_state_write(store, it, "checkpoint", n, t, names);
    free(t);
    free(names);
    return st;
}

/* Initialises the flow from the last checkpoint in another campaign file: every state tensor
 * must be found by name with the same shape (a checkpoint of another model is refused). */
peat_status peat_campaign_checkpoint_load(const char *path, peat_flow_t *f)
{
    peat_store_t *src = NULL;
    PEAT_TRY(peat_store_open(path, 0, &src));
    int64_t best = -1, iter;
    char tag[32];
    int n;
    for (int64_t i = 0; i < peat_store_state_count(src); i++)
        if (peat_store_state_info(src, i, &iter, tag, &n) == PEAT_OK &&
            !strcmp(tag, "checkpoint") && iter > best)
            best = iter;
    peat_status st = PEAT_OK;
    peat_store_state *cp = NULL;
    if (best < 0)
        st = PEAT_ERROR(PEAT_ERR_NOTFOUND, "%s holds no checkpoint to finetune from", path);
    if (st == PEAT_OK) st = peat_store_state_read(src, best, "checkpoint", &cp);
    for (int i = 0; st == PEAT_OK && i < peat_models_flow_state_count(f); i++) {
        const char *name;
        peat_tensor *dst = peat_models_flow_state(f, i, &name);
        int j = 0;
        while (j < cp->n && strcmp(cp->names[j], name)) j++;
        if (j == cp->n)
            st = PEAT_ERROR(PEAT_ERR_FORMAT, "checkpoint in %s has no tensor '%s': another model?",
                            path, name);
        else if (peat_tensor_numel(cp->t[j]) != peat_tensor_numel(dst) ||
                 cp->t[j]->dtype != dst->dtype)
            st = PEAT_ERROR(PEAT_ERR_FORMAT, "checkpoint tensor '%s' in %s has another shape", name,
                            path);
        else
            memcpy(dst->data, cp->t[j]->data, peat_tensor_nbytes(dst));
    }
    if (st == PEAT_OK) peat_models_flow_set_step(f, best + 1);
    peat_store_state_free(cp);
    peat_store_close(src);
    return st;
}
