/* text/grammar.c: GBNF parsed and compiled (dialect and design block in
 * grammar.h; the matcher is gmatch.c).
 *
 * The parser is recursive descent over the source, writing each rule's
 * elements as it reads them: a literal becomes one single-character set per
 * code point, a class or '.' one set, a name a reference, a group a
 * generated rule and a reference to it. A repetition takes the last symbol
 * (the elements since it began; several become a generated rule) and
 * rewrites it: x{m,n} is x m times, then a chain of n - m generated rules
 * r_i ::= x r_i+1 | (empty); x{m,} ends in r ::= x r | (empty). */
#include "text/grammar-impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"

typedef struct evec {
    tm_gelem *v;
    int32_t n;
    size_t cap;
} evec;

typedef struct prule {
    char *name;
    int line;           /* where it was defined, or first referenced while undefined */
    int defined;
    evec body;          /* alternatives separated by GE_ALT (no GE_END yet) */
} prule;

typedef struct gp {
    const char *s, *e;  /* the source still to read */
    int line;
    tm_err *err;
    int rc;             /* the first failure */
    prule *r;
    int32_t n_r;
    size_t cap_r;
    uint32_t *rng;      /* [2 * n_rng] */
    int32_t n_rng;
    size_t cap_rng;
    int32_t *set_off;   /* [n_sets + 1] */
    int32_t n_sets;
    size_t cap_sets;
    size_t total;       /* elements so far */
    int nest;
    int crossed;        /* a line break was passed since the last symbol, '::=' or '|' */
    int rule_ahead;     /* a sequence stopped at the next rule's "name ::=" */
    int32_t *ht;        /* [ht_cap] the named rules by name (-1: empty) */
    size_t ht_cap, n_named;
} gp;

static int __attribute__((format(printf, 3, 4))) fail(gp *p, int code, const char *fmt, ...)
{
    if (!p->rc) {
        char m[300];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m, sizeof m, fmt, ap);
        va_end(ap);
        p->rc = tm_errf(p->err, code, "grammar: line %d: %s", p->line, m);
    }
    return p->rc;
}

static int push_el(gp *p, int32_t rule, int type, int32_t arg)
{
    if (p->rc) return p->rc;
    if (++p->total > TM_GRAMMAR_MAX_ELEMS)
        return fail(p, TM_E_LIMIT, "the grammar passes %d elements once its repetitions are expanded",
                    TM_GRAMMAR_MAX_ELEMS);
    evec *b = &p->r[rule].body;
    if (tm_grow((void **)&b->v, &b->cap, b->n + 1, sizeof *b->v)) return fail(p, TM_E_NOMEM, "out of memory");
    b->v[b->n++] = (tm_gelem){(uint8_t)type, arg};
    return TM_OK;
}

/* new_rule: a rule named name[0..len) (undefined yet); -1 on failure */
static int32_t new_rule(gp *p, const char *name, size_t len)
{
    if (tm_grow((void **)&p->r, &p->cap_r, p->n_r + 1, sizeof *p->r)) return fail(p, TM_E_NOMEM, "out of memory"), -1;
    prule *r = &p->r[p->n_r];
    memset(r, 0, sizeof *r);
    if (!(r->name = malloc(len + 1))) return fail(p, TM_E_NOMEM, "out of memory"), -1;
    memcpy(r->name, name, len);
    r->name[len] = 0;
    r->line = p->line;
    return p->n_r++;
}

/* a generated rule (a group, a repetition): named after the rule it serves */
static int32_t gen_rule(gp *p, int32_t parent)
{
    char nm[96];
    int w = snprintf(nm, sizeof nm, "%.60s#%d", p->r[parent].name, p->n_r); /* '#' is in no name */
    int32_t id = new_rule(p, nm, (size_t)w);
    if (id >= 0) p->r[id].defined = 1;
    return id;
}

static uint64_t name_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* rule_named: the rule the source calls name[0..len), created (undefined) on first use; -1 on
 * failure. Named rules are found through an open-addressed table (generated ones are not in it). */
