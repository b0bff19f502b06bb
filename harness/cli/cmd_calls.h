/* cmd_calls.h: the file protocol's commands (cmd_calls.c): `peat calls export` and `peat judge`. */
#ifndef PEAT_CLI_CMD_CALLS_H
#define PEAT_CLI_CMD_CALLS_H

#include "harness/cli/options.h"

extern const peat_cli_cmd peat_cli_calls, peat_cli_judge;
int peat_cli_calls_main(int argc, char **argv, const char *cmdline);
int peat_cli_judge_main(int argc, char **argv, const char *cmdline);

#endif
