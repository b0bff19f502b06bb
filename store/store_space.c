/* store_space.c: preallocated, unfiltered datasets written in place with pwrite.
 *
 * The index tables and the raw pools are chunked datasets whose chunks HDF5 allocates when the
 * extent grows (early allocation). Their file addresses never change afterwards, so a record's
 * bytes are written straight to them: no HDF5 call, no metadata change, no flush. What makes
 * this safe against a kill is the order (docs/hdf5-schema.md, crash safety): chunks are
 * allocated and flushed before anything is written into them, data before the rows that
 * point to it, and rows carry checksums, so a torn or unwritten row ends the table. */
#define _GNU_SOURCE /* pwritev */
#include "store/store_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

void store_space_init(store_space *sp, hid_t d, size_t elsize, int64_t chunk, const char *what)
{
    memset(sp, 0, sizeof *sp);
    sp->d = d;
    sp->elsize = elsize;
    sp->chunk = chunk;
    sp->what = what;
}

void store_space_free(store_space *sp)
{
    free(sp->addr);
    sp->addr = NULL;
    sp->n_addr = 0;
}

void store_spaces_init(peat_store_t *s)
{
    for (int t = 0; t < STORE_T_COUNT; t++)
        store_space_init(&s->tab[t], s->d_table[t], store_row_size(t), store_table_chunk_rows(t),
                         store_table_path(t));
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++) {
        size_t es = peat_dtype_size((peat_dtype)d);
        store_space_init(&s->raw[d], s->d_raw[d], es, (int64_t)(STORE_RAW_CHUNK_BYTES / es),
                         store_raw_path((peat_dtype)d));
    }
}

hid_t store_dapl_uncached(void)
{
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    if (dapl >= 0 && H5Pset_chunk_cache(dapl, H5D_CHUNK_CACHE_NSLOTS_DEFAULT, 0, 1.0) < 0) {
        H5Pclose(dapl);
        return -1;
    }
    return dapl;
}

peat_status store_space_open(peat_store_t *s, store_space *sp)
{
    hid_t fs = H5Dget_space(sp->d);
    hsize_t n = 0;
    int ok = fs >= 0 && H5Sget_simple_extent_ndims(fs) == 1 &&
             H5Sget_simple_extent_dims(fs, &n, NULL) == 1;
    if (fs >= 0) H5Sclose(fs);
    if (!ok) return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: %s is not 1-D", s->path, sp->what);
    /* written in place at chunk addresses: unfiltered chunks of a 1-D dataset (of whatever
     * size the file has) */
    hid_t dcpl = H5Dget_create_plist(sp->d);
    hsize_t chunk = 0;
    ok = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, 1, &chunk) == 1 &&
         chunk > 0 && H5Pget_nfilters(dcpl) == 0;
    if (dcpl >= 0) H5Pclose(dcpl);
    if (!ok)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: %s is not laid out as schema version %d says",
                          s->path, sp->what, PEAT_STORE_SCHEMA_VERSION);
    sp->chunk = (int64_t)chunk;
    sp->cap = (int64_t)n;
    return PEAT_OK;
}

/* Forgets the addresses of chunks at or past chunk index k (freed or not yet allocated). */
static void addr_forget(store_space *sp, int64_t k)
{
    for (int64_t i = k; i < sp->n_addr; i++) sp->addr[i] = HADDR_UNDEF;
}

peat_status store_space_grow(peat_store_t *s, store_space *sp, int64_t need)
{
    if (need <= sp->cap) return PEAT_OK;
    int64_t cap = store_round_up(need, sp->chunk);
    hsize_t e = (hsize_t)cap;
    if (H5Dset_extent(sp->d, &e) < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: extending %s failed: %s", s->path, sp->what,
                          store_h5_msg());
    sp->cap = cap;
    s->meta_dirty = 1;
    return PEAT_OK;
}

