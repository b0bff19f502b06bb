/* options.h: the command line's option tables: one row per option (name, kind, range or choices,
 * default, help) that both the parser and `peat help <command>` read. */
#ifndef PEAT_HARNESS_OPTIONS_H
#define PEAT_HARNESS_OPTIONS_H

#include "harness/campaign/campaign.h"
#include "harness/fi/fi.h"

#include <stddef.h>
#include <stdio.h>

typedef enum {
    PEAT_CLI_FLAG,   /* no value: the int at off is set to lo */
    PEAT_CLI_STR,    /* const char * (not empty) */
    PEAT_CLI_INT,    /* int in lo..hi */
    PEAT_CLI_I64,    /* int64_t in lo..hi */
    PEAT_CLI_U64,    /* uint64_t in lo..hi */
    PEAT_CLI_REAL,   /* double in (lo, hi), bounds excluded */
    PEAT_CLI_CHOICE, /* const char *, one of choices ("adamw|sgd") */
    PEAT_CLI_SPEC,   /* const char *, accepted by check() (policy specs: docs/cli.md) */
    PEAT_CLI_FREQ,   /* peat_freq_schedule, parsed by peat_freq_schedule_parse (core/freq.h) */
    PEAT_CLI_MULTI,  /* repeatable: const char *[hi] at off, its int count at off2 */
    PEAT_CLI_SPAN,   /* "LO:HI" with lo <= LO < HI: int64_t LO at off, HI at off2 */
    PEAT_CLI_CONFIG, /* --config FILE: options read from FILE first (the command line overrides) */
} peat_cli_kind;

/* hi of an integer option without an upper bound */
#define PEAT_CLI_NO_MAX 9.3e18

typedef struct peat_cli_opt {
    const char *name; /* without dashes: "iters" (also the key in a --config file) */
    const char *meta; /* the value in help: "N", "NAME" (NULL for flags) */
    peat_cli_kind kind;
    size_t off, off2;                    /* where the value goes in the command's options struct */
    double lo, hi;                       /* range (see the kinds) */
    const char *choices;                 /* PEAT_CLI_CHOICE */
    peat_status (*check)(const char *v); /* PEAT_CLI_SPEC */
    const char *def; /* the default in words, where the struct's default is 0 = "computed" */
    const char *help;
    const char *section; /* a help section that starts at this option */
} peat_cli_opt;

typedef struct peat_cli_cmd {
    const char *name;    /* "run" */
    const char *summary; /* one line for `peat help` */
    const char *usage;   /* "peat run --kernel NAME [options]" */
    const char *about;   /* what it does, for `peat help <command>` */
    const peat_cli_opt *opts;
    int n_opts;
    const char *epilog; /* after the options (may be NULL) */
} peat_cli_cmd;

/* `peat list` and `peat calibrate` options (`peat run` fills peat_campaign_opts). */
typedef struct peat_cli_inspect_opts {
    int verify;
} peat_cli_inspect_opts;

typedef struct peat_cli_report_opts {
    int json;
} peat_cli_report_opts;

typedef struct peat_cli_list_opts {
    const char *plugins[PEAT_MAX_PLUGINS];
    int n_plugins;
} peat_cli_list_opts;

typedef struct peat_cli_calibrate_opts {
    int64_t trials;
    uint64_t seed;
    const char *zoo;      /* the defect zoo plugin (NULL: catalogue only) */
    const char *manifest; /* its manifest (NULL: tests/zoo/manifest.tsv of the source tree) */
} peat_cli_calibrate_opts;

/* `peat calibrate-latency` and `peat predict` options. */
typedef struct peat_cli_latency_opts {
    const char *kernel, *flow, *backend, *cache_dir;
    int64_t iters, calls;
    int force;
    /* predict: the run options that choose stages (as `peat run` takes them) */
    int no_probes, no_runtime, no_isolate, runtime_band;
    peat_freq_schedule runtime_freq;       /* n 0: not given (`peat run`'s default) */
    const char *plugins[PEAT_MAX_PLUGINS]; /* kernels of plugin libraries, as `peat run` loads */
    int n_plugins;
} peat_cli_latency_opts;

extern const peat_cli_cmd peat_cli_run, peat_cli_list, peat_cli_calibrate, peat_cli_inspect,
    peat_cli_calibrate_latency, peat_cli_predict,
    peat_cli_inject, /* inject fills peat_fi_opts (harness/fi/fi.h) */
    peat_cli_report;

/* The row of option argument arg ("--name", "--name=VALUE") in cmd's table, or NULL. */
const peat_cli_opt *peat_cli_find(const peat_cli_cmd *cmd, const char *arg);

/* Separates the positional arguments of a command (`peat ci SUITE`, `peat diff OLD NEW`) from
 * its options: options and their values go to opts (returns how many), at most max_pos
 * positionals to pos (*n_pos). A positional beyond max_pos returns -1 - its index. */
int peat_cli_positionals(const peat_cli_cmd *cmd, int argc, char **argv, char **pos, int max_pos,
                         int *n_pos, char **opts);

/* Parses argv (options only: "--name VALUE", "--name=VALUE" or a flag) into opts, the command's
 * options struct, which holds its defaults; a --config FILE is read first. String options point
 * into argv (or, from a config file, into storage valid until the next parse with one). An error
 * names the option and what it takes. */
peat_status peat_cli_parse(const peat_cli_cmd *cmd, int argc, char **argv, void *opts);

/* Writes `peat help <command>`: usage, about, then each option with its range or choices and
 * its default (from defaults, the command's options struct as the parser starts from it). */
void peat_cli_help(FILE *f, const peat_cli_cmd *cmd, const void *defaults);

/* The one way a command fails on bad input: "peat: error: <message>" on stderr; returns 2, the
 * usage/input exit status. */
int peat_cli_die(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

#endif
