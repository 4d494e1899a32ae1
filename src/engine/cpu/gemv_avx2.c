/* engine/cpu/gemv_avx2.c: decode GEMV for AVX2 + FMA (the fallback for
 * CPUs without AVX-512). Same numerics as gemv_avx512.c:
 *  int4, int6: the GEMV layout (kernels-impl.h): a 32-byte load is half a
 *        chunk, int32 lane l holding 8 nibbles of block 8 h + l of the
 *        window (half h; int6: their top bits from the crumb chunk, shifted
 *        into bits 4-5); maddubs(u8 code, s8 x) pairs summed in int16 over
 *        the half window (int6: the chunk; bounds at q4_half), then madd(1)
 *        into int32 lanes started at -off sum(x_block) (off 8 or 32): per
 *        half window one conversion and one fma.
 *  int8: x back to s8, then maddubs(|w|, sign(x, w)) (no saturation: |x| <=
 *        127, |w| <= 128) and madd(1).
 *  bf16: widen to f32 (a shift), FMA. */
#include <string.h>

#include "engine/cpu/kernels-impl.h"
#include "engine/cpu/vec_avx2.h"

#include <immintrin.h>

#define AI static inline __attribute__((always_inline))

AI __m256i dot_i8(__m256i u8, __m256i s8)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u8, s8), _mm256_set1_epi16(1));
}

/* ---- int4, int6 ------------------------------------------------------------ */

typedef struct q4_ctx {
    const tm_kweight *w;
    const tm_kq4x *xq; /* [nwin][B]: the B rows of one window are adjacent */
    int B;
    float *y;
} q4_ctx;

/* half h (blocks 8 h .. 8 h + nl - 1) of the window at wp (its chunks cb
 * bytes each; int6: its crumb chunks after them), x's window xw (B rows),
 * the 8 lanes' weight scales wsl. A maddubs(u, x) lane is at most 2 * 15 *
 * 127 = 3810 in magnitude for int4 codes (2 * 63 * 127 = 16002 for int6's),
 * so int4's eight of a half (4 chunks, low and high nibbles) add up in
 * int16 (30480 < 32767) and int6's two of a chunk (32004): one madd(1) a
 * half (int6: a chunk) widens them into the lanes' int32, where the VNNI
 * form needs none (AVX2 has no VNNI). nl is 8 at every call but a row's
 * last window's: full halves get the plain loads. */
AI void q4_half(const uint8_t *wp, int cb, int h, const int nl, __m256 wsl, const tm_kq4x *xw, const int B,
                const int Q6, __m256 *fs)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30), one = _mm256_set1_epi16(1);
    const __m256i lm = nl == 8 ? one : _mm256_cmpgt_epi32(_mm256_set1_epi32(nl), _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0));
#define Q4_LOAD(p) (nl == 8 ? _mm256_loadu_si256((const __m256i *)(p)) : _mm256_maskload_epi32((const int *)(p), lm))
    __m256i acc[TM_KGEMV_MAX_B]; /* int4: the int16 sums; int6: the int32 lanes */
    #pragma GCC unroll 8
    for (int b = 0; b < B; b++)
        acc[b] = Q6 ? _mm256_loadu_si256((const __m256i *)(xw[b].corr + 8 * h)) : _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m256i wv = Q4_LOAD(wp + cb * j + 32 * h);
        __m256i wlo = _mm256_and_si256(wv, m4), whi = _mm256_and_si256(_mm256_srli_epi16(wv, 4), m4);
        if (Q6) { /* chunk j's crumbs: bits 0-1 / 2-3 (even j) or 4-5 / 6-7 (odd) of crumb chunk j / 2 */
            __m256i cv = Q4_LOAD(wp + cb * (4 + j / 2) + 32 * h);
            __m256i tl = j % 2 ? cv : _mm256_slli_epi16(cv, 4), th = j % 2 ? _mm256_srli_epi16(cv, 2) : _mm256_slli_epi16(cv, 2);
            wlo = _mm256_or_si256(wlo, _mm256_and_si256(tl, m30));
            whi = _mm256_or_si256(whi, _mm256_and_si256(th, m30));
        }
        #pragma GCC unroll 8
        for (int b = 0; b < B; b++) {
            __m256i p = _mm256_add_epi16(
                _mm256_maddubs_epi16(wlo, _mm256_loadu_si256((const __m256i *)(xw[b].lo[j] + 32 * h))),
                _mm256_maddubs_epi16(whi, _mm256_loadu_si256((const __m256i *)(xw[b].hi[j] + 32 * h))));
            acc[b] = Q6 ? _mm256_add_epi32(acc[b], _mm256_madd_epi16(p, one)) : _mm256_add_epi16(acc[b], p);
        }
    }
