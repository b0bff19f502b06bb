/* predictor.h: the kernel-aware latency model (after PM2Lat): device description, clocks,
 * calibration tables, per-call prediction and the campaign budget planner (docs/predictor.md). */
#ifndef PEAT_PREDICTOR_H
#define PEAT_PREDICTOR_H

#include <stdint.h>

#include "peat/peat.h"

/* ---- device description ------------------------------------------------------------------- */

typedef struct peat_pred_device {
    char backend[16];       /* "cpu", "cuda", "hip" */
    char name[128];         /* model name as the OS or runtime reports it */
    int units;              /* parallel units: cores, SMs, CUs */
    int simd_width;         /* fp32 lanes of the widest vector unit (CPU), warp/wave size (GPU) */
    int64_t cache_bytes[3]; /* L1d, L2, L3 (CPU); L2 in [1] (GPU); 0 = unknown */
    int edge_tiles_padded;  /* 1: a partial tile costs a whole one (GPU blocks); 0: trimmed (CPU) */
    double peak_flops;      /* fp32 FLOP/s of one unit, measured (CPU) or from clocks (GPU) */
    double bandwidth;       /* bytes/s, measured (CPU) or from runtime queries (GPU) */
    double clock_mhz;       /* nominal clock, 0 = unknown */
} peat_pred_device;

/* Describes the CPU this process runs on: cores, SIMD width and caches from the OS, one-unit peak
 * and memory bandwidth measured (~30 ms). */
peat_status peat_predictor_device_cpu(peat_pred_device *d);
/* Fills the GPU fields from what a backend reports (units, peak clock, FP32 lanes per unit: 0 =
 * 64) and the bandwidth from its runtime queries (core/gpu); peak FLOP/s of one unit = 2 x lanes
 * x clock (0 when the clock is unknown: no baselines then). */
void peat_predictor_device_gpu(peat_pred_device *d, const char *backend, const char *name,
                               int units, double clock_mhz, double bandwidth, int warp,
                               int fp32_lanes);
/* Hash of what identifies the device (backend, name, units, SIMD, caches): measured numbers are
 * left out so that noise does not invalidate a cache. */
uint64_t peat_predictor_device_hash(const peat_pred_device *d);

/* Monotonic seconds. */
double peat_predictor_now(void);

/* ---- clocks -------------------------------------------------------------------------------- */

typedef struct peat_pred_clock {
    double mhz;      /* 0 = unknown */
    char source[16]; /* "cpufreq", "nvml", "rocm-smi" or "unknown" */
} peat_pred_clock;

/* Each reader returns PEAT_OK with the clock, or PEAT_ERR_UNSUPPORTED with c->mhz = 0 and
 * c->source "unknown" when its source is missing (no sysfs file, no library, no device). */
peat_status peat_predictor_clock_cpufreq(const char *sysfs_cpu_dir, int cpu, peat_pred_clock *c);
peat_status peat_predictor_clock_nvml(const char *libname, int device, peat_pred_clock *c);
peat_status peat_predictor_clock_rocm(const char *libname, int device, peat_pred_clock *c);
/* The reader for a backend with default sources ("cpu" -> cpufreq, "cuda" -> NVML, "hip" ->
 * ROCm SMI). */
peat_status peat_predictor_clock_read(const char *backend, int device, peat_pred_clock *c);

/* Runs fn until the clock is steady (two consecutive ~20 ms windows within 1%; where the clock
 * is unknown, the call time within 3%) or max_s passed. *steady = 1 when it settled. */
typedef void (*peat_pred_work_fn)(void *user);
peat_status peat_predictor_warmup(const char *backend, peat_pred_work_fn fn, void *user,
                                  double max_s, int *steady, peat_pred_clock *clock);

/* ---- the model ----------------------------------------------------------------------------- */

typedef enum peat_pred_class { PEAT_PRED_COMPUTE = 0, PEAT_PRED_MEMORY = 1 } peat_pred_class;

/* A compute op seen as tiles of a (batch x M x N) output with a K-deep reduction. */
typedef struct peat_pred_gemm_view {
    int64_t batch, m, n, k;
    double scale; /* flops = 2 batch m n k scale (0.5 for causal attention) */
} peat_pred_gemm_view;

