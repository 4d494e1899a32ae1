/* engine/cpu/kmeasure.c: kernel timings on synthetic weights (see kmeasure.h). */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>

#include "core/clock.h"
#include "core/cpu.h"
#include "core/threadpool.h"
#include "engine/cpu/kmeasure.h"
#include "quant/quant.h"

uint64_t tm_kavx2_read_sum(const void *p, size_t bytes); /* kmeasure_avx2.c */
uint64_t tm_kavx512_read_sum(const void *p, size_t bytes); /* kmeasure_avx512.c */
double tm_kamx_peak_run(int int8, int loaded, long iters); /* kmeasure_amx.c */
double tm_kavx512_peak_run(int int8, long iters);         /* kmeasure_avx512.c */
double tm_kavx2_peak_run(int int8, long iters);           /* kmeasure_avx2.c */

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A synthetic [N][K] weight: small valid values (no NaN/denormals). */
typedef struct synth {
    tm_tensor t;
    void *data;
    void *scales;       /* f32 (int8) or f16 (int4, int6), tm_quant_scale_bytes each */
    tm_kweight *w;
} synth;

static int synth_init(synth *s, tm_dtype dt, int N, int K, int uses, uint64_t seed, tm_err *err)
{
    memset(s, 0, sizeof *s);
    size_t nb = tm_quant_data_bytes(dt, N, K), ns = tm_quant_scale_count(dt, N, K);
    s->data = aligned_alloc(64, (nb + 63) & ~(size_t)63);
    s->scales = ns ? malloc(ns * tm_quant_scale_bytes(dt)) : NULL;
    if (!s->data || (ns && !s->scales)) {
        free(s->data);
        free(s->scales);
        return tm_errf(err, TM_E_NOMEM, "kmeasure: cannot allocate a %d x %d %s weight", N, K, tm_dtype_name(dt));
    }
    uint64_t x = seed | 1;
    if (dt == TM_DT_BF16) {
        uint16_t *d = s->data;
        for (size_t i = 0; i < nb / 2; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            d[i] = (uint16_t)(0x3c00 | ((x >> 40) & 0x81ff)); /* |v| in [2^-7, 2^-6), either sign */
        }
    } else {
        uint64_t *d = s->data;
        for (size_t i = 0; i < nb / 8; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            d[i] = x;
        }
        for (size_t i = nb / 8 * 8; i < nb; i++) ((uint8_t *)s->data)[i] = (uint8_t)i;
    }
    for (size_t i = 0; i < ns; i++) tm_quant_scale_set(dt, s->scales, i, 1e-3f);
    s->t.name = "kmeasure.synthetic";
    s->t.dtype = dt;
    s->t.ndim = 2;
    s->t.shape[0] = N;
    s->t.shape[1] = K;
    s->t.data = s->data;
    s->t.nbytes = nb;
    s->t.scales = s->scales;
    int rc = tm_kpack_init(&s->w, &s->t, uses, err);
    if (rc) {
        free(s->data);
        free(s->scales);
        memset(s, 0, sizeof *s); /* w NULL: nothing for synth_free */
    }
    return rc;
}

static void synth_free(synth *s)
{
    tm_kpack_free(s->w);
    free(s->data);
    free(s->scales);
}

typedef int (*mm_fn)(const tm_kweight *, const tm_kact *, float *, tm_kbuf *, struct tm_pool *);

static mm_fn gemv_of(const tm_kernels *k, tm_dtype dt)
{
    return dt == TM_DT_BF16 ? k->gemv_bf16 : dt == TM_DT_Q8PC ? k->gemv_q8 : k->gemv_q4;
}

