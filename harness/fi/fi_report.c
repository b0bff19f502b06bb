/* fi_report.c: outcome tables of a playback FI campaign, one set per series (model, site,
 * selection) and per view (propagated, local): terminal, markdown, HTML (sortable tables,
 * outcome bars and per-bit curves with Wilson bands, inline SVG). */
#include "harness/fi/fi.h"
#include "harness/report/report.h"

#include "harness/campaign/campaign.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define Z95 1.959963984540054

enum { VIEW_PROP = 0, VIEW_LOCAL = 1 };
static const char *const view_title[2] = {
    "propagated view: the fault followed to the end of its training step (loss, predictions, "
    "update) against the step's band of honest reorderings",
    "local view: the faulted op's output against its rounding bound"};
static const char *const view_short[2] = {"propagated", "local"};

static const int64_t *counts(const peat_inject_tally *t, int view)
{
    return view == VIEW_PROP ? t->prop : t->n;
}

static int64_t total(const peat_inject_tally *t, int view)
{
    return view == VIEW_PROP ? t->prop_total : t->total;
}

/* ---- series ---- */

/* The trials of one series (the model table's key) into out; their count. */
static int64_t series_filter(const peat_fi_result *r, const char *key, peat_inject_trial *out)
{
    int64_t n = 0;
    for (int64_t i = 0; i < r->n_trials; i++) {
        char k[400];
        const peat_inject_trial *t = &r->trials[i];
        snprintf(k, sizeof k, "%s @%s%s%s", t->model, peat_inject_site_name(t->site),
                 t->select[0] ? " " : "", t->select);
        if (!strcmp(k, key)) out[n++] = *t;
    }
    return n;
}

/* Whether this run ran the series (an inject prints its own; --show prints every one). */
static int series_ran(const peat_fi_result *r, const char *key, int all)
{
    if (all || r->show_all) return 1;
    for (int i = 0; i < r->n_models; i++) {
        char k[400];
        snprintf(k, sizeof k, "%s @%s%s%s", r->models[i], r->site, r->select[0] ? " " : "",
                 r->select);
        if (!strcmp(k, key)) return 1;
    }
    return 0;
}

