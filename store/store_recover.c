/* store_recover.c: validating the index rows and dropping a killed writer's unfinished record. */
#include "store/store_impl.h"

#include <stdlib.h>
#include <string.h>

static int row_good(const peat_store_t *s, int t, int64_t i)
{
    const store_vec *v = &s->rows[t];
    const char *row = (const char *)v->data + (size_t)i * v->elem;
    uint64_t chk;
    memcpy(&chk, row + v->elem - 8, 8);
    return chk == peat_store_row_check(t, row, v->elem);
}

static int row_zero(const peat_store_t *s, int t, int64_t i)
{
    const store_vec *v = &s->rows[t];
    const unsigned char *row = (const unsigned char *)v->data + (size_t)i * v->elem;
    for (size_t b = 0; b < v->elem; b++)
        if (row[b]) return 0;
    return 1;
}

/* Rows whose checksum holds, up to the first that fails (fill values or a torn write). */
static int64_t checked_prefix(const peat_store_t *s, int t)
{
    int64_t n = 0;
    while (n < s->rows[t].n && row_good(s, t, n)) n++;
    return n;
}

static int tensor_row_ok(const peat_store_t *s, const store_tensor_row *r)
{
    if (r->dtype < 0 || r->dtype >= PEAT_DTYPE_COUNT || r->ndim < 1 || r->ndim > PEAT_MAX_DIMS)
        return 0;
    int64_t n = 1;
    for (int d = 0; d < r->ndim; d++) {
        if (r->shape[d] <= 0 || r->shape[d] > (1LL << 34) || n > (1LL << 34) / r->shape[d])
            return 0;
        n *= r->shape[d];
    }
    if (r->pool != STORE_POOL_DEFLATE && r->pool != STORE_POOL_RAW) return 0;
    int64_t len = r->pool == STORE_POOL_RAW ? s->raw_len[r->dtype] : s->pool_len[r->dtype];
    return n == r->numel && r->offset >= 0 && r->offset + r->numel <= len;
}

/* A record of any kind, for the sequence checks. */
typedef struct {
    int64_t seq;
    int table;
    int64_t first, n; /* its rows in its table */
} rec_ref;

static int ref_ok(int64_t ref, int64_t n_tensors, int may_be_none)
{
    return (may_be_none && ref == -1) || (ref >= 0 && ref < n_tensors);
}

/* Structural check of one record (references in range). */
static int record_ok(const peat_store_t *s, const rec_ref *rr, int64_t n_tensors)
{
    if (rr->table == STORE_T_CALL) {
        const store_call_row *c = STORE_ROW(s, STORE_T_CALL, store_call_row, rr->first);
        if (c->op < 0 || c->op >= PEAT_OP_COUNT || c->n_in < 0 || c->n_in > PEAT_MAX_IO ||
            c->n_out < 0 || c->n_out > PEAT_MAX_IO || c->phase < 0 || c->phase > 2)
            return 0;
        for (int k = 0; k < c->n_in; k++)
            if (!ref_ok(c->t_in[k], n_tensors, 0)) return 0;
        for (int k = 0; k < c->n_out; k++)
            if (!ref_ok(c->t_golden[k], n_tensors, 1) || !ref_ok(c->t_exact[k], n_tensors, 1))
                return 0;
        return 1;
    }
    if (rr->table == STORE_T_STATE) {
        const store_state_row *r0 = STORE_ROW(s, STORE_T_STATE, store_state_row, rr->first);
        if (rr->n != r0->count) return 0;
        for (int64_t i = 0; i < rr->n; i++) {
            const store_state_row *r = r0 + i;
            if (r->index != i || !ref_ok(r->tensor, n_tensors, 0)) return 0;
        }
        return 1;
    }
    if (rr->table == STORE_T_SIG) {
        const store_sig_row *g = STORE_ROW(s, STORE_T_SIG, store_sig_row, rr->first);
        return g->text_offset >= 0 && g->text_len >= 0 &&
               g->text_offset + g->text_len <= s->text_len;
    }
    return 1;
}

