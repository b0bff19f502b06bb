/* h5_main.c: the fifth held-out plugin's entry points: registers every h5_ kernel. */
#include "heldout5.h"

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    return h5_register_llama(host) || h5_register_resnet(host) || h5_register_nn(host);
}
