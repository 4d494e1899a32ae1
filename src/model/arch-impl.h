/* model/arch-impl.h: the architecture table's row types, shared by model/arch.c (the description
 * and the tensor specs) and model/bind.c (binding a tensor source to the specs). Private to model/. */
#ifndef TM_MODEL_ARCH_IMPL_H
#define TM_MODEL_ARCH_IMPL_H

#include "model/model.h"

typedef enum {
    SW_NONE, SW_ALL, SW_QWEN,
    SW_GEMMA2,  /* layer_types, else every other layer from layer 0 (Gemma 2, GPT-OSS) */
    SW_GEMMA3, SW_SMOLLM3, SW_QWEN2MOE, SW_EXAONE4, SW_NEO,
    SW_TYPES,   /* layer_types, else every layer (Ministral) */
    SW_OLMO3,   /* layer_types, else every 4th layer global */
    SW_COHERE2, /* layer_types, else sliding_window_pattern (default 4); only the sliding layers take RoPE */
    SW_DOTS1,   /* layer_types, else the layers from max_window_layers (default 62) on; no use_sliding_window */
} sw_mode;
typedef enum { AB_CONFIG, AB_QKV, AB_NONE } bias_mode;
typedef enum { MOE_NONE, MOE_QWEN3, MOE_MIXTRAL, MOE_QWEN2, MOE_OLMOE, MOE_GRANITE, MOE_GPT_OSS, MOE_DEEPSEEK, MOE_ERNIE } moe_mode;

/* Tensor names under the decoder's prefix (head: next to the decoder, see build_specs). */
typedef struct arch_names {
    const char *layers;                         /* "layers", GPT-2's "h" */
    const char *embed, *final_norm, *head;
    const char *attn_norm, *ffn_norm;           /* in layers.N */
    const char *attn, *q, *k, *v, *qkv, *o;     /* layers.N.<attn>.<q> ... */
    const char *mlp, *gate, *up, *down;         /* layers.N.<mlp>.<up> ... (mlp NULL: layers.N.<up>) */
    const char *pos;                            /* learned positions (GPT-2, OPT), or NULL */
} arch_names;

/* The LayerNorm families (the rest is set by resolve_ln) */
typedef struct ln_family {
    const char *eps_key;     /* "layer_norm_eps" or "norm_epsilon" */
    tm_act act;              /* when hidden_act is absent */
    double prf;              /* partial_rotary_factor when absent */
} ln_family;

typedef struct arch_info {
    const char *cls;         /* architectures[0] */
    const char *model_type;  /* fallback when architectures is absent */
    tm_arch arch;
    int tie;                 /* default tie_word_embeddings */
    double eps;              /* default rms_norm_eps */
    double theta;            /* default rope_theta */
    int max_pos;             /* default max_position_embeddings */
    int head_dim;            /* default head_dim, 0: hidden / heads */
    bias_mode bias;          /* AB_CONFIG: attention_bias → q,k,v,o; AB_QKV: q,k,v always */
    int mlp_bias;            /* mlp_bias key honoured */
    int qk_norm;
    int gemma;               /* 1, 2 or 3: (1 + w) norms, scaled embedding; 2 and 3 also sandwich norms,
                                hidden_activation, query_pre_attn_scalar, softcaps */
    int fused;               /* Phi-3 fused qkv and gate_up */
    sw_mode sw;
    int sw_default;          /* sliding_window when the key is absent */
    moe_mode moe;
    const char *prefix;      /* tensor name prefix of the decoder */
    const arch_names *names; /* NULL: Llama's */
    const ln_family *ln;     /* NULL: RMSNorm */
} arch_info;

/* the table row of m's architecture */
const arch_info *tm_arch_info_of(const tm_model *m);

/* the tensor names of a row (Llama's where it has none of its own) */
const arch_names *tm_arch_names(const arch_info *ai);

/* m->spec from the description (again after the binder changes m->prefix) */
int tm_arch_build_specs(tm_model *m, tm_err *err);

#endif
