#!/usr/bin/env python3
"""tools/gen_refs.py OUT_DIR [NAME...]: Hugging Face reference outputs for architectures
and RoPE variants that ../shared/conformance does not cover.

Needs torch and transformers 5 (run it where they are installed; CPU is
enough). For each variant it builds a tiny random model exactly the way the
conformance fixtures were built (torch.manual_seed, transformers' default
init, every 1-D parameter perturbed by N(0, 0.1^2), cast to bfloat16,
save_pretrained), reloads the saved directory in bfloat16 with eager
attention, upcasts to float32 and records on CPU:

  OUT_DIR/<name>/hf/                 config.json (transformers-5 form) + model.safetensors
  OUT_DIR/<name>/config.hub_style.json  the same config in Hub key style
                                     (rope_theta / rope_scaling / torch_dtype, ...), written
                                     only if transformers gives bit-identical logits with it
  OUT_DIR/<name>/logits_len37.f32.bin       [37][V] float32 LE
  OUT_DIR/<name>/logits_len300_tail.f32.bin rows [256, 300) of the 300-token case
  OUT_DIR/<name>/residual_len37.f32.bin     [L+2][37][D]
  OUT_DIR/<name>/manifest.json       inputs, rows, argmax, greedy continuation, RoPE tables

The manifest uses the field names of ../shared/conformance/models (cases[],
greedy, rope, residual_stream), plus cases[].rows = [first, end) when a file
holds only some positions, and rope entries carry layer_type / table.

Everything is small (vocab 128, hidden 64, 2-3 layers): the whole output is
checked to stay under 2 MB so it can be committed to tests/data/refs/.
"""
import copy
import hashlib
import json
import math
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM

V = 128
TAIL0 = 256  # first stored row of the 300-token case

COMMON = dict(vocab_size=V, bos_token_id=0, eos_token_id=1, pad_token_id=None, initializer_range=0.02)


