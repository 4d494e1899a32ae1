/* engine/cpu/kdispatch.c: the kernel table (variants, selection by CPUID or
 * by name), tm_kmatmul, activation preparation, argument checks, and the
 * thread drivers every ISA's GEMV/GEMM uses. */
#include <stddef.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/threadpool.h"
#include "engine/cpu/kernels-impl.h"

const char *const tm_kop_names[TM_KOP_COUNT] = {
    "gemv_q4", "gemv_q8", "gemv_bf16", "gemm_bf16", "gemm_q8", "rmsnorm", "rmsnorm_bf16",
    "rmsnorm_q8", "quant_q8", "silu_mul", "gelu_tanh_mul", "gelu_mul", "rope", "softmax", "f32_to_bf16",
    "bf16_to_f32", "f32_to_f16", "f16_to_f32", "attn_prefill", "attn_decode",
};

static const size_t op_off[TM_KOP_COUNT] = {
    offsetof(tm_kernels, gemv_q4), offsetof(tm_kernels, gemv_q8), offsetof(tm_kernels, gemv_bf16),
    offsetof(tm_kernels, gemm_bf16), offsetof(tm_kernels, gemm_q8), offsetof(tm_kernels, rmsnorm),
    offsetof(tm_kernels, rmsnorm_bf16), offsetof(tm_kernels, rmsnorm_q8), offsetof(tm_kernels, quant_q8),
    offsetof(tm_kernels, silu_mul), offsetof(tm_kernels, gelu_tanh_mul), offsetof(tm_kernels, gelu_mul), offsetof(tm_kernels, rope),
    offsetof(tm_kernels, softmax), offsetof(tm_kernels, f32_to_bf16), offsetof(tm_kernels, bf16_to_f32),
    offsetof(tm_kernels, f32_to_f16), offsetof(tm_kernels, f16_to_f32), offsetof(tm_kernels, attn_prefill),
    offsetof(tm_kernels, attn_decode),
};

typedef void (*any_fn)(void);

static any_fn op_get(const tm_kernels *k, int i)
{
    any_fn f;
    memcpy(&f, (const char *)k + op_off[i], sizeof f);
    return f;
}

/* ---- variants ---------------------------------------------------------------- */

typedef struct variant {
    const char *name;
    void (*fill)(tm_kernels *k);
    const char *(*missing)(const tm_cpu *c); /* NULL if runnable, else what is missing */
} variant;

static const char *miss_none(const tm_cpu *c) { (void)c; return NULL; }
static const char *miss_avx2(const tm_cpu *c) { return tm_cpu_has_avx2(c) ? NULL : "AVX2+FMA+F16C missing"; }
static const char *miss_avx512(const tm_cpu *c)
{
    return tm_cpu_has_avx512(c) ? NULL : "AVX-512 F/BW/VL/DQ + VNNI + BF16 missing";
}
static const char *miss_amx(const tm_cpu *c)
{
    if (!c->amx_usable) return c->amx_note; /* says why: no AMX, or the kernel refused its tiles */
    return miss_avx512(c);
}

static const variant variants[] = {
    {"scalar", tm_kvariant_scalar, miss_none},
    {"avx2", tm_kvariant_avx2, miss_avx2},
    {"avx512", tm_kvariant_avx512, miss_avx512},
    {"amx", tm_kvariant_amx, miss_amx},
};
#define N_VARIANTS ((int)(sizeof variants / sizeof variants[0]))

const char *const *tm_kernels_variants(void)
{
    static const char *const names[] = {"scalar", "avx2", "avx512", "amx", NULL};
    return names;
}

static void build(int level, tm_kernels *k)
{
    memset(k, 0, sizeof *k);
    for (int i = 0; i <= level; i++) variants[i].fill(k);
    k->name = variants[level].name;
}

/* "amx-emu": not a rung of the ladder, never picked as the best: avx512 with
 * the AMX variant's ops built over emulated tiles (amx_emu.h), for tests */
