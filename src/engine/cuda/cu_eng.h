/* engine/cuda/cu_eng.h: the CUDA engine's context (cu_eng) and what its two host files share (private to
 * engine/cuda): cuda_engine.c binds the model and runs a forward call's layers (a prefill chunk or a decode
 * step); cu_step.c runs a decode step (design block "Decode" there) through those layers. Shapes as in
 * cuda-impl.h: T rows, D hidden, H / Hk query / kv heads, Dh head dim, V vocab, L layers. */
#ifndef TM_ENGINE_CUDA_CU_ENG_H
#define TM_ENGINE_CUDA_CU_ENG_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "engine/cuda/cu_mat.h"
#include "engine/cuda/cu_mla.h"
#include "engine/cuda/cu_moe.h"
#include "engine/cuda/cu_smset.h"
#include "engine/cuda/cuda-impl.h"
#include "engine/engine.h"
#include "model/model.h"

#define CU_MAX_T 512 /* rows per chunk (the runtime's largest) */
#define CU_MAX_B 64  /* sequences per decode step */
#define CU_DSEQ 256  /* sequences whose device KV the engine tracks (the least recently used goes) */
#define CU_SEG 256   /* decode attention: keys a chunk (the scores' room in shared memory) */
#define CU_GEMV_MAX 16 /* prefill rows up to which a packed weight runs the GEMV (more: dequantized, cuBLAS) */
#define CU_GEMV_DUAL 16 /* decode rows up to which a packed weight with a bf16 copy runs the GEMV (more: cuBLAS) */
#define BLAS_WS ((size_t)32 << 20)

/* what the device arena holds of one sequence (design block "Decode") */
typedef struct cu_dseq {
    uint64_t uid;                     /* tm_kv_seq.uid; 0: a free slot */
    int n;                            /* positions [0, n) are on the device */
    int np, pcap;                     /* pages[np]: the ids covering [0, n) */
    int32_t *pages;
    uint64_t used;                    /* last step (LRU) */
} cu_dseq;

typedef struct cu_layer {
    cu_mat wqkv, wo, wgu, wd;         /* [(H+2Hk)Dh][D], [D][H Dh], [2F or F][D], [D][F] (cu_mat.h: bf16 or packed) */
    float *attn_norm, *attn_norm_b, *ffn_norm, *ffn_norm_b, *attn_out_norm, *ffn_out_norm; /* [D] or NULL */
    float *bqkv, *bo, *bgu, *bd;      /* biases or NULL */
    float *q_norm, *k_norm, *q_norm_b, *k_norm_b; /* [Dh] ([H][Dh] / [Hk][Dh] per head; whole: [H Dh]) */
    float *sinks;                     /* [H] or NULL */
    cu_moe *moe;                      /* a mixture-of-experts FFN (cu_moe.h; wgu, wd empty), or NULL: dense */
    cu_mla *mla;                      /* latent attention (cu_mla.h; wqkv empty, wo [D][H v]), or NULL */
} cu_layer;

typedef struct cu_rope {
    float *inv, *inv_long;            /* device [rot_dim / 2] */
    int rot_dim;
    float scale;
    int64_t long_from;                /* a call reaching past this many positions uses inv_long */
} cu_rope;

/* TANDEM_CUDA_PROFILE=1 (a measurement switch): CUDA events around every GEMM and attention launch,
 * the q/k/v pass, the mixture-of-experts block and the head's product, summed per chunk after its
 * synchronisation; unbind prints the totals (stderr) */
