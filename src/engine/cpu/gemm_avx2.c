/* engine/cpu/gemm_avx2.c: prefill GEMM for AVX2 + FMA on the same panels as
 * AVX-512 and AMX (kernels-impl.h). Micro-kernel: 4 rows x 16 columns (half
 * a panel), 8 ymm accumulators.
 *  bf16: a k-pair row of a half panel is 2 ymm of (column, k, k+1) pairs;
 *        even k = pair << 16, odd k = pair & 0xffff0000, two FMAs each, x
 *        broadcast from an f32 copy of its bf16 rounding.
 *  int8: a k-quad row is 2 ymm of (column, 4 k); maddubs(|w|, sign(x4, w))
 *        + madd(1), with x back to s8; int32 partials live in y between K
 *        slices, the last slice applies the scales. */
#include <string.h>

#include "engine/cpu/kernels-impl.h"

#include <immintrin.h>

#define AI static inline __attribute__((always_inline))
#define MR 4
#define MB 64
#ifndef KC
#define KC 2048 /* k per slice; each later slice reloads C from y. Session 7, Zen 4, 2 threads, 512 x 2048^2:
                   KC 512 -> 2048 int8 217 -> 257, bf16 159 -> 184 GFLOP/s (8192: no better) */
#endif

typedef struct gemm_ctx {
    const tm_kweight *w;
    const void *x;      /* bf16 path: f32 [M][ld]; int8 path: s8 [M][ld] */
    const float *xs;
    int ld, M, N;
    float *y;
} gemm_ctx;

/* store/load up to 16 columns of one C row */
AI void st16(float *c, __m256 v0, __m256 v1, int nc)
{
    if (nc >= 16) {
        _mm256_storeu_ps(c, v0);
        _mm256_storeu_ps(c + 8, v1);
    } else {
        float t[16];
        _mm256_storeu_ps(t, v0);
        _mm256_storeu_ps(t + 8, v1);
        memcpy(c, t, sizeof(float) * (size_t)(nc > 0 ? nc : 0));
    }
}

AI void ld16(const float *c, __m256 *v0, __m256 *v1, int nc)
{
    float t[16] = {0};
    memcpy(t, c, sizeof(float) * (size_t)(nc >= 16 ? 16 : nc > 0 ? nc : 0));
    *v0 = _mm256_loadu_ps(t);
    *v1 = _mm256_loadu_ps(t + 8);
}

/* ---- bf16 ------------------------------------------------------------------ */

AI void uk_bf16(const float *A, int lda, const uint16_t *Bp, int npairs, float *C, int ldc, int nc, int first,
                const int mr)
{
    __m256 acc[MR][2];
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    #pragma GCC unroll 8
    for (int i = 0; i < mr; i++) {
        if (first) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
        else ld16(C + (size_t)i * ldc, &acc[i][0], &acc[i][1], nc);
    }
    for (int r = 0; r < npairs; r++) {
        __m256i v0 = _mm256_loadu_si256((const __m256i *)(Bp + (size_t)r * 64));
        __m256i v1 = _mm256_loadu_si256((const __m256i *)(Bp + (size_t)r * 64 + 16));
        __m256 e0 = _mm256_castsi256_ps(_mm256_slli_epi32(v0, 16)), o0 = _mm256_castsi256_ps(_mm256_and_si256(v0, hi));
        __m256 e1 = _mm256_castsi256_ps(_mm256_slli_epi32(v1, 16)), o1 = _mm256_castsi256_ps(_mm256_and_si256(v1, hi));
        #pragma GCC unroll 8
        for (int i = 0; i < mr; i++) {
            __m256 ae = _mm256_broadcast_ss(A + (size_t)i * lda + 2 * r);
            __m256 ao = _mm256_broadcast_ss(A + (size_t)i * lda + 2 * r + 1);
            acc[i][0] = _mm256_fmadd_ps(ao, o0, _mm256_fmadd_ps(ae, e0, acc[i][0]));
            acc[i][1] = _mm256_fmadd_ps(ao, o1, _mm256_fmadd_ps(ae, e1, acc[i][1]));
        }
    }
    #pragma GCC unroll 8
    for (int i = 0; i < mr; i++) st16(C + (size_t)i * ldc, acc[i][0], acc[i][1], nc);
}