int tm_kmeasure_gemv(const tm_kernels *k, tm_dtype dt, int N, int K, int B, size_t total_bytes, double seconds,
                     struct tm_pool *pool, tm_kmeasure *out, tm_err *err)
{
    memset(out, 0, sizeof *out);
    if (B < 1 || B > TM_KGEMV_MAX_B || N < 1 || K < 32 || K % 64)
        return tm_errf(err, TM_E_INVALID, "kmeasure gemv: B %d, N %d, K %d out of range", B, N, K);
    size_t one = tm_quant_data_bytes(dt, N, K) + tm_quant_scale_count(dt, N, K) * tm_quant_scale_bytes(dt);
    int nw = (int)((total_bytes + one - 1) / one);
    if (nw < 1) nw = 1;
    if (nw > 4096) return tm_errf(err, TM_E_INVALID, "kmeasure gemv: %d weights", nw);
    synth *s = calloc((size_t)nw, sizeof *s);
    float *x = malloc(sizeof(float) * (size_t)B * K), *y = malloc(sizeof(float) * (size_t)B * N);
    if (!s || !x || !y) {
        free(s); free(x); free(y);
        return tm_errf(err, TM_E_NOMEM, "kmeasure gemv: out of memory");
    }
    int rc = TM_OK, made = 0;
    for (; made < nw && rc == TM_OK; made++) rc = synth_init(&s[made], dt, N, K, TM_KPACK_GEMV, 77 + (uint64_t)made, err);
    if (rc) made--;
    for (int i = 0; i < B * K; i++) x[i] = (float)((i * 37) % 101 - 50) * 0.02f;
    tm_kbuf ws = {0};
    tm_kact a = {.M = B, .K = K, .f32 = x};
    mm_fn f = gemv_of(k, dt);
    if (rc == TM_OK)
        for (int i = 0; i < nw && rc == TM_OK; i++) rc = f(s[i].w, &a, y, &ws, pool); /* warm-up */
    if (rc == TM_OK) {
        double t0 = tm_now_s(), c0 = cpu_s(), t;
        long calls = 0;
        do {
            for (int i = 0; i < nw; i++) f(s[i].w, &a, y, &ws, pool);
            calls += nw;
            t = tm_now_s() - t0;
        } while (t < seconds);
        out->seconds = t;
        out->cpu_seconds = cpu_s() - c0;
        out->calls = calls;
        out->gbps = (double)one * (double)calls / t / 1e9;
        out->gflops = 2.0 * B * (double)N * K * (double)calls / t / 1e9;
    } else if (!err || !err->msg[0]) {
        tm_errf(err, rc, "kmeasure gemv %s: op failed", tm_dtype_name(dt));
    }
    for (int i = 0; i < made; i++) synth_free(&s[i]);
    tm_kbuf_free(&ws);
    free(s); free(x); free(y);
    return rc;
}

/* ---- GEMM timings over a set of weights (tm_kgemm_set) ----------------------- */

struct tm_kgemm_set {
    tm_dtype dt;
    int M, N, K, nw;    /* nw weights, cycled one per call */
    size_t one;         /* one weight's data bytes */
    synth *s;           /* [nw] */
    float *x, *y, *xs;  /* x [M][K] (kept: tm_kact's f32), y [M][N], xs [M] (int8 row scales) */
    float *yring;       /* tm_kgemm_set_ycycle: ny outputs [M][N] the calls write in turn, or NULL (y) */
    int ny, yi;
    void *prep;         /* [M][ld] bf16 or int8: x prepared once, so the figures are the GEMM's own */
    tm_kact a;
    tm_kbuf ws;
    struct tm_pool *pool;
};

void tm_kgemm_set_close(tm_kgemm_set *g)
{
    if (!g) return;
    for (int i = 0; g->s && i < g->nw; i++)
        if (g->s[i].w) synth_free(&g->s[i]);
    tm_kbuf_free(&g->ws);
    free(g->s); free(g->prep); free(g->xs); free(g->x); free(g->y); free(g->yring);
    free(g);
}

