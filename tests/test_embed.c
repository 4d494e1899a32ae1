/* tests/test_embed.c: embeddings through the library (tandem_request.embedding) on the demo model.
 *
 * 1. The pooling's arithmetic on every route: a causal model's row i is the last row of the prompt's
 *    first i + 1 tokens, so the mean of a prompt's rows is the mean of its prefixes' last-token
 *    embeddings, and its first token's (cls) the one-token prefix's; unit length where asked; the
 *    routes (int8 prefill weights, int4 decode weights) agree.
 * 2. An embedding beside generation: the same text as without it, the same vector as alone, and
 *    several at once each equal to itself alone.
 * 3. The model's modules (sentence-transformers' modules.json and Pooling config, the older per-mode
 *    flags and version 6's one "pooling_mode"): the default
 *    pooling and Normalize taken from them; a module tandem lacks refused by name; a malformed
 *    modules.json refused where the model opens, naming it. A base model's checkpoint (an embedding
 *    model's, as Qwen3-Embedding's: no "model." prefix, no lm_head though untied): the same vectors
 *    as the model it was cut from, from the directory and from its package; generation refused.
 * 4. POST /v1/embeddings: each vector the library's (unit length, cut to "dimensions" and scaled
 *    again), as floats and as base64, a batch of texts and token ids each as alone, usage; every
 *    malformed field a 400 naming it, a prompt past the context context_length_exceeded.
 * 5. sentence-transformers' own vectors (tests/data/embed_refs.json, tools/gen_embed_refs.py: the
 *    library run on the conformance models, tiny checkpoints of real architectures, each saved as a
 *    sentence-transformers model with a pooling mode and Normalize or not): the directory rebuilt
 *    from the configuration files it wrote, tandem's token ids equal to its, the default pooling and
 *    normalization taken from its files, and the vectors within bounds, on bf16 prefill weights (the
 *    checkpoint's own values) and on the default int8 ones.
 * (Every row's hidden state against the fp32 reference: test_engine.) */
#include "harness.h"
#include "http_client.h"

#include <limits.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/status.h"
#include "pkg/convert.h"
#include "runtime/rt_model.h"
#include "serve/serve.h"
#include "tandem.h"

static const char *DEMO = "models/tiny-classics-llama";
static const char *PROMPT = "The old man looked at the sea and said that";

static tandem_request embed_request(float *out, int pooling, int normalize)
{
    tandem_request r;
    tandem_request_default(&r);
    r.max_tokens = TANDEM_MAX_TOKENS_NONE;
    r.embedding = out;
    r.embed_pooling = pooling;
    r.embed_normalize = normalize;
    return r;
}

/* the embedding of ids [n] (or of prompt where ids is NULL); 0 on success */
static int embed(tandem_session *s, const char *prompt, const int32_t *ids, size_t n, int pooling, int normalize,
                 float *out)
{
    tandem_request r = embed_request(out, pooling, normalize);
    r.prompt = prompt;
    r.prompt_ids = ids;
    r.n_prompt_ids = n;
    tandem_stats st;
    tandem_status ts;
    int rc = tandem_generate(s, &r, th_collect, NULL, &st, &ts);
    CHECKF(rc == 0, "embed: %s", ts.msg);
    CHECKF(rc || (st.n_generated == 0 && !strcmp(st.finish_reason, "length")), "embed generated %d", st.n_generated);
    return rc;
}

static double dot(const float *a, const float *b, int D)
{
    double s = 0;
    for (int d = 0; d < D; d++) s += (double)a[d] * b[d];
    return s;
}

static double cosine(const float *a, const float *b, int D)
{
    return dot(a, b, D) / sqrt(dot(a, a, D) * dot(b, b, D) + 1e-30);
}

/* max |a - b| over max |b| */
static double rel_diff(const float *a, const float *b, int D)
{
    double m = 0, w = 0;
    for (int d = 0; d < D; d++) {
        m = fmax(m, fabs((double)a[d] - b[d]));
        w = fmax(w, fabs((double)b[d]));
    }
    return m / (w + 1e-30);
}

static tandem_session *open_session(tandem_model *m, tandem_route route)
{
    tandem_session_opts o;
    tandem_session_opts_default(&o);
    o.n_threads = 2;
    o.max_ctx = 256;
    o.route = route;
    tandem_session *s = NULL;
    tandem_status st;
    CHECKF(tandem_session_new(&s, m, &o, &st) == 0, "%s", st.msg);
    return s;
}

/* ---- 1. the pooling, route by route ---- */

