/* text/jinja_eval.c: the evaluator.
 *
 * Scopes follow what jinja2's compiler produces:
 *   - the template's top level is the root frame (the render variables live there);
 *   - every for-loop iteration runs in a fresh frame: a {% set %} inside the body is
 *     local to that iteration (the next one sees the outer value again), which is why
 *     templates use namespace() to carry state out of loops;
 *   - {% if %} opens no scope; macros, call blocks, {% with %}, set blocks, filter
 *     blocks and {% generation %} do;
 *   - a macro sees the scope it was defined in (its closure) at call time, not the
 *     caller's. A frame a macro closes over lives until the render ends; other frames
 *     are freed when their scope ends.
 *
 * Every evaluation returns 0 or JE (the error is in rt->err); statements can also
 * return JX_BREAK / JX_CONTINUE. Each jv handed out is a new reference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja-impl.h"

enum { JX_BREAK = 1, JX_CONTINUE = 2 };
#define EDEPTH_MAX 2500 /* C recursion of the evaluator */

struct jframe {
    jframe *parent;
    const char **names;
    jv *vals;
    int n, cap;
    int captured; /* a macro closes over it: freed at the end of the render */
};

/* ------------------------------------------------------------------ frames */

static jframe *frame_new(jrt *rt, jframe *parent)
{
    jframe *f = calloc(1, sizeof *f);
    if (!f) {
        jlimit(rt, "out of memory (scope)");
        return NULL;
    }
    f->parent = parent;
    return f;
}

static void frame_clear(jframe *f)
{
    for (int i = 0; i < f->n; i++) jv_decref(f->vals[i]);
    free(f->names);
    free(f->vals);
    f->names = NULL;
    f->vals = NULL;
    f->n = f->cap = 0;
}

/* end of a scope: free the frame unless a macro closes over it */
static void frame_release(jframe *f)
{
    if (!f || f->captured) return;
    frame_clear(f);
    free(f);
}

/* keep f and its ancestors alive until the render ends */
static int frame_capture(jrt *rt, jframe *f)
{
    for (; f && !f->captured; f = f->parent) {
        if (f == rt->root) continue;
        if (rt->nframes == rt->capframes) {
            size_t cap = rt->capframes ? rt->capframes * 2 : 16;
            jframe **p = realloc(rt->frames, cap * sizeof *p);
            if (!p) return jlimit(rt, "out of memory (scopes)");
            rt->frames = p;
            rt->capframes = cap;
        }
        rt->frames[rt->nframes++] = f;
        f->captured = 1;
    }
    return 0;
}

static int frame_find(const jframe *f, const char *name, jv *out)
{
    for (; f; f = f->parent)
        for (int i = 0; i < f->n; i++)
            if (strcmp(f->names[i], name) == 0) {
                *out = f->vals[i];
                return 1;
            }
    return 0;
}

/* set name in f (takes the reference) */
static int frame_set(jrt *rt, jframe *f, const char *name, jv v)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->names[i], name) == 0) {
            jv_decref(f->vals[i]);
            f->vals[i] = v;
            return 0;
        }
    if (f->n == f->cap) {
        int cap = f->cap ? f->cap * 2 : 4;
        const char **nn = realloc(f->names, (size_t)cap * sizeof *nn);
        if (!nn) goto oom;
        f->names = nn;
        jv *nv = realloc(f->vals, (size_t)cap * sizeof *nv);
        if (!nv) goto oom;
        f->vals = nv;
        f->cap = cap;
    }
    f->names[f->n] = name;
    f->vals[f->n] = v;
    f->n++;
    return 0;
oom:
    jv_decref(v);
    return jlimit(rt, "out of memory (variables)");
}

/* ------------------------------------------------------------------ helpers */

static int ev(jrt *rt, jframe *F, const jnode *x, jv *out);
static int ex_body(jrt *rt, jframe *F, jnode *const *body, int n, jbuf *out);

static int step(jrt *rt)
{
    if (++rt->steps > rt->lim.max_steps)
        return jlimit(rt, "template ran more than %zu steps (statements, iterations and calls)", rt->lim.max_steps);
    return 0;
}

static void args_free(jargs *a)
{
    for (int i = 0; i < a->npos; i++) jv_decref(a->pos[i]);
    for (int i = 0; i < a->nkw; i++) jv_decref(a->kwv[i]);
    free(a->pos);
    free(a->kwv);
    free(a->kwn);
    jv_decref(a->hold);
    memset(a, 0, sizeof *a);
}

static int args_add(jrt *rt, jargs *a, const char *kw, jv v)
{
    if (!kw) {
        jv *p = realloc(a->pos, (size_t)(a->npos + 1) * sizeof *p);
        if (!p) goto oom;
        a->pos = p;
        a->pos[a->npos++] = v;
        return 0;
    }
    for (int i = 0; i < a->nkw; i++)
        if (strcmp(a->kwn[i], kw) == 0) {
            jv_decref(v);
            return jfail(rt, "got multiple values for keyword argument '%s'", kw);
        }
    jv *p = realloc(a->kwv, (size_t)(a->nkw + 1) * sizeof *p);
    if (!p) goto oom;
    a->kwv = p;
    const char **q = realloc(a->kwn, (size_t)(a->nkw + 1) * sizeof *q);
    if (!q) goto oom;
    a->kwn = q;
    a->kwn[a->nkw] = kw;
    a->kwv[a->nkw++] = v;
    return 0;
oom:
    jv_decref(v);
    return jlimit(rt, "out of memory (arguments)");
}

