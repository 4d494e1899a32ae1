/* tools/cu_gemv_bench.c: the CUDA engine's decode GEMV (engine/cuda/cu_gemv.cu) on its own, by shape:
 * the time of one product and the rate at which it streams the packed weights, against the GPU's copy
 * rate measured beside it. The shapes a decode step of the two benchmark models runs (make CUDA=1 builds
 * it as build/cu_gemv_bench; a measurement tool, not a test: tests/test_cuda_gemv.c checks the results).
 *
 *   build/cu_gemv_bench [-b B,...] [-k KS,...] [-l LG,...] [-r REPS] [-p 0|1] [NAME:ENC:N:K[:gated][:ixP] ...]
 *
 * ENC is the package's encoding name (int4g64, int4g32, int4pc, int8, int6g64); gated runs the FFN's
 * fused form (N = 2F rows of gate then up, the activation's bf16 out); ixP the indexed launch of a
 * mixture-of-experts layer (cu_gemv_ix: P pairs, each one expert of a stack of 128 drawn at random, one x
 * row each; B is then P). KS forces the GEMV's warps a row set (cu_gemv_force_ks; 0 = the kernel's own
 * choice), LG an indexed launch's lanes a row set (cu_gemv_force_lg: 8, 16, 32; 0 = its own choice). Without shapes: Llama-3.2-1B's and Qwen2.5-0.5B's
 * (q|k|v, o, gate|up, down, the int6 head widened to int8 g64 as the engine binds it). -p 1 launches
 * with programmatic dependent launch (engine/cuda/cu_launch.cuh), so each product's first weight loads
 * overlap the one before (default 0: plain launches).
 *
 * Each product runs in a CUDA graph of 32 launches over copies of the matrix that together exceed
 * 256 MiB, so every launch reads its weight from HBM, as a decode step's layers do (an H200's L2 holds
 * 50 MB: one matrix alone would stay there); the time is the median of REPS replays (default 15) over
 * 32. GB/s counts the packed bytes and scales read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "core/tensor.h"
#include "engine/cuda/cu_mat.h"
#include "engine/cuda/cuda-impl.h"
#include "model/model.h"
#include "quant/quant.h"

#define LAUNCHES 32
#define IX_E 128 /* experts in an indexed shape's stack */

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int die(const char *what)
{
    fprintf(stderr, "cu_gemv_bench: %s\n", what);
    return 1;
}

/* a quantized [N][K] weight: 64 rows of random weights quantized, repeated (the values do not change
 * the time); *data, *scales owned by the caller */
static int make_weight(tm_dtype enc, int N, int K, tm_tensor *t, void **data, void **scales)
{
    const int R = N < 64 ? N : 64;
    float *w = malloc(sizeof(float) * (size_t)R * K);
    size_t db = tm_quant_data_bytes(enc, R, K), sb = tm_quant_scale_count(enc, R, K) * tm_quant_scale_bytes(enc);
    size_t dn = tm_quant_data_bytes(enc, N, K), sn = tm_quant_scale_count(enc, N, K) * tm_quant_scale_bytes(enc);
    void *d1 = malloc(db), *s1 = malloc(sb);
    *data = malloc(dn), *scales = malloc(sn);
    if (!w || !d1 || !s1 || !*data || !*scales) return die("out of memory");
    srand(7);
    for (size_t i = 0; i < (size_t)R * K; i++) w[i] = (float)rand() / RAND_MAX - 0.5f;
    tm_err err = {0};
    if (tm_quant_quantize(enc, w, R, K, d1, s1, NULL, &err) != TM_OK) return die(err.msg);
    for (size_t o = 0; o < dn; o += db) memcpy((char *)*data + o, d1, dn - o < db ? dn - o : db);
    for (size_t o = 0; o < sn; o += sb) memcpy((char *)*scales + o, s1, sn - o < sb ? sn - o : sb);
    free(w), free(d1), free(s1);
    *t = (tm_tensor){.name = "w", .dtype = enc, .ndim = 2, .shape = {N, K}, .data = *data, .nbytes = dn, .scales = *scales};
    return 0;
}

typedef struct shape {
    char name[32];
    tm_dtype enc;
    int N, K, gated, P; /* P > 0: indexed, P of IX_E experts a launch */
} shape;

static int parse_shape(const char *s, shape *o)
{
    char enc[32] = "", rest[64] = "";
    memset(o, 0, sizeof *o);
    if (sscanf(s, "%31[^:]:%31[^:]:%d:%d%63s", o->name, enc, &o->N, &o->K, rest) < 4 || o->N < 1 || o->K < 1) return -1;
    int e = tm_dtype_from_name(enc);
    o->enc = (tm_dtype)e;
    for (char *t = strtok(rest, ":"); t; t = strtok(NULL, ":")) {
        if (!strcmp(t, "gated")) o->gated = 1;
        else if (t[0] == 'i' && t[1] == 'x' && (o->P = atoi(t + 2)) >= 1 && o->P <= IX_E) continue;
        else return -1;
    }
    return e < 0 || (o->gated && o->N % 2) ? -1 : 0;
}