int tm_kgemm_set_open(tm_kgemm_set **out, const tm_kernels *k, tm_dtype dt, int M, int N, int K, size_t total_bytes,
                      struct tm_pool *pool, tm_err *err)
{
    *out = NULL;
    if (M < 1 || N < 1 || K < 1 || (dt != TM_DT_BF16 && dt != TM_DT_Q8PC))
        return tm_errf(err, TM_E_INVALID, "kmeasure gemm: %s M %d N %d K %d", tm_dtype_name(dt), M, N, K);
    /* total_bytes of weights, one after another: from 0 (one weight, warm in
       the caches after the first call) to more than the caches hold (each
       call reads its weight from memory, as a prefill's layers do) */
    size_t one = tm_quant_data_bytes(dt, N, K);
    int nw = total_bytes > one ? (int)((total_bytes + one - 1) / one) : 1;
    if (nw > 4096) return tm_errf(err, TM_E_INVALID, "kmeasure gemm: %d weights", nw);
    tm_kgemm_set *g = calloc(1, sizeof *g);
    if (!g) return tm_errf(err, TM_E_NOMEM, "kmeasure gemm: out of memory");
    *g = (tm_kgemm_set){.dt = dt, .M = M, .N = N, .K = K, .nw = nw, .one = one, .pool = pool};
    g->s = calloc((size_t)nw, sizeof *g->s);
    /* on huge pages, as the engine's row buffers are */
    g->x = tm_khuge_alloc(sizeof(float) * (size_t)M * K);
    g->y = tm_khuge_alloc(sizeof(float) * (size_t)M * N);
    int ld = tm_kact_ld(K);
    g->prep = tm_khuge_alloc((size_t)M * ld * (dt == TM_DT_BF16 ? 2 : 1));
    g->xs = malloc(sizeof(float) * (size_t)M);
    int rc = TM_OK;
    if (!g->s || !g->x || !g->y || !g->prep || !g->xs) rc = tm_errf(err, TM_E_NOMEM, "kmeasure gemm: out of memory");
    for (int i = 0; rc == TM_OK && i < nw; i++) rc = synth_init(&g->s[i], dt, N, K, TM_KPACK_GEMM, 5 + (uint64_t)i, err);
    if (rc) { /* synth_init leaves a failed weight's w NULL */
        tm_kgemm_set_close(g);
        return rc;
    }
    for (size_t i = 0; i < (size_t)M * K; i++) g->x[i] = (float)((i * 37) % 101 - 50) * 0.02f;
    g->a = (tm_kact){.M = M, .K = K, .ld = ld};
    if (dt == TM_DT_BF16) {
        uint16_t *b = g->prep;
        for (int m = 0; m < M; m++) {
            k->f32_to_bf16(b + (size_t)m * ld, g->x + (size_t)m * K, (size_t)K);
            memset(b + (size_t)m * ld + K, 0, (size_t)(ld - K) * 2);
        }
        g->a.bf16 = b;
    } else {
        k->quant_q8(g->prep, g->xs, ld, g->x, M, K);
        g->a.q8 = g->prep;
        g->a.q8_scale = g->xs;
    }
    *out = g;
    return TM_OK;
}

int tm_kgemm_set_ycycle(tm_kgemm_set *g, size_t total_bytes, int *count, tm_err *err)
{
    size_t one = sizeof(float) * (size_t)g->M * g->N;
    size_t ny = total_bytes > one ? (total_bytes + one - 1) / one : 1;
    free(g->yring);
    g->yring = NULL;
    g->ny = 1;
    if (count) *count = 1;
    if (ny < 2) return TM_OK;
    if (ny > 4096) return tm_errf(err, TM_E_INVALID, "kmeasure gemm: %zu outputs of %zu bytes", ny, one);
    if (!(g->yring = tm_khuge_alloc(one * ny)))
        return tm_errf(err, TM_E_NOMEM, "kmeasure gemm: %zu outputs of %zu bytes", ny, one);
    memset(g->yring, 0, one * ny); /* touched once, so the calls find it mapped, not in the caches */
    g->ny = (int)ny;
    if (count) *count = g->ny;
    return TM_OK;
}

/* one call per weight of the set, in turn, by k's GEMM */
static int set_pass(tm_kgemm_set *g, const tm_kernels *k)
{
    mm_fn f = g->dt == TM_DT_BF16 ? k->gemm_bf16 : k->gemm_q8;
    if (!f) return TM_E_UNSUPPORTED;
    for (int i = 0; i < g->nw; i++) {
        float *y = g->yring ? g->yring + (size_t)(g->yi++ % g->ny) * g->M * g->N : g->y;
        int rc = f(g->s[i].w, &g->a, y, &g->ws, g->pool);
        if (rc) return rc;
    }
    return TM_OK;
}

int tm_kgemm_set_time(tm_kgemm_set *g, const tm_kernels *k, double seconds, tm_kmeasure *out, tm_err *err)
{
    memset(out, 0, sizeof *out);
    double t0 = tm_now_s(), c0 = cpu_s(), t;
    long calls = 0;
    do { /* whole passes: every weight as often */
        int rc = set_pass(g, k);
        if (rc) return tm_errf(err, rc, "kmeasure gemm %s: op failed", tm_dtype_name(g->dt));
        calls += g->nw;
        t = tm_now_s() - t0;
    } while (t < seconds);
    out->seconds = t;
    out->cpu_seconds = cpu_s() - c0;
    out->calls = calls;
    out->gflops = 2.0 * g->M * (double)g->N * g->K * (double)calls / t / 1e9;
    out->gbps = (double)g->one * (double)calls / t / 1e9;
    return TM_OK;
}

