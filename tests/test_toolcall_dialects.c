/* tests/test_toolcall_dialects.c: tool-call dialects with their own call syntax (text/toolcall.h);
 * test_toolcall.c has the JSON dialects, the hold-back, the kept markers and the partial reading.
 *
 * 1. XML dialects (qwen3_coder, glm, seed_oss, minimax): parsing (values typed by the schema: strings raw, the rest JSON
 *    or Python's str(); several calls, cut replies, malformed tags), the calls the real templates
 *    render (Qwen3-Coder, Qwen3.5, GLM-4.6, Seed-OSS, MiniMax-M2, Nemotron 3 Nano, Step 3.5:
 *    tests/data/chat_templates) parsed back, and the forced grammar
 *    (required and declared arguments in the schema's order, enums, integers, no closing tag inside a
 *    string; a strict tool's string pattern refused).
 * 2. DeepSeek V3.1, Kimi K2 and Command R7B / A: parsed, cut, refused; the calls their published templates
 *    render read back; the forced grammars' calls. */
#include "harness.h"

#include <cjson/cJSON.h>
#include <stdint.h>

#include "text/jinja.h"
#include "text/json_schema.h"
#include "toolcall_util.h"

/* ---- XML dialects ---- */

static const char *TOOLS_X =
    "[{\"type\":\"function\",\"function\":{\"name\":\"set\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"flag\":{\"type\":\"boolean\"},\"opts\":{\"type\":\"object\"},\"n\":{\"type\":[\"integer\",\"null\"]},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},\"note\":{\"type\":\"string\"},\"any\":{},"
    "\"level\":{\"enum\":[1,2,3]}}}}}]";

