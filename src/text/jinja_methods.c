/* text/jinja_methods.c: attribute and item access, methods of str / dict / list, the
 * `loop` object, and the globals (range, dict, namespace, cycler, joiner,
 * raise_exception, strftime_now).
 *
 * Access follows jinja2's sandboxed environment: `obj.name` tries the Python attribute
 * first, then obj['name']; `obj[key]` tries the item first, then the attribute. A
 * missing one is Undefined (printing it gives ''; using it fails). Methods that would
 * modify a list or dict (append, pop, update, ...) are refused as the
 * ImmutableSandboxedEnvironment refuses them: "access to attribute 'append' of 'list'
 * object is unsafe." */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#include "text/jinja-impl.h"

enum {
    /* globals */
    JF_RANGE = 1, JF_DICT, JF_NAMESPACE, JF_CYCLER, JF_JOINER, JF_RAISE, JF_STRFTIME, JF_LIPSUM,
    /* str */
    JM_STARTSWITH = 100, JM_ENDSWITH, JM_SPLIT, JM_RSPLIT, JM_STRIP, JM_LSTRIP, JM_RSTRIP, JM_UPPER,
    JM_LOWER, JM_TITLE, JM_CAPITALIZE, JM_SWAPCASE, JM_CASEFOLD, JM_REPLACE, JM_FIND, JM_RFIND, JM_INDEX,
    JM_RINDEX, JM_COUNT, JM_JOIN, JM_SPLITLINES, JM_ISDIGIT, JM_ISALPHA, JM_ISALNUM, JM_ISSPACE,
    JM_ISLOWER, JM_ISUPPER, JM_ISNUMERIC, JM_ISDECIMAL, JM_ISTITLE, JM_FORMAT, JM_CENTER, JM_LJUST,
    JM_RJUST, JM_ZFILL, JM_REMOVEPREFIX, JM_REMOVESUFFIX, JM_PARTITION, JM_RPARTITION, JM_EXPANDTABS,
    /* dict */
    JM_GET = 200, JM_ITEMS, JM_KEYS, JM_VALUES, JM_DCOPY,
    /* list / tuple */
    JM_LINDEX = 300, JM_LCOUNT, JM_LCOPY,
    /* loop and cycler */
    JM_CYCLE = 400, JM_CHANGED, JM_CNEXT, JM_CRESET,
    /* a real Python method this interpreter does not implement */
    JM_UNSUPPORTED = 900,
};

typedef struct mdef {
    const char *name;
    int id;
} mdef;

static const mdef STR_METHODS[] = {
    {"startswith", JM_STARTSWITH}, {"endswith", JM_ENDSWITH}, {"split", JM_SPLIT}, {"rsplit", JM_RSPLIT},
    {"strip", JM_STRIP}, {"lstrip", JM_LSTRIP}, {"rstrip", JM_RSTRIP}, {"upper", JM_UPPER}, {"lower", JM_LOWER},
    {"title", JM_TITLE}, {"capitalize", JM_CAPITALIZE}, {"swapcase", JM_SWAPCASE}, {"casefold", JM_CASEFOLD},
    {"replace", JM_REPLACE}, {"find", JM_FIND}, {"rfind", JM_RFIND}, {"index", JM_INDEX}, {"rindex", JM_RINDEX},
    {"count", JM_COUNT}, {"join", JM_JOIN}, {"splitlines", JM_SPLITLINES}, {"isdigit", JM_ISDIGIT},
    {"isalpha", JM_ISALPHA}, {"isalnum", JM_ISALNUM}, {"isspace", JM_ISSPACE}, {"islower", JM_ISLOWER},
    {"isupper", JM_ISUPPER}, {"isnumeric", JM_ISNUMERIC}, {"isdecimal", JM_ISDECIMAL}, {"istitle", JM_ISTITLE},
    {"format", JM_FORMAT}, {"center", JM_CENTER}, {"ljust", JM_LJUST}, {"rjust", JM_RJUST}, {"zfill", JM_ZFILL},
    {"removeprefix", JM_REMOVEPREFIX}, {"removesuffix", JM_REMOVESUFFIX}, {"partition", JM_PARTITION},
    {"rpartition", JM_RPARTITION},
    {"encode", JM_UNSUPPORTED}, {"expandtabs", JM_EXPANDTABS}, {"format_map", JM_UNSUPPORTED},
    {"isascii", JM_UNSUPPORTED}, {"isidentifier", JM_UNSUPPORTED}, {"isprintable", JM_UNSUPPORTED},
    {"maketrans", JM_UNSUPPORTED}, {"translate", JM_UNSUPPORTED},
    {NULL, 0},
};

static const mdef DICT_METHODS[] = {
    {"get", JM_GET}, {"items", JM_ITEMS}, {"keys", JM_KEYS}, {"values", JM_VALUES}, {"copy", JM_DCOPY},
    {"fromkeys", JM_UNSUPPORTED}, {NULL, 0},
};
static const char *const DICT_UNSAFE[] = {"clear", "pop", "popitem", "setdefault", "update", NULL};

static const mdef LIST_METHODS[] = {{"index", JM_LINDEX}, {"count", JM_LCOUNT}, {"copy", JM_LCOPY}, {NULL, 0}};
static const char *const LIST_UNSAFE[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort",
                                          NULL};

