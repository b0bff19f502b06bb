/* detector.h: rules that name the error model a signature matches, with evidence. */
#ifndef PEAT_DETECTOR_H
#define PEAT_DETECTOR_H

#include "analyzer/analyzer.h"

typedef enum peat_finding_class {
    PEAT_FIND_BIT_EXACT = 0,     /* identical to golden / exact-rounded */
    PEAT_FIND_WITHIN_BOUND,      /* as good as golden: errors inside the fp32 bound */
    PEAT_FIND_REDUCED_PRECISION, /* dense errors at a lower effective precision (bits) */
    PEAT_FIND_TRUNCATION,        /* rounding-level errors with a signed bias toward zero */
    PEAT_FIND_FTZ,               /* errors only where |exact| < FLT_MIN */
    PEAT_FIND_RANGE,             /* Inf or 0 where values leave a narrower format's range */
    PEAT_FIND_BITFLIP,           /* few elements, single-bit pattern */
    PEAT_FIND_STUCK_BIT,         /* one bit forced in many elements */
    PEAT_FIND_TILE,              /* STRUCTURAL: errors confined to blocks / edge tiles */
    PEAT_FIND_NAN,               /* NaN/Inf introduced */
    PEAT_FIND_NOISE,             /* dense unbiased error proportional to value */
    PEAT_FIND_APPROX,            /* smooth input-dependent error (approximated function) */
    PEAT_FIND_NONDETERMINISTIC,  /* outputs differ between repeats */
    PEAT_FIND_WRONG_RESULT,      /* dense gross errors: effective bits near 0 (a wrong formula) */
    PEAT_FIND_OUT_OF_BOUND,      /* errors beyond the bound that match no known model */
    PEAT_FIND_UNKNOWN,           /* evidence ambiguous: signature attached, no guess */
    /* training impact (runtime FI, peat_runtime_class): not from a signature */
    PEAT_FIND_TRAINING_EQUIVALENT,
    PEAT_FIND_DEGRADES,
    PEAT_FIND_DIVERGES,
    /* found by the runner, not from the signature (harness/isolate/isolate.c) */
    PEAT_FIND_DUE,                 /* the call ended the process without completing */
    PEAT_FIND_OUT_OF_BOUNDS_WRITE, /* a write before or after an output buffer */
    PEAT_FIND_INPUT_MUTATION,      /* a write into an input buffer */
    PEAT_FIND_STATEFUL,            /* an output that depends on the kernel's call history */
    PEAT_FIND_COUNT
} peat_finding_class;
/* TILE is reported as STRUCTURAL: errors confined to a region of the output */
#define PEAT_FIND_STRUCTURAL PEAT_FIND_TILE

/* The classes the signature rules emit (peat_detector_run): BIT_EXACT .. UNKNOWN. */
#define PEAT_FIND_SIGNATURE_COUNT (PEAT_FIND_UNKNOWN + 1)

typedef enum peat_acceptance {
    PEAT_ACCEPT_PASS = 0,
    PEAT_ACCEPT_WARN,
    PEAT_ACCEPT_FAIL
} peat_acceptance;

#define PEAT_MAX_EVIDENCE 6
typedef struct peat_finding {
    peat_finding_class cls;
    double confidence; /* 0..1 */
    char params[128];  /* "bits=8.3", "bit=30", ... */
    int n_evidence;
    char evidence[PEAT_MAX_EVIDENCE][256];
    peat_acceptance accept;
    /* the experiment that decided the class ("recorded calls", "probe: ...", "jitter", ...) and
     * the classes it ruled out, comma-separated ("" when it ruled out none) */
    char experiment[96];
    char ruled_out[96];
} peat_finding;

/* What the kernel declares (from its descriptor), so that an intended precision change is a
 * WARN and an undeclared one a FAIL. */
typedef struct peat_detector_ctx {
    peat_dtype declared_in; /* kernel's in_dtype */
    peat_dtype declared_out;
    peat_dtype declared_acc;
    /* measured by the runner on the calls' inputs when declared_in is narrower than fp32 (NaN =
     * not measured): fraction of nonzero input values below the declared format's smallest
     * normal, and above its largest finite value */
    double in_frac_below_normal;
    double in_frac_above_max;
} peat_detector_ctx;

