/* text/jinja_str.c: UTF-8 and Python str semantics for the template interpreter.
 *
 * Python indexes strings by code point, so len(), slicing, find() and friends count
 * code points here too. A byte that is not valid UTF-8 is kept as it is and counts as
 * one code point (as 0xDC00 + byte, like Python's surrogateescape). Case mapping uses
 * utf8proc's simple (one-to-one) mappings. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text/jinja-impl.h"

uint32_t u8_next(const char *s, size_t n, size_t *i)
{
    const unsigned char *p = (const unsigned char *)s + *i;
    size_t left = n - *i;
    unsigned char c = p[0];
    if (c < 0x80) {
        (*i)++;
        return c;
    }
    int need;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
        cp = c & 0x1F;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        cp = c & 0x0F;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        cp = c & 0x07;
        min = 0x10000;
    } else {
        goto bad;
    }
    if ((size_t)need >= left) goto bad;
    for (int k = 1; k <= need; k++) {
        if ((p[k] & 0xC0) != 0x80) goto bad;
        cp = (cp << 6) | (p[k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) goto bad;
    *i += (size_t)need + 1;
    return cp;
bad:
    (*i)++;
    return 0xDC00 + c;
}

size_t u8_put(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp >= 0xDC80 && cp <= 0xDCFF) { /* an invalid byte, kept */
        o[0] = (unsigned char)(cp & 0xFF);
        return 1;
    }
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t u8_count(const char *s, size_t n)
{
    size_t i = 0, k = 0;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) i++;
        else u8_next(s, n, &i);
        k++;
    }
    return k;
}

size_t u8_offset(const jstr *s, size_t cp)
{
    if (s->ncp == s->len) return cp < s->len ? cp : s->len;
    size_t i = 0, k = 0;
    while (i < s->len && k < cp) {
        u8_next(s->s, s->len, &i);
        k++;
    }
    return i;
}

