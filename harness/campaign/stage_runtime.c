/* stage_runtime.c: the runtime FI stage: the candidate trains in the loop at each --runtime-freq
 * over the profiled iterations, judged against the golden noise band; its verdicts join the
 * findings and the acceptance (docs/fault-injection.md). */
#include "harness/scale/run_shard.h"
#include "peat/backend.h"
#include "harness/runtime/runtime.h"
#include "harness/scale/ranks.h"
#include "harness/scale/scale.h"
#include "harness/campaign/stages.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The finding of each faulty run joins the sources (the detect stage's), and the campaign is
 * judged again on them all (peat_campaign_judge, stage_detect.c). */
static void findings_add(const peat_finding_sources *base, peat_campaign_result *res,
                         const peat_runtime_result *rt)
{
    enum { MAXRT = (int)(sizeof res->runtime / sizeof res->runtime[0]) };
    peat_finding runtime[2 * MAXRT]; /* each run's shadow finding, then its training impact */
    int n = 0;
    res->n_runtime = rt->n_faulty;
    res->runtime_band = rt->n_band;
    for (int j = 0; j < rt->n_faulty; j++) {
        snprintf(res->runtime_run[j], sizeof res->runtime_run[j], "%s", rt->faulty[j].label);
        res->runtime[j] = rt->verdict[j];
        res->runtime_swapped[j] = rt->faulty[j].swapped;
        n += peat_runtime_shadow_finding(&rt->faulty[j], &runtime[n]);
        runtime[n++] = peat_detector_runtime_finding(&rt->verdict[j], rt->faulty[j].label,
                                                     rt->faulty[j].swapped);
    }
    peat_finding_sources src = *base;
    src.runtime = runtime, src.n_runtime = n;
    peat_campaign_judge(res, &src);
}

/* The lockstep's options of this campaign. */
static void runtime_opts(peat_campaign *c, peat_runtime_opts *ro)
{
    const peat_campaign_opts *o = c->o;
    memset(ro, 0, sizeof *ro);
    ro->flow = c->flow;
    ro->cfg = peat_campaign_flow_config(o);
    ro->iters = c->runtime_iters ? c->runtime_iters(c) : c->iters;
    c->res->runtime_iters = ro->iters;
    if (c->planned) {
        /* under a budget the runs' length follows the deadline while they train */
        ro->steer = c->runtime_steer;
        ro->steer_user = c;
        ro->max_iters = c->max_iters;
    }
    ro->op = c->k->op;
    ro->candidate = c->k;
    if (o->runtime_model) {
        /* the model on the kernel under test (the golden kernel itself: plain runtime FI) */
        ro->candidate = NULL;
        ro->model = o->runtime_model;
        ro->model_kernel = c->k;
        ro->model_seed = peat_seed_derive(o->seed, "runtime-model");
    }
    /* the candidate trains inside a worker of its own: what it does cannot take peat down */
    ro->isolate = o->isolate && peat_backend_can_fork(c->k->backend);
    /* a candidate kernel's calls are checked in the loop against the op's bound, beside the
     * golden's (runtime_call.h); a kernel beyond the bound on the playback's fresh calls is held
     * to its own error there. CPU kernels: a device kernel's golden is the device library. */
    ro->shadow.on = !o->runtime_model && peat_backend_on_host(c->k->backend);
    ro->shadow.self_norm = c->res->cand.max_norm;
    ro->kernel_timeout_s = o->kernel_timeout_s;
    ro->freqs = o->runtime_freq;
    ro->band_runs = o->runtime_band;
    ro->checkpoint_iters = o->checkpoint_iters ? o->checkpoint_iters : "last";
    ro->golden = c->golden;
    /* under mpirun: the runs split across the ranks, each rank on its share of the node's cores */
    ro->rank = 0, ro->n_ranks = 1;
    peat_scale_shard sh = {0, 1};
    if (o->shard && peat_scale_shard_parse(o->shard, &sh) == PEAT_OK)
        ro->rank = sh.i, ro->n_ranks = sh.n; /* --shard I/N: as rank I of N, without MPI */
    if (peat_scale_ranks_active()) {
        ro->rank = peat_scale_mpi_rank();
        ro->n_ranks = peat_scale_mpi_size();
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        int t = (int)(cpus / peat_scale_mpi_local_size());
        ro->threads = t > 1 ? t : 1;
    }
}

peat_status peat_campaign_stage_runtime_rank(peat_campaign *c)
{
    if (peat_scale_ranks_released()) return PEAT_OK; /* rank 0 ended before it */
    peat_runtime_opts ro;
    runtime_opts(c, &ro);
    c->rt = calloc(1, sizeof *c->rt);
    if (!c->rt) return PEAT_ERROR(PEAT_ERR_NOMEM, "runtime result");
    /* no store: rank 0 writes what this rank trained */
    return peat_runtime_run_all(&ro, c->rt);
}

