/* tests/test_cuda_decode.c: the CUDA engine's decode role (engine/cuda: cu_dec.cu and the decode path
 * of cuda_engine.c) through the engine interface, on the conformance Llama
 * (../shared/conformance/models/llama3, its f32 checkpoint, bf16 weights), against the AVX-512 decode
 * engine over the same pages and the float32 reference:
 *   - a prompt prefilled by cpu-avx512, then 12 steps on each engine: every step's logits, the last
 *     against the reference's, and the K/V rows the GPU wrote back into the host pages;
 *   - the same sequence continued by 3 CPU steps (rows the device does not have: part of a page
 *     comes up again) and 3 more GPU steps, against the CPU alone;
 *   - a batch of three sequences of 37, 20 and 600 positions (each row's keys in segments of at least 64,
 *     merged; and, TANDEM_CUDA_DEC_SEGS=0, in one segment of chunks with the running rescale), batched
 *     against the CPU's batch and against each sequence alone on the GPU;
 *   - these with the decode attention of a kv head's query heads together on tensor cores (on bf16 and int8
 *     pages; TANDEM_CUDA_DEC_MMA_FROM=0: at every span, where the default keeps it to long contexts on this
 *     model's groups), with TANDEM_CUDA_DEC_MMA=0 a block a query head, and by the step's span (FROM=44: the
 *     single sequence changes kernel between its steps, each under its own captured graph; the batch of
 *     600 positions runs the grouped kernel, its rows alone the per-head one); each section's steps counted by
 *     the kernel that ran them (cu_eng.dec_kernel_steps), the single bf16 sequence's exactly;
 *   - a sequence released and another reserved in the same struct, on the same page ids, with
 *     another prompt (the device's copy of those pages is stale: it must come up again);
 *   - int8 pages;
 *   - all of it with the steps captured as CUDA graphs (the default) and launched one by one;
 *   - packed weights (cu_mat.h; TANDEM_CUDA_PACKED=1): the decode stage of a converted package (int4
 *     g64 layers, int6 g64 head) bound for decode stays packed and runs the GEMV: its steps against
 *     the same weights as bf16 (the default) and with its 37-token prompt through the GEMV rather than
 *     dequantized for cuBLAS (TANDEM_CUDA_GEMV_MAX=64), the last against the f32 reference over those
 *     int4 weights, and a batch of 10 (GEMV groups of 8 and 2) against each sequence alone; with graphs
 *     and bf16 pages, then launched one by one on int8 pages; with the bf16 copy kept beside the packed form
 *     (TANDEM_CUDA_BF16_COPY=1), a batch of 20 (cuBLAS over the copy) against each sequence alone (the GEMV);
 *   - programmatic dependent launch on and off (TANDEM_CUDA_PDL=0), on bf16 weights (cuBLAS) and packed
 *     ones (the GEMV), and the GEMV's residual epilogue (forced wherever it can run for the whole test,
 *     TANDEM_CUDA_FUSE_RES=1) against none (0):
 *     bit-identical logits, the first engine's into the engine's own page-locked host memory
 *     (host_alloc), the second's into malloc's;
 *     each step's greedy tokens (tm_decode_args.argmax) beside the logits (the first engine) or alone
 *     (the second, every other step), against tm_argmax_f32 of the logits;
 *   - the argmax kernel (cu_argmax) alone on rows made to test its rule: NaN, -inf, +inf, ties within
 *     and across its segments, rows with no finite logit, vocabularies of 1 to 200,003, up to 64 rows;
 *   - refusals: a batch of 0 or too many, a token outside the vocabulary, a position past the
 *     engine's context, pages that do not cover the step, a cache of another geometry.
 * Without a CUDA build (make CUDA=1) or a GPU it prints SKIP and checks nothing. test_engine_conf
 * runs the decode role on every conformance architecture and fixture, through the routes. */
#include "harness.h"

#include <math.h>
#ifdef TM_CUDA
#include <cuda_runtime.h>
#endif
#include <string.h>

#include "core/tensor.h"
#include "engine/engine.h"
#include "engine/ref/ref.h"
#ifdef TM_CUDA
#include "engine/cuda/cu_eng.h"
#endif
#include "hf/hf_model.h"
#include "model/model.h"
#include "runtime/rt_model.h"

enum { NP = 37, STEPS = 12, NLONG = 600, CTX = 1024 };

typedef struct eng {
    const tm_engine_vt *vt;
    void *ctx;
} eng;

/* the decode steps the CUDA engine has run by its attention kernel: [0] a block a query head, [1] grouped */
static void kernel_steps(eng gpu, long out[2])
{
#ifdef TM_CUDA
    const cu_eng *e = gpu.ctx;
    out[0] = e->dec_kernel_steps[0], out[1] = e->dec_kernel_steps[1];
#else
    (void)gpu;
    out[0] = out[1] = 0;
#endif
}

static tm_kv_cache *cache_of(const tm_model *m, tm_dtype dt, int pages)
{
    tm_kv_cache *kv = NULL;
    tm_err err = {0};
    CHECKF(tm_kv_cache_init(&kv, &(tm_kv_cache_opts){m->L, m->Hk, m->Dh, 16, pages, dt, 0}, &err) == TM_OK, "%s", err.msg);
    return kv;
}

/* ids[0, n) prefilled by e (exact chunks of at most 512) into (kv, seq), with room for `more` positions */
static int prefill(eng e, tm_kv_cache *kv, tm_kv_seq *seq, const int32_t *ids, int n, int more)
{
    tm_err err = {0};
    if (tm_kv_seq_reserve(kv, seq, n + more, &err) != TM_OK) return err.code;
    for (int p = 0; p < n; p += 512) {
        int T = n - p < 512 ? n - p : 512;
        tm_prefill_args a = {.tokens = ids + p, .T = T, .n_valid = T, .pos0 = p, .kv = kv, .seq = seq};
        int rc = e.vt->prefill(e.ctx, &a, &err);
        CHECKF(rc == TM_OK, "%s prefill: %s", e.vt->name, err.msg);
        if (rc) return rc;
    }
    return TM_OK;
}

