/* text/jinja_filters.c: jinja2's builtin filters and tests, as transformers' environment
 * has them (tojson replaced by json.dumps(ensure_ascii=False, indent=None, separators=None,
 * sort_keys=False)). Lazy results of jinja2 (map, select, reverse, ...) become lists:
 * iterating, joining, |list and |length give the same results. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text/jinja-impl.h"

enum {
    F_ABS, F_ATTR, F_BATCH, F_CAPITALIZE, F_CENTER, F_DEFAULT, F_DICTSORT, F_ESCAPE, F_FIRST, F_FLOAT,
    F_FORCEESCAPE, F_FORMAT, F_INDENT, F_INT, F_ITEMS, F_JOIN, F_LAST, F_LENGTH, F_LIST, F_LOWER, F_MAP,
    F_MAX, F_MIN, F_REJECT, F_REJECTATTR, F_REPLACE, F_REVERSE, F_ROUND, F_SAFE, F_SELECT, F_SELECTATTR,
    F_SORT, F_STRING, F_SUM, F_TITLE, F_TOJSON, F_TRIM, F_TRUNCATE, F_UNIQUE, F_UPPER, F_WORDCOUNT,
};

typedef struct fdef {
    const char *name;
    int id; /* -2: a jinja2 filter this interpreter does not implement */
} fdef;

static const fdef FILTERS[] = {
    {"abs", F_ABS}, {"attr", F_ATTR}, {"batch", F_BATCH}, {"capitalize", F_CAPITALIZE}, {"center", F_CENTER},
    {"count", F_LENGTH}, {"d", F_DEFAULT}, {"default", F_DEFAULT}, {"dictsort", F_DICTSORT}, {"e", F_ESCAPE},
    {"escape", F_ESCAPE}, {"first", F_FIRST}, {"float", F_FLOAT}, {"forceescape", F_FORCEESCAPE},
    {"format", F_FORMAT}, {"indent", F_INDENT}, {"int", F_INT}, {"items", F_ITEMS}, {"join", F_JOIN},
    {"last", F_LAST}, {"length", F_LENGTH}, {"list", F_LIST}, {"lower", F_LOWER}, {"map", F_MAP},
    {"max", F_MAX}, {"min", F_MIN}, {"reject", F_REJECT}, {"rejectattr", F_REJECTATTR}, {"replace", F_REPLACE},
    {"reverse", F_REVERSE}, {"round", F_ROUND}, {"safe", F_SAFE}, {"select", F_SELECT},
    {"selectattr", F_SELECTATTR}, {"sort", F_SORT}, {"string", F_STRING}, {"sum", F_SUM}, {"title", F_TITLE},
    {"tojson", F_TOJSON}, {"trim", F_TRIM}, {"truncate", F_TRUNCATE}, {"unique", F_UNIQUE}, {"upper", F_UPPER},
    {"wordcount", F_WORDCOUNT},
    /* jinja2 has these; templates that use them fail to compile with a clear message */
    {"filesizeformat", -2}, {"groupby", -2}, {"pprint", -2}, {"random", -2}, {"slice", -2}, {"striptags", -2},
    {"urlencode", -2}, {"urlize", -2}, {"wordwrap", -2}, {"xmlattr", -2},
    {NULL, 0},
};

enum {
    T_BOOLEAN, T_CALLABLE, T_DEFINED, T_DIVISIBLEBY, T_EQ, T_ESCAPED, T_EVEN, T_FALSE, T_FILTER, T_FLOAT,
    T_GE, T_GT, T_IN, T_INTEGER, T_ITERABLE, T_LE, T_LOWER, T_LT, T_MAPPING, T_NE, T_NONE, T_NUMBER, T_ODD,
    T_SAMEAS, T_SEQUENCE, T_STRING, T_TEST, T_TRUE, T_UNDEFINED, T_UPPER,
};

static const fdef TESTS[] = {
    {"boolean", T_BOOLEAN}, {"callable", T_CALLABLE}, {"defined", T_DEFINED}, {"divisibleby", T_DIVISIBLEBY},
    {"==", T_EQ}, {"eq", T_EQ}, {"equalto", T_EQ}, {"escaped", T_ESCAPED}, {"even", T_EVEN}, {"false", T_FALSE},
    {"filter", T_FILTER}, {"float", T_FLOAT}, {">=", T_GE}, {"ge", T_GE}, {">", T_GT}, {"gt", T_GT},
    {"greaterthan", T_GT}, {"in", T_IN}, {"integer", T_INTEGER}, {"iterable", T_ITERABLE}, {"<=", T_LE},
    {"le", T_LE}, {"lower", T_LOWER}, {"<", T_LT}, {"lt", T_LT}, {"lessthan", T_LT}, {"mapping", T_MAPPING},
    {"!=", T_NE}, {"ne", T_NE}, {"none", T_NONE}, {"number", T_NUMBER}, {"odd", T_ODD}, {"sameas", T_SAMEAS},
    {"sequence", T_SEQUENCE}, {"string", T_STRING}, {"test", T_TEST}, {"true", T_TRUE},
    {"undefined", T_UNDEFINED}, {"upper", T_UPPER},
    {NULL, 0},
};

static int lookup(const fdef *t, const char *name)
{
    for (; t->name; t++)
        if (strcmp(t->name, name) == 0) return t->id;
    return -1;
}

int jfilter_id(const char *name) { return lookup(FILTERS, name); }
int jtest_id(const char *name) { return lookup(TESTS, name); }

const char *jfilter_name(int id)
{
    for (const fdef *t = FILTERS; t->name; t++)
        if (t->id == id) return t->name;
    return "?";
}

/* ------------------------------------------------------------------ helpers */

static jv new_list(jrt *rt, size_t cap, jlist **l)
{
    *l = jlist_new(rt, JV_LIST, cap);
    return *l ? jv_obj(JV_LIST, *l) : jv_missing();
}

/* a result list lv as what jinja2's filter returns: a generator (map, select, ..., unique, batch) or, iter 1,
 * reversed()'s iterator: the same items, iterated once, true however many (JV_GEN) */
static jv as_gen(jv lv, int iter)
{
    jlist *l = (jlist *)lv.u.o;
    l->h.kind = JV_GEN;
    l->gen_iter = (uint8_t)iter;
    lv.kind = JV_GEN;
    return lv;
}

/* jinja2's make_attrgetter: "a.b.0" looked up item by item (getitem semantics) */
static int attr_path(jrt *rt, jv item, jv attribute, jv dflt, jv *out)
{
    jv cur = jv_ref(item);
    if (attribute.kind == JV_STR) {
        const jstr *a = jv_s(attribute);
        size_t i = 0;
        while (i <= a->len) {
            const char *dot = memchr(a->s + i, '.', a->len - i);
            size_t e = dot ? (size_t)(dot - a->s) : a->len;
            jv key;
            size_t k = e - i;
            if (k && strspn(a->s + i, "0123456789") >= k && k < 19) {
                key = jv_int(strtoll(a->s + i, NULL, 10));
            } else if (jv_str_new(rt, a->s + i, k, &key)) {
                jv_decref(cur);
                return JE;
            }
            jv next;
            int rc = jitem_get(rt, cur, key, &next);
            jv_decref(key);
            jv_decref(cur);
            if (rc) return JE;
            cur = next;
            if (!dot) break;
            i = e + 1;
        }
    } else if (attribute.kind != JV_MISSING && attribute.kind != JV_NONE) {
        jv next;
        int rc = jitem_get(rt, cur, attribute, &next);
        jv_decref(cur);
        if (rc) return JE;
        cur = next;
    }
    if (dflt.kind != JV_MISSING && dflt.kind != JV_NONE && cur.kind == JV_UNDEF) {
        jv_decref(cur);
        cur = jv_ref(dflt);
    }
    *out = cur;
    return 0;
}