/* evaluate the arguments of a JN_CALL / JN_FILTER / JN_TEST node */
static int ev_args(jrt *rt, jframe *F, const jnode *x, jargs *a)
{
    memset(a, 0, sizeof *a);
    for (int i = 0; i < x->ln[0]; i++) {
        jv v;
        if (ev(rt, F, x->l[0][i], &v) || args_add(rt, a, NULL, v)) goto fail;
    }
    if (x->c) { /* *args */
        jv v, lst;
        if (ev(rt, F, x->c, &v)) goto fail;
        int rc = py_iter_list(rt, v, &lst);
        jv_decref(v);
        if (rc) goto fail;
        const jlist *l = jv_l(lst);
        for (size_t i = 0; i < l->n; i++)
            if (args_add(rt, a, NULL, jv_ref(l->v[i]))) {
                jv_decref(lst);
                goto fail;
            }
        jv_decref(lst);
    }
    for (int i = 0; i < x->ln[1]; i++) {
        jv v;
        if (ev(rt, F, x->l[1][i], &v) || args_add(rt, a, x->names[i], v)) goto fail;
    }
    if (x->d) { /* **kwargs */
        jv v;
        if (ev(rt, F, x->d, &v)) goto fail;
        if (v.kind != JV_DICT) {
            jfail(rt, "argument after ** must be a mapping, not %s", py_typename(v));
            jv_decref(v);
            goto fail;
        }
        const jdict *d = jv_d(v);
        a->hold = v; /* owns the key strings the keyword names point into */
        for (size_t i = 0; i < d->n; i++) {
            if (d->k[i].kind != JV_STR) {
                jfail(rt, "keywords must be strings");
                goto fail;
            }
            if (args_add(rt, a, jv_s(d->k[i])->s, jv_ref(d->v[i]))) goto fail;
        }
    }
    return 0;
fail:
    args_free(a);
    return JE;
}

int jargs_bind(jrt *rt, const char *fname, const jargs *a, const char *const *names, int nparams, int nreq,
               jv *slots)
{
    for (int i = 0; i < nparams; i++) slots[i] = jv_missing();
    if (a->npos > nparams)
        return jfail(rt, "%s() takes at most %d argument%s (%d given)", fname, nparams, nparams == 1 ? "" : "s",
                     a->npos);
    for (int i = 0; i < a->npos; i++) slots[i] = a->pos[i];
    for (int k = 0; k < a->nkw; k++) {
        int i;
        for (i = 0; i < nparams; i++)
            if (strcmp(names[i], a->kwn[k]) == 0) break;
        if (i == nparams) return jfail(rt, "%s() got an unexpected keyword argument '%s'", fname, a->kwn[k]);
        if (slots[i].kind != JV_MISSING)
            return jfail(rt, "%s() got multiple values for argument '%s'", fname, a->kwn[k]);
        slots[i] = a->kwv[k];
    }
    for (int i = 0; i < nreq; i++)
        if (slots[i].kind == JV_MISSING)
            return jfail(rt, "%s() missing required argument '%s'", fname, names[i]);
    return 0;
}

/* iterate a value as Python's list(v) would, for a for loop */
int py_iter_list(jrt *rt, jv v, jv *out)
{
    switch (v.kind) {
    case JV_LIST:
    case JV_TUPLE: *out = jv_ref(v); return 0;
    case JV_MISSING:
    case JV_UNDEF: {
        jlist *l = jlist_new(rt, JV_LIST, 0);
        if (!l) return JE;
        *out = jv_obj(JV_LIST, l);
        return 0;
    }
    case JV_STR: {
        const jstr *s = jv_s(v);
        jlist *l = jlist_new(rt, JV_LIST, s->ncp);
        if (!l) return JE;
        jv lv = jv_obj(JV_LIST, l);
        size_t i = 0;
        while (i < s->len) {
            size_t st = i;
            u8_next(s->s, s->len, &i);
            jv c;
            if (jv_str_new(rt, s->s + st, i - st, &c) || jlist_push(rt, l, c)) {
                jv_decref(lv);
                return JE;
            }
        }
        *out = lv;
        return 0;
    }
    case JV_DICT: {
        const jdict *d = jv_d(v);
        jlist *l = jlist_new(rt, JV_LIST, d->n);
        if (!l) return JE;
        for (size_t i = 0; i < d->n; i++) l->v[l->n++] = jv_ref(d->k[i]);
        if (jlist_set_depth(rt, l)) {
            jv_decref(jv_obj(JV_LIST, l));
            return JE;
        }
        *out = jv_obj(JV_LIST, l);
        return 0;
    }
    case JV_LOOP: return py_iter_list(rt, ((jloop *)v.u.o)->items, out);
    case JV_GEN: { /* its items, once: the generator is left empty (shared, as a Python generator is) */
        jlist *g = (jlist *)v.u.o, *l = jlist_new(rt, JV_LIST, g->n);
        if (!l) return JE;
        if (g->n) memcpy(l->v, g->v, sizeof *g->v * g->n); /* the references move */
        l->n = g->n;
        g->n = 0;
        if (jlist_set_depth(rt, l)) {
            jv_decref(jv_obj(JV_LIST, l));
            return JE;
        }
        *out = jv_obj(JV_LIST, l);
        return 0;
    }
    default: return jfail(rt, "'%s' object is not iterable", py_typename(v));
    }
}

/* ------------------------------------------------------------------ operators */

static int num_overflow(jrt *rt) { return jfail(rt, "integer overflow (Python ints are unbounded; these are 64-bit)"); }

static int as_int(jv v, int64_t *i)
{
    if (v.kind == JV_INT) *i = v.u.i;
    else if (v.kind == JV_BOOL) *i = v.u.b;
    else return 0;
    return 1;
}

static double as_f(jv v) { return v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : (double)v.u.b; }

static int repeat_seq(jrt *rt, jv seq, int64_t times, jv *out)
{
    if (times < 0) times = 0;
    if (seq.kind == JV_STR) {
        const jstr *s = jv_s(seq);
        if (s->len && (uint64_t)times > rt->lim.max_output / s->len)
            return jlimit(rt, "string repetition exceeds the output limit (%zu bytes)", rt->lim.max_output);
        jbuf b = {0};
        for (int64_t i = 0; i < times; i++)
            if (jb_put(rt, &b, s->s, s->len)) {
                jb_free(&b);
                return JE;
            }
        return jv_str_buf(rt, &b, out);
    }
    const jlist *l = jv_l(seq);
    if (l->n && (uint64_t)times > rt->lim.max_memory / (l->n * sizeof(jv)))
        return jlimit(rt, "list repetition exceeds the memory limit");
    jlist *r = jlist_new(rt, seq.kind, (size_t)times * l->n);
    if (!r) return JE;
    for (int64_t t = 0; t < times; t++)
        for (size_t i = 0; i < l->n; i++) r->v[r->n++] = jv_ref(l->v[i]);
    r->depth = l->depth;
    *out = jv_obj(seq.kind, r);
    return 0;
}

