/* coverage.c: stratified recording of a flow's op calls (harness/campaign/coverage.h). */
#include "harness/campaign/coverage.h"

#include <stdio.h>
#include <string.h>

static const char *phase_name(peat_phase p)
{
    return p == PEAT_PHASE_FWD ? "fwd" : p == PEAT_PHASE_BWD ? "bwd" : "opt";
}

/* The stratum label of a call: op, layer, phase, input shapes, input dtype. */
static void stratum_label(const peat_args *a, const peat_call_info *info, char *buf, size_t n)
{
    size_t w = (size_t)snprintf(buf, n, "%s %s %s ", peat_op_name(a->op),
                                info->layer ? info->layer : "-", phase_name(info->phase));
    for (int i = 0; i < a->n_in && w < n; i++) {
        const peat_tensor *t = a->in[i];
        w += (size_t)snprintf(buf + w, n - w, "[");
        for (int d = 0; d < t->ndim && w < n; d++)
            w += (size_t)snprintf(buf + w, n - w, d ? "x%lld" : "%lld", (long long)t->shape[d]);
        w += (size_t)snprintf(buf + w, n - w, "]");
    }
    if (w < n && a->n_in > 0) snprintf(buf + w, n - w, " %s", peat_dtype_name(a->in[0]->dtype));
    /* a transposed GEMM is its own stratum even where the shapes coincide */
    if (a->op == PEAT_OP_GEMM && (a->p.i[0] || a->p.i[1]) && strlen(buf) + 8 < n)
        strcat(buf, a->p.i[0] ? (a->p.i[1] ? " tA tB" : " tA") : " tB");
}

static peat_stratum *stratum_find(peat_coverage *cov, const char *label)
{
    for (int i = 0; i < cov->n; i++)
        if (!strcmp(cov->s[i].label, label)) return &cov->s[i];
    /* past the table's size every further stratum is counted in one last "other" row */
    int i = cov->n < PEAT_COVERAGE_MAX - 1 ? cov->n++ : PEAT_COVERAGE_MAX - 1;
    if (i == PEAT_COVERAGE_MAX - 1) {
        cov->n = PEAT_COVERAGE_MAX;
        label = "other";
    }
    snprintf(cov->s[i].label, sizeof cov->s[i].label, "%s", label);
    return &cov->s[i];
}

typedef struct plan_state {
    peat_coverage *cov;
    const peat_profile_policy *pol;
} plan_state;

/* Whether pol records calls of this op and phase at all. */
static int policy_covers(const peat_profile_policy *p, const peat_args *a, peat_phase ph)
{
    if (p->op_mask && !(p->op_mask & PEAT_OP_BIT(a->op))) return 0;
    if (!p->fwd && !p->bwd && !p->opt) return 1;
    return (ph == PEAT_PHASE_FWD && p->fwd) || (ph == PEAT_PHASE_BWD && p->bwd) ||
           (ph == PEAT_PHASE_OPT && p->opt);
}

static peat_status plan_hook(void *user, const peat_kernel *k, const peat_args *a,
                             const peat_call_info *info, int after)
{
    plan_state *ps = user;
    (void)k;
    if (after || !policy_covers(ps->pol, a, info->phase)) return PEAT_OK;
    char label[112];
    stratum_label(a, info, label, sizeof label);
    stratum_find(ps->cov, label)->per_step++;
    return PEAT_OK;
}

/* The length of a stratum label's op name (its first word). */
static size_t op_len(const char *label)
{
    return strcspn(label, " ");
}

static int same_op(const char *a, const char *b)
{
    return op_len(a) == op_len(b) && !strncmp(a, b, op_len(a));
}

/* Shares calls out over the strata of each op (--calls is per op: recording more ops never
 * takes calls from the kernel's): an equal share each (the remainder one more to the first
 * strata), never more than a stratum has, at least one. The cap is calls per recorded op. */
static void assign_quotas(peat_coverage *cov, int64_t calls)
{
    int64_t n_ops = 0;
    for (int i = 0; i < cov->n; i++) {
        int64_t n = 0, rank = 0, first = 1;
        for (int k = 0; k < cov->n; k++)
            if (same_op(cov->s[i].label, cov->s[k].label)) {
                n++;
                if (k < i) rank++, first = 0;
            }
        n_ops += first;
        int64_t share = calls / n, extra = calls % n;
        int64_t have = cov->s[i].per_step * cov->window;
        int64_t q = share + (rank < extra) < 1 ? 1 : share + (rank < extra);
        cov->s[i].quota = q < have ? q : have;
    }
    if (n_ops > 1) cov->cap = calls * n_ops;
}

peat_status peat_campaign_coverage_plan(const char *flow, const peat_flow_config *cfg,
                                        const peat_profile_policy *pol, int64_t window,
                                        int64_t calls, peat_coverage *cov)
{
    memset(cov, 0, sizeof *cov);
    cov->window = window > 0 ? window : 0;
    cov->cap = calls;
    plan_state ps = {cov, pol};
    peat_exec_t *ex = NULL;
    peat_flow_t *f = NULL;
    peat_flow_metrics m;
    PEAT_TRY(peat_exec_alloc(flow, cfg->seed, &ex));
    peat_status st = peat_exec_add_hook(ex, plan_hook, &ps);
    if (st == PEAT_OK) st = peat_models_flow_alloc(flow, cfg, ex, &f);
    if (st == PEAT_OK) st = peat_models_flow_step(f, &m);
    peat_models_flow_free(f);
    peat_exec_free(ex);
    assign_quotas(cov, calls);
    return st;
}

int peat_campaign_coverage_filter(void *user, const peat_args *a, const peat_call_info *info)
{
    peat_coverage *cov = user;
    char label[112];
    stratum_label(a, info, label, sizeof label);
    peat_stratum *s = stratum_find(cov, label);
    int64_t j = s->seen++;
    if (cov->cap > 0 && cov->n_recorded >= cov->cap) return 0;
    if (s->per_step == 0) {
        /* a stratum the planning step did not show: its first call stands for it */
        if (s->recorded > 0) return 0;
    } else {
        if (s->recorded >= s->quota) return 0;
        /* the r-th record is the call at the middle of the r-th of quota equal slices */
        int64_t total = s->per_step * cov->window;
        if (j < (2 * s->recorded + 1) * total / (2 * s->quota)) return 0;
    }
    s->recorded++;
    cov->n_recorded++;
    return 1;
}

int64_t peat_campaign_coverage_total(const peat_coverage *cov)
{
    int64_t t = 0;
    for (int i = 0; i < cov->n; i++) t += cov->s[i].quota;
    return t;
}

int peat_campaign_coverage_missed(const peat_coverage *cov)
{
    int n = 0;
    for (int i = 0; i < cov->n; i++) n += cov->s[i].seen > 0 && cov->s[i].recorded == 0;
    return n;
}
