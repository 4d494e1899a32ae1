/* text/jinja_format.c: Python string formatting for templates: printf-style
 * `"%s: %d" % (a, b)` (also the |format filter) and `"{} {name:>8}".format(...)` with
 * the format-spec mini-language ([[fill]align][sign][#][0][width][,|_][.precision][type]). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja-impl.h"

/* pad s[0, n) (ncp code points) to width with fill, align '<' '>' '^' or '=' (after sign) */
static int put_padded(jrt *rt, jbuf *b, const char *s, size_t n, size_t ncp, int64_t width, const char *fill,
                      char align, size_t signlen)
{
    int64_t pad = width > (int64_t)ncp ? width - (int64_t)ncp : 0;
    if ((uint64_t)pad > rt->lim.max_output) return jlimit(rt, "padding exceeds the output limit");
    int64_t left = align == '>' ? pad : align == '^' ? pad / 2 : 0, right = pad - left;
    size_t fl = strlen(fill);
    if (align == '=') {
        if (jb_put(rt, b, s, signlen)) return JE;
        for (int64_t i = 0; i < pad; i++)
            if (jb_put(rt, b, fill, fl)) return JE;
        return jb_put(rt, b, s + signlen, n - signlen);
    }
    for (int64_t i = 0; i < left; i++)
        if (jb_put(rt, b, fill, fl)) return JE;
    if (jb_put(rt, b, s, n)) return JE;
    for (int64_t i = 0; i < right; i++)
        if (jb_put(rt, b, fill, fl)) return JE;
    return 0;
}

static int num_int(jrt *rt, jv v, const char *what, int64_t *out)
{
    if (v.kind == JV_INT) *out = v.u.i;
    else if (v.kind == JV_BOOL) *out = v.u.b;
    else if (v.kind == JV_FLOAT && what[0] == 'd') {
        if (!(fabs(v.u.f) < 9.2e18)) return jfail(rt, "cannot convert float %g to integer", v.u.f);
        *out = (int64_t)v.u.f;
    } else if (what[0] == 'd') {
        return jfail(rt, "%%%s format: a real number is required, not %s", what, py_typename(v));
    } else {
        return jfail(rt, "%%%s format: an integer is required, not %s", what, py_typename(v));
    }
    return 0;
}

static int num_float(jrt *rt, jv v, double *out)
{
    if (v.kind == JV_FLOAT) *out = v.u.f;
    else if (v.kind == JV_INT) *out = (double)v.u.i;
    else if (v.kind == JV_BOOL) *out = v.u.b;
    else return jfail(rt, "must be real number, not %s", py_typename(v));
    return 0;
}

/* ------------------------------------------------------------------ str % args */

