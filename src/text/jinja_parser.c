/* text/jinja_parser.c: tokens -> AST, following jinja2's parser.py (same grammar, same
 * precedence, same quirks: filters bind tighter than arithmetic, `**` is left-assoc,
 * a test takes one bare argument, `a if b` without else is undefined when false).
 * Filters and tests are resolved here, so an unknown one fails at compile time with its
 * line, as jinja2 does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja-impl.h"

#define PDEPTH_MAX 200 /* nesting of expressions and blocks */
#define TDEPTH_MAX 2000 /* depth of the parsed tree, chains included (a+b+c..., x|f|g..., a.b.c...): the
                           passes over it recurse (check_names, the evaluator's const_tree; the evaluator
                           itself stops at 2,500); jinja2's compiler fails on such chains at about 1,000 */

typedef struct parser {
    tm_jinja *t;
    const jtok *tk;
    size_t n, i;
    tm_err *err;
    int depth;
    int loops; /* for-loops enclosing the current statement (for break/continue) */
    const char *end_stack[64][4]; /* end tags looked for, innermost last (for messages) */
    int nend;
    const char *tag_stack[64];
    int ntag;
} parser;

typedef struct nvec {
    jnode **v;
    int n, cap;
} nvec;

static int nv_push(nvec *v, jnode *x)
{
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 8;
        jnode **p = realloc(v->v, (size_t)cap * sizeof *p);
        if (!p) return -1;
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = x;
    return 0;
}

/* ------------------------------------------------------------------ helpers */

static const jtok *cur(parser *P) { return &P->tk[P->i]; }
static const jtok *look(parser *P) { return &P->tk[P->i + 1 < P->n ? P->i + 1 : P->n - 1]; }
static const jtok *next(parser *P)
{
    const jtok *t = &P->tk[P->i];
    if (P->i + 1 < P->n) P->i++;
    return t;
}

static int is_name(const jtok *t, const char *s)
{
    return t->type == JT_NAME && strlen(s) == t->n && memcmp(t->s, s, t->n) == 0;
}
static int is_op(const jtok *t, int op) { return t->type == JT_OP && t->op == op; }

static void describe(const jtok *t, char *buf, size_t n)
{
    switch (t->type) {
    case JT_NAME: snprintf(buf, n, "%.*s", (int)(t->n > 60 ? 60 : t->n), t->s); return;
    case JT_EOF: snprintf(buf, n, "end of template"); return;
    case JT_DATA: snprintf(buf, n, "template data / text"); return;
    case JT_VAR_BEGIN: snprintf(buf, n, "begin of print statement"); return;
    case JT_VAR_END: snprintf(buf, n, "end of print statement"); return;
    case JT_BLOCK_BEGIN: snprintf(buf, n, "begin of statement block"); return;
    case JT_BLOCK_END: snprintf(buf, n, "end of statement block"); return;
    case JT_STRING: snprintf(buf, n, "string"); return;
    case JT_INT: snprintf(buf, n, "integer"); return;
    case JT_FLOAT: snprintf(buf, n, "float"); return;
    case JT_OP: snprintf(buf, n, "%s", jop_str(t->op)); return;
    }
    snprintf(buf, n, "?");
}

