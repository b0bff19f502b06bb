/* h2_main.c: the second held-out plugin's entry points: registers every h2_ kernel. */
#include "heldout2.h"

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    return h2_register_nn(host) || h2_register_norm(host) || h2_register_conv(host) ||
           h2_register_attention(host) || h2_register_optim(host) || h2_register_state(host);
}
