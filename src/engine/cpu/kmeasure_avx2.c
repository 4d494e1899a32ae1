/* engine/cpu/kmeasure_avx2.c: the read-bandwidth loop of kmeasure with
 * 256-bit loads (plain 8-byte loads under-read memory on one thread, which
 * would make GEMV look faster than "the ceiling"). Used when the CPU has AVX2.
 * And the ceiling of the avx2 variant's GEMMs (gemm_avx2.c): f32 FMA (its
 * bf16 GEMM widens the weights and runs FMAs), and for int8 the step its
 * W8A8 kernel takes per 32 multiply-adds, maddubs then madd(1) then add
 * (AVX2 has no dot-product instruction); 8 independent accumulators,
 * operands in registers. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

uint64_t tm_kavx2_read_sum(const void *p, size_t bytes);

uint64_t tm_kavx2_read_sum(const void *p, size_t bytes)
{
    const __m256i *v = p;
    size_t n = bytes / 256;
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    for (size_t i = 0; i < n; i++, v += 8) {
        s0 = _mm256_add_epi64(s0, _mm256_load_si256(v + 0));
        s1 = _mm256_add_epi64(s1, _mm256_load_si256(v + 1));
        s2 = _mm256_add_epi64(s2, _mm256_load_si256(v + 2));
        s3 = _mm256_add_epi64(s3, _mm256_load_si256(v + 3));
        s4 = _mm256_add_epi64(s4, _mm256_load_si256(v + 4));
        s5 = _mm256_add_epi64(s5, _mm256_load_si256(v + 5));
        s6 = _mm256_add_epi64(s6, _mm256_load_si256(v + 6));
        s7 = _mm256_add_epi64(s7, _mm256_load_si256(v + 7));
    }
    __m256i s = _mm256_xor_si256(_mm256_xor_si256(_mm256_xor_si256(s0, s1), _mm256_xor_si256(s2, s3)),
                                 _mm256_xor_si256(_mm256_xor_si256(s4, s5), _mm256_xor_si256(s6, s7)));
    return (uint64_t)_mm256_extract_epi64(s, 0) ^ (uint64_t)_mm256_extract_epi64(s, 3);
}

/* iters x 8 steps on this thread; returns the ops done (2 per multiply-add) */
double tm_kavx2_peak_run(int int8, long iters);

double tm_kavx2_peak_run(int int8, long iters)
{
    volatile float sink;
    if (int8) {
        const __m256i one = _mm256_set1_epi16(1);
        __m256i x = _mm256_set1_epi8(3), y = _mm256_set1_epi8(5);
        __m256i s[8];
        for (int k = 0; k < 8; k++) s[k] = _mm256_set1_epi32(k); /* 8 values: 8 chains, not one merged */
        for (long i = 0; i < iters; i++) {
            #pragma GCC unroll 8
            for (int k = 0; k < 8; k++) s[k] = _mm256_add_epi32(s[k], _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), one));
            __asm__ volatile("" : "+x"(x));
        }
        __m256i t = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(s[0], s[1]), _mm256_add_epi32(s[2], s[3])),
                                     _mm256_add_epi32(_mm256_add_epi32(s[4], s[5]), _mm256_add_epi32(s[6], s[7])));
        sink = (float)_mm256_extract_epi32(t, 0);
        (void)sink;
        return (double)iters * 8 * 32 * 2; /* 32 u8 x s8 products a step */
    }
    __m256 x = _mm256_set1_ps(1.0f), y = _mm256_set1_ps(0.5f);
    __m256 s[8];
    for (int k = 0; k < 8; k++) s[k] = _mm256_set1_ps((float)k);
    for (long i = 0; i < iters; i++) {
        #pragma GCC unroll 8
        for (int k = 0; k < 8; k++) s[k] = _mm256_fmadd_ps(x, y, s[k]);
        __asm__ volatile("" : "+x"(x));
    }
    __m256 t = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s[0], s[1]), _mm256_add_ps(s[2], s[3])),
                             _mm256_add_ps(_mm256_add_ps(s[4], s[5]), _mm256_add_ps(s[6], s[7])));
    sink = _mm256_cvtss_f32(t);
    (void)sink;
    return (double)iters * 8 * 8 * 2; /* 8 f32 multiply-adds an FMA */
}