peat_status store_space_reserve(peat_store_t *s, store_space *sp, int64_t need)
{
    if (need <= sp->cap) return PEAT_OK;
    /* no spare capacity past the chunk that holds the end: chunks freed later (a trim) are not
     * given back to the file system, so spare capacity would stay in the file's size; growing a
     * chunk at a time costs ~30 us per chunk (extent, flush, address lookup) */
    PEAT_TRY(store_space_grow(s, sp, need));
    store_step(s);
    /* the new chunks' addresses must be on disk before data and rows are written into them */
    return store_flush(s);
}

static peat_status chunk_addr(peat_store_t *s, store_space *sp, int64_t k, uint64_t *out)
{
    if (k >= sp->n_addr) {
        int64_t n = sp->n_addr ? 2 * sp->n_addr : 64;
        while (n <= k) n *= 2;
        haddr_t *a = realloc(sp->addr, (size_t)n * sizeof *a);
        if (!a) return PEAT_ERROR(PEAT_ERR_NOMEM, "chunk addresses of %s", sp->what);
        for (int64_t i = sp->n_addr; i < n; i++) a[i] = HADDR_UNDEF;
        sp->addr = a;
        sp->n_addr = n;
    }
    if (sp->addr[k] == HADDR_UNDEF) {
        hsize_t off = (hsize_t)(k * sp->chunk), size = 0;
        unsigned mask = 0;
        haddr_t a = HADDR_UNDEF;
        if (H5Dget_chunk_info_by_coord(sp->d, &off, &mask, &a, &size) < 0 || a == HADDR_UNDEF ||
            size != (hsize_t)sp->chunk * sp->elsize || mask != 0)
            return PEAT_ERROR(PEAT_ERR_IO, "%s: chunk %lld of %s is not allocated as expected: %s",
                              s->path, (long long)k, sp->what, store_h5_msg());
        sp->addr[k] = a;
    }
    *out = s->base_addr + (uint64_t)sp->addr[k];
    return PEAT_OK;
}

static peat_status pread_all(peat_store_t *s, void *buf, size_t n, uint64_t at)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = pread(s->data_fd, p, n, (off_t)at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: read failed (truncated file?): %s", s->path,
                              r < 0 ? strerror(errno) : "end of file");
        p += r;
        n -= (size_t)r;
        at += (uint64_t)r;
    }
    return PEAT_OK;
}

/* pwritev until every byte is written (short writes resume mid-vector). */
static peat_status pwritev_all(peat_store_t *s, struct iovec *v, int n, uint64_t at)
{
    while (n > 0) {
        ssize_t w = pwritev(s->data_fd, v, n, (off_t)at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            return PEAT_ERROR(PEAT_ERR_IO, "%s: write failed: %s", s->path,
                              w < 0 ? strerror(errno) : "no progress");
        at += (uint64_t)w;
        while (n > 0 && (size_t)w >= v->iov_len) {
            w -= (ssize_t)v->iov_len;
            v++;
            n--;
        }
        if (n > 0) {
            v->iov_base = (char *)v->iov_base + w;
            v->iov_len -= (size_t)w;
        }
    }
    return PEAT_OK;
}

/* Writes the buffers iov[0..n_iov) (whole elements each) back to back from element offset off,
 * one pwritev per run of chunks that lie back to back in the file (most runs: all of them). */
peat_status store_space_writev(peat_store_t *s, store_space *sp, int64_t off,
                               const struct iovec *iov, int n_iov)
{
    int64_t total = 0;
    for (int i = 0; i < n_iov; i++) total += (int64_t)(iov[i].iov_len / sp->elsize);
    if (off < 0 || off + total > sp->cap)
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "%s: write of [%lld, %lld) past the extent %lld of %s",
                          s->path, (long long)off, (long long)(off + total), (long long)sp->cap,
                          sp->what);
    struct iovec run[STORE_IOV_MAX];
    int n_run = 0;
    uint64_t run_at = 0, run_end = 0;
    size_t done_in = 0; /* bytes of iov[i] already placed */
    int i = 0;
    while (i < n_iov) {
        int64_t k = off / sp->chunk, in = off - k * sp->chunk;
        uint64_t at;
        PEAT_TRY(chunk_addr(s, sp, k, &at));
        at += (uint64_t)in * sp->elsize;
        size_t room = (size_t)(sp->chunk - in) * sp->elsize; /* bytes left in this chunk */
        if (n_run > 0 && (at != run_end || n_run == STORE_IOV_MAX)) {
            PEAT_TRY(pwritev_all(s, run, n_run, run_at));
            n_run = 0;
        }
        if (n_run == 0) run_at = run_end = at;
        while (room > 0 && i < n_iov && n_run < STORE_IOV_MAX) {
            size_t take = iov[i].iov_len - done_in < room ? iov[i].iov_len - done_in : room;
            run[n_run].iov_base = (char *)iov[i].iov_base + done_in;
            run[n_run++].iov_len = take;
            room -= take;
            done_in += take;
            run_end += take;
            off += (int64_t)(take / sp->elsize);
            if (done_in == iov[i].iov_len) {
                i++;
                done_in = 0;
            }
        }
    }
    if (n_run > 0) PEAT_TRY(pwritev_all(s, run, n_run, run_at));
    return PEAT_OK;
}

