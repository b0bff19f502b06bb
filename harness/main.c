/* main.c: the `peat` command line: list, run, inspect, help. Exit 0 pass, 1 fail, 2 usage/input. */
#include "harness/calibrate.h"
#include "harness/harness.h"
#include "harness/campaign.h"
#include "store/store.h"
#include "inject/inject.h"
#include "peat/backend.h"
#include "peat/plugin.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EXIT_PASS = 0, EXIT_KERNEL_FAIL = 1, EXIT_USAGE = 2 };

static int die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("peat: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_USAGE;
}

static int die_status(peat_status st)
{
    const char *m = peat_error_last();
    return die("%s", m[0] ? m : peat_status_str(st));
}

static const char *const usage_main =
    "usage: peat <command> [options]\n"
    "\n"
    "PEAT validates a new kernel against the trusted (golden) one inside DNN training:\n"
    "it records op calls of a training flow, replays them through the candidate, measures\n"
    "errors against an fp64-exact reference and names the error model they match.\n"
    "\n"
    "commands:\n"
    "  run       validate a kernel:  peat run --kernel gemm_new\n"
    "  list      kernels, flows, backends, ops and error models\n"
    "  inspect   what a campaign file holds:  peat inspect DIR/campaign.h5\n"
    "  calibrate the detector's confusion matrix over the error-model catalogue\n"
    "  help      help on a command:  peat help run\n"
    "  version   print the version\n"
    "\n"
    "exit status: 0 the kernel passes (or warnings only), 1 the kernel fails, 2 usage or input "
    "error\n";

static const char *const usage_run =
    "usage: peat run --kernel NAME [options]\n"
    "\n"
    "Profiles a golden training flow, replays the recorded calls of the kernel's op through the\n"
    "candidate, and reports a verdict with evidence.\n"
    "\n"
    "  --kernel NAME     candidate kernel to validate (see `peat list`)            (required)\n"
    "  --flow NAME       training flow: mlp, cnn, gpt, gpt_unfused (default: first calling the "
    "op)\n"
    "  --backend NAME    auto, cpu, cuda, hip (default auto: a GPU if present, else cpu)\n"
    "  --iters N         training iterations to profile (default: mlp 200, others 60)\n"
    "  --calls N         op calls to record and replay (default 96)\n"
    "  --seed S          seed of everything random (default 1)\n"
    "  --out DIR         output directory (default peat-out/<kernel>-<flow>-<UTC time>)\n"
    "  --plugin PATH     load kernels from a plugin library (repeatable)\n"
    "  --resume          continue an interrupted campaign in --out DIR (same options)\n"
    "  --force           replace a campaign already in --out DIR\n"
    "  --no-isolate      run the candidate in-process (default: a child process per call, so a\n"
    "                    crashing or hanging kernel is reported instead of ending the campaign)\n"
    "  --timeout SEC     per-call deadline for an isolated candidate (default 30)\n"
    "  --quiet           print only the verdict table\n"
    "  --config FILE     read options from FILE (`key = value` lines, e.g. `record-ops = all`);\n"
    "                    flags on the command line override it\n"
    "\nrecording policy (what the profiler stores in campaign.h5):\n"
    "  --record-ops LIST     ops to record: all, or e.g. gemm,softmax (the kernel's op always)\n"
    "  --record-every K      every k-th call of each op (default: spread --calls over the run)\n"
    "  --record-iters LO:HI  only iterations LO <= it < HI\n"
    "  --record-phase LIST   fwd,bwd,opt (default all)\n"
    "  --checkpoints SPEC    weights + optimizer state at: last (default), none, every:N, 0,10,59\n"
    "  --activations SPEC    outputs of every forward op at these iterations (default none)\n"
    "  --compress MODE       auto (default: shuffle + deflate for tensors it shrinks by >= 25%,\n"
    "                        the rest written as they are, fastest), all (smallest file), none,\n"
    "                        or a percent: the saving a tensor must reach to be compressed\n"
    "\ntraining:\n"
    "  --optimizer NAME      adamw (default) or sgd\n"
    "  --task N              0 pretraining task (default), 1 shifted task (for finetuning)\n"
    "  --finetune-from FILE  start from the last checkpoint in FILE (a campaign.h5)\n"
    "  --batch N, --width N, --depth N, --seq N, --lr X\n"
    "                        flow sizes and learning rate (default: the flow's; docs/flows.md)\n"
    "\n"
    "Writes DIR/campaign.h5, DIR/signature.json, DIR/summary.md, DIR/junit.xml.\n";

