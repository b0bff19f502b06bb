/* store.h: the campaign's HDF5 file: metadata, recorded op calls, states, metrics, signatures.
 * Layout, dedup and crash-safety design: docs/hdf5-schema.md. */
#ifndef PEAT_STORE_H
#define PEAT_STORE_H

#include <stdio.h>

#include "core/record.h"

/* 5: every file is created with the stage tables (empty until their stage writes), so that no
 * object is created in SWMR write mode; an empty /manifest is an unfinished campaign */
#define PEAT_STORE_SCHEMA_VERSION 5
/* the oldest version this build reads: 3 stored the coded columns as integers */
#define PEAT_STORE_SCHEMA_VERSION_READ 3
/* the oldest it writes to: a version-4 file (stage tables created by their stages) is copied
 * into version 5 once by its first writer */
#define PEAT_STORE_SCHEMA_VERSION_APPEND 4
/* Value of the root attribute peat_format: what tells a PEAT campaign from other HDF5 files. */
#define PEAT_STORE_FORMAT "peat-campaign"
/* Exact outputs are by default not stored but recomputed on read (fp64, deterministic, from the
 * stored inputs): they are twice the golden outputs' size and barely compress, and recomputing
 * one costs about what replaying the call costs. docs/hdf5-schema.md has the numbers. */
#define PEAT_STORE_EXACT_MAX_DEFAULT 0
/* A tensor is compressed (shuffle + deflate) when that is estimated to save at least this percent
 * of its bytes; the rest is written uncompressed. Dense fp32 training data saves ~15%, and
 * compressing costs several times the time of writing it as it is (docs/hdf5-schema.md). */
#define PEAT_STORE_MIN_SAVING_PCT_DEFAULT 25

typedef struct peat_store_meta {
    char flow[32];
    char kernel[64]; /* candidate under test */
    char backend[16];
    char device[128];
    uint64_t seed;
    int64_t iters;
    char peat_version[16];
    char created[32]; /* ISO 8601 UTC */
    char argv[512];   /* command line that created it */
    /* environment and policy; "" where unknown (all optional) */
    char host[64];
    char clocks[128]; /* e.g. "sm 1980 MHz, mem 2619 MHz" as sampled at the start */
    char dtypes[64];  /* e.g. "storage f32, accumulate f32, exact f64" */
    char build[64];   /* build type, compiler */
    char policy[256]; /* the recording policy, as flags or config text */
    /* store settings, persisted so readers know what was done */
    int64_t exact_max_bytes; /* store a call's exact outputs up to this many bytes; 0 = default
                                (PEAT_STORE_EXACT_MAX_DEFAULT: never); < 0 = always */
    int deflate_level;       /* 1..9; 0 = default (1); -1 = nothing compressed: every tensor
                                goes to the raw pools (fastest) */
    int min_saving_pct;      /* a tensor is compressed when shuffle + deflate is estimated to
                                save at least this percent of its bytes (and 4 KiB): 0 = default
                                (25), 1..100, -1 = compress every tensor (smallest files) */
    char hdf5_version[32];   /* filled in by the store */
    char blas[96]; /* what the golden GEMM ran on: "OpenBLAS 0.3.21 (core Zen, 1 thread)" or
                      "none (plain loop)"; "" in files written before it was recorded */
} peat_store_meta;

typedef struct peat_store peat_store_t;

/* Creates a new campaign file (refuses to overwrite an existing one). The file is built under
 * PATH.creating and linked to PATH only once it is complete, so PATH never names a half-made file.
 */
peat_status peat_store_create(const char *path, const peat_store_meta *meta, peat_store_t **out);
/* The same, holding from the start every complete record, state, metric and table of the campaign
 * file seed (read only; its own metadata is not taken): a profile reused from another campaign
 * (the golden cache, docs/hdf5-schema.md). */
peat_status peat_store_create_from(const char *path, const peat_store_meta *meta, const char *seed,
                                   peat_store_t **out);
/* Opens an existing file; validates that it is HDF5, a PEAT campaign, and of this schema version,
 * else PEAT_ERR_FORMAT with a message naming the problem. A file whose writer was killed opens
 * with every completed record (an incomplete trailing record is ignored). writable: for
 * --resume; refused (PEAT_ERR_IO) while another process writes the file; a killed writer's file
 * is first replaced by a copy of its complete records (docs/hdf5-schema.md, resume). */
peat_status peat_store_open(const char *path, int writable, peat_store_t **out);
/* Flushes and closes; NULL is fine. */
peat_status peat_store_close(peat_store_t *s);
peat_status peat_store_meta_get(const peat_store_t *s, peat_store_meta *out);

/* ---- op-call records ---- */

