/* store_tensor.c: the tensor pools: dedup by content, compressed or raw appends, checked reads. */
#include "store/store_impl.h"

#include <stdlib.h>
#include <string.h>

void peat_store_tensors_begin(peat_store_t *s)
{
    /* every record starts its compressed data on a fresh chunk: a chunk is written once, by one
     * record, and never rewritten (a rewritten filtered chunk moves, and the space it leaves
     * could be reused while the file on disk still points to it). Raw data needs no alignment:
     * HDF5 rewrites an unfiltered chunk in place, with the same bytes for what was there. */
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++) {
        s->pool_start[d] = store_round_up(s->pool_len[d], STORE_CHUNK_ELEMS);
        s->pool_stage[d] = 0;
        s->raw_stage[d] = 0;
    }
    s->n_staged = 0;
}

/* Whether stored row holds exactly t's bytes (dtype and shape already match). */
static peat_status same_bytes(peat_store_t *s, int64_t row, const peat_tensor *t, int *same)
{
    size_t n = peat_tensor_nbytes(t);
    for (int64_t k = 0; k < s->n_staged; k++)
        if (s->staged[k].row == row) {
            *same = memcmp(s->staged[k].t->data, t->data, n) == 0;
            return PEAT_OK;
        }
    peat_tensor *old = NULL;
    PEAT_TRY(peat_store_tensor_read(s, row, &old));
    *same = memcmp(old->data, t->data, n) == 0;
    peat_tensor_free(old);
    return PEAT_OK;
}

/* Whether t goes to the compressed pool: the estimated saving reaches the file's threshold. */
static int compress_pays(const peat_store_t *s, const peat_tensor *t)
{
    if (s->deflate < 0) return 0;
    if (s->min_saving_pct < 0) return 1;
    double bytes = (double)peat_tensor_nbytes(t);
    if (bytes < STORE_COMPRESS_MIN_BYTES) return 0;
    double saved = bytes - peat_store_deflate_estimate(t);
    return saved >= STORE_COMPRESS_MIN_SAVED && saved >= bytes * s->min_saving_pct / 100.0;
}

peat_status peat_store_tensor_put(peat_store_t *s, const peat_tensor *t, int64_t *row)
{
    if (!t || !t->data || (unsigned)t->dtype >= PEAT_DTYPE_COUNT || t->ndim < 1 ||
        t->ndim > PEAT_MAX_DIMS)
        return PEAT_ERROR(PEAT_ERR_INVAL, "store: tensor missing or of bad dtype/rank");
    uint64_t h = peat_store_tensor_hash(t);
    int64_t cursor = -1, cand;
    while (peat_store_map_next(&s->dedup, h, &cursor, &cand)) {
        const store_tensor_row *r = STORE_ROW(s, STORE_T_TENSOR, store_tensor_row, cand);
        if (r->dtype != (int32_t)t->dtype || r->ndim != t->ndim) continue;
        int shape_ok = 1;
        for (int d = 0; d < t->ndim; d++) shape_ok &= r->shape[d] == t->shape[d];
        if (!shape_ok) continue;
        int same = 0;
        PEAT_TRY(same_bytes(s, cand, t, &same));
        if (same) {
            *row = cand;
            return PEAT_OK;
        }
    }
    store_tensor_row r;
    memset(&r, 0, sizeof r);
    r.dtype = (int32_t)t->dtype;
    r.ndim = (int16_t)t->ndim;
    for (int d = 0; d < t->ndim; d++) r.shape[d] = t->shape[d];
    r.numel = peat_tensor_numel(t);
    r.pool = (int16_t)(compress_pays(s, t) ? STORE_POOL_DEFLATE : STORE_POOL_RAW);
    if (r.pool == STORE_POOL_RAW)
        r.offset = s->raw_len[t->dtype] + s->raw_stage[t->dtype];
    else
        r.offset = s->pool_start[t->dtype] + s->pool_stage[t->dtype];
    r.hash = h;
    r.check = peat_store_row_check(STORE_T_TENSOR, &r, sizeof r);
    if (s->n_staged == s->cap_staged) {
        int64_t cap = s->cap_staged ? 2 * s->cap_staged : 32;
        struct store_staged *st = realloc(s->staged, (size_t)cap * sizeof *st);
        if (!st) return PEAT_ERROR(PEAT_ERR_NOMEM, "store staging");
        s->staged = st;
        s->cap_staged = cap;
    }
    int64_t idx = s->rows[STORE_T_TENSOR].n;
    PEAT_TRY(peat_store_vec_push(&s->rows[STORE_T_TENSOR], &r));
    PEAT_TRY(peat_store_map_put(&s->dedup, h, idx));
    s->staged[s->n_staged++] = (struct store_staged){idx, t};
    if (r.pool == STORE_POOL_RAW)
        s->raw_stage[t->dtype] += r.numel;
    else
        s->pool_stage[t->dtype] += r.numel;
    *row = idx;
    return PEAT_OK;
}

