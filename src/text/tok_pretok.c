/* text/tok_pretok.c: pre-tokenizers (HF `pre_tokenizers::*`) over piece lists.
 *
 * Every pre-tokenizer maps each input piece to zero or more output pieces.
 * Splits follow HF `NormalizedString::split`: the pattern yields alternating
 * (range, is_match) items, the SplitDelimiterBehavior decides how matches
 * join their neighbours, and empty pieces are dropped afterwards (as
 * `PreTokenizedString::split` does). */
#include <stdlib.h>
#include <string.h>

#include "text/tok_impl.h"

static int oom(tok_work *w, tm_err *err)
{
    return tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->name);
}

/* push the sub-range [a, b) of piece p (relative offsets) if non-empty */
static int push_sub(tok_pieces *out, const tok_piece *p, size_t a, size_t b)
{
    if (b <= a) return TM_OK;
    tok_piece q = {p->off + a, b - a, 0, p->at_start && a <= p->ins};
    q.ins = p->ins > a ? p->ins - a : 0;
    if (q.ins > q.len) q.ins = q.len;
    return tok_pieces_push(out, q);
}

/* apply a SplitDelimiterBehavior to w->m (ranges relative to piece p) */
static int split_by(tok_work *w, const tok_piece *p, tok_split_behavior bh, tok_pieces *out, tm_err *err)
{
    const tok_matches *m = &w->m;
    tok_matches *r = &w->m2;
    r->n = 0;
    int prev = 0;
    switch (bh) {
    case TOK_SPLIT_ISOLATED:
        for (size_t i = 0; i < m->n; i++)
            if (push_sub(out, p, m->v[i].start, m->v[i].end)) return oom(w, err);
        return TM_OK;
    case TOK_SPLIT_REMOVED:
        for (size_t i = 0; i < m->n; i++)
            if (!m->v[i].is_match && push_sub(out, p, m->v[i].start, m->v[i].end)) return oom(w, err);
        return TM_OK;
    case TOK_SPLIT_CONTIGUOUS:
    case TOK_SPLIT_MERGED_PREV:
        for (size_t i = 0; i < m->n; i++) {
            const tok_match *c = &m->v[i];
            int merge = bh == TOK_SPLIT_CONTIGUOUS ? c->is_match == prev : (c->is_match && !prev);
            if (merge && r->n) r->v[r->n - 1].end = c->end;
            else if (tok_matches_push(r, c->start, c->end, 0)) return oom(w, err);
            prev = c->is_match;
        }
        for (size_t i = 0; i < r->n; i++)
            if (push_sub(out, p, r->v[i].start, r->v[i].end)) return oom(w, err);
        return TM_OK;
    case TOK_SPLIT_MERGED_NEXT:
        /* HF folds from the right: a match joins the range after it */
        for (size_t i = m->n; i-- > 0;) {
            const tok_match *c = &m->v[i];
            if (c->is_match && !prev && r->n) r->v[r->n - 1].start = c->start;
            else if (tok_matches_push(r, c->start, c->end, 0)) return oom(w, err);
            prev = c->is_match;
        }
        for (size_t i = r->n; i-- > 0;)
            if (push_sub(out, p, r->v[i].start, r->v[i].end)) return oom(w, err);
        return TM_OK;
    }
    return TM_OK;
}

/* matches of a per-character predicate: every matching char is one match */
typedef int (*char_pred)(uint32_t cp, uint32_t arg);

static int char_matches(tok_work *w, const char *s, size_t n, char_pred pred, uint32_t arg, tm_err *err)
{
    tok_matches *m = &w->m;
    m->n = 0;
    if (n == 0) return tok_matches_push(m, 0, 0, 0) ? oom(w, err) : TM_OK;
    size_t last = 0;
    for (size_t i = 0; i < n;) {
        size_t adv;
        uint32_t c = tok_utf8_dec(s + i, n - i, &adv);
        if (pred(c, arg)) {
            if (last < i && tok_matches_push(m, last, i, 0)) return oom(w, err);
            if (tok_matches_push(m, i, i + adv, 1)) return oom(w, err);
            last = i + adv;
        }
        i += adv;
    }
    if (last < n && tok_matches_push(m, last, n, 0)) return oom(w, err);
    return TM_OK;
}

