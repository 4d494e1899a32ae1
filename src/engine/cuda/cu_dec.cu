/* engine/cuda/cu_dec.cu: the decode step's KV on the device. The engine keeps a device copy of the
 * paged cache's arena, page for page and byte for byte (runtime/kvcache.h's layout and dtype:
 * bf16, f16, f32, or int8 rows with f32 row scales), so a page comes up with one copy and a key's
 * address is the host's. cu_kv_put writes a step's new K/V rows (the export rows cu_qkv_post made,
 * already in the cache's dtype) into their pages; cu_attn_decode is the decode attention over the
 * pages.
 *
 * k_attn_dec: one block per (sequence b, query head h, key segment). The query row (f32) sits in
 * shared memory. Keys: a thread per key computes q·k over Dh (8 elements a load), then the block's
 * max and sum (softmax over the segment's scores in shared memory); values: threads split as
 * (8-element column group) x (key group), each accumulating 8 columns over its keys, and the key
 * groups are summed through shared memory. No tensor cores: one query row per head is a GEMV, bound
 * by the bytes of K and V. Long contexts split the keys into S segments (the grid's z) whose
 * (O, max, sum) k_attn_combine (cu_attn.cu) merges, as the prefill's do. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#include "engine/cuda/cuda-impl.h"

#define NT 128 /* threads per block */

/* 8 elements d .. d + 7 (d % 8 == 0) of row `slot` of a (page, layer, head) block of dtype DT
 * (0 bf16, 1 f16, 2 f32, 3 int8: the raw q, the caller applies the row's scale) */
template <int DT> static __device__ __forceinline__ void load8(const uint8_t *blk, int ps, int Dh, int slot, int d, float *o)
{
    if (DT == 0 || DT == 1) {
        uint4 u = *(const uint4 *)(blk + ((size_t)slot * Dh + d) * 2);
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float2 f;
            if (DT == 0) f = __bfloat1622float2(*(const __nv_bfloat162 *)&w[i]);
            else f = __half22float2(*(const __half2 *)&w[i]);
            o[2 * i] = f.x, o[2 * i + 1] = f.y;
        }
    } else if (DT == 2) {
        const float4 *p = (const float4 *)(blk + ((size_t)slot * Dh + d) * 4);
        float4 a = p[0], b = p[1];
        o[0] = a.x, o[1] = a.y, o[2] = a.z, o[3] = a.w, o[4] = b.x, o[5] = b.y, o[6] = b.z, o[7] = b.w;
    } else { /* the rows follow the scales [ps]: 4-byte aligned for any page size */
        const uint32_t *p = (const uint32_t *)(blk + 4 * (size_t)ps + (size_t)slot * Dh + d);
        uint32_t w[2] = {p[0], p[1]};
        const int8_t *q = (const int8_t *)w;
#pragma unroll
        for (int i = 0; i < 8; i++) o[i] = (float)q[i];
    }
}

/* the block's max (op 0) or sum (op 1) of v; red: NT / 32 floats of shared memory */
static __device__ float block_reduce(float v, int op, float *red)
{
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = op ? v + u : fmaxf(v, u);
    }
    int w = threadIdx.x >> 5;
    __syncthreads(); /* red's last readers are done */
    if ((threadIdx.x & 31) == 0) red[w] = v;
    __syncthreads();
    v = red[0];
    for (int i = 1; i < NT / 32; i++) v = op ? v + red[i] : fmaxf(v, red[i]);
    return v;
}

/* shared memory: q [Dh], scores / weights [seglen], the key groups' O [NT / (Dh / 8)][Dh], red [NT / 32] */
static __host__ __device__ size_t dec_smem(int Dh, int seglen)
{
    return sizeof(float) * ((size_t)Dh + (size_t)seglen + (size_t)(NT / (Dh / 8)) * Dh + NT / 32);
}

