/* model/model.h: the architecture table's output, one uniform description of
 * a decoder-only transformer (hyper-parameters, per-layer attention kind and
 * RoPE, the tensors it needs with their shapes) plus the bound weights.
 *
 *   tm_hf_config cfg;                        // hf/config.h
 *   tm_hf_config_load(&cfg, "dir/config.json", &err);
 *   tm_model *m;
 *   tm_model_init(&m, &cfg, &err);           // description only, no weights
 *   tm_hf_config_free(&cfg);
 *   tm_tensor_source src = {ctx, my_lookup, 0};
 *   tm_model_bind(m, &src, &err);            // every required tensor, shape and dtype checked
 *   ... m->D, m->layer[l].sliding, m->w[l].wq.data ...
 *   tm_model_free(m);
 * (hf/hf_model.h's tm_hf_model_open does all of this for a HF directory.)
 *
 * Supported architectures: the table in model/arch.c (docs/models.md lists
 * them with what each changes).
 *
 * THE OP SEQUENCE (every engine computes exactly this; float32 reference in
 * engine/ref). norm(v, w, b) is the model's norm kind:
 *   TM_NORM_RMS:   v * 1/sqrt(mean(v²) + eps) * (norm_add_one ? 1 + w : w)
 *   TM_NORM_LAYER: (v - mean(v)) * 1/sqrt(var(v) + eps) * w + b   (var biased; b absent: 0; norm_plain,
 *                  OLMo's: w = 1, no b)
 * (written rmsnorm below where only RMS families use it).
 *
 *   x[T][D] = embed[tok] * embed_scale              (embed_scale: Gemma's sqrt(D) in the declared dtype,
 *                                                    Granite's embedding_multiplier, else 1)
 *             + pos_embed[pos + pos_offset]         (learned positions, pos < max_pos: GPT-2's, OPT's with
 *                                                    offset 2; their layers have no RoPE)
 *   x = norm(x, embed_norm, embed_norm_b)           (BLOOM only)
 *   for each layer l (desc layer[l], weights w[l]):
 *     x0 = x                                        (parallel: both branches read it)
 *     h = norm(x, attn_norm, attn_norm_b)           (pre_norms 0, OLMo 2: h = x)
 *     q = h·wqᵀ + bq   [T][H*Dh];  k = h·wkᵀ + bk, v = h·wvᵀ + bv   [T][Hk*Dh]
 *         (fused_qkv: one matrix wqkv [(H+2Hk)*Dh][D] (+ bqkv), rows Q then K then V;
 *          qkv_interleaved: rows grouped by kv head, [Hk][H/Hk + 2][Dh] = its q heads, k, v: GPT-NeoX
 *          (H = Hk: q_h, k_h, v_h), Falcon's new decoder, BLOOM; tm_qkv_row)
 *     clip_qkv: q, k, v = clamp(q, k, v, -clip_qkv, clip_qkv)   (OLMo, MPT)
 *     qk_norm 1: each head of q and k: norm over Dh with q_norm / k_norm (qk_norm_heads: head h's own row of
 *                them) and q_norm_b / k_norm_b (qk_norm_bias)
 *     qk_norm 2: all of q, and all of k: rmsnorm over H*Dh / Hk*Dh (OLMo 2)
 *     RoPE (rope[layer[l].rope]; none where it is -1) on the first rot_dim dims of every q and k head,
 *         "rotate-half": dim i pairs with i + rot_dim/2; angle = f32(pos * inv_freq[i]);
 *         c = cos(angle) * attn_scaling, s = sin(angle) * attn_scaling;
 *         y[i] = x[i]·c - x[i+h]·s,  y[i+h] = x[i+h]·c + x[i]·s  (h = rot_dim/2)
 *     per query head qh (kv head qh / (H/Hk)), query at position i, key at j:
 *         s_j = (q·k_j) * attn_scale;  attn_softcap: s_j = tanh(s_j / c) * c
 *         alibi: s_j += alibi[qh] * (j - i)         (BLOOM, MPT: no RoPE)
 *         allowed: j <= i, and i - j < window if layer[l].sliding
 *         o = softmax(s) · V
 *         attn_sinks: o = Σ_j e^(s_j) v_j / (Σ_j e^(s_j) + e^(sinks[qh]))   (GPT-OSS: a learned logit per head
 *                     in the softmax's sum, with no value)
 *     mla (DeepSeek-V2/V3, multi-head latent attention), in its absorbed form: one kv head (Hk = 1) of
 *     Dh = qk_rope + kv_lora dims holding the latent, which is what the KV cache keeps:
 *         q = q_lora ? rmsnorm(h·q_aᵀ + bqa, q_a_norm)·wqᵀ : h·wqᵀ     [T][H][qk_rope + qk_nope], each head
 *             [rope | nope] as bound (the checkpoint's [nope | rope], its rope dims in interleaved pairs where
 *             mla_interleave, is reordered at bind; kv_a's rope rows likewise)
 *         ckv = h·kv_aᵀ + bkva  [T][kv_lora + qk_rope];  c = rmsnorm(ckv[:kv_lora], kv_a_norm)
 *         UK_h = kv_b rows [h (qk_nope + v_dim), + qk_nope)  [qk_nope][kv_lora];  UV_h = the next v_dim rows
 *         q'_h = [q_h[:rope] | q_h[rope:]·UK_h]  [H][Dh];  k' = [ckv[kv_lora:] | c],  v' = [c | 0]  [1][Dh]
 *         RoPE on the first qk_rope dims of q'_h and k'; attention as above (scale (qk_nope + qk_rope)^-0.5)
 *         o_h = o'_h[:kv_lora]·UV_hᵀ   [T][H][v_dim]
 *         (q'·k' = q_rope·k_rope + q_nope·(UK c): transformers' per-head k = [kv_b(c)_nope | k_rope] and
 *         v = kv_b(c)_v give the same attention)
 *     a = o·woᵀ + bo                                [T][D]
 *     post_attn_norm (Gemma, OLMo 2): a = rmsnorm(a, attn_out_norm)
 *     x = x + a * residual_scale                    (Granite's residual_multiplier, else 1)
 *     h = norm(x, ffn_norm, ffn_norm_b)             (pre_norms 0: h = x; parallel: norm(x0, ...),
 *                                                    where parallel 1 shares the attention's norm)
 *     dense:  f = (act(h·wgᵀ + bg) ⊙ (h·wuᵀ + bu))·wdᵀ + bd
 *             (fused_gate_up: one matrix w_gate_up [2F][D], rows gate then up;
 *              gated 0: no gate, f = act(h·wuᵀ + bu)·wdᵀ + bd)
 *     moe:    r = softmax(h·routerᵀ + router_b) over E experts (f32); take the top_k
 *             (norm_topk_prob: divide them by their sum; router_b: GPT-OSS's, else 0);
 *             DeepSeek: r = sigmoid(h·routerᵀ) (router_sigmoid, V3) or the softmax; the choice is by
 *             r + router_corr (V3's e_score_correction_bias, else 0) among the experts of the topk_group
 *             best of n_group equal groups (a group's score: the sum of its 2 best (group_top2, V3) or its
 *             best); the weights are r of the chosen (norm_topk_prob: over their sum) × routed_scale;
 *             f = Σ p_e · (act(h·eg_eᵀ + egb_e) ⊙ (h·eu_eᵀ + eub_e))·ed_eᵀ + edb_e   (expert biases: GPT-OSS's,
 *                                                                                     else 0)
 *             F_shared: f += sigmoid(h·s_routerᵀ) · (act(h·s_gateᵀ) ⊙ h·s_upᵀ)·s_downᵀ  (shared_gate 0:
 *                       without the sigmoid factor, GraniteMoE)
 *     post_ffn_norm (Gemma, OLMo 2): f = rmsnorm(f, ffn_out_norm)
 *     x = x + f * residual_scale
 *   x = norm(x, final_norm, final_norm_b)
 *   logits = (x·lm_headᵀ + lm_head_b) / logits_div * logits_mul   (tied: lm_head is embed; lm_head_b: Phi's,
 *            GPT-J's, else 0; logits_div: Granite's logits_scaling, logits_mul: Cohere's logit_scale, else 1);
 *            final_softcap: tanh(l / c) * c
 *
 * act: SiLU x·sigmoid(x), GELU-tanh 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))), GELU 0.5·x·(1 + erf(x/√2)),
 *      ReLU max(x, 0) (OPT), or ReLU² max(x, 0)² (Nemotron).
 * GPT-OSS's gated form (TM_ACT_SWIGLU_OAI) replaces act(g) ⊙ u as a whole:
 *      g' = min(g, 7), u' = clamp(u, -7, 7), g'·sigmoid(1.702·g')·(u' + 1)
 *      (transformers' GptOssExperts: limit 7 and alpha 1.702 fixed; config's swiglu_limit is not read there)
 */
