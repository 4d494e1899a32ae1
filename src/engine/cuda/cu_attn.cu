/* engine/cuda/cu_attn.cu: causal attention of a prefill chunk over the device KV mirror, flash-style:
 * keys in tiles, an online softmax (running max and sum per query row, the accumulator rescaled when
 * the max moves), so no T x T score matrix exists.
 *
 * k_attn_tc (Dh % 16 == 0): tensor cores through wmma (bf16 in, f32
 * accumulate). A block of 4 warps takes 64 query rows of one head, 16 per warp (Q [16][Dh] bf16 in
 * shared memory), and one segment of their keys: per tile of 64 keys, the block loads K and V
 * [64][Dh] into shared memory once for its 4 warps; each warp computes S = Q·Kᵀ [16][64], the softmax
 * step on S by two lanes per row (scale, softcap, ALiBi, causal / window mask), P [16][64] bf16, then
 * O [16][Dh] f32 (shared memory) = O·corr + P·V. Long contexts split the keys into S segments (the
 * grid's z; cuda_engine.c picks S by context) so that enough blocks run; k_attn_combine then merges
 * the segments' (O, max, sum). Sinks start a row's sum at 1 with its max at the sink's logit (or enter
 * in the merge). Head dims that are not a multiple of 16 are refused at bind (cuda_engine.c). */
#include <cuda_bf16.h>
#include <math.h>
#include <mma.h>

#include "engine/cuda/cuda-impl.h"

#define WARPS 8
#define ACC (CU_MAX_DH / 32)

/* ---- the tensor-core kernel ---- */

using namespace nvcuda;
#define RW 16 /* query rows per warp */
#define WB 4  /* warps per block: RW * WB = 64 rows of one head */
#define TK 64 /* keys per tile */

/* shared memory: K and V tiles [TK][Dh + 8] bf16 for the block, then per warp Q [RW][Dh + 8] bf16,
   O [RW][Dh] f32, S [RW][TK] f32, P [RW][TK + 8] bf16, a row factor [RW] f32; each region 128-byte aligned */
#define A128(x) (((x) + 127) & ~(size_t)127)
struct tc_lay {
    size_t k, v, q, o, s, p, c, warp, total;
};
static __host__ __device__ tc_lay tc_layout(int Dh)
{
    tc_lay L;
    size_t ld = (size_t)Dh + 8;
    L.k = 0, L.v = A128(TK * ld * 2);
    L.q = 0, L.o = A128(RW * ld * 2), L.s = L.o + A128((size_t)RW * Dh * 4), L.p = L.s + A128(RW * TK * 4);
    L.c = L.p + A128(RW * (TK + 8) * 2), L.warp = L.c + A128(RW * 4);
    L.total = 2 * L.v + WB * L.warp;
    return L;
}

/* Block (64 rows from blockIdx.x * 64, head blockIdx.y, key segment blockIdx.z of S). With S == 1 it
 * writes the output rows; else its segment's unnormalised O, running max and sum into po / pm / pl
 * [S][T][H](Dh) for k_attn_combine. */
