/* plugin_ctor_real_crash.c: test plugin that registers cleanly where stdout is /dev/null (peat's
 * loading child) and crashes where it is not (peat itself). */
#include "peat/plugin.h"

#include <sys/stat.h>

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    (void)host;
    struct stat out, null;
    if (fstat(1, &out) == 0 && stat("/dev/null", &null) == 0 && out.st_rdev == null.st_rdev &&
        S_ISCHR(out.st_mode))
        return 0;
    return *(volatile int *volatile)0;
}