#ifndef TM_MODEL_MODEL_H
#define TM_MODEL_MODEL_H

#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"
#include "hf/config.h"

/* Sanity limits: a config beyond them is rejected as absurd. */
#define TM_MODEL_MAX_VOCAB 10000000
#define TM_MODEL_MAX_HIDDEN 1000000
#define TM_MODEL_MAX_LAYERS 10000
#define TM_MODEL_MAX_HEADS 65536
#define TM_MODEL_MAX_HEAD_DIM 65536
#define TM_MODEL_MAX_FF 10000000
#define TM_MODEL_MAX_EXPERTS 65536
#define TM_MODEL_MAX_GROUPS 256      /* DeepSeek's expert groups (n_group) */
#define TM_MODEL_MAX_TENSORS 262144  /* layers x tensors per layer (MoE: 3 per expert) */

/* A container of tensors (a HF directory, a package): lookup returns a view
 * whose memory stays valid as long as the container does; TM_E_NOTFOUND if
 * the name is absent (message written into err). */
typedef struct tm_tensor_source {
    void *ctx;
    int (*lookup)(void *ctx, const char *name, tm_tensor *out, tm_err *err);
    int canonical;               /* 1: tensors in the bound layout (a package); 0: as a checkpoint stores them
                                    (GPT-2's Conv1D weights [K][N] transposed, GPT-J's / Cohere's rotary pairs
                                    reordered by tm_model_bind: hf_transposed, hf_rope_pairs) */
} tm_tensor_source;

