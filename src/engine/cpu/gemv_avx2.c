/* engine/cpu/gemv_avx2.c: decode GEMV for AVX2 + FMA (the fallback for
 * CPUs without AVX-512). Same numerics as gemv_avx512.c:
 *  int4: a 32-byte load is 2 blocks (one per 128-bit lane); maddubs(u8
 *        nibble q+8, s8 x) then madd(1) give 4 int32 per block, the
 *        accumulator starts at -2 sum(x_block) per lane to remove the +8.
 *        int6 (Q6G64): a 64-element step is 32 nibble bytes of a 192-byte
 *        superchunk, its top bits from 32 of the superchunk's 64 crumb bytes
 *        shifted into bits 4-5 (-8 sum per lane removes the +32).
 *  int8: x back to s8, then maddubs(|w|, sign(x, w)) (no saturation: |x| <=
 *        127, |w| <= 128) and madd(1).
 *  bf16: widen to f32 (a shift), FMA. */
#include <string.h>

#include "engine/cpu/kernels-impl.h"

#include <immintrin.h>

#define AI static inline __attribute__((always_inline))

AI __m256i dot_i8(__m256i u8, __m256i s8)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u8, s8), _mm256_set1_epi16(1));
}

/* ---- int4 ------------------------------------------------------------------ */

typedef struct xchunk2 {
    __m256i lo, hi;  /* int8: lane j = block j elements 0..15 / 16..31 */
    __m256i corr;    /* int32: lanes 4j..4j+3 = -2 * sum of block j's q */
    __m256 xs;       /* f32: lanes 4j..4j+3 = block j's scale */
} xchunk2;

typedef struct q4_ctx {
    const tm_kweight *w;
    const xchunk2 *x; /* [nch][B]: the B rows of one chunk are adjacent */
    int B, nch, nfull, tail; /* tail: one last block */
    float *y;
} q4_ctx;

static void q4_prepare(const tm_kact *x, xchunk2 *xc, int nch, int8_t *q, float *s, int32_t *bs, int off)
{
    int K = x->K;
    for (int b = 0; b < x->M; b++) {
        tm_kref_quant_b32(x->f32 + (size_t)b * K, K, q, s, bs);
        for (int c = 0; c < nch; c++) {
            int8_t lo[32], hi[32];
            int32_t corr[8];
            float xs[8];
            for (int j = 0; j < 2; j++) {
                int blk = 2 * c + j, in = blk < K / 32;
                for (int e = 0; e < 16; e++) {
                    lo[16 * j + e] = in ? q[32 * blk + e] : 0;
                    hi[16 * j + e] = in ? q[32 * blk + 16 + e] : 0;
                }
                for (int e = 0; e < 4; e++) {
                    corr[4 * j + e] = in ? -(off / 4) * bs[blk] : 0;
                    xs[4 * j + e] = in ? s[blk] : 0.f;
                }
            }
            xchunk2 *o = xc + (size_t)c * x->M + b;
            o->lo = _mm256_loadu_si256((const __m256i *)lo);
            o->hi = _mm256_loadu_si256((const __m256i *)hi);
            o->corr = _mm256_loadu_si256((const __m256i *)corr);
            o->xs = _mm256_loadu_ps(xs);
        }
    }
}

/* 64-element step c of a row at wp: int4, 32 bytes each; int6, half c % 2
 * of chunk c / 2 (A or B of superchunk c / 4, whose crumbs lie 128 bytes
 * in, or cro for the tail): its crumbs are the 32 bytes of that half, A's
 * in bits 0-1 / 2-3, B's in 4-5 / 6-7 */
