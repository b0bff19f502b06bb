/* clock.h: the monotonic clock every timing of PEAT's own work reads (internal, not the host
 * API). */
#ifndef PEAT_CORE_CLOCK_H
#define PEAT_CORE_CLOCK_H

/* Monotonic seconds (CLOCK_MONOTONIC: never steps with the wall clock). */
double peat_clock_now(void);

#endif