/* one decode step of B sequences */
static int step(eng e, tm_kv_cache *kv, tm_kv_seq **seqs, const int32_t *tok, const int *pos, int B, float *logits)
{
    tm_err err = {0};
    tm_decode_args a = {.B = B, .tokens = tok, .pos = pos, .kv = kv, .seqs = seqs, .logits = logits};
    int rc = e.vt->decode(e.ctx, &a, &err);
    CHECKF(rc == TM_OK, "%s decode: %s", e.vt->name, err.msg);
    return rc;
}

/* the GPU's logits row against the CPU's: KL, top-1 and the largest difference */
static void close_rows(const char *what, const float *cpu, const float *gpu, int V, double *kl_max, int *flips,
                       double *d_max)
{
    int agree;
    double kl = th_kl_row(cpu, gpu, V, &agree), d = th_max_diff(cpu, gpu, V) / th_max_abs(cpu, V);
    if (kl > *kl_max) *kl_max = kl;
    if (d > *d_max) *d_max = d;
    *flips += !agree;
    CHECKF(kl < 1e-3 && agree && d < 0.05, "%s: KL %.3e, top-1 %s, max diff %.3e of the row's max", what, kl,
           agree ? "agrees" : "differs", d);
}

/* the K/V rows of positions [p0, p1) of sequence a in kv against b's in kv2 (bf16 pages) */
static double rows_diff(const tm_model *m, tm_kv_cache *kv, const tm_kv_seq *a, tm_kv_cache *kv2, const tm_kv_seq *b,
                        int p0, int p1, double *amax)
{
    double dmax = 0;
    *amax = 0;
    for (int l = 0; l < m->L; l++)
        for (int g = 0; g < m->Hk; g++)
            for (int p = p0; p < p1; p++)
                for (int v = 0; v < 2; v++) {
                    const uint16_t *x = (const uint16_t *)(v ? tm_kv_page_v(kv, a->pages[p / 16], l, g)
                                                             : tm_kv_page_k(kv, a->pages[p / 16], l, g)) + (p % 16) * m->Dh;
                    const uint16_t *y = (const uint16_t *)(v ? tm_kv_page_v(kv2, b->pages[p / 16], l, g)
                                                             : tm_kv_page_k(kv2, b->pages[p / 16], l, g)) + (p % 16) * m->Dh;
                    for (int d = 0; d < m->Dh; d++) {
                        dmax = fmax(dmax, fabs(tm_bf16_to_f32(x[d]) - tm_bf16_to_f32(y[d])));
                        *amax = fmax(*amax, fabs(tm_bf16_to_f32(y[d])));
                    }
                }
    return dmax;
}

/* one sequence: CPU prefill, then the GPU and the CPU decode side by side; then the CPU takes some
 * steps of the GPU's sequence and the GPU the rest */
static void one_sequence(eng gpu, eng cpu, const tm_model *m, const int32_t *ids, tm_dtype dt)
{
    int V = m->V, n = NP + STEPS + 6;
    float *lg = malloc(sizeof(float) * V), *lc = malloc(sizeof(float) * V), *ref = malloc(sizeof(float) * V);
    tm_kv_cache *kg = cache_of(m, dt, 64), *kc = cache_of(m, dt, 64);
    tm_kv_seq sg = {0}, sc = {0};
    tm_kv_seq *pg = &sg, *pc = &sc;
    CHECK(prefill(cpu, kg, &sg, ids, NP, 64) == TM_OK && prefill(cpu, kc, &sc, ids, NP, 64) == TM_OK);
    double kl_max = 0, d_max = 0;
    int flips = 0;
    char what[96];
    for (int i = 0; i < STEPS; i++) {
        int pos = NP + i;
        if (step(gpu, kg, &pg, &ids[pos], &pos, 1, lg) || step(cpu, kc, &pc, &ids[pos], &pos, 1, lc)) break;
        snprintf(what, sizeof what, "%s KV, step %d", dt == TM_DT_Q8PC ? "int8" : "bf16", i);
        close_rows(what, lc, lg, V, &kl_max, &flips, &d_max);
    }
    printf("%s KV: %d GPU steps vs cpu-avx512's: max KL %.2e, max diff %.2e of the row's max, %d top-1 flips\n",
           dt == TM_DT_Q8PC ? "int8" : "bf16", STEPS, kl_max, d_max, flips);
    CHECKF(sg.n_tokens == NP + STEPS, "n_tokens %d after the GPU's steps", sg.n_tokens);
    if (dt == TM_DT_BF16) {
        /* against the f32 reference (the whole sequence at once) */
        tm_ref *r = NULL;
        tm_err err = {0};
        CHECK(tm_ref_init(&r, m, 128, 2, &err) == TM_OK);
        CHECK(r && tm_ref_forward(r, ids, NP + STEPS, 0, ref, 0, &err) == TM_OK);
        tm_ref_free(r);
        int agree;
        double kl = th_kl_row(ref, lg, V, &agree);
        printf("the GPU's last step vs the f32 reference: KL %.2e, top-1 %s\n", kl, agree ? "agrees" : "DIFFERS");
        CHECKF(kl < 1e-3 && agree, "last step vs the reference: KL %.3e", kl);
        /* the rows the GPU wrote back into the host pages, against the CPU's */
        double amax, dk = rows_diff(m, kg, &sg, kc, &sc, NP, NP + STEPS, &amax);
        printf("K/V rows written back by the GPU vs cpu-avx512's: max |diff| %.3e of %.3e\n", dk, amax);
        CHECKF(amax > 0 && dk <= 0.03 * amax, "written-back rows differ by %.3e of %.3e", dk, amax);
    }
    /* the CPU takes 3 steps of the GPU's sequence, then the GPU 3 more: against the CPU alone */
    kl_max = d_max = 0, flips = 0;
    for (int pos = NP + STEPS; pos < n; pos++) {
        eng who = pos < NP + STEPS + 3 ? cpu : gpu;
        if (step(who, kg, &pg, &ids[pos], &pos, 1, lg) || step(cpu, kc, &pc, &ids[pos], &pos, 1, lc)) break;
        snprintf(what, sizeof what, "mixed, position %d (%s)", pos, who.vt->name);
        close_rows(what, lc, lg, V, &kl_max, &flips, &d_max);
    }
    printf("3 CPU steps on the GPU's sequence, then 3 GPU steps (part of a page up again): max KL %.2e vs the CPU "
           "alone\n", kl_max);
    tm_kv_seq_release(kg, &sg);
    tm_kv_seq_release(kc, &sc);
    tm_kv_cache_free(kg);
    tm_kv_cache_free(kc);
    free(lg);
    free(lc);
    free(ref);
}

