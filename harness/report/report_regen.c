/* report_regen.c: `peat report DIR`: a finished campaign's reports written again from its
 * campaign.h5 alone (the result the commit stage kept in /report/state, the runtime curves). */
#include "harness/campaign/result_store.h"
#include "harness/report/report.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

static const char *const reports[] = {"signature.json", "summary.md", "junit.xml", "report.html"};

int peat_report_missing(const char *dir)
{
    char p[4200];
    struct stat sb;
    for (size_t i = 0; i < sizeof reports / sizeof reports[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, reports[i]);
        if (stat(p, &sb) != 0 || !S_ISREG(sb.st_mode)) return 1;
    }
    return 0;
}

/* dir's campaign.h5 (path), refused in one line when it is not a finished campaign's file. */
static peat_status finished_file(const char *dir, char *path, size_t n)
{
    peat_campaign_result *r = NULL;
    if (strlen(dir) >= sizeof r->out_dir)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "report: DIR is %zu bytes long: at most %zu are supported", strlen(dir),
                          sizeof r->out_dir - 1);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return PEAT_ERROR(PEAT_ERR_NOTFOUND, "report: %s is not a directory (%s)", dir,
                          errno ? strerror(errno) : "a file");
    snprintf(path, n, "%s/campaign.h5", dir);
    if (stat(path, &sb) == 0)
        return S_ISREG(sb.st_mode) ? PEAT_OK
                                   : PEAT_ERROR(PEAT_ERR_FORMAT, "report: %s is not a file", path);
    snprintf(path, n, "%s/campaign.h5.partial", dir);
    if (stat(path, &sb) == 0)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "report: %s holds an unfinished campaign (campaign.h5.partial): it has "
                          "no reports yet; continue it with `peat run --resume %s`",
                          dir, dir);
    return PEAT_ERROR(PEAT_ERR_NOTFOUND, "report: %s holds no campaign (no campaign.h5)", dir);
}

/* The file against its manifest: any problem refuses it (peat inspect lists them). */
static peat_status whole(peat_store_t *s, const char *path)
{
    peat_store_check chk;
    PEAT_TRY(peat_store_manifest_check(s, NULL, NULL, &chk));
    if (chk.problems > 0 || !chk.has_manifest)
        return PEAT_ERROR(PEAT_ERR_FORMAT,
                          "report: %s is damaged (%lld problem%s against its manifest; `peat "
                          "inspect --verify %s` lists them): its reports are not regenerated",
                          path, (long long)chk.problems, chk.problems == 1 ? "" : "s", path);
    return PEAT_OK;
}

static peat_status regenerate(const char *path, const char *dir, FILE *table, int json,
                              peat_acceptance *verdict)
{
    peat_store_t *s = NULL;
    PEAT_TRY(peat_store_open(path, 0, &s));
    peat_campaign_state cs;
    peat_status st = whole(s, path);
    if (st == PEAT_OK) {
        st = peat_campaign_state_read(s, &cs);
        if (st != PEAT_OK) {
            char why[512];
            snprintf(why, sizeof why, "%s", peat_error_last());
            st = PEAT_ERROR(st, "report: %s: %s", path, why);
        }
    }
    peat_store_close(s);
    if (st != PEAT_OK) return st;
    snprintf(cs.res.out_dir, sizeof cs.res.out_dir, "%s", dir); /* where they go now */
    cs.o.json = json;
    cs.o.table = table;
    st = peat_report_write(&cs.o, &cs.res);
    if (st == PEAT_OK && table) peat_report_terminal(table, &cs.o, &cs.res);
    if (verdict) *verdict = cs.res.verdict;
    peat_campaign_state_free(&cs);
    return st;
}

peat_status peat_report_regenerate(const char *dir, FILE *table, int json, peat_acceptance *verdict)
{
    char path[4200];
    errno = 0;
    PEAT_TRY(finished_file(dir, path, sizeof path));
    return regenerate(path, dir, table, json, verdict);
}
