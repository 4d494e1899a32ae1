/* text/jinja-impl.h: internals shared by the jinja_*.c files (not a public header).
 *
 * The pieces, one file each:
 *   jinja_lexer.c    source -> tokens (whitespace control, trim_blocks, lstrip_blocks)
 *   jinja_parser.c   tokens -> AST (jinja2's parser.py grammar and precedence)
 *   jinja_value.c    values: refcounting, Python str()/repr()/==/</truthiness, JSON in/out
 *   jinja_str.c      UTF-8 and Python string semantics (codepoints, strip, split, case)
 *   jinja_eval.c     the evaluator: scopes, statements, expressions, macros, loops
 *   jinja_filters.c  filters and tests
 *   jinja_methods.c  getattr/getitem, str/dict/list methods, globals (range, namespace, ...)
 *   jinja_format.c   Python's str % args and str.format() with the format-spec mini-language
 *   jinja_render.c   entry points: compile, render, chat render
 *
 * Memory: a value (jv) is a small tagged union; strings, lists, dicts and the other
 * objects are reference counted. Every object made while rendering is charged to the
 * render's jrt (rt->live) so that a limit can stop a hostile template. Objects made by
 * the parser (string literals) are immortal: the compiled template owns them and
 * renders never touch their counts, so concurrent renders of one template are safe. */
#ifndef TM_TEXT_JINJA_IMPL_H
#define TM_TEXT_JINJA_IMPL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "text/jinja.h"

/* ------------------------------------------------------------------ values */

typedef enum jkind {
    JV_MISSING = 0, /* internal: an argument not passed; never visible to a template */
    JV_UNDEF,       /* jinja2 Undefined; o = jundef (why) or NULL */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,    /* o = jstr */
    JV_LIST,   /* o = jlist */
    JV_TUPLE,  /* o = jlist */
    JV_DICT,   /* o = jdict */
    JV_NS,     /* o = jdict: namespace() */
    JV_MACRO,  /* o = jmacro */
    JV_FUNC,   /* o = jfunc: a global function or a bound method */
    JV_LOOP,   /* o = jloop: the `loop` variable */
    JV_CYCLER, /* o = jlist-backed cycler() */
    JV_JOINER, /* o = jjoiner */
    JV_GEN,    /* o = jlist: a generator (map, select, reject, ..., reverse's iterator): true whatever it holds,
                  no len() or JSON, and iterated once (py_iter_list takes its items, leaving it empty) */
} jkind;

typedef struct jobj {
    uint32_t rc;     /* references; JOBJ_IMMORTAL: never freed by jv_decref */
    uint8_t kind;    /* jkind of the object */
    size_t acct;     /* bytes charged to rt */
    struct jrt *rt;  /* who was charged; NULL for immortal objects */
} jobj;
#define JOBJ_IMMORTAL 0xffffffffu

typedef struct jv {
    uint8_t kind; /* jkind */
    union {
        int b;
        int64_t i;
        double f;
        jobj *o;
    } u;
} jv;

typedef struct jstr {
    jobj h;
    size_t len;     /* bytes, without the NUL */
    size_t ncp;     /* code points (an invalid UTF-8 byte counts as one) */
    uint8_t markup; /* markupsafe.Markup (from |safe, |escape): + escapes the other side */
    char s[];       /* [len + 1] UTF-8, NUL-terminated */
} jstr;

typedef struct jlist { /* list or tuple */
    jobj h;
    size_t n, cap;
    jv *v;     /* [n] items (owned references) */
    int depth; /* nesting depth of containers inside, for the depth limit */
    uint8_t is_range;        /* made by range(): prints as range(start, stop[, step]) */
    uint8_t gen_iter;        /* JV_GEN: 0 a generator, 1 reversed()'s iterator (its Python type's name) */
    int64_t r_start, r_stop, r_step;
} jlist;

typedef struct jdict { /* dict or namespace; insertion ordered */
    jobj h;
    size_t n, cap;
    jv *k, *v;      /* [n] keys and values (owned references) */
    uint32_t *idx;  /* [icap] open-addressed index of entry+1 (0 = empty), built past 8 items */
    size_t icap;
    int depth;
} jdict;

typedef struct jundef {
    jobj h;
    struct jstr *msg; /* what failing on it says ("'x' is undefined"); immortal or owned */
} jundef;

