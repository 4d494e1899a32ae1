/* engine/cpu/ref_ops.c: scalar references of the small ops (norms,
 * activations, RoPE, softmax, conversions, quantization), and the "scalar"
 * variant's table. */
#include <math.h>
#include <string.h>

#include "engine/cpu/kernels-impl.h"

static float rms_inv(const float *x, int D, float eps)
{
    double ss = 0;
    for (int i = 0; i < D; i++) ss += (double)x[i] * x[i];
    return (float)(1.0 / sqrt(ss / D + eps));
}

/* One normalized row (f32), the common core of the three RMSNorm ops. */
static void rms_row(float *y, const float *x, const float *w, int D, float eps, int add_one)
{
    float r = rms_inv(x, D, eps);
    for (int i = 0; i < D; i++) y[i] = (x[i] * r) * (add_one ? 1.f + w[i] : w[i]);
}

void tm_kref_rmsnorm(float *y, const float *x, const float *w, int T, int D, float eps, int add_one)
{
    for (int t = 0; t < T; t++) rms_row(y + (size_t)t * D, x + (size_t)t * D, w, D, eps, add_one);
}

void tm_kref_rmsnorm_bf16(uint16_t *yb, int ld, const float *x, const float *w, int T, int D, float eps, int add_one)
{
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * D;
        float r = rms_inv(xr, D, eps);
        uint16_t *o = yb + (size_t)t * ld;
        for (int i = 0; i < D; i++) o[i] = tm_f32_to_bf16((xr[i] * r) * (add_one ? 1.f + w[i] : w[i]));
        for (int i = D; i < ld; i++) o[i] = 0;
    }
}

static void quant_row(uint8_t *q, float *s, int ld, const float *x, int D)
{
    float amax = 0.f;
    for (int i = 0; i < D; i++) {
        float a = fabsf(x[i]);
        if (a > amax) amax = a;
    }
    float inv = amax > 0.f ? 127.f / amax : 0.f;
    *s = amax / 127.f;
    for (int i = 0; i < D; i++) q[i] = (uint8_t)(tm_kq8(x[i], inv) + 128);
    for (int i = D; i < ld; i++) q[i] = 128;
}

void tm_kref_quant_q8(uint8_t *yq, float *ys, int ld, const float *x, int T, int D)
{
    for (int t = 0; t < T; t++) quant_row(yq + (size_t)t * ld, ys + t, ld, x + (size_t)t * D, D);
}

void tm_kref_rmsnorm_q8(uint8_t *yq, float *ys, int ld, const float *x, const float *w, int T, int D, float eps, int add_one)
{
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * D;
        float r = rms_inv(xr, D, eps);
        /* pass 1: absmax of the normalized row; pass 2: quantize it */
        float amax = 0.f;
        for (int i = 0; i < D; i++) amax = fmaxf(amax, fabsf((xr[i] * r) * (add_one ? 1.f + w[i] : w[i])));
        float inv = amax > 0.f ? 127.f / amax : 0.f;
        ys[t] = amax / 127.f;
        uint8_t *o = yq + (size_t)t * ld;
        for (int i = 0; i < D; i++) o[i] = (uint8_t)(tm_kq8((xr[i] * r) * (add_one ? 1.f + w[i] : w[i]), inv) + 128);
        for (int i = D; i < ld; i++) o[i] = 128;
    }
}

void tm_kref_layernorm(float *y, const float *x, const float *w, const float *b, int T, int D, float eps)
{
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * D;
        float *yr = y + (size_t)t * D;
        double s = 0, ss = 0;
        for (int i = 0; i < D; i++) s += xr[i];
        float mean = (float)(s / D);
        for (int i = 0; i < D; i++) ss += (double)(xr[i] - mean) * (xr[i] - mean);
        float r = (float)(1.0 / sqrt(ss / D + eps));
        for (int i = 0; i < D; i++) yr[i] = ((xr[i] - mean) * r) * w[i] + (b ? b[i] : 0.f);
    }
}

void tm_kref_silu_mul(float *y, const float *g, const float *u, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = g[i] / (1.f + expf(-g[i])) * (u ? u[i] : 1.f);
}

void tm_kref_gelu_tanh_mul(float *y, const float *g, const float *u, size_t n)
{
    /* in double: 1 + tanh(z) cancels badly in f32 for z << 0 */
    const double c = 0.7978845608028654; /* sqrt(2/pi) */
    for (size_t i = 0; i < n; i++) {
        double x = g[i];
        y[i] = (float)(0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x))) * (u ? u[i] : 1.f));
    }
}

