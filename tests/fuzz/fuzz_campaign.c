/* fuzz_campaign.c: libFuzzer target for the campaign reader on mutated files: `peat inspect`
 * (store/) on the bytes, as a file. */
#include "fuzz_util.h"
#include "store/store.h"

#include <hdf5.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    if (!devnull) {
        devnull = fopen("/dev/null", "w");
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* the reader reports; HDF5's stack is noise */
    }
    const char *path = fuzz_file(data, size, "h5");
    if (!path) return 0;
    peat_store_inspect(path, 1, devnull); /* --verify: every tensor read too */
    unlink(path);
    return 0;
}
