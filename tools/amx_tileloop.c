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
 *   taskset -c 3 ./amx_tileloop stream # one operand in L1 (28 KB), the other streamed (B also with TILELOADDT1), both orders
 *   taskset -c 3 ./amx_tileloop ystore [N [all]] # a K = 896 block's output, by where it is stored (all: B over N's panels)
 *   taskset -c 3 ./amx_tileloop data   # the tile loads' cost, non-zero operands against zero ones
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
 * step pfd ahead into L1; bt1: B's tiles loaded with TILELOADDT1, as
 * gemm_amx.c loads them (AMX_BT1) */
#define BLD(t, p)                                  \
    do {                                           \
        if (bt1) _tile_stream_loadd(t, p, 64);     \
        else _tile_loadd(t, p, 64);                \
    } while (0)
static double loop2(const uint8_t *A, size_t a_steps, const uint8_t *B, size_t steps, long iters, int order, int pfd,
                    int bt1)
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
            BLD(6, b); BLD(7, b + 1024); _tile_loadd(4, a0, 64);
            _tile_dpbusd(0, 4, 6); _tile_dpbusd(1, 4, 7);
            _tile_loadd(5, a1, 64);
            _tile_dpbusd(2, 5, 6); _tile_dpbusd(3, 5, 7);
        } else {
            _tile_loadd(4, a0, 64); _tile_loadd(5, a1, 64); BLD(6, b);
            _tile_dpbusd(0, 4, 6); _tile_dpbusd(2, 5, 6);
            BLD(7, b + 1024);
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
    return loop2(A, steps, B, steps, iters, order, pfd, 0);
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

/* ./amx_tileloop ystore: what a block's output costs the tile loop. gemm_amx.c's
 * K = 896 int8 blocks in its order (per group of 4 panels, per 32-row block,
 * per panel: 14 K steps, B with TILELOADDT1 from one 112 KB group chunk kept in
 * L2, A's 28 KB chunk reused by the 4 panels), C tile-stored to a 4 KB scratch,
 * then the int8 epilogue (128 colsum, scales, bf16) of its 32 x 32 results,
 * stored by `mode` (ys_what below): 0 no epilogue, 1 to a 2 KB sink in L1, 2 to
 * y as the GEMM does (bf16 rows N * 2 bytes apart, a group's 4 panels side by
 * side), 3 = 2 with the block's y lines fetched for writing over its steps
 * (AMX_YPF), 4 = over its last 3 steps only, 5 = the next block's lines fetched
 * over this block's steps, 6 = 2 stored non-temporally, 7 = 2 in f32, 8 = the
 * vector work with no stores, 9 = 2 with each line demoted (CLDEMOTE) once
 * stored. Overlap: 10 = 2 with each block's epilogue run after the next
 * block's first K step is issued (two scratch slots), 11 = 2 with it spread
 * over the next block's 14 steps (2-3 rows after each), 12 = 11 into the L1
 * sink, 13 = 10 into the L1 sink; 14 = 2 without the colsum subtractions
 * (what s8 activations, TDPBSSD, would leave), 15 = 11 and 14. The block's
 * end, no epilogue: 16 = C kept in the tiles across blocks (no zeroing, no
 * stores: what 0's stores and zeroing cost), 17 = 0 with the next block's
 * first A tile loaded before the C stores, 18 = 0 with its first A and both
 * B tiles loaded before them. y's stores (session 35): 19 = 11 with the rows
 * stored to an L1 staging block and copied to y by two tile loads and stores
 * at the next block's end (tile 5, free there), 20 and 21 = 11 with each
 * step's rows fetched for writing one or two steps ahead, 22 = 11 with y's
 * lines read instead of written (the rows to the L1 sink), 23 = 11 with two
 * 32-byte stores a line, 24 = 11 with each line read, then written, 25 = 11
 * stored non-temporally, 26 = 11 with y blocked (a block's 32 rows side by
 * side in 2 KB, the blocks in order). ball: B cycled over all of N's panels
 * (N / 32 x 28 KB, as the GEMM's), not one group's.
 * Cycles per product. */
static const char *const ys_what[] = {"no epilogue", "L1 sink", "y (bf16)", "y, fetched for writing over the block",
                                      "y, fetched over the last 3 steps", "y, the next block's fetched", "y non-temporal",
                                      "y (f32)", "epilogue, no stores", "y, each line demoted once stored",
                                      "y, after the next block's 1st step", "y, spread over the next block",
                                      "sink, spread over the next block", "sink, after the next block's 1st step",
                                      "y, no colsum (s8 x s8)", "y, no colsum, spread over the next block",
                                      "C kept in the tiles", "next A tile loaded before the C stores",
                                      "next A, B tiles loaded before the C stores",
                                      "y by tile copy, spread over the next block", "y spread, its rows fetched a step ahead",
                                      "y spread, its rows fetched 2 steps ahead", "y lines read (not written), spread",
                                      "y lines written, 2 stores of 32 B, spread", "y lines read then written, spread",
                                      "y non-temporal, spread", "y blocked (a block's 32 rows in 2 KB), spread"};
#define YS_MODES 27

typedef struct ys_ctx {
    __m512i c0, c1;
    __m512 s0, s1, acc;
    const float *xs;
    int mode;
    size_t ld;
} ys_ctx;

/* rows [i0, i1) of one block's C (cs, int32 [32][32]) dequantized and stored
 * to yb (rows ld bytes apart) as the mode says; xs the block's row scales */
static _Alignas(64) uint16_t stg[32][32]; /* mode 19: a block's bf16 y rows, tile-copied to y */
static inline void ys_epi(ys_ctx *e, const int32_t (*cs)[32], int i0, int i1, char *yb, const float *xs)
{
    static _Alignas(64) uint16_t sink[32][32];
    const int sub = e->mode < 14;
    for (int i = i0; i < i1; i++) {
        __m512 x = _mm512_set1_ps(xs[i]);
        __m512i a0 = _mm512_load_si512(cs[i]), a1 = _mm512_load_si512(cs[i] + 16);
        if (sub) {
            a0 = _mm512_sub_epi32(a0, e->c0);
            a1 = _mm512_sub_epi32(a1, e->c1);
        }
        __m512 v0 = _mm512_mul_ps(_mm512_cvtepi32_ps(a0), _mm512_mul_ps(e->s0, x));
        __m512 v1 = _mm512_mul_ps(_mm512_cvtepi32_ps(a1), _mm512_mul_ps(e->s1, x));
        char *yr = yb + (size_t)i * e->ld;
        if (e->mode == 8) {
            e->acc = _mm512_add_ps(e->acc, _mm512_add_ps(v0, v1));
        } else if (e->mode == 7) {
            _mm512_storeu_ps(yr, v0);
            _mm512_storeu_ps(yr + 64, v1);
        } else {
            __m512i h = (__m512i)_mm512_cvtne2ps_pbh(v1, v0);
            if (e->mode == 22) { /* y's line read, the row stored to the sink */
                e->acc = _mm512_add_ps(e->acc, _mm512_loadu_ps(yr));
                _mm512_store_si512(sink[i], h);
            } else if (e->mode == 23) { /* two 32-byte halves */
                _mm256_storeu_si256((__m256i *)yr, _mm512_castsi512_si256(h));
                _mm256_storeu_si256((__m256i *)(yr + 32), _mm512_extracti64x4_epi64(h, 1));
            } else if (e->mode == 24) { /* read, then written */
                e->acc = _mm512_add_ps(e->acc, _mm512_loadu_ps(yr));
                _mm512_storeu_si512(yr, h);
            } else if (e->mode == 1 || e->mode == 12 || e->mode == 13) {
                _mm512_store_si512(sink[i], h);
            } else if (e->mode == 19) {
                _mm512_store_si512(stg[i], h);
            } else if (e->mode == 6 || e->mode == 25) {
                _mm512_stream_si512((__m512i *)yr, h);
            } else {
                _mm512_storeu_si512(yr, h);
            }
            if (e->mode == 9) _cldemote(yr);
        }
    }
}

static double ystore(const uint8_t *A, const uint8_t *B, void *y, int N, int rows, int mode, long blocks, int ball)
{
    static _Alignas(64) int32_t cs[2][32][32];
    static _Alignas(64) int32_t colsum[32];
    static _Alignas(64) float scale[32], xs[512];
    for (int i = 0; i < 32; i++) colsum[i] = i, scale[i] = 1e-3f * (float)(i + 1);
    for (int i = 0; i < 512; i++) xs[i] = 1.f / (float)(i + 1);
    const int nrb = rows / 32, ngrp = N / 128, esz = mode == 7 ? 4 : 2;
    const int lag = (mode >= 10 && mode <= 13) || mode == 15 || mode >= 19; /* the epilogue runs in the next block */
    ys_ctx e = {_mm512_slli_epi32(_mm512_load_si512(colsum), 7), _mm512_slli_epi32(_mm512_load_si512(colsum + 16), 7),
                _mm512_load_ps(scale), _mm512_load_ps(scale + 16), _mm512_setzero_ps(), xs, mode, (size_t)N * esz};
    if (mode == 26) e.ld = 64; /* the block's rows side by side */
    char *prev_y = NULL;        /* lag: the previous block's y and row scales, its C in cs[(b - 1) & 1] */
    const float *prev_xs = xs;
    long b = 0;
    int pre = 0; /* modes 17, 18: this block's first A (1) and B (2) tiles already loaded */
    uint64_t t0 = __rdtsc();
    for (;;)
        for (int gi = 0; gi < ngrp; gi++)
            for (int rb = 0; rb < nrb; rb++)
                for (int j = 0; j < 4; j++, b++) {
                    if (b == blocks) goto done;
                    const uint8_t *a = A + (size_t)rb * 14 * 2048, *bp = B + (size_t)(ball ? 4 * gi + j : j) * 14 * 2048;
                    char *yb = mode == 26 ? (char *)y + ((size_t)(gi * nrb + rb) * 4 + j) * 2048
                                          : (char *)y + (size_t)rb * 32 * e.ld + (size_t)(4 * gi + j) * 32 * esz;
                    int nj = (j + 1) & 3, nrbk = j == 3 ? (rb + 1) % nrb : rb; /* the next block (mode 5) */
                    const char *yn = (char *)y + (size_t)nrbk * 32 * e.ld + (size_t)(4 * gi + nj) * 32 * esz;
                    const int32_t(*pc)[32] = cs[(b - 1) & 1];
                    if (mode != 16) {
                        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
                    }
                    for (int s = 0; s < 14; s++) {
                        if (mode == 3 || mode == 5) /* 32 lines over 14 steps: 2-3 a step */
                            for (int l = s * 32 / 14; l < (s + 1) * 32 / 14; l++)
                                __builtin_prefetch((mode == 3 ? yb : yn) + (size_t)l * e.ld, 1, 3);
                        if (mode == 4 && s >= 11)
                            for (int l = (s - 11) * 32 / 3; l < (s - 10) * 32 / 3; l++) __builtin_prefetch(yb + (size_t)l * e.ld, 1, 3);
                        if (mode >= 20) {
                            int d = mode - 19;
                            if (prev_y && s + d < 14)
                                for (int l = (s + d) * 32 / 14; l < (s + d + 1) * 32 / 14; l++) __builtin_prefetch(prev_y + (size_t)l * e.ld, 1, 3);
                            if (s + d >= 14)
                                for (int l = (s + d - 14) * 32 / 14; l < (s + d - 13) * 32 / 14; l++) __builtin_prefetch(yb + (size_t)l * e.ld, 1, 3);
                        }
                        if (s || pre < 2) {
                            _tile_stream_loadd(6, bp + (size_t)s * 2048, 128);
                            _tile_stream_loadd(7, bp + (size_t)s * 2048 + 64, 128);
                        }
                        if (s || !pre) _tile_loadd(4, a + (size_t)s * 2048, 64);
                        _tile_dpbusd(0, 4, 6); _tile_dpbusd(1, 4, 7);
                        _tile_loadd(5, a + (size_t)s * 2048 + 1024, 64);
                        _tile_dpbusd(2, 5, 6); _tile_dpbusd(3, 5, 7);
                        if (prev_y && (mode == 10 || mode == 13) && s == 0) ys_epi(&e, pc, 0, 32, prev_y, prev_xs);
                        if (prev_y && (mode == 11 || mode == 12 || mode == 15 || mode >= 19)) ys_epi(&e, pc, s * 32 / 14, (s + 1) * 32 / 14, prev_y, prev_xs);
                    }
                    if (mode == 16) continue;
                    if (mode == 17 || mode == 18) { /* the next block's first tiles, before the stores */
                        _tile_loadd(4, A + (size_t)nrbk * 14 * 2048, 64);
                        if (mode == 18) {
                            _tile_stream_loadd(6, B + (size_t)nj * 14 * 2048, 128);
                            _tile_stream_loadd(7, B + (size_t)nj * 14 * 2048 + 64, 128);
                        }
                        pre = mode == 18 ? 2 : 1;
                    }
                    int32_t(*c)[32] = cs[b & 1];
                    _tile_stored(0, &c[0][0], 128); _tile_stored(1, &c[0][16], 128);
                    _tile_stored(2, &c[16][0], 128); _tile_stored(3, &c[16][16], 128);
                    if (mode == 19 && prev_y) {
                        _tile_loadd(5, &stg[0][0], 64);
                        _tile_stored(5, prev_y, e.ld);
                        _tile_loadd(5, &stg[16][0], 64);
                        _tile_stored(5, prev_y + 16 * e.ld, e.ld);
                    }
                    if (mode == 0 || (mode >= 16 && mode <= 18)) continue;
                    if (lag) {
                        prev_y = yb;
                        prev_xs = xs + rb * 32;
                    } else {
                        ys_epi(&e, (const int32_t(*)[32])c, 0, 32, yb, xs + rb * 32);
                    }
                }
done:;
    double c = (double)(__rdtsc() - t0) / ((double)blocks * 56.0);
    if (mode == 6 || mode == 25) _mm_sfence();
    volatile float keep = _mm512_reduce_add_ps(e.acc);
    (void)keep;
    return c;
}

/* ./amx_tileloop data: the tile products with k of a 2 x 2 block's four operand
 * tiles (B0, B1, A0, A1 in gemm_amx.c's order) loaded again from L1 before every
 * four products, by the operands' data: all of A zero, or both non-zero. Cycles
 * per product; the register-only peak is k = 0. Session 33 on the dev Xeon:
 * non-zero operands with all four loads ran ~17-18 cycles against ~13.7
 * (k = 0, or A zero at any k): the tile loads cost with real data, wherever
 * the operands come from (kmeasure_amx.c's "amx-loaded" ceiling). */
static double loads_loop(const uint8_t *a, const uint8_t *b, int k, long iters)
{
    _tile_loadd(4, a, 64); _tile_loadd(5, a + 1024, 64); _tile_loadd(6, b, 128); _tile_loadd(7, b + 64, 128);
    uint64_t t0 = __rdtsc();
    for (long i = 0; i < iters; i++) {
        if (k >= 1) _tile_loadd(6, b, 128);
        if (k >= 2) _tile_loadd(7, b + 64, 128);
        if (k >= 3) _tile_loadd(4, a, 64);
        _tile_dpbusd(0, 4, 6); _tile_dpbusd(1, 4, 7);
        if (k >= 4) _tile_loadd(5, a + 1024, 64);
        _tile_dpbusd(2, 5, 6); _tile_dpbusd(3, 5, 7);
    }
    return (double)(__rdtsc() - t0) / (iters * 4.0);
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
    if (argc > 1 && !strcmp(argv[1], "ystore")) { /* ./amx_tileloop ystore [N [all]]: a block's output, by where it goes */
        int N = argc > 2 ? atoi(argv[2]) : 1152, ball = argc > 3 && !strcmp(argv[3], "all");
        if (N < 128 || N > 16384 || N % 128) return 1;
        void *y = aligned_alloc(2 << 20, (size_t)512 * N * 4);
        if (!y) return 1;
        memset(y, 0, (size_t)512 * N * 4);
        for (int rep = 0; rep < 3; rep++)
            for (int mode = 0; mode < YS_MODES; mode++) {
                double p0 = peak(200000), c = ystore(A, B, y, N, 512, mode, 200000, ball), p1 = peak(200000);
                printf("rep %d: N %d%s, %-38s: %.2f cycles per product = %.0f%% of the peak\n", rep, N,
                       ball ? " (B over all panels)" : "", ys_what[mode], c, 100 * (p0 + p1) / 2 / c);
            }
        _tile_release();
        free(y);
        free(A);
        free(B);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "data")) { /* ./amx_tileloop data: tile loads' cost by the operands' data */
        static _Alignas(64) uint8_t ta[2048], tb[2048];
        for (int rep = 0; rep < 3; rep++)
            for (int z = 0; z < 2; z++) {
                for (int i = 0; i < 2048; i++) {
                    ta[i] = z ? 0 : (uint8_t)(i * 7 + 1);
                    tb[i] = (uint8_t)(i * 13 + 5);
                }
                for (int k = 0; k <= 4; k++)
                    printf("rep %d: %s, %d of the 4 tiles loaded per 4 products: %.2f cycles per product\n", rep,
                           z ? "A zero" : "A, B non-zero", k, loads_loop(ta, tb, k, 2000000));
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
                for (int which = 0; which < 3; which++) /* 0: B streamed, 1: A streamed, 2: B with TILELOADDT1 (gemm_amx.c) */
                    for (int o = 0; o < 2; o++) {
                        size_t ls = 28 * 1024 / 2048, ss = skib[k] * 1024 / 2048; /* 28 KB: A's chunk at K = 896 int8 */
                        int sa = which == 1;
                        double p0 = peak(200000),
                               c = sa ? loop2(A, ss, B, ls, 2000000, o, 0, 0) : loop2(A, ls, B, ss, 2000000, o, 0, which == 2),
                               p1 = peak(200000);
                        printf("rep %d: %s over %4zu KB%s, %s 28 KB, order %d: %.2f cycles per product = %.0f%% of the peak\n",
                               rep, sa ? "A" : "B", skib[k], which == 2 ? " (T1)" : "", sa ? "B" : "A", o, c,
                               100 * (p0 + p1) / 2 / c);
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
