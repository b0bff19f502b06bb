/* iter_spec.c: iteration lists ("last", "none", "every:N", "0,10,59"): which iterations of a
 * training run keep a checkpoint or record activations (docs/cli.md, --checkpoint-iters). */
#include "core/iter_spec.h"

#include <stdlib.h>
#include <string.h>

peat_status peat_iter_spec_check(const char *spec)
{
    if (!spec || !strcmp(spec, "last") || !strcmp(spec, "none")) return PEAT_OK;
    if (!strncmp(spec, "every:", 6)) {
        char *end;
        long long n = strtoll(spec + 6, &end, 10);
        if (*end || n < 1)
            return PEAT_ERROR(PEAT_ERR_INVAL, "bad iteration list '%s' (every:N needs N >= 1)",
                              spec);
        return PEAT_OK;
    }
    const char *c = spec;
    while (*c) {
        char *end;
        long long v = strtoll(c, &end, 10);
        if (end == c || v < 0 || (*end && *end != ','))
            return PEAT_ERROR(PEAT_ERR_INVAL,
                              "bad iteration list '%s' (last, none, every:N or 0,10,20)", spec);
        c = *end ? end + 1 : end;
    }
    return PEAT_OK;
}

peat_status peat_iter_spec_check_range(const char *spec, int64_t iters, const char *option)
{
    if (!spec || !strcmp(spec, "last") || !strcmp(spec, "none")) return PEAT_OK;
    if (!strncmp(spec, "every:", 6)) return PEAT_OK; /* always includes the last iteration */
    for (const char *c = spec; *c;) {
        char *end;
        long long v = strtoll(c, &end, 10);
        if (v >= iters)
            return PEAT_ERROR(PEAT_ERR_INVAL,
                              "--%s: iteration %lld is past the run's last (%lld of --iters %lld)",
                              option, v, (long long)iters - 1, (long long)iters);
        c = *end ? end + 1 : end;
    }
    return PEAT_OK;
}

int peat_iter_spec_match(const char *spec, int64_t it, int64_t iters)
{
    if (!spec || !strcmp(spec, "none")) return 0;
    if (!strcmp(spec, "last")) return it == iters - 1;
    if (!strncmp(spec, "every:", 6)) {
        long long n = atoll(spec + 6);
        return n > 0 && (it % n == n - 1 || it == iters - 1);
    }
    for (const char *c = spec; *c;) {
        char *end;
        long long v = strtoll(c, &end, 10);
        if (v == it) return 1;
        c = *end ? end + 1 : end;
    }
    return 0;
}