static void bf16_block(void *ctx, int m0, int m1, int p0, int p1, int worker)
{
    (void)worker;
    const gemm_ctx *g = ctx;
    const tm_kweight *w = g->w;
    for (int k0 = 0; k0 < w->Kp; k0 += KC) {
        int k1 = k0 + KC < w->Kp ? k0 + KC : w->Kp, first = k0 == 0, np = (k1 - k0) / 2;
        for (int p = p0; p < p1; p++)
            for (int h = 0; h < 2; h++) {
                const uint16_t *Bp = (const uint16_t *)w->panel + (size_t)p * w->Kp * 32 + (size_t)k0 * 32 + 32 * h;
                int n0 = 32 * p + 16 * h, nc = g->N - n0;
                if (nc <= 0) break;
                for (int m = m0; m < m1; m += MR) {
                    const float *A = (const float *)g->x + (size_t)m * g->ld + k0;
                    float *C = g->y + (size_t)m * g->N + n0;
                    switch (m1 - m < MR ? m1 - m : MR) {
                    case 1: uk_bf16(A, g->ld, Bp, np, C, g->N, nc, first, 1); break;
                    case 2: uk_bf16(A, g->ld, Bp, np, C, g->N, nc, first, 2); break;
                    case 3: uk_bf16(A, g->ld, Bp, np, C, g->N, nc, first, 3); break;
                    default: uk_bf16(A, g->ld, Bp, np, C, g->N, nc, first, 4); break;
                    }
                }
            }
    }
}

static int gemm_bf16(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    if (tm_kcheck_gemm(w, x, TM_DT_BF16)) return TM_E_INVALID;
    int ld;
    float *xf = tm_kact_bf16_widened(x, ws, tm_kavx2_f32_to_bf16, &ld);
    if (!xf) return TM_E_NOMEM;
    gemm_ctx g = {w, xf, NULL, ld, x->M, w->N, y};
    tm_kgemm_run(x->M, w->Np, MB, bf16_block, &g, pool);
    return TM_OK;
}

/* ---- int8 (W8A8) ------------------------------------------------------------ */

AI __m256i dot_i8(__m256i u8, __m256i s8)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u8, s8), _mm256_set1_epi16(1));
}

AI void uk_q8(const int8_t *A, int lda, const int8_t *Bp, int nquads, float *C, int ldc, int nc, int first, int last,
              const float *xs, const float *wscale, const int mr)
{
    __m256i acc[MR][2];
    #pragma GCC unroll 8
    for (int i = 0; i < mr; i++) {
        if (first) {
            acc[i][0] = acc[i][1] = _mm256_setzero_si256();
        } else {
            __m256 a0, a1;
            ld16(C + (size_t)i * ldc, &a0, &a1, nc);
            acc[i][0] = _mm256_castps_si256(a0);
            acc[i][1] = _mm256_castps_si256(a1);
        }
    }
    for (int r = 0; r < nquads; r++) {
        __m256i w0 = _mm256_loadu_si256((const __m256i *)(Bp + (size_t)r * 128));
        __m256i w1 = _mm256_loadu_si256((const __m256i *)(Bp + (size_t)r * 128 + 32));
        __m256i a0 = _mm256_abs_epi8(w0), a1 = _mm256_abs_epi8(w1);
        #pragma GCC unroll 8
        for (int i = 0; i < mr; i++) {
            int32_t q4;
            memcpy(&q4, A + (size_t)i * lda + 4 * r, 4);
            __m256i xv = _mm256_set1_epi32(q4);
            acc[i][0] = _mm256_add_epi32(acc[i][0], dot_i8(a0, _mm256_sign_epi8(xv, w0)));
            acc[i][1] = _mm256_add_epi32(acc[i][1], dot_i8(a1, _mm256_sign_epi8(xv, w1)));
        }
    }
    __m256 s0 = _mm256_loadu_ps(wscale), s1 = _mm256_loadu_ps(wscale + 8);
    #pragma GCC unroll 8
    for (int i = 0; i < mr; i++) {
        if (!last) {
            st16(C + (size_t)i * ldc, _mm256_castsi256_ps(acc[i][0]), _mm256_castsi256_ps(acc[i][1]), nc);
            continue;
        }
        __m256 xsi = _mm256_set1_ps(xs[i]);
        st16(C + (size_t)i * ldc, _mm256_mul_ps(_mm256_cvtepi32_ps(acc[i][0]), _mm256_mul_ps(s0, xsi)),
             _mm256_mul_ps(_mm256_cvtepi32_ps(acc[i][1]), _mm256_mul_ps(s1, xsi)), nc);
    }
}

