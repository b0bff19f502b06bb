/* harness.h: the built-in kernels registered (builtin.c): every program calls it before it looks
 * a kernel up (the campaign stages, the CLI, tests, benchmarks). */
#ifndef PEAT_RUNTIME_BUILTIN_H
#define PEAT_RUNTIME_BUILTIN_H

#include "peat/peat.h"

/* Registers every built-in kernel (exact, golden, candidates; device ones where built) once;
 * idempotent and thread-safe. */
peat_status peat_runtime_builtin_init(void);

#endif