static int binop_fail(jrt *rt, int op, jv a, jv b)
{
    return jfail(rt, "unsupported operand type(s) for %s: '%s' and '%s'", op == JO_POW ? "** or pow()" : jop_str(op),
                 py_typename(a), py_typename(b));
}

/* Python a op b for + - * / // % ** */
int jbinop(jrt *rt, int op, jv a, jv b, jv *out)
{
    if (op == JO_MOD && a.kind == JV_STR) return py_percent_format(rt, a, b, out); /* str.__mod__ takes anything */
    if (a.kind == JV_UNDEF || a.kind == JV_MISSING) return jv_undef_fail(rt, a);
    if (b.kind == JV_UNDEF || b.kind == JV_MISSING) return jv_undef_fail(rt, b);
    int64_t x, y;
    if (as_int(a, &x) && as_int(b, &y)) {
        int64_t r;
        switch (op) {
        case JO_ADD: if (__builtin_add_overflow(x, y, &r)) return num_overflow(rt); *out = jv_int(r); return 0;
        case JO_SUB: if (__builtin_sub_overflow(x, y, &r)) return num_overflow(rt); *out = jv_int(r); return 0;
        case JO_MUL: if (__builtin_mul_overflow(x, y, &r)) return num_overflow(rt); *out = jv_int(r); return 0;
        case JO_DIV:
            if (y == 0) return jfail(rt, "division by zero");
            *out = jv_float((double)x / (double)y);
            return 0;
        case JO_FLOORDIV:
        case JO_MOD: {
            if (y == 0) return jfail(rt, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) return num_overflow(rt);
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) {
                q--;
                m += y;
            }
            *out = jv_int(op == JO_FLOORDIV ? q : m);
            return 0;
        }
        case JO_POW:
            if (y < 0) {
                if (x == 0) return jfail(rt, "0.0 cannot be raised to a negative power");
                *out = jv_float(pow((double)x, (double)y));
                return 0;
            }
            r = 1;
            for (int64_t base = x, e = y; e; e >>= 1) {
                if ((e & 1) && __builtin_mul_overflow(r, base, &r)) return num_overflow(rt);
                if (e > 1 && __builtin_mul_overflow(base, base, &base)) return num_overflow(rt);
            }
            *out = jv_int(r);
            return 0;
        }
    }
    if (jv_isnum(a) && jv_isnum(b)) {
        double p = as_f(a), q = as_f(b);
        switch (op) {
        case JO_ADD: *out = jv_float(p + q); return 0;
        case JO_SUB: *out = jv_float(p - q); return 0;
        case JO_MUL: *out = jv_float(p * q); return 0;
        case JO_DIV:
            if (q == 0) return jfail(rt, "float division by zero");
            *out = jv_float(p / q);
            return 0;
        case JO_FLOORDIV:
        case JO_MOD: {
            if (q == 0) return jfail(rt, op == JO_MOD ? "float modulo" : "float floor division by zero");
            double m = fmod(p, q), fl;
            if (m != 0) {
                if ((q < 0) != (m < 0)) m += q;
            } else {
                m = copysign(0.0, q);
            }
            double dv = (p - m) / q;
            if (dv != 0) {
                fl = floor(dv);
                if (dv - fl > 0.5) fl += 1.0;
            } else {
                fl = copysign(0.0, p / q);
            }
            *out = jv_float(op == JO_MOD ? m : fl);
            return 0;
        }
        case JO_POW:
            if (p == 0 && q < 0) return jfail(rt, "0.0 cannot be raised to a negative power");
            if (p < 0 && q != floor(q)) return jfail(rt, "negative number cannot be raised to a fractional power");
            *out = jv_float(pow(p, q));
            return 0;
        }
    }
    if (op == JO_ADD) {
        if (a.kind == JV_STR && b.kind == JV_STR) {
            const jstr *s = jv_s(a), *t = jv_s(b);
            if (!s->markup && !t->markup) return jv_str_cat(rt, s->s, s->len, t->s, t->len, out);
            /* Markup + str escapes the plain side */
            jv ea, eb;
            if (py_html_escape(rt, a, &ea)) return JE;
            if (py_html_escape(rt, b, &eb)) {
                jv_decref(ea);
                return JE;
            }
            int rc = jv_str_cat(rt, jv_s(ea)->s, jv_s(ea)->len, jv_s(eb)->s, jv_s(eb)->len, out);
            jv_decref(ea);
            jv_decref(eb);
            if (!rc) ((jstr *)out->u.o)->markup = 1;
            return rc;
        }
        if (a.kind == b.kind && (a.kind == JV_LIST || a.kind == JV_TUPLE)) {
            const jlist *p = jv_l(a), *q = jv_l(b);
            jlist *r = jlist_new(rt, a.kind, p->n + q->n);
            if (!r) return JE;
            for (size_t i = 0; i < p->n; i++) r->v[r->n++] = jv_ref(p->v[i]);
            for (size_t i = 0; i < q->n; i++) r->v[r->n++] = jv_ref(q->v[i]);
            r->depth = p->depth > q->depth ? p->depth : q->depth;
            *out = jv_obj(a.kind, r);
            return 0;
        }
        if (a.kind == JV_STR)
            return jfail(rt, "can only concatenate str (not \"%s\") to str", py_typename(b));
        if (a.kind == JV_LIST)
            return jfail(rt, "can only concatenate list (not \"%s\") to list", py_typename(b));
        if (a.kind == JV_TUPLE)
            return jfail(rt, "can only concatenate tuple (not \"%s\") to tuple", py_typename(b));
    }
    if (op == JO_MUL) {
        if ((a.kind == JV_STR || jv_isseq(a)) && as_int(b, &y)) return repeat_seq(rt, a, y, out);
        if ((b.kind == JV_STR || jv_isseq(b)) && as_int(a, &x)) return repeat_seq(rt, b, x, out);
        if (a.kind == JV_STR || b.kind == JV_STR || jv_isseq(a) || jv_isseq(b))
            return jfail(rt, "can't multiply sequence by non-int of type '%s'",
                         py_typename(a.kind == JV_STR || jv_isseq(a) ? b : a));
    }
    return binop_fail(rt, op, a, b);
}

