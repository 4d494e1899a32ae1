/* engine/cuda/cu_launch.cuh: how the engine's kernels are launched, with programmatic dependent
 * launch (PDL, sm_90 and later) where it is on.
 *
 * A decode step is a chain of ~8 small kernels a layer, each reading what the one before wrote,
 * captured in a CUDA graph. Without PDL a kernel's blocks start only once the whole previous grid
 * has finished and its writes are flushed: every boundary costs the launch's latency with the GPU
 * idle. With PDL (cu_go launches with cudaLaunchAttributeProgrammaticStreamSerialization) a kernel
 * may be scheduled while the previous one still runs, once every block of that one has called
 * pdl_trigger(); it then waits in pdl_wait() (griddepcontrol.wait: the previous grid complete and
 * its memory visible) before it reads anything that grid wrote, or writes anything it may read.
 * Work that reads only constant data (the GEMV's first weight loads, cu_gemv.cu) goes before the
 * wait and overlaps the previous kernel's tail.
 *
 * The rules every kernel here keeps: pdl_wait() in every thread before its first read of a buffer
 * another kernel writes and before its first write (so a grid never completes before its own
 * predecessor: the wait chain is transitive), and pdl_trigger() once it has started. Launched
 * without the attribute (PDL off, an older GPU, or the first kernel after a copy or a cuBLAS call)
 * both are no-ops. */
#ifndef TM_ENGINE_CUDA_CU_LAUNCH_CUH
#define TM_ENGINE_CUDA_CU_LAUNCH_CUH

#include <cuda_runtime.h>

#include "engine/cuda/cuda-impl.h"

extern int cu_pdl; /* cu_set_pdl (cu_ops.cu): launches carry the PDL attribute */

/* the previous grid complete and its writes visible (a no-op without PDL) */
static __device__ __forceinline__ void pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* this block lets the next kernel in the stream be scheduled (a no-op without PDL) */
static __device__ __forceinline__ void pdl_trigger(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

/* the prologue of a kernel with nothing to do before its inputs are ready */
static __device__ __forceinline__ void pdl_enter(void)
{
    pdl_wait();
    pdl_trigger();
}

/* kernel<<<grid, block, smem, s>>>(args...), with the PDL attribute where cu_pdl is set; a launch
 * error surfaces as <<<>>>'s does (cudaGetLastError) */
template <typename... P, typename... A>
static inline void cu_go(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, A... args)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = s;
    if (cu_pdl) {
        at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = at, cfg.numAttrs = 1;
    }
    (void)cudaLaunchKernelEx(&cfg, kernel, ((P)args)...);
}

#endif