/* three sequences batched: against the CPU's batch and each alone on the GPU; then a sequence struct
 * reused on the same page ids */
static void batch(eng gpu, eng cpu, const tm_model *m, const int32_t *ids)
{
    enum { B = 3, BSTEPS = 4 };
    int V = m->V, len[B] = {NP, 20, NLONG};
    int32_t *p[B];
    for (int b = 0; b < B; b++) {
        p[b] = malloc(sizeof(int32_t) * (NLONG + BSTEPS));
        for (int i = 0; i < NLONG + BSTEPS; i++) p[b][i] = b == 0 ? ids[i % 64] : (int32_t)((i * 40503u + 977u * b) % (unsigned)V);
    }
    float *lg = malloc(sizeof(float) * B * V), *lc = malloc(sizeof(float) * B * V), *l1 = malloc(sizeof(float) * V);
    tm_kv_cache *kg = cache_of(m, TM_DT_BF16, 128), *kc = cache_of(m, TM_DT_BF16, 128), *k1 = cache_of(m, TM_DT_BF16, 64);
    tm_kv_seq sg[B], sc[B], s1[B];
    tm_kv_seq *pg[B], *pc[B];
    memset(sg, 0, sizeof sg), memset(sc, 0, sizeof sc), memset(s1, 0, sizeof s1);
    for (int b = 0; b < B; b++) {
        pg[b] = &sg[b], pc[b] = &sc[b];
        CHECK(prefill(cpu, kg, &sg[b], p[b], len[b], BSTEPS) == TM_OK && prefill(cpu, kc, &sc[b], p[b], len[b], BSTEPS) == TM_OK);
    }
    double kl_max = 0, d_max = 0, d_alone = 0;
    int flips = 0;
    char what[96];
    for (int i = 0; i < BSTEPS; i++) {
        int32_t tok[B];
        int pos[B];
        for (int b = 0; b < B; b++) pos[b] = len[b] + i, tok[b] = p[b][pos[b]];
        if (step(gpu, kg, pg, tok, pos, B, lg) || step(cpu, kc, pc, tok, pos, B, lc)) break;
        for (int b = 0; b < B; b++) {
            snprintf(what, sizeof what, "batch row %d (%d positions), step %d", b, pos[b] + 1, i);
            close_rows(what, lc + (size_t)b * V, lg + (size_t)b * V, V, &kl_max, &flips, &d_max);
        }
    }
    printf("a batch of 3 (37, 20 and %d positions) vs cpu-avx512's batch: max KL %.2e, max diff %.2e of the row's max\n",
           NLONG, kl_max, d_max);
    /* each sequence alone on the GPU, from its own cache: the batch's last step's rows */
    for (int b = 0; b < B; b++) {
        tm_kv_seq *q = &s1[b];
        int last = len[b] + BSTEPS - 1;
        CHECK(prefill(cpu, k1, q, p[b], last, 1) == TM_OK && step(gpu, k1, &q, &p[b][last], &last, 1, l1) == TM_OK);
        d_alone = fmax(d_alone, th_max_diff(l1, lg + (size_t)b * V, V) / th_max_abs(l1, V));
        tm_kv_seq_release(k1, q);
    }
    printf("batched vs alone on the GPU: max diff %.2e of the row's max\n", d_alone);
    CHECKF(d_alone < 1e-2, "a batch row differs from the sequence alone by %.3e", d_alone);

    /* sequence 1's struct released and reserved again, on the same page ids, with sequence 0's prompt: the
       device's copy of those pages holds sequence 1's old keys and must come up again */
    int32_t old[8], n_old = sg[1].n_pages < 8 ? sg[1].n_pages : 8, reused = 0;
    memcpy(old, sg[1].pages, sizeof(int32_t) * (size_t)n_old);
    tm_kv_seq_release(kg, &sg[1]);
    tm_kv_seq_release(kc, &sc[1]);
    CHECK(prefill(cpu, kg, &sg[1], p[0], NP, 4) == TM_OK && prefill(cpu, kc, &sc[1], p[0], NP, 4) == TM_OK);
    for (int i = 0; i < sg[1].n_pages; i++)
        for (int j = 0; j < n_old; j++) reused += sg[1].pages[i] == old[j];
    CHECKF(reused > 0, "the new sequence got none of the old one's pages (the stale-page case is not exercised)");
    int pos = NP;
    tm_kv_seq *q = &sg[1], *qc = &sc[1];
    kl_max = d_max = 0, flips = 0;
    if (step(gpu, kg, &q, &p[0][pos], &pos, 1, lg) == TM_OK && step(cpu, kc, &qc, &p[0][pos], &pos, 1, lc) == TM_OK)
        close_rows("a reused sequence struct on the same pages", lc, lg, V, &kl_max, &flips, &d_max);
    printf("a sequence reused on the same page ids with another prompt: KL %.2e vs the CPU\n", kl_max);
    for (int b = 0; b < B; b++) {
        tm_kv_seq_release(kg, &sg[b]);
        tm_kv_seq_release(kc, &sc[b]);
        free(p[b]);
    }
    tm_kv_cache_free(kg);
    tm_kv_cache_free(kc);
    tm_kv_cache_free(k1);
    free(lg);
    free(lc);
    free(l1);
}

