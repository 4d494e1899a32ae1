/* engine/cuda/cu_attn.cu: causal attention of a prefill chunk over the device KV mirror, flash-style:
 * keys in tiles, an online softmax (running max and sum per query row, the accumulator rescaled when
 * the max moves), so no T x T score matrix exists. Two kernels, by head dim:
 *
 * k_attn_tc (Dh % 16 == 0, every model the engine has met): tensor cores through wmma (bf16 in, f32
 * accumulate). One warp per (16 query rows, head): Q [16][Dh] bf16 in shared memory; per tile of 16
 * keys, K and V [16][Dh] into shared memory, S = Q·Kᵀ [16][16] (Dh / 16 mma), the softmax step on S
 * by two lanes per row (scale, softcap, ALiBi, causal / window mask), P [16][16] bf16, then
 * O [16][Dh] f32 (shared memory) = O·corr + P·V (Dh / 16 mma). Sinks start a row's sum at 1 with
 * its max at the sink's logit.
 *
 * k_attention (any Dh <= 256): CUDA cores, one warp per (query row, head), keys 32 at a time: lane L
 * scores key jb + L against q (in shared memory), then each lane owns dims L, L + 32, ... of the
 * output and adds p_j v_j[d] for the 32 keys (p_j broadcast by shuffle). */
#include <cuda_bf16.h>
#include <math.h>
#include <mma.h>

#include "engine/cuda/cuda-impl.h"

#define WARPS 8
#define ACC (CU_MAX_DH / 32)

static __device__ __forceinline__ float bf(uint16_t h) { return __bfloat162float(__ushort_as_bfloat16(h)); }

__global__ void k_attention(cu_attn_args a)
{
    __shared__ float sq[WARPS][CU_MAX_DH];
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, Dh = a.Dh;
    long item = (long)blockIdx.x * WARPS + wid;
    if (item >= (long)a.T * a.H) return;
    int t = (int)(item / a.H), h = (int)(item % a.H), g = h / (a.H / a.Hk);
    uint16_t *o = a.out + (size_t)t * a.H * Dh + (size_t)h * Dh;
    if (t >= a.n_valid) { /* padding rows: no real row reads them */
        for (int d = lane; d < Dh; d += 32) o[d] = 0;
        return;
    }
    float *q = sq[wid];
    const float *qr = a.qkv + (size_t)t * a.nqkv + (size_t)h * Dh;
    for (int d = lane; d < Dh; d += 32) q[d] = qr[d];
    __syncwarp();
    int i = a.pos0 + t, j0 = a.window > 0 && i - a.window + 1 > 0 ? i - a.window + 1 : 0;
    const uint16_t *kb = a.kc + (size_t)g * a.cap * Dh, *vb = a.vc + (size_t)g * a.cap * Dh;
    float m = a.sinks ? a.sinks[h] : -INFINITY, l = a.sinks ? 1.f : 0.f, acc[ACC];
    for (int k = 0; k < ACC; k++) acc[k] = 0.f;
    for (int jb = j0; jb <= i; jb += 32) {
        int j = jb + lane, ok = j <= i;
        float s = -INFINITY;
        if (ok) {
            const uint16_t *kr = kb + (size_t)j * Dh;
            float dot = 0.f;
            if ((Dh & 7) == 0) {
                for (int d = 0; d < Dh; d += 8) {
                    uint4 u = *(const uint4 *)(kr + d);
                    const uint16_t *e = (const uint16_t *)&u;
#pragma unroll
                    for (int z = 0; z < 8; z++) dot += q[d + z] * bf(e[z]);
                }
            } else {
                for (int d = 0; d < Dh; d++) dot += q[d] * bf(kr[d]);
            }
            s = dot * a.scale;
            if (a.softcap != 0.f) s = tanhf(s / a.softcap) * a.softcap;
            if (a.alibi) s += a.alibi[h] * (float)(j - i);
        }
        float cm = s;
        for (int off = 16; off > 0; off >>= 1) cm = fmaxf(cm, __shfl_xor_sync(0xffffffffu, cm, off));
        float mn = fmaxf(m, cm);
        float p = ok ? expf(s - mn) : 0.f, corr = m == -INFINITY ? 0.f : expf(m - mn);
        float ps = p;
        for (int off = 16; off > 0; off >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, off);
        l = l * corr + ps;
        for (int k = 0; k < ACC; k++) acc[k] *= corr;
        int nj = i - jb + 1 < 32 ? i - jb + 1 : 32;
        for (int jj = 0; jj < nj; jj++) {
            float pj = __shfl_sync(0xffffffffu, p, jj);
            const uint16_t *vr = vb + (size_t)(jb + jj) * Dh;
#pragma unroll
            for (int k = 0; k < ACC; k++) {
                int d = lane + 32 * k;
                if (d < Dh) acc[k] += pj * bf(vr[d]);
            }
        }
        m = mn;
    }
    float inv = 1.f / l;
#pragma unroll
    for (int k = 0; k < ACC; k++) {
        int d = lane + 32 * k;
        if (d < Dh) o[d] = __bfloat16_as_ushort(__float2bfloat16_rn(acc[k] * inv));
    }
}

