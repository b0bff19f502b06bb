/* latency.h: the harness side of the predictor: device description and warm-up per backend, the
 * calibration of every registered kernel and of the harness's own per-call work with its HDF5
 * cache, and per-call / per-iteration / per-stage campaign predictions and budget plans. */
#ifndef PEAT_HARNESS_LATENCY_H
#define PEAT_HARNESS_LATENCY_H

#include <stdio.h>

#include "analyzer/probe.h"
#include "core/record.h"
#include "harness/campaign/campaign.h"
#include "models/models.h"
#include "predictor/predictor.h"

/* The version a latency cache's tables are kept under: PEAT's, and the calibration method's,
 * raised when the way kernels are timed changes (cal2: CPU calls on fresh input sets; cal4: a size
 * timed until its median's standard error is within 1%), so that tables timed another way are
 * timed again rather than mixed with new ones. cal3 and cal5 marked built-in kernels' code
 * changes (the golden embedding's row copies and four-row reductions; the branch-free conv
 * loops); a row's key now covers the code itself (peat_predictor_module_hash), so a code change
 * needs no raise. */
#define PEAT_LATENCY_TABLE_VERSION PEAT_VERSION_STRING "+cal5"

/* CPU seconds of the calling thread (kernels and harness work are timed on it: the wall clock of
 * a shared machine also counts other jobs' time slices). */
double peat_latency_thread_cpu_s(void);
/* CPU seconds of every thread of this process (work that runs on helper threads of its own, such
 * as the two signatures of a pair). */
double peat_latency_process_cpu_s(void);

/* Resident bytes of this process (0 where /proc is missing). */
double peat_latency_rss_bytes(void);

/* The device of a backend, warmed up. */
typedef struct peat_latency_env {
    peat_pred_device dev;
    peat_pred_clock clock; /* source "unknown" where the clock cannot be read */
    int steady;            /* the warm-up saw steady clocks (or call times) */
    double core_share;     /* CPU time / wall time this process got while warming up (<= 1 on a
                              shared machine): CPU-clock predictions are divided by it */
    double cores;          /* CPU time / wall time of one busy thread a CPU (>= core_share):
                              what multi-threaded stages (runtime FI's lockstep) get */
    /* the warm-up's GEMM timed once warm (CPU seconds), against the table's prediction of it:
     * slowdown = measured / predicted (1 until peat_latency_env_speed) */
    const peat_kernel *ref_kernel;
    peat_op_params ref_params;
    double ref_call_s, slowdown;
} peat_latency_env;

/* Describes the device of a backend ("cpu", "cuda", "hip"; "auto" = cpu) and warms it up. */
peat_status peat_latency_env_init(const char *backend, peat_latency_env *env);
/* Sets env->slowdown from the reference call and table t: kernel and harness-work predictions
 * from the table are multiplied by it (clamped to 0.5 .. 3). */
void peat_latency_env_speed(peat_latency_env *env, const peat_pred_table *t);
/* The same, for callers that want the device and its clock only (the benchmark). */
peat_status peat_latency_device(const char *backend, peat_pred_device *d, peat_pred_clock *clk);

/* The harness's own work, calibrated like kernels (pseudo-kernels in the same table):
 * model variable x in parentheses. */