def variants():
    """name -> (config class name, kwargs, seed, description)"""
    v = {}
    v["gemma3"] = ("Gemma3TextConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, query_pre_attn_scalar=24, hidden_activation="gelu_pytorch_tanh",
        max_position_embeddings=4096, rms_norm_eps=1e-6, sliding_window=16,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        attn_logit_softcapping=0.1, final_logit_softcapping=0.5, tie_word_embeddings=True), 2001,
        "Gemma 3 text: q/k norm (1+w), sliding window 16 on layers 0-1 (pattern 3), local RoPE base 1e4, "
        "global base 1e6 with linear scaling x8, query_pre_attn_scalar 24, tiny soft-caps (transformers applies "
        "the final one and ignores attn_logit_softcapping for Gemma 3), tied")
    v["llama_yarn"] = ("LlamaConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, hidden_act="silu", max_position_embeddings=128, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128,
                         "rope_theta": 10000.0},
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False), 2003,
        "Llama with YaRN (factor 4, original max 128 = max_position_embeddings, default betas: attention factor "
        "0.1 ln 4 + 1)")
    v["llama_linear"] = ("LlamaConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=1, hidden_act="silu", max_position_embeddings=2048, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0},
        tie_word_embeddings=False, attention_bias=True, mlp_bias=True), 2005,
        "Llama with linear RoPE scaling x4, MQA (1 kv head), attention and MLP biases")
    v["phi3_partial"] = ("Phi3Config", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="silu", max_position_embeddings=4096, original_max_position_embeddings=4096,
        rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        tie_word_embeddings=False), 2007,
        "Phi-3 with partial_rotary_factor 0.5 (8 of 16 head dims rotated)")
    half = 8
    short = [1.0 + 0.05 * i for i in range(half)]
    long_ = [1.0 + 0.9 * i for i in range(half)]
    v["phi3_longrope"] = ("Phi3Config", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="silu", max_position_embeddings=512, original_max_position_embeddings=128,
        rms_norm_eps=1e-5, rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                                            "short_factor": short, "long_factor": long_},
        tie_word_embeddings=False), 2009,
        "Phi-3 with LongRoPE (original max 128, max 512: the 37-token case uses the short factors, the 300-token "
        "case the long ones; attention factor sqrt(1 + ln 4 / ln 128))")
    v["qwen2_sliding"] = ("Qwen2Config", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        use_sliding_window=True, sliding_window=16, max_window_layers=1, tie_word_embeddings=True), 2011,
        "Qwen2 with use_sliding_window, window 16 from layer max_window_layers = 1 on")
    v["mixtral"] = ("MixtralConfig", dict(
        COMMON, hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        num_local_experts=4, num_experts_per_tok=2, sliding_window=None, tie_word_embeddings=False), 2013,
        "Mixtral: 4 experts, top-2 (always renormalised), Hub tensor names block_sparse_moe.experts.N.w1/w2/w3")
    v["gemma"] = ("GemmaConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=1, head_dim=32, hidden_act="gelu_pytorch_tanh", max_position_embeddings=4096,
        rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=True, attention_bias=False), 2015,
        "Gemma (1): (1+w) norms, sqrt(D) embedding scale, GeGLU (tanh), MQA, head_dim 32 != hidden / heads, "
        "no sandwich norms, no soft-caps, attention scaled by head_dim^-0.5, tied")
    v["gemma_gelu"] = ("GemmaConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, head_dim=16, hidden_act="gelu", max_position_embeddings=4096,
        rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=True, attention_bias=False, initializer_range=0.3), 2023,
        "Gemma (1) as the Hub's gemma-2b / 7b configs have it, hidden_act 'gelu': transformers 5 runs the exact "
        "(erf) GELU there; weights N(0, 0.3^2) so the MLP's inputs reach the range where the exact and the tanh "
        "GELU differ")
    v["qwen2_moe"] = ("Qwen2MoeConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=32, shared_expert_intermediate_size=48, norm_topk_prob=False, decoder_sparse_step=1,
        mlp_only_layers=[1], tie_word_embeddings=False), 2025,
        "Qwen2-MoE: 4 experts top-2 without renormalisation, a shared expert (48) behind a sigmoid gate, "
        "q/k/v biases, layer 1 dense (mlp_only_layers)")
    v["exaone4"] = ("Exaone4Config", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, sliding_window=16,
        sliding_window_pattern=2, tie_word_embeddings=False), 2027,
        "EXAONE 4: OLMo 2's post norms, per-head q/k norms, hybrid attention: layers 0 and 2 sliding (window 16) "
        "with RoPE, layers 1 and 3 global without RoPE")
    v["granite"] = ("GraniteConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=True,
        attention_bias=False, mlp_bias=False, embedding_multiplier=12.0, logits_scaling=8.0,
        residual_multiplier=0.22, attention_multiplier=0.0625), 2017,
        "Granite: embedding x 12, attention scale 0.0625 (not head_dim^-0.5 = 0.25), residual branches x 0.22, "
        "logits / 8, tied")
    v["smollm3"] = ("SmolLM3Config", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, no_rope_layers=[1, 1, 0, 1],
        use_sliding_window=False, tie_word_embeddings=True, attention_bias=False, mlp_bias=False), 2019,
        "SmolLM3: RoPE on layers 0, 1 and 3, none on layer 2 (no_rope_layers [1, 1, 0, 1]), tied")
    v["olmo2"] = ("Olmo2Config", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, tie_word_embeddings=False,
        attention_bias=False), 2021,
        "OLMo 2: norms after attention and MLP only (no pre-norms), q/k RMSNorm over the whole projection")
    # the LayerNorm families: RoPE left at each config class's defaults (partial rotary factor, base), so
    # the saved config.json shows how transformers 5 names them
    v["phi"] = ("PhiConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="gelu_new", max_position_embeddings=2048, layer_norm_eps=1e-5,
        qk_layernorm=False, tie_word_embeddings=False), 2029,
        "Phi (phi-1 / 1.5 / 2): LayerNorm with bias, one norm shared by the attention and the MLP run in "
        "parallel, q/k/v/dense biases, fc1 -> gelu_new -> fc2 with biases, partial rotary (default 0.5), "
        "final_layernorm, lm_head with bias; GQA 4/2")
    v["starcoder2"] = ("Starcoder2Config", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="gelu_pytorch_tanh", max_position_embeddings=4096, norm_epsilon=1e-5,
        use_bias=True, sliding_window=16, tie_word_embeddings=True), 2031,
        "StarCoder2: LayerNorm with bias (norm_epsilon), biases on q/k/v/o and c_fc/c_proj (use_bias), "
        "c_fc -> gelu_pytorch_tanh -> c_proj, sliding window 16 on every layer, tied")
    v["stablelm"] = ("StableLmConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="silu", max_position_embeddings=4096, layer_norm_eps=1e-5,
        use_qkv_bias=True, qk_layernorm=False, use_parallel_residual=False, tie_word_embeddings=False), 2033,
        "StableLM: LayerNorm with bias, SwiGLU, q/k/v biases (use_qkv_bias), partial rotary (default 0.25)")
    v["stablelm_par"] = ("StableLmConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, hidden_act="silu", max_position_embeddings=4096, layer_norm_eps=1e-5,
        use_qkv_bias=False, qk_layernorm=False, use_parallel_residual=True, tie_word_embeddings=False), 2035,
        "StableLM with use_parallel_residual: the attention and the MLP both read input_layernorm(x) "
        "(no post_attention_layernorm)")
    v["gpt_neox"] = ("GPTNeoXConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        hidden_act="gelu", max_position_embeddings=2048, layer_norm_eps=1e-5, use_parallel_residual=True,
        attention_bias=True, tie_word_embeddings=False), 2037,
        "GPT-NeoX (Pythia): fused query_key_value with rows head by head ([H][3][Dh]) and its bias, "
        "parallel residual with two LayerNorms, dense_h_to_4h -> gelu -> dense_4h_to_h, partial rotary "
        "(default 0.25), gpt_neox.* names, embed_out")
    v["gpt_neox_seq"] = ("GPTNeoXConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        hidden_act="gelu", max_position_embeddings=2048, layer_norm_eps=1e-5, use_parallel_residual=False,
        attention_bias=False, tie_word_embeddings=False), 2039,
        "GPT-NeoX without the parallel residual and without attention biases (the MLP keeps its biases)")
    v["gpt2"] = ("GPT2Config", dict(
        COMMON, n_embd=64, n_inner=96, n_layer=2, n_head=4, n_positions=512, activation_function="gelu_new",
        layer_norm_epsilon=1e-5, tie_word_embeddings=True), 2041,
        "GPT-2: learned absolute positions (wpe), Conv1D weights stored [in][out], fused c_attn [D][3D] with its "
        "bias, LayerNorm with bias, c_fc -> gelu_new -> c_proj, no RoPE, tied")
    v["gpt2_default_inner"] = ("GPT2Config", dict(
        COMMON, n_embd=64, n_inner=None, n_layer=2, n_head=2, n_positions=320, activation_function="gelu",
        layer_norm_epsilon=1e-4, tie_word_embeddings=True), 2043,
        "GPT-2 with n_inner null (4 x n_embd), the exact GELU, 2 heads of 32, 320 positions")
    v["cohere"] = ("CohereConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="silu", max_position_embeddings=4096, layer_norm_eps=1e-5,
        logit_scale=0.0625, use_qk_norm=False, attention_bias=False, tie_word_embeddings=True), 2045,
        "Cohere (Command R): LayerNorm without bias, attention and MLP in parallel on one norm, RoPE on "
        "interleaved pairs, logits x logit_scale 0.0625, SwiGLU, tied")
    v["gptj"] = ("GPTJConfig", dict(
        COMMON, n_embd=64, n_inner=96, n_layer=2, n_head=4, rotary_dim=8, n_positions=512,
        activation_function="gelu_new", layer_norm_epsilon=1e-5, tie_word_embeddings=False), 2047,
        "GPT-J: parallel attention and MLP on ln_1, RoPE on interleaved pairs of the first rotary_dim = 8 of "
        "16 head dims, q/k/v/out_proj without bias, fc_in -> gelu_new -> fc_out with biases, lm_head with bias")
    v["opt"] = ("OPTConfig", dict(
        COMMON, hidden_size=64, ffn_dim=96, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=512,
        activation_function="relu", do_layer_norm_before=True, word_embed_proj_dim=64, enable_bias=True,
        tie_word_embeddings=True), 2049,
        "OPT: learned positions with offset 2, ReLU MLP (fc1, fc2), LayerNorm with bias before attention "
        "(self_attn_layer_norm) and MLP (final_layer_norm), biases everywhere, model.decoder.* names, tied")
    v["falcon_mq"] = ("FalconConfig", dict(
        COMMON, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, multi_query=True, parallel_attn=True,
        new_decoder_architecture=False, bias=False, alibi=False, layer_norm_epsilon=1e-5, max_position_embeddings=512,
        tie_word_embeddings=True), 2051,
        "Falcon (7B style): multi-query (one kv head), fused query_key_value (Q heads, K, V), attention and MLP in "
        "parallel on input_layernorm, dense_h_to_4h -> gelu -> dense_4h_to_h without biases, tied")
    v["falcon_new"] = ("FalconConfig", dict(
        COMMON, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_kv_heads=2,
        new_decoder_architecture=True, parallel_attn=True, bias=True, alibi=False, layer_norm_epsilon=1e-5,
        max_position_embeddings=512, ffn_hidden_size=96, tie_word_embeddings=False), 2053,
        "Falcon new decoder architecture (40B / 180B style): GQA 4/2 with query_key_value grouped by kv head "
        "([Hk][q per kv + 2][Dh]), ln_attn and ln_mlp in parallel, biases, ffn_hidden_size 96, untied")
    # ALiBi (no RoPE): a per-head linear distance bias on the attention scores
    v["bloom"] = ("BloomConfig", dict(
        COMMON, hidden_size=96, n_layer=2, n_head=6, layer_norm_epsilon=1e-5,
        apply_residual_connection_post_layernorm=False, tie_word_embeddings=True), 2055,
        "BLOOM: ALiBi with 6 heads (not a power of two: the extra slopes), word_embeddings_layernorm after the "
        "embedding, fused query_key_value grouped by head ([H][3][Dh]), LayerNorm with bias, biases everywhere, "
        "dense_h_to_4h -> gelu (tanh) -> dense_4h_to_h, tied")
    v["mpt"] = ("MptConfig", dict(
        COMMON, d_model=96, n_heads=6, n_layers=2, expansion_ratio=4, max_seq_len=512, layer_norm_epsilon=1e-5,
        no_bias=True, attn_config={"alibi": True, "alibi_bias_max": 8}), 2057,
        "MPT: ALiBi with 6 heads (MPT's slopes: the next power of two, odd ones first), Wqkv rows Q, K, V, "
        "LayerNorm without bias, up_proj -> gelu -> down_proj, no biases, blocks.N / norm_f names, tied")
    v["falcon_alibi"] = ("FalconConfig", dict(
        COMMON, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, multi_query=False, parallel_attn=False,
        new_decoder_architecture=False, bias=True, alibi=True, layer_norm_epsilon=1e-5, max_position_embeddings=512,
        tie_word_embeddings=True), 2059,
        "Falcon with ALiBi (falcon-rw style): the bias added before the 1/sqrt(Dh) scale, query_key_value grouped "
        "by head, attention then MLP in turn (post_attention_layernorm), biases, tied")
    # learned positions, GPT-2 style names with Linear (not Conv1D) weights
    v["gpt_bigcode"] = ("GPTBigCodeConfig", dict(
        COMMON, n_embd=64, n_inner=96, n_layer=2, n_head=4, n_positions=512, multi_query=True,
        activation_function="gelu_pytorch_tanh", layer_norm_epsilon=1e-5, tie_word_embeddings=True), 2061,
        "GPTBigCode (StarCoder 1, SantaCoder): multi-query, c_attn rows Q (D), K (Dh), V (Dh), Linear weights, "
        "learned positions, LayerNorm with bias, biases everywhere, tied")
    v["gpt_bigcode_mha"] = ("GPTBigCodeConfig", dict(
        COMMON, n_embd=64, n_inner=None, n_layer=2, n_head=4, n_positions=512, multi_query=False,
        activation_function="gelu", layer_norm_epsilon=1e-5, tie_word_embeddings=True), 2063,
        "GPTBigCode with multi_query false: c_attn rows grouped by head ([H][3][Dh]), n_inner null, exact gelu")
    v["gpt_neo"] = ("GPTNeoConfig", dict(
        COMMON, hidden_size=64, num_layers=2, num_heads=4, intermediate_size=None, max_position_embeddings=512,
        attention_types=[[["global", "local"], 1]], window_size=16, activation_function="gelu_new",
        layer_norm_epsilon=1e-5, tie_word_embeddings=True), 2065,
        "GPT-Neo: global and local (window 16) layers in turn, no attention scaling, q/k/v without bias, out_proj "
        "with bias, learned positions, c_fc -> gelu_new -> c_proj, tied")
    v["olmo"] = ("OlmoConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="silu", max_position_embeddings=4096, clip_qkv=None,
        tie_word_embeddings=False, attention_bias=False), 2067,
        "OLMo (1): LayerNorm without weight or bias, SwiGLU, Llama names")
    v["olmo_clip"] = ("OlmoConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, hidden_act="silu", max_position_embeddings=4096, clip_qkv=0.03,
        tie_word_embeddings=True, attention_bias=False), 2069,
        "OLMo (1) with clip_qkv 0.03: q, k and v clamped after their projections, tied")
    # session 26, second batch: sliding-window and MoE relatives of supported families
    v["olmo3"] = ("Olmo3Config", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6, sliding_window=16,
        layer_types=["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
        tie_word_embeddings=False, attention_bias=False), 2071,
        "OLMo 3: OLMo 2's layer with a sliding window of 16 on layers 0-2")
    v["ministral"] = ("MinistralConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-5,
        sliding_window=16, layer_types=["sliding_attention", "full_attention"], tie_word_embeddings=False), 2073,
        "Ministral: Mistral with layer_types (window 16 on layer 0 only)")
    v["glm"] = ("GlmConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-5,
        partial_rotary_factor=0.5, attention_bias=True, tie_word_embeddings=False), 2075,
        "GLM (glm-4-9b-hf): fused gate_up_proj, q/k/v biases, partial rotary 0.5 on interleaved pairs")
    v["glm4"] = ("Glm4Config", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-5,
        partial_rotary_factor=0.5, attention_bias=True, tie_word_embeddings=False), 2077,
        "GLM-4 (0414): GLM plus post-attention and post-MLP norms")
    v["cohere2"] = ("Cohere2Config", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="silu", max_position_embeddings=4096, layer_norm_eps=1e-5,
        logit_scale=0.0625, sliding_window=16,
        layer_types=["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
        tie_word_embeddings=True), 2079,
        "Cohere 2 (Command R7B): Cohere's parallel layer, sliding window 16 on layers 0-2 (with RoPE), layer 3 global")
    v["olmoe"] = ("OlmoeConfig", dict(
        COMMON, hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-5,
        num_experts=4, num_experts_per_tok=2, norm_topk_prob=False, clip_qkv=None, tie_word_embeddings=False), 2081,
        "OLMoE: OLMo 2's q/k norms over the whole projection with pre-norms, 4 experts top-2 without renormalisation")
    # session 26, third batch
    v["nemotron"] = ("NemotronConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="relu2", max_position_embeddings=4096, norm_eps=1e-5,
        partial_rotary_factor=0.5, tie_word_embeddings=False), 2083,
        "Nemotron: LayerNorm1P ((1 + w), with bias), MLP up_proj -> relu^2 -> down_proj, partial rotary 0.5")
    v["granitemoe"] = ("GraniteMoeConfig", dict(
        COMMON, hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6,
        num_local_experts=4, num_experts_per_tok=2, embedding_multiplier=12.0, logits_scaling=8.0,
        residual_multiplier=0.22, attention_multiplier=0.0625, tie_word_embeddings=True), 2085,
        "GraniteMoE: Granite's four scalars, experts as 3-D input_linear / output_linear, top-2 softmax over the "
        "top logits")
    v["granitemoe_shared"] = ("GraniteMoeSharedConfig", dict(
        COMMON, hidden_size=64, intermediate_size=32, shared_intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, hidden_act="silu", max_position_embeddings=4096,
        rms_norm_eps=1e-6, num_local_experts=4, num_experts_per_tok=2, embedding_multiplier=12.0,
        logits_scaling=8.0, residual_multiplier=0.22, attention_multiplier=0.0625, tie_word_embeddings=True), 2087,
        "GraniteMoE with a shared MLP of 48 (shared_mlp.input_linear / output_linear) on every token")
    # q/k LayerNorms
    v["persimmon"] = ("PersimmonConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        hidden_act="relu2", max_position_embeddings=4096, layer_norm_eps=1e-5, qk_layernorm=True,
        partial_rotary_factor=0.5, tie_word_embeddings=False), 2089,
        "Persimmon (Fuyu's decoder): LayerNorm with bias on q and k per head (shared [Dh]), fused query_key_value "
        "grouped by head, relu^2 MLP without a gate, partial rotary 0.5, biases")
    v["phi_qk"] = ("PhiConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="gelu_new", max_position_embeddings=2048, layer_norm_eps=1e-5,
        qk_layernorm=True, tie_word_embeddings=False), 2091,
        "Phi with qk_layernorm: a LayerNorm with bias over each q and k head (shared [Dh])")
    v["cohere_qk"] = ("CohereConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="silu", max_position_embeddings=4096, layer_norm_eps=1e-5,
        logit_scale=0.0625, use_qk_norm=True, attention_bias=False, tie_word_embeddings=True), 2093,
        "Cohere with use_qk_norm (Command R+): a LayerNorm without bias over each q and k head, weights per head "
        "[H][Dh]")
    v["stablelm_qk"] = ("StableLmConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="silu", max_position_embeddings=4096, layer_norm_eps=1e-5,
        use_qkv_bias=True, qk_layernorm=True, use_parallel_residual=False, tie_word_embeddings=False), 2095,
        "StableLM with qk_layernorm (StableLM 2 12B): a LayerNorm without bias per head, one module per head")
    # session 26, last batch
    v["arcee"] = ("ArceeConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, hidden_act="relu2", max_position_embeddings=4096, rms_norm_eps=1e-5,
        tie_word_embeddings=False), 2097,
        "Arcee (AFM): Llama with an MLP without a gate, up_proj -> relu^2 -> down_proj")
    v["ernie4_5"] = ("Ernie4_5Config", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-5,
        use_bias=True, tie_word_embeddings=True), 2099,
        "ERNIE 4.5 (dense): Llama-like with use_bias, its own RoPE layout")
    v["codegen"] = ("CodeGenConfig", dict(
        COMMON, n_embd=64, n_inner=96, n_layer=2, n_head=4, rotary_dim=8, n_positions=512, n_ctx=512,
        activation_function="gelu_new", layer_norm_epsilon=1e-5, tie_word_embeddings=False), 2101,
        "CodeGen: GPT-J's layer with qkv_proj fused in mp_num = 4 blocks of (q, v, k)")
    # session 27
    v["gpt_oss"] = ("GptOssConfig", dict(
        COMMON, hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, hidden_act="silu", max_position_embeddings=131072, rms_norm_eps=1e-5,
        sliding_window=16, layer_types=["sliding_attention", "full_attention"], num_local_experts=4,
        num_experts_per_tok=2, swiglu_limit=0.15, attention_bias=True,
        rope_parameters={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                         "original_max_position_embeddings": 4096, "truncate": False, "rope_theta": 150000.0},
        tie_word_embeddings=False), 2103,
        "GPT-OSS: attention sinks, q/k/v/o biases, sliding window 16 on layer 0, YaRN x32 without truncation, "
        "4 experts top-2 (softmax over the top logits, router bias), experts fused [E][D][2F] with interleaved "
        "gate/up columns and biases, clamped SwiGLU (alpha 1.702, (up + 1)); the config's swiglu_limit 0.15 is not "
        "read by transformers 5.17 (GptOssExperts fixes the limit at 7, which these activations never reach), so "
        "an engine that reads it fails this fixture")
    v["glm4_moe"] = ("Glm4MoeConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, attention_bias=True, first_k_dense_replace=1,
        n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, n_group=2, topk_group=1,
        routed_scaling_factor=2.5, norm_topk_prob=True, hidden_act="silu", max_position_embeddings=4096,
        rms_norm_eps=1e-5, tie_word_embeddings=False), 2111,
        "GLM-4.5 (Glm4MoeForCausalLM): Llama's attention with q/k/v biases and partial rotary 0.5 (halves, the "
        "default), dense layer 0, 8 routed experts in 2 groups (top-1 group) with DeepSeek-V3's sigmoid router and "
        "correction bias (perturbed N(0, 0.3^2)), 1 shared expert, scaling 2.5")
    v["glm4_moe_qk"] = ("Glm4MoeConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, attention_bias=False, use_qk_norm=True,
        first_k_dense_replace=0, n_routed_experts=4, n_shared_experts=2, num_experts_per_tok=2,
        norm_topk_prob=False, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-5,
        tie_word_embeddings=False), 2113,
        "GLM-4.5 with use_qk_norm (q/k RMSNorm per head before RoPE), no biases, every layer MoE (4 experts, "
        "one group, top-2 not renormalised, scaling 1), 2 shared experts")
    v["glm4_moe_lite"] = ("Glm4MoeLiteConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=4, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2,
        n_group=1, topk_group=1, routed_scaling_factor=1.8, norm_topk_prob=True, q_lora_rank=32, kv_lora_rank=16,
        qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=24, hidden_act="silu", max_position_embeddings=4096,
        rms_norm_eps=1e-5, rope_interleave=True, mlp_layer_types=["dense", "sparse", "sparse"],
        tie_word_embeddings=False), 2119,
        "GLM-4.7-Flash (Glm4MoeLiteForCausalLM): DeepSeek-V3's MLA (q_lora 32, kv_lora 16, nope 16 + rope 8, v 24, "
        "interleaved pairs) with GLM-4.5's experts (8 routed, one group, top-2 renormalised x 1.8, 1 shared, "
        "correction bias perturbed N(0, 0.3^2)), layer 0 dense by mlp_layer_types")
    v["ernie4_5_moe"] = ("Ernie4_5_MoeConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, moe_num_experts=8, moe_k=2, moe_num_shared_experts=1,
        moe_layer_start_index=1, moe_layer_interval=1, moe_layer_end_index=2, hidden_act="silu",
        max_position_embeddings=4096, rms_norm_eps=1e-5, use_bias=False, tie_word_embeddings=True), 2121,
        "ERNIE 4.5 MoE: RoPE on interleaved pairs, experts on layers 1-2 (8, top-2 by softmax + the correction "
        "bias moe_statics.e_score_correction_bias [1][8] (perturbed N(0, 0.1^2)), renormalised), 1 shared, layers "
        "0 and 3 dense, tied")
    v["dots1"] = ("Dots1Config", dict(
        COMMON, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2,
        n_group=2, topk_group=1, first_k_dense_replace=1, norm_topk_prob=False, routed_scaling_factor=2.0,
        sliding_window=16, max_window_layers=2, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6,
        tie_word_embeddings=False), 2123,
        "dots.llm1 (Dots1ForCausalLM): Qwen3's attention (q/k norms) with window 16 on layer 2 (max_window_layers 2), "
        "DeepSeek-V3's experts: 8 in 2 groups (top-1 group), sigmoid + correction bias (perturbed N(0, 0.3^2)), top-2 "
        "not renormalised x 2.0, 1 shared, layer 0 dense")
    v["seed_oss"] = ("SeedOssConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, attention_bias=True, attention_out_bias=False, mlp_bias=False,
        hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=False), 2115,
        "Seed-OSS: Llama with q/k/v biases (attention_bias) and none on o (attention_out_bias false)")
    v["seed_oss_obias"] = ("SeedOssConfig", dict(
        COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, head_dim=16, attention_bias=False, attention_out_bias=True, mlp_bias=True,
        hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=True), 2117,
        "Seed-OSS with a bias on o only (attention_out_bias), MLP biases, tied")
    v["deepseek_v3"] = ("DeepseekV3Config", dict(
        COMMON, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=3,
        first_k_dense_replace=1, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, n_group=2,
        topk_group=1, routed_scaling_factor=2.5, norm_topk_prob=True, q_lora_rank=32, kv_lora_rank=16,
        qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, num_attention_heads=4, num_key_value_heads=4,
        hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6, rope_interleave=True,
        tie_word_embeddings=False), 2105,
        "DeepSeek-V3: MLA (q_lora 32, kv_lora 16, nope 16 + rope 8, v 16, rope pairs interleaved), dense layer 0, "
        "8 routed experts in 2 groups (top-1 group), sigmoid scores with a correction bias (a buffer, perturbed "
        "N(0, 0.3^2) so that it moves the choice), 1 shared expert, scaling 2.5")
    v["deepseek_v3_yarn"] = ("DeepseekV3Config", dict(
        COMMON, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        first_k_dense_replace=0, n_routed_experts=8, n_shared_experts=2, num_experts_per_tok=3, n_group=4,
        topk_group=2, routed_scaling_factor=1.5, norm_topk_prob=False, q_lora_rank=None, kv_lora_rank=24,
        qk_nope_head_dim=8, qk_rope_head_dim=16, v_head_dim=24, num_attention_heads=4, num_key_value_heads=4,
        hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6, rope_interleave=False,
        attention_bias=True,
        rope_parameters={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024,
                         "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 0.8,
                         "rope_theta": 10000.0},
        tie_word_embeddings=False), 2109,
        "DeepSeek-V3 variant: no q_lora, rotate-half RoPE (rope_interleave false) on 16 of 24 q/k dims, values 24 "
        "wide (= nope + rope), YaRN x4 with mscale 1 and mscale_all_dim 0.8 (attention scaled by mscale^2), "
        "attention_bias (q_a-less: kv_a and o biases), 8 experts in 4 groups (top-2 groups), top-3 without "
        "renormalisation, scaling 1.5, 2 shared experts, no dense layer")
    v["deepseek_v2_lite"] = ("DeepseekV2Config", dict(
        COMMON, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=3,
        first_k_dense_replace=1, n_routed_experts=8, n_shared_experts=2, num_experts_per_tok=2, n_group=1,
        topk_group=1, topk_method="greedy", routed_scaling_factor=1.0, norm_topk_prob=False, q_lora_rank=None,
        kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, num_attention_heads=4,
        num_key_value_heads=4, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6,
        tie_word_embeddings=False), 2107,
        "DeepSeek-V2-Lite: MLA without q_lora, softmax routing greedy top-2 of 8, 2 shared experts")
    v["deepseek_v2_group"] = ("DeepseekV2Config", dict(
        COMMON, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        first_k_dense_replace=0, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=3, n_group=2,
        topk_group=1, topk_method="group_limited_greedy", routed_scaling_factor=2.0, q_lora_rank=24,
        kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12, num_attention_heads=4,
        num_key_value_heads=4, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6,
        tie_word_embeddings=False), 2111,
        "DeepSeek-V2 with q_lora 24, group_limited_greedy (2 groups of 4, the best by its max, then the top 3 "
        "within it: more than the groups chosen, so the grouping shows), scaling 2, values 12 wide")
    return v


