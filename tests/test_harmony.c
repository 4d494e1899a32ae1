/* tests/test_harmony.c: gpt-oss's harmony replies (text/harmony.h) and the special tokens they need
 * kept in the text.
 *
 * 1. The parser on replies of every shape: analysis then final, a call with its recipient after
 *    the channel (as the model writes it) and before it (as the template does), a preamble, two
 *    messages of one kind, a message without its end, a built-in tool's recipient, a reply cut
 *    inside a header, a reply that never used the format, markers' look-alikes in a body.
 * 2. The stream: on those and on random replies built from markers, their pieces and words, fed
 *    byte by byte and in random pieces, reasoning and content only ever grow (each feed's buffers
 *    are prefixes of the final ones) and end equal to one feed of the whole reply.
 * 3. Calls held to the tools (tm_tool_parse with the harmony dialect): undeclared tools and
 *    arguments that are not an object leave their text to the answer; a reply cut short drops an
 *    unclosed last call and keeps a closed one.
 * 4. The forced grammar: one call, after gen_open, name then <|constrain|>json<|message|> then
 *    arguments held to the schema; what it takes parses back into the call.
 * 5. gpt-oss's real template (tests/data/chat_templates): detected as harmony (no other real
 *    template is); an assistant turn with reasoning and a call, rendered, reads back as the same.
 * 6. Special tokens kept: tm_tok_decode_keep and the streaming detokenizer keep the ids asked for
 *    and drop the others (a conformance tokenizer); through a session on the demo model, the
 *    request's keep_special puts a special token's text in the output, and a grammar writes it as
 *    that one token. */
#include "harness.h"

#include <stdint.h>

#include <cjson/cJSON.h>

#include "grammar_util.h"
#include "text/grammar.h"
#include "text/harmony.h"
#include "text/jinja.h"
#include "text/tokenizer.h"
#include "text/toolcall.h"
#include "tandem.h"

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather in a city\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"],"
    "\"additionalProperties\":false}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"add\",\"description\":\"a + b\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},\"required\":[\"a\",\"b\"]}}}]";

/* the calls of h as "to body|to body" */
static void calls_str(const tm_harmony *h, char *out, size_t size)
{
    out[0] = '\0';
    for (int i = 0; i < h->n_calls; i++) {
        size_t k = strlen(out);
        snprintf(out + k, size - k, "%s%s %.*s", i ? "|" : "", h->calls[i].to, (int)h->calls[i].blen,
                 h->calls[i].body ? h->calls[i].body : "");
    }
}

static const char *or_empty(const char *s) { return s ? s : ""; }

static void hcase(const char *text, int reasons, const char *want_r, const char *want_c, const char *want_calls)
{
    tm_harmony h;
    tm_harmony_init(&h, reasons);
    CHECK(tm_harmony_feed(&h, text, strlen(text), 1) == 0);
    char calls[1024];
    calls_str(&h, calls, sizeof calls);
    CHECKF(!strcmp(or_empty(h.reasoning), want_r) && h.rlen == strlen(want_r), "%s: reasoning '%s', expected '%s'",
           text, or_empty(h.reasoning), want_r);
    CHECKF(!strcmp(or_empty(h.content), want_c) && h.clen == strlen(want_c), "%s: content '%s', expected '%s'", text,
           or_empty(h.content), want_c);
    CHECKF(!strcmp(calls, want_calls), "%s: calls '%s', expected '%s'", text, calls, want_calls);
    tm_harmony_free(&h);
}

static void stream_check(const char *text, int bytewise);