/* The data a record added (tensors >= its t_first, its signature text) matches its hashes. */
static peat_status record_data_verify(peat_store_t *s, const rec_ref *rr)
{
    if (rr->table == STORE_T_CALL) {
        const store_call_row *c = STORE_ROW(s, STORE_T_CALL, store_call_row, rr->first);
        const int64_t *lists[3] = {c->t_in, c->t_golden, c->t_exact};
        int counts[3] = {c->n_in, c->n_out, c->n_out};
        for (int l = 0; l < 3; l++)
            for (int k = 0; k < counts[l]; k++)
                if (lists[l][k] >= c->t_first) PEAT_TRY(peat_store_tensor_verify(s, lists[l][k]));
    } else if (rr->table == STORE_T_STATE) {
        for (int64_t i = 0; i < rr->n; i++) {
            const store_state_row *r = STORE_ROW(s, STORE_T_STATE, store_state_row, rr->first + i);
            if (r->tensor >= r->t_first) PEAT_TRY(peat_store_tensor_verify(s, r->tensor));
        }
    } else if (rr->table == STORE_T_SIG) {
        const store_sig_row *g = STORE_ROW(s, STORE_T_SIG, store_sig_row, rr->first);
        char *text = NULL;
        PEAT_TRY(peat_store_text_read(s, g->text_offset, g->text_len, &text));
        int same = peat_store_hash64(text, (size_t)g->text_len, 0) == g->text_hash;
        free(text);
        if (!same)
            return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: signature text does not match its hash",
                              s->path);
    }
    return PEAT_OK;
}

static int cmp_seq(const void *a, const void *b)
{
    int64_t x = ((const rec_ref *)a)->seq, y = ((const rec_ref *)b)->seq;
    return x < y ? -1 : x > y;
}

static int64_t row_seq(const peat_store_t *s, int t, int64_t i)
{
    switch (t) {
    case STORE_T_CALL:
        return STORE_ROW(s, t, store_call_row, i)->seq;
    case STORE_T_STATE:
        return STORE_ROW(s, t, store_state_row, i)->seq;
    case STORE_T_METRIC:
        return STORE_ROW(s, t, store_metric_row, i)->seq;
    default:
        return STORE_ROW(s, t, store_sig_row, i)->seq;
    }
}

/* Rows whose checksum holds, per table, up to the first that fails. Past a failing row a killed
 * writer can only have left rows of the one record it was writing (a snapshot's rows may span
 * two chunks, flushed in either order); any other good row there means rows in the middle of
 * the table were lost: damage. */
static peat_status rows_validate(const peat_store_t *s, int64_t n_ok[STORE_T_COUNT])
{
    int64_t seq_max = -1;
    for (int t = 0; t < STORE_T_COUNT; t++) n_ok[t] = checked_prefix(s, t);
    for (int t = STORE_T_CALL; t < STORE_T_COUNT; t++)
        for (int64_t i = 0; i < n_ok[t]; i++)
            seq_max = row_seq(s, t, i) > seq_max ? row_seq(s, t, i) : seq_max;
    for (int t = STORE_T_CALL; t < STORE_T_COUNT; t++)
        for (int64_t i = n_ok[t] + 1; i < s->rows[t].n; i++)
            if (row_good(s, t, i) && row_seq(s, t, i) != seq_max + 1)
                return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: row %lld of %s is damaged (checksum)",
                                  s->path, (long long)n_ok[t], peat_store_table_path(t));
    return PEAT_OK;
}

/* The records of every kind (a snapshot is the consecutive rows sharing a sequence number), in
 * sequence order. */
