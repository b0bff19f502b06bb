/* store_create.c: a new campaign file: the whole layout, then SWMR write mode, then its name. */
#include "store/store_impl.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A 1-D dataset of unlimited extent in chunks of `chunk` elements: the compressed pools
 * (shuffle if asked, deflate at level >= 0) get whole chunks written with H5Dwrite_chunk; the
 * others (deflate < 0: no filter) are appended to with H5Dwrite. */
static hid_t make_dataset(hid_t file, const char *path, hid_t ftype, hsize_t chunk, int shuffle,
                          int deflate)
{
    hsize_t zero = 0, unlim = H5S_UNLIMITED;
    hid_t sp = H5Screate_simple(1, &zero, &unlim);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t d = -1;
    /* no time stamps: they would be rewritten with every extent change (one more metadata
     * write per flush) and make two runs' files differ */
    int ok = peat_store_may_create(file) && sp >= 0 && dcpl >= 0 &&
             H5Pset_obj_track_times(dcpl, 0) >= 0 && H5Pset_chunk(dcpl, 1, &chunk) >= 0 &&
             (!shuffle || H5Pset_shuffle(dcpl) >= 0) &&
             (deflate < 0 || H5Pset_deflate(dcpl, (unsigned)deflate) >= 0);
    if (ok) d = H5Dcreate2(file, path, ftype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (sp >= 0) H5Sclose(sp);
    return d;
}

static int meta_attrs_write(hid_t g, const peat_store_meta *m)
{
    int bad = 0;
    bad |= peat_store_attr_str(g, "flow", m->flow);
    bad |= peat_store_attr_str(g, "kernel", m->kernel);
    bad |= peat_store_attr_str(g, "backend", m->backend);
    bad |= peat_store_attr_str(g, "device", m->device);
    bad |= peat_store_attr_write(g, "seed", H5T_STD_U64LE, &m->seed) < 0 ? -1 : 0;
    bad |= peat_store_attr_write(g, "iters", H5T_STD_I64LE, &m->iters) < 0 ? -1 : 0;
    bad |= peat_store_attr_str(g, "peat_version", m->peat_version);
    bad |= peat_store_attr_str(g, "created", m->created);
    bad |= peat_store_attr_str(g, "argv", m->argv);
    bad |= peat_store_attr_str(g, "host", m->host);
    bad |= peat_store_attr_str(g, "clocks", m->clocks);
    bad |= peat_store_attr_str(g, "dtypes", m->dtypes);
    bad |= peat_store_attr_str(g, "build", m->build);
    bad |= peat_store_attr_str(g, "policy", m->policy);
    bad |= peat_store_attr_write(g, "exact_max_bytes", H5T_STD_I64LE, &m->exact_max_bytes) < 0 ? -1
                                                                                               : 0;
    int32_t lvl = m->deflate_level;
    bad |= peat_store_attr_write(g, "deflate_level", H5T_STD_I32LE, &lvl) < 0 ? -1 : 0;
    int32_t pct = m->min_saving_pct;
    bad |= peat_store_attr_write(g, "min_saving_pct", H5T_STD_I32LE, &pct) < 0 ? -1 : 0;
    bad |= peat_store_attr_str(g, "hdf5_version", m->hdf5_version);
    bad |= peat_store_attr_str(g, "blas", m->blas);
    return bad;
}

/* A pool with its dtype attribute; PEAT_ERR_IO naming it if either fails. */
static peat_status pool_create(peat_store_t *s, peat_dtype dt, int raw, hid_t *d)
{
    const char *p = raw ? peat_store_raw_path(dt) : peat_store_pool_path(dt);
    int level = raw ? -1 : s->deflate < 0 ? 0 : s->deflate;
    hsize_t chunk = raw ? (hsize_t)peat_store_raw_chunk_elems(dt) : STORE_CHUNK_ELEMS;
    *d = make_dataset(s->file, p, peat_store_pool_type(dt, 1), chunk, !raw, level);
    if (*d < 0 || peat_store_attr_str(*d, "dtype", peat_dtype_name(dt)) < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: creating %s failed: %s", s->path, p,
                          peat_store_h5_msg());
    return PEAT_OK;
}

static peat_status datasets_create(peat_store_t *s)
{
    for (int t = 0; t < STORE_T_COUNT; t++) {
        hid_t ft = peat_store_row_type(t, 1);
        s->d_table[t] = ft < 0 ? -1
                               : make_dataset(s->file, peat_store_table_path(t), ft,
                                              (hsize_t)peat_store_table_chunk_rows(t), 0, -1);
        if (ft >= 0) H5Tclose(ft);
        if (s->d_table[t] < 0)
            return PEAT_ERROR(PEAT_ERR_IO, "%s: creating %s failed: %s", s->path,
                              peat_store_table_path(t), peat_store_h5_msg());
    }
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++) {
        PEAT_TRY(pool_create(s, (peat_dtype)d, 0, &s->d_pool[d]));
        PEAT_TRY(pool_create(s, (peat_dtype)d, 1, &s->d_raw[d]));
    }
    s->d_text = make_dataset(s->file, "/signatures/text", H5T_STD_U8LE, STORE_TEXT_CHUNK, 0,
                             s->deflate < 0 ? 0 : s->deflate);
    if (s->d_text < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: creating /signatures/text failed: %s", s->path,
                          peat_store_h5_msg());
    return PEAT_OK;
}