/* Writes chunk k of a compressed pool (or the text pool): the nvalid elements at src, zeros to
 * the chunk's end, shuffled (elsize > 1) and deflated as HDF5's filters would. */
static peat_status chunk_write(peat_store_t *s, hid_t d, int64_t k, const void *src, size_t nvalid,
                               size_t nelem, size_t elsize)
{
    size_t len = 0;
    PEAT_TRY(peat_store_chunk_compress(&s->codec, src, nvalid, nelem, elsize,
                                       s->deflate < 0 ? 0 : s->deflate, &len));
    hsize_t off = (hsize_t)k * nelem;
    if (H5Dwrite_chunk(d, H5P_DEFAULT, 0, &off, len, s->codec.out) < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: writing a chunk failed: %s", s->path,
                          peat_store_h5_msg());
    peat_store_step(s);
    return PEAT_OK;
}

/* The record's tensors of the compressed pool of dtype d, back to back from pool_start, cut
 * into chunks (a tensor may span several; a chunk may hold several). */
static peat_status pool_commit(peat_store_t *s, int d)
{
    size_t es = peat_dtype_size((peat_dtype)d), cap = (size_t)STORE_CHUNK_ELEMS * es, fill = 0;
    hsize_t ext = (hsize_t)(s->pool_start[d] + s->pool_stage[d]);
    if (H5Dset_extent(s->d_pool[d], &ext) < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: extending %s failed: %s", s->path,
                          peat_store_pool_path((peat_dtype)d), peat_store_h5_msg());
    int64_t k = s->pool_start[d] / STORE_CHUNK_ELEMS;
    PEAT_TRY(peat_store_codec_buffers(&s->codec));
    for (int64_t i = 0; i < s->n_staged; i++) {
        const peat_tensor *t = s->staged[i].t;
        if ((int)t->dtype != d ||
            STORE_ROW(s, STORE_T_TENSOR, store_tensor_row, s->staged[i].row)->pool !=
                STORE_POOL_DEFLATE)
            continue;
        const unsigned char *p = t->data;
        size_t left = peat_tensor_nbytes(t);
        while (left > 0) {
            size_t take = cap - fill < left ? cap - fill : left;
            memcpy(s->codec.in + fill, p, take);
            fill += take, p += take, left -= take;
            if (fill == cap) {
                PEAT_TRY(chunk_write(s, s->d_pool[d], k++, s->codec.in, STORE_CHUNK_ELEMS,
                                     STORE_CHUNK_ELEMS, es));
                fill = 0;
            }
        }
    }
    if (fill > 0)
        PEAT_TRY(chunk_write(s, s->d_pool[d], k, s->codec.in, fill / es, STORE_CHUNK_ELEMS, es));
    s->pool_len[d] = (int64_t)ext;
    return PEAT_OK;
}

/* The record's raw tensors of dtype d: the pool grown once, then each tensor written. */
static peat_status raw_commit(peat_store_t *s, int d)
{
    hid_t mt = peat_store_pool_type((peat_dtype)d, 0);
    PEAT_TRY(peat_store_extend(s, s->d_raw[d], s->raw_len[d] + s->raw_stage[d],
                               peat_store_raw_path((peat_dtype)d)));
    for (int64_t k = 0; k < s->n_staged; k++) {
        const peat_tensor *t = s->staged[k].t;
        const store_tensor_row *r =
            STORE_ROW(s, STORE_T_TENSOR, store_tensor_row, s->staged[k].row);
        if ((int)t->dtype != d || r->pool != STORE_POOL_RAW) continue;
        PEAT_TRY(peat_store_write_at(s, s->d_raw[d], mt, r->offset, r->numel, t->data,
                                     peat_store_raw_path((peat_dtype)d)));
        s->raw_len[d] = r->offset + r->numel;
    }
    peat_store_step(s);
    return PEAT_OK;
}

