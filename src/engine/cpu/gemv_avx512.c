/* engine/cpu/gemv_avx512.c: decode GEMV, y[B][N] = x[B][K] . W[N][K]^T for
 * B = 1..8, AVX-512 VNNI (int4, int8) and AVX-512 BF16 (bf16). The weights
 * are streamed once from their HF layout; x is prepared per call into ws.
 *
 * int4 (Q4G32 / Q4G64 / Q4PC): a 64-byte load is 4 blocks of 32 nibbles;
 * the low nibbles are elements 0..15 of each block (one 128-bit lane per
 * block), the high nibbles elements 16..31. x is quantized per block and
 * laid out to match (xlo, xhi), so two dpbusd(u8 nibble = q+8, s8 x) give
 * per block 4 int32 partial sums of (q+8) x. Then one cvt and one fma with
 * the per-lane scale ws(block) * xs(block). The +8 is removed exactly, in
 * int32: the accumulator starts from x's own -8 sum(x) per block (prepared
 * with x, in one lane of each block). Rows go in tiles of 16, whose lane
 * sums one transpose-add tree reduces to 16 outputs. At K = 896 the per-row
 * fixed costs these replaced (a float correction dot of the row's group
 * scales and two horizontal sums per row) had cost 25% of the kernel's
 * in-cache speed on Zen 4: B = 1, 1 thread, 4864 x 896 int4g64 went from
 * 30.8 to 37.3 GB/s in L2/L3 (with the chunk loop unrolled by 2), and with
 * 2 threads from DRAM 23.6 -> 26.6 (1152 x 896) and 31.2 -> 35.0 (9728 x 896).
 *
 * int6 (Q6G64) is the same loop over 192-byte superchunks: two 64-byte
 * nibble loads as int4's, then one 64-byte load of their crumbs (the top 2
 * bits of u = q + 32), each chunk half's crumbs moved to bits 4-5 by one
 * shift and merged by one ternlog; the offset to remove is 32.
 *
 * int8 (Q8PC): dpbusd(u8 x + 128, s8 w), minus 128 colsum[n] at the end.
 * bf16: dpbf16ps on pairs, f32 sums. */
#include <string.h>

#include "core/threadpool.h"
#include "engine/cpu/kernels-impl.h"
#include "engine/cpu/vec_avx512.h"

#define AI static inline __attribute__((always_inline))

/* ---- int4 ------------------------------------------------------------------ */

/* x prepared for one 128-element chunk of one row: 128 bytes of int8 (the
 * per-element data), and beside them (xsc) the 4 block scales and the 4
 * blocks' offset corrections, kept compact and expanded to lanes in
 * registers. Re-read from L1 for every weight row: 128 + 32 bytes per 64
 * bytes of weights (a 64-byte lane-expanded correction, 192 + 16, ran B = 8
 * at K = 4864 at 0.94x even in spans: its loads are the bound on Zen 4). */
typedef struct xchunk {
    __m512i lo, hi;   /* int8: lane j = block j elements 0..15 / 16..31 */
} xchunk;

typedef struct xsc {
    float s[4];       /* block scales (0 past the end) */
    int32_t corr[4];  /* -off * sum(x of the block) */
} xsc;

typedef struct q4_ctx {
    const tm_kweight *w;
    const xchunk *x;  /* [nch][B]: the B rows of one chunk are adjacent */
    const xsc *xs;    /* [nch][B] */
    int B, nch, nfull, tail_blocks, ng;
    int span; /* chunks per span (even: int6 superchunks stay whole) */
    float *y;
} q4_ctx;

#ifndef Q4_X_L1
#define Q4_X_L1 32768 /* bytes of x a span may take */
#endif

/* Quantize x per 32-block (the numerics of tm_kref_quant_b32, vectorized:
 * same f32 operations, so the same bytes) straight into the chunk layout.
 * The offset of the weight codes (u8 = q + off) is removed in int32:
 * sum_k q x = dot(u8, x) - off sum(x), the second term per x block, which
 * starts the block's accumulator (exact: |dot| <= 63 * 127 * 32). */
