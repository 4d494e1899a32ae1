/* text/json_schema.c: a JSON Schema turned into a GBNF grammar (text/json_schema.h), so that
 * generation can be held to it (OpenAI's response_format json_schema, llama.cpp's --json-schema).
 *
 * The language
 * ------------
 * The root rule matches the JSON texts the schema allows, narrowed in these documented ways (each
 * picks one order or spelling among texts that mean the same, or bounds whitespace):
 *  - Whitespace: none before or after the top-level value (the root ends when the value closes, so
 *    the matcher can stop there); between tokens inside containers ws ::= ( " " | "\n" [ \t]{0,20} )?
 *    (nothing, a space, or a line break and an indent of up to 20 tabs or spaces: pretty-printing
 *    works and the model cannot pad forever, the idea of JSON mode's bound, text/json_gate.h).
 *  - Objects: the listed properties ("properties" in the schema's order, then the names "required"
 *    lists that "properties" does not, in that order) each at most once and in that order; extra
 *    members (unless additionalProperties is false; a schema there holds their values) after them,
 *    whose keys are never a listed name however spelled (\u escapes included), so no text repeats a
 *    listed key. Listed keys are spelled as cJSON_PrintUnformatted spells them.
 *  - integer: written -?(0|[1-9][0-9]*) (JSON Schema also calls 1.0 and 1e2 integers; not here);
 *    -0 is allowed wherever 0 is.
 *  - enum / const: each value in one spelling, cJSON_PrintUnformatted's compact text ("é" not
 *    "\u00e9", 1.5 not 1.50, no whitespace inside containers).
 *  - Strings: any character but " \ and U+0000-U+001F, or an escape \" \\ \/ \b \f \n \r \t or \u
 *    and four hex digits (a surrogate only as a high-low pair, as cJSON and JSON mode read them). minLength/maxLength
 *    count code points of the decoded string: an escape (or an escaped pair) is one. format date,
 *    time, date-time and uuid (RFC 3339 / RFC 4122 shapes: day 01-31, 01-30 or 01-29 by month, Feb 29
 *    in any year, seconds up to 60, any fraction, T/Z in either case) are spelled without escapes.
 *  - oneOf is read as anyOf: a text that two of its schemas match is allowed, not refused.
 *
 * Supported: type (a name or a list), enum, const, properties, required, additionalProperties,
 * items, prefixItems (and the older items list with additionalItems), minItems, maxItems and
 * minLength, maxLength (past 1000, GBNF's repetition bound, written with chunks of 1000, up to
 * 1,000,999), format (the four above), integer minimum / maximum / exclusiveMinimum /
 * exclusiveMaximum (exact digit-range grammars; draft 4's boolean exclusives; |bound| <= 2^53, where
 * doubles are exact), anyOf, oneOf, allOf (merged: properties and items meet as allOf, required
 * unites, type intersects, bounds tighten, one value twice is one; other differing values, or an
 * additionalProperties that would reach another part's properties, are refused), $ref to "#" or
 * "#/a/b" (a JSON pointer, %XX then ~0 ~1 decoded), true and false. A schema without "type" allows
 * every type its keywords leave open, as JSON Schema says ({"properties": ...} alone allows strings
 * too). Keywords not in kws[] are annotations (title, description, default, examples, $schema,
 * $comment, deprecated, readOnly, $defs, ...) or unknown: ignored, as JSON Schema says.
 * Refused (TM_E_UNSUPPORTED, naming the keyword's JSON pointer): not, if/then/else, pattern,
 * patternProperties, propertyNames, min/maxProperties, dependentRequired, dependentSchemas,
 * dependencies, unevaluated*, contains, min/maxContains, uniqueItems true, multipleOf, bounds on a
 * number (not an integer), other formats, format with a length, enum/const beside other constraints,
 * anyOf beside oneOf, remote or anchor $refs, a $ref cycle that reads nothing (left recursion), a
 * string with U+0000 in the schema, a schema that allows no value at the root.
 *
 * Design block
 * ------------
 * compile_body turns one schema node into alternatives of GBNF written into the caller's text;
 * compile gives a node one name (a primitive such as "string", a $ref's rule, or a new rule "sN").
 * Objects, arrays, pairs and key tries get rules of their own, so every repetition repeats one
 * name and no line nests groups deeply. Each $ref target (the document itself first, named "root")
 * is compiled once into its rule "refN-name"; a reference met while its target is still being
 * compiled just names the rule, so recursion in the schema is recursion between rules, never
 * expansion. A reference met before any '{' or '[' since its referrer began is an edge of a graph
 * checked for cycles at the end: a cycle there would be left recursion. allOf (and $ref with
 * constraining siblings, and anyOf beside other constraints, distributed over its alternatives) is
 * merged into one new cJSON object, then compiled. Bounds: JS_MAX_DEPTH schemas compiled at once,
 * JS_MAX_TEXT bytes, TM_GRAMMAR_MAX_ELEMS elements as grammar.c counts them (each byte of text is
 * at most one, each repetition x{m,n} at most 3 max(m,n) + 3 more). */
#include "text/json_schema.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/grow.h"
#include "text/grammar.h"

#define JS_MAX_DEPTH 64        /* schemas being compiled at once */
#define JS_MAX_TEXT (4u << 20) /* bytes of grammar */
#define JS_MAX_REP 1000        /* the largest bound of x{m,n} (TM_GRAMMAR_MAX_REPEAT) */
#define JS_MAX_COUNT 1000999L  /* the largest length bound, written with chunks of JS_MAX_REP */

typedef char name_t[48]; /* a rule name */
#define NAME_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"

typedef struct sb { /* growing text p[0..n), NUL-terminated */
    char *p;
    size_t n, cap;
    int err;        /* sticky: TM_E_NOMEM or TM_E_LIMIT once an append failed */
} sb;

typedef struct ref {
    const cJSON *node;  /* the schema it names (in the document) */
    char ptr[128];      /* its "#/..." as first written (cut short) */
    name_t name;
    int state;          /* R_OPEN while compiled, R_DONE, R_EMPTY (it allows no value) */
    int guard;          /* gen.guard when it was opened */
    int called;         /* its name was written while open: it recurses */
} ref;

enum { R_OPEN, R_DONE, R_EMPTY };

typedef struct gen {
    const cJSON *doc;
    tm_err *err;
    sb out;                /* the rules so far, one a line */
    unsigned prims;        /* P_* bits: primitive rules used */
    int nrules;            /* fresh names given */
    ref *refs;             /* [nrefs] $ref targets; refs[0] is the document ("root") */
    int nrefs;
    size_t caprefs;
    int (*edges)[2];       /* [nedges] {from, to}: ref `from` calls `to` before reading a character */
    int nedges;
    size_t capedges;
    int cur;               /* the innermost open ref */
    int guard;             /* container values entered (each after a '{' or '[') */
    int depth;             /* schemas being compiled */
    size_t reps;           /* elements repetitions add (3 max(m,n) + 3 each) */
    char path[256];        /* JSON pointer of the node at hand */
    size_t pn;
    int lenient;           /* tm_json_schema_gbnf_lenient: keywords not supported are ignored, not refused */
} gen;

/* ---- text ---- */

static void put_n(sb *b, const char *s, size_t n)
{
    if (!b->err && b->n + n + 1 > JS_MAX_TEXT) b->err = TM_E_LIMIT;
    if (!b->err && b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n + 1) c *= 2;
        char *p = realloc(b->p, c);
        if (p) b->p = p, b->cap = c;
        else b->err = TM_E_NOMEM;
    }
    if (!b->err) memcpy(b->p + b->n, s, n), b->n += n, b->p[b->n] = 0;
}

static void put(sb *b, const char *s) { put_n(b, s, strlen(s)); }

static void __attribute__((format(printf, 2, 3))) putf(sb *b, const char *fmt, ...)
{
    char t[128];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(t, sizeof t, fmt, ap);
    va_end(ap);
    put_n(b, t, k < 0 ? 0 : (size_t)k < sizeof t ? (size_t)k : sizeof t - 1);
}

static void alt(sb *b, int *nalts) { if ((*nalts)++) put(b, " |"); } /* start an alternative */

