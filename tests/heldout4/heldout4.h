/* heldout4.h: shared pieces of the fourth held-out defect set (the C files of tests/heldout4/,
 * built as libpeat_heldout4.so): defects over the old and the new op kinds (formula slips of
 * several sizes, precision lost in one part of a computation, rounding toward zero, flushes,
 * range and NaN sources that probes reach, structural defects on one axis, state) and honest
 * forms in the orders kernels ship, written after the rules they are scored against and scored
 * once, apart from the zoo and the earlier held-out sets. Each kernel's class in
 * tests/heldout4/manifest.tsv is set by construction (what the defect is), read only by the
 * one-off scoring. Most defects compute the op in double, round once to fp32, and then add their
 * defect, so that nothing but the defect departs from a correctly rounded result. */
#ifndef PEAT_HELDOUT4_H
#define PEAT_HELDOUT4_H

#include "../heldout/heldout.h"

#include <stdlib.h>

static inline double h4_gelu(double x)
{
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

int h4_register_nn(const peat_plugin_host *host);
int h4_register_llama(const peat_plugin_host *host);
int h4_register_resnet(const peat_plugin_host *host);

#endif