static void test_xml_parse(void)
{
    const char *W = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>";
    parse_case("qwen3_coder", W, "get_weather {\"city\":\"Paris\"}", "");
    parse_case("qwen3_coder",
               "Let me look.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
               "<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=add>\n"
               "<parameter=a>\n1\n</parameter>\n<parameter=b>\n2\n</parameter>\n</function>\n</tool_call>",
               "get_weather {\"city\":\"Oslo\",\"unit\":\"c\"}|add {\"a\":1,\"b\":2}", "Let me look.");
    /* a string value is raw text: tags, quotes, newlines and a partial closing tag inside it */
    parse_case("qwen3_coder",
               "<tool_call>\n<function=get_weather>\n<parameter=city>\n<b>Rio</b> \"de\"\n</para Janeiro\n\n</parameter>\n"
               "</function>\n</tool_call>",
               "get_weather {\"city\":\"<b>Rio</b> \\\"de\\\"\\n</para Janeiro\\n\"}", "");
    parse_case("qwen3_coder", "<tool_call>\n<function=now>\n</function>\n</tool_call>", "now {}", "");
    parse_case("qwen3_coder", "<tool_call>\n<function=now>\n</function>\n<function=now>\n</function>\n</tool_call>",
               "now {}|now {}", "");
    parse_case("qwen3_coder", "<tool_call>\n<function=now>\n</function>", "now {}", ""); /* unclosed at the end */
    parse_case("qwen3_coder", "<tool_call>\n<function=add>\n<parameter=a>\nx\n</parameter>\n</function>\n</tool_call>",
               "add {\"a\":\"x\"}", ""); /* not JSON: the text (the schema is the tool's to enforce) */
    parse_case("qwen3_coder",
               "<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n<parameter=a>\n2\n</parameter>\n</function>\n"
               "</tool_call>", "add {\"a\":1,\"a\":2}", ""); /* a repeated key stays twice, as in a JSON call */
    static const char *bad[] = {
        "<tool_call>\n<function=rm>\n</function>\n</tool_call>",                                /* undeclared */
        "<tool_call>\n<function=now>\n</tool_call>",                                             /* no </function> */
        "<tool_call>\n<function=add>\n<parameter=a>\n1\n</function>\n</tool_call>",              /* no </parameter> */
        "<tool_call>\n<function=add>\n<parameter=a\nb>\n1\n</parameter>\n</function>\n</tool_call>", /* a key over lines */
        "<tool_call>\n<function=now>\n</function> and more",                                     /* text after */
        "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",                       /* hermes' form */
        "<tool_call>\n<function=now>\nhello\n</function>\n</tool_call>",                          /* not an argument */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) parse_case("qwen3_coder", bad[i], "", bad[i]);
    /* values typed by their schemas */
    parse_with(TOOLS_X, 0, "qwen3_coder",
               "<tool_call>\n<function=set>\n<parameter=flag>\nTrue\n</parameter>\n<parameter=opts>\n{\"k\": [1, 2]}\n"
               "</parameter>\n<parameter=n>\nNone\n</parameter>\n<parameter=tags>\n[\"a\", \"b\"]\n</parameter>\n"
               "<parameter=note>\n42\n</parameter>\n<parameter=any>\n7\n</parameter>\n<parameter=level>\n2\n</parameter>\n"
               "</function>\n</tool_call>",
               "set {\"flag\":true,\"opts\":{\"k\":[1,2]},\"n\":null,\"tags\":[\"a\",\"b\"],\"note\":\"42\",\"any\":\"7\","
               "\"level\":2}", "");
    parse_with(TOOLS_X, 0, "qwen3_coder",
               "<tool_call>\n<function=set>\n<parameter=flag>\nfalse\n</parameter>\n<parameter=n>\n12 apples\n</parameter>\n"
               "<parameter=opts>\n{\"k\": 1} {}\n</parameter>\n</function>\n</tool_call>",
               "set {\"flag\":false,\"n\":\"12 apples\",\"opts\":\"{\\\"k\\\": 1} {}\"}", "");
    /* glm */
    parse_case("glm", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
               "get_weather {\"city\":\"Paris\"}", "");
    parse_case("glm",
               "Sure.\n<tool_call>add\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n<arg_key>b</arg_key>\n"
               "<arg_value>2</arg_value>\n</tool_call>\n<tool_call>now\n</tool_call>",
               "add {\"a\":1,\"b\":2}|now {}", "Sure.");
    parse_case("glm", "<tool_call>now</tool_call>", "now {}", "");
    parse_case("glm", "<tool_call>get_weather\n<arg_key>city</arg_key>\nParis</arg_value>\n</tool_call>", "",
               "<tool_call>get_weather\n<arg_key>city</arg_key>\nParis</arg_value>\n</tool_call>");
    /* seed_oss: no newline of the form around a value (it is the value's) */
    parse_case("seed_oss",
               "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n<parameter=unit>\nc</parameter>\n"
               "</function>\n</seed:tool_call>",
               "get_weather {\"city\":\"Paris\",\"unit\":\"\\nc\"}", "");
    /* minimax: one block, several invokes */
    parse_case("minimax",
               "Sure.\n<minimax:tool_call>\n<invoke name=\"add\"><parameter name=\"a\">1</parameter>\n"
               "<parameter name=\"b\">2</parameter>\n</invoke>\n<invoke name=\"now\">\n</invoke>\n</minimax:tool_call>",
               "add {\"a\":1,\"b\":2}|now {}", "Sure.");
    parse_case("minimax", "<minimax:tool_call>\n<invoke name=\"now\"></minimax:tool_call>", "",
               "<minimax:tool_call>\n<invoke name=\"now\"></minimax:tool_call>");
    /* cut short */
    static const struct {
        const char *dn, *text, *calls;
    } cut[] = {
        {"qwen3_coder", "<tool_call>\n<function=now>\n</function>\n</tool_call>\n<tool_call>\n<function=add>\n<parameter=a>\n1", "now {}"},
        {"qwen3_coder", "<tool_call>\n<function=now>\n</function>\n</tool_call>\n<tool_call>\n<function=ad", "now {}"},
        {"qwen3_coder", "<tool_call>\n<function=now>\n</func", "now {}"},
        {"glm", "<tool_call>now</tool_call><tool_call>add\n<arg_key>a</arg_key>\n<arg_val", "now {}"},
    };
    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) parse_with(TOOLS, 1, cut[i].dn, cut[i].text, cut[i].calls, "");
    parse_with(TOOLS, 1, "qwen3_coder", "<tool_call>\n<function=ad", "", "<tool_call>\n<function=ad");
}