static void test_parse(void)
{
    const char *af = "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Four.";
    hcase(af, 1, "Think.", "Four.", "");
    hcase(af, 0, "", "Think.\n\nFour.", "");
    hcase("<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Four.<|return|>", 1,
          "Think.", "Four.", "");
    hcase("<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
          "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}",
          1, "Need the weather.", "", "get_weather {\"city\":\"Paris\"}");
    hcase(" to=functions.add<|channel|>commentary json<|message|>{\"a\":1,\"b\":2}<|call|>", 1, "", "",
          "add {\"a\":1,\"b\":2}");
    hcase("<|channel|>commentary<|message|>Let me check.<|end|><|start|>assistant<|channel|>final<|message|>Done.", 1,
          "", "Let me check.\n\nDone.", "");
    hcase("<|channel|>analysis<|message|>A<|end|><|start|>assistant<|channel|>analysis<|message|>B<|end|>", 1, "A\n\nB",
          "", "");
    hcase("<|channel|>analysis<|message|>x<|start|>assistant<|channel|>final<|message|>y", 1, "x", "y", "");
    hcase("<|channel|>analysis<|message|>x<|channel|>final<|message|>y", 1, "x", "y", "");
    hcase("<|channel|>analysis<|message|>q<|end|><|start|>assistant<|channel|>analysis to=browser.search code"
          "<|message|>{\"query\":\"x\"}<|call|>",
          1, "q", "", "browser.search {\"query\":\"x\"}");
    hcase("<|channel|>analysis<|message|>Hm.<|end|><|start|>assistant<|channel|>fin", 1, "Hm.", "", "");
    hcase("Hello world, no format at all.", 1, "", "Hello world, no format at all.", "");
    hcase("<|channel|>final<|message|>a < b <| c <|end", 1, "", "a < b <| c <|end", "");
    hcase("<|channel|>final<|message|>", 1, "", "", "");
    hcase("", 1, "", "", "");
    char big[700];
    memset(big, 'a', 600);
    big[600] = '\0';
    hcase(big, 1, "", big, "");
    /* a header past the limit is no header: all of it answer (once looped for ever) */
    char lh[800], lc[800];
    snprintf(lh, sizeof lh, "<|channel|>%s<|message|>x<|end|>", big);
    snprintf(lc, sizeof lc, "<|channel|>%s<|message|>x", big); /* (the markers after it still end its message) */
    hcase(lh, 1, "", lc, "");
    stream_check(lh, 1);
    /* text, a marker that only opens a header, text again: all answer as written, nothing added */
    char two[1600];
    snprintf(two, sizeof two, "%s<|start|>%s", big, big);
    hcase(two, 1, "", two, "");
}

/* random replies from pieces */
static uint64_t rs = 0x9E3779B97F4A7C15ull;
static unsigned rnd(unsigned n)
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (unsigned)(rs % n);
}

/* feed text in pieces (cuts at random, or every byte): the buffers only grow, and end as one feed's */
static void stream_check(const char *text, int bytewise)
{
    size_t len = strlen(text);
    tm_harmony one, h;
    tm_harmony_init(&one, 1);
    tm_harmony_init(&h, 1);
    CHECK(tm_harmony_feed(&one, text, len, 1) == 0);
    CHECKF(one.clen + one.rlen <= len, "%s: %zu + %zu bytes out of %zu", text, one.clen, one.rlen, len);
    size_t at = 0;
    int ok = 1;
    while (at < len && ok) {
        at += bytewise ? 1 : 1 + rnd(9);
        if (at > len) at = len;
        CHECK(tm_harmony_feed(&h, text, at, 0) == 0);
        ok = h.rlen <= one.rlen && h.clen <= one.clen && (!h.rlen || !memcmp(h.reasoning, one.reasoning, h.rlen)) &&
             (!h.clen || !memcmp(h.content, one.content, h.clen));
        CHECKF(ok, "%s: at %zu: reasoning '%s' / '%s', content '%s' / '%s'", text, at, or_empty(h.reasoning),
               or_empty(one.reasoning), or_empty(h.content), or_empty(one.content));
    }
    CHECK(tm_harmony_feed(&h, text, len, 1) == 0);
    char c1[2048], c2[2048];
    calls_str(&one, c1, sizeof c1);
    calls_str(&h, c2, sizeof c2);
    CHECKF(!strcmp(or_empty(h.reasoning), or_empty(one.reasoning)) && !strcmp(or_empty(h.content), or_empty(one.content)) &&
               !strcmp(c1, c2) && h.n_calls == one.n_calls,
           "%s: streamed '%s' '%s' '%s', whole '%s' '%s' '%s'", text, or_empty(h.reasoning), or_empty(h.content), c2,
           or_empty(one.reasoning), or_empty(one.content), c1);
    tm_harmony_free(&one);
    tm_harmony_free(&h);
}