typedef enum tm_arch {
    TM_ARCH_LLAMA,
    TM_ARCH_MISTRAL,
    TM_ARCH_QWEN2,
    TM_ARCH_QWEN3,
    TM_ARCH_GEMMA,
    TM_ARCH_GEMMA2,
    TM_ARCH_GEMMA3,
    TM_ARCH_GRANITE,
    TM_ARCH_SMOLLM3,
    TM_ARCH_OLMO2,
    TM_ARCH_EXAONE4,
    TM_ARCH_PHI3,
    TM_ARCH_QWEN3_MOE,
    TM_ARCH_QWEN2_MOE,
    TM_ARCH_MIXTRAL,
    TM_ARCH_PHI,
    TM_ARCH_STARCODER2,
    TM_ARCH_STABLELM,
    TM_ARCH_GPT_NEOX,
    TM_ARCH_GPT2,
    TM_ARCH_COHERE,
    TM_ARCH_GPTJ,
    TM_ARCH_OPT,
    TM_ARCH_FALCON,
    TM_ARCH_BLOOM,
    TM_ARCH_MPT,
    TM_ARCH_GPT_BIGCODE,
    TM_ARCH_GPT_NEO,
    TM_ARCH_OLMO,
    TM_ARCH_OLMO3,
    TM_ARCH_MINISTRAL,
    TM_ARCH_GLM,
    TM_ARCH_GLM4,
    TM_ARCH_COHERE2,
    TM_ARCH_OLMOE,
    TM_ARCH_NEMOTRON,
    TM_ARCH_GRANITEMOE,
    TM_ARCH_GRANITEMOE_SHARED,
    TM_ARCH_PERSIMMON,
    TM_ARCH_ARCEE,
    TM_ARCH_ERNIE4_5,
    TM_ARCH_CODEGEN,
    TM_ARCH_GPT_OSS,
    TM_ARCH_DEEPSEEK_V2,
    TM_ARCH_DEEPSEEK_V3,
    TM_ARCH_GLM4_MOE,
    TM_ARCH_GLM4_MOE_LITE,
    TM_ARCH_SEED_OSS,
    TM_ARCH_ERNIE4_5_MOE,
    TM_ARCH_DOTS1,
} tm_arch;

