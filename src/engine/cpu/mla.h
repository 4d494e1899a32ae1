/* engine/cpu/mla.h: multi-head latent attention for the CPU engines
 * (DeepSeek-V2/V3), in model/model.h's absorbed form: the KV cache holds one
 * latent head of Dh = qk_rope + kv_lora per token (k' = [rope | c], v' =
 * [c | 0]), and each query head's no-rope part is carried into the latent
 * (q_nope·UK_h) before the attention and out of it (o'·UV_hᵀ) after:
 *
 *   qa[M][ql]        = rmsnorm(h · q_aᵀ + b_qa, q_a_norm)          (q_lora; else qa = h)
 *   qf[M][H][rope+nope] = qa · wqᵀ                                 (each head [rope | nope], as bound)
 *   ckv[M][kvl+rope] = h · kv_aᵀ + b_kva;   c = rmsnorm(ckv[:, :kvl], kv_a_norm)
 *   q'[M][H][Dh]     = [qf[:, h, :rope] | qf[:, h, rope:] · UK_h]  (uk[h] = UK_hᵀ [kvl][nope])
 *   k'[M][Dh]        = [ckv[:, kvl:] | c],   v'[M][Dh] = [c | 0]
 *   ... the engine: RoPE on q'[.., :rope] and k'[.., :rope], the KV store, attention (H heads, 1 kv head)
 *   o[M][H][v]       = o'[:, h, :kvl] · UV_hᵀ                      (uv[h] = UV_h [v][kvl])
 *
 * UK_h and UV_h are head h's rows of kv_b [H (nope + v)][kvl]; they are made
 * once at bind, in bf16 where kv_b is a float tensor and int8 per row
 * otherwise (a quantized stage), as tm_kweights for the GEMV / GEMM kernels.
 *
 *   tm_mla *x;
 *   tm_mla_init(&x, model, layer, pack, roles, 512, &err);   // weights + scratch for 512 rows
 *   tm_mla_qkv(x, &kernels, h, M, q, k, v, &ws, pool, &err);
 *   ... attention into o' ...
 *   tm_mla_out(x, &kernels, o', M, &ws, pool, &err);         // x->o [M][H*v], the o projection's input
 *   tm_mla_free(x); */
#ifndef TM_ENGINE_CPU_MLA_H
#define TM_ENGINE_CPU_MLA_H

#include "core/status.h"
#include "engine/cpu/kernels.h"
#include "engine/cpu/moe.h"
#include "model/model.h"

struct tm_pool;

typedef struct tm_mla {
    int D, H, Dh, ql, kvl, nope, rope, v, max_rows;
    float eps;                    /* q_a_norm's and kv_a_norm's (model.h's mla_eps) */
    tm_kweight *q_a;              /* [ql][D], or NULL (no q_lora) */
    tm_kweight *q;                /* [H*(rope + nope)][ql or D] */
    tm_kweight *kv_a;             /* [kvl + rope][D] */
    tm_kweight **uk, **uv;        /* [H] each [kvl][nope] (UK_h transposed), [v][kvl] (UV_h) */
    void *ukv;                    /* their bytes (bf16, or int8 followed by ukv_sc) */
    float *ukv_sc;                /* int8: the rows' scales */
    float *q_a_b, *kv_a_b;        /* [ql], [kvl + rope] biases, or NULL */
    float *q_a_norm, *kv_a_norm;  /* [ql], [kvl] */
    float *qa, *qf, *ckv;         /* scratch for max_rows rows, shapes above */
    float *xin, *yout;            /* [max_rows][max(nope, kvl)], [max_rows][max(kvl, v)] one head's operands */
    float *o;                     /* [max_rows][H*v] tm_mla_out's result */
} tm_mla;

/* tm_mla_init: layer `layer`'s MLA weights packed by `pack` for `roles`, and scratch for max_rows rows.
 * Errors: TM_E_NOMEM, TM_E_INVALID (a weight not bound to its shape), or pack's naming the tensor. */
int tm_mla_init(tm_mla **out, const tm_model *m, int layer, tm_moe_pack_fn pack, unsigned roles, int max_rows,
                tm_err *err);
void tm_mla_free(tm_mla *x);

/* tm_mla_qkv: q [M][H][Dh], k and v [M][Dh] from the normed rows h[M][D] (M in 1..max_rows). */
int tm_mla_qkv(tm_mla *x, const tm_kernels *k, const float *h, int M, float *q, float *kk, float *vv, tm_kbuf *ws,
               struct tm_pool *pool, tm_err *err);

/* tm_mla_out: x->o [M][H*v] from the attention's rows o' [M][H][Dh]. */
int tm_mla_out(tm_mla *x, const tm_kernels *k, const float *att, int M, tm_kbuf *ws, struct tm_pool *pool,
               tm_err *err);

#endif
