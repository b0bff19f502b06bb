/* stage_probe.c: the probe stage of `peat run`: crafted shapes and values beyond the training
 * data, each run through exact, golden and candidate and judged like a recorded call, plus the
 * GEMM arithmetic-property call (analyzer/probe.h). */
#include "harness/isolate/isolate.h"
#include "peat/backend.h"
#include "harness/scale/ranks.h"
#include "harness/scale/scale.h"
#include "harness/campaign/stages.h"

#include "golden/golden.h"

#include <stdio.h>

#define TINY_PROBE 256 /* outputs below which a probe's statistics say nothing */
#include <stdlib.h>
#include <string.h>

/* Exact (F64) and golden (F32) outputs of a probe call, allocated into e and g. */
static peat_status reference_outputs(const peat_args *in, peat_args *e, peat_args *g)
{
    const peat_kernel *ek = peat_registry_role(in->op, PEAT_ROLE_EXACT, PEAT_BACKEND_HOST);
    const peat_kernel *gk = peat_registry_role(in->op, PEAT_ROLE_GOLDEN, PEAT_BACKEND_HOST);
    if (!ek || !gk)
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "no exact/golden %s", peat_op_name(in->op));
    *e = *in, *g = *in;
    e->n_out = g->n_out = 0;
    PEAT_TRY(peat_op_alloc_outputs(e, PEAT_DTYPE_F64));
    PEAT_TRY(peat_op_alloc_outputs(g, PEAT_DTYPE_F32));
    PEAT_TRY(peat_kernel_run(ek, e));
    return peat_kernel_run(gk, g);
}

static void outcome_failed(peat_probe_outcome *po, const char *why)
{
    peat_finding *f = &po->f;
    memset(f, 0, sizeof *f);
    f->cls = PEAT_FIND_OUT_OF_BOUND, f->accept = PEAT_ACCEPT_FAIL, f->confidence = 1.0;
    snprintf(f->params, sizeof f->params, "failed");
    snprintf(f->evidence[0], sizeof f->evidence[0], "the kernel failed on this probe: %.200s", why);
    f->n_evidence = 1;
}

/* The edge region of the candidate's first output (in its plane along the op's axes). */
static peat_status edge_of(const peat_args *c, const peat_args *e, peat_edge_region *r)
{
    const peat_tensor *x = e->out[0];
    int64_t n = peat_tensor_numel(x), rows, cols;
    peat_campaign_playback_plane(c, 0, x, &rows, &cols);
    double *mag = malloc((size_t)n * sizeof *mag);
    if (!mag) return PEAT_ERROR(PEAT_ERR_NOMEM, "magnitudes");
    peat_status st = peat_golden_magnitude(c, 0, x, mag);
    int64_t depth = peat_op_info_get(c->op)->depth(&c->p);
    if (st == PEAT_OK) st = peat_analyzer_edge_region(c->out[0], x, mag, depth, rows, cols, r);
    free(mag);
    return st;
}

/* Adds output o of a probe call to both accumulators (as playback does, without its plots). */
static peat_status feed(peat_analyzer_acc_t *ac, peat_analyzer_acc_t *ag, const peat_args *in,
                        int o, const peat_tensor *test, const peat_tensor *golden,
                        const peat_tensor *exact)
{
    int64_t n = peat_tensor_numel(exact);
    double *mag = malloc((size_t)n * sizeof *mag);
    if (!mag) return PEAT_ERROR(PEAT_ERR_NOMEM, "magnitude buffer");
    peat_status st = peat_golden_magnitude(in, o, exact, mag);
    int64_t rows, cols, depth = peat_op_info_get(in->op)->depth(&in->p);
    peat_campaign_playback_plane(in, o, exact, &rows, &cols);
    int64_t terms = peat_golden_terms(in, o);
    const peat_tensor *x = in->n_in > 0 && peat_tensor_numel(in->in[0]) == n ? in->in[0] : NULL;
    if (st == PEAT_OK)
        st = peat_analyzer_acc_add_terms(ac, test, exact, mag, depth, terms, rows, cols, x);
    if (st == PEAT_OK)
        st = peat_analyzer_acc_add_terms(ag, golden, exact, mag, depth, terms, rows, cols, x);
    free(mag);
    return st;
}

