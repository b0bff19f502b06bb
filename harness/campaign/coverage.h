/* coverage.h: stratified recording: every distinct (op, layer, phase, shapes, dtype) a flow
 * produces is a stratum; each gets its share of the recorded calls, spread over the run. */
#ifndef PEAT_HARNESS_COVERAGE_H
#define PEAT_HARNESS_COVERAGE_H

#include "core/record.h"
#include "models/models.h"

#define PEAT_COVERAGE_MAX 128 /* strata tracked; more are counted as one "other" stratum */

typedef struct peat_stratum {
    char label[112];  /* "gemm fc1 fwd [32x16]x[16x64] f32" */
    int64_t per_step; /* calls per training step (from the planning step) */
    int64_t quota;    /* calls to record */
    int64_t seen;     /* calls seen in the recording window */
    int64_t recorded;
} peat_stratum;

typedef struct peat_coverage {
    peat_stratum s[PEAT_COVERAGE_MAX];
    int n;
    int64_t window; /* iterations in the recording window */
    int64_t cap;    /* records in total at most (--calls per recorded op) */
    int64_t n_recorded;
} peat_coverage;

/* Runs one training step of flow on a throwaway instance to find the strata of the ops in mask,
 * then gives each stratum max(1, calls / strata) records (at most its calls in the window).
 * Only calls pol records count: its op mask and phases. */
peat_status peat_campaign_coverage_plan(const char *flow, const peat_flow_config *cfg,
                                        const peat_profile_policy *pol, int64_t window,
                                        int64_t calls, peat_coverage *cov);
/* A profile policy call_filter: records the calls of each stratum at evenly spaced positions
 * of its own call sequence (so no step period can alias them). user is the peat_coverage. */
int peat_campaign_coverage_filter(void *user, const peat_args *a, const peat_call_info *info);
/* Total quota over all strata. */
int64_t peat_campaign_coverage_total(const peat_coverage *cov);
/* Strata of op kind op (by label prefix) that were seen but never recorded. */
int peat_campaign_coverage_missed(const peat_coverage *cov);

#endif
