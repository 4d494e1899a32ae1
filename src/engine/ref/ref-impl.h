/* engine/ref/ref-impl.h: the reference engine's state and scalar kernels
 * (private to engine/ref). */
#ifndef TM_ENGINE_REF_REF_IMPL_H
#define TM_ENGINE_REF_REF_IMPL_H

#include "engine/ref/ref.h"

/* One layer's weights in f32, stacked so that each projection is one product. */
typedef struct ref_layer {
    float *attn_norm;        /* [D] effective weight (1 + w for Gemma) */
    float *attn_norm_b;      /* [D] LayerNorm bias, or NULL */
    float *wqkv;             /* [(H+2Hk)*Dh][D]: Q rows, K rows, V rows (rows grouped by kv head, GPT-NeoX's
                                and Falcon's, are put in this order when loaded) */
    float *bqkv;             /* [(H+2Hk)*Dh] or NULL */
    /* MLA (wqkv NULL; model.h's mla): */
    float *q_a, *q_a_b, *q_a_norm; /* [ql][D], [ql] or NULL, [ql]; NULL without q_lora */
    float *wq;               /* [H*(rope + nope)][ql or D], each head's rows [rope | nope] */
    float *kv_a, *kv_a_b;    /* [kvl + rope][D], [kvl + rope] or NULL */
    float *kv_a_norm;        /* [kvl] */
    float *kv_b;             /* [H*(nope + v)][kvl]: head h's UK rows, then its UV rows */
    float *uk_t;             /* [H][kvl][nope]: each UK_h transposed (q_nope -> the latent) */
    float *q_norm, *k_norm;  /* [Dh] effective (qk_heads: [H][Dh], [Hk][Dh]; qk_whole: [H*Dh], [Hk*Dh]), or NULL */
    float *q_norm_b, *k_norm_b; /* [Dh] LayerNorm biases, or NULL */
    float *wo;               /* [D][H*Dh] */
    float *bo;               /* [D] or NULL */
    float *sinks;            /* [H] attention sinks, or NULL */
    float *attn_out_norm;    /* [D] or NULL */
    float *ffn_norm;         /* [D] */
    float *ffn_norm_b;       /* [D] or NULL */
    float *ffn_out_norm;     /* [D] or NULL */
    float *wgu;              /* dense: [2F][D], gate rows then up rows (not gated: [F][D], up) */
    float *bgu;              /* [2F] ([F]) or NULL */
    float *wd;               /* dense: [D][F] */
    float *bd;               /* [D] or NULL */
    float *router;           /* moe: [E][D] */
    float *router_corr;      /* moe: [E] DeepSeek-V3's choice bias, or NULL */
    float *router_b;         /* moe: [E], or NULL */
    float *e_gu;             /* moe: [E][2Fe][D] */
    float *e_gub;            /* moe: [E][2Fe] the experts' gate and up biases, or NULL */
    float *e_d;              /* moe: [E][D][Fe] */
    float *e_db;             /* moe: [E][D] the down biases, or NULL */
    float *s_gu;             /* moe, shared expert (Qwen2-MoE): [2Fs][D], or NULL */
    float *s_d;              /* [D][Fs] */
    float *s_router;         /* [D]: the shared expert's gate */
} ref_layer;

struct tm_ref {
    /* a copy of the description (no weights) */
    int V, D, L, H, Hk, Dh, F, E, top_k, Fe, norm_topk, Fs;
    int mla, q_lora, kv_lora, qk_nope, qk_rope, v_dim;  /* multi-head latent attention (model.h) */
    int router_sigmoid, n_group, topk_group, group_top2; /* DeepSeek's routing (model.h) */
    float routed_scale;
    float eps, mla_eps, embed_scale, attn_scale, attn_softcap, final_softcap; /* mla_eps: model.h's */
    float residual_scale, logits_div; /* Granite: branches scaled before their residual add; logits divided */
    float logits_mul;                 /* Cohere: logits multiplied */
    int qk_whole;                     /* q / k norms over the whole projection (OLMo 2), not per head */
    int qk_heads;                     /* per-head q / k norms with a weight row per head */
    tm_norm_kind norm;                /* RMSNorm or LayerNorm, every norm of the model */
    int gated, parallel;              /* model.h's switches */
    tm_act act;
    tm_rope rope[2];         /* inv_freq tables owned */
    tm_layer_desc *layer;    /* [L] */
    int max_ctx, n_threads;