/* --shard I/N: what this shard trained, with what names its campaign, into its file. */
static peat_status shard_write(peat_campaign *c, const peat_runtime_opts *ro,
                               const peat_scale_pack *body)
{
    const peat_campaign_opts *o = c->o;
    peat_scale_run_shard *h = calloc(1, sizeof *h);
    if (!h) return PEAT_ERROR(PEAT_ERR_NOMEM, "shard file");
    h->sh = (peat_scale_shard){ro->rank, ro->n_ranks};
    h->seed = o->seed;
    snprintf(h->kernel, sizeof h->kernel, "%s", c->k->name);
    snprintf(h->flow, sizeof h->flow, "%s", c->flow);
    snprintf(h->line, sizeof h->line, "%s", o->shard_line ? o->shard_line : "");
    snprintf(h->argv, sizeof h->argv, "%s", o->argv ? o->argv : "");
    const peat_runtime_result *rt = c->rt;
    for (int r = 0; r < rt->n_band + rt->n_faulty; r++)
        snprintf(h->runs[h->n_runs++], sizeof h->runs[0], "%s",
                 r < rt->n_band ? rt->band[r].label : rt->faulty[r - rt->n_band].label);
    for (int k = 0; k < c->n_skipped && k < 4; k++, h->n_skipped++) {
        snprintf(h->skip_stage[k], sizeof h->skip_stage[k], "%s", c->skipped[k].stage);
        snprintf(h->skip_why[k], sizeof h->skip_why[k], "%s", c->skipped[k].why);
    }
    peat_status st = peat_campaign_mkdir_p(o->out_dir);
    if (st == PEAT_OK) st = peat_scale_run_shard_write(o->out_dir, h, body);
    free(h);
    return st;
}

/* --shard I/N: the golden run and this shard's runs (#I, #I+N, ...) trained, kept in its file for
 * `peat merge`; nothing judged. Shard 0 leaves its campaign pending. */
static peat_status runtime_shard(peat_campaign *c)
{
    peat_runtime_opts ro;
    runtime_opts(c, &ro);
    c->rt = calloc(1, sizeof *c->rt);
    if (!c->rt) return PEAT_ERROR(PEAT_ERR_NOMEM, "runtime result");
    peat_scale_pack body = {0};
    ro.shard = &body;
    peat_status st = peat_runtime_run_all(&ro, c->rt);
    if (st == PEAT_OK) st = shard_write(c, &ro, &body);
    peat_scale_pack_free(&body);
    c->shard_pending = st == PEAT_OK && ro.rank == 0;
    return st;
}

peat_status peat_campaign_stage_runtime_merge(peat_campaign *c)
{
    const peat_campaign_opts *o = c->o;
    peat_runtime_opts ro;
    runtime_opts(c, &ro);
    c->rt = calloc(1, sizeof *c->rt);
    peat_scale_pack *bodies = calloc((size_t)o->n_merge_shards, sizeof *bodies);
    if (!c->rt || !bodies) {
        free(bodies);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "runtime result");
    }
    for (int i = 0; i < o->n_merge_shards; i++) bodies[i] = o->merge_shards[i].body; /* views */
    peat_status st = peat_store_open(c->partial, 1, &ro.store);
    if (st == PEAT_OK) st = peat_runtime_merge(&ro, bodies, o->n_merge_shards, c->rt);
    free(bodies);
    peat_status cst = ro.store ? peat_store_close(ro.store) : PEAT_OK;
    PEAT_TRY(st);
    PEAT_TRY(cst);
    c->res->runtime_iters = c->rt->n;
    /* shard 0's findings (the detect stage's list) are the sources: the runtime ones join them
     * as in one process (peat_detector_assemble keeps a prefix of the numeric ones) */
    peat_finding kept[sizeof c->res->findings / sizeof c->res->findings[0]];
    memcpy(kept, c->res->findings, sizeof kept);
    peat_finding_sources base;
    memset(&base, 0, sizeof base);
    base.signature = kept, base.n_signature = c->res->n_findings;
    findings_add(&base, c->res, c->rt);
    c->res->rt = c->rt;
    return PEAT_OK;
}

static int band_runs(const peat_runtime_opts *ro)
{
    return ro->band_runs > 0 ? ro->band_runs : PEAT_RUNTIME_DEFAULT_BAND;
}

/* The golden cache's band reruns for this lockstep (golden_cache.h), or a pack to store this
 * lockstep's in: not under a budget (the runs' length follows the clock) nor split across ranks. */