void tm_kref_gelu_mul(float *y, const float *g, const float *u, size_t n)
{
    /* 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2), in double: no cancellation for x << 0 */
    for (size_t i = 0; i < n; i++) {
        double x = g[i];
        y[i] = (float)(0.5 * x * erfc(-x * 0.70710678118654752) * (u ? u[i] : 1.f));
    }
}

void tm_kref_relu2_mul(float *y, const float *g, const float *u, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = (g[i] > 0 ? g[i] * g[i] : 0.f) * (u ? u[i] : 1.f);
}

void tm_kref_swiglu_oai_mul(float *y, const float *g, const float *u, size_t n)
{
    const double L = TM_KSWIGLU_OAI_LIMIT, a = TM_KSWIGLU_OAI_ALPHA;
    for (size_t i = 0; i < n; i++) {
        double x = g[i] < L ? g[i] : L, up = u ? (u[i] < -L ? -L : u[i] > L ? L : u[i]) : 0.0;
        y[i] = (float)(x / (1.0 + exp(-a * x)) * (up + 1.0));
    }
}

void tm_kref_relu_mul(float *y, const float *g, const float *u, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = (g[i] > 0 ? g[i] : 0.f) * (u ? u[i] : 1.f);
}

void tm_kref_rope(float *x, const float *cos_t, const float *sin_t, int T, int H, int Dh)
{
    int half = Dh / 2;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            float *v = x + ((size_t)t * H + h) * Dh;
            const float *c = cos_t + (size_t)t * half, *s = sin_t + (size_t)t * half;
            for (int i = 0; i < half; i++) {
                float x1 = v[i], x2 = v[i + half];
                v[i] = x1 * c[i] - x2 * s[i];
                v[i + half] = x2 * c[i] + x1 * s[i];
            }
        }
}

void tm_kref_softmax(float *x, int R, int n)
{
    for (int r = 0; r < R; r++) {
        float *v = x + (size_t)r * n;
        float mx = -INFINITY;
        for (int i = 0; i < n; i++) mx = fmaxf(mx, v[i]);
        if (mx == -INFINITY) { /* fully masked row */
            for (int i = 0; i < n; i++) v[i] = 0.f;
            continue;
        }
        double sum = 0;
        for (int i = 0; i < n; i++) {
            v[i] = expf(v[i] - mx);
            sum += v[i];
        }
        float inv = (float)(1.0 / sum);
        for (int i = 0; i < n; i++) v[i] *= inv;
    }
}

void tm_kref_f32_to_bf16(uint16_t *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = tm_f32_to_bf16(x[i]);
}

void tm_kref_bf16_to_f32(float *y, const uint16_t *x, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = tm_bf16_to_f32(x[i]);
}

void tm_kref_f32_to_f16(uint16_t *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = tm_f32_to_f16(x[i]);
}

void tm_kref_f16_to_f32(float *y, const uint16_t *x, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = tm_f16_to_f32(x[i]);
}

void tm_kvariant_scalar(tm_kernels *k)
{
    k->gemv_q4 = tm_kref_gemv_q4;
    k->gemv_q8 = tm_kref_gemv_q8;
    k->gemv_bf16 = tm_kref_gemv_bf16;
    k->gemm_bf16 = tm_kref_gemm_bf16;
    k->gemm_q8 = tm_kref_gemm_q8;
    k->rmsnorm = tm_kref_rmsnorm;
    k->rmsnorm_bf16 = tm_kref_rmsnorm_bf16;
    k->rmsnorm_q8 = tm_kref_rmsnorm_q8;
    k->layernorm = tm_kref_layernorm;
    k->relu_mul = tm_kref_relu_mul;
    k->relu2_mul = tm_kref_relu2_mul;
    k->swiglu_oai_mul = tm_kref_swiglu_oai_mul;
    k->quant_q8 = tm_kref_quant_q8;
    k->silu_mul = tm_kref_silu_mul;
    k->gelu_tanh_mul = tm_kref_gelu_tanh_mul;
    k->gelu_mul = tm_kref_gelu_mul;
    k->rope = tm_kref_rope;
    k->softmax = tm_kref_softmax;
    k->f32_to_bf16 = tm_kref_f32_to_bf16;
    k->bf16_to_f32 = tm_kref_bf16_to_f32;
    k->f32_to_f16 = tm_kref_f32_to_f16;
    k->f16_to_f32 = tm_kref_f16_to_f32;
    k->attn_prefill = tm_kref_attn_prefill;
    k->attn_decode = tm_kref_attn_decode;
}
