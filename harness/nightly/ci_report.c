/* ci_report.c: the aggregated outputs of `peat ci`: ci.json (what `peat diff` reads), summary.md
 * (a pull-request comment), junit.xml (a test case per item), report.html (a row per item), the
 * terminal table, and the baseline copy. */
#define _DEFAULT_SOURCE
#include "harness/campaign/campaign.h"
#include "core/io_cause.h"
#include "harness/report/report.h"
#include "harness/nightly/ci.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const status_names[] = {"PASS", "WARN", "FAIL", "ERROR", "SKIP"};

static const char *suite_verdict(const peat_ci_result *r)
{
    return r->exit_code == 2 ? "ERROR" : r->exit_code == 1 ? "FAIL" : "PASS";
}

/* The finding that decided the item's status (the first not allowed at its level); for a PASS
 * the first allowed finding (what an allowance let through is what the numbers show); or NULL. */
static const peat_ci_finding *headline(const peat_ci_item *it)
{
    int pass = !strcmp(it->status, "PASS");
    for (int i = 0; i < it->n_findings && !pass; i++)
        if (!it->findings[i].allowed && !strcmp(it->findings[i].acceptance, it->status))
            return &it->findings[i];
    for (int i = 0; i < it->n_findings; i++)
        if (it->findings[i].allowed) return &it->findings[i];
    for (int i = 0; i < it->n_findings; i++)
        if (!strcmp(it->findings[i].acceptance, it->status)) return &it->findings[i];
    return it->n_findings ? &it->findings[0] : NULL;
}

/* Regressions found against the baseline for one item (key kernel/flow/backend). */
static int regressions_of(const peat_ci_result *r, const peat_ci_item *it, const char **first)
{
    char key[128];
    snprintf(key, sizeof key, "%s/%s/%s", it->kernel, it->flow, it->backend);
    int n = 0;
    for (int i = 0; i < r->diff.n; i++)
        if (r->diff.e[i].regression && !strcmp(r->diff.e[i].item, key)) {
            if (!n++ && first) *first = r->diff.e[i].what;
        }
    return n;
}

static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

static void json_kv(FILE *f, const char *key, const char *v, const char *sep)
{
    fprintf(f, "\"%s\": ", key);
    peat_report_json_str(f, v);
    fputs(sep, f);
}

static void ci_json_item(FILE *f, const peat_ci_item *it, int last)
{
    fputs("    {", f);
    json_kv(f, "kernel", it->kernel, ", ");
    json_kv(f, "op", it->op, ", ");
    json_kv(f, "flow", it->flow, ", ");
    json_kv(f, "backend", it->backend, ", ");
    json_kv(f, "status", it->status, ", ");
    json_kv(f, "verdict", it->verdict, ", ");
    json_kv(f, "dir", it->dir, ", ");
    json_kv(f, "error", it->error, ", ");
    json_kv(f, "command", it->command, ", ");
    fprintf(f, "\"exit\": %d, \"seconds\": %.3f, \"planned_s\": ", it->exit_code, it->seconds);
    json_num(f, it->plan_s > 0 ? it->plan_s : NAN);
    fputs(", \"max_norm\": ", f);
    json_num(f, it->max_norm);
    fputs(", \"eff_bits\": ", f);
    json_num(f, it->eff_bits);
    fputs(", \"rms_vs_golden\": ", f);
    json_num(f, it->rms_ratio);
    fputs(",\n     \"findings\": [", f);
    for (int i = 0; i < it->n_findings; i++) {
        const peat_ci_finding *fd = &it->findings[i];
        fputs(i ? ", {" : "{", f);
        json_kv(f, "class", fd->cls, ", ");
        json_kv(f, "params", fd->params, ", ");
        json_kv(f, "acceptance", fd->acceptance, ", ");
        fprintf(f, "\"allowed\": %s, ", fd->allowed ? "true" : "false");
        json_kv(f, "evidence", fd->evidence, "}");
    }
    fprintf(f, "]}%s\n", last ? "" : ",");
}

