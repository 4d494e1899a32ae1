/* tests/test_cuda.c: the CUDA engine's prefill role (engine/cuda) through the engine interface, on the
 * conformance Llama (../shared/conformance/models/llama3, its f32 checkpoint) against the float32
 * reference engine and the AVX-512 engine:
 *   - one chunk's last-row logits against the reference's (KL, top-1, max difference);
 *   - the KV rows it writes into bf16 pages against the AVX-512 engine's for the same chunk;
 *   - a prompt in two chunks gives the one-chunk logits; with another sequence prefilled in between
 *     (the device mirror no longer holds the first chunk: it is read back from the pages) the same;
 *     with int8 pages, within int8's bound; on_layer reports every layer once, in order;
 *   - every row's logits (against the reference's rows) and hidden states (against the AVX-512 engine's),
 *     the hidden rows first, in order (caps.row_logits, row_hidden: prompt scores and embeddings);
 *   - refusals: a token outside the vocabulary, positions past the engine's context, a cache of
 *     another geometry;
 *   - all of the above on three latent-attention fixtures (tests/data/refs: deepseek_v2_lite, deepseek_v3_yarn,
 *     glm4_moe_lite);
 *   - a session with the GPU prefilling and the CPU decoding: the prefill-only route (the GPU does
 *     both) scores what the hybrid route does.
 * Without a CUDA build (make CUDA=1) or a GPU it prints SKIP and checks nothing. test_cuda_decode tests
 * the decode role; test_engine_conf runs both roles on every conformance architecture. */
#include "harness.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#include "core/threadpool.h"
#include "engine/engine.h"
#include "engine/ref/ref.h"
#include "hf/hf_model.h"
#include "model/model.h"
#include "pkg/convert.h"
#include "runtime/rt_model.h"
#include "runtime/session.h"

enum { NTOK = 37, SPLIT = 20 };

static int layers_seen[256], n_seen;
static void on_layer(void *ud, int l)
{
    (void)ud;
    if (n_seen < 256) layers_seen[n_seen++] = l;
}

/* prefill tokens[pos0, pos0 + n) as one chunk of T rows into (kv, seq); logits of the last row */
static int chunk(const tm_engine_vt *vt, void *ctx, tm_kv_cache *kv, tm_kv_seq *seq, const int32_t *ids, int pos0, int n,
                 int T, float *logits, tm_err *err)
{
    int32_t buf[512];
    for (int i = 0; i < T; i++) buf[i] = ids[pos0 + (i < n ? i : n - 1)];
    if (tm_kv_seq_reserve(kv, seq, pos0 + T, err) != TM_OK) return err->code;
    tm_prefill_args a = {.tokens = buf, .T = T, .n_valid = n, .pos0 = pos0, .kv = kv, .seq = seq, .logits = logits,
                         .on_layer = on_layer};
    return vt->prefill(ctx, &a, err);
}

static tm_kv_cache *cache_of(const tm_model *m, tm_dtype dt)
{
    tm_kv_cache *kv = NULL;
    tm_err err = {0};
    CHECKF(tm_kv_cache_init(&kv, &(tm_kv_cache_opts){m->L, m->Hk, m->Dh, 16, 64, dt, 0}, &err) == TM_OK, "%s", err.msg);
    return kv;
}

/* every row's outputs (caps.row_logits, row_hidden), kept by the callbacks */
typedef struct rows_got {
    float *logits, *hidden;           /* [NTOK][V], [NTOK][D] */
    int V, D, n_logits, n_hidden, in_order;
} rows_got;
static void got_logits(void *ud, int t, const float *l)
{
    rows_got *g = ud;
    g->in_order &= t == g->n_logits && g->n_hidden == NTOK;
    if (t >= 0 && t < NTOK) memcpy(g->logits + (size_t)t * g->V, l, sizeof(float) * (size_t)g->V);
    g->n_logits++;
}
static void got_hidden(void *ud, int t, const float *h)
{
    rows_got *g = ud;
    g->in_order &= t == g->n_hidden && g->n_logits == 0;
    if (t >= 0 && t < NTOK) memcpy(g->hidden + (size_t)t * g->D, h, sizeof(float) * (size_t)g->D);
    g->n_hidden++;
}

/* one chunk with every row's logits and hidden state: the logits against the reference's rows, the last
 * against the chunk's own logits (last), the hidden rows against the AVX-512 engine's */
