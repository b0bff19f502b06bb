/* fi.c: `peat inject`: seeded playback fault-injection trials on a campaign's recorded calls,
 * spread over threads, written durably in batches (a killed campaign resumes), rates and each
 * model's reference signature. */
#define _DEFAULT_SOURCE
#include "harness/fi/fi.h"
#include "peat/backend.h"

#include "analyzer/analyzer.h"
#include "golden/golden.h"
#include "harness/campaign/campaign.h"
#include "harness/runtime/builtin.h"
#include "harness/latency/latency.h"
#include "harness/fi/fi_propagate.h"
#include "harness/fi/fi_shard.h"
#include "store/store.h"
#include "core/io_cause.h"
#include "harness/report/report.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FI_TABLE "/fi/trials"

void peat_fi_opts_default(peat_fi_opts *o)
{
    memset(o, 0, sizeof *o);
    o->site = "output";
    o->margin = 0.03;
    o->confidence = 0.95;
}

/* A recorded call ready for trials: exact outputs, magnitudes and per-element bounds. */
typedef struct prepared {
    peat_record *r;
    double *mag[PEAT_MAX_IO], *bound[PEAT_MAX_IO];
    int64_t depth, terms[PEAT_MAX_IO];
    peat_inject_ref ref;
} prepared;

typedef struct fi_run {
    const peat_fi_opts *o;
    peat_fi_result *res;
    peat_store_t *store;
    peat_store_table_t *tab;
    prepared *p;
    int64_t n_p;
    uint64_t seed;
    peat_inject_site site;
    int64_t rows_written;
    peat_fi_prop_t *prop;          /* NULL: --local-only */
    peat_fi_prop_worker_t *pw[64]; /* one flow per worker thread */
    peat_store_meta meta;
    /* scale-out (harness/fi/fi_shard.c): with --shard the trials go to the shard's own file
     * (wstore), the campaign's table (main_tab) only says what is done; with o->from the trials
     * come from shard files (src, sorted by model and index) */
    peat_scale_shard shard;
    peat_store_t *wstore;
    peat_store_table_t *main_tab;
    peat_inject_trial *src;
    int64_t n_src;
} fi_run;

/* ---- records ---- */

static peat_status prepare(prepared *p, peat_record *r)
{
    p->r = r;
    PEAT_TRY(peat_record_compute_exact(r));
    peat_args a = peat_record_args(r);
    p->depth = peat_op_info_get(r->op)->depth(&r->p);
    p->ref.n_out = r->n_out;
    for (int o = 0; o < r->n_out; o++) {
        int64_t n = peat_tensor_numel(r->golden[o]);
        p->mag[o] = malloc((size_t)n * sizeof(double));
        p->bound[o] = malloc((size_t)n * sizeof(double));
        if (!p->mag[o] || !p->bound[o]) return PEAT_ERROR(PEAT_ERR_NOMEM, "fi: bounds");
        PEAT_TRY(peat_golden_magnitude(&a, o, r->exact[o], p->mag[o]));
        /* the bound is golden/'s magnitude through the analyzer's gamma_K: inject judges against
         * it, it computes none */
        for (int64_t i = 0; i < n; i++)
            p->bound[o][i] = peat_analyzer_bound(p->mag[o][i], p->depth);
        p->terms[o] = peat_golden_terms(&a, o);
        p->ref.golden[o] = r->golden[o];
        p->ref.exact[o] = r->exact[o];
        p->ref.bound[o] = p->bound[o];
    }
    return PEAT_OK;
}

static void prepared_free(prepared *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        for (int o = 0; o < PEAT_MAX_IO; o++) free(p[i].mag[o]), free(p[i].bound[o]);
        peat_record_free(p[i].r);
    }
    free(p);
}

/* Whether layer is in a comma list of names ("fc1,h0.*": a trailing * is a prefix). */
static int layer_listed(const char *list, const char *layer)
{
    if (!list || !*list) return 1;
    for (const char *s = list; *s;) {
        size_t n = strcspn(s, ",");
        if (n > 0 && s[n - 1] == '*' ? strncmp(s, layer, n - 1) == 0
                                     : strlen(layer) == n && strncmp(s, layer, n) == 0)
            return 1;
        s += n + (s[n] == ',');
    }
    return 0;
}

/* The records a series draws from, as a string: part of the series' name. */
static peat_status select_string(const peat_fi_opts *o, char *buf, size_t n)
{
    char it[48] = "";
    if (o->iter_lo > 0 || o->iter_hi > 0)
        snprintf(it, sizeof it, "iters=%lld:%lld", (long long)o->iter_lo, (long long)o->iter_hi);
    const char *part[4] = {o->ops, o->layers, o->phases, it[0] ? it : NULL};
    const char *key[4] = {"ops=", "layer=", "phase=", ""};
    buf[0] = 0;
    for (int k = 0; k < 4; k++) {
        if (!part[k] || !*part[k]) continue;
        size_t l = strlen(buf);
        if (snprintf(buf + l, n - l, "%s%s%s", l ? " " : "", key[k], part[k]) >= (int)(n - l))
            return PEAT_ERROR(PEAT_ERR_INVAL, "--ops, --layer, --phase: lists too long");
    }
    return PEAT_OK;
}

