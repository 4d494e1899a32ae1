/* tests/test_toolcall.c: tool-call dialects (text/toolcall.h); the XML ones, DeepSeek's, Kimi's and Command's
 * own syntax are in test_toolcall_dialects.c.
 *
 * 1. Detection on the conformance chat templates and on each dialect's marker.
 * 2. The tools array: well-formed ones pass, each malformed field is named.
 * 3. Parsing, per dialect: calls with content around them, several calls, arguments written as a
 *    string, undeclared names, broken JSON, unclosed calls, mistral_args with and without its
 *    special-token markers (all-or-nothing: a reply that is not calls comes back whole as content).
 * 4. The stream's hold-back on random replies built from markers, pieces of markers, JSON and
 *    words: never more than the text, never fewer for a longer text, and what went out is where
 *    the final parse's content begins (up to whitespace the parse trims).
 * 5. Forced replies: the grammar of each dialect takes the calls the models write, refuses wrong
 *    names, arguments against the schema, a second call when not parallel; a strict tool with an
 *    unsupported schema is refused, a loose one takes any object; every text the grammar takes
 *    parses, after gen_open, into the calls it spells.
 * 6. The bare dialects' forms with their special-token markers kept (tm_tool_dialect_kept: made only where
 *    the vocabulary has them; their grammars, parse, hold-back and partial reading) and auto's lazy trigger
 *    of every dialect (llama3_json's anchored), each a start of its lazy grammar's language; harmony's lazy
 *    grammar from the recipient on (every header form the reader takes, fed byte by byte, read back as the
 *    call; wrong tools, arguments and channels refused), its random replies read alike cut at every byte. */
#include "harness.h"

#include <cjson/cJSON.h>
#include <stdint.h>

#include "text/grammar.h"
#include "text/jinja.h"
#include "text/json_schema.h"
#include "text/toolcall.h"
#include "toolcall_util.h"

