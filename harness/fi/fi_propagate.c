/* fi_propagate.c: the propagated view of playback FI: the campaign's flow replayed to each
 * recorded iteration, the golden step and its honest-reorder band kept, and a trial's faulted
 * outputs run through the rest of their step (loss, predictions, update). */
#include "harness/fi/fi_propagate.h"

#include "harness/runtime/runtime.h"
#include "harness/campaign/checkpoint.h"
#include "models/models.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The kept states (two per recorded iteration) may take this much memory; beyond it the command
 * says so and how to narrow it, instead of swapping the machine to death on a large flow. */
#define PROP_MAX_BYTES (4.0 * 1024 * 1024 * 1024)

/* One recorded iteration: where its step starts and how the golden step ends. */
typedef struct prop_iter {
    int64_t iter, call_base; /* call_base: exec calls before the step, in the golden run */
    peat_tensor **before, **after;
    double loss;
    int32_t *pred;
    int64_t n_pred;
    peat_inject_step_band band;
} prop_iter;

struct peat_fi_prop {
    char flow[32], backend[16], finetune[256];
    peat_flow_config cfg;
    int n_state, n_weights;
    prop_iter *it;
    int64_t n_it, steps;
};

/* What a running step is watched for: the predictions (argmax of every cross-entropy's logits)
 * and the one call whose outputs the fault replaces. */
typedef struct step_watch {
    int32_t *pred;
    int64_t n_pred, cap_pred;
    int64_t target; /* exec call number of the faulted call; -1: none */
    const peat_record *r;
    const peat_args *faulty;
    int hit, mismatch;
} step_watch;

/* A flow with its exec and watch (a worker's, the replay's, or a band rerun's). */
typedef struct prop_flow {
    peat_exec_t *ex;
    peat_flow_t *f;
    step_watch w;
    peat_inject_model_t *m; /* band reruns: the reorder model on every GEMM */
    peat_inject_swap sw;
} prop_flow;

struct peat_fi_prop_worker {
    const peat_fi_prop_t *p;
    prop_flow pf;
};

/* ---- watching a step ---- */

static peat_status preds_add(step_watch *w, const peat_args *a)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    if (w->n_pred + R > w->cap_pred) {
        int64_t cap = 2 * (w->n_pred + R);
        int32_t *np = realloc(w->pred, (size_t)cap * sizeof *np);
        if (!np) return PEAT_ERROR(PEAT_ERR_NOMEM, "fi: predictions");
        w->pred = np, w->cap_pred = cap;
    }
    const float *x = peat_f32(a->in[0]);
    for (int64_t r = 0; r < R; r++) {
        int32_t best = 0;
        for (int64_t c = 1; c < C; c++)
            if (x[r * C + c] > x[r * C + best]) best = (int32_t)c;
        w->pred[w->n_pred++] = best;
    }
    return PEAT_OK;
}

/* The faulted call must be the record's (same op, layer, phase and golden output bits): the
 * replay is then the recorded run, and the fault lands where the trial says. */
static void fault_place(step_watch *w, const peat_args *a, const peat_call_info *info)
{
    const peat_record *r = w->r;
    w->hit = 1;
    if (a->op != r->op || a->n_out != r->n_out || info->phase != r->phase ||
        strcmp(info->layer, r->layer) != 0) {
        w->mismatch = 1;
        return;
    }
    for (int o = 0; o < a->n_out; o++)
        if (peat_tensor_nbytes(a->out[o]) != peat_tensor_nbytes(r->golden[o]) ||
            memcmp(a->out[o]->data, r->golden[o]->data, peat_tensor_nbytes(r->golden[o])) != 0)
            w->mismatch = 1;
    if (w->mismatch) return;
    for (int o = 0; o < a->n_out; o++)
        memcpy(a->out[o]->data, w->faulty->out[o]->data, peat_tensor_nbytes(a->out[o]));
}

static peat_status watch_hook(void *user, const peat_kernel *k, const peat_args *a,
                              const peat_call_info *info, int after)
{
    step_watch *w = user;
    (void)k;
    if (!after && a->op == PEAT_OP_CROSS_ENTROPY) return preds_add(w, a);
    if (after && info->call_index == w->target) fault_place(w, a, info);
    return PEAT_OK;
}

