/* html.c: report.html: verdict banner, findings with evidence, signature table, inline SVG plots
 * (error and ULP histograms candidate over golden, per-bit XOR histogram, the worst call's error
 * heatmap and region map, golden training loss) and the command that reproduces the run; no
 * script, no network. */
#include "harness/campaign/campaign.h"
#include "harness/report/report.h"
#include "harness/runtime/runtime.h"
#include "store/store.h"
#include "analyzer/analyzer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* An SVG plot element with its title (tooltip and heading). */
static void svg_open(FILE *f, const char *id, int w, int h, const char *title, int x)
{
    fprintf(f, "<svg id=\"%s\" class=\"plot\" width=\"%d\" height=\"%d\" role=\"img\"><title>", id,
            w, h);
    peat_report_escape(f, title);
    fprintf(f, "</title><text x=\"%d\" y=\"16\" class=\"t\">", x);
    peat_report_escape(f, title);
    fputs("</text>", f);
}

/* Grouped bars: two series (candidate, golden) over n labelled bins, heights as fractions. */
static void svg_bars(FILE *f, const char *id, const char *title, int n, const char *const *labels,
                     const double *a, const double *b, int log_scale)
{
    const int W = 640, H = 220, L = 40, B = 40, T = 24;
    double top = 0;
    for (int i = 0; i < n; i++) top = fmax(top, fmax(a[i], b[i]));
    if (top <= 0) top = 1;
    double bw = (double)(W - L - 10) / n;
    svg_open(f, id, W, H, title, L);
    fprintf(f,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"ax\"/><line x1=\"%d\" "
            "y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"ax\"/><text x=\"2\" y=\"%d\" "
            "class=\"y\">%.3g</text><text x=\"2\" y=\"%d\" class=\"y\">%s</text>",
            L, H - B, W - 10, H - B, L, T, L, H - B, T + 4, top, H - B, log_scale ? "1e-6" : "0");
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

static void svg_curve(FILE *f, const char *id, const char *title, int64_t n, const double *y)
{
    const int W = 640, H = 200, L = 50, B = 30, T = 24;
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(y[i])) lo = fmin(lo, y[i]), hi = fmax(hi, y[i]);
    if (!(hi > lo)) hi = lo + 1;
    svg_open(f, id, W, H, title, L);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"ax\"/>", L, H - B, W - 10,
            H - B);
    fprintf(f,
            "<text x=\"2\" y=\"%d\" class=\"y\">%.4g</text><text x=\"2\" y=\"%d\" "
            "class=\"y\">%.4g</text>",
            T + 4, hi, H - B, lo);
    fputs("<polyline class=\"c\" points=\"", f);
    for (int64_t i = 0; i < n; i++)
        if (isfinite(y[i]))
            fprintf(f, "%.1f,%.1f ", L + (double)i / (double)(n > 1 ? n - 1 : 1) * (W - L - 10),
                    H - B - (y[i] - lo) / (hi - lo) * (H - B - T));
    fprintf(f,
            "\"/><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"ax\"/><text x=\"%d\" "
            "y=\"%d\" class=\"y\">iteration 0 .. %lld</text><text x=\"%d\" y=\"%d\" "
            "class=\"k0\">&#8212; golden run's loss</text></svg>\n",
            L, T, L, H - B, L, H - 8, (long long)(n > 0 ? n - 1 : 0), W - 160, H - 8);
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

static void html_head(FILE *f, const peat_campaign_result *r)
{
    peat_report_html_begin(f, "run", "PEAT: ", r->cand.kernel);
}

/* The verdict banner and what was measured. */
static void html_banner(FILE *f, const peat_campaign_opts *o, const peat_campaign_result *r)
{
    const char *v = verdict_word(r->verdict);
    fprintf(f, "<div id=\"verdict\" class=\"%s\">", v);
    peat_report_escape(f, r->cand.kernel);
    fprintf(f, " on %s (", r->flow);
    peat_report_escape(f, r->device[0] ? r->device : r->backend);
    fprintf(f, "): <b>%s</b></div>\n", v);
    fprintf(f,
            "<p>%lld recorded %s calls replayed (%lld failed); errors against the fp64-exact "
            "output, normalised by the fp32 rounding bound; golden <code>",
            (long long)r->n_records, r->cand.op, (long long)r->n_kernel_failures);
    peat_report_escape(f, r->golden.kernel);
    fprintf(f, "</code>; seed %llu.", (unsigned long long)o->seed);
    if (r->blas[0]) {
        fputs(" Golden GEMM: ", f);
        peat_report_escape(f, r->blas);
        fputc('.', f);
    }
    if (r->precision[0]) {
        fputs(" Precision: ", f);
        peat_report_escape(f, r->precision);
        fputc('.', f);
    }
    fputs("</p>\n", f);
    peat_report_capture_note(f, o, r, 1);
}

