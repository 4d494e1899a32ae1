/* engine/cpu/attn_avx2.c: attention for AVX2 (attn_vec.inc over vec_avx2.h),
 * with the int8-KV hooks attn_vec.inc's decode takes from its unit:
 * maddubs on 4-byte groups of 8 keys transposed in registers. */
#include <math.h>
#include <string.h>

#include "core/threadpool.h"
#include "engine/cpu/kernels-impl.h"
#include "engine/cpu/vec_avx2.h"

/* 8 int8 -> 8 f32 */
static inline VF attn_ld_i8(const int8_t *p)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

/* Transpose 8 x 8 dwords: afterwards lane j of r[t] is what was dword t of r[j]. */
static inline void tr8x8(__m256i r[8])
{
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);     /* per 128-bit lane: a0 b0 a1 b1 */
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]); /* a2 b2 a3 b3 */
    }
    for (int i = 0; i < 2; i++) {
        u[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);         /* a0 b0 c0 d0 | a4 b4 c4 d4 */
        u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);     /* dwords 1, 5 */
        u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]); /* dwords 2, 6 */
        u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]); /* dwords 3, 7 */
    }
    for (int k = 0; k < 4; k++) {
        r[k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x20);     /* dword k of rows 0..7 */
        r[4 + k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x31); /* dword 4 + k */
    }
}

/* s[g][j] = qs[g] ks[j] sum_d qi[g][d] k[j][d] for keys j < n <= 16 (k: int8
 * rows [n][Dh]; qi: [G][Dq], zero past Dh; dots: [G][16] scratch; s:
 * [G][16], lanes past n unspecified). Per 8 keys and 32-byte column chunk: the rows (zero past
 * Dh) transposed so vector t holds 4-byte group t of the 8 keys, then
 * maddubs(|k|, sign(q, k)) = k q in 16-bit pairs (at most 2 * 128 * 127: no
 * saturation) and madd to 32 bits, in two chains. */
static void attn_q8_scores(const int8_t *k, int Dh, int n, const int8_t *qi, int Dq, int G, const int32_t *qsum,
                           const float *qs, const float *ks, int32_t *dots, float *s)
{
    (void)qsum;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int g = 0; g < G; g++) memset(dots + g * 16, 0, 64);
    for (int h = 0; h < n; h += 8) {
        int nh = n - h < 8 ? n - h : 8;
        for (int c = 0; c < Dh; c += 32) {
            int len = Dh - c < 32 ? Dh - c : 32, nt = (len + 3) / 4;
            __m256i r[8], ak[8];
            for (int j = 0; j < 8; j++) {
                const int8_t *row = k + (size_t)(h + j) * Dh + c;
                if (j >= nh) {
                    r[j] = _mm256_setzero_si256();
                } else if (len == 32) {
                    r[j] = _mm256_loadu_si256((const __m256i *)row);
                } else { /* the tail: never read past the row */
                    int8_t tmp[32] = {0};
                    memcpy(tmp, row, (size_t)len);
                    r[j] = _mm256_loadu_si256((const __m256i *)tmp);
                }
            }
            tr8x8(r);
            for (int t = nt; t < 8; t++) r[t] = _mm256_setzero_si256(); /* q is zero there anyway */
            for (int t = 0; t < 8; t++) ak[t] = _mm256_abs_epi8(r[t]);
            for (int g = 0; g < G; g++) {
                const int32_t *qg = (const int32_t *)(const void *)(qi + (size_t)g * Dq + c); /* 64-byte aligned rows */
                __m256i a0 = _mm256_loadu_si256((const __m256i *)(dots + g * 16 + h)), a1 = _mm256_setzero_si256();
#pragma GCC unroll 4
                for (int t = 0; t < 8; t += 2) {
                    __m256i p0 = _mm256_maddubs_epi16(ak[t], _mm256_sign_epi8(_mm256_set1_epi32(qg[t]), r[t]));
                    __m256i p1 = _mm256_maddubs_epi16(ak[t + 1], _mm256_sign_epi8(_mm256_set1_epi32(qg[t + 1]), r[t + 1]));
                    a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(p0, ones));
                    a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(p1, ones));
                }
                _mm256_storeu_si256((__m256i *)(dots + g * 16 + h), _mm256_add_epi32(a0, a1));
            }
        }
    }
    for (int g = 0; g < G; g++)
        for (int h = 0; h < 16; h += 8) {
            __m256 d = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(dots + g * 16 + h)));
            _mm256_storeu_ps(s + g * 16 + h, _mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(qs[g])), _mm256_loadu_ps(ks + h)));
        }
}

#include "engine/cpu/attn_vec.inc"

void tm_kattn_fill_avx2(tm_kernels *k) { KFN(fill_attn)(k); }
