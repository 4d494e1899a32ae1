/* engine/cuda/cuda-impl.h: the CUDA engine's kernels as the host code calls them (private to
 * engine/cuda). Each cu_* function launches one kernel on stream s and returns at once; the
 * kernels live in cu_ops.cu (row-wise passes), cu_kv.cu (q/k/v after their GEMM, the KV mirror
 * and its export), cu_attn.cu (attention), cu_dec.cu (decode attention over the pages), cu_gemv.cu
 * (products with quantized weights) and cu_route.cu (the mixture-of-experts layer's routing and sums). Pointers are device memory; bf16 is stored as
 * uint16_t on this side. A launch error surfaces at the next synchronisation (cuda_engine.c checks
 * cudaGetLastError after each layer and the chunk's final cudaStreamSynchronize).
 *
 * Shapes: T chunk rows, D hidden, H / Hk query / kv heads, Dh head dim, F ffn width, V vocab,
 * nqkv = (H + 2 Hk) Dh, cap the mirror's positions per (layer, kv head). */
#ifndef TM_ENGINE_CUDA_CUDA_IMPL_H
#define TM_ENGINE_CUDA_CUDA_IMPL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CUstream_st *cu_stream;

#define CU_MAX_DH 256      /* the prefill attention's tiles (Dh % 16 == 0) */
#define CU_MLA_MAX_DH 1024 /* latent attention's one head (cu_mla.h; Dh % 8 == 0): the decode attention's value
                              columns (8 a thread of its block) and the q/k pass's rows in shared memory */

/* ---- cu_ops.cu ---- */

/* kernels launched from now on carry programmatic dependent launch (cu_launch.cuh; sm_90 and later) or not */
void cu_set_pdl(int on);

/* x[T][D] = bf16 embed[tok[t]][D] * scale (+ pos_embed[p + pos_off][D] where pos_embed; p = pos[t] where pos
 * (device [T]: a decode step), else pos0 + t) */
void cu_embed(cu_stream s, float *x, const uint16_t *embed, const int32_t *tok, int T, int D, float scale,
              const float *pos_embed, int pos0, const int *pos, int pos_off);

/* Row norm of rows [R] of n elements: x row r at x + r * ldx (f32); kind 0 RMS, 1 LayerNorm (b may be
 * NULL); w NULL: weight 1. Output row r to y32 + r * ldy (f32, may be x) and to y16 + r * ldy (bf16), either
 * NULL for none. */
void cu_norm(cu_stream s, int kind, int R, int n, const float *x, int ldx, const float *w, const float *b, float eps,
             float *y32, uint16_t *y16, int ldy);

/* y16[R][n] = bf16(x[R][n]) */
void cu_to_bf16(cu_stream s, uint16_t *y16, const float *x, size_t n);

/* x[T][D] += post(a[T][D] + bias[D]) * scale, post = RMSNorm by post_w (NULL: none); bias may be NULL.
 * Then, where nw is not NULL, the next norm fused: y16[T][D] = bf16(norm(x)) by nw, nb (kind nkind, as
 * cu_norm; the same eps), and where y32 is not NULL the same in f32 (a mixture-of-experts router's input) */
void cu_residual(cu_stream s, float *x, const float *a, const float *bias, const float *post_w, float eps, float scale,
                 int T, int D, int nkind, const float *nw, const float *nb, uint16_t *y16, float *y32);

/* g[T][F] = bf16(gated ? glu(act, gu[t][f] + b[f], gu[t][F + f] + b[F + f]) : act(gu[t][f] + b[f])),
 * gu [T][2F] (gated) or [T][F]; b may be NULL; act a tm_act (model.h's formulas) */
void cu_glu(cu_stream s, uint16_t *g, const float *gu, const float *b, int T, int F, int gated, int act);

/* logits[R][V] = softcap((logits + b) / div * mul), b [V] may be NULL, cap 0: none */
void cu_logits_finish(cu_stream s, float *logits, const float *b, int R, int V, float div, float mul, float cap);
/* out [B] (device) := each row's greedy token from logits [B][V] (tm_argmax_f32's pick, -1 where no
 * logit is above -inf): up to CU_ARGMAX_SEG blocks a row, the last to finish merging (cnt [B], zeroed
 * once, left zeroed); scratch: cu_argmax_scratch(B) bytes */
