/* io_cause.h: the words for why a write failed, the same from every writer (store, reports). */
#ifndef PEAT_CORE_IO_CAUSE_H
#define PEAT_CORE_IO_CAUSE_H

/* "no space left on device" (ENOSPC), "file too large (file-size limit)" (EFBIG), else
 * strerror(e); "write error" for 0. */
const char *peat_io_cause(int e);

#endif
