/* text/jinja_value.c: template values with Python semantics.
 *
 * Reference counting, the output buffer, errors, and what Python does with a value:
 * truthiness, ==, ordering, hash, len(), str(), repr() (including float repr's shortest
 * round-trip digits), json.dumps, and the conversion of a cJSON tree into values. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text/jinja-impl.h"

#define JDEPTH_MAX 1000 /* nesting of containers (Python's recursion limit is about this) */

/* ------------------------------------------------------------------ errors */

static int jverr(jrt *rt, int code, const char *fmt, va_list ap)
{
    if (!rt) return JE;
    if (rt->failed) return JE; /* keep the first error */
    char msg[TM_ERR_MSG];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (rt->line > 0) tm_errf(rt->err, code, "line %d: %s", rt->line, msg);
    else tm_errf(rt->err, code, "%s", msg);
    rt->failed = 1;
    return JE;
}

int jfail(jrt *rt, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    jverr(rt, TM_E_TEMPLATE, fmt, ap);
    va_end(ap);
    return JE;
}

int jlimit(jrt *rt, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    jverr(rt, TM_E_LIMIT, fmt, ap);
    va_end(ap);
    return JE;
}

int jraise(jrt *rt, const char *msg, size_t n)
{
    if (rt->failed) return JE;
    if (n > TM_ERR_MSG - 1) n = TM_ERR_MSG - 1;
    if (rt->err) {
        rt->err->code = TM_E_TEMPLATE;
        memcpy(rt->err->msg, msg, n);
        rt->err->msg[n] = '\0';
    }
    rt->failed = 1;
    return JE;
}

/* ------------------------------------------------------------------ objects */

static int jcharge(jrt *rt, jobj *o, size_t add)
{
    if (!rt || !o->rt) return 0;
    if (rt->live + add > rt->lim.max_memory) {
        jlimit(rt, "memory limit exceeded (%zu bytes of live values)", rt->lim.max_memory);
        return JE;
    }
    rt->live += add;
    o->acct += add;
    return 0;
}

void *jobj_new(jrt *rt, int kind, size_t size)
{
    if (rt && rt->live + size > rt->lim.max_memory) {
        jlimit(rt, "memory limit exceeded (%zu bytes of live values)", rt->lim.max_memory);
        return NULL;
    }
    jobj *o = calloc(1, size);
    if (!o) {
        if (rt) jlimit(rt, "out of memory allocating %zu bytes", size);
        return NULL;
    }
    o->kind = (uint8_t)kind;
    if (rt) {
        o->rc = 1;
        o->rt = rt;
        o->acct = size;
        rt->live += size;
    } else {
        o->rc = JOBJ_IMMORTAL;
    }
    return o;
}

static void jobj_free(jobj *o)
{
    switch (o->kind) {
    case JV_LIST:
    case JV_TUPLE:
    case JV_GEN: {
        jlist *l = (jlist *)o;
        for (size_t i = 0; i < l->n; i++) jv_decref(l->v[i]);
        free(l->v);
        break;
    }
    case JV_DICT:
    case JV_NS: {
        jdict *d = (jdict *)o;
        for (size_t i = 0; i < d->n; i++) {
            jv_decref(d->k[i]);
            jv_decref(d->v[i]);
        }
        free(d->k);
        free(d->v);
        free(d->idx);
        break;
    }
    case JV_UNDEF: {
        jundef *u = (jundef *)o;
        if (u->msg) jv_decref(jv_obj(JV_STR, u->msg));
        break;
    }
    case JV_FUNC: jv_decref(((jfunc *)o)->self); break;
    case JV_LOOP: {
        jloop *l = (jloop *)o;
        jv_decref(l->items);
        jv_decref(l->changed_last);
        break;
    }
    case JV_CYCLER:
    case JV_JOINER: {
        jjoiner *j = (jjoiner *)o;
        jv_decref(j->sep);
        jv_decref(j->items);
        break;
    }
    default: break;
    }
    if (o->rt) o->rt->live -= o->acct;
    free(o);
}

void jv_incref(jv v)
{
    if (jv_isobj(v) && v.u.o->rc != JOBJ_IMMORTAL) v.u.o->rc++;
}

void jv_decref(jv v)
{
    if (!jv_isobj(v)) return;
    jobj *o = v.u.o;
    if (o->rc == JOBJ_IMMORTAL) return;
    if (--o->rc == 0) jobj_free(o);
}

/* ------------------------------------------------------------------ buffers */