static void html_findings(FILE *f, const peat_campaign_result *r)
{
    fputs("<section id=\"findings\">", f);
    for (int i = 0; i < r->n_findings; i++) {
        const peat_finding *fd = &r->findings[i];
        fprintf(f, "<h2 class=\"finding\">%s <small>", peat_detector_finding_name(fd->cls));
        peat_report_escape(f, fd->params);
        fprintf(f,
                " &middot; <span class=\"%s\">&nbsp;%s&nbsp;</span> &middot; confidence "
                "%.2f</small></h2><ul>",
                verdict_word(fd->accept), verdict_word(fd->accept), fd->confidence);
        if (fd->experiment[0]) {
            fputs("<li class=\"decided\"><b>decided by:</b> ", f);
            peat_report_escape(f, fd->experiment);
            if (fd->ruled_out[0]) {
                fputs(" &middot; <b>ruled out:</b> ", f);
                peat_report_escape(f, fd->ruled_out);
            }
            fputs("</li>", f);
        }
        for (int e = 0; e < fd->n_evidence; e++) {
            fputs("<li>", f);
            peat_report_escape(f, fd->evidence[e]);
            fputs("</li>", f);
        }
        fputs("</ul>\n", f);
    }
    fputs("</section>\n", f);
}

static void html_signature(FILE *f, const peat_campaign_result *r)
{
    const peat_signature *c = &r->cand, *g = &r->golden;
    fputs("<h2>Signature</h2><table id=\"signature\"><tr><th></th><th>", f);
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
    row(f, "rms error / magnitude (rms vs golden: the ratio)", "%.3g", c->rms_rel_mag,
        g->rms_rel_mag);
    row(f, "max relative error", "%.3g", c->max_rel, g->max_rel);
    row(f, "max ULP", "%.0f", c->max_ulp, g->max_ulp);
    row(f, "effective bits", "%.1f", c->eff_bits, g->eff_bits);
    row(f, "bias t", "%.2f", c->bias_t, g->bias_t);
    row(f, "NaN / Inf introduced", "%.0f", (double)(c->n_nan + c->n_inf),
        (double)(g->n_nan + g->n_inf));
    fputs("</table>\n", f);
}

/* Error (bound-normalised) and ULP histograms, and the per-bit XOR histogram. */
static void html_histograms(FILE *f, const peat_campaign_result *r)
{
    char elab[PEAT_PLOT_ERR_BINS][12];
    const char *el[PEAT_PLOT_ERR_BINS];
    for (int b = 0; b < PEAT_PLOT_ERR_BINS; b++) {
        int p = PEAT_PLOT_ERR_LO + b - 1;
        if (b == 0)
            snprintf(elab[b], sizeof elab[b], "<2^%d", PEAT_PLOT_ERR_LO);
        else if (b == PEAT_PLOT_ERR_BINS - 1)
            snprintf(elab[b], sizeof elab[b], "2^%d+", p);
        else if (b % 2 && b > 1)
            snprintf(elab[b], sizeof elab[b], "2^%d", p);
        else
            elab[b][0] = '\0'; /* every other bin unlabelled */
        el[b] = elab[b];
    }
    svg_bars(f, "plot-err", "error / bound (fraction of elements, log scale; 2^0 = the bound)",
             PEAT_PLOT_ERR_BINS, el, r->plots.err_hist[0], r->plots.err_hist[1], 1);
    static const char *const ulp_labels[PEAT_ULP_BINS] = {
        "0",     "1",      "2",       "3-4",     "5-8",    "9-16", "17-32",
        "33-64", "65-128", "129-256", "257-512", "513-1k", ">1k"};
    svg_bars(f, "plot-ulp", "ULP distance to the correctly rounded result (fraction, log scale)",
             PEAT_ULP_BINS, ulp_labels, r->cand.ulp_hist, r->golden.ulp_hist, 1);
    char lab[PEAT_BIT_POSITIONS][4];
    const char *labels[PEAT_BIT_POSITIONS];
    for (int b = 0; b < PEAT_BIT_POSITIONS; b++) {
        if (b % 4 == 0 || b == 31)
            snprintf(lab[b], sizeof lab[b], "%d", b);
        else
            lab[b][0] = 0;
        labels[b] = lab[b];
    }
    svg_bars(f, "plot-bits",
             "result XOR correctly rounded: bits set by position (0 = lsb, 31 = sign)",
             PEAT_BIT_POSITIONS, labels, r->cand.bit_hist, r->golden.bit_hist, 0);
}

/* Colour buckets of a bound-normalised error: 0 not finite (black); 1..12 up to the bound, white
 * to blue over 1e-4 .. 1 (log); 13..20 past it, orange to dark red over 1 .. 1e3 (log). One path
 * per bucket keeps a 48 x 64 map small. */