static int pred_numeric(uint32_t c, uint32_t arg) { (void)arg; return tok_is_numeric(c); }
static int pred_space(uint32_t c, uint32_t arg) { (void)arg; return tok_is_whitespace(c); }
static int pred_punct(uint32_t c, uint32_t arg) { (void)arg; return tok_is_punct(c); }
static int pred_eq(uint32_t c, uint32_t arg) { return c == arg; }

static int split_chars(tok_work *w, const tok_piece *p, char_pred pred, uint32_t arg, tok_split_behavior bh,
                       tok_pieces *out, tm_err *err)
{
    int rc = char_matches(w, w->text.p + p->off, p->len, pred, arg, err);
    return rc ? rc : split_by(w, p, bh, out, err);
}

static int split_regex(tok_work *w, const tok_piece *p, const tok_regex *re, int invert, tok_split_behavior bh,
                       tok_pieces *out, tm_err *err)
{
    int rc = tok_regex_find(re, w, w->text.p + p->off, p->len, &w->m, err);
    if (rc) return rc;
    if (invert)
        for (size_t i = 0; i < w->m.n; i++) w->m.v[i].is_match = !w->m.v[i].is_match;
    return split_by(w, p, bh, out, err);
}

/* prepend s[0..n) to the piece (as inserted text) */
static int prepend(tok_work *w, tok_piece *p, const char *s, size_t n, tm_err *err)
{
    tok_piece q, r;
    size_t off = p->off, len = p->len;
    int rc = tok_work_add_text(w, s, n, &q, err);
    if (!rc) rc = tok_work_add_text(w, w->text.p + off, len, &r, err);
    if (rc) return rc;
    p->off = q.off;
    p->len = n + len;
    p->ins += n;
    return TM_OK;
}

/* GPT-2 bytes_to_unicode: byte -> code point */
static uint32_t byte_char(unsigned b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) return b;
    /* the others, in order, map to 256, 257, ... */
    unsigned k = b <= 0x20 ? b : b <= 0xA0 ? b - 0x7F + 0x21 : 0x21 + 0x22;
    return 256 + k;
}

void tok_byte_level_tables(tm_tokenizer *t)
{
    for (int c = 0; c < TOK_BL_CHARS; c++) t->bl_byte[c] = -1;
    for (unsigned b = 0; b < 256; b++) {
        char u[4];
        uint32_t c = byte_char(b);
        size_t l = tok_utf8_enc(c, u);
        memcpy(t->bl_utf8[b], u, 2);
        t->bl_len[b] = (uint8_t)l;
        t->bl_byte[c] = (int16_t)b;
    }
}

static int byte_level_map(const tm_tokenizer *t, tok_work *w, tok_piece *p, tm_err *err)
{
    if (w->text.len + 2 * p->len > w->limit)
        return tm_errf(err, TM_E_LIMIT, "%s: pre_tokenizer ByteLevel grew the text beyond the limit", w->name);
    if (tok_buf_reserve(&w->text, 2 * p->len)) return oom(w, err);
    const unsigned char *s = (const unsigned char *)w->text.p + p->off;
    char *d = w->text.p + w->text.len;
    size_t o = 0, ins = 0;
    for (size_t i = 0; i < p->len; i++) {
        unsigned b = s[i];
        d[o] = t->bl_utf8[b][0];
        if (t->bl_len[b] == 2) d[o + 1] = t->bl_utf8[b][1];
        o += t->bl_len[b];
        if (i + 1 == p->ins) ins = o;
    }
    p->off = w->text.len;
    p->len = o;
    p->ins = ins;
    w->text.len += o;
    w->text.p[w->text.len] = 0;
    return TM_OK;
}

/* Metaspace: ' ' -> replacement, maybe prepend it, maybe split (MergedWithNext) */
static int metaspace(const tok_pretok *pt, tok_work *w, tok_piece *p, tok_pieces *out, tm_err *err)
{
    char rep[4];
    size_t rl = tok_utf8_enc(pt->ch, rep);
    tok_buf tmp = {0};
    const char *s = w->text.p + p->off;
    size_t ins = 0;
    for (size_t i = 0; i < p->len; i++) {
        int rc = s[i] == ' ' ? tok_buf_append(&tmp, rep, rl) : tok_buf_append(&tmp, s + i, 1);
        if (rc) {
            tok_buf_free(&tmp);
            return oom(w, err);
        }
        if (i + 1 == p->ins) ins = tmp.len;
    }
    tok_piece q = *p;
    int rc = tok_work_add_text(w, tmp.p ? tmp.p : "", tmp.len, &q, err);
    tok_buf_free(&tmp);
    if (rc) return rc;
    q.ins = ins;
    int starts = q.len >= rl && memcmp(w->text.p + q.off, rep, rl) == 0;
    if (!starts && (pt->prepend == TOK_PREPEND_ALWAYS || (pt->prepend == TOK_PREPEND_FIRST && q.at_start)))
        if ((rc = prepend(w, &q, rep, rl, err))) return rc;
    if (!pt->split) return q.len ? (tok_pieces_push(out, q) ? oom(w, err) : TM_OK) : TM_OK;
    return split_chars(w, &q, pred_eq, pt->ch, TOK_SPLIT_MERGED_NEXT, out, err);
}

