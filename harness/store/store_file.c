/* store_file.c: creating, opening (validation and crash recovery) and closing campaign files. */
#define _GNU_SOURCE /* F_OFD_SETLK: a writer lock that HDF5's own opens and closes cannot drop */
#include "harness/store/store_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const group_paths[] = {"/meta", "/tensors", "/calls", "/states", "/metrics", "/signatures"};
static const char *const group_docs[] = {
    "campaign metadata and environment, as attributes",
    "tensor pools (one 1-D dataset per dtype) and their index: every tensor is stored once",
    "one row per recorded op call; its tensors are rows of /tensors/index",
    "snapshots of named flow tensors (checkpoints, activations) at an iteration",
    "per-iteration loss and accuracy",
    "one JSON signature per kernel; text in /signatures/text",
};
#define N_GROUPS ((int)(sizeof group_paths / sizeof group_paths[0]))

/* ---- small HDF5 helpers ---- */

static int attr_write(hid_t loc, const char *name, hid_t type, const void *val)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    if (sp < 0) return -1;
    hid_t a = H5Acreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    int r = (a < 0 || H5Awrite(a, type, val) < 0) ? -1 : 0;
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    return r;
}

static int attr_str(hid_t loc, const char *name, const char *val)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return -1;
    size_t n = strlen(val) + 1;
    int r = (H5Tset_size(t, n) < 0 || H5Tset_strpad(t, H5T_STR_NULLTERM) < 0) ? -1 : attr_write(loc, name, t, val);
    H5Tclose(t);
    return r;
}

/* 1 = read, 0 = absent, -1 = present but unreadable or not a string. */
static int attr_str_read(hid_t loc, const char *name, char *buf, size_t n)
{
    buf[0] = 0;
    htri_t ex = H5Aexists(loc, name);
    if (ex <= 0) return ex == 0 ? 0 : -1;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return -1;
    hid_t ft = H5Aget_type(a);
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

static int attr_num_read(hid_t loc, const char *name, hid_t memtype, void *val)
{
    htri_t ex = H5Aexists(loc, name);
    if (ex <= 0) return ex == 0 ? 0 : -1;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return -1;
    hid_t ft = H5Aget_type(a);
    int r = -1;
    if (ft >= 0 && (H5Tget_class(ft) == H5T_INTEGER) && H5Aread(a, memtype, val) >= 0) r = 1;
    if (ft >= 0) H5Tclose(ft);
    H5Aclose(a);
    return r;
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* ---- the writer lock ---- */

static peat_status lock_take(const char *path, int *fd_out)
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
    return PEAT_OK;
}

/* ---- allocation and teardown ---- */

static peat_store_t *store_alloc(const char *path)
{
    peat_store_t *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    snprintf(s->path, sizeof s->path, "%s", path);
    s->file = -1;
    s->d_text = -1;
    s->lock_fd = -1;
    for (int t = 0; t < STORE_T_COUNT; t++) {
        s->d_table[t] = -1;
        s->mt[t] = -1;
        s->rows[t].elem = store_row_size(t);
    }
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++) s->d_pool[d] = -1;
    size_t raw = (size_t)STORE_CHUNK_ELEMS * 8 > STORE_TEXT_CHUNK ? (size_t)STORE_CHUNK_ELEMS * 8 : STORE_TEXT_CHUNK;
    s->chunk_out_cap = compressBound((uLong)raw) + 4096; /* + room for the stored/compressed switches */
    for (int t = 0; t < STORE_T_COUNT; t++) s->mt[t] = store_row_type(t, 0);
    int ok = 1;
    for (int t = 0; t < STORE_T_COUNT; t++) ok &= s->mt[t] >= 0;
    if (!ok) {
        peat_store_close(s);
        return NULL;
    }
    return s;
}

static void close_datasets(peat_store_t *s)
{
    if (s->d_text >= 0) H5Dclose(s->d_text);
    s->d_text = -1;
    for (int d = PEAT_DTYPE_COUNT - 1; d >= 0; d--) {
        if (s->d_pool[d] >= 0) H5Dclose(s->d_pool[d]);
        s->d_pool[d] = -1;
    }
    for (int t = STORE_T_COUNT - 1; t >= 0; t--) {
        if (s->d_table[t] >= 0) H5Dclose(s->d_table[t]);
        s->d_table[t] = -1;
    }
}

