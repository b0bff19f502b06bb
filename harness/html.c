/* html.c: report.html: the verdict, findings, signature table and inline SVG plots (ULP distance
 * histogram, error bits by position, golden training loss), readable with no network access. */
#include "harness/campaign.h"
#include "store/store.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Grouped bars: two series (candidate, golden) over n labelled bins, heights as fractions. */
static void svg_bars(FILE *f, const char *title, int n, const char *const *labels, const double *a,
                     const double *b, int log_scale)
{
    const int W = 640, H = 220, L = 40, B = 40, T = 24;
    double top = 0;
    for (int i = 0; i < n; i++) top = fmax(top, fmax(a[i], b[i]));
    if (top <= 0) top = 1;
    double bw = (double)(W - L - 10) / n;
    fprintf(f, "<svg width=\"%d\" height=\"%d\" role=\"img\"><title>", W, H);
    peat_report_escape(f, title);
    fprintf(f, "</title><text x=\"%d\" y=\"16\" class=\"t\">", L);
    peat_report_escape(f, title);
    fputs("</text>", f);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"ax\"/>", L, H - B, W - 10,
            H - B);
    for (int i = 0; i < n; i++) {
        const double v[2] = {a[i], b[i]};
        for (int s = 0; s < 2; s++) {
            double h = v[s] <= 0   ? 0
                       : log_scale ? fmax(0, (log10(v[s]) + 6) / (log10(top) + 6)) * (H - B - T)
                                   : v[s] / top * (H - B - T);
            fprintf(f,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                    "class=\"s%d\"><title>%.4g</title></rect>",
                    L + i * bw + 1 + s * bw / 2, H - B - h, bw / 2 - 1, h, s, v[s]);
        }
        if (labels[i][0])
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"l\">%s</text>", L + i * bw + bw / 2,
                    H - B + 14, labels[i]);
    }
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" class=\"k0\">&#9632; candidate</text><text x=\"%d\" y=\"%d\" "
            "class=\"k1\">&#9632; golden</text>",
            W - 180, H - 4, W - 90, H - 4);
    fputs("</svg>\n", f);
}

static void svg_curve(FILE *f, const char *title, int64_t n, const double *y)
{
    const int W = 640, H = 200, L = 50, B = 30, T = 24;
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(y[i])) lo = fmin(lo, y[i]), hi = fmax(hi, y[i]);
    if (!(hi > lo)) hi = lo + 1;
    fprintf(f, "<svg width=\"%d\" height=\"%d\" role=\"img\"><title>", W, H);
    peat_report_escape(f, title);
    fprintf(f, "</title><text x=\"%d\" y=\"16\" class=\"t\">", L);
    peat_report_escape(f, title);
    fprintf(f, "</text><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"ax\"/>", L, H - B,
            W - 10, H - B);
    fprintf(f,
            "<text x=\"2\" y=\"%d\" class=\"y\">%.4g</text><text x=\"2\" y=\"%d\" "
            "class=\"y\">%.4g</text>",
            T + 4, hi, H - B, lo);
    fputs("<polyline class=\"c\" points=\"", f);
    for (int64_t i = 0; i < n; i++)
        if (isfinite(y[i]))
            fprintf(f, "%.1f,%.1f ", L + (double)i / (double)(n > 1 ? n - 1 : 1) * (W - L - 10),
                    H - B - (y[i] - lo) / (hi - lo) * (H - B - T));
    fprintf(f, "\"/><text x=\"%d\" y=\"%d\" class=\"y\">iteration 0 .. %lld</text></svg>\n", L,
            H - 8, (long long)(n > 0 ? n - 1 : 0));
}

static const char *verdict_word(peat_acceptance a)
{
    return a == PEAT_ACCEPT_PASS ? "PASS" : a == PEAT_ACCEPT_WARN ? "WARN" : "FAIL";
}

static void row(FILE *f, const char *name, const char *fmt, double c, double g)
{
    fprintf(f, "<tr><td>%s</td><td>", name);
    fprintf(f, fmt, c);
    fputs("</td><td>", f);
    fprintf(f, fmt, g);
    fputs("</td></tr>\n", f);
}

static const char *const style =
    "body{font:14px sans-serif;max-width:900px;margin:2em auto;color:#222}"
    "h1 span{padding:2px 8px;border-radius:4px;color:#fff}.PASS{background:#2a7}"
    ".WARN{background:#d90}.FAIL{background:#c33}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "td:first-child{text-align:left}.t{font-weight:bold;font-size:13px}"
    ".l{font-size:10px;text-anchor:middle}.y{font-size:10px}.ax{stroke:#888}.s0{fill:#36c}"
    ".s1{fill:#bbb}.k0{fill:#36c;font-size:11px}.k1{fill:#888;font-size:11px}"
    ".c{fill:none;stroke:#36c;stroke-width:1.5}li{margin:2px 0}";

/* The page's head, title with the verdict, and what was replayed. */
static void html_head(FILE *f, const peat_campaign_opts *o, const peat_campaign_result *r)
{
    fputs("<!doctype html><html><head><meta charset=\"utf-8\"><title>PEAT: ", f);
    peat_report_escape(f, r->cand.kernel);
    fprintf(f, "</title><style>%s</style></head><body>\n<h1>", style);
    peat_report_escape(f, r->cand.kernel);
    fprintf(f, " on %s <span class=\"%s\">%s</span></h1>\n", r->flow, verdict_word(r->verdict),
            verdict_word(r->verdict));
    fprintf(
        f,
        "<p>%lld recorded %s calls replayed (%lld failed); errors against the fp64-exact output, "
        "normalised by the fp32 rounding bound; seed %llu.</p>\n",
        (long long)r->n_records, r->cand.op, (long long)r->n_kernel_failures,
        (unsigned long long)o->seed);
}