static void test_pooling(tandem_model *m, int D)
{
    int32_t *ids = NULL;
    size_t n = 0;
    tandem_status st;
    CHECKF(tandem_tokenize(m, PROMPT, strlen(PROMPT), 1, &ids, &n, &st) == 0 && n >= 6, "%s", st.msg);
    if (n < 6) return;
    float *last = calloc((size_t)D * 3, sizeof(float)), *mean = calloc((size_t)D, sizeof(float)),
          *cls = calloc((size_t)D, sizeof(float)), *pre = calloc((size_t)D, sizeof(float)),
          *avg = calloc((size_t)D, sizeof(float)), *unit = calloc((size_t)D, sizeof(float));
    static const tandem_route routes[] = {TANDEM_ROUTE_HYBRID, TANDEM_ROUTE_PREFILL_ONLY, TANDEM_ROUTE_DECODE_ONLY};
    for (int ri = 0; ri < 3; ri++) {
        tandem_session *s = open_session(m, routes[ri]);
        if (!s) continue;
        float *lr = last + (size_t)ri * D;
        /* the default pooling of a model without modules is the last token's */
        CHECK(embed(s, NULL, ids, n, TANDEM_POOL_DEFAULT, 0, lr) == 0);
        CHECK(embed(s, NULL, ids, n, TANDEM_POOL_LAST, 0, pre) == 0 && !memcmp(pre, lr, sizeof(float) * (size_t)D));
        CHECK(embed(s, NULL, ids, n, TANDEM_POOL_MEAN, 0, mean) == 0);
        CHECK(embed(s, NULL, ids, n, TANDEM_POOL_CLS, 0, cls) == 0);
        /* the mean of the prefixes' last rows */
        memset(avg, 0, sizeof(float) * (size_t)D);
        for (size_t i = 1; i <= n; i++) {
            CHECK(embed(s, NULL, ids, i, TANDEM_POOL_LAST, 0, pre) == 0);
            for (int d = 0; d < D; d++) avg[d] += pre[d] / (float)n;
            if (i == 1)
                CHECKF(cosine(cls, pre, D) > 0.99999 && rel_diff(cls, pre, D) < 2e-3,
                       "route %d: cls against the first token alone: cosine %.7f, rel diff %.5f", ri, cosine(cls, pre, D),
                       rel_diff(cls, pre, D));
        }
        CHECKF(cosine(mean, avg, D) > 0.99999 && rel_diff(mean, avg, D) < 2e-3,
               "route %d: mean against the prefixes' mean: cosine %.7f, rel diff %.5f", ri, cosine(mean, avg, D),
               rel_diff(mean, avg, D));
        CHECKF(cosine(mean, lr, D) < 0.9999, "route %d: the mean is not the last row (cosine %.7f)", ri, cosine(mean, lr, D));
        /* unit length: the same direction */
        CHECK(embed(s, NULL, ids, n, TANDEM_POOL_MEAN, 1, unit) == 0);
        double len = sqrt(dot(unit, unit, D)), k = 1.0 / sqrt(dot(mean, mean, D));
        for (int d = 0; d < D; d++) avg[d] = (float)(mean[d] * k);
        CHECKF(fabs(len - 1) < 1e-5 && rel_diff(unit, avg, D) < 1e-5, "route %d: normalized: length %.7f, rel diff %.2g", ri,
               len, rel_diff(unit, avg, D));
        /* text in, the same as its ids (tokenized with the special tokens) */
        CHECK(embed(s, PROMPT, NULL, 0, TANDEM_POOL_LAST, 0, pre) == 0 && !memcmp(pre, lr, sizeof(float) * (size_t)D));
        /* a pooling out of range */
        tandem_request r = embed_request(pre, 9, 0);
        r.prompt = PROMPT;
        tandem_stats stt;
        CHECK(tandem_generate(s, &r, th_collect, NULL, &stt, &st) == TANDEM_E_INVALID && strstr(st.msg, "embed_pooling"));
        tandem_session_free(s);
    }
    /* the routes agree: int8 prefill (hybrid, prefill-only) and int4 decode weights (decode-only) */
    CHECKF(!memcmp(last, last + D, sizeof(float) * (size_t)D), "hybrid and prefill-only prefill on the same engine");
    CHECKF(cosine(last, last + 2 * (size_t)D, D) > 0.99, "hybrid against decode-only: cosine %.5f",
           cosine(last, last + 2 * (size_t)D, D));
    free(ids);
    free(last);
    free(mean);
    free(cls);
    free(pre);
    free(avg);
    free(unit);
}

/* ---- 2. beside generation ---- */

/* route: HYBRID (forced, so a generation's text can be compared with and without an embedding) or
 * AUTO (the router's: embeddings then always go to the prefill side, so they are the same bits
 * whatever else runs) */