static int record_selected(const peat_fi_opts *o, uint64_t mask, int ph[3], const peat_record *h)
{
    if (mask && !(mask & PEAT_OP_BIT(h->op))) return 0;
    if (o->phases && !ph[h->phase]) return 0;
    if (h->iter < o->iter_lo || (o->iter_hi > 0 && h->iter >= o->iter_hi)) return 0;
    return layer_listed(o->layers, h->layer);
}

/* Records of the chosen ops, layers, phases and iterations with golden outputs, in file order. */
static peat_status records_load(fi_run *F)
{
    uint64_t mask = 0;
    int ph[3] = {1, 1, 1};
    if (F->o->ops) PEAT_TRY(peat_campaign_op_mask_parse(F->o->ops, &mask));
    if (F->o->phases) PEAT_TRY(peat_campaign_phase_parse(F->o->phases, &ph[0], &ph[1], &ph[2]));
    int64_t n = peat_store_call_count(F->store);
    F->p = calloc((size_t)n + 1, sizeof *F->p);
    if (!F->p) return PEAT_ERROR(PEAT_ERR_NOMEM, "fi: record list");
    for (int64_t i = 0; i < n; i++) {
        peat_record h;
        memset(&h, 0, sizeof h);
        PEAT_TRY(peat_store_call_header(F->store, i, &h));
        if (!record_selected(F->o, mask, ph, &h)) continue;
        peat_record *r = NULL;
        PEAT_TRY(peat_store_call_read(F->store, i, &r));
        if (r->n_out < 1 || !r->golden[0]) {
            peat_record_free(r);
            continue;
        }
        peat_status st = prepare(&F->p[F->n_p], r);
        F->n_p++;
        PEAT_TRY(st);
    }
    if (F->n_p == 0)
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "%s: no recorded calls to inject into (%s)",
                          F->res->dir, F->res->select[0] ? F->res->select : "none recorded");
    return PEAT_OK;
}

/* ---- the trials table ---- */

/* the columns of /fi/trials: store/store_schema.c (every campaign file is created with it) */
static const peat_store_col *const cols = peat_store_fi_trial_cols;
#define NCOL ((int)(sizeof peat_store_fi_trial_cols / sizeof peat_store_fi_trial_cols[0]))

static void trial_to_row(const peat_inject_trial *t, peat_store_value *v)
{
    v[0].s = t->model, v[1].s = t->spec, v[2].s = peat_inject_site_name(t->site);
    v[3].i = t->index, v[4].i = (int64_t)t->seed, v[5].i = t->record;
    v[6].i = (int64_t)t->record_id, v[7].s = peat_op_name(t->op), v[8].s = t->layer;
    v[9].i = t->phase, v[10].i = t->iter, v[11].i = t->bit, v[12].i = t->target;
    v[13].s = peat_inject_outcome_name(t->outcome), v[14].i = t->n_diff, v[15].i = t->n_over;
    v[16].i = t->n_nonfinite, v[17].d = t->max_norm, v[18].s = t->why;
    v[19].s = t->select;
    v[20].s =
        (unsigned)t->prop < PEAT_INJECT_OUTCOME_COUNT ? peat_inject_outcome_name(t->prop) : "-";
    v[21].i = t->pred_changed, v[22].d = t->d_loss, v[23].d = t->d_w;
}

static peat_inject_outcome outcome_parse(const char *s)
{
    for (int k = 0; k < PEAT_INJECT_OUTCOME_COUNT; k++)
        if (!strcmp(s, peat_inject_outcome_name((peat_inject_outcome)k)))
            return (peat_inject_outcome)k;
    return PEAT_INJECT_OUTCOME_COUNT;
}

static peat_status trial_from_row(const peat_store_table_t *tab, int64_t row, peat_inject_trial *t)
{
    peat_store_value v[NCOL];
    for (int c = 0; c < NCOL; c++) PEAT_TRY(peat_store_table_get(tab, row, c, &v[c]));
    memset(t, 0, sizeof *t);
    snprintf(t->model, sizeof t->model, "%s", v[0].s);
    snprintf(t->spec, sizeof t->spec, "%s", v[1].s);
    PEAT_TRY(peat_inject_site_parse(v[2].s, &t->site));
    t->index = v[3].i, t->seed = (uint64_t)v[4].i, t->record = v[5].i;
    t->record_id = (uint64_t)v[6].i;
    PEAT_TRY(peat_op_parse(v[7].s, &t->op));
    snprintf(t->layer, sizeof t->layer, "%s", v[8].s);
    t->phase = (peat_phase)v[9].i, t->iter = v[10].i, t->bit = (int)v[11].i;
    t->target = (int)v[12].i;
    t->outcome = outcome_parse(v[13].s);
    t->n_diff = v[14].i, t->n_over = v[15].i, t->n_nonfinite = v[16].i, t->max_norm = v[17].d;
    snprintf(t->why, sizeof t->why, "%s", v[18].s);
    snprintf(t->select, sizeof t->select, "%s", v[19].s);
    t->prop = outcome_parse(v[20].s);
    t->pred_changed = v[21].i, t->d_loss = v[22].d, t->d_w = v[23].d;
    return PEAT_OK;
}

/* Trials of the series (model, site, selection) the file already holds, in the view asked for
 * (a local-only trial is redone when propagation is asked): done[index] = 1. */