typedef enum tm_norm_kind { TM_NORM_RMS, TM_NORM_LAYER } tm_norm_kind;

typedef enum tm_act { TM_ACT_SILU, TM_ACT_GELU_TANH, TM_ACT_GELU, TM_ACT_RELU, TM_ACT_RELU2, TM_ACT_SWIGLU_OAI } tm_act;
/* GELU: the exact (erf) one; RELU2: max(x, 0)²; SWIGLU_OAI: GPT-OSS's clamped gate ⊙ (up + 1), above */
#define TM_SWIGLU_OAI_LIMIT 7.0f
#define TM_SWIGLU_OAI_ALPHA 1.702f

typedef enum tm_rope_type {
    TM_ROPE_DEFAULT,
    TM_ROPE_LINEAR,
    TM_ROPE_LLAMA3,
    TM_ROPE_YARN,
    TM_ROPE_LONGROPE,
} tm_rope_type;

/* One rotary embedding (a model has one, or one per layer type for Gemma 3). */
typedef struct tm_rope {
    tm_rope_type type;
    double theta;                /* base */
    int rot_dim;                 /* rotated dims per head: even, <= Dh (int(Dh * partial_rotary_factor)) */
    double factor;               /* linear / llama3 / yarn / longrope (0: yarn/longrope derive it
                                    from max_position_embeddings / original_max_pos) */
    double low_freq_factor, high_freq_factor;  /* llama3 */
    int64_t original_max_pos;    /* llama3 / yarn / longrope */
    double beta_fast, beta_slow, mscale, mscale_all_dim; /* yarn */
    int truncate;                /* yarn: floor/ceil the correction range */
    int has_attention_factor;    /* yarn / longrope: attention_factor given in the config */
    double attention_factor;
    float attn_scaling;          /* multiplies cos and sin (yarn, longrope), 1 otherwise */
    float *inv_freq;             /* [rot_dim/2] float32, exactly as transformers computes it */
    float *inv_freq_long;        /* [rot_dim/2] longrope only: used by a forward call whose
                                    positions reach original_max_pos or beyond; NULL otherwise */
} tm_rope;

typedef struct tm_layer_desc {
    int sliding;                 /* 1: keys j with i - j < window only */
    int window;
    int rope;                    /* index into tm_model.rope; -1: no RoPE on this layer (SmolLM3's NoPE) */
    int moe;                     /* 1: mixture-of-experts FFN, 0: dense */
} tm_layer_desc;