/* The GEMM view of a call, 0 when the op has none (elementwise, row-wise ops). */
int peat_predictor_gemm_view(peat_op_kind op, const peat_op_params *p, peat_pred_gemm_view *v);

/* Tile and wave arithmetic of one call of a kernel on a device. */
typedef struct peat_pred_waves {
    int64_t tiles;     /* work tiles of the output */
    int64_t units;     /* parallel units the kernel uses */
    int64_t waves;     /* ceil(tiles / units) */
    double tile_flops; /* flops of one whole tile (quantised) */
    double work;       /* flops on the busiest unit: waves x tile work (padded or trimmed) */
} peat_pred_waves;

peat_status peat_predictor_waves(const peat_kernel_config *cfg, const peat_pred_device *d,
                                 const peat_pred_gemm_view *v, peat_pred_waves *w);
/* Shapes and dtypes of an op's inputs for params p (beta != 0 adds GEMM's C). */
void peat_predictor_inputs(peat_op_kind op, const peat_op_params *p, int *n_in, int nd[],
                           int64_t shapes[][PEAT_MAX_DIMS], peat_dtype dt[]);
/* Bytes one call reads and writes (inputs at 4 bytes per F32/I32 element, outputs at the
 * kernel's output dtype). */
double peat_predictor_call_bytes(const peat_kernel *k, const peat_op_params *p);
/* The roofline class of a call on a device: compute-bound when its op has a GEMM view and the
 * call's arithmetic intensity reaches the device's ridge point (peak / bandwidth). Calibration
 * classes a kernel by its measurements instead (docs/predictor.md). */
peat_pred_class peat_predictor_classify(const peat_kernel *k, const peat_op_params *p,
                                        const peat_pred_device *d);

/* ---- calibration tables -------------------------------------------------------------------- */

#define PEAT_PRED_MAX_POINTS 12
/* The steepest growth a power-law tail extrapolates with (docs/predictor.md). */
#define PEAT_PRED_TAIL_MAX 1.15

/* One kernel's calibration: time against the model variable x (wave work in flops for compute,
 * bytes for memory), sorted by x, times non-decreasing. */
typedef struct peat_pred_ktable {
    char kernel[64];
    uint64_t desc_hash;
    peat_pred_class cls;
    double overhead_s; /* time of an (almost) empty call: launch + fixed cost */
    double clock_mhz;  /* clock during calibration (0 unknown) */
    int power_tail;    /* beyond the last point: 0 the last segment's slope, 1 the power law
                          through the last two points (work that grows faster than linearly) */
    int n;
    double x[PEAT_PRED_MAX_POINTS];
    double t[PEAT_PRED_MAX_POINTS];
} peat_pred_ktable;

typedef struct peat_pred_table {
    peat_pred_device dev;
    char version[16];
    double cost_s; /* what calibration took */
    int n, cap;
    peat_pred_ktable *k;
} peat_pred_table;

/* Hash of everything in a kernel descriptor that can change its speed (name, op, backend,
 * dtypes, config, description) and of the code it runs (peat_predictor_module_hash of its
 * function). */
uint64_t peat_predictor_kernel_hash(const peat_kernel *k);
/* Hash of the contents of the executable or shared object that code lies in, read once per
 * process (module.c); 0 for NULL or where it cannot be read. A plugin rebuilt with the same
 * descriptor is thereby another kernel to the latency cache, as is a rebuilt peat. */
uint64_t peat_predictor_module_hash(const void *code);
/* The cache key of a table: device hash, peat version and the hash of every kernel's descriptor
 * hash in order, as a 16-hex-digit string; a change to any of them gives another key. */
void peat_predictor_table_key(const peat_pred_table *t, char key[17]);
/* Whether t still holds for kernel k (present, same descriptor hash). */
const peat_pred_ktable *peat_predictor_table_find(const peat_pred_table *t, const peat_kernel *k);
void peat_predictor_table_free(peat_pred_table *t);
peat_status peat_predictor_table_add(peat_pred_table *t, const peat_pred_ktable *kt);
/* Builds one kernel's table from measured (x, t) points and the empty-call time: sorts by x and
 * makes times non-decreasing (a later point never faster than an earlier one). */