/* The declared precisions of a kernel descriptor (NULL: fp32 throughout). */
peat_detector_ctx peat_detector_ctx_from_kernel(const peat_kernel *k);

/* Applies the ordered rules to the candidate's signature, given the golden's signature on the
 * same calls. Writes at most max findings, returns how many (>= 1: UNKNOWN if nothing fires). */
int peat_detector_run(const peat_signature *cand, const peat_signature *golden,
                      const peat_detector_ctx *ctx, peat_finding *out, int max);
const char *peat_detector_finding_name(peat_finding_class c);
/* The class of a name as peat_detector_finding_name spells it (PEAT_FIND_COUNT if none). */
peat_finding_class peat_detector_finding_parse(const char *name);
const char *peat_detector_acceptance_name(peat_acceptance a);
/* The worst acceptance over the findings. */
peat_acceptance peat_detector_verdict(const peat_finding *f, int n);

/* ---- probes and arithmetic properties (detector/rules_probe.c) ---- */
#include "analyzer/probe.h"

/* The primary finding on one probe call (peat_detector_run on that call's signatures). */
typedef struct peat_probe_outcome {
    char label[96];
    peat_probe_kind kind;
    peat_probe_tag tag;
    peat_finding f;
    peat_edge_region edge;            /* of the probe's first output (edge.rows 0: not measured) */
    double eff_bits, golden_eff_bits; /* effective bits of candidate and golden on the probe */
} peat_probe_outcome;

/* Findings from a GEMM's measured arithmetic properties against the golden's: subnormals lost
 * (FTZ), another rounding mode (TRUNCATION), fewer input or accumulator bits (REDUCED_PRECISION,
 * where=inputs|accumulation), NaN/Inf not propagated (NAN). These are exact tests: a kernel that
 * rounds to nearest in fp32 passes each one whatever its summation order. */
int peat_detector_props(const peat_gemm_props *cand, const peat_gemm_props *gold,
                        const peat_detector_ctx *ctx, peat_finding *out, int max);
/* Combines the recorded calls' findings, the probes' and the properties' into one list whose
 * first entry is the primary finding: the most specific failing class (docs/detector.md). */
int peat_detector_combine(const peat_finding *rec, int n_rec, const peat_probe_outcome *pr,
                          int n_pr, const peat_finding *props, int n_props, peat_finding *out,
                          int max);
/* ---- differential diagnosis (detector/diagnose.c) ------------------------------------------
 * The experiments of analyzer/experiment.h run on one failing call (the base); the class whose
 * prediction holds is kept (docs/detector.md, "Differential diagnosis"). */
#include "analyzer/experiment.h"

typedef struct peat_exp_outcome {
    int ran;        /* 1 run and judged; 0 does not apply; -1 the kernel failed on it */
    int fails;      /* its outputs leave the bound (the detector's finding on it is FAIL) */
    peat_finding f; /* that finding */
    int64_t n, n_gross, n_nonfinite;
    double max_norm;
    double corr; /* JITTER: correlation of its errors with the base's (NaN: too few) */
    double corr_out[PEAT_MAX_IO]; /* JITTER: the same per output the base fails (NaN: others) */
    double stay, follow; /* PERMUTE: overlap of gross errors with the base's by output position
                            and by input value (NaN: none) */
    /* INTEGERS judged by exactness (ops other than GEMM): the outputs read (bit o: failing on
     * the base, exact values of <= 8 significand bits), their elements and those not exact */
    unsigned exact_outputs;
    int64_t n_exact, n_not_exact;
    double corr_stay, corr_follow; /* PERMUTE: correlation of its errors with the base's by output
                                      position and through the map (as the jitter's; NaN: too
                                      few) */
} peat_exp_outcome;

