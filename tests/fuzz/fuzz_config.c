/* fuzz_config.c: libFuzzer target for --config files (harness/cli/options.c) as `peat run` reads
 * them. */
#include "fuzz_util.h"
#include "harness/cli/options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, "conf");
    if (!path) return 0;
    char *argv[] = {"--config", (char *)path};
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    peat_cli_parse(&peat_cli_run, 2, argv, &o);
    unlink(path);
    return 0;
}
