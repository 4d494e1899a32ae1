/* tests/test_json_schema.c: JSON Schema -> GBNF (text/json_schema.h), through the grammar engine
 * (text/grammar.h).
 *
 * 1. Schemas of every supported feature, each with texts the grammar must take whole and texts it
 *    must refuse (the validator below must agree on each); then, for each schema, thousands of
 *    random texts made from it (mostly valid, some mutated): the grammar takes a text whole
 *    exactly when an independent validator written here says it is valid. The validator is JSON
 *    Schema's meaning for the supported keywords plus json_schema.c's documented narrowings (the
 *    whitespace bound, property order and no repeated listed key, one spelling for listed keys and
 *    enum values, integers written as integers, formats without escapes, oneOf as anyOf).
 * 2. Random schemas (nested types, bounds, tuples, enums, anyOf, allOf, $refs): every grammar
 *    returned parses, and agrees with the validator on random texts.
 * 3. Integer bounds exhaustively: every integer in [-2100, 2100], and long ones, against many bounds.
 * 4. Refusals: every unsupported keyword, malformed schemas, bad $refs, left recursion, limits: the
 *    status, and the JSON pointer in the message. */
#include "harness.h"

#include <cjson/cJSON.h>
#include <stdint.h>

#include "text/grammar.h"
#include "text/json_schema.h"
#include "text/sampler.h"

static const cJSON *get(const cJSON *s, const char *k)
{
    return cJSON_IsObject(s) ? cJSON_GetObjectItemCaseSensitive(s, k) : NULL;
}

/* ---- the grammar ---- */

/* gbnf_of: the grammar of schema text s compiled, or NULL (with the error printed if `loud`) */
static tm_grammar *gbnf_of(const char *s, int loud)
{
    char *src = NULL;
    tm_err e = {0};
    tm_grammar *g = NULL;
    if (tm_json_schema_gbnf(s, strlen(s), &src, &e)) {
        if (loud) fprintf(stderr, "schema %s: %s\n", s, e.msg);
        return NULL;
    }
    if (tm_grammar_parse(&g, src, strlen(src), &e))
        fprintf(stderr, "grammar of %s does not parse: %s\n%s", s, e.msg, src), g = NULL;
    free(src);
    return g;
}

static int accepts(const tm_grammar *g, const char *t, size_t n)
{
    tm_gmatch *m;
    tm_err e;
    if (tm_gmatch_new(&m, g, &e)) return -1;
    int ok = tm_gmatch_feed(m, t, n) == 1 && tm_gmatch_accepting(m);
    tm_gmatch_free(m);
    return ok;
}

/* ---- texts: a strict JSON reader with the grammar's whitespace ---- */

enum { J_OBJ, J_ARR, J_STR, J_NUM, J_LIT };

typedef struct jval { /* a value read: its text s [n] */
    int type;         /* J_* */
    const char *s;
    size_t n;
    char *str; /* J_STR: decoded UTF-8 [len], code points ncp */
    size_t len, ncp;
    struct jval *kid; /* [nkid] J_ARR: items; J_OBJ: key, value, key, value, ... */
    int nkid;
} jval;

typedef struct jp {
    const char *s, *e;
    int depth;
} jp;

static void jn_free(jval *v)
{
    for (int i = 0; i < v->nkid; i++) jn_free(&v->kid[i]);
    free(v->kid);
    free(v->str);
}

/* the grammar's ws (inside containers): nothing, " ", or "\n" and up to 20 of [ \t] */
static void jp_ws(jp *p)
{
    if (p->s < p->e && *p->s == ' ')
        p->s++;
    else if (p->s < p->e && *p->s == '\n')
        for (int k = (p->s++, 0); k < 20 && p->s < p->e && (*p->s == ' ' || *p->s == '\t'); k++) p->s++;
}

static int hex4(const char *s, const char *e, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        if (s + i >= e) return 0;
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return 0;
        *v = *v * 16 + (unsigned)d;
    }
    return 1;
}

static int put_utf8(char *o, unsigned c)
{
    if (c < 0x80) return o[0] = (char)c, 1;
    if (c < 0x800) return o[0] = (char)(0xC0 | c >> 6), o[1] = (char)(0x80 | (c & 63)), 2;
    if (c < 0x10000)
        return o[0] = (char)(0xE0 | c >> 12), o[1] = (char)(0x80 | (c >> 6 & 63)), o[2] = (char)(0x80 | (c & 63)), 3;
    return o[0] = (char)(0xF0 | c >> 18), o[1] = (char)(0x80 | (c >> 12 & 63)), o[2] = (char)(0x80 | (c >> 6 & 63)),
           o[3] = (char)(0x80 | (c & 63)), 4;
}

static int jp_string(jp *p, jval *v)
{
    v->type = J_STR;
    if (!(v->str = malloc((size_t)(p->e - p->s) + 1))) return 0;
    for (p->s++;; v->ncp++) {
        if (p->s >= p->e) return 0;
        unsigned char c = (unsigned char)*p->s;
        if (c == '"') break;
        if (c < 0x20) return 0;
        if (c == '\\') {
            if (p->s + 1 >= p->e) return 0;
            const char *esc = strchr("\"\\/bfnrt", p->s[1]);
            unsigned u;
            if (p->s[1] && esc) {
                v->str[v->len++] = "\"\\/\b\f\n\r\t"[esc - "\"\\/bfnrt"];
                p->s += 2;
                continue;
            }
            if (p->s[1] != 'u' || !hex4(p->s + 2, p->e, &u) || (u >= 0xDC00 && u <= 0xDFFF)) return 0;
            p->s += 6;
            if (u >= 0xD800 && u <= 0xDBFF) {
                unsigned lo;
                if (p->e - p->s < 6 || p->s[0] != '\\' || p->s[1] != 'u' || !hex4(p->s + 2, p->e, &lo) || lo < 0xDC00 ||
                    lo > 0xDFFF)
                    return 0;
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                p->s += 6;
            }
            v->len += (size_t)put_utf8(v->str + v->len, u);
            continue;
        }
        int k = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!k || p->e - p->s < k) return 0;
        unsigned u = k == 1 ? c : c & (0x7F >> k);
        for (int i = 1; i < k; i++) {
            if ((p->s[i] & 0xC0) != 0x80) return 0;
            u = u << 6 | (p->s[i] & 0x3F);
        }
        static const unsigned least[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (u < least[k] || u > 0x10FFFF || (u >= 0xD800 && u <= 0xDFFF)) return 0;
        memcpy(v->str + v->len, p->s, (size_t)k);
        v->len += (size_t)k, p->s += k;
    }
    p->s++;
    v->str[v->len] = 0;
    return 1;
}

static int digits(jp *p)
{
    const char *a = p->s;
    while (p->s < p->e && *p->s >= '0' && *p->s <= '9') p->s++;
    return p->s > a;
}

static int jp_value(jp *p, jval *v);

static int jp_kid(jp *p, jval *v, int str)
{
    jval *k = realloc(v->kid, sizeof *k * (size_t)(v->nkid + 1));
    if (!k) return 0;
    v->kid = k;
    memset(&k[v->nkid], 0, sizeof *k);
    jval *c = &k[v->nkid++];
    c->s = p->s;
    int ok = str ? p->s < p->e && *p->s == '"' && jp_string(p, c) : jp_value(p, c);
    c->n = (size_t)(p->s - c->s);
    return ok;
}

static int jp_value(jp *p, jval *v)
{
    v->s = p->s;
    if (p->s >= p->e || ++p->depth > 200) return 0;
    char c = *p->s;
    int ok = 1;
    if (c == '{' || c == '[') {
        v->type = c == '{' ? J_OBJ : J_ARR;
        p->s++;
        jp_ws(p);
        if (p->s < p->e && *p->s == (c == '{' ? '}' : ']'))
            p->s++;
        else
            for (;;) {
                if (c == '{') {
                    if (!jp_kid(p, v, 1)) return 0;
                    jp_ws(p);
                    if (p->s >= p->e || *p->s++ != ':') return 0;
                    jp_ws(p);
                }
                if (!jp_kid(p, v, 0)) return 0;
                jp_ws(p);
                if (p->s >= p->e) return 0;
                if (*p->s == (c == '{' ? '}' : ']')) {
                    p->s++;
                    break;
                }
                if (*p->s++ != ',') return 0;
                jp_ws(p);
            }
    } else if (c == '"')
        ok = jp_string(p, v);
    else if (c == '-' || (c >= '0' && c <= '9')) {
        v->type = J_NUM;
        if (*p->s == '-') p->s++;
        if (p->s < p->e && *p->s == '0')
            p->s++;
        else
            ok = p->s < p->e && *p->s >= '1' && *p->s <= '9' && digits(p);
        if (ok && p->s < p->e && *p->s == '.') p->s++, ok = digits(p);
        if (ok && p->s < p->e && (*p->s == 'e' || *p->s == 'E')) {
            p->s++;
            if (p->s < p->e && (*p->s == '+' || *p->s == '-')) p->s++;
            ok = digits(p);
        }
    } else {
        v->type = J_LIT;
        ok = 0;
        for (const char *const *l = (const char *const[]){"true", "false", "null", NULL}; *l && !ok; l++)
            if ((size_t)(p->e - p->s) >= strlen(*l) && !memcmp(p->s, *l, strlen(*l))) p->s += strlen(*l), ok = 1;
    }
    p->depth--;
    v->n = (size_t)(p->s - v->s);
    return ok;
}

/* jread: t [n] as one JSON value with nothing around it (the language's top level); 0 if not */
static int jread(const char *t, size_t n, jval *v)
{
    jp p = {t, t + n, 0};
    memset(v, 0, sizeof *v);
    int ok = jp_value(&p, v) && p.s == p.e;
    if (!ok) jn_free(v), memset(v, 0, sizeof *v);
    return ok;
}

