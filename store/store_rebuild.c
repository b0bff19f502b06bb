/* store_rebuild.c: resuming a killed writer's file: its complete records copied into a new file.
 *
 * HDF5 refuses to open a file for writing while its header says a writer has it open (what
 * a killed writer leaves); only an SWMR reader accepts it. So a resume reads the file, checks
 * it (peat_store_recover drops the unfinished record), and copies what is complete into
 * PATH.resume: the rows from memory, compressed chunks as they are (H5Dread_chunk / H5Dwrite_chunk,
 * no recoding), raw data in blocks. The copy is flushed, locked and renamed over PATH: a kill
 * during the copy leaves PATH as it was. The space and rows of the unfinished record are gone from
 * the new file, so appending continues right after the last complete record. Objects the layout
 * does not know (tables of other modules, store_table.c) are copied whole, rows as they are: their
 * own checks find an unfinished row. */
#include "store/store_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Elements of a raw pool copied per read and write. */
#define STORE_COPY_BLOCK_BYTES (4 << 20)

/* Chunks [0, ceil(n / chunk)) of a filtered 1-D dataset, byte for byte, extent n. */
static peat_status chunks_copy(peat_store_t *s, hid_t from, hid_t to, int64_t n, int64_t chunk)
{
    hsize_t ext = (hsize_t)n;
    if (n > 0 && H5Dset_extent(to, &ext) < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: extending a pool of the copy failed: %s", s->path,
                          peat_store_h5_msg());
    void *buf = NULL;
    peat_status st = PEAT_OK;
    for (int64_t k = 0; k * chunk < n && st == PEAT_OK; k++) {
        hsize_t off = (hsize_t)(k * chunk), bytes = 0;
        uint32_t filters = 0;
        void *nb = H5Dget_chunk_storage_size(from, &off, &bytes) < 0 || bytes == 0
                       ? NULL
                       : realloc(buf, (size_t)bytes);
        if (!nb) {
            st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s: chunk %lld of a pool is missing: %s", s->path,
                            (long long)k, peat_store_h5_msg());
            break;
        }
        buf = nb;
        if (H5Dread_chunk(from, H5P_DEFAULT, &off, &filters, buf) < 0 ||
            H5Dwrite_chunk(to, H5P_DEFAULT, filters, &off, (size_t)bytes, buf) < 0)
            st = PEAT_ERROR(PEAT_ERR_IO, "%s: copying chunk %lld of a pool failed: %s", s->path,
                            (long long)k, peat_store_h5_msg());
    }
    free(buf);
    return st;
}

/* Elements [0, n) of a raw pool, in blocks. */
static peat_status raw_copy(peat_store_t *s, peat_store_t *to, peat_dtype dt, int64_t n)
{
    size_t es = peat_dtype_size(dt);
    int64_t block = STORE_COPY_BLOCK_BYTES / (int64_t)es;
    void *buf = malloc((size_t)(n < block ? (n > 0 ? n : 1) : block) * es);
    if (!buf) return PEAT_ERROR(PEAT_ERR_NOMEM, "%s: copy buffer", s->path);
    hid_t mt = peat_store_pool_type(dt, 0);
    peat_status st = PEAT_OK;
    for (int64_t at = 0; at < n && st == PEAT_OK; at += block) {
        int64_t m = n - at < block ? n - at : block;
        st = peat_store_read_range(s, s->d_raw[dt], mt, at, m, buf, peat_store_raw_path(dt));
        if (st == PEAT_OK)
            st = peat_store_append(to, to->d_raw[dt], mt, at, m, buf, peat_store_raw_path(dt));
    }
    free(buf);
    return st;
}

/* Everything complete in s, written into the new file of `to`. */
static peat_status contents_copy(peat_store_t *s, peat_store_t *to)
{
    int64_t deflate_end[PEAT_DTYPE_COUNT], raw_end[PEAT_DTYPE_COUNT];
    peat_store_pool_ends(s, deflate_end, raw_end);
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++) {
        PEAT_TRY(chunks_copy(s, s->d_pool[d], to->d_pool[d], deflate_end[d], STORE_CHUNK_ELEMS));
        PEAT_TRY(raw_copy(s, to, (peat_dtype)d, raw_end[d]));
    }
    PEAT_TRY(chunks_copy(s, s->d_text, to->d_text, peat_store_text_end(s), STORE_TEXT_CHUNK));
    for (int t = 0; t < STORE_T_COUNT; t++)
        PEAT_TRY(peat_store_append(to, to->d_table[t], s->mt[t], 0, s->rows[t].n, s->rows[t].data,
                                   peat_store_table_path(t)));
    return PEAT_OK;
}

