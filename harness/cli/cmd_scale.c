/* cmd_scale.c: `peat merge OUT [SHARD...]`: shards (Slurm array tasks, CI matrix jobs) combined
 * into the one result: `peat ci --shard` results into the suite's, `peat inject --shard` files
 * into the campaign's (docs/scale-out.md). */
#define _DEFAULT_SOURCE
#include "harness/cli/cmd_scale.h"

#include "harness/scale/run_shard.h"
#include "harness/cli/cmdline.h"
#include "harness/cli/options.h"
#include "harness/nightly/ci.h"
#include "harness/fi/fi_shard.h"
#include "harness/run/run.h"

#include <glob.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct merge_opts {
    const char *baseline;
    int update_baseline;
} merge_opts;

static const peat_cli_opt merge_opts_table[] = {
    {"baseline", "DIR", PEAT_CLI_STR, offsetof(merge_opts, baseline), 0, 0, 0, NULL, NULL, NULL,
     "suites: compare the merged result with the one kept in DIR (if any), as `peat ci "
     "--baseline` does; a regression fails the merge",
     NULL},
    {"update-baseline", NULL, PEAT_CLI_FLAG, offsetof(merge_opts, update_baseline), 0, 1, 0, NULL,
     NULL, NULL, "then keep the merged result in the --baseline DIR instead", NULL},
};

const peat_cli_cmd peat_cli_merge = {
    "merge",
    "combine shards into one result:  peat merge OUT [SHARD...]",
    "peat merge OUT [SHARD...] [--baseline DIR [--update-baseline]]",
    "Combines shards into the one result, the same as an unsharded run with the same seed:\n"
    "- suites: the results of `peat ci SUITE --shard I/N --out OUT` (default: every\n"
    "  OUT/shard-I-of-N) into OUT's ci.json, summary.md, junit.xml, report.html, items in the\n"
    "  suite's order (the suite file must be where the shards read it);\n"
    "- fault injection: the files of `peat inject --campaign DIR --shard I/N` (default: every\n"
    "  DIR/fi-shard-I-of-N.h5) into DIR/campaign.h5 with the reference signatures and\n"
    "  fi-summary.md, fi-report.html;\n"
    "- runtime FI runs: the files of `peat run --shard I/N --out DIR` (default: every\n"
    "  DIR/run-shard-I-of-N.bin) into shard 0's campaign: band, verdicts, /runtime/*, findings,\n"
    "  and the reports, which complete it (the shard files are then removed).\n"
    "Refuses shards of another campaign or suite (seed, kernel, flow), shard count or version\n"
    "in one line, and names the shards that are missing or incomplete with their items\n"
    "(nothing is written then): rerun those shards (an FI shard resumes where it stopped) and\n"
    "merge again. Merging twice adds nothing. A suite's merge compares with a --baseline as\n"
    "`peat ci --baseline` does.",
    merge_opts_table,
    (int)(sizeof merge_opts_table / sizeof merge_opts_table[0]),
    "Exit status: as `peat ci` for a suite (0 pass, 1 fail or a regression against the\n"
    "baseline, 2 an item without verdict); 0 for FI shards; as `peat run` for run shards (0\n"
    "pass, 1 fail); 2 usage or input error (a missing shard included).",
};

