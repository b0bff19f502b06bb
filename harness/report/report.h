/* report.h: what a campaign's reports say: the terminal table, signature.json, summary.md,
 * junit.xml and report.html (report.c, report_probe.c, runtime_report.c, html.c), the report
 * stage, and the writers other reports share (escaping, atomic files). */
#ifndef PEAT_REPORT_REPORT_H
#define PEAT_REPORT_REPORT_H

#include "harness/campaign/result_store.h"
#include "harness/campaign/view.h"
#include "harness/runtime/runtime.h"

#include <stdio.h>

/* Writes predicted and actual time per stage of a --budget run (nothing otherwise), as text or
 * as a markdown table; a capture's without the profile stage it does not have. */
void peat_report_timing(FILE *f, const peat_campaign_opts *o, const peat_campaign_result *r,
                        int markdown);

/* Whether a run is a capture's (--capture: the calls of a PyTorch training, python/peat_torch),
 * which has no profile stage and no runtime FI of its own. */
int peat_report_is_capture(const peat_campaign_opts *o);

/* Whether the run has a training loss to show: a capture has one only where its training logged
 * one (peat_torch's cap.log()); a built-in flow always has its golden run's. */
int peat_report_has_loss(const peat_campaign_opts *o, const peat_campaign_result *r);

/* Writes the seconds of the stages the run has ("profile 0.1 s, playback 0.1 s, probes 0.1 s,
 * runtime FI 0.4 s, total 0.8 s"; a capture's without profile and runtime FI). */
void peat_report_stage_times(FILE *f, const peat_campaign_opts *o, const peat_campaign_result *r);

/* Writes the terminal verdict table. */
void peat_report_campaign_print(FILE *f, const peat_campaign_opts *o,
                                const peat_campaign_result *r);

/* Writes signature.json, summary.md, junit.xml and report.html into r->out_dir (each atomically).
 */
peat_status peat_report_write(const peat_campaign_opts *o, const peat_campaign_result *r);

/* Coverage, probe and arithmetic-property tables (md: markdown for summary.md). */
void peat_report_coverage(FILE *f, const peat_campaign_result *r, int md);
void peat_report_probes(FILE *f, const peat_campaign_result *r, int md);
/* The differential diagnosis: its base call and each experiment's outcome (nothing when the
 * stage did not run); one experiment's row (0 past the last); a finding's deciding experiment
 * and what it ruled out, between prefix and suffix (nothing when it names none). */
void peat_report_diagnosis(FILE *f, const peat_campaign_result *r, int md);
int peat_report_diagnosis_row(const peat_campaign_result *r, int k, const char **name, char *out,
                              size_t n);
void peat_report_decided(FILE *f, const peat_finding *fd, const char *prefix, const char *suffix);

/* report.html's copies of the terminal's tables (probes and GEMM properties, coverage strata,
 * runtime FI runs) and the "how to read this" note beside the signature table. */
void peat_report_html_probes(FILE *f, const peat_campaign_result *r);
void peat_report_html_strata(FILE *f, const peat_campaign_result *r);
void peat_report_html_runtime_table(FILE *f, const peat_campaign_result *r);
void peat_report_html_read_note(FILE *f, const peat_campaign_result *r);

/* Writes s with <, >, & and " escaped for XML and HTML. */
void peat_report_escape(FILE *f, const char *s);

/* Writes report.html (findings, signature table, inline SVG plots) to f. */
peat_status peat_report_html(FILE *f, const peat_campaign_opts *o, const peat_campaign_result *r);
/* report.html's copies of the terminal's tables (probes and GEMM properties, coverage strata,
 * runtime FI runs) and the "how to read this" note beside the signature table. */
void peat_report_html_probes(FILE *f, const peat_campaign_result *r);
void peat_report_html_strata(FILE *f, const peat_campaign_result *r);
void peat_report_html_runtime_table(FILE *f, const peat_campaign_result *r);
void peat_report_html_read_note(FILE *f, const peat_campaign_result *r);
/* For a --capture run, one paragraph saying where the calls came from (PyTorch, the model, the
 * file; layers are module paths; goldens are torch's outputs); nothing otherwise. html: as <p>. */
void peat_report_capture_note(FILE *f, const peat_campaign_opts *o, const peat_campaign_result *r,
                              int html);

/* Writes s as a JSON string (quoted, escaped). */
void peat_report_json_str(FILE *f, const char *s);
/* Opens dir/name.tmp for writing (tmp receives its path); peat_report_commit closes it and
 * renames it to dir/name, so a reader never sees a half-written report. */
FILE *peat_report_open_tmp(const char *dir, const char *name, char *tmp, size_t n);
peat_status peat_report_commit(FILE *f, const char *dir, const char *name, const char *tmp);

/* The verdict on f: the table, or with o->json the verdict as one JSON object. */
void peat_report_terminal(FILE *f, const peat_campaign_opts *o, const peat_campaign_result *r);

/* `peat report DIR` (report_regen.c): every report of the finished campaign in dir written again
 * from its campaign.h5 alone (a run whose reports failed, or were lost), then the verdict on
 * table (as JSON with json) when table is set; *verdict: the campaign's. An unfinished, damaged
 * or older campaign is refused with one message. */
peat_status peat_report_regenerate(const char *dir, FILE *table, int json,
                                   peat_acceptance *verdict);
/* Whether dir's finished campaign lacks one of the reports a run writes (`peat run --resume`
 * then regenerates them instead of saying it is finished). */
int peat_report_missing(const char *dir);

/* The report stage, the pipeline's last (stage_report.c): the files above, then the verdict
 * table (or the JSON verdict) on o->table when set. */
peat_status peat_report_stage(peat_campaign *c);

/* The runtime verdicts of a campaign as a terminal (md 0) or markdown table (md 1). */
void peat_report_runtime_table(FILE *f, const peat_campaign_result *r, int md);
/* report.html's runtime section: loss and weight distance of each faulty run over the band. */
struct peat_runtime_result;
void peat_report_runtime_html(FILE *f, const struct peat_runtime_result *rt);

/* The one HTML page writer (html_page.c): the head with PEAT's one stylesheet and title
 * title + name (escaped; name may be NULL), the body tagged with page ("run", "suite", "fi"),
 * and the end. */
void peat_report_html_begin(FILE *f, const char *page, const char *title, const char *name);
void peat_report_html_end(FILE *f);

#endif
