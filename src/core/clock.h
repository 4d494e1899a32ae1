/* core/clock.h: the monotonic clock every layer times with (the router's calibration, the scheduler's
 * deadlines, the bridge's hand-off, the profiles, the benchmarks). Header-only, so tools built apart (tools/
 * llstall.c, against the peer with -I src) measure with the same clock. */
#ifndef TM_CORE_CLOCK_H
#define TM_CORE_CLOCK_H

#include <time.h>

/* seconds on CLOCK_MONOTONIC (an arbitrary origin: differences only) */
static inline double tm_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#endif