template <int DT> __global__ void k_attn_dec(cu_dec_attn_args a, int S, int seglen, float *po, float *pm, float *pl)
{
    extern __shared__ float sm[];
    const int Dh = a.Dh, b = blockIdx.x, h = blockIdx.y, seg = blockIdx.z, g = h / (a.H / a.Hk), tid = threadIdx.x;
    float *qs = sm, *sc = qs + Dh, *og = sc + seglen, *red = og + (size_t)(NT / (Dh / 8)) * Dh;
    const int i = a.pos[b]; /* the query's position: keys [jlo, i] */
    const int jlo = a.window > 0 && i - a.window + 1 > 0 ? i - a.window + 1 : 0;
    const int ja = jlo + seg * seglen, jb = ja + seglen < i + 1 ? ja + seglen : i + 1;
    const size_t row = (size_t)b * a.H + h; /* the (b, h) row of the partials */
    if (ja >= jb) { /* an empty segment (a shorter sequence of the batch) */
        if (tid == 0 && S > 1) pm[(size_t)seg * a.B * a.H + row] = -INFINITY, pl[(size_t)seg * a.B * a.H + row] = 0.f;
        return;
    }
    for (int d = tid; d < Dh; d += NT) qs[d] = a.qkv[(size_t)b * a.nqkv + (size_t)h * Dh + d];
    __syncthreads();
    const int32_t *pt = a.pt + (size_t)b * a.ptw;
    const int psm = a.ps - 1, psh = __ffs(a.ps) - 1; /* ps is a power of two */
    const size_t kofs = a.layer_off + (size_t)g * a.blk_bytes, vofs = kofs + (size_t)a.Hk * a.blk_bytes;
    float mx = -INFINITY;
    for (int j = ja + tid; j < jb; j += NT) {
        const uint8_t *blk = a.arena + (size_t)pt[j >> psh] * a.page_bytes + kofs;
        const int slot = j & psm;
        float s = 0.f, v[8];
        for (int d = 0; d < Dh; d += 8) {
            load8<DT>(blk, a.ps, Dh, slot, d, v);
#pragma unroll
            for (int k = 0; k < 8; k++) s += qs[d + k] * v[k];
        }
        if (DT == 3) s *= ((const float *)blk)[slot];
        s *= a.scale;
        if (a.softcap != 0.f) s = tanhf(s / a.softcap) * a.softcap;
        if (a.alibi) s += a.alibi[h] * (float)(j - i);
        sc[j - ja] = s;
        mx = fmaxf(mx, s);
    }
    const float m = block_reduce(mx, 0, red);
    float sum = 0.f;
    for (int j = ja + tid; j < jb; j += NT) {
        float p = expf(sc[j - ja] - m);
        sum += p;
        if (DT == 3) /* the value row's scale goes with its weight */
            p *= ((const float *)(a.arena + (size_t)pt[j >> psh] * a.page_bytes + vofs))[j & psm];
        sc[j - ja] = p;
    }
    const float l = block_reduce(sum, 1, red); /* its barrier also publishes sc */
    const int ncg = Dh / 8, ngr = NT / ncg, cg = tid % ncg, gr = tid / ncg;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (gr < ngr)
        for (int j = ja + gr; j < jb; j += ngr) {
            float v[8], p = sc[j - ja];
            load8<DT>(a.arena + (size_t)pt[j >> psh] * a.page_bytes + vofs, a.ps, Dh, j & psm, cg * 8, v);
#pragma unroll
            for (int k = 0; k < 8; k++) acc[k] += p * v[k];
        }
    if (gr < ngr)
#pragma unroll
        for (int k = 0; k < 8; k++) og[(size_t)gr * Dh + cg * 8 + k] = acc[k];
    __syncthreads();
    float fo = 1.f;
    if (S == 1) { /* the sink's logit in the sum; the row normalised */
        const float M = a.sinks ? fmaxf(m, a.sinks[h]) : m, f = expf(m - M);
        const float den = l * f + (a.sinks ? expf(a.sinks[h] - M) : 0.f);
        fo = den > 0.f ? f / den : 0.f;
    }
    for (int d = tid; d < Dh; d += NT) {
        float o = 0.f;
        for (int r = 0; r < ngr; r++) o += og[(size_t)r * Dh + d];
        if (S == 1) a.out[row * Dh + d] = __bfloat16_as_ushort(__float2bfloat16_rn(o * fo));
        else po[((size_t)seg * a.B * a.H + row) * Dh + d] = o;
    }
    if (S > 1 && tid == 0) pm[(size_t)seg * a.B * a.H + row] = m, pl[(size_t)seg * a.B * a.H + row] = l;
}

extern "C" size_t cu_attn_decode_smem(int Dh, int seglen) { return dec_smem(Dh, seglen); }

extern "C" void cu_attn_decode(cu_stream s, const cu_dec_attn_args *a, int S, int seglen, float *scratch)
{
    dim3 grid((unsigned)a->B, (unsigned)a->H, (unsigned)S);
    float *po = scratch, *pm = po + (size_t)S * a->B * a->H * a->Dh, *pl = pm + (size_t)S * a->B * a->H;
    size_t sm = dec_smem(a->Dh, seglen);
    switch (a->dt) {
    case 0: k_attn_dec<0><<<grid, NT, sm, s>>>(*a, S, seglen, po, pm, pl); break;
    case 1: k_attn_dec<1><<<grid, NT, sm, s>>>(*a, S, seglen, po, pm, pl); break;
    case 2: k_attn_dec<2><<<grid, NT, sm, s>>>(*a, S, seglen, po, pm, pl); break;
    default: k_attn_dec<3><<<grid, NT, sm, s>>>(*a, S, seglen, po, pm, pl);
    }
    if (S > 1) {
        cu_attn_args c = {};
        c.T = a->B, c.n_valid = a->B, c.H = a->H, c.Dh = a->Dh, c.sinks = a->sinks, c.out = a->out;
        cu_attention_combine(s, &c, S, scratch);
    }
}

/* one warp per (b, kv, g): the export row and (int8) its scale into the page block */
__global__ void k_kv_put(cu_dec_attn_args a, const uint8_t *rows, const float *scales, size_t rb)
{
    int lane = threadIdx.x & 31;
    long item = (long)blockIdx.x * (NT / 32) + (threadIdx.x >> 5);
    if (item >= (long)a.B * 2 * a.Hk) return;
    int b = (int)(item % a.B), kg = (int)(item / a.B); /* kg = kv * Hk + g: the export rows' order */
    int pos = a.pos[b], slot = pos % a.ps;
    uint8_t *blk = (uint8_t *)a.arena + (size_t)a.pt[(size_t)b * a.ptw + pos / a.ps] * a.page_bytes + a.layer_off +
                   (size_t)kg * a.blk_bytes;
    const uint32_t *src = (const uint32_t *)(rows + ((size_t)kg * a.B + b) * rb);
    uint32_t *dst = (uint32_t *)(a.dt == 3 ? blk + 4 * (size_t)a.ps + (size_t)slot * rb : blk + (size_t)slot * rb);
    for (size_t w = lane; w < rb / 4; w += 32) dst[w] = src[w];
    if (a.dt == 3 && lane == 0) ((float *)blk)[slot] = scales[(size_t)kg * a.B + b];
}

extern "C" void cu_kv_put(cu_stream s, const cu_dec_attn_args *a, const void *rows, const float *scales, size_t rb)
{
    long items = (long)a->B * 2 * a->Hk;
    k_kv_put<<<(unsigned)((items + NT / 32 - 1) / (NT / 32)), NT, 0, s>>>(*a, (const uint8_t *)rows, scales, rb);
}
