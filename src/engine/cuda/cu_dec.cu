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
 * atomic count per tile, cnt [b * H + h0] (a.cnt), which the last block sets back to 0 for the next launch. */
static __device__ void merge_if_last(const cu_dec_attn_args &a, int S, int b, int h0, int nh, const float *po,
                                     const float *pm, const float *pl, unsigned *cnt)
{
    __shared__ int last;
    const size_t c = (size_t)b * a.H + h0;
    __threadfence(); /* this block's partials visible before its count */
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&cnt[c], 1u) == (unsigned)S - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    const size_t BH = (size_t)a.B * a.H;
    for (int hh = 0; hh < nh; hh++) {
        const int h = h0 + hh;
        const size_t row = c + hh;
        float M = a.sinks ? a.sinks[h] : -INFINITY;
        for (int s = 0; s < S; s++) M = fmaxf(M, __ldcg(pm + s * BH + row));
        float L = a.sinks ? expf(a.sinks[h] - M) : 0.f;
        for (int d = threadIdx.x; d < a.Dh; d += blockDim.x) {
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
 * own keys, at least SEG_MIN a segment */
static __device__ __forceinline__ void seg_keys(const cu_dec_attn_args &a, int i, int S, int seg, int *ja, int *jb)
{
    const int jlo = a.window > 0 && i - a.window + 1 > 0 ? i - a.window + 1 : 0, span = i - jlo + 1;
    const int per = max(SEG_MIN, (span + S - 1) / S);
    *ja = jlo + min(seg * per, span), *jb = jlo + min((seg + 1) * per, span);
}

template <int DT>
__global__ void k_attn_dec(cu_dec_attn_args a, int S, int seglen, float *po, float *pm, float *pl, unsigned *cnt)
{
    pdl_enter();
    extern __shared__ float sm[];
    const int Dh = a.Dh, b = blockIdx.x, h = blockIdx.y, seg = blockIdx.z, g = h / (a.H / a.Hk), tid = threadIdx.x;
    float *qs = sm, *sc = qs + Dh, *og = sc + seglen, *red = og + (size_t)(NT / (Dh / 8)) * Dh;
    const int i = a.pos[b]; /* the query's position */
    int ja, jb;
    seg_keys(a, i, S, seg, &ja, &jb);
    const size_t row = (size_t)b * a.H + h; /* the (b, h) row of the partials */
    if (ja >= jb) { /* an empty segment (a short context, or a shorter sequence of the batch) */
        if (tid == 0 && S > 1) pm[(size_t)seg * a.B * a.H + row] = -INFINITY, pl[(size_t)seg * a.B * a.H + row] = 0.f;
        if (S > 1) merge_if_last(a, S, b, h, 1, po, pm, pl, cnt);
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
    if (S > 1) merge_if_last(a, S, b, h, 1, po, pm, pl, cnt);
}

/* ---- k_attn_dec_mma: the query heads of a kv group together, their scores on tensor cores ----
 *
 * One block per (sequence b, kv head g's tile of up to MT_HEADS query heads, key segment). The tile's heads share
 * every K and V row, so a row comes from memory once for them all (k_attn_dec reads it once a head: 16 times for
 * DeepSeek's latent head). Where it runs: bf16 and int8 pages, head dims (multiples of 8) up to 640 (mt_on).
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
 *   values: CUDA cores. The items (8-column unit u, head hh) of O [nh][Dh], unit-major, split evenly over the
 *           threads (at most MT_IPT a thread, held in registers) or, where there are fewer items than
 *           threads, the keys split over NT / items key groups, summed through shared memory at the end.
 *           Each key's V row is read once a unit a thread, each weight from sc.
 * S > 1: the (O, m, l) partials of each head merged by the tile's last block (merge_if_last). */
#define MT_CH 64    /* keys a chunk: 16 a warp */
#define MT_IPT 9    /* value items a thread at most: mt_heads keeps nh * Dh / 8 <= MT_IPT * NT */

/* query heads a block for head dim Dh */
static __host__ __device__ int mt_heads(int Dh)
{
    const int h = MT_IPT * NT * 8 / Dh;
    return h > MT_HEADS ? MT_HEADS : h;
}
static __host__ __device__ int mt_ld(int Dh)
{
    const int d = (Dh + 31) / 32 * 32;
    return d % 64 ? d : d + 32;
}
/* shared memory: Q's two planes (or, at the end, the key groups' O: NT x 8 floats), sc, m, l, f */
static __host__ __device__ size_t mt_qbytes(int Dh)
{
    const size_t q = (size_t)2 * MT_HEADS * mt_ld(Dh) * 2, o = (size_t)NT * 8 * sizeof(float);
    return q > o ? q : o;
}
static __host__ __device__ size_t mt_smem(int Dh) { return mt_qbytes(Dh) + sizeof(float) * (MT_HEADS * MT_CH + 3 * MT_HEADS); }
/* k_attn_dec_mma takes the launch: bf16 or int8 pages, within the default 48 KB of shared memory (head dims to 640) */
static bool mt_on(int dt, int Dh, int mma) { return mma && (dt == 0 || dt == 3) && mt_smem(Dh) <= 48 * 1024; }

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
    const int Dh = a.Dh, b = blockIdx.x, G = a.H / a.Hk, HT = mt_heads(Dh), tiles = (G + HT - 1) / HT;
    const int g = blockIdx.y / tiles, tile = blockIdx.y % tiles, h0 = g * G + tile * HT, nh = min(HT, G - tile * HT);
    const int seg = blockIdx.z, tid = threadIdx.x, lane = tid & 31, w = tid >> 5, ld = mt_ld(Dh);
    uint16_t *qs = (uint16_t *)smb;
    float *sc = (float *)(smb + mt_qbytes(Dh)), *mm = sc + MT_HEADS * MT_CH, *ll = mm + MT_HEADS, *ff = ll + MT_HEADS;
    const size_t BH = (size_t)a.B * a.H;
    const int i = a.pos[b];
    int ja, jb;
    seg_keys(a, i, S, seg, &ja, &jb);
    if (ja >= jb) { /* an empty segment */
        if (S > 1 && tid < nh) pm[seg * BH + (size_t)b * a.H + h0 + tid] = -INFINITY, pl[seg * BH + (size_t)b * a.H + h0 + tid] = 0.f;
        if (S > 1) merge_if_last(a, S, b, h0, nh, po, pm, pl, cnt);
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
    /* the value items: it = u * nh + hh */
    const int nu = Dh / 8, I = nh * nu, KG = I >= NT ? 1 : NT / I, TPG = NT / KG, kg = tid / TPG, tl = tid % TPG;
    const int ipt = (I + TPG - 1) / TPG, it0 = tl * ipt;
    int uk[MT_IPT], hk[MT_IPT];
    float acc[MT_IPT][8];
#pragma unroll
    for (int k = 0; k < MT_IPT; k++) {
        const int it = it0 + k;
        const bool on = kg < KG && k < ipt && it < I;
        uk[k] = on ? it / nh : -1, hk[k] = on ? it % nh : 0;
#pragma unroll
        for (int e = 0; e < 8; e++) acc[k][e] = 0.f;
    }
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
                    sc[hh * MT_CH + j - c0] = v;
                }
        }
        __syncthreads();
        for (int hh = w; hh < nh; hh += NT / 32) { /* the online softmax, a warp a head */
            float *r = sc + hh * MT_CH;
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
#pragma unroll
        for (int k = 0; k < MT_IPT; k++)
            if (uk[k] >= 0) {
                const float f = ff[hk[k]];
#pragma unroll
                for (int e = 0; e < 8; e++) acc[k][e] *= f;
            }
        if (kg < KG)
            for (int j = c0 + kg; j < c1; j += KG) {
                float vs, v[8];
                const uint8_t *vr = kv_row<DT>(a, pt, b, g, 1, i, j, &vs);
                int ul = -1;
#pragma unroll
                for (int k = 0; k < MT_IPT; k++)
                    if (uk[k] >= 0) {
                        if (uk[k] != ul) load8<DT>(vr, uk[k] * 8, v), ul = uk[k];
                        const float p = sc[hk[k] * MT_CH + j - c0];
#pragma unroll
                        for (int e = 0; e < 8; e++) acc[k][e] += p * v[e];
                    }
            }
        __syncthreads(); /* sc is the next chunk's */
    }
    if (KG > 1) { /* one item a thread; the key groups' sums through shared memory (over Q, done with) */
        float *og = (float *)smb;
        if (kg < KG && kg > 0 && uk[0] >= 0)
#pragma unroll
            for (int e = 0; e < 8; e++) og[((size_t)(kg - 1) * I + it0) * 8 + e] = acc[0][e];
        __syncthreads();
        if (kg == 0 && uk[0] >= 0)
            for (int r = 1; r < KG; r++)
#pragma unroll
                for (int e = 0; e < 8; e++) acc[0][e] += og[((size_t)(r - 1) * I + it0) * 8 + e];
    }
    if (kg == 0 || KG == 1)
#pragma unroll
        for (int k = 0; k < MT_IPT; k++) {
            if (uk[k] < 0) continue;
            const int hh = hk[k], h = h0 + hh;
            const size_t row = (size_t)b * a.H + h;
            if (S == 1) { /* the sink's logit in the sum; the row normalised */
                const float m = mm[hh], M = a.sinks ? fmaxf(m, a.sinks[h]) : m, f = expf(m - M);
                const float den = ll[hh] * f + (a.sinks ? expf(a.sinks[h] - M) : 0.f), fo = den > 0.f ? f / den : 0.f;
                *(uint4 *)(a.out + row * Dh + uk[k] * 8) =
                    make_uint4(pack_bf16(acc[k][0] * fo, acc[k][1] * fo), pack_bf16(acc[k][2] * fo, acc[k][3] * fo),
                               pack_bf16(acc[k][4] * fo, acc[k][5] * fo), pack_bf16(acc[k][6] * fo, acc[k][7] * fo));
            } else {
                float *o = po + (seg * BH + row) * Dh + uk[k] * 8;
#pragma unroll
                for (int e = 0; e < 8; e++) o[e] = acc[k][e];
            }
        }
    if (S > 1) {
        if (tid < nh) pm[seg * BH + (size_t)b * a.H + h0 + tid] = mm[tid], pl[seg * BH + (size_t)b * a.H + h0 + tid] = ll[tid];
        merge_if_last(a, S, b, h0, nh, po, pm, pl, cnt);
    }
}

/* blocks a (sequence, segment): query heads (k_attn_dec) or kv heads' tiles (k_attn_dec_mma) */
extern "C" int cu_attn_decode_blocks(int H, int Hk, int Dh, int dt, int mma)
{
    if (!mt_on(dt, Dh, mma)) return H;
    const int G = H / Hk, HT = mt_heads(Dh);
    return Hk * ((G + HT - 1) / HT);
}

extern "C" size_t cu_attn_decode_smem(int Dh, int seglen) { return dec_smem(Dh, seglen); }

extern "C" void cu_attn_decode(cu_stream s, const cu_dec_attn_args *a, int S, int seglen, float *scratch)
{
    float *po = scratch, *pm = po + (size_t)S * a->B * a->H * a->Dh, *pl = pm + (size_t)S * a->B * a->H;
    unsigned *cnt = a->cnt;
    if (mt_on(a->dt, a->Dh, a->mma)) {
        dim3 grid((unsigned)a->B, (unsigned)cu_attn_decode_blocks(a->H, a->Hk, a->Dh, a->dt, 1), (unsigned)S);
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
