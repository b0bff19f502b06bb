/* store_records.c: the record kinds of a campaign file: op calls, states, metrics, signatures. */
#include "store/store_impl.h"
#include "peat/backend.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- common write protocol: data, then the index rows, then one flush; the record is
 * complete (and survives a kill) when the flush returns ---- */

/* Marks the store failed when a write stops half-way: the in-memory index no longer matches
 * the file, so later writes are refused until the file is reopened (which drops the partial
 * record exactly as after a crash). */
static peat_status fail(peat_store_t *s, peat_status st)
{
    if (st != PEAT_OK) s->failed = 1;
    if (st != PEAT_OK) peat_store_write_failed(s);
    return st;
}

static peat_status finish_record(peat_store_t *s, int table, int64_t n_rows)
{
    peat_status st = peat_store_table_rows_append(s, table, n_rows);
    if (st == PEAT_OK) st = peat_store_flush(s);
    if (st == PEAT_OK) s->seq_next++;
    return fail(s, st);
}

/* ---- op calls ---- */

static peat_status call_row_fill(const peat_store_t *s, const peat_record *r, store_call_row *c)
{
    memset(c, 0, sizeof *c);
    if ((unsigned)r->op >= PEAT_OP_COUNT)
        return PEAT_ERROR(PEAT_ERR_INVAL, "record %llu: bad op %d", (unsigned long long)r->id,
                          (int)r->op);
    if (r->n_in < 0 || r->n_in > PEAT_MAX_IO || r->n_out < 0 || r->n_out > PEAT_MAX_IO)
        return PEAT_ERROR(PEAT_ERR_INVAL, "record %llu: %d inputs, %d outputs (at most %d each)",
                          (unsigned long long)r->id, r->n_in, r->n_out, PEAT_MAX_IO);
    for (int k = 0; k < r->n_in; k++)
        if (!r->in[k])
            return PEAT_ERROR(PEAT_ERR_INVAL, "record %llu: input %d is missing",
                              (unsigned long long)r->id, k);
    c->id = r->id;
    c->seed = r->seed;
    c->iter = r->iter;
    c->call_index = r->call_index;
    c->op_call_index = r->op_call_index;
    memcpy(c->pi, r->p.i, sizeof c->pi);
    memcpy(c->pf, r->p.f, sizeof c->pf);
    c->op = (int32_t)r->op;
    c->phase = (int32_t)r->phase;
    c->n_in = r->n_in;
    c->n_out = r->n_out;
    for (int k = 0; k < PEAT_MAX_IO; k++) c->t_in[k] = c->t_golden[k] = c->t_exact[k] = -1;
    PEAT_TRY(peat_store_str_field(c->flow, sizeof c->flow, r->flow, "flow name"));
    PEAT_TRY(peat_store_str_field(c->layer, sizeof c->layer, r->layer, "layer name"));
    PEAT_TRY(peat_store_str_field(c->golden_kernel, sizeof c->golden_kernel, r->golden_kernel,
                                  "golden kernel name"));
    /* the exact kernel that made (or will recompute) the exact outputs, for provenance */
    const peat_kernel *ek = peat_registry_role(r->op, PEAT_ROLE_EXACT, PEAT_BACKEND_HOST);
    PEAT_TRY(peat_store_str_field(c->exact_kernel, sizeof c->exact_kernel, ek ? ek->name : "",
                                  "exact kernel name"));
    (void)s;
    return PEAT_OK;
}

/* Exact outputs are stored only up to the file's limit (default: never); the others are
 * recomputed from the stored inputs on read (fp64 and deterministic, they come back
 * bit-identical; they are the bulkiest and least compressible part of a record). */
static int exact_stored(const peat_store_t *s, const peat_record *r)
{
    if (s->exact_max < 0) return 1;
    if (s->exact_max == 0) return 0;
    size_t bytes = 0;
    for (int k = 0; k < r->n_out; k++)
        if (r->exact[k]) bytes += peat_tensor_nbytes(r->exact[k]);
    return bytes <= (size_t)s->exact_max;
}

