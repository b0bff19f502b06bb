/* fi_report.c: outcome tables of a playback FI campaign: terminal, markdown, HTML (stacked
 * outcome bars per model, per-bit SDC curve with its Wilson band, inline SVG). */
#include "run/fi.h"
#include "report/report.h"

#include "campaign/campaign.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define Z95 1.959963984540054

/* The trials of one series (model spec and site as the model table keys them). */
static int64_t series_filter(const peat_fi_result *r, const char *key, peat_inject_trial *out)
{
    int64_t n = 0;
    for (int64_t i = 0; i < r->n_trials; i++) {
        char k[300];
        snprintf(k, sizeof k, "%s @%s", r->trials[i].model,
                 peat_inject_site_name(r->trials[i].site));
        if (!strcmp(k, key)) out[n++] = r->trials[i];
    }
    return n;
}

static void cell(FILE *f, const peat_inject_tally *t, int o, int md)
{
    peat_inject_rate w = peat_inject_wilson(t->n[o], t->total, Z95);
    fprintf(f, md ? " %.1f%% [%.1f, %.1f] |" : " %5.1f%% [%4.1f,%5.1f]", 100 * w.p, 100 * w.lo,
            100 * w.hi);
}

static void rows_print(FILE *f, const char *head, const peat_inject_table *tab, int md)
{
    for (int i = 0; i < tab->n; i++) {
        const peat_inject_tally *t = &tab->rows[i].t;
        if (md)
            fprintf(f, "| %s | %s | %lld |", head, tab->rows[i].key, (long long)t->total);
        else
            fprintf(f, "%-40.40s %-18.18s %6lld", head, tab->rows[i].key, (long long)t->total);
        for (int o = 0; o < PEAT_INJECT_OUTCOME_COUNT; o++) cell(f, t, o, md);
        fputc('\n', f);
    }
}

static void header(FILE *f, const char *a, const char *b, int md)
{
    if (md) {
        fprintf(f, "| %s | %s | trials | MASKED | TOLERABLE | SDC | DUE |\n", a, b);
        fputs("|---|---|---:|---:|---:|---:|---:|\n", f);
    } else {
        fprintf(f, "%-40s %-18s %6s %-20s %-20s %-20s %-20s\n", a, b, "trials", " MASKED",
                " TOLERABLE", " SDC", " DUE");
    }
}

/* Outcomes per model x op, then by layer, phase and bit over all trials. */
static void tables(FILE *f, const peat_fi_result *r, int md)
{
    peat_inject_trial *sub = malloc((size_t)(r->n_trials + 1) * sizeof *sub);
    if (!sub) return;
    fprintf(f, md ? "\n### Outcomes per model x op (95%% Wilson intervals)\n\n"
                  : "\noutcomes per model x op (rate [95%% Wilson interval]):\n");
    header(f, "model @ site", "op", md);
    const peat_inject_table *models = &r->tab[PEAT_INJECT_BY_MODEL];
    for (int i = 0; i < models->n; i++) {
        int64_t n = series_filter(r, models->rows[i].key, sub);
        peat_inject_table t;
        if (peat_inject_table_build(sub, n, PEAT_INJECT_BY_OP, &t) != PEAT_OK) continue;
        rows_print(f, models->rows[i].key, &t, md);
        peat_inject_table_free(&t);
    }
    free(sub);
    const peat_inject_group g[3] = {PEAT_INJECT_BY_LAYER, PEAT_INJECT_BY_PHASE, PEAT_INJECT_BY_BIT};
    for (int k = 0; k < 3; k++) {
        const peat_inject_table *t = &r->tab[g[k]];
        if (t->n == 0) continue;
        fprintf(f, md ? "\n### By %s (all models)\n\n" : "\nby %s (all models):\n",
                peat_inject_group_name(g[k]));
        header(f, "", peat_inject_group_name(g[k]), md);
        rows_print(f, "", t, md);
    }
}

void peat_fi_print(FILE *f, const peat_fi_result *r)
{
    tables(f, r, 0);
    fprintf(f,
            "\n%lld trials (%lld run now on %d thread(s), %lld resumed from the file) on %lld "
            "records; %.0f trials/s\nresults: %s/{fi-summary.md,fi-report.html,campaign.h5 "
            "/fi/trials}\n",
            (long long)r->n_trials, (long long)r->n_run, r->threads, (long long)r->n_resumed,
            (long long)r->n_records, r->trials_per_s, r->dir);
}

void peat_fi_markdown(FILE *f, const peat_fi_result *r)
{
    fprintf(f,
            "# PEAT playback fault injection\n\n%lld trials on %lld recorded calls. Outcomes "
            "(docs/fault-injection.md): MASKED bit-identical to golden, TOLERABLE within the "
            "rounding bound, SDC finite beyond it, DUE failure or NaN/Inf where golden is "
            "finite.\n",
            (long long)r->n_trials, (long long)r->n_records);
    tables(f, r, 1);
}

/* ---- HTML ---- */

static const char *const colours[PEAT_INJECT_OUTCOME_COUNT] = {"#9ecae1", "#a1d99b", "#fdae6b",
                                                               "#de2d26"};