static void test_stream(void)
{
    static const char *const fixed[] = {
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Four.<|return|>",
        "<|channel|>analysis<|message|>Need it.<|end|><|start|>assistant<|channel|>commentary to=functions.add "
        "<|constrain|>json<|message|>{\"a\":1,\"b\":2}",
        "<|channel|>final<|message|>a < b <| c <|en",
        "plain text <| with < marks",
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        stream_check(fixed[i], 1);
        stream_check(fixed[i], 0);
    }
    static const char *const pieces[] = {"<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|call|>", "<|return|>",
                                         "<|constrain|>", "analysis", "final", "commentary", " to=functions.add",
                                         "assistant", " json", "{\"a\":1}", "<|", "<|mess", "<", "|", "word ", "\n",
                                         "é", "<|en", "a long run of words, longer than any header could be, ",
                                         "and more words again, to pass the header's limit of five hundred and twelve"};
    char text[2048];
    for (int r = 0; r < 3000; r++) {
        text[0] = '\0';
        int n = (int)rnd(40);
        for (int k = 0; k < n; k++) {
            const char *p = pieces[rnd(sizeof pieces / sizeof pieces[0])];
            if (strlen(text) + strlen(p) < sizeof text) strcat(text, p);
        }
        stream_check(text, r & 1);
    }
}