static int32_t rule_named(gp *p, const char *name, size_t len)
{
    if (2 * (p->n_named + 1) > p->ht_cap) {
        size_t cap = p->ht_cap ? 2 * p->ht_cap : 64;
        int32_t *ht = malloc(sizeof *ht * cap);
        if (!ht) return fail(p, TM_E_NOMEM, "out of memory"), -1;
        for (size_t i = 0; i < cap; i++) ht[i] = -1;
        for (size_t i = 0; i < p->ht_cap; i++) {
            if (p->ht[i] < 0) continue;
            const char *nm = p->r[p->ht[i]].name;
            size_t j = name_hash(nm, strlen(nm)) & (cap - 1);
            while (ht[j] >= 0) j = (j + 1) & (cap - 1);
            ht[j] = p->ht[i];
        }
        free(p->ht);
        p->ht = ht;
        p->ht_cap = cap;
    }
    size_t j = name_hash(name, len) & (p->ht_cap - 1);
    for (; p->ht[j] >= 0; j = (j + 1) & (p->ht_cap - 1)) {
        const char *nm = p->r[p->ht[j]].name;
        if (strlen(nm) == len && !memcmp(nm, name, len)) return p->ht[j];
    }
    int32_t id = new_rule(p, name, len);
    if (id >= 0) {
        p->ht[j] = id;
        p->n_named++;
    }
    return id;
}

/* ---- character sets ---- */

static int by_lo(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* add_set: the set of pairs r[0 .. 2n), sorted, merged and (neg) complemented over
 * [0, 0x10FFFF]; returns its index or -1 */
static int32_t add_set(gp *p, uint32_t *r, int32_t n, int neg)
{
    if (n > 0) qsort(r, (size_t)n, 2 * sizeof *r, by_lo);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (m && r[2 * i] <= r[2 * (m - 1) + 1] + 1) {
            if (r[2 * i + 1] > r[2 * (m - 1) + 1]) r[2 * (m - 1) + 1] = r[2 * i + 1];
        } else {
            r[2 * m] = r[2 * i];
            r[2 * m + 1] = r[2 * i + 1];
            m++;
        }
    }
    int32_t need = p->n_rng + m + 1;
    if (tm_grow((void **)&p->rng, &p->cap_rng, 2 * need, sizeof *p->rng) ||
        tm_grow((void **)&p->set_off, &p->cap_sets, p->n_sets + 2, sizeof *p->set_off))
        return fail(p, TM_E_NOMEM, "out of memory"), -1;
    if (p->n_sets == 0) p->set_off[0] = 0;
    uint32_t *o = p->rng + 2 * p->n_rng;
    int32_t k = 0;
    if (!neg) {
        if (m > 0) memcpy(o, r, sizeof(uint32_t) * 2 * (size_t)m);
        k = m;
    } else {
        uint32_t next = 0; /* the first code point not yet covered */
        for (int32_t i = 0; i < m; i++) {
            if (r[2 * i] > next) o[2 * k] = next, o[2 * k + 1] = r[2 * i] - 1, k++;
            next = r[2 * i + 1] + 1;
        }
        if (next <= 0x10FFFF) o[2 * k] = next, o[2 * k + 1] = 0x10FFFF, k++;
    }
    p->n_rng += k;
    p->set_off[p->n_sets + 1] = p->n_rng;
    return p->n_sets++;
}

int tm_gset_meets(const tm_grammar *g, int32_t s, uint32_t lo, uint32_t hi)
{
    int32_t a = g->set_off[s], b = g->set_off[s + 1]; /* the first range whose hi >= lo */
    while (a < b) {
        int32_t mid = a + (b - a) / 2;
        if (g->rng[2 * mid + 1] < lo) a = mid + 1;
        else b = mid;
    }
    return a < g->set_off[s + 1] && g->rng[2 * a] <= hi;
}

int tm_gset_has(const tm_grammar *g, int32_t s, uint32_t cp) { return tm_gset_meets(g, s, cp, cp); }

/* ---- lexing ---- */