/* the calls a real template renders, parsed back: an assistant turn with two calls, rendered with the
 * tools, the text from its first call to the turn's end read in the dialect the template shows */
static void test_xml_roundtrip(void)
{
    static const char *tpl[] = {"Qwen3-Coder", "Qwen3.5-4B", "GLM-4.6", "ByteDance-Seed-OSS", "MiniMax-M2",
                                "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "StepFun3.5-Flash"};
    const char *msgs =
        "[{\"role\":\"user\",\"content\":\"Weather in Paris, and 1 + 2?\"},"
        "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":["
        "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris <FR>\",\"unit\":\"c\"}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":-2}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"now\",\"arguments\":{}}}]},"
        "{\"role\":\"tool\",\"content\":\"18 C\"}]";
    cJSON *m = cJSON_Parse(msgs), *kw = cJSON_CreateObject();
    /* the tools as the templates show them (Seed-OSS's reads every tool's "parameters") */
    cJSON *shown = cJSON_Parse(TOOLS);
    cJSON_AddItemToObject(cJSON_GetObjectItem(cJSON_GetArrayItem(shown, 2), "function"), "parameters",
                          cJSON_Parse("{\"type\":\"object\",\"properties\":{}}"));
    cJSON_AddItemToObject(kw, "tools", shown);
    for (size_t i = 0; i < sizeof tpl / sizeof tpl[0]; i++) {
        char file[128];
        snprintf(file, sizeof file, "tests/data/chat_templates/%s.jinja", tpl[i]);
        char *src = th_slurp(file), *out = NULL;
        CHECKF(src, "%s", file);
        if (!src) continue;
        tm_err e = {0};
        const tm_tool_dialect *d = tm_tool_dialect_detect(src);
        CHECKF(d && d->xml, "%s: %s", file, d ? d->name : "none");
        CHECKF(tm_chat_render(src, m, 0, kw, NULL, NULL, NULL, &out, &e) == TM_OK, "%s: %s", file, e.msg);
        /* from the turn's first call marker to the end of its last close */
        const char *at = out ? strstr(out, "Weather in Paris") : NULL;
        const char *from = at && d ? strstr(at, d->open) : NULL, *to = NULL;
        for (const char *q = from; q && (q = strstr(q, d->close)); q += strlen(d->close)) to = q + strlen(d->close);
        CHECKF(from && to, "%s: no calls in\n%s", file, out ? out : "");
        if (d && from && to) {
            tm_tool_calls c;
            CHECK(tm_tool_parse(d, from, (size_t)(to - from), TOOLS, 0, &c, &e) == TM_OK);
            char got[1024] = "";
            for (int k = 0; k < c.n; k++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s %s", k ? "|" : "", c.v[k].name, c.v[k].arguments);
            CHECKF(!strcmp(got, "get_weather {\"city\":\"Paris <FR>\",\"unit\":\"c\"}|add {\"a\":1,\"b\":-2}|now {}"),
                   "%s: %s from\n%.*s", file, got, (int)(to - from), from);
            tm_tool_calls_free(&c);
        }
        free(out);
        free(src);
    }
    cJSON_Delete(m);
    cJSON_Delete(kw);
}

static void test_xml_grammar(void)
{
    tm_grammar *g = forced("qwen3_coder", TOOLS, NULL, 1);
    if (g) {
        forced_yes(TOOLS, "qwen3_coder", g,
                   "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
                   "get_weather {\"city\":\"Paris\"}");
        forced_yes(TOOLS, "qwen3_coder", g,
                   "<function=get_weather>\n<parameter=city>\nSão <i>Paulo</i>\n</paramete\n</parameter>\n<parameter=unit>\n"
                   "f\n</parameter>\n</function>\n</tool_call>",
                   "get_weather {\"city\":\"São <i>Paulo</i>\\n</paramete\",\"unit\":\"f\"}");
        forced_yes(TOOLS, "qwen3_coder", g,
                   "<function=add>\n<parameter=a>\n3\n</parameter>\n<parameter=b>\n-4\n</parameter>\n</function>\n</tool_call>"
                   "\n<tool_call>\n<function=now>\n</function>\n</tool_call>",
                   "add {\"a\":3,\"b\":-4}|now {}");
        static const char *no[] = {
            "<function=get_weather>\n<parameter=city>\nX\n</parameter>\n<parameter=unit>\nk\n</parameter>\n</function>\n</tool_call>",
            "<function=add>\n<parameter=a>\n1.5\n</parameter>\n<parameter=b>\n2\n</parameter>\n</function>\n</tool_call>",
            "<function=add>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>",                   /* b required */
            "<function=add>\n<parameter=b>\n1\n</parameter>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>",
            "<function=get_weather>\n<parameter=city>\nX\n</parameter>\n<parameter=z>\n1\n</parameter>\n</function>\n</tool_call>",
            "<function=get_weather>\n<parameter=city>\nA\n</parameter>\nB\n</parameter>\n</function>\n</tool_call>",
            "<function=rm>\n</function>\n</tool_call>",
            "<function=now>\n</function>",                                                               /* not closed */
        };
        for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) CHECKF(th_takes(g, no[i]) == 0, "takes %s", no[i]);
        tm_grammar_free(g);
    }
    lazy_case("qwen3_coder", "<tool_call>\n<function=now>\n</function>\n</tool_call>",
              "<function=now>\n</function>\n</tool_call>");
    char *src = NULL;
    tm_err e = {0};
    g = forced("glm", TOOLS, NULL, 1);
    if (g) {
        forced_yes(TOOLS, "glm", g, "get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
                   "get_weather {\"city\":\"Paris\"}");
        forced_yes(TOOLS, "glm", g,
                   "add\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n<arg_key>b</arg_key>\n<arg_value>2</arg_value>\n"
                   "</tool_call>\n<tool_call>now\n</tool_call>",
                   "add {\"a\":1,\"b\":2}|now {}");
        CHECK(th_takes(g, "get_weather\n<arg_key>city</arg_key>\n<arg_value>A</arg_value>B</arg_value>\n</tool_call>") == 0);
        tm_grammar_free(g);
    }
    static const struct {
        const char *dn, *text, *calls;
    } more[] = {
        {"seed_oss", "<function=get_weather>\n<parameter=city>Oslo</parameter>\n</function></seed:tool_call>",
         "get_weather {\"city\":\"Oslo\"}"},
        {"minimax", "<invoke name=\"add\">\n<parameter name=\"a\">1</parameter>\n<parameter name=\"b\">-2</parameter>\n"
         "</invoke></minimax:tool_call>", "add {\"a\":1,\"b\":-2}"},
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        g = forced(more[i].dn, TOOLS, NULL, 1);
        if (g) forced_yes(TOOLS, more[i].dn, g, more[i].text, more[i].calls);
        tm_grammar_free(g);
    }
    g = forced("qwen3_coder", TOOLS_X, NULL, 0);
    if (g) {
        forced_yes(TOOLS_X, "qwen3_coder", g,
                   "<function=set>\n<parameter=flag>\ntrue\n</parameter>\n<parameter=tags>\n[\"x\"]\n</parameter>\n"
                   "<parameter=level>\n3\n</parameter>\n</function>\n</tool_call>",
                   "set {\"flag\":true,\"tags\":[\"x\"],\"level\":3}");
        CHECK(th_takes(g, "<function=set>\n<parameter=level>\n4\n</parameter>\n</function>\n</tool_call>") == 0);
        tm_grammar_free(g);
    }
    /* a strict tool's string bound the raw form cannot hold: refused, naming it; not strict: ignored */
    const char *strict = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"strict\":true,\"parameters\":{\"type\":"
                         "\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"pattern\":\"^a\"}}}}}]";
    src = NULL;
    CHECK(tm_tool_grammar(tm_tool_dialect_named("qwen3_coder"), strict, NULL, 1, 0, &src, &e) == TM_E_UNSUPPORTED &&
          strstr(e.msg, "properties.s") && strstr(e.msg, "pattern"));
    free(src);
    src = NULL;
    const char *loose = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":"
                        "\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"pattern\":\"^a\"}}}}}]";
    CHECK(tm_tool_grammar(tm_tool_dialect_named("qwen3_coder"), loose, NULL, 1, 0, &src, &e) == TM_OK);
    free(src);
    /* a property name or an enum value the tags cannot hold (a tag's character, bytes that are not UTF-8) */
    static const char *unwritable[] = {
        "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"properties\":{\"a>b\":{}}}}}]",
        "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"properties\":{\"a\xde\":{}}}}}]",
        "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"properties\":{\"a\":"
        "{\"enum\":[\"x\\n</parameter>\"]}}}}}]",
    };
    for (size_t i = 0; i < sizeof unwritable / sizeof unwritable[0]; i++) {
        src = NULL;
        e = (tm_err){0};
        CHECKF(tm_tool_grammar(tm_tool_dialect_named("qwen3_coder"), unwritable[i], NULL, 1, 0, &src, &e) ==
                   TM_E_UNSUPPORTED && strstr(e.msg, "cannot write") && !src,
               "%zu: %s", i, e.msg);
        free(src);
    }
}

/* DeepSeek V3.1's calls: parsed (markers around each call and the block; content before), cut, refused;
 * the calls its real template renders read back; the forced grammar's calls */
static void test_deepseek(void)
{
    const char *B = "<｜tool▁calls▁begin｜>", *E = "<｜tool▁calls▁end｜>", *C0 = "<｜tool▁call▁begin｜>",
               *C1 = "<｜tool▁call▁end｜>", *S = "<｜tool▁sep｜>";
    char t[1024];
    snprintf(t, sizeof t, "Checking.%s%sget_weather%s{\"city\": \"Paris\"}%s%sadd%s{\"a\": 1, \"b\": 2}%s%s", B, C0, S,
             C1, C0, S, C1, E);
    parse_case("deepseek_v3", t, "get_weather {\"city\":\"Paris\"}|add {\"a\":1,\"b\":2}", "Checking.");
    snprintf(t, sizeof t, "%s%snow%s{}%s%sadd%s{\"a\": 1", B, C0, S, C1, C0, S);
    parse_with(TOOLS, 1, "deepseek_v3", t, "now {}", ""); /* cut inside the second: the first kept */
    snprintf(t, sizeof t, "%s%sfly%s{}%s%s", B, C0, S, C1, E);
    parse_case("deepseek_v3", t, "", t); /* an undeclared tool: no calls, all content */
    /* R1's and V3-0324's older form: "function", the marker, the name, the object in a json fence */
    snprintf(t, sizeof t, "Let me check.%s%sfunction%sget_weather\n```json\n{\"city\": \"Oslo\"}\n```%s%sfunction%snow\n"
             "```json\n{}\n```%s%s", B, C0, S, C1, C0, S, C1, E);
    parse_case("deepseek_v3", t, "get_weather {\"city\":\"Oslo\"}|now {}", "Let me check.");
    snprintf(t, sizeof t, "%s%sfunction%snow\n```json\n{}\n```%s%sfunction%sadd\n```js", B, C0, S, C1, C0, S);
    parse_with(TOOLS, 1, "deepseek_v3", t, "now {}", ""); /* cut inside the second's fence: the first kept */
    snprintf(t, sizeof t, "%s%sfunction%snow\n{}%s%s", B, C0, S, C1, E);
    parse_case("deepseek_v3", t, "", t); /* the typed form without its fence: not a call */
    /* the real template's calls read back */
    char *src = th_slurp("tests/data/chat_templates/deepseek-ai-DeepSeek-V3.1.jinja"), *out = NULL;
    cJSON *m = cJSON_Parse("[{\"role\":\"user\",\"content\":\"Weather in Paris, and 1 + 2?\"},"
                           "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":["
                           "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris <FR>\"}}},"
                           "{\"type\":\"function\",\"function\":{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":-2}}}]},"
                           "{\"role\":\"tool\",\"content\":\"18 C\"}]");
    tm_err e = {0};
    CHECKF(src && tm_chat_render(src, m, 1, NULL, NULL, NULL, NULL, &out, &e) == TM_OK, "%s", e.msg);
    const char *from = out ? strstr(out, B) : NULL, *to = from ? strstr(from, E) : NULL;
    CHECKF(from && to, "no calls in %s", out ? out : "");
    if (from && to) {
        tm_tool_calls c;
        CHECK(tm_tool_parse(tm_tool_dialect_named("deepseek_v3"), from, (size_t)(to - from) + strlen(E), TOOLS, 0, &c, &e) ==
              TM_OK);
        char got[512] = "";
        for (int k = 0; k < c.n; k++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s %s", k ? "|" : "", c.v[k].name, c.v[k].arguments);
        CHECKF(!strcmp(got, "get_weather {\"city\":\"Paris <FR>\"}|add {\"a\":1,\"b\":-2}") && !c.content[0], "read back: %s",
               got);
        tm_tool_calls_free(&c);
    }
    free(out);
    free(src);
    cJSON_Delete(m);
    /* forced: one call, or several when parallel */
    char t2[256], t3[256];
    snprintf(t, sizeof t, "get_weather%s{\"city\": \"Oslo\"}%s%s", S, C1, E);
    snprintf(t2, sizeof t2, "now%s{}%s%sadd%s{\"a\": 1, \"b\": 2}%s%s", S, C1, C0, S, C1, E);
    snprintf(t3, sizeof t3, "fly%s{}%s%s", S, C1, E);
    tm_grammar_free(forced_three("deepseek_v3", t, t2, t3));
    const tm_tool_dialect *d = tm_tool_dialect_named("deepseek_v3");
    CHECK(d && d->keep && !strcmp(d->keep[0], B));
}