static void q4_prepare(const tm_kact *x, xchunk *xc, xsc *xsa, int nch, int off)
{
    int K = x->K, nb = K / 32;
    for (int b = 0; b < x->M; b++) {
        const float *xr = x->f32 + (size_t)b * K;
        for (int c = 0; c < nch; c++) {
            xchunk *o = xc + (size_t)c * x->M + b;
            int8_t *lo = (int8_t *)&o->lo, *hi = (int8_t *)&o->hi;
            xsc *q = xsa + (size_t)c * x->M + b;
            float *xs = q->s;
            int32_t *corr = q->corr;
            for (int j = 0; j < 4; j++) {
                int blk = 4 * c + j;
                if (blk >= nb) {
                    memset(lo + 16 * j, 0, 16);
                    memset(hi + 16 * j, 0, 16);
                    xs[j] = 0.f;
                    corr[j] = 0;
                    continue;
                }
                __m512 v0 = _mm512_loadu_ps(xr + 32 * blk), v1 = _mm512_loadu_ps(xr + 32 * blk + 16);
                float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
                float inv = amax > 0.f ? 127.f / amax : 0.f;
                __m512i q0 = vf_q8(v0, _mm512_set1_ps(inv)), q1 = vf_q8(v1, _mm512_set1_ps(inv));
                _mm_storeu_si128((__m128i *)(lo + 16 * j), _mm512_cvtepi32_epi8(q0));
                _mm_storeu_si128((__m128i *)(hi + 16 * j), _mm512_cvtepi32_epi8(q1));
                int32_t bsum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
                xs[j] = amax / 127.f;
                corr[j] = -off * bsum;
            }
        }
    }
}

/* Lane scales of chunk c: lanes 4j..4j+3 = (weight scale of block j) * xs[j].
 * G = 32: 4 weight scales, one per block; G = 64: 2, one per block pair;
 * G = 0 (per channel): xs alone (the row scale is applied at the end). The
 * products are formed on 4 floats, then spread to 16 lanes by one permute. */
AI __m512 q4_scale(const uint16_t *ws, const float *xs, int c, int G, __mmask8 m)
{
    __m128 x4 = _mm_loadu_ps(xs), s4;
    if (G == 32) {
        s4 = _mm_mul_ps(x4, _mm_cvtph_ps(_mm_maskz_loadu_epi16(m, ws + 4 * c)));
    } else if (G == 64) {
        __m128 w2 = _mm_cvtph_ps(_mm_maskz_loadu_epi16(m, ws + 2 * c));
        s4 = _mm_mul_ps(x4, _mm_unpacklo_ps(w2, w2));
    } else {
        s4 = x4;
    }
    return _mm512_permutexvar_ps(_mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0),
                                 _mm512_castps128_ps512(s4));
}

/* chunk c of a row: its nibbles wv (a 64-byte load, or fewer bytes masked)
 * split into the blocks' first halves (lo) and second halves (hi), each
 * against x's chunk, scaled per block. For int6, top2lo / top2hi are the
 * chunk's crumbs already in bits 4-5 (garbage elsewhere), merged by one
 * ternlog each. */
AI void q4_chunk(__m512i wv, __m512i top2lo, __m512i top2hi, const uint16_t *ws, const q4_ctx *ctx, int c, int B,
                 int G, const int Q6, __mmask8 sm, __m512 *fs)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i wlo = _mm512_and_si512(wv, m4);
    __m512i whi = _mm512_and_si512(_mm512_srli_epi16(wv, 4), m4);
    if (Q6) {
        const __m512i m30 = _mm512_set1_epi8(0x30);
        wlo = _mm512_ternarylogic_epi32(wlo, top2lo, m30, 0xf8); /* a | (b & c) */
        whi = _mm512_ternarylogic_epi32(whi, top2hi, m30, 0xf8);
    }
    #pragma GCC unroll 8
    for (int b = 0; b < B; b++) {
        const xchunk *xc = ctx->x + (size_t)c * B + b;
        const xsc *q = ctx->xs + (size_t)c * B + b;
        /* the corrections start lanes 0, 5, 10, 15: one lane in each block */
        __m512i acc = _mm512_maskz_broadcast_i32x4(0x8421, _mm_loadu_si128((const __m128i *)q->corr));
        acc = _mm512_dpbusd_epi32(acc, wlo, xc->lo);
        acc = _mm512_dpbusd_epi32(acc, whi, xc->hi);
        __m512 sc = q4_scale(ws, q->s, c, G, sm);
        fs[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), sc, fs[b]);
    }
}