/* Weights of one layer; a field the architecture lacks has data == NULL. */
typedef struct tm_layer_weights {
    tm_tensor attn_norm;         /* [D] */
    tm_tensor attn_norm_b;       /* [D] LayerNorm bias (norm_bias) */
    tm_tensor wq, wk, wv;        /* [H*Dh][D], [Hk*Dh][D], [Hk*Dh][D] (MLA: wq [H*(qk_nope + qk_rope)][q_lora or D], no wk, wv) */
    tm_tensor q_a, q_a_b, q_a_norm; /* MLA: [q_lora][D], [q_lora] (attention_bias), [q_lora] */
    tm_tensor kv_a, kv_a_b;      /* MLA: [kv_lora + qk_rope][D], [kv_lora + qk_rope] (attention_bias) */
    tm_tensor kv_a_norm;         /* MLA: [kv_lora] */
    tm_tensor kv_b;              /* MLA: [H*(qk_nope + v_dim)][kv_lora] */
    tm_tensor wqkv;              /* [(H+2Hk)*Dh][D] fused (Phi-3, GPT-2; GPT-NeoX, Falcon: qkv_interleaved) */
    tm_tensor bqkv;              /* [(H+2Hk)*Dh] its bias (GPT-NeoX, Falcon, GPT-2), in its row order */
    tm_tensor bq, bk, bv;        /* [H*Dh], [Hk*Dh], [Hk*Dh] */
    tm_tensor q_norm, k_norm;    /* [Dh] (qk_norm_heads: [H][Dh], [Hk][Dh]; qk_norm 2: [H*Dh], [Hk*Dh]) */
    tm_tensor q_norm_b, k_norm_b; /* [Dh] LayerNorm biases (qk_norm_bias) */
    tm_tensor wo;                /* [D][H*Dh] */
    tm_tensor bo;                /* [D] */
    tm_tensor sinks;             /* [H] attention sinks (attn_sinks) */
    tm_tensor attn_out_norm;     /* [D] Gemma post_attention_layernorm */
    tm_tensor ffn_norm;          /* [D] (parallel 1: the attention's norm again) */
    tm_tensor ffn_norm_b;        /* [D] LayerNorm bias */
    tm_tensor ffn_out_norm;      /* [D] Gemma post_feedforward_layernorm */
    tm_tensor w_gate, w_up;      /* [F][D] (gated 0: no w_gate) */
    tm_tensor w_gate_up;         /* [2F][D] fused (Phi-3) */
    tm_tensor w_down;            /* [D][F] */
    tm_tensor b_gate, b_up, b_down; /* [F], [F], [D] */
    tm_tensor router;            /* [E][D] */
    tm_tensor router_b;          /* [E] (expert_bias) */
    tm_tensor router_corr;       /* [E] DeepSeek-V3's e_score_correction_bias (any float dtype) */
    tm_tensor *e_gate, *e_up;    /* [E] each [Fe][D] */
    tm_tensor *e_down;           /* [E] each [D][Fe] */
    tm_tensor *e_gate_b, *e_up_b; /* [E] each [Fe] (expert_bias; NULL arrays otherwise) */
    tm_tensor *e_down_b;         /* [E] each [D] */
    tm_tensor s_gate, s_up;      /* [Fs][D] the shared expert (Qwen2-MoE) */
    tm_tensor s_down;            /* [D][Fs] */
    tm_tensor s_router;          /* [1][D] its gate: f *= sigmoid(h·s_routerᵀ) */
} tm_layer_weights;

/* What a tensor is, so a converter knows what it may quantize. */
typedef enum tm_tensor_kind {
    TM_TK_MATRIX,                /* a linear weight [N][K], used as x·Wᵀ */
    TM_TK_EMBED,                 /* the embedding [V][D] (rows are gathered; also the tied lm_head) */
    TM_TK_VECTOR,                /* norm weights and biases */
} tm_tensor_kind;

typedef struct tm_tensor_spec {
    char name[128];              /* checkpoint name, e.g. "model.layers.0.self_attn.q_proj.weight" */
    int ndim;
    int64_t shape[TM_MAX_DIMS];
    tm_tensor_kind kind;
    int hf_transposed;           /* stored [K][N] in a HF checkpoint (GPT-2's Conv1D); shape[] is [N][K] */
    int hf_rope_pairs;           /* rot_dim, 0 if none: a q / k projection (rows, or a bias's elements) whose
                                    rotary dims pair up interleaved in a HF checkpoint (i with i + 1: GPT-J,
                                    Cohere); bound reordered, head by head, so that rotate-half pairs them
                                    (even dims first, then odd; q·k is unchanged) */
    int hf_mla;                  /* MLA rows as the checkpoint stores them, reordered at bind (model.h's mla): 1 the
                                    q projection's (each head [nope | rope] -> [rope | nope]), 2 kv_a's (its rope
                                    rows); the rope pairs de-interleaved where m->mla_interleave */
    int any_float;               /* any of f32 / f16 / bf16, whatever the declared dtype (V3's correction bias) */
    int hf_lead1;                /* a vector stored [1][n] in a HF checkpoint (ERNIE 4.5's correction bias) */
    int hf_codegen;              /* CodeGen's fused qkv_proj: rows in 4 blocks of (q, v, k) quarters; bound as rows
                                    Q, K, V (and q / k's rotary pairs as hf_rope_pairs) */
    tm_tensor *slot;             /* where tm_model_bind puts it */
} tm_tensor_spec;

