/* engine/cpu/vec_avx2.h: the vector abstraction of ops_vec.inc and
 * attn_vec.inc for AVX2 + FMA + F16C (8 f32 lanes). Include only from
 * *_avx2.c units. */
#ifndef TM_ENGINE_CPU_VEC_AVX2_H
#define TM_ENGINE_CPU_VEC_AVX2_H

#include <immintrin.h>
#include <stdint.h>

typedef __m256 VF;
#define VL 8
#define KFN(n) n##_avx2

static inline VF vf_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void vf_store(float *p, VF v) { _mm256_storeu_ps(p, v); }
static inline VF vf_set1(float x) { return _mm256_set1_ps(x); }
static inline VF vf_zero(void) { return _mm256_setzero_ps(); }
static inline VF vf_add(VF a, VF b) { return _mm256_add_ps(a, b); }
static inline VF vf_sub(VF a, VF b) { return _mm256_sub_ps(a, b); }
static inline VF vf_mul(VF a, VF b) { return _mm256_mul_ps(a, b); }
static inline VF vf_div(VF a, VF b) { return _mm256_div_ps(a, b); }
static inline VF vf_fmadd(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
static inline VF vf_fnmadd(VF a, VF b, VF c) { return _mm256_fnmadd_ps(a, b, c); }
static inline VF vf_max(VF a, VF b) { return _mm256_max_ps(a, b); }
static inline VF vf_min(VF a, VF b) { return _mm256_min_ps(a, b); }
static inline VF vf_abs(VF a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.f), a); }
static inline float vf_hsum(VF a)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float vf_hmax(VF a)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline VF vf_roundn(VF a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline VF vf_pow2n(VF n)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}

static inline VF vf_ld_bf16(const uint16_t *p)
{
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* 8 int32 in [0, 65535] -> 8 uint16 */
static inline __m128i vi_pack16(__m256i r)
{
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

static inline __m128i vf_to_bf16(VF v)
{
    __m256i u = _mm256_castps_si256(v);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    __m256i rn = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    return vi_pack16(_mm256_blendv_epi8(r, rn, nan));
}

static inline void vf_st_bf16(uint16_t *p, VF v) { _mm_storeu_si128((__m128i *)p, vf_to_bf16(v)); }

static inline VF vf_ld_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline void vf_st_f16(uint16_t *p, VF v)
{
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* int32 q = round_half_even(v * inv) clamped to [-127, 127], 0 for NaN (tm_kq8): clamped in f32, so that an
 * infinite product (a block's max subnormal: inv overflows) is +-127, not the conversion's 0x80000000 */
static inline __m256i vf_q8(VF v, VF inv)
{
    VF p = _mm256_mul_ps(v, inv);
    __m256i q = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(p, _mm256_set1_ps(-127.f)), _mm256_set1_ps(127.f)));
    return _mm256_andnot_si256(_mm256_castps_si256(_mm256_cmp_ps(p, p, _CMP_UNORD_Q)), q);
}

static inline void vf_st_q8(uint8_t *o, VF v, VF inv)
{
    __m256i q = _mm256_add_epi32(vf_q8(v, inv), _mm256_set1_epi32(128));
    __m128i h = vi_pack16(q);
    _mm_storel_epi64((__m128i *)o, _mm_packus_epi16(h, h));
}

#endif