static jv lower_if_str(jrt *rt, jv v, int case_sensitive, int *err)
{
    *err = 0;
    if (case_sensitive || v.kind != JV_STR) return jv_ref(v);
    jv r;
    if (py_str_case(rt, v, JCASE_LOWER, &r)) {
        *err = 1;
        return jv_missing();
    }
    return r;
}

/* stable merge sort of items by keys (parallel arrays); reverse keeps equal items in order */
static int msort(jrt *rt, jv *items, jv *keys, jv *ti, jv *tk, size_t n, int reverse)
{
    if (n < 2) return 0;
    size_t h = n / 2;
    if (msort(rt, items, keys, ti, tk, h, reverse) || msort(rt, items + h, keys + h, ti, tk, n - h, reverse))
        return JE;
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        int c;
        if (py_cmp(rt, keys[j], keys[i], "<", &c)) return JE;
        int take_right = reverse ? 0 : c < 0;
        if (reverse) {
            int c2;
            if (py_cmp(rt, keys[i], keys[j], "<", &c2)) return JE;
            take_right = c2 < 0;
        }
        if (take_right) {
            ti[k] = items[j];
            tk[k++] = keys[j++];
        } else {
            ti[k] = items[i];
            tk[k++] = keys[i++];
        }
    }
    while (i < h) {
        ti[k] = items[i];
        tk[k++] = keys[i++];
    }
    while (j < n) {
        ti[k] = items[j];
        tk[k++] = keys[j++];
    }
    memcpy(items, ti, n * sizeof *items);
    memcpy(keys, tk, n * sizeof *keys);
    return 0;
}

/* sorted(items, key=keys) into a new list; keys are consumed */
static int sort_by_keys(jrt *rt, const jlist *src, jv *keys, int reverse, jv *out)
{
    size_t n = src->n;
    jv *items = malloc((n ? n : 1) * 3 * sizeof(jv));
    if (!items) {
        for (size_t i = 0; i < n; i++) jv_decref(keys[i]);
        return jlimit(rt, "out of memory (sort)");
    }
    if (n) memcpy(items, src->v, n * sizeof(jv));
    int rc = msort(rt, items, keys, items + n, items + 2 * n, n, reverse);
    jlist *l = NULL;
    if (!rc) {
        jv lv = new_list(rt, n, &l);
        if (!l) rc = JE;
        else {
            for (size_t i = 0; i < n; i++) l->v[l->n++] = jv_ref(items[i]);
            l->depth = src->depth;
            *out = lv;
        }
    }
    for (size_t i = 0; i < n; i++) jv_decref(keys[i]);
    free(items);
    return rc;
}

static int run_test(jrt *rt, jv name, jv item, const jv *args, int nargs, int *out)
{
    if (name.kind != JV_STR) return jfail(rt, "test name must be a string");
    int id = jtest_id(jv_s(name)->s);
    if (id < 0) return jfail(rt, "No test named '%s'.", jv_s(name)->s);
    jargs a = {(jv *)args, nargs, NULL, NULL, 0, jv_missing()};
    return jtest_apply(rt, id, item, &a, out);
}

/* select / reject / selectattr / rejectattr */
static int select_reject(jrt *rt, jv seq, const jargs *a, int attr, int keep, jv *out)
{
    jv items;
    if (!py_truthy(seq)) seq = jv_missing(); /* jinja2: `if value:` before iterating */
    if (py_iter_list(rt, seq, &items)) return JE;
    int off = 0;
    jv attribute = jv_missing();
    if (attr) {
        if (a->npos < 1) {
            jv_decref(items);
            return jfail(rt, "Missing parameter for attribute name");
        }
        attribute = a->pos[0];
        off = 1;
    }
    jv tname = a->npos > off ? a->pos[off] : jv_missing();
    jlist *l;
    jv lv = new_list(rt, 0, &l);
    if (!l) {
        jv_decref(items);
        return JE;
    }
    const jlist *src = jv_l(items);
    int rc = 0;
    for (size_t i = 0; i < src->n && !rc; i++) {
        jv v;
        if (attr) rc = attr_path(rt, src->v[i], attribute, jv_missing(), &v);
        else v = jv_ref(src->v[i]);
        if (rc) break;
        int r;
        if (tname.kind == JV_MISSING) r = py_truthy(v);
        else rc = run_test(rt, tname, v, a->pos + off + 1, a->npos - off - 1, &r);
        jv_decref(v);
        if (!rc && (r != 0) == keep) rc = jlist_push(rt, l, jv_ref(src->v[i]));
    }
    jv_decref(items);
    if (rc) {
        jv_decref(lv);
        return JE;
    }
    *out = as_gen(lv, 0);
    return 0;
}

static int f_map(jrt *rt, jv seq, const jargs *a, jv *out)
{
    jv items;
    if (!py_truthy(seq)) seq = jv_missing(); /* jinja2: `if value:` before iterating */
    if (py_iter_list(rt, seq, &items)) return JE;
    jv attribute = jv_missing(), dflt = jv_missing();
    int fid = -1;
    if (a->npos == 0) {
        for (int k = 0; k < a->nkw; k++) {
            if (!strcmp(a->kwn[k], "attribute")) attribute = a->kwv[k];
            else if (!strcmp(a->kwn[k], "default")) dflt = a->kwv[k];
            else {
                jv_decref(items);
                return jfail(rt, "Unexpected keyword argument '%s'", a->kwn[k]);
            }
        }
        if (attribute.kind == JV_MISSING) {
            jv_decref(items);
            return jfail(rt, "map requires a filter argument");
        }
    } else {
        if (a->pos[0].kind != JV_STR) {
            jv_decref(items);
            return jfail(rt, "map: the filter name must be a string");
        }
        fid = jfilter_id(jv_s(a->pos[0])->s);
        if (fid < 0) {
            jv_decref(items);
            return jfail(rt, "No filter named '%s'.", jv_s(a->pos[0])->s);
        }
    }
    const jlist *src = jv_l(items);
    jlist *l;
    jv lv = new_list(rt, src->n, &l);
    if (!l) {
        jv_decref(items);
        return JE;
    }
    int rc = 0;
    /* the named filter's own arguments: those after its name (map(attribute=...) has none) */
    jargs fa = {a->npos > 0 ? a->pos + 1 : NULL, a->npos > 0 ? a->npos - 1 : 0, a->kwn, a->kwv, a->nkw, jv_missing()};
    for (size_t i = 0; i < src->n && !rc; i++) {
        jv v;
        if (fid < 0) rc = attr_path(rt, src->v[i], attribute, dflt, &v);
        else rc = jfilter_apply(rt, fid, src->v[i], &fa, &v);
        if (!rc) rc = jlist_push(rt, l, v);
    }
    jv_decref(items);
    if (rc) {
        jv_decref(lv);
        return JE;
    }
    *out = as_gen(lv, 0);
    return 0;
}

