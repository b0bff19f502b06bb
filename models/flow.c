/* flow.c: the flow interface: lookup, config defaults, state lists, optimizer updates, step loop.
 */
#include "models/flow_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const peat_models_flow_ops *const flow_table[] = {
    &peat_models_mlp_ops,         &peat_models_cnn_ops,   &peat_models_gpt_ops,
    &peat_models_gpt_unfused_ops, &peat_models_llama_ops, &peat_models_mlp_silu_ops,
    &peat_models_resnet_ops,
};
#define N_FLOWS ((int)(sizeof flow_table / sizeof flow_table[0]))

static const peat_models_flow_ops *flow_find(const char *name)
{
    for (int k = 0; k < N_FLOWS; k++)
        if (name && strcmp(flow_table[k]->name, name) == 0) return flow_table[k];
    return NULL;
}

const char *const *peat_models_flow_names(void)
{
    static const char *names[N_FLOWS + 1];
    for (int k = 0; k < N_FLOWS; k++) names[k] = flow_table[k]->name;
    names[N_FLOWS] = NULL;
    return names;
}

const char *peat_models_flow_describe(const char *name)
{
    const peat_models_flow_ops *o = flow_find(name);
    return o ? o->desc : NULL;
}

uint64_t peat_models_flow_op_mask_for(const char *name, const peat_flow_config *cfg)
{
    const peat_models_flow_ops *o = flow_find(name);
    if (!o) return 0;
    peat_optimizer opt = peat_models_flow_optimizer(name, cfg);
    uint64_t ops = o->ops;
    /* fp8: the linear layers' GEMMs are fp8 GEMMs (every flow has a linear layer) */
    if (cfg && cfg->precision == PEAT_PRECISION_FP8) {
        if (!o->gemm_beyond_linear) ops &= ~PEAT_OP_BIT(PEAT_OP_GEMM);
        ops |= PEAT_OP_BIT(PEAT_OP_GEMM_FP8);
    }
    return ops | PEAT_OP_BIT(opt == PEAT_OPTIM_SGD ? PEAT_OP_SGD : PEAT_OP_ADAMW);
}

peat_optimizer peat_models_flow_optimizer(const char *name, const peat_flow_config *cfg)
{
    const peat_models_flow_ops *o = flow_find(name);
    peat_optimizer opt = cfg ? cfg->optimizer : PEAT_OPTIM_DEFAULT;
    return opt != PEAT_OPTIM_DEFAULT ? opt : o ? o->def_optimizer : PEAT_OPTIM_ADAMW;
}

uint64_t peat_models_flow_op_mask(const char *name)
{
    return peat_models_flow_op_mask_for(name, NULL);
}

/* ---- parameters ------------------------------------------------------------------------- */

peat_status peat_models_tensor(peat_tensor **out, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    int64_t s[4] = {d0, d1, d2, d3};
    int nd = 1;
    while (nd < 4 && s[nd] > 0) nd++;
    return peat_tensor_alloc(PEAT_DTYPE_F32, nd, s, out);
}

peat_status peat_models_param_add(peat_flow_t *f, const char *name, int ndim, const int64_t *shape,
                                  int decay, peat_models_param **out)
{
    if (f->n_params == f->cap_params) {
        int cap = f->cap_params ? 2 * f->cap_params : 16;
        peat_models_param **np = realloc(f->params, (size_t)cap * sizeof *np);
        if (!np) return PEAT_ERROR(PEAT_ERR_NOMEM, "flow %s: parameter list", f->ops->name);
        f->params = np;
        f->cap_params = cap;
    }
    if (strlen(name) >= sizeof f->params[0]->name)
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "parameter name '%s' too long", name);
    peat_models_param *p = calloc(1, sizeof *p);
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "flow %s: parameter %s", f->ops->name, name);
    strcpy(p->name, name);
    p->decay = decay;
    /* listed before the tensor allocations so that free releases whatever was allocated */
    f->params[f->n_params++] = p;
    PEAT_TRY(peat_tensor_alloc(PEAT_DTYPE_F32, ndim, shape, &p->w));
    PEAT_TRY(peat_tensor_alloc(PEAT_DTYPE_F32, ndim, shape, &p->g));
    PEAT_TRY(peat_tensor_alloc(PEAT_DTYPE_F32, ndim, shape, &p->s1));
    if (f->cfg.optimizer == PEAT_OPTIM_ADAMW)
        PEAT_TRY(peat_tensor_alloc(PEAT_DTYPE_F32, ndim, shape, &p->s2));
    if (out) *out = p;
    return PEAT_OK;
}

