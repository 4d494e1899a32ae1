/* text/tok_components.c: tokenizer.json -> normalizer, pre_tokenizer,
 * post_processor and decoder descriptions. Every error names the JSON path
 * (e.g. "pre_tokenizer.pretokenizers[0].pattern.Regex"); unknown component
 * types are rejected, never ignored. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok_impl.h"

#define PATH_MAX_LEN 256

static const char *type_of(const cJSON *j)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

static int bad(const tm_tokenizer *t, const char *path, const char *field, const char *what, tm_err *err)
{
    return tm_errf(err, TM_E_FORMAT, "%s: %s%s%s: %s", t->name, path, field ? "." : "", field ? field : "", what);
}

static int unsupported(const tm_tokenizer *t, const char *path, const char *kind, const char *type, tm_err *err)
{
    return tm_errf(err, TM_E_UNSUPPORTED, "%s: %s.type: %s type '%.64s' is not supported", t->name, path, kind, type);
}

static int get_bool(const tm_tokenizer *t, const cJSON *j, const char *key, int dflt, int *out, const char *path,
                    tm_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) {
        *out = dflt;
        return TM_OK;
    }
    if (!cJSON_IsBool(v)) return bad(t, path, key, "expected true or false", err);
    *out = cJSON_IsTrue(v);
    return TM_OK;
}

/* a JSON string copied to a malloc'd buffer (valid UTF-8 checked) */
static int get_str(const tm_tokenizer *t, const cJSON *j, const char *key, char **out, size_t *len, const char *path,
                   tm_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!cJSON_IsString(v)) return bad(t, path, key, "missing or not a string", err);
    size_t n = strlen(v->valuestring);
    if (!tok_utf8_valid(v->valuestring, n, NULL)) return bad(t, path, key, "not valid UTF-8", err);
    *out = malloc(n + 1);
    if (!*out) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
    memcpy(*out, v->valuestring, n + 1);
    if (len) *len = n;
    return TM_OK;
}

/* a JSON string holding exactly one character (serde `char`) */
static int get_char(const tm_tokenizer *t, const cJSON *j, const char *key, uint32_t dflt, uint32_t *out,
                    const char *path, tm_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) {
        *out = dflt;
        return TM_OK;
    }
    size_t n = cJSON_IsString(v) ? strlen(v->valuestring) : 0, adv = 0;
    if (!n || !tok_utf8_valid(v->valuestring, n, NULL)) return bad(t, path, key, "expected a one-character string", err);
    *out = tok_utf8_dec(v->valuestring, n, &adv);
    if (adv != n) return bad(t, path, key, "expected a one-character string", err);
    return TM_OK;
}

static int get_size(const tm_tokenizer *t, const cJSON *j, const char *key, size_t *out, const char *path, tm_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) {
        *out = 0;
        return TM_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e6 || v->valuedouble != (double)(long)v->valuedouble)
        return bad(t, path, key, "expected a small non-negative integer", err);
    *out = (size_t)v->valuedouble;
    return TM_OK;
}

/* {"String": s} or {"Regex": r} */
static int get_pattern(const tm_tokenizer *t, const cJSON *j, tok_regex *re, const char *path, tm_err *err)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "pattern");
    if (!cJSON_IsObject(p)) return bad(t, path, "pattern", "missing or not an object", err);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(p, "String"), *r = cJSON_GetObjectItemCaseSensitive(p, "Regex");
    char where[PATH_MAX_LEN + 32];
    if (cJSON_IsString(s)) {
        snprintf(where, sizeof where, "%s.pattern.String", path);
        return tok_regex_compile(re, s->valuestring, strlen(s->valuestring), 1, t->name, where, err);
    }
    if (cJSON_IsString(r)) {
        snprintf(where, sizeof where, "%s.pattern.Regex", path);
        return tok_regex_compile(re, r->valuestring, strlen(r->valuestring), 0, t->name, where, err);
    }
    return bad(t, path, "pattern", "expected {\"String\": ...} or {\"Regex\": ...}", err);
}

static int get_behavior(const tm_tokenizer *t, const cJSON *j, tok_split_behavior dflt, tok_split_behavior *out,
                        const char *path, tm_err *err)
{
    static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "behavior");
    if (!v || cJSON_IsNull(v)) {
        *out = dflt;
        return TM_OK;
    }
    if (cJSON_IsString(v))
        for (int i = 0; i < 5; i++)
            if (strcmp(v->valuestring, names[i]) == 0) {
                *out = (tok_split_behavior)i;
                return TM_OK;
            }
    return bad(t, path, "behavior", "expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous", err);
}