/* ---- flows ---- */

static void prop_flow_free(prop_flow *pf)
{
    peat_models_flow_free(pf->f);
    peat_exec_free(pf->ex);
    peat_inject_model_free(pf->m);
    free(pf->w.pred);
    memset(pf, 0, sizeof *pf);
}

/* band > 0: the band rerun of that number (reorder on every GEMM call). */
static peat_status prop_flow_init(const peat_fi_prop_t *p, prop_flow *pf, int band)
{
    memset(pf, 0, sizeof *pf);
    pf->w.target = -1;
    PEAT_TRY(peat_exec_alloc(p->flow, p->cfg.seed, &pf->ex));
    if (p->backend[0]) PEAT_TRY(peat_exec_set_backend(pf->ex, p->backend));
    PEAT_TRY(peat_exec_add_hook(pf->ex, watch_hook, &pf->w));
    if (band > 0) {
        PEAT_TRY(peat_inject_model_parse(peat_runtime_band_spec(band), &pf->m));
        pf->sw.m = pf->m;
        pf->sw.seed = p->cfg.seed;
        peat_exec_swap s = {
            .op = PEAT_OP_GEMM, .fn = peat_inject_swap_run, .user = &pf->sw, .every = 1};
        PEAT_TRY(peat_exec_set_swap(pf->ex, &s));
    }
    PEAT_TRY(peat_models_flow_alloc(p->flow, &p->cfg, pf->ex, &pf->f));
    if (strcmp(p->finetune, "-") != 0) PEAT_TRY(peat_campaign_checkpoint_load(p->finetune, pf->f));
    return PEAT_OK;
}

static peat_status state_load(prop_flow *pf, peat_tensor *const *from, int n, int64_t iter)
{
    for (int i = 0; i < n; i++) {
        peat_tensor *d = peat_models_flow_state(pf->f, i, NULL);
        if (!d || peat_tensor_nbytes(d) != peat_tensor_nbytes(from[i]))
            return PEAT_ERROR(PEAT_ERR_INTERNAL, "fi: state tensor %d differs in size", i);
        memcpy(d->data, from[i]->data, peat_tensor_nbytes(d));
    }
    peat_models_flow_set_step(pf->f, iter);
    return PEAT_OK;
}

static peat_status state_snapshot(prop_flow *pf, int n, peat_tensor ***out)
{
    *out = calloc((size_t)n, sizeof **out);
    if (!*out) return PEAT_ERROR(PEAT_ERR_NOMEM, "fi: state snapshot");
    for (int i = 0; i < n; i++)
        PEAT_TRY(peat_tensor_clone(peat_models_flow_state(pf->f, i, NULL), &(*out)[i]));
    return PEAT_OK;
}

/* One training step; the step's loss (a failing step: its status). */
static peat_status step_run(prop_flow *pf, double *loss)
{
    pf->w.n_pred = 0;
    pf->w.hit = pf->w.mismatch = 0;
    peat_flow_metrics m;
    peat_status st = peat_models_flow_step(pf->f, &m);
    *loss = st == PEAT_OK ? m.loss : NAN;
    return st;
}

