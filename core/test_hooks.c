/* test_hooks.c: PEAT_TEST_HOOKS, the one test interface (test_hooks.h): a test's request for a
 * fault in a chosen rank, parsed here and nowhere else; compiled only with the PEAT_TEST_HOOKS
 * build option (CMakeLists.txt leaves this file out without it). */
#include "core/test_hooks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int peat_test_hook_rank(const char *name, int rank, char *arg, size_t n)
{
    if (n) arg[0] = 0;
    const char *all = getenv("PEAT_TEST_HOOKS");
    size_t len = strlen(name);
    for (const char *p = all; p && *p;) {
        const char *end = strchr(p, ',');
        size_t item = end ? (size_t)(end - p) : strlen(p);
        if (item > len && strncmp(p, name, len) == 0 && p[len] == '=') {
            char buf[64];
            snprintf(buf, sizeof buf, "%.*s", (int)(item - len - 1), p + len + 1);
            char *colon = strchr(buf, ':');
            if (colon) *colon = 0;
            if (atoi(buf) == rank) {
                if (n && colon) snprintf(arg, n, "%s", colon + 1);
                return 1;
            }
        }
        p = end ? end + 1 : NULL;
    }
    return 0;
}