/* ---- the validator: JSON Schema's meaning for the supported keywords, and the narrowings ---- */

static const cJSON *resolve(const cJSON *root, const char *ref)
{
    if (ref[0] != '#') return NULL;
    const cJSON *cur = root;
    char tok[256];
    for (const char *s = ref + 1; *s && cur;) {
        size_t n = 0;
        for (s++; *s && *s != '/' && n < sizeof tok - 1; s++) {
            unsigned h;
            char t[5] = {'0', '0', s[0] == '%' ? s[1] : 0, s[0] == '%' && s[1] ? s[2] : 0, 0};
            if (s[0] == '%' && hex4(t, t + 4, &h))
                tok[n++] = (char)h, s += 2; /* %XX, then ~0 ~1 */
            else
                tok[n++] = *s;
        }
        size_t m = 0;
        for (size_t i = 0; i < n; i++) tok[m++] = tok[i] == '~' && i + 1 < n ? (tok[++i] == '0' ? '~' : '/') : tok[i];
        n = m;
        tok[n] = 0;
        cur = cJSON_IsArray(cur) ? cJSON_GetArrayItem(cur, atoi(tok)) : get(cur, tok);
    }
    return cur;
}

/* the spelling cJSON_PrintUnformatted gives v equals text t [n] */
static int spelled(const cJSON *v, const char *t, size_t n)
{
    char *c = cJSON_PrintUnformatted(v);
    int ok = c && strlen(c) == n && !memcmp(c, t, n);
    free(c);
    return ok;
}

static int key_is(const jval *k, const char *name)
{
    return k->len == strlen(name) && !memcmp(k->str, name, k->len);
}

/* listed names, in the order the grammar keeps: properties (first seen, through allOf and $ref),
 * then required names not among them */
typedef struct names {
    const char *v[256];
    int n;
} names;

static void add_name(names *l, const char *s)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->v[i], s)) return;
    if (l->n < 256) l->v[l->n++] = s;
}

static void collect(const cJSON *s, const cJSON *root, const char *skip, int req, names *l, int depth)
{
    if (!cJSON_IsObject(s) || depth > 20) return;
    for (const cJSON *k = s->child; k; k = k->next) {
        if (skip && !strcmp(k->string, skip)) continue;
        if (!strcmp(k->string, req ? "required" : "properties"))
            for (const cJSON *p = k->child; p; p = p->next) add_name(l, req ? p->valuestring : p->string);
        if (!strcmp(k->string, "allOf"))
            for (const cJSON *p = k->child; p; p = p->next) collect(p, root, NULL, req, l, depth + 1);
        if (!strcmp(k->string, "$ref")) collect(resolve(root, k->valuestring), root, NULL, req, l, depth + 1);
    }
}

/* the members of object v: listed keys spelled as cJSON spells them, in the listed order, each once,
 * before every other key */
static int order_ok(const jval *v, const cJSON *s, const cJSON *extra, const cJSON *root, const char *skip)
{
    names l = {.n = 0}, r = {.n = 0};
    collect(s, root, skip, 0, &l, 1), collect(extra, root, NULL, 0, &l, 1);
    collect(s, root, skip, 1, &r, 1), collect(extra, root, NULL, 1, &r, 1);
    for (int i = 0; i < r.n; i++) add_name(&l, r.v[i]);
    int last = -1, extras = 0;
    for (int i = 0; i < v->nkid; i += 2) {
        int j = 0;
        while (j < l.n && !key_is(&v->kid[i], l.v[j])) j++;
        if (j == l.n) {
            extras = 1;
            continue;
        }
        cJSON *ks = cJSON_CreateString(l.v[j]);
        int ok = spelled(ks, v->kid[i].s, v->kid[i].n);
        cJSON_Delete(ks);
        if (extras || j <= last || !ok) return 0;
        last = j;
    }
    return 1;
}

static int dim(int y, int m)
{
    return m == 2 ? 29 : m == 4 || m == 6 || m == 9 || m == 11 ? 30 : 31;
}

static int num2(const char *s, int max, int *v)
{
    if (s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9') return 0;
    *v = (s[0] - '0') * 10 + s[1] - '0';
    return *v <= max;
}

static int is_date(const char *s, size_t n)
{
    int m, d, y;
    if (n != 10 || s[4] != '-' || s[7] != '-' || !num2(s, 99, &y) || !num2(s + 2, 99, &y)) return 0;
    return num2(s + 5, 12, &m) && m >= 1 && num2(s + 8, 31, &d) && d >= 1 && d <= dim(0, m);
}

static int is_time(const char *s, size_t n)
{
    int v;
    if (n < 9 || !num2(s, 23, &v) || s[2] != ':' || !num2(s + 3, 59, &v) || s[5] != ':' || !num2(s + 6, 60, &v))
        return 0;
    size_t i = 8;
    if (i < n && s[i] == '.') {
        size_t a = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == a) return 0;
    }
    if (i + 1 == n && (s[i] == 'Z' || s[i] == 'z')) return 1;
    return i + 6 == n && (s[i] == '+' || s[i] == '-') && num2(s + i + 1, 23, &v) && s[i + 3] == ':' &&
           num2(s + i + 4, 59, &v);
}

static int is_format(const char *f, const char *s, size_t n)
{
    if (memchr(s, '\\', n)) return 0; /* spelled without escapes */
    if (!strcmp(f, "date")) return is_date(s, n);
    if (!strcmp(f, "time")) return is_time(s, n);
    if (!strcmp(f, "date-time"))
        return n > 11 && is_date(s, 10) && (s[10] == 'T' || s[10] == 't') && is_time(s + 11, n - 11);
    if (n != 36) return 0;
    for (size_t i = 0; i < n; i++)
        if (i == 8 || i == 13 || i == 18 || i == 23 ? s[i] != '-' : !strchr("0123456789abcdefABCDEF", s[i])) return 0;
    return 1;
}

static int valid(const jval *v, const cJSON *s, const cJSON *root, int order, int depth);
static int constraining(const char *k);

static int type_ok(const jval *v, const char *t)
{
    if (!strcmp(t, "object")) return v->type == J_OBJ;
    if (!strcmp(t, "array")) return v->type == J_ARR;
    if (!strcmp(t, "string")) return v->type == J_STR;
    if (!strcmp(t, "number")) return v->type == J_NUM;
    if (!strcmp(t, "integer"))
        return v->type == J_NUM && !memchr(v->s, '.', v->n) && !memchr(v->s, 'e', v->n) && !memchr(v->s, 'E', v->n);
    if (!strcmp(t, "boolean")) return v->type == J_LIT && v->s[0] != 'n';
    return v->type == J_LIT && v->s[0] == 'n';
}

static int constraining(const char *k)
{
    static const char *const kw[] = {"type",
                                     "enum",
                                     "const",
                                     "properties",
                                     "required",
                                     "additionalProperties",
                                     "items",
                                     "prefixItems",
                                     "additionalItems",
                                     "minItems",
                                     "maxItems",
                                     "minLength",
                                     "maxLength",
                                     "format",
                                     "minimum",
                                     "maximum",
                                     "exclusiveMinimum",
                                     "exclusiveMaximum",
                                     "anyOf",
                                     "oneOf",
                                     "allOf",
                                     "$ref",
                                     NULL};
    for (int i = 0; kw[i]; i++)
        if (!strcmp(kw[i], k)) return 1;
    return 0;
}

/* valid: text v is in the language of schema s; order: check the object narrowings here (0 where a
 * merged view checks them) */
