/* plugin_register_segv.c: test plugin whose register function dereferences NULL. */
#include "peat/plugin.h"

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    volatile int *p = 0;
    *p = 1;
    return 0;
}
