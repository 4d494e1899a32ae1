/* tests/kernels_util.h: what the kernel tests share (test_kernels.c,
 * test_attn.c): a fixed-seed generator, random weights in every encoding
 * with their dequantized values, random activations with outliers. One
 * generator per test binary (its state is the including file's). */
#ifndef TM_TESTS_KERNELS_UTIL_H
#define TM_TESTS_KERNELS_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "quant/quant.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static inline uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
static inline float frand(void) { return (float)(rnd() >> 10) / 2097152.0f - 1.0f; } /* [-1, 1) */
static inline float grand(void) { return frand() + frand() + frand(); }

static inline int sanitizer(void) { return getenv("TM_SANITIZER") != NULL; }

/* ---- weights ------------------------------------------------------------------ */

typedef struct wbuf {
    tm_tensor t;
    void *data;
    void *scales;    /* f32 (int8) or f16 (int4, int6) */
    float *deq;      /* [N][K] dequantized, for the plain float formulas */
} wbuf;

static inline int group_of(tm_dtype dt, int K)
{
    return dt == TM_DT_Q4G32 ? 32 : dt == TM_DT_Q4G64 || dt == TM_DT_Q6G64 ? 64 : K;
}

static inline void wbuf_make(wbuf *w, tm_dtype dt, int N, int K)
{
    memset(w, 0, sizeof *w);
    size_t n = (size_t)N * K;
    w->deq = malloc(n * sizeof(float));
    int G = group_of(dt, K);
    if (dt == TM_DT_BF16) {
        uint16_t *d = malloc(n * 2);
        for (size_t i = 0; i < n; i++) {
            d[i] = tm_f32_to_bf16(grand() * 0.05f);
            w->deq[i] = tm_bf16_to_f32(d[i]);
        }
        w->data = d;
        w->t.nbytes = n * 2;
    } else if (dt == TM_DT_Q8PC) {
        int8_t *d = malloc(n);
        float *sc = malloc(sizeof(float) * N);
        for (int r = 0; r < N; r++) sc[r] = (0.5f + (rnd() % 1000) / 1000.f) * 1e-3f * (rnd() % 7 ? 1 : -1);
        w->scales = sc;
        for (size_t i = 0; i < n; i++) {
            d[i] = (int8_t)(rnd() % 256 - 128); /* includes -128, which decoders accept */
            w->deq[i] = sc[i / K] * d[i];
        }
        w->data = d;
        w->t.nbytes = n;
    } else { /* int4 / int6: random bytes, decoded by the layouts' own definitions */
        size_t rb = tm_quant_row_bytes(dt, K);
        uint8_t *d = malloc(rb * N);
        int ng = K / G;
        w->scales = malloc(tm_quant_scale_bytes(dt) * (size_t)N * ng); /* f16 */
        for (int i = 0; i < N * ng; i++)
            tm_quant_scale_set(dt, w->scales, (size_t)i, (0.5f + (rnd() % 1000) / 1000.f) * 0.01f * (rnd() % 5 ? 1 : -1));
        for (size_t i = 0; i < rb * N; i++) d[i] = (uint8_t)rnd();
        for (int r = 0; r < N; r++)
            for (int k = 0; k < K; k++) {
                const uint8_t *row = d + (size_t)r * rb;
                uint8_t byte = row[(k / 32) * 16 + (k & 15)];
                int q = dt == TM_DT_Q6G64 ? tm_quant_q6_at(row, K, k) : ((k & 31) < 16 ? (byte & 15) : (byte >> 4)) - 8;
                w->deq[(size_t)r * K + k] = tm_quant_scale_at(dt, w->scales, (size_t)r * ng + k / G) * q;
            }
        w->data = d;
        w->t.nbytes = rb * N;
    }
    w->t.name = "test.weight";
    w->t.dtype = dt;
    w->t.ndim = 2;
    w->t.shape[0] = N;
    w->t.shape[1] = K;
    w->t.data = w->data;
    w->t.scales = w->scales;
}

static inline void wbuf_free(wbuf *w)
{
    free(w->data);
    free(w->scales);
    free(w->deq);
}

static inline float *rand_vec(size_t n, float scale)
{
    float *v = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) v[i] = grand() * scale;
    /* a few outliers, as real activations have */
    for (size_t i = 0; i < n / 97; i++) v[rnd() % n] *= 8.f;
    return v;
}

#endif
