/* cmdline.h: the command line a campaign records (quoted so it splits back exactly), and
 * `peat run --resume DIR`, which takes every option from that record. */
#ifndef PEAT_CMDLINE_H
#define PEAT_CMDLINE_H

#include "peat/peat.h"

#define PEAT_CMDLINE_MAX_ARGS 128

struct peat_campaign_opts;

/* Joins argv into buf, single-quoting words a shell would split or expand; returns
 * PEAT_ERR_INVAL when it does not fit (buf then holds a truncated line). */
peat_status peat_cli_cmdline_join(int argc, char *const *argv, char *buf, size_t n);

/* Splits a joined line back into words (single quotes, as peat_cli_cmdline_join writes them).
 * Words point into store (cap bytes); at most max words. */
peat_status peat_cli_cmdline_split(const char *line, char **words, int max, int *n, char *store,
                                   size_t cap);

/* `peat run`'s options from a recorded line (what a rank is handed, what a run shard recorded):
 * o defaulted, then parsed from the line's words, which point into store (cap bytes, alive as
 * long as o is used). */
peat_status peat_cli_cmdline_run_opts(const char *line, struct peat_campaign_opts *o, char *store,
                                      size_t cap);

/* `peat run --resume DIR [OPTIONS]`: builds the argument list of the interrupted run (the
 * command line recorded in DIR/campaign.h5.partial, less --out, --force and --resume) followed
 * by `--resume --out DIR` and the options given beside it. An option given beside it that
 * changes what the campaign records is refused with one line naming it; only --quiet, --json,
 * --timeout and --no-isolate may differ. *recorded receives the original command line. */
peat_status peat_cli_cmdline_resume(const char *dir, int argc, char **argv, int *out_argc,
                                    char **out_argv, int max, char *store, size_t cap,
                                    char *recorded, size_t recorded_n);

#endif