#undef Q4_LOAD
    #pragma GCC unroll 8
    for (int b = 0; b < B; b++) {
        __m256i a = Q6 ? acc[b]
                       : _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(xw[b].corr + 8 * h)), _mm256_madd_epi16(acc[b], one));
        fs[b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a), _mm256_mul_ps(wsl, _mm256_loadu_ps(xw[b].s + 8 * h)), fs[b]);
    }
}

/* the first n (< 8) of p's uint16 in a vector, the rest 0, reading only those: element by element into
 * the register (a copy through memory would stall on store forwarding, once a row) */
static inline __m128i load_u16_part(const uint16_t *p, int n)
{
    __m128i v = _mm_setzero_si128();
    switch (n) {
    case 7: v = _mm_insert_epi16(v, p[6], 6); /* fall through */
    case 6: v = _mm_insert_epi16(v, p[5], 5); /* fall through */
    case 5: v = _mm_insert_epi16(v, p[4], 4); /* fall through */
    case 4: v = _mm_insert_epi16(v, p[3], 3); /* fall through */
    case 3: v = _mm_insert_epi16(v, p[2], 2); /* fall through */
    case 2: v = _mm_insert_epi16(v, p[1], 1); /* fall through */
    case 1: v = _mm_insert_epi16(v, p[0], 0); /* fall through */
    default: break;
    }
    return v;
}

/* the scales of half h of window wi of a row (its f16 scales at ws, ng of them): 8 (G = 32) or 4 widened
 * to pairs (G = 64), 0 past the row (only a row's last window is short); never a byte past the row's
 * scales (a concatenated weight's last row ends its allocation) */
AI __m256 q4_wscale(const uint16_t *ws, int ng, int wi, int h, const int G)
{
    if (!G) return _mm256_set1_ps(1.f);
    int per = G == 32 ? 8 : 4, g0 = 16 * wi * 32 / G + per * h, ngh = ng - g0 < per ? ng - g0 : per;
    __m128i hv;
    if (ngh == per)
        hv = G == 32 ? _mm_loadu_si128((const __m128i *)(ws + g0)) : _mm_loadl_epi64((const __m128i *)(ws + g0));
    else if (G == 64 && ng >= 4) /* the row's last 4 scales, shifted down to its last ngh */
        hv = _mm_srl_epi64(_mm_loadl_epi64((const __m128i *)(ws + ng - 4)), _mm_cvtsi32_si128(16 * (4 - ngh)));
    else
        hv = load_u16_part(ws + g0, ngh);
    __m256 v = _mm256_cvtph_ps(hv);
    return G == 32 ? v : _mm256_permutevar8x32_ps(v, _mm256_set_epi32(3, 3, 2, 2, 1, 1, 0, 0));
}