static void ci_json_baseline(FILE *f, const peat_ci_result *r)
{
    fprintf(f, "  \"baseline\": {\"compared\": %s, \"regressions\": %d, \"entries\": [",
            r->baseline_compared ? "true" : "false", r->diff.n_regressions);
    for (int i = 0; i < r->diff.n; i++) {
        fputs(i ? ",\n    {" : "\n    {", f);
        json_kv(f, "item", r->diff.e[i].item, ", ");
        fprintf(f, "\"regression\": %s, ", r->diff.e[i].regression ? "true" : "false");
        json_kv(f, "what", r->diff.e[i].what, "}");
    }
    fputs("]},\n", f);
}

static peat_status write_json(const peat_ci_result *r)
{
    char tmp[700];
    FILE *f = peat_report_open_tmp(r->out_dir, "ci.json", tmp, sizeof tmp);
    if (!f) return PEAT_ERROR(PEAT_ERR_IO, "cannot write in %s: %s", r->out_dir, strerror(errno));
    fprintf(f, "{\n  \"peat_version\": \"%s\",\n  ", PEAT_VERSION_STRING);
    json_kv(f, "suite", r->suite.name, ",\n  ");
    json_kv(f, "suite_file", r->suite.path, ",\n  ");
    json_kv(f, "verdict", suite_verdict(r), ",\n  ");
    json_kv(f, "fail_on", r->suite.policy.fail_on == PEAT_ACCEPT_WARN ? "warn" : "fail", ",\n  ");
    fprintf(f, "\"exit\": %d,\n  \"seconds\": %.3f,\n  \"budget_s\": ", r->exit_code, r->seconds);
    json_num(f, r->budget_s > 0 ? r->budget_s : NAN);
    fputs(",\n  \"counts\": {", f);
    for (int s = 0; s < 5; s++)
        fprintf(f, "%s\"%s\": %d", s ? ", " : "", status_names[s], r->counts[s]);
    fputs("},\n", f);
    ci_json_baseline(f, r);
    if (r->shard.n > 0) { /* a shard's result: what `peat merge` needs to place its items */
        fprintf(f, "  \"shard\": {\"i\": %d, \"n\": %d, \"planned\": %d, \"policy\": ", r->shard.i,
                r->shard.n, r->n_planned);
        peat_report_json_str(f, r->policy_file);
        fputs(", \"ids\": [", f);
        for (int i = 0; i < r->n_items; i++) fprintf(f, "%s%d", i ? ", " : "", r->ids[i]);
        fputs("]},\n", f);
    }
    fputs("  \"items\": [\n", f);
    for (int i = 0; i < r->n_items; i++) ci_json_item(f, &r->items[i], i + 1 == r->n_items);
    fputs("  ]\n}\n", f);
    return peat_report_commit(f, r->out_dir, "ci.json", tmp);
}

/* ---- summary.md: reads well as a pull-request comment ---- */

static void md_cell(FILE *f, const char *s)
{
    for (; *s; s++) fputs(*s == '|' ? "\\|" : *s == '\n' ? " " : (char[2]){*s, 0}, f);
}

static void md_table(FILE *f, const peat_ci_result *r)
{
    fputs("| kernel | op | flow | backend | status | finding | max err/bound | eff. bits | time |\n"
          "|---|---|---|---|---|---|---:|---:|---:|\n",
          f);
    for (int i = 0; i < r->n_items; i++) {
        const peat_ci_item *it = &r->items[i];
        const peat_ci_finding *h = headline(it);
        fprintf(f, "| `%s` | %s | %s | %s | **%s** | ", it->kernel, it->op, it->flow, it->backend,
                it->status);
        if (h) {
            md_cell(f, h->cls);
            if (h->allowed) fputs(" (allowed)", f);
        } else
            md_cell(f, it->error);
        fprintf(f, " | %.3g | %.1f | %.1f s |\n", it->max_norm, it->eff_bits, it->seconds);
    }
}