static int f_join(jrt *rt, jv seq, jv d, jv attribute, jv *out)
{
    jv items;
    if (py_iter_list(rt, seq, &items)) return JE;
    const jlist *l = jv_l(items);
    jbuf b = {0};
    int rc = 0;
    for (size_t i = 0; i < l->n && !rc; i++) {
        if (i && d.kind != JV_MISSING) rc = py_str(rt, d, &b);
        if (rc) break;
        if (attribute.kind != JV_MISSING && attribute.kind != JV_NONE) {
            jv v;
            rc = attr_path(rt, l->v[i], attribute, jv_missing(), &v);
            if (!rc) {
                rc = py_str(rt, v, &b);
                jv_decref(v);
            }
        } else {
            rc = py_str(rt, l->v[i], &b);
        }
    }
    jv_decref(items);
    if (rc) {
        jb_free(&b);
        return JE;
    }
    return jv_str_buf(rt, &b, out);
}

static int f_indent(jrt *rt, jv s, jv width, jv first, jv blank, jv *out)
{
    /* jinja2's do_indent does `s += "\n"` on the value as it is: only strings work */
    if (s.kind == JV_UNDEF || s.kind == JV_MISSING) return jv_undef_fail(rt, s);
    if (s.kind != JV_STR) return jfail(rt, "unsupported operand type(s) for +=: '%s' and 'str'", py_typename(s));
    jv str = jv_ref(s);
    jbuf ind = {0};
    int rc = 0;
    if (width.kind == JV_STR) rc = jb_put(rt, &ind, jv_s(width)->s, jv_s(width)->len);
    else {
        int64_t w = 4;
        if (width.kind == JV_INT) w = width.u.i;
        else if (width.kind == JV_BOOL) w = width.u.b;
        else if (width.kind != JV_MISSING) rc = jfail(rt, "can't multiply sequence by non-int of type '%s'", py_typename(width));
        if ((uint64_t)(w < 0 ? 0 : w) > rt->lim.max_output) rc = jlimit(rt, "indent width exceeds the output limit");
        for (int64_t i = 0; i < w && !rc; i++) rc = jb_putc(rt, &ind, ' ');
    }
    /* s += "\n"; lines = s.splitlines() */
    jv withnl = jv_missing(), lines = jv_missing();
    if (!rc) rc = jv_str_cat(rt, jv_s(str)->s, jv_s(str)->len, "\n", 1, &withnl);
    if (!rc) rc = py_str_splitlines(rt, withnl, 0, &lines);
    jbuf b = {0};
    const char *is = ind.p ? ind.p : "";
    size_t in = ind.n;
    if (!rc) {
        const jlist *l = jv_l(lines);
        int bl = py_truthy(blank);
        for (size_t i = 0; i < l->n && !rc; i++) {
            const jstr *ln = jv_s(l->v[i]);
            if (i) {
                rc = jb_putc(rt, &b, '\n');
                if (!rc && (bl || ln->len)) rc = jb_put(rt, &b, is, in);
            }
            if (!rc) rc = jb_put(rt, &b, ln->s, ln->len);
        }
    }
    jv res = jv_missing();
    if (!rc) rc = jv_str_buf(rt, &b, &res);
    else jb_free(&b);
    if (!rc && py_truthy(first)) {
        jv r2;
        rc = jv_str_cat(rt, is, in, jv_s(res)->s, jv_s(res)->len, &r2);
        jv_decref(res);
        res = r2;
    }
    jb_free(&ind);
    jv_decref(withnl);
    jv_decref(lines);
    jv_decref(str);
    if (rc) {
        jv_decref(res);
        return JE;
    }
    *out = res;
    return 0;
}

/* Python float(str) / int(str, base): 1 parsed, 0 not a number */
static int parse_float_str(const jstr *s, double *out)
{
    char buf[128];
    size_t k = 0, i = 0;
    while (i < s->len && py_isspace((unsigned char)s->s[i])) i++;
    size_t e = s->len;
    while (e > i && py_isspace((unsigned char)s->s[e - 1])) e--;
    if (e == i || e - i >= sizeof buf) return 0;
    for (size_t j = i; j < e; j++) {
        char c = s->s[j];
        if (c == '_') {
            if (j == i || j + 1 >= e || !(s->s[j - 1] >= '0' && s->s[j - 1] <= '9') ||
                !(s->s[j + 1] >= '0' && s->s[j + 1] <= '9'))
                return 0;
            continue;
        }
        if (!strchr("0123456789+-.eEinfatyINFATY", c)) return 0;
        buf[k++] = c;
    }
    buf[k] = 0;
    if (!strcasecmp(buf, "inf") || !strcasecmp(buf, "+inf") || !strcasecmp(buf, "infinity") ||
        !strcasecmp(buf, "+infinity")) {
        *out = INFINITY;
        return 1;
    }
    if (!strcasecmp(buf, "-inf") || !strcasecmp(buf, "-infinity")) {
        *out = -INFINITY;
        return 1;
    }
    if (!strcasecmp(buf, "nan") || !strcasecmp(buf, "+nan") || !strcasecmp(buf, "-nan")) {
        *out = NAN;
        return 1;
    }
    for (size_t j = 0; j < k; j++)
        if ((buf[j] | 0x20) == 'x' || (buf[j] | 0x20) == 'n' || (buf[j] | 0x20) == 'i') return 0;
    char *end;
    *out = strtod(buf, &end);
    return *end == 0;
}

static int parse_int_str(const jstr *s, int base, int64_t *out, int *overflow)
{
    size_t i = 0, e = s->len;
    *overflow = 0;
    while (i < e && py_isspace((unsigned char)s->s[i])) i++;
    while (e > i && py_isspace((unsigned char)s->s[e - 1])) e--;
    int neg = 0;
    if (i < e && (s->s[i] == '+' || s->s[i] == '-')) neg = s->s[i++] == '-';
    if (i + 1 < e && s->s[i] == '0') {
        char p = (char)(s->s[i + 1] | 0x20);
        if ((p == 'x' && (base == 16 || base == 0)) || (p == 'o' && (base == 8 || base == 0)) ||
            (p == 'b' && (base == 2 || base == 0))) {
            if (base == 0) base = p == 'x' ? 16 : p == 'o' ? 8 : 2;
            i += 2;
            if (i < e && s->s[i] == '_') i++;
        }
    }
    if (base == 0) base = 10;
    if (i >= e) return 0;
    uint64_t acc = 0;
    int last_us = 1;
    for (size_t j = i; j < e; j++) {
        char c = s->s[j];
        if (c == '_') {
            if (last_us) return 0;
            last_us = 1;
            continue;
        }
        int d = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'z' ? (c | 0x20) - 'a' + 10 : 99;
        if (d >= base) return 0;
        last_us = 0;
        uint64_t nv = acc * (uint64_t)base + (uint64_t)d;
        if (nv / (uint64_t)base != acc || nv > (uint64_t)INT64_MAX + (uint64_t)neg) *overflow = 1;
        acc = nv;
    }
    if (last_us) return 0;
    *out = neg ? (int64_t)(0 - acc) : (int64_t)acc;
    return 1;
}

