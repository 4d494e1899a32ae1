/* text/tok_stream.c: streaming detokenization (the algorithm of HF
 * `tokenizers::DecodeStream`).
 *
 * State: a window of ids ids[0..n) and `prefix` = decode(ids[0..prefix_index)).
 *
 *   push(id):  ids += id; s = decode(ids)
 *              if len(s) > len(prefix) and s does not end in U+FFFD:
 *                  emit s[len(prefix)..]          (s starts with prefix)
 *                  drop ids[0..prefix_index); prefix = decode(ids); prefix_index = n
 *              else emit "" (an incomplete UTF-8 sequence is held back)
 *   flush():   emit decode(ids)[len(prefix)..] and reset.
 *
 * Decoding a window rather than single tokens keeps context-dependent rules
 * right: the decoder sees the previous token, so the SentencePiece Strip
 * (leading space of the first token) applies only at the very start, and
 * byte-fallback / byte-level sequences are completed across tokens.
 * If a window grows past TOK_STREAM_MAX_HELD tokens that all end in U+FFFD
 * (a long run of invalid bytes), it is emitted as is to bound the work. */
#include <stdlib.h>
#include <string.h>

#include "text/tok_impl.h"

#define TOK_STREAM_MAX_HELD 64

struct tm_detok_stream {
    const tm_tokenizer *t;
    int skip_special;
    int32_t *ids;        /* window [n] */
    size_t n, cap;
    size_t prefix_index; /* ids[0..prefix_index) decode to prefix */
    char *prefix;        /* [prefix_len] */
    size_t prefix_len;
};

tm_detok_stream *tm_detok_stream_new(const tm_tokenizer *t, int skip_special)
{
    tm_detok_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->t = t;
    s->skip_special = skip_special;
    return s;
}

void tm_detok_stream_free(tm_detok_stream *s)
{
    if (!s) return;
    free(s->ids);
    free(s->prefix);
    free(s);
}

static int ends_with_fffd(const char *s, size_t n)
{
    return n >= 3 && memcmp(s + n - 3, "\xEF\xBF\xBD", 3) == 0;
}

static int empty_piece(char **piece, size_t *len, const tm_tokenizer *t, tm_err *err)
{
    *piece = calloc(1, 1);
    *len = 0;
    return *piece ? TM_OK : tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
}

int tm_detok_stream_push(tm_detok_stream *s, int32_t id, char **piece, size_t *len, tm_err *err)
{
    *piece = NULL;
    *len = 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        int32_t *v = realloc(s->ids, cap * sizeof *v);
        if (!v) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", s->t->name);
        s->ids = v;
        s->cap = cap;
    }
    s->ids[s->n++] = id;
    char *str;
    size_t sl;
    int rc = tm_tok_decode(s->t, s->ids, s->n, s->skip_special, &str, &sl, err);
    if (rc) return rc;
    if (sl <= s->prefix_len || (ends_with_fffd(str, sl) && s->n - s->prefix_index < TOK_STREAM_MAX_HELD)) {
        free(str);
        return empty_piece(piece, len, s->t, err);
    }
    if (s->prefix_len && memcmp(str, s->prefix, s->prefix_len) != 0) {
        free(str);
        return tm_errf(err, TM_E_INVALID, "%s: streaming decode: the decoder changed text it had already produced",
                       s->t->name);
    }
    /* emit the new text */
    size_t nl = sl - s->prefix_len;
    memmove(str, str + s->prefix_len, nl);
    str[nl] = 0;
    /* slide the window: keep ids[prefix_index..), they become the new prefix */
    size_t keep_from = s->prefix_index, new_index = s->n - s->prefix_index;
    memmove(s->ids, s->ids + keep_from, (s->n - keep_from) * sizeof *s->ids);
    s->n -= keep_from;
    free(s->prefix);
    s->prefix = NULL;
    rc = tm_tok_decode(s->t, s->ids, s->n, s->skip_special, &s->prefix, &s->prefix_len, err);
    if (rc) {
        free(str);
        s->prefix_len = 0;
        return rc;
    }
    s->prefix_index = new_index;
    *piece = str;
    *len = nl;
    return TM_OK;
}

int tm_detok_stream_flush(tm_detok_stream *s, char **piece, size_t *len, tm_err *err)
{
    *piece = NULL;
    *len = 0;
    char *str = NULL;
    size_t sl = 0;
    int rc = tm_tok_decode(s->t, s->ids, s->n, s->skip_special, &str, &sl, err);
    if (rc) return rc;
    if (sl > s->prefix_len && (!s->prefix_len || memcmp(str, s->prefix, s->prefix_len) == 0)) {
        memmove(str, str + s->prefix_len, sl - s->prefix_len);
        sl -= s->prefix_len;
        str[sl] = 0;
    } else {
        str[0] = 0;
        sl = 0;
    }
    s->n = 0;
    s->prefix_index = 0;
    free(s->prefix);
    s->prefix = NULL;
    s->prefix_len = 0;
    *piece = str;
    *len = sl;
    return TM_OK;
}
