/* stage_profile.c: the profile stage: trains the golden flow, recording a spread sample of the
 * op's calls (and the activations, metrics and checkpoints asked for) into the campaign file. */
#include "harness/runtime/golden_log.h"
#include "harness/campaign/progress.h"
#include "harness/campaign/stages.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    peat_record_list *list; /* records of the candidate's op, for playback (NULL: keep none) */
    peat_store_t *store;
    peat_op_kind keep_op;
    int64_t skipped_existing, stored;
    int64_t differ;       /* kept records their regeneration does not reproduce (resume) */
    uint64_t differ_id;   /* the first of them */
    char differ_what[64]; /* and which of its tensors */
} profile_sink;

/* Writes a record to the store unless a resumed file has it (then the regenerated record must
 * be the stored one: the flow is deterministic); keeps those of the candidate's op in memory
 * for playback. */
static peat_status sink_both(void *user, peat_record *r)
{
    profile_sink *ps = user;
    if (peat_store_call_has(ps->store, r->id)) {
        ps->skipped_existing++;
        char what[64];
        if (peat_store_call_same(ps->store, r, what, sizeof what) == 0 && !ps->differ++) {
            ps->differ_id = r->id;
            snprintf(ps->differ_what, sizeof ps->differ_what, "%s", what);
        }
    } else {
        peat_status st = peat_store_call_write(ps->store, r);
        if (st != PEAT_OK) {
            peat_record_free(r);
            return st;
        }
        ps->stored++;
    }
    if (!ps->list || r->op != ps->keep_op) {
        peat_record_free(r);
        return PEAT_OK;
    }
    return peat_record_list_sink(ps->list, r);
}

typedef struct {
    const char *spec;
    int64_t iters;
} iter_sel;

static int iter_selected(void *user, int64_t it)
{
    iter_sel *s = user;
    return peat_iter_spec_match(s->spec, it, s->iters);
}

/* Which calls are recorded: the ops, phases and window asked for; every k-th call with
 * --record-every, otherwise --calls spread over the strata of the run
 * (harness/campaign/coverage.h). */
static peat_status record_policy(const peat_campaign *c, const peat_flow_config *cfg,
                                 peat_profile_policy *pol)
{
    const peat_campaign_opts *o = c->o;
    memset(pol, 0, sizeof *pol);
    if (o->record_ops) PEAT_TRY(peat_campaign_op_mask_parse(o->record_ops, &pol->op_mask));
    pol->op_mask |=
        PEAT_OP_BIT(c->k->op); /* the candidate's op is always recorded: playback needs it */
    PEAT_TRY(peat_campaign_phase_parse(o->record_phase, &pol->fwd, &pol->bwd, &pol->opt));
    int64_t window = (o->record_iter_hi > 0 ? o->record_iter_hi : c->iters) - o->record_iter_lo;
    pol->max_calls = c->calls;
    if (o->record_every > 0) {
        pol->every_k = o->record_every;
    } else {
        /* stratified (harness/campaign/coverage.h): each (op, layer, phase, shapes, dtype) its
         * share */
        PEAT_TRY(
            peat_campaign_coverage_plan(c->flow, cfg, pol, window, c->calls, &c->res->coverage));
        pol->max_calls = c->res->coverage.cap; /* --calls per recorded op */
        pol->call_filter = peat_campaign_coverage_filter;
        pol->call_filter_user = &c->res->coverage;
    }
    pol->iter_lo = o->record_iter_lo;
    pol->iter_hi = o->record_iter_hi;
    return PEAT_OK;
}

/* Activations: the outputs of every forward op at the iterations asked for. */
static peat_profile_policy activation_policy(iter_sel *sel)
{
    peat_profile_policy apol;
    memset(&apol, 0, sizeof apol);
    apol.fwd = 1;
    apol.every_k = 1;
    apol.iter_filter = iter_selected;
    apol.iter_filter_user = sel;
    return apol;
}

/* Trains for the campaign's iterations (metrics and checkpoints into the store), then
 * evaluates on held-out data. */
