/* tools/kbench.c: the kernel harness (llm.c dev/cuda style): for one op and
 * shape, run the scalar reference, then every kernel variant this CPU runs
 * (the numbered versions: 0 scalar, 1 avx2, 2 avx512, 3 amx), validate each
 * against the reference, then time it. It links the library that ships.
 *
 * Built by `make` (build/kbench); by hand:
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -I/usr/include/cjson tools/kbench.c build/libtandem.a \
 *       -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread -o build/kbench
 * Run:
 *   build/kbench gemv int4g64 4096 4096 1   # N K B: GB/s of weights streamed
 *   build/kbench gemm bf16 512 2048 2048    # M N K: GFLOP/s
 *   build/kbench mem                        # plain read bandwidth (the GEMV ceiling)
 *   build/kbench peak                       # AMX tile peak (and with a 2 x 2 block's tile loads), AVX-512 FMA peak
 *   build/kbench -p 5 ffn 512 4864 896      # the FFN's gate/up step apart / fused (gemm_glu), f32 / bf16 y, in turn
 *   build/kbench attn int8 4096 1 32 8 64   # decode attention: KV DTYPE CTX B H Hk Dh
 *   build/kbench attnp 512 14 2 64 1536     # prefill attention, one causal chunk: T H Hk Dh [P]
 * "cpu N%" is the share of the threads' wall time they got the CPU: on a
 * shared machine, below ~95% means other processes interfered.
 * Options: -t THREADS (default: all online cpus), -s SECONDS per timing
 * (default 1), -v VARIANT (time only that one), -c CPU (pin the threads to
 * CPU, CPU + 1, ...; default: the CPUs a session of that many threads takes,
 * tm_cpu_pick: CPU 0 left out where others suffice), -p ROUNDS (gemm on amx: up to 256 rounds of
 * tile peak, GEMM, tile peak, and the median ratio; the weights are made once, so a round costs
 * its timed slices: -s 0.05 -p 64 takes ~7 s a shape with -a), -m MIB of weights cycled
 * by gemv and attn (default 512) and by gemm (default 0: one weight, warm in
 * the caches; with -m each call reads its weight from memory, as a prefill's
 * layers do), -y MIB (gemm with -p: the calls write their y in turn over that
 * many MiB, so each finds its lines out of the caches as the engine's layers
 * do; default 0: one y, warm), -g 0|1 (the avx512 and amx variants' int4
 * GEMV in its build without / with GFNI; default: the one the CPU picks), -a 1
 * (kbench-ab only: with -p, each round also times the alternative AMX GEMM
 * build linked in, and the A/B ratio is printed; with ffn, its fused gate/up GEMM with a bf16 y), -Y 1 (with -p: the alternative is the same
 * build's GEMM storing y in bf16, gemm_bf16y; with -a 1 as well: both builds store y in bf16, as
 * the engine's int8 projections do). attn cycles through as many layers of a
 * paged KV cache (runtime/kvcache.h, 16-token pages, the engines' layout)
 * as fill that, one call per layer like a decode step; GB/s counts the KV
 * bytes read (rows and int8 scales). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/cpu.h"
#include "core/threadpool.h"
#include "engine/cpu/kernels-impl.h"
#include "engine/cpu/kmeasure.h"
#include "quant/quant.h"
#include "runtime/kvcache.h"

#include <time.h>

typedef int (*mm_fn)(const tm_kweight *, const tm_kact *, float *, tm_kbuf *, struct tm_pool *);

static mm_fn op_of(const tm_kernels *k, int gemm, tm_dtype dt)
{
    if (gemm) return dt == TM_DT_BF16 ? k->gemm_bf16 : k->gemm_q8;
    return dt == TM_DT_BF16 ? k->gemv_bf16 : dt == TM_DT_Q8PC ? k->gemv_q8 : k->gemv_q4;
}

/* max |y - ref| / max |ref| (max |y - ref| when ref is all zero) */
static double max_rel(const float *y, const float *ref, size_t n)
{
    double md = 0, mr = 0;
    for (size_t i = 0; i < n; i++) {
        md = fmax(md, fabs((double)y[i] - ref[i]));
        mr = fmax(mr, fabs((double)ref[i]));
    }
    return mr > 0 ? md / mr : md;
}

/* Variant number n, named name, into k: 1 if it runs here and -v did not exclude it
 * (a variant this CPU cannot run is reported as skipped) */
