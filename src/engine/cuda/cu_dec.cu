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
 * function of the batch: cu_step.c's dec_segs) split each row's own keys [jlo, pos] evenly, at least
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
#include "engine/cuda/cu_mma.cuh"
#include "engine/cuda/cu_rows.cuh"
#include "engine/cuda/cuda-impl.h"

#define NT 128      /* threads per block */
#define SEG_MIN 64  /* keys a segment at least */
#define MT_HEADS 16 /* k_attn_dec_mma: query heads a block at most, the mma tile's rows */

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

/* Where the keys are in S > 1 segments, the last block of a (b, head tile) to finish merges them for the tile's nh
 * heads h0 .. h0 + nh - 1 (as k_attn_combine does, cu_attn.cu: M = max m_s and the sink, O = sum O_s e^(m_s - M) /
 * sum l_s e^(m_s - M)), so no second launch a layer: each block's partials published (__threadfence), then one
 * atomic count per tile, cnt [b * H + h0] (a.cnt), which the last block sets back to 0 for the next launch. Only
 * the row's first `used` segments hold keys (seg_keys), so only they are read: their weights e^(m_s - M) and the
 * sums first, a warp a head with its lanes over the segments (MERGE_W of shared memory: used * nh, which dec_segs
 * keeps within it), then O by (head, 4 columns) items over all the threads, 16-byte loads. */
#define MERGE_W 512
static __device__ void merge_if_last(const cu_dec_attn_args &a, int S, int used, int b, int h0, int nh, const float *po,
                                     const float *pm, const float *pl, unsigned *cnt)
{
    __shared__ int last;
    __shared__ float wt[MERGE_W], inv[MT_HEADS];
    const size_t c = (size_t)b * a.H + h0, BH = (size_t)a.B * a.H;
    __threadfence(); /* this block's partials visible before its count */
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&cnt[c], 1u) == (unsigned)S - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    const int lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    for (int hh = threadIdx.x >> 5; hh < nh; hh += nw) { /* a warp a head, its lanes over the segments */
        const int h = h0 + hh;
        float M = -INFINITY, L = 0.f;
        for (int s = lane; s < used; s += 32) M = fmaxf(M, __ldcg(pm + s * BH + c + hh));
        for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
        if (a.sinks) M = fmaxf(M, a.sinks[h]);
        for (int s = lane; s < used; s += 32) {
            const float f = expf(__ldcg(pm + s * BH + c + hh) - M);
            wt[s * nh + hh] = f, L += __ldcg(pl + s * BH + c + hh) * f;
        }
        for (int o = 16; o > 0; o >>= 1) L += __shfl_xor_sync(0xffffffffu, L, o);
        L += a.sinks ? expf(a.sinks[h] - M) : 0.f;
        if (lane == 0) inv[hh] = L > 0.f ? 1.f / L : 0.f;
    }
    __syncthreads();
    const int d4 = a.Dh / 4;
    for (int it = threadIdx.x; it < nh * d4; it += blockDim.x) {
        const int hh = it / d4, d = 4 * (it % d4);
        const float *p = po + (c + hh) * a.Dh + d;
        float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
        for (int s = 0; s < used; s++) {
            const float4 x = __ldcg((const float4 *)(p + s * BH * a.Dh));
            const float f = wt[s * nh + hh];
            o.x += x.x * f, o.y += x.y * f, o.z += x.z * f, o.w += x.w * f;
        }
        const float r = inv[hh];
        *(uint2 *)(a.out + (c + hh) * a.Dh + d) = make_uint2(pack_bf16(o.x * r, o.y * r), pack_bf16(o.z * r, o.w * r));
    }
    if (threadIdx.x == 0) cnt[c] = 0;
}