static void skip_space(gp *p, int newline_ok)
{
    while (p->s < p->e) {
        char c = *p->s;
        if (c == ' ' || c == '\t' || c == '\r') p->s++;
        else if (c == '#') {
            while (p->s < p->e && *p->s != '\n') p->s++;
        } else if (c == '\n' && newline_ok) {
            p->s++;
            p->line++;
            p->crossed = 1;
        } else break;
    }
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* one code point of a literal or class (UTF-8, or an escape); -1 on failure */
static int64_t read_char(gp *p, int in_class)
{
    if (p->s >= p->e) return fail(p, TM_E_FORMAT, "unterminated %s", in_class ? "character class" : "literal"), -1;
    unsigned char c = (unsigned char)*p->s++;
    if (c == '\n') return fail(p, TM_E_FORMAT, "a line break inside a %s", in_class ? "character class" : "literal"), -1;
    if (c == '\\') {
        if (p->s >= p->e) return fail(p, TM_E_FORMAT, "an escape at the end of the grammar"), -1;
        char x = *p->s++;
        int digits = x == 'x' ? 2 : x == 'u' ? 4 : x == 'U' ? 8 : 0;
        if (digits) {
            uint32_t v = 0;
            for (int i = 0; i < digits; i++) {
                int h = p->s < p->e ? hexval(*p->s) : -1;
                if (h < 0) return fail(p, TM_E_FORMAT, "\\%c escape: hex digits expected", x), -1;
                v = v * 16 + (uint32_t)h;
                p->s++;
            }
            if (v > 0x10FFFF) return fail(p, TM_E_FORMAT, "an escape past U+10FFFF"), -1;
            return v;
        }
        switch (x) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': case '"': case '\'': case '[': case ']': case '/': case '-': case '^': return x;
        default: return fail(p, TM_E_FORMAT, "unknown escape \\%c", x), -1;
        }
    }
    if (c < 0x80) return c;
    int need = c >= 0xF0 && c <= 0xF4 ? 3 : c >= 0xE0 ? 2 : c >= 0xC2 && c < 0xE0 ? 1 : -1;
    uint32_t v = c & (need == 3 ? 0x07 : need == 2 ? 0x0F : 0x1F);
    for (int i = 0; i < need; i++) {
        unsigned char d = p->s < p->e ? (unsigned char)*p->s : 0;
        if ((d & 0xC0) != 0x80) { need = -1; break; }
        v = v << 6 | (d & 0x3F);
        p->s++;
    }
    if (need < 0 || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) || (need == 2 && v < 0x800) || (need == 3 && v < 0x10000))
        return fail(p, TM_E_FORMAT, "invalid UTF-8 in the grammar"), -1;
    return v;
}

/* ---- parsing ---- */

static int parse_alternates(gp *p, int32_t rule, int nested);

static int parse_class(gp *p, int32_t rule)
{
    int neg = p->s < p->e && *p->s == '^';
    if (neg) p->s++;
    uint32_t *r = NULL;
    int32_t n = 0;
    size_t cap = 0;
    while (!p->rc && (p->s >= p->e || *p->s != ']')) {
        int64_t lo = read_char(p, 1), hi = lo;
        if (lo >= 0 && p->s + 1 < p->e && p->s[0] == '-' && p->s[1] != ']') {
            p->s++;
            hi = read_char(p, 1);
            if (hi >= 0 && hi < lo) fail(p, TM_E_FORMAT, "a character class range runs backwards");
        }
        if (p->rc) break;
        if (tm_grow((void **)&r, &cap, 2 * (n + 1), sizeof *r)) { fail(p, TM_E_NOMEM, "out of memory"); break; }
        r[2 * n] = (uint32_t)lo;
        r[2 * n + 1] = (uint32_t)hi;
        n++;
    }
    if (!p->rc) {
        p->s++; /* ']' */
        int32_t s = add_set(p, r, n, neg);
        if (s >= 0) push_el(p, rule, GE_SET, s);
    }
    free(r);
    return p->rc;
}

static int parse_literal(gp *p, int32_t rule)
{
    while (!p->rc && (p->s >= p->e || *p->s != '"')) {
        int64_t c = read_char(p, 0);
        if (c < 0) break;
        uint32_t r[2] = {(uint32_t)c, (uint32_t)c};
        int32_t s = add_set(p, r, 1, 0);
        if (s >= 0) push_el(p, rule, GE_SET, s);
    }
    if (!p->rc) p->s++; /* '"' */
    return p->rc;
}

