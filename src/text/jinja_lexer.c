/* text/jinja_lexer.c: template source -> tokens, as jinja2's lexer.py does it with
 * trim_blocks=True, lstrip_blocks=True and keep_trailing_newline=False:
 *
 *  - newlines (\r\n, \r, \n) become \n and one trailing newline is dropped;
 *  - `{%-`, `{{-`, `{#-` strip all whitespace before the tag; `-%}`, `-}}`, `-#}` all
 *    whitespace after it;
 *  - lstrip_blocks: spaces/tabs between the start of a line and a `{%` or `{#` go
 *    (not before `{{`, not when the tag is written `{%+`);
 *  - trim_blocks: the first newline after `%}` or `#}` goes (not after `+%}`);
 *  - inside a tag, `%}` / `}}` only end it when (), [] and {} are balanced. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text/jinja-impl.h"

/* ------------------------------------------------------------------ arena */

typedef struct jchunk {
    struct jchunk *next;
    size_t used, cap;
    max_align_t data[];
} jchunk;

void *ja_alloc(jarena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    jchunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 16384 ? n : 16384;
        c = malloc(sizeof(jchunk) + cap);
        if (!c) return NULL;
        c->used = 0;
        c->cap = cap;
        c->next = a->head;
        a->head = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

char *ja_strdup(jarena *a, const char *s, size_t n)
{
    char *p = ja_alloc(a, n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void ja_free(jarena *a)
{
    jchunk *c = a->head;
    while (c) {
        jchunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
}

/* ------------------------------------------------------------------ lexer state */

typedef struct lexer {
    jarena *a;
    const char *s; /* normalized source */
    size_t n;
    size_t pos;
    size_t lpos; /* line counting cursor */
    int lline;
    jtok *toks;
    size_t ntoks, cap;
    tm_err *err;
    int line_starting;
    char bal[256]; /* expected closers */
    int nbal;
} lexer;

static int line_at(lexer *L, size_t p)
{
    if (p < L->lpos) { /* never happens in order; recount to be safe */
        L->lpos = 0;
        L->lline = 1;
    }
    for (; L->lpos < p && L->lpos < L->n; L->lpos++)
        if (L->s[L->lpos] == '\n') L->lline++;
    return L->lline;
}

static int lfail(lexer *L, size_t at, const char *fmt, const char *arg)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg);
    return tm_errf(L->err, TM_E_TEMPLATE, "line %d: syntax error: %s", line_at(L, at), msg);
}

static jtok *push(lexer *L, int type, size_t at)
{
    if (L->ntoks == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        jtok *t = realloc(L->toks, cap * sizeof *t);
        if (!t) return NULL;
        L->toks = t;
        L->cap = cap;
    }
    jtok *t = &L->toks[L->ntoks++];
    memset(t, 0, sizeof *t);
    t->type = (uint8_t)type;
    t->line = line_at(L, at);
    return t;
}

#define PUSH(var, type, at) \
    jtok *var = push(L, type, at); \
    if (!var) return tm_errf(L->err, TM_E_NOMEM, "out of memory tokenizing the template")

/* whitespace (Python's \s) at p: its length, 0 if none */
static size_t ws_at(const lexer *L, size_t p)
{
    if (p >= L->n) return 0;
    unsigned char c = (unsigned char)L->s[p];
    if (c < 0x80) return py_isspace(c) ? 1 : 0;
    size_t i = p;
    uint32_t cp = u8_next(L->s, L->n, &i);
    return py_isspace(cp) ? i - p : 0;
}

static size_t skip_ws(const lexer *L, size_t p)
{
    size_t k;
    while ((k = ws_at(L, p)) > 0) p += k;
    return p;
}

static int starts(const lexer *L, size_t p, const char *lit)
{
    size_t k = strlen(lit);
    return p + k <= L->n && memcmp(L->s + p, lit, k) == 0;
}

/* Python str.rstrip() of s[b, e): the new end */
static size_t rstrip_end(const char *s, size_t b, size_t e)
{
    while (e > b) {
        size_t st = e - 1;
        while (st > b && ((unsigned char)s[st] & 0xC0) == 0x80 && e - st < 4) st--;
        size_t i = st;
        uint32_t c = u8_next(s, e, &i);
        if (i != e) {
            st = e - 1;
            i = st;
            c = u8_next(s, e, &i);
        }
        if (!py_isspace(c)) break;
        e = st;
    }
    return e;
}

/* Emit the template text s[b, e) before a tag whose whitespace-control sign is `sign`
 * ('-', '+' or 0); lstrip: the tag is a block or comment (not {{ }}). */
static int emit_data(lexer *L, size_t b, size_t e, char sign, int lstrip)
{
    if (sign == '-') {
        e = rstrip_end(L->s, b, e);
    } else if (sign != '+' && lstrip) {
        size_t lp = b;
        for (size_t k = e; k > b; k--)
            if (L->s[k - 1] == '\n') {
                lp = k;
                break;
            }
        if (lp > b || L->line_starting) {
            size_t k = lp;
            while (k < e) {
                size_t w = ws_at(L, k);
                if (!w) break;
                k += w;
            }
            if (k == e && lp < e) e = lp; /* only whitespace between the newline and the tag */
        }
    }
    if (e > b) {
        PUSH(t, JT_DATA, b);
        t->s = L->s + b;
        t->n = e - b;
    }
    return 0;
}

/* the end of a block-like tag at p ("+%}", "-%}"+ws, "%}"+"\n"?) for closer "%}" or "#}";
 * returns the end position or 0 */
static size_t block_end_at(const lexer *L, size_t p, const char *closer)
{
    if (p < L->n && L->s[p] == '+' && starts(L, p + 1, closer)) return p + 3;
    if (p < L->n && L->s[p] == '-' && starts(L, p + 1, closer)) return skip_ws(L, p + 3);
    if (starts(L, p, closer)) {
        size_t e = p + 2;
        if (e < L->n && L->s[e] == '\n') e++; /* trim_blocks */
        return e;
    }
    return 0;
}

/* "{%[-+]?\s*raw\s*(-%}\s*|%})" at p: end position or 0 */
static size_t raw_begin_at(const lexer *L, size_t p, char *sign)
{
    size_t q = p + 2;
    *sign = 0;
    if (q < L->n && (L->s[q] == '-' || L->s[q] == '+')) *sign = L->s[q++];
    q = skip_ws(L, q);
    if (!starts(L, q, "raw")) return 0;
    q = skip_ws(L, q + 3);
    if (starts(L, q, "-%}")) return skip_ws(L, q + 3);
    if (starts(L, q, "%}")) return q + 2;
    return 0;
}

/* "{%[-+]?\s*endraw\s*(+%}|-%}\s*|%}\n?)" at p: end position or 0 */
static size_t raw_end_at(const lexer *L, size_t p, char *sign)
{
    size_t q = p + 2;
    *sign = 0;
    if (q < L->n && (L->s[q] == '-' || L->s[q] == '+')) *sign = L->s[q++];
    q = skip_ws(L, q);
    if (!starts(L, q, "endraw")) return 0;
    q = skip_ws(L, q + 6);
    return block_end_at(L, q, "%}");
}

/* ------------------------------------------------------------------ tag contents */

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* (\d+_)*\d+ at p: end or 0 when no digit */
static size_t digits_us(const lexer *L, size_t p)
{
    if (p >= L->n || !is_digit(L->s[p])) return 0;
    while (p < L->n && is_digit(L->s[p])) p++;
    while (p + 1 < L->n && L->s[p] == '_' && is_digit(L->s[p + 1])) {
        p++;
        while (p < L->n && is_digit(L->s[p])) p++;
    }
    return p;
}

static size_t exponent_at(const lexer *L, size_t p)
{
    if (p >= L->n || (L->s[p] != 'e' && L->s[p] != 'E')) return 0;
    p++;
    if (p < L->n && (L->s[p] == '+' || L->s[p] == '-')) p++;
    return digits_us(L, p);
}

static size_t float_at(const lexer *L, size_t p)
{
    if (p > 0 && L->s[p - 1] == '.') return 0;
    size_t q = digits_us(L, p);
    if (!q) return 0;
    if (q + 1 < L->n && L->s[q] == '.' && is_digit(L->s[q + 1])) {
        size_t f = digits_us(L, q + 1);
        size_t e = exponent_at(L, f);
        return e ? e : f;
    }
    return exponent_at(L, q);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* integer literal at p: end or 0; value in *v (fails on overflow) */
static size_t int_at(lexer *L, size_t p, int64_t *v, int *overflow)
{
    const char *s = L->s;
    size_t n = L->n, q = p;
    int base = 10;
    *overflow = 0;
    if (q + 1 < n && s[q] == '0' && (s[q + 1] == 'b' || s[q + 1] == 'B' || s[q + 1] == 'o' ||
                                     s[q + 1] == 'O' || s[q + 1] == 'x' || s[q + 1] == 'X')) {
        char k = (char)(s[q + 1] | 0x20);
        base = k == 'b' ? 2 : k == 'o' ? 8 : 16;
        size_t r = q + 2;
        size_t last = 0;
        for (;;) {
            size_t t = r;
            if (t < n && s[t] == '_') t++;
            int d = t < n ? hexval(s[t]) : -1;
            if (d < 0 || d >= base) break;
            r = t + 1;
            last = r;
        }
        if (last) {
            uint64_t acc = 0;
            for (size_t i = q + 2; i < last; i++) {
                if (s[i] == '_') continue;
                uint64_t nv = acc * (uint64_t)base + (uint64_t)hexval(s[i]);
                if (nv / (uint64_t)base != acc || nv > (uint64_t)INT64_MAX) *overflow = 1;
                acc = nv;
            }
            *v = (int64_t)acc;
            return last;
        }
        base = 10; /* "0b" without digits: falls to the decimal zero rule */
    }
    if (q < n && s[q] >= '1' && s[q] <= '9') {
        size_t r = q + 1;
        for (;;) {
            size_t t = r;
            if (t < n && s[t] == '_') t++;
            if (t < n && is_digit(s[t])) r = t + 1;
            else break;
        }
        uint64_t acc = 0;
        for (size_t i = q; i < r; i++) {
            if (s[i] == '_') continue;
            uint64_t nv = acc * 10 + (uint64_t)(s[i] - '0');
            if (nv / 10 != acc || nv > (uint64_t)INT64_MAX) *overflow = 1;
            acc = nv;
        }
        *v = (int64_t)acc;
        return r;
    }
    if (q < n && s[q] == '0') {
        size_t r = q + 1;
        for (;;) {
            size_t t = r;
            if (t < n && s[t] == '_') t++;
            if (t < n && s[t] == '0') r = t + 1;
            else break;
        }
        *v = 0;
        return r;
    }
    return 0;
}

static int name_start(uint32_t c)
{
    if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) || k == UTF8PROC_CATEGORY_NL;
}

static int name_cont(uint32_t c)
{
    if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (c >= '0' && c <= '9');
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return name_start(c) || k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC ||
           k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_PC;
}

static size_t name_at(const lexer *L, size_t p)
{
    size_t i = p;
    if (p >= L->n || !name_start(u8_next(L->s, L->n, &i))) return 0;
    size_t e = i;
    while (e < L->n) {
        size_t j = e;
        if (!name_cont(u8_next(L->s, L->n, &j))) break;
        e = j;
    }
    return e;
}

/* a quoted string at p: end or 0; decodes Python escapes into the arena */
static int string_at(lexer *L, size_t p, size_t *end, jtok *t)
{
    char q = L->s[p];
    size_t i = p + 1;
    while (i < L->n && L->s[i] != q) {
        if (L->s[i] == '\\') {
            if (i + 1 >= L->n) return 0;
            i += 2;
        } else {
            i++;
        }
    }
    if (i >= L->n) return 0;
    *end = i + 1;
    /* decode s[p+1, i) */
    size_t b = p + 1, e = i;
    char *out = ja_alloc(L->a, (e - b) + 1);
    if (!out) return -1;
    size_t k = 0;
    for (size_t j = b; j < e;) {
        char c = L->s[j];
        if (c != '\\') {
            out[k++] = c;
            j++;
            continue;
        }
        char x = L->s[j + 1];
        j += 2;
        uint32_t cp;
        int nd = 0;
        switch (x) {
        case '\n': continue;
        case '\\': out[k++] = '\\'; continue;
        case '\'': out[k++] = '\''; continue;
        case '"': out[k++] = '"'; continue;
        case 'a': out[k++] = '\a'; continue;
        case 'b': out[k++] = '\b'; continue;
        case 'f': out[k++] = '\f'; continue;
        case 'n': out[k++] = '\n'; continue;
        case 'r': out[k++] = '\r'; continue;
        case 't': out[k++] = '\t'; continue;
        case 'v': out[k++] = '\v'; continue;
        case 'x': nd = 2; break;
        case 'u': nd = 4; break;
        case 'U': nd = 8; break;
        case 'N':
            tm_errf(L->err, TM_E_TEMPLATE, "line %d: syntax error: \\N{...} escapes are not supported",
                    line_at(L, p));
            return -2;
        default:
            if (x >= '0' && x <= '7') {
                cp = (uint32_t)(x - '0');
                for (int m = 0; m < 2 && j < e && L->s[j] >= '0' && L->s[j] <= '7'; m++, j++)
                    cp = cp * 8 + (uint32_t)(L->s[j] - '0');
                k += u8_put(cp, out + k);
                continue;
            }
            out[k++] = '\\'; /* unknown escapes stay as they are */
            out[k++] = x;
            continue;
        }
        cp = 0;
        for (int m = 0; m < nd; m++) {
            int h = j < e ? hexval(L->s[j]) : -1;
            if (h < 0) {
                tm_errf(L->err, TM_E_TEMPLATE, "line %d: syntax error: truncated \\%c%s escape",
                        line_at(L, p), x, nd == 2 ? "XX" : nd == 4 ? "XXXX" : "XXXXXXXX");
                return -2;
            }
            cp = cp * 16 + (uint32_t)h;
            j++;
        }
        if (cp > 0x10FFFF) {
            tm_errf(L->err, TM_E_TEMPLATE, "line %d: syntax error: illegal Unicode character", line_at(L, p));
            return -2;
        }
        k += u8_put(cp, out + k); /* an escape (>= 4 source bytes) never encodes longer */
    }
    out[k] = '\0';
    t->s = out;
    t->n = k;
    return 1;
}

static const struct {
    const char *s;
    uint8_t op;
} OPS[] = {
    {"//", JO_FLOORDIV}, {"**", JO_POW}, {"==", JO_EQ}, {"!=", JO_NE}, {">=", JO_GTEQ}, {"<=", JO_LTEQ},
    {"+", JO_ADD}, {"-", JO_SUB}, {"/", JO_DIV}, {"*", JO_MUL}, {"%", JO_MOD}, {"~", JO_TILDE},
    {"[", JO_LBRACKET}, {"]", JO_RBRACKET}, {"(", JO_LPAREN}, {")", JO_RPAREN}, {"{", JO_LBRACE},
    {"}", JO_RBRACE}, {">", JO_GT}, {"<", JO_LT}, {"=", JO_ASSIGN}, {".", JO_DOT}, {":", JO_COLON},
    {"|", JO_PIPE}, {",", JO_COMMA}, {";", JO_SEMICOLON},
};

const char *jop_str(int op)
{
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++)
        if (OPS[i].op == op) return OPS[i].s;
    if (op == JO_IN) return "in";
    if (op == JO_NOTIN) return "not in";
    return "?";
}

/* tokens inside {{ }} or {% %}, up to and including the end tag */
static int lex_tag(lexer *L, int is_block)
{
    for (;;) {
        size_t p = L->pos;
        if (p >= L->n) return 0; /* the parser reports the missing end */
        if (L->nbal == 0) {
            size_t e = 0;
            if (is_block) {
                e = block_end_at(L, p, "%}");
            } else if (L->s[p] == '-' && starts(L, p + 1, "}}")) {
                e = skip_ws(L, p + 3);
            } else if (starts(L, p, "}}")) {
                e = p + 2;
            }
            if (e) {
                PUSH(t, is_block ? JT_BLOCK_END : JT_VAR_END, p);
                (void)t;
                L->line_starting = L->s[e - 1] == '\n';
                L->pos = e;
                return 0;
            }
        }
        size_t w = ws_at(L, p);
        if (w) {
            L->pos = skip_ws(L, p);
            continue;
        }
        size_t e = float_at(L, p);
        if (e) {
            PUSH(t, JT_FLOAT, p);
            char buf[128];
            size_t k = 0;
            for (size_t i = p; i < e && k < sizeof buf - 1; i++)
                if (L->s[i] != '_') buf[k++] = L->s[i];
            buf[k] = '\0';
            t->f = strtod(buf, NULL);
            L->pos = e;
            continue;
        }
        int64_t iv;
        int ovf;
        e = int_at(L, p, &iv, &ovf);
        if (e) {
            if (ovf) return lfail(L, p, "integer literal %s is too large (more than 64 bits)", "");
            PUSH(t, JT_INT, p);
            t->i = iv;
            L->pos = e;
            continue;
        }
        e = name_at(L, p);
        if (e) {
            PUSH(t, JT_NAME, p);
            t->s = L->s + p;
            t->n = e - p;
            L->pos = e;
            continue;
        }
        char c = L->s[p];
        if (c == '\'' || c == '"') {
            PUSH(t, JT_STRING, p);
            int r = string_at(L, p, &e, t);
            if (r == -1) return tm_errf(L->err, TM_E_NOMEM, "out of memory tokenizing the template");
            if (r == -2) return TM_E_TEMPLATE;
            if (r == 1) {
                L->pos = e;
                continue;
            }
            L->ntoks--; /* unterminated: falls through to "unexpected char" */
        }
        size_t k;
        for (k = 0; k < sizeof OPS / sizeof OPS[0]; k++)
            if (starts(L, p, OPS[k].s)) break;
        if (k == sizeof OPS / sizeof OPS[0]) {
            char ch[8], msg[32];
            size_t i = p;
            uint32_t cp = u8_next(L->s, L->n, &i);
            size_t m = u8_put(cp, ch);
            ch[m] = '\0';
            /* as jinja2 words it: the character's repr and its offset */
            snprintf(msg, sizeof msg, cp == '\'' ? "\"%s\" at %zu" : "'%s' at %zu", ch, p);
            return lfail(L, p, "unexpected char %s", msg);
        }
        int op = OPS[k].op;
        if (op == JO_LBRACE || op == JO_LPAREN || op == JO_LBRACKET) {
            if (L->nbal == (int)sizeof L->bal) return lfail(L, p, "brackets nested too deeply%s", "");
            L->bal[L->nbal++] = op == JO_LBRACE ? '}' : op == JO_LPAREN ? ')' : ']';
        } else if (op == JO_RBRACE || op == JO_RPAREN || op == JO_RBRACKET) {
            char cs[2] = {L->s[p], 0};
            if (L->nbal == 0) return lfail(L, p, "unexpected '%s'", cs);
            char want = L->bal[--L->nbal];
            if (want != L->s[p]) {
                char msg[64];
                snprintf(msg, sizeof msg, "unexpected '%c', expected '%c'", L->s[p], want);
                return lfail(L, p, "%s", msg);
            }
        }
        PUSH(t, JT_OP, p);
        t->op = (uint8_t)op;
        L->pos = p + strlen(OPS[k].s);
    }
}

int jlex(jarena *a, const char *raw, size_t rawlen, jtok **toks, size_t *ntoks, tm_err *err)
{
    *toks = NULL;
    *ntoks = 0;
    /* normalize newlines, drop one trailing newline */
    char *src = ja_alloc(a, rawlen + 1);
    if (!src) return tm_errf(err, TM_E_NOMEM, "out of memory reading the template");
    size_t n = 0;
    for (size_t i = 0; i < rawlen; i++) {
        if (raw[i] == '\r') {
            src[n++] = '\n';
            if (i + 1 < rawlen && raw[i + 1] == '\n') i++;
        } else {
            src[n++] = raw[i];
        }
    }
    if (n && src[n - 1] == '\n') n--;
    src[n] = '\0';

    lexer L = {0};
    L.a = a;
    L.s = src;
    L.n = n;
    L.lline = 1;
    L.err = err;
    L.line_starting = 1;
    int rc = 0;
    while (L.pos < L.n && !rc) {
        size_t p = L.pos;
        /* the next tag start */
        size_t t = p;
        int kind = 0; /* '{', '%', '#' */
        while (t + 1 < L.n) {
            if (L.s[t] == '{' && (L.s[t + 1] == '{' || L.s[t + 1] == '%' || L.s[t + 1] == '#')) {
                kind = L.s[t + 1];
                break;
            }
            t++;
        }
        if (!kind) {
            rc = emit_data(&L, p, L.n, 0, 0);
            L.pos = L.n;
            break;
        }
        char rawsign;
        size_t rawend = kind == '%' ? raw_begin_at(&L, t, &rawsign) : 0;
        if (rawend) {
            if ((rc = emit_data(&L, p, t, rawsign, 1))) break;
            L.line_starting = L.s[rawend - 1] == '\n';
            size_t q = rawend, endpos = 0;
            char esign = 0;
            for (; q + 1 < L.n; q++)
                if (L.s[q] == '{' && L.s[q + 1] == '%' && (endpos = raw_end_at(&L, q, &esign))) break;
            if (!endpos) {
                rc = tm_errf(err, TM_E_TEMPLATE, "line %d: syntax error: Missing end of raw directive",
                             line_at(&L, t));
                break;
            }
            if ((rc = emit_data(&L, rawend, q, esign, 1))) break;
            L.line_starting = L.s[endpos - 1] == '\n';
            L.pos = endpos;
            continue;
        }
        size_t q = t + 2;
        char sign = 0;
        if (q < L.n && (L.s[q] == '-' || L.s[q] == '+')) sign = L.s[q++];
        if ((rc = emit_data(&L, p, t, sign, kind != '{'))) break;
        L.line_starting = 0;
        if (kind == '#') {
            size_t e = 0, k;
            for (k = q; k < L.n; k++)
                if ((e = block_end_at(&L, k, "#}"))) break;
            if (!e) {
                rc = tm_errf(err, TM_E_TEMPLATE, "line %d: syntax error: Missing end of comment tag",
                             line_at(&L, t));
                break;
            }
            L.line_starting = L.s[e - 1] == '\n';
            L.pos = e;
            continue;
        }
        jtok *bt = push(&L, kind == '{' ? JT_VAR_BEGIN : JT_BLOCK_BEGIN, t);
        if (!bt) {
            rc = tm_errf(err, TM_E_NOMEM, "out of memory tokenizing the template");
            break;
        }
        L.pos = q;
        L.nbal = 0;
        rc = lex_tag(&L, kind == '%');
    }
    if (!rc) {
        jtok *e = push(&L, JT_EOF, L.n);
        if (!e) rc = tm_errf(err, TM_E_NOMEM, "out of memory tokenizing the template");
    }
    if (rc) {
        free(L.toks);
        return rc;
    }
    *toks = L.toks;
    *ntoks = L.ntoks;
    return TM_OK;
}
