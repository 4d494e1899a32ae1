/* tests/test_json_compact.c: a JSON value's compact text while it is written (text/json_compact.h).
 *
 * 1. Generated values (nested objects and arrays, duplicate keys, strings with every escape, \u
 *    escapes and surrogate pairs, raw multi-byte characters and raw control bytes, \u0000, numbers in
 *    every form cJSON reads, the literals; whitespace of every byte up to 32 between tokens): the
 *    whole text gives TM_JC_WHOLE, its length, and exactly cJSON_PrintUnformatted of cJSON's parse;
 *    every prefix gives TM_JC_MORE and a prefix of that.
 * 2. Mutated texts: where cJSON reads the mutation, the same; where it does not, the output for
 *    every prefix is still a prefix of the output for the whole (never more than is certain).
 * 3. Hand-picked texts: the forms cJSON prints differently from the text (1.0, 1e2, \/, \u00e9,
 *    1e999), what it refuses (TM_JC_BAD), and tm_json_escape_put against cJSON's printer. */
#include "harness.h"

#include <cjson/cJSON.h>

#include "core/status.h"
#include "text/json_compact.h"
#include "text/sampler.h"

typedef struct buf {
    char s[1 << 15];
    size_t n;
} buf;

static void put(buf *b, const char *s, size_t l)
{
    if (b->n + l < sizeof b->s) memcpy(b->s + b->n, s, l), b->n += l;
}

static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }

static int rnd(tm_rng *r, int n) { return (int)(tm_rng_next(r) % (uint64_t)n); }

static void ws(tm_rng *r, buf *b)
{
    static const char w[] = " \t\n\r\x01\x1f";
    for (int k = rnd(r, 4) == 0 ? rnd(r, 3) + 1 : 0; k > 0; k--) put(b, &w[rnd(r, 6)], 1);
}

static void gen_string(tm_rng *r, buf *b)
{
    static const char *const pieces[] = {"a", "Z", " ", "\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t",
                                         "\\u00e9", "\\u00E9", "\\u20AC", "\\ud83d\\ude00", "\\uD834\\uDD1E",
                                         "\\u001f", "\\u007f", "é", "€", "😀", "\x7f", "\t", "\x01", "/", "{", "}",
                                         ":", ",", "[", "]", "'", "\\u0041"};
    puts_(b, "\"");
    for (int k = rnd(r, 7); k > 0; k--) puts_(b, pieces[rnd(r, sizeof pieces / sizeof pieces[0])]);
    if (rnd(r, 40) == 0) puts_(b, "\\u0000tail"); /* cJSON's string ends at the NUL */
    puts_(b, "\"");
}

static void gen_value(tm_rng *r, buf *b, int depth)
{
    static const char *const nums[] = {"0", "-0", "1", "-17", "1.0", "1.50", "0.1", "1e2", "1E+2", "-2.5e-3",
                                       "123456789012", "3.14159265358979323846", "1e999", "-1e999", "2147483648",
                                       "-2147483649", "0.30000000000000004", "9007199254740993", "01", "1.", "-.5e1"};
    int k = depth == 0 ? 6 + rnd(r, 3) : rnd(r, depth > 4 ? 6 : 9); /* a container at the top: a number that ends
                                                                          the text may go on */
    ws(r, b);
    if (k < 2) {
        puts_(b, nums[rnd(r, sizeof nums / sizeof nums[0])]);
    } else if (k < 4) {
        gen_string(r, b);
    } else if (k < 6) {
        static const char *const lits[] = {"true", "false", "null"};
        puts_(b, lits[rnd(r, 3)]);
    } else if (k < 8) {
        static const char *const keys[] = {"\"a\"", "\"b\"", "\"city\"", "\"a\"", "\"\\u00e9t\\u00e9\"", "\"\""};
        puts_(b, "{");
        for (int m = rnd(r, 4), i = 0; i < m; i++) {
            if (i) puts_(b, ",");
            ws(r, b);
            if (rnd(r, 3)) puts_(b, keys[rnd(r, 6)]);
            else gen_string(r, b);
            ws(r, b);
            puts_(b, ":");
            gen_value(r, b, depth + 1);
            ws(r, b);
        }
        ws(r, b);
        puts_(b, "}");
    } else {
        puts_(b, "[");
        for (int m = rnd(r, 4), i = 0; i < m; i++) {
            if (i) puts_(b, ",");
            gen_value(r, b, depth + 1);
            ws(r, b);
        }
        ws(r, b);
        puts_(b, "]");
    }
}

