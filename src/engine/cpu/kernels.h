/* engine/cpu/kernels.h: the CPU kernels (GEMV for decode, GEMM for prefill,
 * the small ops around them, attention) behind one dispatch table.
 *
 *   tm_kernels k;
 *   tm_kernels_best(&k);                          // AMX > AVX-512 > AVX2 > scalar, by CPUID
 *   // or: tm_kernels_select("avx2", &k, &err);  // by name, for tests and --decode ENGINE
 *
 *   tm_kweight *w;                                // bind once: GEMV reads the HF layout (int4: its own)
 *   tm_kpack_init(&w, &tensor, TM_KPACK_GEMV | TM_KPACK_GEMM, &err);  // GEMM repacks
 *
 *   tm_kbuf ws = {0};                             // caller-owned scratch, grows as needed
 *   tm_kact x = {.M = B, .K = K, .f32 = xf};      // activations [B][K]
 *   k.gemv_q4(w, &x, y, &ws, pool);               // y[B][N] = x . W^T   (B <= 8)
 *   k.gemm_bf16(w, &x, y, &ws, pool);             // y[M][N], M any (prefill chunk)
 *   tm_kmatmul(&k, w, &x, y, &ws, pool, &err);    // picks the op from w's encoding and M
 *   tm_kbuf_free(&ws); tm_kpack_free(w);
 *
 * Numerics (normative: every variant computes this, the scalar reference in
 * ref_*.c spells it out):
 *  - int4 and int6 weights (Q4*, Q6G64): x is quantized per 32-element block b of each row:
 *    s_b = max|x_b| / 127, q = round_half_even(x * (127 / max|x_b|)) (0 if the
 *    block is all zero), then y = sum_b ws(b) * s_b * sum_{k in b} q_w[k] q_x[k]
 *    with exact integer block dots (VNNI: dpbusd on nibbles q+8 (int6: q+32, its top
 *    2 bits merged in), minus 8 (32) sum q_x, the accumulator started from that term:
 *    each block's dot exact in int32, then converted and scaled once).
 *  - int8 weights (Q8PC, decode and W8A8 prefill): x is quantized per row:
 *    s = max|x| / 127, q as above; y = ws[n] * s * sum_k q_w q_x (exact int32).
 *    Prepared int8 activations are stored offset-binary: u8 = q + 128
 *    (what VNNI dpbusd and AMX tdpbusd take; the weight column sums correct it).
 *  - bf16 weights: x is rounded to bf16 (nearest even), products summed in f32.
 * GEMV/GEMM results differ from the reference only by f32 summation order (and
 * that rounding). A GEMV row's result does not depend on the batch it runs in.
 *
 * Threads: GEMV splits N across the pool; GEMM splits M x N blocks. pool may
 * be NULL (run on the calling thread). Ops never allocate except through ws.
 * Shapes use the legend of core/tensor.h. */
#ifndef TM_ENGINE_CPU_KERNELS_H
#define TM_ENGINE_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"

struct tm_pool;

#define TM_KGEMV_MAX_B 8   /* GEMV ops take at most this many rows of x */

/* ---- scratch ---------------------------------------------------------------- */

typedef struct tm_kbuf {
    void *p;      /* 64-byte aligned, cap bytes */
    size_t cap;
} tm_kbuf;

/* tm_kbuf_reserve: make ws at least n bytes (contents not kept). TM_E_NOMEM. */
int tm_kbuf_reserve(tm_kbuf *ws, size_t n);
void tm_kbuf_free(tm_kbuf *ws);

/* ---- weights --------------------------------------------------------------- */

typedef struct tm_kweight tm_kweight;

enum {
    TM_KPACK_GEMV = 1, /* decode: reads the tensor's own layout (borrowed), adds row sums for int8;
                          int4 is repacked into a copy (the GEMV layout, kernels-impl.h) */
    TM_KPACK_GEMM = 2, /* prefill: repack bf16/int8 into panels (owned), see kpack.c */
    TM_KPACK_HUGE = 4, /* with GEMV: stream a copy in transparent huge pages (owned) instead of the
                          tensor's own bytes, where the kernel offers them (tm_khuge_ok); the copy
                          is freed with the weight */
};