static int f_int(jrt *rt, jv v, jv dflt, jv vbase, jv *out)
{
    int64_t base = 10;
    if (vbase.kind == JV_INT) base = vbase.u.i;
    jv d = dflt.kind == JV_MISSING ? jv_int(0) : dflt;
    switch (v.kind) {
    case JV_INT: *out = v; return 0;
    case JV_BOOL: *out = jv_int(v.u.b); return 0;
    case JV_FLOAT:
        if (v.u.f != v.u.f) break;
        if (!(fabs(v.u.f) < 9.2e18)) return jfail(rt, "cannot convert float infinity to integer");
        *out = jv_int((int64_t)v.u.f);
        return 0;
    case JV_STR: {
        int64_t i;
        int ovf;
        if ((base == 0 || (base >= 2 && base <= 36)) && parse_int_str(jv_s(v), (int)base, &i, &ovf)) {
            if (ovf) return jfail(rt, "integer overflow (Python ints are unbounded; these are 64-bit)");
            *out = jv_int(i);
            return 0;
        }
        double f;
        if (parse_float_str(jv_s(v), &f)) {
            if (f != f) break;
            if (!(fabs(f) < 9.2e18)) return jfail(rt, "cannot convert float infinity to integer");
            *out = jv_int((int64_t)f);
            return 0;
        }
        break;
    }
    case JV_MISSING:
    case JV_UNDEF: return jv_undef_fail(rt, v);
    default: break;
    }
    *out = jv_ref(d);
    return 0;
}

static int f_float(jrt *rt, jv v, jv dflt, jv *out)
{
    switch (v.kind) {
    case JV_FLOAT: *out = v; return 0;
    case JV_INT: *out = jv_float((double)v.u.i); return 0;
    case JV_BOOL: *out = jv_float(v.u.b); return 0;
    case JV_STR: {
        double f;
        if (parse_float_str(jv_s(v), &f)) {
            *out = jv_float(f);
            return 0;
        }
        break;
    }
    case JV_MISSING:
    case JV_UNDEF: return jv_undef_fail(rt, v);
    default: break;
    }
    *out = dflt.kind == JV_MISSING ? jv_float(0.0) : jv_ref(dflt);
    return 0;
}

static int f_round(jrt *rt, jv v, jv vprec, jv method, jv *out)
{
    int64_t prec = 0;
    if (vprec.kind == JV_INT) prec = vprec.u.i;
    else if (vprec.kind == JV_BOOL) prec = vprec.u.b;
    else if (vprec.kind != JV_MISSING)
        return jfail(rt, "'%s' object cannot be interpreted as an integer", py_typename(vprec));
    const char *m = method.kind == JV_STR ? jv_s(method)->s : "common";
    if (method.kind != JV_MISSING && method.kind != JV_STR) m = "?";
    if (strcmp(m, "common") && strcmp(m, "ceil") && strcmp(m, "floor"))
        return jfail(rt, "method must be common, ceil or floor");
    if (!jv_isnum(v)) {
        if (v.kind == JV_UNDEF || v.kind == JV_MISSING) return jv_undef_fail(rt, v);
        return jfail(rt, "type %s doesn't define __round__ method", py_typename(v));
    }
    if (prec > 400) prec = 400;
    if (prec < -400) prec = -400;
    if (!strcmp(m, "common")) {
        if (v.kind != JV_FLOAT) { /* round(int, n) stays an int */
            int64_t i = v.kind == JV_INT ? v.u.i : v.u.b;
            if (prec >= 0 || prec < -18) {
                *out = jv_int(prec < -18 ? 0 : i);
                return 0;
            }
            int64_t p = 1;
            for (int64_t k = 0; k < -prec; k++) p *= 10;
            int64_t q = i / p, r = i % p;
            if (r < 0) {
                r += p;
                q--;
            }
            if (2 * r > p || (2 * r == p && (q & 1))) q++;
            *out = jv_int(q * p);
            return 0;
        }
        double x = v.u.f;
        if (!isfinite(x)) {
            *out = v;
            return 0;
        }
        if (prec >= 0) {
            char buf[512];
            snprintf(buf, sizeof buf, "%.*f", (int)prec, x); /* correctly rounded, half to even */
            *out = jv_float(strtod(buf, NULL));
        } else {
            double p = pow(10.0, (double)-prec), y = x / p, r = nearbyint(y);
            *out = jv_float(r * p);
        }
        return 0;
    }
    double x = v.kind == JV_FLOAT ? v.u.f : (double)(v.kind == JV_INT ? v.u.i : v.u.b);
    double p = pow(10.0, (double)prec);
    *out = jv_float((!strcmp(m, "ceil") ? ceil(x * p) : floor(x * p)) / p);
    return 0;
}

static int f_tojson(jrt *rt, jv v, const jargs *a, jv *out)
{
    static const char *const N[] = {"ensure_ascii", "indent", "separators", "sort_keys"};
    jv p[4];
    if (jargs_bind(rt, "tojson", a, N, 4, 0, p)) return JE;
    jjson_opts o = {NULL, ", ", ": ", py_truthy(p[3]), py_truthy(p[0])};
    char ind[64];
    jbuf indb = {0};
    if (p[1].kind == JV_INT || p[1].kind == JV_BOOL) {
        int64_t n = p[1].kind == JV_INT ? p[1].u.i : p[1].u.b;
        if (n > (int64_t)sizeof ind - 1) {
            for (int64_t i = 0; i < n && i < 4096; i++) jb_putc(rt, &indb, ' ');
            o.indent = indb.p ? indb.p : "";
        } else {
            memset(ind, ' ', (size_t)(n < 0 ? 0 : n));
            ind[n < 0 ? 0 : n] = 0;
            o.indent = ind;
        }
    } else if (p[1].kind == JV_STR) {
        o.indent = jv_s(p[1])->s;
    } else if (p[1].kind != JV_MISSING && p[1].kind != JV_NONE) {
        return jfail(rt, "tojson: indent must be an int or a string, not %s", py_typename(p[1]));
    }
    if (o.indent) o.item_sep = ",";
    if (p[2].kind != JV_MISSING && p[2].kind != JV_NONE) {
        if (!jv_isseq(p[2]) || jv_l(p[2])->n != 2 || jv_l(p[2])->v[0].kind != JV_STR ||
            jv_l(p[2])->v[1].kind != JV_STR) {
            jb_free(&indb);
            return jfail(rt, "tojson: separators must be a pair of strings");
        }
        o.item_sep = jv_s(jv_l(p[2])->v[0])->s;
        o.key_sep = jv_s(jv_l(p[2])->v[1])->s;
    }
    jbuf b = {0};
    int rc = py_json_dump(rt, v, &o, &b);
    jb_free(&indb);
    if (rc) {
        jb_free(&b);
        return JE;
    }
    return jv_str_buf(rt, &b, out);
}