static const mdef GLOBALS[] = {
    {"range", JF_RANGE}, {"dict", JF_DICT}, {"namespace", JF_NAMESPACE}, {"cycler", JF_CYCLER},
    {"joiner", JF_JOINER}, {"raise_exception", JF_RAISE}, {"strftime_now", JF_STRFTIME}, {"lipsum", JF_LIPSUM},
    {NULL, 0},
};

static const mdef *mfind(const mdef *t, const char *name)
{
    for (; t->name; t++)
        if (strcmp(t->name, name) == 0) return t;
    return NULL;
}

static int in_list(const char *const *l, const char *name)
{
    for (; *l; l++)
        if (strcmp(*l, name) == 0) return 1;
    return 0;
}

static int make_func(jrt *rt, const mdef *m, jv self, jv *out)
{
    jfunc *f = jobj_new(rt, JV_FUNC, sizeof(jfunc));
    if (!f) return JE;
    f->id = m->id;
    f->name = m->name;
    f->self = jv_ref(self);
    *out = jv_obj(JV_FUNC, f);
    return 0;
}

int jglobal_lookup(jrt *rt, const char *name, jv *out)
{
    const mdef *m = mfind(GLOBALS, name);
    if (!m) return 0;
    return make_func(rt, m, jv_missing(), out) ? JE : 1;
}

static int unsafe(jrt *rt, const char *attr, jv obj, jv *out)
{
    return jv_undef_msg(rt, out, "access to attribute '%s' of '%s' object is unsafe.", attr, py_typename(obj));
}

/* ------------------------------------------------------------------ the loop object */

int jloop_attr(jrt *rt, jv loopv, const char *a, jv *out)
{
    const jloop *L = (const jloop *)loopv.u.o;
    int64_t n = (int64_t)jv_l(L->items)->n, i = (int64_t)L->i;
    if (!strcmp(a, "index")) *out = jv_int(i + 1);
    else if (!strcmp(a, "index0")) *out = jv_int(i);
    else if (!strcmp(a, "revindex")) *out = jv_int(n - i);
    else if (!strcmp(a, "revindex0")) *out = jv_int(n - i - 1);
    else if (!strcmp(a, "first")) *out = jv_bool(i == 0);
    else if (!strcmp(a, "last")) *out = jv_bool(i == n - 1);
    else if (!strcmp(a, "length")) *out = jv_int(n);
    else if (!strcmp(a, "depth")) *out = jv_int(L->depth0 + 1);
    else if (!strcmp(a, "depth0")) *out = jv_int(L->depth0);
    else if (!strcmp(a, "previtem")) {
        if (i == 0) return jv_undef_msg(rt, out, "there is no previous item");
        *out = jv_ref(jv_l(L->items)->v[i - 1]);
    } else if (!strcmp(a, "nextitem")) {
        if (i + 1 >= n) return jv_undef_msg(rt, out, "there is no next item");
        *out = jv_ref(jv_l(L->items)->v[i + 1]);
    } else if (!strcmp(a, "cycle")) {
        static const mdef m = {"cycle", JM_CYCLE};
        return make_func(rt, &m, loopv, out);
    } else if (!strcmp(a, "changed")) {
        static const mdef m = {"changed", JM_CHANGED};
        return make_func(rt, &m, loopv, out);
    } else {
        return jv_undef_attr(rt, loopv, a, out);
    }
    return 0;
}

/* ------------------------------------------------------------------ getattr / getitem */

int jattr_get(jrt *rt, jv obj, const char *attr, jv *out)
{
    const mdef *m;
    switch (obj.kind) {
    case JV_MISSING:
    case JV_UNDEF: return jv_undef_fail(rt, obj);
    case JV_STR:
        if ((m = mfind(STR_METHODS, attr))) return make_func(rt, m, obj, out);
        break;
    case JV_DICT: {
        if ((m = mfind(DICT_METHODS, attr))) return make_func(rt, m, obj, out);
        if (in_list(DICT_UNSAFE, attr)) return unsafe(rt, attr, obj, out);
        jv v;
        if (jdict_get_str(jv_d(obj), attr, &v)) {
            *out = jv_ref(v);
            return 0;
        }
        break;
    }
    case JV_LIST:
        if ((m = mfind(LIST_METHODS, attr))) return make_func(rt, m, obj, out);
        if (in_list(LIST_UNSAFE, attr)) return unsafe(rt, attr, obj, out);
        break;
    case JV_TUPLE:
        if ((m = mfind(LIST_METHODS, attr)) && m->id != JM_LCOPY) return make_func(rt, m, obj, out);
        break;
    case JV_NS: {
        jv v;
        if (jdict_get_str(jv_d(obj), attr, &v)) {
            *out = jv_ref(v);
            return 0;
        }
        break;
    }
    case JV_LOOP: return jloop_attr(rt, obj, attr, out);
    case JV_MACRO:
        if (!strcmp(attr, "name")) {
            const char *n = ((jmacro *)obj.u.o)->name;
            return jv_str_new(rt, n, strlen(n), out);
        }
        break;
    case JV_CYCLER: {
        static const mdef next = {"next", JM_CNEXT}, reset = {"reset", JM_CRESET};
        jjoiner *c = (jjoiner *)obj.u.o;
        if (!strcmp(attr, "next")) return make_func(rt, &next, obj, out);
        if (!strcmp(attr, "reset")) return make_func(rt, &reset, obj, out);
        if (!strcmp(attr, "current")) {
            *out = jv_ref(jv_l(c->items)->v[c->pos]);
            return 0;
        }
        break;
    }
    default: break;
    }
    return jv_undef_attr(rt, obj, attr, out);
}

