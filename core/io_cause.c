/* io_cause.c: the words for why a write failed (io_cause.h). */
#include "core/io_cause.h"

#include <errno.h>
#include <string.h>

const char *peat_io_cause(int e)
{
    if (e == ENOSPC) return "no space left on device";
    if (e == EFBIG) return "file too large (file-size limit)";
    return e ? strerror(e) : "write error";
}