static int f_minmax(jrt *rt, jv seq, const jargs *a, int want_max, jv *out)
{
    static const char *const N[] = {"case_sensitive", "attribute"};
    jv p[2];
    if (jargs_bind(rt, want_max ? "max" : "min", a, N, 2, 0, p)) return JE;
    jv items;
    if (py_iter_list(rt, seq, &items)) return JE;
    const jlist *l = jv_l(items);
    if (l->n == 0) {
        jv_decref(items);
        return jv_undef_msg(rt, out, "No aggregated item, sequence was empty.");
    }
    size_t best = 0;
    jv bestk = jv_missing();
    int rc = 0;
    for (size_t i = 0; i < l->n && !rc; i++) {
        jv k0, k;
        int e;
        if ((rc = attr_path(rt, l->v[i], p[1], jv_missing(), &k0))) break;
        k = lower_if_str(rt, k0, py_truthy(p[0]), &e);
        jv_decref(k0);
        if (e) {
            rc = JE;
            break;
        }
        if (i == 0) {
            bestk = k;
            continue;
        }
        int c;
        rc = py_cmp(rt, k, bestk, want_max ? ">" : "<", &c);
        if (!rc && (want_max ? c > 0 && c != 2 : c < 0)) {
            jv_decref(bestk);
            bestk = k;
            best = i;
        } else {
            jv_decref(k);
        }
    }
    jv_decref(bestk);
    if (!rc) *out = jv_ref(l->v[best]);
    jv_decref(items);
    return rc;
}

static int f_sort(jrt *rt, jv seq, const jargs *a, jv *out)
{
    static const char *const N[] = {"reverse", "case_sensitive", "attribute"};
    jv p[3];
    if (jargs_bind(rt, "sort", a, N, 3, 0, p)) return JE;
    jv items;
    if (py_iter_list(rt, seq, &items)) return JE;
    const jlist *l = jv_l(items);
    jv *keys = calloc(l->n ? l->n : 1, sizeof(jv));
    if (!keys) {
        jv_decref(items);
        return jlimit(rt, "out of memory (sort)");
    }
    int rc = 0, cs = py_truthy(p[1]);
    /* attribute may name several, comma separated: the key is then a tuple */
    for (size_t i = 0; i < l->n && !rc; i++) {
        if (p[2].kind == JV_STR && memchr(jv_s(p[2])->s, ',', jv_s(p[2])->len)) {
            jlist *t = jlist_new(rt, JV_TUPLE, 0);
            if (!t) {
                rc = JE;
                break;
            }
            keys[i] = jv_obj(JV_TUPLE, t);
            const jstr *as = jv_s(p[2]);
            size_t st = 0;
            while (st <= as->len && !rc) {
                const char *c = memchr(as->s + st, ',', as->len - st);
                size_t e = c ? (size_t)(c - as->s) : as->len;
                jv part, k0, k;
                int err;
                rc = jv_str_new(rt, as->s + st, e - st, &part);
                if (!rc) rc = attr_path(rt, l->v[i], part, jv_missing(), &k0);
                jv_decref(part);
                if (rc) break;
                k = lower_if_str(rt, k0, cs, &err);
                jv_decref(k0);
                if (err || (rc = jlist_push(rt, t, k))) rc = JE;
                if (!c) break;
                st = e + 1;
            }
        } else {
            jv k0;
            int err;
            if ((rc = attr_path(rt, l->v[i], p[2], jv_missing(), &k0))) break;
            keys[i] = lower_if_str(rt, k0, cs, &err);
            jv_decref(k0);
            if (err) rc = JE;
        }
    }
    if (rc) {
        for (size_t i = 0; i < l->n; i++) jv_decref(keys[i]);
        free(keys);
        jv_decref(items);
        return JE;
    }
    rc = sort_by_keys(rt, l, keys, py_truthy(p[0]), out);
    free(keys);
    jv_decref(items);
    return rc;
}

static int f_dictsort(jrt *rt, jv v, const jargs *a, jv *out)
{
    static const char *const N[] = {"case_sensitive", "by", "reverse"};
    jv p[3];
    if (jargs_bind(rt, "dictsort", a, N, 3, 0, p)) return JE;
    if (v.kind != JV_DICT) return jfail(rt, "dictsort: a mapping is required, not %s", py_typename(v));
    int pos = 0;
    if (p[1].kind == JV_STR) {
        if (!strcmp(jv_s(p[1])->s, "value")) pos = 1;
        else if (strcmp(jv_s(p[1])->s, "key")) return jfail(rt, "You can only sort by either \"key\" or \"value\"");
    }
    jv items;
    if (py_dict_items(rt, v, &items)) return JE;
    const jlist *l = jv_l(items);
    jv *keys = calloc(l->n ? l->n : 1, sizeof(jv));
    if (!keys) {
        jv_decref(items);
        return jlimit(rt, "out of memory (sort)");
    }
    int rc = 0;
    for (size_t i = 0; i < l->n && !rc; i++) {
        int err;
        keys[i] = lower_if_str(rt, jv_l(l->v[i])->v[pos], py_truthy(p[0]), &err);
        if (err) rc = JE;
    }
    if (!rc) rc = sort_by_keys(rt, l, keys, py_truthy(p[2]), out);
    else
        for (size_t i = 0; i < l->n; i++) jv_decref(keys[i]);
    free(keys);
    jv_decref(items);
    return rc;
}

static int f_unique(jrt *rt, jv seq, const jargs *a, jv *out)
{
    static const char *const N[] = {"case_sensitive", "attribute"};
    jv p[2];
    if (jargs_bind(rt, "unique", a, N, 2, 0, p)) return JE;
    jv items;
    if (py_iter_list(rt, seq, &items)) return JE;
    const jlist *l = jv_l(items);
    jlist *r, *seen;
    jv rv = new_list(rt, 0, &r);
    if (!r) {
        jv_decref(items);
        return JE;
    }
    jv sv = new_list(rt, 0, &seen);
    int rc = seen ? 0 : JE;
    for (size_t i = 0; i < l->n && !rc; i++) {
        jv k0, k;
        int err, dup = 0;
        if ((rc = attr_path(rt, l->v[i], p[1], jv_missing(), &k0))) break;
        k = lower_if_str(rt, k0, py_truthy(p[0]), &err);
        jv_decref(k0);
        if (err) {
            rc = JE;
            break;
        }
        uint64_t h;
        if (py_hash(rt, k, &h)) {
            jv_decref(k);
            rc = JE;
            break;
        }
        for (size_t j = 0; j < seen->n && !dup; j++) dup = py_eq(seen->v[j], k);
        if (dup) {
            jv_decref(k);
            continue;
        }
        rc = jlist_push(rt, seen, k);
        if (!rc) rc = jlist_push(rt, r, jv_ref(l->v[i]));
    }
    jv_decref(sv);
    jv_decref(items);
    if (rc) {
        jv_decref(rv);
        return JE;
    }
    *out = as_gen(rv, 0);
    return 0;
}

static int f_batch(jrt *rt, jv seq, const jargs *a, jv *out)
{
    static const char *const N[] = {"linecount", "fill_with"};
    jv p[2];
    if (jargs_bind(rt, "batch", a, N, 2, 1, p)) return JE;
    if (p[0].kind != JV_INT || p[0].u.i <= 0) return jfail(rt, "batch: linecount must be a positive integer");
    int64_t n = p[0].u.i;
    jv items;
    if (py_iter_list(rt, seq, &items)) return JE;
    const jlist *l = jv_l(items);
    jlist *r, *cur = NULL;
    jv rv = new_list(rt, 0, &r);
    int rc = r ? 0 : JE;
    for (size_t i = 0; i < l->n && !rc; i++) {
        if (!cur) {
            cur = jlist_new(rt, JV_LIST, 0);
            if (!cur || (rc = jlist_push(rt, r, jv_obj(JV_LIST, cur)))) {
                rc = JE;
                break;
            }
        }
        rc = jlist_push(rt, cur, jv_ref(l->v[i]));
        if ((int64_t)cur->n == n) cur = NULL;
    }
    if (!rc && cur && p[1].kind != JV_MISSING && p[1].kind != JV_NONE)
        while ((int64_t)cur->n < n && !rc) rc = jlist_push(rt, cur, jv_ref(p[1]));
    if (!rc && r) rc = jlist_set_depth(rt, r);
    jv_decref(items);
    if (rc) {
        jv_decref(rv);
        return JE;
    }
    *out = as_gen(rv, 0);
    return 0;
}

