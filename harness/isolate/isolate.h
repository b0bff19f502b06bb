/* isolate.h: running a candidate kernel in an isolated child with a deadline, its outputs in
 * guarded shared memory and its inputs in copies, so that whatever the kernel does is reported
 * (harness-internal; playback and later stages that run candidates use it). */
#ifndef PEAT_HARNESS_ISOLATE_H
#define PEAT_HARNESS_ISOLATE_H

#include "peat/peat.h"

#include <stddef.h>

/* Allocates a->out[0..n) in shared memory (F32, shaped like tmpl[i]) so that a child can fill
 * them, each between sentinel bytes and guard pages (an out-of-bounds write is seen); on failure
 * nothing stays allocated and a->n_out is 0. */
peat_status peat_isolate_outputs_alloc(peat_args *a, peat_tensor *const *tmpl, int n);
/* Releases what peat_isolate_outputs_alloc made (a->out entries become NULL). */
void peat_isolate_outputs_free(peat_args *a);

/* What one candidate call did. */
typedef enum {
    PEAT_CALL_DONE,           /* completed: the outputs are the kernel's */
    PEAT_CALL_FAILED,         /* returned an error, or crashed */
    PEAT_CALL_HUNG,           /* killed at the deadline */
    PEAT_CALL_DUE,            /* ended its process (exit, any code) without completing */
    PEAT_CALL_OOB_WRITE,      /* completed, but wrote before or after an output buffer */
    PEAT_CALL_INPUT_MUTATION, /* completed, but wrote into an input */
} peat_call_outcome;

/* Runs k on a, whose outputs come from peat_isolate_outputs_alloc. The kernel gets copies
 * of the inputs (a's own are never written, so references computed from them stay clean), compared
 * with them afterwards; the outputs' sentinels are checked. Isolated: in the calling thread's
 * persistent worker for k (harness/isolate/isolate_worker.c; a forked child per call with
 * PEAT_ISOLATE=fork), its own process group, killed with peat, with a deadline of timeout_s;
 * every call starts from the kernel's state at the worker's start. In-process, a crash, an exit
 * or a call past timeout_s ends peat with one line. *out says what the call did, why (one line) why
 * when it is not DONE. Returns PEAT_OK whatever the kernel did; any other status is the runner's
 * own failure (fork, memory). */
peat_status peat_isolate_call(const peat_kernel *k, const peat_args *a, int isolate,
                              double timeout_s, peat_call_outcome *out, char *why, size_t nwhy);

/* k on a in this process (no copies, no guards) for callers that cannot isolate (runtime FI with
 * --no-isolate): a crash, an exit or a call still running after timeout_s (0: no deadline) ends
 * peat with one line naming the kernel and exit status 1 (DUE); the kernel's status otherwise. */
peat_status peat_isolate_watched_run(const peat_kernel *k, const peat_args *a, double timeout_s);

/* Ends the calling thread's isolated worker (peat_isolate_call starts one per kernel and
 * thread, kept between calls): a stage that is done with its candidate calls this. */
void peat_isolate_workers_close(void);

/* peat_isolate_call for callers that need only pass or fail: PEAT_OK when the call
 * completed cleanly, PEAT_ERR_KERNEL with a one-line reason in why otherwise; any other status is
 * the runner's own failure. */
peat_status peat_isolate_run(const peat_kernel *k, const peat_args *a, int isolate,
                             double timeout_s, char *why, size_t nwhy);

/* Untrusted work other than one call (timing a candidate kernel for the latency model): runs
 * fn(arg) in a forked child with a deadline of timeout_s, as an isolated call runs. fn's results
 * must go to memory from peat_isolate_shared. PEAT_OK when fn returned PEAT_OK and the
 * child exited; PEAT_ERR_KERNEL with a one-line reason naming `name` in why when fn failed,
 * crashed, ended the process or hung; any other status is the runner's own failure (fork, memory).
 * Not for device backends (a GPU runtime does not survive fork). */
peat_status peat_isolate_work(const char *name, peat_status (*fn)(void *arg), void *arg,
                              double timeout_s, char *why, size_t nwhy);
/* n bytes shared with children (zeroed), and their release. */
void *peat_isolate_shared(size_t n);
void peat_isolate_shared_free(void *p, size_t n);

#endif