static void md_details(FILE *f, const peat_ci_result *r)
{
    for (int i = 0; i < r->n_items; i++) {
        const peat_ci_item *it = &r->items[i];
        if (!strcmp(it->status, "PASS") || !strcmp(it->status, "SKIP")) continue;
        fprintf(f, "\n<details><summary><code>%s</code> on %s (%s): %s</summary>\n\n", it->kernel,
                it->flow, it->backend, it->status);
        if (it->error[0]) fprintf(f, "- %s\n", it->error);
        for (int k = 0; k < it->n_findings; k++)
            fprintf(f, "- **%s** %s (%s%s): %s\n", it->findings[k].cls, it->findings[k].params,
                    it->findings[k].acceptance, it->findings[k].allowed ? ", allowed" : "",
                    it->findings[k].evidence);
        fprintf(f, "\nReproduce: `%s`\n\n</details>\n", it->command);
    }
}

static peat_status write_md(const peat_ci_result *r)
{
    char tmp[700];
    FILE *f = peat_report_open_tmp(r->out_dir, "summary.md", tmp, sizeof tmp);
    if (!f) return PEAT_ERROR(PEAT_ERR_IO, "cannot write in %s: %s", r->out_dir, strerror(errno));
    fprintf(f,
            "## PEAT nightly `%s`: %s\n\n%d items: %d pass, %d warn, %d fail, %d error, %d skipped"
            " (%.0f s).\n\n",
            r->suite.name, suite_verdict(r), r->n_items, r->counts[0], r->counts[1], r->counts[2],
            r->counts[3], r->counts[4], r->seconds);
    if (r->baseline_compared) {
        fprintf(f, "**%d regression%s since the baseline.**\n\n", r->diff.n_regressions,
                r->diff.n_regressions == 1 ? "" : "s");
        for (int i = 0; i < r->diff.n; i++)
            if (r->diff.e[i].regression)
                fprintf(f, "- `%s`: %s\n", r->diff.e[i].item, r->diff.e[i].what);
        if (r->diff.n_regressions) fputc('\n', f);
    }
    md_table(f, r);
    md_details(f, r);
    return peat_report_commit(f, r->out_dir, "summary.md", tmp);
}

/* ---- junit.xml: a test case per kernel x op x flow x backend ---- */

static void junit_case(FILE *f, const peat_ci_result *r, const peat_ci_item *it)
{
    fputs("    <testcase classname=\"peat.", f);
    peat_report_escape(f, it->flow);
    fputc('.', f);
    peat_report_escape(f, it->backend);
    fputs("\" name=\"", f);
    peat_report_escape(f, it->kernel);
    fputc('.', f);
    peat_report_escape(f, it->op);
    fprintf(f, "\" time=\"%.3f\">\n", it->seconds);
    const char *reg = NULL;
    int nreg = regressions_of(r, it, &reg);
    const peat_ci_finding *h = headline(it);
    int failed = !strcmp(it->status, "FAIL") ||
                 (!strcmp(it->status, "WARN") && r->suite.policy.fail_on == PEAT_ACCEPT_WARN);
    if (!strcmp(it->status, "ERROR") || !strcmp(it->status, "SKIP")) {
        fprintf(f, "      <%s message=\"", it->status[0] == 'E' ? "error" : "skipped");
        peat_report_escape(f, it->error);
        fputs("\"/>\n", f);
    } else if (failed || nreg) {
        fputs("      <failure type=\"", f);
        peat_report_escape(f, failed && h ? h->cls : "REGRESSION");
        fputs("\" message=\"", f);
        if (failed && h) {
            peat_report_escape(f, h->cls);
            fputc(' ', f);
            peat_report_escape(f, h->params);
            fputs(": ", f);
            peat_report_escape(f, h->evidence);
        } else {
            fputs("regression since the baseline: ", f);
            peat_report_escape(f, reg);
        }
        fputs("\"/>\n", f);
    }
    fputs("      <system-out>reproduce: ", f);
    peat_report_escape(f, it->command);
    fputs("</system-out>\n    </testcase>\n", f);
}