#define CU_ARGMAX_SEG 64
size_t cu_argmax_scratch(int B);
void cu_argmax(cu_stream s, const float *logits, int B, int V, void *scratch, unsigned *cnt, int32_t *out);
/* ids [n] (device) := the multiprocessor each of n blocks ran on (the tests' check of a device part, cu_smset.h) */
void cu_sm_ids(cu_stream s, int *ids, int n);

/* ---- cu_kv.cu ---- */

/* q/k/v of a chunk after their GEMM, in place in qkv[T][nqkv] (rows Q, K, V): + bias (NULL: none), clamped to
 * [-clip, clip] (clip 0: no), each q / k head normed over Dh (qn / kn NULL: not; per_head: a weight row per
 * head; qnb / knb LayerNorm biases or NULL; kind as cu_norm), RoPE rotate-half on the first rot_dim dims
 * (inv NULL: none; cos / sin of f32(pos * inv[i]) in double, times rope_scale). Keys and values of rows
 * t < T go to the mirror kc / vc [Hk][cap][Dh] (bf16, this layer's; NULL: no mirror) at positions pos0 + t; rows t < n_valid
 * also to exp_rows [2][Hk][T] rows of the export dtype (0 bf16, 1 f16, 2 f32, 3 int8 with exp_scale
 * [2][Hk][T]: kvcache.h's int8 rule), exp_rows NULL: no export. Queries stay f32 in qkv. */
typedef struct cu_qkv_args {
    float *qkv;
    int T, n_valid, pos0, H, Hk, Dh;
    const int *pos;   /* (decode) row t's position pos[t] (device [T]) instead of pos0 + t; NULL: pos0 + t */
    const float *bias;
    float clip;
    const float *qn, *kn, *qnb, *knb;
    int per_head, norm_kind;
    float eps;
    const float *inv;
    int rot_dim;
    float rope_scale;
    uint16_t *kc, *vc;
    int cap;
    void *exp_rows;
    float *exp_scale;
    int exp_dtype;
} cu_qkv_args;
void cu_qkv_post(cu_stream s, const cu_qkv_args *a);

/* the mirror's positions [0, n) of every layer and kv head from host KV blocks uploaded as
 * blk[L][np][2][Hk] blocks of blk_bytes (a page's layer region as kvcache.h lays it out: K blocks, then
 * V), page_size ps positions each, of dtype dt (0 bf16, 1 f16, 2 f32, 3 int8: scales then rows);
 * mirror k / v [L][Hk][cap][Dh] bf16 */
void cu_kv_ingest(cu_stream s, uint16_t *kc, uint16_t *vc, const uint8_t *blk, size_t blk_bytes, int L, int np, int ps,
                  int Hk, int Dh, int cap, int n, int dt);

/* ---- cu_attn.cu ---- */

/* Causal attention of the chunk's queries over the mirror: row t (position pos0 + t, t < n_valid; the
 * padding rows get zeros) of head h attends keys j in [max(0, i - window + 1) if window > 0, i] of kv
 * head h / (H / Hk); score (q·k) * scale, softcap (0: none), + alibi[h] * (j - i) (NULL: none), a sink
 * logit sinks[h] in the softmax's sum (NULL: none). q: qkv rows (f32, ld nqkv); out bf16 [T][H * Dh].
 * Tensor cores (Dh % 16 == 0). S > 1 (with scratch of cu_attention_scratch bytes): the keys in S
 * segments, merged by a second kernel. cu_attention_setup (once, before the first call): the kernel's
 * shared memory for head dim Dh; 0 if the device cannot give it. */
int cu_attention_setup(int Dh);
typedef struct cu_attn_args {
    const float *qkv;
    int nqkv, T, n_valid, pos0, H, Hk, Dh;
    const uint16_t *kc, *vc;
    int cap, window;
    float scale, softcap;
    const float *alibi, *sinks;
    uint16_t *out;
} cu_attn_args;
void cu_attention(cu_stream s, const cu_attn_args *a, float *scratch, int S);

/* the merge of S key segments' partial (O, max, sum) [S][T][H](Dh) in scratch (cu_attention_scratch's
 * layout) into out; a's T, n_valid, H, Dh, sinks and out are read */
void cu_attention_combine(cu_stream s, const cu_attn_args *a, int S, float *scratch);

/* bytes of scratch cu_attention needs to split the keys of T rows x H heads into S segments (S > 1:
 * each segment's O [T][H][Dh], max and sum [T][H], f32) */
size_t cu_attention_scratch(int T, int H, int Dh, int S);

/* ---- cu_dec.cu: decode over the device copy of the paged arena ---- */