def hub_style(d):
    """transformers-5 config dict -> the Hub (transformers 4) key style"""
    d = copy.deepcopy(d)
    if "dtype" in d:
        d["torch_dtype"] = d.pop("dtype")
    rp = d.pop("rope_parameters", None)
    if rp is None:
        return d
    if "full_attention" in rp or "sliding_attention" in rp:  # Gemma 3
        full = dict(rp.get("full_attention") or {})
        slid = dict(rp.get("sliding_attention") or {})
        d["rope_theta"] = full.pop("rope_theta", 1000000.0)
        d["rope_local_base_freq"] = slid.get("rope_theta", 10000.0)
        d["rope_scaling"] = full if full.get("rope_type", "default") != "default" else None
        lt = d.get("layer_types")
        if lt:  # express the pattern the Hub way when it is one
            for p in range(1, len(lt) + 1):
                if lt == ["sliding_attention" if (i + 1) % p else "full_attention" for i in range(len(lt))]:
                    d.pop("layer_types")
                    d["sliding_window_pattern"] = p
                    break
        return d
    rp = dict(rp)
    d["rope_theta"] = rp.pop("rope_theta", 10000.0)
    if "partial_rotary_factor" in rp:
        d["partial_rotary_factor"] = rp.pop("partial_rotary_factor")
    d["rope_scaling"] = rp if rp.get("rope_type", "default") != "default" else None
    if d.get("model_type") == "gpt_neox":  # Pythia's configs on the Hub
        d["rotary_emb_base"] = d.pop("rope_theta")
        if "partial_rotary_factor" in d:
            d["rotary_pct"] = d.pop("partial_rotary_factor")
    return d


