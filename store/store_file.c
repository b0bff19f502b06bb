/* store_file.c: what creating and opening share: attributes, the writer lock, handles, appends. */
#define _GNU_SOURCE /* F_OFD_SETLK: a writer lock that HDF5's own opens and closes cannot drop */
#include "store/store_impl.h"

#include "core/child_fds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The groups of the layout (docs/hdf5-schema.md), each with a description attribute. */
const char *const peat_store_group_paths[STORE_N_GROUPS] = {"/meta",   "/tensors", "/calls",
                                                            "/states", "/metrics", "/signatures"};
const char *const peat_store_group_docs[STORE_N_GROUPS] = {
    "campaign metadata and environment, as attributes",
    "tensor pools (one 1-D dataset per dtype) and their index: every tensor is stored once",
    "one row per recorded op call; its tensors are rows of /tensors/index",
    "snapshots of named flow tensors (checkpoints, activations) at an iteration",
    "per-iteration loss and accuracy",
    "one JSON signature per kernel; text in /signatures/text",
};

/* ---- small HDF5 helpers ---- */

int peat_store_attr_write(hid_t loc, const char *name, hid_t type, const void *val)
{
    if (!peat_store_may_create(loc)) return -1;
    hid_t sp = H5Screate(H5S_SCALAR);
    if (sp < 0) return -1;
    hid_t a = H5Acreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    int r = (a < 0 || H5Awrite(a, type, val) < 0) ? -1 : 0;
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    return r;
}

int peat_store_attr_str(hid_t loc, const char *name, const char *val)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return -1;
    size_t n = strlen(val) + 1;
    int r = (H5Tset_size(t, n) < 0 || H5Tset_strpad(t, H5T_STR_NULLTERM) < 0)
                ? -1
                : peat_store_attr_write(loc, name, t, val);
    H5Tclose(t);
    return r;
}

/* 1 = read, 0 = absent, -1 = present but unreadable or not a string. */
/* Opens attribute name of loc and its type: 1 = open (close both), 0 = absent, -1 = broken. */
static int attr_open(hid_t loc, const char *name, hid_t *a, hid_t *ft)
{
    htri_t ex = H5Aexists(loc, name);
    if (ex <= 0) return ex == 0 ? 0 : -1;
    if ((*a = H5Aopen(loc, name, H5P_DEFAULT)) < 0) return -1;
    *ft = H5Aget_type(*a);
    return 1;
}

int peat_store_attr_str_read(hid_t loc, const char *name, char *buf, size_t n)
{
    buf[0] = 0;
    hid_t a, ft;
    int got = attr_open(loc, name, &a, &ft);
    if (got <= 0) return got;
    int r = -1;
    if (ft >= 0 && H5Tget_class(ft) == H5T_STRING && !H5Tis_variable_str(ft)) {
        size_t sz = H5Tget_size(ft);
        char *tmp = calloc(sz + 1, 1);
        hid_t mt = H5Tcopy(H5T_C_S1);
        if (tmp && mt >= 0 && H5Tset_size(mt, sz) >= 0 && H5Aread(a, mt, tmp) >= 0) {
            snprintf(buf, n, "%s", tmp);
            r = 1;
        }
        if (mt >= 0) H5Tclose(mt);
        free(tmp);
    }
    if (ft >= 0) H5Tclose(ft);
    H5Aclose(a);
    return r;
}

int peat_store_attr_num_read(hid_t loc, const char *name, hid_t memtype, void *val)
{
    hid_t a, ft;
    int got = attr_open(loc, name, &a, &ft);
    if (got <= 0) return got;
    int r = -1;
    if (ft >= 0 && (H5Tget_class(ft) == H5T_INTEGER) && H5Aread(a, memtype, val) >= 0) r = 1;
    if (ft >= 0) H5Tclose(ft);
    H5Aclose(a);
    return r;
}

/* ---- the writer lock ---- */

peat_status peat_store_lock_take(const char *path, int *fd_out)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return PEAT_ERROR(PEAT_ERR_IO, "%s: %s", path, strerror(errno));
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    /* an open-file-description lock: independent of the flock() HDF5 takes, and not dropped when
     * HDF5 (or anyone in this process) closes another descriptor of the file; the kernel
     * releases it when the writer dies, so a killed run never leaves a stale lock */
    if (fcntl(fd, F_OFD_SETLK, &fl) != 0) {
        int e = errno;
        close(fd);
        if (e == EAGAIN || e == EACCES)
            return PEAT_ERROR(PEAT_ERR_IO, "%s is being written by another process", path);
        return PEAT_ERROR(PEAT_ERR_IO, "%s: cannot lock for writing: %s", path, strerror(e));
    }
    *fd_out = fd;
    peat_child_fd_hold(fd); /* a forked child must not keep the writer's lock */
    return PEAT_OK;
}

void peat_store_lock_release(int fd)
{
    if (fd < 0) return;
    peat_child_fd_drop(fd);
    close(fd);
}

