/* cmd_scale.h: the `peat merge` command (cmd_scale.c): shards into one result. */
#ifndef PEAT_CLI_CMD_SCALE_H
#define PEAT_CLI_CMD_SCALE_H

#include "harness/cli/options.h"

extern const peat_cli_cmd peat_cli_merge;
int peat_cli_merge_main(int argc, char **argv, const char *cmdline);

#endif
