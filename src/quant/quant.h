/* quant/quant.h: weight encodings (bf16, f16, int8 per channel, int4 per
 * channel / group 64 / group 32, int6 group 64) with reference quantize and
 * dequantize.
 *
 *   tm_err err = {0};
 *   size_t nb = tm_quant_data_bytes(TM_DT_Q4G64, N, K);       // packed bytes
 *   size_t ns = tm_quant_scale_count(TM_DT_Q4G64, N, K);      // scales
 *   void *data = malloc(nb), *scales = malloc(ns * tm_quant_scale_bytes(TM_DT_Q4G64));
 *   tm_quant_opts o = {.clip_search = 0};
 *   if (tm_quant_quantize(TM_DT_Q4G64, w, N, K, data, scales, &o, &err) != TM_OK)
 *       fprintf(stderr, "%s\n", err.msg);
 *   float row[K];
 *   tm_quant_dequant_row(TM_DT_Q4G64, data, scales, K, 5, row);  // row 5 -> f32
 *
 * Threads: tm_quant_quantize_rows() quantizes rows [r0, r1) of a tensor
 * given in f32, bf16 or f16; disjoint row ranges write disjoint bytes, so
 * each thread takes a range and no locking is needed.
 *
 * The bit layouts are normative (core/tensor.h, docs/encodings.md):
 *   Q8PC   data int8 [N][K], scales f32 [N]; w = scale[n] * q, q in [-127, 127]
 *          (the quantizer never writes -128; a decoder accepts it).
 *   Q4PC / Q4G64 / Q4G32 (group G = K, 64, 32)
 *          data uint8 [N][K/2] in blocks of 32 elements (16 bytes): byte j of a
 *          block = (q[j] + 8) | (q[j + 16] + 8) << 4, q in [-8, 7];
 *          scales f16 [N][K/G]; w = scale[n][k / G] * q. K % 32 == 0, K % G == 0.
 *   Q6G64  (int6, group 64: for an output head between int8 and int4)
 *          u = q + 32 in [0, 63], q in [-32, 31]; scales f16 [N][K/64]; K % 64 == 0.
 *          A row is floor(K/256) superchunks of 256 elements, then a tail
 *          superchunk of t = K % 256 elements if t > 0. A superchunk of n
 *          elements is n/2 bytes of nibbles, then 64 bytes of crumbs. Its
 *          element e lies in chunk a = e / 128 (A, B) at position p = 16 j + i,
 *          with e % 128 = 32 j + 16 h + i (block j, half h, i < 16):
 *            nibble byte 64 a + p holds u & 15 in its low (h = 0) or high
 *            (h = 1) nibble (int4's block packing, chunk by chunk);
 *            crumb byte p holds u >> 4 at bit 4 a + 2 h.
 *          Full superchunks are 192 bytes = three 64-byte lines (aligned when
 *          the row is): the kernels' unpack is one shift and one merge per
 *          64 nibbles. Row bytes: 192 floor(K/256) + (t ? t/2 + 64 : 0).
 *   BF16 / F16 / F32  data [N][K] of that type, no scales.
 *
 * Quantizer rules (the reference; any faster quantizer must give identical
 * bytes): q = clamp(round_half_even(w / d), qmin, qmax) with the division in
 * f32. Default scale d per group: int8 d = absmax / 127; int4 d = m / -8 (int6: m / -32) where
 * m is the group's element of largest magnitude (the negative one when +a and
 * -a tie), so m itself encodes as -8 (ggml Q4_0 style; about 11% lower
 * RMSE than absmax / 7 on Gaussian weights, see docs/encodings.md). d may thus
 * be negative. int4 / int6 scales are stored in f16 (ggml's choice: 2 bytes
 * instead of 4 per group of 64 is 0.25 bit per weight of decode traffic), so
 * their d is rounded away from zero to an f16 value before any q is formed
 * (so |m / d| <= 8 or 32 still), and q uses the rounded d.
 * An all-zero group gets d = +0 and q = 0; a nonzero int8 row whose d
 * underflows to 0 gets f32's smallest subnormal instead (int4 / int6 groups
 * that small get f16's 2^-24 from the rounding); an int4 / int6 group whose d
 * is beyond f16's range (|m| > 8 * 65504, 32 * 65504) is an error naming the
 * weight. Error bound:
 * |w - d q| <= |d| / 2, except int4 elements of the sign opposite to m with
 * |w| > 7.5 |d| (int6: 31.5 |d|), which clamp to 7 (31) (error <= |d|).
 * With clip_search, d is chosen among d0 * c, c in {0.70, 0.71, ..., 1.00},
 * then refined by least squares, keeping whichever gives the lowest squared
 * error of the group (never worse than the default d0). */
#ifndef TM_QUANT_QUANT_H
#define TM_QUANT_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"

/* Limits accepted by tm_quant_check_shape (anything larger is an absurd
 * shape from a corrupt header, not a weight). */
#define TM_QUANT_MAX_DIM ((int64_t)1 << 31)      /* N, K < 2^31 */
#define TM_QUANT_MAX_NUMEL ((int64_t)1 << 40)    /* N * K <= 2^40 */

typedef struct tm_quant_opts {
    int clip_search;   /* 1: per-group error-minimising scale search (slower) */
} tm_quant_opts;

/* tm_quant_is_encoding: 1 for the weight encodings handled here
 * (F32, F16, BF16, Q8PC, Q4PC, Q4G64, Q4G32, Q6G64), 0 otherwise. */
