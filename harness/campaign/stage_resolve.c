/* stage_resolve.c: the resolve stage: plugins, kernel, backend and device, flow, run size. */
#define _DEFAULT_SOURCE /* gethostname */
#include "harness/runtime/builtin.h"
#include "peat/backend.h"
#include "harness/campaign/stages.h"
#include "golden/golden.h"
#include "peat/plugin.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Each candidate once, with the backends it has: "gemm_new (cpu, opencl), ...". */
static void candidate_list(char *names, size_t n)
{
    /* each candidate once, with the backends it has: "gemm_new (cpu, opencl)" */
    names[0] = 0;
    for (int i = 0; i < peat_registry_count(); i++) {
        const peat_kernel *k = peat_registry_at(i);
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = peat_registry_at(j)->role == PEAT_ROLE_CANDIDATE &&
                   !strcmp(peat_registry_at(j)->name, k->name);
        if (k->role != PEAT_ROLE_CANDIDATE || seen) continue;
        char one[160], be[64] = "";
        for (int j = i; j < peat_registry_count(); j++) {
            const peat_kernel *q = peat_registry_at(j);
            if (q->role == PEAT_ROLE_CANDIDATE && !strcmp(q->name, k->name) &&
                strlen(be) + strlen(q->backend) + 3 < sizeof be)
                snprintf(be + strlen(be), sizeof be - strlen(be), "%s%s", be[0] ? ", " : "",
                         q->backend);
        }
        snprintf(one, sizeof one, "%s%s (%s)", names[0] ? ", " : "", k->name, be);
        if (strlen(names) + strlen(one) < n) strcat(names, one);
    }
}

/* Registers the built-ins and the plugins, and finds the candidate (not the exact reference). */
static peat_status resolve_kernel(peat_campaign *c)
{
    const peat_campaign_opts *o = c->o;
    PEAT_TRY(peat_runtime_builtin_init());
    for (int i = 0; i < o->n_plugins; i++) PEAT_TRY(peat_plugin_load(o->plugins[i], NULL));
    if (!o->kernel || !o->kernel[0]) return PEAT_ERROR(PEAT_ERR_INVAL, "--kernel NAME is required");
    /* a named backend must be built and see a device before anything else is said about it */
    if (o->backend && strcmp(o->backend, "auto") != 0) {
        peat_backend_t be;
        PEAT_TRY(peat_backend_get(o->backend, &be));
    }
    /* --backend picks the implementation where a name exists on several (gemm_new: cpu, opencl) */
    c->k = peat_registry_find_on(o->kernel, o->backend);
    if (!c->k && peat_registry_find(o->kernel))
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "kernel '%s' has no implementation on backend '%s'",
                          o->kernel, o->backend);
    if (!c->k) {
        char names[1536];
        candidate_list(names, sizeof names);
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "unknown kernel '%s'; available candidates: %s",
                          o->kernel, names);
    }
    if (c->k->role == PEAT_ROLE_EXACT)
        return PEAT_ERROR(PEAT_ERR_INVAL, "'%s' is the exact reference, not a kernel to validate",
                          c->k->name);
    return PEAT_OK;
}

/* Opens the selected backend ("auto": the kernel's own; an explicit one must match it) for the
 * device description the campaign file records. */
static peat_status resolve_backend(peat_campaign *c)
{
    const peat_kernel *k = c->k;
    const char *want =
        !c->o->backend || strcmp(c->o->backend, "auto") == 0 ? k->backend : c->o->backend;
    peat_backend_t be = NULL;
    PEAT_TRY(peat_backend_create(want, 0, &be));
    peat_status st = peat_backend_device_info(be, &c->dev);
    snprintf(c->backend_name, sizeof c->backend_name, "%s", peat_backend_name(be));
    snprintf(c->res->backend, sizeof c->res->backend, "%s", c->backend_name);
    if (peat_backend_on_host(c->backend_name))
        snprintf(c->res->blas, sizeof c->res->blas, "%s", peat_golden_blas_describe());
    snprintf(c->res->device, sizeof c->res->device, "%s", c->dev.name);
    peat_backend_close(be);
    if (st != PEAT_OK) return st;
    if (strcmp(c->backend_name, k->backend) != 0)
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED,
                          "kernel '%s' runs on backend '%s', selected backend is '%s'", k->name,
                          k->backend, c->backend_name);
    return PEAT_OK;
}

