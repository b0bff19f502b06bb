/* store_impl.h: internals of the campaign store shared by its files (rows, handles, helpers). */
#ifndef PEAT_STORE_IMPL_H
#define PEAT_STORE_IMPL_H

#include <hdf5.h>
#include <pthread.h>
#include <sys/uio.h>
#include <zlib.h>

#include "store/store.h"

/* Elements per chunk of every compressed tensor pool (128 KiB of f32): a Huffman table per byte
 * plane is built per chunk, so larger chunks build fewer (8192 cost ~15% more time); the zero
 * padding after a record's data is coded as runs of copies and costs a few bytes. */
#define STORE_CHUNK_ELEMS 32768
#define STORE_TEXT_CHUNK  65536
/* Bytes per chunk of the preallocated, unfiltered datasets written in place (the raw pools and
 * the index tables, docs/hdf5-schema.md "storage settings"): small enough that the unused tail
 * of the last chunk costs little, large enough that growing (an extent change, a flush and an
 * address lookup, ~30 us) is rare; 64 KiB raw chunks spent 2 ms of gpt's 12 ms in lookups. */
#define STORE_RAW_CHUNK_BYTES   262144
#define STORE_TABLE_CHUNK_BYTES 16384
/* A tensor goes to the compressed pool of its dtype when the estimate says shuffle + deflate
 * saves at least the file's min_saving_pct (PEAT_STORE_MIN_SAVING_PCT_DEFAULT) of its bytes and
 * at least this many bytes; the rest is written uncompressed, in place. */
#define STORE_COMPRESS_MIN_SAVED 4096
/* Smaller tensors are not even considered: a compressed record costs an HDF5 flush (~20 us),
 * more than writing a few KiB it could save. */
#define STORE_COMPRESS_MIN_BYTES 32768

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the store writes rows and raw tensors in place as little-endian bytes"
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

/* A deflate stream reused for every chunk. */
typedef struct store_codec {
    z_stream z;
    int ready, level, strategy;
    uLong adler;
} store_codec;

/* One chunk to encode, or one byte plane of a float chunk (plane >= 0). */
typedef struct store_job {
    const unsigned char *src;
    size_t nelem, nvalid, elsize;
    int is_float, level;
    int plane;      /* -1: the whole chunk */
    uint32_t adler; /* of the plane (plane jobs) */
    unsigned char *out;
    size_t out_cap, out_len;
    peat_status st;
    char msg[256];
} store_job;

/* Helper threads that encode chunks; participant 0 is the calling thread. */
typedef struct store_workers {
    int parts, n_threads, sync_ready, stop;
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;
    store_job *jobs;
    int n_jobs, next, finished;
    store_job *inline_jobs; /* begun without helpers: run by store_workers_end */
    int inline_n;
    store_codec *codec;
    unsigned char **shuf;
} store_workers;

/* A preallocated, unfiltered 1-D dataset written in place: its chunks are allocated when the
 * extent grows (H5D_ALLOC_TIME_EARLY), their file addresses are looked up once, and data goes to
 * them with pwrite, so appending changes no HDF5 metadata and needs no HDF5 flush. */
typedef struct store_space {
    hid_t d;        /* the dataset (owned by the store's handle arrays) */
    size_t elsize;  /* bytes per element */
    int64_t chunk;  /* elements per chunk */
    int64_t cap;    /* extent: elements allocated */
    haddr_t *addr;  /* file address of chunk k, HADDR_UNDEF until looked up */
    int64_t n_addr; /* entries of addr */
    const char *what;
} store_space;

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

