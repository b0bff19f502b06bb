/* zoo_main.c: the zoo plugin's entry points: registers every zoo kernel. */
#include "zoo.h"

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    return zoo_register_gemm(host) || zoo_register_conv(host) || zoo_register_softmax(host) ||
           zoo_register_layernorm(host) || zoo_register_attention(host) ||
           zoo_register_honest_optim(host) || zoo_register_honest_nn(host) ||
           zoo_register_latent(host) || zoo_register_honest_bwd(host) ||
           zoo_register_formula(host) || zoo_register_transient(host) || zoo_register_views(host) ||
           zoo_register_state(host) || zoo_register_rmsnorm(host) || zoo_register_silu(host) ||
           zoo_register_rope(host) || zoo_register_gqa(host) || zoo_register_resnet(host) ||
           zoo_register_fp8(host);
}