/* Python's str.isspace() set */
int py_isspace(uint32_t c)
{
    if (c <= 0x20) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static int cp_in(uint32_t c, const jstr *set)
{
    size_t i = 0;
    while (i < set->len)
        if (u8_next(set->s, set->len, &i) == c) return 1;
    return 0;
}

int py_str_strip(jrt *rt, jv s, jv chars, int left, int right, jv *out)
{
    const jstr *str = jv_s(s);
    const jstr *set = NULL;
    if (chars.kind == JV_STR) set = jv_s(chars);
    else if (chars.kind != JV_MISSING && chars.kind != JV_NONE)
        return jfail(rt, "strip arg must be None or str");
    size_t b = 0, e = str->len;
    if (left) {
        while (b < e) {
            size_t i = b;
            uint32_t c = u8_next(str->s, str->len, &i);
            if (set ? !cp_in(c, set) : !py_isspace(c)) break;
            b = i;
        }
    }
    if (right) {
        while (e > b) {
            size_t st = e - 1; /* back up to the start of the last code point */
            while (st > b && ((unsigned char)str->s[st] & 0xC0) == 0x80 && e - st < 4) st--;
            size_t i = st;
            uint32_t c = u8_next(str->s, str->len, &i);
            if (i != e) { /* not a clean sequence: treat the last byte alone */
                st = e - 1;
                i = st;
                c = u8_next(str->s, str->len, &i);
            }
            if (set ? !cp_in(c, set) : !py_isspace(c)) break;
            e = st;
        }
    }
    if (b == 0 && e == str->len && !str->markup) {
        *out = jv_ref(s);
        return 0;
    }
    return jv_str_new(rt, str->s + b, e - b, out);
}

static int push_piece(jrt *rt, jlist *l, const char *s, size_t n)
{
    jv p;
    if (jv_str_new(rt, s, n, &p)) return JE;
    return jlist_push(rt, l, p);
}

/* previous code point boundary before byte e (>= lo) */
static size_t prev_cp(const char *s, size_t lo, size_t e, uint32_t *c)
{
    size_t st = e - 1;
    while (st > lo && ((unsigned char)s[st] & 0xC0) == 0x80 && e - st < 4) st--;
    size_t i = st;
    uint32_t v = u8_next(s, e, &i);
    if (i != e) {
        st = e - 1;
        i = st;
        v = u8_next(s, e, &i);
    }
    *c = v;
    return st;
}

int py_str_split(jrt *rt, jv s, jv sep, int64_t maxsplit, int right, jv *out)
{
    const jstr *str = jv_s(s);
    jlist *l = jlist_new(rt, JV_LIST, 0);
    if (!l) return JE;
    jv lv = jv_obj(JV_LIST, l);
    const char *p = str->s;
    size_t n = str->len;
    if (sep.kind == JV_MISSING || sep.kind == JV_NONE) {
        if (!right) {
            size_t i = 0;
            int64_t splits = 0;
            for (;;) {
                while (i < n) { /* skip whitespace */
                    size_t j = i;
                    if (!py_isspace(u8_next(p, n, &j))) break;
                    i = j;
                }
                if (i >= n) break;
                if (maxsplit >= 0 && splits >= maxsplit) {
                    if (push_piece(rt, l, p + i, n - i)) goto fail;
                    break;
                }
                size_t st = i;
                while (i < n) {
                    size_t j = i;
                    if (py_isspace(u8_next(p, n, &j))) break;
                    i = j;
                }
                if (push_piece(rt, l, p + st, i - st)) goto fail;
                splits++;
            }
        } else {
            size_t e = n;
            int64_t splits = 0;
            for (;;) {
                uint32_t c;
                while (e > 0) {
                    size_t st = prev_cp(p, 0, e, &c);
                    if (!py_isspace(c)) break;
                    e = st;
                }
                if (e == 0) break;
                if (maxsplit >= 0 && splits >= maxsplit) {
                    if (push_piece(rt, l, p, e)) goto fail;
                    break;
                }
                size_t b = e;
                while (b > 0) {
                    size_t st = prev_cp(p, 0, b, &c);
                    if (py_isspace(c)) break;
                    b = st;
                }
                if (push_piece(rt, l, p + b, e - b)) goto fail;
                splits++;
                e = b;
            }
            for (size_t i = 0, j = l->n ? l->n - 1 : 0; i < j; i++, j--) {
                jv t = l->v[i];
                l->v[i] = l->v[j];
                l->v[j] = t;
            }
        }
        *out = lv;
        return 0;
    }
    if (sep.kind != JV_STR) {
        jv_decref(lv);
        return jfail(rt, "must be str or None, not %s", py_typename(sep));
    }
    const jstr *d = jv_s(sep);
    if (d->len == 0) {
        jv_decref(lv);
        return jfail(rt, "empty separator");
    }
    if (!right) {
        size_t i = 0;
        int64_t splits = 0;
        for (;;) {
            const char *f = (maxsplit >= 0 && splits >= maxsplit) ? NULL : memmem(p + i, n - i, d->s, d->len);
            if (!f) {
                if (push_piece(rt, l, p + i, n - i)) goto fail;
                break;
            }
            if (push_piece(rt, l, p + i, (size_t)(f - (p + i)))) goto fail;
            i = (size_t)(f - p) + d->len;
            splits++;
        }
    } else {
        size_t e = n;
        int64_t splits = 0;
        for (;;) {
            const char *f = NULL;
            if (!(maxsplit >= 0 && splits >= maxsplit) && e >= d->len) {
                for (size_t k = e - d->len + 1; k-- > 0;)
                    if (memcmp(p + k, d->s, d->len) == 0) {
                        f = p + k;
                        break;
                    }
            }
            if (!f) {
                if (push_piece(rt, l, p, e)) goto fail;
                break;
            }
            size_t st = (size_t)(f - p) + d->len;
            if (push_piece(rt, l, p + st, e - st)) goto fail;
            e = (size_t)(f - p);
            splits++;
        }
        for (size_t i = 0, j = l->n - 1; i < j; i++, j--) {
            jv t = l->v[i];
            l->v[i] = l->v[j];
            l->v[j] = t;
        }
    }
    *out = lv;
    return 0;
fail:
    jv_decref(lv);
    return JE;
}

static int is_cased(uint32_t c)
{
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}

static int jtitle_sep(uint32_t c)
{
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c);
}