/* row n in the GEMV layout, window by window, its lane sums into fs[B] */
AI void q4_row(const q4_ctx *c, int n, const int B, const int G, const int Q6, __m256 *fs)
{
    const tm_kweight *w = c->w;
    int nb = w->K / 32, ng = G ? w->K / G : 1;
    const uint8_t *wp = (const uint8_t *)w->data + (size_t)n * w->row_bytes;
    const uint16_t *ws = (const uint16_t *)w->scales + (size_t)n * ng; /* f16 */
    for (int wi = 0; 16 * wi < nb; wi++) {
        int nbw = nb - 16 * wi < 16 ? nb - 16 * wi : 16, cb = 4 * nbw;
        for (int l = 0; l < (Q6 ? 6 : 4); l++) {
            _mm_prefetch((const char *)wp + 64 * l + 2048, _MM_HINT_T0); /* see gemv_q4.inc */
            _mm_prefetch((const char *)wp + 64 * l + 8192, _MM_HINT_T1);
        }
        for (int h = 0; h < 2 && 8 * h < nbw; h++) {
            int nl = nbw - 8 * h < 8 ? nbw - 8 * h : 8;
            __m256 wsl = q4_wscale(ws, ng, wi, h, G);
            if (nl == 8) q4_half(wp, cb, h, 8, wsl, c->xq + (size_t)wi * B, B, Q6, fs);
            else q4_half(wp, cb, h, nl, wsl, c->xq + (size_t)wi * B, B, Q6, fs);
        }
        wp += (Q6 ? 6 : 4) * cb;
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
    const uint16_t *sc = w->scales; /* per channel (G = 0): the row's f16 scale, applied to its sum */
    for (int n = n0; n < n1; n++) {
        __m256 fs[TM_KGEMV_MAX_B];
        #pragma GCC unroll 8
        for (int b = 0; b < B; b++) fs[b] = _mm256_setzero_ps();
        q4_row(c, n, B, G, Q6, fs);
        float rs = G ? 1.f : _cvtsh_ss(sc[n]);
        #pragma GCC unroll 8
        for (int b = 0; b < B; b++) c->y[(size_t)b * w->N + n] = hsum8(fs[b]) * rs;
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

void tm_kavx2_quant_b32(const float *xr, int K, int8_t *q, float *s, int32_t *bsum)
{
    const __m256 sign = _mm256_set1_ps(-0.f);
    for (int blk = 0; blk < K / 32; blk++) {
        const float *p = xr + 32 * blk;
        __m256 v0 = _mm256_loadu_ps(p), v1 = _mm256_loadu_ps(p + 8), v2 = _mm256_loadu_ps(p + 16), v3 = _mm256_loadu_ps(p + 24);
        /* max(a, m) is m where a is NaN: a NaN never wins, as in the reference */
        __m256 m = _mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_setzero_ps());
        m = _mm256_max_ps(_mm256_andnot_ps(sign, v1), m);
        m = _mm256_max_ps(_mm256_andnot_ps(sign, v2), m);
        m = _mm256_max_ps(_mm256_andnot_ps(sign, v3), m);
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        float amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
        float inv = amax > 0.f ? 127.f / amax : 0.f;
        __m256 iv = _mm256_set1_ps(inv);
        __m256i q0 = vf_q8(v0, iv), q1 = vf_q8(v1, iv), q2 = vf_q8(v2, iv), q3 = vf_q8(v3, iv);
        __m256i b8 = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3)); /* 4-lane groups */
        _mm256_storeu_si256((__m256i *)(q + 32 * blk), _mm256_permutevar8x32_epi32(b8, _mm256_set_epi32(7, 3, 6, 2, 5, 1, 4, 0)));
        bsum[blk] = hsum8i(_mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3)));
        s[blk] = amax / 127.f;
    }
}

static int gemv_q4(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    if (tm_kcheck_gemv(w, x, 4)) return TM_E_INVALID;
    int K = w->K, nb = K / 32;
    size_t xbytes = (size_t)x->M * ((nb + 15) / 16) * sizeof(tm_kq4x);
    size_t need = xbytes + tm_kalign64((size_t)K) + 2 * tm_kalign64((size_t)nb * 4);
    if (tm_kbuf_reserve(ws, need)) return TM_E_NOMEM;
    tm_kq4x *xq = tm_kbuf_at(ws, 0);
    int8_t *q = tm_kbuf_at(ws, xbytes);
    float *s = tm_kbuf_at(ws, xbytes + tm_kalign64((size_t)K));
    int32_t *bs = tm_kbuf_at(ws, xbytes + tm_kalign64((size_t)K) + tm_kalign64((size_t)nb * 4));
    for (int b = 0; b < x->M; b++) {
        tm_kavx2_quant_b32(x->f32 + (size_t)b * K, K, q, s, bs);
        tm_kq4x_fill(xq + b, (size_t)x->M, q, s, bs, K, w->dtype == TM_DT_Q6G64 ? 32 : 8);
    }
    q4_ctx c = {w, xq, x->M, y};
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
                _mm_prefetch((const char *)(wp + 16 * ch) + 2048, _MM_HINT_T0); /* as int8's: 1.04-1.19x (Zen 3) */
                _mm_prefetch((const char *)(wp + 16 * ch) + 8192, _MM_HINT_T1);
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
