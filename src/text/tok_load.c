/* text/tok_load.c: tm_tok_load*, tm_tok_free and the vocabulary accessors.
 *
 * Load order follows HF's deserializer: model, normalizer, pre_tokenizer,
 * post_processor, decoder, then the added tokens (which need the model's
 * vocabulary for their ids and the normalizer for `normalized` contents).
 * Finally the id -> piece table is built over both vocabularies. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "text/tok_impl.h"

#define TOK_MAX_JSON (1u << 30)

void tm_tok_free(tm_tokenizer *t)
{
    if (!t) return;
    tok_strmap_free(&t->model.vocab);
    tok_pairmap_free(&t->model.merges);
    tok_unigram_free(&t->model);
    if (t->normalizer) tok_normalizer_free(t->normalizer);
    if (t->pretok) tok_pretok_free(t->pretok);
    if (t->post) tok_post_free(t->post);
    if (t->decoder) tok_decoder_free(t->decoder);
    free(t->normalizer);
    free(t->pretok);
    free(t->post);
    free(t->decoder);
    free(t->added);
    tok_strmap_free(&t->added_map);
    tok_strmap_free(&t->special_set);
    tok_trie_free(&t->trie_raw);
    tok_trie_free(&t->trie_norm);
    free(t->added_index);
    free(t->pieces);
    free(t->piece_len);
    free(t->is_special);
    tok_arena_free(&t->arena);
    free(t);
}

/* an optional component: NULL/null -> absent, else allocate and load */
#define LOAD_PART(T, field, key, loadfn)                                                             \
    do {                                                                                             \
        const cJSON *j_ = cJSON_GetObjectItemCaseSensitive(root, key);                               \
        if (j_ && !cJSON_IsNull(j_)) {                                                               \
            t->field = calloc(1, sizeof(T));                                                         \
            if (!t->field) {                                                                         \
                rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);                         \
                goto fail;                                                                           \
            }                                                                                        \
            if ((rc = loadfn(t, t->field, j_, key, 0, err))) goto fail;                              \
        }                                                                                            \
    } while (0)

static int build_tables(tm_tokenizer *t, tm_err *err)
{
    int64_t max_id = -1;
    const tok_strmap *v = &t->model.vocab;
    for (size_t i = 0; i <= v->mask; i++)
        if (v->slots[i].key && v->slots[i].val > max_id) max_id = v->slots[i].val;
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].id > max_id) max_id = t->added[i].id;
    size_t count = t->model.vocab_entries + t->n_added;
    if (max_id >= 0 && (uint64_t)max_id >= 4 * (uint64_t)count + 65536)
        return tm_errf(err, TM_E_LIMIT, "%s: model.vocab: id %lld is absurdly large for %zu tokens", t->name,
                       (long long)max_id, count);
    t->n_ids = (size_t)(max_id + 1);
    t->pieces = calloc(t->n_ids + 1, sizeof *t->pieces);
    t->piece_len = calloc(t->n_ids + 1, sizeof *t->piece_len);
    t->is_special = calloc(t->n_ids + 1, 1);
    if (!t->pieces || !t->piece_len || !t->is_special) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
    for (size_t i = 0; i <= v->mask; i++) {
        const tok_strmap_slot *s = &v->slots[i];
        if (s->key && !t->pieces[s->val]) {
            t->pieces[s->val] = s->key;
            t->piece_len[s->val] = s->len;
        }
    }
    for (size_t i = 0; i < t->model.n_upiece; i++) /* Unigram: a duplicated piece names every index it is at */
        if (!t->pieces[i]) {
            t->pieces[i] = t->model.upiece[i];
            t->piece_len[i] = t->model.ulen[i];
        }
    for (size_t i = 0; i < t->n_added; i++) { /* added tokens take precedence (HF id_to_token) */
        t->pieces[t->added[i].id] = t->added[i].content;
        t->piece_len[t->added[i].id] = (uint32_t)t->added[i].len;
    }
    for (size_t i = 0; i < t->n_ids; i++)
        t->is_special[i] = t->pieces[i] && tok_strmap_get(&t->special_set, t->pieces[i], t->piece_len[i]) >= 0;
    return TM_OK;
}