peat_status peat_store_close(peat_store_t *s)
{
    if (!s) return PEAT_OK;
    peat_status st = PEAT_OK;
    if (s->file >= 0 && s->writable && !s->failed && H5Fflush(s->file, H5F_SCOPE_LOCAL) < 0)
        st = PEAT_ERROR(PEAT_ERR_IO, "%s: final flush failed: %s", s->path, store_h5_msg());
    close_datasets(s);
    if (s->file >= 0 && H5Fclose(s->file) < 0 && st == PEAT_OK)
        st = PEAT_ERROR(PEAT_ERR_IO, "%s: close failed: %s", s->path, store_h5_msg());
    if (s->lock_fd >= 0) close(s->lock_fd); /* after HDF5 let go of the file */
    for (int t = STORE_T_COUNT - 1; t >= 0; t--) {
        if (s->mt[t] >= 0) H5Tclose(s->mt[t]);
        store_vec_free(&s->rows[t]);
    }
    store_map_free(&s->ids);
    store_map_free(&s->dedup);
    store_cache_free(s);
    store_encoder_free(s);
    free(s->staged);
    free(s);
    return st;
}

/* ---- writing ---- */

peat_status store_check_writable(const peat_store_t *s)
{
    if (!s) return PEAT_ERROR(PEAT_ERR_INVAL, "store is NULL");
    if (!s->writable) return PEAT_ERROR(PEAT_ERR_INVAL, "%s was opened read-only", s->path);
    if (s->failed)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: an earlier write failed; reopen the file to continue", s->path);
    return PEAT_OK;
}

peat_status store_table_append(peat_store_t *s, int table, int64_t n)
{
    if (n <= 0) return PEAT_OK;
    int64_t first = s->disk_rows[table];
    hsize_t ext = (hsize_t)(first + n), st = (hsize_t)first, cnt = (hsize_t)n;
    const char *what = store_table_path(table);
    if (H5Dset_extent(s->d_table[table], &ext) < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: extending %s failed: %s", s->path, what, store_h5_msg());
    hid_t fs = H5Dget_space(s->d_table[table]);
    hid_t ms = H5Screate_simple(1, &cnt, NULL);
    herr_t e = (fs < 0 || ms < 0) ? -1 : H5Sselect_hyperslab(fs, H5S_SELECT_SET, &st, NULL, &cnt, NULL);
    const char *rows = (const char *)s->rows[table].data + (size_t)first * s->rows[table].elem;
    if (e >= 0) e = H5Dwrite(s->d_table[table], s->mt[table], ms, fs, H5P_DEFAULT, rows);
    if (ms >= 0) H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    if (e < 0) return PEAT_ERROR(PEAT_ERR_IO, "%s: writing %s failed: %s", s->path, what, store_h5_msg());
    s->disk_rows[table] = first + n;
    store_step(s);
    return PEAT_OK;
}

peat_status store_flush(peat_store_t *s)
{
    /* SWMR write mode orders the metadata writes (children before the parents pointing to
     * them), so the file on disk is a consistent HDF5 file at every instant; once this flush
     * returns, the record is in the kernel's page cache and survives a kill of this process */
    store_step(s);
    if (H5Fflush(s->file, H5F_SCOPE_LOCAL) < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: flush failed: %s", s->path, store_h5_msg());
    store_step(s);
    return PEAT_OK;
}

/* ---- creating ---- */

static hid_t fapl_latest(void)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    /* SWMR needs the 1.10 file format (superblock v3, checksummed metadata) */
    if (fapl >= 0 && H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST) < 0) {
        H5Pclose(fapl);
        return -1;
    }
    return fapl;
}