static int pretok_piece(const tm_tokenizer *t, const tok_pretok *pt, tok_work *w, tok_piece p, tok_pieces *out,
                        tm_err *err)
{
    int rc;
    switch (pt->type) {
    case TOK_PRE_SPLIT:
        return split_regex(w, &p, &pt->re, pt->invert, pt->behavior, out, err);
    case TOK_PRE_WHITESPACE:
        return split_regex(w, &p, &pt->re, 1, TOK_SPLIT_REMOVED, out, err);
    case TOK_PRE_WHITESPACE_SPLIT:
        return split_chars(w, &p, pred_space, 0, TOK_SPLIT_REMOVED, out, err);
    case TOK_PRE_PUNCTUATION:
        return split_chars(w, &p, pred_punct, 0, pt->behavior, out, err);
    case TOK_PRE_CHAR_DELIM:
        return split_chars(w, &p, pred_eq, pt->ch, TOK_SPLIT_REMOVED, out, err);
    case TOK_PRE_DIGITS:
        return split_chars(w, &p, pred_numeric, 0, pt->individual_digits ? TOK_SPLIT_ISOLATED : TOK_SPLIT_CONTIGUOUS,
                           out, err);
    case TOK_PRE_METASPACE:
        return metaspace(pt, w, &p, out, err);
    case TOK_PRE_BERT: {
        tok_pieces mid = {0};
        rc = split_chars(w, &p, pred_space, 0, TOK_SPLIT_REMOVED, &mid, err);
        for (size_t i = 0; i < mid.n && !rc; i++) rc = split_chars(w, &mid.v[i], pred_punct, 0, TOK_SPLIT_ISOLATED, out, err);
        free(mid.v);
        return rc;
    }
    case TOK_PRE_BYTELEVEL: {
        if (pt->add_prefix_space && (p.len == 0 || w->text.p[p.off] != ' '))
            if ((rc = prepend(w, &p, " ", 1, err))) return rc;
        size_t first = out->n;
        if (pt->use_regex) {
            if ((rc = split_regex(w, &p, &pt->re, 0, TOK_SPLIT_ISOLATED, out, err))) return rc;
        } else if (p.len && tok_pieces_push(out, p)) {
            return oom(w, err);
        }
        for (size_t i = first; i < out->n; i++)
            if ((rc = byte_level_map(t, w, &out->v[i], err))) return rc;
        return TM_OK;
    }
    case TOK_PRE_SEQUENCE:
        break;
    }
    return TM_OK;
}

int tok_pretokenize(const tm_tokenizer *t, const tok_pretok *pt, tok_work *w, tok_pieces *in, tok_pieces *out,
                    tm_err *err)
{
    out->n = 0;
    int rc = TM_OK;
    if (pt->type != TOK_PRE_SEQUENCE) {
        for (size_t i = 0; i < in->n && !rc; i++) rc = pretok_piece(t, pt, w, in->v[i], out, err);
        return rc;
    }
    /* Sequence: each member runs over the whole list in turn */
    tok_pieces a = {0}, b = {0};
    for (size_t i = 0; i < in->n; i++)
        if (tok_pieces_push(&a, in->v[i])) {
            rc = oom(w, err);
            goto done;
        }
    for (size_t k = 0; k < pt->n_items && !rc; k++) {
        rc = tok_pretokenize(t, &pt->items[k], w, &a, &b, err);
        tok_pieces tmp = a;
        a = b;
        b = tmp;
    }
    for (size_t i = 0; i < a.n && !rc; i++)
        if (tok_pieces_push(out, a.v[i])) rc = oom(w, err);
done:
    free(a.v);
    free(b.v);
    return rc;
}