typedef struct jfunc {
    jobj h;
    int id;           /* function / method id (jinja_methods.c) */
    const char *name; /* its Python name (static) */
    jv self;          /* bound receiver (owned) or JV_MISSING */
} jfunc;

typedef struct jmacro {
    jobj h;
    const struct jnode *node;   /* JN_MACRO or JN_CALLBLOCK */
    struct jframe *closure;     /* defining scope (kept alive until the render ends) */
    const char *name;
} jmacro;

typedef struct jloop {
    jobj h;
    jv items;          /* list of the (filtered) items iterated */
    size_t i;          /* index0 */
    int depth0;
    jv changed_last;   /* loop.changed() memory, JV_MISSING at first */
    const struct jnode *node; /* JN_FOR (for loop(...) in recursive loops) */
    struct jframe *frame;     /* scope the loop runs in */
} jloop;

typedef struct jjoiner {
    jobj h;
    jv sep;   /* str */
    int used;
    size_t pos; /* cycler position */
    jv items;   /* cycler items (tuple) */
} jjoiner;

#define JV_O(v, T) ((T *)(v).u.o)
static inline int jv_isobj(jv v) { return v.kind >= JV_STR || (v.kind == JV_UNDEF && v.u.o); }
static inline jv jv_missing(void) { jv v = {JV_MISSING, {0}}; return v; }
static inline jv jv_none(void) { jv v = {JV_NONE, {0}}; return v; }
static inline jv jv_bool(int b) { jv v = {JV_BOOL, {0}}; v.u.b = b != 0; return v; }
static inline jv jv_int(int64_t i) { jv v = {JV_INT, {0}}; v.u.i = i; return v; }
static inline jv jv_float(double f) { jv v = {JV_FLOAT, {0}}; v.u.f = f; return v; }
static inline jv jv_obj(int kind, void *o) { jv v = {(uint8_t)kind, {0}}; v.u.o = (jobj *)o; return v; }
static inline const jstr *jv_s(jv v) { return (const jstr *)v.u.o; }
static inline jlist *jv_l(jv v) { return (jlist *)v.u.o; }
static inline jdict *jv_d(jv v) { return (jdict *)v.u.o; }
static inline int jv_isseq(jv v) { return v.kind == JV_LIST || v.kind == JV_TUPLE; }
static inline int jv_ismap(jv v) { return v.kind == JV_DICT; }
static inline int jv_isnum(jv v) { return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL; }

void jv_incref(jv v);
void jv_decref(jv v);
static inline jv jv_ref(jv v) { jv_incref(v); return v; }

/* ------------------------------------------------------------------ output buffer */

typedef struct jbuf {
    char *p;
    size_t n, cap;
} jbuf;
void jb_free(jbuf *b);

/* ------------------------------------------------------------------ runtime */

typedef struct jframe jframe;

typedef struct jrt {
    tm_err *err;
    int line;              /* template line being evaluated, for messages */
    size_t live;           /* bytes of live objects charged */
    tm_jinja_limits lim;
    size_t steps;
    int depth;             /* macro / recursive-loop nesting */
    int edepth;            /* evaluator recursion, bounds the C stack */
    const char *date;      /* strftime_now pin, NULL = now */
    jframe *root;
    jframe **frames;       /* every frame made, freed when the render ends */
    size_t nframes, capframes;
    jv *nss;               /* namespaces made (cleared at the end: breaks cycles) */
    size_t nnss, capnss;
    int failed;            /* an error is recorded in err */
    int const_output;      /* evaluating a {{ }} made only of literals (see jinja_eval.c) */
} jrt;

#define JE (-1000) /* internal status: an error has been recorded in rt->err */

