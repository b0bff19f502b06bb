/* harness.h: the built-in kernels registered (builtin.c): every program calls it before it looks
 * a kernel up (the campaign stages, the CLI, tests, benchmarks). */
#ifndef PEAT_HARNESS_H
#define PEAT_HARNESS_H

#include "peat/peat.h"

/* Registers every built-in kernel (exact, golden, candidates; device ones where built) once;
 * idempotent and thread-safe. */
peat_status peat_campaign_builtin_init(void);

#endif
