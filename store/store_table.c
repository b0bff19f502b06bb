/* store_table.c: generic crash-safe tables of named columns in the campaign file (public HDF5
 * API only: one extendible chunked compound dataset per table, a check field per row). */
#include "store/store_impl.h"

#include <stdlib.h>
#include <string.h>

#define TABLE_CHUNK_ROWS 256
#define TABLE_MAX_COLS   32
#define CHECK_FIELD      "check"

struct peat_store_table {
    peat_store_t *s;
    hid_t d, mtype;
    int n_cols;
    char names[TABLE_MAX_COLS][64];
    peat_store_col cols[TABLE_MAX_COLS];
    size_t off[TABLE_MAX_COLS], check_off, row_size;
    unsigned char *rows; /* every complete row, in file order */
    int64_t n, cap;
};

/* FNV-1a over the row's fields, never 0 for a row of zeros: a chunk's fill value (a row
 * allocated by the extent but never written) or a torn write fails the check. */
static uint64_t row_check(const unsigned char *row, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ 0x7065617474626cull; /* "peattbl" */
    for (size_t i = 0; i < n; i++) h = (h ^ row[i]) * 0x100000001b3ull;
    return h ? h : 1;
}

static void layout(peat_store_table_t *t)
{
    size_t o = 0;
    for (int c = 0; c < t->n_cols; c++) {
        t->off[c] = o;
        o += t->cols[c].type == PEAT_STORE_COL_STR ? (size_t)t->cols[c].width : 8;
    }
    t->check_off = o;
    t->row_size = o + 8;
}

/* The compound type of a row (native layout, packed, strings as fixed NUL-terminated). */
static hid_t row_type(const peat_store_table_t *t)
{
    hid_t ty = H5Tcreate(H5T_COMPOUND, t->row_size);
    int bad = ty < 0;
    for (int c = 0; c < t->n_cols && !bad; c++) {
        hid_t m = t->cols[c].type == PEAT_STORE_COL_I64   ? H5Tcopy(H5T_NATIVE_INT64)
                  : t->cols[c].type == PEAT_STORE_COL_F64 ? H5Tcopy(H5T_NATIVE_DOUBLE)
                                                          : H5Tcopy(H5T_C_S1);
        if (m >= 0 && t->cols[c].type == PEAT_STORE_COL_STR)
            bad |= H5Tset_size(m, (size_t)t->cols[c].width) < 0 ||
                   H5Tset_strpad(m, H5T_STR_NULLTERM) < 0;
        bad |= m < 0 || H5Tinsert(ty, t->cols[c].name, t->off[c], m) < 0;
        if (m >= 0) H5Tclose(m);
    }
    if (!bad) bad = H5Tinsert(ty, CHECK_FIELD, t->check_off, H5T_NATIVE_UINT64) < 0;
    if (bad && ty >= 0) H5Tclose(ty), ty = -1;
    return ty;
}

static peat_status cols_set(peat_store_table_t *t, const peat_store_col *cols, int n)
{
    if (n < 1 || n > TABLE_MAX_COLS)
        return PEAT_ERROR(PEAT_ERR_INVAL, "table: %d columns (1..%d)", n, TABLE_MAX_COLS);
    t->n_cols = n;
    for (int c = 0; c < n; c++) {
        if (!cols[c].name || strlen(cols[c].name) >= sizeof t->names[c] ||
            !strcmp(cols[c].name, CHECK_FIELD) ||
            (cols[c].type == PEAT_STORE_COL_STR && (cols[c].width < 2 || cols[c].width > 4096)))
            return PEAT_ERROR(PEAT_ERR_INVAL, "table: column %d is malformed", c);
        snprintf(t->names[c], sizeof t->names[c], "%s", cols[c].name);
        t->cols[c] = cols[c];
        t->cols[c].name = t->names[c];
    }
    layout(t);
    return PEAT_OK;
}

/* The table's empty dataset at path, with the groups above it; closed again. Only where objects
 * may be created: a file not (yet) in SWMR write mode (store_schema.c). */
static peat_status dataset_make(peat_store_table_t *t, const char *path)
{
    hsize_t zero = 0, unlim = H5S_UNLIMITED, chunk = TABLE_CHUNK_ROWS;
    hid_t sp = H5Screate_simple(1, &zero, &unlim);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), lcpl = H5Pcreate(H5P_LINK_CREATE);
    int bad = !peat_store_may_create(t->s->file) || sp < 0 || dcpl < 0 || lcpl < 0 ||
              H5Pset_chunk(dcpl, 1, &chunk) < 0 || H5Pset_obj_track_times(dcpl, 0) < 0 ||
              H5Pset_create_intermediate_group(lcpl, 1) < 0;
    if (!bad) t->d = H5Dcreate2(t->s->file, path, t->mtype, sp, lcpl, dcpl, H5P_DEFAULT);
    if (lcpl >= 0) H5Pclose(lcpl);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (sp >= 0) H5Sclose(sp);
    if (bad || t->d < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: cannot create table %s: %s", t->s->path, path,
                          peat_store_h5_msg());
    return PEAT_OK;
}

