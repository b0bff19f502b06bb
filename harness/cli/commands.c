/* commands.c: the `peat` commands: run, ci, diff, list, inspect, calibrate, calibrate-latency,
 * predict, inject, merge, help, and their dispatch (peat_cli_dispatch, what main.c and the
 * PyTorch bridge's peat_pyapi_main call). Argument handling only: the options are tables
 * (harness/cli/options.c); the work is the library's. Exit 0 pass, 1 fail, 2 usage/input. */
#include "harness/run/calibrate.h"
#include "harness/nightly/ci.h"
#include "harness/cli/cmdline.h"
#include "harness/cli/commands.h"
#include "harness/cli/cmd_calls.h"
#include "harness/cli/cmd_nightly.h"
#include "harness/cli/cmd_scale.h"
#include "harness/scale/scale.h"
#include "harness/scale/ranks.h"
#include "harness/fi/fi_shard.h"
#include "harness/report/report.h"
#include "harness/run/run.h"
#include "harness/campaign/campaign.h"
#include "harness/fi/fi.h"
#include "harness/runtime/builtin.h"
#include "harness/latency/latency_cli.h"
#include "harness/cli/limits.h"
#include "harness/cli/options.h"
#include "inject/inject.h"
#include "peat/backend.h"
#include "peat/plugin.h"
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { EXIT_PASS = 0, EXIT_KERNEL_FAIL = 1, EXIT_USAGE = 2 };

#define die                                                                                        \
    peat_cli_die /* harness/cli/options.c: one line on stderr, exit status 2 (EXIT_USAGE)          \
                  */

static int die_status(peat_status st)
{
    const char *m = peat_error_last();
    return die("%s", m[0] ? m : peat_status_str(st));
}

/* Registers the kernels of the plugin libraries named by --plugin. */
static peat_status load_plugins(const char *const *paths, int n)
{
    for (int i = 0; i < n; i++) PEAT_TRY(peat_plugin_load(paths[i], NULL));
    return PEAT_OK;
}

static int cmd_list(int argc, char **argv, const char *cmdline)
{
    peat_cli_list_opts o;
    memset(&o, 0, sizeof o);
    peat_status st = peat_cli_parse(&peat_cli_list, argc, argv, &o);
    if (st == PEAT_OK) st = peat_runtime_builtin_init();
    if (st == PEAT_OK) st = load_plugins(o.plugins, o.n_plugins);
    if (st != PEAT_OK) return die_status(st);
    printf("kernels (by op):\n");
    for (int op = 0; op < PEAT_OP_COUNT; op++) {
        int any = 0;
        for (int i = 0; i < peat_registry_count(); i++) {
            const peat_kernel *k = peat_registry_at(i);
            if ((int)k->op != op) continue;
            if (!any) printf("  %s\n", peat_op_name((peat_op_kind)op));
            any = 1;
            printf("    %-26s %-9s %-6s in %-4s acc %-4s out %-4s  %s\n", k->name,
                   peat_role_name(k->role), k->backend, peat_dtype_name(k->in_dtype),
                   peat_dtype_name(k->acc_dtype), peat_dtype_name(k->out_dtype), k->desc);
        }
    }
    printf("\nflows:\n");
    const char *const *fl = peat_models_flow_names();
    for (int i = 0; fl[i]; i++) {
        printf("  %-12s %s\n               ops:", fl[i], peat_models_flow_describe(fl[i]));
        uint64_t m = peat_models_flow_op_mask(fl[i]);
        for (int op = 0; op < PEAT_OP_COUNT; op++)
            if (m & PEAT_OP_BIT(op)) printf(" %s", peat_op_name((peat_op_kind)op));
        printf("\n");
    }
    printf("\nbackends: built %s; available:", peat_backend_list());
    char built[64];
    snprintf(built, sizeof built, "%s", peat_backend_list());
    /* in the order `peat list` always printed them: the host first, then the devices */
    for (int host = 1; host >= 0; host--)
        for (char *save = NULL, *b = strtok_r(built, ",", &save); b; b = strtok_r(NULL, ",", &save))
            if (peat_backend_on_host(b) == host && peat_backend_available(b)) printf(" %s", b);
    printf("\n\nerror models (pseudo-errors):\n%s", peat_inject_catalogue());
    return EXIT_PASS;
}