static void rows_checks(const tm_engine_vt *vt, void *ctx, const tm_model *m, const int32_t *ids, tm_kv_cache *kv,
                        const float *last)
{
    tm_err err = {0};
    int V = m->V, D = m->D;
    tm_engine_caps caps;
    CHECK(vt->probe(&caps, &err) == TM_OK && caps.row_logits && caps.row_hidden);
    float *ref = malloc(sizeof(float) * (size_t)NTOK * V);
    tm_ref *r = NULL;
    CHECK(tm_ref_init(&r, m, 128, 2, &err) == TM_OK);
    CHECK(r && tm_ref_forward(r, ids, NTOK, 0, ref, 1, &err) == TM_OK);
    tm_ref_free(r);
    rows_got g[2];
    const tm_engine_vt *cpu = tm_engine_find("cpu-avx512");
    tm_engine_caps cc;
    tm_err pe = {0};
    int have_cpu = cpu && cpu->probe(&cc, &pe) == TM_OK;
    for (int k = 0; k < 1 + have_cpu; k++) {
        g[k] = (rows_got){malloc(sizeof(float) * (size_t)NTOK * V), malloc(sizeof(float) * (size_t)NTOK * D), V, D, 0, 0, 1};
        const tm_engine_vt *e = k ? cpu : vt;
        void *c = ctx;
        tm_engine_opts o = {.weight_enc = TM_DT_BF16, .max_ctx = 256};
        if (k) CHECK(cpu->bind(&c, m, &o, &err) == TM_OK);
        tm_kv_seq s = {0};
        int32_t buf[64];
        for (int i = 0; i < 64; i++) buf[i] = ids[i < NTOK ? i : NTOK - 1];
        CHECK(tm_kv_seq_reserve(kv, &s, 64, &err) == TM_OK);
        tm_prefill_args a = {.tokens = buf, .T = 64, .n_valid = NTOK, .kv = kv, .seq = &s, .on_row_logits = got_logits,
                             .on_row_hidden = got_hidden, .row_ud = &g[k]};
        CHECKF(c && e->prefill(c, &a, &err) == TM_OK, "every row: %s", err.msg);
        tm_kv_seq_release(kv, &s);
        if (k && c) cpu->unbind(c);
    }
    CHECKF(g[0].n_logits == NTOK && g[0].n_hidden == NTOK && g[0].in_order, "rows: %d logits, %d hidden, in order %d",
           g[0].n_logits, g[0].n_hidden, g[0].in_order);
    double worst = 0, dl = th_max_diff(g[0].logits + (size_t)(NTOK - 1) * V, last, V);
    int agree = 0;
    for (int t = 0; t < NTOK; t++) {
        int a;
        worst = fmax(worst, th_kl_row(ref + (size_t)t * V, g[0].logits + (size_t)t * V, V, &a));
        agree += a;
    }
    printf("every row's logits: worst KL %.2e against the reference's rows, top-1 %d of %d; the last row vs the "
           "chunk's logits: max |diff| %.3e\n", worst, agree, NTOK, dl);
    CHECKF(worst < 1e-3 && agree == NTOK, "row logits: KL %.3e, top-1 %d of %d", worst, agree, NTOK);
    double lm = 0;
    for (int v = 0; v < V; v++) lm = fmax(lm, fabs(last[v]));
    CHECKF(dl < 1e-3 * lm, "the last row's logits differ from the chunk's by %.3e of %.3e", dl, lm); /* the head over
                                                   16 rows may take another cuBLAS algorithm than over one */
    if (have_cpu) {
        double least = 1;
        for (int t = 0; t < NTOK; t++) {
            double ab = 0, aa = 0, bb = 0;
            for (int d = 0; d < D; d++) {
                double x = g[0].hidden[(size_t)t * D + d], y = g[1].hidden[(size_t)t * D + d];
                ab += x * y, aa += x * x, bb += y * y;
            }
            least = fmin(least, ab / sqrt(aa * bb + 1e-30));
        }
        printf("every row's hidden state vs cpu-avx512's: least cosine %.6f\n", least);
        CHECKF(least > 0.9999, "hidden rows: cosine %.6f", least);
    }
    for (int k = 0; k < 1 + have_cpu; k++) free(g[k].logits), free(g[k].hidden);
    free(ref);
}