/* prepend_scheme ("always" | "first" | "never"), or the legacy add_prefix_space */
static int get_prepend(const tm_tokenizer *t, const cJSON *j, tok_prepend_scheme *out, const char *path, tm_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "prepend_scheme");
    if (v && !cJSON_IsNull(v)) {
        if (cJSON_IsString(v)) {
            if (!strcmp(v->valuestring, "always")) *out = TOK_PREPEND_ALWAYS;
            else if (!strcmp(v->valuestring, "first")) *out = TOK_PREPEND_FIRST;
            else if (!strcmp(v->valuestring, "never")) *out = TOK_PREPEND_NEVER;
            else return bad(t, path, "prepend_scheme", "expected always, first or never", err);
            return TM_OK;
        }
        return bad(t, path, "prepend_scheme", "expected a string", err);
    }
    int aps;
    int rc = get_bool(t, j, "add_prefix_space", 1, &aps, path, err);
    *out = aps ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER;
    return rc;
}

/* the members of a Sequence: allocate and load each with `load` */
#define LOAD_SEQ(T, field, key, loadfn)                                                                      \
    do {                                                                                                     \
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, key);                                          \
        if (!cJSON_IsArray(arr)) return bad(t, path, key, "missing or not an array", err);                   \
        size_t n = (size_t)cJSON_GetArraySize(arr), i = 0;                                                   \
        x->items = calloc(n + 1, sizeof(T));                                                                 \
        if (!x->items) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);                       \
        for (const cJSON *e = arr->child; e; e = e->next, i++) {                                             \
            char sub[PATH_MAX_LEN];                                                                          \
            snprintf(sub, sizeof sub, "%s.%s[%zu]", path, key, i);                                           \
            x->n_items = i + 1;                                                                              \
            int rc_ = loadfn(t, &x->items[i], e, sub, depth + 1, err);                                       \
            if (rc_) return rc_;                                                                             \
        }                                                                                                    \
    } while (0)

/* ---- normalizers --------------------------------------------------------- */

int tok_load_normalizer(tm_tokenizer *t, tok_normalizer *x, const void *json, const char *path, int depth, tm_err *err)
{
    const cJSON *j = json;
    memset(x, 0, sizeof *x);
    if (depth > TOK_MAX_DEPTH) return bad(t, path, NULL, "components nested too deeply", err);
    const char *ty = type_of(j);
    if (!cJSON_IsObject(j) || !ty) return bad(t, path, "type", "missing or not a string", err);
    if (!strcmp(ty, "Sequence")) {
        x->type = TOK_NORM_SEQUENCE;
        LOAD_SEQ(tok_normalizer, items, "normalizers", tok_load_normalizer);
        return TM_OK;
    }
    if (!strcmp(ty, "NFC")) x->type = TOK_NORM_NFC;
    else if (!strcmp(ty, "NFD")) x->type = TOK_NORM_NFD;
    else if (!strcmp(ty, "NFKC")) x->type = TOK_NORM_NFKC;
    else if (!strcmp(ty, "NFKD")) x->type = TOK_NORM_NFKD;
    else if (!strcmp(ty, "Lowercase")) x->type = TOK_NORM_LOWERCASE;
    else if (!strcmp(ty, "StripAccents")) x->type = TOK_NORM_STRIP_ACCENTS;
    else if (!strcmp(ty, "Nmt")) x->type = TOK_NORM_NMT;
    else if (!strcmp(ty, "Replace")) {
        x->type = TOK_NORM_REPLACE;
        int rc = get_pattern(t, j, &x->re, path, err);
        return rc ? rc : get_str(t, j, "content", &x->content, &x->content_len, path, err);
    } else if (!strcmp(ty, "Prepend")) {
        x->type = TOK_NORM_PREPEND;
        return get_str(t, j, "prepend", &x->content, &x->content_len, path, err);
    } else if (!strcmp(ty, "BertNormalizer")) {
        x->type = TOK_NORM_BERT;
        int rc;
        if ((rc = get_bool(t, j, "clean_text", 1, &x->clean, path, err)) ||
            (rc = get_bool(t, j, "handle_chinese_chars", 1, &x->chinese, path, err)) ||
            (rc = get_bool(t, j, "lowercase", 1, &x->lower, path, err)))
            return rc;
        return get_bool(t, j, "strip_accents", x->lower, &x->accents, path, err); /* null: as lowercase */
    } else if (!strcmp(ty, "Precompiled")) {
        x->type = TOK_NORM_PRECOMPILED;
        const cJSON *cm = cJSON_GetObjectItemCaseSensitive(j, "precompiled_charsmap");
        if (!cJSON_IsString(cm)) return bad(t, path, "precompiled_charsmap", "missing or not a string", err);
        return tok_precompiled_load(t, x, cm->valuestring, path, err);
    } else if (!strcmp(ty, "Strip")) {
        x->type = TOK_NORM_STRIP;
        int rc = get_bool(t, j, "strip_left", 1, &x->left, path, err);
        return rc ? rc : get_bool(t, j, "strip_right", 1, &x->right, path, err);
    } else
        return unsupported(t, path, "normalizer", ty, err);
    return TM_OK;
}