def perturb(model, seed):
    g = torch.Generator().manual_seed(seed)
    names = []
    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.dim() == 1 or n.endswith("_bias"):  # GPT-OSS's expert biases are [E][...]
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
                names.append(n)
        for n, b in model.named_buffers():  # DeepSeek-V3's routing correction, a buffer saved with the weights
            if n.endswith("e_score_correction_bias"):
                b.add_(torch.randn(b.shape, generator=g) * 0.3)
                names.append(n)
    return names


def to_hub_moe_names(hf_dir, F, D, n_experts, style="mixtral"):
    """transformers 5 may save MoE experts fused ([E][2F][D] gate_up, [E][D][F] down); rewrite them as the
    Hub's per-expert tensors: Mixtral's block_sparse_moe.experts.N.{w1,w3,w2}.weight, or (style "qwen")
    Qwen-MoE's mlp.experts.N.{gate_proj,up_proj,down_proj}.weight"""
    path = os.path.join(hf_dir, "model.safetensors")
    sd = load_file(path)
    out, changed = {}, False
    blk_out = ".block_sparse_moe." if style == "mixtral" else ".mlp."
    names = ("w1", "w3", "w2") if style == "mixtral" else ("gate_proj", "up_proj", "down_proj")
    for k, t in sd.items():
        for blk in (".mlp.", ".block_sparse_moe."):
            if blk in k:
                pre = k.split(blk)[0] + blk_out
                rest = k.split(blk, 1)[1]
                break
        else:
            out[k] = t
            continue
        if rest == "experts.gate_up_proj":
            changed = True
            for e in range(n_experts):
                w = t[e] if t.shape[1] == 2 * F else t[e].t()
                out[pre + f"experts.{e}.{names[0]}.weight"] = w[:F].contiguous()
                out[pre + f"experts.{e}.{names[1]}.weight"] = w[F:].contiguous()
        elif rest == "experts.down_proj":
            changed = True
            for e in range(n_experts):
                w = t[e] if t.shape[1] == D else t[e].t()
                out[pre + f"experts.{e}.{names[2]}.weight"] = w.contiguous()
        else:
            changed |= pre + rest != k
            out[pre + rest] = t
    if changed:
        save_file(out, path, metadata={"format": "pt"})
    return changed


