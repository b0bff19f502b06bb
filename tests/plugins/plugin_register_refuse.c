/* plugin_register_refuse.c: test plugin that refuses to register, with its reason. */
#include "peat/plugin.h"

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    host->error(PEAT_ERR_UNSUPPORTED, __FILE__, __LINE__, "needs AVX-512, this CPU has none");
    return 1;
}
