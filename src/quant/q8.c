/* quant/q8.c: int8 per output channel (TM_DT_Q8PC), symmetric,
 * d = absmax / 127, q in [-127, 127]. */
#include "quant/quant-impl.h"

#include <float.h>
#include <math.h>

void tm_q8_quant_row(const float *w, int64_t K, int8_t *q, float *scale, int clip)
{
    float amax = 0.0f;
    for (int64_t i = 0; i < K; i++) {
        float a = fabsf(w[i]);
        amax = a > amax ? a : amax;
    }
    float d = amax / 127.0f;
    if (d == 0.0f && amax > 0.0f) d = FLT_TRUE_MIN;   /* a tiny subnormal row: keep it, not 0 */
    if (isinf(d * 127.0f)) d = nextafterf(d, 0.0f);    /* amax ~ FLT_MAX: 127 d must stay finite */
    if (clip) d = tm_q_clip_search(w, K, d, -127, 127, 0);
    tm_q_quant_group(w, K, d, -127, 127, q);
    *scale = d;
}

void tm_q8_dequant_row(const int8_t *q, float scale, int64_t K, float *out)
{
    for (int64_t i = 0; i < K; i++) out[i] = scale * (float)q[i];
}
