/* experiment.h: the differential diagnosis's experiments (docs/detector.md, "Differential
 * diagnosis"): one failing call (the base) transformed so that the competing explanations of its
 * error predict different outcomes, and the read-outs that compare an experiment's errors with
 * the base's. The harness runs them; detector/diagnose.c decides from what they show. */
#ifndef PEAT_ANALYZER_EXPERIMENT_H
#define PEAT_ANALYZER_EXPERIMENT_H

#include "peat/peat.h"

typedef enum peat_exp_kind {
    PEAT_EXP_JITTER = 0, /* every float input x (1 + d), d ~ U(-2^-5, 2^-5): a formula's error is
                            a smooth function of the inputs and stays, a rounding error (any
                            narrower format or mode) is redrawn */
    PEAT_EXP_INTEGERS,   /* small integers (at most 64 nonzero terms of +-1 per sum; GEMM, and
                            the ops whose descriptor has the form: sums, row and batch norms'
                            backward, convolution): exact in every format of >= 8 bits and any
                            order */
    PEAT_EXP_PERMUTE,    /* rows (and columns, planes, images) of the inputs permuted: a
                            structural defect stays at its output positions, a value defect
                            moves with the values */
    PEAT_EXP_SCALE_DOWN, /* float inputs x 2^-16: an overflow of an intermediate goes away */
    PEAT_EXP_SCALE_UP,   /* float inputs x 2^32: a flush of tiny values goes away */
    PEAT_EXP_SHAPE_M,    /* GEMM with M + 1 rows (one axis varied) */
    PEAT_EXP_SHAPE_N,    /* GEMM with N + 1 columns */
    PEAT_EXP_COUNT
} peat_exp_kind;

/* Short names ("jitter", "small integers", ...), as findings and reports spell them. */
const char *peat_analyzer_exp_name(peat_exp_kind k);

typedef struct peat_experiment {
    peat_exp_kind kind;
    peat_args args; /* inputs owned by the experiment; outputs empty */
    /* PERMUTE: element i of output 0 holds the value of base output 0's element src[i] (NULL for
     * the other kinds: the same positions, or a different shape for SHAPE_*) */
    int64_t *src;
    int64_t n_src;
    int64_t *src2; /* the same for the outputs of the op's second size (NULL: none) */
    int64_t n_src2;
    /* INTEGERS of an op other than GEMM: the outputs its descriptor makes exact (bit o), each
     * judged by exactness (every honest order and format of >= 8 bits gives the exact value);
     * 0: judged by the bound (GEMM, whose alpha may round) */
    unsigned exact_mask;
} peat_experiment;

/* Builds experiment `kind` from the base call (inputs copied, then transformed; seed draws the
 * jitter and the permutation). PEAT_ERR_NOTFOUND (no message set) when the experiment does not
 * apply to the op. */
peat_status peat_analyzer_experiment_make(const peat_args *base, peat_exp_kind kind, uint64_t seed,
                                          peat_experiment *out);
void peat_analyzer_experiment_free(peat_experiment *e);

/* Signed bound-normalised errors (test - exact) / bound of one output (mag per element as
 * peat_golden_magnitude gives it, depth K of the op): NaN where test is not finite and exact is.
 * out has numel(test) elements. */
void peat_analyzer_exp_errors(const peat_tensor *test, const peat_tensor *exact, const double *mag,
                              int64_t depth, double *out);

/* How an experiment's errors e (n elements) relate to the base's b, over the elements where
 * either is beyond `thresh` bounds: the correlation of sign(x) log(1 + |x|) (Pearson; NaN with
 * fewer than 8 such elements). With src (PERMUTE), e[i] is compared with b[src[i]]. */
double peat_analyzer_exp_corr(const double *b, const double *e, const int64_t *src, int64_t n,
                              double thresh);
/* Jaccard overlap of the gross errors (beyond PEAT_GROSS_FACTOR bounds, or NaN) of e with those
 * of b, position by position (src NULL) or through src (value by value). */
double peat_analyzer_exp_overlap(const double *b, const double *e, const int64_t *src, int64_t n);

#endif
