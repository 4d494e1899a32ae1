/* engine/cpu/gemm_avx512.c: prefill GEMM, y[M][N] = x[M][K] . W[N][K]^T on
 * the panel layouts of kernels-impl.h, AVX-512 BF16 (dpbf16ps) and AVX-512
 * VNNI (dpbusd, W8A8).
 *
 * Blocking: a task is MB rows x some 32-column panels (tm_kgemm_run). Inside
 * it, K is cut into KC slices (up to 8192: the whole K of most models) so a
 * panel slice (32 x KC) stays in L2 while the micro-kernel sweeps the rows
 * MR at a time, C in registers over the slice.
 * Micro-kernel: MR rows x 32 columns = 2*MR zmm accumulators; per k-pair
 * (k-quad) two panel loads and MR broadcasts of x. x is first packed so that
 * those MR broadcasts are adjacent: [M/MR][Kp/2 or Kp/4][MR] 32-bit groups
 * (a bf16 pair or 4 int8), rows past M zero (reading MR rows of x in place
 * would touch MR lines 2K bytes apart per step: L1 set conflicts). Partial
 * sums across K slices live in y (f32 for bf16; int32 bit patterns for int8
 * until the last slice applies colsum and the scales). */
#include <string.h>

#include "core/threadpool.h"
#include "engine/cpu/kernels-impl.h"

#include <immintrin.h>

#define AI static inline __attribute__((always_inline))
#define MR 8         /* 12 (24 accumulators) measured 2x slower on Zen 4 and SPR */
#ifndef MB
#define MB 64        /* rows per task: a multiple of MR */
#endif
/* k elements per slice (panel slice 32 x KC: 512 KB bf16, 256 KB int8). Each
 * slice after the first reloads the C accumulators from y, so fewer slices
 * win while the slice stays in L2. Session 7, Zen 4, 2 threads, M = 512,
 * kbench, 3 interleaved rounds: bf16 KC 512 -> 8192: 2048^2 366 -> 427,
 * 2048 x 8192 360 -> 422 GFLOP/s; int8 KC 1024 -> 8192: 2048^2 750 -> 832,
 * K = 8192 720 -> 850, N = 8192 755 -> 826 GOP/s (KC 256 / 512: 525-670) */
#ifndef KC_BF16
#define KC_BF16 8192
#endif
#ifndef KC_Q8
#define KC_Q8 8192
#endif

typedef struct gemm_ctx {
    const tm_kweight *w;
    const uint32_t *xp; /* packed x: [ceil(M/MR)][G][MR], G 32-bit groups per row */
    int G;
    const float *xs;    /* int8: [M] row scales */
    int M, N;
    float *y;           /* [M][N] */
} gemm_ctx;

/* Pack rows of x (ld_bytes apart) into MR-row groups of 32-bit words:
 * out[(m / MR) * G * MR + g * MR + m % MR] = word g of row m; rows past M
 * are zero. One task per group of MR rows, over the pool. */
typedef struct pack_job {
    const char *x;
    size_t ld_bytes;
    int M, G;
    uint32_t *out;
} pack_job;

static void pack_task(void *ctx, int b, int worker)
{
    (void)worker;
    const pack_job *j = ctx;
    uint32_t *o = j->out + (size_t)b * j->G * MR;
    for (int i = 0; i < MR; i++) {
        int m = b * MR + i;
        if (m >= j->M) {
            for (int g = 0; g < j->G; g++) o[(size_t)g * MR + i] = 0;
            continue;
        }
        const char *src = j->x + (size_t)m * j->ld_bytes;
        for (int g = 0; g < j->G; g++) memcpy(&o[(size_t)g * MR + i], src + 4 * (size_t)g, 4);
    }
}

static uint32_t *pack_rows(const void *x, int M, size_t ld_bytes, int G, tm_kbuf *ws, size_t off, struct tm_pool *pool)
{
    pack_job j = {x, ld_bytes, M, G, tm_kbuf_at(ws, off)};
    tm_pool_run(pool, (M + MR - 1) / MR, pack_task, &j);
    return j.out;
}

static size_t pack_bytes(int M, int G)
{
    return tm_kalign64((size_t)((M + MR - 1) / MR) * MR * G * 4);
}

AI __mmask16 col_mask(int ncols, int half)
{
    int c = ncols - 16 * half;
    return c >= 16 ? (__mmask16)0xffff : c <= 0 ? (__mmask16)0 : (__mmask16)((1u << c) - 1);
}

/* ---- bf16 ------------------------------------------------------------------ */

AI void uk_bf16(const uint32_t *A, const uint16_t *Bp, int npairs, float *C, int ldc, int ncols, int first,
                const int mr)
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
            __m512bh a = (__m512bh)_mm512_set1_epi32((int)A[(size_t)r * MR + i]);
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

/* call F(mr) with a compile-time mr in 1..MR (MR == 8) */
#define MR_SWITCH(mr, F)                                                                   \
    switch (mr) {                                                                          \
    case 1: F(1); break;  case 2: F(2); break;  case 3: F(3); break;  case 4: F(4); break; \
    case 5: F(5); break;  case 6: F(6); break;  case 7: F(7); break;  default: F(8); break; \
    }