static int valid(const jval *v, const cJSON *s, const cJSON *root, int order, int depth)
{
    if (depth > 60) return 0;
    if (cJSON_IsBool(s)) return cJSON_IsTrue(s);
    const cJSON *k, *any = get(s, "anyOf") ? get(s, "anyOf") : get(s, "oneOf");
    int merged = get(s, "allOf") != NULL;
    for (const cJSON *x = cJSON_IsObject(s) && get(s, "$ref") ? s->child : NULL; x; x = x->next)
        merged |= constraining(x->string) && strcmp(x->string, "$ref");
    if (merged && order && v->type == J_OBJ && !order_ok(v, s, NULL, root, NULL)) return 0;
    if (merged) order = 0;
    if ((k = get(s, "$ref")) && !valid(v, resolve(root, k->valuestring), root, order, depth + 1)) return 0;
    for (const cJSON *p = (k = get(s, "allOf")) ? k->child : NULL; p; p = p->next)
        if (!valid(v, p, root, 0, depth + 1)) return 0;
    if (any) {
        int sib = 0, ok = 0;
        for (const cJSON *x = s->child; x; x = x->next)
            sib |= constraining(x->string) && strcmp(x->string, any->string);
        for (const cJSON *p = any->child; p && !ok; p = p->next)
            ok = valid(v, p, root, sib ? 0 : order, depth + 1) &&
                 (!sib || !order || v->type != J_OBJ || order_ok(v, s, p, root, any->string));
        if (!ok) return 0;
        if (sib) order = 0;
    }
    if ((k = get(s, "enum"))) {
        int ok = 0;
        for (const cJSON *e = k->child; e && !ok; e = e->next) ok = spelled(e, v->s, v->n);
        if (!ok) return 0;
    }
    if ((k = get(s, "const")) && !spelled(k, v->s, v->n)) return 0;
    if ((k = get(s, "type"))) {
        int ok = 0;
        if (cJSON_IsString(k)) ok = type_ok(v, k->valuestring);
        for (const cJSON *t = cJSON_IsArray(k) ? k->child : NULL; t && !ok; t = t->next)
            ok = type_ok(v, t->valuestring);
        if (!ok) return 0;
    }
    if (v->type == J_OBJ) {
        const cJSON *props = get(s, "properties"), *add = get(s, "additionalProperties");
        for (int i = 0; i < v->nkid; i += 2) {
            const cJSON *ps = NULL;
            for (const cJSON *p = props ? props->child : NULL; p && !ps; p = p->next)
                if (key_is(&v->kid[i], p->string)) ps = p;
            if (!ps) ps = add;
            if (ps && !valid(&v->kid[i + 1], ps, root, 1, depth + 1)) return 0;
        }
        for (const cJSON *r = (k = get(s, "required")) ? k->child : NULL; r; r = r->next) {
            int found = 0;
            for (int i = 0; i < v->nkid && !found; i += 2) found = key_is(&v->kid[i], r->valuestring);
            if (!found) return 0;
        }
        if (order && !order_ok(v, s, NULL, root, NULL)) return 0;
    }
    if (v->type == J_ARR) {
        const cJSON *tuple = get(s, "prefixItems"), *rest = get(s, "items");
        if (cJSON_IsArray(rest)) tuple = rest, rest = get(s, "additionalItems");
        int nt = cJSON_GetArraySize(tuple);
        for (int i = 0; i < v->nkid; i++) {
            const cJSON *is = i < nt ? cJSON_GetArrayItem(tuple, i) : rest;
            if (is && !valid(&v->kid[i], is, root, 1, depth + 1)) return 0;
        }
        if ((k = get(s, "minItems")) && v->nkid < k->valuedouble) return 0;
        if ((k = get(s, "maxItems")) && v->nkid > k->valuedouble) return 0;
    }
    if (v->type == J_STR) {
        if ((k = get(s, "minLength")) && (double)v->ncp < k->valuedouble) return 0;
        if ((k = get(s, "maxLength")) && (double)v->ncp > k->valuedouble) return 0;
        if ((k = get(s, "format")) && !is_format(k->valuestring, v->s + 1, v->n - 2)) return 0;
    }
    if (v->type == J_NUM) {
        char t[64];
        snprintf(t, sizeof t, "%.*s", (int)(v->n < 63 ? v->n : 63), v->s);
        double x = v->n < 63 ? strtod(t, NULL) : v->s[0] == '-' ? -1e300 : 1e300;
        const cJSON *xmn = get(s, "exclusiveMinimum"), *xmx = get(s, "exclusiveMaximum");
        if ((k = get(s, "minimum")) && (cJSON_IsTrue(xmn) ? x <= k->valuedouble : x < k->valuedouble)) return 0;
        if ((k = get(s, "maximum")) && (cJSON_IsTrue(xmx) ? x >= k->valuedouble : x > k->valuedouble)) return 0;
        if (cJSON_IsNumber(xmn) && x <= xmn->valuedouble) return 0;
        if (cJSON_IsNumber(xmx) && x >= xmx->valuedouble) return 0;
    }
    return 1;
}

static int valid_text(const char *t, size_t n, const cJSON *schema)
{
    jval v;
    if (!jread(t, n, &v)) return 0;
    int ok = valid(&v, schema, schema, 1, 0);
    jn_free(&v);
    return ok;
}

/* ---- random texts made from a schema ---- */

typedef struct buf {
    char *s;
    size_t n, cap;
} buf;

