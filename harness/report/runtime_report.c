/* runtime_report.c: the runtime FI verdicts in the terminal and summary.md, and report.html's
 * loss and weight-distance curves of each faulty run over the golden band (inline SVG). */
#include "harness/campaign/campaign.h"
#include "harness/report/report.h"
#include "harness/runtime/runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void peat_report_runtime_table(FILE *f, const peat_campaign_result *r, int md)
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
                peat_detector_runtime_class_name(v->cls), iter, v->final_loss, band, exc, wd);
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

/* The band as a shaded polygon between lo and hi, at least BAND_MIN_PX tall so that a band
 * far narrower than the curve's range (honest reorderings move the loss by 1e-5) stays visible. */
enum { BAND_MIN_PX = 5 };

static void band_area(FILE *f, const plot *p, const double *lo, const double *hi)
{
    fputs("<polygon class=\"band\" fill=\"#bbb\" fill-opacity=\"0.7\" stroke=\"#888\" "
          "stroke-width=\"0.5\" points=\"",
          f);
    for (int64_t i = 0; i < p->n; i++) {
        double a = py(p, hi[i]), b = py(p, lo[i]), pad = fmax(0, (BAND_MIN_PX - (b - a)) / 2);
        fprintf(f, "%.1f,%.1f ", px(p, i), a - pad);
    }
    for (int64_t i = p->n - 1; i >= 0; i--) {
        double a = py(p, hi[i]), b = py(p, lo[i]), pad = fmax(0, (BAND_MIN_PX - (b - a)) / 2);
        fprintf(f, "%.1f,%.1f ", px(p, i), b + pad);
    }
    fputs("\"/>", f);
}

/* The iteration axis: ticks at about six round iteration numbers, and its name. */
static void x_axis(FILE *f, const plot *p)
{
    static const int mant[3] = {1, 2, 5};
    int64_t last = p->n > 1 ? p->n - 1 : 1, step = 1, decade = 1;
    for (int k = 0; last / step > 6; step = mant[k] * decade)
        if (++k == 3) k = 0, decade *= 10;
    for (int64_t i = 0; i <= last; i += step)
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"ax\"/><text "
                "x=\"%.1f\" y=\"%d\" class=\"l\">%lld</text>",
                px(p, i), p->H - p->B, px(p, i), p->H - p->B + 4, px(p, i), p->H - p->B + 14,
                (long long)i);
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"xlabel\" font-size=\"11\">iteration</text>",
            p->W - 60, p->H - p->B + 14);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"ax\"/>", p->L, p->T, p->L,
            p->H - p->B);
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
    x_axis(f, p);
    for (int j = 0; j < rt->n_faulty && j < 4; j++) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"%s\" font-size=\"11\">&#9632; ", p->L + 190 * j,
                p->H - 6, run_colours[j]);
        peat_report_escape(f, rt->faulty[j].label);
        fputs("</text>", f);
    }
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" fill=\"#888\" font-size=\"11\">&#9632; golden band "
            "(at least %d px)</text>",
            p->W - 190, p->T + 2, BAND_MIN_PX);
    if (!p->log_scale)
        fprintf(f,
                "<text x=\"%d\" y=\"%d\" fill=\"#777\" font-size=\"11\">&#8212; golden "
                "run</text>",
                p->W - 190, p->T + 16);
}

void peat_report_runtime_html(FILE *f, const peat_runtime_result *rt)
{
    if (!rt || rt->n < 1) return;
    fputs("<h2>Runtime FI: training with the candidate in the loop</h2><p>Grey: the golden band "
          "widened by its margin (docs/fault-injection.md), drawn at least a few pixels tall "
          "where it is narrower (honest reorderings move the loss very little); lines: the "
          "faulty runs; x axis: training iteration.</p>\n",
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
