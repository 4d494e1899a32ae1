/* text/json_compact.c: a JSON value's compact text as far as it is written (text/json_compact.h
 * has the design block). */
#include "text/json_compact.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/grow.h"

#define JC_MAX_DEPTH 1000 /* cJSON's CJSON_NESTING_LIMIT */

int tm_jbuf_put(tm_jbuf *b, const char *s, size_t n)
{
    if (tm_grow((void **)&b->p, &b->cap, b->n + n + 1, 1)) return TM_E_NOMEM;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return TM_OK;
}

/* one byte of a string's value as cJSON prints it */
static int put_escaped(tm_jbuf *out, unsigned char c)
{
    char e[8];
    switch (c) {
    case '"': return tm_jbuf_put(out, "\\\"", 2);
    case '\\': return tm_jbuf_put(out, "\\\\", 2);
    case '\b': return tm_jbuf_put(out, "\\b", 2);
    case '\f': return tm_jbuf_put(out, "\\f", 2);
    case '\n': return tm_jbuf_put(out, "\\n", 2);
    case '\r': return tm_jbuf_put(out, "\\r", 2);
    case '\t': return tm_jbuf_put(out, "\\t", 2);
    default:
        if (c >= 32) return tm_jbuf_put(out, (const char *)&c, 1);
        snprintf(e, sizeof e, "\\u%04x", c);
        return tm_jbuf_put(out, e, 6);
    }
}

int tm_json_escape_put(tm_jbuf *out, const char *s, size_t n)
{
    for (size_t i = 0; i < n && s[i]; i++)
        if (put_escaped(out, (unsigned char)s[i])) return TM_E_NOMEM;
    return TM_OK;
}

/* four hex digits at s [4] as cJSON reads them: any byte that is not one makes the whole 0 */
static unsigned long hex4(const char *s)
{
    unsigned long v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        v = v * 16 + (unsigned long)d;
    }
    return v;
}