int py_percent_format(jrt *rt, jv fmtv, jv args, jv *out)
{
    const jstr *fmt = jv_s(fmtv);
    const jv *av = &args;
    size_t na = 1, ai = 0;
    /* CPython: a non-tuple with __getitem__ (dict, list, Undefined) counts as a mapping:
     * %(key)s looks into it and "not all arguments converted" is not checked */
    int mapping = 0, single_used = 0;
    if (args.kind == JV_TUPLE) {
        av = jv_l(args)->v;
        na = jv_l(args)->n;
    } else if (args.kind == JV_DICT || args.kind == JV_LIST || args.kind == JV_UNDEF) {
        mapping = 1;
    }
    jbuf b = {0};
    const char *s = fmt->s;
    size_t n = fmt->len, i = 0;
    while (i < n) {
        const char *pct = memchr(s + i, '%', n - i);
        if (!pct) {
            if (jb_put(rt, &b, s + i, n - i)) goto fail;
            break;
        }
        size_t p = (size_t)(pct - s);
        if (jb_put(rt, &b, s + i, p - i)) goto fail;
        i = p + 1;
        if (i >= n) {
            jfail(rt, "incomplete format");
            goto fail;
        }
        jv arg = jv_missing();
        int have_key = 0;
        if (s[i] == '(') {
            size_t e = i + 1;
            int depth = 1;
            while (e < n && depth) {
                if (s[e] == '(') depth++;
                else if (s[e] == ')') depth--;
                if (depth) e++;
            }
            if (e >= n) {
                jfail(rt, "incomplete format key");
                goto fail;
            }
            if (args.kind != JV_DICT) {
                jfail(rt, mapping ? "%s indices must be integers or slices, not str" : "format requires a mapping",
                      py_typename(args));
                goto fail;
            }
            jv key;
            if (jv_str_new(rt, s + i + 1, e - i - 1, &key)) goto fail;
            size_t pos;
            int f = jdict_find(rt, jv_d(args), key, &pos);
            if (f <= 0) {
                if (f == 0) {
                    jbuf kb = {0};
                    py_repr(NULL, key, &kb);
                    jfail(rt, "KeyError: %s", kb.p ? kb.p : "");
                    jb_free(&kb);
                }
                jv_decref(key);
                goto fail;
            }
            jv_decref(key);
            arg = jv_d(args)->v[pos];
            have_key = 1;
            i = e + 1;
        }
        char flags[8] = "";
        size_t nf = 0;
        while (i < n && strchr("-+ #0", s[i]) && nf < 6) flags[nf++] = s[i++];
        flags[nf] = 0;
        int64_t width = -1, prec = -1;
        if (i < n && s[i] == '*') {
            if (ai >= na || mapping) {
                jfail(rt, "* wants int");
                goto fail;
            }
            if (num_int(rt, av[ai++], "*", &width)) goto fail;
            i++;
        } else {
            while (i < n && s[i] >= '0' && s[i] <= '9' && width < 100000000) width = (width < 0 ? 0 : width) * 10 + (s[i++] - '0');
        }
        if (i < n && s[i] == '.') {
            i++;
            prec = 0;
            if (i < n && s[i] == '*') {
                if (ai >= na || mapping) {
                    jfail(rt, "* wants int");
                    goto fail;
                }
                if (num_int(rt, av[ai++], "*", &prec)) goto fail;
                i++;
            } else {
                while (i < n && s[i] >= '0' && s[i] <= '9' && prec < 100000000) prec = prec * 10 + (s[i++] - '0');
            }
        }
        while (i < n && (s[i] == 'h' || s[i] == 'l' || s[i] == 'L')) i++;
        if (i >= n) {
            jfail(rt, "incomplete format");
            goto fail;
        }
        char conv = s[i++];
        if (conv == '%') {
            if (jb_putc(rt, &b, '%')) goto fail;
            continue;
        }
        if (!have_key) {
            if (args.kind != JV_TUPLE) { /* a single argument, used once */
                if (single_used) {
                    jfail(rt, "not enough arguments for format string");
                    goto fail;
                }
                single_used = 1;
                arg = args;
                ai = 1;
            } else if (ai < na) {
                arg = av[ai++];
            } else {
                jfail(rt, "not enough arguments for format string");
                goto fail;
            }
        }
        int left = strchr(flags, '-') != NULL;
        if (width > (int64_t)rt->lim.max_output || prec > (int64_t)rt->lim.max_output) {
            jlimit(rt, "format width exceeds the output limit");
            goto fail;
        }
        char tmp[1024];
        int rc = 0;
        switch (conv) {
        case 's':
        case 'r':
        case 'a': {
            jbuf t = {0};
            rc = conv == 's' ? py_str(rt, arg, &t) : py_repr(rt, arg, &t);
            if (rc) {
                jb_free(&t);
                goto fail;
            }
            const char *ts = t.p ? t.p : "";
            size_t tn = t.n, ncp = u8_count(ts, tn);
            if (prec >= 0 && (size_t)prec < ncp) {
                size_t k = 0, cnt = 0;
                while (k < tn && cnt < (size_t)prec) {
                    u8_next(ts, tn, &k);
                    cnt++;
                }
                tn = k;
                ncp = cnt;
            }
            rc = put_padded(rt, &b, ts, tn, ncp, width, " ", left ? '<' : '>', 0);
            jb_free(&t);
            break;
        }
        case 'd':
        case 'i':
        case 'u':
        case 'o':
        case 'x':
        case 'X': {
            int64_t v;
            char what[2] = {conv == 'i' || conv == 'u' ? 'd' : conv, 0};
            if (num_int(rt, arg, what, &v)) goto fail;
            char cf[32];
            char c = conv == 'i' || conv == 'u' ? 'd' : conv;
            if (prec >= 0) snprintf(cf, sizeof cf, "%%%s*.*ll%c", flags, c);
            else snprintf(cf, sizeof cf, "%%%s*ll%c", flags, c);
            int k = prec >= 0 ? snprintf(tmp, sizeof tmp, cf, (int)(width < 0 ? 0 : width > 400 ? 400 : width), (int)(prec > 400 ? 400 : prec), (long long)v)
                              : snprintf(tmp, sizeof tmp, cf, (int)(width < 0 ? 0 : width > 400 ? 400 : width), (long long)v);
            if (c == 'o' && strchr(flags, '#')) { /* Python writes 0o17, C writes 017 */
                char *z = strchr(tmp, '0');
                if (z && v != 0) {
                    memmove(z + 1, z, strlen(z) + 1);
                    z[1] = 'o';
                    k++;
                }
            }
            rc = jb_put(rt, &b, tmp, (size_t)(k < 0 ? 0 : k > (int)sizeof tmp - 1 ? (int)sizeof tmp - 1 : k));
            if (!rc && width > 400) rc = put_padded(rt, &b, "", 0, 0, width - k, " ", '<', 0);
            break;
        }
        case 'e': case 'E': case 'f': case 'F': case 'g': case 'G': {
            double v = 0;
            if (num_float(rt, arg, &v)) goto fail;
            char cf[32];
            snprintf(cf, sizeof cf, "%%%s*.*%c", flags, conv);
            int k = snprintf(tmp, sizeof tmp, cf, (int)(width < 0 ? 0 : width > 400 ? 400 : width),
                             (int)(prec < 0 ? 6 : prec > 100 ? 100 : prec), v);
            rc = jb_put(rt, &b, tmp, (size_t)(k < 0 ? 0 : k > (int)sizeof tmp - 1 ? (int)sizeof tmp - 1 : k));
            break;
        }
        case 'c': {
            char enc[8];
            size_t k;
            if (arg.kind == JV_STR && jv_s(arg)->ncp == 1) {
                rc = put_padded(rt, &b, jv_s(arg)->s, jv_s(arg)->len, 1, width, " ", left ? '<' : '>', 0);
                break;
            }
            int64_t v;
            if (arg.kind != JV_INT || arg.u.i < 0 || arg.u.i > 0x10FFFF) {
                jfail(rt, "%%c requires an int or a unicode character");
                goto fail;
            }
            v = arg.u.i;
            k = u8_put((uint32_t)v, enc);
            rc = put_padded(rt, &b, enc, k, 1, width, " ", left ? '<' : '>', 0);
            break;
        }
        default:
            jfail(rt, "unsupported format character '%c' (0x%x) at index %zu", conv, (unsigned)(unsigned char)conv, i - 1);
            goto fail;
        }
        if (rc) goto fail;
    }
    if (!mapping && ai < na) {
        jfail(rt, "not all arguments converted during string formatting");
        goto fail;
    }
    return jv_str_buf(rt, &b, out);
fail:
    jb_free(&b);
    return JE;
}