enum { HEAT_BUCKETS = 21 };

static int heat_bucket(double e)
{
    if (!isfinite(e)) return 0;
    if (e <= 1) return 1 + (int)lround(11 * (e <= 0 ? 0 : fmin(1, fmax(0, (log10(e) + 4) / 4))));
    return 13 + (int)lround(7 * fmin(1, log10(e) / 3));
}

static void heat_colour(int b, char *buf, size_t n)
{
    double t = (b - 1) / 11.0, u = (b - 13) / 7.0;
    if (b == 0)
        snprintf(buf, n, "#000");
    else if (b <= 12)
        snprintf(buf, n, "#%02x%02x%02x", (int)(247 - 214 * t), (int)(251 - 138 * t),
                 (int)(255 - 74 * t));
    else
        snprintf(buf, n, "#%02x%02x%02x", (int)(253 - 88 * u), (int)(174 - 174 * u),
                 (int)(97 - 59 * u));
}

/* The cells of one bucket as one path (region: the cells holding gross errors). */
static void grid_path(FILE *f, const peat_plot_data *p, int bucket, int region, double x0,
                      double y0, double cw, double ch)
{
    int started = 0;
    char col[16];
    for (int i = 0; i < p->grid_rows; i++)
        for (int j = 0; j < p->grid_cols; j++) {
            double e = p->grid[i * p->grid_cols + j];
            int in = region ? !(e <= PEAT_GROSS_FACTOR) : heat_bucket(e) == bucket;
            if (!in) continue;
            if (!started) {
                heat_colour(bucket, col, sizeof col);
                fprintf(f, "<path fill=\"%s\" d=\"", region ? "#c33" : col);
                started = 1;
            }
            fprintf(f, "M%.1f %.1fh%.2fv%.2fh-%.2fz", x0 + j * cw, y0 + i * ch, cw + 0.05,
                    ch + 0.05, cw + 0.05);
        }
    if (started) fputs("\"/>", f);
}

/* The worst call's error map, or (region) only the cells holding gross errors. */
static void svg_grid(FILE *f, const char *id, const char *title, const peat_plot_data *p,
                     int region)
{
    const int W = 640, L = 10, T = 24;
    double cw = (double)(W - 2 * L) / p->grid_cols, ch = fmin(cw, 360.0 / p->grid_rows);
    /* below the map: the caption, and (error map) a line for the colour key */
    int H = T + (int)ceil(ch * p->grid_rows) + 22 + (region ? 0 : 18);
    svg_open(f, id, W, H, title, L);
    if (region) {
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%.1f\" fill=\"#eee\"/>", L, T,
                cw * p->grid_cols, ch * p->grid_rows);
        grid_path(f, p, 0, 1, L, T, cw, ch);
    } else
        for (int b = 0; b < HEAT_BUCKETS; b++) grid_path(f, p, b, 0, L, T, cw, ch);
    if (!region) /* the colour key: error / bound at some buckets' middles */
        for (int b = 0; b < HEAT_BUCKETS; b += 4) {
            char col[16];
            heat_colour(b, col, sizeof col);
            fprintf(f,
                    "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\" "
                    "stroke=\"#999\"/><text x=\"%d\" y=\"%d\" class=\"y\">%s</text>",
                    L + 70 * (b / 4), H - 34, col, L + 13 + 70 * (b / 4), H - 25,
                    b == 0    ? "NaN/Inf"
                    : b == 4  ? "1e-3"
                    : b == 8  ? "0.04"
                    : b == 12 ? "1 (bound)"
                    : b == 16 ? "20"
                              : "1e3");
        }
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" class=\"y\">%lld x %lld output, %d x %d cells (each the "
            "largest error it covers)%s</text></svg>\n",
            L, H - 6, (long long)p->worst_rows, (long long)p->worst_cols, p->grid_rows,
            p->grid_cols, region ? "; red: gross errors, over 16 bounds" : "");
}

static void html_heatmaps(FILE *f, const peat_campaign_result *r)
{
    const peat_plot_data *p = &r->plots;
    if (!p->have_worst || p->grid_rows == 0) return;
    char title[200];
    snprintf(title, sizeof title,
             "error / bound, worst call (record %lld, max %.3g); red: over the bound",
             (long long)p->worst_call, p->worst_e);
    svg_grid(f, "plot-heat", title, p, 0);
    /* structural findings (bit flips, stuck bits, tiles, corrupted regions): where they are */
    if (r->cand.n_gross > 0)
        svg_grid(f, "plot-region", "region map, worst call: elements with gross errors", p, 1);
}