typedef struct peat_diagnosis {
    int ran;           /* the stage looked for a base call */
    char base[96];     /* the call the experiments start from ("" when none fails alone) */
    int base_cancel;   /* the base is a cancellation probe: ill-conditioned by design */
    int base_overflow; /* the base is a probe pushing values toward overflow */
    int base_extent;   /* the base is the recorded values at another extent (rows, row
                          lengths, sequence length) */
    /* the base's first failing output read plane by plane (analyzer/probe.h, edge region):
     * whole planes wrong and the others within the bound */
    int base_plane_confined;
    int64_t base_planes, base_wrong_planes, base_first_wrong_plane;
    peat_finding base_f; /* the detector's primary finding on the base call */
    int64_t base_n, base_gross, base_nonfinite;
    int64_t base_n_failing; /* the elements of the outputs the base fails (0: unknown, base_n) */
    double base_subnormal; /* share of the base's errors beyond the bound where |exact| < FLT_MIN */
    double base_eff_bits;
    int base_toward_zero; /* the base's errors shrink |x| (>= 3/4 of them, bias beyond 6 sigma) */
    char outputs[64];     /* the base's outputs beyond the bound, by index ("0,2") */
    int n_outputs;        /* the op's outputs */
    /* the op's identity (core/opdesc.h, `invariant`: RoPE keeps each pair's length) on the base:
     * the candidate's and the golden's largest relative departure (NaN: the op has none) */
    double base_invariant, base_invariant_golden;
    int64_t gemm_m, gemm_n; /* GEMM base: its M and N (the shape axis) */
    peat_exp_outcome exp[PEAT_EXP_COUNT];
    double seconds; /* wall time of the experiments */
} peat_diagnosis;

/* The finding the experiments support, from the primary finding `was` (a numeric FAIL): its class
 * kept or replaced, params, evidence, experiment and ruled_out filled. Returns 0 (and leaves out
 * alone) when was is not a class the experiments decide (docs/detector.md). */
int peat_detector_diagnose(const peat_finding *was, const peat_diagnosis *d, peat_finding *out);
/* Whether the experiments are asked about a primary finding of this class and acceptance. */
int peat_detector_diagnosable(const peat_finding *f);

/* ---- a campaign's findings from every source, in one order (detector/findings.c) ---------- */

/* What the runner measured on the recorded calls (harness/isolate/isolate.c): how many calls failed
 * in each way, and the first message of each (NULL or "" when none). */
typedef struct peat_runner_counts {
    int64_t n_records;
    int64_t n_failures;     /* crashed, hung or failed (DUE and hang-skipped calls included) */
    int64_t n_due;          /* ended the process without completing the call */
    int64_t n_hang_skipped; /* not run after the kernel hung */
    int64_t n_oob_writes, n_input_mutations;
    const char *failure, *due, *oob_write, *input_mutation;
    /* call sequences (the candidate keeping its state from call to call): calls made, and those
     * whose output left the bound where the same call in a fresh process did not */
    int64_t n_sequence_calls, n_stateful;
    const char *stateful;
} peat_runner_counts;

/* Every source of a campaign's findings (a source with n 0 has none). */
typedef struct peat_finding_sources {
    peat_runner_counts runner;
    const peat_finding *signature; /* peat_detector_run on the recorded calls */
    int n_signature;
    const peat_finding *props; /* peat_detector_props */
    int n_props;
    const peat_probe_outcome *probes;
    int n_probes;
    const peat_finding
        *runtime; /* peat_detector_runtime_finding of each faulty run, in --runtime-freq order */
    int n_runtime;
    const peat_finding *diagnosed; /* the differential diagnosis's finding: replaces the numeric
                                      primary (NULL: none) */
} peat_finding_sources;

/* The campaign's findings, at most max, in the order of docs/detector.md ("Order of findings"):
 * the runner's (certain, and the numeric findings of such a kernel are its consequences:
 * OUT_OF_BOUND for crashes, hangs and errors, DUE, OUT_OF_BOUNDS_WRITE, INPUT_MUTATION), then the
 * numeric ones (signature, properties and probes through peat_detector_combine: the primary
 * first), then the training impact of each runtime run. A full list keeps every runtime finding
 * (up to max - 1): they displace numeric findings from its end, never its first. */
