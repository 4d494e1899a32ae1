/* tests/test_json_gate.c: JSON mode (text/json_gate.h).
 *
 * 1. The automaton on random JSON objects (nested containers, strings with
 *    every escape and multi-byte characters, numbers in every form, the
 *    literals, whitespace): every prefix is taken, the whole is done, and
 *    cJSON parses it to the same value count; on hand-picked texts that JSON
 *    refuses (leading zeros, trailing commas, bad escapes, invalid UTF-8,
 *    a top level that is not an object, ...); and on mutated texts: whatever
 *    the automaton takes whole and calls done, cJSON parses as an object.
 * 2. The masks against brute force: in states reached along random objects,
 *    tm_json_mask allows exactly the tokens whose bytes the automaton takes
 *    one by one, for the demo model's byte-level vocabulary and the
 *    conformance tokenizers (Qwen2's 151k, SentencePiece with byte fallback). */
#include "harness.h"

#include <cjson/cJSON.h>

#include "text/json_gate.h"
#include "text/sampler.h"
#include "text/tokenizer.h"
#include "text/vocab_trie.h"

/* ---- random objects ---- */

typedef struct buf {
    char s[1 << 16];
    size_t n;
} buf;

static void put(buf *b, const char *s)
{
    size_t l = strlen(s);
    if (b->n + l < sizeof b->s) memcpy(b->s + b->n, s, l), b->n += l;
    b->s[b->n] = 0;
}

static int rnd(tm_rng *r, int n) { return (int)(tm_rng_next(r) % (uint64_t)n); }

static void ws(tm_rng *r, buf *b)
{
    static const char *const w[] = {"", "", "", " ", "\n", "\n  ", "\t", "\r\n    ", "\r \t"};
    put(b, w[rnd(r, 9)]);
}

static void gen_string(tm_rng *r, buf *b)
{
    static const char *const parts[] = {"a", "key", " ", "\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t",
                                        "\\u00e9", "\\uD83D\\uDE00", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                                        "\xed\x9f\xbf", "\xf4\x8f\xbf\xbf", "0", "{", "]", ":", ","};
    put(b, "\"");
    for (int i = rnd(r, 6); i > 0; i--) put(b, parts[rnd(r, (int)(sizeof parts / sizeof *parts))]);
    put(b, "\"");
}

static void gen_value(tm_rng *r, buf *b, int depth, int *count);

static void gen_container(tm_rng *r, buf *b, int object, int depth, int *count)
{
    put(b, object ? "{" : "[");
    int n = depth > 6 ? 0 : rnd(r, 4);
    for (int i = 0; i < n; i++) {
        if (i) put(b, ",");
        ws(r, b);
        if (object) {
            gen_string(r, b);
            ws(r, b);
            put(b, ":");
            ws(r, b);
        }
        gen_value(r, b, depth + 1, count);
        ws(r, b);
    }
    if (!n) ws(r, b);
    put(b, object ? "}" : "]");
}

static void gen_value(tm_rng *r, buf *b, int depth, int *count)
{
    static const char *const nums[] = {"0", "-0", "7", "-12", "3.25", "0.5e10", "1E+2", "-4e-07", "123456789012", "9.0E0"};
    static const char *const lit[] = {"true", "false", "null"};
    ++*count;
    switch (rnd(r, 6)) {
    case 0: gen_container(r, b, 1, depth, count); break;
    case 1: gen_container(r, b, 0, depth, count); break;
    case 2: gen_string(r, b); break;
    case 3: put(b, nums[rnd(r, 10)]); break;
    case 4: put(b, lit[rnd(r, 3)]); break;
    default: put(b, nums[rnd(r, 10)]); put(b, ""); break;
    }
}

static int count_values(const cJSON *j)
{
    int n = 1;
    for (const cJSON *c = j->child; c; c = c->next) n += count_values(c);
    return n;
}

/* the automaton over s [n]: -1 if every byte is taken and it is done, else the first byte refused
 * (n when all are taken but the object is not closed) */
static long run(const char *s, size_t n)
{
    tm_jsm m;
    tm_jsm_init(&m);
    for (size_t i = 0; i < n; i++)
        if (!tm_jsm_feed(&m, (unsigned char)s[i])) return (long)i;
    return tm_jsm_done(&m) ? -1 : (long)n;
}