def capture(model, ids):
    """float32 logits [T][V] and residual stream [L+2][T][D]"""
    base = model.base_model
    base = getattr(base, "decoder", base)  # OPT: model.decoder
    layers = next(getattr(base, n) for n in ("layers", "h", "blocks") if hasattr(base, n))  # GPT-2: h, MPT: blocks
    final = next(getattr(base, n) for n in ("norm", "final_layernorm", "final_layer_norm", "ln_f", "norm_f")
                 if hasattr(base, n))
    res = [None] * (len(layers) + 2)
    hooks = []

    def pre0(mod, args, kwargs):
        res[0] = (args[0] if args else kwargs["hidden_states"]).detach().clone()

    hooks.append(layers[0].register_forward_pre_hook(pre0, with_kwargs=True))
    for i, layer in enumerate(layers):
        def post(mod, args, out, i=i):
            res[i + 1] = (out[0] if isinstance(out, tuple) else out).detach().clone()
        hooks.append(layer.register_forward_hook(post))

    def normhook(mod, args, out):
        res[-1] = out.detach().clone()

    hooks.append(final.register_forward_hook(normhook))
    with torch.no_grad():
        logits = model(torch.tensor([ids]), use_cache=False).logits[0].float()
    for h in hooks:
        h.remove()
    return logits, torch.stack([r[0] for r in res])


