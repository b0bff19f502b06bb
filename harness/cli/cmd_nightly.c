/* cmd_nightly.c: the `peat ci` and `peat diff` commands: their option tables, what is printed
 * and the exit status (0 pass, 1 failure or regression, 2 usage/input error or no verdict). */
#include "harness/nightly/ci.h"
#include "harness/report/report.h"
#include "harness/cli/cmd_nightly.h"
#include "harness/scale/scale.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CI(field) offsetof(peat_ci_opts, field)

static peat_status check_shard(const char *v)
{
    peat_scale_shard sh;
    return peat_scale_shard_parse(v, &sh);
}

static const peat_cli_opt ci_opts[] = {
    {"out", "DIR", PEAT_CLI_STR, CI(out_dir), 0, 0, 0, NULL, NULL, "peat-ci/<suite>-<UTC time>",
     "output folder (one holding a suite result is refused without --resume or --force)", NULL},
    {"baseline", "DIR", PEAT_CLI_STR, CI(baseline), 0, 0, 0, NULL, NULL, NULL,
     "compare with the suite result kept in DIR (if any); a regression fails the suite", NULL},
    {"update-baseline", NULL, PEAT_CLI_FLAG, CI(update_baseline), 0, 1, 0, NULL, NULL, NULL,
     "then keep this result in the --baseline DIR instead", NULL},
    {"policy", "FILE", PEAT_CLI_STR, CI(policy), 0, 0, 0, NULL, NULL, NULL,
     "[accept] and [thresholds] from FILE, over the suite's (docs/nightly-ci.md)", NULL},
    {"force", NULL, PEAT_CLI_FLAG, CI(force), 0, 1, 0, NULL, NULL, NULL,
     "reuse an output folder; items are rerun with --force", NULL},
    {"resume", NULL, PEAT_CLI_FLAG, CI(resume), 0, 1, 0, NULL, NULL, NULL,
     "finish the suite run in --out DIR (killed, or with shards missing; any --shard count or "
     "rank count): items whose finished campaign of the same command is there are taken, not "
     "rerun (docs/scale-out.md)",
     NULL},
    {"quiet", NULL, PEAT_CLI_FLAG, CI(quiet), 0, 1, 0, NULL, NULL, NULL,
     "no progress, only the verdict line", NULL},
    {"json", NULL, PEAT_CLI_FLAG, CI(json), 0, 1, 0, NULL, NULL, NULL,
     "only {verdict, exit, items, counts, regressions, report} as JSON on stdout", NULL},
    {"budget", "TIME", PEAT_CLI_STR, CI(budget), 0, 0, 0, NULL, NULL, NULL,
     "fit the suite in TIME (90s, 20m, 1h): each item not fixed by iters or calls runs `peat "
     "run --budget` with the time left over the items left",
     NULL},
    {"shard", "I/N", PEAT_CLI_SPEC, CI(shard), 0, 0, 0, NULL, check_shard, "the whole suite",
     "run only items I, I+N, I+2N, ... of the suite's plan, into OUT/shard-I-of-N; `peat merge "
     "OUT` makes the suite result (docs/scale-out.md)",
     NULL},
};

const peat_cli_cmd peat_cli_ci = {
    "ci",
    "run a suite of kernels, one aggregated report:  peat ci examples/nightly.suite",
    "peat ci SUITE [options]",
    "Runs every kernel x flow x backend of the suite file as its own `peat run` (a failing item\n"
    "never stops the others) and writes one report into DIR: report.html, summary.md (a pull-\n"
    "request comment), junit.xml (a test case per item), ci.json, and each item's campaign.\n"
    "Suite format, acceptance policy, allowances and baselines: docs/nightly-ci.md.",
    ci_opts,
    (int)(sizeof ci_opts / sizeof ci_opts[0]),
    "Exit status: 0 every item passes and nothing regressed, 1 an item fails or a regression,\n"
    "2 an item reached no verdict, or the suite or an option is bad.",
};

typedef struct diff_opts {
    const char *policy;
    int json, quiet;
} diff_opts;

static const peat_cli_opt diff_opts_table[] = {
    {"policy", "FILE", PEAT_CLI_STR, offsetof(diff_opts, policy), 0, 0, 0, NULL, NULL,
     "docs/nightly-ci.md's defaults", "thresholds from FILE's [thresholds] section", NULL},
    {"json", NULL, PEAT_CLI_FLAG, offsetof(diff_opts, json), 0, 1, 0, NULL, NULL, NULL,
     "print the changes as JSON", NULL},
    {"quiet", NULL, PEAT_CLI_FLAG, offsetof(diff_opts, quiet), 0, 1, 0, NULL, NULL, NULL,
     "print only regressions", NULL},
};