/* utf8: the code point at s[0..n) into *c; bytes taken (1-4), 0 if not strict UTF-8 */
static int utf8(const unsigned char *s, size_t n, uint32_t *c)
{
    unsigned b = s[0], k = b < 0x80                 ? 1
                         : b >= 0xC2 && b <= 0xDF ? 2
                         : b >= 0xE0 && b <= 0xEF ? 3
                         : b >= 0xF0 && b <= 0xF4 ? 4
                                                  : 0;
    if (!k || k > n) return 0;
    uint32_t v = k == 1 ? b : b & (0x7F >> k);
    for (unsigned i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < least[k] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *c = v;
    return (int)k;
}

/* put_cp: code point c inside a literal or class; `special` printable characters get a backslash */
static void put_cp(sb *b, uint32_t c, const char *special)
{
    if (c >= 0x20 && c < 0x7F) putf(b, strchr(special, (int)c) ? "\\%c" : "%c", (int)c);
    else putf(b, c < 0x80 ? "\\x%02X" : c < 0x10000 ? "\\u%04X" : "\\U%08X", (unsigned)c);
}

/* put_lit: the literal of UTF-8 text t; TM_E_FORMAT if it is not UTF-8 */
static int put_lit(sb *b, const char *t)
{
    put(b, " \"");
    uint32_t c;
    for (size_t i = 0, n = strlen(t), k; i < n; i += k) {
        if (!(k = (size_t)utf8((const unsigned char *)t + i, n - i, &c))) return TM_E_FORMAT;
        put_cp(b, c, "\"\\");
    }
    put(b, "\"");
    return TM_OK;
}

/* ---- errors and paths ---- */

/* fail: "json schema: <the JSON pointer>[/key]: <message>" */
static int __attribute__((format(printf, 4, 5))) fail(gen *g, const char *key, int code, const char *fmt, ...)
{
    char m[TM_ERR_MSG];
    va_list ap;
    va_start(ap, fmt), vsnprintf(m, sizeof m, fmt, ap), va_end(ap);
    return tm_errf(g->err, code, "json schema: %s%s%s: %s", g->pn || key ? g->path : "(root)", key ? "/" : "",
                   key ? key : "", m);
}

/* path_push: append "/seg" (~ and / escaped), and "/i" if i >= 0, to the path; returns the length to restore */
static size_t path_push(gen *g, const char *seg, int i)
{
    size_t old = g->pn;
    sb t = {0};
    put(&t, "/");
    for (const char *s = seg; *s; s++) put(&t, *s == '~' ? "~0" : *s == '/' ? "~1" : (char[2]){*s, 0});
    if (i >= 0) putf(&t, "/%d", i);
    if (!t.err && g->pn + t.n < sizeof g->path) memcpy(g->path + g->pn, t.p, t.n + 1), g->pn += t.n;
    free(t.p);
    return old;
}

static void path_pop(gen *g, size_t old) { g->path[g->pn = old] = 0; }

static int sb_fail(gen *g, int code)
{
    return code == TM_E_NOMEM ? fail(g, NULL, code, "out of memory")
                              : fail(g, NULL, code, "the grammar passes %u bytes", JS_MAX_TEXT);
}

static int nomem(gen *g) { return sb_fail(g, TM_E_NOMEM); }

/* ---- primitives ---- */

enum { P_WS, P_VALUE, P_OBJECT, P_MEMBER, P_ARRAY, P_STRING, P_CHAR, P_NUMBER, P_INTEGER, P_BOOLEAN, P_NULL,
       P_WCHAR, P_DATE, P_TIME, P_DATETIME, P_UUID, P_N };

#define B(p) (1u << (p))
static const struct {
    const char *name, *body;
    unsigned deps;
} prims[P_N] = {
    [P_WS] = {"ws", "( \" \" | \"\\n\" [ \\t]{0,20} )?", 0},
    [P_VALUE] = {"value", "object | array | string | number | \"true\" | \"false\" | \"null\"",
                 B(P_OBJECT) | B(P_ARRAY) | B(P_STRING) | B(P_NUMBER)},
    [P_OBJECT] = {"object", "\"{\" ws ( member ( ws \",\" ws member )* ws )? \"}\"", B(P_WS) | B(P_MEMBER)},
    [P_MEMBER] = {"member", "string ws \":\" ws value", B(P_STRING) | B(P_WS) | B(P_VALUE)},
    [P_ARRAY] = {"array", "\"[\" ws ( value ( ws \",\" ws value )* ws )? \"]\"", B(P_WS) | B(P_VALUE)},
    [P_STRING] = {"string", "\"\\\"\" char* \"\\\"\"", B(P_CHAR)},
    [P_CHAR] = {"char", NULL, B(P_WCHAR)}, /* jchar_in(every code point) */
    [P_WCHAR] = {"wchar", NULL, 0},         /* jchar_in(U+0080 on), shared by every set that holds them all */
    [P_NUMBER] = {"number", "integer ( \".\" [0-9]+ )? ( [eE] [+\\-]? [0-9]+ )?", B(P_INTEGER)},
    [P_INTEGER] = {"integer", "\"-\"? ( \"0\" | [1-9] [0-9]* )", 0},
    [P_BOOLEAN] = {"boolean", "\"true\" | \"false\"", 0},
    [P_NULL] = {"null", "\"null\"", 0},
    [P_DATE] = {"date", "[0-9]{4} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" "
                        "( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) | "
                        "( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | "
                        "\"02-\" ( \"0\" [1-9] | [12] [0-9] ) )", 0},
    [P_TIME] = {"time", "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" ( [0-5] [0-9] | \"60\" ) "
                        "( \".\" [0-9]+ )? "
                        "( [Zz] | [+\\-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )", 0},
    [P_DATETIME] = {"date-time", "date [Tt] time", B(P_DATE) | B(P_TIME)},
    [P_UUID] = {"uuid", "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
                        "[0-9a-fA-F]{12}", 0},
};

static void prim(gen *g, sb *b, int p) { g->prims |= B(p), putf(b, " %s", prims[p].name); }

/* ---- digit ranges: exact grammars for integer bounds and \u escapes ---- */

static int dval(char c) { return c <= '9' ? c - '0' : (c | 32) - 'a' + 10; }

/* put_digits: a class of digits lo..hi of base 10 or 16 (hex letters in both cases) */
static void put_digits(sb *b, int lo, int hi, int base)
{
    int z = hi < 9 ? hi : 9, a = lo > 10 ? lo : 10;
    put(b, " [");
    if (lo <= 9) putf(b, lo == z ? "%d" : "%d-%d", lo, z);
    if (hi >= 10 && a == hi) putf(b, "%c%c", 'a' + a - 10, 'A' + a - 10);
    else if (hi >= 10) putf(b, "%c-%c%c-%c", 'a' + a - 10, 'a' + hi - 10, 'A' + a - 10, 'A' + hi - 10);
    put(b, "]");
}

static void any_digits(sb *b, int r, int base)
{
    if (r > 0) put_digits(b, 0, base - 1, base);
    if (r > 1) putf(b, "{%d}", r);
}

/* side: the r-digit strings >= s (up) or <= s (!up), as one flat group: for each position i up to
 * the free tail (s's trailing 0s, or top digits), s's first i digits, a digit past s[i], anything */
static void side(sb *b, const char *s, int r, int base, int up)
{
    int top = base - 1, j = r, n = 0;
    while (j > 0 && dval(s[j - 1]) == (up ? 0 : top)) j--;
    put(b, " (");
    if (!j) any_digits(b, r, base);
    for (int i = 0; i < j; i++) {
        int d = dval(s[i]), last = i == j - 1;
        if (!last && d == (up ? top : 0)) continue;
        alt(b, &n);
        for (int k = 0; k < i; k++) put_digits(b, dval(s[k]), dval(s[k]), base);
        put_digits(b, up ? d + !last : 0, up ? top : d - !last, base);
        any_digits(b, r - 1 - i, base);
    }
    put(b, " )");
}

/* range_str: the w-digit strings from lo to hi (lo <= hi, both w digits, leading zeros kept) */
static void range_str(sb *b, const char *lo, const char *hi, int w, int base)
{
    int i = 0;
    for (; i < w && lo[i] == hi[i]; i++) put_digits(b, dval(lo[i]), dval(lo[i]), base);
    if (i == w) return;
    int a = dval(lo[i]), z = dval(hi[i]), r = w - i - 1, lo_full = 1, hi_full = 1, n = 0;
    for (int k = i + 1; k < w; k++) lo_full &= dval(lo[k]) == 0, hi_full &= dval(hi[k]) == base - 1;
    put(b, " (");
    if (!lo_full) alt(b, &n), put_digits(b, a, a, base), side(b, lo + i + 1, r, base, 1), a++;
    if (!hi_full) alt(b, &n), put_digits(b, z, z, base), side(b, hi + i + 1, r, base, 0), z--;
    if (a <= z) alt(b, &n), put_digits(b, a, z, base), any_digits(b, r, base);
    put(b, " )");
}

/* pos_range: the positive integers from lo to hi (decimal, no leading zeros; hi NULL: no bound) */
static void pos_range(sb *b, const char *lo, const char *hi)
{
    int la = (int)strlen(lo), lb = hi ? (int)strlen(hi) : 0;
    if (hi && la == lb) { range_str(b, lo, hi, la, 10); return; }
    put(b, " (");
    side(b, lo, la, 10, 1);
    if (!hi) putf(b, " | [1-9] [0-9]{%d,}", la);
    else {
        if (lb - la >= 2) putf(b, la == lb - 2 ? " | [1-9] [0-9]{%d}" : " | [1-9] [0-9]{%d,%d}", la, lb - 2);
        char t[400];
        memset(t, '0', (size_t)lb), t[0] = '1', put(b, " |");
        range_str(b, t, hi, lb, 10); /* lb digits, from 10...0 */
    }
    put(b, " )");
}

/* int_range: alternatives for the integers in [lo, hi] (integral doubles, or infinite) */
static void int_range(sb *b, double lo, double hi, int *nalts)
{
    char s1[400], s2[400];
    if (lo > hi) return;
    if (lo <= 0 && hi >= 0) alt(b, nalts), put(b, " \"-\"? \"0\"");
    for (int neg = 0; neg < 2; neg++) { /* the positive ones, then "-" and the magnitudes of the negative ones */
        double a = neg ? -hi : lo, z = neg ? -lo : hi;
        if (z < 1) continue;
        alt(b, nalts);
        if (neg) put(b, " \"-\"");
        snprintf(s1, sizeof s1, "%.0f", a > 1 ? a : 1), snprintf(s2, sizeof s2, "%.0f", z);
        pos_range(b, s1, isinf(z) ? NULL : s2);
    }
}

/* ---- JSON string characters by code point ---- */

typedef uint32_t range_t[2]; /* code points [lo, hi] */

static size_t meet(const range_t *r, size_t n, const range_t *s, size_t m, range_t *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < m; j++) {
            uint32_t lo = r[i][0] > s[j][0] ? r[i][0] : s[j][0], hi = r[i][1] < s[j][1] ? r[i][1] : s[j][1];
            if (lo <= hi) out[k][0] = lo, out[k][1] = hi, k++;
        }
    return k;
}

static void esc_u(sb *b, uint32_t lo, uint32_t hi) /* "\u" and four hex digits from lo to hi */
{
    char a[8], z[8];
    snprintf(a, sizeof a, "%04x", (unsigned)lo), snprintf(z, sizeof z, "%04x", (unsigned)hi);
    put(b, " \"\\\\u\""), range_str(b, a, z, 4, 16);
}

static int covers(const range_t *r, size_t n, uint32_t lo, uint32_t hi)
{
    for (size_t i = 0; i < n; i++)
        if (r[i][0] <= lo && hi <= r[i][1]) return 1;
    return 0;
}

/* jchar_in: alternatives for every spelling in a JSON string of a code point in r [n] (sorted,
 * disjoint): the character itself, a short escape, \u and four hex digits (either case) or a
 * surrogate pair; with `wide`, a set holding every code point past ASCII names the shared rule wchar for them */
static int jchar_in(gen *g, sb *b, const range_t *r, size_t n, int *nalts, int wide)
{
    static const range_t lit[] = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0xD7FF}, {0xE000, 0x10FFFF}};
    static const range_t bmp[] = {{0, 0xD7FF}, {0xE000, 0xFFFF}}, astral[] = {{0x10000, 0x10FFFF}},
                         ascii[] = {{0, 0x7F}};
    static const char short_cp[] = "\"\\/\b\f\n\r\t", short_c[] = "\"\\/bfnrt";
    range_t *t = malloc((n + 4) * sizeof *t), *rr = malloc((n + 1) * sizeof *rr);
    if (!t || !rr) return free(t), free(rr), nomem(g);
    if (wide && covers(r, n, 0x80, 0xD7FF) && covers(r, n, 0xE000, 0x10FFFF)) {
        n = meet(r, n, ascii, 1, rr), r = rr;
        alt(b, nalts), prim(g, b, P_WCHAR);
    }
    size_t k = meet(r, n, lit, 4, t);
    if (k) alt(b, nalts), put(b, " [");
    for (size_t i = 0; i < k; i++) {
        put_cp(b, t[i][0], "\"\\[]^-");
        if (t[i][1] > t[i][0]) put(b, "-"), put_cp(b, t[i][1], "\"\\[]^-");
    }
    if (k) put(b, "]");
    sb sh = {0};
    for (int i = 0; i < 8; i++) {
        range_t c = {(unsigned char)short_cp[i], (unsigned char)short_cp[i]};
        if (meet(r, n, &c, 1, t)) put_cp(&sh, (unsigned char)short_c[i], "\"\\[]^-");
    }
    if (sh.n) alt(b, nalts), put(b, " \"\\\\\" ["), put(b, sh.p), put(b, "]");
    free(sh.p);
    k = meet(r, n, bmp, 2, t);
    for (size_t i = 0; i < k; i++) alt(b, nalts), esc_u(b, t[i][0], t[i][1]);
    k = meet(r, n, astral, 1, t);
    for (size_t i = 0; i < k; i++) { /* v = cp - 0x10000: high 0xD800 + v >> 10, low 0xDC00 + v & 0x3FF */
        uint32_t ha = 0xD800 + ((t[i][0] - 0x10000) >> 10), la = 0xDC00 + ((t[i][0] - 0x10000) & 0x3FF);
        uint32_t hb = 0xD800 + ((t[i][1] - 0x10000) >> 10), lb = 0xDC00 + ((t[i][1] - 0x10000) & 0x3FF);
        if (ha == hb) { alt(b, nalts), esc_u(b, ha, ha), esc_u(b, la, lb); continue; }
        if (la != 0xDC00) alt(b, nalts), esc_u(b, ha, ha), esc_u(b, la, 0xDFFF), ha++;
        if (lb != 0xDFFF) alt(b, nalts), esc_u(b, hb, hb), esc_u(b, 0xDC00, lb), hb--;
        if (ha <= hb) alt(b, nalts), esc_u(b, ha, hb), esc_u(b, 0xDC00, 0xDFFF);
    }
    free(t), free(rr);
    return TM_OK;
}

