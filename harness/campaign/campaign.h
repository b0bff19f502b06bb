/* campaign.h: the `peat run` pipeline (resolve -> plan -> open -> profile -> playback -> analyze
 * -> detect -> commit -> report; harness/campaign/stages.h): its options, result and report
 * writers. */
#ifndef PEAT_CAMPAIGN_H
#define PEAT_CAMPAIGN_H

#include <stdio.h>

#include "detector/detector.h"
#include "harness/campaign/coverage.h"
#include "harness/campaign/plots.h"
#include "core/clock.h"
#include "core/freq.h"
#include "core/iter_spec.h"
#include "core/record.h"
#include "models/models.h"

#define PEAT_MAX_PLUGINS         8
#define PEAT_CAMPAIGN_MAX_PROBES 48

typedef struct peat_campaign_opts {
    const char *kernel;  /* candidate under test (required) */
    const char *flow;    /* NULL = first flow that calls the kernel's op */
    const char *backend; /* "auto" (default), "cpu", "cuda", "hip" */
    int64_t iters;       /* training iterations to profile (0 = flow default) */
    int64_t calls;       /* op calls to record and replay (0 = default) */
    uint64_t seed;
    const char *out_dir; /* NULL = peat-out/<kernel>-<flow>-<UTC time> */
    const char *plugins[PEAT_MAX_PLUGINS];
    int n_plugins;
    int resume;              /* continue the campaign in out_dir */
    int force;               /* replace a finished campaign in out_dir */
    int isolate;             /* run the candidate in a child process (crash/hang safe) */
    double kernel_timeout_s; /* per call, when isolated */
    const char *hang_policy; /* "skip" (default): after a hang, the remaining calls are skipped;
                                "wait": each runs to its deadline */
    int repeats;             /* calls replayed twice to test determinism */
    int no_probes;           /* skip the probe stage (--no-probes) */
    int quiet;
    int json;         /* print only the verdict as JSON (implies quiet) */
    FILE *table;      /* where the report stage prints the verdict table (the JSON verdict with
                         json); NULL: nowhere (tests, calibration, benchmarks) */
    const char *argv; /* command line, recorded in the campaign file */
    /* recording policy (docs/cli.md) */
    const char *record_ops;                 /* "gemm,softmax" or "all"; NULL = the kernel's op */
    int64_t record_every;                   /* every k-th call; 0 = spread --calls over the run */
    int64_t record_iter_lo, record_iter_hi; /* iteration window [lo, hi); hi 0 = to the end */
    const char *record_phase;               /* "fwd,bwd,opt" subset; NULL = all */
    const char *checkpoint_iters;           /* "last" (default), "none", "every:N", "0,10,59" */
    const char *activation_iters; /* NULL/"none", or as above: outputs of every forward op */
    const char *compress;         /* "auto" (default), "all", "none" or a percent (docs/cli.md) */
    int record_exact;             /* store the fp64 exact outputs too (default: recomputed) */
    /* training */
    const char *optimizer;        /* "adamw" (default), "sgd" or "sgd_nesterov" */
    int task;                     /* 0 pretraining task, 1 shifted task */
    int batch, width, depth, seq; /* flow sizes (0 = the flow's default; docs/flows.md) */
    const char *size;             /* size preset: "tiny" (default, NULL), "small", "base" */
    const char *precision;        /* "fp32" (default, NULL), "amp-fp16", "bf16" (docs/flows.md) */
    double loss_scale_init;       /* amp-fp16's first loss scale (0 = 65536) */
    int loss_scale_interval;      /* amp-fp16's growth interval in steps (0 = 2000) */
    double lr;                    /* learning rate (0 = the flow's default) */
    const char *finetune_from;    /* campaign.h5 whose last checkpoint initialises the flow */
    const char *capture; /* calls captured from PyTorch (python/peat_torch) replace the flow */
    /* "90s", "5m", "1h": plan iterations and calls to fit (stage_plan.c); NULL = no plan */
    const char *budget;
    const char *cache_dir; /* latency cache; NULL = $PEAT_CACHE_DIR, ~/.cache/peat */
    /* runtime FI (docs/fault-injection.md): the candidate in the training loop */
    int no_runtime;      /* skip the runtime stage */
    int no_diagnose;     /* skip the differential diagnosis (`peat judge`: its experiments are
                            new calls, which only a live kernel answers) */
    int no_golden_cache; /* train the golden profile and band here, whatever the cache has */
    int no_sequences;    /* skip the call sequences (the kernel's state across calls) */
    /* the frequencies (peat_freq_schedule_parse of "1,1/10,p=0.01"; peat_campaign_opts_default:
     * "1", every call) */
    peat_freq_schedule runtime_freq;
    int runtime_band;          /* band runs R, golden included (0 = 3) */
    const char *runtime_model; /* an error model on the kernel in the loop instead of the kernel
                                  alone (`bitflip(bit=30)`; docs/fault-injection.md) */
    /* scale-out (docs/scale-out.md): `peat run --shard I/N` trains only its share of the runtime
     * FI runs into OUT/run-shard-I-of-N.bin (shard 0 also runs every other stage and leaves the
     * campaign partial); `peat merge OUT` runs the campaign with merge_shards, the N shard files
     * read (harness/scale/run_shard.h), judging their runs and completing the campaign */
    const char *shard;      /* "I/N" (NULL: the whole campaign) */
    const char *shard_line; /* the command line that decides the runs (the shard files carry it) */
    struct peat_scale_run_shard *merge_shards;
    int n_merge_shards;
    /* called with each stage's name before it runs (`peat calls export` tags the calls it tapes
     * with their stage); NULL: nothing */
    void (*on_stage)(void *user, const char *stage);
    void *on_stage_user;
} peat_campaign_opts;