/* Which layers, phases and shapes the verdict rests on, with each group's worst error. */
static void html_coverage(FILE *f, const peat_campaign_result *r)
{
    const peat_plot_data *p = &r->plots;
    if (p->n_coverage == 0) return;
    fputs("<h2>Coverage</h2><table id=\"coverage\"><tr><th>layer</th><th>phase</th>"
          "<th>output</th><th>calls</th><th>iterations</th><th>max error / bound<br>candidate"
          "</th><th>golden</th></tr>\n",
          f);
    for (int i = 0; i < p->n_coverage; i++) {
        const peat_plot_coverage *c = &p->coverage[i];
        fputs("<tr><td>", f);
        peat_report_escape(f, c->layer[0] ? c->layer : "-");
        fprintf(f,
                "</td><td>%s</td><td>%lld x %lld</td><td>%lld</td><td>%lld-%lld</td><td>%.3g</td>"
                "<td>%.3g</td></tr>\n",
                c->phase, (long long)c->rows, (long long)c->cols, (long long)c->calls,
                (long long)c->iter_lo, (long long)c->iter_hi, c->max_e[0], c->max_e[1]);
    }
    if (p->coverage_other_calls)
        fprintf(f, "<tr><td colspan=\"7\">%lld more calls in other groups</td></tr>\n",
                (long long)p->coverage_other_calls);
    fputs("</table>\n", f);
}

/* Predicted and actual time per stage of a --budget run. */
static void html_timing(FILE *f, const peat_campaign_opts *o, const peat_campaign_result *r)
{
    if (!(r->budget_s > 0)) return;
    const char *n[] = {"plan", "profile", "playback", "probes", "analyze", "runtime", "total"};
    double p[] = {r->t_plan,       r->pred_profile, r->pred_playback, r->pred_probe,
                  r->pred_analyze, r->pred_runtime, r->pred_total};
    double a[] = {r->t_plan,    r->t_profile, r->t_playback, r->t_probe,
                  r->t_analyze, r->t_runtime, r->t_total};
    fprintf(f,
            "<h2>Time: predicted and actual (budget %.1f s)</h2>\n<table><tr><th>stage</th>"
            "<th>predicted s</th><th>actual s</th></tr>\n",
            r->budget_s);
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
        if (!peat_report_is_capture(o) || strcmp(n[i], "profile")) /* a capture has none */
            fprintf(f, "<tr><td>%s</td><td>%.2f</td><td>%.2f</td></tr>\n", n[i], p[i], a[i]);
    fputs("</table>\n<p><small>", f);
    peat_report_escape(f, r->plan_note);
    if (r->n_budget_skipped > 0)
        fprintf(f,
                "; %lld of %lld recorded calls not replayed (the run went slower than "
                "predicted)",
                (long long)r->n_budget_skipped, (long long)r->n_records);
    if (r->runtime_iters > 0 && r->plan_iters > 0 && r->runtime_iters != r->plan_iters)
        fprintf(f,
                "; runtime FI trained %lld iterations of the %lld planned (the run went %s "
                "than predicted)",
                (long long)r->runtime_iters, (long long)r->plan_iters,
                r->runtime_iters < r->plan_iters ? "slower" : "faster");
    fputs("</small></p>\n", f);
}

/* The training curve comes from the campaign file, the profile stage's record of it. */
static void html_loss(FILE *f, const peat_campaign_result *r)
{
    char h5[600];
    snprintf(h5, sizeof h5, "%s/campaign.h5", r->out_dir);
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
        svg_curve(f, "plot-loss", "golden training loss per iteration", n, y);
        free(y);
    }
    peat_store_close(s);
}

peat_status peat_report_html(FILE *f, const peat_campaign_opts *o, const peat_campaign_result *r)
{
    html_head(f, r);
    html_banner(f, o, r);
    html_findings(f, r);
    peat_report_html_runtime_table(f, r);
    peat_report_runtime_html(f, r->rt);
    html_signature(f, r);
    peat_report_html_read_note(f, r);
    fputs("<h2>Errors</h2>\n", f);
    html_histograms(f, r);
    html_heatmaps(f, r);
    peat_report_html_probes(f, r);
    html_coverage(f, r);
    peat_report_html_strata(f, r);
    html_loss(f, r);
    html_timing(f, o, r);
    fputs("<h2>Reproduce</h2><pre id=\"command\">", f);
    peat_report_escape(f, o->argv && o->argv[0] ? o->argv : "(command line not recorded)");
    fprintf(f, "</pre><p><small>peat %s &middot; ", PEAT_VERSION_STRING);
    peat_report_stage_times(f, o, r);
    fputs(" &middot; signature.json has every number</small></p>\n", f);
    peat_report_html_end(f);
    return ferror(f) ? PEAT_ERROR(PEAT_ERR_IO, "cannot write report.html") : PEAT_OK;
}
