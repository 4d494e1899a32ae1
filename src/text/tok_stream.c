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
 * (a long run of invalid bytes), it is emitted as is to bound the work.
 *
 * A Strip decoder that removes more than one leading character, or any
 * trailing one, is not window-safe: it would strip inside the window (a
 * window's end is not the text's end, so a trailing space held back there is
 * lost once the window slides past it). With it the window is not slid for
 * the first TOK_STREAM_FULL tokens (exact, O(n^2) decoding).
 *
 * One case cannot stream exactly: with ByteFallback, a run of <0xXX> tokens
 * that is invalid UTF-8 as a whole becomes one U+FFFD per byte, including
 * bytes that formed valid characters already emitted (HF decodes the run as
 * a unit). Then decode(window) no longer starts with prefix; HF's
 * DecodeStream raises an error there, we emit the text after the longest
 * common prefix instead and carry on. Valid text always streams exactly. */
#include <stdlib.h>
#include <string.h>

#include "text/tok_impl.h"

#define TOK_STREAM_MAX_HELD 64
#define TOK_STREAM_FULL 4096

struct tm_detok_stream {
    const tm_tokenizer *t;
    int skip_special;
    int32_t keep[TM_DETOK_KEEP]; /* special ids kept all the same [n_keep] */
    int n_keep;
    int32_t *ids;        /* window [n] */
    size_t n, cap;
    size_t prefix_index; /* ids[0..prefix_index) decode to prefix */
    char *prefix;        /* [prefix_len] */
    size_t prefix_len;
    int full;            /* decoder is not window-safe: keep the whole sequence */
};

static int window_safe(const tok_decoder *d)
{
    if (!d) return 1;
    if (d->type == TOK_DEC_STRIP && (d->start > 1 || d->stop > 0)) return 0;
    for (size_t i = 0; i < d->n_items; i++)
        if (!window_safe(&d->items[i])) return 0;
    return 1;
}

tm_detok_stream *tm_detok_stream_new(const tm_tokenizer *t, int skip_special)
{
    tm_detok_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->t = t;
    s->skip_special = skip_special;
    s->full = !window_safe(t->decoder);
    return s;
}

void tm_detok_stream_keep(tm_detok_stream *s, const int32_t *ids, int n)
{
    s->n_keep = n < TM_DETOK_KEEP ? n : TM_DETOK_KEEP;
    if (s->n_keep > 0) memcpy(s->keep, ids, sizeof *ids * (size_t)s->n_keep);
    else s->n_keep = 0;
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

/* length of the common prefix of a and b, cut back to a character boundary */
static size_t common_prefix(const char *a, size_t an, const char *b, size_t bn)
{
    size_t i = 0;
    while (i < an && i < bn && a[i] == b[i]) i++;
    if (i == bn) return i;
    while (i > 0 && ((unsigned char)a[i] & 0xC0) == 0x80) i--;
    return i;
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
    int rc = tm_tok_decode_keep(s->t, s->ids, s->n, s->skip_special, s->keep, s->n_keep, &str, &sl, err);
    if (rc) return rc;
    if (sl <= s->prefix_len || (ends_with_fffd(str, sl) && s->n - s->prefix_index < TOK_STREAM_MAX_HELD)) {
        free(str);
        return empty_piece(piece, len, s->t, err);
    }
    /* emit the new text (after the common prefix, see above) */
    size_t common = common_prefix(str, sl, s->prefix, s->prefix_len);
    size_t nl = sl - common;
    memmove(str, str + common, nl);
    str[nl] = 0;
    /* slide the window: keep ids[prefix_index..), they become the new prefix */
    size_t keep_from = s->prefix_index, new_index = s->n - s->prefix_index;
    if (s->full && s->n < TOK_STREAM_FULL) keep_from = 0, new_index = s->n;
    memmove(s->ids, s->ids + keep_from, (s->n - keep_from) * sizeof *s->ids);
    s->n -= keep_from;
    free(s->prefix);
    s->prefix = NULL;
    rc = tm_tok_decode_keep(s->t, s->ids, s->n, s->skip_special, s->keep, s->n_keep, &s->prefix, &s->prefix_len, err);
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
    int rc = tm_tok_decode_keep(s->t, s->ids, s->n, s->skip_special, s->keep, s->n_keep, &str, &sl, err);
    if (rc) return rc;
    if (sl > s->prefix_len) {
        size_t common = common_prefix(str, sl, s->prefix, s->prefix_len);
        memmove(str, str + common, sl - common);
        sl -= common;
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
