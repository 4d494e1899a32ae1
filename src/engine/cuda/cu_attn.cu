/* engine/cuda/cu_attn.cu: causal attention of a prefill chunk over the device KV mirror, flash-style
 * (FlashAttention-2's loop): keys in tiles, an online softmax (running max and sum per query row, the
 * accumulator rescaled when the max moves), so no T x T score matrix exists.
 *
 * k_attn_fa<DH> (DH a multiple of 16, up to CU_MAX_DH; one instance per head dim): tensor cores through
 * mma.sync m16n8k16 (bf16 in, f32 accumulate), operands from shared memory by ldmatrix. A block of 4
 * warps takes 64 query rows of one head, 16 per warp, and one segment of their keys.
 *
 *   shared: Q [64][DH + 8] bf16 (the block's rows, loaded once), K and V [2][64][DH + 8] bf16 (two tiles
 *           of 64 keys: the next one's cp.async copies run while this one is used). The 8-element pad
 *           makes a row's stride an odd number of 16-byte units, so ldmatrix's 8 rows hit 8 banks.
 *   registers, per warp (16 rows): S = Q·Kᵀ [16][64] f32 as 8 accumulator tiles of 16 x 8; P = exp(S - m)
 *           rounded to bf16 goes straight from those accumulators into the A operand of P·V (the C
 *           fragment of two neighbouring 16 x 8 tiles is the A fragment of one 16 x 16); O [16][DH] f32
 *           as DH / 8 accumulator tiles, rescaled in place; a row's running max m and partial sum l per
 *           thread (a row's four threads hold 16 of its 64 scores each; their sums meet at the end).
 *
 * Fragment layouts (PTX ISA, mma.m16n8k16 .bf16; g = lane / 4, c = lane % 4): A regs {a0..a3} = rows
 * (g, g + 8) x cols (2c, 2c + 1) for k 0-7 then k 8-15; B regs {b0, b1} = k (2c, 2c + 1) then + 8, col g;
 * C regs {c0..c3} = row g cols (2c, 2c + 1), row g + 8 the same. K [key][d] in shared memory is Kᵀ in
 * B's column-major form (ldmatrix as stored); V [key][d] is row-major in k, so ldmatrix .trans.
 *
 * Each score: scale, softcap, ALiBi, then the causal / sliding-window mask (and padding rows: every key
 * masked, their output 0). Scores and maxima are kept in log2 units (times log2 e; without softcap or
 * ALiBi that folds into the scale), so each weight is one exp2 of a difference; the segments' maxima
 * leave in natural units for the merge. Head dims up to 64 ask for 4 blocks an SM (128 registers; at
 * Dh 64 that spills 24 bytes and measured 1.30x the attention's speed with the exp2 form, H200). Long contexts split the keys into S segments (the grid's z; cuda_engine.c
 * picks S by context) so that enough blocks run; k_attn_combine then merges the segments' (O, max,
 * sum). Sinks start a row's sum at 1 with its max at the sink's logit (or enter in the merge). */
#include <cuda_bf16.h>
#include <math.h>

#include "engine/cuda/cu_launch.cuh"
#include "engine/cuda/cu_mma.cuh"
#include "engine/cuda/cuda-impl.h"

#define WARPS 8 /* k_attn_combine: warps per block */
#define ACC (CU_MAX_DH / 32)

#define FA_WARPS 4
#define FA_ROWS (16 * FA_WARPS) /* query rows per block */
#define FA_TK 64                /* keys per tile */
#define L2E 1.4426950408889634f /* log2(e): the scores and maxima are kept in log2 units, exp2 of their differences */
#define LN2 0.6931471805599453f

/* bytes of shared memory k_attn_fa<DH> uses: Q, then K[2], V[2], rows of DH + 8 bf16 */
static __host__ __device__ constexpr size_t fa_smem(int DH) { return (size_t)(FA_ROWS + 4 * FA_TK) * (DH + 8) * 2; }

/* 16 bytes global -> shared, asynchronously; n < 16 copies n bytes and zero-fills the rest (n 0: zeros) */
static __device__ __forceinline__ void cp16(void *dst, const void *src, int n)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(n));
}
static __device__ __forceinline__ void cp_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }
static __device__ __forceinline__ void cp_wait1(void) { asm volatile("cp.async.wait_group 1;\n" ::); }

