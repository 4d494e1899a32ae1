/* quant/quant.c: encoding table, shape rules, sizes, and the row-range
 * quantize / dequantize entry points that dispatch to q8.c, q4.c, q6.c and the
 * plain (f32 / f16 / bf16) conversions below. */
#include "quant/quant-impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int tm_quant_is_encoding(tm_dtype enc)
{
    switch (enc) {
    case TM_DT_F32: case TM_DT_F16: case TM_DT_BF16:
    case TM_DT_Q8PC: case TM_DT_Q4PC: case TM_DT_Q4G64: case TM_DT_Q4G32: case TM_DT_Q6G64:
        return 1;
    default:
        return 0;
    }
}

int tm_quant_is_quantized(tm_dtype enc)
{
    return enc == TM_DT_Q8PC || enc == TM_DT_Q4PC || enc == TM_DT_Q4G64 || enc == TM_DT_Q4G32 || enc == TM_DT_Q6G64;
}

int64_t tm_quant_group_size(tm_dtype enc, int64_t K)
{
    switch (enc) {
    case TM_DT_Q8PC: case TM_DT_Q4PC: return K;
    case TM_DT_Q4G64: case TM_DT_Q6G64: return 64;
    case TM_DT_Q4G32: return 32;
    default: return 0;
    }
}

size_t tm_quant_row_bytes(tm_dtype enc, int64_t K)
{
    if (K < 0) return 0;
    switch (enc) {
    case TM_DT_F32: return (size_t)K * 4;
    case TM_DT_F16: case TM_DT_BF16: return (size_t)K * 2;
    case TM_DT_Q8PC: return (size_t)K;
    case TM_DT_Q4PC: case TM_DT_Q4G64: case TM_DT_Q4G32: return (size_t)K / 2;
    case TM_DT_Q6G64: return (size_t)(K / 256) * 192 + (K % 256 ? (size_t)(K % 256) / 2 + 64 : 0);
    default: return 0;
    }
}

size_t tm_quant_data_bytes(tm_dtype enc, int64_t N, int64_t K)
{
    if (N < 0) return 0;
    return (size_t)N * tm_quant_row_bytes(enc, K);
}

size_t tm_quant_scale_bytes(tm_dtype enc)
{
    switch (enc) {
    case TM_DT_Q8PC: return 4;
    case TM_DT_Q4PC: case TM_DT_Q4G64: case TM_DT_Q4G32: case TM_DT_Q6G64: return 2;
    default: return 0;
    }
}

float tm_quant_scale_at(tm_dtype enc, const void *scales, size_t i)
{
    if (enc == TM_DT_Q8PC) return ((const float *)scales)[i];
    return tm_f16_to_f32(((const uint16_t *)scales)[i]);
}

void tm_quant_scale_set(tm_dtype enc, void *scales, size_t i, float v)
{
    if (enc == TM_DT_Q8PC) ((float *)scales)[i] = v;
    else ((uint16_t *)scales)[i] = tm_f32_to_f16(v);
}

size_t tm_quant_scale_count(tm_dtype enc, int64_t N, int64_t K)
{
    int64_t G = tm_quant_group_size(enc, K);
    if (!tm_quant_is_quantized(enc) || G <= 0 || N < 0) return 0;
    return (size_t)N * (size_t)(K / G);
}

