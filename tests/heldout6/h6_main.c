/* h6_main.c: the sixth held-out plugin's entry points: registers every h6_ kernel. */
#include "heldout6.h"

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    return h6_register_llama(host) || h6_register_resnet(host) || h6_register_nn(host);
}