/* a non-negative integer of a {m,n} bound */
static int read_bound(gp *p, int *v)
{
    skip_space(p, 1);
    if (p->s >= p->e || *p->s < '0' || *p->s > '9') return fail(p, TM_E_FORMAT, "a number expected in {m,n}");
    long x = 0;
    while (p->s < p->e && *p->s >= '0' && *p->s <= '9') {
        x = x * 10 + (*p->s++ - '0');
        if (x > TM_GRAMMAR_MAX_REPEAT) return fail(p, TM_E_LIMIT, "a repetition bound over %d", TM_GRAMMAR_MAX_REPEAT);
    }
    *v = (int)x;
    skip_space(p, 1);
    return TM_OK;
}

/* repeat: rule's elements from start on are the symbol x; rewrite them as x{lo,hi} (hi -1: no bound) */
static int repeat(gp *p, int32_t rule, int32_t start, int lo, int hi)
{
    evec *b = &p->r[rule].body;
    if (b->n == start) return p->rc; /* an empty literal: repeated, still nothing */
    if (b->n - start > 1) { /* several elements (a literal): one generated rule */
        int32_t sub = gen_rule(p, rule);
        if (sub < 0) return p->rc;
        b = &p->r[rule].body; /* p->r may have moved */
        for (int32_t i = start; i < b->n && !p->rc; i++) push_el(p, sub, b->v[i].type, b->v[i].arg);
        p->total -= (size_t)(b->n - start);
        b->n = start;
        push_el(p, rule, GE_REF, sub);
    }
    tm_gelem x = p->r[rule].body.v[start];
    p->r[rule].body.n = start;
    p->total--;
    for (int i = 0; i < lo && !p->rc; i++) push_el(p, rule, x.type, x.arg);
    if (hi == lo || p->rc) return p->rc;
    /* the optional part: r_1 ::= x r_2 | ; ... r_k ::= x | ;  or, unbounded, r ::= x r | */
    int32_t first = gen_rule(p, rule), cur = first;
    if (first < 0) return p->rc;
    push_el(p, rule, GE_REF, first);
    for (int i = 0; hi < 0 || i < hi - lo; i++) {
        push_el(p, cur, x.type, x.arg);
        int32_t next = hi < 0 ? cur : (i + 1 < hi - lo ? gen_rule(p, rule) : -1);
        if (p->rc) break;
        if (next >= 0) push_el(p, cur, GE_REF, next);
        push_el(p, cur, GE_ALT, 0);
        if (hi < 0 || next < 0) break;
        cur = next;
    }
    return p->rc;
}

