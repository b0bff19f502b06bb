/* plugin_bad_abi.c: test plugin built for another ABI version: the host must refuse it. */
#include "peat/plugin.h"

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION + 41;
}
int peat_plugin_register(const peat_plugin_host *host)
{
    return 0;
}
