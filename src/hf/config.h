/* hf/config.h: config.json of a Hugging Face causal LM, parsed into typed
 * fields. No architecture knowledge lives here: every field records whether
 * it was absent, null or set, and model/arch.c applies each architecture's
 * defaults and rules.
 *
 *   tm_hf_config c;
 *   if (tm_hf_config_load(&c, "models/x/config.json", &err) != TM_OK) ...;
 *   if (c.hidden_size.state == TM_CFG_SET) ... c.hidden_size.v ...
 *   tm_hf_config_free(&c);
 *
 * Both key styles are read: Hub style (rope_theta, rope_scaling with
 * rope_type or type, torch_dtype) and transformers 5 (rope_parameters, flat
 * or nested by layer type {"full_attention": {...}, "sliding_attention":
 * {...}}, dtype). A config of Gemma3ForConditionalGeneration is read from its
 * "text_config" (architecture and dtype come from the top level if absent
 * there).
 *
 * Type errors are reported here (TM_E_INVALID naming the file and the field):
 * a string where a number is needed, a non-integer where an integer is
 * needed, an unknown layer type. Range checks are arch.c's. */
#ifndef TM_HF_CONFIG_H
#define TM_HF_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

enum { TM_CFG_ABSENT = 0, TM_CFG_NULL = 1, TM_CFG_SET = 2 };

typedef struct tm_cfg_int { int state; int64_t v; } tm_cfg_int;
typedef struct tm_cfg_num { int state; double v; } tm_cfg_num;
typedef struct tm_cfg_bool { int state; int v; } tm_cfg_bool;

/* A RoPE parameter dict (rope_scaling or rope_parameters, or one layer type's). */
typedef struct tm_hf_rope_params {
    int present;                    /* a dict was given */
    char rope_type[24];             /* "rope_type" or legacy "type"; "" if neither */
    tm_cfg_num rope_theta, factor, low_freq_factor, high_freq_factor;
    tm_cfg_num beta_fast, beta_slow, mscale, mscale_all_dim, attention_factor;
    tm_cfg_num partial_rotary_factor;
    tm_cfg_int original_max_position_embeddings;
    tm_cfg_bool truncate;
    float *short_factor, *long_factor; /* longrope lists, [n_short] / [n_long] */
    int n_short, n_long;
} tm_hf_rope_params;

#define TM_CFG_MAX_EOS 16

