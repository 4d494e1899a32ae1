/* tests/test_cuda_moe.c: the CUDA engine's mixture-of-experts layers (engine/cuda/cu_moe.h), bound for
 * decode on packages whose decode stage keeps the experts packed: the conformance Qwen3-MoE
 * (../shared/conformance/models/qwen3_moe, int4 g64) and three of tandem synth's tiny models in int8 per
 * channel: Qwen2-MoE (a shared expert behind a sigmoid gate), GraniteMoE-shared (an ungated shared
 * expert), GPT-OSS (router and expert biases, the clamped SwiGLU, a sliding window, sinks). First the
 * pick kernel alone against the host's tm_moe_pick on rows with exact ties (softmax and sigmoid scores,
 * the choice's bias, DeepSeek's groups, up to 512 experts and top 32). For each model:
 *   - one sequence: a prompt prefilled (its experts sorted by expert and run as tiles, cu_moe_mm), then
 *     steps whose experts are found by index on the device, captured as CUDA graphs, against the same
 *     engine with the indexed path off (TANDEM_CUDA_MOE_IX=0: the steps grouped on the host, launched one
 *     by one): the same logits to f32's rounding (the sums' order differs) and the same top 1; against the engine with the tiled path off
 *     (TANDEM_CUDA_MOE_MM=0: the prefill grouped on the host, cuBLAS over dequantized experts) and against
 *     cpu-avx512 over the same weights (its own prefill and steps): KL and top-1; the last step against the
 *     f32 reference over those weights;
 *   - batches of 3 (indexed) and 20 (past CU_MOE_IX_ROWS: tiled, captured) of sequences of different
 *     lengths: each row of the last step against its sequence alone.
 * Before the models, the kernels alone: cu_moe_sort and cu_moe_mm against the host (mm_kernel).
 * test_engine_conf runs the CUDA engine's both roles on every MoE fixture and the conformance Qwen3-MoE
 * against transformers' logits (bf16 experts: the tiled path). Without a CUDA build or a GPU it prints SKIP. */
#include "harness.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/ref/ref.h"
#include "hf/synth.h"
#include "model/model.h"
#include "model/moe_route.h"
#include "pkg/convert.h"
#include "runtime/rt_model.h"
#ifdef TM_CUDA
#include <cuda_runtime.h>

#include "engine/cuda/cuda-impl.h"
#endif

enum { NP = 21, STEPS = 6, NB = 20, BSTEPS = 2, CTX = 256, NIDS = 512 };

typedef struct eng {
    const tm_engine_vt *vt;
    void *ctx;
} eng;

static tm_kv_cache *cache_of(const tm_model *m, int pages)
{
    tm_kv_cache *kv = NULL;
    tm_err err = {0};
    CHECKF(tm_kv_cache_init(&kv, &(tm_kv_cache_opts){m->L, m->Hk, m->Dh, 16, pages, TM_DT_BF16, 0}, &err) == TM_OK, "%s",
           err.msg);
    return kv;
}

/* ids[0, n) prefilled by e in one exact chunk into (kv, seq), with room for `more` positions */
static int prefill(eng e, tm_kv_cache *kv, tm_kv_seq *seq, const int32_t *ids, int n, int more)
{
    tm_err err = {0};
    if (tm_kv_seq_reserve(kv, seq, n + more, &err) != TM_OK) return err.code;
    tm_prefill_args a = {.tokens = ids, .T = n, .n_valid = n, .kv = kv, .seq = seq};
    int rc = e.vt->prefill(e.ctx, &a, &err);
    CHECKF(rc == TM_OK, "%s prefill: %s", e.vt->name, err.msg);
    return rc;
}

static int step(eng e, tm_kv_cache *kv, tm_kv_seq **seqs, const int32_t *tok, const int *pos, int B, float *logits)
{
    tm_err err = {0};
    tm_decode_args a = {.B = B, .tokens = tok, .pos = pos, .kv = kv, .seqs = seqs, .logits = logits};
    int rc = e.vt->decode(e.ctx, &a, &err);
    CHECKF(rc == TM_OK, "%s decode (B = %d): %s", e.vt->name, B, err.msg);
    return rc;
}

