/* backend_stage.c: runs a device kernel on host tensors: stages inputs to the device, hands the
 * kernel device buffers and the queue, times it with the backend's events, reads outputs back. */
#include "core/backend_impl.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

static _Thread_local double last_device_seconds;

double peat_kernel_last_device_seconds(void)
{
    return last_device_seconds;
}

/* ABI 3's peat_device, to hold peat_device_host to its layout (plugins built for it load). */
typedef struct {
    const char *backend;
    int index;
    void *queue, *context, *device;
    peat_status (*cl_program)(const void *d, const char *source, const char *options,
                              void **program);
    void *host;
} abi3_device;
_Static_assert(offsetof(peat_device_host, cl_program) == offsetof(abi3_device, cl_program) &&
                   offsetof(peat_device_host, backend) == offsetof(abi3_device, host) &&
                   sizeof(peat_device_host) == sizeof(abi3_device),
               "peat_device_host must keep ABI 3's peat_device layout");

peat_status peat_device_cl_program(const peat_device *d, const char *source, const char *options,
                                   void **program)
{
    if (!d || !source || !program)
        return PEAT_ERROR(PEAT_ERR_INVAL, "cl_program: NULL device, source or program");
    peat_backend_t b = peat_device_backend(d);
    if (!b->iface->program_build)
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "cl_program: backend '%s' builds no programs",
                          d->backend);
    return b->iface->program_build(b, source, options ? options : "", program);
}

/* Device twins of the call's tensors: same shape and dtype, data = device buffer. */
typedef struct {
    peat_tensor in[PEAT_MAX_IO], out[PEAT_MAX_IO];
    peat_args args;
    peat_device_host dev;
} staged;

static void stage_free(peat_backend_t b, staged *s)
{
    for (int i = 0; i < PEAT_MAX_IO; i++) {
        if (s->in[i].data) peat_backend_free(b, s->in[i].data);
        if (s->out[i].data) peat_backend_free(b, s->out[i].data);
    }
}

static peat_status stage_in(peat_backend_t b, const peat_args *a, staged *s)
{
    memset(s, 0, sizeof *s);
    s->args = *a;
    for (int i = 0; i < a->n_in; i++) {
        size_t n = peat_tensor_nbytes(a->in[i]);
        s->in[i] = *a->in[i];
        s->in[i].data = NULL;
        PEAT_TRY(peat_backend_alloc(b, n, &s->in[i].data));
        PEAT_TRY(peat_backend_copy_h2d(b, s->in[i].data, a->in[i]->data, n));
        s->args.in[i] = &s->in[i];
    }
    for (int o = 0; o < a->n_out; o++) {
        s->out[o] = *a->out[o];
        s->out[o].data = NULL;
        PEAT_TRY(peat_backend_alloc(b, peat_tensor_nbytes(a->out[o]), &s->out[o].data));
        s->args.out[o] = &s->out[o];
    }
    PEAT_TRY(b->iface->device_fill(b, &s->dev.pub));
    s->dev.cl_program = b->iface->program_build ? peat_device_cl_program : NULL;
    s->dev.backend = b;
    s->args.dev = &s->dev.pub;
    return PEAT_OK;
}

static peat_status stage_out(peat_backend_t b, const peat_args *a, const staged *s)
{
    for (int o = 0; o < a->n_out; o++)
        PEAT_TRY(peat_backend_copy_d2h(b, a->out[o]->data, s->out[o].data,
                                       peat_tensor_nbytes(a->out[o])));
    return PEAT_OK;
}

/* Device kernels of one process run one at a time: the shared queue, its timing events and
 * OpenCL kernel objects (whose arguments are set per launch) are not for concurrent use. */
static pthread_mutex_t device_lock = PTHREAD_MUTEX_INITIALIZER;

peat_status peat_backend_kernel_run(const peat_kernel *k, const peat_args *a)
{
    peat_backend_t b;
    PEAT_TRY(peat_backend_get(k->backend, &b));
    if (!b->iface->device_fill)
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "kernel '%s': backend '%s' runs no device kernels",
                          k->name, k->backend);
    pthread_mutex_lock(&device_lock);
    staged s;
    double sec = 0.0;
    peat_status st = stage_in(b, a, &s);
    if (st == PEAT_OK) st = peat_backend_time_begin(b);
    if (st == PEAT_OK) {
        st = k->fn(&s.args, k);
        /* the end event is taken even after a failed launch, so the queue is left drained */
        peat_status te = peat_backend_time_end(b, &sec);
        if (st == PEAT_OK) st = te;
    }
    if (st == PEAT_OK) st = stage_out(b, a, &s);
    stage_free(b, &s);
    if (st == PEAT_OK) last_device_seconds = sec;
    pthread_mutex_unlock(&device_lock);
    return st;
}
