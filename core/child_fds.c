/* child_fds.c: the descriptors a forked child closes first: the output directory's lock, the
 * campaign file's writer lock and HDF5's own descriptor of it. A child (the isolated worker, a
 * call's child, a plugin probe) is killed when peat is (PR_SET_PDEATHSIG), but asynchronously: a
 * --resume started the moment a killed peat was reaped found the locks still held by a child
 * that had not died yet (more often under a sanitizer, whose large mappings take longer to tear
 * down). The slots are atomics: a child forked while another thread marks or unmarks one reads
 * each slot whole, and never waits on a lock the fork may have copied held. */
#include "core/child_fds.h"

#include <stdatomic.h>
#include <unistd.h>

static _Atomic int slots[PEAT_CHILD_FDS_MAX]; /* fd + 1; 0 = free */

void peat_child_fd_hold(int fd)
{
    if (fd < 0) return;
    for (int i = 0; i < PEAT_CHILD_FDS_MAX; i++) {
        int free_slot = 0;
        if (atomic_compare_exchange_strong(&slots[i], &free_slot, fd + 1)) return;
    }
}

void peat_child_fd_drop(int fd)
{
    if (fd < 0) return;
    for (int i = 0; i < PEAT_CHILD_FDS_MAX; i++) {
        int held = fd + 1;
        if (atomic_compare_exchange_strong(&slots[i], &held, 0)) return;
    }
}

void peat_child_fds_close(void)
{
    for (int i = 0; i < PEAT_CHILD_FDS_MAX; i++) {
        int v = atomic_load(&slots[i]);
        if (v > 0) close(v - 1);
    }
}