/* Options that would silently do nothing in this flow or this run are refused. */
static peat_status check_flow_options(const peat_campaign *c)
{
    const peat_campaign_opts *o = c->o;
    if ((o->loss_scale_init > 0 || o->loss_scale_interval > 0) &&
        !(o->precision && !strcmp(o->precision, "amp-fp16")))
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "--loss-scale-init and --loss-scale-interval apply to --precision "
                          "amp-fp16 only (the loss scaler)");
    if (o->seq && strncmp(c->flow, "gpt", 3) != 0 && strcmp(c->flow, "llama") != 0)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "--seq applies to the gpt and llama flows only (flow '%s' has no "
                          "sequence)",
                          c->flow);
    PEAT_TRY(peat_iter_spec_check_range(o->checkpoint_iters, c->iters, "checkpoints"));
    return peat_iter_spec_check_range(o->activation_iters, c->iters, "activations");
}

/* The flow named by --flow (it must call the kernel's op), or the first flow that calls it. */
static peat_status resolve_flow(peat_campaign *c)
{
    const peat_campaign_opts *o = c->o;
    const peat_kernel *k = c->k;
    if (o->capture) return peat_campaign_capture_resolve(c);
    const char *const *names = peat_models_flow_names();
    /* the op mask follows the optimizer: an SGD kernel runs on resnet (SGD by default) or with
     * --optimizer sgd */
    peat_flow_config fc;
    memset(&fc, 0, sizeof fc);
    fc.optimizer = !o->optimizer                      ? PEAT_OPTIM_DEFAULT
                   : !strncmp(o->optimizer, "sgd", 3) ? PEAT_OPTIM_SGD
                                                      : PEAT_OPTIM_ADAMW;
    /* and the precision: fp8 GEMMs only in an fp8 flow */
    if (o->precision && peat_models_flow_precision_parse(o->precision, &fc.precision) != PEAT_OK)
        fc.precision = PEAT_PRECISION_FP32;
    if (o->flow) {
        int known = 0;
        for (int i = 0; names[i]; i++) known |= strcmp(names[i], o->flow) == 0;
        if (!known)
            return PEAT_ERROR(PEAT_ERR_NOTFOUND, "unknown flow '%s' (see `peat list`)", o->flow);
        if (!(peat_models_flow_op_mask_for(o->flow, &fc) & PEAT_OP_BIT(k->op)))
            return PEAT_ERROR(PEAT_ERR_INVAL, "flow '%s' never calls %s, the op of kernel '%s'",
                              o->flow, peat_op_name(k->op), k->name);
        c->flow = o->flow;
    }
    for (int i = 0; !c->flow && names[i]; i++)
        if (peat_models_flow_op_mask_for(names[i], &fc) & PEAT_OP_BIT(k->op)) c->flow = names[i];
    if (!c->flow)
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "no built-in flow calls %s (kernel '%s')%s",
                          peat_op_name(k->op), k->name,
                          k->op == PEAT_OP_SGD ? "; SGD updates run with --optimizer sgd" : "");
    snprintf(c->res->flow, sizeof c->res->flow, "%s", c->flow);
    /* a device kernel's flow runs every other op through the device's goldens */
    uint64_t ops = peat_models_flow_op_mask_for(c->flow, &fc);
    for (int op = 0; op < PEAT_OP_COUNT; op++)
        if ((ops >> op & 1u) && !peat_registry_role((peat_op_kind)op, PEAT_ROLE_GOLDEN, k->backend))
            return PEAT_ERROR(PEAT_ERR_UNSUPPORTED,
                              "backend '%s' has no golden kernel for %s, which flow '%s' calls",
                              k->backend, peat_op_name((peat_op_kind)op), c->flow);
    /* 0 means the default; the CLI's option table holds the accepted ranges */
    c->iters = c->o->iters > 0 ? c->o->iters : peat_campaign_default_iters(c->flow);
    c->calls = c->o->calls > 0 ? c->o->calls : PEAT_CAMPAIGN_DEFAULT_CALLS;
    return check_flow_options(c);
}

peat_status peat_campaign_stage_resolve(peat_campaign *c)
{
    PEAT_TRY(resolve_kernel(c));
    PEAT_TRY(resolve_backend(c));
    /* fp8 GEMMs are called only by a flow trained in fp8: the kernel's run is one */
    if (c->k->op == PEAT_OP_GEMM_FP8 && !c->o->precision && !c->o->capture) {
        c->o_own = *c->o;
        c->o_own.precision = "fp8";
        c->o = &c->o_own;
    }
    return resolve_flow(c);
}