struct peat_store {
    char path[1024];
    hid_t file;
    hid_t d_table[STORE_T_COUNT];
    hid_t d_pool[PEAT_DTYPE_COUNT]; /* compressed pools (shuffle + deflate) */
    hid_t d_raw[PEAT_DTYPE_COUNT];  /* uncompressed pools, written in place */
    hid_t d_text;
    hid_t mt[STORE_T_COUNT]; /* memory compound types of the rows */
    int writable;
    int failed;  /* a write failed half-way: further writes are refused */
    int crashed; /* opened after its writer was killed */
    int lock_fd; /* holds the writer's lock (OFD) while writable */
    int data_fd; /* pread/pwrite of the in-place datasets: lock_fd, or a read-only descriptor */
    peat_store_meta meta;
    int64_t exact_max;
    int deflate;
    int min_saving_pct; /* < 0: compress every tensor; > 100: none */
    int meta_dirty;     /* HDF5 metadata changed since the last flush */
    uint64_t base_addr; /* HDF5 addresses are relative to this file offset (0 without user block) */
    store_vec rows[STORE_T_COUNT];      /* every row, in file order (the tail may be uncommitted) */
    int64_t disk_rows[STORE_T_COUNT];   /* rows written to the file */
    int64_t pool_len[PEAT_DTYPE_COUNT]; /* extent of each compressed pool */
    int64_t raw_len[PEAT_DTYPE_COUNT]; /* elements used in each raw pool (its extent may be more) */
    store_space tab[STORE_T_COUNT];    /* the index tables */
    store_space raw[PEAT_DTYPE_COUNT]; /* the raw pools */
    int64_t text_len;
    int64_t seq_next;
    int64_t dropped;
    store_map ids;   /* call id -> call row */
    store_map dedup; /* tensor content hash -> tensor row */
    /* tensors of the record being written: staged by store_tensor_put, written by commit */
    struct store_staged {
        int64_t row;
        const peat_tensor *t;
    } * staged;
    int64_t n_staged, cap_staged;
    int64_t pool_start[PEAT_DTYPE_COUNT]; /* where this record's data begins (chunk-aligned) */
    int64_t pool_stage[PEAT_DTYPE_COUNT]; /* elements staged for this record */
    int64_t raw_stage[PEAT_DTYPE_COUNT];  /* elements staged for the raw pools */
    /* chunk encoding: a batch of chunks gathered, encoded in parallel, written in order */
    store_workers workers;
    int workers_on;
    store_job *batch, *pjobs; /* chunks; the jobs they are split into (a plane each) */
    unsigned char *batch_raw, *batch_out, *plane_out;
    size_t chunk_out_cap;
};

/* Chunks per batch (per participant: keeps every core busy while the writes stay in order). */
#define STORE_BATCH_PER_PART 4
/* Output room of one encoded plane: a Huffman block is kept only when smaller than the plane,
 * but is written into room for 2 bytes a symbol first (its 8-byte stores need slack). */
#define STORE_PLANE_CAP (2 * STORE_CHUNK_ELEMS + 1024)
/* A batch smaller than this is encoded on the calling thread alone. */
#define STORE_PARALLEL_MIN_BYTES (64 * 1024)

/* store_hash.c */
uint64_t store_hash64(const void *data, size_t n, uint64_t seed);
uint64_t store_tensor_hash(const peat_tensor *t);
uint64_t store_row_check(int table, const void *row, size_t size);

/* x rounded up to a multiple of m (chunk boundaries). */
static inline int64_t store_round_up(int64_t x, int64_t m)
{
    return (x + m - 1) / m * m;
}

/* store_util.c */
peat_status store_vec_push(store_vec *v, const void *item);
void store_vec_free(store_vec *v);
#define STORE_ROW(s, table, type, i) (&((type *)(s)->rows[table].data)[i])
peat_status store_map_put(store_map *m, uint64_t key, int64_t val);
/* Iterates the values stored under key: start with *cursor = -1; returns 0 when done. */
int store_map_next(const store_map *m, uint64_t key, int64_t *cursor, int64_t *val);
void store_map_free(store_map *m);
/* Copies a string into a fixed field, refusing (PEAT_ERR_INVAL) what does not fit. */
peat_status store_str_field(char *dst, size_t n, const char *src, const char *what);
/* The innermost message of HDF5's error stack (for one-line errors), "" if none. */
const char *store_h5_msg(void);
/* Counts a step of the write path; raises SIGKILL at the step set by peat_store_debug_kill_at. */
void store_step(peat_store_t *s);

