/* store_room.c: before a flush, whether the file may grow to what HDF5 has allocated: a full disk
 * or a file-size limit is refused in one line before HDF5 writes metadata it cannot finish (a
 * flush cut short leaves a superblock pointing past the end: a "truncated" file), so the file
 * stays as its last flush made it and --resume continues it. */
#include "store/store_impl.h"
#include "store/store_test.h"
#include "core/io_cause.h"

#include <errno.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

/* What a flush may allocate beyond the space HDF5 reports (metadata written as it is flushed). */
#define FLUSH_MARGIN_BYTES (256 * 1024)

#ifdef PEAT_TEST_HOOKS
static int64_t test_free = -1; /* peat_store_test_room_set: the filesystem's free bytes */

void peat_store_test_room_set(int64_t free_bytes)
{
    test_free = free_bytes;
}
#endif

/* Free bytes of the filesystem that holds path (-1: unknown). */
static int64_t fs_free(const char *path)
{
#ifdef PEAT_TEST_HOOKS
    if (test_free >= 0) return test_free;
#endif
    struct statvfs v;
    if (statvfs(path, &v) != 0) return -1;
    return (int64_t)v.f_bavail * (int64_t)v.f_frsize;
}

peat_status peat_store_room_check(peat_store_t *s, hid_t file, const char *path)
{
    hsize_t eoa = 0;
    struct stat sb;
    if (H5Fget_filesize(file, &eoa) < 0 || stat(path, &sb) != 0) return PEAT_OK; /* unknown */
    int64_t need = (int64_t)eoa + FLUSH_MARGIN_BYTES, have = (int64_t)sb.st_size;
    struct rlimit rl;
    int cause = 0;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (uint64_t)need > (uint64_t)rl.rlim_cur)
        cause = EFBIG;
    int64_t avail = fs_free(path);
    if (!cause && avail >= 0 && need > have && need - have > avail) cause = ENOSPC;
    if (!cause) return PEAT_OK;
    s->failed = 1, s->abandon = 1; /* nothing more is written: the last flush is what stays */
    if (cause == EFBIG)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: %s: it would grow to %lld bytes, the limit is %lld",
                          path, peat_io_cause(EFBIG), (long long)need, (long long)rl.rlim_cur);
    return PEAT_ERROR(PEAT_ERR_IO, "%s: %s: it needs %lld more bytes, its filesystem has %lld free",
                      path, peat_io_cause(ENOSPC), (long long)(need - have), (long long)avail);
}
