/* swap.c: runtime fault injection: a pseudo-error model standing in for a kernel in training, and
 * the frequency syntax of its schedule. */
#include "inject/internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

peat_status peat_inject_freq_parse(const char *s, int64_t *every, double *prob)
{
    *every = 0;
    *prob = 0.0;
    if (!s || !*s) return PEAT_ERROR(PEAT_ERR_INVAL, "empty runtime frequency");
    char *end;
    errno = 0;
    if (!strncmp(s, "p=", 2)) {
        double p = strtod(s + 2, &end);
        if (end == s + 2 || *end || errno || !(p > 0.0 && p <= 1.0))
            return PEAT_ERROR(PEAT_ERR_INVAL, "runtime frequency '%s': p must be in (0, 1]", s);
        *prob = p;
        return PEAT_OK;
    }
    long long num = strtoll(s, &end, 10);
    if (end == s || errno || num < 0 || num > 1)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "runtime frequency '%s': use 1, 1/K (every K-th call), 0 or p=P", s);
    if (*end == 0) {
        *every = num; /* 1: every call; 0: idle */
        return PEAT_OK;
    }
    if (*end != '/' || num != 1)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "runtime frequency '%s': use 1, 1/K (every K-th call), 0 or p=P", s);
    const char *d = end + 1;
    long long k = strtoll(d, &end, 10);
    if (end == d || *end || errno || k < 1 || k > 1000000000LL)
        return PEAT_ERROR(PEAT_ERR_INVAL, "runtime frequency '%s': K in 1/K must be 1..1e9", s);
    *every = k;
    return PEAT_OK;
}