static peat_status done_marks_in(const fi_run *F, const peat_store_table_t *tab, const char *model,
                                 int64_t n, unsigned char *done)
{
    peat_store_value m, s, i, sel, prop;
    for (int64_t r = 0; tab && r < peat_store_table_rows(tab); r++) {
        PEAT_TRY(peat_store_table_get(tab, r, 0, &m));
        PEAT_TRY(peat_store_table_get(tab, r, 2, &s));
        PEAT_TRY(peat_store_table_get(tab, r, 3, &i));
        PEAT_TRY(peat_store_table_get(tab, r, 19, &sel));
        PEAT_TRY(peat_store_table_get(tab, r, 20, &prop));
        if (!strcmp(m.s, model) && !strcmp(s.s, peat_inject_site_name(F->site)) &&
            !strcmp(sel.s, F->res->select) && (!F->prop || strcmp(prop.s, "-") != 0) && i.i >= 0 &&
            i.i < n)
            done[i.i] = 1;
    }
    return PEAT_OK;
}

/* Done in this run's table or (a shard's run) in the campaign's. */
static peat_status done_marks(const fi_run *F, const char *model, int64_t n, unsigned char *done)
{
    PEAT_TRY(done_marks_in(F, F->tab, model, n, done));
    return done_marks_in(F, F->main_tab, model, n, done);
}

/* ---- workers ---- */

typedef struct batch {
    fi_run *F;
    const peat_inject_model_t *m;
    peat_inject_trial *t;
    int64_t n;
    int64_t next; /* next trial to take (under mu) */
    pthread_mutex_t mu;
    peat_status st;
    char msg[256];
} batch;

static peat_status trial_one(fi_run *F, const peat_inject_model_t *m, peat_inject_trial *t,
                             peat_args *out_args)
{
    const prepared *p = &F->p[t->record];
    const peat_record *r = p->r;
    t->record_id = r->id, t->op = r->op, t->phase = r->phase, t->iter = r->iter;
    snprintf(t->layer, sizeof t->layer, "%s", r->layer);
    const peat_kernel *g = peat_registry_role(r->op, PEAT_ROLE_GOLDEN, PEAT_BACKEND_HOST);
    if (!g)
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "fi: no golden kernel for %s", peat_op_name(r->op));
    peat_args a = peat_record_args(r);
    PEAT_TRY(peat_op_alloc_outputs(&a, PEAT_DTYPE_F32));
    peat_status st = peat_inject_trial_run(m, g, &a, &p->ref, t);
    if (out_args && st == PEAT_OK)
        *out_args = a; /* the caller reads and frees the faulty outputs */
    else
        peat_args_free_outputs(&a);
    return st;
}

/* A trial in both views: the local one on its op's output, then (unless --local-only) the same
 * faulted outputs through the rest of their training step on worker w's flow. */
static peat_status trial_full(fi_run *F, int w, const peat_inject_model_t *m, peat_inject_trial *t)
{
    snprintf(t->select, sizeof t->select, "%s", F->res->select);
    if (!F->prop) return trial_one(F, m, t, NULL);
    peat_args a;
    PEAT_TRY(trial_one(F, m, t, &a));
    /* a computation that failed (the why column) left no outputs to follow: a DUE */
    const peat_args *faulty = t->why[0] ? NULL : &a;
    peat_status st = peat_fi_prop_trial(F->pw[w], F->p[t->record].r, faulty, t);
    peat_args_free_outputs(&a);
    return st;
}

typedef struct worker_arg {
    batch *b;
    int id;
} worker_arg;

static void *worker(void *arg)
{
    batch *b = ((worker_arg *)arg)->b;
    int id = ((worker_arg *)arg)->id;
    for (;;) {
        pthread_mutex_lock(&b->mu);
        int64_t i = b->st == PEAT_OK ? b->next++ : b->n;
        pthread_mutex_unlock(&b->mu);
        if (i >= b->n) return NULL;
        peat_status st = trial_full(b->F, id, b->m, &b->t[i]);
        if (st != PEAT_OK) {
            pthread_mutex_lock(&b->mu);
            if (b->st == PEAT_OK) {
                b->st = st;
                snprintf(b->msg, sizeof b->msg, "%s", peat_error_last());
            }
            pthread_mutex_unlock(&b->mu);
        }
    }
}

static peat_status batch_run(fi_run *F, const peat_inject_model_t *m, peat_inject_trial *t,
                             int64_t n)
{
    batch b = {.F = F, .m = m, .t = t, .n = n, .st = PEAT_OK};
    pthread_mutex_init(&b.mu, NULL);
    int T = F->res->threads;
    pthread_t th[64];
    worker_arg wa[64];
    for (int i = 0; i < 64; i++) wa[i].b = &b, wa[i].id = i;
    int started = 0;
    for (; started < T - 1 && started < 63; started++)
        if (pthread_create(&th[started], NULL, worker, &wa[started + 1]) != 0) break;
    worker(&wa[0]); /* the calling thread is a worker too */
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    pthread_mutex_destroy(&b.mu);
    if (b.st != PEAT_OK) return PEAT_ERROR(b.st, "%s", b.msg);
    return PEAT_OK;
}

