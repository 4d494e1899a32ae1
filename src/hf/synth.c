/* hf/synth.c: synthetic HF model directories (see synth.h). The tensor list
 * comes from the architecture table (model/arch.c), so a preset is only a
 * config.json. */
#include "hf/synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "core/fileio.h"
#include "hf/config.h"
#include "model/model.h"
#include "text/sampler.h"

typedef struct synth_preset {
    const char *name;
    const char *desc;
    const char *config; /* config.json, Hub style */
} synth_preset;

static const synth_preset presets[] = {
    {"llama-tiny", "a 2-layer Llama for tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"vocab_size\":1024,\"hidden_size\":128,"
     "\"intermediate_size\":256,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
     "\"max_position_embeddings\":2048,\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0,\"tie_word_embeddings\":false,"
     "\"hidden_act\":\"silu\",\"bos_token_id\":1,\"eos_token_id\":2,\"torch_dtype\":\"bfloat16\"}"},
    {"qwen3-tiny-bias", "a 2-layer Qwen3 with q/k/v/o biases and q/k norms, for tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"Qwen3ForCausalLM\"],\"model_type\":\"qwen3\",\"vocab_size\":1024,\"hidden_size\":128,"
     "\"intermediate_size\":256,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
     "\"head_dim\":32,\"max_position_embeddings\":2048,\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,"
     "\"tie_word_embeddings\":false,\"hidden_act\":\"silu\",\"attention_bias\":true,\"bos_token_id\":1,"
     "\"eos_token_id\":2,\"torch_dtype\":\"bfloat16\"}"},
    {"olmo2-tiny", "a 2-layer OLMo 2 (norms after attention and MLP only, q/k norms over the whole projections), "
     "for tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"Olmo2ForCausalLM\"],\"model_type\":\"olmo2\",\"vocab_size\":1024,\"hidden_size\":128,"
     "\"intermediate_size\":256,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
     "\"max_position_embeddings\":2048,\"rms_norm_eps\":1e-6,\"rope_theta\":500000.0,\"tie_word_embeddings\":false,"
     "\"hidden_act\":\"silu\",\"bos_token_id\":1,\"eos_token_id\":2,\"torch_dtype\":\"bfloat16\"}"},
    {"qwen2-moe-tiny", "a 2-layer Qwen2-MoE (8 experts top-2, a shared expert behind its sigmoid gate), "
     "for tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"Qwen2MoeForCausalLM\"],\"model_type\":\"qwen2_moe\",\"vocab_size\":1024,\"hidden_size\":128,"
     "\"intermediate_size\":256,\"moe_intermediate_size\":64,\"shared_expert_intermediate_size\":192,"
     "\"num_experts\":8,\"num_experts_per_tok\":2,\"norm_topk_prob\":false,\"num_hidden_layers\":2,"
     "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"max_position_embeddings\":2048,\"rms_norm_eps\":1e-6,"
     "\"rope_theta\":1000000.0,\"tie_word_embeddings\":false,\"hidden_act\":\"silu\",\"bos_token_id\":1,"
     "\"eos_token_id\":2,\"torch_dtype\":\"bfloat16\"}"},
    {"gpt-oss-tiny", "a 2-layer GPT-OSS (attention sinks, q/k/v/o biases, a sliding window of 16 on layer 0, YaRN, "
     "8 experts top-2 with biases and the clamped SwiGLU), for tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"GptOssForCausalLM\"],\"model_type\":\"gpt_oss\",\"vocab_size\":1024,\"hidden_size\":128,"
     "\"intermediate_size\":64,\"num_local_experts\":8,\"num_experts_per_tok\":2,\"num_hidden_layers\":2,"
     "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":32,\"max_position_embeddings\":131072,"
     "\"rms_norm_eps\":1e-5,\"rope_theta\":150000.0,\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":32.0,"
     "\"beta_fast\":32.0,\"beta_slow\":1.0,\"original_max_position_embeddings\":4096,\"truncate\":false},"
     "\"sliding_window\":16,\"attention_bias\":true,\"swiglu_limit\":7.0,\"tie_word_embeddings\":false,"
     "\"hidden_act\":\"silu\",\"bos_token_id\":1,\"eos_token_id\":2,\"torch_dtype\":\"bfloat16\"}"},
    {"deepseek-v3-tiny", "a 3-layer DeepSeek-V3 (MLA with q_lora 64, kv_lora 32, 32 + 32 q/k dims, values 48, YaRN "
     "x4 with mscale_all_dim; layer 0 dense, then 8 experts in 4 groups, top-3 of the best 2 groups by sigmoid "
     "scores and a correction bias, a shared expert, scaling 2.5), for tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"DeepseekV3ForCausalLM\"],\"model_type\":\"deepseek_v3\",\"vocab_size\":1024,"
     "\"hidden_size\":128,\"intermediate_size\":256,\"moe_intermediate_size\":64,\"num_hidden_layers\":3,"
     "\"first_k_dense_replace\":1,\"n_routed_experts\":8,\"n_group\":4,\"topk_group\":2,"
     "\"num_experts_per_tok\":3,\"n_shared_experts\":1,\"routed_scaling_factor\":2.5,\"norm_topk_prob\":true,"
     "\"q_lora_rank\":64,\"kv_lora_rank\":32,\"qk_nope_head_dim\":32,\"qk_rope_head_dim\":32,\"v_head_dim\":48,"
     "\"num_attention_heads\":4,\"num_key_value_heads\":4,\"max_position_embeddings\":16384,"
     "\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4.0,\"original_max_position_embeddings\":4096,"
     "\"beta_fast\":32,\"beta_slow\":1,\"mscale\":1.0,\"mscale_all_dim\":1.0},\"rope_theta\":10000.0,"
     "\"rms_norm_eps\":1e-6,\"tie_word_embeddings\":false,\"hidden_act\":\"silu\",\"bos_token_id\":1,"
     "\"eos_token_id\":2,\"torch_dtype\":\"bfloat16\"}"},
    {"deepseek-v2-tiny", "a 2-layer DeepSeek-V2 (MLA without q_lora, 8 experts, softmax top-2 greedy, two shared "
     "experts), for tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"DeepseekV2ForCausalLM\"],\"model_type\":\"deepseek_v2\",\"vocab_size\":1024,"
     "\"hidden_size\":128,\"intermediate_size\":256,\"moe_intermediate_size\":64,\"num_hidden_layers\":2,"
     "\"first_k_dense_replace\":0,\"n_routed_experts\":8,\"num_experts_per_tok\":2,\"n_shared_experts\":2,"
     "\"topk_method\":\"greedy\",\"q_lora_rank\":null,\"kv_lora_rank\":32,\"qk_nope_head_dim\":32,"
     "\"qk_rope_head_dim\":32,\"v_head_dim\":32,\"num_attention_heads\":4,\"num_key_value_heads\":4,"
     "\"max_position_embeddings\":4096,\"rope_theta\":10000.0,\"rms_norm_eps\":1e-6,\"tie_word_embeddings\":false,"
     "\"hidden_act\":\"silu\",\"bos_token_id\":1,\"eos_token_id\":2,\"torch_dtype\":\"bfloat16\"}"},
    {"granitemoe-shared-tiny", "a 2-layer GraniteMoE-shared (8 experts top-2 renormalised, a shared MLP without a "
     "gate, Granite's multipliers), for tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"GraniteMoeSharedForCausalLM\"],\"model_type\":\"granitemoeshared\",\"vocab_size\":1024,"
     "\"hidden_size\":128,\"intermediate_size\":64,\"shared_intermediate_size\":192,\"num_local_experts\":8,"
     "\"num_experts_per_tok\":2,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
     "\"max_position_embeddings\":2048,\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,\"embedding_multiplier\":4.0,"
     "\"logits_scaling\":2.0,\"residual_multiplier\":0.5,\"attention_multiplier\":0.125,\"tie_word_embeddings\":true,"
     "\"hidden_act\":\"silu\",\"bos_token_id\":1,\"eos_token_id\":2,\"torch_dtype\":\"bfloat16\"}"},
    {"phi-tiny", "a 2-layer Phi (LayerNorm with bias, attention and MLP in parallel on one norm, fc1 -> gelu_new "
     "-> fc2, partial rotary 0.5, lm_head bias), for tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"PhiForCausalLM\"],\"model_type\":\"phi\",\"vocab_size\":1024,\"hidden_size\":128,"
     "\"intermediate_size\":256,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
     "\"max_position_embeddings\":2048,\"layer_norm_eps\":1e-5,\"rope_theta\":10000.0,\"partial_rotary_factor\":0.5,"
     "\"tie_word_embeddings\":false,\"hidden_act\":\"gelu_new\",\"bos_token_id\":1,\"eos_token_id\":2,"
     "\"torch_dtype\":\"bfloat16\"}"},
    {"neox-tiny", "a 2-layer GPT-NeoX (fused query_key_value head by head, parallel residual on two LayerNorms, "
     "exact GELU MLP, rotary 0.25), for tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"GPTNeoXForCausalLM\"],\"model_type\":\"gpt_neox\",\"vocab_size\":1024,\"hidden_size\":128,"
     "\"intermediate_size\":256,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"max_position_embeddings\":2048,"
     "\"layer_norm_eps\":1e-5,\"rotary_emb_base\":10000,\"rotary_pct\":0.25,\"use_parallel_residual\":true,"
     "\"tie_word_embeddings\":false,\"hidden_act\":\"gelu\",\"bos_token_id\":1,\"eos_token_id\":2,"
     "\"torch_dtype\":\"bfloat16\"}"},
    {"gpt2-tiny", "a 2-layer GPT-2 (learned positions, Conv1D weights stored [in][out], fused c_attn with bias, "
     "LayerNorm with bias), for tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"GPT2LMHeadModel\"],\"model_type\":\"gpt2\",\"vocab_size\":1024,\"n_embd\":128,"
     "\"n_inner\":null,\"n_layer\":2,\"n_head\":4,\"n_positions\":256,\"layer_norm_epsilon\":1e-5,"
     "\"activation_function\":\"gelu_new\",\"bos_token_id\":1,\"eos_token_id\":2,\"torch_dtype\":\"bfloat16\"}"},
    {"cohere-tiny", "a 2-layer Cohere (LayerNorm without bias, parallel attention and MLP, RoPE on interleaved "
     "pairs, logit_scale), for tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"CohereForCausalLM\"],\"model_type\":\"cohere\",\"vocab_size\":1024,\"hidden_size\":128,"
     "\"intermediate_size\":256,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
     "\"max_position_embeddings\":2048,\"layer_norm_eps\":1e-5,\"rope_theta\":10000.0,\"logit_scale\":0.5,"
     "\"use_qk_norm\":false,\"hidden_act\":\"silu\",\"bos_token_id\":1,\"eos_token_id\":2,\"torch_dtype\":\"bfloat16\"}"},
    {"opt-tiny", "a 2-layer OPT (learned positions from row 2, ReLU MLP, LayerNorm with bias, model.decoder.* "
     "names), for tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"OPTForCausalLM\"],\"model_type\":\"opt\",\"vocab_size\":1024,\"hidden_size\":128,"
     "\"ffn_dim\":256,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"max_position_embeddings\":256,"
     "\"activation_function\":\"relu\",\"do_layer_norm_before\":true,\"word_embed_proj_dim\":128,"
     "\"bos_token_id\":1,\"eos_token_id\":2,\"torch_dtype\":\"bfloat16\"}"},
    {"bloom-tiny", "a 2-layer BLOOM (ALiBi, a LayerNorm on the embedding, query_key_value grouped by head, "
     "biases), for tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"BloomForCausalLM\"],\"model_type\":\"bloom\",\"vocab_size\":1024,\"hidden_size\":128,"
     "\"n_layer\":2,\"n_head\":4,\"layer_norm_epsilon\":1e-5,\"bos_token_id\":1,\"eos_token_id\":2,"
     "\"torch_dtype\":\"bfloat16\"}"},
    {"mpt-tiny", "a 2-layer MPT (ALiBi, Wqkv, LayerNorm without bias, clip_qkv 0.5, no biases), for tests "
     "(vocab 1024, hidden 128)",
     "{\"architectures\":[\"MptForCausalLM\"],\"model_type\":\"mpt\",\"vocab_size\":1024,\"d_model\":128,"
     "\"n_layers\":2,\"n_heads\":4,\"expansion_ratio\":2,\"max_seq_len\":2048,\"layer_norm_epsilon\":1e-5,"
     "\"no_bias\":true,\"attn_config\":{\"alibi\":true,\"clip_qkv\":0.5},\"bos_token_id\":1,\"eos_token_id\":2,"
     "\"torch_dtype\":\"bfloat16\"}"},
    {"bigcode-tiny", "a 2-layer GPTBigCode (StarCoder 1: multi-query, fused c_attn Q K V, learned positions), for "
     "tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"GPTBigCodeForCausalLM\"],\"model_type\":\"gpt_bigcode\",\"vocab_size\":1024,"
     "\"n_embd\":128,\"n_inner\":256,\"n_layer\":2,\"n_head\":4,\"n_positions\":512,\"multi_query\":true,"
     "\"layer_norm_epsilon\":1e-5,\"activation_function\":\"gelu_pytorch_tanh\",\"bos_token_id\":1,"
     "\"eos_token_id\":2,\"torch_dtype\":\"bfloat16\"}"},
    {"neo-tiny", "a 2-layer GPT-Neo (a global and a local layer, window 16, no attention scale, learned "
     "positions), for tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"GPTNeoForCausalLM\"],\"model_type\":\"gpt_neo\",\"vocab_size\":1024,\"hidden_size\":128,"
     "\"num_layers\":2,\"num_heads\":4,\"intermediate_size\":null,\"attention_types\":[[[\"global\",\"local\"],1]],"
     "\"window_size\":16,\"max_position_embeddings\":512,\"layer_norm_epsilon\":1e-5,"
     "\"activation_function\":\"gelu_new\",\"bos_token_id\":1,\"eos_token_id\":2,\"torch_dtype\":\"bfloat16\"}"},
    {"olmo-tiny", "a 2-layer OLMo (LayerNorm without parameters, SwiGLU, clip_qkv 0.5), for tests (vocab 1024, "
     "hidden 128)",
     "{\"architectures\":[\"OlmoForCausalLM\"],\"model_type\":\"olmo\",\"vocab_size\":1024,\"hidden_size\":128,"
     "\"intermediate_size\":256,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
     "\"max_position_embeddings\":2048,\"rope_theta\":10000.0,\"clip_qkv\":0.5,\"hidden_act\":\"silu\","
     "\"tie_word_embeddings\":false,\"bos_token_id\":1,\"eos_token_id\":2,\"torch_dtype\":\"bfloat16\"}"},
    {"glm4-tiny", "a 2-layer GLM-4 (fused gate_up, q/k/v biases, partial rotary 0.5 on interleaved pairs, "
     "sandwich norms), for tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"Glm4ForCausalLM\"],\"model_type\":\"glm4\",\"vocab_size\":1024,\"hidden_size\":128,"
     "\"intermediate_size\":256,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
     "\"head_dim\":32,\"max_position_embeddings\":2048,\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0,"
     "\"partial_rotary_factor\":0.5,\"attention_bias\":true,\"hidden_act\":\"silu\",\"tie_word_embeddings\":false,"
     "\"bos_token_id\":1,\"eos_token_id\":2,\"torch_dtype\":\"bfloat16\"}"},
    {"cohere2-tiny", "a 4-layer Cohere 2 (parallel LayerNorm layer, windows of 16 with RoPE on layers 0-2, layer 3 "
     "global without RoPE), for tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"Cohere2ForCausalLM\"],\"model_type\":\"cohere2\",\"vocab_size\":1024,\"hidden_size\":128,"
     "\"intermediate_size\":256,\"num_hidden_layers\":4,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
     "\"max_position_embeddings\":2048,\"layer_norm_eps\":1e-5,\"rope_theta\":10000.0,\"logit_scale\":0.5,"
     "\"sliding_window\":16,\"sliding_window_pattern\":4,\"hidden_act\":\"silu\",\"bos_token_id\":1,"
     "\"eos_token_id\":2,\"torch_dtype\":\"bfloat16\"}"},
    {"persimmon-tiny", "a 2-layer Persimmon (q/k LayerNorms with bias, query_key_value grouped by head, relu^2 "
     "MLP, partial rotary 0.5), for tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"PersimmonForCausalLM\"],\"model_type\":\"persimmon\",\"vocab_size\":1024,\"hidden_size\":128,"
     "\"intermediate_size\":256,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"max_position_embeddings\":2048,"
     "\"layer_norm_eps\":1e-5,\"qk_layernorm\":true,\"partial_rotary_factor\":0.5,\"rope_theta\":25000.0,"
     "\"hidden_act\":\"relu2\",\"bos_token_id\":1,\"eos_token_id\":2,\"torch_dtype\":\"bfloat16\"}"},
    {"stablelm-qk-tiny", "a 2-layer StableLM with qk_layernorm (a LayerNorm per q / k head, each its own weights), "
     "for tests (vocab 1024, hidden 128)",
     "{\"architectures\":[\"StableLmForCausalLM\"],\"model_type\":\"stablelm\",\"vocab_size\":1024,\"hidden_size\":128,"
     "\"intermediate_size\":256,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
     "\"max_position_embeddings\":2048,\"layer_norm_eps\":1e-5,\"qk_layernorm\":true,\"use_qkv_bias\":true,"
     "\"partial_rotary_factor\":0.25,\"hidden_act\":\"silu\",\"tie_word_embeddings\":false,\"bos_token_id\":1,"
     "\"eos_token_id\":2,\"torch_dtype\":\"bfloat16\"}"},
    {"gpt2-124m", "GPT-2 (124M) shape: vocab 50257, 12 layers of 768, learned positions, Conv1D weights, tied",
     "{\"architectures\":[\"GPT2LMHeadModel\"],\"model_type\":\"gpt2\",\"vocab_size\":50257,\"n_embd\":768,"
     "\"n_layer\":12,\"n_head\":12,\"n_inner\":null,\"n_positions\":1024,\"layer_norm_epsilon\":1e-5,"
     "\"activation_function\":\"gelu_new\",\"bos_token_id\":50256,\"eos_token_id\":50256,\"torch_dtype\":\"bfloat16\"}"},
    {"pythia-160m", "Pythia 160M shape (GPT-NeoX): vocab 50304, 12 layers of 768, rotary 0.25, parallel residual",
     "{\"architectures\":[\"GPTNeoXForCausalLM\"],\"model_type\":\"gpt_neox\",\"vocab_size\":50304,\"hidden_size\":768,"
     "\"intermediate_size\":3072,\"num_hidden_layers\":12,\"num_attention_heads\":12,\"max_position_embeddings\":2048,"
     "\"rotary_pct\":0.25,\"rotary_emb_base\":10000,\"use_parallel_residual\":true,\"layer_norm_eps\":1e-5,"
     "\"hidden_act\":\"gelu\",\"tie_word_embeddings\":false,\"bos_token_id\":0,\"eos_token_id\":0,"
     "\"torch_dtype\":\"bfloat16\"}"},
    {"bloom-560m", "BLOOM 560M shape: vocab 250880, 24 layers of 1024, 16 heads, ALiBi, tied",
     "{\"architectures\":[\"BloomForCausalLM\"],\"model_type\":\"bloom\",\"vocab_size\":250880,\"n_embed\":1024,"
     "\"n_layer\":24,\"num_attention_heads\":16,\"layer_norm_epsilon\":1e-5,"
     "\"apply_residual_connection_post_layernorm\":false,\"bos_token_id\":1,\"eos_token_id\":2,"
     "\"torch_dtype\":\"bfloat16\"}"},
    {"llama-3.2-1b", "Llama 3.2 1B shape: 1.24 B params, GQA 32/8, tied embeddings",
     "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"vocab_size\":128256,\"hidden_size\":2048,"
     "\"intermediate_size\":8192,\"num_hidden_layers\":16,\"num_attention_heads\":32,\"num_key_value_heads\":8,"
     "\"head_dim\":64,\"max_position_embeddings\":131072,\"rms_norm_eps\":1e-5,\"rope_theta\":500000.0,"
     "\"rope_scaling\":{\"factor\":32.0,\"high_freq_factor\":4.0,\"low_freq_factor\":1.0,"
     "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"},\"tie_word_embeddings\":true,"
     "\"hidden_act\":\"silu\",\"attention_bias\":false,\"mlp_bias\":false,\"bos_token_id\":128000,"
     "\"eos_token_id\":128001,\"torch_dtype\":\"bfloat16\"}"},
    {"qwen2.5-0.5b", "Qwen2.5 0.5B shape: 0.49 B params, GQA 14/2, qkv bias, tied embeddings",
     "{\"architectures\":[\"Qwen2ForCausalLM\"],\"model_type\":\"qwen2\",\"vocab_size\":151936,\"hidden_size\":896,"
     "\"intermediate_size\":4864,\"num_hidden_layers\":24,\"num_attention_heads\":14,\"num_key_value_heads\":2,"
     "\"max_position_embeddings\":32768,\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,\"tie_word_embeddings\":true,"
     "\"hidden_act\":\"silu\",\"sliding_window\":32768,\"use_sliding_window\":false,\"max_window_layers\":21,"
     "\"bos_token_id\":151643,\"eos_token_id\":151645,\"torch_dtype\":\"bfloat16\"}"},
    {"qwen3-0.6b", "Qwen3 0.6B shape: 0.6 B params, q/k norm, head_dim 128, tied embeddings",
     "{\"architectures\":[\"Qwen3ForCausalLM\"],\"model_type\":\"qwen3\",\"vocab_size\":151936,\"hidden_size\":1024,"
     "\"intermediate_size\":3072,\"num_hidden_layers\":28,\"num_attention_heads\":16,\"num_key_value_heads\":8,"
     "\"head_dim\":128,\"max_position_embeddings\":40960,\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,"
     "\"tie_word_embeddings\":true,\"hidden_act\":\"silu\",\"attention_bias\":false,\"bos_token_id\":151643,"
     "\"eos_token_id\":151645,\"torch_dtype\":\"bfloat16\"}"},
    {"llama-2-7b", "Llama 2 7B shape: 6.7 B params, MHA 32/32 (for converter memory checks)",
     "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"vocab_size\":32000,\"hidden_size\":4096,"
     "\"intermediate_size\":11008,\"num_hidden_layers\":32,\"num_attention_heads\":32,\"num_key_value_heads\":32,"
     "\"max_position_embeddings\":4096,\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0,\"tie_word_embeddings\":false,"
     "\"hidden_act\":\"silu\",\"bos_token_id\":1,\"eos_token_id\":2,\"torch_dtype\":\"bfloat16\"}"},
    {"llama-3.1-8b", "Llama 3.1 8B shape: 8.0 B params, GQA 32/8",
     "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"vocab_size\":128256,\"hidden_size\":4096,"
     "\"intermediate_size\":14336,\"num_hidden_layers\":32,\"num_attention_heads\":32,\"num_key_value_heads\":8,"
     "\"max_position_embeddings\":131072,\"rms_norm_eps\":1e-5,\"rope_theta\":500000.0,"
     "\"rope_scaling\":{\"factor\":8.0,\"high_freq_factor\":4.0,\"low_freq_factor\":1.0,"
     "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"},\"tie_word_embeddings\":false,"
     "\"hidden_act\":\"silu\",\"bos_token_id\":128000,\"eos_token_id\":128001,\"torch_dtype\":\"bfloat16\"}"},
    {"gemma-2-2b", "Gemma 2 2B shape: 2.6 B params, soft-capping, sliding window, GeGLU",
     "{\"architectures\":[\"Gemma2ForCausalLM\"],\"model_type\":\"gemma2\",\"vocab_size\":256000,\"hidden_size\":2304,"
     "\"intermediate_size\":9216,\"num_hidden_layers\":26,\"num_attention_heads\":8,\"num_key_value_heads\":4,"
     "\"head_dim\":256,\"max_position_embeddings\":8192,\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,"
     "\"query_pre_attn_scalar\":256,\"sliding_window\":4096,\"attn_logit_softcapping\":50.0,"
     "\"final_logit_softcapping\":30.0,\"hidden_activation\":\"gelu_pytorch_tanh\",\"tie_word_embeddings\":true,"
     "\"bos_token_id\":2,\"eos_token_id\":1,\"torch_dtype\":\"bfloat16\"}"},
    {"qwen3-30b-a3b", "Qwen3 30B-A3B shape: 30.5 B params, 128 experts top-8 (61 GB of bf16)",
     "{\"architectures\":[\"Qwen3MoeForCausalLM\"],\"model_type\":\"qwen3_moe\",\"vocab_size\":151936,"
     "\"hidden_size\":2048,\"intermediate_size\":6144,\"moe_intermediate_size\":768,\"num_hidden_layers\":48,"
     "\"num_attention_heads\":32,\"num_key_value_heads\":4,\"head_dim\":128,\"num_experts\":128,"
     "\"num_experts_per_tok\":8,\"norm_topk_prob\":true,\"decoder_sparse_step\":1,\"max_position_embeddings\":40960,"
     "\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,\"tie_word_embeddings\":false,\"hidden_act\":\"silu\","
     "\"bos_token_id\":151643,\"eos_token_id\":151645,\"torch_dtype\":\"bfloat16\"}"},
    {"deepseek-v2-lite", "DeepSeek-V2-Lite shape: 15.7 B params, MLA (kv_lora 512, 128 + 64 q/k dims, values 128: a "
     "latent head of 576), 64 experts top-6 and 2 shared, YaRN x40 (31 GB of bf16)",
     "{\"architectures\":[\"DeepseekV2ForCausalLM\"],\"model_type\":\"deepseek_v2\",\"vocab_size\":102400,"
     "\"hidden_size\":2048,\"intermediate_size\":10944,\"moe_intermediate_size\":1408,\"num_hidden_layers\":27,"
     "\"first_k_dense_replace\":1,\"n_routed_experts\":64,\"num_experts_per_tok\":6,\"n_shared_experts\":2,"
     "\"topk_method\":\"greedy\",\"scoring_func\":\"softmax\",\"norm_topk_prob\":false,"
     "\"routed_scaling_factor\":1.0,\"n_group\":1,\"topk_group\":1,\"q_lora_rank\":null,\"kv_lora_rank\":512,"
     "\"qk_nope_head_dim\":128,\"qk_rope_head_dim\":64,\"v_head_dim\":128,\"num_attention_heads\":16,"
     "\"num_key_value_heads\":16,\"max_position_embeddings\":163840,\"rope_scaling\":{\"type\":\"yarn\","
     "\"factor\":40,\"original_max_position_embeddings\":4096,\"beta_fast\":32,\"beta_slow\":1,"
     "\"mscale\":0.707,\"mscale_all_dim\":0.707},\"rope_theta\":10000,\"rms_norm_eps\":1e-6,"
     "\"tie_word_embeddings\":false,\"hidden_act\":\"silu\",\"bos_token_id\":100000,\"eos_token_id\":100001,"
     "\"torch_dtype\":\"bfloat16\"}"},
};

