/* report.c: campaign outputs: terminal verdict table, signature.json, summary.md, junit.xml. */
#include "harness/runtime/runtime.h"
#include "core/io_cause.h"
#include "harness/report/report.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *verdict_word(peat_acceptance a)
{
    return a == PEAT_ACCEPT_PASS ? "PASS" : a == PEAT_ACCEPT_WARN ? "WARN" : "FAIL";
}

static double ratio(double a, double b)
{
    return b > 0 ? a / b : (a > 0 ? INFINITY : 1.0);
}

void peat_report_campaign_print(FILE *f, const peat_campaign_opts *o, const peat_campaign_result *r)
{
    const peat_signature *c = &r->cand, *g = &r->golden;
    fprintf(f, "\n%-18s %6s %9s %12s %12s %9s  %-18s %s\n", "kernel", "calls", "elements",
            "max err/bnd", "rms vs gold", "eff bits", "finding", "verdict");
    for (int i = 0; i < r->n_findings; i++) {
        const peat_finding *fd = &r->findings[i];
        if (i == 0)
            fprintf(f, "%-18s %6lld %9lld %12.3g %11.3gx %9.1f  %-18s %s\n", c->kernel,
                    (long long)(r->n_records - r->n_kernel_failures), (long long)c->n_elems,
                    c->max_norm, ratio(c->rms_rel_mag, g->rms_rel_mag), c->eff_bits,
                    peat_detector_finding_name(fd->cls), verdict_word(fd->accept));
        else
            fprintf(f, "%-18s %6s %9s %12s %12s %9s  %-18s %s\n", "", "", "", "", "", "",
                    peat_detector_finding_name(fd->cls), verdict_word(fd->accept));
    }
    fprintf(f, "%-18s %6lld %9lld %12.3g %11.3gx %9.1f  %-18s\n", g->kernel,
            (long long)r->n_records, (long long)g->n_elems, g->max_norm, 1.0, g->eff_bits,
            "(reference)");
    for (int i = 0; i < r->n_findings; i++) {
        const peat_finding *fd = &r->findings[i];
        fprintf(f, "\n%s%s%s (confidence %.2f):\n", peat_detector_finding_name(fd->cls),
                fd->params[0] ? " " : "", fd->params, fd->confidence);
        peat_report_decided(f, fd, "  decided by: ", "\n");
        for (int e = 0; e < fd->n_evidence; e++) fprintf(f, "  - %s\n", fd->evidence[e]);
    }
    if (!o->quiet) {
        peat_report_probes(f, r, 0);
        peat_report_diagnosis(f, r, 0);
        peat_report_coverage(f, r, 0);
        if (r->capture_n_unmapped > 0)
            fprintf(f, "capture: %d aten op%s left unmapped (not judged), most calls first: %s\n",
                    r->capture_n_unmapped, r->capture_n_unmapped == 1 ? "" : "s",
                    r->capture_unmapped);
    }
    peat_report_runtime_table(f, r, 0);
    if (r->precision[0]) fprintf(f, "\nprecision: %s\n", r->precision);
    fprintf(f, "\nverdict: %s   (flow %s on %s; ", verdict_word(r->verdict), r->flow,
            r->device[0] ? r->device : r->backend);
    if (peat_report_has_loss(o, r)) fprintf(f, "loss %.4g -> %.4g; ", r->loss_first, r->loss_last);
    peat_report_stage_times(f, o, r);
    fputs(")\n", f);
    peat_report_timing(f, o, r, 0);
    fprintf(f, "report: %s/{report.html,signature.json,summary.md,junit.xml,campaign.h5}\n",
            r->out_dir);
}