int tm_kmeasure_gemm(const tm_kernels *k, tm_dtype dt, int M, int N, int K, size_t total_bytes, double seconds,
                     struct tm_pool *pool, tm_kmeasure *out, tm_err *err)
{
    memset(out, 0, sizeof *out);
    tm_kgemm_set *g;
    int rc = tm_kgemm_set_open(&g, k, dt, M, N, K, total_bytes, pool, err);
    if (rc) return rc;
    if ((rc = set_pass(g, k)) != TM_OK) /* warm-up */
        tm_errf(err, rc, "kmeasure gemm %s: op failed", tm_dtype_name(dt));
    else
        rc = tm_kgemm_set_time(g, k, seconds, out, err);
    tm_kgemm_set_close(g);
    return rc;
}

/* ---- the FFN's gate/up step each way (tm_kmeasure_ffn) ------------------- */

typedef struct ffn_rows {
    const tm_kernels *k;
    float *g;           /* [M][ld] f32: gate then (apart) up in each row; bf16 ways: [M][ld] bf16, then the
                           tasks' f32 rows */
    int ld, F, way, ldq; /* way: TM_KFFN_* */
    uint8_t *q;         /* [M][ldq] int8 rows for the down projection */
    float *qs;          /* [M] */
    int M;
} ffn_rows;

/* 16 rows: act(gate) * up (apart only) and the int8 rows, as the engine's act_prep / prep_act */
static void ffn_rows_task(void *ctx, int t, int worker)
{
    (void)worker;
    const ffn_rows *j = ctx;
    for (int i = 16 * t; i < 16 * t + 16; i++) {
        float *g = j->g + (size_t)i * j->ld;
        if (j->way >= TM_KFFN_APART_BF16Y) { /* as the engine's rows_act_prep_bf16 */
            g = j->g + (size_t)j->M * j->F + (size_t)t * j->F; /* past the bf16 rows */
            const uint16_t *gu = (const uint16_t *)j->g + (size_t)i * j->ld;
            if (j->way >= TM_KFFN_FUSED_BF16Y) j->k->bf16_to_f32(g, gu, (size_t)j->F);
            else tm_kglu_row_bf16(j->k, TM_KGLU_SILU, g, gu, gu + j->F, j->F);
        } else if (j->way == TM_KFFN_APART) {
            j->k->silu_mul(g, g, g + j->F, (size_t)j->F);
        }
        j->k->quant_q8(j->q + (size_t)i * j->ldq, j->qs + i, j->ldq, g, 1, j->F);
    }
}

/* one call of way's GEMM: gate|up (gu) or the fused pair (glu), y f32 or bf16; TM_KFFN_ALT_BF16Y:
   the fused pair by alt's gemm_bf16y */
static int ffn_gemm(const tm_kernels *k, const tm_kernels *alt, int way, const tm_kweight *gu, const tm_kweight *glu,
                    const tm_kact *a, float *g, tm_kbuf *ws, struct tm_pool *pool)
{
    if (way == TM_KFFN_ALT_BF16Y) return alt->gemm_bf16y(glu, a, (uint16_t *)g, ws, pool);
    const tm_kweight *w = way == TM_KFFN_FUSED || way == TM_KFFN_FUSED_BF16Y ? glu : gu;
    if (way >= TM_KFFN_APART_BF16Y) return k->gemm_bf16y(w, a, (uint16_t *)g, ws, pool);
    return way == TM_KFFN_FUSED ? k->gemm_glu(w, a, g, ws, pool) : k->gemm_q8(w, a, g, ws, pool);
}