typedef enum peat_latency_work {
    PEAT_WORK_RECORD = 0, /* clone a call and write it to the campaign file (bytes) */
    PEAT_WORK_ANALYZE,    /* errors of output elements added to the candidate's and golden's
                             accumulators (elements) */
    PEAT_WORK_SIGNATURE,  /* the two signatures of a campaign's elements (elements in all) */
    PEAT_WORK_ISOLATE,    /* one call in a child process: fork, shared outputs, wait (bytes the
                             process holds beyond its start) */
    PEAT_WORK_DISPATCH,   /* one op call through the exec context with a hook (1) */
    PEAT_WORK_METRICS,    /* one training iteration's metrics row appended to the file (1) */
    PEAT_WORK_JUDGE,      /* a probe's judgement: two accumulators fed N elements, their
                             signatures and the detector (elements) */
    PEAT_WORK_COMMIT,     /* the commit stage: the file reopened, signatures written, closed
                             (bytes already in the file) */
    PEAT_WORK_HELD,       /* not seconds: the resident bytes two accumulators hold (elements
                             each), which every isolation fork of playback and probes copies */
    PEAT_WORK_COUNT
} peat_latency_work;
/* The descriptor that names a pseudo-kernel (its hash keys its cache row). */
const peat_kernel *peat_latency_work_kernel(peat_latency_work w);
/* Times harness work w on synthetic calls (a few sizes) into kt. */
peat_status peat_latency_work_calibrate(peat_latency_work w, peat_pred_ktable *kt);
/* A replayed call of k from this process as it is now, measured on the n params p (the flow's
 * own calls; mean of each one's median of 5): isolate_s (0 unless fork) what forking adds to it
 * (the candidate forked and the exact reference after it, against both unforked): the isolation
 * curve's level where a campaign will fork (its slope over resident bytes is the calibrated one);
 * guard_s what playback's guards add with or without a fork (guarded outputs, input copies, the
 * checks for stray writes), against the two calls alone; analysis_t[i] what playback's analysis
 * of call i's analysis_x[i] output elements takes after the call, as the campaign makes it, into
 * accumulators that start empty
 * (stage_playback.c's peat_campaign_playback_accumulate: magnitudes, both accumulators, plots), for
 * each of the n calls in turn (at most PEAT_LATENCY_REPLAY_MAX): the mean of 5, not their median,
 * as the campaign pays every add and some adds cost more by their nature (a sample set that grows
 * or is cut: mlp's 2048-element call took 0.18 ms and 0.38-0.61 ms every other add) */
#define PEAT_LATENCY_REPLAY_MAX 4
typedef struct peat_latency_replay {
    double isolate_s, guard_s; /* per call */
    double analysis_x[PEAT_LATENCY_REPLAY_MAX], analysis_t[PEAT_LATENCY_REPLAY_MAX];
    int n_analysis;
} peat_latency_replay;
peat_status peat_latency_replay_now(const peat_kernel *k, const peat_op_params *p, int n, int fork,
                                    peat_latency_replay *r);
/* Predicted seconds of harness work w at x. */
double peat_latency_work_s(const peat_pred_table *t, peat_latency_work w, double x);
/* A band rerun of runtime FI as a pseudo-kernel: band member r (1 .. PEAT_RUNTIME_MAX_BAND - 1)
 * runs the op's golden kernel through its `reorder` model (harness/runtime/runtime.c), so that its
 * calls are calibrated like a kernel's. NULL when the op has no golden CPU kernel. */
const peat_kernel *peat_latency_band_kernel(peat_op_kind op, int r);

/* What calibrate-latency did. */
typedef struct peat_latency_calib {
    char cache_path[512];
    int n_reused, n_calibrated;
    int n_failed;  /* candidates that crashed, exited or hung while timed: left out */
    double cost_s; /* of this calibration (0 when all came from the cache) */
} peat_latency_calib;

/* The calibration table of every registered kernel of the env's backend and of the harness work,
 * taken from the cache where the device and the kernel's descriptor are unchanged, measured (and
 * the cache rewritten) otherwise. force: measure all. only: when not NULL, the one candidate
 * measured (other candidates keep their cached rows, if any: a campaign plans for one, and
 * another plugin kernel that hangs must not cost it). Candidates are timed in a forked child;
 * one that crashes, exits or hangs there is left out and counted in out->n_failed. cache_dir
 * NULL: $PEAT_CACHE_DIR, else $XDG_CACHE_HOME/peat, else ~/.cache/peat. */
peat_status peat_latency_calibrate(const peat_latency_env *env, const char *cache_dir, int force,
                                   const peat_kernel *only, peat_pred_table *t,
                                   peat_latency_calib *out, FILE *log);
/* Calibrates the band reruns (1 .. runs - 1) of runtime FI on op that t lacks, adds them to t
 * and rewrites the cache (counted in calib). */
peat_status peat_latency_calibrate_band(const peat_latency_env *env, peat_op_kind op, int runs,
                                        peat_pred_table *t, peat_latency_calib *calib);