static peat_status write_junit(const peat_ci_result *r)
{
    char tmp[700], stamp[32];
    FILE *f = peat_report_open_tmp(r->out_dir, "junit.xml", tmp, sizeof tmp);
    if (!f) return PEAT_ERROR(PEAT_ERR_IO, "cannot write in %s: %s", r->out_dir, strerror(errno));
    int failures = 0;
    for (int i = 0; i < r->n_items; i++) {
        const peat_ci_item *it = &r->items[i];
        failures += !strcmp(it->status, "FAIL") || regressions_of(r, it, NULL) ||
                    (!strcmp(it->status, "WARN") && r->suite.policy.fail_on == PEAT_ACCEPT_WARN);
    }
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites tests=\"%d\" failures=\"%d\" "
            "errors=\"%d\" skipped=\"%d\" time=\"%.3f\">\n  <testsuite name=\"peat.",
            r->n_items, failures, r->counts[3], r->counts[4], r->seconds);
    peat_report_escape(f, r->suite.name);
    fprintf(f,
            "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.3f\" "
            "timestamp=\"%s\">\n",
            r->n_items, failures, r->counts[3], r->counts[4], r->seconds, stamp);
    for (int i = 0; i < r->n_items; i++) junit_case(f, r, &r->items[i]);
    fputs("  </testsuite>\n</testsuites>\n", f);
    return peat_report_commit(f, r->out_dir, "junit.xml", tmp);
}

/* ---- report.html: a row per item, linking to each item's own report ---- */

static void html_row(FILE *f, const peat_ci_result *r, const peat_ci_item *it)
{
    const peat_ci_finding *h = headline(it);
    const char *reg = NULL;
    int nreg = regressions_of(r, it, &reg);
    fprintf(f, "<tr><td><a href=\"%s/report.html\">", it->dir);
    peat_report_escape(f, it->kernel);
    fprintf(f,
            "</a></td><td>%s</td><td>%s</td><td>%s</td><td><span class=\"v %s\">%s</span></td><td>",
            it->op, it->flow, it->backend, it->status, it->status);
    if (h) {
        peat_report_escape(f, h->cls);
        fputc(' ', f);
        peat_report_escape(f, h->params);
        if (h->allowed) fputs(" <em>(allowed)</em>", f);
    } else
        peat_report_escape(f, it->error);
    if (nreg) {
        fputs("<br><b>regression:</b> ", f);
        peat_report_escape(f, reg);
    }
    fputs("</td><td>", f);
    if (isfinite(it->max_norm)) fprintf(f, "%.3g", it->max_norm);
    fputs("</td><td>", f);
    if (isfinite(it->eff_bits)) fprintf(f, "%.1f", it->eff_bits);
    fprintf(f, "</td><td>%.1f s</td></tr>\n", it->seconds);
}

static peat_status write_html(const peat_ci_result *r)
{
    char tmp[700];
    FILE *f = peat_report_open_tmp(r->out_dir, "report.html", tmp, sizeof tmp);
    if (!f) return PEAT_ERROR(PEAT_ERR_IO, "cannot write in %s: %s", r->out_dir, strerror(errno));
    peat_report_html_begin(f, "suite", "PEAT suite ", r->suite.name);
    fprintf(f, "<div id=\"verdict\" class=\"%s\">suite ", suite_verdict(r));
    peat_report_escape(f, r->suite.name);
    fprintf(f, ": %s &middot; %d items: %d pass, %d warn, %d fail, %d error, %d skipped</div>\n",
            suite_verdict(r), r->n_items, r->counts[0], r->counts[1], r->counts[2], r->counts[3],
            r->counts[4]);
    if (r->baseline_compared)
        fprintf(f, "<p>%d regression%s since the baseline.</p>\n", r->diff.n_regressions,
                r->diff.n_regressions == 1 ? "" : "s");
    fputs("<table id=\"items\"><tr><th>kernel</th><th>op</th><th>flow</th><th>backend</th>"
          "<th>status</th><th>finding</th><th>max err/bound</th><th>eff. bits</th><th>time</th>"
          "</tr>\n",
          f);
    for (int i = 0; i < r->n_items; i++) html_row(f, r, &r->items[i]);
    fprintf(f, "</table><p><small>peat %s &middot; %.0f s</small></p>\n", PEAT_VERSION_STRING,
            r->seconds);
    peat_report_html_end(f);
    return peat_report_commit(f, r->out_dir, "report.html", tmp);
}