void tok_normalizer_free(tok_normalizer *x)
{
    for (size_t i = 0; i < x->n_items; i++) tok_normalizer_free(&x->items[i]);
    free(x->items);
    tok_regex_free(&x->re);
    free(x->content);
    free(x->pc_units);
    free(x->pc_norm);
}

/* ---- pre-tokenizers ------------------------------------------------------ */

#define GPT2_REGEX "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
/* Rust regex's Unicode \w, spelled out for PCRE2 */
#define RUST_WORD "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}"
#define WHITESPACE_REGEX "[" RUST_WORD "]+|[^" RUST_WORD "\\s]+"

int tok_load_pretok(tm_tokenizer *t, tok_pretok *x, const void *json, const char *path, int depth, tm_err *err)
{
    const cJSON *j = json;
    int rc = TM_OK;
    memset(x, 0, sizeof *x);
    if (depth > TOK_MAX_DEPTH) return bad(t, path, NULL, "components nested too deeply", err);
    const char *ty = type_of(j);
    if (!cJSON_IsObject(j) || !ty) return bad(t, path, "type", "missing or not a string", err);
    char where[PATH_MAX_LEN + 32];
    if (!strcmp(ty, "Sequence")) {
        x->type = TOK_PRE_SEQUENCE;
        LOAD_SEQ(tok_pretok, items, "pretokenizers", tok_load_pretok);
    } else if (!strcmp(ty, "Split")) {
        x->type = TOK_PRE_SPLIT;
        if (!(rc = get_pattern(t, j, &x->re, path, err)) && !(rc = get_behavior(t, j, TOK_SPLIT_REMOVED, &x->behavior, path, err)))
            rc = get_bool(t, j, "invert", 0, &x->invert, path, err);
        if (!rc && !cJSON_GetObjectItemCaseSensitive(j, "behavior")) rc = bad(t, path, "behavior", "missing", err);
    } else if (!strcmp(ty, "ByteLevel")) {
        x->type = TOK_PRE_BYTELEVEL;
        if (!(rc = get_bool(t, j, "add_prefix_space", 1, &x->add_prefix_space, path, err)))
            rc = get_bool(t, j, "use_regex", 1, &x->use_regex, path, err);
        snprintf(where, sizeof where, "%s (ByteLevel regex)", path);
        if (!rc && x->use_regex) rc = tok_regex_compile(&x->re, GPT2_REGEX, strlen(GPT2_REGEX), 0, t->name, where, err);
    } else if (!strcmp(ty, "Metaspace")) {
        x->type = TOK_PRE_METASPACE;
        if (!(rc = get_char(t, j, "replacement", 0x2581, &x->ch, path, err)) && !(rc = get_prepend(t, j, &x->prepend, path, err)))
            rc = get_bool(t, j, "split", 1, &x->split, path, err);
    } else if (!strcmp(ty, "Digits")) {
        x->type = TOK_PRE_DIGITS;
        rc = get_bool(t, j, "individual_digits", 0, &x->individual_digits, path, err);
    } else if (!strcmp(ty, "Whitespace")) {
        x->type = TOK_PRE_WHITESPACE;
        snprintf(where, sizeof where, "%s (Whitespace regex)", path);
        rc = tok_regex_compile(&x->re, WHITESPACE_REGEX, strlen(WHITESPACE_REGEX), 0, t->name, where, err);
    } else if (!strcmp(ty, "WhitespaceSplit")) {
        x->type = TOK_PRE_WHITESPACE_SPLIT;
    } else if (!strcmp(ty, "Punctuation")) {
        x->type = TOK_PRE_PUNCTUATION;
        rc = get_behavior(t, j, TOK_SPLIT_ISOLATED, &x->behavior, path, err);
    } else if (!strcmp(ty, "BertPreTokenizer")) {
        x->type = TOK_PRE_BERT;
    } else if (!strcmp(ty, "CharDelimiterSplit")) {
        x->type = TOK_PRE_CHAR_DELIM;
        if (!cJSON_GetObjectItemCaseSensitive(j, "delimiter")) return bad(t, path, "delimiter", "missing", err);
        rc = get_char(t, j, "delimiter", ' ', &x->ch, path, err);
    } else {
        return unsupported(t, path, "pre_tokenizer", ty, err);
    }
    return rc;
}

