/* tests/test_kernels.c: every kernel of every ISA variant this CPU runs
 * against the scalar references (engine/cpu/ref_*.c), which are themselves
 * checked against plain float formulas written here; the attention kernels
 * in test_attn.c.
 *
 * Tolerances (why they are what they are):
 *  - GEMV/GEMM against the reference on the SAME quantized/rounded inputs:
 *    the integer block dots are exact in both, so only f32 rounding of the
 *    scale products and the summation order differ. With u = 2^-24 and K
 *    terms, random-order rounding grows like sqrt(K) u; we allow
 *    8 sqrt(K) u * sum|terms| + 1e-30 (a few sigma of that walk, far below
 *    any indexing or layout bug, which moves results by O(|terms|)).
 *  - Against the unquantized f32 product (checks the activation
 *    quantization itself): int8 x has |error| <= s/2 = amax/254 per element,
 *    so |y - y_f32| <= sum_k |w_k| amax(k's block or row) / 254 (a hard
 *    bound); bf16 x (8 significant bits, round to nearest) has relative
 *    error <= 2^-8 per element, so |y - y_f32| <= 2^-8 sum_k |w_k x_k|
 *    (+ the f32 term).
 *  - Small ops: f32 formulas evaluated in another order or with a ~2 ulp
 *    vector exp: 1e-5 relative to the magnitudes involved.
 *  - Conversions and quantization with the same inputs: exact. */
#include "harness.h"

#include <stdint.h>

#include "core/cpu.h"
#include "core/threadpool.h"
#include "engine/cpu/kernels-impl.h"
#include "engine/cpu/kmeasure.h"
#include "quant/quant.h"
#include "runtime/kvcache.h"

#include "kernels_util.h"

/* ---- what each matmul computes, in plain floats -------------------------------- */

/* x as the kernels see it: per-32-block int8 (Q4), per-row int8 (Q8) or bf16 */
static void x_effective(tm_dtype dt, const float *x, int M, int K, float *xe, float *amax_of)
{
    for (int m = 0; m < M; m++) {
        const float *xr = x + (size_t)m * K;
        float *o = xe + (size_t)m * K, *a = amax_of + (size_t)m * K;
        if (dt == TM_DT_BF16) {
            for (int k = 0; k < K; k++) { o[k] = tm_bf16_to_f32(tm_f32_to_bf16(xr[k])); a[k] = 0; }
            continue;
        }
        int blk = dt == TM_DT_Q8PC ? K : 32;
        for (int b0 = 0; b0 < K; b0 += blk) {
            float amax = 0;
            for (int k = b0; k < b0 + blk; k++) amax = fmaxf(amax, fabsf(xr[k]));
            float inv = amax > 0 ? 127.f / amax : 0, s = amax / 127.f;
            for (int k = b0; k < b0 + blk; k++) {
                o[k] = s * (float)tm_kq8(xr[k], inv);
                a[k] = amax;
            }
        }
    }
}

typedef struct expect {
    double *y_eff;   /* [M][N] sum w x_eff in double */
    double *abs_eff; /* [M][N] sum |w x_eff| */
    double *y_f32;   /* [M][N] sum w x (unquantized) */
    double *qbound;  /* [M][N] bound on |y_eff - y_f32| from the x quantization */
} expect;

static void expect_make(expect *e, const wbuf *w, tm_dtype dt, const float *x, int M, int N, int K)
{
    float *xe = malloc(sizeof(float) * (size_t)M * K), *am = malloc(sizeof(float) * (size_t)M * K);
    x_effective(dt, x, M, K, xe, am);
    e->y_eff = calloc((size_t)M * N, sizeof(double));
    e->abs_eff = calloc((size_t)M * N, sizeof(double));
    e->y_f32 = calloc((size_t)M * N, sizeof(double));
    e->qbound = calloc((size_t)M * N, sizeof(double));
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double a = 0, b = 0, c = 0, d = 0;
            for (int k = 0; k < K; k++) {
                double wk = w->deq[(size_t)n * K + k];
                double xk = xe[(size_t)m * K + k];
                a += wk * xk;
                b += fabs(wk * xk);
                c += wk * x[(size_t)m * K + k];
                d += dt == TM_DT_BF16 ? fabs(wk * x[(size_t)m * K + k]) / 256 : fabs(wk) * am[(size_t)m * K + k] / 254;
            }
            size_t i = (size_t)m * N + n;
            e->y_eff[i] = a;
            e->abs_eff[i] = b;
            e->y_f32[i] = c;
            e->qbound[i] = d;
        }
    free(xe);
    free(am);
}

static void expect_free(expect *e)
{
    free(e->y_eff);
    free(e->abs_eff);
    free(e->y_f32);
    free(e->qbound);
}

static double f32_tol(double abs_sum, int K)
{
    return 8.0 * sqrt((double)K) * 5.96e-8 * abs_sum + 1e-30;
}

/* Compare y[M][N] to the expectations; returns the number of bad entries
 * (prints the first). */
static int compare(const char *what, const float *y, const expect *e, int M, int N, int K)
{
    int bad = 0;
    for (int i = 0; i < M * N; i++) {
        double tol = f32_tol(e->abs_eff[i], K) * 4; /* the reference and the kernel both round */
        double tolq = e->qbound[i] * (1 + 1e-6) + tol;
        int ok = fabs(y[i] - e->y_eff[i]) <= tol && fabs(y[i] - e->y_f32[i]) <= tolq && isfinite(y[i]);
        if (!ok && bad++ == 0)
            fprintf(stderr, "%s: y[%d][%d] = %.9g, expected %.9g (|d| %.3g, tol %.3g), f32 %.9g (tol %.3g)\n", what,
                    i / N, i % N, y[i], e->y_eff[i], fabs(y[i] - e->y_eff[i]), tol, e->y_f32[i], tolq);
    }
    return bad;
}

/* ---- matmul tests ---------------------------------------------------------------- */

typedef int (*mm_fn)(const tm_kweight *, const tm_kact *, float *, tm_kbuf *, struct tm_pool *);

static mm_fn pick(const tm_kernels *k, tm_dtype dt, int gemm)
{
    if (gemm) return dt == TM_DT_BF16 ? k->gemm_bf16 : k->gemm_q8;
    return dt == TM_DT_BF16 ? k->gemv_bf16 : dt == TM_DT_Q8PC ? k->gemv_q8 : k->gemv_q4;
}

static const char *dtn(tm_dtype dt) { return tm_dtype_name(dt); }

/* One shape: variant k (and the reference) against the expectations, with
 * and without a pool (bit-identical), f32 and prepared activations. */
static void mm_case(const tm_kernels *k, tm_pool *pool, tm_dtype dt, int gemm, int M, int N, int K)
{
    char what[160];
    snprintf(what, sizeof what, "%s %s %s M=%d N=%d K=%d", k->name, gemm ? "gemm" : "gemv", dtn(dt), M, N, K);
    wbuf w;
    wbuf_make(&w, dt, N, K);
    tm_err err = {0};
    tm_kweight *kw;
    int rc = tm_kpack_init(&kw, &w.t, TM_KPACK_GEMV | (gemm ? TM_KPACK_GEMM : 0), &err);
    CHECKF(rc == TM_OK, "%s: pack: %s", what, err.msg);
    if (rc) { wbuf_free(&w); return; }
    float *x = rand_vec((size_t)M * K, 1.0f);
    expect e;
    expect_make(&e, &w, dt, x, M, N, K);
    float *y = malloc(sizeof(float) * M * N), *y2 = malloc(sizeof(float) * M * N);
    tm_kbuf ws = {0};
    tm_kact a = {.M = M, .K = K, .f32 = x};

    /* the reference itself against the float formulas (once per shape) */
    if (strcmp(k->name, "scalar") != 0) {
        tm_kernels ref;
        tm_kernels_select("scalar", &ref, NULL);
        CHECK_EQ_INT(pick(&ref, dt, gemm)(kw, &a, y, &ws, NULL), TM_OK);
    } else {
        CHECK_EQ_INT(pick(k, dt, gemm)(kw, &a, y, &ws, NULL), TM_OK);
    }
    char rw[200];
    snprintf(rw, sizeof rw, "reference for %s", what);
    CHECK_EQ_INT(compare(rw, y, &e, M, N, K), 0);

    mm_fn f = pick(k, dt, gemm);
    for (size_t i = 0; i < (size_t)M * N; i++) y[i] = NAN;
    CHECK_EQ_INT(f(kw, &a, y, &ws, NULL), TM_OK);
    CHECK_EQ_INT(compare(what, y, &e, M, N, K), 0);
    /* threads: same rows, same arithmetic, bit-identical */
    CHECK_EQ_INT(f(kw, &a, y2, &ws, pool), TM_OK);
    CHECKF(memcmp(y, y2, sizeof(float) * M * N) == 0, "%s: pool result differs from single-thread", what);
    /* a GEMV's rows do not depend on their batch: each x row alone gives the same bits
     * (a sequence decodes the same alone or batched with others) */
    for (int m = 0; !gemm && M > 1 && m < M; m++) {
        tm_kact a1 = {.M = 1, .K = K, .f32 = x + (size_t)m * K};
        CHECK_EQ_INT(f(kw, &a1, y2, &ws, pool), TM_OK);
        CHECKF(memcmp(y + (size_t)m * N, y2, sizeof(float) * N) == 0, "%s: row %d alone differs from batched", what, m);
    }
    /* prepared activations (what a fused RMSNorm produces) give the same */
    if (!tm_kdt_block32(dt)) {
        int ld = tm_kact_ld(K);
        tm_kact p = {.M = M, .K = K, .ld = ld};
        uint16_t *xb = NULL;
        uint8_t *xq = NULL;
        float *xs = NULL;
        if (dt == TM_DT_BF16) {
            xb = malloc((size_t)M * ld * 2);
            for (int m = 0; m < M; m++) {
                k->f32_to_bf16(xb + (size_t)m * ld, x + (size_t)m * K, (size_t)K);
                memset(xb + (size_t)m * ld + K, 0, (size_t)(ld - K) * 2);
            }
            p.bf16 = xb;
        } else {
            xq = malloc((size_t)M * ld);
            xs = malloc(sizeof(float) * M);
            k->quant_q8(xq, xs, ld, x, M, K);
            p.q8 = xq;
            p.q8_scale = xs;
        }
        CHECK_EQ_INT(f(kw, &p, y2, &ws, pool), TM_OK);
        CHECKF(memcmp(y, y2, sizeof(float) * M * N) == 0, "%s: prepared activations differ from f32 path", what);
        free(xb);
        free(xq);
        free(xs);
    }
    tm_kbuf_free(&ws);
    free(y);
    free(y2);
    free(x);
    expect_free(&e);
    tm_kpack_free(kw);
    wbuf_free(&w);
}

/* The int4 / int6 GEMV (gemv_q4): B = 1..8, odd N, K with tails (K % 128 =
 * 32, 64, 96), and the long-K spans of the avx512 kernel. */