static void refusals(eng gpu, const tm_model *m, const int32_t *ids)
{
    tm_err err = {0};
    float *lg = malloc(sizeof(float) * m->V);
    tm_kv_cache *kv = cache_of(m, TM_DT_BF16, 8), *kx = NULL;
    tm_kv_seq s = {0}, sx = {0};
    tm_kv_seq *ps = &s, *px = &sx;
    CHECK(tm_kv_seq_reserve(kv, &s, 64, &err) == TM_OK);
    int pos = 10;
    int32_t tok = m->V;
    tm_decode_args a = {.B = 1, .tokens = &tok, .pos = &pos, .kv = kv, .seqs = &ps, .logits = lg};
    CHECK(gpu.vt->decode(gpu.ctx, &a, &err) == TM_E_INVALID && strstr(err.msg, "vocabulary"));
    tok = ids[0];
    a.B = 0;
    CHECK(gpu.vt->decode(gpu.ctx, &a, &err) == TM_E_INVALID && strstr(err.msg, "batch"));
    a.B = 65;
    CHECK(gpu.vt->decode(gpu.ctx, &a, &err) == TM_E_INVALID && strstr(err.msg, "batch"));
    a.B = 1, pos = CTX;
    CHECK(gpu.vt->decode(gpu.ctx, &a, &err) == TM_E_LIMIT && strstr(err.msg, "context"));
    pos = 64; /* the pages cover [0, 64) */
    CHECK(gpu.vt->decode(gpu.ctx, &a, &err) == TM_E_INVALID && strstr(err.msg, "pages"));
    CHECK(tm_kv_cache_init(&kx, &(tm_kv_cache_opts){m->L, m->Hk + 1, m->Dh, 16, 8, TM_DT_BF16, 0}, &err) == TM_OK);
    CHECK(kx && tm_kv_seq_reserve(kx, &sx, 64, &err) == TM_OK);
    pos = 3;
    tm_decode_args ax = {.B = 1, .tokens = &tok, .pos = &pos, .kv = kx, .seqs = &px, .logits = lg};
    CHECK(kx && gpu.vt->decode(gpu.ctx, &ax, &err) == TM_E_INVALID && strstr(err.msg, "heads"));
    tm_kv_seq_release(kx, &sx);
    tm_kv_cache_free(kx);
    tm_kv_seq_release(kv, &s);
    tm_kv_cache_free(kv);
    free(lg);
}