/* A table of these columns (its row type made), not yet tied to a dataset: *out even on error
 * (NULL only without memory), for the caller to close. */
static peat_status table_new(peat_store_t *s, const char *path, const peat_store_col *cols, int n,
                             peat_store_table_t **out)
{
    peat_store_table_t *t = *out = calloc(1, sizeof *t);
    if (!t) return PEAT_ERROR(PEAT_ERR_NOMEM, "table");
    t->s = s;
    t->d = t->mtype = -1;
    PEAT_TRY(cols_set(t, cols, n));
    if ((t->mtype = row_type(t)) < 0)
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "table %s: row type: %s", path, peat_store_h5_msg());
    return PEAT_OK;
}

peat_status peat_store_table_make(peat_store_t *s, const char *path, const peat_store_col *cols,
                                  int n)
{
    peat_store_table_t *t = NULL;
    peat_status st = table_new(s, path, cols, n, &t);
    if (st == PEAT_OK) st = dataset_make(t, path);
    peat_store_table_close(t);
    return st;
}

/* The stored table must have exactly these columns, in this order, of these classes. */
static peat_status columns_match(peat_store_table_t *t, const char *path)
{
    hid_t ft = H5Dget_type(t->d);
    int nm = ft >= 0 ? H5Tget_nmembers(ft) : -1;
    peat_status st = nm == t->n_cols + 1
                         ? PEAT_OK
                         : PEAT_ERROR(PEAT_ERR_FORMAT, "%s: table %s has %d columns, expected %d",
                                      t->s->path, path, nm - 1, t->n_cols);
    for (int c = 0; c < t->n_cols && st == PEAT_OK; c++) {
        char *name = H5Tget_member_name(ft, (unsigned)c);
        H5T_class_t cl = H5Tget_member_class(ft, (unsigned)c);
        H5T_class_t want = t->cols[c].type == PEAT_STORE_COL_I64   ? H5T_INTEGER
                           : t->cols[c].type == PEAT_STORE_COL_F64 ? H5T_FLOAT
                                                                   : H5T_STRING;
        if (!name || strcmp(name, t->cols[c].name) || cl != want)
            st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s: table %s column %d is '%s', expected '%s'",
                            t->s->path, path, c, name ? name : "?", t->cols[c].name);
        if (name) H5free_memory(name);
    }
    if (ft >= 0) H5Tclose(ft);
    return st;
}

/* Reads every row back; the complete ones are the prefix that passes its check. */
static peat_status rows_load(peat_store_table_t *t)
{
    hid_t sp = H5Dget_space(t->d);
    hsize_t n = 0;
    if (sp < 0 || H5Sget_simple_extent_dims(sp, &n, NULL) < 0) {
        if (sp >= 0) H5Sclose(sp);
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: table extent unreadable", t->s->path);
    }
    H5Sclose(sp);
    t->cap = (int64_t)n + TABLE_CHUNK_ROWS;
    t->rows = calloc((size_t)t->cap, t->row_size);
    if (!t->rows) return PEAT_ERROR(PEAT_ERR_NOMEM, "table of %llu rows", (unsigned long long)n);
    if (n > 0 && H5Dread(t->d, t->mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->rows) < 0)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: table rows unreadable: %s", t->s->path,
                          peat_store_h5_msg());
    t->n = 0;
    while (t->n < (int64_t)n) {
        unsigned char *r = t->rows + (size_t)t->n * t->row_size;
        uint64_t c;
        memcpy(&c, r + t->check_off, 8);
        if (c != row_check(r, t->check_off)) break;
        t->n++;
    }
    return PEAT_OK;
}

/* HDF5 prints its error stack on stderr by default; a table's errors are returned as one line
 * (peat_store_h5_msg reads the stack), so its calls run with the printing off. */
static int link_exists(hid_t file, const char *path)
{
    htri_t r = -1;
    H5E_BEGIN_TRY
    {
        r = H5Lexists(file, path, H5P_DEFAULT);
    }
    H5E_END_TRY;
    return r > 0;
}

int peat_store_table_exists(peat_store_t *s, const char *path)
{
    /* each intermediate link must exist before the next is asked for */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        char c = *p;
        if (c != '/' && c != 0) continue;
        *p = 0;
        if (!link_exists(s->file, buf)) return 0;
        if (!c) return 1;
        *p = c;
    }
}