static void test_gemv_q4(const tm_kernels *k, tm_pool *pool)
{
    int big = !sanitizer() && strcmp(k->name, "scalar") != 0;
    static const tm_dtype q4s[] = {TM_DT_Q4G32, TM_DT_Q4G64, TM_DT_Q4PC, TM_DT_Q6G64};
    static const int gv_shapes[][2] = {{1, 64}, {17, 96}, {33, 128}, {5, 192}, {40, 320}, {64, 4096}};
    for (int d = 0; d < 4; d++)
        for (size_t s = 0; s < sizeof gv_shapes / sizeof gv_shapes[0]; s++) {
            int N = gv_shapes[s][0], K = gv_shapes[s][1];
            if ((q4s[d] == TM_DT_Q4G64 || q4s[d] == TM_DT_Q6G64) && K % 64) K += 32;
            if (K > 1024 && !big) K = 1024;
            mm_case(k, pool, q4s[d], 0, 1 + (int)(s % 8), N, K);
        }
    mm_case(k, pool, TM_DT_Q4G32, 0, 8, 31, 224);
    mm_case(k, pool, TM_DT_Q4G32, 0, 2, 19, 32);  /* K = one block: only a tail chunk */
    mm_case(k, pool, TM_DT_Q4PC, 0, 7, 3, 32);
    mm_case(k, pool, TM_DT_Q4G64, 0, 3, 9, 256);
    mm_case(k, pool, TM_DT_Q6G64, 0, 8, 13, 576); /* K % 128 = 64: a tail chunk, B = 8 */
    mm_case(k, pool, TM_DT_Q6G64, 0, 2, 7, 896);
    /* B = 7, 8 at K > 3200: the avx512 int4 kernel takes x's chunks in spans (32 KB of x), a tail in the last */
    mm_case(k, pool, TM_DT_Q6G64, 0, 8, 21, 3392);
    mm_case(k, pool, TM_DT_Q4G32, 0, 7, 35, 3744);
    mm_case(k, pool, TM_DT_Q4PC, 0, 8, 17, 4096);
    /* the int4 layout's windows of 16 blocks: one and a short one (544: 1 block; 896: 12), and Qwen's
       down projection (4864: 9 whole and a short one of 8; B = 8 in spans) */
    mm_case(k, pool, TM_DT_Q4G32, 0, 1, 18, 544);
    mm_case(k, pool, TM_DT_Q4G64, 0, 4, 23, 896);
    mm_case(k, pool, TM_DT_Q4G64, 0, 1, 33, big ? 4864 : 1024);
    mm_case(k, pool, TM_DT_Q4G64, 0, 8, 16, big ? 4864 : 1024);
    /* B = 1: x in registers where it is one or two windows (K <= 1024; Qwen's int6 head at 896), else
       from memory (odd N; a short last window) */
    mm_case(k, pool, TM_DT_Q6G64, 0, 1, 29, 896);
    mm_case(k, pool, TM_DT_Q4G32, 0, 1, 1, 1024);
    mm_case(k, pool, TM_DT_Q4G64, 0, 1, 47, 448);
    mm_case(k, pool, TM_DT_Q6G64, 0, 1, 15, 2048);
    mm_case(k, pool, TM_DT_Q4PC, 0, 1, 35, 1600);
    mm_case(k, pool, TM_DT_Q4G32, 0, 1, 2, 1056);
}

/* The int4 / int6 GEMV's x quantization takes a NaN as the reference does (q 0, never the block's max),
 * so a NaN in x gives the bits of a 0 there; the AVX2 kernel's int16 partial sums at their bound (every
 * code at its top, 15 or 63, against x at 127) do not overflow */
static void test_gemv_q4_edges(const tm_kernels *k)
{
    static const tm_dtype dts[] = {TM_DT_Q4G64, TM_DT_Q6G64, TM_DT_Q4G32, TM_DT_Q4PC};
    for (int d = 0; d < 4; d++)
        for (int B = 1; B <= 3; B += 2) {
            int N = 7, K = 896;
            char what[120];
            snprintf(what, sizeof what, "%s gemv %s B=%d", k->name, dtn(dts[d]), B);
            wbuf w;
            wbuf_make(&w, dts[d], N, K);
            tm_err err = {0};
            tm_kweight *kw;
            CHECKF(tm_kpack_init(&kw, &w.t, TM_KPACK_GEMV, &err) == TM_OK, "%s: pack: %s", what, err.msg);
            float *x = rand_vec((size_t)B * K, 1.0f), *x0 = malloc(sizeof(float) * B * K);
            float y[3 * 7], y0[3 * 7];
            for (int i = 0; i < B * K; i += 37) x[i] = (i / 37) % 3 == 2 ? -NAN : NAN;
            for (int i = 0; i < B * K; i++) x0[i] = x[i] == x[i] ? x[i] : 0.f;
            tm_kbuf ws = {0};
            tm_kact a = {.M = B, .K = K, .f32 = x}, a0 = {.M = B, .K = K, .f32 = x0};
            CHECK_EQ_INT(k->gemv_q4(kw, &a, y, &ws, NULL), TM_OK);
            CHECK_EQ_INT(k->gemv_q4(kw, &a0, y0, &ws, NULL), TM_OK);
            CHECKF(memcmp(y, y0, sizeof(float) * B * N) == 0, "%s: NaN in x differs from 0 there", what);
            tm_kbuf_free(&ws);
            free(x);
            free(x0);
            tm_kpack_free(kw);
            wbuf_free(&w);
        }
    /* the AVX2 quantization gives the reference's bytes: ties (a block's max 127, so x * inv is x itself, and
       halves round to even), NaN, infinities, zeros, subnormals */
    if (strcmp(k->name, "avx2") == 0) {
        enum { KQ = 8 * 32 };
        float xq[KQ], s1[KQ / 32], s2[KQ / 32];
        int8_t q1[KQ], q2[KQ];
        int32_t b1[KQ / 32], b2[KQ / 32];
        for (int i = 0; i < KQ; i++) xq[i] = (float)(i % 64) - 31.5f; /* ..., -0.5, 0.5, 1.5, ... */
        for (int b = 0; b < 4; b++) xq[32 * b + 5] = b % 2 ? -127.f : 127.f;
        xq[32 * 4 + 1] = NAN;
        xq[32 * 4 + 9] = 127.f;
        xq[32 * 5 + 3] = INFINITY;
        for (int i = 32 * 6; i < 32 * 7; i++) xq[i] = i % 2 ? 1e-45f : -0.f;
        for (int i = 32 * 7; i < KQ; i++) xq[i] = NAN;
        tm_kref_quant_b32(xq, KQ, q1, s1, b1);
        tm_kavx2_quant_b32(xq, KQ, q2, s2, b2);
        CHECK(memcmp(q1, q2, sizeof q1) == 0);
        CHECK(memcmp(s1, s2, sizeof s1) == 0);
        CHECK(memcmp(b1, b2, sizeof b1) == 0);
        for (int t = 0; t < 20; t++) { /* random blocks */
            float *xr = rand_vec(KQ, 2.0f);
            tm_kref_quant_b32(xr, KQ, q1, s1, b1);
            tm_kavx2_quant_b32(xr, KQ, q2, s2, b2);
            CHECK(memcmp(q1, q2, sizeof q1) == 0 && memcmp(s1, s2, sizeof s1) == 0 && memcmp(b1, b2, sizeof b1) == 0);
            free(xr);
        }
    }
    /* the extreme codes: weights all at the codes' top (u = 15 / 63) against x at +127 (a block's max 1):
       each output is the exact sum, 127 K * q_max * scales */
    for (int q6 = 0; q6 < 2; q6++) {
        int N = 3, K = 1024, qmax = q6 ? 31 : 7;
        tm_dtype dt = q6 ? TM_DT_Q6G64 : TM_DT_Q4G64;
        float *wf = malloc(sizeof(float) * N * K), x[1024], y[3];
        for (int i = 0; i < N * K; i++) wf[i] = (float)qmax;
        for (int i = 0; i < K; i++) x[i] = 1.f;
        wbuf w;
        memset(&w, 0, sizeof w);
        w.data = malloc(tm_quant_data_bytes(dt, N, K));
        w.scales = malloc(tm_quant_scale_count(dt, N, K) * tm_quant_scale_bytes(dt));
        tm_err err = {0};
        CHECKF(tm_quant_quantize(dt, wf, N, K, w.data, w.scales, NULL, &err) == TM_OK, "quantize: %s", err.msg);
        w.t = (tm_tensor){.name = "test.weight", .dtype = dt, .ndim = 2, .shape = {N, K}, .data = w.data,
                          .scales = w.scales, .nbytes = tm_quant_data_bytes(dt, N, K)};
        tm_kweight *kw;
        CHECKF(tm_kpack_init(&kw, &w.t, TM_KPACK_GEMV, &err) == TM_OK, "pack: %s", err.msg);
        tm_kbuf ws = {0};
        tm_kact a = {.M = 1, .K = K, .f32 = x};
        CHECK_EQ_INT(k->gemv_q4(kw, &a, y, &ws, NULL), TM_OK);
        for (int n = 0; n < N; n++)
            CHECKF(fabsf(y[n] - (float)qmax * K) <= 1e-5f * qmax * K, "%s %s codes at the top: y[%d] = %.9g, want %d",
                   k->name, dtn(dt), n, y[n], qmax * K); /* f32 scale products; an int16 overflow is off by 2^16 a block */
        tm_kbuf_free(&ws);
        tm_kpack_free(kw);
        wbuf_free(&w);
        free(wf);
    }
}

static void test_matmul(const tm_kernels *k, tm_pool *pool)
{
    int big = !sanitizer() && strcmp(k->name, "scalar") != 0;
    test_gemv_q4(k, pool);
    test_gemv_q4_edges(k);
    /* GEMV: B = 1..8, odd N, K with tails */
    static const int q8_shapes[][2] = {{1, 1}, {3, 17}, {19, 64}, {33, 100}, {7, 130}, {48, 1000}};
    for (size_t s = 0; s < sizeof q8_shapes / sizeof q8_shapes[0]; s++)
        for (int B = 1; B <= 8; B += 3 + (int)s % 2) {
            mm_case(k, pool, TM_DT_Q8PC, 0, B, q8_shapes[s][0], q8_shapes[s][1]);
            mm_case(k, pool, TM_DT_BF16, 0, B, q8_shapes[s][0], q8_shapes[s][1] + 3);
        }
    if (big) {
        mm_case(k, pool, TM_DT_Q8PC, 0, 8, 64, 4096);
        mm_case(k, pool, TM_DT_BF16, 0, 2, 64, 4096);
    }
    /* GEMM: M = 1, 3, 17, 64, 130 (row tails of every micro-kernel), N tails,
     * K tails and K past one K slice (avx2 2048, avx512 8192, amx 1024 int8 /
     * 512 bf16); 40 x 1000 x 1100: amx tasks of 8 panels (two groups) with K
     * in several chunks. Where K is three chunks or more, amx-emu takes its
     * long-K loop where a task's A rows are 96 KB or less (20 x 2100 both, 9 x
     * 8400 int8, 40 x 1000 x 1100 bf16) and the K-outer loop where they are
     * more (130 x 40 x 1100 and 9 x 8400 bf16); the group-outer K chunks
     * where K is two chunks (K = 1100 int8) */
    static const int gm_shapes[][3] = {{1, 5, 32}, {3, 32, 96}, {17, 33, 100}, {64, 64, 64}, {37, 100, 600},
                                       {130, 40, 1100}, {20, 70, 2100}, {9, 33, 8400}, {40, 1000, 1100}};
    for (size_t s = 0; s < sizeof gm_shapes / sizeof gm_shapes[0]; s++) {
        int M = gm_shapes[s][0], N = gm_shapes[s][1], K = gm_shapes[s][2];
        if (!big && M * N * K > 3000000) K = 300;
        mm_case(k, pool, TM_DT_BF16, 1, M, N, K);
        mm_case(k, pool, TM_DT_Q8PC, 1, M, N, K);
    }
    if (big) {
        mm_case(k, pool, TM_DT_BF16, 1, 64, 96, 4096);
        mm_case(k, pool, TM_DT_Q8PC, 1, 96, 64, 4096);
        /* more rows than one task (amx: 256) with a tail, K in several chunks */
        mm_case(k, pool, TM_DT_BF16, 1, 300, 40, 1100);
        mm_case(k, pool, TM_DT_Q8PC, 1, 300, 40, 1100);
        /* a task's A rows over all of K past 70% of a 2 MB L2: amx's K-outer loop, not its long-K one */
        mm_case(k, pool, TM_DT_Q8PC, 1, 300, 40, 6144);
        /* K-outer (amx-emu: A 104 KB) over tasks of 2-3 panel groups, the last panel short */
        mm_case(k, pool, TM_DT_Q8PC, 1, 40, 2100, 2600);
        mm_case(k, pool, TM_DT_BF16, 1, 40, 2100, 1300);
        /* N >= 4096 with a tail, A under 1 MB, K in two chunks: amx's 512-row tasks (AMX_MB_WIDE) */
        mm_case(k, pool, TM_DT_BF16, 1, 264, 4100, 600);
        mm_case(k, pool, TM_DT_Q8PC, 1, 264, 4100, 1090);
        /* the same with K in one chunk: amx's split-N tasks (AMX_SPLIT), then rows past one 512-row block */
        mm_case(k, pool, TM_DT_BF16, 1, 264, 4100, 500);
        mm_case(k, pool, TM_DT_Q8PC, 1, 264, 4100, 900);
        mm_case(k, pool, TM_DT_Q8PC, 1, 600, 4100, 200);
    }
}

