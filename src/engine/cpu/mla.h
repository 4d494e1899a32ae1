/* engine/cpu/mla.h: multi-head latent attention's projections for the CPU
 * engines (DeepSeek-V2/V3; model/model.h's "mla" lines). The latent is
 * expanded per head, as transformers computes it, into the q, k, v rows the
 * engine's attention takes (Hk = H, Dh = qk_rope + qk_nope):
 *
 *   qa[M][ql]    = rmsnorm(h · q_aᵀ + b_qa, q_a_norm)        (q_lora; else qa = h)
 *   q[M][H][Dh]  = qa · wqᵀ                                  (each head [rope | nope], as bound)
 *   ckv[M][kvl + rope] = h · kv_aᵀ + b_kva
 *   c[M][kvl]    = rmsnorm(ckv[:, :kvl], kv_a_norm)
 *   kvb[M][H][nope + v] = c · kv_bᵀ
 *   k[M][H][Dh]  = [ckv[:, kvl:] | kvb[:, h, :nope]]         (the rope part shared by the heads)
 *   v[M][H][Dh]  = [kvb[:, h, nope:] | 0]                    (values padded to Dh)
 *
 * The caller then runs RoPE on the first qk_rope dims of q and k, stores k and
 * v in the KV cache, attends over Dh, and reads each head's first v_dim
 * outputs. The cache holds the expanded K and V (not the compressed latent;
 * the absorbed form that decodes from the latent is not implemented).
 *
 *   tm_mla *x;
 *   tm_mla_init(&x, model, layer, pack, roles, 512, &err);   // weights + scratch for 512 rows
 *   tm_mla_forward(x, &kernels, h, M, q, k, v, &ws, pool, &err);
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
    float eps;
    tm_kweight *q_a;              /* [ql][D], or NULL (no q_lora) */
    tm_kweight *q;                /* [H*Dh][ql or D] */
    tm_kweight *kv_a;             /* [kvl + rope][D] */
    tm_kweight *kv_b;             /* [H*(nope + v)][kvl] */
    float *q_a_b, *kv_a_b;        /* [ql], [kvl + rope] biases, or NULL */
    float *q_a_norm, *kv_a_norm;  /* [ql], [kvl] */
    float *qa, *ckv, *c, *kvb;    /* scratch for max_rows rows, shapes above */
} tm_mla;

/* tm_mla_init: layer `layer`'s MLA weights packed by `pack` for `roles`, and scratch for max_rows rows.
 * Errors: TM_E_NOMEM, or pack's naming the tensor. */
int tm_mla_init(tm_mla **out, const tm_model *m, int layer, tm_moe_pack_fn pack, unsigned roles, int max_rows,
                tm_err *err);
void tm_mla_free(tm_mla *x);

/* tm_mla_forward: q, k, v [M][H][Dh] from the normed rows h[M][D] (M in 1..max_rows). */
int tm_mla_forward(tm_mla *x, const tm_kernels *k, const float *h, int M, float *q, float *kk, float *vv, tm_kbuf *ws,
                   struct tm_pool *pool, tm_err *err);

#endif