int peat_store_table_present(peat_store_t *s, const char *path)
{
    if (!peat_store_table_exists(s, path)) return 0;
    hid_t d = -1;
    int64_t n = -1;
    H5E_BEGIN_TRY
    {
        d = H5Dopen2(s->file, path, H5P_DEFAULT);
        n = d >= 0 ? peat_store_extent(d) : -1;
        if (d >= 0) H5Dclose(d);
    }
    H5E_END_TRY;
    return n != 0; /* unreadable: present, for its reader to report */
}

static peat_status table_open(peat_store_t *s, const char *path, const peat_store_col *cols,
                              int n_cols, peat_store_table_t **out);

peat_status peat_store_table_open(peat_store_t *s, const char *path, const peat_store_col *cols,
                                  int n_cols, peat_store_table_t **out)
{
    peat_status st = PEAT_OK;
    H5E_BEGIN_TRY
    {
        st = table_open(s, path, cols, n_cols, out);
    }
    H5E_END_TRY;
    return st;
}

static peat_status table_open(peat_store_t *s, const char *path, const peat_store_col *cols,
                              int n_cols, peat_store_table_t **out)
{
    *out = NULL;
    if (!s || !path || path[0] != '/' || strlen(path) >= 256)
        return PEAT_ERROR(PEAT_ERR_INVAL, "table: bad store or path");
    peat_store_table_t *t = NULL;
    peat_status st = table_new(s, path, cols, n_cols, &t);
    if (!t) return st;
    int exists = st == PEAT_OK && peat_store_table_exists(s, path);
    /* a writer creates none: in SWMR write mode HDF5 forbids new objects (store_schema.c) */
    if (st == PEAT_OK && !exists)
        st = PEAT_ERROR(PEAT_ERR_NOTFOUND, "%s holds no table %s%s", s->path, path,
                        s->writable ? " (tables are created with the file, not by its writers)"
                                    : "");
    else if (st == PEAT_OK) {
        t->d = H5Dopen2(s->file, path, H5P_DEFAULT);
        st = t->d >= 0 ? columns_match(t, path)
                       : PEAT_ERROR(PEAT_ERR_FORMAT, "%s: table %s unreadable", s->path, path);
    }
    if (st == PEAT_OK) st = rows_load(t);
    if (st != PEAT_OK) {
        peat_store_table_close(t);
        return st;
    }
    *out = t;
    return PEAT_OK;
}

int64_t peat_store_table_rows(const peat_store_table_t *t)
{
    return t ? t->n : 0;
}

/* Packs one row of values into r (zeroed first), with its check. */
static peat_status row_pack(const peat_store_table_t *t, const peat_store_value *v,
                            unsigned char *r)
{
    memset(r, 0, t->row_size);
    for (int c = 0; c < t->n_cols; c++) {
        if (t->cols[c].type == PEAT_STORE_COL_STR) {
            const char *s = v[c].s ? v[c].s : "";
            size_t len = strlen(s);
            if (len >= (size_t)t->cols[c].width)
                return PEAT_ERROR(PEAT_ERR_INVAL, "table: '%.40s...' is longer than column %s (%d)",
                                  s, t->cols[c].name, t->cols[c].width - 1);
            memcpy(r + t->off[c], s, len);
        } else {
            memcpy(r + t->off[c], &v[c], 8);
        }
    }
    uint64_t c = row_check(r, t->check_off);
    memcpy(r + t->check_off, &c, 8);
    return PEAT_OK;
}

static peat_status rows_write(peat_store_table_t *t, int64_t first, int64_t n)
{
    hsize_t ext = (hsize_t)(first + n), start = (hsize_t)first, count = (hsize_t)n;
    if (H5Dset_extent(t->d, &ext) < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: table extent: %s", t->s->path, peat_store_h5_msg());
    hid_t fs = H5Dget_space(t->d), ms = H5Screate_simple(1, &count, NULL);
    int bad =
        fs < 0 || ms < 0 ||
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL) < 0 ||
        H5Dwrite(t->d, t->mtype, ms, fs, H5P_DEFAULT, t->rows + (size_t)first * t->row_size) < 0;
    peat_status st = bad ? PEAT_ERROR(PEAT_ERR_IO, "%s: table write: %s", t->s->path,
                                      peat_store_h5_msg()) /* before H5Sclose clears the stack */
                         : PEAT_OK;
    if (ms >= 0) H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    if (bad) return st;
    /* durable against a kill of this process once the flush returns */
    PEAT_TRY(peat_store_room_check(t->s, t->s->file, t->s->path));
    if (H5Fflush(t->s->file, H5F_SCOPE_LOCAL) < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: flush failed: %s", t->s->path, peat_store_h5_msg());
    return PEAT_OK;
}

peat_status peat_store_table_append(peat_store_table_t *t, const peat_store_value *v, int64_t n)
{
    if (!t || n < 0) return PEAT_ERROR(PEAT_ERR_INVAL, "table append: bad arguments");
    PEAT_TRY(peat_store_check_writable(t->s));
    if (n == 0) return PEAT_OK;
    if (t->n + n > t->cap) {
        int64_t cap = (t->n + n) * 2;
        unsigned char *r = realloc(t->rows, (size_t)cap * t->row_size);
        if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "table rows");
        t->rows = r;
        t->cap = cap;
    }
    for (int64_t i = 0; i < n; i++)
        PEAT_TRY(row_pack(t, v + i * t->n_cols, t->rows + (size_t)(t->n + i) * t->row_size));
    peat_status st = PEAT_OK;
    H5E_BEGIN_TRY
    {
        st = rows_write(t, t->n, n);
    }
    H5E_END_TRY;
    if (st != PEAT_OK) peat_store_write_failed(t->s); /* a full disk leaves the file as it was */
    PEAT_TRY(st);
    t->n += n;
    return PEAT_OK;
}

