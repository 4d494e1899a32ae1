/* engine/cuda/cu_moe.h: a mixture-of-experts layer on the CUDA engine (private to engine/cuda): the FFN of
 * model.h's "moe" line, as engine/cpu/moe.h computes it (Qwen3-MoE, Qwen2-MoE, Mixtral, OLMoE, GraniteMoE,
 * GPT-OSS, DeepSeek-style routing without latent attention: GLM-4.5, dots.llm1, ERNIE 4.5).
 *
 * Design block
 * ------------
 * Weights (cu_moe_up, at bind). The router f32 [E][D], plus one row for the shared expert's gate where it
 * has one (Qwen2-MoE): f32 because routing is discontinuous (engine/cpu/moe.h says why). The experts
 * stacked, gate|up [E][2Fe][D] (each expert's gate rows, then its up rows) and down [E][D][Fe], each stack
 * one cu_mat: packed (the package's bytes) where the engine decodes and the encoding allows, else bf16;
 * expert i is the view of its rows (cu_mat_view). Biases (GPT-OSS) f32 [E][2Fe] and [E][D]; the shared
 * expert two plain matrices. Uploaded expert by expert: the host holds one block of rows at a time.
 *
 * One call (cu_moe_forward), T rows, K = top_k choices each, all on the engine's stream:
 *   logit[T][E(+1)] = h32 · routerᵀ      f32, over the norm's f32 output (not the bf16 copy): cu_moe_router up
 *                                        to CU_MOE_ROUTER_ROWS (a row's sums in one order whatever the batch:
 *                                        a request's experts do not depend on the others in its step), else
 *                                        cuBLAS SGEMM
 *   sel, w [T][K]; sg [T]                cu_moe_pick: the scores and moe_route.h's pick, a warp a row (a
 *                                        warp argmax a choice; DeepSeek's groups by moe_route.inc's code)
 *   indexed (packed experts, T <= CU_MOE_IX_ROWS: a decode step): one GEMV launch a product, a pair
 *        (t, k) a row of blocks, the expert's units found on the device (cu_gemv_ix):
 *        ge[t K + k] = act(h16[t] · gu_selᵀ) bf16, ye[t K + k] = ge · dn_selᵀ f32. Nothing comes to the
 *        host, so a decode step stays one CUDA graph. A pair reads its expert's weights whole, so rows
 *        that share an expert read it again (mostly from L2).
 *   tiled (otherwise, where cu_moe_mm takes both stacks: a prefill chunk, a decode batch past 16 rows):
 *        cu_moe_sort puts the pairs in slots grouped by expert and lists each expert's row tiles (64 slots),
 *        all on the device; xe = the rows of h16 gathered in slot order; cu_moe_mm runs each product once
 *        over every tile, on tensor cores (the packed weights unpacked to bf16 on their way to shared memory):
 *        ge[slot] = act of the gate|up product (fused), ye[slot] = ge · dn_eᵀ. Two launches for all the
 *        experts and no synchronisation, so a large decode batch is captured too.
 *   grouped (the tiled path off (TANDEM_CUDA_MOE_MM=0) or not possible, or the indexed one off for a decode
 *        step): sel comes down (the call's one synchronisation), tm_moe_group sorts the pairs by expert on
 *        the host (the CPU engines' counting sort), the order, each pair's slot and each slot's expert go up;
 *        xe as above; each expert with n rows runs its two products over its slots (cu_mat_mul: cuBLAS over
 *        bf16, a packed expert's GEMV up to gemv_max rows, else cuBLAS over it dequantized into the scratch).
 *        Measured on an H100 (docs/benchmarks.md "Session 54"): a prefill chunk's experts spend ~6 ms a layer
 *        here at 512 rows (a few hundred launches a layer: an expert's product is P / E, a few dozen, rows);
 *        neither cuBLAS's grouped GEMM (cublasGemmGroupedBatchedEx) nor one batched GEMM over the experts
 *        padded to a common row count (cublasGemmBatchedEx) did better (0.65-1.0x). TANDEM_CUDA_MOE_TIMES=1
 *        times the phases.
 *   shared expert: ge = act(h16 · s_guᵀ), ys = ge · s_dnᵀ
 *   f[T][D] = Σ over the row's choices in expert order of w (ye + db), + sg ys (cu_moe_combine)
 * The engine then adds f into the residual stream as it adds a dense FFN's output. */
#ifndef TM_ENGINE_CUDA_CU_MOE_H
#define TM_ENGINE_CUDA_CU_MOE_H