/* the step's K and V rows of kv head g (the export rows) into their page slot i: 64 threads */
template <int DT> static __device__ void put_step_rows(const cu_dec_attn_args &a, const int32_t *pt, int b, int g, int i)
{
    const int tid = threadIdx.x, kv = tid >> 5, lane = tid & 31, esz = DT == 2 ? 4 : DT == 3 ? 1 : 2;
    const size_t kg = (size_t)kv * a.Hk + g, rb = (size_t)a.Dh * esz;
    uint8_t *blk = (uint8_t *)a.arena + (size_t)pt[i / a.ps] * a.page_bytes + a.layer_off + kg * a.blk_bytes;
    const int slot = i % a.ps;
    const uint32_t *src = (const uint32_t *)(a.rows + (kg * a.B + b) * rb);
    uint32_t *dst = (uint32_t *)(DT == 3 ? blk + 4 * (size_t)a.ps + slot * rb : blk + slot * rb);
    for (size_t w = lane; w < rb / 4; w += 32) dst[w] = src[w];
    if (DT == 3 && lane == 0) ((float *)blk)[slot] = a.rscales[kg * a.B + b];
}

/* the keys [ja, jb) of segment seg of S of a row whose query is at position i (keys [jlo, i]): each row splits its
 * own keys, at least SEG_MIN a segment; the segments that hold keys: the first *used */
static __device__ __forceinline__ void seg_keys(const cu_dec_attn_args &a, int i, int S, int seg, int *ja, int *jb, int *used)
{
    const int jlo = a.window > 0 && i - a.window + 1 > 0 ? i - a.window + 1 : 0, span = i - jlo + 1;
    const int per = max(SEG_MIN, (span + S - 1) / S);
    *ja = jlo + min(seg * per, span), *jb = jlo + min((seg + 1) * per, span), *used = (span + per - 1) / per;
}

template <int DT>
__global__ void k_attn_dec(cu_dec_attn_args a, int S, int seglen, float *po, float *pm, float *pl, unsigned *cnt)
{
    pdl_enter();
    extern __shared__ float sm[];
    const int Dh = a.Dh, b = blockIdx.x, h = blockIdx.y, seg = blockIdx.z, g = h / (a.H / a.Hk), tid = threadIdx.x;
    float *qs = sm, *sc = qs + Dh, *og = sc + seglen, *red = og + (size_t)(NT / (Dh / 8)) * Dh;
    const int i = a.pos[b]; /* the query's position */
    int ja, jb, used;
    seg_keys(a, i, S, seg, &ja, &jb, &used);
    const size_t row = (size_t)b * a.H + h; /* the (b, h) row of the partials */
    if (ja >= jb) { /* an empty segment (a short context, or a shorter sequence of the batch): merged past */
        if (S > 1) merge_if_last(a, S, used, b, h, 1, po, pm, pl, cnt);
        return;
    }
    for (int d = tid; d < Dh; d += NT) qs[d] = a.qkv[(size_t)b * a.nqkv + (size_t)h * Dh + d];
    const int32_t *pt = a.pt + (size_t)b * a.ptw;
    if (jb == i + 1 && h % (a.H / a.Hk) == 0 && tid < 64) put_step_rows<DT>(a, pt, b, g, i);
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
    if (S > 1) merge_if_last(a, S, used, b, h, 1, po, pm, pl, cnt);
}