static int contains(jrt *rt, jv item, jv container, int *out)
{
    switch (container.kind) {
    case JV_STR:
        if (item.kind != JV_STR)
            return jfail(rt, "'in <string>' requires string as left operand, not %s", py_typename(item));
        *out = memmem(jv_s(container)->s, jv_s(container)->len, jv_s(item)->s, jv_s(item)->len) != NULL ||
               jv_s(item)->len == 0;
        return 0;
    case JV_LIST:
    case JV_TUPLE: {
        const jlist *l = jv_l(container);
        *out = 0;
        for (size_t i = 0; i < l->n; i++)
            if (py_eq(l->v[i], item)) {
                *out = 1;
                break;
            }
        return 0;
    }
    case JV_DICT: {
        size_t pos;
        int f = jdict_find(rt, jv_d(container), item, &pos);
        if (f < 0) return JE;
        *out = f;
        return 0;
    }
    case JV_MISSING:
    case JV_UNDEF: *out = 0; return 0;
    case JV_LOOP: return contains(rt, item, ((jloop *)container.u.o)->items, out);
    default: return jfail(rt, "argument of type '%s' is not iterable", py_typename(container));
    }
}

static int compare(jrt *rt, int op, jv a, jv b, int *out)
{
    switch (op) {
    case JO_EQ: *out = py_eq(a, b); return 0;
    case JO_NE: *out = !py_eq(a, b); return 0;
    case JO_IN: return contains(rt, a, b, out);
    case JO_NOTIN:
        if (contains(rt, a, b, out)) return JE;
        *out = !*out;
        return 0;
    default: break;
    }
    if (a.kind == JV_UNDEF || a.kind == JV_MISSING) return jv_undef_fail(rt, a);
    if (b.kind == JV_UNDEF || b.kind == JV_MISSING) return jv_undef_fail(rt, b);
    int c;
    if (py_cmp(rt, a, b, jop_str(op), &c)) return JE;
    if (c == 2) {
        *out = 0;
        return 0;
    }
    switch (op) {
    case JO_LT: *out = c < 0; break;
    case JO_LTEQ: *out = c <= 0; break;
    case JO_GT: *out = c > 0; break;
    default: *out = c >= 0; break;
    }
    return 0;
}

/* ------------------------------------------------------------------ macros */

static int call_macro(jrt *rt, const jmacro *m, const jargs *a, jv *out)
{
    const jnode *node = m->node;
    if (rt->depth >= rt->lim.max_depth)
        return jlimit(rt, "macro calls nested more than %d deep", rt->lim.max_depth);
    if (step(rt)) return JE;
    int np = node->nnames, nd = node->ln[1];
    if (a->npos > np && !(node->flags & JNF_USES_VARARGS))
        return jfail(rt, "macro '%s' takes not more than %d argument(s)", m->name, np);
    jframe *MF = frame_new(rt, m->closure);
    if (!MF) return JE;
    int rc = 0;
    jv varargs = jv_missing(), kwargs = jv_missing(), caller = jv_missing();
    int bound[256] = {0};
    for (int i = 0; i < a->npos && i < np; i++) {
        if ((rc = frame_set(rt, MF, node->names[i], jv_ref(a->pos[i])))) goto done;
        bound[i] = 1;
    }
    if (node->flags & JNF_USES_VARARGS) {
        jlist *l = jlist_new(rt, JV_TUPLE, 0);
        if (!l) {
            rc = JE;
            goto done;
        }
        varargs = jv_obj(JV_TUPLE, l);
        for (int i = np; i < a->npos; i++)
            if ((rc = jlist_push(rt, l, jv_ref(a->pos[i])))) goto done;
    }
    if (node->flags & JNF_USES_KWARGS) {
        jdict *d = jdict_new(rt, JV_DICT);
        if (!d) {
            rc = JE;
            goto done;
        }
        kwargs = jv_obj(JV_DICT, d);
    }
    for (int k = 0; k < a->nkw; k++) {
        const char *kw = a->kwn[k];
        int i;
        for (i = 0; i < np; i++)
            if (strcmp(node->names[i], kw) == 0) break;
        if (i < np) {
            if (bound[i]) {
                rc = jfail(rt, "macro '%s' got multiple values for argument '%s'", m->name, kw);
                goto done;
            }
            if ((rc = frame_set(rt, MF, node->names[i], jv_ref(a->kwv[k])))) goto done;
            bound[i] = 1;
        } else if (strcmp(kw, "caller") == 0 && (node->flags & JNF_USES_CALLER)) {
            jv_decref(caller);
            caller = jv_ref(a->kwv[k]);
        } else if (node->flags & JNF_USES_KWARGS) {
            jv key;
            if ((rc = jv_str_new(rt, kw, strlen(kw), &key))) goto done;
            if ((rc = jdict_set(rt, jv_d(kwargs), key, jv_ref(a->kwv[k])))) goto done;
        } else {
            rc = jfail(rt, "macro '%s' takes no keyword argument '%s'", m->name, kw);
            goto done;
        }
    }
    for (int i = 0; i < np; i++) {
        if (bound[i]) continue;
        int di = i - (np - nd);
        jv v;
        if (di >= 0) {
            if ((rc = ev(rt, MF, node->l[1][di], &v))) goto done;
        } else if ((rc = jv_undef_msg(rt, &v, "parameter '%s' was not provided", node->names[i]))) {
            goto done;
        }
        if ((rc = frame_set(rt, MF, node->names[i], v))) goto done;
    }
    if (varargs.kind != JV_MISSING) {
        rc = frame_set(rt, MF, "varargs", varargs);
        varargs = jv_missing();
        if (rc) goto done;
    }
    if (kwargs.kind != JV_MISSING) {
        rc = frame_set(rt, MF, "kwargs", kwargs);
        kwargs = jv_missing();
        if (rc) goto done;
    }
    if (node->flags & JNF_USES_CALLER) {
        if (caller.kind == JV_MISSING && (rc = jv_undef_msg(rt, &caller, "No caller defined"))) goto done;
        rc = frame_set(rt, MF, "caller", caller);
        caller = jv_missing();
        if (rc) goto done;
    }
    jbuf b = {0};
    rt->depth++;
    rc = ex_body(rt, MF, node->l[0], node->ln[0], &b);
    rt->depth--;
    if (rc < 0) {
        jb_free(&b);
        goto done;
    }
    rc = jv_str_buf(rt, &b, out);
done:
    jv_decref(varargs);
    jv_decref(kwargs);
    jv_decref(caller);
    frame_release(MF);
    return rc < 0 ? JE : 0;
}

