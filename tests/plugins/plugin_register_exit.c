/* plugin_register_exit.c: test plugin whose register function calls exit(0). */
#include "peat/plugin.h"

#include <stdlib.h>

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    exit(0);
}
