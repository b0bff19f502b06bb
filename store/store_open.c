/* store_open.c: opening a campaign file: is it one, of this schema, whole; then recovery. */
#include "store/store_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* ---- opening: validation ---- */

/* Opens a dataset the schema requires; PEAT_ERR_FORMAT naming it when it is not there. */
static peat_status open_required(peat_store_t *s, const char *p, hid_t dapl, hid_t *d)
{
    if (H5Lexists(s->file, p, H5P_DEFAULT) <= 0 || (*d = H5Dopen2(s->file, p, dapl)) < 0)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: required dataset %s is missing", s->path, p);
    return PEAT_OK;
}

/* The pools of dtype dt: the compressed one converts on read, so its element size must match;
 * the raw one is written and read in place as little-endian bytes: exactly this element type. */
static peat_status pools_open(peat_store_t *s, peat_dtype dt, hid_t cached, hid_t uncached)
{
    const char *paths[2] = {store_pool_path(dt), store_raw_path(dt)};
    hid_t *d[2] = {&s->d_pool[dt], &s->d_raw[dt]};
    for (int k = 0; k < 2; k++) {
        PEAT_TRY(open_required(s, paths[k], k ? uncached : cached, d[k]));
        hid_t ft = H5Dget_type(*d[k]);
        int ok = ft >= 0 && (k ? H5Tequal(ft, store_pool_type(dt, 1)) > 0
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
    const char *p = store_table_path(t);
    hid_t ft = H5Dget_type(s->d_table[t]);
    int ok = ft >= 0 && H5Tget_class(ft) == H5T_COMPOUND;
    for (int m = 0, nm = H5Tget_nmembers(s->mt[t]); ok && m < nm; m++) {
        char *name = H5Tget_member_name(s->mt[t], (unsigned)m);
        ok = name && H5Tget_member_index(ft, name) >= 0;
        H5free_memory(name);
    }
    int same = 1;
    if (ok && s->writable) {
        hid_t mine = store_row_type(t, 1);
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

static peat_status open_datasets(peat_store_t *s)
{
    for (int g = 0; g < STORE_N_GROUPS; g++) {
        htri_t ex = H5Lexists(s->file, store_group_paths[g], H5P_DEFAULT);
        if (ex <= 0)
            return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: required group %s is missing", s->path,
                              store_group_paths[g]);
    }
    /* reads walk a compressed pool forward: 16 MiB of decoded chunks keeps a record's tensors
     * cached; the datasets written in place get no cache at all */
    hid_t cached = H5Pcreate(H5P_DATASET_ACCESS), uncached = store_dapl_uncached();
    peat_status st = PEAT_OK;
    if (cached < 0 || uncached < 0 || H5Pset_chunk_cache(cached, 1021, (size_t)16 << 20, 0.75) < 0)
        st = PEAT_ERROR(PEAT_ERR_INTERNAL, "HDF5 dataset access list: %s", store_h5_msg());
    for (int t = 0; t < STORE_T_COUNT && st == PEAT_OK; t++) {
        st = open_required(s, store_table_path(t), uncached, &s->d_table[t]);
        if (st == PEAT_OK) st = table_check(s, t);
    }
    for (int d = 0; d < PEAT_DTYPE_COUNT && st == PEAT_OK; d++)
        st = pools_open(s, (peat_dtype)d, cached, uncached);
    if (st == PEAT_OK) st = open_required(s, "/signatures/text", H5P_DEFAULT, &s->d_text);
    if (cached >= 0) H5Pclose(cached);
    if (uncached >= 0) H5Pclose(uncached);
    return st;
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
        if (store_attr_str_read(g, strs[i].name, strs[i].buf, strs[i].n) != 1)
            missing = strs[i].name;
    int32_t lvl = 0;
    if (!missing && store_attr_num_read(g, "seed", H5T_NATIVE_UINT64, &m->seed) != 1)
        missing = "seed";
    if (!missing && store_attr_num_read(g, "iters", H5T_NATIVE_INT64, &m->iters) != 1)
        missing = "iters";
    if (!missing &&
        store_attr_num_read(g, "exact_max_bytes", H5T_NATIVE_INT64, &m->exact_max_bytes) != 1)
        missing = "exact_max_bytes";
    if (!missing && store_attr_num_read(g, "deflate_level", H5T_NATIVE_INT32, &lvl) != 1)
        missing = "deflate_level";
    int32_t pct = 0;
    if (!missing && store_attr_num_read(g, "min_saving_pct", H5T_NATIVE_INT32, &pct) != 1)
        missing = "min_saving_pct";
    H5Gclose(g);
    if (missing)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: attribute /meta/%s is missing or unreadable",
                          s->path, missing);
    m->deflate_level = lvl;
    m->min_saving_pct = pct;
    store_settings_from_meta(s);
    return PEAT_OK;
}

static peat_status tables_load(peat_store_t *s)
{
    for (int t = 0; t < STORE_T_COUNT; t++) {
        int64_t n = extent_of(s->d_table[t]);
        if (n < 0)
            return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: %s is not a 1-D table", s->path,
                              store_table_path(t));
        store_vec *v = &s->rows[t];
        if (n > 0) {
            v->data = malloc((size_t)n * v->elem);
            if (!v->data)
                return PEAT_ERROR(PEAT_ERR_NOMEM, "%s: index of %lld rows", s->path, (long long)n);
            v->cap = n;
            if (H5Dread(s->d_table[t], s->mt[t], H5S_ALL, H5S_ALL, H5P_DEFAULT, v->data) < 0)
                return PEAT_ERROR(PEAT_ERR_FORMAT,
                                  "%s: %s unreadable (damaged or truncated file): %s", s->path,
                                  store_table_path(t), store_h5_msg());
        }
        v->n = n;
        s->disk_rows[t] = n;
    }
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++)
        if ((s->pool_len[d] = extent_of(s->d_pool[d])) < 0)
            return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: %s is not 1-D", s->path,
                              store_pool_path((peat_dtype)d));
    /* tables and raw pools may hold spare capacity past their used part (a writer that did not
     * close): rows there are zeros, and recovery finds the end of what is used */
    store_spaces_init(s);
    for (int t = 0; t < STORE_T_COUNT; t++) PEAT_TRY(store_space_open(s, &s->tab[t]));
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++) {
        PEAT_TRY(store_space_open(s, &s->raw[d]));
        s->raw_len[d] = s->raw[d].cap;
    }
    if ((s->text_len = extent_of(s->d_text)) < 0)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: /signatures/text is not 1-D", s->path);
    return PEAT_OK;
}