static int list(const char *s, int *v, int max)
{
    int n = 0;
    for (char *e; *s && n < max; s = *e ? e + 1 : e) v[n++] = (int)strtol(s, &e, 10);
    return n;
}

/* seconds of one graph replay (median of reps) */
static double time_graph(cudaStream_t st, cudaGraphExec_t gx, int reps)
{
    cudaEvent_t a, b;
    cudaEventCreate(&a), cudaEventCreate(&b);
    double t[256];
    for (int i = 0; i < 3; i++) cudaGraphLaunch(gx, st);
    for (int i = 0; i < reps; i++) {
        cudaEventRecord(a, st);
        cudaGraphLaunch(gx, st);
        cudaEventRecord(b, st);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        t[i] = ms * 1e-3;
    }
    cudaEventDestroy(a), cudaEventDestroy(b);
    qsort(t, (size_t)reps, sizeof t[0], cmp_d);
    return t[reps / 2];
}

int main(int argc, char **argv)
{
    int bs[16] = {1, 8}, nb = 2, kss[8] = {0}, nks = 1, lgs[4] = {0}, nlg = 1, reps = 15, ns = 0, pdl = 0;
    shape sh[64];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-b") && i + 1 < argc) nb = list(argv[++i], bs, 16);
        else if (!strcmp(argv[i], "-k") && i + 1 < argc) nks = list(argv[++i], kss, 8);
        else if (!strcmp(argv[i], "-l") && i + 1 < argc) nlg = list(argv[++i], lgs, 4);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-p") && i + 1 < argc) pdl = atoi(argv[++i]) != 0;
        else if (ns < 64 && parse_shape(argv[i], &sh[ns]) == 0) ns++;
        else {
            fprintf(stderr, "usage: cu_gemv_bench [-b B,...] [-k KS,...] [-l LG,...] [-r REPS] [-p 0|1] "
                            "[NAME:ENC:N:K[:gated][:ixP] ...]\n"
                            "cu_gemv_bench: not understood: '%s'\n", argv[i]);
            return 2;
        }
    }
    reps = reps < 1 ? 1 : reps > 256 ? 256 : reps;
    if (!ns) {
        const char *def[] = {"l.qkv:int4g64:3072:2048", "l.o:int4g64:2048:2048", "l.gu:int4g64:16384:2048:gated",
                             "l.down:int4g64:2048:8192", "l.head:int6g64:128256:2048", "q.qkv:int4g64:1152:896",
                             "q.o:int4g64:896:896", "q.gu:int4g64:9728:896:gated", "q.down:int4g64:896:4864",
                             "q.head:int6g64:151936:896"};
        for (size_t i = 0; i < sizeof def / sizeof def[0]; i++) parse_shape(def[i], &sh[ns++]);
    }
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) return die("no CUDA device");
    struct cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    printf("device: %s, %d SMs; programmatic dependent launch %s\n", p.name, p.multiProcessorCount,
           pdl ? "on" : "off");
    cu_set_pdl(pdl && p.major >= 9);
    cudaStream_t st;
    cudaStreamCreate(&st);
    cu_mm mm = {.st = st, .gemv_max = 64};

    /* the copy rate: 256 MiB device to device, bytes read + written */
    {
        size_t bytes = (size_t)256 << 20;
        void *a = NULL, *b = NULL;
        if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) return die("cudaMalloc");
        cudaGraph_t g;
        cudaGraphExec_t gx;
        cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
        for (int i = 0; i < 4; i++) cudaMemcpyAsync(i & 1 ? a : b, i & 1 ? b : a, bytes, cudaMemcpyDeviceToDevice, st);
        cudaStreamEndCapture(st, &g);
        cudaGraphInstantiate(&gx, g, 0);
        double t = time_graph(st, gx, reps);
        printf("copy: %.0f GB/s (read + written)\n", 4 * 2.0 * bytes / t * 1e-9);
        cudaGraphExecDestroy(gx), cudaGraphDestroy(g);
        cudaFree(a), cudaFree(b);
    }
    printf("%-8s %-8s %4s %7s %6s %3s %3s %3s %9s %8s\n", "shape", "enc", "form", "N", "K", "B", "ks", "lg", "us", "GB/s");
    for (int s = 0; s < ns; s++) {
        tm_tensor t;
        void *d, *sc;
        const int P = sh[s].P, rows = P ? sh[s].N * IX_E : sh[s].N; /* indexed: a stack of IX_E experts */
        if (make_weight(sh[s].enc, rows, sh[s].K, &t, &d, &sc)) return 1;
        cu_part part = {&t, 0, rows};
        cu_mat m[64];
        tm_err err = {0};
        if (cu_mat_up_packed(&m[0], st, &part, 1, sh[s].K, &err) != TM_OK) return die(err.msg);
        const int enc = m[0].q.enc; /* the form bound: int6 is widened to int8 */
        size_t rowb = (size_t)sh[s].K * enc / 8;
        size_t bytes = (size_t)m[0].N * (rowb + (size_t)(m[0].K / m[0].q.G) * (enc == 8 ? 4 : 2));
        int copies = (int)(((size_t)256 << 20) / bytes) + 1;
        if (P) bytes = bytes / IX_E * P; /* what one launch reads */
        copies = copies > 64 ? 64 : copies;
        for (int c = 1; c < copies; c++)
            if (cu_mat_up_packed(&m[c], st, &part, 1, sh[s].K, &err) != TM_OK) return die(err.msg);
        free(d), free(sc);
        int Bmax = P; /* indexed: one x row a pair */
        for (int i = 0; i < nb && !P; i++) Bmax = bs[i] > Bmax ? bs[i] : Bmax;
        int *sel = NULL; /* indexed: each launch's P distinct experts, drawn at random */
        if (P) {
            int hs[LAUNCHES * IX_E];
            for (int l = 0; l < LAUNCHES; l++) {
                int *o = hs + l * P, perm[IX_E];
                for (int e = 0; e < IX_E; e++) perm[e] = e;
                for (int e = 0; e < P; e++) {
                    int r = e + rand() % (IX_E - e), v = perm[r];
                    perm[r] = perm[e], perm[e] = v, o[e] = v;
                }
            }
            if (cudaMalloc((void **)&sel, sizeof(int) * LAUNCHES * P) != cudaSuccess) return die("cudaMalloc");
            cudaMemcpy(sel, hs, sizeof(int) * LAUNCHES * P, cudaMemcpyHostToDevice);
        }
        uint16_t *x = NULL, *g16 = NULL;
        float *y = NULL;
        if (cudaMalloc((void **)&x, (size_t)Bmax * sh[s].K * 2) != cudaSuccess ||
            cudaMalloc((void **)&y, (size_t)Bmax * sh[s].N * 4) != cudaSuccess ||
            cudaMalloc((void **)&g16, (size_t)Bmax * sh[s].N * 2) != cudaSuccess)
            return die("cudaMalloc");
        cudaMemset(x, 0x3f, (size_t)Bmax * sh[s].K * 2);
        for (int bi = 0; bi < (P ? 1 : nb); bi++)
            for (int ki = 0; ki < nks * (P ? nlg : 1); ki++) {
                int B = P ? P : bs[bi] < 1 ? 1 : bs[bi], lg = P ? lgs[ki / nks] : 0;
                cu_gemv_force_ks(kss[ki % nks]);
                cu_gemv_force_lg(lg);
                cudaGraph_t g;
                cudaGraphExec_t gx;
                cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
                for (int l = 0; l < LAUNCHES; l++) {
                    const cu_mat *w = &m[l % copies];
                    if (P) { /* the engine's experts_indexed, over one stack */
                        cu_mat e0 = cu_mat_view(w, 0, sh[s].N), e1 = cu_mat_view(w, 1, sh[s].N);
                        cu_gemv_ix ix = {.sel = sel + l * P, .xdiv = 1, .qstride = (size_t)(e1.q.q - e0.q.q),
                                         .sstride = (size_t)((const uint8_t *)e1.q.s - (const uint8_t *)e0.q.s)};
                        cu_gemv_epi ep = {.gated = 1, .act = TM_ACT_SILU, .F = sh[s].N / 2, .ldg = sh[s].N / 2, .g = g16};
                        if (sh[s].gated) cu_gemv_ix_act(st, &e0.q, &ix, x, sh[s].K, P, &ep);
                        else cu_gemv_ix_q(st, &e0.q, &ix, x, sh[s].K, P, y, sh[s].N);
                    } else if (sh[s].gated) {
                        cu_gemv_epi ep = {.gated = 1, .act = TM_ACT_SILU, .F = sh[s].N / 2, .ldg = sh[s].N / 2, .g = g16};
                        cu_mat_mul_act(&mm, &ep, x, w, B, y, &err);
                    } else {
                        cu_mat_mul(&mm, y, x, w, B, &err);
                    }
                }
                if (cudaStreamEndCapture(st, &g) != cudaSuccess || cudaGraphInstantiate(&gx, g, 0) != cudaSuccess)
                    return die("graph capture");
                double tt = time_graph(st, gx, reps) / LAUNCHES;
                cudaError_t ce = cudaStreamSynchronize(st);
                if (ce != cudaSuccess) return die(cudaGetErrorString(ce));
                printf("%-8s %-8s %4d %7d %6d %3d %3d %3d %9.2f %8.0f\n", sh[s].name, tm_dtype_name(sh[s].enc), enc,
                       sh[s].N, sh[s].K, B, kss[ki % nks], lg, tt * 1e6, bytes / tt * 1e-9);
                fflush(stdout);
                cudaGraphExecDestroy(gx), cudaGraphDestroy(g);
            }
        cu_gemv_force_ks(0);
        cu_gemv_force_lg(0);
        for (int c = 0; c < copies; c++) cu_mat_free(&m[c]);
        cudaFree(x), cudaFree(y), cudaFree(g16), cudaFree(sel);
    }
    cudaStreamDestroy(st);
    return 0;
}
