/* engine/cpu/cpu_engine.c: the CPU engines (AMX, AVX-512, AVX2, scalar).
 *
 * One implementation of the engine interface (engine/engine.h) over the
 * kernel table of engine/cpu/kernels.h. The registry entries differ only in
 * the kernel variant they select and the roles their caps announce:
 *
 *   cpu-amx      prefill   AMX tiles (bf16, int8 W8A8) GEMM (it can also decode,
 *                          with the AVX-512 GEMVs: the prefill-only route)
 *   cpu-avx512   prefill + decode   AVX-512-BF16 GEMM, VNNI GEMV
 *   cpu-avx2     prefill + decode   FMA fallbacks
 *   cpu-scalar   prefill + decode   plain C (the portable fallback)
 *
 * The forward pass is the op sequence of model/model.h over M "rows": a
 * prefill chunk is M = T rows of one sequence, a decode step is M = B rows of
 * B sequences (one each). Rows are (token, position, sequence). Matmuls go
 * through tm_kmatmul, which picks GEMM or GEMV by encoding and M. The
 * context it runs on (cpu-impl.h's cpu_ctx: the bound weights, scratch,
 * rope tables) is made and freed by cpu_bind.c.
 *
 * Attention and KV:
 *   - the row's K/V are written into the KV cache (a->kv) at its position,
 *     converted to the cache dtype (bf16, f16, f32; int8: quantized per
 *     (token, kv head) row, runtime/kvcache.h);
 *   - a prefill chunk uses the flash-style attn_prefill kernel through the
 *     sequence's page table, over the stateless staging cache (one page
 *     holds the whole sequence) or its bf16/f16/f32 decode pages (stateful
 *     hand-off, the single-engine routes);
 *   - a prefill chunk over int8 pages (--kv-dtype int8: a stateful hand-off,
 *     a reused prefix's continuation, a single-engine route's later chunks)
 *     dequantizes the sequence's rows (s · q rounded to bf16) into a
 *     contiguous scratch (kv16) and runs the same flash kernel over it
 *     (attention_q8_chunk);
 *   - a decode step: every row attends over its sequence's pages with
 *     attn_decode, ctx = pos + 1.
 *
 * Mixture of experts (Qwen3-MoE, Mixtral): a layer with m->layer[l].moe
 * replaces the dense FFN by engine/cpu/moe.h's block: f32 router, top-k,
 * rows grouped by expert, each routed expert's gate/up/down through
 * tm_kmatmul on just its rows (GEMM in prefill chunks, GEMV in decode
 * batches), weighted outputs summed in expert order. Experts are bound per
 * stage like dense weights (tm_kweight in the stage's encoding).
 */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/threadpool.h"
#include "engine/cpu/cpu-impl.h"
#include "quant/quant.h"

/* ---- the forward pass over M rows -------------------------------------------- */

typedef struct cpu_rows {
    int M;
    const int32_t *tokens;     /* [M] */
    const int *pos;            /* [M] */
    tm_kv_seq *const *seq;     /* [M] the sequence of each row */
    tm_kv_cache *kv;
    int flash_prefill;         /* rows are one chunk of one sequence in a bf16/f16/f32 cache */
    int chunk;                 /* rows are one chunk of one sequence (any cache dtype) */
    float *logits;             /* [n_logit_rows][V], or (on_row) [TM_KGEMV_MAX_B][V] reused per block of rows */
    const int *logit_rows;     /* [n_logit_rows] which rows need logits */
    int n_logit_rows;
    void (*on_row)(void *ud, int row, const float *logits); /* (optional) each row's logits as its block is done */
    void *row_ud;
    float *last;               /* (on_row, optional) [V]: a copy of the last logit row's */
    void (*on_hidden)(void *ud, int row, const float *h); /* (optional) rows 0 .. n_hidden - 1's final norm [D] */
    int n_hidden;
    void (*on_layer)(void *ud, int layer);
    void *ud;
    struct tm_pool *pool;      /* threads for this call */
    double *gemm;              /* (optional) [2]: seconds and operations of the GEMM-kernel matmuls added */
} cpu_rows;

/* ---- row-parallel elementwise work ------------------------------------------- */

/* The non-matmul steps of a prefill chunk (norms, RoPE, the KV store, the
 * activation, residual adds) run over its M rows on the call's pool: on one
 * thread they took more time than the AMX GEMMs. A step is a function over a
 * row range; par_rows splits [0, M) into about 2 tasks per worker, and runs
 * inline when the work is small (a decode step: M = B rows). */
typedef struct par_job par_job;
typedef void (*rows_fn)(const par_job *j, int i0, int i1);
struct par_job {
    rows_fn fn;
    cpu_ctx *c;
    const cpu_rows *r;
    int M, per, tasks, homes;   /* rows, rows per task, tasks, workers where homed (else 0) */
    float *y;                   /* the step's operands (see each step) */
    const float *x, *w;
    const float *b;             /* a norm's bias (LayerNorm), or NULL */
    int n, l;                   /* row width or count; layer / rope index */
    int ld;                     /* row stride of x and w where a step reads strided rows */
};

static void par_task(void *ctx, int t, int worker)
{
    (void)worker;
    const par_job *j = ctx;
    if (j->homes) t = (t % j->homes) * (j->tasks / j->homes) + t / j->homes; /* home w's chunks: w's share of rows */
    int i0 = t * j->per, i1 = i0 + j->per < j->M ? i0 + j->per : j->M;
    j->fn(j, i0, i1);
}

/* width: floats per row (the grain: about 64 K floats per task at least) */
static void par_rows(par_job *j, int M, size_t width)
{
    int nw = tm_pool_size(j->r->pool);
    size_t min_rows = width ? (65536 + width - 1) / width : (size_t)M;
    int tasks = 2 * nw;
    if ((size_t)M / (size_t)tasks < min_rows) tasks = (int)((size_t)M / (min_rows ? min_rows : 1));
    j->M = M;
    if (tasks <= 1 || nw <= 1) {
        j->fn(j, 0, M);
        return;
    }
    j->per = (M + tasks - 1) / tasks;
    j->tasks = (M + j->per - 1) / j->per;
    /* homed (tm_khomed): worker w's tasks cover rows [w M / nw, (w + 1) M / nw), the rows of the
     * GEMMs' row block w where M splits into nw of them (tm_kgemm_run) */
    j->homes = j->tasks % nw == 0 && tm_khomed() ? nw : 0;
    if (j->homes) tm_pool_run_homed(j->r->pool, j->tasks, par_task, j);
    else tm_pool_run(j->r->pool, j->tasks, par_task, j);
}

/* y[T][n] = the model's norm of x's rows: RMSNorm * w, or LayerNorm * w + b */
static void norm_rows(const cpu_ctx *c, float *y, const float *x, const float *w, const float *b, int T, int n)
{
    const tm_model *m = c->m;
    if (m->norm == TM_NORM_LAYER) c->k.layernorm(y, x, w, b, T, n, m->eps);
    else c->k.rmsnorm(y, x, w, T, n, m->eps, m->norm_add_one);
}

static void rows_norm(const par_job *j, int i0, int i1)
{
    norm_rows(j->c, j->y + (size_t)i0 * j->n, j->x + (size_t)i0 * j->n, j->w, j->b, i1 - i0, j->n);
}

/* rows [i0, i1) of width n, row i normed with head (i mod l)'s weights: w [l][n] (and b [l][n] if any) */
static void rows_norm_heads(const par_job *j, int i0, int i1)
{
    size_t n = (size_t)j->n;
    for (int i = i0; i < i1; i++) {
        size_t h = (size_t)(i % j->l) * n;
        norm_rows(j->c, j->y + i * n, j->x + i * n, j->w + h, j->b ? j->b + h : NULL, 1, j->n);
    }
}

static void par_norm(cpu_ctx *c, const cpu_rows *r, float *y, const float *x, const float *w, const float *b, int rows,
                     int n)
{
    par_job j = {.fn = rows_norm, .c = c, .r = r, .y = y, .x = x, .w = w, .b = b, .n = n};
    par_rows(&j, rows, (size_t)n);
}