static void bputn(buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->s = realloc(b->s, b->cap);
        if (!b->s) abort();
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void bput(buf *b, const char *s)
{
    bputn(b, s, strlen(s));
}

static int rnd(tm_rng *r, int n)
{
    return (int)(tm_rng_next(r) % (uint64_t)n);
}

static void bprint(buf *b, const cJSON *v)
{
    char *t = cJSON_PrintUnformatted(v);
    if (t) bput(b, t);
    free(t);
}

static void gen_chars(tm_rng *r, buf *b, int n)
{
    static const char *const parts[] = {"a",
                                        "Z",
                                        " ",
                                        "~",
                                        "0",
                                        "\\\"",
                                        "\\\\",
                                        "\\/",
                                        "\\b",
                                        "\\f",
                                        "\\n",
                                        "\\r",
                                        "\\t",
                                        "\\u00e9",
                                        "\\u00E9",
                                        "\\ud83d\\ude00",
                                        "\\uD83D\\uDE00",
                                        "\\u0041",
                                        "\xc3\xa9",
                                        "\xe2\x82\xac",
                                        "\xf0\x9f\x98\x80",
                                        "\xef\xbf\xbf",
                                        "\\u001f",
                                        "{",
                                        ":",
                                        ","};
    for (int i = 0; i < n; i++) bput(b, parts[rnd(r, (int)(sizeof parts / sizeof *parts))]);
}

static void gen_any(tm_rng *r, buf *b, int depth)
{
    static const char *const leaves[] = {
        "0",    "-0",    "7",    "-12",  "3.25",  "1e5", "-4E-07", "123456789012345678901234",
        "true", "false", "null", "\"\"", "\"x\"", "1.0"};
    int c = depth > 3 ? 2 : rnd(r, 4);
    if (c == 2 || c == 3) {
        if (rnd(r, 3))
            bput(b, leaves[rnd(r, (int)(sizeof leaves / sizeof *leaves))]);
        else
            bput(b, "\""), gen_chars(r, b, rnd(r, 4)), bput(b, "\"");
        return;
    }
    bput(b, c ? "[" : "{");
    for (int i = 0, n = rnd(r, 3); i < n; i++) {
        if (i) bput(b, ",");
        if (!c) bput(b, "\""), gen_chars(r, b, rnd(r, 3)), bput(b, "\":");
        gen_any(r, b, depth + 1);
    }
    bput(b, c ? "]" : "}");
}

/* naive merge for generating (not for judging): s's keys, then part's where s lacks them; properties
 * and required unite */
static cJSON *gen_merge(const cJSON *s, const cJSON *part, const cJSON *root, const char *skip)
{
    cJSON *m = cJSON_IsObject(s) ? cJSON_Duplicate(s, 1) : cJSON_CreateObject();
    cJSON_DeleteItemFromObjectCaseSensitive(m, skip);
    if (get(part, "$ref")) part = resolve(root, get(part, "$ref")->valuestring);
    for (const cJSON *k = cJSON_IsObject(part) ? part->child : NULL; k; k = k->next) {
        cJSON *d = cJSON_GetObjectItemCaseSensitive(m, k->string);
        if (!d)
            cJSON_AddItemToObject(m, k->string, cJSON_Duplicate(k, 1));
        else if (!strcmp(k->string, "properties"))
            for (const cJSON *p = k->child; p; p = p->next) {
                if (!get(d, p->string)) cJSON_AddItemToObject(d, p->string, cJSON_Duplicate(p, 1));
            }
        else if (!strcmp(k->string, "required"))
            for (const cJSON *p = k->child; p; p = p->next) cJSON_AddItemToArray(d, cJSON_Duplicate(p, 1));
    }
    return m;
}

static double num_of(const cJSON *s, const char *k, double dflt)
{
    const cJSON *v = get(s, k);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static void gen(tm_rng *r, buf *b, const cJSON *s, const cJSON *root, int depth);

static void gen_object(tm_rng *r, buf *b, const cJSON *s, const cJSON *root, int depth)
{
    const cJSON *props = get(s, "properties"), *req = get(s, "required"), *add = get(s, "additionalProperties");
    names l = {.n = 0};
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next) add_name(&l, p->string);
    for (const cJSON *p = req ? req->child : NULL; p; p = p->next) add_name(&l, p->valuestring);
    int n = 0, shuffle = rnd(r, 25) == 0;
    bput(b, "{");
    for (int j = 0; j < l.n; j++) {
        int i = shuffle ? rnd(r, l.n) : j, required = 0;
        for (const cJSON *p = req ? req->child : NULL; p; p = p->next) required |= !strcmp(p->valuestring, l.v[i]);
        if (required ? rnd(r, 40) == 0 : rnd(r, 2)) continue;
        if (n++) bput(b, ",");
        cJSON *ks = cJSON_CreateString(l.v[i]);
        if (rnd(r, 30))
            bprint(b, ks);
        else { /* the first character as a \u escape */
            char t[16];
            snprintf(t, sizeof t, "\"\\u%04x", (unsigned char)l.v[i][0]);
            bput(b, t), bput(b, l.v[i][0] ? l.v[i] + 1 : ""), bput(b, "\"");
        }
        cJSON_Delete(ks);
        bput(b, ":");
        const cJSON *ps = get(props, l.v[i]);
        gen(r, b, ps ? ps : add, root, depth + 1);
    }
    for (int i = 0, x = cJSON_IsFalse(add) ? rnd(r, 12) == 0 : rnd(r, 3); i < x; i++) {
        if (n++) bput(b, ",");
        if (l.n && rnd(r, 5) == 0)
            bput(b, "\""), bput(b, l.v[rnd(r, l.n)]), bput(b, "\"");
        else
            bput(b, "\""), gen_chars(r, b, rnd(r, 3)), bput(b, rnd(r, 2) ? "x\"" : "\"");
        bput(b, ":");
        gen(r, b, add, root, depth + 1);
    }
    bput(b, "}");
}

static void gen_array(tm_rng *r, buf *b, const cJSON *s, const cJSON *root, int depth)
{
    const cJSON *tuple = get(s, "prefixItems"), *rest = get(s, "items");
    if (cJSON_IsArray(rest)) tuple = rest, rest = get(s, "additionalItems");
    int nt = cJSON_GetArraySize(tuple), mn = (int)num_of(s, "minItems", 0),
        mx = (int)num_of(s, "maxItems", mn + nt + 4);
    if (mx > mn + 40) mx = rnd(r, 2) ? mn + 5 : mx;
    int n = mn - 1 + rnd(r, mx - mn + 3);
    if (n < 0) n = 0;
    if (cJSON_IsFalse(rest) && n > nt && rnd(r, 4)) n = nt;
    bput(b, "[");
    for (int i = 0; i < n; i++) {
        if (i) bput(b, ",");
        gen(r, b, i < nt ? cJSON_GetArrayItem(tuple, i) : rest, root, depth + 1);
    }
    bput(b, "]");
}

static void gen_format(tm_rng *r, buf *b, const char *f)
{
    char t[96];
    int bad = rnd(r, 6) == 0;
    int mo = 1 + rnd(r, 12 + bad), d = 1 + rnd(r, 31), h = rnd(r, 24 + bad), mi = rnd(r, 60 + bad),
        se = rnd(r, 61 + bad);
    if (!bad && d > dim(0, mo)) d = dim(0, mo);
    const char *off = (const char *const[]){"Z", "z", "+05:30", "-11:00", "+24:00", ""}[rnd(r, bad ? 6 : 4)];
    const char *frac = (const char *const[]){"", ".5", ".123456", "."}[rnd(r, bad ? 4 : 3)];
    char date[32], tm[48];
    snprintf(date, sizeof date, "%04d-%02d-%02d", rnd(r, 10000), mo, d);
    snprintf(tm, sizeof tm, "%02d:%02d:%02d%s%s", h, mi, se, frac, off);
    if (!strcmp(f, "date"))
        snprintf(t, sizeof t, "\"%s\"", date);
    else if (!strcmp(f, "time"))
        snprintf(t, sizeof t, "\"%s\"", tm);
    else if (!strcmp(f, "date-time"))
        snprintf(t, sizeof t, "\"%s%c%s\"", date, rnd(r, 5) ? 'T' : 't', tm);
    else
        snprintf(t, sizeof t, "\"%08x-%04x-%04X-%04x-%012llx\"", rnd(r, 1 << 30), rnd(r, 65536), rnd(r, 65536),
                 rnd(r, 65536), (unsigned long long)(tm_rng_next(r) >> (bad ? 12 : 16)));
    bput(b, t);
}

static void gen_integer(tm_rng *r, buf *b, const cJSON *s)
{
    double lo = fmax(num_of(s, "minimum", -1e18), num_of(s, "exclusiveMinimum", -1e18)),
           hi = fmin(num_of(s, "maximum", 1e18), num_of(s, "exclusiveMaximum", 1e18));
    if (lo < -1e17) lo = hi < 1e17 ? hi - 300 : -300;
    if (hi > 1e17) hi = lo + 300;
    char t[64];
    int c = rnd(r, 20);
    if (c == 0)
        bput(b, (const char *const[]){"-0", "1.0", "1e2", "01", "-", "+1", "00", "2E0"}[rnd(r, 8)]);
    else if (c == 1)
        snprintf(t, sizeof t, "%s%llu", rnd(r, 2) ? "-" : "", (unsigned long long)(tm_rng_next(r) >> rnd(r, 64))),
            bput(b, t);
    else
        snprintf(t, sizeof t, "%.0f", floor(lo) - 2 + rnd(r, (int)fmin(hi - lo + 5, 1e6))), bput(b, t);
}

static void gen(tm_rng *r, buf *b, const cJSON *s, const cJSON *root, int depth)
{
    if (!s || cJSON_IsBool(s) || depth > 10 || rnd(r, 60) == 0) {
        gen_any(r, b, 2);
        return;
    }
    const cJSON *k, *any = get(s, "anyOf") ? get(s, "anyOf") : get(s, "oneOf");
    if ((k = get(s, "allOf"))) {
        cJSON *m = gen_merge(s, NULL, root, "allOf");
        for (const cJSON *p = k->child; p; p = p->next) {
            cJSON *m2 = gen_merge(m, p, root, "allOf");
            cJSON_Delete(m), m = m2;
        }
        gen(r, b, m, root, depth + 1);
        cJSON_Delete(m);
        return;
    }
    if (any) {
        cJSON *m = gen_merge(s, cJSON_GetArrayItem(any, rnd(r, cJSON_GetArraySize(any))), root, any->string);
        gen(r, b, m, root, depth + 1);
        cJSON_Delete(m);
        return;
    }
    if ((k = get(s, "$ref"))) {
        cJSON *m = gen_merge(s, s, root, "$ref"); /* s's other keys, then its target's */
        gen(r, b, m, root, depth + 1);
        cJSON_Delete(m);
        return;
    }
    if ((k = get(s, "const")) && rnd(r, 8)) {
        bprint(b, k);
        return;
    }
    if ((k = get(s, "enum")) && rnd(r, 8) && cJSON_GetArraySize(k)) {
        bprint(b, cJSON_GetArrayItem(k, rnd(r, cJSON_GetArraySize(k))));
        return;
    }
    const cJSON *t = get(s, "type");
    const char *type = cJSON_IsString(t) ? t->valuestring
                       : cJSON_IsArray(t) && cJSON_GetArraySize(t)
                           ? cJSON_GetArrayItem(t, rnd(r, cJSON_GetArraySize(t)))->valuestring
                       : get(s, "properties") || get(s, "required") ? "object"
                       : get(s, "items")                            ? "array"
                       : get(s, "format") || get(s, "maxLength")    ? "string"
                                                                    : "any";
    if (rnd(r, 30) == 0) type = "any";
    if (!strcmp(type, "object"))
        gen_object(r, b, s, root, depth);
    else if (!strcmp(type, "array"))
        gen_array(r, b, s, root, depth);
    else if (!strcmp(type, "string") && get(s, "format"))
        gen_format(r, b, get(s, "format")->valuestring);
    else if (!strcmp(type, "string")) {
        int mn = (int)num_of(s, "minLength", 0), mx = (int)num_of(s, "maxLength", mn + 6);
        int n = rnd(r, 2) ? mn - 1 + rnd(r, 3) : mx - 1 + rnd(r, 3);
        if (mx - mn < 40) n = mn - 1 + rnd(r, mx - mn + 3);
        bput(b, "\""), gen_chars(r, b, n < 0 ? 0 : n), bput(b, "\"");
    } else if (!strcmp(type, "integer"))
        gen_integer(r, b, s);
    else if (!strcmp(type, "number")) {
        static const char *const nums[] = {"0",  "-0.5", "1e10", "1E+2", "-4e-07", "3.25",
                                           "12", "-7",   ".5",   "1.",   "01",     "1e"};
        bput(b, nums[rnd(r, 12)]);
    } else if (!strcmp(type, "boolean"))
        bput(b, rnd(r, 2) ? "true" : "false");
    else if (!strcmp(type, "null"))
        bput(b, "null");
    else
        gen_any(r, b, 1);
}

/* mutate: one byte deleted, inserted or replaced */
static void mutate(tm_rng *r, buf *b)
{
    static const char subst[] = "{}[],:\"\\ 0123-+.eEtfnu\n\xc3";
    if (!b->n) return;
    size_t at = (size_t)rnd(r, (int)b->n);
    int c = rnd(r, 3);
    if (c == 0)
        memmove(b->s + at, b->s + at + 1, b->n - at), b->n--;
    else if (c == 1) {
        bputn(b, " ", 1);
        memmove(b->s + at + 1, b->s + at, b->n - at - 1);
        b->s[at] = subst[rnd(r, (int)sizeof subst - 1)];
    } else
        b->s[at] = subst[rnd(r, (int)sizeof subst - 1)];
}

/* differential: n random texts from schema text st: grammar and validator agree; returns how many
 * were valid, or -1 if the schema was refused */
static int differential(const char *st, int n, uint64_t seed, int quiet_refusal)
{
    cJSON *schema = cJSON_Parse(st);
    tm_grammar *g = gbnf_of(st, !quiet_refusal);
    if (!g || !schema) {
        cJSON_Delete(schema);
        tm_grammar_free(g);
        return -1;
    }
    tm_rng r;
    tm_rng_seed(&r, seed);
    buf b = {0};
    int nvalid = 0, bad = 0;
    for (int it = 0; it < n; it++) {
        b.n = 0;
        gen(&r, &b, schema, schema, 0);
        if (rnd(&r, 5) == 0) mutate(&r, &b);
        int want = valid_text(b.s, b.n, schema), got = accepts(g, b.s, b.n);
        nvalid += want;
        if (want != got && bad++ < 5)
            fprintf(stderr, "schema %s\n  text %s: grammar %d, validator %d\n", st, b.s, got, want);
    }
    CHECKF(bad == 0, "%d of %d texts judged differently for %s", bad, n, st);
    free(b.s);
    cJSON_Delete(schema);
    tm_grammar_free(g);
    return nvalid;
}

/* ---- 1. schemas by hand ---- */

typedef struct tcase {
    const char *schema;
    const char *yes[10], *no[12]; /* texts the grammar takes whole; texts it refuses */
} tcase;

static const tcase cases[] = {
    {"{\"type\":\"string\"}",
     {"\"\"", "\"abc\"", "\"\\u00e9\\ud83d\\ude00\\/\"", "\"\xc3\xa9\xf0\x9f\x98\x80\"", "\"\\\"\\\\\\b\\f\\n\\r\\t\""},
     {"abc", "\"\\ud83d\"", "\"\\ude00\"", "\"a\nb\"", "\"\\x41\"", " \"a\"", "\"a\" ", "\"\\u12g4\"", "\"\xc0\x80\""}},
    {"{\"type\":\"integer\"}",
     {"0", "-0", "-12", "123456789012345678901234567890"},
     {"01", "1.0", "1e2", "+1", "-", "", "--1"}},
    {"{\"type\":\"number\"}",
     {"0", "-0.5", "1e10", "1E+2", "-4e-07", "3.25", "12"},
     {".5", "1.", "01", "1e", "--1", "NaN", "1e+"}},
    {"{\"type\":[\"boolean\",\"null\"]}", {"true", "false", "null"}, {"0", "\"true\"", "nul", "True"}},
    {"{\"title\":\"anything\",\"description\":\"x\",\"x-custom\":[1]}",
     {"{}", "[1,{\"a\":null}]", "\"x\"", "1", "{\n  \"a\": [ 1 ]\n}", "{\"a\":1,\"a\":2}"},
     {"", "{", "{} ", "[1,]", "{\"a\" :1}x"}},
    {"true", {"null", "[]"}, {"nul"}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"},\"c\":{\"type\":"
     "\"boolean\"}},"
     "\"required\":[\"b\"],\"additionalProperties\":false}",
     {"{\"b\":\"x\"}", "{\"a\":1,\"b\":\"x\"}", "{\"a\":1,\"b\":\"x\",\"c\":true}", "{\"b\":\"x\",\"c\":false}",
      "{\n  \"a\": 1,\n\t\"b\" : \"x\"\n}", "{ \"b\":\"x\" }"},
     {"{}", "{\"a\":1}", "{\"b\":\"x\",\"a\":1}", "{\"b\":\"x\",\"d\":1}", "{\"b\":1}", "{\"b\":\"x\",\"b\":\"y\"}",
      "{\"\\u0062\":\"x\"}", "{\"b\":\"x\",}", "{  \"b\":\"x\"}", "{\"b\":\"x\"\r}"}},
    {"{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"}},\"required\":[\"id\"],"
     "\"additionalProperties\":{\"type\":\"string\"}}",
     {"{\"id\":1}", "{\"id\":1,\"x\":\"y\",\"z\":\"\"}", "{\"id\":1,\"i\":\"\",\"idd\":\"\",\"\\u0069x\":\"\"}"},
     {"{\"id\":1,\"x\":2}", "{\"id\":1,\"id\":2}", "{\"x\":\"y\",\"id\":1}", "{\"id\":1,\"\\u0069d\":\"a\"}",
      "{\"id\":1,\"i\\u0064\":\"a\"}"}},
    {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}",
     {"{}", "{\"a\":1,\"a\":2,\"\\u0062\":-3}"},
     {"{\"a\":\"x\"}", "{\"a\":1.5}"}},
    {"{\"type\":\"object\",\"required\":[\"k\"]}",
     {"{\"k\":1}", "{\"k\":1,\"z\":[]}", "{\"k\":{\"k\":2}}"},
     {"{}", "{\"z\":1,\"k\":1}", "{\"k\":1,\"k\":1}"}},
    {"{\"type\":\"object\",\"properties\":{\"user\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}"
     ","
     "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":3}},\"required\":[\"name\",\"tags\"],"
     "\"additionalProperties\":false}},\"required\":[\"user\"],\"additionalProperties\":false}",
     {"{\"user\":{\"name\":\"a\",\"tags\":[]}}", "{\"user\":{\"name\":\"a\",\"tags\":[\"x\",\"y\",\"z\"]}}"},
     {"{\"user\":{\"name\":\"a\"}}", "{\"user\":{\"name\":\"a\",\"tags\":[\"x\",\"y\",\"z\",\"w\"]}}",
      "{\"user\":{\"name\":\"a\",\"tags\":[1]}}"}},
    {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":4}",
     {"[1,2]", "[1,2,3,4]", "[ 1 , 2 ]", "[\n1,\n2\n]"},
     {"[]", "[1]", "[1,2,3,4,5]", "[1,\"a\"]", "[1,2,]"}},
    {"{\"type\":\"array\",\"maxItems\":1}", {"[]", "[{}]", "[[1,2]]"}, {"[1,2]"}},
    {"{\"type\":\"array\",\"maxItems\":0}", {"[]", "[ ]"}, {"[1]"}},
    {"{\"type\":\"array\",\"minItems\":1}", {"[1]", "[1,\"a\",null]"}, {"[]"}},
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"},{\"type\":\"boolean\"}],"
     "\"items\":false}",
     {"[]", "[\"a\"]", "[\"a\",1]", "[\"a\",1,true]"},
     {"[1]", "[\"a\",1,true,null]", "[\"a\",true]"}},
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}],\"items\":{\"type\":\"null\"},"
     "\"minItems\":1,\"maxItems\":4}",
     {"[\"a\"]", "[\"a\",1]", "[\"a\",1,null]", "[\"a\",1,null,null]"},
     {"[]", "[\"a\",1,null,null,null]", "[\"a\",1,2]"}},
    {"{\"type\":\"array\",\"items\":[{\"const\":1},{\"const\":2}],\"additionalItems\":false,\"minItems\":2}",
     {"[1,2]"},
     {"[1]", "[1,2,3]", "[2,1]"}},
    {"{\"enum\":[\"red\",\"green\",1,null,{\"a\":[1,2]},1.5,\"\xc3\xa9\",\"tab\\t\"]}",
     {"\"red\"", "1", "null", "{\"a\":[1,2]}", "1.5", "\"\xc3\xa9\"", "\"tab\\t\""},
     {"\"blue\"", "1.0", "{\"a\": [1,2]}", "\"\\u00e9\"", "\"Red\"", "1.50"}},
    {"{\"const\":{\"x\":true}}", {"{\"x\":true}"}, {"{\"x\":false}", "{ \"x\":true}", "true"}},
    {"{\"type\":\"string\",\"enum\":[\"a\",1,\"b\"]}", {"\"a\"", "\"b\""}, {"1"}},
    {"{\"type\":[\"integer\",\"null\"],\"enum\":[1,\"a\",null,2.5]}", {"1", "null"}, {"\"a\"", "2.5"}},
    {"{\"anyOf\":[{\"type\":\"integer\",\"minimum\":10},{\"type\":\"string\",\"maxLength\":2}]}",
     {"10", "99999", "\"\"", "\"ab\""},
     {"9", "\"abc\"", "null"}},
    {"{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"circle\"},\"r\":{\"type\":\"number\"}},"
     "\"required\":[\"kind\",\"r\"],\"additionalProperties\":false},{\"type\":\"object\",\"properties\":{\"kind\":"
     "{\"const\":\"square\"},\"side\":{\"type\":\"number\"}},\"required\":[\"kind\",\"side\"],\"additionalProperties\":"
     "false}]}",
     {"{\"kind\":\"circle\",\"r\":1.5}", "{\"kind\":\"square\",\"side\":2}"},
     {"{\"kind\":\"circle\",\"side\":2}", "{\"kind\":\"tri\",\"r\":1}"}},
    {"{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"value\":{\"type\":\"integer\"},\"children\":{"
     "\"type\":\"array\","
     "\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"value\"],\"additionalProperties\":false}},\"$ref\":\"#/"
     "$defs/node\"}",
     {"{\"value\":1}", "{\"value\":1,\"children\":[]}",
      "{\"value\":1,\"children\":[{\"value\":2,\"children\":[{\"value\":3}]},{\"value\":4}]}"},
     {"{\"value\":1,\"children\":[{}]}", "{\"children\":[]}", "{\"value\":1,\"children\":[{\"value\":\"x\"}]}"}},
    {"{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"next\":{\"anyOf\":[{\"$ref\":\"#\"},{"
     "\"type\":\"null\"}]}},"
     "\"required\":[\"v\",\"next\"],\"additionalProperties\":false}",
     {"{\"v\":1,\"next\":null}", "{\"v\":1,\"next\":{\"v\":2,\"next\":{\"v\":3,\"next\":null}}}"},
     {"{\"v\":1}", "{\"v\":1,\"next\":{\"v\":2}}", "{\"v\":1,\"next\":{}}"}},
    {"{\"definitions\":{\"a/"
     "b\":{\"type\":\"string\"},\"m~n\":{\"type\":\"integer\"}},\"type\":\"array\",\"items\":{\"anyOf\":"
     "[{\"$ref\":\"#/definitions/a~1b\"},{\"$ref\":\"#/definitions/m~0n\"},{\"$ref\":\"#/definitions/a%7E1b\"}]}}",
     {"[]", "[\"x\",1,\"y\"]"},
     {"[null]", "[1.5]"}},
    {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}",
     {"\"ab\"", "\"a\\n\"", "\"\\u00e9\\ud83d\\ude00\"", "\"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80\"",
      "\"\\\"\\\\\\/\""},
     {"\"a\"", "\"abcd\"", "\"\\ud83d\\ude00\"", "\"\\n\\n\\n\\n\""}},
    {"{\"type\":\"string\",\"format\":\"date\"}",
     {"\"2024-02-29\"", "\"1999-12-31\"", "\"0000-04-30\""},
     {"\"2024-02-30\"", "\"2024-13-01\"", "\"2024-04-31\"", "\"24-01-01\"", "\"2024-1-01\"", "\"2024-00-10\"",
      "\"\\u0032024-01-01\""}},
    {"{\"type\":\"string\",\"format\":\"time\"}",
     {"\"23:59:60Z\"", "\"12:00:00.123+05:30\"", "\"00:00:00z\""},
     {"\"24:00:00Z\"", "\"12:00:00\"", "\"12:60:00Z\"", "\"12:00:00.Z\"", "\"12:00:00+5:30\""}},
    {"{\"type\":\"string\",\"format\":\"date-time\"}",
     {"\"2024-01-01T12:00:00Z\"", "\"2024-01-01t12:00:00.5-01:00\""},
     {"\"2024-01-01 12:00:00Z\"", "\"2024-01-01T12:00Z\""}},
    {"{\"type\":\"string\",\"format\":\"uuid\"}",
     {"\"123e4567-e89b-12d3-a456-426614174000\"", "\"123E4567-E89B-12D3-A456-426614174000\""},
     {"\"123e4567e89b12d3a456426614174000\"", "\"123e4567-e89b-12d3-a456-42661417400\"",
      "\"g23e4567-e89b-12d3-a456-426614174000\""}},
    {"{\"type\":\"integer\",\"minimum\":-15,\"maximum\":1234}",
     {"-15", "0", "-0", "1234", "999"},
     {"-16", "1235", "10000", "-100"}},
    {"{\"type\":\"integer\",\"minimum\":5,\"exclusiveMinimum\":true,\"maximum\":10,\"exclusiveMaximum\":true}",
     {"6", "9"},
     {"5", "10"}},
    {"{\"type\":\"integer\",\"minimum\":1.5,\"maximum\":3.5}", {"2", "3"}, {"1", "4"}},
    {"{\"allOf\":[{\"$ref\":\"#/$defs/"
     "base\"},{\"properties\":{\"extra\":{\"type\":\"boolean\"}},\"required\":[\"extra\"]}],"
     "\"$defs\":{\"base\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\",\"minimum\":1}},"
     "\"required\":[\"id\"]}}}",
     {"{\"id\":1,\"extra\":true}", "{\"id\":1,\"extra\":true,\"more\":0}"},
     {"{\"extra\":true,\"id\":1}", "{\"id\":0,\"extra\":true}", "{\"id\":1}"}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},"
     "\"additionalProperties\":false,"
     "\"anyOf\":[{\"required\":[\"a\"]},{\"required\":[\"b\"]}]}",
     {"{\"a\":1}", "{\"b\":2}", "{\"a\":1,\"b\":2}"},
     {"{}", "{\"b\":2,\"a\":1}"}},
    {"{\"minLength\":2,\"items\":{\"type\":\"integer\"}}", {"\"ab\"", "[1]", "5", "{}", "null"}, {"\"a\"", "[\"x\"]"}},
    {"{\"type\":\"object\",\"properties\":{\"a\":false,\"b\":{\"type\":\"integer\"}}}",
     {"{\"b\":1}", "{}", "{\"b\":1,\"c\":2}"},
     {"{\"a\":1}", "{\"b\":1,\"a\":1}"}},
    {"{\"type\":\"object\",\"properties\":{\"na\xc3\xafve\":{\"type\":\"integer\"},\"q\\\"uote\":{\"type\":\"string\"},"
     "\"tab\\t\":{\"type\":\"null\"}},\"additionalProperties\":false}",
     {"{\"na\xc3\xafve\":1,\"q\\\"uote\":\"x\",\"tab\\t\":null}"},
     {"{\"na\\u00efve\":1}", "{\"tab\\u0009\":null}"}},
    {"{\"type\":\"object\",\"properties\":{\"\xf0\x9f\x98\x80\":{\"type\":\"integer\"},\"\xf0\x9f\x98\x82\":{\"type\":"
     "\"integer\"}}}",
     {"{\"\xf0\x9f\x98\x80\":1}", "{\"\\ud83d\\ude01\":1}", "{\"\\uD83D\\uDE01x\":1}", "{\"\xf0\x9f\x98\x81\":1}"},
     {"{\"\\ud83d\\ude00\":1}", "{\"\xf0\x9f\x98\x82\":1,\"\xf0\x9f\x98\x80\":1}",
      "{\"\xf0\x9f\x98\x80\":1,\"\\ud83d\\ude02\":1}"}},
    {"{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"enum\":[1,2,3]},\"minItems\":1},\"maxItems\":2}",
     {"[]", "[[1],[2,3,1]]"},
     {"[[]]", "[[4]]", "[[1],[1],[1]]"}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"],\"additionalProperties\":"
     "true}",
     {"{\"a\":1,\"b\":[true]}"},
     {"{\"b\":1,\"a\":1}"}},
};