static peat_status batch_store(fi_run *F, const peat_inject_trial *t, int64_t n)
{
    peat_store_value *v = malloc((size_t)n * NCOL * sizeof *v);
    if (!v) return PEAT_ERROR(PEAT_ERR_NOMEM, "fi rows");
    for (int64_t i = 0; i < n; i++) trial_to_row(&t[i], v + i * NCOL);
    peat_status st = peat_store_table_append(F->tab, v, n);
    free(v);
    F->rows_written += n;
#ifdef PEAT_TEST_HOOKS
    /* test hook: a kill right after a durable batch, the worst place for a resume to double */
    if (st == PEAT_OK && F->o->debug_kill_after > 0 && F->rows_written >= F->o->debug_kill_after)
        raise(SIGKILL);
#endif
    return st;
}

/* ---- trials from shard files (peat merge) ---- */

static int src_cmp(const void *a, const void *b)
{
    const peat_inject_trial *x = a, *y = b;
    int c = strcmp(x->model, y->model);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

static const peat_inject_trial *src_find(const fi_run *F, const char *model, int64_t index)
{
    peat_inject_trial key;
    snprintf(key.model, sizeof key.model, "%s", model);
    key.index = index;
    return F->n_src ? bsearch(&key, F->src, (size_t)F->n_src, sizeof key, src_cmp) : NULL;
}

/* This series' rows of one shard file (the view asked for) into F->src. */
static peat_status src_add(fi_run *F, peat_store_t *s, const char *path)
{
    peat_store_meta m;
    PEAT_TRY(peat_store_meta_get(s, &m));
    if (m.seed != F->meta.seed || strcmp(m.kernel, F->meta.kernel) || strcmp(m.flow, F->meta.flow))
        return PEAT_ERROR(
            PEAT_ERR_INVAL,
            "%s: a shard of another campaign (seed %llu, %s on %s; the campaign: seed "
            "%llu, %s on %s)",
            path, (unsigned long long)m.seed, m.kernel, m.flow, (unsigned long long)F->meta.seed,
            F->meta.kernel, F->meta.flow);
    if (!peat_store_table_exists(s, FI_TABLE)) return PEAT_OK;
    peat_store_table_t *tab = NULL;
    peat_status st = peat_store_table_open(s, FI_TABLE, cols, NCOL, &tab);
    if (st == PEAT_ERR_FORMAT)
        return PEAT_ERROR(st, "%s: " FI_TABLE " has another layout (another peat version)", path);
    int64_t n = st == PEAT_OK ? peat_store_table_rows(tab) : 0;
    peat_inject_trial *grown = realloc(F->src, (size_t)(F->n_src + n + 1) * sizeof *grown);
    if (st == PEAT_OK && !grown) st = PEAT_ERROR(PEAT_ERR_NOMEM, "merge: trials");
    if (grown) F->src = grown;
    for (int64_t r = 0; st == PEAT_OK && r < n; r++) {
        peat_inject_trial *t = &F->src[F->n_src];
        st = trial_from_row(tab, r, t);
        if (st == PEAT_OK && t->site == F->site && !strcmp(t->select, F->res->select) &&
            (F->o->local_only || t->prop < PEAT_INJECT_OUTCOME_COUNT))
            F->n_src++;
    }
    peat_store_table_close(tab);
    return st;
}

static peat_status src_load(fi_run *F)
{
    peat_status st = PEAT_OK;
    for (int k = 0; k < F->o->n_from && st == PEAT_OK; k++) {
        peat_store_t *s = NULL;
        st = peat_store_open(F->o->from[k], 0, &s);
        if (st == PEAT_OK) st = src_add(F, s, F->o->from[k]);
        peat_status cst = peat_store_close(s);
        if (st == PEAT_OK) st = cst;
    }
    if (F->n_src) qsort(F->src, (size_t)F->n_src, sizeof *F->src, src_cmp);
    return st;
}

/* Before anything is written: every trial of every model is done or in a shard; otherwise one
 * line naming the shards (of o->from_of) that lack trials, with their items. */
static peat_status src_complete(fi_run *F, peat_inject_model_t **m, int64_t n)
{
    unsigned char *done = calloc((size_t)n + 1, 1);
    int N = F->o->from_of > 0 ? F->o->from_of : 1;
    int64_t *lack = calloc((size_t)N, sizeof *lack), *first = calloc((size_t)N, sizeof *first);
    peat_status st = done && lack && first ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "merge");
    for (int i = 0; st == PEAT_OK && i < F->res->n_models; i++) {
        memset(done, 0, (size_t)n);
        st = done_marks(F, peat_inject_model_spec(m[i]), n, done);
        for (int64_t j = 0; st == PEAT_OK && j < n; j++)
            if (!done[j] && !src_find(F, peat_inject_model_spec(m[i]), j) && !lack[j % N]++)
                first[j % N] = j;
    }
    char msg[900] = "";
    for (int k = 0; st == PEAT_OK && k < N; k++) {
        if (!lack[k]) continue;
        size_t l = strlen(msg);
        int64_t per = (n - k + N - 1) / N * F->res->n_models; /* the shard's trials */
        snprintf(msg + l, sizeof msg - l,
                 "%sshard %d/%d %s: %lld of its %lld trials lack (its trials are #%d, #%d, ... of "
                 "each model; the first lacking #%lld): rerun it with --shard %d/%d",
                 l ? "; " : "", k, N, lack[k] == per ? "missing" : "incomplete", (long long)lack[k],
                 (long long)per, k, k + N, (long long)first[k], k, N);
    }
    if (st == PEAT_OK && msg[0])
        st = PEAT_ERROR(PEAT_ERR_NOTFOUND, "merge of %s: %s; then merge again (nothing written)",
                        F->res->dir, msg);
    free(done), free(lack), free(first);
    return st;
}

