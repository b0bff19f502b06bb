/* kernels.h: candidate kernels under validation (CPU; GPU ones live in harness/gpu). */
#ifndef PEAT_KERNELS_H
#define PEAT_KERNELS_H

#include "peat/peat.h"

/* Registers every built-in candidate kernel. */
peat_status peat_kernels_register(void);

#endif