static int select_amx_emu(tm_kernels *k, tm_err *err)
{
    const char *miss = miss_avx512(tm_cpu_get());
    if (miss) return tm_errf(err, TM_E_UNSUPPORTED, "kernels 'amx-emu' cannot run here: %s", miss);
    for (int i = 0; i < N_VARIANTS; i++)
        if (variants[i].fill == tm_kvariant_avx512) build(i, k);
    tm_kvariant_amx_emu(k);
    k->name = "amx-emu";
    return TM_OK;
}

int tm_kernels_select(const char *name, tm_kernels *k, tm_err *err)
{
    if (strcmp(name, "best") == 0) {
        tm_kernels_best(k);
        return TM_OK;
    }
    if (strcmp(name, "amx-emu") == 0) return select_amx_emu(k, err);
    for (int i = 0; i < N_VARIANTS; i++) {
        if (strcmp(variants[i].name, name) != 0) continue;
        const char *miss = variants[i].missing(tm_cpu_get());
        if (miss)
            return tm_errf(err, TM_E_UNSUPPORTED, "kernels '%s' cannot run here: %s", name, miss);
        build(i, k);
        return TM_OK;
    }
    return tm_errf(err, TM_E_NOTFOUND, "kernels '%s': unknown (scalar, avx2, avx512, amx, amx-emu, best)", name);
}

void tm_kernels_best(tm_kernels *k)
{
    const tm_cpu *c = tm_cpu_get();
    int level = 0;
    for (int i = N_VARIANTS - 1; i > 0; i--)
        if (!variants[i].missing(c)) { level = i; break; }
    build(level, k);
}

const char *tm_kernels_op_source(const tm_kernels *k, int i)
{
    if (i < 0 || i >= TM_KOP_COUNT) return "?";
    any_fn f = op_get(k, i);
    /* a variant's fill runs code built for its ISA (the compiler may vectorize the table's stores with
       it), so only the variants this CPU runs are asked; a table built here holds no other */
    const tm_cpu *c = tm_cpu_get();
    if (!miss_avx512(c)) {
        tm_kernels emu;
        memset(&emu, 0, sizeof emu);
        tm_kvariant_amx_emu(&emu);
        if (f && op_get(&emu, i) == f) return "amx-emu";
    }
    for (int v = N_VARIANTS - 1; v >= 0; v--) {
        if (variants[v].missing(c)) continue;
        tm_kernels only;
        memset(&only, 0, sizeof only);
        variants[v].fill(&only);
        any_fn g = op_get(&only, i);
        if (g && g == f) return variants[v].name;
    }
    return "?";
}

/* ---- activations ------------------------------------------------------------ */

size_t tm_kact_need_bf16(const tm_kact *x)
{
    return x->bf16 ? 0 : tm_kalign64((size_t)x->M * (size_t)tm_kact_ld(x->K) * 2);
}

size_t tm_kact_need_q8(const tm_kact *x)
{
    return x->q8 ? 0 : tm_kalign64((size_t)x->M * (size_t)tm_kact_ld(x->K)) + tm_kalign64((size_t)x->M * 4);
}

/* preparing rows [r0, r1) of x, on the pool for GEMM-sized M */
typedef struct prep_job {
    const tm_kact *x;
    tm_kcvt_bf16_fn cvt;
    tm_kquant_q8_fn quant;
    void *out;           /* bf16 or int8 rows [M][ld] */
    float *scale;        /* int8: [M] */
    int per;             /* rows per task */
} prep_job;

static void prep_rows(const prep_job *j, int r0, int r1)
{
    const tm_kact *x = j->x;
    int ld = tm_kact_ld(x->K);
    if (j->cvt) {
        uint16_t *o = j->out;
        for (int m = r0; m < r1; m++) {
            j->cvt(o + (size_t)m * ld, x->f32 + (size_t)m * x->K, (size_t)x->K);
            memset(o + (size_t)m * ld + x->K, 0, (size_t)(ld - x->K) * 2);
        }
    } else {
        j->quant((uint8_t *)j->out + (size_t)r0 * ld, j->scale + r0, ld, x->f32 + (size_t)r0 * x->K, r1 - r0, x->K);
    }
}