AI __m512i nib_load(const uint8_t *p, __mmask64 bm)
{
    return bm == (__mmask64)-1 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(bm, p);
}

/* int6 chunk c, the A (first) or B (second) chunk of its superchunk at sp,
 * whose crumbs lie cro bytes in: A's top bits are crumb bits 0-1 / 2-3,
 * B's 4-5 / 6-7 (quant/quant.h) */
AI void q6_chunk(const uint8_t *sp, int cro, const int isB, const uint16_t *ws, const q4_ctx *ctx, int c, int B,
                 __mmask64 bm, __mmask8 sm, __m512 *fs)
{
    __m512i cv = _mm512_loadu_si512(sp + cro);
    __m512i tl = isB ? cv : _mm512_slli_epi16(cv, 4), th = isB ? _mm512_srli_epi16(cv, 2) : _mm512_slli_epi16(cv, 2);
    q4_chunk(nib_load(sp + 64 * isB, bm), tl, th, ws, ctx, c, B, 64, 1, sm, fs);
}

/* 16 vectors to their 16 lane sums, by a transpose-add tree (45 shuffles
 * and adds against 16 reductions of ~8 each). Output lane l is the sum of
 * v[4 (l % 4) + l / 4]: callers store row r's vector at that index. */
AI __m512 hsum16(const __m512 *v)
{
    __m512 w[8], u[4];
    #pragma GCC unroll 8
    for (int i = 0; i < 8; i++) /* quarters 0-1: v[2i]'s halves summed, 2-3: v[2i+1]'s */
        w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xee));
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++) /* quarter k: 4 partial sums of v[4i + k] */
        u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0xdd));
    /* per quarter: [u0's partials 0+2, u1's 0+2, u0's 1+3, u1's 1+3] */
    __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(u[0], u[1]), _mm512_unpackhi_ps(u[0], u[1]));
    __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(u[2], u[3]), _mm512_unpackhi_ps(u[2], u[3]));
    /* lane 4k + t: the total of u[t]'s quarter k, i.e. of v[4t + k] */
    return _mm512_add_ps(_mm512_shuffle_ps(s01, s23, 0x44), _mm512_shuffle_ps(s01, s23, 0xee));
}

/* One weight row against B rows of x, its lane sums into fs[B] (the tile
 * reduces them). The weights stream once; int4
 * prefetches Q4_PREFETCH bytes ahead into L1 and Q4_PREFETCH_L2 ahead into L2
 * (rows are contiguous, so this runs into the next row; prefetches never
 * fault). On an SPR-class core, 2 threads, B = 1 went from 15-16 GB/s (none)
 * to 22 GB/s (2 KB ahead into L1). On Zen 4 (27 GB/s read per core) the L1
 * prefetch alone gave 16-19 GB/s on one core, 26-29 on two: the loop was
 * waiting on memory, not computing; adding 8 KB ahead into L2 gave 24 and
 * 33-35 GB/s (4 KB: 19; 12-16 KB: 23-24). Interleaving rows lost. */
#ifndef Q4_PREFETCH
#define Q4_PREFETCH 2048
#endif
#ifndef Q4_PREFETCH_L2
#define Q4_PREFETCH_L2 8192
#endif

