/* backend_impl.h: what a backend implements (core-internal): the function table and the object
 * {iface, context, device}, in the manner of ggml's backend layer. */
#ifndef PEAT_CORE_BACKEND_IMPL_H
#define PEAT_CORE_BACKEND_IMPL_H

#include "peat/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One argument of a launch: its size and where its value is (for a buffer: the address of the
 * handle, i.e. of the tensor's data field: a device pointer on CUDA/HIP, a cl_mem on OpenCL). */
typedef struct peat_karg {
    size_t size;
    const void *value;
} peat_karg;

/* A launch of one of PEAT's own device kernels (core/device/kernels.cl) by name. global is the
 * number of work-items per dimension (rounded up to whole work-groups by the backend). */
typedef struct peat_launch {
    const char *kernel;
    int dims;
    size_t global[3], local[3];
    int nargs;
    const peat_karg *args;
} peat_launch;

/* The interface: one static const table per backend. Optional hooks may be NULL; the public
 * wrappers below fall back (e.g. copies become memcpy when host memory is device memory). */
struct peat_backend_iface {
    /* short name: "cpu", "cuda", "hip", "opencl" */
    const char *(*get_name)(peat_backend_t b);
    /* creates the context of b->device (queue, events); NULL = nothing to create */
    peat_status (*init)(peat_backend_t b);
    /* number of devices this backend sees (0 = unavailable in this build or machine) */
    int (*device_count)(void);
    /* info about the selected device */
    peat_status (*device_info)(peat_backend_t b, peat_device_info *out);
    /* device allocation of nbytes (zeroed) */
    peat_status (*buffer_alloc)(peat_backend_t b, size_t nbytes, void **out);
    void (*buffer_free)(peat_backend_t b, void *ptr);
    /* copies; NULL means device memory is host memory (memcpy) */
    peat_status (*copy_h2d)(peat_backend_t b, void *dst, const void *src, size_t nbytes);
    peat_status (*copy_d2h)(peat_backend_t b, void *dst, const void *src, size_t nbytes);
    /* waits for all queued work; NULL = synchronous backend */
    peat_status (*synchronize)(peat_backend_t b);
    /* monotonic time in seconds, taken after the queue drains (device events on GPUs) */
    double (*timer_now)(peat_backend_t b);
    /* releases the context */
    void (*free)(peat_backend_t b);
    /* what a device kernel is handed (queue, context); NULL for the CPU */
    peat_status (*device_fill)(peat_backend_t b, peat_device *out);
    /* device-event timing of the work enqueued between begin and end, in seconds (end waits) */
    peat_status (*time_begin)(peat_backend_t b);
    peat_status (*time_end)(peat_backend_t b, double *seconds);
    /* runs one of PEAT's device kernels (core/device/kernels.cl); NULL for the CPU */
    peat_status (*launch)(peat_backend_t b, const peat_launch *l);
    /* vendor BLAS fp32 GEMM on device tensors (cuBLAS, hipBLAS, CLBlast); NULL = none, the
     * reference device kernel is the golden */
    peat_status (*gemm)(peat_backend_t b, const peat_args *a);
    /* which vendor BLAS gemm is ("cuBLAS", "CLBlast", ...) */
    const char *blas_name;
    /* builds (once, cached by source and options) a program for the device: a cl_program on
     * OpenCL; NULL elsewhere (peat_plugin_host.cl_program answers PEAT_ERR_UNSUPPORTED) */
    peat_status (*program_build)(peat_backend_t b, const char *source, const char *options,
                                 void **program);
    /* what the backend can do (PEAT_BACKEND_CAP_* of peat/backend.h) */
    unsigned caps;
};

struct peat_backend {
    const struct peat_backend_iface *iface;
    void *context;
    int device;
    double t0; /* wall-clock start of peat_backend_time_begin where the backend has no events */
};

/* Adds a backend (device backends do this when PEAT registers its kernels); CPU stays last for
 * "auto". */
peat_status peat_backend_register(const char *name, const struct peat_backend_iface *iface);

/* Runs device kernel k on host tensors a (core/backend_stage.c): stage in, run, time, read back. */
peat_status peat_backend_kernel_run(const peat_kernel *k, const peat_args *a);

/* What PEAT hands a device kernel: the public peat_device first, then PEAT's own fields, which
 * left include/peat/plugin.h with ABI 4. The layout is that of ABI 2 and 3's peat_device, so a
 * plugin built for them finds `cl_program` where its header put it (tests/plugins/plugin_abi3.c,
 * docs/plugin-abi.md). */
typedef struct peat_device_host {
    peat_device pub;
    /* ABI 2-3's peat_device.cl_program: peat_device_cl_program on OpenCL, NULL elsewhere */
    peat_status (*cl_program)(const peat_device *d, const char *source, const char *options,
                              void **program);
    peat_backend_t backend; /* ABI 2-3's peat_device.host */
} peat_device_host;

/* The backend a device kernel was handed (its peat_device is a peat_device_host). */
static inline peat_backend_t peat_device_backend(const peat_device *d)
{
    return ((const peat_device_host *)d)->backend;
}

/* The program of `source` built for d's device (peat_plugin_host.cl_program; core/backend_stage.c):
 * PEAT_ERR_UNSUPPORTED where the backend builds no programs. */
peat_status peat_device_cl_program(const peat_device *d, const char *source, const char *options,
                                   void **program);

/* The launch of a device kernel through b's table (PEAT_ERR_UNSUPPORTED on the CPU). */
peat_status peat_backend_launch(peat_backend_t b, const peat_launch *l);

/* Registers PEAT's device kernels (a golden for every op kind, the device candidates) for a
 * device backend already registered under `backend` (core/device/ops.c). */
peat_status peat_device_ops_register(const char *backend, const struct peat_backend_iface *iface);

/* The text of core/device/kernels.cl (generated into the build; OpenCL compiles it at run time). */
extern const char peat_device_kernels_source[];

/* The CPU backend's table (for backends that want to fall back to it). */
extern const struct peat_backend_iface peat_backend_cpu_iface;

#ifdef __cplusplus
}
#endif
#endif
