/* runtime/rt_model.c: open a package or a HF directory for the runtime. */
#include "runtime/rt_model.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "hf/config.h"
#include "hf/hf_model.h"
#include "model/model.h"
#include "pkg/convert.h"
#include "pkg/pkg.h"
#include "quant/quant.h"
#include "text/vocab_trie.h"
#include "text/tokconfig.h"
#include "text/tokenizer.h"
#include "tandem.h"

void tm_rt_model_free(tm_rt_model *rm)
{
    if (!rm) return;
    if (rm->decode != rm->prefill) tm_model_free(rm->decode);
    tm_model_free(rm->prefill);
    tm_tok_free(rm->tok);
    if (rm->pkg) tm_pkg_close(rm->pkg);
    free(rm->chat_template);
    free(rm->tool_template);
    free(rm->bos_token);
    free(rm->eos_token);
    tm_vocab_trie_free(rm->trie);
    pthread_mutex_destroy(&rm->trie_mu);
    free(rm);
}

int tm_rt_model_trie(tm_rt_model *rm, struct tm_vocab_trie **out, tm_err *err)
{
    pthread_mutex_lock(&rm->trie_mu);
    int rc = rm->trie ? TM_OK : tm_vocab_trie_new(&rm->trie, rm->tok, rm->decode->V, err);
    *out = rm->trie;
    pthread_mutex_unlock(&rm->trie_mu);
    return rc;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* The encoding a stage's weights use: that of its first layer's attention output matrix. */
static tm_dtype stage_encoding(const tm_model *m)
{
    return m->L > 0 && m->w[0].wo.data ? m->w[0].wo.dtype : m->embed.dtype;
}

static void add_eos(tm_rt_model *rm, int64_t id)
{
    if (id < 0 || id >= rm->decode->V) return;
    for (int i = 0; i < rm->n_eos; i++)
        if (rm->eos_ids[i] == id) return;
    if (rm->n_eos < 16) rm->eos_ids[rm->n_eos++] = (int)id;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* Text configuration from the package's documents: chat template, special
 * token strings, stop ids (generation_config's eos list, config.json's, the
 * tokenizer's eos token) and sampling defaults. */
static int take_text_config(tm_rt_model *rm, tm_err *err)
{
    const tm_model *m = rm->decode;
    rm->prefill_enc = stage_encoding(rm->prefill);
    rm->decode_enc = stage_encoding(rm->decode);
    rm->temperature = 1.0f;
    rm->top_p = 1.0f;
    tm_tokconfig *tc = NULL;
    size_t n;
    int rc = tm_tokconfig_parse(&tc, tm_pkg_doc(rm->pkg, TM_PKG_DOC_TOKENIZER_CONFIG, &n),
                                tm_pkg_doc(rm->pkg, TM_PKG_DOC_SPECIAL_TOKENS, &n),
                                tm_pkg_doc(rm->pkg, TM_PKG_DOC_GENERATION_CONFIG, &n),
                                tm_pkg_doc(rm->pkg, TM_PKG_DOC_CHAT_TEMPLATE, &n), err);
    if (rc != TM_OK) return tm_err_prefix(err, "%s", rm->path);
    const char *more = tm_pkg_doc(rm->pkg, TM_ADDITIONAL_TEMPLATES "/tool_use.jinja", &n);
    if (more && (rc = tm_tokconfig_add_template(tc, "tool_use", more, err)) != TM_OK) {
        tm_tokconfig_free(tc);
        return rc;
    }
    rm->chat_template = dup_or_null(tm_tokconfig_chat_template(tc, NULL));
    rm->tool_template = dup_or_null(tm_tokconfig_chat_template(tc, "tool_use"));
    rm->bos_token = dup_or_null(tm_tokconfig_bos(tc));
    rm->eos_token = dup_or_null(tm_tokconfig_eos(tc));
    const tm_gen_defaults *g = tm_tokconfig_gen(tc);
    for (int i = 0; i < g->n_eos; i++) add_eos(rm, g->eos_token_ids[i]);
    for (int i = 0; i < m->n_eos; i++) add_eos(rm, m->eos_ids[i]);
    if (rm->eos_token) add_eos(rm, tm_tok_piece_to_id(rm->tok, rm->eos_token));
    if (g->do_sample != 0 && g->temperature == g->temperature) { /* set, not NaN */
        rm->has_sampling_defaults = 1;
        rm->temperature = (float)g->temperature;
        if (g->top_p == g->top_p) rm->top_p = (float)g->top_p;
        if (g->min_p == g->min_p) rm->min_p = (float)g->min_p;
        if (g->top_k > 0) rm->top_k = (int)g->top_k;
        if (g->repetition_penalty == g->repetition_penalty) rm->repetition_penalty = (float)g->repetition_penalty;
    }
    tm_tokconfig_free(tc);
    return TM_OK;
}

int tm_embed_cfg_parse(tm_embed_cfg *c, const char *modules, size_t n, const char *pooling, size_t pn, tm_err *err)
{
    memset(c, 0, sizeof *c);
    c->pooling = TANDEM_POOL_LAST;
    if (!modules) return TM_OK;
    cJSON *mods = cJSON_ParseWithLength(modules, n), *pc = NULL;
    int rc = TM_OK, pooled = 0;
    if (!cJSON_IsArray(mods)) rc = tm_errf(err, TM_E_FORMAT, "modules.json: not a JSON array of modules");
    for (const cJSON *m = rc ? NULL : mods->child; m && rc == TM_OK; m = m->next) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(m, "type");
        if (!cJSON_IsString(type)) {
            rc = tm_errf(err, TM_E_FORMAT, "modules.json: a module without a string \"type\"");
            break;
        }
        const char *t = strrchr(type->valuestring, '.') ? strrchr(type->valuestring, '.') + 1 : type->valuestring;
        if (!strcmp(t, "Transformer")) continue;
        if (!strcmp(t, "Normalize")) {
            c->normalize = 1;
            continue;
        }
        if (strcmp(t, "Pooling") || pooled++ || !pooling) {
            if (!c->unsupported[0])
                snprintf(c->unsupported, sizeof c->unsupported, "%s%.100s", strcmp(t, "Pooling") ? "the module " : "",
                         strcmp(t, "Pooling") ? type->valuestring
                         : pooled > 1         ? "a second Pooling module"
                                              : "a Pooling module without its config.json");
            continue;
        }
        if (!cJSON_IsObject(pc = cJSON_ParseWithLength(pooling, pn))) {
            rc = tm_errf(err, TM_E_FORMAT, "the Pooling module's config.json: not a JSON object");
            break;
        }
        static const struct {
            const char *key;
            int pool;
        } modes[] = {{"pooling_mode_cls_token", TANDEM_POOL_CLS}, {"pooling_mode_mean_tokens", TANDEM_POOL_MEAN},
                     {"pooling_mode_lasttoken", TANDEM_POOL_LAST}, {"pooling_mode_max_tokens", 0},
                     {"pooling_mode_mean_sqrt_len_tokens", 0}, {"pooling_mode_weightedmean_tokens", 0}};
        int on = 0, pool = 0;
        const char *what = NULL;
        for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++)
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pc, modes[k].key))) on++, pool = modes[k].pool, what = modes[k].key;
        /* sentence-transformers 6 writes one "pooling_mode" ("mean", "lasttoken", ...; a list: several) */
        const cJSON *pm = cJSON_GetObjectItemCaseSensitive(pc, "pooling_mode"), *e;
        for (e = cJSON_IsArray(pm) ? pm->child : pm; e; e = cJSON_IsArray(pm) ? e->next : NULL) {
            if (!cJSON_IsString(e)) {
                rc = tm_errf(err, TM_E_FORMAT, "the Pooling module's config.json: \"pooling_mode\" is not a name or a list of names");
                break;
            }
            static const char *names[] = {"cls", "mean", "lasttoken"}; /* as modes[0..2] */
            on++, pool = 0, what = e->valuestring;
            for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
                if (!strcmp(e->valuestring, names[k])) pool = modes[k].pool;
        }
        if (rc) break;
        if (on == 1 && pool) c->pooling = pool;
        else if (!c->unsupported[0])
            snprintf(c->unsupported, sizeof c->unsupported, "the pooling %.100s",
                     on == 1 ? what : on ? "of several modes at once" : "of no mode");
    }
    cJSON_Delete(pc);
    cJSON_Delete(mods);
    return rc;
}

