/* store_latency.h: the predictor's calibration cache as a small HDF5 file of its own (one file per
 * device): one row per kernel, attributes saying for which device and PEAT version it holds. */
#ifndef PEAT_STORE_LATENCY_H
#define PEAT_STORE_LATENCY_H

#include "peat/peat.h"

#define PEAT_STORE_LATENCY_FORMAT "peat-latency-cache"
#define PEAT_STORE_LATENCY_POINTS 12

/* One kernel's calibration: time t[i] at model variable x[i], i < n. */
typedef struct peat_store_latency_row {
    char kernel[64];
    uint64_t desc_hash; /* of the kernel descriptor it was measured with */
    int32_t cls, n, power_tail;
    double overhead_s, clock_mhz;
    double x[PEAT_STORE_LATENCY_POINTS], t[PEAT_STORE_LATENCY_POINTS];
} peat_store_latency_row;

typedef struct peat_store_latency_meta {
    char key[32];     /* device key the rows hold for */
    char device[160]; /* device description, for people */
    char peat_version[16];
    double cost_s; /* what the calibration cost */
} peat_store_latency_meta;

/* Writes the cache file (replacing it atomically: written aside, then renamed). */
peat_status peat_store_latency_write(const char *path, const peat_store_latency_meta *m,
                                     const peat_store_latency_row *rows, int n);
/* Reads it: PEAT_ERR_NOTFOUND when there is no file, PEAT_ERR_FORMAT when it is not a latency
 * cache. *rows is malloc'ed (free it). */
peat_status peat_store_latency_read(const char *path, peat_store_latency_meta *m,
                                    peat_store_latency_row **rows, int *n);

#endif