static void test_detect(void)
{
    static const struct {
        const char *file, *want;
    } cases[] = {
        {"Qwen-Qwen2.5-7B-Instruct.jinja", "hermes"},
        {"Qwen-Qwen3-0.6B.jinja", "hermes"},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3_json"},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral"},
        {"google-gemma-2-2b-it.jinja", NULL},
        {"microsoft-Phi-3.5-mini-instruct.jinja", NULL},
        {"tests/data/chat_templates/Qwen3-Coder.jinja", "qwen3_coder"},
        {"tests/data/chat_templates/Qwen3.5-4B.jinja", "qwen3_coder"},
        {"tests/data/chat_templates/GLM-4.6.jinja", "glm"},
        {"tests/data/chat_templates/GLM-4.7-Flash.jinja", "glm"},
        {"tests/data/chat_templates/ByteDance-Seed-OSS.jinja", "seed_oss"},
        {"tests/data/chat_templates/MiniMax-M2.jinja", "minimax"},
        {"tests/data/chat_templates/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", "qwen3_coder"},
        {"tests/data/chat_templates/StepFun3.5-Flash.jinja", "qwen3_coder"},
        {"tests/data/chat_templates/HuggingFaceTB-SmolLM3-3B.jinja", NULL},
        {"tests/data/chat_templates/openai-gpt-oss-120b.jinja", "harmony"},
        {"tests/data/chat_templates/deepseek-ai-DeepSeek-V3.1.jinja", "deepseek_v3"},
        {"tests/data/chat_templates/moonshotai-Kimi-K2.jinja", "kimi_k2"},
        {"tests/data/chat_templates/CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "command_r"},
        {"tests/data/chat_templates/Cohere2MoE.jinja", "command_r"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[1024];
        if (!strncmp(cases[i].file, "tests/", 6)) snprintf(path, sizeof path, "%s", cases[i].file);
        else snprintf(path, sizeof path, "%s/conformance/chat_templates/%s", th_shared(), cases[i].file);
        char *src = th_slurp(path);
        CHECKF(src != NULL, "%s", path);
        if (!src) continue;
        const tm_tool_dialect *d = tm_tool_dialect_detect(src);
        CHECKF(cases[i].want ? d && !strcmp(d->name, cases[i].want) : !d, "%s: %s", cases[i].file,
               d ? d->name : "none");
        free(src);
    }
    CHECK(tm_tool_dialect_detect(NULL) == NULL);
    CHECK(tm_tool_dialect_detect("{{ messages }}") == NULL);
    CHECK(!strcmp(tm_tool_dialect_detect("... <|tool_call|>[{{ x }}]")->name, "granite"));
    /* a v11+ Mistral template: the calls as name [ARGS] arguments (it shows [TOOL_CALLS] too) */
    CHECK(!strcmp(tm_tool_dialect_detect("{{- '[TOOL_CALLS]' + tc['function']['name'] + '[ARGS]' + args }}")->name,
                  "mistral_args"));
    const char *names[] = {"hermes", "llama3_json", "mistral", "granite", "mistral_args", "qwen3_coder", "glm",
                           "seed_oss", "minimax", "harmony", "deepseek_v3", "command_r", "kimi_k2"};
    for (int i = 0; i < 13; i++) {
        const tm_tool_dialect *d = tm_tool_dialect_named(names[i]);
        CHECKF(d && !strcmp(d->name, names[i]) && strstr(tm_tool_dialect_names(), names[i]), "%s", names[i]);
    }
    CHECK(tm_tool_dialect_named("qwen") == NULL && tm_tool_dialect_named(NULL) == NULL);
}

static void test_check(void)
{
    tm_err e = {0};
    CHECKF(tm_tool_check(TOOLS, &e) == TM_OK, "%s", e.msg);
    static const struct {
        const char *tools, *field;
    } bad[] = {
        {"{}", "tools:"},
        {"[]", "tools: is empty"},
        {"[1]", "tools[0]:"},
        {"[{\"type\":\"code\",\"function\":{\"name\":\"f\"}}]", "tools[0]:"},
        {"[{\"type\":\"function\"}]", "tools[0].function:"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]", "tools[0].function.name"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"\"}}]", "tools[0].function.name"},
        {"[{\"type\":\"function\",\"function\":{\"name\":7}}]", "tools[0].function.name"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"f\"}},{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]",
         "tools[1].function.name: 'f' is declared twice"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":3}}]", "tools[0].function.description"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"strict\":\"yes\"}}]", "tools[0].function.strict"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":[]}}]", "tools[0].function.parameters"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"string\"}}}]",
         "tools[0].function.parameters"},
        {"not json", "tools:"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e = (tm_err){0};
        int rc = tm_tool_check(bad[i].tools, &e);
        CHECKF(rc == TM_E_FORMAT && strstr(e.msg, bad[i].field), "%s: %d %s", bad[i].tools, rc, e.msg);
    }
    /* the name bound: 64 characters */
    char many[4096];
    int n = snprintf(many, sizeof many, "[{\"type\":\"function\",\"function\":{\"name\":\"");
    for (int i = 0; i < 65; i++) many[n++] = 'x';
    snprintf(many + n, sizeof many - n, "\"}}]");
    CHECK(tm_tool_check(many, &e) == TM_E_FORMAT);
    memmove(many + n - 1, many + n, strlen(many + n) + 1);
    CHECKF(tm_tool_check(many, &e) == TM_OK, "%s", e.msg);
}


static void test_parse(void)
{
    /* hermes */
    parse_case("hermes", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
               "get_weather {\"city\":\"Paris\"}", "");
    parse_case("hermes",
               "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
               "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>",
               "get_weather {\"city\":\"Oslo\"}|add {\"a\":1,\"b\":2}", "Let me look.");
    parse_case("hermes", "<tool_call>{\"name\":\"add\",\"arguments\":\"{\\\"a\\\": 5, \\\"b\\\": 6}\"}</tool_call>",
               "add {\"a\":5,\"b\":6}", "");
    parse_case("hermes", "<tool_call>\n{\"name\": \"now\"}\n</tool_call>", "now {}", "");
    parse_case("hermes", "<tool_call>\n{\"name\": \"now\", \"parameters\": {}}", "now {}", ""); /* unclosed at the end */
    parse_case("hermes", "<tool_call>\n{\"name\": \"now\"} and more", "", "<tool_call>\n{\"name\": \"now\"} and more");
    parse_case("hermes", "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>", "",
               "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>");
    parse_case("hermes", "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1,}}\n</tool_call>", "",
               "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1,}}\n</tool_call>");
    parse_case("hermes", "<tool_call>\n{\"name\": \"add\", \"arguments\": [1, 2]}\n</tool_call>", "",
               "<tool_call>\n{\"name\": \"add\", \"arguments\": [1, 2]}\n</tool_call>");
    parse_case("hermes", "No tools needed: 4.", "", "No tools needed: 4.");
    parse_case("hermes", "{\"name\": \"now\", \"arguments\": {}}", "", "{\"name\": \"now\", \"arguments\": {}}");
    parse_case("hermes", "<tool_call>\n{\"name\": \"now\"}\n</tool_call>\nDone, see above.", "now {}",
               "\nDone, see above.");
    parse_case("hermes", "", "", "");
    parse_case("hermes", "<tool_call>", "", "<tool_call>");
    /* llama3_json */
    parse_case("llama3_json", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\", \"unit\": \"c\"}}",
               "get_weather {\"city\":\"Rome\",\"unit\":\"c\"}", "");
    parse_case("llama3_json", "  <|python_tag|>{\"name\": \"now\", \"parameters\": {}}", "now {}", "");
    parse_case("llama3_json", "{\"name\": \"now\", \"parameters\": {}}; {\"name\": \"add\", \"parameters\": {\"a\": 2, \"b\": 3}};",
               "now {}|add {\"a\":2,\"b\":3}", "");
    parse_case("llama3_json", "{\"name\": \"now\", \"parameters\": {}} is what I would call", "",
               "{\"name\": \"now\", \"parameters\": {}} is what I would call");
    parse_case("llama3_json", "{\"city\": \"Rome\"}", "", "{\"city\": \"Rome\"}");
    parse_case("llama3_json", "The answer is {\"name\": \"now\"}", "", "The answer is {\"name\": \"now\"}");
    /* mistral */
    parse_case("mistral", "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 1}}, {\"name\": \"now\", \"arguments\": {}}]",
               "add {\"a\":1,\"b\":1}|now {}", "");
    parse_case("mistral", " [{\"name\": \"now\", \"arguments\": {}}]", "now {}", ""); /* the marker a special token */
    parse_case("mistral", "[TOOL_CALLS][]", "", "[TOOL_CALLS][]");
    parse_case("mistral", "[1, 2, 3]", "", "[1, 2, 3]");
    parse_case("mistral", "[{\"name\": \"now\", \"arguments\": {}}, 7]", "", "[{\"name\": \"now\", \"arguments\": {}}, 7]");
    /* granite */
    parse_case("granite", "<|tool_call|>[{\"name\": \"now\", \"arguments\": {}}]", "now {}", "");
    /* mistral_args: with the markers, with an id, without them (special tokens the text skips) */
    parse_case("mistral_args", "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}", "get_weather {\"city\":\"Paris\"}", "");
    parse_case("mistral_args", "[TOOL_CALLS]add[ARGS]{\"a\": 1, \"b\": 2}[TOOL_CALLS]now[ARGS]{}", "add {\"a\":1,\"b\":2}|now {}",
               "");
    parse_case("mistral_args", "[TOOL_CALLS]now[CALL_ID]a1B2c3D4e[ARGS]{}", "now {}", "");
    parse_case("mistral_args", "get_weather{\"city\": \"Oslo\"}now{}", "get_weather {\"city\":\"Oslo\"}|now {}", "");
    parse_case("mistral_args", " now[ARGS]{}\n", "now {}", "");
    parse_case("mistral_args", "Let me check.[TOOL_CALLS]now[ARGS]{}", "now {}", "Let me check.");
    parse_case("mistral_args", "[TOOL_CALLS]now[ARGS]{} and done", "now {}", " and done");
    parse_case("mistral_args", "now {}", "", "now {}");                 /* a space: prose */
    parse_case("mistral_args", "Hello world", "", "Hello world");
    parse_case("mistral_args", "now{} and more", "", "now{} and more"); /* bare calls are the whole reply */
    parse_case("mistral_args", "rm[ARGS]{}", "", "rm[ARGS]{}");         /* not declared */
    parse_case("mistral_args", "now[ARGS][1]", "", "now[ARGS][1]");     /* arguments not an object */
    parse_case("mistral_args", "[TOOL_CALLS]now[ARGS]{\"x\": }", "", "[TOOL_CALLS]now[ARGS]{\"x\": }");
    /* a reply cut short (max_tokens): the call it ends inside is dropped, the complete ones kept */
    static const struct {
        const char *dn, *text, *calls, *content;
    } cut[] = {
        {"hermes", "Hm.\n<tool_call>\n{\"name\": \"now\"}\n</tool_call>\n<tool_call>\n{\"name\": \"ad", "now {}", "Hm."},
        {"hermes", "<tool_call>\n{\"name\": \"now\"}\n</tool_call>\n<tool_call>", "now {}", ""},
        {"hermes", "<tool_call>\n{\"name\": \"now\"}\n</tool", "now {}", ""},
        {"hermes", "<tool_call>\n{\"name\": \"no", "", "<tool_call>\n{\"name\": \"no"},
        {"hermes", "<tool_call>\n{\"name\": \"now\"} trailing", "", "<tool_call>\n{\"name\": \"now\"} trailing"},
        {"mistral", "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}}, {\"name\": \"add\", \"argu", "now {}", ""},
        {"mistral", "[{\"name\": \"now\", \"arguments\": {}}, ", "now {}", ""},
        {"mistral", "[{\"name\": \"now\", \"arguments\": {}}", "now {}", ""},
        {"mistral", "[{\"name\": \"now\", \"arguments\": {}} x", "", "[{\"name\": \"now\", \"arguments\": {}} x"},
        {"llama3_json", "{\"name\": \"now\", \"parameters\": {}}; {\"name\": \"add\", \"param", "now {}", ""},
        {"llama3_json", "{\"name\": \"now\", \"parameters\": {}};", "now {}", ""},
        {"mistral_args", "[TOOL_CALLS]now[ARGS]{}[TOOL_CALLS]add[AR", "now {}", ""},
        {"mistral_args", "now{}add{\"a\": 1", "now {}", ""},
        {"mistral_args", "now[CALL", "", "now[CALL"},
    };
    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++)
        parse_with(TOOLS, 1, cut[i].dn, cut[i].text, cut[i].calls, cut[i].content);
    /* not cut: the same unfinished replies are all text */
    for (size_t i = 0; i < 2; i++) parse_with(TOOLS, 0, cut[i].dn, cut[i].text, "", cut[i].text);

    /* no dialect, no tools: the text as it is */
    tm_tool_calls c;
    tm_err e = {0};
    CHECK(tm_tool_parse(NULL, "abc", 3, TOOLS, 0, &c, &e) == TM_OK && c.n == 0 && !strcmp(c.content, "abc"));
    tm_tool_calls_free(&c);
    const char *t = "<tool_call>{\"name\":\"now\"}</tool_call>";
    CHECK(tm_tool_parse(tm_tool_dialect_named("hermes"), t, strlen(t), NULL, 0, &c, &e) == TM_OK && c.n == 0);
    tm_tool_calls_free(&c);
    /* a NUL inside the text is read to the end, not as its end (cJSON takes it as whitespace) */
    const char nul[] = "<tool_call>{\"name\":\0\"now\"}</tool_call>\0!";
    CHECK(tm_tool_parse(tm_tool_dialect_named("hermes"), nul, sizeof nul - 1, TOOLS, 0, &c, &e) == TM_OK && c.n == 1 &&
          c.content_len == 2 && !memcmp(c.content, "\0!", 2));
    tm_tool_calls_free(&c);
}

/* ---- hold-back ---- */

static uint64_t rng_state = 0x1234567;
static unsigned rnd(unsigned n)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((rng_state >> 33) % n);
}

/* ---- the bare dialects' forms with their special-token markers kept (tm_tool_dialect_kept) ---- */

/* is text one of the special tokens ud (a NULL-terminated list): a vocabulary, for tm_tool_dialect_kept */
static int fake_special(void *ud, const char *text)
{
    for (const char *const *t = ud; *t; t++)
        if (!strcmp(*t, text)) return 1;
    return 0;
}