const peat_cli_cmd peat_cli_diff = {
    "diff",
    "what regressed between two campaigns or suite results:  peat diff OLD NEW",
    "peat diff OLD NEW [options]",
    "Compares two campaign folders (signature.json) or two suite results (ci.json) and names\n"
    "every regression with its old and new value: verdict, new findings, effective bits, max\n"
    "error/bound, elements over the bound, NaN/Inf, kernel failures, held-out loss and accuracy\n"
    "(same seed), total time.",
    diff_opts_table,
    (int)(sizeof diff_opts_table / sizeof diff_opts_table[0]),
    "Exit status: 1 on a regression, 0 otherwise, 2 on bad input.",
};

#define die peat_cli_die /* harness/cli/options.c: one line on stderr, exit status 2 */

/* The positional arguments (want of them) and the options of a command, parsed into opts. */
static int parse(const peat_cli_cmd *cmd, int argc, char **argv, char **pos, int want, void *opts)
{
    char *rest[128];
    int n_pos = 0;
    if (argc > 128) return die("too many arguments");
    int n = peat_cli_positionals(cmd, argc, argv, pos, want, &n_pos, rest);
    if (n < 0)
        return die("%s takes %d argument%s (%s), got '%s' too", cmd->name, want,
                   want == 1 ? "" : "s", cmd->usage, argv[-1 - n]);
    if (n_pos != want) return die("usage: %s (see `peat help %s`)", cmd->usage, cmd->name);
    if (peat_cli_parse(cmd, n, rest, opts) != PEAT_OK) return die("%s", peat_error_last());
    return -1;
}

static void print_ci_json(const peat_ci_result *r)
{
    static const char *const names[] = {"PASS", "WARN", "FAIL", "ERROR", "SKIP"};
    printf("{\"verdict\": \"%s\", \"exit\": %d, \"items\": %d, \"counts\": {",
           r->exit_code == 2 ? "ERROR"
           : r->exit_code    ? "FAIL"
                             : "PASS",
           r->exit_code, r->n_items);
    for (int s = 0; s < 5; s++) printf("%s\"%s\": %d", s ? ", " : "", names[s], r->counts[s]);
    printf("}, \"regressions\": %d, \"report\": ", r->diff.n_regressions);
    char rep[600];
    snprintf(rep, sizeof rep, "%s/report.html", r->out_dir);
    peat_report_json_str(stdout, rep);
    printf("}\n");
}

int peat_cli_ci_main(int argc, char **argv, const char *cmdline)
{
    peat_ci_opts o;
    memset(&o, 0, sizeof o);
    char *suite[1];
    int rc = parse(&peat_cli_ci, argc, argv, suite, 1, &o);
    if (rc >= 0) return rc;
    o.suite = suite[0];
    o.quiet |= o.json;
    peat_ci_result *r = malloc(sizeof *r);
    if (!r) return die("out of memory");
    peat_status st = peat_nightly_ci_run_ranks(&o, r); /* under mpirun: rank r runs shard r/N */
    if (peat_scale_mpi_rank() != 0) {
        free(r);
        return st == PEAT_OK ? 0 : 2; /* rank 0 reports (a rank's own failure is named above) */
    }
    rc = st == PEAT_OK ? r->exit_code : die("%s", peat_error_last());
    if (st == PEAT_OK && o.json)
        print_ci_json(r);
    else if (st == PEAT_OK && !o.quiet)
        peat_nightly_ci_print(stdout, r);
    else if (st == PEAT_OK)
        printf("suite %s: %s\n", r->suite.name, rc == 2 ? "ERROR" : rc ? "FAIL" : "PASS");
    peat_nightly_ci_result_free(r);
    free(r);
    return rc;
}

static void print_diff_json(const peat_diff *d)
{
    printf("{\"regressions\": %d, \"compared\": %d, \"entries\": [", d->n_regressions,
           d->n_compared);
    for (int i = 0; i < d->n; i++) {
        printf("%s{\"item\": ", i ? ", " : "");
        peat_report_json_str(stdout, d->e[i].item);
        printf(", \"regression\": %s, \"what\": ", d->e[i].regression ? "true" : "false");
        peat_report_json_str(stdout, d->e[i].what);
        printf("}");
    }
    printf("]}\n");
}

int peat_cli_diff_main(int argc, char **argv, const char *cmdline)
{
    diff_opts o = {NULL, 0, 0};
    char *paths[2];
    int rc = parse(&peat_cli_diff, argc, argv, paths, 2, &o);
    if (rc >= 0) return rc;
    peat_policy pol;
    peat_nightly_policy_default(&pol);
    if (o.policy && peat_nightly_policy_load(o.policy, &pol) != PEAT_OK)
        return die("%s", peat_error_last());
    peat_diff d;
    memset(&d, 0, sizeof d);
    if (peat_nightly_diff_paths(paths[0], paths[1], &pol.th, &d) != PEAT_OK) {
        peat_nightly_diff_free(&d);
        return die("%s", peat_error_last());
    }
    if (o.json)
        print_diff_json(&d);
    else if (!o.quiet || d.n_regressions)
        peat_nightly_diff_print(stdout, &d);
    rc = d.n_regressions ? 1 : 0;
    peat_nightly_diff_free(&d);
    return rc;
}