/* The command that reproduces a series (the selection's key=value words as options). */
static void series_command(FILE *f, const peat_fi_result *r, const peat_inject_trial *t, int64_t n)
{
    fprintf(f, "peat inject --campaign %s --model '%s' --site %s", r->dir, t->model,
            peat_inject_site_name(t->site));
    char sel[96];
    snprintf(sel, sizeof sel, "%s", t->select);
    char *save = NULL;
    for (char *w = strtok_r(sel, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(w, '=');
        if (!eq) continue;
        *eq = 0;
        fprintf(f, " --%s '%s'", w, eq + 1);
    }
    fprintf(f, " --trials %lld", (long long)n);
    int followed = 0;
    for (int64_t i = 0; i < n; i++) followed |= (unsigned)t[i].prop < PEAT_INJECT_OUTCOME_COUNT;
    if (!followed) fputs(" --local-only", f);
}

/* ---- text and markdown tables ---- */

static void cell(FILE *f, int64_t k, int64_t n, int md)
{
    peat_inject_rate w = peat_inject_wilson(k, n, Z95);
    if (n <= 0)
        fprintf(f, md ? " - |" : " %-20s", "-");
    else
        fprintf(f, md ? " %.1f%% [%.1f, %.1f] |" : " %5.1f%% [%4.1f,%5.1f]", 100 * w.p, 100 * w.lo,
                100 * w.hi);
}

static void header(FILE *f, const char *group, int view, int md)
{
    const char *pc = view == VIEW_PROP ? "prediction changed" : NULL;
    if (md) {
        fprintf(f, "| %s | trials | MASKED | TOLERABLE | SDC | DUE |%s\n", group,
                pc ? " prediction changed |" : "");
        fprintf(f, "|---|---:|---:|---:|---:|---:|%s\n", pc ? "---:|" : "");
    } else {
        fprintf(f, "  %-18s %6s %-20s %-20s %-20s %-20s%s%s\n", group, "trials", " MASKED",
                " TOLERABLE", " SDC", " DUE", pc ? " " : "", pc ? pc : "");
    }
}

static void rows_print(FILE *f, const peat_inject_table *tab, int view, int md)
{
    for (int i = 0; i < tab->n; i++) {
        const peat_inject_tally *t = &tab->rows[i].t;
        int64_t n = total(t, view);
        if (md)
            fprintf(f, "| %s | %lld |", tab->rows[i].key, (long long)n);
        else
            fprintf(f, "  %-18.18s %6lld", tab->rows[i].key, (long long)n);
        for (int o = 0; o < PEAT_INJECT_OUTCOME_COUNT; o++) cell(f, counts(t, view)[o], n, md);
        if (view == VIEW_PROP) cell(f, t->pred_changed, n, md);
        fputc('\n', f);
    }
}

static const peat_inject_group groups[4] = {PEAT_INJECT_BY_OP, PEAT_INJECT_BY_LAYER,
                                            PEAT_INJECT_BY_PHASE, PEAT_INJECT_BY_BIT};

/* One series: both views, each by op, layer, phase and bit. */
static void series_tables(FILE *f, const peat_fi_result *r, const char *key,
                          const peat_inject_trial *t, int64_t n, int md)
{
    if (!key) { /* --pool: every series together, as asked */
        fprintf(f,
                md ? "\n## POOLED over every series of the file (--pool)\n\n%lld trials of %d "
                     "series: models, sites and selections mixed.\n"
                   : "\nPOOLED over every series of the file (--pool): %lld trials of %d series, "
                     "models, sites and selections mixed\n",
                (long long)n, r->tab[PEAT_INJECT_BY_MODEL].n);
    } else {
        fprintf(f,
                md ? "\n## Series %s\n\n%lld trials. Reproduce: `"
                   : "\nseries %s: %lld trials\n  reproduce: ",
                key, (long long)n);
        series_command(f, r, t, n);
        fputs(md ? "`\n" : "\n", f);
    }
    for (int view = 0; view < 2; view++) {
        peat_inject_table all;
        if (peat_inject_table_build(t, n, PEAT_INJECT_BY_MODEL, &all) != PEAT_OK) return;
        int64_t followed = all.n ? all.rows[0].t.prop_total : 0;
        peat_inject_table_free(&all);
        if (view == VIEW_PROP && followed == 0) {
            fprintf(f, md ? "\n(propagated view: not run, --local-only)\n"
                          : "  (propagated view: not run, --local-only)\n");
            continue;
        }
        fprintf(f,
                md ? "\n### %s (95%% Wilson intervals)\n\n"
                   : "  %s (rate [95%% Wilson interval]):\n",
                view_title[view]);
        for (int g = 0; g < 4; g++) {
            peat_inject_table tab;
            if (peat_inject_table_build(t, n, groups[g], &tab) != PEAT_OK) continue;
            if (tab.n) {
                if (md && g) fputc('\n', f);
                header(f, peat_inject_group_name(groups[g]), view, md);
                rows_print(f, &tab, view, md);
            }
            peat_inject_table_free(&tab);
        }
    }
}

/* Every series this run ran (or, with --show, every series in the file). */
static void tables(FILE *f, const peat_fi_result *r, int md, int all)
{
    peat_inject_trial *sub = malloc((size_t)(r->n_trials + 1) * sizeof *sub);
    if (!sub) return;
    const peat_inject_table *models = &r->tab[PEAT_INJECT_BY_MODEL];
    for (int i = 0; i < models->n; i++) {
        if (!series_ran(r, models->rows[i].key, all)) continue;
        int64_t n = series_filter(r, models->rows[i].key, sub);
        series_tables(f, r, models->rows[i].key, sub, n, md);
    }
    free(sub);
    if (r->pool && r->n_trials) series_tables(f, r, NULL, r->trials, r->n_trials, md);
}

void peat_fi_print(FILE *f, const peat_fi_result *r)
{
    fprintf(f, "\ncampaign %s: kernel %s, flow %s, seed %llu\n", r->dir, r->kernel, r->flow,
            (unsigned long long)r->seed);
    tables(f, r, 0, 0);
    if (r->show_all) return;
    if (r->n_run == 0) {
        fprintf(f, "\nnothing to run: all %lld trials were in the file\n", (long long)r->n_resumed);
        return;
    }
    fprintf(f,
            "\n%lld trials run now on %d thread(s), %lld resumed from the file, on %lld records; "
            "%.0f trials/s (wall clock, whole trial: records loaded and prepared%s)\n"
            "results: %s/{fi-summary.md,fi-report.html,campaign.h5 /fi/trials}\n",
            (long long)r->n_run, r->threads, (long long)r->n_resumed, (long long)r->n_records,
            r->trials_per_s, r->propagated ? ", the replay and the step bands included" : "",
            r->dir);
}

void peat_fi_markdown(FILE *f, const peat_fi_result *r)
{
    fprintf(f,
            "# PEAT playback fault injection\n\nCampaign `%s`: kernel `%s`, flow `%s`, seed %llu; "
            "%lld trials on %lld recorded calls.\n\nTwo views of each trial "
            "(docs/fault-injection.md). Propagated: the fault followed to the end of its training "
            "step: MASKED loss, predictions and update bit-identical; TOLERABLE within the step's "
            "band of honest reorderings; SDC beyond it (prediction changes counted apart); DUE "
            "non-finite or failed. Local: the op's output: MASKED bit-identical to golden, "
            "TOLERABLE within the rounding bound, SDC finite beyond it, DUE failure or NaN/Inf "
            "where golden is finite. Every table is one series (model, site, selection); this file "
            "holds every series of the campaign.\n",
            r->dir, r->kernel, r->flow, (unsigned long long)r->seed, (long long)r->n_trials,
            (long long)r->n_records);
    tables(f, r, 1, 1);
}

/* ---- HTML ---- */

static const char *const colours[PEAT_INJECT_OUTCOME_COUNT] = {"#9ecae1", "#a1d99b", "#fdae6b",
                                                               "#de2d26"};

/* A bar split by outcome shares, one per view. */
static void svg_bars(FILE *f, const peat_inject_tally *t)
{
    const int W = 760, L = 110, R = 20, row = 26, T = 24, H = T + 2 * row + 26;
    fprintf(f, "<svg width=\"%d\" height=\"%d\" role=\"img\"><title>outcomes, both views</title>",
            W, H);
    fprintf(f, "<text x=\"10\" y=\"16\" class=\"t\">outcomes (share of trials)</text>");
    for (int v = 0; v < 2; v++) {
        double x = L, y = T + row * v;
        int64_t n = total(t, v);
        fprintf(f, "<text x=\"%d\" y=\"%.0f\" class=\"l\" text-anchor=\"end\">%s</text>", L - 6,
                y + 16, view_short[v]);
        for (int o = 0; o < PEAT_INJECT_OUTCOME_COUNT && n > 0; o++) {
            double share = (double)counts(t, v)[o] / (double)n;
            double w = share * (W - L - R);
            fprintf(f,
                    "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>"
                    "%s %s %.1f%%</title></rect>",
                    x, y + 2, w, row - 6, colours[o], view_short[v],
                    peat_inject_outcome_name((peat_inject_outcome)o), 100 * share);
            x += w;
        }
    }
    for (int o = 0; o < PEAT_INJECT_OUTCOME_COUNT; o++)
        fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"%s\" class=\"l\">&#9632; %s</text>", L + 110 * o,
                H - 6, colours[o], peat_inject_outcome_name((peat_inject_outcome)o));
    fputs("</svg>\n", f);
}

