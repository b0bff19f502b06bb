/* h8_main.c: the eighth held-out plugin's entry points: registers every h8_ kernel. */
#include "heldout8.h"

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    return h8_register_llama(host) || h8_register_resnet(host) || h8_register_nn(host);
}