static void prep_task(void *ctx, int t, int worker)
{
    (void)worker;
    const prep_job *j = ctx;
    int r0 = t * j->per, r1 = r0 + j->per < j->x->M ? r0 + j->per : j->x->M;
    prep_rows(j, r0, r1);
}

static void prep_run(prep_job *j, struct tm_pool *pool)
{
    int M = j->x->M, nw = tm_pool_size(pool);
    if (!pool || nw <= 1 || M < 32) {
        prep_rows(j, 0, M);
        return;
    }
    j->per = (M + 2 * nw - 1) / (2 * nw);
    if (j->per < 8) j->per = 8;
    tm_pool_run(pool, (M + j->per - 1) / j->per, prep_task, j);
}

const uint16_t *tm_kact_get_bf16(const tm_kact *x, tm_kbuf *ws, size_t off, tm_kcvt_bf16_fn cvt, struct tm_pool *pool)
{
    if (x->bf16) return x->bf16;
    prep_job j = {.x = x, .cvt = cvt, .out = tm_kbuf_at(ws, off)};
    prep_run(&j, pool);
    return j.out;
}

const uint8_t *tm_kact_get_q8(const tm_kact *x, tm_kbuf *ws, size_t off, tm_kquant_q8_fn quant, const float **scale,
                              struct tm_pool *pool)
{
    if (x->q8) {
        *scale = x->q8_scale;
        return x->q8;
    }
    int ld = tm_kact_ld(x->K);
    prep_job j = {.x = x, .quant = quant, .out = tm_kbuf_at(ws, off),
                  .scale = tm_kbuf_at(ws, off + tm_kalign64((size_t)x->M * (size_t)ld))};
    prep_run(&j, pool);
    *scale = j.scale;
    return j.out;
}

static int act_ok(const tm_kact *x, const tm_kweight *w)
{
    if (!x || x->M < 1 || x->K != w->K) return 0;
    if (!x->f32 && !x->bf16 && !x->q8) return 0;
    if ((x->bf16 || x->q8) && x->ld != tm_kact_ld(x->K)) return 0;
    if (x->q8 && !x->q8_scale) return 0;
    return 1;
}

int tm_kcheck_gemv(const tm_kweight *w, const tm_kact *x, int want)
{
    if (!w || !act_ok(x, w) || x->M > TM_KGEMV_MAX_B) return TM_E_INVALID;
    if (want == 4 ? !tm_kdt_block32(w->dtype) : (int)w->dtype != want) return TM_E_INVALID;
    if (want == 4 && !x->f32) return TM_E_INVALID;                   /* block-32 quantization is internal */
    if (want == TM_DT_BF16 && !x->f32 && !x->bf16) return TM_E_INVALID;
    if (want == TM_DT_Q8PC && !x->f32 && !x->q8) return TM_E_INVALID;
    return TM_OK;
}

int tm_kcheck_gemm(const tm_kweight *w, const tm_kact *x, tm_dtype want)
{
    if (!w || !act_ok(x, w) || w->dtype != want || !w->panel || w->glu) return TM_E_INVALID; /* glu: gemm_glu's */
    if (want == TM_DT_BF16 && !x->f32 && !x->bf16) return TM_E_INVALID;
    if (want == TM_DT_Q8PC && !x->f32 && !x->q8) return TM_E_INVALID;
    return TM_OK;
}

/* ---- thread drivers -------------------------------------------------------- */

/* GEMV rows in tasks of decreasing size ("guided"): each takes a share of
 * the rows still unassigned, so the pool starts on large tasks (few
 * dispatches, long prefetch streams) and ends on small ones (a worker that
 * finishes early waits at most one small task for the other). */
