/* cmd_scale.c: `peat merge OUT [SHARD...]`: shards (Slurm array tasks, CI matrix jobs) combined
 * into the one result: `peat ci --shard` results into the suite's, `peat inject --shard` files
 * into the campaign's (docs/scale-out.md). */
#define _DEFAULT_SOURCE
#include "cli/cmd_scale.h"

#include "nightly/ci.h"
#include "run/fi_shard.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const peat_cli_cmd peat_cli_merge = {
    "merge",
    "combine shards into one result:  peat merge OUT [SHARD...]",
    "peat merge OUT [SHARD...]",
    "Combines shards into the one result, the same as an unsharded run with the same seed:\n"
    "- suites: the results of `peat ci SUITE --shard I/N --out OUT` (default: every\n"
    "  OUT/shard-I-of-N) into OUT's ci.json, summary.md, junit.xml, report.html, items in the\n"
    "  suite's order (the suite file must be where the shards read it);\n"
    "- fault injection: the files of `peat inject --campaign DIR --shard I/N` (default: every\n"
    "  DIR/fi-shard-I-of-N.h5) into DIR/campaign.h5 with the reference signatures and\n"
    "  fi-summary.md, fi-report.html.\n"
    "Refuses shards of another campaign or suite (seed, kernel, flow), shard count or version\n"
    "in one line, and names the shards that are missing or incomplete with their items\n"
    "(nothing is written then): rerun those shards (an FI shard resumes where it stopped) and\n"
    "merge again. Merging twice adds nothing.",
    NULL,
    0,
    "Exit status: as `peat ci` for a suite (0 pass, 1 fail, 2 an item without verdict); 0 for\n"
    "FI shards; 2 usage or input error (a missing shard included).",
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

static int merge_suite(int argc, char **argv)
{
    peat_ci_result *r = malloc(sizeof *r);
    if (!r) return peat_cli_die("out of memory");
    peat_status st = peat_nightly_ci_merge(argv[0], (const char *const *)(argv + 1), argc - 1, r);
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
    peat_status st = peat_run_fi_merge(argv[0], (const char *const *)(argv + 1), argc - 1, 0, &r);
    if (st != PEAT_OK) {
        peat_run_fi_result_free(&r);
        return peat_cli_die("%s", peat_error_last());
    }
    printf("peat merge: %lld trials from the shards into %s/campaign.h5\n", (long long)r.n_merged,
           r.dir);
    peat_run_fi_print(stdout, &r);
    peat_run_fi_result_free(&r);
    return 0;
}

int peat_cli_merge_main(int argc, char **argv, const char *cmdline)
{
    (void)cmdline;
    if (argc < 1 || argv[0][0] == '-')
        return peat_cli_die("usage: %s (see `peat help merge`)", peat_cli_merge.usage);
    for (int i = 1; i < argc; i++)
        if (argv[i][0] == '-')
            return peat_cli_die("merge takes no option '%s' (usage: %s)", argv[i],
                                peat_cli_merge.usage);
    return is_suite(argv[0], argc, argv) ? merge_suite(argc, argv) : merge_fi(argc, argv);
}
