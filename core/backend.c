/* backend.c: backend selection and the public wrappers (with fallbacks for NULL hooks). */
#include "core/backend_impl.h"
#include "core/clock.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *name;
    const struct peat_backend_iface *iface;
} backend_entry;

/* Device backends register first (peat_backend_register), CPU is always last: "auto" picks the
 * first GPU backend with a device. */
#define MAX_BACKENDS 4
static backend_entry backends[MAX_BACKENDS] = {{"cpu", &peat_backend_cpu_iface}};
static size_t N_BACKENDS = 1;

peat_status peat_backend_register(const char *name, const struct peat_backend_iface *iface)
{
    for (size_t i = 0; i < N_BACKENDS; i++)
        if (strcmp(backends[i].name, name) == 0) return PEAT_OK; /* idempotent */
    if (N_BACKENDS == MAX_BACKENDS) return PEAT_ERROR(PEAT_ERR_NOMEM, "too many backends");
    memmove(backends + 1, backends, N_BACKENDS * sizeof backends[0]);
    backends[0].name = name;
    backends[0].iface = iface;
    N_BACKENDS++;
    return PEAT_OK;
}

const char *peat_backend_list(void)
{
    static char buf[64];
    buf[0] = 0;
    for (size_t i = 0; i < N_BACKENDS; i++) {
        if (i) strcat(buf, ",");
        strcat(buf, backends[i].name);
    }
    return buf;
}

unsigned peat_backend_caps(const char *name)
{
    const char *want = name ? name : PEAT_BACKEND_HOST;
    for (size_t i = 0; i < N_BACKENDS; i++)
        if (strcmp(backends[i].name, want) == 0) return backends[i].iface->caps;
    return 0;
}

int peat_backend_on_host(const char *name)
{
    return (peat_backend_caps(name) & PEAT_BACKEND_CAP_HOST_MEMORY) != 0;
}

int peat_backend_can_fork(const char *name)
{
    return (peat_backend_caps(name) & PEAT_BACKEND_CAP_FORK) != 0;
}

int peat_backend_available(const char *name)
{
    for (size_t i = 0; i < N_BACKENDS; i++)
        if (strcmp(backends[i].name, name) == 0) return backends[i].iface->device_count() > 0;
    return 0;
}

peat_status peat_backend_create(const char *name, int device, peat_backend_t *out)
{
    *out = NULL;
    const struct peat_backend_iface *iface = NULL;
    const char *want = name ? name : "auto";
    /* "auto" is a GPU (cuda, hip) if one is present, else the CPU; OpenCL only when named, since
     * its usual device in CI (PoCL) is the CPU again behind a slower path */
    for (size_t i = 0; i < N_BACKENDS && !iface; i++) {
        if (strcmp(want, "auto") == 0
                ? strcmp(backends[i].name, "opencl") != 0 && backends[i].iface->device_count() > 0
                : strcmp(want, backends[i].name) == 0)
            iface = backends[i].iface;
    }
    if (!iface) {
        if (strcmp(want, "cuda") == 0 || strcmp(want, "hip") == 0 || strcmp(want, "opencl") == 0)
            return PEAT_ERROR(PEAT_ERR_UNSUPPORTED,
                              "backend '%s' is not built in (built: %s; see docs/devices.md)", want,
                              peat_backend_list());
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "unknown backend '%s' (choose auto, %s)", want,
                          peat_backend_list());
    }
    int nd = iface->device_count();
    if (nd == 0)
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "backend '%s' is built in but sees no device here",
                          want);
    if (device < 0 || device >= nd)
        return PEAT_ERROR(PEAT_ERR_BACKEND, "backend '%s' has %d device(s); device %d requested",
                          want, nd, device);
    peat_backend_t b = calloc(1, sizeof *b);
    if (!b) return PEAT_ERROR(PEAT_ERR_NOMEM, "backend");
    b->iface = iface;
    b->device = device;
    peat_status st = iface->init ? iface->init(b) : PEAT_OK;
    if (st != PEAT_OK) {
        free(b);
        return st;
    }
    *out = b;
    return PEAT_OK;
}

