/* engine/cuda/cu_moe_mm.cu: a mixture-of-experts layer's expert products over many rows (a prefill chunk, a
 * large decode batch) in one launch a product, on tensor cores, with nothing brought to the host.
 *
 * Before it (cu_route.cu): cu_moe_sort puts the T K (row, choice) pairs in slots grouped by expert and lists
 * each expert's row tiles (up to CU_MOE_TM = 64 slots each); cu_moe_gather copies each slot's row of the
 * input into x [slots][K]. A block here takes one (row tile, column tile): blockIdx.y the row tile (blocks
 * past the list's count return at once: the grid is sized for the most tiles P / 64 + E that P pairs make),
 * blockIdx.x the column tile, so the blocks of one row tile run together and share its x rows in L2 while
 * each reads its own columns of the expert's weight once.
 *
 * Tiles (bf16 in shared memory, rows padded by 16 bytes so that ldmatrix's 8 row addresses fall in 8
 * different bank groups):
 *   x   [64 slots][64 of K]      2 units of 16 bytes a thread; slots past the tile's rows are zero
 *   W   [128 rows][64 of K]      the expert's rows: gated, 64 gate rows f0..f0+63 then the 64 up rows F + f0..,
 *                                so a thread's accumulators hold gate and up of the same f and the SwiGLU is its
 *                                epilogue (the product writes the down product's bf16 input, not [rows][2F] f32);
 *                                else 128 output columns. Packed weights (int4 g32 / g64 / per channel, int8) are
 *                                unpacked to bf16 as they go to shared memory (cu_unpack.cuh: the same values as
 *                                cu_dequant_q), so each weight byte comes from memory once a row tile.
 * 8 warps, 2 x 4: warp (wm, wn) owns slots 32 wm.. x 32 of the 128 W rows, as 2 x 4 mma.m16n8k16 tiles (bf16 in,
 * f32 accumulate); a K step of 64 is 4 x 8 mma a warp, fed by ldmatrix.x4.
 * Pipeline: one buffer, register-staged: the next K step's units are loaded into registers before the tensor
 * cores run this one, and go to shared memory (unpacked) after it. (Two buffers, CU_MOE_MM_STAGES=2, measured
 * the same on an H100, docs/benchmarks.md "Session 55"; a K step of 128 needs ~165 registers.)
 * Out of range: W rows past N (or F) repeat the last row and are not stored; K must be a multiple of the K step
 * (cu_moe_mm_ok; the engine keeps the host-grouped path otherwise). The shapes above are the default build's. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "engine/cuda/cu_act.cuh"
#include "engine/cuda/cu_launch.cuh"
#include "engine/cuda/cu_mma.cuh"
#include "engine/cuda/cu_unpack.cuh"
#include "engine/cuda/cuda-impl.h"

#ifndef CU_MOE_MM_TK
#define CU_MOE_MM_TK 64 /* K a step (a measurement build may set 128) */
#endif
#ifndef CU_MOE_MM_STAGES
#define CU_MOE_MM_STAGES 1 /* shared-memory buffers (2: the next step's units stored while this one's run) */
#endif
#define MM_TM CU_MOE_TM /* slots a tile */
#define MM_TN 128       /* W rows a tile */
#define MM_TK CU_MOE_MM_TK
#define MM_LD (MM_TK + 8)
#define MM_NT 256
#define MM_XU (MM_TM * MM_TK / 8 / MM_NT)                       /* x units a thread loads a K step */
#define MM_STAGE ((MM_TN + MM_TM) * MM_LD)                      /* bf16 elements of a buffer: W, then x */
#define MM_SMEM (CU_MOE_MM_STAGES * MM_STAGE * 2)               /* bytes of shared memory a block */

/* elements a 16-byte unit holds: ENC 4 (int4), 8 (int8), 16 (bf16) */
template <int ENC> struct mm_unit {
    static constexpr int E = ENC == 16 ? 8 : unit<ENC>::E;
    static constexpr int PER_ROW = MM_TK / E;               /* units of a W row in a K step */
    static constexpr int U = MM_TN * PER_ROW / MM_NT;       /* units a thread loads a K step: 1, 2, 4 */
};

typedef struct mm_args {
    cu_qmat q;                        /* packed (q.q), or bf16 from bf */
    const uint16_t *bf;
    int Ne, K;
    const int *tiles;
    const uint16_t *x;
    float *y;
    int ldy;
    cu_gemv_epi ep;
} mm_args;

