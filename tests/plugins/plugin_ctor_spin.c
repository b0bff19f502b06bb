/* plugin_ctor_spin.c: test plugin whose constructor spins forever (dlopen never returns). */
#include "peat/plugin.h"

__attribute__((constructor)) static void spin(void)
{
    for (volatile unsigned long n = 0;; n++) {
    }
}

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    (void)host;
    return 0;
}
