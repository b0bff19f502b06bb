/* clock.c: the clocks of PEAT's own timings (core/clock.h): monotonic seconds, and the CPU
 * seconds of the calling thread or of the process. */
#include "core/clock.h"

#include <time.h>

static double seconds_of(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double peat_clock_now(void)
{
    return seconds_of(CLOCK_MONOTONIC);
}

double peat_clock_thread_cpu(void)
{
    return seconds_of(CLOCK_THREAD_CPUTIME_ID);
}

double peat_clock_process_cpu(void)
{
    return seconds_of(CLOCK_PROCESS_CPUTIME_ID);
}
