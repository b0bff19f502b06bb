/* swap.c: runtime fault injection: a pseudo-error model standing in for a kernel in training (its
 * schedule's frequencies: core/freq.h). */
#include "inject/internal.h"

peat_status peat_inject_swap_run(void *user, const peat_kernel *active, const peat_args *a,
                                 const peat_call_info *info)
{
    const peat_inject_swap *s = user;
    /* a transient fault strikes each call anew; a deterministic mechanism is the same kernel
     * instance on every call */
    uint64_t seed = peat_inject_model_transient(s->m)
                        ? s->seed ^ (uint64_t)info->call_index * 0x9E3779B97F4A7C15ull
                        : s->seed;
    return peat_inject_run(s->m, s->kernel ? s->kernel : active, a, seed);
}
