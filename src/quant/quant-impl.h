/* quant/quant-impl.h: private helpers shared by the quant/ sources.
 *
 * The quantizer rule for one group w [n] with scale d and integer range
 * [qmin, qmax] is q = clamp(round_half_even(w / d), qmin, qmax), the division
 * in f32. Rounding adds 1.5 * 2^23 (the default floating-point mode rounds to
 * nearest even; tandem never builds with -ffast-math) and reads the integer
 * from the mantissa bits, which is exact for |w / d| < 2^22 and, unlike
 * float compares under -ftrapping-math, vectorises at -O2. Every scale the
 * quantizer uses keeps |w / d| small: the default d makes it <= qmax + 1 or
 * so, and the clipping search only tries |d| >= |d0| / 2. d == 0 (an all-zero
 * group) gives q = 0. */
#ifndef TM_QUANT_IMPL_H
#define TM_QUANT_IMPL_H

#include <stdint.h>
#include <string.h>

#include "quant/quant.h"

#define TM_Q_BLOCK 32   /* int4 packing block (elements) */

/* tm_q_round_clamp: clamp(round_half_even(x), lo, hi) for |x| < 2^22 */
static inline int32_t tm_q_round_clamp(float x, int32_t lo, int32_t hi)
{
    tm_f32_bits y = {.f = x + 12582912.0f};   /* 1.5 * 2^23: y's ulp is 1 */
    int32_t i = (int32_t)(y.u & 0x7fffff) - 0x400000;
    i = i < lo ? lo : i;
    return i > hi ? hi : i;
}

/* tm_q_quant_group: q [n] = rule above. */
void tm_q_quant_group(const float *w /*[n]*/, int64_t n, float d, int qmin, int qmax, int8_t *q /*[n]*/);

/* tm_q_group_sqerr: sum over the group of (w - d*q)^2 with q from the rule,
 * d*q evaluated in f32 exactly as the dequantizer does, summed in double. */
double tm_q_group_sqerr(const float *w /*[n]*/, int64_t n, float d, int qmin, int qmax);

/* tm_q_clip_search: the scale with the lowest tm_q_group_sqerr among d0 * c,
 * c in {1.00, 0.99, ..., 0.70}, and the least-squares refit of the best one;
 * d0 wins ties, so the result's error is never above d0's. With f16, every
 * candidate is first rounded to f16 (tm_q_f16_round), as it will be stored. */
float tm_q_clip_search(const float *w /*[n]*/, int64_t n, float d0, int qmin, int qmax, int f16);

/* tm_q_f16_round: d rounded to the nearest f16 value (ties to even), as an
 * f32; inf when |d| is beyond f16's range (65504 and the half ulp above). */
static inline float tm_q_f16_round(float d) { return tm_f16_to_f32(tm_f32_to_f16(d)); }

/* Row encoders: one row w [K] into its packed data and scales.
 * The row must be finite (checked by the caller). */
void tm_q8_quant_row(const float *w /*[K]*/, int64_t K, int8_t *q /*[K]*/, float *scale /*[1]*/, int clip);
void tm_q8_dequant_row(const int8_t *q /*[K]*/, float scale, int64_t K, float *out /*[K]*/);
/* The int4 / int6 encoders store f16 scales; they return the column of the
 * element whose group scale is beyond f16's range (|w| > 8 * 65504 for int4,
 * 32 * 65504 for int6), else -1. */
int64_t tm_q4_quant_row(const float *w /*[K]*/, int64_t K, int64_t G, uint8_t *data /*[K/2]*/,
                        uint16_t *scales /*[K/G] f16*/, int clip);
int64_t tm_q6_quant_row(const float *w /*[K]*/, int64_t K, uint8_t *data /*[row bytes]*/,
                        uint16_t *scales /*[K/64] f16*/, int clip);
void tm_q6_dequant_row(const uint8_t *data /*[row bytes]*/, const uint16_t *scales /*[K/64] f16*/, int64_t K,
                       float *out /*[K]*/);
/* tm_q_signed_absmax: the element of w [n] (n % 32 == 0) of largest
 * magnitude, the negative one when +a and -a tie */
float tm_q_signed_absmax(const float *w /*[n]*/, int64_t n);
/* tm_q_absmax_at: the index of w [n]'s first element of largest magnitude
 * (the culprit named when a group's scale overflows f16) */
int64_t tm_q_absmax_at(const float *w /*[n]*/, int64_t n);
/* tm_q_sym_scale: a group's default symmetric scale m / -qneg (qneg = 8, 32),
 * rounded away from zero to an f16 value (the int4 / int6 scales' storage),
 * so |m / d| <= qneg and m encodes as -qneg; a group below f16's range gets
 * its smallest subnormal (2^-24) that way; optionally clip-searched over
 * [-qneg, qneg - 1]; never -0. Returns inf when |m| / qneg is beyond 65504
 * (the caller reports it). */
float tm_q_sym_scale(const float *w /*[n]*/, int64_t n, int qneg, int clip);
void tm_q4_dequant_row(const uint8_t *data /*[K/2]*/, const uint16_t *scales /*[K/G] f16*/, int64_t K, int64_t G,
                       float *out /*[K]*/);

#endif