static peat_status call_write_impl(peat_store_t *s, const peat_record *r)
{
    PEAT_TRY(peat_store_check_writable(s));
    if (!r) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_call_write: record is NULL");
    if (peat_store_call_has(s, r->id))
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "%s already holds record %llu (records are never doubled)", s->path,
                          (unsigned long long)r->id);
    store_call_row c;
    PEAT_TRY(call_row_fill(s, r, &c));
    int64_t t_first = s->rows[STORE_T_TENSOR].n;
    c.t_first = t_first;
    c.seq = s->seq_next;
    peat_store_tensors_begin(s);
    peat_status st = PEAT_OK;
    for (int k = 0; k < r->n_in && st == PEAT_OK; k++)
        st = peat_store_tensor_put(s, r->in[k], &c.t_in[k]);
    for (int k = 0; k < r->n_out && st == PEAT_OK; k++)
        if (r->golden[k]) st = peat_store_tensor_put(s, r->golden[k], &c.t_golden[k]);
    if (exact_stored(s, r))
        for (int k = 0; k < r->n_out && st == PEAT_OK; k++)
            if (r->exact[k]) st = peat_store_tensor_put(s, r->exact[k], &c.t_exact[k]);
    if (st == PEAT_OK) st = peat_store_tensors_commit(s, t_first);
    if (st != PEAT_OK) return fail(s, st);
    c.check = peat_store_row_check(STORE_T_CALL, &c, sizeof c);
    int64_t idx = s->rows[STORE_T_CALL].n;
    st = peat_store_vec_push(&s->rows[STORE_T_CALL], &c);
    if (st == PEAT_OK) st = peat_store_map_put(&s->ids, c.id, idx);
    if (st != PEAT_OK) return fail(s, st);
    return finish_record(s, STORE_T_CALL, 1);
}

int64_t peat_store_call_count(const peat_store_t *s)
{
    return s ? s->rows[STORE_T_CALL].n : 0;
}

peat_status peat_store_call_find(const peat_store_t *s, uint64_t id, int64_t *idx)
{
    int64_t cur = -1, v;
    if (s && peat_store_map_next(&s->ids, id, &cur, &v)) {
        if (idx) *idx = v;
        return PEAT_OK;
    }
    return PEAT_ERROR(PEAT_ERR_NOTFOUND, "%s holds no record %llu", s ? s->path : "store",
                      (unsigned long long)id);
}

int peat_store_call_has(const peat_store_t *s, uint64_t id)
{
    int64_t cur = -1, v;
    return s && peat_store_map_next(&s->ids, id, &cur, &v);
}

static peat_status check_idx(const peat_store_t *s, int table, int64_t idx, const char *what)
{
    if (!s) return PEAT_ERROR(PEAT_ERR_INVAL, "store is NULL");
    if (idx < 0 || idx >= s->rows[table].n)
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "%s: no %s %lld (it holds %lld)", s->path, what,
                          (long long)idx, (long long)s->rows[table].n);
    return PEAT_OK;
}

static void header_from_row(const store_call_row *c, peat_record *r)
{
    memset(r, 0, sizeof *r);
    r->id = c->id;
    r->op = (peat_op_kind)c->op;
    memcpy(r->p.i, c->pi, sizeof r->p.i);
    memcpy(r->p.f, c->pf, sizeof r->p.f);
    r->n_in = c->n_in;
    r->n_out = c->n_out;
    memcpy(r->flow, c->flow, sizeof r->flow);
    memcpy(r->layer, c->layer, sizeof r->layer);
    memcpy(r->golden_kernel, c->golden_kernel, sizeof r->golden_kernel);
    r->flow[sizeof r->flow - 1] = r->layer[sizeof r->layer - 1] =
        r->golden_kernel[sizeof r->golden_kernel - 1] = 0;
    r->iter = c->iter;
    r->phase = (peat_phase)c->phase;
    r->call_index = c->call_index;
    r->op_call_index = c->op_call_index;
    r->seed = c->seed;
}

peat_status peat_store_call_header(const peat_store_t *s, int64_t idx, peat_record *out)
{
    PEAT_TRY(check_idx(s, STORE_T_CALL, idx, "record"));
    header_from_row(STORE_ROW(s, STORE_T_CALL, store_call_row, idx), out);
    return PEAT_OK;
}