/* ---- rules ---- */

static void new_name(gen *g, const char *prefix, name_t out)
{
    snprintf(out, sizeof(name_t), "%s%d", prefix, ++g->nrules);
}

static int emit_rule(gen *g, const char *name, const sb *body)
{
    if (body->err) return sb_fail(g, body->err);
    put(&g->out, name);
    put(&g->out, " ::=");
    put_n(&g->out, body->p ? body->p : "", body->n);
    put(&g->out, "\n");
    return g->out.err ? sb_fail(g, g->out.err) : TM_OK;
}

/* repeat: e{m,n} (n < 0: no bound; m <= n <= JS_MAX_COUNT), bounds over JS_MAX_REP with chunks */
static void rep1(gen *g, sb *b, const char *e, long m, long n)
{
    if (n == 0) return;
    g->reps += 3 * (size_t)(n > m ? n : m) + 3;
    if (n < 0) putf(b, m == 0 ? " %s*" : m == 1 ? " %s+" : " %s{%ld,}", e, m);
    else if (m == n) putf(b, m == 1 ? " %s" : " %s{%ld}", e, m);
    else putf(b, m == 0 && n == 1 ? " %s?" : " %s{%ld,%ld}", e, m, n);
}

static int repeat(gen *g, sb *b, const char *e, long m, long n)
{
    if (m <= JS_MAX_REP && n <= JS_MAX_REP) { rep1(g, b, e, m, n); return TM_OK; }
    name_t k;
    sb kb = {0};
    new_name(g, "chunk", k);
    rep1(g, &kb, e, JS_MAX_REP, JS_MAX_REP);
    int rc = emit_rule(g, k, &kb);
    free(kb.p);
    rep1(g, b, k, m / JS_MAX_REP, m / JS_MAX_REP);
    rep1(g, b, e, m % JS_MAX_REP, m % JS_MAX_REP);
    long d = n < 0 ? -1 : n - m, q = d / JS_MAX_REP;
    if (d < 0 || d <= JS_MAX_REP) rep1(g, b, e, 0, d);
    else { /* lengths [0, 1000q) as whole chunks and a rest under 1000, or q chunks and up to d % 1000 */
        put(b, " (");
        rep1(g, b, k, 0, q - 1);
        rep1(g, b, e, 0, JS_MAX_REP - 1);
        put(b, " |");
        rep1(g, b, k, q, q);
        rep1(g, b, e, 0, d % JS_MAX_REP);
        put(b, " )");
    }
    return rc;
}

/* ---- keywords ---- */

enum { K_SCHEMA, K_SCHEMAS, K_SCHEMA_MAP, K_ITEMS, K_COUNT, K_NUMBER, K_NUM_BOOL, K_STRINGS, K_TYPE, K_STRING,
       K_ARRAY, K_ANY, K_REFUSED };
static const struct {
    const char *name;
    int kind;           /* K_*: the value it must have, or K_REFUSED */
} kws[] = {             /* the keywords that constrain; any other is an annotation (or unknown): ignored */
    {"type", K_TYPE}, {"enum", K_ARRAY}, {"const", K_ANY}, {"properties", K_SCHEMA_MAP}, {"required", K_STRINGS},
    {"additionalProperties", K_SCHEMA}, {"items", K_ITEMS}, {"prefixItems", K_SCHEMAS}, {"additionalItems", K_SCHEMA},
    {"minItems", K_COUNT}, {"maxItems", K_COUNT}, {"minLength", K_COUNT}, {"maxLength", K_COUNT}, {"format", K_STRING},
    {"minimum", K_NUMBER}, {"maximum", K_NUMBER}, {"exclusiveMinimum", K_NUM_BOOL}, {"exclusiveMaximum", K_NUM_BOOL},
    {"anyOf", K_SCHEMAS}, {"oneOf", K_SCHEMAS}, {"allOf", K_SCHEMAS}, {"$ref", K_STRING}, {"uniqueItems", K_REFUSED},
    {"not", K_REFUSED}, {"if", K_REFUSED}, {"then", K_REFUSED}, {"else", K_REFUSED}, {"minProperties", K_REFUSED},
    {"maxProperties", K_REFUSED}, {"patternProperties", K_REFUSED}, {"propertyNames", K_REFUSED},
    {"dependentRequired", K_REFUSED}, {"dependentSchemas", K_REFUSED}, {"dependencies", K_REFUSED},
    {"unevaluatedProperties", K_REFUSED}, {"unevaluatedItems", K_REFUSED}, {"contains", K_REFUSED},
    {"minContains", K_REFUSED}, {"maxContains", K_REFUSED}, {"multipleOf", K_REFUSED}, {"pattern", K_REFUSED},
    {"$dynamicRef", K_REFUSED}, {"$recursiveRef", K_REFUSED},
};
static const char *const type_names[] = {"object", "array", "string", "number", "integer", "boolean", "null"};
enum { T_OBJECT = 1, T_ARRAY = 2, T_STRING = 4, T_NUMBER = 8, T_INTEGER = 16, T_BOOLEAN = 32, T_NULL = 64 };
#define T_ALL 127u