template <int ENC, bool GATED> __global__ void __launch_bounds__(MM_NT) k_moe_mm(mm_args a)
{
    using U_ = mm_unit<ENC>;
    constexpr int E = U_::E, PER_ROW = U_::PER_ROW, U = U_::U;
    extern __shared__ __align__(16) uint16_t mm_smem[];
    typedef uint16_t row_t[MM_LD];
    pdl_enter();
    const int ti = blockIdx.y;
    if (ti >= a.tiles[0]) return; /* the whole block */
    const int e = a.tiles[1 + 3 * ti], j0 = a.tiles[2 + 3 * ti], rows = a.tiles[3 + 3 * ti];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp >> 2, wn = warp & 3, K = a.K;
    const int F = a.ep.F, n0 = blockIdx.x * (GATED ? MM_TN / 2 : MM_TN);
    const size_t rowb = ENC == 16 ? (size_t)K * 2 : (size_t)K * ENC / 8;

    /* this thread's W units (row r, unit c of the step) and x units */
    const uint8_t *wp[U];
    int wr[U], wc[U];
    size_t grow[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int i = tid + u * MM_NT, r = i / PER_ROW;
        int n;
        if (GATED) n = r < MM_TN / 2 ? min(n0 + r, F - 1) : F + min(n0 + r - MM_TN / 2, F - 1);
        else n = min(n0 + r, a.Ne - 1);
        wr[u] = r, wc[u] = i % PER_ROW, grow[u] = (size_t)e * a.Ne + n;
        wp[u] = (ENC == 16 ? (const uint8_t *)a.bf : a.q.q) + grow[u] * rowb;
    }
    const uint16_t *xp[MM_XU];
    int xr[MM_XU], xc[MM_XU];
#pragma unroll
    for (int i = 0; i < MM_XU; i++) {
        const int v = tid + i * MM_NT;
        xr[i] = v / (MM_TK / 8), xc[i] = v % (MM_TK / 8);
        xp[i] = xr[i] < rows ? a.x + (size_t)(j0 + xr[i]) * K + xc[i] * 8 : NULL;
    }

    uint4 wq[U], xq[MM_XU];
    float wd[U];
    auto load = [&](int k0) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int c = k0 / E + wc[u];
            wq[u] = __ldg((const uint4 *)wp[u] + c);
            if (ENC != 16) wd[u] = unit_scale<ENC == 16 ? 4 : ENC>(a.q, (int)grow[u], c);
        }