peat_status peat_nightly_ci_report_write(const peat_ci_result *r)
{
    PEAT_TRY(write_json(r));
    PEAT_TRY(write_md(r));
    PEAT_TRY(write_junit(r));
    return write_html(r);
}

void peat_nightly_ci_print(FILE *f, const peat_ci_result *r)
{
    fprintf(f, "\n%-22s %-12s %-8s %-6s %-26s %11s %8s\n", "kernel", "flow", "backend", "status",
            "finding", "max err/bnd", "eff bits");
    for (int i = 0; i < r->n_items; i++) {
        const peat_ci_item *it = &r->items[i];
        const peat_ci_finding *h = headline(it);
        char fnd[40];
        snprintf(fnd, sizeof fnd, "%s%s", h ? h->cls : "-", h && h->allowed ? " (allowed)" : "");
        fprintf(f, "%-22s %-12s %-8s %-6s %-26s %11.3g %8.1f\n", it->kernel, it->flow, it->backend,
                it->status, fnd, it->max_norm, it->eff_bits);
        if (it->error[0]) fprintf(f, "  %s\n", it->error);
    }
    if (r->baseline_compared) {
        fputc('\n', f);
        peat_nightly_diff_print(f, &r->diff);
    }
    char budget[48] = "";
    if (r->budget_s > 0) snprintf(budget, sizeof budget, " of a %.0f s budget", r->budget_s);
    fprintf(f, "\nsuite %s: %s (%d pass, %d warn, %d fail, %d error, %d skipped; %.0f s%s)\n",
            r->suite.name, suite_verdict(r), r->counts[0], r->counts[1], r->counts[2], r->counts[3],
            r->counts[4], r->seconds, budget);
    if (r->n_resumed > 0)
        fprintf(f,
                "resumed: %d of the %d items were finished by an earlier run (taken, not rerun)\n",
                r->n_resumed, r->n_items);
    fprintf(f, "report: %s/{report.html,summary.md,junit.xml,ci.json}\n", r->out_dir);
}

/* ---- baseline ---- */

static peat_status copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb");
    if (!in) return PEAT_ERROR(PEAT_ERR_IO, "cannot read %s: %s", from, strerror(errno));
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", to);
    FILE *out = fopen(tmp, "wb");
    if (!out) {
        fclose(in);
        return PEAT_ERROR(PEAT_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    }
    char buf[1 << 14];
    for (size_t n; (n = fread(buf, 1, sizeof buf, in)) > 0;) fwrite(buf, 1, n, out);
    int bad = ferror(in) || ferror(out), e = errno;
    fclose(in);
    if (fclose(out) != 0 || bad || rename(tmp, to) != 0) {
        if (!bad) e = errno;
        remove(tmp);
        return PEAT_ERROR(PEAT_ERR_IO, "cannot write %s: %s", to, peat_io_cause(e));
    }
    return PEAT_OK;
}

peat_status peat_nightly_ci_baseline_update(const char *baseline, const peat_ci_result *r)
{
    char from[1100], to[1100];
    for (int i = 0; i < r->n_items; i++) {
        const peat_ci_item *it = &r->items[i];
        if (!it->verdict[0]) continue; /* no verdict: nothing to compare with later */
        snprintf(to, sizeof to, "%s/%s", baseline, it->dir);
        PEAT_TRY(peat_campaign_mkdir_p(to));
        snprintf(from, sizeof from, "%s/%s/signature.json", r->out_dir, it->dir);
        snprintf(to, sizeof to, "%s/%s/signature.json", baseline, it->dir);
        PEAT_TRY(copy_file(from, to));
    }
    PEAT_TRY(peat_campaign_mkdir_p(baseline));
    snprintf(from, sizeof from, "%s/ci.json", r->out_dir);
    snprintf(to, sizeof to, "%s/ci.json", baseline);
    return copy_file(from, to); /* last: a baseline with ci.json is complete */
}