peat_status peat_store_tensors_commit(peat_store_t *s, int64_t t_first)
{
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++) {
        if (s->pool_stage[d] > 0) PEAT_TRY(pool_commit(s, d));
        if (s->raw_stage[d] > 0) PEAT_TRY(raw_commit(s, d));
    }
    int64_t n_new = s->rows[STORE_T_TENSOR].n - t_first;
    if (n_new > 0) PEAT_TRY(peat_store_table_rows_append(s, STORE_T_TENSOR, n_new));
    s->n_staged = 0;
    return PEAT_OK;
}

peat_status peat_store_tensor_read(peat_store_t *s, int64_t row, peat_tensor **out)
{
    *out = NULL;
    if (row < 0 || row >= s->rows[STORE_T_TENSOR].n)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: reference to tensor %lld of %lld", s->path,
                          (long long)row, (long long)s->rows[STORE_T_TENSOR].n);
    const store_tensor_row *r = STORE_ROW(s, STORE_T_TENSOR, store_tensor_row, row);
    peat_tensor *t = NULL;
    PEAT_TRY(peat_tensor_alloc((peat_dtype)r->dtype, r->ndim, r->shape, &t));
    char what[64];
    snprintf(what, sizeof what, "tensor %lld", (long long)row);
    hid_t d = r->pool == STORE_POOL_RAW ? s->d_raw[r->dtype] : s->d_pool[r->dtype];
    peat_status st = peat_store_read_range(s, d, peat_store_pool_type((peat_dtype)r->dtype, 0),
                                           r->offset, r->numel, t->data, what);
    if (st == PEAT_OK && peat_store_tensor_hash(t) != r->hash)
        st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s: tensor %lld does not match its hash (damaged data)",
                        s->path, (long long)row);
    if (st != PEAT_OK) {
        peat_tensor_free(t);
        return st;
    }
    *out = t;
    return PEAT_OK;
}

peat_status peat_store_tensor_verify(peat_store_t *s, int64_t row)
{
    peat_tensor *t = NULL;
    PEAT_TRY(peat_store_tensor_read(s, row, &t));
    peat_tensor_free(t);
    return PEAT_OK;
}

peat_status peat_store_text_write(peat_store_t *s, const char *text, int64_t len, int64_t *offset)
{
    /* chunk-aligned, as compressed tensor data: each chunk written once */
    int64_t start = store_round_up(s->text_len, STORE_TEXT_CHUNK);
    hsize_t ext = (hsize_t)(start + len);
    if (len > 0 && H5Dset_extent(s->d_text, &ext) < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: extending the text pool failed: %s", s->path,
                          peat_store_h5_msg());
    for (int64_t done = 0; done < len; done += STORE_TEXT_CHUNK) {
        int64_t take = len - done < STORE_TEXT_CHUNK ? len - done : STORE_TEXT_CHUNK;
        PEAT_TRY(chunk_write(s, s->d_text, (start + done) / STORE_TEXT_CHUNK, text + done,
                             (size_t)take, STORE_TEXT_CHUNK, 1));
    }
    if (len > 0) s->text_len = start + len;
    *offset = start;
    return PEAT_OK;
}

peat_status peat_store_text_read(peat_store_t *s, int64_t offset, int64_t len, char **out)
{
    *out = NULL;
    char *buf = malloc((size_t)len + 1);
    if (!buf) return PEAT_ERROR(PEAT_ERR_NOMEM, "signature text of %lld bytes", (long long)len);
    if (len > 0) {
        peat_status st = peat_store_read_range(s, s->d_text, H5T_NATIVE_UCHAR, offset, len, buf,
                                               "signature text");
        if (st != PEAT_OK) {
            free(buf);
            return st;
        }
    }
    buf[len] = 0;
    *out = buf;
    return PEAT_OK;
}