static int parse_sequence(gp *p, int32_t rule, int nested)
{
    int32_t last = -1; /* where the last symbol's elements begin */
    while (!p->rc) {
        skip_space(p, nested);
        if (p->s >= p->e) break;
        char c = *p->s;
        int32_t here = p->r[rule].body.n;
        if (c == '"') {
            p->s++;
            last = here;
            parse_literal(p, rule);
        } else if (c == '[') {
            p->s++;
            last = here;
            parse_class(p, rule);
        } else if (c == '.') {
            p->s++;
            last = here;
            uint32_t r[2] = {0, 0x10FFFF};
            int32_t s = add_set(p, r, 1, 0);
            if (s >= 0) push_el(p, rule, GE_SET, s);
        } else if (tm_gbnf_name_char(c)) {
            const char *n0 = p->s;
            while (p->s < p->e && tm_gbnf_name_char(*p->s)) p->s++;
            size_t nl = (size_t)(p->s - n0);
            const char *after = p->s;
            skip_space(p, 0);
            if (p->e - p->s >= 3 && !memcmp(p->s, "::=", 3)) {
                if (!p->crossed)
                    return fail(p, TM_E_FORMAT, "a rule definition inside another rule (a line break missing before "
                                "'%.*s ::=')", (int)nl, n0);
                p->s = n0; /* the next rule: this one ends here (its last alternative empty) */
                p->rule_ahead = 1;
                break;
            }
            p->s = after;
            int32_t id = rule_named(p, n0, nl);
            if (id < 0) break;
            last = here;
            push_el(p, rule, GE_REF, id);
        } else if (c == '(') {
            p->s++;
            if (++p->nest > TM_GRAMMAR_MAX_NEST) return fail(p, TM_E_LIMIT, "groups nested deeper than %d", TM_GRAMMAR_MAX_NEST);
            int32_t sub = gen_rule(p, rule);
            if (sub < 0) break;
            parse_alternates(p, sub, 1);
            skip_space(p, 1);
            if (!p->rc && (p->s >= p->e || *p->s != ')')) return fail(p, TM_E_FORMAT, "'(' without its ')'");
            p->s++;
            p->nest--;
            last = here;
            push_el(p, rule, GE_REF, sub);
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last < 0) return fail(p, TM_E_FORMAT, "'%c' repeats nothing", c);
            p->s++;
            int lo = c == '+' ? 1 : 0, hi = c == '?' ? 1 : -1;
            if (c == '{') {
                if (read_bound(p, &lo)) break;
                hi = lo;
                if (p->s < p->e && *p->s == ',') {
                    p->s++;
                    skip_space(p, 1);
                    hi = -1;
                    if (p->s < p->e && *p->s != '}' && read_bound(p, &hi)) break;
                }
                if (p->s >= p->e || *p->s != '}') return fail(p, TM_E_FORMAT, "'{' without its '}'");
                p->s++;
                if (hi >= 0 && hi < lo) return fail(p, TM_E_FORMAT, "a repetition {m,n} with n < m");
            }
            repeat(p, rule, last, lo, hi);
            last = -1; /* x** is refused, as llama.cpp does */
        } else break;
        p->crossed = 0;
    }
    return p->rc;
}

static int parse_alternates(gp *p, int32_t rule, int nested)
{
    for (;;) {
        if (parse_sequence(p, rule, nested)) return p->rc;
        const char *save = p->s;
        int save_line = p->line;
        if (!nested) skip_space(p, 1); /* a '|' starting the next line continues the rule */
        if (p->s >= p->e || *p->s != '|') {
            p->s = save;
            p->line = save_line;
            return TM_OK;
        }
        p->s++;
        if (push_el(p, rule, GE_ALT, 0)) return p->rc;
        p->crossed = 0;
        skip_space(p, 1);
    }
}

static int parse_rule(gp *p)
{
    const char *n0 = p->s;
    while (p->s < p->e && tm_gbnf_name_char(*p->s)) p->s++;
    if (p->s == n0) return fail(p, TM_E_FORMAT, "a rule name expected");
    size_t nl = (size_t)(p->s - n0);
    skip_space(p, 0);
    if (p->e - p->s < 3 || memcmp(p->s, "::=", 3)) return fail(p, TM_E_FORMAT, "'::=' expected after the rule name");
    p->s += 3;
    int32_t id = rule_named(p, n0, nl);
    if (id < 0) return p->rc;
    if (p->r[id].defined) return fail(p, TM_E_FORMAT, "rule '%s' defined twice", p->r[id].name);
    p->r[id].defined = 1;
    p->r[id].line = p->line;
    p->crossed = 0;
    skip_space(p, 1);
    if (parse_alternates(p, id, 0)) return p->rc;
    skip_space(p, 0);
    if (p->rule_ahead) {
        p->rule_ahead = 0;
        return TM_OK;
    }
    if (p->s < p->e && *p->s != '\n') {
        return fail(p, TM_E_FORMAT, "unexpected '%c'", *p->s);
    }
    return TM_OK;
}

/* ---- checks and the compiled form ---- */

/* Left recursion. The left graph has an edge r -> s for each reference to s that can come first
 * in an alternative of r (after nullable elements only); the edge is a tail call if the reference
 * ends its alternative. A cycle of tail calls only is harmless (the matcher's closure meets the
 * same (position, rest) again and stops); a cycle with any other edge pushes without end, and
 * is refused: a non-tail edge inside one strongly connected component. Tarjan's algorithm,
 * without recursion (chains of generated rules run to hundreds of thousands). */
