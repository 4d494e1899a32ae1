/* text/tok_decode.c: decoders (HF `decoders::*`) and tm_tok_decode.
 *
 * HF `Tokenizer::decode`: ids -> vocabulary strings (added tokens first,
 * unknown ids skipped, special tokens dropped if asked), then the decoder's
 * `decode_chain` maps the list of strings to a new list, and the result is
 * joined with "". Without a decoder the strings are joined with " ". */
#include <stdlib.h>
#include <string.h>

#include "text/tok_impl.h"

static int oom(const tm_tokenizer *t, tm_err *err)
{
    return tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
}

#define TOK_S(l, i) ((l)->buf.p + (l)->off[i])

/* ByteLevel: every token whose chars all map to bytes becomes those bytes,
 * others stay as UTF-8; the whole is decoded lossily into ONE string (raw: as bytes). */
static int dec_byte_level(const tm_tokenizer *t, tok_strs *in, tok_strs *out, int raw)
{
    tok_buf bytes = {0}, text = {0};
    int rc = TM_OK;
    for (size_t i = 0; i < in->n && !rc; i++) {
        const char *s = TOK_S(in, i);
        size_t n = in->len[i], start = bytes.len;
        int all = 1;
        for (size_t k = 0; k < n;) {
            size_t adv;
            uint32_t c = tok_utf8_dec(s + k, n - k, &adv);
            if (c >= TOK_BL_CHARS || t->bl_byte[c] < 0) {
                all = 0;
                break;
            }
            char b = (char)t->bl_byte[c];
            if ((rc = tok_buf_append(&bytes, &b, 1))) break;
            k += adv;
        }
        if (!rc && !all) {
            bytes.len = start;
            rc = tok_buf_append(&bytes, s, n);
        }
    }
    if (!rc && raw) rc = tok_strs_push(out, bytes.p ? bytes.p : "", bytes.len);
    else if (!rc) rc = tok_utf8_lossy(&text, (const unsigned char *)(bytes.p ? bytes.p : ""), bytes.len);
    if (!rc && !raw) rc = tok_strs_push(out, text.p ? text.p : "", text.len);
    tok_buf_free(&bytes);
    tok_buf_free(&text);
    return rc;
}

