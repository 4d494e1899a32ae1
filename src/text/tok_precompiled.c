/* text/tok_precompiled.c: the Precompiled normalizer (HF
 * `normalizers::Precompiled`, the spm_precompiled crate): SentencePiece's
 * normalization rules (nmt_nfkc and the like) compiled into the model file.
 *
 * precompiled_charsmap is base64 of
 *   u32 LE trie_size | trie: trie_size / 4 u32 LE units (a darts-clone double
 *   array over UTF-8 bytes) | replacements: NUL-separated UTF-8 strings
 * A trie leaf's value is the byte offset of its replacement string.
 *
 * HF applies it per extended grapheme cluster, not by SentencePiece's own
 * longest match (its source: "Yes, this is weird, yes, this seems broken"):
 * a cluster under 6 bytes whose bytes start with some rule is replaced as a
 * whole by the *first* (shortest) matching rule's string; otherwise each
 * character is replaced the same way by a rule that starts it, or kept. So
 * "e" U+0301 U+0302 with a rule for "e" U+0301 becomes that rule's string,
 * the U+0302 dropped. Clusters come from utf8proc's UAX #29 rules, HF's
 * from the unicode-segmentation crate. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text/tok_impl.h"

static int b64_val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* standard base64, padding optional; *out malloc'd. -1 at a bad character or length */
static int b64_decode(const char *s, size_t n, unsigned char **out, size_t *len)
{
    while (n > 0 && s[n - 1] == '=') n--;
    if (n % 4 == 1) return -1;
    unsigned char *o = malloc(n / 4 * 3 + 3);
    if (!o) return -2;
    size_t k = 0;
    uint32_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_val((unsigned char)s[i]);
        if (v < 0) {
            free(o);
            return -1;
        }
        acc = acc << 6 | (uint32_t)v;
        if (i % 4 == 3) {
            o[k++] = (unsigned char)(acc >> 16);
            o[k++] = (unsigned char)(acc >> 8);
            o[k++] = (unsigned char)acc;
            acc = 0;
        }
    }
    if (n % 4 == 2) o[k++] = (unsigned char)(acc >> 4);
    if (n % 4 == 3) {
        o[k++] = (unsigned char)(acc >> 10);
        o[k++] = (unsigned char)(acc >> 2);
    }
    *out = o;
    *len = k;
    return 0;
}

int tok_precompiled_load(tm_tokenizer *t, tok_normalizer *x, const char *b64, const char *path, tm_err *err)
{
    unsigned char *blob = NULL;
    size_t n = 0;
    int rc = b64_decode(b64, strlen(b64), &blob, &n);
    if (rc == -2) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
    if (rc) return tm_errf(err, TM_E_FORMAT, "%s: %s.precompiled_charsmap: not valid base64", t->name, path);
    uint32_t trie_size = n >= 4 ? (uint32_t)blob[0] | (uint32_t)blob[1] << 8 | (uint32_t)blob[2] << 16 | (uint32_t)blob[3] << 24 : 0;
    size_t units = trie_size / 4;
    if (n < 4 || trie_size > n - 4) {
        free(blob);
        return tm_errf(err, TM_E_FORMAT, "%s: %s.precompiled_charsmap: %zu bytes, too short for its trie of %u", t->name,
                       path, n, trie_size);
    }
    const unsigned char *norm = blob + 4 + units * 4;
    size_t norm_len = n - 4 - units * 4;
    if (!tok_utf8_valid((const char *)norm, norm_len, NULL)) {
        free(blob);
        return tm_errf(err, TM_E_FORMAT, "%s: %s.precompiled_charsmap: the replacement strings are not valid UTF-8",
                       t->name, path);
    }
    x->pc_units = malloc(units ? units * 4 : 1);
    x->pc_norm = malloc(norm_len + 1);
    if (!x->pc_units || !x->pc_norm) {
        free(blob);
        return tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
    }
    for (size_t i = 0; i < units; i++) {
        const unsigned char *u = blob + 4 + 4 * i;
        x->pc_units[i] = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
    }
    memcpy(x->pc_norm, norm, norm_len);
    x->pc_norm[norm_len] = 0;
    x->pc_n = units;
    x->pc_norm_len = norm_len;
    free(blob);
    return TM_OK;
}