static void pcase(const char *text, int cut, const char *want_calls, const char *want_content)
{
    const tm_tool_dialect *d = tm_tool_dialect_named("harmony");
    tm_tool_calls c;
    tm_err e = {0};
    CHECKF(d && tm_tool_parse(d, text, strlen(text), TOOLS, cut, &c, &e) == TM_OK, "%s", e.msg);
    if (!d) return;
    char got[1024] = "";
    for (int i = 0; i < c.n; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s %s", i ? "|" : "", c.v[i].name, c.v[i].arguments);
    CHECKF(!strcmp(got, want_calls) && !strcmp(c.content, want_content) && strlen(c.content) == c.content_len,
           "%s: calls '%s' content '%s', expected '%s' '%s'", text, got, c.content, want_calls, want_content);
    tm_tool_calls_free(&c);
}

static void test_calls(void)
{
    const char *pre = "<|channel|>analysis<|message|>Hm.<|end|><|start|>assistant";
    char t[512];
    snprintf(t, sizeof t, "%s<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
             "{\"city\": \"Paris\"}", pre);
    pcase(t, 0, "get_weather {\"city\":\"Paris\"}", "");
    pcase(t, 1, "", ""); /* cut inside its arguments: no call */
    snprintf(t, sizeof t, "%s<|channel|>commentary to=functions.get_weather json<|message|>{\"city\":\"Oslo\"}<|call|>",
             pre);
    pcase(t, 1, "get_weather {\"city\":\"Oslo\"}", ""); /* closed: kept */
    snprintf(t, sizeof t, "%s<|channel|>commentary to=functions.fly <|constrain|>json<|message|>{\"to\":\"Rome\"}", pre);
    pcase(t, 0, "", "{\"to\":\"Rome\"}");
    snprintf(t, sizeof t, "<|channel|>final<|message|>Sure.<|end|><|start|>assistant<|channel|>commentary "
             "to=functions.add json<|message|>[1, 2]");
    pcase(t, 0, "", "Sure.\n\n[1, 2]");
    pcase("<|channel|>final<|message|>Just text.", 0, "", "Just text.");
    /* no tools: no calls */
    tm_tool_calls c;
    tm_err e = {0};
    snprintf(t, sizeof t, "<|channel|>commentary to=functions.add json<|message|>{\"a\":1,\"b\":2}");
    CHECK(tm_tool_parse(tm_tool_dialect_named("harmony"), t, strlen(t), NULL, 0, &c, &e) == TM_OK && c.n == 0 &&
          !strcmp(c.content, "{\"a\":1,\"b\":2}"));
    tm_tool_calls_free(&c);
    CHECK(tm_tool_safe_prefix(tm_tool_dialect_named("harmony"), t, strlen(t)) == 0);
}


static void test_grammar(void)
{
    const tm_tool_dialect *d = tm_tool_dialect_named("harmony");
    char *src = NULL;
    tm_err e = {0};
    tm_grammar *g = NULL;
    CHECKF(tm_tool_grammar(d, TOOLS, NULL, 1, 0, &src, &e) == TM_OK && tm_grammar_parse(&g, src, strlen(src), &e) == TM_OK,
           "%s", e.msg);
    if (!g) return;
    const char *yes = "get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}";
    CHECK(th_takes(g, yes) == 1);
    CHECK(th_takes(g, "add <|constrain|>json<|message|>{\"a\":1,\"b\":2}") == 1);
    CHECK(th_takes(g, "fly <|constrain|>json<|message|>{}") == 0);
    CHECK(th_takes(g, "add <|constrain|>json<|message|>{\"a\":\"x\",\"b\":2}") == 0);
    CHECK(th_takes(g, "get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}add <|constrain|>json<|message|>{\"a\":1,"
                   "\"b\":2}") == 0); /* one call a reply, parallel or not */
    char full[256];
    snprintf(full, sizeof full, "%s%s", d->gen_open, yes);
    pcase(full, 0, "get_weather {\"city\":\"Paris\"}", "");
    tm_grammar_free(g);
    free(src);
    /* one function named */
    CHECK(tm_tool_grammar(d, TOOLS, "add", 0, 0, &src, &e) == TM_OK && tm_grammar_parse(&g, src, strlen(src), &e) == TM_OK);
    if (g) CHECK(th_takes(g, yes) == 0 && th_takes(g, "add <|constrain|>json<|message|>{\"a\":1,\"b\":2}") == 1);
    tm_grammar_free(g);
    free(src);
}

static void test_template(void)
{
    char *src = th_slurp("tests/data/chat_templates/openai-gpt-oss-120b.jinja");
    CHECK(src != NULL);
    if (!src) return;
    const tm_tool_dialect *d = tm_tool_dialect_detect(src);
    CHECKF(tm_harmony_detect(src) && d && d->harmony, "%s", d ? d->name : "none");
    static const char *const others[] = {"ByteDance-Seed-OSS", "GLM-4.6", "GLM-4.7-Flash", "HuggingFaceTB-SmolLM3-3B",
                                         "LFM2.5-Instruct", "MiniMax-M2", "Mistral-Small-3.2-24B-Instruct-2506",
                                         "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "Qwen-QwQ-32B", "Qwen3-Coder",
                                         "Qwen3.5-4B", "StepFun3.5-Flash", "deepseek-ai-DeepSeek-V3.1",
                                         "google-gemma-4-31B-it", "ibm-granite-granite-4.0",
                                         "meta-llama-Llama-3.3-70B-Instruct", "moonshotai-Kimi-K2"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "tests/data/chat_templates/%s.jinja", others[i]);
        char *o = th_slurp(path);
        CHECKF(o && !tm_harmony_detect(o) && (!tm_tool_dialect_detect(o) || !tm_tool_dialect_detect(o)->harmony), "%s",
               path);
        free(o);
    }
    /* an assistant turn that thought, then called a tool, rendered; the turn read back */
    cJSON *m = cJSON_Parse("[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
                           "{\"role\":\"assistant\",\"content\":\"\",\"thinking\":\"The user wants the weather.\","
                           "\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                           "\"arguments\":{\"city\":\"Paris <FR>\"}}}]},"
                           "{\"role\":\"tool\",\"content\":\"18 C\"}]");
    cJSON *kw = cJSON_CreateObject();
    cJSON_AddItemToObject(kw, "tools", cJSON_Parse(TOOLS));
    char *out = NULL;
    tm_err e = {0};
    CHECKF(tm_chat_render(src, m, 1, kw, NULL, NULL, NULL, &out, &e) == TM_OK, "%s", e.msg);
    const char *u = out ? strstr(out, "Weather in Paris?<|end|><|start|>assistant") : NULL;
    const char *from = u ? u + strlen("Weather in Paris?<|end|><|start|>assistant") : NULL;
    const char *to = from ? strstr(from, "<|start|>functions.get_weather") : NULL;
    CHECKF(from && to, "no turn in\n%s", out ? out : "");
    if (from && to) {
        tm_harmony h;
        tm_harmony_init(&h, 1);
        CHECK(tm_harmony_feed(&h, from, (size_t)(to - from), 1) == 0);
        tm_tool_calls c;
        CHECK(tm_tool_harmony_calls(&h, TOOLS, 0, &c, &e) == TM_OK);
        CHECKF(!strcmp(or_empty(h.reasoning), "The user wants the weather.") && c.n == 1 &&
                   !strcmp(c.v[0].name, "get_weather") && !strcmp(c.v[0].arguments, "{\"city\":\"Paris <FR>\"}") &&
                   !strcmp(c.content, ""),
               "read back: reasoning '%s', %d calls, content '%s' from\n%.*s", or_empty(h.reasoning), c.n, c.content,
               (int)(to - from), from);
        tm_tool_calls_free(&c);
        tm_harmony_free(&h);
    }
    CHECKF(out && !strcmp(out + strlen(out) - strlen("<|start|>assistant"), "<|start|>assistant"), "prompt end: %s",
           out ? out : "");
    free(out);
    cJSON_Delete(m);
    cJSON_Delete(kw);
    free(src);
}

