/* store_impl.h: internals of the campaign store shared by its files (rows, handles, helpers). */
#ifndef PEAT_STORE_IMPL_H
#define PEAT_STORE_IMPL_H

#include <hdf5.h>
#include <zlib.h>

#include "store/store.h"

/* Elements per chunk of every compressed tensor pool (128 KiB of f32): zlib's level-1 window is
 * 32 KiB, so larger chunks hardly compress better, and a record's last chunk is padded with
 * zeros that deflate codes in a few bytes. */
#define STORE_CHUNK_ELEMS 32768
#define STORE_TEXT_CHUNK  65536
/* Bytes per chunk of the unfiltered datasets (raw pools, index tables). HDF5 writes a chunk
 * whole when it flushes it, and the store flushes once per record, so a chunk's size is also
 * what one record costs at least to write (a raw pool chunk of 256 KiB made mlp's 14 KiB
 * records write 256 KiB each); the last chunk of each is allocated whole. */
#define STORE_RAW_CHUNK_BYTES   65536
#define STORE_TABLE_CHUNK_BYTES 16384
/* A tensor goes to the compressed pool of its dtype when the estimate says shuffle + deflate
 * saves at least the file's min_saving_pct (PEAT_STORE_MIN_SAVING_PCT_DEFAULT) of its bytes and
 * at least this many bytes; the rest is written uncompressed. */
#define STORE_COMPRESS_MIN_SAVED 4096
/* Smaller tensors are not even considered: compressing a few KiB saves less than it costs. */
#define STORE_COMPRESS_MIN_BYTES 32768
/* Metadata reads HDF5 tries before it gives up on a checksum that does not match. HDF5 retries
 * (100 times, with growing pauses) for SWMR readers racing a writer; on a damaged file that is a
 * hang. A file no process writes is read once; a live writer's file gets a few tries. */
#define STORE_READ_ATTEMPTS_LIVE 4

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "row checksums are computed over little-endian rows as the file holds them"
#endif

/* ---- rows of the index tables: laid out without padding so the row checksum covers only
 * field bytes; `check` (last) is a hash of the rest, so a fill-value or torn row never passes ----
 */

typedef struct store_tensor_row {
    int64_t offset; /* first element in the pool of its dtype */
    int64_t numel;
    int64_t shape[PEAT_MAX_DIMS];
    uint64_t hash; /* content hash of dtype, shape and bytes */
    int32_t dtype;
    int16_t ndim;
    int16_t pool; /* STORE_POOL_DEFLATE or STORE_POOL_RAW */
    uint64_t check;
} store_tensor_row;

enum { STORE_POOL_DEFLATE = 0, STORE_POOL_RAW = 1 };

typedef struct store_call_row {
    uint64_t id;
    uint64_t seed;
    int64_t seq;     /* global record sequence number (all record kinds) */
    int64_t t_first; /* tensor rows before this record: its new tensors are >= t_first */
    int64_t iter, call_index, op_call_index;
    int64_t pi[PEAT_PARAM_I];
    double pf[PEAT_PARAM_F];
    int64_t t_in[PEAT_MAX_IO], t_golden[PEAT_MAX_IO], t_exact[PEAT_MAX_IO]; /* -1: none */
    int32_t op, phase, n_in, n_out;
    char flow[32], layer[64], golden_kernel[64], exact_kernel[64];
    uint64_t check;
} store_call_row;

typedef struct store_state_row {
    int64_t seq, t_first, iter, tensor;
    int32_t index, count; /* position in its snapshot, tensors in the snapshot */
    char tag[32], name[64];
    uint64_t check;
} store_state_row;

typedef struct store_metric_row {
    int64_t seq, iter;
    double loss, accuracy;
    uint64_t check;
} store_metric_row;

typedef struct store_sig_row {
    int64_t seq, text_offset, text_len;
    uint64_t text_hash;
    char kernel[64];
    uint64_t check;
} store_sig_row;

enum { STORE_T_TENSOR, STORE_T_CALL, STORE_T_STATE, STORE_T_METRIC, STORE_T_SIG, STORE_T_COUNT };