/* Runs the trials of one model the file does not hold yet, batch by batch. */
static peat_status series_run(fi_run *F, const peat_inject_model_t *m, int64_t n)
{
    unsigned char *done = calloc((size_t)n + 1, 1);
    /* a flush costs ~0.1-1 ms: 128 trials a worker between two keep it a few us a trial */
    int64_t B = F->o->batch > 0 ? F->o->batch : 128 * (int64_t)F->res->threads;
    peat_inject_trial *t = malloc((size_t)B * sizeof *t);
    peat_status st = done && t ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "fi: trial batch");
    if (st == PEAT_OK) st = done_marks(F, peat_inject_model_spec(m), n, done);
    for (int64_t i = 0; st == PEAT_OK && i < n;) {
        int64_t k = 0;
        for (; i < n && k < B; i++) {
            if (!peat_scale_shard_mine(F->shard, i)) continue; /* another shard's trial */
            if (done[i]) {
                F->res->n_resumed++;
                continue;
            }
            if (F->o->from) { /* peat merge: the trial as its shard ran it */
                const peat_inject_trial *s = src_find(F, peat_inject_model_spec(m), i);
                if (s) t[k++] = *s, F->res->n_merged++;
                continue;
            }
            st = peat_inject_trial_plan(m, F->site, F->seed, i, F->n_p, &t[k++]);
            if (st != PEAT_OK) break;
        }
        if (st == PEAT_OK && k > 0 && !F->o->from) st = batch_run(F, m, t, k);
        if (st == PEAT_OK && k > 0) st = batch_store(F, t, k);
        F->res->n_run += st == PEAT_OK ? k : 0;
    }
    free(done);
    free(t);
    return st;
}

/* ---- reference signatures: the first trials replayed into the analyzer ---- */

static peat_status signature_add(fi_run *F, peat_analyzer_acc_t *acc, peat_inject_trial *t,
                                 const peat_inject_model_t *m)
{
    peat_args a;
    PEAT_TRY(trial_one(F, m, t, &a));
    const prepared *p = &F->p[t->record];
    peat_status st = PEAT_OK;
    for (int o = 0; o < a.n_out && st == PEAT_OK; o++) {
        const peat_tensor *e = p->r->exact[o];
        int64_t cols = e->shape[e->ndim - 1], n = peat_tensor_numel(e);
        st = peat_analyzer_acc_add_terms(acc, a.out[o], e, p->mag[o], p->depth, p->terms[o],
                                         n / cols, cols, NULL);
    }
    peat_args_free_outputs(&a);
    return st;
}

static peat_status signature_write(fi_run *F, const peat_inject_model_t *m, int64_t n)
{
    char name[64];
    /* names hold 63 characters: a long selection is cut (the series' rows keep it whole) */
    if (snprintf(name, sizeof name, "fi:%s@%s%s%s", peat_inject_model_spec(m),
                 peat_inject_site_name(F->site), F->res->select[0] ? " " : "",
                 F->res->select) >= (int)sizeof name)
        name[sizeof name - 1] = 0;
    peat_analyzer_acc_t *acc = peat_analyzer_acc_new(name, F->p[0].r->op);
    if (!acc) return PEAT_ERROR(PEAT_ERR_NOMEM, "fi: analyzer");
    int64_t k = F->o->signature_trials > 0 ? F->o->signature_trials : 32;
    peat_status st = PEAT_OK;
    for (int64_t i = 0; i < k && i < n && st == PEAT_OK; i++) {
        peat_inject_trial t;
        st = peat_inject_trial_plan(m, F->site, F->seed, i, F->n_p, &t);
        /* a signature is of one op: trials on other ops' records are left out */
        if (st == PEAT_OK && F->p[t.record].r->op == F->p[0].r->op)
            st = signature_add(F, acc, &t, m);
    }
    peat_signature sig;
    if (st == PEAT_OK) st = peat_analyzer_signature(acc, &sig);
    peat_analyzer_acc_free(acc);
    char *js = NULL;
    int len = st == PEAT_OK ? peat_analyzer_signature_to_json(&sig, NULL, 0) + 1 : 0;
    if (st == PEAT_OK && !(js = malloc((size_t)len))) st = PEAT_ERROR(PEAT_ERR_NOMEM, "json");
    if (st == PEAT_OK) {
        peat_analyzer_signature_to_json(&sig, js, (size_t)len);
        /* a rerun of the series derives the same signature: written once */
        char *old = NULL;
        int same = peat_store_signature_read(F->store, name, &old) == PEAT_OK && !strcmp(old, js);
        free(old);
        if (!same) st = peat_store_signature_write(F->store, name, js);
    }
    free(js);
    return st;
}

/* ---- the campaign ---- */

