/* ho_main.c: the held-out plugin's entry points: registers every held-out kernel. */
#include "heldout.h"

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    return ho_register_gemm(host) || ho_register_conv(host) || ho_register_nn(host) ||
           ho_register_gelu(host) || ho_register_norm(host) || ho_register_softmax(host) ||
           ho_register_attention(host) || ho_register_optim(host) || ho_register_state(host);
}