#define GEMV_MAX_TASKS 64

typedef struct rows_job {
    tm_krows_fn fn;
    void *ctx;
    int start[GEMV_MAX_TASKS + 1]; /* task t: rows [start[t], start[t + 1]) */
} rows_job;

static void rows_task(void *c, int task, int worker)
{
    rows_job *j = c;
    j->fn(j->ctx, j->start[task], j->start[task + 1], worker);
}

#ifndef GEMV_MIN_ROWS
#define GEMV_MIN_ROWS 32
#endif
/* A task takes 1 / (share * workers) of the rows left: share 2 for a GEMV of
 * more than GEMV_SMALL bytes per worker, 1 below (fewer tasks, so fewer
 * starts of a weight stream, whose first lines wait on memory unprefetched).
 * Dev (EPYC, 2 threads, from DRAM): 896 x 896 int4 21.9 -> 27.5 GB/s and
 * 1152 x 896 23.3 -> 29.1 with share 1; the 151936 x 896 int8 head 41 -> 38
 * with it, so large GEMVs keep 2. On the Xeon (session 13, run 52) the rule
 * measured within that host's noise. GEMV_MIN_ROWS and GEMV_SMALL are build
 * options for such measurements. */
#ifndef GEMV_SMALL
#define GEMV_SMALL ((size_t)2 << 20)
#endif

void tm_kgemv_run(int N, int align, size_t row_bytes, tm_krows_fn fn, void *ctx, struct tm_pool *pool)
{
    int nw = tm_pool_size(pool);
    if (nw <= 1 || N <= align) {
        fn(ctx, 0, N, 0);
        return;
    }
    /* each task at least GEMV_MIN_ROWS rows (per-task overhead), a multiple of align */
    int min = (GEMV_MIN_ROWS + align - 1) / align * align;
    int share = (size_t)N * row_bytes / (size_t)nw < GEMV_SMALL ? 1 : 2;
    rows_job j = {fn, ctx, {0}};
    int t = 0, n = 0;
    while (n < N) {
        int left = N - n, take = left / (share * nw);
        if (take < min) take = min;
        take = (take + align - 1) / align * align;
        if (t == GEMV_MAX_TASKS - 1 || take > left) take = left;
        j.start[t++] = n;
        n += take;
    }
    j.start[t] = N;
    tm_pool_run(pool, t, rows_task, &j);
}

/* GEMM tasks: n_mb row blocks of mb rows x n_pt panel ranges. A range is a
 * run of whole units of q panels (4, the AMX GEMM's panel group, unless the
 * GEMM is too narrow to give every worker 4 tasks so: then 2 or 1; the last
 * unit may be short), the units split as evenly as integers allow, the
 * larger ranges first (the pool hands tasks out in order, so the last ones,
 * which decide how long the others wait, are the small ones), at most
 * 16 panels a task (the AMX GEMM's K-outer accumulator holds that many).
 * n_pt is the fewest ranges that give every worker 4 tasks or more, raised,
 * where the units allow, until the tasks divide evenly among the workers:
 * with equal tasks, one left over keeps a worker busy while the others wait
 * (Qwen-0.5B's gate|up, 512 x 9728 x 896 on 2 threads, took 19 tasks of 16
 * panels, one worker doing 10 and the other 9; now 20 of 15.2). Tasks run in
 * order with the row block fastest, so where n_mb is 2 the workers take the
 * two row halves of one range at once and read its weights together.
 * Session 21 (runs 101-102, h200-host Xeon, 2 threads, kbench-ab against the
 * split before it, which halved 16-panel ranges until every worker had 4
 * tasks): 512 x 9728 x 896 1.018x, 1.014x, 1.044x; a 64-row chunk's 1152 x
 * 896 (9 tasks before, 8 now) 1.068x; 512 x 1152 x 896 (10 tasks of 8 and 4
 * panels before, 8 of 12 and 8 now) 0.965x, 0.967x, 1.005x; shapes whose
 * split did not change 1.010x, 1.004x, 0.990x. */
