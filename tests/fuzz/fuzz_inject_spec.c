/* fuzz_inject_spec.c: libFuzzer target for error-model specs (`peat inject`, inject/spec.c). */
#include "fuzz_util.h"
#include "inject/inject.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *spec = fuzz_string(data, size);
    if (!spec) return 0;
    peat_inject_model_t *m = NULL;
    if (peat_inject_model_parse(spec, &m) == PEAT_OK) peat_inject_model_free(m);
    free(spec);
    return 0;
}
