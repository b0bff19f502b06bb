/* probe.c: probe calls beyond the training data (analyzer/probe.h): each op's own shape and
 * value probes from its descriptor (core/ops/<op>.c), and the two ends of fp32's range on every
 * op through the inputs its descriptor names. */
#include "analyzer/probe.h"
#include "core/opdesc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *peat_analyzer_probe_kind_name(peat_probe_kind k)
{
    return k == PEAT_PROBE_SHAPE ? "shape" : "value";
}

void peat_analyzer_probe_set_free(peat_probe_set *s)
{
    for (int i = 0; i < s->n; i++)
        for (int k = 0; k < s->p[i].args.n_in; k++)
            peat_tensor_free((peat_tensor *)s->p[i].args.in[k]);
    free(s->p);
    memset(s, 0, sizeof *s);
}

static peat_probe *probe_add(peat_probe_set *s, peat_probe_kind kind, peat_probe_tag tag,
                             const char *label)
{
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 32;
        peat_probe *np = realloc(s->p, (size_t)cap * sizeof *np);
        if (!np) return NULL;
        s->p = np, s->cap = cap;
    }
    peat_probe *p = &s->p[s->n++];
    memset(p, 0, sizeof *p);
    p->kind = kind, p->tag = tag;
    snprintf(p->label, sizeof p->label, "%s", label);
    return p;
}

/* the sink an op's probe generator writes into */
static peat_args *sink_add(void *ctx, peat_probe_kind kind, peat_probe_tag tag, const char *label)
{
    peat_probe *p = probe_add(ctx, kind, tag, label);
    return p ? &p->args : NULL;
}

/* The inputs in mask scaled so that their largest magnitude is `to`. */
static peat_status scaled_inputs(peat_probe_sink *s, const peat_record *rec, peat_probe_tag tag,
                                 const char *label, unsigned mask, double to)
{
    peat_args *a = peat_op_probe_clone(s, rec, PEAT_PROBE_VALUE, tag, label);
    if (!a) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe %s", label);
    for (int k = 0; k < rec->n_in; k++) {
        if (!(mask >> k & 1u) || rec->in[k]->dtype != PEAT_DTYPE_F32) continue;
        double sc = to / peat_op_maxabs(rec->in[k]);
        float *x = peat_op_probe_f32(a, k);
        for (int64_t i = 0; i < peat_op_probe_numel(a, k); i++) x[i] = (float)(sc * (double)x[i]);
    }
    return PEAT_OK;
}

/* Every op's outputs pushed to the two ends of fp32's range through the inputs they scale
 * with (the descriptor's range_low) or that reach the large end (range_high): subnormal outputs
 * (a flush to zero anywhere shows), and values past fp16's 65504 (an fp16 intermediate
 * overflows; fp32 is far from its own limit). */
static peat_status range_ends(peat_probe_sink *s, const peat_op_desc *d, const peat_record *rec)
{
    if (d->range_low)
        PEAT_TRY(scaled_inputs(s, rec, PEAT_PROBE_TAG_SUBNORMAL,
                               "value subnormal outputs (inputs they scale with to 2^-130)",
                               d->range_low, 0x1p-130));
    if (!d->range_high) return PEAT_OK;
    return scaled_inputs(s, rec, PEAT_PROBE_TAG_OVERFLOW,
                         "value beyond fp16's range (inputs to 2^17 = 131072)", d->range_high,
                         0x1p17);
}

peat_status peat_analyzer_probe_set_make(const peat_record_list *recs, uint64_t seed,
                                         peat_probe_set *out)
{
    memset(out, 0, sizeof *out);
    if (!recs || recs->n == 0) return PEAT_OK;
    const peat_op_desc *d = peat_op_desc_get(recs->items[0]->op);
    if (!d) return PEAT_ERROR(PEAT_ERR_INVAL, "probes: op kind out of range");
    peat_probe_sink sink = {out, sink_add};
    peat_status st = d->probes(&sink, recs, seed);
    if (st == PEAT_OK) st = range_ends(&sink, d, recs->items[0]);
    if (st != PEAT_OK) peat_analyzer_probe_set_free(out);
    return st;
}