#define N_PRESETS (sizeof presets / sizeof presets[0])

const char *const *tm_synth_presets(void)
{
    static const char *names[N_PRESETS + 1];
    for (size_t i = 0; i < N_PRESETS; i++) names[i] = presets[i].name;
    return names;
}

static const synth_preset *find(const char *name)
{
    for (size_t i = 0; i < N_PRESETS; i++)
        if (strcmp(presets[i].name, name) == 0) return &presets[i];
    return NULL;
}

const char *tm_synth_describe(const char *preset)
{
    const synth_preset *p = find(preset);
    return p ? p->desc : NULL;
}

#define GTAB_BITS 20

/* weights: a table of N(0,1) values (Box-Muller) indexed by the sampler's
 * xoshiro256** generator: fast, seeded and reproducible */
typedef struct synth_rng {
    tm_rng r;
    float *gauss; /* [1 << GTAB_BITS] */
} synth_rng;

static uint64_t next_u64(synth_rng *r) { return tm_rng_next(&r->r); }

static int rng_init(synth_rng *r, uint64_t seed)
{
    tm_rng_seed(&r->r, seed);
    r->gauss = malloc(sizeof(float) << GTAB_BITS);
    if (!r->gauss) return TM_E_NOMEM;
    for (int i = 0; i < (1 << GTAB_BITS); i += 2) {
        double u1 = 1.0 - tm_rng_uniform(&r->r), u2 = tm_rng_uniform(&r->r); /* u1 in (0, 1] */
        double rad = sqrt(-2.0 * log(u1));
        r->gauss[i] = (float)(rad * cos(2 * M_PI * u2));
        r->gauss[i + 1] = (float)(rad * sin(2 * M_PI * u2));
    }
    return TM_OK;
}

