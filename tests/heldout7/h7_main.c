/* h7_main.c: the seventh held-out plugin's entry points: registers every h7_ kernel. */
#include "heldout7.h"

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    return h7_register_llama(host) || h7_register_resnet(host) || h7_register_nn(host);
}
