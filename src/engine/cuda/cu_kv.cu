/* engine/cuda/cu_kv.cu: the KV side of the CUDA engine. cu_qkv_post finishes q, k and v after the
 * q|k|v GEMM (bias, clamp, per-head norms, RoPE), writes k and v into the device mirror and into the
 * export rows the host scatters into the paged cache; cu_kv_ingest fills the mirror from the paged
 * cache's blocks (a chunk whose earlier positions the mirror does not hold). One warp per head row;
 * the row sits in shared memory while the lanes work on it. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#include "engine/cuda/cu_launch.cuh"
#include "engine/cuda/cu_rows.cuh"
#include "engine/cuda/cuda-impl.h"

#define WARPS 8

static __device__ __forceinline__ float bf(uint16_t h) { return __bfloat162float(__ushort_as_bfloat16(h)); }
static __device__ __forceinline__ uint16_t tobf(float v) { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); }

/* a row of Dh elements in buf (the warp's lanes), normed in place (kind 0 RMS, 1 LayerNorm) */
static __device__ void row_norm(float *buf, int Dh, int kind, const float *w, const float *b, float eps, int lane)
{
    float mean = 0;
    if (kind == 1) {
        float s = 0;
        for (int d = lane; d < Dh; d += 32) s += buf[d];
        mean = warp_sum(s) / Dh;
    }
    float ss = 0;
    for (int d = lane; d < Dh; d += 32) ss += (buf[d] - mean) * (buf[d] - mean);
    float r = (float)(1.0 / sqrt((double)(warp_sum(ss) / Dh + eps)));
    for (int d = lane; d < Dh; d += 32) buf[d] = ((buf[d] - mean) * r) * w[d] + (b ? b[d] : 0.f);
    __syncwarp();
}

/* the export row (kvcache.h's dtypes; int8 by tm_kv_quant_row's rule) */
static __device__ void export_row(const cu_qkv_args &a, const float *buf, int kv, int g, int t, int lane)
{
    size_t row = ((size_t)kv * a.Hk + g) * a.T + t;
    int Dh = a.Dh;
    switch (a.exp_dtype) {
    case 0:
        for (int d = lane; d < Dh; d += 32) ((uint16_t *)a.exp_rows)[row * Dh + d] = tobf(buf[d]);
        break;
    case 1:
        for (int d = lane; d < Dh; d += 32) ((__half *)a.exp_rows)[row * Dh + d] = __float2half_rn(buf[d]);
        break;
    case 2:
        for (int d = lane; d < Dh; d += 32) ((float *)a.exp_rows)[row * Dh + d] = buf[d];
        break;
    default: {
        float amax = 0.f;
        for (int d = lane; d < Dh; d += 32) {
            float v = fabsf(buf[d]);
            if (v > amax) amax = v; /* NaN compares false: ignored */
        }
        amax = warp_max(amax);
        float inv = amax > 0.f ? 127.f / amax : 0.f;
        for (int d = lane; d < Dh; d += 32) {
            float p = buf[d] * inv;
            int q = !(p == p) ? 0 : p >= 127.f ? 127 : p <= -127.f ? -127 : __float2int_rn(p);
            ((int8_t *)a.exp_rows)[row * Dh + d] = (int8_t)q;
        }
        if (lane == 0) a.exp_scale[row] = amax / 127.f;
    }
    }
}