static const char *const VOCAB_ALL[] = {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "<|tool_call|>", NULL};
/* a v11+ Mistral template that writes [CALL_ID] and an id (Mistral Small 3.2's) */
static const char *SMALL32 = "{{- '[TOOL_CALLS]' + tc.function.name + '[CALL_ID]' + tc.id + '[ARGS]' + args }}";
static tm_tool_dialect kept_m, kept_ma, kept_ma_id, kept_g; /* mistral, mistral_args (without, with the id), granite */

static void kept_init(void)
{
    void *v = (void *)VOCAB_ALL;
    CHECK(tm_tool_dialect_kept(tm_tool_dialect_named("mistral"), "", fake_special, v, &kept_m) == 1);
    CHECK(tm_tool_dialect_kept(tm_tool_dialect_named("mistral_args"), "", fake_special, v, &kept_ma) == 1);
    CHECK(tm_tool_dialect_kept(tm_tool_dialect_named("mistral_args"), SMALL32, fake_special, v, &kept_ma_id) == 1);
    CHECK(tm_tool_dialect_kept(tm_tool_dialect_named("granite"), NULL, fake_special, v, &kept_g) == 1);
}

static void test_holdback(void)
{
    static const char *pieces[] = {
        "<tool_call>", "<tool", "<", "</tool_call>", "[TOOL_CALLS]", "[TOOL", "<|python_tag|>", "<|python",
        "<|tool_call|>", "{\"name\": \"now\", \"arguments\": {}}", "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}",
        "[{\"name\": \"now\", \"arguments\": {}}]", "\n", " ", "Hello", "world.", "{", "[", ";", "}", "]",
        "[ARGS]", "[AR", "now", "now{}", "add[ARGS]{\"a\": 1, \"b\": 2}", "[CALL_ID]x9", "get_weather",
        "<function=now>", "<function=", "</function>", "<parameter=a>", "\n1\n", "</parameter>", "<arg_key>",
        "b</arg_key>", "<arg_value>", "2</arg_value>", "</par", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>",
        "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "<｜tool▁", "function", "\n```json\n", "\n```",
        "<|tool_calls_section_begin|>", "<|tool_call_begin|>", "functions.now:0", "functions.add:1", ":2",
        "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<|tool_calls_section_end|>", "<|tool_", "functions.",
    };
    const char *names[] = {"hermes", "llama3_json", "mistral", "granite", "mistral_args", "qwen3_coder", "glm", "deepseek_v3",
                           "kimi_k2"};
    const tm_tool_dialect *ds[12]; /* and the kept forms of the bare dialects whose markers are special tokens */
    for (int i = 0; i < 9; i++) ds[i] = tm_tool_dialect_named(names[i]);
    ds[9] = &kept_m, ds[10] = &kept_ma, ds[11] = &kept_g;
    long checked = 0;
    for (int round = 0; round < 6000; round++) {
        const tm_tool_dialect *d = ds[round % 12];
        char text[1024];
        size_t n = 0;
        int np = 1 + (int)rnd(8);
        for (int i = 0; i < np; i++) {
            const char *p = pieces[rnd(sizeof pieces / sizeof pieces[0])];
            size_t k = strlen(p);
            if (n + k >= sizeof text) break;
            memcpy(text + n, p, k);
            n += k;
        }
        text[n] = '\0';
        tm_tool_calls c;
        tm_err e = {0};
        CHECK(tm_tool_parse(d, text, n, TOOLS, 0, &c, &e) == TM_OK);
        size_t prev = 0;
        int ok = 1;
        for (size_t k = 0; k <= n && ok; k++) {
            size_t s = tm_tool_safe_prefix(d, text, k);
            ok = s <= k && s >= prev;
            /* what was sent begins the final content, but for whitespace the parse trimmed */
            size_t m = s < c.content_len ? s : c.content_len;
            ok = ok && !memcmp(text, c.content, m);
            for (size_t j = m; ok && j < s; j++) ok = text[j] == ' ' || text[j] == '\n';
            prev = s;
            checked++;
        }
        CHECKF(ok, "%s: %s", d->name, text);
        /* with the calls found, nothing of them went out */
        if (c.n) CHECKF(tm_tool_safe_prefix(d, text, n) <= c.content_len + 2, "%s: %s", d->name, text);
        tm_tool_calls_free(&c);
    }
    CHECK(checked > 4000);
    const tm_tool_dialect *h = tm_tool_dialect_named("hermes");
    CHECK_EQ_INT(tm_tool_safe_prefix(h, "Hi <tool", 8), 3);
    CHECK_EQ_INT(tm_tool_safe_prefix(h, "Hi <toolbox", 11), 11);
    CHECK_EQ_INT(tm_tool_safe_prefix(h, "Hi <tool_call>{", 15), 3);
    CHECK_EQ_INT(tm_tool_safe_prefix(h, "", 0), 0);
    const tm_tool_dialect *l = tm_tool_dialect_named("llama3_json");
    CHECK_EQ_INT(tm_tool_safe_prefix(l, "  ", 2), 0);
    CHECK_EQ_INT(tm_tool_safe_prefix(l, "  {\"na", 6), 0);
    CHECK_EQ_INT(tm_tool_safe_prefix(l, "Sure {", 6), 6);
    const tm_tool_dialect *ma = tm_tool_dialect_named("mistral_args");
    CHECK_EQ_INT(tm_tool_safe_prefix(ma, "get_weather", 11), 0);
    CHECK_EQ_INT(tm_tool_safe_prefix(ma, "get_weather{", 12), 0);
    CHECK_EQ_INT(tm_tool_safe_prefix(ma, "get weather", 11), 11);
    CHECK_EQ_INT(tm_tool_safe_prefix(ma, "Sure [TOOL", 10), 5);
}

/* ---- forced replies ---- */



