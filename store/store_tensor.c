/* store_tensor.c: the tensor pools: dedup by content, chunk-aligned appends, checked reads. */
#include "store/store_impl.h"

#include <stdlib.h>
#include <string.h>

void store_tensors_begin(peat_store_t *s)
{
    /* every record starts its compressed data on a fresh chunk: a chunk is written once, by one
     * record, and never rewritten, so a crash while writing a record cannot touch completed
     * ones. Raw data needs no alignment: pwrite changes exactly the bytes it is given. */
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
    PEAT_TRY(store_tensor_read(s, row, &old));
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
    double saved = bytes - store_deflate_estimate(t);
    return saved >= STORE_COMPRESS_MIN_SAVED && saved >= bytes * s->min_saving_pct / 100.0;
}

peat_status store_tensor_put(peat_store_t *s, const peat_tensor *t, int64_t *row)
{
    if (!t || !t->data || (unsigned)t->dtype >= PEAT_DTYPE_COUNT || t->ndim < 1 ||
        t->ndim > PEAT_MAX_DIMS)
        return PEAT_ERROR(PEAT_ERR_INVAL, "store: tensor missing or of bad dtype/rank");
    uint64_t h = store_tensor_hash(t);
    int64_t cursor = -1, cand;
    while (store_map_next(&s->dedup, h, &cursor, &cand)) {
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
    r.check = store_row_check(STORE_T_TENSOR, &r, sizeof r);
    if (s->n_staged == s->cap_staged) {
        int64_t cap = s->cap_staged ? 2 * s->cap_staged : 32;
        struct store_staged *st = realloc(s->staged, (size_t)cap * sizeof *st);
        if (!st) return PEAT_ERROR(PEAT_ERR_NOMEM, "store staging");
        s->staged = st;
        s->cap_staged = cap;
    }
    int64_t idx = s->rows[STORE_T_TENSOR].n;
    PEAT_TRY(store_vec_push(&s->rows[STORE_T_TENSOR], &r));
    PEAT_TRY(store_map_put(&s->dedup, h, idx));
    s->staged[s->n_staged++] = (struct store_staged){idx, t};
    if (r.pool == STORE_POOL_RAW)
        s->raw_stage[t->dtype] += r.numel;
    else
        s->pool_stage[t->dtype] += r.numel;
    *row = idx;
    return PEAT_OK;
}

static size_t raw_max(void)
{
    size_t t = (size_t)STORE_CHUNK_ELEMS * 8;
    return t > STORE_TEXT_CHUNK ? t : STORE_TEXT_CHUNK;
}

/* Starts the helpers and the batch buffers at the first write (read-only stores never do). */
static peat_status encoder_ready(peat_store_t *s)
{
    if (s->workers_on) return PEAT_OK;
    PEAT_TRY(store_workers_start(&s->workers, raw_max()));
    s->workers_on = 1;
    size_t b = (size_t)s->workers.parts * STORE_BATCH_PER_PART;
    s->batch = calloc(b, sizeof *s->batch);
    s->pjobs = calloc(b * 8, sizeof *s->pjobs);
    s->batch_raw = malloc(b * raw_max());
    s->batch_out = malloc(b * s->chunk_out_cap);
    s->plane_out = malloc(b * 8 * STORE_PLANE_CAP);
    if (!s->batch || !s->pjobs || !s->batch_raw || !s->batch_out || !s->plane_out)
        return PEAT_ERROR(PEAT_ERR_NOMEM, "store chunk batch");
    return PEAT_OK;
}

void store_encoder_free(peat_store_t *s)
{
    if (s->workers_on) store_workers_stop(&s->workers);
    s->workers_on = 0;
    free(s->batch);
    free(s->pjobs);
    free(s->batch_raw);
    free(s->batch_out);
    free(s->plane_out);
    s->batch = s->pjobs = NULL;
    s->batch_raw = s->batch_out = s->plane_out = NULL;
}

static int batch_cap(const peat_store_t *s)
{
    return s->workers.parts * STORE_BATCH_PER_PART;
}

/* Job slot j of the batch, for nvalid elements of its raw slot (the rest is padding). */
static void batch_job(peat_store_t *s, int j, size_t nelem, size_t nvalid, size_t elsize,
                      int is_float)
{
    store_job *job = &s->batch[j];
    memset(job, 0, sizeof *job);
    job->src = s->batch_raw + (size_t)j * raw_max();
    job->nelem = nelem;
    job->nvalid = nvalid;
    job->elsize = elsize;
    job->is_float = is_float;
    job->level = s->deflate;
    job->out = s->batch_out + (size_t)j * s->chunk_out_cap;
    job->out_cap = s->chunk_out_cap;
    job->plane = -1;
}

/* Whether chunk job j is split into one job per byte plane (float data, more than one byte). */
static int by_planes(const store_job *job)
{
    return job->is_float && job->elsize > 1 && job->elsize <= 8;
}

static peat_status raw_commit_all(peat_store_t *s);

/* Encodes the n gathered chunks in parallel, then writes them in order as chunks first..; the
 * record's raw tensors are written meanwhile (by this thread, while the helpers encode) when
 * *raw_pending is set. */
static peat_status batch_flush(peat_store_t *s, hid_t dset, int64_t first, int n,
                               int64_t chunk_elems, int *raw_pending)
{
    /* float chunks are split into their byte planes, so even a one-chunk record keeps every
     * core busy; the planes are joined back into one stream per chunk, in order */
    int m = 0;
    size_t bytes = 0;
    for (int j = 0; j < n; j++) {
        const store_job *c = &s->batch[j];
        bytes += c->nvalid * c->elsize;
        if (!by_planes(c)) {
            s->pjobs[m++] = *c;
            continue;
        }
        for (size_t p = 0; p < c->elsize; p++) {
            store_job *q = &s->pjobs[m++];
            *q = *c;
            q->plane = (int)p;
            q->out = s->plane_out + ((size_t)j * 8 + p) * STORE_PLANE_CAP;
            q->out_cap = STORE_PLANE_CAP;
        }
    }
    store_workers_begin(&s->workers, s->pjobs, m, bytes >= STORE_PARALLEL_MIN_BYTES);
    peat_status raw_st = PEAT_OK;
    if (raw_pending && *raw_pending) {
        raw_st = raw_commit_all(s);
        *raw_pending = 0;
    }
    peat_status enc_st = store_workers_end(&s->workers);
    PEAT_TRY(raw_st);
    PEAT_TRY(enc_st);
    for (int j = 0, k = 0; j < n; j++) {
        store_job *c = &s->batch[j];
        if (!by_planes(c)) {
            c->out_len = s->pjobs[k++].out_len;
            continue;
        }
        unsigned char *parts[8];
        size_t lens[8];
        uint32_t adlers[8];
        for (size_t p = 0; p < c->elsize; p++, k++) {
            parts[p] = s->pjobs[k].out;
            lens[p] = s->pjobs[k].out_len;
            adlers[p] = s->pjobs[k].adler;
        }
        PEAT_TRY(store_chunk_join(parts, lens, adlers, c->elsize, c->nelem, c->out, c->out_cap,
                                  &c->out_len));
    }
    for (int j = 0; j < n; j++) {
        hsize_t off = (hsize_t)((first + j) * chunk_elems);
        /* dirty after the write: a flush in between (a raw pool growing while this batch was
         * encoded) must not count for it (it did once, and a kill then lost the chunk's index
         * entry under rows already written) */
        s->meta_dirty = 1;
        if (H5Dwrite_chunk(dset, H5P_DEFAULT, 0, &off, s->batch[j].out_len, s->batch[j].out) < 0)
            return PEAT_ERROR(PEAT_ERR_IO, "%s: writing a chunk failed: %s", s->path,
                              store_h5_msg());
        store_step(s);
    }
    return PEAT_OK;
}

static peat_status pool_commit(peat_store_t *s, int d, int *raw_pending)
{
    size_t es = peat_dtype_size((peat_dtype)d);
    int is_float = d != PEAT_DTYPE_I32;
    hsize_t ext = (hsize_t)(s->pool_start[d] + s->pool_stage[d]);
    s->meta_dirty = 1;
    if (H5Dset_extent(s->d_pool[d], &ext) < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: extending %s failed: %s", s->path,
                          store_pool_path((peat_dtype)d), store_h5_msg());
    int64_t first = s->pool_start[d] / STORE_CHUNK_ELEMS;
    int nb = 0;
    size_t fill = 0, cap = (size_t)STORE_CHUNK_ELEMS * es;
    for (int64_t k = 0; k < s->n_staged; k++) {
        const peat_tensor *t = s->staged[k].t;
        if ((int)t->dtype != d ||
            STORE_ROW(s, STORE_T_TENSOR, store_tensor_row, s->staged[k].row)->pool !=
                STORE_POOL_DEFLATE)
            continue;
        const unsigned char *p = t->data;
        size_t left = peat_tensor_nbytes(t);
        while (left > 0) {
            size_t take = cap - fill < left ? cap - fill : left;
            memcpy(s->batch_raw + (size_t)nb * raw_max() + fill, p, take);
            fill += take;
            p += take;
            left -= take;
            if (fill == cap) {
                batch_job(s, nb++, STORE_CHUNK_ELEMS, STORE_CHUNK_ELEMS, es, is_float);
                fill = 0;
                if (nb == batch_cap(s)) {
                    PEAT_TRY(
                        batch_flush(s, s->d_pool[d], first, nb, STORE_CHUNK_ELEMS, raw_pending));
                    first += nb;
                    nb = 0;
                }
            }
        }
    }
    /* the last chunk is padded with zeros (the encoder writes them; they cost a few bytes) */
    if (fill > 0) batch_job(s, nb++, STORE_CHUNK_ELEMS, fill / es, es, is_float);
    if (nb > 0) PEAT_TRY(batch_flush(s, s->d_pool[d], first, nb, STORE_CHUNK_ELEMS, raw_pending));
    s->pool_len[d] = (int64_t)ext;
    return PEAT_OK;
}

/* The record's raw tensors of dtype d, each straight from its own memory to its place. */
static peat_status raw_commit(peat_store_t *s, int d)
{
    store_space *sp = &s->raw[d];
    PEAT_TRY(store_space_reserve(s, sp, s->raw_len[d] + s->raw_stage[d]));
    /* the record's tensors of this pool are back to back from raw_len: one vectored write */
    struct iovec v[64];
    int n = 0;
    int64_t at = s->raw_len[d];
    for (int64_t k = 0; k < s->n_staged; k++) {
        const peat_tensor *t = s->staged[k].t;
        const store_tensor_row *r =
            STORE_ROW(s, STORE_T_TENSOR, store_tensor_row, s->staged[k].row);
        if ((int)t->dtype != d || r->pool != STORE_POOL_RAW) continue;
        if (n == 64) {
            PEAT_TRY(store_space_writev(s, sp, at, v, n));
            for (int j = 0; j < n; j++) at += (int64_t)(v[j].iov_len / sp->elsize);
            n = 0;
        }
        v[n].iov_base = t->data;
        v[n++].iov_len = (size_t)r->numel * sp->elsize;
    }
    if (n > 0) PEAT_TRY(store_space_writev(s, sp, at, v, n));
    s->raw_len[d] += s->raw_stage[d];
    store_step(s);
    return PEAT_OK;
}

static peat_status raw_commit_all(peat_store_t *s)
{
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++)
        if (s->raw_stage[d] > 0) PEAT_TRY(raw_commit(s, d));
    return PEAT_OK;
}