/* Memory the kernels stream (GEMM panels, GEMV copies, the workspace, the
 * engines' row buffers): from 2 MB up, rounded up to 2 MB and 2 MB aligned
 * with transparent huge pages asked for (madvise), else 64-byte aligned;
 * free() releases it. A decode step walks its weights once, so on 4 KB
 * pages it takes a TLB miss every 4 KB: huge pages measured int4 GEMV
 * 38.5 -> 46 GB/s (2 threads) and 22.7 -> 25.8 (1) on Zen 4. GEMM panels
 * (kpack.c) take huge pages from TM_KPANEL_HUGE_MIN up (see there).
 * tm_khuge_ok: 1 if the kernel's THP mode is "always" or "madvise" and
 * TANDEM_HUGEPAGES is not 0 (read once). */
#define TM_KPANEL_HUGE_MIN ((size_t)512 << 10)
void *tm_khuge_alloc(size_t n);
int tm_khuge_ok(void);

/* The block-32 family: weights whose GEMV quantizes x per block of 32
 * (gemv_q4 takes them all): int4 (Q4PC, Q4G64, Q4G32) and int6 (Q6G64). */
static inline int tm_kdt_block32(tm_dtype d)
{
    return d == TM_DT_Q4PC || d == TM_DT_Q4G64 || d == TM_DT_Q4G32 || d == TM_DT_Q6G64;
}

/* tm_kpack_init: bind a weight tensor [N][K] in BF16, Q8PC, Q4PC, Q4G64,
 * Q4G32 or Q6G64 (TM_KPACK_GEMM: BF16 and Q8PC only). The tensor's data and scales
 * are borrowed (e.g. an mmap) and must outlive the tm_kweight (an int4
 * tensor's are copied: its data repacked to the GEMV layout). Errors name
 * the tensor and the field (dtype, shape, nbytes). */
int tm_kpack_init(tm_kweight **out, const tm_tensor *w, int uses, tm_err *err);
void tm_kpack_free(tm_kweight *w);

/* tm_kpack_concat: one weight of the rows of parts[0..n) in turn, [sum N][K]
 * (one dtype and K): e.g. q, k and v, which read the same input, as one
 * matmul. The data and scales are copied (on huge pages from 2 MB up) and
 * owned; uses as tm_kpack_init. name names the result in errors. */
int tm_kpack_concat(tm_kweight **out, const tm_tensor *const *parts, int n, int uses, const char *name, tm_err *err);

/* tm_kpack_glu: one GEMM weight for y[M][F] = act(x·gateᵀ) ⊙ (x·upᵀ), the
 * FFN's gate and up projections [F][K] (both bound with TM_KPACK_GEMM, one
 * dtype and shape): their panels interleaved, gate panel p then up panel p
 * (copied; gate and up keep theirs). GEMM only, for kernels with gemm_glu:
 * the epilogue writes F columns, not 2F. act: TM_KGLU_*. */
enum { TM_KGLU_SILU = 1, TM_KGLU_GELU_TANH = 2, TM_KGLU_GELU = 3, TM_KGLU_RELU = 4, TM_KGLU_RELU2 = 5,
       TM_KGLU_SWIGLU_OAI = 6 }; /* RELU, RELU2, SWIGLU_OAI: no glu epilogue */
/* GPT-OSS's clamped SwiGLU constants (model.h's TM_SWIGLU_OAI_*: transformers' GptOssExperts fixes them) */
#define TM_KSWIGLU_OAI_LIMIT 7.0f
#define TM_KSWIGLU_OAI_ALPHA 1.702f
int tm_kpack_glu(tm_kweight **out, const tm_kweight *gate, const tm_kweight *up, int act, tm_err *err);
/* Free w's GEMM panels (a weight whose GEMMs run elsewhere, e.g. fused by
 * tm_kpack_glu): it stays a GEMV weight. */
