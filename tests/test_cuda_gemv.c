/* tests/test_cuda_gemv.c: the CUDA engine's packed weights (engine/cuda/cu_mat.c, cu_gemv.cu) against a
 * scalar reference, on random shapes (odd row counts, K of 1 to 9 chunks):
 *   - every packed encoding (int4 g64 / g32 / per channel, int8 per channel, int6 g64 widened to int8),
 *     the matrix stacked from parts of two tensors (as q|k|v and gate|up are);
 *   - the GEMV for 1 to 8 sequences and more (groups of 8), against sum_k w x in double with w the
 *     package's dequantized value and x the bf16 input: the GEMV's weights are exact, so the bound is
 *     f32 rounding;
 *   - the product through the dequantized bf16 copy and cuBLAS (gemv_max 0), against the same sum with
 *     w rounded to bf16;
 *   - the FFN's activation fused into the GEMV (cu_mat_mul_act: gated SiLU over a stacked gate|up weight
 *     with biases, GELU not gated), and its fallback (the product, then the activation pass), against
 *     the reference's activation in double of the double sums, to bf16's rounding;
 *   - long rows whose K the GEMV splits over several warps, each split forced (cu_gemv_force_ks);
 *   - the indexed launches of a mixture-of-experts step (cu_gemv_ix: each pair's expert from a stack), the
 *     f32 product and the gated activation, every lane split (cu_gemv_force_lg) and K split forced;
 *   - on sm_90 and later, the products launched with programmatic dependent launch (cu_set_pdl(1), the
 *     engine's default there);
 *   - what cannot stay packed: plain weights, parts of two encodings, int8 rows of K % 16 != 0.
 * Without a CUDA build (make CUDA=1) or a GPU it prints SKIP and checks nothing. */
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef TM_CUDA
#include "engine/cuda/cu_mat.h"
#include "engine/cuda/cuda-impl.h"
#include "engine/ref/ref-impl.h"
#include "quant/quant.h"

static uint64_t rng = 88172645463325252ull;
static double urand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* a quantized tensor [N][K] of random weights (owned buffers in *data, *scales) */
static tm_tensor qtensor(tm_dtype enc, int N, int K, void **data, void **scales)
{
    float *w = malloc(sizeof(float) * (size_t)N * K);
    for (size_t i = 0; i < (size_t)N * K; i++) w[i] = (float)((urand() - 0.5) * (urand() < 0.02 ? 1.0 : 0.1));
    *data = malloc(tm_quant_data_bytes(enc, N, K));
    *scales = malloc(tm_quant_scale_count(enc, N, K) * tm_quant_scale_bytes(enc));
    tm_err err = {0};
    CHECKF(tm_quant_quantize(enc, w, N, K, *data, *scales, NULL, &err) == TM_OK, "%s", err.msg);
    free(w);
    return (tm_tensor){.name = "w", .dtype = enc, .ndim = 2, .shape = {N, K}, .data = *data,
                       .nbytes = tm_quant_data_bytes(enc, N, K), .scales = *scales};
}