/* One shared handle per backend, opened on first use: staging every device kernel call through a
 * fresh context would pay context creation (and OpenCL program builds) per call. */
static struct {
    const char *name;
    peat_backend_t b;
} shared[MAX_BACKENDS];
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;

static void shared_close_all(void)
{
    for (size_t i = 0; i < MAX_BACKENDS; i++)
        if (shared[i].b) peat_backend_close(shared[i].b), shared[i].b = NULL;
}

peat_status peat_backend_get(const char *name, peat_backend_t *out)
{
    static int atexit_done;
    peat_status st = PEAT_OK;
    *out = NULL;
    pthread_mutex_lock(&shared_lock);
    size_t i = 0;
    while (i < MAX_BACKENDS && shared[i].b && strcmp(shared[i].name, name) != 0) i++;
    if (i == MAX_BACKENDS)
        st = PEAT_ERROR(PEAT_ERR_INTERNAL, "backend table full");
    else if (!shared[i].b && (st = peat_backend_create(name, 0, &shared[i].b)) == PEAT_OK) {
        shared[i].name = peat_backend_name(shared[i].b);
        if (!atexit_done) atexit(shared_close_all), atexit_done = 1;
    }
    if (st == PEAT_OK) *out = shared[i].b;
    pthread_mutex_unlock(&shared_lock);
    return st;
}

void peat_backend_close(peat_backend_t b)
{
    if (!b) return;
    if (b->iface->free) b->iface->free(b);
    free(b);
}

const char *peat_backend_name(peat_backend_t b)
{
    return b->iface->get_name(b);
}
peat_status peat_backend_device_info(peat_backend_t b, peat_device_info *out)
{
    memset(out, 0, sizeof *out);
    return b->iface->device_info(b, out);
}
peat_status peat_backend_alloc(peat_backend_t b, size_t nbytes, void **out)
{
    return b->iface->buffer_alloc(b, nbytes, out);
}
void peat_backend_free(peat_backend_t b, void *ptr)
{
    b->iface->buffer_free(b, ptr);
}

peat_status peat_backend_copy_h2d(peat_backend_t b, void *dst, const void *src, size_t nbytes)
{
    if (!b->iface->copy_h2d) {
        memcpy(dst, src, nbytes);
        return PEAT_OK;
    }
    return b->iface->copy_h2d(b, dst, src, nbytes);
}

peat_status peat_backend_copy_d2h(peat_backend_t b, void *dst, const void *src, size_t nbytes)
{
    if (!b->iface->copy_d2h) {
        memcpy(dst, src, nbytes);
        return PEAT_OK;
    }
    return b->iface->copy_d2h(b, dst, src, nbytes);
}

peat_status peat_backend_synchronize(peat_backend_t b)
{
    return b->iface->synchronize ? b->iface->synchronize(b) : PEAT_OK;
}

peat_status peat_backend_time_begin(peat_backend_t b)
{
    if (b->iface->time_begin) return b->iface->time_begin(b);
    b->t0 = peat_backend_timer_now(b);
    return PEAT_OK;
}

peat_status peat_backend_time_end(peat_backend_t b, double *seconds)
{
    if (b->iface->time_end) return b->iface->time_end(b, seconds);
    *seconds = peat_backend_timer_now(b) - b->t0;
    return PEAT_OK;
}

peat_status peat_backend_launch(peat_backend_t b, const peat_launch *l)
{
    if (!b->iface->launch)
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "backend '%s' launches no device kernels",
                          peat_backend_name(b));
    return b->iface->launch(b, l);
}

double peat_backend_timer_now(peat_backend_t b)
{
    if (b->iface->timer_now) return b->iface->timer_now(b);
    return peat_clock_now();
}
