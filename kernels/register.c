/* register.c: registers every built-in candidate kernel. */
#include "kernels/kernels.h"

peat_status peat_kernels_register_gemm(void);

peat_status peat_kernels_register(void)
{
    PEAT_TRY(peat_kernels_register_gemm());
    PEAT_TRY(peat_kernels_register_lowp());
    PEAT_TRY(peat_kernels_register_conv());
    PEAT_TRY(peat_kernels_register_softmax());
    PEAT_TRY(peat_kernels_register_layernorm());
    PEAT_TRY(peat_kernels_register_gelu());
    PEAT_TRY(peat_kernels_register_attention());
    PEAT_TRY(peat_kernels_register_optim());
    PEAT_TRY(peat_kernels_register_rmsnorm());
    PEAT_TRY(peat_kernels_register_silu());
    PEAT_TRY(peat_kernels_register_rope());
    PEAT_TRY(peat_kernels_register_batchnorm());
    PEAT_TRY(peat_kernels_register_pool());
    return PEAT_OK;
}