/* y[i] += x[i] * s for rows of width n (the residual stream; s: the model's residual_scale, 1 but
 * for Granite) */
static void rows_add(const par_job *j, int i0, int i1)
{
    float *y = j->y, s = j->c->m->residual_scale;
    const float *x = j->x;
    if (s == 1.0f)
        for (size_t i = (size_t)i0 * j->n; i < (size_t)i1 * j->n; i++) y[i] += x[i];
    else
        for (size_t i = (size_t)i0 * j->n; i < (size_t)i1 * j->n; i++) y[i] += x[i] * s;
}

/* y[i] += x[i] * s as rows_add, x in bf16 (gemm_bf16y's rows), widened 256 columns at a time */
static void rows_add_bf16(const par_job *j, int i0, int i1)
{
    enum { C = 256 };
    float t[C], s = j->c->m->residual_scale;
    const uint16_t *xb = (const uint16_t *)j->x;
    for (int i = i0; i < i1; i++)
        for (int c0 = 0; c0 < j->n; c0 += C) {
            size_t n = (size_t)(j->n - c0 < C ? j->n - c0 : C), o = (size_t)i * j->n + c0;
            j->c->k.bf16_to_f32(t, xb + o, n);
            for (size_t k = 0; k < n; k++) j->y[o + k] += s == 1.0f ? t[k] : t[k] * s;
        }
}

/* y += f, the residual add of a projection's result f [rows][n]: f32, or bf16 where f16 (y16) */
static void par_add(cpu_ctx *c, const cpu_rows *r, float *y, const float *f, int f16, int rows, int n)
{
    par_job j = {.fn = f16 ? rows_add_bf16 : rows_add, .c = c, .r = r, .y = y, .x = f, .n = n};
    par_rows(&j, rows, (size_t)n);
}

typedef tm_kact_fn act_fn;

/* the model's gated activation kernel: silu_mul, gelu_tanh_mul or gelu_mul */
static act_fn act_of(const cpu_ctx *c)
{
    return tm_kglu_fn(&c->k, tm_kglu_of(c->m->act));
}

/* y[i][0:n] = act(gate[i]) * up[i], gate = x and up = w, rows ld floats
 * apart (y may be gate itself: each row is read before it is written) */
static void rows_act(const par_job *j, int i0, int i1)
{
    act_fn f = act_of(j->c);
    for (int i = i0; i < i1; i++)
        f(j->y + (size_t)i * j->n, j->x + (size_t)i * j->ld, j->w ? j->w + (size_t)i * j->ld : NULL, (size_t)j->n);
}

/* row i of the prepared input (c->xb, or c->xq + c->xs) from x[0:K] */
static void prep_row(cpu_ctx *c, tm_dtype dt, int i, const float *x, int K)
{
    int ld = tm_kact_ld(K);
    if (dt == TM_DT_BF16) {
        c->k.f32_to_bf16(c->xb + (size_t)i * ld, x, (size_t)K);
        memset(c->xb + (size_t)i * ld + K, 0, (size_t)(ld - K) * 2);
    } else {
        c->k.quant_q8(c->xq + (size_t)i * ld, c->xs + i, ld, x, 1, K);
    }
}

/* rows of the prepared input: bf16 (j->y unused) or int8 + scales */
static void rows_prep(const par_job *j, int i0, int i1)
{
    cpu_ctx *c = j->c;
    int K = j->n, ld = tm_kact_ld(K);
    if (j->l == TM_DT_BF16) {
        for (int i = i0; i < i1; i++) prep_row(c, TM_DT_BF16, i, j->x + (size_t)i * K, K);
    } else {
        c->k.quant_q8(c->xq + (size_t)i0 * ld, c->xs + i0, ld, j->x + (size_t)i0 * K, i1 - i0, K);
    }
}

/* a's rows are the prepared ones just written: c->xb (bf16) or c->xq + c->xs (int8) */
static void set_prepared(const cpu_ctx *c, tm_kact *a, tm_dtype dt)
{
    a->ld = tm_kact_ld(a->K);
    if (dt == TM_DT_BF16) {
        a->bf16 = c->xb;
    } else {
        a->q8 = c->xq;
        a->q8_scale = c->xs;
    }
}

/* x[M][K], the input of the matmuls with weights like w (q, k and v read
 * one; gate and up another), prepared once, on the pool: the bf16 or int8
 * rows their GEMM (or GEMV) would otherwise convert, single-threaded, per
 * matmul. Same conversion functions, so the same bytes. */
static void prep_act(cpu_ctx *c, const cpu_rows *r, const tm_kweight *w, const float *x, int M, tm_kact *a)
{
    int K = tm_kweight_k(w);
    *a = (tm_kact){.M = M, .K = K, .f32 = x};
    tm_dtype dt = tm_kweight_dtype(w);
    if (dt != TM_DT_BF16 && dt != TM_DT_Q8PC) return;
    par_job j = {.fn = rows_prep, .c = c, .r = r, .x = x, .n = K, .l = (int)dt};
    par_rows(&j, M, (size_t)K);
    set_prepared(c, a, dt);
}

/* rows of RMSNorm(x) * j->w straight into the prepared form (fused kernel) */
static void rows_norm_prep(const par_job *j, int i0, int i1)
{
    cpu_ctx *c = j->c;
    const tm_model *m = c->m;
    int K = j->n, ld = tm_kact_ld(K);
    const float *x = j->x + (size_t)i0 * K;
    if (j->l == TM_DT_BF16)
        c->k.rmsnorm_bf16(c->xb + (size_t)i0 * ld, ld, x, j->w, i1 - i0, K, m->eps, m->norm_add_one);
    else
        c->k.rmsnorm_q8(c->xq + (size_t)i0 * ld, c->xs + i0, ld, x, j->w, i1 - i0, K, m->eps, m->norm_add_one);
}

/* rows of act(gate) * up, each written over its gate row (j->y, ld floats
 * apart: in cache, just read) and prepared for the down projection (as
 * rows_prep) right after, while it is still in L1 */
static void rows_act_prep(const par_job *j, int i0, int i1)
{
    act_fn f = act_of(j->c);
    for (int i = i0; i < i1; i++) {
        float *g = j->y + (size_t)i * j->ld;
        f(g, g, j->w ? j->w + (size_t)i * j->ld : NULL, (size_t)j->n);
        prep_row(j->c, (tm_dtype)j->l, i, g, j->n);
    }
}

/* rows_act_prep's, from bf16 GEMM results (gemm_bf16y: gate j->x, up j->w,
 * rows j->ld bf16 apart; no up: gemm_glu's rows, already activated): each
 * row's act(gate) * up goes to the task's first row of j->y (f32 [M][F],
 * reused row after row, so it stays in cache) and is prepared from there; or,
 * where w takes f32 rows (j->l 0), to its own row of j->y */
static void rows_act_prep_bf16(const par_job *j, int i0, int i1)
{
    int F = j->n, act = tm_kglu_of(j->c->m->act);
    const uint16_t *g = (const uint16_t *)j->x, *u = (const uint16_t *)j->w;
    for (int i = i0; i < i1; i++) {
        float *o = j->y + (size_t)(j->l ? i0 : i) * F;
        if (!u) j->c->k.bf16_to_f32(o, g + (size_t)i * j->ld, (size_t)F); /* gemm_glu's rows: activated */
        else tm_kglu_row_bf16(&j->c->k, act, o, g + (size_t)i * j->ld, u + (size_t)i * j->ld, F);
        if (j->l) prep_row(j->c, (tm_dtype)j->l, i, o, F);
    }
}

/* act(gate) * up for M rows (gate and up rows ld floats apart), as the input
 * of w (the down projection): where w takes a prepared form (bf16 or int8)
 * each row is activated over its gate row and prepared in the same pass (a's
 * rows are the prepared ones, a->f32 = NULL: no f32 copy is written, whose
 * write-allocate and write-back would double the pass's memory traffic);
 * otherwise out[M][F] = the activation (out may be gate when ld == F) and
 * a->f32 = out. Same functions per row, so the same bytes either way. With
 * bf16 set, gate and up are gemm_bf16y's results (rows ld bf16 apart; up
 * NULL: gate is a glu GEMM's activated rows) and out [M][F] is the rows' f32
 * scratch (rows_act_prep_bf16). */
