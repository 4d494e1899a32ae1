/* engine/cpu/attn_avx512.c: attention for AVX512 (attn_vec.inc over vec_avx512.h),
 * with the int8-KV hooks attn_vec.inc's decode takes from its unit: VNNI
 * dpbusd on 4-byte groups of 16 keys transposed in registers. */
#include <math.h>
#include <string.h>

#include "core/threadpool.h"
#include "engine/cpu/kernels-impl.h"
#include "engine/cpu/vec_avx512.h"

/* 16 int8 -> 16 f32 */
static inline VF attn_ld_i8(const int8_t *p)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

/* Transpose 16 x 16 dwords: afterwards lane j of r[t] is what was dword t of r[j]. */
static inline void tr16x16(__m512i r[16])
{
    __m512i t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);     /* per 128-bit lane: a0 b0 a1 b1 */
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]); /* a2 b2 a3 b3 */
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);         /* a0 b0 c0 d0 */
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);     /* a1 b1 c1 d1 */
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]); /* a2 b2 c2 d2 */
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]); /* a3 b3 c3 d3 */
    }
    /* r[4i + k], 128-bit lane L: rows 4i..4i+3, dword 4L + k */
    for (int k = 0; k < 4; k++) {
        t[k] = _mm512_shuffle_i32x4(r[k], r[4 + k], 0x88);          /* rows 0-7: dwords k, 8+k */
        t[4 + k] = _mm512_shuffle_i32x4(r[k], r[4 + k], 0xdd);      /* rows 0-7: dwords 4+k, 12+k */
        t[8 + k] = _mm512_shuffle_i32x4(r[8 + k], r[12 + k], 0x88); /* rows 8-15 */
        t[12 + k] = _mm512_shuffle_i32x4(r[8 + k], r[12 + k], 0xdd);
    }
    for (int k = 0; k < 4; k++) {
        r[k] = _mm512_shuffle_i32x4(t[k], t[8 + k], 0x88);          /* dword k of rows 0..15 */
        r[8 + k] = _mm512_shuffle_i32x4(t[k], t[8 + k], 0xdd);      /* dword 8 + k */
        r[4 + k] = _mm512_shuffle_i32x4(t[4 + k], t[12 + k], 0x88); /* dword 4 + k */
        r[12 + k] = _mm512_shuffle_i32x4(t[4 + k], t[12 + k], 0xdd); /* dword 12 + k */
    }
}

/* s[g][j] = qs[g] ks[j] sum_d qi[g][d] k[j][d] for keys j < n <= 16 (k: int8
 * rows [n][Dh]; qi: [G][Dq], zero past Dh; dots: [G][16] scratch; s:
 * [G][16], lanes past n unspecified). Per 64-byte column chunk: the rows as unsigned k + 128 (zero
 * past Dh), transposed so vector t holds 4-byte group t of all 16 keys, then
 * dpbusd with group t of q broadcast (four chains, to hide its latency); the
 * offset comes off as 128 sum(q). */
static void attn_q8_scores(const int8_t *k, int Dh, int n, const int8_t *qi, int Dq, int G, const int32_t *qsum,
                           const float *qs, const float *ks, int32_t *dots, float *s)
{
    const __m512i off = _mm512_set1_epi8((char)0x80);
    for (int g = 0; g < G; g++) _mm512_storeu_si512(dots + g * 16, _mm512_set1_epi32(-128 * qsum[g]));
    for (int c = 0; c < Dh; c += 64) {
        int len = Dh - c < 64 ? Dh - c : 64, nt = (len + 3) / 4;
        __mmask64 m = len == 64 ? ~(__mmask64)0 : (((__mmask64)1 << len) - 1);
        __m512i r[16];
        for (int j = 0; j < 16; j++)
            r[j] = j < n ? _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, k + (size_t)j * Dh + c), off) : off;
        tr16x16(r);
        for (int t = nt; t < 16; t++) r[t] = _mm512_setzero_si512(); /* q is zero there anyway */
        for (int g = 0; g < G; g++) {
            const int32_t *qg = (const int32_t *)(const void *)(qi + (size_t)g * Dq + c); /* 64-byte aligned rows */
            __m512i a0 = _mm512_loadu_si512(dots + g * 16), a1 = _mm512_setzero_si512();
            __m512i a2 = _mm512_setzero_si512(), a3 = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int t = 0; t < 16; t += 4) {
                a0 = _mm512_dpbusd_epi32(a0, r[t], _mm512_set1_epi32(qg[t]));
                a1 = _mm512_dpbusd_epi32(a1, r[t + 1], _mm512_set1_epi32(qg[t + 1]));
                a2 = _mm512_dpbusd_epi32(a2, r[t + 2], _mm512_set1_epi32(qg[t + 2]));
                a3 = _mm512_dpbusd_epi32(a3, r[t + 3], _mm512_set1_epi32(qg[t + 3]));
            }
            a0 = _mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3));
            _mm512_storeu_si512(dots + g * 16, a0);
        }
    }
    __m512 vk = _mm512_loadu_ps(ks);
    for (int g = 0; g < G; g++)
        _mm512_storeu_ps(s + g * 16, _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(dots + g * 16)),
                                                                  _mm512_set1_ps(qs[g])), vk));
}