/* The embedding's modules from the package's documents (tm_embed_cfg_parse); errors name the package */
static int take_embedding_config(tm_rt_model *rm, tm_err *err)
{
    size_t n = 0, pn = 0;
    const char *mt = tm_pkg_doc(rm->pkg, TM_PKG_DOC_MODULES, &n), *pt = tm_pkg_doc(rm->pkg, TM_PKG_DOC_POOLING, &pn);
    tm_embed_cfg c;
    int rc = tm_embed_cfg_parse(&c, mt, n, pt, pn, err);
    if (rc != TM_OK) return tm_err_prefix(err, "%s", rm->path);
    rm->pooling = c.pooling;
    rm->embed_normalize = c.normalize;
    snprintf(rm->embed_unsupported, sizeof rm->embed_unsupported, "%s", c.unsupported);
    return TM_OK;
}

/* A tied model's prefill stage reads the embedding as its output head: in
 * the package's plain encoding (bf16), [V][D], which every prefill streams
 * whole for the last row's logits (272 MB for Qwen2.5-0.5B, 525 MB for
 * Llama-3.2-1B). Where the prefill stage is itself quantized, it takes the
 * decode stage's head instead ("lm_head.weight", in --head-enc): half the
 * bytes or less, and the first token's logits then come from the same head
 * as every later token's. A bf16 prefill stage keeps the exact head. */