static void bf16_block(void *ctx, int m0, int m1, int p0, int p1, int worker)
{
    (void)worker;
    const gemm_ctx *g = ctx;
    const tm_kweight *w = g->w;
    for (int k0 = 0; k0 < w->Kp; k0 += KC_BF16) {
        int k1 = k0 + KC_BF16 < w->Kp ? k0 + KC_BF16 : w->Kp, first = k0 == 0, np = (k1 - k0) / 2;
        for (int p = p0; p < p1; p++) {
            const uint16_t *Bp = (const uint16_t *)w->panel + (size_t)p * w->Kp * 32 + (size_t)k0 * 32;
            int n0 = 32 * p, nc = g->N - n0;
            for (int m = m0; m < m1; m += MR) {
                const uint32_t *A = g->xp + (size_t)(m / MR) * g->G * MR + (size_t)(k0 / 2) * MR;
                float *C = g->y + (size_t)m * g->N + n0;
#define CALL(r) uk_bf16(A, Bp, np, C, g->N, nc, first, r)
                MR_SWITCH(m1 - m < MR ? m1 - m : MR, CALL)
#undef CALL
            }
        }
    }
}

static int gemm_bf16(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    if (tm_kcheck_gemm(w, x, TM_DT_BF16)) return TM_E_INVALID;
    int G = w->Kp / 2;
    size_t prep = tm_kact_need_bf16(x);
    if (tm_kbuf_reserve(ws, prep + pack_bytes(x->M, G) + 64)) return TM_E_NOMEM;
    const uint16_t *xb = tm_kact_get_bf16(x, ws, 0, tm_kavx512_f32_to_bf16, pool);
    const uint32_t *xp = pack_rows(xb, x->M, (size_t)tm_kact_ld(x->K) * 2, G, ws, prep, pool);
    gemm_ctx g = {w, xp, G, NULL, x->M, w->N, y};
    tm_kgemm_run(x->M, w->Np, MB, bf16_block, &g, pool);
    return TM_OK;
}

/* ---- int8 (W8A8) ------------------------------------------------------------ */

AI void uk_q8(const uint32_t *A, const int8_t *Bp, int nquads, float *C, int ldc, int ncols, int first,
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
#ifdef Q8_PF
        _mm_prefetch((const char *)(Bp + (size_t)(r + Q8_PF) * 128), _MM_HINT_T0);
        _mm_prefetch((const char *)(Bp + (size_t)(r + Q8_PF) * 128 + 64), _MM_HINT_T0);
#endif
        __m512i b0 = _mm512_loadu_si512(Bp + (size_t)r * 128);
        __m512i b1 = _mm512_loadu_si512(Bp + (size_t)r * 128 + 64);
        #pragma GCC unroll 8
        for (int i = 0; i < mr; i++) {
            __m512i a = _mm512_set1_epi32((int)A[(size_t)r * MR + i]);
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
    for (int k0 = 0; k0 < w->Kp; k0 += KC_Q8) {
        int k1 = k0 + KC_Q8 < w->Kp ? k0 + KC_Q8 : w->Kp, first = k0 == 0, last = k1 == w->Kp, nq = (k1 - k0) / 4;
        for (int p = p0; p < p1; p++) {
            const int8_t *Bp = (const int8_t *)w->panel + (size_t)p * w->Kp * 32 + (size_t)k0 * 32;
            int n0 = 32 * p, nc = g->N - n0;
            const int32_t *cs = w->colsum + n0;
            const float *sc = w->pscale + n0;
            for (int m = m0; m < m1; m += MR) {
                const uint32_t *A = g->xp + (size_t)(m / MR) * g->G * MR + (size_t)(k0 / 4) * MR;
                float *C = g->y + (size_t)m * g->N + n0;
                const float *xs = g->xs + m;
#define CALL(r) uk_q8(A, Bp, nq, C, g->N, nc, first, last, xs, cs, sc, r)
                MR_SWITCH(m1 - m < MR ? m1 - m : MR, CALL)
#undef CALL
            }
        }
    }
}

static int gemm_q8(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    if (tm_kcheck_gemm(w, x, TM_DT_Q8PC)) return TM_E_INVALID;
    int G = w->Kp / 4;
    size_t prep = tm_kact_need_q8(x);
    if (tm_kbuf_reserve(ws, prep + pack_bytes(x->M, G) + 64)) return TM_E_NOMEM;
    const float *xs;
    const uint8_t *xq = tm_kact_get_q8(x, ws, 0, tm_kavx512_quant_q8, &xs, pool);
    const uint32_t *xp = pack_rows(xq, x->M, (size_t)tm_kact_ld(x->K), G, ws, prep, pool);
    gemm_ctx g = {w, xp, G, xs, x->M, w->N, y};
    tm_kgemm_run(x->M, w->Np, MB, q8_block, &g, pool);
    return TM_OK;
}

void tm_kgemm_fill_avx512(tm_kernels *k)
{
    k->gemm_bf16 = gemm_bf16;
    k->gemm_q8 = gemm_q8;
}
