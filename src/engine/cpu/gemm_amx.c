/* engine/cpu/gemm_amx.c: prefill GEMM on Intel AMX (Sapphire Rapids and
 * later), and the "amx" variant's table (the AVX-512 one with these two
 * GEMMs). Chosen only when CPUID reports AMX-TILE/BF16/INT8 and Linux has
 * granted XTILEDATA (core/cpu.h).
 *
 * Tiles: C00 C01 C10 C11 = a 32 x 32 f32/int32 block (tiles 0-3), A0 A1 =
 * 16 rows of x each (tiles 4-5: 16 x 32 bf16 or 16 x 64 int8), B0 B1 = 16
 * columns each (tiles 6-7: 16 k-pair/k-quad rows of 64 bytes, read from the
 * panel layout with stride 128 bytes: a panel is exactly two B tiles side by
 * side, see kernels-impl.h). Per K step (32 bf16 / 64 int8): 4 tile loads,
 * 4 tdpbf16ps / tdpbusd; C stays in tiles over all of K.
 *
 * x is first packed into tile order, [ceil(M/16)][K steps][16 rows][64 B],
 * so every A tile load reads 1 KB contiguously (in place, its 16 rows would
 * be 2K-8K bytes apart: L1 set conflicts, 16 pages). Rows past M are zero,
 * so every tile has 16 rows and one configuration serves all shapes; the
 * epilogue (through a 32 x 32 buffer) drops rows past M and columns past N,
 * and for int8 applies 128 colsum and the scales. */
#include <string.h>

#include "core/threadpool.h"
#include "engine/cpu/kernels-impl.h"

#include <immintrin.h>

#define MB 64  /* rows per task (a multiple of 32) */

typedef struct tilecfg {
    uint8_t palette;     /* 1 */
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];  /* bytes per row of each tile */
    uint8_t rows[16];
} __attribute__((packed, aligned(64))) tilecfg;

static void config(void)
{
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) {
        c.colsb[t] = 64;
        c.rows[t] = 16;
    }
    _tile_loadconfig(&c);
}

typedef struct gemm_ctx {
    const tm_kweight *w;
    const uint8_t *xt;  /* packed x: [ceil(M/16)][nsteps][16][64] bytes */
    int nsteps;         /* K steps: Kp/32 (bf16) or Kp/64 (int8) */
    const float *xs;    /* int8: [M] */
    int M, N, is_q8;
    float *y;
} gemm_ctx;

/* ---- packing x into tile order (parallel over 16-row groups) ----------------- */

typedef struct pack_job {
    const uint8_t *x;   /* prepared rows [M][ld_bytes] */
    size_t ld_bytes;
    int M, nsteps;
    uint8_t *out;
} pack_job;

static void pack_task(void *ctx, int grp, int worker)
{
    (void)worker;
    const pack_job *j = ctx;
    uint8_t *o = j->out + (size_t)grp * j->nsteps * 1024;
    for (int s = 0; s < j->nsteps; s++)
        for (int r = 0; r < 16; r++) {
            int m = grp * 16 + r;
            uint8_t *dst = o + (size_t)s * 1024 + r * 64;
            if (m < j->M) memcpy(dst, j->x + (size_t)m * j->ld_bytes + (size_t)s * 64, 64);
            else memset(dst, 0, 64);
        }
}

static size_t pack_bytes(int M, int nsteps)
{
    return (size_t)((M + 15) / 16) * nsteps * 1024;
}

/* ---- the 32 x 32 block ------------------------------------------------------- */

/* rows m .. m+31 (two tile rows; the second only if two), panel p, all of K */
static void block32(const gemm_ctx *g, int m, int two, int p, float buf[32][32])
{
    const uint8_t *A0 = g->xt + (size_t)(m / 16) * g->nsteps * 1024;
    const uint8_t *A1 = A0 + (size_t)g->nsteps * 1024;
    const uint8_t *B = (const uint8_t *)g->w->panel + (size_t)p * g->w->Kp * 32 * (g->is_q8 ? 1 : 2);
    _tile_zero(0);
    _tile_zero(1);
    if (two) {
        _tile_zero(2);
        _tile_zero(3);
    }
    for (int s = 0; s < g->nsteps; s++) {
        const uint8_t *b = B + (size_t)s * 2048; /* 16 panel rows of 128 bytes */
        _tile_loadd(6, b, 128);
        _tile_loadd(7, b + 64, 128);
        _tile_loadd(4, A0 + (size_t)s * 1024, 64);
        if (g->is_q8) {
            _tile_dpbusd(0, 4, 6);
            _tile_dpbusd(1, 4, 7);
        } else {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
        }
        if (two) {
            _tile_loadd(5, A1 + (size_t)s * 1024, 64);
            if (g->is_q8) {
                _tile_dpbusd(2, 5, 6);
                _tile_dpbusd(3, 5, 7);
            } else {
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
            }
        }
    }
    _tile_stored(0, &buf[0][0], 128);
    _tile_stored(1, &buf[0][16], 128);
    if (two) {
        _tile_stored(2, &buf[16][0], 128);
        _tile_stored(3, &buf[16][16], 128);
    }
}

