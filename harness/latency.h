/* latency.h: the harness side of the predictor: device description per backend, calibration of
 * every registered kernel with its HDF5 cache, and per-call / per-stage campaign predictions. */
#ifndef PEAT_HARNESS_LATENCY_H
#define PEAT_HARNESS_LATENCY_H

#include <stdio.h>

#include "predictor/predictor.h"

/* Describes the device of a backend ("cpu", "cuda", "hip") and warms it up until its clock is
 * steady; clk gets the clock (source "unknown" where it cannot be read). */
peat_status peat_latency_device(const char *backend, peat_pred_device *d, peat_pred_clock *clk);

#endif