static void test_grammar(void)
{
    tm_grammar *g = forced("hermes", TOOLS, NULL, 1);
    if (g) {
        forced_yes(TOOLS, "hermes", g, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
                   "get_weather {\"city\":\"Paris\"}");
        forced_yes(TOOLS, "hermes", g,
                   "{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": -2}}\n</tool_call>\n<tool_call>\n"
                   "{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
                   "add {\"a\":1,\"b\":-2}|now {}");
        forced_yes(TOOLS, "hermes", g, "{\"name\":\"now\",\"arguments\":{\"x\":[1,{\"y\":null}]}}\n</tool_call>",
                   "now {\"x\":[1,{\"y\":null}]}");
        CHECK(th_takes(g, "{\"name\": \"rm\", \"arguments\": {}}\n</tool_call>") == 0);
        CHECK(th_takes(g, "{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>") == 0);           /* b required */
        CHECK(th_takes(g, "{\"name\": \"add\", \"arguments\": {\"a\": 1.5, \"b\": 2}}\n</tool_call>") == 0); /* integers */
        CHECK(th_takes(g, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"X\", \"unit\": \"k\"}}\n</tool_call>") == 0);
        CHECK(th_takes(g, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"X\", \"z\": 1}}\n</tool_call>") == 0);
        CHECK(th_takes(g, "{\"name\": \"now\", \"arguments\": {}}") == 0); /* not closed */
        CHECK(th_takes(g, "{\"arguments\": {}, \"name\": \"now\"}\n</tool_call>") == 0);
        tm_grammar_free(g);
    }
    /* the lazy form (auto): from the marker on */
    lazy_case("hermes", "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
              "{\"name\": \"now\", \"arguments\": {}}\n</tool_call>");
    g = forced("hermes", TOOLS, NULL, 0);
    if (g) {
        CHECK(th_takes(g, "{\"name\": \"now\", \"arguments\": {}}\n</tool_call>") == 1);
        CHECK(th_takes(g, "{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n"
                       "{\"name\": \"now\", \"arguments\": {}}\n</tool_call>") == 0);
        tm_grammar_free(g);
    }
    g = forced("hermes", TOOLS, "add", 1);
    if (g) {
        CHECK(th_takes(g, "{\"name\": \"add\", \"arguments\": {\"a\": 0, \"b\": 0}}\n</tool_call>") == 1);
        CHECK(th_takes(g, "{\"name\": \"now\", \"arguments\": {}}\n</tool_call>") == 0);
        tm_grammar_free(g);
    }
    g = forced("llama3_json", TOOLS, NULL, 1);
    if (g) {
        forced_yes(TOOLS, "llama3_json", g, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\", \"unit\": \"f\"}}",
                   "get_weather {\"city\":\"Rome\",\"unit\":\"f\"}");
        forced_yes(TOOLS, "llama3_json", g, "{\"name\": \"now\", \"parameters\": {}}; {\"name\": \"now\", \"parameters\": {}}",
                   "now {}|now {}");
        CHECK(th_takes(g, "{\"name\": \"now\", \"arguments\": {}}") == 0);
        tm_grammar_free(g);
    }
    g = forced("mistral", TOOLS, NULL, 1);
    if (g) {
        forced_yes(TOOLS, "mistral", g, "{\"name\": \"add\", \"arguments\": {\"a\": 3, \"b\": 4}}, {\"name\": \"now\", \"arguments\": {}}]",
                   "add {\"a\":3,\"b\":4}|now {}");
        CHECK(th_takes(g, "]") == 0);
        tm_grammar_free(g);
    }
    g = forced("mistral_args", TOOLS, NULL, 1);
    if (g) {
        forced_yes(TOOLS, "mistral_args", g, "add{\"a\": 3, \"b\": 4}now{}", "add {\"a\":3,\"b\":4}|now {}");
        forced_yes(TOOLS, "mistral_args", g, "get_weather{\"city\": \"Lima\"}", "get_weather {\"city\":\"Lima\"}");
        CHECK(th_takes(g, "now {}") == 0);
        CHECK(th_takes(g, "rm{}") == 0);
        CHECK(th_takes(g, "add{\"a\": 3}") == 0); /* b required */
        tm_grammar_free(g);
    }
    g = forced("mistral_args", TOOLS, "now", 0);
    if (g) {
        CHECK(th_takes(g, "now{}") == 1);
        CHECK(th_takes(g, "now{}now{}") == 0);
        tm_grammar_free(g);
    }
    g = forced("granite", TOOLS, NULL, 0);
    if (g) {
        forced_yes(TOOLS, "granite", g, "{\"name\": \"now\", \"arguments\": {}}]", "now {}");
        tm_grammar_free(g);
    }
    /* schemas with $defs, recursion and rule names the prefix must keep apart in two tools */
    const char *rec =
        "[{\"type\":\"function\",\"function\":{\"name\":\"tree\",\"parameters\":{\"type\":\"object\",\"properties\":"
        "{\"root\":{\"$ref\":\"#/$defs/node\"}},\"required\":[\"root\"],\"$defs\":{\"node\":{\"type\":\"object\","
        "\"properties\":{\"v\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9},\"kids\":{\"type\":\"array\","
        "\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"]}}}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"list\",\"parameters\":{\"type\":\"object\",\"properties\":"
        "{\"root\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"format\":\"date\"},\"maxItems\":2}}}}}]";
    g = forced("hermes", rec, NULL, 1);
    if (g) {
        forced_yes(rec, "hermes", g, "{\"name\": \"tree\", \"arguments\": {\"root\": {\"v\": 1, \"kids\": [{\"v\": 2}, {\"v\": 3, \"kids\": []}]}}}\n</tool_call>",
                   "tree {\"root\":{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[]}]}}");
        forced_yes(rec, "hermes", g, "{\"name\": \"list\", \"arguments\": {\"root\": [\"2024-02-29\"]}}\n</tool_call>",
                   "list {\"root\":[\"2024-02-29\"]}");
        CHECK(th_takes(g, "{\"name\": \"tree\", \"arguments\": {\"root\": {\"v\": 10}}}\n</tool_call>") == 0);
        CHECK(th_takes(g, "{\"name\": \"list\", \"arguments\": {\"root\": [\"a\"]}}\n</tool_call>") == 0);
        tm_grammar_free(g);
    }
    /* a schema the converter refuses: loose tools take any object, strict ones are refused */
    const char *loose = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                        "\"properties\":{\"s\":{\"type\":\"string\",\"pattern\":\"^a+$\"}}}}}]";
    g = forced("hermes", loose, NULL, 0);
    if (g) {
        CHECK(th_takes(g, "{\"name\": \"f\", \"arguments\": {\"s\": \"bbb\", \"t\": [true]}}\n</tool_call>") == 1);
        CHECK(th_takes(g, "{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>") == 0);
        CHECK(th_takes(g, "{\"name\": \"f\", \"arguments\": {\"s\": 5}}\n</tool_call>") == 0); /* s is a string */
        tm_grammar_free(g);
    }
    /* the lenient conversion by itself: what it ignores, what it keeps, what it still refuses */
    static const struct {
        const char *schema, *yes, *no; /* no: NULL = the schema is refused even leniently */
    } len[] = {
        {"{\"type\":\"string\",\"pattern\":\"^a\"}", "\"b\"", "5"},
        {"{\"type\":\"number\",\"minimum\":0.5,\"maximum\":1}", "7.25", "\"x\""},
        {"{\"type\":\"integer\",\"minimum\":1,\"maximum\":3}", "2", "4"},
        {"{\"type\":\"string\",\"format\":\"email\",\"maxLength\":3}", "\"abc\"", "\"abcd\""},
        {"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-01-31\"", "\"x\""},
        {"{\"enum\":[\"a\",\"b\"],\"minLength\":3}", "\"a\"", "\"c\""},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"uniqueItems\":true,\"contains\":{}}", "[1,1]", "[\"a\"]"},
        {"{\"not\":{\"type\":\"string\"},\"type\":\"boolean\"}", "true", "1"},
        {"{\"$ref\":\"http://x/y\"}", NULL, NULL},
        {"{\"anyOf\":[{}],\"oneOf\":[{}]}", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof len / sizeof len[0]; i++) {
        char *src2 = NULL, *strict_src = NULL;
        tm_err e2 = {0};
        int rc2 = tm_json_schema_gbnf_lenient(len[i].schema, strlen(len[i].schema), &src2, &e2);
        int rcs = tm_json_schema_gbnf(len[i].schema, strlen(len[i].schema), &strict_src, &e2);
        CHECKF(i == 2 || i == 4 ? rcs == TM_OK : rcs == TM_E_UNSUPPORTED, "strict %s: %d", len[i].schema, rcs);
        free(strict_src);
        if (!len[i].yes) {
            CHECKF(rc2 == TM_E_UNSUPPORTED && !src2, "lenient %s: %d", len[i].schema, rc2);
            continue;
        }
        tm_grammar *lg2 = NULL;
        CHECKF(rc2 == TM_OK && tm_grammar_parse(&lg2, src2, strlen(src2), &e2) == TM_OK, "lenient %s: %s",
               len[i].schema, e2.msg);
        if (lg2) CHECKF(th_takes(lg2, len[i].yes) == 1 && th_takes(lg2, len[i].no) == 0, "lenient %s", len[i].schema);
        tm_grammar_free(lg2);
        free(src2);
    }
    const char *strict = "[{\"type\":\"function\",\"function\":{\"name\":\"ok\"}},{\"type\":\"function\",\"function\":"
                         "{\"name\":\"f\",\"strict\":true,\"parameters\":{\"type\":\"object\",\"properties\":{\"s\":"
                         "{\"type\":\"string\",\"pattern\":\"^a+$\"}}}}}]";
    char *src = NULL;
    tm_err e = {0};
    int rc = tm_tool_grammar(tm_tool_dialect_named("hermes"), strict, NULL, 1, 0, &src, &e);
    CHECKF(rc == TM_E_UNSUPPORTED && strstr(e.msg, "tools[1].function.parameters") && strstr(e.msg, "pattern") && !src,
           "%d %s", rc, e.msg);
    free(src);
    rc = tm_tool_grammar(tm_tool_dialect_named("hermes"), strict, "ok", 1, 0, &src, &e); /* f not asked for */
    CHECKF(rc == TM_OK && src, "%s", e.msg);
    free(src);
    rc = tm_tool_grammar(tm_tool_dialect_named("hermes"), TOOLS, "nope", 1, 0, &src, &e);
    CHECKF(rc == TM_E_INVALID && strstr(e.msg, "nope") && !src, "%d %s", rc, e.msg);
    rc = tm_tool_grammar(tm_tool_dialect_named("hermes"), "[]", NULL, 1, 0, &src, &e);
    CHECK(rc == TM_E_FORMAT && !src);
}

