/* exec.c: the execution context every flow runs its ops through (kernel choice, hooks, provenance).
 */
#include "peat/peat.h"

#include <stdlib.h>
#include <string.h>

#define PEAT_MAX_HOOKS 8

struct peat_exec {
    const char *flow;
    const char *backend; /* where the default (golden) kernels run: "cpu", "opencl", ... */
    uint64_t seed;
    int64_t iter;
    int64_t calls;
    int64_t op_calls[PEAT_OP_COUNT];
    const peat_kernel *kernel[PEAT_OP_COUNT];
    struct {
        peat_hook_fn fn;
        void *user;
    } hooks[PEAT_MAX_HOOKS];
    int n_hooks;
};

peat_status peat_exec_create(const char *flow_name, uint64_t seed, peat_exec_t **out)
{
    peat_exec_t *ex = calloc(1, sizeof *ex);
    if (!ex) return PEAT_ERROR(PEAT_ERR_NOMEM, "exec context");
    ex->flow = flow_name ? flow_name : "";
    ex->backend = "cpu";
    ex->seed = seed;
    *out = ex;
    return PEAT_OK;
}

void peat_exec_free(peat_exec_t *ex)
{
    free(ex);
}

peat_status peat_exec_set_kernel(peat_exec_t *ex, peat_op_kind op, const peat_kernel *k)
{
    if (!peat_op_info_get(op))
        return PEAT_ERROR(PEAT_ERR_INVAL, "op kind %d out of range", (int)op);
    if (k && k->op != op)
        return PEAT_ERROR(PEAT_ERR_INVAL, "kernel '%s' implements %s, not %s", k->name,
                          peat_op_name(k->op), peat_op_name(op));
    if (k && k->role == PEAT_ROLE_EXACT)
        return PEAT_ERROR(PEAT_ERR_INVAL, "exact kernel '%s' cannot run inside a flow", k->name);
    ex->kernel[op] = k;
    return PEAT_OK;
}

peat_status peat_exec_set_backend(peat_exec_t *ex, const char *backend)
{
    for (int op = 0; op < PEAT_OP_COUNT; op++)
        if (!peat_registry_role((peat_op_kind)op, PEAT_ROLE_GOLDEN, backend))
            return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "backend '%s' has no golden kernel for %s",
                              backend, peat_op_name((peat_op_kind)op));
    ex->backend = backend;
    return PEAT_OK;
}

const peat_kernel *peat_exec_kernel(const peat_exec_t *ex, peat_op_kind op)
{
    if (!peat_op_info_get(op)) return NULL;
    return ex->kernel[op] ? ex->kernel[op] : peat_registry_role(op, PEAT_ROLE_GOLDEN, ex->backend);
}

peat_status peat_exec_add_hook(peat_exec_t *ex, peat_hook_fn fn, void *user)
{
    if (ex->n_hooks == PEAT_MAX_HOOKS) return PEAT_ERROR(PEAT_ERR_NOMEM, "too many hooks");
    ex->hooks[ex->n_hooks].fn = fn;
    ex->hooks[ex->n_hooks].user = user;
    ex->n_hooks++;
    return PEAT_OK;
}

void peat_exec_set_iter(peat_exec_t *ex, int64_t iter)
{
    ex->iter = iter;
}
int64_t peat_exec_iter(const peat_exec_t *ex)
{
    return ex->iter;
}
uint64_t peat_exec_seed(const peat_exec_t *ex)
{
    return ex->seed;
}
int64_t peat_exec_calls(const peat_exec_t *ex)
{
    return ex->calls;
}

peat_status peat_exec_op(peat_exec_t *ex, const char *layer, peat_phase phase, peat_args *a)
{
    const peat_kernel *k = peat_exec_kernel(ex, a->op);
    if (!k)
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "no kernel registered for op %s", peat_op_name(a->op));
    peat_call_info info = {ex->flow, layer ? layer : "", ex->iter,
                           phase,    ex->calls,          ex->op_calls[a->op]};
    ex->calls++;
    ex->op_calls[a->op]++;
    for (int h = 0; h < ex->n_hooks; h++)
        PEAT_TRY(ex->hooks[h].fn(ex->hooks[h].user, k, a, &info, 0));
    PEAT_TRY(peat_kernel_run(k, a));
    for (int h = 0; h < ex->n_hooks; h++)
        PEAT_TRY(ex->hooks[h].fn(ex->hooks[h].user, k, a, &info, 1));
    return PEAT_OK;
}