/* y [B][N] on the GPU of x [B][K] through m */
static void run(const cu_mm *mm, const cu_mat *m, const uint16_t *x, int B, float *y)
{
    uint16_t *dx = NULL;
    float *dy = NULL;
    tm_err err = {0};
    CHECK(cudaMalloc((void **)&dx, sizeof(uint16_t) * (size_t)B * m->K) == cudaSuccess);
    CHECK(cudaMalloc((void **)&dy, sizeof(float) * (size_t)B * m->N) == cudaSuccess);
    CHECK(cudaMemcpy(dx, x, sizeof(uint16_t) * (size_t)B * m->K, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECKF(cu_mat_mul(mm, dy, dx, m, B, &err) == TM_OK, "%s", err.msg);
    CHECK(cudaStreamSynchronize(mm->st) == cudaSuccess);
    CHECK(cudaMemcpy(y, dy, sizeof(float) * (size_t)B * m->N, cudaMemcpyDeviceToHost) == cudaSuccess);
    cudaFree(dx);
    cudaFree(dy);
}

static int bf16w; /* the reference rounds w to bf16 (the cuBLAS path) */

/* y [B][N] against the double sums; a bound of tol times sum |w x| per element */
static void compare(const char *what, const float *w, int N, int K, const uint16_t *x, int B, const float *y, double tol)
{
    double worst = 0;
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++) {
            double s = 0, a = 0;
            for (int k = 0; k < K; k++) {
                double wv = bf16w ? tm_bf16_to_f32(tm_f32_to_bf16(w[(size_t)n * K + k])) : w[(size_t)n * K + k];
                double xv = tm_bf16_to_f32(x[(size_t)b * K + k]);
                s += wv * xv, a += fabs(wv * xv);
            }
            double e = fabs(y[(size_t)b * N + n] - s) / (a + 1e-30);
            worst = e > worst ? e : worst;
        }
    CHECKF(worst <= tol, "%s: worst error %.3e of sum |w x| (bound %.1e)", what, worst, tol);
}

static void one_case(const cu_mm *mm, tm_dtype enc, int N, int K, int B)
{
    int N1 = N / 3; /* two parts: rows [1, 1 + N1) of tensor a, then rows [0, N - N1) of tensor b */
    void *da, *sa, *db, *sb;
    tm_tensor a = qtensor(enc, N1 + 2, K, &da, &sa), b = qtensor(enc, N - N1, K, &db, &sb);
    cu_part parts[2] = {{&a, 1, N1}, {&b, 0, N - N1}};
    cu_mat m;
    tm_err err = {0};
    int rc = cu_mat_up_packed(&m, mm->st, parts, 2, K, &err);
    CHECKF(rc == TM_OK, "%s %d x %d: packed upload %d (%s)", tm_dtype_name(enc), N, K, rc, err.msg);
    if (rc != TM_OK) return;
    CHECK(m.bf == NULL && m.N == N && m.K == K && m.q.enc == (enc == TM_DT_Q8PC || enc == TM_DT_Q6G64 ? 8 : 4));
    float *w = malloc(sizeof(float) * (size_t)N * K), *y = malloc(sizeof(float) * (size_t)B * N);
    for (int n = 0; n < N; n++) {
        const tm_tensor *t = n < N1 ? &a : &b;
        tm_quant_dequant_row(enc, t->data, t->scales, K, n < N1 ? n + 1 : n - N1, w + (size_t)n * K);
    }
    uint16_t *x = malloc(sizeof(uint16_t) * (size_t)B * K);
    for (size_t i = 0; i < (size_t)B * K; i++) x[i] = tm_f32_to_bf16((float)(urand() * 4 - 2));
    char what[128];
    snprintf(what, sizeof what, "%s %d x %d, B %d, GEMV", tm_dtype_name(enc), N, K, B);
    cu_mm g = *mm;
    g.gemv_max = 64;
    bf16w = 0;
    run(&g, &m, x, B, y);
    compare(what, w, N, K, x, B, y, 1e-5);
    snprintf(what, sizeof what, "%s %d x %d, B %d, dequantized + cuBLAS", tm_dtype_name(enc), N, K, B);
    g.gemv_max = 0;
    bf16w = 1;
    run(&g, &m, x, B, y);
    compare(what, w, N, K, x, B, y, 1e-5);
    cu_mat_free(&m);
    free(w), free(y), free(x), free(da), free(sa), free(db), free(sb);
}

/* g [B][F] = act of x · wᵀ through cu_mat_mul_act (gated: w [2F][K] gate rows then up rows, with biases) */
static void act_case(const cu_mm *mm, tm_dtype enc, int F, int K, int B, int gated, tm_act act, int with_bias)
{
    int N = gated ? 2 * F : F;
    void *d, *sc;
    tm_tensor t = qtensor(enc, N, K, &d, &sc);
    cu_part part = {&t, 0, N};
    cu_mat m;
    tm_err err = {0};
    CHECK(cu_mat_up_packed(&m, mm->st, &part, 1, K, &err) == TM_OK);
    float *w = malloc(sizeof(float) * (size_t)N * K), *bias = malloc(sizeof(float) * N);
    for (int n = 0; n < N; n++)
        tm_quant_dequant_row(enc, t.data, t.scales, K, n, w + (size_t)n * K), bias[n] = with_bias ? (float)(urand() - 0.5) : 0.f;
    uint16_t *x = malloc(sizeof(uint16_t) * (size_t)B * K), *g = malloc(sizeof(uint16_t) * (size_t)B * F), *dx, *dg;
    for (size_t i = 0; i < (size_t)B * K; i++) x[i] = tm_f32_to_bf16((float)(urand() * 4 - 2));
    float *db, *gu;
    CHECK(cudaMalloc((void **)&dx, sizeof(uint16_t) * (size_t)B * K) == cudaSuccess &&
          cudaMalloc((void **)&dg, sizeof(uint16_t) * (size_t)B * F) == cudaSuccess &&
          cudaMalloc((void **)&db, sizeof(float) * N) == cudaSuccess &&
          cudaMalloc((void **)&gu, sizeof(float) * (size_t)B * N) == cudaSuccess);
    cudaMemcpy(dx, x, sizeof(uint16_t) * (size_t)B * K, cudaMemcpyHostToDevice);
    cudaMemcpy(db, bias, sizeof(float) * N, cudaMemcpyHostToDevice);
    for (int path = 0; path < 2; path++) { /* the GEMV's epilogue, then the product and the pass */
        cu_mm c = *mm;
        c.gemv_max = path ? 0 : 64;
        cu_gemv_epi ep = {.gated = gated, .act = act, .F = F, .ldg = F, .b = with_bias ? db : NULL, .g = dg};
        cudaMemset(dg, 0xff, sizeof(uint16_t) * (size_t)B * F);
        CHECKF(cu_mat_mul_act(&c, &ep, dx, &m, B, gu, &err) == TM_OK, "%s", err.msg);
        CHECK(cudaStreamSynchronize(c.st) == cudaSuccess);
        cudaMemcpy(g, dg, sizeof(uint16_t) * (size_t)B * F, cudaMemcpyDeviceToHost);
        double worst = 0, big = 1e-3;
        float *ref = malloc(sizeof(float) * (size_t)B * F);
        for (int b = 0; b < B; b++)
            for (int f = 0; f < F; f++) {
                double y[2] = {0, 0};
                for (int h = 0; h < (gated ? 2 : 1); h++)
                    for (int k = 0; k < K; k++) {
                        double wv = w[((size_t)h * F + f) * K + k];
                        if (path) wv = tm_bf16_to_f32(tm_f32_to_bf16((float)wv));
                        y[h] += wv * tm_bf16_to_f32(x[(size_t)b * K + k]);
                    }
                float r = gated ? ref_glu(act, (float)(y[0] + bias[f]), (float)(y[1] + bias[F + f]))
                                : ref_act(act, (float)(y[0] + bias[f]));
                ref[(size_t)b * F + f] = r;
                big = fabs(r) > big ? fabs(r) : big;
            }
        for (size_t i = 0; i < (size_t)B * F; i++) {
            double e = fabs(tm_bf16_to_f32(g[i]) - ref[i]) - fabs(ref[i]) / 256;
            worst = e > worst ? e : worst;
        }
        CHECKF(worst <= 1e-4 * big, "%s %s F %d K %d B %d (%s): error past bf16's rounding %.3e of %.3e",
               tm_dtype_name(enc), gated ? "gated" : "not gated", F, K, B, path ? "fallback" : "GEMV epilogue", worst, big);
        free(ref);
    }
    cu_mat_free(&m);
    cudaFree(dx), cudaFree(dg), cudaFree(db), cudaFree(gu);
    free(w), free(bias), free(x), free(g), free(d), free(sc);
}

/* The indexed launches (cu_gemv_ix, a mixture-of-experts decode step): a stack of E experts [E][Ne][K], P pairs,
 * pair p expert sel[p] (repeats allowed) over x row p / xdiv: the f32 product (cu_gemv_ix_q) and the gated
 * activation with biases (cu_gemv_ix_act), against the double sums, each lane split and K split forced */
static void ix_case(cudaStream_t st, tm_dtype enc, int E, int F, int K, int P, int xdiv)
{
    const int Ne = 2 * F, X = (P + xdiv - 1) / xdiv;
    void *d, *sc;
    tm_tensor t = qtensor(enc, E * Ne, K, &d, &sc);
    cu_part part = {&t, 0, E * Ne};
    cu_mat m;
    tm_err err = {0};
    CHECK(cu_mat_up_packed(&m, st, &part, 1, K, &err) == TM_OK);
    float *w = malloc(sizeof(float) * (size_t)E * Ne * K), *bias = malloc(sizeof(float) * (size_t)E * Ne);
    float *y = malloc(sizeof(float) * (size_t)P * Ne);
    uint16_t *x = malloc(sizeof(uint16_t) * (size_t)X * K), *g = malloc(sizeof(uint16_t) * (size_t)P * F);
    int sel[64];
    for (int r = 0; r < E * Ne; r++)
        tm_quant_dequant_row(enc, t.data, t.scales, K, r, w + (size_t)r * K), bias[r] = (float)(urand() - 0.5);
    for (size_t i = 0; i < (size_t)X * K; i++) x[i] = tm_f32_to_bf16((float)(urand() * 4 - 2));
    for (int p = 0; p < P; p++) sel[p] = (int)(urand() * E) % E;
    uint16_t *dx, *dg;
    float *dy, *db;
    int *dsel;
    CHECK(cudaMalloc((void **)&dx, sizeof(uint16_t) * (size_t)X * K) == cudaSuccess &&
          cudaMalloc((void **)&dg, sizeof(uint16_t) * (size_t)P * F) == cudaSuccess &&
          cudaMalloc((void **)&dy, sizeof(float) * (size_t)P * Ne) == cudaSuccess &&
          cudaMalloc((void **)&db, sizeof(float) * (size_t)E * Ne) == cudaSuccess &&
          cudaMalloc((void **)&dsel, sizeof(int) * (size_t)P) == cudaSuccess);
    cudaMemcpy(dx, x, sizeof(uint16_t) * (size_t)X * K, cudaMemcpyHostToDevice);
    cudaMemcpy(db, bias, sizeof(float) * (size_t)E * Ne, cudaMemcpyHostToDevice);
    cudaMemcpy(dsel, sel, sizeof(int) * (size_t)P, cudaMemcpyHostToDevice);
    cu_mat e0 = cu_mat_view(&m, 0, Ne), e1 = cu_mat_view(&m, 1, Ne);
    cu_gemv_ix ix = {.sel = dsel, .xdiv = xdiv, .qstride = (size_t)(e1.q.q - e0.q.q),
                     .sstride = (size_t)((const uint8_t *)e1.q.s - (const uint8_t *)e0.q.s), .bstride = (size_t)Ne};
    /* ref [P][Ne] double sums and sum |w x| */
    double *ref = malloc(sizeof(double) * (size_t)P * Ne), *mag = malloc(sizeof(double) * (size_t)P * Ne);
    for (int p = 0; p < P; p++)
        for (int n = 0; n < Ne; n++) {
            double s = 0, a = 0;
            for (int k = 0; k < K; k++) {
                double v = (double)w[((size_t)sel[p] * Ne + n) * K + k] * tm_bf16_to_f32(x[(size_t)(p / xdiv) * K + k]);
                s += v, a += fabs(v);
            }
            ref[(size_t)p * Ne + n] = s, mag[(size_t)p * Ne + n] = a;
        }
    int kss[] = {0, 1, 2, 4}, lgs[] = {0, 8, 16, 32};
    for (int ki = 0; ki < 4; ki++)
        for (int li = 0; li < 4; li++) {
            cu_gemv_force_ks(kss[ki]);
            cu_gemv_force_lg(lgs[li]);
            cudaMemset(dy, 0xff, sizeof(float) * (size_t)P * Ne);
            cudaMemset(dg, 0xff, sizeof(uint16_t) * (size_t)P * F);
            cu_gemv_ix_q(st, &e0.q, &ix, dx, K, P, dy, Ne);
            cu_gemv_epi ep = {.gated = 1, .act = TM_ACT_SILU, .F = F, .ldg = F, .b = db, .g = dg};
            cu_gemv_ix_act(st, &e0.q, &ix, dx, K, P, &ep);
            CHECK(cudaStreamSynchronize(st) == cudaSuccess);
            cudaMemcpy(y, dy, sizeof(float) * (size_t)P * Ne, cudaMemcpyDeviceToHost);
            cudaMemcpy(g, dg, sizeof(uint16_t) * (size_t)P * F, cudaMemcpyDeviceToHost);
            double worst = 0, worst_g = 0, big = 1e-3;
            for (size_t i = 0; i < (size_t)P * Ne; i++) {
                double e = fabs(y[i] - ref[i]) / (mag[i] + 1e-30);
                worst = e != e ? INFINITY : fmax(worst, e); /* a NaN (an unwritten row) fails */
            }
            for (int p = 0; p < P; p++)
                for (int f = 0; f < F; f++) {
                    const float *b = bias + (size_t)sel[p] * Ne;
                    double r = ref_glu(TM_ACT_SILU, (float)(ref[(size_t)p * Ne + f] + b[f]),
                                       (float)(ref[(size_t)p * Ne + F + f] + b[F + f]));
                    double e = fabs(tm_bf16_to_f32(g[(size_t)p * F + f]) - r) - fabs(r) / 256;
                    big = fabs(r) > big ? fabs(r) : big;
                    worst_g = e != e ? INFINITY : fmax(worst_g, e);
                }
            CHECKF(worst <= 1e-5, "indexed %s F %d K %d P %d (ks %d, lanes %d): worst error %.3e of sum |w x|",
                   tm_dtype_name(enc), F, K, P, kss[ki], lgs[li], worst);
            CHECKF(worst_g <= 1e-4 * big, "indexed gated %s F %d K %d P %d (ks %d, lanes %d): error past bf16's "
                   "rounding %.3e of %.3e", tm_dtype_name(enc), F, K, P, kss[ki], lgs[li], worst_g, big);
        }
    cu_gemv_force_ks(0);
    cu_gemv_force_lg(0);
    cu_mat_free(&m);
    cudaFree(dx), cudaFree(dg), cudaFree(dy), cudaFree(db), cudaFree(dsel);
    free(w), free(bias), free(y), free(x), free(g), free(d), free(sc), free(ref), free(mag);
}

int main(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("SKIP cuda gemv: no CUDA device\n");
        return th_done("test_cuda_gemv");
    }
    cu_mm mm = {0};
    CHECK(cudaStreamCreate(&mm.st) == cudaSuccess && cublasCreate(&mm.blas) == CUBLAS_STATUS_SUCCESS);
    cublasSetStream(mm.blas, mm.st);
    CHECK(cudaMalloc((void **)&mm.dq, (size_t)2 << 20) == cudaSuccess);
    tm_dtype encs[] = {TM_DT_Q4G64, TM_DT_Q4G32, TM_DT_Q4PC, TM_DT_Q8PC, TM_DT_Q6G64};
    int shapes[][2] = {{1, 64}, {37, 128}, {129, 192}, {300, 320}, {17, 576}, {1031, 64}, {45, 448}, {33, 896}};
    int batches[] = {1, 2, 3, 5, 8, 9, 17};
    for (size_t e = 0; e < sizeof encs / sizeof encs[0]; e++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
                one_case(&mm, encs[e], shapes[s][0], shapes[s][1], batches[b]);
    /* the FFN's activation fused */
    int acts[][3] = {{37, 128, 1}, {300, 320, 3}, {129, 64, 9}};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        act_case(&mm, TM_DT_Q4G64, acts[i][0], acts[i][1], acts[i][2], 1, TM_ACT_SILU, 1);
        act_case(&mm, TM_DT_Q8PC, acts[i][0], acts[i][1], acts[i][2], 0, TM_ACT_GELU_TANH, 1);
    }
    /* no biases; GPT-OSS's clamped gated unit, squared ReLU, exact GELU */
    act_case(&mm, TM_DT_Q4G32, 96, 128, 5, 1, TM_ACT_SWIGLU_OAI, 0);
    act_case(&mm, TM_DT_Q6G64, 70, 192, 2, 0, TM_ACT_RELU2, 0);
    act_case(&mm, TM_DT_Q4PC, 33, 96, 8, 1, TM_ACT_GELU, 1);
    /* an FFN weight of the wrong row count is refused */
    {
        void *d, *sc;
        tm_tensor t = qtensor(TM_DT_Q4G64, 10, 64, &d, &sc);
        cu_part part = {&t, 0, 10};
        cu_mat m;
        tm_err err = {0};
        CHECK(cu_mat_up_packed(&m, mm.st, &part, 1, 64, &err) == TM_OK);
        cu_gemv_epi ep = {.gated = 1, .act = TM_ACT_SILU, .F = 6, .ldg = 6};
        CHECK(cu_mat_mul_act(&mm, &ep, NULL, &m, 1, NULL, &err) == TM_E_INVALID && strstr(err.msg, "10 rows"));
        cu_mat_free(&m);
        free(d), free(sc);
    }
    /* K long enough that the GEMV splits it over warps (cu_gemv.cu's gemv_ks) and a lane's chunks run
       out within a batch of loads: each warp count forced in turn, then the kernel's own choice */
    int ks_list[] = {1, 2, 4, 8, 0}, big[][2] = {{67, 2112}, {6, 8192}, {130, 4864}}, bigb[] = {1, 2, 3, 8};
    for (size_t k = 0; k < sizeof ks_list / sizeof ks_list[0]; k++) {
        cu_gemv_force_ks(ks_list[k]);
        for (size_t s = 0; s < sizeof big / sizeof big[0]; s++)
            for (size_t b = 0; b < sizeof bigb / sizeof bigb[0]; b++) {
                one_case(&mm, TM_DT_Q4G64, big[s][0], big[s][1], bigb[b]);
                one_case(&mm, TM_DT_Q6G64, big[s][0], big[s][1], bigb[b]);
            }
        act_case(&mm, TM_DT_Q4G32, 70, 2048, 1 + (int)k, 1, TM_ACT_SILU, 1);
        act_case(&mm, TM_DT_Q8PC, 45, 4096, 2, 0, TM_ACT_GELU_TANH, 1);
    }
    /* the indexed launches: rows of 1 to 64 chunks (a lane group's chunks running out mid-batch), odd F */
    ix_case(mm.st, TM_DT_Q4G64, 5, 37, 768, 8, 8);
    ix_case(mm.st, TM_DT_Q4G64, 4, 24, 2048, 6, 1);
    ix_case(mm.st, TM_DT_Q4G32, 3, 9, 96, 5, 2);
    ix_case(mm.st, TM_DT_Q8PC, 6, 17, 400, 7, 1);
    ix_case(mm.st, TM_DT_Q6G64, 3, 33, 1344, 4, 4);
    /* launched with programmatic dependent launch (engine/cuda/cu_launch.cuh: the engine's default on
       sm_90 and later; the first weight loads before the wait) */
    struct cudaDeviceProp dp;
    if (cudaGetDeviceProperties(&dp, 0) == cudaSuccess && dp.major >= 9) {
        cu_set_pdl(1);
        int pb[] = {1, 3, 8};
        for (size_t e = 0; e < sizeof encs / sizeof encs[0]; e++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (size_t b = 0; b < sizeof pb / sizeof pb[0]; b++) one_case(&mm, encs[e], shapes[s][0], shapes[s][1], pb[b]);
        act_case(&mm, TM_DT_Q4G64, 300, 320, 3, 1, TM_ACT_SILU, 1);
        cu_gemv_force_ks(4);
        one_case(&mm, TM_DT_Q4G64, 130, 4864, 2);
        cu_gemv_force_ks(0);
        ix_case(mm.st, TM_DT_Q4G64, 5, 37, 768, 8, 8);
        cu_set_pdl(0);
    } else {
        printf("programmatic dependent launch: not on this GPU (sm_%d%d)\n", dp.major, dp.minor);
    }
    /* int4 rows of 32 (one chunk, no group of 64): g32 and per channel */
    one_case(&mm, TM_DT_Q4G32, 45, 32, 4);
    one_case(&mm, TM_DT_Q4PC, 45, 96, 3);
    /* what stays bf16: a plain weight, two encodings, int8 rows of K % 16 != 0 */
    void *d1, *s1, *d2, *s2;
    tm_tensor q4 = qtensor(TM_DT_Q4G64, 8, 64, &d1, &s1), q8 = qtensor(TM_DT_Q8PC, 8, 40, &d2, &s2);
    tm_tensor q8b = q8;
    q8b.shape[1] = 64; /* same K as q4, to reach the encoding check */
    float plain[8 * 64] = {0};
    tm_tensor f = {.name = "f", .dtype = TM_DT_F32, .ndim = 2, .shape = {8, 64}, .data = plain, .nbytes = sizeof plain};
    cu_mat m;
    tm_err err = {0};
    cu_part pf = {&f, 0, 8}, mix[2] = {{&q4, 0, 8}, {&q8b, 0, 8}}, odd = {&q8, 0, 8}, past = {&q4, 4, 8};
    CHECK(cu_mat_up_packed(&m, mm.st, &pf, 1, 64, &err) == 1 && m.bf == NULL && m.q.q == NULL);
    CHECK(cu_mat_up_packed(&m, mm.st, mix, 2, 64, &err) == 1);
    CHECK(cu_mat_up_packed(&m, mm.st, &odd, 1, 40, &err) == 1);
    CHECK(cu_mat_up_packed(&m, mm.st, &past, 1, 64, &err) == TM_E_INVALID && strstr(err.msg, "rows 4..12 of 8"));
    free(d1), free(s1), free(d2), free(s2);
    cudaFree(mm.dq);
    cublasDestroy(mm.blas);
    cudaStreamDestroy(mm.st);
    return th_done("test_cuda_gemv");
}
#else
int main(void)
{
    printf("SKIP cuda gemv: not in this build (make CUDA=1)\n");
    return th_done("test_cuda_gemv");
}
#endif