#include "engine/cuda/cu_mat.h"
#include "model/model.h"

#define CU_MOE_IX_ROWS 16     /* rows up to which packed experts run indexed (no synchronisation) */
#define CU_MOE_PATH_IX 1      /* cu_moe_forward's paths: the indexed one for decode steps (TANDEM_CUDA_MOE_IX=0: off) */
#define CU_MOE_PATH_MM 2      /* the tiled one (TANDEM_CUDA_MOE_MM=0: off) */
#define CU_MOE_ROUTER_ROWS 64 /* rows up to which the router's product is cu_moe_router's (batch-invariant) */

typedef struct cu_moe {
    int D, E, Fe, K, Fs, act;
    int sigmoid, n_group, topk_group, group_top2, norm_topk; /* routing (model.h's moe line) */
    float scale;
    int s_gate;                       /* the shared expert has a sigmoid gate: router row E */
    float *router;                    /* [E + s_gate][D] f32 */
    float *rb, *corr;                 /* [E] the router's bias (GPT-OSS), the choice's bias (DeepSeek-V3), or NULL */
    cu_mat gu, dn;                    /* [E][2Fe][D], [E][D][Fe] */
    float *gub, *db;                  /* [E][2Fe], [E][D] or NULL */
    cu_mat sgu, sdn;                  /* the shared expert [2Fs][D], [D][Fs] (Fs 0: none) */
    int mm;                           /* cu_moe_mm takes both stacks (the tiled path) */
} cu_moe;

/* Working memory for up to `rows` rows, shared by the layers (cuda_engine.c: one per engine) */
typedef struct cu_moe_ws {
    int rows, pairs, E1;              /* sized for: rows, rows x K choices, router rows */
    float *h32;                       /* [rows][D] the FFN norm's f32 output (the engine writes it) */
    float *logit;                     /* [rows][E1] */
    int *sel;                         /* [pairs] */
    float *w, *sg;                    /* [pairs], [rows] */
    int *ord;                         /* [2][pairs]: the grouped order, then each choice's slot */
    int *tiles, max_tiles;            /* [1 + 3 max_tiles]: cu_moe_sort's row tiles */
    uint16_t *xe, *ge;                /* [pairs][D], [pairs][max(Fe, Fs)] bf16 */
    float *gu, *ye, *ys;              /* [pairs][2 max(Fe, Fs)], [pairs][D], [rows][D] */
    int *h_sel, *h_ord;               /* pinned: [pairs], [2][pairs] */
    int *h_start;                     /* [E + 1] */
    int times;                        /* TANDEM_CUDA_MOE_TIMES=1 (a measurement switch): each call's phases timed
                                         (the stream synchronised between them), the totals printed when freed */
    double t_last, t[5];              /* route, group, experts, shared expert, combine: seconds */
    long calls, rows_seen;
} cu_moe_ws;

/* layer l's router and experts (m->layer[l].moe) up; packed: keep quantized experts packed. The model's top_k and
 * experts within CU_MOE_MAX_K / CU_MOE_MAX_E (the engine's bind checks). Errors: TM_E_NOMEM, the loader's naming
 * the tensor */
int cu_moe_up(cu_moe *mo, cudaStream_t st, const tm_model *m, int l, int packed, float *tmp, size_t tmp_n, tm_err *err);
void cu_moe_free(cu_moe *mo);
/* bytes of the product scratch (cu_mm.dq) its matrices may need */
size_t cu_moe_dq_bytes(const cu_moe *mo);
/* rows up to which a call by the paths (CU_MOE_PATH_*) runs without a synchronisation (so may be captured):
 * over packed experts, 0 without the indexed path, else INT32_MAX with the tiled one, else CU_MOE_IX_ROWS; over bf16
 * experts INT32_MAX with the tiled path, else 0 */
int cu_moe_capture_rows(const cu_moe *mo, int paths);

int cu_moe_ws_init(cu_moe_ws *ws, const tm_model *m, int rows, tm_err *err);
void cu_moe_ws_free(cu_moe_ws *ws);

/* f[T][D] = the layer's MoE FFN of the rows h16 [T][D] (bf16) / h32 [T][D] (the same rows, f32), T in 1..ws->rows.
 * mm: the call's products (its stream, cuBLAS, scratch, gemv_max); paths: CU_MOE_PATH_* allowed (the design block
 * says which runs) */
int cu_moe_forward(const cu_moe *mo, cu_moe_ws *ws, const cu_mm *mm, const uint16_t *h16, const float *h32, int T,
                   int paths, float *f, tm_err *err);

#endif