peat_status peat_predictor_ktable_build(peat_pred_ktable *kt, int n, const double *x,
                                        const double *t, double overhead_s);
/* Time at x: exact at calibration points, linear between them, (0, overhead) below the first,
 * the last segment's slope (or power law, power_tail) beyond the last. Non-decreasing in x. */
double peat_predictor_ktable_eval(const peat_pred_ktable *kt, double x);

/* Plain rows, for storage by the caller (the harness writes them to HDF5 through store/). */
typedef struct peat_pred_row {
    char kernel[64];
    uint64_t desc_hash;
    int32_t cls, n, power_tail;
    double overhead_s, clock_mhz;
    double x[PEAT_PRED_MAX_POINTS], t[PEAT_PRED_MAX_POINTS];
} peat_pred_row;
void peat_predictor_row_from(const peat_pred_ktable *kt, peat_pred_row *r);
peat_status peat_predictor_row_to(const peat_pred_row *r, peat_pred_ktable *kt);

/* ---- calibration --------------------------------------------------------------------------- */

/* A synthetic call of an op at size n: params plus inputs filled with valid random values.
 * A CPU call's inputs come in sets of other random values, PEAT_PRED_VARY_BYTES in all (at most
 * PEAT_PRED_SETS sets), and timing copies them in turn into the inputs before each call (the
 * copies timed alone and taken off): a branch predictor that sees the same data call after call
 * learns its data-dependent branches (this project's AMD EPYC learns the ~45k branches of a ReLU
 * over 45k elements: 0.8 ns an element on a repeated input, 4.6 ns on fresh ones), while each of
 * a flow's calls sees new data (docs/predictor.md). */
#define PEAT_PRED_SETS       4096
#define PEAT_PRED_VARY_BYTES (1 << 20)
typedef struct peat_pred_call {
    peat_args a;
    peat_tensor *in[PEAT_MAX_IO];
    peat_tensor *pool[PEAT_MAX_IO]; /* input i's sets, back to back (set 0: in[i]'s values) */
    int n_sets;                     /* 1: no pool */
} peat_pred_call;
/* Params of op at size n; odd = 1 gives the held-out family (dimensions off the calibration
 * grid, never multiples of tiles). */
void peat_predictor_shape(peat_op_kind op, int n, int odd, peat_op_params *p);
peat_status peat_predictor_call_alloc(const peat_kernel *k, const peat_op_params *p, uint64_t seed,
                                      peat_pred_call *c);
void peat_predictor_call_free(peat_pred_call *c);
/* Median time of one call over at least 5 timings and min_s seconds (max_reps at most); CPU
 * kernels on the thread's CPU clock, device kernels on the wall clock. */
peat_status peat_predictor_time_call(const peat_kernel *k, const peat_pred_call *c, double min_s,
                                     int max_reps, double *median_s);
/* The quiet gate (calib.c): a CPU timing counts only when the probes around it, a fixed
 * L1-resident loop on the thread's CPU clock, ran within PEAT_PRED_QUIET of the fastest probe the
 * process has seen: a core slowed by its neighbours (a busy sibling thread, a host's clock
 * dropping under load) for seconds at a time is waited out, not averaged in. */
#define PEAT_PRED_QUIET 1.15
/* One probe: thread CPU seconds (the fastest of 3 runs of ~3 us); updates the process's best. */
double peat_predictor_probe(void);
/* The fastest probe this process has seen (0 before the first). */
double peat_predictor_probe_best(void);
/* Whether a probe of probe_s seconds is within PEAT_PRED_QUIET of the best (0: an ungated
 * timing, a device kernel's, counts as quiet). */
int peat_predictor_probe_quiet(double probe_s);
/* The median of the quiet ones (probe 0 or <= PEAT_PRED_QUIET x best) among n timings t with
 * their probes, or of all n when fewer than need are quiet; returns how many were quiet. n is at
 * most PEAT_PRED_GATE_MAX. */