static char *rendered_calls(const char *file, const char *b, const char *e_mark, const char **from, size_t *len);

/* Kimi K2's calls: "functions.NAME:INDEX" between a call's markers, the arguments after their own; parsed (the ids
 * kept as written), with and without the "functions." prefix, cut, refused; the calls its published template renders
 * read back; the forced grammar's calls, ids included; the stream held back at a marker's start */
static void test_kimi(void)
{
    const char *B = "<|tool_calls_section_begin|>", *E = "<|tool_calls_section_end|>", *C0 = "<|tool_call_begin|>",
               *C1 = "<|tool_call_end|>", *A = "<|tool_call_argument_begin|>";
    const tm_tool_dialect *d = tm_tool_dialect_named("kimi_k2");
    char t[1024];
    snprintf(t, sizeof t, "Checking.%s%sfunctions.get_weather:0%s{\"city\": \"Paris\"}%s%sfunctions.add:1%s{\"a\": 1, "
             "\"b\": 2}%s%s", B, C0, A, C1, C0, A, C1, E);
    parse_case("kimi_k2", t, "get_weather {\"city\":\"Paris\"}|add {\"a\":1,\"b\":2}", "Checking.");
    tm_tool_calls c;
    tm_err e = {0};
    CHECK(tm_tool_parse(d, t, strlen(t), TOOLS, 0, &c, &e) == TM_OK);
    CHECKF(c.n == 2 && c.v[0].id && !strcmp(c.v[0].id, "functions.get_weather:0") && c.v[1].id &&
               !strcmp(c.v[1].id, "functions.add:1"),
           "ids %s %s", c.n > 0 && c.v[0].id ? c.v[0].id : "-", c.n > 1 && c.v[1].id ? c.v[1].id : "-");
    tm_tool_calls_free(&c);
    snprintf(t, sizeof t, "%s%snow:3%s{}%s%s", B, C0, A, C1, E); /* no prefix: the name as it stands */
    parse_case("kimi_k2", t, "now {}", "");
    char longid[200]; /* an id past TM_TOOL_MAX_NAME + 32 bytes: the call read, its id not kept */
    memset(longid, '7', sizeof longid - 1), longid[sizeof longid - 1] = '\0';
    snprintf(t, sizeof t, "%s%sfunctions.now:%s%s{}%s%s", B, C0, longid, A, C1, E);
    CHECK(tm_tool_parse(d, t, strlen(t), TOOLS, 0, &c, &e) == TM_OK);
    CHECKF(c.n == 1 && !c.v[0].id, "a long id: %d calls, id %s", c.n, c.n && c.v[0].id ? "kept" : "-");
    tm_tool_calls_free(&c);
    snprintf(t, sizeof t, "%s%sfunctions.now:0%s{}%s%sfunctions.add:1%s{\"a\": 1", B, C0, A, C1, C0, A);
    parse_with(TOOLS, 1, "kimi_k2", t, "now {}", ""); /* cut inside the second: the first kept */
    snprintf(t, sizeof t, "%s%sfunctions.fly:0%s{}%s%s", B, C0, A, C1, E);
    parse_case("kimi_k2", t, "", t); /* an undeclared tool: no calls, all content */
    snprintf(t, sizeof t, "%s%sfunctions.now:0%s[1]%s%s", B, C0, A, C1, E);
    parse_case("kimi_k2", t, "", t); /* arguments not an object */
    /* the published template's calls read back */
    const char *from = NULL;
    size_t n = 0;
    char *out = rendered_calls("tests/data/chat_templates/moonshotai-Kimi-K2.jinja", B, E, &from, &n);
    if (out) {
        CHECK(tm_tool_parse(d, from, n, TOOLS, 0, &c, &e) == TM_OK);
        char got[512] = "";
        for (int k = 0; k < c.n; k++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s %s %s", k ? "|" : "", c.v[k].id ? c.v[k].id : "-",
                     c.v[k].name, c.v[k].arguments);
        CHECKF(!strcmp(got, "functions.get_weather:0 get_weather {\"city\":\"Paris <FR>\"}|functions.add:1 add "
                            "{\"a\":1,\"b\":-2}") && !c.content[0],
               "read back: %s", got);
        tm_tool_calls_free(&c);
        free(out);
    }
    /* forced: one call, or several when parallel; the index is the model's */
    char t2[256], t3[256];
    snprintf(t, sizeof t, "get_weather:0%s{\"city\": \"Oslo\"}%s%s", A, C1, E);
    snprintf(t2, sizeof t2, "now:0%s{}%s%sfunctions.add:1%s{\"a\": 1, \"b\": 2}%s%s", A, C1, C0, A, C1, E);
    snprintf(t3, sizeof t3, "fly:0%s{}%s%s", A, C1, E);
    tm_grammar *g = forced_three("kimi_k2", t, t2, t3);
    snprintf(t, sizeof t, "now%s{}%s%s", A, C1, E); /* the index is part of the form */
    CHECK(!g || th_takes(g, t) == 0);
    tm_grammar_free(g);
    CHECK(d && d->keep && !strcmp(d->keep[0], B));
    /* streaming: content goes out up to where the section's marker may begin */
    snprintf(t, sizeof t, "Sure.%.12s", B);
    CHECKF(tm_tool_safe_prefix(d, t, strlen(t)) == 5, "safe prefix %zu", tm_tool_safe_prefix(d, t, strlen(t)));
}

