/* engine/cuda/cu_mla.h: multi-head latent attention on the CUDA engine (private to engine/cuda): DeepSeek-V2 /
 * V3, Kimi K2, GLM-4.7-Flash, in model.h's absorbed form, as engine/cpu/mla.h computes it. The KV cache holds
 * one latent head of Dh = rope + kvl a token (k' = [k_pe | c], v' = [c | 0]: the same pages, bridge and
 * decode attention as any model with Hk = 1), and each query head's no-rope part is carried into the latent
 * before the attention (q_nope · UK_h) and out of it after (o'_h · UV_hᵀ).
 *
 * Design block
 * ------------
 * Weights (cu_mla_up, at bind): q_a, q and kv_a are cu_mats (packed where the engine decodes and the
 * encoding allows, else bf16); UK_hᵀ [kvl][nope] and UV_h [v][kvl] of every head made once from kv_b (f32,
 * the reference loader's) in bf16, stacked [H][..]; norms and biases f32.
 *
 * One call (T rows), on the engine's stream:
 *   qa[T][ql]          = h16 · q_aᵀ (the engine's product);  qa16 = bf16(rmsnorm(qa + b_qa) by q_a_norm)
 *   qf[T][H][rope+nope]= (qa16 or h16) · wqᵀ                 each head [rope | nope], as bound
 *   ckv[T][kvl+rope]   = h16 · kv_aᵀ
 *   cu_mla_split       → the engine's q|k|v rows [T][(H + 2) Dh]: q'_h[:rope], k', v' (c = rmsnorm(ckv + b)[:kvl]),
 *                        and qn16[T][H][nope] = bf16(q_nope)
 *   q'_h[rope:]        = qn16[:, h] · UK_h                   one batched GEMM over the heads (cuBLAS, f32 out)
 *   ... the engine's q/k pass (RoPE on the first rope dims of q' and k'), its mirror and export rows ...
 *   attention: a decode step's is the engine's paged decode attention (cu_dec.cu, Dh = rope + kvl); a prefill
 *     chunk's is cu_mla_attention: the one kv head serves every query head, so the scores are one GEMM,
 *       S[(t, h)][j] = q'(t, h) · k'_j,  j < pos0 + t1   (a block of query rows [t0, t1) at a time, sized so
 *                                                        that S f32 and P bf16 fit the scratch)
 *       P = softmax(S · scale) over j <= pos0 + t, bf16;  o'(t, h)[:kvl] = P · c  (cuBLAS, tensor cores)
 *     so it is not flash-style: S is materialised a block of rows at a time (the flash kernel's tiles stop at
 *     head dims of CU_MAX_DH, and MLA's 576 would want 72 accumulator tiles a warp). Rows past n_valid get 0.
 *   o16[T][H][v]       = bf16(o'[:, h, :kvl] · UV_hᵀ)        one batched GEMM; the engine's o projection reads it
 * The engine's products (cuda_engine.c's gemm(): packed weights' GEMV within its rows, else cuBLAS) come
 * through `mul`, so a decode step keeps the call's rules and profile. */
#ifndef TM_ENGINE_CUDA_CU_MLA_H
#define TM_ENGINE_CUDA_CU_MLA_H

#include "engine/cuda/cu_mat.h"
#include "engine/ref/ref-impl.h"
#include "model/model.h"

typedef struct cu_mla {
    int D, H, Dh, ql, kvl, nope, rope, v;
    float eps;                        /* q_a_norm's and kv_a_norm's (model.h's mla_eps) */
    cu_mat q_a, q, kv_a;              /* [ql][D] (N 0: no q_lora), [H (rope + nope)][ql or D], [kvl + rope][D] */
    uint16_t *uk, *uv;                /* bf16 [H][kvl][nope] (UK_h transposed), [H][v][kvl] (UV_h) */
    float *q_a_b, *kv_a_b;            /* [ql], [kvl + rope], or NULL */
    float *q_a_norm, *kv_a_norm;      /* [ql] (NULL: no q_lora), [kvl] */
} cu_mla;

/* Working memory for up to `rows` rows of a context of cap positions, shared by the layers */
typedef struct cu_mla_ws {
    int rows;
    float *qa, *qf, *ckv;             /* [rows][ql], [rows][H][rope + nope], [rows][kvl + rope] */
    uint16_t *qa16, *qn16, *o16;      /* [rows][ql], [rows][H][nope], [rows][H][v] */
    uint16_t *q16;                    /* [rows][H][Dh]: the prefill attention's queries */
    float *s;                         /* scores, s_cap floats, and their weights p (bf16, s_cap of them) */
    uint16_t *p;
    size_t s_cap;
} cu_mla_ws;

/* the engine's product y[T][N] f32 = x[T][K] bf16 · wᵀ (its context eng) */
typedef int (*cu_mla_mul)(void *eng, float *y, const uint16_t *x, const cu_mat *w, int T, tm_err *err);

/* layer l's latent attention weights up (o: the layer as the reference's loader read it); packed: keep the
 * quantized projections packed. Errors: TM_E_NOMEM, the loader's naming the tensor */
int cu_mla_up(cu_mla *x, cudaStream_t st, const tm_model *m, int l, const ref_layer *o, int packed, float *tmp,
              size_t tmp_n, tm_err *err);
void cu_mla_free(cu_mla *x);
/* bytes of the product scratch (cu_mm.dq) its matrices may need */
size_t cu_mla_dq_bytes(const cu_mla *x);

int cu_mla_ws_init(cu_mla_ws *ws, const tm_model *m, int rows, int cap, tm_err *err);
void cu_mla_ws_free(cu_mla_ws *ws);

/* qkv[T][(H + 2) Dh] f32 (the engine's rows, before its q/k pass) from the normed rows h16 [T][D] */
int cu_mla_qkv(const cu_mla *x, cu_mla_ws *ws, cu_mla_mul mul, void *eng, cublasHandle_t blas, cudaStream_t st,
               const uint16_t *h16, int T, float *qkv, tm_err *err);

/* out [T][H][Dh] bf16 (the first kvl of each head's Dh; rows t >= n_valid 0) = the chunk's causal attention:
 * query rows t < n_valid of qkv (position pos0 + t) over the mirror's keys kc / values vc [cap][Dh] bf16 (this
 * layer's one kv head), scores times scale */
int cu_mla_attention(const cu_mla *x, cu_mla_ws *ws, cublasHandle_t blas, cudaStream_t st, const float *qkv, int T,
                     int n_valid, int pos0, const uint16_t *kc, const uint16_t *vc, float scale, uint16_t *out,
                     tm_err *err);

/* ws->o16 [T][H][v] = each head's o'[:kvl] · UV_hᵀ, from the attention's rows att16 [T][H][Dh] */
int cu_mla_out(const cu_mla *x, cu_mla_ws *ws, cublasHandle_t blas, const uint16_t *att16, int T, tm_err *err);

#endif