static peat_status call_read_impl(peat_store_t *s, int64_t idx, peat_record **out)
{
    if (!out) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_call_read: out is NULL");
    *out = NULL;
    PEAT_TRY(check_idx(s, STORE_T_CALL, idx, "record"));
    const store_call_row *c = STORE_ROW(s, STORE_T_CALL, store_call_row, idx);
    peat_record *r = calloc(1, sizeof *r);
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "record");
    header_from_row(c, r);
    peat_status st = PEAT_OK;
    int have_exact = c->n_out > 0;
    for (int k = 0; k < c->n_in && st == PEAT_OK; k++)
        st = peat_store_tensor_read(s, c->t_in[k], &r->in[k]);
    for (int k = 0; k < c->n_out && st == PEAT_OK; k++) {
        if (c->t_golden[k] >= 0) st = peat_store_tensor_read(s, c->t_golden[k], &r->golden[k]);
        if (st == PEAT_OK && c->t_exact[k] >= 0)
            st = peat_store_tensor_read(s, c->t_exact[k], &r->exact[k]);
        have_exact &= c->t_exact[k] >= 0;
    }
    if (st == PEAT_OK && !have_exact && c->n_out > 0) {
        for (int k = 0; k < PEAT_MAX_IO; k++) {
            peat_tensor_free(r->exact[k]);
            r->exact[k] = NULL;
        }
    }
    if (st != PEAT_OK) {
        peat_record_free(r);
        return st;
    }
    *out = r;
    return PEAT_OK;
}

peat_status peat_store_sink(void *store, peat_record *r)
{
    peat_store_t *s = store;
    peat_status st = PEAT_OK;
    if (r && !peat_store_call_has(s, r->id)) st = peat_store_call_write(s, r);
    peat_record_free(r);
    return st;
}

/* ---- states ---- */

int peat_store_state_has(const peat_store_t *s, int64_t iter, const char *tag)
{
    if (!s || !tag) return 0;
    for (int64_t i = 0; i < s->rows[STORE_T_STATE].n; i++) {
        const store_state_row *r = STORE_ROW(s, STORE_T_STATE, store_state_row, i);
        if (r->index == 0 && r->iter == iter && strcmp(r->tag, tag) == 0) return 1;
    }
    return 0;
}

static peat_status state_write_impl(peat_store_t *s, int64_t iter, const char *tag, int n,
                                    const peat_tensor *const *t, const char *const *names)
{
    PEAT_TRY(peat_store_check_writable(s));
    if (!tag || n < 1 || !t || !names)
        return PEAT_ERROR(PEAT_ERR_INVAL, "state write: tag, tensors and names are required");
    if (peat_store_state_has(s, iter, tag))
        return PEAT_ERROR(PEAT_ERR_INVAL, "%s already holds state '%s' of iteration %lld", s->path,
                          tag, (long long)iter);
    store_state_row proto;
    memset(&proto, 0, sizeof proto);
    PEAT_TRY(peat_store_str_field(proto.tag, sizeof proto.tag, tag, "state tag"));
    for (int i = 0; i < n; i++) {
        char tmp[64];
        PEAT_TRY(peat_store_str_field(tmp, sizeof tmp, names[i], "state tensor name"));
        for (int j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return PEAT_ERROR(PEAT_ERR_INVAL, "state '%s': name '%s' given twice", tag,
                                  names[i]);
    }
    proto.seq = s->seq_next;
    proto.t_first = s->rows[STORE_T_TENSOR].n;
    proto.iter = iter;
    proto.count = n;
    int64_t first_row = s->rows[STORE_T_STATE].n;
    peat_store_tensors_begin(s);
    peat_status st = PEAT_OK;
    for (int i = 0; i < n && st == PEAT_OK; i++) {
        store_state_row r = proto;
        r.index = i;
        st = peat_store_str_field(r.name, sizeof r.name, names[i], "state tensor name");
        if (st == PEAT_OK) st = peat_store_tensor_put(s, t[i], &r.tensor);
        if (st == PEAT_OK) {
            r.check = peat_store_row_check(STORE_T_STATE, &r, sizeof r);
            st = peat_store_vec_push(&s->rows[STORE_T_STATE], &r);
        }
    }
    if (st == PEAT_OK) st = peat_store_tensors_commit(s, proto.t_first);
    if (st != PEAT_OK) return fail(s, st);
    return finish_record(s, STORE_T_STATE, s->rows[STORE_T_STATE].n - first_row);
}

int64_t peat_store_state_count(const peat_store_t *s)
{
    int64_t n = 0;
    for (int64_t i = 0; s && i < s->rows[STORE_T_STATE].n; i++)
        n += STORE_ROW(s, STORE_T_STATE, store_state_row, i)->index == 0;
    return n;
}

/* Row of the first tensor of the idx-th snapshot, -1 if none. */
static int64_t state_first_row(const peat_store_t *s, int64_t idx)
{
    for (int64_t i = 0, k = 0; i < s->rows[STORE_T_STATE].n; i++)
        if (STORE_ROW(s, STORE_T_STATE, store_state_row, i)->index == 0 && k++ == idx) return i;
    return -1;
}

peat_status peat_store_state_info(const peat_store_t *s, int64_t idx, int64_t *iter, char tag[32],
                                  int *n)
{
    if (!s) return PEAT_ERROR(PEAT_ERR_INVAL, "store is NULL");
    int64_t i = state_first_row(s, idx);
    if (i < 0)
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "%s: no state snapshot %lld", s->path, (long long)idx);
    const store_state_row *r = STORE_ROW(s, STORE_T_STATE, store_state_row, i);
    if (iter) *iter = r->iter;
    if (tag) memcpy(tag, r->tag, 32);
    if (n) *n = r->count;
    return PEAT_OK;
}