void peat_models_param_init(peat_models_param *p, peat_rng_t *r, double sigma)
{
    peat_rng_fill_gaussian(r, p->w, sigma);
}

void peat_models_param_fill(peat_models_param *p, float v)
{
    float *w = peat_f32(p->w);
    for (int64_t i = 0; i < peat_tensor_numel(p->w); i++) w[i] = v;
}

uint64_t peat_models_hash(uint64_t seed, uint64_t a, uint64_t b)
{
    /* splitmix64 finalizer over a mix of the three words */
    uint64_t x = seed ^ (a * 0x9E3779B97F4A7C15ull) ^ (b * 0xC2B2AE3D27D4EB4Full);
    return peat_splitmix64(&x);
}

/* ---- state list ------------------------------------------------------------------------- */

static peat_status state_build(peat_flow_t *f)
{
    int per = f->cfg.optimizer == PEAT_OPTIM_ADAMW ? 3 : 2;
    int n = f->n_params * per;
    f->state = calloc((size_t)n, sizeof *f->state);
    f->state_names = calloc((size_t)n, sizeof *f->state_names);
    f->state_name_buf = calloc((size_t)n, sizeof *f->state_name_buf);
    if (!f->state || !f->state_names || !f->state_name_buf)
        return PEAT_ERROR(PEAT_ERR_NOMEM, "flow %s: state list", f->ops->name);
    int k = 0;
    /* all weights first, then each optimizer slot over all weights: a checkpoint of weights
     * only is a prefix of the list */
    for (int slot = 0; slot < per; slot++)
        for (int i = 0; i < f->n_params; i++, k++) {
            const peat_models_param *p = f->params[i];
            const char *pre = slot == 0                            ? ""
                              : f->cfg.optimizer == PEAT_OPTIM_SGD ? "sgd.mom."
                              : slot == 1                          ? "adam.m."
                                                                   : "adam.v.";
            snprintf(f->state_name_buf[k], sizeof f->state_name_buf[k], "%s%s", pre, p->name);
            f->state_names[k] = f->state_name_buf[k];
            f->state[k] = slot == 0 ? p->w : slot == 1 ? p->s1 : p->s2;
        }
    f->n_state = n;
    return PEAT_OK;
}

int peat_models_flow_state_count(const peat_flow_t *f)
{
    return f ? f->n_state : 0;
}

peat_tensor *peat_models_flow_state(peat_flow_t *f, int i, const char **name)
{
    if (!f || i < 0 || i >= f->n_state) {
        if (name) *name = NULL;
        return NULL;
    }
    if (name) *name = f->state_names[i];
    return f->state[i];
}

int64_t peat_models_flow_step_count(const peat_flow_t *f)
{
    return f ? f->step : 0;
}

void peat_models_flow_set_step(peat_flow_t *f, int64_t step)
{
    if (f && step >= 0) f->step = step;
}

