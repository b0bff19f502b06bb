/* stage_items_rank.c: `mpirun -n N peat run`, ranks > 0 (docs/scale-out.md): the playback and
 * probe items of rank 0's campaign split by index (item i on rank i mod N). Rank 0 hands the
 * recorded calls over with its message (P: playback, Q: probes); this rank runs its share and
 * answers with what the stage's analysis takes (stage_playback.c, stage_probe.c), until GO (the
 * runtime stage follows) or STOP. */
#include "core/test_hooks.h"
#include "harness/scale/ranks.h"
#include "harness/scale/scale.h"
#include "harness/campaign/stages.h"

#include <stdlib.h>
#include <string.h>

/* Rank 0's records, where the message carries them (a flag in front). */
static peat_status records_take(peat_campaign *c, peat_scale_pack *in)
{
    int32_t have = 0;
    peat_scale_pack_get(in, &have, sizeof have);
    if (in->err) return PEAT_ERROR(PEAT_ERR_FORMAT, "rank 0's message is cut short");
    return have ? peat_scale_pack_get_records(in, &c->recs) : PEAT_OK;
}

peat_status peat_campaign_stage_items_rank(peat_campaign *c)
{
    for (;;) {
        peat_scale_pack in, out = {0};
        char what = peat_scale_ranks_next(&in);
        if (what == 'G' || what == 'S') {
            peat_scale_pack_free(&in);
            return PEAT_OK; /* the runtime stage, or nothing more */
        }
        peat_status st = records_take(c, &in);
        /* test hook (core/test_hooks.h): items-fail-rank=R fails rank R's items, R:Q its probes
         * alone */
        char only[8];
        if (st == PEAT_OK &&
            peat_test_hook_rank("items-fail-rank", peat_scale_mpi_rank(), only, sizeof only) &&
            (!only[0] || only[0] == what))
            st =
                PEAT_ERROR(PEAT_ERR_INTERNAL, "test hook items-fail-rank: rank %d fails on purpose",
                           peat_scale_mpi_rank());
        if (st == PEAT_OK && what == 'P') st = peat_campaign_playback_share(c, &in, &out);
        if (st == PEAT_OK && what == 'Q') st = peat_campaign_probe_share(c, &in, &out);
        if (st == PEAT_OK && out.err) st = PEAT_ERROR(PEAT_ERR_NOMEM, "the answer to rank 0");
        peat_status sent = peat_scale_ranks_reply(st, &out);
        peat_scale_pack_free(&in);
        peat_scale_pack_free(&out);
        if (sent != PEAT_OK) return sent;
    }
}
