/* calibrate_zoo.c: `peat calibrate --zoo LIB`: the detector's accuracy on kernels whose defects
 * sit inside their arithmetic: each zoo kernel through a full `peat run`, its primary finding and
 * verdict scored against the manifest (which only this scoring reads). */
#include "harness/run/calibrate.h"
#include "harness/run/run.h"
#include "harness/campaign/campaign.h"
#include "harness/runtime/builtin.h"

#include <stdlib.h>
#include <string.h>

#define ZOO_MAX PEAT_ZOO_MAX

static peat_status manifest_read(const char *path, peat_zoo_entry *e, int *n)
{
    FILE *f = fopen(path, "r");
    if (!f) return PEAT_ERROR(PEAT_ERR_IO, "cannot read zoo manifest %s", path);
    char line[256];
    *n = 0;
    while (fgets(line, sizeof line, f) && *n < ZOO_MAX) {
        if (line[0] == '#' || line[0] == '\n') continue;
        peat_zoo_entry *z = &e[*n];
        char expect[32], kind[16];
        if (sscanf(line, "%63s %31s %31s %15s", z->kernel, z->flow, expect, kind) != 4) continue;
        z->honest = !strcmp(kind, "honest");
        z->expect = z->honest ? PEAT_FIND_COUNT : peat_detector_finding_parse(expect);
        if (!z->honest && z->expect == PEAT_FIND_COUNT) {
            fclose(f);
            return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: unknown class '%s' for %s", path, expect,
                              z->kernel);
        }
        (*n)++;
    }
    fclose(f);
    return *n > 0 ? PEAT_OK : PEAT_ERROR(PEAT_ERR_FORMAT, "%s lists no kernel", path);
}

/* One zoo kernel through `peat run` (its flow's default campaign, quiet). */
static peat_status zoo_one(peat_zoo_entry *z, const char *out_root, uint64_t seed)
{
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    char out[512];
    snprintf(out, sizeof out, "%s/%s", out_root, z->kernel);
    o.kernel = z->kernel, o.flow = z->flow, o.out_dir = out, o.force = 1, o.quiet = 1;
    o.seed = seed;
    peat_campaign_result *r = malloc(sizeof *r);
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "campaign result");
    peat_status st = peat_run_campaign(&o, r);
    if (st == PEAT_OK) {
        z->found = r->findings[0].cls;
        z->verdict = r->verdict;
        snprintf(z->params, sizeof z->params, "%s", r->findings[0].params);
    }
    free(r);
    return st;
}

peat_status peat_run_calibrate_zoo(const char *lib, const char *manifest, const char *out_root,
                                   uint64_t seed, peat_zoo_entry *e, int *n, FILE *log)
{
    PEAT_TRY(peat_runtime_builtin_init());
    PEAT_TRY(peat_plugin_load(lib, NULL));
    PEAT_TRY(manifest_read(manifest, e, n));
    for (int i = 0; i < *n; i++) {
        PEAT_TRY(zoo_one(&e[i], out_root, seed));
        if (log)
            fprintf(log, "%-32s expect %-18s found %-18s %s %s\n", e[i].kernel,
                    e[i].honest ? "PASS" : peat_detector_finding_name(e[i].expect),
                    peat_detector_finding_name(e[i].found),
                    peat_detector_acceptance_name(e[i].verdict), e[i].params);
    }
    return PEAT_OK;
}

/* Four-letter column heads, one per class (the names' first letters collide: OUT_OF_BOUND and
 * OUT_OF_BOUNDS_WRITE); the legend under the matrix spells them out. */
static const char *const col_head[PEAT_FIND_COUNT] = {
    [PEAT_FIND_BIT_EXACT] = "BITX",
    [PEAT_FIND_WITHIN_BOUND] = "WITH",
    [PEAT_FIND_REDUCED_PRECISION] = "REDU",
    [PEAT_FIND_TRUNCATION] = "TRUN",
    [PEAT_FIND_FTZ] = "FTZ",
    [PEAT_FIND_RANGE] = "RANG",
    [PEAT_FIND_BITFLIP] = "BITF",
    [PEAT_FIND_STUCK_BIT] = "STUC",
    [PEAT_FIND_TILE] = "STRU",
    [PEAT_FIND_NAN] = "NAN",
    [PEAT_FIND_NOISE] = "NOIS",
    [PEAT_FIND_APPROX] = "APPR",
    [PEAT_FIND_NONDETERMINISTIC] = "NOND",
    [PEAT_FIND_WRONG_RESULT] = "WRON",
    [PEAT_FIND_OUT_OF_BOUND] = "OOB",
    [PEAT_FIND_UNKNOWN] = "UNKN",
    [PEAT_FIND_TRAINING_EQUIVALENT] = "TEQ",
    [PEAT_FIND_DEGRADES] = "DEGR",
    [PEAT_FIND_DIVERGES] = "DIVG",
    [PEAT_FIND_DUE] = "DUE",
    [PEAT_FIND_OUT_OF_BOUNDS_WRITE] = "OOBW",
    [PEAT_FIND_INPUT_MUTATION] = "INMU",
};

static void print_legend(FILE *f)
{
    fputs("columns:", f);
    for (int k = 0; k < PEAT_FIND_COUNT; k++)
        fprintf(f, "%s %s = %s", k ? "," : "", col_head[k] ? col_head[k] : "?",
                peat_detector_finding_name((peat_finding_class)k));
    fputc('\n', f);
}

peat_zoo_score peat_run_calibrate_zoo_print(FILE *f, const peat_zoo_entry *e, int n)
{
    peat_zoo_score s = {0};
    /* rows: expected class (honest kernels as "honest"); columns: primary finding */
    fprintf(f, "\nzoo: expected \\ found (primary finding)\n%-18s", "");
    for (int k = 0; k < PEAT_FIND_COUNT; k++) fprintf(f, " %4s", col_head[k] ? col_head[k] : "?");
    fputc('\n', f);
    for (int row = 0; row <= PEAT_FIND_COUNT; row++) {
        int cnt[PEAT_FIND_COUNT] = {0}, any = 0;
        for (int i = 0; i < n; i++)
            if ((e[i].honest && row == PEAT_FIND_COUNT) ||
                (!e[i].honest && (int)e[i].expect == row))
                cnt[e[i].found]++, any = 1;
        if (!any) continue;
        fprintf(f, "%-18.18s", row == PEAT_FIND_COUNT ? "honest" : peat_detector_finding_name(row));
        for (int k = 0; k < PEAT_FIND_COUNT; k++) fprintf(f, " %4d", cnt[k]);
        fputc('\n', f);
    }
    print_legend(f);
    for (int i = 0; i < n; i++) {
        if (e[i].honest) {
            s.honest++;
            s.false_alarms += e[i].verdict != PEAT_ACCEPT_PASS;
        } else {
            s.defects++;
            s.caught += e[i].verdict != PEAT_ACCEPT_PASS;
            s.right += e[i].found == e[i].expect;
        }
    }
    fprintf(f,
            "\ndefects caught %d/%d, right primary class %d/%d (%.0f%%), false alarms on honest "
            "kernels %d/%d\n",
            s.caught, s.defects, s.right, s.defects, s.defects ? 100.0 * s.right / s.defects : 0.0,
            s.false_alarms, s.honest);
    return s;
}