/* Rate of each outcome per bit position in one view, with its 95% Wilson band (shaded). */
static void svg_bits(FILE *f, const peat_inject_table *t, int view)
{
    const int W = 760, H = 240, L = 50, B = 36, T = 26;
    double bw = (double)(W - L - 10) / 32, ph = H - B - T;
    fprintf(f, "<svg width=\"%d\" height=\"%d\" role=\"img\"><title>%s rates per bit</title>", W, H,
            view_short[view]);
    fprintf(f,
            "<text x=\"%d\" y=\"16\" class=\"t\">%s view: rate per bit position, 95%% Wilson "
            "bands</text>",
            L, view_short[view]);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"ax\"/>", L, H - B, W - 10,
            H - B);
    for (int o = 0; o < PEAT_INJECT_OUTCOME_COUNT; o++) {
        if (o == PEAT_INJECT_TOLERABLE) continue; /* the rest of the bar */
        fprintf(f, "<polygon fill=\"%s\" fill-opacity=\"0.25\" stroke=\"none\" points=\"",
                colours[o]);
        for (int pass = 0; pass < 2; pass++)
            for (int k = 0; k < t->n && k < 32; k++) {
                int b = pass ? (t->n < 32 ? t->n : 32) - 1 - k : k;
                const peat_inject_tally *y = &t->rows[b].t;
                peat_inject_rate w = peat_inject_wilson(counts(y, view)[o], total(y, view), Z95);
                if (isnan(w.p)) continue;
                fprintf(f, "%.1f,%.1f ", L + (b + 0.5) * bw, H - B - (pass ? w.lo : w.hi) * ph);
            }
        fprintf(f, "\"/><polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
                colours[o]);
        for (int b = 0; b < t->n && b < 32; b++) {
            const peat_inject_tally *y = &t->rows[b].t;
            peat_inject_rate w = peat_inject_wilson(counts(y, view)[o], total(y, view), Z95);
            if (!isnan(w.p)) fprintf(f, "%.1f,%.1f ", L + (b + 0.5) * bw, H - B - w.p * ph);
        }
        fputs("\"/>", f);
    }
    for (int b = 0; b < 32; b += 4)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"l\">%d</text>", L + (b + 0.5) * bw,
                H - B + 14, b);
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" class=\"l\">bit (0 = mantissa lsb, 23-30 exponent, 31 "
            "sign); lines: MASKED (blue), SDC (orange), DUE (red)</text><text x=\"4\" y=\"%d\" "
            "class=\"l\">100%%</text><text x=\"4\" y=\"%d\" class=\"l\">0%%</text>",
            L, H - 4, T + 4, H - B);
    fputs("</svg>\n", f);
}

