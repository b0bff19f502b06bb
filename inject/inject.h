/* inject.h: pseudo-error models (deterministic, seeded) and playback of recorded calls. */
#ifndef PEAT_INJECT_H
#define PEAT_INJECT_H

#include "core/exec_swap.h"
#include "peat/peat.h"

typedef struct peat_inject_model peat_inject_model_t;

/* Parses a model spec such as "bitflip(bit=30,count=1)", "precision(fmt=bf16,where=inputs)",
 * "truncate", "ftz", "noise(sigma=1e-5)", "stuck(bit=3,value=1,stride=4)", "tile(rows=16,cols=16)".
 * Unknown names or malformed specs: PEAT_ERR_INVAL with a one-line message. */
peat_status peat_inject_model_parse(const char *spec, peat_inject_model_t **out);
void peat_inject_model_free(peat_inject_model_t *m);
/* Canonical spec string of the model (with every parameter). */
const char *peat_inject_model_spec(const peat_inject_model_t *m);
/* Runs call a through kernel k with the model applied (to inputs, computation or outputs as the
 * model says); a->out must be allocated. seed makes it deterministic. */
peat_status peat_inject_run(const peat_inject_model_t *m, const peat_kernel *k, const peat_args *a,
                            uint64_t seed);
/* 1 when the model's effect differs between runs of the same call (transient faults, races:
 * bitflip, nan, nondeterministic), 0 for deterministic mechanisms. A runner measuring
 * repeatability passes a new seed per repeat to transient models and the same seed otherwise,
 * so that a simulated deterministic kernel repeats itself as a real one would. */
int peat_inject_model_transient(const peat_inject_model_t *m);
/* Names of all models, one per line, with a one-line description each. */
const char *peat_inject_catalogue(void);

/* ---- playback fault injection: seeded trials on recorded calls (docs/fault-injection.md) ---- */

/* Where a trial's fault lands: the op's outputs (the model as specified), a copy of one input
 * (value-corrupting models: the kernel then computes on it), or the accumulator of one GEMM
 * output element at one step of its sum (bitflip, nan). */
typedef enum peat_inject_site {
    PEAT_INJECT_SITE_OUTPUT = 0,
    PEAT_INJECT_SITE_INPUT,
    PEAT_INJECT_SITE_ACC,
    PEAT_INJECT_SITE_COUNT
} peat_inject_site;

/* Outcome of one trial, against the same call's golden and exact outputs:
 * MASKED     every output bit-identical to the golden's;
 * TOLERABLE  differs, but every element within its rounding bound of the exact value;
 * SDC        all finite, some element beyond its bound (silent data corruption);
 * DUE        the computation failed (error, crash, hang) or produced NaN/Inf where golden is
 *            finite (a detected, unrecoverable error). */
typedef enum peat_inject_outcome {
    PEAT_INJECT_MASKED = 0,
    PEAT_INJECT_TOLERABLE,
    PEAT_INJECT_SDC,
    PEAT_INJECT_DUE,
    PEAT_INJECT_OUTCOME_COUNT
} peat_inject_outcome;

const char *peat_inject_site_name(peat_inject_site s);
peat_status peat_inject_site_parse(const char *name, peat_inject_site *out);
const char *peat_inject_outcome_name(peat_inject_outcome o);

/* One trial: what was injected (enough to rerun it bit-identically: spec, site, seed and the
 * record) and what came out. */
typedef struct peat_inject_trial {
    char model[256]; /* the model spec of the series (bit=-1 when bits are drawn) */
    char spec[256];  /* the spec as run (a drawn bit resolved) */
    int64_t index;   /* trial number within the series */
    uint64_t seed;   /* trial seed */
    int64_t record;  /* position of the record in the campaign's list (the plan's draw) */
    uint64_t record_id;
    peat_inject_site site;
    int bit;    /* bit position of bit-level models, -1 otherwise */
    int target; /* output (site output, acc) or input (site input) index hit; -1 = all */
    /* provenance of the record (filled by the caller; used for the rate tables) */
    peat_op_kind op;
    peat_phase phase;
    int64_t iter;
    char layer[64];
    /* result */
    peat_inject_outcome outcome;
    int64_t n_diff;      /* elements that differ from golden (bitwise) */
    int64_t n_over;      /* finite elements beyond their bound */
    int64_t n_nonfinite; /* NaN/Inf where golden is finite */
    double max_norm;     /* largest |y - exact| / bound over finite elements (0 if none differ) */
    char why[96];        /* DUE by failure: the reason */
    /* propagated view: the same fault followed to the end of its training step (harness/); prop
     * is PEAT_INJECT_OUTCOME_COUNT when the trial was not followed (--local-only) */
    peat_inject_outcome prop;
    int64_t pred_changed; /* rows of the step whose predicted class differs from the golden step */
    double d_loss;        /* |loss - golden step's loss| */
    double d_w;           /* largest relative L2 distance of a weight tensor from the golden step */
    char select[96];      /* the series' target selection ("layer=fc1 phase=fwd"; "" = all) */
} peat_inject_trial;

/* What a trial's outputs are judged against. The bound comes from the caller (golden/'s
 * magnitude and the analyzer's gamma_K bound): inject computes no reference itself. */
typedef struct peat_inject_ref {
    int n_out;
    const peat_tensor *golden[PEAT_MAX_IO]; /* golden outputs (F32) */
    const peat_tensor *exact[PEAT_MAX_IO];  /* exact outputs (F64) */
    const double *bound[PEAT_MAX_IO];       /* rounding bound per element, numel(golden) each */
} peat_inject_ref;

