/* model/rope.c: RoPE inverse-frequency tables, computed in float32 the way
 * transformers' modeling_rope_utils.py does (one rounding per torch op):
 *
 *   default   inv[i] = 1 / base^(f32(2i) / f32(dim))         (pow and reciprocal in f32)
 *   linear    inv[i] / factor
 *   llama3    wavelen = (1 / inv) * f32(2π); low/high wavelen = orig / low_ff, orig / high_ff;
 *             long waves (> low) get inv / factor, short ones (< high) stay, between:
 *             s = ((1 / wavelen) * orig - low_ff) / (high_ff - low_ff);
 *             (1 - s) * inv / factor + s * inv
 *   yarn      ramp between interpolation 1 / (factor * p) and extrapolation 1 / p over the
 *             correction range [low, high] (floor/ceil when truncate), attention factor
 *             0.1·mscale·ln(factor) + 1 (or the mscale / mscale_all_dim ratio, or given)
 *   longrope  inv[i] = 1 / (ext[i] * p[i]) with ext the short or the long factors;
 *             attention factor sqrt(1 + ln(factor) / ln(orig)) (or given)
 *
 * torch computes `scalar / tensor` as reciprocal(tensor) * scalar, which is
 * what the code below does too. */
#include <math.h>
#include <stdlib.h>

#include "model/model.h"

#define PI_D 3.141592653589793

static float f32_pow(float base, float e) { return (float)pow((double)base, (double)e); }

/* p[i] = base ** (f32(2i) / f32(dim)) */
static void pos_freqs(float *p, int half, int dim, double base)
{
    for (int i = 0; i < half; i++) {
        float e = (float)(2 * i) / (float)dim;
        p[i] = f32_pow((float)base, e);
    }
}

static double yarn_mscale(double scale, double m)
{
    if (scale <= 1) return 1.0;
    return 0.1 * m * log(scale) + 1.0;
}

static double yarn_correction_dim(double rot, int dim, double base, double maxpos)
{
    return (dim * log(maxpos / (rot * 2 * PI_D))) / (2 * log(base));
}

int tm_rope_compute(tm_rope *r, int64_t max_pos, const float *short_factor, const float *long_factor,
                    tm_err *err)
{
    int dim = r->rot_dim, half = dim / 2;
    if (dim <= 0 || dim % 2) return tm_errf(err, TM_E_INVALID, "rope: rotary dimension %d is not a positive even number", dim);
    if (!(r->theta > 0) || !isfinite(r->theta)) return tm_errf(err, TM_E_INVALID, "rope: theta %g is not positive", r->theta);
    free(r->inv_freq);
    free(r->inv_freq_long);
    r->inv_freq_long = NULL;
    r->inv_freq = malloc((size_t)half * sizeof(float));
    float *p = malloc((size_t)half * sizeof(float));
    if (!r->inv_freq || !p) {
        free(p);
        return tm_errf(err, TM_E_NOMEM, "rope: out of memory");
    }
    float *inv = r->inv_freq;
    pos_freqs(p, half, dim, r->theta);
    r->attn_scaling = 1.0f;
    switch (r->type) {
    case TM_ROPE_DEFAULT:
        for (int i = 0; i < half; i++) inv[i] = 1.0f / p[i];
        break;
    case TM_ROPE_LINEAR:
        for (int i = 0; i < half; i++) inv[i] = (1.0f / p[i]) / (float)r->factor;
        break;
    case TM_ROPE_LLAMA3: {
        float factor = (float)r->factor;
        double orig = (double)r->original_max_pos;
        float lo_wl = (float)(orig / r->low_freq_factor), hi_wl = (float)(orig / r->high_freq_factor);
        float two_pi = (float)(2 * PI_D), origf = (float)orig, span = (float)(r->high_freq_factor - r->low_freq_factor);
        for (int i = 0; i < half; i++) {
            float f = 1.0f / p[i];
            float wl = (1.0f / f) * two_pi;
            float fl = wl > lo_wl ? f / factor : f;
            float s = ((1.0f / wl) * origf - (float)r->low_freq_factor) / span;
            float smoothed = (1.0f - s) * fl / factor + s * fl;
            int medium = !(wl < hi_wl) && !(wl > lo_wl);
            inv[i] = medium ? smoothed : fl;
        }
        break;
    }
    case TM_ROPE_YARN: {
        double factor = r->factor;
        if (!(factor > 0)) factor = (double)max_pos / (double)r->original_max_pos;
        double af;
        if (r->has_attention_factor) af = r->attention_factor;
        else if (r->mscale != 0 && r->mscale_all_dim != 0)
            af = yarn_mscale(factor, r->mscale) / yarn_mscale(factor, r->mscale_all_dim);
        else af = yarn_mscale(factor, 1.0);
        double bf = r->beta_fast != 0 ? r->beta_fast : 32, bs = r->beta_slow != 0 ? r->beta_slow : 1;
        double lo = yarn_correction_dim(bf, dim, r->theta, (double)r->original_max_pos);
        double hi = yarn_correction_dim(bs, dim, r->theta, (double)r->original_max_pos);
        if (r->truncate) {
            lo = floor(lo);
            hi = ceil(hi);
        }
        if (lo < 0) lo = 0;
        if (hi > dim - 1) hi = dim - 1;
        if (lo == hi) hi += 0.001;
        float ff = (float)factor, lof = (float)lo, den = (float)(hi - lo);
        for (int i = 0; i < half; i++) {
            float extra = 1.0f / p[i];
            float inter = 1.0f / (ff * p[i]);
            float ramp = ((float)i - lof) / den;
            if (ramp < 0) ramp = 0;
            if (ramp > 1) ramp = 1;
            float ef = 1.0f - ramp;
            inv[i] = inter * (1.0f - ef) + extra * ef;
        }
        r->attn_scaling = (float)af;
        break;
    }
    case TM_ROPE_LONGROPE: {
        double factor = r->factor > 0 ? r->factor : (double)max_pos / (double)r->original_max_pos;
        double af;
        if (r->has_attention_factor) af = r->attention_factor;
        else if (factor <= 1.0) af = 1.0;
        else af = sqrt(1 + log(factor) / log((double)r->original_max_pos));
        r->inv_freq_long = malloc((size_t)half * sizeof(float));
        if (!r->inv_freq_long) {
            free(p);
            return tm_errf(err, TM_E_NOMEM, "rope: out of memory");
        }
        for (int i = 0; i < half; i++) {
            inv[i] = 1.0f / (short_factor[i] * p[i]);
            r->inv_freq_long[i] = 1.0f / (long_factor[i] * p[i]);
        }
        r->attn_scaling = (float)af;
        break;
    }
    }
    free(p);
    return TM_OK;
}

const float *tm_rope_inv_freq_at(const tm_rope *r, int64_t max_pos_plus_1)
{
    if (r->inv_freq_long && max_pos_plus_1 > r->original_max_pos) return r->inv_freq_long;
    return r->inv_freq;
}

void tm_rope_free(tm_rope *r)
{
    free(r->inv_freq);
    free(r->inv_freq_long);
    r->inv_freq = r->inv_freq_long = NULL;
}