static int pfail_at(parser *P, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int pfail_at(parser *P, int line, const char *fmt, ...)
{
    if (P->err && P->err->code != TM_OK) return TM_E_TEMPLATE; /* keep the first error */
    char msg[TM_ERR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tm_errf(P->err, TM_E_TEMPLATE, "line %d: syntax error: %s", line, msg);
}

static int oom(parser *P) { return tm_errf(P->err, TM_E_NOMEM, "out of memory parsing the template"); }

static jnode *nn(parser *P, int kind, int line)
{
    jnode *x = ja_alloc(&P->t->arena, sizeof *x);
    if (!x) return NULL;
    x->kind = (uint8_t)kind;
    x->line = line;
    return x;
}

static char *pname(parser *P, const jtok *t) { return ja_strdup(&P->t->arena, t->s, t->n); }

static int finish_list(parser *P, nvec *v, jnode *x, int slot)
{
    if (v->n) {
        x->l[slot] = ja_alloc(&P->t->arena, (size_t)v->n * sizeof(jnode *));
        if (!x->l[slot]) {
            free(v->v);
            return oom(P);
        }
        memcpy(x->l[slot], v->v, (size_t)v->n * sizeof(jnode *));
    }
    x->ln[slot] = v->n;
    free(v->v);
    v->v = NULL;
    v->n = v->cap = 0;
    return 0;
}

static int expect_op(parser *P, int op)
{
    const jtok *t = cur(P);
    if (is_op(t, op)) {
        next(P);
        return 0;
    }
    char d[80];
    describe(t, d, sizeof d);
    return pfail_at(P, t->line, "expected token '%s', got '%s'", jop_str(op), d);
}

static int expect_type(parser *P, int type, const char *what)
{
    const jtok *t = cur(P);
    if (t->type == type) {
        next(P);
        return 0;
    }
    char d[80];
    describe(t, d, sizeof d);
    if (t->type == JT_EOF) return pfail_at(P, t->line, "unexpected end of template, expected '%s'.", what);
    return pfail_at(P, t->line, "expected token '%s', got '%s'", what, d);
}

int jconst_keep(tm_jinja *t, jv v)
{
    if (!jv_isobj(v)) return 0;
    if (t->nconsts == t->capconsts) {
        size_t cap = t->capconsts ? t->capconsts * 2 : 32;
        jobj **p = realloc(t->consts, cap * sizeof *p);
        if (!p) return -1;
        t->consts = p;
        t->capconsts = cap;
    }
    t->consts[t->nconsts++] = v.u.o;
    return 0;
}

static jnode *const_str(parser *P, const char *s, size_t n, int line)
{
    jnode *x = nn(P, JN_CONST, line);
    if (!x) return NULL;
    if (jv_str_new(NULL, s, n, &x->val)) return NULL;
    if (jconst_keep(P->t, x->val)) {
        free(x->val.u.o);
        return NULL;
    }
    return x;
}

/* ------------------------------------------------------------------ expressions */

static jnode *parse_expression(parser *P, int with_condexpr);
static jnode *parse_tuple(parser *P, int simplified, int with_condexpr, const char *extra_end,
                          int explicit_parens, int with_namespace);
static jnode *parse_primary(parser *P, int with_namespace);
static jnode *parse_postfix(parser *P, jnode *node);
static jnode *parse_filter_expr(parser *P, jnode *node);
static jnode *parse_filter(parser *P, jnode *node, int start_inline);
static jnode *parse_unary(parser *P, int with_filter);

#define ENTER(P, line) \
    do { \
        if (++(P)->depth > PDEPTH_MAX) { \
            pfail_at(P, line, "template nested more than %d levels deep", PDEPTH_MAX); \
            return NULL; \
        } \
    } while (0)
#define LEAVE(P) ((P)->depth--)

/* call arguments "(...)" into x: l[0] positional, l[1] keyword values with names, c *args,
 * d **kwargs */
static int parse_call_args(parser *P, jnode *x)
{
    int line = cur(P)->line;
    if (expect_op(P, JO_LPAREN)) return -1;
    nvec args = {0}, kwv = {0};
    const char *kwn[64];
    int nkw = 0, require_comma = 0;
    while (!is_op(cur(P), JO_RPAREN)) {
        if (require_comma) {
            if (expect_op(P, JO_COMMA)) goto fail;
            if (is_op(cur(P), JO_RPAREN)) break;
        }
        if (is_op(cur(P), JO_MUL)) {
            if (x->c || x->d) goto bad;
            next(P);
            if (!(x->c = parse_expression(P, 1))) goto fail;
        } else if (is_op(cur(P), JO_POW)) {
            if (x->d) goto bad;
            next(P);
            if (!(x->d = parse_expression(P, 1))) goto fail;
        } else if (cur(P)->type == JT_NAME && is_op(look(P), JO_ASSIGN)) {
            if (x->d) goto bad;
            if (nkw == 64) {
                pfail_at(P, line, "more than 64 keyword arguments");
                goto fail;
            }
            kwn[nkw] = pname(P, cur(P));
            next(P);
            next(P);
            jnode *v = parse_expression(P, 1);
            if (!v || !kwn[nkw]) goto fail;
            nkw++;
            if (nv_push(&kwv, v)) goto nomem;
        } else {
            if (x->c || x->d || nkw) goto bad;
            jnode *v = parse_expression(P, 1);
            if (!v) goto fail;
            if (nv_push(&args, v)) goto nomem;
        }
        require_comma = 1;
    }
    if (expect_op(P, JO_RPAREN)) goto fail;
    if (finish_list(P, &args, x, 0) || finish_list(P, &kwv, x, 1)) return -1;
    if (nkw) {
        x->names = ja_alloc(&P->t->arena, (size_t)nkw * sizeof(char *));
        if (!x->names) return oom(P), -1;
        memcpy(x->names, kwn, (size_t)nkw * sizeof(char *));
    }
    return 0;
bad:
    pfail_at(P, line, "invalid syntax for function call expression");
    goto fail;
nomem:
    oom(P);
fail:
    free(args.v);
    free(kwv.v);
    return -1;
}

static jnode *parse_call(parser *P, jnode *node)
{
    jnode *x = nn(P, JN_CALL, cur(P)->line);
    if (!x) return oom(P), NULL;
    x->a = node;
    if (parse_call_args(P, x)) return NULL;
    return x;
}

static char *dotted_name(parser *P)
{
    const jtok *t = cur(P);
    if (expect_type(P, JT_NAME, "name")) return NULL;
    char buf[256];
    size_t k = t->n < sizeof buf - 1 ? t->n : sizeof buf - 1;
    memcpy(buf, t->s, k);
    while (is_op(cur(P), JO_DOT)) {
        next(P);
        const jtok *u = cur(P);
        if (expect_type(P, JT_NAME, "name")) return NULL;
        if (k + 1 + u->n < sizeof buf - 1) {
            buf[k++] = '.';
            memcpy(buf + k, u->s, u->n);
            k += u->n;
        }
    }
    return ja_strdup(&P->t->arena, buf, k);
}

static jnode *parse_filter(parser *P, jnode *node, int start_inline)
{
    while (is_op(cur(P), JO_PIPE) || start_inline) {
        if (!start_inline) next(P);
        int line = cur(P)->line;
        char *name = dotted_name(P);
        if (!name) return NULL;
        jnode *x = nn(P, JN_FILTER, line);
        if (!x) return oom(P), NULL;
        x->a = node;
        x->name = name;
        x->fid = jfilter_id(name); /* -1 unknown, -2 unsupported: see check_names */
        if (is_op(cur(P), JO_LPAREN) && parse_call_args(P, x)) return NULL;
        node = x;
        start_inline = 0;
    }
    return node;
}

static jnode *parse_test(parser *P, jnode *node)
{
    int line = next(P)->line; /* 'is' */
    int negated = 0;
    if (is_name(cur(P), "not")) {
        next(P);
        negated = 1;
    }
    char *name = dotted_name(P);
    if (!name) return NULL;
    jnode *x = nn(P, JN_TEST, line);
    if (!x) return oom(P), NULL;
    x->a = node;
    x->name = name;
    x->fid = jtest_id(name); /* -1 unknown, -2 unsupported: see check_names */
    const jtok *t = cur(P);
    if (is_op(t, JO_LPAREN)) {
        if (parse_call_args(P, x)) return NULL;
    } else if ((t->type == JT_NAME || t->type == JT_STRING || t->type == JT_INT || t->type == JT_FLOAT ||
                is_op(t, JO_LBRACKET) || is_op(t, JO_LBRACE)) &&
               !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
        if (is_name(t, "is")) return pfail_at(P, t->line, "You cannot chain multiple tests with is"), NULL;
        jnode *arg = parse_primary(P, 0);
        if (!arg || !(arg = parse_postfix(P, arg))) return NULL;
        x->l[0] = ja_alloc(&P->t->arena, sizeof(jnode *));
        if (!x->l[0]) return oom(P), NULL;
        x->l[0][0] = arg;
        x->ln[0] = 1;
    }
    if (negated) {
        jnode *n = nn(P, JN_NOT, line);
        if (!n) return oom(P), NULL;
        n->a = x;
        return n;
    }
    return x;
}

static jnode *parse_subscribed(parser *P)
{
    int line = cur(P)->line;
    jnode *parts[3] = {NULL, NULL, NULL};
    if (is_op(cur(P), JO_COLON)) {
        next(P);
    } else {
        jnode *e = parse_expression(P, 1);
        if (!e) return NULL;
        if (!is_op(cur(P), JO_COLON)) return e;
        next(P);
        parts[0] = e;
    }
    if (!is_op(cur(P), JO_COLON) && !is_op(cur(P), JO_RBRACKET) && !is_op(cur(P), JO_COMMA)) {
        if (!(parts[1] = parse_expression(P, 1))) return NULL;
    }
    if (is_op(cur(P), JO_COLON)) {
        next(P);
        if (!is_op(cur(P), JO_RBRACKET) && !is_op(cur(P), JO_COMMA)) {
            if (!(parts[2] = parse_expression(P, 1))) return NULL;
        }
    }
    jnode *x = nn(P, JN_SLICE, line);
    if (!x) return oom(P), NULL;
    x->a = parts[0];
    x->b = parts[1];
    x->c = parts[2];
    return x;
}

static jnode *parse_subscript(parser *P, jnode *node)
{
    const jtok *t = next(P);
    if (is_op(t, JO_DOT)) {
        const jtok *a = next(P);
        if (a->type == JT_NAME) {
            jnode *x = nn(P, JN_GETATTR, t->line);
            if (!x) return oom(P), NULL;
            x->a = node;
            if (!(x->attr = pname(P, a))) return oom(P), NULL;
            return x;
        }
        if (a->type != JT_INT) return pfail_at(P, a->line, "expected name or number"), NULL;
        jnode *k = nn(P, JN_CONST, a->line), *x = nn(P, JN_GETITEM, t->line);
        if (!k || !x) return oom(P), NULL;
        k->val = jv_int(a->i);
        x->a = node;
        x->b = k;
        return x;
    }
    /* '[' */
    nvec args = {0};
    while (!is_op(cur(P), JO_RBRACKET)) {
        if (args.n && expect_op(P, JO_COMMA)) goto fail;
        jnode *s = parse_subscribed(P);
        if (!s) goto fail;
        if (nv_push(&args, s)) {
            oom(P);
            goto fail;
        }
    }
    if (expect_op(P, JO_RBRACKET)) goto fail;
    jnode *x = nn(P, JN_GETITEM, t->line);
    if (!x) {
        oom(P);
        goto fail;
    }
    x->a = node;
    if (args.n == 1) {
        x->b = args.v[0];
        free(args.v);
    } else {
        jnode *tu = nn(P, JN_TUPLE, t->line);
        if (!tu || finish_list(P, &args, tu, 0)) goto fail;
        x->b = tu;
    }
    return x;
fail:
    free(args.v);
    return NULL;
}

static jnode *parse_postfix(parser *P, jnode *node)
{
    for (;;) {
        const jtok *t = cur(P);
        if (is_op(t, JO_DOT) || is_op(t, JO_LBRACKET)) node = parse_subscript(P, node);
        else if (is_op(t, JO_LPAREN)) node = parse_call(P, node);
        else break;
        if (!node) return NULL;
    }
    return node;
}

static jnode *parse_filter_expr(parser *P, jnode *node)
{
    for (;;) {
        const jtok *t = cur(P);
        if (is_op(t, JO_PIPE)) node = parse_filter(P, node, 0);
        else if (is_name(t, "is")) node = parse_test(P, node);
        else if (is_op(t, JO_LPAREN)) node = parse_call(P, node);
        else break;
        if (!node) return NULL;
    }
    return node;
}

static jnode *parse_list(parser *P)
{
    int line = next(P)->line;
    nvec items = {0};
    while (!is_op(cur(P), JO_RBRACKET)) {
        if (items.n && expect_op(P, JO_COMMA)) goto fail;
        if (is_op(cur(P), JO_RBRACKET)) break;
        jnode *e = parse_expression(P, 1);
        if (!e) goto fail;
        if (nv_push(&items, e)) {
            oom(P);
            goto fail;
        }
    }
    if (expect_op(P, JO_RBRACKET)) goto fail;
    jnode *x = nn(P, JN_LIST, line);
    if (!x || finish_list(P, &items, x, 0)) goto fail;
    return x;
fail:
    free(items.v);
    return NULL;
}

static jnode *parse_dict(parser *P)
{
    int line = next(P)->line;
    nvec keys = {0}, vals = {0};
    while (!is_op(cur(P), JO_RBRACE)) {
        if (keys.n && expect_op(P, JO_COMMA)) goto fail;
        if (is_op(cur(P), JO_RBRACE)) break;
        jnode *k = parse_expression(P, 1);
        if (!k || expect_op(P, JO_COLON)) goto fail;
        jnode *v = parse_expression(P, 1);
        if (!v) goto fail;
        if (nv_push(&keys, k) || nv_push(&vals, v)) {
            oom(P);
            goto fail;
        }
    }
    if (expect_op(P, JO_RBRACE)) goto fail;
    jnode *x = nn(P, JN_DICT, line);
    if (!x || finish_list(P, &keys, x, 0) || finish_list(P, &vals, x, 1)) goto fail;
    return x;
fail:
    free(keys.v);
    free(vals.v);
    return NULL;
}

static jnode *parse_primary(parser *P, int with_namespace)
{
    const jtok *t = cur(P);
    ENTER(P, t->line);
    jnode *x = NULL;
    if (t->type == JT_NAME) {
        next(P);
        if (is_name(t, "true") || is_name(t, "True") || is_name(t, "false") || is_name(t, "False")) {
            if ((x = nn(P, JN_CONST, t->line))) x->val = jv_bool(t->s[0] == 't' || t->s[0] == 'T');
        } else if (is_name(t, "none") || is_name(t, "None")) {
            if ((x = nn(P, JN_CONST, t->line))) x->val = jv_none();
        } else if (with_namespace && is_op(cur(P), JO_DOT)) {
            next(P);
            const jtok *a = cur(P);
            if (expect_type(P, JT_NAME, "name")) goto out;
            if ((x = nn(P, JN_NSREF, t->line))) {
                x->name = pname(P, t);
                x->attr = pname(P, a);
            }
        } else {
            if ((x = nn(P, JN_NAME, t->line))) x->name = pname(P, t);
        }
        if (!x) oom(P);
    } else if (t->type == JT_STRING) {
        next(P);
        if (cur(P)->type == JT_STRING) { /* adjacent literals concatenate */
            jbuf b = {0};
            jb_put(NULL, &b, t->s, t->n);
            while (cur(P)->type == JT_STRING) {
                jb_put(NULL, &b, cur(P)->s, cur(P)->n);
                next(P);
            }
            x = const_str(P, b.p ? b.p : "", b.n, t->line);
            jb_free(&b);
        } else {
            x = const_str(P, t->s, t->n, t->line);
        }
        if (!x) oom(P);
    } else if (t->type == JT_INT || t->type == JT_FLOAT) {
        next(P);
        if ((x = nn(P, JN_CONST, t->line))) x->val = t->type == JT_INT ? jv_int(t->i) : jv_float(t->f);
        else oom(P);
    } else if (is_op(t, JO_LPAREN)) {
        next(P);
        x = parse_tuple(P, 0, 1, NULL, 1, 0);
        if (x && expect_op(P, JO_RPAREN)) x = NULL;
    } else if (is_op(t, JO_LBRACKET)) {
        x = parse_list(P);
    } else if (is_op(t, JO_LBRACE)) {
        x = parse_dict(P);
    } else {
        char d[80];
        describe(t, d, sizeof d);
        if (t->type == JT_EOF) pfail_at(P, t->line, "unexpected end of template");
        else pfail_at(P, t->line, "unexpected '%s'", d);
    }
out:
    LEAVE(P);
    return x;
}

static jnode *unary_node(parser *P, int kind, int line, jnode *a)
{
    jnode *x = nn(P, kind, line);
    if (!x) return oom(P), NULL;
    x->a = a;
    return x;
}

static jnode *parse_unary(parser *P, int with_filter)
{
    const jtok *t = cur(P);
    ENTER(P, t->line);
    jnode *node;
    if (is_op(t, JO_SUB) || is_op(t, JO_ADD)) {
        next(P);
        jnode *a = parse_unary(P, 0);
        node = a ? unary_node(P, is_op(t, JO_SUB) ? JN_NEG : JN_POS, t->line, a) : NULL;
    } else {
        node = parse_primary(P, 0);
    }
    if (node) node = parse_postfix(P, node);
    if (node && with_filter) node = parse_filter_expr(P, node);
    LEAVE(P);
    return node;
}

static jnode *binop(parser *P, int kind, int op, int line, jnode *a, jnode *b)
{
    jnode *x = nn(P, kind, line);
    if (!x) return oom(P), NULL;
    x->op = (uint8_t)op;
    x->a = a;
    x->b = b;
    return x;
}

static jnode *parse_pow(parser *P)
{
    int line = cur(P)->line;
    jnode *left = parse_unary(P, 1);
    while (left && is_op(cur(P), JO_POW)) {
        next(P);
        jnode *right = parse_unary(P, 1);
        if (!right) return NULL;
        left = binop(P, JN_BINOP, JO_POW, line, left, right);
        line = cur(P)->line;
    }
    return left;
}

static jnode *parse_math2(parser *P)
{
    int line = cur(P)->line;
    jnode *left = parse_pow(P);
    while (left && (is_op(cur(P), JO_MUL) || is_op(cur(P), JO_DIV) || is_op(cur(P), JO_FLOORDIV) ||
                    is_op(cur(P), JO_MOD))) {
        int op = next(P)->op;
        jnode *right = parse_pow(P);
        if (!right) return NULL;
        left = binop(P, JN_BINOP, op, line, left, right);
        line = cur(P)->line;
    }
    return left;
}

static jnode *parse_concat(parser *P)
{
    int line = cur(P)->line;
    jnode *first = parse_math2(P);
    if (!first || !is_op(cur(P), JO_TILDE)) return first;
    nvec args = {0};
    if (nv_push(&args, first)) return oom(P), NULL;
    while (is_op(cur(P), JO_TILDE)) {
        next(P);
        jnode *e = parse_math2(P);
        if (!e || nv_push(&args, e)) {
            if (e) oom(P);
            free(args.v);
            return NULL;
        }
    }
    jnode *x = nn(P, JN_CONCAT, line);
    if (!x || finish_list(P, &args, x, 0)) {
        free(args.v);
        return NULL;
    }
    return x;
}

static jnode *parse_math1(parser *P)
{
    int line = cur(P)->line;
    jnode *left = parse_concat(P);
    while (left && (is_op(cur(P), JO_ADD) || is_op(cur(P), JO_SUB))) {
        int op = next(P)->op;
        jnode *right = parse_concat(P);
        if (!right) return NULL;
        left = binop(P, JN_BINOP, op, line, left, right);
        line = cur(P)->line;
    }
    return left;
}

static jnode *parse_compare(parser *P)
{
    int line = cur(P)->line;
    jnode *expr = parse_math1(P);
    if (!expr) return NULL;
    nvec operands = {0};
    uint8_t ops[64];
    for (;;) {
        const jtok *t = cur(P);
        int op = -1;
        if (t->type == JT_OP && (t->op == JO_EQ || t->op == JO_NE || t->op == JO_LT || t->op == JO_LTEQ ||
                                 t->op == JO_GT || t->op == JO_GTEQ)) {
            op = t->op;
            next(P);
        } else if (is_name(t, "in")) {
            op = JO_IN;
            next(P);
        } else if (is_name(t, "not") && is_name(look(P), "in")) {
            op = JO_NOTIN;
            next(P);
            next(P);
        } else {
            break;
        }
        if (operands.n == 64) {
            pfail_at(P, t->line, "more than 64 chained comparisons");
            goto fail;
        }
        jnode *e = parse_math1(P);
        if (!e) goto fail;
        if (nv_push(&operands, e)) {
            oom(P);
            goto fail;
        }
        ops[operands.n - 1] = (uint8_t)op;
        line = cur(P)->line;
    }
    if (!operands.n) return expr;
    jnode *x = nn(P, JN_COMPARE, line);
    if (!x) {
        oom(P);
        goto fail;
    }
    x->a = expr;
    x->ops = ja_alloc(&P->t->arena, (size_t)operands.n);
    if (!x->ops) {
        oom(P);
        goto fail;
    }
    memcpy(x->ops, ops, (size_t)operands.n);
    if (finish_list(P, &operands, x, 0)) return NULL;
    return x;
fail:
    free(operands.v);
    return NULL;
}

static jnode *parse_not(parser *P)
{
    if (is_name(cur(P), "not")) {
        int line = next(P)->line;
        ENTER(P, line);
        jnode *a = parse_not(P);
        LEAVE(P);
        return a ? unary_node(P, JN_NOT, line, a) : NULL;
    }
    return parse_compare(P);
}

static jnode *parse_and(parser *P)
{
    int line = cur(P)->line;
    jnode *left = parse_not(P);
    while (left && is_name(cur(P), "and")) {
        next(P);
        jnode *right = parse_not(P);
        if (!right) return NULL;
        left = binop(P, JN_AND, 0, line, left, right);
        line = cur(P)->line;
    }
    return left;
}

static jnode *parse_or(parser *P)
{
    int line = cur(P)->line;
    jnode *left = parse_and(P);
    while (left && is_name(cur(P), "or")) {
        next(P);
        jnode *right = parse_and(P);
        if (!right) return NULL;
        left = binop(P, JN_OR, 0, line, left, right);
        line = cur(P)->line;
    }
    return left;
}

static jnode *parse_condexpr(parser *P)
{
    int line = cur(P)->line;
    jnode *expr1 = parse_or(P);
    while (expr1 && is_name(cur(P), "if")) {
        next(P);
        ENTER(P, line);
        jnode *expr2 = parse_or(P), *expr3 = NULL;
        if (expr2 && is_name(cur(P), "else")) {
            next(P);
            expr3 = parse_condexpr(P);
            if (!expr3) expr2 = NULL;
        }
        LEAVE(P);
        if (!expr2) return NULL;
        jnode *x = nn(P, JN_COND, line);
        if (!x) return oom(P), NULL;
        x->a = expr2;
        x->b = expr1;
        x->c = expr3;
        expr1 = x;
        line = cur(P)->line;
    }
    return expr1;
}

static jnode *parse_expression(parser *P, int with_condexpr)
{
    ENTER(P, cur(P)->line);
    jnode *x = with_condexpr ? parse_condexpr(P) : parse_or(P);
    LEAVE(P);
    return x;
}

static int is_tuple_end(parser *P, const char *extra_end)
{
    const jtok *t = cur(P);
    if (t->type == JT_VAR_END || t->type == JT_BLOCK_END || is_op(t, JO_RPAREN)) return 1;
    return extra_end && is_name(t, extra_end);
}

static jnode *parse_tuple(parser *P, int simplified, int with_condexpr, const char *extra_end,
                          int explicit_parens, int with_namespace)
{
    int line = cur(P)->line;
    nvec args = {0};
    int is_tuple = 0;
    for (;;) {
        if (args.n && expect_op(P, JO_COMMA)) goto fail;
        if (is_tuple_end(P, extra_end)) break;
        jnode *e = simplified ? parse_primary(P, with_namespace) : parse_expression(P, with_condexpr);
        if (!e) goto fail;
        if (nv_push(&args, e)) {
            oom(P);
            goto fail;
        }
        if (is_op(cur(P), JO_COMMA)) is_tuple = 1;
        else break;
        line = cur(P)->line;
    }
    if (!is_tuple) {
        if (args.n) {
            jnode *x = args.v[0];
            free(args.v);
            return x;
        }
        if (!explicit_parens) {
            char d[80];
            describe(cur(P), d, sizeof d);
            pfail_at(P, cur(P)->line, "Expected an expression, got '%s'", d);
            goto fail;
        }
    }
    jnode *x = nn(P, JN_TUPLE, line);
    if (!x) {
        oom(P);
        goto fail;
    }
    if (finish_list(P, &args, x, 0)) return NULL;
    return x;
fail:
    free(args.v);
    return NULL;
}

/* ------------------------------------------------------------------ statements */

static int subparse(parser *P, const char *const *end_tokens, nvec *body);

static int can_assign(const jnode *x)
{
    if (x->kind == JN_NAME || x->kind == JN_NSREF) return 1;
    if (x->kind != JN_TUPLE) return 0;
    for (int i = 0; i < x->ln[0]; i++)
        if (!can_assign(x->l[0][i])) return 0;
    return 1;
}

static const char *kind_name(const jnode *x)
{
    switch (x->kind) {
    case JN_CONST: return "const";
    case JN_CALL: return "call";
    case JN_GETATTR: return "getattr";
    case JN_GETITEM: return "getitem";
    case JN_LIST: return "list";
    case JN_DICT: return "dict";
    case JN_FILTER: return "filter";
    case JN_TEST: return "test";
    default: return "expression";
    }
}

static jnode *parse_assign_target(parser *P, int with_tuple, int name_only, const char *extra_end,
                                  int with_namespace)
{
    jnode *target;
    if (name_only) {
        const jtok *t = cur(P);
        if (expect_type(P, JT_NAME, "name")) return NULL;
        target = nn(P, JN_NAME, t->line);
        if (!target) return oom(P), NULL;
        target->name = pname(P, t);
        return target;
    }
    target = with_tuple ? parse_tuple(P, 1, 1, extra_end, 0, with_namespace) : parse_primary(P, with_namespace);
    if (!target) return NULL;
    if (!can_assign(target)) return pfail_at(P, target->line, "can't assign to '%s'", kind_name(target)), NULL;
    return target;
}

/* parse_statements: "[:] %}" body up to one of end_tokens; the current token is then the
 * end tag's name (consumed when drop_needle) */
static int parse_statements(parser *P, const char *const *end_tokens, int drop_needle, jnode *x, int slot)
{
    if (is_op(cur(P), JO_COLON)) next(P);
    if (expect_type(P, JT_BLOCK_END, "end of statement block")) return -1;
    nvec body = {0};
    if (subparse(P, end_tokens, &body)) {
        free(body.v);
        return -1;
    }
    if (cur(P)->type == JT_EOF) {
        free(body.v);
        char looking[160] = "";
        for (int i = 0; end_tokens[i]; i++) {
            size_t k = strlen(looking);
            snprintf(looking + k, sizeof looking - k, "%s'%s'", i ? " or " : "", end_tokens[i]);
        }
        if (P->ntag)
            return pfail_at(P, cur(P)->line,
                            "Unexpected end of template. Jinja was looking for the following tags: %s. "
                            "The innermost block that needs to be closed is '%s'.",
                            looking, P->tag_stack[P->ntag - 1]);
        return pfail_at(P, cur(P)->line, "Unexpected end of template. Jinja was looking for the following tags: %s.",
                        looking);
    }
    if (drop_needle) next(P);
    return finish_list(P, &body, x, slot);
}

static int uses_name(const jnode *x, const char *name)
{
    if (!x) return 0;
    if (x->kind == JN_NAME && strcmp(x->name, name) == 0) return 1;
    if (uses_name(x->a, name) || uses_name(x->b, name) || uses_name(x->c, name) || uses_name(x->d, name)) return 1;
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < x->ln[s]; i++)
            if (uses_name(x->l[s][i], name)) return 1;
    return 0;
}

/* "(a, b=default, ...)" into x->names / x->nnames, defaults in l[1] (aligned to the last) */
static int parse_signature(parser *P, jnode *x)
{
    if (expect_op(P, JO_LPAREN)) return -1;
    const char *names[256];
    int n = 0;
    nvec defaults = {0};
    while (!is_op(cur(P), JO_RPAREN)) {
        if (n && expect_op(P, JO_COMMA)) goto fail;
        jnode *arg = parse_assign_target(P, 0, 1, NULL, 0);
        if (!arg) goto fail;
        if (n == 256) {
            pfail_at(P, arg->line, "more than 256 parameters");
            goto fail;
        }
        if (is_op(cur(P), JO_ASSIGN)) {
            next(P);
            jnode *d = parse_expression(P, 1);
            if (!d) goto fail;
            if (nv_push(&defaults, d)) {
                oom(P);
                goto fail;
            }
        } else if (defaults.n) {
            pfail_at(P, arg->line, "non-default argument follows default argument");
            goto fail;
        }
        names[n++] = arg->name;
    }
    if (expect_op(P, JO_RPAREN)) goto fail;
    x->nnames = n;
    if (n) {
        x->names = ja_alloc(&P->t->arena, (size_t)n * sizeof(char *));
        if (!x->names) {
            oom(P);
            goto fail;
        }
        memcpy(x->names, names, (size_t)n * sizeof(char *));
    }
    return finish_list(P, &defaults, x, 1);
fail:
    free(defaults.v);
    return -1;
}

static void mark_special_names(jnode *x)
{
    for (int i = 0; i < x->ln[0]; i++) {
        if (uses_name(x->l[0][i], "caller")) x->flags |= JNF_USES_CALLER;
        if (uses_name(x->l[0][i], "kwargs")) x->flags |= JNF_USES_KWARGS;
        if (uses_name(x->l[0][i], "varargs")) x->flags |= JNF_USES_VARARGS;
    }
}

static const char *const END_FOR[] = {"endfor", "else", NULL};
static const char *const END_FOR2[] = {"endfor", NULL};
static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const END_IF2[] = {"endif", NULL};
static const char *const END_SET[] = {"endset", NULL};
static const char *const END_MACRO[] = {"endmacro", NULL};
static const char *const END_CALL[] = {"endcall", NULL};
static const char *const END_FILTER[] = {"endfilter", NULL};
static const char *const END_WITH[] = {"endwith", NULL};
static const char *const END_GEN[] = {"endgeneration", NULL};
static const char *const END_BLOCK[] = {"endblock", NULL};

static jnode *parse_for(parser *P)
{
    int line = next(P)->line;
    jnode *x = nn(P, JN_FOR, line);
    if (!x) return oom(P), NULL;
    if (!(x->a = parse_assign_target(P, 1, 0, "in", 0))) return NULL;
    const jtok *t = cur(P);
    if (!is_name(t, "in")) {
        char d[80];
        describe(t, d, sizeof d);
        return pfail_at(P, t->line, "expected token 'in', got '%s'", d), NULL;
    }
    next(P);
    if (!(x->b = parse_tuple(P, 0, 0, "recursive", 0, 0))) return NULL;
    if (is_name(cur(P), "if")) {
        next(P);
        if (!(x->c = parse_expression(P, 1))) return NULL;
    }
    if (is_name(cur(P), "recursive")) {
        next(P);
        x->flags |= JNF_RECURSIVE;
    }
    P->loops++;
    int rc = parse_statements(P, END_FOR, 0, x, 0);
    P->loops--;
    if (rc) return NULL;
    if (is_name(next(P), "else")) {
        if (parse_statements(P, END_FOR2, 1, x, 1)) return NULL;
    }
    return x;
}

static jnode *parse_if(parser *P)
{
    int line = next(P)->line;
    jnode *result = nn(P, JN_IF, line), *node = result;
    if (!result) return oom(P), NULL;
    for (;;) {
        if (!(node->a = parse_tuple(P, 0, 0, NULL, 0, 0))) return NULL;
        if (parse_statements(P, END_IF, 0, node, 0)) return NULL;
        const jtok *t = next(P);
        if (is_name(t, "elif")) {
            jnode *e = nn(P, JN_IF, cur(P)->line);
            if (!e) return oom(P), NULL;
            node->l[1] = ja_alloc(&P->t->arena, sizeof(jnode *));
            if (!node->l[1]) return oom(P), NULL;
            node->l[1][0] = e;
            node->ln[1] = 1;
            node = e;
            continue;
        }
        if (is_name(t, "else") && parse_statements(P, END_IF2, 1, node, 1)) return NULL;
        break;
    }
    return result;
}

static jnode *parse_set(parser *P)
{
    int line = next(P)->line;
    jnode *target = parse_assign_target(P, 1, 0, NULL, 1);
    if (!target) return NULL;
    if (is_op(cur(P), JO_ASSIGN)) {
        next(P);
        jnode *x = nn(P, JN_SET, line);
        if (!x) return oom(P), NULL;
        x->a = target;
        if (!(x->b = parse_tuple(P, 0, 1, NULL, 0, 0))) return NULL;
        return x;
    }
    jnode *x = nn(P, JN_SETBLOCK, line);
    if (!x) return oom(P), NULL;
    x->a = target;
    if (is_op(cur(P), JO_PIPE) && !(x->b = parse_filter(P, NULL, 0))) return NULL;
    if (parse_statements(P, END_SET, 1, x, 0)) return NULL;
    return x;
}

static jnode *parse_macro(parser *P)
{
    int line = next(P)->line;
    jnode *x = nn(P, JN_MACRO, line);
    if (!x) return oom(P), NULL;
    jnode *name = parse_assign_target(P, 0, 1, NULL, 0);
    if (!name) return NULL;
    x->name = name->name;
    if (parse_signature(P, x)) return NULL;
    int loops = P->loops;
    P->loops = 0;
    int rc = parse_statements(P, END_MACRO, 1, x, 0);
    P->loops = loops;
    if (rc) return NULL;
    mark_special_names(x);
    return x;
}

static jnode *parse_call_block(parser *P)
{
    int line = next(P)->line;
    jnode *x = nn(P, JN_CALLBLOCK, line);
    if (!x) return oom(P), NULL;
    x->name = "caller";
    if (is_op(cur(P), JO_LPAREN) && parse_signature(P, x)) return NULL;
    jnode *call = parse_expression(P, 1);
    if (!call) return NULL;
    if (call->kind != JN_CALL) return pfail_at(P, line, "expected call"), NULL;
    x->a = call;
    int loops = P->loops;
    P->loops = 0;
    int rc = parse_statements(P, END_CALL, 1, x, 0);
    P->loops = loops;
    if (rc) return NULL;
    mark_special_names(x);
    return x;
}

static jnode *parse_filter_block(parser *P)
{
    int line = next(P)->line;
    jnode *x = nn(P, JN_FILTERBLOCK, line);
    if (!x) return oom(P), NULL;
    if (!(x->b = parse_filter(P, NULL, 1))) return NULL;
    if (parse_statements(P, END_FILTER, 1, x, 0)) return NULL;
    return x;
}

static jnode *parse_with(parser *P)
{
    int line = next(P)->line;
    jnode *x = nn(P, JN_WITH, line);
    if (!x) return oom(P), NULL;
    nvec targets = {0}, values = {0};
    while (cur(P)->type != JT_BLOCK_END) {
        if (targets.n && expect_op(P, JO_COMMA)) goto fail;
        jnode *t = parse_assign_target(P, 1, 0, NULL, 0);
        if (!t || expect_op(P, JO_ASSIGN)) goto fail;
        jnode *v = parse_expression(P, 1);
        if (!v) goto fail;
        if (nv_push(&targets, t) || nv_push(&values, v)) {
            oom(P);
            goto fail;
        }
    }
    if (finish_list(P, &targets, x, 1) || finish_list(P, &values, x, 2)) return NULL;
    if (parse_statements(P, END_WITH, 1, x, 0)) return NULL;
    return x;
fail:
    free(targets.v);
    free(values.v);
    return NULL;
}

static jnode *parse_print(parser *P)
{
    int line = next(P)->line;
    jnode *x = nn(P, JN_OUTPUT, line);
    if (!x) return oom(P), NULL;
    nvec items = {0};
    while (cur(P)->type != JT_BLOCK_END) {
        if (items.n && expect_op(P, JO_COMMA)) goto fail;
        jnode *e = parse_expression(P, 1);
        if (!e) goto fail;
        if (nv_push(&items, e)) {
            oom(P);
            goto fail;
        }
    }
    if (finish_list(P, &items, x, 0)) return NULL;
    return x;
fail:
    free(items.v);
    return NULL;
}

static jnode *parse_scope(parser *P, const char *const *end)
{
    int line = next(P)->line;
    jnode *x = nn(P, JN_SCOPE, line);
    if (!x) return oom(P), NULL;
    if (parse_statements(P, end, 1, x, 0)) return NULL;
    return x;
}

static jnode *parse_block(parser *P)
{
    int line = next(P)->line;
    const jtok *name = cur(P);
    if (expect_type(P, JT_NAME, "name")) return NULL;
    if (is_name(cur(P), "scoped")) next(P);
    if (is_name(cur(P), "required")) next(P);
    jnode *x = nn(P, JN_SCOPE, line);
    if (!x) return oom(P), NULL;
    if (parse_statements(P, END_BLOCK, 1, x, 0)) return NULL;
    if (cur(P)->type == JT_NAME && cur(P)->n == name->n && memcmp(cur(P)->s, name->s, name->n) == 0) next(P);
    return x;
}

static jnode *parse_statement(parser *P)
{
    const jtok *t = cur(P);
    if (t->type != JT_NAME) return pfail_at(P, t->line, "tag name expected"), NULL;
    char tag[64];
    snprintf(tag, sizeof tag, "%.*s", (int)(t->n < 60 ? t->n : 60), t->s);
    if (P->ntag == 64) return pfail_at(P, t->line, "blocks nested more than 64 deep"), NULL;
    P->tag_stack[P->ntag++] = is_name(t, "for") ? "for" : is_name(t, "if") ? "if" : is_name(t, "macro") ? "macro"
                            : is_name(t, "set") ? "set" : is_name(t, "call") ? "call" : is_name(t, "filter") ? "filter"
                            : is_name(t, "with") ? "with" : is_name(t, "generation") ? "generation"
                            : is_name(t, "block") ? "block" : "tag";
    ENTER(P, t->line);
    jnode *x = NULL;
    if (is_name(t, "for")) x = parse_for(P);
    else if (is_name(t, "if")) x = parse_if(P);
    else if (is_name(t, "set")) x = parse_set(P);
    else if (is_name(t, "macro")) x = parse_macro(P);
    else if (is_name(t, "call")) x = parse_call_block(P);
    else if (is_name(t, "filter")) x = parse_filter_block(P);
    else if (is_name(t, "with")) x = parse_with(P);
    else if (is_name(t, "print")) x = parse_print(P);
    else if (is_name(t, "generation")) x = parse_scope(P, END_GEN);
    else if (is_name(t, "block")) x = parse_block(P);
    else if (is_name(t, "break") || is_name(t, "continue")) {
        if (!P->loops) pfail_at(P, t->line, "'%s' outside loop", tag);
        else if ((x = nn(P, is_name(t, "break") ? JN_BREAK : JN_CONTINUE, t->line)) == NULL) oom(P);
        else next(P);
    } else if (is_name(t, "extends") || is_name(t, "include") || is_name(t, "import") || is_name(t, "from")) {
        pfail_at(P, t->line, "'{%% %s %%}' is not supported: chat templates are rendered without a loader", tag);
    } else if (is_name(t, "autoescape")) {
        pfail_at(P, t->line, "'{%% autoescape %%}' is not supported");
    } else {
        /* jinja2's message for an unknown tag */
        char looking[160] = "";
        int expected = 0;
        for (int i = 0; i < P->nend; i++)
            for (int k = 0; k < 4 && P->end_stack[i][k]; k++)
                if (strcmp(P->end_stack[i][k], tag) == 0) expected = 1;
        if (P->nend)
            for (int k = 0; k < 4 && P->end_stack[P->nend - 1][k]; k++) {
                size_t m = strlen(looking);
                snprintf(looking + m, sizeof looking - m, "%s'%s'", k ? " or " : "", P->end_stack[P->nend - 1][k]);
            }
        P->ntag--; /* the unknown tag is not a block */
        char msg[400];
        int m = snprintf(msg, sizeof msg, "Encountered unknown tag '%s'.", tag);
        if (looking[0] && m > 0 && (size_t)m < sizeof msg)
            m += snprintf(msg + m, sizeof msg - (size_t)m,
                          expected ? " You probably made a nesting mistake. Jinja is expecting this tag, but "
                                     "currently looking for %s."
                                   : " Jinja was looking for the following tags: %s.",
                          looking);
        if (P->ntag && m > 0 && (size_t)m < sizeof msg)
            snprintf(msg + m, sizeof msg - (size_t)m, " The innermost block that needs to be closed is '%s'.",
                     P->tag_stack[P->ntag - 1]);
        LEAVE(P);
        pfail_at(P, t->line, "%s", msg);
        return NULL;
    }
    LEAVE(P);
    P->ntag--;
    return x;
}

static int subparse(parser *P, const char *const *end_tokens, nvec *body)
{
    int pushed = 0;
    if (end_tokens) {
        if (P->nend == 64) return pfail_at(P, cur(P)->line, "blocks nested more than 64 deep");
        memset(P->end_stack[P->nend], 0, sizeof P->end_stack[0]);
        for (int i = 0; i < 4 && end_tokens[i]; i++) P->end_stack[P->nend][i] = end_tokens[i];
        P->nend++;
        pushed = 1;
    }
    int rc = 0;
    jnode *out = NULL; /* the Output node being filled */
    nvec items = {0};
#define FLUSH() \
    do { \
        if (out) { \
            if (finish_list(P, &items, out, 0) || nv_push(body, out)) { rc = -1; goto done; } \
            out = NULL; \
        } \
    } while (0)
    for (;;) {
        const jtok *t = cur(P);
        if (t->type == JT_EOF) break;
        if (t->type == JT_DATA || t->type == JT_VAR_BEGIN) {
            if (!out && !(out = nn(P, JN_OUTPUT, t->line))) {
                rc = oom(P);
                goto done;
            }
            jnode *e;
            if (t->type == JT_DATA) {
                next(P);
                e = const_str(P, t->s, t->n, t->line);
                if (!e) {
                    rc = oom(P);
                    goto done;
                }
            } else {
                next(P);
                e = parse_tuple(P, 0, 1, NULL, 0, 0);
                if (!e || expect_type(P, JT_VAR_END, "end of print statement")) {
                    rc = -1;
                    goto done;
                }
            }
            if (nv_push(&items, e)) {
                rc = oom(P);
                goto done;
            }
        } else if (t->type == JT_BLOCK_BEGIN) {
            FLUSH();
            next(P);
            if (end_tokens) {
                int hit = 0;
                for (int i = 0; end_tokens[i]; i++)
                    if (is_name(cur(P), end_tokens[i])) hit = 1;
                if (hit) goto done;
            }
            jnode *s = parse_statement(P);
            if (!s) {
                rc = -1;
                goto done;
            }
            if (nv_push(body, s)) {
                rc = oom(P);
                goto done;
            }
            if (expect_type(P, JT_BLOCK_END, "end of statement block")) {
                rc = -1;
                goto done;
            }
        } else {
            char d[80];
            describe(t, d, sizeof d);
            rc = pfail_at(P, t->line, "unexpected '%s'", d);
            goto done;
        }
    }
    FLUSH();
done:
#undef FLUSH
    free(items.v);
    if (pushed) P->nend--;
    return rc ? -1 : 0;
}

/* The tree's depth, without recursion (level by level): PDEPTH_MAX bounds
 * what the parser nests by recursing, but left-deep chains are built by
 * loops, and 300,000 `+1`s overflowed the C stack of the passes after it. */
static int check_depth(parser *P, jnode *const *body, int n)
{
    nvec level = {0}, next = {0}; /* the tree a level at a time: its nodes at depth d, then d + 1 */
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) rc = nv_push(&level, body[i]) ? oom(P) : 0;
    for (int d = 1; level.n && !rc; d++) {
        if (d > TDEPTH_MAX) {
            rc = pfail_at(P, level.v[0]->line, "template nested more than %d levels deep", TDEPTH_MAX);
            break;
        }
        next.n = 0;
        for (int i = 0; i < level.n && !rc; i++) {
            jnode *x = level.v[i], *ab[4] = {x->a, x->b, x->c, x->d};
            for (int k = 0; k < 4 && !rc; k++)
                if (ab[k] && nv_push(&next, ab[k])) rc = oom(P);
            for (int k = 0; k < 3 && !rc; k++)
                for (int m = 0; m < x->ln[k] && !rc; m++)
                    if (x->l[k][m] && nv_push(&next, x->l[k][m])) rc = oom(P);
        }
        nvec t = level;
        level = next;
        next = t;
    }
    free(level.v);
    free(next.v);
    return rc;
}

