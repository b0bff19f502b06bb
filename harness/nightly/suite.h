/* suite.h: suite files (what `peat ci` runs) and policy files (acceptance and the thresholds
 * `peat diff` calls a regression); the format is docs/nightly-ci.md's. */
#ifndef PEAT_SUITE_H
#define PEAT_SUITE_H

#include "detector/detector.h"

#define PEAT_SUITE_MAX_KERNELS 64
#define PEAT_SUITE_MAX_LIST    8
#define PEAT_SUITE_MAX_ALLOW   64
#define PEAT_SUITE_MAX_PLUGINS 8

/* A finding accepted for a kernel: class, and optionally a condition on one of its numeric
 * parameters ("bits>=7": the finding's params hold bits=7.5). */
typedef struct peat_allowance {
    char kernel[64];
    peat_finding_class cls;
    char param[32]; /* "" = no condition */
    int at_least;   /* 1: param >= value, 0: param <= value */
    double value;
} peat_allowance;

/* What `peat diff` calls a regression (docs/nightly-ci.md has the meaning of each). */
typedef struct peat_thresholds {
    double eff_bits_drop;       /* effective bits lost, bits */
    double max_norm_ratio;      /* max error/bound grew by this factor ... */
    double max_norm_floor;      /* ... and now exceeds this (1 = the bound) */
    double over_bound_increase; /* fraction of elements over the bound grew by this */
    double loss_increase;       /* held-out loss grew by this fraction */
    double accuracy_drop;       /* held-out accuracy fell by this (absolute) */
    double time_ratio;          /* cost: total time grew by this factor ... */
    double time_min_s;          /* ... and by at least this many seconds */
} peat_thresholds;

typedef struct peat_policy {
    peat_acceptance fail_on; /* FAIL (default): only FAIL fails; WARN: warnings fail too */
    int n_allow;
    peat_allowance allow[PEAT_SUITE_MAX_ALLOW];
    peat_thresholds th;
} peat_policy;

typedef struct peat_suite_kernel {
    char name[64];
    int line; /* where the kernel was named, for messages */
    int n_flows, n_backends;
    char flows[PEAT_SUITE_MAX_LIST][32];    /* none: "auto" */
    char backends[PEAT_SUITE_MAX_LIST][16]; /* none: "auto" */
    int64_t iters, calls;                   /* 0: the suite's */
    double budget_s;                        /* 0: the suite's */
    char size[8];                           /* `peat run --size` ("": the suite's, else tiny) */
} peat_suite_kernel;

typedef struct peat_suite {
    char path[512];
    char name[64];
    int64_t iters, calls; /* 0: `peat run`'s defaults */
    uint64_t seed;
    double budget_s; /* wall-clock limit per item; 0 = none */
    int n_plugins;
    char plugins[PEAT_SUITE_MAX_PLUGINS][512]; /* resolved against the suite's folder */
    int n_kernels;
    peat_suite_kernel kernels[PEAT_SUITE_MAX_KERNELS];
    peat_policy policy;
} peat_suite;

/* Defaults: fail on FAIL, no allowances, the documented thresholds. */
void peat_nightly_policy_default(peat_policy *p);
/* Reads a policy file ([accept] and [thresholds] sections) over p's current values. */
peat_status peat_nightly_policy_load(const char *path, peat_policy *p);
/* Reads a suite file. Errors are one line naming file:line and what was expected. */
peat_status peat_nightly_suite_load(const char *path, peat_suite *s);

/* Whether an allowance of p covers finding f of kernel. */
int peat_nightly_policy_allows(const peat_policy *p, const char *kernel, peat_finding_class cls,
                               const char *params);
/* The finding class of a name ("REDUCED_PRECISION"); PEAT_ERR_NOTFOUND otherwise. */
peat_status peat_nightly_finding_class_parse(const char *name, peat_finding_class *out);
/* Parses "90", "90s", "2m", "1h" into seconds (> 0). */
peat_status peat_nightly_duration_parse(const char *s, double *seconds);

/* Calls fn for every `key = value` line of an INI-style file (`#` comments, `[section]`
 * headers; the section is passed as written, "" before the first). A non-zero status from fn
 * stops the walk and is returned. */
typedef peat_status (*peat_ini_fn)(void *user, const char *section, const char *key,
                                   const char *value, int line);
peat_status peat_nightly_ini_read(const char *path, peat_ini_fn fn, void *user);

#endif