/* cJSON's compact print of the value at s [n] (trailing bytes allowed), its end in *end; NULL if it refuses */
static char *cjson_compact(const char *s, size_t n, size_t *end)
{
    const char *e = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(s, n, &e, 0);
    char *t = v ? cJSON_PrintUnformatted(v) : NULL;
    if (v) *end = (size_t)(e - s);
    cJSON_Delete(v);
    return t;
}

static int is_prefix(const tm_jbuf *o, const char *whole)
{
    size_t n = o->n;
    return n <= strlen(whole) && !memcmp(o->p ? o->p : "", whole, n);
}

/* every prefix of s [n] (cJSON prints the whole as want, or want NULL): MORE and a prefix of want (or of
 * what the whole gives); the whole WHOLE with want, used == end. Counted as one check. */
static int check_text(const char *s, size_t n, const char *want, size_t end)
{
    tm_jbuf whole = {0};
    size_t used = 0;
    int rc = tm_json_compact(s, n, &whole, &used);
    int ok = 1;
    if (want) ok = rc == TM_JC_WHOLE && used == end && whole.n == strlen(want) && !memcmp(whole.p, want, whole.n);
    const char *ref = want ? want : whole.p ? whole.p : "";
    size_t stop = want ? end : n;
    for (size_t k = 0; ok && k < stop; k++) {
        tm_jbuf o = {0};
        size_t u = 0;
        int r = tm_json_compact(s, k, &o, &u);
        if (want && r != TM_JC_MORE) ok = 0;
        if (r != TM_JC_BAD && !is_prefix(&o, ref)) ok = 0;
        if (!want && r == TM_JC_BAD && !is_prefix(&o, ref)) ok = 0;
        free(o.p);
    }
    if (!ok) fprintf(stderr, "text [%zu]: %.*s\n  rc %d out %s\n  want %s\n", n, (int)n, s, rc, whole.p ? whole.p : "", want ? want : "-");
    free(whole.p);
    return ok;
}

static void test_generated(void)
{
    tm_rng r;
    tm_rng_seed(&r, 1234);
    int good = 0, total = 0;
    for (int it = 0; it < 3000; it++) {
        buf b = {0};
        gen_value(&r, &b, 0);
        size_t vend = b.n;
        if (rnd(&r, 3) == 0) puts_(&b, rnd(&r, 2) ? " ,\"x\":1}" : "<tool_call_end>"); /* what follows the value */
        size_t end = 0;
        char *want = cjson_compact(b.s, b.n, &end);
        if (!want) continue; /* a generated form cJSON refuses ("01" is read, "1." and "-.5e1" are not) */
        total++;
        good += end == vend && check_text(b.s, b.n, want, end);
        free(want);
    }
    CHECKF(total > 1500, "only %d of 3000 generated values read by cJSON", total);
    CHECK_EQ_INT(good, total);
}

static void test_mutated(void)
{
    tm_rng r;
    tm_rng_seed(&r, 99);
    int good = 0;
    const int N = 2000;
    for (int it = 0; it < N; it++) {
        buf b = {0};
        puts_(&b, "{");
        gen_string(&r, &b);
        puts_(&b, ":");
        gen_value(&r, &b, 1);
        puts_(&b, "}");
        for (int m = rnd(&r, 3) + 1; m > 0 && b.n; m--) {
            static const char bytes[] = "{}[]:,\"\\u01e.-+ tn";
            size_t at = (size_t)rnd(&r, (int)b.n);
            if (rnd(&r, 2)) b.s[at] = bytes[rnd(&r, (int)sizeof bytes - 1)];
            else memmove(b.s + at, b.s + at + 1, b.n - at - 1), b.n--;
        }
        size_t end = 0;
        char *want = cjson_compact(b.s, b.n, &end);
        good += check_text(b.s, b.n, want, end);
        free(want);
    }
    CHECK_EQ_INT(good, N);
}

static void expect(const char *s, int rc_want, const char *out_want)
{
    tm_jbuf o = {0};
    size_t used = 0;
    int rc = tm_json_compact(s, strlen(s), &o, &used);
    CHECKF(rc == rc_want && !strcmp(o.p ? o.p : "", out_want), "%s: rc %d (want %d), out '%s' (want '%s')", s, rc,
           rc_want, o.p ? o.p : "", out_want);
    free(o.p);
}

