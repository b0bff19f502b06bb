/* fuzz_json.c: libFuzzer target for the JSON reader `peat diff` and `peat ci` use on
 * signature.json and ci.json files (harness/nightly/jsonread.c). */
#include "fuzz_util.h"
#include "harness/nightly/jsonread.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_string(data, size);
    if (!text) return 0;
    peat_json v;
    memset(&v, 0, sizeof v);
    if (peat_nightly_json_parse(text, "fuzz", &v) == PEAT_OK) {
        peat_nightly_json_num(&v, "candidate.max_norm");
        peat_nightly_json_str(&v, "verdict", "");
        peat_nightly_json_free(&v);
    }
    free(text);
    return 0;
}