/* ---- k_attn_dec_mma: the query heads of a kv group together, their scores on tensor cores ----
 *
 * One block per (sequence b, kv head g's tile of up to MT_HEADS query heads, key segment). The tile's heads share
 * every K and V row, so a row comes from memory once for them all (k_attn_dec reads it once a head: 16 times for
 * DeepSeek's latent head). Where it runs (mt_on): bf16 and int8 pages, head dims (multiples of 8) whose Q planes,
 * scores and merge weights fit the default 48 KB of shared memory (up to 608).
 *   Q:      [2][16][ld] bf16 in shared memory, the tile's heads (rows past nh zero) as two planes, hi = bf16(q)
 *           and lo = bf16(q - hi), both multiplied in: the scores as exact as q in f32 (K is bf16 or int8, both
 *           exact in bf16), as the per-head kernel's. ld = Dh rounded up to 32 and made 32 mod 64 elements, so
 *           the 8 rows a quarter-warp reads with 16-byte loads hit distinct banks.
 *   scores: a chunk of MT_CH keys, 16 a warp as two 16 x 8 mma tiles S[head][key] = Q · Kᵀ over Dh in steps of
 *           32 (two mma k-steps): lane (g4 = lane / 4, c4 = lane % 4) loads 16 bytes of key rows kb + g4 and
 *           kb + 8 + g4, dims d0 + 8 c4 .. + 7, straight from the pages; the mma k-slots (2 c4, 2 c4 + 1 | + 8)
 *           of the first step take dims + 0..3 and the second's + 4..7, and A (Q from shared memory, the same
 *           16 bytes of rows g4 and g4 + 8) is loaded in the same order, so each slot pairs one dim of Q with
 *           the same dim of K (cu_mma.cuh's layouts). Into sc [16][MT_CH] f32 (scaled, soft-capped, ALiBi).
 *   softmax: a warp a head: the chunk's max, the running max m, sum l and the factor f its O is rescaled by.
 *   values: tensor cores. O [16 heads][Dh] += P [16][16 keys] · V [16 keys][Dh] a 16-key step, P (sc) as hi + lo
 *           bf16 planes like Q. The dims in groups of 64: group gi's n-tile t (of 8) column n holds dim
 *           64 gi + 8 n + t, so lane (g4, c4)'s B fragments for the group's 8 n-tiles come from one 16-byte load
 *           (dims 64 gi + 8 g4 .. + 7) of each of its four key rows (kb + 2 c4, + 1, + 8, + 9), paired by byte
 *           permutes, and its C fragments hold the 16 contiguous dims 64 gi + 16 c4 .. + 15 of heads g4, g4 + 8.
 *           Warp w takes groups w, w + 4, w + 8 (at most MT_VG); with fewer than 4 groups (Dh <= 192) the warps
 *           also split the chunk's 16-key steps, their partial O summed through shared memory at the end.
 * S > 1: the (O, m, l) partials of each head merged by the tile's last block (merge_if_last). */
#define MT_CH 64            /* keys a chunk: 16 a warp */
#define MT_SCLD (MT_CH + 8) /* sc's row stride: the P fragments' 8-byte loads two-way at most */
#define MT_VG 3             /* 64-dim value groups a warp at most: Dh <= 64 * 4 * MT_VG */
static __host__ __device__ int mt_ld(int Dh)
{
    const int d = (Dh + 31) / 32 * 32;
    return d % 64 ? d : d + 32;
}
/* shared memory: Q's two planes (or, at the end, the key-splitting warps' partial O: 3 warps x 32 C registers x
 * 32 lanes floats), sc [16][MT_SCLD], m, l, f */
static __host__ __device__ size_t mt_qbytes(int Dh)
{
    const size_t q = (size_t)2 * MT_HEADS * mt_ld(Dh) * 2, o = (size_t)3 * 32 * 32 * sizeof(float);
    return q > o ? q : o;
}
static __host__ __device__ size_t mt_smem(int Dh) { return mt_qbytes(Dh) + sizeof(float) * (MT_HEADS * MT_SCLD + 3 * MT_HEADS); }
/* k_attn_dec_mma takes the launch: bf16 or int8 pages, within the default 48 KB of shared memory with the merge's
 * (head dims to 608) */
static bool mt_on(int dt, int Dh, int mma)
{
    return mma && (dt == 0 || dt == 3) && Dh <= 64 * 4 * MT_VG &&
           mt_smem(Dh) + sizeof(float) * (MERGE_W + MT_HEADS) + 16 <= 48 * 1024;
}

/* 8 elements d .. d + 7 of a bf16 (DT 0) or int8 (DT 3: the raw q, exact in bf16) row as 8 bf16 */
template <int DT> static __device__ __forceinline__ uint4 load8_bf(const uint8_t *row, int d)
{
    if (DT == 0) return *(const uint4 *)(row + (size_t)d * 2);
    const uint2 u = *(const uint2 *)(row + d);
    const int8_t *q = (const int8_t *)&u;
    return make_uint4(pack_bf16(q[0], q[1]), pack_bf16(q[2], q[3]), pack_bf16(q[4], q[5]), pack_bf16(q[6], q[7]));
}