static void engine_checks(const tm_engine_vt *vt, const tm_model *m, const int32_t *ids)
{
    tm_err err = {0};
    int V = m->V;
    float *ref = malloc(sizeof(float) * (size_t)V), *one = malloc(sizeof(float) * (size_t)V);
    float *two = malloc(sizeof(float) * (size_t)V), *got = malloc(sizeof(float) * (size_t)V);
    tm_ref *r = NULL;
    CHECK(tm_ref_init(&r, m, 128, 2, &err) == TM_OK);
    CHECK(r && tm_ref_forward(r, ids, NTOK, 0, ref, 0, &err) == TM_OK);
    tm_ref_free(r);
    void *ctx = NULL;
    tm_engine_opts o = {.weight_enc = TM_DT_BF16, .max_ctx = 256};
    CHECKF(vt->bind(&ctx, m, &o, &err) == TM_OK, "bind: %s", err.msg);
    if (!ctx) goto done;

    /* one chunk (64 rows, 37 real) against the reference */
    tm_kv_cache *kv = cache_of(m, TM_DT_BF16);
    tm_kv_seq s1 = {0}, s2 = {0};
    n_seen = 0;
    CHECKF(chunk(vt, ctx, kv, &s1, ids, 0, NTOK, 64, one, &err) == TM_OK, "%s", err.msg);
    int ok = n_seen == m->L;
    for (int l = 0; l < n_seen; l++) ok &= layers_seen[l] == l;
    CHECKF(ok, "on_layer: %d calls for %d layers, in order", n_seen, m->L);
    int agree;
    double kl = th_kl_row(ref, one, V, &agree), md = th_max_diff(ref, one, V), mx = 0;
    for (int v = 0; v < V; v++) mx = fmax(mx, fabs(ref[v]));
    printf("one chunk vs the f32 reference: KL %.2e, top-1 %s, max |diff| %.3e of %.3e\n", kl, agree ? "agrees" : "DIFFERS",
           md, mx);
    CHECKF(kl < 1e-3 && agree && md < 0.05 * mx, "KL %.3e, max diff %.3e", kl, md);

    /* its KV rows against the AVX-512 engine's for the same chunk */
    const tm_engine_vt *cpu = tm_engine_find("cpu-avx512");
    tm_engine_caps cc;
    tm_err pe = {0};
    if (cpu && cpu->probe(&cc, &pe) == TM_OK) {
        void *cctx = NULL;
        tm_kv_cache *kv2 = cache_of(m, TM_DT_BF16);
        tm_kv_seq sc = {0};
        CHECK(cpu->bind(&cctx, m, &o, &err) == TM_OK);
        CHECK(cctx && chunk(cpu, cctx, kv2, &sc, ids, 0, NTOK, 64, got, &err) == TM_OK);
        double dmax = 0, amax = 0;
        for (int l = 0; l < m->L; l++)
            for (int g = 0; g < m->Hk; g++)
                for (int p = 0; p < NTOK; p++)
                    for (int kvp = 0; kvp < 2; kvp++) {
                        const uint16_t *a = (const uint16_t *)(kvp ? tm_kv_page_v(kv, s1.pages[p / 16], l, g)
                                                                    : tm_kv_page_k(kv, s1.pages[p / 16], l, g)) + (p % 16) * m->Dh;
                        const uint16_t *b = (const uint16_t *)(kvp ? tm_kv_page_v(kv2, sc.pages[p / 16], l, g)
                                                                    : tm_kv_page_k(kv2, sc.pages[p / 16], l, g)) + (p % 16) * m->Dh;
                        for (int d = 0; d < m->Dh; d++) {
                            dmax = fmax(dmax, fabs(tm_bf16_to_f32(a[d]) - tm_bf16_to_f32(b[d])));
                            amax = fmax(amax, fabs(tm_bf16_to_f32(b[d])));
                        }
                    }
        printf("KV pages vs cpu-avx512's: max |diff| %.3e of %.3e\n", dmax, amax);
        CHECKF(amax > 0 && dmax <= 0.03 * amax, "KV rows differ by %.3e of %.3e", dmax, amax);
        tm_kv_seq_release(kv2, &sc);
        tm_kv_cache_free(kv2);
        if (cctx) cpu->unbind(cctx);
    }
    tm_kv_seq_release(kv, &s1);

    /* two chunks: the same logits; then with another sequence in between (the mirror re-read from the pages) */
    CHECK(chunk(vt, ctx, kv, &s1, ids, 0, SPLIT, 64, NULL, &err) == TM_OK);
    CHECK(chunk(vt, ctx, kv, &s1, ids, SPLIT, NTOK - SPLIT, 64, two, &err) == TM_OK);
    double d2 = th_max_diff(one, two, V);
    printf("two chunks vs one: max |diff| %.3e\n", d2);
    CHECKF(d2 < 0.01 * mx, "two chunks differ from one by %.3e", d2);
    tm_kv_seq_release(kv, &s1);
    CHECK(chunk(vt, ctx, kv, &s1, ids, 0, SPLIT, 64, NULL, &err) == TM_OK);
    int32_t other[64];
    for (int i = 0; i < 64; i++) other[i] = (ids[i % NTOK] * 7 + 3) % V;
    CHECK(chunk(vt, ctx, kv, &s2, other, 0, 30, 64, NULL, &err) == TM_OK);
    CHECK(chunk(vt, ctx, kv, &s1, ids, SPLIT, NTOK - SPLIT, 64, got, &err) == TM_OK);
    double d3 = th_max_diff(two, got, V);
    printf("resumed after another sequence (mirror from the pages) vs two chunks: max |diff| %.3e\n", d3);
    CHECKF(d3 < 1e-3 * mx, "resumed chunk differs by %.3e", d3);
    tm_kv_seq_release(kv, &s1);
    tm_kv_seq_release(kv, &s2);

    /* int8 pages, the same interleaving */
    tm_kv_cache *kq = cache_of(m, TM_DT_Q8PC);
    CHECK(chunk(vt, ctx, kq, &s1, ids, 0, SPLIT, 64, NULL, &err) == TM_OK);
    CHECK(chunk(vt, ctx, kq, &s2, other, 0, 30, 64, NULL, &err) == TM_OK);
    CHECK(chunk(vt, ctx, kq, &s1, ids, SPLIT, NTOK - SPLIT, 64, got, &err) == TM_OK);
    kl = th_kl_row(ref, got, V, &agree);
    printf("int8 pages, resumed: KL %.2e against the reference, top-1 %s\n", kl, agree ? "agrees" : "DIFFERS");
    CHECKF(kl < 1e-3 && agree, "int8 KV: KL %.3e", kl);
    {   /* an int8 row as the cache's rule writes it: scale = max|x| / 127, |q| <= 127, reached by the largest */
        const uint8_t *b = tm_kv_page_k(kq, s1.pages[0], 0, 0);
        float sc;
        memcpy(&sc, b, 4);
        const int8_t *q = (const int8_t *)(b + 4 * 16);
        int qmax = 0;
        for (int d = 0; d < m->Dh; d++) qmax = abs(q[d]) > qmax ? abs(q[d]) : qmax;
        CHECKF(sc > 0 && qmax == 127, "int8 row 0: scale %g, max |q| %d", sc, qmax);
    }
    tm_kv_seq_release(kq, &s1);
    tm_kv_seq_release(kq, &s2);
    tm_kv_cache_free(kq);

    /* the attention with its keys split in 3 segments and merged (long contexts; here two of them
       empty) on the same chunk */
    const char *envs[1][2] = {{"TANDEM_CUDA_SPLIT", "3"}};
    for (int v = 0; v < 1; v++) {
        void *c2 = NULL;
        setenv(envs[v][0], envs[v][1], 1);
        CHECK(vt->bind(&c2, m, &o, &err) == TM_OK);
        unsetenv(envs[v][0]);
        tm_kv_seq s3 = {0};
        CHECK(c2 && chunk(vt, c2, kv, &s3, ids, 0, NTOK, 64, got, &err) == TM_OK);
        double d4 = th_max_diff(one, got, V);
        printf("%s=%s vs the default attention: max |diff| %.3e\n", envs[v][0], envs[v][1], d4);
        CHECKF(d4 < 0.01 * mx, "%s=%s: the attention differs by %.3e", envs[v][0], envs[v][1], d4);
        tm_kv_seq_release(kv, &s3);
        if (c2) vt->unbind(c2);
    }

    /* a longer prompt (200 tokens in chunks of 128 + 72) attends over more key tiles: split in 3 against
       whole, and whole against the reference */
    {
        enum { NL = 200 };
        int32_t lids[NL];
        for (int i = 0; i < NL; i++) lids[i] = (int32_t)((i * 2246822519u + 5) % (unsigned)V);
        float *lref = malloc(sizeof(float) * (size_t)V);
        tm_ref *r2 = NULL;
        CHECK(tm_ref_init(&r2, m, 256, 2, &err) == TM_OK);
        CHECK(r2 && tm_ref_forward(r2, lids, NL, 0, lref, 0, &err) == TM_OK);
        tm_ref_free(r2);
        float *lg[2] = {malloc(sizeof(float) * (size_t)V), malloc(sizeof(float) * (size_t)V)};
        for (int v = 0; v < 2; v++) {
            void *c2 = NULL;
            if (v) setenv("TANDEM_CUDA_SPLIT", "3", 1);
            CHECK(vt->bind(&c2, m, &o, &err) == TM_OK);
            unsetenv("TANDEM_CUDA_SPLIT");
            tm_kv_seq s3 = {0};
            CHECK(c2 && chunk(vt, c2, kv, &s3, lids, 0, 128, 128, NULL, &err) == TM_OK);
            CHECK(c2 && chunk(vt, c2, kv, &s3, lids, 128, NL - 128, 128, lg[v], &err) == TM_OK);
            tm_kv_seq_release(kv, &s3);
            if (c2) vt->unbind(c2);
        }
        double ds = th_max_diff(lg[0], lg[1], V), lm = 0;
        for (int v = 0; v < V; v++) lm = fmax(lm, fabs(lref[v]));
        kl = th_kl_row(lref, lg[0], V, &agree);
        printf("200 tokens: KL %.2e against the reference, top-1 %s; split in 3 vs whole: max |diff| %.3e\n", kl,
               agree ? "agrees" : "DIFFERS", ds);
        CHECKF(kl < 1e-3 && agree, "200 tokens: KL %.3e", kl);
        CHECKF(ds < 0.01 * lm, "200 tokens, split: %.3e", ds);
        free(lref);
        free(lg[0]);
        free(lg[1]);
    }

    rows_checks(vt, ctx, m, ids, kv, one);

    /* refusals */
    int32_t bad[64];
    memcpy(bad, ids, sizeof(int32_t) * NTOK);
    bad[5] = V;
    tm_prefill_args a = {.tokens = bad, .T = 64, .n_valid = NTOK, .kv = kv, .seq = &s1};
    CHECK(tm_kv_seq_reserve(kv, &s1, 64, &err) == TM_OK);
    CHECK(vt->prefill(ctx, &a, &err) == TM_E_INVALID && strstr(err.msg, "vocabulary"));
    a.tokens = ids, a.T = 64, a.pos0 = 256 - 32;
    CHECK(vt->prefill(ctx, &a, &err) == TM_E_LIMIT);
    tm_kv_cache *kx = NULL;
    tm_kv_seq sx = {0};
    CHECK(tm_kv_cache_init(&kx, &(tm_kv_cache_opts){m->L + 1, m->Hk, m->Dh, 16, 8, TM_DT_BF16, 0}, &err) == TM_OK);
    CHECK(kx && tm_kv_seq_reserve(kx, &sx, 64, &err) == TM_OK);
    tm_prefill_args ax = {.tokens = ids, .T = 64, .n_valid = NTOK, .kv = kx, .seq = &sx};
    CHECK(kx && vt->prefill(ctx, &ax, &err) == TM_E_INVALID && strstr(err.msg, "layers"));
    tm_kv_seq_release(kx, &sx);
    tm_kv_cache_free(kx);
    tm_kv_seq_release(kv, &s1);
    tm_kv_cache_free(kv);
    vt->unbind(ctx);
done:
    free(ref);
    free(one);
    free(two);
    free(got);
}