static void act_prep(cpu_ctx *c, const cpu_rows *r, const tm_kweight *w, float *out, void *gate,
                     const void *up, int ld, int bf16, int M, int F, tm_kact *a)
{
    tm_dtype dt = tm_kweight_dtype(w);
    int prep = (dt == TM_DT_BF16 || dt == TM_DT_Q8PC) && tm_kweight_k(w) == F;
    *a = (tm_kact){.M = M, .K = F, .f32 = prep ? NULL : out};
    double t0 = c->profile ? tm_now_s() : 0;
    par_job j = {.fn = prep ? rows_act_prep : rows_act, .c = c, .r = r, .y = prep ? gate : out, .x = gate, .w = up,
                 .n = F, .l = (int)dt, .ld = ld};
    if (bf16) {
        j.fn = rows_act_prep_bf16;
        j.y = out;
        j.l = prep ? (int)dt : 0; /* a prepared dtype is never 0 (TM_DT_F32) */
    }
    par_rows(&j, M, (size_t)F);
    if (prep) set_prepared(c, a, dt);
    if (c->profile) c->prof[c->prof_kind][4] += tm_now_s() - t0;
}

/* a = the input of the matmuls with weights w0 (and w1, w2 if given): the
 * norm of x[M][D] (nw, and nb for a LayerNorm). For an RMSNorm, where they
 * all take the same prepared form (bf16 or int8 GEMM/GEMV), the fused kernel
 * writes it in one pass over x and h is not written (a->f32 stays NULL);
 * otherwise (and for a LayerNorm) h[M][D] = the norm, prepared as usual.
 * nw NULL (OLMo 2, no pre-norms): x itself, prepared. */
static void norm_prep(cpu_ctx *c, const cpu_rows *r, float *h, const float *x, const float *nw, const float *nb, int M,
                      const tm_kweight *w0, const tm_kweight *w1, const tm_kweight *w2, tm_kact *a)
{
    int D = c->m->D;
    tm_dtype dt = tm_kweight_dtype(w0);
    int fused = (dt == TM_DT_BF16 || dt == TM_DT_Q8PC) && (!w1 || tm_kweight_dtype(w1) == dt) &&
                (!w2 || tm_kweight_dtype(w2) == dt) && tm_kweight_k(w0) == D && c->m->norm == TM_NORM_RMS;
    double t0 = c->profile ? tm_now_s() : 0;
    if (!nw) {
        prep_act(c, r, w0, x, M, a);
    } else if (!fused) {
        par_norm(c, r, h, x, nw, nb, M, D);
        prep_act(c, r, w0, h, M, a);
    } else {
        par_job j = {.fn = rows_norm_prep, .c = c, .r = r, .x = x, .w = nw, .n = D, .l = (int)dt};
        par_rows(&j, M, (size_t)D);
        *a = (tm_kact){.M = M, .K = D};
        set_prepared(c, a, dt);
    }
    if (c->profile) c->prof[c->prof_kind][3] += tm_now_s() - t0;
}

/* one matmul of w on M rows took s seconds: its time and operations (2 per
 * multiply-add), in all and by shape and rows (a bench's short prompts, a
 * chunk's tail: apart, they do not blur a full chunk's rate) */
static void prof_matmul(cpu_ctx *c, const tm_kweight *w, int M, double s)
{
    double ops = tm_kweight_ops(w, M);
    int k = c->prof_kind, n = tm_kweight_n(w), kk = tm_kweight_k(w), i = 0;
    tm_dtype dt = tm_kweight_dtype(w);
    c->prof[k][1] += s;
    c->prof_ops[k] += ops;
    while (i < c->prof_nmm && !(c->prof_mm[i].kind == k && c->prof_mm[i].n == n && c->prof_mm[i].k == kk &&
                                c->prof_mm[i].dt == dt && c->prof_mm[i].m == M))
        i++;
    if (i == PROF_SHAPES) return; /* more shapes than the table: in the totals only */
    if (i == c->prof_nmm)
        c->prof_mm[c->prof_nmm++] = (struct prof_mm){k, n, kk, ops != 2.0 * M * n * kk, M,
                                                      tm_kmatmul_gemm(&c->k, w, M), dt, 0, 0, 0};
    c->prof_mm[i].calls++;
    c->prof_mm[i].s += s;
    c->prof_mm[i].ops += ops;
}

/* a matmul of w on M rows took s seconds: the profile's counts, and the
 * call's GEMM seconds and operations where it ran the GEMM kernels */
static void matmul_done(cpu_ctx *c, const cpu_rows *r, const tm_kweight *w, int M, double s)
{
    if (c->profile) prof_matmul(c, w, M, s);
    if (r->gemm && tm_kmatmul_gemm(&c->k, w, M)) {
        r->gemm[0] += s;
        r->gemm[1] += tm_kweight_ops(w, M);
    }
}

/* A GEMM of w on M rows can store its result in bf16 (gemm_bf16y): int8
 * (W8A8) prefill weights on kernels that have the op. The rounding (a
 * relative 2^-9) is below the int8 quantization of the activations and
 * weights; the bf16 weights' path, whose budget is tighter, keeps f32. The
 * engine takes it for gate|up (ffn_bf16) and for q|k|v (fused), o and down
 * where no bias or output norm follows (y16; qkv_post and the residual adds
 * widen the rows), all by default: session 19 found y's f32 stores a quarter
 * of the K = 896 GEMMs' time on the Xeon; session 20 (runs 91-92) measured
 * the bf16 output 1.01-1.08x on the GEMMs alone, and over 5 interleaved pairs
 * Llama's pp512 GEMM share 39 -> 47% (medians; Qwen's within the host's
 * drift); on the conformance set (cpu-amx-emu, int8) mean KL 1.06e-5 ->
 * 1.05e-5 (docs/kernels.md). */
static int bf16y_ok(const cpu_ctx *c, const tm_kweight *w, int M)
{
    return w && tm_kweight_dtype(w) == TM_DT_Q8PC && tm_kmatmul_bf16y_ok(&c->k, w, M);
}

/* w's output in bf16: projection `which` (Y16_*) is one of c->y_bf16's */
static int y16(const cpu_ctx *c, unsigned which, const tm_kweight *w, int M)
{
    return (c->y_bf16 & which) && bf16y_ok(c, w, M);
}

/* a's rows times w^T into y[M][N], or yb[M][N] in bf16 where yb is given (gemm_bf16y: see bf16y_ok) */
static int kmatmul_to(cpu_ctx *c, const cpu_rows *r, const tm_kweight *w, const tm_kact *a, float *y, uint16_t *yb,
                      tm_err *err)
{
    return yb ? tm_kmatmul_bf16y(&c->k, w, a, yb, &c->ws, r->pool, err) : tm_kmatmul(&c->k, w, a, y, &c->ws, r->pool, err);
}

/* y[M][N] = x[M][K] . w^T, or yb in bf16 (kmatmul_to); preparing x is timed with the norm+prepare passes */
static int matmul_to(cpu_ctx *c, const cpu_rows *r, const tm_kweight *w, const float *x, int M, float *y,
                     uint16_t *yb, tm_err *err)
{
    int timed = c->profile || r->gemm;
    double t0 = timed ? tm_now_s() : 0;
    tm_kact a;
    prep_act(c, r, w, x, M, &a);
    if (timed) {
        double t1 = tm_now_s();
        if (c->profile) c->prof[c->prof_kind][3] += t1 - t0;
        t0 = t1;
    }
    int rc = kmatmul_to(c, r, w, &a, y, yb, err);
    if (timed) matmul_done(c, r, w, M, tm_now_s() - t0);
    return rc;
}

static int matmul(cpu_ctx *c, const cpu_rows *r, const tm_kweight *w, const float *x, int M, float *y, tm_err *err)
{
    return matmul_to(c, r, w, x, M, y, NULL, err);
}

