/* stage_capture.c: `peat run --capture FILE`: the calls captured from PyTorch (python/peat_torch)
 * take the place of a built-in flow: resolve reads the model and run size from the file, and
 * profile imports its calls instead of training (docs/pytorch.md). */
#include "harness/campaign/stages.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Counts the captured calls of op and the last iteration they come from. */
static peat_status capture_count(peat_store_t *s, peat_op_kind op, int64_t *n, int64_t *last_iter)
{
    *n = 0, *last_iter = -1;
    for (int64_t i = 0; i < peat_store_call_count(s); i++) {
        peat_record h;
        PEAT_TRY(peat_store_call_header(s, i, &h));
        if (h.iter > *last_iter) *last_iter = h.iter;
        *n += h.op == op;
    }
    return PEAT_OK;
}

peat_status peat_campaign_capture_resolve(peat_campaign *c)
{
    const peat_campaign_opts *o = c->o;
    if (o->flow)
        return PEAT_ERROR(PEAT_ERR_INVAL, "--capture replaces the flow: drop --flow %s", o->flow);
    if (o->finetune_from)
        return PEAT_ERROR(PEAT_ERR_INVAL, "--capture replays recorded calls: no --finetune-from");
    if (o->precision && strcmp(o->precision, "fp32") != 0)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "--capture replays the calls as PyTorch ran them (their dtypes "
                          "recorded): no --precision %s",
                          o->precision);
    peat_store_t *s = NULL;
    PEAT_TRY(peat_store_open(o->capture, 0, &s));
    peat_store_meta m;
    int64_t n = 0, last = -1;
    peat_campaign_result *res = c->res;
    peat_status st = peat_store_meta_get(s, &m);
    if (st == PEAT_OK) st = capture_count(s, c->k->op, &n, &last);
    if (st == PEAT_OK)
        st = peat_store_capture_unmapped_list(
            s, res->capture_unmapped, sizeof res->capture_unmapped, &res->capture_n_unmapped);
    peat_store_close(s);
    PEAT_TRY(st);
    /* the aten ops the capture left unmapped are the likely reason (torch's _safe_softmax was
     * one, before it was mapped): named, not guessed over */
    if (n == 0 && res->capture_n_unmapped > 0)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "%s holds no %s calls (the op of kernel '%s'); the capture left %d aten "
                          "op%s unmapped, most calls first: %.300s",
                          o->capture, peat_op_name(c->k->op), c->k->name, res->capture_n_unmapped,
                          res->capture_n_unmapped == 1 ? "" : "s", res->capture_unmapped);
    if (n == 0)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "%s holds no %s calls (the op of kernel '%s') and no unmapped op: the "
                          "model makes none, or it was captured without it (ops=[\"%s\"] "
                          "records it)",
                          o->capture, peat_op_name(c->k->op), c->k->name, peat_op_name(c->k->op));
    snprintf(c->capture_flow, sizeof c->capture_flow, "%s", m.flow);
    c->flow = c->capture_flow;
    snprintf(c->res->flow, sizeof c->res->flow, "%s", c->flow);
    c->iters = m.iters > last ? m.iters : last + 1;
    c->calls = o->calls > 0 && o->calls < n ? o->calls : n;
    return PEAT_OK;
}

/* bf16 and f16 tensors as their f32 values: the kernels compute on f32 storage (plugin.h). */
static peat_status widen(peat_tensor **t)
{
    if (!*t || ((*t)->dtype != PEAT_DTYPE_BF16 && (*t)->dtype != PEAT_DTYPE_F16)) return PEAT_OK;
    peat_tensor *w = NULL;
    PEAT_TRY(peat_tensor_alloc(PEAT_DTYPE_F32, (*t)->ndim, (*t)->shape, &w));
    for (int64_t e = 0; e < peat_tensor_numel(w); e++)
        peat_f32(w)[e] = (float)peat_tensor_get(*t, e);
    peat_tensor_free(*t);
    *t = w;
    return PEAT_OK;
}

/* Copies record i into the campaign file, and keeps it (widened) when it is of the kernel's op
 * and playback still wants calls. */
static peat_status import_one(peat_campaign *c, peat_store_t *src, int64_t i)
{
    peat_record *r = NULL;
    PEAT_TRY(peat_store_call_read(src, i, &r));
    peat_status st = peat_store_call_write(c->store, r);
    if (st == PEAT_OK) c->res->n_stored_records++;
    if (st != PEAT_OK || r->op != c->k->op || c->recs.n >= c->calls) {
        peat_record_free(r);
        return st;
    }
    for (int k = 0; st == PEAT_OK && k < PEAT_MAX_IO; k++) {
        st = widen(&r->in[k]);
        if (st == PEAT_OK) st = widen(&r->golden[k]);
    }
    if (st != PEAT_OK) {
        peat_record_free(r);
        return st;
    }
    return peat_record_list_sink(&c->recs, r);
}

/* The captured loss curve into the campaign file and the result. */
static peat_status import_metrics(peat_campaign *c, peat_store_t *src)
{
    int64_t n = peat_store_metrics_count(src);
    c->res->loss_first = c->res->loss_last = c->res->eval_loss = c->res->eval_accuracy = NAN;
    for (int64_t i = 0; i < n; i++) {
        int64_t it;
        double loss, acc;
        PEAT_TRY(peat_store_metrics_read(src, i, &it, &loss, &acc));
        PEAT_TRY(peat_store_metrics_append(c->store, it, loss, acc));
        if (i == 0) c->res->loss_first = loss;
        c->res->loss_last = loss;
    }
    return PEAT_OK;
}

peat_status peat_campaign_capture_import(peat_campaign *c)
{
    peat_store_t *src = NULL;
    PEAT_TRY(peat_store_open(c->o->capture, 0, &src));
    peat_status st = PEAT_OK;
    for (int64_t i = 0; st == PEAT_OK && i < peat_store_call_count(src); i++)
        st = import_one(c, src, i);
    if (st == PEAT_OK) st = import_metrics(c, src);
    peat_store_close(src);
    peat_status cst = peat_store_close(c->store);
    c->store = NULL;
    if (st == PEAT_OK) st = cst;
    c->res->n_records = c->recs.n;
    if (st != PEAT_OK) return st;
    if (!c->o->quiet) {
        const char *model = strncmp(c->flow, "torch:", 6) ? c->flow : c->flow + 6;
        fprintf(stdout,
                "peat: states from PyTorch: model %s, %lld %s calls captured in %s (layers: module "
                "paths, e.g. %s), no profile stage\n",
                model, (long long)c->recs.n, peat_op_name(c->k->op), c->o->capture,
                c->recs.n ? c->recs.items[0]->layer : "-");
    }
    return PEAT_OK;
}
