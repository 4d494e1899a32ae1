/* tools/llbench_noxb.h: the CPU peer harness (../shared/peers/llbench.c) without llama.cpp's extra weight buffer
 * types (llama_model_params.use_extra_bufts = false: no AMX / repacked copies of the weights). Built with this header
 * forced in front (gcc -include tools/llbench_noxb.h), as tools/llbench_gpu.h is for the GPU. For models whose
 * graph the AMX buffer cannot take: on DeepSeek-V2's MLA form (tools/make_moe_gguf.py deepseek-v2-lite, Q4_0) the
 * prebuilt node-llama-cpp@3.21.1 CPU library aborts building its context with the AMX buffer
 * (ggml-backend.cpp: GGML_ASSERT(*cur_backend_id != -1)), session 58. */
#ifndef TM_TOOLS_LLBENCH_NOXB_H
#define TM_TOOLS_LLBENCH_NOXB_H

#include "llama.h"

static inline struct llama_model *tm_llb_noxb_load(const char *path, struct llama_model_params p)
{
    p.use_extra_bufts = false;
    return llama_model_load_from_file(path, p);
}
#define llama_model_load_from_file tm_llb_noxb_load

#endif
