/* tests/test_grammar.c: GBNF grammars and their matcher (text/grammar.h).
 *
 * 1. Hand cases: the dialect's forms (literals, escapes, classes, '.', groups, every repetition,
 *    comments, rules over several lines, recursion, nullable loops, Unicode) on texts taken or
 *    refused; and every refusal of the parser with its status and the line it names.
 * 2. Random grammars against a reference recognizer: each grammar is generated as GBNF text and
 *    as a tree the test matches by itself (sets of end positions over code points). On strings
 *    derived from the grammar, random strings and mutations, every prefix the matcher takes is a
 *    prefix of some string of the language and the reverse (invariant 2), and it accepts exactly
 *    the language's strings.
 * 3. Masks against brute force: tm_gmatch_mask allows exactly the tokens the matcher would take
 *    byte by byte (tm_gmatch_would_take), along texts of a JSON grammar and others, for the demo
 *    model's vocabulary and the conformance tokenizers.
 * 4. Rebuilds: a matcher whose tables are dropped every few configurations gives the same answers
 *    and masks as one that keeps them; the depth and stack bounds refuse, never crash. */
#include "harness.h"

#include "text/grammar.h"
#include "text/sampler.h"
#include "text/tokenizer.h"
#include "text/vocab_trie.h"

static int rnd(tm_rng *r, int n) { return (int)(tm_rng_next(r) % (uint64_t)n); }