peat_status store_space_write(peat_store_t *s, store_space *sp, int64_t off, const void *buf,
                              int64_t n)
{
    struct iovec v = {(void *)buf, (size_t)n * sp->elsize};
    return store_space_writev(s, sp, off, &v, 1);
}

peat_status store_space_read(peat_store_t *s, store_space *sp, int64_t off, void *buf, int64_t n)
{
    if (off < 0 || n < 0 || off + n > sp->cap)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: read of [%lld, %lld) past the extent %lld of %s",
                          s->path, (long long)off, (long long)(off + n), (long long)sp->cap,
                          sp->what);
    unsigned char *rd = buf;
    while (n > 0) {
        int64_t k = off / sp->chunk, in = off - k * sp->chunk;
        int64_t take = sp->chunk - in < n ? sp->chunk - in : n;
        uint64_t at;
        PEAT_TRY(chunk_addr(s, sp, k, &at));
        size_t bytes = (size_t)take * sp->elsize;
        PEAT_TRY(pread_all(s, rd, bytes, at + (uint64_t)in * sp->elsize));
        rd += bytes;
        off += take;
        n -= take;
    }
    return PEAT_OK;
}

peat_status store_space_zero(peat_store_t *s, store_space *sp, int64_t from, int64_t to)
{
    /* the same block of zeros, as many times as it takes (whole elements each) */
    static const unsigned char zeros[4096];
    int64_t per = (int64_t)(sizeof zeros / sp->elsize);
    if (per < 1)
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "%s: elements of %zu bytes are too large to zero",
                          sp->what, sp->elsize);
    struct iovec v[64];
    while (from < to) {
        int n = 0;
        int64_t at = from;
        for (; n < 64 && from < to; n++) {
            int64_t take = to - from < per ? to - from : per;
            v[n] = (struct iovec){(void *)zeros, (size_t)take * sp->elsize};
            from += take;
        }
        PEAT_TRY(store_space_writev(s, sp, at, v, n));
    }
    return PEAT_OK;
}

peat_status store_space_trim(peat_store_t *s, store_space *sp, int64_t n)
{
    /* whole chunks only: shrinking into a chunk makes HDF5 fill its tail through its own copy
     * of the chunk, which may predate what was written in place since (measured: it wiped the
     * records written after a read of the same chunk) */
    n = store_round_up(n, sp->chunk);
    if (n >= sp->cap) return PEAT_OK;
    hsize_t e = (hsize_t)n;
    if (H5Dset_extent(sp->d, &e) < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: cannot trim %s: %s", s->path, sp->what, store_h5_msg());
    sp->cap = n;
    addr_forget(sp, n / sp->chunk); /* n is whole chunks */
    s->meta_dirty = 1;
    return PEAT_OK;
}
