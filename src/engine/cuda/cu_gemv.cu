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
 * The GEMV. A row set is R = 2 rows (the FFN's fused form: the pair gate f, up F + f). A block of 8 warps
 * takes 8 / KS row sets, KS warps on each, which split the row's 16-byte chunks: lane l of K slice s
 * takes chunks s·32 + l, then every 32·KS-th. Each lane loads U chunks of its R rows before it unpacks
 * any (U = 2 at B <= 2: 4 loads of 16 bytes in flight a lane; 4 measured slower, its 80 registers a
 * thread leaving 3 blocks an SM). A matrix of few rows splits its K over more warps, so that it still
 * fills the GPU (gemv_ks: under 2K warps a launch, each lane at least 2 chunks a row): the down products
 * (2,048 rows of K = 8,192 in Llama-1B, 896 of 4,864 in Qwen2.5-0.5B) run 1.15x / 1.5x faster so.
 * The indexed launches (a mixture-of-experts step: P experts' matrices in one launch) give a row set 8
 * lanes of a warp (4 row sets a warp) and split K over up to 4 warps (gemv_ix_shape), so that the down
 * product of Qwen3-30B-A3B's experts (K = 768 int4: 24 chunks a row) keeps every lane busy (32 lanes a
 * row set left 8 of them idle) and each warp has 4 rows' loads in flight.
 * Each x value a lane loads (bf16, from L1 / L2: x is a few KB that every block reads) serves R rows,
 * and each weight value it unpacks serves the B sequences. Per chunk the partial sums are f32 (weights
 * as exact small integers, x widened from bf16), multiplied by the chunk's group scale, then summed over
 * the lanes by shuffles and over the K slices through shared memory. Weights are read once per B <= 8
 * sequences; more sequences go in groups of 8 (the host wrapper), the later groups mostly from L2.
 *
 * Unpacking without conversion instructions (an int-to-float conversion issues at a fraction of the FMA
 * rate): int4, a mask puts two nibbles under a bf16 exponent, 0x4300 | q = 128 + q, which one bf16x2
 * subtract of 136 makes q - 8 (exact); bf16 widens to f32 by a shift. int8: a byte permute puts the byte
 * (its sign bit flipped) under an f32 exponent, 2^23 + 128 + v, from which one subtract leaves v. They
 * give the same values, summed in the same order, as a conversion of each weight would. (At B = 1 the
 * conversions were not what bound session 48's kernel: the layer matrices, 0.45-18 MB, are bound by the
 * launch and the memory's latency, docs/benchmarks.md "Session 49".)
 *
 * Epilogues (cu_gemv_epi): the FFN's activation fused, so that the gate|up product writes the bf16
 * input of the down product directly (no f32 [B][2F] round trip, no pass of its own): gated, a row set
 * is the pair of rows f (gate) and F + f (up) of the stacked weight and writes act(gate) * up; not
 * gated, act(y). Biases are added first. The residual (cu_gemv_res): the output and down projections
 * add their rows into the residual stream x, and the launch's last block to finish runs the next norm
 * over whole rows of x into the next product's bf16 input (res_last): the residual pass of its own, a
 * launch and a grid's drain twice a layer, goes. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cu_act.cuh"
#include "engine/cuda/cu_launch.cuh"
#include "engine/cuda/cu_rows.cuh"
#include "engine/cuda/cu_unpack.cuh"
#include "engine/cuda/cuda-impl.h"

#define GEMV_WARPS 8 /* warps per block */
#define GEMV_R 2     /* rows per row set */

/* chunks a lane loads before it unpacks, by the sequences its registers also hold */
template <int B> struct gemv_u {
    static constexpr int U = B <= 2 ? 2 : 1;
};

/* s[r][j] += one unit of each of the R rows (q[r]) times x's elements under it (xc), for the B sequences */
template <int ENC, int B>
__device__ __forceinline__ void chunk_dot(const uint4 (&q)[GEMV_R], const uint16_t *__restrict__ xc, int ldx,
                                          float (&s)[GEMV_R][B])
{
#pragma unroll
    for (int k = 0; k < 4; k++) {
        float xl[B][4], xh[B][4];
#pragma unroll
        for (int j = 0; j < B; j++) {
            uint2 a = __ldg((const uint2 *)(xc + (size_t)j * ldx + 4 * k));
            xl[j][0] = bf_lo(a.x), xl[j][1] = bf_hi(a.x), xl[j][2] = bf_lo(a.y), xl[j][3] = bf_hi(a.y);
            if (ENC != 8) {
                uint2 b = __ldg((const uint2 *)(xc + (size_t)j * ldx + 16 + 4 * k));
                xh[j][0] = bf_lo(b.x), xh[j][1] = bf_hi(b.x), xh[j][2] = bf_lo(b.y), xh[j][3] = bf_hi(b.y);
            }
        }
#pragma unroll
        for (int r = 0; r < GEMV_R; r++) {
            float lo[4], hi[4];
            word_vals<ENC>(q[r], k, lo, hi);
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < B; j++)
                    s[r][j] = ENC == 8 ? fmaf(lo[i], xl[j][i], s[r][j]) : fmaf(lo[i], xl[j][i], fmaf(hi[i], xh[j][i], s[r][j]));
        }
    }
}

/* EPI 3: x under row set rs's rows (xr [GEMV_R][B]), read once the predecessors are done (after pdl_wait), long
 * before the epilogue adds into them */
template <int B, int EPI, int R1, int B1>
__device__ __forceinline__ void res_load(float (&xr)[R1][B1], const cu_gemv_epi &ep, int rs, int nrs, int N)
{
    if constexpr (EPI == 3)
#pragma unroll
        for (int r = 0; r < GEMV_R; r++)
#pragma unroll
            for (int j = 0; j < B; j++) {
                const int nr = rs * GEMV_R + r;
                xr[r][j] = nr < N && rs < nrs ? ep.x[(size_t)j * N + nr] : 0.f;
            }
}

/* The residual epilogue's end (EPI 3): once every block of the launch has added its rows into x, the
 * last one (ep.cnt counts them, and it resets the count) runs the next norm over the B rows of x, with
 * k_residual's arithmetic (cu_rows.cuh), reading x from L2 (the other blocks wrote it) */
template <int B> __device__ void res_last(const cu_gemv_epi &ep, int D)
{
    static_assert(GEMV_WARPS * 32 == CU_ROW_NT, "the norm's block is the GEMV's");
    __shared__ int last;
    if (!ep.nw) return;
    __syncthreads(); /* every storing thread has fenced its rows (k_gemv) */
    if (threadIdx.x == 0) last = atomicAdd(ep.cnt, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int j = 0; j < B; j++)
        row_norm<true>(ep.nkind, D, ep.x + (size_t)j * D, ep.nw, ep.nb, ep.eps, ep.h32 ? ep.h32 + (size_t)j * D : NULL,
                       ep.h16 + (size_t)j * D);
    if (threadIdx.x == 0) *ep.cnt = 0;
}

/* y[j][n] (row stride ldy) for the rows n of this block's row sets, sequences j < B: x[j][K] bf16 (row
 * stride ldx); KS warps a row set (gemv_ks), or, LG < 32 (the indexed launches' short rows, gemv_ix_shape),
 * 32 / LG row sets a warp, LG lanes each. EPI 0: y f32; 1: the gated activation into ep.g (rows f and F + f);
 * 2: the activation into ep.g; 3: the residual add into ep.x and the next norm (res_last) */
template <int ENC, int B, int EPI, bool IX = false, int LG = 32>
__global__ void __launch_bounds__(GEMV_WARPS * 32) k_gemv(cu_qmat w, const uint16_t *__restrict__ x, int ldx,
                                                           float *__restrict__ y, int ldy, cu_gemv_epi ep, int KS,
                                                           cu_gemv_ix ix)
{
    constexpr int E = unit<ENC>::E, U = gemv_u<B>::U;
    bool waited = false;
    if constexpr (IX) { /* pair blockIdx.y: matrix ix.sel[p] of the stack (cu_gemv_ix), which the launch before wrote */
        pdl_wait();
        waited = true;
        const int p = blockIdx.y, m = ix.sel[p];
        w.q += (size_t)m * ix.qstride;
        w.s = (const uint8_t *)w.s + (size_t)m * ix.sstride;
        x += (size_t)(p / ix.xdiv) * ldx;
        if (y) y += (size_t)p * ldy;
        if (ep.g) ep.g += (size_t)p * ep.ldg;
        if (ep.b) ep.b += (size_t)m * ix.bstride;
    }
    constexpr int G = 32 / LG; /* row sets a warp: lane group sub (LG lanes) takes row set rs */
    __shared__ float red[GEMV_WARPS][G][GEMV_R][B];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, ks = warp % KS, sub = lane / LG, gl = lane % LG;
    const int rs = (blockIdx.x * (GEMV_WARPS / KS) + warp / KS) * G + sub; /* the row set: f (EPI 1), rows rs R.. */
    const int nrs = EPI == 1 ? ep.F : (w.N + GEMV_R - 1) / GEMV_R;
    const int nc = w.K / E, step = LG * KS;
    const size_t rowb = (size_t)w.K * ENC / 8;
    int n[GEMV_R];
#pragma unroll
    for (int r = 0; r < GEMV_R; r++) {
        n[r] = EPI == 1 ? rs + r * ep.F /* gate, up */ : rs * GEMV_R + r;
        n[r] = n[r] < w.N ? n[r] : w.N - 1; /* a row past the end repeats the last; not stored */
    }
    float acc[GEMV_R][B];
#pragma unroll
    for (int r = 0; r < GEMV_R; r++)
#pragma unroll
        for (int j = 0; j < B; j++) acc[r][j] = 0.f;
    pdl_trigger();
    /* PDL (cu_launch.cuh): the first units' weights are in flight before x is read. H100, session 50:
       tg128 1.03x (Llama-1B) and 1.10x (Qwen-0.5B) with PDL; each warp also asking its whole rows into
       L2 before the wait read 0.99x / 1.01x on top of that and slowed the head (92.8 -> 103.3 us): not kept */
    float xres[EPI == 3 ? GEMV_R : 1][EPI == 3 ? B : 1]; /* EPI 3: x under this row set's rows (res_load) */
    for (int c0 = rs < nrs ? ks * LG + gl : nc; c0 < nc; c0 += U * step) {
        uint4 q[U][GEMV_R];
        float d[U][GEMV_R];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int c = c0 + u * step;
#pragma unroll
            for (int r = 0; r < GEMV_R; r++)
                if (c < nc) {
                    q[u][r] = unit_load<ENC>(w.q + (size_t)n[r] * rowb, c);
                    d[u][r] = unit_scale<ENC>(w, n[r], c);
                }
        }
        if (!waited) {
            pdl_wait();
            res_load<B, EPI>(xres, ep, rs, nrs, w.N);
            waited = true;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int c = c0 + u * step;
            if (c >= nc) break;
            float s[GEMV_R][B];
#pragma unroll
            for (int r = 0; r < GEMV_R; r++)
#pragma unroll
                for (int j = 0; j < B; j++) s[r][j] = 0.f;
            chunk_dot<ENC, B>(q[u], x + (size_t)c * E, ldx, s);
#pragma unroll
            for (int r = 0; r < GEMV_R; r++)
#pragma unroll
                for (int j = 0; j < B; j++) acc[r][j] = fmaf(s[r][j], d[u][r], acc[r][j]);
        }
    }
    if (!waited) { /* a thread with no units still waits before it stores */
        pdl_wait();
        res_load<B, EPI>(xres, ep, rs, nrs, w.N);
    }
#pragma unroll
    for (int r = 0; r < GEMV_R; r++)
#pragma unroll
        for (int j = 0; j < B; j++) {
            float v = acc[r][j];
#pragma unroll
            for (int o = LG / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o); /* within the group */
            acc[r][j] = v;
        }
    bool mine = gl == 0 && rs < nrs; /* this thread stores its row set's results */
    if (KS > 1) { /* the K slices' sums through shared memory, into the row set's first warp */
        if (gl == 0)
#pragma unroll
            for (int r = 0; r < GEMV_R; r++)
#pragma unroll
                for (int j = 0; j < B; j++) red[warp][sub][r][j] = acc[r][j];
        __syncthreads();
        mine = mine && ks == 0;
        if (mine)
            for (int k = 1; k < KS; k++)
#pragma unroll
                for (int r = 0; r < GEMV_R; r++)
#pragma unroll
                    for (int j = 0; j < B; j++) acc[r][j] += red[warp + k][sub][r][j];
    }
    if (mine) {
        if constexpr (EPI == 1) {
            const float bg = ep.b ? ep.b[rs] : 0.f, bu = ep.b ? ep.b[ep.F + rs] : 0.f;
#pragma unroll
            for (int j = 0; j < B; j++)
                ep.g[(size_t)j * ep.ldg + rs] =
                    __bfloat16_as_ushort(__float2bfloat16_rn(glu_f(ep.act, acc[0][j] + bg, acc[1][j] + bu)));
        } else {
#pragma unroll
            for (int r = 0; r < GEMV_R; r++) {
                const int nr = rs * GEMV_R + r;
                if (nr < w.N)
#pragma unroll
                    for (int j = 0; j < B; j++) {
                        const float bn = ep.b ? ep.b[nr] : 0.f;
                        if (EPI == 0) y[(size_t)j * ldy + nr] = acc[r][j];
                        else if (EPI == 2)
                            ep.g[(size_t)j * ep.ldg + nr] =
                                __bfloat16_as_ushort(__float2bfloat16_rn(act_f(ep.act, acc[r][j] + bn)));
                        else /* as k_residual */
                            ep.x[(size_t)j * w.N + nr] = __fmaf_rn(acc[r][j] + bn, ep.scale, xres[r][j]);
                    }
            }
            if (EPI == 3) __threadfence(); /* these rows of x visible before the block counts itself done */
        }
    }
    if constexpr (EPI == 3) res_last<B>(ep, w.N); /* every thread of the block, storing or not */
}