#define PEAT_PRED_GATE_MAX 60
int peat_predictor_quiet_median(const double *t, const double *probe, int n, double best, int need,
                                double *med);
/* The relative standard error of the median of t[0..n) (2 <= n <= PEAT_PRED_GATE_MAX; INFINITY
 * otherwise), from the timings' median absolute deviation: sqrt(pi/2) 1.4826 MAD / sqrt(n) /
 * median. Calibration times a size again until its median's is within PEAT_PRED_SE, up to
 * PEAT_PRED_SE_PASSES x the passes asked for, while the kernel has been timed for less than
 * PEAT_PRED_SE_SPEND_S. */
double peat_predictor_median_se(const double *t, int n);
#define PEAT_PRED_SE        0.01
#define PEAT_PRED_SE_PASSES 4
/* ... and while the kernel's timing has taken less than this (seconds) */
#define PEAT_PRED_SE_SPEND_S 1.0
/* Gated timings this process has taken, and how many of them were quiet when taken. */
void peat_predictor_gate_stats(long *timings, long *quiet);
/* Adds what a child process timed (its timings, quiet ones, best probe) to this process's. */
void peat_predictor_gate_merge(long timings, long quiet, double best);
/* The calibration sizes of an op (ascending), returns how many. */
int peat_predictor_sizes(peat_op_kind op, int odd, int *sizes, int max);
/* Model variable of a call: wave work (compute) or bytes (memory). */
double peat_predictor_x(const peat_kernel *k, const peat_pred_device *d, peat_pred_class cls,
                        const peat_op_params *p);
/* Median over passes of the call time of k at each size of its op's calibration family (and,
 * when odd is not NULL, of the held-out family, timed in the same sweeps): fills the sizes and
 * times of each. CPU timings are gated (quiet ones only; sweeps go on, up to 3x passes, until
 * every size has passes quiet ones; the median of all where fewer than 3 are). */
peat_status peat_predictor_time_families(const peat_kernel *k, int passes, double min_s, int *n_cal,
                                         int *cal, double *t_cal, int *n_odd, int *odd,
                                         double *t_odd);
/* A kernel's table from times t at its calibration family's sizes: the class whose variable
 * interpolates the points best (leave-one-out), the overhead, the interpolation. */
peat_status peat_predictor_ktable_fit(const peat_kernel *k, const peat_pred_device *d, int n,
                                      const int *sizes, const double *t, peat_pred_ktable *kt);
/* The table of k from times t at its calibration sizes (ktable_fit), with the points far above
 * the line through their neighbours timed again; a point confirmed at 1.5x the line or more (an
 * effect of that size alone) is left out (docs/predictor.md). */
peat_status peat_predictor_ktable_refine(const peat_kernel *k, const peat_pred_device *d, int n,
                                         const int *sizes, const double *t, double min_s,
                                         peat_pred_ktable *kt);
/* Calibrates one kernel: times it at its op's sizes on this device (each size: median of passes
 * sweeps, each timing >= min_s). */
peat_status peat_predictor_calibrate_kernel(const peat_kernel *k, const peat_pred_device *d,
                                            double min_s, int passes, peat_pred_ktable *kt);

/* ---- prediction ---------------------------------------------------------------------------- */

/* Predicted seconds of one call of k; clock_mhz (0 = unknown) scales the compute part by
 * calibration clock / clock. PEAT_ERR_NOTFOUND when the table lacks k. */
peat_status peat_predictor_call(const peat_pred_table *t, const peat_kernel *k,
                                const peat_op_params *p, double clock_mhz, double *seconds);

/* ---- campaign plan ------------------------------------------------------------------------- */

typedef enum peat_pred_stage {
    PEAT_STAGE_PROFILE = 0, /* golden training, recording calls (+ exact outputs) */
    PEAT_STAGE_PLAYBACK,    /* each record through candidate and golden, errors accumulated */
    PEAT_STAGE_PROBES,      /* crafted calls of the op (+ GEMM's arithmetic-property call) */
    PEAT_STAGE_ANALYZE,     /* signatures, detector, commit of the campaign file */
    PEAT_STAGE_RUNTIME,     /* golden band and candidate in the training loop, in lockstep */
    PEAT_STAGE_FI,          /* playback FI trials (`peat inject`; not part of `peat run`) */
    PEAT_STAGE_OTHER,       /* resolve, open, report: independent of the plan */
    PEAT_STAGE_COUNT
} peat_pred_stage;
const char *peat_predictor_stage_name(peat_pred_stage s);