/* one sequence on the default engine (g[0]: prefill tiled, steps indexed), the one with steps grouped on the host
 * (g[1]), cpu-avx512 (g[2]) and the one with the tiled path off (g[3]: prefill grouped on the host) */
static void one_sequence(const char *name, eng *g, const tm_model *m, const int32_t *ids)
{
    int V = m->V, ok = 1, flips = 0, flips_mm = 0, flips_ix = 0;
    float *lg[4];
    tm_kv_cache *kv[4];
    tm_kv_seq sq[4], *ps[4];
    memset(sq, 0, sizeof sq);
    for (int i = 0; i < 4; i++) {
        lg[i] = malloc(sizeof(float) * V);
        kv[i] = cache_of(m, 16), ps[i] = &sq[i];
        ok = ok && kv[i] && prefill(g[i], kv[i], &sq[i], ids, NP, STEPS) == TM_OK;
    }
    double d_ix = 0, kl_sum = 0, kl_max = 0, kl_mm = 0;
    for (int s = 0; s < STEPS && ok; s++) {
        int pos = NP + s;
        for (int i = 0; i < 4 && ok; i++) ok = step(g[i], kv[i], &ps[i], &ids[pos], &pos, 1, lg[i]) == TM_OK;
        if (!ok) break;
        int agree;
        d_ix = fmax(d_ix, th_max_diff(lg[0], lg[1], V) / th_max_abs(lg[1], V));
        th_kl_row(lg[1], lg[0], V, &agree);
        flips_ix += !agree;
        double kl = th_kl_row(lg[2], lg[0], V, &agree);
        kl_sum += kl, kl_max = fmax(kl_max, kl), flips += !agree;
        kl_mm = fmax(kl_mm, th_kl_row(lg[3], lg[0], V, &agree));
        flips_mm += !agree;
    }
    printf("%s: %d steps: indexed vs grouped max |diff| %.3g of the row's max; vs cpu-avx512 mean KL %.2e (max %.2e), %d top-1 flips; "
           "prefill tiled vs grouped on the host: max KL %.2e, %d flips\n", name, STEPS, d_ix, kl_sum / STEPS, kl_max,
           flips, kl_mm, flips_mm);
    CHECKF(kl_mm < 1e-3 && flips_mm <= STEPS / 3, "%s: the tiled prefill vs the host-grouped one: KL %.3e, %d flips",
           name, kl_mm, flips_mm);
    CHECKF(ok, "%s: the steps ran", name);
    /* not bit for bit: the indexed launch splits a short row's K over fewer lanes than one expert's GEMV
       (cu_gemv.cu's gemv_ix_shape), so its f32 sums run in another order */
    CHECKF(d_ix < 1e-3 && !flips_ix, "%s: the indexed experts' logits differ from the grouped ones' by %.3g of the "
           "row's max (%d top-1 flips)", name, d_ix, flips_ix);
    CHECKF(kl_sum / STEPS < 1e-3 && flips <= STEPS / 3, "%s: vs cpu-avx512 mean KL %.3e, %d flips", name, kl_sum / STEPS,
           flips);
    if (ok) { /* the last step against the f32 reference over the same weights */
        tm_ref *r = NULL;
        tm_err err = {0};
        float *ref = malloc(sizeof(float) * V);
        CHECK(tm_ref_init(&r, m, 128, 2, &err) == TM_OK);
        CHECK(r && tm_ref_forward(r, ids, NP + STEPS, 0, ref, 0, &err) == TM_OK);
        tm_ref_free(r);
        int agree;
        double kl = th_kl_row(ref, lg[0], V, &agree), d = th_max_diff(ref, lg[0], V) / th_max_abs(ref, V);
        printf("%s: the last step vs the f32 reference over the same weights: KL %.2e, max diff %.2e of the row's max, "
               "top-1 %s\n", name, kl, d, agree ? "agrees" : "differs");
        CHECKF(kl < 1e-2, "%s: vs the reference KL %.3e", name, kl);
        free(ref);
    }
    for (int i = 0; i < 4; i++) {
        tm_kv_seq_release(kv[i], &sq[i]);
        tm_kv_cache_free(kv[i]);
        free(lg[i]);
    }
}

