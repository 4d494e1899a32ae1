/* engine/cuda/cu_dec.cu: the decode step's KV on the device. The engine keeps a device copy of the
 * paged cache's arena, page for page and byte for byte (runtime/kvcache.h's layout and dtype:
 * bf16, f16, f32, or int8 rows with f32 row scales), so a page comes up with one copy and a key's
 * address is the host's. cu_attn_decode is the decode attention over the pages; it also writes the
 * step's new K/V rows (the export rows cu_qkv_post made, already in the cache's dtype) into their
 * pages: in each sequence's last key segment, the first query head of each kv group's block copies
 * that group's K and V rows, and every block reads position i (the step's own) from the export rows,
 * so no block of the launch reads a slot another is writing (one launch fewer per layer than a
 * separate copy).
 *
 * k_attn_dec: one block per (sequence b, query head h, key segment). The S segments (the grid's z, a
 * function of the batch: cuda_engine.c's dec_segs) split each row's own keys [jlo, pos] evenly, at least
 * SEG_MIN keys a segment, so a short context leaves the later segments empty (they return at once) and
 * no block waits on keys past its row's position. The query row (f32) sits in shared memory. A segment's
 * keys go in chunks of up to `seglen` (the scores' room in shared memory), with the online softmax across
 * them (the running max, sum and O rescaled when the max moves): keys: a thread per key computes q·k over
 * Dh (8 elements a load), then the chunk's max and sum; values: threads split as (8-element column
 * group) x (key group), each accumulating 8 columns over its keys, and the key groups are summed through
 * shared memory at the end. No tensor cores: one query row per head is a GEMV, bound by the bytes of K and
 * V. With S > 1 the segments' (O, max, sum) are merged by the last block of each (b, h) to finish
 * (merge_if_last), as k_attn_combine (cu_attn.cu) does the prefill's in a launch of its own. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#include "engine/cuda/cu_launch.cuh"
#include "engine/cuda/cuda-impl.h"

#define NT 128      /* threads per block */
#define SEG_MIN 64  /* keys a segment at least */

/* 8 elements d .. d + 7 (d % 8 == 0) of a K or V row of dtype DT starting at row (0 bf16, 1 f16, 2 f32,
 * 3 int8: the raw q, the caller applies the row's scale) */
template <int DT> static __device__ __forceinline__ void load8(const uint8_t *row, int d, float *o)
{
    if (DT == 0 || DT == 1) {
        uint4 u = *(const uint4 *)(row + (size_t)d * 2);
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float2 f;
            if (DT == 0) f = __bfloat1622float2(*(const __nv_bfloat162 *)&w[i]);
            else f = __half22float2(*(const __half2 *)&w[i]);
            o[2 * i] = f.x, o[2 * i + 1] = f.y;
        }
    } else if (DT == 2) {
        const float4 *p = (const float4 *)(row + (size_t)d * 4);
        float4 a = p[0], b = p[1];
        o[0] = a.x, o[1] = a.y, o[2] = a.z, o[3] = a.w, o[4] = b.x, o[5] = b.y, o[6] = b.z, o[7] = b.w;
    } else {
        const uint32_t *p = (const uint32_t *)(row + d);
        uint32_t w[2] = {p[0], p[1]};
        const int8_t *q = (const int8_t *)w;
#pragma unroll
        for (int i = 0; i < 8; i++) o[i] = (float)q[i];
    }
}

/* Key (kv 0) or value (kv 1) row j of sequence b, kv head g, in the pages (layer a.layer_off): its
 * first byte, and (int8) its scale in *sc. The step's own position i is still in the export rows (its
 * page slot is written by this kernel, k_attn_dec's design note), so j == i reads from there. A page
 * block is (int8: scales [ps] f32, then) rows [ps] of Dh elements of esz bytes. */