/* ---- tm_kmatmul, packing, errors ------------------------------------------------ */

static void test_pack_and_errors(void)
{
    tm_err err = {0};
    for (int d = 0; d < 2; d++) {
        tm_dtype dt = d ? TM_DT_Q8PC : TM_DT_BF16;
        wbuf w;
        wbuf_make(&w, dt, 37, 70);
        tm_kweight *kw;
        CHECK_EQ_INT(tm_kpack_init(&kw, &w.t, TM_KPACK_GEMM, &err), TM_OK);
        size_t nb = w.t.nbytes;
        void *back = malloc(nb);
        float *sc = malloc(sizeof(float) * 37);
        CHECK_EQ_INT(tm_kpack_unpack(kw, back, sc, &err), TM_OK);
        CHECK(memcmp(back, w.data, nb) == 0);
        if (dt == TM_DT_Q8PC) CHECK(memcmp(sc, w.scales, sizeof(float) * 37) == 0);
        CHECK_EQ_INT(tm_kweight_n(kw), 37);
        CHECK_EQ_INT(tm_kweight_k(kw), 70);
        CHECK_EQ_INT(tm_kweight_dtype(kw), dt);
        free(back);
        free(sc);
        tm_kpack_free(kw);
        wbuf_free(&w);
    }
    wbuf w;
    wbuf_make(&w, TM_DT_Q4G64, 8, 128);
    tm_kweight *kw = NULL;
    CHECK_EQ_INT(tm_kpack_init(&kw, &w.t, TM_KPACK_GEMM, &err), TM_E_UNSUPPORTED); /* no int4 panels */
    CHECK(strstr(err.msg, "test.weight") != NULL);
    tm_tensor t = w.t;
    t.shape[1] = 96; /* not a multiple of 64 */
    CHECK_EQ_INT(tm_kpack_init(&kw, &t, TM_KPACK_GEMV, &err), TM_E_INVALID);
    CHECK(strstr(err.msg, "64") != NULL);
    t = w.t;
    t.nbytes = 100; /* truncated */
    CHECK_EQ_INT(tm_kpack_init(&kw, &t, TM_KPACK_GEMV, &err), TM_E_INVALID);
    CHECK(strstr(err.msg, "bytes") != NULL);
    t = w.t;
    t.ndim = 3;
    CHECK_EQ_INT(tm_kpack_init(&kw, &t, TM_KPACK_GEMV, &err), TM_E_INVALID);
    t = w.t;
    t.shape[0] = (int64_t)1 << 40;
    CHECK_EQ_INT(tm_kpack_init(&kw, &t, TM_KPACK_GEMV, &err), TM_E_INVALID);
    t = w.t;
    t.scales = NULL;
    CHECK_EQ_INT(tm_kpack_init(&kw, &t, TM_KPACK_GEMV, &err), TM_E_INVALID);
    t = w.t;
    t.dtype = TM_DT_F16;
    CHECK_EQ_INT(tm_kpack_init(&kw, &t, TM_KPACK_GEMV, &err), TM_E_UNSUPPORTED);
    CHECK(kw == NULL);

    /* ops refuse what they cannot take */
    CHECK_EQ_INT(tm_kpack_init(&kw, &w.t, TM_KPACK_GEMV, &err), TM_OK);
    tm_kernels k;
    tm_kernels_best(&k);
    float x[9 * 128] = {0}, y[9 * 8];
    tm_kbuf ws = {0};
    tm_kact a9 = {.M = 9, .K = 128, .f32 = x};
    CHECK_EQ_INT(k.gemv_q4(kw, &a9, y, &ws, NULL), TM_E_INVALID);          /* B > 8 */
    tm_kact ak = {.M = 1, .K = 64, .f32 = x};
    CHECK_EQ_INT(k.gemv_q4(kw, &ak, y, &ws, NULL), TM_E_INVALID);          /* K mismatch */
    tm_kact a1 = {.M = 1, .K = 128, .f32 = x};
    CHECK_EQ_INT(k.gemv_q8(kw, &a1, y, &ws, NULL), TM_E_INVALID);          /* wrong dtype */
    CHECK_EQ_INT(k.gemm_bf16(kw, &a1, y, &ws, NULL), TM_E_INVALID);
    /* tm_kmatmul runs int4 for M > 8 in GEMV row blocks */
    for (int i = 0; i < 9 * 128; i++) x[i] = grand();
    CHECK_EQ_INT(tm_kmatmul(&k, kw, &a9, y, &ws, NULL, &err), TM_OK);
    float y1[8];
    tm_kact last = {.M = 1, .K = 128, .f32 = x + 8 * 128};
    CHECK_EQ_INT(k.gemv_q4(kw, &last, y1, &ws, NULL), TM_OK);
    CHECK(memcmp(y1, y + 8 * 8, sizeof y1) == 0);
    tm_kact bad = {.M = 1, .K = 128};
    CHECK_EQ_INT(tm_kmatmul(&k, kw, &bad, y, &ws, NULL, &err), TM_E_INVALID);
    CHECK(err.msg[0] != 0);
    tm_kbuf_free(&ws);
    tm_kpack_free(kw);
    wbuf_free(&w);

    CHECK_EQ_INT(tm_kernels_select("nonsense", &k, &err), TM_E_NOTFOUND);
    CHECK_EQ_INT(tm_kernels_select("scalar", &k, &err), TM_OK);
    CHECK_EQ_STR(k.name, "scalar");
    for (int i = 0; i < TM_KOP_COUNT; i++) CHECK_EQ_STR(tm_kernels_op_source(&k, i), "scalar");
}

/* ---- small ops --------------------------------------------------------------------- */

static int near_rel(double a, double b, double rel, double abs_floor)
{
    return fabs(a - b) <= rel * fabs(b) + abs_floor && isfinite(a) == isfinite(b);
}

