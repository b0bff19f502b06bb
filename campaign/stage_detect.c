/* stage_detect.c: the detect stage: findings from the signatures (detector/), with the kernel's
 * declared formats and what the runner measured, and the campaign's verdict. */
#include "campaign/stages.h"

#include <stdio.h>
#include <string.h>

/* A finding the runner made (not the signature): cls on count calls, first as evidence; it fails
 * the kernel whatever its other outputs show. */
static peat_finding *runner_finding(peat_campaign_result *res, peat_finding_class cls,
                                    const char *what, int64_t count, const char *first)
{
    peat_finding *fd = &res->findings[res->n_findings++];
    memset(fd, 0, sizeof *fd);
    fd->cls = cls;
    fd->confidence = 1.0;
    snprintf(fd->params, sizeof fd->params, "calls=%lld", (long long)count);
    snprintf(fd->evidence[0], sizeof fd->evidence[0],
             "the kernel %s on %lld of %lld calls; first: %.150s", what, (long long)count,
             (long long)res->n_records, first);
    fd->n_evidence = 1;
    fd->accept = PEAT_ACCEPT_FAIL;
    return fd;
}

/* Crashes, hangs and errors (OUT_OF_BOUND), early exits (DUE), stray writes. */
static void runner_findings(peat_campaign_result *res)
{
    int64_t failed = res->n_kernel_failures - res->n_due - res->n_hang_skipped;
    if (failed > 0) {
        peat_finding *fd =
            runner_finding(res, PEAT_FIND_OUT_OF_BOUND, "failed", failed, res->kernel_failure);
        if (res->n_hang_skipped > 0)
            snprintf(fd->evidence[fd->n_evidence++], sizeof fd->evidence[0],
                     "%lld later calls skipped: the kernel hung (--hang-policy wait runs them)",
                     (long long)res->n_hang_skipped);
    }
    if (res->n_due > 0)
        runner_finding(res, PEAT_FIND_DUE, "ended its process without completing the call",
                       res->n_due, res->due);
    if (res->n_oob_writes > 0)
        runner_finding(res, PEAT_FIND_OUT_OF_BOUNDS_WRITE, "wrote outside an output",
                       res->n_oob_writes, res->oob_write);
    if (res->n_input_mutations > 0)
        runner_finding(res, PEAT_FIND_INPUT_MUTATION, "wrote into an input", res->n_input_mutations,
                       res->input_mutation);
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

peat_status peat_campaign_stage_detect(peat_campaign *c)
{
    peat_campaign_result *res = c->res;
    peat_detector_ctx dctx = peat_detector_ctx_from_kernel(c->k);
    dctx.in_frac_below_normal = c->in_frac_below_normal;
    dctx.in_frac_above_max = c->in_frac_above_max;
    enum { MAXF = (int)(sizeof res->findings / sizeof res->findings[0]) };
    if (res->n_kernel_failures < res->n_records)
        res->n_findings = peat_detector_run(&res->cand, &res->golden, &dctx, res->findings, MAXF);
    combine_probe_findings(res, &dctx);
    /* what the runner saw (a crash, an early exit, a stray write) comes first: it is certain,
     * and the numeric findings of such a kernel are consequences of it */
    peat_finding numeric[MAXF];
    int n_numeric = res->n_findings;
    memcpy(numeric, res->findings, sizeof numeric);
    res->n_findings = 0;
    runner_findings(res);
    for (int i = 0; i < n_numeric && res->n_findings < MAXF; i++)
        res->findings[res->n_findings++] = numeric[i];
    res->verdict = peat_detector_verdict(res->findings, res->n_findings);
    return PEAT_OK;
}