#define PROF_EV 1024
enum { PROF_GEMM, PROF_ATTN, PROF_QKV, PROF_MOE, PROF_HEAD, PROF_NCAT };
typedef struct cu_prof {
    int on, n;                        /* events recorded in this chunk */
    cudaEvent_t ev[PROF_EV], t0, t1;  /* pairs; the chunk's first and last */
    int cat[PROF_EV / 2];
    double ms[PROF_NCAT], total_ms, host_wait_s, gemm_flop;
    long chunks, rows;
    cudaEvent_t d0, d1;               /* a decode step's launches on the GPU */
    double dec_gpu_ms, dec_host_s;    /* decode steps: their GPU time, the calls' wall time */
    long steps, step_rows;
    double dms[PROF_NCAT];            /* decode steps launched one by one: the categories' GPU time */
    int decoding;                     /* such a step's launches are being made (its GEMMs' flops are not the prefill's) */
    int gemm_cat;                     /* the category gemm() counts its product in (PROF_GEMM, the head's PROF_HEAD) */
    long dsteps;                      /* and how many such steps */
} cu_prof;

typedef struct cu_eng {
    int V, D, L, H, Hk, Dh, F, gated, parallel, qk_whole, qk_heads, norm_kind, act, cap;
    float eps, embed_scale, attn_scale, attn_softcap, final_softcap, residual_scale, logits_div, logits_mul, clip;
    int pos_off, max_pos;
    tm_layer_desc *layer;             /* [L] host */
    cu_rope rope[2];
    cublasHandle_t blas;
    void *blas_ws;                    /* its workspace, BLAS_WS bytes */
    cudaStream_t st;                  /* the call's stream (lane_pick): st0, or part.st */
    cudaEvent_t ev[2];                /* export copy of layer l done: ev[l % 2] (the call's: ev0 or part.ev) */
    cudaStream_t st0;                 /* the engine's stream on the whole device, and its events */
    cudaEvent_t ev0[2];
    cu_smset part;                    /* its share of the device (tm_engine_opts.part; st NULL: none) */
    int lane;                         /* the call runs on: 0 the whole device, 1 the part */
    int sms0;                         /* the device's multiprocessors */
    int prio;                         /* its streams' priority (tm_engine_opts.urgent: the greatest; else 0) */
    uint16_t *embed;                  /* bf16 [V][D] */
    cu_mat lm_head;                   /* [V][D] (bf16: lm_head.bf == embed when tied and not packed) */
    cu_mm mm;                         /* the products' handles and scratch (cu_mat.h) */
    float *final_norm, *final_norm_b, *lm_head_b, *pos_embed, *embed_norm, *embed_norm_b, *alibi;
    cu_layer *w;                      /* [L] */
    uint16_t *kc, *vc;                /* the mirror [L][Hk][cap][Dh] bf16 */
    /* scratch for CU_MAX_T rows */
    int32_t *tok;
    float *x, *x0, *qkv, *a, *gu, *logits;
    uint16_t *h16, *att16, *g16;
    void *exp_dev;                    /* export rows [2][Hk][T][Dh] of the cache dtype (<= 4 bytes), then scales */
    uint8_t *exp_host[2];             /* pinned copies of it, by layer parity */
    size_t exp_bytes;
    uint8_t *in_host, *in_dev;        /* ingest: pinned and device blocks, in_cap bytes each */
    size_t in_cap;
    /* what the mirror holds: positions [0, m_n) of sequence m_seq (uid m_suid) of cache m_kv (m_kuid; pages m_pages) */
    const tm_kv_cache *m_kv;
    const tm_kv_seq *m_seq;
    uint64_t m_kuid, m_suid;
    int32_t *m_pages;
    int m_n, m_np, m_pcap;
    uint64_t m_epoch;
    uint32_t m_rewinds;               /* the sequence's tm_kv_seq.rewinds when the mirror was written */
    cu_prof *prof;                    /* NULL unless TANDEM_CUDA_PROFILE=1 */
    float *rows_host, *rows_dev;      /* every row's outputs (rows_out): pinned, rows_cap bytes; [ROWS_BLK][V] */
    size_t rows_cap;
    float *attn_part;                 /* the attention's key segments (cu_attention_scratch), attn_smax of them */
    int attn_smax;
    int attn_split;                   /* TANDEM_CUDA_SPLIT=N: N segments whatever the context (tests); 0: by context */
    /* decode (design block "Decode") */
    uint8_t *arena;                   /* the device copy of cache a_uid's arena (tm_kv_cache_bytes) */
    uint64_t a_uid;
    cu_dseq ds[CU_DSEQ];
    uint64_t clock;                   /* steps so far */
    uint8_t *up_host;                 /* pinned staging of page uploads, up_cap bytes */
    size_t up_cap;
    int32_t *meta_host, *meta_dev;    /* tokens [B], pos [B], page tables [B][ptw]: CU_MAX_B rows' room */
    uint8_t *dexp_dev, *dexp_host;    /* a step's export rows, every layer: [L] regions of cu_eng_dexp_stride (CU_MAX_B rows
                                         of 4 bytes at most), made at the first step */
    float *dlogits;                   /* [CU_MAX_B][V] */
    int32_t *amax_dev, *amax_host;    /* a step's greedy tokens [CU_MAX_B] (tm_decode_args.argmax) */
    void *amax_scr;                   /* and cu_argmax's scratch (cu_argmax_scratch(CU_MAX_B) bytes) */
    unsigned *amax_cnt;               /* and its merge's counts [CU_MAX_B] (zeroed once, left zeroed) */
    unsigned *rcnt;                   /* the GEMV residual epilogue's counts [CU_RES_GROUPS] (res_step) */
    int fuse_res;                     /* res_step fuses: 2 by the launch's shape (fuse_here; the default), 1 wherever
                                         it can, 0 never (TANDEM_CUDA_FUSE_RES=1 / 0) */
    int sms;                          /* the multiprocessors the call's stream runs on */
    float *dpart;                     /* decode attention's key segments, dpart_cap bytes */
    unsigned *dcnt;                   /* and their merge's counts [CU_MAX_B][H] (cu_dec_attn_args.cnt) */
    size_t dpart_cap;
    double t_upload;                  /* seconds spent bringing pages up (the profile prints it) */
    int dseg_force;                   /* the decode attention's key segments a row: TANDEM_CUDA_DEC_SEGS=N (0: one),
                                         a test and measurement switch; -1: by the batch (dec_segs) */
    int dec_mma_from;                 /* the decode attention's grouped tensor-core kernel on bf16 / int8 pages
                                         (cu_dec_attn_args.mma) for steps whose longest row spans this many
                                         positions or more, a block a query head below (cu_step_mma_span);
                                         TANDEM_CUDA_DEC_MMA=0: never (INT_MAX, a test switch) */
    long dec_kernel_steps[2];         /* decode steps run by the attention's kernel: [0] a block a query head,
                                         [1] grouped (test_cuda_decode reads them) */
    int ptw;                          /* page table entries per sequence: the context's pages */
    cudaGraphExec_t graph[2][CU_MAX_B + 1][2][2]; /* decode steps captured, by lane (a graph runs where it
                                         was captured), batch, RoPE long factors (or not) and the decode
                                         attention's kernel (grouped or not) */
    int g_dt;                         /* the cache dtype code they were captured for */
    int use_graphs;                   /* TANDEM_CUDA_GRAPHS=0: none (a measurement switch) */
    int pdl;                          /* launches with programmatic dependent launch (cu_launch.cuh): sm_90 and
                                         later, unless TANDEM_CUDA_PDL=0 (a measurement switch); set for each
                                         call's launches, as the flag is the process's */
    int h_fused;                      /* a forward call: h16 holds the next layer's attention norm of x already */
    int packed;                       /* quantized stage weights stay packed (bound for decode; TANDEM_CUDA_PACKED=0:
                                         bf16, a measurement switch) */
    int dual;                         /* packed layer matrices keep their bf16 copy too, for steps of more than
                                         CU_GEMV_DUAL rows (where the weights fit twice; TANDEM_CUDA_BF16_COPY=0|1) */
    cu_moe_ws mws;                    /* the mixture-of-experts layers' scratch, CU_MAX_T rows (none: dense) */
    cu_mla_ws lws;                    /* the latent attention layers' scratch, CU_MAX_T rows (none: not MLA) */
    int moe_capture_rows;             /* decode steps of up to this many rows run every MoE layer without a
                                         synchronisation, so are captured (cu_moe_capture_rows; INT32_MAX: no MoE layer) */
    int moe_paths;                    /* cu_moe_forward's paths (CU_MOE_PATH_*; TANDEM_CUDA_MOE_IX=0 and
                                         TANDEM_CUDA_MOE_MM=0 take one off: test and measurement switches) */
} cu_eng;

