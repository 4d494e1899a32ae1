/* fuzz/fuzz_quant.c: reference quantize / dequantize (quant/) on arbitrary
 * floats. Input: byte 0 picks the encoding and clip search, byte 1 the shape
 * (N = 1..4, K = 32..256), then raw floats (NaN, inf, subnormals, huge).
 * Checked: the call fails exactly when a quantized encoding meets a
 * non-finite weight (or f16 overflows); otherwise the dequantized row is
 * finite where the weight is, each int value is the grid point nearest to
 * the weight, and plain types are within their rounding bound. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"

static const tm_dtype ENC[] = {TM_DT_F32, TM_DT_F16, TM_DT_BF16, TM_DT_Q8PC,
                               TM_DT_Q4PC, TM_DT_Q4G64, TM_DT_Q4G32, TM_DT_Q6G64};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    tm_dtype enc = ENC[data[0] % 8];
    tm_quant_opts o = {.clip_search = (data[0] >> 4) & 1};
    int64_t N = data[1] % 4 + 1, K = 32 * (data[1] / 4 % 8 + 1);
    if ((enc == TM_DT_Q4G64 || enc == TM_DT_Q6G64) && K % 64) K += 32;
    size_t need = (size_t)(N * K) * 4;
    if (size - 2 < need) return 0;
    float *w = malloc(need), *out = malloc(need);
    memcpy(w, data + 2, need);
    uint8_t *q = malloc(tm_quant_data_bytes(enc, N, K) + 1);
    void *sc = malloc(tm_quant_scale_count(enc, N, K) * 4 + 4);
    int nonfinite = 0;
    for (int64_t i = 0; i < N * K; i++) nonfinite |= !isfinite(w[i]);
    tm_err err = {0};
    int rc = tm_quant_quantize(enc, w, N, K, q, sc, &o, &err);
    /* quantized encodings fail on a non-finite weight, and int4 / int6 also on a
       group whose scale overflows f16 (the message says so); nothing else */
    int f16s = tm_quant_scale_bytes(enc) == 2;
    if (tm_quant_is_quantized(enc) && rc == TM_OK && nonfinite) abort();
    if (tm_quant_is_quantized(enc) && rc != TM_OK && !nonfinite && !(f16s && strstr(err.msg, "f16 group scale")))
        abort();
    if (rc != TM_OK && !err.msg[0]) abort();
    if (rc == TM_OK) {
        if (tm_quant_dequant(enc, q, sc, N, K, out, NULL) != TM_OK) abort();
        int64_t G = tm_quant_group_size(enc, K);
        for (int64_t i = 0; i < N * K; i++) {
            double x = w[i], y = out[i];
            if (!isfinite(x)) continue;                 /* plain encodings keep NaN / inf */
            if (!isfinite(y)) abort();
            if (!tm_quant_is_quantized(enc)) {
                double bound = enc == TM_DT_F32 ? 0 : enc == TM_DT_BF16 ? fabs(x) / 256 + 1e-38 : fabs(x) / 2048 + 6e-8;
                if (fabs(x - y) > bound) abort();
                continue;
            }
            /* y is the grid point d*q nearest to x: within |d|/2 inside the
             * range, else the end of the range; without the clip search the
             * default scale leaves at most 8 (int4) / 32 (int6) / 127.5 (int8) steps */
            double d = tm_quant_scale_at(enc, sc, (size_t)((i / K) * (K / G) + (i % K) / G));
            double qmin = enc == TM_DT_Q8PC ? -127 : enc == TM_DT_Q6G64 ? -32 : -8, qmax = -qmin - (enc != TM_DT_Q8PC);
            if (d == 0) {
                if (y != 0 || x != 0) abort();   /* d = 0 only for an all-zero group */
                continue;
            }
            double r = x / d, tol = fabs(d) * (-qmin * 1.2e-7 + 1e-6) + 1e-44;   /* d*q rounds in f32 */
            if (r >= qmin - 0.5 && r <= qmax + 0.5) {
                if (fabs(x - y) > fabs(d) / 2 + tol) abort();
            } else if (fabs(y - d * (r < qmin ? qmin : qmax)) > tol) {
                abort();
            }
            /* int4 / int6: d is m / qmin rounded away from zero to f16, so |r| <= -qmin for every
               d, subnormal f16 included; int8: a subnormal f32 d is inexact */
            if (!o.clip_search && (f16s || fabs(d) >= 1.17549435e-38) &&
                (r < qmin - 1e-5 || r > (enc == TM_DT_Q8PC ? 127.5 : -qmin) + 1e-5))
                abort();
        }
    }
    free(w);
    free(out);
    free(q);
    free(sc);
    return 0;
}
