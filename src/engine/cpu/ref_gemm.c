/* engine/cpu/ref_gemm.c: scalar references of the GEMV/GEMM ops, straight
 * from the HF weight layout and the normative activation quantization of
 * kernels.h. Exact integer dots, double accumulation: the yardstick every
 * ISA variant is tested against, and the "scalar" variant itself. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/kernels-impl.h"
#include "quant/quant.h"

void tm_kref_quant_b32(const float *x, int K, int8_t *q, float *s, int32_t *bsum)
{
    for (int b = 0; b < K / 32; b++) {
        float amax = 0.f;
        for (int j = 0; j < 32; j++) {
            float a = fabsf(x[32 * b + j]);
            if (a > amax) amax = a; /* NaN never wins, as with fmaxf */
        }
        float inv = amax > 0.f ? 127.f / amax : 0.f;
        s[b] = amax / 127.f;
        int32_t sum = 0;
        for (int j = 0; j < 32; j++) {
            int v = tm_kq8(x[32 * b + j], inv);
            q[32 * b + j] = (int8_t)v;
            sum += v;
        }
        if (bsum) bsum[b] = sum;
    }
}

static inline uint32_t ld32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Block by block, 4 bytes at a time: a package block's 16 nibble bytes hold
 * elements i (low) and 16 + i (high); the GEMV layout's chunk j takes
 * elements 8 j + t (low) and 8 j + 4 + t (high), t < 4: for j < 2 the low
 * nibbles of bytes 8 j + t and 8 j + 4 + t, for j >= 2 the high nibbles of
 * bytes 8 (j - 2) + t and 8 (j - 2) + 4 + t. int6's crumbs likewise: the
 * package's crumb byte 16 j + i holds u >> 4 of the block's elements i (bits
 * 4 a + 0-1) and 16 + i (4 a + 2-3), a the block's half of its superchunk;
 * the layout's crumb chunk c byte t takes, in bits 2 k, element 16 c + 4 k + t. */
void tm_kq4_repack_row(tm_dtype dt, uint8_t *dst, const uint8_t *src, int K)
{
    const uint32_t lo = 0x0F0F0F0Fu, hi = 0xF0F0F0F0u, c2 = 0x03030303u;
    int q6 = dt == TM_DT_Q6G64, nb = K / 32, nsup = K / 256;
    for (int b = 0; b < nb; b++) {
        int win = b / 16, l = b % 16, nbw = nb - 16 * win < 16 ? nb - 16 * win : 16;
        uint8_t *w = dst + (q6 ? 384 : 256) * (size_t)win + 4 * l;
        const uint8_t *nib = src + 16 * (size_t)b, *cr = NULL;
        int a = 0;
        if (q6) { /* superchunk b / 8: 192 bytes (or t / 2 + 64, the tail's), its crumbs after its nibbles */
            int sc = b / 8, nn = sc < nsup ? 128 : (K % 256) / 2;
            a = b % 8 / 4;
            nib = src + 192 * (size_t)sc + 64 * a + 16 * (b % 4);
            cr = src + 192 * (size_t)sc + nn + 16 * (b % 4);
        }
        for (int j = 0; j < 4; j++) {
            uint32_t x = ld32(nib + 8 * (j % 2)), y = ld32(nib + 8 * (j % 2) + 4);
            uint32_t v = j < 2 ? (x & lo) | (y & lo) << 4 : (x >> 4 & lo) | (y & hi);
            memcpy(w + 4 * nbw * j, &v, 4);
        }
        for (int c = 0; q6 && c < 2; c++) {
            uint32_t v = 0;
            for (int k = 0; k < 4; k++) /* element 16 c + 4 k + t: crumb byte 4 k + t, half c */
                v |= (ld32(cr + 4 * k) >> (4 * a + 2 * c) & c2) << (2 * k);
            memcpy(w + 16 * nbw + 4 * nbw * c, &v, 4);
        }
    }
}

void tm_kq4x_fill(tm_kq4x *x_row, size_t stride, const int8_t *q, const float *s, const int32_t *bsum, int K,
                  int off)
{
    int nb = K / 32;
    for (int w0 = 0; w0 < nb; w0 += 16) {
        tm_kq4x *o = x_row + (size_t)(w0 / 16) * stride;
        memset(o, 0, sizeof *o);
        for (int l = 0; l < 16 && w0 + l < nb; l++) {
            const int8_t *b = q + 32 * (size_t)(w0 + l);
            for (int j = 0; j < 4; j++)
                for (int t = 0; t < 4; t++) {
                    o->lo[j][4 * l + t] = b[8 * j + t];
                    o->hi[j][4 * l + t] = b[8 * j + 4 + t];
                }
            o->s[l] = s[w0 + l];
            o->corr[l] = -off * bsum[w0 + l];
        }
    }
}