/* Judges the candidate's outputs c against golden g and exact e: both signatures, the detector's
 * primary finding into po. */
peat_status peat_campaign_probe_judge(const peat_kernel *k, const peat_args *c, const peat_args *g,
                                      const peat_args *e, const peat_detector_ctx *ctx,
                                      peat_probe_outcome *po, peat_signature *sc_out,
                                      peat_signature *sg_out)
{
    const peat_kernel *gk = peat_registry_role(c->op, PEAT_ROLE_GOLDEN, PEAT_BACKEND_HOST);
    peat_analyzer_acc_t *ac = peat_analyzer_acc_new(k->name, c->op);
    peat_analyzer_acc_t *ag = peat_analyzer_acc_new(gk->name, c->op);
    peat_status st = ac && ag ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "probe analyzer");
    for (int o = 0; o < c->n_out && st == PEAT_OK; o++)
        st = feed(ac, ag, c, o, c->out[o], g->out[o], e->out[o]);
    if (st == PEAT_OK) st = edge_of(c, e, &po->edge);
    peat_signature sc, sg;
    if (st == PEAT_OK) st = peat_analyzer_signature(ac, &sc);
    if (st == PEAT_OK) st = peat_analyzer_signature(ag, &sg);
    peat_finding f[8];
    if (st == PEAT_OK && peat_detector_run(&sc, &sg, ctx, f, 8) > 0) po->f = f[0];
    /* a probe with a handful of outputs supports no statistical rule, and one wrong element is
     * half of it: only structure, NaN, range and flushes may fail it */
    peat_finding_class k2 = po->f.cls;
    if (st == PEAT_OK && sc.n_elems < TINY_PROBE && po->f.accept == PEAT_ACCEPT_FAIL &&
        k2 != PEAT_FIND_TILE && k2 != PEAT_FIND_NAN && k2 != PEAT_FIND_RANGE && k2 != PEAT_FIND_FTZ)
        po->f.accept = PEAT_ACCEPT_WARN;
    /* within-bound statistical patterns (a low-bit imbalance, a rounding bias, smooth or
     * proportional noise) assume many independent errors; a probe's rows share their
     * statistics (one mean, one rstd), so these are judged on the recorded calls only */
    int lowbit = k2 == PEAT_FIND_STUCK_BIT && !strstr(po->f.params, "stride");
    /* a flush seen in fewer than 4 elements of a probe is one wrong element, not a mode */
    long long nftz = 0;
    if (k2 == PEAT_FIND_FTZ && sscanf(po->f.params, "n=%lld", &nftz) == 1 && nftz < 4)
        po->f.accept = PEAT_ACCEPT_WARN;
    if (st == PEAT_OK && po->f.accept == PEAT_ACCEPT_FAIL &&
        (lowbit || k2 == PEAT_FIND_TRUNCATION || k2 == PEAT_FIND_NOISE || k2 == PEAT_FIND_APPROX))
        po->f.accept = PEAT_ACCEPT_WARN;
    /* ... and so is a precision that is fp32's or better with every element within the bound:
     * only a ratio to the golden's errors, which on a probe's values may share one rounded
     * scalar (AdamW's 1 - b2 from an fp32 b2 on huge gradients, where v' is that term alone) */
    if (st == PEAT_OK && po->f.accept == PEAT_ACCEPT_FAIL && k2 == PEAT_FIND_REDUCED_PRECISION &&
        sc.max_norm <= 1.0 && sc.eff_bits >= 24.0)
        po->f.accept = PEAT_ACCEPT_WARN;
    po->eff_bits = sc.eff_bits, po->golden_eff_bits = sg.eff_bits;
    if (st == PEAT_OK && sc_out) *sc_out = sc;
    if (st == PEAT_OK && sg_out) *sg_out = sg;
    peat_analyzer_acc_free(ac);
    peat_analyzer_acc_free(ag);
    return st;
}

