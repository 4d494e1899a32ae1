/* engine/cuda/cu_gemv.cu: products with quantized weights (cu_qmat, cuda-impl.h): the decode's GEMV,
 * y[B][N] = x[B][K] · W[N][K]ᵀ reading the weights in their packed form, and the dequantization to bf16
 * that a product over many rows (a prefill chunk on the decode engine, a large batch) runs through
 * cuBLAS instead.
 *
 * Layouts (core/tensor.h, docs/encodings.md; the package's bytes, rows contiguous):
 *   enc 4: uint8 [N][K/2], 32 elements per 16 bytes: byte i (0..15) holds element i in its low
 *          nibble, element i + 16 in its high one, each as q + 8; scales f16 [N][K/G], w = d q.
 *   enc 8: int8 [N][K], 16 elements per 16 bytes; scales f32 [N][K/G] (int8 per channel: G = K;
 *          int6 g64 widened to int8 at bind: G = 64).
 *
 * The GEMV: a warp per R rows; lane l takes the row's 16-byte chunks l, l + 32, ... of all R rows at
 * once, so each x value it loads (bf16, from L1 / L2: x is a few KB that every block reads) serves R
 * rows, and each weight value it unpacks serves the B sequences. Per chunk the partial sums are f32
 * (weights as exact small integers, x widened from bf16), multiplied by the chunk's group scale, then
 * summed over the lanes by shuffles. Weights are read once per B <= 8 sequences; more sequences go in
 * groups of 8 (the host wrapper), the later groups mostly from L2.
 *
 * Epilogues (cu_gemv_epi): the FFN's activation fused, so that the gate|up product writes the bf16
 * input of the down product directly (no f32 [B][2F] round trip, no pass of its own): gated, a warp
 * takes the pair of rows f (gate) and F + f (up) of the stacked weight and writes act(gate) * up; not
 * gated, act(y). Biases are added first. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "engine/cuda/cu_act.cuh"
#include "engine/cuda/cuda-impl.h"

#define GEMV_WARPS 8 /* warps per block */
#define GEMV_R 2     /* rows per warp */

__device__ __forceinline__ float bf_lo(uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float bf_hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }

__device__ __forceinline__ uint32_t word(const uint4 &v, int k)
{
    return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

/* group scale of chunk c of row n */
template <int ENC> __device__ __forceinline__ float chunk_scale(const cu_qmat &w, int n, int c)
{
    constexpr int E = ENC == 4 ? 32 : 16;
    size_t i = (size_t)n * (w.K / w.G) + (size_t)c / (w.G / E);
    return ENC == 4 ? __half2float(((const __half *)w.s)[i]) : ((const float *)w.s)[i];
}

/* y[j][n] (row stride ldy) for rows n of this warp, sequences j < B: x[j][K] bf16 (row stride ldx).
 * EPI 0: y f32; 1: the gated activation into ep.g (rows f and F + f); 2: the activation into ep.g */
template <int ENC, int B, int EPI>
__global__ void __launch_bounds__(GEMV_WARPS * 32) k_gemv(cu_qmat w, const uint16_t *__restrict__ x, int ldx,
                                                           float *__restrict__ y, int ldy, cu_gemv_epi ep)
{
    constexpr int E = ENC == 4 ? 32 : 16;
    const int lane = threadIdx.x & 31, wi = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    const int n0 = EPI == 1 ? wi : wi * GEMV_R;
    if (EPI == 1 ? wi >= ep.F : n0 >= w.N) return;
    const int nc = w.K / E;
    const size_t rowb = (size_t)w.K * ENC / 8;
    float acc[GEMV_R][B];
#pragma unroll
    for (int r = 0; r < GEMV_R; r++)
#pragma unroll
        for (int j = 0; j < B; j++) acc[r][j] = 0.f;
#pragma unroll 2
    for (int c = lane; c < nc; c += 32) {
        uint4 q[GEMV_R];
        float d[GEMV_R];
#pragma unroll
        for (int r = 0; r < GEMV_R; r++) {
            int n = EPI == 1 ? wi + r * ep.F /* gate, up */ : n0 + r < w.N ? n0 + r : w.N - 1; /* a row past the end
                                                                          repeats the last; not stored */
            q[r] = __ldg((const uint4 *)(w.q + (size_t)n * rowb) + c);
            d[r] = chunk_scale<ENC>(w, n, c);
        }
        float s[GEMV_R][B];
#pragma unroll
        for (int r = 0; r < GEMV_R; r++)
#pragma unroll
            for (int j = 0; j < B; j++) s[r][j] = 0.f;
        const uint16_t *xc = x + (size_t)c * E;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            /* enc 4: word k's bytes hold elements 4k..4k+3 (low nibbles) and 16+4k.. (high);
               enc 8: elements 4k..4k+3 */
            float xl[B][4], xh[B][4];
#pragma unroll
            for (int j = 0; j < B; j++) {
                uint2 a = __ldg((const uint2 *)(xc + (size_t)j * ldx + 4 * k));
                xl[j][0] = bf_lo(a.x), xl[j][1] = bf_hi(a.x), xl[j][2] = bf_lo(a.y), xl[j][3] = bf_hi(a.y);
                if (ENC == 4) {
                    uint2 b = __ldg((const uint2 *)(xc + (size_t)j * ldx + 16 + 4 * k));
                    xh[j][0] = bf_lo(b.x), xh[j][1] = bf_hi(b.x), xh[j][2] = bf_lo(b.y), xh[j][3] = bf_hi(b.y);
                }
            }
#pragma unroll
            for (int r = 0; r < GEMV_R; r++) {
                uint32_t u = word(q[r], k);
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    uint32_t v = (u >> (8 * i)) & 0xffu;
                    if (ENC == 4) {
                        float lo = (float)((int)(v & 15u) - 8), hi = (float)((int)(v >> 4) - 8);
#pragma unroll
                        for (int j = 0; j < B; j++) s[r][j] = fmaf(lo, xl[j][i], fmaf(hi, xh[j][i], s[r][j]));
                    } else {
                        float q8 = (float)(int8_t)v;
#pragma unroll
                        for (int j = 0; j < B; j++) s[r][j] = fmaf(q8, xl[j][i], s[r][j]);
                    }
                }
            }
        }
#pragma unroll
        for (int r = 0; r < GEMV_R; r++)
#pragma unroll
            for (int j = 0; j < B; j++) acc[r][j] = fmaf(s[r][j], d[r], acc[r][j]);
    }
#pragma unroll
    for (int r = 0; r < GEMV_R; r++)
#pragma unroll
        for (int j = 0; j < B; j++) {
            float v = acc[r][j];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            acc[r][j] = v;
        }
    if (lane != 0) return;
    if constexpr (EPI == 1) {
        const float bg = ep.b ? ep.b[wi] : 0.f, bu = ep.b ? ep.b[ep.F + wi] : 0.f;
#pragma unroll
        for (int j = 0; j < B; j++)
            ep.g[(size_t)j * ep.ldg + wi] = __bfloat16_as_ushort(__float2bfloat16_rn(glu_f(ep.act, acc[0][j] + bg, acc[1][j] + bu)));
    } else {
#pragma unroll
        for (int r = 0; r < GEMV_R; r++)
            if (n0 + r < w.N)
#pragma unroll
                for (int j = 0; j < B; j++) {
                    if (EPI == 0) y[(size_t)j * ldy + n0 + r] = acc[r][j];
                    else
                        ep.g[(size_t)j * ep.ldg + n0 + r] = __bfloat16_as_ushort(
                            __float2bfloat16_rn(act_f(ep.act, acc[r][j] + (ep.b ? ep.b[n0 + r] : 0.f))));
                }
    }
}

template <int ENC, int B, int EPI>
static void launch(cudaStream_t s, const cu_qmat &w, const uint16_t *x, int ldx, float *y, int ldy, const cu_gemv_epi &ep)
{
    int per = EPI == 1 ? GEMV_WARPS : GEMV_WARPS * GEMV_R, n = EPI == 1 ? ep.F : w.N;
    k_gemv<ENC, B, EPI><<<(n + per - 1) / per, GEMV_WARPS * 32, 0, s>>>(w, x, ldx, y, ldy, ep);
}