void peat_report_timing(FILE *f, const peat_campaign_opts *o, const peat_campaign_result *r,
                        int markdown)
{
    if (!(r->budget_s > 0)) return;
    struct {
        const char *name;
        double pred, act;
    } rows[] = {
        {"plan", r->t_plan, r->t_plan},
        {"profile", r->pred_profile, r->t_profile},
        {"playback", r->pred_playback, r->t_playback},
        {"probes", r->pred_probe, r->t_probe},
        {"analyze", r->pred_analyze, r->t_analyze},
        {"runtime", r->pred_runtime, r->t_runtime},
        {"total", r->pred_total, r->t_total},
    };
    fprintf(f,
            markdown ? "\n## Time: predicted and actual (budget %.1f s)\n\n| stage | "
                       "predicted s | actual s | error |\n|---|---|---|---|\n"
                     : "\nbudget %.1f s: predicted and actual time per stage\n",
            r->budget_s);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (peat_report_is_capture(o) && !strcmp(rows[i].name, "profile")) continue;
        double e = rows[i].act > 0 ? 100 * (rows[i].pred - rows[i].act) / rows[i].act : 0;
        fprintf(f,
                markdown ? "| %s | %.2f | %.2f | %+.0f%% |\n" : "  %-9s %8.2f s %8.2f s %+5.0f%%\n",
                rows[i].name, rows[i].pred, rows[i].act, e);
    }
    fprintf(f, markdown ? "\n%s.\n" : "  (%s)\n", r->plan_note);
    if (r->n_budget_skipped > 0)
        fprintf(f,
                markdown ? "\nThe run went slower than predicted: %lld of %lld recorded calls "
                           "were not replayed, to end within the budget.\n"
                         : "  the run went slower than predicted: %lld of %lld recorded calls "
                           "were not replayed, to end within the budget\n",
                (long long)r->n_budget_skipped, (long long)r->n_records);
    if (r->runtime_iters > 0 && r->runtime_iters < r->plan_iters)
        fprintf(f,
                markdown ? "\nThe run went slower than predicted: runtime FI trained %lld of the "
                           "%lld planned iterations, to end within the budget.\n"
                         : "  the run went slower than predicted: runtime FI trained %lld of the "
                           "%lld planned iterations, to end within the budget\n",
                (long long)r->runtime_iters, (long long)r->plan_iters);
    if (r->runtime_iters > r->plan_iters && r->plan_iters > 0)
        fprintf(f,
                markdown ? "\nThe run went faster than predicted: runtime FI trained %lld "
                           "iterations instead of the %lld planned, to use the budget.\n"
                         : "  the run went faster than predicted: runtime FI trained %lld "
                           "iterations instead of the %lld planned, to use the budget\n",
                (long long)r->runtime_iters, (long long)r->plan_iters);
}

/* ---- small JSON/XML writers ---- */

/* A number, or null where it is NaN or infinite (JSON has no NaN). */
static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

/* "A, B" as the JSON strings "A", "B". */
static void ruled_out_json(FILE *f, const char *list)
{
    char item[96];
    int first = 1;
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        snprintf(item, sizeof item, "%.*s", (int)n, p);
        if (item[0]) {
            fputs(first ? "" : ", ", f);
            peat_report_json_str(f, item);
            first = 0;
        }
        p += n;
        while (*p == ',' || *p == ' ') p++;
    }
}

static void write_findings_json(FILE *f, const peat_campaign_result *r)
{
    fputs("  \"findings\": [\n", f);
    for (int i = 0; i < r->n_findings; i++) {
        const peat_finding *fd = &r->findings[i];
        fputs("    {\"class\": ", f);
        peat_report_json_str(f, peat_detector_finding_name(fd->cls));
        fputs(", \"params\": ", f);
        peat_report_json_str(f, fd->params);
        fprintf(f, ", \"confidence\": %.3f, \"acceptance\": ", fd->confidence);
        peat_report_json_str(f, verdict_word(fd->accept));
        fputs(", \"evidence\": [", f);
        for (int e = 0; e < fd->n_evidence; e++) {
            if (e) fputs(", ", f);
            peat_report_json_str(f, fd->evidence[e]);
        }
        fputs("], \"experiment\": ", f);
        peat_report_json_str(f, fd->experiment);
        fputs(", \"ruled_out\": [", f);
        ruled_out_json(f, fd->ruled_out);
        fprintf(f, "]}%s\n", i + 1 < r->n_findings ? "," : "");
    }
    fputs("  ],\n", f);
}