peat_status peat_campaign_probe_call(const peat_campaign_opts *o, const peat_kernel *k,
                                     const peat_args *in, peat_args *c, peat_args *g, peat_args *e,
                                     char *why, size_t n)
{
    *c = *in;
    c->n_out = 0;
    e->n_out = g->n_out = 0;
    peat_status st = reference_outputs(in, e, g);
    if (st == PEAT_OK) st = peat_isolate_outputs_alloc(c, g->out, g->n_out);
    if (st == PEAT_OK) st = peat_isolate_run(k, c, o->isolate, o->kernel_timeout_s, why, n);
    return st;
}

void peat_campaign_probe_call_free(peat_args *c, peat_args *g, peat_args *e)
{
    peat_isolate_outputs_free(c);
    peat_args_free_outputs(e);
    peat_args_free_outputs(g);
}

peat_status peat_campaign_stage_probe_one(const peat_campaign_opts *o, const peat_kernel *k,
                                          const peat_probe *p, const peat_detector_ctx *ctx,
                                          peat_probe_outcome *po)
{
    snprintf(po->label, sizeof po->label, "%s", p->label);
    po->kind = p->kind, po->tag = p->tag;
    peat_args e, g, c;
    char why[256];
    peat_status st = peat_campaign_probe_call(o, k, &p->args, &c, &g, &e, why, sizeof why);
    if (st == PEAT_ERR_KERNEL)
        outcome_failed(po, why), st = PEAT_OK;
    else if (st == PEAT_OK)
        st = peat_campaign_probe_judge(k, &c, &g, &e, ctx, po, NULL, NULL);
    peat_campaign_probe_call_free(&c, &g, &e);
    return st;
}

peat_status peat_campaign_stage_probe_props(const peat_campaign_opts *o, const peat_kernel *k,
                                            peat_campaign_result *res)
{
    peat_args in, e, g;
    PEAT_TRY(peat_analyzer_gemm_props_call(&in));
    peat_args c = in;
    c.n_out = 0;
    peat_status st = reference_outputs(&in, &e, &g);
    if (st == PEAT_OK) st = peat_isolate_outputs_alloc(&c, g.out, g.n_out);
    char why[256];
    peat_gemm_props again;
    if (st == PEAT_OK &&
        peat_isolate_run(k, &c, o->isolate, o->kernel_timeout_s, why, sizeof why) == PEAT_OK) {
        peat_analyzer_gemm_props_read(g.out[0], &res->props_gold);
        peat_analyzer_gemm_props_read(c.out[0], &res->props_cand);
        /* a kernel whose answers change from run to run has no properties to read: run twice */
        res->have_props =
            peat_isolate_run(k, &c, o->isolate, o->kernel_timeout_s, why, sizeof why) == PEAT_OK;
        if (res->have_props) peat_analyzer_gemm_props_read(c.out[0], &again);
        res->have_props = res->have_props && !memcmp(&again, &res->props_cand, sizeof again) &&
                          res->props_cand.consistent && res->props_gold.consistent;
    }
    peat_isolate_outputs_free(&c);
    peat_args_free_outputs(&e);
    peat_args_free_outputs(&g);
    for (int i = 0; i < in.n_in; i++) peat_tensor_free((peat_tensor *)in.in[i]);
    return st;
}

/* A kernel that declares a narrower format than fp32 may deviate on probes as that format does
 * (range, rounding of crafted values): only classes no precision change produces stay FAIL. */