static int make_macro(jrt *rt, jframe *F, const jnode *node, const char *name, jv *out)
{
    if (frame_capture(rt, F)) return JE;
    jmacro *m = jobj_new(rt, JV_MACRO, sizeof(jmacro));
    if (!m) return JE;
    m->node = node;
    m->closure = F;
    m->name = name;
    *out = jv_obj(JV_MACRO, m);
    return 0;
}

/* ------------------------------------------------------------------ for loops */

static int assign(jrt *rt, jframe *F, const jnode *target, jv v);

static int run_for(jrt *rt, jframe *F, const jnode *x, jv iterable, int depth0, jbuf *out);

static int call_loop(jrt *rt, jloop *L, const jargs *a, jv *out)
{
    if (!(L->node->flags & JNF_RECURSIVE))
        return jfail(rt, "The loop must have the 'recursive' marker to be called recursively.");
    if (a->npos != 1 || a->nkw) return jfail(rt, "loop() takes exactly one argument");
    if (rt->depth >= rt->lim.max_depth)
        return jlimit(rt, "recursive loop nested more than %d deep", rt->lim.max_depth);
    jbuf b = {0};
    rt->depth++;
    int rc = run_for(rt, L->frame, L->node, a->pos[0], L->depth0 + 1, &b);
    rt->depth--;
    if (rc < 0) {
        jb_free(&b);
        return JE;
    }
    return jv_str_buf(rt, &b, out);
}

static int run_for_else(jrt *rt, jframe *F, const jnode *x, jbuf *out)
{
    if (!x->ln[1]) return 0;
    jframe *EF = frame_new(rt, F);
    if (!EF) return JE;
    int rc = ex_body(rt, EF, x->l[1], x->ln[1], out); /* break/continue here belong to an outer loop */
    frame_release(EF);
    return rc;
}

static int run_for(jrt *rt, jframe *F, const jnode *x, jv iterable, int depth0, jbuf *out)
{
    jv items;
    if (py_iter_list(rt, iterable, &items)) return JE;
    int rc = 0;
    if (x->c) { /* {% for a in b if c %}: filter first (jinja2 does it lazily; no side effects here) */
        jlist *kept = jlist_new(rt, JV_LIST, 0);
        if (!kept) {
            jv_decref(items);
            return JE;
        }
        jv kv = jv_obj(JV_LIST, kept);
        const jlist *src = jv_l(items);
        for (size_t i = 0; i < src->n && !rc; i++) {
            jframe *TF = frame_new(rt, F);
            if (!TF) {
                rc = JE;
                break;
            }
            jv cond;
            rc = assign(rt, TF, x->a, jv_ref(src->v[i]));
            if (!rc) rc = step(rt);
            if (!rc) rc = ev(rt, TF, x->c, &cond);
            if (!rc) {
                if (py_truthy(cond)) rc = jlist_push(rt, kept, jv_ref(src->v[i]));
                jv_decref(cond);
            }
            frame_release(TF);
        }
        jv_decref(items);
        if (rc) {
            jv_decref(kv);
            return JE;
        }
        items = kv;
    }
    const jlist *l = jv_l(items);
    if (l->n == 0) {
        jv_decref(items);
        return run_for_else(rt, F, x, out);
    }
    jloop *L = jobj_new(rt, JV_LOOP, sizeof(jloop));
    if (!L) {
        jv_decref(items);
        return JE;
    }
    L->items = items;
    L->depth0 = depth0;
    L->changed_last = jv_missing();
    L->node = x;
    L->frame = F;
    jv lv = jv_obj(JV_LOOP, L);
    if ((x->flags & JNF_RECURSIVE) && frame_capture(rt, F)) {
        jv_decref(lv);
        return JE;
    }
    /* jinja2 clears its "no iteration" flag at the end of the body, so an iteration that
     * ends in break or continue does not count: {% else %} runs unless one completed */
    int completed = 0;
    for (size_t i = 0; i < l->n; i++) {
        L->i = i;
        if ((rc = step(rt))) break;
        jframe *IF = frame_new(rt, F);
        if (!IF) {
            rc = JE;
            break;
        }
        rc = frame_set(rt, IF, "loop", jv_ref(lv));
        if (!rc) rc = assign(rt, IF, x->a, jv_ref(l->v[i]));
        if (!rc) rc = ex_body(rt, IF, x->l[0], x->ln[0], out);
        frame_release(IF);
        if (rc == 0) completed = 1;
        if (rc == JX_BREAK) {
            rc = 0;
            break;
        }
        if (rc == JX_CONTINUE) rc = 0;
        if (rc) break;
    }
    jv_decref(lv);
    if (rc < 0) return JE;
    return completed ? 0 : run_for_else(rt, F, x, out);
}

/* ------------------------------------------------------------------ assignment */

static int assign(jrt *rt, jframe *F, const jnode *target, jv v)
{
    if (target->kind == JN_NAME) return frame_set(rt, F, target->name, v);
    if (target->kind == JN_NSREF) {
        jv ns;
        if (!frame_find(F, target->name, &ns)) {
            jv_decref(v);
            return jfail(rt, "'%s' is undefined", target->name);
        }
        if (ns.kind != JV_NS) {
            jv_decref(v);
            return jfail(rt, "cannot assign attribute on non-namespace object");
        }
        jv key;
        if (jv_str_new(rt, target->attr, strlen(target->attr), &key)) {
            jv_decref(v);
            return JE;
        }
        return jdict_set(rt, jv_d(ns), key, v);
    }
    /* tuple unpacking */
    jv items;
    int rc = py_iter_list(rt, v, &items);
    jv_decref(v);
    if (rc) return JE;
    const jlist *l = jv_l(items);
    int want = target->ln[0];
    size_t got = l->n;
    if ((int64_t)got != want) {
        jv_decref(items);
        if ((int64_t)got < want) return jfail(rt, "not enough values to unpack (expected %d, got %zu)", want, got);
        return jfail(rt, "too many values to unpack (expected %d)", want);
    }
    for (int i = 0; i < want && !rc; i++) rc = assign(rt, F, target->l[0][i], jv_ref(l->v[i]));
    jv_decref(items);
    return rc;
}

