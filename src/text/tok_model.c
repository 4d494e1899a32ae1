/* text/tok_model.c: the model stage (HF `models::ModelWrapper`): which model
 * a tokenizer.json names, what every model shares when loading (the
 * vocabulary object, optional fields), and the per-pre-token dispatch.
 *
 *   model.type  "BPE" (or absent with merges)  -> tok_bpe.c
 *               "WordPiece" (or absent with    -> tok_wordpiece.c
 *               continuing_subword_prefix and
 *               max_input_chars_per_word)
 *               "Unigram" (or absent with an   -> tok_unigram.c
 *               array vocab)
 *               "WordLevel" (or absent with    -> tok_wordlevel.c
 *               only vocab and unk_token)
 *               anything else                  -> refused, naming the type */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "text/tok_impl.h"

int tok_model_bool(const tm_tokenizer *t, const void *model_json, const char *key, int *out, tm_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive((const cJSON *)model_json, key);
    if (!v || cJSON_IsNull(v)) return TM_OK;
    if (!cJSON_IsBool(v)) return tm_errf(err, TM_E_FORMAT, "%s: model.%s: expected true or false", t->name, key);
    *out = cJSON_IsTrue(v);
    return TM_OK;
}

int tok_model_str(tm_tokenizer *t, const void *model_json, const char *key, char **out, size_t *len, tm_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive((const cJSON *)model_json, key);
    *out = NULL;
    if (len) *len = 0;
    if (!v || cJSON_IsNull(v)) return TM_OK;
    if (!cJSON_IsString(v)) return tm_errf(err, TM_E_FORMAT, "%s: model.%s: expected a string or null", t->name, key);
    size_t n = strlen(v->valuestring);
    if (!tok_utf8_valid(v->valuestring, n, NULL))
        return tm_errf(err, TM_E_FORMAT, "%s: model.%s: not valid UTF-8", t->name, key);
    *out = tok_arena_strndup(&t->arena, v->valuestring, n);
    if (!*out) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
    if (len) *len = n;
    return TM_OK;
}

int tok_model_vocab(tm_tokenizer *t, const void *vocab_json, tm_err *err)
{
    const cJSON *vocab = vocab_json;
    tok_model *m = &t->model;
    if (!cJSON_IsObject(vocab)) return tm_errf(err, TM_E_FORMAT, "%s: model.vocab: missing or not an object", t->name);
    size_t nv = (size_t)cJSON_GetArraySize(vocab);
    if (tok_strmap_init(&m->vocab, nv) != TM_OK) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
    for (const cJSON *e = vocab->child; e; e = e->next) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= TOK_MAX_ID ||
            e->valuedouble != (double)(int32_t)e->valuedouble)
            return tm_errf(err, TM_E_FORMAT, "%s: model.vocab[\"%.64s\"]: id must be an integer in [0, %d)", t->name,
                           e->string ? e->string : "", TOK_MAX_ID);
        size_t kl = strlen(e->string);
        if (!tok_utf8_valid(e->string, kl, NULL))
            return tm_errf(err, TM_E_FORMAT, "%s: model.vocab: a token is not valid UTF-8", t->name);
        char *k = tok_arena_strndup(&t->arena, e->string, kl);
        if (!k || tok_strmap_put(&m->vocab, k, kl, (int32_t)e->valuedouble) != TM_OK)
            return tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
    }
    m->vocab_entries = m->vocab.n;
    return TM_OK;
}

int tok_load_model(tm_tokenizer *t, const void *model_json, tm_err *err)
{
    const cJSON *m = model_json;
    if (!cJSON_IsObject(m)) return tm_errf(err, TM_E_FORMAT, "%s: model: expected an object", t->name);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(m, "type");
    if (type && !cJSON_IsString(type)) return tm_errf(err, TM_E_FORMAT, "%s: model.type: expected a string", t->name);
    if (type && !strcmp(type->valuestring, "BPE")) return tok_load_bpe(t, m, err);
    if (type && !strcmp(type->valuestring, "WordPiece")) return tok_load_wordpiece(t, m, err);
    if (type && !strcmp(type->valuestring, "Unigram")) return tok_load_unigram(t, m, err);
    if (type && !strcmp(type->valuestring, "WordLevel")) return tok_load_wordlevel(t, m, err);
    if (type)
        return tm_errf(err, TM_E_UNSUPPORTED,
                       "%s: model.type: model type '%.64s' is not supported (BPE, WordPiece, Unigram and WordLevel are)",
                       t->name, type->valuestring);
    /* no type: serde's untagged order tells the models apart by their fields */
    if (cJSON_GetObjectItemCaseSensitive(m, "merges")) return tok_load_bpe(t, m, err);
    if (cJSON_GetObjectItemCaseSensitive(m, "max_input_chars_per_word")) return tok_load_wordpiece(t, m, err);
    if (cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(m, "vocab"))) return tok_load_unigram(t, m, err);
    if (cJSON_GetObjectItemCaseSensitive(m, "unk_token")) return tok_load_wordlevel(t, m, err);
    return tm_errf(err, TM_E_UNSUPPORTED,
                   "%s: model.type: missing, and the model has neither merges (BPE), max_input_chars_per_word "
                   "(WordPiece), an array vocab (Unigram) nor unk_token (WordLevel)", t->name);
}

int tok_model_encode(const tok_model *m, tok_work *w, const char *s, size_t n, tm_err *err)
{
    if (m->type == TOK_MODEL_UNIGRAM) return tok_unigram_encode(m, w, s, n, err);
    if (m->type == TOK_MODEL_WORDLEVEL) return tok_wordlevel_encode(m, w, s, n, err);
    return m->type == TOK_MODEL_WORDPIECE ? tok_wordpiece_encode(m, w, s, n, err) : tok_bpe_encode(m, w, s, n, err);
}
