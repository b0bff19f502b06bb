/* diff.h: `peat diff OLD NEW`: what got worse between two campaigns (signature.json) or two suite
 * results (ci.json), judged by a policy's thresholds. */
#ifndef PEAT_DIFF_H
#define PEAT_DIFF_H

#include <stdio.h>

#include "harness/nightly/jsonread.h"
#include "harness/nightly/suite.h"

typedef struct peat_diff_entry {
    char item[128]; /* kernel/flow/backend */
    int regression; /* 1: regression, 0: a change worth knowing (improvement, new/gone item) */
    char what[640]; /* "effective bits 22.6 -> 10.1 (lost 12.5, threshold 1)" */
} peat_diff_entry;

typedef struct peat_diff {
    int n, cap;
    peat_diff_entry *e;
    int n_regressions;
    int n_compared; /* campaigns compared */
} peat_diff;

void peat_nightly_diff_free(peat_diff *d);

/* Compares two parsed signature.json documents of one item. */
peat_status peat_nightly_diff_campaigns(const char *item, const peat_json *old_sig,
                                        const peat_json *new_sig, const peat_thresholds *th,
                                        peat_diff *d);
/* Compares two outputs: each a campaign directory (signature.json), a suite result directory
 * (ci.json), or one of those files. Both must be of the same kind. */
peat_status peat_nightly_diff_paths(const char *old_path, const char *new_path,
                                    const peat_thresholds *th, peat_diff *d);
/* What diff reads from a signature.json (campaign) or a ci.json (suite) is there and of its type
 * (diff_check.c): PEAT_ERR_FORMAT naming file and the first field that is not, else PEAT_OK. */
peat_status peat_nightly_diff_campaign_check(const peat_json *doc, const char *file);
peat_status peat_nightly_diff_suite_check(const peat_json *doc, const char *file);
/* The entries as text lines ("REGRESSION item: what"), then a one-line summary. */
void peat_nightly_diff_print(FILE *f, const peat_diff *d);

#endif