static void test_automaton(void)
{
    tm_rng r;
    tm_rng_seed(&r, 38);
    buf b;
    int bad_whole = 0, bad_cjson = 0, mutated_ok = 0, mutated_bad = 0;
    for (int it = 0; it < 3000; it++) {
        b.n = 0;
        int count = 0;
        ws(&r, &b);
        gen_container(&r, &b, 1, 0, &count);
        if (run(b.s, b.n) != -1) {
            if (bad_whole++ < 3) fprintf(stderr, "refused at %ld: %s\n", run(b.s, b.n), b.s);
            continue;
        }
        cJSON *j = cJSON_ParseWithLength(b.s, b.n);
        if (!j || !cJSON_IsObject(j) || count_values(j) != count + 1) bad_cjson++;
        cJSON_Delete(j);
        /* a mutation: whatever is taken whole and done parses as an object */
        buf mu = b;
        size_t at = (size_t)rnd(&r, (int)b.n);
        static const char subst[] = "{}[],:\"\\ 0123-+.eEtfnu\x01\x80\xc3\xed\xf5";
        mu.s[at] = subst[rnd(&r, (int)sizeof subst - 1)];
        if (rnd(&r, 3) == 0) { /* or a byte dropped */
            memmove(mu.s + at, mu.s + at + 1, mu.n - at);
            mu.n--;
        }
        if (run(mu.s, mu.n) == -1) {
            cJSON *k = cJSON_ParseWithLength(mu.s, mu.n);
            if (k && cJSON_IsObject(k)) mutated_ok++;
            else if (mutated_bad++ < 4) fprintf(stderr, "taken, but cJSON refuses: %.*s\n", (int)mu.n, mu.s);
            cJSON_Delete(k);
        }
    }
    CHECKF(bad_whole == 0, "%d random objects refused", bad_whole);
    CHECKF(bad_cjson == 0, "%d taken objects cJSON reads otherwise", bad_cjson);
    CHECKF(mutated_bad == 0 && mutated_ok > 100, "mutations: %d taken and parsed, %d taken but not JSON objects",
           mutated_ok, mutated_bad);

    /* by hand: refused (the index of the first byte refused), and taken */
    static const struct {
        const char *s;
        long at;
    } refused[] = {
        {"[1]", 0},                   {"\"a\"", 0},              {"1", 0},                 {"{\"a\":01}", 6},
        {"{\"a\":1.}", 7},            {"{\"a\":.5}", 5},         {"{\"a\":-}", 6},         {"{\"a\":1e}", 7},
        {"{\"a\":[1,]}", 8},          {"{,}", 1},                {"{\"a\" 1}", 5},         {"{\"a\":1,}", 7},
        {"{\"a\":\"\\x\"}", 7},       {"{\"a\":\"\\u12G4\"}", 10}, {"{\"a\":\"\x01\"}", 6},  {"{\"a\":\"\xc0\x80\"}", 6},
        {"{\"a\":\"\xed\xa0\x80\"}", 7}, {"{\"a\":\"\xf4\x90\x80\x80\"}", 7}, {"{\"a\":\"\xe0\x80\xbf\"}", 7},
        {"{\"a\":tru}", 8},           {"{\"a\":nul}", 8},        {"{\"a\":[}", 6},         {"{\"a\":{]}", 6},
        {"{a:1}", 1},                 {"{\"a\":1}}", 7},         {"{\"a\":1} ", 7},        {"{\"a\":+1}", 5},
        {"{\"a\":-01}", 7},           {"{\"a\":1.5.2}", 8},      {"{\"a\":\"b\"\"c\"}", 8},
        {"{\"a\":\"\\uDC00\"}", 9},   {"{\"a\":\"\\uD800x\"}", 12}, {"{\"a\":\"\\uD800\\u0041\"}", 14},
        {"{\"a\":\"\\uD800\\uD800\"}", 15},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        long at = run(refused[i].s, strlen(refused[i].s));
        CHECKF(at == refused[i].at, "'%s': refused at %ld, want %ld", refused[i].s, at, refused[i].at);
    }
    static const char *const taken[] = {
        "{}", " \n{ } ", "{\"\":0}", "{\"a\":-0.0e-0}", "{\"a\":[[],{},\"\",0,true,false,null]}",
        "{\"k\\u0041\":\"\\ud83d\\ude00\xf0\x9f\x98\x80\xef\xbf\xbf\"}", "{\"a\":1E5,\"b\":2e+3}",
    };
    for (size_t i = 0; i < sizeof taken / sizeof *taken; i++) {
        const char *s = taken[i];
        size_t n = strlen(s);
        while (n && s[n - 1] == ' ') n--; /* nothing after the object is taken: stop there */
        CHECKF(run(s, n) == -1, "'%s' refused at %ld", s, run(s, n));
    }
    /* the limits: 64 containers deep, 64 whitespace bytes in a row; closing stays possible */
    buf d = {.n = 0};
    put(&d, "{\"a\":");
    for (int i = 1; i < TM_JSM_MAX_DEPTH; i++) put(&d, "[");
    CHECK(run(d.s, d.n) == (long)d.n);
    put(&d, "[");
    CHECK(run(d.s, d.n) == (long)d.n - 1);
    d.n--;
    for (int i = 1; i < TM_JSM_MAX_DEPTH; i++) put(&d, "]");
    put(&d, "}");
    CHECK(run(d.s, d.n) == -1);
    buf w = {.n = 0};
    put(&w, "{");
    for (int i = 0; i < TM_JSM_MAX_WS; i++) put(&w, i == 0 ? "\n" : i % 2 ? " " : "\t");
    CHECK(run(w.s, w.n) == (long)w.n);
    put(&w, " ");
    CHECK(run(w.s, w.n) == (long)w.n - 1);
    /* one line break a run: "\n", "\r\n" or "\r" */
    CHECK(run("{\n\n", 3) == 2);
    CHECK(run("{\r\n\r", 4) == 3);
    CHECK(run("{\r \n", 4) == 3);
    CHECK(run("{ \r\n  \"a\"\n:\r1\n}", 15) == -1);
    /* whitespace inside a string does not count */
    buf q = {.n = 0};
    put(&q, "{\"");
    for (int i = 0; i < 200; i++) put(&q, " ");
    put(&q, "\":1}");
    CHECK(run(q.s, q.n) == -1);
}

