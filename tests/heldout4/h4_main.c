/* h4_main.c: the fourth held-out plugin's entry points: registers every h4_ kernel. */
#include "heldout4.h"

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    return h4_register_nn(host) || h4_register_llama(host) || h4_register_resnet(host);
}