/* A call's shape for cu_eng_layer: a prefill chunk (row t at pos0 + t; K/V into the mirror, out through the
 * export slots a layer at a time) or a decode step (row b at dpos[b]; K/V into the device arena, out
 * with the step's end) */
typedef struct cu_call {
    int T, n_valid, pos0;
    int64_t span;                     /* the call's last position + 1: which RoPE frequencies */
    tm_dtype kv_dt;                   /* the cache's */
    int decode;
    const int *dpos;                  /* decode: device [B] positions */
    cu_dec_attn_args da;              /* decode: the arena's view, layer_off set per layer */
    size_t layer_bytes;               /* decode: the arena's (page, layer) region */
    size_t dstride;                   /* decode: export bytes per layer */
} cu_call;

static inline int kv_code(tm_dtype dt) { return dt == TM_DT_BF16 ? 0 : dt == TM_DT_F16 ? 1 : dt == TM_DT_F32 ? 2 : 3; }
static inline size_t kv_esz(tm_dtype dt) { return dt == TM_DT_F32 ? 4 : dt == TM_DT_Q8PC ? 1 : 2; }

/* ---- cuda_engine.c ---- */

/* a profile event (TANDEM_CUDA_PROFILE=1) opening (end 0) or closing a launch of category cat */
void cu_prof_mark(cu_eng *e, int cat, int end);
/* the cache geometry and dtype a call may use (who names the caller in the error) */
int cu_eng_check_cache(const cu_eng *e, const tm_kv_cache_opts *o, const char *who, tm_err *err);
/* bytes of one layer's export region in a decode step of B rows of esz-byte elements: rows [2][Hk][B][Dh],
 * then scales [2][Hk][B] f32 (cu_qkv_post's layout), rounded up to 256 */
