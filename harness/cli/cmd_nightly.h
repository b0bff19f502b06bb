/* cmd_nightly.h: the `peat ci` and `peat diff` commands (cmd_nightly.c). */
#ifndef PEAT_CLI_CMD_NIGHTLY_H
#define PEAT_CLI_CMD_NIGHTLY_H

#include "harness/cli/options.h"

/* The commands (cmd_nightly.c): their option tables, and their entry points given the arguments
 * after the command's name; they return the exit status. */
extern const peat_cli_cmd peat_cli_ci, peat_cli_diff;
int peat_cli_ci_main(int argc, char **argv, const char *cmdline);
int peat_cli_diff_main(int argc, char **argv, const char *cmdline);

#endif