/* ------------------------------------------------------------------ format() mini-language */

typedef struct fspec {
    char fill[8];
    char align; /* 0, '<', '>', '^', '=' */
    char sign;  /* 0, '+', '-', ' ' */
    int alt, zero;
    int64_t width, prec; /* -1 = absent */
    char group;          /* 0, ',', '_' */
    char type;           /* 0 or the type letter */
} fspec;

static int parse_spec(jrt *rt, const char *s, size_t n, fspec *f)
{
    memset(f, 0, sizeof *f);
    strcpy(f->fill, " ");
    f->width = f->prec = -1;
    size_t i = 0;
    /* [[fill]align] */
    if (n) {
        size_t k = 0;
        u8_next(s, n, &k);
        if (k < n && strchr("<>=^", s[k])) {
            memcpy(f->fill, s, k);
            f->fill[k] = 0;
            f->align = s[k];
            i = k + 1;
        } else if (strchr("<>=^", s[0])) {
            f->align = s[0];
            i = 1;
        }
    }
    if (i < n && strchr("+- ", s[i])) f->sign = s[i++];
    if (i < n && s[i] == 'z') i++;
    if (i < n && s[i] == '#') {
        f->alt = 1;
        i++;
    }
    if (i < n && s[i] == '0') {
        f->zero = 1;
        i++;
    }
    while (i < n && s[i] >= '0' && s[i] <= '9') {
        f->width = (f->width < 0 ? 0 : f->width) * 10 + (s[i++] - '0');
        if (f->width > 100000000) return jfail(rt, "Too many decimal digits in format string");
    }
    if (i < n && (s[i] == ',' || s[i] == '_')) f->group = s[i++];
    if (i < n && s[i] == '.') {
        i++;
        f->prec = 0;
        if (i >= n || s[i] < '0' || s[i] > '9') return jfail(rt, "Format specifier missing precision");
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            f->prec = f->prec * 10 + (s[i++] - '0');
            if (f->prec > 100000000) return jfail(rt, "Too many decimal digits in format string");
        }
    }
    if (i < n) f->type = s[i++];
    if (i < n) return jfail(rt, "Invalid format specifier '%.*s'", (int)n, s);
    if (f->zero && !f->align) {
        f->align = '=';
        strcpy(f->fill, "0");
    }
    return 0;
}