int tm_kmeasure_ffn(const tm_kernels *k, const tm_kernels *alt, int M, int F, int D, int rounds, double seconds,
                    struct tm_pool *pool, double *gops, tm_err *err)
{
    if (M < 16 || M % 16 || F < 32 || D < 64 || rounds < 1)
        return tm_errf(err, TM_E_INVALID, "kmeasure ffn: M %d F %d D %d rounds %d", M, F, D, rounds);
    if (!k->gemm_glu) return tm_errf(err, TM_E_UNSUPPORTED, "kmeasure ffn: the %s kernels have no gemm_glu", k->name);
    if (alt && (!alt->gemm_bf16y || !k->gemm_bf16y))
        return tm_errf(err, TM_E_UNSUPPORTED, "kmeasure ffn: the alternative needs gemm_bf16y in both kernels");
    synth gu, gate, up;
    int rc = synth_init(&gu, TM_DT_Q8PC, 2 * F, D, TM_KPACK_GEMM, 11, err);
    if (rc) return rc;
    if ((rc = synth_init(&gate, TM_DT_Q8PC, F, D, TM_KPACK_GEMM, 12, err))) {
        synth_free(&gu);
        return rc;
    }
    if ((rc = synth_init(&up, TM_DT_Q8PC, F, D, TM_KPACK_GEMM, 13, err))) {
        synth_free(&gu);
        synth_free(&gate);
        return rc;
    }
    tm_kweight *glu = NULL;
    int ld = tm_kact_ld(D), ldq = tm_kact_ld(F);
    float *x = tm_khuge_alloc(sizeof(float) * (size_t)M * D), *g = tm_khuge_alloc(sizeof(float) * (size_t)M * 2 * F);
    uint8_t *xq = tm_khuge_alloc((size_t)M * ld), *q = tm_khuge_alloc((size_t)M * ldq);
    float *xs = malloc(sizeof(float) * (size_t)M), *qs = malloc(sizeof(float) * (size_t)M);
    tm_kbuf ws = {0};
    if (!x || !g || !xq || !q || !xs || !qs) rc = tm_errf(err, TM_E_NOMEM, "kmeasure ffn: out of memory");
    else rc = tm_kpack_glu(&glu, gate.w, up.w, TM_KGLU_SILU, err);
    if (rc == TM_OK) {
        for (size_t i = 0; i < (size_t)M * D; i++) x[i] = (float)((i * 37) % 101 - 50) * 0.02f;
        k->quant_q8(xq, xs, ld, x, M, D);
        tm_kact a = {.M = M, .K = D, .ld = ld, .q8 = xq, .q8_scale = xs};
        /* in turn, each way for `seconds`: the host's drift falls on all */
        int ways = alt ? TM_KFFN_ALT_BF16Y + 1 : k->gemm_bf16y ? TM_KFFN_WAYS : TM_KFFN_APART_BF16Y;
        for (size_t i = 0; i < (size_t)ways * rounds; i++) gops[i] = 0;
        for (int r = 0; r < ways * rounds && rc == TM_OK; r++) {
            int way = r % ways, fused = way == TM_KFFN_FUSED || way >= TM_KFFN_FUSED_BF16Y;
            ffn_rows j = {k, g, fused ? F : 2 * F, F, way, ldq, q, qs, M};
            double t0 = tm_now_s(), t;
            long calls = 0;
            do {
                if ((rc = ffn_gemm(k, alt, way, gu.w, glu, &a, g, &ws, pool))) break;
                tm_pool_run(pool, M / 16, ffn_rows_task, &j);
                calls++;
                t = tm_now_s() - t0;
            } while (t < seconds);
            if (rc) tm_errf(err, rc, "kmeasure ffn: the %s GEMM failed (way %d)", fused ? "glu" : "gate/up", way);
            else gops[way * rounds + r / ways] = 2.0 * M * 2.0 * F * D * (double)calls / t / 1e9;
        }
    }
    tm_kpack_free(glu);
    tm_kbuf_free(&ws);
    free(x); free(g); free(xq); free(q); free(xs); free(qs);
    synth_free(&gu);
    synth_free(&gate);
    synth_free(&up);
    return rc;
}

typedef struct read_job {
    const uint64_t *p;
    size_t n;       /* words */
    int parts, simd;        /* loads: 0 = 8-byte, 1 = 256-bit (AVX2), 2 = 512-bit (AVX-512) */
    uint64_t sink[64];
} read_job;

static void read_task(void *ctx, int task, int worker)
{
    read_job *j = ctx;
    /* parts on 256-byte boundaries (the AVX2 loop reads 256 bytes a step) */
    size_t blocks = j->n / 32;
    size_t a = blocks * (size_t)task / (size_t)j->parts * 32, b = blocks * (size_t)(task + 1) / (size_t)j->parts * 32;
    if (j->simd) {
        j->sink[worker & 63] += j->simd == 2 ? tm_kavx512_read_sum(j->p + a, (b - a) * 8)
                                             : tm_kavx2_read_sum(j->p + a, (b - a) * 8);
        return;
    }
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    for (size_t i = a; i + 8 <= b; i += 8) {
        s0 += j->p[i]; s1 += j->p[i + 1]; s2 += j->p[i + 2]; s3 += j->p[i + 3];
        s4 += j->p[i + 4]; s5 += j->p[i + 5]; s6 += j->p[i + 6]; s7 += j->p[i + 7];
    }
    j->sink[worker & 63] += s0 ^ s1 ^ s2 ^ s3 ^ s4 ^ s5 ^ s6 ^ s7;
}