peat_status peat_models_flow_state_copy(const peat_flow_t *from, peat_flow_t *to)
{
    if (!from || !to) return PEAT_ERROR(PEAT_ERR_INVAL, "state copy: NULL flow");
    if (from->ops != to->ops)
        return PEAT_ERROR(PEAT_ERR_INVAL, "state copy: flow %s into flow %s", from->ops->name,
                          to->ops->name);
    if (from->n_state != to->n_state)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "state copy: %d state tensors into %d (other optimizer?)",
                          from->n_state, to->n_state);
    /* check everything before writing anything, so a refused copy leaves `to` untouched */
    for (int i = 0; i < from->n_state; i++) {
        if (strcmp(from->state_names[i], to->state_names[i]) != 0)
            return PEAT_ERROR(PEAT_ERR_SHAPE, "state copy: tensor %d is '%s' here, '%s' there", i,
                              from->state_names[i], to->state_names[i]);
        if (peat_tensor_numel(from->state[i]) != peat_tensor_numel(to->state[i]))
            return PEAT_ERROR(PEAT_ERR_SHAPE, "state copy: '%s' has %lld elements, target %lld",
                              from->state_names[i], (long long)peat_tensor_numel(from->state[i]),
                              (long long)peat_tensor_numel(to->state[i]));
    }
    for (int i = 0; i < from->n_state; i++)
        memcpy(to->state[i]->data, from->state[i]->data, peat_tensor_nbytes(from->state[i]));
    to->step = from->step;
    return PEAT_OK;
}

/* ---- create / free ---------------------------------------------------------------------- */

peat_status peat_models_flow_alloc(const char *name, const peat_flow_config *cfg, peat_exec_t *ex,
                                   peat_flow_t **out)
{
    if (!out) return PEAT_ERROR(PEAT_ERR_INVAL, "flow create: out is NULL");
    *out = NULL;
    const peat_models_flow_ops *o = flow_find(name);
    if (!o) return PEAT_ERROR(PEAT_ERR_NOTFOUND, "unknown flow '%s'", name ? name : "(null)");
    if (!ex) return PEAT_ERROR(PEAT_ERR_INVAL, "flow %s: exec context is NULL", o->name);
    peat_flow_config c;
    memset(&c, 0, sizeof c);
    c.weight_decay = -1;
    if (cfg) c = *cfg;
    if (c.optimizer == PEAT_OPTIM_DEFAULT) c.optimizer = o->def_optimizer;
    if (c.batch < 0 || c.width < 0 || c.depth < 0 || c.seq < 0 || c.lr < 0 || c.task < 0 ||
        c.task > 1 || (c.optimizer != PEAT_OPTIM_ADAMW && c.optimizer != PEAT_OPTIM_SGD))
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "flow %s: bad config (batch %d width %d depth %d seq %d lr %g task %d "
                          "optimizer %d)",
                          o->name, c.batch, c.width, c.depth, c.seq, c.lr, c.task,
                          (int)c.optimizer);
    if (c.precision < 0 || c.precision >= PEAT_PRECISIONS || c.loss_scale_init < 0 ||
        !isfinite(c.loss_scale_init) || c.loss_scale_interval < 0)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "flow %s: bad precision config (precision %d, loss scale %g, growth "
                          "interval %d)",
                          o->name, c.precision, c.loss_scale_init, c.loss_scale_interval);
    if (c.batch > 4096 || c.width > 1024 || c.depth > 16 || c.seq > 256)
        return PEAT_ERROR(PEAT_ERR_INVAL, "flow %s: config too large for a validation flow",
                          o->name);
    const peat_models_preset *ps = peat_models_preset_get(o->name, c.size);
    if (!ps) return PEAT_ERROR(PEAT_ERR_INVAL, "flow %s: no size preset %d", o->name, c.size);
    if (!c.batch) c.batch = ps->batch ? ps->batch : o->def_batch;
    if (!c.width) c.width = ps->width ? ps->width : o->def_width;
    if (!c.depth) c.depth = ps->depth ? ps->depth : o->def_depth;
    if (!c.seq) c.seq = ps->seq ? ps->seq : o->def_seq;
    if (c.lr == 0) c.lr = c.optimizer == PEAT_OPTIM_SGD ? o->def_lr_sgd : o->def_lr_adamw;
    if (c.weight_decay < 0) c.weight_decay = c.optimizer == PEAT_OPTIM_SGD ? 5e-4 : 1e-2;
    if (c.loss_scale_init == 0) c.loss_scale_init = 65536.0;
    if (c.loss_scale_interval == 0) c.loss_scale_interval = 2000;

    peat_flow_t *f = calloc(1, sizeof *f);
    if (!f) return PEAT_ERROR(PEAT_ERR_NOMEM, "flow %s", o->name);
    f->ops = o;
    f->cfg = c;
    f->preset = ps;
    f->ex = ex;
    f->amp.scale = c.loss_scale_init;
    peat_status st = o->create(f);
    if (st == PEAT_OK) st = state_build(f);
    if (st != PEAT_OK) {
        peat_models_flow_free(f);
        return st;
    }
    *out = f;
    return PEAT_OK;
}