/* ------------------------------------------------------------------ expressions */

int jeval_call(jrt *rt, jv callee, const jargs *a, jv *out)
{
    switch (callee.kind) {
    case JV_FUNC: return jfunc_call(rt, (const jfunc *)callee.u.o, a, out);
    case JV_MACRO: return call_macro(rt, (const jmacro *)callee.u.o, a, out);
    case JV_LOOP: return call_loop(rt, (jloop *)callee.u.o, a, out);
    case JV_JOINER: {
        jjoiner *j = (jjoiner *)callee.u.o;
        if (!j->used) {
            j->used = 1;
            return jv_str_lit(rt, "", out);
        }
        *out = jv_ref(j->sep);
        return 0;
    }
    case JV_MISSING:
    case JV_UNDEF: return jv_undef_fail(rt, callee);
    default: return jfail(rt, "'%s' object is not callable", py_typename(callee));
    }
}

/* a filter or test that check_names (jinja_parser.c) let through in an if
 * or a conditional expression, reached: jinja2's runtime error */
static int jname_missing(jrt *rt, const char *what, const jnode *x)
{
    if (x->fid == -2) return jfail(rt, "%s '%s' is not supported", what, x->name);
    return jfail(rt, "No %s named '%s' found.", what, x->name);
}

/* a filter node applied to its operand, or to *input for the bottom of a block filter chain */
static int ev_filter(jrt *rt, jframe *F, const jnode *x, const jv *input, jv *out)
{
    jv v;
    int rc;
    if (!x->a) {
        if (!input) return jfail(rt, "filter without a value");
        v = jv_ref(*input);
    } else if (x->a->kind == JN_FILTER) {
        if (ev_filter(rt, F, x->a, input, &v)) return JE;
    } else if (ev(rt, F, x->a, &v)) {
        return JE;
    }
    jargs a;
    if (ev_args(rt, F, x, &a)) {
        jv_decref(v);
        return JE;
    }
    rt->line = x->line;
    rc = x->fid < 0 ? jname_missing(rt, "filter", x) : jfilter_apply(rt, x->fid, v, &a, out);
    args_free(&a);
    jv_decref(v);
    return rc;
}

/* an expression jinja2 can evaluate at compile time (only literals and operators on
 * them): jinja2 prints such a {{ }} through its safe getattr/getitem, so there a bad
 * subscript is undefined instead of an error */
static int const_tree(const jnode *x)
{
    if (!x) return 1;
    switch (x->kind) {
    case JN_CONST: return 1;
    case JN_GETATTR: case JN_GETITEM: case JN_SLICE: case JN_BINOP: case JN_NEG: case JN_POS: case JN_NOT:
    case JN_AND: case JN_OR: case JN_COMPARE: case JN_COND: case JN_CONCAT: case JN_LIST: case JN_TUPLE:
    case JN_DICT:
        if (!const_tree(x->a) || !const_tree(x->b) || !const_tree(x->c)) return 0;
        for (int s = 0; s < 3; s++)
            for (int i = 0; i < x->ln[s]; i++)
                if (!const_tree(x->l[s][i])) return 0;
        return 1;
    default: return 0;
    }
}

static int ev_getitem(jrt *rt, jframe *F, const jnode *x, jv *out)
{
    jv obj;
    if (ev(rt, F, x->a, &obj)) return JE;
    int rc;
    if (x->b->kind == JN_SLICE) {
        jv p[3] = {jv_missing(), jv_missing(), jv_missing()};
        const jnode *q[3] = {x->b->a, x->b->b, x->b->c};
        rc = 0;
        for (int i = 0; i < 3 && !rc; i++)
            if (q[i]) rc = ev(rt, F, q[i], &p[i]);
        if (!rc) {
            rt->line = x->line;
            if (obj.kind == JV_STR || jv_isseq(obj)) rc = py_slice(rt, obj, p[0], p[1], p[2], out);
            else if (obj.kind == JV_UNDEF || obj.kind == JV_MISSING) rc = jv_undef_fail(rt, obj);
            else if (rt->const_output) /* folded by jinja2 through its safe getitem(): undefined */
                rc = jv_undef_msg(rt, out, "%s has no element slice", py_objrepr(obj));
            else if (obj.kind == JV_DICT) rc = jfail(rt, "unhashable type: 'slice'"); /* jinja2 slices directly */
            else rc = jfail(rt, "'%s' object is not subscriptable", py_typename(obj));
        }
        for (int i = 0; i < 3; i++) jv_decref(p[i]);
        jv_decref(obj);
        return rc;
    }
    jv key;
    if (ev(rt, F, x->b, &key)) {
        jv_decref(obj);
        return JE;
    }
    rt->line = x->line;
    rc = jitem_get(rt, obj, key, out);
    jv_decref(key);
    jv_decref(obj);
    return rc;
}

static int ev_seq(jrt *rt, jframe *F, const jnode *x, int kind, jv *out)
{
    jlist *l = jlist_new(rt, kind, (size_t)x->ln[0]);
    if (!l) return JE;
    jv lv = jv_obj(kind, l);
    for (int i = 0; i < x->ln[0]; i++) {
        jv v;
        if (ev(rt, F, x->l[0][i], &v)) {
            jv_decref(lv);
            return JE;
        }
        l->v[l->n++] = v;
    }
    if (jlist_set_depth(rt, l)) {
        jv_decref(lv);
        return JE;
    }
    *out = lv;
    return 0;
}