static const char *const usage_list =
    "usage: peat list [--plugin PATH]\n"
    "\nLists kernels (by op, with role, backend, dtypes), flows, backends and error models.\n";

static const char *const usage_calibrate =
    "usage: peat calibrate [--trials N] [--seed S]\n"
    "\nInjects every pseudo-error model of the catalogue into the golden GEMM on N random shapes\n"
    "(default 20) and prints which finding the detector names for each: the detector's measured\n"
    "accuracy. Exit 0 when at least 95% of the primary findings name the injected model.\n";

static const char *const usage_inspect =
    "usage: peat inspect FILE\n"
    "\nPrints what a campaign file holds: stages, op calls per op, iterations, sizes and the\n"
    "compression ratio. Refuses files that are not PEAT campaigns of this schema version.\n";

static int cmd_help(int argc, char **argv)
{
    const char *c = argc > 0 ? argv[0] : NULL;
    if (!c)
        fputs(usage_main, stdout);
    else if (strcmp(c, "run") == 0)
        fputs(usage_run, stdout);
    else if (strcmp(c, "list") == 0)
        fputs(usage_list, stdout);
    else if (strcmp(c, "inspect") == 0)
        fputs(usage_inspect, stdout);
    else if (strcmp(c, "calibrate") == 0)
        fputs(usage_calibrate, stdout);
    else if (strcmp(c, "help") == 0 || strcmp(c, "version") == 0)
        fputs(usage_main, stdout);
    else
        return die(
            "no help for unknown command '%s' (commands: run, list, inspect, calibrate, help, "
            "version)",
            c);
    return EXIT_PASS;
}

/* Option value: "--opt VALUE" or "--opt=VALUE". */
static int opt_value(int argc, char **argv, int *i, const char *name, const char **val)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0) return 0;
    if (argv[*i][n] == '=') {
        *val = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] != 0) return 0;
    if (*i + 1 >= argc) {
        *val = NULL;
        return 1;
    }
    *val = argv[++*i];
    return 1;
}

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!s || !*s) return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

static int cmd_list(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        const char *v;
        if (opt_value(argc, argv, &i, "--plugin", &v)) {
            if (!v) return die("--plugin needs a path");
            peat_status st = peat_builtin_init();
            if (st == PEAT_OK) st = peat_plugin_load(v, NULL);
            if (st != PEAT_OK) return die_status(st);
        } else
            return die("unknown option '%s' for list (see `peat help list`)", argv[i]);
    }
    peat_status st = peat_builtin_init();
    if (st != PEAT_OK) return die_status(st);
    printf("kernels (by op):\n");
    for (int op = 0; op < PEAT_OP_COUNT; op++) {
        int any = 0;
        for (int i = 0; i < peat_registry_count(); i++) {
            const peat_kernel *k = peat_registry_at(i);
            if ((int)k->op != op) continue;
            if (!any) printf("  %s\n", peat_op_name((peat_op_kind)op));
            any = 1;
            printf("    %-26s %-9s %-4s in %-4s acc %-4s out %-4s  %s\n", k->name,
                   peat_role_name(k->role), k->backend, peat_dtype_name(k->in_dtype),
                   peat_dtype_name(k->acc_dtype), peat_dtype_name(k->out_dtype), k->desc);
        }
    }
    printf("\nflows:\n");
    const char *const *fl = peat_flow_names();
    for (int i = 0; fl[i]; i++) {
        printf("  %-12s %s\n               ops:", fl[i], peat_flow_describe(fl[i]));
        uint32_t m = peat_flow_op_mask(fl[i]);
        for (int op = 0; op < PEAT_OP_COUNT; op++)
            if (m & (1u << op)) printf(" %s", peat_op_name((peat_op_kind)op));
        printf("\n");
    }
    printf("\nbackends: built %s; available:", peat_backend_list());
    const char *bs[] = {"cpu", "cuda", "hip"};
    for (int i = 0; i < 3; i++)
        if (peat_backend_available(bs[i])) printf(" %s", bs[i]);
    printf("\n\nerror models (pseudo-errors):\n%s", peat_inject_catalogue());
    return EXIT_PASS;
}

/* Reads a config file of `key = value` lines (the long option names without dashes; `#`
 * comments; `[section]` headers ignored) into an argv that precedes the command line's, so
 * flags override the file. Flags without values are written `resume = true`. */