peat_status store_tensors_commit(peat_store_t *s, int64_t t_first)
{
    int raw_pending = 1; /* written while the first batch of compressed chunks is encoded */
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++)
        if (s->pool_stage[d] > 0) {
            PEAT_TRY(encoder_ready(s));
            PEAT_TRY(pool_commit(s, d, &raw_pending));
        }
    if (raw_pending) PEAT_TRY(raw_commit_all(s));
    /* the chunks and chunk indexes of compressed data are on disk before rows point to them */
    PEAT_TRY(store_sync(s));
    int64_t n_new = s->rows[STORE_T_TENSOR].n - t_first;
    if (n_new > 0) PEAT_TRY(store_table_append(s, STORE_T_TENSOR, n_new));
    s->n_staged = 0;
    return PEAT_OK;
}

/* Reads count elements at offset of a 1-D dataset into buf. */
static peat_status read_range(peat_store_t *s, hid_t dset, hid_t memtype, int64_t offset,
                              int64_t count, void *buf, const char *what)
{
    hid_t fs = H5Dget_space(dset);
    if (fs < 0) return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: %s has no dataspace", s->path, what);
    hsize_t st = (hsize_t)offset, n = (hsize_t)count;
    hid_t ms = H5Screate_simple(1, &n, NULL);
    herr_t e = ms < 0 ? -1 : H5Sselect_hyperslab(fs, H5S_SELECT_SET, &st, NULL, &n, NULL);
    if (e >= 0) e = H5Dread(dset, memtype, ms, fs, H5P_DEFAULT, buf);
    peat_status r =
        e < 0 ? PEAT_ERROR(PEAT_ERR_FORMAT, "%s: %s unreadable (damaged or truncated file): %s",
                           s->path, what, store_h5_msg())
              : PEAT_OK;
    if (ms >= 0) H5Sclose(ms);
    H5Sclose(fs);
    return r;
}