static int ev_inner(jrt *rt, jframe *F, const jnode *x, jv *out)
{
    int rc;
    switch (x->kind) {
    case JN_CONST: *out = jv_ref(x->val); return 0;
    case JN_NAME: {
        jv v;
        if (frame_find(F, x->name, &v)) {
            *out = jv_ref(v);
            return 0;
        }
        rc = jglobal_lookup(rt, x->name, out);
        if (rc < 0) return JE;
        if (rc == 1) return 0;
        return jv_undef_name(rt, x->name, out);
    }
    case JN_GETATTR: {
        jv obj;
        if (ev(rt, F, x->a, &obj)) return JE;
        rt->line = x->line;
        rc = jattr_get(rt, obj, x->attr, out);
        jv_decref(obj);
        return rc;
    }
    case JN_GETITEM: return ev_getitem(rt, F, x, out);
    case JN_CALL: {
        jv callee;
        if (ev(rt, F, x->a, &callee)) return JE;
        jargs a;
        if (ev_args(rt, F, x, &a)) {
            jv_decref(callee);
            return JE;
        }
        rt->line = x->line;
        rc = jeval_call(rt, callee, &a, out);
        args_free(&a);
        jv_decref(callee);
        return rc;
    }
    case JN_FILTER: return ev_filter(rt, F, x, NULL, out);
    case JN_TEST: {
        jv v;
        if (ev(rt, F, x->a, &v)) return JE;
        jargs a;
        if (ev_args(rt, F, x, &a)) {
            jv_decref(v);
            return JE;
        }
        int r = 0;
        rt->line = x->line;
        rc = x->fid < 0 ? jname_missing(rt, "test", x) : jtest_apply(rt, x->fid, v, &a, &r);
        args_free(&a);
        jv_decref(v);
        if (!rc) *out = jv_bool(r);
        return rc;
    }
    case JN_BINOP: {
        jv a, b;
        if (ev(rt, F, x->a, &a)) return JE;
        if (ev(rt, F, x->b, &b)) {
            jv_decref(a);
            return JE;
        }
        rt->line = x->line;
        rc = jbinop(rt, x->op, a, b, out);
        jv_decref(a);
        jv_decref(b);
        return rc;
    }
    case JN_NEG:
    case JN_POS: {
        jv a;
        if (ev(rt, F, x->a, &a)) return JE;
        rt->line = x->line;
        rc = 0;
        if (a.kind == JV_INT) {
            if (x->kind == JN_NEG && a.u.i == INT64_MIN) rc = num_overflow(rt);
            else *out = jv_int(x->kind == JN_NEG ? -a.u.i : a.u.i);
        } else if (a.kind == JV_BOOL) {
            *out = jv_int(x->kind == JN_NEG ? -a.u.b : a.u.b);
        } else if (a.kind == JV_FLOAT) {
            *out = jv_float(x->kind == JN_NEG ? -a.u.f : a.u.f);
        } else if (a.kind == JV_UNDEF || a.kind == JV_MISSING) {
            rc = jv_undef_fail(rt, a);
        } else {
            rc = jfail(rt, "bad operand type for unary %c: '%s'", x->kind == JN_NEG ? '-' : '+', py_typename(a));
        }
        jv_decref(a);
        return rc;
    }
    case JN_NOT: {
        jv a;
        if (ev(rt, F, x->a, &a)) return JE;
        *out = jv_bool(!py_truthy(a));
        jv_decref(a);
        return 0;
    }
    case JN_AND:
    case JN_OR: {
        jv a;
        if (ev(rt, F, x->a, &a)) return JE;
        int t = py_truthy(a);
        if ((x->kind == JN_AND) != t) { /* and: falsy a; or: truthy a */
            *out = a;
            return 0;
        }
        jv_decref(a);
        return ev(rt, F, x->b, out);
    }
    case JN_COMPARE: {
        jv left;
        if (ev(rt, F, x->a, &left)) return JE;
        int r = 1;
        for (int i = 0; i < x->ln[0] && r; i++) {
            jv right;
            if (ev(rt, F, x->l[0][i], &right)) {
                jv_decref(left);
                return JE;
            }
            rt->line = x->line;
            if (compare(rt, x->ops[i], left, right, &r)) {
                jv_decref(left);
                jv_decref(right);
                return JE;
            }
            jv_decref(left);
            left = right;
        }
        jv_decref(left);
        *out = jv_bool(r);
        return 0;
    }
    case JN_COND: {
        jv t;
        if (ev(rt, F, x->a, &t)) return JE;
        int tr = py_truthy(t);
        jv_decref(t);
        if (tr) return ev(rt, F, x->b, out);
        if (x->c) return ev(rt, F, x->c, out);
        return jv_undef_msg(rt, out,
                            "the inline if-expression on line %d evaluated to false and no else section was defined.",
                            x->line);
    }
    case JN_CONCAT: {
        jbuf b = {0};
        for (int i = 0; i < x->ln[0]; i++) {
            jv v;
            if (ev(rt, F, x->l[0][i], &v)) {
                jb_free(&b);
                return JE;
            }
            rc = py_str(rt, v, &b);
            jv_decref(v);
            if (rc) {
                jb_free(&b);
                return JE;
            }
        }
        return jv_str_buf(rt, &b, out);
    }
    case JN_LIST: return ev_seq(rt, F, x, JV_LIST, out);
    case JN_TUPLE: return ev_seq(rt, F, x, JV_TUPLE, out);
    case JN_DICT: {
        jdict *d = jdict_new(rt, JV_DICT);
        if (!d) return JE;
        jv dv = jv_obj(JV_DICT, d);
        for (int i = 0; i < x->ln[0]; i++) {
            jv k, v;
            if (ev(rt, F, x->l[0][i], &k)) goto dfail;
            if (ev(rt, F, x->l[1][i], &v)) {
                jv_decref(k);
                goto dfail;
            }
            rt->line = x->line;
            if (jdict_set(rt, d, k, v)) goto dfail;
        }
        *out = dv;
        return 0;
    dfail:
        jv_decref(dv);
        return JE;
    }
    case JN_NSREF: return jfail(rt, "namespace reference used as a value");
    default: return jfail(rt, "internal error: statement node %d in an expression", x->kind);
    }
}

static int ev(jrt *rt, jframe *F, const jnode *x, jv *out)
{
    if (++rt->edepth > EDEPTH_MAX) {
        rt->edepth--;
        return jlimit(rt, "template recursion too deep");
    }
    int saved = rt->line;
    rt->line = x->line;
    int rc = ev_inner(rt, F, x, out);
    if (!rc) rt->line = saved;
    rt->edepth--;
    return rc ? JE : 0;
}

/* ------------------------------------------------------------------ statements */

static int put_value(jrt *rt, jv v, jbuf *out)
{
    if (v.kind == JV_STR) return jb_put(rt, out, jv_s(v)->s, jv_s(v)->len);
    return py_str(rt, v, out);
}