    float *embed;            /* [V][D] */
    float *embed_norm;       /* [D] BLOOM's LayerNorm on the embedding, or NULL */
    float *embed_norm_b;     /* [D] */
    float *alibi;            /* [H] ALiBi slopes, or NULL */
    float clip_qkv;          /* > 0: q, k, v clamped to [-clip_qkv, clip_qkv] */
    float *pos_embed;        /* [max_pos + pos_offset][D] learned positions (GPT-2, OPT), or NULL */
    int max_pos, pos_offset; /* position p reads pos_embed row p + pos_offset */
    float *lm_head;          /* [V][D]; == embed when tied */
    float *final_norm;       /* [D] */
    float *final_norm_b;     /* [D] or NULL */
    float *lm_head_b;        /* [V] or NULL */
    ref_layer *w;            /* [L] */

    float *kc, *vc;          /* [L][Hk][max_ctx][Dh] */
    int n_past;
    float *trace;            /* [L+2][T][D] or NULL */
};

/* Weights to f32 (ref.c), shared with the engines that take the reference's layer layout (engine/cuda):
 * tm_ref_rows_f32: rows [row0, row0 + n) of tensor t [N][K] (K = 1 for vectors; plain or quantized) into
 * dst [n][K]; tm_ref_to_f32: all of it into a fresh array (NULL on error); tm_ref_norm_w: a norm weight
 * [n], 1 + w where add_one (Gemma); tm_ref_layer_load: layer l's weights as ref_layer holds them (fused
 * qkv in Q, K, V row order, gate rows then up rows, effective norms; a mixture-of-experts layer's router
 * and experts only where experts is set: engine/cuda uploads them expert by expert); tm_ref_layer_free frees
 * and zeroes one. */
int tm_ref_rows_f32(const tm_tensor *t, int64_t row0, int64_t n, int64_t N, int64_t K, float *dst, tm_err *err);
float *tm_ref_to_f32(const tm_tensor *t, int64_t N, int64_t K, tm_err *err);
float *tm_ref_norm_w(const tm_tensor *t, int n, int add_one, tm_err *err);
int tm_ref_layer_load(ref_layer *o, const tm_model *m, int l, int experts, tm_err *err);
void tm_ref_layer_free(ref_layer *o);

/* ref_parallel: fn(ctx, i0, i1) over [0, n) split into n_threads ranges
 * (inline when n_threads == 1 or the work is small). */
void ref_parallel(int n_threads, int n, double work, void (*fn)(void *ctx, int i0, int i1), void *ctx);

/* y[T][N] = x[T][K] · w[N][K]ᵀ (+ b[N]); double accumulation. y must not alias x. */
void ref_matmul(int n_threads, float *y, const float *x, const float *w, const float *b, int T, int N, int K);

/* y[n] = x[n] / sqrt(mean(x²) + eps) * w[n]; y may alias x. */
void ref_rmsnorm(float *y, const float *x, const float *w, int n, float eps);

/* the model's norm: RMSNorm (b unused), or LayerNorm
 * y[n] = (x[n] - mean(x)) / sqrt(var(x) + eps) * w[n] (+ b[n]); y may alias x. */
void ref_norm(tm_norm_kind kind, float *y, const float *x, const float *w, const float *b, int n, float eps);

float ref_act(tm_act a, float x);

/* the gated unit of gate g and up u: act(g) * u, or GPT-OSS's clamped form (model.h) */
float ref_glu(tm_act a, float g, float u);

#endif