/* Whether path (OUT itself or a SHARD) holds suite results rather than FI shard files. */
static int is_suite(const char *out, int argc, char **argv)
{
    char p[900];
    struct stat sb;
    if (argc > 1) {
        snprintf(p, sizeof p, "%s/ci.json", argv[1]);
        return stat(p, &sb) == 0 || strstr(argv[1], "ci.json") != NULL;
    }
    glob_t g;
    snprintf(p, sizeof p, "%s/shard-*-of-*/ci.json", out);
    int n = glob(p, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
    globfree(&g);
    return n > 0;
}

static int merge_suite(int argc, char **argv, const merge_opts *o)
{
    peat_ci_result *r = malloc(sizeof *r);
    if (!r) return peat_cli_die("out of memory");
    peat_status st = peat_nightly_ci_merge(argv[0], (const char *const *)(argv + 1), argc - 1,
                                           o->baseline, o->update_baseline, r);
    int rc = st == PEAT_OK ? r->exit_code : peat_cli_die("%s", peat_error_last());
    if (st == PEAT_OK) {
        printf("peat merge: %d items into %s\n", r->n_items, r->out_dir);
        peat_nightly_ci_print(stdout, r);
    }
    peat_nightly_ci_result_free(r);
    free(r);
    return rc;
}

static int merge_fi(int argc, char **argv)
{
    peat_fi_result r;
    peat_status st = peat_fi_merge(argv[0], (const char *const *)(argv + 1), argc - 1, 0, &r);
    if (st != PEAT_OK) {
        peat_fi_result_free(&r);
        return peat_cli_die("%s", peat_error_last());
    }
    printf("peat merge: %lld trials from the shards into %s/campaign.h5\n", (long long)r.n_merged,
           r.dir);
    peat_fi_print(stdout, &r);
    peat_fi_result_free(&r);
    return 0;
}

/* The run shards' campaign: the options they recorded, the merge's folder. */
static int merge_run(const char *dir, peat_scale_run_shard *s, int n)
{
    static char store[8192];
    peat_campaign_opts o;
    peat_status st = peat_cli_cmdline_run_opts(s[0].line, &o, store, sizeof store);
    if (st != PEAT_OK) return peat_cli_die("merge of %s: %s", dir, peat_error_last());
    o.out_dir = dir, o.argv = s[0].argv;
    o.quiet = 1, o.json = 0, o.table = stdout;
    o.merge_shards = s, o.n_merge_shards = n;
    peat_campaign_result r;
    st = peat_run_campaign(&o, &r);
    if (st != PEAT_OK) return peat_cli_die("%s", peat_error_last());
    for (int i = 0; i < n; i++) unlink(s[i].path); /* taken into the campaign */
    printf("peat merge: the runtime FI runs of %d shards into %s/campaign.h5\n", n, dir);
    return r.verdict == PEAT_ACCEPT_FAIL ? 1 : 0;
}

/* Whether the shards are `peat run --shard` files: named so, or in OUT. */
static int is_run(const char *out, int argc, char **argv)
{
    if (argc > 1) return strstr(argv[1], "run-shard-") != NULL;
    char p[900];
    snprintf(p, sizeof p, "%s/run-shard-*-of-*.bin", out);
    glob_t g;
    int n = glob(p, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
    globfree(&g);
    return n > 0;
}

static int merge_runs(int argc, char **argv)
{
    peat_scale_run_shard *s = NULL;
    int n = 0;
    if (peat_scale_run_shards_load(argv[0], argv + 1, argc - 1, &s, &n) != PEAT_OK)
        return peat_cli_die("%s", peat_error_last());
    int rc = merge_run(argv[0], s, n);
    peat_scale_run_shards_free(s, n);
    return rc;
}

int peat_cli_merge_main(int argc, char **argv, const char *cmdline)
{
    (void)cmdline;
    char *pos[128], *rest[128];
    int n_pos = 0;
    merge_opts o = {NULL, 0};
    if (argc > 128) return peat_cli_die("too many arguments");
    int n = peat_cli_positionals(&peat_cli_merge, argc, argv, pos, 128, &n_pos, rest);
    if (n < 0 || n_pos < 1)
        return peat_cli_die("usage: %s (see `peat help merge`)", peat_cli_merge.usage);
    if (peat_cli_parse(&peat_cli_merge, n, rest, &o) != PEAT_OK)
        return peat_cli_die("%s", peat_error_last());
    if (is_suite(pos[0], n_pos, pos)) return merge_suite(n_pos, pos, &o);
    if (o.baseline || o.update_baseline)
        return peat_cli_die("--baseline compares suite results: %s holds campaign shards", pos[0]);
    if (is_run(pos[0], n_pos, pos)) return merge_runs(n_pos, pos);
    return merge_fi(n_pos, pos);
}
