/* harness.h: the top floor's entry points that other programs (tests, benchmarks) call. */
#ifndef PEAT_HARNESS_H
#define PEAT_HARNESS_H

#include "peat/peat.h"

/* Registers every built-in kernel (exact, golden, candidates; device ones where built) once;
 * idempotent and thread-safe. */
peat_status peat_builtin_init(void);

#endif
