/* cache_dir.h: where PEAT keeps what it computes once for many runs (the latency tables, the
 * golden cache): one rule for every cache (internal, not the host API). */
#ifndef PEAT_CORE_CACHE_DIR_H
#define PEAT_CORE_CACHE_DIR_H

#include "peat/peat.h"

#include <stddef.h>

/* The cache directory into buf (not created): given, else $PEAT_CACHE_DIR, else
 * $XDG_CACHE_HOME/peat, else ~/.cache/peat (/tmp/.cache/peat without a HOME). A path that
 * leaves fewer than `room` bytes of buf for the names under it is refused (PEAT_ERR_INVAL,
 * naming what), never cut. */
peat_status peat_cache_dir(const char *given, const char *what, size_t room, char *buf, size_t n);

#endif