typedef struct tm_model {
    tm_arch arch;
    const char *arch_name;       /* "LlamaForCausalLM", ... */
    char model_type[32];
    int V, D, L, H, Hk, Dh, F;   /* vocab, hidden, layers, heads, kv heads, head dim, ffn */
    float eps;                   /* the norms' epsilon (as f32, as torch adds it) */
    tm_norm_kind norm;           /* every norm of the model: RMSNorm, or LayerNorm (Phi, StarCoder2, ...) */
    int norm_bias;               /* LayerNorm with bias tensors (attn_norm_b, ffn_norm_b, final_norm_b) */
    int norm_add_one;            /* Gemma: weight is 1 + w */
    int gated;                   /* 1: act(gate) ⊙ up; 0: act(up) alone (Phi, StarCoder2, GPT-NeoX, GPT-2, ...) */
    int parallel;                /* 0: the FFN reads x after the attention's add; 1: both branches read the
                                    layer's input, one norm (Phi, StableLM, GPT-J, Cohere, Falcon); 2: the same
                                    with two norms (GPT-NeoX, Falcon's new decoder) */
    int qkv_interleaved;         /* fused qkv rows grouped by kv head (GPT-NeoX, Falcon's new decoder; tm_qkv_row) */
    int lm_head_bias;            /* lm_head_b (Phi, GPT-J) */
    int norm_plain;              /* norms without weight or bias (OLMo): tm_model_bind points every norm at ones */
    float clip_qkv;              /* > 0: q, k, v clamped to [-clip_qkv, clip_qkv] after their projections (OLMo,
                                    MPT); 0: none */
    float *alibi;                /* [H] ALiBi slopes (BLOOM, MPT; their layers take no RoPE), or NULL */
    int attn_sinks;              /* every layer has sinks [H] (GPT-OSS) */
    int mla;                     /* multi-head latent attention (DeepSeek-V2/V3: the "mla" lines above; Hk = 1,
                                    Dh = qk_rope + kv_lora, the latent's head) */
    int q_lora, kv_lora, qk_nope, qk_rope, v_dim; /* its sizes (q_lora 0: a plain q projection) */
    int mla_interleave;          /* the checkpoint's rope dims pair interleaved (2i, 2i + 1) */
    float mla_eps;               /* q_a_norm's and kv_a_norm's epsilon: 1e-6 whatever rms_norm_eps says (transformers
                                    builds them with DeepseekV3RMSNorm's default; GLM-4.7-Flash's config has 1e-5) */
    int qkv_bias, o_bias, mlp_bias;
    int qk_norm;                 /* 1: the model's norm on each q / k head (w [Dh]); 2: on the whole q / k
                                    projection (OLMo 2: w [H*Dh], [Hk*Dh]) */
    int qk_norm_heads;           /* qk_norm 1 with a weight per head: q_norm [H][Dh], k_norm [Hk][Dh] (Cohere's
                                    use_qk_norm, StableLM's qk_layernorm) */
    int qk_norm_bias;            /* q_norm_b, k_norm_b [Dh] (Phi's qk_layernorm, Persimmon) */
    int fused_qkv, fused_gate_up;
    int tied;                    /* lm_head is the embedding */
    int headless;                /* the checkpoint holds no output head though untied (a base model's, as an
                                    embedding model's: Qwen3-Embedding-4B/8B): bound as tied, for the engines'
                                    sake; the runtime embeds with it but refuses to generate */
    int post_attn_norm, post_ffn_norm; /* Gemma's sandwich norms, OLMo 2's only ones */
    int pre_norms;               /* 1: the attention and the FFN take RMSNorm(x) (all but OLMo 2); 0: x itself */
    tm_act act;
    float embed_scale;           /* 1, or Gemma's sqrt(D) rounded to the declared dtype (bf16: 11.3125 for
                                    D = 128), as transformers computes it for a checkpoint loaded in its dtype */
    float attn_scale;            /* multiplies q·k: Dh^-0.5 or query_pre_attn_scalar^-0.5, as f32 */
    float attn_softcap;          /* 0 = none */
    float final_softcap;         /* 0 = none */
    float residual_scale;        /* multiplies each branch before its residual add (Granite), 1 otherwise */
    float logits_div;            /* logits are divided by it (Granite's logits_scaling), 1 otherwise */
    float logits_mul;            /* and multiplied by it (Cohere's logit_scale), 1 otherwise */
    int max_pos;                 /* max_position_embeddings */
    int bos_id;                  /* -1 if none */
    int eos_ids[16], n_eos;
    tm_dtype dtype;              /* declared torch_dtype / dtype */
    int has_dtype;
    int check_dtype;             /* bind rejects plain-dtype tensors that differ from dtype (default 1) */

    /* mixture of experts (n_experts == 0: dense) */
    int n_experts, top_k, F_expert, norm_topk_prob;
    int F_shared;                /* a shared expert (0: none): Qwen2-MoE's behind a sigmoid gate, GraniteMoE's without */
    int shared_gate;             /* 1: the shared expert is scaled by sigmoid(h·s_router) (Qwen2-MoE) */
    int expert_bias;             /* the router and every expert's three projections have biases (GPT-OSS) */
    int router_sigmoid;          /* DeepSeek-V3: sigmoid scores (+ router_corr for the choice), else softmax */
    int router_has_corr;         /* router_corr is bound: the choice is by score + it (V3, GLM-4.5: sigmoid scores;
                                    ERNIE 4.5: the softmax's) */
    int n_group, topk_group;     /* DeepSeek: experts chosen among the topk_group best of n_group groups (1, 1: all) */
    int group_top2;              /* a group's score: the sum of its 2 best (V3), else its best (V2) */
    float routed_scale;          /* the routed experts' weights x routed_scaling_factor (DeepSeek), else 1 */

    tm_rope rope[2];
    int n_rope;
    tm_layer_desc *layer;        /* [L] */

    /* weights, filled by tm_model_bind */
    char prefix[48];             /* "model." or "language_model.model." */
    tm_tensor embed;             /* [V][D] */
    tm_tensor embed_norm;        /* [D] a LayerNorm on the embedding (BLOOM's word_embeddings_layernorm), or none */
    tm_tensor embed_norm_b;      /* [D] its bias */
    tm_tensor pos_embed;         /* [max_pos + pos_offset][D] learned positions (GPT-2, OPT), or none */
    int pos_offset;              /* row of position 0 in pos_embed (OPT: 2) */
    tm_tensor final_norm;        /* [D] */
    tm_tensor final_norm_b;      /* [D] (norm_bias) */
    tm_tensor lm_head;           /* [V][D] (a copy of embed when tied) */
    tm_tensor lm_head_b;         /* [V] (lm_head_bias) */
    tm_layer_weights *w;         /* [L] */
    int bound;

    tm_tensor_spec *spec;        /* [n_spec] required tensors */
    int n_spec;

    struct tm_owned {            /* [n_owned] tensors tm_model_bind made (transposed copies, experts), freed with m */
        void *p;                 /* anonymous mappings of n bytes: views may point inside them (per-expert rows) */
        size_t n;
        int once;                /* each byte is read by one spec only (experts): tm_model_release may drop it */
        struct tm_fill {         /* an expert copy not yet written (lazy_copies): tm_model_fill writes it */
            int kind;            /* 0: written; 1: a transposing copy; 2: MXFP4 dequantized (bind.c) */
            const void *a, *b;   /* the source's data (MXFP4: blocks, scales) */
            int64_t E, R, K;
            int il;
            size_t es;
        } fill;
    } *owned;
    int n_owned;
    int lazy_copies;             /* set before bind: expert copies are written when tm_model_fill asks (a
                                    converter, one layer at a time), not all at bind */
    void *owner;                 /* memory behind the tensors, released by owner_free */
    void (*owner_free)(void *owner);
} tm_model;