static int kw_kind(const char *key)
{
    for (size_t i = 0; i < sizeof kws / sizeof *kws; i++)
        if (!strcmp(kws[i].name, key)) return kws[i].kind;
    return -1; /* an annotation, or unknown: ignored */
}

static const cJSON *get(const cJSON *s, const char *key) { return cJSON_GetObjectItemCaseSensitive(s, key); }
static int is_schema(const cJSON *v) { return cJSON_IsObject(v) || cJSON_IsBool(v); }

/* type_mask: T_* bits of a "type" value; 0 if it is not one */
static unsigned type_mask(const cJSON *t)
{
    unsigned m = 0, bit = 1;
    for (const cJSON *one = cJSON_IsArray(t) ? t->child : t; one && bit; one = cJSON_IsArray(t) ? one->next : NULL) {
        bit = 0;
        for (int i = 0; i < 7 && cJSON_IsString(one); i++) bit |= strcmp(one->valuestring, type_names[i]) ? 0 : 1u << i;
        m |= bit;
    }
    return bit ? m : 0;
}

static int each_ok(const cJSON *a, int (*ok)(const cJSON *))
{
    for (const cJSON *c = a->child; c; c = c->next)
        if (!ok(c)) return 0;
    return 1;
}

static int is_string(const cJSON *v) { return cJSON_IsString(v); }

/* check_keywords: s's constraining keywords have the types JSON Schema gives them; refused ones refused */
static int check_keywords(gen *g, const cJSON *s)
{
    for (const cJSON *k = s->child; k; k = k->next) {
        int kind = kw_kind(k->string), ok = 1;
        double d = k->valuedouble;
        switch (kind) {
        case K_SCHEMA: ok = is_schema(k); break;
        case K_SCHEMAS: ok = cJSON_IsArray(k) && k->child && each_ok(k, is_schema); break;
        case K_SCHEMA_MAP: ok = cJSON_IsObject(k) && each_ok(k, is_schema); break;
        case K_ITEMS: ok = is_schema(k) || (cJSON_IsArray(k) && each_ok(k, is_schema)); break;
        case K_COUNT: ok = cJSON_IsNumber(k) && d >= 0 && d == floor(d); break;
        case K_NUMBER: ok = cJSON_IsNumber(k); break;
        case K_NUM_BOOL: ok = cJSON_IsNumber(k) || cJSON_IsBool(k); break;
        case K_STRINGS: ok = cJSON_IsArray(k) && each_ok(k, is_string); break;
        case K_TYPE: ok = type_mask(k) != 0; break;
        case K_STRING: ok = cJSON_IsString(k); break;
        case K_ARRAY: ok = cJSON_IsArray(k); break;
        case K_REFUSED:
            if ((!strcmp(k->string, "uniqueItems") && cJSON_IsFalse(k)) || g->lenient) break;
            return fail(g, k->string, TM_E_UNSUPPORTED, "not supported (a keyword that constrains the value)");
        }
        if (!ok) return fail(g, k->string, TM_E_FORMAT, "not a valid value for this keyword");
    }
    return TM_OK;
}

/* constraints: s has a constraining keyword other than skip */
static int constraints(const cJSON *s, const char *skip)
{
    for (const cJSON *k = s->child; k; k = k->next)
        if (kw_kind(k->string) >= 0 && (!skip || strcmp(k->string, skip))) return 1;
    return 0;
}

static long count_of(const cJSON *s, const char *key, long dflt)
{
    const cJSON *v = get(s, key);
    return !v ? dflt : v->valuedouble > 2e9 ? 2000000000L : v->valuedouble < -2e9 ? -2000000000L : (long)v->valuedouble;
}

/* ---- $ref ---- */

static int resolve(gen *g, const cJSON *r, const cJSON **out)
{
    const char *p = r->valuestring;
    if (p[0] != '#' || (p[1] && p[1] != '/'))
        return fail(g, "$ref", TM_E_UNSUPPORTED, "'%.200s': only references in the document (#/...) are supported", p);
    char *tok = malloc(strlen(p) + 1), *end;
    const cJSON *cur = g->doc;
    int bad = 0;
    if (!tok) return nomem(g);
    for (const char *s = p + 1; *s == '/' && cur && !bad;) { /* a token: %XX decoded (a URI fragment), then ~0 ~1 */
        size_t n = 0, m = 0;
        for (s++; *s && *s != '/'; s++, n++) {
            int pct = s[0] == '%' && isxdigit((unsigned char)s[1]) && isxdigit((unsigned char)s[2]);
            tok[n] = pct ? (char)(dval(s[1]) * 16 + dval(s[2])) : *s;
            s += pct ? 2 : 0;
            bad |= !tok[n];
        }
        for (size_t i = 0; i < n; i++, m++) {
            bad |= tok[i] == '~' && (i + 1 == n || (tok[i + 1] != '0' && tok[i + 1] != '1'));
            tok[m] = tok[i] != '~' || bad ? tok[i] : tok[++i] == '0' ? '~' : '/';
        }
        tok[m] = 0;
        long i = strtol(tok, &end, 10);
        if (!cJSON_IsArray(cur)) cur = cJSON_IsObject(cur) ? get(cur, tok) : NULL;
        else if (*tok >= '0' && *tok <= '9' && !*end && (*tok != '0' || !tok[1]) && i < 1 << 30)
            cur = cJSON_GetArrayItem(cur, (int)i);
        else cur = NULL;
    }
    free(tok);
    if (bad || !cur) return fail(g, "$ref", TM_E_FORMAT, "'%.200s' names nothing in the document", p);
    if (!is_schema(cur)) return fail(g, "$ref", TM_E_FORMAT, "'%.200s' is not a schema", p);
    *out = cur;
    return TM_OK;
}

static int compile_body(gen *g, const cJSON *s, sb *b, int *nalts);

/* open_ref: compile refs[i]'s target into its rule (the caller's alternative names it) */
static int open_ref(gen *g, int i, sb *b, int *nalts)
{
    char saved[sizeof g->path];
    size_t spn = g->pn;
    memcpy(saved, g->path, sizeof saved);
    g->pn = (size_t)snprintf(g->path, sizeof g->path, "%s", g->refs[i].ptr + 1);
    int cur = g->cur, n = 0;
    g->cur = i, g->refs[i].guard = g->guard;
    sb body = {0};
    int rc = compile_body(g, g->refs[i].node, &body, &n);
    g->cur = cur;
    if (!rc && !n && g->refs[i].called) rc = fail(g, NULL, TM_E_UNSUPPORTED, "a recursive schema that allows no value");
    if (!rc && n) rc = emit_rule(g, g->refs[i].name, &body);
    memcpy(g->path, saved, sizeof saved), g->pn = spn;
    free(body.p);
    g->refs[i].state = n ? R_DONE : R_EMPTY;
    if (!rc && n && b) alt(b, nalts), putf(b, " %s", g->refs[i].name);
    return rc;
}

static int add_ref(gen *g, const cJSON *node, const char *ptr)
{
    if (tm_grow((void **)&g->refs, &g->caprefs, g->nrefs + 1, sizeof *g->refs)) return -1;
    ref *r = &g->refs[g->nrefs];
    *r = (ref){.node = node};
    snprintf(r->ptr, sizeof r->ptr, "%s", ptr); /* a copy: a merged schema's "$ref" goes with it */
    const char *last = strrchr(ptr, '/'); /* named "refN-" and the pointer's last token, or "root" */
    int k = snprintf(r->name, sizeof r->name, g->nrefs ? "ref%d-" : "root", g->nrefs);
    for (const char *c = last && g->nrefs ? last + 1 : ""; *c && k < 40; c++)
        r->name[k++] = strchr(NAME_CHARS, *c) ? *c : '-';
    return g->nrefs++;
}

static int compile_ref(gen *g, const cJSON *r, sb *b, int *nalts)
{
    const cJSON *t;
    int rc = resolve(g, r, &t), i = 0;
    if (rc) return rc;
    while (i < g->nrefs && g->refs[i].node != t) i++;
    int fresh = i == g->nrefs;
    if (fresh && (i = add_ref(g, t, r->valuestring)) < 0) return nomem(g);
    if (g->guard == g->refs[g->cur].guard) { /* called before any '{' or '[' since cur began */
        if (tm_grow((void **)&g->edges, &g->capedges, g->nedges + 1, sizeof *g->edges)) return nomem(g);
        g->edges[g->nedges][0] = g->cur, g->edges[g->nedges++][1] = i;
    }
    if (fresh) return open_ref(g, i, b, nalts);
    if (g->refs[i].state == R_EMPTY) return TM_OK;
    if (g->refs[i].state == R_OPEN) g->refs[i].called = 1;
    alt(b, nalts), putf(b, " %s", g->refs[i].name);
    return TM_OK;
}