/* The two signatures as JSON objects (for signature.json). */
static void write_props_json(FILE *f, const char *key, const peat_gemm_props *p)
{
    fprintf(f,
            "    \"%s\": {\"input_bits\": %d, \"input_range_fp16\": %d, \"acc_bits\": %d, "
            "\"extra_bits\": %d, \"rounding\": ",
            key, p->input_bits, p->input_range16, p->acc_bits, p->extra_bits);
    peat_report_json_str(f, p->rounding);
    fprintf(f,
            ", \"subnormal_inputs\": %d, \"subnormal_products\": %d, \"subnormal_fp16\": %d, "
            "\"nan_propagation\": %d, \"block\": %d}",
            p->subnormal_in, p->subnormal_out, p->subnormal16, p->nan_prop, p->block);
}

/* Probe outcomes, GEMM properties and the coverage table. */
/* The differential diagnosis: its base call and each experiment's outcome. */
static void write_diagnosis_json(FILE *f, const peat_campaign_result *r)
{
    const peat_diagnosis *d = &r->diagnosis;
    fprintf(f, "  \"diagnosis\": {\"ran\": %s", d->ran ? "true" : "false");
    if (d->ran) {
        fputs(", \"base\": ", f);
        peat_report_json_str(f, d->base);
        fprintf(f, ", \"seconds\": %.3f, \"experiments\": [", d->seconds);
        const char *name;
        char out[160];
        for (int k = 0; peat_report_diagnosis_row(r, k, &name, out, sizeof out); k++) {
            fputs(k ? ", {\"experiment\": " : "{\"experiment\": ", f);
            peat_report_json_str(f, name);
            fprintf(f, ", \"ran\": %s, \"outcome\": ", d->exp[k].ran == 1 ? "true" : "false");
            peat_report_json_str(f, out);
            fputs("}", f);
        }
        fputs("]", f);
    }
    fputs("},\n", f);
}

static void write_probes_json(FILE *f, const peat_campaign_result *r)
{
    fputs("  \"probes\": [", f);
    for (int i = 0; i < r->n_probes; i++) {
        const peat_probe_outcome *p = &r->probes[i];
        fputs(i ? ",\n    {\"probe\": " : "\n    {\"probe\": ", f);
        peat_report_json_str(f, p->label);
        fputs(", \"kind\": ", f);
        peat_report_json_str(f, peat_analyzer_probe_kind_name(p->kind));
        fputs(", \"class\": ", f);
        peat_report_json_str(f, peat_detector_finding_name(p->f.cls));
        fputs(", \"params\": ", f);
        peat_report_json_str(f, p->f.params);
        fputs(", \"acceptance\": ", f);
        peat_report_json_str(f, verdict_word(p->f.accept));
        fputs("}", f);
    }
    fputs(r->n_probes ? "\n  ],\n" : "],\n", f);
    if (r->have_props) {
        fputs("  \"properties\": {\n", f);
        write_props_json(f, "candidate", &r->props_cand);
        fputs(",\n", f);
        write_props_json(f, "golden", &r->props_gold);
        fputs("\n  },\n", f);
    }
    fputs("  \"coverage\": [", f);
    for (int i = 0; i < r->coverage.n; i++) {
        const peat_stratum *s = &r->coverage.s[i];
        fputs(i ? ",\n    {\"stratum\": " : "\n    {\"stratum\": ", f);
        peat_report_json_str(f, s->label);
        fprintf(f, ", \"seen\": %lld, \"recorded\": %lld}", (long long)s->seen,
                (long long)s->recorded);
    }
    fputs(r->coverage.n ? "\n  ],\n" : "],\n", f);
    write_diagnosis_json(f, r);
}

static peat_status signatures_json(const peat_campaign_result *r, char **cand, char **gold)
{
    size_t nc = (size_t)peat_analyzer_signature_to_json(&r->cand, NULL, 0) + 1;
    size_t ng = (size_t)peat_analyzer_signature_to_json(&r->golden, NULL, 0) + 1;
    *cand = malloc(nc);
    *gold = malloc(ng);
    if (!*cand || !*gold) {
        free(*cand), free(*gold);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "signature json");
    }
    peat_analyzer_signature_to_json(&r->cand, *cand, nc);
    peat_analyzer_signature_to_json(&r->golden, *gold, ng);
    return PEAT_OK;
}