int tm_quant_check_shape(tm_dtype enc, int64_t N, int64_t K, tm_err *err)
{
    const char *nm = tm_dtype_name(enc);
    if (!tm_quant_is_encoding(enc))
        return tm_errf(err, TM_E_UNSUPPORTED, "encoding %d (%s) is not a weight encoding", (int)enc, nm);
    if (N < 1 || N >= TM_QUANT_MAX_DIM)
        return tm_errf(err, TM_E_INVALID, "%s: N = %lld rows is out of range [1, 2^31)", nm, (long long)N);
    if (K < 1 || K >= TM_QUANT_MAX_DIM)
        return tm_errf(err, TM_E_INVALID, "%s: K = %lld columns is out of range [1, 2^31)", nm, (long long)K);
    if (N > TM_QUANT_MAX_NUMEL / K)
        return tm_errf(err, TM_E_INVALID, "%s: N*K = %lld*%lld elements exceeds 2^40", nm, (long long)N,
                       (long long)K);
    if (tm_quant_is_quantized(enc) && enc != TM_DT_Q8PC) { /* the int4 and int6 block layouts */
        int64_t G = tm_quant_group_size(enc, K);
        int64_t m = G > TM_Q_BLOCK ? G : TM_Q_BLOCK;
        if (enc == TM_DT_Q4PC) m = TM_Q_BLOCK;
        if (K % m != 0)
            return tm_errf(err, TM_E_INVALID, "%s: K = %lld is not a multiple of %lld", nm, (long long)K,
                           (long long)m);
    }
    return TM_OK;
}

/* index of the first non-finite value of w [n], or -1 */
static int64_t first_nonfinite(const float *w, int64_t n)
{
    unsigned bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &w[i], 4);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    if (!bad) return -1;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(w[i])) return i;
    return -1;
}

/* encode one f32 row into `enc`; returns the column of a finite value that
 * overflows f16 / bf16 (or, int4 / int6, whose group scale overflows f16) or
 * of a non-finite value in a quantized encoding, else -1 */
static int64_t encode_row(tm_dtype enc, const float *w, int64_t K, void *drow, void *srow, int clip)
{
    if (tm_quant_is_quantized(enc)) {
        int64_t bad = first_nonfinite(w, K);
        if (bad >= 0) return bad;
    }
    switch (enc) {
    case TM_DT_F32:
        memcpy(drow, w, (size_t)K * 4);
        break;
    case TM_DT_BF16: {
        uint16_t *h = drow;
        for (int64_t i = 0; i < K; i++) {
            h[i] = tm_f32_to_bf16(w[i]);
            if ((h[i] & 0x7f80u) == 0x7f80u && isfinite(w[i])) return i;   /* |w| ~ FLT_MAX rounds to inf */
        }
        break;
    }
    case TM_DT_F16: {
        uint16_t *h = drow;
        for (int64_t i = 0; i < K; i++) {
            h[i] = tm_f32_to_f16(w[i]);
            if ((h[i] & 0x7c00u) == 0x7c00u && isfinite(w[i])) return i;
        }
        break;
    }
    case TM_DT_Q8PC:
        tm_q8_quant_row(w, K, drow, srow, clip);
        break;
    case TM_DT_Q6G64:
        return tm_q6_quant_row(w, K, drow, srow, clip);
    default:
        return tm_q4_quant_row(w, K, tm_quant_group_size(enc, K), drow, srow, clip);
    }
    return -1;
}