void tm_kpack_drop_panels(tm_kweight *w);

/* tm_kpack_unpack: rebuild the tensor's layout (data, and scales if any)
 * from the GEMM panels, for tests: must equal the original bytes. */
int tm_kpack_unpack(const tm_kweight *w, void *data, float *scales, tm_err *err);

int tm_kweight_n(const tm_kweight *w);
int tm_kweight_k(const tm_kweight *w);
tm_dtype tm_kweight_dtype(const tm_kweight *w);
/* operations (2 per multiply-add) of one matmul on M rows; a glu weight's N
 * outputs each take a gate and an up row */
double tm_kweight_ops(const tm_kweight *w, int M);
/* bytes one GEMV streams (data + scales): for GB/s figures */
size_t tm_kweight_gemv_bytes(const tm_kweight *w);

/* ---- activations ------------------------------------------------------------ */

/* Rows of x given as f32, or already prepared (e.g. by a fused RMSNorm).
 * An op uses a prepared form it can take and otherwise prepares from f32
 * into ws; at least one form must be present. */
typedef struct tm_kact {
    int M, K;                 /* rows (B or T), columns */
    const float *f32;         /* [M][K] or NULL */
    const uint16_t *bf16;     /* [M][ld] bf16, zero past K; or NULL */
    const uint8_t *q8;        /* [M][ld] offset-binary int8 (q + 128), 128 past K; or NULL */
    const float *q8_scale;    /* [M] scale per row of q8 */
    int ld;                   /* row stride of bf16/q8 in elements: tm_kact_ld(K) */
} tm_kact;

/* tm_kact_ld: the row stride of prepared activations: K rounded up to 64. */
static inline int tm_kact_ld(int K) { return (K + 63) & ~63; }

/* ---- attention ------------------------------------------------------------- */

/* The widest head the attention kernels take (DeepSeek's absorbed latent head is 576) */
#define TM_KATTN_MAX_DH 1024
/* The flash prefill kernels read keys in blocks that start at multiples of a divisor of this, from the block
 * holding the first key a chunk's first query sees: a caller may leave the rows before
 * (pos0 - window + 1) / TM_KATTN_KEY_BLOCK * TM_KATTN_KEY_BLOCK unwritten (cpu_engine.c's int8 chunk copy) */
#define TM_KATTN_KEY_BLOCK 64

/* Prefill attention for one sequence: T queries at positions pos0 .. pos0+T-1
 * over keys at positions 0 .. pos0+T-1 (P = pos0 earlier keys, then the
 * chunk), causal; flash-style (online softmax, no T x P matrix). */
typedef struct tm_kattn_prefill {
    int T, H, Hk, Dh;          /* H % Hk == 0 (GQA: head h reads kv head h / (H/Hk)) */
    int pos0;                  /* P */
    const float *q;            /* [T][H][Dh] */
    const void *k, *v;         /* [Hk][kv_stride][Dh], positions 0 .. pos0+T-1 valid */
    tm_dtype kv_dtype;         /* TM_DT_BF16 or TM_DT_F32 */
    int kv_stride;             /* tokens between heads in k/v (>= pos0 + T) */
    float *out;                /* [T][H][Dh] */
    float scale;               /* logit scale, usually 1/sqrt(Dh) */
    float softcap;             /* > 0: s = softcap * tanh(s / softcap); 0: off */
    int window;                /* > 0: key j visible from query i iff i - j < window; 0: off */
    const float *alibi;        /* [H] ALiBi slopes, or NULL: s += alibi[h] * (j - i), after the scale and the
                                  soft-cap (BLOOM, MPT) */
    /* Paged K/V (optional, the decode pages' layout): with page_table set,
     * key/value position j lies in page page_table[j / page_size], slot
     * j % page_size, at k (v) + page * page_bytes + kv head * head_bytes +
     * slot * Dh elements; kv_stride is unused and kv_dtype may also be
     * TM_DT_F16. n_pages > 0 bounds the page ids. The stateful hand-off's
     * prefill chunks run here, over the sequence's decode pages. */
    const int32_t *page_table; /* [ceil((pos0 + T) / page_size)] or NULL */
    int page_size, n_pages;
    size_t page_bytes, head_bytes;
    const float *sinks;        /* [H] attention sinks or NULL: head h's softmax sum has one more term,
                                  e^(sinks[h]), with no value (GPT-OSS): o = Σ e^(s_j) v_j / (Σ e^(s_j) + e^sink) */
} tm_kattn_prefill;

