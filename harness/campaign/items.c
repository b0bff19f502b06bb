/* items.c: rank 0's side of `mpirun -n N peat run` at playback and probes (docs/scale-out.md):
 * whether the stage's items are split among the ranks, and the recorded calls its message to
 * them carries (once; stage_items_rank.c is the other ranks' side). */
#include "harness/scale/ranks.h"
#include "harness/scale/scale.h"
#include "harness/campaign/stages.h"

int peat_campaign_items_split(const peat_campaign *c)
{
    return peat_scale_ranks_active() && peat_scale_mpi_rank() == 0 && !c->playback_stop;
}

void peat_campaign_items_records_put(peat_campaign *c, peat_scale_pack *p)
{
    int32_t have = !c->recs_told;
    peat_scale_pack_put(p, &have, sizeof have);
    if (have) peat_scale_pack_put_records(p, &c->recs);
    c->recs_told = 1;
}
