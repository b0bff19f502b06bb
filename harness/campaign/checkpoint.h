/* checkpoint.h: a flow's training state through the campaign file (checkpoint.c): the profile
 * saves it, and a finetune, the runtime stage and playback FI's propagation restart from it. */
#ifndef PEAT_CAMPAIGN_CHECKPOINT_H
#define PEAT_CAMPAIGN_CHECKPOINT_H

#include "models/models.h"
#include "store/store.h"

peat_status peat_campaign_checkpoint_save(peat_store_t *store, int64_t it, peat_flow_t *f);
peat_status peat_campaign_checkpoint_load(const char *path, peat_flow_t *f);

#endif