/* Writes one record durably (every completed record survives a later SIGKILL). Tensors already
 * in the store (same dtype, shape and bytes) are referenced, not stored again. A record whose id
 * is already stored is refused (PEAT_ERR_INVAL): records are never doubled. */
peat_status peat_store_call_write(peat_store_t *s, const peat_record *r);
int64_t peat_store_call_count(const peat_store_t *s);
/* Whether a record with this id is present (for --resume). */
int peat_store_call_has(const peat_store_t *s, uint64_t id);
/* Position of the record with this id, PEAT_ERR_NOTFOUND if absent. */
peat_status peat_store_call_find(const peat_store_t *s, uint64_t id, int64_t *idx);
/* Reads the idx-th record (0 <= idx < count, in write order). Exact outputs are returned when the
 * file holds them; those it does not are left NULL for the caller to recompute
 * (peat_record_compute_exact): the store runs no kernel. Every tensor is checked against its hash.
 */
peat_status peat_store_call_read(peat_store_t *s, int64_t idx, peat_record **out);
/* Provenance and params of the idx-th record only (tensor pointers left NULL): cheap, for
 * choosing records by op, layer or iteration. */
peat_status peat_store_call_header(const peat_store_t *s, int64_t idx, peat_record *out);

/* A record sink writing into the store (user = peat_store_t*); frees the record after writing.
 * Records whose id is already stored are skipped: that is what makes a resumed run idempotent. */
peat_status peat_store_sink(void *store, peat_record *r);

/* ---- states: named tensors of a flow at an iteration (checkpoints, activations) ---- */

/* Writes a snapshot of n tensors (names up to 63 chars, tag up to 31, e.g. "checkpoint",
 * "activations") durably and as one record; an (iter, tag) already stored is refused. */
peat_status peat_store_state_write(peat_store_t *s, int64_t iter, const char *tag, int n,
                                   const peat_tensor *const *t, const char *const *names);
/* Number of snapshots, and what the idx-th (in write order) holds. */
int64_t peat_store_state_count(const peat_store_t *s);
peat_status peat_store_state_info(const peat_store_t *s, int64_t idx, int64_t *iter, char tag[32],
                                  int *n);
int peat_store_state_has(const peat_store_t *s, int64_t iter, const char *tag);

typedef struct peat_store_state {
    int64_t iter;
    char tag[32];
    int n;
    peat_tensor **t;   /* n tensors, owned */
    char (*names)[64]; /* n names, owned */
} peat_store_state;
/* Reads the snapshot (iter, tag); PEAT_ERR_NOTFOUND if absent. */
peat_status peat_store_state_read(peat_store_t *s, int64_t iter, const char *tag,
                                  peat_store_state **out);
void peat_store_state_free(peat_store_state *st);

/* ---- per-iteration metrics ---- */

/* Appends (iter, loss, accuracy) durably; an iteration already stored is refused. */
peat_status peat_store_metrics_append(peat_store_t *s, int64_t iter, double loss, double accuracy);
int64_t peat_store_metrics_count(const peat_store_t *s);
peat_status peat_store_metrics_read(const peat_store_t *s, int64_t idx, int64_t *iter, double *loss,
                                    double *accuracy);
int peat_store_metrics_has(const peat_store_t *s, int64_t iter);

/* ---- signatures: one JSON document per kernel (the analyzer's versioned schema) ---- */

/* Writes a signature durably; a later one for the same kernel supersedes the earlier on read. */
peat_status peat_store_signature_write(peat_store_t *s, const char *kernel, const char *json);
int64_t peat_store_signature_count(const peat_store_t *s);
/* The latest signature of kernel as a malloc'd string (caller frees); PEAT_ERR_NOTFOUND if none. */
peat_status peat_store_signature_read(peat_store_t *s, const char *kernel, char **json);
/* The idx-th signature in write order: kernel name (64 bytes) and its JSON (caller frees). */
peat_status peat_store_signature_at(peat_store_t *s, int64_t idx, char kernel[64], char **json);

/* ---- tables: crash-safe rows of named columns, for stage results (fault-injection trials,
 * runtime curves). One extendible chunked dataset of compound rows per table, written through
 * the public HDF5 API (H5Dset_extent, H5Dwrite, H5Fflush): a row is durable once
 * peat_store_table_append returns, and a row torn by a kill fails its check and is dropped on
 * open. docs/hdf5-schema.md ("tables"). ---- */

typedef enum peat_store_col_type {
    PEAT_STORE_COL_I64 = 0,
    PEAT_STORE_COL_F64,
    PEAT_STORE_COL_STR /* fixed width, NUL-terminated; longer strings are refused */
} peat_store_col_type;