/* ---- writers -------------------------------------------------------------------- */

static int write_text(const char *dir, const char *name, const char *text, tm_err *err)
{
    char path[4096];
    if (tm_path_join(path, sizeof path, dir, name) != TM_OK) return tm_errf(err, TM_E_INVALID, "%s: path too long", dir);
    tm_afile a;
    int rc = tm_afile_open(&a, path, err);
    if (rc != TM_OK) return rc;
    fputs(text, a.f);
    return tm_afile_commit(&a, err);
}

/* tokenizer.json: byte-level BPE, 256 byte symbols + bos/eos + filler, V entries in all. */
static int write_tokenizer(const char *dir, int V, int bos, int eos, tm_err *err)
{
    char path[4096];
    if (tm_path_join(path, sizeof path, dir, "tokenizer.json") != TM_OK)
        return tm_errf(err, TM_E_INVALID, "%s: path too long", dir);
    tm_afile a;
    int rc = tm_afile_open(&a, path, err);
    if (rc != TM_OK) return rc;
    FILE *f = a.f;
    fprintf(f, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":["
               "{\"id\":%d,\"content\":\"<|bos|>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
               "\"normalized\":false,\"special\":true},"
               "{\"id\":%d,\"content\":\"<|eos|>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
               "\"normalized\":false,\"special\":true}],",
            bos, eos);
    fputs("\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,"
          "\"use_regex\":true},\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":"
          "{\"id\":\"<|bos|>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[{\"Sequence\":"
          "{\"id\":\"A\",\"type_id\":0}},{\"Sequence\":{\"id\":\"B\",\"type_id\":1}}],\"special_tokens\":{\"<|bos|>\":"
          "{\"id\":\"<|bos|>\",\"ids\":[",
          f);
    fprintf(f, "%d],\"tokens\":[\"<|bos|>\"]}}},\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
               "\"trim_offsets\":true,\"use_regex\":true},\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,"
               "\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,\"fuse_unk\":false,\"byte_fallback\":false,"
               "\"ignore_merges\":false,\"vocab\":{",
            bos);
    /* GPT-2 byte -> unicode map */
    int id = 0, first = 1;
    for (int b = 0; b < 256; b++) {
        while (id == bos || id == eos) id++;
        int cp;
        if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) cp = b;
        else {
            int n = 0;
            for (int c = 0; c < b; c++)
                if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255))) n++;
            cp = 256 + n;
        }
        char u[8];
        if (cp < 0x80) snprintf(u, sizeof u, "%c", cp);
        else snprintf(u, sizeof u, "%c%c", 0xc0 | (cp >> 6), 0x80 | (cp & 0x3f));
        if (cp == '"' || cp == '\\') fprintf(f, "%s\"\\%s\":%d", first ? "" : ",", u, id);
        else fprintf(f, "%s\"%s\":%d", first ? "" : ",", u, id);
        first = 0;
        id++;
    }
    fprintf(f, ",\"<|bos|>\":%d,\"<|eos|>\":%d", bos, eos);
    for (; id < V; id++) {
        if (id == bos || id == eos) continue;
        fprintf(f, ",\"<|synth_%d|>\":%d", id, id);
    }
    fputs("},\"merges\":[]}}\n", f);
    return tm_afile_commit(&a, err);
}