def load(hf_dir):
    m, info = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.bfloat16, attn_implementation="eager",
                                                   output_loading_info=True)
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if bad:
        raise RuntimeError(f"{hf_dir}: loading is not clean: {bad}")
    return m.float().eval()


def rope_tables(model, cfg):
    out = {}
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    for n, b in model.named_buffers():
        if "inv_freq" in n and "original" not in n:
            lt = "sliding_attention" if "local" in n else None
            for t in ("full_attention", "sliding_attention"):
                if t in n:
                    lt = t
            mod = model.get_submodule(n.rsplit(".", 1)[0])
            att = getattr(mod, f"{lt}_attention_scaling", None) if lt else None
            if att is None:
                att = getattr(mod, "attention_scaling", 1.0)
            out[n] = {"inv_freq": [float(x) for x in b.float()], "attention_scaling": float(att), "layer_type": lt,
                      "table": "current"}
    rp = getattr(cfg, "rope_parameters", None)  # none for GPT-2
    if isinstance(rp, dict) and rp.get("rope_type") == "longrope":
        orig = rp["original_max_position_embeddings"]
        inv, att = ROPE_INIT_FUNCTIONS["longrope"](cfg, "cpu", seq_len=orig + 1)
        out["longrope.long"] = {"inv_freq": [float(x) for x in inv.float()], "attention_scaling": float(att),
                                "layer_type": None, "table": "long"}
    return out


