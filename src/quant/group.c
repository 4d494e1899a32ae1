/* quant/group.c: the per-group rounding rule, its squared error and the
 * optional clipping search (error-minimising scale). */
#include "quant/quant-impl.h"

#include <math.h>

void tm_q_quant_group(const float *w, int64_t n, float d, int qmin, int qmax, int8_t *q)
{
    if (d == 0.0f) {
        for (int64_t i = 0; i < n; i++) q[i] = 0;
        return;
    }
    for (int64_t i = 0; i < n; i++) q[i] = (int8_t)tm_q_round_clamp(w[i] / d, qmin, qmax);
}

double tm_q_group_sqerr(const float *w, int64_t n, float d, int qmin, int qmax)
{
    double e = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float deq = d == 0.0f ? 0.0f : d * (float)tm_q_round_clamp(w[i] / d, qmin, qmax);
        double r = (double)w[i] - (double)deq;
        e += r * r;
    }
    return e;
}

/* the least-squares scale for the q that d gives: argmin_s sum (w - s q)^2 */
static float lsq_refit(const float *w, int64_t n, float d, int qmin, int qmax)
{
    double wq = 0.0, qq = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double qi = tm_q_round_clamp(w[i] / d, qmin, qmax);
        wq += (double)w[i] * qi;
        qq += qi * qi;
    }
    return qq > 0.0 ? (float)(wq / qq) : 0.0f;
}

/* a candidate must keep the sign of d0 and |d| >= |d0| / 2 (see quant-impl.h) */
static int usable(float d, float d0)
{
    return d != 0.0f && isfinite(d) && (d > 0.0f) == (d0 > 0.0f) && fabsf(d) >= 0.5f * fabsf(d0);
}

float tm_q_clip_search(const float *w, int64_t n, float d0, int qmin, int qmax, int f16)
{
    if (d0 == 0.0f) return 0.0f;
    float best = d0;
    double best_e = tm_q_group_sqerr(w, n, d0, qmin, qmax);
    for (int c = 99; c >= 70; c--) {
        float d = d0 * ((float)c / 100.0f);
        if (f16) d = tm_q_f16_round(d);
        if (!usable(d, d0)) continue;
        double e = tm_q_group_sqerr(w, n, d, qmin, qmax);
        if (e < best_e) {
            best_e = e;
            best = d;
        }
    }
    float r = lsq_refit(w, n, best, qmin, qmax);
    if (f16) r = tm_q_f16_round(r);
    if (usable(r, d0) && tm_q_group_sqerr(w, n, r, qmin, qmax) < best_e) best = r;
    return best;
}
