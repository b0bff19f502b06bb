/* heldout7.h: shared pieces of the seventh held-out defect set (the C files of tests/heldout7/,
 * built as libpeat_heldout7.so): defects over the old and the new op kinds (formula slips of
 * several sizes, precision lost in one part of a computation, truncation, flushes, range and NaN
 * sources, structural defects on one boundary, state, nondeterminism, transient upsets, stuck
 * bits) and honest forms in the orders frameworks and GPU kernels ship. Written and committed
 * before the seventh round's rule changes, apart from the zoo and the earlier held-out sets, and
 * scored once. Each kernel's class in tests/heldout7/manifest.tsv is set by construction (what
 * the defect is), read only by the one-off scoring. Most defects compute the op in double, round
 * once to fp32 and add their defect, so that nothing but the defect departs from a correctly
 * rounded result. */
#ifndef PEAT_HELDOUT7_H
#define PEAT_HELDOUT7_H

#include "../heldout/heldout.h"

#include <stdlib.h>
#include <string.h>

int h7_register_llama(const peat_plugin_host *host);
int h7_register_resnet(const peat_plugin_host *host);
int h7_register_nn(const peat_plugin_host *host);

#endif
