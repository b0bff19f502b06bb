/* backend_impl.h: what a backend implements (core-internal): the function table and the object
 * {iface, context, device}, in the manner of ggml's backend layer. */
#ifndef PEAT_CORE_BACKEND_IMPL_H
#define PEAT_CORE_BACKEND_IMPL_H

#include "peat/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The interface: one static const table per backend. Optional hooks may be NULL; the public
 * wrappers below fall back (e.g. copies become memcpy when host memory is device memory). */
struct peat_backend_iface {
    /* short name: "cpu", "cuda", "hip" */
    const char *(*get_name)(peat_backend_t b);
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
};

struct peat_backend {
    const struct peat_backend_iface *iface;
    void *context;
    int device;
};

/* Adds a backend (GPU backends do this from peat_registry_init); CPU stays last for "auto". */
peat_status peat_backend_register(const char *name, const struct peat_backend_iface *iface);

/* The CPU backend's table (for backends that want to fall back to it). */
extern const struct peat_backend_iface peat_backend_cpu_iface;

#ifdef __cplusplus
}
#endif
#endif
