/* heldout5.h: shared pieces of the fifth held-out defect set (the C files of tests/heldout5/,
 * built as libpeat_heldout5.so): defects over the old and the new op kinds (formula slips,
 * precision lost in one part of a computation, truncation, flushes, range and NaN sources,
 * structural defects on one axis, state, nondeterminism) and honest forms in the orders
 * frameworks and GPU kernels ship. Written and committed before the rule changes they are scored
 * against, and scored once, apart from the zoo and the earlier held-out sets. Each kernel's class
 * in tests/heldout5/manifest.tsv is set by construction (what the defect is), read only by the
 * one-off scoring. Most defects compute the op in double, round once to fp32, and add their
 * defect, so that nothing but the defect departs from a correctly rounded result. */
#ifndef PEAT_HELDOUT5_H
#define PEAT_HELDOUT5_H

#include "../heldout/heldout.h"

#include <stdlib.h>
#include <string.h>

int h5_register_llama(const peat_plugin_host *host);
int h5_register_resnet(const peat_plugin_host *host);
int h5_register_nn(const peat_plugin_host *host);

#endif
