/* tests/test_cuda_attn.c: the CUDA prefill attention (engine/cuda/cu_attn.cu: k_attn_fa for every head dim
 * the engine binds, and k_attn_combine's merge of key segments) against a scalar reference in double, on
 * random shapes:
 *   - head dims 16 .. 256 (every multiple of 16), grouped queries (H / Hk of 1 to 4), chunks of 1 to 512
 *     rows with padding rows past n_valid (their output must be exactly 0), earlier positions (pos0) so
 *     the keys reach past the chunk, tiles cut short by the chunk's last position;
 *   - sliding windows (narrower and wider than a tile), Gemma 2's soft-capping, ALiBi slopes, GPT-OSS's
 *     sinks;
 *   - keys split in 1 to 16 segments and merged.
 * The reference takes q rounded to bf16 (as the kernel stores it) and the bf16 keys and values; the
 * kernel also rounds P to bf16 before P·V and its output to bf16, so the bound is 2^-7 of the largest
 * |v| (values are in [-1, 1]). Without a CUDA build (make CUDA=1) or a GPU it prints SKIP and checks
 * nothing. */
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef TM_CUDA
#include <cuda_runtime.h>

#include "core/tensor.h"
#include "engine/cuda/cuda-impl.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static int irand(int lo, int hi) { return lo + (int)(urand() * (hi - lo + 1)); } /* lo .. hi */

typedef struct {
    int Dh, H, Hk, T, n_valid, pos0, window, S, alibi, sinks, every; /* every: rows checked, 1 in every (set by one) */
    float softcap;
} acase;

static void *dev(const void *host, size_t n)
{
    void *p = NULL;
    CHECK(cudaMalloc(&p, n) == cudaSuccess);
    if (host) CHECK(cudaMemcpy(p, host, n, cudaMemcpyHostToDevice) == cudaSuccess);
    return p;
}

static void one(acase *c)
{
    /* rows checked: about 2e7 multiply-adds of reference a case */
    c->every = (int)((double)c->T * (c->pos0 + c->T) * c->H * c->Dh / 2e7) + 1;
    const int Dh = c->Dh, H = c->H, Hk = c->Hk, T = c->T, cap = c->pos0 + T + 5, nqkv = (H + 2 * Hk) * Dh;
    char what[200];
    snprintf(what, sizeof what, "Dh %d, H %d / %d, T %d (%d real) at %d, window %d, softcap %g, alibi %d, sinks %d, S %d",
             Dh, H, Hk, T, c->n_valid, c->pos0, c->window, c->softcap, c->alibi, c->sinks, c->S);
    float *qkv = malloc(sizeof(float) * (size_t)T * nqkv), alibi[64], sinks[64];
    uint16_t *kc = malloc(sizeof(uint16_t) * (size_t)Hk * cap * Dh), *vc = malloc(sizeof(uint16_t) * (size_t)Hk * cap * Dh);
    uint16_t *out = malloc(sizeof(uint16_t) * (size_t)T * H * Dh);
    for (size_t i = 0; i < (size_t)T * nqkv; i++) qkv[i] = (float)((urand() * 2 - 1) * 3);
    for (size_t i = 0; i < (size_t)Hk * cap * Dh; i++) {
        kc[i] = tm_f32_to_bf16((float)(urand() * 2 - 1));
        vc[i] = tm_f32_to_bf16((float)(urand() * 2 - 1));
    }
    /* positions past the chunk's last real row hold NaN: the kernel must never let them reach a row */
    for (int g = 0; g < Hk; g++)
        for (int p = c->pos0 + c->n_valid; p < cap; p++)
            for (int d = 0; d < Dh; d++)
                kc[((size_t)g * cap + p) * Dh + d] = vc[((size_t)g * cap + p) * Dh + d] = 0x7fc0;
    for (int h = 0; h < H; h++) alibi[h] = (float)-pow(2.0, -8.0 * (h + 1) / H), sinks[h] = (float)(urand() * 4 - 2);
    float *dqkv = dev(qkv, sizeof(float) * (size_t)T * nqkv), *dal = dev(alibi, sizeof alibi), *dsk = dev(sinks, sizeof sinks);
    uint16_t *dk = dev(kc, sizeof(uint16_t) * (size_t)Hk * cap * Dh), *dv = dev(vc, sizeof(uint16_t) * (size_t)Hk * cap * Dh);
    uint16_t *dout = dev(NULL, sizeof(uint16_t) * (size_t)T * H * Dh);
    CHECK(cudaMemset(dout, 0xff, sizeof(uint16_t) * (size_t)T * H * Dh) == cudaSuccess); /* NaNs unless written */
    float *scratch = c->S > 1 ? dev(NULL, cu_attention_scratch(T, H, Dh, c->S)) : NULL;
    const float scale = (float)(1.0 / sqrt((double)Dh));
    cu_attn_args a = {.qkv = dqkv, .nqkv = nqkv, .T = T, .n_valid = c->n_valid, .pos0 = c->pos0, .H = H, .Hk = Hk,
                      .Dh = Dh, .kc = dk, .vc = dv, .cap = cap, .window = c->window, .scale = scale,
                      .softcap = c->softcap, .alibi = c->alibi ? dal : NULL, .sinks = c->sinks ? dsk : NULL, .out = dout};
    CHECKF(cu_attention_setup(Dh), "%s: setup", what);
    cu_attention(0, &a, scratch, c->S);
    cudaError_t ce = cudaDeviceSynchronize();
    CHECKF(ce == cudaSuccess, "%s: %s", what, cudaGetErrorString(ce));
    CHECK(cudaMemcpy(out, dout, sizeof(uint16_t) * (size_t)T * H * Dh, cudaMemcpyDeviceToHost) == cudaSuccess);
    double worst = 0, *sc = malloc(sizeof(double) * cap), *o = malloc(sizeof(double) * Dh);
    int pad_bad = 0;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            const uint16_t *got = out + ((size_t)t * H + h) * Dh;
            if (t >= c->n_valid) {
                for (int d = 0; d < Dh; d++) pad_bad += got[d] != 0;
                continue;
            }
            if (t % c->every) continue;
            const int ir = c->pos0 + t, g = h / (H / Hk), j0 = c->window > 0 && ir - c->window + 1 > 0 ? ir - c->window + 1 : 0;
            double mx = c->sinks ? sinks[h] : -INFINITY, sum = 0;
            for (int j = j0; j <= ir; j++) {
                double s = 0;
                for (int d = 0; d < Dh; d++)
                    s += (double)tm_bf16_to_f32(tm_f32_to_bf16(qkv[(size_t)t * nqkv + (size_t)h * Dh + d])) *
                         tm_bf16_to_f32(kc[((size_t)g * cap + j) * Dh + d]);
                s *= scale;
                if (c->softcap != 0.f) s = tanh(s / c->softcap) * c->softcap;
                if (c->alibi) s += alibi[h] * (double)(j - ir);
                sc[j] = s;
                mx = s > mx ? s : mx;
            }
            memset(o, 0, sizeof(double) * Dh);
            if (c->sinks) sum = exp(sinks[h] - mx);
            for (int j = j0; j <= ir; j++) {
                double p = exp(sc[j] - mx);
                sum += p;
                for (int d = 0; d < Dh; d++) o[d] += p * tm_bf16_to_f32(vc[((size_t)g * cap + j) * Dh + d]);
            }
            for (int d = 0; d < Dh; d++) {
                double e = fabs(tm_bf16_to_f32(got[d]) - o[d] / sum);
                worst = e == e && e > worst ? e : (e != e ? INFINITY : worst);
            }
        }
    CHECKF(worst <= 1.0 / 128, "%s: worst |diff| %.3e", what, worst);
    CHECKF(pad_bad == 0, "%s: %d padding outputs not 0", what, pad_bad);
    cudaFree(dqkv), cudaFree(dal), cudaFree(dsk), cudaFree(dk), cudaFree(dv), cudaFree(dout), cudaFree(scratch);
    free(qkv), free(kc), free(vc), free(out), free(sc), free(o);
}