int main(void)
{
    const tm_engine_vt *vt = tm_engine_find("cuda");
    tm_engine_caps caps;
    tm_err err = {0};
    if (!vt) {
        printf("SKIP cuda: not in this build (make CUDA=1)\n");
        return th_done("test_cuda");
    }
    if (vt->probe(&caps, &err) != TM_OK) {
        printf("SKIP cuda: %s\n", err.msg);
        return th_done("test_cuda");
    }
    char dir[512];
    snprintf(dir, sizeof dir, "%s/conformance/models/llama3/hf", th_shared());
    tm_model *m = NULL;
    CHECKF(tm_hf_model_open(&m, dir, NULL, &err) == TM_OK, "%s: %s", dir, err.msg);
    int32_t ids[64];
    for (int i = 0; m && i < 64; i++) ids[i] = (int32_t)((i * 2654435761u + 17) % (unsigned)m->V);
    if (m) engine_checks(vt, m, ids);
    tm_model_free(m);

    /* latent-attention models (engine/cuda/cu_mla.h): the same checks on three fixtures: DeepSeek-V2-Lite's form
       (no q_lora), DeepSeek-V3's with q/kv_a biases, GLM-4.7-Flash's (q_lora; values narrower than the latent) */
    const char *mla_dirs[] = {"deepseek_v2_lite", "deepseek_v3_yarn", "glm4_moe_lite"};
    for (size_t i = 0; i < sizeof mla_dirs / sizeof mla_dirs[0]; i++) {
        char mdir[256];
        snprintf(mdir, sizeof mdir, "tests/data/refs/%s/hf", mla_dirs[i]);
        tm_model *mla = NULL;
        CHECKF(tm_hf_model_open(&mla, mdir, NULL, &err) == TM_OK, "%s: %s", mdir, err.msg);
        if (!mla) continue;
        CHECK(mla->mla && mla->Hk == 1);
        int32_t mids[64];
        for (int k = 0; k < 64; k++) mids[k] = (int32_t)((k * 2654435761u + 17) % (unsigned)mla->V);
        printf("== %s (latent attention, head_dim %d)\n", mla_dirs[i], mla->Dh);
        engine_checks(vt, mla, mids);
        tm_model_free(mla);
    }

    /* a session: the prefill-only route (the GPU decodes too) against the hybrid one (the CPU decodes) */
    tm_convert_opts co;
    tm_convert_opts_default(&co);
    co.prefill_enc = co.decode_enc = TM_DT_BF16;
    tm_convert_stats cs;
    const char *pkg = "build/test_cuda.tdm";
    CHECKF(tm_convert(dir, pkg, &co, &cs, &err) == TM_OK, "%s", err.msg);
    tm_rt_model *rm = NULL;
    CHECK(tm_rt_model_open(&rm, pkg, &err) == TM_OK);
    unlink(pkg);
    tandem_session_opts so;
    memset(&so, 0, sizeof so);
    so.prefill_engine = "cuda";
    so.decode_engine = "cpu-avx512";
    so.n_threads = 2;
    so.max_ctx = 128;
    tm_session *s = NULL;
    CHECKF(rm && tm_session_new(&s, rm, &so, &err) == TM_OK, "%s", err.msg);
    if (s) {
        enum { N = 40, NPF = 24 };
        int V = rm->decode->V;
        int32_t sid[N];
        for (int i = 0; i < N; i++) sid[i] = (int32_t)((i * 2246822519u + 3) % (unsigned)V);
        float *lh = malloc(sizeof(float) * (size_t)(N - NPF + 1) * V), *lp = malloc(sizeof(float) * (size_t)(N - NPF + 1) * V);
        CHECKF(tm_session_score(s, sid, N, NPF, TANDEM_ROUTE_HYBRID, lh, &err) == TM_OK, "%s", err.msg);
        CHECKF(tm_session_score(s, sid, N, NPF, TANDEM_ROUTE_PREFILL_ONLY, lp, &err) == TM_OK, "%s", err.msg);
        double kl_max = 0;
        int flips = 0;
        for (int r = 0; r <= N - NPF; r++) {
            int agree;
            double kl = th_kl_row(lh + (size_t)r * V, lp + (size_t)r * V, V, &agree);
            kl_max = fmax(kl_max, kl);
            flips += !agree;
        }
        printf("session: prefill-only route (GPU decode) vs hybrid (CPU decode), %d positions: max KL %.2e, %d flips\n",
               N - NPF + 1, kl_max, flips);
        CHECKF(kl_max < 1e-3 && flips <= 1, "prefill-only vs hybrid: max KL %.3e, %d flips", kl_max, flips);
        free(lh);
        free(lp);
    }
    tm_session_free(s);
    tm_rt_model_free(rm);
    return th_done("test_cuda");
}