void tok_pretok_free(tok_pretok *x)
{
    for (size_t i = 0; i < x->n_items; i++) tok_pretok_free(&x->items[i]);
    free(x->items);
    tok_regex_free(&x->re);
}

/* ---- decoders ------------------------------------------------------------ */

int tok_load_decoder(tm_tokenizer *t, tok_decoder *x, const void *json, const char *path, int depth, tm_err *err)
{
    const cJSON *j = json;
    int rc = TM_OK;
    memset(x, 0, sizeof *x);
    if (depth > TOK_MAX_DEPTH) return bad(t, path, NULL, "components nested too deeply", err);
    const char *ty = type_of(j);
    if (!cJSON_IsObject(j) || !ty) return bad(t, path, "type", "missing or not a string", err);
    if (!strcmp(ty, "Sequence")) {
        x->type = TOK_DEC_SEQUENCE;
        LOAD_SEQ(tok_decoder, items, "decoders", tok_load_decoder);
    } else if (!strcmp(ty, "ByteLevel")) {
        x->type = TOK_DEC_BYTELEVEL;
    } else if (!strcmp(ty, "Metaspace")) {
        x->type = TOK_DEC_METASPACE;
        if (!(rc = get_char(t, j, "replacement", 0x2581, &x->ch, path, err))) rc = get_prepend(t, j, &x->prepend, path, err);
    } else if (!strcmp(ty, "ByteFallback")) {
        x->type = TOK_DEC_BYTE_FALLBACK;
    } else if (!strcmp(ty, "Fuse")) {
        x->type = TOK_DEC_FUSE;
    } else if (!strcmp(ty, "Strip")) {
        x->type = TOK_DEC_STRIP;
        if (!(rc = get_char(t, j, "content", ' ', &x->ch, path, err)) && !(rc = get_size(t, j, "start", &x->start, path, err)))
            rc = get_size(t, j, "stop", &x->stop, path, err);
    } else if (!strcmp(ty, "Replace")) {
        x->type = TOK_DEC_REPLACE;
        if (!(rc = get_pattern(t, j, &x->re, path, err))) rc = get_str(t, j, "content", &x->content, &x->content_len, path, err);
    } else if (!strcmp(ty, "WordPiece")) {
        x->type = TOK_DEC_WORDPIECE;
        if (cJSON_GetObjectItemCaseSensitive(j, "prefix")) rc = get_str(t, j, "prefix", &x->content, &x->content_len, path, err);
        else if (!(x->content = malloc(3))) rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
        else memcpy(x->content, "##", 3), x->content_len = 2;
        if (!rc) rc = get_bool(t, j, "cleanup", 1, &x->cleanup, path, err);
    } else if (!strcmp(ty, "BPEDecoder")) {
        x->type = TOK_DEC_BPE;
        if (cJSON_GetObjectItemCaseSensitive(j, "suffix")) rc = get_str(t, j, "suffix", &x->content, &x->content_len, path, err);
        else if (!(x->content = malloc(5))) rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
        else memcpy(x->content, "</w>", 5), x->content_len = 4;
    } else {
        return unsupported(t, path, "decoder", ty, err);
    }
    return rc;
}

void tok_decoder_free(tok_decoder *x)
{
    for (size_t i = 0; i < x->n_items; i++) tok_decoder_free(&x->items[i]);
    free(x->items);
    tok_regex_free(&x->re);
    free(x->content);
}