/* Whether path is an object of the layout this store writes (the rest, e.g. tables other
 * modules add with store_table.c, is copied as it is). */
static int layout_object(const char *path)
{
    for (int g = 0; g < STORE_N_GROUPS; g++)
        if (strcmp(path, peat_store_group_paths[g]) == 0) return 1;
    for (int t = 0; t < STORE_T_COUNT; t++)
        if (strcmp(path, peat_store_table_path(t)) == 0) return 1;
    for (int d = 0; d < PEAT_DTYPE_COUNT; d++)
        if (strcmp(path, peat_store_pool_path((peat_dtype)d)) == 0 ||
            strcmp(path, peat_store_raw_path((peat_dtype)d)) == 0)
            return 1;
    return strcmp(path, "/signatures/text") == 0;
}

typedef struct {
    hid_t from, to;
    const char *group;
    int bad;
} copy_ctx;

static herr_t other_copy(hid_t g, const char *name, const H5L_info_t *info, void *user);

/* A dataset copied by value: same type, shape and creation properties, data read and written
 * whole. (H5Ocopy of a chunked dataset out of a file open in SWMR read mode leaves pinned
 * metadata entries behind and the source file then fails to close under HDF5 1.10.) */
static int dataset_copy(hid_t from, hid_t to, const char *path)
{
    hid_t d = H5Dopen2(from, path, H5P_DEFAULT);
    hid_t ty = d >= 0 ? H5Dget_type(d) : -1, sp = d >= 0 ? H5Dget_space(d) : -1;
    hid_t dcpl = d >= 0 ? H5Dget_create_plist(d) : -1;
    hid_t o = ty >= 0 && sp >= 0 && dcpl >= 0 && peat_store_may_create(to)
                  ? H5Dcreate2(to, path, ty, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT)
                  : -1;
    hssize_t n = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    size_t bytes = n > 0 && ty >= 0 ? (size_t)n * H5Tget_size(ty) : 0;
    void *buf = bytes ? malloc(bytes) : NULL;
    int bad = o < 0 || n < 0 || (bytes && !buf);
    if (!bad && bytes)
        bad = H5Dread(d, ty, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0 ||
              H5Dwrite(o, ty, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0;
    free(buf);
    if (o >= 0) H5Dclose(o);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (sp >= 0) H5Sclose(sp);
    if (ty >= 0) H5Tclose(ty);
    if (d >= 0) H5Dclose(d);
    return bad;
}

/* An object not in the layout, into the same place of the new file: a group with everything in
 * it, or a dataset by value. */
static int object_copy(copy_ctx *c, const char *path)
{
    hid_t obj = H5Oopen(c->from, path, H5P_DEFAULT);
    if (obj < 0) return 1;
    H5I_type_t kind = H5Iget_type(obj);
    H5Oclose(obj);
    if (kind == H5I_DATASET) return dataset_copy(c->from, c->to, path);
    if (!peat_store_may_create(c->to)) return 1;
    if (kind != H5I_GROUP) return H5Ocopy(c->from, path, c->to, path, H5P_DEFAULT, H5P_DEFAULT) < 0;
    hid_t ng = H5Gcreate2(c->to, path, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (ng < 0) return 1;
    H5Gclose(ng);
    copy_ctx sub = {c->from, c->to, path, 0};
    return H5Literate_by_name(c->from, path, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, other_copy, &sub,
                              H5P_DEFAULT) < 0 ||
           sub.bad;
}

/* A link of one of the layout's groups (or the root) that is not part of the layout: the object
 * it names, copied whole into the same place of the new file. */
static herr_t other_copy(hid_t g, const char *name, const H5L_info_t *info, void *user)
{
    copy_ctx *c = user;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", strcmp(c->group, "/") ? c->group : "", name);
    (void)g;
    if (info->type != H5L_TYPE_HARD || layout_object(path)) return 0;
    if (object_copy(c, path)) c->bad = 1;
    return c->bad ? -1 : 0;
}

static peat_status others_copy(peat_store_t *s, peat_store_t *to)
{
    for (int g = -1; g < STORE_N_GROUPS; g++) {
        copy_ctx c = {s->file, to->file, g < 0 ? "/" : peat_store_group_paths[g], 0};
        if (H5Literate_by_name(s->file, c.group, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, other_copy,
                               &c, H5P_DEFAULT) < 0)
            return PEAT_ERROR(PEAT_ERR_IO, "%s: copying the other objects of %s failed: %s",
                              s->path, c.group, peat_store_h5_msg());
    }
    return PEAT_OK;
}

/* A new file at tmp with meta and everything complete in s, closed and locked (*lock_fd). */
static peat_status copy_build(peat_store_t *s, const peat_store_meta *meta, const char *tmp,
                              int *lock_fd)
{
    unlink(tmp); /* a copy killed before its rename or link leaves this behind */
    peat_store_t *to = peat_store_new(tmp);
    if (!to) return PEAT_ERROR(PEAT_ERR_NOMEM, "store");
    to->meta = *meta;
    peat_store_settings_from_meta(to);
    to->writable = 1;
    peat_status st = peat_store_file_create(to, tmp, 0);
    if (st == PEAT_OK) st = contents_copy(s, to);
    if (st == PEAT_OK) st = others_copy(s, to);
    /* the stage tables an older file lacks: the copy is in plain write mode, and the file then
     * opened for writing, in SWMR write mode, creates none */
    if (st == PEAT_OK) st = peat_store_stage_tables_create(to);
    if (st == PEAT_OK && H5Fflush(to->file, H5F_SCOPE_LOCAL) < 0)
        st = PEAT_ERROR(PEAT_ERR_IO, "%s: flush failed: %s", tmp, peat_store_h5_msg());
    if (peat_store_handles_close(to) < 0 && st == PEAT_OK)
        st = PEAT_ERROR(PEAT_ERR_IO, "%s: close failed: %s", tmp, peat_store_h5_msg());
    to->failed = 1;
    peat_store_close(to);
    /* locked before it takes its name: no other writer can open the new file in between */
    if (st == PEAT_OK) st = peat_store_lock_take(tmp, lock_fd);
    if (st != PEAT_OK) unlink(tmp);
    return st;
}

peat_status peat_store_rebuild(peat_store_t *s, int *lock_fd)
{
    *lock_fd = -1;
    char tmp[1100];
    if (snprintf(tmp, sizeof tmp, "%s.resume", s->path) >= (int)sizeof tmp)
        return PEAT_ERROR(PEAT_ERR_INVAL, "path too long: %s", s->path);
    peat_status st = copy_build(s, &s->meta, tmp, lock_fd);
    if (st == PEAT_OK && rename(tmp, s->path) != 0)
        st = PEAT_ERROR(PEAT_ERR_IO, "cannot replace %s: %s", s->path, strerror(errno));
    if (st != PEAT_OK) {
        peat_store_lock_release(*lock_fd);
        *lock_fd = -1;
        unlink(tmp);
    }
    return st;
}

peat_status peat_store_copy_create(const char *path, const peat_store_meta *meta, const char *seed,
                                   peat_store_t **out)
{
    char tmp[1100];
    if (snprintf(tmp, sizeof tmp, "%s.creating", path) >= (int)sizeof tmp)
        return PEAT_ERROR(PEAT_ERR_INVAL, "path too long: %s", path);
    peat_store_t *from = NULL;
    PEAT_TRY(peat_store_open_impl(seed, 0, -1, NULL, &from));
    int lock_fd = -1;
    peat_status st = copy_build(from, meta, tmp, &lock_fd);
    peat_store_close(from);
    /* link() refuses an existing name, so a file that appeared meanwhile is not replaced */
    if (st == PEAT_OK && link(tmp, path) != 0)
        st = PEAT_ERROR(PEAT_ERR_IO, "cannot create %s: %s", path,
                        errno == EEXIST ? "it exists (created meanwhile)" : strerror(errno));
    unlink(tmp);
    if (st != PEAT_OK) {
        peat_store_lock_release(lock_fd);
        return st;
    }
    return peat_store_open_impl(path, 1, lock_fd, NULL, out);
}