static void test_small_ops(const tm_kernels *k)
{
    static const int Ds[] = {1, 7, 16, 33, 64, 100, 2048};
    const char *v = k->name;
    for (size_t di = 0; di < sizeof Ds / sizeof Ds[0]; di++) {
        int D = Ds[di], T = 3, ld = tm_kact_ld(D);
        float *x = rand_vec((size_t)T * D, 2.0f), *w = rand_vec((size_t)D, 0.5f);
        float *y = malloc(sizeof(float) * T * D), *yr = malloc(sizeof(float) * T * D);
        for (int add_one = 0; add_one < 2; add_one++) {
            k->rmsnorm(y, x, w, T, D, 1e-6f, add_one);
            tm_kref_rmsnorm(yr, x, w, T, D, 1e-6f, add_one);
            int bad = 0;
            for (int i = 0; i < T * D; i++) bad += !near_rel(y[i], yr[i], 1e-5, 1e-30);
            CHECKF(bad == 0, "%s rmsnorm D=%d add_one=%d: %d bad", v, D, add_one, bad);
            /* in place */
            memcpy(y, x, sizeof(float) * T * D);
            k->rmsnorm(y, y, w, T, D, 1e-6f, add_one);
            bad = 0;
            for (int i = 0; i < T * D; i++) bad += !near_rel(y[i], yr[i], 1e-5, 1e-30);
            CHECKF(bad == 0, "%s rmsnorm in place D=%d: %d bad", v, D, bad);

            uint16_t *b = malloc((size_t)T * ld * 2);
            memset(b, 0xff, (size_t)T * ld * 2);
            k->rmsnorm_bf16(b, ld, x, w, T, D, 1e-6f, add_one);
            bad = 0;
            for (int t = 0; t < T; t++) {
                for (int i = 0; i < D; i++) /* one bf16 ulp: rms differs in the last f32 bits */
                    bad += !near_rel(tm_bf16_to_f32(b[t * ld + i]), yr[t * D + i], 1.0 / 128, 1e-30);
                for (int i = D; i < ld; i++) bad += b[t * ld + i] != 0;
            }
            CHECKF(bad == 0, "%s rmsnorm_bf16 D=%d: %d bad", v, D, bad);
            free(b);

            uint8_t *q = malloc((size_t)T * ld), *qr = malloc((size_t)T * ld);
            float s[3], sr[3];
            k->rmsnorm_q8(q, s, ld, x, w, T, D, 1e-6f, add_one);
            tm_kref_rmsnorm_q8(qr, sr, ld, x, w, T, D, 1e-6f, add_one);
            bad = 0;
            for (int t = 0; t < T; t++) {
                bad += !near_rel(s[t], sr[t], 1e-5, 0);
                for (int i = 0; i < ld; i++) bad += abs((int)q[t * ld + i] - (int)qr[t * ld + i]) > 1;
                for (int i = D; i < ld; i++) bad += q[t * ld + i] != 128;
            }
            CHECKF(bad == 0, "%s rmsnorm_q8 D=%d: %d bad", v, D, bad);
            free(q);
            free(qr);
        }
        /* LayerNorm, rows offset by 3 so the mean matters; with and without a bias, in place; the scalar
           reference against the formula in double */
        float *xo = malloc(sizeof(float) * T * D), *bias = rand_vec((size_t)D, 0.3f);
        for (int i = 0; i < T * D; i++) xo[i] = x[i] + 3.0f;
        for (int hb = 0; hb < 2; hb++) {
            const float *b = hb ? bias : NULL;
            k->layernorm(y, xo, w, b, T, D, 1e-5f);
            tm_kref_layernorm(yr, xo, w, b, T, D, 1e-5f);
            int bad = 0, bad_ref = 0;
            for (int t = 0; t < T; t++) {
                double mu = 0, var = 0;
                for (int i = 0; i < D; i++) mu += xo[t * D + i];
                mu /= D;
                for (int i = 0; i < D; i++) var += (xo[t * D + i] - mu) * (xo[t * D + i] - mu);
                var /= D;
                for (int i = 0; i < D; i++) {
                    double want = (xo[t * D + i] - mu) / sqrt(var + 1e-5) * w[i] + (b ? b[i] : 0);
                    bad_ref += !near_rel(yr[t * D + i], want, 1e-5, 1e-5);
                    bad += !near_rel(y[t * D + i], yr[t * D + i], 1e-5, 1e-6);
                }
            }
            CHECKF(bad_ref == 0, "scalar layernorm D=%d bias %d: %d bad against the formula", D, hb, bad_ref);
            CHECKF(bad == 0, "%s layernorm D=%d bias %d: %d bad", v, D, hb, bad);
            memcpy(y, xo, sizeof(float) * T * D);
            k->layernorm(y, y, w, b, T, D, 1e-5f);
            bad = 0;
            for (int i = 0; i < T * D; i++) bad += !near_rel(y[i], yr[i], 1e-5, 1e-6);
            CHECKF(bad == 0, "%s layernorm in place D=%d: %d bad", v, D, bad);
        }
        free(xo);
        free(bias);
        /* quantization of the same input: exact */
        uint8_t *q = malloc((size_t)T * ld), *qr = malloc((size_t)T * ld);
        float s[3], sr[3];
        x[1] = 0; /* a row with zeros and an all-zero row */
        for (int i = 0; i < D; i++) x[2 * D + i] = 0;
        k->quant_q8(q, s, ld, x, T, D);
        tm_kref_quant_q8(qr, sr, ld, x, T, D);
        CHECK(memcmp(q, qr, (size_t)T * ld) == 0);
        CHECK(memcmp(s, sr, sizeof s) == 0);
        CHECK_EQ_INT(q[2 * ld], 128);
        /* a row whose max is subnormal (127 / max overflows to inf: each product +-inf, or NaN for a 0), with a
           NaN: the same bytes too */
        for (int i = 0; i < D; i++) x[2 * D + i] = i % 4 == 0 ? 1e-45f : i % 4 == 1 ? -1e-45f : i % 4 == 2 ? -0.f : 0.f;
        x[2 * D + (D > 3 ? 3 : 0)] = NAN; /* in the first vector, and the row's last element (in the last vector */
        x[3 * D - 1] = NAN;                /* where D is a multiple of the vector length) */
        k->quant_q8(q, s, ld, x, T, D);
        tm_kref_quant_q8(qr, sr, ld, x, T, D);
        CHECKF(memcmp(q, qr, (size_t)T * ld) == 0 && memcmp(s, sr, sizeof s) == 0, "%s quant_q8 of a subnormal row", v);
        x[2 * D + (D > 3 ? 3 : 0)] = x[3 * D - 1] = 0.f;
        /* and the quantization is what it claims: |x - s q| <= s / 2 */
        int bad = 0;
        for (int t = 0; t < T; t++)
            for (int i = 0; i < D; i++)
                bad += fabs(x[t * D + i] - sr[t] * ((int)qr[t * ld + i] - 128)) > sr[t] * 0.5001 + 1e-30;
        CHECK_EQ_INT(bad, 0);
        free(q);
        free(qr);

        size_t n = (size_t)T * D;
        float *u = rand_vec(n, 1.0f);
        k->silu_mul(y, x, u, n);
        tm_kref_silu_mul(yr, x, u, n);
        bad = 0;
        for (size_t i = 0; i < n; i++) bad += !near_rel(y[i], yr[i], 1e-5, 1e-6 * fabs(u[i]));
        CHECKF(bad == 0, "%s silu_mul n=%zu: %d bad", v, n, bad);
        k->gelu_tanh_mul(y, x, u, n);
        tm_kref_gelu_tanh_mul(yr, x, u, n);
        bad = 0;
        for (size_t i = 0; i < n; i++) bad += !near_rel(y[i], yr[i], 1e-5, 1e-6 * fabs(u[i] * x[i]) + 1e-30);
        CHECKF(bad == 0, "%s gelu_tanh_mul n=%zu: %d bad", v, n, bad);
        k->gelu_mul(y, x, u, n);
        tm_kref_gelu_mul(yr, x, u, n);
        bad = 0;
        for (size_t i = 0; i < n; i++) bad += !near_rel(y[i], yr[i], 1e-5, 1e-6 * fabs(u[i] * x[i]) + 1e-30);
        CHECKF(bad == 0, "%s gelu_mul n=%zu: %d bad", v, n, bad);
        /* without the gate product (u NULL): the activation alone, as the reference's and as with u = 1 */
        void (*acts[5])(float *, const float *, const float *, size_t) = {k->silu_mul, k->gelu_tanh_mul, k->gelu_mul,
                                                                          k->relu_mul, k->relu2_mul};
        void (*refs[5])(float *, const float *, const float *, size_t) = {tm_kref_silu_mul, tm_kref_gelu_tanh_mul,
                                                                          tm_kref_gelu_mul, tm_kref_relu_mul,
                                                                          tm_kref_relu2_mul};
        /* relu_mul with a gate product, and the scalar one against its formula */
        k->relu_mul(y, x, u, n);
        tm_kref_relu_mul(yr, x, u, n);
        bad = 0;
        for (size_t i = 0; i < n; i++) bad += y[i] != yr[i] || yr[i] != (x[i] > 0 ? x[i] * u[i] : 0.f);
        CHECKF(bad == 0, "%s relu_mul n=%zu: %d bad", v, n, bad);
        k->relu2_mul(y, x, u, n); /* max(x, 0)² with a gate product: to 1 ulp of the formula */
        tm_kref_relu2_mul(yr, x, u, n);
        bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += !near_rel(y[i], yr[i], 2e-7, 1e-30) || yr[i] != (x[i] > 0 ? x[i] * x[i] * u[i] : 0.f);
        CHECKF(bad == 0, "%s relu2_mul n=%zu: %d bad", v, n, bad);
        /* GPT-OSS's clamped SwiGLU over [-12, 12] (x, u scaled 6x: both clamps at 7 bite), with and without
           the up operand (u NULL: u' = 0), against the scalar one; that one against values worked by hand */
        float *x6 = malloc(sizeof(float) * n), *u6 = malloc(sizeof(float) * n);
        for (size_t i = 0; i < n; i++) x6[i] = 6.f * x[i], u6[i] = 6.f * u[i];
        for (int nu = 0; nu < 2; nu++) {
            k->swiglu_oai_mul(y, x6, nu ? NULL : u6, n);
            tm_kref_swiglu_oai_mul(yr, x6, nu ? NULL : u6, n);
            bad = 0;
            for (size_t i = 0; i < n; i++) bad += !near_rel(y[i], yr[i], 1e-5, 1e-5 * (fabs(x6[i]) + 1) + 1e-30);
            CHECKF(bad == 0, "%s swiglu_oai_mul%s n=%zu: %d bad", v, nu ? " (no up)" : "", n, bad);
        }
        free(x6);
        free(u6);
        {
            const float gs[3] = {10.f, -3.f, 0.5f}, us[3] = {10.f, -20.f, 0.25f};
            const double want[3] = {55.99962502642654, 0.10842785824671582, 0.43798554575797516};
            float ys[3];
            tm_kref_swiglu_oai_mul(ys, gs, us, 3);
            for (int i = 0; i < 3; i++) CHECKF(fabs(ys[i] - want[i]) <= 1e-5 * fabs(want[i]), "swiglu_oai(%g, %g) = %.8g, "
                                               "want %.8g", gs[i], us[i], ys[i], want[i]);
        }
        for (size_t i = 0; i < n; i++) u[i] = 1.0f;
        for (int a = 0; a < 5; a++) {
            float *y1 = malloc(sizeof(float) * n);
            acts[a](y, x, NULL, n);
            refs[a](yr, x, NULL, n);
            acts[a](y1, x, u, n);
            bad = 0;
            for (size_t i = 0; i < n; i++) bad += !near_rel(y[i], yr[i], 1e-5, 1e-6 * fabs(x[i]) + 1e-30) || y[i] != y1[i];
            CHECKF(bad == 0, "%s activation %d without gate product n=%zu: %d bad", v, a, n, bad);
            free(y1);
        }
        free(u);
        free(x);
        free(w);
        free(y);
        free(yr);
    }
    /* silu/gelu far out in the tails: no inf/NaN, right limits */
    float g[16] = {-200, -90, -30, -5, 0, 5, 30, 90, 200, 1e-20f, -1e-20f, 0.5f, -0.5f, 3, -3, 88};
    float u[16], y[16], yr[16];
    for (int i = 0; i < 16; i++) u[i] = 1.5f;
    k->silu_mul(y, g, u, 16);
    tm_kref_silu_mul(yr, g, u, 16);
    int bad = 0;
    for (int i = 0; i < 16; i++) bad += !near_rel(y[i], yr[i], 1e-5, 1e-30);
    CHECKF(bad == 0, "%s silu tails", v);
    k->gelu_tanh_mul(y, g, u, 16);
    tm_kref_gelu_tanh_mul(yr, g, u, 16);
    bad = 0;
    for (int i = 0; i < 16; i++) {
        int b1 = !near_rel(y[i], yr[i], 1e-5, 1e-30);
        if (b1) fprintf(stderr, "gelu(%g) * %g = %.9g, reference %.9g\n", g[i], u[i], y[i], yr[i]);
        bad += b1;
    }
    CHECKF(bad == 0, "%s gelu tails", v);
    k->gelu_mul(y, g, u, 16);
    tm_kref_gelu_mul(yr, g, u, 16);
    bad = 0;
    for (int i = 0; i < 16; i++) {
        int b1 = !near_rel(y[i], yr[i], 1e-5, 1e-30);
        if (b1) fprintf(stderr, "gelu_erf(%g) * %g = %.9g, reference %.9g\n", g[i], u[i], y[i], yr[i]);
        bad += b1;
    }
    CHECKF(bad == 0, "%s exact gelu tails", v);
    /* the exact GELU over [-9, 9] in steps of 1/64: relative 1e-5 (its erfc is relative to 1.2e-7) */
    {
        enum { NG = 1153 };
        float gx[NG], gu[NG], gy[NG], gr[NG];
        for (int i = 0; i < NG; i++) gx[i] = -9.f + (float)i / 64.f, gu[i] = 1.f;
        k->gelu_mul(gy, gx, gu, NG);
        tm_kref_gelu_mul(gr, gx, gu, NG);
        bad = 0;
        for (int i = 0; i < NG; i++) bad += !near_rel(gy[i], gr[i], 1e-5, 1e-30);
        CHECKF(bad == 0, "%s exact gelu on [-9, 9]: %d bad", v, bad);
    }

    /* RoPE: odd head dims (Dh/2 = 3, 8, 17, 64) */
    static const int Dhs[] = {6, 16, 34, 128};
    for (int di = 0; di < 4; di++) {
        int T = 5, H = 3, Dh = Dhs[di], half = Dh / 2;
        float *x = rand_vec((size_t)T * H * Dh, 1.f), *x2 = malloc(sizeof(float) * T * H * Dh);
        float *c = malloc(sizeof(float) * T * half), *s = malloc(sizeof(float) * T * half);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < half; i++) {
                double th = (t + 3) * pow(10000.0, -2.0 * i / Dh);
                c[t * half + i] = (float)cos(th);
                s[t * half + i] = (float)sin(th);
            }
        memcpy(x2, x, sizeof(float) * T * H * Dh);
        float *orig = malloc(sizeof(float) * T * H * Dh);
        memcpy(orig, x, sizeof(float) * T * H * Dh);
        k->rope(x, c, s, T, H, Dh);
        tm_kref_rope(x2, c, s, T, H, Dh);
        bad = 0;
        /* the vector form fuses one multiply-add: a rounding of the products' size */
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < Dh; i++) {
                    size_t o = ((size_t)t * H + h) * Dh;
                    double mag = fabs(orig[o + i % half]) + fabs(orig[o + i % half + half]);
                    bad += fabs(x[o + i] - x2[o + i]) > 1e-6 * mag;
                }
        CHECKF(bad == 0, "%s rope Dh=%d", v, Dh);
        /* rotation keeps each (x1, x2) pair's norm */
        bad = 0;
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < half; i++) {
                    size_t o = ((size_t)t * H + h) * Dh;
                    double n0 = hypot(orig[o + i], orig[o + i + half]), n1 = hypot(x2[o + i], x2[o + i + half]);
                    bad += fabs(n0 - n1) > 1e-5 * (n0 + 1e-3);
                }
        CHECK_EQ_INT(bad, 0);
        free(x); free(x2); free(c); free(s); free(orig);
    }

    /* softmax: rows of 1, 15, 16, 100; a masked row; large logits */
    static const int ns[] = {1, 15, 16, 100, 1000};
    for (int ni = 0; ni < 5; ni++) {
        int R = 3, n = ns[ni];
        float *x = rand_vec((size_t)R * n, 10.f), *xr = malloc(sizeof(float) * R * n);
        for (int i = 0; i < n; i++) x[n + i] = -INFINITY; /* fully masked row */
        x[2 * n] = 1e4f;
        memcpy(xr, x, sizeof(float) * R * n);
        k->softmax(x, R, n);
        tm_kref_softmax(xr, R, n);
        bad = 0;
        for (int i = 0; i < R * n; i++) bad += !near_rel(x[i], xr[i], 1e-5, 1e-7);
        double sum = 0;
        for (int i = 0; i < n; i++) sum += x[i];
        CHECKF(bad == 0 && fabs(sum - 1) < 1e-5, "%s softmax n=%d: %d bad, sum %g", v, n, bad, sum);
        CHECK(x[n] == 0.f);
        free(x);
        free(xr);
    }

    /* conversions: random values and the special ones, exact */
    float sp[] = {0.f, -0.f, 1.f, 1.00390625f, 1.01171875f, 65504.f, 65520.f, 1e-40f, -1e-40f, 6e-8f, 3e-5f,
                  INFINITY, -INFINITY, NAN, 3.4e38f, -2.5f, 1e-45f, 0.333333f};
    size_t nsp = sizeof sp / sizeof sp[0], n = 1000 + nsp;
    float *f = rand_vec(n, 100.f), *back = malloc(n * sizeof(float)), *backr = malloc(n * sizeof(float));
    memcpy(f, sp, sizeof sp);
    uint16_t *h = malloc(n * 2), *hr = malloc(n * 2);
    k->f32_to_bf16(h, f, n);
    tm_kref_f32_to_bf16(hr, f, n);
    CHECK(memcmp(h, hr, n * 2) == 0);
    k->bf16_to_f32(back, h, n);
    tm_kref_bf16_to_f32(backr, hr, n);
    CHECK(memcmp(back, backr, n * 4) == 0);
    k->f32_to_f16(h, f, n);
    tm_kref_f32_to_f16(hr, f, n);
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        int nan_a = (h[i] & 0x7c00) == 0x7c00 && (h[i] & 0x3ff), nan_b = (hr[i] & 0x7c00) == 0x7c00 && (hr[i] & 0x3ff);
        bad += nan_a ? !nan_b : h[i] != hr[i];
    }
    CHECKF(bad == 0, "%s f32_to_f16: %d differ", v, bad);
    k->f16_to_f32(back, hr, n);
    tm_kref_f16_to_f32(backr, hr, n);
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += isnan(backr[i]) ? !isnan(back[i]) : memcmp(&back[i], &backr[i], 4) != 0;
    CHECKF(bad == 0, "%s f16_to_f32: %d differ", v, bad);
    free(f); free(back); free(backr); free(h); free(hr);
}