/* y = a . w^T, or yb in bf16 (kmatmul_to), with a from prep_act (a weight of another encoding gets the f32 rows) */
static int matmul_a_to(cpu_ctx *c, const cpu_rows *r, const tm_kweight *w, const tm_kact *a, float *y, uint16_t *yb,
                       tm_err *err)
{
    tm_dtype dt = tm_kweight_dtype(w);
    if ((a->bf16 && dt != TM_DT_BF16) || (a->q8 && dt != TM_DT_Q8PC))
        return matmul_to(c, r, w, a->f32, a->M, y, yb, err);
    int timed = c->profile || r->gemm;
    double t0 = timed ? tm_now_s() : 0;
    int rc = kmatmul_to(c, r, w, a, y, yb, err);
    if (timed) matmul_done(c, r, w, a->M, tm_now_s() - t0);
    return rc;
}

static int matmul_a(cpu_ctx *c, const cpu_rows *r, const tm_kweight *w, const tm_kact *a, float *y, tm_err *err)
{
    return matmul_a_to(c, r, w, a, y, NULL, err);
}

/* y[i][0:n] += b for rows ld floats apart */
static void rows_bias(const par_job *j, int i0, int i1)
{
    for (int i = i0; i < i1; i++) {
        float *y = j->y + (size_t)i * j->ld;
        for (int k = 0; k < j->n; k++) y[k] += j->w[k];
    }
}

static void par_bias(cpu_ctx *c, const cpu_rows *r, float *y, const float *b, int M, int n, int ld)
{
    if (!b) return;
    par_job j = {.fn = rows_bias, .c = c, .r = r, .y = y, .w = b, .n = n, .ld = ld};
    par_rows(&j, M, (size_t)n);
}

/* a fused q|k|v output's rows c->qkv[M][HD + 2 KD] split into c->q, c->kk, c->vv (n = HD, l = KD):
 * Q, K, V one after the other, or (qkv_interleaved: GPT-NeoX, Falcon's new decoder) grouped by kv
 * head, a head at a time (tm_qkv_row). The rows are f32, or (bf16 1) gemm_bf16y's rows (y16) widened. */
static void split_qkv(const par_job *j, int i0, int i1, int bf16)
{
    cpu_ctx *c = j->c;
    const tm_model *m = c->m;
    size_t HD = (size_t)j->n, KD = (size_t)j->l, w = HD + 2 * KD, Dh = (size_t)m->Dh;
    size_t seg = m->qkv_interleaved ? Dh : 0; /* 0: one segment each */
    for (int i = i0; i < i1; i++) {
        float *dst[3] = {c->q + (size_t)i * HD, c->kk + (size_t)i * KD, c->vv + (size_t)i * KD};
        for (int p = 0; p < 3; p++) {
            size_t n = p ? KD : HD, len = seg ? seg : n;
            for (size_t o = 0; o < n; o += len) { /* segment o / len of part p: head o / Dh, or all of it */
                size_t src = (size_t)i * w + (size_t)tm_qkv_row(m, p, (int)(o / Dh), 0);
                if (bf16) c->k.bf16_to_f32(dst[p] + o, (const uint16_t *)c->qkv + src, len);
                else memcpy(dst[p] + o, c->qkv + src, sizeof(float) * len);
            }
        }
    }
}

/* OLMo's, MPT's clip_qkv: rows [i0, i1) of y (width n) clamped to [-clip_qkv, clip_qkv] */
static void rows_clip(const par_job *j, int i0, int i1)
{
    float c = j->c->m->clip_qkv;
    for (size_t i = (size_t)i0 * j->n; i < (size_t)i1 * j->n; i++) j->y[i] = j->y[i] < -c ? -c : j->y[i] > c ? c : j->y[i];
}

static void rows_split_qkv(const par_job *j, int i0, int i1) { split_qkv(j, i0, i1, 0); }
static void rows_split_qkv_bf16(const par_job *j, int i0, int i1) { split_qkv(j, i0, i1, 1); }

/* Write rows' K and V [M][Hk*Dh] into the cache at their positions (layer j->l). */
static void rows_kv_store(const par_job *j, int i0, int i1)
{
    cpu_ctx *c = j->c;
    const cpu_rows *r = j->r;
    const tm_model *m = c->m;
    const tm_kv_cache_opts *o = tm_kv_cache_info(r->kv);
    int Dh = m->Dh, layer = j->l;
    for (int i = i0; i < i1; i++) {
        const tm_kv_seq *s = r->seq[i];
        int p = r->pos[i], slot = p % o->page_size;
        int32_t page = s->pages[p / o->page_size];
        size_t off = (size_t)slot * (size_t)Dh;
        for (int h = 0; h < m->Hk; h++) {
            const float *ks = c->kk + ((size_t)i * m->Hk + h) * Dh;
            const float *vs = c->vv + ((size_t)i * m->Hk + h) * Dh;
            void *kd = tm_kv_page_k(r->kv, page, layer, h), *vd = tm_kv_page_v(r->kv, page, layer, h);
            if (o->dtype == TM_DT_F32) {
                memcpy((float *)kd + off, ks, sizeof(float) * Dh);
                memcpy((float *)vd + off, vs, sizeof(float) * Dh);
            } else if (o->dtype == TM_DT_BF16) {
                c->k.f32_to_bf16((uint16_t *)kd + off, ks, (size_t)Dh);
                c->k.f32_to_bf16((uint16_t *)vd + off, vs, (size_t)Dh);
            } else if (o->dtype == TM_DT_F16) {
                c->k.f32_to_f16((uint16_t *)kd + off, ks, (size_t)Dh);
                c->k.f32_to_f16((uint16_t *)vd + off, vs, (size_t)Dh);
            } else { /* int8: each row quantized with its own scale (runtime/kvcache.h) */
                tm_kv_row_store(r->kv, kd, slot, ks);
                tm_kv_row_store(r->kv, vd, slot, vs);
            }
        }
    }
}

/* RoPE on rows [i0, i1) of x[M][nh][Dh] (rope j->l, nh = j->n heads) */
static void rows_rope(const par_job *j, int i0, int i1)
{
    cpu_ctx *c = j->c;
    const tm_model *m = c->m;
    const tm_rope *rp = &m->rope[j->l];
    int half = rp->rot_dim / 2, nh = j->n;
    for (int i = i0; i < i1; i++) {
        int pos = j->r->pos[i];
        memcpy(c->cs + (size_t)i * half, c->rope_cos[j->l] + (size_t)pos * half, sizeof(float) * half);
        memcpy(c->sn + (size_t)i * half, c->rope_sin[j->l] + (size_t)pos * half, sizeof(float) * half);
    }
    float *x = j->y + (size_t)i0 * nh * m->Dh;
    if (rp->rot_dim == m->Dh) {
        c->k.rope(x, c->cs + (size_t)i0 * half, c->sn + (size_t)i0 * half, i1 - i0, nh, m->Dh);
        return;
    }
    /* partial rotary: rotate the first rot_dim dims of each head */
    for (int i = i0; i < i1; i++)
        for (int h = 0; h < nh; h++)
            c->k.rope(j->y + ((size_t)i * nh + h) * m->Dh, c->cs + (size_t)i * half, c->sn + (size_t)i * half, 1, 1,
                      rp->rot_dim);
}

/* Several steps over the same M rows in one pool run (par_rows over the
 * chain's job): each task takes its rows QB at a time through every step in
 * turn, so a few rows' q, k and v stay in L1 from the split to the KV store,
 * one fork-join for all of them instead of one each. Step k sees rows
 * [i0 mul[k], i1 mul[k]) (a per-head norm: nh rows of Dh per row). */
#define CHAIN_MAX 12 /* qkv_post adds at most 12 steps */
#define CHAIN_QB 8
typedef struct par_chain {
    par_job job; /* first: par_task hands rows_chain this job */
    par_job step[CHAIN_MAX];
    int mul[CHAIN_MAX], n;
} par_chain;