/* slot is a norm's weight (GPT-2's ln_1 as well as Llama's input_layernorm) */
/* 1: a norm's weight (ones); 2: a q/k norm's weight (or MLA's latent norms'), 3: its bias, or the router's, its
 * correction's or an expert's (spread,
 * 1 + 0.2 g and 0.2 g, so that a per-head weight row or a bias taken wrongly shows in the logits); 4: attention
 * sinks (2 g: against the window's 16 keys of ~e^0 each they take a share that shows); 0: anything else (0.02 g) */
static int norm_kind(const tm_model *m, const tm_tensor *slot)
{
    if (slot == &m->final_norm || slot == &m->embed_norm) return 1;
    for (int l = 0; l < m->L; l++) {
        const tm_layer_weights *w = &m->w[l];
        const tm_tensor *n[] = {&w->attn_norm, &w->ffn_norm, &w->attn_out_norm, &w->ffn_out_norm};
        for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
            if (slot == n[i]) return 1;
        if (slot == &w->q_norm || slot == &w->k_norm || slot == &w->q_a_norm || slot == &w->kv_a_norm) return 2;
        if (slot == &w->q_norm_b || slot == &w->k_norm_b || slot == &w->router_b || slot == &w->router_corr) return 3;
        if (slot == &w->sinks) return 4;
        for (int e = 0; e < m->n_experts && w->e_gate_b; e++)
            if (slot == &w->e_gate_b[e] || slot == &w->e_up_b[e] || slot == &w->e_down_b[e]) return 3;
    }
    return 0;
}