typedef struct peat_store_col {
    const char *name;
    peat_store_col_type type;
    int width; /* PEAT_STORE_COL_STR: bytes including the NUL */
} peat_store_col;

/* One cell: the member named by its column's type. */
typedef union peat_store_value {
    int64_t i;
    double d;
    const char *s;
} peat_store_value;

typedef struct peat_store_table peat_store_table_t;

/* Opens the table at path (e.g. "/fi/trials"); its columns must be these (PEAT_ERR_FORMAT if
 * not). Complete rows are read back (resume: the caller skips the keys it finds). A table the
 * file lacks is PEAT_ERR_NOTFOUND, for a writer too: the file is written in SWMR write mode, in
 * which HDF5 forbids creating objects, so every table is created with the file (the stage
 * tables below) and a writer opening an older file that lacks some gets them through a copy. */
peat_status peat_store_table_open(peat_store_t *s, const char *path, const peat_store_col *cols,
                                  int n_cols, peat_store_table_t **out);
/* Whether the file holds a table at path (possibly empty: every file has the stage tables). */
int peat_store_table_exists(peat_store_t *s, const char *path);
/* Whether it holds one with rows: what a reader asks (an empty stage table is one whose stage
 * did not run or wrote nothing, as an absent one in files written before they were created
 * with the file). */
int peat_store_table_present(peat_store_t *s, const char *path);
int64_t peat_store_table_rows(const peat_store_table_t *t);
/* Appends n rows (n x n_cols values, row-major) durably: one write and one flush per call. */
peat_status peat_store_table_append(peat_store_table_t *t, const peat_store_value *v, int64_t n);
/* Cell (row, col); a string points into the table (valid until close). */
peat_status peat_store_table_get(const peat_store_table_t *t, int64_t row, int col,
                                 peat_store_value *v);
void peat_store_table_close(peat_store_table_t *t);

/* The mixed-precision table (--precision other than fp32; docs/hdf5-schema.md): one row per
 * profiled iteration, columns iter (i64), loss_scale (f64), skipped (i64: 1 when the loss scaler
 * skipped the optimizer step). */
#define PEAT_STORE_AMP_TABLE "/metrics/amp"
const peat_store_col *peat_store_amp_cols(int *n);

/* The other stage tables every file is created with (store/store_schema.c; their columns are
 * documented in docs/hdf5-schema.md): empty until their stage appends rows. */
#define PEAT_STORE_RUNTIME_CURVES          "/runtime/curves"
#define PEAT_STORE_RUNTIME_WDIST           "/runtime/weight_distance"
#define PEAT_STORE_RUNTIME_VERDICTS        "/runtime/verdicts"
#define PEAT_STORE_FI_TRIALS               "/fi/trials"
#define PEAT_STORE_FI_SHARDS               "/fi/shards"
#define PEAT_STORE_REPORT_STATE            "/report/state"
#define PEAT_STORE_CAPTURE_UNMAPPED        "/capture/unmapped"
#define PEAT_STORE_MANIFEST                "/manifest"
#define PEAT_STORE_REPORT_STATE_DATA_WIDTH 256 /* bytes of /report/state's data column */
extern const peat_store_col peat_store_runtime_curve_cols[7];
extern const peat_store_col peat_store_runtime_wdist_cols[4];
extern const peat_store_col peat_store_runtime_verdict_cols[13];
extern const peat_store_col peat_store_fi_trial_cols[24];
extern const peat_store_col peat_store_fi_shard_cols[12];
extern const peat_store_col peat_store_report_state_cols[5];
extern const peat_store_col peat_store_capture_unmapped_cols[3];
/* The capture's unmapped arithmetic aten ops (/capture/unmapped, written by peat_torch.capture;
 * the rows whose reason begins with PEAT_STORE_UNMAPPED_NO_MATH, views and allocations, left
 * out), most calls first, as "op (N calls: why); ..." into buf ("" when none); *n_ops their
 * count. */
#define PEAT_STORE_UNMAPPED_NO_MATH "view or allocation"
peat_status peat_store_capture_unmapped_list(peat_store_t *s, char *buf, size_t n, int *n_ops);

/* ---- what a file holds ---- */

