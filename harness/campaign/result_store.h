/* result_store.h: a campaign's result kept in its file (/report/state, written by commit), so
 * that its reports can be written again from the file alone (`peat report DIR`). */
#ifndef PEAT_CAMPAIGN_RESULT_STORE_H
#define PEAT_CAMPAIGN_RESULT_STORE_H

#include "harness/campaign/campaign.h"
#include "harness/runtime/runtime.h"
#include "store/store.h"

/* What the reports of a finished campaign are made from, read back from its file. */
typedef struct peat_campaign_state {
    peat_campaign_opts o;     /* defaults, with what the reports read: argv, seed, capture */
    peat_campaign_result res; /* as the commit stage saw it; res.rt points at rt */
    peat_runtime_result *rt;  /* the runtime FI curves (/runtime/curves); NULL when none */
    char *argv, *capture;     /* owned; o points at them */
} peat_campaign_state;

/* Writes r and the options the reports read into s (a table, covered by the manifest). The
 * result is kept as this build lays it out, tagged with that layout. */
peat_status peat_campaign_state_write(peat_store_t *s, const peat_campaign_opts *o,
                                      const peat_campaign_result *r);
/* Reads them back; PEAT_ERR_FORMAT with a message when the file holds none (written before
 * they were kept) or a layout this build does not share. */
peat_status peat_campaign_state_read(peat_store_t *s, peat_campaign_state *out);
void peat_campaign_state_free(peat_campaign_state *st);

#endif