int tm_quant_is_encoding(tm_dtype enc);

/* tm_quant_is_quantized: 1 for Q8PC, the Q4 family and Q6G64 (encodings with scales). */
int tm_quant_is_quantized(tm_dtype enc);

/* tm_quant_group_size: elements per scale along K: K for Q8PC/Q4PC, 64, 32;
 * 0 for plain types. */
int64_t tm_quant_group_size(tm_dtype enc, int64_t K);

/* tm_quant_row_bytes: bytes of packed data per row of K elements. Assumes a
 * valid shape (see tm_quant_check_shape); 0 for a non-encoding. */
size_t tm_quant_row_bytes(tm_dtype enc, int64_t K);

/* tm_quant_data_bytes: bytes of packed data of an [N][K] weight. */
size_t tm_quant_data_bytes(tm_dtype enc, int64_t N, int64_t K);

/* tm_quant_scale_count: number of scales ([N] or [N][K/G]); 0 for plain. */
size_t tm_quant_scale_count(tm_dtype enc, int64_t N, int64_t K);

/* tm_quant_scale_bytes: bytes per scale: 4 (f32, int8 per channel), 2 (f16,
 * the int4 family and int6), 0 for plain types. */
size_t tm_quant_scale_bytes(tm_dtype enc);

/* tm_quant_scale_at: scale i of a quantized encoding's scales, as f32;
 * tm_quant_scale_set: store v there (rounded to f16 for int4 / int6) */
float tm_quant_scale_at(tm_dtype enc, const void *scales, size_t i);
void tm_quant_scale_set(tm_dtype enc, void *scales, size_t i, float v);

/* tm_quant_check_shape: TM_OK if an [N][K] weight can be stored in `enc`;
 * otherwise TM_E_INVALID (or TM_E_UNSUPPORTED for a non-encoding) with a
 * message naming the rule, e.g. "int4g64: K = 100 is not a multiple of 64".
 * Rules: 1 <= N, K < 2^31, N*K <= 2^40; Q4*: K % 32 == 0; Q4G64, Q6G64: K % 64 == 0. */
int tm_quant_check_shape(tm_dtype enc, int64_t N, int64_t K, tm_err *err);

/* tm_quant_quantize: encode a whole f32 weight w [N][K] into data
 * (tm_quant_data_bytes bytes) and scales (tm_quant_scale_count scales of
 * tm_quant_scale_bytes each; may be NULL for plain types). o may be NULL
 * (defaults). Errors: bad shape, a non-finite weight (quantized encodings;
 * f16/bf16 keep NaN and inf as they are), a finite weight that rounds to
 * infinity in f16 / bf16 or whose int4 / int6 group scale would; the message
 * names the row and column. */
int tm_quant_quantize(tm_dtype enc, const float *w /*[N][K]*/, int64_t N, int64_t K,
                      void *data, void *scales, const tm_quant_opts *o, tm_err *err);

/* tm_quant_quantize_rows: encode rows [r0, r1) of a weight src [N][K] whose
 * elements are of type src_dt (F32, BF16 or F16). src, data and scales all
 * point at the start (row 0) of their tensors; only rows [r0, r1) of data and
 * scales are written. Safe to call concurrently on disjoint row ranges. */
int tm_quant_quantize_rows(tm_dtype enc, tm_dtype src_dt, const void *src /*[N][K]*/,
                           int64_t N, int64_t K, int64_t r0, int64_t r1,
                           void *data, void *scales, const tm_quant_opts *o, tm_err *err);

/* tm_quant_dequant_row: decode row `row` of an encoded weight (data and scales
 * point at row 0) into out [K] f32. Works for every encoding including
 * F32/F16/BF16 (scales ignored, may be NULL). The shape must be valid. */
void tm_quant_dequant_row(tm_dtype enc, const void *data, const void *scales, int64_t K,
                          int64_t row, float *out /*[K]*/);

/* tm_quant_dequant: decode a whole [N][K] weight into out [N][K] f32.
 * Returns TM_E_INVALID / TM_E_UNSUPPORTED (shape check) or TM_OK. */
int tm_quant_dequant(tm_dtype enc, const void *data, const void *scales, int64_t N, int64_t K,
                     float *out /*[N][K]*/, tm_err *err);

/* tm_quant_q4_unpack_block: the 32 signed values q [32] in [-8, 7] of one
 * packed block b [16] (for kernels and tests). */
static inline void tm_quant_q4_unpack_block(const uint8_t *b /*[16]*/, int8_t *q /*[32]*/)
{
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)((b[j] & 0x0f) - 8);
        q[j + 16] = (int8_t)((b[j] >> 4) - 8);
    }
}

/* tm_quant_q6_at: q in [-32, 31] of element k of a Q6G64 row of K elements
 * (the layout above, spelled out element by element: for references and
 * tests, not for speed). */
static inline int tm_quant_q6_at(const uint8_t *row, int64_t K, int64_t k)
{
    int64_t s = k / 256;
    int e = (int)(k % 256), a = e / 128, j = e % 128 / 32, h = e % 32 / 16, p = 16 * j + e % 16;
    const uint8_t *sc = row + 192 * s;
    int nib = s < K / 256 ? 128 : (int)(K % 256) / 2;   /* nibble bytes of this superchunk */
    int lo = (sc[64 * a + p] >> (4 * h)) & 15;
    int hi = (sc[nib + p] >> (4 * a + 2 * h)) & 3;
    return (lo | hi << 4) - 32;
}

#endif
