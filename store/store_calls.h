/* store_calls.h: the call files of the file protocol (docs/calls.md): calls.h5, the inputs of every
 * call PEAT makes of a candidate (`peat calls export`), and outs.h5, the outputs a harness in any
 * runtime wrote for them (`peat judge`). One group per call, /calls/NNNNNN, holding its op,
 * params and tensors as plain datasets and attributes that h5py or any HDF5 reader takes. */
#ifndef PEAT_STORE_CALLS_H
#define PEAT_STORE_CALLS_H

#include "peat/peat.h"

#include <stddef.h>
#include <stdint.h>

#define PEAT_STORE_CALLS_VERSION 1

/* One call as the files hold it. Its tensors are owned (peat_store_calls_call_free). */
typedef struct peat_store_calls_call {
    peat_op_kind op;
    peat_op_params p;
    int n_in, n_out;
    peat_tensor *in[PEAT_MAX_IO];
    peat_tensor *out[PEAT_MAX_IO]; /* the output buffers as PEAT handed them (their contents) */
    char stage[16];                /* the stage that made the call: playback, sequence, probe */
    int in_order; /* the call runs after the file's previous in-order call, in the same process:
                     the candidate's state across calls is part of what is judged */
    int64_t in_buf[PEAT_MAX_IO], out_buf[PEAT_MAX_IO]; /* in-order calls: buffer ids (the same id
                                                          is the same buffer); -1 elsewhere */
    uint64_t sum; /* checksum of op, params and inputs (peat_store_calls_sum) */
} peat_store_calls_call;

typedef struct peat_store_calls peat_store_calls; /* an open calls.h5 or outs.h5 */

/* FNV-1a of a call's op, params and input bytes: what `peat judge` matches a call by. */
uint64_t peat_store_calls_sum(peat_op_kind op, const peat_op_params *p, int n_in,
                              const peat_tensor *const *in);

/* Writes calls.h5 at path (replacing a file there): the op of the calls, the `peat run` words
 * that make them (one per line), then every call in order. */
peat_status peat_store_calls_write(const char *path, const char *op, const char *words,
                                   const peat_store_calls_call *calls, int64_t n);

/* Opens calls.h5 (kind "calls") or outs.h5 (kind "outs") for reading; refuses another file, a
 * truncated one or another version in one line. */
peat_status peat_store_calls_open(const char *path, const char *kind, peat_store_calls **out);
peat_status peat_store_calls_close(peat_store_calls *f);
int64_t peat_store_calls_count(const peat_store_calls *f); /* calls.h5: its calls */
const char *peat_store_calls_op(const peat_store_calls *f);
const char *peat_store_calls_words(const peat_store_calls *f);
/* outs.h5: the name its harness gave the kernel (attribute "kernel"; "" when none). */
const char *peat_store_calls_kernel(const peat_store_calls *f);
/* Call idx of calls.h5, its tensors allocated. */
peat_status peat_store_calls_get(peat_store_calls *f, int64_t idx, peat_store_calls_call *c);
void peat_store_calls_call_free(peat_store_calls_call *c);

/* Reads the outputs outs.h5 holds for call idx into out[0..n) (allocated, their shapes and
 * dtypes checked). A call the harness marked failed (attribute "error") gives PEAT_ERR_KERNEL
 * with its message; a missing call or output, or another shape or dtype, PEAT_ERR_FORMAT naming
 * it. */
peat_status peat_store_calls_outs_get(peat_store_calls *f, int64_t idx, int n,
                                      peat_tensor *const *out);

#endif