static peat_status records_collect(const peat_store_t *s, const int64_t n_ok[STORE_T_COUNT],
                                   rec_ref **out, int64_t *m_out)
{
    int64_t n_recs =
        n_ok[STORE_T_CALL] + n_ok[STORE_T_STATE] + n_ok[STORE_T_METRIC] + n_ok[STORE_T_SIG];
    rec_ref *recs = malloc((size_t)(n_recs + 1) * sizeof *recs);
    if (!recs) return PEAT_ERROR(PEAT_ERR_NOMEM, "record list");
    int64_t m = 0;
    for (int t = STORE_T_CALL; t < STORE_T_COUNT; t++)
        for (int64_t i = 0; i < n_ok[t];) {
            int64_t j = i + 1, seq = row_seq(s, t, i);
            if (t == STORE_T_STATE)
                while (j < n_ok[t] && row_seq(s, t, j) == seq) j++;
            recs[m++] = (rec_ref){seq, t, i, j - i};
            i = j;
        }
    qsort(recs, (size_t)m, sizeof *recs, cmp_seq);
    *out = recs;
    *m_out = m;
    return PEAT_OK;
}

/* The last record is dropped unless it is whole: its rows all there, its new data matching its
 * hashes (it is the last row(s) of its table, so dropping it truncates that table). */
static peat_status last_record_check(peat_store_t *s, const rec_ref *recs, int64_t *m,
                                     int64_t n_ok[STORE_T_COUNT], int64_t n_tensors)
{
    if (*m == 0) return PEAT_OK;
    const rec_ref *last = &recs[*m - 1];
    int whole = record_ok(s, last, n_tensors);
    if (whole) {
        peat_status vs = record_data_verify(s, last);
        if (vs != PEAT_OK && vs != PEAT_ERR_FORMAT) return vs;
        whole = vs == PEAT_OK;
    }
    if (!whole) {
        n_ok[last->table] = last->first;
        (*m)--;
    }
    return PEAT_OK;
}

static int64_t max_i64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* The highest tensor row that the n rows of table from first refer to (-1: none). */
static int64_t row_max_ref(const peat_store_t *s, int table, int64_t first, int64_t n)
{
    int64_t m = -1;
    for (int64_t i = first; i < first + n; i++) {
        if (table == STORE_T_CALL) {
            const store_call_row *c = STORE_ROW(s, STORE_T_CALL, store_call_row, i);
            for (int k = 0; k < c->n_in; k++) m = max_i64(m, c->t_in[k]);
            for (int k = 0; k < c->n_out; k++)
                m = max_i64(m, max_i64(c->t_golden[k], c->t_exact[k]));
        } else if (table == STORE_T_STATE)
            m = max_i64(m, STORE_ROW(s, STORE_T_STATE, store_state_row, i)->tensor);
    }
    return m;
}

/* Every remaining record: sequence numbers 0..m-1, references in range. *max_ref: the highest
 * tensor row any of them refers to. */
static peat_status records_check(const peat_store_t *s, const rec_ref *recs, int64_t m,
                                 int64_t n_tensors, int64_t *max_ref)
{
    *max_ref = -1;
    for (int64_t r = 0; r < m; r++) {
        if (recs[r].seq != r)
            return PEAT_ERROR(
                PEAT_ERR_FORMAT,
                "%s: record %lld is missing (sequence numbers jump to %lld): damaged file", s->path,
                (long long)r, (long long)recs[r].seq);
        if (!record_ok(s, &recs[r], n_tensors))
            return PEAT_ERROR(
                PEAT_ERR_FORMAT,
                "%s: record %lld (%s row %lld) refers to data that is not there: damaged file",
                s->path, (long long)r, peat_store_table_path(recs[r].table),
                (long long)recs[r].first);
        *max_ref = max_i64(*max_ref, row_max_ref(s, recs[r].table, recs[r].first, recs[r].n));
    }
    return PEAT_OK;
}

/* Validates every row and drops an incomplete trailing record (a killed writer's last one):
 * records are written one at a time and each ends with a flush, so only the record with the
 * highest sequence number can be incomplete. What remains must be whole and gap-free. */
