/* stage_detect.c: the detect stage: the sources of the campaign's findings (what the runner
 * measured, the signatures with the kernel's declared formats, the properties, the probes),
 * assembled by the detector (peat_detector_assemble), and the campaign's verdict: decided here
 * alone (peat_campaign_judge; the runtime stage adds its sources and judges again). */
#include "harness/campaign/stages.h"

#include <stdio.h>
#include <string.h>

/* What the runner measured on the recorded calls, for the detector. */
static peat_runner_counts runner_counts(const peat_campaign_result *res)
{
    peat_runner_counts r = {res->n_records,
                            res->n_kernel_failures,
                            res->n_due,
                            res->n_hang_skipped,
                            res->n_oob_writes,
                            res->n_input_mutations,
                            res->kernel_failure,
                            res->due,
                            res->oob_write,
                            res->input_mutation,
                            res->n_sequence_calls,
                            res->n_stateful,
                            res->stateful};
    return r;
}

peat_status peat_campaign_stage_detect(peat_campaign *c)
{
    peat_campaign_result *res = c->res;
    peat_detector_ctx dctx = peat_detector_ctx_from_kernel(c->k);
    dctx.in_frac_below_normal = c->in_frac_below_normal;
    dctx.in_frac_above_max = c->in_frac_above_max;
    peat_finding_sources *src = &c->find;
    memset(src, 0, sizeof *src);
    src->runner = runner_counts(res);
    if (res->n_kernel_failures < res->n_records)
        src->n_signature =
            peat_detector_run(&res->cand, &res->golden, &dctx, c->find_signature,
                              (int)(sizeof c->find_signature / sizeof c->find_signature[0]));
    src->signature = c->find_signature;
    if (res->have_props)
        src->n_props = peat_detector_props(&res->props_cand, &res->props_gold, &dctx, c->find_props,
                                           (int)(sizeof c->find_props / sizeof c->find_props[0]));
    src->props = c->find_props;
    src->probes = res->probes, src->n_probes = res->n_probes;
    peat_campaign_judge(res, src);
    return PEAT_OK;
}

void peat_campaign_judge(peat_campaign_result *res, const peat_finding_sources *src)
{
    int cap = (int)(sizeof res->findings / sizeof res->findings[0]);
    res->n_findings = peat_detector_assemble(src, res->findings, cap);
    res->verdict = peat_detector_verdict(res->findings, res->n_findings);
}