/* --resume on a finished campaign whose reports are missing (their writing failed, or they were
 * deleted): they are written again from its file, as `peat report DIR` does; -1 when dir holds
 * no such campaign (an unfinished one is continued, a whole one is "finished"). */
static int resume_reports(const char *dir, int json)
{
    char h5[4200], partial[4220];
    snprintf(h5, sizeof h5, "%s/campaign.h5", dir);
    snprintf(partial, sizeof partial, "%s.partial", h5);
    struct stat sb;
    if (stat(h5, &sb) != 0 || !S_ISREG(sb.st_mode) || stat(partial, &sb) == 0 ||
        !peat_report_missing(dir))
        return -1;
    if (!json)
        printf("peat: %s is finished but its reports are not all there: writing them again\n", dir);
    peat_acceptance v;
    peat_status st = peat_report_regenerate(dir, stdout, json, &v);
    if (st != PEAT_OK) return die_status(st);
    return v == PEAT_ACCEPT_FAIL ? EXIT_KERNEL_FAIL : EXIT_PASS;
}

/* `--resume DIR` (a folder after it, not an option): the interrupted run's own options, then
 * the ones given beside it (refused where they contradict the file). */
static int resume_expand(int *argc, char ***argv, const char **cmdline)
{
    static char *merged[256], words[4096], recorded[512];
    char *rest[256];
    const char *dir = NULL;
    int n = 0;
    for (int i = 0; i < *argc; i++) {
        if (!strcmp((*argv)[i], "--resume") && i + 1 < *argc && (*argv)[i + 1][0] != '-')
            dir = (*argv)[++i];
        else if (n < 256)
            rest[n++] = (*argv)[i];
    }
    if (!dir) return -1;
    int json = 0;
    for (int i = 0; i < n; i++) json |= !strcmp(rest[i], "--json");
    int rc = resume_reports(dir, json);
    if (rc >= 0) return rc;
    int m = 0;
    if (peat_cli_cmdline_resume(dir, n, rest, &m, merged, 256, words, sizeof words, recorded,
                                sizeof recorded) != PEAT_OK)
        return die("%s", peat_error_last());
    *argc = m;
    *argv = merged;
    *cmdline = recorded;
    return -1;
}

/* `mpirun -n N peat run`, ranks > 0: wait for rank 0's playback, probe or runtime stage, run
 * this rank's share of their items for rank 0 (docs/scale-out.md). Rank 0 reports; a failed rank
 * exits 2 silently. */
static int cmd_run_rank(void)
{
    char *line = NULL;
    if (!peat_scale_ranks_wait(&line)) return EXIT_PASS; /* rank 0 ended without it */
    static char store[8192];
    peat_campaign_opts o;
    peat_status st = peat_cli_cmdline_run_opts(line, &o, store, sizeof store);
    o.quiet = 1, o.json = 0, o.table = NULL;
    peat_campaign_result r;
    if (st == PEAT_OK) st = peat_run_campaign(&o, &r);
    /* a rank that failed answers every message with its failure until GO or STOP */
    if (!peat_scale_ranks_answered() && !peat_scale_ranks_released()) peat_scale_ranks_drain(st);
    free(line);
    return st == PEAT_OK ? EXIT_PASS : EXIT_USAGE;
}

/* Whether word i is one of those that do not decide a shard's runs (where and how it reports,
 * the shard itself): 1, or 2 with its value. */
