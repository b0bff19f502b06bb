/* run.h: `peat run`'s pipeline, the list of stages that makes one campaign (pipeline.c). */
#ifndef PEAT_RUN_RUN_H
#define PEAT_RUN_RUN_H

#include "harness/campaign/campaign.h"

/* Runs the whole campaign. Returns PEAT_OK when a verdict was reached (read res->verdict);
 * any other status is a usage, input or environment error (message via peat_error_last). */
peat_status peat_run_campaign(const peat_campaign_opts *o, peat_campaign_result *res);

#endif
