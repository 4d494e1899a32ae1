/* engine/cuda/cu_unpack.cuh: the packed weights' 16-byte units unpacked (cuda-impl.h's cu_qmat; the layouts
 * in cu_gemv.cu's head), shared by the GEMV (cu_gemv.cu), the dequantization to bf16 (cu_gemv.cu) and the
 * experts' grouped product (cu_moe_mm.cu). Every path gives a weight the same value: q (exact, by the
 * conversion-free tricks below) times its group's scale. */
#ifndef TM_ENGINE_CUDA_CU_UNPACK_CUH
#define TM_ENGINE_CUDA_CU_UNPACK_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <string.h>

#include "engine/cuda/cuda-impl.h"

static __device__ __forceinline__ float bf_lo(uint32_t u) { return __uint_as_float(u << 16); }
static __device__ __forceinline__ float bf_hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }

static __device__ __forceinline__ uint32_t word(const uint4 &v, int k)
{
    return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

/* elements a 16-byte unit of encoding ENC holds */
template <int ENC> struct unit {
    static constexpr int E = ENC == 8 ? 16 : 32;
};

/* the 16-byte unit c of the row that starts at row */
template <int ENC> __device__ __forceinline__ uint4 unit_load(const uint8_t *row, int c)
{
    return __ldg((const uint4 *)row + c);
}

/* two nibbles of u (bits 0..3 and 16..19 of u >> sh) as a bf16 pair, q - 8 each: exact */
static __device__ __forceinline__ uint32_t nib2(uint32_t u, int sh)
{
    uint32_t m = ((u >> sh) & 0x000f000fu) | 0x43004300u; /* 128 + q */
    __nv_bfloat162 v;
    memcpy(&v, &m, 4);
    v = __hsub2(v, __floats2bfloat162_rn(136.f, 136.f));
    memcpy(&m, &v, 4);
    return m;
}

/* byte i of u (u's bytes with their sign bits flipped) as the int8 value, exact */
static __device__ __forceinline__ float byte_s8(uint32_t u, int i)
{
    return __uint_as_float(__byte_perm(u, 0x4b000000u, 0x7440u + (uint32_t)i)) - 8388736.f; /* 2^23 + 128 */
}

/* word k of unit q as weights: int4, lo[i] = element 4k + i and hi[i] = element 16 + 4k + i; int8,
 * lo[i] = element 4k + i */
template <int ENC> __device__ __forceinline__ void word_vals(const uint4 &q, int k, float (&lo)[4], float (&hi)[4])
{
    const uint32_t u = word(q, k);
    if (ENC == 8) {
        const uint32_t t = u ^ 0x80808080u;
#pragma unroll
        for (int i = 0; i < 4; i++) lo[i] = byte_s8(t, i);
        return;
    }
    /* bytes 0, 2 then 1, 3: low nibbles (elements 4k + i), high (16 + 4k + i) */
    const uint32_t l02 = nib2(u, 0), h02 = nib2(u, 4), l13 = nib2(u, 8), h13 = nib2(u, 12);
    lo[0] = bf_lo(l02), lo[1] = bf_lo(l13), lo[2] = bf_hi(l02), lo[3] = bf_hi(l13);
    hi[0] = bf_lo(h02), hi[1] = bf_lo(h13), hi[2] = bf_hi(h02), hi[3] = bf_hi(h13);
}

/* group scale of unit c of row n: f16 (int4) or f32 (int8) */
template <int ENC> __device__ __forceinline__ float unit_scale(const cu_qmat &w, int n, int c)
{
    size_t i = (size_t)n * (w.K / w.G) + (size_t)c / (w.G / unit<ENC>::E);
    return ENC == 8 ? ((const float *)w.s)[i] : __half2float(((const __half *)w.s)[i]);
}

/* unit q of encoding ENC (scale d) as its E bf16 weights, in order: v[i] = bf16(q_i d) (nearest even) */
template <int ENC> __device__ __forceinline__ void unit_bf16(const uint4 &q, float d, uint16_t (&v)[unit<ENC>::E])
{
#pragma unroll
    for (int k = 0; k < 4; k++) {
        float lo[4], hi[4];
        word_vals<ENC>(q, k, lo, hi);
#pragma unroll
        for (int b = 0; b < 4; b++) {
            v[4 * k + b] = __bfloat16_as_ushort(__float2bfloat16_rn(lo[b] * d));
            if (ENC != 8) v[16 + 4 * k + b] = __bfloat16_as_ushort(__float2bfloat16_rn(hi[b] * d));
        }
    }
}

#endif
