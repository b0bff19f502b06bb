/* stage_items_rank.c: `mpirun -n N peat run`, ranks > 0 (docs/scale-out.md): the playback and
 * probe items of rank 0's campaign split by index (item i on rank i mod N). Rank 0 hands the
 * recorded calls over with its message (P: playback, Q: probes); this rank runs its share and
 * answers with what the stage's analysis takes (stage_playback.c, stage_probe.c), until GO (the
 * runtime stage follows) or STOP. Also the pack of tensors and records. */
#include "campaign/runtime_ranks.h"
#include "campaign/scale.h"
#include "campaign/stages.h"

#include <stdlib.h>
#include <string.h>

void peat_campaign_pack_put_tensor(peat_campaign_pack *p, const peat_tensor *t)
{
    int32_t h[2] = {t ? (int32_t)t->dtype : -1, t ? t->ndim : 0};
    peat_campaign_pack_put(p, h, sizeof h);
    if (!t) return;
    peat_campaign_pack_put(p, t->shape, (size_t)t->ndim * sizeof t->shape[0]);
    peat_campaign_pack_put(p, t->data, peat_tensor_nbytes(t));
}

peat_tensor *peat_campaign_pack_get_tensor(peat_campaign_pack *p)
{
    int32_t h[2];
    int64_t shape[PEAT_MAX_DIMS];
    peat_campaign_pack_get(p, h, sizeof h);
    if (p->err || h[0] < 0) return NULL;
    peat_tensor *t = NULL;
    if (h[1] < 0 || h[1] > PEAT_MAX_DIMS) {
        p->err = 1;
        return NULL;
    }
    peat_campaign_pack_get(p, shape, (size_t)h[1] * sizeof shape[0]);
    if (p->err || peat_tensor_alloc((peat_dtype)h[0], h[1], shape, &t) != PEAT_OK) {
        p->err = 1;
        return NULL;
    }
    peat_campaign_pack_get(p, t->data, peat_tensor_nbytes(t));
    return t;
}

/* Each record: its fixed fields as they are in memory (the ranks run the same binary), then its
 * tensors. */
void peat_campaign_pack_put_records(peat_campaign_pack *p, const peat_record_list *l)
{
    peat_campaign_pack_put(p, &l->n, sizeof l->n);
    for (int64_t i = 0; i < l->n; i++) {
        const peat_record *r = l->items[i];
        peat_campaign_pack_put(p, r, sizeof *r);
        for (int k = 0; k < r->n_in; k++) peat_campaign_pack_put_tensor(p, r->in[k]);
        for (int k = 0; k < r->n_out; k++) {
            peat_campaign_pack_put_tensor(p, r->golden[k]);
            peat_campaign_pack_put_tensor(p, r->exact[k]);
        }
    }
}

static peat_status record_get(peat_campaign_pack *p, peat_record **out)
{
    peat_record *r = calloc(1, sizeof *r);
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "a record from rank 0");
    peat_campaign_pack_get(p, r, sizeof *r);
    memset(r->in, 0, sizeof r->in), memset(r->golden, 0, sizeof r->golden);
    memset(r->exact, 0, sizeof r->exact);
    if (r->n_in < 0 || r->n_in > PEAT_MAX_IO || r->n_out < 0 || r->n_out > PEAT_MAX_IO) p->err = 1;
    for (int k = 0; k < r->n_in && !p->err; k++) r->in[k] = peat_campaign_pack_get_tensor(p);
    for (int k = 0; k < r->n_out && !p->err; k++) {
        r->golden[k] = peat_campaign_pack_get_tensor(p);
        r->exact[k] = peat_campaign_pack_get_tensor(p);
    }
    if (p->err) {
        peat_record_free(r);
        return PEAT_ERROR(PEAT_ERR_FORMAT, "the records from rank 0 are cut short");
    }
    *out = r;
    return PEAT_OK;
}

peat_status peat_campaign_pack_get_records(peat_campaign_pack *p, peat_record_list *l)
{
    int64_t n = 0;
    peat_campaign_pack_get(p, &n, sizeof n);
    if (p->err || n < 0)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "the records from rank 0 are cut short");
    peat_record_list_clear(l);
    for (int64_t i = 0; i < n; i++) {
        peat_record *r = NULL;
        PEAT_TRY(record_get(p, &r));
        peat_status st = peat_record_list_sink(l, r);
        if (st != PEAT_OK) {
            peat_record_free(r);
            return st;
        }
    }
    return PEAT_OK;
}

/* Rank 0's records, where the message carries them (a flag in front). */
static peat_status records_take(peat_campaign *c, peat_campaign_pack *in)
{
    int32_t have = 0;
    peat_campaign_pack_get(in, &have, sizeof have);
    if (in->err) return PEAT_ERROR(PEAT_ERR_FORMAT, "rank 0's message is cut short");
    return have ? peat_campaign_pack_get_records(in, &c->recs) : PEAT_OK;
}

void peat_campaign_items_records_put(peat_campaign *c, peat_campaign_pack *p)
{
    int32_t have = !c->recs_told;
    peat_campaign_pack_put(p, &have, sizeof have);
    if (have) peat_campaign_pack_put_records(p, &c->recs);
    c->recs_told = 1;
}

peat_status peat_campaign_stage_items_rank(peat_campaign *c)
{
    for (;;) {
        peat_campaign_pack in, out = {0};
        char what = peat_campaign_runtime_ranks_next(&in);
        if (what == 'G' || what == 'S') {
            peat_campaign_pack_free(&in);
            return PEAT_OK; /* the runtime stage, or nothing more */
        }
        peat_status st = records_take(c, &in);
        /* test only (tests/test_scale_mpi.c): PEAT_TEST_ITEMS_FAIL_RANK=R fails rank R's items,
         * R:Q its probes alone */
        const char *fail = getenv("PEAT_TEST_ITEMS_FAIL_RANK"),
                   *only = fail ? strchr(fail, ':') : 0;
        if (st == PEAT_OK && fail && atoi(fail) == peat_campaign_scale_mpi_rank() &&
            (!only || only[1] == what))
            st =
                PEAT_ERROR(PEAT_ERR_INTERNAL, "PEAT_TEST_ITEMS_FAIL_RANK: rank %d fails on purpose",
                           peat_campaign_scale_mpi_rank());
        if (st == PEAT_OK && what == 'P') st = peat_campaign_playback_share(c, &in, &out);
        if (st == PEAT_OK && what == 'Q') st = peat_campaign_probe_share(c, &in, &out);
        if (st == PEAT_OK && out.err) st = PEAT_ERROR(PEAT_ERR_NOMEM, "the answer to rank 0");
        peat_status sent = peat_campaign_runtime_ranks_reply(st, &out);
        peat_campaign_pack_free(&in);
        peat_campaign_pack_free(&out);
        if (sent != PEAT_OK) return sent;
    }
}

int peat_campaign_items_split(const peat_campaign *c)
{
    return peat_campaign_runtime_ranks_active() && peat_campaign_scale_mpi_rank() == 0 &&
           !c->playback_stop;
}