/* nulls: "[null,null,...]" of n items */
static char *nulls(int n)
{
    buf b = {0};
    bput(&b, "[");
    for (int i = 0; i < n; i++) bput(&b, i ? ",null" : "null");
    bput(&b, "]");
    return b.s;
}

static void test_cases(void)
{
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const tcase *t = &cases[c];
        cJSON *s = cJSON_Parse(t->schema);
        tm_grammar *g = gbnf_of(t->schema, 1);
        CHECKF(g && s, "case %zu: %s", c, t->schema);
        for (int i = 0; g && i < 10 && t->yes[i]; i++) {
            CHECKF(accepts(g, t->yes[i], strlen(t->yes[i])) == 1, "%s: refuses %s", t->schema, t->yes[i]);
            CHECKF(valid_text(t->yes[i], strlen(t->yes[i]), s), "validator: %s: refuses %s", t->schema, t->yes[i]);
        }
        for (int i = 0; g && i < 12 && t->no[i]; i++) {
            CHECKF(accepts(g, t->no[i], strlen(t->no[i])) == 0, "%s: takes %s", t->schema, t->no[i]);
            CHECKF(!valid_text(t->no[i], strlen(t->no[i]), s), "validator: %s: takes %s", t->schema, t->no[i]);
        }
        tm_grammar_free(g);
        cJSON_Delete(s);
    }
    /* whitespace: a space, or a line break and up to 20 spaces or tabs, between tokens */
    tm_grammar *w = gbnf_of("{\"type\":\"array\"}", 1);
    cJSON *ws = cJSON_Parse("{\"type\":\"array\"}");
    for (int n = 0; w && n <= 22; n++) {
        char t[64];
        snprintf(t, sizeof t, "[\n%.*s1,\n%.*s2]", n, "\t \t \t \t \t \t \t \t \t \t \t \t", n / 2,
                 "                    ");
        CHECKF(accepts(w, t, strlen(t)) == (n <= 20) && valid_text(t, strlen(t), ws) == (n <= 20), "%d spaces", n);
    }
    CHECK(w && !accepts(w, "[ \n1]", 6) && !accepts(w, "[\r\n1]", 6) && !accepts(w, "[\t1]", 4) &&
          !accepts(w, "[1  ]", 5));
    tm_grammar_free(w);
    cJSON_Delete(ws);
    /* lengths past 1000 are written with chunks: exact at every edge */
    tm_grammar *g =
        gbnf_of("{\"type\":\"array\",\"items\":{\"type\":\"null\"},\"minItems\":1001,\"maxItems\":2500}", 1);
    CHECK(g != NULL);
    static const int lens[] = {0, 1, 999, 1000, 1001, 1002, 1500, 1999, 2000, 2001, 2002, 2499, 2500, 2501, 2502, 3000};
    for (size_t i = 0; g && i < sizeof lens / sizeof *lens; i++) {
        int n = lens[i];
        char *t = nulls(n);
        CHECKF(accepts(g, t, strlen(t)) == (n >= 1001 && n <= 2500), "%d items", n);
        free(t);
    }
    tm_grammar_free(g);
    g = gbnf_of("{\"type\":\"string\",\"minLength\":1999,\"maxLength\":1999}", 1);
    for (int n = 1997; g && n <= 2001; n++) {
        buf b = {0};
        bput(&b, "\"");
        for (int i = 0; i < n; i++) bput(&b, i % 3 ? "a" : "\\u00e9");
        bput(&b, "\"");
        CHECKF(accepts(g, b.s, b.n) == (n == 1999), "a string of %d characters", n);
        free(b.s);
    }
    tm_grammar_free(g);
}