/* A growable array of rows. */
typedef struct store_vec {
    void *data;
    int64_t n, cap;
    size_t elem;
} store_vec;

/* Open-addressing multimap uint64 -> int64 (keys may repeat: dedup hashes collide). */
typedef struct store_map {
    uint64_t *keys;
    int64_t *vals; /* -1 = empty slot */
    int64_t cap, n;
} store_map;

/* Compresses chunks as HDF5's shuffle and deflate filters store them (zlib). */
typedef struct store_codec {
    z_stream z;
    int ready, level;
    unsigned char *in, *shuf, *out; /* one chunk, its shuffled bytes, the compressed stream */
    size_t out_cap;
} store_codec;

struct peat_store {
    char path[1024];
    hid_t file; /* the open HDF5 file: other modules' tables (store_table.c) live in it too */
    hid_t d_table[STORE_T_COUNT];
    hid_t d_pool[PEAT_DTYPE_COUNT]; /* compressed pools (shuffle + deflate) */
    hid_t d_raw[PEAT_DTYPE_COUNT];  /* uncompressed pools */
    int schema_version;             /* the file's (a reader takes older ones too) */
    hid_t d_text;
    hid_t mt[STORE_T_COUNT]; /* memory compound types of the rows */
    int writable;
    int failed;  /* a write failed half-way: further writes are refused */
    int abandon; /* the device refused a write (full disk, file-size limit): HDF5's handles are
                    left open at close, so nothing more is written and the file stays as its
                    last flush left it, resumable as a killed writer's */
    int crashed; /* opened after its writer was killed (or while it still runs) */
    int lock_fd; /* holds the writer's lock (OFD) while writable */
    int h5_fd;   /* HDF5's descriptor of the file (closed in forked children), -1 if none */
    peat_store_meta meta;
    int64_t exact_max;
    int deflate;
    int min_saving_pct;                 /* < 0: compress every tensor */
    store_vec rows[STORE_T_COUNT];      /* every row, in file order (the tail may be uncommitted) */
    int64_t disk_rows[STORE_T_COUNT];   /* rows written to the file */
    int64_t pool_len[PEAT_DTYPE_COUNT]; /* extent of each compressed pool */
    int64_t raw_len[PEAT_DTYPE_COUNT];  /* extent of each raw pool */
    int64_t text_len;
    int64_t seq_next;
    int64_t dropped;
    store_map ids;   /* call id -> call row */
    store_map dedup; /* tensor content hash -> tensor row */
    /* tensors of the record being written: staged by peat_store_tensor_put, written by commit */
    struct store_staged {
        int64_t row;
        const peat_tensor *t;
    } * staged;
    int64_t n_staged, cap_staged;
    int64_t pool_start[PEAT_DTYPE_COUNT]; /* where this record's data begins (chunk-aligned) */
    int64_t pool_stage[PEAT_DTYPE_COUNT]; /* elements staged for this record */
    int64_t raw_stage[PEAT_DTYPE_COUNT];  /* elements staged for the raw pools */
    store_codec codec;
};

/* Runs expr (a peat_status expression) with HDF5's automatic error printing off (errors come
 * back as one line through PEAT_ERROR) and counts the time as the store's. Every public entry
 * point of the store runs its body this way; nothing silences HDF5 for the rest of the process.
 */
#define STORE_GUARDED(st, expr)                                                                    \
    do {                                                                                           \
        double store_t0_ = peat_store_busy_begin();                                                \
        H5E_BEGIN_TRY                                                                              \
        {                                                                                          \
            (st) = (expr);                                                                         \
        }                                                                                          \
        H5E_END_TRY;                                                                               \
        peat_store_busy_end(store_t0_);                                                            \
    } while (0)
double peat_store_busy_begin(void);
void peat_store_busy_end(double t0);

/* store_hash.c */
uint64_t peat_store_hash64(const void *data, size_t n, uint64_t seed);
uint64_t peat_store_tensor_hash(const peat_tensor *t);
uint64_t peat_store_row_check(int table, const void *row, size_t size);