/* s[g][j] = scale sum_d q[g][d] k[j][d] for bf16 keys j < n <= 16 (k: rows
 * [n][Dh], Dh even; qb: [G][2][Dh], q's bf16 hi and lo parts, q = hi + lo to
 * ~2^-17; s: [G][16], lanes past n 0). Per 64-byte column chunk: the 16 rows
 * transposed so vector t holds bf16 pair t of all 16 keys, then vdpbf16ps
 * with pair t of q's hi and lo broadcast: no per-key horizontal sums and no
 * widening of the keys (the generic path did one f32 dot and one horizontal
 * sum per key and head, after widening the block). */
#define ATTN_BF16_SCORES 1
static void attn_bf16_scores(const uint16_t *k, int Dh, int n, const uint16_t *qb, int G, float scale, float *s)
{
    for (int g = 0; g < G; g++) _mm512_storeu_ps(s + g * 16, _mm512_setzero_ps());
    for (int c = 0; c < Dh; c += 32) {
        int len = Dh - c < 32 ? Dh - c : 32, nt = len / 2;
        __mmask32 m = len == 32 ? ~(__mmask32)0 : (((__mmask32)1 << len) - 1);
        __m512i r[16];
        for (int j = 0; j < 16; j++)
            r[j] = j < n ? _mm512_maskz_loadu_epi16(m, k + (size_t)j * Dh + c) : _mm512_setzero_si512();
        tr16x16(r); /* r[t] for t >= nt: zero (the masked columns) */
        for (int g = 0; g < G; g++) {
            const uint16_t *qh = qb + (size_t)2 * g * Dh + c, *ql = qh + Dh;
            __m512 a0 = _mm512_loadu_ps(s + g * 16), a1 = _mm512_setzero_ps();
            __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
            int t = 0;
            for (; t + 2 <= nt; t += 2) {
                int32_t h0, h1, l0, l1;
                memcpy(&h0, qh + 2 * t, 4), memcpy(&h1, qh + 2 * t + 2, 4);
                memcpy(&l0, ql + 2 * t, 4), memcpy(&l1, ql + 2 * t + 2, 4);
                a0 = _mm512_dpbf16_ps(a0, (__m512bh)r[t], (__m512bh)_mm512_set1_epi32(h0));
                a1 = _mm512_dpbf16_ps(a1, (__m512bh)r[t + 1], (__m512bh)_mm512_set1_epi32(h1));
                a2 = _mm512_dpbf16_ps(a2, (__m512bh)r[t], (__m512bh)_mm512_set1_epi32(l0));
                a3 = _mm512_dpbf16_ps(a3, (__m512bh)r[t + 1], (__m512bh)_mm512_set1_epi32(l1));
            }
            if (t < nt) {
                int32_t h0, l0;
                memcpy(&h0, qh + 2 * t, 4), memcpy(&l0, ql + 2 * t, 4);
                a0 = _mm512_dpbf16_ps(a0, (__m512bh)r[t], (__m512bh)_mm512_set1_epi32(h0));
                a2 = _mm512_dpbf16_ps(a2, (__m512bh)r[t], (__m512bh)_mm512_set1_epi32(l0));
            }
            _mm512_storeu_ps(s + g * 16, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
        }
    }
    for (int g = 0; g < G; g++) _mm512_storeu_ps(s + g * 16, _mm512_mul_ps(_mm512_loadu_ps(s + g * 16), _mm512_set1_ps(scale)));
}

#include "engine/cpu/attn_vec.inc"

void tm_kattn_fill_avx512(tm_kernels *k) { KFN(fill_attn)(k); }

int tm_kattn_prefill_avx512(const tm_kattn_prefill *a, tm_kbuf *ws, struct tm_pool *pool)
{
    return KFN(attn_prefill)(a, ws, pool);
}