void jb_free(jbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

int jb_put(jrt *rt, jbuf *b, const char *s, size_t n)
{
    if (rt && b->n + n > rt->lim.max_output)
        return jlimit(rt, "rendered text exceeds the output limit (%zu bytes)", rt->lim.max_output);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return rt ? jlimit(rt, "out of memory (%zu bytes of text)", cap) : JE;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

int jb_puts(jrt *rt, jbuf *b, const char *s) { return jb_put(rt, b, s, strlen(s)); }
int jb_putc(jrt *rt, jbuf *b, char c) { return jb_put(rt, b, &c, 1); }

int jb_printf(jrt *rt, jbuf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0) return JE;
    if ((size_t)k >= sizeof tmp) k = sizeof tmp - 1;
    return jb_put(rt, b, tmp, (size_t)k);
}

/* ------------------------------------------------------------------ strings */

int jv_str_new(jrt *rt, const char *s, size_t n, jv *out)
{
    if (rt && n > rt->lim.max_output)
        return jlimit(rt, "string of %zu bytes exceeds the limit (%zu bytes)", n, rt->lim.max_output);
    jstr *p = jobj_new(rt, JV_STR, sizeof(jstr) + n + 1);
    if (!p) return JE;
    if (n) memcpy(p->s, s, n);
    p->s[n] = '\0';
    p->len = n;
    p->ncp = u8_count(p->s, n);
    *out = jv_obj(JV_STR, p);
    return 0;
}

int jv_str_buf(jrt *rt, jbuf *b, jv *out)
{
    int rc = jv_str_new(rt, b->p ? b->p : "", b->n, out);
    jb_free(b);
    return rc;
}

int jv_str_cat(jrt *rt, const char *a, size_t na, const char *b, size_t nb, jv *out)
{
    if (rt && na + nb > rt->lim.max_output)
        return jlimit(rt, "string of %zu bytes exceeds the limit (%zu bytes)", na + nb, rt->lim.max_output);
    jstr *p = jobj_new(rt, JV_STR, sizeof(jstr) + na + nb + 1);
    if (!p) return JE;
    memcpy(p->s, a, na);
    memcpy(p->s + na, b, nb);
    p->s[na + nb] = '\0';
    p->len = na + nb;
    p->ncp = u8_count(p->s, p->len);
    *out = jv_obj(JV_STR, p);
    return 0;
}

/* ------------------------------------------------------------------ lists */

static int jv_depth(jv v)
{
    switch (v.kind) {
    case JV_LIST:
    case JV_TUPLE:
    case JV_GEN: return jv_l(v)->depth;
    case JV_DICT:
    case JV_NS: return jv_d(v)->depth;
    default: return 0;
    }
}

jlist *jlist_new(jrt *rt, int kind, size_t cap)
{
    jlist *l = jobj_new(rt, kind, sizeof(jlist));
    if (!l) return NULL;
    l->depth = 1;
    if (cap) {
        if (rt && cap > rt->lim.max_memory / sizeof(jv)) {
            jlimit(rt, "list of %zu items exceeds the memory limit", cap);
            jobj_free(&l->h);
            return NULL;
        }
        if (jcharge(rt, &l->h, cap * sizeof(jv))) {
            jobj_free(&l->h);
            return NULL;
        }
        l->v = malloc(cap * sizeof(jv));
        if (!l->v) {
            jlimit(rt, "out of memory (list of %zu items)", cap);
            jobj_free(&l->h);
            return NULL;
        }
        l->cap = cap;
    }
    return l;
}

int jlist_push(jrt *rt, jlist *l, jv v)
{
    int d = jv_depth(v) + 1;
    if (d > JDEPTH_MAX) {
        jv_decref(v);
        return jlimit(rt, "values nested more than %d deep", JDEPTH_MAX);
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        if (jcharge(rt, &l->h, (cap - l->cap) * sizeof(jv))) {
            jv_decref(v);
            return JE;
        }
        jv *p = realloc(l->v, cap * sizeof(jv));
        if (!p) {
            jv_decref(v);
            return jlimit(rt, "out of memory (list of %zu items)", cap);
        }
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = v;
    if (d > l->depth) l->depth = d;
    return 0;
}

int jlist_set_depth(jrt *rt, jlist *l)
{
    int d = 1;
    for (size_t i = 0; i < l->n; i++) {
        int c = jv_depth(l->v[i]) + 1;
        if (c > d) d = c;
    }
    l->depth = d;
    if (d > JDEPTH_MAX) return jlimit(rt, "values nested more than %d deep", JDEPTH_MAX);
    return 0;
}

/* ------------------------------------------------------------------ dicts */

jdict *jdict_new(jrt *rt, int kind)
{
    jdict *d = jobj_new(rt, kind, sizeof(jdict));
    if (d) d->depth = 1;
    return d;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

int py_hash(jrt *rt, jv v, uint64_t *out)
{
    switch (v.kind) {
    case JV_NONE: *out = 0x9e3779b97f4a7c15ULL; return 0;
    case JV_BOOL: *out = mix64((uint64_t)v.u.b); return 0;
    case JV_INT: *out = mix64((uint64_t)v.u.i); return 0;
    case JV_FLOAT: {
        double f = v.u.f;
        if (f == floor(f) && fabs(f) < 9.2e18) {
            *out = mix64((uint64_t)(int64_t)f);
        } else {
            uint64_t bits;
            memcpy(&bits, &f, sizeof bits);
            *out = mix64(bits ^ 0x5555);
        }
        return 0;
    }
    case JV_STR: {
        const jstr *s = jv_s(v);
        uint64_t h = 0xcbf29ce484222325ULL;
        for (size_t i = 0; i < s->len; i++) h = (h ^ (uint8_t)s->s[i]) * 0x100000001b3ULL;
        *out = h;
        return 0;
    }
    case JV_TUPLE: {
        const jlist *l = jv_l(v);
        uint64_t h = 0x345678;
        for (size_t i = 0; i < l->n; i++) {
            uint64_t e;
            if (py_hash(rt, l->v[i], &e)) return JE;
            h = mix64(h ^ e) + i;
        }
        *out = h;
        return 0;
    }
    case JV_MISSING:
    case JV_UNDEF: *out = 0x5bd1e995ULL; return 0; /* every Undefined is equal to every other */
    case JV_NS:
    case JV_MACRO:
    case JV_FUNC:
    case JV_LOOP:
    case JV_CYCLER:
    case JV_JOINER: *out = mix64((uint64_t)(uintptr_t)v.u.o); return 0;
    default: return jfail(rt, "unhashable type: '%s'", py_typename(v));
    }
}

static int jdict_reindex(jrt *rt, jdict *d, size_t icap)
{
    uint32_t *idx = calloc(icap, sizeof *idx);
    if (!idx) return jlimit(rt, "out of memory (dict index)");
    for (size_t i = 0; i < d->n; i++) {
        uint64_t h;
        if (py_hash(rt, d->k[i], &h)) {
            free(idx);
            return JE;
        }
        size_t j = h & (icap - 1);
        while (idx[j]) j = (j + 1) & (icap - 1);
        idx[j] = (uint32_t)(i + 1);
    }
    free(d->idx);
    d->idx = idx;
    d->icap = icap;
    return 0;
}

int jdict_find(jrt *rt, const jdict *d, jv k, size_t *pos)
{
    uint64_t h;
    if (py_hash(rt, k, &h)) return JE;
    if (d->idx) {
        size_t j = h & (d->icap - 1);
        while (d->idx[j]) {
            size_t e = d->idx[j] - 1;
            if (py_eq(d->k[e], k)) {
                *pos = e;
                return 1;
            }
            j = (j + 1) & (d->icap - 1);
        }
        return 0;
    }
    for (size_t i = 0; i < d->n; i++)
        if (py_eq(d->k[i], k)) {
            *pos = i;
            return 1;
        }
    return 0;
}

int jdict_get_str(const jdict *d, const char *key, jv *out)
{
    size_t n = strlen(key);
    for (size_t i = 0; i < d->n; i++) {
        if (d->k[i].kind != JV_STR) continue;
        const jstr *s = jv_s(d->k[i]);
        if (s->len == n && memcmp(s->s, key, n) == 0) {
            *out = d->v[i];
            return 1;
        }
    }
    return 0;
}

int jdict_set(jrt *rt, jdict *d, jv k, jv v)
{
    size_t pos;
    int f = jdict_find(rt, d, k, &pos);
    if (f < 0) goto fail;
    int dep = jv_depth(v) + 1;
    if (jv_depth(k) + 1 > dep) dep = jv_depth(k) + 1;
    if (dep > JDEPTH_MAX) {
        jlimit(rt, "values nested more than %d deep", JDEPTH_MAX);
        goto fail;
    }
    if (dep > d->depth) d->depth = dep;
    if (f == 1) {
        jv_decref(d->v[pos]);
        d->v[pos] = v;
        jv_decref(k);
        return 0;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        if (jcharge(rt, &d->h, (cap - d->cap) * 2 * sizeof(jv))) goto fail;
        jv *nk = realloc(d->k, cap * sizeof(jv));
        if (!nk) goto oom;
        d->k = nk;
        jv *nv = realloc(d->v, cap * sizeof(jv));
        if (!nv) goto oom;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
    if (d->n > 8 && d->n * 2 > d->icap) {
        size_t icap = 32;
        while (icap < d->n * 4) icap *= 2;
        return jdict_reindex(rt, d, icap);
    }
    if (d->idx) { /* add the new entry to the index */
        uint64_t h;
        py_hash(rt, k, &h);
        size_t j = h & (d->icap - 1);
        while (d->idx[j]) j = (j + 1) & (d->icap - 1);
        d->idx[j] = (uint32_t)d->n;
    }
    return 0;
oom:
    jlimit(rt, "out of memory (dict)");
fail:
    jv_decref(k);
    jv_decref(v);
    return JE;
}

/* ------------------------------------------------------------------ undefined */

int jv_undef_msg(jrt *rt, jv *out, const char *fmt, ...)
{
    char msg[TM_ERR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    jundef *u = jobj_new(rt, JV_UNDEF, sizeof(jundef));
    if (!u) return JE;
    jv s;
    if (jv_str_new(rt, msg, strlen(msg), &s)) {
        jobj_free(&u->h);
        return JE;
    }
    u->msg = (jstr *)s.u.o;
    *out = jv_obj(JV_UNDEF, u);
    return 0;
}

static void repr_cstr(jbuf *b, const char *s, size_t n)
{
    jv tmp;
    jstr *t = malloc(sizeof(jstr) + n + 1);
    if (!t) return;
    memset(t, 0, sizeof *t);
    t->h.kind = JV_STR;
    t->h.rc = JOBJ_IMMORTAL;
    memcpy(t->s, s, n);
    t->s[n] = '\0';
    t->len = n;
    t->ncp = u8_count(s, n);
    tmp = jv_obj(JV_STR, t);
    py_repr(NULL, tmp, b);
    free(t);
}

int jv_undef_name(jrt *rt, const char *name, jv *out)
{
    return jv_undef_msg(rt, out, "'%s' is undefined", name);
}

int jv_undef_attr(jrt *rt, jv obj, const char *attr, jv *out)
{
    jbuf b = {0};
    repr_cstr(&b, attr, strlen(attr));
    int rc = jv_undef_msg(rt, out, "'%s' has no attribute %s", py_objrepr(obj), b.p ? b.p : "''");
    jb_free(&b);
    return rc;
}

int jv_undef_item(jrt *rt, jv obj, jv key, jv *out)
{
    if (key.kind == JV_STR) return jv_undef_attr(rt, obj, jv_s(key)->s, out);
    jbuf b = {0};
    py_repr(NULL, key, &b);
    int rc = jv_undef_msg(rt, out, "%s has no element %s", py_objrepr(obj), b.p ? b.p : "");
    jb_free(&b);
    return rc;
}

int jv_undef_fail(jrt *rt, jv u)
{
    if (u.kind == JV_UNDEF && u.u.o && ((jundef *)u.u.o)->msg)
        return jfail(rt, "%s", ((jundef *)u.u.o)->msg->s);
    return jfail(rt, "undefined value");
}

/* ------------------------------------------------------------------ Python semantics */

const char *py_typename(jv v)
{
    switch (v.kind) {
    case JV_MISSING:
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return jv_s(v)->markup ? "Markup" : "str";
    case JV_LIST: return jv_l(v)->is_range ? "range" : "list";
    case JV_TUPLE: return "tuple";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_MACRO: return "Macro";
    case JV_FUNC: return "builtin_function_or_method";
    case JV_LOOP: return "LoopContext";
    case JV_CYCLER: return "Cycler";
    case JV_JOINER: return "Joiner";
    case JV_GEN: return jv_l(v)->gen_iter ? "list_reverseiterator" : "generator";
    }
    return "object";
}

const char *py_objrepr(jv v)
{
    switch (v.kind) {
    case JV_NONE: return "None";
    case JV_STR: return jv_s(v)->markup ? "markupsafe.Markup object" : "str object";
    case JV_BOOL: return "bool object";
    case JV_INT: return "int object";
    case JV_FLOAT: return "float object";
    case JV_LIST: return jv_l(v)->is_range ? "range object" : "list object";
    case JV_TUPLE: return "tuple object";
    case JV_DICT: return "dict object";
    case JV_NS: return "jinja2.utils.Namespace object";
    case JV_MACRO: return "jinja2.runtime.Macro object";
    case JV_FUNC: return "builtin_function_or_method object";
    case JV_LOOP: return "jinja2.runtime.LoopContext object";
    case JV_CYCLER: return "jinja2.utils.Cycler object";
    case JV_JOINER: return "jinja2.utils.Joiner object";
    case JV_GEN: return jv_l(v)->gen_iter ? "list_reverseiterator object" : "generator object";
    default: return "jinja2.runtime.Undefined object";
    }
}

int py_truthy(jv v)
{
    switch (v.kind) {
    case JV_MISSING:
    case JV_UNDEF:
    case JV_NONE: return 0;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return jv_s(v)->len != 0;
    case JV_LIST:
    case JV_TUPLE: return jv_l(v)->n != 0;
    case JV_DICT: return jv_d(v)->n != 0;
    default: return 1;
    }
}

static double num_f(jv v)
{
    return v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : (double)v.u.b;
}

int py_eq(jv a, jv b)
{
    if (jv_isnum(a) && jv_isnum(b)) {
        if (a.kind != JV_FLOAT && b.kind != JV_FLOAT) {
            int64_t x = a.kind == JV_INT ? a.u.i : a.u.b, y = b.kind == JV_INT ? b.u.i : b.u.b;
            return x == y;
        }
        return num_f(a) == num_f(b);
    }
    if ((a.kind == JV_UNDEF || a.kind == JV_MISSING) && (b.kind == JV_UNDEF || b.kind == JV_MISSING))
        return 1;
    if (a.kind != b.kind) return 0;
    switch (a.kind) {
    case JV_NONE: return 1;
    case JV_STR: {
        const jstr *x = jv_s(a), *y = jv_s(b);
        return x->len == y->len && memcmp(x->s, y->s, x->len) == 0;
    }
    case JV_LIST:
    case JV_TUPLE: {
        const jlist *x = jv_l(a), *y = jv_l(b);
        if (x->n != y->n || x->is_range != y->is_range) return 0;
        for (size_t i = 0; i < x->n; i++)
            if (!py_eq(x->v[i], y->v[i])) return 0;
        return 1;
    }
    case JV_DICT: {
        const jdict *x = jv_d(a), *y = jv_d(b);
        if (x->n != y->n) return 0;
        for (size_t i = 0; i < x->n; i++) {
            size_t pos;
            if (jdict_find(NULL, y, x->k[i], &pos) != 1) return 0;
            if (!py_eq(x->v[i], y->v[pos])) return 0;
        }
        return 1;
    }
    default: return a.u.o == b.u.o;
    }
}

int py_cmp(jrt *rt, jv a, jv b, const char *op, int *out)
{
    if (jv_isnum(a) && jv_isnum(b)) {
        if (a.kind != JV_FLOAT && b.kind != JV_FLOAT) {
            int64_t x = a.kind == JV_INT ? a.u.i : a.u.b, y = b.kind == JV_INT ? b.u.i : b.u.b;
            *out = x < y ? -1 : x > y;
            return 0;
        }
        double x = num_f(a), y = num_f(b);
        if (x != x || y != y) { /* NaN: every ordering is false; callers see "unordered" */
            *out = 2;
            return 0;
        }
        *out = x < y ? -1 : x > y;
        return 0;
    }
    if (a.kind == JV_STR && b.kind == JV_STR) {
        const jstr *x = jv_s(a), *y = jv_s(b);
        size_t n = x->len < y->len ? x->len : y->len;
        int c = memcmp(x->s, y->s, n);
        *out = c < 0 ? -1 : c > 0 ? 1 : x->len < y->len ? -1 : x->len > y->len;
        return 0;
    }
    if ((a.kind == JV_LIST || a.kind == JV_TUPLE) && a.kind == b.kind) {
        const jlist *x = jv_l(a), *y = jv_l(b);
        for (size_t i = 0; i < x->n && i < y->n; i++) {
            if (py_eq(x->v[i], y->v[i])) continue;
            return py_cmp(rt, x->v[i], y->v[i], op, out);
        }
        *out = x->n < y->n ? -1 : x->n > y->n;
        return 0;
    }
    return jfail(rt, "'%s' not supported between instances of '%s' and '%s'", op, py_typename(a),
                 py_typename(b));
}

int py_len(jrt *rt, jv v, int64_t *out)
{
    switch (v.kind) {
    case JV_STR: *out = (int64_t)jv_s(v)->ncp; return 0;
    case JV_LIST:
    case JV_TUPLE: *out = (int64_t)jv_l(v)->n; return 0;
    case JV_DICT: *out = (int64_t)jv_d(v)->n; return 0;
    case JV_MISSING:
    case JV_UNDEF: *out = 0; return 0;
    case JV_LOOP: *out = (int64_t)jv_l(((jloop *)v.u.o)->items)->n; return 0;
    default: return jfail(rt, "object of type '%s' has no len()", py_typename(v));
    }
}

/* Python's repr(float): the shortest digits that round-trip, fixed notation for
 * 1e-4 <= |f| < 1e16, else scientific with a two-digit exponent at least. */
void py_float_repr(double f, char *buf, size_t n)
{
    if (f != f) {
        snprintf(buf, n, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(buf, n, f < 0 ? "-inf" : "inf");
        return;
    }
    if (f == 0) {
        snprintf(buf, n, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    char tmp[64];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp = [-]d[.ddd]e[+-]XX */
    char digits[32];
    int nd = 0, neg = 0;
    const char *p = tmp;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    int exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = '\0';
    int decpt = exp10 + 1;
    char out[64];
    size_t k = 0;
    if (neg) out[k++] = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out[k++] = '0';
            out[k++] = '.';
            for (int i = 0; i < -decpt; i++) out[k++] = '0';
            for (int i = 0; i < nd; i++) out[k++] = digits[i];
        } else if (decpt >= nd) {
            for (int i = 0; i < nd; i++) out[k++] = digits[i];
            for (int i = nd; i < decpt; i++) out[k++] = '0';
            out[k++] = '.';
            out[k++] = '0';
        } else {
            for (int i = 0; i < nd; i++) {
                if (i == decpt) out[k++] = '.';
                out[k++] = digits[i];
            }
        }
        out[k] = '\0';
    } else {
        out[k++] = digits[0];
        if (nd > 1) {
            out[k++] = '.';
            for (int i = 1; i < nd; i++) out[k++] = digits[i];
        }
        out[k] = '\0';
        int e = decpt - 1;
        snprintf(out + k, sizeof out - k, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
    snprintf(buf, n, "%s", out);
}

static int isprintable_cp(uint32_t c)
{
    if (c == ' ') return 1;
    if (c >= 0xDC80 && c <= 0xDCFF) return 0; /* an invalid byte kept as-is */
    utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)c);
    switch (cat) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return 0;
    default: return 1;
    }
}

static int repr_str(jrt *rt, const jstr *s, jbuf *b)
{
    int has_sq = memchr(s->s, '\'', s->len) != NULL, has_dq = memchr(s->s, '"', s->len) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    if (s->markup && jb_puts(rt, b, "Markup(")) return JE;
    if (jb_putc(rt, b, q)) return JE;
    size_t i = 0, start = 0;
    while (i < s->len) {
        size_t at = i;
        uint32_t c = u8_next(s->s, s->len, &i);
        char esc[16];
        const char *e = NULL;
        if (c == (uint32_t)q || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            esc[2] = 0;
            e = esc;
        } else if (c == '\t') e = "\\t";
        else if (c == '\n') e = "\\n";
        else if (c == '\r') e = "\\r";
        else if (c < 0x20 || c == 0x7f) {
            snprintf(esc, sizeof esc, "\\x%02x", c);
            e = esc;
        } else if (c >= 0x80 && !isprintable_cp(c)) {
            if (c >= 0xDC80 && c <= 0xDCFF) snprintf(esc, sizeof esc, "\\udc%02x", c & 0xff);
            else if (c <= 0xff) snprintf(esc, sizeof esc, "\\x%02x", c);
            else if (c <= 0xffff) snprintf(esc, sizeof esc, "\\u%04x", c);
            else snprintf(esc, sizeof esc, "\\U%08x", c);
            e = esc;
        }
        if (e) {
            if (jb_put(rt, b, s->s + start, at - start) || jb_puts(rt, b, e)) return JE;
            start = i;
        }
    }
    if (jb_put(rt, b, s->s + start, s->len - start) || jb_putc(rt, b, q)) return JE;
    if (s->markup && jb_putc(rt, b, ')')) return JE;
    return 0;
}

static int repr_any(jrt *rt, jv v, jbuf *b, int depth, int as_str);

static int repr_seq(jrt *rt, const jlist *l, int tuple, jbuf *b, int depth)
{
    if (jb_putc(rt, b, tuple ? '(' : '[')) return JE;
    for (size_t i = 0; i < l->n; i++) {
        if (i && jb_put(rt, b, ", ", 2)) return JE;
        if (repr_any(rt, l->v[i], b, depth + 1, 0)) return JE;
    }
    if (tuple && l->n == 1 && jb_putc(rt, b, ',')) return JE;
    return jb_putc(rt, b, tuple ? ')' : ']');
}

static int repr_dict(jrt *rt, const jdict *d, jbuf *b, int depth)
{
    if (jb_putc(rt, b, '{')) return JE;
    for (size_t i = 0; i < d->n; i++) {
        if (i && jb_put(rt, b, ", ", 2)) return JE;
        if (repr_any(rt, d->k[i], b, depth + 1, 0) || jb_put(rt, b, ": ", 2) ||
            repr_any(rt, d->v[i], b, depth + 1, 0))
            return JE;
    }
    return jb_putc(rt, b, '}');
}

static int repr_any(jrt *rt, jv v, jbuf *b, int depth, int as_str)
{
    if (depth > JDEPTH_MAX) return rt ? jlimit(rt, "maximum recursion depth exceeded in repr()") : JE;
    char num[64];
    switch (v.kind) {
    case JV_MISSING:
    case JV_UNDEF: return as_str ? 0 : jb_puts(rt, b, "Undefined");
    case JV_NONE: return jb_puts(rt, b, "None");
    case JV_BOOL: return jb_puts(rt, b, v.u.b ? "True" : "False");
    case JV_INT: snprintf(num, sizeof num, "%lld", (long long)v.u.i); return jb_puts(rt, b, num);
    case JV_FLOAT: py_float_repr(v.u.f, num, sizeof num); return jb_puts(rt, b, num);
    case JV_STR:
        if (as_str) return jb_put(rt, b, jv_s(v)->s, jv_s(v)->len);
        return repr_str(rt, jv_s(v), b);
    case JV_LIST:
        if (jv_l(v)->is_range) {
            const jlist *l = jv_l(v);
            if (l->r_step == 1) return jb_printf(rt, b, "range(%lld, %lld)", (long long)l->r_start, (long long)l->r_stop);
            return jb_printf(rt, b, "range(%lld, %lld, %lld)", (long long)l->r_start, (long long)l->r_stop,
                             (long long)l->r_step);
        }
        return repr_seq(rt, jv_l(v), 0, b, depth);
    case JV_TUPLE: return repr_seq(rt, jv_l(v), 1, b, depth);
    case JV_DICT: return repr_dict(rt, jv_d(v), b, depth);
    case JV_NS:
        if (jb_puts(rt, b, "<Namespace ") || repr_dict(rt, jv_d(v), b, depth)) return JE;
        return jb_putc(rt, b, '>');
    case JV_MACRO: return jb_printf(rt, b, "<Macro '%s'>", ((jmacro *)v.u.o)->name);
    case JV_FUNC: return jb_puts(rt, b, "<built-in function>");
    case JV_LOOP: {
        jloop *l = (jloop *)v.u.o;
        return jb_printf(rt, b, "<LoopContext %zu/%zu>", l->i + 1, jv_l(l->items)->n);
    }
    case JV_CYCLER: return jb_puts(rt, b, "<jinja2.utils.Cycler object>");
    case JV_JOINER: return jb_puts(rt, b, "<jinja2.utils.Joiner object>");
    case JV_GEN: /* (Python prints the object's address too) */
        return jb_puts(rt, b, jv_l(v)->gen_iter ? "<list_reverseiterator object>" : "<generator object>");
    }
    return 0;
}

int py_str(jrt *rt, jv v, jbuf *out) { return repr_any(rt, v, out, 0, 1); }
int py_repr(jrt *rt, jv v, jbuf *out) { return repr_any(rt, v, out, 0, 0); }

int py_tostr(jrt *rt, jv v, jv *out)
{
    if (v.kind == JV_STR && !jv_s(v)->markup) {
        *out = jv_ref(v);
        return 0;
    }
    jbuf b = {0};
    if (py_str(rt, v, &b)) {
        jb_free(&b);
        return JE;
    }
    return jv_str_buf(rt, &b, out);
}

/* ------------------------------------------------------------------ json.dumps */

static int json_str(jrt *rt, const char *s, size_t n, int ascii, jbuf *b)
{
    if (jb_putc(rt, b, '"')) return JE;
    size_t i = 0, start = 0;
    while (i < n) {
        size_t at = i;
        unsigned char ch = (unsigned char)s[i];
        uint32_t c;
        if (ch < 0x80) {
            c = ch;
            i++;
        } else if (ascii) {
            c = u8_next(s, n, &i);
        } else {
            i++;
            continue; /* non-ASCII stays literal */
        }
        char esc[16];
        const char *e = NULL;
        switch (c) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\n': e = "\\n"; break;
        case '\r': e = "\\r"; break;
        case '\t': e = "\\t"; break;
        case '\b': e = "\\b"; break;
        case '\f': e = "\\f"; break;
        default:
            if (c < 0x20 || (ascii && c >= 0x7f)) {
                if (c > 0xffff) {
                    uint32_t v = c - 0x10000;
                    snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
                } else {
                    snprintf(esc, sizeof esc, "\\u%04x", c);
                }
                e = esc;
            }
        }
        if (e) {
            if (jb_put(rt, b, s + start, at - start) || jb_puts(rt, b, e)) return JE;
            start = i;
        }
    }
    if (jb_put(rt, b, s + start, n - start)) return JE;
    return jb_putc(rt, b, '"');
}

static int json_float(jrt *rt, double f, jbuf *b)
{
    if (f != f) return jb_puts(rt, b, "NaN");
    if (isinf(f)) return jb_puts(rt, b, f < 0 ? "-Infinity" : "Infinity");
    char num[64];
    py_float_repr(f, num, sizeof num);
    return jb_puts(rt, b, num);
}

static int json_newline(jrt *rt, const jjson_opts *o, int level, jbuf *b)
{
    if (jb_putc(rt, b, '\n')) return JE;
    for (int i = 0; i < level; i++)
        if (jb_puts(rt, b, o->indent)) return JE;
    return 0;
}

static int json_any(jrt *rt, jv v, const jjson_opts *o, int level, jbuf *b);

/* a dict key as json.dumps converts it */
static int json_key(jrt *rt, jv k, const jjson_opts *o, jbuf *b)
{
    char num[64];
    switch (k.kind) {
    case JV_STR: return json_str(rt, jv_s(k)->s, jv_s(k)->len, o->ensure_ascii, b);
    case JV_INT: snprintf(num, sizeof num, "\"%lld\"", (long long)k.u.i); return jb_puts(rt, b, num);
    case JV_BOOL: return jb_puts(rt, b, k.u.b ? "\"true\"" : "\"false\"");
    case JV_NONE: return jb_puts(rt, b, "\"null\"");
    case JV_FLOAT: {
        jbuf t = {0};
        if (json_float(rt, k.u.f, &t)) {
            jb_free(&t);
            return JE;
        }
        int rc = json_str(rt, t.p, t.n, 0, b);
        jb_free(&t);
        return rc;
    }
    default:
        return jfail(rt, "keys must be str, int, float, bool or None, not %s", py_typename(k));
    }
}

typedef struct {
    jrt *rt;
    const jdict *d;
} keysort_ctx;

/* stable merge sort of entry indices by key, Python's sorted(d.items()) */
static int keysort(keysort_ctx *c, size_t *ix, size_t *tmp, size_t n)
{
    if (n < 2) return 0;
    size_t h = n / 2;
    if (keysort(c, ix, tmp, h) || keysort(c, ix + h, tmp, n - h)) return JE;
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        int r;
        if (py_cmp(c->rt, c->d->k[ix[j]], c->d->k[ix[i]], "<", &r)) return JE;
        tmp[k++] = r < 0 ? ix[j++] : ix[i++];
    }
    while (i < h) tmp[k++] = ix[i++];
    while (j < n) tmp[k++] = ix[j++];
    memcpy(ix, tmp, n * sizeof *ix);
    return 0;
}

static int json_any(jrt *rt, jv v, const jjson_opts *o, int level, jbuf *b)
{
    if (level > JDEPTH_MAX) return jlimit(rt, "maximum recursion depth exceeded in tojson");
    char num[64];
    switch (v.kind) {
    case JV_NONE: return jb_puts(rt, b, "null");
    case JV_BOOL: return jb_puts(rt, b, v.u.b ? "true" : "false");
    case JV_INT: snprintf(num, sizeof num, "%lld", (long long)v.u.i); return jb_puts(rt, b, num);
    case JV_FLOAT: return json_float(rt, v.u.f, b);
    case JV_STR: return json_str(rt, jv_s(v)->s, jv_s(v)->len, o->ensure_ascii, b);
    case JV_LIST:
    case JV_TUPLE: {
        const jlist *l = jv_l(v);
        if (l->is_range) return jfail(rt, "Object of type range is not JSON serializable");
        if (l->n == 0) return jb_puts(rt, b, "[]");
        if (jb_putc(rt, b, '[')) return JE;
        if (o->indent && json_newline(rt, o, level + 1, b)) return JE;
        for (size_t i = 0; i < l->n; i++) {
            if (i) {
                if (jb_puts(rt, b, o->item_sep)) return JE;
                if (o->indent && json_newline(rt, o, level + 1, b)) return JE;
            }
            if (json_any(rt, l->v[i], o, level + 1, b)) return JE;
        }
        if (o->indent && json_newline(rt, o, level, b)) return JE;
        return jb_putc(rt, b, ']');
    }
    case JV_DICT: {
        const jdict *d = jv_d(v);
        if (d->n == 0) return jb_puts(rt, b, "{}");
        size_t *ix = malloc(d->n * 2 * sizeof *ix);
        if (!ix) return jlimit(rt, "out of memory");
        for (size_t i = 0; i < d->n; i++) ix[i] = i;
        int rc = 0;
        if (o->sort_keys) {
            keysort_ctx c = {rt, d};
            rc = keysort(&c, ix, ix + d->n, d->n);
        }
        if (!rc) rc = jb_putc(rt, b, '{');
        if (!rc && o->indent) rc = json_newline(rt, o, level + 1, b);
        for (size_t i = 0; !rc && i < d->n; i++) {
            if (i) {
                rc = jb_puts(rt, b, o->item_sep);
                if (!rc && o->indent) rc = json_newline(rt, o, level + 1, b);
            }
            if (!rc) rc = json_key(rt, d->k[ix[i]], o, b);
            if (!rc) rc = jb_puts(rt, b, o->key_sep);
            if (!rc) rc = json_any(rt, d->v[ix[i]], o, level + 1, b);
        }
        if (!rc && o->indent) rc = json_newline(rt, o, level, b);
        if (!rc) rc = jb_putc(rt, b, '}');
        free(ix);
        return rc;
    }
    default:
        return jfail(rt, "Object of type %s is not JSON serializable", py_typename(v));
    }
}

int py_json_dump(jrt *rt, jv v, const jjson_opts *o, jbuf *out) { return json_any(rt, v, o, 0, out); }

/* ------------------------------------------------------------------ cJSON -> values */

static int from_cjson(jrt *rt, const cJSON *j, jv *out, int depth)
{
    if (depth > JDEPTH_MAX) return jlimit(rt, "JSON variables nested more than %d deep", JDEPTH_MAX);
    if (cJSON_IsNull(j)) {
        *out = jv_none();
        return 0;
    }
    if (cJSON_IsBool(j)) {
        *out = jv_bool(cJSON_IsTrue(j));
        return 0;
    }
    if (cJSON_IsNumber(j)) {
        const char *lit = j->valuestring; /* the literal, from tm_jinja_json_parse */
        if (lit && !strpbrk(lit, ".eE")) { /* an int, exactly (past 64 bits: the nearest float) */
            char *end;
            errno = 0;
            long long v = strtoll(lit, &end, 10);
            if (errno == 0 && *end == '\0') {
                *out = jv_int(v);
                return 0;
            }
            *out = jv_float(j->valuedouble);
            return 0;
        }
        if (lit) {
            *out = jv_float(strtod(lit, NULL));
            return 0;
        }
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 9.2e18) *out = jv_int((int64_t)d);
        else *out = jv_float(d);
        return 0;
    }
    if (cJSON_IsString(j)) {
        const char *s = j->valuestring ? j->valuestring : "";
        return jv_str_new(rt, s, strlen(s), out);
    }
    if (cJSON_IsArray(j)) {
        jlist *l = jlist_new(rt, JV_LIST, 0);
        if (!l) return JE;
        jv lv = jv_obj(JV_LIST, l);
        for (const cJSON *c = j->child; c; c = c->next) {
            jv e;
            if (from_cjson(rt, c, &e, depth + 1) || jlist_push(rt, l, e)) {
                jv_decref(lv);
                return JE;
            }
        }
        *out = lv;
        return 0;
    }
    if (cJSON_IsObject(j)) {
        jdict *d = jdict_new(rt, JV_DICT);
        if (!d) return JE;
        jv dv = jv_obj(JV_DICT, d);
        for (const cJSON *c = j->child; c; c = c->next) {
            jv k, e;
            const char *key = c->string ? c->string : "";
            if (jv_str_new(rt, key, strlen(key), &k)) {
                jv_decref(dv);
                return JE;
            }
            if (from_cjson(rt, c, &e, depth + 1)) {
                jv_decref(k);
                jv_decref(dv);
                return JE;
            }
            if (jdict_set(rt, d, k, e)) {
                jv_decref(dv);
                return JE;
            }
        }
        *out = dv;
        return 0;
    }
    return jfail(rt, "unsupported JSON value in the template variables");
}

int jv_from_cjson(jrt *rt, const cJSON *j, jv *out) { return from_cjson(rt, j, out, 0); }