/* B sequences of different lengths decoded together on e, the last step's rows against each alone */
static void batch(const char *name, eng e, const tm_model *m, const int32_t *ids, int B)
{
    int V = m->V, ok = 1, len[NB];
    tm_kv_cache *kv = cache_of(m, NB * 4), *k1 = cache_of(m, 4);
    tm_kv_seq sq[NB], *ps[NB], s1;
    memset(sq, 0, sizeof sq);
    memset(&s1, 0, sizeof s1);
    float *lg = malloc(sizeof(float) * (size_t)B * V), *l1 = malloc(sizeof(float) * V);
    for (int b = 0; b < B && ok; b++) {
        len[b] = 5 + (b * 7) % 40, ps[b] = &sq[b];
        ok = kv && prefill(e, kv, &sq[b], ids + 3 * b, len[b], BSTEPS) == TM_OK;
    }
    for (int s = 0; s < BSTEPS && ok; s++) {
        int32_t tok[NB];
        int pos[NB];
        for (int b = 0; b < B; b++) pos[b] = len[b] + s, tok[b] = ids[3 * b + pos[b]];
        ok = step(e, kv, ps, tok, pos, B, lg) == TM_OK;
    }
    double d = 0, kl_max = 0;
    int flips = 0;
    for (int b = 0; b < B && ok && k1; b++) { /* sequence b alone: its prompt and first steps, then the last step */
        int last = len[b] + BSTEPS - 1, agree = 1;
        tm_kv_seq *q = &s1;
        ok = prefill(e, k1, q, ids + 3 * b, last, 1) == TM_OK && step(e, k1, &q, &ids[3 * b + last], &last, 1, l1) == TM_OK;
        if (ok) d = fmax(d, th_max_diff(l1, lg + (size_t)b * V, V) / th_max_abs(l1, V));
        if (ok) kl_max = fmax(kl_max, th_kl_row(l1, lg + (size_t)b * V, V, &agree));
        flips += !agree;
        tm_kv_seq_release(k1, q);
    }
    /* not bit for bit: past 16 rows the dense products run cuBLAS over the bf16 copy, and routing is discontinuous
       (a near tie between experts may go the other way); test_cuda_decode's bound for a dense model's batch */
    printf("%s: a batch of %d (%s) vs each sequence alone: max KL %.2e, max diff %.2e of the row's max, %d top-1 flips\n",
           name, B, B > 16 ? "tiled" : "indexed", kl_max, d, flips);
    CHECKF(ok && kl_max < 1e-3 && !flips && d < 0.05, "%s: a batch of %d: rows differ from the sequences alone (KL %.3e, "
           "diff %.3e, %d flips)", name, B, kl_max, d, flips);
    for (int b = 0; b < B; b++) tm_kv_seq_release(kv, &sq[b]);
    tm_kv_cache_free(kv);
    tm_kv_cache_free(k1);
    free(lg);
    free(l1);
}

#ifdef TM_CUDA
/* cu_moe_pick against the host's tm_moe_pick over the same rows: logits on a grid of 0.5 (exact ties: equal
 * logits give equal scores on both sides, unequal ones differ far beyond rounding), so the choices must be the
 * same experts in the same order; the weights within 1e-5 (f32 against the host's double softmax) */