/* code point cp as UTF-8 into b, its length */
static int utf8(unsigned long cp, unsigned char *b)
{
    if (cp < 0x80) return b[0] = (unsigned char)cp, 1;
    if (cp < 0x800) return b[0] = (unsigned char)(0xC0 | cp >> 6), b[1] = (unsigned char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000)
        return b[0] = (unsigned char)(0xE0 | cp >> 12), b[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F)),
               b[2] = (unsigned char)(0x80 | (cp & 0x3F)), 3;
    b[0] = (unsigned char)(0xF0 | cp >> 18), b[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    b[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F)), b[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A \u escape at s [n] (s[0] is the backslash; n the bytes to the string's end, or to the text's end
 * where the string is not yet closed): *cp and *len, as cJSON's utf16_literal_to_utf8 reads it: six
 * bytes (twelve for a surrogate pair) within the string, a lone low surrogate or a high one without its
 * low half refused, bad hex digits read as 0. TM_JC_WHOLE, MORE (closed 0 and too few bytes yet), BAD */
static int u_escape(const char *s, size_t n, int closed, unsigned long *cp, size_t *len)
{
    int short_ = closed ? TM_JC_BAD : TM_JC_MORE;
    if (n < 6) return short_;
    unsigned long hi = hex4(s + 2);
    if (hi >= 0xDC00 && hi <= 0xDFFF) return TM_JC_BAD;
    if (hi < 0xD800 || hi > 0xDBFF) return *cp = hi, *len = 6, TM_JC_WHOLE;
    if (n < 12) return n > 6 && s[6] != '\\' ? TM_JC_BAD : n > 7 && s[7] != 'u' ? TM_JC_BAD : short_;
    if (s[6] != '\\' || s[7] != 'u') return TM_JC_BAD;
    unsigned long lo = hex4(s + 8);
    if (lo < 0xDC00 || lo > 0xDFFF) return TM_JC_BAD;
    *cp = 0x10000 + ((hi & 0x3FF) << 10 | (lo & 0x3FF));
    *len = 12;
    return TM_JC_WHOLE;
}

/* The string at s[*i] ('"'): written as far as it is read; *i past its closing quote (WHOLE). Its end
 * is found first as cJSON finds it (a backslash takes the byte after it whatever it is), then its
 * escapes decoded within it, so that a \u escape of bad digits takes what cJSON's takes. */
static int string_at(const char *s, size_t n, size_t *i, tm_jbuf *out)
{
    size_t p = *i + 1, e = p;
    while (e < n && s[e] != '"') e += s[e] == '\\' ? 2 : 1;
    int closed = e < n;
    size_t end = closed ? e : n;
    int ended = 0; /* a NUL was read: cJSON's string ends there, the rest is not printed */
    if (tm_jbuf_put(out, "\"", 1)) return TM_E_NOMEM;
    while (p < end) {
        unsigned char c = (unsigned char)s[p], b[4];
        int bl = 1;
        size_t step = 1;
        b[0] = c;
        if (c == '\\') {
            if (p + 1 == end) return TM_JC_MORE; /* (closed: the pair rule leaves no backslash last) */
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *f = s[p + 1] ? strchr(from, s[p + 1]) : NULL;
            if (f) {
                b[0] = (unsigned char)to[f - from];
                step = 2;
            } else if (s[p + 1] == 'u') {
                unsigned long cp = 0;
                int rc = u_escape(s + p, end - p, closed, &cp, &step);
                if (rc != TM_JC_WHOLE) return rc;
                bl = utf8(cp, b);
            } else {
                return TM_JC_BAD;
            }
        }
        if (b[0] == 0) ended = 1;
        for (int k = 0; k < bl && !ended; k++)
            if (put_escaped(out, b[k])) return TM_E_NOMEM;
        p += step;
    }
    if (!closed) return TM_JC_MORE;
    *i = end + 1;
    return tm_jbuf_put(out, "\"", 1) ? TM_E_NOMEM : TM_JC_WHOLE;
}

/* The number at s[*i]: printed by cJSON once the byte after it is read */
static int number_at(const char *s, size_t n, size_t *i, tm_jbuf *out)
{
    size_t p = *i;
    while (p < n && strchr("0123456789+-eE.", s[p]) && s[p]) p++;
    if (p == n) return TM_JC_MORE;
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(s + *i, p - *i, &end, 0);
    int rc = v && cJSON_IsNumber(v) && end == s + p ? TM_JC_WHOLE : TM_JC_BAD;
    char *t = rc == TM_JC_WHOLE ? cJSON_PrintUnformatted(v) : NULL;
    cJSON_Delete(v);
    if (rc == TM_JC_WHOLE && (!t || tm_jbuf_put(out, t, strlen(t)))) rc = TM_E_NOMEM;
    free(t);
    *i = p;
    return rc;
}

int tm_json_compact(const char *s, size_t n, tm_jbuf *out, size_t *used)
{
    enum { VALUE, VALUE_OR_CLOSE, KEY, KEY_OR_CLOSE, COLON, NEXT } want = VALUE;
    static const char *const lit[] = {"null", "true", "false"};
    unsigned char obj[JC_MAX_DEPTH]; /* obj[d]: container d is an object */
    int depth = 0;
    size_t i = 0;
    for (;;) {
        while (i < n && (unsigned char)s[i] <= 32) i++;
        if (i == n) return TM_JC_MORE;
        char c = s[i];
        int rc = TM_JC_WHOLE;
        switch (want) {
        case KEY_OR_CLOSE:
        case VALUE_OR_CLOSE:
            if (c == (want == KEY_OR_CLOSE ? '}' : ']')) goto close;
            if (want == VALUE_OR_CLOSE) goto value;
            /* fall through */
        case KEY:
            if (c != '"') return TM_JC_BAD;
            if ((rc = string_at(s, n, &i, out)) != TM_JC_WHOLE) return rc;
            want = COLON;
            continue;
        case COLON:
            if (c != ':') return TM_JC_BAD;
            if (tm_jbuf_put(out, ":", 1)) return TM_E_NOMEM;
            i++;
            want = VALUE;
            continue;
        case NEXT:
            if (c == ',') {
                if (tm_jbuf_put(out, ",", 1)) return TM_E_NOMEM;
                i++;
                want = obj[depth - 1] ? KEY : VALUE;
                continue;
            }
            if (c != (obj[depth - 1] ? '}' : ']')) return TM_JC_BAD;
            goto close;
        case VALUE:
            goto value;
        }
    value:
        if (c == '{' || c == '[') {
            if (depth == JC_MAX_DEPTH) return TM_JC_BAD;
            obj[depth++] = c == '{';
            if (tm_jbuf_put(out, &c, 1)) return TM_E_NOMEM;
            i++;
            want = c == '{' ? KEY_OR_CLOSE : VALUE_OR_CLOSE;
            continue;
        }
        if (c == '"') {
            rc = string_at(s, n, &i, out);
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            rc = number_at(s, n, &i, out);
        } else {
            rc = TM_JC_BAD;
            for (int k = 0; k < 3; k++) {
                size_t l = strlen(lit[k]), m = n - i < l ? n - i : l;
                if (lit[k][0] != c || memcmp(s + i, lit[k], m)) continue;
                if (m < l) return TM_JC_MORE;
                if (tm_jbuf_put(out, lit[k], l)) return TM_E_NOMEM;
                i += l;
                rc = TM_JC_WHOLE;
            }
        }
        if (rc != TM_JC_WHOLE) return rc;
        goto after;
    close:
        if (tm_jbuf_put(out, &c, 1)) return TM_E_NOMEM;
        i++;
        depth--;
    after:
        if (depth == 0) {
            *used = i;
            return TM_JC_WHOLE;
        }
        want = NEXT;
    }
}