/* ---- main ---------------------------------------------------------------------------- */

/* TM_KPACK_HUGE: a weight of 2 MB or more is streamed from a copy in huge
 * pages (where THP is on); the GEMV gives the same bytes as from the tensor's own */
static void test_pack_huge(const tm_kernels *k, tm_pool *pool)
{
    tm_err err = {0};
    wbuf w;
    wbuf_make(&w, TM_DT_Q8PC, 1024, 2048); /* 2 MB of int8 */
    tm_kweight *a = NULL, *b = NULL;
    CHECK_EQ_INT(tm_kpack_init(&a, &w.t, TM_KPACK_GEMV, &err), TM_OK);
    CHECK_EQ_INT(tm_kpack_init(&b, &w.t, TM_KPACK_GEMV | TM_KPACK_HUGE, &err), TM_OK);
    if (a && b) {
        CHECK(a->data == w.t.data);
        CHECK(tm_khuge_ok() ? b->data != w.t.data && b->scales != w.t.scales : b->data == w.t.data);
        CHECK(memcmp(b->data, w.t.data, (size_t)1024 * 2048) == 0);
        float *x = rand_vec(2048, 1.0f), ya[1024], yb[1024];
        tm_kact act = {.M = 1, .K = 2048, .f32 = x};
        tm_kbuf ws = {0};
        CHECK_EQ_INT(k->gemv_q8(a, &act, ya, &ws, pool), TM_OK);
        CHECK_EQ_INT(k->gemv_q8(b, &act, yb, &ws, pool), TM_OK);
        CHECK(memcmp(ya, yb, sizeof ya) == 0);
        tm_kbuf_free(&ws);
        free(x);
    }
    tm_kpack_free(a);
    tm_kpack_free(b);
    wbuf_free(&w);
}

/* int4 and int6 weights are bound as a copy in the GEMV layout
 * (kernels-impl.h): every element of every row reads back (tm_kq4_at_t) as
 * the package's layout holds it, for K with and without a short last window;
 * the scales are the tensor's; concatenated parts give the rows of each part
 * in turn */
static void test_q4_layout(void)
{
    static const int Ks[] = {32, 64, 96, 480, 512, 544, 896, 1024, 1504, 4864, 576, 1216, 192};
    for (size_t i = 0; i < sizeof Ks / sizeof Ks[0]; i++) {
        int K = Ks[i], N = 3 + (int)i;
        tm_dtype dt = K % 64 ? TM_DT_Q4G32 : i % 3 == 0 ? TM_DT_Q6G64 : i % 2 ? TM_DT_Q4G64 : TM_DT_Q4PC;
        wbuf w, w2;
        wbuf_make(&w, dt, N, K);
        wbuf_make(&w2, dt, 2, K);
        tm_err err = {0};
        tm_kweight *a = NULL, *c = NULL;
        CHECK_EQ_INT(tm_kpack_init(&a, &w.t, TM_KPACK_GEMV | TM_KPACK_HUGE, &err), TM_OK);
        const tm_tensor *parts[2] = {&w.t, &w2.t};
        CHECK_EQ_INT(tm_kpack_concat(&c, parts, 2, TM_KPACK_GEMV | TM_KPACK_HUGE, "qkv", &err), TM_OK);
        if (!a || !c) {
            tm_kpack_free(a), tm_kpack_free(c), wbuf_free(&w), wbuf_free(&w2);
            continue;
        }
        CHECK(a->data != w.t.data && a->copy != NULL && a->row_bytes == (size_t)K / 2 + (dt == TM_DT_Q6G64 ? K / 4 : 0));
        size_t sb = tm_quant_scale_count(dt, N, K) * tm_quant_scale_bytes(dt);
        CHECK(memcmp(a->scales, w.t.scales, sb) == 0);
        int bad = 0;
        int q6 = dt == TM_DT_Q6G64;
        size_t src_rb = tm_quant_row_bytes(dt, K);
        for (int r = 0; r < N + 2; r++) {
            const uint8_t *src = (const uint8_t *)(r < N ? w.data : w2.data) + (size_t)(r < N ? r : r - N) * src_rb;
            for (int k = 0; k < K; k++) {
                uint8_t byte = src[(k / 32) * 16 + (k & 15)];
                int q = q6 ? tm_quant_q6_at(src, K, k) : ((k & 31) < 16 ? (byte & 15) : (byte >> 4)) - 8;
                if (r < N) bad += tm_kq4_at_t((const uint8_t *)a->data + (size_t)r * a->row_bytes, K, k, q6) != q;
                bad += tm_kq4_at_t((const uint8_t *)c->data + (size_t)r * c->row_bytes, K, k, q6) != q;
            }
        }
        CHECKF(bad == 0, "%s GEMV layout, K = %d: %d elements read back wrong", tm_dtype_name(dt), K, bad);
        tm_kpack_free(a);
        tm_kpack_free(c);
        wbuf_free(&w);
        wbuf_free(&w2);
    }
}

static void test_peak(tm_pool *pool)
{
    const tm_cpu *cpu = tm_cpu_get();
    tm_kmeasure r;
    tm_err err = {0};
    static const char *const unit[4] = {"amx", "avx512", "amx-loaded", "avx2"};
    for (int v = 0; v < 4; v++) {
        int have = v == 1 ? tm_cpu_has_avx512(cpu) : v == 3 ? tm_cpu_has_avx2(cpu) : cpu->amx_usable;
        for (int d = 0; d < 2; d++) {
            int rc = tm_kmeasure_peak(unit[v], d ? TM_DT_Q8PC : TM_DT_BF16, 0.02, pool, &r, &err);
            CHECK_EQ_INT(rc, have ? TM_OK : TM_E_UNSUPPORTED);
            if (have) CHECKF(r.gflops > 1.0 && r.gflops < 1e6, "peak %d %d: %g GOP/s", v, d, r.gflops);
        }
    }
    CHECK_EQ_INT(tm_kmeasure_peak("scalar", TM_DT_BF16, 0.02, pool, &r, &err), TM_E_INVALID);
    CHECK_EQ_INT(tm_kmeasure_peak("avx512", TM_DT_Q4G64, 0.02, pool, &r, &err), TM_E_INVALID);
}

/* tm_khuge_alloc: from 2 MB up 2 MB aligned (huge pages asked for) where
 * the kernel gives them, below it (or without them) 64-byte aligned; GEMM
 * panels from TM_KPANEL_HUGE_MIN up (a weight's panels: Np x Kp bytes) */
static void test_huge_alloc(void)
{
    const size_t H = (size_t)2 << 20;
    size_t sizes[] = {1, TM_KPANEL_HUGE_MIN, H - 64, H, H + 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *p = tm_khuge_alloc(sizes[i]);
        CHECK(p != NULL);
        if (!p) continue;
        CHECKF(((uintptr_t)p & 63) == 0, "%zu bytes at %p", sizes[i], (void *)p);
        if (sizes[i] >= H && tm_khuge_ok())
            CHECKF(((uintptr_t)p & (H - 1)) == 0, "%zu bytes at %p: not 2 MB aligned", sizes[i], (void *)p);
        memset(p, 1, sizes[i]);
        free(p);
    }
    /* int8 panels of 1024 x 512 (512 KB: huge pages, 2 MB aligned) and 1024 x 448 (448 KB: 64-byte
       aligned; whether it also lands 2 MB aligned is the allocator's chance, so not checked) */
    for (int K = 448; K <= 512; K += 64) {
        wbuf w;
        wbuf_make(&w, TM_DT_Q8PC, 1024, K);
        tm_kweight *pw = NULL;
        tm_err err = {0};
        CHECK_EQ_INT(tm_kpack_init(&pw, &w.t, TM_KPACK_GEMM, &err), TM_OK);
        if (pw && (size_t)pw->Np * pw->Kp >= TM_KPANEL_HUGE_MIN && tm_khuge_ok())
            CHECKF(((uintptr_t)pw->panel & (H - 1)) == 0, "panels of [1024][%d] not 2 MB aligned", K);
        CHECK(pw && ((uintptr_t)pw->panel & 63) == 0);
        tm_kpack_free(pw);
        wbuf_free(&w);
    }
}

/* tm_kmeasure_gemm over cycled weights (every call another weight: each is
 * timed at least once) and tm_kmeasure_ffn's four ways (five with an
 * alternative's), in turn, on a
 * variant with gemm_glu (the emulated AMX tiles where AVX-512 runs, the
 * real ones where AMX does); "unsupported" without gemm_glu, "invalid" for
 * shapes it does not take */
