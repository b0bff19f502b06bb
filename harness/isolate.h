/* isolate.h: running a candidate kernel in a forked child with a deadline, its outputs in shared
 * memory (harness-internal; playback and later stages that run candidates use it). */
#ifndef PEAT_HARNESS_ISOLATE_H
#define PEAT_HARNESS_ISOLATE_H

#include "peat/peat.h"

#include <stddef.h>

/* Allocates a->out[0..n) in shared memory (F32, shaped like tmpl[i]) so that a child can fill
 * them; on failure nothing stays allocated and a->n_out is 0. */
peat_status peat_isolate_outputs_alloc(peat_args *a, peat_tensor *const *tmpl, int n);
/* Releases what peat_isolate_outputs_alloc made (a->out entries become NULL). */
void peat_isolate_outputs_free(peat_args *a);

/* Runs k on a. Isolated: in a forked child with a deadline of timeout_s, so that a crashing or
 * hanging candidate is reported instead of taking the campaign down. Returns PEAT_OK, or
 * PEAT_ERR_KERNEL with a one-line reason in why when the kernel failed, crashed or hung; any
 * other status is the runner's own failure (fork, memory). */
peat_status peat_isolate_run(const peat_kernel *k, const peat_args *a, int isolate,
                             double timeout_s, char *why, size_t nwhy);

#endif