/* ---- post-processors ----------------------------------------------------- */

static int tmpl_push(tok_post *x, int32_t id)
{
    int32_t *v = realloc(x->tmpl, (x->n_tmpl + 1) * sizeof *v);
    if (!v) return TM_E_NOMEM;
    x->tmpl = v;
    x->tmpl[x->n_tmpl++] = id;
    return TM_OK;
}

/* ["<s>", 1] (Roberta/Bert cls and sep) */
static int get_pair_id(const tm_tokenizer *t, const cJSON *j, const char *key, int32_t *id, const char *path, tm_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 || !cJSON_IsNumber(v->child->next) ||
        v->child->next->valuedouble < 0 || v->child->next->valuedouble >= TOK_MAX_ID)
        return bad(t, path, key, "expected [token, id]", err);
    *id = (int32_t)v->child->next->valuedouble;
    return TM_OK;
}

static int load_template(const tm_tokenizer *t, tok_post *x, const cJSON *j, const char *path, tm_err *err)
{
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(j, "single");
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(j, "special_tokens");
    if (!cJSON_IsArray(single)) return bad(t, path, "single", "missing or not an array (the string form is not supported)", err);
    size_t i = 0;
    for (const cJSON *e = single->child; e; e = e->next, i++) {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
        const cJSON *sq = cJSON_GetObjectItemCaseSensitive(e, "Sequence");
        char sub[PATH_MAX_LEN];
        snprintf(sub, sizeof sub, "single[%zu]", i);
        if (sq) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(sq, "id");
            if (!cJSON_IsString(id) || strcmp(id->valuestring, "A") != 0)
                return bad(t, path, sub, "a single-sequence template may only hold Sequence A", err);
            if (tmpl_push(x, -1)) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
            continue;
        }
        const cJSON *name = sp ? cJSON_GetObjectItemCaseSensitive(sp, "id") : NULL;
        if (!cJSON_IsString(name)) return bad(t, path, sub, "expected {\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": ...}", err);
        const cJSON *def = cJSON_GetObjectItemCaseSensitive(specials, name->valuestring);
        const cJSON *ids = def ? cJSON_GetObjectItemCaseSensitive(def, "ids") : NULL;
        if (!cJSON_IsArray(ids)) return bad(t, path, "special_tokens", "a token of the template has no ids", err);
        for (const cJSON *v = ids->child; v; v = v->next) {
            if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= TOK_MAX_ID)
                return bad(t, path, "special_tokens", "ids must be non-negative integers", err);
            if (tmpl_push(x, (int32_t)v->valuedouble)) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
        }
    }
    return TM_OK;
}

int tok_load_post(tm_tokenizer *t, tok_post *x, const void *json, const char *path, int depth, tm_err *err)
{
    const cJSON *j = json;
    memset(x, 0, sizeof *x);
    if (depth > TOK_MAX_DEPTH) return bad(t, path, NULL, "components nested too deeply", err);
    const char *ty = type_of(j);
    if (!cJSON_IsObject(j) || !ty) return bad(t, path, "type", "missing or not a string", err);
    if (!strcmp(ty, "Sequence")) {
        x->type = TOK_POST_SEQUENCE;
        LOAD_SEQ(tok_post, items, "processors", tok_load_post);
        return TM_OK;
    }
    if (!strcmp(ty, "ByteLevel")) {
        x->type = TOK_POST_NOOP; /* only trims offsets */
        return TM_OK;
    }
    x->type = TOK_POST_TEMPLATE;
    if (!strcmp(ty, "TemplateProcessing")) return load_template(t, x, j, path, err);
    if (!strcmp(ty, "RobertaProcessing") || !strcmp(ty, "BertProcessing")) {
        int32_t cls, sep;
        int rc = get_pair_id(t, j, "cls", &cls, path, err);
        if (!rc) rc = get_pair_id(t, j, "sep", &sep, path, err);
        if (!rc && (tmpl_push(x, cls) || tmpl_push(x, -1) || tmpl_push(x, sep)))
            rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
        return rc;
    }
    return unsupported(t, path, "post_processor", ty, err);
}

void tok_post_free(tok_post *x)
{
    for (size_t i = 0; i < x->n_items; i++) tok_post_free(&x->items[i]);
    free(x->items);
    free(x->tmpl);
}