static void pick_kernel(void)
{
    enum { T = 37 };
    struct { int E, K, sigmoid, n_group, topk_group, top2, norm, corr, rb, shared; float scale; } cs[] = {
        {8, 2, 0, 1, 1, 0, 1, 0, 0, 0, 1.f},   {128, 8, 0, 1, 1, 0, 1, 0, 0, 1, 1.f}, {128, 8, 0, 1, 1, 0, 0, 0, 1, 0, 1.f},
        {64, 8, 1, 8, 3, 1, 1, 1, 0, 0, 2.5f}, {160, 6, 1, 1, 1, 0, 1, 1, 0, 0, 1.f}, {512, 32, 0, 1, 1, 0, 1, 0, 0, 1, 1.f},
        {256, 8, 1, 8, 4, 1, 1, 1, 0, 1, 2.5f},
    };
    int bad_sel = 0, n = 0;
    double wmax = 0, sgmax = 0;
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++) {
        int E = cs[ci].E, K = cs[ci].K, E1 = E + cs[ci].shared;
        float *lg = malloc(sizeof(float) * T * E1), *corr = malloc(sizeof(float) * E), *rb = malloc(sizeof(float) * E);
        float *p = malloc(sizeof(float) * E), *choice = malloc(sizeof(float) * E), *w = malloc(sizeof(float) * T * K);
        float *wd = malloc(sizeof(float) * T * K), *sg = malloc(sizeof(float) * T);
        int *sel = malloc(sizeof(int) * T * K), *seld = malloc(sizeof(int) * T * K);
        unsigned char *ok = malloc(E);
        for (int i = 0; i < T * E1; i++) lg[i] = 0.5f * (float)((i * 7919u + ci * 31u) % 9) - 2.f;
        for (int e = 0; e < E; e++) corr[e] = 0.25f * (float)((e * 13u) % 3), rb[e] = 0.5f * (float)(e % 2);
        float *d_lg, *d_corr, *d_rb, *d_w, *d_sg;
        int *d_sel;
        cudaMalloc((void **)&d_lg, sizeof(float) * T * E1), cudaMalloc((void **)&d_corr, sizeof(float) * E);
        cudaMalloc((void **)&d_rb, sizeof(float) * E), cudaMalloc((void **)&d_w, sizeof(float) * T * K);
        cudaMalloc((void **)&d_sg, sizeof(float) * T), cudaMalloc((void **)&d_sel, sizeof(int) * T * K);
        cudaMemcpy(d_lg, lg, sizeof(float) * T * E1, cudaMemcpyHostToDevice);
        cudaMemcpy(d_corr, corr, sizeof(float) * E, cudaMemcpyHostToDevice);
        cudaMemcpy(d_rb, rb, sizeof(float) * E, cudaMemcpyHostToDevice);
        tm_moe_route r = {E, K, cs[ci].n_group, cs[ci].topk_group, cs[ci].top2, cs[ci].norm, cs[ci].scale,
                          cs[ci].corr ? d_corr : NULL};
        cu_set_pdl(0);
        cu_moe_pick(NULL, d_lg, E1, T, cs[ci].rb ? d_rb : NULL, &r, cs[ci].sigmoid, d_sel, d_w, cs[ci].shared ? d_sg : NULL);
        CHECKF(cudaDeviceSynchronize() == cudaSuccess && cudaGetLastError() == cudaSuccess, "pick case %zu ran", ci);
        cudaMemcpy(seld, d_sel, sizeof(int) * T * K, cudaMemcpyDeviceToHost);
        cudaMemcpy(wd, d_w, sizeof(float) * T * K, cudaMemcpyDeviceToHost);
        cudaMemcpy(sg, d_sg, sizeof(float) * T, cudaMemcpyDeviceToHost);
        r.corr = cs[ci].corr ? corr : NULL;
        for (int t = 0; t < T; t++) {
            double mx = -INFINITY, tot = 0;
            for (int e = 0; e < E; e++) mx = fmax(mx, lg[t * E1 + e] + (cs[ci].rb ? rb[e] : 0.f));
            for (int e = 0; e < E; e++) {
                double x = lg[t * E1 + e] + (cs[ci].rb ? rb[e] : 0.f);
                p[e] = (float)(cs[ci].sigmoid ? 1.0 / (1.0 + exp(-x)) : exp(x - mx));
                tot += p[e];
            }
            for (int e = 0; e < E && !cs[ci].sigmoid; e++) p[e] = (float)(p[e] / tot);
            tm_moe_pick(&r, p, sel + t * K, w + t * K, choice, ok);
            for (int k = 0; k < K; k++) {
                bad_sel += sel[t * K + k] != seld[t * K + k];
                wmax = fmax(wmax, fabs(w[t * K + k] - wd[t * K + k]) / fmax(fabs(w[t * K + k]), 1e-30));
            }
            if (cs[ci].shared) sgmax = fmax(sgmax, fabs(sg[t] - 1.0 / (1.0 + exp(-lg[t * E1 + E]))));
            n++;
        }
        void *f[] = {lg, corr, rb, p, choice, w, wd, sg, sel, seld, ok};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
        void *df[] = {d_lg, d_corr, d_rb, d_w, d_sg, d_sel};
        for (size_t i = 0; i < sizeof df / sizeof df[0]; i++) cudaFree(df[i]);
    }
    printf("the pick kernel: %d rows of 7 routings (softmax, sigmoid, the choice's bias, groups, 8-512 experts, top 2-32): "
           "%d choices differ from the host's, weights within %.2e, the shared gate within %.2e\n", n, bad_sel, wmax, sgmax);
    CHECKF(bad_sel == 0 && wmax < 1e-5 && sgmax < 1e-6, "pick: %d choices differ, weights %.3e, gate %.3e", bad_sel, wmax,
           sgmax);
}
#endif