template <int DT>
__global__ void __launch_bounds__(NT) k_attn_dec_mma(cu_dec_attn_args a, int S, float *po, float *pm, float *pl, unsigned *cnt)
{
    pdl_enter();
    extern __shared__ __align__(16) unsigned char smb[];
    const int Dh = a.Dh, b = blockIdx.x, G = a.H / a.Hk, HT = MT_HEADS, tiles = (G + HT - 1) / HT;
    const int g = blockIdx.y / tiles, tile = blockIdx.y % tiles, h0 = g * G + tile * HT, nh = min(HT, G - tile * HT);
    const int seg = blockIdx.z, tid = threadIdx.x, lane = tid & 31, w = tid >> 5, ld = mt_ld(Dh);
    uint16_t *qs = (uint16_t *)smb;
    float *sc = (float *)(smb + mt_qbytes(Dh)), *mm = sc + MT_HEADS * MT_SCLD, *ll = mm + MT_HEADS, *ff = ll + MT_HEADS;
    const size_t BH = (size_t)a.B * a.H;
    const int i = a.pos[b];
    int ja, jb, used;
    seg_keys(a, i, S, seg, &ja, &jb, &used);
    if (ja >= jb) { /* an empty segment: merged past */
        if (S > 1) merge_if_last(a, S, used, b, h0, nh, po, pm, pl, cnt);
        return;
    }
    const float *q = a.qkv + (size_t)b * a.nqkv + (size_t)h0 * Dh;
    for (int e = tid; e < MT_HEADS * ld / 2; e += NT) {
        const int hh = e / (ld / 2), d = 2 * (e % (ld / 2));
        const bool in = hh < nh && d < Dh;
        const float x0 = in ? q[hh * Dh + d] : 0.f, x1 = in ? q[hh * Dh + d + 1] : 0.f;
        const unsigned hi = pack_bf16(x0, x1);
        const __nv_bfloat162 h2 = *(const __nv_bfloat162 *)&hi;
        ((unsigned *)qs)[e] = hi;
        ((unsigned *)qs)[MT_HEADS * ld / 2 + e] = pack_bf16(x0 - __low2float(h2), x1 - __high2float(h2));
    }
    if (tid < MT_HEADS) mm[tid] = -INFINITY, ll[tid] = 0.f;
    const int32_t *pt = a.pt + (size_t)b * a.ptw;
    if (jb == i + 1 && tile == 0 && tid < 64) put_step_rows<DT>(a, pt, b, g, i);
    /* the value groups: warp w's wg, wg + 4, ... (< ng), its 16-key steps ks = wk, wk + KSP, ... (< 4) */
    const int ng = (Dh + 63) / 64, KSP = ng >= 4 ? 1 : 4 / ng, wg = ng >= 4 ? w : w % ng, wk = ng >= 4 ? 0 : w / ng;
    float o[MT_VG][8][4];
#pragma unroll
    for (int v = 0; v < MT_VG; v++)
#pragma unroll
        for (int t = 0; t < 8; t++) o[v][t][0] = o[v][t][1] = o[v][t][2] = o[v][t][3] = 0.f;
    __syncthreads();
    const int g4 = lane >> 2, c4 = lane & 3;
    for (int c0 = ja; c0 < jb; c0 += MT_CH) {
        const int c1 = min(c0 + MT_CH, jb), n = c1 - c0, kb = c0 + 16 * w;
        if (kb < c1) { /* this warp's 16 keys: S [16 heads][16 keys] */
            float s2[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}}, unused;
            const uint8_t *k0 = kb + g4 < c1 ? kv_row<DT>(a, pt, b, g, 0, i, kb + g4, &unused) : NULL;
            const uint8_t *k1 = kb + 8 + g4 < c1 ? kv_row<DT>(a, pt, b, g, 0, i, kb + 8 + g4, &unused) : NULL;
            const uint16_t *qa = qs + g4 * ld + 8 * c4, *qb = qa + 8 * ld, *qc = qa + MT_HEADS * ld, *qd = qb + MT_HEADS * ld;
#pragma unroll 2
            for (int d0 = 0; d0 < Dh; d0 += 32) {
                const int d = d0 + 8 * c4;
                uint4 x0 = make_uint4(0u, 0u, 0u, 0u), x1 = x0;
                if (d < Dh && k0) x0 = load8_bf<DT>(k0, d);
                if (d < Dh && k1) x1 = load8_bf<DT>(k1, d);
                const uint4 ya = *(const uint4 *)(qa + d0), yb = *(const uint4 *)(qb + d0);
                const uint4 za = *(const uint4 *)(qc + d0), zb = *(const uint4 *)(qd + d0);
                const unsigned A0[4] = {ya.x, yb.x, ya.y, yb.y}, A1[4] = {ya.z, yb.z, ya.w, yb.w};
                const unsigned B0[4] = {za.x, zb.x, za.y, zb.y}, B1[4] = {za.z, zb.z, za.w, zb.w};
                mma_bf16(s2[0], A0, x0.x, x0.y);
                mma_bf16(s2[0], A1, x0.z, x0.w);
                mma_bf16(s2[1], A0, x1.x, x1.y);
                mma_bf16(s2[1], A1, x1.z, x1.w);
                mma_bf16(s2[0], B0, x0.x, x0.y);
                mma_bf16(s2[0], B1, x0.z, x0.w);
                mma_bf16(s2[1], B0, x1.x, x1.y);
                mma_bf16(s2[1], B1, x1.z, x1.w);
            }
#pragma unroll
            for (int t = 0; t < 2; t++)
#pragma unroll
                for (int e = 0; e < 4; e++) { /* C: head g4 (+ 8 for e >= 2), key kb + 8 t + 2 c4 + (e & 1) */
                    const int hh = g4 + (e >> 1) * 8, j = kb + 8 * t + 2 * c4 + (e & 1);
                    if (hh >= nh || j >= c1) continue;
                    float v = s2[t][e], ks = 1.f;
                    if (DT == 3) kv_row<DT>(a, pt, b, g, 0, i, j, &ks);
                    v *= ks * a.scale;
                    if (a.softcap != 0.f) v = tanhf(v / a.softcap) * a.softcap;
                    if (a.alibi) v += a.alibi[h0 + hh] * (float)(j - i);
                    sc[hh * MT_SCLD + j - c0] = v;
                }
        }
        __syncthreads();
        for (int hh = w; hh < nh; hh += NT / 32) { /* the online softmax, a warp a head */
            float *r = sc + hh * MT_SCLD;
            const float x0 = lane < n ? r[lane] : -INFINITY, x1 = lane + 32 < n ? r[lane + 32] : -INFINITY;
            const float mo = mm[hh], mn = fmaxf(mo, warp_max(fmaxf(x0, x1))), f = expf(mo - mn); /* 0 at the first */
            float p0 = lane < n ? expf(x0 - mn) : 0.f, p1 = lane + 32 < n ? expf(x1 - mn) : 0.f;
            const float sum = warp_sum(p0 + p1);
            if (DT == 3) { /* the value row's scale goes with its weight */
                float vs = 1.f;
                if (lane < n) kv_row<DT>(a, pt, b, g, 1, i, c0 + lane, &vs), p0 *= vs;
                if (lane + 32 < n) kv_row<DT>(a, pt, b, g, 1, i, c0 + lane + 32, &vs), p1 *= vs;
            }
            if (lane < n) r[lane] = p0;
            if (lane + 32 < n) r[lane + 32] = p1;
            if (lane == 0) mm[hh] = mn, ll[hh] = ll[hh] * f + sum, ff[hh] = f;
        }
        __syncthreads();
        { /* O rescaled by each head's factor, then P·V over this warp's steps and groups */
            const float f0 = g4 < nh ? ff[g4] : 0.f, f1 = g4 + 8 < nh ? ff[g4 + 8] : 0.f;
#pragma unroll
            for (int v = 0; v < MT_VG; v++)
#pragma unroll
                for (int t = 0; t < 8; t++) o[v][t][0] *= f0, o[v][t][1] *= f0, o[v][t][2] *= f1, o[v][t][3] *= f1;
        }
        for (int ks = wk; ks < 4 && wk < KSP && c0 + 16 * ks < c1; ks += KSP) {
            const int kb = c0 + 16 * ks, kl = 16 * ks + 2 * c4; /* this lane's keys kb + 2 c4 (+ 1, + 8, + 9) */
            unsigned ph[4], pq[4];
#pragma unroll
            for (int r = 0; r < 4; r++) { /* A: rows g4 (r even) / g4 + 8, keys kl (r < 2) / kl + 8, as hi + lo */
                const int hh = g4 + 8 * (r & 1), kk = kl + 8 * (r >> 1);
                float2 x = make_float2(0.f, 0.f);
                if (hh < nh) x = *(const float2 *)(sc + hh * MT_SCLD + kk);
                x.x = c0 + kk < c1 ? x.x : 0.f, x.y = c0 + kk + 1 < c1 ? x.y : 0.f;
                ph[r] = pack_bf16(x.x, x.y);
                const __nv_bfloat162 h2 = *(const __nv_bfloat162 *)&ph[r];
                pq[r] = pack_bf16(x.x - __low2float(h2), x.y - __high2float(h2));
            }
            float unused;
            const uint8_t *vr[4];
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const int j = kb + 2 * c4 + (r & 1) + 8 * (r >> 1);
                vr[r] = j < c1 ? kv_row<DT>(a, pt, b, g, 1, i, j, &unused) : NULL;
            }
#pragma unroll
            for (int v = 0; v < MT_VG; v++) {
                const int gi = wg + 4 * v, d = 64 * gi + 8 * g4;
                if ((v > 0 && ng < 4) || gi >= ng) break;
                uint4 x[4];
#pragma unroll
                for (int r = 0; r < 4; r++) x[r] = vr[r] && d < Dh ? load8_bf<DT>(vr[r], d) : make_uint4(0u, 0u, 0u, 0u);
                const unsigned *x0 = (const unsigned *)&x[0], *x1 = (const unsigned *)&x[1];
                const unsigned *x8 = (const unsigned *)&x[2], *x9 = (const unsigned *)&x[3];
#pragma unroll
                for (int t = 0; t < 8; t++) { /* n-tile t: dim d + t of keys (2 c4, 2 c4 + 1), then (+ 8, + 9) */
                    const unsigned sel = t & 1 ? 0x7632u : 0x5410u;
                    const unsigned b0 = __byte_perm(x0[t >> 1], x1[t >> 1], sel);
                    const unsigned b1 = __byte_perm(x8[t >> 1], x9[t >> 1], sel);
                    mma_bf16(o[v][t], ph, b0, b1);
                    mma_bf16(o[v][t], pq, b0, b1);
                }
            }
        }
        __syncthreads(); /* sc is the next chunk's */
    }
    if (KSP > 1) { /* the key-splitting warps' partial O (one group each) summed into the warps wk == 0 */
        float *og = (float *)smb; /* [w - ng][t][e][lane], over Q (done with) */
        __syncthreads();
        if (wk > 0 && wk < KSP)
#pragma unroll
            for (int t = 0; t < 8; t++)
#pragma unroll
                for (int e = 0; e < 4; e++) og[(((w - ng) * 8 + t) * 4 + e) * 32 + lane] = o[0][t][e];
        __syncthreads();
        if (wk == 0)
            for (int r = 1; r < KSP; r++)
#pragma unroll
                for (int t = 0; t < 8; t++)
#pragma unroll
                    for (int e = 0; e < 4; e++) o[0][t][e] += og[(((w + (r - 1) * ng) * 8 + t) * 4 + e) * 32 + lane];
    }
    if (wk == 0)
