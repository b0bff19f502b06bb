/* heldout8.h: shared pieces of the eighth held-out defect set (the C files of tests/heldout8/,
 * built as libpeat_heldout8.so): defects over the old and the new op kinds (formula slips of
 * several sizes, precision lost in one part of a computation, truncation, flushes, range and NaN
 * sources, structural defects on one boundary, state, nondeterminism, transient upsets, stuck
 * bits) and honest forms in the orders frameworks and GPU kernels ship. Written and committed
 * after the seventh round's rules and their fixes were final and before any run of it, apart
 * from the zoo and the earlier held-out sets, and scored once on that tree. Each kernel's class in
 * tests/heldout8/manifest.tsv is set by construction (what the defect is), read only by the one-off
 * scoring. Most defects compute the op in double, round once to fp32 and add their defect, so that
 * nothing but the defect departs from a correctly rounded result. */
#ifndef PEAT_HELDOUT8_H
#define PEAT_HELDOUT8_H

#include "../heldout/heldout.h"

#include <stdlib.h>
#include <string.h>

int h8_register_llama(const peat_plugin_host *host);
int h8_register_resnet(const peat_plugin_host *host);
int h8_register_nn(const peat_plugin_host *host);

#endif