/* x rounded up to a multiple of m (chunk boundaries). */
static inline int64_t store_round_up(int64_t x, int64_t m)
{
    return (x + m - 1) / m * m;
}

/* store_util.c */
peat_status peat_store_vec_push(store_vec *v, const void *item);
void peat_store_vec_free(store_vec *v);
#define STORE_ROW(s, table, type, i) (&((type *)(s)->rows[table].data)[i])
peat_status peat_store_map_put(store_map *m, uint64_t key, int64_t val);
/* Iterates the values stored under key: start with *cursor = -1; returns 0 when done. */
int peat_store_map_next(const store_map *m, uint64_t key, int64_t *cursor, int64_t *val);
void peat_store_map_free(store_map *m);
/* Copies a string into a fixed field, refusing (PEAT_ERR_INVAL) what does not fit. */
peat_status peat_store_str_field(char *dst, size_t n, const char *src, const char *what);
/* The innermost message of HDF5's error stack (for one-line errors), "" if none. Call it right
 * after the failing HDF5 call: the next call clears the stack. */
const char *peat_store_h5_msg(void);
/* The errno an HDF5 file driver reported on the error stack ("errno = 28, ..."; 0 when none):
 * ENOSPC and EFBIG are said as such by peat_store_h5_msg, and mark the store to be abandoned. */
int peat_store_h5_errno(void);
/* After a failed write: a device that refused it (ENOSPC, EFBIG) marks s->abandon. */
void peat_store_write_failed(peat_store_t *s);
/* Before a flush of file (named path): refused with one line naming the file and the cause when
 * what HDF5 allocated would pass the file-size limit or the filesystem's free space; the store
 * is then abandoned (store_room.c). */
peat_status peat_store_room_check(peat_store_t *s, hid_t file, const char *path);
/* Called before each file is opened; does nothing: STORE_GUARDED has turned HDF5's printing of
 * error stacks off for the call (every error reaches the user as one line, peat_store_h5_msg gives
 * the innermost cause) and restores the handler it found, a host program's own included. */
void peat_store_h5_quiet(void);
/* Counts a step of the write path and calls the test hook if one is set (store_test.h); nothing
 * in a build without PEAT_TEST_HOOKS. */
#ifdef PEAT_TEST_HOOKS
void peat_store_step(peat_store_t *s);
#else
static inline void peat_store_step(peat_store_t *s)
{
    (void)s;
}
#endif

/* store_types.c: compound types of the rows (memory layout; file layout is little-endian). The
 * coded columns (op, phase, dtype, pool) are HDF5 enumerations in both since schema version 4;
 * STORE_LAYOUT_PLAIN reads them as the plain integers a schema-3 file holds. */
enum { STORE_LAYOUT_MEMORY = 0, STORE_LAYOUT_FILE = 1, STORE_LAYOUT_PLAIN = 2 };
hid_t peat_store_row_type(int table, int file_layout);
const char *peat_store_table_path(int table);
const char *peat_store_pool_path(peat_dtype t);
const char *peat_store_raw_path(peat_dtype t);
hid_t peat_store_pool_type(peat_dtype t, int file_layout);
size_t peat_store_row_size(int table);
/* Rows per chunk of an index table (STORE_TABLE_CHUNK_BYTES of rows, at least 16). */
int64_t peat_store_table_chunk_rows(int table);
/* Elements per chunk of the raw pool of dtype t. */
int64_t peat_store_raw_chunk_elems(peat_dtype t);

/* store_chunk.c: one chunk as HDF5's shuffle (elsize > 1) + deflate filters store it: the
 * nvalid elements at src, zeros up to nelem. The result is in c->out. */
peat_status peat_store_chunk_compress(store_codec *c, const void *src, size_t nvalid, size_t nelem,
                                      size_t elsize, int level, size_t *len);
/* Allocates c->in (one chunk of any pool) and the other buffers, once. */
peat_status peat_store_codec_buffers(store_codec *c);
void peat_store_codec_free(store_codec *c);
/* Bytes shuffle + deflate would leave of t, estimated from samples of its byte planes. */
double peat_store_deflate_estimate(const peat_tensor *t);

