/* fuzz_util.h: what the libFuzzer targets share: the input as a NUL-terminated string or a file. */
#ifndef PEAT_FUZZ_UTIL_H
#define PEAT_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* data as a string (freed by the caller); NULL when out of memory. */
static inline char *fuzz_string(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) return NULL;
    memcpy(s, data, size);
    s[size] = 0;
    return s;
}

/* data written to this process's scratch file (the parsers under test read paths); its path, or
 * NULL when it cannot be written. */
static inline const char *fuzz_file(const uint8_t *data, size_t size, const char *ext)
{
    static char path[128];
    snprintf(path, sizeof path, "/tmp/peat-fuzz-%ld.%s", (long)getpid(), ext);
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    size_t n = fwrite(data, 1, size, f);
    fclose(f);
    return n == size ? path : NULL;
}

#endif