static hid_t make_dataset(hid_t file, const char *path, hid_t ftype, hsize_t chunk, int shuffle, int deflate)
{
    hsize_t zero = 0, unlim = H5S_UNLIMITED;
    hid_t sp = H5Screate_simple(1, &zero, &unlim);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t d = -1;
    if (sp >= 0 && dcpl >= 0 && H5Pset_chunk(dcpl, 1, &chunk) >= 0 && (!shuffle || H5Pset_shuffle(dcpl) >= 0) &&
        (deflate < 0 || H5Pset_deflate(dcpl, (unsigned)deflate) >= 0))
        d = H5Dcreate2(file, path, ftype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (sp >= 0) H5Sclose(sp);
    return d;
}

static int meta_attrs_write(hid_t g, const peat_store_meta *m)
{
    int bad = 0;
    bad |= attr_str(g, "flow", m->flow);
    bad |= attr_str(g, "kernel", m->kernel);
    bad |= attr_str(g, "backend", m->backend);
    bad |= attr_str(g, "device", m->device);
    bad |= attr_write(g, "seed", H5T_STD_U64LE, &m->seed) < 0 ? -1 : 0;
    bad |= attr_write(g, "iters", H5T_STD_I64LE, &m->iters) < 0 ? -1 : 0;
    bad |= attr_str(g, "peat_version", m->peat_version);
    bad |= attr_str(g, "created", m->created);
    bad |= attr_str(g, "argv", m->argv);
    bad |= attr_str(g, "host", m->host);
    bad |= attr_str(g, "clocks", m->clocks);
    bad |= attr_str(g, "dtypes", m->dtypes);
    bad |= attr_str(g, "build", m->build);
    bad |= attr_str(g, "policy", m->policy);
    bad |= attr_write(g, "exact_max_bytes", H5T_STD_I64LE, &m->exact_max_bytes) < 0 ? -1 : 0;
    int32_t lvl = m->deflate_level;
    bad |= attr_write(g, "deflate_level", H5T_STD_I32LE, &lvl) < 0 ? -1 : 0;
    bad |= attr_str(g, "hdf5_version", m->hdf5_version);
    return bad;
}

/* Builds every group, dataset and attribute: in SWMR write mode no object can be created later,
 * so the whole layout exists from the start and records only extend datasets. */
static peat_status layout_create(peat_store_t *s)
{
    int32_t ver = PEAT_STORE_SCHEMA_VERSION;
    if (attr_str(s->file, "peat_format", PEAT_STORE_FORMAT) < 0 ||
        attr_write(s->file, "peat_schema_version", H5T_STD_I32LE, &ver) < 0 ||
        attr_str(s->file, "peat_schema_doc", "docs/hdf5-schema.md in the PEAT sources") < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: writing the schema attributes failed: %s", s->path, store_h5_msg());
    for (int g = 0; g < N_GROUPS; g++) {
        hid_t gid = H5Gcreate2(s->file, group_paths[g], H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        int bad = gid < 0 || attr_str(gid, "description", group_docs[g]) < 0;
        if (!bad && g == 0) bad = meta_attrs_write(gid, &s->meta) != 0;
        if (gid >= 0) H5Gclose(gid);
        if (bad) return PEAT_ERROR(PEAT_ERR_IO, "%s: creating %s failed: %s", s->path, group_paths[g], store_h5_msg());
    }
    for (int t = 0; t < STORE_T_COUNT; t++) {
        hid_t ft = store_row_type(t, 1);
        /* index tables are not compressed: their last chunk is rewritten with each record, and an
         * unfiltered chunk is rewritten in place with the completed rows' bytes unchanged */
        s->d_table[t] = ft < 0 ? -1 : make_dataset(s->file, store_table_path(t), ft, STORE_ROW_CHUNK, 0, -1);
        if (ft >= 0) H5Tclose(ft);
        if (s->d_table[t] < 0)
            return PEAT_ERROR(PEAT_ERR_IO, "%s: creating %s failed: %s", s->path, store_table_path(t), store_h5_msg());
    }
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++) {
        const char *p = store_pool_path((peat_dtype)d);
        s->d_pool[d] = make_dataset(s->file, p, store_pool_type((peat_dtype)d, 1), STORE_CHUNK_ELEMS, 1,
                                    s->deflate < 0 ? 0 : s->deflate);
        int64_t ce = STORE_CHUNK_ELEMS;
        if (s->d_pool[d] < 0 || attr_str(s->d_pool[d], "dtype", peat_dtype_name((peat_dtype)d)) < 0 ||
            attr_write(s->d_pool[d], "chunk_elems", H5T_STD_I64LE, &ce) < 0)
            return PEAT_ERROR(PEAT_ERR_IO, "%s: creating %s failed: %s", s->path, p, store_h5_msg());
    }
    s->d_text = make_dataset(s->file, "/signatures/text", H5T_STD_U8LE, STORE_TEXT_CHUNK, 0, s->deflate < 0 ? 0 : s->deflate);
    if (s->d_text < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: creating /signatures/text failed: %s", s->path, store_h5_msg());
    return PEAT_OK;
}

static void settings_from_meta(peat_store_t *s)
{
    s->exact_max = s->meta.exact_max_bytes == 0 ? PEAT_STORE_EXACT_MAX_DEFAULT : s->meta.exact_max_bytes;
    s->deflate = s->meta.deflate_level == 0 ? 1 : s->meta.deflate_level;
}

peat_status peat_store_create(const char *path, const peat_store_meta *meta, peat_store_t **out)
{
    if (!out) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_create: out is NULL");
    *out = NULL;
    if (!path || !meta) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_create: path or meta is NULL");
    if (meta->deflate_level < -1 || meta->deflate_level > 9)
        return PEAT_ERROR(PEAT_ERR_INVAL, "deflate level %d outside 1..9 (0 default, -1 uncompressed)",
                          meta->deflate_level);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are reported through PEAT_ERROR instead */
    struct stat sb;
    if (lstat(path, &sb) == 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s exists; a campaign file is never overwritten", path);
    char tmp[1100];
    if (snprintf(tmp, sizeof tmp, "%s.creating", path) >= (int)sizeof tmp)
        return PEAT_ERROR(PEAT_ERR_INVAL, "path too long: %s", path);
    unlink(tmp); /* a creator killed before linking its file leaves this behind */

    peat_store_t *s = store_alloc(path);
    if (!s) return PEAT_ERROR(PEAT_ERR_NOMEM, "store");
    s->meta = *meta;
    unsigned maj = 0, min = 0, rel = 0;
    H5get_libversion(&maj, &min, &rel);
    snprintf(s->meta.hdf5_version, sizeof s->meta.hdf5_version, "%u.%u.%u", maj, min, rel);
    settings_from_meta(s);
    s->writable = 1;

    peat_status st = PEAT_OK;
    hid_t fapl = fapl_latest();
    if (fapl < 0) st = PEAT_ERROR(PEAT_ERR_INTERNAL, "HDF5 file access list: %s", store_h5_msg());
    if (st == PEAT_OK) {
        s->file = H5Fcreate(tmp, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
        if (s->file < 0) st = PEAT_ERROR(PEAT_ERR_IO, "cannot create %s: %s", tmp, store_h5_msg());
    }
    if (fapl >= 0) H5Pclose(fapl);
    if (st == PEAT_OK) st = layout_create(s);
    if (st == PEAT_OK && H5Fstart_swmr_write(s->file) < 0)
        st = PEAT_ERROR(PEAT_ERR_IO, "%s: cannot enter SWMR write mode: %s", tmp, store_h5_msg());
    if (st == PEAT_OK) st = lock_take(tmp, &s->lock_fd);
    /* link() refuses an existing name, so a file that appeared meanwhile is not replaced */
    if (st == PEAT_OK && link(tmp, path) != 0)
        st = PEAT_ERROR(PEAT_ERR_IO, "cannot create %s: %s", path,
                        errno == EEXIST ? "it exists (created meanwhile)" : strerror(errno));
    unlink(tmp);
    if (st != PEAT_OK) {
        s->failed = 1;
        peat_store_close(s);
        return st;
    }
    *out = s;
    return PEAT_OK;
}

/* ---- opening: validation ---- */

static peat_status open_datasets(peat_store_t *s)
{
    for (int g = 0; g < N_GROUPS; g++) {
        htri_t ex = H5Lexists(s->file, group_paths[g], H5P_DEFAULT);
        if (ex <= 0) return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: required group %s is missing", s->path, group_paths[g]);
    }
    for (int t = 0; t < STORE_T_COUNT; t++) {
        const char *p = store_table_path(t);
        if (H5Lexists(s->file, p, H5P_DEFAULT) <= 0 || (s->d_table[t] = H5Dopen2(s->file, p, H5P_DEFAULT)) < 0)
            return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: required dataset %s is missing", s->path, p);
        hid_t ft = H5Dget_type(s->d_table[t]);
        int ok = ft >= 0 && H5Tget_class(ft) == H5T_COMPOUND;
        /* every column this build reads must be there (conversion matches them by name) */
        for (int m = 0, nm = H5Tget_nmembers(s->mt[t]); ok && m < nm; m++) {
            char *name = H5Tget_member_name(s->mt[t], (unsigned)m);
            ok = name && H5Tget_member_index(ft, name) >= 0;
            H5free_memory(name);
        }
        if (ft >= 0) H5Tclose(ft);
        if (!ok) return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: %s lacks the columns of schema version %d", s->path, p,
                                   PEAT_STORE_SCHEMA_VERSION);
    }
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    /* reads walk a pool forward; 16 MiB of decoded chunks keeps a record's tensors cached */
    if (dapl >= 0) H5Pset_chunk_cache(dapl, 1021, (size_t)16 << 20, 0.75);
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++) {
        const char *p = store_pool_path((peat_dtype)d);
        if (H5Lexists(s->file, p, H5P_DEFAULT) <= 0 || (s->d_pool[d] = H5Dopen2(s->file, p, dapl)) < 0) {
            if (dapl >= 0) H5Pclose(dapl);
            return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: required dataset %s is missing", s->path, p);
        }
        hid_t ft = H5Dget_type(s->d_pool[d]);
        int ok = ft >= 0 && H5Tget_size(ft) == peat_dtype_size((peat_dtype)d);
        if (ft >= 0) H5Tclose(ft);
        if (!ok) {
            if (dapl >= 0) H5Pclose(dapl);
            return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: %s has the wrong element type", s->path, p);
        }
    }
    if (dapl >= 0) H5Pclose(dapl);
    if (H5Lexists(s->file, "/signatures/text", H5P_DEFAULT) <= 0 ||
        (s->d_text = H5Dopen2(s->file, "/signatures/text", H5P_DEFAULT)) < 0)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: required dataset /signatures/text is missing", s->path);
    return PEAT_OK;
}

static int64_t extent_of(hid_t d)
{
    hid_t sp = H5Dget_space(d);
    if (sp < 0) return -1;
    hsize_t n = 0;
    int r = H5Sget_simple_extent_ndims(sp) == 1 ? H5Sget_simple_extent_dims(sp, &n, NULL) : -1;
    H5Sclose(sp);
    return r < 0 ? -1 : (int64_t)n;
}

static peat_status meta_read(peat_store_t *s)
{
    hid_t g = H5Gopen2(s->file, "/meta", H5P_DEFAULT);
    if (g < 0) return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: /meta cannot be opened", s->path);
    peat_store_meta *m = &s->meta;
    struct {
        const char *name;
        char *buf;
        size_t n;
    } strs[] = {
        {"flow", m->flow, sizeof m->flow},          {"kernel", m->kernel, sizeof m->kernel},
        {"backend", m->backend, sizeof m->backend}, {"device", m->device, sizeof m->device},
        {"peat_version", m->peat_version, sizeof m->peat_version},
        {"created", m->created, sizeof m->created}, {"argv", m->argv, sizeof m->argv},
        {"host", m->host, sizeof m->host},          {"clocks", m->clocks, sizeof m->clocks},
        {"dtypes", m->dtypes, sizeof m->dtypes},    {"build", m->build, sizeof m->build},
        {"policy", m->policy, sizeof m->policy},    {"hdf5_version", m->hdf5_version, sizeof m->hdf5_version},
    };
    const char *missing = NULL;
    for (size_t i = 0; i < sizeof strs / sizeof strs[0] && !missing; i++)
        if (attr_str_read(g, strs[i].name, strs[i].buf, strs[i].n) != 1) missing = strs[i].name;
    int32_t lvl = 0;
    if (!missing && attr_num_read(g, "seed", H5T_NATIVE_UINT64, &m->seed) != 1) missing = "seed";
    if (!missing && attr_num_read(g, "iters", H5T_NATIVE_INT64, &m->iters) != 1) missing = "iters";
    if (!missing && attr_num_read(g, "exact_max_bytes", H5T_NATIVE_INT64, &m->exact_max_bytes) != 1)
        missing = "exact_max_bytes";
    if (!missing && attr_num_read(g, "deflate_level", H5T_NATIVE_INT32, &lvl) != 1) missing = "deflate_level";
    H5Gclose(g);
    if (missing) return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: attribute /meta/%s is missing or unreadable", s->path, missing);
    m->deflate_level = lvl;
    settings_from_meta(s);
    return PEAT_OK;
}

static peat_status tables_load(peat_store_t *s)
{
    for (int t = 0; t < STORE_T_COUNT; t++) {
        int64_t n = extent_of(s->d_table[t]);
        if (n < 0) return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: %s is not a 1-D table", s->path, store_table_path(t));
        store_vec *v = &s->rows[t];
        if (n > 0) {
            v->data = malloc((size_t)n * v->elem);
            if (!v->data) return PEAT_ERROR(PEAT_ERR_NOMEM, "%s: index of %lld rows", s->path, (long long)n);
            v->cap = n;
            if (H5Dread(s->d_table[t], s->mt[t], H5S_ALL, H5S_ALL, H5P_DEFAULT, v->data) < 0)
                return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: %s unreadable (damaged or truncated file): %s", s->path,
                                  store_table_path(t), store_h5_msg());
        }
        v->n = n;
        s->disk_rows[t] = n;
    }
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++)
        if ((s->pool_len[d] = extent_of(s->d_pool[d])) < 0)
            return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: %s is not 1-D", s->path, store_pool_path((peat_dtype)d));
    if ((s->text_len = extent_of(s->d_text)) < 0)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: /signatures/text is not 1-D", s->path);
    return PEAT_OK;
}

static int row_good(const peat_store_t *s, int t, int64_t i)
{
    const store_vec *v = &s->rows[t];
    const char *row = (const char *)v->data + (size_t)i * v->elem;
    uint64_t chk;
    memcpy(&chk, row + v->elem - 8, 8);
    return chk == store_row_check(t, row, v->elem);
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
    if (r->dtype < 0 || r->dtype >= PEAT_DTYPE_COUNT || r->ndim < 1 || r->ndim > PEAT_MAX_DIMS) return 0;
    int64_t n = 1;
    for (int d = 0; d < r->ndim; d++) {
        if (r->shape[d] <= 0 || r->shape[d] > (1LL << 34) || n > (1LL << 34) / r->shape[d]) return 0;
        n *= r->shape[d];
    }
    return n == r->numel && r->offset >= 0 && r->offset + r->numel <= s->pool_len[r->dtype];
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
        if (c->op < 0 || c->op >= PEAT_OP_COUNT || c->n_in < 0 || c->n_in > PEAT_MAX_IO || c->n_out < 0 ||
            c->n_out > PEAT_MAX_IO || c->phase < 0 || c->phase > 2)
            return 0;
        for (int k = 0; k < c->n_in; k++)
            if (!ref_ok(c->t_in[k], n_tensors, 0)) return 0;
        for (int k = 0; k < c->n_out; k++)
            if (!ref_ok(c->t_golden[k], n_tensors, 1) || !ref_ok(c->t_exact[k], n_tensors, 1)) return 0;
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
        return g->text_offset >= 0 && g->text_len >= 0 && g->text_offset + g->text_len <= s->text_len;
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
                if (lists[l][k] >= c->t_first) PEAT_TRY(store_tensor_verify(s, lists[l][k]));
    } else if (rr->table == STORE_T_STATE) {
        for (int64_t i = 0; i < rr->n; i++) {
            const store_state_row *r = STORE_ROW(s, STORE_T_STATE, store_state_row, rr->first + i);
            if (r->tensor >= r->t_first) PEAT_TRY(store_tensor_verify(s, r->tensor));
        }
    } else if (rr->table == STORE_T_SIG) {
        const store_sig_row *g = STORE_ROW(s, STORE_T_SIG, store_sig_row, rr->first);
        char *text = NULL;
        PEAT_TRY(store_text_read(s, g->text_offset, g->text_len, &text));
        int same = store_hash64(text, (size_t)g->text_len, 0) == g->text_hash;
        free(text);
        if (!same) return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: signature text does not match its hash", s->path);
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
    case STORE_T_CALL: return STORE_ROW(s, t, store_call_row, i)->seq;
    case STORE_T_STATE: return STORE_ROW(s, t, store_state_row, i)->seq;
    case STORE_T_METRIC: return STORE_ROW(s, t, store_metric_row, i)->seq;
    default: return STORE_ROW(s, t, store_sig_row, i)->seq;
    }
}