static int shard_free_word(int argc, char **argv, int i)
{
    static const char *const alone[] = {"--quiet", "--json", "--force"};
    static const char *const valued[] = {"--shard", "--out"};
    for (size_t k = 0; k < sizeof alone / sizeof alone[0]; k++)
        if (!strcmp(argv[i], alone[k])) return 1;
    for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) {
        size_t n = strlen(valued[k]);
        if (!strncmp(argv[i], valued[k], n) && argv[i][n] == '=') return 1;
        if (!strcmp(argv[i], valued[k])) return i + 1 < argc ? 2 : 1;
    }
    return 0;
}

/* `peat run --shard I/N`: what must hold, and the command line the shard files carry. */
static int shard_check(int argc, char **argv, peat_campaign_opts *o, int ranks)
{
    peat_scale_shard sh;
    if (peat_scale_shard_parse(o->shard, &sh) != PEAT_OK || sh.n < 2)
        return die("--shard %s: I/N with N >= 2 shards", o->shard);
    if (ranks) return die("--shard and mpirun exclude each other: use one or the other");
    if (!o->out_dir)
        return die("--shard needs --out DIR (every shard writes there; then `peat "
                   "merge DIR`)");
    const char *no = o->budget          ? "--budget (its runtime FI steers by the clock)"
                     : o->resume        ? "--resume (rerun the shard with --force)"
                     : o->no_runtime    ? "--no-runtime (no runs to split)"
                     : o->capture       ? "--capture (no runtime FI)"
                     : o->finetune_from ? "--finetune-from (no runtime FI)"
                                        : NULL;
    if (no) return die("--shard splits the runtime FI runs: not with %s", no);
    static char line[8192];
    char *words[PEAT_CMDLINE_MAX_ARGS];
    int n = 0;
    for (int i = 0; i < argc;) {
        int k = shard_free_word(argc, argv, i);
        if (!k && n < PEAT_CMDLINE_MAX_ARGS) words[n++] = argv[i];
        i += k ? k : 1;
    }
    if (peat_cli_cmdline_join(n, words, line, sizeof line) != PEAT_OK)
        return die("peat run --shard: the command line is too long");
    o->shard_line = line;
    return -1;
}

/* After a shard: where its runs are, and what to do next. */
static int shard_done(const peat_campaign_opts *o, const peat_campaign_result *r)
{
    peat_scale_shard sh;
    peat_scale_shard_parse(o->shard, &sh);
    char h5[700];
    snprintf(h5, sizeof h5, "%s/campaign.h5", o->out_dir);
    if (sh.i == 0 && access(h5, F_OK) == 0) { /* no runtime stage ran: the campaign is whole */
        printf("peat run: shard 0/%d: runtime FI did not run, so the campaign is complete "
               "without the other shards\n",
               sh.n);
        return r->verdict == PEAT_ACCEPT_FAIL ? EXIT_KERNEL_FAIL : EXIT_PASS;
    }
    printf("peat run: shard %d/%d: its runtime FI runs are in %s/run-shard-%d-of-%d.bin%s; `peat "
           "merge %s` once every shard is done\n",
           sh.i, sh.n, o->out_dir, sh.i, sh.n,
           sh.i == 0 ? " (the campaign waits for them: runtime verdicts pending)" : "", o->out_dir);
    return EXIT_PASS;
}

