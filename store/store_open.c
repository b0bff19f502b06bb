/* store_open.c: opening a campaign file: is it one, of this schema, whole; then recovery. */
#include "store/store_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- opening: validation ---- */

/* Opens a dataset the schema requires; PEAT_ERR_FORMAT naming it when it is not there. */
static peat_status open_required(peat_store_t *s, const char *p, hid_t dapl, hid_t *d)
{
    if (H5Lexists(s->file, p, H5P_DEFAULT) <= 0 || (*d = H5Dopen2(s->file, p, dapl)) < 0)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: required dataset %s is missing", s->path, p);
    return PEAT_OK;
}

/* The pools of dtype dt: the compressed one converts on read, so its element size must match;
 * the raw one: exactly this element type. */
static peat_status pools_open(peat_store_t *s, peat_dtype dt, hid_t cached)
{
    const char *paths[2] = {peat_store_pool_path(dt), peat_store_raw_path(dt)};
    hid_t *d[2] = {&s->d_pool[dt], &s->d_raw[dt]};
    for (int k = 0; k < 2; k++) {
        PEAT_TRY(open_required(s, paths[k], k ? H5P_DEFAULT : cached, d[k]));
        hid_t ft = H5Dget_type(*d[k]);
        int ok = ft >= 0 && (k ? H5Tequal(ft, peat_store_pool_type(dt, 1)) > 0
                               : H5Tget_size(ft) == peat_dtype_size(dt));
        if (ft >= 0) H5Tclose(ft);
        if (!ok)
            return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: %s has the wrong element type", s->path,
                              paths[k]);
    }
    return PEAT_OK;
}

/* A table's columns: every one this build reads (conversion matches them by name); for a
 * writer, which appends rows as raw bytes, exactly this build's row layout. */
static peat_status table_check(peat_store_t *s, int t)
{
    const char *p = peat_store_table_path(t);
    hid_t ft = H5Dget_type(s->d_table[t]);
    int ok = ft >= 0 && H5Tget_class(ft) == H5T_COMPOUND;
    for (int m = 0, nm = H5Tget_nmembers(s->mt[t]); ok && m < nm; m++) {
        char *name = H5Tget_member_name(s->mt[t], (unsigned)m);
        ok = name && H5Tget_member_index(ft, name) >= 0;
        H5free_memory(name);
    }
    int same = 1;
    if (ok && s->writable) {
        hid_t mine = peat_store_row_type(t, 1);
        same = mine >= 0 && H5Tequal(ft, mine) > 0;
        if (mine >= 0) H5Tclose(mine);
    }
    if (ft >= 0) H5Tclose(ft);
    if (!same)
        return PEAT_ERROR(PEAT_ERR_FORMAT,
                          "%s: %s has another row layout than this build writes; it can be "
                          "read but not appended to",
                          s->path, p);
    if (!ok)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: %s lacks the columns of schema version %d", s->path,
                          p, PEAT_STORE_SCHEMA_VERSION);
    return PEAT_OK;
}

/* For a writer, which writes compressed chunks itself: a pool is shuffle (unless 1-byte) then
 * deflate, in chunks of the size it encodes. */
static peat_status chunks_check(peat_store_t *s, hid_t d, hsize_t chunk, int shuffle,
                                const char *what)
{
    hid_t dcpl = H5Dget_create_plist(d);
    hsize_t got = 0;
    unsigned flags = 0, cd[8];
    size_t ncd = 8;
    int n = dcpl < 0 ? -1 : H5Pget_nfilters(dcpl);
    int ok = n == shuffle + 1 && H5Pget_chunk(dcpl, 1, &got) == 1 && got == chunk;
    for (int k = 0; ok && k < n; k++) {
        ncd = 8;
        H5Z_filter_t f = H5Pget_filter2(dcpl, (unsigned)k, &flags, &ncd, cd, 0, NULL, NULL);
        ok = f == (k < shuffle ? H5Z_FILTER_SHUFFLE : H5Z_FILTER_DEFLATE);
    }
    if (dcpl >= 0) H5Pclose(dcpl);
    if (!ok)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: %s is not laid out as schema version %d says",
                          s->path, what, PEAT_STORE_SCHEMA_VERSION);
    return PEAT_OK;
}