/* Decode attention: one query per sequence over a paged KV cache (also
 * prefill over paged KV: one "sequence" per chunk row, ctx_len = pos + 1).
 * Page p of K is at k_pages + p * page_bytes and holds Hk blocks, head_bytes
 * apart; block h is
 *   bf16 / f16:  x[page_size][Dh]
 *   int8 (TM_DT_Q8PC):  scale[page_size] f32, then q[page_size][Dh] int8;
 *                key/value row r = scale[r] * q[r][.] (runtime/kvcache.h)
 * (V likewise at v_pages). Numerics of int8 KV (normative, ref_attn.c): the
 * query row of each head is quantized like an activation (s_q = max|q|/127,
 * round half to even), a score is scale * s_q * s_k * sum_d q_q q_k (an
 * exact integer dot), values are s_v * q_v in f32. */
typedef struct tm_kattn_decode {
    int B, H, Hk, Dh;
    const float *q;            /* [B][H][Dh] */
    const void *k_pages, *v_pages; /* page p at base + p * page_bytes: Hk blocks (above) */
    size_t page_bytes;         /* bytes between pages (>= Hk * head_bytes) */
    int page_size;             /* tokens per page */
    tm_dtype kv_dtype;         /* TM_DT_BF16, TM_DT_F16 or TM_DT_Q8PC */
    int n_pages;               /* pages in the pool, to check every page id is in [0, n_pages);
                                  0: unchecked (the caller vouches for the page table) */
    const int32_t *const *page_table; /* [B] -> int32 [ceil(ctx_len / page_size)] page ids */
    const int *ctx_len;        /* [B] keys per sequence (query at position ctx_len-1) */
    float *out;                /* [B][H][Dh] */
    float scale, softcap;      /* as above */
    int window;                /* as above */
    size_t head_bytes;         /* bytes from block h to h+1 in a page; 0: the block's own size,
                                  page_size * Dh * 2 (bf16/f16) or 4 page_size + page_size * Dh (int8) */
    const float *alibi;        /* [H] ALiBi slopes or NULL, as above */
    const float *sinks;        /* [H] attention sinks or NULL, as above */
} tm_kattn_decode;

/* ---- the table ------------------------------------------------------------- */

