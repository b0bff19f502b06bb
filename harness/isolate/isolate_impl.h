/* isolate_impl.h: what the fork-per-call runner (isolate.c) and the persistent worker
 * (isolate_worker.c) share: the guarded-buffer layout, the fault notes, the call report and the
 * checks after a call (harness-internal, isolate*.c only). */
#ifndef PEAT_HARNESS_ISOLATE_IMPL_H
#define PEAT_HARNESS_ISOLATE_IMPL_H

#include "harness/isolate/isolate.h"

#include <stddef.h>
#include <stdint.h>

/* A guarded output: [guard][head page: peat_isolate_guard_head, then sentinel][data, then
 * sentinel to a page end][guard]. */
enum { PEAT_ISOLATE_SENTINEL = 0xA5, PEAT_ISOLATE_TAIL_MIN = 64 };

typedef struct {
    uint64_t magic;
    size_t nbytes, map_len, guard;
} peat_isolate_guard_head;

/* The data pages (data, then at least PEAT_ISOLATE_TAIL_MIN sentinel bytes, to a page end) and
 * the guard on each side for an output of nb bytes. */
void peat_isolate_guard_geometry(size_t nb, size_t *data_len, size_t *guard);
/* Fills the head page and the data pages at mid (pg + data_len bytes) with the sentinel and
 * writes the head. */
void peat_isolate_guard_head_init(void *mid, size_t nb);

typedef struct {
    int hit, index;
    long long offset; /* bytes from the start of the buffer (negative: before it) */
} peat_isolate_fault_note;

/* What a call reports in shared memory: the isolated child writes it, the parent reads it. */
typedef struct {
    int status; /* the kernel's status, or PEAT_ISOLATE_NEVER_RETURNED / _CALLED_EXIT */
    char msg[256];
    peat_isolate_fault_note oob, input;
    int opened; /* the fault handler made a guarded page accessible (a read there, no finding) */
} peat_isolate_report;

/* NEVER_RETURNED, CALLED_EXIT: what the kernel did; WORKER_NOMEM: the worker could not map the
 * call's buffers before the kernel ran (peat's memory, a limit such as ulimit -v: the run ends
 * with an error, the kernel is not blamed) */
enum {
    PEAT_ISOLATE_NEVER_RETURNED = -1,
    PEAT_ISOLATE_CALLED_EXIT = -2,
    PEAT_ISOLATE_WORKER_NOMEM = -3
};

/* Lists run's output guard regions and its input copies (made read-only) for the SIGSEGV
 * handler, which notes the first stray write of each kind into rep; and removes it. */
void peat_isolate_faults_arm(const peat_args *run, peat_isolate_report *rep);
void peat_isolate_faults_disarm(void);
/* With the handler installed by an earlier arm (kept: a worker's child), only the regions of
 * run's call (its inputs already mapped read-only), and none again after it. */
void peat_isolate_faults_watch(const peat_args *run, peat_isolate_report *rep);
void peat_isolate_faults_unwatch(void);
/* In a child: crash signals back to their default action (the parent reports the signal). */
void peat_isolate_crash_default(void);
/* What a child's end (waitpid status wst) and its report say about the call. */
peat_call_outcome peat_isolate_child_verdict(const char *name, int wst,
                                             const peat_isolate_report *rep, char *why,
                                             size_t nwhy);
/* After a completed call of k on run (the copies of a's inputs, the guarded outputs): writes
 * outside the outputs, then into the inputs; *out and why updated when one is found. */
void peat_isolate_writes_check(const peat_kernel *k, const peat_args *a, const peat_args *run,
                               const peat_isolate_report *rep, peat_call_outcome *out, char *why,
                               size_t nwhy);

/* The persistent worker (isolate_worker.c): one child per kernel that runs call after call,
 * inputs and outputs passed through a shared memory file. */
typedef struct peat_isolate_worker peat_isolate_worker;
/* A worker for k (the child starts at the first call). keep_state 0: every call starts from the
 * kernel's state at the worker's start, as with a fork per call (a call that changed the
 * writable data of the kernel's module ends the worker; the next call gets a fresh one);
 * keep_state 1: the kernel's state carries from call to call, as in one training run. */
peat_status peat_isolate_worker_create(const peat_kernel *k, int keep_state,
                                       peat_isolate_worker **w);
/* One call of the worker's kernel on a (outputs from peat_isolate_outputs_alloc or any F32
 * buffers): what peat_isolate_call says, with the same guarantees. */
peat_status peat_isolate_worker_call(peat_isolate_worker *w, const peat_args *a, double timeout_s,
                                     peat_call_outcome *out, char *why, size_t nwhy);
/* Ends the child (and its process group) and frees w; NULL is fine. */
void peat_isolate_worker_free(peat_isolate_worker *w);
/* Starts the child now rather than at the first call. A fork copies only the calling thread, so a
 * lock another thread holds at that moment (an allocator's that is not fork-safe, ASan's among
 * them) stays held in the child forever: callers that go on to run threads start their workers
 * here, before the threads exist. */
peat_status peat_isolate_worker_start(peat_isolate_worker *w);
/* The worker's next calls lay their buffers out `pages` pages further into the shared file: a
 * layout of its own, which the child maps at other addresses (the call sequences' "new buffers,
 * same data"); 0 is the usual layout. */
void peat_isolate_worker_shift(peat_isolate_worker *w, int pages);
/* Children (re)started by this worker so far (a test's and a benchmark's view). */
int peat_isolate_worker_spawns(const peat_isolate_worker *w);
/* peat_isolate_call's isolated path: the calling thread's worker for k (a new one when k
 * changes). */
peat_status peat_isolate_worker_shared_call(const peat_kernel *k, const peat_args *a,
                                            double timeout_s, peat_call_outcome *out, char *why,
                                            size_t nwhy);
/* 1 when PEAT_ISOLATE=fork asks for a fork per call (the former runner, kept for comparison). */
int peat_isolate_fork_per_call(void);

#endif