static double rel_dist(const peat_tensor *a, const peat_tensor *b)
{
    const float *x = peat_f32(a), *y = peat_f32(b);
    double num = 0, den = 0;
    for (int64_t i = 0; i < peat_tensor_numel(a); i++) {
        double d = (double)x[i] - (double)y[i];
        num += d * d, den += (double)y[i] * y[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The step pf just ran against the golden step of it. */
static void step_compare(const peat_fi_prop_t *p, prop_flow *pf, const prop_iter *it, double loss,
                         peat_inject_step *s)
{
    memset(s, 0, sizeof *s);
    s->nonfinite = !isfinite(loss);
    s->identical = memcmp(&loss, &it->loss, sizeof loss) == 0 && pf->w.n_pred == it->n_pred;
    s->d_loss = isfinite(loss) ? fabs(loss - it->loss) : INFINITY;
    for (int64_t r = 0; r < it->n_pred && r < pf->w.n_pred; r++)
        s->pred_changed += pf->w.pred[r] != it->pred[r];
    s->identical = s->identical && s->pred_changed == 0;
    for (int i = 0; i < p->n_state; i++) {
        const peat_tensor *x = peat_models_flow_state(pf->f, i, NULL);
        const float *v = peat_f32(x);
        for (int64_t k = 0; k < peat_tensor_numel(x) && !s->nonfinite; k++)
            s->nonfinite = !isfinite(v[k]);
        if (memcmp(x->data, it->after[i]->data, peat_tensor_nbytes(x)) != 0) s->identical = 0;
        if (i < p->n_weights) {
            double d = rel_dist(x, it->after[i]);
            if (!(d <= s->d_w)) s->d_w = d; /* NaN stays NaN: non-finite above */
        }
    }
}

/* ---- the replay ---- */

/* The flow configuration the campaign recorded with (meta.policy,
 * harness/campaign/stage_resolve.c). */
static peat_status config_parse(const peat_store_meta *m, peat_fi_prop_t *p)
{
    const char *s = strstr(m->policy, "optimizer=");
    char opt[16];
    int task = 0;
    memset(&p->cfg, 0, sizeof p->cfg);
    if (!s || sscanf(s, "optimizer=%15s task=%d finetune=%255s sizes=%d,%d,%d,%d lr=%lg", opt,
                     &task, p->finetune, &p->cfg.batch, &p->cfg.width, &p->cfg.depth, &p->cfg.seq,
                     &p->cfg.lr) != 8)
        return PEAT_ERROR(PEAT_ERR_FORMAT,
                          "fi: the campaign does not record its flow configuration (policy "
                          "'%s'): propagation cannot replay it; use --local-only",
                          m->policy);
    p->cfg.seed = m->seed;
    p->cfg.task = task;
    p->cfg.weight_decay = -1.0;
    p->cfg.optimizer = strncmp(opt, "sgd", 3) == 0 ? PEAT_OPTIM_SGD : PEAT_OPTIM_ADAMW;
    p->cfg.nesterov = strcmp(opt, "sgd_nesterov") == 0;
    snprintf(p->flow, sizeof p->flow, "%s", m->flow);
    snprintf(p->backend, sizeof p->backend, "%s", m->backend);
    return PEAT_OK;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static const prop_iter *iter_find(const peat_fi_prop_t *p, int64_t it)
{
    int64_t lo = 0, hi = p->n_it;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (p->it[mid].iter < it)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->n_it && p->it[lo].iter == it ? &p->it[lo] : NULL;
}

/* The band of one step: each honest rerun from the same state, its largest deviations. */
static peat_status band_measure(peat_fi_prop_t *p, prop_flow *band, prop_iter *it)
{
    for (int r = 0; r < PEAT_FI_PROP_BAND_RERUNS; r++) {
        double loss;
        PEAT_TRY(state_load(&band[r], it->before, p->n_state, it->iter));
        PEAT_TRY(step_run(&band[r], &loss));
        peat_inject_step s;
        step_compare(p, &band[r], it, loss, &s);
        if (s.nonfinite)
            return PEAT_ERROR(PEAT_ERR_NUMERIC, "fi: an honest rerun of step %lld is not finite",
                              (long long)it->iter);
        if (s.d_loss > it->band.loss) it->band.loss = s.d_loss;
        if (s.d_w > it->band.w) it->band.w = s.d_w;
        if (s.pred_changed > it->band.pred) it->band.pred = s.pred_changed;
        p->steps++;
    }
    return PEAT_OK;
}

/* The golden step at a needed iteration: what it starts from and how it ends. */
static peat_status golden_step(peat_fi_prop_t *p, prop_flow *g, prop_iter *it)
{
    PEAT_TRY(state_snapshot(g, p->n_state, &it->before));
    it->call_base = peat_exec_calls(g->ex);
    PEAT_TRY(step_run(g, &it->loss));
    if (!isfinite(it->loss))
        return PEAT_ERROR(PEAT_ERR_NUMERIC, "fi: the golden step %lld is not finite",
                          (long long)it->iter);
    PEAT_TRY(state_snapshot(g, p->n_state, &it->after));
    it->pred = malloc((size_t)(g->w.n_pred + 1) * sizeof *it->pred);
    if (!it->pred) return PEAT_ERROR(PEAT_ERR_NOMEM, "fi: predictions");
    memcpy(it->pred, g->w.pred, (size_t)g->w.n_pred * sizeof *it->pred);
    it->n_pred = g->w.n_pred;
    return PEAT_OK;
}

/* The replay: golden steps from the flow's start to the last needed iteration. */
static peat_status replay(peat_fi_prop_t *p, prop_flow *g, prop_flow *band)
{
    int64_t k = 0, step = peat_models_flow_step_count(g->f);
    if (p->n_it && p->it[0].iter < step)
        return PEAT_ERROR(PEAT_ERR_FORMAT,
                          "fi: record of iteration %lld before the flow's start %lld",
                          (long long)p->it[0].iter, (long long)step);
    for (; k < p->n_it; step++) {
        p->steps++;
        if (p->it[k].iter != step) {
            double loss;
            PEAT_TRY(step_run(g, &loss));
            continue;
        }
        PEAT_TRY(golden_step(p, g, &p->it[k]));
        PEAT_TRY(band_measure(p, band, &p->it[k]));
        k++;
    }
    return PEAT_OK;
}

/* A worker's step from a kept state must be the golden step, bit for bit: the state list is all
 * a step depends on. Checked once, on the first needed iteration. */
static peat_status replay_check(peat_fi_prop_t *p)
{
    if (p->n_it == 0) return PEAT_OK;
    prop_flow w;
    peat_status st = prop_flow_init(p, &w, 0);
    prop_iter *it = &p->it[0];
    double loss = NAN;
    if (st == PEAT_OK) st = state_load(&w, it->before, p->n_state, it->iter);
    if (st == PEAT_OK) st = step_run(&w, &loss);
    peat_inject_step s;
    if (st == PEAT_OK) step_compare(p, &w, it, loss, &s);
    if (st == PEAT_OK && !s.identical)
        st = PEAT_ERROR(PEAT_ERR_FORMAT,
                        "fi: flow %s does not repeat its step %lld from the kept state: "
                        "propagation needs a deterministic flow; use --local-only",
                        p->flow, (long long)it->iter);
    prop_flow_free(&w);
    return st;
}

static peat_status prop_build(peat_fi_prop_t *p, const peat_store_meta *meta, const int64_t *iters,
                              int64_t n)
{
    PEAT_TRY(config_parse(meta, p));
    int64_t *s = malloc((size_t)(n + 1) * sizeof *s);
    p->it = calloc((size_t)(n + 1), sizeof *p->it);
    if (!s || !p->it) {
        free(s);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "fi: iterations");
    }
    memcpy(s, iters, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_i64);
    for (int64_t i = 0; i < n; i++)
        if (i == 0 || s[i] != s[i - 1]) p->it[p->n_it++].iter = s[i];
    free(s);
    prop_flow g, band[PEAT_FI_PROP_BAND_RERUNS];
    memset(band, 0, sizeof band);
    peat_status st = prop_flow_init(p, &g, 0);
    for (int r = 0; st == PEAT_OK && r < PEAT_FI_PROP_BAND_RERUNS; r++)
        st = prop_flow_init(p, &band[r], r + 1);
    if (st == PEAT_OK) {
        p->n_state = peat_models_flow_state_count(g.f);
        p->n_weights = p->n_state / (p->cfg.optimizer == PEAT_OPTIM_SGD ? 2 : 3);
        double bytes = 0;
        for (int i = 0; i < p->n_state; i++)
            bytes += 2.0 * (double)peat_tensor_nbytes(peat_models_flow_state(g.f, i, NULL));
        if (bytes * (double)p->n_it > PROP_MAX_BYTES)
            st = PEAT_ERROR(PEAT_ERR_NOMEM,
                            "fi: following trials to the end of their step keeps %.1f GiB of "
                            "states (%lld recorded iterations): narrow them with --iters LO:HI, "
                            "or use --local-only",
                            bytes * (double)p->n_it / (1024.0 * 1024 * 1024), (long long)p->n_it);
    }
    if (st == PEAT_OK) st = replay(p, &g, band);
    prop_flow_free(&g);
    for (int r = 0; r < PEAT_FI_PROP_BAND_RERUNS; r++) prop_flow_free(&band[r]);
    if (st == PEAT_OK) st = replay_check(p);
    return st;
}

peat_status peat_fi_prop_alloc(const peat_store_meta *meta, const int64_t *iters, int64_t n,
                               peat_fi_prop_t **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return PEAT_ERROR(PEAT_ERR_NOMEM, "fi: propagation");
    peat_status st = prop_build(*out, meta, iters, n);
    if (st != PEAT_OK) {
        peat_fi_prop_free(*out);
        *out = NULL;
    }
    return st;
}

static void tensors_free(peat_tensor **t, int n)
{
    for (int i = 0; t && i < n; i++) peat_tensor_free(t[i]);
    free(t);
}

void peat_fi_prop_free(peat_fi_prop_t *p)
{
    if (!p) return;
    for (int64_t i = 0; i < p->n_it; i++) {
        tensors_free(p->it[i].before, p->n_state);
        tensors_free(p->it[i].after, p->n_state);
        free(p->it[i].pred);
    }
    free(p->it);
    free(p);
}

int64_t peat_fi_prop_steps(const peat_fi_prop_t *p)
{
    return p ? p->steps : 0;
}

const peat_inject_step_band *peat_fi_prop_band(const peat_fi_prop_t *p, int64_t it)
{
    const prop_iter *x = p ? iter_find(p, it) : NULL;
    return x ? &x->band : NULL;
}

/* ---- trials ---- */

peat_status peat_fi_prop_worker_alloc(const peat_fi_prop_t *p, peat_fi_prop_worker_t **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return PEAT_ERROR(PEAT_ERR_NOMEM, "fi: worker");
    (*out)->p = p;
    peat_status st = prop_flow_init(p, &(*out)->pf, 0);
    if (st != PEAT_OK) {
        peat_fi_prop_worker_free(*out);
        *out = NULL;
    }
    return st;
}

void peat_fi_prop_worker_free(peat_fi_prop_worker_t *w)
{
    if (!w) return;
    prop_flow_free(&w->pf);
    free(w);
}

peat_status peat_fi_prop_trial(peat_fi_prop_worker_t *w, const peat_record *r,
                               const peat_args *faulty, peat_inject_trial *t)
{
    const peat_fi_prop_t *p = w->p;
    const prop_iter *it = iter_find(p, r->iter);
    if (!it)
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "fi: iteration %lld was not replayed",
                          (long long)r->iter);
    peat_inject_step s;
    memset(&s, 0, sizeof s);
    s.failed = faulty == NULL;
    if (faulty) {
        prop_flow *pf = &w->pf;
        PEAT_TRY(state_load(pf, it->before, p->n_state, it->iter));
        pf->w.target = peat_exec_calls(pf->ex) + (r->call_index - it->call_base);
        pf->w.r = r, pf->w.faulty = faulty;
        double loss;
        peat_status st = step_run(pf, &loss);
        pf->w.target = -1;
        if (st == PEAT_OK && (!pf->w.hit || pf->w.mismatch))
            return PEAT_ERROR(PEAT_ERR_FORMAT,
                              "fi: replaying flow %s does not reproduce record %llu (iteration "
                              "%lld, %s %s); use --local-only",
                              p->flow, (unsigned long long)r->id, (long long)r->iter, r->layer,
                              peat_op_name(r->op));
        if (st != PEAT_OK) {
            s.failed = 1;
            if (!t->why[0]) snprintf(t->why, sizeof t->why, "step: %s", peat_error_last());
        } else {
            step_compare(p, pf, it, loss, &s);
        }
    }
    t->prop = peat_inject_step_classify(&s, &it->band);
    t->pred_changed = s.pred_changed;
    t->d_loss = s.d_loss;
    t->d_w = s.d_w;
    return PEAT_OK;
}