typedef struct tm_kernels {
    const char *name;          /* variant: "scalar", "avx2", "avx512", "amx" (or "amx-emu") */

    /* Decode GEMV, y[M][N] = x[M][K] . W[N][K]^T for M = 1..TM_KGEMV_MAX_B
     * (gemv_q4: the int4 encodings and int6).
     * Each returns TM_OK, TM_E_INVALID (w's dtype/shape vs the op, M out of
     * range) or TM_E_NOMEM (ws). */
    int (*gemv_q4)(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool);
    int (*gemv_q8)(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool);
    int (*gemv_bf16)(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool);

    /* Prefill GEMM, y[M][N] = x[M][K] . W[N][K]^T, any M; w packed with
     * TM_KPACK_GEMM. bf16: bf16 x and w, f32 sums. q8: W8A8 per-row x scales. */
    int (*gemm_bf16)(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool);
    int (*gemm_q8)(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool);
    /* The fused gate/up GEMM on a tm_kpack_glu weight (bf16 or int8 as
     * above), y[M][F]; NULL where a variant has none (the engine then runs
     * gate and up apart). */
    int (*gemm_glu)(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool);
    /* gemm_bf16 or gemm_q8 by w's encoding (gemm_glu on a glu weight) with y[M][N] stored in
     * bf16, each f32 result rounded to nearest even (a denormal one to zero, as AVX-512-BF16's
     * vcvtne2ps2bf16 does): half the bytes written, and half read back by the pass that
     * consumes y (session 18's run 82 put the f32 stores at a quarter of Qwen's gate/up GEMM).
     * NULL where a variant has none; a variant that has it and gemm_glu takes glu weights. */
    int (*gemm_bf16y)(const tm_kweight *w, const tm_kact *x, uint16_t *y, tm_kbuf *ws, struct tm_pool *pool);

    /* y[T][D] = x / rms(x) * (w or 1 + w), rms = sqrt(mean(x^2) + eps). y may be x. */
    void (*rmsnorm)(float *y, const float *x, const float *w, int T, int D, float eps, int add_one);
    /* Fused RMSNorm -> bf16 rows yb[T][ld] (zero past D) */
    void (*rmsnorm_bf16)(uint16_t *yb, int ld, const float *x, const float *w, int T, int D, float eps, int add_one);
    /* Fused RMSNorm -> offset-binary int8 rows yq[T][ld] (128 past D), scale ys[T] */
    void (*rmsnorm_q8)(uint8_t *yq, float *ys, int ld, const float *x, const float *w, int T, int D, float eps, int add_one);
    /* y[T][D] = (x - mean(x)) / sqrt(var(x) + eps) * w + b (LayerNorm, var biased; b may be NULL).
     * y may be x. */
    void (*layernorm)(float *y, const float *x, const float *w, const float *b, int T, int D, float eps);
    /* Per-row int8 quantization of x[T][D] into yq[T][ld], ys[T] (see Numerics) */
    void (*quant_q8)(uint8_t *yq, float *ys, int ld, const float *x, int T, int D);
    /* y[n] = silu(g[n]) * u[n];  y may alias g or u; u NULL: y[n] = silu(g[n]) (an FFN without a gate).
     * The same for the two GELUs. */
    void (*silu_mul)(float *y, const float *g, const float *u, size_t n);
    /* y[n] = gelu_tanh(g[n]) * u[n] (0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))) */
    void (*gelu_tanh_mul)(float *y, const float *g, const float *u, size_t n);
    /* y[n] = gelu(g[n]) * u[n], the exact GELU 0.5 g (1 + erf(g / sqrt 2)) */
    void (*gelu_mul)(float *y, const float *g, const float *u, size_t n);
    /* y[n] = max(g[n], 0) * u[n] (OPT's MLP, u NULL) */
    void (*relu_mul)(float *y, const float *g, const float *u, size_t n);
    void (*relu2_mul)(float *y, const float *g, const float *u, size_t n); /* max(g, 0)^2 (Nemotron) */
    /* GPT-OSS: g' = min(g, 7), u' = clamp(u, -7, 7) (u NULL: 0), y = g' sigmoid(1.702 g') (u' + 1) */
    void (*swiglu_oai_mul)(float *y, const float *g, const float *u, size_t n);
    /* RoPE, rotate-half (HF Llama): x[T][H][Dh] in place; cos, sin [T][Dh/2].
     * x1 = x[i], x2 = x[i + Dh/2]: x[i] = x1 c - x2 s, x[i + Dh/2] = x2 c + x1 s. */
    void (*rope)(float *x, const float *cos_t, const float *sin_t, int T, int H, int Dh);
    /* In-place softmax of each row of x[R][n] (max-subtracted) */
    void (*softmax)(float *x, int R, int n);
    /* Row conversions (RNE; NaN stays NaN) */
    void (*f32_to_bf16)(uint16_t *y, const float *x, size_t n);
    void (*bf16_to_f32)(float *y, const uint16_t *x, size_t n);
    void (*f32_to_f16)(uint16_t *y, const float *x, size_t n);
    void (*f16_to_f32)(float *y, const uint16_t *x, size_t n);

    /* Attention (see the structs above); TM_E_INVALID on bad shapes/dtype,
     * TM_E_NOMEM (ws). pool splits (head, query block) or (sequence, head). */
    int (*attn_prefill)(const tm_kattn_prefill *a, tm_kbuf *ws, struct tm_pool *pool);
    int (*attn_decode)(const tm_kattn_decode *a, tm_kbuf *ws, struct tm_pool *pool);
} tm_kernels;