static int config_argv(const char *path, char ***out, int *n, char *store, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f) return die("cannot read config %s: %s", path, strerror(errno));
    static char *args[128];
    char line[512];
    size_t used = 0;
    int k = 0, lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *c = line + strspn(line, " \t");
        c[strcspn(c, "#\r\n")] = 0;
        if (!*c || *c == '[') continue;
        char *eq = strchr(c, '=');
        if (!eq) {
            fclose(f);
            return die("%s:%d: expected `key = value`", path, lineno);
        }
        *eq = 0;
        char *key = c, *val = eq + 1;
        for (char *e = key + strlen(key); e > key && (e[-1] == ' ' || e[-1] == '\t');) *--e = 0;
        val += strspn(val, " \t");
        for (char *e = val + strlen(val); e > val && (e[-1] == ' ' || e[-1] == '\t');) *--e = 0;
        int flag = !strcmp(val, "true");
        size_t need = strlen(key) + strlen(val) + 4;
        if (k + 2 > 128 || used + need > cap) {
            fclose(f);
            return die("%s: too many settings", path);
        }
        args[k++] = store + used;
        used += (size_t)sprintf(store + used, "--%s", key) + 1;
        if (!flag) {
            args[k++] = store + used;
            used += (size_t)sprintf(store + used, "%s", val) + 1;
        }
    }
    fclose(f);
    *out = args;
    *n = k;
    return -1;
}