/* q of element k of a block-32 family row (the GEMV layout of kernels-impl.h) */
static inline int blk_at(const tm_kweight *w, const uint8_t *row, int k)
{
    return tm_kq4_at_t(row, w->K, k, w->dtype == TM_DT_Q6G64);
}

int tm_kref_gemv_q4(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    (void)pool;
    if (tm_kcheck_gemv(w, x, 4)) return TM_E_INVALID;
    int K = w->K, nb = K / 32, ng = K / w->G;
    size_t need = tm_kalign64((size_t)K) + tm_kalign64((size_t)nb * 4);
    if (tm_kbuf_reserve(ws, need)) return TM_E_NOMEM;
    int8_t *q = tm_kbuf_at(ws, 0);
    float *s = tm_kbuf_at(ws, tm_kalign64((size_t)K));
    for (int m = 0; m < x->M; m++) {
        tm_kref_quant_b32(x->f32 + (size_t)m * K, K, q, s, NULL);
        for (int n = 0; n < w->N; n++) {
            const uint8_t *row = (const uint8_t *)w->data + (size_t)n * w->row_bytes;
            double acc = 0;
            for (int b = 0; b < nb; b++) {
                int32_t d = 0;
                for (int j = 0; j < 32; j++) d += blk_at(w, row, 32 * b + j) * q[32 * b + j];
                acc += (double)tm_quant_scale_at(w->dtype, w->scales, (size_t)n * ng + (size_t)(32 * b) / w->G) * s[b] * d;
            }
            y[(size_t)m * w->N + n] = (float)acc;
        }
    }
    return TM_OK;
}

/* Exact W8A8 dot for x rows already in offset-binary form. */
static void q8_rows(const tm_kweight *w, const uint8_t *xq, const float *xs, int M, int ld, float *y)
{
    const int8_t *W = w->data;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < w->N; n++) {
            int64_t d = 0;
            for (int k = 0; k < w->K; k++) d += (int64_t)((int)xq[(size_t)m * ld + k] - 128) * W[(size_t)n * w->K + k];
            y[(size_t)m * w->N + n] = (float)((double)tm_quant_scale_at(w->dtype, w->scales, (size_t)n) * xs[m] * (double)d);
        }
}

static int q8_common(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws)
{
    if (tm_kbuf_reserve(ws, tm_kact_need_q8(x) + 64)) return TM_E_NOMEM;
    const float *xs;
    const uint8_t *xq = tm_kact_get_q8(x, ws, 0, tm_kref_quant_q8, &xs, NULL);
    q8_rows(w, xq, xs, x->M, tm_kact_ld(x->K), y);
    return TM_OK;
}

int tm_kref_gemv_q8(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    (void)pool;
    if (tm_kcheck_gemv(w, x, TM_DT_Q8PC)) return TM_E_INVALID;
    return q8_common(w, x, y, ws);
}

int tm_kref_gemm_q8(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    (void)pool;
    if (tm_kcheck_gemm(w, x, TM_DT_Q8PC)) return TM_E_INVALID;
    return q8_common(w, x, y, ws);
}

static int bf16_common(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws)
{
    if (tm_kbuf_reserve(ws, tm_kact_need_bf16(x) + 64)) return TM_E_NOMEM;
    const uint16_t *xb = tm_kact_get_bf16(x, ws, 0, tm_kref_f32_to_bf16, NULL);
    int ld = tm_kact_ld(x->K);
    const uint16_t *W = w->data;
    for (int m = 0; m < x->M; m++)
        for (int n = 0; n < w->N; n++) {
            double acc = 0;
            for (int k = 0; k < w->K; k++)
                acc += (double)tm_bf16_to_f32(xb[(size_t)m * ld + k]) * tm_bf16_to_f32(W[(size_t)n * w->K + k]);
            y[(size_t)m * w->N + n] = (float)acc;
        }
    return TM_OK;
}

int tm_kref_gemv_bf16(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    (void)pool;
    if (tm_kcheck_gemv(w, x, TM_DT_BF16)) return TM_E_INVALID;
    return bf16_common(w, x, y, ws);
}

int tm_kref_gemm_bf16(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    (void)pool;
    if (tm_kcheck_gemm(w, x, TM_DT_BF16)) return TM_E_INVALID;
    return bf16_common(w, x, y, ws);
}