#ifdef TM_CUDA
/* host weight w of row n, element k of a stack in cu_moe_mm's forms (the layouts in cu_gemv.cu's head), as the
 * device's bf16 (the packed value q d rounded to nearest even) */
static float stack_w(int enc, int G, int K, const uint8_t *q, const void *s, const uint16_t *bf, size_t n, int k)
{
    if (enc == 16) return tm_bf16_to_f32(bf[n * K + k]);
    float d;
    int v;
    if (enc == 4) {
        uint8_t b = q[n * (K / 2) + (size_t)(k / 32) * 16 + (k % 32) % 16];
        v = (k % 32 < 16 ? b & 15 : b >> 4) - 8;
        d = tm_f16_to_f32(((const uint16_t *)s)[n * (K / G) + k / G]);
    } else {
        v = (int8_t)q[n * K + k];
        d = ((const float *)s)[n * (K / G) + k / G];
    }
    return tm_bf16_to_f32(tm_f32_to_bf16((float)v * d));
}

/* cu_moe_sort and cu_moe_mm against the host: T rows' K choices over E experts, skewed (expert 0 takes every third
 * choice: several row tiles; expert 5 none), for each weight form (int4 g64 / g32, int8 per channel, bf16) and both
 * products (gated, with biases: F = 96, two column tiles, the second partly past F; plain: N = 200). The slots and
 * order must be tm_moe_group's exactly and the tiles must cover each expert's slots in order; the products against
 * double sums over the same bf16 weights (plain: within 2e-5 of the sum of |x w|; gated: the bf16 output within
 * 2^-8 of the value plus 1e-4). Outputs start as NaN, so a slot or column left unwritten fails. */