static void test_hand(void)
{
    expect("{\"a\": 1.0, \"b\" : [1e2, -0, true]}", TM_JC_WHOLE, "{\"a\":1,\"b\":[100,-0,true]}");
    expect("{\"a\":\"\\u00e9\\/x\"}", TM_JC_WHOLE, "{\"a\":\"é/x\"}");
    expect("\"\\ud83d\\ude00\"", TM_JC_WHOLE, "\"😀\"");
    expect("{\"a\":\"x\\u0000y\",\"b\":2}", TM_JC_WHOLE, "{\"a\":\"x\",\"b\":2}");
    expect("[1e999]", TM_JC_WHOLE, "[null]");
    expect("{\"a\":1", TM_JC_MORE, "{\"a\":"); /* the number may go on */
    expect("{\"a\":12 ", TM_JC_MORE, "{\"a\":12");
    expect("{\"a\":\"x\\", TM_JC_MORE, "{\"a\":\"x");
    expect("{\"a\":\"x\\u00", TM_JC_MORE, "{\"a\":\"x");
    expect("{\"a\":\"\\ud83d", TM_JC_MORE, "{\"a\":\"");
    expect("{\"a\":\"\\ud83d\\u", TM_JC_MORE, "{\"a\":\"");
    expect("{\"a\":tru", TM_JC_MORE, "{\"a\":");
    expect("  \n", TM_JC_MORE, "");
    expect("{\"a\":trux}", TM_JC_BAD, "{\"a\":");
    expect("[1,]", TM_JC_BAD, "[1,");
    expect("{\"a\" 1}", TM_JC_BAD, "{\"a\"");
    expect("{\"a\":\"\\ud83dx\"}", TM_JC_BAD, "{\"a\":\"");
    expect("{\"a\":\"\\ude00\"}", TM_JC_BAD, "{\"a\":\"");
    expect("{\"a\":\"\\x\"}", TM_JC_BAD, "{\"a\":\"");
    expect("{\"a\":1-2}", TM_JC_BAD, "{\"a\":");
    expect("{'a':1}", TM_JC_BAD, "{");
    expect("+1", TM_JC_BAD, "");
    expect("{\"a\":{}} tail", TM_JC_WHOLE, "{\"a\":{}}");
    /* nesting: cJSON reads 1000 levels, not 1001 */
    char deep[2 * 1001 + 1];
    for (int d = 1000; d <= 1001; d++) {
        memset(deep, '[', (size_t)d);
        memset(deep + d, ']', (size_t)d);
        deep[2 * d] = '\0';
        tm_jbuf o = {0};
        size_t used = 0, end = 0;
        char *want = cjson_compact(deep, strlen(deep), &end);
        int rc = tm_json_compact(deep, strlen(deep), &o, &used);
        CHECKF(want ? rc == TM_JC_WHOLE && !strcmp(o.p, want) : rc == TM_JC_BAD, "depth %d: rc %d, cJSON %s", d, rc,
               want ? "reads it" : "refuses it");
        free(want);
        free(o.p);
    }
    /* the escaper against cJSON's printer, every byte */
    char raw[256];
    for (int c = 1; c < 256; c++) raw[c - 1] = (char)c;
    raw[255] = '\0';
    cJSON *str = cJSON_CreateString(raw);
    char *printed = cJSON_PrintUnformatted(str);
    tm_jbuf o = {0};
    CHECK(tm_jbuf_put(&o, "\"", 1) == TM_OK && tm_json_escape_put(&o, raw, 255) == TM_OK && tm_jbuf_put(&o, "\"", 1) == TM_OK);
    CHECK(printed && o.p && !strcmp(printed, o.p));
    free(o.p);
    o = (tm_jbuf){0};
    CHECK(tm_json_escape_put(&o, "ab\0cd", 5) == TM_OK && o.n == 2); /* a NUL ends it, as it ends cJSON's strings */
    free(o.p);
    free(printed);
    cJSON_Delete(str);
}

int main(void)
{
    test_hand();
    test_generated();
    test_mutated();
    printf("test_json_compact: %d passed, %d failed\n", th_pass, th_fail);
    return th_fail != 0;
}
