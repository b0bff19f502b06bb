/* pyapi.h: the entry points libpeat.so adds to the host API for the PyTorch bridge
 * (python/peat_torch): write captured calls through the store, run a kernel or an error model on
 * caller buffers, check a swapped call against the trusted op's outputs (the shadow check) and
 * judge a training run with the detector's runtime rules. docs/pytorch.md. */
#ifndef PEAT_PYAPI_H
#define PEAT_PYAPI_H

#include "peat/peat.h"

#if defined(__GNUC__)
#define PEAT_PYAPI_EXPORT __attribute__((visibility("default")))
#else
#define PEAT_PYAPI_EXPORT
#endif

/* One op call as the bridge maps it: the fields of a campaign record (docs/hdf5-schema.md,
 * /calls/index) without its tensors. A flat struct so that ctypes mirrors it field for field. */
typedef struct peat_pyapi_call {
    uint64_t id;
    int32_t op;    /* peat_op_kind */
    int32_t phase; /* peat_phase: 0 fwd, 1 bwd, 2 opt */
    int64_t i[PEAT_PARAM_I];
    double f[PEAT_PARAM_F];
    int32_t n_in, n_out;
    int64_t iter, call_index, op_call_index;
    uint64_t seed;
    char flow[32], layer[64], golden_kernel[64];
} peat_pyapi_call;

/* Registers the built-in kernels (idempotent). */
PEAT_PYAPI_EXPORT peat_status peat_pyapi_init(void);
/* sizeof(peat_pyapi_call), sizeof(peat_tensor), sizeof(peat_pyapi_verdict),
 * sizeof(peat_pyapi_freqs): the bridge checks its mirrors against them (which = 0, 1, 2, 3; -1
 * otherwise). */
PEAT_PYAPI_EXPORT int64_t peat_pyapi_struct_size(int which);

/* Runs a `peat` command in this process, as the executable does with the same words (argv[0] is
 * the program's name, argv[1] the command: "run", "list", ...): prints what it prints, writes
 * what it writes, returns its exit status (0 pass or warnings only, 1 the kernel fails, 2 usage
 * or input error). A kernel the caller registered (peat_registry_add, e.g. a Python callable
 * through ctypes) is a candidate like any other; it runs in this process (--no-isolate). */
PEAT_PYAPI_EXPORT int peat_pyapi_main(int argc, char **argv);

/* ---- capture: a campaign file written by the store (the schema is the store's) ---- */

/* Creates the campaign file at path (refused when it exists) with its metadata: flow (e.g.
 * "torch:TinyResNet"), argv and policy as recorded, dtypes as text. *out: the store handle. */
PEAT_PYAPI_EXPORT peat_status peat_pyapi_store_create(const char *path, const char *flow,
                                                      uint64_t seed, int64_t iters,
                                                      const char *argv, const char *policy,
                                                      const char *dtypes, void **out);
/* Validates the call (op table: arity, shapes, params; bf16/f16 tensors as their f32 values)
 * and writes it as one durable record: inputs in[0..n_in), golden outputs golden[0..n_out),
 * each in its own dtype (f32, bf16, f16, i32). The tensors are copied. */
PEAT_PYAPI_EXPORT peat_status peat_pyapi_call_write(void *store, const peat_pyapi_call *c,
                                                    const peat_tensor *const *in,
                                                    const peat_tensor *const *golden);
/* Validates the call alone (what call_write checks first). */
PEAT_PYAPI_EXPORT peat_status peat_pyapi_call_check(const peat_pyapi_call *c,
                                                    const peat_tensor *const *in);
PEAT_PYAPI_EXPORT peat_status peat_pyapi_metrics_append(void *store, int64_t iter, double loss,
                                                        double accuracy);
/* Writes the table /capture/unmapped (docs/pytorch.md): one row per aten op the capture could
 * not map to a PEAT op (op, calls, why), so that nothing is dropped silently. */
PEAT_PYAPI_EXPORT peat_status peat_pyapi_unmapped_write(void *store, int n, const char *const *ops,
                                                        const int64_t *calls,
                                                        const char *const *why);
PEAT_PYAPI_EXPORT peat_status peat_pyapi_store_close(void *store);

/* ---- swap: PEAT computations on the caller's f32 buffers ---- */

/* Runs kernel `name` (built-in or from a loaded plugin; its op must be c->op) on in, writing
 * out (allocated by the caller, shapes of the op's outputs). */
PEAT_PYAPI_EXPORT peat_status peat_pyapi_kernel_run(const char *name, const peat_pyapi_call *c,
                                                    const peat_tensor *const *in,
                                                    peat_tensor *const *out);