/* Builds every group, dataset and attribute of the records: in SWMR write mode no object may be
 * created, so the whole layout exists before the file enters it and records only extend
 * datasets. */
static peat_status layout_create(peat_store_t *s)
{
    int32_t ver = PEAT_STORE_SCHEMA_VERSION;
    if (peat_store_attr_str(s->file, "peat_format", PEAT_STORE_FORMAT) < 0 ||
        peat_store_attr_write(s->file, "peat_schema_version", H5T_STD_I32LE, &ver) < 0 ||
        peat_store_attr_str(s->file, "peat_schema_doc", "docs/hdf5-schema.md in the PEAT sources") <
            0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: writing the schema attributes failed: %s", s->path,
                          peat_store_h5_msg());
    /* the attributes stay in the object header (compact) up to 64: past HDF5's default of 8,
     * /meta's ~20 would move to dense storage (a fractal heap and a B-tree), slower to build */
    hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
    if (gcpl < 0 || H5Pset_attr_phase_change(gcpl, 64, 48) < 0 ||
        H5Pset_obj_track_times(gcpl, 0) < 0) {
        if (gcpl >= 0) H5Pclose(gcpl);
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "HDF5 group creation list: %s", peat_store_h5_msg());
    }
    for (int g = 0; g < STORE_N_GROUPS; g++) {
        hid_t gid = peat_store_may_create(s->file) ? H5Gcreate2(s->file, peat_store_group_paths[g],
                                                                H5P_DEFAULT, gcpl, H5P_DEFAULT)
                                                   : -1;
        int bad = gid < 0 || peat_store_attr_str(gid, "description", peat_store_group_docs[g]) < 0;
        if (!bad && g == 0) bad = meta_attrs_write(gid, &s->meta) != 0;
        if (gid >= 0) H5Gclose(gid);
        if (bad) H5Pclose(gcpl);
        if (bad)
            return PEAT_ERROR(PEAT_ERR_IO, "%s: creating %s failed: %s", s->path,
                              peat_store_group_paths[g], peat_store_h5_msg());
    }
    H5Pclose(gcpl);
    return datasets_create(s);
}