void peat_models_flow_free(peat_flow_t *f)
{
    if (!f) return;
    if (f->ops->destroy) f->ops->destroy(f);
    peat_models_amp_free(f);
    for (int i = 0; i < f->n_params; i++) {
        peat_tensor_free(f->params[i]->w);
        peat_tensor_free(f->params[i]->g);
        peat_tensor_free(f->params[i]->s1);
        peat_tensor_free(f->params[i]->s2);
        free(f->params[i]);
    }
    free(f->params);
    free(f->state);
    free(f->state_names);
    free(f->state_name_buf);
    free(f);
}

/* ---- step ------------------------------------------------------------------------------- */

/* One optimizer call per parameter tensor, outputs aliasing the inputs (allowed by the op). */
static peat_status optimizer_update(peat_flow_t *f)
{
    for (int i = 0; i < f->n_params; i++) {
        peat_models_param *p = f->params[i];
        peat_op_params op;
        memset(&op, 0, sizeof op);
        op.i[0] = peat_tensor_numel(p->w);
        double wd = p->decay ? f->cfg.weight_decay : 0.0;
        peat_args a;
        if (f->cfg.optimizer == PEAT_OPTIM_ADAMW) {
            op.i[1] = f->step + 1 - f->amp.skipped; /* a skipped step is no Adam step */
            op.f[0] = f->cfg.lr, op.f[1] = 0.9, op.f[2] = 0.999, op.f[3] = 1e-8, op.f[4] = wd;
            const peat_tensor *in[4] = {p->w, p->g, p->s1, p->s2};
            peat_tensor *out[3] = {p->w, p->s1, p->s2};
            a = peat_args_make(PEAT_OP_ADAMW, &op, 4, in, 3, out);
        } else {
            op.i[1] = f->cfg.nesterov != 0;
            op.f[0] = f->cfg.lr, op.f[1] = 0.9, op.f[2] = wd;
            const peat_tensor *in[3] = {p->w, p->g, p->s1};
            peat_tensor *out[2] = {p->w, p->s1};
            a = peat_args_make(PEAT_OP_SGD, &op, 3, in, 2, out);
        }
        PEAT_TRY(peat_exec_op(f->ex, p->name, PEAT_PHASE_OPT, &a));
    }
    return PEAT_OK;
}

peat_status peat_models_flow_step(peat_flow_t *f, peat_flow_metrics *m)
{
    if (!f) return PEAT_ERROR(PEAT_ERR_INVAL, "flow step: NULL flow");
    peat_exec_set_iter(f->ex, f->step);
    double loss = NAN, scale = peat_models_amp_loss_scale(f);
    PEAT_TRY(f->ops->train(f, &loss));
    /* amp-fp16: gradients unscaled; inf or nan in one skips the optimizer step */
    int skipped = peat_models_amp_unscale_update(f);
    if (!skipped) PEAT_TRY(optimizer_update(f));
    f->step++;
    if (m) {
        m->loss = loss;
        m->accuracy = NAN;
        m->step = f->step;
        m->loss_scale = scale;
        m->skipped = skipped;
    }
    /* a non-finite loss is an outcome (runtime fault injection measures divergence), not an
     * error of the flow: the caller reads it from m */
    return PEAT_OK;
}

peat_status peat_models_flow_eval(peat_flow_t *f, peat_flow_metrics *m)
{
    if (!f) return PEAT_ERROR(PEAT_ERR_INVAL, "flow eval: NULL flow");
    double loss = NAN, acc = NAN;
    PEAT_TRY(f->ops->eval(f, &loss, &acc));
    if (m) {
        m->loss = loss;
        m->accuracy = acc;
        m->step = f->step;
        m->loss_scale = peat_models_amp_loss_scale(f);
        m->skipped = 0;
    }
    return PEAT_OK;
}
