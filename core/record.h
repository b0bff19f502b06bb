/* record.h: one recorded op call (inputs, golden and exact outputs, provenance) and the profiler
 * that captures them from a running flow. */
#ifndef PEAT_HARNESS_RECORD_H
#define PEAT_HARNESS_RECORD_H

#include "peat/peat.h"

typedef struct peat_record {
    uint64_t id; /* unique within a campaign: the call_index of the call */
    peat_op_kind op;
    peat_op_params p;
    int n_in, n_out;
    peat_tensor *in[PEAT_MAX_IO];     /* inputs as the kernel saw them (F32 / I32), owned */
    peat_tensor *golden[PEAT_MAX_IO]; /* golden outputs (working precision), owned */
    peat_tensor *exact[PEAT_MAX_IO];  /* exact outputs (F64), owned; may be NULL until computed */
    char flow[32];
    char layer[64];
    char golden_kernel[64];
    int64_t iter;
    peat_phase phase;
    int64_t call_index;
    int64_t op_call_index;
    uint64_t seed; /* campaign seed */
} peat_record;

void peat_record_free(peat_record *r);
/* Args view of a record's inputs (outputs left empty). */
peat_args peat_record_args(const peat_record *r);
/* Computes r->exact with the exact kernel of r->op (no-op if every one is present; a store hands
 * back records without the exact outputs it chose not to keep). */
peat_status peat_record_compute_exact(peat_record *r);

/* Which calls the profiler records. */
typedef struct peat_profile_policy {
    uint64_t op_mask;         /* bit PEAT_OP_BIT(op) set = record that op; 0 = all ops */
    int64_t every_k;          /* record every k-th call of each op kind (>=1) */
    int64_t max_calls;        /* stop recording after this many records in total (0 = no cap) */
    int64_t max_per_op;       /* cap per op kind (0 = no cap) */
    int64_t iter_lo, iter_hi; /* record only iter_lo <= iter < iter_hi (hi 0 = no upper bound) */
    int fwd, bwd, opt;        /* phases to record (all 0 = all) */
    int64_t max_elems; /* skip calls whose inputs hold more elements than this (0 = no cap) */
    /* optional: record only iterations for which this returns non-zero */
    int (*iter_filter)(void *user, int64_t iter);
    void *iter_filter_user;
    /* optional: decides, for a call that passed every check above, whether to record it
     * (replaces every_k; the stratified sampler of `peat run` is one) */
    int (*call_filter)(void *user, const peat_args *a, const peat_call_info *info);
    void *call_filter_user;
} peat_profile_policy;

/* Called for each completed record; takes ownership of r. */
typedef peat_status (*peat_record_sink)(void *user, peat_record *r);

typedef struct peat_profiler peat_profiler_t;
peat_profiler_t *peat_profiler_new(const peat_profile_policy *pol, peat_record_sink sink,
                                   void *user);
void peat_profiler_free(peat_profiler_t *pr);
/* Attaches to an exec context (adds its hook). */
peat_status peat_profiler_attach(peat_profiler_t *pr, peat_exec_t *ex);
int64_t peat_profiler_recorded(const peat_profiler_t *pr);
/* First error a sink returned (the hook stops recording after it), PEAT_OK if none. */
peat_status peat_profiler_status(const peat_profiler_t *pr);

/* A growable in-memory list of records (a sink). */
typedef struct peat_record_list {
    peat_record **items;
    int64_t n, cap;
} peat_record_list;
peat_status peat_record_list_sink(void *list, peat_record *r);
void peat_record_list_clear(peat_record_list *l);

#endif