__global__ void k_qkv_post(cu_qkv_args a)
{
    pdl_enter();
    extern __shared__ float sbuf[]; /* [WARPS][Dh] */
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    int slots = a.H + 2 * a.Hk;
    long item = (long)blockIdx.x * WARPS + wid;
    if (item >= (long)a.T * slots) return;
    int t = (int)(item / slots), slot = (int)(item % slots), Dh = a.Dh;
    int part = slot < a.H ? 0 : slot < a.H + a.Hk ? 1 : 2, head = part == 0 ? slot : part == 1 ? slot - a.H : slot - a.H - a.Hk;
    float *buf = sbuf + (size_t)wid * Dh;
    float *x = a.qkv + (size_t)t * slots * Dh + (size_t)slot * Dh;
    for (int d = lane; d < Dh; d += 32) {
        float v = x[d] + (a.bias ? a.bias[(size_t)slot * Dh + d] : 0.f);
        if (a.clip > 0) v = v < -a.clip ? -a.clip : v > a.clip ? a.clip : v;
        buf[d] = v;
    }
    __syncwarp();
    if (part < 2) {
        const float *w = part == 0 ? a.qn : a.kn;
        if (w) row_norm(buf, Dh, a.norm_kind, w + (a.per_head ? (size_t)head * Dh : 0), part == 0 ? a.qnb : a.knb, a.eps, lane);
        if (a.inv) {
            int half = a.rot_dim / 2, p = a.pos ? a.pos[t] : a.pos0 + t;
            for (int i = lane; i < half; i += 32) {
                float ang = (float)p * a.inv[i];
                double sd, cd;
                sincos((double)ang, &sd, &cd);
                float c = (float)cd * a.rope_scale, s = (float)sd * a.rope_scale;
                float u = buf[i], v = buf[i + half];
                buf[i] = u * c - v * s;
                buf[i + half] = v * c + u * s;
            }
            __syncwarp();
        }
    }
    if (part == 0) {
        for (int d = lane; d < Dh; d += 32) x[d] = buf[d];
        return;
    }
    if (a.kc) {
        uint16_t *m = (part == 1 ? a.kc : a.vc) + ((size_t)head * a.cap + a.pos0 + t) * Dh;
        for (int d = lane; d < Dh; d += 32) m[d] = tobf(buf[d]);
    }
    if (a.exp_rows && t < a.n_valid) export_row(a, buf, part - 1, head, t, lane);
}

extern "C" void cu_qkv_post(cu_stream s, const cu_qkv_args *a)
{
    long items = (long)a->T * (a->H + 2 * a->Hk);
    cu_go(k_qkv_post, (unsigned)((items + WARPS - 1) / WARPS), WARPS * 32, WARPS * (size_t)a->Dh * sizeof(float), s, *a);
}

__global__ void k_kv_ingest(uint16_t *kc, uint16_t *vc, const uint8_t *blk, size_t blk_bytes, int L, int np, int ps,
                            int Hk, int Dh, int cap, int n, int dt)
{
    pdl_enter();
    int lane = threadIdx.x & 31;
    long item = (long)blockIdx.x * WARPS + (threadIdx.x >> 5); /* (l, kv, g, pos) */
    if (item >= (long)L * 2 * Hk * n) return;
    int pos = (int)(item % n);
    long r = item / n;
    int g = (int)(r % Hk), kv = (int)(r / Hk % 2), l = (int)(r / Hk / 2);
    int i = pos / ps, slot = pos % ps;
    const uint8_t *b = blk + ((((size_t)l * np + i) * 2 + kv) * Hk + g) * blk_bytes;
    uint16_t *m = (kv ? vc : kc) + (((size_t)l * Hk + g) * cap + pos) * Dh;
    for (int d = lane; d < Dh; d += 32) {
        float x;
        size_t e = (size_t)slot * Dh + d;
        switch (dt) {
        case 0: x = bf(((const uint16_t *)b)[e]); break;
        case 1: x = __half2float(((const __half *)b)[e]); break;
        case 2: x = ((const float *)b)[e]; break;
        default: x = ((const float *)b)[slot] * (float)((const int8_t *)(b + 4 * (size_t)ps))[e];
        }
        m[d] = tobf(x);
    }
}

extern "C" void cu_kv_ingest(cu_stream s, uint16_t *kc, uint16_t *vc, const uint8_t *blk, size_t blk_bytes, int L, int np,
                             int ps, int Hk, int Dh, int cap, int n, int dt)
{
    long items = (long)L * 2 * Hk * n;
    if (items == 0) return;
    cu_go(k_kv_ingest, (unsigned)((items + WARPS - 1) / WARPS), WARPS * 32, 0, s, kc, vc, blk, blk_bytes, L, np, ps, Hk, Dh,
                                                                                cap, n, dt);
}
