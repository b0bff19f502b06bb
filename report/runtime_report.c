/* runtime_report.c: the runtime FI verdicts in the terminal and summary.md, and report.html's
 * loss and weight-distance curves of each faulty run over the golden band (inline SVG). */
#include "campaign/campaign.h"
#include "report/report.h"
#include "campaign/runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void peat_runtime_table(FILE *f, const peat_campaign_result *r, int md)
{
    if (r->n_runtime == 0) return;
    if (md)
        fprintf(f,
                "\n## Runtime FI: training with the candidate in the loop\n\nBand: the golden "
                "run and %d reruns with `reorder` (docs/fault-injection.md).\n\n| run | calls "
                "swapped | verdict | from iteration | final loss | band | max loss excess | "
                "weight distance / band |\n|---|---:|---|---:|---:|---|---:|---:|\n",
                r->runtime_band - 1);
    else
        fprintf(f, "\n%-30s %8s  %-19s %5s %10s %17s %9s %10s\n", "runtime FI run", "swapped",
                "verdict", "iter", "final loss", "golden band", "loss exc", "wdist/band");
    for (int j = 0; j < r->n_runtime; j++) {
        const peat_runtime_verdict *v = &r->runtime[j];
        char band[40], iter[24];
        snprintf(band, sizeof band, "%.4g..%.4g", v->band_lo, v->band_hi);
        snprintf(iter, sizeof iter, v->iter >= 0 ? "%lld" : "-", (long long)v->iter);
        /* a diverged run has no finite excess or distance to show: "-", not "+nan%" or "0x";
         * a loss below the band's top shows its sign */
        char exc[24] = "-", wd[24] = "-";
        if (isfinite(v->loss_excess)) snprintf(exc, sizeof exc, "%+.1f%%", 100 * v->loss_excess);
        if (isfinite(v->wdist_ratio) && (v->cls != PEAT_RUNTIME_DIVERGES || v->wdist_ratio > 0))
            snprintf(wd, sizeof wd, v->wdist_ratio < 1e4 ? "%.3gx" : "%.2gx", v->wdist_ratio);
        fprintf(f,
                md ? "| %s | %lld | %s | %s | %.4g | %s | %s | %s |\n"
                   : "%-30.30s %8lld  %-19s %5s %10.4g %17s %9s %10s\n",
                r->runtime_run[j], (long long)r->runtime_swapped[j],
                peat_runtime_class_name(v->cls), iter, v->final_loss, band, exc, wd);
    }
}

/* y-range of the finite values of n series of length len. */
static void range_of(const double *const *y, int n, int64_t len, int log_scale, double *lo,
                     double *hi)
{
    *lo = INFINITY, *hi = -INFINITY;
    for (int s = 0; s < n; s++)
        for (int64_t i = 0; y[s] && i < len; i++) {
            double v = y[s][i];
            if (!isfinite(v) || (log_scale && v <= 0)) continue;
            v = log_scale ? log10(v) : v;
            *lo = fmin(*lo, v), *hi = fmax(*hi, v);
        }
    if (!isfinite(*lo)) *lo = 0, *hi = 1;
    if (!(*hi > *lo)) *hi = *lo + 1;
}

typedef struct plot {
    int W, H, L, B, T;
    int64_t n;
    double lo, hi;
    int log_scale;
} plot;

static double px(const plot *p, int64_t i)
{
    return p->L + (double)i / (double)(p->n > 1 ? p->n - 1 : 1) * (p->W - p->L - 10);
}
static double py(const plot *p, double v)
{
    if (p->log_scale) v = v > 0 ? log10(v) : p->lo;
    v = fmin(fmax(v, p->lo), p->hi);
    return p->H - p->B - (v - p->lo) / (p->hi - p->lo) * (p->H - p->B - p->T);
}

static void polyline(FILE *f, const plot *p, const double *y, const char *colour, double width)
{
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" points=\"", colour,
            width);
    for (int64_t i = 0; i < p->n; i++)
        if (isfinite(y[i]) && (!p->log_scale || y[i] > 0))
            fprintf(f, "%.1f,%.1f ", px(p, i), py(p, y[i]));
    fputs("\"/>", f);
}

/* The band as a shaded polygon between lo and hi; outlined, so that a band thinner than a pixel
 * (honest reruns that agree to the last digits) still shows as a line. */