def f32_file(path, t):
    a = t.detach().float().numpy().astype("<f4")
    a.tofile(path)
    return hashlib.sha256(a.tobytes()).hexdigest()


def build(name, cls_name, kwargs, seed, desc, root):
    d = os.path.join(root, name)
    hf = os.path.join(d, "hf")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(hf)
    cls = getattr(transformers, cls_name)
    cfg = cls(**kwargs)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    perturbed = perturb(model, seed + 1)
    model = model.to(torch.bfloat16)
    model.save_pretrained(hf)
    for extra in ("generation_config.json",):
        p = os.path.join(hf, extra)
        if os.path.exists(p):
            os.remove(p)
    notes = []
    if cls_name == "MixtralConfig" and to_hub_moe_names(hf, cfg.intermediate_size, cfg.hidden_size,
                                                         cfg.num_local_experts):
        notes.append("experts rewritten to the Hub's per-expert block_sparse_moe.experts.N.w1/w2/w3 tensors "
                     "(reloaded cleanly: no missing or unexpected keys)")
    if cls_name == "OlmoeConfig" and to_hub_moe_names(hf, cfg.intermediate_size, cfg.hidden_size, cfg.num_experts,
                                                      "qwen"):
        notes.append("experts rewritten to the Hub's per-expert mlp.experts.N.gate_proj/up_proj/down_proj tensors "
                     "(reloaded cleanly: no missing or unexpected keys)")
    if cls_name in ("Glm4MoeConfig", "Glm4MoeLiteConfig", "Ernie4_5_MoeConfig", "Dots1Config") and to_hub_moe_names(
            hf, cfg.moe_intermediate_size, cfg.hidden_size,
            cfg.moe_num_experts if cls_name == "Ernie4_5_MoeConfig" else cfg.n_routed_experts, "qwen"):
        notes.append("experts rewritten to the Hub's per-expert mlp.experts.N.gate_proj/up_proj/down_proj tensors "
                     "(reloaded cleanly: no missing or unexpected keys)")
    if cls_name == "Qwen2MoeConfig" and to_hub_moe_names(hf, cfg.moe_intermediate_size, cfg.hidden_size,
                                                         cfg.num_experts, "qwen"):
        notes.append("experts rewritten to the Hub's per-expert mlp.experts.N.gate_proj/up_proj/down_proj tensors "
                     "(reloaded cleanly: no missing or unexpected keys)")
    ref = load(hf)
    rope = rope_tables(ref, ref.config)  # before any forward (LongRoPE switches tables during one)
    L = ref.config.num_hidden_layers
    rng_ids = {}
    cases = []
    for T, sseed in ((37, seed * 10 + 37), (300, seed * 10 + 300)):
        ids = [int(x) for x in np.random.default_rng(sseed).integers(0, V, T)]
        rng_ids[T] = ids
        logits, resid = capture(ref, ids)
        if T == 37:
            fn = "logits_len37.f32.bin"
            rows = [0, 37]
            sha = f32_file(os.path.join(d, fn), logits)
            rsha = f32_file(os.path.join(d, "residual_len37.f32.bin"), resid)
        else:
            fn = "logits_len300_tail.f32.bin"
            rows = [TAIL0, 300]
            sha = f32_file(os.path.join(d, fn), logits[TAIL0:])
        sel = logits[rows[0]:rows[1]]
        cases.append({"name": f"len{T}", "length": T, "seq_seed": sseed, "input_ids": ids, "logits_file": fn,
                      "rows": rows, "shape": [rows[1] - rows[0], V], "dtype": "float32", "byte_order": "little",
                      "layout": "row-major [position - rows[0]][vocab]", "sha256": sha,
                      "argmax_per_position": [int(x) for x in sel.argmax(-1)]})
    # the Hub-style config must give bit-identical logits
    with open(os.path.join(hf, "config.json")) as f:
        native = json.load(f)
    hub = hub_style(native)
    tmp = tempfile.mkdtemp()
    try:
        for fn in os.listdir(hf):
            if fn != "config.json":
                os.symlink(os.path.abspath(os.path.join(hf, fn)), os.path.join(tmp, fn))
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(hub, f, indent=2, sort_keys=True)
        alt = load(tmp)
        same = all(torch.equal(capture(alt, rng_ids[T])[0], capture(ref, rng_ids[T])[0]) for T in (37, 300))
    finally:
        shutil.rmtree(tmp)
    if same:
        with open(os.path.join(d, "config.hub_style.json"), "w") as f:
            json.dump(hub, f, indent=2, sort_keys=True)
    else:
        notes.append("the Hub-style config gave different logits in transformers: not written")
    # greedy, full recompute each step
    seq = list(rng_ids[37])
    gen, margins = [], []
    with torch.no_grad():
        for _ in range(24):
            lg = ref(torch.tensor([seq]), use_cache=False).logits[0, -1].float()
            top = torch.topk(lg, 2)
            gen.append(int(top.indices[0]))
            margins.append(float(top.values[0] - top.values[1]))
            seq.append(gen[-1])
    man = {
        "format_version": 1, "name": name, "description": desc, "architecture": type(ref).__name__,
        "model_type": ref.config.model_type, "hf_dir": "hf", "config_file": "hf/config.json",
        "hub_config_file": "config.hub_style.json" if same else None, "weights_dtype": "bfloat16",
        "tensors": {k: {"shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", "")}
                    for k, v in load_file(os.path.join(hf, "model.safetensors")).items()},
        "init": {"torch_manual_seed": seed, "matrices": "transformers default init (normal, std=initializer_range)",
                 "perturbed_1d_params": perturbed, "perturbation": f"+ N(0, 0.1^2), generator seed {seed + 1}"},
        "config_class": cls_name, "config_args": kwargs,
        "rope": rope,
        "compute": {"dtype": "float32 (bf16 checkpoint upcast)", "device": "cpu", "attn_implementation": "eager",
                    "use_cache": False, "position_ids": "0..T-1"},
        "cases": cases,
        "greedy": {"prompt_case": "len37", "prompt_ids": rng_ids[37], "max_new_tokens": 24, "generated_ids": gen,
                   "step_margins_top1_minus_top2": margins, "method": "argmax, full recompute without cache"},
        "residual_stream": {"case": "len37", "file": "residual_len37.f32.bin", "shape": [L + 2, 37, ref.config.hidden_size],
                            "sha256": rsha},
        "versions": {"python": sys.version.split()[0], "torch": torch.__version__,
                     "transformers": transformers.__version__, "numpy": np.__version__},
        "notes": notes,
    }
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(man, f, indent=1)
    return same


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    root = sys.argv[1]
    only = set(sys.argv[2:])  # names to build; all when none
    os.makedirs(root, exist_ok=True)
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    summary = {}
    for name, (cls_name, kwargs, seed, desc) in variants().items():
        if only and name not in only:
            continue
        try:
            summary[name] = {"ok": True, "hub_style_equal": build(name, cls_name, kwargs, seed, desc, root)}
        except Exception as e:  # keep going: report what failed
            import traceback
            traceback.print_exc()
            summary[name] = {"ok": False, "error": repr(e)}
    total = 0
    for dp, _, fns in os.walk(root):
        for fn in fns:
            total += os.path.getsize(os.path.join(dp, fn))
    summary["total_bytes"] = total
    with open(os.path.join(root, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))
    if total > 2 * 1000 * 1000:
        print(f"warning: {total} bytes, over the 2 MB budget")


if __name__ == "__main__":
    main()