/* signature.json: every number of the campaign, for tools. */
static peat_status write_signature_json(FILE *f, const peat_campaign_opts *o,
                                        const peat_campaign_result *r)
{
    char *sc, *sg;
    PEAT_TRY(signatures_json(r, &sc, &sg));
    fprintf(f, "{\n  \"peat_version\": \"%s\",\n  \"kernel\": ", PEAT_VERSION_STRING);
    peat_report_json_str(f, r->cand.kernel);
    fputs(",\n  \"flow\": ", f);
    peat_report_json_str(f, r->flow);
    fputs(",\n  \"backend\": ", f);
    peat_report_json_str(f, r->backend);
    fputs(",\n  \"device\": ", f);
    peat_report_json_str(f, r->device);
    fputs(",\n  \"command\": ", f);
    peat_report_json_str(f, o->argv ? o->argv : "");
    fprintf(f, ",\n  \"seed\": %llu,\n  \"records\": %lld,\n  \"kernel_failures\": %lld,\n",
            (unsigned long long)o->seed, (long long)r->n_records, (long long)r->n_kernel_failures);
    fputs("  \"verdict\": ", f);
    peat_report_json_str(f, verdict_word(r->verdict));
    fputs(",\n", f);
    write_findings_json(f, r);
    fprintf(f, "  \"candidate\": %s,\n  \"golden\": %s,\n", sc, sg);
    free(sc), free(sg);
    write_probes_json(f, r);
    /* a capture without cap.log() has no loss curve: null, as JSON has no NaN */
    fputs("  \"training\": {\"loss_first\": ", f);
    json_num(f, r->loss_first);
    fputs(", \"loss_last\": ", f);
    json_num(f, r->loss_last);
    fputs(", \"eval_loss\": ", f);
    json_num(f, r->eval_loss);
    fputs(", \"eval_accuracy\": ", f);
    json_num(f, r->eval_accuracy);
    if (r->precision[0]) {
        fputs(", \"precision\": ", f);
        peat_report_json_str(f, r->precision);
        fprintf(f, ", \"skipped_steps\": %lld", (long long)r->skipped_steps);
    }
    fputs("},\n", f);
    fprintf(
        f,
        "  \"stored\": {\"records\": %lld, \"activation_records\": %lld, \"checkpoints\": %lld},\n",
        (long long)r->n_stored_records, (long long)r->n_activation_records,
        (long long)r->n_checkpoints);
    fprintf(f,
            "  \"timing_s\": {\"profile\": %.3f, \"playback\": %.3f, \"reference\": %.3f, "
            "\"analyzer\": %.3f, \"probes\": %.3f, \"analyze\": %.3f, \"runtime\": %.3f, "
            "\"total\": %.3f}",
            r->t_profile, r->t_playback, r->t_reference, r->t_analyzer, r->t_probe, r->t_analyze,
            r->t_runtime, r->t_total);
    if (r->budget_s > 0)
        fprintf(f,
                ",\n  \"predicted_s\": {\"budget\": %.3f, \"plan\": %.3f, \"profile\": %.3f, "
                "\"playback\": %.3f, \"probes\": %.3f, \"analyze\": %.3f, \"runtime\": %.3f, "
                "\"total\": %.3f, \"calls_not_replayed\": %lld}",
                r->budget_s, r->t_plan, r->pred_profile, r->pred_playback, r->pred_probe,
                r->pred_analyze, r->pred_runtime, r->pred_total, (long long)r->n_budget_skipped);
    fputs("\n}\n", f);
    return PEAT_OK;
}

/* summary.md's training sentence: the golden run's loss and held-out numbers; a capture's loss
 * as its training logged it, and nothing where it logged none. */
