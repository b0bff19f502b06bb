/* runtime_call.h: how runtime FI calls the candidate: through the isolated worker (a crash,
 * hang, exit or stray write ends that run with a one-line reason, never peat), or in-process
 * under a watchdog with --no-isolate (harness-internal). */
#ifndef PEAT_HARNESS_RUNTIME_CALL_H
#define PEAT_HARNESS_RUNTIME_CALL_H

#include "core/exec_swap.h"
#include "peat/peat.h"

#include <stddef.h>

typedef struct peat_runtime_call peat_runtime_call;

/* Points s at k, called isolated (a worker of its own that keeps the kernel's state from call
 * to call, as one training run would) when isolate, else in-process with a watchdog of
 * timeout_s. *c is freed with peat_campaign_runtime_call_free after the run. */
peat_status peat_campaign_runtime_call_setup(const peat_kernel *k, int isolate, double timeout_s,
                                             peat_exec_swap *s, peat_runtime_call **c);
/* 1 when a call of the run crashed, hung, exited or wrote astray (why: one line), else 0. */
int peat_campaign_runtime_call_ended(const peat_runtime_call *c, char *why, size_t nwhy);
void peat_campaign_runtime_call_free(peat_runtime_call *c);

#endif
