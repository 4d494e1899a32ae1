/* core/cpu.c: CPUID/XGETBV feature detection and the AMX permission request. */
#include "core/cpu.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define TM_X86 1
#else
#define TM_X86 0
#endif

/* Linux ABI (arch/x86/include/uapi/asm/prctl.h). */
#define TM_ARCH_GET_XCOMP_PERM 0x1022
#define TM_ARCH_REQ_XCOMP_PERM 0x1023
#define TM_XFEATURE_XTILEDATA 18

#if TM_X86
static void cpuid(unsigned leaf, unsigned sub, unsigned r[4])
{
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
}

static unsigned long long xgetbv0(void)
{
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

/* Is XTILEDATA permitted for this process already? */
static int amx_permitted(void)
{
    unsigned long long mask = 0;
    if (syscall(SYS_arch_prctl, TM_ARCH_GET_XCOMP_PERM, &mask) != 0) return 0;
    return (mask >> TM_XFEATURE_XTILEDATA) & 1;
}
#endif

static void trim(char *s)
{
    size_t n = strlen(s), a = 0;
    while (a < n && s[a] == ' ') a++;
    memmove(s, s + a, n - a + 1);
    n = strlen(s);
    while (n > 0 && s[n - 1] == ' ') s[--n] = 0;
}

void tm_cpu_detect(tm_cpu *c)
{
    memset(c, 0, sizeof *c);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    c->n_cpus = n > 0 ? (int)n : 1;
    snprintf(c->amx_note, sizeof c->amx_note, "no AMX on this CPU");
#if TM_X86
    unsigned r[4];
    cpuid(0, 0, r);
    unsigned max_leaf = r[0];
    memcpy(c->vendor + 0, &r[1], 4);
    memcpy(c->vendor + 4, &r[3], 4);
    memcpy(c->vendor + 8, &r[2], 4);
    c->vendor[12] = 0;

    cpuid(0x80000000u, 0, r);
    if (r[0] >= 0x80000004u) {
        for (unsigned i = 0; i < 3; i++) {
            cpuid(0x80000002u + i, 0, r);
            memcpy(c->brand + 16 * i, r, 16);
        }
        c->brand[48] = 0;
        trim(c->brand);
    }
    if (max_leaf < 1) return;

    cpuid(1, 0, r);
    unsigned ecx1 = r[2];
    int osxsave = (ecx1 >> 27) & 1;
    unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
    int os_avx = (xcr0 & 0x6) == 0x6;            /* XMM | YMM state */
    int os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0; /* opmask | ZMM_Hi256 | Hi16_ZMM */
    int os_amx = (xcr0 & 0x60000ull) == 0x60000ull;  /* XTILECFG | XTILEDATA */

    int avx = os_avx && ((ecx1 >> 28) & 1);
    c->fma = (unsigned char)(avx && ((ecx1 >> 12) & 1));
    c->f16c = (unsigned char)(avx && ((ecx1 >> 29) & 1));
    if (max_leaf < 7) return;

    cpuid(7, 0, r);
    unsigned ebx7 = r[1], ecx7 = r[2], edx7 = r[3], max_sub7 = r[0];
    c->avx2 = (unsigned char)(avx && ((ebx7 >> 5) & 1));
    c->avx512f = (unsigned char)(os_avx512 && ((ebx7 >> 16) & 1));
    c->avx512dq = (unsigned char)(c->avx512f && ((ebx7 >> 17) & 1));
    c->avx512bw = (unsigned char)(c->avx512f && ((ebx7 >> 30) & 1));
    c->avx512vl = (unsigned char)(c->avx512f && ((ebx7 >> 31) & 1));
    c->avx512vnni = (unsigned char)(c->avx512f && ((ecx7 >> 11) & 1));
    c->gfni = (unsigned char)((ecx7 >> 8) & 1); /* legacy SSE form: no extra OS state */
    if (max_sub7 >= 1) {
        cpuid(7, 1, r);
        c->avx512bf16 = (unsigned char)(c->avx512f && ((r[0] >> 5) & 1));
    }
    int hw_amx = ((edx7 >> 24) & 1); /* AMX-TILE */
    c->amx_tile = (unsigned char)(os_amx && hw_amx);
    c->amx_bf16 = (unsigned char)(os_amx && ((edx7 >> 22) & 1));
    c->amx_int8 = (unsigned char)(os_amx && ((edx7 >> 25) & 1));
    if (hw_amx && !os_amx) {
        snprintf(c->amx_note, sizeof c->amx_note,
                 "AMX present but not permitted: the OS does not enable tile state in XCR0");
    } else if (c->amx_tile && c->amx_bf16 && c->amx_int8) {
        if (amx_permitted()) {
            c->amx_usable = 1;
            snprintf(c->amx_note, sizeof c->amx_note, "AMX usable");
        } else {
            snprintf(c->amx_note, sizeof c->amx_note,
                     "AMX present but not permitted: tile data not yet requested (arch_prctl)");
        }
    } else if (c->amx_tile) {
        snprintf(c->amx_note, sizeof c->amx_note, "AMX present without BF16 and INT8: not used");
    }
#endif
}

static tm_cpu g_cpu;
static pthread_once_t g_cpu_once = PTHREAD_ONCE_INIT;

static void cpu_init_once(void)
{
    tm_cpu_detect(&g_cpu);
#if TM_X86
    if (g_cpu.amx_tile && g_cpu.amx_bf16 && g_cpu.amx_int8 && !g_cpu.amx_usable) {
        long rc = syscall(SYS_arch_prctl, TM_ARCH_REQ_XCOMP_PERM, TM_XFEATURE_XTILEDATA);
        if (rc == 0 && amx_permitted()) {
            g_cpu.amx_usable = 1;
            snprintf(g_cpu.amx_note, sizeof g_cpu.amx_note, "AMX usable");
        } else {
            snprintf(g_cpu.amx_note, sizeof g_cpu.amx_note,
                     "AMX present but not permitted: arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA): %s",
                     rc == 0 ? "permission not visible afterwards" : strerror(errno));
        }
    }
#endif
}

const tm_cpu *tm_cpu_get(void)
{
    pthread_once(&g_cpu_once, cpu_init_once);
    return &g_cpu;
}

int tm_cpu_allowed(int *cpus, int max)
{
    int n = 0;
    if (max < 1) return 0;
#ifdef __linux__
    cpu_set_t s;
    CPU_ZERO(&s);
    if (sched_getaffinity(0, sizeof s, &s) == 0)
        for (int i = 0; i < CPU_SETSIZE && n < max; i++)
            if (CPU_ISSET(i, &s)) {
                if (cpus) cpus[n] = i;
                n++;
            }
#endif
    if (n == 0) {
        int all = tm_cpu_get()->n_cpus;
        for (; n < all && n < max; n++)
            if (cpus) cpus[n] = n;
    }
    return n;
}

int tm_cpu_pick(int *cpus, int n)
{
    int all[1024], m = tm_cpu_allowed(all, 1024);
    if (n < 1) n = 1;
    if (n > 1024) n = 1024;
    int skip = m > n && all[0] == 0; /* CPU 0 left out where n others are allowed */
    int k = m - skip < n ? m - skip : n;
    for (int i = 0; i < k; i++) cpus[i] = all[skip + i];
    return k;
}

int tm_cpu_has_avx2(const tm_cpu *c)
{
    return c->avx2 && c->fma && c->f16c;
}

int tm_cpu_has_avx512(const tm_cpu *c)
{
    return c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->avx512vnni &&
           c->avx512bf16 && tm_cpu_has_avx2(c);
}

char *tm_cpu_features_str(const tm_cpu *c, char *buf, size_t n)
{
    static const struct { size_t off; const char *name; } f[] = {
        {offsetof(tm_cpu, avx2), "avx2"},         {offsetof(tm_cpu, fma), "fma"},
        {offsetof(tm_cpu, f16c), "f16c"},         {offsetof(tm_cpu, avx512f), "avx512f"},
        {offsetof(tm_cpu, avx512bw), "avx512bw"}, {offsetof(tm_cpu, avx512vl), "avx512vl"},
        {offsetof(tm_cpu, avx512dq), "avx512dq"}, {offsetof(tm_cpu, avx512vnni), "avx512vnni"},
        {offsetof(tm_cpu, avx512bf16), "avx512bf16"}, {offsetof(tm_cpu, gfni), "gfni"},
        {offsetof(tm_cpu, amx_tile), "amx-tile"},
        {offsetof(tm_cpu, amx_bf16), "amx-bf16"}, {offsetof(tm_cpu, amx_int8), "amx-int8"},
    };
    if (!n) return buf;
    buf[0] = 0;
    size_t len = 0;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (!((const unsigned char *)c)[f[i].off]) continue;
        int w = snprintf(buf + len, n - len, "%s%s", len ? " " : "", f[i].name);
        if (w < 0 || (size_t)w >= n - len) break;
        len += (size_t)w;
    }
    return buf;
}