static void q8_block(void *ctx, int m0, int m1, int p0, int p1, int worker)
{
    (void)worker;
    const gemm_ctx *g = ctx;
    const tm_kweight *w = g->w;
    for (int k0 = 0; k0 < w->Kp; k0 += KC) {
        int k1 = k0 + KC < w->Kp ? k0 + KC : w->Kp, first = k0 == 0, last = k1 == w->Kp, nq = (k1 - k0) / 4;
        for (int p = p0; p < p1; p++)
            for (int h = 0; h < 2; h++) {
                const int8_t *Bp = (const int8_t *)w->panel + (size_t)p * w->Kp * 32 + (size_t)k0 * 32 + 64 * h;
                int n0 = 32 * p + 16 * h, nc = g->N - n0;
                if (nc <= 0) break;
                for (int m = m0; m < m1; m += MR) {
                    const int8_t *A = (const int8_t *)g->x + (size_t)m * g->ld + k0;
                    float *C = g->y + (size_t)m * g->N + n0;
                    const float *xs = g->xs + m, *sc = w->pscale + n0;
                    switch (m1 - m < MR ? m1 - m : MR) {
                    case 1: uk_q8(A, g->ld, Bp, nq, C, g->N, nc, first, last, xs, sc, 1); break;
                    case 2: uk_q8(A, g->ld, Bp, nq, C, g->N, nc, first, last, xs, sc, 2); break;
                    case 3: uk_q8(A, g->ld, Bp, nq, C, g->N, nc, first, last, xs, sc, 3); break;
                    default: uk_q8(A, g->ld, Bp, nq, C, g->N, nc, first, last, xs, sc, 4); break;
                    }
                }
            }
    }
}

static int gemm_q8(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    if (tm_kcheck_gemm(w, x, TM_DT_Q8PC)) return TM_E_INVALID;
    int ld = tm_kact_ld(x->K);
    size_t s8bytes = tm_kalign64((size_t)x->M * ld);
    if (tm_kbuf_reserve(ws, s8bytes + tm_kact_need_q8(x) + 64)) return TM_E_NOMEM;
    const float *xs;
    const uint8_t *xq = tm_kact_get_q8(x, ws, s8bytes, tm_kavx2_quant_q8, &xs, pool);
    int8_t *x8 = tm_kbuf_at(ws, 0);
    for (size_t i = 0; i < (size_t)x->M * ld; i++) x8[i] = (int8_t)(xq[i] ^ 0x80);
    gemm_ctx g = {w, x8, xs, ld, x->M, w->N, y};
    tm_kgemm_run(x->M, w->Np, MB, q8_block, &g, pool);
    return TM_OK;
}

void tm_kgemm_fill_avx2(tm_kernels *k)
{
    k->gemm_bf16 = gemm_bf16;
    k->gemm_q8 = gemm_q8;
}