static size_t put_utf8(char *o, uint32_t c)
{
    if (c < 0x80) return o[0] = (char)c, 1;
    if (c < 0x800) return o[0] = (char)(0xC0 | c >> 6), o[1] = (char)(0x80 | (c & 0x3F)), 2;
    if (c < 0x10000)
        return o[0] = (char)(0xE0 | c >> 12), o[1] = (char)(0x80 | (c >> 6 & 0x3F)), o[2] = (char)(0x80 | (c & 0x3F)), 3;
    o[0] = (char)(0xF0 | c >> 18), o[1] = (char)(0x80 | (c >> 12 & 0x3F));
    o[2] = (char)(0x80 | (c >> 6 & 0x3F)), o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* match: 1 if g (source) takes text whole and accepts it, 0 if not, -1 if the grammar fails */
static int match(const char *src, const char *text, size_t n)
{
    tm_grammar *g = NULL;
    tm_gmatch *m = NULL;
    tm_err err = {0};
    if (tm_grammar_parse(&g, src, strlen(src), &err) || tm_gmatch_new(&m, g, &err)) {
        fprintf(stderr, "grammar %s: %s\n", src, err.msg);
        tm_grammar_free(g);
        return -1;
    }
    int r = tm_gmatch_feed(m, text, n) == 1 && tm_gmatch_accepting(m);
    tm_gmatch_free(m);
    tm_grammar_free(g);
    return r;
}

#define YES(src, text) CHECKF(match(src, text, strlen(text)) == 1, "%s should take \"%s\"", src, text)
#define NO(src, text) CHECKF(match(src, text, strlen(text)) == 0, "%s should refuse \"%s\"", src, text)

static void test_forms(void)
{
    YES("root ::= \"abc\"", "abc");
    NO("root ::= \"abc\"", "ab");
    NO("root ::= \"abc\"", "abcd");
    NO("root ::= \"abc\"", "abd");
    YES("root ::= [a-c]+ [^a-c]", "abcz");
    NO("root ::= [a-c]+ [^a-c]", "abc");
    NO("root ::= [a-c]+ [^a-c]", "zz");
    const char *rep = "root ::= \"a\"{2,3}";
    NO(rep, "a");
    YES(rep, "aa");
    YES(rep, "aaa");
    NO(rep, "aaaa");
    YES("root ::= \"ab\"{2}", "abab");
    NO("root ::= \"ab\"{2}", "ab");
    YES("root ::= \"q\"{2,} \"y\"", "qqqqy");
    NO("root ::= \"q\"{2,} \"y\"", "qy");
    YES("root ::= \"x\"{ 0 , 1 }", "");
    YES("root ::= (\"a\" | \"bc\")* \"d\"", "abcabcad");
    YES("root ::= (\"a\" | \"bc\")* \"d\"", "d");
    NO("root ::= (\"a\" | \"bc\")* \"d\"", "abd");
    YES("root ::= \"a\"? \"b\"", "b");
    YES("root ::= \"a\"? \"b\"", "ab");
    NO("root ::= \"a\"? \"b\"", "aab");
    YES("root ::= \"\\x41\\u00e9\\n\\t\\\\\\\"\\U0001F600\"", "A\xc3\xa9\n\t\\\"\xf0\x9f\x98\x80");
    YES("root ::= [\\u03b1-\\u03c9]+", "\xce\xb2\xce\xb3");          /* Greek small letters */
    NO("root ::= [\\u03b1-\\u03c9]+", "\xce\x91");                    /* capital alpha */
    YES("root ::= [α-ω]", "\xce\xb4");
    YES("root ::= .{3}", "a\xe2\x82\xac" "b");
    NO("root ::= .{3}", "abcd");
    NO("root ::= .", "\xc0\x80");                                     /* overlong */
    NO("root ::= .", "\xed\xa0\x80");                                 /* a surrogate */
    NO("root ::= .", "\xf4\x90\x80\x80");                             /* past U+10FFFF */
    YES("root ::= [^\\x00-\\x7f]", "\xf4\x8f\xbf\xbf");
    YES("root ::= [\\]\\-\\^a]+", "]-^a");
    YES("root ::= [a-]+", "a-a");
    /* comments, rules over several lines, '|' at a line's end or start */
    const char *multi = "# a comment\nroot ::= a |\n  b\n  | c # trailing\n\na ::= \"1\"\nb ::= (\n \"2\"\n \"3\" )\nc ::= \"4\"\n";
    YES(multi, "1");
    YES(multi, "23");
    YES(multi, "4");
    NO(multi, "2");
    /* recursion, nullable loops, an empty alternative */
    YES("root ::= \"(\" root \")\" | \"x\"", "((x))");
    NO("root ::= \"(\" root \")\" | \"x\"", "((x)");
    YES("root ::= (\"a\"?)* \"b\"", "aab");
    YES("root ::= (\"a\"?)* \"b\"", "b");
    YES("root ::= ((\"a\"?)*)* \"b\"", "ab");
    YES("root ::= \"a\" |", "");
    YES("root ::= \"a\" |", "a");
    YES("root ::= x x\nx ::= \"\" | \"q\"", "q");
    YES("root ::= \"\"", "");
    YES("root_2 ::= \"z\"\nroot ::= root_2 my-rule\nmy-rule ::= \"y\"", "zy");
    /* a JSON grammar (llama.cpp's json.gbnf, as published) */
    const char *json =
        "root   ::= object\n"
        "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
        "object ::=\n  \"{\" ws (\n            string \":\" ws value\n    (\",\" ws string \":\" ws value)*\n  )? \"}\" ws\n"
        "array  ::=\n  \"[\" ws (\n            value\n    (\",\" ws value)*\n  )? \"]\" ws\n"
        "string ::=\n  \"\\\"\" (\n    [^\"\\\\\\x7F\\x00-\\x1F] |\n    \"\\\\\" ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})\n  )* \"\\\"\" ws\n"
        "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
        "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";
    YES(json, "{\"a\": [1, 2.5, -3e7, true, null, {\"b\": \"c\\u00e9\\n\"}]}");
    YES(json, "{}");
    NO(json, "{\"a\": 01}");
    NO(json, "{\"a\": [1,]}");
    NO(json, "[1]");
}

/* parse_err: tm_grammar_parse's status on src, its message checked to hold want */
static void parse_err(const char *src, int code, const char *want)
{
    tm_grammar *g = NULL;
    tm_err err = {0};
    int rc = tm_grammar_parse(&g, src, strlen(src), &err);
    CHECKF(rc == code && g == NULL && strstr(err.msg, want), "%s: %d (%s), expected %d with \"%s\"", src, rc, err.msg,
           code, want);
    tm_grammar_free(g);
}

static void test_errors(void)
{
    parse_err("root ::= \"abc", TM_E_FORMAT, "line 1: unterminated literal");
    parse_err("root ::= [abc", TM_E_FORMAT, "unterminated character class");
    parse_err("root ::= \"a\"\n\nroot2 ::= foo", TM_E_FORMAT, "line 3: rule 'foo' is used but not defined");
    parse_err("a ::= \"x\"", TM_E_FORMAT, "no rule named 'root'");
    parse_err("", TM_E_FORMAT, "no rule named 'root'");
    parse_err("root ::= root \"a\" | \"b\"", TM_E_FORMAT, "left recursion: root -> root");
    parse_err("root ::= a\na ::= b? root \"x\"\nb ::= \"y\"", TM_E_FORMAT, "left recursion");
    parse_err("root ::= (\"a\" | root) \"b\"", TM_E_FORMAT, "left recursion");
    YES("root ::= (\"a\" | root)", "a"); /* a cycle of tail calls only: harmless, taken */
    parse_err("root ::= \"a\"{1001}", TM_E_LIMIT, "repetition bound over 1000");
    parse_err("root ::= \"a\"{3,2}", TM_E_FORMAT, "n < m");
    parse_err("root ::= \"a\"{2", TM_E_FORMAT, "'{' without its '}'");
    parse_err("root ::= *", TM_E_FORMAT, "'*' repeats nothing");
    parse_err("root ::= \"a\"**", TM_E_FORMAT, "'*' repeats nothing");
    parse_err("root ::= \"a\"\nroot ::= \"b\"", TM_E_FORMAT, "line 2: rule 'root' defined twice");
    parse_err("root ::= [z-a]", TM_E_FORMAT, "runs backwards");
    parse_err("root ::= \"\\q\"", TM_E_FORMAT, "unknown escape \\q");
    parse_err("root ::= \"\\x4\"", TM_E_FORMAT, "hex digits expected");
    parse_err("root ::= \"\\U00110000\"", TM_E_FORMAT, "past U+10FFFF");
    parse_err("root ::= \"a\" b ::= \"c\"", TM_E_FORMAT, "a rule definition inside another rule");
    parse_err("root ::= (\"a\"", TM_E_FORMAT, "'(' without its ')'");
    parse_err("root \"a\"", TM_E_FORMAT, "'::=' expected");
    parse_err("root ::= \"a\" )", TM_E_FORMAT, "unexpected ')'");
    parse_err("root ::= \"a\xff\"", TM_E_FORMAT, "invalid UTF-8");
    parse_err("root ::= \"a\nb\"", TM_E_FORMAT, "line break inside a literal");
    char deep[600];
    size_t n = (size_t)snprintf(deep, sizeof deep, "root ::= ");
    for (int i = 0; i < 200; i++) deep[n++] = '(';
    deep[n] = 0;
    parse_err(deep, TM_E_LIMIT, "nested deeper than 128");
    /* past TM_GRAMMAR_MAX_ELEMS once repetitions are expanded: 1,100 x 1,000 elements */
    size_t cap = 1100 * 12 + 32;
    char *big = malloc(cap);
    n = (size_t)snprintf(big, cap, "root ::=");
    for (int i = 0; i < 1100; i++) n += (size_t)snprintf(big + n, cap - n, " \"a\"{1000}");
    parse_err(big, TM_E_LIMIT, "elements");
    free(big);
}

/* ---- random grammars against a reference recognizer ---- */

enum { A_SET, A_SEQ, A_ALT, A_REF, A_REP };

#define MAXK 4
typedef struct ast {
    int kind;
    uint32_t lo[2], hi[2];  /* A_SET: nr ranges, neg */
    int nr, neg;
    int kid[MAXK], nk;      /* A_SEQ, A_ALT: children; A_REP: kid[0] */
    int rule;               /* A_REF */
    int min, max;           /* A_REP (max -1: none) */
} ast;

#define MAXN 400
#define MAXR 4
#define MAXS 12             /* code points in a test string */

typedef struct rgram {
    ast n[MAXN];
    int nn;
    int rule_root[MAXR], nr;
    char src[8192];
    size_t len;
} rgram;

static const uint32_t alpha[] = {'a', 'b', 'c', 0xE9, 0x20AC, 0x1F600};
#define NALPHA 6

static void emit(rgram *g, const char *s)
{
    size_t l = strlen(s);
    if (g->len + l < sizeof g->src) memcpy(g->src + g->len, s, l + 1), g->len += l;
}

static void emit_cp(rgram *g, uint32_t c, tm_rng *r)
{
    char b[16];
    if (c < 0x80) b[0] = (char)c, b[1] = 0;
    else if (rnd(r, 2)) b[put_utf8(b, c)] = 0;            /* raw UTF-8 */
    else if (c > 0xFFFF) snprintf(b, sizeof b, "\\U%08X", c);
    else snprintf(b, sizeof b, "\\u%04x", c);
    emit(g, b);
}

static int new_node(rgram *g, int kind)
{
    memset(&g->n[g->nn], 0, sizeof g->n[0]);
    g->n[g->nn].kind = kind;
    return g->nn++;
}

static int gen_alt(rgram *g, tm_rng *r, int rule, int depth);

/* an item of a sequence; guarded: a terminal came before it in the sequence, so a reference to
 * this rule or an earlier one cannot recurse at the same position */
static int gen_item(rgram *g, tm_rng *r, int rule, int depth, int guarded, int *terminal)
{
    int k = rnd(r, depth > 2 ? 3 : 5);
    *terminal = 0;
    if (g->nn > MAXN - 40) k = 0;
    if (k == 0) { /* a literal code point */
        int a = new_node(g, A_SET);
        uint32_t c = alpha[rnd(r, NALPHA)];
        g->n[a].lo[0] = g->n[a].hi[0] = c;
        g->n[a].nr = 1;
        emit(g, " \"");
        emit_cp(g, c, r);
        emit(g, "\"");
        *terminal = 1;
        return a;
    }
    if (k == 1) { /* a class */
        int a = new_node(g, A_SET);
        g->n[a].neg = rnd(r, 4) == 0;
        g->n[a].nr = 1 + rnd(r, 2);
        emit(g, g->n[a].neg ? " [^" : " [");
        for (int i = 0; i < g->n[a].nr; i++) {
            int x = rnd(r, NALPHA), y = x + rnd(r, 2);
            if (y >= NALPHA) y = x;
            g->n[a].lo[i] = alpha[x];
            g->n[a].hi[i] = alpha[y];
            emit_cp(g, alpha[x], r);
            if (y != x) emit(g, "-"), emit_cp(g, alpha[y], r);
        }
        emit(g, "]");
        *terminal = 1;
        return a;
    }
    if (k == 2) { /* a reference: later rules anywhere, this one or earlier ones only when guarded */
        int lo = guarded ? 0 : rule + 1;
        if (lo >= g->nr) return gen_item(g, r, rule, 9, guarded, terminal);
        int a = new_node(g, A_REF);
        g->n[a].rule = lo + rnd(r, g->nr - lo);
        char b[16];
        snprintf(b, sizeof b, " r%d", g->n[a].rule);
        emit(g, b);
        return a;
    }
    /* a group, maybe repeated */
    emit(g, " (");
    int inner = gen_alt(g, r, guarded ? -1 : rule, depth + 1);
    emit(g, " )");
    static const int reps[][2] = {{1, 1}, {0, -1}, {1, -1}, {0, 1}, {2, 2}, {1, 3}, {2, -1}, {0, 2}};
    int q = rnd(r, 8);
    if (q == 0) return inner;
    int a = new_node(g, A_REP);
    g->n[a].kid[0] = inner;
    g->n[a].nk = 1;
    g->n[a].min = reps[q][0];
    g->n[a].max = reps[q][1];
    char b[24];
    if (q == 1) emit(g, "*");
    else if (q == 2) emit(g, "+");
    else if (q == 3) emit(g, "?");
    else if (reps[q][1] < 0) snprintf(b, sizeof b, "{%d,}", reps[q][0]), emit(g, b);
    else if (reps[q][0] == reps[q][1]) snprintf(b, sizeof b, "{%d}", reps[q][0]), emit(g, b);
    else snprintf(b, sizeof b, "{%d,%d}", reps[q][0], reps[q][1]), emit(g, b);
    return a;
}

/* alternatives of sequences. rule -1: inside a guarded group (any reference allowed) */
static int gen_alt(rgram *g, tm_rng *r, int rule, int depth)
{
    int a = new_node(g, A_ALT), na = 1 + rnd(r, 3);
    for (int i = 0; i < na; i++) {
        if (i) emit(g, " |");
        int s = new_node(g, A_SEQ), ni = rnd(r, depth > 2 ? 2 : 4), guarded = rule < 0;
        for (int j = 0; j < ni; j++) {
            int term;
            int it = gen_item(g, r, rule < 0 ? 0 : rule, depth, guarded, &term);
            g->n[s].kid[g->n[s].nk++] = it;
            guarded |= term;
        }
        g->n[a].kid[g->n[a].nk++] = s;
    }
    return a;
}

static void gen_grammar(rgram *g, tm_rng *r)
{
    g->nn = 0;
    g->len = 0;
    g->src[0] = 0;
    g->nr = 1 + rnd(r, MAXR);
    for (int i = 0; i < g->nr; i++) {
        char b[32];
        snprintf(b, sizeof b, "%s ::=", i == 0 ? "root" : "");
        if (i) snprintf(b, sizeof b, "r%d ::=", i);
        emit(g, b);
        g->rule_root[i] = gen_alt(g, r, i, 0);
        emit(g, "\n");
    }
    emit(g, "r0 ::= root\n"); /* references to rule 0 go through an alias */
}

/* The reference: for node a starting at code point i of s [len], E := the mask of end positions,
 * and *P := some derivation of a consumes all of s[i..len) (s is a prefix of a longer match). */
typedef struct refm {
    const rgram *g;
    const uint32_t *s;
    int len;
    uint64_t memo_e[MAXR][MAXS + 1];
    uint8_t memo_p[MAXR][MAXS + 1], done[MAXR][MAXS + 1];
} refm;

static uint64_t ref_ends(refm *m, int a, int i, int *P);

static uint64_t ref_seq(refm *m, const ast *n, int k, int i, int *P)
{
    if (k == n->nk) {
        *P = i == m->len;
        return 1ull << i;
    }
    int p;
    uint64_t e = ref_ends(m, n->kid[k], i, &p), out = 0;
    *P = p;
    for (int j = 0; j <= m->len; j++)
        if (e >> j & 1) {
            out |= ref_seq(m, n, k + 1, j, &p);
            *P |= p;
        }
    return out;
}

static uint64_t ref_ends(refm *m, int a, int i, int *P)
{
    const ast *n = &m->g->n[a];
    *P = 0;
    if (n->kind == A_SET) {
        if (i == m->len) return *P = 1, 0;
        int in = 0;
        for (int k = 0; k < n->nr; k++) in |= m->s[i] >= n->lo[k] && m->s[i] <= n->hi[k];
        return in != n->neg ? 1ull << (i + 1) : 0;
    }
    if (n->kind == A_SEQ) return ref_seq(m, n, 0, i, P);
    if (n->kind == A_ALT) {
        uint64_t out = 0;
        for (int k = 0; k < n->nk; k++) {
            int p;
            out |= ref_ends(m, n->kid[k], i, &p);
            *P |= p;
        }
        return out;
    }
    if (n->kind == A_REF) {
        int rl = n->rule;
        if (!m->done[rl][i]) {
            int p;
            m->memo_e[rl][i] = ref_ends(m, m->g->rule_root[rl], i, &p);
            m->memo_p[rl][i] = (uint8_t)p;
            m->done[rl][i] = 1;
        }
        *P = m->memo_p[rl][i];
        return m->memo_e[rl][i];
    }
    /* A_REP: the positions after k repetitions, k from 0 up to max; without a max, up to min + len + 1
     * (past that, every position reachable is reached by fewer non-empty repetitions) */
    uint64_t cur = 1ull << i, out = 0;
    int last = n->max >= 0 ? n->max : n->min + m->len + 1;
    for (int k = 0; k <= last; k++) {
        if (k >= n->min) out |= cur;
        if (k >= n->min && (cur & (1ull << m->len))) *P = 1;
        if (k == last) break;
        uint64_t next = 0;
        for (int j = 0; j <= m->len; j++)
            if (cur >> j & 1) {
                int p;
                next |= ref_ends(m, n->kid[0], j, &p);
                *P |= p;
            }
        cur = next;
    }
    return out;
}

/* ref_match: *accept, *viable for s[0..len) under g */
static void ref_match(const rgram *g, const uint32_t *s, int len, int *accept, int *viable)
{
    static refm m;
    memset(&m, 0, sizeof m);
    m.g = g;
    m.s = s;
    m.len = len;
    uint64_t e = ref_ends(&m, g->rule_root[0], 0, viable);
    *accept = (int)(e >> len & 1);
}

/* derive: a random string of the language (code points), -1 if it grew too long */
static int derive(const rgram *g, tm_rng *r, int a, uint32_t *s, int len, int depth)
{
    const ast *n = &g->n[a];
    if (len < 0 || depth > 30) return -1;
    switch (n->kind) {
    case A_SET: {
        if (len >= MAXS) return -1;
        for (int tries = 0; tries < 50; tries++) {
            uint32_t c = rnd(r, 5) ? alpha[rnd(r, NALPHA)] : (uint32_t)('d' + rnd(r, 20));
            int in = 0;
            for (int k = 0; k < n->nr; k++) in |= c >= n->lo[k] && c <= n->hi[k];
            if (in != n->neg) {
                s[len] = c;
                return len + 1;
            }
        }
        return -1;
    }
    case A_SEQ:
        for (int k = 0; k < n->nk && len >= 0; k++) len = derive(g, r, n->kid[k], s, len, depth + 1);
        return len;
    case A_ALT: return derive(g, r, n->kid[rnd(r, n->nk)], s, len, depth + 1);
    case A_REF: return derive(g, r, g->rule_root[n->rule], s, len, depth + 1);
    default: {
        int k = n->min + rnd(r, 3);
        if (n->max >= 0 && k > n->max) k = n->max;
        for (int i = 0; i < k && len >= 0; i++) len = derive(g, r, n->kid[0], s, len, depth + 1);
        return len;
    }
    }
}

static void test_random(int n_grammars)
{
    tm_rng r;
    tm_rng_seed(&r, 11);
    static rgram g;
    int strings = 0, in_lang = 0, wrong = 0, over = 0, cut = 0;
    const char *only = getenv("TM_GRAMMAR_ONLY"); /* debugging: one grammar's number */
    for (int gi = 0; gi < n_grammars; gi++) {
        gen_grammar(&g, &r);
        if (only && atoi(only) != gi) continue;
        tm_rng rs; /* the strings' own stream, so one grammar can be run alone */
        tm_rng_seed(&rs, 1000 + (uint64_t)gi);
        tm_grammar *cg = NULL;
        tm_gmatch *m = NULL;
        tm_err err = {0};
        CHECKF(tm_grammar_parse(&cg, g.src, g.len, &err) == TM_OK, "random grammar %d: %s\n%s", gi, err.msg, g.src);
        if (!cg) continue;
        if (tm_gmatch_new(&m, cg, &err)) { /* its start needs more stacks than the bound */
            CHECKF(err.code == TM_E_LIMIT, "random grammar %d: %s", gi, err.msg);
            over++;
            tm_grammar_free(cg);
            continue;
        }
        for (int si = 0; si < 40; si++) {
            uint32_t s[MAXS];
            int len;
            if (si < 20) {
                len = derive(&g, &rs, g.rule_root[0], s, 0, 0);
                if (len < 0) continue;
                if (si >= 12 && len > 0) s[rnd(&rs, len)] = alpha[rnd(&rs, NALPHA)]; /* a mutation */
            } else {
                len = rnd(&rs, 7);
                for (int i = 0; i < len; i++) s[i] = alpha[rnd(&rs, NALPHA)];
            }
            strings++;
            /* feed code point by code point; at each boundary the matcher's answers against the reference */
            tm_gmatch *f = NULL;
            tm_gmatch_new(&f, cg, &err);
            int alive = 1;
            for (int t = 0; t <= len && f && !tm_gmatch_cut(f); t++) {
                int acc, via;
                ref_match(&g, s, t, &acc, &via);
                int macc = alive && tm_gmatch_accepting(f);
                if ((alive != via || macc != acc) && wrong++ < 5) {
                    fprintf(stderr, "grammar %d, prefix %d of the string", gi, t);
                    for (int k = 0; k < len; k++) fprintf(stderr, " U+%04X", s[k]);
                    fprintf(stderr, ": matcher alive %d accepting %d, reference viable %d accepting %d\n%s", alive, macc,
                            via, acc, g.src);
                }
                if (t == len) in_lang += acc;
                if (t < len && alive) {
                    char b[4];
                    size_t bl = put_utf8(b, s[t]);
                    alive = tm_gmatch_feed(f, b, bl) == 1;
                }
            }
            /* a string whose prefixes made the matcher cut a path (too many stacks: exponentially
             * ambiguous grammars) is compared up to the cut only */
            if (f && tm_gmatch_cut(f)) cut++;
            tm_gmatch_free(f);
        }
        tm_gmatch_free(m);
        tm_grammar_free(cg);
    }
    CHECKF(wrong == 0, "%d of the prefixes of %d strings answered unlike the reference", wrong, strings);
    CHECKF(over < n_grammars / 20 && cut < strings / 20, "%d of %d grammars over the stack bound at their start, %d of "
           "%d strings cut", over, n_grammars, cut, strings);
    CHECKF(in_lang > strings / 4 && in_lang < strings, "%d of %d strings in the language", in_lang, strings);
}

/* ---- masks against brute force ---- */

static const char *const mask_grammars[] = {
    /* JSON values, compact */
    "root ::= value\n"
    "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
    "object ::= \"{\" ( string \":\" value ( \",\" string \":\" value )* )? \"}\"\n"
    "array ::= \"[\" ( value ( \",\" value )* )? \"]\"\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1f] | \"\\\\\" [\"\\\\/bfnrt] )* \"\\\"\"\n"
    "number ::= \"-\"? ( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )?\n",
    /* numbers in a list */
    "root ::= [0-9]{1,4} ( \", \" [0-9]{1,4} )* \".\"\n",
    /* words with accents and an ending */
    "root ::= ( [a-zA-Z0-9 ] | [\\u00e0-\\u00ff] | \"\\u20ac\" )+ ( \".\" | \"!\" )\n",
};

static void test_masks(const char *path, const char *name, int states)
{
    tm_err err = {0};
    tm_tokenizer *t = NULL;
    CHECKF(tm_tok_load(&t, path, &err) == TM_OK, "%s: %s", name, err.msg);
    if (!t) return;
    int32_t V = tm_tok_vocab_size(t);
    tm_vocab_trie *trie = NULL;
    CHECKF(tm_vocab_trie_new(&trie, t, V, &err) == TM_OK, "%s: %s", name, err.msg);
    float *lg = malloc(sizeof(float) * (size_t)V);
    static const char *const texts[] = {
        "{\"name\":\"Caf\xc3\xa9 \\\"x\\\"\",\"list\":[1,-2.5,true,null,{}],\"n\":0}",
        "12, 345, 6789, 0.",
        "Les \xc3\xa9t\xc3\xa9s co\xc3\xbbtent 5\xe2\x82\xac!",
    };
    int checked = 0, wrong = 0, allowed_total = 0;
    for (int gi = 0; gi < 3 && trie; gi++) {
        tm_grammar *g = NULL;
        tm_gmatch *m = NULL;
        CHECKF(tm_grammar_parse(&g, mask_grammars[gi], strlen(mask_grammars[gi]), &err) == TM_OK, "%s", err.msg);
        if (!g || tm_gmatch_new(&m, g, &err)) continue;
        const char *x = texts[gi];
        size_t n = strlen(x);
        for (size_t i = 0; i <= n; i++) {
            if (i % (n / (size_t)states + 1) == 0 || i == n) {
                for (int32_t k = 0; k < V; k++) lg[k] = 0;
                CHECK(tm_gmatch_mask(m, trie, lg) == TM_OK);
                for (int32_t k = 0; k < V; k++) {
                    uint32_t bl;
                    const uint8_t *b = tm_vocab_token(trie, k, &bl);
                    int take = b ? tm_gmatch_would_take(m, b, bl) == 1 : 0, allowed = lg[k] == 0;
                    allowed_total += allowed;
                    if (take != allowed && wrong++ < 5)
                        fprintf(stderr, "%s: grammar %d after %zu bytes: token %d allowed %d, taken %d\n", name, gi, i, k,
                                allowed, take);
                }
                checked++;
            }
            if (i < n) CHECKF(tm_gmatch_feed(m, x + i, 1) == 1, "%s: grammar %d refused byte %zu", name, gi, i);
        }
        CHECKF(tm_gmatch_accepting(m), "%s: grammar %d does not accept its text", name, gi);
        /* advancing by a token is feeding its bytes */
        tm_gmatch_free(m);
        tm_gmatch_new(&m, g, &err);
        int32_t *ids = NULL;
        size_t nid = 0;
        char joined[256];
        size_t jl = 0;
        if (tm_tok_encode(t, x, n, 0, &ids, &nid, &err) == TM_OK) {
            for (size_t k = 0; k < nid; k++) { /* the tokens' bytes mid-text */
                uint32_t bl;
                const uint8_t *b = tm_vocab_token(trie, ids[k], &bl);
                if (b && jl + bl < sizeof joined) memcpy(joined + jl, b, bl), jl += bl;
            }
        }
        /* where they spell the text (not SentencePiece's, which adds a leading space) */
        if (jl == n && !memcmp(joined, x, n)) {
            int ok = 1;
            for (size_t k = 0; k < nid; k++) ok &= tm_gmatch_advance(m, trie, ids[k]) == 1;
            CHECKF(ok && tm_gmatch_accepting(m), "%s: grammar %d: its text's %zu tokens not taken", name, gi, nid);
        }
        free(ids);
        tm_gmatch_free(m);
        tm_grammar_free(g);
    }
    CHECKF(wrong == 0 && checked > 0, "%s: %d masks, %d tokens unlike the matcher's bytes", name, checked, wrong);
    CHECKF(allowed_total > checked, "%s: the masks allowed %d tokens in %d states", name, allowed_total, checked);
    free(lg);
    tm_vocab_trie_free(trie);
    tm_tok_free(t);
}

/* ---- rebuilds and bounds ---- */

static void test_rebuild_and_bounds(const char *tok_path)
{
    tm_err err = {0};
    tm_grammar *g = NULL;
    const char *src = mask_grammars[0];
    CHECK(tm_grammar_parse(&g, src, strlen(src), &err) == TM_OK);
    tm_gmatch *a = NULL, *b = NULL;
    tm_gmatch_new(&a, g, &err);
    tm_gmatch_new(&b, g, &err);
    if (!a || !b) return;
    tm_gmatch_set_limit(b, 3); /* b drops its tables after nearly every byte */
    const char *x = "{\"k\":[1,2,{\"z\":\"\xc3\xa9\xe2\x82\xac\"}],\"q\":-0.5}";
    int same = 1;
    for (size_t i = 0; x[i]; i++) {
        for (int c = 0; c < 256; c++) {
            unsigned char ch = (unsigned char)c;
            same &= tm_gmatch_would_take(a, &ch, 1) == tm_gmatch_would_take(b, &ch, 1);
        }
        same &= tm_gmatch_feed(a, x + i, 1) == 1 && tm_gmatch_feed(b, x + i, 1) == 1;
        same &= tm_gmatch_accepting(a) == tm_gmatch_accepting(b);
    }
    CHECKF(same && tm_gmatch_accepting(b), "a matcher rebuilt every few configurations answers as one that is not");
    tm_tokenizer *t = NULL;
    tm_vocab_trie *trie = NULL;
    if (tm_tok_load(&t, tok_path, &err) == TM_OK && tm_vocab_trie_new(&trie, t, tm_tok_vocab_size(t), &err) == TM_OK) {
        int32_t V = tm_vocab_trie_V(trie);
        float *la = calloc((size_t)V, sizeof *la), *lb = calloc((size_t)V, sizeof *lb);
        tm_gmatch_free(a);
        tm_gmatch_free(b);
        tm_gmatch_new(&a, g, &err);
        tm_gmatch_new(&b, g, &err);
        tm_gmatch_set_limit(b, 3);
        int eq = 1;
        for (size_t i = 0; i < 12; i++) {
            memset(la, 0, sizeof *la * (size_t)V);
            memset(lb, 0, sizeof *lb * (size_t)V);
            tm_gmatch_mask(a, trie, la);
            tm_gmatch_mask(b, trie, lb);
            eq &= !memcmp(la, lb, sizeof *la * (size_t)V);
            tm_gmatch_feed(a, x + i, 1);
            tm_gmatch_feed(b, x + i, 1);
        }
        CHECKF(eq, "masks of a rebuilt matcher differ");
        free(la);
        free(lb);
    }
    tm_vocab_trie_free(trie);
    tm_tok_free(t);
    tm_gmatch_free(a);
    tm_gmatch_free(b);
    tm_grammar_free(g);

    /* depth: nesting past TM_GRAMMAR_MAX_DEPTH is refused, then closing what is open still works */
    const char *nest = "root ::= \"(\" root \")\" | \"x\"";
    CHECK(tm_grammar_parse(&g, nest, strlen(nest), &err) == TM_OK);
    tm_gmatch_new(&a, g, &err);
    int opened = 0;
    while (opened < 2 * TM_GRAMMAR_MAX_DEPTH && tm_gmatch_feed(a, "(", 1) == 1) opened++;
    CHECKF(opened >= TM_GRAMMAR_MAX_DEPTH - 2 && opened <= TM_GRAMMAR_MAX_DEPTH, "%d '(' taken", opened);
    int closed = tm_gmatch_feed(a, "x", 1) == 1;
    for (int i = 0; i < opened && closed; i++) closed = tm_gmatch_feed(a, ")", 1) == 1;
    CHECKF(closed && tm_gmatch_accepting(a) && !tm_gmatch_can_continue(a), "the nest did not close");
    tm_gmatch_free(a);
    tm_grammar_free(g);

    /* an ambiguous grammar: configurations of many stacks are refused rather than followed */
    const char *amb = "root ::= a*\na ::= \"x\" | \"x\" \"x\" | \"x\" a";
    CHECK(tm_grammar_parse(&g, amb, strlen(amb), &err) == TM_OK);
    tm_gmatch_new(&a, g, &err);
    int took = 0;
    for (int i = 0; i < 3000 && tm_gmatch_feed(a, "x", 1) == 1; i++) took++;
    CHECKF(took > 10, "the ambiguous grammar took %d bytes", took);
    tm_gmatch_free(a);
    tm_grammar_free(g);
}

int main(void)
{
    test_forms();
    test_errors();
    test_random(getenv("TM_SANITIZER") ? 150 : 600);
    const char *demo = "models/tiny-classics-llama/tokenizer.json";
    test_masks(demo, "demo", 12);
    char p[512];
    snprintf(p, sizeof p, "%s/conformance/tokenizers/qwen2/tokenizer.json", th_shared());
    test_masks(p, "qwen2", getenv("TM_SANITIZER") ? 2 : 6);
    snprintf(p, sizeof p, "%s/conformance/tokenizers/llama-spm/tokenizer.json", th_shared());
    test_masks(p, "llama-spm", getenv("TM_SANITIZER") ? 3 : 8);
    test_rebuild_and_bounds(demo);
    return th_done("test_grammar");
}