static void test_tokenizer_keep(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/conformance/tokenizers/llama-bpe/tokenizer.json", th_shared());
    tm_tokenizer *t = NULL;
    tm_err e = {0};
    CHECKF(tm_tok_load(&t, path, &e) == TM_OK, "%s", e.msg);
    if (!t) return;
    const char *s = "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>";
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(tm_tok_encode(t, s, strlen(s), 0, &ids, &n, &e) == TM_OK);
    int32_t keep[2] = {tm_tok_piece_to_id(t, "<|eot_id|>"), tm_tok_piece_to_id(t, "<|start_header_id|>")};
    CHECK(keep[0] >= 0 && tm_tok_is_special(t, keep[0]) && keep[1] >= 0);
    char *a = NULL, *b = NULL, *c = NULL;
    size_t al = 0, bl = 0, cl = 0;
    CHECK(tm_tok_decode(t, ids, n, 1, &a, &al, &e) == TM_OK && !strcmp(a, "user\n\nHi there"));
    CHECK(tm_tok_decode_keep(t, ids, n, 1, keep, 1, &b, &bl, &e) == TM_OK && !strcmp(b, "user\n\nHi there<|eot_id|>"));
    CHECK(tm_tok_decode_keep(t, ids, n, 1, keep, 2, &c, &cl, &e) == TM_OK &&
          !strcmp(c, "<|start_header_id|>user\n\nHi there<|eot_id|>"));
    /* streamed, keeping the same: the same text */
    tm_detok_stream *ds = tm_detok_stream_new(t, 1);
    CHECK(ds != NULL);
    if (ds) {
        tm_detok_stream_keep(ds, keep, 2);
        char acc[256] = "";
        for (size_t i = 0; i < n; i++) {
            char *p = NULL;
            size_t pl = 0;
            CHECK(tm_detok_stream_push(ds, ids[i], &p, &pl, &e) == TM_OK);
            if (p && strlen(acc) + pl < sizeof acc) strncat(acc, p, pl);
            free(p);
        }
        char *p = NULL;
        size_t pl = 0;
        CHECK(tm_detok_stream_flush(ds, &p, &pl, &e) == TM_OK);
        if (p && strlen(acc) + pl < sizeof acc) strncat(acc, p, pl);
        free(p);
        CHECKF(!strcmp(acc, c), "streamed '%s', expected '%s'", acc, c);
        tm_detok_stream_free(ds);
    }
    free(a);
    free(b);
    free(c);
    free(ids);
    tm_tok_free(t);
}