static void band_area(FILE *f, const plot *p, const double *lo, const double *hi)
{
    fputs("<polygon fill=\"#c8d3e0\" stroke=\"#9aabc0\" stroke-width=\"2\" "
          "stroke-linejoin=\"round\" points=\"",
          f);
    for (int64_t i = 0; i < p->n; i++) fprintf(f, "%.1f,%.1f ", px(p, i), py(p, hi[i]));
    for (int64_t i = p->n - 1; i >= 0; i--) fprintf(f, "%.1f,%.1f ", px(p, i), py(p, lo[i]));
    fputs("\"/>", f);
}

static const char *const run_colours[4] = {"#c33", "#36c", "#d90", "#2a7"};

static void frame(FILE *f, const plot *p, const char *title, const peat_runtime_result *rt)
{
    fprintf(f, "<svg width=\"%d\" height=\"%d\" role=\"img\"><title>", p->W, p->H);
    peat_report_escape(f, title);
    fprintf(f, "</title><text x=\"%d\" y=\"16\" class=\"t\">", p->L);
    peat_report_escape(f, title);
    fprintf(f, "</text><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"ax\"/>", p->L,
            p->H - p->B, p->W - 10, p->H - p->B);
    fprintf(f,
            "<text x=\"4\" y=\"%d\" class=\"y\">%.3g</text><text x=\"4\" y=\"%d\" "
            "class=\"y\">%.3g</text>",
            p->T + 4, p->log_scale ? pow(10, p->hi) : p->hi, p->H - p->B,
            p->log_scale ? pow(10, p->lo) : p->lo);
    for (int j = 0; j < rt->n_faulty && j < 4; j++) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"%s\" font-size=\"11\">&#9632; ", p->L + 190 * j,
                p->H - 6, run_colours[j]);
        peat_report_escape(f, rt->faulty[j].label);
        fputs("</text>", f);
    }
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" fill=\"#9aabc0\" font-size=\"11\">&#9632; golden band</text>",
            p->W - 110, p->T + 2);
    /* the iteration axis: five ticks from the first to the last iteration */
    for (int k = 0; k <= 4; k++) {
        int64_t it = (p->n - 1) * k / 4;
        double x = px(p, it);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"ax\"/><text "
                "x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">%lld</text>",
                x, p->H - p->B, x, p->H - p->B + 4, x, p->H - p->B + 14, (long long)it);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\">iteration</text>",
            p->W - 10, p->H - p->B + 26);
}

void peat_runtime_html(FILE *f, const peat_runtime_result *rt)
{
    if (!rt || rt->n < 1) return;
    fputs("<h2>Runtime FI: training with the candidate in the loop</h2><p>Blue-grey area: the "
          "golden band widened by its margin (docs/fault-injection.md), over the training "
          "iterations; grey line: the golden run; coloured lines: the faulty runs.</p>\n",
          f);
    int64_t n = rt->n;
    double *lo = malloc((size_t)n * sizeof *lo), *hi = malloc((size_t)n * sizeof *hi);
    double *wlo = calloc((size_t)n, sizeof *wlo), *whi = malloc((size_t)n * sizeof *whi);
    if (!lo || !hi || !wlo || !whi) goto out;
    for (int64_t t = 0; t < n; t++) peat_detector_band_widened(&rt->b, t, &lo[t], &hi[t], &whi[t]);
    for (int pass = 0; pass < 2; pass++) {
        const double *y[PEAT_RUNTIME_MAX_FREQS + 2] = {pass ? whi : lo, pass ? whi : hi};
        for (int j = 0; j < rt->n_faulty; j++)
            y[2 + j] = pass ? rt->faulty[j].wdist : rt->faulty[j].loss;
        plot p = {760, 250, 60, 46, 26, n, 0, 0, pass};
        range_of(y, 2 + rt->n_faulty, n, pass, &p.lo, &p.hi);
        if (pass) p.lo = fmax(p.lo, p.hi - 8); /* eight decades are enough to read */
        frame(f, &p,
              pass ? "relative L2 distance of the weights from the golden run (log scale)"
                   : "training loss per iteration",
              rt);
        band_area(f, &p, pass ? wlo : lo, pass ? whi : hi);
        if (!pass) polyline(f, &p, rt->band[0].loss, "#777", 1);
        for (int j = 0; j < rt->n_faulty && j < 4; j++)
            polyline(f, &p, pass ? rt->faulty[j].wdist : rt->faulty[j].loss, run_colours[j], 1.5);
        fputs("</svg>\n", f);
    }
out:
    free(lo), free(hi), free(wlo), free(whi);
}
