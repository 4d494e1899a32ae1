/* core/cpu.h: run-time CPU feature detection (CPUID + XGETBV) and the Linux
 * AMX permission request.
 *
 *   const tm_cpu *c = tm_cpu_get();      // detected once, then cached
 *   if (c->amx_usable) ...               // AMX present, OS-enabled and permitted
 *   char buf[256];
 *   tm_cpu_features_str(c, buf, sizeof buf);  // "avx2 fma f16c avx512f ..."
 *
 * A feature flag is set only if the CPU reports it AND the OS saves its
 * register state (XCR0), so a set flag means "safe to execute". AMX also
 * needs the per-process permission arch_prctl(ARCH_REQ_XCOMP_PERM,
 * XFEATURE_XTILEDATA); tm_cpu_get() asks for it once. If the CPU has AMX but
 * the request fails, amx_usable is 0 and amx_note says "AMX present but not
 * permitted: ...".
 *
 * The cached record is immutable after the first call (a fact about the
 * hardware, not configuration); tm_cpu_get() is thread-safe. */
#ifndef TM_CORE_CPU_H
#define TM_CORE_CPU_H

#include <stddef.h>

typedef struct tm_cpu {
    char vendor[13];   /* "GenuineIntel", "AuthenticAMD" */
    char brand[49];    /* "AMD EPYC 9654 96-Core Processor" (trimmed) */
    int n_cpus;        /* online logical CPUs (sysconf) */
    /* Each flag: CPU reports it and XCR0 enables its state. */
    unsigned char avx2, fma, f16c;
    unsigned char avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16;
    unsigned char gfni;  /* GF2P8 affine/multiply; its 512-bit forms also need avx512f */
    unsigned char amx_tile, amx_bf16, amx_int8; /* CPU + XCR0 (XTILECFG|XTILEDATA) */
    unsigned char amx_usable;                   /* all three AMX flags + arch_prctl permission */
    char amx_note[160]; /* one line: "AMX usable", "no AMX on this CPU", "AMX present but not permitted: ..." */
} tm_cpu;

/* tm_cpu_get: detect once (thread-safe), request AMX permission once, and
 * return the cached record. Never NULL. */
const tm_cpu *tm_cpu_get(void);

/* tm_cpu_detect: detect into *out without caching and without asking for
 * AMX permission (amx_usable reflects only whether permission is already
 * granted). Used by tests and by tm_cpu_get. */
void tm_cpu_detect(tm_cpu *out);

/* tm_cpu_allowed: the CPUs the calling thread may run on (its affinity mask:
 * taskset, a container's cpuset), in increasing order, at most max of them
 * into cpus (NULL: only count them). Returns how many: at least 1 when max >= 1. Where the mask
 * cannot be read, CPUs 0 .. n_cpus - 1. Sessions (their core plan), `tandem
 * devices` and the bench's ceilings take their pools' CPUs from this list,
 * so they stay within what the process was given. */
int tm_cpu_allowed(int *cpus, int max);

/* tm_cpu_pick: the CPUs a pool of n threads (1 <= n <= 1024) takes, into
 * cpus[n]: the first n of tm_cpu_allowed's list, except that CPU 0 is left
 * out where the list has n others. Linux sends device interrupts and much
 * of its housekeeping to CPU 0 by default, and a thread pinned there loses
 * time to them: on the h200-host Xeon (session 15, run 66) an AMX peak
 * pinned to CPU 0 ran at about half its rate beside a second one on any
 * other CPU, and the GEMM on CPUs 1, 2 at 1.3x its rate on 0, 1. Returns how
 * many it gave (fewer than n only when fewer are allowed). Sessions, `tandem
 * devices`, the bench's ceilings and its peer (pinned to the same CPUs)
 * take their CPUs from it. */
int tm_cpu_pick(int *cpus, int n);

/* tm_cpu_features_str: space-separated names of the set flags into buf
 * (always NUL-terminated). Returns buf. */
char *tm_cpu_features_str(const tm_cpu *c, char *buf, size_t n);

/* Convenience predicates over a tm_cpu, as used by the kernel dispatch. */
int tm_cpu_has_avx2(const tm_cpu *c);   /* AVX2 + FMA + F16C */
int tm_cpu_has_avx512(const tm_cpu *c); /* F/BW/VL/DQ + VNNI + BF16 (tandem's AVX-512 level) */

#endif
