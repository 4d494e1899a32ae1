/* engine/cpu/moe.h: the mixture-of-experts FFN block of the CPU engines
 * (Qwen3-MoE, Qwen2-MoE, Mixtral), the "moe:" line of model/model.h's op sequence:
 *
 *   r[M][E]  = softmax(h · routerᵀ + router_b)          (f32, see below; router_b: GPT-OSS's, else 0;
 *              DeepSeek-V3: sigmoid, the choice by r + router_corr)
 *   top_k experts per row (the larger probability first, the lower index on
 *   ties; DeepSeek: among the experts of the topk_group best of n_group groups);
 *   p = their probabilities, divided by their sum when norm_topk, x routed_scale
 *   f[M][D]  = Σ_e p_e · (act(h·gate_eᵀ + gb_e) ⊙ (h·up_eᵀ + ub_e)) · down_eᵀ + db_e   (the biases: GPT-OSS's,
 *              else 0; its act is the clamped SwiGLU, model.h)
 *   Fs > 0:  f += sigmoid(h·s_routerᵀ) · (act(h·s_gateᵀ) ⊙ h·s_upᵀ) · s_downᵀ   (Qwen2-MoE's shared
 *            expert, every row, added after the routed ones as transformers does)
 *
 *   tm_moe_experts *x;
 *   tm_moe_init(&x, model, layer, pack, roles, &err);   // binds router + E experts
 *   tm_moe_scratch s;
 *   tm_moe_scratch_init(&s, model, 512, &err);          // for up to 512 rows
 *   tm_moe_forward(x, &kernels, h, M, f, &s, &ws, pool, &err);
 *   tm_moe_scratch_free(&s); tm_moe_free(x, model->n_experts);
 *
 * How the rows run: every row is routed first; then rows are grouped by
 * expert (a counting sort, rows ascending within an expert), and each expert
 * with at least one row gathers its rows into xe[n][D] and runs its three
 * matmuls through tm_kmatmul: the GEMV kernels for n <= TM_KGEMV_MAX_B (a
 * decode batch, or a rarely chosen expert), the GEMM kernels beyond (a
 * prefill chunk). The thread pool splits each matmul, as in the dense FFN.
 * Outputs are scatter-added p · ye[j] into f[row] in expert index order, the
 * order transformers accumulates in.
 *
 * The router runs in f32 on f32 activations (its bf16/f16 weights are exact
 * in f32), not through the bf16-rounding GEMV: routing is discontinuous, and
 * rounding h to bf16 moves router logits by ~1e-3, enough to flip near-tied
 * choices (the conformance qwen3_moe prompt has a top-2 gap of 1e-3).
 *
 * Shapes: M rows, D hidden, E experts, Fe expert FFN size, K = top_k. */
#ifndef TM_ENGINE_CPU_MOE_H
#define TM_ENGINE_CPU_MOE_H

#include "core/status.h"
#include "core/tensor.h"
#include "engine/cpu/kernels.h"
#include "model/model.h"

struct tm_pool;

/* the kernels' TM_KGLU_* code of a model's activation (the dense FFN's too) */
static inline int tm_kglu_of(tm_act a)
{
    return a == TM_ACT_SILU ? TM_KGLU_SILU : a == TM_ACT_GELU ? TM_KGLU_GELU : a == TM_ACT_RELU ? TM_KGLU_RELU
           : a == TM_ACT_RELU2 ? TM_KGLU_RELU2 : a == TM_ACT_SWIGLU_OAI ? TM_KGLU_SWIGLU_OAI : TM_KGLU_GELU_TANH;
}

/* One MoE layer's weights as the CPU kernels take them. */
typedef struct tm_moe_experts {
    int D, E, Fe, top_k, norm_topk;
    tm_act act;
    float *router;                /* [E][D] f32 */
    float *router_b;              /* [E] or NULL */
    float *router_corr;           /* [E] DeepSeek-V3's choice bias, or NULL */
    int router_sigmoid, n_group, topk_group, group_top2; /* DeepSeek's routing (model.h's moe line) */
    float routed_scale;
    tm_kweight **gate, **up;      /* [E] each [Fe][D] */
    tm_kweight **down;            /* [E] each [D][Fe] */
    float *gate_b, *up_b;         /* [E][Fe] the experts' biases, or NULL */
    float *down_b;                /* [E][D] */
    int Fs;                       /* the shared expert (Qwen2-MoE), 0: none */
    tm_kweight *s_gate, *s_up;    /* [Fs][D] */
    tm_kweight *s_down;           /* [D][Fs] */
    float *s_router;              /* [D] f32: the shared expert's gate, sigmoid(h·s_router) */
} tm_moe_experts;

/* Per-call working memory, sized for max_rows rows. */
typedef struct tm_moe_scratch {
    int max_rows;
    float *prob;                  /* [M][E] router logits, then probabilities */
    int *sel;                     /* [M][K] chosen experts */
    float *wsel;                  /* [M][K] their weights */
    int *start;                   /* [E+1] expert e's rows are order[start[e] .. start[e+1]) */
    int *order;                   /* [M*K] row indices grouped by expert */
    float *weight;                /* [M*K] the matching weights */
    float *xe;                    /* [M][D] gathered rows of h */
    float *ge, *ue;               /* [M][max(Fe, Fs)] gate (then act(gate) ⊙ up), up */
    float *ye;                    /* [M][D] expert output */
    float *choice;                /* [E] a row's choice scores (DeepSeek-V3) */
    unsigned char *ok;            /* [E] the experts its groups allow (DeepSeek) */
} tm_moe_scratch;

/* The engine's packing rule: bind tensor t [N][K] for the given roles
 * (TM_ROLE_* bits; GEMM panels where a prefill role can use them). */
typedef int (*tm_moe_pack_fn)(tm_kweight **out, const tm_tensor *t, unsigned roles, tm_err *err);

/* tm_moe_init: bind layer `layer`'s router and experts (m->layer[layer].moe
 * must be set). Errors: TM_E_NOMEM, or pack's error naming the tensor. */
int tm_moe_init(tm_moe_experts **out, const tm_model *m, int layer, tm_moe_pack_fn pack, unsigned roles,
                tm_err *err);
void tm_moe_free(tm_moe_experts *x);

int tm_moe_scratch_init(tm_moe_scratch *s, const tm_model *m, int max_rows, tm_err *err);
void tm_moe_scratch_free(tm_moe_scratch *s);

/* tm_moe_forward: f[M][D] = the MoE FFN of h[M][D] (f is overwritten; h is
 * not changed). M in 1..s->max_rows. Errors: TM_E_INVALID (M), tm_kmatmul's. */
int tm_moe_forward(const tm_moe_experts *x, const tm_kernels *k, const float *h, int M, float *f,
                   tm_moe_scratch *s, tm_kbuf *ws, struct tm_pool *pool, tm_err *err);

#endif
