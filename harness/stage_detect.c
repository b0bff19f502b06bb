/* stage_detect.c: the detect stage: findings from the signatures (detector/), with the kernel's
 * declared formats and what the runner measured, and the campaign's verdict. */
#include "harness/stages.h"

#include <string.h>

/* A candidate that crashed, hung or failed on some calls is out of bound whatever its other
 * outputs show: one finding with the first failure as evidence. */
static void failure_finding(peat_campaign_result *res)
{
    peat_finding *fd = &res->findings[res->n_findings++];
    memset(fd, 0, sizeof *fd);
    fd->cls = PEAT_FIND_OUT_OF_BOUND;
    fd->confidence = 1.0;
    snprintf(fd->params, sizeof fd->params, "failed_calls=%lld", (long long)res->n_kernel_failures);
    snprintf(fd->evidence[0], sizeof fd->evidence[0],
             "the kernel failed on %lld of %lld calls; first: %.170s",
             (long long)res->n_kernel_failures, (long long)res->n_records, res->kernel_failure);
    fd->n_evidence = 1;
    fd->accept = PEAT_ACCEPT_FAIL;
}

/* The recorded calls' findings combined with the probes' and the arithmetic properties'. */
static void combine_probe_findings(peat_campaign_result *res, const peat_detector_ctx *dctx)
{
    enum { MAXF = (int)(sizeof res->findings / sizeof res->findings[0]) };
    peat_finding props[8], rec[MAXF];
    int n_props = res->have_props
                      ? peat_detector_props(&res->props_cand, &res->props_gold, dctx, props, 8)
                      : 0;
    if (n_props == 0 && res->n_probes == 0) return;
    memcpy(rec, res->findings, sizeof rec);
    res->n_findings = peat_detector_combine(rec, res->n_findings, res->probes, res->n_probes, props,
                                            n_props, res->findings, MAXF);
}

peat_status peat_stage_detect(peat_campaign *c)
{
    peat_campaign_result *res = c->res;
    peat_detector_ctx dctx = peat_detector_ctx_from_kernel(c->k);
    dctx.in_frac_below_normal = c->in_frac_below_normal;
    dctx.in_frac_above_max = c->in_frac_above_max;
    if (res->n_kernel_failures > 0) failure_finding(res);
    int room = (int)(sizeof res->findings / sizeof res->findings[0]) - res->n_findings;
    if (res->n_kernel_failures < res->n_records)
        res->n_findings += peat_detector_run(&res->cand, &res->golden, &dctx,
                                             res->findings + res->n_findings, room);
    combine_probe_findings(res, &dctx);
    res->verdict = peat_detector_verdict(res->findings, res->n_findings);
    return PEAT_OK;
}