#pragma unroll
        for (int i = 0; i < MM_XU; i++) xq[i] = xp[i] ? *(const uint4 *)(xp[i] + k0) : make_uint4(0, 0, 0, 0);
    };
    auto store = [&](int s) { /* into buffer s */
        row_t *sw = (row_t *)(mm_smem + s * MM_STAGE), *sx = sw + MM_TN;
#pragma unroll
        for (int u = 0; u < U; u++) {
            uint4 *d = (uint4 *)&sw[wr[u]][wc[u] * E];
            if constexpr (ENC == 16) d[0] = wq[u];
            else {
                uint16_t v[E];
                unit_bf16<ENC>(wq[u], wd[u], v);
#pragma unroll
                for (int p = 0; p < E / 8; p++)
                    d[p] = make_uint4(v[8 * p] | (uint32_t)v[8 * p + 1] << 16, v[8 * p + 2] | (uint32_t)v[8 * p + 3] << 16,
                                      v[8 * p + 4] | (uint32_t)v[8 * p + 5] << 16, v[8 * p + 6] | (uint32_t)v[8 * p + 7] << 16);
            }
        }
#pragma unroll
        for (int i = 0; i < MM_XU; i++) *(uint4 *)&sx[xr[i]][xc[i] * 8] = xq[i];
    };

    float acc[2][4][4];
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
#pragma unroll
            for (int c = 0; c < 4; c++) acc[mi][ni][c] = 0.f;
    /* the warp's two 16-row W blocks: gated, its 16 gate rows and the same 16 up rows; else 32 rows */
    const int b0 = GATED ? 16 * wn : 32 * wn, b1 = GATED ? MM_TN / 2 + 16 * wn : 32 * wn + 16;

    load(0);
    store(0);
    __syncthreads();
    for (int k0 = 0, s = 0; k0 < K; k0 += MM_TK) {
        const bool more = k0 + MM_TK < K;
        if (more) load(k0 + MM_TK);
        const row_t *sw = (const row_t *)(mm_smem + s * MM_STAGE), *sx = sw + MM_TN;
#pragma unroll
        for (int kk = 0; kk < MM_TK; kk += 16) {
            uint32_t af[2][4], bq[2][4];
#pragma unroll
            for (int mi = 0; mi < 2; mi++) ldm4(af[mi], &sx[32 * wm + 16 * mi + (lane & 15)][kk + (lane >> 4) * 8]);
            /* matrices: rows b..b+7 k lo, k hi; rows b+8..b+15 k lo, k hi */
            const int br = (lane & 7) + ((lane >> 4) << 3), bk = kk + ((lane >> 3) & 1) * 8;
            ldm4(bq[0], &sw[b0 + br][bk]);
            ldm4(bq[1], &sw[b1 + br][bk]);
#pragma unroll
            for (int mi = 0; mi < 2; mi++)
#pragma unroll
                for (int ni = 0; ni < 4; ni++) mma_bf16(acc[mi][ni], af[mi], bq[ni >> 1][2 * (ni & 1)], bq[ni >> 1][2 * (ni & 1) + 1]);
        }
        if (CU_MOE_MM_STAGES == 1) { /* all done reading before the buffer is overwritten */
            __syncthreads();
            if (more) store(0);
        } else if (more) {
            store(s ^ 1); /* the other buffer: its last readers passed the barrier that ended the step before */
            s ^= 1;
        }
        __syncthreads();
    }

    /* accumulator c of (mi, ni): slot 32 wm + 16 mi + g (+ 8 for c >= 2), column 2 t + (c & 1) of n-tile ni */
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = 32 * wm + 16 * mi + g + 8 * h;
            if (r >= rows) continue;
            const size_t j = (size_t)(j0 + r);
            if constexpr (GATED) {
                const float *b = a.ep.b ? a.ep.b + (size_t)e * 2 * F : NULL;
#pragma unroll
                for (int ni = 0; ni < 2; ni++)
#pragma unroll
                    for (int c = 0; c < 2; c++) {
                        const int f = n0 + 16 * wn + 8 * ni + 2 * t + c;
                        if (f >= F) continue;
                        const float gv = acc[mi][ni][2 * h + c] + (b ? b[f] : 0.f);
                        const float uv = acc[mi][ni + 2][2 * h + c] + (b ? b[F + f] : 0.f);
                        a.ep.g[j * a.ep.ldg + f] = __bfloat16_as_ushort(__float2bfloat16_rn(glu_f(a.ep.act, gv, uv)));
                    }
            } else {
#pragma unroll
                for (int ni = 0; ni < 4; ni++)
#pragma unroll
                    for (int c = 0; c < 2; c++) {
                        const int n = n0 + 32 * wn + 8 * ni + 2 * t + c;
                        if (n < a.Ne) a.y[j * a.ldy + n] = acc[mi][ni][2 * h + c];
                    }
            }
        }
}

int cu_moe_mm_ok(const cu_stack *w)
{
    if (w->K < MM_TK || w->K % MM_TK || w->Ne < 1) return 0;
    if (w->q && w->q->q) { /* a unit (32 int4 / 16 int8 elements) within one scale group */
        const cu_qmat *q = w->q;
        return (q->enc == 4 || q->enc == 8) && q->G > 0 && q->G % (q->enc == 4 ? 32 : 16) == 0 && q->K == w->K;
    }
    return w->bf != NULL;
}

template <bool GATED>
static void launch(cudaStream_t s, const mm_args &a, int enc, int max_tiles)
{
    const int cols = GATED ? a.ep.F : a.Ne, tn = GATED ? MM_TN / 2 : MM_TN;
    const dim3 grid((unsigned)((cols + tn - 1) / tn), (unsigned)max_tiles);
    void (*k)(mm_args) = enc == 4 ? k_moe_mm<4, GATED> : enc == 8 ? k_moe_mm<8, GATED> : k_moe_mm<16, GATED>;
    if (MM_SMEM > 48 * 1024) { /* past the default: once a kernel (a process-wide attribute, set again harmlessly) */
        static int set[3];
        int i = enc == 4 ? 0 : enc == 8 ? 1 : 2;
        if (!set[i]) cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, MM_SMEM), set[i] = 1;
    }
    cu_go(k, grid, MM_NT, MM_SMEM, s, a);
}

void cu_moe_mm(cu_stream s, const cu_stack *w, const int *tiles, int max_tiles, const uint16_t *x, float *y, int ldy,
               const cu_gemv_epi *ep)
{
    mm_args a = {};
    const int packed = w->q && w->q->q;
    if (packed) a.q = *w->q;
    a.bf = packed ? NULL : w->bf;
    a.Ne = w->Ne, a.K = w->K, a.tiles = tiles, a.x = x, a.y = y, a.ldy = ldy;
    if (ep) a.ep = *ep;
    const int enc = packed ? w->q->enc : 16;
    if (max_tiles < 1) return;
    if (ep && ep->gated) launch<true>(s, a, enc, max_tiles);
    else launch<false>(s, a, enc, max_tiles);
}
