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
    PEAT_FIND_COUNT
} peat_finding_class;
/* TILE is reported as STRUCTURAL: errors confined to a region of the output */
#define PEAT_FIND_STRUCTURAL PEAT_FIND_TILE

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
const char *peat_finding_name(peat_finding_class c);
/* The class of a name as peat_finding_name spells it (PEAT_FIND_COUNT if none). */
peat_finding_class peat_finding_parse(const char *name);
const char *peat_acceptance_name(peat_acceptance a);
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

#endif