/* jinja2's do_truncate(s, length=255, killwords=False, end="...", leeway=5): s unchanged if it has at most
 * length + leeway code points, else its first length - len(end) code points (without the last partial
 * word unless killwords) and end */
static int f_truncate(jrt *rt, jv s, jv length, jv killwords, jv end, jv leeway, jv *out)
{
    if (s.kind == JV_UNDEF || s.kind == JV_MISSING) return jv_undef_fail(rt, s);
    if (s.kind != JV_STR) return jfail(rt, "object of type '%s' has no len()", py_typename(s));
    int64_t len = 255, lw = 5;
    if (length.kind == JV_INT) len = length.u.i;
    else if (length.kind == JV_BOOL) len = length.u.b;
    else if (length.kind != JV_MISSING) return jfail(rt, "truncate: length must be an integer");
    if (leeway.kind == JV_INT) lw = leeway.u.i;
    else if (leeway.kind == JV_BOOL) lw = leeway.u.b;
    else if (leeway.kind != JV_MISSING && leeway.kind != JV_NONE) return jfail(rt, "truncate: leeway must be an integer");
    const char *es = "...";
    size_t en = 3, ecp = 3;
    if (end.kind == JV_STR) es = jv_s(end)->s, en = jv_s(end)->len, ecp = jv_s(end)->ncp;
    else if (end.kind != JV_MISSING) return jfail(rt, "can only concatenate str (not \"%s\") to str", py_typename(end));
    if (len < (int64_t)ecp) return jfail(rt, "expected length >= %zu, got %lld", ecp, (long long)len);
    if (lw < 0) return jfail(rt, "expected leeway >= 0, got %lld", (long long)lw);
    const jstr *str = jv_s(s);
    if ((int64_t)str->ncp <= len + lw) {
        *out = jv_ref(s);
        return 0;
    }
    size_t cut = u8_offset(str, (size_t)(len - (int64_t)ecp));
    if (!py_truthy(killwords)) /* head.rsplit(" ", 1)[0] */
        for (size_t i = cut; i > 0; i--)
            if (str->s[i - 1] == ' ') {
                cut = i - 1;
                break;
            }
    return jv_str_cat(rt, str->s, cut, es, en, out);
}