void peat_store_state_free(peat_store_state *st)
{
    if (!st) return;
    for (int i = 0; st->t && i < st->n; i++) peat_tensor_free(st->t[i]);
    free(st->t);
    free(st->names);
    free(st);
}

static peat_status state_read_impl(peat_store_t *s, int64_t iter, const char *tag,
                                   peat_store_state **out)
{
    if (!out) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_state_read: out is NULL");
    *out = NULL;
    if (!s || !tag) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_state_read: NULL argument");
    int64_t first = -1;
    for (int64_t i = 0; i < s->rows[STORE_T_STATE].n && first < 0; i++) {
        const store_state_row *r = STORE_ROW(s, STORE_T_STATE, store_state_row, i);
        if (r->index == 0 && r->iter == iter && strcmp(r->tag, tag) == 0) first = i;
    }
    if (first < 0)
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "%s holds no state '%s' of iteration %lld", s->path,
                          tag, (long long)iter);
    const store_state_row *r0 = STORE_ROW(s, STORE_T_STATE, store_state_row, first);
    peat_store_state *st = calloc(1, sizeof *st);
    if (!st) return PEAT_ERROR(PEAT_ERR_NOMEM, "state");
    st->iter = iter;
    memcpy(st->tag, r0->tag, sizeof st->tag);
    st->t = calloc((size_t)r0->count, sizeof *st->t);
    st->names = calloc((size_t)r0->count, sizeof *st->names);
    if (!st->t || !st->names) {
        peat_store_state_free(st);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "state of %d tensors", r0->count);
    }
    st->n = r0->count;
    peat_status e = PEAT_OK;
    for (int i = 0; i < st->n && e == PEAT_OK; i++) {
        memcpy(st->names[i], r0[i].name, sizeof st->names[i]);
        e = peat_store_tensor_read(s, r0[i].tensor, &st->t[i]);
    }
    if (e != PEAT_OK) {
        peat_store_state_free(st);
        return e;
    }
    *out = st;
    return PEAT_OK;
}

/* ---- metrics ---- */

int peat_store_metrics_has(const peat_store_t *s, int64_t iter)
{
    for (int64_t i = 0; s && i < s->rows[STORE_T_METRIC].n; i++)
        if (STORE_ROW(s, STORE_T_METRIC, store_metric_row, i)->iter == iter) return 1;
    return 0;
}

static peat_status metrics_append_impl(peat_store_t *s, int64_t iter, double loss, double accuracy)
{
    PEAT_TRY(peat_store_check_writable(s));
    if (peat_store_metrics_has(s, iter))
        return PEAT_ERROR(PEAT_ERR_INVAL, "%s already holds metrics of iteration %lld", s->path,
                          (long long)iter);
    store_metric_row r;
    memset(&r, 0, sizeof r);
    r.seq = s->seq_next;
    r.iter = iter;
    r.loss = loss;
    r.accuracy = accuracy;
    r.check = peat_store_row_check(STORE_T_METRIC, &r, sizeof r);
    PEAT_TRY(fail(s, peat_store_vec_push(&s->rows[STORE_T_METRIC], &r)));
    return finish_record(s, STORE_T_METRIC, 1);
}

int64_t peat_store_metrics_count(const peat_store_t *s)
{
    return s ? s->rows[STORE_T_METRIC].n : 0;
}

peat_status peat_store_metrics_read(const peat_store_t *s, int64_t idx, int64_t *iter, double *loss,
                                    double *accuracy)
{
    PEAT_TRY(check_idx(s, STORE_T_METRIC, idx, "metrics row"));
    const store_metric_row *r = STORE_ROW(s, STORE_T_METRIC, store_metric_row, idx);
    if (iter) *iter = r->iter;
    if (loss) *loss = r->loss;
    if (accuracy) *accuracy = r->accuracy;
    return PEAT_OK;
}

