/* mem.c: memory for the analyzer's large buffers (the sample, the sketches, a signature's
 * scratch): mapped apart from the heap so that the isolation's fork per call leaves it out. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, madvise */
#include "analyzer/internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Under AddressSanitizer the heap serves (its red zones then guard these buffers too); so it does
 * where anonymous mappings do not exist. */
#if defined(__SANITIZE_ADDRESS__)
#define BIG_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BIG_HEAP 1
#endif
#endif
#if !defined(MAP_ANONYMOUS)
#define BIG_HEAP 1
#endif

/* Bytes mapped by peat_analyzer_big_new and not yet freed (all threads). */
static size_t big_total;

size_t peat_analyzer_unforked_bytes(void)
{
    return __atomic_load_n(&big_total, __ATOMIC_RELAXED);
}

#ifndef BIG_HEAP
#define HUGE_PAGE ((size_t)2 << 20)
#define PAGE      ((size_t)4096)

/* The mapping's length: whole pages, whole huge pages from 2 MiB up. */
static size_t big_len(size_t bytes)
{
    size_t unit = bytes >= HUGE_PAGE ? HUGE_PAGE : PAGE;
    return ((bytes ? bytes : 1) + unit - 1) & ~(unit - 1);
}
#endif

void *peat_analyzer_big_new(size_t bytes)
{
#ifdef BIG_HEAP
    return calloc(1, bytes ? bytes : 1);
#else
    __atomic_add_fetch(&big_total, big_len(bytes), __ATOMIC_RELAXED);
    size_t len = big_len(bytes), align = len >= HUGE_PAGE ? HUGE_PAGE : PAGE;
    size_t span = len + align - PAGE;
    char *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        __atomic_sub_fetch(&big_total, len, __ATOMIC_RELAXED);
        return NULL;
    }
    char *p = (char *)(((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1));
    if (p > m) munmap(m, (size_t)(p - m));
    if (m + span > p + len) munmap(p + len, (size_t)(m + span - (p + len)));
#ifdef MADV_DONTFORK
    /* a forked child never sees these pages: the fork does not copy their page tables, and the
     * parent's next write to them is not a copy-on-write fault (the analysis writes its sketches
     * and sample after every isolated call) */
    (void)madvise(p, len, MADV_DONTFORK);
#endif
    /* no MADV_HUGEPAGE: where the kernel defragments for advised regions (defrag=madvise, the
     * usual default) a fault on one waits for compaction, which stalled a small campaign's
     * signatures 50-200 ms in runs of 0.4 s once the page cache was full (docs/signature.md) */
    return p;
#endif
}

void peat_analyzer_big_free(void *p, size_t bytes)
{
    if (!p) return;
#ifdef BIG_HEAP
    (void)bytes;
    free(p);
#else
    munmap(p, big_len(bytes));
    __atomic_sub_fetch(&big_total, big_len(bytes), __ATOMIC_RELAXED);
#endif
}
