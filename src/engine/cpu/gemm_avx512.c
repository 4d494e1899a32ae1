/* engine/cpu/gemm_avx512.c: prefill GEMM, y[M][N] = x[M][K] . W[N][K]^T on
 * the panel layouts of kernels-impl.h, AVX-512 BF16 (dpbf16ps) and AVX-512
 * VNNI (dpbusd, W8A8).
 *
 * Blocking: a task is MB rows x some 32-column panels (tm_kgemm_run). Inside
 * it, K is cut into KC slices so a panel slice (32 x KC) and the rows' x
 * slice stay in L1/L2 while the micro-kernel sweeps the rows MR at a time.
 * Micro-kernel: MR rows x 32 columns = 2*MR zmm accumulators; per k-pair
 * (k-quad) two panel loads and MR broadcasts of x. Partial sums across K
 * slices live in y (f32 for bf16; int32 bit patterns for int8 until the last
 * slice applies colsum and the scales). */
#include <string.h>

#include "engine/cpu/kernels-impl.h"

#include <immintrin.h>

#define AI static inline __attribute__((always_inline))
#define MR 8
#define MB 64
#define KC_BF16 512  /* k elements per slice: panel slice 32 KB */
#define KC_Q8 1024   /* 32 KB */

typedef struct gemm_ctx {
    const tm_kweight *w;
    const void *x;      /* bf16 or offset-binary u8 [M][ld] */
    const float *xs;    /* int8: [M] row scales */
    int ld, M, N;
    float *y;           /* [M][N] */
} gemm_ctx;

AI __mmask16 col_mask(int ncols, int half)
{
    int c = ncols - 16 * half;
    return c >= 16 ? (__mmask16)0xffff : c <= 0 ? (__mmask16)0 : (__mmask16)((1u << c) - 1);
}

AI int32_t pair_at(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* ---- bf16 ------------------------------------------------------------------ */

AI void uk_bf16(const uint16_t *A, int lda, const uint16_t *Bp, int npairs, float *C, int ldc, int ncols,
                int first, const int mr)
{
    __m512 acc[MR][2];
    __mmask16 k0 = col_mask(ncols, 0), k1 = col_mask(ncols, 1);
    #pragma GCC unroll 8
    for (int i = 0; i < mr; i++) {
        acc[i][0] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(k0, C + (size_t)i * ldc);
        acc[i][1] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(k1, C + (size_t)i * ldc + 16);
    }
    for (int r = 0; r < npairs; r++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(Bp + (size_t)r * 64);
        __m512bh b1 = (__m512bh)_mm512_loadu_si512(Bp + (size_t)r * 64 + 32);
        #pragma GCC unroll 8
        for (int i = 0; i < mr; i++) {
            __m512bh a = (__m512bh)_mm512_set1_epi32(pair_at(A + (size_t)i * lda + 2 * r));
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], a, b0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], a, b1);
        }
    }
    #pragma GCC unroll 8
    for (int i = 0; i < mr; i++) {
        _mm512_mask_storeu_ps(C + (size_t)i * ldc, k0, acc[i][0]);
        _mm512_mask_storeu_ps(C + (size_t)i * ldc + 16, k1, acc[i][1]);
    }
}

static void bf16_block(void *ctx, int m0, int m1, int p0, int p1, int worker)
{
    (void)worker;
    const gemm_ctx *g = ctx;
    const tm_kweight *w = g->w;
    const uint16_t *X = g->x;
    for (int k0 = 0; k0 < w->Kp; k0 += KC_BF16) {
        int k1 = k0 + KC_BF16 < w->Kp ? k0 + KC_BF16 : w->Kp, first = k0 == 0;
        for (int p = p0; p < p1; p++) {
            const uint16_t *Bp = (const uint16_t *)w->panel + (size_t)p * w->Kp * 32 + (size_t)k0 * 32;
            int n0 = 32 * p, nc = g->N - n0;
            for (int m = m0; m < m1; m += MR) {
                const uint16_t *A = X + (size_t)m * g->ld + k0;
                float *C = g->y + (size_t)m * g->N + n0;
                int np = (k1 - k0) / 2;
                switch (m1 - m < MR ? m1 - m : MR) {
                case 1: uk_bf16(A, g->ld, Bp, np, C, g->N, nc, first, 1); break;
                case 2: uk_bf16(A, g->ld, Bp, np, C, g->N, nc, first, 2); break;
                case 3: uk_bf16(A, g->ld, Bp, np, C, g->N, nc, first, 3); break;
                case 4: uk_bf16(A, g->ld, Bp, np, C, g->N, nc, first, 4); break;
                case 5: uk_bf16(A, g->ld, Bp, np, C, g->N, nc, first, 5); break;
                case 6: uk_bf16(A, g->ld, Bp, np, C, g->N, nc, first, 6); break;
                case 7: uk_bf16(A, g->ld, Bp, np, C, g->N, nc, first, 7); break;
                default: uk_bf16(A, g->ld, Bp, np, C, g->N, nc, first, 8); break;
                }
            }
        }
    }
}

static int gemm_bf16(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    if (tm_kcheck_gemm(w, x, TM_DT_BF16)) return TM_E_INVALID;
    if (tm_kbuf_reserve(ws, tm_kact_need_bf16(x) + 64)) return TM_E_NOMEM;
    const uint16_t *xb = tm_kact_get_bf16(x, ws, 0, tm_kavx512_f32_to_bf16);
    gemm_ctx g = {w, xb, NULL, tm_kact_ld(x->K), x->M, w->N, y};
    tm_kgemm_run(x->M, w->Np, MB, bf16_block, &g, pool);
    return TM_OK;
}

