/* child_fds.h: descriptors a forked child must not keep open (docs/architecture.md). */
#ifndef PEAT_CORE_CHILD_FDS_H
#define PEAT_CORE_CHILD_FDS_H

/* Marks fd as one a forked child closes first thing (a lock, a campaign file): locks taken with
 * flock() or F_OFD_SETLK belong to the open file description, which fork() shares, so a child
 * that outlived a killed peat by a moment would still hold them and refuse the --resume that
 * follows. At most PEAT_CHILD_FDS_MAX at once; more are not marked (and stay open in children). */
#define PEAT_CHILD_FDS_MAX 32
void peat_child_fd_hold(int fd);
/* Unmarks fd (before it is closed). */
void peat_child_fd_drop(int fd);
/* In a forked child: closes every marked descriptor (async-signal-safe: close() only). */
void peat_child_fds_close(void);

#endif