AI void q4_chunk(const uint8_t *wp, const uint16_t *ws, const xchunk2 *xb, int nch, int c, int B, int G, int tail,
                 const int Q6, int cro, __m256 *fs)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const int isB = c / 2 % 2, hh = c % 2;
    const uint8_t *cp = Q6 ? wp + 192 * (c / 4) + 64 * isB + 32 * hh : wp + 32 * c;
    __m256i wv = tail ? _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)cp))
                      : _mm256_loadu_si256((const __m256i *)cp);
    __m256i wlo = _mm256_and_si256(wv, m4), whi = _mm256_and_si256(_mm256_srli_epi16(wv, 4), m4);
    if (Q6) {
        const __m256i m30 = _mm256_set1_epi8(0x30);
        __m256i cv = _mm256_loadu_si256((const __m256i *)(wp + 192 * (c / 4) + cro + 32 * hh));
        __m256i tl = isB ? cv : _mm256_slli_epi16(cv, 4);
        __m256i th = isB ? _mm256_srli_epi16(cv, 2) : _mm256_slli_epi16(cv, 2);
        wlo = _mm256_or_si256(wlo, _mm256_and_si256(tl, m30));
        whi = _mm256_or_si256(whi, _mm256_and_si256(th, m30));
    }
    __m256 wsl = _mm256_setzero_ps();
    if (G == 32) { /* two f16 scales (one at the tail) */
        __m128i h2 = _mm_cvtsi32_si128(ws[2 * c]);
        if (!tail) h2 = _mm_insert_epi16(h2, ws[2 * c + 1], 1);
        __m128 v = _mm_cvtph_ps(h2);
        wsl = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(v), _mm256_set_epi32(1, 1, 1, 1, 0, 0, 0, 0));
    } else if (G == 64) {
        wsl = _mm256_set1_ps(_cvtsh_ss(ws[c]));
    }
    #pragma GCC unroll 8
    for (int b = 0; b < B; b++) {
        const xchunk2 *xc = xb + (size_t)c * B + b;
        __m256i acc = _mm256_add_epi32(xc->corr, _mm256_add_epi32(dot_i8(wlo, xc->lo), dot_i8(whi, xc->hi)));
        __m256 sc = G ? _mm256_mul_ps(wsl, xc->xs) : xc->xs;
        fs[b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), sc, fs[b]);
    }
}

static float hsum8(__m256 a)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static int32_t hsum8i(__m256i a)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

AI void q4_rows_t(const q4_ctx *c, int n0, int n1, const int B, const int G, const int Q6)
{
    const tm_kweight *w = c->w;
    int ng = w->K / w->G;
    for (int n = n0; n < n1; n++) {
        const uint8_t *wp = (const uint8_t *)w->data + (size_t)n * w->row_bytes;
        const uint16_t *ws = (const uint16_t *)w->scales + (size_t)n * ng; /* f16 */
        __m256 fs[TM_KGEMV_MAX_B];
        #pragma GCC unroll 8
        for (int b = 0; b < B; b++) fs[b] = _mm256_setzero_ps();
        int cc = 0;
        const int cb = Q6 ? 48 : 32, nsup = w->K / 256, tcro = w->K % 256 / 2;
        for (; cc < c->nfull; cc++) {
            _mm_prefetch((const char *)wp + cb * cc + 2048, _MM_HINT_T0); /* see gemv_avx512.c */
            _mm_prefetch((const char *)wp + cb * cc + 8192, _MM_HINT_T1);
            q4_chunk(wp, ws, c->x, c->nch, cc, B, G, 0, Q6, cc / 4 < nsup ? 128 : tcro, fs);
        }
        if (c->tail) q4_chunk(wp, ws, c->x, c->nch, cc, B, G, 1, 0, 0, fs);
        #pragma GCC unroll 8
        for (int b = 0; b < B; b++) {
            float v = hsum8(fs[b]);
            c->y[(size_t)b * w->N + n] = G ? v : v * _cvtsh_ss(ws[0]);
        }
    }
}

