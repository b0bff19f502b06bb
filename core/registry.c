/* registry.c: the kernel registry: every kernel by name, with role, backend and dtypes. */
#include "core/backend_impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PEAT_REGISTRY_MAX 512

static peat_kernel table[PEAT_REGISTRY_MAX];
static int n_kernels;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* One per registered kernel: the calls of a kernel that is not reentrant hold the lock of the
 * first registered kernel with the same function (the state a function keeps is shared by every
 * descriptor of it, copies included), so two never run at once; a function nobody registered
 * holds `unlisted`. */
static pthread_mutex_t run_lock[PEAT_REGISTRY_MAX];
static pthread_mutex_t unlisted = PTHREAD_MUTEX_INITIALIZER;

static const char *const role_names[] = {"exact", "golden", "candidate"};
const char *peat_role_name(peat_kernel_role r)
{
    return (unsigned)r < 3 ? role_names[r] : "?";
}

peat_status peat_registry_add(const peat_kernel *k)
{
    peat_core_init(); /* every program that runs kernels registers them first */
    if (!k || !k->name || !k->name[0] || !k->fn)
        return PEAT_ERROR(PEAT_ERR_INVAL, "kernel descriptor without name or function");
    if (!peat_op_info_get(k->op))
        return PEAT_ERROR(PEAT_ERR_INVAL, "kernel '%s': op kind %d out of range", k->name,
                          (int)k->op);
    if ((unsigned)k->role > PEAT_ROLE_CANDIDATE)
        return PEAT_ERROR(PEAT_ERR_INVAL, "kernel '%s': bad role %d", k->name, (int)k->role);
    pthread_mutex_lock(&lock);
    peat_status st = PEAT_OK;
    const char *be = k->backend ? k->backend : "cpu";
    for (int i = 0; i < n_kernels; i++)
        if (strcmp(table[i].name, k->name) == 0 && strcmp(table[i].backend, be) == 0) {
            st = PEAT_ERROR(PEAT_ERR_INVAL, "kernel '%s' is already registered for backend %s",
                            k->name, be);
            break;
        }
    if (st == PEAT_OK && n_kernels == PEAT_REGISTRY_MAX)
        st = PEAT_ERROR(PEAT_ERR_NOMEM, "kernel registry full (%d)", PEAT_REGISTRY_MAX);
    if (st == PEAT_OK) {
        pthread_mutex_init(&run_lock[n_kernels], NULL);
        table[n_kernels] = *k;
        if (!table[n_kernels].backend) table[n_kernels].backend = "cpu";
        if (!table[n_kernels].desc) table[n_kernels].desc = "";
        n_kernels++;
    }
    pthread_mutex_unlock(&lock);
    return st;
}

const peat_kernel *peat_registry_find(const char *name)
{
    for (int i = 0; name && i < n_kernels; i++)
        if (strcmp(table[i].name, name) == 0) return &table[i];
    return NULL;
}

const peat_kernel *peat_registry_find_on(const char *name, const char *backend)
{
    if (!backend || strcmp(backend, "auto") == 0) return peat_registry_find(name);
    for (int i = 0; name && i < n_kernels; i++)
        if (strcmp(table[i].name, name) == 0 && strcmp(table[i].backend, backend) == 0)
            return &table[i];
    return NULL;
}

const peat_kernel *peat_registry_role(peat_op_kind op, peat_kernel_role role, const char *backend)
{
    for (int i = 0; i < n_kernels; i++)
        if (table[i].op == op && table[i].role == role &&
            (!backend || strcmp(table[i].backend, backend) == 0))
            return &table[i];
    return NULL;
}

int peat_registry_count(void)
{
    return n_kernels;
}
const peat_kernel *peat_registry_at(int i)
{
    return i >= 0 && i < n_kernels ? &table[i] : NULL;
}

static pthread_mutex_t *serial_lock(const peat_kernel *k)
{
    int n = n_kernels; /* entries below n are complete: the registry only grows */
    for (int i = 0; i < n; i++)
        if (table[i].fn == k->fn) return &run_lock[i];
    return &unlisted;
}

peat_status peat_kernel_run(const peat_kernel *k, const peat_args *a)
{
    if (!k) return PEAT_ERROR(PEAT_ERR_NOTFOUND, "no kernel");
    if (a->op != k->op)
        return PEAT_ERROR(PEAT_ERR_INVAL, "kernel '%s' implements %s, called for %s", k->name,
                          peat_op_name(k->op), peat_op_name(a->op));
    PEAT_TRY(peat_op_check(a));
    for (int o = 0; o < a->n_out; o++) {
        peat_dtype want = k->role == PEAT_ROLE_EXACT ? PEAT_DTYPE_F64 : PEAT_DTYPE_F32;
        if (!a->out[o] || a->out[o]->dtype != want)
            return PEAT_ERROR(PEAT_ERR_INVAL, "kernel '%s': output %d must be %s", k->name, o,
                              peat_dtype_name(want));
    }
    /* a device kernel gets device buffers: staged through its backend */
    int on_device = strcmp(k->backend, "cpu") != 0;
    pthread_mutex_t *serial = k->flags & PEAT_KERNEL_REENTRANT ? NULL : serial_lock(k);
    if (serial) pthread_mutex_lock(serial);
    peat_status st = on_device ? peat_backend_kernel_run(k, a) : k->fn(a, k);
    if (serial) pthread_mutex_unlock(serial);
    if (st != PEAT_OK && peat_error_last()[0] == 0)
        PEAT_ERROR(st, "kernel '%s' failed: %s", k->name, peat_status_str(st));
    return st;
}