static int pick_variant(const char *name, int n, const char *only, tm_kernels *k)
{
    tm_err err = {0};
    if (tm_kernels_select(name, k, &err) != TM_OK) {
        printf("v%d %-7s skipped: %s\n", n, name, err.msg);
        return 0;
    }
    return !only || !strcmp(only, name);
}

/* Validate variant k against the scalar reference on a small slice of the
 * shape: returns max |y - ref| / max |ref|, or -1 on failure. */
static double validate(const tm_kernels *k, int gemm, tm_dtype dt, int M, int N, int K, tm_pool *pool)
{
    if (M > 16) M = 16;
    if (N > 512) N = 512;
    size_t nb = tm_quant_data_bytes(dt, N, K), ns = tm_quant_scale_count(dt, N, K);
    uint8_t *data = malloc(nb);
    void *sc = malloc((ns + 1) * sizeof(float));
    float *x = malloc(sizeof(float) * M * K);
    float *y = malloc(sizeof(float) * M * N), *yr = malloc(sizeof(float) * M * N);
    uint64_t r = 12345;
    for (size_t i = 0; i < nb; i++) {
        r = r * 6364136223846793005ull + 1;
        data[i] = (uint8_t)(r >> 56);
        if (dt == TM_DT_BF16 && (i & 1)) data[i] = (uint8_t)(0x3c | (data[i] & 0x80)); /* sane exponents */
    }
    for (size_t i = 0; i < ns; i++) tm_quant_scale_set(dt, sc, i, 1e-3f * (1 + (float)(i % 7)));
    for (int i = 0; i < M * K; i++) x[i] = sinf((float)i * 0.37f);
    tm_tensor t = {.name = "kbench", .dtype = dt, .ndim = 2, .shape = {N, K}, .data = data, .nbytes = nb, .scales = sc};
    tm_kweight *w;
    tm_err err = {0};
    double out = -1;
    if (tm_kpack_init(&w, &t, TM_KPACK_GEMV | (gemm ? TM_KPACK_GEMM : 0), &err) == TM_OK) {
        tm_kernels ref;
        tm_kernels_select("scalar", &ref, NULL);
        tm_kbuf ws = {0};
        tm_kact a = {.M = M, .K = K, .f32 = x};
        if (op_of(&ref, gemm, dt)(w, &a, yr, &ws, NULL) == TM_OK && op_of(k, gemm, dt)(w, &a, y, &ws, pool) == TM_OK) {
            out = max_rel(y, yr, (size_t)M * N);
        }
        tm_kbuf_free(&ws);
        tm_kpack_free(w);
    } else {
        fprintf(stderr, "kbench: %s\n", err.msg);
    }
    free(data); free(sc); free(x); free(y); free(yr);
    return out;
}

/* ---- decode attention over a paged KV cache ------------------------------------- */

typedef struct attn_bench {
    int B, H, Hk, Dh, ctx, L;
    tm_kv_cache *kv;
    tm_kv_seq seq[64];
    const int32_t *tabs[64];
    int ctxs[64];
    float *q, *out, *ref;
} attn_bench;

static void attn_args(attn_bench *ab, int layer, float *out, tm_kattn_decode *a)
{
    tm_kv_view v;
    tm_kv_view_of(ab->kv, &ab->seq[0], layer, &v);
    *a = (tm_kattn_decode){.B = ab->B, .H = ab->H, .Hk = ab->Hk, .Dh = ab->Dh, .q = ab->q, .k_pages = v.base,
                           .v_pages = v.base + v.v_offset, .page_bytes = v.page_stride, .page_size = v.page_size,
                           .kv_dtype = v.dtype, .n_pages = tm_kv_cache_info(ab->kv)->n_pages, .page_table = ab->tabs,
                           .ctx_len = ab->ctxs, .out = out, .scale = 1.f / sqrtf((float)ab->Dh),
                           .head_bytes = v.head_stride};
}