#define KGEMM_PANELS_MAX 16

typedef struct block_job {
    tm_kblock_fn fn;
    void *ctx;
    int M, npan, mb, n_mb, q, units, n_pt;
} block_job;

static void block_task(void *c, int task, int worker)
{
    block_job *j = c;
    int mi = task % j->n_mb, pi = task / j->n_mb;
    int m0 = mi * j->mb, m1 = m0 + j->mb;
    int base = j->units / j->n_pt, extra = j->units % j->n_pt; /* the first `extra` ranges one unit more */
    int u0 = pi * base + (pi < extra ? pi : extra), u1 = u0 + base + (pi < extra);
    int p1 = u1 * j->q;
    j->fn(j->ctx, m0, m1 < j->M ? m1 : j->M, u0 * j->q, p1 < j->npan ? p1 : j->npan, worker);
}

int tm_khomed(void)
{
    static _Atomic int v = -1;
    int x = atomic_load_explicit(&v, memory_order_relaxed);
    if (x < 0) {
        const char *e = getenv("TANDEM_HOMED");
        x = !(e && !strcmp(e, "0"));
        atomic_store_explicit(&v, x, memory_order_relaxed);
    }
    return x;
}

void tm_kgemm_run(int M, int Np, int mb, tm_kblock_fn fn, void *ctx, struct tm_pool *pool)
{
    int nw = tm_pool_size(pool), npan = Np / 32;
    int n_mb = (M + mb - 1) / mb, q = 4;
    while (q > 1 && n_mb * ((npan + q - 1) / q) < 4 * nw) q /= 2;
    int units = (npan + q - 1) / q, per = KGEMM_PANELS_MAX / q; /* units: at most per a task */
    int n_pt = (units + per - 1) / per;
    while (n_pt < units && n_mb * n_pt < 4 * nw) n_pt++;
    while (n_pt < units && (n_mb * n_pt) % nw) n_pt++;
    block_job j = {fn, ctx, M, npan, mb, n_mb, q, units, n_pt};
    int tasks = n_mb * n_pt;
    if (nw <= 1) {
        for (int t = 0; t < tasks; t++) block_task(&j, t, 0);
        return;
    }
    if (n_mb % nw == 0 && tm_khomed()) { /* row block mi's home: worker mi mod nw (task mod nw) */
        tm_pool_run_homed(pool, tasks, block_task, &j);
        return;
    }
    tm_pool_run(pool, tasks, block_task, &j);
}

/* Split-N tasks (tm_kgemm_run_split): n_pt = nw x per_worker panel ranges,
 * each run over the n_mb row blocks in turn. Task t's home is worker t mod
 * nw, and its place in the sequence of (panel range, row block), the range
 * slowest, is s = (t mod nw) * per_w + t / nw (per_w = n_mb n_pt / nw;
 * tm_ksplit_bounds): a worker's own tasks are consecutive, so the workers'
 * weights are disjoint and a worker's prefetch of the panels past its
 * task's last (the AMX GEMM's) lands on its own next task. */
void tm_ksplit_bounds(int M, int npan, int mb, int n_pt, int homes, int task, int b[4])
{
    int n_mb = (M + mb - 1) / mb, per_w = n_mb * n_pt / homes;
    int s = (task % homes) * per_w + task / homes;
    int pi = s / n_mb, mi = s % n_mb;
    b[0] = mi * mb;
    b[1] = b[0] + mb < M ? b[0] + mb : M;
    b[2] = (int)((long)npan * pi / n_pt);
    b[3] = (int)((long)npan * (pi + 1) / n_pt);
}

typedef struct split_job {
    tm_kblock_fn fn;
    void *ctx;
    int M, npan, mb, n_pt, homes;
} split_job;