/* darts-clone's unit fields */
static inline uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
static inline uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
static inline int unit_leaf(uint32_t u) { return (u >> 8) & 1; }
static inline uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }

/* the first (shortest) rule that prefixes s[0..n): 1 and its replacement, 0 if none, -1 if the rule
   points outside the strings or into a character (a corrupt charsmap) */
static int transform(const tok_normalizer *x, const char *s, size_t n, const char **r, size_t *rl)
{
    if (!x->pc_n) return 0;
    size_t pos = unit_offset(x->pc_units[0]);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!c) return 0;
        pos ^= c;
        if (pos >= x->pc_n) return 0;
        uint32_t u = x->pc_units[pos];
        if (unit_label(u) != c) return 0;
        pos ^= unit_offset(u);
        if (pos >= x->pc_n) return 0;
        if (unit_leaf(u)) {
            size_t at = unit_value(x->pc_units[pos]);
            if (at > x->pc_norm_len) return -1;
            size_t len = strlen(x->pc_norm + at);
            if (at > 0 && ((unsigned char)x->pc_norm[at] & 0xC0) == 0x80) return -1;
            *r = x->pc_norm + at;
            *rl = len;
            return 1;
        }
    }
    return 0;
}

/* one cluster g[0..gl) onto out: 0, TM_E_NOMEM, or -1 (a corrupt rule) */
static int cluster(const tok_normalizer *x, const char *g, size_t gl, tok_buf *out)
{
    const char *r;
    size_t rl;
    int m = gl < 6 ? transform(x, g, gl, &r, &rl) : 0;
    if (m) return m < 0 ? -1 : tok_buf_append(out, r, rl);
    for (size_t k = 0; k < gl;) {
        size_t cl = tok_utf8_len((unsigned char)g[k]);
        m = transform(x, g + k, cl, &r, &rl);
        if (m < 0) return -1;
        int rc = m ? tok_buf_append(out, r, rl) : tok_buf_append(out, g + k, cl);
        if (rc) return rc;
        k += cl;
    }
    return 0;
}

int tok_precompiled_apply(const tok_normalizer *x, tok_work *w, tok_piece *p, tm_err *err)
{
    tok_buf out = {0};
    int rc = 0;
    const char *s = w->text.p + p->off;
    size_t n = p->len, g0 = 0;
    utf8proc_int32_t state = 0, prev = 0;
    for (size_t i = 0; i < n && !rc;) { /* clusters: a break before the code point at i closes [g0, i) */
        size_t adv;
        utf8proc_int32_t cp = (utf8proc_int32_t)tok_utf8_dec(s + i, n - i, &adv);
        if (i > 0 && utf8proc_grapheme_break_stateful(prev, cp, &state)) {
            rc = cluster(x, s + g0, i - g0, &out);
            g0 = i;
        }
        prev = cp;
        i += adv;
    }
    if (!rc && n > g0) rc = cluster(x, s + g0, n - g0, &out);
    if (rc) {
        tok_buf_free(&out);
        return rc < 0 ? tm_errf(err, TM_E_FORMAT, "%s: normalizer: precompiled_charsmap: a rule points outside its strings",
                                w->name)
                      : tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->name);
    }
    size_t len = out.len;
    tok_piece q;
    rc = tok_work_add_text(w, out.p ? out.p : "", len, &q, err);
    tok_buf_free(&out);
    if (rc) return rc;
    p->off = q.off;
    p->len = len;
    if (p->ins > len) p->ins = len;
    return TM_OK;
}