peat_status peat_store_recover(peat_store_t *s)
{
    int64_t n_ok[STORE_T_COUNT];
    PEAT_TRY(rows_validate(s, n_ok));
    int64_t n_tensors = 0;
    while (n_tensors < n_ok[STORE_T_TENSOR] &&
           tensor_row_ok(s, STORE_ROW(s, STORE_T_TENSOR, store_tensor_row, n_tensors)))
        n_tensors++;
    rec_ref *recs = NULL;
    int64_t m = 0, max_ref = -1;
    PEAT_TRY(records_collect(s, n_ok, &recs, &m));
    peat_status st = last_record_check(s, recs, &m, n_ok, n_tensors);
    if (st == PEAT_OK) st = records_check(s, recs, m, n_tensors, &max_ref);
    free(recs);
    if (st != PEAT_OK) return st;
    /* tensors after the last one referenced belong to a record that never completed */
    n_ok[STORE_T_TENSOR] = max_ref + 1;
    s->seq_next = m;
    s->dropped = 0;
    for (int t = 0; t < STORE_T_COUNT; t++) {
        for (int64_t i = n_ok[t]; i < s->rows[t].n; i++) /* zero rows were never written */
            s->dropped += !row_zero(s, t, i);
        s->rows[t].n = n_ok[t];
    }
    return PEAT_OK;
}

peat_status peat_store_index_build(peat_store_t *s)
{
    for (int64_t i = 0; i < s->rows[STORE_T_CALL].n; i++) {
        uint64_t id = STORE_ROW(s, STORE_T_CALL, store_call_row, i)->id;
        int64_t cur = -1, v;
        if (peat_store_map_next(&s->ids, id, &cur, &v))
            return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: record id %llu is stored twice", s->path,
                              (unsigned long long)id);
        PEAT_TRY(peat_store_map_put(&s->ids, id, i));
    }
    for (int64_t i = 0; i < s->rows[STORE_T_TENSOR].n; i++)
        PEAT_TRY(peat_store_map_put(&s->dedup,
                                    STORE_ROW(s, STORE_T_TENSOR, store_tensor_row, i)->hash, i));
    return PEAT_OK;
}

void peat_store_pool_ends(const peat_store_t *s, int64_t deflate_end[PEAT_DTYPE_COUNT],
                          int64_t raw_end[PEAT_DTYPE_COUNT])
{
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++) deflate_end[d] = raw_end[d] = 0;
    for (int64_t i = 0; i < s->rows[STORE_T_TENSOR].n; i++) {
        const store_tensor_row *r = STORE_ROW(s, STORE_T_TENSOR, store_tensor_row, i);
        int64_t *end = r->pool == STORE_POOL_RAW ? raw_end : deflate_end;
        if (r->offset + r->numel > end[r->dtype]) end[r->dtype] = r->offset + r->numel;
    }
}

int64_t peat_store_text_end(const peat_store_t *s)
{
    int64_t end = 0;
    for (int64_t i = 0; i < s->rows[STORE_T_SIG].n; i++) {
        const store_sig_row *g = STORE_ROW(s, STORE_T_SIG, store_sig_row, i);
        end = max_i64(end, g->text_offset + g->text_len);
    }
    return end;
}

int peat_store_tidy(const peat_store_t *s)
{
    int64_t deflate_end[PEAT_DTYPE_COUNT], raw_end[PEAT_DTYPE_COUNT];
    peat_store_pool_ends(s, deflate_end, raw_end);
    int tidy = s->text_len == peat_store_text_end(s);
    for (int t = 0; t < STORE_T_COUNT; t++) tidy &= s->rows[t].n == s->disk_rows[t];
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++)
        tidy &= s->pool_len[d] == deflate_end[d] && s->raw_len[d] == raw_end[d];
    return tidy;
}

void peat_store_truncate(peat_store_t *s, int64_t seq)
{
    int64_t max_ref = -1;
    for (int t = STORE_T_CALL; t < STORE_T_COUNT; t++) {
        int64_t n = 0; /* a table's rows are in sequence order */
        while (n < s->rows[t].n && row_seq(s, t, n) < seq) n++;
        s->rows[t].n = n;
        max_ref = max_i64(max_ref, row_max_ref(s, t, 0, n));
    }
    s->rows[STORE_T_TENSOR].n = max_ref + 1;
    s->seq_next = seq;
}