static void share_head(tm_model *pre, const tm_model *dec)
{
    if (!pre->tied || pre->lm_head.data != pre->embed.data || !tm_quant_is_quantized(stage_encoding(pre)))
        return;
    const tm_tensor *h = &dec->lm_head;
    if (h->data && h->data != dec->embed.data && tm_quant_is_quantized(h->dtype) && h->ndim == 2 &&
        h->shape[0] == pre->V && h->shape[1] == pre->D)
        pre->lm_head = *h;
}

static int open_stage(tm_model **out, const char *cfg_text, size_t cfg_len, const char *label, tm_pkg *p,
                      unsigned stage, tm_err *err)
{
    tm_hf_config cfg;
    int rc = tm_hf_config_parse(&cfg, cfg_text, cfg_len, label, err);
    if (rc != TM_OK) return rc;
    rc = tm_model_init(out, &cfg, err);
    tm_hf_config_free(&cfg);
    if (rc != TM_OK) return rc;
    tm_tensor_source src = {tm_pkg_stage_ctx(p, stage), tm_pkg_stage_lookup, 1};
    (*out)->check_dtype = 0; /* a package holds each stage in its own encoding */
    rc = tm_model_bind(*out, &src, err);
    if (rc != TM_OK) {
        tm_model_free(*out);
        *out = NULL;
    }
    return rc;
}

static int open_package(tm_rt_model *rm, const char *path, tm_err *err)
{
    int rc = tm_pkg_open(&rm->pkg, path, err);
    if (rc != TM_OK) return rc;
    size_t n = 0;
    const char *cfg = tm_pkg_doc(rm->pkg, TM_PKG_DOC_CONFIG, &n);
    if (!cfg) return tm_errf(err, TM_E_FORMAT, "%s: the package holds no config.json", path);
    char label[1100];
    snprintf(label, sizeof label, "%s:config.json", path);
    if ((rc = open_stage(&rm->prefill, cfg, n, label, rm->pkg, TM_PKG_PREFILL, err)) != TM_OK) return rc;
    if ((rc = open_stage(&rm->decode, cfg, n, label, rm->pkg, TM_PKG_DECODE, err)) != TM_OK) return rc;
    share_head(rm->prefill, rm->decode);
    const char *tok = tm_pkg_doc(rm->pkg, TM_PKG_DOC_TOKENIZER, &n);
    if (!tok) return tm_errf(err, TM_E_FORMAT, "%s: the package holds no tokenizer.json", path);
    snprintf(label, sizeof label, "%s:tokenizer.json", path);
    return tm_tok_load_from_string(&rm->tok, tok, n, label, err);
}

/* A HF directory is converted with the default encodings into a temporary
 * package that is unlinked once mapped: nothing stays on disk. */
static int open_hf_dir(tm_rt_model *rm, const char *dir, tm_err *err)
{
    static int counter;
    const char *td = getenv("TMPDIR");
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s/tandem-%ld-%d.tdm", td && *td ? td : "/tmp", (long)getpid(),
             __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
    tm_convert_opts o;
    tm_convert_opts_default(&o);
    tm_convert_stats st;
    int rc = tm_convert(dir, tmp, &o, &st, err);
    if (rc != TM_OK) return rc;
    rc = open_package(rm, tmp, err);
    unlink(tmp);
    return rc;
}

int tm_rt_model_open(tm_rt_model **out, const char *path, tm_err *err)
{
    *out = NULL;
    tm_rt_model *rm = calloc(1, sizeof *rm);
    if (rm) pthread_mutex_init(&rm->trie_mu, NULL);
    if (!rm) return tm_errf(err, TM_E_NOMEM, "out of memory");
    snprintf(rm->path, sizeof rm->path, "%s", path);
    int rc;
    if (tm_is_dir(path)) rc = open_hf_dir(rm, path, err);
    else if (ends_with(path, ".tdm") || tm_file_exists(path)) rc = open_package(rm, path, err);
    else rc = tm_errf(err, TM_E_NOTFOUND, "%s: no such package file or model directory", path);
    if (rc != TM_OK) {
        tm_rt_model_free(rm);
        return rc;
    }
    if ((rc = take_text_config(rm, err)) != TM_OK || (rc = take_embedding_config(rm, err)) != TM_OK) {
        tm_rt_model_free(rm);
        return rc;
    }
    *out = rm;
    return TM_OK;
}