void peat_store_h5_fd_hold(peat_store_t *s)
{
    void *h = NULL;
    /* the sec2 driver's handle is its int descriptor (H5Fget_vfd_handle) */
    if (s->file >= 0 && H5Fget_vfd_handle(s->file, H5P_DEFAULT, &h) >= 0 && h) {
        s->h5_fd = *(int *)h;
        peat_child_fd_hold(s->h5_fd);
    }
}

int peat_store_lock_held(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    int held = fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
    close(fd);
    return held;
}

/* ---- allocation and teardown ---- */

peat_store_t *peat_store_new(const char *path)
{
    peat_store_t *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    snprintf(s->path, sizeof s->path, "%s", path);
    s->file = -1;
    s->d_text = -1;
    s->lock_fd = -1;
    s->h5_fd = -1;
    for (int t = 0; t < STORE_T_COUNT; t++) {
        s->d_table[t] = -1;
        s->mt[t] = -1;
        s->rows[t].elem = peat_store_row_size(t);
    }
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++) s->d_pool[d] = s->d_raw[d] = -1;
    for (int t = 0; t < STORE_T_COUNT; t++) s->mt[t] = peat_store_row_type(t, 0);
    int ok = 1;
    for (int t = 0; t < STORE_T_COUNT; t++) ok &= s->mt[t] >= 0;
    if (!ok) {
        peat_store_close(s);
        return NULL;
    }
    return s;
}

int peat_store_handles_close(peat_store_t *s)
{
    if (s->d_text >= 0) H5Dclose(s->d_text);
    s->d_text = -1;
    for (int d = PEAT_DTYPE_COUNT - 1; d >= 0; d--) {
        if (s->d_pool[d] >= 0) H5Dclose(s->d_pool[d]);
        if (s->d_raw[d] >= 0) H5Dclose(s->d_raw[d]);
        s->d_pool[d] = s->d_raw[d] = -1;
    }
    for (int t = STORE_T_COUNT - 1; t >= 0; t--) {
        if (s->d_table[t] >= 0) H5Dclose(s->d_table[t]);
        s->d_table[t] = -1;
    }
    peat_child_fd_drop(s->h5_fd);
    s->h5_fd = -1;
    int r = s->file >= 0 && H5Fclose(s->file) < 0 ? -1 : 0;
    s->file = -1;
    return r;
}

static peat_status close_impl(peat_store_t *s)
{
    peat_status st = PEAT_OK;
    if (s->file >= 0 && s->writable && !s->failed) st = peat_store_room_check(s, s->file, s->path);
    if (st == PEAT_OK && s->file >= 0 && s->writable && !s->failed &&
        H5Fflush(s->file, H5F_SCOPE_LOCAL) < 0)
        st = PEAT_ERROR(PEAT_ERR_IO, "%s: final flush failed: %s", s->path, peat_store_h5_msg());
    /* abandoned (the device refused a write): HDF5 would flush its metadata on close, pointing
     * past what the device took (a "truncated" file); left open, the file stays as its last
     * flush made it, and --resume continues it as a killed writer's */
    if (!s->abandon && peat_store_handles_close(s) < 0 && st == PEAT_OK)
        st = PEAT_ERROR(PEAT_ERR_IO, "%s: close failed: %s", s->path, peat_store_h5_msg());
    if (!s->abandon) peat_store_lock_release(s->lock_fd); /* after HDF5 let go of the file */
    for (int t = STORE_T_COUNT - 1; t >= 0; t--) {
        if (s->mt[t] >= 0) H5Tclose(s->mt[t]);
        peat_store_vec_free(&s->rows[t]);
    }
    peat_store_map_free(&s->ids);
    peat_store_map_free(&s->dedup);
    peat_store_codec_free(&s->codec);
    free(s->staged);
    free(s);
    return st;
}

peat_status peat_store_close(peat_store_t *s)
{
    if (!s) return PEAT_OK;
    peat_status st;
    STORE_GUARDED(st, close_impl(s));
    return st;
}

/* ---- writing ---- */

peat_status peat_store_check_writable(const peat_store_t *s)
{
    if (!s) return PEAT_ERROR(PEAT_ERR_INVAL, "store is NULL");
    if (!s->writable) return PEAT_ERROR(PEAT_ERR_INVAL, "%s was opened read-only", s->path);
    if (s->failed)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: an earlier write failed; reopen the file to continue",
                          s->path);
    return PEAT_OK;
}

int64_t peat_store_extent(hid_t d)
{
    hid_t sp = H5Dget_space(d);
    if (sp < 0) return -1;
    hsize_t n = 0;
    int r = H5Sget_simple_extent_ndims(sp) == 1 ? H5Sget_simple_extent_dims(sp, &n, NULL) : -1;
    H5Sclose(sp);
    return r < 0 ? -1 : (int64_t)n;
}