static int dec_metaspace(const tok_decoder *d, tok_strs *in, tok_strs *out)
{
    tok_buf tmp = {0};
    int rc = TM_OK;
    for (size_t i = 0; i < in->n && !rc; i++) {
        const char *s = TOK_S(in, i);
        size_t n = in->len[i];
        tmp.len = 0;
        for (size_t k = 0; k < n && !rc;) {
            size_t adv;
            uint32_t c = tok_utf8_dec(s + k, n - k, &adv);
            if (c == d->ch) {
                if (!(i == 0 && d->prepend != TOK_PREPEND_NEVER)) rc = tok_buf_append(&tmp, " ", 1);
            } else {
                rc = tok_buf_append(&tmp, s + k, adv);
            }
            k += adv;
        }
        if (!rc) rc = tok_strs_push(out, tmp.p ? tmp.p : "", tmp.len);
    }
    tok_buf_free(&tmp);
    return rc;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* "<0xXX>" -> byte (Rust u8::from_str_radix(_, 16) on "XX", which also takes "+X") */
static int byte_token(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int h = hexval(s[3]), l = hexval(s[4]);
    if (s[3] == '+' && l >= 0) return l;
    return h >= 0 && l >= 0 ? h * 16 + l : -1;
}

static int flush_bytes(tok_buf *bytes, tok_strs *out, int raw)
{
    int rc = TM_OK;
    if (!bytes->len) return TM_OK;
    if (raw || tok_utf8_valid(bytes->p, bytes->len, NULL)) rc = tok_strs_push(out, bytes->p, bytes->len);
    else
        for (size_t k = 0; k < bytes->len && !rc; k++) rc = tok_strs_push(out, "\xEF\xBF\xBD", 3);
    bytes->len = 0;
    return rc;
}

static int dec_byte_fallback(tok_strs *in, tok_strs *out, int raw)
{
    tok_buf bytes = {0};
    int rc = TM_OK;
    for (size_t i = 0; i < in->n && !rc; i++) {
        int b = byte_token(TOK_S(in, i), in->len[i]);
        if (b >= 0) {
            char c = (char)b;
            rc = tok_buf_append(&bytes, &c, 1);
        } else {
            rc = flush_bytes(&bytes, out, raw);
            if (!rc) rc = tok_strs_push(out, TOK_S(in, i), in->len[i]);
        }
    }
    if (!rc) rc = flush_bytes(&bytes, out, raw);
    tok_buf_free(&bytes);
    return rc;
}

static int dec_strip(const tok_decoder *d, tok_strs *in, tok_strs *out)
{
    int rc = TM_OK;
    for (size_t i = 0; i < in->n && !rc; i++) {
        const char *s = TOK_S(in, i);
        size_t n = in->len[i], a = 0, b = n;
        for (size_t k = 0; k < d->start && a < n; k++) {
            size_t adv;
            if (tok_utf8_dec(s + a, n - a, &adv) != d->ch) break;
            a += adv;
        }
        for (size_t k = 0; k < d->stop && b > a; k++) {
            size_t j = b - 1, adv;
            while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
            if (j < a || tok_utf8_dec(s + j, b - j, &adv) != d->ch) break;
            b = j;
        }
        rc = tok_strs_push(out, s + a, b - a);
    }
    return rc;
}

static int dec_replace(const tm_tokenizer *t, const tok_decoder *d, tok_work *w, tok_strs *in, tok_strs *out,
                       tm_err *err)
{
    tok_buf tmp = {0};
    int rc = TM_OK;
    for (size_t i = 0; i < in->n && !rc; i++) {
        const char *s = TOK_S(in, i);
        if ((rc = tok_regex_find(&d->re, w, s, in->len[i], &w->m, err))) break;
        tmp.len = 0;
        for (size_t k = 0; k < w->m.n && !rc; k++) {
            const tok_match *m = &w->m.v[k];
            rc = m->is_match ? tok_buf_append(&tmp, d->content, d->content_len)
                             : tok_buf_append(&tmp, s + m->start, m->end - m->start);
        }
        if (!rc) rc = tok_strs_push(out, tmp.p ? tmp.p : "", tmp.len);
        if (rc) rc = oom(t, err);
    }
    tok_buf_free(&tmp);
    return rc;
}

/* BPEDecoder: the end-of-word suffix becomes " " (or "" in the last token) */
static int dec_bpe(const tok_decoder *d, tok_strs *in, tok_strs *out)
{
    tok_buf tmp = {0};
    int rc = TM_OK;
    for (size_t i = 0; i < in->n && !rc; i++) {
        const char *s = TOK_S(in, i);
        size_t n = in->len[i];
        const char *rep = i + 1 == in->n ? "" : " ";
        tmp.len = 0;
        for (size_t k = 0; k < n && !rc;) {
            if (d->content_len && k + d->content_len <= n && memcmp(s + k, d->content, d->content_len) == 0) {
                rc = tok_buf_append(&tmp, rep, strlen(rep));
                k += d->content_len;
            } else {
                rc = tok_buf_append(&tmp, s + k, 1);
                k++;
            }
        }
        if (!rc) rc = tok_strs_push(out, tmp.p ? tmp.p : "", tmp.len);
    }
    tok_buf_free(&tmp);
    return rc;
}

/* every occurrence of from in b (left to right, not overlapping) replaced by to, in place (to is
 * never longer than from) */
static void replace_all(tok_buf *b, const char *from, const char *to)
{
    size_t fl = strlen(from), tl = strlen(to), o = 0;
    for (size_t i = 0; i < b->len;) {
        if (i + fl <= b->len && memcmp(b->p + i, from, fl) == 0) {
            memmove(b->p + o, to, tl);
            o += tl;
            i += fl;
        } else {
            b->p[o++] = b->p[i++];
        }
    }
    b->len = o;
}

/* WordPiece: every token but the first loses its leading prefix ("##") or gains a leading space;
 * cleanup then undoes the usual tokenization spaces, token by token, in HF's order */
static int dec_wordpiece(const tok_decoder *d, tok_strs *in, tok_strs *out)
{
    static const char *const fix[][2] = {{" .", "."},   {" ?", "?"},     {" !", "!"},           {" ,", ","},
                                         {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},         {" do not", " don't"},
                                         {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    tok_buf tmp = {0};
    int rc = TM_OK;
    for (size_t i = 0; i < in->n && !rc; i++) {
        const char *s = TOK_S(in, i);
        size_t n = in->len[i];
        tmp.len = 0;
        if (i && n >= d->content_len && memcmp(s, d->content, d->content_len) == 0) {
            s += d->content_len, n -= d->content_len;
        } else if (i) {
            rc = tok_buf_append(&tmp, " ", 1);
        }
        if (!rc) rc = tok_buf_append(&tmp, s, n);
        if (!rc && d->cleanup)
            for (size_t k = 0; k < sizeof fix / sizeof fix[0]; k++) replace_all(&tmp, fix[k][0], fix[k][1]);
        if (!rc) rc = tok_strs_push(out, tmp.p ? tmp.p : "", tmp.len);
    }
    tok_buf_free(&tmp);
    return rc;
}

int tok_decode_chain(const tm_tokenizer *t, const tok_decoder *d, tok_work *w, tok_strs *toks, tm_err *err)
{
    if (d->type == TOK_DEC_SEQUENCE) {
        for (size_t i = 0; i < d->n_items; i++) {
            int rc = tok_decode_chain(t, &d->items[i], w, toks, err);
            if (rc) return rc;
        }
        return TM_OK;
    }
    tok_strs out = {0};
    int rc = TM_OK;
    switch (d->type) {
    case TOK_DEC_BYTELEVEL: rc = dec_byte_level(t, toks, &out, w->raw_bytes); break;
    case TOK_DEC_METASPACE: rc = dec_metaspace(d, toks, &out); break;
    case TOK_DEC_BYTE_FALLBACK: rc = dec_byte_fallback(toks, &out, w->raw_bytes); break;
    case TOK_DEC_FUSE: rc = tok_strs_push(&out, toks->buf.p ? toks->buf.p : "", toks->buf.len); break;
    case TOK_DEC_STRIP: rc = dec_strip(d, toks, &out); break;
    case TOK_DEC_REPLACE: rc = dec_replace(t, d, w, toks, &out, err); break;
    case TOK_DEC_BPE: rc = dec_bpe(d, toks, &out); break;
    case TOK_DEC_WORDPIECE: rc = dec_wordpiece(d, toks, &out); break;
    case TOK_DEC_SEQUENCE: break;
    }
    if (rc) {
        tok_strs_free(&out);
        return d->type == TOK_DEC_REPLACE ? rc : oom(t, err); /* Replace reports its own errors */
    }
    tok_strs_free(toks);
    *toks = out;
    return TM_OK;
}

/* The decoder chain over strings s[0..n) (pieces, or any strings), joined: *out (NUL-terminated). */
static int decode_strs(const tm_tokenizer *t, const char *const *s, const size_t *len, size_t n, int raw,
                       tok_buf *out, tm_err *err)
{
    tok_strs toks = {0};
    tok_work w;
    *out = (tok_buf){0};
    int rc = tok_work_init(&w, 0, t->name, err);
    if (rc) return rc;
    w.raw_bytes = raw;
    for (size_t i = 0; i < n && !rc; i++)
        if (tok_strs_push(&toks, s[i], len[i])) rc = oom(t, err);
    if (!rc && t->decoder) rc = tok_decode_chain(t, t->decoder, &w, &toks, err);
    for (size_t i = 0; i < toks.n && !rc; i++) {
        if (!t->decoder && i > 0 && tok_buf_append(out, " ", 1)) rc = oom(t, err);
        if (!rc && tok_buf_append(out, TOK_S(&toks, i), toks.len[i])) rc = oom(t, err);
    }
    if (!rc && tok_buf_reserve(out, 0)) rc = oom(t, err);
    tok_strs_free(&toks);
    tok_work_free(&w);
    if (rc) tok_buf_free(out);
    else out->p[out->len] = 0;
    return rc;
}

int tm_tok_decode(const tm_tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **text, size_t *len,
                  tm_err *err)
{
    return tm_tok_decode_keep(t, ids, n, skip_special, NULL, 0, text, len, err);
}

static int kept(int32_t id, const int32_t *keep, int n_keep)
{
    for (int i = 0; i < n_keep; i++)
        if (keep[i] == id) return 1;
    return 0;
}

int tm_tok_decode_keep(const tm_tokenizer *t, const int32_t *ids, size_t n, int skip_special, const int32_t *keep,
                       int n_keep, char **text, size_t *len, tm_err *err)
{
    *text = NULL;
    if (len) *len = 0;
    const char **s = malloc(sizeof *s * (n ? n : 1));
    size_t *sl = malloc(sizeof *sl * (n ? n : 1)), k = 0;
    if (!s || !sl) {
        free(s);
        free(sl);
        return oom(t, err);
    }
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || (size_t)id >= t->n_ids || !t->pieces[id]) continue; /* unknown ids are skipped */
        if (skip_special && t->is_special[id] && !kept(id, keep, n_keep)) continue;
        s[k] = t->pieces[id];
        sl[k++] = t->piece_len[id];
    }
    tok_buf joined;
    int rc = decode_strs(t, s, sl, k, 0, &joined, err);
    free(s);
    free(sl);
    if (rc) return rc;
    *text = joined.p;
    if (len) *len = joined.len;
    return TM_OK;
}

/* tm_tok_token_bytes: the piece between two plain letters, "a" piece "a", through the chain with
 * raw bytes; what is left after taking off what "a" "a" gives at the start and at the end is the
 * token's own part. So a decoder's rules for a text's first or last token (Metaspace's leading
 * space, Strip, WordPiece's "##", BPEDecoder's last suffix) do not apply, as in the middle of a
 * text. Where the ends do not match (a decoder that rewrites across tokens), the piece alone. */
int tm_tok_token_bytes(const tm_tokenizer *t, int32_t id, char **bytes, size_t *len, tm_err *err)
{
    *bytes = NULL;
    *len = 0;
    if (id < 0 || (size_t)id >= t->n_ids || !t->pieces[id]) {
        *bytes = calloc(1, 1);
        return *bytes ? TM_OK : oom(t, err);
    }
    const char *three[3] = {"a", t->pieces[id], "a"}, *aa[2] = {"a", "a"};
    size_t l3[3] = {1, t->piece_len[id], 1}, l2[2] = {1, 1};
    tok_buf one, two, mid;
    int rc = decode_strs(t, three, l3, 1, 1, &one, err);
    if (!rc && (rc = decode_strs(t, aa, l2, 2, 1, &two, err))) tok_buf_free(&one);
    if (!rc && (rc = decode_strs(t, three, l3, 3, 1, &mid, err))) {
        tok_buf_free(&one);
        tok_buf_free(&two);
    }
    if (rc) return rc;
    /* two = head tail, head = one; mid = head token tail */
    size_t head = one.len, tail = two.len >= head ? two.len - head : 0;
    int ok = two.len >= head && !memcmp(two.p, one.p, head) && mid.len >= head + tail && !memcmp(mid.p, one.p, head) &&
             !memcmp(mid.p + mid.len - tail, two.p + head, tail);
    tok_buf_free(&one);
    tok_buf_free(&two);
    if (ok) {
        memmove(mid.p, mid.p + head, mid.len - head - tail);
        mid.len -= head + tail;
        mid.p[mid.len] = 0;
    } else {
        tok_buf_free(&mid);
        if ((rc = decode_strs(t, three + 1, l3 + 1, 1, 1, &mid, err))) return rc;
    }
    *bytes = mid.p;
    *len = mid.len;
    return TM_OK;
}
