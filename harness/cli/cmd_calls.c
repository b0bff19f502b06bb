/* cmd_calls.c: the file protocol's commands (docs/calls.md): `peat calls export` writes every call
 * PEAT would make of a candidate into calls.h5; `peat judge CALLS OUTS` judges the outputs a
 * harness in any runtime wrote for them into outs.h5, as `peat run` judges a kernel. */
#define _DEFAULT_SOURCE /* realpath */
#include "harness/cli/cmd_calls.h"

#include "harness/calls/calls.h"
#include "harness/run/run.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define die peat_cli_die /* harness/cli/options.c: one line on stderr, exit status 2 */

typedef struct export_opts {
    const char *op, *out;
    int force;
} export_opts;

static const peat_cli_opt export_table[] = {
    {"kernel-op", "OP", PEAT_CLI_STR, offsetof(export_opts, op), 0, 0, 0, NULL, NULL, NULL,
     "the op whose calls are exported (gemm, softmax, layernorm, ...: `peat list`); required",
     NULL},
    {"out", "FILE", PEAT_CLI_STR, offsetof(export_opts, out), 0, 0, 0, NULL, NULL, "calls.h5",
     "where the calls go", NULL},
    {"force", NULL, PEAT_CLI_FLAG, offsetof(export_opts, force), 0, 1, 0, NULL, NULL, NULL,
     "replace FILE when it exists", NULL},
};

const peat_cli_cmd peat_cli_calls = {
    "calls",
    "export the calls a candidate gets:  peat calls export --kernel-op gemm --out calls.h5",
    "peat calls export --kernel-op OP [--out FILE] [--force] [peat run options]",
    "Writes every call `peat run` would make of a candidate for OP into an HDF5 file: the\n"
    "recorded calls of the training flow (or of --capture), the probes and the across-call\n"
    "sequences, each with its op, params, inputs, the output buffers as handed and, for the\n"
    "calls that must run in order in one process (the kernel's state), buffer ids. A harness in\n"
    "any runtime runs its kernel on each call and writes the outputs into outs.h5; `peat judge\n"
    "FILE outs.h5` gives the verdict (docs/calls.md: the layout and a complete numpy harness).\n"
    "The options of `peat run` that shape the calls (--flow, --capture, --size, --seed, --calls,\n"
    "--iters, --record-*, --optimizer, --no-probes, --no-sequences, ...) are taken as they are\n"
    "and kept in the file; --kernel, --plugin, --budget, --resume and --shard are not.",
    export_table,
    (int)(sizeof export_table / sizeof export_table[0]),
    "Exit status: 0 the file is written, 2 usage or input error.",
};

typedef struct judge_opts {
    const char *out;
    int force, json, quiet;
} judge_opts;

static const peat_cli_opt judge_table[] = {
    {"out", "DIR", PEAT_CLI_STR, offsetof(judge_opts, out), 0, 0, 0, NULL, NULL,
     "peat-out/<kernel>-<flow>-<UTC time>", "the campaign folder (reports, campaign.h5)", NULL},
    {"force", NULL, PEAT_CLI_FLAG, offsetof(judge_opts, force), 0, 1, 0, NULL, NULL, NULL,
     "replace a finished campaign in DIR", NULL},
    {"json", NULL, PEAT_CLI_FLAG, offsetof(judge_opts, json), 0, 1, 0, NULL, NULL, NULL,
     "print only the verdict as JSON", NULL},
    {"quiet", NULL, PEAT_CLI_FLAG, offsetof(judge_opts, quiet), 0, 1, 0, NULL, NULL, NULL,
     "no progress lines", NULL},
};