static void test_measure(tm_pool *pool)
{
    tm_kernels k;
    tm_kmeasure r;
    tm_err err = {0};
    CHECK_EQ_INT(tm_kernels_select("best", &k, &err), TM_OK);
    size_t one = tm_quant_data_bytes(TM_DT_Q8PC, 96, 128);
    /* no time asked: one pass over the weights */
    CHECK_EQ_INT(tm_kmeasure_gemm(&k, TM_DT_Q8PC, 40, 96, 128, 5 * one, 0, pool, &r, &err), TM_OK);
    CHECKF(r.calls == 5 && r.gflops > 0, "gemm over 5 weights: %ld calls, %g GOP/s", r.calls, r.gflops);
    CHECK_EQ_INT(tm_kmeasure_gemm(&k, TM_DT_Q8PC, 40, 96, 128, 0, 0.005, pool, &r, &err), TM_OK);
    CHECKF(r.calls >= 1 && r.gflops > 0, "gemm on one weight: %ld calls", r.calls);
    CHECK_EQ_INT(tm_kmeasure_gemm(&k, TM_DT_Q4G64, 40, 96, 128, 0, 0.005, pool, &r, &err), TM_E_INVALID);
    /* a set made once, timed twice (kbench -a's rounds): whole passes each time */
    tm_kgemm_set *set = NULL;
    CHECK_EQ_INT(tm_kgemm_set_open(&set, &k, TM_DT_BF16, 24, 64, 96, 3 * tm_quant_data_bytes(TM_DT_BF16, 64, 96), pool,
                                   &err), TM_OK);
    for (int t = 0; set && t < 2; t++) {
        CHECK_EQ_INT(tm_kgemm_set_time(set, &k, t ? 0.002 : 0, &r, &err), TM_OK);
        CHECKF(r.calls % 3 == 0 && r.calls >= 3 && r.gflops > 0 && (t || r.calls == 3), "set timing %d: %ld calls", t,
               r.calls);
    }
    /* the outputs over a ring: as many [24][64] f32 as the bytes asked take, a pass still whole */
    int ny = 0;
    if (set) {
        CHECK_EQ_INT(tm_kgemm_set_ycycle(set, 5 * 24 * 64 * 4 - 1, &ny, &err), TM_OK);
        CHECK_EQ_INT(ny, 5);
        CHECK_EQ_INT(tm_kgemm_set_time(set, &k, 0, &r, &err), TM_OK);
        CHECKF(r.calls == 3 && r.gflops > 0, "set timing over 5 outputs: %ld calls", r.calls);
        CHECK_EQ_INT(tm_kgemm_set_ycycle(set, 0, &ny, &err), TM_OK);
        CHECK_EQ_INT(ny, 1);
        CHECK_EQ_INT(tm_kgemm_set_ycycle(set, (size_t)4097 * 24 * 64 * 4, &ny, &err), TM_E_INVALID);
    }
    tm_kgemm_set_close(set);
    CHECK_EQ_INT(tm_kgemm_set_open(&set, &k, TM_DT_Q4G64, 24, 64, 96, 0, pool, &err), TM_E_INVALID);
    CHECK(set == NULL);
    double w[(TM_KFFN_ALT_BF16Y + 1) * 3] = {0};
    tm_kernels g;
    if (tm_kernels_select("amx", &g, &err) != TM_OK && tm_kernels_select("amx-emu", &g, &err) != TM_OK) {
        printf("SKIP: tm_kmeasure_ffn: no AMX, and no AVX-512 for the emulated tiles, on this CPU (%s)\n", err.msg);
    } else {
        CHECK_EQ_INT(tm_kmeasure_ffn(&g, NULL, 32, 96, 128, 3, 0.002, pool, w, &err), TM_OK);
        for (int i = 0; i < TM_KFFN_WAYS * 3; i++) CHECKF(w[i] > 0, "ffn way %d round %d: %g GOP/s", i / 3, i % 3, w[i]);
        CHECK_EQ_INT(tm_kmeasure_ffn(&g, NULL, 24, 96, 128, 3, 0.002, pool, w, &err), TM_E_INVALID); /* M % 16 */
        /* kbench-ab's fifth way, the alternative build's fused GEMM (here the same kernels) */
        memset(w, 0, sizeof w);
        CHECK_EQ_INT(tm_kmeasure_ffn(&g, &g, 32, 96, 128, 3, 0.002, pool, w, &err), TM_OK);
        for (int i = 0; i < (TM_KFFN_ALT_BF16Y + 1) * 3; i++)
            CHECKF(w[i] > 0, "ffn with the alternative: way %d round %d: %g GOP/s", i / 3, i % 3, w[i]);
    }
    tm_kernels n;
    CHECK_EQ_INT(tm_kernels_select("avx2", &n, &err), TM_OK);
    CHECK_EQ_INT(tm_kmeasure_ffn(&n, NULL, 32, 96, 128, 1, 0.002, pool, w, &err), TM_E_UNSUPPORTED);
}

/* every test of one kernel table */
/* The fused gate/up GEMM (tm_kpack_glu, gemm_glu) against the same
 * variant's two plain GEMMs and its silu_mul / gelu_tanh_mul: the same
 * arithmetic (the activation's vector formula is vec_exp.inc's in both), so
 * the same bits. In bf16 (gemm_bf16y) each value is that one rounded, but
 * for SiLU and GELU-tanh, whose bf16 results the amx variant computes to
 * 1e-4 (gemm_amx.c, vgate_lp): each within 2^-8 of it (rounding's own error is up to
 * 2^-9) or 2^-100 (where x e^x underflows the f32 reference's clamped exp
 * gives ~1e-35, the fast one 0, closer to x e^x), at most 1% of them other
 * than it rounded. x is scaled by xs (300: gate values of hundreds, past
 * where e^-x over- and underflows). */
static void glu_case(const tm_kernels *k, tm_pool *pool, tm_dtype dt, int act, int M, int F, int K, float xs)
{
    char what[160];
    snprintf(what, sizeof what, "%s gemm_glu %s %s M=%d F=%d K=%d x%g", k->name, dtn(dt),
             act == TM_KGLU_SILU ? "silu" : act == TM_KGLU_GELU ? "gelu" : "gelu_tanh", M, F, K, xs);
    wbuf wg, wu;
    wbuf_make(&wg, dt, F, K);
    wbuf_make(&wu, dt, F, K);
    tm_err err = {0};
    tm_kweight *g = NULL, *u = NULL, *glu = NULL;
    CHECK_EQ_INT(tm_kpack_init(&g, &wg.t, TM_KPACK_GEMV | TM_KPACK_GEMM, &err), TM_OK);
    CHECK_EQ_INT(tm_kpack_init(&u, &wu.t, TM_KPACK_GEMV | TM_KPACK_GEMM, &err), TM_OK);
    CHECKF(g && u && tm_kpack_glu(&glu, g, u, act, &err) == TM_OK, "%s: %s", what, err.msg);
    float *x = rand_vec((size_t)M * K, xs);
    size_t n = (size_t)M * F;
    float *yg = malloc(sizeof(float) * n), *yu = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    float *y2 = malloc(sizeof(float) * n);
    tm_kbuf ws = {0};
    tm_kact a = {.M = M, .K = K, .f32 = x};
    mm_fn f = pick(k, dt, 1);
    if (glu && f(g, &a, yg, &ws, pool) == TM_OK && f(u, &a, yu, &ws, pool) == TM_OK) {
        /* the activation row by row, each padded to whole vectors so every element takes the vector formula */
        int Fp = (F + 15) / 16 * 16;
        float *rg = calloc((size_t)Fp, sizeof(float)), *ru = calloc((size_t)Fp, sizeof(float));
        for (int m = 0; m < M; m++) {
            memcpy(rg, yg + (size_t)m * F, sizeof(float) * F);
            memcpy(ru, yu + (size_t)m * F, sizeof(float) * F);
            tm_kglu_fn(k, act)(rg, rg, ru, (size_t)Fp);
            memcpy(yg + (size_t)m * F, rg, sizeof(float) * F);
        }
        free(rg);
        free(ru);
        for (size_t i = 0; i < n; i++) y[i] = NAN;
        CHECK_EQ_INT(k->gemm_glu(glu, &a, y, &ws, NULL), TM_OK);
        int bad = 0;
        for (size_t i = 0; i < n; i++) {
            if (!(y[i] == yg[i]) && bad++ == 0)
                fprintf(stderr, "%s: y[%zu][%zu] = %.9g, two GEMMs and the activation %.9g\n", what, i / F, i % F,
                        y[i], yg[i]);
        }
        CHECK_EQ_INT(bad, 0);
        CHECK_EQ_INT(k->gemm_glu(glu, &a, y2, &ws, pool), TM_OK);
        CHECKF(memcmp(y, y2, sizeof(float) * n) == 0, "%s: pool result differs from single-thread", what);
        if (k->gemm_bf16y) { /* y in bf16: each of those values rounded to nearest even */
            uint16_t *yb = malloc(2 * n);
            memset(yb, 0xff, 2 * n);
            CHECK_EQ_INT(tm_kmatmul_bf16y(k, glu, &a, yb, &ws, pool, &err), TM_OK);
            size_t nb = 0, far = 0;
            /* lp: the AMX epilogue's SiLU / GELU-tanh to ~1e-4 (AMX_ACT_LP): its bf16 may round the other way,
             * up to half a bf16 step (2^-8 of y at the bottom of a binade) plus that error from y; 2^-12 covers
             * it (2^-8 alone failed where y sat just above a power of two: 6,000 random cases, 0 beyond now) */
            const int lp = (act == TM_KGLU_SILU || act == TM_KGLU_GELU_TANH) && !strncmp(k->name, "amx", 3);
            for (size_t i = 0; i < n; i++) {
                uint16_t want = fpclassify(y[i]) == FP_SUBNORMAL ? (signbit(y[i]) ? 0x8000 : 0) : tm_f32_to_bf16(y[i]);
                float v = tm_bf16_to_f32(yb[i]);
                if (yb[i] != want && (!lp || !(fabsf(v - y[i]) <= (0x1p-8f + 0x1p-12f) * fabsf(y[i]) + 0x1p-100f)) && far++ == 0)
                    fprintf(stderr, "%s: bf16 y[%zu][%zu] = %#x, gemm_glu's %.9g rounds to %#x\n", what, i / F,
                            i % F, yb[i], y[i], want);
                nb += yb[i] != want && fabsf(y[i]) > 0x1p-100f;
            }
            CHECKF(far == 0 && nb * 100 <= n, "%s: bf16 y: %zu of %zu out of bounds, %zu differ from the f32 rounded",
                   what, far, n, nb);
            free(yb);
        }
        /* a glu weight is no plain GEMM weight, nor the other way round */
        CHECK_EQ_INT(f(glu, &a, y2, &ws, pool), TM_E_INVALID);
        CHECK_EQ_INT(k->gemm_glu(g, &a, y2, &ws, pool), TM_E_INVALID);
    }
    tm_kbuf_free(&ws);
    free(yg); free(yu); free(y); free(y2); free(x);
    tm_kpack_free(glu);
    tm_kpack_free(g);
    tm_kpack_free(u);
    wbuf_free(&wg);
    wbuf_free(&wu);
}