static void test_beside_generation(tandem_model *m, int D, tandem_route route)
{
    tandem_session *s = open_session(m, route);
    if (!s) return;
    int exact = route == TANDEM_ROUTE_AUTO;
    float *alone = calloc((size_t)D * 5, sizeof(float)), *with = calloc((size_t)D, sizeof(float));
    const char *prompts[4] = {PROMPT, "Once upon a time", "She opened the door and", "It was a dark and stormy night"};
    for (int i = 0; i < 4; i++) CHECK(embed(s, prompts[i], NULL, 0, TANDEM_POOL_MEAN, 1, alone + (size_t)i * D) == 0);
    /* one request embeds and generates: its text as without the embedding, its vector as alone */
    tandem_request r;
    tandem_request_default(&r);
    r.prompt = PROMPT;
    r.max_tokens = 16;
    r.temperature = 0;
    r.ignore_eos = 1;
    char plain[TH_TEXT_CAP] = "", both[TH_TEXT_CAP] = "";
    tandem_stats st;
    tandem_status ts;
    CHECKF(tandem_generate(s, &r, th_collect, plain, &st, &ts) == 0, "%s", ts.msg);
    r.embedding = with;
    r.embed_pooling = TANDEM_POOL_MEAN;
    r.embed_normalize = 1;
    CHECKF(tandem_generate(s, &r, th_collect, both, &st, &ts) == 0, "%s", ts.msg);
    CHECKF(plain[0] && (exact || !strcmp(plain, both)) && st.n_generated == 16,
           "text '%s' / with an embedding '%s'", plain, both);
    CHECKF(cosine(with, alone, D) > 0.99999, "embedded while generating: cosine %.7f", cosine(with, alone, D));
    /* four embeddings and a generation at once */
    tandem_handle *h[5];
    char gen[TH_TEXT_CAP] = "";
    float *got = calloc((size_t)D * 4, sizeof(float));
    for (int i = 0; i < 5; i++) {
        tandem_request q = embed_request(got + (size_t)i * D, TANDEM_POOL_MEAN, 1);
        q.prompt = i < 4 ? prompts[i] : PROMPT;
        if (i == 4) q = r, q.embedding = NULL;
        CHECKF(tandem_submit(s, &q, th_collect, i == 4 ? gen : NULL, &h[i], &ts) == 0, "%s", ts.msg);
    }
    for (int i = 0; i < 5; i++) CHECKF(tandem_wait(h[i], &st, &ts) == 0, "%s", ts.msg);
    for (int i = 0; i < 4; i++)
        CHECKF(exact ? !memcmp(got + (size_t)i * D, alone + (size_t)i * D, sizeof(float) * (size_t)D)
                     : cosine(got + (size_t)i * D, alone + (size_t)i * D, D) > 0.99999,
               "route %d, at once, prompt %d: cosine %.7f", route, i, cosine(got + (size_t)i * D, alone + (size_t)i * D, D));
    CHECKF(exact || !strcmp(gen, both), "generated beside embeddings: '%s' / '%s'", gen, both);
    free(got);
    free(alone);
    free(with);
    tandem_session_free(s);
}

/* ---- 3. the model's modules ---- */

/* dir := the demo model's files (linked) plus modules.json and 1_Pooling/config.json as given (NULL: none) */
static void st_dir(const char *dir, const char *modules, const char *pooling)
{
    static const char *files[] = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                                  "special_tokens_map.json", "generation_config.json"};
    char path[PATH_MAX];
    mkdir(dir, 0755);
    CHECKF(th_link_files(dir, DEMO, files, sizeof files / sizeof files[0]) == 0, "%s", dir);
    snprintf(path, sizeof path, "%s/modules.json", dir);
    CHECK(th_write_file(path, modules, strlen(modules)) == 0);
    snprintf(path, sizeof path, "%s/1_Pooling", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/1_Pooling/config.json", dir);
    unlink(path);
    if (pooling) CHECK(th_write_file(path, pooling, strlen(pooling)) == 0);
}

static const char *MODS =
    "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
    "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"}%s]";