/* ---- signatures ---- */

static peat_status signature_write_impl(peat_store_t *s, const char *kernel, const char *json)
{
    PEAT_TRY(peat_store_check_writable(s));
    if (!kernel || !json)
        return PEAT_ERROR(PEAT_ERR_INVAL, "signature write: kernel and json are required");
    store_sig_row r;
    memset(&r, 0, sizeof r);
    PEAT_TRY(peat_store_str_field(r.kernel, sizeof r.kernel, kernel, "kernel name"));
    r.seq = s->seq_next;
    r.text_len = (int64_t)strlen(json);
    r.text_hash = peat_store_hash64(json, (size_t)r.text_len, 0);
    PEAT_TRY(fail(s, peat_store_text_write(s, json, r.text_len, &r.text_offset)));
    r.check = peat_store_row_check(STORE_T_SIG, &r, sizeof r);
    PEAT_TRY(fail(s, peat_store_vec_push(&s->rows[STORE_T_SIG], &r)));
    return finish_record(s, STORE_T_SIG, 1);
}

int64_t peat_store_signature_count(const peat_store_t *s)
{
    return s ? s->rows[STORE_T_SIG].n : 0;
}

static peat_status sig_text(peat_store_t *s, const store_sig_row *r, char **json)
{
    char *text = NULL;
    PEAT_TRY(peat_store_text_read(s, r->text_offset, r->text_len, &text));
    if (peat_store_hash64(text, (size_t)r->text_len, 0) != r->text_hash) {
        free(text);
        return PEAT_ERROR(PEAT_ERR_FORMAT,
                          "%s: signature of %s does not match its hash (damaged data)", s->path,
                          r->kernel);
    }
    *json = text;
    return PEAT_OK;
}

static peat_status signature_at_impl(peat_store_t *s, int64_t idx, char kernel[64], char **json)
{
    if (!json) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_signature_at: json is NULL");
    *json = NULL;
    PEAT_TRY(check_idx(s, STORE_T_SIG, idx, "signature"));
    const store_sig_row *r = STORE_ROW(s, STORE_T_SIG, store_sig_row, idx);
    if (kernel) memcpy(kernel, r->kernel, 64);
    return sig_text(s, r, json);
}

static peat_status signature_read_impl(peat_store_t *s, const char *kernel, char **json)
{
    if (!json) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_signature_read: json is NULL");
    *json = NULL;
    if (!s || !kernel)
        return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_signature_read: NULL argument");
    for (int64_t i = s->rows[STORE_T_SIG].n - 1; i >= 0; i--) {
        const store_sig_row *r = STORE_ROW(s, STORE_T_SIG, store_sig_row, i);
        if (strcmp(r->kernel, kernel) == 0) return sig_text(s, r, json);
    }
    return PEAT_ERROR(PEAT_ERR_NOTFOUND, "%s holds no signature of kernel %s", s->path, kernel);
}

/* ---- statistics ---- */

static int64_t tensor_bytes(const peat_store_t *s, int64_t row)
{
    const store_tensor_row *r = STORE_ROW(s, STORE_T_TENSOR, store_tensor_row, row);
    return r->numel * (int64_t)peat_dtype_size((peat_dtype)r->dtype);
}

