/* scale.h: scale-out over processes (docs/scale-out.md): shards of independent items assigned by
 * id (`--shard i/N`: a Slurm array task, a CI matrix job), and the MPI ranks of `mpirun -n N
 * peat ...` (rank r is shard r/N). Every MPI call of PEAT is in scale.c; without PEAT_MPI the
 * MPI functions answer as a single process, so no caller needs an #ifdef. */
#ifndef PEAT_SCALE_H
#define PEAT_SCALE_H

#include "peat/peat.h"

#include <stdint.h>

#define PEAT_SCALE_MAX_SHARDS 100000

/* One shard of N: items with id % n == i. n 0 (or 1) is the whole run. */
typedef struct peat_scale_shard {
    int i, n;
} peat_scale_shard;

/* Parses "i/N" (0 <= i < N <= PEAT_SCALE_MAX_SHARDS); a one-line error otherwise. */
peat_status peat_scale_shard_parse(const char *s, peat_scale_shard *out);
/* Whether item id belongs to the shard: the assignment depends on the id alone, never on the
 * order items are met or on what else runs, so shards of any count cover every item once. */
int peat_scale_shard_mine(peat_scale_shard s, int64_t id);
/* "fi-shard-I-of-N.h5" style names: prefix, shard, suffix. */
void peat_scale_shard_name(const char *prefix, peat_scale_shard s, const char *suffix, char *buf,
                           size_t n);

/* MPI: started when this process was launched by mpirun (the launcher's environment says so)
 * and PEAT was built with PEAT_MPI; otherwise a single process (rank 0 of 1). */
peat_status peat_scale_mpi_init(int *argc, char ***argv);
void peat_scale_mpi_finalize(void);
int peat_scale_mpi_rank(void);
int peat_scale_mpi_size(void);
/* The rank among those on this node (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID; 0 if unknown):
 * a rank uses GPU local_rank mod the node's device count. */
int peat_scale_mpi_local_rank(void);
/* The GPU a rank uses: entry local_rank mod k of visible (a CUDA_VISIBLE_DEVICES list of k
 * devices, as Slurm's --gres sets it), or, with visible NULL or empty, device local_rank mod
 * ndev. Writes its name to out; returns 0 (out "") when there is no device (ndev < 1 and no
 * list). */
int peat_scale_gpu_choose(const char *visible, int ndev, int local_rank, char *out, size_t n);
/* Every rank's status, combined: PEAT_OK only when every rank's is; also a barrier. *failed (may
 * be NULL) gets, on every rank, a bit mask of the first 64 ranks that failed. */
peat_status peat_scale_mpi_status_all(peat_status mine, uint64_t *failed);
/* Sums v[0..n) over the ranks (every rank gets the sums); a single process keeps v. */
void peat_scale_mpi_sum(double *v, int n);
/* The same with the largest value (the slowest rank's time). */
void peat_scale_mpi_max(double *v, int n);
/* Ranks on this node (1 without MPI): a rank's share of the node's cores is cores / this. */
int peat_scale_mpi_local_size(void);
/* Rank 0's *n bytes at *buf to every rank: the others get a malloc'ed copy (+1 byte of room) in
 * *buf, *n. Every rank must call it; they wait asleep (rank 0 may be busy for minutes). A single
 * process keeps its own. */
peat_status peat_scale_mpi_bcast(void **buf, size_t *n);
/* Point to point, to rank 0: a rank sends n bytes; rank 0 receives what rank `from` sent, in a
 * malloc'ed buffer (the caller frees it). Both wait asleep. */
peat_status peat_scale_mpi_send0(const void *buf, size_t n);
peat_status peat_scale_mpi_recv(int from, void **buf, size_t *n);
/* Whether this build has MPI (PEAT_MPI). */
int peat_scale_mpi_built(void);

#endif