static void rows_chain(const par_job *j, int i0, int i1)
{
    const par_chain *ch = (const par_chain *)j;
    for (int b0 = i0; b0 < i1; b0 += CHAIN_QB) {
        int b1 = b0 + CHAIN_QB < i1 ? b0 + CHAIN_QB : i1;
        for (int k = 0; k < ch->n; k++) ch->step[k].fn(&ch->step[k], b0 * ch->mul[k], b1 * ch->mul[k]);
    }
}

static void chain_add(par_chain *ch, par_job j, int mul)
{
    assert(ch->n < CHAIN_MAX);
    ch->step[ch->n] = j;
    ch->mul[ch->n++] = mul;
}

/* Layer l's q, k, v from its projections to the attention's inputs, in one
 * pass over the rows: a fused projection's rows c->qkv[M][HD + 2 KD] (f32, or
 * bf16 where qkv16) split into c->q [M][H][Dh], c->kk and c->vv [M][Hk][Dh];
 * the biases; the per-head q / k norms; RoPE on q and k; k and v stored into
 * the KV cache. */
static void qkv_post(cpu_ctx *c, const cpu_rows *r, const cpu_layer *y, int l, int M, int qkv16)
{
    const tm_model *m = c->m;
    int H = m->H, Hk = m->Hk, Dh = m->Dh, HD = H * Dh, KD = Hk * Dh, rope = m->layer[l].rope;
    par_chain ch = {.job = {.fn = rows_chain, .c = c, .r = r}};
    if (y->wqkv)
        chain_add(&ch, (par_job){.fn = qkv16 ? rows_split_qkv_bf16 : rows_split_qkv, .c = c, .r = r, .n = HD, .l = KD}, 1);
    const float *bias[3] = {y->bq, y->bk, y->bv};
    float *dst[3] = {c->q, c->kk, c->vv};
    for (int i = 0; i < 3; i++)
        if (bias[i])
            chain_add(&ch, (par_job){.fn = rows_bias, .c = c, .r = r, .y = dst[i], .w = bias[i], .n = i ? KD : HD,
                                     .ld = i ? KD : HD}, 1);
    for (int i = 0; i < 3 && m->clip_qkv > 0; i++)
        chain_add(&ch, (par_job){.fn = rows_clip, .c = c, .r = r, .y = dst[i], .n = i ? KD : HD}, 1);
    int whole = m->qk_norm == 2; /* OLMo 2: one norm over the whole q (k) row, else one per head */
    rows_fn qkn = m->qk_norm_heads ? rows_norm_heads : rows_norm; /* a weight row per head (Cohere, StableLM) */
    if (y->q_norm)
        chain_add(&ch, (par_job){.fn = qkn, .c = c, .r = r, .y = c->q, .x = c->q, .w = y->q_norm, .b = y->q_norm_b,
                                 .n = whole ? HD : Dh, .l = H}, whole ? 1 : H);
    if (y->k_norm)
        chain_add(&ch, (par_job){.fn = qkn, .c = c, .r = r, .y = c->kk, .x = c->kk, .w = y->k_norm, .b = y->k_norm_b,
                                 .n = whole ? KD : Dh, .l = Hk}, whole ? 1 : Hk);
    if (rope >= 0) { /* -1: a layer without RoPE (SmolLM3's NoPE) */
        chain_add(&ch, (par_job){.fn = rows_rope, .c = c, .r = r, .y = c->q, .n = H, .l = rope}, 1);
        chain_add(&ch, (par_job){.fn = rows_rope, .c = c, .r = r, .y = c->kk, .n = Hk, .l = rope}, 1);
    }
    chain_add(&ch, (par_job){.fn = rows_kv_store, .c = c, .r = r, .l = l}, 1);
    par_rows(&ch.job, M, (size_t)(HD + 2 * KD) * 2);
}

/* A prefill chunk over int8 pages, T queries at pos0 .. pos0 + T - 1: the sequence's K and V rows 0 .. n - 1
 * (n = pos0 + T, the chunk's own just stored) dequantized into kv16 [2][Hk][n][Dh] bf16, each element s · q in
 * f32 (the int8 numerics' value, runtime/kvcache.h) rounded to nearest even, then the flash-style attn_prefill
 * over that contiguous copy. attn_decode a row at a time would read every earlier key once per query and run
 * the scores on vector units (a stateful pp4096 at int8 took 2.5x the time it takes now); here the keys come in
 * blocks for the whole chunk, on the prefill engine's tiles. The scores then use the bf16 keys with the query
 * unquantized (attn_decode: integer dots of the int8 key and an int8 query), within the int8 KV bounds of
 * docs/quality.md. Under a sliding window only the rows the chunk can see are converted. kv16 holds 4 n Hk Dh
 * bytes (32k tokens of 8 kv heads of 128: 128 MB), reused by every layer; TANDEM_Q8_ROWS=1 runs the chunk a row
 * at a time through attn_decode instead (a test switch). */
typedef struct kv16_job {
    const tm_kv_cache *kv;
    const tm_kv_view *v;
    const tm_kernels *k;
    uint16_t *dst;             /* [2][Hk][n][Dh] */
    int lo, n, Hk, Dh, per;    /* rows lo .. n - 1 converted; kv heads, head dim, rows a task */
} kv16_job;

static void kv16_task(void *ctx, int t, int worker)
{
    (void)worker;
    const kv16_job *j = ctx;
    int parts = (j->n - j->lo + j->per - 1) / j->per, hs = t / parts, p0 = j->lo + t % parts * j->per;
    int side = hs / j->Hk, h = hs % j->Hk, p1 = p0 + j->per < j->n ? p0 + j->per : j->n;
    float row[TM_KATTN_MAX_DH];
    for (int p = p0; p < p1; p++) {
        tm_kv_row_load(j->kv, tm_kv_view_block(j->v, h, p) + (side ? j->v->v_offset : 0), p % j->v->page_size, row);
        j->k->f32_to_bf16(j->dst + (((size_t)side * j->Hk + h) * j->n + p) * j->Dh, row, (size_t)j->Dh);
    }
}

static int attention_q8_chunk(cpu_ctx *c, const cpu_rows *r, const tm_kv_view *v, int window, int l, float *out)
{
    const tm_model *m = c->m;
    int n = r->pos[0] + r->M, Hk = m->Hk, Dh = m->Dh;
    if (Dh > TM_KATTN_MAX_DH) return TM_E_INVALID;
    int rc = tm_kbuf_reserve(&c->kv16, (size_t)4 * n * Hk * Dh);
    if (rc) return rc;
    /* a sliding window: no query of the chunk sees a key before pos0 - window + 1, and the kernels' key blocks
       start no earlier than that rounded down to TM_KATTN_KEY_BLOCK: the rows under it are left unconverted */
    int first = r->pos[0] - window + 1;
    int lo = window > 0 && first > 0 ? first / TM_KATTN_KEY_BLOCK * TM_KATTN_KEY_BLOCK : 0;
    kv16_job j = {.kv = r->kv, .v = v, .k = &c->k, .dst = c->kv16.p, .lo = lo, .n = n, .Hk = Hk, .Dh = Dh, .per = 256};
    if ((rc = tm_pool_run(r->pool, 2 * Hk * ((n - lo + j.per - 1) / j.per), kv16_task, &j))) return rc;
    const uint16_t *k16 = c->kv16.p;
    tm_kattn_prefill a = {
        .T = r->M, .H = m->H, .Hk = Hk, .Dh = Dh, .pos0 = r->pos[0], .q = c->q, .k = k16,
        .v = k16 + (size_t)Hk * n * Dh, .kv_dtype = TM_DT_BF16, .kv_stride = n, .out = out, .scale = m->attn_scale,
        .softcap = m->attn_softcap, .window = window, .alibi = m->alibi, .sinks = c->layer[l].sinks,
    };
    return c->k.attn_prefill(&a, &c->ws, r->pool);
}