/* the calls template file writes for an assistant turn with two calls: from its marker b to e (end
 * included) in *from / *len; NULL where it renders none (the caller frees the returned render) */
static char *rendered_calls(const char *file, const char *b, const char *e_mark, const char **from, size_t *len)
{
    char *src = th_slurp(file), *out = NULL;
    cJSON *m = cJSON_Parse("[{\"role\":\"user\",\"content\":\"Weather in Paris, and 1 + 2?\"},"
                           "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":["
                           "{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris <FR>\"}}},"
                           "{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":-2}}}]},"
                           "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"18 C\"},"
                           "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":\"-1\"}]");
    tm_err e = {0};
    CHECKF(src && tm_chat_render(src, m, 1, NULL, NULL, NULL, NULL, &out, &e) == TM_OK, "%s: %s", file, e.msg);
    const char *f = out ? strstr(out, b) : NULL, *t = f ? strstr(f, e_mark) : NULL;
    CHECKF(f && t, "%s: no calls in %s", file, out ? out : "");
    *from = f;
    *len = f && t ? (size_t)(t - f) + strlen(e_mark) : 0;
    free(src);
    cJSON_Delete(m);
    if (!t) {
        free(out);
        return NULL;
    }
    return out;
}

/* Command R7B's and Command A's calls: a JSON list of {"tool_call_id", "tool_name", "parameters"} between
 * <|START_ACTION|> and <|END_ACTION|>; parsed, cut, refused; both published templates' calls read back, and
 * the forced grammar takes what the templates show the model */
