/* text/tok_normalize.c: normalizers (HF `normalizers::*`) applied to one piece.
 *
 * Each transformation appends its output to the work buffer and re-points the
 * piece. `ins` (leading bytes the pipeline inserted, e.g. by Prepend) is carried
 * through so that Metaspace's prepend_scheme "first" can tell whether a later
 * piece still starts at original offset 0. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text/tok_impl.h"

static int oom(tok_work *w, tm_err *err)
{
    return tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->name);
}

static int is_ascii(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) return 0;
    return 1;
}

/* replace the piece's text by out[0..n) */
static int set_text(tok_work *w, tok_piece *p, const char *s, size_t n, size_t ins, tm_err *err)
{
    tok_piece q;
    int rc = tok_work_add_text(w, s, n, &q, err);
    if (rc) return rc;
    p->off = q.off;
    p->len = n;
    p->ins = ins > n ? n : ins;
    return TM_OK;
}

/* NFC/NFD/NFKC/NFKD. Only the non-ASCII islands go through utf8proc: an
 * ASCII character is a starter that never composes as a second element, so
 * the text can be cut before any ASCII character; the ASCII character just
 * before an island is included since it may compose with a following mark. */
static int unicode_form(tok_work *w, tok_piece *p, tok_norm_type type, tm_err *err)
{
    const char *s = w->text.p + p->off;
    if (is_ascii(s, p->len)) return TM_OK; /* every form is the identity on ASCII */
    int opts = UTF8PROC_STABLE;
    switch (type) {
    case TOK_NORM_NFC: opts |= UTF8PROC_COMPOSE; break;
    case TOK_NORM_NFD: opts |= UTF8PROC_DECOMPOSE; break;
    case TOK_NORM_NFKC: opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    default: opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    tok_buf out = {0};
    size_t ins = p->ins, i = 0, n = p->len;
    int rc = TM_OK;
    while (i < n && !rc) {
        size_t a = i;
        while (a < n && (unsigned char)s[a] < 0x80) a++;
        size_t island = a == n ? n : (a > i ? a - 1 : a); /* keep one ASCII char of context */
        if (island > i) rc = tok_buf_append(&out, s + i, island - i);
        if (rc || a == n) break;
        size_t b = a;
        while (b < n && (unsigned char)s[b] >= 0x80) b++;
        utf8proc_uint8_t *o = NULL;
        utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)s + island, (utf8proc_ssize_t)(b - island), &o,
                                          (utf8proc_option_t)opts);
        if (m < 0) {
            free(o);
            tok_buf_free(&out);
            return tm_errf(err, TM_E_INVALID, "%s: normalizer: unicode normalization failed: %s", w->name,
                           utf8proc_errmsg(m));
        }
        rc = tok_buf_append(&out, o, (size_t)m);
        free(o);
        i = b;
        s = w->text.p + p->off;
    }
    if (!rc) rc = set_text(w, p, out.p, out.len, ins, err);
    else rc = oom(w, err);
    tok_buf_free(&out);
    return rc;
}

static int replace(tok_work *w, tok_piece *p, const tok_normalizer *n, tm_err *err)
{
    int rc = tok_regex_find(&n->re, w, w->text.p + p->off, p->len, &w->m, err);
    if (rc) return rc;
    tok_buf out = {0};
    size_t ins = 0;
    for (size_t i = 0; i < w->m.n; i++) {
        const tok_match *m = &w->m.v[i];
        const char *src = m->is_match ? n->content : w->text.p + p->off + m->start;
        size_t l = m->is_match ? n->content_len : m->end - m->start;
        if (m->end <= p->ins) ins += l;
        else if (m->start < p->ins) ins += m->is_match ? l : p->ins - m->start;
        if (tok_buf_append(&out, src, l)) {
            tok_buf_free(&out);
            return oom(w, err);
        }
        if (out.len > w->limit) {
            tok_buf_free(&out);
            return tm_errf(err, TM_E_LIMIT, "%s: normalizer Replace grew the text beyond the limit", w->name);
        }
    }
    rc = set_text(w, p, out.p ? out.p : "", out.len, ins, err);
    tok_buf_free(&out);
    return rc;
}