typedef struct tm_hf_config {
    char name[256];                 /* file name used in messages, e.g. "config.json" */
    char architecture[64];          /* architectures[0] */
    char model_type[32];
    int text_config;                /* fields were read from "text_config" */

    tm_cfg_int vocab_size, hidden_size, intermediate_size, num_hidden_layers;
    tm_cfg_int num_attention_heads, num_key_value_heads, head_dim;
    tm_cfg_int max_position_embeddings, original_max_position_embeddings;
    tm_cfg_int sliding_window, sliding_window_pattern, max_window_layers;
    tm_cfg_int num_experts, num_local_experts, num_experts_per_tok, moe_intermediate_size;
    tm_cfg_int decoder_sparse_step, bos_token_id;
    tm_cfg_int no_rope_layer_interval; /* SmolLM3 */
    tm_cfg_int shared_expert_intermediate_size; /* Qwen2-MoE */
    int eos_ids[TM_CFG_MAX_EOS], n_eos;

    tm_cfg_num rms_norm_eps, rope_theta, rope_local_base_freq, partial_rotary_factor;
    tm_cfg_num query_pre_attn_scalar, attn_logit_softcapping, final_logit_softcapping;
    tm_cfg_num embedding_multiplier, logits_scaling, residual_multiplier, attention_multiplier; /* Granite */
    tm_cfg_num layer_norm_eps, norm_epsilon;  /* the LayerNorm families' epsilon (Phi, GPT-NeoX, StableLM; StarCoder2) */
    tm_cfg_num norm_eps;            /* Nemotron's */
    tm_cfg_int shared_intermediate_size; /* GraniteMoE-shared */
    tm_cfg_num rotary_pct, rotary_emb_base;   /* GPT-NeoX's Hub names of partial_rotary_factor, rope_theta */

    tm_cfg_bool tie_word_embeddings, attention_bias, mlp_bias, use_sliding_window, norm_topk_prob;
    tm_cfg_bool qkv_bias;           /* Qwen2-MoE */
    tm_cfg_bool use_bias;           /* StarCoder2: q/k/v/o and MLP biases */
    tm_cfg_bool use_qkv_bias;       /* StableLM */
    tm_cfg_bool use_parallel_residual; /* StableLM, GPT-NeoX */
    tm_cfg_bool qk_layernorm;       /* Phi, StableLM: refused when true */
    tm_cfg_bool scale_attn_weights, scale_attn_by_inverse_layer_idx; /* GPT-2 */
    tm_cfg_int n_embd, n_layer, n_head, n_inner, n_positions;        /* GPT-2's names of the sizes */
    tm_cfg_num layer_norm_epsilon;
    char activation_function[32];
    tm_cfg_int rotary_dim;          /* GPT-J */
    tm_cfg_num logit_scale;         /* Cohere */
    tm_cfg_bool use_qk_norm;        /* Cohere's and GLM-4.5's q/k norms */
    tm_cfg_bool attention_out_bias; /* Seed-OSS: a bias on o_proj (apart from attention_bias's q, k, v) */
    tm_cfg_int ffn_dim, word_embed_proj_dim;                          /* OPT */
    tm_cfg_bool do_layer_norm_before, enable_bias, remove_final_layer_norm, layer_norm_elementwise_affine;
    tm_cfg_int num_kv_heads, num_ln_in_parallel_attn, ffn_hidden_size;                     /* Falcon */
    tm_cfg_bool multi_query, parallel_attn, new_decoder_architecture, bias, alibi;
    char activation[32];
    tm_cfg_int n_embed;             /* BLOOM's name of hidden_size */
    tm_cfg_bool apply_residual_connection_post_layernorm; /* BLOOM: refused when true */
    tm_cfg_int d_model, n_heads, n_layers, expansion_ratio, max_seq_len; /* MPT's names of the sizes */
    tm_cfg_bool no_bias;            /* MPT */
    struct {                        /* MPT's attn_config dict (its alibi key is not read: transformers'
                                       MptModel always applies ALiBi) */
        tm_cfg_bool qk_ln;
        tm_cfg_num clip_qkv, softmax_scale;
    } attn_config;
    tm_cfg_num clip_qkv;            /* OLMo */
    /* DeepSeek-V2/V3: multi-head latent attention and their MoE */
    tm_cfg_int q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
    tm_cfg_int n_routed_experts, n_shared_experts, first_k_dense_replace, n_group, topk_group;
    tm_cfg_int moe_num_experts, moe_k, moe_num_shared_experts; /* ERNIE 4.5 MoE's names */
    tm_cfg_int moe_layer_start_index, moe_layer_end_index, moe_layer_interval;
    tm_cfg_num routed_scaling_factor;
    tm_cfg_bool rope_interleave;
    char topk_method[32], scoring_func[16];
    tm_cfg_int num_layers, num_heads, window_size; /* GPT-Neo */
    int n_neo_local;
    uint8_t *neo_local;             /* [n_neo_local] GPT-Neo's attention_layers (or attention_types expanded):
                                       1 = "local" (window_size), 0 = "global" */

    char hidden_act[32];            /* "" if absent or null */
    char hidden_activation[32];
    char dtype[16];                 /* torch_dtype or dtype, "" if absent */

    tm_hf_rope_params rope_scaling;      /* Hub style */
    tm_hf_rope_params rope_parameters;   /* transformers 5, flat */
    tm_hf_rope_params rope_full, rope_sliding; /* transformers 5, nested by layer type */
    int rope_nested;

    int n_layer_types;              /* length of layer_types, 0 if absent */
    uint8_t *layer_sliding;         /* [n_layer_types] 1 = "sliding_attention" */
    int n_mlp_layer_types;          /* length of mlp_layer_types, 0 if absent */
    uint8_t *mlp_sparse;            /* [n_mlp_layer_types] 1 = "sparse" (the layer's MLP is experts), 0 = "dense" */
    int n_mlp_only;
    int *mlp_only_layers;           /* [n_mlp_only] */
    char sw_pattern_str[64];        /* EXAONE 4: sliding_window_pattern as "LLLG" ('L' local, 'G' global) */
    int n_no_rope;
    int *no_rope_layers;            /* [n_no_rope] SmolLM3: 1 = the layer uses RoPE, 0 = none */
} tm_hf_config;

/* Limits on list lengths, so that a hostile file cannot make us allocate much. */
#define TM_CFG_MAX_LIST 65536

int tm_hf_config_parse(tm_hf_config *c, const char *text, size_t len, const char *name, tm_err *err);
int tm_hf_config_load(tm_hf_config *c, const char *path, tm_err *err);
void tm_hf_config_free(tm_hf_config *c);

#endif
