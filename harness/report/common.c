/* common.c: what every report of PEAT shares (report.html, summary.md, the terminal table, `peat
 * ci`'s and `peat inject`'s pages): escaping for HTML and JSON, the atomic write of a report
 * file, whether a run is a capture's and its note, the stage times of the verdict line. */
#include "harness/report/report.h"
#include "core/io_cause.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int peat_report_is_capture(const peat_campaign_opts *o)
{
    return o->capture && o->capture[0];
}

int peat_report_has_loss(const peat_campaign_opts *o, const peat_campaign_result *r)
{
    /* a capture without a logged loss holds NaN there (no metrics were imported) */
    return !peat_report_is_capture(o) || !isnan(r->loss_first) || !isnan(r->loss_last);
}

void peat_report_stage_times(FILE *f, const peat_campaign_opts *o, const peat_campaign_result *r)
{
    int cap = peat_report_is_capture(o);
    /* the golden work taken from the golden cache (harness/campaign/golden_cache.h) is said where
     * its time would have been */
    int cached = !strncmp(r->golden_cache, "profile", 7);
    if (!cap) fprintf(f, "profile %.1f s%s, ", r->t_profile, cached ? " (golden cache)" : "");
    fprintf(f, "playback %.1f s, probes %.1f s, ", r->t_playback, r->t_probe);
    if (!cap) fprintf(f, "runtime FI %.1f s, ", r->t_runtime);
    fprintf(f, "total %.1f s", r->t_total);
}

void peat_report_json_str(FILE *f, const char *s)
{
    char small[512];
    size_t need = peat_analyzer_json_escape(small, sizeof small, s);
    char *buf = need < sizeof small ? small : malloc(need + 1);
    if (buf != small && buf) peat_analyzer_json_escape(buf, need + 1, s);
    fprintf(f, "\"%s\"", buf ? buf : "");
    if (buf != small) free(buf);
}

void peat_report_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

void peat_report_capture_note(FILE *f, const peat_campaign_opts *o, const peat_campaign_result *r,
                              int html)
{
    if (!o->capture) return;
    const char *model = strncmp(r->flow, "torch:", 6) ? r->flow : r->flow + 6;
    fputs(html ? "<p>" : "", f);
    fputs("States from PyTorch: the calls were captured from the training of model ", f);
    peat_report_escape(f, model);
    fputs(" (", f);
    peat_report_escape(f, o->capture);
    fputs(", peat_torch.capture); layers are its module paths, golden outputs are torch's own; no "
          "profile stage, and runtime FI runs in the user's loop (peat_torch.band).",
          f);
    if (r->capture_n_unmapped > 0) {
        fprintf(f, " The capture left %d aten op%s unmapped (not judged), most calls first: ",
                r->capture_n_unmapped, r->capture_n_unmapped == 1 ? "" : "s");
        peat_report_escape(f, r->capture_unmapped);
        fputs(".", f);
    }
    fputs(html ? "</p>\n" : "\n\n", f);
}

peat_status peat_report_commit(FILE *f, const char *dir, const char *name, const char *tmp)
{
    char final[700];
    snprintf(final, sizeof final, "%s/%s", dir, name);
    /* the cause: a failed flush's errno, else the one a failed write left (a full disk and a
     * file-size limit are said as such) */
    int e = errno, bad = ferror(f);
    errno = 0;
    if (fflush(f) != 0) e = errno, bad = 1;
    if (fclose(f) != 0 && !bad) e = errno, bad = 1;
    if (bad) {
        remove(tmp);
        return PEAT_ERROR(PEAT_ERR_IO, "cannot write %s: %s", final, peat_io_cause(e));
    }
    if (rename(tmp, final) != 0)
        return PEAT_ERROR(PEAT_ERR_IO, "cannot write %s: %s", final, strerror(errno));
    return PEAT_OK;
}