/* One decode step's view of the device arena (runtime/kvcache.h's byte layout): block (page p, layer,
 * K or V, head g) at arena + p * page_bytes + layer_off + (kv * Hk + g) * blk_bytes; sequence b's page
 * table pt + b * ptw (device), its query position pos[b] (device). dt: 0 bf16, 1 f16, 2 f32, 3 int8. */
typedef struct cu_dec_attn_args {
    const float *qkv;      /* [B][nqkv] f32, queries after RoPE */
    int nqkv, B, H, Hk, Dh;
    const uint8_t *arena;
    size_t page_bytes, layer_off, blk_bytes;
    int ps, dt;
    const int32_t *pt;
    int ptw;
    const int *pos;
    int window;
    float scale, softcap;
    const float *alibi, *sinks;
    uint16_t *out;         /* bf16 [B][H * Dh] */
    const uint8_t *rows;   /* the step's export rows [2][Hk][B] of Dh elements in the cache's dtype */
    const float *rscales;  /* int8: their scales [2][Hk][B] */
    unsigned *cnt;         /* S > 1: a count per (b, h), [B][H], zero before the first launch (each leaves them zero) */
    int mma;               /* bf16 and int8 pages: a kv head's query heads a block, the scores on tensor cores
                              (k_attn_dec_mma); 0: a block a query head (TANDEM_CUDA_DEC_MMA=0, a test switch) */
} cu_dec_attn_args;

/* attention of each sequence's one query over keys [max(0, pos - window + 1), pos] of its pages (key
 * pos from the export rows, which the launch also writes into their pages at pos), each row's
 * keys in S segments (chunks of seglen in k_attn_dec; S > 1 merged by the last block of each
 * row, through scratch of cu_attention_scratch(B, H, Dh, S) bytes and the counts a->cnt); shared memory
 * per block cu_attn_decode_smem(Dh, seglen) (the engine keeps it under 48 KB) */
void cu_attn_decode(cu_stream s, const cu_dec_attn_args *a, int S, int seglen, float *scratch);
size_t cu_attn_decode_smem(int Dh, int seglen);
/* the launch's blocks a (sequence, segment) for these heads, head dim, page dtype and a->mma; *max_segs: the most
 * segments S it takes */
int cu_attn_decode_blocks(int H, int Hk, int Dh, int dt, int mma, int *max_segs);

/* ---- cu_mla_rows.cu: multi-head latent attention's row passes (cu_mla.h) ---- */

/* row r of x [R][n] += b (NULL: none), then y16[r][n] = bf16(rmsnorm(x[r]) by w, eps) */
void cu_mla_norm(cu_stream s, int R, int n, float *x, const float *b, const float *w, float eps, uint16_t *y16);

/* row t < T of the q and kv_a products into the engine's q|k|v rows (Hk = 1, Dh = rope + kvl; cu_mla.h):
 * ckv[t] += b; c = rmsnorm(ckv[t][:kvl]) by w; q'_h[:rope] = qf[t][h][:rope], k' = [ckv[t][kvl:] | c],
 * v' = [c | 0]; qn16[t][h] = bf16(qf[t][h][rope:]) (what UK_h takes into the latent) */
typedef struct cu_mla_split_args {
    const float *qf;      /* [T][H][rope + nope] */
    float *ckv;           /* [T][kvl + rope] (the bias added in place) */
    const float *b, *w;   /* kv_a's bias [kvl + rope] (or NULL), kv_a_norm [kvl] */
    float eps;
    int H, rope, nope, kvl;
    float *qkv;           /* [T][(H + 2) Dh] */
    uint16_t *qn16;       /* [T][H][nope] */
} cu_mla_split_args;
void cu_mla_split(cu_stream s, int T, const cu_mla_split_args *a);

/* q16[t][H][Dh] = bf16 of the query heads of qkv rows t < T (row stride nqkv) */
void cu_mla_q16(cu_stream s, const float *qkv, int nqkv, int T, int H, int Dh, uint16_t *q16);

/* rows r < R of scores S [R][ld] (row r: query position qpos0 + r / H): P [R][ld] bf16 = softmax over keys
 * j <= that position of S * scale, 0 for the keys past it up to nk */
void cu_mla_softmax(cu_stream s, const float *S, int ld, int R, int H, int qpos0, int nk, float scale, uint16_t *P);

/* ---- cu_gemv.cu: quantized weights ---- */