peat_status peat_store_file_create(peat_store_t *s, const char *path, int swmr)
{
    hid_t fapl = peat_store_fapl(1);
    if (fapl < 0)
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "HDF5 file access list: %s", peat_store_h5_msg());
    /* the layout is built in plain write mode, where objects may be created, before any reader
     * can see the file (callers give it its name only when it is complete) */
    peat_store_h5_quiet();
    s->file = H5Fcreate(path, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (s->file < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "cannot create %s: %s", path, peat_store_h5_msg());
    peat_store_h5_fd_hold(s);
    PEAT_TRY(layout_create(s));
    /* the later stages' tables too; a rebuild copies an older file's first (store_rebuild.c) */
    if (swmr) PEAT_TRY(peat_store_stage_tables_create(s));
    /* the whole layout on disk before the file gets its name: a kill from then on leaves a
     * campaign file that opens (empty) */
    PEAT_TRY(peat_store_room_check(s, s->file, path));
    /* then SWMR write mode (ordered metadata flushes, what crash safety rests on): HDF5 flushes
     * the file as it enters it */
    if (swmr && H5Fstart_swmr_write(s->file) < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: cannot enter SWMR write mode: %s", path,
                          peat_store_h5_msg());
    if (!swmr && H5Fflush(s->file, H5F_SCOPE_LOCAL) < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: flush failed: %s", path, peat_store_h5_msg());
    return PEAT_OK;
}

static peat_status meta_check(const peat_store_meta *meta)
{
    if (meta->deflate_level < -1 || meta->deflate_level > 9)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "deflate level %d outside 1..9 (0 default, -1 uncompressed)",
                          meta->deflate_level);
    if (meta->min_saving_pct < -1 || meta->min_saving_pct > 100)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "minimum saving %d%% outside 1..100 (0 default, -1 compress everything)",
                          meta->min_saving_pct);
    return PEAT_OK;
}

/* The HDF5 library that writes the file, into its metadata. */
static void hdf5_version_set(peat_store_meta *m)
{
    unsigned maj = 0, min = 0, rel = 0;
    H5get_libversion(&maj, &min, &rel);
    snprintf(m->hdf5_version, sizeof m->hdf5_version, "%u.%u.%u", maj, min, rel);
}

static peat_status create_impl(const char *path, const peat_store_meta *meta, peat_store_t **out)
{
    PEAT_TRY(meta_check(meta));
    struct stat sb;
    if (lstat(path, &sb) == 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s exists; a campaign file is never overwritten", path);
    char tmp[1100];
    if (snprintf(tmp, sizeof tmp, "%s.creating", path) >= (int)sizeof tmp)
        return PEAT_ERROR(PEAT_ERR_INVAL, "path too long: %s", path);
    unlink(tmp); /* a creator killed before linking its file leaves this behind */

    peat_store_t *s = peat_store_new(path);
    if (!s) return PEAT_ERROR(PEAT_ERR_NOMEM, "store");
    s->meta = *meta;
    hdf5_version_set(&s->meta);
    peat_store_settings_from_meta(s);
    s->writable = 1;
    peat_status st = peat_store_file_create(s, tmp, 1);
    if (st == PEAT_OK) st = peat_store_lock_take(tmp, &s->lock_fd);
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

peat_status peat_store_create(const char *path, const peat_store_meta *meta, peat_store_t **out)
{
    if (!out) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_create: out is NULL");
    *out = NULL;
    if (!path || !meta)
        return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_create: path or meta is NULL");
    peat_status st;
    STORE_GUARDED(st, create_impl(path, meta, out));
    return st;
}

static peat_status create_from_impl(const char *path, const peat_store_meta *meta, const char *seed,
                                    peat_store_t **out)
{
    PEAT_TRY(meta_check(meta));
    struct stat sb;
    if (lstat(path, &sb) == 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s exists; a campaign file is never overwritten", path);
    peat_store_meta m = *meta;
    hdf5_version_set(&m);
    return peat_store_copy_create(path, &m, seed, out);
}

peat_status peat_store_create_from(const char *path, const peat_store_meta *meta, const char *seed,
                                   peat_store_t **out)
{
    if (!out) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_create_from: out is NULL");
    *out = NULL;
    if (!path || !meta || !seed)
        return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_create_from: path, meta or seed is NULL");
    peat_status st;
    STORE_GUARDED(st, create_from_impl(path, meta, seed, out));
    return st;
}