/* What each unit of work costs, in CPU seconds; filled by the harness from per-call predictions
 * and calibrated harness work (docs/predictor.md). Wall time follows from the share of a core
 * one thread gets and the cores the process gets (both measured: a shared machine gives less). */
typedef struct peat_pred_costs {
    double share; /* CPU seconds per wall second of one thread (0 = 1) */
    double cores; /* CPU seconds per wall second of the process's threads together (0 = share) */
    double contention; /* runtime FI: CPU seconds of a step with the runs side by side (threads
                          at once, two runs a thread) per CPU second of a step alone (0 = 1) */
    double iter_s;     /* one recorded golden training iteration (metrics row included) */
    double record_s;   /* one recorded call: clone, exact outputs, store */
    double replay_s;   /* one record replayed: candidate (+ repeat) + exact + errors accumulated */
    double replay_analysis_s; /* of replay_s: the magnitudes and errors accumulated, plots */
    double analysis_level;    /* that analysis measured in this process on the flow's own calls,
                                 per second the tables predict of the same adds (0: not measured) */
    double repeat_s;          /* the determinism repeat of one of the first `repeats` calls */
    double setup_s;        /* profile stage's own set-up: counting step, flow, checkpoint, eval */
    double probe_s;        /* one probe call: references, isolated candidate, its own signatures */
    double probe_fixed_s;  /* the probe stage's fixed part (GEMM's arithmetic-property call) */
    int probe_fixed_forks; /* isolated candidate calls of that part */
    double trial_s;        /* one FI trial */
    double runtime_iter_s; /* one lockstep iteration of every runtime-FI run, all threads */
    double runtime_iter_crit_s; /* of it, on the busiest thread */
    double runtime_eval_s;      /* one held-out evaluation of every runtime-FI run */
    double runtime_eval_crit_s; /* of it, on the busiest thread */
    double runtime_fixed_s;     /* the runtime runs' set-up, checkpoints and stored curves */
    double analyze_fixed_s;     /* detector, commit of the campaign file */
    double other_s;             /* resolve, open, report */
    /* work that grows faster than the calls: the signatures of all output elements (sorts),
     * and isolating each call from a process that holds every record so far */
    peat_pred_ktable analysis; /* seconds at total elements (n = 0: none) */
    double elems_per_call;
    peat_pred_ktable isolate; /* seconds per call at resident record bytes (n = 0: none) */
    double bytes_per_call;
    double base_bytes; /* resident bytes before the records (isolation's x is the process's) */
    double held_bytes; /* what the campaign holds beside its records while it forks: the
                          analyzer's accumulators, the report's plots (docs/predictor.md) */
} peat_pred_costs;

/* The size of a campaign. A stage with count 0 does not run. */
typedef struct peat_pred_plan {
    int64_t iters;   /* profiled training iterations */
    int64_t calls;   /* calls recorded (and replayed) */
    int64_t repeats; /* of those, replayed twice (determinism) */
    int64_t probes;
    int64_t trials;    /* FI trials */
    int runtime_runs;  /* runtime-FI runs in lockstep: band (golden included) + one a frequency */
    int runtime_freqs; /* of those, the candidate's (one per frequency) */
    int64_t runtime_iters;
    double stage_s[PEAT_STAGE_COUNT];     /* wall seconds */
    double stage_cpu_s[PEAT_STAGE_COUNT]; /* CPU seconds (this process and its children) */
    double total_s, total_cpu_s;
} peat_pred_plan;

/* Runtime FI evaluates the held-out set about this many times a run: every iters/5 iterations
 * and at the last (a gpt evaluation costs about 20 forward passes, so ten a run doubled each
 * run's cost; the points kept are a subset of the ten: an accuracy drop is still sampled at the
 * end and at every fifth of the run). */
