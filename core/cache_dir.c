/* cache_dir.c: the one rule for where PEAT's caches live (core/cache_dir.h). */
#include "core/cache_dir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

peat_status peat_cache_dir(const char *given, const char *what, size_t room, char *buf, size_t n)
{
    const char *env = getenv("PEAT_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"),
               *home = getenv("HOME");
    const char *dir = given ? given : env && env[0] ? env : NULL;
    if (dir && strlen(dir) + room >= n)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "the %s directory is %zu bytes long: at most %zu are supported", what,
                          strlen(dir), n - room - 1);
    if (dir)
        snprintf(buf, n, "%s", dir);
    else if (xdg && xdg[0] && strlen(xdg) + 5 + room < n)
        snprintf(buf, n, "%s/peat", xdg);
    else
        snprintf(buf, n, "%s/.cache/peat",
                 home && home[0] && strlen(home) + 12 + room < n ? home : "/tmp");
    return PEAT_OK;
}