static int cmd_run(int argc, char **argv, const char *cmdline)
{
    /* --config FILE: its settings come first, the command line's flags override them */
    static char cfg_store[8192];
    char *merged[256];
    for (int i = 0; i < argc; i++) {
        const char *v = NULL;
        if (!opt_value(argc, argv, &i, "--config", &v)) continue;
        if (!v) return die("--config needs a file");
        char **cargs = NULL;
        int nc = 0, rc = config_argv(v, &cargs, &nc, cfg_store, sizeof cfg_store);
        if (rc >= 0) return rc;
        if (nc + argc > 256) return die("too many options");
        int m = 0;
        for (int j = 0; j < nc; j++) merged[m++] = cargs[j];
        for (int j = 0; j < argc; j++) {
            if (!strcmp(argv[j], "--config")) {
                j++;
                continue;
            }
            if (!strncmp(argv[j], "--config=", 9)) continue;
            merged[m++] = argv[j];
        }
        argv = merged;
        argc = m;
        break;
    }
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    o.argv = cmdline;
    for (int i = 0; i < argc; i++) {
        const char *v = NULL;
        int64_t n;
#define NEED(name)                                                                                 \
    if (!v) return die("%s needs a value (see `peat help run`)", name)
        if (opt_value(argc, argv, &i, "--kernel", &v)) {
            NEED("--kernel");
            o.kernel = v;
        } else if (opt_value(argc, argv, &i, "--flow", &v)) {
            NEED("--flow");
            o.flow = v;
        } else if (opt_value(argc, argv, &i, "--backend", &v)) {
            NEED("--backend");
            o.backend = v;
        } else if (opt_value(argc, argv, &i, "--iters", &v)) {
            NEED("--iters");
            if (!parse_i64(v, 1, 1000000, &o.iters))
                return die("--iters must be an integer in 1..1000000, got '%s'", v);
        } else if (opt_value(argc, argv, &i, "--calls", &v)) {
            NEED("--calls");
            if (!parse_i64(v, 1, 1000000, &o.calls))
                return die("--calls must be an integer in 1..1000000, got '%s'", v);
        } else if (opt_value(argc, argv, &i, "--seed", &v)) {
            NEED("--seed");
            if (!parse_i64(v, 0, INT64_MAX, &n))
                return die("--seed must be a non-negative integer, got '%s'", v);
            o.seed = (uint64_t)n;
        } else if (opt_value(argc, argv, &i, "--out", &v)) {
            NEED("--out");
            if (!*v) return die("--out needs a directory");
            o.out_dir = v;
        } else if (opt_value(argc, argv, &i, "--plugin", &v)) {
            NEED("--plugin");
            if (o.n_plugins == PEAT_MAX_PLUGINS)
                return die("at most %d --plugin options", PEAT_MAX_PLUGINS);
            o.plugins[o.n_plugins++] = v;
        } else if (opt_value(argc, argv, &i, "--timeout", &v)) {
            NEED("--timeout");
            char *end;
            o.kernel_timeout_s = strtod(v, &end);
            if (*end || !(o.kernel_timeout_s > 0 && o.kernel_timeout_s < 86400))
                return die("--timeout must be seconds in (0, 86400), got '%s'", v);
        } else if (opt_value(argc, argv, &i, "--record-ops", &v)) {
            NEED("--record-ops");
            uint32_t mask;
            if (peat_op_mask_parse(v, &mask) != PEAT_OK) return die("%s", peat_error_last());
            o.record_ops = v;
        } else if (opt_value(argc, argv, &i, "--record-every", &v)) {
            NEED("--record-every");
            if (!parse_i64(v, 1, 1000000000, &o.record_every))
                return die("--record-every must be an integer >= 1, got '%s'", v);
        } else if (opt_value(argc, argv, &i, "--record-iters", &v)) {
            NEED("--record-iters");
            long long lo, hi;
            char tail;
            if (sscanf(v, "%lld:%lld%c", &lo, &hi, &tail) != 2 || lo < 0 || hi <= lo)
                return die("--record-iters must be LO:HI with 0 <= LO < HI, got '%s'", v);
            o.record_iter_lo = lo, o.record_iter_hi = hi;
        } else if (opt_value(argc, argv, &i, "--record-phase", &v)) {
            NEED("--record-phase");
            int a, b, c;
            if (peat_phase_parse(v, &a, &b, &c) != PEAT_OK) return die("%s", peat_error_last());
            o.record_phase = v;
        } else if (opt_value(argc, argv, &i, "--checkpoints", &v)) {
            NEED("--checkpoints");
            if (peat_iter_spec_check(v) != PEAT_OK)
                return die("--checkpoints: %s", peat_error_last());
            o.checkpoint_iters = v;
        } else if (opt_value(argc, argv, &i, "--compress", &v)) {
            NEED("--compress");
            int dl, ms;
            if (peat_compress_parse(v, &dl, &ms) != PEAT_OK) return die("%s", peat_error_last());
            o.compress = v;
        } else if (opt_value(argc, argv, &i, "--activations", &v)) {
            NEED("--activations");
            if (peat_iter_spec_check(v) != PEAT_OK)
                return die("--activations: %s", peat_error_last());
            o.activation_iters = v;
        } else if (opt_value(argc, argv, &i, "--optimizer", &v)) {
            NEED("--optimizer");
            if (strcmp(v, "adamw") && strcmp(v, "sgd"))
                return die("--optimizer must be adamw or sgd, got '%s'", v);
            o.optimizer = v;
        } else if (opt_value(argc, argv, &i, "--task", &v)) {
            NEED("--task");
            if (!parse_i64(v, 0, 1, &n))
                return die("--task must be 0 (pretraining) or 1 (shifted), got '%s'", v);
            o.task = (int)n;
        } else if (opt_value(argc, argv, &i, "--batch", &v)) {
            NEED("--batch");
            if (!parse_i64(v, 1, 4096, &n))
                return die("--batch must be an integer in 1..4096, got '%s'", v);
            o.batch = (int)n;
        } else if (opt_value(argc, argv, &i, "--width", &v)) {
            NEED("--width");
            if (!parse_i64(v, 1, 4096, &n))
                return die("--width must be an integer in 1..4096, got '%s'", v);
            o.width = (int)n;
        } else if (opt_value(argc, argv, &i, "--depth", &v)) {
            NEED("--depth");
            if (!parse_i64(v, 1, 64, &n))
                return die("--depth must be an integer in 1..64, got '%s'", v);
            o.depth = (int)n;
        } else if (opt_value(argc, argv, &i, "--seq", &v)) {
            NEED("--seq");
            if (!parse_i64(v, 1, 4096, &n))
                return die("--seq must be an integer in 1..4096, got '%s'", v);
            o.seq = (int)n;
        } else if (opt_value(argc, argv, &i, "--lr", &v)) {
            NEED("--lr");
            char *end;
            o.lr = strtod(v, &end);
            if (*end || !(o.lr > 0 && o.lr < 10))
                return die("--lr must be in (0, 10), got '%s'", v);
        } else if (opt_value(argc, argv, &i, "--finetune-from", &v)) {
            NEED("--finetune-from");
            o.finetune_from = v;
        } else if (strcmp(argv[i], "--resume") == 0) {
            o.resume = 1;
        } else if (strcmp(argv[i], "--force") == 0) {
            o.force = 1;
        } else if (strcmp(argv[i], "--no-isolate") == 0) {
            o.isolate = 0;
        } else if (strcmp(argv[i], "--quiet") == 0) {
            o.quiet = 1;
        } else {
            return die("unknown option '%s' for run (see `peat help run`)", argv[i]);
        }
#undef NEED
    }
    if (!o.kernel) return die("run needs --kernel NAME (see `peat list` for kernels)");
    if (o.resume && !o.out_dir) return die("--resume needs --out DIR of the campaign to continue");
    if (o.resume && o.force) return die("--resume and --force exclude each other");
    peat_campaign_result r;
    if (!o.quiet) {
        /* progress goes to stdout: stderr carries only the one-line error, if any */
        printf("peat: validating %s ...\n", o.kernel);
        fflush(stdout);
    }
    peat_status st = peat_campaign_run(&o, &r);
    if (st != PEAT_OK) return die_status(st);
    peat_campaign_print(stdout, &o, &r);
    return r.verdict == PEAT_ACCEPT_FAIL ? EXIT_KERNEL_FAIL : EXIT_PASS;
}