#define PEAT_PRED_RUNTIME_EVALS 5
/* The interval: iters / PEAT_PRED_RUNTIME_EVALS (at least 1). harness/runtime/runtime.c schedules
 * by it. */
int64_t peat_predictor_runtime_eval_every(int64_t iters);
/* Held-out evaluations of a runtime-FI run of iters iterations (every interval, and the last). */
int64_t peat_predictor_runtime_evals(int64_t iters);
/* CPU seconds of one isolated call (the fork and the child) from a campaign process that holds
 * `calls` records (c->isolate at base + held + calls x bytes per call; 0 without a curve). */
double peat_predictor_isolate_s(const peat_pred_costs *c, int64_t calls);
/* Fills stage_s and total_s of p from costs. */
void peat_predictor_plan_cost(const peat_pred_costs *c, peat_pred_plan *p);

/* Runtime FI's iterations that fit left_s at pace x its predicted time: p's, or fewer (never
 * below min_iters, nor above p's). */
int64_t peat_predictor_runtime_fit(const peat_pred_costs *c, const peat_pred_plan *p,
                                   int64_t min_iters, double pace, double left_s);

/* Closed-loop steering of runtime FI while it trains (docs/predictor.md): after `done`
 * iterations, which took elapsed_s of wall time with their evaluations (every `every`
 * iterations, and at the last), the stage still has left_s. The last window_n of those
 * iterations took window_s: their pace follows a change of load sooner than the whole run's. */
typedef struct peat_pred_steer {
    int64_t done, every;
    double elapsed_s, left_s;
    int64_t window_n;
    double window_s;
    int64_t min_iters, max_iters; /* the smallest campaign's, and the most the run may grow to */
} peat_pred_steer;
/* Iterations in the window whose pace steers (fewer: the whole run's pace). */
#define PEAT_PRED_STEER_WINDOW 5
/* Closed-loop steering of playback, before each replayed call: `replayed` calls replayed with
 * the one about to run, at `pace` wall seconds per predicted CPU second of playback so far; the
 * stages after it at later_pace times their predicted wall seconds; left_s to the deadline. */
typedef struct peat_pred_playback_steer {
    int64_t replayed, min_calls, min_runtime_iters;
    double pace, later_pace, left_s;
} peat_pred_playback_steer;
/* Whether the call fits: it, then probes (forks like playback: at its pace), analyze, runtime FI
 * at its smallest (it steers itself) and the rest (at later_pace) within left_s; a call of the
 * smallest campaign always does. */
int peat_predictor_playback_go(const peat_pred_costs *c, const peat_pred_plan *p,
                               const peat_pred_playback_steer *s);
/* Held-out evaluations of iters iterations evaluated every `every` (and at the last). */
int64_t peat_predictor_evals_every(int64_t iters, int64_t every);
/* The pace of the iterations done: their wall time over their prediction (1 before any), over
 * the window when it holds PEAT_PRED_STEER_WINDOW iterations or more, clamped to 0.2 .. 10. */
double peat_predictor_steer_pace(const peat_pred_costs *c, const peat_pred_steer *s);
/* Runtime FI's new total of iterations: the largest n in [max(done + 1, min_iters), max_iters]
 * whose remaining iterations and evaluations, at the pace the done ones went, fit left_s (cut
 * when the run is behind, extended when ahead); max(done + 1, min_iters) when none does. */
int64_t peat_predictor_runtime_steer(const peat_pred_costs *c, const peat_pred_steer *s);

/* The smallest useful campaign and the largest default: the planner never goes below min nor
 * above max in any count (max.calls etc. = 0 means the stage is off). */
typedef struct peat_pred_limits {
    peat_pred_plan min, max;
} peat_pred_limits;

/* Largest plan within budget_s: counts grow together from min towards max. PEAT_ERR_INVAL with
 * the minimum it needs in the message when even min does not fit. */
peat_status peat_predictor_plan_fit(const peat_pred_costs *c, const peat_pred_limits *l,
                                    double budget_s, peat_pred_plan *out);

#endif
