/* backend.h: the device backend interface (CPU built in; CUDA and HIP fill the same table). */
#ifndef PEAT_BACKEND_H
#define PEAT_BACKEND_H

#include "peat/peat.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct peat_backend *peat_backend_t;

typedef struct peat_device_info {
    char name[128]; /* "cpu: Intel Xeon ...", "NVIDIA H200" */
    int index;
    size_t mem_bytes;  /* device memory (host RAM for the CPU backend) */
    int compute_units; /* cores or SMs/CUs */
    double clock_mhz;  /* nominal or sampled clock, 0 if unknown */
} peat_device_info;

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

/* Opens backend "cpu", "cuda", "hip" or "auto" (first with a device, CPU last). */
peat_status peat_backend_open(const char *name, int device, peat_backend_t *out);
void peat_backend_close(peat_backend_t b);
const char *peat_backend_name(peat_backend_t b);
peat_status peat_backend_device_info(peat_backend_t b, peat_device_info *out);
peat_status peat_backend_alloc(peat_backend_t b, size_t nbytes, void **out);
void peat_backend_free(peat_backend_t b, void *ptr);
peat_status peat_backend_copy_h2d(peat_backend_t b, void *dst, const void *src, size_t nbytes);
peat_status peat_backend_copy_d2h(peat_backend_t b, void *dst, const void *src, size_t nbytes);
peat_status peat_backend_synchronize(peat_backend_t b);
double peat_backend_timer_now(peat_backend_t b);
/* Names of backends compiled in, e.g. "cpu" or "cpu,cuda". */
const char *peat_backend_list(void);
/* Whether a backend is compiled in and sees at least one device. */
int peat_backend_available(const char *name);

/* Adds a backend (GPU backends do this from peat_registry_init); CPU stays last for "auto". */
peat_status peat_backend_register(const char *name, const struct peat_backend_iface *iface);

/* The CPU backend's table (for backends that want to fall back to it). */
extern const struct peat_backend_iface peat_backend_cpu_iface;

#ifdef __cplusplus
}
#endif
#endif