static void html_findings(FILE *f, const peat_campaign_result *r)
{
    for (int i = 0; i < r->n_findings; i++) {
        const peat_finding *fd = &r->findings[i];
        fprintf(f, "<h2>%s <small>", peat_finding_name(fd->cls));
        peat_report_escape(f, fd->params);
        fprintf(f, " &middot; %s &middot; confidence %.2f</small></h2><ul>",
                verdict_word(fd->accept), fd->confidence);
        for (int e = 0; e < fd->n_evidence; e++) {
            fputs("<li>", f);
            peat_report_escape(f, fd->evidence[e]);
            fputs("</li>", f);
        }
        fputs("</ul>\n", f);
    }
}

static void html_signature_table(FILE *f, const peat_signature *c, const peat_signature *g)
{
    fputs("<h2>Signature</h2><table><tr><th></th><th>", f);
    peat_report_escape(f, c->kernel);
    fputs(" (candidate)</th><th>", f);
    peat_report_escape(f, g->kernel);
    fputs(" (golden)</th></tr>\n", f);
    row(f, "elements", "%.0f", (double)c->n_elems, (double)g->n_elems);
    row(f, "max error / bound", "%.3g", c->max_norm, g->max_norm);
    row(f, "median error / bound", "%.3g", c->p50_norm, g->p50_norm);
    row(f, "p99 error / bound", "%.3g", c->p99_norm, g->p99_norm);
    row(f, "elements over bound (%)", "%.3g", 100 * c->frac_over_bound, 100 * g->frac_over_bound);
    row(f, "max abs error", "%.3g", c->max_abs, g->max_abs);
    row(f, "rms abs error", "%.3g", c->rms_abs, g->rms_abs);
    row(f, "max relative error", "%.3g", c->max_rel, g->max_rel);
    row(f, "max ULP", "%.0f", c->max_ulp, g->max_ulp);
    row(f, "effective bits", "%.1f", c->eff_bits, g->eff_bits);
    row(f, "bias t", "%.2f", c->bias_t, g->bias_t);
    row(f, "NaN / Inf introduced", "%.0f", (double)(c->n_nan + c->n_inf),
        (double)(g->n_nan + g->n_inf));
    fputs("</table>\n", f);
}

/* The ULP-distance and error-bit histograms, candidate beside golden. */
static void html_histograms(FILE *f, const peat_signature *c, const peat_signature *g)
{
    static const char *const ulp_labels[PEAT_ULP_BINS] = {
        "0",     "1",      "2",       "3-4",     "5-8",    "9-16", "17-32",
        "33-64", "65-128", "129-256", "257-512", "513-1k", ">1k"};
    svg_bars(f, "ULP distance to the correctly rounded result (fraction of elements, log scale)",
             PEAT_ULP_BINS, ulp_labels, c->ulp_hist, g->ulp_hist, 1);
    char lab[PEAT_BIT_POSITIONS][4];
    const char *labels[PEAT_BIT_POSITIONS];
    for (int b = 0; b < PEAT_BIT_POSITIONS; b++) {
        if (b % 4 == 0 || b == 31)
            snprintf(lab[b], sizeof lab[b], "%d", b);
        else
            lab[b][0] = 0;
        labels[b] = lab[b];
    }
    svg_bars(f,
             "bits that differ from the correctly rounded result, by position (0 = mantissa lsb, "
             "31 = sign)",
             PEAT_BIT_POSITIONS, labels, c->bit_hist, g->bit_hist, 0);
}

/* The golden training loss, read back from the campaign file (the profile stage's record of it);
 * left out when the file cannot be read. */
static void html_loss_curve(FILE *f, const char *out_dir)
{
    char h5[600];
    snprintf(h5, sizeof h5, "%s/campaign.h5", out_dir);
    peat_store_t *s = NULL;
    if (peat_store_open(h5, 0, &s) != PEAT_OK) return;
    int64_t n = peat_store_metrics_count(s);
    double *y = n > 0 ? malloc((size_t)n * sizeof *y) : NULL;
    if (y) {
        for (int64_t i = 0; i < n; i++) {
            int64_t it;
            double acc;
            if (peat_store_metrics_read(s, i, &it, &y[i], &acc) != PEAT_OK) y[i] = NAN;
        }
        svg_curve(f, "golden training loss per iteration", n, y);
        free(y);
    }
    peat_store_close(s);
}

peat_status peat_report_html(FILE *f, const peat_campaign_opts *o, const peat_campaign_result *r)
{
    html_head(f, o, r);
    html_findings(f, r);
    html_signature_table(f, &r->cand, &r->golden);
    html_histograms(f, &r->cand, &r->golden);
    html_loss_curve(f, r->out_dir);
    fprintf(f,
            "<p><small>peat %s &middot; profile %.1f s, playback %.1f s, total %.1f s &middot; "
            "signature.json has every number</small></p></body></html>\n",
            PEAT_VERSION_STRING, r->t_profile, r->t_playback, r->t_total);
    return ferror(f) ? PEAT_ERROR(PEAT_ERR_IO, "cannot write report.html") : PEAT_OK;
}