static void summary_training(FILE *f, const peat_campaign_opts *o, const peat_campaign_result *r)
{
    if (!peat_report_is_capture(o)) {
        fprintf(f, "Training (golden): loss %.4g -> %.4g, held-out loss %.4g, accuracy %.4g. ",
                r->loss_first, r->loss_last, r->eval_loss, r->eval_accuracy);
        return;
    }
    if (peat_report_has_loss(o, r))
        fprintf(f, "Training (PyTorch, as captured): loss %.4g -> %.4g. ", r->loss_first,
                r->loss_last);
}

/* summary.md: the verdict, the signatures side by side and the findings, for people. */
static peat_status write_summary_md(FILE *f, const peat_campaign_opts *o,
                                    const peat_campaign_result *r)
{
    const peat_signature *c = &r->cand, *g = &r->golden;
    fprintf(f, "## PEAT: `%s` on %s (%s): **%s**\n\n", c->kernel, r->flow,
            r->device[0] ? r->device : r->backend, verdict_word(r->verdict));
    peat_report_capture_note(f, o, r, 0);
    if (r->blas[0]) fprintf(f, "Golden GEMM: %s.\n\n", r->blas);
    if (r->precision[0]) fprintf(f, "Precision: %s.\n\n", r->precision);
    fprintf(f, "| | %s (candidate) | %s (golden) |\n|---|---|---|\n", c->kernel, g->kernel);
    /* calls as the terminal counts them (a signature's n_calls counts output tensors) */
    fprintf(f, "| calls / elements | %lld / %lld | %lld / %lld |\n",
            (long long)(r->n_records - r->n_kernel_failures), (long long)c->n_elems,
            (long long)r->n_records, (long long)g->n_elems);
    fprintf(f, "| max error / fp32 bound | %.3g | %.3g |\n", c->max_norm, g->max_norm);
    fprintf(f, "| elements over bound | %.3g%% | %.3g%% |\n", 100 * c->frac_over_bound,
            100 * g->frac_over_bound);
    fprintf(f, "| max / rms abs error | %.3g / %.3g | %.3g / %.3g |\n", c->max_abs, c->rms_abs,
            g->max_abs, g->rms_abs);
    fprintf(f, "| rms error / magnitude (rms vs golden %.3gx) | %.3g | %.3g |\n",
            ratio(c->rms_rel_mag, g->rms_rel_mag), c->rms_rel_mag, g->rms_rel_mag);
    fprintf(f, "| max ULP | %.0f | %.0f |\n", c->max_ulp, g->max_ulp);
    fprintf(f, "| effective bits | %.1f | %.1f |\n", c->eff_bits, g->eff_bits);
    fprintf(f, "| NaN / Inf introduced | %lld / %lld | %lld / %lld |\n\n", (long long)c->n_nan,
            (long long)c->n_inf, (long long)g->n_nan, (long long)g->n_inf);
    for (int i = 0; i < r->n_findings; i++) {
        const peat_finding *fd = &r->findings[i];
        fprintf(f, "### %s %s (%s, confidence %.2f)\n\n", peat_detector_finding_name(fd->cls),
                fd->params, verdict_word(fd->accept), fd->confidence);
        peat_report_decided(f, fd, "Decided by: ", "\n\n");
        for (int e = 0; e < fd->n_evidence; e++) fprintf(f, "- %s\n", fd->evidence[e]);
        fputc('\n', f);
    }
    peat_report_probes(f, r, 1);
    peat_report_diagnosis(f, r, 1);
    peat_report_coverage(f, r, 1);
    peat_report_runtime_table(f, r, 1);
    fputc('\n', f);
    summary_training(f, o, r);
    fprintf(f,
            "Stored %lld records (%lld activation records), %lld checkpoints. Seed %llu. Time "
            "%.1f s.\n",
            (long long)r->n_stored_records, (long long)r->n_activation_records,
            (long long)r->n_checkpoints, (unsigned long long)o->seed, r->t_total);
    peat_report_timing(f, o, r, 1);
    if (o->argv && o->argv[0]) fprintf(f, "\nReproduce:\n\n```sh\n%s\n```\n", o->argv);
    return PEAT_OK;
}

