/* quant/q6.c: int6 symmetric, group 64 (TM_DT_Q6G64), for output heads.
 *
 * q in [-32, 31], stored as u = q + 32 split into nibbles (the low 4 bits,
 * int4's block packing) and crumbs (the high 2 bits), per superchunk of 256
 * elements (layout: quant/quant.h). Scale per group: d = m / -32, m
 * the group's element of largest magnitude, rounded away from zero to f16
 * (tm_q_sym_scale, as int4's m / -8). */
#include "quant/quant-impl.h"

#include <math.h>

#define Q6_SUPER 256

/* pack u [n] (n = 256, or a row's tail of 64, 128 or 192) into one superchunk */
static void pack_super(const uint8_t *u, int n, uint8_t *out)
{
    uint8_t *cr = out + n / 2;
    memset(out, 0, (size_t)n / 2 + 64);
    for (int e = 0; e < n; e++) {
        int a = e / 128, j = e % 128 / 32, h = e % 32 / 16, p = 16 * j + e % 16;
        out[64 * a + p] |= (uint8_t)((u[e] & 15) << (4 * h));
        cr[p] |= (uint8_t)((u[e] >> 4) << (4 * a + 2 * h));
    }
}

int64_t tm_q6_quant_row(const float *w, int64_t K, uint8_t *data, uint16_t *scales, int clip)
{
    for (int64_t s0 = 0; s0 < K; s0 += Q6_SUPER) {
        int n = K - s0 < Q6_SUPER ? (int)(K - s0) : Q6_SUPER;
        uint8_t u[Q6_SUPER];
        for (int g = 0; g < n; g += 64) {
            const float *wg = w + s0 + g;
            const float d = tm_q_sym_scale(wg, 64, 32, clip);
            if (isinf(d)) return s0 + g + tm_q_absmax_at(wg, 64);
            scales[(s0 + g) / 64] = tm_f32_to_f16(d);
            for (int j = 0; j < 64; j++) u[g + j] = (uint8_t)(d == 0.0f ? 32 : tm_q_round_clamp(wg[j] / d, -32, 31) + 32);
        }
        pack_super(u, n, data + (s0 / Q6_SUPER) * 192);
    }
    return -1;
}

void tm_q6_dequant_row(const uint8_t *data, const uint16_t *scales, int64_t K, float *out)
{
    for (int64_t k = 0; k < K; k++) out[k] = tm_f16_to_f32(scales[k / 64]) * (float)tm_quant_q6_at(data, K, k);
}
