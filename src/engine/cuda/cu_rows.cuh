/* engine/cuda/cu_rows.cuh: a row's reductions by one block of CU_ROW_NT threads, shared by cu_ops.cu's
 * row passes (norms, the residual add) and cu_gemv.cu's residual epilogue, whose last block runs the next
 * norm with the same arithmetic as cu_residual, so that the fused step is bit-identical to the two passes.
 * Sums in f32 over a block-wide tree (the reference sums in double; over D <= 16K elements of O(1) the
 * difference is far below the bf16 rounding of the GEMMs' inputs). */
#ifndef TM_ENGINE_CUDA_CU_ROWS_CUH
#define TM_ENGINE_CUDA_CU_ROWS_CUH

#include <cuda_bf16.h>
#include <math.h>

#define CU_ROW_NT 256 /* threads of a block that reduces a row */

static __device__ __forceinline__ uint16_t cu_tobf(float v) { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); }

/* the sum (the max) of v over the warp; every lane gets it */
static __device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* the sum of v over the block (CU_ROW_NT threads); every thread gets it */
static __device__ float block_sum(float v)
{
    __shared__ float part[CU_ROW_NT / 32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads(); /* part[] may still be read by a previous call */
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    float s = 0;
    for (int i = 0; i < CU_ROW_NT / 32; i++) s += part[i];
    return s;
}

/* xr[i]: a plain load, or (CG) one from L2, for rows other blocks of the grid wrote */
template <bool CG> static __device__ __forceinline__ float row_ld(const float *p) { return CG ? __ldcg(p) : *p; }

/* one row's norm (kind 1: LayerNorm, else RMSNorm) by the block: y32 (f32) and y16 (bf16) = norm(xr [n])
 * by w, b (either may be NULL; either output may be NULL) */
template <bool CG = false>
static __device__ void row_norm(int kind, int n, const float *xr, const float *w, const float *b, float eps, float *y32,
                                uint16_t *y16)
{
    float mean = 0;
    if (kind == 1) {
        float s = 0;
        for (int i = threadIdx.x; i < n; i += CU_ROW_NT) s += row_ld<CG>(xr + i);
        mean = block_sum(s) / n;
    }
    float ss = 0;
    for (int i = threadIdx.x; i < n; i += CU_ROW_NT) {
        float d = row_ld<CG>(xr + i) - mean;
        ss += d * d;
    }
    float r = (float)(1.0 / sqrt((double)(block_sum(ss) / n + eps)));
    for (int i = threadIdx.x; i < n; i += CU_ROW_NT) {
        float v = ((row_ld<CG>(xr + i) - mean) * r) * (w ? w[i] : 1.f) + (b ? b[i] : 0.f);
        if (y32) y32[i] = v;
        if (y16) y16[i] = cu_tobf(v);
    }
}

#endif
