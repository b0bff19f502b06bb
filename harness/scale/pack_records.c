/* pack_records.c: tensors and recorded calls in a rank's message or a shard's file (ranks.h's
 * pack): a tensor as dtype, rank, shape and bytes; a record as its fixed fields, then its
 * tensors (the ranks run the same binary). */
#include "harness/scale/ranks.h"

#include <stdlib.h>
#include <string.h>

void peat_scale_pack_put_tensor(peat_scale_pack *p, const peat_tensor *t)
{
    int32_t h[2] = {t ? (int32_t)t->dtype : -1, t ? t->ndim : 0};
    peat_scale_pack_put(p, h, sizeof h);
    if (!t) return;
    peat_scale_pack_put(p, t->shape, (size_t)t->ndim * sizeof t->shape[0]);
    peat_scale_pack_put(p, t->data, peat_tensor_nbytes(t));
}

peat_tensor *peat_scale_pack_get_tensor(peat_scale_pack *p)
{
    int32_t h[2];
    int64_t shape[PEAT_MAX_DIMS];
    peat_scale_pack_get(p, h, sizeof h);
    if (p->err || h[0] < 0) return NULL;
    peat_tensor *t = NULL;
    if (h[1] < 0 || h[1] > PEAT_MAX_DIMS) {
        p->err = 1;
        return NULL;
    }
    peat_scale_pack_get(p, shape, (size_t)h[1] * sizeof shape[0]);
    if (p->err || peat_tensor_alloc((peat_dtype)h[0], h[1], shape, &t) != PEAT_OK) {
        p->err = 1;
        return NULL;
    }
    peat_scale_pack_get(p, t->data, peat_tensor_nbytes(t));
    return t;
}

/* Each record: its fixed fields as they are in memory (the ranks run the same binary), then its
 * tensors. */
void peat_scale_pack_put_records(peat_scale_pack *p, const peat_record_list *l)
{
    peat_scale_pack_put(p, &l->n, sizeof l->n);
    for (int64_t i = 0; i < l->n; i++) {
        const peat_record *r = l->items[i];
        peat_scale_pack_put(p, r, sizeof *r);
        for (int k = 0; k < r->n_in; k++) peat_scale_pack_put_tensor(p, r->in[k]);
        for (int k = 0; k < r->n_out; k++) {
            peat_scale_pack_put_tensor(p, r->golden[k]);
            peat_scale_pack_put_tensor(p, r->exact[k]);
        }
    }
}

static peat_status record_get(peat_scale_pack *p, peat_record **out)
{
    peat_record *r = calloc(1, sizeof *r);
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "a record from rank 0");
    peat_scale_pack_get(p, r, sizeof *r);
    memset(r->in, 0, sizeof r->in), memset(r->golden, 0, sizeof r->golden);
    memset(r->exact, 0, sizeof r->exact);
    if (r->n_in < 0 || r->n_in > PEAT_MAX_IO || r->n_out < 0 || r->n_out > PEAT_MAX_IO) p->err = 1;
    for (int k = 0; k < r->n_in && !p->err; k++) r->in[k] = peat_scale_pack_get_tensor(p);
    for (int k = 0; k < r->n_out && !p->err; k++) {
        r->golden[k] = peat_scale_pack_get_tensor(p);
        r->exact[k] = peat_scale_pack_get_tensor(p);
    }
    if (p->err) {
        peat_record_free(r);
        return PEAT_ERROR(PEAT_ERR_FORMAT, "the records from rank 0 are cut short");
    }
    *out = r;
    return PEAT_OK;
}

peat_status peat_scale_pack_get_records(peat_scale_pack *p, peat_record_list *l)
{
    int64_t n = 0;
    peat_scale_pack_get(p, &n, sizeof n);
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
