/* clock.h: the clocks every timing of PEAT's own work reads, the one place that asks the system
 * for the time (internal, not the host API). */
#ifndef PEAT_CORE_CLOCK_H
#define PEAT_CORE_CLOCK_H

/* Monotonic seconds (CLOCK_MONOTONIC: never steps with the wall clock). */
double peat_clock_now(void);
/* CPU seconds of the calling thread (CLOCK_THREAD_CPUTIME_ID): its own work, whatever else the
 * machine runs. */
double peat_clock_thread_cpu(void);
/* CPU seconds of the whole process, every thread (CLOCK_PROCESS_CPUTIME_ID). */
double peat_clock_process_cpu(void);

#endif
