/* engine/cpu/kmeasure_avx2.c: the read-bandwidth loop of kmeasure with
 * 256-bit loads (plain 8-byte loads under-read memory on one thread, which
 * would make GEMV look faster than "the ceiling"). Used when the CPU has AVX2. */
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