/* The golden CPU kernel of c->op with the pseudo-error model `spec` applied (inject/), seeded. */
PEAT_PYAPI_EXPORT peat_status peat_pyapi_model_run(const char *spec, uint64_t seed,
                                                   const peat_pyapi_call *c,
                                                   const peat_tensor *const *in,
                                                   peat_tensor *const *out);
/* A runtime frequency list as `peat run --runtime-freq` parses it (core/freq.h's schedule, flat
 * so that ctypes mirrors it): n frequencies, each every k-th call (every; 1 all, 0 none) or a
 * probability per call (prob > 0, every 0), and its text, which names its run. */
typedef struct peat_pyapi_freqs {
    int32_t n;
    int64_t every[4];
    double prob[4];
    char label[4][64];
} peat_pyapi_freqs;
/* Parses a frequency list ("1", "1/10,p=0.01") with `peat run`'s own parser. */
PEAT_PYAPI_EXPORT peat_status peat_pyapi_freqs_parse(const char *s, peat_pyapi_freqs *out);

/* ---- band: the runtime stage's rules on the user's own runs ---- */

/* The model of band rerun r (1..5; run 0 is the golden run): the same honest reorderings
 * `peat run`'s runtime stage uses. NULL out of range. */
PEAT_PYAPI_EXPORT const char *peat_pyapi_band_spec(int r);
/* The runtime verdict as the bridge reads it: the fields of peat_runtime_verdict (detector.h) a
 * line needs, in a struct of this file, so that ctypes mirrors it whatever the detector adds. */
typedef struct peat_pyapi_verdict {
    int32_t cls;                         /* peat_runtime_class */
    int32_t accept;                      /* peat_acceptance: 0 PASS, 1 WARN, 2 FAIL */
    int64_t iter;                        /* where it left the band (-1: equivalent) */
    double final_loss, band_lo, band_hi; /* last iteration: the run and the widened band */
    double end_mean, end_bound;          /* the last quarter's mean loss and its bound */
    double wdist_ratio, drift_end;       /* weight drift: largest, and through the last quarter */
    char metric[16];
    char evidence[256];
} peat_pyapi_verdict;

/* Builds the band of R member runs (member 0 golden; loss and wdist R x n row-major, acc
 * R x n_eval, evaluation e after iteration eval_iter[e], NULL: evenly spread to the last) and
 * judges one run (loss, wdist, nonfinite per iteration, acc per evaluation) with the detector's
 * runtime rules (peat_detector_runtime_judge); with kernel (a candidate kernel's name; NULL for a
 * pseudo-error model) also the candidate's (peat_detector_runtime_candidate: weights that end
 * far off the honest trajectories DEGRADE, and a DEGRADES its declared format does not explain
 * is FAIL). */
PEAT_PYAPI_EXPORT peat_status peat_pyapi_runtime_judge(
    int R, int64_t n, const double *band_loss, const double *band_wdist, int64_t n_eval,
    const int64_t *eval_iter, const double *band_acc, const double *loss, const double *wdist,
    const int64_t *nonfinite, const double *acc, const char *kernel, peat_pyapi_verdict *v);
/* "TRAINING_EQUIVALENT", "DEGRADES", "DIVERGES". */
PEAT_PYAPI_EXPORT const char *peat_pyapi_runtime_class_name(int cls);
/* "PASS", "WARN", "FAIL". */
PEAT_PYAPI_EXPORT const char *peat_pyapi_accept_name(int accept);

/* ---- shadow: a swapped call checked against the trusted op's outputs on the same inputs ---- */

/* Measures the candidate's outputs out[0..n_out) of call c on in and the trusted op's outputs
 * golden[0..n_out) (torch's, in f32, bf16 or f16) as the runtime stage's shadow check does
 * (peat_runtime_shadow_measure: each one's largest error over its rounding bound against the
 * exact fp64 result, computed only when the candidate is not within a bound of the golden):
 * *cand and *gold those largest errors (-1: the exact result was not needed), *bad 1 when the
 * candidate left its envelope (peat_runtime_shadow_envelope of gold and self, the candidate's
 * own largest error over the bound on fresh calls, 0 when unknown). */
PEAT_PYAPI_EXPORT peat_status peat_pyapi_shadow_measure(
    const peat_pyapi_call *c, const peat_tensor *const *in, const peat_tensor *const *out,
    const peat_tensor *const *golden, double self, double *cand, double *gold, int *bad);

#endif