static int attn_main(tm_dtype dt, int ctx, int B, int H, int Hk, int Dh, int mib, double secs, const char *only,
                     tm_pool *pool)
{
    attn_bench ab = {.B = B, .H = H, .Hk = Hk, .Dh = Dh, .ctx = ctx};
    tm_err err = {0};
    size_t row = dt == TM_DT_Q8PC ? (size_t)Dh + 4 : (size_t)Dh * 2;
    size_t layer_bytes = (size_t)B * ctx * Hk * 2 * row;
    ab.L = (int)(((size_t)mib << 20) / layer_bytes) + 1;
    int pages = B * ((ctx + 15) / 16);
    if (B < 1 || B > 64 || ctx < 1 || H % Hk ||
        tm_kv_cache_init(&ab.kv, &(tm_kv_cache_opts){ab.L, Hk, Dh, 16, pages, dt, 0}, &err) != TM_OK) {
        fprintf(stderr, "kbench attn: %s\n", err.msg[0] ? err.msg : "bad shape");
        return 1;
    }
    float *x = malloc(sizeof(float) * Dh);
    uint64_t r = 99;
    for (int b = 0; b < B; b++) {
        tm_kv_seq_reserve(ab.kv, &ab.seq[b], ctx, &err);
        ab.seq[b].n_tokens = ab.ctxs[b] = ctx;
        ab.tabs[b] = ab.seq[b].pages;
        for (int l = 0; l < ab.L; l++)
            for (int h = 0; h < Hk; h++)
                for (int p = 0; p < ctx; p++)
                    for (int w = 0; w < 2; w++) {
                        for (int d = 0; d < Dh; d++) {
                            r = r * 6364136223846793005ull + 1442695040888963407ull;
                            x[d] = (float)((double)(r >> 40) / (double)(1u << 24) * 2 - 1);
                        }
                        int32_t pg = ab.seq[b].pages[p / 16];
                        tm_kv_row_store(ab.kv, w ? tm_kv_page_v(ab.kv, pg, l, h) : tm_kv_page_k(ab.kv, pg, l, h), p % 16, x);
                    }
    }
    free(x);
    size_t nq = (size_t)B * H * Dh;
    ab.q = malloc(sizeof(float) * nq);
    ab.out = malloc(sizeof(float) * nq);
    ab.ref = malloc(sizeof(float) * nq);
    for (size_t i = 0; i < nq; i++) ab.q[i] = sinf((float)i * 0.37f) * 2;
    tm_kattn_decode a;
    tm_kbuf ws = {0};
    tm_kernels sk;
    tm_kernels_select("scalar", &sk, NULL);
    attn_args(&ab, 0, ab.ref, &a);
    if (sk.attn_decode(&a, &ws, NULL) != TM_OK) fprintf(stderr, "kbench attn: the reference refused the shape\n");
    const char *const *v = tm_kernels_variants();
    for (int n = 0; v[n]; n++) {
        tm_kernels k;
        if (!pick_variant(v[n], n, only, &k)) continue;
        attn_args(&ab, 0, ab.out, &a);
        int rc = k.attn_decode(&a, &ws, pool);
        double rel = rc ? -1 : max_rel(ab.out, ab.ref, nq);
        printf("v%d %-7s attn_decode %s ctx=%d B=%d H=%d Hk=%d Dh=%d threads=%d: max rel err %.2e %s", n, v[n],
               tm_dtype_name(dt), ctx, B, H, Hk, Dh, tm_pool_size(pool), rel, rel < 0 || rel > 1e-3 ? "INVALID" : "ok");
        fflush(stdout);
        long calls = 0;
        double t0 = tm_now_s(), t;
        do {
            attn_args(&ab, (int)(calls % ab.L), ab.out, &a);
            k.attn_decode(&a, &ws, pool);
            calls++;
            t = tm_now_s() - t0;
        } while (t < secs || calls < 2 * ab.L);
        printf("  %.2f GB/s of KV (%.1f us per layer, %d layers cycled)\n", (double)layer_bytes * calls / t / 1e9,
               1e6 * t / calls, ab.L);
    }
    tm_kbuf_free(&ws);
    for (int b = 0; b < B; b++) tm_kv_seq_release(ab.kv, &ab.seq[b]);
    tm_kv_cache_free(ab.kv);
    free(ab.q); free(ab.out); free(ab.ref);
    return 0;
}

/* ---- prefill attention over one chunk (contiguous bf16 K/V) ------------------- */

/* One causal chunk of T queries at positions P.. (a later chunk of a long
 * prompt when P > 0), K/V [Hk][P + T][Dh] bf16: the variants against the
 * scalar reference, then GFLOP/s of useful work (4 Dh flops per visible
 * query-key pair and head: the two products). */