/* store_types.c: compound types of the rows (memory layout; file layout is little-endian). */
hid_t store_row_type(int table, int file_layout);
const char *store_table_path(int table);
const char *store_pool_path(peat_dtype t);
const char *store_raw_path(peat_dtype t);
hid_t store_pool_type(peat_dtype t, int file_layout);
size_t store_row_size(int table);
/* Rows per chunk of an index table (STORE_TABLE_CHUNK_BYTES of rows, at least 16). */
int64_t store_table_chunk_rows(int table);

/* store_codec.c: one chunk as HDF5's shuffle+deflate pipeline stores it. The first nvalid
 * elements of src are data; the rest of the chunk is encoded as zeros. */
peat_status store_chunk_encode(store_codec *c, const void *src, size_t nelem, size_t nvalid,
                               size_t elsize, int is_float, int level, unsigned char *shuf,
                               unsigned char *dst, size_t dst_cap, size_t *dst_len);
void store_codec_free(store_codec *c);
/* Byte plane `plane` of a float chunk as deflate blocks ending on a byte boundary (no zlib header
 * or trailer), and the Adler-32 of the plane's nelem bytes; scratch holds nelem bytes. */
peat_status store_plane_encode(const unsigned char *src, size_t nelem, size_t nvalid, size_t elsize,
                               size_t plane, int level, unsigned char *scratch, unsigned char *dst,
                               size_t dst_cap, size_t *dst_len, uint32_t *adler);
/* Joins encoded planes (each part_bytes long uncompressed) into one zlib stream at dst; parts may
 * lie inside dst already, in order. */
peat_status store_chunk_join(unsigned char *const *parts, const size_t *lens,
                             const uint32_t *adlers, size_t n_parts, size_t part_bytes,
                             unsigned char *dst, size_t dst_cap, size_t *dst_len);
/* Bytes shuffle + deflate would leave of t, estimated from samples of its byte planes. */
double store_deflate_estimate(const peat_tensor *t);

/* store_workers.c: PEAT_STORE_THREADS (default: online CPUs, at most 8) participants. A store
 * must not be used in a child forked while it is open (the helpers are not in the child). */
peat_status store_workers_start(store_workers *w, size_t shuf_bytes);
void store_workers_stop(store_workers *w);
/* Starts the helpers on the jobs when parallel is set (else store_workers_end runs them here: a
 * few small jobs finish before a helper would wake up); the caller does other work meanwhile (no
 * HDF5 calls happen on the helpers), then store_workers_end joins in and waits. */
void store_workers_begin(store_workers *w, store_job *jobs, int n_jobs, int parallel);
peat_status store_workers_end(store_workers *w);

/* store_file.c: shared by creating and opening */
#define STORE_N_GROUPS 6
extern const char *const store_group_paths[STORE_N_GROUPS];
extern const char *const store_group_docs[STORE_N_GROUPS];
int store_attr_write(hid_t loc, const char *name, hid_t type, const void *val);
int store_attr_str(hid_t loc, const char *name, const char *val);
/* 1 = read, 0 = absent, -1 = present but unreadable or of another type. */
int store_attr_str_read(hid_t loc, const char *name, char *buf, size_t n);
int store_attr_num_read(hid_t loc, const char *name, hid_t memtype, void *val);
/* The writer lock: PEAT_ERR_IO if another process writes the file. */
peat_status store_lock_take(const char *path, int *fd_out);
peat_store_t *store_alloc(const char *path);
/* File access list of the 1.10 format (SWMR needs it). */
hid_t store_fapl_latest(void);
void store_settings_from_meta(peat_store_t *s);
/* Writes rows [disk_rows, disk_rows + n) of a table (already in s->rows) to the file. */
peat_status store_table_append(peat_store_t *s, int table, int64_t n);
/* Makes everything written so far durable against a kill of this process. */
peat_status store_flush(peat_store_t *s);
/* store_flush if HDF5 metadata changed since the last one (data and rows written in place
 * need none: they are in the kernel's page cache once pwrite returns). */