/* Python's full case mappings that are not one-to-one (SpecialCasing.txt), the common
 * ones; how: 'U' upper, 'L' lower, 'T' title */
static const char *special_case(uint32_t c, char how)
{
    if (c == 0x00DF) return how == 'U' ? "SS" : how == 'T' ? "Ss" : NULL; /* sharp s */
    if (c == 0x0130 && how == 'L') return "i\xcc\x87";                  /* I with dot above */
    if (c >= 0xFB00 && c <= 0xFB06 && how != 'L') {                      /* ligatures */
        static const char *const U[] = {"FF", "FI", "FL", "FFI", "FFL", "ST", "ST"};
        static const char *const T[] = {"Ff", "Fi", "Fl", "Ffi", "Ffl", "St", "St"};
        return how == 'U' ? U[c - 0xFB00] : T[c - 0xFB00];
    }
    return NULL;
}

int py_str_case(jrt *rt, jv s, int mode, jv *out)
{
    const jstr *str = jv_s(s);
    jbuf b = {0};
    size_t i = 0;
    int prev_cased = 0, first = 1, at_start = 1;
    while (i < str->len) {
        size_t st = i;
        uint32_t c = u8_next(str->s, str->len, &i);
        char how = 0; /* which mapping applies to c */
        switch (mode) {
        case JCASE_UPPER: how = 'U'; break;
        case JCASE_LOWER: how = 'L'; break;
        case JCASE_TITLE:
            how = prev_cased ? 'L' : 'T';
            prev_cased = is_cased(c);
            break;
        case JCASE_CAPITALIZE: how = first ? 'T' : 'L'; break;
        case JCASE_SWAP: {
            utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
            how = k == UTF8PROC_CATEGORY_LU ? 'L' : k == UTF8PROC_CATEGORY_LL ? 'U' : 0;
            break;
        }
        case JCASE_JTITLE:
            if (jtitle_sep(c)) at_start = 1;
            else {
                how = at_start ? 'U' : 'L';
                at_start = 0;
            }
            break;
        }
        first = 0;
        int rc;
        if (c >= 0xDC80 && c <= 0xDCFF) how = 0; /* an invalid byte stays */
        const char *sp = how ? special_case(c, how) : NULL;
        if (sp) {
            rc = jb_puts(rt, &b, sp);
        } else if (!how) {
            rc = jb_put(rt, &b, str->s + st, i - st);
        } else {
            uint32_t r = (uint32_t)(how == 'U' ? utf8proc_toupper((utf8proc_int32_t)c)
                                    : how == 'L' ? utf8proc_tolower((utf8proc_int32_t)c)
                                                 : utf8proc_totitle((utf8proc_int32_t)c));
            char enc[4];
            rc = jb_put(rt, &b, enc, u8_put(r, enc));
        }
        if (rc) {
            jb_free(&b);
            return JE;
        }
    }
    return jv_str_buf(rt, &b, out);
}

int py_str_replace(jrt *rt, jv s, jv old, jv rep, int64_t count, jv *out)
{
    const jstr *str = jv_s(s), *o = jv_s(old), *r = jv_s(rep);
    jbuf b = {0};
    int64_t done = 0;
    if (o->len == 0) { /* Python inserts rep before every code point and at the end */
        size_t i = 0;
        while (i <= str->len) {
            if (count < 0 || done < count) {
                if (jb_put(rt, &b, r->s, r->len)) goto fail;
                done++;
            }
            if (i == str->len) break;
            size_t st = i;
            u8_next(str->s, str->len, &i);
            if (jb_put(rt, &b, str->s + st, i - st)) goto fail;
        }
        return jv_str_buf(rt, &b, out);
    }
    size_t i = 0;
    while (i < str->len) {
        const char *f = (count >= 0 && done >= count) ? NULL : memmem(str->s + i, str->len - i, o->s, o->len);
        if (!f) break;
        size_t at = (size_t)(f - str->s);
        if (jb_put(rt, &b, str->s + i, at - i) || jb_put(rt, &b, r->s, r->len)) goto fail;
        i = at + o->len;
        done++;
    }
    if (jb_put(rt, &b, str->s + i, str->len - i)) goto fail;
    return jv_str_buf(rt, &b, out);
fail:
    jb_free(&b);
    return JE;
}