static void test_modules(int D)
{
    const char *dir = "build/test_embed_st";
    char mods[1024];
    tandem_status st;
    /* mean pooling, then Normalize: the defaults */
    snprintf(mods, sizeof mods, MODS, ",{\"idx\":2,\"name\":\"2\",\"path\":\"2_Normalize\","
                                      "\"type\":\"sentence_transformers.models.Normalize\"}");
    st_dir(dir, mods, "{\"word_embedding_dimension\":64,\"pooling_mode_cls_token\":false,"
                      "\"pooling_mode_mean_tokens\":true,\"pooling_mode_max_tokens\":false,\"include_prompt\":true}");
    tandem_model *m = NULL;
    CHECKF(tandem_model_open(&m, dir, &st) == 0, "%s", st.msg);
    if (m) {
        tandem_model_info info;
        tandem_model_get_info(m, &info);
        CHECKF(info.pooling == TANDEM_POOL_MEAN && info.embed_normalize == 1 && !info.embed_unsupported,
               "pooling %d normalize %d unsupported %s", info.pooling, info.embed_normalize,
               info.embed_unsupported ? info.embed_unsupported : "-");
        tandem_session *s = open_session(m, TANDEM_ROUTE_HYBRID);
        float *a = calloc((size_t)D, sizeof(float)), *b = calloc((size_t)D, sizeof(float));
        if (s) {
            CHECK(embed(s, PROMPT, NULL, 0, TANDEM_POOL_DEFAULT, 1, a) == 0);
            CHECK(embed(s, PROMPT, NULL, 0, TANDEM_POOL_MEAN, 1, b) == 0 && !memcmp(a, b, sizeof(float) * (size_t)D));
        }
        free(a);
        free(b);
        tandem_session_free(s);
        tandem_model_free(m);
    }
    /* modules tandem lacks: a Dense projection, a max pooling; embeddings refused naming them */
    static const struct {
        const char *extra, *pooling, *named;
    } lacks[] = {
        {",{\"idx\":2,\"name\":\"2\",\"path\":\"2_Dense\",\"type\":\"sentence_transformers.models.Dense\"}",
         "{\"pooling_mode_lasttoken\":true}", "sentence_transformers.models.Dense"},
        {"", "{\"pooling_mode_max_tokens\":true}", "pooling_mode_max_tokens"},
        {"", NULL, "Pooling module without its config.json"},
    };
    for (size_t k = 0; k < sizeof lacks / sizeof lacks[0]; k++) {
        snprintf(mods, sizeof mods, MODS, lacks[k].extra);
        st_dir(dir, mods, lacks[k].pooling);
        m = NULL;
        CHECKF(tandem_model_open(&m, dir, &st) == 0, "%s", st.msg);
        if (!m) continue;
        tandem_model_info info;
        tandem_model_get_info(m, &info);
        CHECKF(info.embed_unsupported && strstr(info.embed_unsupported, lacks[k].named), "lacks %zu: %s", k,
               info.embed_unsupported ? info.embed_unsupported : "(none)");
        tandem_session *s = open_session(m, TANDEM_ROUTE_HYBRID);
        float *v = calloc((size_t)D, sizeof(float));
        tandem_request r = embed_request(v, 0, 1);
        r.prompt = PROMPT;
        tandem_stats stt;
        CHECKF(s && tandem_generate(s, &r, th_collect, NULL, &stt, &st) == TANDEM_E_UNSUPPORTED && strstr(st.msg, lacks[k].named),
               "lacks %zu: %s", k, st.msg);
        /* generation is not touched */
        r.embedding = NULL;
        r.max_tokens = 4;
        CHECKF(s && tandem_generate(s, &r, th_collect, NULL, &stt, &st) == 0 && stt.n_generated == 4, "%s", st.msg);
        free(v);
        tandem_session_free(s);
        tandem_model_free(m);
    }
    /* sentence-transformers 6's Pooling config: one "pooling_mode" name (or a list of them) */
    static const struct {
        const char *pooling;
        int rc, pool;
        const char *unsupported;
    } st6[] = {
        {"{\"embedding_dimension\":64,\"pooling_mode\":\"mean\",\"include_prompt\":true}", TM_OK, TANDEM_POOL_MEAN, ""},
        {"{\"pooling_mode\":\"lasttoken\"}", TM_OK, TANDEM_POOL_LAST, ""},
        {"{\"pooling_mode\":[\"cls\"]}", TM_OK, TANDEM_POOL_CLS, ""},
        {"{\"pooling_mode\":\"max\"}", TM_OK, TANDEM_POOL_LAST, "the pooling max"},
        {"{\"pooling_mode\":[\"mean\",\"max\"]}", TM_OK, TANDEM_POOL_LAST, "the pooling of several modes at once"},
        {"{\"pooling_mode\":7}", TM_E_FORMAT, 0, NULL},
    };
    snprintf(mods, sizeof mods, MODS, "");
    for (size_t k = 0; k < sizeof st6 / sizeof st6[0]; k++) {
        tm_embed_cfg c;
        tm_err e = {0};
        int rc = tm_embed_cfg_parse(&c, mods, strlen(mods), st6[k].pooling, strlen(st6[k].pooling), &e);
        CHECKF(rc == st6[k].rc && (rc || (c.pooling == st6[k].pool && !strcmp(c.unsupported, st6[k].unsupported))) &&
                   (!rc || strstr(e.msg, "pooling_mode")),
               "%s: rc %d pooling %d unsupported '%s' %s", st6[k].pooling, rc, c.pooling, c.unsupported, e.msg);
    }
    /* a modules.json that is not JSON: the open fails, naming it */
    st_dir(dir, "[{\"type\": ", NULL);
    m = NULL;
    CHECKF(tandem_model_open(&m, dir, &st) != 0 && !m && strstr(st.msg, "modules.json"), "%s", st.msg);
    tandem_model_free(m);
}

/* dir := the demo model as a base model's checkpoint: every "model." name without it (the embedding
 * model's way), no head, and config.json's tie_word_embeddings false */