static int cmd_inspect(int argc, char **argv)
{
    if (argc != 1) return die("inspect needs exactly one FILE (see `peat help inspect`)");
    peat_status st = peat_store_inspect(argv[0], stdout);
    return st == PEAT_OK ? EXIT_PASS : die_status(st);
}

static int cmd_calibrate(int argc, char **argv)
{
    int64_t trials = 20, seed = 1;
    for (int i = 0; i < argc; i++) {
        const char *v = NULL;
        if (opt_value(argc, argv, &i, "--trials", &v)) {
            if (!parse_i64(v, 1, 10000, &trials)) return die("--trials must be in 1..10000");
        } else if (opt_value(argc, argv, &i, "--seed", &v)) {
            if (!parse_i64(v, 0, INT64_MAX, &seed))
                return die("--seed must be a non-negative integer");
        } else
            return die("unknown option '%s' for calibrate (see `peat help calibrate`)", argv[i]);
    }
    int(*counts)[PEAT_FIND_COUNT] = calloc((size_t)peat_calibrate_cases(), sizeof *counts);
    if (!counts) return die("out of memory");
    peat_status st = peat_calibrate_run((uint64_t)seed, (int)trials, counts, stdout);
    if (st != PEAT_OK) {
        free(counts);
        return die_status(st);
    }
    peat_calibrate_print(stdout, counts, (int)trials);
    int diag = 0;
    for (int e = 0; e < peat_calibrate_cases(); e++)
        diag += counts[e][peat_calibrate_case_expect(e)];
    free(counts);
    return diag * 100 >= 95 * (int)trials * peat_calibrate_cases() ? EXIT_PASS : EXIT_KERNEL_FAIL;
}

int main(int argc, char **argv)
{
    /* test-only fault injection (docs/hdf5-schema.md): SIGKILL after N store write steps */
    const char *kill_at = getenv("PEAT_DEBUG_KILL_AT");
    if (kill_at && *kill_at) peat_store_debug_kill_at(atoll(kill_at));
    if (argc < 2) {
        fputs(usage_main, stderr);
        return EXIT_USAGE;
    }
    char cmdline[512] = "";
    for (int i = 0; i < argc; i++) {
        size_t len = strlen(cmdline);
        snprintf(cmdline + len, sizeof cmdline - len, "%s%s", i ? " " : "", argv[i]);
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) return cmd_help(0, NULL);
    if (strcmp(cmd, "help") == 0) return cmd_help(argc - 2, argv + 2);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("peat %s\n", PEAT_VERSION_STRING);
        return EXIT_PASS;
    }
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            char *c[1] = {argv[1]};
            return cmd_help(1, c);
        }
    if (strcmp(cmd, "run") == 0) return cmd_run(argc - 2, argv + 2, cmdline);
    if (strcmp(cmd, "list") == 0) return cmd_list(argc - 2, argv + 2);
    if (strcmp(cmd, "inspect") == 0) return cmd_inspect(argc - 2, argv + 2);
    if (strcmp(cmd, "calibrate") == 0) return cmd_calibrate(argc - 2, argv + 2);
    return die("unknown command '%s' (commands: run, list, inspect, calibrate, help, version)",
               cmd);
}