/* digits of an integer part with grouping */
static void group_digits(const char *digits, char sep, int every, char *out)
{
    size_t n = strlen(digits), k = 0;
    for (size_t i = 0; i < n; i++) {
        if (sep && i && (n - i) % (size_t)every == 0) out[k++] = sep;
        out[k++] = digits[i];
    }
    out[k] = 0;
}

static int fmt_int(jrt *rt, int64_t v, const fspec *f, jbuf *b)
{
    char digits[80], grouped[128], body[160];
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    char t = f->type ? f->type : 'd';
    const char *prefix = "";
    int base = 10, every = 3;
    if (t == 'b') base = 2, prefix = "0b", every = 4;
    else if (t == 'o') base = 8, prefix = "0o", every = 4;
    else if (t == 'x' || t == 'X') base = 16, prefix = t == 'x' ? "0x" : "0X", every = 4;
    else if (t == 'c') {
        char enc[8];
        if (v < 0 || v > 0x10FFFF) return jfail(rt, "%%c arg not in range(0x110000)");
        size_t k = u8_put((uint32_t)v, enc);
        return put_padded(rt, b, enc, k, 1, f->width, f->fill, f->align ? f->align : '<', 0);
    } else if (t != 'd' && t != 'n') {
        return jfail(rt, "Unknown format code '%c' for object of type 'int'", t);
    }
    size_t k = 0;
    do {
        int d = (int)(u % (uint64_t)base);
        digits[k++] = (char)(d < 10 ? '0' + d : (t == 'X' ? 'A' : 'a') + d - 10);
        u /= (uint64_t)base;
    } while (u);
    for (size_t i = 0; i < k / 2; i++) {
        char c = digits[i];
        digits[i] = digits[k - 1 - i];
        digits[k - 1 - i] = c;
    }
    digits[k] = 0;
    group_digits(digits, f->group, every, grouped);
    const char *sg = v < 0 ? "-" : f->sign == '+' ? "+" : f->sign == ' ' ? " " : "";
    snprintf(body, sizeof body, "%s%s%s", sg, f->alt ? prefix : "", grouped);
    size_t sl = strlen(sg) + (f->alt ? strlen(prefix) : 0);
    return put_padded(rt, b, body, strlen(body), strlen(body), f->width, f->fill, f->align ? f->align : '>', sl);
}