/* ---- masks against brute force ---- */

static void test_masks(const char *path, const char *name, int states)
{
    tm_err err = {0};
    tm_tokenizer *t = NULL;
    CHECKF(tm_tok_load(&t, path, &err) == TM_OK, "%s: %s", name, err.msg);
    if (!t) return;
    int32_t V = tm_tok_vocab_size(t);
    tm_vocab_trie *jv = NULL;
    CHECKF(tm_vocab_trie_new(&jv, t, V, &err) == TM_OK, "%s: %s", name, err.msg);
    float *lg = malloc(sizeof(float) * (size_t)V);
    tm_rng r;
    tm_rng_seed(&r, 7);
    int checked = 0, wrong = 0, total_allowed = 0;
    buf b;
    while (jv && checked < states) {
        b.n = 0;
        int count = 0;
        gen_container(&r, &b, 1, 0, &count);
        tm_jsm m;
        tm_jsm_init(&m);
        /* a few states along this object */
        for (size_t i = 0; i <= b.n && checked < states; i++) {
            if (rnd(&r, (int)b.n / 3 + 1) == 0 || i == 0) {
                for (int32_t k = 0; k < V; k++) lg[k] = 0;
                tm_json_mask(jv, &m, lg);
                for (int32_t k = 0; k < V; k++) {
                    tm_jsm c = m;
                    int take = tm_json_advance(jv, &c, k);
                    int allowed = lg[k] == 0;
                    total_allowed += allowed;
                    if (take != allowed && wrong++ < 5)
                        fprintf(stderr, "%s: state after %zu bytes of %s: token %d allowed %d, taken %d\n", name, i, b.s,
                                k, allowed, take);
                }
                checked++;
            }
            if (i < b.n) tm_jsm_feed(&m, (unsigned char)b.s[i]);
        }
    }
    CHECKF(wrong == 0 && checked == states, "%s: %d masks, %d tokens allowed against the automaton's %s", name, checked,
           wrong, "bytes");
    CHECKF(total_allowed > checked, "%s: the masks allowed %d tokens in %d states", name, total_allowed, checked);
    /* special tokens never */
    for (int32_t k = 0; jv && k < V; k++)
        if (tm_tok_is_special(t, k)) {
            tm_jsm m;
            tm_jsm_init(&m);
            CHECK(!tm_json_advance(jv, &m, k));
        }
    free(lg);
    tm_vocab_trie_free(jv);
    tm_tok_free(t);
}

int main(void)
{
    test_automaton();
    test_masks("models/tiny-classics-llama/tokenizer.json", "demo", 60);
    char p[512];
    snprintf(p, sizeof p, "%s/conformance/tokenizers/qwen2/tokenizer.json", th_shared());
    test_masks(p, "qwen2", getenv("TM_SANITIZER") ? 4 : 12);
    snprintf(p, sizeof p, "%s/conformance/tokenizers/llama-spm/tokenizer.json", th_shared());
    test_masks(p, "llama-spm", getenv("TM_SANITIZER") ? 6 : 20);
    return th_done("test_json_gate");
}
