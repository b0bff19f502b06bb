/* fi.h: `peat inject`: a playback fault-injection campaign on a finished campaign's records
 * (docs/fault-injection.md). */
#ifndef PEAT_HARNESS_FI_H
#define PEAT_HARNESS_FI_H

#include <stdio.h>

#include "inject/inject.h"

#define PEAT_FI_MAX_MODELS 16

typedef struct peat_fi_opts {
    const char *campaign; /* the campaign directory (or its campaign.h5) */
    const char *models;   /* ';'-separated model specs ("bitflip(bit=-1);nan(count=1)") */
    int64_t trials;       /* per model (0 = what margin needs) */
    const char *ops;      /* recorded ops to inject into ("gemm,softmax"; NULL = all recorded) */
    const char *site;     /* "output" (default), "input", "acc" */
    const char *layers;   /* recorded layers to inject into ("fc1,h0.*"; NULL = all) */
    const char *phases;   /* "fwd,bwd,opt" subset (NULL = all) */
    int64_t iter_lo, iter_hi; /* records of iterations [lo, hi) only (hi 0 = to the end) */
    int local_only;           /* judge each trial on its op's output only (no propagation) */
    int show;                 /* run nothing: print the series the file holds */
    int pool;                 /* also print tables pooled over every series (said so) */
    double margin;            /* half-width wanted for rates (default 0.03) ... */
    double confidence;        /* ... at this confidence (default 0.95) */
    int threads;              /* workers (0 = online CPUs) */
    int64_t batch;            /* trials per durable write (0 = 128 per worker) */
    int signature_trials;     /* trials per model replayed into its reference signature (0 = 32) */
    int quiet;
    int64_t debug_kill_after; /* test hook, acted on only with PEAT_TEST_HOOKS: SIGKILL after
                                 writing this many rows (tests; kill-rank, core/test_hooks.h) */
    /* scale-out (docs/scale-out.md): "i/N" runs only the trials with index % N == i, into
     * DIR/fi-shard-i-of-N.h5 (the campaign file is only read); `peat merge` combines shards */
    const char *shard;
    /* set by peat_fi_merge, not by the command line: the trials come from these shard files */
    const char *const *from;
    int n_from;
    int from_of;      /* their shard count (names the shards that lack trials) */
    int from_partial; /* take what the shards hold (no completeness check, signatures, reports) */
} peat_fi_opts;

void peat_fi_opts_default(peat_fi_opts *o);

typedef struct peat_fi_result {
    char dir[512];
    int n_models;
    char models[PEAT_FI_MAX_MODELS][256];
    peat_inject_trial *trials; /* every trial of the campaign (resumed ones included) */
    int64_t n_trials;
    int64_t n_run, n_resumed; /* run now, found in the file */
    int64_t n_records;
    int threads;
    char select[96]; /* this run's record selection ("ops=gemm layer=fc1"; "" = all) */
    char kernel[64], flow[32], argv[512];
    uint64_t seed;
    int show_all;       /* --show: every series of the file is printed */
    int pool;           /* --pool: tables over every series together follow */
    char site[8];       /* this run's site */
    int propagated;     /* trials of this run were followed to the end of their step */
    int64_t prop_steps; /* training steps the replay and the bands took */
    /* wall time of the trials from loading the records (replay and bands included), and trials
     * per wall second of it */
    double t_run, trials_per_s;
    double t_cpu; /* CPU time of the trials, all threads */
    peat_inject_table tab[PEAT_INJECT_GROUP_COUNT];
    int shard_i, shard_n; /* --shard: this shard (n 0: the whole campaign) */
    char shard_file[600]; /* --shard: the file its trials went to */
    int64_t n_merged;     /* peat merge: trials taken from shard files */
} peat_fi_result;

/* Runs (or resumes) the campaign: trials into /fi/trials, reference signatures "fi:<spec>@<site>"
 * into /signatures, fi-summary.md and fi-report.html into the directory. */
peat_status peat_fi_run(const peat_fi_opts *o, peat_fi_result *res);
void peat_fi_result_free(peat_fi_result *res);
/* `peat merge DIR [SHARD...]` for FI shards: the trials of shard files (default: every
 * DIR/fi-shard-*-of-*.h5) go into DIR/campaign.h5 as one campaign, with the reference signatures
 * and reports of an unsharded run. Refuses shards of another seed, kernel, flow, shard count or
 * layout in one line, and names missing shards and trials (nothing written then). partial: take
 * whatever the shards hold (an MPI job resuming), no check, no signatures or reports. */
peat_status peat_fi_merge(const char *dir, const char *const *shards, int n, int partial,
                          peat_fi_result *res);
/* Terminal tables: outcomes per model x op, per layer, phase and bit, with 95% Wilson intervals. */
void peat_fi_print(FILE *f, const peat_fi_result *r);
/* Markdown tables and HTML (stacked outcome bars per model, per-bit SDC curve). */
void peat_fi_markdown(FILE *f, const peat_fi_result *r);
void peat_fi_html(FILE *f, const peat_fi_result *r);

#endif