static int f_wordcount(jrt *rt, jv v, jv *out)
{
    jv s;
    if (py_tostr(rt, v, &s)) return JE;
    const jstr *str = jv_s(s);
    int64_t n = 0;
    int in = 0;
    size_t i = 0;
    while (i < str->len) {
        uint32_t c = u8_next(str->s, str->len, &i);
        utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
        int w = c == '_' || (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
                (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO) ||
                (c >= 0x80 && (k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC));
        if (w && !in) n++;
        in = w;
    }
    jv_decref(s);
    *out = jv_int(n);
    return 0;
}

static int f_first_last(jrt *rt, jv v, int last, jv *out)
{
    if (v.kind == JV_DICT && jv_d(v)->n) {
        *out = jv_ref(jv_d(v)->k[last ? jv_d(v)->n - 1 : 0]);
        return 0;
    }
    jv items;
    if (py_iter_list(rt, v, &items)) return JE;
    const jlist *l = jv_l(items);
    int rc = 0;
    if (l->n == 0) rc = jv_undef_msg(rt, out, last ? "No last item, sequence was empty." : "No first item, sequence was empty.");
    else *out = jv_ref(l->v[last ? l->n - 1 : 0]);
    jv_decref(items);
    return rc;
}

/* list(v), or reversed(v) as a list */
static int list_copy(jrt *rt, jv v, int reverse, jv *out)
{
    jv items;
    if (py_iter_list(rt, v, &items)) return JE;
    const jlist *src = jv_l(items);
    jlist *l;
    jv lv = new_list(rt, src->n, &l);
    if (!l) {
        jv_decref(items);
        return JE;
    }
    for (size_t i = 0; i < src->n; i++) l->v[l->n++] = jv_ref(src->v[reverse ? src->n - 1 - i : i]);
    l->depth = src->depth;
    jv_decref(items);
    *out = lv;
    return 0;
}

/* ------------------------------------------------------------------ dispatch */

#define BIND(fname, names, nreq) \
    do { \
        if (jargs_bind(rt, fname, a, names, (int)(sizeof(names) / sizeof(names[0])), nreq, p)) return JE; \
    } while (0)

int jfilter_apply(jrt *rt, int id, jv v, const jargs *a, jv *out)
{
    jv p[4];
    static const char *const N0[] = {"_"};
    static const char *const N_DEFAULT[] = {"default_value", "boolean"};
    static const char *const N_JOIN[] = {"d", "attribute"};
    static const char *const N_INDENT[] = {"width", "first", "blank"};
    static const char *const N_INT[] = {"default", "base"};
    static const char *const N_FLOAT[] = {"default"};
    static const char *const N_REPLACE[] = {"old", "new", "count"};
    static const char *const N_ROUND[] = {"precision", "method"};
    static const char *const N_TRIM[] = {"chars"};
    static const char *const N_CENTER[] = {"width"};
    static const char *const N_TRUNCATE[] = {"length", "killwords", "end", "leeway"};
    static const char *const N_ATTR[] = {"name"};
    static const char *const N_SUM[] = {"attribute", "start"};
    (void)N0;
    switch (id) {
    case F_ABS:
        if (a->npos || a->nkw) return jfail(rt, "abs takes no arguments");
        if (v.kind == JV_INT) {
            if (v.u.i == INT64_MIN) return jfail(rt, "integer overflow");
            *out = jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
        } else if (v.kind == JV_BOOL) *out = jv_int(v.u.b);
        else if (v.kind == JV_FLOAT) *out = jv_float(fabs(v.u.f));
        else return jfail(rt, "bad operand type for abs(): '%s'", py_typename(v));
        return 0;
    case F_ATTR: {
        BIND("attr", N_ATTR, 1);
        if (p[0].kind != JV_STR) return jv_undef_item(rt, v, p[0], out);
        if (v.kind == JV_DICT) { /* only real attributes (methods), never items */
            jv m;
            if (jattr_get(rt, v, jv_s(p[0])->s, &m)) return JE;
            if (m.kind == JV_FUNC || m.kind == JV_UNDEF) {
                *out = m;
                return 0;
            }
            jv_decref(m);
            return jv_undef_attr(rt, v, jv_s(p[0])->s, out);
        }
        return jattr_get(rt, v, jv_s(p[0])->s, out);
    }
    case F_BATCH: return f_batch(rt, v, a, out);
    case F_CAPITALIZE:
    case F_LOWER:
    case F_UPPER:
    case F_TITLE: {
        jv s;
        if (py_tostr(rt, v, &s)) return JE;
        int rc = py_str_case(rt, s, id == F_CAPITALIZE ? JCASE_CAPITALIZE : id == F_LOWER ? JCASE_LOWER
                                                         : id == F_UPPER ? JCASE_UPPER : JCASE_JTITLE, out);
        jv_decref(s);
        return rc;
    }
    case F_CENTER: {
        BIND("center", N_CENTER, 0);
        jv s, res;
        if (py_tostr(rt, v, &s)) return JE;
        jv fn;
        if (jattr_get(rt, s, "center", &fn)) {
            jv_decref(s);
            return JE;
        }
        jv w = p[0].kind == JV_MISSING ? jv_int(80) : p[0];
        jargs ca = {&w, 1, NULL, NULL, 0, jv_missing()};
        int rc = jeval_call(rt, fn, &ca, &res);
        jv_decref(fn);
        jv_decref(s);
        if (!rc) *out = res;
        return rc;
    }
    case F_DEFAULT:
        BIND("default", N_DEFAULT, 0);
        if (v.kind == JV_UNDEF || v.kind == JV_MISSING || (py_truthy(p[1]) && !py_truthy(v))) {
            if (p[0].kind == JV_MISSING) return jv_str_lit(rt, "", out);
            *out = jv_ref(p[0]);
        } else {
            *out = jv_ref(v);
        }
        return 0;
    case F_DICTSORT: return f_dictsort(rt, v, a, out);
    case F_ESCAPE: return py_html_escape(rt, v, out);
    case F_FORCEESCAPE: {
        jv s;
        if (py_tostr(rt, v, &s)) return JE;
        int rc = 0;
        if (jv_s(s)->markup) { /* force: escape again as plain text */
            jv t;
            rc = jv_str_new(rt, jv_s(s)->s, jv_s(s)->len, &t);
            jv_decref(s);
            if (rc) return JE;
            s = t;
        }
        rc = py_html_escape(rt, s, out);
        jv_decref(s);
        return rc;
    }
    case F_FIRST: return f_first_last(rt, v, 0, out);
    case F_LAST: return f_first_last(rt, v, 1, out);
    case F_FLOAT: BIND("float", N_FLOAT, 0); return f_float(rt, v, p[0], out);
    case F_INT: BIND("int", N_INT, 0); return f_int(rt, v, p[0], p[1], out);
    case F_FORMAT: {
        if (a->npos && a->nkw) return jfail(rt, "can't handle positional and keyword arguments at the same time");
        jv s, args;
        if (py_tostr(rt, v, &s)) return JE;
        int rc;
        if (a->nkw) {
            jdict *d = jdict_new(rt, JV_DICT);
            rc = d ? 0 : JE;
            args = jv_obj(JV_DICT, d);
            for (int k = 0; k < a->nkw && !rc; k++) {
                jv key;
                rc = jv_str_new(rt, a->kwn[k], strlen(a->kwn[k]), &key);
                if (!rc) rc = jdict_set(rt, d, key, jv_ref(a->kwv[k]));
            }
        } else {
            jlist *t = jlist_new(rt, JV_TUPLE, (size_t)a->npos);
            rc = t ? 0 : JE;
            args = jv_obj(JV_TUPLE, t);
            for (int k = 0; k < a->npos && !rc; k++) t->v[t->n++] = jv_ref(a->pos[k]);
            if (!rc) rc = jlist_set_depth(rt, t);
        }
        if (!rc) rc = py_percent_format(rt, s, args, out);
        if (args.u.o) jv_decref(args);
        jv_decref(s);
        return rc;
    }
    case F_INDENT: BIND("indent", N_INDENT, 0); return f_indent(rt, v, p[0], p[1], p[2], out);
    case F_TRUNCATE: BIND("truncate", N_TRUNCATE, 0); return f_truncate(rt, v, p[0], p[1], p[2], p[3], out);
    case F_ITEMS:
        if (v.kind == JV_UNDEF || v.kind == JV_MISSING) {
            jlist *l;
            jv lv = new_list(rt, 0, &l);
            if (!l) return JE;
            *out = lv;
            return 0;
        }
        if (v.kind != JV_DICT) return jfail(rt, "Can only get item pairs from a mapping.");
        return py_dict_items(rt, v, out);
    case F_JOIN: BIND("join", N_JOIN, 0); return f_join(rt, v, p[0], p[1], out);
    case F_LENGTH: {
        int64_t n;
        if (py_len(rt, v, &n)) return JE;
        *out = jv_int(n);
        return 0;
    }
    case F_LIST: return list_copy(rt, v, 0, out);
    case F_MAP: return f_map(rt, v, a, out);
    case F_MAX: return f_minmax(rt, v, a, 1, out);
    case F_MIN: return f_minmax(rt, v, a, 0, out);
    case F_REJECT: return select_reject(rt, v, a, 0, 0, out);
    case F_REJECTATTR: return select_reject(rt, v, a, 1, 0, out);
    case F_SELECT: return select_reject(rt, v, a, 0, 1, out);
    case F_SELECTATTR: return select_reject(rt, v, a, 1, 1, out);
    case F_REPLACE: {
        BIND("replace", N_REPLACE, 2);
        jv s, o, n;
        int64_t cnt = -1;
        if (p[2].kind == JV_INT) cnt = p[2].u.i;
        else if (p[2].kind != JV_MISSING && p[2].kind != JV_NONE)
            return jfail(rt, "'%s' object cannot be interpreted as an integer", py_typename(p[2]));
        if (py_tostr(rt, v, &s)) return JE;
        if (py_tostr(rt, p[0], &o)) {
            jv_decref(s);
            return JE;
        }
        if (py_tostr(rt, p[1], &n)) {
            jv_decref(s);
            jv_decref(o);
            return JE;
        }
        int rc = py_str_replace(rt, s, o, n, cnt, out);
        jv_decref(s);
        jv_decref(o);
        jv_decref(n);
        return rc;
    }
    case F_REVERSE: /* reversed(v) where Python can (an iterator over a list or tuple), else a reversed list */
        if (v.kind == JV_STR) return py_slice(rt, v, jv_missing(), jv_missing(), jv_int(-1), out);
        if (list_copy(rt, v, 1, out)) return JE;
        if (v.kind == JV_LIST || v.kind == JV_TUPLE) *out = as_gen(*out, 1);
        return 0;
    case F_ROUND: BIND("round", N_ROUND, 0); return f_round(rt, v, p[0], p[1], out);
    case F_SAFE: {
        jv s;
        if (py_tostr(rt, v, &s)) return JE;
        if (jv_s(s)->markup) {
            *out = s;
            return 0;
        }
        int rc = jv_str_new(rt, jv_s(s)->s, jv_s(s)->len, out);
        jv_decref(s);
        if (!rc) ((jstr *)out->u.o)->markup = 1;
        return rc;
    }
    case F_SORT: return f_sort(rt, v, a, out);
    case F_STRING:
        if (v.kind == JV_STR) {
            *out = jv_ref(v);
            return 0;
        }
        return py_tostr(rt, v, out);
    case F_SUM: {
        BIND("sum", N_SUM, 0);
        jv items;
        if (py_iter_list(rt, v, &items)) return JE;
        jv acc = p[1].kind == JV_MISSING ? jv_int(0) : jv_ref(p[1]);
        const jlist *l = jv_l(items);
        int rc = 0;
        for (size_t i = 0; i < l->n && !rc; i++) {
            jv x, r;
            rc = attr_path(rt, l->v[i], p[0], jv_missing(), &x);
            if (rc) break;
            rc = jbinop(rt, JO_ADD, acc, x, &r);
            jv_decref(x);
            if (!rc) {
                jv_decref(acc);
                acc = r;
            }
        }
        jv_decref(items);
        if (rc) {
            jv_decref(acc);
            return JE;
        }
        *out = acc;
        return 0;
    }
    case F_TOJSON: return f_tojson(rt, v, a, out);
    case F_TRIM: {
        BIND("trim", N_TRIM, 0);
        jv s;
        if (py_tostr(rt, v, &s)) return JE;
        int rc = py_str_strip(rt, s, p[0], 1, 1, out);
        jv_decref(s);
        return rc;
    }
    case F_UNIQUE: return f_unique(rt, v, a, out);
    case F_WORDCOUNT: return f_wordcount(rt, v, out);
    }
    return jfail(rt, "internal error: filter %d", id);
}

/* ------------------------------------------------------------------ tests */

int jtest_apply(jrt *rt, int id, jv v, const jargs *a, int *out)
{
    jv arg = a->npos ? a->pos[0] : a->nkw ? a->kwv[0] : jv_missing();
    int need_arg = id == T_DIVISIBLEBY || id == T_EQ || id == T_NE || id == T_GE || id == T_GT || id == T_LE ||
                   id == T_LT || id == T_IN || id == T_SAMEAS;
    if (need_arg && arg.kind == JV_MISSING) return jfail(rt, "test takes exactly 1 argument (0 given)");
    int c;
    switch (id) {
    case T_BOOLEAN: *out = v.kind == JV_BOOL; return 0;
    case T_CALLABLE:
        *out = v.kind == JV_MACRO || v.kind == JV_FUNC || v.kind == JV_JOINER || v.kind == JV_LOOP ||
               v.kind == JV_UNDEF || v.kind == JV_MISSING; /* Undefined has __call__ */
        return 0;
    case T_DEFINED: *out = v.kind != JV_UNDEF && v.kind != JV_MISSING; return 0;
    case T_UNDEFINED: *out = v.kind == JV_UNDEF || v.kind == JV_MISSING; return 0;
    case T_DIVISIBLEBY: {
        jv r;
        if (jbinop(rt, JO_MOD, v, arg, &r)) return JE;
        *out = (r.kind == JV_INT && r.u.i == 0) || (r.kind == JV_FLOAT && r.u.f == 0);
        return 0;
    }
    case T_EQ: *out = py_eq(v, arg); return 0;
    case T_NE: *out = !py_eq(v, arg); return 0;
    case T_ESCAPED: *out = v.kind == JV_STR && jv_s(v)->markup; return 0;
    case T_EVEN:
    case T_ODD: {
        jv r;
        if (jbinop(rt, JO_MOD, v, jv_int(2), &r)) return JE;
        int odd = (r.kind == JV_INT && r.u.i == 1) || (r.kind == JV_FLOAT && r.u.f == 1.0);
        *out = id == T_ODD ? odd : ((r.kind == JV_INT && r.u.i == 0) || (r.kind == JV_FLOAT && r.u.f == 0));
        return 0;
    }
    case T_FALSE: *out = v.kind == JV_BOOL && !v.u.b; return 0;
    case T_TRUE: *out = v.kind == JV_BOOL && v.u.b; return 0;
    case T_FILTER: *out = v.kind == JV_STR && jfilter_id(jv_s(v)->s) >= 0; return 0;
    case T_TEST: *out = v.kind == JV_STR && jtest_id(jv_s(v)->s) >= 0; return 0;
    case T_FLOAT: *out = v.kind == JV_FLOAT; return 0;
    case T_INTEGER: *out = v.kind == JV_INT; return 0;
    case T_NUMBER: *out = v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL; return 0;
    case T_GE:
    case T_GT:
    case T_LE:
    case T_LT: {
        const char *op = id == T_GE ? ">=" : id == T_GT ? ">" : id == T_LE ? "<=" : "<";
        if (v.kind == JV_UNDEF || v.kind == JV_MISSING) return jv_undef_fail(rt, v);
        if (arg.kind == JV_UNDEF) return jv_undef_fail(rt, arg);
        if (py_cmp(rt, v, arg, op, &c)) return JE;
        *out = c == 2 ? 0 : id == T_GE ? c >= 0 : id == T_GT ? c > 0 : id == T_LE ? c <= 0 : c < 0;
        return 0;
    }
    case T_IN: {
        jv lst;
        switch (arg.kind) {
        case JV_STR:
            if (v.kind != JV_STR)
                return jfail(rt, "'in <string>' requires string as left operand, not %s", py_typename(v));
            *out = memmem(jv_s(arg)->s, jv_s(arg)->len, jv_s(v)->s, jv_s(v)->len) != NULL || jv_s(v)->len == 0;
            return 0;
        case JV_DICT: {
            size_t pos;
            int f = jdict_find(rt, jv_d(arg), v, &pos);
            if (f < 0) return JE;
            *out = f;
            return 0;
        }
        default:
            if (py_iter_list(rt, arg, &lst)) return JE;
            *out = 0;
            for (size_t i = 0; i < jv_l(lst)->n && !*out; i++) *out = py_eq(jv_l(lst)->v[i], v);
            jv_decref(lst);
            return 0;
        }
    }
    case T_LOWER:
    case T_UPPER: { /* str(v).islower() / isupper(): some cased character, none of the other case */
        jv s;
        if (py_tostr(rt, v, &s)) return JE;
        const jstr *str = jv_s(s);
        int cased = 0, other = 0;
        size_t i = 0;
        while (i < str->len) {
            utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)u8_next(str->s, str->len, &i));
            int lo = k == UTF8PROC_CATEGORY_LL, up = k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LT;
            if (id == T_LOWER ? lo : k == UTF8PROC_CATEGORY_LU) cased = 1;
            if (id == T_LOWER ? up : lo || k == UTF8PROC_CATEGORY_LT) other = 1;
        }
        jv_decref(s);
        *out = cased && !other;
        return 0;
    }
    case T_MAPPING: *out = v.kind == JV_DICT; return 0;
    case T_NONE: *out = v.kind == JV_NONE; return 0;
    case T_SAMEAS:
        if (v.kind != arg.kind) *out = 0;
        else if (jv_isobj(v)) *out = v.u.o == arg.u.o;
        else *out = py_eq(v, arg);
        return 0;
    case T_SEQUENCE:
        *out = v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_TUPLE || v.kind == JV_DICT ||
               v.kind == JV_UNDEF || v.kind == JV_MISSING;
        return 0;
    case T_ITERABLE:
        *out = v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_TUPLE || v.kind == JV_DICT ||
               v.kind == JV_UNDEF || v.kind == JV_MISSING || v.kind == JV_LOOP || v.kind == JV_GEN;
        return 0;
    case T_STRING: *out = v.kind == JV_STR; return 0;
    }
    return jfail(rt, "internal error: test %d", id);
}
