/* register.c: registers every built-in candidate kernel. */
#include "kernels/kernels.h"

peat_status peat_kernels_register_gemm(void);

peat_status peat_kernels_register(void)
{
    PEAT_TRY(peat_kernels_register_gemm());
    return PEAT_OK;
}
