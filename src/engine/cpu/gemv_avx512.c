/* engine/cpu/gemv_avx512.c: decode GEMV, y[B][N] = x[B][K] . W[N][K]^T for
 * B = 1..8, AVX-512 VNNI (int4, int8) and AVX-512 BF16 (bf16). The weights
 * are streamed once, int8 and bf16 in their HF layout, int4 and int6 in the
 * GEMV layout they were repacked to at bind (kernels-impl.h); x is prepared
 * per call into ws.
 *
 * int4 and int6 (Q4G32 / Q4G64 / Q4PC / Q6G64): gemv_q4.inc, included
 * here (high nibbles by a shift and an and) and built again by gemv_gfni.c
 * (by one GFNI affine), tm_kmm_fill_avx512 picking by CPUID.
 *
 * int8 (Q8PC): dpbusd(u8 x + 128, s8 w), minus 128 colsum[n] at the end.
 * bf16: dpbf16ps on pairs, f32 sums. */
#include <stddef.h>
#include <string.h>

#include "core/cpu.h"
#include "core/threadpool.h"
#include "engine/cpu/kernels-impl.h"
#include "engine/cpu/vec_avx512.h"

#define AI static inline __attribute__((always_inline))

/* ---- int4, int6: gemv_q4.inc ------------------------------------------------ */

#define Q4_GEMV_NAME tm_kgemv_q4_avx512
#include "engine/cpu/gemv_q4.inc"

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
    k->gemv_q4 = tm_cpu_get()->gfni ? tm_kgemv_q4_avx512_gfni : tm_kgemv_q4_avx512;
    k->gemv_q8 = gemv_q8;
    k->gemv_bf16 = gemv_bf16;
    tm_kgemm_fill_avx512(k);
}