static int base_dir(const char *dir)
{
    char path[PATH_MAX], src[PATH_MAX];
    mkdir(dir, 0755);
    snprintf(src, sizeof src, "%s/model.safetensors", DEMO);
    FILE *f = fopen(src, "rb");
    uint64_t hl = 0;
    int ok = f && fread(&hl, 8, 1, f) == 1 && hl < (1u << 24);
    char *hdr = ok ? calloc(1, hl + 1) : NULL;
    ok = ok && hdr && fread(hdr, 1, hl, f) == hl;
    cJSON *h = ok ? cJSON_Parse(hdr) : NULL, *out = cJSON_CreateObject();
    for (cJSON *e = h ? h->child : NULL; e && ok; e = e->next)
        ok = cJSON_AddItemToObject(out, strncmp(e->string, "model.", 6) ? e->string : e->string + 6,
                                   cJSON_Duplicate(e, 1));
    char *nh = ok ? cJSON_PrintUnformatted(out) : NULL;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *g = nh ? fopen(path, "wb") : NULL;
    uint64_t nl = nh ? (strlen(nh) + 7) / 8 * 8 : 0; /* the data stays 8-aligned: the header padded with spaces */
    ok = g && fwrite(&nl, 8, 1, g) == 1 && fwrite(nh, 1, strlen(nh), g) == strlen(nh);
    for (size_t k = nh ? strlen(nh) : 0; ok && k < nl; k++) ok = fputc(' ', g) != EOF;
    char buf[1 << 16];
    for (size_t n; ok && (n = fread(buf, 1, sizeof buf, f)) > 0;) ok = fwrite(buf, 1, n, g) == n;
    ok = (g && fclose(g) == 0) && ok;
    if (f) fclose(f);
    free(hdr);
    free(nh);
    cJSON_Delete(h);
    cJSON_Delete(out);
    /* the config, untied; the tokenizer's files linked */
    snprintf(src, sizeof src, "%s/config.json", DEMO);
    char *cfg = th_slurp(src);
    cJSON *c = cfg ? cJSON_Parse(cfg) : NULL;
    if (c) cJSON_ReplaceItemInObject(c, "tie_word_embeddings", cJSON_CreateFalse());
    char *cs = c ? cJSON_Print(c) : NULL;
    snprintf(path, sizeof path, "%s/config.json", dir);
    ok = ok && cs && th_write_file(path, cs, strlen(cs)) == 0;
    free(cfg);
    free(cs);
    cJSON_Delete(c);
    static const char *files[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"};
    return ok && th_link_files(dir, DEMO, files, sizeof files / sizeof files[0]) == 0 ? 0 : -1;
}

static void test_base_checkpoint(tandem_model *demo, int D)
{
    const char *dir = "build/test_embed_base", *pkg = "build/test_embed_base.tdm";
    CHECK(base_dir(dir) == 0);
    float *want = calloc((size_t)D, sizeof(float)), *got = calloc((size_t)D, sizeof(float));
    tandem_session *s = open_session(demo, TANDEM_ROUTE_AUTO);
    CHECK(s && embed(s, PROMPT, NULL, 0, TANDEM_POOL_MEAN, 1, want) == 0);
    tandem_session_free(s);
    tm_convert_opts co;
    tm_convert_opts_default(&co);
    tm_convert_stats cst;
    tm_err err = {0};
    CHECKF(tm_convert(dir, pkg, &co, &cst, &err) == TM_OK, "%s", err.msg);
    const char *paths[] = {dir, pkg};
    for (int k = 0; k < 2; k++) {
        tandem_model *m = NULL;
        tandem_status st;
        CHECKF(tandem_model_open(&m, paths[k], &st) == 0, "%s: %s", paths[k], st.msg);
        if (!m) continue;
        tandem_model_info info;
        tandem_model_get_info(m, &info);
        CHECKF(info.headless == 1, "%s: headless %d", paths[k], info.headless);
        s = open_session(m, TANDEM_ROUTE_AUTO);
        CHECKF(s && embed(s, PROMPT, NULL, 0, TANDEM_POOL_MEAN, 1, got) == 0 &&
                   !memcmp(got, want, sizeof(float) * (size_t)D),
               "%s: cosine %.7f against the model it was cut from", paths[k], cosine(got, want, D));
        tandem_request r;
        tandem_request_default(&r);
        r.prompt = PROMPT;
        r.max_tokens = 4;
        tandem_stats stt;
        CHECKF(s && tandem_generate(s, &r, th_collect, NULL, &stt, &st) == TANDEM_E_UNSUPPORTED &&
                   strstr(st.msg, "no output head"),
               "%s: generation: %s", paths[k], st.msg);
        tandem_session_free(s);
        tandem_model_free(m);
    }
    unlink(pkg);
    free(want);
    free(got);
}

/* ---- 4. POST /v1/embeddings ---- */

/* base64 (standard alphabet, padded) into out; the bytes written, or -1 */
static int unbase64(const char *s, unsigned char *out, int cap)
{
    static const char *A = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    int n = 0, bits = 0;
    unsigned acc = 0;
    for (; *s && *s != '='; s++) {
        const char *p = strchr(A, *s);
        if (!p) return -1;
        acc = acc << 6 | (unsigned)(p - A);
        if ((bits += 6) >= 8) {
            bits -= 8;
            if (n >= cap) return -1;
            out[n++] = (unsigned char)(acc >> bits);
        }
    }
    return n;
}

/* data[i].embedding of an answer into v [dim] (floats or base64); its length, or -1 */
static int vec_of(const cJSON *j, int i, float *v, int dim)
{
    const cJSON *e = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), i), "embedding");
    if (cJSON_IsString(e)) {
        int n = unbase64(e->valuestring, (unsigned char *)v, dim * 4);
        return n < 0 || n % 4 ? -1 : n / 4;
    }
    int n = 0;
    for (const cJSON *x = cJSON_IsArray(e) ? e->child : NULL; x && n < dim; x = x->next) v[n++] = (float)x->valuedouble;
    return cJSON_IsArray(e) && cJSON_GetArraySize(e) == n ? n : -1;
}