/* tm_qkv_row: the row of the fused qkv weight (the element of its bias) holding dim d of head h of
 * part p (0 q, 1 k, 2 v): Q rows, then K, then V; or (qkv_interleaved) grouped by kv head,
 * [Hk][H/Hk + 2][Dh]: kv head g's H/Hk q heads, its k, its v. */
static inline int64_t tm_qkv_row(const tm_model *m, int p, int h, int d)
{
    int64_t Dh = m->Dh, qpk = m->H / m->Hk;
    if (!m->qkv_interleaved) return (p == 0 ? 0 : m->H + (int64_t)(p - 1) * m->Hk) * Dh + (int64_t)h * Dh + d;
    int64_t g = p == 0 ? h / qpk : h, j = p == 0 ? h % qpk : qpk + p - 1;
    return (g * (qpk + 2) + j) * Dh + d;
}

/* tm_model_init: build the description from a parsed config. Errors:
 * TM_E_UNSUPPORTED (unknown architecture, rope type, activation) or
 * TM_E_INVALID (missing or absurd field), naming the config file and field. */
int tm_model_init(tm_model **out, const tm_hf_config *cfg, tm_err *err);

/* tm_model_bind: look up every tensor of m->spec in src, checking shape and
 * dtype (F32/F16/BF16, or a quantized encoding for TM_TK_MATRIX/EMBED
 * tensors). Tensors in src that are not needed are ignored. */