/* compile: name := one name matching schema s (a primitive, a $ref's rule or a new rule "sN");
 * *empty if s allows no value (name unset) */
static int compile(gen *g, const cJSON *s, name_t name, int *empty)
{
    sb b = {0};
    int n = 0, rc = compile_body(g, s, &b, &n);
    *empty = !rc && !n;
    if (!rc && n) {
        const char *p = b.p + 1;
        size_t len = strlen(p);
        if (n == 1 && len < sizeof(name_t) && strspn(p, NAME_CHARS) == len) memcpy(name, p, len + 1);
        else new_name(g, "s", name), rc = emit_rule(g, name, &b);
    }
    free(b.p);
    return rc;
}

/* ---- allOf: merging parts into one schema ---- */

typedef struct mctx {
    int fals;               /* a part allows nothing */
    const cJSON *addl[16];  /* [naddl] the parts whose additionalProperties is not true */
    int naddl;
} mctx;

/* add_dup: dst[key] := a copy of v; with nest, dst[key] := {"allOf": [dst[key], v]} */
static int add_dup(gen *g, cJSON *dst, const char *key, const cJSON *v, int nest)
{
    cJSON *c = cJSON_Duplicate(v, 1), *o = nest ? cJSON_CreateObject() : c;
    cJSON *l = nest ? cJSON_AddArrayToObject(o, "allOf") : NULL, *a = nest ? cJSON_Duplicate(get(dst, key), 1) : NULL;
    int ok = c && (!nest || (l && a && cJSON_AddItemToArray(l, a) && (a = NULL, cJSON_AddItemToArray(l, c)) &&
                             !(c = NULL)));
    if (ok && (nest ? cJSON_ReplaceItemInObjectCaseSensitive(dst, key, o) : cJSON_AddItemToObject(dst, key, o)))
        return TM_OK;
    if (nest) cJSON_Delete(a), cJSON_Delete(o);
    cJSON_Delete(c);
    return nomem(g);
}

static int bound_side(const char *key) /* +1 a lower bound (the larger wins), -1 an upper one, 0 neither */
{
    static const char *const lo[] = {"minItems", "minLength", "minimum", "exclusiveMinimum"},
                             *const hi[] = {"maxItems", "maxLength", "maximum", "exclusiveMaximum"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(key, lo[i]) || !strcmp(key, hi[i])) return strcmp(key, lo[i]) ? -1 : 1;
    return 0;
}

static int draft4(const cJSON *s) /* draft 4's boolean exclusives, which change what minimum / maximum mean */
{
    return cJSON_IsBool(get(s, "exclusiveMinimum")) || cJSON_IsBool(get(s, "exclusiveMaximum"));
}

/* merge: fold schema src (its $ref and allOf parts inlined; key `skip` left out) into dst */
static int merge(gen *g, cJSON *dst, const cJSON *src, const char *skip, mctx *mc)
{
    if (cJSON_IsBool(src)) return mc->fals |= cJSON_IsFalse(src), TM_OK;
    if (!cJSON_IsObject(src)) return fail(g, NULL, TM_E_FORMAT, "a schema must be an object or a boolean");
    if (g->depth >= JS_MAX_DEPTH) return fail(g, NULL, TM_E_LIMIT, "schemas nested deeper than %d", JS_MAX_DEPTH);
    g->depth++;
    int rc = check_keywords(g, src), i = 0;
    for (const cJSON *k = src->child, *t; k && !rc; k = k->next) {
        const char *key = k->string;
        cJSON *d = cJSON_GetObjectItemCaseSensitive(dst, key);
        int side = bound_side(key), addl = !strcmp(key, "additionalProperties") && !cJSON_IsTrue(k);
        if (kw_kind(key) < 0 || (skip && !strcmp(key, skip))) continue;
        if (addl && mc->naddl == 16) rc = fail(g, key, TM_E_UNSUPPORTED, "in more than 16 parts of allOf");
        else if (addl) mc->addl[mc->naddl++] = src;
        if (rc) break;
        if (!strcmp(key, "$ref")) rc = resolve(g, k, &t), rc = rc ? rc : merge(g, dst, t, NULL, mc);
        else if (!strcmp(key, "allOf"))
            for (const cJSON *el = k->child; el && !rc; el = el->next) {
                size_t old = path_push(g, "allOf", i++);
                rc = merge(g, dst, el, NULL, mc);
                path_pop(g, old);
            }
        else if (!d) rc = add_dup(g, dst, key, k, 0);
        else if (!strcmp(key, "properties"))
            for (const cJSON *p = k->child, *dp; p && !rc; p = p->next)
                rc = !(dp = get(d, p->string)) ? add_dup(g, d, p->string, p, 0) : cJSON_Compare(dp, p, 1) ? TM_OK
                                                                                  : add_dup(g, d, p->string, p, 1);
        else if (!strcmp(key, "required"))
            for (const cJSON *r = k->child; r && !rc; r = r->next) {
                const cJSON *x = d->child;
                while (x && strcmp(x->valuestring, r->valuestring)) x = x->next;
                cJSON *c = x ? NULL : cJSON_CreateString(r->valuestring);
                if (!x && !cJSON_AddItemToArray(d, c)) cJSON_Delete(c), rc = nomem(g);
            }
        else if (!strcmp(key, "type")) { /* the types both allow (an integer is a number) */
            unsigned a = type_mask(d), b = type_mask(k), m = a & b;
            m |= ((a & T_NUMBER) && (b & T_INTEGER)) || ((b & T_NUMBER) && (a & T_INTEGER)) ? T_INTEGER : 0;
            cJSON *l = cJSON_CreateArray();
            for (int j = 0; j < 7 && l; j++)
                if ((m >> j & 1) && !cJSON_AddItemToArray(l, cJSON_CreateString(type_names[j])))
                    cJSON_Delete(l), l = NULL;
            mc->fals |= !m;
            if (!l || !cJSON_ReplaceItemInObjectCaseSensitive(dst, key, l)) cJSON_Delete(l), rc = nomem(g);
        } else if (cJSON_Compare(d, k, 1)) {
        } else if ((!strcmp(key, "items") && is_schema(d) && is_schema(k)) || !strcmp(key, "additionalProperties"))
            rc = add_dup(g, dst, key, k, 1);
        else if (side && cJSON_IsNumber(d) && cJSON_IsNumber(k) && !draft4(dst) && !draft4(src)) {
            if (side > 0 ? k->valuedouble > d->valuedouble : k->valuedouble < d->valuedouble)
                cJSON_SetNumberValue(d, k->valuedouble);
        } else rc = fail(g, key, TM_E_UNSUPPORTED, "two different values that cannot be merged (allOf)");
    }
    g->depth--;
    return rc;
}

/* flatten: compile s merged into one schema (key skip left out, schema extra merged in) */
static int flatten(gen *g, const cJSON *s, const char *skip, const cJSON *extra, sb *b, int *nalts)
{
    cJSON *dst = cJSON_CreateObject();
    mctx mc = {0};
    int rc = dst ? merge(g, dst, s, skip, &mc) : nomem(g);
    if (!rc && extra) rc = merge(g, dst, extra, NULL, &mc);
    /* an additionalProperties that is not true holds for every name outside its own part's properties */
    for (int i = 0; i < mc.naddl && !rc; i++)
        for (int req = 0; req < 2 && !rc; req++)
            for (const cJSON *n = cJSON_GetArrayItem(get(dst, req ? "required" : "properties"), 0); n && !rc;
                 n = n->next)
                if (!get(get(mc.addl[i], "properties"), req ? n->valuestring : n->string))
                    rc = fail(g, NULL, TM_E_UNSUPPORTED, "merging: additionalProperties of one part would hold for "
                              "'%.100s' of another", req ? n->valuestring : n->string);
    if (!rc && !mc.fals) rc = compile_body(g, dst, b, nalts);
    cJSON_Delete(dst);
    return rc;
}

/* ---- objects ---- */

typedef struct entry {  /* a listed property */
    const char *key;
    const cJSON *schema;  /* NULL: any value */
    int req;
    name_t pair;          /* its rule: "key" ws ":" ws value; "" if it may not appear */
    uint32_t *cp;         /* [ncp] the key's code points (for notkey) */
    int ncp;
} entry;

static int by_cps(const void *x, const void *y)
{
    const entry *a = x, *b = y;
    for (int i = 0; i < a->ncp && i < b->ncp; i++)
        if (a->cp[i] != b->cp[i]) return a->cp[i] < b->cp[i] ? -1 : 1;
    return (a->ncp > b->ncp) - (a->ncp < b->ncp);
}

/* notkey: out := a rule for the rest of a key after its '"' whose decoded name is none of k [m]'s
 * (sorted by code points): a trie of the names, each node a rule: the key may end there (if no name
 * does), go on with a child's character (in any spelling), or with any other character and then
 * anything */
