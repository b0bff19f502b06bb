/* report_probe.c: the coverage table (strata seen vs recorded), the probe table, the GEMM
 * property table and the differential diagnosis's experiments, for the terminal and summary.md
 * (report.html takes its rows from peat_report_diagnosis_row). */
#include "harness/campaign/campaign.h"
#include "harness/report/report.h"

#include <math.h>
#include <string.h>

static const char *accept_word(peat_acceptance a)
{
    return peat_detector_acceptance_name(a);
}

/* Which call sequences ran (stage_sequence.c), each call against the same call in a fresh
 * process. */
static void sequences_line(FILE *f, const peat_campaign_result *r, int md)
{
    if (!r->sequences[0]) return;
    fprintf(f, "%ssequences (calls, the kernel's state kept): %s; %lld calls, %lld stateful\n",
            md ? "\n" : "", r->sequences, (long long)r->n_sequence_calls, (long long)r->n_stateful);
}

void peat_report_coverage(FILE *f, const peat_campaign_result *r, int md)
{
    const peat_coverage *c = &r->coverage;
    if (c->n == 0) {
        sequences_line(f, r, md);
        return;
    }
    int missed = peat_campaign_coverage_missed(c);
    if (md) {
        fprintf(f, "## Coverage\n\n| stratum (op layer phase shapes dtype) | seen | recorded |\n"
                   "|---|---:|---:|\n");
        for (int i = 0; i < c->n; i++)
            fprintf(f, "| %s | %lld | %lld |\n", c->s[i].label, (long long)c->s[i].seen,
                    (long long)c->s[i].recorded);
        fprintf(f, "\n");
    } else {
        fprintf(f, "\ncoverage: %d of %d strata recorded (op, layer, phase, shapes, dtype)\n",
                c->n - missed, c->n);
    }
    for (int i = 0; i < c->n; i++)
        if (c->s[i].seen > 0 && c->s[i].recorded == 0)
            fprintf(f, "%swarning: stratum never recorded: %s (%lld calls)\n", md ? "- " : "",
                    c->s[i].label, (long long)c->s[i].seen);
    sequences_line(f, r, md);
}

void peat_report_probes(FILE *f, const peat_campaign_result *r, int md)
{
    if (r->n_probes == 0 && !r->have_props) return;
    fprintf(f,
            md ? "## Probes\n\n| probe | finding | verdict |\n|---|---|---|\n"
               : "\n%-58s %-18s %s\n",
            "probe", "finding", "verdict");
    for (int i = 0; i < r->n_probes; i++) {
        const peat_probe_outcome *p = &r->probes[i];
        fprintf(f, md ? "| %s | %s %s | %s |\n" : "%-58.58s %-18s %s\n", p->label,
                peat_detector_finding_name(p->f.cls), md ? p->f.params : accept_word(p->f.accept),
                md ? accept_word(p->f.accept) : "");
    }
    if (!r->have_props) return;
    fprintf(f, md ? "\n| %s | %s | %s |\n|---|---|---|\n" : "\n%-58s %-18s %s\n",
            "arithmetic property", r->props_cand.rounding[0] ? r->cand.kernel : "candidate",
            r->golden.kernel);
    const char *name;
    char vc[64], vg[64];
    for (int i = 0; peat_analyzer_gemm_props_row(&r->props_cand, i, &name, vc, sizeof vc); i++) {
        peat_analyzer_gemm_props_row(&r->props_gold, i, &name, vg, sizeof vg);
        fprintf(f, md ? "| %s | %s | %s |\n" : "%-58s %-18s %s\n", name, vc, vg);
    }
    if (md) fprintf(f, "\n");
}

void peat_report_decided(FILE *f, const peat_finding *fd, const char *prefix, const char *suffix)
{
    if (!fd->experiment[0]) return;
    fprintf(f, "%s%s%s%s%s", prefix, fd->experiment, fd->ruled_out[0] ? "; ruled out: " : "",
            fd->ruled_out, suffix);
}

int peat_report_diagnosis_row(const peat_campaign_result *r, int k, const char **name, char *out,
                              size_t n)
{
    const peat_diagnosis *d = &r->diagnosis;
    if (!d->ran || k < 0 || k >= PEAT_EXP_COUNT) return 0;
    const peat_exp_outcome *e = &d->exp[k];
    *name = peat_analyzer_exp_name((peat_exp_kind)k);
    if (e->ran == 0)
        snprintf(out, n, "%s", d->base[0] && !d->base_cancel ? "does not apply" : "not run");
    else if (e->ran < 0)
        snprintf(out, n, "the kernel failed on it");
    else if (k == PEAT_EXP_JITTER) {
        int w = snprintf(out, n, "errors %s (correlation %.2f with the base's)",
                         e->corr >= 0.8   ? "kept"
                         : e->corr <= 0.4 ? "redrawn"
                                          : "partly kept",
                         e->corr);
        for (int o = 0, first = 1; d->n_outputs > 1 && o < PEAT_MAX_IO && w > 0 && (size_t)w < n;
             o++)
            if (!isnan(e->corr_out[o])) {
                w += snprintf(out + w, n - (size_t)w, "%s output %d: %.2f", first ? ";" : ",", o,
                              e->corr_out[o]);
                first = 0;
            }
    } else if (k == PEAT_EXP_PERMUTE)
        snprintf(out, n,
                 "gross errors stay at their positions %.2f, follow the values %.2f; errors "
                 "correlate %.2f by position, %.2f with the values",
                 e->stay, e->follow, e->corr_stay, e->corr_follow);
    else if (k == PEAT_EXP_INTEGERS && e->exact_outputs)
        snprintf(out, n,
                 "%lld of %lld outputs not exact (where every order and format of >= 8 bits is)",
                 (long long)e->n_not_exact, (long long)e->n_exact);
    else if (e->fails)
        snprintf(out, n, "fails: %lld gross, %lld non-finite of %lld, max %.3g bounds",
                 (long long)e->n_gross, (long long)e->n_nonfinite, (long long)e->n, e->max_norm);
    else
        snprintf(out, n, "within the bound (max %.3g bounds)", e->max_norm);
    return 1;
}

void peat_report_diagnosis(FILE *f, const peat_campaign_result *r, int md)
{
    const peat_diagnosis *d = &r->diagnosis;
    if (!d->ran) return;
    if (!d->base[0]) {
        fprintf(f,
                md ? "## Differential diagnosis\n\nNo single call fails on its own: no base for "
                     "the experiments.\n\n"
                   : "\ndifferential diagnosis: no single call fails on its own (%.1f s)\n",
                d->seconds);
        return;
    }
    fprintf(f,
            md ? "## Differential diagnosis\n\nBase: %s (%.1f s).\n\n| experiment | outcome |\n"
                 "|---|---|\n"
               : "\ndifferential diagnosis on %s (%.1f s):\n",
            d->base, d->seconds);
    const char *name;
    char out[160];
    for (int k = 0; peat_report_diagnosis_row(r, k, &name, out, sizeof out); k++)
        fprintf(f, md ? "| %s | %s |\n" : "  %-16s %s\n", name, out);
    if (md) fputc('\n', f);
}