int tm_quant_quantize_rows(tm_dtype enc, tm_dtype src_dt, const void *src, int64_t N, int64_t K, int64_t r0,
                           int64_t r1, void *data, void *scales, const tm_quant_opts *o, tm_err *err)
{
    int rc = tm_quant_check_shape(enc, N, K, err);
    if (rc != TM_OK) return rc;
    const char *nm = tm_dtype_name(enc);
    if (src_dt != TM_DT_F32 && src_dt != TM_DT_BF16 && src_dt != TM_DT_F16)
        return tm_errf(err, TM_E_UNSUPPORTED, "%s: source type %s cannot be quantized (f32, bf16, f16 only)", nm,
                       tm_dtype_name(src_dt));
    if (r0 < 0 || r1 < r0 || r1 > N)
        return tm_errf(err, TM_E_INVALID, "%s: row range [%lld, %lld) is outside [0, %lld)", nm, (long long)r0,
                       (long long)r1, (long long)N);
    if (!src || !data || (tm_quant_is_quantized(enc) && !scales))
        return tm_errf(err, TM_E_INVALID, "%s: NULL %s buffer", nm, !src ? "source" : !data ? "data" : "scales");
    if (r0 == r1) return TM_OK;

    const int clip = o ? o->clip_search : 0;
    const size_t rb = tm_quant_row_bytes(enc, K), sb = tm_dtype_size(src_dt), scb = tm_quant_scale_bytes(enc);
    const int64_t ns = tm_quant_is_quantized(enc) ? K / tm_quant_group_size(enc, K) : 0;
    float *buf = NULL;
    if (src_dt != TM_DT_F32) {
        buf = malloc((size_t)K * sizeof(float));
        if (!buf) return tm_errf(err, TM_E_NOMEM, "%s: no memory for a row of %lld floats", nm, (long long)K);
    }
    rc = TM_OK;
    for (int64_t r = r0; r < r1; r++) {
        const void *s = (const uint8_t *)src + (size_t)r * (size_t)K * sb;
        const float *w = s;
        if (buf) {
            tm_to_f32(buf, s, src_dt, (size_t)K);
            w = buf;
        }
        int64_t bad = encode_row(enc, w, K, (uint8_t *)data + (size_t)r * rb,
                                 scales ? (uint8_t *)scales + (size_t)(r * ns) * scb : NULL, clip);
        if (bad >= 0) {
            rc = tm_errf(err, TM_E_INVALID, "%s: row %lld, column %lld: weight %g %s", nm, (long long)r,
                         (long long)bad, (double)w[bad],
                         !isfinite(w[bad])         ? "is not finite"
                         : enc == TM_DT_F16        ? "overflows f16 (|w| > 65504)"
                         : enc == TM_DT_BF16       ? "overflows bf16"
                         : enc == TM_DT_Q6G64      ? "is too large for the f16 group scale (|w| > 32 * 65504)"
                                                   : "is too large for the f16 group scale (|w| > 8 * 65504)");
            break;
        }
    }
    free(buf);
    return rc;
}

int tm_quant_quantize(tm_dtype enc, const float *w, int64_t N, int64_t K, void *data, void *scales,
                      const tm_quant_opts *o, tm_err *err)
{
    return tm_quant_quantize_rows(enc, TM_DT_F32, w, N, K, 0, N, data, scales, o, err);
}

void tm_quant_dequant_row(tm_dtype enc, const void *data, const void *scales, int64_t K, int64_t row, float *out)
{
    const uint16_t *s16 = scales;
    const uint8_t *d = (const uint8_t *)data + (size_t)row * tm_quant_row_bytes(enc, K);
    switch (enc) {
    case TM_DT_F32: case TM_DT_F16: case TM_DT_BF16:
        tm_to_f32(out, d, enc, (size_t)K);
        break;
    case TM_DT_Q8PC:
        tm_q8_dequant_row((const int8_t *)d, ((const float *)scales)[row], K, out);
        break;
    case TM_DT_Q4PC: case TM_DT_Q4G64: case TM_DT_Q4G32: {
        int64_t G = tm_quant_group_size(enc, K);
        tm_q4_dequant_row(d, s16 + row * (K / G), K, G, out);
        break;
    }
    case TM_DT_Q6G64:
        tm_q6_dequant_row(d, s16 + row * (K / 64), K, out);
        break;
    default:
        break;
    }
}

int tm_quant_dequant(tm_dtype enc, const void *data, const void *scales, int64_t N, int64_t K, float *out,
                     tm_err *err)
{
    int rc = tm_quant_check_shape(enc, N, K, err);
    if (rc != TM_OK) return rc;
    if (!data || !out || (tm_quant_is_quantized(enc) && !scales))
        return tm_errf(err, TM_E_INVALID, "%s: NULL buffer", tm_dtype_name(enc));
    for (int64_t r = 0; r < N; r++) tm_quant_dequant_row(enc, data, scales, K, r, out + r * K);
    return TM_OK;
}