/* the decode stage's weights packed on the GPU (design block above) */
static void packed(const tm_engine_vt *vt, const char *dir, const int32_t *ids, int graphs, tm_dtype kv_dt)
{
    tm_rt_model *rm = NULL;
    tm_err err = {0};
    CHECKF(tm_rt_model_open(&rm, dir, &err) == TM_OK, "%s: %s", dir, err.msg);
    if (!rm) return;
    const tm_model *m = rm->decode;
    CHECKF(m->w[0].wq.dtype == TM_DT_Q4G64 && m->w[0].w_down.dtype == TM_DT_Q4G64 && m->lm_head.dtype == TM_DT_Q6G64,
           "the decode stage's encodings: %s, %s, head %s", tm_dtype_name(m->w[0].wq.dtype),
           tm_dtype_name(m->w[0].w_down.dtype), tm_dtype_name(m->lm_head.dtype));
    int V = m->V;
    const char *env[3][2] = {{"TANDEM_CUDA_PACKED", "1"}, {"TANDEM_CUDA_PACKED", "0"}, {"TANDEM_CUDA_GEMV_MAX", "64"}};
    const char *name[3] = {"packed", "bf16 copy", "packed, prompt by the GEMV"};
    eng g[3];
    float *lg[3], *ref = malloc(sizeof(float) * V);
    tm_engine_opts o = {.weight_enc = rm->decode_enc, .max_ctx = CTX, .roles = TM_ROLE_DECODE};
    for (int i = 0; i < 3; i++) {
        g[i] = (eng){vt, NULL};
        lg[i] = malloc(sizeof(float) * V);
        setenv(env[i][0], env[i][1], 1);
        setenv("TANDEM_CUDA_BF16_COPY", "0", 1); /* packed only: the prompt dequantized (the copy: below) */
        if (i == 2) setenv("TANDEM_CUDA_PACKED", "1", 1);
        if (!graphs) setenv("TANDEM_CUDA_GRAPHS", "0", 1);
        CHECKF(vt->bind(&g[i].ctx, m, &o, &err) == TM_OK, "bind (%s): %s", name[i], err.msg);
        unsetenv(env[i][0]);
        unsetenv("TANDEM_CUDA_BF16_COPY");
        unsetenv("TANDEM_CUDA_PACKED");
        unsetenv("TANDEM_CUDA_GRAPHS");
    }
    tm_kv_cache *kv[3];
    tm_kv_seq sq[3], *ps[3];
    memset(sq, 0, sizeof sq);
    double kl_max = 0, d_max = 0;
    int flips = 0, ok = g[0].ctx && g[1].ctx && g[2].ctx;
    for (int i = 0; i < 3; i++) {
        kv[i] = cache_of(m, kv_dt, 64), ps[i] = &sq[i];
        /* the prompt (37 rows: dequantized + cuBLAS on the packed engine, by the GEMV on the third) */
        if (ok) ok = prefill(g[i], kv[i], &sq[i], ids, NP, 64) == TM_OK;
    }
    char what[96];
    for (int s = 0; s < STEPS && ok; s++) {
        int pos = NP + s;
        for (int i = 0; i < 3 && ok; i++) ok = step(g[i], kv[i], &ps[i], &ids[pos], &pos, 1, lg[i]) == TM_OK;
        for (int i = 1; i < 3 && ok; i++) {
            snprintf(what, sizeof what, "packed vs %s, step %d", name[i], s);
            close_rows(what, lg[i], lg[0], V, &kl_max, &flips, &d_max);
        }
    }
    printf("%s KV, %s: ", kv_dt == TM_DT_Q8PC ? "int8" : "bf16", graphs ? "CUDA graphs" : "launched one by one");
    printf("packed int4 / int6 weights: %d steps vs the bf16 copy and the prompt by the GEMV: max KL %.2e, max diff "
           "%.2e of the row's max, %d top-1 flips\n", STEPS, kl_max, d_max, flips);
    if (ok) {
        tm_ref *r = NULL;
        CHECK(tm_ref_init(&r, m, 128, 2, &err) == TM_OK);
        CHECK(r && tm_ref_forward(r, ids, NP + STEPS, 0, ref, 0, &err) == TM_OK);
        tm_ref_free(r);
        for (int i = 0; i < 3; i++) {
            int agree;
            double kl = th_kl_row(ref, lg[i], V, &agree), d = th_max_diff(ref, lg[i], V) / th_max_abs(ref, V);
            printf("%s: last step vs the f32 reference over the same weights: KL %.2e, max diff %.2e of the row's max, "
                   "top-1 %s\n", name[i], kl, d, agree ? "agrees" : "DIFFERS");
            CHECKF(kl < 1e-3 && agree && d < 0.05, "%s vs the reference: KL %.3e, max diff %.3e", name[i], kl, d);
        }
    }
    /* a batch of 10 (GEMV groups of 8 and 2): sequences over prompts of 5..14 tokens, against each alone */
    enum { NB = 10 };
    tm_kv_cache *kb = cache_of(m, kv_dt, 64), *k1 = cache_of(m, kv_dt, 64);
    tm_kv_seq sb[NB], s1;
    tm_kv_seq *pb[NB], *p1 = &s1;
    memset(sb, 0, sizeof sb);
    int32_t tok[NB];
    int pos[NB];
    float *lb = malloc(sizeof(float) * NB * V);
    for (int b = 0; b < NB && ok; b++) {
        pb[b] = &sb[b], pos[b] = 5 + b, tok[b] = ids[100 + b];
        ok = prefill(g[0], kb, &sb[b], ids + 3 * b, pos[b], 1) == TM_OK;
    }
    if (ok) ok = step(g[0], kb, pb, tok, pos, NB, lb) == TM_OK;
    double dworst = 0;
    for (int b = 0; b < NB && ok; b++) {
        memset(&s1, 0, sizeof s1);
        ok = prefill(g[0], k1, &s1, ids + 3 * b, pos[b], 1) == TM_OK && step(g[0], k1, &p1, &tok[b], &pos[b], 1, lg[0]) == TM_OK;
        double d = ok ? th_max_diff(lg[0], lb + (size_t)b * V, V) / th_max_abs(lg[0], V) : 1;
        dworst = d > dworst ? d : dworst;
        tm_kv_seq_release(k1, &s1);
    }
    printf("packed: a batch of %d vs each sequence alone: max diff %.2e of the row's max\n", NB, dworst);
    CHECKF(ok && dworst < 1e-5, "packed batch of %d vs alone: %.3e", NB, dworst);
    for (int b = 0; b < NB; b++) tm_kv_seq_release(kb, &sb[b]);
    /* packed with the bf16 copy beside it: a batch of 20 (past CU_GEMV_DUAL: cuBLAS over the copy)
       against each sequence alone (one row: the GEMV over the packed form) */
    enum { ND = 20 };
    eng gd = {vt, NULL};
    setenv("TANDEM_CUDA_BF16_COPY", "1", 1);
    if (!graphs) setenv("TANDEM_CUDA_GRAPHS", "0", 1);
    CHECKF(vt->bind(&gd.ctx, m, &o, &err) == TM_OK, "bind (packed + bf16 copy): %s", err.msg);
    unsetenv("TANDEM_CUDA_BF16_COPY");
    unsetenv("TANDEM_CUDA_GRAPHS");
    tm_kv_seq sd[ND], *pd[ND];
    int32_t tokd[ND];
    int posd[ND];
    memset(sd, 0, sizeof sd);
    float *ld = malloc(sizeof(float) * ND * V);
    ok = ok && gd.ctx && ld;
    for (int b = 0; b < ND && ok; b++) {
        pd[b] = &sd[b], posd[b] = 5 + b, tokd[b] = ids[200 + b];
        ok = prefill(gd, kb, &sd[b], ids + 2 * b, posd[b], 1) == TM_OK;
    }
    if (ok) ok = step(gd, kb, pd, tokd, posd, ND, ld) == TM_OK;
    double dkl = 0, dd = 0;
    int dflips = 0;
    for (int b = 0; b < ND && ok; b++) {
        memset(&s1, 0, sizeof s1);
        ok = prefill(gd, k1, &s1, ids + 2 * b, posd[b], 1) == TM_OK && step(gd, k1, &p1, &tokd[b], &posd[b], 1, lg[0]) == TM_OK;
        snprintf(what, sizeof what, "packed + bf16 copy, batch of %d, row %d", ND, b);
        if (ok) close_rows(what, lg[0], ld + (size_t)b * V, V, &dkl, &dflips, &dd);
        tm_kv_seq_release(k1, &s1);
    }
    CHECKF(ok, "packed + bf16 copy: the batch of %d did not run", ND);
    printf("packed + bf16 copy: a batch of %d (cuBLAS over the copy) vs each alone (the GEMV): max KL %.2e, max diff "
           "%.2e of the row's max, %d top-1 flips\n", ND, dkl, dd, dflips);
    for (int b = 0; b < ND; b++) tm_kv_seq_release(kb, &sd[b]);
    if (gd.ctx) vt->unbind(gd.ctx);
    free(ld);
    tm_kv_cache_free(kb);
    tm_kv_cache_free(k1);
    free(lb);
    for (int i = 0; i < 3; i++) {
        tm_kv_seq_release(kv[i], &sq[i]);
        tm_kv_cache_free(kv[i]);
        if (g[i].ctx) vt->unbind(g[i].ctx);
        free(lg[i]);
    }
    free(ref);
    tm_rt_model_free(rm);
}

