/* store.h: the campaign's HDF5 file: metadata, recorded op calls, states, signatures. */
#ifndef PEAT_STORE_H
#define PEAT_STORE_H

#include "harness/record.h"

#define PEAT_STORE_SCHEMA_VERSION 1

typedef struct peat_store_meta {
    char flow[32];
    char kernel[64];         /* candidate under test */
    char backend[16];
    char device[128];
    uint64_t seed;
    int64_t iters;
    char peat_version[16];
    char created[32];        /* ISO 8601 UTC */
    char argv[512];          /* command line that created it */
} peat_store_meta;

typedef struct peat_store peat_store_t;

/* Creates a new campaign file (refuses to overwrite an existing one). */
peat_status peat_store_create(const char *path, const peat_store_meta *meta, peat_store_t **out);
/* Opens an existing file; validates that it is HDF5, a PEAT campaign, and of this schema version,
 * else PEAT_ERR_FORMAT with a message naming the problem. writable: for --resume. */
peat_status peat_store_open(const char *path, int writable, peat_store_t **out);
/* Flushes and closes; NULL is fine. */
peat_status peat_store_close(peat_store_t *s);
peat_status peat_store_meta_get(const peat_store_t *s, peat_store_meta *out);

/* Writes one record durably (every completed record survives a later SIGKILL). */
peat_status peat_store_call_write(peat_store_t *s, const peat_record *r);
int64_t peat_store_call_count(const peat_store_t *s);
/* Whether a record with this id is present (for --resume). */
int peat_store_call_has(const peat_store_t *s, uint64_t id);
/* Reads the idx-th record (0 <= idx < count), including exact outputs. */
peat_status peat_store_call_read(peat_store_t *s, int64_t idx, peat_record **out);

/* A record sink writing into the store (user = peat_store_t*); frees the record after writing. */
peat_status peat_store_sink(void *store, peat_record *r);

#endif
