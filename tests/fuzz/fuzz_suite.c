/* fuzz_suite.c: libFuzzer target for the nightly suite and policy files (harness/nightly/suite.c):
 * the same bytes read as both. */
#include "fuzz_util.h"
#include "harness/nightly/suite.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, "ini");
    if (!path) return 0;
    static peat_suite s;
    static peat_policy p;
    memset(&s, 0, sizeof s);
    peat_nightly_suite_load(path, &s);
    peat_nightly_policy_default(&p);
    peat_nightly_policy_load(path, &p);
    unlink(path);
    return 0;
}