peat_status peat_store_datasets_open(peat_store_t *s)
{
    for (int g = 0; g < STORE_N_GROUPS; g++)
        if (H5Lexists(s->file, peat_store_group_paths[g], H5P_DEFAULT) <= 0)
            return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: required group %s is missing", s->path,
                              peat_store_group_paths[g]);
    /* reads walk a compressed pool forward: 16 MiB of decoded chunks keeps a record's tensors
     * cached */
    hid_t cached = H5Pcreate(H5P_DATASET_ACCESS);
    peat_status st = PEAT_OK;
    if (cached < 0 || H5Pset_chunk_cache(cached, 1021, (size_t)16 << 20, 0.75) < 0)
        st = PEAT_ERROR(PEAT_ERR_INTERNAL, "HDF5 dataset access list: %s", peat_store_h5_msg());
    for (int t = 0; t < STORE_T_COUNT && st == PEAT_OK; t++) {
        st = open_required(s, peat_store_table_path(t), H5P_DEFAULT, &s->d_table[t]);
        if (st == PEAT_OK) st = table_check(s, t);
    }
    for (int d = 0; d < PEAT_DTYPE_COUNT && st == PEAT_OK; d++) {
        st = pools_open(s, (peat_dtype)d, cached);
        if (st == PEAT_OK && s->writable)
            st = chunks_check(s, s->d_pool[d], STORE_CHUNK_ELEMS, 1, peat_store_pool_path(d));
    }
    if (st == PEAT_OK) st = open_required(s, "/signatures/text", H5P_DEFAULT, &s->d_text);
    if (st == PEAT_OK && s->writable)
        st = chunks_check(s, s->d_text, STORE_TEXT_CHUNK, 0, "/signatures/text");
    if (cached >= 0) H5Pclose(cached);
    return st;
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
        {"flow", m->flow, sizeof m->flow},
        {"kernel", m->kernel, sizeof m->kernel},
        {"backend", m->backend, sizeof m->backend},
        {"device", m->device, sizeof m->device},
        {"peat_version", m->peat_version, sizeof m->peat_version},
        {"created", m->created, sizeof m->created},
        {"argv", m->argv, sizeof m->argv},
        {"host", m->host, sizeof m->host},
        {"clocks", m->clocks, sizeof m->clocks},
        {"dtypes", m->dtypes, sizeof m->dtypes},
        {"build", m->build, sizeof m->build},
        {"policy", m->policy, sizeof m->policy},
        {"hdf5_version", m->hdf5_version, sizeof m->hdf5_version},
    };
    const char *missing = NULL;
    for (size_t i = 0; i < sizeof strs / sizeof strs[0] && !missing; i++)
        if (peat_store_attr_str_read(g, strs[i].name, strs[i].buf, strs[i].n) != 1)
            missing = strs[i].name;
    int32_t lvl = 0;
    if (!missing && peat_store_attr_num_read(g, "seed", H5T_NATIVE_UINT64, &m->seed) != 1)
        missing = "seed";
    if (!missing && peat_store_attr_num_read(g, "iters", H5T_NATIVE_INT64, &m->iters) != 1)
        missing = "iters";
    if (!missing &&
        peat_store_attr_num_read(g, "exact_max_bytes", H5T_NATIVE_INT64, &m->exact_max_bytes) != 1)
        missing = "exact_max_bytes";
    if (!missing && peat_store_attr_num_read(g, "deflate_level", H5T_NATIVE_INT32, &lvl) != 1)
        missing = "deflate_level";
    int32_t pct = 0;
    if (!missing && peat_store_attr_num_read(g, "min_saving_pct", H5T_NATIVE_INT32, &pct) != 1)
        missing = "min_saving_pct";
    /* optional: files written before the golden's BLAS was recorded have none ("") */
    if (!missing) peat_store_attr_str_read(g, "blas", m->blas, sizeof m->blas);
    H5Gclose(g);
    if (missing)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: attribute /meta/%s is missing or unreadable",
                          s->path, missing);
    m->deflate_level = lvl;
    m->min_saving_pct = pct;
    peat_store_settings_from_meta(s);
    return PEAT_OK;
}