static void test_random_texts(void)
{
    int total = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int v = differential(cases[c].schema, 2000, 1000 + c, 0);
        CHECKF(v >= 0, "case %zu refused", c);
        /* biased to valid texts, but not only: both sides of every schema are exercised */
        if (cases[c].yes[0])
            CHECKF(v > 200 && v < 1950, "case %zu: %d of 2000 random texts valid: %s", c, v, cases[c].schema);
        total += v > 0 ? v : 0;
        if (getenv("JS_VERBOSE")) fprintf(stderr, "case %zu: %d valid\n", c, v);
    }
    CHECK(total > 20000);
}

/* ---- 2. random schemas ---- */

static cJSON *rand_schema(tm_rng *r, int depth, int *nrefs);

static cJSON *rand_leaf(tm_rng *r)
{
    static const char *const leaves[] = {
        "{\"type\":\"string\"}",
        "{\"type\":\"integer\"}",
        "{\"type\":\"number\"}",
        "{\"type\":\"boolean\"}",
        "{\"type\":\"null\"}",
        "{\"type\":\"string\",\"maxLength\":3}",
        "{\"type\":\"string\",\"minLength\":1,\"maxLength\":4}",
        "{\"type\":\"integer\",\"minimum\":-3,\"maximum\":12}",
        "{\"type\":\"integer\",\"exclusiveMinimum\":99}",
        "{\"type\":\"integer\",\"maximum\":-7}",
        "{\"enum\":[\"a\",\"b\",3,null]}",
        "{\"const\":\"k\"}",
        "true",
        "{}",
        "{\"type\":\"string\",\"format\":\"date\"}",
        "{\"type\":\"string\",\"format\":\"uuid\"}",
        "{\"type\":[\"string\",\"integer\"]}",
        "{\"$ref\":\"#/$defs/d0\"}",
        "{\"$ref\":\"#/$defs/d1\"}",
        "{\"$ref\":\"#\"}",
        "{\"minLength\":2}",
        "false",
    };
    return cJSON_Parse(leaves[rnd(r, (int)(sizeof leaves / sizeof *leaves))]);
}