const peat_cli_cmd peat_cli_judge = {
    "judge",
    "judge outputs a harness wrote for exported calls:  peat judge calls.h5 outs.h5",
    "peat judge CALLS OUTS [--out DIR] [--force] [--json] [--quiet]",
    "Judges a kernel that runs outside PEAT (Python, Triton, a torch extension, a separate\n"
    "binary) from files: CALLS is `peat calls export`'s, OUTS holds the outputs the harness\n"
    "wrote for each of its calls (docs/calls.md). The calls are made again by `peat run`'s\n"
    "pipeline with the export's options, each answered from OUTS, so the verdict, findings,\n"
    "report.html, signature.json and junit.xml are those `peat run` gives a kernel with the\n"
    "same outputs. Runtime FI (the kernel in the training loop) needs the kernel live and is\n"
    "not run (a plugin or peat_torch.check runs it). A call OUTS lacks, or an output of another\n"
    "shape or dtype, is refused in one line before anything runs; a call the harness marked\n"
    "failed (attribute \"error\") is a kernel failure, as a crash is.",
    judge_table,
    (int)(sizeof judge_table / sizeof judge_table[0]),
    "Exit status: 0 the kernel passes (or warnings only), 1 it fails, 2 usage or input error.",
};

/* Options `peat calls export` does not take from `peat run`: they choose the kernel or where
 * the run goes, which the export decides. */
static int refused(const char *a)
{
    static const char *const no[] = {"--kernel",       "--plugin",       "--budget",
                                     "--resume",       "--shard",        "--json",
                                     "--runtime-freq", "--runtime-band", "--runtime-model"};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        size_t n = strlen(no[i]);
        if (strncmp(a, no[i], n) == 0 && (a[n] == 0 || a[n] == '=')) return 1;
    }
    return 0;
}

/* Splits argv into the export's own options (mine) and the `peat run` options (run). */
static int export_split(int argc, char **argv, char **mine, int *n_mine, char **run, int *n_run)
{
    *n_mine = *n_run = 0;
    for (int i = 0; i < argc; i++) {
        const peat_cli_opt *o = peat_cli_find(&peat_cli_calls, argv[i]);
        if (refused(argv[i]))
            return die("peat calls export does not take %s (the export chooses it)", argv[i]);
        char **to = o ? mine : run;
        int *n = o ? n_mine : n_run;
        to[(*n)++] = argv[i];
        const char *eq = strchr(argv[i], '=');
        int flag = o ? o->kind == PEAT_CLI_FLAG : 0;
        if (!o) {
            const peat_cli_opt *r = peat_cli_find(&peat_cli_run, argv[i]);
            flag = !r || r->kind == PEAT_CLI_FLAG;
        }
        if (!eq && !flag && i + 1 < argc) to[(*n)++] = argv[++i];
    }
    return -1;
}

static int export_main(int argc, char **argv)
{
    if (argc > 120) return die("too many arguments");
    char *mine[128], *run[128];
    int n_mine, n_run, rc = export_split(argc, argv, mine, &n_mine, run, &n_run);
    if (rc >= 0) return rc;
    export_opts e = {NULL, "calls.h5", 0};
    peat_status st = peat_cli_parse(&peat_cli_calls, n_mine, mine, &e);
    if (st != PEAT_OK) return die("%s", peat_error_last());
    if (!e.op) return die("peat calls export needs --kernel-op OP (the op of the calls)");
    if (!e.force && access(e.out, F_OK) == 0) return die("%s exists: --force replaces it", e.out);
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    if ((st = peat_cli_parse(&peat_cli_run, n_run, run, &o)) != PEAT_OK)
        return die("%s", peat_error_last());
    char words[8192] = "", paths[2][PATH_MAX];
    int n_paths = 0;
    for (int i = 0; i < n_run; i++) {
        if (strchr(run[i], '\n')) return die("an option holds a line break: %s", run[i]);
        /* a file the judge reads again is kept by its absolute path (it may run elsewhere) */
        if (i > 0 && n_paths < 2 &&
            (!strcmp(run[i - 1], "--capture") || !strcmp(run[i - 1], "--finetune-from"))) {
            if (!realpath(run[i], paths[n_paths])) return die("cannot read %s", run[i]);
            run[i] = paths[n_paths++];
        }
        size_t len = strlen(words);
        if (len + strlen(run[i]) + 2 >= sizeof words) return die("the run options are too long");
        snprintf(words + len, sizeof words - len, "%s%s", i ? "\n" : "", run[i]);
    }
    int64_t n = 0;
    if ((st = peat_calls_export(&o, e.op, words, e.out, &n)) != PEAT_OK)
        return die("%s", peat_error_last());
    printf("peat calls export: %lld %s calls -> %s (run each, write outs.h5, then `peat judge "
           "%s outs.h5`: docs/calls.md)\n",
           (long long)n, e.op, e.out, e.out);
    return 0;
}