int tm_model_bind(tm_model *m, const tm_tensor_source *src, tm_err *err);

/* tm_model_fill: with lazy_copies, the copy p points into written if it is not yet (a converter calls it
 * before reading a tensor's data); else nothing. */
void tm_model_fill(const tm_model *m, const void *p);

/* tm_model_release: a converter done with the tensor data [p, p + n) hands back its memory: the
 * source's mapped pages around it are dropped (a later touch reads the file again), and so are
 * the whole pages inside it of a copy whose bytes one spec reads (an expert's rows; gpt-oss's
 * dequantized experts would otherwise all stay resident); other copies stay. */
void tm_model_release(const tm_model *m, const void *p, size_t n);

/* tm_model_set_owner: m releases owner with owner_free in tm_model_free. */
void tm_model_set_owner(tm_model *m, void *owner, void (*owner_free)(void *));
void tm_model_free(tm_model *m);

/* tm_rope_inv_freq_at: the inverse frequencies a forward call whose last
 * position is max_pos_plus_1 - 1 uses: LongRoPE's long factors when
 * max_pos_plus_1 > original_max_pos (as transformers decides per call), else
 * inv_freq. */
const float *tm_rope_inv_freq_at(const tm_rope *r, int64_t max_pos_plus_1);

/* tm_rope_compute: fill r->inv_freq (and inv_freq_long) and r->attn_scaling
 * from the other fields, in float32 exactly as transformers does; for
 * longrope short/long are the factor lists [rot_dim/2] (else may be NULL);
 * max_pos is the config's max_position_embeddings (yarn / longrope derive
 * their factor from it when r->factor is 0). */
int tm_rope_compute(tm_rope *r, int64_t max_pos, const float *short_factor, const float *long_factor,
                    tm_err *err);
void tm_rope_free(tm_rope *r);

const char *tm_arch_name(tm_arch a);

#endif