/* 1 where text is a viable start of g's language (the matcher takes it), else 0 */
static int g_starts(const tm_grammar *g, const char *text)
{
    tm_gmatch *m = NULL;
    tm_err e = {0};
    if (tm_gmatch_new(&m, g, &e) != TM_OK) return 0;
    int ok = tm_gmatch_feed(m, text, strlen(text)) == 1;
    tm_gmatch_free(m);
    return ok;
}

/* The bare dialects whose markers are special tokens, kept (tm_tool_dialect_kept): made only where the
 * vocabulary has the markers a call writes, not bare, their markers kept; mistral_args' calls written in full
 * ([CALL_ID] and an id optional where the template shows it); their grammars, parse and hold-back. auto's lazy
 * trigger for every dialect, each a start of its lazy grammar's language; llama3_json's anchored. */
static void test_kept(void)
{
    const tm_tool_dialect *ma = tm_tool_dialect_named("mistral_args"), *m = tm_tool_dialect_named("mistral");
    const tm_tool_dialect *gr = tm_tool_dialect_named("granite");
    static const char *const no_args[] = {"[TOOL_CALLS]", "<|tool_call|>", NULL};
    static const char *const no_id[] = {"[TOOL_CALLS]", "[ARGS]", NULL};
    static const char *const none[] = {NULL};
    tm_tool_dialect k, k0;
    memset(&k, 0x5a, sizeof k);
    k0 = k;
    /* the vocabulary lacks a marker a call writes: d as it is, out untouched */
    CHECK(tm_tool_dialect_kept(ma, SMALL32, fake_special, (void *)no_args, &k) == 0 && !memcmp(&k, &k0, sizeof k));
    CHECK(tm_tool_dialect_kept(m, "", fake_special, (void *)none, &k) == 0 && !memcmp(&k, &k0, sizeof k));
    CHECK(tm_tool_dialect_kept(gr, "", fake_special, (void *)no_id, &k) == 0 && !memcmp(&k, &k0, sizeof k));
    const char *others[] = {"hermes", "llama3_json", "harmony", "deepseek_v3", "qwen3_coder", "command_r"};
    for (int i = 0; i < 6; i++)
        CHECKF(tm_tool_dialect_kept(tm_tool_dialect_named(others[i]), "", fake_special, (void *)VOCAB_ALL, &k) == 0,
               "%s has no kept form", others[i]);
    CHECK(tm_tool_dialect_kept(NULL, "", fake_special, (void *)VOCAB_ALL, &k) == 0);
    /* [CALL_ID] where the template shows it and the vocabulary has it */
    CHECK(tm_tool_dialect_kept(ma, SMALL32, fake_special, (void *)no_id, &k) == 1 && !k.gen_id);
    CHECK(!kept_ma.bare && kept_ma.keep == ma->tokens && !strcmp(kept_ma.gen_sep, "[TOOL_CALLS]") &&
          !strcmp(kept_ma.gen_args, "[ARGS]") && !kept_ma.gen_id && !strcmp(kept_ma.gen_open, "[TOOL_CALLS]") &&
          kept_ma.id_len == 9 && !strcmp(kept_ma.name, "mistral_args"));
    CHECK(kept_ma_id.gen_id == ma->tokens_id && !strcmp(kept_ma_id.gen_args, "[ARGS]"));
    CHECK(!kept_m.bare && kept_m.keep == m->tokens && !strcmp(kept_m.gen_sep, m->gen_sep) && !kept_m.gen_args &&
          !strcmp(kept_m.keep[0], "[TOOL_CALLS]") && !kept_m.keep[1]);
    CHECK(!kept_g.bare && !strcmp(kept_g.keep[0], "<|tool_call|>") && !kept_g.keep[1]);

    /* the grammars: mistral_args' calls in full, the marker before each */
    tm_grammar *g = grammar_of(&kept_ma_id, TOOLS, NULL, 1, 1);
    if (g) {
        CHECK(th_takes(g, "[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{\"city\": \"Oslo\"}"
                          "[TOOL_CALLS]now[ARGS]{}") == 1);
        CHECK(th_takes(g, "[TOOL_CALLS]now[ARGS]{}") == 1);
        CHECK(th_takes(g, "[TOOL_CALLS]now{}") == 0);             /* [ARGS] written */
        CHECK(th_takes(g, "now[ARGS]{}") == 0);                   /* from the marker on */
        CHECK(th_takes(g, "[TOOL_CALLS]now[CALL_ID]a1[ARGS]{}") == 0); /* an id of 9 */
        CHECK(th_takes(g, "[TOOL_CALLS]now[ARGS]{}now[ARGS]{}") == 0);
        tm_grammar_free(g);
    }
    /* lazy: a space may follow the marker (a SentencePiece tokenizer's next word: Mistral 7B v0.3's
       "[TOOL_CALLS] [") */
    g = grammar_of(&kept_m, TOOLS, NULL, 1, 1);
    if (g) {
        CHECK(th_takes(g, "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}}]") == 1);
        CHECK(th_takes(g, "[TOOL_CALLS] [{\"name\": \"now\", \"arguments\": {}}]") == 1);
        CHECK(th_takes(g, "[TOOL_CALLS]  [{\"name\": \"now\", \"arguments\": {}}]") == 0);
        CHECK(th_takes(g, "[{\"name\": \"now\", \"arguments\": {}}]") == 0);
        tm_grammar_free(g);
    }
    g = grammar_of(&kept_ma, TOOLS, NULL, 0, 1);
    if (g) {
        CHECK(th_takes(g, "[TOOL_CALLS] now[ARGS]{}") == 1);
        CHECK(th_takes(g, "[TOOL_CALLS]now[ARGS]{}") == 1);
        tm_grammar_free(g);
    }
    g = grammar_of(tm_tool_dialect_named("hermes"), TOOLS, NULL, 1, 1); /* (not where the marker is text) */
    if (g) {
        CHECK(th_takes(g, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>") == 1);
        CHECK(th_takes(g, "<tool_call> \n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>") == 0);
        tm_grammar_free(g);
    }
    parse_d(TOOLS, 0, &kept_m, "[TOOL_CALLS] [{\"name\": \"now\", \"arguments\": {}}]", "now {}", "");
    g = grammar_of(&kept_ma, TOOLS, NULL, 1, 0);
    if (g) { /* forced: after gen_open, at the prompt's end */
        CHECK(th_takes(g, "add[ARGS]{\"a\": 3, \"b\": 4}[TOOL_CALLS]now[ARGS]{}") == 1);
        CHECK(th_takes(g, "now[CALL_ID]a1b2c3d4e[ARGS]{}") == 0); /* no [CALL_ID]: the template writes none */
        CHECK(th_takes(g, "add{\"a\": 3, \"b\": 4}") == 0);
        tm_grammar_free(g);
    }
    parse_d(TOOLS, 0, &kept_ma, "[TOOL_CALLS]add[ARGS]{\"a\": 3, \"b\": 4}[TOOL_CALLS]now[ARGS]{}",
            "add {\"a\":3,\"b\":4}|now {}", "");
    parse_d(TOOLS, 0, &kept_ma_id, "Let me see.[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{\"city\": \"Oslo\"}",
            "get_weather {\"city\":\"Oslo\"}", "Let me see.");
    /* not bare: a reply without the marker is text */
    parse_d(TOOLS, 0, &kept_ma, "now{}", "", "now{}");
    const char *list = "[{\"name\": \"now\", \"arguments\": {}}]";
    parse_d(TOOLS, 0, &kept_m, list, "", list);
    parse_d(TOOLS, 0, &kept_m, "Sure.[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}}]", "now {}", "Sure.");
    parse_d(TOOLS, 0, &kept_g, "<|tool_call|>[{\"name\": \"now\", \"arguments\": {}}]", "now {}", "");
    /* the hold-back: text goes out as it comes (the bare forms held a first word, a leading bracket) */
    CHECK_EQ_INT(tm_tool_safe_prefix(&kept_ma, "Once", 4), 4);
    CHECK_EQ_INT(tm_tool_safe_prefix(ma, "Once", 4), 0);
    CHECK_EQ_INT(tm_tool_safe_prefix(&kept_ma, "Sure [TOOL_CALLS]now", 20), 5);
    CHECK_EQ_INT(tm_tool_safe_prefix(&kept_m, "[1, 2] are", 10), 10);
    CHECK_EQ_INT(tm_tool_safe_prefix(m, "[1, 2] are", 10), 0);
    CHECK_EQ_INT(tm_tool_safe_prefix(&kept_g, "Hi <|tool", 9), 3);

    /* auto's lazy triggers: the marker where the text shows it (harmony's recipient); llama3_json's call start,
     * anchored; none for the bare dialects' special tokens not kept. Each is a start of the lazy grammar's language */
    static const struct {
        const char *dn, *trig;
        int anchored;
    } trig[] = {
        {"hermes", "<tool_call>", 0},
        {"qwen3_coder", "<tool_call>", 0},
        {"glm", "<tool_call>", 0},
        {"seed_oss", "<seed:tool_call>", 0},
        {"minimax", "<minimax:tool_call>", 0},
        {"command_r", "<|START_ACTION|>", 0},
        {"deepseek_v3", "<｜tool▁calls▁begin｜>", 0},
        {"kimi_k2", "<|tool_calls_section_begin|>", 0},
        {"llama3_json", "{\"name\"", 1},
        {"mistral", NULL, 0},
        {"mistral_args", NULL, 0},
        {"granite", NULL, 0},
        {"harmony", "to=functions.", 0},
    };
    for (size_t i = 0; i < sizeof trig / sizeof trig[0] + 4; i++) {
        const tm_tool_dialect *kd[4] = {&kept_m, &kept_ma, &kept_ma_id, &kept_g};
        size_t nt = sizeof trig / sizeof trig[0];
        const tm_tool_dialect *d = i < nt ? tm_tool_dialect_named(trig[i].dn) : kd[i - nt];
        const char *want = i < nt ? trig[i].trig : d->open;
        int anchored = -1;
        const char *t = tm_tool_lazy_trigger(d, &anchored);
        CHECKF(want ? t && !strcmp(t, want) : !t, "%s: trigger %s", d->name, t ? t : "none");
        CHECKF(anchored == (i < nt && trig[i].anchored), "%s: anchored %d", d->name, anchored);
        if (!t) continue;
        g = grammar_of(d, TOOLS, NULL, 1, 1);
        CHECKF(g && g_starts(g, t), "%s: the lazy grammar refuses its trigger %s", d->name, t);
        tm_grammar_free(g);
    }
    int anchored = -1;
    CHECK(tm_tool_lazy_trigger(NULL, &anchored) == NULL && anchored == 0);
    /* llama3_json: a reply that opens with the call's start is held from there; other JSON is not a call */
    lazy_case("llama3_json",
              "{\"name\": \"now\", \"parameters\": {}}; {\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}",
              "{\"names\": []}");
}

/* what a harmony reply writes before a call's recipient (auto's lazy grammar starts there): nothing or a space (the
 * reply's first message, its "<|start|>assistant" the prompt's), the channel, the start marker, an analysis before */
static const char *const HARMONY_BEFORE[] = {"", " ", "<|channel|>commentary ", "<|start|>assistant<|channel|>commentary ",
                                             "<|start|>assistant ",
                                             "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant"
                                             "<|channel|>commentary "};
#define N_HARMONY_BEFORE (sizeof HARMONY_BEFORE / sizeof HARMONY_BEFORE[0])

/* harmony's lazy grammar (auto), from the recipient on: every header form text/harmony.c reads after it (the channel
 * after the recipient or none, the content type bare, constrained or none), the arguments held to the tool's schema,
 * then <|call|> or the reply's end, and nothing after <|call|>; each form, after what a reply writes before the
 * recipient, reads as the call. An undeclared tool, arguments the schema refuses, another channel: refused */
static void test_harmony_lazy(void)
{
    const tm_tool_dialect *d = tm_tool_dialect_named("harmony");
    int anchored = -1;
    const char *trig = tm_tool_lazy_trigger(d, &anchored);
    CHECK(trig && !strcmp(trig, "to=functions.") && anchored == 0);
    CHECK(d->skip_open && !strcmp(d->skip_open, "<|channel|>analysis<|message|>") && !strcmp(d->skip_close, "<|end|>"));
    tm_grammar *g = grammar_of(d, TOOLS, NULL, 1, 1);
    if (!g) return;
    static const char *const heads[] = {
        " <|constrain|>json<|message|>", "<|channel|>commentary json<|message|>",
        "<|channel|>commentary <|constrain|>json<|message|>", " <|channel|>commentary<|message|>", " json<|message|>",
        "<|constrain|>json<|message|>", "<|message|>",
    };
    static const char *const args[] = {"{\"city\": \"Oslo\"}", "{\"city\":\"Oslo\"}", "{ \"city\" : \"Oslo\" }"};
    int n = 0;
    for (size_t h = 0; h < sizeof heads / sizeof heads[0]; h++)
        for (size_t a = 0; a < 3; a++)
            for (int call = 0; call < 2; call++, n++) {
                char form[256], full[512];
                snprintf(form, sizeof form, "to=functions.get_weather%s%s%s", heads[h], args[a], call ? "<|call|>" : "");
                /* byte by byte: each prefix a start of the language, the whole a match; after <|call|> nothing more */
                tm_gmatch *m = NULL;
                tm_err e = {0};
                int fed = tm_gmatch_new(&m, g, &e) == TM_OK;
                for (size_t k = 0; fed && form[k]; k++) fed = tm_gmatch_feed(m, form + k, 1) == 1;
                CHECKF(fed && tm_gmatch_accepting(m) && tm_gmatch_can_continue(m) == !call, "harmony lazy: %s", form);
                tm_gmatch_free(m);
                snprintf(full, sizeof full, "%s%s", HARMONY_BEFORE[n % N_HARMONY_BEFORE], form);
                parse_d(TOOLS, 0, d, full, "get_weather {\"city\":\"Oslo\"}", "");
            }
    CHECK(th_takes(g, "to=functions.now<|message|>{}") == 1);
    CHECK(th_takes(g, "to=functions.add <|constrain|>json<|message|>{\"a\": 1, \"b\": 2}<|call|>") == 1);
    static const char *const bad[] = {
        "to=functions.nope<|message|>{}",                                   /* not declared */
        "to=functions.get<|message|>{\"city\": \"Oslo\"}",                  /* a piece of a name */
        "to=functions.get_weatherX<|message|>{\"city\": \"Oslo\"}",
        "to=functions.add<|message|>{\"a\": 1}",                            /* b required */
        "to=functions.add<|message|>{\"a\": 1.5, \"b\": 2}",                /* integers */
        "to=functions.get_weather<|message|>{\"city\": \"Oslo\", \"z\": 1}", /* no other properties */
        "to=functions.get_weather<|message|>{\"city\": \"X\", \"unit\": \"k\"}",
        "to=functions.get_weather<|message|>[1]",
        "to=functions.get_weather<|channel|>analysis<|message|>{\"city\": \"Oslo\"}",
        "to=functions.get_weather <|constrain|>yaml<|message|>{\"city\": \"Oslo\"}",
        "to=functions.get_weather<|message|>{\"city\": \"Oslo\"}<|call|><|start|>",
        "to=functions.get_weather<|message|>{\"city\": \"Oslo\"} Done.",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECKF(th_takes(g, bad[i]) == 0, "harmony lazy takes %s", bad[i]);
    CHECKF(n == 42, "%d forms", n);
    tm_grammar_free(g);
    /* the forced grammar is as it was: after gen_open, one call in gen_args' form */
    g = forced("harmony", TOOLS, NULL, 1);
    if (g) {
        forced_yes(TOOLS, "harmony", g, "get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}",
                   "get_weather {\"city\":\"Oslo\"}");
        CHECK(th_takes(g, "get_weather<|channel|>commentary json<|message|>{\"city\": \"Oslo\"}") == 0);
        CHECK(th_takes(g, "to=functions.now <|constrain|>json<|message|>{}") == 0);
        tm_grammar_free(g);
    }
}

static void test_ids(void)
{
    char a[40], b[40];
    tm_tool_call_id(tm_tool_dialect_named("mistral"), 1, a, sizeof a);
    tm_tool_call_id(tm_tool_dialect_named("mistral"), 2, b, sizeof b);
    int alnum = 1;
    for (const char *p = a; *p; p++)
        alnum &= (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
    CHECKF(strlen(a) == 9 && alnum && strcmp(a, b), "%s %s", a, b);
    tm_tool_call_id(tm_tool_dialect_named("mistral_args"), 3, b, sizeof b);
    CHECKF(strlen(b) == 9, "%s", b);
    tm_tool_call_id(tm_tool_dialect_named("hermes"), 1, a, sizeof a);
    CHECKF(strlen(a) == 29 && !strncmp(a, "call_", 5), "%s", a);
    tm_tool_call_id(NULL, 7, b, 8);
    CHECK(strlen(b) == 7);
}


/* ---- 9. a reply still being written (tm_tool_parse_partial) ---- */

/* what a prefix of a reply reports agrees with the whole reply's calls c: each whole call is c's of the same
 * number, and the call the prefix ends inside names c's next one, with the start of its arguments and its id */
static int partial_agrees(const tm_tool_dialect *d, const cJSON *tools, const char *text, size_t k, const tm_tool_calls *c)
{
    tm_tool_calls p;
    tm_tool_call part;
    tm_err e = {0};
    if (tm_tool_parse_partial(d, text, k, tools, &p, &part, &e) != TM_OK) return 0;
    int ok = p.n <= c->n;
    for (int i = 0; ok && i < p.n; i++)
        ok = !strcmp(p.v[i].name, c->v[i].name) && !strcmp(p.v[i].arguments, c->v[i].arguments) &&
             !p.v[i].id == !c->v[i].id && (!p.v[i].id || !strcmp(p.v[i].id, c->v[i].id));
    if (ok && part.name) {
        const tm_tool_call *w = p.n < c->n ? &c->v[p.n] : NULL;
        ok = w && !strcmp(part.name, w->name) && !strncmp(w->arguments, part.arguments, strlen(part.arguments)) &&
             (!part.id || (w->id && !strcmp(part.id, w->id)));
    }
    if (!ok)
        fprintf(stderr, "%s: prefix %zu of\n%s\n  reads %d calls%s%s %s\n", d->name, k, text, p.n, part.name ? ", then " : "",
                part.name ? part.name : "", part.arguments ? part.arguments : "");
    tm_tool_calls_free(&p);
    tm_tool_call_free(&part);
    return ok;
}

/* one random text of g's language (bytes drawn among those it takes; ASCII first, closing bytes favoured so
 * that it ends), into buf [cap] after what it holds; 0 where it ran too long */
static int grammar_walk(const tm_grammar *g, char *buf, size_t cap)
{
    tm_gmatch *m = NULL;
    tm_err e = {0};
    if (tm_gmatch_new(&m, g, &e) != TM_OK) return 0;
    size_t n = strlen(buf);
    int ok = 0;
    while (n + 1 < cap) {
        if (tm_gmatch_accepting(m) && (!tm_gmatch_can_continue(m) || rnd(3) == 0)) {
            ok = 1;
            break;
        }
        unsigned char take[256], close[16];
        int nt = 0, nc = 0;
        for (int b = 1; b < 256; b++) {
            unsigned char c = (unsigned char)b;
            if ((b >= 0x80 && nt) || !tm_gmatch_would_take(m, &c, 1)) continue;
            if (strchr("\"}]<>\n", b) && nc < 16) close[nc++] = c;
            if (b < 0x80 || !nt) take[nt++] = c;
        }
        if (!nt) break;
        unsigned char c = nc && rnd(3) == 0 ? close[rnd((unsigned)nc)] : take[rnd((unsigned)nt)];
        tm_gmatch_feed(m, &c, 1);
        buf[n++] = (char)c;
        buf[n] = '\0';
    }
    tm_gmatch_free(m);
    return ok;
}

static void test_partial(void)
{
    cJSON *tools = cJSON_Parse(TOOLS); /* (the partial reading takes the tools parsed) */
    /* every dialect's forced replies (parallel calls), cut at every byte */
    const char *names[] = {"hermes", "llama3_json", "mistral", "mistral_args", "granite", "qwen3_coder", "glm",
                           "seed_oss", "minimax", "harmony", "deepseek_v3", "command_r", "kimi_k2"};
    /* and the lazy replies of the kept forms and harmony (after what a reply writes before the recipient) */
    const tm_tool_dialect *kd[5] = {&kept_m, &kept_ma, &kept_ma_id, &kept_g, tm_tool_dialect_named("harmony")};
    size_t nn = sizeof names / sizeof names[0];
    for (size_t di = 0; di < nn + 5; di++) {
        const tm_tool_dialect *d = di < nn ? tm_tool_dialect_named(names[di]) : kd[di - nn];
        tm_grammar *g = grammar_of(d, TOOLS, NULL, 1, di >= nn);
        int walks = 0, good = 0, with_part = 0;
        for (int it = 0; g && it < 60 && walks < 25; it++) {
            char text[1024];
            snprintf(text, sizeof text, "%s", di < nn ? d->gen_open : d->harmony ? HARMONY_BEFORE[rnd(N_HARMONY_BEFORE)] : "");
            size_t open = strlen(text);
            if (!grammar_walk(g, text, sizeof text)) continue;
            walks++;
            tm_tool_calls c;
            tm_err e = {0};
            if (tm_tool_parse(d, text, strlen(text), TOOLS, 0, &c, &e) != TM_OK) continue;
            int ok = c.n >= 1;
            if (!ok) fprintf(stderr, "%s: a forced reply read as no calls:\n%s\n", d->name, text);
            for (size_t k = open; ok && k <= strlen(text); k++) {
                ok = partial_agrees(d, tools, text, k, &c);
                tm_tool_calls p;
                tm_tool_call part;
                if (ok && tm_tool_parse_partial(d, text, k, tools, &p, &part, &e) == TM_OK) {
                    with_part += part.name && *part.arguments;
                    tm_tool_calls_free(&p);
                    tm_tool_call_free(&part);
                }
            }
            good += ok;
            tm_tool_calls_free(&c);
        }
        CHECKF(walks >= 10 && good == walks, "%s: %d of %d forced replies read alike cut anywhere", d->name, good,
               walks);
        CHECKF(with_part > 0, "%s: no prefix streamed arguments", d->name);
        tm_grammar_free(g);
    }
    /* written by hand in every dialect's forms (spacing, key order, strings holding the arguments, null, the older
     * and optional markers), alone, with text around, and two in a row: where that reads as calls, each prefix agrees */
    static const struct {
        const char *dn, *text;
    } forms[] = {
        {"hermes", "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"},
        {"hermes", "<tool_call>{\"arguments\": {\"city\": \"Oslo\"}, \"name\": \"get_weather\"}</tool_call>"},
        {"hermes", "<tool_call>\n{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 1, \\\"b\\\": 2}\"}\n</tool_call>"},
        {"hermes", "<tool_call>{\"name\":\"now\",\"arguments\":null}</tool_call>"},
        {"hermes", "<tool_call>\n{\"name\": \"add\", \"parameters\": {\"a\": 1.0, \"b\": 2e0}, \"arguments\": {\"b\": 2}}\n</tool_call>"},
        {"hermes", "<tool_call>\n{ \"name\" : \"get_weather\" ,\n \"arguments\" : { \"city\" : \"S\\u00e3o Paulo \\\"SP\\\"\" } }"},
        {"llama3_json", "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}"},
        {"llama3_json", "<|python_tag|>{\"name\": \"now\", \"parameters\": {}}; {\"name\": \"add\", \"parameters\": {\"a\": 3, \"b\": 4}}"},
        {"mistral", "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\", \"unit\": \"c\"}}, {\"name\": \"now\", \"arguments\": {}}]"},
        {"mistral", "[{\"name\": \"add\", \"arguments\": {\"a\": -1, \"b\": 0.5}}]"},
        {"mistral_args", "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}[TOOL_CALLS]now[ARGS]{}"},
        {"mistral_args", "get_weather[CALL_ID]a1b2c3d4e[ARGS]{\"city\": \"Kyiv\"}"},
        {"mistral_args", "add{\"a\": 1, \"b\": 2}now{}"},
        {"granite", "<|tool_call|>[{\"name\": \"now\", \"arguments\": {}}, {\"name\": \"add\", \"arguments\": {\"a\": 5, \"b\": 6}}]"},
        {"qwen3_coder", "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew\nYork\n</parameter>\n<parameter=unit>\nf\n</parameter>\n"
                        "</function>\n</tool_call>"},
        {"qwen3_coder", "<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n<parameter=b>\n2\n</parameter>\n</function>\n</tool_call>"},
        {"glm", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Rome</arg_value>\n</tool_call>"},
        {"glm", "<tool_call>now\n</tool_call>"},
        {"seed_oss", "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Seoul</parameter>\n</function>\n</seed:tool_call>"},
        {"minimax", "<minimax:tool_call>\n<invoke name=\"get_weather\"><parameter name=\"city\">Lima</parameter></invoke>\n"
                    "<invoke name=\"now\"></invoke>\n</minimax:tool_call>"},
        {"deepseek_v3", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Nice\"}<｜tool▁call▁end｜>"
                        "<｜tool▁call▁begin｜>now<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
        {"deepseek_v3", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>add\n```json\n{\"a\": 1, \"b\": 2}\n```"
                        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
        {"kimi_k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
                    "{\"city\": \"Bern\"}<|tool_call_end|><|tool_call_begin|>functions.now:1<|tool_call_argument_begin|>{}"
                    "<|tool_call_end|><|tool_calls_section_end|>"},
        {"command_r", "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}},\n"
                      "    {\"tool_call_id\": \"1\", \"tool_name\": \"now\", \"parameters\": {}}\n]<|END_ACTION|>"},
        {"harmony", "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Quito\"}<|call|>"},
        {"harmony", "<|start|>assistant to=functions.add<|channel|>commentary json<|message|>{\"a\": 1, \"b\": 2}<|call|>"},
        {"harmony", " to=functions.now<|channel|>commentary <|constrain|>json<|message|>{}<|call|>"},
        {"harmony", "<|channel|>analysis<|message|>Weather.<|end|><|start|>assistant<|channel|>commentary "
                    "to=functions.get_weather json<|message|>{\"city\": \"Lima\"}"},
    };
    static const char *around[] = {"", "", "Sure. ", "Let me check.\n\n", " "};
    int agreed = 0, read = 0;
    size_t nf = sizeof forms / sizeof forms[0];
    for (size_t i = 0; i < nf; i++)
        for (size_t j = 0; j <= nf; j++) {
            if (j < nf && strcmp(forms[i].dn, forms[j].dn)) continue;
            const tm_tool_dialect *d = tm_tool_dialect_named(forms[i].dn);
            char text[2048];
            snprintf(text, sizeof text, "%s%s%s%s", j < nf ? around[rnd(5)] : "", forms[i].text,
                     j < nf ? around[rnd(5)] : "", j < nf ? forms[j].text : "");
            size_t n = strlen(text);
            tm_tool_calls c;
            tm_err e = {0};
            CHECK(tm_tool_parse(d, text, n, TOOLS, 0, &c, &e) == TM_OK);
            if (j == nf) CHECKF(c.n > 0, "%s: no calls in %s", d->name, text); /* each form alone is calls */
            if (c.n) {
                read++;
                int ok = 1;
                for (size_t k = 0; k <= n && ok; k++) ok = partial_agrees(d, tools, text, k, &c);
                agreed += ok;
            }
            tm_tool_calls_free(&c);
        }
    CHECKF(read >= 40 && agreed == read, "%d of %d texts read as calls agree with every prefix", agreed, read);
    /* by hand: the first of "arguments" / "parameters" is read (so a stream that read one knows), a string
     * holding the arguments goes whole, a name still being written is no call yet */
    parse_case("hermes", "<tool_call>{\"name\": \"add\", \"parameters\": {\"a\": 1}, \"arguments\": {\"b\": 2}}</tool_call>",
               "add {\"a\":1}", "");
    struct {
        const char *dn, *text, *name, *args;
    } cases[] = {
        {"hermes", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par", "get_weather", "{\"city\":\"Par"},
        {"hermes", "<tool_call>\n{\"name\": \"get_wea", NULL, NULL},
        {"hermes", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city", "get_weather", ""},
        {"hermes", "<tool_call>\n{\"name\": \"nope\", \"arguments\": {", NULL, NULL},
        {"hermes", "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 12", "add", "{\"a\":"},
        {"mistral_args", "[TOOL_CALLS]get_weather", NULL, NULL},
        {"mistral_args", "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"P", "get_weather", "{\"city\":\"P"},
        {"qwen3_coder", "<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Fran", "get_weather", "{\"city\":\"San Fran"},
        {"qwen3_coder", "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</para", "get_weather", "{\"city\":\"Oslo"},
        {"qwen3_coder", "<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n<parameter=b>\n2", "add", "{\"a\":1"},
        {"glm", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Ro", "get_weather", "{\"city\":\"Ro"},
        {"kimi_k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:3", NULL, NULL},
        {"kimi_k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:3<|tool_call_argument_begin|>{\"ci",
         "get_weather", "{\"ci"},
        {"harmony", "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Ly", "get_weather",
         "{\"city\":\"Ly"},
        {"harmony", " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Ly", "get_weather",
         "{\"city\":\"Ly"},
        {"harmony", "<|start|>assistant to=functions.add<|channel|>commentary <|constrain|>json<|message|>{\"a\": 12", "add",
         "{\"a\":"},
        {"harmony", " to=functions.get_weather<|channel|>commentary json", NULL, NULL},
        {"command_r", "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"add\", \"parameters\": {\"a\": 1,", "add",
         "{\"a\":1,"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tm_tool_calls p;
        tm_tool_call part;
        tm_err e = {0};
        const tm_tool_dialect *d = tm_tool_dialect_named(cases[i].dn);
        CHECK(tm_tool_parse_partial(d, cases[i].text, strlen(cases[i].text), tools, &p, &part, &e) == TM_OK);
        CHECKF(p.n == 0 && (cases[i].name ? part.name && !strcmp(part.name, cases[i].name) && !strcmp(part.arguments, cases[i].args)
                                          : !part.name),
               "%s: %s: %d calls, part %s %s", cases[i].dn, cases[i].text, p.n, part.name ? part.name : "-",
               part.arguments ? part.arguments : "-");
        if (!strcmp(cases[i].dn, "kimi_k2") && part.name) CHECK(part.id && !strcmp(part.id, "functions.get_weather:3"));
        tm_tool_calls_free(&p);
        tm_tool_call_free(&part);
    }
    /* an XML argument key the text ends inside, at and past the 256 bytes a key may have (fuzz_toolcall found a
       reply ending 256 bytes into a key read past its end): still open up to 256, then not a call */
    for (int xd = 0; xd < 2; xd++)
        for (int kn = 254; kn <= 258; kn++) {
            char text[512];
            int n = snprintf(text, sizeof text, "%s", xd ? "<tool_call>get_weather\n<arg_key>"
                                                         : "<tool_call>\n<function=get_weather>\n<parameter=");
            memset(text + n, 'k', (size_t)kn);
            text[n + kn] = '\0';
            tm_tool_calls p;
            tm_tool_call part;
            tm_err e = {0};
            const tm_tool_dialect *d = tm_tool_dialect_named(xd ? "glm" : "qwen3_coder");
            CHECK(tm_tool_parse_partial(d, text, strlen(text), tools, &p, &part, &e) == TM_OK);
            CHECKF(p.n == 0 && (kn <= 256 ? part.name && !strcmp(part.name, "get_weather") : !part.name),
                   "%s: a key of %d bytes the text ends inside: %d calls, part %s", d->name, kn, p.n,
                   part.name ? part.name : "-");
            tm_tool_calls_free(&p);
            tm_tool_call_free(&part);
        }
    cJSON_Delete(tools);
}

int main(void)
{
    test_detect();
    test_check();
    test_parse();
    kept_init();
    test_holdback();
    test_grammar();
    test_kept();
    test_harmony_lazy();
    test_ids();
    test_partial();
    return th_done("test_toolcall");
}
