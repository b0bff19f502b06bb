/* fuzz_cli.c: libFuzzer target for the option-table parser of every command
 * (harness/cli/options.c): the input's first byte picks the command, the rest is its arguments, one
 * per line. */
#include "fuzz_util.h"
#include "harness/nightly/ci.h"
#include "harness/cli/cmd_nightly.h"
#include "harness/cli/options.h"

#include <stdalign.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const peat_cli_cmd *cmds[] = {&peat_cli_run,     &peat_cli_list, &peat_cli_calibrate,
                                  &peat_cli_inspect, &peat_cli_ci,   &peat_cli_diff};
    if (size < 1) return 0;
    const peat_cli_cmd *cmd = cmds[data[0] % (sizeof cmds / sizeof cmds[0])];
    char *text = fuzz_string(data + 1, size - 1);
    if (!text) return 0;
    char *argv[64];
    int argc = 0;
    for (char *line = strtok(text, "\n"); line && argc < 64; line = strtok(NULL, "\n"))
        argv[argc++] = line;
    /* every command's options struct fits in it; the parser writes only at the table's offsets */
    static alignas(64) char opts[1 << 16];
    memset(opts, 0, sizeof opts);
    peat_cli_parse(cmd, argc, argv, opts);
    free(text);
    return 0;
}