/* A weight [N][K] kept packed on the device (cu_gemv.cu's design block has the layouts): enc 4: int4,
 * q uint8 [N][K/2] in blocks of 32, s f16 [N][K/G], G 32, 64 or K; enc 8: int8 [N][K], s f32 [N][K/G],
 * G 64 or K (K % 16 == 0). w = d q. */
typedef struct cu_qmat {
    int enc, N, K, G;
    const uint8_t *q;
    const void *s;
} cu_qmat;

/* y[b][n] (row stride ldy, f32) = sum_k x[b][k] w[n][k] for b < B (any B >= 1; in groups of 8), x bf16
 * (row stride ldx, a multiple of 4; x 8-byte aligned) */
void cu_gemv_q(cu_stream s, const cu_qmat *w, const uint16_t *x, int ldx, int B, float *y, int ldy);

/* The FFN's activation after the product (cu_gemv_act): gated (w stacked gate rows [F], then up rows
 * [F]): g[b][f] = bf16(glu(act, y[b][f] + b[f], y[b][F + f] + b[F + f])); not gated (w [F] rows):
 * g[b][f] = bf16(act(y[b][f] + b[f])). b may be NULL; act a tm_act (model.h); g row stride ldg. */
typedef struct cu_gemv_epi {
    int gated, act, F, ldg;
    const float *b;
    uint16_t *g;
    /* the residual's epilogue (cu_gemv_res) */
    float *x;                  /* [B][N] the residual stream: x[b][n] += (y[b][n] + b[n]) * scale */
    float scale, eps;
    int nkind;                 /* then, where nw is not NULL, the next norm (kind as cu_norm's): */
    const float *nw, *nb;      /* h16[b][N] = bf16(norm(x[b])) by nw, nb, run by the launch's last block */
    uint16_t *h16;
    float *h32;                /* ... and, where not NULL, h32[b][N] = norm(x[b]) in f32 (a router's input) */
    unsigned *cnt;             /* [CU_RES_GROUPS] the blocks done, per group of 8 rows: zeroed once, left zeroed */
} cu_gemv_epi;
void cu_gemv_act(cu_stream s, const cu_qmat *w, const uint16_t *x, int ldx, int B, const cu_gemv_epi *ep);

/* The residual add and the next norm fused after the product (the attention's output projection, the
 * FFN's down projection): cu_residual's arithmetic without a post-norm (bit for bit: cu_rows.cuh), with
 * ep->x, b, scale, eps, nkind, nw, nb, h16, cnt (the others unused); w [N = D][K] */
#define CU_RES_GROUPS 8
void cu_gemv_res(cu_stream s, const cu_qmat *w, const uint16_t *x, int ldx, int B, const cu_gemv_epi *ep);

/* Indexed products (the experts of a mixture-of-experts layer, a decode step's rows): P pairs, pair p the
 * product of x row p / xdiv with matrix sel[p] (device [P]) of a stack of equal matrices [n][w->N][w->K]
 * whose first is w: matrix i's units at w->q + i qstride bytes, its scales at w->s + i sstride bytes, its
 * biases (ep->b) at ep->b + i bstride floats. Pair p writes row p of y (row stride ldy, f32) or, with the
 * activation (cu_gemv_act's epilogue, gated or not), row p of ep->g (ep->ldg). One x row a pair (B = 1). */
typedef struct cu_gemv_ix {
    const int *sel;
    int xdiv;
    size_t qstride, sstride, bstride;
} cu_gemv_ix;
void cu_gemv_ix_q(cu_stream s, const cu_qmat *w, const cu_gemv_ix *ix, const uint16_t *x, int ldx, int P, float *y, int ldy);
void cu_gemv_ix_act(cu_stream s, const cu_qmat *w, const cu_gemv_ix *ix, const uint16_t *x, int ldx, int P,
                    const cu_gemv_epi *ep);

/* ---- cu_route.cu: the mixture-of-experts layer's passes (cu_moe.h) ---- */

#define CU_MOE_MAX_K 32  /* experts a row (top_k: a lane of the pick's warp each) */
#define CU_MOE_MAX_E 512 /* experts a layer */
struct tm_moe_route;
/* row t of T: p = softmax (sigmoid where sigmoid) of logit[t][0..E) + rb (rb [E] or NULL), then moe_route.h's pick
 * (r: its corr a device pointer) into sel [T][K] and w [T][K]; where sg is not NULL, sg[t] = sigmoid(logit[t][E]) (the
 * shared expert's gate). logit row stride ld. E <= CU_MOE_MAX_E, K <= 32 */
