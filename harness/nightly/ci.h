/* ci.h: `peat ci SUITE`: every kernel x flow x backend of a suite as its own `peat run`, one
 * aggregated report, an optional baseline to diff against (docs/nightly-ci.md). */
#ifndef PEAT_CI_H
#define PEAT_CI_H

#include "harness/nightly/diff.h"
#include "harness/campaign/campaign.h"
#include "harness/scale/scale.h"
#include "harness/nightly/suite.h"

#define PEAT_CI_MAX_ITEMS    256
#define PEAT_CI_MAX_FINDINGS 8

typedef struct peat_ci_finding {
    char cls[24], params[128], acceptance[8];
    char evidence[1024]; /* the run's evidence sentences joined by "; ", whole sentences only */
    int allowed;         /* accepted by a suite allowance */
} peat_ci_finding;

typedef struct peat_ci_item {
    char kernel[64], flow[32], backend[16], op[32];
    char dir[160];   /* the item's output folder, relative to the suite's */
    char status[8];  /* PASS, WARN, FAIL (after allowances), ERROR (no verdict), SKIP */
    char verdict[8]; /* the run's own verdict, before allowances ("" when none) */
    char error[256]; /* why ERROR or SKIP */
    char command[1024];
    int exit_code; /* of `peat run` (-1: killed) */
    double seconds, budget_s;
    double plan_s; /* the --budget its `peat run` planned to (peat ci --budget); 0: not planned */
    double max_norm, eff_bits, rms_ratio; /* candidate's headline numbers (NaN if none) */
    int resumed; /* peat ci --resume took its finished campaign from an earlier run (not rerun) */
    int n_findings;
    peat_ci_finding findings[PEAT_CI_MAX_FINDINGS];
} peat_ci_item;

typedef struct peat_ci_opts {
    const char *suite;    /* suite file */
    const char *out_dir;  /* NULL: peat-ci/<suite name>-<UTC time> */
    const char *baseline; /* NULL: none */
    int update_baseline;
    const char *policy; /* policy file replacing the suite's [accept]/[thresholds]; NULL: none */
    int force;          /* reuse an out_dir that holds a suite result */
    /* finish the suite run in out_dir: an item whose finished campaign of the same command is
     * in out_dir/items or any out_dir/shard-*-of-* is taken (moved into this run's place), not
     * rerun (docs/scale-out.md "Resume") */
    int resume;
    int quiet;          /* no progress lines */
    int json;           /* only the verdict, as JSON, on stdout */
    const char *self;   /* the peat executable items run with (NULL: /proc/self/exe) */
    const char *budget; /* the whole suite's time (docs/nightly-ci.md); NULL: none */
    /* "i/N": run only items i, i+N, ... into OUT/shard-i-of-N (docs/scale-out.md); `peat merge
     * OUT` makes the suite result of the shards */
    const char *shard;
} peat_ci_opts;

typedef struct peat_ci_result {
    char out_dir[512];
    peat_suite suite;
    int n_items;
    peat_ci_item items[PEAT_CI_MAX_ITEMS];
    int counts[5];         /* PASS, WARN, FAIL, ERROR, SKIP */
    int baseline_compared; /* a baseline result existed and was compared */
    peat_diff diff;        /* against the baseline */
    int exit_code;         /* 0 pass, 1 a failure or regression, 2 an item reached no verdict */
    double seconds;
    double budget_s; /* peat ci --budget, 0: none */
    /* scale-out: this shard (n 0: the whole suite), the items the suite plans, and each kept
     * item's number in that plan (ids[i] = i when not sharded) */
    peat_scale_shard shard;
    int n_planned;
    int ids[PEAT_CI_MAX_ITEMS];
    char policy_file[256]; /* --policy (a merge reloads it with the suite) */
    int n_resumed;         /* items taken from an earlier run by --resume (not in ci.json) */
} peat_ci_result;

/* Runs the suite. PEAT_OK when every item was attempted (read res->exit_code); another status
 * is a usage or input error before anything ran (bad suite, unknown kernel, unwritable out). */
peat_status peat_nightly_ci_run(const peat_ci_opts *o, peat_ci_result *res);
void peat_nightly_ci_result_free(peat_ci_result *res);
/* `peat merge OUT [SHARD...]` for suites: the shards' results (default: every
 * OUT/shard-I-of-N/ci.json) into OUT's ci.json, summary.md, junit.xml and report.html, items in
 * the suite's order; refuses shards of another suite, shard count or peat version in one line
 * and names missing shards with their items. With baseline (NULL: none) the merged result is
 * compared with it as `peat ci --baseline` does, and replaces it with update_baseline.
 * res->exit_code as `peat ci` would exit. */
peat_status peat_nightly_ci_merge(const char *out, const char *const *shards, int n,
                                  const char *baseline, int update_baseline, peat_ci_result *res);
/* The checks of the options that need no suite (--baseline, --update-baseline, --resume, --force)
 * that every rank of `mpirun peat ci` makes alike. */
peat_status peat_nightly_ci_opts_check(const peat_ci_opts *o);
/* The checks of --baseline DIR and --update-baseline that `peat ci` and `peat merge` share. */
peat_status peat_nightly_ci_baseline_check(const char *baseline, int update_baseline);
/* The end of a suite result: ci.json and the reports written, compared with baseline (NULL:
 * none; a baseline without a ci.json yet is no comparison), res->exit_code set from the counts
 * and the regressions, and the baseline replaced with update_baseline. */
peat_status peat_nightly_ci_finish(peat_ci_result *res, const char *baseline, int update_baseline);
/* The suite's items as `peat ci` plans them (suite file, policy file or NULL), none run. */
peat_status peat_nightly_ci_plan(const char *suite, const char *policy, peat_ci_result *res);
/* `peat ci` under mpirun: rank r runs shard r/N, rank 0 merges (res on rank 0); alone: the run. */
peat_status peat_nightly_ci_run_ranks(const peat_ci_opts *o, peat_ci_result *res);

/* Writes ci.json, summary.md, junit.xml and report.html into res->out_dir. */
peat_status peat_nightly_ci_report_write(const peat_ci_result *res);
/* Copies the result's ci.json and each item's signature.json into baseline (created if
 * missing), replacing what it held: the next `peat ci --baseline` compares with this run. */
peat_status peat_nightly_ci_baseline_update(const char *baseline, const peat_ci_result *res);
/* The terminal table (a row per item) and the baseline's regressions. */
void peat_nightly_ci_print(FILE *f, const peat_ci_result *res);

#endif