typedef struct ledge {
    int32_t to;
    uint8_t tail;
} ledge;

static int left_recursion(gp *p, const uint8_t *nullable)
{
    int32_t n = p->n_r, ne = 0;
    int32_t *off = calloc((size_t)n + 1, sizeof *off);
    ledge *e = NULL;
    for (int pass = 0; pass < 2 && off; pass++) { /* count, then fill */
        if (pass == 1 && !(e = malloc(sizeof *e * (size_t)(ne + 1)))) break;
        ne = 0;
        for (int32_t r = 0; r < n; r++) {
            if (pass == 1) off[r] = ne;
            const evec *b = &p->r[r].body;
            int open = 1; /* the elements passed in this alternative are all nullable */
            for (int32_t i = 0; i < b->n; i++) {
                const tm_gelem *x = &b->v[i];
                if (x->type == GE_ALT) open = 1;
                else if (!open) continue;
                else if (x->type == GE_SET) open = 0;
                else {
                    if (pass == 1) e[ne] = (ledge){x->arg, (uint8_t)(i + 1 == b->n || b->v[i + 1].type == GE_ALT)};
                    ne++;
                    open = nullable[x->arg];
                }
            }
        }
        off[n] = ne;
    }
    int32_t *index = malloc(sizeof(int32_t) * (size_t)n), *low = malloc(sizeof(int32_t) * (size_t)n);
    int32_t *stk = malloc(sizeof(int32_t) * (size_t)n), *call = malloc(sizeof(int32_t) * (size_t)n);
    int32_t *next = malloc(sizeof(int32_t) * (size_t)n), *comp = malloc(sizeof(int32_t) * (size_t)n);
    uint8_t *on = calloc((size_t)n, 1);
    if (!off || !e || !index || !low || !stk || !call || !next || !comp || !on) fail(p, TM_E_NOMEM, "out of memory");
    for (int32_t i = 0; i < n && !p->rc; i++) index[i] = -1;
    int32_t counter = 0, sp = 0, ncomp = 0;
    for (int32_t root = 0; root < n && !p->rc; root++) {
        if (index[root] >= 0) continue;
        int32_t depth = 0;
        call[0] = root;
        index[root] = low[root] = counter++;
        next[root] = off[root];
        stk[sp++] = root;
        on[root] = 1;
        while (depth >= 0) {
            int32_t v = call[depth];
            if (next[v] < off[v + 1]) {
                int32_t w = e[next[v]++].to;
                if (index[w] < 0) {
                    index[w] = low[w] = counter++;
                    next[w] = off[w];
                    stk[sp++] = w;
                    on[w] = 1;
                    call[++depth] = w;
                } else if (on[w] && index[w] < low[v]) low[v] = index[w];
                continue;
            }
            if (low[v] == index[v]) { /* v roots a component */
                int32_t w;
                do {
                    w = stk[--sp];
                    on[w] = 0;
                    comp[w] = ncomp;
                } while (w != v);
                ncomp++;
            }
            if (--depth >= 0 && low[v] < low[call[depth]]) low[call[depth]] = low[v];
        }
    }
    for (int32_t r = 0; r < n && !p->rc; r++)
        for (int32_t k = off[r]; k < off[r + 1]; k++)
            if (!e[k].tail && comp[e[k].to] == comp[r]) {
                p->line = p->r[r].line;
                fail(p, TM_E_FORMAT, "left recursion: %.60s -> %.60s, which leads back to %.60s", p->r[r].name,
                     p->r[e[k].to].name, p->r[r].name);
                break;
            }
    free(off);
    free(e);
    free(index);
    free(low);
    free(stk);
    free(call);
    free(next);
    free(comp);
    free(on);
    return p->rc;
}