/* render body in a child scope of F into a new string */
static int render_scoped(jrt *rt, jframe *F, jnode *const *body, int n, jv *out)
{
    jframe *BF = frame_new(rt, F);
    if (!BF) return JE;
    jbuf b = {0};
    int rc = ex_body(rt, BF, body, n, &b);
    frame_release(BF);
    if (rc < 0) {
        jb_free(&b);
        return JE;
    }
    return jv_str_buf(rt, &b, out);
}

static int ex_stmt(jrt *rt, jframe *F, const jnode *x, jbuf *out)
{
    rt->line = x->line;
    if (step(rt)) return JE;
    int rc = 0;
    switch (x->kind) {
    case JN_OUTPUT:
        for (int i = 0; i < x->ln[0] && !rc; i++) {
            const jnode *e = x->l[0][i];
            jv v;
            rt->const_output = e->kind != JN_CONST && const_tree(e);
            int erc = ev(rt, F, e, &v);
            rt->const_output = 0;
            if (erc) return JE;
            rt->line = e->line;
            rc = put_value(rt, v, out);
            jv_decref(v);
        }
        return rc;
    case JN_IF: {
        jv t;
        if (ev(rt, F, x->a, &t)) return JE;
        int tr = py_truthy(t);
        jv_decref(t);
        return tr ? ex_body(rt, F, x->l[0], x->ln[0], out) : ex_body(rt, F, x->l[1], x->ln[1], out);
    }
    case JN_FOR: {
        jv it;
        if (ev(rt, F, x->b, &it)) return JE;
        rt->line = x->line;
        rc = run_for(rt, F, x, it, 0, out);
        jv_decref(it);
        return rc;
    }
    case JN_SET: {
        jv v;
        if (ev(rt, F, x->b, &v)) return JE;
        rt->line = x->line;
        return assign(rt, F, x->a, v);
    }
    case JN_SETBLOCK: {
        jv v;
        if (render_scoped(rt, F, x->l[0], x->ln[0], &v)) return JE;
        if (x->b) {
            jv f;
            rc = ev_filter(rt, F, x->b, &v, &f);
            jv_decref(v);
            if (rc) return JE;
            v = f;
        }
        return assign(rt, F, x->a, v);
    }
    case JN_FILTERBLOCK: {
        jv v, f;
        if (render_scoped(rt, F, x->l[0], x->ln[0], &v)) return JE;
        rc = ev_filter(rt, F, x->b, &v, &f);
        jv_decref(v);
        if (rc) return JE;
        rc = put_value(rt, f, out);
        jv_decref(f);
        return rc;
    }
    case JN_MACRO: {
        jv m;
        if (make_macro(rt, F, x, x->name, &m)) return JE;
        return frame_set(rt, F, x->name, m);
    }
    case JN_CALLBLOCK: {
        jv caller, callee, res;
        if (make_macro(rt, F, x, "caller", &caller)) return JE;
        const jnode *call = x->a;
        if (ev(rt, F, call->a, &callee)) {
            jv_decref(caller);
            return JE;
        }
        jargs a;
        if (ev_args(rt, F, call, &a)) {
            jv_decref(caller);
            jv_decref(callee);
            return JE;
        }
        rc = args_add(rt, &a, "caller", caller);
        rt->line = x->line;
        if (!rc) rc = jeval_call(rt, callee, &a, &res);
        args_free(&a);
        jv_decref(callee);
        if (rc) return JE;
        rc = put_value(rt, res, out);
        jv_decref(res);
        return rc;
    }
    case JN_WITH: {
        jframe *WF = frame_new(rt, F);
        if (!WF) return JE;
        for (int i = 0; i < x->ln[1] && !rc; i++) {
            jv v;
            rc = ev(rt, F, x->l[2][i], &v);
            if (!rc) rc = assign(rt, WF, x->l[1][i], v);
        }
        if (!rc) rc = ex_body(rt, WF, x->l[0], x->ln[0], out);
        frame_release(WF);
        return rc;
    }
    case JN_SCOPE: {
        jframe *SF = frame_new(rt, F);
        if (!SF) return JE;
        rc = ex_body(rt, SF, x->l[0], x->ln[0], out);
        frame_release(SF);
        return rc;
    }
    case JN_BREAK: return JX_BREAK;
    case JN_CONTINUE: return JX_CONTINUE;
    default: return jfail(rt, "internal error: expression node %d as a statement", x->kind);
    }
}

static int ex_body(jrt *rt, jframe *F, jnode *const *body, int n, jbuf *out)
{
    if (++rt->edepth > EDEPTH_MAX) {
        rt->edepth--;
        return jlimit(rt, "template recursion too deep");
    }
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) rc = ex_stmt(rt, F, body[i], out);
    rt->edepth--;
    return rc;
}

int jeval_render(jrt *rt, const tm_jinja *t, jbuf *out)
{
    int rc = ex_body(rt, rt->root, t->body, t->nbody, out);
    return rc < 0 ? JE : 0;
}

/* ------------------------------------------------------------------ render setup */

int jeval_root_new(jrt *rt)
{
    if (!rt->root && !(rt->root = frame_new(rt, NULL))) return JE;
    return 0;
}

int jeval_root_set(jrt *rt, const char *name, jv v)
{
    if (jeval_root_new(rt)) {
        jv_decref(v);
        return JE;
    }
    return frame_set(rt, rt->root, name, v);
}

void jeval_cleanup(jrt *rt)
{
    /* break reference cycles through namespaces, then drop every scope */
    for (size_t i = 0; i < rt->nnss; i++) {
        jdict *d = jv_d(rt->nss[i]);
        for (size_t k = 0; k < d->n; k++) {
            jv_decref(d->k[k]);
            jv_decref(d->v[k]);
        }
        d->n = 0;
        jv_decref(rt->nss[i]);
    }
    free(rt->nss);
    rt->nss = NULL;
    rt->nnss = 0;
    for (size_t i = 0; i < rt->nframes; i++) frame_clear(rt->frames[i]);
    if (rt->root) frame_clear(rt->root);
    for (size_t i = 0; i < rt->nframes; i++) free(rt->frames[i]);
    free(rt->frames);
    rt->frames = NULL;
    rt->nframes = 0;
    free(rt->root);
    rt->root = NULL;
}