#pragma unroll
        for (int v = 0; v < MT_VG; v++) {
            const int gi = wg + 4 * v, d = 64 * gi + 16 * c4; /* this lane's dims d .. d + 15 */
            if ((v > 0 && ng < 4) || gi >= ng) break;
#pragma unroll
            for (int hr = 0; hr < 2; hr++) { /* heads g4, g4 + 8: C registers 2 hr, 2 hr + 1 */
                const int hh = g4 + 8 * hr, h = h0 + hh;
                if (hh >= nh) continue;
                const size_t row = (size_t)b * a.H + h;
                float fo = 1.f;
                if (S == 1) { /* the sink's logit in the sum; the row normalised */
                    const float m = mm[hh], M = a.sinks ? fmaxf(m, a.sinks[h]) : m, f = expf(m - M);
                    const float den = ll[hh] * f + (a.sinks ? expf(a.sinks[h] - M) : 0.f);
                    fo = den > 0.f ? f / den : 0.f;
                }
#pragma unroll
                for (int e = 0; e < 2; e++) { /* dims d + 8 e + t, t = 0 .. 7 */
                    if (d + 8 * e >= Dh) continue;
                    float y[8];
#pragma unroll
                    for (int t = 0; t < 8; t++) y[t] = o[v][t][2 * hr + e] * fo;
                    if (S == 1)
                        *(uint4 *)(a.out + row * Dh + d + 8 * e) = make_uint4(pack_bf16(y[0], y[1]), pack_bf16(y[2], y[3]),
                                                                             pack_bf16(y[4], y[5]), pack_bf16(y[6], y[7]));
                    else {
                        float4 *p4 = (float4 *)(po + (seg * BH + row) * Dh + d + 8 * e);
                        p4[0] = make_float4(y[0], y[1], y[2], y[3]), p4[1] = make_float4(y[4], y[5], y[6], y[7]);
                    }
                }
            }
        }
    if (S > 1) {
        if (tid < nh) pm[seg * BH + (size_t)b * a.H + h0 + tid] = mm[tid], pl[seg * BH + (size_t)b * a.H + h0 + tid] = ll[tid];
        merge_if_last(a, S, used, b, h0, nh, po, pm, pl, cnt);
    }
}