AI void q4_row(const q4_ctx *c, int n, int s0, int s1, const int B, const int G, const int Q6, __m512 *fs)
{
    const tm_kweight *w = c->w;
    const uint8_t *wp = (const uint8_t *)w->data + (size_t)n * w->row_bytes;
    const uint16_t *ws = (const uint16_t *)w->scales + (size_t)n * c->ng; /* f16 [ng] */
    int cc = s0, last = s1 == c->nch;
    const __mmask8 full_sm = G == 32 ? 0xf : 0x3; /* weight scales per chunk: 4 (G32) or 2 (G64) */
    const __m512i z = _mm512_setzero_si512();
    const __mmask64 all = (__mmask64)-1, tbm = ((__mmask64)1 << (16 * c->tail_blocks)) - 1;
    const __mmask8 tsm = (__mmask8)((1u << (G == 32 ? c->tail_blocks : c->tail_blocks / 2)) - 1);
    if (Q6) { /* superchunks of 2 chunks: 192 bytes, crumbs 128 in; the tail's t/2 in */
        const int K = w->K, nsup = K / 256, tcro = (K % 256) / 2;
        for (int s = s0 / 2, se = s1 / 2 < nsup ? s1 / 2 : nsup; s < se; s++, cc += 2) {
            const uint8_t *sp = wp + 192 * s;
            for (int l = 0; l < 3; l++) {
                _mm_prefetch((const char *)sp + 64 * l + Q4_PREFETCH, _MM_HINT_T0);
                _mm_prefetch((const char *)sp + 64 * l + Q4_PREFETCH_L2, _MM_HINT_T1);
            }
            q6_chunk(sp, 128, 0, ws, c, cc, B, all, full_sm, fs);
            q6_chunk(sp, 128, 1, ws, c, cc + 1, B, all, full_sm, fs);
        }
        if (!last) return;
        const uint8_t *sp = wp + 192 * nsup;
        for (size_t l = 192 * (size_t)nsup; l < w->row_bytes; l += 64) { /* the tail's lines (K = 896: 2 of 11) */
            _mm_prefetch((const char *)wp + l + Q4_PREFETCH, _MM_HINT_T0);
            _mm_prefetch((const char *)wp + l + Q4_PREFETCH_L2, _MM_HINT_T1);
        }
        if (cc < c->nfull) q6_chunk(sp, tcro, 0, ws, c, cc++, B, all, full_sm, fs);   /* t = 128, 192 */
        if (c->tail_blocks) q6_chunk(sp, tcro, cc % 2, ws, c, cc, B, tbm, tsm, fs); /* t = 64 (A), 192 (B) */
    } else {
        #pragma GCC unroll 2 /* Zen 4, B = 1, K = 896: 1.06x */
        for (int ce = s1 < c->nfull ? s1 : c->nfull; cc < ce; cc++) {
            _mm_prefetch((const char *)wp + 64 * cc + Q4_PREFETCH, _MM_HINT_T0);
            _mm_prefetch((const char *)wp + 64 * cc + Q4_PREFETCH_L2, _MM_HINT_T1);
            q4_chunk(nib_load(wp + 64 * cc, all), z, z, ws, c, cc, B, G, 0, full_sm, fs);
        }
        if (last && c->tail_blocks) q4_chunk(nib_load(wp + 64 * cc, tbm), z, z, ws, c, cc, B, G, 0, tsm, fs);
    }
}

/* rows [n0, n1) in tiles of 16: each row's lane sums kept, then reduced
 * together (hsum16) and stored as 16 outputs per x row. Where x is larger
 * than Q4_X_L1 (B rows of a long K), a tile goes span by span of chunks, its
 * 16 rows' sums carried in red, so that x's span stays in L1. On the dev
 * box's EPYC, B = 8, 896 x 4864: no spans (x 48.6 KB) 6.9 GB/s, spans of
 * 16 KB of x 8.9, of 32 KB 9.5. */
AI void q4_rows_t(const q4_ctx *c, int n0, int n1, const int B, const int G, const int Q6)
{
    const tm_kweight *w = c->w;
    for (int n = n0; n < n1; n += 16) {
        int nr = n1 - n < 16 ? n1 - n : 16;
        __m512 red[TM_KGEMV_MAX_B][16]; /* [b][4 (r % 4) + r / 4]: row r's lane sums, hsum16's order */
        for (int s0 = 0; s0 < c->nch; s0 += c->span) {
            int s1 = c->nch - s0 < c->span ? c->nch : s0 + c->span;
            for (int r = 0; r < 16; r++) {
                __m512 fs[TM_KGEMV_MAX_B];
                #pragma GCC unroll 8
                for (int b = 0; b < B; b++) fs[b] = s0 ? red[b][4 * (r % 4) + r / 4] : _mm512_setzero_ps();
                if (r < nr) q4_row(c, n + r, s0, s1, B, G, Q6, fs);
                #pragma GCC unroll 8
                for (int b = 0; b < B; b++) red[b][4 * (r % 4) + r / 4] = fs[b];
            }
        }
        __mmask16 m = (__mmask16)((1u << nr) - 1);
        #pragma GCC unroll 8
        for (int b = 0; b < B; b++) {
            __m512 v = hsum16(red[b]);
            if (!G) /* per channel: the rows' scales, one f16 each */
                v = _mm512_mul_ps(v, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)w->scales + n)));
            _mm512_mask_storeu_ps(c->y + (size_t)b * w->N + n, m, v);
        }
    }
}