/* Validates every row and drops an incomplete trailing record (a killed writer's last one):
 * records are written one at a time and each ends with a flush, so only the record with the
 * highest sequence number can be incomplete. What remains must be whole and gap-free. */
static peat_status recover(peat_store_t *s)
{
    int64_t n_ok[STORE_T_COUNT], seq_max = -1;
    for (int t = 0; t < STORE_T_COUNT; t++) n_ok[t] = checked_prefix(s, t);
    for (int t = STORE_T_CALL; t < STORE_T_COUNT; t++)
        for (int64_t i = 0; i < n_ok[t]; i++) seq_max = row_seq(s, t, i) > seq_max ? row_seq(s, t, i) : seq_max;
    /* past a failing row, a killed writer can only have left rows of the one record it was
     * writing (a snapshot's rows may span two chunks, flushed in either order); any other good
     * row there means rows in the middle of the table were lost: damage */
    for (int t = STORE_T_CALL; t < STORE_T_COUNT; t++)
        for (int64_t i = n_ok[t] + 1; i < s->rows[t].n; i++)
            if (row_good(s, t, i) && row_seq(s, t, i) != seq_max + 1)
                return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: row %lld of %s is damaged (checksum)", s->path,
                                  (long long)n_ok[t], store_table_path(t));
    int64_t n_tensors = 0;
    while (n_tensors < n_ok[STORE_T_TENSOR] &&
           tensor_row_ok(s, STORE_ROW(s, STORE_T_TENSOR, store_tensor_row, n_tensors)))
        n_tensors++;

    int64_t n_recs = n_ok[STORE_T_CALL] + n_ok[STORE_T_STATE] + n_ok[STORE_T_METRIC] + n_ok[STORE_T_SIG];
    rec_ref *recs = malloc((size_t)(n_recs + 1) * sizeof *recs);
    if (!recs) return PEAT_ERROR(PEAT_ERR_NOMEM, "record list");
    int64_t m = 0;
    for (int t = STORE_T_CALL; t < STORE_T_COUNT; t++)
        for (int64_t i = 0; i < n_ok[t];) {
            int64_t j = i + 1, seq = row_seq(s, t, i);
            if (t == STORE_T_STATE) /* one snapshot = consecutive rows sharing a sequence number */
                while (j < n_ok[t] && row_seq(s, t, j) == seq) j++;
            recs[m++] = (rec_ref){seq, t, i, j - i};
            i = j;
        }
    qsort(recs, (size_t)m, sizeof *recs, cmp_seq);

    peat_status st = PEAT_OK;
    if (m > 0) {
        rec_ref *last = &recs[m - 1];
        int whole = record_ok(s, last, n_tensors);
        if (whole) {
            peat_status vs = record_data_verify(s, last);
            whole = vs == PEAT_OK;
            if (vs != PEAT_OK && vs != PEAT_ERR_FORMAT) st = vs;
        }
        if (st == PEAT_OK && !whole) {
            /* it is the last row(s) of its table, so dropping it truncates that table */
            n_ok[last->table] = last->first;
            m--;
        }
    }
    int64_t max_ref = -1;
    for (int64_t r = 0; r < m && st == PEAT_OK; r++) {
        if (recs[r].seq != r)
            st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s: record %lld is missing (sequence numbers jump to %lld): damaged file",
                            s->path, (long long)r, (long long)recs[r].seq);
        else if (!record_ok(s, &recs[r], n_tensors))
            st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s: record %lld (%s row %lld) refers to data that is not there: damaged file",
                            s->path, (long long)r, store_table_path(recs[r].table), (long long)recs[r].first);
        else if (recs[r].table == STORE_T_CALL) {
            const store_call_row *c = STORE_ROW(s, STORE_T_CALL, store_call_row, recs[r].first);
            for (int k = 0; k < c->n_in; k++) max_ref = c->t_in[k] > max_ref ? c->t_in[k] : max_ref;
            for (int k = 0; k < c->n_out; k++) {
                max_ref = c->t_golden[k] > max_ref ? c->t_golden[k] : max_ref;
                max_ref = c->t_exact[k] > max_ref ? c->t_exact[k] : max_ref;
            }
        } else if (recs[r].table == STORE_T_STATE) {
            for (int64_t i = 0; i < recs[r].n; i++) {
                int64_t tr = STORE_ROW(s, STORE_T_STATE, store_state_row, recs[r].first + i)->tensor;
                max_ref = tr > max_ref ? tr : max_ref;
            }
        }
    }
    free(recs);
    if (st != PEAT_OK) return st;
    /* tensors after the last one referenced belong to a record that never completed */
    n_ok[STORE_T_TENSOR] = max_ref + 1;
    s->seq_next = m;
    s->dropped = 0;
    for (int t = 0; t < STORE_T_COUNT; t++) {
        s->dropped += s->rows[t].n - n_ok[t];
        s->rows[t].n = n_ok[t];
    }
    return PEAT_OK;
}

