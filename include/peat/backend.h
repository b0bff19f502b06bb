/* backend.h: the device backends as the host API sees them (opaque handle; CPU built in, CUDA and
 * HIP behind the same calls). The table a backend fills is internal: core/backend_impl.h. */
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
    /* peak memory bandwidth in bytes/s from the runtime's memory clock and bus width (CUDA,
     * HIP: 2 x clock x width, as NVIDIA's bandwidthTest reports it); 0 where the runtime does
     * not say (CPU: the predictor measures it; OpenCL has no such query) */
    double mem_bandwidth;
    /* FP32 FMA lanes of one compute unit per clock, from the architecture (CUDA: the compute
     * capability's CUDA cores per SM; HIP: 64 per CU); 0 where not known (CPU, OpenCL) */
    int fp32_lanes;
} peat_device_info;

/* Opens backend "cpu", "cuda", "hip", "opencl" or "auto" (first with a device, CPU last). A backend
 * that is built but sees no device is PEAT_ERR_UNSUPPORTED; one not built in is too. */
PEAT_API peat_status peat_backend_create(const char *name, int device, peat_backend_t *out);
PEAT_API void peat_backend_close(peat_backend_t b);
PEAT_API const char *peat_backend_name(peat_backend_t b);
PEAT_API peat_status peat_backend_device_info(peat_backend_t b, peat_device_info *out);
PEAT_API peat_status peat_backend_alloc(peat_backend_t b, size_t nbytes, void **out);
PEAT_API void peat_backend_free(peat_backend_t b, void *ptr);
PEAT_API peat_status peat_backend_copy_h2d(peat_backend_t b, void *dst, const void *src,
                                           size_t nbytes);
PEAT_API peat_status peat_backend_copy_d2h(peat_backend_t b, void *dst, const void *src,
                                           size_t nbytes);
PEAT_API peat_status peat_backend_synchronize(peat_backend_t b);
PEAT_API double peat_backend_timer_now(peat_backend_t b);
/* The process-wide handle of a backend's device 0 (opened on first use, closed at exit): device
 * kernels are staged through it. */
PEAT_API peat_status peat_backend_get(const char *name, peat_backend_t *out);
/* Device-event timing of what is enqueued between begin and end (wall clock on the CPU). */
PEAT_API peat_status peat_backend_time_begin(peat_backend_t b);
PEAT_API peat_status peat_backend_time_end(peat_backend_t b, double *seconds);
/* Names of backends compiled in, e.g. "cpu" or "cpu,cuda". */
PEAT_API const char *peat_backend_list(void);
/* Whether a backend is compiled in and sees at least one device. */
PEAT_API int peat_backend_available(const char *name);

/* What a backend can do, as each backend declares it (ggml's capability hooks): code outside
 * core/ asks these instead of comparing backend names. */
#define PEAT_BACKEND_HOST "cpu" /* the host backend: the exact and trusted reference kernels */
/* every backend PEAT has a source for, as a command line takes them (built or not) */
#define PEAT_BACKEND_NAMES "cpu|cuda|hip|opencl"
enum {
    /* its tensors are host memory: its kernels can run in a forked child (isolation), be
     * checked in place by the shadow check, and train the CPU's golden band */
    PEAT_BACKEND_CAP_HOST_MEMORY = 1u << 0,
    /* its device clock is read through NVML (NVIDIA) or ROCm SMI (AMD) */
    PEAT_BACKEND_CAP_CLOCK_NVML = 1u << 1,
    PEAT_BACKEND_CAP_CLOCK_ROCM_SMI = 1u << 2,
    /* its devices schedule 64-wide wavefronts (AMD), not 32-wide warps */
    PEAT_BACKEND_CAP_WAVE64 = 1u << 3,
    /* its kernels may run in a forked child (the isolation worker, a candidate timed in a child):
     * a GPU runtime initialised in this process does not survive fork */
    PEAT_BACKEND_CAP_FORK = 1u << 4,
};
/* The capabilities (PEAT_BACKEND_CAP_* bits) of backend `name` as built in (NULL: the host);
 * 0 for a backend this build does not have. */
PEAT_API unsigned peat_backend_caps(const char *name);
/* Whether `name` (NULL: the host) runs on host memory: peat_backend_caps & HOST_MEMORY. */
PEAT_API int peat_backend_on_host(const char *name);
/* Whether the kernels of `name` (NULL: the host) may run in a forked child: caps & FORK. */
PEAT_API int peat_backend_can_fork(const char *name);

#ifdef __cplusplus
}
#endif
#endif
