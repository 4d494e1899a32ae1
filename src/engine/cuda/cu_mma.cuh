/* engine/cuda/cu_mma.cuh: the tensor-core pieces the attention and MoE kernels share: mma.sync m16n8k16 (bf16 in,
 * f32 accumulate), ldmatrix from shared memory, and bf16 pair packing.
 *
 * Fragment layouts (PTX ISA, mma.m16n8k16 .bf16; g = lane / 4, c = lane % 4): A regs {a0..a3} = rows (g, g + 8) x
 * cols (2c, 2c + 1) for k 0-7 then k 8-15; B regs {b0, b1} = k (2c, 2c + 1) then + 8, col g; C regs {c0..c3} =
 * row g cols (2c, 2c + 1), row g + 8 the same. The C fragment of two neighbouring 16 x 8 tiles is the A fragment of
 * one 16 x 16. */
#ifndef TM_ENGINE_CUDA_CU_MMA_CUH
#define TM_ENGINE_CUDA_CU_MMA_CUH

#include <cuda_bf16.h>
#include <stdint.h>

static __device__ __forceinline__ unsigned smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

/* four 8 x 8 b16 matrices from shared memory; lane i gives the address of row i % 8 of matrix i / 8 */
static __device__ __forceinline__ void ldm4(unsigned r[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

/* the same, each 8 x 8 matrix transposed */
static __device__ __forceinline__ void ldm4t(unsigned r[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

/* d[16][8] += a[16][16] · b[16][8] (sm_80 and later; the engine builds for sm_90) */
static __device__ __forceinline__ void mma_bf16(float d[4], const unsigned a[4], unsigned b0, unsigned b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();
#endif
}

/* two floats as a bf16 pair (lo in the low half) */
static __device__ __forceinline__ unsigned pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(unsigned *)&v;
}

#endif
