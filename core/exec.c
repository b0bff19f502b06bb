/* exec.c: the execution context every flow runs its ops through (kernel choice, hooks, provenance).
 */
#include "core/exec_swap.h"
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
    /* runtime fault injection (peat_exec_set_swap) */
    int swap_on;
    peat_exec_swap swap;
    int64_t swap_eligible, swap_done;
};

peat_status peat_exec_alloc(const char *flow_name, uint64_t seed, peat_exec_t **out)
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

/* Ops without a golden on the backend fail at their first call (the campaign checks the
 * flow's ops first, harness/campaign/stage_resolve.c); a backend with no golden at all is
 * refused here. */
peat_status peat_exec_set_backend(peat_exec_t *ex, const char *backend)
{
    if (!peat_registry_role(PEAT_OP_GEMM, PEAT_ROLE_GOLDEN, backend))
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "backend '%s' has no golden kernel for %s", backend,
                          peat_op_name(PEAT_OP_GEMM));
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

void peat_exec_clear_hooks(peat_exec_t *ex)
{
    memset(ex->hooks, 0, sizeof ex->hooks);
    ex->n_hooks = 0;
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

peat_status peat_exec_set_swap(peat_exec_t *ex, const peat_exec_swap *s)
{
    ex->swap_on = 0;
    ex->swap_eligible = ex->swap_done = 0;
    if (!s) return PEAT_OK;
    if (!peat_op_info_get(s->op))
        return PEAT_ERROR(PEAT_ERR_INVAL, "swap: op kind %d out of range", (int)s->op);
    if (!s->kernel && !s->fn)
        return PEAT_ERROR(PEAT_ERR_INVAL, "swap: neither a faulty kernel nor a function");
    if (s->kernel && (s->kernel->op != s->op || s->kernel->role == PEAT_ROLE_EXACT))
        return PEAT_ERROR(PEAT_ERR_INVAL, "swap: kernel '%s' cannot stand in for %s",
                          s->kernel->name, peat_op_name(s->op));
    if (s->every < 0 || !(s->prob >= 0.0 && s->prob <= 1.0) || s->iter_lo < 0 ||
        (s->iter_hi != 0 && s->iter_hi <= s->iter_lo))
        return PEAT_ERROR(
            PEAT_ERR_INVAL,
            "swap: every %lld, probability %g or iterations [%lld, %lld) out of range",
            (long long)s->every, s->prob, (long long)s->iter_lo, (long long)s->iter_hi);
    ex->swap = *s;
    ex->swap_on = 1;
    return PEAT_OK;
}

int64_t peat_exec_swap_eligible(const peat_exec_t *ex)
{
    return ex->swap_eligible;
}
int64_t peat_exec_swapped(const peat_exec_t *ex)
{
    return ex->swap_done;
}

/* Whether layer is in the comma-separated list (an entry ending in '*' is a prefix). */
static int layer_listed(const char *list, const char *layer)
{
    if (!list || !*list) return 1;
    for (const char *c = list; *c;) {
        const char *end = strchr(c, ',');
        size_t n = end ? (size_t)(end - c) : strlen(c);
        if (n > 0 && c[n - 1] == '*' ? strncmp(layer, c, n - 1) == 0
                                     : strlen(layer) == n && strncmp(layer, c, n) == 0)
            return 1;
        c = end ? end + 1 : c + n;
    }
    return 0;
}

/* A uniform [0,1) draw that depends only on (seed, n): the schedule of a probabilistic swap is
 * reproducible call by call, whatever ran before (splitmix64). */
static double swap_draw(uint64_t seed, int64_t n)
{
    uint64_t x = seed + (uint64_t)n * 0x9E3779B97F4A7C15ull;
    return (double)(peat_splitmix64(&x) >> 11) * 0x1p-53;
}

/* Whether this call is replaced by the faulty computation (counts eligible calls). */
static int swap_due(peat_exec_t *ex, const peat_args *a, const peat_call_info *info)
{
    const peat_exec_swap *s = &ex->swap;
    if (a->op != s->op || info->iter < s->iter_lo || (s->iter_hi && info->iter >= s->iter_hi))
        return 0;
    if (s->phases && !(s->phases & (1u << info->phase))) return 0;
    if (!layer_listed(s->layers, info->layer)) return 0;
    int64_t n = ex->swap_eligible++;
    if (s->prob > 0.0) return swap_draw(s->seed, n) < s->prob;
    return s->every > 0 && n % s->every == 0;
}

peat_status peat_exec_op(peat_exec_t *ex, const char *layer, peat_phase phase, peat_args *a)
{
    const peat_kernel *k = peat_exec_kernel(ex, a->op);
    if (!k)
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "no kernel registered for op %s%s%s",
                          peat_op_name(a->op), ex->backend ? " on backend " : "",
                          ex->backend ? ex->backend : "");
    peat_call_info info = {ex->flow, layer ? layer : "", ex->iter,
                           phase,    ex->calls,          ex->op_calls[a->op]};
    ex->calls++;
    ex->op_calls[a->op]++;
    for (int h = 0; h < ex->n_hooks; h++)
        PEAT_TRY(ex->hooks[h].fn(ex->hooks[h].user, k, a, &info, 0));
    if (ex->swap_on && swap_due(ex, a, &info)) {
        ex->swap_done++;
        if (ex->swap.kernel)
            PEAT_TRY(peat_kernel_run(ex->swap.kernel, a));
        else
            PEAT_TRY(ex->swap.fn(ex->swap.user, k, a, &info));
    } else {
        PEAT_TRY(peat_kernel_run(k, a));
    }
    for (int h = 0; h < ex->n_hooks; h++)
        PEAT_TRY(ex->hooks[h].fn(ex->hooks[h].user, k, a, &info, 1));
    return PEAT_OK;
}
