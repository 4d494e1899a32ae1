/* engine/cpu/cpu-impl.h: what the CPU engines' two halves share (private to engine/cpu/): the bound
 * weights of a layer (cpu_layer), the engine context (cpu_ctx), the registry variant (cpu_variant).
 * cpu_bind.c binds a model to a context (weights packed per stage, scratch, rope tables, the GEMV
 * autotune) and frees it; cpu_engine.c runs the forward pass over it and holds the registry entries. */
#ifndef TANDEM_ENGINE_CPU_IMPL_H
#define TANDEM_ENGINE_CPU_IMPL_H

#include <time.h>

#include "core/clock.h"
#include "engine/cpu/kernels.h"
#include "engine/cpu/mla.h"
#include "engine/cpu/moe.h"
#include "engine/engine.h"
#include "model/model.h"

#define CPU_MAX_ROWS 512  /* largest prefill chunk */

typedef struct cpu_layer {
    tm_kweight *wq, *wk, *wv, *wqkv, *wo;     /* see tm_layer_weights for shapes */
    tm_kweight *w_gate, *w_up, *w_gate_up, *w_down;
    tm_kweight *w_glu;                        /* gate and up fused for gemm_glu (prefill), or NULL */
    float *attn_norm, *ffn_norm;              /* [D] */
    float *attn_norm_b, *ffn_norm_b;          /* [D] LayerNorm biases, or NULL */
    float *attn_out_norm, *ffn_out_norm;      /* [D] or NULL */
    float *q_norm, *k_norm;                   /* [Dh] (qk_norm_heads: [H][Dh], [Hk][Dh]) or NULL */
    float *q_norm_b, *k_norm_b;               /* [Dh] LayerNorm biases or NULL */
    float *bq, *bk, *bv, *bo;                 /* [H*Dh], [Hk*Dh], [Hk*Dh], [D] or NULL */
    float *b_gate, *b_up, *b_down;            /* [F], [F], [D] or NULL */
    float *sinks;                             /* [H] attention sinks or NULL */
    tm_moe_experts *moe;                      /* router [E][D] + E experts; NULL: dense FFN */
    tm_mla *mla;                              /* multi-head latent attention (DeepSeek; wq, wk, wv unused), or NULL */
} cpu_layer;

#define PROF_SHAPES 32 /* matmuls TANDEM_PROFILE tells apart (a layer has at most 7 weights; a bench, 1-2 row counts) */

typedef struct cpu_ctx {
    const tm_model *m;
    tm_kernels k;
    struct tm_pool *pool;
    int max_ctx;
    cpu_layer *layer;                         /* [L] */
    tm_kweight *lm_head;                      /* [V][D] */
    float *final_norm, *final_norm_b;         /* [D], [D] or NULL */
    float *embed_norm, *embed_norm_b;         /* [D] BLOOM's norm of the embedding, or NULL */
    float *lm_head_b;                         /* [V] or NULL (Phi) */
    float *rope_cos[2], *rope_sin[2];         /* [max_ctx][rot/2] per rope */
    /* scratch, sized for CPU_MAX_ROWS rows */
    float *x;                                 /* [M][D] residual stream */
    float *x0;                                /* [M][D] the layer's input, for a parallel FFN (else NULL) */
    float *h;                                 /* [M][max(D, H*Dh)] normed input / attention output */
    float *q, *kk, *vv;                       /* [M][H*Dh], [M][Hk*Dh], [M][Hk*Dh] */
    float *qkv;                               /* [M][(H+2Hk)*Dh] fused projections */
    float *g, *u;                             /* [M][2F] gate (or gate_up), [M][F] up (dense layers) */
    float *f;                                 /* [M][D] */
    float *cs, *sn;                           /* [M][rot/2] gathered rope rows */
    float *amax_logits;                       /* [TM_KGEMV_MAX_B][V] a decode step's logits where the caller
                                                 wants only the argmax (allocated at the first such step) */
    /* TANDEM_PROFILE=1: seconds spent, [prefill, decode] x [forward, matmul,
     * attention, norm+prepare (and preparing a matmul's own input),
     * activation+prepare], the matmuls' operations (2 per multiply-add), and
     * forward calls; printed to stderr when the engine is freed.
     * TANDEM_PROFILE=warm (profile 2) leaves out each kind's first call, which
     * pays the first touch of buffers and weights, as a bench's warm-up does. */
    int profile;
    int ffn_bf16;                             /* the int8 gate|up GEMM's output in bf16 where the kernels have
                                                 gemm_bf16y (TANDEM_FFN_BF16=0: f32; see dense_ffn) */
    unsigned y_bf16;                          /* the Y16_* projections stored in bf16 too (y16_parse, bf16y_ok) */
    int prof_warm[2];                         /* profile 2: that kind's first call is done (and was left out) */
    double prof[2][5], prof_ops[2];
    long prof_calls[2];
    int prof_kind;                            /* of the forward call running: 0 prefill, 1 decode */
    struct prof_mm {                          /* ... and by matmul: the first PROF_SHAPES (kind, N, K, dtype, rows) */
        int kind, n, k, glu;                  /* glu: a fused gate/up weight, N outputs of 2 N rows */
        int m;                                /* rows a call */
        int gemm;                             /* 1: GEMM kernels ran it (tm_kmatmul_gemm), 0: GEMVs (up to
                                                 TM_KGEMV_MAX_B rows, or an encoding without a GEMM) */
        tm_dtype dt;
        long calls;
        double s, ops;
    } prof_mm[PROF_SHAPES];
    int prof_nmm;
    uint16_t *xb;                             /* [M][ld] an input prepared once as bf16 (see prep_act) */
    uint8_t *xq;                              /* [M][ld] ... or as offset-binary int8 */
    float *xs;                                /* [M] its row scales */
    const int32_t **ptab;                     /* [M] page tables for attn_decode */
    int *ctxlen;                              /* [M] */
    tm_kbuf kv16;                             /* a prefill chunk over int8 pages: K, V [2][Hk][n][Dh] bf16 */
    int q8_chunk;                             /* 1: such a chunk through kv16 (attention_q8_chunk); 0:
                                                 TANDEM_Q8_ROWS=1, a row at a time through attn_decode */
    tm_moe_scratch moe;                       /* routing and expert rows (MoE models) */
    tm_kbuf ws;
} cpu_ctx;

/* cpu_ctx.y_bf16's bits: the int8 GEMMs besides gate|up that store their result in bf16 (TANDEM_Y_BF16) */
enum { Y16_QKV = 1, Y16_O = 2, Y16_DOWN = 4, Y16_ALL = 7 };

typedef struct cpu_variant {
    const char *engine;   /* registry name */
    const char *kernels;  /* kernel variant */
    unsigned roles;
} cpu_variant;

/* cpu_bind.c: a context for model m on variant var's kernels (*out), or an error status; cpu_unbind frees one
 * (the engine vtable's unbind; TANDEM_PROFILE's report printed first) */
int cpu_bind(void **out, const tm_model *m, const tm_engine_opts *o, const cpu_variant *var, tm_err *err);
void cpu_unbind(void *vctx);

#endif
