/* latency.c: device description and warm-up per backend, for the predictor. */
#include "harness/latency.h"

#include <string.h>

#include "peat/backend.h"

/* The work the warm-up repeats: one mid-sized golden GEMM on the backend's device. */
typedef struct warm_work {
    const peat_kernel *k;
    peat_pred_call c;
} warm_work;

static void warm_call(void *user)
{
    warm_work *w = user;
    peat_kernel_run(w->k, &w->c.a);
}

static peat_status warm_up(const char *backend, peat_pred_clock *clk)
{
    warm_work w;
    memset(&w, 0, sizeof w);
    w.k = peat_registry_role(PEAT_OP_GEMM, PEAT_ROLE_GOLDEN, backend);
    if (!w.k) w.k = peat_registry_role(PEAT_OP_GEMM, PEAT_ROLE_GOLDEN, "cpu");
    if (!w.k) return PEAT_ERROR(PEAT_ERR_NOTFOUND, "no golden GEMM to warm up with");
    peat_op_params p;
    peat_predictor_shape(PEAT_OP_GEMM, 48, 0, &p);
    PEAT_TRY(peat_predictor_call_alloc(w.k, &p, 1, &w.c));
    int steady = 0;
    peat_status st = peat_predictor_warmup(backend, warm_call, &w, 0.3, &steady, clk);
    peat_predictor_call_free(&w.c);
    return st;
}

peat_status peat_latency_device(const char *backend, peat_pred_device *d, peat_pred_clock *clk)
{
    if (!backend || strcmp(backend, "auto") == 0) backend = "cpu";
    if (strcmp(backend, "cpu") == 0) {
        PEAT_TRY(peat_predictor_device_cpu(d));
    } else {
        peat_backend_t b = NULL;
        PEAT_TRY(peat_backend_open(backend, 0, &b));
        peat_device_info info;
        peat_status st = peat_backend_device_info(b, &info);
        peat_backend_close(b);
        PEAT_TRY(st);
        /* bandwidth is not in the backend's device info yet: 0 classes every tiled op compute */
        peat_predictor_device_gpu(d, backend, info.name, info.compute_units, info.clock_mhz, 0.0,
                                  strcmp(backend, "hip") == 0 ? 64 : 32);
    }
    return warm_up(backend, clk);
}