int peat_detector_assemble(const peat_finding_sources *s, peat_finding *out, int max);
/* Names the experiment behind a finding that names none yet ("recorded calls", "probe: ...";
 * nondeterminism and a transient upset on the recorded calls: "repeats of the recorded calls"). */
void peat_detector_tag(peat_finding *f, const char *experiment);

/* ---- training impact: runtime fault injection judged against the golden noise band ---------
 * docs/fault-injection.md ("band and verdict rules") says why each margin has its value. */

typedef enum peat_runtime_class {
    PEAT_RUNTIME_EQUIVALENT = 0, /* TRAINING_EQUIVALENT: inside the widened band throughout */
    PEAT_RUNTIME_DEGRADES,       /* leaves the band (from an iteration, by an amount) */
    PEAT_RUNTIME_DIVERGES,       /* non-finite values or a loss explosion */
    PEAT_RUNTIME_DUE,            /* a call crashed, hung, ended the process or wrote astray:
                                    the run stopped there */
    PEAT_RUNTIME_CLASS_COUNT
} peat_runtime_class;

/* One training run's curves over n iterations. */
typedef struct peat_runtime_curve {
    int64_t n;
    const double *loss;       /* training loss per iteration */
    const double *wdist;      /* largest relative L2 distance of a weight tensor from the golden
                                 run's at the same iteration (0 for the golden run itself) */
    const int64_t *nonfinite; /* non-finite weight values after the iteration (NULL = none) */
    int64_t n_eval;           /* held-out evaluations, at the same iterations in every run */
    const double *eval_acc;   /* held-out accuracy at each (NaN = not measured) */
    const int64_t *eval_iter; /* the iteration of each evaluation (NULL: evaluation e after
                                 iteration (e + 1) n / n_eval - 1, evenly spread to the end) */
} peat_runtime_curve;

/* The golden noise band of R honest runs (the golden run and reruns with the `reorder` model on
 * every call of the op), as a prediction test with a stated false-alarm rate
 * (docs/fault-injection.md, "band and verdict rules"): per window of iterations the members'
 * mean loss and its spread, per held-out evaluation the members' accuracy and its spread, and the
 * tolerance factors of Student's t for R - 1 degrees of freedom. */
typedef struct peat_runtime_band {
    int64_t n, n_eval;
    int members;
    double *loss_lo, *loss_hi; /* [n] range of the members' losses (plots, explosion rule) */
    double *wdist_hi;          /* [n] largest member distance from the golden run */
    double *acc_lo, *acc_hi;   /* [n_eval] */
    int windows;               /* loss windows: iterations [win_start[w], win_start[w + 1]) */
    int64_t *win_start;        /* [windows + 1] */
    double *win_mean, *win_sd; /* [windows] members' mean window loss and its sample sd */
    int *eval_win;             /* [n_eval] the window each evaluation falls in */
    double *acc_mean, *acc_sd; /* [windows] members' mean held-out accuracy over the window's
                                  evaluations: mean and sample sd (NaN: no evaluation there) */
    int acc_windows;           /* windows that hold an evaluation */
    double loss_k, acc_k;      /* t quantiles: the tolerance factors for R - 1 d.o.f. */
    double alpha;              /* the per-run false-alarm rate the factors are set for */
} peat_runtime_band;

/* Builds the band of R >= 2 member curves (equal lengths; member 0 is the golden run). */
peat_status peat_detector_band_build(const peat_runtime_curve *members, int R,
                                     peat_runtime_band *out);
void peat_detector_band_free(peat_runtime_band *b);
/* The widened band at iteration t (what a run must stay inside), for reports and plots. */
void peat_detector_band_widened(const peat_runtime_band *b, int64_t t, double *loss_lo,
                                double *loss_hi, double *wdist_hi);