/* A filter or test unknown to tandem (fid -1) or known to jinja2 but not
 * implemented here (-2) fails at compile time, as jinja2 3 does, except
 * inside an if statement (test, body, elif and else) or a conditional
 * expression at the same scope: jinja2 checks those when they run (its
 * compiler's "soft" frames; a for body, macro, call or filter block, set
 * block, with body, generation or block inside them starts a frame that is
 * not soft again). So a template whose untaken branch names a filter jinja2
 * does not have (StepFun's `fromjson`) renders; the evaluator fails when such
 * a node runs (ev_filter, JN_TEST). soft: this node's frame is soft. */
static int check_names(parser *P, const jnode *x, int soft)
{
    if (!x) return 0;
    if ((x->kind == JN_FILTER || x->kind == JN_TEST) && x->fid < 0 && !soft) {
        const char *what = x->kind == JN_FILTER ? "filter" : "test";
        if (x->fid == -2) return pfail_at(P, x->line, "%s '%s' is not supported", what, x->name);
        return pfail_at(P, x->line, "no %s named '%s'", what, x->name);
    }
    /* the children's softness: same: as x's; 1: soft; 0: a new frame */
    int a = soft, b = soft, c = soft, d = soft, l[3] = {soft, soft, soft};
    switch (x->kind) {
    case JN_IF:
    case JN_COND: a = b = c = l[0] = l[1] = 1; break;
    case JN_FOR: c = l[0] = l[1] = 0; break;              /* the loop's filter, body, else */
    case JN_MACRO: l[0] = l[1] = 0; break;                /* body, defaults */
    case JN_CALLBLOCK: l[0] = l[1] = 0; break;            /* the call (a) stays */
    case JN_FILTERBLOCK:
    case JN_SETBLOCK: b = l[0] = 0; break;                /* the filter and the body */
    case JN_WITH: l[0] = 0; break;                        /* the values (l[2]) stay */
    case JN_SCOPE: l[0] = 0; break;
    default: break;
    }
    if (check_names(P, x->a, a) || check_names(P, x->b, b) || check_names(P, x->c, c) || check_names(P, x->d, d))
        return -1;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < x->ln[i]; j++)
            if (check_names(P, x->l[i][j], l[i])) return -1;
    return 0;
}

int jparse(tm_jinja *t, const jtok *toks, size_t ntoks, tm_err *err)
{
    parser P = {0};
    P.t = t;
    P.tk = toks;
    P.n = ntoks;
    P.err = err;
    if (err) tm_err_clear(err);
    nvec body = {0};
    if (subparse(&P, NULL, &body)) {
        free(body.v);
        if (err && err->code == TM_OK) tm_errf(err, TM_E_TEMPLATE, "syntax error");
        return err && err->code ? err->code : TM_E_TEMPLATE;
    }
    jnode holder = {0};
    if (finish_list(&P, &body, &holder, 0)) return TM_E_NOMEM;
    t->body = holder.l[0];
    t->nbody = holder.ln[0];
    if (check_depth(&P, t->body, t->nbody)) return err && err->code ? err->code : TM_E_TEMPLATE;
    for (int i = 0; i < t->nbody; i++)
        if (check_names(&P, t->body[i], 0)) return err && err->code ? err->code : TM_E_TEMPLATE;
    return TM_OK;
}