/* An engine switch that must not change a bit (env=0 on the second engine against the default on the
 * first): programmatic dependent launch (TANDEM_CUDA_PDL, cu_launch.cuh: on by default on sm_90 and later),
 * the GEMV's residual epilogue (TANDEM_CUDA_FUSE_RES, res_step: packed weights only). The same
 * CPU-prefilled sequences of 37, 20 and 600 positions (the long one's keys in segments, merged), then 8
 * steps as a batch of 3 and 4 of the short one alone, give bit-identical logits on both engines, with
 * graphs and launched one by one. A kernel that read what its predecessor writes before its
 * griddepcontrol.wait, or wrote what its predecessor reads, would race and differ. On a GPU before sm_90
 * both run without PDL's attribute and agree trivially (printed). m's weights bound in encoding enc. */
static void switch_exact(const tm_engine_vt *vt, eng cpu, const tm_model *m, tm_dtype enc, const int32_t *ids, int graphs,
                         const char *env)
{
    enum { NS = 3, BSTEPS = 8, SSTEPS = 4 };
    const int len[NS] = {NP, 20, NLONG};
    int V = m->V, ok = 1;
    tm_err err = {0};
    tm_engine_opts o = {.weight_enc = enc, .max_ctx = CTX, .roles = TM_ROLE_DECODE};
    eng g[2] = {{vt, NULL}, {vt, NULL}};
    const char *how = graphs ? "graphs" : "one by one";
    tm_kv_cache *kv[2];
    tm_kv_seq sq[2][NS];
    float *lg[2];
    memset(sq, 0, sizeof sq);
    for (int e = 0; e < 2; e++) {
        char was[16] = "";
        const char *v = getenv(env);
        if (v) snprintf(was, sizeof was, "%s", v);
        if (e) setenv(env, "0", 1);
        if (!graphs) setenv("TANDEM_CUDA_GRAPHS", "0", 1);
        CHECKF(vt->bind(&g[e].ctx, m, &o, &err) == TM_OK, "bind (%s %s): %s", env, e ? "0" : "default", err.msg);
        if (v) setenv(env, was, 1); /* main's TANDEM_CUDA_FUSE_RES=1 stays */
        else unsetenv(env);
        unsetenv("TANDEM_CUDA_GRAPHS");
        kv[e] = cache_of(m, TM_DT_BF16, 64);
        /* engine 0 fills the engine's own host memory (page-locked: the runtime's logits buffer), 1 malloc's */
        lg[e] = e ? malloc(sizeof(float) * NS * V) : vt->host_alloc(sizeof(float) * NS * V);
        ok = ok && g[e].ctx && kv[e] && lg[e];
        for (int b = 0; b < NS && ok; b++)
            ok = prefill(cpu, kv[e], &sq[e][b], ids + 3 * b, len[b], BSTEPS + SSTEPS) == TM_OK;
    }
#ifdef TM_CUDA /* (without a CUDA build no engine reaches here) */
    unsigned int fl = 0;
    CHECKF(vt->host_alloc && vt->host_free && lg[0] && cudaHostGetFlags(&fl, lg[0]) == cudaSuccess,
           "the cuda engine's host_alloc: not page-locked memory");
#endif
    long same = 0, differ = 0, n_logits = 0;
    int picks = 0, pick_bad = 0;
    for (int s = 0; s < BSTEPS + SSTEPS && ok; s++) {
        int B = s < BSTEPS ? NS : 1, pos[NS], alone = s & 1; /* alone: engine 1 gives only its argmax */
        int32_t tok[NS], am[2][NS];
        for (int b = 0; b < B; b++) pos[b] = len[b] + s, tok[b] = ids[700 + 5 * s + b];
        for (int e = 0; e < 2 && ok; e++) {
            tm_kv_seq *ps[NS] = {&sq[e][0], &sq[e][1], &sq[e][2]};
            tm_decode_args a = {.B = B, .tokens = tok, .pos = pos, .kv = kv[e], .seqs = ps,
                                .logits = e && alone ? NULL : lg[e], .argmax = am[e]};
            ok = vt->decode(g[e].ctx, &a, &err) == TM_OK;
            CHECKF(ok, "decode (%s %s, argmax%s): %s", env, e ? "0" : "default", e && alone ? " alone" : "", err.msg);
        }
        for (size_t i = 0; ok && !alone && i < (size_t)B * V; i++)
            if (memcmp(&lg[0][i], &lg[1][i], sizeof(float))) differ++;
            else same++;
        n_logits += alone ? 0 : (long)B * V;
        for (int b = 0; ok && b < B; b++) {
            int32_t want = tm_argmax_f32(lg[0] + (size_t)b * V, V);
            picks += 2, pick_bad += (am[0][b] != want) + (am[1][b] != want);
        }
    }
    CHECKF(ok, "%s default / 0 (%s, %s): the steps did not run", env, tm_dtype_name(enc), how);
    CHECKF(ok && differ == 0 && same == n_logits && n_logits > 0, "%s default / 0 (%s, %s): %ld of %ld logits differ",
           env, tm_dtype_name(enc), how, differ, differ + same);
    CHECKF(ok && pick_bad == 0 && picks == 2 * (BSTEPS * NS + SSTEPS),
           "the engine's argmax: %d of %d picks differ from tm_argmax_f32's", pick_bad, picks);
    printf("%s default / 0 (%s weights, %s): %ld logits, %d greedy picks over %d steps; %ld bit-identical, %d "
           "picks wrong\n", env, tm_dtype_name(enc), how, differ + same, picks, BSTEPS + SSTEPS, same, pick_bad);
    for (int e = 0; e < 2; e++) {
        for (int b = 0; b < NS; b++) tm_kv_seq_release(kv[e], &sq[e][b]);
        tm_kv_cache_free(kv[e]);
        if (g[e].ctx) vt->unbind(g[e].ctx);
        if (e) free(lg[e]);
        else vt->host_free(lg[e]);
    }
}