static peat_status stats_get_impl(const peat_store_t *s, peat_store_stats *out)
{
    if (!s || !out) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_stats_get: NULL argument");
    memset(out, 0, sizeof *out);
    out->calls = s->rows[STORE_T_CALL].n;
    out->states = peat_store_state_count(s);
    out->state_tensors = s->rows[STORE_T_STATE].n;
    out->metrics = s->rows[STORE_T_METRIC].n;
    out->signatures = s->rows[STORE_T_SIG].n;
    out->tensors = s->rows[STORE_T_TENSOR].n;
    for (int64_t i = 0; i < out->tensors; i++) {
        int64_t b = tensor_bytes(s, i);
        out->unique_bytes += b;
        if (STORE_ROW(s, STORE_T_TENSOR, store_tensor_row, i)->pool == STORE_POOL_RAW)
            out->raw_bytes += b;
        else
            out->deflate_bytes += b;
    }
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++)
        if (s->d_pool[d] >= 0) out->deflate_disk += (int64_t)H5Dget_storage_size(s->d_pool[d]);
    /* what the chunks of the in-place datasets hold beyond their used part (a raw pool's is
     * the end of its last tensor: a reader's extent is whole chunks) */
    int64_t deflate_end[PEAT_DTYPE_COUNT], raw_end[PEAT_DTYPE_COUNT];
    peat_store_pool_ends(s, deflate_end, raw_end);
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++)
        if (s->d_raw[d] >= 0) {
            int64_t alloc = (int64_t)H5Dget_storage_size(s->d_raw[d]);
            int64_t used = raw_end[d] * (int64_t)peat_dtype_size((peat_dtype)d);
            out->spare_bytes += alloc > used ? alloc - used : 0;
        }
    for (int t = 0; t < STORE_T_COUNT; t++)
        if (s->d_table[t] >= 0) {
            int64_t alloc = (int64_t)H5Dget_storage_size(s->d_table[t]);
            int64_t used = s->rows[t].n * (int64_t)s->rows[t].elem;
            out->spare_bytes += alloc > used ? alloc - used : 0;
        }
    for (int64_t i = 0; i < out->calls; i++) {
        const store_call_row *c = STORE_ROW(s, STORE_T_CALL, store_call_row, i);
        for (int k = 0; k < c->n_in; k++) {
            out->tensor_refs++;
            out->logical_bytes += tensor_bytes(s, c->t_in[k]);
        }
        for (int k = 0; k < c->n_out; k++) {
            if (c->t_golden[k] >= 0) {
                out->tensor_refs++;
                out->logical_bytes += tensor_bytes(s, c->t_golden[k]);
            }
            if (c->t_exact[k] >= 0) {
                out->tensor_refs++;
                out->logical_bytes += tensor_bytes(s, c->t_exact[k]);
            } else if (c->t_golden[k] >= 0) {
                /* recomputed: F64 of the golden output's shape */
                const store_tensor_row *g =
                    STORE_ROW(s, STORE_T_TENSOR, store_tensor_row, c->t_golden[k]);
                out->exact_recomputed += g->numel * 8;
            }
        }
    }
    for (int64_t i = 0; i < out->state_tensors; i++) {
        out->tensor_refs++;
        out->logical_bytes +=
            tensor_bytes(s, STORE_ROW(s, STORE_T_STATE, store_state_row, i)->tensor);
    }
    struct stat sb;
    if (stat(s->path, &sb) == 0) out->file_bytes = (int64_t)sb.st_size;
    out->crashed = s->crashed;
    out->dropped_rows = s->dropped;
    return PEAT_OK;
}

/* ---- the entry points: each runs with HDF5 errors reported, not printed ---- */

peat_status peat_store_call_write(peat_store_t *s, const peat_record *r)
{
    peat_status st;
    STORE_GUARDED(st, call_write_impl(s, r));
    return st;
}

peat_status peat_store_call_read(peat_store_t *s, int64_t idx, peat_record **out)
{
    peat_status st;
    STORE_GUARDED(st, call_read_impl(s, idx, out));
    return st;
}

peat_status peat_store_state_write(peat_store_t *s, int64_t iter, const char *tag, int n,
                                   const peat_tensor *const *t, const char *const *names)
{
    peat_status st;
    STORE_GUARDED(st, state_write_impl(s, iter, tag, n, t, names));
    return st;
}

peat_status peat_store_state_read(peat_store_t *s, int64_t iter, const char *tag,
                                  peat_store_state **out)
{
    peat_status st;
    STORE_GUARDED(st, state_read_impl(s, iter, tag, out));
    return st;
}

peat_status peat_store_metrics_append(peat_store_t *s, int64_t iter, double loss, double accuracy)
{
    peat_status st;
    STORE_GUARDED(st, metrics_append_impl(s, iter, loss, accuracy));
    return st;
}

peat_status peat_store_signature_write(peat_store_t *s, const char *kernel, const char *json)
{
    peat_status st;
    STORE_GUARDED(st, signature_write_impl(s, kernel, json));
    return st;
}

peat_status peat_store_signature_at(peat_store_t *s, int64_t idx, char kernel[64], char **json)
{
    peat_status st;
    STORE_GUARDED(st, signature_at_impl(s, idx, kernel, json));
    return st;
}

peat_status peat_store_signature_read(peat_store_t *s, const char *kernel, char **json)
{
    peat_status st;
    STORE_GUARDED(st, signature_read_impl(s, kernel, json));
    return st;
}

peat_status peat_store_stats_get(const peat_store_t *s, peat_store_stats *out)
{
    peat_status st;
    STORE_GUARDED(st, stats_get_impl(s, out));
    return st;
}