static int seq_index(jv key, int64_t n, int64_t *idx)
{
    int64_t i;
    if (key.kind == JV_INT) i = key.u.i;
    else if (key.kind == JV_BOOL) i = key.u.b;
    else return 0;
    if (i < 0) i += n;
    if (i < 0 || i >= n) return -1;
    *idx = i;
    return 1;
}

int jitem_get(jrt *rt, jv obj, jv key, jv *out)
{
    int64_t idx;
    switch (obj.kind) {
    case JV_MISSING:
    case JV_UNDEF: return jv_undef_fail(rt, obj);
    case JV_LIST:
    case JV_TUPLE: {
        const jlist *l = jv_l(obj);
        int r = seq_index(key, (int64_t)l->n, &idx);
        if (r == 1) {
            *out = jv_ref(l->v[idx]);
            return 0;
        }
        if (r == 0 && key.kind == JV_STR) return jattr_get(rt, obj, jv_s(key)->s, out);
        return jv_undef_item(rt, obj, key, out);
    }
    case JV_STR: {
        const jstr *s = jv_s(obj);
        int r = seq_index(key, (int64_t)s->ncp, &idx);
        if (r == 1) {
            size_t b = u8_offset(s, (size_t)idx), e = u8_offset(s, (size_t)idx + 1);
            return jv_str_new(rt, s->s + b, e - b, out);
        }
        if (r == 0 && key.kind == JV_STR) return jattr_get(rt, obj, jv_s(key)->s, out);
        return jv_undef_item(rt, obj, key, out);
    }
    case JV_DICT: {
        size_t pos;
        uint64_t h;
        if (key.kind >= JV_LIST && py_hash(NULL, key, &h)) /* unhashable: a TypeError, so undefined */
            return jv_undef_item(rt, obj, key, out);
        int f = jdict_find(rt, jv_d(obj), key, &pos);
        if (f < 0) return JE;
        if (f) {
            *out = jv_ref(jv_d(obj)->v[pos]);
            return 0;
        }
        if (key.kind == JV_STR) {
            const char *a = jv_s(key)->s;
            const mdef *m = mfind(DICT_METHODS, a);
            if (m) return make_func(rt, m, obj, out);
            if (in_list(DICT_UNSAFE, a)) return unsafe(rt, a, obj, out);
        }
        return jv_undef_item(rt, obj, key, out);
    }
    default:
        if (key.kind == JV_STR) return jattr_get(rt, obj, jv_s(key)->s, out);
        return jv_undef_item(rt, obj, key, out);
    }
}

/* ------------------------------------------------------------------ helpers */

static int want_str(jrt *rt, const char *fn, jv v)
{
    if (v.kind == JV_STR) return 0;
    return jfail(rt, "%s() argument must be str, not %s", fn, py_typename(v));
}

static int opt_int(jrt *rt, const char *fn, jv v, int64_t dflt, int64_t *out)
{
    if (v.kind == JV_MISSING || v.kind == JV_NONE) *out = dflt;
    else if (v.kind == JV_INT) *out = v.u.i;
    else if (v.kind == JV_BOOL) *out = v.u.b;
    else return jfail(rt, "%s(): '%s' object cannot be interpreted as an integer", fn, py_typename(v));
    return 0;
}

static int str_pred(const jstr *s, int id)
{
    if (s->len == 0) return 0;
    size_t i = 0;
    int cased = 0, prev_cased = 0, title_ok = 1;
    while (i < s->len) {
        uint32_t c = u8_next(s->s, s->len, &i);
        utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
        int isl = k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
        int isn = k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO;
        switch (id) {
        case JM_ISDIGIT:
        case JM_ISDECIMAL: if (k != UTF8PROC_CATEGORY_ND) return 0; break;
        case JM_ISNUMERIC: if (!isn) return 0; break;
        case JM_ISALPHA: if (!isl) return 0; break;
        case JM_ISALNUM: if (!isl && !isn) return 0; break;
        case JM_ISSPACE: if (!py_isspace(c)) return 0; break;
        case JM_ISLOWER:
            if (k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LT) return 0;
            if (k == UTF8PROC_CATEGORY_LL) cased = 1;
            break;
        case JM_ISUPPER:
            if (k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT) return 0;
            if (k == UTF8PROC_CATEGORY_LU) cased = 1;
            break;
        case JM_ISTITLE:
            if (k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LT) {
                if (prev_cased) title_ok = 0;
                prev_cased = cased = 1;
            } else if (k == UTF8PROC_CATEGORY_LL) {
                if (!prev_cased) title_ok = 0;
                prev_cased = cased = 1;
            } else {
                prev_cased = 0;
            }
            break;
        }
    }
    if (id == JM_ISLOWER || id == JM_ISUPPER) return cased;
    if (id == JM_ISTITLE) return cased && title_ok;
    return 1;
}