/* cu_argmax on crafted rows against tm_argmax_f32 */
static void argmax_kernel(void)
{
#ifdef TM_CUDA
    enum { BMAX = 64 };
    static const int Vs[] = {1, 5, 4096, 4097, 151936, 200003};
    int bad = 0, rows = 0;
    uint32_t r = 12345;
    float *dl = NULL;
    int32_t *dout = NULL, out[BMAX];
    unsigned *cnt = NULL;
    void *scr = NULL;
    float *h = malloc(sizeof(float) * BMAX * 200003);
    int ok = h && cudaMalloc((void **)&dl, sizeof(float) * BMAX * 200003) == cudaSuccess &&
             cudaMalloc((void **)&dout, sizeof(int32_t) * BMAX) == cudaSuccess &&
             cudaMalloc((void **)&cnt, sizeof(unsigned) * BMAX) == cudaSuccess &&
             cudaMemset(cnt, 0, sizeof(unsigned) * BMAX) == cudaSuccess &&
             cudaMalloc(&scr, cu_argmax_scratch(BMAX)) == cudaSuccess;
    CHECK(ok);
    for (size_t vi = 0; ok && vi < sizeof Vs / sizeof Vs[0]; vi++)
        for (int B = 1; ok && B <= BMAX; B = B == 1 ? 3 : B == 3 ? BMAX : BMAX + 1) {
            int V = Vs[vi];
            for (int b = 0; b < B; b++) {
                float *x = h + (size_t)b * V;
                int kind = b % 8;
                for (int i = 0; i < V; i++) {
                    r = r * 1664525u + 1013904223u;
                    x[i] = (float)(int)(r >> 8 & 0xffff) / 256.0f - 128.0f;
                }
                if (kind == 1) /* a tie of the largest in several segments: the first wins */
                    for (int i = V / 3; i < V; i += V / 4 + 1) x[i] = 1000.0f;
                if (kind == 2) /* NaN everywhere but a few, the largest of which is not the first */
                    for (int i = 0; i < V; i++) x[i] = i % 97 == 5 ? (float)(i % 13) : NAN;
                if (kind == 3) /* no finite logit: NaN and -inf */
                    for (int i = 0; i < V; i++) x[i] = i & 1 ? NAN : -INFINITY;
                if (kind == 4) /* +inf twice, NaN before them */
                    x[V - 1] = INFINITY, x[V / 2] = INFINITY, x[0] = NAN;
                if (kind == 5) /* every logit -inf but the last */
                    for (int i = 0; i < V; i++) x[i] = i == V - 1 ? -1e30f : -INFINITY;
                if (kind == 6) /* all equal: index 0 */
                    for (int i = 0; i < V; i++) x[i] = 0.5f;
            }
            ok = cudaMemcpy(dl, h, sizeof(float) * (size_t)B * V, cudaMemcpyHostToDevice) == cudaSuccess;
            for (int rep = 0; ok && rep < 2; rep++) { /* twice: the merge's counts reset themselves */
                cu_argmax(NULL, dl, B, V, scr, cnt, dout);
                ok = cudaMemcpy(out, dout, sizeof(int32_t) * (size_t)B, cudaMemcpyDeviceToHost) == cudaSuccess;
                for (int b = 0; ok && b < B; b++) {
                    int32_t want = tm_argmax_f32(h + (size_t)b * V, V);
                    rows++;
                    if (out[b] != want && bad++ < 5) printf("argmax: V %d row %d: %d, want %d\n", V, b, out[b], want);
                }
            }
        }
    CHECKF(ok, "argmax kernel: a CUDA call failed");
    CHECKF(bad == 0 && rows > 0, "argmax kernel: %d of %d rows wrong", bad, rows);
    printf("argmax kernel: %d rows (NaN, -inf, +inf, ties, no finite logit), %d wrong\n", rows, bad);
    cudaFree(dl), cudaFree(dout), cudaFree(cnt), cudaFree(scr);
    free(h);
#endif
}