template <int ENC, int EPI>
static void launch_b(cudaStream_t s, const cu_qmat &w, const uint16_t *x, int ldx, int B, float *y, int ldy, const cu_gemv_epi &ep)
{
    switch (B) {
    case 1: launch<ENC, 1, EPI>(s, w, x, ldx, y, ldy, ep); break;
    case 2: launch<ENC, 2, EPI>(s, w, x, ldx, y, ldy, ep); break;
    case 3: launch<ENC, 3, EPI>(s, w, x, ldx, y, ldy, ep); break;
    case 4: launch<ENC, 4, EPI>(s, w, x, ldx, y, ldy, ep); break;
    case 5: launch<ENC, 5, EPI>(s, w, x, ldx, y, ldy, ep); break;
    case 6: launch<ENC, 6, EPI>(s, w, x, ldx, y, ldy, ep); break;
    case 7: launch<ENC, 7, EPI>(s, w, x, ldx, y, ldy, ep); break;
    default: launch<ENC, 8, EPI>(s, w, x, ldx, y, ldy, ep); break;
    }
}

template <int EPI>
static void gemv_groups(cudaStream_t s, const cu_qmat *w, const uint16_t *x, int ldx, int B, float *y, int ldy, cu_gemv_epi ep)
{
    for (int j = 0; j < B; j += 8) {
        int b = B - j < 8 ? B - j : 8;
        const uint16_t *xj = x + (size_t)j * ldx;
        float *yj = y ? y + (size_t)j * ldy : NULL;
        if (w->enc == 4) launch_b<4, EPI>(s, *w, xj, ldx, b, yj, ldy, ep);
        else launch_b<8, EPI>(s, *w, xj, ldx, b, yj, ldy, ep);
        if (ep.g) ep.g += (size_t)8 * ep.ldg;
    }
}

void cu_gemv_q(cu_stream s, const cu_qmat *w, const uint16_t *x, int ldx, int B, float *y, int ldy)
{
    gemv_groups<0>(s, w, x, ldx, B, y, ldy, cu_gemv_epi{});
}

void cu_gemv_act(cu_stream s, const cu_qmat *w, const uint16_t *x, int ldx, int B, const cu_gemv_epi *ep)
{
    if (ep->gated) gemv_groups<1>(s, w, x, ldx, B, NULL, 0, *ep);
    else gemv_groups<2>(s, w, x, ldx, B, NULL, 0, *ep);
}

/* out[N][K] bf16 = the weights, a thread per 16-byte chunk */
template <int ENC> __global__ void k_dequant(cu_qmat w, uint16_t *__restrict__ out)
{
    constexpr int E = ENC == 4 ? 32 : 16;
    const int nc = w.K / E;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)w.N * nc) return;
    int n = (int)(i / nc), c = (int)(i % nc);
    uint4 q = __ldg((const uint4 *)(w.q + (size_t)n * w.K * ENC / 8) + c);
    float d = chunk_scale<ENC>(w, n, c);
    uint16_t v[E];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        uint32_t u = word(q, k);
#pragma unroll
        for (int b = 0; b < 4; b++) {
            uint32_t byte = (u >> (8 * b)) & 0xffu;
            if (ENC == 4) {
                v[4 * k + b] = __bfloat16_as_ushort(__float2bfloat16_rn((float)((int)(byte & 15u) - 8) * d));
                v[16 + 4 * k + b] = __bfloat16_as_ushort(__float2bfloat16_rn((float)((int)(byte >> 4) - 8) * d));
            } else {
                v[4 * k + b] = __bfloat16_as_ushort(__float2bfloat16_rn((float)(int8_t)byte * d));
            }
        }
    }
    uint4 *o = (uint4 *)(out + (size_t)n * w.K + (size_t)c * E);
#pragma unroll
    for (int p = 0; p < E / 8; p++)
        o[p] = make_uint4(v[8 * p] | (uint32_t)v[8 * p + 1] << 16, v[8 * p + 2] | (uint32_t)v[8 * p + 3] << 16,
                          v[8 * p + 4] | (uint32_t)v[8 * p + 5] << 16, v[8 * p + 6] | (uint32_t)v[8 * p + 7] << 16);
}

void cu_dequant_q(cu_stream s, const cu_qmat *w, uint16_t *out)
{
    size_t n = (size_t)w->N * (w->K / (w->enc == 4 ? 32 : 16));
    unsigned blocks = (unsigned)((n + 255) / 256);
    if (w->enc == 4) k_dequant<4><<<blocks, 256, 0, s>>>(*w, out);
    else k_dequant<8><<<blocks, 256, 0, s>>>(*w, out);
}