static int attnp_main(int T, int H, int Hk, int Dh, int P, double secs, const char *only, tm_pool *pool)
{
    if (T < 1 || T > 65536 || P < 0 || P > 1 << 20 || H < 1 || Hk < 1 || H % Hk || Dh < 1 || Dh > 512) {
        fprintf(stderr, "kbench attnp: bad shape\n");
        return 1;
    }
    int S = P + T; /* keys */
    size_t nq = (size_t)T * H * Dh, nkv = (size_t)Hk * S * Dh;
    float *q = malloc(sizeof(float) * nq), *out = malloc(sizeof(float) * nq), *ref = malloc(sizeof(float) * nq);
    uint16_t *kv = malloc(2 * sizeof(uint16_t) * nkv);
    uint64_t r = 7;
    for (size_t i = 0; i < nq; i++) q[i] = sinf((float)i * 0.37f) * 2;
    for (size_t i = 0; i < 2 * nkv; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        float x = (float)((double)(r >> 40) / (double)(1u << 24) * 2 - 1);
        uint32_t b;
        memcpy(&b, &x, 4);
        kv[i] = (uint16_t)(b >> 16);
    }
    tm_kattn_prefill a = {.T = T, .H = H, .Hk = Hk, .Dh = Dh, .pos0 = P, .q = q, .k = kv, .v = kv + nkv,
                          .kv_dtype = TM_DT_BF16, .kv_stride = S, .out = ref, .scale = 1.f / sqrtf((float)Dh)};
    tm_kbuf ws = {0};
    tm_kernels sk;
    tm_kernels_select("scalar", &sk, NULL);
    if (sk.attn_prefill(&a, &ws, NULL) != TM_OK) fprintf(stderr, "kbench attnp: the reference refused the shape\n");
    double flops = 4.0 * Dh * H * ((double)T * (T + 1) / 2 + (double)T * P);
    const char *const *v = tm_kernels_variants();
    for (int n = 0; v[n]; n++) {
        tm_kernels k;
        if (!pick_variant(v[n], n, only, &k)) continue;
        a.out = out;
        int rc = k.attn_prefill(&a, &ws, pool);
        double rel = rc ? -1 : max_rel(out, ref, nq);
        printf("v%d %-7s attn_prefill bf16 T=%d H=%d Hk=%d Dh=%d P=%d threads=%d: max rel err %.2e %s", n, v[n], T, H,
               Hk, Dh, P, tm_pool_size(pool), rel, rel < 0 || rel > 1e-2 ? "INVALID" : "ok");
        fflush(stdout);
        long calls = 0;
        double t0 = tm_now_s(), t;
        do {
            k.attn_prefill(&a, &ws, pool);
            calls++;
            t = tm_now_s() - t0;
        } while (t < secs || calls < 2);
        printf("  %.1f GFLOP/s (%.1f us per call)\n", flops * calls / t / 1e9, 1e6 * t / calls);
    }
    tm_kbuf_free(&ws);
    free(q); free(out); free(ref); free(kv);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The second build of the AMX GEMM that `make kbench-ab AMX_ALT="-D..."`
 * links in (gemm_amx.c with other build options, its entry renamed); NULL in
 * plain kbench. With it, -p rounds time both builds in turn (option -a). */
void tm_kvariant_amx_alt(tm_kernels *k) __attribute__((weak));

/* -p R: R rounds of (tile peak, GEMM, tile peak) on the same threads; each
 * round's GEMM rate over the mean of the two peaks beside it. On a shared
 * host the peak itself drifts 2x within seconds, so only a ratio taken side
 * by side means anything; prints the median GFLOP/s and the median ratio.
 * With alt (kbench-ab -a): (tile peak, GEMM, alternative GEMM, tile peak),
 * the two GEMMs' order swapped every round, and the median of the rounds'
 * alternative / shipped ratios: an A/B the host's drift falls on alike. */
#define PAIRED_MAX 256 /* rounds of -p */
static void paired_peak(const tm_kernels *k, const tm_kernels *alt, tm_dtype dt, int M, int N, int K, size_t wbytes,
                        size_t ybytes, double secs, int rounds, tm_pool *pool)
{
    double g[PAIRED_MAX], f[PAIRED_MAX], fa[PAIRED_MAX], ra[PAIRED_MAX], rp[PAIRED_MAX / 2], rf[2][PAIRED_MAX / 2];
    int n = 0;
    if (rounds > PAIRED_MAX) rounds = PAIRED_MAX;
    if (alt && rounds > 1 && rounds % 2) rounds++; /* as many rounds with each build first */
    tm_kgemm_set *set = NULL; /* the weights made once: a round costs its timed slices only */
    tm_err err = {0};
    if (tm_kgemm_set_open(&set, k, dt, M, N, K, wbytes, pool, &err) || tm_kgemm_set_ycycle(set, ybytes, NULL, &err) ||
        tm_kgemm_set_time(set, k, 0, &(tm_kmeasure){0}, &err) || /* warm-up: one pass each */
        (alt && tm_kgemm_set_time(set, alt, 0, &(tm_kmeasure){0}, &err))) {
        printf("  paired peak: %s\n", err.msg);
        tm_kgemm_set_close(set);
        return;
    }
    for (int i = 0; i < rounds; i++) {
        tm_kmeasure p0, p1, r, q = {0};
        int rc = tm_kmeasure_peak("amx", dt, secs / 3, pool, &p0, &err);
        for (int j = 0; j < (alt ? 2 : 1) && !rc; j++) {
            int a = alt && (j ^ (i & 1)); /* which build runs j-th this round */
            rc = tm_kgemm_set_time(set, a ? alt : k, secs, a ? &q : &r, &err);
        }
        if (rc || tm_kmeasure_peak("amx", dt, secs / 3, pool, &p1, &err)) {
            printf("  paired peak: %s\n", err.msg);
            tm_kgemm_set_close(set);
            return;
        }
        g[n] = r.gflops;
        f[n] = 2 * r.gflops / (p0.gflops + p1.gflops);
        fa[n] = 2 * q.gflops / (p0.gflops + p1.gflops);
        ra[n++] = q.gflops / r.gflops;
    }
    tm_kgemm_set_close(set);
    qsort(g, n, sizeof g[0], cmp_double);
    qsort(f, n, sizeof f[0], cmp_double);
    printf("  paired with the AMX peak, %d rounds: median %.1f GFLOP/s, median %.1f%% of the peak beside it (range %.1f-%.1f%%)\n",
           n, g[n / 2], 100 * f[n / 2], 100 * f[0], 100 * f[n - 1]);
    if (!alt) return;
    /* a build may run faster second in a round than first (or the reverse) on some hosts: each pair of
       rounds (one with either build first) gives the geometric mean of its two ratios, which that
       bias cancels in; the figure is their median. The medians by who ran first show the bias. */
    int np = n / 2;
    for (int i = 0; i < np; i++) {
        rp[i] = sqrt(ra[2 * i] * ra[2 * i + 1]);
        rf[0][i] = ra[2 * i];
        rf[1][i] = ra[2 * i + 1];
    }
    qsort(fa, n, sizeof fa[0], cmp_double);
    qsort(ra, n, sizeof ra[0], cmp_double);
    printf("  alternative build: median %.1f%% of the peak (range %.1f-%.1f%%); alternative / shipped: median %.3fx "
           "(range %.3f-%.3f)\n", 100 * fa[n / 2], 100 * fa[0], 100 * fa[n - 1], ra[n / 2], ra[0], ra[n - 1]);
    if (np < 1) return;
    qsort(rp, np, sizeof rp[0], cmp_double);
    qsort(rf[0], np, sizeof rf[0][0], cmp_double);
    qsort(rf[1], np, sizeof rf[1][0], cmp_double);
    printf("  alternative / shipped over %d pairs of rounds (one each build first): median %.3fx (range %.3f-%.3f); "
           "by who ran first, shipped %.3fx, alternative %.3fx\n", np, np % 2 ? rp[np / 2] : sqrt(rp[np / 2 - 1] * rp[np / 2]),
           rp[0], rp[np - 1], rf[0][np / 2], rf[1][np / 2]);
}

/* ffn M F D: tm_kmeasure_ffn on the chosen variant (default: the first that
 * has gemm_glu, the best first); per round each way's rate, then the medians
 * and the median of the rounds' ratios to apart (f32 y). With -a 1 (kbench-ab,
 * on the amx variant) a fifth way, the alternative build's fused GEMM with a
 * bf16 y, and the median of its rounds' ratios to this build's */
static int ffn_main(int M, int F, int D, int rounds, double secs, const char *only, int ab, tm_pool *pool)
{
    const char *const *v = tm_kernels_variants();
    tm_kernels k;
    tm_err e = {0};
    int n = 0, ok = 0;
    if (only) { /* any variant by name, amx-emu included (a check of the harness off the device) */
        ok = tm_kernels_select(only, &k, &e) == TM_OK && k.gemm_glu;
    } else {
        while (v[n]) n++;
        while (!ok && --n >= 0) ok = tm_kernels_select(v[n], &k, &e) == TM_OK && k.gemm_glu; /* best first */
    }
    if (!ok) {
        fprintf(stderr, "kbench ffn: no kernel variant with a fused gate/up GEMM%s%s\n", only ? " named " : "",
                only ? only : "");
        return 1;
    }
    tm_kernels ka = k;
    if (ab) {
        if (strcmp(k.name, "amx")) {
            fprintf(stderr, "kbench ffn: -a compares the amx variant's builds, not %s\n", k.name);
            return 1;
        }
        tm_kvariant_amx_alt(&ka);
    }
    if (rounds > 64) rounds = 64;
    static const char *names[TM_KFFN_ALT_BF16Y + 1] = {"apart", "fused", "apart, bf16 y", "fused, bf16 y",
                                                       "alternative build fused, bf16 y"};
    double g[(TM_KFFN_ALT_BF16Y + 1) * 64], r[64];
    tm_err err = {0};
    if (tm_kmeasure_ffn(&k, ab ? &ka : NULL, M, F, D, rounds, secs, pool, g, &err)) {
        fprintf(stderr, "kbench ffn: %s\n", err.msg);
        return 1;
    }
    int ways = ab ? TM_KFFN_ALT_BF16Y + 1 : k.gemm_bf16y ? TM_KFFN_WAYS : TM_KFFN_APART_BF16Y;
    printf("ffn %s int8 M=%d F=%d D=%d, gate/up step GOP/s by round (", k.name, M, F, D);
    for (int w = 0; w < ways; w++) printf("%s%s", w ? " / " : "", names[w]);
    printf("):");
    for (int i = 0; i < rounds; i++)
        for (int w = 0; w < ways; w++) printf("%s%.0f", w ? "/" : " ", g[w * rounds + i]);
    /* each way's median, and the median over rounds of its ratio to the first (apart, f32 y) */
    printf("\n  medians:");
    for (int w = 0; w < ways; w++) {
        double *gw = g + w * rounds;
        for (int i = 0; i < rounds; i++) r[i] = gw[i] / g[i];
        qsort(r, rounds, sizeof r[0], cmp_double);
        double ratio = r[rounds / 2], lo = r[0], hi = r[rounds - 1];
        memcpy(r, gw, sizeof r[0] * rounds);
        qsort(r, rounds, sizeof r[0], cmp_double);
        printf("%s %s %.1f GOP/s", w ? ";" : "", names[w], r[rounds / 2]);
        if (w) printf(" = %.3fx apart (range %.3f-%.3f)", ratio, lo, hi);
    }
    printf("\n");
    if (ab) { /* alternative / this build, round by round */
        for (int i = 0; i < rounds; i++) r[i] = g[TM_KFFN_ALT_BF16Y * rounds + i] / g[TM_KFFN_FUSED_BF16Y * rounds + i];
        qsort(r, rounds, sizeof r[0], cmp_double);
        printf("  alternative / shipped (fused, bf16 y) over %d rounds: median %.3fx (range %.3f-%.3f)\n", rounds,
               r[rounds / 2], r[0], r[rounds - 1]);
    }
    return 0;
}

/* kbench -Y 1: gemm_bf16y behind the f32 GEMM's signature (y's buffer holds M x N floats, so bf16
   fits); [0] this build's, [1] the alternative build's (-a 1 -Y 1) */
typedef int (*y16_fn)(const tm_kweight *, const tm_kact *, uint16_t *, tm_kbuf *, struct tm_pool *);
static y16_fn y16_op[2];

static int gemm_y16(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    return y16_op[0](w, x, (uint16_t *)y, ws, pool);
}

static int gemm_y16_alt(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    return y16_op[1](w, x, (uint16_t *)y, ws, pool);
}

static void usage(void)
{
    fprintf(stderr, "usage: kbench [-t THREADS] [-s SECONDS] [-v VARIANT] [-c CPU] [-p ROUNDS] [-m MIB] [-y MIB] [-g 0|1] [-a 1] [-Y 1] gemv DTYPE N K B\n"
                    "       kbench [options] gemm DTYPE M N K\n"
                    "       kbench [options] mem\n"
                    "       kbench [options] peak\n"
                    "       kbench [options] ffn M F D   (gate/up GEMM + activation pass against the fused GEMM, y f32 / bf16; -p rounds;\n"
                    "                                     -a 1: also the alternative build's fused GEMM)\n"
                    "       kbench [options] attn KVDTYPE CTX [B H Hk Dh]   (default 1 32 8 64)\n"
                    "       kbench [options] attnp T [H Hk Dh [P]]   (prefill chunk at position P, bf16 KV; default 32 8 64 0)\n"
                    "DTYPE: int4g32 int4g64 int4pc int6g64 int8 bf16 (gemm: bf16, int8)\n");
}

int main(int argc, char **argv)
{
    int threads = tm_cpu_get()->n_cpus, mib = 512, mib_set = 0, ymib = 0, ab = 0, i = 1, first_cpu = -1, paired = 0, gfni = -1;
    int y16 = 0;
    double secs = 1.0;
    const char *only = NULL;
    for (; i < argc && argv[i][0] == '-'; i += 2) {
        if (i + 1 >= argc) { usage(); return 2; }
        if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-s")) secs = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "-v")) only = argv[i + 1];
        else if (!strcmp(argv[i], "-m")) mib = mib_set = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-y")) ymib = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-c")) first_cpu = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-p")) paired = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-g")) gfni = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-a")) ab = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-Y")) y16 = atoi(argv[i + 1]);
        else { usage(); return 2; }
    }
    if (i >= argc) { usage(); return 2; }
    if (ab && !tm_kvariant_amx_alt) {
        fprintf(stderr, "kbench: -a needs the alternative AMX build: make kbench-ab AMX_ALT=\"-D...\"\n");
        return 2;
    }
    tm_err err = {0};
    tm_pool *pool = NULL;
    int cpus[256], nc = threads < 1 ? 1 : threads < 256 ? threads : 256;
    if (first_cpu >= 0)
        for (int c = 0; c < nc; c++) cpus[c] = first_cpu + c;
    else
        nc = tm_cpu_pick(cpus, nc); /* a session's CPUs for that many threads */
    if (tm_pool_init(&pool, cpus, nc, 0, &err) != TM_OK || tm_pool_pin_caller(pool, &err) != TM_OK) {
        fprintf(stderr, "kbench: %s\n", err.msg);
        return 1;
    }
    tm_kmeasure r;
    const char *cmd = argv[i];
    if (!strcmp(cmd, "mem")) {
        if (tm_kmeasure_memread((size_t)mib << 20, secs, pool, &r, &err)) { fprintf(stderr, "kbench: %s\n", err.msg); return 1; }
        printf("memread %d MiB, %d threads: %.2f GB/s (cpu %.0f%%)\n", mib, nc, r.gbps, 100 * r.cpu_seconds / (r.seconds * nc));
        tm_pool_free(pool);
        return 0;
    }
    if (!strcmp(cmd, "peak")) { /* the tile / FMA peaks the GEMMs are measured against */
        static const char *const vn[] = {"amx", "amx-loaded", "avx512", "avx2"};
        for (int a = 0; a < 4; a++)
            for (int d = 0; d < 2; d++) {
                tm_dtype dt = d ? TM_DT_Q8PC : TM_DT_BF16;
                if (tm_kmeasure_peak(vn[a], dt, secs, pool, &r, &err) == TM_OK)
                    printf("peak %s %s, %d threads: %.1f GOP/s\n", vn[a], d ? "int8" : "bf16", nc, r.gflops);
            }
        tm_pool_free(pool);
        return 0;
    }
    if (!strcmp(cmd, "attn")) {
        int dti = i + 2 < argc ? tm_dtype_from_name(argv[i + 1]) : -1;
        if (dti < 0) { usage(); return 2; }
        int ctx = atoi(argv[i + 2]), B = i + 3 < argc ? atoi(argv[i + 3]) : 1;
        int H = i + 4 < argc ? atoi(argv[i + 4]) : 32, Hk = i + 5 < argc ? atoi(argv[i + 5]) : 8;
        int Dh = i + 6 < argc ? atoi(argv[i + 6]) : 64;
        int rc = attn_main((tm_dtype)dti, ctx, B, H, Hk, Dh, mib, secs, only, pool);
        tm_pool_free(pool);
        return rc;
    }
    if (!strcmp(cmd, "ffn")) { /* the FFN's gate/up step, apart and fused, alternating */
        if (i + 3 >= argc) { usage(); return 2; }
        int rc = ffn_main(atoi(argv[i + 1]), atoi(argv[i + 2]), atoi(argv[i + 3]), paired > 0 ? paired : 3, secs, only,
                          ab, pool);
        tm_pool_free(pool);
        return rc;
    }
    if (!strcmp(cmd, "attnp")) {
        if (i + 1 >= argc) { usage(); return 2; }
        int T = atoi(argv[i + 1]), H = i + 2 < argc ? atoi(argv[i + 2]) : 32;
        int Hk = i + 3 < argc ? atoi(argv[i + 3]) : 8, Dh = i + 4 < argc ? atoi(argv[i + 4]) : 64;
        int P = i + 5 < argc ? atoi(argv[i + 5]) : 0;
        int rc = attnp_main(T, H, Hk, Dh, P, secs, only, pool);
        tm_pool_free(pool);
        return rc;
    }
    int gemm = !strcmp(cmd, "gemm");
    if ((!gemm && strcmp(cmd, "gemv")) || i + 4 + !gemm > argc) { usage(); return 2; }
    int dti = tm_dtype_from_name(argv[i + 1]);
    if (dti < 0) { usage(); return 2; }
    tm_dtype dt = (tm_dtype)dti;
    int a1 = atoi(argv[i + 2]), a2 = atoi(argv[i + 3]), a3 = atoi(argv[i + 4]);
    int M = gemm ? a1 : a3, N = gemm ? a2 : a1, K = gemm ? a3 : a2;
    size_t gemm_bytes = (size_t)mib_set << 20;
    const char *const *v = tm_kernels_variants();
    for (int n = 0; v[n]; n++) {
        tm_kernels k;
        if (!pick_variant(v[n], n, only, &k)) continue;
        if (gfni >= 0 && (k.gemv_q4 == tm_kgemv_q4_avx512 || k.gemv_q4 == tm_kgemv_q4_avx512_gfni)) {
            if (gfni && !tm_cpu_get()->gfni) {
                fprintf(stderr, "kbench: -g 1: no GFNI on this CPU\n");
                tm_pool_free(pool);
                return 1;
            }
            k.gemv_q4 = gfni ? tm_kgemv_q4_avx512_gfni : tm_kgemv_q4_avx512;
        }
        double rel = validate(&k, gemm, dt, M, N, K, pool);
        printf("v%d %-7s %s %s M=%d N=%d K=%d threads=%d: max rel err %.2e %s", n, v[n], cmd, tm_dtype_name(dt), M, N,
               K, nc, rel, rel < 0 || rel > 1e-3 ? "INVALID" : "ok");
        fflush(stdout);
        if (!strcmp(v[n], "scalar") && !only) { printf("\n"); continue; } /* the reference is not timed */
        int rc = gemm ? tm_kmeasure_gemm(&k, dt, M, N, K, gemm_bytes, secs, pool, &r, &err)
                      : tm_kmeasure_gemv(&k, dt, N, K, M, (size_t)mib << 20, secs, pool, &r, &err);
        if (rc) printf("  timing failed: %s\n", err.msg);
        else if (gemm) printf("  %.1f GFLOP/s (%.2f ms per call, cpu %.0f%%)\n", r.gflops, 1e3 * r.seconds / r.calls,
                              100 * r.cpu_seconds / (r.seconds * nc));
        else printf("  %.2f GB/s (%.1f GFLOP/s, %.1f us per call, cpu %.0f%%)\n", r.gbps, r.gflops,
                    1e6 * r.seconds / r.calls, 100 * r.cpu_seconds / (r.seconds * nc));
        if (!rc && gemm && paired && !strcmp(v[n], "amx")) {
            tm_kernels ka = k;
            if (ab) {
                tm_kvariant_amx_alt(&ka);
                double ra = validate(&ka, gemm, dt, M, N, K, pool);
                printf("  alternative build: max rel err %.2e %s\n", ra, ra < 0 || ra > 1e-3 ? "INVALID" : "ok");
                if (y16 && k.gemm_bf16y && ka.gemm_bf16y) { /* both builds storing y in bf16 */
                    y16_op[0] = k.gemm_bf16y;
                    y16_op[1] = ka.gemm_bf16y;
                    k.gemm_q8 = k.gemm_bf16 = gemm_y16;
                    ka.gemm_q8 = ka.gemm_bf16 = gemm_y16_alt;
                    printf("  both builds store y in bf16 (gemm_bf16y)\n");
                }
            } else if (y16 && k.gemm_bf16y) { /* the alternative: this build's GEMM storing y in bf16 */
                y16_op[0] = k.gemm_bf16y;
                ka.gemm_q8 = ka.gemm_bf16 = gemm_y16;
                printf("  alternative: the same GEMM with y stored in bf16 (gemm_bf16y)\n");
            }
            paired_peak(&k, ab || (y16 && k.gemm_bf16y) ? &ka : NULL, dt, M, N, K, gemm_bytes, (size_t)ymib << 20, secs,
                        paired, pool);
        }
    }
    tm_pool_free(pool);
    return 0;
}