peat_status peat_store_tables_load(peat_store_t *s)
{
    for (int t = 0; t < STORE_T_COUNT; t++) {
        int64_t n = peat_store_extent(s->d_table[t]);
        if (n < 0)
            return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: %s is not a 1-D table", s->path,
                              peat_store_table_path(t));
        store_vec *v = &s->rows[t];
        if (n > 0 && !(v->data = malloc((size_t)n * v->elem)))
            return PEAT_ERROR(PEAT_ERR_NOMEM, "%s: index of %lld rows", s->path, (long long)n);
        v->cap = n;
        PEAT_TRY(peat_store_read_range(s, s->d_table[t], s->mt[t], 0, n, v->data,
                                       peat_store_table_path(t)));
        v->n = n;
        s->disk_rows[t] = n;
    }
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++)
        if ((s->pool_len[d] = peat_store_extent(s->d_pool[d])) < 0 ||
            (s->raw_len[d] = peat_store_extent(s->d_raw[d])) < 0)
            return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: the %s pools are not 1-D", s->path,
                              peat_dtype_name((peat_dtype)d));
    if ((s->text_len = peat_store_extent(s->d_text)) < 0)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: /signatures/text is not 1-D", s->path);
    return PEAT_OK;
}

/* What can be said before HDF5 reads the file: it exists, is a regular file this process may
 * open, and is HDF5. */
static peat_status path_check(const char *path, int writable)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: %s", path,
                          errno == EACCES ? "permission denied" : strerror(errno));
    if (!S_ISREG(sb.st_mode)) return PEAT_ERROR(PEAT_ERR_IO, "%s is not a regular file", path);
    int fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: %s", path,
                          errno == EACCES ? "permission denied" : strerror(errno));
    close(fd);
    if (H5Fis_hdf5(path) <= 0) return PEAT_ERROR(PEAT_ERR_FORMAT, "%s is not an HDF5 file", path);
    return PEAT_OK;
}

/* Opens the file: a writer in SWMR write mode (at once: opened plainly first, a writer killed
 * before it entered SWMR write mode would leave flags no reader accepts), a reader plainly. It
 * creates no object then (store_schema.c). A file whose writer did not
 * close it (killed, or still running) carries "open for writing" flags that only an SWMR
 * reader accepts: then it is opened that way, and marked crashed. */
static peat_status file_open(peat_store_t *s)
{
    unsigned attempts =
        !s->writable && peat_store_lock_held(s->path) ? STORE_READ_ATTEMPTS_LIVE : 1;
    peat_store_h5_quiet();
    hid_t fapl = peat_store_fapl(attempts);
    if (fapl < 0)
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "HDF5 file access list: %s", peat_store_h5_msg());
    s->file =
        H5Fopen(s->path, s->writable ? H5F_ACC_RDWR | H5F_ACC_SWMR_WRITE : H5F_ACC_RDONLY, fapl);
    char first[256];
    snprintf(first, sizeof first, "%s", s->file < 0 ? peat_store_h5_msg() : "");
    if (s->file < 0 && !strstr(first, "truncated")) {
        s->file = H5Fopen(s->path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl);
        s->crashed = s->file >= 0;
    }
    H5Pclose(fapl);
    if (s->file >= 0) return peat_store_h5_fd_hold(s), PEAT_OK;
    if (strstr(first, "truncated"))
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s is truncated (HDF5: %s)", s->path, first);
    return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: HDF5 cannot open it (damaged file?): %s", s->path,
                      first);
}