/* A finding and its evidence, one line (a junit failure message). */
static void finding_line(FILE *f, const peat_finding *fd)
{
    peat_report_escape(f, peat_detector_finding_name(fd->cls));
    fputs(fd->params[0] ? " " : "", f);
    peat_report_escape(f, fd->params);
    if (fd->experiment[0]) {
        fputs(" (decided by: ", f);
        peat_report_escape(f, fd->experiment);
        fputs(")", f);
    }
    for (int e = 0; e < fd->n_evidence; e++) {
        fputs(e ? "; " : ": ", f);
        peat_report_escape(f, fd->evidence[e]);
    }
}

/* junit.xml: one test case per kernel x op (a campaign validates one kernel on its op); a FAIL
 * is a failure whose message is the finding with its evidence, every finding goes to system-out
 * with the command that reproduces the run. */
static peat_status write_junit_xml(FILE *f, const peat_campaign_opts *o,
                                   const peat_campaign_result *r)
{
    int fails = r->verdict == PEAT_ACCEPT_FAIL;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites tests=\"1\" failures=\"%d\" "
            "errors=\"0\" time=\"%.3f\">\n",
            fails, r->t_total);
    fprintf(f,
            "  <testsuite name=\"peat\" tests=\"1\" failures=\"%d\" errors=\"0\" skipped=\"0\" "
            "time=\"%.3f\">\n",
            fails, r->t_total);
    fputs("    <testcase classname=\"peat.", f);
    peat_report_escape(f, r->flow);
    fputc('.', f);
    peat_report_escape(f, r->backend);
    fputs("\" name=\"", f);
    peat_report_escape(f, r->cand.kernel);
    fputc('.', f);
    peat_report_escape(f, r->cand.op);
    fprintf(f, "\" time=\"%.3f\">\n", r->t_total);
    for (int i = 0; i < r->n_findings && fails; i++) {
        if (r->findings[i].accept != PEAT_ACCEPT_FAIL) continue;
        fprintf(f, "      <failure type=\"%s\" message=\"",
                peat_detector_finding_name(r->findings[i].cls));
        finding_line(f, &r->findings[i]);
        fputs("\"/>\n", f);
    }
    fputs("      <system-out>", f);
    for (int i = 0; i < r->n_findings; i++) {
        finding_line(f, &r->findings[i]);
        fprintf(f, " (%s)\n", verdict_word(r->findings[i].accept));
    }
    fputs("reproduce: ", f);
    peat_report_escape(f, o->argv ? o->argv : "");
    fputs("</system-out>\n    </testcase>\n  </testsuite>\n</testsuites>\n", f);
    return PEAT_OK;
}

FILE *peat_report_open_tmp(const char *dir, const char *name, char *tmp, size_t n)
{
    snprintf(tmp, n, "%s/%s.tmp", dir, name);
    return fopen(tmp, "w");
}

typedef peat_status (*report_writer)(FILE *f, const peat_campaign_opts *o,
                                     const peat_campaign_result *r);

/* Writes dir/name atomically: into name.tmp, renamed into place once complete. */
static peat_status write_atomic(const char *dir, const char *name, report_writer write,
                                const peat_campaign_opts *o, const peat_campaign_result *r)
{
    char tmp[700];
    FILE *f = peat_report_open_tmp(dir, name, tmp, sizeof tmp);
    if (!f) return PEAT_ERROR(PEAT_ERR_IO, "cannot write %s: %s", tmp, peat_io_cause(errno));
    peat_status st = write(f, o, r);
    if (st != PEAT_OK && !ferror(f)) {
        fclose(f);
        remove(tmp);
        return st;
    }
    return peat_report_commit(f, dir, name, tmp); /* a write error: said with its cause */
}

peat_status peat_report_write(const peat_campaign_opts *o, const peat_campaign_result *r)
{
    PEAT_TRY(write_atomic(r->out_dir, "signature.json", write_signature_json, o, r));
    PEAT_TRY(write_atomic(r->out_dir, "summary.md", write_summary_md, o, r));
    PEAT_TRY(write_atomic(r->out_dir, "junit.xml", write_junit_xml, o, r));
    return write_atomic(r->out_dir, "report.html", peat_report_html, o, r);
}