/* clamp Python-style [start, end) code point bounds */
static void clamp_range(int64_t n, int64_t *start, int64_t *end)
{
    if (*end > n) *end = n;
    else if (*end < 0) {
        *end += n;
        if (*end < 0) *end = 0;
    }
    if (*start < 0) {
        *start += n;
        if (*start < 0) *start = 0;
    }
}

int64_t py_str_find(const jstr *h, const jstr *needle, int64_t start, int64_t end, int right)
{
    int64_t n = (int64_t)h->ncp;
    clamp_range(n, &start, &end);
    if (end - start < (int64_t)needle->ncp) return -1;
    if (start > n) return -1;
    size_t bs = u8_offset(h, (size_t)start), be = u8_offset(h, (size_t)end);
    const char *f = NULL;
    if (!right) {
        f = needle->len == 0 ? h->s + bs : memmem(h->s + bs, be - bs, needle->s, needle->len);
    } else {
        if (needle->len == 0) f = h->s + be;
        else if (be - bs >= needle->len)
            for (size_t k = be - needle->len + 1; k-- > bs;)
                if (memcmp(h->s + k, needle->s, needle->len) == 0) {
                    f = h->s + k;
                    break;
                }
    }
    if (!f) return -1;
    return (int64_t)u8_count(h->s, (size_t)(f - h->s));
}

int64_t py_str_count(const jstr *h, const jstr *needle, int64_t start, int64_t end)
{
    int64_t n = (int64_t)h->ncp;
    clamp_range(n, &start, &end);
    if (start > n || end < start) return 0;
    if (needle->len == 0) return end - start + 1;
    size_t bs = u8_offset(h, (size_t)start), be = u8_offset(h, (size_t)end);
    int64_t k = 0;
    const char *p = h->s + bs, *e = h->s + be;
    while ((size_t)(e - p) >= needle->len) {
        const char *f = memmem(p, (size_t)(e - p), needle->s, needle->len);
        if (!f) break;
        k++;
        p = f + needle->len;
    }
    return k;
}

static int is_linebreak(uint32_t c)
{
    return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e ||
           c == 0x85 || c == 0x2028 || c == 0x2029;
}

int py_str_splitlines(jrt *rt, jv s, int keepends, jv *out)
{
    const jstr *str = jv_s(s);
    jlist *l = jlist_new(rt, JV_LIST, 0);
    if (!l) return JE;
    jv lv = jv_obj(JV_LIST, l);
    size_t i = 0, st = 0;
    while (i < str->len) {
        size_t at = i;
        uint32_t c = u8_next(str->s, str->len, &i);
        if (!is_linebreak(c)) continue;
        if (c == '\r' && i < str->len && str->s[i] == '\n') i++;
        if (push_piece(rt, l, str->s + st, (keepends ? i : at) - st)) goto fail;
        st = i;
    }
    if (st < str->len && push_piece(rt, l, str->s + st, str->len - st)) goto fail;
    *out = lv;
    return 0;
fail:
    jv_decref(lv);
    return JE;
}

int py_slice_index(jrt *rt, jv v, int64_t *out, int *present)
{
    if (v.kind == JV_MISSING || v.kind == JV_NONE) {
        *present = 0;
        return 0;
    }
    *present = 1;
    if (v.kind == JV_INT) *out = v.u.i;
    else if (v.kind == JV_BOOL) *out = v.u.b;
    else return jfail(rt, "slice indices must be integers or None or have an __index__ method");
    return 0;
}