static int check_rules(gp *p)
{
    for (int32_t i = 0; i < p->n_r; i++)
        if (!p->r[i].defined) {
            p->line = p->r[i].line;
            return fail(p, TM_E_FORMAT, "rule '%s' is used but not defined", p->r[i].name);
        }
    uint8_t *nullable = calloc((size_t)p->n_r, 1);
    if (!nullable) fail(p, TM_E_NOMEM, "out of memory");
    for (int changed = 1; changed && !p->rc;) { /* a rule is nullable if one alternative's elements all are */
        changed = 0;
        for (int32_t i = 0; i < p->n_r; i++) {
            if (nullable[i]) continue;
            const evec *b = &p->r[i].body;
            int ok = 1;
            for (int32_t k = 0; k <= b->n; k++) {
                if (k == b->n || b->v[k].type == GE_ALT) {
                    if (ok) { nullable[i] = 1; changed = 1; break; }
                    ok = 1;
                } else if (b->v[k].type == GE_SET || !nullable[b->v[k].arg]) ok = 0;
            }
        }
    }
    if (!p->rc) left_recursion(p, nullable);
    free(nullable);
    return p->rc;
}

static int compile(gp *p, int32_t root, tm_grammar *g)
{
    int32_t n_alt = 0, n_el = 0;
    for (int32_t i = 0; i < p->n_r; i++) {
        n_el += p->r[i].body.n + 1;
        n_alt++;
        for (int32_t k = 0; k < p->r[i].body.n; k++) n_alt += p->r[i].body.v[k].type == GE_ALT;
    }
    g->el = malloc(sizeof *g->el * (size_t)n_el);
    g->alt = malloc(sizeof *g->alt * (size_t)n_alt);
    g->alt_off = malloc(sizeof *g->alt_off * (size_t)(p->n_r + 1));
    if (!g->el || !g->alt || !g->alt_off) return fail(p, TM_E_NOMEM, "out of memory");
    int32_t e = 0, a = 0;
    for (int32_t i = 0; i < p->n_r; i++) {
        g->alt_off[i] = a;
        g->alt[a++] = e;
        for (int32_t k = 0; k < p->r[i].body.n; k++) {
            g->el[e++] = p->r[i].body.v[k];
            if (p->r[i].body.v[k].type == GE_ALT) g->alt[a++] = e;
        }
        g->el[e++] = (tm_gelem){GE_END, 0};
    }
    g->alt_off[p->n_r] = a;
    g->n_el = n_el;
    g->n_rules = p->n_r;
    g->root = root;
    g->rng = p->rng;
    g->set_off = p->set_off;
    g->n_sets = p->n_sets;
    p->rng = NULL;
    p->set_off = NULL;
    if (!g->set_off && !(g->set_off = calloc(1, sizeof *g->set_off))) return fail(p, TM_E_NOMEM, "out of memory");
    return TM_OK;
}

void tm_grammar_free(tm_grammar *g)
{
    if (!g) return;
    free(g->el);
    free(g->alt);
    free(g->alt_off);
    free(g->rng);
    free(g->set_off);
    free(g);
}

int tm_grammar_parse(tm_grammar **out, const char *src, size_t len, tm_err *err)
{
    *out = NULL;
    gp p = {.s = src, .e = src + len, .line = 1, .err = err};
    while (!p.rc) {
        skip_space(&p, 1);
        if (p.s >= p.e) break;
        parse_rule(&p);
    }
    int32_t root = -1;
    for (int32_t i = 0; i < p.n_r && root < 0; i++)
        if (!strcmp(p.r[i].name, "root") && p.r[i].defined) root = i;
    if (!p.rc && root < 0) fail(&p, TM_E_FORMAT, "no rule named 'root'");
    if (!p.rc) check_rules(&p);
    tm_grammar *g = NULL;
    if (!p.rc && !(g = calloc(1, sizeof *g))) fail(&p, TM_E_NOMEM, "out of memory");
    if (!p.rc) compile(&p, root, g);
    for (int32_t i = 0; i < p.n_r; i++) {
        free(p.r[i].name);
        free(p.r[i].body.v);
    }
    free(p.r);
    free(p.ht);
    free(p.rng);
    free(p.set_off);
    if (p.rc) {
        tm_grammar_free(g);
        return p.rc;
    }
    *out = g;
    return TM_OK;
}