static void html_table(FILE *f, const peat_inject_table *tab, int view)
{
    fprintf(f, "<table class=\"sortable\"><caption>%s view, by ", view_short[view]);
    peat_report_escape(f, peat_inject_group_name(tab->group));
    fprintf(f, " (rate [95%% Wilson interval]; click a heading to sort)</caption><thead><tr><th>");
    peat_report_escape(f, peat_inject_group_name(tab->group));
    fputs("</th><th>trials</th>", f);
    for (int o = 0; o < PEAT_INJECT_OUTCOME_COUNT; o++)
        fprintf(f, "<th>%s</th>", peat_inject_outcome_name((peat_inject_outcome)o));
    if (view == VIEW_PROP) fputs("<th>prediction changed</th>", f);
    fputs("</tr></thead><tbody>\n", f);
    for (int i = 0; i < tab->n; i++) {
        const peat_inject_tally *t = &tab->rows[i].t;
        int64_t n = total(t, view);
        fputs("<tr><td>", f);
        peat_report_escape(f, tab->rows[i].key);
        fprintf(f, "</td><td>%lld</td>", (long long)n);
        for (int o = 0; o <= PEAT_INJECT_OUTCOME_COUNT; o++) {
            if (o == PEAT_INJECT_OUTCOME_COUNT && view != VIEW_PROP) break;
            int64_t k = o < PEAT_INJECT_OUTCOME_COUNT ? counts(t, view)[o] : t->pred_changed;
            peat_inject_rate w = peat_inject_wilson(k, n, Z95);
            if (n <= 0)
                fputs("<td data-v=\"-1\">-</td>", f);
            else
                fprintf(f, "<td data-v=\"%.6f\">%.1f%% [%.1f, %.1f]</td>", w.p, 100 * w.p,
                        100 * w.lo, 100 * w.hi);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

static void html_series(FILE *f, const peat_fi_result *r, const char *key,
                        const peat_inject_trial *t, int64_t n)
{
    fputs("<h2>Series ", f);
    peat_report_escape(f, key);
    fprintf(f, "</h2><p>%lld trials; reproduce with <code>", (long long)n);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (m) {
        series_command(m, r, t, n);
        fclose(m);
        peat_report_escape(f, buf);
        free(buf);
    }
    fputs("</code></p>\n", f);
    peat_inject_table all;
    if (peat_inject_table_build(t, n, PEAT_INJECT_BY_MODEL, &all) != PEAT_OK) return;
    if (all.n) svg_bars(f, &all.rows[0].t);
    int followed = all.n && all.rows[0].t.prop_total > 0;
    peat_inject_table_free(&all);
    for (int view = followed ? 0 : 1; view < 2; view++) {
        fprintf(f, "<h3>%s</h3>\n", view_title[view]);
        for (int g = 0; g < 4; g++) {
            peat_inject_table tab;
            if (peat_inject_table_build(t, n, groups[g], &tab) != PEAT_OK) continue;
            if (tab.n) html_table(f, &tab, view);
            if (tab.n && groups[g] == PEAT_INJECT_BY_BIT) svg_bits(f, &tab, view);
            peat_inject_table_free(&tab);
        }
    }
}

/* Click a heading: rows sorted by that column (numbers by their data-v), again: reversed. */
static const char sort_js[] =
    "<script>document.querySelectorAll('table.sortable th').forEach(function(th){"
    "th.addEventListener('click',function(){var tb=th.closest('table').tBodies[0];"
    "var i=Array.prototype.indexOf.call(th.parentNode.children,th);var d=th.dataset.d==='1'?-1:1;"
    "th.dataset.d=d===1?'1':'0';var rows=Array.prototype.slice.call(tb.rows);"
    "function v(r){var c=r.cells[i];return c.dataset.v!==undefined?parseFloat(c.dataset.v):"
    "(isNaN(parseFloat(c.textContent))?c.textContent:parseFloat(c.textContent));}"
    "rows.sort(function(a,b){var x=v(a),y=v(b);return (x<y?-1:x>y?1:0)*d;});"
    "rows.forEach(function(r){tb.appendChild(r);});});});</script>\n";

void peat_fi_html(FILE *f, const peat_fi_result *r)
{
    peat_report_html_begin(f, "fi", "PEAT fault injection", NULL);
    fputs("<h1>PEAT playback fault injection</h1>\n", f);
    fputs("<table><tbody><tr><td>campaign</td><td>", f);
    peat_report_escape(f, r->dir);
    fputs("</td></tr><tr><td>kernel</td><td>", f);
    peat_report_escape(f, r->kernel);
    fputs("</td></tr><tr><td>flow</td><td>", f);
    peat_report_escape(f, r->flow);
    fprintf(f, "</td></tr><tr><td>seed</td><td>%llu</td></tr><tr><td>campaign command</td><td>",
            (unsigned long long)r->seed);
    peat_report_escape(f, r->argv);
    fprintf(f,
            "</td></tr><tr><td>trials</td><td>%lld on %lld recorded calls</td></tr></tbody>"
            "</table>\n<p>Two views of each trial (docs/fault-injection.md): <b>propagated</b> "
            "(the fault followed to the end of its training step: MASKED bit-identical loss, "
            "predictions and update; TOLERABLE inside the step's band of honest reorderings; SDC "
            "beyond it; DUE non-finite or failed) and <b>local</b> (the op's output against its "
            "rounding bound).</p>\n",
            (long long)r->n_trials, (long long)r->n_records);
    peat_inject_trial *sub = malloc((size_t)(r->n_trials + 1) * sizeof *sub);
    const peat_inject_table *models = &r->tab[PEAT_INJECT_BY_MODEL];
    for (int i = 0; sub && i < models->n; i++) {
        if (!series_ran(r, models->rows[i].key, 1)) continue;
        int64_t n = series_filter(r, models->rows[i].key, sub);
        html_series(f, r, models->rows[i].key, sub, n);
    }
    free(sub);
    fputs(sort_js, f);
    peat_report_html_end(f);
}