/* prefix/suffix test of startswith / endswith: arg str or tuple of str */
static int affix(jrt *rt, const jfunc *f, jv self, jv arg, jv vstart, jv vend, int *out)
{
    const jstr *s = jv_s(self);
    int64_t n = (int64_t)s->ncp, start = 0, end = 0;
    if (opt_int(rt, f->name, vstart, 0, &start) || opt_int(rt, f->name, vend, n, &end)) return JE;
    if (end > n) end = n;
    else if (end < 0 && (end += n) < 0) end = 0;
    if (start < 0 && (start += n) < 0) start = 0;
    *out = 0;
    jv one[1] = {arg};
    const jv *cands = one;
    size_t nc = 1;
    if (arg.kind == JV_TUPLE) {
        cands = jv_l(arg)->v;
        nc = jv_l(arg)->n;
    }
    for (size_t i = 0; i < nc; i++) {
        if (cands[i].kind != JV_STR)
            return jfail(rt, "%s first arg must be str or a tuple of str, not %s", f->name, py_typename(cands[i]));
        const jstr *p = jv_s(cands[i]);
        if (start > n || end - start < (int64_t)p->ncp) continue;
        size_t b = u8_offset(s, (size_t)start), e = u8_offset(s, (size_t)end);
        if (f->id == JM_STARTSWITH) {
            if (memcmp(s->s + b, p->s, p->len) == 0) *out = 1;
        } else if (memcmp(s->s + e - p->len, p->s, p->len) == 0) {
            *out = 1;
        }
        if (*out) break;
    }
    return 0;
}

static int pad_str(jrt *rt, const jstr *s, int64_t width, jv fill, int mode, jv *out)
{
    char f[8] = " ";
    size_t fl = 1;
    if (fill.kind == JV_STR) {
        if (jv_s(fill)->ncp != 1) return jfail(rt, "The fill character must be exactly one character long");
        fl = jv_s(fill)->len;
        memcpy(f, jv_s(fill)->s, fl);
    } else if (fill.kind != JV_MISSING) {
        return jfail(rt, "The fill character must be a unicode character, not %s", py_typename(fill));
    }
    int64_t n = (int64_t)s->ncp;
    if (width <= n) return jv_str_new(rt, s->s, s->len, out);
    if ((uint64_t)width > rt->lim.max_output) return jlimit(rt, "padding exceeds the output limit");
    int64_t pad = width - n, left;
    if (mode == 'l') left = 0;
    else if (mode == 'r') left = pad;
    else left = pad / 2 + (pad & width & 1); /* Python's center() */
    jbuf b = {0};
    int rc = 0;
    for (int64_t i = 0; i < left && !rc; i++) rc = jb_put(rt, &b, f, fl);
    if (!rc) rc = jb_put(rt, &b, s->s, s->len);
    for (int64_t i = left; i < pad && !rc; i++) rc = jb_put(rt, &b, f, fl);
    if (rc) {
        jb_free(&b);
        return JE;
    }
    return jv_str_buf(rt, &b, out);
}

static int partition(jrt *rt, jv self, jv sep, int right, jv *out)
{
    if (want_str(rt, right ? "rpartition" : "partition", sep)) return JE;
    const jstr *s = jv_s(self), *p = jv_s(sep);
    if (p->len == 0) return jfail(rt, "empty separator");
    const char *f = NULL;
    if (!right) f = memmem(s->s, s->len, p->s, p->len);
    else if (s->len >= p->len)
        for (size_t k = s->len - p->len + 1; k-- > 0;)
            if (memcmp(s->s + k, p->s, p->len) == 0) {
                f = s->s + k;
                break;
            }
    jlist *l = jlist_new(rt, JV_TUPLE, 3);
    if (!l) return JE;
    jv lv = jv_obj(JV_TUPLE, l);
    const char *pa, *pb, *pc;
    size_t na, nb, nc;
    if (f) {
        pa = s->s;
        na = (size_t)(f - s->s);
        pb = p->s;
        nb = p->len;
        pc = f + p->len;
        nc = s->len - na - p->len;
    } else if (!right) {
        pa = s->s;
        na = s->len;
        pb = pc = "";
        nb = nc = 0;
    } else {
        pa = pb = "";
        na = nb = 0;
        pc = s->s;
        nc = s->len;
    }
    const char *ps[3] = {pa, pb, pc};
    size_t ns[3] = {na, nb, nc};
    for (int i = 0; i < 3; i++) {
        jv v;
        if (jv_str_new(rt, ps[i], ns[i], &v)) {
            jv_decref(lv);
            return JE;
        }
        l->v[l->n++] = v;
    }
    *out = lv;
    return 0;
}

static int str_join(jrt *rt, jv self, jv iterable, jv *out)
{
    jv items;
    if (py_iter_list(rt, iterable, &items)) return JE;
    const jlist *l = jv_l(items);
    const jstr *sep = jv_s(self);
    jbuf b = {0};
    int rc = 0;
    for (size_t i = 0; i < l->n && !rc; i++) {
        if (l->v[i].kind != JV_STR) {
            rc = jfail(rt, "sequence item %zu: expected str instance, %s found", i, py_typename(l->v[i]));
            break;
        }
        if (i) rc = jb_put(rt, &b, sep->s, sep->len);
        if (!rc) rc = jb_put(rt, &b, jv_s(l->v[i])->s, jv_s(l->v[i])->len);
    }
    jv_decref(items);
    if (rc) {
        jb_free(&b);
        return JE;
    }
    return jv_str_buf(rt, &b, out);
}