static int cmd_run_one(int argc, char **argv, const char *cmdline)
{
    int ranks = peat_scale_mpi_size() > 1;
    int rc = resume_expand(&argc, &argv, &cmdline);
    if (rc >= 0) return rc;
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    o.argv = cmdline;
    peat_status st = peat_cli_parse(&peat_cli_run, argc, argv, &o);
    if (st != PEAT_OK) return die_status(st);
    o.quiet |= o.json;
    if (!o.kernel) return die("run needs --kernel NAME (see `peat list` for kernels)");
    if (o.resume && !o.out_dir) return die("--resume needs --out DIR of the campaign to continue");
    if (o.resume && o.force) return die("--resume and --force exclude each other");
    if (ranks && o.budget)
        return die("peat run --budget does not split across MPI ranks (its runtime FI steers its "
                   "length by the clock): run it as one process");
    if (o.shard && (rc = shard_check(argc, argv, &o, ranks)) >= 0) return rc;
    if (o.resume && (rc = resume_reports(o.out_dir, o.json)) >= 0) return rc;
    if (ranks) {
        /* the other ranks parse the same words at the runtime stage (runtime_ranks.h) */
        static char line[8192];
        if (peat_cli_cmdline_join(argc, argv, line, sizeof line) != PEAT_OK)
            return die("peat run under mpirun: the command line is too long to hand to the ranks");
        peat_scale_ranks_line(line);
    }
    if (!o.quiet) {
        /* progress goes to stdout: stderr carries only the one-line error, if any */
        printf("peat: validating %s ...\n", o.kernel);
        fflush(stdout);
    }
    o.table = stdout; /* the report stage prints the verdict there */
    peat_campaign_result r;
    st = peat_run_campaign(&o, &r);
    if (st != PEAT_OK) return die_status(st);
    if (o.shard) return shard_done(&o, &r);
    return r.verdict == PEAT_ACCEPT_FAIL ? EXIT_KERNEL_FAIL : EXIT_PASS;
}

/* Under mpirun rank 0 runs the campaign and the other ranks train runtime FI runs for it; rank 0
 * lets them go when it ends, whatever ended it. */
static int cmd_run(int argc, char **argv, const char *cmdline)
{
    if (peat_scale_mpi_size() < 2) return cmd_run_one(argc, argv, cmdline);
    int rc = peat_scale_mpi_rank() == 0 ? cmd_run_one(argc, argv, cmdline) : cmd_run_rank();
    peat_scale_ranks_release();
    /* every rank ends together: rank 0 has said what failed before a failed rank's exit makes
     * mpirun end the job */
    peat_scale_mpi_status_all(PEAT_OK, NULL);
    return rc;
}

/* A campaign directory stands for its campaign.h5, or the campaign.h5.partial of an
 * unfinished run (as `peat inject --campaign DIR` takes it). */