static peat_status train(peat_campaign *c, peat_flow_t *f, const peat_flow_config *cfg,
                         peat_runtime_golden_log *gl)
{
    peat_campaign_result *res = c->res;
    const char *ckpt = c->o->checkpoint_iters ? c->o->checkpoint_iters : "last";
    peat_campaign_amp_log amp;
    peat_status st = peat_campaign_amp_begin(c, cfg, &amp);
    peat_progress pr;
    peat_campaign_progress_begin(&pr, stdout, c->o->quiet, "profile", c->iters);
    for (int64_t it = 0; st == PEAT_OK && it < c->iters; it++) {
        peat_campaign_progress_step(&pr, it, NULL);
        peat_flow_metrics m;
        st = peat_models_flow_step(f, &m);
        /* amp-fp16: an overflow the scaler skipped is its business, not divergence */
        if (st == PEAT_OK && !isfinite(m.loss) && !m.skipped)
            st = PEAT_ERROR(PEAT_ERR_NUMERIC, "golden training diverged: loss %g at iteration %lld",
                            m.loss, (long long)it);
        if (st == PEAT_OK) peat_runtime_golden_log_append(gl, m.loss);
        if (it == 0) res->loss_first = m.loss;
        res->loss_last = m.loss;
        if (st == PEAT_OK && !peat_store_metrics_has(c->store, it))
            st = peat_store_metrics_append(c->store, it, m.loss, m.accuracy);
        if (st == PEAT_OK) st = peat_campaign_amp_step(&amp, it, &m);
        if (st == PEAT_OK && peat_iter_spec_match(ckpt, it, c->iters)) {
            if (!peat_store_state_has(c->store, it, "checkpoint"))
                st = peat_campaign_checkpoint_save(c->store, it, f);
            res->n_checkpoints++;
        }
    }
    peat_campaign_amp_end(c, &amp);
    if (st != PEAT_OK) return st;
    peat_campaign_progress_step(&pr, c->iters, NULL);
    peat_campaign_progress_end(&pr);
    peat_flow_metrics m;
    st = peat_models_flow_eval(f, &m);
    res->eval_loss = m.loss;
    res->eval_accuracy = m.accuracy;
    return st;
}

/* Fractions of nonzero float input values below the smallest normal and above the largest finite
 * value of the kernel's declared input format (left NaN when it is not a narrow float format):
 * the detector cannot see the inputs, so the runner measures this for it. */
static void measure_input_range(peat_campaign *c)
{
    double lo, hi;
    if (c->k->in_dtype == PEAT_DTYPE_F16)
        lo = 0x1p-14, hi = 65504.0;
    else if (c->k->in_dtype == PEAT_DTYPE_BF16)
        lo = 0x1p-126, hi = 3.3895313892515355e38;
    else
        return;
    int64_t n = 0, below = 0, above = 0;
    for (int64_t i = 0; i < c->recs.n; i++)
        for (int k = 0; k < c->recs.items[i]->n_in; k++) {
            const peat_tensor *t = c->recs.items[i]->in[k];
            if (t->dtype != PEAT_DTYPE_F32) continue;
            const float *x = peat_f32(t);
            for (int64_t e = 0; e < peat_tensor_numel(t); e++) {
                double a = fabs((double)x[e]);
                if (a == 0.0) continue;
                n++;
                below += a < lo;
                above += a > hi;
            }
        }
    if (n > 0)
        c->in_frac_below_normal = (double)below / (double)n,
        c->in_frac_above_max = (double)above / (double)n;
}

/* The golden log's most bytes: past them the runtime trains its golden run again. */
#define GOLDEN_LOG_MAX ((uint64_t)8 << 30)

/* Attaches the profilers, builds the flow (from a checkpoint when finetuning) and trains; the
 * training kept for the runtime stage (c->golden) when it can use it. */
static peat_status record_run(peat_campaign *c, peat_profiler_t *prof, peat_profiler_t *aprof,
                              const peat_flow_config *cfg)
{
    peat_exec_t *ex = NULL;
    peat_flow_t *f = NULL;
    peat_status st = peat_exec_alloc(c->flow, c->o->seed, &ex);
    /* a device kernel is validated inside a flow that runs on its device (device goldens) */
    if (st == PEAT_OK) st = peat_exec_set_backend(ex, c->k->backend);
    if (st == PEAT_OK) st = peat_profiler_attach(prof, ex);
    if (st == PEAT_OK && aprof) st = peat_profiler_attach(aprof, ex);
    if (st == PEAT_OK) st = peat_models_flow_alloc(c->flow, cfg, ex, &f);
    if (st == PEAT_OK && c->o->finetune_from)
        st = peat_campaign_checkpoint_load(c->o->finetune_from, f);
    peat_runtime_golden_log *gl = NULL;
    if (st == PEAT_OK && peat_campaign_golden_log_wanted(c->o, c->k))
        st = peat_runtime_golden_log_open(f, c->res->out_dir, c->iters, GOLDEN_LOG_MAX, &gl);
    if (st == PEAT_OK) st = train(c, f, cfg, gl);
    if (st == PEAT_OK && gl) {
        peat_runtime_golden_log_keep(gl, f, ex); /* the log owns them now */
        c->golden = gl;
        return PEAT_OK;
    }
    peat_runtime_golden_log_free(gl);
    peat_models_flow_free(f);
    peat_exec_free(ex);
    return st;
}