static void band_cache_setup(peat_campaign *c, peat_runtime_opts *ro, peat_scale_pack *in,
                             peat_scale_pack *out)
{
    if (!c->gcache.on || c->planned || ro->n_ranks > 1) return;
    int64_t every = peat_predictor_runtime_eval_every(ro->iters);
    if (peat_campaign_golden_cache_band_get(c, band_runs(ro), ro->iters, every, in)) {
        ro->band_in = in;
        snprintf(c->res->golden_cache, sizeof c->res->golden_cache,
                 "profile and band from the golden cache");
        if (!c->o->quiet)
            fprintf(stdout, "peat: runtime FI: the band's %d reruns from the golden cache\n",
                    band_runs(ro) - 1);
    } else {
        ro->band_out = out;
    }
}

peat_status peat_campaign_stage_runtime(peat_campaign *c)
{
    const peat_campaign_opts *o = c->o;
    /* a finetuned flow starts from another campaign's checkpoint, which the reruns would need
     * too: not supported yet, said rather than silently skipped */
    if (o->no_runtime) {
        peat_campaign_skip(c, "runtime", "--no-runtime");
        return PEAT_OK;
    }
    /* the loop runs the candidate in this process, on unguarded buffers: one that crashed, hung,
     * failed or wrote outside its outputs on a recorded call (already a FAIL finding) would take
     * the campaign down with it */
    int64_t unsafe = c->res->n_kernel_failures + c->res->n_oob_writes;
    if (unsafe > 0) {
        peat_campaign_skip(c, "runtime", "the kernel failed or wrote outside its outputs");
        if (!o->quiet)
            fprintf(stdout,
                    "peat: runtime FI skipped: the kernel failed or wrote outside its outputs on "
                    "%lld recorded calls\n",
                    (long long)unsafe);
        return PEAT_OK;
    }
    if (o->capture) {
        peat_campaign_skip(c, "runtime", "captured calls: runtime FI runs in PyTorch");
        if (!o->quiet)
            fprintf(stdout, "peat: runtime FI skipped: the calls were captured from PyTorch; "
                            "peat_torch.band runs it in your training loop (docs/pytorch.md)\n");
        return PEAT_OK;
    }
    if (o->finetune_from) {
        peat_campaign_skip(c, "runtime", "not with --finetune-from");
        if (!o->quiet) fprintf(stdout, "peat: runtime FI skipped (not with --finetune-from)\n");
        return PEAT_OK;
    }
    if (!o->quiet)
        fprintf(stdout, "peat: runtime FI: golden band + %s%s%s in the loop ...\n",
                o->runtime_model ? o->runtime_model : "", o->runtime_model ? " on " : "",
                c->k->name);
    if (o->shard) return runtime_shard(c);
    peat_runtime_opts ro;
    runtime_opts(c, &ro);
    c->rt = calloc(1, sizeof *c->rt);
    if (!c->rt) return PEAT_ERROR(PEAT_ERR_NOMEM, "runtime result");
    PEAT_TRY(peat_store_open(c->partial, 1, &ro.store));
    peat_status st = PEAT_OK;
    if (ro.n_ranks > 1) { /* the other ranks train their share now; run_all hears them all */
        st = peat_scale_ranks_go();
        if (st == PEAT_OK && !o->quiet)
            fprintf(stdout,
                    "peat: runtime FI: %d runs beside the golden one split across %d ranks "
                    "(%d thread%s each)\n",
                    band_runs(&ro) - 1 + ro.freqs.n, ro.n_ranks, ro.threads,
                    ro.threads == 1 ? "" : "s");
    }
    peat_scale_pack band_in = {0}, band_out = {0};
    band_cache_setup(c, &ro, &band_in, &band_out);
    if (st == PEAT_OK) st = peat_runtime_run_all(&ro, c->rt);
    if (st == PEAT_OK && ro.band_out && !band_out.err)
        peat_campaign_golden_cache_band_put(c, &band_out);
    peat_scale_pack_free(&band_in);
    peat_scale_pack_free(&band_out);
    peat_status cst = peat_store_close(ro.store);
    PEAT_TRY(st);
    PEAT_TRY(cst);
    c->res->runtime_iters = c->rt->n;
    for (int j = 0; j < c->rt->n_faulty && !o->quiet; j++) {
        const peat_runtime_shadow *s = &c->rt->faulty[j].shadow;
        if (s->on)
            fprintf(stdout,
                    "peat: runtime FI: shadow check of %s: %lld of %lld calls checked (%lld "
                    "against the exact result), %lld out of the envelope\n",
                    c->rt->faulty[j].label, (long long)s->checked, (long long)s->calls,
                    (long long)s->exact, (long long)s->bad);
    }
    findings_add(&c->find, c->res, c->rt);
    c->res->rt = c->rt;
    return PEAT_OK;
}