/* The op names, in table order, for listings (tandem devices) and tests. */
#define TM_KOP_COUNT 20
extern const char *const tm_kop_names[TM_KOP_COUNT];

/* tm_kernels_best: the best variant this CPU can run. */
void tm_kernels_best(tm_kernels *k);

/* tm_kernels_select: the variant called `name` ("scalar", "avx2", "avx512",
 * "amx", or "best"; also "amx-emu", the amx ops over tiles emulated in C,
 * slow, for tests on machines without AMX: never the best); TM_E_NOTFOUND for an unknown name, TM_E_UNSUPPORTED
 * (naming the missing feature) if this CPU cannot run it. Ops a variant
 * does not implement come from the next lower one. */
int tm_kernels_select(const char *name, tm_kernels *k, tm_err *err);

/* tm_kernels_variants: names of every compiled variant, lowest first
 * (NULL-terminated). */
const char *const *tm_kernels_variants(void);

/* tm_kernels_op_source: which variant implements op `i` (tm_kop_names) in
 * table k, e.g. "avx512" for amx's softmax. */
const char *tm_kernels_op_source(const tm_kernels *k, int i);

/* Homed tasks (tm_pool_run_homed): a GEMM whose row blocks divide among the
 * workers gives row block i to worker i mod workers first, and the engine's
 * row passes give each worker the same rows, so a GEMM's A rows come from
 * the core that prepared them. 1 unless TANDEM_HOMED=0 (a measurement). */
int tm_khomed(void);

/* tm_kmatmul: y[M][N] = x . W^T with the op matching w's encoding: GEMV for
 * M <= TM_KGEMV_MAX_B (or int4 / int6 weights, in row blocks of 8), GEMM otherwise
 * (if w was packed for it). tm_kmatmul_gemm: 1 if it would run k's GEMM
 * kernel on M rows of w (the matrix unit's work), 0 for GEMVs. */
int tm_kmatmul_gemm(const tm_kernels *k, const tm_kweight *w, int M);
int tm_kmatmul(const tm_kernels *k, const tm_kweight *w, const tm_kact *x, float *y,
               tm_kbuf *ws, struct tm_pool *pool, tm_err *err);
/* tm_kmatmul_f32: the same from f32 rows x[M][K], plus b[N] on every row (b NULL: none) */
int tm_kmatmul_f32(const tm_kernels *k, const tm_kweight *w, const float *b, const float *x, int M, float *y,
                   tm_kbuf *ws, struct tm_pool *pool, tm_err *err);

/* tm_kmatmul_bf16y: y[M][N] in bf16 by k's gemm_bf16y, where
 * tm_kmatmul_bf16y_ok(k, w, M): a GEMM (tm_kmatmul_gemm: a plain weight, or a
 * glu one with gemm_glu) by a variant that has the op. tm_kglu_row_bf16: one row's y[0:F] =
 * act(gate) * up (TM_KGLU_*) from gate[0:F] and up[0:F] in bf16, as k's
 * silu_mul / gelu_tanh_mul compute it on the f32 values: the consumer of
 * gate and up GEMMs run so. */
int tm_kmatmul_bf16y_ok(const tm_kernels *k, const tm_kweight *w, int M);
int tm_kmatmul_bf16y(const tm_kernels *k, const tm_kweight *w, const tm_kact *x, uint16_t *y,
                     tm_kbuf *ws, struct tm_pool *pool, tm_err *err);
void tm_kglu_row_bf16(const tm_kernels *k, int act, float *y, const uint16_t *gate, const uint16_t *up, int F);
/* k's kernel for y[n] = act(g[n]) * u[n], act TM_KGLU_* */
typedef void (*tm_kact_fn)(float *y, const float *g, const float *u, size_t n);
tm_kact_fn tm_kglu_fn(const tm_kernels *k, int act);

#endif