int tm_kmeasure_memread(size_t bytes, double seconds, struct tm_pool *pool, tm_kmeasure *out, tm_err *err)
{
    memset(out, 0, sizeof *out);
    size_t n = bytes / 256 * 32; /* words, whole 256-byte blocks */
    /* 2 MB aligned and huge pages where the kernel gives them: with 4 KB pages
     * a Sapphire Rapids core under-reads (TLB misses), 20 against 27 GB/s */
    size_t sz = (n * 8 + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
    uint64_t *p = aligned_alloc((size_t)2 << 20, sz);
    if (!p) return tm_errf(err, TM_E_NOMEM, "kmeasure memread: cannot allocate %zu bytes", bytes);
#ifdef MADV_HUGEPAGE
    madvise(p, sz, MADV_HUGEPAGE);
#endif
    for (size_t i = 0; i < n; i++) p[i] = i;
    const tm_cpu *c = tm_cpu_get();
    read_job j = {p, n, tm_pool_size(pool), tm_cpu_has_avx512(c) ? 2 : tm_cpu_has_avx2(c), {0}};
    tm_pool_run(pool, j.parts, read_task, &j);
    double t0 = tm_now_s(), c0 = cpu_s(), t;
    long calls = 0;
    do {
        tm_pool_run(pool, j.parts, read_task, &j);
        calls++;
        t = tm_now_s() - t0;
    } while (t < seconds);
    out->seconds = t;
    out->cpu_seconds = cpu_s() - c0;
    out->calls = calls;
    out->gbps = (double)n * 8 * (double)calls / t / 1e9;
    free(p);
    return TM_OK;
}

/* ---- the matrix unit's peak ------------------------------------------------- */

typedef struct peak_job {
    int amx, int8, loaded, avx2;
    double seconds;
    double ops[64];  /* per worker */
} peak_job;

static void peak_task(void *ctx, int i, int worker)
{
    (void)i;
    peak_job *j = ctx;
    double t0 = tm_now_s(), ops = 0;
    do ops += j->amx    ? tm_kamx_peak_run(j->int8, j->loaded, 4096)
              : j->avx2 ? tm_kavx2_peak_run(j->int8, 65536)
                        : tm_kavx512_peak_run(j->int8, 65536);
    while (tm_now_s() - t0 < j->seconds);
    j->ops[worker & 63] += ops;
}

int tm_kmeasure_peak(const char *variant, tm_dtype dt, double seconds, struct tm_pool *pool, tm_kmeasure *out,
                     tm_err *err)
{
    memset(out, 0, sizeof *out);
    const tm_cpu *c = tm_cpu_get();
    int loaded = !strcmp(variant, "amx-loaded"), amx = loaded || !strcmp(variant, "amx"), int8 = dt == TM_DT_Q8PC;
    int avx2 = !strcmp(variant, "avx2");
    if ((dt != TM_DT_BF16 && dt != TM_DT_Q8PC) || (!amx && !avx2 && strcmp(variant, "avx512")))
        return tm_errf(err, TM_E_INVALID, "kmeasure peak: %s %s (amx, amx-loaded, avx512 or avx2; bf16 or int8)",
                       variant, tm_dtype_name(dt));
    if (amx ? !c->amx_usable : avx2 ? !tm_cpu_has_avx2(c) : !tm_cpu_has_avx512(c))
        return tm_errf(err, TM_E_UNSUPPORTED, "kmeasure peak: %s cannot run on this CPU", variant);
    int nw = tm_pool_size(pool);
    peak_job j = {amx, int8, loaded, avx2, seconds / 10, {0}};
    tm_pool_run(pool, nw, peak_task, &j); /* warm-up: clocks and, for AMX, the tile unit's power-up */
    memset(j.ops, 0, sizeof j.ops);
    j.seconds = seconds;
    double t0 = tm_now_s(), c0 = cpu_s();
    tm_pool_run(pool, nw, peak_task, &j);
    double t = tm_now_s() - t0, ops = 0;
    for (int w = 0; w < 64; w++) ops += j.ops[w];
    out->seconds = t;
    out->cpu_seconds = cpu_s() - c0;
    out->calls = 1;
    out->gflops = ops / t / 1e9;
    return TM_OK;
}