static int attention(cpu_ctx *c, const cpu_rows *r, int l, float *out)
{
    const tm_model *m = c->m;
    const tm_layer_desc *ld = &m->layer[l];
    int window = ld->sliding ? ld->window : 0;
    const tm_kv_cache_opts *o = tm_kv_cache_info(r->kv);
    tm_kv_view v;
    tm_kv_view_of(r->kv, r->seq[0], l, &v);
    if (r->flash_prefill) { /* the sequence's pages: the staging cache's one page, or decode pages */
        tm_kattn_prefill a = {
            .T = r->M, .H = m->H, .Hk = m->Hk, .Dh = m->Dh, .pos0 = r->pos[0], .q = c->q, .k = v.base,
            .v = v.base + v.v_offset, .kv_dtype = o->dtype, .out = out, .scale = m->attn_scale,
            .softcap = m->attn_softcap, .window = window, .page_table = r->seq[0]->pages, .page_size = v.page_size,
            .n_pages = o->n_pages, .page_bytes = v.page_stride, .head_bytes = v.head_stride, .alibi = m->alibi,
            .sinks = c->layer[l].sinks,
        };
        return c->k.attn_prefill(&a, &c->ws, r->pool);
    }
    if (r->chunk && o->dtype == TM_DT_Q8PC && c->q8_chunk) return attention_q8_chunk(c, r, &v, window, l, out);
    for (int i = 0; i < r->M; i++) {
        c->ptab[i] = r->seq[i]->pages;
        c->ctxlen[i] = r->pos[i] + 1;
    }
    tm_kattn_decode a = {
        .B = r->M, .H = m->H, .Hk = m->Hk, .Dh = m->Dh, .q = c->q, .k_pages = v.base,
        .v_pages = v.base + v.v_offset, .page_bytes = v.page_stride, .page_size = v.page_size,
        .kv_dtype = o->dtype, .page_table = c->ptab, .ctx_len = c->ctxlen, .n_pages = o->n_pages, .out = out,
        .scale = m->attn_scale, .softcap = m->attn_softcap, .window = window, .head_bytes = v.head_stride,
        .alibi = m->alibi, .sinks = c->layer[l].sinks,
    };
    return c->k.attn_decode(&a, &c->ws, r->pool);
}

/* The gate|up GEMM's result in bf16 (gemm_bf16y, bf16y_ok), for the int8
 * prefill weights without biases: half the bytes the GEMM writes and the
 * activation pass reads back (Qwen2.5-0.5B's pp512: 20 MB of f32 per layer,
 * a quarter of the GEMM's time on the Xeon, session 18 run 82). */
static int ffn_bf16(const cpu_ctx *c, const cpu_layer *y, int M)
{
    if (!c->ffn_bf16 || y->b_gate || y->b_up || (!y->w_gate && !y->w_gate_up)) return 0;
    return y->w_gate_up ? bf16y_ok(c, y->w_gate_up, M) : bf16y_ok(c, y->w_gate, M) && bf16y_ok(c, y->w_up, M);
}

/* The dense FFN of layer y: f[M][D] = (act(h·wgᵀ + bg) ⊙ (h·wuᵀ + bu))·wdᵀ + bd,
 * h = norm(x) (x [M][D]: c->x, or c->x0 for a parallel FFN); without a gate
 * (Phi, StarCoder2, GPT-NeoX) act(h·wuᵀ + bu) in g[M][F]; else through g[M][2F] (gate|up as
 * one weight: the checkpoint's fused one, or bound so by pack_cat) or g, u
 * [M][F] (apart), or g[M][F] alone (gemm_glu); or (ffn_bf16) in bf16 in g's
 * memory: [M][2F] (gate|up) or gate [M][F] then up [M][F], or g[M][F]
 * (gemm_glu, under TANDEM_FFN_BF16 as well). *f16: f is in bf16
 * (y16: no down bias or output norm). */
static int dense_ffn(cpu_ctx *c, const cpu_rows *r, const cpu_layer *y, const float *x, int M, int *f16, tm_err *err)
{
    const tm_model *m = c->m;
    int D = m->D, F = m->F, rc;
    const float *nb = y->ffn_norm_b;
    tm_kact ad; /* the down projection's input */
    if (!y->w_gate && !y->w_gate_up) { /* not gated: act(up) -> g[M][F] */
        tm_kact a;
        norm_prep(c, r, c->h, x, y->ffn_norm, nb, M, y->w_up, NULL, NULL, &a);
        if ((rc = matmul_a(c, r, y->w_up, &a, c->g, err))) return rc;
        par_bias(c, r, c->g, y->b_up, M, F, F);
        act_prep(c, r, y->w_down, c->g, c->g, NULL, F, 0, M, F, &ad);
    } else if (ffn_bf16(c, y, M)) { /* gate and up in bf16; act(gate) * up -> the down projection's input */
        tm_kact a;
        const tm_kweight *w0 = y->w_gate_up ? y->w_gate_up : y->w_gate;
        uint16_t *gb = (uint16_t *)c->g, *ub = y->w_gate_up ? gb + F : gb + (size_t)M * F;
        norm_prep(c, r, c->h, x, y->ffn_norm, nb, M, w0, y->w_gate_up ? NULL : y->w_up, NULL, &a);
        if ((rc = matmul_a_to(c, r, w0, &a, NULL, gb, err))) return rc;
        if (!y->w_gate_up && (rc = matmul_a_to(c, r, y->w_up, &a, NULL, ub, err))) return rc;
        act_prep(c, r, y->w_down, c->u, gb, ub, y->w_gate_up ? 2 * F : F, 1, M, F, &ad);
    } else if (y->w_gate_up) { /* g[M][2F]: rows of gate then up; act(gate) * up -> u[M][F] */
        tm_kact a;
        norm_prep(c, r, c->h, x, y->ffn_norm, nb, M, y->w_gate_up, NULL, NULL, &a);
        if ((rc = matmul_a(c, r, y->w_gate_up, &a, c->g, err))) return rc;
        par_bias(c, r, c->g, y->b_gate, M, F, 2 * F);
        par_bias(c, r, c->g + F, y->b_up, M, F, 2 * F);
        act_prep(c, r, y->w_down, c->u, c->g, c->g + F, 2 * F, 0, M, F, &ad);
    } else if (y->w_glu && M > TM_KGEMV_MAX_B) { /* act(gate) * up -> g[M][F] in the GEMM's epilogue */
        tm_kact a;
        int b16 = c->ffn_bf16 && bf16y_ok(c, y->w_glu, M); /* g in bf16, widened row by row for the prepare */
        norm_prep(c, r, c->h, x, y->ffn_norm, nb, M, y->w_gate, y->w_up, NULL, &a);
        if ((rc = matmul_a_to(c, r, y->w_glu, &a, c->g, b16 ? (uint16_t *)c->g : NULL, err))) return rc;
        if (b16) act_prep(c, r, y->w_down, c->u, c->g, NULL, F, 1, M, F, &ad);
        else prep_act(c, r, y->w_down, c->g, M, &ad);
    } else { /* g[M][F], u[M][F]; act(gate) * up -> g */
        tm_kact a;
        norm_prep(c, r, c->h, x, y->ffn_norm, nb, M, y->w_gate, y->w_up, NULL, &a);
        if ((rc = matmul_a(c, r, y->w_gate, &a, c->g, err))) return rc;
        if ((rc = matmul_a(c, r, y->w_up, &a, c->u, err))) return rc;
        par_bias(c, r, c->g, y->b_gate, M, F, F);
        par_bias(c, r, c->u, y->b_up, M, F, F);
        act_prep(c, r, y->w_down, c->g, c->g, c->u, F, 0, M, F, &ad);
    }
    *f16 = !y->b_down && !y->ffn_out_norm && y16(c, Y16_DOWN, y->w_down, M);
    if ((rc = matmul_a_to(c, r, y->w_down, &ad, c->f, *f16 ? (uint16_t *)c->f : NULL, err))) return rc;
    par_bias(c, r, c->f, y->b_down, M, D, D);
    return TM_OK;
}