peat_status store_tensor_read(peat_store_t *s, int64_t row, peat_tensor **out)
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
    /* raw pools are read in place too: HDF5 must not keep a copy of a chunk still written to */
    peat_status st =
        r->pool == STORE_POOL_RAW
            ? store_space_read(s, &s->raw[r->dtype], r->offset, t->data, r->numel)
            : read_range(s, s->d_pool[r->dtype], store_pool_type((peat_dtype)r->dtype, 0),
                         r->offset, r->numel, t->data, what);
    if (st == PEAT_OK && store_tensor_hash(t) != r->hash)
        st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s: tensor %lld does not match its hash (damaged data)",
                        s->path, (long long)row);
    if (st != PEAT_OK) {
        peat_tensor_free(t);
        return st;
    }
    *out = t;
    return PEAT_OK;
}

peat_status store_tensor_verify(peat_store_t *s, int64_t row)
{
    peat_tensor *t = NULL;
    PEAT_TRY(store_tensor_read(s, row, &t));
    peat_tensor_free(t);
    return PEAT_OK;
}

peat_status store_text_write(peat_store_t *s, const char *text, int64_t len, int64_t *offset)
{
    PEAT_TRY(encoder_ready(s));
    int64_t start = store_round_up(s->text_len, STORE_TEXT_CHUNK);
    hsize_t ext = (hsize_t)(start + len);
    s->meta_dirty = 1;
    if (len > 0 && H5Dset_extent(s->d_text, &ext) < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: extending the text pool failed: %s", s->path,
                          store_h5_msg());
    int64_t first = start / STORE_TEXT_CHUNK;
    int nb = 0;
    for (int64_t done = 0; done < len; done += STORE_TEXT_CHUNK) {
        int64_t take = len - done < STORE_TEXT_CHUNK ? len - done : STORE_TEXT_CHUNK;
        unsigned char *raw = s->batch_raw + (size_t)nb * raw_max();
        memcpy(raw, text + done, (size_t)take);
        memset(raw + take, 0,
               (size_t)(STORE_TEXT_CHUNK - take)); /* 1-byte chunks are encoded as they are */
        batch_job(s, nb++, STORE_TEXT_CHUNK, (size_t)take, 1, 0);
        if (nb == batch_cap(s) || done + STORE_TEXT_CHUNK >= len) {
            PEAT_TRY(batch_flush(s, s->d_text, first, nb, STORE_TEXT_CHUNK, NULL));
            first += nb;
            nb = 0;
        }
    }
    if (len > 0) s->text_len = start + len;
    *offset = start;
    return PEAT_OK;
}

peat_status store_text_read(peat_store_t *s, int64_t offset, int64_t len, char **out)
{
    *out = NULL;
    char *buf = malloc((size_t)len + 1);
    if (!buf) return PEAT_ERROR(PEAT_ERR_NOMEM, "signature text of %lld bytes", (long long)len);
    if (len > 0) {
        peat_status st =
            read_range(s, s->d_text, H5T_NATIVE_UCHAR, offset, len, buf, "signature text");
        if (st != PEAT_OK) {
            free(buf);
            return st;
        }
    }
    buf[len] = 0;
    *out = buf;
    return PEAT_OK;
}
