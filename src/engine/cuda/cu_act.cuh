/* engine/cuda/cu_act.cuh: the activations of the FFN on the device (model.h's formulas, in double as
 * the reference computes them), shared by cu_ops.cu's pass and cu_gemv.cu's fused epilogue. */
#ifndef TM_ENGINE_CUDA_CU_ACT_CUH
#define TM_ENGINE_CUDA_CU_ACT_CUH

#include <math.h>

#include "model/model.h"

static __device__ __forceinline__ float act_f(int a, float x)
{
    double v = x;
    switch (a) {
    case TM_ACT_SILU: return (float)(v / (1.0 + exp(-v)));
    case TM_ACT_GELU: return (float)(0.5 * v * erfc(-v * 0.70710678118654752));
    case TM_ACT_RELU: return x > 0 ? x : 0.f;
    case TM_ACT_RELU2: return x > 0 ? x * x : 0.f;
    default: return (float)(0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))); /* GELU-tanh */
    }
}

static __device__ __forceinline__ float glu_f(int a, float g, float u)
{
    if (a != TM_ACT_SWIGLU_OAI) return act_f(a, g) * u;
    double gc = g < TM_SWIGLU_OAI_LIMIT ? g : TM_SWIGLU_OAI_LIMIT;
    double uc = u < -TM_SWIGLU_OAI_LIMIT ? -TM_SWIGLU_OAI_LIMIT : u > TM_SWIGLU_OAI_LIMIT ? TM_SWIGLU_OAI_LIMIT : u;
    return (float)(gc / (1.0 + exp(-(double)TM_SWIGLU_OAI_ALPHA * gc)) * (uc + 1.0));
}

#endif
