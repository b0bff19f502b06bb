/* runtime.h: runtime fault injection: training with a faulty kernel in the loop, judged against
 * the golden noise band (docs/fault-injection.md). */
#ifndef PEAT_RUNTIME_RUNTIME_H
#define PEAT_RUNTIME_RUNTIME_H

#include "harness/runtime/call.h"
#include "core/freq.h"
#include "harness/scale/run_shard.h"
#include "detector/detector.h"
#include "models/models.h"
#include "store/store.h"

#define PEAT_RUNTIME_MAX_FREQS PEAT_FREQ_MAX
#define PEAT_RUNTIME_MAX_BAND  6
_Static_assert(PEAT_RUNTIME_MAX_BAND + PEAT_RUNTIME_MAX_FREQS <= PEAT_RUN_SHARD_MAX_RUNS,
               "a run shard file holds every run of the lockstep");
#define PEAT_RUNTIME_DEFAULT_BAND  3
#define PEAT_RUNTIME_DEFAULT_FREQS "1" /* the candidate in place of the golden on every call */

typedef struct peat_runtime_opts {
    const char *flow;
    peat_flow_config cfg; /* the profiled flow's config (seed, sizes, optimizer) */
    int64_t iters;
    peat_op_kind op;
    const peat_kernel *candidate; /* the faulty computation: a kernel ... */
    int isolate;                  /* ... called through the isolated worker (else in-process) */
    double kernel_timeout_s;      /* per candidate call (0 = none) */
    /* the shadow check of the candidate's calls (runtime_call.h; a candidate kernel only):
     * on, its schedule (0: the defaults) and the candidate's largest error / bound on the
     * playback's fresh calls (self_norm; 0 when unknown) */
    peat_runtime_shadow shadow;
    const char *model;               /* ... or a pseudo-error model spec on the golden kernel */
    const peat_kernel *model_kernel; /* the kernel the model runs on (NULL: the golden) */
    uint64_t model_seed;
    /* the frequencies, one faulty run each (peat_freq_schedule_parse of "1", "1,1/10,p=0.01") */
    peat_freq_schedule freqs;
    int band_runs;      /* R, golden run included (0 = PEAT_RUNTIME_DEFAULT_BAND) */
    int64_t eval_every; /* held-out evaluation interval (0 = iters / PEAT_PRED_RUNTIME_EVALS) */
    int64_t iter_lo, iter_hi;     /* swap window (hi 0 = to the end) */
    uint32_t phases;              /* swap phases (0 = all) */
    const char *layers;           /* swap layers (NULL = all) */
    const char *checkpoint_iters; /* faulty runs' checkpoints in the store ("last", "none", ...) */
    peat_store_t *store;          /* NULL = nothing stored */
    int threads;                  /* runs trained side by side (0 = online CPUs) */
    /* `mpirun -n N peat run` (n_ranks > 1): this rank trains the golden run (every rank's
     * distance reference) and the members i >= 1 with i mod n_ranks == rank; ranks > 0 send
     * their curves, distances and checkpoints to rank 0 (runtime_ranks.h), which judges and
     * stores them as one process would; ranks > 0 have no store */
    int rank, n_ranks;
    /* `peat run --shard I/N` (rank I of n_ranks N, no MPI): the runs this shard trained (on shard
     * 0 the golden run too) and their checkpoints go into *shard, the body the ranks send rank 0
     * (runtime_ranks.c's pack); nothing is judged or stored */
    struct peat_scale_pack *shard;
    /* steering (`peat run --budget`): after each iteration, the runs' new total of iterations
     * from the iterations done and the wall seconds they took (evaluations every `every`);
     * clamped to done + 1 .. max_iters. NULL: o->iters, fixed */
    int64_t (*steer)(void *user, int64_t done, int64_t every, double loop_s);
    void *steer_user;
    int64_t max_iters; /* what steering may grow to (0 = iters) */
    /* the profile's golden run (NULL or empty: the golden run trains here): its logged
     * iterations replayed, trained on from its last when the runs go further */
    const struct peat_runtime_golden_log *golden;
    /* the golden cache (golden_cache.h): band_in, the band reruns an earlier campaign of the same
     * key trained (not trained here: their curves and distances are taken from it); band_out,
     * where the reruns trained here are packed for the cache (NULL: neither) */
    struct peat_scale_pack *band_in, *band_out;
} peat_runtime_opts;