static void mm_kernel(void)
{
    enum { T = 150, KC = 3, E = 9, F = 96, N = 200, KD = 192, P = T * KC };
    struct { int enc, G; } form[] = {{4, 64}, {4, 32}, {8, KD}, {16, 0}};
    int *sel = malloc(sizeof(int) * P), *start = malloc(sizeof(int) * (E + 1)), *order = malloc(sizeof(int) * P);
    int *slot = malloc(sizeof(int) * P), *d_ord = malloc(sizeof(int) * 2 * P);
    int mt = cu_moe_max_tiles(P, E), *tiles = malloc(sizeof(int) * (1 + 3 * (size_t)mt));
    for (int p = 0; p < P; p++) {
        int e = p % 3 == 0 ? 0 : (int)((p * 7u + p / 5u) % E);
        sel[p] = e == 5 ? 6 : e;
    }
    uint16_t *h16 = malloc(sizeof(uint16_t) * T * KD);
    for (int i = 0; i < T * KD; i++) h16[i] = tm_f32_to_bf16((float)((i * 2654435761u) % 2001u) / 1000.f - 1.f);
    int *dsel, *dord, *dtiles;
    uint16_t *dh, *dx;
    cudaMalloc((void **)&dsel, sizeof(int) * P), cudaMalloc((void **)&dord, sizeof(int) * 2 * P);
    cudaMalloc((void **)&dtiles, sizeof(int) * (1 + 3 * (size_t)mt));
    cudaMalloc((void **)&dh, sizeof(uint16_t) * T * KD), cudaMalloc((void **)&dx, sizeof(uint16_t) * P * KD);
    cudaMemcpy(dsel, sel, sizeof(int) * P, cudaMemcpyHostToDevice);
    cudaMemcpy(dh, h16, sizeof(uint16_t) * T * KD, cudaMemcpyHostToDevice);
    cu_set_pdl(0);
    cu_moe_sort(NULL, dsel, P, KC, E, dord, dord + P, dtiles);
    cu_moe_gather(NULL, dx, dh, dord, P, KD);
    CHECKF(cudaDeviceSynchronize() == cudaSuccess && cudaGetLastError() == cudaSuccess, "sort and gather ran");
    cudaMemcpy(d_ord, dord, sizeof(int) * 2 * P, cudaMemcpyDeviceToHost);
    cudaMemcpy(tiles, dtiles, sizeof(int) * (1 + 3 * (size_t)mt), cudaMemcpyDeviceToHost);
    tm_moe_group(sel, NULL, T, KC, E, start, order, NULL, slot);
    int bad = 0, nt = 0, tbad = 0;
    for (int p = 0; p < P; p++) bad += d_ord[p] != order[p] || d_ord[P + p] != slot[p];
    for (int e = 0; e < E; e++) /* the tiles, by expert, 64 slots each but the last */
        for (int j = start[e]; j < start[e + 1]; j += CU_MOE_TM, nt++) {
            int n = start[e + 1] - j < CU_MOE_TM ? start[e + 1] - j : CU_MOE_TM;
            tbad += nt >= mt || tiles[1 + 3 * nt] != e || tiles[2 + 3 * nt] != j || tiles[3 + 3 * nt] != n;
        }
    printf("cu_moe_sort: %d choices over %d experts (expert 0: %d, 3 tiles): %d slots differ from tm_moe_group's, %d of "
           "%d tiles wrong, count %d\n", P, E, start[1] - start[0], bad, tbad, nt, tiles[0]);
    CHECKF(bad == 0 && tbad == 0 && tiles[0] == nt && start[1] - start[0] > 2 * CU_MOE_TM, "sort: %d slots, %d tiles "
           "wrong, count %d of %d", bad, tbad, tiles[0], nt);
    for (size_t fi = 0; fi < sizeof form / sizeof form[0]; fi++)
        for (int gated = 0; gated < 2; gated++) {
            int enc = form[fi].enc, G = form[fi].G, Ne = gated ? 2 * F : N, cols = gated ? F : N;
            size_t rows = (size_t)E * Ne, qb = enc == 16 ? 0 : rows * KD * enc / 8;
            size_t sb = enc == 16 ? 0 : rows * (KD / G) * (enc == 4 ? 2 : 4);
            uint8_t *q = malloc(qb + 1), *s = malloc(sb + 1);
            uint16_t *bf = malloc(sizeof(uint16_t) * rows * KD);
            for (size_t i = 0; i < qb; i++) q[i] = (uint8_t)((i * 2246822519u + fi) >> 7);
            for (size_t i = 0; i < sb / (enc == 4 ? 2 : 4); i++) {
                float d = (0.01f + 0.03f * (float)((i * 40503u) % 101u) / 100.f) * (i % 3 ? 1.f : -1.f);
                if (enc == 4) ((uint16_t *)s)[i] = tm_f32_to_f16(d);
                else ((float *)s)[i] = d / 8.f;
            }
            for (size_t i = 0; i < rows * KD; i++) bf[i] = tm_f32_to_bf16((float)((i * 2654435761u) % 1001u) / 5000.f - 0.1f);
            float *b = malloc(sizeof(float) * E * 2 * F);
            for (int i = 0; i < E * 2 * F; i++) b[i] = 0.05f * (float)(i % 7) - 0.15f;
            uint8_t *dq = NULL, *ds = NULL;
            uint16_t *dbf = NULL, *dge;
            float *db, *dy;
            if (enc != 16) {
                cudaMalloc((void **)&dq, qb), cudaMalloc((void **)&ds, sb);
                cudaMemcpy(dq, q, qb, cudaMemcpyHostToDevice), cudaMemcpy(ds, s, sb, cudaMemcpyHostToDevice);
            } else {
                cudaMalloc((void **)&dbf, sizeof(uint16_t) * rows * KD);
                cudaMemcpy(dbf, bf, sizeof(uint16_t) * rows * KD, cudaMemcpyHostToDevice);
            }
            cudaMalloc((void **)&db, sizeof(float) * E * 2 * F), cudaMalloc((void **)&dy, sizeof(float) * P * N);
            cudaMalloc((void **)&dge, sizeof(uint16_t) * P * F);
            cudaMemcpy(db, b, sizeof(float) * E * 2 * F, cudaMemcpyHostToDevice);
            cudaMemset(dy, 0xff, sizeof(float) * P * N), cudaMemset(dge, 0xff, sizeof(uint16_t) * P * F);
            cu_qmat qm = {.enc = enc, .N = (int)rows, .K = KD, .G = G, .q = dq, .s = ds};
            cu_stack st = {enc == 16 ? NULL : &qm, dbf, Ne, KD};
            cu_gemv_epi ep = {.gated = 1, .act = TM_ACT_SILU, .F = F, .ldg = F, .b = db, .g = dge};
            CHECKF(cu_moe_mm_ok(&st), "cu_moe_mm takes enc %d G %d", enc, G);
            cu_moe_mm(NULL, &st, dtiles, mt, dx, gated ? NULL : dy, N, gated ? &ep : NULL);
            CHECKF(cudaDeviceSynchronize() == cudaSuccess && cudaGetLastError() == cudaSuccess, "cu_moe_mm enc %d ran", enc);
            float *y = malloc(sizeof(float) * P * N);
            uint16_t *ge = malloc(sizeof(uint16_t) * P * F);
            cudaMemcpy(y, dy, sizeof(float) * P * N, cudaMemcpyDeviceToHost);
            cudaMemcpy(ge, dge, sizeof(uint16_t) * P * F, cudaMemcpyDeviceToHost);
            double worst = 0; /* |diff| over the allowed */
            int nbad = 0;
            double *acc = malloc(sizeof(double) * Ne), *mag = malloc(sizeof(double) * Ne);
            for (int p = 0; p < P; p++) {
                int e = sel[p], t = p / KC, j = slot[p];
                for (int n = 0; n < Ne; n++) {
                    acc[n] = mag[n] = 0;
                    for (int k = 0; k < KD; k++) {
                        double x = tm_bf16_to_f32(h16[(size_t)t * KD + k]) * (double)stack_w(enc, G, KD, q, s, bf, (size_t)e * Ne + n, k);
                        acc[n] += x, mag[n] += fabs(x);
                    }
                }
                for (int n = 0; n < cols; n++) {
                    double got, ref, tol;
                    if (gated) {
                        double gv = acc[n] + b[e * 2 * F + n], uv = acc[F + n] + b[e * 2 * F + F + n];
                        ref = gv / (1 + exp(-gv)) * uv, got = tm_bf16_to_f32(ge[(size_t)j * F + n]);
                        tol = ldexp(fabs(ref), -8) + 1e-4;
                    } else ref = acc[n], got = y[(size_t)j * N + n], tol = 2e-5 * mag[n] + 1e-30;
                    double r = fabs(got - ref) / tol;
                    if (!(r <= 1)) nbad++;
                    worst = r > worst || r != r ? r : worst;
                }
            }
            printf("cu_moe_mm enc %d G %d %s: %d x %d outputs, worst |diff| %.3f of the bound, %d past it\n", enc, G,
                   gated ? "gated (SiLU, biases)" : "plain", P, cols, worst, nbad);
            CHECKF(nbad == 0, "cu_moe_mm enc %d G %d %s: %d outputs past the bound (worst %.3g)", enc, G,
                   gated ? "gated" : "plain", nbad, worst);
            void *hf[] = {q, s, bf, b, y, ge, acc, mag};
            for (size_t i = 0; i < sizeof hf / sizeof hf[0]; i++) free(hf[i]);
            void *df[] = {dq, ds, dbf, db, dy, dge};
            for (size_t i = 0; i < sizeof df / sizeof df[0]; i++) cudaFree(df[i]);
        }
    void *hf[] = {sel, start, order, slot, d_ord, tiles, h16};
    for (size_t i = 0; i < sizeof hf / sizeof hf[0]; i++) free(hf[i]);
    void *df[] = {dsel, dord, dtiles, dh, dx};
    for (size_t i = 0; i < sizeof df / sizeof df[0]; i++) cudaFree(df[i]);
}
#endif