template <int DT>
static __device__ __forceinline__ const uint8_t *kv_row(const cu_dec_attn_args &a, const int32_t *pt, int b, int g, int kv,
                                                        int i, int j, float *sc)
{
    const size_t esz = DT == 2 ? 4 : DT == 3 ? 1 : 2, kg = (size_t)kv * a.Hk + g;
    if (j == i) {
        if (DT == 3) *sc = a.rscales[kg * a.B + b];
        return a.rows + (kg * a.B + b) * a.Dh * esz;
    }
    const int psh = __ffs(a.ps) - 1, slot = j & (a.ps - 1); /* ps is a power of two */
    const uint8_t *blk = a.arena + (size_t)pt[j >> psh] * a.page_bytes + a.layer_off + kg * a.blk_bytes;
    if (DT == 3) {
        *sc = ((const float *)blk)[slot];
        return blk + 4 * (size_t)a.ps + (size_t)slot * a.Dh;
    }
    return blk + (size_t)slot * a.Dh * esz;
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

/* Where the keys are in S > 1 segments, the (b, h) row's last block to finish merges them (as
 * k_attn_combine does, cu_attn.cu: M = max m_s and the sink, O = sum O_s e^(m_s - M) / sum l_s e^(m_s - M)),
 * so no second launch a layer: each block's partials published (__threadfence), then one atomic count
 * per row, cnt [b * H + h] (a.cnt), which the last block sets back to 0 for the next launch. */
static __device__ void merge_if_last(const cu_dec_attn_args &a, int S, size_t row, int h, const float *po,
                                     const float *pm, const float *pl, unsigned *cnt)
{
    __shared__ int last;
    __threadfence(); /* this block's partials visible before its count */
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&cnt[row], 1u) == (unsigned)S - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    const size_t BH = (size_t)a.B * a.H;
    float M = a.sinks ? a.sinks[h] : -INFINITY;
    for (int s = 0; s < S; s++) M = fmaxf(M, __ldcg(pm + s * BH + row));
    float L = a.sinks ? expf(a.sinks[h] - M) : 0.f;
    for (int d = threadIdx.x; d < a.Dh; d += NT) {
        float o = 0.f, Ls = L;
        for (int s = 0; s < S; s++) {
            const float ms = __ldcg(pm + s * BH + row);
            if (ms == -INFINITY) continue; /* an empty segment */
            const float f = expf(ms - M);
            Ls += __ldcg(pl + s * BH + row) * f;
            o += __ldcg(po + (s * BH + row) * a.Dh + d) * f;
        }
        a.out[row * a.Dh + d] = __bfloat16_as_ushort(__float2bfloat16_rn(Ls > 0.f ? o / Ls : 0.f));
    }
    if (threadIdx.x == 0) cnt[row] = 0;
}