static int notkey(gen *g, const entry *k, int m, name_t out)
{
    struct item { /* a node to write: names k [lo, hi) share their first depth code points */
        int lo, hi, depth;
        name_t name;
    } *q = NULL;  /* [nq] */
    int nq = 0, rc = TM_OK;
    size_t capq = 0;
    range_t *r = malloc(((size_t)m + 1) * sizeof *r); /* the code points no child takes */
    new_name(g, "key", out);
    if (!r || tm_grow((void **)&q, &capq, 1, sizeof *q)) rc = nomem(g);
    else q[nq++] = (struct item){0, m, 0, {0}}, memcpy(q[0].name, out, sizeof(name_t));
    while (!rc && nq) {
        struct item it = q[--nq];
        sb nb = {0}, cb = {0};
        int na = 0, ca = 0, i = it.lo;
        size_t nr = 0;
        uint32_t next = 0;
        if (k[i].ncp == it.depth) i++;
        else alt(&nb, &na), put(&nb, " \"\\\"\"");
        for (int j = i, j1; j < it.hi && !rc; j = j1) {
            uint32_t c = k[j].cp[it.depth];
            for (j1 = j; j1 < it.hi && k[j1].cp[it.depth] == c;) j1++;
            if (c > next) r[nr][0] = next, r[nr++][1] = c - 1;
            next = c + 1;
            if (tm_grow((void **)&q, &capq, nq + 1, sizeof *q)) { rc = nomem(g); break; }
            q[nq] = (struct item){j, j1, it.depth + 1, {0}};
            new_name(g, "key", q[nq].name);
            range_t one = {c, c};
            int ia = 0;
            alt(&nb, &na), put(&nb, " (");
            rc = jchar_in(g, &nb, &one, 1, &ia, 1);
            putf(&nb, " ) %s", q[nq++].name);
        }
        if (next <= 0x10FFFF) r[nr][0] = next, r[nr++][1] = 0x10FFFF;
        if (!rc) rc = jchar_in(g, &cb, r, nr, &ca, 1);
        if (ca) alt(&nb, &na), put(&nb, " ("), put_n(&nb, cb.p, cb.n), put(&nb, " )"), prim(g, &nb, P_CHAR);
        if (ca) put(&nb, "* \"\\\"\"");
        if (!rc) rc = cb.err ? sb_fail(g, cb.err) : emit_rule(g, it.name, &nb);
        free(cb.p), free(nb.p);
    }
    free(r), free(q);
    return rc;
}

static int in_strings(const cJSON *a, const char *s)
{
    for (const cJSON *c = a ? a->child : NULL; c; c = c->next)
        if (!strcmp(c->valuestring, s)) return 1;
    return 0;
}

/* pair: e->pair := a rule "key" ws ":" ws value (value a name) */
static int pair(gen *g, entry *e, const char *value)
{
    sb pb = {0};
    cJSON *ks = cJSON_CreateString(e->key);
    char *kt = ks ? cJSON_PrintUnformatted(ks) : NULL;
    int rc = !kt ? nomem(g) : put_lit(&pb, kt) ? fail(g, "properties", TM_E_FORMAT, "a name that is not UTF-8") : TM_OK;
    putf(&pb, " ws \":\" ws %s", value);
    new_name(g, "kv", e->pair);
    if (!rc) rc = emit_rule(g, e->pair, &pb);
    free(kt), cJSON_Delete(ks), free(pb.p);
    return rc;
}

/* object: one alternative "{" ws members ws "}"; members (M) are the kept listed pairs in order, the
 * required ones present, then extra pairs. M := pair_i T_(i+1) for each i up to the first required
 * one (| X C* if none is required), T_j := seg_j T_(j+1), the last T inline: seg_j ... seg_(n-1) C*,
 * seg_j: ws "," ws pair_j (required) or ( ws "," ws pair_j )?; X an extra pair, C := ws "," ws X */
static int object(gen *g, const cJSON *s, sb *b, int *nalts)
{
    const cJSON *props = get(s, "properties"), *req = get(s, "required"), *add = get(s, "additionalProperties");
    if (!props && !req && (!add || cJSON_IsTrue(add))) return alt(b, nalts), prim(g, b, P_OBJECT), TM_OK;
    int n = cJSON_GetArraySize(props) + cJSON_GetArraySize(req), m = 0, rc = TM_OK, none = 0;
    int extra = !cJSON_IsFalse(add); /* extra members may come */
    int *kept = calloc((size_t)n + 1, sizeof *kept), nk = 0, first = -1, listed;
    entry *e = calloc((size_t)n + 1, sizeof *e);
    name_t *tails = calloc((size_t)n + 2, sizeof *tails), x = "", c = "", mem = "", xv = "value", key = "";
    if (!e || !kept || !tails) rc = nomem(g);
    for (const cJSON *p = props ? props->child : NULL; p && !rc; p = p->next) {
        for (int i = 0; i < m && !rc; i++)
            if (!strcmp(e[i].key, p->string)) rc = fail(g, "properties", TM_E_FORMAT, "'%.100s' twice", p->string);
        e[m++] = (entry){p->string, p, in_strings(req, p->string), "", NULL, 0};
    }
    listed = m;
    for (const cJSON *r = req ? req->child : NULL; r && !rc; r = r->next) {
        int i = 0;
        while (i < m && strcmp(e[i].key, r->valuestring)) i++;
        if (i == m) e[m++] = (entry){r->valuestring, cJSON_IsTrue(add) ? NULL : add, 1, "", NULL, 0};
    }
    g->guard++;
    for (int i = 0; i < m && !rc && !none; i++) {
        size_t old = path_push(g, i < listed ? "properties" : "additionalProperties", -1);
        if (i < listed) path_push(g, e[i].key, -1);
        name_t v = "value";
        int emp = 0;
        if (e[i].schema) rc = compile(g, e[i].schema, v, &emp);
        else g->prims |= B(P_VALUE);
        path_pop(g, old);
        none = emp && e[i].req;
        if (rc || emp || (rc = pair(g, &e[i], v))) continue;
        if (first < 0 && e[i].req) first = nk;
        kept[nk++] = i;
    }
    if (!rc && !none && extra && add && !cJSON_IsTrue(add)) {
        size_t old = path_push(g, "additionalProperties", -1);
        int emp = 0;
        rc = compile(g, add, xv, &emp);
        path_pop(g, old);
        extra = !emp;
    }
    g->guard--;
    g->prims |= B(P_WS) | (extra && !strcmp(xv, "value") ? B(P_VALUE) : 0) | (extra && !m ? B(P_STRING) : 0);
    if (!rc && !none && extra) { /* X, C and the trie that keeps listed names out of X's key */
        sb xb = {0}, cb = {0};
        entry *k = m ? calloc((size_t)m, sizeof *k) : NULL; /* e sorted by code points */
        if (m && !k) rc = nomem(g);
        for (int i = 0; i < m && !rc; i++) {
            size_t len = strlen(e[i].key);
            k[i] = e[i], k[i].ncp = 0;
            if (!(k[i].cp = malloc((len + 1) * sizeof *k[i].cp))) rc = nomem(g);
            for (size_t j = 0, w = 1; j < len && !rc; j += w)
                if (!(w = (size_t)utf8((const unsigned char *)e[i].key + j, len - j, &k[i].cp[k[i].ncp++])))
                    rc = fail(g, "properties", TM_E_FORMAT, "a name that is not UTF-8");
        }
        if (!rc && m) qsort(k, (size_t)m, sizeof *k, by_cps), rc = notkey(g, k, m, key);
        for (int i = 0; k && i < m; i++) free(k[i].cp);
        free(k);
        putf(&xb, m ? " \"\\\"\" %s ws \":\" ws %s" : " string%s ws \":\" ws %s", key, xv);
        new_name(g, "xkv", x), new_name(g, "more", c);
        putf(&cb, " ws \",\" ws %s", x);
        if (!rc) rc = emit_rule(g, x, &xb);
        if (!rc) rc = emit_rule(g, c, &cb);
        free(xb.p), free(cb.p);
    }
    int kf = first < 0 ? nk : first, J = kf + 1 < nk ? kf + 1 : nk, na = 0;
    for (int j = J; j >= 1 && !rc && !none; j--) { /* T_j */
        sb tb = {0};
        for (int i = j; i < (j == J ? nk : j + 1); i++)
            putf(&tb, e[kept[i]].req ? " ws \",\" ws %s" : " ( ws \",\" ws %s )?", e[kept[i]].pair);
        if (j < J && tails[j + 1][0]) putf(&tb, " %s", tails[j + 1]);
        if (j == J && extra) putf(&tb, " %s*", c);
        if (tb.n) new_name(g, "tail", tails[j]), rc = emit_rule(g, tails[j], &tb);
        free(tb.p);
    }
    sb mb = {0};
    for (int i = 0; i <= kf && i < nk; i++) alt(&mb, &na), putf(&mb, " %s %s", e[kept[i]].pair, tails[i + 1]);
    if (kf == nk && extra) alt(&mb, &na), putf(&mb, " %s %s*", x, c);
    if (!rc && !none && na) new_name(g, "mem", mem), rc = emit_rule(g, mem, &mb);
    if (!rc && !none) { /* "{" ws M ws "}" with a member required, else "{" ws ( M ws )? "}" */
        alt(b, nalts), put(b, " \"{\" ws");
        if (na) putf(b, kf < nk ? " %s ws" : " ( %s ws )?", mem);
        put(b, " \"}\"");
    }
    free(mb.p), free(e), free(kept), free(tails);
    return rc;
}

