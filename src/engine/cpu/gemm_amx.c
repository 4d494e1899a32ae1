/* engine/cpu/gemm_amx.c: prefill GEMM on Intel AMX (Sapphire Rapids and
 * later), and the "amx" variant's table (the AVX-512 one with these two
 * GEMMs). Chosen only when CPUID reports AMX-TILE/BF16/INT8 and Linux has
 * granted XTILEDATA (core/cpu.h).
 *
 * Tiles: C00 C01 C10 C11 = a 32 x 32 f32/int32 block (tiles 0-3), A0 A1 =
 * 16 rows of x each (tiles 4-5: 16 x 32 bf16 or 16 x 64 int8, read straight
 * from the activation rows, stride ld), B0 B1 = 16 columns each (tiles 6-7:
 * 16 k-pair/k-quad rows of 64 bytes, read from the panel layout with stride
 * 128 bytes: the panel is exactly two B tiles side by side, see
 * kernels-impl.h). Per K step (32 bf16 / 64 int8): 4 tile loads, 4
 * tdpbf16ps / tdpbusd. C stays in tiles over all of K, then goes through a
 * 32 x 32 buffer to y (columns past N dropped; int8 applies 128 colsum and
 * the scales). Row tails (M % 32) use a tile configuration with fewer rows,
 * so no load reads past x. */
#include <string.h>

#include "engine/cpu/kernels-impl.h"

#include <immintrin.h>

#define MB 64

typedef struct tilecfg {
    uint8_t palette;     /* 1 */
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];  /* bytes per row of each tile */
    uint8_t rows[16];
} __attribute__((packed, aligned(64))) tilecfg;

/* rows of the upper (A0, C0x) and lower (A1, C1x) tile rows */
static void config(int r0, int r1)
{
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) c.colsb[t] = 64;
    c.rows[0] = c.rows[1] = c.rows[4] = (uint8_t)r0;
    c.rows[2] = c.rows[3] = c.rows[5] = (uint8_t)(r1 > 0 ? r1 : 1);
    c.rows[6] = c.rows[7] = 16;
    _tile_loadconfig(&c);
}

typedef struct gemm_ctx {
    const tm_kweight *w;
    const void *x;      /* bf16 or offset-binary u8 [M][ld] */
    const float *xs;    /* int8: [M] */
    int ld, M, N;
    float *y;
} gemm_ctx;

/* The 32 x 32 block at rows m (r0 + r1 of them), panel p, over all of K.
 * is_q8 selects tdpbusd on bytes (K step 64) or tdpbf16ps (K step 32). */
static void block32(const gemm_ctx *g, int m, int r1, int p, int is_q8, float buf[32][32])
{
    const tm_kweight *w = g->w;
    size_t ldx = (size_t)g->ld * (is_q8 ? 1 : 2);
    const char *A = (const char *)g->x + (size_t)m * ldx;
    const char *B = (const char *)w->panel + (size_t)p * w->Kp * 32 * (is_q8 ? 1 : 2);
    int kstep_bytes = 64; /* per A row and per B tile row: 32 bf16 or 64 int8 */
    int nsteps = is_q8 ? w->Kp / 64 : w->Kp / 32;
    _tile_zero(0);
    _tile_zero(1);
    if (r1 > 0) {
        _tile_zero(2);
        _tile_zero(3);
    }
    for (int s = 0; s < nsteps; s++) {
        const char *a = A + (size_t)s * kstep_bytes;
        const char *b = B + (size_t)s * 16 * 128; /* 16 tile rows of 128 bytes */
        _tile_loadd(4, a, ldx);
        _tile_loadd(6, b, 128);
        _tile_loadd(7, b + 64, 128);
        if (is_q8) {
            _tile_dpbusd(0, 4, 6);
            _tile_dpbusd(1, 4, 7);
        } else {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
        }
        if (r1 > 0) {
            _tile_loadd(5, a + 16 * ldx, ldx);
            if (is_q8) {
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
    if (r1 > 0) {
        _tile_stored(2, &buf[16][0], 128);
        _tile_stored(3, &buf[16][16], 128);
    }
}

static void amx_block(void *ctx, int m0, int m1, int p0, int p1, int is_q8)
{
    const gemm_ctx *g = ctx;
    const tm_kweight *w = g->w;
    float buf[32][32] __attribute__((aligned(64)));
    int cfg0 = -1, cfg1 = -1;
    for (int p = p0; p < p1; p++) {
        int n0 = 32 * p, nc = g->N - n0 < 32 ? g->N - n0 : 32;
        __mmask16 k0 = nc >= 16 ? 0xffff : (__mmask16)((1u << nc) - 1);
        __mmask16 k1 = nc >= 32 ? 0xffff : nc <= 16 ? 0 : (__mmask16)((1u << (nc - 16)) - 1);
        for (int m = m0; m < m1; m += 32) {
            int rows = m1 - m < 32 ? m1 - m : 32;
            int r0 = rows < 16 ? rows : 16, r1 = rows - 16;
            if (r0 != cfg0 || r1 != cfg1) {
                config(r0, r1);
                cfg0 = r0;
                cfg1 = r1;
            }
            block32(g, m, r1, p, is_q8, buf);
            for (int i = 0; i < rows; i++) {
                float *yr = g->y + (size_t)(m + i) * g->N + n0;
                __m512 v0 = _mm512_load_ps(&buf[i][0]), v1 = _mm512_load_ps(&buf[i][16]);
                if (is_q8) {
                    __m512 xs = _mm512_set1_ps(g->xs[m + i]);
                    __m512i c0 = _mm512_slli_epi32(_mm512_loadu_si512(w->colsum + n0), 7);
                    __m512i c1 = _mm512_slli_epi32(_mm512_loadu_si512(w->colsum + n0 + 16), 7);
                    v0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_castps_si512(v0), c0)),
                                       _mm512_mul_ps(_mm512_loadu_ps(w->pscale + n0), xs));
                    v1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_castps_si512(v1), c1)),
                                       _mm512_mul_ps(_mm512_loadu_ps(w->pscale + n0 + 16), xs));
                }
                _mm512_mask_storeu_ps(yr, k0, v0);
                _mm512_mask_storeu_ps(yr + 16, k1, v1);
            }
        }
    }
    _tile_release();
}

static void bf16_block(void *ctx, int m0, int m1, int p0, int p1, int worker)
{
    (void)worker;
    amx_block(ctx, m0, m1, p0, p1, 0);
}

static void q8_block(void *ctx, int m0, int m1, int p0, int p1, int worker)
{
    (void)worker;
    amx_block(ctx, m0, m1, p0, p1, 1);
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

void tm_kvariant_amx(tm_kernels *k)
{
    k->gemm_bf16 = gemm_bf16;
    k->gemm_q8 = gemm_q8;
}
