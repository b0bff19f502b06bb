/* golden.c: registers every exact and golden kernel. */
#include "golden/golden.h"

peat_status peat_golden_register(void)
{
    PEAT_TRY(peat_golden_register_gemm());
    PEAT_TRY(peat_golden_register_nn());
    PEAT_TRY(peat_golden_register_attention());
    PEAT_TRY(peat_golden_register_optim());
    PEAT_TRY(peat_golden_register_rmsnorm());
    PEAT_TRY(peat_golden_register_silu());
    PEAT_TRY(peat_golden_register_rope());
    PEAT_TRY(peat_golden_register_batchnorm());
    PEAT_TRY(peat_golden_register_pool());
    return PEAT_OK;
}