/* jfail: record "line N: <fmt>" as a TM_E_TEMPLATE error; returns JE. */
int jfail(jrt *rt, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* jlimit: record a TM_E_LIMIT error "line N: <fmt>"; returns JE. */
int jlimit(jrt *rt, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* jraise: raise_exception(msg): the message is exactly msg. */
int jraise(jrt *rt, const char *msg, size_t n);

/* allocation (rt NULL = immortal, for compile-time constants) */
void *jobj_new(jrt *rt, int kind, size_t size);
int jb_put(jrt *rt, jbuf *b, const char *s, size_t n);
int jb_puts(jrt *rt, jbuf *b, const char *s);
int jb_putc(jrt *rt, jbuf *b, char c);
int jb_printf(jrt *rt, jbuf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* strings */
int jv_str_new(jrt *rt, const char *s, size_t n, jv *out);
int jv_str_buf(jrt *rt, jbuf *b, jv *out); /* takes the buffer's bytes (b is emptied) */
int jv_str_cat(jrt *rt, const char *a, size_t na, const char *b, size_t nb, jv *out);
#define jv_str_lit(rt, lit, out) jv_str_new(rt, lit, sizeof(lit) - 1, out)

/* lists and tuples */
jlist *jlist_new(jrt *rt, int kind, size_t cap);
int jlist_push(jrt *rt, jlist *l, jv v); /* takes the reference (dropped on failure) */
int jlist_set_depth(jrt *rt, jlist *l);   /* recompute depth, fail past the limit */

/* dicts and namespaces */
jdict *jdict_new(jrt *rt, int kind);
int jdict_set(jrt *rt, jdict *d, jv k, jv v); /* takes both references */
int jdict_find(jrt *rt, const jdict *d, jv k, size_t *pos); /* 1 found, 0 not, JE unhashable */
int jdict_get_str(const jdict *d, const char *key, jv *out); /* borrowed, 1 if found */

/* undefined */
int jv_undef_msg(jrt *rt, jv *out, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int jv_undef_name(jrt *rt, const char *name, jv *out);
int jv_undef_attr(jrt *rt, jv obj, const char *attr, jv *out);
int jv_undef_item(jrt *rt, jv obj, jv key, jv *out);
int jv_undef_fail(jrt *rt, jv u); /* raise the UndefinedError for u; returns JE */

/* Python semantics */
int py_truthy(jv v);
int py_eq(jv a, jv b);
/* py_cmp: order a and b as Python does; *out is <0, 0, >0, or 2 when unordered (NaN).
 * op names the operator in the TypeError for unorderable types. */
int py_cmp(jrt *rt, jv a, jv b, const char *op, int *out);
int py_str(jrt *rt, jv v, jbuf *out);      /* str(v) */
int py_repr(jrt *rt, jv v, jbuf *out);     /* repr(v) */
int py_tostr(jrt *rt, jv v, jv *out);      /* str(v) as a string value (a new reference) */
const char *py_typename(jv v);             /* "str", "int", "NoneType", ... */
const char *py_objrepr(jv v);              /* jinja2's object_type_repr: "str object", "None" */
void py_float_repr(double f, char *buf, size_t n);
int py_len(jrt *rt, jv v, int64_t *out);
int py_hash(jrt *rt, jv v, uint64_t *out);
int py_isspace(uint32_t cp);

typedef struct jjson_opts {
    const char *indent;   /* NULL = no newlines */
    const char *item_sep; /* ", " or "," */
    const char *key_sep;  /* ": " */
    int sort_keys;
    int ensure_ascii;
} jjson_opts;
int py_json_dump(jrt *rt, jv v, const jjson_opts *o, jbuf *out);

/* cJSON -> value */
struct cJSON;
int jv_from_cjson(jrt *rt, const struct cJSON *j, jv *out);

/* ------------------------------------------------------------------ strings (jinja_str.c) */

uint32_t u8_next(const char *s, size_t n, size_t *i); /* decode at *i, advance; bad byte = 0xDC00+b */
size_t u8_put(uint32_t cp, char *out);               /* encode, returns bytes (1..4) */
size_t u8_count(const char *s, size_t n);
size_t u8_offset(const jstr *s, size_t cp);          /* byte offset of code point cp (<= ncp) */
int py_str_strip(jrt *rt, jv s, jv chars, int left, int right, jv *out);
int py_str_split(jrt *rt, jv s, jv sep, int64_t maxsplit, int right, jv *out);
int py_str_case(jrt *rt, jv s, int mode, jv *out); /* JCASE_* */
enum { JCASE_UPPER, JCASE_LOWER, JCASE_TITLE, JCASE_CAPITALIZE, JCASE_SWAP, JCASE_JTITLE };
int py_str_replace(jrt *rt, jv s, jv old, jv rep, int64_t count, jv *out);
int64_t py_str_find(const jstr *h, const jstr *needle, int64_t start, int64_t end, int right);
int64_t py_str_count(const jstr *h, const jstr *needle, int64_t start, int64_t end);
int py_str_splitlines(jrt *rt, jv s, int keepends, jv *out);
int py_slice_index(jrt *rt, jv v, int64_t *out, int *present); /* slice bound */
int py_slice(jrt *rt, jv seq, jv start, jv stop, jv step, jv *out);
int py_html_escape(jrt *rt, jv v, jv *out);

/* ------------------------------------------------------------------ lexer */

typedef enum jtk {
    JT_EOF,
    JT_DATA,        /* template text; s/n = the text */
    JT_VAR_BEGIN,   /* {{ */
    JT_VAR_END,     /* }} */
    JT_BLOCK_BEGIN, /* {% */
    JT_BLOCK_END,   /* %} */
    JT_NAME,        /* s/n = identifier */
    JT_STRING,      /* s/n = decoded value (arena) */
    JT_INT,         /* i */
    JT_FLOAT,       /* f */
    JT_OP,          /* op = JO_* */
} jtk;

typedef enum jop {
    JO_ADD, JO_SUB, JO_DIV, JO_FLOORDIV, JO_MUL, JO_MOD, JO_POW, JO_TILDE,
    JO_LBRACKET, JO_RBRACKET, JO_LPAREN, JO_RPAREN, JO_LBRACE, JO_RBRACE,
    JO_EQ, JO_NE, JO_GT, JO_GTEQ, JO_LT, JO_LTEQ, JO_ASSIGN, JO_DOT, JO_COLON,
    JO_PIPE, JO_COMMA, JO_SEMICOLON,
    /* comparison-only operands of JN_COMPARE */
    JO_IN, JO_NOTIN,
} jop;

typedef struct jtok {
    uint8_t type; /* jtk */
    uint8_t op;   /* jop for JT_OP */
    int line;
    const char *s; /* text (JT_DATA, JT_NAME, JT_STRING) */
    size_t n;
    int64_t i;
    double f;
} jtok;

/* arena for the parser's nodes, token texts and names; freed with the template */
typedef struct jarena {
    struct jchunk *head;
} jarena;
void *ja_alloc(jarena *a, size_t n);
char *ja_strdup(jarena *a, const char *s, size_t n);
void ja_free(jarena *a);

/* jlex: tokenize src (already newline-normalized) into *toks (malloc'd, ends with JT_EOF).
 * Errors go to err as "line N: ..." with TM_E_TEMPLATE. */
int jlex(jarena *a, const char *src, size_t len, jtok **toks, size_t *ntoks, tm_err *err);
const char *jop_str(int op);

/* ------------------------------------------------------------------ AST */

typedef enum jnk {
    /* expressions */
    JN_CONST,    /* val */
    JN_NAME,     /* name */
    JN_NSREF,    /* name.attr as an assignment target */
    JN_GETATTR,  /* a.attr */
    JN_GETITEM,  /* a[b] (b may be JN_SLICE) */
    JN_SLICE,    /* a:b:c, each may be NULL */
    JN_CALL,     /* a(l[0]..., names[i]=l[1][i]..., *c, **d) */
    JN_FILTER,   /* a|name(args as JN_CALL); a NULL in filter blocks */
    JN_TEST,     /* a is name(args as JN_CALL) */
    JN_BINOP,    /* a op b, op in JO_ADD..JO_TILDE */
    JN_NEG, JN_POS, JN_NOT, /* op a */
    JN_AND, JN_OR, /* a and/or b */
    JN_COMPARE,  /* a ops[i] l[0][i] ... */
    JN_COND,     /* b if a else c (c may be NULL) */
    JN_CONCAT,   /* l[0] joined with ~ */
    JN_LIST, JN_TUPLE, /* l[0] */
    JN_DICT,     /* l[0] keys, l[1] values */
    /* statements */
    JN_OUTPUT,   /* l[0]: expressions and JN_CONST data to print */
    JN_IF,       /* if a: l[0] else l[1] (elif = a nested JN_IF in l[1]) */
    JN_FOR,      /* for a in b if c: l[0] else l[1]; flags JNF_RECURSIVE */
    JN_SET,      /* a = b */
    JN_SETBLOCK, /* a = (l[0] rendered)|b */
    JN_MACRO,    /* name(names... = l[1] defaults): l[0] */
    JN_CALLBLOCK,/* call(names... = l[1]) a: l[0] */
    JN_FILTERBLOCK, /* (l[0] rendered)|b */
    JN_WITH,     /* with l[1][i] = l[2][i]: l[0] */
    JN_SCOPE,    /* l[0] in an inner scope ({% generation %}, {% block %}) */
    JN_BREAK, JN_CONTINUE,
} jnk;

enum {
    JNF_RECURSIVE = 1,     /* JN_FOR */
    JNF_USES_CALLER = 2,   /* JN_MACRO body refers to caller / kwargs / varargs */
    JNF_USES_KWARGS = 4,
    JNF_USES_VARARGS = 8,
};

typedef struct jnode {
    uint8_t kind;  /* jnk */
    uint8_t op;    /* jop for JN_BINOP */
    uint8_t flags; /* JNF_* */
    int line;
    struct jnode *a, *b, *c, *d;
    struct jnode **l[3]; /* child lists, meaning per kind (see jnk) */
    int ln[3];
    const char *name;    /* JN_NAME, JN_NSREF, JN_FILTER, JN_TEST, JN_MACRO */
    const char *attr;    /* JN_GETATTR, JN_NSREF */
    const char **names;  /* JN_CALL kwarg names [ln[1]]; JN_MACRO params [nnames] */
    int nnames;
    uint8_t *ops;        /* JN_COMPARE [ln[0]] */
    int fid;             /* resolved filter / test id */
    jv val;              /* JN_CONST (immortal) */
} jnode;

struct tm_jinja {
    jarena arena;
    jnode **body; /* top-level statements */
    int nbody;
    jobj **consts; /* immortal constants to free */
    size_t nconsts, capconsts;
};

int jparse(tm_jinja *t, const jtok *toks, size_t ntoks, tm_err *err);
int jconst_keep(tm_jinja *t, jv v); /* register an immortal constant; 0 ok */

/* ------------------------------------------------------------------ evaluator */

/* Arguments of a call, as evaluated: positional then keyword. */
typedef struct jargs {
    jv *pos;
    int npos;
    const char **kwn;
    jv *kwv;
    int nkw;
    jv hold; /* keeps the dict that **kwargs names point into alive (JV_MISSING if none) */
} jargs;

/* jargs_bind: bind args to the parameters `names` (nparams of them, the first nreq
 * required) of `fname` into slots[] (borrowed; absent ones JV_MISSING). */
int jargs_bind(jrt *rt, const char *fname, const jargs *a, const char *const *names,
               int nparams, int nreq, jv *slots);

int jeval_render(jrt *rt, const tm_jinja *t, jbuf *out);
int jeval_root_new(jrt *rt);                          /* the top-level scope of a render */
int jeval_root_set(jrt *rt, const char *name, jv v); /* a render variable (takes v) */
void jeval_cleanup(jrt *rt);                          /* free scopes and namespaces */
int jeval_call(jrt *rt, jv callee, const jargs *a, jv *out);
int jbinop(jrt *rt, int op, jv a, jv b, jv *out); /* Python a op b, op in JO_ADD..JO_POW */

/* filters and tests (jinja_filters.c) */
int jfilter_id(const char *name);      /* >= 0, -1 unknown, -2 known to jinja2 but unsupported */
int jtest_id(const char *name);
int jfilter_apply(jrt *rt, int id, jv v, const jargs *a, jv *out);
int jtest_apply(jrt *rt, int id, jv v, const jargs *a, int *out);
const char *jfilter_name(int id);

/* methods and globals (jinja_methods.c) */
int jglobal_lookup(jrt *rt, const char *name, jv *out);     /* 1 found */
int jattr_get(jrt *rt, jv obj, const char *attr, jv *out);  /* jinja2 getattr() */
int jitem_get(jrt *rt, jv obj, jv key, jv *out);            /* jinja2 getitem() */
int jfunc_call(jrt *rt, const jfunc *f, const jargs *a, jv *out);
int py_dict_items(jrt *rt, jv dict, jv *out);               /* list of (key, value) tuples */

/* formatting (jinja_format.c) */
int py_percent_format(jrt *rt, jv fmt, jv args, jv *out);   /* str % args */
int py_str_format(jrt *rt, jv self, const jargs *a, jv *out); /* str.format(*a) */
int jloop_attr(jrt *rt, jv loop, const char *attr, jv *out);

/* iteration helper: list(v) for a for loop, |list, join, ...; returns a LIST/TUPLE value */
int py_iter_list(jrt *rt, jv v, jv *out);

#endif