int tm_tok_load_from_string(tm_tokenizer **out, const char *json, size_t len, const char *name, tm_err *err)
{
    *out = NULL;
    if (!name) name = "tokenizer.json";
    if (len > TOK_MAX_JSON) return tm_errf(err, TM_E_LIMIT, "%s: %zu bytes is too large for a tokenizer", name, len);
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= json && at <= json + len ? (size_t)(at - json) : 0;
        return tm_errf(err, TM_E_FORMAT, "%s: not valid JSON (near byte %zu)", name, off);
    }
    int rc = TM_OK;
    tm_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        cJSON_Delete(root);
        return tm_errf(err, TM_E_NOMEM, "%s: out of memory", name);
    }
    snprintf(t->name, sizeof t->name, "%s", name);
    tok_byte_level_tables(t);
    if (!cJSON_IsObject(root)) {
        rc = tm_errf(err, TM_E_FORMAT, "%s: the top level is not a JSON object", t->name);
        goto fail;
    }
    const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (version && cJSON_IsString(version) && strcmp(version->valuestring, "1.0") != 0) {
        rc = tm_errf(err, TM_E_UNSUPPORTED, "%s: version: unknown tokenizer version '%.32s'", t->name, version->valuestring);
        goto fail;
    }
    /* truncation changes ids: refuse it; padding only matters for batches unless fixed-length */
    const cJSON *trunc = cJSON_GetObjectItemCaseSensitive(root, "truncation");
    const cJSON *pad = cJSON_GetObjectItemCaseSensitive(root, "padding");
    const cJSON *strat = pad ? cJSON_GetObjectItemCaseSensitive(pad, "strategy") : NULL;
    if (trunc && !cJSON_IsNull(trunc)) {
        rc = tm_errf(err, TM_E_UNSUPPORTED, "%s: truncation: truncation in tokenizer.json is not supported", t->name);
        goto fail;
    }
    if (pad && !cJSON_IsNull(pad) && !(cJSON_IsString(strat) && strcmp(strat->valuestring, "BatchLongest") == 0)) {
        rc = tm_errf(err, TM_E_UNSUPPORTED, "%s: padding.strategy: only BatchLongest padding is supported", t->name);
        goto fail;
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!model) {
        rc = tm_errf(err, TM_E_FORMAT, "%s: model: missing", t->name);
        goto fail;
    }
    if ((rc = tok_load_model(t, model, err))) goto fail;
    LOAD_PART(tok_normalizer, normalizer, "normalizer", tok_load_normalizer);
    LOAD_PART(tok_pretok, pretok, "pre_tokenizer", tok_load_pretok);
    LOAD_PART(tok_post, post, "post_processor", tok_load_post);
    LOAD_PART(tok_decoder, decoder, "decoder", tok_load_decoder);
    if ((rc = tok_load_added(t, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), err))) goto fail;
    if ((rc = build_tables(t, err))) goto fail;
    cJSON_Delete(root);
    *out = t;
    return TM_OK;
fail:
    cJSON_Delete(root);
    tm_tok_free(t);
    return rc;
}

int tm_tok_load(tm_tokenizer **out, const char *path, tm_err *err)
{
    char *json = NULL;
    size_t len = 0;
    *out = NULL;
    int rc = tm_read_file(path, &json, &len, TOK_MAX_JSON, err);
    if (rc) return rc;
    rc = tm_tok_load_from_string(out, json, len, path, err);
    free(json);
    return rc;
}

int tm_tok_vocab_size(const tm_tokenizer *t)
{
    return (int)t->n_ids;
}

const char *tm_tok_id_to_piece(const tm_tokenizer *t, int32_t id)
{
    return id >= 0 && (size_t)id < t->n_ids ? t->pieces[id] : NULL;
}

int32_t tm_tok_piece_to_id(const tm_tokenizer *t, const char *piece)
{
    size_t n = strlen(piece);
    int32_t id = tok_strmap_get(&t->added_map, piece, n);
    return id >= 0 ? id : tok_strmap_get(&t->model.vocab, piece, n);
}

int tm_tok_is_special(const tm_tokenizer *t, int32_t id)
{
    return id >= 0 && (size_t)id < t->n_ids && t->is_special[id];
}