int py_slice(jrt *rt, jv seq, jv vstart, jv vstop, jv vstep, jv *out)
{
    int64_t start = 0, stop = 0, step = 1;
    int has_start, has_stop, has_step;
    if (py_slice_index(rt, vstart, &start, &has_start) || py_slice_index(rt, vstop, &stop, &has_stop) ||
        py_slice_index(rt, vstep, &step, &has_step))
        return JE;
    if (!has_step) step = 1;
    if (step == 0) return jfail(rt, "slice step cannot be zero");
    int64_t len;
    if (py_len(rt, seq, &len)) return JE;
    if (!has_start) start = step < 0 ? len - 1 : 0;
    else if (start < 0) {
        start += len;
        if (start < 0) start = step < 0 ? -1 : 0;
    } else if (start >= len) start = step < 0 ? len - 1 : len;
    if (!has_stop) stop = step < 0 ? -1 : len;
    else if (stop < 0) {
        stop += len;
        if (stop < 0) stop = step < 0 ? -1 : 0;
    } else if (stop >= len) stop = step < 0 ? len - 1 : len;
    int64_t count;
    if (step < 0) count = stop < start ? (start - stop - 1) / (-step) + 1 : 0;
    else count = start < stop ? (stop - start - 1) / step + 1 : 0;

    if (seq.kind == JV_STR) {
        const jstr *s = jv_s(seq);
        if (step == 1) {
            size_t b = u8_offset(s, (size_t)start), e = count ? u8_offset(s, (size_t)(start + count)) : b;
            return jv_str_new(rt, s->s + b, e - b, out);
        }
        /* general step: collect the code point offsets once */
        size_t *off = malloc(((size_t)len + 1) * sizeof *off);
        if (!off) return jlimit(rt, "out of memory");
        size_t i = 0, k = 0;
        while (i < s->len) {
            off[k++] = i;
            u8_next(s->s, s->len, &i);
        }
        off[k] = s->len;
        jbuf b = {0};
        int64_t idx = start;
        for (int64_t c = 0; c < count; c++, idx += step) {
            if (jb_put(rt, &b, s->s + off[idx], off[idx + 1] - off[idx])) {
                free(off);
                jb_free(&b);
                return JE;
            }
        }
        free(off);
        return jv_str_buf(rt, &b, out);
    }
    if (seq.kind == JV_LIST || seq.kind == JV_TUPLE) {
        const jlist *src = jv_l(seq);
        jlist *l = jlist_new(rt, seq.kind, (size_t)count);
        if (!l) return JE;
        int64_t idx = start;
        for (int64_t c = 0; c < count; c++, idx += step) l->v[l->n++] = jv_ref(src->v[idx]);
        l->depth = src->depth;
        *out = jv_obj(seq.kind, l);
        return 0;
    }
    return jfail(rt, "'%s' object is not subscriptable", py_typename(seq));
}

int py_html_escape(jrt *rt, jv v, jv *out)
{
    if (v.kind == JV_STR && jv_s(v)->markup) {
        *out = jv_ref(v);
        return 0;
    }
    jv s;
    if (py_tostr(rt, v, &s)) return JE;
    const jstr *str = jv_s(s);
    jbuf b = {0};
    size_t st = 0;
    int rc = 0;
    for (size_t i = 0; i < str->len && !rc; i++) {
        const char *e = NULL;
        switch (str->s[i]) {
        case '&': e = "&amp;"; break;
        case '<': e = "&lt;"; break;
        case '>': e = "&gt;"; break;
        case '"': e = "&#34;"; break;
        case '\'': e = "&#39;"; break;
        default: continue;
        }
        rc = jb_put(rt, &b, str->s + st, i - st);
        if (!rc) rc = jb_puts(rt, &b, e);
        st = i + 1;
    }
    if (!rc) rc = jb_put(rt, &b, str->s + st, str->len - st);
    jv_decref(s);
    if (rc) {
        jb_free(&b);
        return JE;
    }
    if (jv_str_buf(rt, &b, out)) return JE;
    ((jstr *)out->u.o)->markup = 1;
    return 0;
}