/* Trial `index` of the series (m, site) in a campaign seeded `seed` over n_records records:
 * draws the trial seed, the record and, when m has bit=-1, the bit. Deterministic. A series
 * over a selection of the records (t->select, set by the caller before or after) draws from its
 * own n_records. */
peat_status peat_inject_trial_plan(const peat_inject_model_t *m, peat_inject_site site,
                                   uint64_t seed, int64_t index, int64_t n_records,
                                   peat_inject_trial *t);
/* Runs a planned trial on call `a` (the record's inputs; a->out allocated F32, scratch) through
 * the golden kernel with the fault, and classifies it (t->outcome and counts). Models acting on
 * outputs only start from ref->golden (bit-identical to rerunning the deterministic golden).
 * A failing computation is a DUE (t->why), not an error; errors are for bad arguments. */
peat_status peat_inject_trial_run(const peat_inject_model_t *m, const peat_kernel *golden,
                                  const peat_args *a, const peat_inject_ref *ref,
                                  peat_inject_trial *t);
/* Classifies outputs a->out against ref (counts into t; t->outcome). */
peat_inject_outcome peat_inject_classify(const peat_args *a, const peat_inject_ref *ref,
                                         peat_inject_trial *t);

/* ---- propagated outcomes (docs/fault-injection.md, "Propagated outcomes") ---- */

/* A faulted training step measured against the unfaulted one from the same state. */
typedef struct peat_inject_step {
    int failed;           /* the faulted computation or the step failed */
    int nonfinite;        /* non-finite loss, or a non-finite weight or optimizer value */
    int identical;        /* loss, every prediction and every state tensor bit-identical */
    int64_t pred_changed; /* rows whose predicted class changed */
    double d_loss;        /* |loss - golden loss| */
    double d_w;           /* largest ||w - w_golden|| / ||w_golden|| over the weight tensors */
} peat_inject_step;
/* The golden noise band of that step: the largest deviations of R - 1 reruns of it with honest
 * reorderings (`reorder` on every GEMM) from the golden step. */
typedef struct peat_inject_step_band {
    double loss, w;
    int64_t pred;
} peat_inject_step_band;
/* A deviation is inside the band when at most this many times the largest honest one: a third
 * honest order exceeds the larger of two with probability 1/3; honest deviations of one step
 * stay within 2x of each other (measured, docs/fault-injection.md). */
#define PEAT_INJECT_STEP_BAND_FACTOR 2.0
/* DUE (failed or non-finite), MASKED (bit-identical), TOLERABLE (loss, weight distance and
 * changed predictions within the band), SDC (beyond it). */
peat_inject_outcome peat_inject_step_classify(const peat_inject_step *s,
                                              const peat_inject_step_band *b);

/* ---- rates ---- */

/* Outcome counts of a group of trials. */
typedef struct peat_inject_tally {
    int64_t n[PEAT_INJECT_OUTCOME_COUNT];
    int64_t total;
    /* the propagated view: outcome counts of the followed trials, and how many changed a
     * prediction */
    int64_t prop[PEAT_INJECT_OUTCOME_COUNT];
    int64_t prop_total, pred_changed;
} peat_inject_tally;

/* A proportion k/n with its Wilson score interval at normal quantile z (1.959964 for 95%). */
typedef struct peat_inject_rate {
    double p, lo, hi;
} peat_inject_rate;
peat_inject_rate peat_inject_wilson(int64_t k, int64_t n, double z);
/* Normal quantile of a two-sided confidence (0.95 -> 1.959964). */
double peat_inject_z(double confidence);
/* Trials needed so that a rate's confidence interval is +-margin at the given confidence, in
 * the worst case p = 1/2, for a population of `population` possible faults (0 = unbounded):
 * n0 = z^2 / (4 margin^2), n = n0 / (1 + (n0 - 1) / population) (Leveugle et al., DATE 2009).
 * 0.031 at 95%: 1000 trials; 0.03: 1068. */
int64_t peat_inject_trials_for_margin(double margin, double confidence, double population);

/* What trials are grouped by in the rate tables. */
typedef enum peat_inject_group {
    PEAT_INJECT_BY_MODEL = 0,
    PEAT_INJECT_BY_OP,
    PEAT_INJECT_BY_LAYER,
    PEAT_INJECT_BY_PHASE,
    PEAT_INJECT_BY_BIT, /* bit-level trials only: 32 rows (0 = mantissa lsb ... 31 = sign) */
    PEAT_INJECT_GROUP_COUNT
} peat_inject_group;
const char *peat_inject_group_name(peat_inject_group g);

typedef struct peat_inject_row {
    char key[288];
    peat_inject_tally t;
} peat_inject_row;
typedef struct peat_inject_table {
    peat_inject_group group;
    peat_inject_row *rows;
    int n;
} peat_inject_table;
/* Groups n trials (rows in order of first appearance; bits 0..31 in order, all 32 present when
 * any trial is bit-level). */
peat_status peat_inject_table_build(const peat_inject_trial *t, int64_t n, peat_inject_group g,
                                    peat_inject_table *out);
void peat_inject_table_free(peat_inject_table *tab);

/* ---- runtime fault injection: a model standing in for the golden kernel inside training ---- */

/* user of peat_inject_swap_run: the model and the seed of its faults. Transient models get a
 * new seed per call (derived from the call's index), deterministic ones the same seed. */
typedef struct peat_inject_swap {
    const peat_inject_model_t *m;
    uint64_t seed;
    const peat_kernel *kernel; /* the kernel the model runs on; NULL: the active (golden) one */
} peat_inject_swap;
/* A peat_swap_fn: runs the call through the active (golden) kernel with the model applied. */
peat_status peat_inject_swap_run(void *user, const peat_kernel *active, const peat_args *a,
                                 const peat_call_info *info);

#endif
