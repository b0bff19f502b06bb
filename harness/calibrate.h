/* calibrate.h: the detector's confusion matrix over the pseudo-error catalogue (`peat calibrate`).
 */
#ifndef PEAT_CALIBRATE_H
#define PEAT_CALIBRATE_H

#include <stdio.h>

#include "detector/detector.h"

/* Number of calibration cases (one per catalogue model) and what each expects. */
int peat_calibrate_cases(void);
const char *peat_calibrate_case_model(int i);
peat_finding_class peat_calibrate_case_expect(int i);

/* Injects every case into the golden GEMM on `trials` random shapes (M, N in 16..128, K in
 * 16..512) and inputs derived from seed; counts[case][primary finding]. Misses are logged. */
peat_status peat_calibrate_run(uint64_t seed, int trials, int counts[][PEAT_FIND_COUNT], FILE *log);
void peat_calibrate_print(FILE *f, int counts[][PEAT_FIND_COUNT], int trials);

#endif