void cu_moe_pick(cu_stream s, const float *logit, int ld, int T, const float *rb, const struct tm_moe_route *r,
                 int sigmoid, int *sel, float *w, float *sg);
/* logit[t][e] (row stride ld) = h[t] · router[e] for t < T, e < E1 (h [T][D], router [E1][D], f32), each a fixed
 * order of sums whatever T (a decode step's routing independent of its batch) */
void cu_moe_router(cu_stream s, float *logit, int ld, const float *h, const float *router, int T, int E1, int D);
/* xe[j][D] = h[order[j]][D] for j < n (bf16) */
void cu_moe_gather(cu_stream s, uint16_t *xe, const uint16_t *h, const int *order, int n, int D);
/* f[t][D] = Σ over row t's K choices, in expert order, of w[t][k] (ye[slot[t K + k]] + db[sel[t][k]]) (slot NULL: the
 * choice's own index t K + k; db [E][D] or NULL), plus g ys[t] where ys is not NULL (g = sg[t], or 1 where sg is NULL) */
void cu_moe_combine(cu_stream s, float *f, const float *ye, const int *slot, const int *sel, const float *w, int T, int K,
                    const float *db, const float *ys, const float *sg, int D);

/* The choices sorted by expert on the device (no synchronisation), for cu_moe_mm: P = T K choices sel [P] (each in
 * [0, E), E <= CU_MOE_MAX_E) in slots grouped by expert, an expert's pairs in pair order (tm_moe_group's order):
 * slot[p] = pair p's slot, order[j] = the row (p / K) of the pair in slot j; tiles[0] = n, the experts' row tiles,
 * and tiles[1 + 3 i ..] = tile i's expert, first slot and rows (1..CU_MOE_TM), by expert. tiles: 1 + 3
 * cu_moe_max_tiles(P, E) ints */
#define CU_MOE_TM 64 /* rows of a tile of cu_moe_mm */
static inline int cu_moe_max_tiles(int P, int E) { return (P + CU_MOE_TM - 1) / CU_MOE_TM + (E < P ? E : P); }
void cu_moe_sort(cu_stream s, const int *sel, int P, int K, int E, int *order, int *slot, int *tiles);

/* ---- cu_moe_mm.cu: the experts' products over their row tiles, on tensor cores ---- */

/* A stack of E equal matrices [E][Ne][K] in one form: packed (q: the whole stack, q->N = E Ne rows, enc 4 or 8)
 * or bf16 (bf [E Ne][K]; q NULL or q->q NULL) */
typedef struct cu_stack {
    const cu_qmat *q;
    const uint16_t *bf;
    int Ne, K;
} cu_stack;
/* whether cu_moe_mm takes the stack: K a multiple of 64, packed groups whole in a unit */
int cu_moe_mm_ok(const cu_stack *w);
/* For each tile (cu_moe_sort's tiles, at most max_tiles) of expert e, slots j of x [slots][K] bf16:
 *   ep->gated: ep->g[j][f] (row stride ep->ldg) = bf16(glu(act, x[j] · W_e[f] + b[e][f], x[j] · W_e[F + f] +
 *              b[e][F + f])) for f < F = ep->F (Ne = 2F; ep->b [E][2F] or NULL);
 *   else:      y[j][n] (row stride ldy, f32) = x[j] · W_e[n] for n < Ne.
 * Sums in f32 over the bf16 weights (a packed weight dequantized as cu_dequant_q rounds it). sm_80 and later. */
void cu_moe_mm(cu_stream s, const cu_stack *w, const int *tiles, int max_tiles, const uint16_t *x, float *y, int ldy,
               const cu_gemv_epi *ep);

/* blocks of one launch of the GEMV over w (a group of up to 8 sequences; cu_gemv_q's and cu_gemv_res's), and in
 * *ks the warps that split each row set's K */
int cu_gemv_blocks(const cu_qmat *w, int *ks);

/* the GEMV's warps a row set (cu_gemv.cu: 1, 2, 4 or 8; anything else: its own choice by the shape), for
 * the kernel's tests and tools/cu_gemv_bench.c; process-wide, not for the engine's use */
void cu_gemv_force_ks(int ks);
/* the indexed launches' lanes a row set (8, 16 or 32; anything else: their own choice), as cu_gemv_force_ks */
void cu_gemv_force_lg(int lg);

/* out[N][K] bf16 = w (rounded to nearest even) */
void cu_dequant_q(cu_stream s, const cu_qmat *w, uint16_t *out);

#ifdef __cplusplus
}
#endif

#endif