/* One horizontal bar per model, split by outcome shares. */
static void svg_stacked(FILE *f, const peat_inject_table *t)
{
    const int W = 760, L = 300, R = 20, row = 26, T = 30;
    int H = T + row * t->n + 30;
    fprintf(f, "<svg width=\"%d\" height=\"%d\" role=\"img\"><title>outcomes per model</title>", W,
            H);
    fprintf(f, "<text x=\"10\" y=\"18\" class=\"t\">outcomes per model</text>");
    for (int i = 0; i < t->n; i++) {
        double x = L, y = T + row * i;
        fprintf(f, "<text x=\"%d\" y=\"%.0f\" class=\"l\" text-anchor=\"end\">", L - 6, y + 16);
        peat_report_escape(f, t->rows[i].key);
        fputs("</text>", f);
        for (int o = 0; o < PEAT_INJECT_OUTCOME_COUNT; o++) {
            double share = t->rows[i].t.total ? (double)t->rows[i].t.n[o] / t->rows[i].t.total : 0;
            double w = share * (W - L - R);
            fprintf(f,
                    "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>"
                    "%s %.1f%%</title></rect>",
                    x, y + 2, w, row - 6, colours[o],
                    peat_inject_outcome_name((peat_inject_outcome)o), 100 * share);
            x += w;
        }
    }
    for (int o = 0; o < PEAT_INJECT_OUTCOME_COUNT; o++)
        fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"%s\" class=\"l\">&#9632; %s</text>", L + 110 * o,
                H - 8, colours[o], peat_inject_outcome_name((peat_inject_outcome)o));
    fputs("</svg>\n", f);
}

/* SDC (and DUE) rate per bit position, with the SDC rate's 95% Wilson band. */
static void svg_bits(FILE *f, const peat_inject_table *t)
{
    const int W = 760, H = 260, L = 50, B = 36, T = 26;
    double bw = (double)(W - L - 10) / 32;
    fprintf(f, "<svg width=\"%d\" height=\"%d\" role=\"img\"><title>SDC rate per bit</title>", W,
            H);
    fprintf(f,
            "<text x=\"%d\" y=\"16\" class=\"t\">SDC (orange) and DUE (red) rate per bit "
            "position, 95%% Wilson band</text>",
            L);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"ax\"/>", L, H - B, W - 10,
            H - B);
    const int series[2] = {PEAT_INJECT_SDC, PEAT_INJECT_DUE};
    for (int s = 0; s < 2; s++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
                colours[series[s]]);
        for (int b = 0; b < t->n && b < 32; b++) {
            peat_inject_rate w =
                peat_inject_wilson(t->rows[b].t.n[series[s]], t->rows[b].t.total, Z95);
            if (isnan(w.p)) continue;
            fprintf(f, "%.1f,%.1f ", L + (b + 0.5) * bw, H - B - w.p * (H - B - T));
        }
        fputs("\"/>", f);
    }
    for (int b = 0; b < t->n && b < 32; b++) {
        peat_inject_rate w =
            peat_inject_wilson(t->rows[b].t.n[PEAT_INJECT_SDC], t->rows[b].t.total, Z95);
        if (!isnan(w.p))
            fprintf(f,
                    "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"><title>"
                    "bit %d: SDC %.1f%% [%.1f, %.1f], %lld trials</title></line>",
                    L + (b + 0.5) * bw, H - B - w.lo * (H - B - T), L + (b + 0.5) * bw,
                    H - B - w.hi * (H - B - T), colours[PEAT_INJECT_SDC], b, 100 * w.p, 100 * w.lo,
                    100 * w.hi, (long long)t->rows[b].t.total);
        if (b % 4 == 0 || b == 31)
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"l\">%d</text>", L + (b + 0.5) * bw,
                    H - B + 14, b);
    }
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" class=\"l\">bit (0 = mantissa lsb, 23-30 exponent, 31 "
            "sign)</text><text x=\"4\" y=\"%d\" class=\"l\">100%%</text>",
            L, H - 4, T + 4);
    fputs("</svg>\n", f);
}

void peat_fi_html(FILE *f, const peat_fi_result *r)
{
    fputs("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>PEAT fault "
          "injection</title><style>body{font-family:sans-serif;max-width:900px;margin:2em auto}"
          ".t{font-weight:bold;font-size:13px}.l{font-size:11px}.ax{stroke:#444}"
          "pre{font-size:11px}</style></head><body><h1>PEAT playback fault injection</h1>",
          f);
    fprintf(f, "<p>%lld trials on %lld recorded calls.</p>\n", (long long)r->n_trials,
            (long long)r->n_records);
    svg_stacked(f, &r->tab[PEAT_INJECT_BY_MODEL]);
    if (r->tab[PEAT_INJECT_BY_BIT].n) svg_bits(f, &r->tab[PEAT_INJECT_BY_BIT]);
    fputs("<pre>", f);
    /* the same tables as summary.md, escaped */
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (m) {
        tables(m, r, 0);
        fclose(m);
        peat_report_escape(f, buf);
        free(buf);
    }
    fputs("</pre></body></html>\n", f);
}