/* ---- arrays, strings, numbers ---- */

static int counts(gen *g, const cJSON *s, const char *lo_key, const char *hi_key, long *lo, long *hi)
{
    *lo = count_of(s, lo_key, 0), *hi = count_of(s, hi_key, -1);
    if (*lo > JS_MAX_COUNT || *hi > JS_MAX_COUNT)
        return fail(g, *lo > JS_MAX_COUNT ? lo_key : hi_key, TM_E_LIMIT, "over %ld is not supported", JS_MAX_COUNT);
    return TM_OK;
}

/* more: name := ws "," ws item (the rule made once), then name{m,n} into b */
static int more(gen *g, sb *b, const char *item, name_t name, long m, long n)
{
    sb mb = {0};
    int rc = TM_OK;
    if (!name[0]) putf(&mb, " ws \",\" ws %s", item), new_name(g, "more", name), rc = emit_rule(g, name, &mb);
    free(mb.p);
    return rc ? rc : repeat(g, b, name, m, n);
}

/* array: "[" ws ( elements ws )? "]": the tuple's first items (those up to minItems required, the
 * rest nested optional rules U_j := ws "," ws t_j U_(j+1)?), then the rest items as more{a,b} */
static int array(gen *g, const cJSON *s, sb *b, int *nalts)
{
    const cJSON *items = get(s, "items"), *tuple = get(s, "prefixItems"), *rest = items, *el;
    const char *tuple_key = "prefixItems", *rest_key = "items";
    long mn, mx;
    int rc = counts(g, s, "minItems", "maxItems", &mn, &mx), rest_ok = 1, emp = 0, k;
    if (rc) return rc;
    if (!items && !tuple && !get(s, "minItems") && !get(s, "maxItems"))
        return alt(b, nalts), prim(g, b, P_ARRAY), TM_OK;
    if (cJSON_IsArray(items) && tuple) return fail(g, "items", TM_E_FORMAT, "an items list beside prefixItems");
    if (cJSON_IsArray(items)) /* the older form */
        tuple = items, tuple_key = "items", rest = get(s, "additionalItems"), rest_key = "additionalItems";
    if (mx >= 0 && mn > mx) return TM_OK;
    if ((k = cJSON_GetArraySize(tuple)) >= mx && mx >= 0) k = (int)mx, rest_ok = 0;
    name_t *t = calloc((size_t)k + 1, sizeof *t), rn = "value", mo = "", next = "";
    if (!t) return nomem(g);
    g->guard++;
    el = tuple ? tuple->child : NULL;
    for (int i = 0; i < k && !rc; i++, el = el->next) {
        size_t old = path_push(g, tuple_key, i);
        rc = compile(g, el, t[i], &emp);
        path_pop(g, old);
        if (emp) k = i, rest_ok = 0;
    }
    if (!rc && rest_ok && rest) {
        size_t old = path_push(g, rest_key, -1);
        rc = compile(g, rest, rn, &emp);
        path_pop(g, old);
        rest_ok = !emp;
    }
    g->guard--;
    g->prims |= B(P_WS) | (rest_ok && !rest ? B(P_VALUE) : 0);
    long top = rest_ok ? mx : mx >= 0 && mx < k ? mx : k; /* the most items (-1: no bound) */
    long c = mn > 1 ? mn : 1;                             /* the least, once there is one */
    if (rc || (top >= 0 && mn > top)) return free(t), rc;
    sb e = {0};
    if (top != 0 && k == 0) putf(&e, " %s", rn), rc = more(g, &e, rn, mo, c - 1, top < 0 ? -1 : top - 1);
    else if (top != 0) {
        putf(&e, " %s", t[0]);
        for (int i = 1; i < c && i < k; i++) putf(&e, " ws \",\" ws %s", t[i]);
        for (int j = k - 1; j >= c && !rc; j--) { /* U_j */
            sb ub = {0};
            putf(&ub, j < k - 1 ? " ws \",\" ws %s %s?" : " ws \",\" ws %s", t[j], next);
            if (j == k - 1 && rest_ok && (top < 0 || top > k)) rc = more(g, &ub, rn, mo, 0, top < 0 ? -1 : top - k);
            new_name(g, "tup", next);
            if (!rc) rc = emit_rule(g, next, &ub);
            free(ub.p);
        }
        if (c < k) putf(&e, " %s?", next);
        else if (rest_ok) rc = more(g, &e, rn, mo, c - k, top < 0 ? -1 : top - k);
    }
    alt(b, nalts), put(b, " \"[\" ws");
    if (top != 0) put(b, mn ? "" : " ("), put_n(b, e.p ? e.p : "", e.n), put(b, mn ? " ws" : " ws )?");
    put(b, " \"]\"");
    free(e.p), free(t);
    return rc ? rc : e.err ? sb_fail(g, e.err) : TM_OK;
}

static int string(gen *g, const cJSON *s, sb *b, int *nalts)
{
    static const char *const formats[] = {"date", "time", "date-time", "uuid"};
    const cJSON *f = get(s, "format"), *mn = get(s, "minLength"), *mx = get(s, "maxLength");
    long lo, hi;
    int rc = counts(g, s, "minLength", "maxLength", &lo, &hi), i = 0;
    while (f && i < 4 && strcmp(formats[i], f->valuestring)) i++;
    if (rc) return rc;
    if (g->lenient && (i == 4 || mn || mx)) f = NULL; /* the lengths hold, the format is dropped */
    if (f && i == 4)
        return fail(g, "format", TM_E_UNSUPPORTED, "'%.100s': not supported (date, time, date-time, uuid are)",
                    f->valuestring);
    if (f && (mn || mx)) return fail(g, mn ? "minLength" : "maxLength", TM_E_UNSUPPORTED, "beside format: unsupported");
    if (f) alt(b, nalts), put(b, " \"\\\"\""), prim(g, b, P_DATE + i), put(b, " \"\\\"\"");
    else if (!mn && !mx) alt(b, nalts), prim(g, b, P_STRING);
    else if (hi < 0 || lo <= hi) {
        alt(b, nalts), put(b, " \"\\\"\""), g->prims |= B(P_CHAR);
        rc = repeat(g, b, "char", lo, hi);
        put(b, " \"\\\"\"");
    }
    return rc;
}