static cJSON *rand_schema(tm_rng *r, int depth, int *nrefs)
{
    if (depth > 3 || rnd(r, 3) == 0) return rand_leaf(r);
    cJSON *s = cJSON_CreateObject();
    int c = rnd(r, 5);
    static const char *const pnames[] = {"a", "b", "id", "name", "n\xc3\xa9", "x"};
    if (c <= 1) { /* an object */
        cJSON_AddStringToObject(s, "type", "object");
        cJSON *p = cJSON_AddObjectToObject(s, "properties"), *q = cJSON_AddArrayToObject(s, "required");
        for (int i = 0, n = rnd(r, 4); i < n; i++) {
            const char *nm = pnames[rnd(r, 6)];
            if (get(p, nm)) continue;
            cJSON_AddItemToObject(p, nm, rand_schema(r, depth + 1, nrefs));
            if (rnd(r, 2)) cJSON_AddItemToArray(q, cJSON_CreateString(nm));
        }
        if (rnd(r, 6) == 0) cJSON_AddItemToArray(q, cJSON_CreateString("x"));
        int a = rnd(r, 4);
        if (a == 1) cJSON_AddFalseToObject(s, "additionalProperties");
        if (a == 2) cJSON_AddItemToObject(s, "additionalProperties", rand_schema(r, depth + 1, nrefs));
    } else if (c == 2) { /* an array */
        cJSON_AddStringToObject(s, "type", "array");
        if (rnd(r, 2)) {
            cJSON *t = cJSON_AddArrayToObject(s, "prefixItems");
            for (int i = 0, n = 1 + rnd(r, 3); i < n; i++) cJSON_AddItemToArray(t, rand_schema(r, depth + 1, nrefs));
        }
        if (rnd(r, 3)) cJSON_AddItemToObject(s, "items", rand_schema(r, depth + 1, nrefs));
        int mn = rnd(r, 3);
        if (rnd(r, 2)) cJSON_AddNumberToObject(s, "minItems", mn);
        if (rnd(r, 2)) cJSON_AddNumberToObject(s, "maxItems", mn + rnd(r, 4));
    } else if (c == 3) { /* alternatives */
        cJSON *l = cJSON_AddArrayToObject(s, rnd(r, 2) ? "anyOf" : "oneOf");
        for (int i = 0, n = 1 + rnd(r, 3); i < n; i++) cJSON_AddItemToArray(l, rand_schema(r, depth + 1, nrefs));
    } else { /* allOf of objects */
        cJSON *l = cJSON_AddArrayToObject(s, "allOf");
        for (int i = 0, n = 1 + rnd(r, 2); i < n; i++) {
            cJSON *o = cJSON_CreateObject(), *p = cJSON_AddObjectToObject(o, "properties");
            cJSON_AddStringToObject(o, "type", "object");
            const char *nm = pnames[rnd(r, 6)];
            cJSON_AddItemToObject(p, nm, rand_leaf(r));
            if (rnd(r, 2)) cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "required"), cJSON_CreateString(nm));
            cJSON_AddItemToArray(l, o);
        }
    }
    return s;
}

static void test_random_schemas(void)
{
    tm_rng r;
    tm_rng_seed(&r, 77);
    int compiled = 0, refused = 0, texts_valid = 0;
    for (int it = 0; it < 400; it++) {
        int nrefs = 0;
        cJSON *root = rand_schema(&r, 0, &nrefs);
        if (!cJSON_IsObject(root)) {
            cJSON_Delete(root);
            continue;
        }
        cJSON *defs = cJSON_AddObjectToObject(root, "$defs");
        cJSON_AddItemToObject(defs, "d0", rand_schema(&r, 2, &nrefs));
        cJSON_AddItemToObject(defs, "d1", rand_schema(&r, 1, &nrefs));
        char *st = cJSON_PrintUnformatted(root);
        char *src = NULL;
        tm_err e = {0};
        int rc = tm_json_schema_gbnf(st, strlen(st), &src, &e);
        if (rc == TM_OK) {
            tm_grammar *g = NULL;
            int prc = tm_grammar_parse(&g, src, strlen(src), &e);
            CHECKF(prc == TM_OK, "the grammar of %s does not parse: %s", st, e.msg);
            tm_grammar_free(g);
            compiled++;
            int v = differential(st, 300, 5000 + (uint64_t)it, 1);
            texts_valid += v > 0 ? v : 0;
        } else {
            refused++;
            CHECKF(rc == TM_E_UNSUPPORTED || rc == TM_E_LIMIT, "%s: %d %s", st, rc, e.msg);
            CHECKF(!strncmp(e.msg, "json schema: ", 13), "%s", e.msg);
        }
        free(src);
        free(st);
        cJSON_Delete(root);
    }
    if (getenv("JS_VERBOSE"))
        fprintf(stderr, "random schemas: %d compiled, %d refused, %d valid texts\n", compiled, refused, texts_valid);
    CHECKF(compiled > 200 && texts_valid > 10000, "random schemas: %d compiled, %d refused, %d valid texts", compiled,
           refused, texts_valid);
}

/* ---- 3. integer bounds ---- */

static void test_integer_ranges(void)
{
    static const struct {
        const char *kw; /* the bounds as JSON members */
        double lo, hi;  /* the integers they allow */
    } b[] = {
        {"\"minimum\":-15,\"maximum\":1234", -15, 1234},
        {"\"minimum\":0", 0, INFINITY},
        {"\"maximum\":0", -INFINITY, 0},
        {"\"exclusiveMinimum\":0", 1, INFINITY},
        {"\"exclusiveMaximum\":-100", -INFINITY, -101},
        {"\"minimum\":7,\"maximum\":7", 7, 7},
        {"\"minimum\":0,\"maximum\":0", 0, 0},
        {"\"minimum\":-9,\"maximum\":9", -9, 9},
        {"\"minimum\":10,\"maximum\":99", 10, 99},
        {"\"minimum\":100,\"maximum\":1000", 100, 1000},
        {"\"minimum\":37", 37, INFINITY},
        {"\"maximum\":-37", -INFINITY, -37},
        {"\"minimum\":999,\"maximum\":1001", 999, 1001},
        {"\"minimum\":-2000,\"maximum\":2000", -2000, 2000},
        {"\"minimum\":-1000,\"maximum\":-1", -1000, -1},
        {"\"minimum\":1.5,\"exclusiveMaximum\":20.5", 2, 20},
        {"\"minimum\":-1999,\"maximum\":-1000", -1999, -1000},
        {"\"minimum\":-5,\"exclusiveMinimum\":-3", -2, INFINITY},
        {"\"minimum\":5,\"exclusiveMinimum\":true", 6, INFINITY},
        {"\"minimum\":1,\"maximum\":1000000", 1, 1e6},
        {"\"minimum\":-9007199254740992,\"maximum\":9007199254740992", -9007199254740992.0, 9007199254740992.0},
        {"\"minimum\":1230,\"maximum\":1209", 1, 0},
        {"\"minimum\":19,\"maximum\":2001", 19, 2001},
        {"\"minimum\":-801,\"maximum\":-800", -801, -800},
    };
    tm_rng r;
    tm_rng_seed(&r, 5);
    for (size_t i = 0; i < sizeof b / sizeof *b; i++) {
        char st[256];
        snprintf(st, sizeof st, "{\"type\":\"integer\",%s}", b[i].kw);
        tm_grammar *g = gbnf_of(st, b[i].lo <= b[i].hi);
        if (b[i].lo > b[i].hi) {
            CHECKF(!g, "%s allows no value", st);
            tm_grammar_free(g);
            continue;
        }
        CHECKF(g != NULL, "%s", st);
        if (!g) continue;
        int bad = 0;
        for (int x = -2100; x <= 2100; x++) {
            char t[32];
            snprintf(t, sizeof t, "%d", x);
            bad += accepts(g, t, strlen(t)) != (x >= b[i].lo && x <= b[i].hi);
        }
        for (int k = 0; k < 3000; k++) { /* longer ones, of every length up to 17 digits */
            char t[40];
            int len = 1 + rnd(&r, 17);
            long long x = (long long)(tm_rng_next(&r) % 9) + 1;
            for (int d = 1; d < len; d++) x = x * 10 + (long long)(tm_rng_next(&r) % 10);
            if (x > 9007199254740992LL) x /= 10;
            if (rnd(&r, 2)) x = -x;
            snprintf(t, sizeof t, "%lld", x);
            bad += accepts(g, t, strlen(t)) != ((double)x >= b[i].lo && (double)x <= b[i].hi);
        }
        CHECKF(bad == 0, "%s: %d integers judged wrong", st, bad);
        CHECKF(accepts(g, "-0", 2) == (0 >= b[i].lo && 0 <= b[i].hi), "%s: -0", st);
        CHECK(!accepts(g, "01", 2) && !accepts(g, "+1", 2) && !accepts(g, "1.0", 3) && !accepts(g, "", 0) &&
              !accepts(g, "-", 1));
        tm_grammar_free(g);
    }
}

/* ---- 4. refusals ---- */

