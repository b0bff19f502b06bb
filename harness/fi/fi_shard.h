/* fi_shard.h: `peat inject` across shards and MPI ranks (docs/scale-out.md): the options of a
 * shard's run kept in its file (/fi/shards), `peat merge` of FI shards, and `mpirun -n N peat
 * inject` (rank r runs shard r/N, rank 0 merges). */
#ifndef PEAT_RUN_FI_SHARD_H
#define PEAT_RUN_FI_SHARD_H

#include "harness/scale/scale.h"
#include "harness/fi/fi.h"
#include "store/store.h"

/* Appends the run's options (what a merge reruns nothing of but needs to name the series) to the
 * shard file's /fi/shards table, unless the same row is there. */
peat_status peat_fi_shard_run_write(peat_store_t *s, const peat_fi_opts *o, int64_t trials,
                                    peat_scale_shard sh);
/* `peat inject` under mpirun (or alone: then peat_fi_run). Rank 0 first takes the trials of
 * shard files left by a killed job (of any rank count) into the campaign; each rank runs its
 * shard; rank 0 merges them into the one campaign and its reports (res on rank 0). A failed rank
 * is named with its trials; the others' stay in their shard files for the rerun. */
peat_status peat_fi_run_ranks(const peat_fi_opts *o, peat_fi_result *res);

#endif