typedef struct peat_runtime_verdict {
    peat_runtime_class cls;
    int64_t iter;       /* DEGRADES: first iteration of the first window (or evaluation) outside
                           the test's bound; DIVERGES: first non-finite or exploding iteration;
                           -1 when equivalent */
    char metric[16];    /* what left the band: "loss", "accuracy", "nonfinite" */
    double loss_excess; /* largest window-mean loss excess over the bound, relative to it */
    double wdist_ratio; /* largest distance / (4 x honest distance + 1e-5) (<= 1 inside) */
    double acc_drop;    /* largest window-mean accuracy drop below the bound (absolute) */
    double loss_t;      /* largest window t statistic (x - mean) / (sd sqrt(1 + 1/R)); the test
                           alone (no effect-size floor) alarms when it exceeds the band's loss_k */
    double final_loss, band_lo, band_hi; /* last iteration: run and band */
    int drift;              /* a note: the weights leave the honest reruns' distance for PERSIST
                               iterations while loss and accuracy stay inside (not a warning) */
    int64_t drift_iter;     /* first iteration of that excursion (-1 = none) */
    int transient;          /* a note: a window before the last left its loss or accuracy bound and
                               the last window is inside (training came back; not a warning) */
    int64_t transient_iter; /* first iteration of the first such window (-1 = none) */
    double end_mean, end_bound; /* the last window's mean loss and its bound: what "inside" means */
    double drift_end;           /* the smallest drift ratio (as wdist_ratio) over the last window */
    int weights_out;            /* drift_end > PEAT_DETECTOR_DRIFT_FAIL: the weights end off the
                                   honest trajectories (a candidate's DEGRADES, metric "weights") */
    int candidate;              /* a candidate kernel in the loop, not a pseudo-error model: its
                                   DEGRADES is FAIL unless `explained` */
    int explained;              /* the kernel declares a narrower format, which explains the
                                   degradation and the drift (WARN) */
    char evidence[256];         /* one sentence with the numbers */
} peat_runtime_verdict;

/* The weight-drift test of a candidate's run (docs/fault-injection.md, "Band and verdict rules"):
 * Markov's inequality P(X >= F) <= E[X] / F on the honest drift ratio X, E[X] <= 1, at a rate of
 * 0.25% beside the band's 1%. */
#define PEAT_DETECTOR_DRIFT_ALPHA 0.0025
#define PEAT_DETECTOR_DRIFT_FAIL  (1.0 / PEAT_DETECTOR_DRIFT_ALPHA)

/* Student's t quantile factor of the band test: the one-sided bound k with P(T > k) = a for T
 * ~ t with df degrees of freedom (df >= 1, 0 < a < 1). */
double peat_detector_band_factor(int df, double a);
/* Judges a run against the band (same n and n_eval). */
peat_status peat_detector_runtime_judge(const peat_runtime_band *b, const peat_runtime_curve *c,
                                        peat_runtime_verdict *v);
const char *peat_detector_runtime_class_name(peat_runtime_class c);
/* EQUIVALENT -> PASS, DEGRADES -> WARN, DIVERGES and DUE -> FAIL. */
peat_acceptance peat_detector_runtime_acceptance(peat_runtime_class c);
/* A candidate kernel's run (not a pseudo-error model, whose DEGRADES is the measured answer):
 * weights that end beyond PEAT_DETECTOR_DRIFT_FAIL x the honest reruns' drift make an equivalent
 * run DEGRADES (metric "weights"), and its DEGRADES is FAIL unless `declared` (the kernel declares
 * a narrower input, accumulation or output format than fp32) explains it: WARN. `unscaled`: the
 * band measured no honest drift (peat_detector_band_still) and every call of the run was checked
 * inside its envelope (the shadow check): the weights have no honest scale to be judged on, so
 * their distance stays a note (docs/fault-injection.md). */
void peat_detector_runtime_candidate(peat_runtime_verdict *v, int declared, int unscaled);
/* 1 when every band rerun's weights stayed bit-identical to the golden run's (the reruns' order
 * gave the golden's results for the op: their drift, the weights test's scale, is 0). */
int peat_detector_band_still(const peat_runtime_band *b);
/* The acceptance of a judged run: by class, and a candidate's unexplained DEGRADES is FAIL. */
peat_acceptance peat_detector_runtime_verdict_acceptance(const peat_runtime_verdict *v);
/* The finding of a judged run (class, acceptance, params "freq=.. iter=..", evidence). */
peat_finding peat_detector_runtime_finding(const peat_runtime_verdict *v, const char *run,
                                           int64_t swapped);

#endif