static int ks_forced; /* cu_gemv_force_ks */

void cu_gemv_force_ks(int ks) { ks_forced = ks == 1 || ks == 2 || ks == 4 || ks == 8 ? ks : 0; }

/* warps a row set: more while a lane keeps at least 2 chunks a row and the launch has under 2K warps
 * (session 49's sweep on an H200, tools/cu_gemv_bench.c: the down products gain, the wide ones lose) */
static int gemv_ks(int nrs, int nc)
{
    if (ks_forced) return ks_forced;
    int ks = 1;
    while (ks < GEMV_WARPS && nc >= 64 * ks && (long)nrs * ks < 2048) ks *= 2;
    return ks;
}

/* blocks of one launch over nrs row sets of nc chunks each; *ks := the warps a row set */
static int gemv_blocks(int nrs, int nc, int *ks)
{
    *ks = gemv_ks(nrs, nc);
    const int per = GEMV_WARPS / *ks;
    return (nrs + per - 1) / per;
}

template <int ENC, int B, int EPI>
static void launch(cudaStream_t s, const cu_qmat &w, const uint16_t *x, int ldx, float *y, int ldy, const cu_gemv_epi &ep)
{
    int ks;
    const int blocks = gemv_blocks(EPI == 1 ? ep.F : (w.N + GEMV_R - 1) / GEMV_R, w.K / unit<ENC>::E, &ks);
    cu_go(k_gemv<ENC, B, EPI>, (unsigned)blocks, GEMV_WARPS * 32, 0, s, w, x, ldx, y, ldy, ep, ks, cu_gemv_ix{});
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
        switch (w->enc) {
        case 4: launch_b<4, EPI>(s, *w, xj, ldx, b, yj, ldy, ep); break;
        default: launch_b<8, EPI>(s, *w, xj, ldx, b, yj, ldy, ep);
        }
        if (ep.g) ep.g += (size_t)8 * ep.ldg;
        if (EPI == 3) ep.x += (size_t)8 * w->N, ep.h16 += ep.h16 ? (size_t)8 * w->N : 0, ep.cnt++;
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

void cu_gemv_res(cu_stream s, const cu_qmat *w, const uint16_t *x, int ldx, int B, const cu_gemv_epi *ep)
{
    gemv_groups<3>(s, w, x, ldx, B, NULL, 0, *ep);
}

static int lg_forced; /* cu_gemv_force_lg */

void cu_gemv_force_lg(int lg) { lg_forced = lg == 8 || lg == 16 || lg == 32 ? lg : 0; }

/* An indexed launch's shape: *lg lanes a row set (32 / lg row sets a warp), *ks warps a row set; its blocks
 * (of one pair). A function of the expert's shape alone, so that a row's sums do not depend on the batch.
 * Measured on an H100 (cu_gemv_bench :ixP, session 57: Qwen3-30B-A3B's, OLMoE's, Qwen1.5-MoE's and gpt-oss-20b's
 * expert shapes, every pair of 8 / 16 / 32 lanes and 1 / 2 / 4 warps): 8 lanes a row set everywhere (4 row sets a
 * warp), and K split over as many warps (up to 4) as leave each lane 2 chunks a row: the gate|up products 1.10-1.34x
 * over one matrix's shape (32 lanes, gemv_ks's split), the down products 1.14-1.31x (int8 1.17x) */
static int gemv_ix_shape(int nrs, int nc, int *ks, int *lg)
{
    static int legacy = -1; /* TANDEM_CUDA_IX_SHAPE=0 (a measurement switch): one matrix's shape, as before */
    if (legacy < 0) legacy = getenv("TANDEM_CUDA_IX_SHAPE") && !strcmp(getenv("TANDEM_CUDA_IX_SHAPE"), "0");
    if (legacy && !lg_forced) {
        *lg = 32;
        return gemv_blocks(nrs, nc, ks);
    }
    int k = 1;
    while (k < 4 && nc >= 2 * 8 * 2 * k) k *= 2;
    *lg = lg_forced ? lg_forced : 8;
    *ks = ks_forced ? ks_forced : k;
    const int per = GEMV_WARPS / *ks * (32 / *lg);
    return (nrs + per - 1) / per;
}

template <int ENC, int EPI>
static void launch_ix_enc(cudaStream_t s, const cu_qmat &w, const cu_gemv_ix &ix, const uint16_t *x, int ldx, int P,
                          float *y, int ldy, const cu_gemv_epi &ep)
{
    int ks, lg;
    const int blocks = gemv_ix_shape(EPI == 1 ? ep.F : (w.N + GEMV_R - 1) / GEMV_R, w.K / unit<ENC>::E, &ks, &lg);
    const dim3 grid((unsigned)blocks, (unsigned)P);
    switch (lg) {
    case 8: cu_go(k_gemv<ENC, 1, EPI, true, 8>, grid, GEMV_WARPS * 32, 0, s, w, x, ldx, y, ldy, ep, ks, ix); break;
    case 16: cu_go(k_gemv<ENC, 1, EPI, true, 16>, grid, GEMV_WARPS * 32, 0, s, w, x, ldx, y, ldy, ep, ks, ix); break;
    default: cu_go(k_gemv<ENC, 1, EPI, true, 32>, grid, GEMV_WARPS * 32, 0, s, w, x, ldx, y, ldy, ep, ks, ix);
    }
}

/* the indexed products (cu_gemv_ix): one x row a pair, P pairs on the grid's y */
template <int EPI>
static void launch_ix(cudaStream_t s, const cu_qmat *w, const cu_gemv_ix *ix, const uint16_t *x, int ldx, int P,
                      float *y, int ldy, const cu_gemv_epi &ep)
{
    if (w->enc == 4) launch_ix_enc<4, EPI>(s, *w, *ix, x, ldx, P, y, ldy, ep);
    else launch_ix_enc<8, EPI>(s, *w, *ix, x, ldx, P, y, ldy, ep);
}

void cu_gemv_ix_q(cu_stream s, const cu_qmat *w, const cu_gemv_ix *ix, const uint16_t *x, int ldx, int P, float *y, int ldy)
{
    launch_ix<0>(s, w, ix, x, ldx, P, y, ldy, cu_gemv_epi{});
}

void cu_gemv_ix_act(cu_stream s, const cu_qmat *w, const cu_gemv_ix *ix, const uint16_t *x, int ldx, int P,
                    const cu_gemv_epi *ep)
{
    if (ep->gated) launch_ix<1>(s, w, ix, x, ldx, P, NULL, 0, *ep);
    else launch_ix<2>(s, w, ix, x, ldx, P, NULL, 0, *ep);
}

int cu_gemv_blocks(const cu_qmat *w, int *ks)
{
    return gemv_blocks((w->N + GEMV_R - 1) / GEMV_R, w->K / (w->enc == 8 ? 16 : 32), ks);
}

/* out[N][K] bf16 = the weights, a thread per 16-byte unit */
template <int ENC> __global__ void k_dequant(cu_qmat w, uint16_t *__restrict__ out)
{
    pdl_enter();
    constexpr int E = unit<ENC>::E;
    const int nc = w.K / E;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)w.N * nc) return;
    int n = (int)(i / nc), c = (int)(i % nc);
    const uint4 q = unit_load<ENC>(w.q + (size_t)n * w.K * ENC / 8, c);
    const float d = unit_scale<ENC>(w, n, c);
    uint16_t v[E];
    unit_bf16<ENC>(q, d, v);
    uint4 *o = (uint4 *)(out + (size_t)n * w.K + (size_t)c * E);
#pragma unroll
    for (int p = 0; p < E / 8; p++)
        o[p] = make_uint4(v[8 * p] | (uint32_t)v[8 * p + 1] << 16, v[8 * p + 2] | (uint32_t)v[8 * p + 3] << 16,
                          v[8 * p + 4] | (uint32_t)v[8 * p + 5] << 16, v[8 * p + 6] | (uint32_t)v[8 * p + 7] << 16);
}

void cu_dequant_q(cu_stream s, const cu_qmat *w, uint16_t *out)
{
    size_t n = (size_t)w->N * (w->K / (w->enc == 8 ? 16 : 32));
    unsigned blocks = (unsigned)((n + 255) / 256);
    switch (w->enc) {
    case 4: cu_go(k_dequant<4>, blocks, 256, 0, s, *w, out); break;
    default: cu_go(k_dequant<8>, blocks, 256, 0, s, *w, out);
    }
}