static void test_command(void)
{
    const char *B = "<|START_ACTION|>", *E = "<|END_ACTION|>";
    char t[1024];
    snprintf(t, sizeof t, "%s[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}},"
             "\n    {\"tool_call_id\": \"1\", \"tool_name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}\n]%s", B, E);
    parse_case("command_r", t, "get_weather {\"city\":\"Paris\"}|add {\"a\":1,\"b\":2}", "");
    snprintf(t, sizeof t, "I will check.%s[{\"tool_call_id\": \"0\", \"tool_name\": \"now\", \"parameters\": {}}]%s", B, E);
    parse_case("command_r", t, "now {}", "I will check.");
    snprintf(t, sizeof t, "%s[{\"tool_name\": \"now\", \"parameters\": {}}, {\"tool_call_id\": \"1\", \"tool_name\": \"add\", "
             "\"parameters\": {\"a\": 1", B);
    parse_with(TOOLS, 1, "command_r", t, "now {}", ""); /* cut inside the second: the first kept */
    snprintf(t, sizeof t, "%s[{\"tool_call_id\": \"0\", \"tool_name\": \"fly\", \"parameters\": {}}]%s", B, E);
    parse_case("command_r", t, "", t); /* an undeclared tool: no calls, all content */
    snprintf(t, sizeof t, "%s[{\"name\": \"now\", \"arguments\": {}}]%s", B, E);
    parse_case("command_r", t, "now {}", ""); /* OpenAI's keys read too */
    snprintf(t, sizeof t, "%s[{\"tool_call_id\": \"0\", \"tool_name\": \"now\", \"parameters\": {}}] and more", B);
    parse_case("command_r", t, "", t); /* an unclosed list before more text */
    const char *files[] = {"tests/data/chat_templates/CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
                           "tests/data/chat_templates/Cohere2MoE.jinja"};
    const tm_tool_dialect *d = tm_tool_dialect_named("command_r");
    tm_grammar *g = forced("command_r", TOOLS, NULL, 1);
    for (int i = 0; i < 2; i++) {
        const char *from = NULL;
        size_t len = 0;
        char *out = rendered_calls(files[i], B, E, &from, &len);
        if (!out) continue;
        tm_tool_calls c;
        tm_err e = {0};
        CHECK(tm_tool_parse(d, from, len, TOOLS, 0, &c, &e) == TM_OK);
        char got[512] = "";
        for (int k = 0; k < c.n; k++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s %s", k ? "|" : "", c.v[k].name, c.v[k].arguments);
        CHECKF(!strcmp(got, "get_weather {\"city\":\"Paris <FR>\"}|add {\"a\":1,\"b\":-2}") && !c.content[0],
               "%s: read back: %s", files[i], got);
        tm_tool_calls_free(&c);
        /* the forced reply's grammar takes the template's own form, from gen_open to the list's end */
        size_t go = strlen(d->gen_open);
        CHECKF(len > go + strlen(E) && !memcmp(from, d->gen_open, go), "%s: the calls open otherwise: %.*s", files[i],
               (int)len, from);
        if (g && len > go + strlen(E)) {
            char body[1024];
            snprintf(body, sizeof body, "%.*s", (int)(len - go - strlen(E)), from + go);
            CHECKF(th_takes(g, body) == 1, "%s: the grammar refuses the template's calls: %s", files[i], body);
        }
        free(out);
    }
    if (g) {
        forced_yes(TOOLS, "command_r", g, "{\"tool_call_id\": \"0\", \"tool_name\": \"now\", \"parameters\": {}}\n]", "now {}");
        CHECK(th_takes(g, "{\"tool_name\": \"now\", \"parameters\": {}}\n]") == 0); /* its number first */
        CHECK(th_takes(g, "{\"tool_call_id\": \"0\", \"tool_name\": \"fly\", \"parameters\": {}}\n]") == 0);
    }
    tm_grammar_free(g);
    CHECK(d && d->keep && !strcmp(d->keep[0], B) && !strcmp(d->keep[1], E) && !d->keep[2]);
}

int main(void)
{
    test_xml_parse();
    test_xml_roundtrip();
    test_xml_grammar();
    test_deepseek();
    test_kimi();
    test_command();
    return th_done("test_toolcall_dialects");
}