static void test_refusals(void)
{
    static const struct {
        const char *schema;
        int code;
        const char *msg; /* a part of the message: the JSON pointer, mostly */
    } bad[] = {
        {"{\"type\":\"string\",\"pattern\":\"a+\"}", TM_E_UNSUPPORTED, "json schema: /pattern: not supported"},
        {"{\"properties\":{\"age\":{\"type\":\"number\",\"minimum\":0}}}", TM_E_UNSUPPORTED, "/properties/age/minimum"},
        {"{\"minimum\":0}", TM_E_UNSUPPORTED, "/minimum"},
        {"{\"type\":\"number\",\"multipleOf\":2}", TM_E_UNSUPPORTED, "/multipleOf"},
        {"{\"items\":{\"not\":{}}}", TM_E_UNSUPPORTED, "/items/not"},
        {"{\"uniqueItems\":true}", TM_E_UNSUPPORTED, "/uniqueItems"},
        {"{\"anyOf\":[{\"type\":\"null\"},{\"if\":{}}]}", TM_E_UNSUPPORTED, "/anyOf/1/if"},
        {"{", TM_E_FORMAT, "not JSON"},
        {"", TM_E_FORMAT, "not JSON"},
        {"{} x", TM_E_FORMAT, "text after the schema"},
        {"3", TM_E_FORMAT, "(root): a schema must be"},
        {"{\"required\":3}", TM_E_FORMAT, "/required"},
        {"{\"required\":[3]}", TM_E_FORMAT, "/required"},
        {"{\"type\":\"strin\"}", TM_E_FORMAT, "/type"},
        {"{\"type\":[]}", TM_E_FORMAT, "/type"},
        {"{\"properties\":{\"a\":3}}", TM_E_FORMAT, "/properties"},
        {"{\"properties\":{\"a\":{\"minItems\":-1}}}", TM_E_FORMAT, "/properties/a/minItems"},
        {"{\"minLength\":1.5}", TM_E_FORMAT, "/minLength"},
        {"{\"anyOf\":[]}", TM_E_FORMAT, "/anyOf"},
        {"{\"enum\":3}", TM_E_FORMAT, "/enum"},
        {"{\"items\":[{}],\"prefixItems\":[{}]}", TM_E_FORMAT, "/items"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{},\"a\":{}}}", TM_E_FORMAT, "'a' twice"},
        {"{\"$ref\":\"http://example.com/s.json\"}", TM_E_UNSUPPORTED, "/$ref"},
        {"{\"$ref\":\"#anchor\"}", TM_E_UNSUPPORTED, "/$ref"},
        {"{\"$ref\":\"#/$defs/missing\"}", TM_E_FORMAT, "names nothing"},
        {"{\"$defs\":{\"a\":3},\"$ref\":\"#/$defs/a\"}", TM_E_FORMAT, "not a schema"},
        {"{\"type\":\"array\",\"maxItems\":2000000}", TM_E_LIMIT, "/maxItems"},
        {"{\"type\":\"string\",\"minLength\":5000000}", TM_E_LIMIT, "/minLength"},
        {"false", TM_E_UNSUPPORTED, "allows no value"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{}},\"additionalProperties\":false,\"required\":[\"a\",\"z\"]}",
         TM_E_UNSUPPORTED, "allows no value"},
        {"{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", TM_E_UNSUPPORTED, "allows no value"},
        {"{\"anyOf\":[{\"$ref\":\"#\"},{\"type\":\"null\"}]}", TM_E_UNSUPPORTED, "$ref cycle"},
        {"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"anyOf\":[{\"type\":\"null\"},{\"$ref\":\"#/$defs/a\"}]}},"
         "\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/a\"}}",
         TM_E_UNSUPPORTED, "$ref cycle"},
        {"{\"$defs\":{\"a\":{\"allOf\":[{\"$ref\":\"#/$defs/a\"}]}},\"$ref\":\"#/$defs/a\"}", TM_E_LIMIT,
         "nested deeper"},
        {"{\"allOf\":[{\"anyOf\":[{\"$ref\":\"#/$defs/a\"}]}],\"$defs\":{\"a\":{\"anyOf\":[{\"$ref\":\"#/$defs/a\"},"
         "{\"type\":\"null\"}]}}}",
         TM_E_UNSUPPORTED, "json schema: /$defs/a: a $ref cycle"}, /* named after the merge */
        {"{\"type\":\"string\",\"format\":\"email\"}", TM_E_UNSUPPORTED, "/format"},
        {"{\"type\":\"string\",\"format\":\"date\",\"maxLength\":10}", TM_E_UNSUPPORTED, "/maxLength"},
        {"{\"enum\":[\"a\"],\"maxLength\":3}", TM_E_UNSUPPORTED, "/maxLength"},
        {"{\"allOf\":[{\"items\":[{\"type\":\"string\"}]},{\"items\":[{\"type\":\"integer\"}]}]}", TM_E_UNSUPPORTED,
         "/allOf/1/items"},
        {"{\"allOf\":[{\"properties\":{\"a\":{}},\"additionalProperties\":false},{\"properties\":{\"b\":{}}}]}",
         TM_E_UNSUPPORTED, "additionalProperties"},
        {"{\"anyOf\":[{}],\"oneOf\":[{}]}", TM_E_UNSUPPORTED, "/oneOf"},
        {"{\"type\":\"integer\",\"minimum\":1e300}", TM_E_UNSUPPORTED, "/minimum"},
        {"{\"const\":\"a\\u0000b\"}", TM_E_UNSUPPORTED, "U+0000"},
        {"{\"enum\":[1e400]}", TM_E_UNSUPPORTED, "/enum"},
        {"{\"enum\":[\"\xff\"]}", TM_E_FORMAT, "/enum"},
        {"{\"type\":\"object\",\"properties\":{\"\xc0\xaf\":{}}}", TM_E_FORMAT, "/properties"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *src = (char *)1;
        tm_err e = {0};
        int rc = tm_json_schema_gbnf(bad[i].schema, strlen(bad[i].schema), &src, &e);
        if (rc == TM_OK) free(src), src = NULL;
        CHECKF(rc == bad[i].code && strstr(e.msg, bad[i].msg) && !src, "%s: %d '%s', want %d '%s'", bad[i].schema, rc,
               e.msg, bad[i].code, bad[i].msg);
    }
    /* counts far outside a long's range (minItems -1e30 was cast to long before its bound): a grammar or a clear
       refusal, the same as for the count the bound clamps it to */
    static const char *const huge[][2] = {
        {"{\"type\":\"array\",\"minItems\":-1e30}", "{\"type\":\"array\",\"minItems\":-2000000000}"},
        {"{\"type\":\"string\",\"maxLength\":-1e300}", "{\"type\":\"string\",\"maxLength\":-2000000000}"},
        {"{\"type\":\"array\",\"maxItems\":1e300}", "{\"type\":\"array\",\"maxItems\":2000000000}"},
    };
    for (size_t i = 0; i < sizeof huge / sizeof *huge; i++) {
        char *g[2] = {NULL, NULL};
        int rc[2];
        for (int k = 0; k < 2; k++) {
            tm_err e = {0};
            rc[k] = tm_json_schema_gbnf(huge[i][k], strlen(huge[i][k]), &g[k], &e);
            CHECKF(rc[k] == TM_OK ? g[k] != NULL : e.msg[0] != 0, "%s: %d '%s'", huge[i][k], rc[k], e.msg);
        }
        CHECKF(rc[0] == rc[1] && (rc[0] != TM_OK || !strcmp(g[0], g[1])), "%s: %d, clamped %d", huge[i][0], rc[0], rc[1]);
        free(g[0]), free(g[1]);
    }
    /* deep nesting: a clear limit, no crash */
    buf b = {0};
    for (int i = 0; i < 500; i++) bput(&b, "{\"items\":");
    bput(&b, "{}");
    for (int i = 0; i < 500; i++) bput(&b, "}");
    char *src = NULL;
    tm_err e = {0};
    CHECK(tm_json_schema_gbnf(b.s, b.n, &src, &e) == TM_E_LIMIT && strstr(e.msg, "nested deeper than 64"));
    free(b.s);
    /* the element bound: objects of more and more strings of up to 1000 characters; every grammar
     * returned parses, until the schema is refused with TM_E_LIMIT */
    int last_ok = 0, limited = 0;
    for (int n = 150; n <= 400 && !limited; n += 10) {
        buf sb = {0};
        bput(&sb, "{\"type\":\"object\",\"properties\":{");
        for (int i = 0; i < n; i++) {
            char t[80];
            snprintf(t, sizeof t, "%s\"p%d\":{\"type\":\"string\",\"maxLength\":1000}", i ? "," : "", i);
            bput(&sb, t);
        }
        bput(&sb, "},\"additionalProperties\":false}");
        src = NULL;
        int rc = tm_json_schema_gbnf(sb.s, sb.n, &src, &e);
        if (rc == TM_OK) {
            tm_grammar *g = NULL;
            CHECKF(tm_grammar_parse(&g, src, strlen(src), &e) == TM_OK, "%d properties: %s", n, e.msg);
            tm_grammar_free(g);
            last_ok = n;
        } else {
            limited = 1;
            CHECKF(rc == TM_E_LIMIT && strstr(e.msg, "elements"), "%d properties: %s", n, e.msg);
        }
        free(src);
        free(sb.s);
    }
    CHECKF(limited && last_ok >= 200, "the element bound: %d properties taken, then %s", last_ok,
           limited ? "refused" : "no refusal");
    /* taken: annotations and unknown keywords ignored, false as a branch, uniqueItems false */
    static const char *const ok[] = {
        "{\"title\":\"x\",\"description\":\"y\",\"examples\":[1],\"$comment\":\"c\",\"$schema\":\"s\",\"$id\":\"i\","
        "\"default\":3,"
        "\"deprecated\":true,\"readOnly\":true,\"x-custom\":{},\"type\":\"string\"}",
        "{\"anyOf\":[false,{\"type\":\"null\"}]}",
        "{\"type\":\"array\",\"uniqueItems\":false}",
        "{\"$defs\":{\"unused\":3}}",
        "{\"allOf\":[{\"type\":[\"integer\",\"string\"]},{\"type\":\"number\",\"minimum\":3}]}",
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        tm_grammar *g = gbnf_of(ok[i], 1);
        CHECKF(g != NULL, "%s refused", ok[i]);
        tm_grammar_free(g);
    }
    tm_grammar *g = gbnf_of(ok[4], 1); /* integer >= 3 */
    CHECK(g && accepts(g, "3", 1) && !accepts(g, "2", 1) && !accepts(g, "\"a\"", 3) && !accepts(g, "3.5", 3));
    tm_grammar_free(g);
}

int main(void)
{
    test_cases();
    test_random_texts();
    test_random_schemas();
    test_integer_ranges();
    test_refusals();
    return th_done("test_json_schema");
}