static peat_status models_parse(const char *list, peat_inject_model_t **m, peat_fi_result *res)
{
    char buf[2048];
    if (!list || snprintf(buf, sizeof buf, "%s", list) >= (int)sizeof buf)
        return PEAT_ERROR(PEAT_ERR_INVAL, "--model: a ';'-separated list of model specs");
    char *save = NULL;
    for (char *s = strtok_r(buf, ";", &save); s; s = strtok_r(NULL, ";", &save)) {
        if (res->n_models == PEAT_FI_MAX_MODELS)
            return PEAT_ERROR(PEAT_ERR_INVAL, "--model: at most %d models", PEAT_FI_MAX_MODELS);
        PEAT_TRY(peat_inject_model_parse(s, &m[res->n_models]));
        snprintf(res->models[res->n_models], sizeof res->models[0], "%s",
                 peat_inject_model_spec(m[res->n_models]));
        res->n_models++;
    }
    if (!res->n_models) return PEAT_ERROR(PEAT_ERR_INVAL, "--model: no model given");
    return PEAT_OK;
}

/* Every trial in the file (this run's and resumed ones), for the rate tables. */
static int trial_key_cmp(const void *a, const void *b)
{
    const peat_inject_trial *x = a, *y = b;
    int c = strcmp(x->model, y->model);
    if (!c) c = (int)x->site - (int)y->site;
    if (!c) c = strcmp(x->select, y->select);
    if (!c) c = (x->index > y->index) - (x->index < y->index);
    /* the later row (a propagated rerun of a local-only trial) first */
    if (!c) c = (x->record_id < y->record_id) - (x->record_id > y->record_id);
    return c;
}

/* One row per (model, site, selection, trial): a trial rerun to follow it supersedes its
 * local-only row. Rows keep the file's order otherwise irrelevant to the tables. */
static void trials_dedupe(peat_fi_result *res)
{
    for (int64_t i = 0; i < res->n_trials; i++) res->trials[i].record_id = (uint64_t)i;
    qsort(res->trials, (size_t)res->n_trials, sizeof *res->trials, trial_key_cmp);
    int64_t k = 0;
    for (int64_t i = 0; i < res->n_trials; i++) {
        const peat_inject_trial *p = k ? &res->trials[k - 1] : NULL;
        if (p && !strcmp(p->model, res->trials[i].model) && p->site == res->trials[i].site &&
            !strcmp(p->select, res->trials[i].select) && p->index == res->trials[i].index)
            continue;
        res->trials[k++] = res->trials[i];
    }
    res->n_trials = k;
}

static peat_status trials_collect(fi_run *F)
{
    int64_t n = peat_store_table_rows(F->tab);
    F->res->trials = malloc((size_t)(n + 1) * sizeof *F->res->trials);
    if (!F->res->trials) return PEAT_ERROR(PEAT_ERR_NOMEM, "fi trials");
    uint64_t *ids = malloc((size_t)(n + 1) * sizeof *ids);
    if (!ids) return PEAT_ERROR(PEAT_ERR_NOMEM, "fi trials");
    peat_status st = PEAT_OK;
    for (int64_t r = 0; r < n && st == PEAT_OK; r++) {
        st = trial_from_row(F->tab, r, &F->res->trials[F->res->n_trials]);
        ids[F->res->n_trials++] = F->res->trials[r].record_id;
    }
    /* the sort key borrows record_id for the row number; the ids are put back by row */
    if (st == PEAT_OK) trials_dedupe(F->res);
    for (int64_t i = 0; st == PEAT_OK && i < F->res->n_trials; i++)
        F->res->trials[i].record_id = ids[F->res->trials[i].record_id];
    free(ids);
    PEAT_TRY(st);
    for (int g = 0; g < PEAT_INJECT_GROUP_COUNT; g++)
        PEAT_TRY(peat_inject_table_build(F->res->trials, F->res->n_trials, (peat_inject_group)g,
                                         &F->res->tab[g]));
    return PEAT_OK;
}

/* --shard i/N: the shard's own file DIR/fi-shard-i-of-N.h5 (created with the campaign's
 * metadata, or reopened to resume), and the run's options in its /fi/shards table. */
static peat_status shard_open(fi_run *F)
{
    PEAT_TRY(peat_scale_shard_parse(F->o->shard, &F->shard));
    F->res->shard_i = F->shard.i, F->res->shard_n = F->shard.n;
    char name[64];
    peat_scale_shard_name("fi-shard-", F->shard, ".h5", name, sizeof name);
    snprintf(F->res->shard_file, sizeof F->res->shard_file, "%s/%s", F->res->dir, name);
    struct stat sb;
    if (stat(F->res->shard_file, &sb) == 0)
        PEAT_TRY(peat_store_open(F->res->shard_file, 1, &F->wstore));
    else
        PEAT_TRY(peat_store_create(F->res->shard_file, &F->meta, &F->wstore));
    peat_store_meta m;
    PEAT_TRY(peat_store_meta_get(F->wstore, &m));
    if (m.seed != F->meta.seed || strcmp(m.kernel, F->meta.kernel) || strcmp(m.flow, F->meta.flow))
        return PEAT_ERROR(PEAT_ERR_INVAL, "%s holds a shard of another campaign: remove it",
                          F->res->shard_file);
    return PEAT_OK;
}