/* A resumed run whose regenerated records differ from the kept ones (which pass their own
 * hashes) is not deterministic: said on stderr, the kept records are the interrupted run's. */
static void nondeterminism_say(const profile_sink *ps)
{
    if (ps->differ == 0) return;
    fprintf(stderr,
            "peat: --resume: %lld of the %lld kept records differ from their regeneration "
            "(first: call id %llu, %s): the flow is not deterministic here; the kept records are "
            "the interrupted run's\n",
            (long long)ps->differ, (long long)ps->skipped_existing,
            (unsigned long long)ps->differ_id, ps->differ_what);
}

/* The profile an earlier campaign of the same key trained (golden_cache.h): the open stage
 * copied its file; its records, results and golden log are taken from the entry. */
static peat_status profile_from_cache(peat_campaign *c)
{
    if (!c->o->quiet) printf("profile: from the golden cache (%s)\n", c->gcache.dir);
    peat_status st = peat_campaign_golden_cache_profile_take(c);
    peat_status cst = peat_store_close(c->store);
    c->store = NULL;
    if (st == PEAT_OK) st = cst;
    if (st != PEAT_OK) return st;
    c->res->n_records = c->recs.n;
    snprintf(c->res->golden_cache, sizeof c->res->golden_cache, "profile from the golden cache");
    measure_input_range(c);
    return PEAT_OK;
}

peat_status peat_campaign_stage_profile(peat_campaign *c)
{
    PEAT_ASSERT(c->k && c->flow,
                "profile runs after resolve (stage order: harness/run/pipeline.c)");
    const peat_campaign_opts *o = c->o;
    if (o->capture) return peat_campaign_capture_import(c);
    if (c->gcache.hit) return profile_from_cache(c);
    peat_flow_config cfg = peat_campaign_flow_config(o);
    peat_profile_policy pol;
    PEAT_TRY(record_policy(c, &cfg, &pol));
    iter_sel act_sel = {o->activation_iters, c->iters};
    peat_profile_policy apol = activation_policy(&act_sel);
    int want_acts = o->activation_iters && strcmp(o->activation_iters, "none") != 0;
    /* activations are stored, not replayed */
    profile_sink ps = {&c->recs, c->store, c->k->op, 0, 0, 0, 0, ""},
                 acts = {NULL, c->store, 0, 0, 0, 0, 0, ""};
    peat_profiler_t *prof = peat_profiler_new(&pol, sink_both, &ps);
    peat_profiler_t *aprof = want_acts ? peat_profiler_new(&apol, sink_both, &acts) : NULL;
    peat_status st = PEAT_OK;
    if (!prof || (want_acts && !aprof)) st = PEAT_ERROR(PEAT_ERR_NOMEM, "profiler");
    if (st == PEAT_OK) st = record_run(c, prof, aprof, &cfg);
    peat_profiler_free(prof);
    peat_profiler_free(aprof);
    /* the records are in the file: later stages that add to it reopen it */
    peat_status cst = peat_store_close(c->store);
    c->store = NULL;
    if (st == PEAT_OK) st = cst;
    c->res->n_records = c->recs.n;
    c->res->n_activation_records = acts.stored + acts.skipped_existing;
    c->res->n_stored_records = ps.stored + acts.stored;
    if (st != PEAT_OK) return st;
    nondeterminism_say(&ps);
    nondeterminism_say(&acts);
    if (c->recs.n == 0)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "no %s calls were recorded in flow %s (check the --record-* window)",
                          peat_op_name(c->k->op), c->flow);
    measure_input_range(c);
    if (c->gcache.on) {
        peat_campaign_golden_cache_profile_put(c);
        snprintf(c->res->golden_cache, sizeof c->res->golden_cache, "stored in the golden cache");
    } else if (c->gcache.why[0]) {
        snprintf(c->res->golden_cache, sizeof c->res->golden_cache, "not used: %s", c->gcache.why);
    }
    return PEAT_OK;
}