/* Every object-creation site of the store asks this first, with the file (or an object of it)
 * the object goes into: 0 when that file is in SWMR write mode, where HDF5's SWMR contract
 * forbids creating groups, datasets, named datatypes and attributes (the attempt is counted,
 * peat_store_test_swmr_creates in store_test.h), else 1. */
int peat_store_may_create(hid_t loc);

/* store_schema.c: the stage tables every file is created with */
extern const peat_store_col peat_store_manifest_cols[7];
/* Creates the stage tables (and their described groups) the file lacks: only in a file that is
 * not in SWMR write mode (creation, a rebuild's copy). */
peat_status peat_store_stage_tables_create(peat_store_t *s);
/* Whether the file has every stage table (a writer of an older file that lacks some rebuilds). */
int peat_store_stage_tables_complete(peat_store_t *s);
/* store_table.c: an empty table's dataset at path (groups created as needed), closed. */
peat_status peat_store_table_make(peat_store_t *s, const char *path, const peat_store_col *cols,
                                  int n);

/* store_file.c: shared by creating and opening */
#define STORE_N_GROUPS 6
extern const char *const peat_store_group_paths[STORE_N_GROUPS];
extern const char *const peat_store_group_docs[STORE_N_GROUPS];
int peat_store_attr_write(hid_t loc, const char *name, hid_t type, const void *val);
int peat_store_attr_str(hid_t loc, const char *name, const char *val);
/* 1 = read, 0 = absent, -1 = present but unreadable or of another type. */
int peat_store_attr_str_read(hid_t loc, const char *name, char *buf, size_t n);
int peat_store_attr_num_read(hid_t loc, const char *name, hid_t memtype, void *val);
/* The writer lock: PEAT_ERR_IO if another process writes the file. */
peat_status peat_store_lock_take(const char *path, int *fd_out);
/* Closes a lock taken by peat_store_lock_take (-1: nothing). */
void peat_store_lock_release(int fd);
/* Marks HDF5's descriptor of s->file as one forked children close (core/child_fds.h). */
void peat_store_h5_fd_hold(peat_store_t *s);
/* Whether another process holds the writer lock of path (a live writer). */
int peat_store_lock_held(const char *path);
peat_store_t *peat_store_new(const char *path);
/* File access list: the 1.10 format (SWMR needs it), read_attempts metadata reads. */
hid_t peat_store_fapl(unsigned read_attempts);
void peat_store_settings_from_meta(peat_store_t *s);
/* Sets a 1-D dataset's extent to n. */
peat_status peat_store_extend(peat_store_t *s, hid_t d, int64_t n, const char *what);
/* Writes n elements of memtype from buf at at (within the extent). */
peat_status peat_store_write_at(peat_store_t *s, hid_t d, hid_t memtype, int64_t at, int64_t n,
                                const void *buf, const char *what);
/* peat_store_extend to at + n, then peat_store_write_at. */
peat_status peat_store_append(peat_store_t *s, hid_t d, hid_t memtype, int64_t at, int64_t n,
                              const void *buf, const char *what);
/* Reads count elements at offset of a 1-D dataset into buf. */
peat_status peat_store_read_range(peat_store_t *s, hid_t d, hid_t memtype, int64_t offset,
                                  int64_t count, void *buf, const char *what);
/* Extent of a 1-D dataset, -1 if it is not one. */
int64_t peat_store_extent(hid_t d);
/* Writes rows [disk_rows, disk_rows + n) of a table (already in s->rows) to the file. */
peat_status peat_store_table_rows_append(peat_store_t *s, int table, int64_t n);
/* Makes everything written so far durable against a kill of this process. */
peat_status peat_store_flush(peat_store_t *s);
/* Refuses writes on a read-only or failed store. */
peat_status peat_store_check_writable(const peat_store_t *s);
/* Closes the datasets and the file (-1 if closing the file failed). */
int peat_store_handles_close(peat_store_t *s);