static peat_status campaign_open(fi_run *F)
{
    const peat_fi_opts *o = F->o;
    if (!o->campaign) return PEAT_ERROR(PEAT_ERR_INVAL, "--campaign DIR is required");
    struct stat sb;
    char path[600];
    int is_dir = stat(o->campaign, &sb) == 0 && S_ISDIR(sb.st_mode);
    snprintf(F->res->dir, sizeof F->res->dir, "%s", o->campaign);
    if (is_dir)
        snprintf(path, sizeof path, "%s/campaign.h5", o->campaign);
    else {
        snprintf(path, sizeof path, "%s", o->campaign);
        char *slash = strrchr(F->res->dir, '/');
        if (slash)
            *slash = 0;
        else
            snprintf(F->res->dir, sizeof F->res->dir, ".");
    }
    size_t len = strlen(path);
    if (len > 8 && strcmp(path + len - 8, ".partial") == 0)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "%s is an unfinished campaign: finish it first (`peat run --resume DIR`)",
                          path);
    if (stat(path, &sb) != 0)
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "%s: no finished campaign (run `peat run` first)",
                          path);
    if (!S_ISREG(sb.st_mode)) return PEAT_ERROR(PEAT_ERR_INVAL, "%s is not a campaign file", path);
    /* a shard only reads the campaign: its trials go to its own file */
    PEAT_TRY(peat_store_open(path, !o->show && !o->shard, &F->store));
    PEAT_TRY(peat_store_meta_get(F->store, &F->meta));
    F->wstore = F->store;
    if (o->shard) PEAT_TRY(shard_open(F));
    F->seed = F->meta.seed;
    peat_fi_result *r = F->res;
    r->seed = F->meta.seed;
    snprintf(r->kernel, sizeof r->kernel, "%s", F->meta.kernel);
    snprintf(r->flow, sizeof r->flow, "%s", F->meta.flow);
    snprintf(r->argv, sizeof r->argv, "%s", F->meta.argv);
    return PEAT_OK;
}

/* The trials table; one of an older layout is named rather than overwritten. */
static peat_status table_open(fi_run *F)
{
    if (F->o->show && !peat_store_table_present(F->store, FI_TABLE))
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "%s: no fault-injection trials (run `peat inject`)",
                          F->res->dir);
    peat_status st = PEAT_OK;
    if (F->wstore != F->store && peat_store_table_exists(F->store, FI_TABLE))
        st = peat_store_table_open(F->store, FI_TABLE, cols, NCOL, &F->main_tab);
    if (st == PEAT_OK) st = peat_store_table_open(F->wstore, FI_TABLE, cols, NCOL, &F->tab);
    if (st == PEAT_ERR_FORMAT)
        return PEAT_ERROR(st,
                          "%s: " FI_TABLE " has another layout (written by an older peat): "
                          "inject into a fresh copy of the campaign",
                          F->res->dir);
    return st;
}

/* The replay of the recorded iterations and one flow per worker (not with --local-only). */
static peat_status prop_start(fi_run *F)
{
    if (F->o->local_only) return PEAT_OK;
    int64_t *it = malloc((size_t)(F->n_p + 1) * sizeof *it);
    if (!it) return PEAT_ERROR(PEAT_ERR_NOMEM, "fi: iterations");
    for (int64_t i = 0; i < F->n_p; i++) it[i] = F->p[i].r->iter;
    peat_status st = peat_fi_prop_alloc(&F->meta, it, F->n_p, &F->prop);
    free(it);
    for (int w = 0; st == PEAT_OK && w < F->res->threads; w++)
        st = peat_fi_prop_worker_alloc(F->prop, &F->pw[w]);
    F->res->propagated = st == PEAT_OK;
    F->res->prop_steps = peat_fi_prop_steps(F->prop);
    return st;
}

/* Expected trials in the smallest row of the finest table printed: per bit (1/32 of a series
 * drawing its bit) or per layer (each layer's share of the records). */
static double finest_row(const fi_run *F, int64_t n, const char **what)
{
    double least = (double)n;
    *what = "series";
    for (int64_t i = 0; i < F->n_p; i++) {
        int64_t same = 0;
        for (int64_t j = 0; j < F->n_p; j++) same += !strcmp(F->p[j].r->layer, F->p[i].r->layer);
        if ((double)n * same / F->n_p < least) least = (double)n * same / F->n_p, *what = "layer";
    }
    for (int i = 0; i < F->res->n_models; i++)
        if (strstr(F->res->models[i], "bit=-1") && n / 32.0 < least)
            least = n / 32.0, *what = "bit";
    return least;
}

static void plan_print(const fi_run *F, int64_t n)
{
    const peat_fi_opts *o = F->o;
    int64_t need = peat_inject_trials_for_margin(o->margin, o->confidence, 0);
    double z = peat_inject_z(o->confidence);
    const char *what;
    double row = finest_row(F, n, &what);
    fprintf(stdout,
            "peat inject: %d model(s) x %lld trials at site %s on %lld recorded calls%s%s, %d "
            "thread(s), %s\n  trials for +-%.1f%% at %.0f%%: %lld per rate; a series of %lld "
            "gives +-%.1f%%, its smallest %s row (~%.0f trials) +-%.1f%% (worst case p = 1/2)\n",
            F->res->n_models, (long long)n, peat_inject_site_name(F->site), (long long)F->n_p,
            F->res->select[0] ? " selected by " : "", F->res->select, F->res->threads,
            o->local_only ? "local view only" : "local and propagated views", 100 * o->margin,
            100 * o->confidence, (long long)need, (long long)n, 100 * z * 0.5 / sqrt((double)n),
            what, row, 100 * z * 0.5 / sqrt(row > 1 ? row : 1));
    if (F->shard.n > 1)
        fprintf(stdout, "  this is shard %d/%d: trials #%d, #%d, ... of each model, into %s\n",
                F->shard.i, F->shard.n, F->shard.i, F->shard.i + F->shard.n, F->res->shard_file);
}