/* str methods */
static int call_str(jrt *rt, const jfunc *f, const jargs *a, jv *out)
{
    jv self = f->self, p[4];
    const jstr *s = jv_s(self);
    static const char *const N_AFFIX[] = {"prefix", "start", "end"};
    static const char *const N_SPLIT[] = {"sep", "maxsplit"};
    static const char *const N_CHARS[] = {"chars"};
    static const char *const N_REPL[] = {"old", "new", "count"};
    static const char *const N_FIND[] = {"sub", "start", "end"};
    static const char *const N_ONE[] = {"x"};
    static const char *const N_KEEP[] = {"keepends"};
    static const char *const N_PAD[] = {"width", "fillchar"};
    int64_t i1 = 0, i2 = 0;
    switch (f->id) {
    case JM_STARTSWITH:
    case JM_ENDSWITH: {
        if (a->nkw) return jfail(rt, "%s() takes no keyword arguments", f->name);
        if (jargs_bind(rt, f->name, a, N_AFFIX, 3, 1, p)) return JE;
        int r;
        if (affix(rt, f, self, p[0], p[1], p[2], &r)) return JE;
        *out = jv_bool(r);
        return 0;
    }
    case JM_SPLIT:
    case JM_RSPLIT:
        if (jargs_bind(rt, f->name, a, N_SPLIT, 2, 0, p) || opt_int(rt, f->name, p[1], -1, &i1)) return JE;
        return py_str_split(rt, self, p[0], i1, f->id == JM_RSPLIT, out);
    case JM_STRIP:
    case JM_LSTRIP:
    case JM_RSTRIP:
        if (jargs_bind(rt, f->name, a, N_CHARS, 1, 0, p)) return JE;
        return py_str_strip(rt, self, p[0], f->id != JM_RSTRIP, f->id != JM_LSTRIP, out);
    case JM_UPPER: return py_str_case(rt, self, JCASE_UPPER, out);
    case JM_LOWER:
    case JM_CASEFOLD: return py_str_case(rt, self, JCASE_LOWER, out);
    case JM_TITLE: return py_str_case(rt, self, JCASE_TITLE, out);
    case JM_CAPITALIZE: return py_str_case(rt, self, JCASE_CAPITALIZE, out);
    case JM_SWAPCASE: return py_str_case(rt, self, JCASE_SWAP, out);
    case JM_REPLACE:
        if (jargs_bind(rt, f->name, a, N_REPL, 3, 2, p) || want_str(rt, "replace", p[0]) ||
            want_str(rt, "replace", p[1]) || opt_int(rt, f->name, p[2], -1, &i1))
            return JE;
        return py_str_replace(rt, self, p[0], p[1], i1, out);
    case JM_FIND:
    case JM_RFIND:
    case JM_INDEX:
    case JM_RINDEX:
    case JM_COUNT: {
        if (jargs_bind(rt, f->name, a, N_FIND, 3, 1, p) || want_str(rt, f->name, p[0]) ||
            opt_int(rt, f->name, p[1], 0, &i1) || opt_int(rt, f->name, p[2], (int64_t)s->ncp, &i2))
            return JE;
        if (f->id == JM_COUNT) {
            *out = jv_int(py_str_count(s, jv_s(p[0]), i1, i2));
            return 0;
        }
        int64_t r = py_str_find(s, jv_s(p[0]), i1, i2, f->id == JM_RFIND || f->id == JM_RINDEX);
        if (r < 0 && (f->id == JM_INDEX || f->id == JM_RINDEX)) return jfail(rt, "substring not found");
        *out = jv_int(r);
        return 0;
    }
    case JM_JOIN:
        if (jargs_bind(rt, f->name, a, N_ONE, 1, 1, p)) return JE;
        return str_join(rt, self, p[0], out);
    case JM_SPLITLINES:
        if (jargs_bind(rt, f->name, a, N_KEEP, 1, 0, p)) return JE;
        return py_str_splitlines(rt, self, py_truthy(p[0]), out);
    case JM_ISDIGIT: case JM_ISALPHA: case JM_ISALNUM: case JM_ISSPACE: case JM_ISLOWER:
    case JM_ISUPPER: case JM_ISNUMERIC: case JM_ISDECIMAL: case JM_ISTITLE:
        if (a->npos || a->nkw) return jfail(rt, "%s() takes no arguments", f->name);
        *out = jv_bool(str_pred(s, f->id));
        return 0;
    case JM_FORMAT: return py_str_format(rt, self, a, out);
    case JM_CENTER:
    case JM_LJUST:
    case JM_RJUST:
        if (jargs_bind(rt, f->name, a, N_PAD, 2, 1, p) || opt_int(rt, f->name, p[0], 0, &i1)) return JE;
        return pad_str(rt, s, i1, p[1], f->id == JM_CENTER ? 'c' : f->id == JM_LJUST ? 'l' : 'r', out);
    case JM_ZFILL: {
        if (jargs_bind(rt, f->name, a, N_PAD, 1, 1, p) || opt_int(rt, f->name, p[0], 0, &i1)) return JE;
        if (i1 <= (int64_t)s->ncp) return jv_str_new(rt, s->s, s->len, out);
        if ((uint64_t)i1 > rt->lim.max_output) return jlimit(rt, "padding exceeds the output limit");
        jbuf b = {0};
        size_t k = 0;
        int rc = 0;
        if (s->len && (s->s[0] == '+' || s->s[0] == '-')) {
            rc = jb_put(rt, &b, s->s, 1);
            k = 1;
        }
        for (int64_t z = (int64_t)s->ncp; z < i1 && !rc; z++) rc = jb_putc(rt, &b, '0');
        if (!rc) rc = jb_put(rt, &b, s->s + k, s->len - k);
        if (rc) {
            jb_free(&b);
            return JE;
        }
        return jv_str_buf(rt, &b, out);
    }
    case JM_REMOVEPREFIX:
    case JM_REMOVESUFFIX: {
        if (jargs_bind(rt, f->name, a, N_ONE, 1, 1, p) || want_str(rt, f->name, p[0])) return JE;
        const jstr *x = jv_s(p[0]);
        if (x->len <= s->len) {
            if (f->id == JM_REMOVEPREFIX && memcmp(s->s, x->s, x->len) == 0)
                return jv_str_new(rt, s->s + x->len, s->len - x->len, out);
            if (f->id == JM_REMOVESUFFIX && x->len && memcmp(s->s + s->len - x->len, x->s, x->len) == 0)
                return jv_str_new(rt, s->s, s->len - x->len, out);
        }
        return jv_str_new(rt, s->s, s->len, out);
    }
    case JM_EXPANDTABS: { /* tabs to spaces up to the next multiple of tabsize; columns restart at \n \r */
        static const char *const N_TAB[] = {"tabsize"};
        if (jargs_bind(rt, f->name, a, N_TAB, 1, 0, p) || opt_int(rt, f->name, p[0], 8, &i1)) return JE;
        jbuf b = {0};
        int64_t col = 0;
        int rc = 0;
        size_t i = 0;
        while (i < s->len && !rc) {
            size_t st = i;
            uint32_t c = u8_next(s->s, s->len, &i);
            if (c == '\t') {
                if (i1 > 0) {
                    int64_t k = i1 - col % i1;
                    if ((uint64_t)k > rt->lim.max_output) rc = jlimit(rt, "expandtabs exceeds the output limit");
                    for (int64_t z = 0; z < k && !rc; z++) rc = jb_putc(rt, &b, ' ');
                    col += k;
                }
                continue;
            }
            rc = jb_put(rt, &b, s->s + st, i - st);
            col = (c == '\n' || c == '\r') ? 0 : col + 1;
        }
        if (rc) {
            jb_free(&b);
            return JE;
        }
        return jv_str_buf(rt, &b, out);
    }
    case JM_PARTITION:
    case JM_RPARTITION:
        if (jargs_bind(rt, f->name, a, N_ONE, 1, 1, p)) return JE;
        return partition(rt, self, p[0], f->id == JM_RPARTITION, out);
    }
    return jfail(rt, "unsupported method str.%s()", f->name);
}

