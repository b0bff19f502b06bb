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
    PEAT_FIND_TILE,              /* errors confined to blocks / edge tiles */
    PEAT_FIND_NAN,               /* NaN/Inf introduced */
    PEAT_FIND_NOISE,             /* dense unbiased error proportional to value */
    PEAT_FIND_APPROX,            /* smooth input-dependent error (approximated function) */
    PEAT_FIND_NONDETERMINISTIC,  /* outputs differ between repeats */
    PEAT_FIND_OUT_OF_BOUND,      /* errors beyond the bound that match no known model */
    PEAT_FIND_UNKNOWN,           /* evidence ambiguous: signature attached, no guess */
    /* found by the runner, not from the signature (harness/isolate.c) */
    PEAT_FIND_DUE,                 /* the call ended the process without completing */
    PEAT_FIND_OUT_OF_BOUNDS_WRITE, /* a write before or after an output buffer */
    PEAT_FIND_INPUT_MUTATION,      /* a write into an input buffer */
    PEAT_FIND_COUNT
} peat_finding_class;

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
const char *peat_acceptance_name(peat_acceptance a);
/* The worst acceptance over the findings. */
peat_acceptance peat_detector_verdict(const peat_finding *f, int n);

#endif
