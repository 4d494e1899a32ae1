/* tools/amx_tileloop.c: what the AMX GEMM's inner loop can reach, by where its
 * operands live. The loop is gemm_amx.c's: a 2 x 2 block of C tiles, per K step
 * two A tiles and two B tiles loaded (4 KB) and four TDPBUSD. The operands are
 * cycled through regions of 16 KB (L1), 256 KB and 1 MB (L2) and 16 MB (L3 and
 * beyond) each; every figure is cycles per TDPBUSD over the register-only peak
 * measured just before and after it on the same thread, because on a shared
 * host the peak itself drifts. Two load orders, with and without software
 * prefetch two steps ahead into L1.
 *
 * Build and run (Sapphire Rapids or later; Linux grants AMX on request), after `make`:
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -march=sapphirerapids -Isrc -Iinclude tools/amx_tileloop.c \
 *       build/libtandem.a -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread -o amx_tileloop
 *   taskset -c 3 ./amx_tileloop        # operands cycled through L1, L2, L3
 *   taskset -c 3 ./amx_tileloop gemm   # gemm_amx.c's block structure, piece by piece
 *   taskset -c 3 ./amx_tileloop stream # one operand in L1 (28 KB), the other streamed, both orders
 * Session 5 on the h200-host Xeon (docs/kernels.md, "Known limits"): L1 up to
 * 80-90% of the peak, 256 KB in L2 50-68%, 1 MB 30-33%, 16 MB 15-28%. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

#include "engine/cpu/kernels-impl.h"

/* TSC cycles per TDPBUSD with the operands in tiles */
static double peak(long iters)
{
    static _Alignas(64) uint8_t a[1024];
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    _tile_loadd(4, a, 64); _tile_loadd(5, a, 64); _tile_loadd(6, a, 64); _tile_loadd(7, a, 64);
    uint64_t t0 = __rdtsc();
    for (long i = 0; i < iters; i++) {
        _tile_dpbusd(0, 4, 6); _tile_dpbusd(1, 4, 7); _tile_dpbusd(2, 5, 6); _tile_dpbusd(3, 5, 7);
    }
    return (double)(__rdtsc() - t0) / (iters * 4.0);
}

/* the same with six accumulators (C0-C5 against one A and one B tile): if the
 * four-accumulator loop above were bound by the product's latency rather than
 * its throughput, this one would run faster per product */
static double peak6(long iters)
{
    static _Alignas(64) uint8_t a[1024];
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3); _tile_zero(4); _tile_zero(5);
    _tile_loadd(6, a, 64); _tile_loadd(7, a, 64);
    uint64_t t0 = __rdtsc();
    for (long i = 0; i < iters; i++) {
        _tile_dpbusd(0, 6, 7); _tile_dpbusd(1, 6, 7); _tile_dpbusd(2, 6, 7);
        _tile_dpbusd(3, 6, 7); _tile_dpbusd(4, 6, 7); _tile_dpbusd(5, 6, 7);
    }
    return (double)(__rdtsc() - t0) / (iters * 6.0);
}
/* A: [a_steps][2 tiles][1 KB], B: [steps][2 tiles][1 KB], each cycled over
 * its own steps; order 0 is gemm_amx.c's (B0 B1 A0, two products, A1, two
 * products), order 1 loads both A first; pfd > 0 prefetches each operand's
 * step pfd ahead into L1 */
static double loop2(const uint8_t *A, size_t a_steps, const uint8_t *B, size_t steps, long iters, int order, int pfd)
{
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    uint64_t t0 = __rdtsc();
    size_t s = 0, sa = 0;
    for (long i = 0; i < iters; i++) {
        const uint8_t *a0 = A + sa * 2048, *a1 = a0 + 1024, *b = B + s * 2048;
        if (pfd) {
            size_t t = (s + (size_t)pfd) % steps, ta = (sa + (size_t)pfd) % a_steps;
            for (int l = 0; l < 2048; l += 64) {
                _mm_prefetch((const char *)A + ta * 2048 + l, _MM_HINT_T0);
                _mm_prefetch((const char *)B + t * 2048 + l, _MM_HINT_T0);
            }
        }
        if (order == 0) {
            _tile_loadd(6, b, 64); _tile_loadd(7, b + 1024, 64); _tile_loadd(4, a0, 64);
            _tile_dpbusd(0, 4, 6); _tile_dpbusd(1, 4, 7);
            _tile_loadd(5, a1, 64);
            _tile_dpbusd(2, 5, 6); _tile_dpbusd(3, 5, 7);
        } else {
            _tile_loadd(4, a0, 64); _tile_loadd(5, a1, 64); _tile_loadd(6, b, 64);
            _tile_dpbusd(0, 4, 6); _tile_dpbusd(2, 5, 6);
            _tile_loadd(7, b + 1024, 64);
            _tile_dpbusd(1, 4, 7); _tile_dpbusd(3, 5, 7);
        }
        if (++s == steps) s = 0;
        if (++sa == a_steps) sa = 0;
    }
    static _Alignas(64) int32_t c[256];
    _tile_stored(0, c, 64); _tile_stored(1, c, 64); _tile_stored(2, c, 64); _tile_stored(3, c, 64);
    return (double)(__rdtsc() - t0) / (iters * 4.0);
}

static double loop(const uint8_t *A, const uint8_t *B, size_t steps, long iters, int order, int pfd)
{
    return loop2(A, steps, B, steps, iters, order, pfd);
}