#define Q4_CASE_B(G_, Q6_)                                                \
    switch (c->B) {                                                       \
    case 1: q4_rows_t(c, n0, n1, 1, G_, Q6_); break;                      \
    case 2: q4_rows_t(c, n0, n1, 2, G_, Q6_); break;                      \
    case 3: q4_rows_t(c, n0, n1, 3, G_, Q6_); break;                      \
    case 4: q4_rows_t(c, n0, n1, 4, G_, Q6_); break;                      \
    case 5: q4_rows_t(c, n0, n1, 5, G_, Q6_); break;                      \
    case 6: q4_rows_t(c, n0, n1, 6, G_, Q6_); break;                      \
    case 7: q4_rows_t(c, n0, n1, 7, G_, Q6_); break;                      \
    default: q4_rows_t(c, n0, n1, 8, G_, Q6_); break;                     \
    }

static void q4_rows(void *ctx, int n0, int n1, int worker)
{
    (void)worker;
    const q4_ctx *c = ctx;
    switch (c->w->dtype) {
    case TM_DT_Q4G32: Q4_CASE_B(32, 0) break;
    case TM_DT_Q4G64: Q4_CASE_B(64, 0) break;
    case TM_DT_Q6G64: Q4_CASE_B(64, 1) break;
    default: Q4_CASE_B(0, 0) break;
    }
}

static int gemv_q4(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    if (tm_kcheck_gemv(w, x, 4)) return TM_E_INVALID;
    int K = w->K, nch = (K + 127) / 128, G = w->dtype == TM_DT_Q4PC ? 0 : w->G;
    int ng = G ? K / G : 1;
    size_t nx = (size_t)x->M * nch;
    size_t bytes_x = nx * sizeof(xchunk), bytes_s = nx * sizeof(xsc);
    if (tm_kbuf_reserve(ws, bytes_x + bytes_s + 64)) return TM_E_NOMEM;
    xchunk *xc = tm_kbuf_at(ws, 0);
    xsc *xs = tm_kbuf_at(ws, bytes_x);
    q4_prepare(x, xc, xs, nch, w->dtype == TM_DT_Q6G64 ? 32 : 8);
    /* spans of equal length (even), each's x at most Q4_X_L1 bytes where it can be */
    int most = Q4_X_L1 / (x->M * (int)(sizeof(xchunk) + sizeof(xsc)));
    int nspan = (nch + most - 1) / (most > 2 ? most : 2), span = ((nch + nspan - 1) / nspan + 1) & ~1;
    q4_ctx c = {w, xc, xs, x->M, nch, K / 128, (K % 128) / 32, ng, span, y};
    tm_kgemv_run(w->N, 16, w->row_bytes, q4_rows, &c, pool); /* tasks in whole tiles */
    return TM_OK;
}

/* ---- int8 ------------------------------------------------------------------ */

/* rows interleaved per chunk: R independent weight streams in flight (more
 * memory-level parallelism than one row at a time), R * B <= 8 accumulators.
 * Measured on an SPR-class core: +10-70% for int8 and bf16. */
#define ROWS_FOR(B) ((B) <= 2 ? 4 : (B) <= 4 ? 2 : 1)

typedef struct q8_ctx {
    const tm_kweight *w;
    const uint8_t *xq; /* [B][ld] offset-binary */
    const float *xs;   /* [B] */
    int B, ld;
    float *y;
} q8_ctx;

/* int32 lanes stay exact for 2^19 elements (each lane adds 4 products of
 * at most 255 * 128 per 64 elements); longer rows flush to double. */
