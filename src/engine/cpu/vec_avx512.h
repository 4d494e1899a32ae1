/* engine/cpu/vec_avx512.h: the vector abstraction of ops_vec.inc and
 * attn_vec.inc for AVX-512 (16 f32 lanes). Include only from *_avx512.c or
 * *_amx.c units (compiled with the AVX-512 flags). */
#ifndef TM_ENGINE_CPU_VEC_AVX512_H
#define TM_ENGINE_CPU_VEC_AVX512_H

#include <immintrin.h>
#include <stdint.h>

typedef __m512 VF;
#define VL 16
#define KFN(n) n##_avx512

static inline VF vf_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void vf_store(float *p, VF v) { _mm512_storeu_ps(p, v); }
static inline VF vf_set1(float x) { return _mm512_set1_ps(x); }
static inline VF vf_zero(void) { return _mm512_setzero_ps(); }
static inline VF vf_add(VF a, VF b) { return _mm512_add_ps(a, b); }
static inline VF vf_sub(VF a, VF b) { return _mm512_sub_ps(a, b); }
static inline VF vf_mul(VF a, VF b) { return _mm512_mul_ps(a, b); }
static inline VF vf_div(VF a, VF b) { return _mm512_div_ps(a, b); }
static inline VF vf_fmadd(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }   /* a b + c */
static inline VF vf_fnmadd(VF a, VF b, VF c) { return _mm512_fnmadd_ps(a, b, c); } /* c - a b */
static inline VF vf_max(VF a, VF b) { return _mm512_max_ps(a, b); }
static inline VF vf_min(VF a, VF b) { return _mm512_min_ps(a, b); }
static inline VF vf_abs(VF a) { return _mm512_abs_ps(a); }
static inline float vf_hsum(VF a) { return _mm512_reduce_add_ps(a); }
static inline float vf_hmax(VF a) { return _mm512_reduce_max_ps(a); }
static inline VF vf_roundn(VF a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
/* 2^n for integral n in [-126, 127] */
static inline VF vf_pow2n(VF n)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
}

static inline VF vf_ld_bf16(const uint16_t *p)
{
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* f32 -> bf16 [16], round to nearest even, NaN kept (as tm_f32_to_bf16) */
static inline __m256i vf_to_bf16(VF v)
{
    __m512i u = _mm512_castps_si512(v);
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
}

static inline void vf_st_bf16(uint16_t *p, VF v) { _mm256_storeu_si256((__m256i *)p, vf_to_bf16(v)); }

static inline VF vf_ld_f16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
static inline void vf_st_f16(uint16_t *p, VF v)
{
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* int32 q = round_half_even(v * inv) clamped to [-127, 127], 0 for NaN (tm_kq8): clamped in f32, so that an
 * infinite product (a block's max subnormal: inv overflows) is +-127, not the conversion's 0x80000000 */
static inline __m512i vf_q8(VF v, VF inv)
{
    VF p = _mm512_mul_ps(v, inv);
    __m512i q = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(p, _mm512_set1_ps(-127.f)), _mm512_set1_ps(127.f)));
    return _mm512_mask_mov_epi32(q, _mm512_cmp_ps_mask(p, p, _CMP_UNORD_Q), _mm512_setzero_si512());
}

/* 16 offset-binary bytes q + 128 */
static inline void vf_st_q8(uint8_t *o, VF v, VF inv)
{
    __m512i q = _mm512_add_epi32(vf_q8(v, inv), _mm512_set1_epi32(128));
    _mm_storeu_si128((__m128i *)o, _mm512_cvtepi32_epi8(q));
}

#endif
