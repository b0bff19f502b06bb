/* stage_report.c: the report stage, the pipeline's last: the files of the output directory
 * (signature.json, summary.md, junit.xml, report.html), then the verdict table on the terminal
 * (or, with --json, the verdict as one JSON object). */
#include "harness/report/report.h"

#include <stdio.h>

/* The verdict as one JSON object (for scripts: `peat run ... --json | jq .verdict`). */
static void print_verdict_json(FILE *f, const peat_campaign_result *r)
{
    fprintf(f, "{\"verdict\": \"%s\", \"kernel\": ", peat_detector_acceptance_name(r->verdict));
    peat_report_json_str(f, r->cand.kernel);
    fprintf(f, ", \"flow\": \"%s\", \"findings\": [", r->flow);
    for (int i = 0; i < r->n_findings; i++)
        fprintf(f, "%s{\"class\": \"%s\", \"acceptance\": \"%s\"}", i ? ", " : "",
                peat_detector_finding_name(r->findings[i].cls),
                peat_detector_acceptance_name(r->findings[i].accept));
    fprintf(f, "], \"records\": %lld, \"out\": ", (long long)r->n_records);
    peat_report_json_str(f, r->out_dir);
    fprintf(f, "}\n");
}

void peat_report_terminal(FILE *f, const peat_campaign_opts *o, const peat_campaign_result *r)
{
    if (o->json)
        print_verdict_json(f, r);
    else
        peat_report_campaign_print(f, o, r);
}

peat_status peat_report_stage(peat_campaign *c)
{
    const peat_campaign_opts *o = peat_campaign_view_opts(c);
    const peat_campaign_result *res = peat_campaign_view_result(c);
    PEAT_TRY(peat_report_write(o, res));
    if (o->table) peat_report_terminal(o->table, o, res);
    return PEAT_OK;
}