/* The cache file of a device (directory created). */
peat_status peat_latency_cache_path(const char *cache_dir, const peat_pred_device *d, char *buf,
                                    size_t n);
/* Writes / reads the rows of t (only rows whose kernel descriptor hash is unchanged are kept
 * by the reader's caller, via peat_predictor_table_find). */
peat_status peat_latency_cache_save(const char *path, const peat_pred_table *t);
peat_status peat_latency_cache_load(const char *path, const peat_pred_device *d,
                                    peat_pred_table *t);

/* ---- prediction of a campaign -------------------------------------------------------------- */

/* One op call of a training iteration. */
typedef struct peat_latency_call {
    peat_op_kind op;
    peat_op_params p;
    peat_phase phase;
} peat_latency_call;

/* The calls of one training iteration of a flow and of one held-out evaluation (captured from a
 * throwaway flow), with what the stages' set-up costs depend on. */
typedef struct peat_latency_flow {
    peat_latency_call *calls; /* [0, n_step): one training step; [n_step, n): one evaluation */
    int64_t n, cap, n_step;
    double create_s;       /* CPU seconds of the flow's creation (data, weights) */
    double step_s;         /* CPU seconds of a training step, measured (median of 3 after the
                              first): the ops and all the flow does around them */
    double eval_s;         /* CPU seconds of a held-out evaluation, measured the same way */
    double state_bytes;    /* a checkpoint: weights and optimizer state */
    double side_factor;    /* CPU seconds of a step with runs side by side (runtime FI) per
                              CPU second of a step alone (>= 1 where they contend) */
    double distance_s;     /* runtime FI's weight distance of one run from the golden run's,
                              after each iteration (peat_runtime_distance_s) */
    peat_record_list op;   /* the step's calls of the captured op, recorded as profile does */
    peat_probe_set probes; /* the probe stage's calls, made from those records as it does */
} peat_latency_flow;
/* Captures flow's calls; the calls of op (PEAT_OP_COUNT: none) also as records. */
peat_status peat_latency_flow_capture(const char *flow, const peat_flow_config *cfg,
                                      peat_op_kind op, peat_latency_flow *out);
void peat_latency_flow_free(peat_latency_flow *f);

/* Predicted seconds of one call of the op of kernel k in each role. */
typedef struct peat_latency_callcost {
    double golden_s, candidate_s, exact_s;
    double record_s, replay_s; /* with the harness work around it */
    double bytes, elems;
} peat_latency_callcost;

/* Per-unit costs of a campaign of candidate k on flow calls fl, with the stages and their
 * settings (probes, runtime FI runs and frequencies, repeats) that run options o select (the
 * same struct `peat run` reads; NULL = its defaults). */
peat_status peat_latency_costs(const peat_pred_table *t, const peat_latency_env *env,
                               const peat_kernel *k, const peat_latency_flow *fl,
                               const peat_campaign_opts *o, peat_pred_costs *c);
/* The counts of a campaign of iters x calls that options o (NULL = defaults) run: repeats,
 * probes, runtime-FI runs, frequencies and iterations. */
peat_status peat_latency_plan_counts(const peat_latency_flow *fl, const peat_campaign_opts *o,
                                     int64_t iters, int64_t calls, peat_pred_plan *p);
/* Per-call costs of the j-th call of k's op in the flow (j < count of such calls). */
peat_status peat_latency_call_cost(const peat_pred_table *t, const peat_latency_env *env,
                                   const peat_kernel *k, const peat_latency_call *call,
                                   peat_latency_callcost *cc);

/* The smallest useful and the largest campaign for a flow (docs/predictor.md), with the other
 * counts as options o run them. */
peat_status peat_latency_limits(const peat_latency_flow *fl, const peat_campaign_opts *o,
                                int64_t default_iters, int64_t default_calls, peat_pred_limits *l);

/* Writes the `peat predict` report: per op call, per iteration, per stage and totals. */
void peat_latency_print(FILE *f, const peat_latency_env *env, const peat_kernel *k,
                        const char *flow, const peat_pred_table *t, const peat_latency_flow *fl,
                        const peat_pred_costs *c, const peat_pred_plan *plan);

#endif
