/* run_shard.h: `peat run --shard I/N` and the `peat merge` of its shards (docs/scale-out.md). A
 * shard's file DIR/run-shard-I-of-N.bin holds what names its campaign (peat version, shard, seed,
 * kernel, flow, the command line that decides the runs, every runtime run's label; shard 0 also
 * the stages it skipped), then the body an MPI rank sends rank 0 (runtime.c: the runs it trained
 * and their checkpoints). Harness-internal. */
#ifndef PEAT_HARNESS_RUN_SHARD_H
#define PEAT_HARNESS_RUN_SHARD_H

#include "harness/scale/ranks.h"
#include "harness/scale/scale.h"

/* the runs a campaign's lockstep trains: its band and its frequencies (the runtime room checks
 * that PEAT_RUNTIME_MAX_BAND + PEAT_RUNTIME_MAX_FREQS fit) */
#define PEAT_RUN_SHARD_MAX_RUNS 10

typedef struct peat_scale_run_shard {
    peat_scale_shard sh;
    uint64_t seed;
    char version[32], kernel[64], flow[32];
    char line[4096]; /* the command line less --shard, --out, --quiet, --json, --force */
    char argv[4096]; /* shard 0's command line as the campaign records it */
    int n_runs;      /* the lockstep's runs (golden first), every shard's */
    char runs[PEAT_RUN_SHARD_MAX_RUNS][64];
    int n_skipped; /* shard 0: the stages it skipped, and why (the manifest's) */
    char skip_stage[4][32], skip_why[4][96];
    peat_scale_pack body; /* read: the file, at its body */
    char path[700];
} peat_scale_run_shard;

/* The file's path: DIR/run-shard-I-of-N.bin. */
void peat_scale_run_shard_path(const char *dir, peat_scale_shard sh, char *buf, size_t n);
/* Writes h and body into DIR/run-shard-I-of-N.bin (a temporary file renamed: a killed shard
 * leaves no file, or the whole one). */
peat_status peat_scale_run_shard_write(const char *dir, const peat_scale_run_shard *h,
                                       const peat_scale_pack *body);
/* Every shard of the campaign in dir (the paths given, or every DIR/run-shard-*-of-*.bin), as
 * *out[0..N) by shard: refuses, in one line and before anything is written, shards of different
 * counts or campaigns (version, seed, kernel, flow, command line) and names a missing shard with
 * its runs. The caller frees them with peat_scale_run_shards_free. *n is 0 (PEAT_OK) when dir
 * holds no run shard. */
peat_status peat_scale_run_shards_load(const char *dir, char *const *paths, int n_paths,
                                       peat_scale_run_shard **out, int *n);
void peat_scale_run_shards_free(peat_scale_run_shard *s, int n);

#endif