/* ---- int8 (W8A8) ------------------------------------------------------------ */

AI void uk_q8(const uint8_t *A, int lda, const int8_t *Bp, int nquads, float *C, int ldc, int ncols, int first,
              int last, const float *xs, const int32_t *colsum, const float *wscale, const int mr)
{
    __m512i acc[MR][2];
    __mmask16 k0 = col_mask(ncols, 0), k1 = col_mask(ncols, 1);
    #pragma GCC unroll 8
    for (int i = 0; i < mr; i++) {
        acc[i][0] = first ? _mm512_setzero_si512() : _mm512_maskz_loadu_epi32(k0, C + (size_t)i * ldc);
        acc[i][1] = first ? _mm512_setzero_si512() : _mm512_maskz_loadu_epi32(k1, C + (size_t)i * ldc + 16);
    }
    for (int r = 0; r < nquads; r++) {
        __m512i b0 = _mm512_loadu_si512(Bp + (size_t)r * 128);
        __m512i b1 = _mm512_loadu_si512(Bp + (size_t)r * 128 + 64);
        #pragma GCC unroll 8
        for (int i = 0; i < mr; i++) {
            __m512i a = _mm512_set1_epi32(pair_at(A + (size_t)i * lda + 4 * r));
            acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], a, b0);
            acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], a, b1);
        }
    }
    if (!last) {
        #pragma GCC unroll 8
        for (int i = 0; i < mr; i++) {
            _mm512_mask_storeu_epi32(C + (size_t)i * ldc, k0, acc[i][0]);
            _mm512_mask_storeu_epi32(C + (size_t)i * ldc + 16, k1, acc[i][1]);
        }
        return;
    }
    __m512i c0 = _mm512_slli_epi32(_mm512_loadu_si512(colsum), 7), c1 = _mm512_slli_epi32(_mm512_loadu_si512(colsum + 16), 7);
    __m512 s0 = _mm512_loadu_ps(wscale), s1 = _mm512_loadu_ps(wscale + 16);
    #pragma GCC unroll 8
    for (int i = 0; i < mr; i++) {
        __m512 xsi = _mm512_set1_ps(xs[i]);
        __m512 v0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i][0], c0)), _mm512_mul_ps(s0, xsi));
        __m512 v1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i][1], c1)), _mm512_mul_ps(s1, xsi));
        _mm512_mask_storeu_ps(C + (size_t)i * ldc, k0, v0);
        _mm512_mask_storeu_ps(C + (size_t)i * ldc + 16, k1, v1);
    }
}

static void q8_block(void *ctx, int m0, int m1, int p0, int p1, int worker)
{
    (void)worker;
    const gemm_ctx *g = ctx;
    const tm_kweight *w = g->w;
    const uint8_t *X = g->x;
    for (int k0 = 0; k0 < w->Kp; k0 += KC_Q8) {
        int k1 = k0 + KC_Q8 < w->Kp ? k0 + KC_Q8 : w->Kp, first = k0 == 0, last = k1 == w->Kp;
        for (int p = p0; p < p1; p++) {
            const int8_t *Bp = (const int8_t *)w->panel + (size_t)p * w->Kp * 32 + (size_t)k0 * 32;
            int n0 = 32 * p, nc = g->N - n0, nq = (k1 - k0) / 4;
            const int32_t *cs = w->colsum + n0;
            const float *sc = w->pscale + n0;
            for (int m = m0; m < m1; m += MR) {
                const uint8_t *A = X + (size_t)m * g->ld + k0;
                float *C = g->y + (size_t)m * g->N + n0;
                const float *xs = g->xs + m;
                switch (m1 - m < MR ? m1 - m : MR) {
                case 1: uk_q8(A, g->ld, Bp, nq, C, g->N, nc, first, last, xs, cs, sc, 1); break;
                case 2: uk_q8(A, g->ld, Bp, nq, C, g->N, nc, first, last, xs, cs, sc, 2); break;
                case 3: uk_q8(A, g->ld, Bp, nq, C, g->N, nc, first, last, xs, cs, sc, 3); break;
                case 4: uk_q8(A, g->ld, Bp, nq, C, g->N, nc, first, last, xs, cs, sc, 4); break;
                case 5: uk_q8(A, g->ld, Bp, nq, C, g->N, nc, first, last, xs, cs, sc, 5); break;
                case 6: uk_q8(A, g->ld, Bp, nq, C, g->N, nc, first, last, xs, cs, sc, 6); break;
                case 7: uk_q8(A, g->ld, Bp, nq, C, g->N, nc, first, last, xs, cs, sc, 7); break;
                default: uk_q8(A, g->ld, Bp, nq, C, g->N, nc, first, last, xs, cs, sc, 8); break;
                }
            }
        }
    }
}

static int gemm_q8(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    if (tm_kcheck_gemm(w, x, TM_DT_Q8PC)) return TM_E_INVALID;
    if (tm_kbuf_reserve(ws, tm_kact_need_q8(x) + 64)) return TM_E_NOMEM;
    const float *xs;
    const uint8_t *xq = tm_kact_get_q8(x, ws, 0, tm_kavx512_quant_q8, &xs);
    gemm_ctx g = {w, xq, xs, tm_kact_ld(x->K), x->M, w->N, y};
    tm_kgemm_run(x->M, w->Np, MB, q8_block, &g, pool);
    return TM_OK;
}

void tm_kgemm_fill_avx512(tm_kernels *k)
{
    k->gemm_bf16 = gemm_bf16;
    k->gemm_q8 = gemm_q8;
}