template <int DT>
__global__ void k_attn_dec(cu_dec_attn_args a, int S, int seglen, float *po, float *pm, float *pl, unsigned *cnt)
{
    pdl_enter();
    extern __shared__ float sm[];
    const int Dh = a.Dh, b = blockIdx.x, h = blockIdx.y, seg = blockIdx.z, g = h / (a.H / a.Hk), tid = threadIdx.x;
    float *qs = sm, *sc = qs + Dh, *og = sc + seglen, *red = og + (size_t)(NT / (Dh / 8)) * Dh;
    const int i = a.pos[b]; /* the query's position: keys [jlo, i] */
    const int jlo = a.window > 0 && i - a.window + 1 > 0 ? i - a.window + 1 : 0, span = i - jlo + 1;
    const int per = max(SEG_MIN, (span + S - 1) / S); /* this row's keys a segment */
    const int ja = jlo + min(seg * per, span), jb = jlo + min((seg + 1) * per, span);
    const size_t row = (size_t)b * a.H + h; /* the (b, h) row of the partials */
    if (ja >= jb) { /* an empty segment (a short context, or a shorter sequence of the batch) */
        if (tid == 0 && S > 1) pm[(size_t)seg * a.B * a.H + row] = -INFINITY, pl[(size_t)seg * a.B * a.H + row] = 0.f;
        if (S > 1) merge_if_last(a, S, row, h, po, pm, pl, cnt);
        return;
    }
    for (int d = tid; d < Dh; d += NT) qs[d] = a.qkv[(size_t)b * a.nqkv + (size_t)h * Dh + d];
    const int32_t *pt = a.pt + (size_t)b * a.ptw;
    if (jb == i + 1 && h % (a.H / a.Hk) == 0 && tid < 64) { /* the step's K and V rows of head g into their page */
        const int kv = tid >> 5, lane = tid & 31, esz = DT == 2 ? 4 : DT == 3 ? 1 : 2;
        const size_t kg = (size_t)kv * a.Hk + g, rb = (size_t)Dh * esz;
        uint8_t *blk = (uint8_t *)a.arena + (size_t)pt[i / a.ps] * a.page_bytes + a.layer_off + kg * a.blk_bytes;
        const int slot = i % a.ps;
        const uint32_t *src = (const uint32_t *)(a.rows + (kg * a.B + b) * rb);
        uint32_t *dst = (uint32_t *)(DT == 3 ? blk + 4 * (size_t)a.ps + slot * rb : blk + slot * rb);
        for (size_t w = lane; w < rb / 4; w += 32) dst[w] = src[w];
        if (DT == 3 && lane == 0) ((float *)blk)[slot] = a.rscales[kg * a.B + b];
    }
    __syncthreads();
    const int ncg = Dh / 8, ngr = NT / ncg, cg = tid % ncg, gr = tid / ncg;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f}, m = -INFINITY, l = 0.f;
    for (int c0 = ja; c0 < jb; c0 += seglen) { /* a chunk of the segment's keys: [c0, c1) */
        const int c1 = min(c0 + seglen, jb);
        float mx = -INFINITY;
        for (int j = c0 + tid; j < c1; j += NT) {
            float ks = 1.f, s = 0.f, v[8];
            const uint8_t *kr = kv_row<DT>(a, pt, b, g, 0, i, j, &ks);
            for (int d = 0; d < Dh; d += 8) {
                load8<DT>(kr, d, v);
#pragma unroll
                for (int k = 0; k < 8; k++) s += qs[d + k] * v[k];
            }
            if (DT == 3) s *= ks;
            s *= a.scale;
            if (a.softcap != 0.f) s = tanhf(s / a.softcap) * a.softcap;
            if (a.alibi) s += a.alibi[h] * (float)(j - i);
            sc[j - c0] = s;
            mx = fmaxf(mx, s);
        }
        const float mn = fmaxf(m, block_reduce(mx, 0, red)), f = expf(m - mn); /* f: 0 at the first chunk */
        float sum = 0.f;
        for (int j = c0 + tid; j < c1; j += NT) {
            float p = expf(sc[j - c0] - mn);
            sum += p;
            if (DT == 3) { /* the value row's scale goes with its weight */
                float vs = 1.f;
                kv_row<DT>(a, pt, b, g, 1, i, j, &vs);
                p *= vs;
            }
            sc[j - c0] = p;
        }
        l = l * f + block_reduce(sum, 1, red); /* its barrier also publishes sc */
        m = mn;
#pragma unroll
        for (int k = 0; k < 8; k++) acc[k] *= f;
        if (gr < ngr)
            for (int j = c0 + gr; j < c1; j += ngr) {
                float v[8], p = sc[j - c0], vs;
                load8<DT>(kv_row<DT>(a, pt, b, g, 1, i, j, &vs), cg * 8, v);
#pragma unroll
                for (int k = 0; k < 8; k++) acc[k] += p * v[k];
            }
        __syncthreads(); /* sc is the next chunk's */
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
    if (S > 1) merge_if_last(a, S, row, h, po, pm, pl, cnt);
}

extern "C" size_t cu_attn_decode_smem(int Dh, int seglen) { return dec_smem(Dh, seglen); }

extern "C" void cu_attn_decode(cu_stream s, const cu_dec_attn_args *a, int S, int seglen, float *scratch)
{
    dim3 grid((unsigned)a->B, (unsigned)a->H, (unsigned)S);
    float *po = scratch, *pm = po + (size_t)S * a->B * a->H * a->Dh, *pl = pm + (size_t)S * a->B * a->H;
    unsigned *cnt = a->cnt;
    size_t sm = dec_smem(a->Dh, seglen);
    switch (a->dt) {
    case 0: cu_go(k_attn_dec<0>, grid, NT, sm, s, *a, S, seglen, po, pm, pl, cnt); break;
    case 1: cu_go(k_attn_dec<1>, grid, NT, sm, s, *a, S, seglen, po, pm, pl, cnt); break;
    case 2: cu_go(k_attn_dec<2>, grid, NT, sm, s, *a, S, seglen, po, pm, pl, cnt); break;
    default: cu_go(k_attn_dec<3>, grid, NT, sm, s, *a, S, seglen, po, pm, pl, cnt);
    }
}
