/* html_tables.c: report.html's tables that the terminal also prints (probes, GEMM arithmetic
 * properties, coverage strata, runtime FI runs) and the "how to read this" note beside the
 * signature table. */
#include "harness/campaign/campaign.h"
#include "harness/runtime/runtime.h"
#include "harness/report/report.h"

#include <math.h>

static void cell(FILE *f, const char *s)
{
    fputs("<td>", f);
    peat_report_escape(f, s);
    fputs("</td>", f);
}

/* One probe per row (label, finding with its parameters, verdict), then the GEMM property table
 * of candidate and golden side by side. */
/* The differential diagnosis: its base call and one row per experiment. */
static void html_diagnosis(FILE *f, const peat_campaign_result *r)
{
    const peat_diagnosis *d = &r->diagnosis;
    if (!d->ran) return;
    fputs("<h2>Differential diagnosis</h2><p>", f);
    if (!d->base[0]) {
        fputs("No single call fails on its own: no base for the experiments.</p>\n", f);
        return;
    }
    fputs("Experiments on ", f);
    peat_report_escape(f, d->base);
    fprintf(f,
            " (%.1f s): each one's outcome differs between the competing explanations "
            "(docs/detector.md).</p><table id=\"diagnosis\"><tr><th>experiment</th><th>outcome"
            "</th></tr>\n",
            d->seconds);
    const char *name;
    char out[160];
    for (int k = 0; peat_report_diagnosis_row(r, k, &name, out, sizeof out); k++) {
        fputs("<tr>", f);
        cell(f, name);
        cell(f, out);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

void peat_report_html_probes(FILE *f, const peat_campaign_result *r)
{
    html_diagnosis(f, r);
    if (r->n_probes > 0) {
        fprintf(f,
                "<h2>Probes</h2><p>%d calls beyond the training data: awkward shapes, every "
                "transpose and batch, and values (subnormals, near overflow, cancellation).</p>"
                "<table id=\"probes\"><tr><th>probe</th><th>finding</th><th>verdict</th></tr>\n",
                r->n_probes);
        for (int i = 0; i < r->n_probes; i++) {
            const peat_probe_outcome *p = &r->probes[i];
            char fnd[160];
            snprintf(fnd, sizeof fnd, "%s%s%s", peat_detector_finding_name(p->f.cls),
                     p->f.params[0] ? " " : "", p->f.params);
            fputs("<tr>", f);
            cell(f, p->label);
            cell(f, fnd);
            fprintf(f, "<td class=\"%s\">%s</td></tr>\n",
                    peat_detector_acceptance_name(p->f.accept),
                    peat_detector_acceptance_name(p->f.accept));
        }
        fputs("</table>\n", f);
    }
    if (!r->have_props) return;
    fputs("<h2>Arithmetic properties</h2><table id=\"properties\"><tr><th>arithmetic "
          "property</th><th>",
          f);
    peat_report_escape(f, r->cand.kernel);
    fputs(" (candidate)</th><th>", f);
    peat_report_escape(f, r->golden.kernel);
    fputs(" (golden)</th></tr>\n", f);
    const char *name;
    char vc[64], vg[64];
    for (int i = 0; peat_analyzer_gemm_props_row(&r->props_cand, i, &name, vc, sizeof vc); i++) {
        peat_analyzer_gemm_props_row(&r->props_gold, i, &name, vg, sizeof vg);
        fputs("<tr>", f);
        cell(f, name);
        cell(f, vc);
        cell(f, vg);
        fputs("</tr>\n", f);
    }
    fputs(
        "</table><p><small>Measured by constructed probe inputs (docs/detector.md).</small></p>\n",
        f);
}

/* The strata the flow produced (op, layer, phase, shapes, dtype) against what was recorded. */
void peat_report_html_strata(FILE *f, const peat_campaign_result *r)
{
    const peat_coverage *c = &r->coverage;
    if (c->n == 0) return;
    int missed = peat_campaign_coverage_missed(c);
    fprintf(f,
            "<h2>Recorded strata</h2><p id=\"strata-summary\">coverage: %d of %d strata "
            "recorded (op, layer, phase, shapes, dtype)</p><table id=\"strata\"><tr><th>stratum"
            "</th><th>calls seen</th><th>recorded</th></tr>\n",
            c->n - missed, c->n);
    for (int i = 0; i < c->n; i++) {
        fputs("<tr>", f);
        cell(f, c->s[i].label);
        fprintf(f, "<td>%lld</td><td>%lld</td></tr>\n", (long long)c->s[i].seen,
                (long long)c->s[i].recorded);
    }
    fputs("</table>\n", f);
}

/* The runtime FI verdicts, as the terminal prints them. */
void peat_report_html_runtime_table(FILE *f, const peat_campaign_result *r)
{
    if (r->n_runtime == 0) return;
    fputs("<table id=\"runtime\"><tr><th>runtime FI run</th><th>calls swapped</th><th>verdict"
          "</th><th>from iteration</th><th>final loss</th><th>golden band</th><th>max loss "
          "excess</th><th>weight distance / band</th></tr>\n",
          f);
    for (int j = 0; j < r->n_runtime; j++) {
        const peat_runtime_verdict *v = &r->runtime[j];
        double exc = isfinite(v->loss_excess) ? 100 * fmax(v->loss_excess, 0) : NAN;
        fputs("<tr>", f);
        cell(f, r->runtime_run[j]);
        fprintf(f, "<td>%lld</td><td>%s</td>", (long long)r->runtime_swapped[j],
                peat_detector_runtime_class_name(v->cls));
        if (v->iter >= 0)
            fprintf(f, "<td>%lld</td>", (long long)v->iter);
        else
            fputs("<td>-</td>", f);
        fprintf(f, "<td>%.4g</td><td>%.4g..%.4g</td><td>%+.1f%%</td><td>%.3gx</td></tr>\n",
                v->final_loss, v->band_lo, v->band_hi, exc, v->wdist_ratio);
    }
    fputs("</table>\n", f);
}

/* Max ULP and max relative error explode where the exact result is near zero (a sum of terms
 * that cancel): there a rounding-level error of the terms is huge relative to the tiny result,
 * for the golden kernel too. The bound-normalised error is the number that judges. */
void peat_report_html_read_note(FILE *f, const peat_campaign_result *r)
{
    const peat_signature *c = &r->cand;
    fputs("<p class=\"note\" id=\"read-note\"><b>How to read this.</b> The verdict rests on "
          "<i>error / bound</i>: each element's error divided by the rounding bound of its "
          "computation (at most 1: as accurate as fp32 arithmetic can guarantee in any summation "
          "order). <i>Max ULP</i> and <i>max relative error</i> are measured against the exact "
          "result alone, so they explode where that result is near zero (terms that cancel): an "
          "error of a few ULPs of the terms is then thousands of ULPs, or over 100%, of the tiny "
          "result, for the golden kernel as well. Compare them with the golden column, not with "
          "1.",
          f);
    if (c->max_norm <= 1 && (c->max_ulp > 64 || c->max_rel > 1e-3))
        fprintf(f,
                " Here: max ULP %.0f and max relative error %.3g, yet every element is within "
                "its bound (max error / bound %.3g), so these come from near-zero results.",
                c->max_ulp, c->max_rel, c->max_norm);
    fputs(" <i>rms vs golden</i> is the candidate's rms error over the golden's, each error "
          "scaled by its element's magnitude (docs/signature.md), the number the evidence "
          "quotes.</p>\n",
          f);
}