size_t cu_eng_dexp_stride(const cu_eng *e, int B, size_t esz);
/* x [T][D] := the embedding of tok [T] (row t at dpos[t] where dpos, a decode step's device positions; else pos0 + t) */
void cu_eng_embed(cu_eng *e, int T, int pos0, const int *dpos);
/* layer l of call c over x [T][D] */
int cu_eng_layer(cu_eng *e, const cu_call *c, int l, tm_err *err);
/* logits [R][V] into dev of the rows x + (row0 + r) * D */
int cu_eng_logits(cu_eng *e, float *dev, int row0, int R, tm_err *err);
/* export rows of layer l (layout [2][Hk][T] rows of the cache's dtype, then their scales) into the host pages:
 * row t < n at position pos ? pos[t] : pos0 + t of sequence seqs ? seqs[t] : seq */
void cu_eng_scatter(const cu_eng *e, tm_kv_cache *kv, int l, const uint8_t *rows, int T, int n, int pos0,
                    const int *pos, const tm_kv_seq *seq, tm_kv_seq *const *seqs);

/* ---- cu_step.c: the decode step ---- */

/* one decode step of a->B sequences (tm_engine_vt.decode, on the stream lane_pick chose) */
int cu_step_decode(cu_eng *e, const tm_decode_args *a, tm_err *err);
/* the decode attention of layer l's step (which also puts the export rows exp, rb bytes each, into the pages) */
void cu_step_attention(cu_eng *e, const cu_call *c, int l, int window, const float *sinks, uint8_t *exp, size_t rb);
/* the span from which a step runs the grouped decode attention kernel (e->dec_mma_from's default) */
int cu_step_mma_span(int H, int Hk);
/* the captured decode steps, all of them, destroyed (a pointer they hold moved, or the cache's dtype) */
void cu_step_graphs_drop(cu_eng *e);

#endif
