/* engine/cpu/kernels-impl.h: what the kernel units share and nobody else
 * needs: the bound-weight record, the activation preparation helpers, the
 * thread drivers, the scalar references, and the per-ISA table fillers.
 *
 * Panel layouts (TM_KPACK_GEMM), shared by every ISA variant (AVX2, AVX-512
 * and AMX read the same bytes; only the scalar reference reads the HF layout):
 *   BF16  uint16 [Np/32][Kp/2][32][2]: panel p, k-pair r, column c holds
 *         W[32p + c][2r], W[32p + c][2r + 1]   (Kp = K rounded up to 32)
 *         = AMX BF16 B tiles (16 rows of 16 pairs, stride 128 B) side by side,
 *           and two zmm of dpbf16ps operands per k-pair.
 *   Q8PC  int8 [Np/32][Kp/4][32][4]: panel p, k-quad r, column c holds
 *         q[32p + c][4r .. 4r+3]               (Kp = K rounded up to 64)
 *         = AMX INT8 B tiles, and two zmm of dpbusd operands per k-quad.
 *   Np = N rounded up to 32; padding is zero weight (and zero scale).
 *   colsum[Np] = sum_k q[n][k] corrects offset-binary activations:
 *   sum_k (q_x + 128) q_w = sum_k q_x q_w + 128 colsum.
 *
 * The int4 GEMV layout (Q4PC, Q4G64, Q4G32 bound for GEMV; every variant,
 * the scalar reference included, reads it): the package's blocks (quant.h)
 * repacked by tm_kpack_init, row by row, same bytes per row (K/2). A row is
 * windows of 16 blocks (512 elements, 256 bytes); the last holds the nbw =
 * (K/32) % 16 blocks left over, if any (16 nbw bytes). A window of nbw
 * blocks is 4 chunks of 4 nbw bytes: chunk j's byte 4 l + t (block l of the
 * window, t < 4) holds u = q + 8 of the block's element 8 j + t in its low
 * nibble and of element 8 j + 4 + t in its high nibble. So in every chunk
 * int32 lane l belongs to block l: a VNNI dot of the low (high) nibbles
 * adds 4 products of block l to lane l, and one int32 accumulator gathers a
 * window's 16 block dots over its 4 chunks, converted and scaled once per
 * window (the package's layout puts 4 blocks in a chunk, so that each chunk
 * had to be converted and scaled itself). tm_kq4_at reads an element.
 * Q6G64 (u = q + 32) takes the same windows, each 4 nibble chunks as int4's
 * (u & 15) then 2 crumb chunks of 4 nbw bytes (24 nbw bytes a window, 3K/4
 * a row): crumb chunk c's byte 4 l + t holds u >> 4 of the elements of
 * nibble byte 4 l + t of chunk 2c (low nibble's in bits 0-1, high's in 2-3)
 * and of chunk 2c + 1 (bits 4-5, 6-7). tm_kq6_at reads an element. */
#ifndef TM_ENGINE_CPU_KERNELS_IMPL_H
#define TM_ENGINE_CPU_KERNELS_IMPL_H

#include "engine/cpu/kernels.h"

struct tm_kweight {
    tm_dtype dtype;        /* BF16, Q8PC, Q4PC, Q4G64, Q4G32, Q6G64 */
    int N, K;
    int G;                 /* Q4*, Q6G64: elements per scale (32, 64, or K); Q8PC: K */
    const void *data;      /* HF layout, borrowed: bf16 [N][K], int8 [N][K]; Q4*: [N][K/2] and Q6G64:
                              [N][3K/4] in the GEMV layout above (a repacked copy, owned: copy) */
    const void *scales;    /* borrowed: f32 [N] (Q8PC); f16 [N][K/G] (Q4*, Q6G64; Q4PC: G = K) */
    size_t row_bytes;      /* bytes per row of data */
    int32_t *colsum;       /* Q8PC: [Np] sum_k q[n][k] (owned) */
    void *panel;           /* TM_KPACK_GEMM: see the layouts above (owned), else NULL */
    float *pscale;         /* Q8PC with panel: [Np] scales, 0 past N (owned) */
    void *copy;            /* TM_KPACK_HUGE, Q4*, Q6G64: data then scales, what data/scales point to (owned),
                              or NULL */
    int Kp, Np;            /* padded sizes of the panel layout */
    int glu;               /* 0, or TM_KGLU_*: Np/32 pairs of panels, gate then up (tm_kpack_glu); N, Np
                              count output columns, colsum/pscale [2 Np] in panel order */
};

/* q of element k of a row in the GEMV layout (above): int4 (q in [-8, 7],
 * 256-byte windows) or int6 (q6 = 1: [-32, 31], 384-byte windows) */