static void split_task(void *c, int task, int worker)
{
    const split_job *j = c;
    int b[4];
    tm_ksplit_bounds(j->M, j->npan, j->mb, j->n_pt, j->homes, task, b);
    if (b[2] < b[3]) j->fn(j->ctx, b[0], b[1], b[2], b[3], worker);
}

void tm_kgemm_run_split(int M, int Np, int mb, int per_worker, tm_kblock_fn fn, void *ctx, struct tm_pool *pool)
{
    int nw = tm_pool_size(pool), npan = Np / 32, n_mb = (M + mb - 1) / mb;
    int n_pt = nw * (per_worker > 0 ? per_worker : 1);
    if (n_pt > npan) n_pt = npan; /* at least one panel a range */
    int tasks = n_mb * n_pt;
    /* homes: one worker, or too few panels to give each its share: one home, the tasks in order */
    split_job j = {fn, ctx, M, npan, mb, n_pt, nw <= 1 || tasks % nw ? 1 : nw};
    if (nw <= 1) {
        for (int t = 0; t < tasks; t++) split_task(&j, t, 0);
    } else if (j.homes == 1) {
        tm_pool_run(pool, tasks, split_task, &j);
    } else {
        tm_pool_run_homed(pool, tasks, split_task, &j);
    }
}

/* ---- tm_kmatmul -------------------------------------------------------------- */

static tm_kact sub_act(const tm_kact *x, int m0, int m1)
{
    tm_kact s = *x;
    s.M = m1 - m0;
    if (x->f32) s.f32 = x->f32 + (size_t)m0 * x->K;
    if (x->bf16) s.bf16 = x->bf16 + (size_t)m0 * x->ld;
    if (x->q8) {
        s.q8 = x->q8 + (size_t)m0 * x->ld;
        s.q8_scale = x->q8_scale + m0;
    }
    return s;
}

typedef int (*mm_fn)(const tm_kweight *, const tm_kact *, float *, tm_kbuf *, struct tm_pool *);

/* the GEMM kernel for w's encoding (a fused gate/up weight: gemm_glu), NULL if k has none */
static mm_fn gemm_op(const tm_kernels *k, const tm_kweight *w)
{
    if (w->glu) return k->gemm_glu;
    return w->dtype == TM_DT_Q8PC ? k->gemm_q8 : w->dtype == TM_DT_BF16 ? k->gemm_bf16 : NULL;
}

int tm_kmatmul_gemm(const tm_kernels *k, const tm_kweight *w, int M)
{
    return M > TM_KGEMV_MAX_B && w->panel && gemm_op(k, w);
}

int tm_kmatmul(const tm_kernels *k, const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws,
               struct tm_pool *pool, tm_err *err)
{
    mm_fn gemv;
    switch (w->dtype) {
    case TM_DT_Q4PC: case TM_DT_Q4G64: case TM_DT_Q4G32: case TM_DT_Q6G64: gemv = k->gemv_q4; break;
    case TM_DT_Q8PC: gemv = k->gemv_q8; break;
    case TM_DT_BF16: gemv = k->gemv_bf16; break;
    default: return tm_errf(err, TM_E_UNSUPPORTED, "matmul: weight dtype %s", tm_dtype_name(w->dtype));
    }
    if (!x || x->M < 1 || x->K != w->K)
        return tm_errf(err, TM_E_INVALID, "matmul: x is [%d][%d], weight [%d][%d]", x ? x->M : 0, x ? x->K : 0,
                       w->N, w->K);
    int rc;
    if (w->glu && (!k->gemm_glu || x->M <= TM_KGEMV_MAX_B)) /* a fused gate/up weight: GEMM only */
        return tm_errf(err, TM_E_UNSUPPORTED, "matmul: the fused gate/up weight [%d][%d] needs the %s kernels' "
                       "gemm_glu and more than %d rows (%d)", w->N, w->K, k->name, TM_KGEMV_MAX_B, x->M);
    if (tm_kmatmul_gemm(k, w, x->M)) {
        rc = gemm_op(k, w)(w, x, y, ws, pool);
    } else {
        rc = TM_OK;
        for (int m0 = 0; m0 < x->M && rc == TM_OK; m0 += TM_KGEMV_MAX_B) {
            int m1 = m0 + TM_KGEMV_MAX_B < x->M ? m0 + TM_KGEMV_MAX_B : x->M;
            tm_kact s = sub_act(x, m0, m1);
            rc = gemv(w, &s, y + (size_t)m0 * w->N, ws, pool);
        }
    }
    if (rc == TM_E_NOMEM) return tm_errf(err, rc, "matmul [%d][%d] x [%d][%d]: out of scratch memory", x->M, x->K, w->N, w->K);
    if (rc) return tm_errf(err, rc, "matmul [%d][%d] x %s [%d][%d]: activations not usable (need f32 or the op's prepared form)",
                           x->M, x->K, tm_dtype_name(w->dtype), w->N, w->K);
    return TM_OK;
}

