/* iter_spec.h: iteration lists ("last", "none", "every:N", "0,10,59"), the selection of training
 * iterations that `peat run --checkpoint-iters` and `--activation-iters` take. */
#ifndef PEAT_CORE_ITER_SPEC_H
#define PEAT_CORE_ITER_SPEC_H

#include "peat/peat.h"

#include <stdint.h>

/* Validates an iteration list spec ("last", "none", "every:N", "a,b,c"). */
peat_status peat_iter_spec_check(const char *spec);
/* Refuses a valid spec that names an iteration a run of iters never reaches (option: its name). */
peat_status peat_iter_spec_check_range(const char *spec, int64_t iters, const char *option);
/* Whether iteration it (of iters) is selected by spec. */
int peat_iter_spec_match(const char *spec, int64_t it, int64_t iters);

#endif