/* Selects [at, at + n) of a 1-D dataset: the file space (and a memory space of n) for I/O. */
static int select_range(hid_t d, int64_t at, int64_t n, hid_t *fs, hid_t *ms)
{
    hsize_t st = (hsize_t)at, cnt = (hsize_t)n;
    *ms = -1;
    if ((*fs = H5Dget_space(d)) < 0) return -1;
    if (H5Sselect_hyperslab(*fs, H5S_SELECT_SET, &st, NULL, &cnt, NULL) < 0 ||
        (*ms = H5Screate_simple(1, &cnt, NULL)) < 0) {
        H5Sclose(*fs);
        return -1;
    }
    return 0;
}

peat_status peat_store_extend(peat_store_t *s, hid_t d, int64_t n, const char *what)
{
    hsize_t ext = (hsize_t)n;
    if (H5Dset_extent(d, &ext) < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: extending %s failed: %s", s->path, what,
                          peat_store_h5_msg());
    return PEAT_OK;
}

peat_status peat_store_write_at(peat_store_t *s, hid_t d, hid_t memtype, int64_t at, int64_t n,
                                const void *buf, const char *what)
{
    if (n <= 0) return PEAT_OK;
    hid_t fs, ms;
    herr_t e = select_range(d, at, n, &fs, &ms);
    peat_status st = PEAT_OK;
    if (e >= 0) {
        e = H5Dwrite(d, memtype, ms, fs, H5P_DEFAULT, buf);
        /* the cause is read before H5Sclose clears HDF5's error stack */
        if (e < 0)
            st = PEAT_ERROR(PEAT_ERR_IO, "%s: writing %s failed: %s", s->path, what,
                            peat_store_h5_msg());
        H5Sclose(ms);
        H5Sclose(fs);
    }
    if (e < 0 && st == PEAT_OK)
        st = PEAT_ERROR(PEAT_ERR_IO, "%s: writing %s failed: %s", s->path, what,
                        peat_store_h5_msg());
    return st;
}

peat_status peat_store_append(peat_store_t *s, hid_t d, hid_t memtype, int64_t at, int64_t n,
                              const void *buf, const char *what)
{
    if (n <= 0) return PEAT_OK;
    PEAT_TRY(peat_store_extend(s, d, at + n, what));
    return peat_store_write_at(s, d, memtype, at, n, buf, what);
}

peat_status peat_store_read_range(peat_store_t *s, hid_t d, hid_t memtype, int64_t offset,
                                  int64_t count, void *buf, const char *what)
{
    if (count <= 0) return PEAT_OK;
    hid_t fs, ms;
    herr_t e = select_range(d, offset, count, &fs, &ms);
    if (e >= 0) {
        e = H5Dread(d, memtype, ms, fs, H5P_DEFAULT, buf);
        H5Sclose(ms);
        H5Sclose(fs);
    }
    if (e < 0)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: %s unreadable (damaged or truncated file): %s",
                          s->path, what, peat_store_h5_msg());
    return PEAT_OK;
}

peat_status peat_store_table_rows_append(peat_store_t *s, int table, int64_t n)
{
    if (n <= 0) return PEAT_OK;
    int64_t first = s->disk_rows[table];
    const char *rows = (const char *)s->rows[table].data + (size_t)first * s->rows[table].elem;
    PEAT_TRY(peat_store_append(s, s->d_table[table], s->mt[table], first, n, rows,
                               peat_store_table_path(table)));
    s->disk_rows[table] = first + n;
    peat_store_step(s);
    return PEAT_OK;
}

peat_status peat_store_flush(peat_store_t *s)
{
    /* SWMR write mode orders the writes of a flush (raw data first, then metadata, children
     * before the parents pointing to them), so the file on disk is a consistent HDF5 file at
     * every instant; once this flush returns, the record is in the kernel's page cache and
     * survives a kill of this process */
    peat_store_step(s);
    PEAT_TRY(peat_store_room_check(s, s->file, s->path));
    if (H5Fflush(s->file, H5F_SCOPE_LOCAL) < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: flush failed: %s", s->path, peat_store_h5_msg());
    peat_store_step(s);
    return PEAT_OK;
}

hid_t peat_store_fapl(unsigned read_attempts)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    /* SWMR needs the 1.10 file format (checksummed metadata, ordered flushes) */
    if (fapl >= 0 && (H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST) < 0 ||
                      H5Pset_metadata_read_attempts(fapl, read_attempts) < 0)) {
        H5Pclose(fapl);
        return -1;
    }
    return fapl;
}

void peat_store_settings_from_meta(peat_store_t *s)
{
    s->exact_max =
        s->meta.exact_max_bytes == 0 ? PEAT_STORE_EXACT_MAX_DEFAULT : s->meta.exact_max_bytes;
    s->deflate = s->meta.deflate_level == 0 ? 1 : s->meta.deflate_level;
    s->min_saving_pct =
        s->meta.min_saving_pct == 0 ? PEAT_STORE_MIN_SAVING_PCT_DEFAULT : s->meta.min_saving_pct;
}

peat_status peat_store_meta_get(const peat_store_t *s, peat_store_meta *out)
{
    if (!s || !out) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_meta_get: NULL argument");
    *out = s->meta;
    return PEAT_OK;
}