static void test_glu(const tm_kernels *k, tm_pool *pool)
{
    if (!k->gemm_glu) return;
    /* F 4100, K one chunk: amx's split-N tasks (AMX_SPLIT) */
    static const int shapes[][3] = {{64, 64, 64}, {37, 100, 600}, {130, 40, 1100}, {20, 70, 2100}, {33, 96, 128},
                                    {40, 4100, 300}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int d = 0; d < 2; d++)
            glu_case(k, pool, d ? TM_DT_Q8PC : TM_DT_BF16, (int)(s % 3) + TM_KGLU_SILU, shapes[s][0],
                     shapes[s][1], shapes[s][2], 1.0f);
    for (int d = 0; d < 4; d++) /* gate values of hundreds, both signs: e^-x past f32's range */
        glu_case(k, pool, d & 1 ? TM_DT_Q8PC : TM_DT_BF16, d < 2 ? TM_KGLU_SILU : TM_KGLU_GELU_TANH, 33, 96, 128,
                 300.0f);
    /* through tm_kmatmul: GEMM only */
    wbuf wg;
    wbuf_make(&wg, TM_DT_Q8PC, 40, 64);
    tm_err err = {0};
    tm_kweight *g = NULL, *glu = NULL, *b = NULL, *bad = (tm_kweight *)1;
    CHECK_EQ_INT(tm_kpack_init(&g, &wg.t, TM_KPACK_GEMV | TM_KPACK_GEMM, &err), TM_OK);
    CHECK_EQ_INT(tm_kpack_init(&b, &wg.t, TM_KPACK_GEMV, &err), TM_OK);
    CHECK_EQ_INT(tm_kpack_glu(&bad, g, b, TM_KGLU_SILU, &err), TM_E_INVALID); /* b has no panels */
    CHECK(bad == NULL && strstr(err.msg, "gate and up") != NULL);
    CHECK_EQ_INT(tm_kpack_glu(&glu, g, g, TM_KGLU_SILU, &err), TM_OK);
    if (!glu) return;
    float *x = rand_vec(64 * 4, 1.0f), y[4 * 40];
    tm_kact a = {.M = 4, .K = 64, .f32 = x};
    tm_kbuf ws = {0};
    CHECK_EQ_INT(tm_kmatmul(k, glu, &a, y, &ws, pool, &err), TM_E_UNSUPPORTED); /* 4 rows: a GEMV's */
    tm_kbuf_free(&ws);
    free(x);
    tm_kpack_free(glu);
    tm_kpack_free(g);
    tm_kpack_free(b);
    wbuf_free(&wg);
}

/* gemm_bf16y (a GEMM whose y is stored in bf16) against the same variant's
 * f32 GEMM with each result rounded to nearest even: the same epilogue, so
 * the same bits; single thread and pool alike. The large shape's 8 MB of
 * output takes the non-temporal stores. */
static void bf16y_case(const tm_kernels *k, tm_pool *pool, tm_dtype dt, int M, int N, int K)
{
    char what[160];
    snprintf(what, sizeof what, "%s gemm_bf16y %s M=%d N=%d K=%d", k->name, dtn(dt), M, N, K);
    wbuf wb;
    wbuf_make(&wb, dt, N, K);
    tm_err err = {0};
    tm_kweight *w = NULL;
    CHECK_EQ_INT(tm_kpack_init(&w, &wb.t, TM_KPACK_GEMV | TM_KPACK_GEMM, &err), TM_OK);
    float *x = rand_vec((size_t)M * K, 1.0f), *y = malloc(sizeof(float) * (size_t)M * N);
    uint16_t *yb = malloc(2 * (size_t)M * N), *yb2 = malloc(2 * (size_t)M * N);
    tm_kbuf ws = {0};
    tm_kact a = {.M = M, .K = K, .f32 = x};
    if (w && pick(k, dt, 1)(w, &a, y, &ws, pool) == TM_OK) {
        memset(yb, 0xff, 2 * (size_t)M * N);
        CHECK_EQ_INT(tm_kmatmul_bf16y(k, w, &a, yb, &ws, NULL, &err), TM_OK);
        size_t bad = 0;
        for (size_t i = 0; i < (size_t)M * N; i++) {
            /* nearest even; a denormal to a zero of its sign */
            uint16_t want = fpclassify(y[i]) == FP_SUBNORMAL ? (signbit(y[i]) ? 0x8000 : 0) : tm_f32_to_bf16(y[i]);
            if (yb[i] != want && bad++ == 0)
                fprintf(stderr, "%s: y[%zu][%zu] = %#x, the f32 GEMM's %.9g rounds to %#x\n", what, i / N, i % N,
                        yb[i], y[i], want);
        }
        CHECKF(bad == 0, "%s: %zu of %zu differ", what, bad, (size_t)M * N);
        CHECK_EQ_INT(tm_kmatmul_bf16y(k, w, &a, yb2, &ws, pool, &err), TM_OK);
        CHECKF(memcmp(yb, yb2, 2 * (size_t)M * N) == 0, "%s: pool result differs from single-thread", what);
    }
    tm_kbuf_free(&ws);
    free(x); free(y); free(yb); free(yb2);
    tm_kpack_free(w);
    wbuf_free(&wb);
}

static void test_bf16y(const tm_kernels *k, tm_pool *pool)
{
    if (!k->gemm_bf16y) return;
    static const int shapes[][3] = {{64, 64, 64}, {37, 100, 600}, {130, 40, 1100}, {20, 70, 2100}, {33, 96, 128},
                                    {512, 8192, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int d = 0; d < 2; d++)
            bf16y_case(k, pool, d ? TM_DT_Q8PC : TM_DT_BF16, shapes[s][0], shapes[s][1], shapes[s][2]);
    /* what it does not take: an int4 weight, a GEMV's rows (a glu weight it takes where gemm_glu is: glu_case) */
    wbuf wg, w4;
    wbuf_make(&wg, TM_DT_Q8PC, 40, 64);
    wbuf_make(&w4, TM_DT_Q4G64, 40, 64);
    tm_err err = {0};
    tm_kweight *g = NULL, *glu = NULL, *q4 = NULL;
    CHECK_EQ_INT(tm_kpack_init(&g, &wg.t, TM_KPACK_GEMV | TM_KPACK_GEMM, &err), TM_OK);
    CHECK_EQ_INT(tm_kpack_init(&q4, &w4.t, TM_KPACK_GEMV, &err), TM_OK);
    float *x = rand_vec(64 * 32, 1.0f);
    uint16_t yb[32 * 40];
    tm_kact a = {.M = 32, .K = 64, .f32 = x}, a4 = {.M = 4, .K = 64, .f32 = x};
    tm_kbuf ws = {0};
    if (g && q4 && tm_kpack_glu(&glu, g, g, TM_KGLU_SILU, &err) == TM_OK) {
        CHECK(tm_kmatmul_bf16y_ok(k, g, 32) && !tm_kmatmul_bf16y_ok(k, g, 4) && !tm_kmatmul_bf16y_ok(k, glu, 4) &&
              tm_kmatmul_bf16y_ok(k, glu, 32) == (k->gemm_glu != NULL) && !tm_kmatmul_bf16y_ok(k, q4, 32));
        CHECK_EQ_INT(tm_kmatmul_bf16y(k, g, &a4, yb, &ws, pool, &err), TM_E_UNSUPPORTED);
        CHECK_EQ_INT(tm_kmatmul_bf16y(k, glu, &a4, yb, &ws, pool, &err), TM_E_UNSUPPORTED);
        CHECK(strstr(err.msg, "glu") != NULL);
        CHECK_EQ_INT(k->gemm_bf16y(q4, &a, yb, &ws, pool), TM_E_INVALID);
        tm_kact a63 = a; /* K the weights' 64 do not match */
        a63.K = 63;
        CHECK_EQ_INT(k->gemm_bf16y(glu, &a63, yb, &ws, pool), TM_E_INVALID);
    }
    tm_kbuf_free(&ws);
    free(x);
    tm_kpack_free(glu);
    tm_kpack_free(g);
    tm_kpack_free(q4);
    wbuf_free(&wg);
    wbuf_free(&w4);
}

/* tm_kglu_row_bf16: act(gate) * up of a bf16 gate|up row, in column steps,
 * the same bits as the variant's activation on the widened row (F past a
 * step and not a multiple of the vectors) */
static void test_glu_row_bf16(const tm_kernels *k)
{
    enum { F = 300 };
    uint16_t gu[2 * F];
    float g[F], u[F], want[F], got[F];
    float *r = rand_vec(2 * F, 4.0f);
    for (int i = 0; i < 2 * F; i++) gu[i] = tm_f32_to_bf16(r[i]);
    for (int act = TM_KGLU_SILU; act <= TM_KGLU_GELU; act++) {
        for (int i = 0; i < F; i++) {
            g[i] = tm_bf16_to_f32(gu[i]);
            u[i] = tm_bf16_to_f32(gu[F + i]);
        }
        tm_kglu_fn(k, act)(want, g, u, F);
        tm_kglu_row_bf16(k, act, got, gu, gu + F, F);
        CHECKF(memcmp(want, got, sizeof want) == 0, "%s tm_kglu_row_bf16 act %d", k->name, act);
    }
    free(r);
}

/* tm_kpack_concat: q, k and v as one weight give the three results side by
 * side, bit for bit (each output row is its own dot products), GEMV and GEMM */
static void test_concat(const tm_kernels *k, tm_pool *pool)
{
    static const tm_dtype dts[] = {TM_DT_BF16, TM_DT_Q8PC, TM_DT_Q4G64, TM_DT_Q4G32, TM_DT_Q4PC};
    static const int rows[3] = {40, 8, 24};
    const int K = 192;
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        int gemm = dts[d] == TM_DT_BF16 || dts[d] == TM_DT_Q8PC;
        int uses = TM_KPACK_GEMV | (gemm ? TM_KPACK_GEMM : 0);
        wbuf w[3];
        tm_kweight *part[3] = {NULL, NULL, NULL}, *cat = NULL;
        const tm_tensor *ts[3];
        tm_err err = {0};
        for (int i = 0; i < 3; i++) {
            wbuf_make(&w[i], dts[d], rows[i], K);
            ts[i] = &w[i].t;
            CHECK_EQ_INT(tm_kpack_init(&part[i], &w[i].t, uses, &err), TM_OK);
        }
        CHECKF(tm_kpack_concat(&cat, ts, 3, uses, "q|k|v", &err) == TM_OK, "%s concat %s: %s", k->name, dtn(dts[d]),
               err.msg);
        for (int M = 1; M <= (gemm ? 40 : 3) && cat; M += gemm ? 39 : 2) {
            float *x = rand_vec((size_t)M * K, 1.0f), *y = malloc(sizeof(float) * M * 72), *yp = malloc(sizeof(float) * M * 40);
            tm_kact a = {.M = M, .K = K, .f32 = x};
            tm_kbuf ws = {0};
            CHECK_EQ_INT(tm_kmatmul(k, cat, &a, y, &ws, pool, &err), TM_OK);
            for (int i = 0, n0 = 0; i < 3; n0 += rows[i], i++) {
                CHECK_EQ_INT(tm_kmatmul(k, part[i], &a, yp, &ws, pool, &err), TM_OK);
                int same = 1;
                for (int m = 0; m < M; m++)
                    same &= memcmp(y + (size_t)m * 72 + n0, yp + (size_t)m * rows[i], sizeof(float) * rows[i]) == 0;
                CHECKF(same, "%s concat %s M=%d: part %d differs", k->name, dtn(dts[d]), M, i);
            }
            tm_kbuf_free(&ws);
            free(x); free(y); free(yp);
        }
        tm_kpack_free(cat);
        for (int i = 0; i < 3; i++) {
            tm_kpack_free(part[i]);
            wbuf_free(&w[i]);
        }
    }
    /* parts of unlike K or dtype are refused, naming the result */
    wbuf a, b;
    wbuf_make(&a, TM_DT_Q8PC, 8, 64);
    wbuf_make(&b, TM_DT_Q8PC, 8, 128);
    const tm_tensor *ab[2] = {&a.t, &b.t};
    tm_kweight *bad = (tm_kweight *)1;
    tm_err err = {0};
    CHECK_EQ_INT(tm_kpack_concat(&bad, ab, 2, TM_KPACK_GEMV, "gate|up", &err), TM_E_INVALID);
    CHECK(bad == NULL && strstr(err.msg, "gate|up") && strstr(err.msg, "part 1"));
    wbuf_free(&a);
    wbuf_free(&b);
}