/* The recording-policy specs (policy.c; iteration lists are core/iter_spec.h's). */
/* Parses an op list ("all" or comma-separated op names) into a mask. */
peat_status peat_campaign_op_mask_parse(const char *list, uint64_t *mask);
/* Parses --compress ("auto", "all", "none", or a percent 1..100) into store settings. */
peat_status peat_campaign_compress_parse(const char *spec, int *deflate_level, int *min_saving_pct);
/* Parses a phase list ("fwd,bwd,opt"). */
peat_status peat_campaign_phase_parse(const char *list, int *fwd, int *bwd, int *opt);

void peat_campaign_opts_default(peat_campaign_opts *o);
/* CPU seconds of this process's threads and its reaped children (the isolated calls). */
double peat_campaign_cpu_s(void);
/* The flow's configuration from the training options (stage_profile.c). */
peat_flow_config peat_campaign_flow_config(const peat_campaign_opts *o);

/* Defaults of `peat run` (benchmarks use them to measure "the default campaign"). */
#define PEAT_CAMPAIGN_DEFAULT_CALLS 96
int64_t peat_campaign_default_iters(const char *flow);

typedef struct peat_campaign_result {
    char out_dir[512];
    char flow[32];
    char backend[16];
    char device[128]; /* the backend's device ("opencl: Portable Computing Language: ...") */
    char blas[96];    /* what the CPU's golden GEMM runs on (peat_golden_blas_describe); "" else */
    peat_signature cand, golden;
    peat_finding findings[8];
    int n_findings;
    peat_acceptance verdict;
    int64_t n_records;
    int64_t n_kernel_failures; /* calls on which the candidate crashed, hung or failed */
    char kernel_failure[256];  /* first such failure */
    /* calls the runner saw misbehave (harness/isolate/isolate.c); the first of each described */
    int64_t n_due;             /* ended the process without completing (in n_kernel_failures) */
    int64_t n_hang_skipped;    /* not run after the kernel hung (in n_kernel_failures) */
    int64_t n_oob_writes;      /* wrote outside an output buffer */
    int64_t n_input_mutations; /* wrote into an input */
    char due[256], oob_write[256], input_mutation[256];
    /* call sequences (stage_sequence.c): calls made, those whose output depended on the call
     * history (the first described), and which sequences ran ("" when none) */
    int64_t n_sequence_calls, n_stateful;
    char stateful[256], sequences[256];
    double loss_first, loss_last;
    /* --precision other than fp32: what it was and the loss scaler's course ("" at fp32) */
    char precision[192];
    int64_t skipped_steps;           /* amp-fp16 optimizer steps skipped by the loss scaler */
    double eval_loss, eval_accuracy; /* held-out, after training (golden) */
    int64_t n_checkpoints, n_activation_records, n_stored_records;
    double t_profile, t_playback, t_analyze, t_total;
    /* the golden cache (harness/campaign/golden_cache.h): "profile and band from the golden cache",
     * "stored in the golden cache", or why it was not used */
    char golden_cache[128];
    peat_plot_data plots; /* report.html's error histograms and heatmap (playback) */
    /* parts of playback: recomputing exact outputs and magnitudes, and the analyzer's pass (with
     * the report's plots) */
    double t_reference, t_analyzer;
    /* the analyze stage's two signatures (the rest of the analyze clock: detect and commit) */
    double t_signatures;
    /* plan (--budget): the budget, what planning took, predicted seconds per reported clock
     * (profile, playback, probes, analyze, runtime FI) and in all, and the recorded calls playback
     * left out when the run went slower than predicted */
    double budget_s, t_plan, pred_profile, pred_playback, pred_probe, pred_analyze, pred_runtime,
        pred_total;
    int64_t n_budget_skipped, plan_iters, plan_calls;
    char plan_note[160]; /* e.g. "clock unknown (no cpufreq, NVML or ROCm SMI)" */
    /* strata of the candidate's op seen in training vs recorded (empty with --record-every) */
    peat_coverage coverage;
    /* probe stage: one outcome per probe call; GEMM arithmetic properties of both kernels */
    peat_probe_outcome probes[PEAT_CAMPAIGN_MAX_PROBES];
    int n_probes;
    int have_props;
    peat_gemm_props props_cand, props_gold;
    double t_probe;
    /* --capture: the aten ops the capture left unmapped, most calls first ("op (N calls:
     * why); ...", "" when none), and how many */
    char capture_unmapped[512];
    int capture_n_unmapped;
    /* diagnose stage: the differential diagnosis's experiments on one failing call, and the
     * finding they decided (have_diagnosed: it replaces the numeric primary; docs/detector.md) */
    peat_diagnosis diagnosis;
    peat_finding diagnosed;
    int have_diagnosed;
    /* runtime FI: the candidate in the training loop, one verdict per frequency
     * (docs/fault-injection.md); its findings are also in findings[] */
    int n_runtime;
    char runtime_run[4][64];
    peat_runtime_verdict runtime[4];
    int64_t runtime_swapped[4];
    int runtime_band;
    int64_t runtime_iters; /* iterations the runs trained (fewer than profiled: the budget) */
    double t_runtime;
    /* CPU seconds of this process and its children per reported clock (other: resolve, plan,
     * open, report), beside the wall seconds: what the predictor's CPU model is checked on */
    double cpu_profile, cpu_playback, cpu_probe, cpu_analyze, cpu_runtime, cpu_other;
    const struct peat_runtime_result *rt; /* the curves, while the report is written */
} peat_campaign_result;

/* Creates a directory and its parents; refuses a path that is not a writable directory. */
peat_status peat_campaign_mkdir_p(const char *path);

/* Rewrites an output folder's name (one path component made of a kernel, flow, backend or suite
 * name) in place to letters, digits, '-', '_' and '.', every other byte becoming '_': a flow
 * "torch:TinyGPT" made a name with a colon, which scp, make and Windows file systems refuse. */
void peat_campaign_safe_name(char *name);

#endif