typedef struct out {
    char text[512];
} out;

static int on_text(void *ud, const char *piece, size_t len, int32_t token)
{
    (void)token;
    out *o = ud;
    size_t k = strlen(o->text);
    if (k + len < sizeof o->text) memcpy(o->text + k, piece, len), o->text[k + len] = '\0';
    return 0;
}

/* the demo model's <|begin_of_text|> (special, not an end of sequence) drawn by a logit bias */
static int show_all; /* the next gen's request.show_special */

static void gen(tandem_session *s, const char *const *keep, const char *grammar, out *o, tandem_stats *stats)
{
    tandem_request r;
    tandem_request_default(&r);
    int32_t id = 0;
    float bias = 100.0f;
    r.prompt = "Once upon a time";
    r.max_tokens = grammar ? 40 : 3;
    r.temperature = 0;
    r.logit_bias_ids = &id;
    r.logit_bias = &bias;
    r.n_logit_bias = 1;
    r.keep_special = keep;
    r.show_special = show_all;
    r.grammar = grammar;
    memset(o, 0, sizeof *o);
    tandem_status st;
    CHECKF(tandem_generate(s, &r, on_text, o, stats, &st) == 0, "%s", st.msg);
}

static void test_session_keep(void)
{
    tandem_status st;
    tandem_model *m = NULL;
    CHECKF(tandem_model_open(&m, "models/tiny-classics-llama", &st) == 0, "%s", st.msg);
    if (!m) return;
    tandem_session_opts so;
    tandem_session_opts_default(&so);
    so.n_threads = 2;
    so.max_ctx = 256;
    tandem_session *s = NULL;
    CHECKF(tandem_session_new(&s, m, &so, &st) == 0, "%s", st.msg);
    if (s) {
        static const char *const keep[] = {"<|begin_of_text|>", "not a special token", NULL};
        out a, b, c, d;
        tandem_stats sa, sb, sc, sd;
        gen(s, NULL, NULL, &a, &sa);
        gen(s, keep, NULL, &b, &sb);
        CHECKF(sa.n_generated == 3 && !strcmp(a.text, ""), "dropped: %d '%s'", sa.n_generated, a.text);
        CHECKF(sb.n_generated == 3 && !strcmp(b.text, "<|begin_of_text|><|begin_of_text|><|begin_of_text|>"),
               "kept: %d '%s'", sb.n_generated, b.text);
        out e;
        tandem_stats se;
        show_all = 1; /* every special token shown (llama.cpp's --special) */
        gen(s, NULL, NULL, &e, &se);
        show_all = 0;
        CHECKF(!strcmp(e.text, b.text), "shown: '%s'", e.text);
        /* a grammar writes the kept token's text as the token itself; else spelled out in pieces */
        const char *g = "root ::= \"<|begin_of_text|>\" \" the\"";
        gen(s, keep, g, &c, &sc);
        gen(s, NULL, g, &d, &sd);
        CHECKF(!strcmp(c.text, "<|begin_of_text|> the") && sc.n_generated == 2, "kept, grammar: %d '%s'",
               sc.n_generated, c.text);
        CHECKF(!strcmp(d.text, "<|begin_of_text|> the") && sd.n_generated > 2, "spelled, grammar: %d '%s'",
               sd.n_generated, d.text);
        static const char *const many[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o",
                                           "p", "q", NULL};
        tandem_request r;
        tandem_request_default(&r);
        r.prompt = "x";
        r.keep_special = many;
        CHECK(tandem_generate(s, &r, on_text, &a, NULL, &st) != 0 && strstr(st.msg, "keep_special"));
        tandem_session_free(s);
    }
    tandem_model_free(m);
}

int main(void)
{
    test_parse();
    test_stream();
    test_calls();
    test_grammar();
    test_template();
    test_tokenizer_keep();
    test_session_keep();
    return th_done("test_harmony");
}