/* One run's curves. */
typedef struct peat_runtime_run {
    char label[64]; /* "golden", "reorder(order=pairwise,split=4)", "gemm_new @ 1/10" */
    char freq[32];  /* faulty runs: the frequency */
    double *loss, *wdist, *eval_acc;
    int64_t *nonfinite;
    int64_t first_nonfinite;    /* -1 if none */
    int64_t swapped;            /* calls the faulty computation ran */
    int64_t ended_iter;         /* the candidate crashed, hung, exited or wrote astray here: the
                                   run stopped (verdict DUE); -1 if not */
    char ended[256];            /* why, one line */
    peat_runtime_shadow shadow; /* faulty runs of a candidate: the shadow check's tally (not
                                   carried across MPI ranks or run shards) */
} peat_runtime_run;

typedef struct peat_runtime_result {
    int64_t n, n_eval; /* iterations trained (o->iters, or what steering made of them) */
    int64_t *eval_iter;
    int n_band, n_faulty;
    peat_runtime_run band[PEAT_RUNTIME_MAX_BAND];
    peat_runtime_run faulty[PEAT_RUNTIME_MAX_FREQS];
    peat_runtime_band b;
    peat_runtime_verdict verdict[PEAT_RUNTIME_MAX_FREQS];
    double t_total;
} peat_runtime_result;

/* The inject model of band rerun r (1 .. PEAT_RUNTIME_MAX_BAND - 1; run 0 is the golden run) on
 * this machine: the listed orders (peat_runtime_band_listed), those that give the CPU
 * golden GEMM's own sums moved to the end (peat_runtime_band_order). */
const char *peat_runtime_band_spec(int r);
/* Band order r as listed (docs/detector.md, "The band's reorder GEMMs"), whatever the golden. */
const char *peat_runtime_band_listed(int r);
/* The listed orders into out[0 .. PEAT_RUNTIME_MAX_BAND - 2], those whose sums are the given golden
 * GEMM's (fewer than a quarter of the outputs differ on more than half of a few random probe
 * shapes) after the others, each group in listed order. */
void peat_runtime_band_order(const peat_kernel *golden, const char **out);
/* Trains the golden run, R - 1 band reruns (`reorder` variants on every call of the op) and one
 * faulty run per frequency in lockstep, measures loss, held-out accuracy, weight distance from
 * the golden run and non-finite values, builds the band and judges each faulty run. Stores the
 * curves, verdicts and checkpoints when o->store is set. */
peat_status peat_runtime_run_all(const peat_runtime_opts *o, peat_runtime_result *res);
void peat_runtime_result_free(peat_runtime_result *res);
/* `peat merge` of run shards: bodies[r] (what shard r of n put in o->shard, read from its start)
 * into one result as rank 0 takes the ranks' runs: the checkpoints into o->store in one
 * process's order, the band, the verdicts and the /runtime tables, the same as
 * peat_runtime_run_all of one process. o as the shards ran (rank and n_ranks ignored). A
 * shard that lacks a run or sends another's is named. */
peat_status peat_runtime_merge(const peat_runtime_opts *o, struct peat_scale_pack *bodies, int n,
                               peat_runtime_result *res);
/* The curves of a finished campaign's runtime FI (/runtime/curves) read back into res, its band
 * rebuilt from them (what report.html plots; the verdicts are the campaign's own, not these).
 * PEAT_ERR_NOTFOUND (no message) when the file holds none. */
peat_status peat_runtime_result_load(peat_store_t *s, peat_runtime_result *res);
/* CPU seconds of what the lockstep does for one run after each iteration, on one thread while
 * the others wait: the distance of its weights from the golden run's, tensor by tensor (here f's
 * weights against themselves: the same passes). The planner adds it to every iteration. */
double peat_runtime_distance_s(peat_flow_t *f);
/* The shadow check's finding of a faulty run (OUT_OF_BOUND, FAIL: a call in the loop whose error
 * left its envelope, docs/fault-injection.md "The shadow check"): 1 and *f when it has one. */
int peat_runtime_shadow_finding(const peat_runtime_run *r, peat_finding *f);

#endif
