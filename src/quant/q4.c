/* quant/q4.c: int4 symmetric, per channel or per group of 64 / 32
 * (TM_DT_Q4PC, TM_DT_Q4G64, TM_DT_Q4G32).
 *
 * Block of 32 elements -> 16 bytes:
 *     byte j (0..15) = (q[j] + 8) | (q[j + 16] + 8) << 4,  q in [-8, 7]
 * Scale per group: d = m / -8 where m is the group's element of largest
 * magnitude (the negative one when +a and -a tie), rounded away from zero to
 * the f16 value it is stored as, so m encodes as -8 (where d is a normal f16)
 * and the positive side keeps 7 levels. The inner loops have a fixed
 * trip count of 32 so that the compiler vectorises them at -O2. */
#include "quant/quant-impl.h"

#include <math.h>

/* quantize 32 values with scale d (d != 0) and pack them into 16 bytes */
static inline void quant_pack_block(const float *w /*[32]*/, float d, uint8_t *out /*[16]*/)
{
    uint8_t u[TM_Q_BLOCK];
    for (int j = 0; j < TM_Q_BLOCK; j++) u[j] = (uint8_t)(tm_q_round_clamp(w[j] / d, -8, 7) + 8);
    for (int j = 0; j < TM_Q_BLOCK / 2; j++) out[j] = (uint8_t)(u[j] | (u[j + 16] << 4));
}

float tm_q_signed_absmax(const float *w, int64_t n)
{
    float mx[TM_Q_BLOCK], mn[TM_Q_BLOCK];
    for (int j = 0; j < TM_Q_BLOCK; j++) mx[j] = mn[j] = w[j];
    for (int64_t b = TM_Q_BLOCK; b < n; b += TM_Q_BLOCK)
        for (int j = 0; j < TM_Q_BLOCK; j++) {
            float v = w[b + j];
            mx[j] = v > mx[j] ? v : mx[j];
            mn[j] = v < mn[j] ? v : mn[j];
        }
    float hi = mx[0], lo = mn[0];
    for (int j = 1; j < TM_Q_BLOCK; j++) {
        hi = mx[j] > hi ? mx[j] : hi;
        lo = mn[j] < lo ? mn[j] : lo;
    }
    return -lo >= hi ? lo : hi;
}

/* x rounded to the f16 value of the same sign next away from zero (x itself
 * when it is one): |result| >= |x|; inf past 65504 */
static float f16_round_out(float x)
{
    uint16_t h = tm_f32_to_f16(x);
    if (fabsf(tm_f16_to_f32(h)) < fabsf(x)) h++;   /* one step up in magnitude (the sign is bit 15) */
    return tm_f16_to_f32(h);
}

float tm_q_sym_scale(const float *w, int64_t n, int qneg, int clip)
{
    const float m = tm_q_signed_absmax(w, n);
    /* rounded out, not to nearest: |m / d| <= qneg, so m encodes as -qneg exactly as with an
       f32 d, whatever f16's step there (2^-24 below 2^-14, where nearest could cut |d| by half) */
    float d = f16_round_out(m / (float)-qneg);
    if (isinf(d)) return d;
    if (d == 0.0f && m != 0.0f) d = m > 0 ? -0x1p-24f : 0x1p-24f;   /* m / -qneg underflowed f32 itself */
    if (clip) d = tm_q_clip_search(w, n, d, -qneg, qneg - 1, 1);
    if (d == 0.0f) d = 0.0f;   /* +0, not -0 (0 / -8) */
    return d;
}

int64_t tm_q_absmax_at(const float *w, int64_t n)
{
    int64_t at = 0;
    for (int64_t i = 1; i < n; i++)
        if (fabsf(w[i]) > fabsf(w[at])) at = i;
    return at;
}

int64_t tm_q4_quant_row(const float *w, int64_t K, int64_t G, uint8_t *data, uint16_t *scales, int clip)
{
    for (int64_t g0 = 0; g0 < K; g0 += G) {
        const float d = tm_q_sym_scale(w + g0, G, 8, clip);
        if (isinf(d)) return g0 + tm_q_absmax_at(w + g0, G);
        scales[g0 / G] = tm_f32_to_f16(d);
        uint8_t *out = data + g0 / 2;
        if (d == 0.0f) {
            for (int64_t j = 0; j < G / 2; j++) out[j] = 0x88;
            continue;
        }
        for (int64_t b = 0; b < G; b += TM_Q_BLOCK)
            quant_pack_block(w + g0 + b, d, out + b / 2);
    }
    return -1;
}

void tm_q4_dequant_row(const uint8_t *data, const uint16_t *scales, int64_t K, int64_t G, float *out)
{
    for (int64_t b = 0; b < K; b += TM_Q_BLOCK) {
        const float d = tm_f16_to_f32(scales[b / G]);
        const uint8_t *in = data + b / 2;
        float *o = out + b;
        for (int j = 0; j < TM_Q_BLOCK / 2; j++) {
            o[j] = d * (float)((int)(in[j] & 0x0f) - 8);
            o[j + 16] = d * (float)((int)(in[j] >> 4) - 8);
        }
    }
}