static peat_status index_build(peat_store_t *s)
{
    for (int64_t i = 0; i < s->rows[STORE_T_CALL].n; i++) {
        uint64_t id = STORE_ROW(s, STORE_T_CALL, store_call_row, i)->id;
        int64_t cur = -1, v;
        if (store_map_next(&s->ids, id, &cur, &v))
            return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: record id %llu is stored twice", s->path, (unsigned long long)id);
        PEAT_TRY(store_map_put(&s->ids, id, i));
    }
    for (int64_t i = 0; i < s->rows[STORE_T_TENSOR].n; i++)
        PEAT_TRY(store_map_put(&s->dedup, STORE_ROW(s, STORE_T_TENSOR, store_tensor_row, i)->hash, i));
    return PEAT_OK;
}

static peat_status shrink(peat_store_t *s, hid_t d, int64_t n, const char *what)
{
    hsize_t e = (hsize_t)n;
    if (H5Dset_extent(d, &e) < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: cannot trim %s: %s", s->path, what, store_h5_msg());
    return PEAT_OK;
}

/* For writing after a crash: cut every table and pool back to the last complete record, so
 * appends continue right after it and nothing incomplete stays in the file. */
static peat_status repair(peat_store_t *s)
{
    for (int t = 0; t < STORE_T_COUNT; t++) {
        if (s->disk_rows[t] != s->rows[t].n) PEAT_TRY(shrink(s, s->d_table[t], s->rows[t].n, store_table_path(t)));
        s->disk_rows[t] = s->rows[t].n;
    }
    int64_t need[PEAT_DTYPE_COUNT] = {0}, text = 0;
    for (int64_t i = 0; i < s->rows[STORE_T_TENSOR].n; i++) {
        const store_tensor_row *r = STORE_ROW(s, STORE_T_TENSOR, store_tensor_row, i);
        if (r->offset + r->numel > need[r->dtype]) need[r->dtype] = r->offset + r->numel;
    }
    for (int64_t i = 0; i < s->rows[STORE_T_SIG].n; i++) {
        const store_sig_row *g = STORE_ROW(s, STORE_T_SIG, store_sig_row, i);
        if (g->text_offset + g->text_len > text) text = g->text_offset + g->text_len;
    }
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++)
        if (s->pool_len[d] != need[d]) {
            PEAT_TRY(shrink(s, s->d_pool[d], need[d], store_pool_path((peat_dtype)d)));
            s->pool_len[d] = need[d];
        }
    if (s->text_len != text) {
        PEAT_TRY(shrink(s, s->d_text, text, "/signatures/text"));
        s->text_len = text;
    }
    if (H5Fflush(s->file, H5F_SCOPE_LOCAL) < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: flush failed: %s", s->path, store_h5_msg());
    return PEAT_OK;
}

/* What the superblock says before HDF5 opens the file: whether a writer left it open, and
 * whether a cleanly closed file is shorter than its recorded end (a truncated copy). */
static peat_status superblock_peek(const char *path, int *crashed)
{
    *crashed = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return PEAT_ERROR(PEAT_ERR_IO, "%s: %s", path, strerror(errno));
    unsigned char sb[48];
    size_t got = fread(sb, 1, sizeof sb, f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    if (got < 8 || memcmp(sb, sig, 8) != 0) return PEAT_OK; /* H5Fis_hdf5 judges (user blocks, ...) */
    if (got < sizeof sb || sb[8] < 2) return PEAT_OK;       /* older superblocks: not a PEAT file */
    /* superblock v2/v3: flags at 11, base address at 12, end-of-file address at 28 */
    uint64_t base = le64(sb + 12), eoa = le64(sb + 28);
    *crashed = sb[11] != 0;
    if (!*crashed && (uint64_t)size < base + eoa)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s is truncated: %ld bytes on disk, its HDF5 superblock says %llu",
                          path, size, (unsigned long long)(base + eoa));
    return PEAT_OK;
}

peat_status peat_store_open(const char *path, int writable, peat_store_t **out)
{
    if (!out) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_open: out is NULL");
    *out = NULL;
    if (!path) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_open: path is NULL");
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    struct stat sb;
    if (stat(path, &sb) != 0) return PEAT_ERROR(PEAT_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return PEAT_ERROR(PEAT_ERR_IO, "%s is not a regular file", path);
    htri_t is = H5Fis_hdf5(path);
    if (is <= 0) return PEAT_ERROR(PEAT_ERR_FORMAT, "%s is not an HDF5 file", path);
    int crashed = 0;
    PEAT_TRY(superblock_peek(path, &crashed));

    peat_store_t *s = store_alloc(path);
    if (!s) return PEAT_ERROR(PEAT_ERR_NOMEM, "store");
    s->crashed = crashed;
    s->writable = writable;
    peat_status st = PEAT_OK;
    if (writable) st = lock_take(path, &s->lock_fd); /* before HDF5 clears the flags of a live writer */
    hid_t fapl = st == PEAT_OK ? fapl_latest() : -1;
    if (st == PEAT_OK && fapl < 0) st = PEAT_ERROR(PEAT_ERR_INTERNAL, "HDF5 file access list: %s", store_h5_msg());
    if (st == PEAT_OK && writable && crashed) {
        /* what `h5clear -s` does: the killed writer left "open for writing" in the superblock */
        hbool_t clear = 1;
        if (H5Pset(fapl, "clear_status_flags", &clear) < 0)
            st = PEAT_ERROR(PEAT_ERR_INTERNAL, "this HDF5 cannot clear the status flags: %s", store_h5_msg());
    }
    if (st == PEAT_OK) {
        /* a file whose writer died (or is still running) is read in SWMR mode, which accepts the
         * writer's flags and sees a consistent state */
        /* a writer opens in SWMR mode at once: the repair below then runs with ordered
         * metadata writes too, and a writer killed at any point leaves a file readers accept */
        unsigned flags = writable ? (H5F_ACC_RDWR | H5F_ACC_SWMR_WRITE)
                                  : (H5F_ACC_RDONLY | (crashed ? H5F_ACC_SWMR_READ : 0));
        s->file = H5Fopen(path, flags, fapl);
        if (s->file < 0)
            st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s: HDF5 cannot open it (damaged file?): %s", path, store_h5_msg());
    }
    if (fapl >= 0) H5Pclose(fapl);
    /* A killed writer may have written data past the end-of-allocation its superblock records
     * (the superblock is flushed after the data it covers), and the chunk index of its unfinished
     * record may point there. Raising the EOA to the physical end of the file (what `h5clear
     * --increment` does) keeps new allocations from landing on space something still points to. */
    if (st == PEAT_OK && writable && crashed && H5Fincrement_filesize(s->file, 0) < 0)
        st = PEAT_ERROR(PEAT_ERR_IO, "%s: cannot extend the allocation to the file's end: %s", path, store_h5_msg());
    if (st == PEAT_OK) {
        char fmt[64];
        int32_t ver = -1;
        if (attr_str_read(s->file, "peat_format", fmt, sizeof fmt) != 1 || strcmp(fmt, PEAT_STORE_FORMAT) != 0)
            st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s is an HDF5 file but not a PEAT campaign (no peat_format=\"%s\")",
                            path, PEAT_STORE_FORMAT);
        else if (attr_num_read(s->file, "peat_schema_version", H5T_NATIVE_INT32, &ver) != 1)
            st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s: the peat_schema_version attribute is missing", path);
        else if (ver != PEAT_STORE_SCHEMA_VERSION)
            st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s has schema version %d; this build reads version %d", path, (int)ver,
                            PEAT_STORE_SCHEMA_VERSION);
    }
    if (st == PEAT_OK) st = open_datasets(s);
    if (st == PEAT_OK) st = meta_read(s);
    if (st == PEAT_OK) st = tables_load(s);
    if (st == PEAT_OK) st = recover(s);
    if (st == PEAT_OK) st = index_build(s);
    if (st == PEAT_OK && writable) st = repair(s);
    if (st != PEAT_OK) {
        s->failed = 1; /* nothing to flush: leave the file as it was */
        peat_store_close(s);
        return st;
    }
    *out = s;
    return PEAT_OK;
}

peat_status peat_store_meta_get(const peat_store_t *s, peat_store_meta *out)
{
    if (!s || !out) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_meta_get: NULL argument");
    *out = s->meta;
    return PEAT_OK;
}