static void test_variant(const tm_kernels *k, tm_pool *pool)
{
    printf("variant %s\n", k->name);
    test_matmul(k, pool);
    test_pack_huge(k, pool);
    if (strcmp(k->name, "scalar") != 0) test_small_ops(k);
    test_glu(k, pool);
    test_bf16y(k, pool);
    test_glu_row_bf16(k);
    test_concat(k, pool);
}

/* tm_kgemv_run's guided split: every row in exactly one task, task starts
 * multiples of align, no task below the minimum but the last, and the
 * tasks shrink (large first, small last) */
typedef struct split_rec {
    int N, align, bad, ntasks;
    unsigned char *seen;
    int n0s[128], n1s[128];
} split_rec;

static void split_fn(void *ctx, int n0, int n1, int worker)
{
    (void)worker;
    split_rec *r = ctx;
    for (int n = n0; n < n1; n++) r->seen[n]++;
    int t = __atomic_fetch_add(&r->ntasks, 1, __ATOMIC_RELAXED);
    if (t < 128) {
        r->n0s[t] = n0;
        r->n1s[t] = n1;
    }
    if (n0 % r->align || n1 <= n0) __atomic_fetch_add(&r->bad, 1, __ATOMIC_RELAXED);
}

static void test_gemv_split(tm_pool *pool)
{
    static const int Ns[] = {1, 31, 33, 100, 896, 4864, 151936, 1 << 22};
    for (size_t i = 0; i < sizeof Ns / sizeof Ns[0]; i++)
        for (int align = 1; align <= 4; align += 3) {
            split_rec r = {.N = Ns[i], .align = align};
            r.seen = calloc((size_t)Ns[i], 1);
            tm_kgemv_run(Ns[i], align, 448, split_fn, &r, pool); /* K = 896 int4 rows: small N take halves */
            int once = 0, small = 0, maxlen = 0, lastlen = 0;
            for (int n = 0; n < Ns[i]; n++) once += r.seen[n] == 1;
            for (int t = 0; t < r.ntasks && t < 128; t++) {
                int len = r.n1s[t] - r.n0s[t];
                small += len < 32 && r.n1s[t] != Ns[i];
                if (len > maxlen) maxlen = len;
                if (r.n1s[t] == Ns[i]) lastlen = len;
            }
            CHECKF(once == Ns[i], "gemv split N=%d align %d: %d of %d rows in exactly one task", Ns[i], align, once, Ns[i]);
            CHECKF(r.bad == 0 && small == 0 && r.ntasks <= 64, "gemv split N=%d align %d: %d bad, %d small, %d tasks",
                   Ns[i], align, r.bad, small, r.ntasks);
            if (Ns[i] >= 4864) /* guided: the last task is a fraction of the first */
                CHECKF(lastlen * 4 <= maxlen, "gemv split N=%d: last task %d rows, largest %d", Ns[i], lastlen, maxlen);
            free(r.seen);
        }
}

/* tm_kgemm_run's split: every (row, panel) cell in exactly one task, every
 * task 1-16 panels of rows within one row block, the ranges no larger
 * further on (the pool hands tasks out in order), and, on the real models'
 * shapes, a task count the two workers divide evenly */
typedef struct gsplit_rec {
    int M, npan, mb, bad, ntasks;
    unsigned char *seen; /* [M][npan] */
    int *width;          /* [npan]: the panels of the range starting there (row block 0), else 0 */
    int maxp;            /* panels a task may take (tm_kgemm_run: 16) */
} gsplit_rec;

static void gsplit_fn(void *ctx, int m0, int m1, int p0, int p1, int worker)
{
    (void)worker;
    gsplit_rec *r = ctx;
    for (int m = m0; m < m1; m++)
        for (int p = p0; p < p1; p++) r->seen[(size_t)m * r->npan + p]++;
    __atomic_fetch_add(&r->ntasks, 1, __ATOMIC_RELAXED);
    if (m0 == 0 && p0 >= 0 && p0 < r->npan) r->width[p0] = p1 - p0;
    if (p1 <= p0 || p1 - p0 > r->maxp || m1 <= m0 || m0 % r->mb || m1 - m0 > r->mb || p1 > r->npan || m1 > r->M)
        __atomic_fetch_add(&r->bad, 1, __ATOMIC_RELAXED);
}

static void test_gemm_split(tm_pool *pool)
{
    /* M, N, rows per task, tasks expected on 2 workers (0: any) */
    static const int cases[][4] = {
        {512, 9728, 512, 20}, /* Qwen-0.5B gate|up: 19 tasks of 16 panels before */
        {512, 1152, 256, 8},  {512, 896, 256, 8},    {512, 3072, 256, 12}, {512, 2048, 256, 8},
        {512, 16384, 512, 32}, {64, 1152, 256, 8},   {40, 1000, 256, 0},   {600, 96, 256, 0},
        {1, 32, 256, 0},       {300, 4864, 128, 0},  {17, 288, 256, 0},    {512, 32 * 37, 512, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int M = cases[i][0], Np = (cases[i][1] + 31) / 32 * 32, mb = cases[i][2];
        gsplit_rec r = {M, Np / 32, mb, 0, 0, calloc((size_t)M * (Np / 32), 1), calloc((size_t)Np / 32, sizeof(int)), 16};
        CHECKF(r.seen && r.width, "gemm split %d x %d: allocation", M, cases[i][1]);
        if (!r.seen || !r.width) {
            free(r.seen);
            free(r.width);
            continue;
        }
        tm_kgemm_run(M, Np, mb, gsplit_fn, &r, pool);
        size_t once = 0, cells = (size_t)M * r.npan;
        for (size_t c = 0; c < cells; c++) once += r.seen[c] == 1;
        CHECKF(once == cells && r.bad == 0, "gemm split %d x %d (mb %d): %zu of %zu cells once, %d bad tasks", M,
               cases[i][1], mb, once, cells, r.bad);
        int grows = 0, prev = 1 << 30;
        for (int p = 0; p < r.npan; p++)
            if (r.width[p]) {
                grows += r.width[p] > prev;
                prev = r.width[p];
            }
        CHECKF(grows == 0, "gemm split %d x %d (mb %d): a range larger than the one before it", M, cases[i][1], mb);
        if (cases[i][3])
            CHECKF(r.ntasks == cases[i][3], "gemm split %d x %d (mb %d): %d tasks, want %d", M, cases[i][1], mb,
                   r.ntasks, cases[i][3]);
        free(r.seen);
        free(r.width);
    }
}

/* tm_kgemm_run_split: every (row, panel) cell in exactly one task, each task
 * within one row block, n_mb x min(workers x per_worker, panels) tasks whose
 * ranges differ by at most one panel; and the homes' task order */
static void test_gemm_split_n(tm_pool *pool)
{
    /* M, N, rows per task, ranges per worker */
    static const int cases[][4] = {{512, 9728, 512, 1}, {512, 4864, 512, 2}, {600, 4100, 512, 1},
                                   {40, 96, 512, 4},    {1, 32, 512, 1},     {1100, 8192, 512, 3}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int pooled = 0; pooled < 2; pooled++) {
            int M = cases[i][0], Np = (cases[i][1] + 31) / 32 * 32, mb = cases[i][2], pw = cases[i][3];
            int npan = Np / 32, nw = pooled ? tm_pool_size(pool) : 1, n_pt = nw * pw < npan ? nw * pw : npan;
            int n_mb = (M + mb - 1) / mb, minw = 1 << 30, maxw = 0;
            gsplit_rec r = {M, npan, mb, 0, 0, calloc((size_t)M * npan, 1), calloc((size_t)npan, sizeof(int)), npan};
            CHECKF(r.seen && r.width, "gemm split-N %d x %d: allocation", M, cases[i][1]);
            if (!r.seen || !r.width) {
                free(r.seen);
                free(r.width);
                continue;
            }
            tm_kgemm_run_split(M, Np, mb, pw, gsplit_fn, &r, pooled ? pool : NULL);
            size_t once = 0, cells = (size_t)M * npan;
            for (size_t c = 0; c < cells; c++) once += r.seen[c] == 1;
            for (int p = 0; p < npan; p++)
                if (r.width[p]) {
                    minw = r.width[p] < minw ? r.width[p] : minw;
                    maxw = r.width[p] > maxw ? r.width[p] : maxw;
                }
            CHECKF(once == cells && r.bad == 0 && r.ntasks == n_mb * n_pt && maxw - minw <= 1,
                   "gemm split-N %d x %d (mb %d, %d a worker, %d workers): %zu of %zu cells once, %d bad, %d tasks "
                   "(want %d), ranges %d-%d panels", M, cases[i][1], mb, pw, nw, once, cells, r.bad, r.ntasks,
                   n_mb * n_pt, minw, maxw);
            /* homed on 2 workers: worker w's own tasks, w, w + 2, ..., in order, walk the second half (w = 1) or
               the first of the panel ranges, each range over the row blocks in turn */
            if (pooled && nw == 2 && (n_mb * n_pt) % 2 == 0) {
                int bad = 0;
                for (int w = 0; w < 2; w++) {
                    int pi = w * n_pt / 2, mi = 0;
                    for (int t = w; t < n_mb * n_pt; t += 2) {
                        int b[4];
                        tm_ksplit_bounds(M, npan, mb, n_pt, 2, t, b);
                        bad += b[0] != mi * mb || b[2] != npan * pi / n_pt || b[3] != npan * (pi + 1) / n_pt;
                        if (++mi == n_mb) mi = 0, pi++;
                    }
                }
                CHECKF(bad == 0, "gemm split-N %d x %d: %d tasks out of their home's order", M, cases[i][1], bad);
            }
            free(r.seen);
            free(r.width);
        }
}

int main(void)
{
    const tm_cpu *cpu = tm_cpu_get();
    tm_pool *pool;
    tm_err err = {0};
    CHECK_EQ_INT(tm_pool_init(&pool, NULL, 2, 0, &err), TM_OK);
    test_pack_and_errors();
    test_q4_layout();
    test_gemv_split(pool);
    test_gemm_split(pool);
    test_gemm_split_n(pool);
    test_peak(pool);
    test_measure(pool);
    test_huge_alloc();
    for (const char *const *v = tm_kernels_variants(); *v; v++) {
        tm_kernels k;
        if (tm_kernels_select(*v, &k, &err) != TM_OK) {
            if (strcmp(*v, "amx") == 0)
                printf("SKIP: no AMX on this CPU (%s): AMX GEMM tests not run (attention: test_attn)\n", cpu->amx_note);
            else
                printf("SKIP: %s: %s\n", *v, err.msg);
            continue;
        }
        test_variant(&k, pool);
    }
    /* the avx512 int4 GEMV's other build: the variant ran the one this CPU
     * picks (GFNI where it has it); the shift-and-and build runs everywhere */
    tm_kernels k5;
    if (tm_kernels_select("avx512", &k5, &err) == TM_OK) {
        int gfni = k5.gemv_q4 == tm_kgemv_q4_avx512_gfni;
        CHECK_EQ_INT(gfni, cpu->gfni);
        k5.gemv_q4 = gfni ? tm_kgemv_q4_avx512 : tm_kgemv_q4_avx512_gfni;
        k5.name = gfni ? "avx512 (int4 GEMV without GFNI)" : "avx512 (int4 GEMV with GFNI)";
        if (gfni) test_gemv_q4(&k5, pool);
        else printf("SKIP: no GFNI on this CPU: the int4 GEMV's GFNI build not run\n");
    }
    /* the AMX kernels' logic wherever AVX-512 runs: tiles emulated in C (amx_emu.h) */
    tm_kernels emu;
    if (tm_kernels_select("amx-emu", &emu, &err) == TM_OK) test_variant(&emu, pool);
    else printf("SKIP: amx-emu (emulated AMX tiles) needs AVX-512: %s\n", err.msg);
    tm_pool_free(pool);
    return th_done("test_kernels");
}