static inline int tm_kq4_at_t(const uint8_t *row, int K, int k, int q6)
{
    int blk = k / 32, e = k % 32, win = blk / 16, nbw = K / 32 - 16 * win, j = e / 8, hi = e % 8 >= 4;
    if (nbw > 16) nbw = 16;
    const uint8_t *w = row + (q6 ? 384 : 256) * (size_t)win;
    size_t at = 4 * (size_t)(blk % 16) + e % 4;
    int u = (hi ? w[4 * nbw * j + at] >> 4 : w[4 * nbw * j + at] & 15);
    if (q6) u |= (w[16 * nbw + 4 * nbw * (j / 2) + at] >> (4 * (j % 2) + 2 * hi) & 3) << 4;
    return u - (q6 ? 32 : 8);
}
static inline int tm_kq4_at(const uint8_t *row, int K, int k) { return tm_kq4_at_t(row, K, k, 0); }
static inline int tm_kq6_at(const uint8_t *row, int K, int k) { return tm_kq4_at_t(row, K, k, 1); }

/* x prepared for the GEMV layout, per window of 16 blocks and row of x:
 * lo[j] byte 4 l + t = q_x of block l's element 8 j + t, hi[j] of 8 j + 4 +
 * t (the weight nibbles' partners); s[l] the block's scale, corr[l] = -off
 * sum(q_x of block l) (removes the codes' offset, 8 or 32, exactly); 0 past
 * the row. */
typedef struct tm_kq4x {
    int8_t lo[4][64], hi[4][64];
    float s[16];
    int32_t corr[16];
} tm_kq4x;

/* Fill the windows of one row of x from its block-32 quantization (q [K],
 * s and bsum [K/32], as tm_kref_quant_b32 gives): x_row[w * stride] is
 * window w's record (stride: the records of a window's B rows lie side by
 * side). */
void tm_kq4x_fill(tm_kq4x *x_row, size_t stride, const int8_t *q, const float *s, const int32_t *bsum, int K,
                  int off);
/* Repack one row of an int4 (Q4*) or int6 (Q6G64) weight from the package's
 * layout (quant.h) to the GEMV layout (dst: tm_kq4_row_bytes bytes) */
void tm_kq4_repack_row(tm_dtype dt, uint8_t *dst, const uint8_t *src, int K);
static inline size_t tm_kq4_row_bytes(tm_dtype dt, int K) { return (size_t)K / 2 + (dt == TM_DT_Q6G64 ? K / 4 : 0); }