/* blocks a (sequence, segment): query heads (k_attn_dec) or kv heads' tiles (k_attn_dec_mma); the most segments
 * the merge takes (MERGE_W weights: a segment's for each head of a block) */
extern "C" int cu_attn_decode_blocks(int H, int Hk, int Dh, int dt, int mma, int *max_segs)
{
    if (!mt_on(dt, Dh, mma)) {
        *max_segs = MERGE_W;
        return H;
    }
    const int G = H / Hk, HT = MT_HEADS;
    *max_segs = MERGE_W / MT_HEADS;
    return Hk * ((G + HT - 1) / HT);
}

extern "C" size_t cu_attn_decode_smem(int Dh, int seglen) { return dec_smem(Dh, seglen); }

extern "C" void cu_attn_decode(cu_stream s, const cu_dec_attn_args *a, int S, int seglen, float *scratch)
{
    float *po = scratch, *pm = po + (size_t)S * a->B * a->H * a->Dh, *pl = pm + (size_t)S * a->B * a->H;
    unsigned *cnt = a->cnt;
    if (mt_on(a->dt, a->Dh, a->mma)) {
        int most;
        dim3 grid((unsigned)a->B, (unsigned)cu_attn_decode_blocks(a->H, a->Hk, a->Dh, a->dt, 1, &most), (unsigned)S);
        size_t sm = mt_smem(a->Dh);
        if (a->dt == 0) cu_go(k_attn_dec_mma<0>, grid, NT, sm, s, *a, S, po, pm, pl, cnt);
        else cu_go(k_attn_dec_mma<3>, grid, NT, sm, s, *a, S, po, pm, pl, cnt);
        return;
    }
    dim3 grid((unsigned)a->B, (unsigned)a->H, (unsigned)S);
    size_t sm = dec_smem(a->Dh, seglen);
    switch (a->dt) {
    case 0: cu_go(k_attn_dec<0>, grid, NT, sm, s, *a, S, seglen, po, pm, pl, cnt); break;
    case 1: cu_go(k_attn_dec<1>, grid, NT, sm, s, *a, S, seglen, po, pm, pl, cnt); break;
    case 2: cu_go(k_attn_dec<2>, grid, NT, sm, s, *a, S, seglen, po, pm, pl, cnt); break;
    default: cu_go(k_attn_dec<3>, grid, NT, sm, s, *a, S, seglen, po, pm, pl, cnt);
    }
}