/* char::to_lowercase, one code point at a time */
static int lowercase(tok_work *w, tok_piece *p, tm_err *err)
{
    tok_buf out = {0};
    const char *s = w->text.p + p->off;
    size_t ins = 0;
    if (tok_buf_reserve(&out, p->len + 8)) return oom(w, err);
    for (size_t i = 0; i < p->len;) {
        size_t adv;
        uint32_t c = tok_utf8_dec(s + i, p->len - i, &adv);
        size_t before = out.len;
        int rc;
        if (c < 0x80) {
            char ch = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
            rc = tok_buf_append(&out, &ch, 1);
        } else if (c == 0x130) { /* the one unconditional 1:2 mapping: I WITH DOT ABOVE */
            rc = tok_buf_append(&out, "i\xCC\x87", 3);
        } else {
            rc = tok_buf_put_cp(&out, (uint32_t)utf8proc_tolower((utf8proc_int32_t)c));
        }
        if (rc) {
            tok_buf_free(&out);
            return oom(w, err);
        }
        if (i < p->ins) ins += out.len - before;
        i += adv;
    }
    int rc = set_text(w, p, out.p, out.len, ins, err);
    tok_buf_free(&out);
    return rc;
}

static int strip(tok_piece *p, const char *s, int left, int right)
{
    size_t a = 0, b = p->len;
    if (left)
        while (a < b) {
            size_t adv;
            if (!tok_is_whitespace(tok_utf8_dec(s + a, b - a, &adv))) break;
            a += adv;
        }
    if (right)
        while (b > a) {
            size_t k = b - 1, adv;
            while (k > a && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
            if (!tok_is_whitespace(tok_utf8_dec(s + k, b - k, &adv))) break;
            b = k;
        }
    if (a > p->ins) p->at_start = 0;
    p->ins = a > p->ins ? 0 : p->ins - a;
    p->off += a;
    p->len = b - a;
    if (p->ins > p->len) p->ins = p->len;
    return TM_OK;
}

/* drop combining marks: Mn, Mc and Me (StripAccents: HF is_combining_mark), or Mn only
 * (BertNormalizer: char::is_mark_nonspacing) */
static int strip_marks(tok_work *w, tok_piece *p, int mn_only, tm_err *err)
{
    tok_buf out = {0};
    const char *s = w->text.p + p->off;
    size_t ins = 0;
    if (tok_buf_reserve(&out, p->len)) return oom(w, err);
    for (size_t i = 0; i < p->len;) {
        size_t adv;
        uint32_t c = tok_utf8_dec(s + i, p->len - i, &adv);
        utf8proc_propval_t cat = c < 0x80 ? UTF8PROC_CATEGORY_LL : utf8proc_category((utf8proc_int32_t)c);
        int mark = cat == UTF8PROC_CATEGORY_MN ||
                   (!mn_only && (cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ME));
        if (!mark) {
            tok_buf_append(&out, s + i, adv); /* reserved above: cannot fail */
            if (i < p->ins) ins += adv;
        }
        i += adv;
    }
    int rc = set_text(w, p, out.p ? out.p : "", out.len, ins, err);
    tok_buf_free(&out);
    return rc;
}

/* BertNormalizer's CJK ideograph blocks (HF is_chinese_char) */
static int is_chinese(uint32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* clean_text's removal: NUL, U+FFFD, and the "other" categories (Cc Cf Cs Co Cn) but tab, LF, CR */
static int bert_removes(uint32_t c)
{
    if (c == 0 || c == 0xFFFD) return 1;
    if (c == '\t' || c == '\n' || c == '\r') return 0;
    if (c >= 0x20 && c < 0x7F) return 0;
    utf8proc_propval_t cat = utf8proc_category((utf8proc_int32_t)c);
    return cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF || cat == UTF8PROC_CATEGORY_CS ||
           cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CN;
}

/* BertNormalizer (HF normalizers::bert), in its order: clean_text (the removals above,
 * every whitespace character to ' '), handle_chinese_chars (' ' around each CJK ideograph),
 * strip_accents (NFD, then Mn dropped), lowercase */
static int bert(tok_work *w, tok_piece *p, const tok_normalizer *n, tm_err *err)
{
    if (n->clean || n->chinese) {
        tok_buf out = {0};
        const char *s = w->text.p + p->off;
        size_t ins = 0;
        if (tok_buf_reserve(&out, p->len + 8)) return oom(w, err);
        for (size_t i = 0; i < p->len;) {
            size_t adv, before = out.len;
            uint32_t c = tok_utf8_dec(s + i, p->len - i, &adv);
            int rc = TM_OK;
            if (n->clean && bert_removes(c)) {
                /* dropped */
            } else if (n->clean && tok_is_whitespace(c)) {
                rc = tok_buf_append(&out, " ", 1);
            } else if (n->chinese && is_chinese(c)) {
                if (!(rc = tok_buf_append(&out, " ", 1)) && !(rc = tok_buf_append(&out, s + i, adv)))
                    rc = tok_buf_append(&out, " ", 1);
            } else {
                rc = tok_buf_append(&out, s + i, adv);
            }
            if (rc || out.len > w->limit) {
                tok_buf_free(&out);
                return rc ? oom(w, err) : tm_errf(err, TM_E_LIMIT, "%s: normalizer BertNormalizer grew the text beyond the limit", w->name);
            }
            if (i < p->ins) ins += out.len - before;
            i += adv;
        }
        int rc = set_text(w, p, out.p ? out.p : "", out.len, ins, err);
        tok_buf_free(&out);
        if (rc) return rc;
    }
    int rc = TM_OK;
    if (n->accents && !(rc = unicode_form(w, p, TOK_NORM_NFD, err))) rc = strip_marks(w, p, 1, err);
    if (!rc && n->lower) rc = lowercase(w, p, err);
    return rc;
}

/* HF Nmt: ASCII and C1 controls dropped (U+0001-0008, 000B, 000E-001F, 007F, 008F, 009F), then tab, LF,
 * FF, CR, U+1680, U+200B-200F, U+2028, U+2029, U+2581, U+FEFF and U+FFFD to ' ' */
static int nmt(tok_work *w, tok_piece *p, tm_err *err)
{
    const char *s = w->text.p + p->off;
    tok_buf out = {0};
    int rc = TM_OK;
    for (size_t i = 0; i < p->len && !rc;) {
        size_t adv;
        uint32_t c = tok_utf8_dec(s + i, p->len - i, &adv);
        int drop = (c >= 0x01 && c <= 0x08) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F || c == 0x8F || c == 0x9F;
        int space = c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D || c == 0x1680 || (c >= 0x200B && c <= 0x200F) ||
                    c == 0x2028 || c == 0x2029 || c == 0x2581 || c == 0xFEFF || c == 0xFFFD;
        if (!drop) rc = space ? tok_buf_append(&out, " ", 1) : tok_buf_append(&out, s + i, adv);
        i += adv;
    }
    if (!rc) rc = set_text(w, p, out.p ? out.p : "", out.len, p->ins, err);
    else rc = oom(w, err);
    tok_buf_free(&out);
    return rc;
}

int tok_normalize(const tm_tokenizer *t, const tok_normalizer *n, tok_work *w, tok_piece *p, tm_err *err)
{
    int rc = TM_OK;
    switch (n->type) {
    case TOK_NORM_SEQUENCE:
        for (size_t i = 0; i < n->n_items && !rc; i++) rc = tok_normalize(t, &n->items[i], w, p, err);
        return rc;
    case TOK_NORM_NFC:
    case TOK_NORM_NFD:
    case TOK_NORM_NFKC:
    case TOK_NORM_NFKD:
        return unicode_form(w, p, n->type, err);
    case TOK_NORM_REPLACE:
        return replace(w, p, n, err);
    case TOK_NORM_PREPEND: {
        if (p->len == 0) return TM_OK;
        tok_piece q;
        size_t old_off = p->off, old_len = p->len;
        if ((rc = tok_work_add_text(w, n->content, n->content_len, &q, err))) return rc;
        tok_piece r;
        if ((rc = tok_work_add_text(w, w->text.p + old_off, old_len, &r, err))) return rc;
        p->off = q.off;
        p->len = n->content_len + old_len;
        p->ins += n->content_len;
        return TM_OK;
    }
    case TOK_NORM_LOWERCASE:
        return lowercase(w, p, err);
    case TOK_NORM_STRIP:
        return strip(p, w->text.p + p->off, n->left, n->right);
    case TOK_NORM_STRIP_ACCENTS:
        return strip_marks(w, p, 0, err);
    case TOK_NORM_BERT:
        return bert(w, p, n, err);
    case TOK_NORM_PRECOMPILED:
        return tok_precompiled_apply(n, w, p, err);
    case TOK_NORM_NMT:
        return nmt(w, p, err);
    }
    return TM_OK;
}