static void declared_format_explains(const peat_detector_ctx *ctx, peat_probe_outcome *po)
{
    int narrow = 0;
    peat_dtype d[3] = {ctx->declared_in, ctx->declared_acc, ctx->declared_out};
    for (int i = 0; i < 3; i++) {
        int m = peat_dtype_mantissa_bits(d[i]);
        narrow |= m > 0 && m < 24;
    }
    peat_finding_class c = po->f.cls;
    if (!narrow || po->f.accept != PEAT_ACCEPT_FAIL || c == PEAT_FIND_TILE ||
        c == PEAT_FIND_STUCK_BIT || c == PEAT_FIND_BITFLIP || c == PEAT_FIND_NONDETERMINISTIC)
        return;
    po->f.accept = PEAT_ACCEPT_WARN;
    if (po->f.n_evidence < PEAT_MAX_EVIDENCE)
        snprintf(po->f.evidence[po->f.n_evidence++], sizeof po->f.evidence[0],
                 "the kernel declares a narrower format than fp32, which may explain this probe's "
                 "deviation (WARN)");
}

/* The probe options: a GPU runtime initialised in this process does not survive fork (as
 * playback does). */
static peat_campaign_opts probe_opts(const peat_campaign *c)
{
    peat_campaign_opts po = *c->o;
    po.isolate = c->o->isolate && peat_backend_can_fork(c->k->backend);
    return po;
}

static peat_detector_ctx probe_ctx(const peat_campaign *c, double below, double above)
{
    peat_detector_ctx dctx = peat_detector_ctx_from_kernel(c->k);
    dctx.in_frac_below_normal = below;
    dctx.in_frac_above_max = above;
    return dctx;
}

/* The probes i mod ranks == rank (all of them in one process) into out[i], done[i] set. */
static peat_status probe_share(const peat_campaign *c, const peat_probe_set *set,
                               const peat_detector_ctx *dctx, int64_t n, int rank, int ranks,
                               peat_probe_outcome *out, char *done)
{
    peat_campaign_opts po = probe_opts(c);
    for (int64_t i = rank; i < n; i += ranks) {
        memset(&out[i], 0, sizeof out[i]);
        PEAT_TRY(peat_campaign_stage_probe_one(&po, c->k, &set->p[i], dctx, &out[i]));
        done[i] = 1;
    }
    return PEAT_OK;
}

static int64_t probe_count(const peat_probe_set *set)
{
    return set->n < PEAT_CAMPAIGN_MAX_PROBES ? set->n : PEAT_CAMPAIGN_MAX_PROBES;
}

peat_status peat_campaign_probe_share(peat_campaign *c, peat_scale_pack *in, peat_scale_pack *out)
{
    double frac[2];
    peat_scale_pack_get(in, frac, sizeof frac);
    if (in->err) return PEAT_ERROR(PEAT_ERR_FORMAT, "rank 0's probe message is cut short");
    peat_detector_ctx dctx = probe_ctx(c, frac[0], frac[1]);
    peat_probe_set set;
    PEAT_TRY(peat_analyzer_probe_set_make(&c->recs, c->o->seed, &set));
    int64_t n = probe_count(&set);
    peat_probe_outcome *po = calloc((size_t)(n ? n : 1), sizeof *po);
    char *done = calloc((size_t)(n ? n : 1), 1);
    peat_status st = po && done ? probe_share(c, &set, &dctx, n, peat_scale_mpi_rank(),
                                              peat_scale_mpi_size(), po, done)
                                : PEAT_ERROR(PEAT_ERR_NOMEM, "probe outcomes");
    for (int64_t i = 0; st == PEAT_OK && i < n; i++)
        if (done[i]) {
            peat_scale_pack_put(out, &i, sizeof i);
            peat_scale_pack_put(out, &po[i], sizeof po[i]);
        }
    peat_analyzer_probe_set_free(&set);
    free(po);
    free(done);
    return st;
}

/* Rank 0: every other rank's probes into out[], done[] (each rank's answer taken even after a
 * failure); the first failure names the rank and its probes. */