static int list_of_pairs(jrt *rt, const jdict *d, int what, jv *out)
{
    jlist *l = jlist_new(rt, JV_LIST, d->n);
    if (!l) return JE;
    jv lv = jv_obj(JV_LIST, l);
    for (size_t i = 0; i < d->n; i++) {
        if (what == JM_KEYS) l->v[l->n++] = jv_ref(d->k[i]);
        else if (what == JM_VALUES) l->v[l->n++] = jv_ref(d->v[i]);
        else {
            jlist *t = jlist_new(rt, JV_TUPLE, 2);
            if (!t) {
                jv_decref(lv);
                return JE;
            }
            t->v[0] = jv_ref(d->k[i]);
            t->v[1] = jv_ref(d->v[i]);
            t->n = 2;
            if (jlist_set_depth(rt, t)) {
                jv_decref(jv_obj(JV_TUPLE, t));
                jv_decref(lv);
                return JE;
            }
            l->v[l->n++] = jv_obj(JV_TUPLE, t);
        }
    }
    if (jlist_set_depth(rt, l)) {
        jv_decref(lv);
        return JE;
    }
    *out = lv;
    return 0;
}

int py_dict_items(jrt *rt, jv d, jv *out) { return list_of_pairs(rt, jv_d(d), JM_ITEMS, out); }

static int call_dict(jrt *rt, const jfunc *f, const jargs *a, jv *out)
{
    const jdict *d = jv_d(f->self);
    jv p[2];
    static const char *const N_GET[] = {"key", "default"};
    switch (f->id) {
    case JM_GET: {
        if (a->nkw) return jfail(rt, "get() takes no keyword arguments");
        if (jargs_bind(rt, "get", a, N_GET, 2, 1, p)) return JE;
        size_t pos;
        int r = jdict_find(rt, d, p[0], &pos);
        if (r < 0) return JE;
        if (r) *out = jv_ref(d->v[pos]);
        else *out = p[1].kind == JV_MISSING ? jv_none() : jv_ref(p[1]);
        return 0;
    }
    case JM_ITEMS:
    case JM_KEYS:
    case JM_VALUES:
        if (a->npos || a->nkw) return jfail(rt, "%s() takes no arguments", f->name);
        return list_of_pairs(rt, d, f->id, out);
    case JM_DCOPY: {
        jdict *c = jdict_new(rt, JV_DICT);
        if (!c) return JE;
        jv cv = jv_obj(JV_DICT, c);
        for (size_t i = 0; i < d->n; i++)
            if (jdict_set(rt, c, jv_ref(d->k[i]), jv_ref(d->v[i]))) {
                jv_decref(cv);
                return JE;
            }
        *out = cv;
        return 0;
    }
    }
    return jfail(rt, "unsupported method dict.%s()", f->name);
}

static int call_list(jrt *rt, const jfunc *f, const jargs *a, jv *out)
{
    const jlist *l = jv_l(f->self);
    if (f->id == JM_LCOPY) return py_slice(rt, f->self, jv_missing(), jv_missing(), jv_missing(), out);
    if (a->npos < 1 || a->nkw) return jfail(rt, "%s() takes at least 1 positional argument", f->name);
    int64_t k = 0;
    for (size_t i = 0; i < l->n; i++)
        if (py_eq(l->v[i], a->pos[0])) {
            if (f->id == JM_LINDEX) {
                *out = jv_int((int64_t)i);
                return 0;
            }
            k++;
        }
    if (f->id == JM_LINDEX) {
        jbuf b = {0};
        py_repr(NULL, a->pos[0], &b);
        jfail(rt, "%s is not in %s", b.p ? b.p : "", py_typename(f->self));
        jb_free(&b);
        return JE;
    }
    *out = jv_int(k);
    return 0;
}