/* store_create.c: a file with the whole layout, in SWMR write mode, flushed (s->meta set). */
/* Creates path with the layout of the records; swmr: the stage tables too, then SWMR write mode
 * (a new campaign file); else flushed in plain write mode (a rebuild's copy, which adds objects
 * and is closed before it takes the campaign's name). */
peat_status peat_store_file_create(peat_store_t *s, const char *path, int swmr);

/* store_open.c */
/* Opens path; lock_fd >= 0 is a writer lock already held on it (after a rebuild); verify (a
 * writable open only): every record is checked against its hashes first (peat_store_resume_verify).
 */
peat_status peat_store_open_impl(const char *path, int writable, int lock_fd,
                                 peat_store_resume_info *verify, peat_store_t **out);
peat_status peat_store_datasets_open(peat_store_t *s);
peat_status peat_store_tables_load(peat_store_t *s);

/* store_recover.c: validate rows, drop an unfinished trailing record; build the maps. */
peat_status peat_store_recover(peat_store_t *s);
peat_status peat_store_index_build(peat_store_t *s);
/* Keeps only the records with sequence numbers below seq (and the tensors they refer to), as if
 * the writer had been killed before record seq: the store is then untidy and gets rebuilt. */
void peat_store_truncate(peat_store_t *s, int64_t seq);
/* The end (in elements) of the last tensor of each compressed and raw pool. */
void peat_store_pool_ends(const peat_store_t *s, int64_t deflate_end[PEAT_DTYPE_COUNT],
                          int64_t raw_end[PEAT_DTYPE_COUNT]);
/* The end of the last signature's text. */
int64_t peat_store_text_end(const peat_store_t *s);
/* Whether every table and pool ends exactly at the last complete record (a writer may append). */
int peat_store_tidy(const peat_store_t *s);

/* store_table.c: rows of the table at path that pass their check (*rows), and an XXH64 chain of
 * the checks of the first upto of them (*digest): any table, its columns read from the file. */
peat_status peat_store_table_scan(peat_store_t *s, const char *path, int64_t upto, int64_t *rows,
                                  uint64_t *digest);

/* store_manifest.c: formats one problem line for fn and counts it in out->problems. */
void peat_store_report(peat_store_report_fn fn, void *user, peat_store_check *out, const char *fmt,
                       ...) __attribute__((format(printf, 4, 5)));

/* store_verify.c: reads every record back against its hashes; drops the first damaged one and
 * every later one (peat_store_truncate), saying so in info. */
peat_status peat_store_resume_verify(peat_store_t *s, peat_store_resume_info *info);

/* store_rebuild.c: for writing a file whose writer was killed: its complete records copied into
 * a new file that replaces it (lock held on the new file, returned in *lock_fd). */
peat_status peat_store_rebuild(peat_store_t *s, int *lock_fd);
/* peat_store_create_from's work: seed's complete contents into a new file at path with meta. */
peat_status peat_store_copy_create(const char *path, const peat_store_meta *meta, const char *seed,
                                   peat_store_t **out);

/* store_tensor.c */
/* Starts the tensors of a new record (aligns every pool's next data to a chunk boundary). */
void peat_store_tensors_begin(peat_store_t *s);
/* Stores t (or finds an identical stored tensor): *row = tensor row. New rows are appended to
 * the in-memory table and staged; peat_store_tensors_commit writes their data and rows. */
peat_status peat_store_tensor_put(peat_store_t *s, const peat_tensor *t, int64_t *row);
peat_status peat_store_tensors_commit(peat_store_t *s, int64_t t_first);
peat_status peat_store_tensor_read(peat_store_t *s, int64_t row, peat_tensor **out);
/* Verifies a stored tensor's bytes against its hash (PEAT_ERR_FORMAT if they differ). */
peat_status peat_store_tensor_verify(peat_store_t *s, int64_t row);
peat_status peat_store_text_write(peat_store_t *s, const char *text, int64_t len, int64_t *offset);
peat_status peat_store_text_read(peat_store_t *s, int64_t offset, int64_t len, char **out);

#endif