int peat_cli_calls_main(int argc, char **argv, const char *cmdline)
{
    (void)cmdline;
    if (argc < 1 || strcmp(argv[0], "export") != 0)
        return die("peat calls takes one subcommand: export (peat help calls)");
    return export_main(argc - 1, argv + 1);
}

/* The export's `peat run` options (one per line) as argv: words is rewritten in place. */
static int words_split(char *words, char **argv, int max)
{
    int n = 0;
    for (char *p = words; *p && n < max;) {
        argv[n++] = p;
        char *nl = strchr(p, '\n');
        if (!nl) break;
        *nl = 0;
        p = nl + 1;
    }
    return n;
}

static int judge_run(const judge_opts *jo, const char *outs, const char *kernel, const char *words,
                     const char *cmdline)
{
    static char buf[8192];
    char *argv[128];
    snprintf(buf, sizeof buf, "%s", words);
    int n = words_split(buf, argv, 128);
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    peat_status st = peat_cli_parse(&peat_cli_run, n, argv, &o);
    if (st != PEAT_OK) return die("calls.h5's run options: %s", peat_error_last());
    o.kernel = kernel, o.out_dir = jo->out, o.force = jo->force;
    o.json = jo->json, o.quiet = jo->quiet || jo->json, o.argv = cmdline;
    o.no_runtime = 1, o.no_diagnose = 1, o.isolate = 0, o.table = stdout;
    if (!o.quiet) {
        printf("peat: judging %s from %s (runtime FI and the differential diagnosis need the "
               "kernel live: not run) ...\n",
               kernel, outs);
        fflush(stdout);
    }
    peat_campaign_result *r = calloc(1, sizeof *r);
    if (!r) return die("out of memory");
    st = peat_run_campaign(&o, r);
    int verdict = r->verdict;
    free(r);
    if (st != PEAT_OK) return die("%s", peat_error_last());
    return verdict == PEAT_ACCEPT_FAIL ? 1 : 0;
}

int peat_cli_judge_main(int argc, char **argv, const char *cmdline)
{
    char *pos[2], *rest[128];
    int n_pos = 0;
    if (argc > 128) return die("too many arguments");
    int n = peat_cli_positionals(&peat_cli_judge, argc, argv, pos, 2, &n_pos, rest);
    if (n < 0) return die("peat judge takes two files: CALLS OUTS (extra: %s)", argv[-1 - n]);
    judge_opts jo = {0};
    peat_status st = peat_cli_parse(&peat_cli_judge, n, rest, &jo);
    if (st != PEAT_OK) return die("%s", peat_error_last());
    if (n_pos != 2) return die("peat judge needs CALLS and OUTS (peat help judge)");
    peat_calls_judge *j = NULL;
    const char *kernel, *words;
    if (peat_calls_judge_open(pos[0], pos[1], &j, &kernel, &words) != PEAT_OK)
        return die("%s", peat_error_last());
    int rc = judge_run(&jo, pos[1], kernel, words, cmdline);
    if (rc != 2 && peat_calls_judge_check(j) != PEAT_OK) rc = die("%s", peat_error_last());
    peat_calls_judge_close(j);
    return rc;
}
