/* calibrate.h: the detector's confusion matrix over the pseudo-error catalogue (`peat calibrate`).
 */
#ifndef PEAT_CALIBRATE_H
#define PEAT_CALIBRATE_H

#include <stdio.h>

#include "detector/detector.h"

/* Number of calibration cases (one per catalogue model) and what each expects. */
int peat_run_calibrate_cases(void);
const char *peat_run_calibrate_case_model(int i);
peat_finding_class peat_run_calibrate_case_expect(int i);

/* Injects every case into the golden GEMM on `trials` random shapes (M, N in 16..128, K in
 * 16..512) and inputs derived from seed; counts[case][primary finding]. Misses are logged. */
peat_status peat_run_calibrate(uint64_t seed, int trials, int counts[][PEAT_FIND_COUNT], FILE *log);
void peat_run_calibrate_print(FILE *f, int counts[][PEAT_FIND_COUNT], int trials);

/* ---- the defect zoo (harness/run/calibrate_zoo.c) ---- */
typedef struct peat_zoo_entry {
    char kernel[64], flow[32];
    int honest;                /* an honest kernel: must PASS */
    peat_finding_class expect; /* the class its defect should read as */
    peat_finding_class found;  /* primary finding of `peat run` */
    peat_acceptance verdict;
    char params[128];
} peat_zoo_entry;

typedef struct peat_zoo_score {
    int defects, caught, right, honest, false_alarms;
} peat_zoo_score;

/* The most kernels a manifest may list (e must hold as many). */
#define PEAT_ZOO_MAX 256

/* Loads the zoo plugin lib, reads manifest (kernel, flow, expected class, defect|honest) and
 * runs each kernel's default campaign on its flow (outputs under out_root); e holds up to
 * PEAT_ZOO_MAX. */
peat_status peat_run_calibrate_zoo(const char *lib, const char *manifest, const char *out_root,
                                   uint64_t seed, peat_zoo_entry *e, int *n, FILE *log);
/* Prints the confusion matrix (expected class x primary finding) and returns the scores. */
peat_zoo_score peat_run_calibrate_zoo_print(FILE *f, const peat_zoo_entry *e, int n);

#endif