static void moe_case(const char *name, const char *dir, tm_dtype enc)
{
    tm_err err = {0};
    char pkg[256];
    snprintf(pkg, sizeof pkg, "build/test_cuda_moe_%s.tdm", name);
    tm_convert_opts co;
    tm_convert_opts_default(&co);
    co.prefill_enc = TM_DT_BF16, co.decode_enc = enc;
    tm_convert_stats cs;
    CHECKF(tm_convert(dir, pkg, &co, &cs, &err) == TM_OK, "%s: %s", dir, err.msg);
    tm_rt_model *rm = NULL;
    CHECKF(tm_rt_model_open(&rm, pkg, &err) == TM_OK, "%s: %s", pkg, err.msg);
    unlink(pkg);
    if (!rm) return;
    const tm_model *m = rm->decode;
    int l = 0;
    while (l < m->L && !m->layer[l].moe) l++;
    CHECKF(l < m->L && m->w[l].e_gate[0].dtype == enc && m->w[l].e_down[0].dtype == enc, "%s: experts in %s", name,
           l < m->L ? tm_dtype_name(m->w[l].e_gate[0].dtype) : "no layer");
    const tm_engine_vt *vt = tm_engine_find("cuda"), *cvt = tm_engine_find("cpu-avx512");
    tm_engine_opts o = {.weight_enc = rm->decode_enc, .max_ctx = CTX, .roles = TM_ROLE_DECODE};
    eng g[4] = {{vt, NULL}, {vt, NULL}, {cvt, NULL}, {vt, NULL}};
    CHECKF(vt->bind(&g[0].ctx, m, &o, &err) == TM_OK, "%s: bind: %s", name, err.msg);
    setenv("TANDEM_CUDA_MOE_IX", "0", 1);
    CHECKF(vt->bind(&g[1].ctx, m, &o, &err) == TM_OK, "%s: bind (grouped): %s", name, err.msg);
    unsetenv("TANDEM_CUDA_MOE_IX");
    CHECKF(cvt->bind(&g[2].ctx, m, &o, &err) == TM_OK, "%s: bind cpu-avx512: %s", name, err.msg);
    setenv("TANDEM_CUDA_MOE_MM", "0", 1);
    CHECKF(vt->bind(&g[3].ctx, m, &o, &err) == TM_OK, "%s: bind (tiled path off): %s", name, err.msg);
    unsetenv("TANDEM_CUDA_MOE_MM");
    int32_t ids[NIDS];
    for (int i = 0; i < NIDS; i++) ids[i] = (int32_t)((i * 2654435761u + 17) % (unsigned)m->V);
    if (g[0].ctx && g[1].ctx && g[2].ctx && g[3].ctx) {
        one_sequence(name, g, m, ids);
        batch(name, g[0], m, ids, 3);
        batch(name, g[0], m, ids, NB);
    }
    for (int i = 0; i < 4; i++)
        if (g[i].ctx) g[i].vt->unbind(g[i].ctx);
    tm_rt_model_free(rm);
}