static int fmt_float(jrt *rt, double v, const fspec *f, jbuf *b)
{
    char body[3200], num[1200];
    char t = f->type;
    int64_t prec = f->prec;
    if (prec > 300) prec = 300;
    double x = fabs(v);
    int neg = signbit(v) && !(v != v);
    if (t == '%') {
        x *= 100;
        snprintf(num, sizeof num, "%.*f%%", (int)(prec < 0 ? 6 : prec), x);
    } else if (t == 'f' || t == 'F' || t == 'e' || t == 'E' || t == 'g' || t == 'G' || t == 'n') {
        char cf[16];
        snprintf(cf, sizeof cf, "%%%s.*%c", f->alt ? "#" : "", t == 'n' ? 'g' : t);
        snprintf(num, sizeof num, cf, (int)(prec < 0 ? 6 : prec), x);
    } else if (t == 0) {
        if (prec < 0) {
            py_float_repr(x, num, sizeof num);
        } else { /* like g, but keeps at least one digit after the point */
            snprintf(num, sizeof num, "%.*g", (int)(prec == 0 ? 1 : prec), x);
            if (isfinite(x) && !strchr(num, '.') && !strchr(num, 'e')) strcat(num, ".0");
        }
    } else {
        return jfail(rt, "Unknown format code '%c' for object of type 'float'", t);
    }
    const char *sg = neg ? "-" : f->sign == '+' ? "+" : f->sign == ' ' ? " " : "";
    if (f->group) { /* group the integer part */
        char ip[1200], g[1800];
        size_t k = strspn(num, "0123456789");
        memcpy(ip, num, k);
        ip[k] = 0;
        group_digits(ip, f->group, 3, g);
        snprintf(body, sizeof body, "%s%s%s", sg, g, num + k);
    } else {
        snprintf(body, sizeof body, "%s%s", sg, num);
    }
    return put_padded(rt, b, body, strlen(body), strlen(body), f->width, f->fill, f->align ? f->align : '>',
                      strlen(sg));
}

/* format(value, spec) */
static int format_value(jrt *rt, jv v, const char *spec, size_t n, jbuf *b)
{
    fspec f;
    if (n == 0) return py_str(rt, v, b);
    if (parse_spec(rt, spec, n, &f)) return JE;
    if (v.kind == JV_INT || v.kind == JV_BOOL) {
        int64_t i = v.kind == JV_INT ? v.u.i : v.u.b;
        if (f.type && strchr("eEfFgG%", f.type)) return fmt_float(rt, (double)i, &f, b);
        return fmt_int(rt, i, &f, b);
    }
    if (v.kind == JV_FLOAT) return fmt_float(rt, v.u.f, &f, b);
    if (v.kind == JV_STR) {
        if (f.type && f.type != 's') return jfail(rt, "Unknown format code '%c' for object of type 'str'", f.type);
        if (f.sign) return jfail(rt, "Sign not allowed in string format specifier");
        const jstr *s = jv_s(v);
        size_t bytes = s->len, ncp = s->ncp;
        if (f.prec >= 0 && (size_t)f.prec < ncp) {
            bytes = u8_offset(s, (size_t)f.prec);
            ncp = (size_t)f.prec;
        }
        return put_padded(rt, b, s->s, bytes, ncp, f.width, f.fill, f.align ? f.align : '<', 0);
    }
    return jfail(rt, "unsupported format string passed to %s.__format__", py_typename(v));
}

