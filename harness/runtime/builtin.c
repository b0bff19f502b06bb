/* builtin.c: one-time registration of every built-in kernel (exact, golden, candidates), after
 * the check that every op kind's descriptor has every trait. */
#include "harness/runtime/builtin.h"
#include "core/opdesc.h"
#include "golden/golden.h"
#include "kernels/kernels.h"

#include <pthread.h>
#include <stdio.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static peat_status init_status;
static char init_msg[512];

#ifdef PEAT_HAVE_GPU
/* core/gpu: registers the CUDA or HIP backend and its device kernels */
peat_status peat_gpu_register(void);
#endif
#ifdef PEAT_HAVE_OPENCL
/* core/opencl: registers the OpenCL backend and its device kernels */
peat_status peat_opencl_register(void);
#endif

/* An op whose descriptor lacks a trait would fail far from here (a probe stage, a bound): named
 * at start-up instead. */
static peat_status check_op_table(void)
{
    char missing[256];
    for (int k = 0; k < PEAT_OP_COUNT; k++)
        if (*peat_op_desc_missing((peat_op_kind)k, missing, sizeof missing))
            return PEAT_ERROR(PEAT_ERR_INTERNAL,
                              "op kind %d (%s) lacks descriptor traits: %s (core/ops/table.c)", k,
                              peat_op_name((peat_op_kind)k), missing);
    return PEAT_OK;
}

static void init_once(void)
{
    init_status = check_op_table();
    if (init_status == PEAT_OK) init_status = peat_golden_register();
    if (init_status == PEAT_OK) init_status = peat_kernels_register();
#ifdef PEAT_HAVE_OPENCL
    if (init_status == PEAT_OK) init_status = peat_opencl_register();
#endif
#ifdef PEAT_HAVE_GPU
    if (init_status == PEAT_OK) init_status = peat_gpu_register();
#endif
    if (init_status != PEAT_OK) snprintf(init_msg, sizeof init_msg, "%s", peat_error_last());
}

peat_status peat_runtime_builtin_init(void)
{
    pthread_once(&once, init_once);
    if (init_status != PEAT_OK)
        return PEAT_ERROR(init_status, "registering built-in kernels: %s", init_msg);
    return PEAT_OK;
}
