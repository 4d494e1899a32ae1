/* cli/bench_clock.h: clocks and statistics shared by the stall scenario
 * (cmd_bench_sched.c) and its llama.cpp side (tools/llstall.c, built
 * against the peer with -I src), so both measure alike. Header-only. */
#ifndef TM_CLI_BENCH_CLOCK_H
#define TM_CLI_BENCH_CLOCK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

/* CPU seconds used by every process on the machine since boot (/proc/stat) */
static inline double bc_sys_busy_s(void)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return 0;
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
               &v[7]) != 8)
        memset(v, 0, sizeof v);
    fclose(f);
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

/* CPU seconds used by this process */
static inline double bc_own_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline int bc_cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* nearest-rank percentile p in [0, 1] of v[n] (sorts v); 0 when n <= 0 */
static inline double bc_pct(double *v, int n, double p)
{
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof(double), bc_cmp_d);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

#endif