int main(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("SKIP cuda attention: no CUDA device\n");
        return th_done("test_cuda_attn");
    }
    /* fixed cases: a chunk from 0, one after earlier positions, both cut short; each head dim once */
    for (int Dh = 16; Dh <= CU_MAX_DH; Dh += 16) {
        acase c = {.Dh = Dh, .H = 4, .Hk = 2, .T = 128, .n_valid = 100, .pos0 = 0, .S = 1};
        one(&c);
        c.pos0 = 200, c.T = 64, c.n_valid = 64, c.S = 3;
        one(&c);
    }
    /* random ones */
    for (int i = 0; i < 120; i++) {
        acase c = {0};
        c.Dh = 16 * irand(1, CU_MAX_DH / 16);
        c.Hk = irand(1, 3), c.H = c.Hk * irand(1, 4);
        c.T = urand() < 0.3 ? irand(1, 70) : irand(64, 512);
        c.n_valid = urand() < 0.5 ? c.T : irand(1, c.T);
        c.pos0 = urand() < 0.4 ? 0 : irand(1, 2500);
        c.window = urand() < 0.3 ? (urand() < 0.5 ? irand(1, 80) : irand(64, 1500)) : 0;
        c.softcap = urand() < 0.2 ? 30.f : 0.f;
        c.alibi = urand() < 0.15, c.sinks = urand() < 0.2;
        const int Ss[] = {1, 1, 2, 3, 5, 16};
        c.S = Ss[irand(0, 5)];
        one(&c);
    }
    /* a long context in 16 segments, a whole 512-row chunk (Llama-3.2-1B's heads) */
    acase big = {.Dh = 64, .H = 32, .Hk = 8, .T = 512, .n_valid = 512, .pos0 = 7680, .S = 8};
    one(&big);
    big.S = 16, big.window = 4096;
    one(&big);
    return th_done("test_cuda_attn");
}
#else
int main(void)
{
    printf("SKIP cuda attention: not in this build (make CUDA=1)\n");
    return th_done("test_cuda_attn");
}
#endif