static int forward_rows(cpu_ctx *c, const cpu_rows *r, tm_err *err)
{
    const tm_model *m = c->m;
    int M = r->M, D = m->D;
    int rc;
    if (M < 1 || M > CPU_MAX_ROWS) return tm_errf(err, TM_E_INVALID, "cpu engine: %d rows (1..%d)", M, CPU_MAX_ROWS);
    for (int i = 0; i < M; i++) {
        if (r->tokens[i] < 0 || r->tokens[i] >= m->V)
            return tm_errf(err, TM_E_INVALID, "token id %d out of range (vocabulary %d)", r->tokens[i], m->V);
        if (r->pos[i] < 0 || r->pos[i] >= c->max_ctx)
            return tm_errf(err, TM_E_LIMIT, "position %d beyond the context of %d tokens", r->pos[i], c->max_ctx);
        if (m->pos_embed.data && r->pos[i] >= m->max_pos)
            return tm_errf(err, TM_E_LIMIT, "position %d beyond the model's %d learned positions", r->pos[i], m->max_pos);
    }
    /* x[M][D] = embed[tok] * embed_scale (+ pos_embed[pos + pos_offset], GPT-2, OPT; its row goes through f) */
    for (int i = 0; i < M; i++) {
        float *x = c->x + (size_t)i * D, *p = c->f + (size_t)i * D;
        tm_quant_dequant_row(m->embed.dtype, m->embed.data, m->embed.scales, D, r->tokens[i], x);
        if (m->embed_scale != 1.0f)
            for (int j = 0; j < D; j++) x[j] *= m->embed_scale;
        if (!m->pos_embed.data) continue;
        tm_quant_dequant_row(m->pos_embed.dtype, m->pos_embed.data, m->pos_embed.scales, D, r->pos[i] + m->pos_offset, p);
        for (int j = 0; j < D; j++) x[j] += p[j];
    }
    if (c->embed_norm) par_norm(c, r, c->x, c->x, c->embed_norm, c->embed_norm_b, M, D); /* BLOOM */
    for (int l = 0; l < m->L; l++) {
        const cpu_layer *y = &c->layer[l];
        int qkv16 = 0, f16; /* q|k|v, f in bf16 (y16) */
        if (y->mla) { /* q, k, v from the latent (mla.c), into c->q, c->kk, c->vv */
            par_norm(c, r, c->h, c->x, y->attn_norm, y->attn_norm_b, M, D);
            if ((rc = tm_mla_qkv(y->mla, &c->k, c->h, M, c->q, c->kk, c->vv, &c->ws, r->pool, err))) return rc;
        } else if (y->wqkv) { /* one matmul into qkv[M][HD + 2 KD], split */
            tm_kact a;
            norm_prep(c, r, c->h, c->x, y->attn_norm, y->attn_norm_b, M, y->wqkv, NULL, NULL, &a);
            qkv16 = y16(c, Y16_QKV, y->wqkv, M);
            if ((rc = matmul_a_to(c, r, y->wqkv, &a, c->qkv, qkv16 ? (uint16_t *)c->qkv : NULL, err))) return rc;
        } else {
            tm_kact a;
            norm_prep(c, r, c->h, c->x, y->attn_norm, y->attn_norm_b, M, y->wq, y->wk, y->wv, &a);
            if ((rc = matmul_a(c, r, y->wq, &a, c->q, err))) return rc;
            if ((rc = matmul_a(c, r, y->wk, &a, c->kk, err))) return rc;
            if ((rc = matmul_a(c, r, y->wv, &a, c->vv, err))) return rc;
        }
        qkv_post(c, r, y, l, M, qkv16);
        double t0 = c->profile ? tm_now_s() : 0;
        if ((rc = attention(c, r, l, c->h))) return tm_errf(err, rc, "cpu engine: attention failed (layer %d)", l);
        if (c->profile) c->prof[c->prof_kind][2] += tm_now_s() - t0;
        if (y->mla && (rc = tm_mla_out(y->mla, &c->k, c->h, M, &c->ws, r->pool, err))) return rc; /* [M][H*v] */
        f16 = !y->bo && !y->attn_out_norm && y16(c, Y16_O, y->wo, M);
        if ((rc = matmul_to(c, r, y->wo, y->mla ? y->mla->o : c->h, M, c->f, f16 ? (uint16_t *)c->f : NULL, err)))
            return rc;
        par_bias(c, r, c->f, y->bo, M, D, D);
        if (y->attn_out_norm) par_norm(c, r, c->f, c->f, y->attn_out_norm, NULL, M, D);
        if (c->x0) memcpy(c->x0, c->x, sizeof(float) * (size_t)M * D); /* parallel: the FFN reads x as it was */
        par_add(c, r, c->x, c->f, f16, M, D);

        const float *xin = c->x0 ? c->x0 : c->x;
        if (y->moe) par_norm(c, r, c->h, xin, y->ffn_norm, y->ffn_norm_b, M, D);
        f16 = 0;
        if (y->moe) {
            if ((rc = tm_moe_forward(y->moe, &c->k, c->h, M, c->f, &c->moe, &c->ws, r->pool, err))) return rc;
        } else if ((rc = dense_ffn(c, r, y, xin, M, &f16, err))) {
            return rc;
        }
        if (y->ffn_out_norm) par_norm(c, r, c->f, c->f, y->ffn_out_norm, NULL, M, D);
        par_add(c, r, c->x, c->f, f16, M, D);
        if (r->on_layer) r->on_layer(r->ud, l);
    }
    /* each row's final hidden state, through one row of scratch (c->h holds M rows) */
    for (int j = 0; j < r->n_hidden; j++) {
        norm_rows(c, c->h, c->x + (size_t)j * D, c->final_norm, c->final_norm_b, 1, D);
        r->on_hidden(r->row_ud, j, c->h);
    }
    /* logits for the requested rows only */
    for (int j = 0; j < r->n_logit_rows; j++) {
        const float *x = c->x + (size_t)r->logit_rows[j] * D;
        norm_rows(c, c->h + (size_t)j * D, x, c->final_norm, c->final_norm_b, 1, D);
    }
    /* by blocks of rows (the head's GEMV takes at most TM_KGEMV_MAX_B); on_row: each block into the
       same buffer, handed over row by row */
    for (int j0 = 0; j0 < r->n_logit_rows; j0 += TM_KGEMV_MAX_B) {
        int nb = r->n_logit_rows - j0 < TM_KGEMV_MAX_B ? r->n_logit_rows - j0 : TM_KGEMV_MAX_B;
        float *y = r->on_row ? r->logits : r->logits + (size_t)j0 * m->V;
        size_t n = (size_t)nb * m->V;
        if ((rc = matmul(c, r, c->lm_head, c->h + (size_t)j0 * D, nb, y, err))) return rc;
        for (int j = 0; c->lm_head_b && j < nb; j++) /* Phi's, GPT-J's head bias */
            for (int v = 0; v < m->V; v++) y[(size_t)j * m->V + v] += c->lm_head_b[v];
        if (m->logits_div != 1.0f)
            for (size_t i = 0; i < n; i++) y[i] /= m->logits_div;
        if (m->logits_mul != 1.0f)
            for (size_t i = 0; i < n; i++) y[i] *= m->logits_mul;
        if (m->final_softcap > 0) {
            float cap = m->final_softcap;
            for (size_t i = 0; i < n; i++) y[i] = tanhf(y[i] / cap) * cap;
        }
        for (int j = 0; r->on_row && j < nb; j++) r->on_row(r->row_ud, r->logit_rows[j0 + j], y + (size_t)j * m->V);
        if (r->on_row && r->last && j0 + nb == r->n_logit_rows)
            memcpy(r->last, y + (size_t)(nb - 1) * m->V, sizeof(float) * (size_t)m->V);
    }
    return TM_OK;
}

static int forward(cpu_ctx *c, const cpu_rows *r, int decode, tm_err *err)
{
    if (!c->profile) return forward_rows(c, r, err);
    double t0 = tm_now_s();
    c->prof_kind = decode;
    int rc = forward_rows(c, r, err);
    c->prof[decode][0] += tm_now_s() - t0;
    c->prof_calls[decode]++;
    if (c->profile == 2 && !c->prof_warm[decode]) { /* the first call: left out */
        c->prof_warm[decode] = 1;
        memset(c->prof[decode], 0, sizeof c->prof[decode]);
        c->prof_ops[decode] = 0;
        c->prof_calls[decode] = 0;
        for (int i = 0; i < c->prof_nmm; i++) {
            if (c->prof_mm[i].kind != decode) continue;
            c->prof_mm[i].calls = 0;
            c->prof_mm[i].s = c->prof_mm[i].ops = 0;
        }
    }
    return rc;
}

