/* record.c: op-call records and the profiler hook that samples them from a running flow. */
#include "core/record.h"

#include <stdlib.h>
#include <string.h>

void peat_record_free(peat_record *r)
{
    if (!r) return;
    for (int k = 0; k < PEAT_MAX_IO; k++) {
        peat_tensor_free(r->in[k]);
        peat_tensor_free(r->golden[k]);
        peat_tensor_free(r->exact[k]);
    }
    free(r);
}

peat_args peat_record_args(const peat_record *r)
{
    peat_args a;
    memset(&a, 0, sizeof a);
    a.op = r->op;
    a.p = r->p;
    a.n_in = r->n_in;
    for (int k = 0; k < r->n_in; k++) a.in[k] = r->in[k];
    return a;
}

peat_status peat_record_compute_exact(peat_record *r)
{
    int have = r->n_out > 0;
    for (int k = 0; k < r->n_out; k++) have &= r->exact[k] != NULL;
    if (have) return PEAT_OK;
    for (int k = 0; k < PEAT_MAX_IO; k++) { /* some but not all: recompute them together */
        peat_tensor_free(r->exact[k]);
        r->exact[k] = NULL;
    }
    const peat_kernel *ek = peat_registry_role(r->op, PEAT_ROLE_EXACT, "cpu");
    if (!ek) return PEAT_ERROR(PEAT_ERR_NOTFOUND, "no exact kernel for op %s", peat_op_name(r->op));
    peat_args a = peat_record_args(r);
    PEAT_TRY(peat_op_alloc_outputs(&a, PEAT_DTYPE_F64));
    peat_status st = peat_kernel_run(ek, &a);
    if (st != PEAT_OK) {
        peat_args_free_outputs(&a);
        return st;
    }
    r->n_out = a.n_out;
    for (int k = 0; k < a.n_out; k++) r->exact[k] = a.out[k];
    return PEAT_OK;
}

struct peat_profiler {
    peat_profile_policy pol;
    peat_record_sink sink;
    void *user;
    int64_t seen[PEAT_OP_COUNT]; /* eligible calls seen per op */
    int64_t recorded_op[PEAT_OP_COUNT];
    int64_t recorded;
    peat_record *pending; /* inputs captured before the kernel ran */
    peat_status status;
    peat_exec_t *ex;
};

peat_profiler_t *peat_profiler_new(const peat_profile_policy *pol, peat_record_sink sink,
                                   void *user)
{
    peat_profiler_t *pr = calloc(1, sizeof *pr);
    if (!pr) return NULL;
    pr->pol = *pol;
    if (pr->pol.every_k < 1) pr->pol.every_k = 1;
    pr->sink = sink;
    pr->user = user;
    return pr;
}

void peat_profiler_free(peat_profiler_t *pr)
{
    if (!pr) return;
    peat_record_free(pr->pending);
    free(pr);
}

int64_t peat_profiler_recorded(const peat_profiler_t *pr)
{
    return pr->recorded;
}
peat_status peat_profiler_status(const peat_profiler_t *pr)
{
    return pr->status;
}

static int wanted(peat_profiler_t *pr, const peat_args *a, const peat_call_info *info)
{
    const peat_profile_policy *p = &pr->pol;
    if (p->op_mask && !(p->op_mask & PEAT_OP_BIT(a->op))) return 0;
    if (info->iter < p->iter_lo || (p->iter_hi > 0 && info->iter >= p->iter_hi)) return 0;
    if (p->iter_filter && !p->iter_filter(p->iter_filter_user, info->iter)) return 0;
    if (p->fwd || p->bwd || p->opt) {
        if ((info->phase == PEAT_PHASE_FWD && !p->fwd) ||
            (info->phase == PEAT_PHASE_BWD && !p->bwd) ||
            (info->phase == PEAT_PHASE_OPT && !p->opt))
            return 0;
    }
    if (p->max_elems > 0) {
        int64_t n = 0;
        for (int k = 0; k < a->n_in; k++) n += peat_tensor_numel(a->in[k]);
        if (n > p->max_elems) return 0;
    }
    int64_t idx = pr->seen[a->op]++;
    if (p->call_filter ? !p->call_filter(p->call_filter_user, a, info) : idx % p->every_k != 0)
        return 0;
    if (p->max_calls > 0 && pr->recorded >= p->max_calls) return 0;
    if (p->max_per_op > 0 && pr->recorded_op[a->op] >= p->max_per_op) return 0;
    return 1;
}

static void copy_str(char *dst, size_t n, const char *src)
{
    if (!src) src = "";
    strncpy(dst, src, n - 1);
    dst[n - 1] = 0;
}

static peat_status profiler_hook(void *user, const peat_kernel *k, const peat_args *a,
                                 const peat_call_info *info, int after)
{
    peat_profiler_t *pr = user;
    if (pr->status != PEAT_OK) return PEAT_OK; /* the failing call already aborted the flow */
    if (!after) {
        if (!wanted(pr, a, info)) return PEAT_OK;
        peat_record *r = calloc(1, sizeof *r);
        if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "record");
        r->id = (uint64_t)info->call_index;
        r->op = a->op;
        r->p = a->p;
        r->n_in = a->n_in;
        r->iter = info->iter;
        r->phase = info->phase;
        r->call_index = info->call_index;
        r->op_call_index = info->op_call_index;
        r->seed = peat_exec_seed(pr->ex);
        copy_str(r->flow, sizeof r->flow, info->flow);
        copy_str(r->layer, sizeof r->layer, info->layer);
        copy_str(r->golden_kernel, sizeof r->golden_kernel, k->name);
        /* inputs are cloned before the kernel runs: optimizer outputs alias their inputs */
        for (int i = 0; i < a->n_in; i++) {
            peat_status st = peat_tensor_clone(a->in[i], &r->in[i]);
            if (st != PEAT_OK) {
                peat_record_free(r);
                return st;
            }
        }
        peat_record_free(pr->pending);
        pr->pending = r;
        return PEAT_OK;
    }
    peat_record *r = pr->pending;
    if (!r || r->id != (uint64_t)info->call_index) return PEAT_OK;
    pr->pending = NULL;
    peat_status st = PEAT_OK;
    r->n_out = a->n_out;
    for (int o = 0; o < a->n_out && st == PEAT_OK; o++)
        st = peat_tensor_clone(a->out[o], &r->golden[o]);
    /* the exact outputs, by the one function that computes them (playback and FI call it too,
     * and find them here): the store keeps them only where its policy says */
    if (st == PEAT_OK) st = peat_record_compute_exact(r);
    if (st != PEAT_OK) {
        peat_record_free(r);
        pr->status = st;
        return st;
    }
    pr->recorded++;
    pr->recorded_op[r->op]++;
    st = pr->sink(pr->user, r);
    if (st != PEAT_OK) pr->status = st;
    return st;
}

peat_status peat_profiler_attach(peat_profiler_t *pr, peat_exec_t *ex)
{
    pr->ex = ex;
    return peat_exec_add_hook(ex, profiler_hook, pr);
}

peat_status peat_record_list_sink(void *list, peat_record *r)
{
    peat_record_list *l = list;
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 64;
        peat_record **items = realloc(l->items, (size_t)cap * sizeof *items);
        if (!items) {
            peat_record_free(r);
            return PEAT_ERROR(PEAT_ERR_NOMEM, "record list");
        }
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = r;
    return PEAT_OK;
}

void peat_record_list_clear(peat_record_list *l)
{
    for (int64_t i = 0; i < l->n; i++) peat_record_free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = l->cap = 0;
}