static int number(gen *g, const cJSON *s, sb *b, int *nalts, int integer)
{
    static const char *const keys[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    double lo = -INFINITY, hi = INFINITY;
    int any = 0;
    for (int i = 0; i < 4; i++) {
        const cJSON *v = get(s, keys[i]);
        if (!v || cJSON_IsBool(v)) continue;
        double x = v->valuedouble;
        if (g->lenient && (!integer || !(fabs(x) <= 9007199254740992.0))) continue;
        if (!integer) return fail(g, keys[i], TM_E_UNSUPPORTED, "a bound on a number (not an integer): not supported");
        if (!(fabs(x) <= 9007199254740992.0)) return fail(g, keys[i], TM_E_UNSUPPORTED, "past 2^53: not supported");
        int excl = i % 2 || cJSON_IsTrue(get(s, keys[i + 1])); /* exclusive, or draft 4's boolean says so */
        if (i < 2) lo = fmax(lo, excl ? floor(x) + 1 : ceil(x));
        else hi = fmin(hi, excl ? ceil(x) - 1 : floor(x));
        any = 1;
    }
    if (!any) alt(b, nalts), prim(g, b, integer ? P_INTEGER : P_NUMBER);
    else int_range(b, lo, hi, nalts);
    return TM_OK;
}

static int types(gen *g, const cJSON *s, sb *b, int *nalts)
{
    static const char *const typed[] = {"properties", "required", "additionalProperties", "items", "prefixItems",
                                        "additionalItems", "minItems", "maxItems", "minLength", "maxLength", "format",
                                        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
    const cJSON *t = get(s, "type");
    unsigned m = t ? type_mask(t) : T_ALL;
    int rc = TM_OK, any = 0;
    if (m & T_NUMBER) m &= ~(unsigned)T_INTEGER; /* a number grammar takes integers too */
    for (size_t i = 0; i < sizeof typed / sizeof *typed; i++) any |= get(s, typed[i]) != NULL;
    if (m == (T_ALL & ~T_INTEGER) && !any) return alt(b, nalts), prim(g, b, P_VALUE), TM_OK;
    if (m & T_OBJECT) rc = object(g, s, b, nalts);
    if (!rc && (m & T_ARRAY)) rc = array(g, s, b, nalts);
    if (!rc && (m & T_STRING)) rc = string(g, s, b, nalts);
    if (!rc && (m & (T_NUMBER | T_INTEGER))) rc = number(g, s, b, nalts, !(m & T_NUMBER));
    if (!rc && (m & T_BOOLEAN)) alt(b, nalts), prim(g, b, P_BOOLEAN);
    if (!rc && (m & T_NULL)) alt(b, nalts), prim(g, b, P_NULL);
    return rc;
}

/* ---- enum, const ---- */

static int all_finite(const cJSON *v)
{
    int ok = !cJSON_IsNumber(v) || isfinite(v->valuedouble);
    for (const cJSON *c = v->child; c && ok; c = c->next) ok = all_finite(c);
    return ok;
}

/* enums: each value (of a type "type" allows) as its compact text; const within enum */
static int enums(gen *g, const cJSON *s, sb *b, int *nalts)
{
    for (const cJSON *k = s->child; k; k = k->next)
        if (kw_kind(k->string) >= 0 && strcmp(k->string, "type") && strcmp(k->string, "enum") &&
            strcmp(k->string, "const") && !g->lenient)
            return fail(g, k->string, TM_E_UNSUPPORTED, "beside enum or const: not supported");
    const cJSON *en = get(s, "enum"), *co = get(s, "const"), *t = get(s, "type");
    const char *key = co ? "const" : "enum";
    unsigned m = t ? type_mask(t) : T_ALL;
    int rc = TM_OK, in = !en || !co;
    for (const cJSON *x = en && co ? en->child : NULL; x; x = x->next) in |= cJSON_Compare(x, co, 1);
    for (const cJSON *v = !in ? NULL : co ? co : en->child; v && !rc; v = co ? NULL : v->next) {
        char *text = all_finite(v) ? cJSON_PrintUnformatted(v) : NULL;
        if (!text) return all_finite(v) ? nomem(g) : fail(g, key, TM_E_UNSUPPORTED, "a number too large for a double");
        unsigned vt = cJSON_IsObject(v) ? T_OBJECT : cJSON_IsArray(v) ? T_ARRAY : cJSON_IsString(v) ? T_STRING
                    : cJSON_IsBool(v) ? T_BOOLEAN : cJSON_IsNull(v) ? T_NULL
                    : T_NUMBER | (strpbrk(text, ".eE") ? 0 : T_INTEGER); /* an integer if written as one */
        if (vt & m) alt(b, nalts), rc = put_lit(b, text) ? fail(g, key, TM_E_FORMAT, "a string not UTF-8") : TM_OK;
        free(text);
    }
    return rc;
}

/* ---- a schema ---- */

static int dispatch(gen *g, const cJSON *s, sb *b, int *nalts)
{
    const cJSON *r = get(s, "$ref"), *any = get(s, "anyOf") ? get(s, "anyOf") : get(s, "oneOf");
    if (get(s, "allOf") || (r && constraints(s, "$ref"))) return flatten(g, s, NULL, NULL, b, nalts);
    if (r) return compile_ref(g, r, b, nalts);
    if (any && get(s, "oneOf") && any != get(s, "oneOf"))
        return fail(g, "oneOf", TM_E_UNSUPPORTED, "anyOf and oneOf in one schema are not supported");
    if (any) { /* alternatives; other constraints beside them are merged into each */
        int sib = constraints(s, any->string), i = 0, rc = TM_OK;
        for (const cJSON *el = any->child; el && !rc; el = el->next) {
            size_t old = path_push(g, any->string, i++);
            rc = sib ? flatten(g, s, any->string, el, b, nalts) : compile_body(g, el, b, nalts);
            path_pop(g, old);
        }
        return rc;
    }
    return get(s, "enum") || get(s, "const") ? enums(g, s, b, nalts) : types(g, s, b, nalts);
}

static int compile_body(gen *g, const cJSON *s, sb *b, int *nalts)
{
    if (cJSON_IsBool(s)) return cJSON_IsTrue(s) ? (alt(b, nalts), prim(g, b, P_VALUE), TM_OK) : TM_OK;
    if (!cJSON_IsObject(s)) return fail(g, NULL, TM_E_FORMAT, "a schema must be an object or a boolean");
    if (g->depth >= JS_MAX_DEPTH) return fail(g, NULL, TM_E_LIMIT, "schemas nested deeper than %d", JS_MAX_DEPTH);
    g->depth++;
    int rc = check_keywords(g, s);
    if (!rc) rc = dispatch(g, s, b, nalts);
    g->depth--;
    return rc ? rc : b->err ? sb_fail(g, b->err) : TM_OK;
}

/* ---- the whole ---- */

static int by_from(const void *x, const void *y) { return (*(const int(*)[2])x)[0] - (*(const int(*)[2])y)[0]; }

/* check_cycles: no ref calls itself through refs called before reading a character (Kahn's order:
 * what is left once every ref nothing calls first is taken away lies on such a cycle) */
static int check_cycles(gen *g)
{
    int n = g->nrefs, *deg = calloc((size_t)n, sizeof *deg), *off = calloc((size_t)n + 1, sizeof *off),
        *stack = malloc((size_t)n * sizeof *stack), ns = 0, rc = deg && off && stack ? TM_OK : nomem(g);
    if (!rc && g->nedges) qsort(g->edges, (size_t)g->nedges, sizeof *g->edges, by_from);
    for (int e = 0; e < g->nedges && !rc; e++) deg[g->edges[e][1]]++, off[g->edges[e][0] + 1]++;
    for (int i = 0; i < n && !rc; i++) off[i + 1] += off[i];
    for (int i = 0; i < n && !rc; i++)
        if (!deg[i]) stack[ns++] = i;
    while (ns)
        for (int i = stack[--ns], e = off[i]; e < off[i + 1]; e++)
            if (!--deg[g->edges[e][1]]) stack[ns++] = g->edges[e][1];
    for (int i = 0; i < n && !rc; i++)
        if (deg[i]) {
            g->pn = (size_t)snprintf(g->path, sizeof g->path, "%s", g->refs[i].ptr + 1);
            rc = fail(g, NULL, TM_E_UNSUPPORTED, "a $ref cycle that reads nothing (left recursion)");
        }
    free(deg), free(off), free(stack);
    return rc;
}

static int emit_prims(gen *g)
{
    static const range_t all = {0, 0x10FFFF}, wide = {0x80, 0x10FFFF};
    unsigned m = g->prims, m0 = 0;
    while (m != m0) /* with the rules they use */
        for (int p = (m0 = m, 0); p < P_N; p++) m |= m & B(p) ? prims[p].deps : 0;
    int rc = TM_OK;
    for (int p = 0; p < P_N && !rc; p++) {
        sb body = {0};
        int n = 0;
        if (!(m & B(p))) continue;
        if (p == P_CHAR || p == P_WCHAR) rc = jchar_in(g, &body, p == P_CHAR ? &all : &wide, 1, &n, p == P_CHAR);
        else put(&body, " "), put(&body, prims[p].body);
        if (!rc) rc = emit_rule(g, prims[p].name, &body);
        free(body.p);
    }
    return rc;
}

/* nul_in_string: a string of the text holds U+0000 (raw or \u0000), which cJSON's strings cannot */
static int nul_in_string(const char *s, size_t n)
{
    for (size_t i = 0, in = 0; i < n; i++) {
        if (in && (!s[i] || (s[i] == '\\' && i + 5 < n && s[i + 1] == 'u' && !memcmp(s + i + 2, "0000", 4)))) return 1;
        if (in && s[i] == '\\') i++;
        else if (s[i] == '"') in = !in;
    }
    return 0;
}

static int to_gbnf(const char *schema, size_t len, int lenient, char **gbnf, tm_err *err)
{
    *gbnf = NULL;
    if (!schema) return tm_errf(err, TM_E_INVALID, "json schema: no text");
    if (nul_in_string(schema, len))
        return tm_errf(err, TM_E_UNSUPPORTED, "json schema: a string with U+0000 is not supported");
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(schema, len, &end, 0);
    if (!doc) return tm_errf(err, TM_E_FORMAT, "json schema: not JSON (at byte %zu)", end ? (size_t)(end - schema) : 0);
    while (end < schema + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')) end++;
    if (end != schema + len) {
        cJSON_Delete(doc);
        return tm_errf(err, TM_E_FORMAT, "json schema: text after the schema (at byte %zu)", (size_t)(end - schema));
    }
    gen g = {.doc = doc, .err = err, .lenient = lenient};
    int rc = add_ref(&g, doc, "#") < 0 ? nomem(&g) : open_ref(&g, 0, NULL, NULL);
    if (!rc && g.refs[0].state == R_EMPTY) rc = fail(&g, NULL, TM_E_UNSUPPORTED, "the schema allows no value");
    if (!rc) rc = check_cycles(&g);
    if (!rc) rc = emit_prims(&g);
    if (!rc && g.out.n + g.reps + 100 > TM_GRAMMAR_MAX_ELEMS)
        rc = fail(&g, NULL, TM_E_LIMIT, "the grammar would pass %d elements", TM_GRAMMAR_MAX_ELEMS);
    if (!rc) *gbnf = g.out.p, g.out.p = NULL;
    free(g.out.p), free(g.refs), free(g.edges);
    cJSON_Delete(doc);
    return rc;
}

int tm_json_schema_gbnf(const char *schema, size_t len, char **gbnf, tm_err *err)
{
    return to_gbnf(schema, len, 0, gbnf, err);
}

int tm_json_schema_gbnf_lenient(const char *schema, size_t len, char **gbnf, tm_err *err)
{
    return to_gbnf(schema, len, 1, gbnf, err);
}