static inline void *tm_kbuf_at(tm_kbuf *ws, size_t off) { return (char *)ws->p + off; }
static inline size_t tm_kalign64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Row conversion/quantization function types (an ISA's own versions). */
typedef void (*tm_kcvt_bf16_fn)(uint16_t *y, const float *x, size_t n);
typedef void (*tm_kquant_q8_fn)(uint8_t *yq, float *ys, int ld, const float *x, int T, int D);

/* tm_kact_need_*: scratch bytes an op needs to prepare x (0 if x already
 * has the form). tm_kact_get_*: return the prepared rows, converting x->f32
 * into ws at byte offset off if needed (ws already reserved), over the pool's
 * workers when M >= 32 (NULL: on the calling thread). */
size_t tm_kact_need_bf16(const tm_kact *x);
size_t tm_kact_need_q8(const tm_kact *x);
const uint16_t *tm_kact_get_bf16(const tm_kact *x, tm_kbuf *ws, size_t off, tm_kcvt_bf16_fn cvt, struct tm_pool *pool);

/* tm_kact_bf16_widened: x rounded to bf16 (RNE) and widened back to f32, rows
 * [M][ld] at the start of ws (*ld = tm_kact_ld(K)), for kernels that multiply
 * bf16 weights in f32 (the AVX2 bf16 GEMV and GEMM). NULL if ws cannot grow. */
static inline float *tm_kact_bf16_widened(const tm_kact *x, tm_kbuf *ws, tm_kcvt_bf16_fn cvt, int *ld)
{
    *ld = tm_kact_ld(x->K);
    size_t fbytes = tm_kalign64((size_t)x->M * *ld * 4);
    if (tm_kbuf_reserve(ws, fbytes + tm_kact_need_bf16(x) + 64)) return NULL;
    const uint16_t *xb = tm_kact_get_bf16(x, ws, fbytes, cvt, NULL);
    float *xf = tm_kbuf_at(ws, 0);
    for (size_t i = 0; i < (size_t)x->M * *ld; i++) xf[i] = tm_bf16_to_f32(xb[i]);
    return xf;
}
const uint8_t *tm_kact_get_q8(const tm_kact *x, tm_kbuf *ws, size_t off, tm_kquant_q8_fn quant,
                              const float **scale, struct tm_pool *pool);

/* Argument checks shared by all variants: TM_OK or TM_E_INVALID. */
int tm_kcheck_gemv(const tm_kweight *w, const tm_kact *x, int want /* 4: the block-32 family, else the dtype */);
int tm_kcheck_gemm(const tm_kweight *w, const tm_kact *x, tm_dtype want);

/* Thread drivers. GEMV: rows [n0, n1) of W per task, n0 a multiple of
 * align; GEMM: rows [m0, m1) of x times panels [p0, p1) of W per task. */
typedef void (*tm_krows_fn)(void *ctx, int n0, int n1, int worker);
typedef void (*tm_kblock_fn)(void *ctx, int m0, int m1, int p0, int p1, int worker);
/* row_bytes: the weight bytes of a row, which size the tasks (kdispatch.c) */
void tm_kgemv_run(int N, int align, size_t row_bytes, tm_krows_fn fn, void *ctx, struct tm_pool *pool);
/* mb: rows per task (the ISA's preferred block); panels per task chosen to
 * give every worker several tasks. */
void tm_kgemm_run(int M, int Np, int mb, tm_kblock_fn fn, void *ctx, struct tm_pool *pool);
/* The panels split evenly (by panel, not by group) into per_worker ranges
 * per worker, each task mb rows (the row blocks in turn) x one range; worker
 * w's own tasks are consecutive ranges, taken first, then others' from the
 * end (tm_pool_run_homed). For GEMMs whose rows all fit one task: each
 * weight byte then reaches one core (kdispatch.c). */
void tm_kgemm_run_split(int M, int Np, int mb, int per_worker, tm_kblock_fn fn, void *ctx, struct tm_pool *pool);
/* its task's rows [b[0], b[1]) and panels [b[2], b[3]) (none where b[2] == b[3]), of n_mb x n_pt tasks
   homed on `homes` workers (1: in order) */
void tm_ksplit_bounds(int M, int npan, int mb, int n_pt, int homes, int task, int b[4]);

/* ---- scalar references (ref_*.c); the "scalar" variant is these ---------- */

/* Block-32 quantization of one row x[K] (K % 32 == 0): q[K], s[K/32]
 * (normative, see kernels.h). Also returns the block sums of q in bsum
 * [K/32] if not NULL. */
void tm_kref_quant_b32(const float *x, int K, int8_t *q, float *s, int32_t *bsum);
/* One value's int8 quantization with inverse scale inv: round half to even
 * (the 1.5 * 2^23 trick is exact for |p| <= 2^22, and p is clamped to 127
 * first; no libm call), clamp to [-127, 127], 0 for NaN. */
static inline int tm_kq8(float x, float inv)
{
    float p = x * inv;
    if (!(p == p)) return 0;
    if (p >= 127.f) return 127;
    if (p <= -127.f) return -127;
    return (int)((p + 12582912.f) - 12582912.f);
}

int tm_kref_gemv_q4(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool);
int tm_kref_gemv_q8(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool);
int tm_kref_gemv_bf16(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool);
int tm_kref_gemm_bf16(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool);
int tm_kref_gemm_q8(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool);

void tm_kref_rmsnorm(float *y, const float *x, const float *w, int T, int D, float eps, int add_one);
void tm_kref_rmsnorm_bf16(uint16_t *yb, int ld, const float *x, const float *w, int T, int D, float eps, int add_one);
void tm_kref_rmsnorm_q8(uint8_t *yq, float *ys, int ld, const float *x, const float *w, int T, int D, float eps, int add_one);
void tm_kref_relu_mul(float *y, const float *g, const float *u, size_t n);
void tm_kref_relu2_mul(float *y, const float *g, const float *u, size_t n);
void tm_kref_swiglu_oai_mul(float *y, const float *g, const float *u, size_t n);
void tm_kref_layernorm(float *y, const float *x, const float *w, const float *b, int T, int D, float eps);
void tm_kref_quant_q8(uint8_t *yq, float *ys, int ld, const float *x, int T, int D);
void tm_kref_silu_mul(float *y, const float *g, const float *u, size_t n);
void tm_kref_gelu_tanh_mul(float *y, const float *g, const float *u, size_t n);
void tm_kref_gelu_mul(float *y, const float *g, const float *u, size_t n);
void tm_kref_rope(float *x, const float *cos_t, const float *sin_t, int T, int H, int Dh);
void tm_kref_softmax(float *x, int R, int n);
void tm_kref_f32_to_bf16(uint16_t *y, const float *x, size_t n);
void tm_kref_bf16_to_f32(float *y, const uint16_t *x, size_t n);
void tm_kref_f32_to_f16(uint16_t *y, const float *x, size_t n);
void tm_kref_f16_to_f32(float *y, const uint16_t *x, size_t n);
int tm_kref_attn_prefill(const tm_kattn_prefill *a, tm_kbuf *ws, struct tm_pool *pool);
int tm_kref_attn_decode(const tm_kattn_decode *a, tm_kbuf *ws, struct tm_pool *pool);
int tm_kcheck_attn_prefill(const tm_kattn_prefill *a);
int tm_kcheck_attn_decode(const tm_kattn_decode *a);
/* bytes from one kv head's page block to the next (a->head_bytes, or its default) */
size_t tm_kattn_head_bytes(const tm_kattn_decode *a);
/* The query of int8-KV attention, quantized per (row, head) like activations
 * (kernels.h Numerics): s = max|x| / 127, q[Dh] = round_half_even(x * 127 /
 * max|x|) (all 0 for a zero row); *qsum = sum of q. */
void tm_kattn_quant_q(int8_t *q, float *s, int32_t *qsum, const float *x, int Dh);

/* ---- per-ISA table fillers: set the ops the unit implements --------------- */
void tm_kvariant_scalar(tm_kernels *k);
void tm_kvariant_avx2(tm_kernels *k);   /* ops_avx2.c: calls the two below */
void tm_kvariant_avx512(tm_kernels *k); /* ops_avx512.c: likewise */
void tm_kvariant_amx(tm_kernels *k);    /* gemm_amx.c */
void tm_kops_fill_avx2(tm_kernels *k), tm_kops_fill_avx512(tm_kernels *k);
void tm_kmm_fill_avx2(tm_kernels *k), tm_kmm_fill_avx512(tm_kernels *k);     /* gemv_*: all of the matmul ops */
/* The avx512 int4 / int6 GEMV (gemv_q4.inc) in its two builds: nibbles split
 * by shift and and, or by GFNI (gemv_gfni.c; runs only where tm_cpu_get()->gfni).
 * tm_kmm_fill_avx512 picks one; tests and kbench reach both. */
int tm_kgemv_q4_avx512(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool);
int tm_kgemv_q4_avx512_gfni(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool);
void tm_kgemm_fill_avx2(tm_kernels *k), tm_kgemm_fill_avx512(tm_kernels *k); /* gemm_* (called by the above) */
void tm_kattn_fill_avx2(tm_kernels *k), tm_kattn_fill_avx512(tm_kernels *k);
void tm_kattn_fill_amx(tm_kernels *k);  /* attn_amx.c: prefill attention on tiles */
void tm_kamx_config(void);              /* gemm_amx.c: load the tile configuration (AMX only) */
/* the same two units built with the tiles emulated in C (amx_emu.h): the
 * "amx-emu" kernels, for tests where there is no AMX */
void tm_kvariant_amx_emu(tm_kernels *k), tm_kattn_fill_amx_emu(tm_kernels *k), tm_kamx_config_emu(void);
/* Prefill attention's K (which 0) or V (1) row j of kv head hk, contiguous
 * or paged (tm_kattn_prefill); rows of one page follow each other. */
static inline const void *tm_kattn_pf_row(const tm_kattn_prefill *a, int which, int hk, int j)
{
    size_t es = a->kv_dtype == TM_DT_F32 ? 4 : 2;
    const uint8_t *base = (const uint8_t *)(which ? a->v : a->k);
    if (!a->page_table) return base + ((size_t)hk * a->kv_stride + (size_t)j) * a->Dh * es;
    return base + (size_t)a->page_table[j / a->page_size] * a->page_bytes + (size_t)hk * a->head_bytes +
           (size_t)(j % a->page_size) * a->Dh * es;
}
/* keys from j on that lie one after another (to the page's end; all if contiguous) */
static inline int tm_kattn_pf_run(const tm_kattn_prefill *a, int j, int n)
{
    if (!a->page_table) return n;
    int left = a->page_size - j % a->page_size;
    return left < n ? left : n;
}

/* the AVX-512 prefill attention (attn_amx.c hands it what tiles don't take) */
int tm_kattn_prefill_avx512(const tm_kattn_prefill *a, tm_kbuf *ws, struct tm_pool *pool);

/* Each ISA's row conversions, for its GEMV/GEMM activation preparation. */
void tm_kavx2_f32_to_bf16(uint16_t *y, const float *x, size_t n);
void tm_kavx2_quant_q8(uint8_t *yq, float *ys, int ld, const float *x, int T, int D);
/* tm_kref_quant_b32 vectorized (the same f32 operations, rounding half to even as its magic-number form does,
 * a NaN never the block's max: the same bytes), for the AVX2 int4 / int6 GEMV */
void tm_kavx2_quant_b32(const float *x, int K, int8_t *q, float *s, int32_t *bsum);
void tm_kavx512_f32_to_bf16(uint16_t *y, const float *x, size_t n);
void tm_kavx512_quant_q8(uint8_t *yq, float *ys, int ld, const float *x, int T, int D);

#endif