#define Q8_SEG 8192 /* chunks of 64 */

AI void q8_group(const q8_ctx *c, int n, const int R, const int B)
{
    const tm_kweight *w = c->w;
    int K = w->K, nfull = K / 64, tail = K % 64;
    const int8_t *wp[4];
    double tot[4][TM_KGEMV_MAX_B];
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        wp[r] = (const int8_t *)w->data + (size_t)(n + r) * w->row_bytes;
        #pragma GCC unroll 8
        for (int b = 0; b < B; b++) tot[r][b] = 0;
    }
    for (int s0 = 0;;) {
        __m512i acc[4][TM_KGEMV_MAX_B];
        #pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            #pragma GCC unroll 8
            for (int b = 0; b < B; b++) acc[r][b] = _mm512_setzero_si512();
        }
        int s1 = s0 + Q8_SEG < nfull ? s0 + Q8_SEG : nfull;
        for (int ch = s0; ch < s1; ch++) {
            __m512i wv[4];
            #pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                _mm_prefetch((const char *)wp[r] + 64 * ch + Q4_PREFETCH, _MM_HINT_T0);
                _mm_prefetch((const char *)wp[r] + 64 * ch + Q4_PREFETCH_L2, _MM_HINT_T1);
                wv[r] = _mm512_loadu_si512(wp[r] + 64 * ch);
            }
            #pragma GCC unroll 8
            for (int b = 0; b < B; b++) {
                __m512i xv = _mm512_loadu_si512(c->xq + (size_t)b * c->ld + 64 * ch);
                #pragma GCC unroll 4
                for (int r = 0; r < R; r++) acc[r][b] = _mm512_dpbusd_epi32(acc[r][b], xv, wv[r]);
            }
        }
        int last = s1 == nfull;
        if (last && tail) {
            #pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                __m512i wv = _mm512_maskz_loadu_epi8(((__mmask64)1 << tail) - 1, wp[r] + 64 * nfull);
                #pragma GCC unroll 8
                for (int b = 0; b < B; b++)
                    acc[r][b] = _mm512_dpbusd_epi32(acc[r][b], _mm512_loadu_si512(c->xq + (size_t)b * c->ld + 64 * nfull), wv);
            }
        }
        #pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            #pragma GCC unroll 8
            for (int b = 0; b < B; b++) tot[r][b] += (double)_mm512_reduce_add_epi32(acc[r][b]);
        }
        if (last) break;
        s0 = s1;
    }
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        #pragma GCC unroll 8
        for (int b = 0; b < B; b++)
            c->y[(size_t)b * w->N + n + r] =
                (float)((tot[r][b] - 128.0 * w->colsum[n + r]) * ((double)((const float *)w->scales)[n + r] * c->xs[b]));
    }
}

AI void q8_rows_t(const q8_ctx *c, int n0, int n1, const int B)
{
    const int R = ROWS_FOR(B);
    int n = n0;
    for (; n + R <= n1; n += R) q8_group(c, n, R, B);
    for (; n < n1; n++) q8_group(c, n, 1, B);
}

static void q8_rows(void *ctx, int n0, int n1, int worker)
{
    (void)worker;
    const q8_ctx *c = ctx;
    switch (c->B) {
    case 1: q8_rows_t(c, n0, n1, 1); break;
    case 2: q8_rows_t(c, n0, n1, 2); break;
    case 3: q8_rows_t(c, n0, n1, 3); break;
    case 4: q8_rows_t(c, n0, n1, 4); break;
    case 5: q8_rows_t(c, n0, n1, 5); break;
    case 6: q8_rows_t(c, n0, n1, 6); break;
    case 7: q8_rows_t(c, n0, n1, 7); break;
    default: q8_rows_t(c, n0, n1, 8); break;
    }
}

static int gemv_q8(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    if (tm_kcheck_gemv(w, x, TM_DT_Q8PC)) return TM_E_INVALID;
    if (tm_kbuf_reserve(ws, tm_kact_need_q8(x) + 64)) return TM_E_NOMEM;
    const float *xs;
    const uint8_t *xq = tm_kact_get_q8(x, ws, 0, tm_kavx512_quant_q8, &xs, NULL);
    q8_ctx c = {w, xq, xs, x->M, tm_kact_ld(x->K), y};
    tm_kgemv_run(w->N, 1, w->row_bytes, q8_rows, &c, pool);
    return TM_OK;
}