typedef struct peat_store_stats {
    int64_t calls, states, state_tensors, metrics, signatures;
    int64_t tensors;       /* unique tensors stored */
    int64_t tensor_refs;   /* references to tensors from records (refs - tensors = dedup hits) */
    int64_t logical_bytes; /* bytes of every referenced tensor, as if stored once per reference */
    int64_t unique_bytes;  /* bytes of the unique tensors, uncompressed */
    int64_t deflate_bytes; /* of those, in the compressed pools (before compression) */
    int64_t deflate_disk;  /* bytes the compressed pools take in the file */
    int64_t raw_bytes;     /* of the unique bytes, in the uncompressed pools */
    int64_t spare_bytes;   /* allocated past the last row / tensor (the rest of the last chunk
                              of each table and raw pool, zeros or unused) */
    int64_t exact_recomputed; /* exact outputs not stored (recomputed on read), bytes */
    int64_t file_bytes;       /* size of the file on disk */
    int crashed;              /* the last writer did not close the file */
    int64_t dropped_rows;     /* rows of an incomplete trailing record ignored on open */
} peat_store_stats;
peat_status peat_store_stats_get(const peat_store_t *s, peat_store_stats *out);

/* ---- integrity: the manifest of a finished campaign, and verification (docs/hdf5-schema.md,
 * "Manifest and verification") ---- */

/* One stage of the pipeline as the manifest records it. */
typedef struct peat_store_stage {
    const char *name; /* e.g. "profile" */
    const char
        *objects; /* the tables it writes, space-separated ("/calls/index ..."); NULL: none */
    const char *skipped; /* NULL: it ran; else why it did not */
} peat_store_stage;

/* Writes /manifest, once, as the last thing before a campaign is named complete: one row per
 * stage, and per table a stage wrote, the rows that pass their checks and an XXH64 chain of
 * those checks (each row's check covers its fields, so the chain of /tensors/index covers every
 * tensor's content hash). A manifest already in the file (a resumed commit) is kept. */
peat_status peat_store_manifest_write(peat_store_t *s, const peat_store_stage *stages, int n);

/* Receives one line per problem found (a damaged record, a stage output missing). */
typedef void (*peat_store_report_fn)(void *user, const char *line);

typedef struct peat_store_check {
    int has_manifest;    /* the file has one (a finished campaign of this build or later) */
    int stages, skipped; /* stages it lists; of them skipped */
    int64_t tables;      /* stage outputs (tables) checked against it */
    int64_t problems;    /* lines reported */
    int64_t calls, states, signatures, tensors; /* records and tensors read (verify) */
    int64_t bytes;                              /* tensor bytes read and hashed (verify) */
    char stage_list[512]; /* the manifest's stages in order, a skipped one with its reason */
} peat_store_check;

/* Cheap: the file against its manifest (every stage output present with at least the rows it
 * lists, the digest of those rows unchanged). Problems go to fn (may be NULL) and are counted. */
peat_status peat_store_manifest_check(peat_store_t *s, peat_store_report_fn fn, void *user,
                                      peat_store_check *out);
/* Thorough: the manifest check, then every tensor and signature text read back and compared
 * with its hash; one line per damaged record (call id, snapshot, signature, tensor row). */
peat_status peat_store_verify(peat_store_t *s, peat_store_report_fn fn, void *user,
                              peat_store_check *out);

/* What peat_store_open_resume found and did. */
typedef struct peat_store_resume_info {
    int64_t damaged;         /* records whose data does not match its hashes */
    char first_damaged[160]; /* the first of them, in words ("call id 17: input 0 ...") */
    uint64_t damaged_ids[8]; /* ids of the first damaged call records */
    int n_ids;
    int64_t dropped; /* records dropped: the first damaged one and every later one */
    int64_t kept;    /* records kept, verified */
} peat_store_resume_info;

/* peat_store_open(path, 1, ...) for --resume, which also reads every kept record back and checks
 * it against its hashes. The records from the first damaged one on are dropped (as if the writer
 * had been killed just before it), so that the resumed run, which is deterministic, records them
 * again; info says what was found. */
peat_status peat_store_open_resume(const char *path, peat_store_resume_info *info,
                                   peat_store_t **out);

/* Whether the regenerated record r matches the stored record of the same id (its inputs and
 * golden outputs, by content hash): 1 same, 0 differs (*what says which tensor), -1 not stored. */
int peat_store_call_same(const peat_store_t *s, const peat_record *r, char *what, size_t n);

/* `peat inspect FILE`: prints what a campaign file holds (stages, op calls per op, iterations,
 * states, sizes, compression ratio) as a readable table, and checks it against its manifest;
 * verify: `--verify`, every tensor and text against its hash as well. A damaged file is
 * PEAT_ERR_FORMAT (its problems printed first, one line each). */
peat_status peat_store_inspect(const char *path, int verify, FILE *out);

/* Seconds this process has spent inside the store's functions (creating, opening, writing,
 * reading, closing), for benchmarks: the store's share of a whole run. */
double peat_store_busy_seconds(void);

/* The store's test interface (kill at a step, a full disk, the SWMR counter): store/store_test.h,
 * compiled only into builds with PEAT_TEST_HOOKS. */

#endif