/* Block (64 rows from blockIdx.x * 64, head blockIdx.y, key segment blockIdx.z of S). With S == 1 it
 * writes the output rows (bf16 [T][H][DH]; padding rows 0); else its segment's unnormalised O, running
 * max and sum into po / pm / pl [S][T][H](DH) for k_attn_combine. */
template <int DH>
__global__ void __launch_bounds__(32 * FA_WARPS, DH <= 64 ? 4 : 1) k_attn_fa(cu_attn_args a, int S, float *po, float *pm, float *pl)
{
    pdl_enter();
    extern __shared__ __align__(128) unsigned char smem[];
    constexpr int LD = DH + 8, NO = DH / 8; /* NO: O's 16 x 8 accumulator tiles */
    __nv_bfloat16 *Qs = (__nv_bfloat16 *)smem, *Ks = Qs + FA_ROWS * LD, *Vs = Ks + 2 * FA_TK * LD;
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    const int tb = blockIdx.x * FA_ROWS, h = blockIdx.y, seg = blockIdx.z, kvh = h / (a.H / a.Hk);
    const int t0 = tb + w * 16;                                   /* the warp's first row */
    const int brows = min(a.n_valid - tb, FA_ROWS);               /* the block's real rows */
    const int rows = max(0, min(a.n_valid - t0, 16));             /* the warp's */
    uint16_t *out = a.out + (size_t)h * DH;
    if (brows <= 0) { /* padding rows only */
        if (S == 1)
            for (int e = threadIdx.x; e < FA_ROWS * DH / 2; e += 32 * FA_WARPS)
                if (tb + e / (DH / 2) < a.T) *(unsigned *)(out + (size_t)(tb + e / (DH / 2)) * a.H * DH + e % (DH / 2) * 2) = 0;
        return;
    }
    for (int e = threadIdx.x; e < FA_ROWS * DH / 2; e += 32 * FA_WARPS) { /* Q, bf16; padding rows 0 */
        const int r = e / (DH / 2), d = e % (DH / 2) * 2;
        float2 q = make_float2(0.f, 0.f);
        if (r < brows) q = *(const float2 *)(a.qkv + (size_t)(tb + r) * a.nqkv + (size_t)h * DH + d);
        *(unsigned *)(Qs + r * LD + d) = pack_bf16(q.x, q.y);
    }
    const int i0 = a.pos0 + tb, i1 = a.pos0 + tb + brows - 1; /* the block's positions */
    const int jlo = a.window > 0 && i0 - a.window + 1 > 0 ? i0 - a.window + 1 : 0;
    const int nt = (i1 - jlo) / FA_TK + 1, ta = (int)((long)nt * seg / S), tz = (int)((long)nt * (seg + 1) / S);
    const int wlast = a.pos0 + t0 + (rows > 0 ? rows - 1 : 0); /* the warp's last position */
    const int wfirst = a.window > 0 && a.pos0 + t0 - a.window + 1 > 0 ? a.pos0 + t0 - a.window + 1 : 0;
    const uint16_t *kb = a.kc + (size_t)kvh * a.cap * DH, *vb = a.vc + (size_t)kvh * a.cap * DH;
    /* tile ti's keys into buffer buf; keys past the block's last position are zeros (never garbage: P·V
       multiplies them by 0) */
    auto load = [&](int ti, int buf) {
        const int jt = jlo + ti * FA_TK;
        __nv_bfloat16 *kd = Ks + buf * FA_TK * LD, *vd = Vs + buf * FA_TK * LD;
        for (int e = threadIdx.x; e < FA_TK * DH / 8; e += 32 * FA_WARPS) {
            const int j = e / (DH / 8), d = e % (DH / 8) * 8, ok = jt + j <= i1;
            const size_t off = (size_t)(ok ? jt + j : jt) * DH + d;
            cp16(kd + j * LD + d, kb + off, ok ? 16 : 0);
            cp16(vd + j * LD + d, vb + off, ok ? 16 : 0);
        }
        cp_commit();
    };
    float o[NO][4];
#pragma unroll
    for (int i = 0; i < NO; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    /* rows g (hi 0) and g + 8 (hi 1) of the warp's 16: running max, this thread's part of the sum */
    float m[2], l[2];
    m[0] = m[1] = S == 1 && a.sinks ? a.sinks[h] * L2E : -INFINITY;
    l[0] = l[1] = S == 1 && a.sinks && c == 0 ? 1.f : 0.f;
    const int ir[2] = {a.pos0 + t0 + g, a.pos0 + t0 + g + 8};
    const bool live[2] = {g < rows, g + 8 < rows};
    const float al = a.alibi ? a.alibi[h] : 0.f, sc2 = a.scale * L2E;
    if (ta < tz) load(ta, 0);
    for (int ti = ta; ti < tz; ti++) {
        const int buf = (ti - ta) & 1, jt = jlo + ti * FA_TK;
        if (ti + 1 < tz) load(ti + 1, buf ^ 1);
        else cp_commit(); /* an empty group: wait_group 1 below then waits for this tile's */
        cp_wait1();
        __syncthreads();
        if (rows > 0 && jt <= wlast && jt + FA_TK - 1 >= wfirst) {
            const __nv_bfloat16 *kt = Ks + buf * FA_TK * LD, *vt = Vs + buf * FA_TK * LD;
            float s[8][4]; /* S [16][64]: tile n holds keys jt + 8n .. + 7 */
#pragma unroll
            for (int n = 0; n < 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < DH / 16; kk++) {
                unsigned qa[4];
                ldm4(qa, Qs + (w * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
#pragma unroll
                for (int np = 0; np < 4; np++) { /* keys 16 np .. + 15: two B fragments */
                    unsigned kf[4];
                    ldm4(kf, kt + (np * 16 + (lane & 7) + (lane >> 4) * 8) * LD + kk * 16 + (lane >> 3 & 1) * 8);
                    mma_bf16(s[2 * np], qa, kf[0], kf[1]);
                    mma_bf16(s[2 * np + 1], qa, kf[2], kf[3]);
                }
            }
            /* no mask needed where every key is at or before the first row and within the last row's window */
            const bool full = rows == 16 && jt + FA_TK - 1 <= a.pos0 + t0 && (a.window <= 0 || wlast - jt < a.window);
            float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int n = 0; n < 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int hi = e >> 1, j = jt + n * 8 + 2 * c + (e & 1);
                    float v = s[n][e] * sc2; /* log2 units */
                    if (a.softcap != 0.f || a.alibi) {
                        v = s[n][e] * a.scale;
                        if (a.softcap != 0.f) v = tanhf(v / a.softcap) * a.softcap;
                        if (a.alibi) v += al * (float)(j - ir[hi]);
                        v *= L2E;
                    }
                    if (!full && !(live[hi] && j <= ir[hi] && (a.window <= 0 || ir[hi] - j < a.window))) v = -INFINITY;
                    s[n][e] = v;
                    mx[hi] = fmaxf(mx[hi], v);
                }
            float cr[2];
#pragma unroll
            for (int hi = 0; hi < 2; hi++) { /* a row's four threads agree on its max */
                mx[hi] = fmaxf(mx[hi], __shfl_xor_sync(0xffffffffu, mx[hi], 1));
                mx[hi] = fmaxf(mx[hi], __shfl_xor_sync(0xffffffffu, mx[hi], 2));
                const float mn = fmaxf(m[hi], mx[hi]);
                cr[hi] = m[hi] == -INFINITY ? 0.f : exp2f(m[hi] - mn);
                m[hi] = mn;
                l[hi] *= cr[hi];
            }
#pragma unroll
            for (int n = 0; n < 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int hi = e >> 1;
                    const float p = m[hi] == -INFINITY ? 0.f : exp2f(s[n][e] - m[hi]);
                    s[n][e] = p;
                    l[hi] += p;
                }
#pragma unroll
            for (int i = 0; i < NO; i++) o[i][0] *= cr[0], o[i][1] *= cr[0], o[i][2] *= cr[1], o[i][3] *= cr[1];
#pragma unroll
            for (int ks = 0; ks < 4; ks++) { /* O += P[:, 16 ks ..] · V[16 ks .., :] */
                const unsigned pa[4] = {pack_bf16(s[2 * ks][0], s[2 * ks][1]), pack_bf16(s[2 * ks][2], s[2 * ks][3]),
                                        pack_bf16(s[2 * ks + 1][0], s[2 * ks + 1][1]),
                                        pack_bf16(s[2 * ks + 1][2], s[2 * ks + 1][3])};
#pragma unroll
                for (int dp = 0; dp < DH / 16; dp++) { /* columns 16 dp .. + 15: two B fragments */
                    unsigned vf[4];
                    ldm4t(vf, vt + (ks * 16 + (lane & 7) + (lane >> 3 & 1) * 8) * LD + dp * 16 + (lane >> 4) * 8);
                    mma_bf16(o[2 * dp], pa, vf[0], vf[1]);
                    mma_bf16(o[2 * dp + 1], pa, vf[2], vf[3]);
                }
            }
        }
        __syncthreads(); /* this tile's buffer is next loaded over */
    }
#pragma unroll
    for (int hi = 0; hi < 2; hi++) {
        l[hi] += __shfl_xor_sync(0xffffffffu, l[hi], 1);
        l[hi] += __shfl_xor_sync(0xffffffffu, l[hi], 2);
    }
    if (S > 1) { /* the segment's partial state, real rows only */
#pragma unroll
        for (int hi = 0; hi < 2; hi++) {
            if (!live[hi]) continue;
            const size_t rh = ((size_t)seg * a.T + t0 + g + 8 * hi) * a.H + h;
#pragma unroll
            for (int i = 0; i < NO; i++) *(float2 *)(po + rh * DH + i * 8 + 2 * c) = make_float2(o[i][2 * hi], o[i][2 * hi + 1]);
            if (c == 0) pm[rh] = m[hi] * LN2, pl[rh] = l[hi]; /* the merge's max in natural units */
        }
        return;
    }
#pragma unroll
    for (int hi = 0; hi < 2; hi++) {
        const int t = t0 + g + 8 * hi;
        if (t >= a.T) continue;
        const float inv = live[hi] && l[hi] > 0.f ? 1.f / l[hi] : 0.f;
        uint16_t *orow = out + (size_t)t * a.H * DH + 2 * c;
#pragma unroll
        for (int i = 0; i < NO; i++) *(unsigned *)(orow + i * 8) = pack_bf16(o[i][2 * hi] * inv, o[i][2 * hi + 1] * inv);
    }
}

/* the segments of each (row, head) merged: M = max m_s (and the sink), O = Σ O_s e^(m_s - M) / Σ l_s e^(m_s - M)
 * (+ e^(sink - M) in the sum); one warp per (row, head); padding rows get zeros */
__global__ void k_attn_combine(cu_attn_args a, int S, const float *po, const float *pm, const float *pl)
{
    pdl_enter();
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

/* one k_attn_fa instance per head dim the engine binds (cuda_engine.c refuses the others) */
#define FA_DIMS(X) X(16) X(32) X(48) X(64) X(80) X(96) X(112) X(128) X(144) X(160) X(176) X(192) X(208) X(224) X(240) X(256)

/* Each instance's own shared-memory limit: engines bound for different head dims do not undo each other's. */
extern "C" int cu_attention_setup(int Dh)
{
    switch (Dh) {
#define FA_SET(d)                                                                                                      \
    case d: return cudaFuncSetAttribute(k_attn_fa<d>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fa_smem(d)) == \
                   cudaSuccess;
        FA_DIMS(FA_SET)
#undef FA_SET
    }
    return 0;
}

extern "C" void cu_attention(cu_stream s, const cu_attn_args *a, float *scratch, int S)
{
    if (!scratch || S < 1) S = 1;
    dim3 grid((unsigned)((a->T + FA_ROWS - 1) / FA_ROWS), (unsigned)a->H, (unsigned)S);
    float *po = scratch, *pm = po + (size_t)S * a->T * a->H * a->Dh, *pl = pm + (size_t)S * a->T * a->H;
    switch (a->Dh) {
#define FA_RUN(d)                                                                                                      \
    case d: cu_go(k_attn_fa<d>, grid, 32 * FA_WARPS, fa_smem(d), s, *a, S, po, pm, pl); break;
        FA_DIMS(FA_RUN)
#undef FA_RUN
    }
    if (S > 1) cu_attention_combine(s, a, S, scratch);
}

extern "C" void cu_attention_combine(cu_stream s, const cu_attn_args *a, int S, float *scratch)
{
    float *po = scratch, *pm = po + (size_t)S * a->T * a->H * a->Dh, *pl = pm + (size_t)S * a->T * a->H;
    long items = (long)a->T * a->H;
    cu_go(k_attn_combine, (unsigned)((items + WARPS - 1) / WARPS), WARPS * 32, 0, s, *a, S, po, pm, pl);
}