#define CASE_B(F, ...)                                   \
    switch (c->B) {                                      \
    case 1: F(c, n0, n1, 1, ##__VA_ARGS__); break;       \
    case 2: F(c, n0, n1, 2, ##__VA_ARGS__); break;       \
    case 3: F(c, n0, n1, 3, ##__VA_ARGS__); break;       \
    case 4: F(c, n0, n1, 4, ##__VA_ARGS__); break;       \
    case 5: F(c, n0, n1, 5, ##__VA_ARGS__); break;       \
    case 6: F(c, n0, n1, 6, ##__VA_ARGS__); break;       \
    case 7: F(c, n0, n1, 7, ##__VA_ARGS__); break;       \
    default: F(c, n0, n1, 8, ##__VA_ARGS__); break;      \
    }

static void q4_rows(void *ctx, int n0, int n1, int worker)
{
    (void)worker;
    const q4_ctx *c = ctx;
    switch (c->w->dtype) {
    case TM_DT_Q4G32: CASE_B(q4_rows_t, 32, 0) break;
    case TM_DT_Q4G64: CASE_B(q4_rows_t, 64, 0) break;
    case TM_DT_Q6G64: CASE_B(q4_rows_t, 64, 1) break;
    default: CASE_B(q4_rows_t, 0, 0) break;
    }
}

static int gemv_q4(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    if (tm_kcheck_gemv(w, x, 4)) return TM_E_INVALID;
    int K = w->K, nb = K / 32, nch = (K + 63) / 64;
    size_t xbytes = (size_t)x->M * nch * sizeof(xchunk2);
    size_t need = xbytes + tm_kalign64((size_t)K) + 2 * tm_kalign64((size_t)nb * 4);
    if (tm_kbuf_reserve(ws, need)) return TM_E_NOMEM;
    xchunk2 *xc = tm_kbuf_at(ws, 0);
    int8_t *q = tm_kbuf_at(ws, xbytes);
    float *s = tm_kbuf_at(ws, xbytes + tm_kalign64((size_t)K));
    int32_t *bs = tm_kbuf_at(ws, xbytes + tm_kalign64((size_t)K) + tm_kalign64((size_t)nb * 4));
    q4_prepare(x, xc, nch, q, s, bs, w->dtype == TM_DT_Q6G64 ? 32 : 8);
    q4_ctx c = {w, xc, x->M, nch, K / 64, (K % 64) / 32, y};
    tm_kgemv_run(w->N, 1, w->row_bytes, q4_rows, &c, pool);
    return TM_OK;
}

/* ---- int8 ------------------------------------------------------------------ */

typedef struct q8_ctx {
    const tm_kweight *w;
    const int8_t *xq;  /* [B][ld] s8 */
    const float *xs;
    int B, ld;
    float *y;
} q8_ctx;

#define Q8_SEG 4096 /* chunks of 32: int32 lanes exact well within 2^31 */

AI void q8_rows_t(const q8_ctx *c, int n0, int n1, const int B)
{
    const tm_kweight *w = c->w;
    int K = w->K, nfull = K / 32, tail = K % 32;
    for (int n = n0; n < n1; n++) {
        const int8_t *wp = (const int8_t *)w->data + (size_t)n * w->row_bytes;
        double tot[TM_KGEMV_MAX_B] = {0};
        for (int s0 = 0;;) {
            __m256i acc[TM_KGEMV_MAX_B];
            #pragma GCC unroll 8
            for (int b = 0; b < B; b++) acc[b] = _mm256_setzero_si256();
            int s1 = s0 + Q8_SEG < nfull ? s0 + Q8_SEG : nfull, last = s1 == nfull;
            for (int ch = s0; ch <= s1; ch++) {
                __m256i wv;
                if (ch < s1) {
                    _mm_prefetch((const char *)wp + 32 * ch + 2048, _MM_HINT_T0); /* see gemv_avx512.c */
                    _mm_prefetch((const char *)wp + 32 * ch + 8192, _MM_HINT_T1);
                    wv = _mm256_loadu_si256((const __m256i *)(wp + 32 * ch));
                } else {
                    if (!last || !tail) break;
                    int8_t t[32] = {0};
                    memcpy(t, wp + 32 * ch, (size_t)tail);
                    wv = _mm256_loadu_si256((const __m256i *)t);
                }
                __m256i wa = _mm256_abs_epi8(wv);
                #pragma GCC unroll 8
                for (int b = 0; b < B; b++) {
                    __m256i xv = _mm256_loadu_si256((const __m256i *)(c->xq + (size_t)b * c->ld + 32 * ch));
                    acc[b] = _mm256_add_epi32(acc[b], dot_i8(wa, _mm256_sign_epi8(xv, wv)));
                }
            }
            #pragma GCC unroll 8
            for (int b = 0; b < B; b++) tot[b] += hsum8i(acc[b]);
            if (last) break;
            s0 = s1;
        }
        #pragma GCC unroll 8
        for (int b = 0; b < B; b++)
            c->y[(size_t)b * w->N + n] = (float)(tot[b] * ((double)((const float *)w->scales)[n] * c->xs[b]));
    }
}

static void q8_rows(void *ctx, int n0, int n1, int worker)
{
    (void)worker;
    const q8_ctx *c = ctx;
    CASE_B(q8_rows_t)
}

/* offset-binary u8 rows -> s8 (x ^ 0x80), into out [M][ld] */
static void q8_to_s8(int8_t *out, const uint8_t *xq, size_t n)
{
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        _mm256_storeu_si256((__m256i *)(out + i),
                            _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(xq + i)), _mm256_set1_epi8((char)0x80)));
    for (; i < n; i++) out[i] = (int8_t)(xq[i] ^ 0x80);
}

static int gemv_q8(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    if (tm_kcheck_gemv(w, x, TM_DT_Q8PC)) return TM_E_INVALID;
    int ld = tm_kact_ld(x->K);
    size_t s8bytes = tm_kalign64((size_t)x->M * ld);
    if (tm_kbuf_reserve(ws, s8bytes + tm_kact_need_q8(x) + 64)) return TM_E_NOMEM;
    const float *xs;
    const uint8_t *xq = tm_kact_get_q8(x, ws, s8bytes, tm_kavx2_quant_q8, &xs, NULL);
    int8_t *x8 = tm_kbuf_at(ws, 0);
    q8_to_s8(x8, xq, (size_t)x->M * ld);
    q8_ctx c = {w, x8, xs, x->M, ld, y};
    tm_kgemv_run(w->N, 1, w->row_bytes, q8_rows, &c, pool);
    return TM_OK;
}

/* ---- bf16 ------------------------------------------------------------------ */

typedef struct bf_ctx {
    const tm_kweight *w;
    const float *xf;   /* [B][ld] x rounded to bf16, as f32, zero past K */
    int B, ld;
    float *y;
} bf_ctx;

AI __m256 bf8(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }

AI void bf_rows_t(const bf_ctx *c, int n0, int n1, const int B)
{
    const tm_kweight *w = c->w;
    int K = w->K, nfull = K / 16, tail = K % 16;
    for (int n = n0; n < n1; n++) {
        const uint16_t *wp = (const uint16_t *)w->data + (size_t)n * K;
        __m256 acc[TM_KGEMV_MAX_B];
        #pragma GCC unroll 8
        for (int b = 0; b < B; b++) acc[b] = _mm256_setzero_ps();
        for (int ch = 0; ch <= nfull; ch++) {
            __m256i h;
            if (ch < nfull) {
                h = _mm256_loadu_si256((const __m256i *)(wp + 16 * ch));
            } else {
                if (!tail) break;
                uint16_t t[16] = {0};
                memcpy(t, wp + 16 * ch, (size_t)tail * 2);
                h = _mm256_loadu_si256((const __m256i *)t);
            }
            __m256 w0 = bf8(_mm256_castsi256_si128(h)), w1 = bf8(_mm256_extracti128_si256(h, 1));
            #pragma GCC unroll 8
            for (int b = 0; b < B; b++) {
                const float *xp = c->xf + (size_t)b * c->ld + 16 * ch;
                acc[b] = _mm256_fmadd_ps(_mm256_loadu_ps(xp), w0, acc[b]);
                acc[b] = _mm256_fmadd_ps(_mm256_loadu_ps(xp + 8), w1, acc[b]);
            }
        }
        #pragma GCC unroll 8
        for (int b = 0; b < B; b++) c->y[(size_t)b * w->N + n] = hsum8(acc[b]);
    }
}

static void bf_rows(void *ctx, int n0, int n1, int worker)
{
    (void)worker;
    const bf_ctx *c = ctx;
    CASE_B(bf_rows_t)
}

static int gemv_bf16(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    if (tm_kcheck_gemv(w, x, TM_DT_BF16)) return TM_E_INVALID;
    int ld;
    float *xf = tm_kact_bf16_widened(x, ws, tm_kavx2_f32_to_bf16, &ld);
    if (!xf) return TM_E_NOMEM;
    bf_ctx c = {w, xf, x->M, ld, y};
    tm_kgemv_run(w->N, 1, w->row_bytes, bf_rows, &c, pool);
    return TM_OK;
}

void tm_kmm_fill_avx2(tm_kernels *k)
{
    k->gemv_q4 = gemv_q4;
    k->gemv_q8 = gemv_q8;
    k->gemv_bf16 = gemv_bf16;
    tm_kgemm_fill_avx2(k);
}
