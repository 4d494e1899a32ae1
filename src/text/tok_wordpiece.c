/* text/tok_wordpiece.c: the WordPiece model (HF `models::wordpiece`, BERT's
 * tokenizer): greedy longest-match-first over the vocabulary.
 *
 * A word of more than max_input_chars_per_word characters is the unk token.
 * Otherwise, from start = 0: the longest vocabulary entry that s[start..end)
 * is (written with continuing_subword_prefix, "##", when start > 0), shrinking
 * end one character at a time; it is emitted and start moves to its end. If
 * no end matches at some start, the whole word becomes the single unk token
 * (not just the unmatched rest). A word costs O(chars^2) lookups at worst,
 * bounded by max_input_chars_per_word. */
#include <cjson/cJSON.h>
#include <string.h>

#include "text/tok_impl.h"

#define WP_MAX_CHARS_LIMIT (1u << 20) /* a max_input_chars_per_word beyond this is refused */

int tok_load_wordpiece(tm_tokenizer *t, const void *model_json, tm_err *err)
{
    const cJSON *m = model_json;
    tok_model *wp = &t->model;
    int rc;
    wp->type = TOK_MODEL_WORDPIECE;
    if ((rc = tok_model_str(t, m, "unk_token", &wp->unk, NULL, err)) ||
        (rc = tok_model_str(t, m, "continuing_subword_prefix", &wp->prefix, &wp->prefix_len, err)))
        return rc;
    /* HF's defaults where a field is absent: "[UNK]", "##", 100 */
    if (!cJSON_GetObjectItemCaseSensitive(m, "unk_token") && !(wp->unk = tok_arena_strndup(&t->arena, "[UNK]", 5)))
        return tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
    if (!cJSON_GetObjectItemCaseSensitive(m, "continuing_subword_prefix")) {
        if (!(wp->prefix = tok_arena_strndup(&t->arena, "##", 2))) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
        wp->prefix_len = 2;
    }
    if (!wp->unk) return tm_errf(err, TM_E_FORMAT, "%s: model.unk_token: WordPiece needs an unk token", t->name);
    wp->max_chars = 100;
    const cJSON *mc = cJSON_GetObjectItemCaseSensitive(m, "max_input_chars_per_word");
    if (mc && !cJSON_IsNull(mc)) {
        if (!cJSON_IsNumber(mc) || mc->valuedouble < 0 || mc->valuedouble > WP_MAX_CHARS_LIMIT ||
            mc->valuedouble != (double)(size_t)mc->valuedouble)
            return tm_errf(err, TM_E_FORMAT, "%s: model.max_input_chars_per_word: expected an integer in [0, %u]", t->name,
                           WP_MAX_CHARS_LIMIT);
        wp->max_chars = (size_t)mc->valuedouble;
    }
    return tok_model_vocab(t, cJSON_GetObjectItemCaseSensitive(m, "vocab"), err);
}

/* the unk token's id, or an error naming it (HF: Error::MissingUnkToken) */
static int unk_id(const tok_model *wp, tok_work *w, int32_t *id, tm_err *err)
{
    *id = tok_strmap_get(&wp->vocab, wp->unk, strlen(wp->unk));
    if (*id < 0) return tm_errf(err, TM_E_FORMAT, "%s: model.unk_token: '%.64s' is not in model.vocab", w->name, wp->unk);
    return TM_OK;
}

/* length in bytes of the UTF-8 character that ends at s[0..n) (n > 0) */
static size_t last_char_len(const char *s, size_t n)
{
    size_t k = n - 1;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
    return n - k;
}

int tok_wordpiece_encode(const tok_model *wp, tok_work *w, const char *s, size_t n, tm_err *err)
{
    if (n == 0) return TM_OK;
    size_t chars = 0;
    for (size_t i = 0; i < n; i++) chars += ((unsigned char)s[i] & 0xC0) != 0x80;
    size_t first = w->n_ids; /* this word's ids start here, dropped again if it turns out unk */
    int bad = chars > wp->max_chars, rc = TM_OK;
    tok_buf key = {0};
    for (size_t start = 0; start < n && !bad;) {
        int32_t id = -1;
        size_t end = n;
        while (end > start) {
            const char *k = s + start;
            size_t kl = end - start;
            if (start > 0) { /* prefix + s[start..end) */
                key.len = 0;
                if (tok_buf_append(&key, wp->prefix, wp->prefix_len) || tok_buf_append(&key, s + start, end - start)) {
                    rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->name);
                    goto out;
                }
                k = key.p;
                kl = key.len;
            }
            if ((id = tok_strmap_get(&wp->vocab, k, kl)) >= 0) break;
            end -= last_char_len(s + start, end - start);
        }
        if (id < 0) {
            bad = 1;
            break;
        }
        if (tok_work_push_id(w, id)) {
            rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->name);
            goto out;
        }
        start = end;
    }
    if (bad) {
        int32_t uid;
        w->n_ids = first;
        if (!(rc = unk_id(wp, w, &uid, err)) && tok_work_push_id(w, uid))
            rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->name);
    }
out:
    tok_buf_free(&key);
    return rc;
}
