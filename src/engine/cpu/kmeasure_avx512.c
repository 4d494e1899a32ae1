/* engine/cpu/kmeasure_avx512.c: with AVX-512, kmeasure's read-bandwidth loop,
 * and the dot-product peak (vdpbf16ps for bf16, vpdpbusd for int8), the
 * ceiling of the avx512 variant's GEMMs: 8 independent accumulators,
 * operands in registers. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

/* the read-bandwidth loop of kmeasure with 512-bit loads (64-byte aligned p, bytes a multiple of 256) */
uint64_t tm_kavx512_read_sum(const void *p, size_t bytes);

uint64_t tm_kavx512_read_sum(const void *p, size_t bytes)
{
    const __m512i *v = p;
    size_t n = bytes / 256;
    __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < n; i++, v += 4) {
        s0 = _mm512_add_epi64(s0, _mm512_load_si512(v + 0));
        s1 = _mm512_add_epi64(s1, _mm512_load_si512(v + 1));
        s2 = _mm512_add_epi64(s2, _mm512_load_si512(v + 2));
        s3 = _mm512_add_epi64(s3, _mm512_load_si512(v + 3));
    }
    __m512i s = _mm512_xor_si512(_mm512_xor_si512(s0, s1), _mm512_xor_si512(s2, s3));
    return (uint64_t)_mm512_reduce_add_epi64(s);
}

/* iters x 8 instructions on this thread; returns the ops done (2 per multiply-add) */
double tm_kavx512_peak_run(int int8, long iters);

/* 8 independent accumulators of type T through OP(acc, x, y) iters times; the
 * empty asm "changes" x so the loop is kept, ADD folds them, RED reduces. They
 * start from 8 different values (INIT(k)): from one value the compiler merged
 * the 8 chains into one (identical operations) and the loop ran one
 * instruction per iteration at its latency while 8 were counted, which
 * overstated the peak 2x on Zen 4 (sessions 1-7). */
#define PEAK_LOOP(T, OP, ADD, RED, x, y, INIT, sink)                                         \
    do {                                                                                     \
        T s0 = INIT(0), s1 = INIT(1), s2 = INIT(2), s3 = INIT(3), s4 = INIT(4), s5 = INIT(5); \
        T s6 = INIT(6), s7 = INIT(7);                                                         \
        for (long i = 0; i < iters; i++) {                                                   \
            s0 = OP(s0, x, y); s1 = OP(s1, x, y); s2 = OP(s2, x, y); s3 = OP(s3, x, y);     \
            s4 = OP(s4, x, y); s5 = OP(s5, x, y); s6 = OP(s6, x, y); s7 = OP(s7, x, y);     \
            __asm__ volatile("" : "+v"(x));                                                  \
        }                                                                                    \
        sink = (float)RED(ADD(ADD(ADD(s0, s1), ADD(s2, s3)), ADD(ADD(s4, s5), ADD(s6, s7)))); \
    } while (0)

#define INIT_I32(k) _mm512_set1_epi32(k)
#define INIT_F32(k) _mm512_set1_ps((float)(k))

double tm_kavx512_peak_run(int int8, long iters)
{
    volatile float sink;
    if (int8) {
        __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(5);
        PEAK_LOOP(__m512i, _mm512_dpbusd_epi32, _mm512_add_epi32, _mm512_reduce_add_epi32, x, y, INIT_I32, sink);
        return (double)iters * 8 * 64 * 2; /* 64 u8 x s8 products per instruction */
    }
    __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = x;
    PEAK_LOOP(__m512, _mm512_dpbf16_ps, _mm512_add_ps, _mm512_reduce_add_ps, x, y, INIT_F32, sink);
    (void)sink;
    return (double)iters * 8 * 32 * 2; /* 32 bf16 pairs per instruction */
}