/* ---- engine entry points ------------------------------------------------------ */

static int cpu_prefill(void *vctx, const tm_prefill_args *a, tm_err *err)
{
    cpu_ctx *c = vctx;
    int T = a->T;
    if (T < 1 || T > CPU_MAX_ROWS || a->n_valid < 1 || a->n_valid > T)
        return tm_errf(err, TM_E_INVALID, "prefill: chunk %d with %d valid tokens", T, a->n_valid);
    const tm_kv_cache_opts *o = tm_kv_cache_info(a->kv);
    int need = a->pos0 + T;
    if (a->seq->n_pages * o->page_size < need)
        return tm_errf(err, TM_E_INVALID, "prefill: KV pages cover %d positions, the chunk needs %d",
                       a->seq->n_pages * o->page_size, need);
    int pos[CPU_MAX_ROWS];
    tm_kv_seq *seqs[CPU_MAX_ROWS];
    for (int i = 0; i < T; i++) {
        pos[i] = a->pos0 + i;
        seqs[i] = a->seq;
    }
    int last = a->n_valid - 1, rows[CPU_MAX_ROWS];
    cpu_rows r = {
        .M = T, .tokens = a->tokens, .pos = pos, .seq = seqs, .kv = a->kv,
        .flash_prefill = o->dtype == TM_DT_BF16 || o->dtype == TM_DT_F16 || o->dtype == TM_DT_F32, .chunk = 1,
        .logits = a->logits, .logit_rows = &last, .n_logit_rows = a->logits ? 1 : 0,
        .on_layer = a->on_layer, .ud = a->ud, .pool = a->pool ? a->pool : c->pool, .gemm = a->gemm,
    };
    float *buf = NULL;
    if (a->on_row_logits) { /* every valid row, through a block's buffer */
        if (!(buf = malloc(sizeof(float) * (size_t)TM_KGEMV_MAX_B * (size_t)c->m->V)))
            return tm_errf(err, TM_E_NOMEM, "prefill: out of memory (row logits)");
        for (int i = 0; i < a->n_valid; i++) rows[i] = i;
        r.logits = buf, r.logit_rows = rows, r.n_logit_rows = a->n_valid;
        r.on_row = a->on_row_logits, r.row_ud = a->row_ud, r.last = a->logits;
    }
    if (a->on_row_hidden) r.on_hidden = a->on_row_hidden, r.n_hidden = a->n_valid, r.row_ud = a->row_ud;
    int rc = forward(c, &r, 0, err);
    free(buf);
    if (rc == TM_OK && a->seq->n_tokens < a->pos0 + a->n_valid) a->seq->n_tokens = a->pos0 + a->n_valid;
    return rc;
}

static int cpu_decode(void *vctx, const tm_decode_args *a, tm_err *err)
{
    cpu_ctx *c = vctx;
    if (a->B < 1 || a->B > TM_KGEMV_MAX_B) return tm_errf(err, TM_E_INVALID, "decode: batch %d (1..%d)", a->B, TM_KGEMV_MAX_B);
    float *logits = a->logits;
    int V = c->m->V;
    if (!logits && !a->argmax) return tm_errf(err, TM_E_INVALID, "decode: neither logits nor argmax to fill");
    if (!logits) { /* the argmax only: the logits into the engine's own rows */
        if (!c->amax_logits && !(c->amax_logits = malloc(sizeof(float) * TM_KGEMV_MAX_B * (size_t)V)))
            return tm_errf(err, TM_E_NOMEM, "decode: out of memory (logits)");
        logits = c->amax_logits;
    }
    int rows[TM_KGEMV_MAX_B];
    for (int i = 0; i < a->B; i++) rows[i] = i;
    cpu_rows r = {
        .M = a->B, .tokens = a->tokens, .pos = a->pos, .seq = a->seqs, .kv = a->kv,
        .logits = logits, .logit_rows = rows, .n_logit_rows = a->B, .pool = a->pool ? a->pool : c->pool,
    };
    int rc = forward(c, &r, 1, err);
    if (rc == TM_OK)
        for (int i = 0; i < a->B; i++) {
            if (a->seqs[i]->n_tokens < a->pos[i] + 1) a->seqs[i]->n_tokens = a->pos[i] + 1;
            if (a->argmax) a->argmax[i] = tm_argmax_f32(logits + (size_t)i * V, V);
        }
    return rc;
}

/* ---- the variants ------------------------------------------------------------- */

static int probe_common(const cpu_variant *v, tm_engine_caps *caps, tm_err *err)
{
    tm_kernels k;
    int rc = tm_kernels_select(v->kernels, &k, err);
    if (rc != TM_OK) return rc;
    memset(caps, 0, sizeof *caps);
    caps->name = v->engine;
    caps->device = "cpu";
    caps->roles = v->roles;
    int n = 0;
    if (v->roles & TM_ROLE_PREFILL) {
        caps->encodings[n++] = TM_DT_BF16;
        caps->encodings[n++] = TM_DT_Q8PC;
    }
    if (v->roles & TM_ROLE_DECODE) {
        caps->encodings[n++] = TM_DT_Q4G64;
        caps->encodings[n++] = TM_DT_Q4G32;
        caps->encodings[n++] = TM_DT_Q4PC;
        caps->encodings[n++] = TM_DT_Q6G64;
        if (!(v->roles & TM_ROLE_PREFILL)) {
            caps->encodings[n++] = TM_DT_Q8PC;
            caps->encodings[n++] = TM_DT_BF16;
        }
    }
    caps->n_encodings = n;
    static const int chunks[] = {64, 128, 256, 512};
    if (v->roles & TM_ROLE_PREFILL) {
        memcpy(caps->chunk_sizes, chunks, sizeof chunks);
        caps->n_chunks = 4;
    }
    /* the paged cache's dtypes attn_decode reads (an f32 cache serves only the
     * contiguous prefill path: staging and tests) */
    caps->kv_dtypes[0] = TM_DT_BF16;
    caps->kv_dtypes[1] = TM_DT_F16;
    caps->kv_dtypes[2] = TM_DT_Q8PC;
    caps->n_kv_dtypes = 3;
    caps->max_batch = TM_KGEMV_MAX_B;
    caps->row_logits = caps->row_hidden = (v->roles & TM_ROLE_PREFILL) != 0;
    caps->argmax = 1; /* cpu_decode (every variant's, whatever its roles: the prefill-only route decodes on it) */
    return TM_OK;
}

#define CPU_VARIANT(sym, ename, kname, roles_)                                                     \
    static const cpu_variant sym##_v = {ename, kname, roles_};                                     \
    static int sym##_probe(tm_engine_caps *caps, tm_err *err) { return probe_common(&sym##_v, caps, err); } \
    static int sym##_bind(void **ctx, const struct tm_model *m, const tm_engine_opts *o, tm_err *err) \
    { return cpu_bind(ctx, m, o, &sym##_v, err); }                                                 \
    const tm_engine_vt tm_engine_##sym = {.version = TM_ENGINE_VERSION, .name = ename, .probe = sym##_probe, \
                                          .bind = sym##_bind, .prefill = cpu_prefill, .decode = cpu_decode, \
                                          .unbind = cpu_unbind};

CPU_VARIANT(cpu_amx, "cpu-amx", "amx", TM_ROLE_PREFILL)
/* cpu-amx over emulated tiles (kernels "amx-emu"): tests only, never picked */
CPU_VARIANT(cpu_amx_emu, "cpu-amx-emu", "amx-emu", TM_ROLE_PREFILL)
CPU_VARIANT(cpu_avx512, "cpu-avx512", "avx512", TM_ROLE_PREFILL | TM_ROLE_DECODE)
CPU_VARIANT(cpu_avx2, "cpu-avx2", "avx2", TM_ROLE_PREFILL | TM_ROLE_DECODE)
CPU_VARIANT(cpu_scalar, "cpu-scalar", "scalar", TM_ROLE_PREFILL | TM_ROLE_DECODE)