int main(void)
{
    const tm_engine_vt *vt = tm_engine_find("cuda"), *cvt = tm_engine_find("cpu-avx512");
    tm_engine_caps caps;
    /* the residual epilogue wherever it can run (by default only where a GEMV launch fills the GPU, which
       the conformance model's small matrices never do): the packed steps below run it, switch_exact
       checks it bit-identical to the unfused steps */
    setenv("TANDEM_CUDA_FUSE_RES", "1", 1);
    tm_err err = {0};
    if (!vt) {
        printf("SKIP cuda decode: not in this build (make CUDA=1)\n");
        return th_done("test_cuda_decode");
    }
    if (vt->probe(&caps, &err) != TM_OK) {
        printf("SKIP cuda decode: %s\n", err.msg);
        return th_done("test_cuda_decode");
    }
    CHECK(caps.roles & TM_ROLE_DECODE && caps.max_batch >= 8 && caps.argmax);
    argmax_kernel();
    CHECKF(cvt && cvt->probe(&caps, &err) == TM_OK, "cpu-avx512: %s", err.msg);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/conformance/models/llama3/hf", th_shared());
    tm_model *m = NULL;
    CHECKF(tm_hf_model_open(&m, dir, NULL, &err) == TM_OK, "%s: %s", dir, err.msg);
    eng cpu = {cvt, NULL};
    tm_engine_opts o = {.weight_enc = TM_DT_BF16, .max_ctx = CTX, .roles = TM_ROLE_DECODE};
    if (m) CHECKF(cvt->bind(&cpu.ctx, m, &o, &err) == TM_OK, "bind: %s", err.msg);
    /* the steps captured as CUDA graphs and replayed (the default), then launched one by one; then (graphs)
       each row's keys in one segment of the decode attention, in chunks with the running rescale: these three
       with the decode attention of a kv head's query heads on tensor cores (k_attn_dec_mma) at every span; then
       the decode attention a block a query head (k_attn_dec); then the kernel by the step's span */
    static const char *const name[] = {"CUDA graphs", "TANDEM_CUDA_GRAPHS=0: launched one by one",
                                       "TANDEM_CUDA_DEC_SEGS=0: one segment a row",
                                       "TANDEM_CUDA_DEC_MMA=0: the decode attention a block a query head",
                                       "TANDEM_CUDA_DEC_MMA_FROM=44: the decode attention's kernel by the step's span"};
    for (int g = 0; m && cpu.ctx && g < 5; g++) {
        eng gpu = {vt, NULL};
        if (g == 1) setenv("TANDEM_CUDA_GRAPHS", "0", 1);
        if (g == 2) setenv("TANDEM_CUDA_DEC_SEGS", "0", 1);
        if (g == 3) setenv("TANDEM_CUDA_DEC_MMA", "0", 1);
        setenv("TANDEM_CUDA_DEC_MMA_FROM", g == 4 ? "44" : "0", 1);
        CHECKF(vt->bind(&gpu.ctx, m, &o, &err) == TM_OK, "bind: %s", err.msg);
        unsetenv("TANDEM_CUDA_GRAPHS");
        unsetenv("TANDEM_CUDA_DEC_SEGS");
        unsetenv("TANDEM_CUDA_DEC_MMA");
        unsetenv("TANDEM_CUDA_DEC_MMA_FROM");
        if (!gpu.ctx) continue;
        printf("-- %s\n", name[g]);
        int32_t ids[1024];
        for (int i = 0; i < 1024; i++) ids[i] = (int32_t)((i * 2654435761u + 17) % (unsigned)m->V);
        long k0[2], k1[2], want[2] = {0, 0};
        kernel_steps(gpu, k0);
        one_sequence(gpu, cpu, m, ids, TM_DT_BF16);
        kernel_steps(gpu, k1);
        /* one_sequence's GPU steps: positions NP .. NP + STEPS - 1, then the last 3 of its mixed part; each a step
           of span pos + 1, by kernel as the section's rule has it */
        for (int pos = NP; pos < NP + STEPS + 6; pos++) {
            if (pos >= NP + STEPS && pos < NP + STEPS + 3) continue; /* the CPU's */
            want[g == 3 ? 0 : g == 4 ? pos + 1 >= 44 : 1]++;
        }
        printf("the bf16 sequence's steps by the attention's kernel: %ld a block a query head, %ld grouped (want %ld, "
               "%ld)\n", k1[0] - k0[0], k1[1] - k0[1], want[0], want[1]);
        CHECKF(k1[0] - k0[0] == want[0] && k1[1] - k0[1] == want[1], "%s: steps by kernel %ld / %ld, want %ld / %ld",
               name[g], k1[0] - k0[0], k1[1] - k0[1], want[0], want[1]);
        one_sequence(gpu, cpu, m, ids, TM_DT_Q8PC);
        batch(gpu, cpu, m, ids);
        refusals(gpu, m, ids);
        kernel_steps(gpu, k1);
        /* the section's every step: one kernel, the other, or both (FROM=44: the batch of 600 positions grouped,
           its short rows alone a block a query head) */
        CHECKF(g == 3 ? k1[1] == 0 : g == 4 ? k1[0] > want[0] && k1[1] > want[1] : k1[0] == 0,
               "%s: %ld steps a block a query head, %ld grouped", name[g], k1[0], k1[1]);
        vt->unbind(gpu.ctx);
        if (g >= 2) continue;
        packed(vt, dir, ids, !g, g ? TM_DT_Q8PC : TM_DT_BF16);
        switch_exact(vt, cpu, m, TM_DT_BF16, ids, !g, "TANDEM_CUDA_PDL");
        tm_rt_model *rm = NULL; /* the decode stage converted (int4 g64 layers): the GEMV */
        CHECKF(tm_rt_model_open(&rm, dir, &err) == TM_OK, "%s: %s", dir, err.msg);
        for (int k = 0; rm && k < 2; k++)
            switch_exact(vt, cpu, rm->decode, rm->decode_enc, ids, !g, k ? "TANDEM_CUDA_FUSE_RES" : "TANDEM_CUDA_PDL");
        tm_rt_model_free(rm);
    }
    if (cpu.ctx) cvt->unbind(cpu.ctx);
    tm_model_free(m);
    return th_done("test_cuda_decode");
}