/* What the superblock says before HDF5 opens the file: whether a writer left it open, and
 * whether a cleanly closed file is shorter than its recorded end (a truncated copy). */
static peat_status superblock_peek(const char *path, int *crashed, uint64_t *base)
{
    *crashed = 0;
    *base = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return PEAT_ERROR(PEAT_ERR_IO, "%s: %s", path, strerror(errno));
    unsigned char sb[48];
    size_t got = fread(sb, 1, sizeof sb, f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    if (got < 8 || memcmp(sb, sig, 8) != 0)
        return PEAT_OK;                               /* H5Fis_hdf5 judges (user blocks, ...) */
    if (got < sizeof sb || sb[8] < 2) return PEAT_OK; /* older superblocks: not a PEAT file */
    /* superblock v2/v3: flags at 11, base address at 12, end-of-file address at 28 */
    uint64_t eoa = le64(sb + 28);
    *base = le64(sb + 12);
    *crashed = sb[11] != 0;
    if (!*crashed && (uint64_t)size < *base + eoa)
        return PEAT_ERROR(PEAT_ERR_FORMAT,
                          "%s is truncated: %ld bytes on disk, its HDF5 superblock says %llu", path,
                          size, (unsigned long long)(*base + eoa));
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
    uint64_t base = 0;
    PEAT_TRY(superblock_peek(path, &crashed, &base));

    peat_store_t *s = store_alloc(path);
    if (!s) return PEAT_ERROR(PEAT_ERR_NOMEM, "store");
    s->crashed = crashed;
    s->base_addr = base;
    s->writable = writable;
    peat_status st = PEAT_OK;
    if (writable) {
        st = store_lock_take(path, &s->lock_fd); /* before HDF5 clears the flags of a live writer */
        s->data_fd = s->lock_fd;
    } else if ((s->data_fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        st = PEAT_ERROR(PEAT_ERR_IO, "%s: %s", path, strerror(errno));
    }
    hid_t fapl = st == PEAT_OK ? store_fapl_latest() : -1;
    if (st == PEAT_OK && fapl < 0)
        st = PEAT_ERROR(PEAT_ERR_INTERNAL, "HDF5 file access list: %s", store_h5_msg());
    if (st == PEAT_OK && writable && crashed) {
        /* what `h5clear -s` does: the killed writer left "open for writing" in the superblock */
        hbool_t clear = 1;
        if (H5Pset(fapl, "clear_status_flags", &clear) < 0)
            st = PEAT_ERROR(PEAT_ERR_INTERNAL, "this HDF5 cannot clear the status flags: %s",
                            store_h5_msg());
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
            st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s: HDF5 cannot open it (damaged file?): %s", path,
                            store_h5_msg());
    }
    if (fapl >= 0) H5Pclose(fapl);
    /* A killed writer may have written data past the end-of-allocation its superblock records
     * (the superblock is flushed after the data it covers), and the chunk index of its unfinished
     * record may point there. Raising the EOA to the physical end of the file (what `h5clear
     * --increment` does) keeps new allocations from landing on space something still points to. */
    if (st == PEAT_OK && writable && crashed && H5Fincrement_filesize(s->file, 0) < 0)
        st = PEAT_ERROR(PEAT_ERR_IO, "%s: cannot extend the allocation to the file's end: %s", path,
                        store_h5_msg());
    if (st == PEAT_OK) {
        char fmt[64];
        int32_t ver = -1;
        if (store_attr_str_read(s->file, "peat_format", fmt, sizeof fmt) != 1 ||
            strcmp(fmt, PEAT_STORE_FORMAT) != 0)
            st = PEAT_ERROR(PEAT_ERR_FORMAT,
                            "%s is an HDF5 file but not a PEAT campaign (no peat_format=\"%s\")",
                            path, PEAT_STORE_FORMAT);
        else if (store_attr_num_read(s->file, "peat_schema_version", H5T_NATIVE_INT32, &ver) != 1)
            st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s: the peat_schema_version attribute is missing",
                            path);
        else if (ver != PEAT_STORE_SCHEMA_VERSION)
            st =
                PEAT_ERROR(PEAT_ERR_FORMAT, "%s has schema version %d; this build reads version %d",
                           path, (int)ver, PEAT_STORE_SCHEMA_VERSION);
    }
    if (st == PEAT_OK) st = open_datasets(s);
    if (st == PEAT_OK) st = meta_read(s);
    if (st == PEAT_OK) st = tables_load(s);
    if (st == PEAT_OK) st = store_recover(s);
    if (st == PEAT_OK) st = store_index_build(s);
    if (st == PEAT_OK && writable) st = store_repair(s);
    if (st != PEAT_OK) {
        s->failed = 1; /* nothing to flush: leave the file as it was */
        peat_store_close(s);
        return st;
    }
    *out = s;
    return PEAT_OK;
}