/* "...".format(*args, **kwargs) */
int py_str_format(jrt *rt, jv self, const jargs *a, jv *out)
{
    const jstr *fs = jv_s(self);
    const char *s = fs->s;
    size_t n = fs->len, i = 0;
    int auto_idx = 0, manual = 0;
    jbuf b = {0};
    while (i < n) {
        char c = s[i];
        if (c == '}') {
            if (i + 1 < n && s[i + 1] == '}') {
                if (jb_putc(rt, &b, '}')) goto fail;
                i += 2;
                continue;
            }
            jfail(rt, "Single '}' encountered in format string");
            goto fail;
        }
        if (c != '{') {
            if (jb_putc(rt, &b, c)) goto fail;
            i++;
            continue;
        }
        if (i + 1 < n && s[i + 1] == '{') {
            if (jb_putc(rt, &b, '{')) goto fail;
            i += 2;
            continue;
        }
        /* a replacement field: find its end, allowing one level of nested {} in the spec */
        size_t e = i + 1;
        int depth = 1;
        while (e < n && depth) {
            if (s[e] == '{') depth++;
            else if (s[e] == '}') depth--;
            if (depth) e++;
        }
        if (e >= n) {
            jfail(rt, "expected '}' before end of string");
            goto fail;
        }
        const char *fld = s + i + 1;
        size_t fl = e - i - 1, nameend = 0;
        while (nameend < fl && fld[nameend] != '!' && fld[nameend] != ':') nameend++;
        /* arg_name */
        size_t an = 0;
        while (an < nameend && fld[an] != '.' && fld[an] != '[') an++;
        jv cur;
        if (an == 0) {
            if (manual) {
                jfail(rt, "cannot switch from manual field specification to automatic field numbering");
                goto fail;
            }
            auto_idx++;
            if (auto_idx > a->npos) {
                jfail(rt, "Replacement index %d out of range for positional args tuple", auto_idx - 1);
                goto fail;
            }
            cur = jv_ref(a->pos[auto_idx - 1]);
        } else if (fld[0] >= '0' && fld[0] <= '9') {
            if (auto_idx) {
                jfail(rt, "cannot switch from automatic field numbering to manual field specification");
                goto fail;
            }
            manual = 1;
            long idx = strtol(fld, NULL, 10);
            if (idx >= a->npos) {
                jfail(rt, "Replacement index %ld out of range for positional args tuple", idx);
                goto fail;
            }
            cur = jv_ref(a->pos[idx]);
        } else {
            int k;
            for (k = 0; k < a->nkw; k++)
                if (strlen(a->kwn[k]) == an && memcmp(a->kwn[k], fld, an) == 0) break;
            if (k == a->nkw) {
                jfail(rt, "KeyError: '%.*s'", (int)an, fld);
                goto fail;
            }
            cur = jv_ref(a->kwv[k]);
        }
        /* .attr and [index] */
        size_t p = an;
        while (p < nameend) {
            jv next;
            int rc;
            if (fld[p] == '.') {
                size_t q = p + 1;
                while (q < nameend && fld[q] != '.' && fld[q] != '[') q++;
                char attr[128];
                snprintf(attr, sizeof attr, "%.*s", (int)(q - p - 1), fld + p + 1);
                rc = jattr_get(rt, cur, attr, &next);
                p = q;
            } else {
                size_t q = p + 1;
                while (q < nameend && fld[q] != ']') q++;
                jv key;
                const char *ks = fld + p + 1;
                size_t kl = q - p - 1;
                if (kl && strspn(ks, "0123456789") >= kl) key = jv_int(strtoll(ks, NULL, 10));
                else if (jv_str_new(rt, ks, kl, &key)) {
                    jv_decref(cur);
                    goto fail;
                }
                rc = jitem_get(rt, cur, key, &next);
                jv_decref(key);
                p = q + 1;
            }
            jv_decref(cur);
            if (rc) goto fail;
            cur = next;
        }
        if (cur.kind == JV_UNDEF) {
            jv_undef_fail(rt, cur);
            jv_decref(cur);
            goto fail;
        }
        char conv = 0;
        size_t sp = nameend;
        if (sp < fl && fld[sp] == '!') {
            conv = sp + 1 < fl ? fld[sp + 1] : 0;
            sp += 2;
        }
        const char *spec = "";
        size_t spn = 0;
        jbuf specb = {0};
        if (sp < fl && fld[sp] == ':') {
            spec = fld + sp + 1;
            spn = fl - sp - 1;
            if (memchr(spec, '{', spn)) { /* nested fields in the spec */
                jv sv, rs;
                if (jv_str_new(rt, spec, spn, &sv)) {
                    jv_decref(cur);
                    goto fail;
                }
                int rc = py_str_format(rt, sv, a, &rs);
                jv_decref(sv);
                if (rc) {
                    jv_decref(cur);
                    goto fail;
                }
                jb_put(rt, &specb, jv_s(rs)->s, jv_s(rs)->len);
                jv_decref(rs);
                spec = specb.p ? specb.p : "";
                spn = specb.n;
            }
        }
        int rc = 0;
        if (conv == 'r' || conv == 'a' || conv == 's') {
            jbuf t = {0};
            rc = conv == 's' ? py_str(rt, cur, &t) : py_repr(rt, cur, &t);
            jv tv;
            if (!rc) rc = jv_str_buf(rt, &t, &tv);
            else jb_free(&t);
            if (!rc) {
                rc = format_value(rt, tv, spec, spn, &b);
                jv_decref(tv);
            }
        } else if (conv) {
            rc = jfail(rt, "Unknown conversion specifier %c", conv);
        } else {
            rc = format_value(rt, cur, spec, spn, &b);
        }
        jb_free(&specb);
        jv_decref(cur);
        if (rc) goto fail;
        i = e + 1;
    }
    return jv_str_buf(rt, &b, out);
fail:
    jb_free(&b);
    return JE;
}