static int inspect_path(const char *arg, char *path, size_t n)
{
    struct stat sb;
    if (stat(arg, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        snprintf(path, n, "%s", arg);
        return 0;
    }
    snprintf(path, n, "%s/campaign.h5", arg);
    if (stat(path, &sb) == 0) return 0;
    snprintf(path, n, "%s/campaign.h5.partial", arg);
    if (stat(path, &sb) == 0) return 0;
    return die("%s holds no campaign (no campaign.h5 or campaign.h5.partial)", arg);
}

static int cmd_inspect(int argc, char **argv, const char *cmdline)
{
    char *pos[1], *rest[64];
    int n_pos = 0;
    if (argc > 64) return die("too many arguments");
    int n = peat_cli_positionals(&peat_cli_inspect, argc, argv, pos, 1, &n_pos, rest);
    if (n < 0 || n_pos != 1) return die("inspect needs exactly one FILE (see `peat help inspect`)");
    peat_cli_inspect_opts o;
    memset(&o, 0, sizeof o);
    if (peat_cli_parse(&peat_cli_inspect, n, rest, &o) != PEAT_OK)
        return die("%s", peat_error_last());
    char path[4200];
    int rc = inspect_path(pos[0], path, sizeof path);
    if (rc != 0) return rc;
    peat_status st = peat_store_inspect(path, o.verify, stdout);
    return st == PEAT_OK ? EXIT_PASS : die_status(st);
}

/* `peat report DIR`: the reports of a finished campaign written again from its file. */
static int cmd_report(int argc, char **argv, const char *cmdline)
{
    (void)cmdline;
    char *pos[1], *rest[64];
    int n_pos = 0;
    if (argc > 64) return die("too many arguments");
    int n = peat_cli_positionals(&peat_cli_report, argc, argv, pos, 1, &n_pos, rest);
    if (n < 0 || n_pos != 1)
        return die(
            "report needs exactly one DIR, a run's output directory (see `peat help report`)");
    peat_cli_report_opts o;
    memset(&o, 0, sizeof o);
    if (peat_cli_parse(&peat_cli_report, n, rest, &o) != PEAT_OK)
        return die("%s", peat_error_last());
    peat_acceptance v;
    peat_status st = peat_report_regenerate(pos[0], stdout, o.json, &v);
    if (st != PEAT_OK) return die_status(st);
    return v == PEAT_ACCEPT_FAIL ? EXIT_KERNEL_FAIL : EXIT_PASS;
}

/* 20 random shapes per model: enough for the 95% criterion to mean something in ~10 s */
static const peat_cli_calibrate_opts calibrate_defaults = {20, 1, NULL, NULL};

/* The zoo half of `peat calibrate --zoo LIB`: passes when every defect is caught, no honest
 * kernel is flagged and >= 90% of the defects get their class. */
static int calibrate_zoo(const char *lib, const char *manifest, uint64_t seed)
{
    char def[1024];
    if (!manifest) {
        snprintf(def, sizeof def, "%s/manifest.tsv", PEAT_ZOO_MANIFEST_DIR);
        manifest = def;
    }
    peat_zoo_entry *e = calloc(PEAT_ZOO_MAX, sizeof *e);
    if (!e) return die("out of memory");
    int n = 0;
    peat_status st =
        peat_run_calibrate_zoo(lib, manifest, "peat-out/calibrate-zoo", seed, e, &n, stdout);
    if (st != PEAT_OK) {
        free(e);
        return die_status(st);
    }
    peat_zoo_score s = peat_run_calibrate_zoo_print(stdout, e, n);
    free(e);
    return s.caught == s.defects && s.false_alarms == 0 && s.right * 10 >= 9 * s.defects
               ? EXIT_PASS
               : EXIT_KERNEL_FAIL;
}

static int cmd_calibrate(int argc, char **argv, const char *cmdline)
{
    peat_cli_calibrate_opts o = calibrate_defaults;
    peat_status st = peat_cli_parse(&peat_cli_calibrate, argc, argv, &o);
    if (st != PEAT_OK) return die_status(st);
    int(*counts)[PEAT_FIND_COUNT] = calloc((size_t)peat_run_calibrate_cases(), sizeof *counts);
    if (!counts) return die("out of memory");
    st = peat_run_calibrate(o.seed, (int)o.trials, counts, stdout);
    if (st != PEAT_OK) {
        free(counts);
        return die_status(st);
    }
    peat_run_calibrate_print(stdout, counts, (int)o.trials);
    int diag = 0;
    for (int e = 0; e < peat_run_calibrate_cases(); e++)
        diag += counts[e][peat_run_calibrate_case_expect(e)];
    free(counts);
    int ok = diag * 100 >= 95 * (int)o.trials * peat_run_calibrate_cases();
    if (o.zoo) {
        int zr = calibrate_zoo(o.zoo, o.manifest, o.seed);
        if (zr != EXIT_PASS && zr != EXIT_KERNEL_FAIL) return zr;
        ok = ok && zr == EXIT_PASS;
    }
    return ok ? EXIT_PASS : EXIT_KERNEL_FAIL;
}

static const peat_cli_latency_opts latency_defaults = {.backend = PEAT_BACKEND_HOST};
/* predict: the kernel's own backend unless one is given */
static const peat_cli_latency_opts predict_defaults = {.calls = PEAT_CAMPAIGN_DEFAULT_CALLS};

static int cmd_calibrate_latency(int argc, char **argv, const char *cmdline)
{
    peat_cli_latency_opts o = latency_defaults;
    peat_status st = peat_cli_parse(&peat_cli_calibrate_latency, argc, argv, &o);
    if (st == PEAT_OK) st = peat_runtime_builtin_init();
    if (st == PEAT_OK) st = load_plugins(o.plugins, o.n_plugins);
    if (st == PEAT_OK) st = peat_latency_cli_calibrate(o.backend, o.cache_dir, o.force, stdout);
    return st == PEAT_OK ? EXIT_PASS : die_status(st);
}

static int cmd_predict(int argc, char **argv, const char *cmdline)
{
    peat_cli_latency_opts o = predict_defaults;
    peat_status st = peat_cli_parse(&peat_cli_predict, argc, argv, &o);
    if (st != PEAT_OK) return die_status(st);
    if (!o.kernel) return die("predict needs --kernel NAME (see `peat list` for kernels)");
    peat_campaign_opts run;
    peat_campaign_opts_default(&run);
    run.no_probes = o.no_probes, run.no_runtime = o.no_runtime, run.isolate = !o.no_isolate;
    if (o.runtime_freq.n) run.runtime_freq = o.runtime_freq; /* else the default, "1" */
    run.runtime_band = o.runtime_band;
    peat_latency_opts lo = {.kernel = o.kernel,
                            .flow = o.flow,
                            .backend = o.backend,
                            .cache_dir = o.cache_dir,
                            .log = stderr,
                            .run = &run};
    lo.flow_cfg = peat_campaign_flow_config(&run);
    const peat_kernel *k = NULL;
    const char *flow = NULL;
    st = peat_runtime_builtin_init();
    if (st == PEAT_OK) st = load_plugins(o.plugins, o.n_plugins);
    if (st == PEAT_OK && !(k = peat_registry_find(o.kernel)))
        st = PEAT_ERROR(PEAT_ERR_NOTFOUND, "unknown kernel '%s' (see `peat list`)", o.kernel);
    if (st == PEAT_OK) st = peat_latency_flow_for(k, o.flow, &flow);
    if (st == PEAT_OK)
        st = peat_latency_cli_predict(&lo, o.iters ? o.iters : peat_campaign_default_iters(flow),
                                      o.calls, stdout);
    return st == PEAT_OK ? EXIT_PASS : die_status(st);
}

static int cmd_inject(int argc, char **argv, const char *cmdline)
{
    peat_fi_opts o;
    peat_fi_opts_default(&o);
    peat_status st = peat_cli_parse(&peat_cli_inject, argc, argv, &o);
    if (st != PEAT_OK) return die_status(st);
    if (!o.campaign) return die("inject needs --campaign DIR (see `peat help inject`)");
    if (!o.models && !o.show) return die("inject needs --model SPEC[;SPEC...] (see `peat list`)");
    peat_fi_result r;
    memset(&r, 0, sizeof r);
    st = peat_fi_run_ranks(&o, &r); /* under mpirun: rank r is shard r/N, rank 0 merges */
    if (st != PEAT_OK) {
        peat_fi_result_free(&r); /* the trials and rate tables a failed report leaves */
        return die_status(st);
    }
    if (r.shard_n)
        printf("peat inject: shard %d/%d: %lld trials run, %lld resumed, into %s (`peat merge "
               "%s` when every shard is done)\n",
               r.shard_i, r.shard_n, (long long)r.n_run, (long long)r.n_resumed, r.shard_file,
               r.dir);
    else if (peat_scale_mpi_rank() == 0)
        peat_fi_print(stdout, &r);
    peat_fi_result_free(&r);
    return EXIT_PASS;
}

/* The commands: `peat help` and the dispatch read this table. */
static const struct {
    const peat_cli_cmd *cli;
    int (*run)(int argc, char **argv, const char *cmdline);
} commands[] = {
    {&peat_cli_run, cmd_run},
    {&peat_cli_ci, peat_cli_ci_main},
    {&peat_cli_diff, peat_cli_diff_main},
    {&peat_cli_list, cmd_list},
    {&peat_cli_inspect, cmd_inspect},
    {&peat_cli_report, cmd_report},
    {&peat_cli_calibrate, cmd_calibrate},
    {&peat_cli_calibrate_latency, cmd_calibrate_latency},
    {&peat_cli_predict, cmd_predict},
    {&peat_cli_inject, cmd_inject},
    {&peat_cli_merge, peat_cli_merge_main},
    {&peat_cli_calls, peat_cli_calls_main},
    {&peat_cli_judge, peat_cli_judge_main},
};
enum { N_COMMANDS = sizeof commands / sizeof commands[0] };

static const char *const about =
    "PEAT validates a new kernel against the trusted (golden) one inside DNN training:\n"
    "it records op calls of a training flow, replays them through the candidate, measures\n"
    "errors against an fp64-exact reference and names the error model they match.\n";

static void usage_main(FILE *f)
{
    fprintf(f, "usage: peat <command> [options]\n\n%s\ncommands:\n", about);
    for (int i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-19s %s\n", commands[i].cli->name, commands[i].cli->summary);
    fputs("  help                help on a command:  peat help run\n"
          "  version             print the version\n"
          "\nexit status: 0 the kernel passes (or warnings only), 1 the kernel fails, 2 usage or "
          "input error\n",
          f);
}

/* The defaults the parser of a command starts from (help shows them). */
static void help_command(const peat_cli_cmd *cli)
{
    peat_campaign_opts run;
    peat_campaign_opts_default(&run);
    peat_fi_opts inject;
    peat_fi_opts_default(&inject);
    const void *defaults = cli == &peat_cli_run                 ? (const void *)&run
                           : cli == &peat_cli_calibrate         ? (const void *)&calibrate_defaults
                           : cli == &peat_cli_calibrate_latency ? (const void *)&latency_defaults
                           : cli == &peat_cli_predict           ? (const void *)&predict_defaults
                           : cli == &peat_cli_inject            ? (const void *)&inject
                                                                : NULL;
    peat_cli_help(stdout, cli, defaults);
}

static int cmd_help(int argc, char **argv)
{
    const char *c = argc > 0 ? argv[0] : NULL;
    if (!c || strcmp(c, "help") == 0 || strcmp(c, "version") == 0) {
        usage_main(stdout);
        return EXIT_PASS;
    }
    for (int i = 0; i < N_COMMANDS; i++)
        if (strcmp(c, commands[i].cli->name) == 0) {
            help_command(commands[i].cli);
            return EXIT_PASS;
        }
    return die("no help for unknown command '%s' (commands: run, ci, diff, list, inspect, "
               "report, calibrate, calibrate-latency, predict, inject, merge, calls, judge, help, "
               "version)",
               c);
}

int peat_cli_dispatch(int argc, char **argv)
{
    if (argc < 2) {
        usage_main(stderr);
        return EXIT_USAGE;
    }
    /* recorded in the campaign file, quoted so that --resume DIR splits it back exactly */
    char cmdline[512];
    char *words[PEAT_CMDLINE_MAX_ARGS];
    int nw = argc < PEAT_CMDLINE_MAX_ARGS ? argc : PEAT_CMDLINE_MAX_ARGS;
    for (int i = 0; i < nw; i++) words[i] = i ? argv[i] : "peat";
    if (peat_cli_cmdline_join(nw, words, cmdline, sizeof cmdline) != PEAT_OK) cmdline[0] = 0;
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) return cmd_help(0, NULL);
    if (strcmp(cmd, "help") == 0) return cmd_help(argc - 2, argv + 2);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("peat %s\n", PEAT_VERSION_STRING);
        return EXIT_PASS;
    }
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return cmd_help(1, &argv[1]);
    for (int i = 0; i < N_COMMANDS; i++)
        if (strcmp(cmd, commands[i].cli->name) == 0)
            return commands[i].run(argc - 2, argv + 2, cmdline);
    return die("unknown command '%s' (commands: run, ci, diff, list, inspect, report, calibrate, "
               "calibrate-latency, predict, inject, merge, calls, judge, help, version)",
               cmd);
}