__global__ void k_attn_tc(cu_attn_args a, int S, float *po, float *pm, float *pl)
{
    extern __shared__ __align__(128) unsigned char smem[];
    const int Dh = a.Dh, ld = Dh + 8, w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const tc_lay L = tc_layout(Dh);
    __nv_bfloat16 *Ks = (__nv_bfloat16 *)(smem + L.k), *Vs = (__nv_bfloat16 *)(smem + L.v);
    unsigned char *wp = smem + 2 * L.v + (size_t)w * L.warp;
    __nv_bfloat16 *Qs = (__nv_bfloat16 *)(wp + L.q), *Ps = (__nv_bfloat16 *)(wp + L.p);
    float *Os = (float *)(wp + L.o), *Ss = (float *)(wp + L.s), *fac = (float *)(wp + L.c);
    const int tb = blockIdx.x * RW * WB, h = blockIdx.y, seg = blockIdx.z, g = h / (a.H / a.Hk);
    const int t0 = tb + w * RW;
    const int brows = a.n_valid - tb < RW * WB ? a.n_valid - tb : RW * WB; /* the block's real rows */
    const int rows = a.n_valid - t0 < RW ? (a.n_valid - t0 > 0 ? a.n_valid - t0 : 0) : RW; /* the warp's */
    if (brows <= 0) { /* padding rows only */
        if (S == 1)
            for (int e = lane; e < RW * Dh; e += 32)
                if (t0 + e / Dh < a.T) a.out[(size_t)(t0 + e / Dh) * a.H * Dh + (size_t)h * Dh + e % Dh] = 0;
        return;
    }
    const uint16_t *kb = a.kc + (size_t)g * a.cap * Dh, *vb = a.vc + (size_t)g * a.cap * Dh;
    for (int e = lane; e < RW * Dh; e += 32) {
        int r = e / Dh, d = e % Dh;
        float q = r < rows ? a.qkv[(size_t)(t0 + r) * a.nqkv + (size_t)h * Dh + d] : 0.f;
        Qs[r * ld + d] = __float2bfloat16_rn(q);
        Os[e] = 0.f;
    }
    __syncwarp();
    /* row state: lanes 2r and 2r + 1 both keep row r's */
    const int r = lane >> 1, half = lane & 1, ir = a.pos0 + t0 + r;
    float m = S == 1 && a.sinks ? a.sinks[h] : -INFINITY, l = S == 1 && a.sinks ? 1.f : 0.f;
    const int i0 = a.pos0 + tb, i1 = a.pos0 + tb + brows - 1; /* the block's positions */
    const int jlo = a.window > 0 && i0 - a.window + 1 > 0 ? i0 - a.window + 1 : 0;
    const int nt = (i1 - jlo) / TK + 1, ta = (int)((long)nt * seg / S), tz = (int)((long)nt * (seg + 1) / S);
    const int wlast = a.pos0 + t0 + (rows > 0 ? rows - 1 : 0); /* the warp's last position */
    const int wfirst = a.window > 0 && a.pos0 + t0 - a.window + 1 > 0 ? a.pos0 + t0 - a.window + 1 : 0;
    for (int ti = ta; ti < tz; ti++) {
        const int jt = jlo + ti * TK;
        __syncthreads(); /* the previous tile is done with */
        for (int e = threadIdx.x; e < TK * Dh / 8; e += 32 * WB) {
            int j = e / (Dh / 8), d = (e % (Dh / 8)) * 8;
            uint4 kz = make_uint4(0, 0, 0, 0), vz = kz;
            if (jt + j <= i1) {
                kz = *(const uint4 *)(kb + (size_t)(jt + j) * Dh + d);
                vz = *(const uint4 *)(vb + (size_t)(jt + j) * Dh + d);
            }
            *(uint4 *)(Ks + j * ld + d) = kz;
            *(uint4 *)(Vs + j * ld + d) = vz;
        }
        __syncthreads();
        if (rows == 0 || jt > wlast || jt + TK - 1 < wfirst) continue; /* nothing of this tile for these rows */
        for (int n = 0; n < TK / 16; n++) { /* S = Q Kᵀ, 16 keys at a time */
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;
            wmma::fill_fragment(sf, 0.f);
            for (int k = 0; k < Dh / 16; k++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> qf;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> kf;
                wmma::load_matrix_sync(qf, Qs + k * 16, ld);
                wmma::load_matrix_sync(kf, Ks + n * 16 * ld + k * 16, ld); /* Kᵀ: column j is key j's row */
                wmma::mma_sync(sf, qf, kf, sf);
            }
            wmma::store_matrix_sync(Ss + n * 16, sf, TK, wmma::mem_row_major);
        }
        __syncwarp();
        /* the softmax step: the lane holds keys half * 32 .. + 32 of row r */
        float mx = -INFINITY;
        for (int c = 0; c < 32; c++) {
            int jj = half * 32 + c, j = jt + jj;
            float v = Ss[r * TK + jj] * a.scale;
            if (a.softcap != 0.f) v = tanhf(v / a.softcap) * a.softcap;
            if (a.alibi) v += a.alibi[h] * (float)(j - ir);
            int ok = j <= ir && r < rows && (a.window <= 0 || ir - j < a.window);
            v = ok ? v : -INFINITY;
            Ss[r * TK + jj] = v;
            mx = fmaxf(mx, v);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        float mn = fmaxf(m, mx), sum = 0.f;
        for (int c = 0; c < 32; c++) {
            int jj = half * 32 + c;
            float p = mn == -INFINITY ? 0.f : expf(Ss[r * TK + jj] - mn);
            sum += p;
            Ps[r * (TK + 8) + jj] = __float2bfloat16_rn(p);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        float cr = m == -INFINITY ? 0.f : expf(m - mn);
        l = l * cr + sum;
        m = mn;
        if (half == 0) fac[r] = cr;
        __syncwarp();
        for (int e = lane; e < RW * Dh; e += 32) Os[e] *= fac[e / Dh];
        __syncwarp();
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> pf[TK / 16];
        for (int k = 0; k < TK / 16; k++) wmma::load_matrix_sync(pf[k], Ps + k * 16, TK + 8);
        for (int n = 0; n < Dh; n += 16) { /* O = O + P V */
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;
            wmma::load_matrix_sync(of, Os + n, Dh, wmma::mem_row_major);
            for (int k = 0; k < TK / 16; k++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> vf;
                wmma::load_matrix_sync(vf, Vs + k * 16 * ld + n, ld);
                wmma::mma_sync(of, pf[k], vf, of);
            }
            wmma::store_matrix_sync(Os + n, of, Dh, wmma::mem_row_major);
        }
        __syncwarp();
    }
    if (rows == 0) { /* padding rows of a block with real ones */
        if (S == 1)
            for (int e = lane; e < RW * Dh; e += 32)
                if (t0 + e / Dh < a.T) a.out[(size_t)(t0 + e / Dh) * a.H * Dh + (size_t)h * Dh + e % Dh] = 0;
        return;
    }
    if (S > 1) { /* the segment's partial state, real rows only */
        for (int e = lane; e < RW * Dh; e += 32)
            if (e / Dh < rows) po[(((size_t)seg * a.T + t0 + e / Dh) * a.H + h) * Dh + e % Dh] = Os[e];
        if (half == 0 && r < rows) {
            pm[((size_t)seg * a.T + t0 + r) * a.H + h] = m;
            pl[((size_t)seg * a.T + t0 + r) * a.H + h] = l;
        }
        return;
    }
    if (half == 0) fac[r] = l > 0.f ? 1.f / l : 0.f;
    __syncwarp();
    for (int e = lane; e < RW * Dh; e += 32) {
        int rr = e / Dh;
        if (t0 + rr >= a.T) continue;
        float v = rr < rows ? Os[e] * fac[rr] : 0.f;
        a.out[(size_t)(t0 + rr) * a.H * Dh + (size_t)h * Dh + e % Dh] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
    }
}

/* the segments of each (row, head) merged: M = max m_s (and the sink), O = Σ O_s e^(m_s - M) / Σ l_s e^(m_s - M)
 * (+ e^(sink - M) in the sum); one warp per (row, head); padding rows get zeros */
__global__ void k_attn_combine(cu_attn_args a, int S, const float *po, const float *pm, const float *pl)
{
    int lane = threadIdx.x & 31;
    long item = (long)blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (item >= (long)a.T * a.H) return;
    int t = (int)(item / a.H), h = (int)(item % a.H), Dh = a.Dh;
    uint16_t *o = a.out + (size_t)t * a.H * Dh + (size_t)h * Dh;
    if (t >= a.n_valid) {
        for (int d = lane; d < Dh; d += 32) o[d] = 0;
        return;
    }
    float M = a.sinks ? a.sinks[h] : -INFINITY;
    for (int s = 0; s < S; s++) M = fmaxf(M, pm[((size_t)s * a.T + t) * a.H + h]);
    float Lsum = a.sinks ? expf(a.sinks[h] - M) : 0.f, acc[ACC];
    for (int k = 0; k < ACC; k++) acc[k] = 0.f;
    for (int s = 0; s < S; s++) {
        float ms = pm[((size_t)s * a.T + t) * a.H + h];
        if (ms == -INFINITY) continue; /* an empty segment */
        float f = expf(ms - M);
        Lsum += pl[((size_t)s * a.T + t) * a.H + h] * f;
        const float *os = po + (((size_t)s * a.T + t) * a.H + h) * Dh;
#pragma unroll
        for (int k = 0; k < ACC; k++)
            if (lane + 32 * k < Dh) acc[k] += os[lane + 32 * k] * f;
    }
    float inv = Lsum > 0.f ? 1.f / Lsum : 0.f;
#pragma unroll
    for (int k = 0; k < ACC; k++)
        if (lane + 32 * k < Dh) o[lane + 32 * k] = __bfloat16_as_ushort(__float2bfloat16_rn(acc[k] * inv));
}

extern "C" size_t cu_attention_scratch(int T, int H, int Dh, int S)
{
    return (size_t)S * T * H * ((size_t)Dh + 2) * sizeof(float);
}

extern "C" int cu_attention_setup(int Dh)
{
    return cudaFuncSetAttribute(k_attn_tc, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tc_layout(Dh).total) ==
           cudaSuccess;
}

extern "C" void cu_attention(cu_stream s, const cu_attn_args *a, float *scratch, int S)
{
    if (!scratch || S < 1) S = 1;
    dim3 grid((unsigned)((a->T + RW * WB - 1) / (RW * WB)), (unsigned)a->H, (unsigned)S);
    float *po = scratch, *pm = po + (size_t)S * a->T * a->H * a->Dh, *pl = pm + (size_t)S * a->T * a->H;
    k_attn_tc<<<grid, 32 * WB, tc_layout(a->Dh).total, s>>>(*a, S, po, pm, pl);
    if (S > 1) cu_attention_combine(s, a, S, scratch);
}

extern "C" void cu_attention_combine(cu_stream s, const cu_attn_args *a, int S, float *scratch)
{
    float *po = scratch, *pm = po + (size_t)S * a->T * a->H * a->Dh, *pl = pm + (size_t)S * a->T * a->H;
    long items = (long)a->T * a->H;
    k_attn_combine<<<(unsigned)((items + WARPS - 1) / WARPS), WARPS * 32, 0, s>>>(*a, S, po, pm, pl);
}
