/* h3_main.c: the third held-out plugin's entry points: registers every h3_ kernel. */
#include "heldout3.h"

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    return h3_register_llama(host) || h3_register_resnet(host) || h3_register_misc(host);
}