/* ---- the tensor-core kernel ---- */

using namespace nvcuda;
#define TQ 16 /* query rows per warp, keys per tile */

__global__ void k_attn_tc(cu_attn_args a)
{
    extern __shared__ __align__(32) unsigned char smem[];
    int lane = threadIdx.x, Dh = a.Dh, ld = Dh + 8; /* +8 bf16: rows off the same banks */
    __nv_bfloat16 *Qs = (__nv_bfloat16 *)smem, *Ks = Qs + TQ * ld, *Vs = Ks + TQ * ld;
    float *Os = (float *)(Vs + TQ * ld);   /* [TQ][Dh] */
    float *Ss = Os + TQ * Dh;              /* [TQ][TQ] */
    __nv_bfloat16 *Ps = (__nv_bfloat16 *)(Ss + TQ * TQ); /* [TQ][TQ] */
    float *corr = (float *)(Ps + TQ * TQ); /* [TQ] */
    int t0 = blockIdx.x * TQ, h = blockIdx.y, g = h / (a.H / a.Hk);
    int rows = a.n_valid - t0 < TQ ? a.n_valid - t0 : TQ; /* real rows of this tile */
    if (rows <= 0) { /* a tile of padding rows: zeros */
        for (int e = lane; e < TQ * Dh; e += 32) {
            int r = e / Dh;
            if (t0 + r < a.T) a.out[(size_t)(t0 + r) * a.H * Dh + (size_t)h * Dh + e % Dh] = 0;
        }
        return;
    }
    const uint16_t *kb = a.kc + (size_t)g * a.cap * Dh, *vb = a.vc + (size_t)g * a.cap * Dh;
    for (int e = lane; e < TQ * Dh; e += 32) {
        int r = e / Dh, d = e % Dh;
        float q = r < rows ? a.qkv[(size_t)(t0 + r) * a.nqkv + (size_t)h * Dh + d] : 0.f;
        Qs[r * ld + d] = __float2bfloat16_rn(q);
        Os[e] = 0.f;
    }
    /* row state: lanes 2r and 2r + 1 both keep row r's (the same values) */
    int r = lane >> 1, half = lane & 1, ir = a.pos0 + t0 + r;
    float m = a.sinks ? a.sinks[h] : -INFINITY, l = a.sinks ? 1.f : 0.f;
    int i0 = a.pos0 + t0, i1 = a.pos0 + t0 + rows - 1;
    int jlo = a.window > 0 && i0 - a.window + 1 > 0 ? i0 - a.window + 1 : 0;
    for (int jt = jlo; jt <= i1; jt += TQ) {
        __syncwarp();
        for (int e = lane; e < TQ * Dh / 8; e += 32) { /* K and V tiles, 8 bf16 at a time where aligned */
            int j = e / (Dh / 8), d = (e % (Dh / 8)) * 8;
            uint4 kz = make_uint4(0, 0, 0, 0), vz = kz;
            if (jt + j <= i1) {
                kz = *(const uint4 *)(kb + (size_t)(jt + j) * Dh + d);
                vz = *(const uint4 *)(vb + (size_t)(jt + j) * Dh + d);
            }
            *(uint4 *)(Ks + j * ld + d) = kz;
            *(uint4 *)(Vs + j * ld + d) = vz;
        }
        __syncwarp();
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;
        wmma::fill_fragment(sf, 0.f);
        for (int k = 0; k < Dh; k += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> qf;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> kf;
            wmma::load_matrix_sync(qf, Qs + k, ld);
            wmma::load_matrix_sync(kf, Ks + k, ld); /* Kᵀ: column j is key j's row */
            wmma::mma_sync(sf, qf, kf, sf);
        }
        wmma::store_matrix_sync(Ss, sf, TQ, wmma::mem_row_major);
        __syncwarp();
        /* the softmax step: lane holds keys half * 8 .. + 8 of row r */
        float sv[8], mx = -INFINITY;
        for (int c = 0; c < 8; c++) {
            int jj = half * 8 + c, j = jt + jj;
            float v = Ss[r * TQ + jj] * a.scale;
            if (a.softcap != 0.f) v = tanhf(v / a.softcap) * a.softcap;
            if (a.alibi) v += a.alibi[h] * (float)(j - ir);
            int ok = j <= ir && r < rows && (a.window <= 0 || ir - j < a.window);
            sv[c] = ok ? v : -INFINITY;
            mx = fmaxf(mx, sv[c]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        float mn = fmaxf(m, mx), sum = 0.f;
        for (int c = 0; c < 8; c++) {
            float p = mn == -INFINITY ? 0.f : expf(sv[c] - mn);
            sum += p;
            Ps[r * TQ + half * 8 + c] = __float2bfloat16_rn(p);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        float cr = m == -INFINITY ? 0.f : expf(m - mn);
        l = l * cr + sum;
        m = mn;
        if (half == 0) corr[r] = cr;
        __syncwarp();
        for (int e = lane; e < TQ * Dh; e += 32) Os[e] *= corr[e / Dh];
        __syncwarp();
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> pf;
        wmma::load_matrix_sync(pf, Ps, TQ);
        for (int n = 0; n < Dh; n += 16) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> vf;
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;
            wmma::load_matrix_sync(of, Os + n, Dh, wmma::mem_row_major);
            wmma::load_matrix_sync(vf, Vs + n, ld);
            wmma::mma_sync(of, pf, vf, of);
            wmma::store_matrix_sync(Os + n, of, Dh, wmma::mem_row_major);
        }
    }
    __syncwarp();
    if (half == 0) corr[r] = l > 0.f ? 1.f / l : 0.f;
    __syncwarp();
    for (int e = lane; e < TQ * Dh; e += 32) {
        int rr = e / Dh;
        if (t0 + rr >= a.T) continue;
        float v = rr < rows ? Os[e] * corr[rr] : 0.f;
        a.out[(size_t)(t0 + rr) * a.H * Dh + (size_t)h * Dh + e % Dh] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
    }
}

static size_t tc_smem(int Dh)
{
    return 3 * (size_t)TQ * (Dh + 8) * 2 + (size_t)TQ * Dh * 4 + TQ * TQ * 4 + TQ * TQ * 2 + TQ * 4;
}

extern "C" void cu_attention(cu_stream s, const cu_attn_args *a)
{
    if (a->Dh % 16 == 0 && !a->cores) {
        dim3 grid((unsigned)((a->T + TQ - 1) / TQ), (unsigned)a->H);
        k_attn_tc<<<grid, 32, tc_smem(a->Dh), s>>>(*a);
        return;
    }
    long items = (long)a->T * a->H;
    k_attention<<<(unsigned)((items + WARPS - 1) / WARPS), WARPS * 32, 0, s>>>(*a);
}