int main(void)
{
    const tm_engine_vt *vt = tm_engine_find("cuda");
    tm_engine_caps caps;
    tm_err err = {0};
    if (!vt) {
        printf("SKIP cuda moe: not in this build (make CUDA=1)\n");
        return th_done("test_cuda_moe");
    }
    if (vt->probe(&caps, &err) != TM_OK) {
        printf("SKIP cuda moe: %s\n", err.msg);
        return th_done("test_cuda_moe");
    }
#ifdef TM_CUDA
    pick_kernel();
    mm_kernel();
#endif
    char dir[512];
    snprintf(dir, sizeof dir, "%s/conformance/models/qwen3_moe/hf", th_shared());
    moe_case("qwen3_moe", dir, TM_DT_Q4G64);
    /* tandem synth's tiny MoE models (a tokenizer.json each, which a package needs; the refs fixtures have none) */
    const char *pre[] = {"qwen2-moe-tiny", "granitemoe-shared-tiny", "gpt-oss-tiny"};
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++) {
        snprintf(dir, sizeof dir, "build/test_cuda_moe_%s", pre[i]);
        CHECKF(tm_synth_write(pre[i], dir, 11, &err) == TM_OK, "%s: %s", pre[i], err.msg);
        moe_case(pre[i], dir, TM_DT_Q8PC);
    }
    return th_done("test_cuda_moe");
}