static void amx_block(void *ctx, int m0, int m1, int p0, int p1, int worker)
{
    (void)worker;
    const gemm_ctx *g = ctx;
    const tm_kweight *w = g->w;
    float buf[32][32] __attribute__((aligned(64)));
    config();
    for (int p = p0; p < p1; p++) {
        int n0 = 32 * p, nc = g->N - n0 < 32 ? g->N - n0 : 32;
        __mmask16 k0 = nc >= 16 ? 0xffff : (__mmask16)((1u << nc) - 1);
        __mmask16 k1 = nc >= 32 ? 0xffff : nc <= 16 ? 0 : (__mmask16)((1u << (nc - 16)) - 1);
        __m512i c0 = _mm512_setzero_si512(), c1 = c0;
        __m512 s0 = _mm512_setzero_ps(), s1 = s0;
        if (g->is_q8) {
            c0 = _mm512_slli_epi32(_mm512_loadu_si512(w->colsum + n0), 7);
            c1 = _mm512_slli_epi32(_mm512_loadu_si512(w->colsum + n0 + 16), 7);
            s0 = _mm512_loadu_ps(w->pscale + n0);
            s1 = _mm512_loadu_ps(w->pscale + n0 + 16);
        }
        for (int m = m0; m < m1; m += 32) {
            int rows = m1 - m < 32 ? m1 - m : 32;
            block32(g, m, rows > 16, p, buf);
            for (int i = 0; i < rows; i++) {
                float *yr = g->y + (size_t)(m + i) * g->N + n0;
                __m512 v0 = _mm512_load_ps(&buf[i][0]), v1 = _mm512_load_ps(&buf[i][16]);
                if (g->is_q8) {
                    __m512 xs = _mm512_set1_ps(g->xs[m + i]);
                    v0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_castps_si512(v0), c0)),
                                       _mm512_mul_ps(s0, xs));
                    v1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_castps_si512(v1), c1)),
                                       _mm512_mul_ps(s1, xs));
                }
                _mm512_mask_storeu_ps(yr, k0, v0);
                _mm512_mask_storeu_ps(yr + 16, k1, v1);
            }
        }
    }
    _tile_release();
}

/* ---- entry points -------------------------------------------------------------- */

static int run(const tm_kweight *w, const tm_kact *x, const void *xr, size_t ld_bytes, const float *xs,
               tm_kbuf *ws, size_t off, float *y, struct tm_pool *pool, int is_q8)
{
    int nsteps = is_q8 ? w->Kp / 64 : w->Kp / 32;
    pack_job pj = {xr, ld_bytes, x->M, nsteps, tm_kbuf_at(ws, off)};
    tm_pool_run(pool, (x->M + 15) / 16, pack_task, &pj);
    gemm_ctx g = {w, pj.out, nsteps, xs, x->M, w->N, is_q8, y};
    tm_kgemm_run(x->M, w->Np, MB, amx_block, &g, pool);
    return TM_OK;
}

static int gemm_bf16(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    if (tm_kcheck_gemm(w, x, TM_DT_BF16)) return TM_E_INVALID;
    size_t prep = tm_kact_need_bf16(x);
    if (tm_kbuf_reserve(ws, prep + pack_bytes(x->M, w->Kp / 32) + 64)) return TM_E_NOMEM;
    const uint16_t *xb = tm_kact_get_bf16(x, ws, 0, tm_kavx512_f32_to_bf16);
    return run(w, x, xb, (size_t)tm_kact_ld(x->K) * 2, NULL, ws, prep, y, pool, 0);
}

static int gemm_q8(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    if (tm_kcheck_gemm(w, x, TM_DT_Q8PC)) return TM_E_INVALID;
    size_t prep = tm_kact_need_q8(x);
    if (tm_kbuf_reserve(ws, prep + pack_bytes(x->M, w->Kp / 64) + 64)) return TM_E_NOMEM;
    const float *xs;
    const uint8_t *xq = tm_kact_get_q8(x, ws, 0, tm_kavx512_quant_q8, &xs);
    return run(w, x, xq, (size_t)tm_kact_ld(x->K), xs, ws, prep, y, pool, 1);
}

void tm_kvariant_amx(tm_kernels *k)
{
    k->gemm_bf16 = gemm_bf16;
    k->gemm_q8 = gemm_q8;
}