peat_status peat_store_table_get(const peat_store_table_t *t, int64_t row, int col,
                                 peat_store_value *v)
{
    if (!t || row < 0 || row >= t->n || col < 0 || col >= t->n_cols)
        return PEAT_ERROR(PEAT_ERR_INVAL, "table get: row %lld col %d out of range", (long long)row,
                          col);
    const unsigned char *r = t->rows + (size_t)row * t->row_size + t->off[col];
    if (t->cols[col].type == PEAT_STORE_COL_STR)
        v->s = (const char *)r; /* NUL-terminated: packed with room for it */
    else
        memcpy(v, r, 8);
    return PEAT_OK;
}

void peat_store_table_close(peat_store_table_t *t)
{
    if (!t) return;
    if (t->d >= 0) H5Dclose(t->d);
    if (t->mtype >= 0) H5Tclose(t->mtype);
    free(t->rows);
    free(t);
}

/* The columns of a stored table as its file type lists them (the last member is its check). */
static peat_status cols_from_file(peat_store_t *s, hid_t d, const char *path, peat_store_col *cols,
                                  char (*names)[64], int *n)
{
    hid_t ft = H5Dget_type(d);
    int nm = ft >= 0 && H5Tget_class(ft) == H5T_COMPOUND ? H5Tget_nmembers(ft) : -1;
    peat_status st = nm >= 2 && nm - 1 <= TABLE_MAX_COLS
                         ? PEAT_OK
                         : PEAT_ERROR(PEAT_ERR_FORMAT, "%s: %s is not a table", s->path, path);
    for (int c = 0; c < nm - 1 && st == PEAT_OK; c++) {
        char *name = H5Tget_member_name(ft, (unsigned)c);
        hid_t mt = H5Tget_member_type(ft, (unsigned)c);
        H5T_class_t cl = mt >= 0 ? H5Tget_class(mt) : H5T_NO_CLASS;
        snprintf(names[c], 64, "%s", name ? name : "");
        cols[c].name = names[c];
        cols[c].type = cl == H5T_INTEGER ? PEAT_STORE_COL_I64
                       : cl == H5T_FLOAT ? PEAT_STORE_COL_F64
                                         : PEAT_STORE_COL_STR;
        cols[c].width = cl == H5T_STRING ? (int)H5Tget_size(mt) : 0;
        if (!name || (cl != H5T_INTEGER && cl != H5T_FLOAT && cl != H5T_STRING))
            st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s: %s column %d is of no table type", s->path, path,
                            c);
        if (mt >= 0) H5Tclose(mt);
        if (name) H5free_memory(name);
    }
    if (ft >= 0) H5Tclose(ft);
    *n = nm - 1;
    return st;
}

peat_status peat_store_table_scan(peat_store_t *s, const char *path, int64_t upto, int64_t *rows,
                                  uint64_t *digest)
{
    peat_store_col cols[TABLE_MAX_COLS];
    char names[TABLE_MAX_COLS][64];
    int n = 0;
    hid_t d = -1;
    peat_status st = PEAT_OK;
    H5E_BEGIN_TRY
    {
        d = H5Dopen2(s->file, path, H5P_DEFAULT);
        st = d >= 0 ? cols_from_file(s, d, path, cols, names, &n)
                    : PEAT_ERROR(PEAT_ERR_FORMAT, "%s: table %s unreadable", s->path, path);
        if (d >= 0) H5Dclose(d);
    }
    H5E_END_TRY;
    peat_store_table_t *t = NULL;
    if (st == PEAT_OK) st = peat_store_table_open(s, path, cols, n, &t);
    if (st != PEAT_OK) return st;
    *rows = t->n;
    *digest = 0;
    for (int64_t i = 0; i < t->n && i < upto; i++) {
        uint64_t c;
        memcpy(&c, t->rows + (size_t)i * t->row_size + t->check_off, 8);
        *digest = peat_store_hash64(&c, 8, *digest);
    }
    peat_store_table_close(t);
    return PEAT_OK;
}