peat_status store_sync(peat_store_t *s);

/* store_space.c */
void store_space_init(store_space *sp, hid_t d, size_t elsize, int64_t chunk, const char *what);
void store_space_free(store_space *sp);
/* Reads the extent of an existing dataset as its capacity. */
peat_status store_space_open(peat_store_t *s, store_space *sp);
/* Grows the extent to hold need elements (whole chunks), without the flush. */
peat_status store_space_grow(peat_store_t *s, store_space *sp, int64_t need);
/* Grows the extent to hold need elements (whole chunks, no spare capacity), then flushes so the new
 * chunks are on disk before anything points into them. */
peat_status store_space_reserve(peat_store_t *s, store_space *sp, int64_t need);
/* Writes n elements at element offset off (within the capacity) in place. */
peat_status store_space_write(peat_store_t *s, store_space *sp, int64_t off, const void *buf,
                              int64_t n);
/* Writes the buffers (whole elements each) back to back from element offset off. */
#define STORE_IOV_MAX 256
peat_status store_space_writev(peat_store_t *s, store_space *sp, int64_t off,
                               const struct iovec *iov, int n_iov);
/* Reads n elements at element offset off (within the capacity). */
peat_status store_space_read(peat_store_t *s, store_space *sp, int64_t off, void *buf, int64_t n);
/* Zeroes elements [from, to) in place. */
peat_status store_space_zero(peat_store_t *s, store_space *sp, int64_t from, int64_t to);
/* Sets the extent to n elements rounded up to whole chunks (close, repair): chunks past it are
 * freed; elements past n in the last chunk stay (zeros, or unused bytes nothing points to). */
peat_status store_space_trim(peat_store_t *s, store_space *sp, int64_t n);
/* Sets up s->tab and s->raw over the open datasets (capacity 0; store_space_open reads it). */
void store_spaces_init(peat_store_t *s);
/* Dataset access list of the datasets written in place: no chunk cache, so HDF5 never holds
 * (and never writes back) a stale copy of a chunk. */
hid_t store_dapl_uncached(void);
/* Refuses writes on a read-only or failed store. */
peat_status store_check_writable(const peat_store_t *s);

/* store_recover.c: validate rows, drop an unfinished trailing record; build the maps; trim the
 * file back to the last complete record before writing again. */
peat_status store_recover(peat_store_t *s);
peat_status store_index_build(peat_store_t *s);
peat_status store_repair(peat_store_t *s);
/* The end (in elements) of the last tensor of each compressed and raw pool. */
void store_pool_ends(const peat_store_t *s, int64_t deflate_end[PEAT_DTYPE_COUNT],
                     int64_t raw_end[PEAT_DTYPE_COUNT]);

/* store_tensor.c */
/* Starts the tensors of a new record (aligns every pool's next data to a chunk boundary). */
void store_tensors_begin(peat_store_t *s);
/* Stores t (or finds an identical stored tensor): *row = tensor row. New rows are appended to
 * the in-memory table and staged; store_tensors_commit writes their data and rows. */
peat_status store_tensor_put(peat_store_t *s, const peat_tensor *t, int64_t *row);
peat_status store_tensors_commit(peat_store_t *s, int64_t t_first);
void store_encoder_free(peat_store_t *s);
peat_status store_tensor_read(peat_store_t *s, int64_t row, peat_tensor **out);
/* Verifies a stored tensor's bytes against its hash (PEAT_ERR_FORMAT if they differ). */
peat_status store_tensor_verify(peat_store_t *s, int64_t row);
peat_status store_text_write(peat_store_t *s, const char *text, int64_t len, int64_t *offset);
peat_status store_text_read(peat_store_t *s, int64_t offset, int64_t len, char **out);

#endif
