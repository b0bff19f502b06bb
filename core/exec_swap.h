/* exec_swap.h: the exec context's swap hook, PEAT's own runtime fault injection (core/exec.c;
 * inject/ and the runtime-FI driver harness/runtime/runtime.c use it). Not part of the plugin API.
 */
#ifndef PEAT_CORE_EXEC_SWAP_H
#define PEAT_CORE_EXEC_SWAP_H

#include "peat/peat.h"

/* Runtime fault injection: the swap hook replaces the active kernel of one op by a faulty one on
 * a schedule, inside the flow, so that the weights evolve with the faults (persistent). The
 * faulty computation is a kernel (e.g. the candidate) or a function (e.g. a pseudo-error model
 * applied to the golden kernel, inject/). A call is eligible when it is of op `op`, its
 * iteration is in [iter_lo, iter_hi), its phase bit is in `phases` and its layer is listed; the
 * n-th eligible call (0-based) is swapped when n % every == 0 (every >= 1), or, with prob > 0,
 * when a uniform draw keyed by (seed, n) is below prob. every == 0 and prob == 0: the hook is
 * idle (eligible calls are counted, nothing is replaced). */
typedef peat_status (*peat_swap_fn)(void *user, const peat_kernel *active, const peat_args *a,
                                    const peat_call_info *info);
typedef struct peat_exec_swap {
    peat_op_kind op;
    const peat_kernel *kernel; /* the faulty kernel, or NULL: then fn */
    peat_swap_fn fn;           /* runs the call in place of the active kernel */
    void *user;
    int64_t every;            /* every k-th eligible call (1 = all); 0 = by prob or idle */
    double prob;              /* probability per eligible call when > 0 (every ignored) */
    uint64_t seed;            /* draws of the probabilistic schedule */
    int64_t iter_lo, iter_hi; /* iterations [lo, hi); hi 0 = to the end */
    uint32_t phases;          /* bit (1u << peat_phase); 0 = every phase */
    const char *layers;       /* comma-separated layer names ("fc1,fc2"; "h0.*" is a prefix);
                                 NULL or "" = every layer; the string must outlive the swap */
} peat_exec_swap;

/* Installs the swap (copied) or removes it (NULL); resets its counters. */
peat_status peat_exec_set_swap(peat_exec_t *ex, const peat_exec_swap *s);
/* Eligible calls seen and calls swapped since the swap was set. */
int64_t peat_exec_swap_eligible(const peat_exec_t *ex);
int64_t peat_exec_swapped(const peat_exec_t *ex);

#endif