/* the GEMM's own structure (gemm_amx.c's blocked loop): blocks of kc K steps,
 * B one chunk of kc steps read as the panel layout (two tiles side by side,
 * stride 128) and reused by every block (L1), A streamed over a_kib, and, if
 * creload, the four C tiles loaded from and stored back to a 128 KB
 * accumulator (rows of 128 bytes) around each block, bstride bytes apart
 * (4096: the stores of one block and the loads of the next alias in the low
 * 12 address bits; 4160: they do not) */
static double gemmlike(const uint8_t *A, size_t a_kib, const uint8_t *B, int kc, uint8_t *acc, int creload, long blocks,
                       size_t bstride)
{
    size_t a_steps = a_kib * 1024 / 2048, sa = 0, cb = 0;
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    uint64_t t0 = __rdtsc();
    for (long i = 0; i < blocks; i++) {
        uint8_t *c = acc + cb * bstride;
        if (creload) {
            _tile_loadd(0, c, 128); _tile_loadd(1, c + 64, 128);
            _tile_loadd(2, c + 2048, 128); _tile_loadd(3, c + 2048 + 64, 128);
        }
        for (int s = 0; s < kc; s++) {
            const uint8_t *b = B + (size_t)s * 2048, *a0 = A + sa * 2048;
            _tile_loadd(6, b, 128); _tile_loadd(7, b + 64, 128); _tile_loadd(4, a0, 64);
            _tile_dpbusd(0, 4, 6); _tile_dpbusd(1, 4, 7);
            _tile_loadd(5, a0 + 1024, 64);
            _tile_dpbusd(2, 5, 6); _tile_dpbusd(3, 5, 7);
            if (++sa == a_steps) sa = 0;
        }
        if (creload) {
            _tile_stored(0, c, 128); _tile_stored(1, c + 64, 128);
            _tile_stored(2, c + 2048, 128); _tile_stored(3, c + 2048 + 64, 128);
        }
        if (++cb == 32) cb = 0;
    }
    return (double)(__rdtsc() - t0) / (blocks * kc * 4.0);
}

int main(int argc, char **argv)
{
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */)) {
        fprintf(stderr, "amx_tileloop: Linux did not grant AMX (or this CPU has none)\n");
        return 1;
    }
    tm_kamx_config(); /* gemm_amx.c's: every tile 16 rows x 64 bytes */
    size_t max = (size_t)16 << 20;
    uint8_t *A = aligned_alloc(4096, max), *B = aligned_alloc(4096, max);
    if (!A || !B) return 1;
    for (size_t i = 0; i < max; i++) {
        A[i] = (uint8_t)(i * 7);
        B[i] = (uint8_t)(i * 13);
    }
    if (argc > 1 && !strcmp(argv[1], "gemm")) { /* ./amx_tileloop gemm: the GEMM's structure, piece by piece */
        static _Alignas(64) uint8_t acc[32 * 4160];
        static const size_t akib[] = {16, 128, 512, 2048};
        for (int rep = 0; rep < 3; rep++)
            for (int kc = 8; kc <= 16; kc += 8)
                for (int k = 0; k < 4; k++)
                    for (int cr = 0; cr < 3; cr++) {
                        double p0 = peak(200000), p1,
                               c = gemmlike(A, akib[k], B, kc, acc, cr > 0, 4000000 / kc, cr == 2 ? 4160 : 4096);
                        p1 = peak(200000);
                        static const char *const what[] = {"kept in tiles", "reloaded, 4 KB apart", "reloaded, 4160 B apart"};
                        printf("rep %d: B chunk %2d KB (L1), A over %4zu KB, C %-22s: %.2f cycles per product = %.0f%% of the peak\n",
                               rep, 2 * kc, akib[k], what[cr], c, 100 * (p0 + p1) / 2 / c);
                    }
        _tile_release();
        free(A);
        free(B);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "stream")) { /* ./amx_tileloop stream: one operand in L1, the other streamed */
        static const size_t skib[] = {256, 1024};
        for (int rep = 0; rep < 3; rep++)
            for (int k = 0; k < 2; k++)
                for (int which = 0; which < 2; which++) /* 0: B streamed (gemm_amx.c), 1: A streamed */
                    for (int o = 0; o < 2; o++) {
                        size_t ls = 28 * 1024 / 2048, ss = skib[k] * 1024 / 2048; /* 28 KB: A's chunk at K = 896 int8 */
                        double p0 = peak(200000),
                               c = which ? loop2(A, ss, B, ls, 2000000, o, 0) : loop2(A, ls, B, ss, 2000000, o, 0),
                               p1 = peak(200000);
                        printf("rep %d: %s over %4zu KB, %s 28 KB, order %d: %.2f cycles per product = %.0f%% of the peak\n",
                               rep, which ? "A" : "B", skib[k], which ? "B" : "A", o, c, 100 * (p0 + p1) / 2 / c);
                    }
        _tile_release();
        free(A);
        free(B);
        return 0;
    }
    static const size_t kib[] = {16, 256, 1024, 16384}; /* per operand */
    for (int rep = 0; rep < 3; rep++) {
        printf("rep %d: peak %.2f TSC cycles per TDPBUSD (six accumulators: %.2f)\n", rep, peak(2000000), peak6(2000000));
        for (int k = 0; k < 4; k++)
            for (int o = 0; o < 2; o++)
                for (int pf = 0; pf <= 2; pf += 2) {
                    double p0 = peak(200000), c = loop(A, B, kib[k] * 1024 / 2048, 2000000, o, pf), p1 = peak(200000);
                    printf("  operands %5zu KB each, order %d, prefetch %d: %.2f cycles per product = %.0f%% of the peak\n",
                           kib[k], o, pf, c, 100 * (p0 + p1) / 2 / c);
                }
    }
    _tile_release();
    free(A);
    free(B);
    return 0;
}