int tm_kmatmul_f32(const tm_kernels *k, const tm_kweight *w, const float *b, const float *x, int M, float *y,
                   tm_kbuf *ws, struct tm_pool *pool, tm_err *err)
{
    tm_kact a = {.M = M, .K = w->K, .f32 = x};
    int rc = tm_kmatmul(k, w, &a, y, ws, pool, err);
    for (int i = 0; i < M && b && !rc; i++)
        for (int n = 0; n < w->N; n++) y[(size_t)i * w->N + n] += b[n];
    return rc;
}

int tm_kmatmul_bf16y_ok(const tm_kernels *k, const tm_kweight *w, int M)
{
    return k->gemm_bf16y && w && tm_kmatmul_gemm(k, w, M);
}

int tm_kmatmul_bf16y(const tm_kernels *k, const tm_kweight *w, const tm_kact *x, uint16_t *y,
                     tm_kbuf *ws, struct tm_pool *pool, tm_err *err)
{
    if (!x || !tm_kmatmul_bf16y_ok(k, w, x->M))
        return tm_errf(err, TM_E_UNSUPPORTED, "matmul to bf16: the %s kernels have no bf16-output GEMM for %s%s on %d rows",
                       k->name, w ? tm_dtype_name(w->dtype) : "no weight", w && w->glu ? " (glu)" : "", x ? x->M : 0);
    int rc = k->gemm_bf16y(w, x, y, ws, pool);
    if (rc == TM_E_NOMEM) return tm_errf(err, rc, "matmul [%d][%d] x [%d][%d]: out of scratch memory", x->M, x->K, w->N, w->K);
    if (rc) return tm_errf(err, rc, "matmul [%d][%d] x %s [%d][%d] to bf16: activations not usable", x->M, x->K,
                           tm_dtype_name(w->dtype), w->N, w->K);
    return TM_OK;
}

tm_kact_fn tm_kglu_fn(const tm_kernels *k, int act)
{
    return act == TM_KGLU_SILU ? k->silu_mul : act == TM_KGLU_GELU ? k->gelu_mul : act == TM_KGLU_RELU ? k->relu_mul
           : act == TM_KGLU_RELU2 ? k->relu2_mul : act == TM_KGLU_SWIGLU_OAI ? k->swiglu_oai_mul : k->gelu_tanh_mul;
}

void tm_kglu_row_bf16(const tm_kernels *k, int act, float *y, const uint16_t *gate, const uint16_t *up, int F)
{
    enum { C = 256 }; /* columns per step: gate and up widened to f32 on the stack */
    float g[C], u[C];
    tm_kact_fn f = tm_kglu_fn(k, act);
    for (int c0 = 0; c0 < F; c0 += C) {
        size_t n = (size_t)(F - c0 < C ? F - c0 : C);
        k->bf16_to_f32(g, gate + c0, n);
        k->bf16_to_f32(u, up + c0, n);
        f(y + c0, g, u, n);
    }
}