/* ---- bf16 ------------------------------------------------------------------ */

typedef struct bf_ctx {
    const tm_kweight *w;
    const uint16_t *xb; /* [B][ld] */
    int B, ld;
    float *y;
} bf_ctx;

AI void bf_group(const bf_ctx *c, int n, const int R, const int B)
{
    const tm_kweight *w = c->w;
    int K = w->K, nfull = K / 32, tail = K % 32;
    const uint16_t *wp[4];
    __m512 acc[4][TM_KGEMV_MAX_B];
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        wp[r] = (const uint16_t *)w->data + (size_t)(n + r) * K;
        #pragma GCC unroll 8
        for (int b = 0; b < B; b++) acc[r][b] = _mm512_setzero_ps();
    }
    for (int ch = 0; ch < nfull; ch++) {
        __m512bh wv[4];
        #pragma GCC unroll 4
        for (int r = 0; r < R; r++) wv[r] = (__m512bh)_mm512_loadu_si512(wp[r] + 32 * ch);
        #pragma GCC unroll 8
        for (int b = 0; b < B; b++) {
            __m512bh xv = (__m512bh)_mm512_loadu_si512(c->xb + (size_t)b * c->ld + 32 * ch);
            #pragma GCC unroll 4
            for (int r = 0; r < R; r++) acc[r][b] = _mm512_dpbf16_ps(acc[r][b], xv, wv[r]);
        }
    }
    if (tail) {
        #pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(((__mmask32)1 << tail) - 1, wp[r] + 32 * nfull);
            #pragma GCC unroll 8
            for (int b = 0; b < B; b++)
                acc[r][b] = _mm512_dpbf16_ps(acc[r][b], (__m512bh)_mm512_loadu_si512(c->xb + (size_t)b * c->ld + 32 * nfull), wv);
        }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        #pragma GCC unroll 8
        for (int b = 0; b < B; b++) c->y[(size_t)b * w->N + n + r] = _mm512_reduce_add_ps(acc[r][b]);
    }
}

AI void bf_rows_t(const bf_ctx *c, int n0, int n1, const int B)
{
    const int R = ROWS_FOR(B);
    int n = n0;
    for (; n + R <= n1; n += R) bf_group(c, n, R, B);
    for (; n < n1; n++) bf_group(c, n, 1, B);
}

static void bf_rows(void *ctx, int n0, int n1, int worker)
{
    (void)worker;
    const bf_ctx *c = ctx;
    switch (c->B) {
    case 1: bf_rows_t(c, n0, n1, 1); break;
    case 2: bf_rows_t(c, n0, n1, 2); break;
    case 3: bf_rows_t(c, n0, n1, 3); break;
    case 4: bf_rows_t(c, n0, n1, 4); break;
    case 5: bf_rows_t(c, n0, n1, 5); break;
    case 6: bf_rows_t(c, n0, n1, 6); break;
    case 7: bf_rows_t(c, n0, n1, 7); break;
    default: bf_rows_t(c, n0, n1, 8); break;
    }
}

static int gemv_bf16(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    if (tm_kcheck_gemv(w, x, TM_DT_BF16)) return TM_E_INVALID;
    if (tm_kbuf_reserve(ws, tm_kact_need_bf16(x) + 64)) return TM_E_NOMEM;
    const uint16_t *xb = tm_kact_get_bf16(x, ws, 0, tm_kavx512_f32_to_bf16, NULL);
    bf_ctx c = {w, xb, x->M, tm_kact_ld(x->K), y};
    tm_kgemv_run(w->N, 1, w->row_bytes, bf_rows, &c, pool);
    return TM_OK;
}

void tm_kmm_fill_avx512(tm_kernels *k)
{
    k->gemv_q4 = gemv_q4;
    k->gemv_q8 = gemv_q8;
    k->gemv_bf16 = gemv_bf16;
    tm_kgemm_fill_avx512(k);
}