/* Shows the series the file holds (--show): nothing run, nothing written. */
static peat_status fi_show(fi_run *F)
{
    PEAT_TRY(campaign_open(F));
    PEAT_TRY(table_open(F));
    return trials_collect(F);
}

static peat_status fi_campaign(fi_run *F, peat_inject_model_t **m)
{
    const peat_fi_opts *o = F->o;
    PEAT_TRY(campaign_open(F));
    PEAT_TRY(peat_inject_site_parse(o->site ? o->site : "output", &F->site));
    snprintf(F->res->site, sizeof F->res->site, "%s", peat_inject_site_name(F->site));
    PEAT_TRY(select_string(o, F->res->select, sizeof F->res->select));
    int64_t n =
        o->trials > 0 ? o->trials : peat_inject_trials_for_margin(o->margin, o->confidence, 0);
    if (n < 1 || n > 100000000)
        return PEAT_ERROR(PEAT_ERR_INVAL, "--trials must be in 1..1e8 (or --margin in (0,1))");
    PEAT_TRY(table_open(F));
    if (o->shard) PEAT_TRY(peat_fi_shard_run_write(F->wstore, o, n, F->shard));
    if (o->from) { /* peat merge: nothing runs, every trial comes from a shard */
        PEAT_TRY(src_load(F));
        if (!o->from_partial) PEAT_TRY(src_complete(F, m, n));
        for (int i = 0; i < F->res->n_models; i++) PEAT_TRY(series_run(F, m[i], n));
        if (o->from_partial) return PEAT_OK;
        PEAT_TRY(records_load(F));
        F->res->n_records = F->n_p;
        for (int i = 0; i < F->res->n_models; i++) PEAT_TRY(signature_write(F, m[i], n));
        return trials_collect(F);
    }
    /* the whole trial is timed: loading and preparing records and the replay included */
    double t0 = peat_clock_now(), c0 = peat_latency_process_cpu_s();
    PEAT_TRY(records_load(F));
    F->res->n_records = F->n_p;
    if (!o->quiet) plan_print(F, n);
    PEAT_TRY(prop_start(F));
    for (int i = 0; i < F->res->n_models; i++) PEAT_TRY(series_run(F, m[i], n));
    F->res->t_run = peat_clock_now() - t0;
    F->res->t_cpu = peat_latency_process_cpu_s() - c0;
    F->res->trials_per_s = F->res->t_run > 0 ? (double)F->res->n_run / F->res->t_run : 0;
    /* a shard's signatures and reports are the merge's */
    for (int i = 0; !o->shard && i < F->res->n_models; i++) PEAT_TRY(signature_write(F, m[i], n));
    return trials_collect(F);
}

static peat_status reports_write(const peat_fi_result *r)
{
    const char *names[2] = {"fi-summary.md", "fi-report.html"};
    for (int k = 0; k < 2; k++) {
        char tmp[700];
        FILE *f = peat_report_open_tmp(r->dir, names[k], tmp, sizeof tmp);
        if (!f) return PEAT_ERROR(PEAT_ERR_IO, "cannot write %s: %s", tmp, peat_io_cause(errno));
        if (k == 0)
            peat_fi_markdown(f, r);
        else
            peat_fi_html(f, r);
        /* a full disk or a file-size limit is said as such (report.c) */
        PEAT_TRY(peat_report_commit(f, r->dir, names[k], tmp));
    }
    return PEAT_OK;
}

peat_status peat_fi_run(const peat_fi_opts *o, peat_fi_result *res)
{
    memset(res, 0, sizeof *res);
    PEAT_TRY(peat_runtime_builtin_init());
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    res->threads = o->threads > 0 ? o->threads : (int)(cpus > 0 ? (cpus < 64 ? cpus : 64) : 1);
    fi_run F = {.o = o, .res = res};
    res->show_all = o->show;
    res->pool = o->pool;
    peat_inject_model_t *m[PEAT_FI_MAX_MODELS] = {0};
    peat_status st = o->show ? PEAT_OK : models_parse(o->models, m, res);
    if (st == PEAT_OK) st = o->show ? fi_show(&F) : fi_campaign(&F, m);
    for (int i = 0; i < PEAT_FI_MAX_MODELS; i++) peat_inject_model_free(m[i]);
    for (int w = 0; w < 64; w++) peat_fi_prop_worker_free(F.pw[w]);
    peat_fi_prop_free(F.prop);
    peat_store_table_close(F.tab);
    peat_store_table_close(F.main_tab);
    peat_status wst = F.wstore != F.store ? peat_store_close(F.wstore) : PEAT_OK;
    peat_status cst = peat_store_close(F.store);
    prepared_free(F.p, F.n_p);
    free(F.src);
    if (st == PEAT_OK) st = cst;
    if (st == PEAT_OK) st = wst;
    if (st == PEAT_OK && !o->show && !o->shard && !o->from_partial) st = reports_write(res);
    return st;
}

void peat_fi_result_free(peat_fi_result *res)
{
    free(res->trials);
    for (int g = 0; g < PEAT_INJECT_GROUP_COUNT; g++) peat_inject_table_free(&res->tab[g]);
    memset(res, 0, sizeof *res);
}
