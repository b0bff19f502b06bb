/* magnitude.c: per-element magnitude (sum of |terms|) of each op's computation, for error bounds. */
#include "golden/golden.h"

#include <math.h>

peat_status peat_golden_gemm_magnitude(const peat_args *a, double *mag);

peat_status peat_golden_magnitude(const peat_args *a, int o, const peat_tensor *exact_out, double *mag)
{
    if (a->op == PEAT_OP_GEMM && o == 0) return peat_golden_gemm_magnitude(a, mag);
    /* default: the value itself (elementwise ops round once) */
    if (!exact_out) return PEAT_ERROR(PEAT_ERR_INVAL, "magnitude of %s needs the exact output", peat_op_name(a->op));
    int64_t n = peat_tensor_numel(exact_out);
    for (int64_t i = 0; i < n; i++) mag[i] = fabs(peat_tensor_get(exact_out, i));
    return PEAT_OK;
}
