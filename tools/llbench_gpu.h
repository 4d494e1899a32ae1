/* tools/llbench_gpu.h: the peer harness (../shared/peers/llbench.c) with every layer on the GPU.
 * llbench loads its model with n_gpu_layers = 0 (the CPU peer); built with this header forced in
 * front (gcc -include tools/llbench_gpu.h), its load goes through tm_llb_gpu_load, which offloads
 * all layers to llama.cpp's CUDA backend. Nothing else of the harness changes: the same tests
 * (ppN, tgN, e2eP+G), contexts and RESULT lines as the CPU peer. tools/device-peer-cuda.sh builds it. */
#ifndef TM_TOOLS_LLBENCH_GPU_H
#define TM_TOOLS_LLBENCH_GPU_H

#include "llama.h"

static inline struct llama_model *tm_llb_gpu_load(const char *path, struct llama_model_params p)
{
    p.n_gpu_layers = 999;
    return llama_model_load_from_file(path, p);
}
#define llama_model_load_from_file tm_llb_gpu_load

#endif