static void test_server(tandem_model *m, int D)
{
    tandem_session *s = open_session(m, TANDEM_ROUTE_AUTO);
    if (!s) return;
    tm_server_opts o;
    tm_server_opts_default(&o);
    o.port = 0;
    o.model_name = "emb";
    tm_server *srv = NULL;
    tm_err err = {0};
    CHECKF(tm_server_start(&srv, m, s, &o, &err) == TM_OK, "%s", err.msg);
    if (!srv) {
        tandem_session_free(s);
        return;
    }
    int port = tm_server_port(srv), status;
    float *want = calloc((size_t)D, sizeof(float)), *got = calloc((size_t)D, sizeof(float)),
          *raw = calloc((size_t)D, sizeof(float)), *b64 = calloc((size_t)D, sizeof(float));
    int32_t *ids = NULL;
    size_t n = 0;
    tandem_status st;
    CHECK(tandem_tokenize(m, PROMPT, strlen(PROMPT), 1, &ids, &n, &st) == 0);
    /* one text: the library's vector (the model's pooling, unit length), as floats and as base64 */
    CHECK(embed(s, PROMPT, NULL, 0, TANDEM_POOL_DEFAULT, 1, want) == 0);
    char body[2048];
    snprintf(body, sizeof body, "{\"model\":\"emb\",\"input\":\"%s\"}", PROMPT);
    cJSON *j = http_json(port, "POST", "/v1/embeddings", body, NULL, &status);
    CHECKF(status == 200 && vec_of(j, 0, got, D) == D && !memcmp(got, want, sizeof(float) * (size_t)D) &&
               !strcmp(jstr(j, "object") ? jstr(j, "object") : "", "list") &&
               !strcmp(jstr(j, "data.0.object") ? jstr(j, "data.0.object") : "", "embedding") && jnum(j, "data.0.index") == 0 &&
               !strcmp(jstr(j, "model") ? jstr(j, "model") : "", "emb") && jnum(j, "usage.prompt_tokens") == (double)n &&
               jnum(j, "usage.total_tokens") == (double)n,
           "one text: status %d, cosine %.7f", status, cosine(got, want, D));
    cJSON_Delete(j);
    snprintf(body, sizeof body, "{\"input\":\"%s\",\"encoding_format\":\"base64\"}", PROMPT);
    j = http_json(port, "POST", "/embeddings", body, NULL, &status);
    CHECKF(status == 200 && vec_of(j, 0, b64, D) == D && !memcmp(b64, want, sizeof(float) * (size_t)D), "base64: %d",
           status);
    cJSON_Delete(j);
    /* a batch: texts and token ids, each as alone, in order */
    char idl[1024] = "";
    for (size_t i = 0; i < n; i++) snprintf(idl + strlen(idl), sizeof idl - strlen(idl), "%s%d", i ? "," : "", ids[i]);
    snprintf(body, sizeof body, "{\"input\":[\"Once upon a time\",[%s],\"%s\"]}", idl, PROMPT);
    j = http_json(port, "POST", "/v1/embeddings", body, NULL, &status);
    CHECK(embed(s, "Once upon a time", NULL, 0, TANDEM_POOL_DEFAULT, 1, raw) == 0);
    int32_t *ids2 = NULL;
    size_t n2 = 0;
    CHECK(tandem_tokenize(m, "Once upon a time", 16, 1, &ids2, &n2, &st) == 0);
    CHECKF(status == 200 && cJSON_GetArraySize(cJSON_GetObjectItem(j, "data")) == 3 && jnum(j, "data.2.index") == 2 &&
               jnum(j, "usage.prompt_tokens") == (double)(2 * n + n2),
           "batch: %d", status);
    for (int i = 0; i < 3; i++)
        CHECKF(vec_of(j, i, got, D) == D && !memcmp(got, i ? want : raw, sizeof(float) * (size_t)D), "batch %d", i);
    cJSON_Delete(j);
    free(ids2);
    /* dimensions: the first k of the raw vector, scaled to unit length again; mean pooling, no scaling */
    CHECK(embed(s, PROMPT, NULL, 0, TANDEM_POOL_DEFAULT, 0, raw) == 0);
    snprintf(body, sizeof body, "{\"input\":\"%s\",\"dimensions\":8}", PROMPT);
    j = http_json(port, "POST", "/v1/embeddings", body, NULL, &status);
    double ss = 0;
    for (int d = 0; d < 8; d++) ss += (double)raw[d] * raw[d];
    int k = vec_of(j, 0, got, D), close = k == 8;
    for (int d = 0; close && d < 8; d++) close = fabs(got[d] - raw[d] / sqrt(ss)) < 1e-6;
    CHECKF(status == 200 && close, "dimensions 8: %d, %d numbers", status, k);
    cJSON_Delete(j);
    CHECK(embed(s, PROMPT, NULL, 0, TANDEM_POOL_MEAN, 0, raw) == 0);
    snprintf(body, sizeof body, "{\"input\":\"%s\",\"pooling\":\"mean\",\"normalize\":false}", PROMPT);
    j = http_json(port, "POST", "/v1/embeddings", body, NULL, &status);
    CHECKF(status == 200 && vec_of(j, 0, got, D) == D && !memcmp(got, raw, sizeof(float) * (size_t)D), "mean, raw: %d",
           status);
    cJSON_Delete(j);
    /* refusals, by field */
    char big[4096];
    snprintf(big, sizeof big, "{\"input\":[");
    for (int i = 0; i <= 256; i++) snprintf(big + strlen(big), sizeof big - strlen(big), "%s\"a\"", i ? "," : "");
    snprintf(big + strlen(big), sizeof big - strlen(big), "]}");
    char dim_over[96];
    snprintf(dim_over, sizeof dim_over, "{\"input\":\"a\",\"dimensions\":%d}", D + 1);
    static const char *const bad[][2] = {
        {"{\"input\":[]}", "input"},
        {"{}", "input"},
        {"{\"input\":7}", "input"},
        {"{\"input\":[\"a\",5]}", "input[1]"},
        {"{\"input\":[\"a\",\"\"]}", "input[1]"},
        {"{\"input\":[[1,2],[-1]]}", "input[1]"},
        {"{\"input\":[[1,2.5]]}", "input[0]"},
        {"{\"input\":\"a\",\"encoding_format\":\"hex\"}", "encoding_format"},
        {"{\"input\":\"a\",\"dimensions\":0}", "dimensions"},
        {"{\"input\":\"a\",\"pooling\":\"max\"}", "pooling"},
        {"{\"input\":\"a\",\"normalize\":1}", "normalize"},
        {"[1]", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) check_error(port, "POST", "/v1/embeddings", bad[i][0], 400, bad[i][1], bad[i][0]);
    check_error(port, "POST", "/v1/embeddings", big, 400, "input", "257 inputs");
    check_error(port, "POST", "/v1/embeddings", dim_over, 400, "dimensions", "dimensions past the hidden size");
    check_error(port, "GET", "/v1/embeddings", NULL, 405, NULL, "GET");
    /* a prompt past the context (256): context_length_exceeded, naming the input */
    size_t lb = 64 + 300 * 8;
    char *longb = malloc(lb);
    snprintf(longb, lb, "{\"input\":[\"a\",[");
    for (int i = 0; i < 300; i++) snprintf(longb + strlen(longb), lb - strlen(longb), "%s%d", i ? "," : "", ids[i % n]);
    snprintf(longb + strlen(longb), lb - strlen(longb), "]]}");
    j = http_json(port, "POST", "/v1/embeddings", longb, NULL, &status);
    CHECKF(status == 400 && jstr(j, "error.code") && !strcmp(jstr(j, "error.code"), "context_length_exceeded") &&
               jstr(j, "error.param") && !strcmp(jstr(j, "error.param"), "input[1]"),
           "too long: %d %s", status, jstr(j, "error.message") ? jstr(j, "error.message") : "");
    cJSON_Delete(j);
    free(longb);
    free(ids);
    free(want);
    free(got);
    free(raw);
    free(b64);
    tm_server_stop(srv);
    tandem_session_free(s);
}

/* ---- 5. against sentence-transformers ---- */

/* the bounds, set from what the engines reach with margin (docs/serve.md "Embeddings"): with bf16
 * weights (the checkpoint's values exactly; activations rounded to bf16 for the products) and with
 * the default int8 ones */
static const double ST_COS_BF16 = 0.9995, ST_COS_INT8 = 0.995;

/* one model of the references: its directory rebuilt beside the conformance checkpoint, converted
 * with prefill_enc, every text embedded with the model's defaults against the reference */
static void st_model(const char *name, const cJSON *ref, const cJSON *texts, tm_dtype prefill_enc, double bound)
{
    char dir[256], hf[1024], path[PATH_MAX], pkg[256];
    static const char *files[] = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                                  "generation_config.json"};
    snprintf(hf, sizeof hf, "%s/conformance/models/%s/hf", th_shared(), name);
    snprintf(dir, sizeof dir, "build/test_embed_st_%s", name);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/1_Pooling", dir);
    mkdir(path, 0755);
    CHECKF(th_link_files(dir, hf, files, sizeof files / sizeof files[0]) == 0, "%s", dir);
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(ref, "files"))
    {
        snprintf(path, sizeof path, "%s/%s", dir, f->string);
        CHECKF(cJSON_IsString(f) && th_write_file(path, f->valuestring, strlen(f->valuestring)) == 0, "%s", path);
    }
    snprintf(pkg, sizeof pkg, "build/test_embed_st_%s.tdm", name);
    tm_convert_opts co;
    tm_convert_opts_default(&co);
    co.prefill_enc = prefill_enc;
    tm_convert_stats cst;
    tm_err err = {0};
    CHECKF(tm_convert(dir, pkg, &co, &cst, &err) == TM_OK, "%s: %s", name, err.msg);
    tandem_model *m = NULL;
    tandem_status st;
    CHECKF(tandem_model_open(&m, pkg, &st) == 0, "%s: %s", name, st.msg);
    if (!m) return;
    tandem_model_info info;
    tandem_model_get_info(m, &info);
    const char *mode = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ref, "pooling"));
    int want = !mode ? -1 : !strcmp(mode, "mean") ? TANDEM_POOL_MEAN : !strcmp(mode, "lasttoken") ? TANDEM_POOL_LAST
                          : !strcmp(mode, "cls") ? TANDEM_POOL_CLS : -1;
    int norm = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ref, "normalize"));
    CHECKF(info.pooling == want && info.embed_normalize == norm && !info.embed_unsupported,
           "%s: pooling %d (want %s), normalize %d (want %d), unsupported %s", name, info.pooling, mode ? mode : "?",
           info.embed_normalize, norm, info.embed_unsupported ? info.embed_unsupported : "-");
    tandem_session_opts o;
    tandem_session_opts_default(&o);
    o.n_threads = 2;
    o.max_ctx = 1024;
    tandem_session *s = NULL;
    CHECKF(tandem_session_new(&s, m, &o, &st) == 0, "%s: %s", name, st.msg);
    int D = info.hidden, i = 0;
    float *got = calloc((size_t)D, sizeof(float)), *exp = calloc((size_t)D, sizeof(float));
    const cJSON *t;
    double worst = 1;
    cJSON_ArrayForEach(t, texts)
    {
        const cJSON *rid = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ref, "ids"), i);
        const cJSON *rv = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ref, "vectors"), i++);
        CHECKF(cJSON_GetArraySize(rv) == D, "%s: reference of %d values, hidden %d", name, cJSON_GetArraySize(rv), D);
        if (!s || cJSON_GetArraySize(rv) != D) continue;
        /* the ids: sentence-transformers' tokenizer call (special tokens added as the tokenizer says) */
        int32_t *ids = NULL;
        size_t n = 0;
        CHECKF(tandem_tokenize(m, t->valuestring, strlen(t->valuestring), 1, &ids, &n, &st) == 0, "%s", st.msg);
        int same = ids && (int)n == cJSON_GetArraySize(rid);
        for (size_t k = 0; same && k < n; k++) same = ids[k] == cJSON_GetArrayItem(rid, (int)k)->valueint;
        CHECKF(same, "%s text %d: %zu ids, sentence-transformers %d", name, i - 1, n, cJSON_GetArraySize(rid));
        free(ids);
        for (int d = 0; d < D; d++) exp[d] = (float)cJSON_GetArrayItem(rv, d)->valuedouble;
        if (embed(s, t->valuestring, NULL, 0, TANDEM_POOL_DEFAULT, info.embed_normalize, got)) continue; /* as the server asks */
        double c = cosine(got, exp, D);
        worst = fmin(worst, c);
        CHECKF(c >= bound, "%s text %d (%s): cosine %.6f < %.4f", name, i - 1, tm_dtype_name(prefill_enc), c, bound);
        if (norm) CHECK_NEAR(sqrt(dot(got, got, D)), 1.0, 1e-5);
        else CHECKF(rel_diff(got, exp, D) < 4 * sqrt(2 * (1 - c)) + 1e-3, "%s text %d: rel diff %.4g", name, i - 1,
                    rel_diff(got, exp, D));
    }
    printf("  %-8s %-9s %s%s: least cosine %.6f over %d texts\n", name, tm_dtype_name(prefill_enc), mode ? mode : "?",
           norm ? " + normalize" : "", worst, i);
    free(got);
    free(exp);
    tandem_session_free(s);
    tandem_model_free(m);
    unlink(pkg);
}

