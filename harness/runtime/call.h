/* runtime_call.h: how runtime FI calls the candidate: through the isolated worker (a crash,
 * hang, exit or stray write ends that run with a one-line reason, never peat), or in-process
 * under a watchdog with --no-isolate (harness-internal); and the shadow check of its calls
 * against the op's rounding bound beside the golden kernel's (docs/fault-injection.md). */
#ifndef PEAT_RUNTIME_CALL_H
#define PEAT_RUNTIME_CALL_H

#include "core/exec_swap.h"
#include "peat/peat.h"

#include <stddef.h>

typedef struct peat_runtime_call peat_runtime_call;

/* The shadow check of one faulty run: which of the candidate's calls are checked (every one of
 * the first `first`, then every `every`-th, and every call of the run's last iteration), what
 * they cost and the first call whose error left its envelope. */
typedef struct peat_runtime_shadow {
    int on;
    int64_t first, every; /* the schedule (calls counted from 0 in the run) */
    double self_norm;     /* the candidate's largest error / bound on the playback's fresh calls */
    int64_t calls, checked, exact,
        bad; /* calls made; checked; needing the exact; out of envelope */
    int64_t bad_call, bad_iter, bad_op_call; /* the first bad one: its index among the run's calls
                                                of the candidate, iteration, op call index */
    char bad_layer[48], bad_shape[64];
    double bad_cand, bad_gold, bad_env; /* its max err / bound, golden's, and the envelope */
    double seconds;                     /* spent checking (golden reruns, exact, comparison) */
} peat_runtime_shadow;

/* Points s at k, called isolated (a worker of its own that keeps the kernel's state from call
 * to call, as one training run would) when isolate, else in-process with a watchdog of
 * timeout_s; with shadow (NULL: none) on, the calls it schedules are checked. *c is freed with
 * peat_runtime_call_free after the run. */
peat_status peat_runtime_call_setup(const peat_kernel *k, int isolate, double timeout_s,
                                    const peat_runtime_shadow *shadow, peat_exec_swap *s,
                                    peat_runtime_call **c);
/* The run's last iteration (its calls are all checked); steering may move it. */
void peat_runtime_call_last_iter(peat_runtime_call *c, int64_t last);
/* 1 when a call of the run crashed, hung, exited or wrote astray (why: one line), else 0. */
int peat_runtime_call_ended(const peat_runtime_call *c, char *why, size_t nwhy);
/* The shadow check's tally so far (zeroed when c is NULL or has none). */
void peat_runtime_call_shadow(const peat_runtime_call *c, peat_runtime_shadow *out);
void peat_runtime_call_free(peat_runtime_call *c);

/* One call's check (exposed for tests): given the call's inputs, the candidate's outputs in a,
 * the golden kernel, the largest error / bound of each against the exact result (*cand, *gold)
 * and whether the call needed the exact (0: the outputs were within the cheap sufficient
 * threshold of the golden's, *cand and *gold are then not computed and set to -1). */
peat_status peat_runtime_shadow_measure(const peat_args *a, const peat_kernel *golden, double *cand,
                                        double *gold, int *exact);
/* The envelope of a checked call: max(PEAT_SHADOW_FACTOR x max(1, gold), PEAT_SHADOW_SELF_FACTOR
 * x self when self > 1) (docs/fault-injection.md, "The shadow check"). */
double peat_runtime_shadow_envelope(double gold, double self);

#endif
