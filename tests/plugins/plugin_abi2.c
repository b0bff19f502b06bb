/* plugin_abi2.c: test plugin that says it was built for plugin ABI 2, whose kernel descriptor
 * ended before `flags`: whatever lies there (here a set REENTRANT bit) must not be read. */
#include "peat/plugin.h"

static peat_status abi2_gemm(const peat_args *a, const peat_kernel *self)
{
    (void)a, (void)self;
    return PEAT_ERR_UNSUPPORTED;
}

int peat_plugin_abi_version(void)
{
    return 2;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    static const peat_kernel k = {.name = "test_abi2_gemm",
                                  .op = PEAT_OP_GEMM,
                                  .backend = "cpu",
                                  .in_dtype = PEAT_DTYPE_F32,
                                  .out_dtype = PEAT_DTYPE_F32,
                                  .acc_dtype = PEAT_DTYPE_F32,
                                  .fn = abi2_gemm,
                                  .desc = "test: an ABI 2 plugin",
                                  .flags = PEAT_KERNEL_REENTRANT};
    return host->abi_version != 2 || host->register_kernel(&k) != PEAT_OK;
}