static void test_sentence_transformers(void)
{
    char *js = th_slurp("tests/data/embed_refs.json");
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    CHECKF(root, "tests/data/embed_refs.json: %s", js ? "not JSON" : "missing");
    free(js);
    const cJSON *mods = cJSON_GetObjectItemCaseSensitive(root, "models"), *mo;
    const cJSON *texts = cJSON_GetObjectItemCaseSensitive(root, "texts");
    CHECKF(cJSON_GetArraySize(mods) >= 5, "%d models in the references", cJSON_GetArraySize(mods));
    cJSON_ArrayForEach(mo, mods)
    {
        st_model(mo->string, mo, texts, TM_DT_BF16, ST_COS_BF16);
        st_model(mo->string, mo, texts, TM_DT_Q8PC, ST_COS_INT8);
    }
    cJSON_Delete(root);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    tandem_model *m = NULL;
    tandem_status st;
    CHECKF(tandem_model_open(&m, DEMO, &st) == 0, "%s", st.msg);
    if (!m) return th_done("test_embed");
    tandem_model_info info;
    tandem_model_get_info(m, &info);
    CHECK(info.pooling == TANDEM_POOL_LAST && info.embed_normalize == 0 && !info.embed_unsupported);
    test_pooling(m, info.hidden);
    test_beside_generation(m, info.hidden, TANDEM_ROUTE_HYBRID);
    test_beside_generation(m, info.hidden, TANDEM_ROUTE_AUTO);
    test_server(m, info.hidden);
    test_base_checkpoint(m, info.hidden);
    tandem_model_free(m);
    test_modules(info.hidden);
    test_sentence_transformers();
    return th_done("test_embed");
}