static int write_safetensors(const char *dir, const tm_model *m, synth_rng *rng, tm_err *err)
{
    char path[4096];
    if (tm_path_join(path, sizeof path, dir, "model.safetensors") != TM_OK)
        return tm_errf(err, TM_E_INVALID, "%s: path too long", dir);
    /* header */
    size_t cap = 1 << 20, len = 0;
    char *hdr = malloc(cap);
    if (!hdr) return tm_errf(err, TM_E_NOMEM, "synth: out of memory");
    len += (size_t)snprintf(hdr, cap, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t off = 0;
    for (int i = 0; i < m->n_spec; i++) {
        const tm_tensor_spec *s = &m->spec[i];
        uint64_t n = 1;
        for (int d = 0; d < s->ndim; d++) n *= (uint64_t)s->shape[d];
        if (cap - len < 512) {
            cap *= 2;
            char *nh = realloc(hdr, cap);
            if (!nh) { free(hdr); return tm_errf(err, TM_E_NOMEM, "synth: out of memory"); }
            hdr = nh;
        }
        len += (size_t)snprintf(hdr + len, cap - len, ",\"%s\":{\"dtype\":\"BF16\",\"shape\":[", s->name);
        for (int d = 0; d < s->ndim; d++)
            len += (size_t)snprintf(hdr + len, cap - len, "%s%lld", d ? "," : "", (long long)s->shape[s->hf_transposed ? 1 - d : d]);
        len += (size_t)snprintf(hdr + len, cap - len, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                                (unsigned long long)(off + 2 * n));
        off += 2 * n;
    }
    len += (size_t)snprintf(hdr + len, cap - len, "}");
    while (len % 8) hdr[len++] = ' ';
    tm_afile a;
    int rc = tm_afile_open(&a, path, err);
    if (rc != TM_OK) { free(hdr); return rc; }
    uint64_t hl = len;
    fwrite(&hl, 8, 1, a.f);
    fwrite(hdr, 1, len, a.f);
    free(hdr);
    enum { CH = 1 << 16 };
    uint16_t *buf = malloc(sizeof(uint16_t) * CH);
    if (!buf) { tm_afile_abort(&a); return tm_errf(err, TM_E_NOMEM, "synth: out of memory"); }
    uint16_t one = tm_f32_to_bf16(m->norm_add_one ? 0.0f : 1.0f);
    for (int i = 0; i < m->n_spec; i++) {
        const tm_tensor_spec *s = &m->spec[i];
        uint64_t n = 1;
        for (int d = 0; d < s->ndim; d++) n *= (uint64_t)s->shape[d];
        int kind = norm_kind(m, s->slot); /* (a LayerNorm's bias is random as others) */
        for (uint64_t k = 0; k < n; k += CH) {
            size_t c = n - k < CH ? (size_t)(n - k) : CH;
            for (size_t j = 0; j < c; j++) {
                if (kind == 1) { /* no draw: the other tensors' values do not depend on the norms */
                    buf[j] = one;
                    continue;
                }
                float g = rng->gauss[next_u64(rng) >> (64 - GTAB_BITS)];
                buf[j] = kind == 2 ? tm_f32_to_bf16(tm_bf16_to_f32(one) + 0.2f * g)
                                   : tm_f32_to_bf16((kind == 4 ? 2.f : kind == 3 ? 0.2f : 0.02f) * g);
            }
            if (fwrite(buf, 2, c, a.f) != c) break;
        }
    }
    free(buf);
    return tm_afile_commit(&a, err);
}

/* the preset's config.json text with num_hidden_layers set to layers (a fresh string; NULL on error) */
static char *with_layers(const synth_preset *p, int layers, tm_err *err)
{
    cJSON *j = cJSON_Parse(p->config);
    cJSON *n = j ? cJSON_GetObjectItemCaseSensitive(j, "num_hidden_layers") : NULL;
    char *out = NULL;
    if (!cJSON_IsNumber(n)) tm_errf(err, TM_E_INVALID, "synth: preset '%s' has no num_hidden_layers to set", p->name);
    else if (layers > n->valueint)
        tm_errf(err, TM_E_INVALID, "synth: --layers %d is more than the %d of preset '%s'", layers, n->valueint, p->name);
    else if (cJSON_SetNumberValue(n, layers), !(out = cJSON_PrintUnformatted(j)))
        tm_errf(err, TM_E_NOMEM, "synth: out of memory");
    cJSON_Delete(j);
    return out;
}

int tm_synth_write(const char *preset, const char *out_dir, uint64_t seed, tm_err *err)
{
    return tm_synth_write_layers(preset, out_dir, seed, 0, err);
}

int tm_synth_write_layers(const char *preset, const char *out_dir, uint64_t seed, int layers, tm_err *err)
{
    const synth_preset *p = find(preset);
    if (!p) return tm_errf(err, TM_E_NOTFOUND, "synth: unknown preset '%s' (tandem synth --list)", preset);
    if (layers < 0) return tm_errf(err, TM_E_INVALID, "synth: --layers %d", layers);
    char *text = layers ? with_layers(p, layers, err) : NULL;
    if (layers && !text) return err->code;
    const char *config = text ? text : p->config;
    if (mkdir(out_dir, 0755) != 0 && !tm_is_dir(out_dir)) {
        free(text);
        return tm_errf(err, TM_E_IO, "%s: cannot create the directory", out_dir);
    }
    tm_hf_config cfg;
    int rc = tm_hf_config_parse(&cfg, config, strlen(config), "synth config.json", err);
    if (rc != TM_OK) {
        free(text);
        return rc;
    }
    tm_model *m = NULL;
    rc = tm_model_init(&m, &cfg, err);
    tm_hf_config_free(&cfg);
    if (rc != TM_OK) {
        free(text);
        return rc;
    }
    synth_rng rng = {0};
    if (rng_init(&rng, seed) != TM_OK) {
        tm_model_free(m);
        free(text);
        return tm_errf(err, TM_E_NOMEM, "synth: out of memory");
    }
    int bos = m->bos_id >= 0 ? m->bos_id : 1, eos = m->n_eos ? m->eos_ids[0] : 2;
    char gen[256];
    snprintf(gen, sizeof gen, "{\"bos_token_id\": %d, \"eos_token_id\": %d, \"do_sample\": false}\n", bos, eos);
    char tcfg[512];
    snprintf(tcfg, sizeof tcfg,
             "{\"bos_token\": \"<|bos|>\", \"eos_token\": \"<|eos|>\", \"model_max_length\": %d, "
             "\"tokenizer_class\": \"PreTrainedTokenizerFast\"}\n",
             m->max_pos);
    if ((rc = write_text(out_dir, "config.json", config, err)) == TM_OK &&
        (rc = write_text(out_dir, "generation_config.json", gen, err)) == TM_OK &&
        (rc = write_text(out_dir, "tokenizer_config.json", tcfg, err)) == TM_OK &&
        (rc = write_tokenizer(out_dir, m->V, bos, eos, err)) == TM_OK)
        rc = write_safetensors(out_dir, m, &rng, err);
    free(rng.gauss);
    tm_model_free(m);
    free(text);
    return rc;
}