/* ------------------------------------------------------------------ globals */

static int g_range(jrt *rt, const jargs *a, jv *out)
{
    if (a->nkw) return jfail(rt, "range() takes no keyword arguments");
    if (a->npos < 1 || a->npos > 3) return jfail(rt, "range expected 1 to 3 arguments, got %d", a->npos);
    int64_t v[3];
    for (int i = 0; i < a->npos; i++)
        if (a->pos[i].kind == JV_INT) v[i] = a->pos[i].u.i;
        else if (a->pos[i].kind == JV_BOOL) v[i] = a->pos[i].u.b;
        else return jfail(rt, "'%s' object cannot be interpreted as an integer", py_typename(a->pos[i]));
    int64_t start = 0, stop, stp = 1;
    if (a->npos == 1) stop = v[0];
    else {
        start = v[0];
        stop = v[1];
        if (a->npos == 3) stp = v[2];
    }
    if (stp == 0) return jfail(rt, "range() arg 3 must not be zero");
    int64_t n = 0;
    if (stp > 0 && start < stop) n = (int64_t)(((__int128)stop - start - 1) / stp + 1);
    else if (stp < 0 && start > stop) n = (int64_t)(((__int128)start - stop - 1) / (-(__int128)stp) + 1);
    if (n > 100000) return jfail(rt, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    jlist *l = jlist_new(rt, JV_LIST, (size_t)n);
    if (!l) return JE;
    for (int64_t i = 0; i < n; i++) l->v[l->n++] = jv_int(start + i * stp);
    l->is_range = 1;
    l->r_start = start;
    l->r_stop = stop;
    l->r_step = stp;
    *out = jv_obj(JV_LIST, l);
    return 0;
}

/* dict(...) / namespace(...): a mapping or iterable of pairs, then keyword arguments */
static int g_dict(jrt *rt, const jargs *a, int kind, jv *out)
{
    if (a->npos > 1) return jfail(rt, "%s expected at most 1 argument, got %d", kind == JV_NS ? "namespace" : "dict", a->npos);
    jdict *d = jdict_new(rt, kind);
    if (!d) return JE;
    jv dv = jv_obj(kind, d);
    if (a->npos == 1) {
        jv src = a->pos[0];
        if (src.kind == JV_DICT || src.kind == JV_NS) {
            const jdict *s = jv_d(src);
            for (size_t i = 0; i < s->n; i++)
                if (jdict_set(rt, d, jv_ref(s->k[i]), jv_ref(s->v[i]))) goto fail;
        } else {
            jv items;
            if (py_iter_list(rt, src, &items)) goto fail;
            const jlist *l = jv_l(items);
            for (size_t i = 0; i < l->n; i++) {
                jv e = l->v[i];
                if (!jv_isseq(e) || jv_l(e)->n != 2) {
                    jfail(rt, "dictionary update sequence element #%zu has the wrong length or type", i);
                    jv_decref(items);
                    goto fail;
                }
                if (jdict_set(rt, d, jv_ref(jv_l(e)->v[0]), jv_ref(jv_l(e)->v[1]))) {
                    jv_decref(items);
                    goto fail;
                }
            }
            jv_decref(items);
        }
    }
    for (int k = 0; k < a->nkw; k++) {
        jv key;
        if (jv_str_new(rt, a->kwn[k], strlen(a->kwn[k]), &key)) goto fail;
        if (jdict_set(rt, d, key, jv_ref(a->kwv[k]))) goto fail;
    }
    if (kind == JV_NS) { /* remembered so that the end of the render can break cycles */
        if (rt->nnss == rt->capnss) {
            size_t cap = rt->capnss ? rt->capnss * 2 : 8;
            jv *p = realloc(rt->nss, cap * sizeof *p);
            if (!p) {
                jlimit(rt, "out of memory (namespaces)");
                goto fail;
            }
            rt->nss = p;
            rt->capnss = cap;
        }
        rt->nss[rt->nnss++] = jv_ref(dv);
    }
    *out = dv;
    return 0;
fail:
    jv_decref(dv);
    return JE;
}

static int g_strftime(jrt *rt, const jargs *a, jv *out)
{
    if (a->npos != 1 || a->nkw) return jfail(rt, "strftime_now() takes exactly one argument");
    if (a->pos[0].kind != JV_STR)
        return jfail(rt, "strftime() argument 1 must be str, not %s", py_typename(a->pos[0]));
    struct tm tmv;
    memset(&tmv, 0, sizeof tmv);
    long usec = 0;
    if (rt->date) {
        int y, m, d;
        if (sscanf(rt->date, "%d-%d-%d", &y, &m, &d) != 3) return jfail(rt, "bad pinned date '%s'", rt->date);
        tmv.tm_year = y - 1900;
        tmv.tm_mon = m - 1;
        tmv.tm_mday = d;
        tmv.tm_isdst = -1;
        mktime(&tmv); /* fills in the weekday and day of the year */
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        localtime_r(&ts.tv_sec, &tmv);
        usec = ts.tv_nsec / 1000;
    }
    /* Python handles %f (microseconds) itself; the rest goes to the C library */
    const jstr *fmt = jv_s(a->pos[0]);
    jbuf f = {0};
    for (size_t i = 0; i < fmt->len; i++) {
        int rc;
        if (fmt->s[i] == '%' && i + 1 < fmt->len && fmt->s[i + 1] == 'f') {
            rc = jb_printf(rt, &f, "%06ld", usec);
            i++;
        } else if (fmt->s[i] == '%' && i + 1 < fmt->len) {
            rc = jb_put(rt, &f, fmt->s + i, 2);
            i++;
        } else {
            rc = jb_putc(rt, &f, fmt->s[i]);
        }
        if (rc) {
            jb_free(&f);
            return JE;
        }
    }
    if (!f.p) return jv_str_lit(rt, "", out);
    size_t cap = 256 + f.n * 8;
    for (;;) {
        char *buf = malloc(cap);
        if (!buf) {
            jb_free(&f);
            return jlimit(rt, "out of memory");
        }
        size_t k = strftime(buf, cap, f.p, &tmv);
        if (k > 0 || cap > 65536) {
            int rc = jv_str_new(rt, buf, k, out);
            free(buf);
            jb_free(&f);
            return rc;
        }
        free(buf);
        cap *= 4;
    }
}

/* ------------------------------------------------------------------ calls */

int jfunc_call(jrt *rt, const jfunc *f, const jargs *a, jv *out)
{
    if (f->id == JM_UNSUPPORTED)
        return jfail(rt, "method %s.%s() is not supported", py_typename(f->self), f->name);
    if (f->id >= JM_STARTSWITH && f->id < JM_GET) return call_str(rt, f, a, out);
    if (f->id >= JM_GET && f->id < JM_LINDEX) return call_dict(rt, f, a, out);
    if (f->id >= JM_LINDEX && f->id < JM_CYCLE) return call_list(rt, f, a, out);
    switch (f->id) {
    case JF_RANGE: return g_range(rt, a, out);
    case JF_DICT: return g_dict(rt, a, JV_DICT, out);
    case JF_NAMESPACE: return g_dict(rt, a, JV_NS, out);
    case JF_RAISE: {
        if (a->npos < 1) return jfail(rt, "raise_exception() missing the message");
        jbuf b = {0};
        if (py_str(rt, a->pos[0], &b)) {
            jb_free(&b);
            return JE;
        }
        jraise(rt, b.p ? b.p : "", b.n);
        jb_free(&b);
        return JE;
    }
    case JF_STRFTIME: return g_strftime(rt, a, out);
    case JF_LIPSUM: return jfail(rt, "lipsum() is not supported");
    case JF_JOINER: {
        static const char *const N[] = {"sep"};
        jv p[1];
        if (jargs_bind(rt, "joiner", a, N, 1, 0, p)) return JE;
        jjoiner *j = jobj_new(rt, JV_JOINER, sizeof(jjoiner));
        if (!j) return JE;
        j->items = jv_missing();
        if (p[0].kind == JV_MISSING) {
            if (jv_str_lit(rt, ", ", &j->sep)) {
                jv_decref(jv_obj(JV_JOINER, j));
                return JE;
            }
        } else {
            j->sep = jv_ref(p[0]);
        }
        *out = jv_obj(JV_JOINER, j);
        return 0;
    }
    case JF_CYCLER: {
        if (a->npos < 1) return jfail(rt, "at least one item has to be provided");
        jlist *l = jlist_new(rt, JV_TUPLE, (size_t)a->npos);
        if (!l) return JE;
        for (int i = 0; i < a->npos; i++) l->v[l->n++] = jv_ref(a->pos[i]);
        jjoiner *c = jobj_new(rt, JV_CYCLER, sizeof(jjoiner));
        if (!c || jlist_set_depth(rt, l)) {
            jv_decref(jv_obj(JV_TUPLE, l));
            if (c) jv_decref(jv_obj(JV_CYCLER, c));
            return JE;
        }
        c->items = jv_obj(JV_TUPLE, l);
        c->sep = jv_missing();
        *out = jv_obj(JV_CYCLER, c);
        return 0;
    }
    case JM_CNEXT: {
        jjoiner *c = (jjoiner *)f->self.u.o;
        *out = jv_ref(jv_l(c->items)->v[c->pos]);
        c->pos = (c->pos + 1) % jv_l(c->items)->n;
        return 0;
    }
    case JM_CRESET:
        ((jjoiner *)f->self.u.o)->pos = 0;
        *out = jv_none();
        return 0;
    case JM_CYCLE: {
        const jloop *L = (const jloop *)f->self.u.o;
        if (a->npos < 1) return jfail(rt, "no items for cycling given");
        *out = jv_ref(a->pos[L->i % (size_t)a->npos]);
        return 0;
    }
    case JM_CHANGED: {
        jloop *L = (jloop *)f->self.u.o;
        jlist *l = jlist_new(rt, JV_TUPLE, (size_t)a->npos);
        if (!l) return JE;
        for (int i = 0; i < a->npos; i++) l->v[l->n++] = jv_ref(a->pos[i]);
        jv t = jv_obj(JV_TUPLE, l);
        if (jlist_set_depth(rt, l)) {
            jv_decref(t);
            return JE;
        }
        if (L->changed_last.kind != JV_MISSING && py_eq(L->changed_last, t)) {
            jv_decref(t);
            *out = jv_bool(0);
            return 0;
        }
        jv_decref(L->changed_last);
        L->changed_last = t;
        *out = jv_bool(1);
        return 0;
    }
    }
    return jfail(rt, "internal error: unknown function %d", f->id);
}