static peat_status take_probes(int64_t n, peat_probe_outcome *out, char *done, peat_status st)
{
    int ranks = peat_scale_mpi_size();
    for (int r = 1; r < ranks; r++) {
        peat_scale_pack p;
        peat_status rs = peat_scale_ranks_take(r, "probes", &p);
        while (rs == PEAT_OK && !p.err && p.at < p.n) {
            int64_t i = -1;
            peat_scale_pack_get(&p, &i, sizeof i);
            if (p.err || i < 0 || i >= n || i % ranks != r || done[i]) p.err = 1;
            if (!p.err) peat_scale_pack_get(&p, &out[i], sizeof out[i]);
            if (!p.err) done[i] = 1;
        }
        if (rs == PEAT_OK && p.err)
            rs = PEAT_ERROR(PEAT_ERR_FORMAT, "rank %d of %d: its probes answer is cut short", r,
                            ranks);
        peat_scale_pack_free(&p);
        if (rs != PEAT_OK && st == PEAT_OK) {
            char why[768];
            snprintf(why, sizeof why, "%s", peat_error_last());
            st = PEAT_ERROR(rs, "%s (its probes: #%d, #%d, ...)", why, r, r + ranks);
        }
    }
    return st;
}

/* The probes, run here or (under mpirun) split across the ranks: their outcomes in order. */
static peat_status probes_all(peat_campaign *c, const peat_probe_set *set,
                              const peat_detector_ctx *dctx, peat_probe_outcome *out, char *done)
{
    int64_t n = probe_count(set);
    int split = peat_campaign_items_split(c);
    peat_status st = PEAT_OK;
    if (split) {
        peat_scale_pack msg = {0};
        double frac[2] = {c->in_frac_below_normal, c->in_frac_above_max};
        peat_scale_pack_put(&msg, frac, sizeof frac);
        peat_campaign_items_records_put(c, &msg);
        st = msg.err ? PEAT_ERROR(PEAT_ERR_NOMEM, "the records for the ranks")
                     : peat_scale_ranks_tell('Q', &msg);
        peat_scale_pack_free(&msg);
        PEAT_TRY(st);
    }
    st = probe_share(c, set, dctx, n, 0, split ? peat_scale_mpi_size() : 1, out, done);
    if (split) st = take_probes(n, out, done, st);
    for (int64_t i = 0; i < n && st == PEAT_OK; i++)
        if (!done[i]) st = PEAT_ERROR(PEAT_ERR_INTERNAL, "probe #%lld was not run", (long long)i);
    return st;
}

peat_status peat_campaign_stage_probe(peat_campaign *c)
{
    peat_campaign_result *res = c->res;
    if (c->o->no_probes || res->n_kernel_failures >= res->n_records) {
        peat_campaign_skip(c, "probe",
                           c->o->no_probes ? "--no-probes" : "the kernel failed on every call");
        return PEAT_OK;
    }
    peat_detector_ctx dctx = probe_ctx(c, c->in_frac_below_normal, c->in_frac_above_max);
    peat_campaign_opts po = probe_opts(c);
    peat_probe_set set;
    PEAT_TRY(peat_analyzer_probe_set_make(&c->recs, c->o->seed, &set));
    int64_t n = probe_count(&set);
    char *done = calloc((size_t)(n ? n : 1), 1);
    peat_status st = done ? probes_all(c, &set, &dctx, res->probes, done)
                          : PEAT_ERROR(PEAT_ERR_NOMEM, "probe outcomes");
    for (int64_t i = 0; i < n && st == PEAT_OK; i++)
        declared_format_explains(&dctx, &res->probes[res->n_probes++]);
    free(done);
    peat_analyzer_probe_set_free(&set);
    if (st == PEAT_OK && c->k->op == PEAT_OP_GEMM)
        st = peat_campaign_stage_probe_props(&po, c->k, res);
    return st;
}