/* The root attributes: a PEAT campaign of this schema version. */
static peat_status identity_check(peat_store_t *s)
{
    char fmt[64];
    int32_t ver = -1;
    if (peat_store_attr_str_read(s->file, "peat_format", fmt, sizeof fmt) != 1 ||
        strcmp(fmt, PEAT_STORE_FORMAT) != 0)
        return PEAT_ERROR(PEAT_ERR_FORMAT,
                          "%s is an HDF5 file but not a PEAT campaign (no peat_format=\"%s\")",
                          s->path, PEAT_STORE_FORMAT);
    if (peat_store_attr_num_read(s->file, "peat_schema_version", H5T_NATIVE_INT32, &ver) != 1)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: the peat_schema_version attribute is missing",
                          s->path);
    if (ver < PEAT_STORE_SCHEMA_VERSION_READ || ver > PEAT_STORE_SCHEMA_VERSION)
        return PEAT_ERROR(PEAT_ERR_FORMAT,
                          "%s has schema version %d; this build reads versions %d to %d", s->path,
                          (int)ver, PEAT_STORE_SCHEMA_VERSION_READ, PEAT_STORE_SCHEMA_VERSION);
    if (ver < PEAT_STORE_SCHEMA_VERSION_APPEND && s->writable)
        return PEAT_ERROR(PEAT_ERR_FORMAT,
                          "%s has schema version %d; it can be read but not appended to (this "
                          "build writes version %d)",
                          s->path, (int)ver, PEAT_STORE_SCHEMA_VERSION);
    s->schema_version = ver;
    /* version 3 stored op, phase, dtype and pool as plain integers */
    for (int t = 0; ver == 3 && t < STORE_T_COUNT; t++) {
        H5Tclose(s->mt[t]);
        if ((s->mt[t] = peat_store_row_type(t, STORE_LAYOUT_PLAIN)) < 0)
            return PEAT_ERROR(PEAT_ERR_INTERNAL, "%s: row type: %s", s->path, peat_store_h5_msg());
    }
    return PEAT_OK;
}

peat_status peat_store_open_impl(const char *path, int writable, int lock_fd,
                                 peat_store_resume_info *verify, peat_store_t **out)
{
    peat_status st = path_check(path, writable);
    if (st != PEAT_OK) {
        peat_store_lock_release(lock_fd);
        return st;
    }
    peat_store_t *s = peat_store_new(path);
    if (!s) return PEAT_ERROR(PEAT_ERR_NOMEM, "store");
    s->writable = writable;
    s->lock_fd = lock_fd;
    /* the lock first: a live writer's file is never opened for writing */
    if (writable && lock_fd < 0) st = peat_store_lock_take(path, &s->lock_fd);
    if (st == PEAT_OK) st = file_open(s);
    if (st == PEAT_OK) st = identity_check(s);
    if (st == PEAT_OK) st = peat_store_datasets_open(s);
    if (st == PEAT_OK) st = meta_read(s);
    if (st == PEAT_OK) st = peat_store_tables_load(s);
    if (st == PEAT_OK) st = peat_store_recover(s);
    if (st == PEAT_OK) st = peat_store_index_build(s);
    /* --resume keeps only what reads back whole: a damaged record and those after it are
     * dropped here (the store is then untidy, so rebuilt without them) */
    if (st == PEAT_OK && writable && verify) st = peat_store_resume_verify(s, verify);
    if (st == PEAT_OK && writable &&
        (s->crashed || !peat_store_tidy(s) || s->schema_version < PEAT_STORE_SCHEMA_VERSION ||
         !peat_store_stage_tables_complete(s))) {
        /* a killed writer's file (or one a failed write left a partial record in, or a
         * version-4 one, without every stage table, which a writer in SWMR write mode may not
         * create) is read, not written: its complete records go to a new file of this version
         * that takes its name, and that one is opened for writing */
        int new_lock = -1;
        st = peat_store_rebuild(s, &new_lock);
        s->failed = 1;
        peat_store_close(s);
        return st == PEAT_OK ? peat_store_open_impl(path, 1, new_lock, NULL, out) : st;
    }
    if (st != PEAT_OK) {
        s->failed = 1; /* nothing to flush: leave the file as it was */
        peat_store_close(s);
        return st;
    }
    *out = s;
    return PEAT_OK;
}

peat_status peat_store_open(const char *path, int writable, peat_store_t **out)
{
    if (!out) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_open: out is NULL");
    *out = NULL;
    if (!path) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_open: path is NULL");
    peat_status st;
    STORE_GUARDED(st, peat_store_open_impl(path, writable, -1, NULL, out));
    return st;
}
