/* tests/test_serve_tools.c: tool calling through the server (serve/, text/toolcall.h).
 *
 * 1. The request parser: tools, tool_choice, parallel_tool_calls and the messages of a tool
 *    conversation (an assistant's tool_calls with their arguments read as objects, tool results)
 *    normalised for the chat template; every malformed field a 400 naming it.
 * 2. Those messages through the real chat templates of the conformance set (Qwen2.5, Llama 3.1,
 *    Mistral Nemo): each renders the calls and results in its own words.
 * 3. The server on the demo model with Qwen2.5's template (the hermes dialect): tool_choice
 *    required and named give calls whose arguments hold to the tool's schema, as JSON and streamed
 *    (the same calls, streamed as they are written: each call in pieces whose first names it and
 *    whose arguments add up to the JSON answer's; a call max_tokens cut stays in the stream as far
 *    as it went); parallel_tool_calls false gives one; auto and none give text, the stream's
 *    equal to the JSON answer's; a server whose template shows no dialect refuses a forced call
 *    unless started with --tool-parser; every dialect given by hand (the XML ones too) gives forced
 *    calls held to the schemas, the same streamed.
 * 4. Anthropic's Messages API over the same machinery: on the model's own template, the chat
 *    endpoint's greedy answer (system apart, content a string or text blocks) as a message and as its
 *    stream events, stop sequences, refusals by field; a tool conversation translated block by block
 *    into the chat request (exactly), tool_choice any / tool giving tool_use blocks with the calls
 *    the chat endpoint gives, streamed as content blocks (start, input_json_deltas as the input is
 *    written, stop) in order,
 *    a conversation with tool_use and tool_result answered as the chat endpoint answers its OpenAI
 *    twin, thinking blocks from a reasoning template; malformed blocks and server tools refused.
 *    OpenAI's Responses API likewise: its input items translated exactly, function_call items with the
 *    chat endpoint's calls, a call's output answered as the chat twin, reasoning items, text.format,
 *    the stream's events numbered, in order and agreeing with the final response (a call's arguments
 *    in deltas as written; a cut one incomplete); refusals by field;
 *    stored responses: GET as answered, previous_response_id answering as the same conversation sent
 *    whole (a call's output by its call_id too), store false, DELETE, the store's LRU bounds.
 * 5. Reasoning through the server. (The reply reader's streamed calls and auto in the bare dialects:
 *    tests/test_serve_calls.c.) */
#include "harness.h"
#include "http_client.h"
#include "serve_util.h"

#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "pkg/convert.h"
#include "serve/oai.h"
#include "serve/reply.h"
#include "serve/serve-impl.h"
#include "serve/serve.h"
#include "tandem.h"

/* ---- 1. the parser ---- */

static void parse_bad(const char *body, const char *param, const char *what)
{
    tm_oai_req r;
    tm_oai_error e;
    int rc = tm_oai_parse(&r, TM_OAI_CHAT, body, strlen(body), &e);
    CHECKF(rc == -1 && e.http == 400 && !strcmp(e.param, param), "%s: rc %d, http %d, param '%s' (%s)", what, rc,
           e.http, e.param, e.msg);
    if (rc == 0) tm_oai_req_free(&r);
}

static const char *CONV =
    "[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"abcDEF123\",\"type\":\"function\","
    "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"abcDEF123\",\"content\":\"18 C, sunny\"}]";

static void test_parse(void)
{
    char body[4096];
    tm_oai_req r;
    tm_oai_error e;
    snprintf(body, sizeof body, "{\"messages\":%s,\"tools\":%s}", CONV, TOOLS);
    CHECKF(tm_oai_parse(&r, TM_OAI_CHAT, body, strlen(body), &e) == 0, "%s", e.msg);
    CHECK(r.tool_choice == TM_OAI_TOOLS_AUTO && r.parallel_tool_calls == 1 && r.tools_json && !r.tool_name);
    cJSON *m = cJSON_Parse(r.messages_json), *kw = cJSON_Parse(r.template_kwargs_json ? r.template_kwargs_json : "");
    const cJSON *call = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(m, 1), "tool_calls"), 0);
    const cJSON *args = cJSON_GetObjectItem(cJSON_GetObjectItem(call, "function"), "arguments");
    CHECK(cJSON_IsObject(args) && !strcmp(cJSON_GetObjectItem(args, "city")->valuestring, "Paris"));
    CHECK_EQ_STR(cJSON_GetObjectItem(call, "id") ? cJSON_GetObjectItem(call, "id")->valuestring : NULL, "abcDEF123");
    CHECK_EQ_STR(jstr(m, "1.content"), "");
    CHECK_EQ_STR(jstr(m, "2.role"), "tool");
    CHECK_EQ_STR(jstr(m, "2.tool_call_id"), "abcDEF123");
    CHECK(!cJSON_GetObjectItem(cJSON_GetArrayItem(m, 0), "tool_calls")); /* only where calls were made */
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(kw, "tools")) == 2);
    cJSON_Delete(m);
    cJSON_Delete(kw);
    tm_oai_req_free(&r);

    /* the template's own "tools" in chat_template_kwargs wins; choices */
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":%s,\"chat_template_kwargs\":"
             "{\"tools\":[],\"x\":1},\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"now\"}},"
             "\"parallel_tool_calls\":false}", TOOLS);
    CHECKF(tm_oai_parse(&r, TM_OAI_CHAT, body, strlen(body), &e) == 0, "%s", e.msg);
    CHECK(r.tool_choice == TM_OAI_TOOLS_NAMED && !strcmp(r.tool_name, "now") && r.parallel_tool_calls == 0);
    CHECK_EQ_STR(r.template_kwargs_json, "{\"tools\":[],\"x\":1}");
    tm_oai_req_free(&r);
    const char *plain = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[],\"tool_choice\":\"auto\"}";
    CHECK(tm_oai_parse(&r, TM_OAI_CHAT, plain, strlen(plain), &e) == 0 && r.tool_choice == TM_OAI_TOOLS_NONE &&
          !r.tools_json && !r.template_kwargs_json);
    tm_oai_req_free(&r);
    snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":%s,\"tool_choice\":\"none\"}",
             TOOLS);
    CHECK(tm_oai_parse(&r, TM_OAI_CHAT, body, strlen(body), &e) == 0 && r.tool_choice == TM_OAI_TOOLS_NONE &&
          r.tools_json && strstr(r.template_kwargs_json, "get_weather"));
    tm_oai_req_free(&r);

    /* refusals */
    const char *U = "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
    snprintf(body, sizeof body, "{%s,\"tools\":{}}", U);
    parse_bad(body, "tools", "tools an object");
    snprintf(body, sizeof body, "{%s,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]}", U);
    parse_bad(body, "tools", "a bad name");
    snprintf(body, sizeof body, "{%s,\"tools\":%s,\"tool_choice\":\"always\"}", U, TOOLS);
    parse_bad(body, "tool_choice", "an unknown choice");
    snprintf(body, sizeof body, "{%s,\"tool_choice\":\"required\"}", U);
    parse_bad(body, "tool_choice", "required without tools");
    snprintf(body, sizeof body, "{%s,\"tools\":%s,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"zz\"}}}",
             U, TOOLS);
    parse_bad(body, "tool_choice", "an undeclared function");
    snprintf(body, sizeof body, "{%s,\"tools\":%s,\"tool_choice\":{\"function\":\"now\"}}", U, TOOLS);
    parse_bad(body, "tool_choice", "a malformed choice");
    snprintf(body, sizeof body, "{%s,\"tools\":%s,\"tool_choice\":\"required\",\"response_format\":{\"type\":\"json_object\"}}",
             U, TOOLS);
    parse_bad(body, "tool_choice", "required beside JSON mode");
    snprintf(body, sizeof body, "{%s,\"tools\":%s,\"parallel_tool_calls\":1}", U, TOOLS);
    parse_bad(body, "parallel_tool_calls", "parallel_tool_calls a number");
    parse_bad("{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":{}}]}", "messages[0].tool_calls",
              "tool_calls an object");
    parse_bad("{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"arguments\":\"{}\"}}]}]}",
              "messages[0].tool_calls[0]", "a call without a name");
    parse_bad("{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":3}}]}]}",
              "messages[0].tool_calls[0]", "arguments a number");
    parse_bad("{\"messages\":[{\"role\":\"tool\",\"content\":\"r\",\"tool_call_id\":5}]}", "messages[0].tool_call_id",
              "a numeric tool_call_id");
    parse_bad("{\"messages\":[{\"role\":\"tool\"}]}", "messages[0].content", "a tool message without content");
    parse_bad("{\"messages\":[{\"role\":\"function\",\"content\":\"x\"}]}", "messages[0].role", "the old function role");
    tm_oai_req r2;
    snprintf(body, sizeof body, "{\"prompt\":\"x\",\"tools\":%s}", TOOLS);
    CHECK(tm_oai_parse(&r2, TM_OAI_COMPLETION, body, strlen(body), &e) == -1 && !strcmp(e.param, "tools"));
}

/* ---- 2. the real templates ---- */

static void render_case(tandem_model *m, const char *file, const char *want1, const char *want2)
{
    char *tpl = shared_template(file);
    if (!tpl) return;
    char body[4096];
    snprintf(body, sizeof body, "{\"messages\":%s,\"tools\":%s}", CONV, TOOLS);
    tm_oai_req r;
    tm_oai_error e;
    CHECKF(tm_oai_parse(&r, TM_OAI_CHAT, body, strlen(body), &e) == 0, "%s", e.msg);
    char *text = NULL;
    tandem_status st;
    int rc = tandem_chat_render(m, tpl, r.messages_json, 1, r.template_kwargs_json, &text, &st);
    CHECKF(rc == 0, "%s: %s", file, st.msg);
    CHECKF(text && strstr(text, want1), "%s: no %s in\n%s", file, want1, text ? text : "");
    CHECKF(text && strstr(text, want2), "%s: no %s in\n%s", file, want2, text ? text : "");
    free(text);
    tm_oai_req_free(&r);
    free(tpl);
}

static void test_render(tandem_model *m)
{
    render_case(m, "Qwen-Qwen2.5-7B-Instruct.jinja",
                "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n18 C, sunny\n</tool_response><|im_end|>",
                "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"");
    render_case(m, "meta-llama-Llama-3.1-8B-Instruct.jinja",
                "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|>",
                "<|start_header_id|>ipython<|end_header_id|>\n\n\"18 C, sunny\"<|eot_id|>");
    render_case(m, "mistralai-Mistral-Nemo-Instruct-2407.jinja",
                "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abcDEF123\"}]",
                "[TOOL_RESULTS]{\"content\": 18 C, sunny, \"call_id\": \"abcDEF123\"}[/TOOL_RESULTS]");
}

/* ---- 3. the server ---- */

static void test_anth_server(int port); /* sections 4 and 4b, on this server */
static void test_resp_server(int port);

static void test_server(tandem_model *m, tandem_session *s)
{
    char *qwen = shared_template("Qwen-Qwen2.5-7B-Instruct.jinja");
    if (!qwen) return;
    tm_server_opts o;
    tm_server_opts_default(&o);
    o.port = 0;
    o.chat_template = qwen;
    tm_server *srv = NULL;
    tm_err err = {0};
    CHECKF(tm_server_start(&srv, m, s, &o, &err) == TM_OK, "%s", err.msg);
    if (!srv) {
        free(qwen);
        return;
    }
    int port = tm_server_port(srv);
    char body[4096];
    const char *U = "\"messages\":[{\"role\":\"user\",\"content\":\"What is the weather in Oslo?\"}],"
                    "\"temperature\":0,\"max_tokens\":160";

    /* required: calls only, held to the schemas; the stream gives the same calls */
    reply a, b;
    snprintf(body, sizeof body, "{%s,\"tools\":%s,\"tool_choice\":\"required\"}", U, TOOLS);
    ask(port, body, 0, &a);
    CHECK_EQ_INT(a.status, 200);
    /* (the demo model, greedy, calls again and again: max_tokens cuts the last call, which is dropped) */
    CHECKF(a.n >= 1 && (!strcmp(a.finish, "tool_calls") || !strcmp(a.finish, "length")) && !a.has_content,
           "n %d finish %s content %s", a.n, a.finish, a.content);
    for (int i = 0; i < a.n; i++) {
        CHECKF(args_ok(a.name[i], a.args[i]), "%s(%s)", a.name[i], a.args[i]);
        CHECKF(!strncmp(a.id[i], "call_", 5) && strlen(a.id[i]) == 29, "id %s", a.id[i]);
    }
    snprintf(body, sizeof body, "{%s,\"tools\":%s,\"tool_choice\":\"required\",\"stream\":true}", U, TOOLS);
    ask(port, body, 1, &b);
    CHECK_EQ_INT(b.status, 200);
    /* the calls stream as they are written (the grammar holds the reply): each in pieces that add up to the JSON
       answer's call; the one max_tokens cut has gone out as far as it got (the JSON answer drops it) */
    int cut = !strcmp(a.finish, "length");
    CHECKF((b.n == a.n || (cut && b.n == a.n + 1)) && !strcmp(b.finish, a.finish) && !b.has_content,
           "stream: n %d (JSON %d) finish %s content %s", b.n, a.n, b.finish, b.content);
    for (int i = 0; i < a.n && i < b.n; i++)
        CHECKF(!strcmp(a.name[i], b.name[i]) && !strcmp(a.args[i], b.args[i]) && strcmp(a.id[i], b.id[i]) &&
                   b.pieces[i] > 1,
               "call %d: %s(%s) / %s(%s) in %d pieces", i, a.name[i], a.args[i], b.name[i], b.args[i], b.pieces[i]);
    if (b.n > a.n) /* the cut call: a declared tool's name, and the start of an object */
        CHECKF((!strcmp(b.name[a.n], "get_weather") || !strcmp(b.name[a.n], "now")) && (!b.args[a.n][0] || b.args[a.n][0] == '{'),
               "the cut call: %s(%s)", b.name[a.n], b.args[a.n]);

    /* two choices streamed: each one's calls go out in pieces, in chunks of that choice (a choice that ended
     * says nothing more while the other runs on) */
    snprintf(body, sizeof body, "{%s,\"tools\":%s,\"tool_choice\":\"required\",\"n\":2,\"temperature\":1,\"seed\":3,"
             "\"stream\":true}", U, TOOLS);
    http_res hr;
    CHECK(http(port, "POST", "/v1/chat/completions", body, NULL, &hr) == 0 && hr.status == 200);
    int calls_chunks[2] = {0, 0};
    for (const char *p = hr.body ? hr.body : "", *e; (e = strstr(p, "\n\n")); p = e + 2) {
        cJSON *ev = strncmp(p, "data: {", 7) ? NULL : cJSON_ParseWithLength(p + 6, (size_t)(e - p - 6));
        int idx = (int)jnum(ev, "choices.0.index");
        if (idx >= 0 && idx < 2 && cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(ev,
                                                                              "choices"), 0), "delta"), "tool_calls"))
            calls_chunks[idx]++;
        cJSON_Delete(ev);
    }
    CHECKF(calls_chunks[0] > 1 && calls_chunks[1] > 1, "n 2 streamed: chunks with calls %d, %d", calls_chunks[0],
           calls_chunks[1]);
    http_res_free(&hr);

    /* one named function; parallel_tool_calls false: one call (sampled, three seeds, one streamed) */
    for (int rep = 0; rep < 3; rep++) {
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"max_tokens\":160,\"tools\":%s,"
                 "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}},"
                 "\"parallel_tool_calls\":false,\"temperature\":1,\"seed\":%d,\"stream\":%s}",
                 TOOLS, 5 + rep, rep == 1 ? "true" : "false");
        ask(port, body, rep == 1, &a);
        CHECKF(a.status == 200 && a.n == 1 && !strcmp(a.name[0], "get_weather") && args_ok(a.name[0], a.args[0]) &&
                   !strcmp(a.finish, "tool_calls"),
               "named, seed %d: status %d, %d calls, %s(%s), finish %s", 5 + rep, a.status, a.n, a.name[0], a.args[0],
               a.finish);
    }
    snprintf(body, sizeof body,
             "{%s,\"tools\":%s,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"now\"}},"
             "\"parallel_tool_calls\":false}", U, TOOLS);
    ask(port, body, 0, &a);
    CHECKF(a.status == 200 && a.n == 1 && !strcmp(a.name[0], "now") && !strcmp(a.args[0], "{}"), "now: %d %s(%s)", a.n,
           a.name[0], a.args[0]);

    /* auto (the demo model writes stories, not calls) and none: text, the same streamed */
    const char *choices[] = {"auto", "none"};
    for (int k = 0; k < 2; k++) {
        snprintf(body, sizeof body, "{%s,\"tools\":%s,\"tool_choice\":\"%s\",\"max_tokens\":24}", U, TOOLS, choices[k]);
        ask(port, body, 0, &a);
        char sbody[4096];
        snprintf(sbody, sizeof sbody, "{%s,\"tools\":%s,\"tool_choice\":\"%s\",\"max_tokens\":24,\"stream\":true}", U,
                 TOOLS, choices[k]);
        ask(port, sbody, 1, &b);
        CHECKF(a.status == 200 && a.n == 0 && a.has_content && strlen(a.content) > 0 && strcmp(a.finish, "tool_calls"),
               "%s: %d calls, finish %s", choices[k], a.n, a.finish);
        CHECKF(b.status == 200 && b.n == 0 && !strcmp(a.content, b.content) && !strcmp(a.finish, b.finish),
               "%s: stream '%s' / '%s'", choices[k], b.content, a.content);
    }

    /* refusals at submit: a strict tool whose schema is not supported */
    snprintf(body, sizeof body,
             "{%s,\"tool_choice\":\"required\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
             "\"strict\":true,\"parameters\":{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\","
             "\"pattern\":\"^a\"}}}}}]}", U);
    check_error(port, "POST", "/v1/chat/completions", body, 400, "tools", "strict tool, pattern");
    snprintf(body, sizeof body, "{\"prompt\":\"x\",\"tools\":%s}", TOOLS);
    check_error(port, "POST", "/v1/completions", body, 400, "tools", "tools on completions");
    test_anth_server(port);
    test_resp_server(port);
    tm_server_stop(srv);

    /* a template that shows no dialect: forced calls refused, auto is text; --tool-parser hermes */
    const char *plain = "{%- for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:";
    o.chat_template = plain;
    CHECKF(tm_server_start(&srv, m, s, &o, &err) == TM_OK, "%s", err.msg);
    if (srv) {
        port = tm_server_port(srv);
        snprintf(body, sizeof body, "{%s,\"tools\":%s,\"tool_choice\":\"required\"}", U, TOOLS);
        check_error(port, "POST", "/v1/chat/completions", body, 400, "tool_choice", "no dialect");
        snprintf(body, sizeof body, "{%s,\"tools\":%s,\"max_tokens\":8}", U, TOOLS);
        ask(port, body, 0, &a);
        CHECK(a.status == 200 && a.n == 0 && a.has_content);
        tm_server_stop(srv);
    }
    /* a dialect given by hand: on the plain template, and over the Qwen template's own */
    static const struct {
        const char *parser;
        int qwen;
        size_t id_len;
    } by_hand[] = {{"hermes", 0, 29}, {"mistral", 1, 9}, {"mistral_args", 0, 9}, {"qwen3_coder", 0, 29}, {"glm", 1, 29},
                     {"seed_oss", 0, 29}, {"minimax", 0, 29}, {"harmony", 0, 29}, {"deepseek_v3", 0, 29},
                     {"kimi_k2", 0, 0}}; /* id_len 0: the reply's own id, "functions.NAME:N" */
    for (size_t k = 0; k < sizeof by_hand / sizeof by_hand[0]; k++) {
        o.tool_parser = by_hand[k].parser;
        o.chat_template = by_hand[k].qwen ? qwen : plain;
        CHECKF(tm_server_start(&srv, m, s, &o, &err) == TM_OK, "%s", err.msg);
        if (!srv) continue;
        port = tm_server_port(srv);
        snprintf(body, sizeof body, "{%s,\"tools\":%s,\"tool_choice\":\"required\",\"parallel_tool_calls\":false}", U,
                 TOOLS);
        ask(port, body, 0, &a);
        char own[96] = ""; /* the id a text-id dialect's call carries: its prefix, name and ':' (then digits) */
        if (!by_hand[k].id_len && a.n >= 1) snprintf(own, sizeof own, "functions.%s:", a.name[0]);
        int id_ok = a.n >= 1 && (by_hand[k].id_len ? strlen(a.id[0]) == by_hand[k].id_len
                                                   : !strncmp(a.id[0], own, strlen(own)) && a.id[0][strlen(own)] >= '0' &&
                                                         a.id[0][strlen(own)] <= '9');
        CHECKF(a.status == 200 && a.n == 1 && args_ok(a.name[0], a.args[0]) && id_ok, "%s by hand: %d %s(%s) id %s",
               by_hand[k].parser, a.n, a.name[0], a.args[0], a.id[0]);
        /* streamed: the same call as the JSON answer, in pieces as it was written (the forced grammar holds it) */
        snprintf(body, sizeof body, "{%s,\"tools\":%s,\"tool_choice\":\"required\",\"parallel_tool_calls\":false,"
                 "\"stream\":true}", U, TOOLS);
        ask(port, body, 1, &b);
        CHECKF(a.status == 200 && b.status == 200 && a.n >= 1 && a.n == b.n && !strcmp(a.finish, b.finish),
               "%s: %d calls (%s), streamed %d (%s)", by_hand[k].parser, a.n, a.finish, b.n, b.finish);
        for (int i = 0; i < a.n && i < b.n; i++)
            CHECKF(args_ok(a.name[i], a.args[i]) && !strcmp(a.name[i], b.name[i]) && !strcmp(a.args[i], b.args[i]) &&
                       (b.pieces[i] > 1 || strlen(a.args[i]) <= 2),
                   "%s call %d: %s(%s) / %s(%s) in %d pieces", by_hand[k].parser, i, a.name[i], a.args[i], b.name[i],
                   b.args[i], b.pieces[i]);
        tm_server_stop(srv);
    }
    o.tool_parser = "bogus";
    srv = NULL;
    CHECK(tm_server_start(&srv, m, s, &o, &err) == TM_E_INVALID && !srv && strstr(err.msg, "bogus"));
    free(qwen);
}

static const char *ANTH_TOOLS =
    "[{\"name\":\"get_weather\",\"description\":\"The weather in a city\",\"input_schema\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"enum\":[\"Paris\",\"Oslo\",\"Rome\"]},\"days\":{\"type\":\"integer\",\"minimum\":1,"
    "\"maximum\":7}},\"required\":[\"city\"],\"additionalProperties\":false}},"
    "{\"name\":\"now\",\"input_schema\":{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}}]";

/* a tool conversation, block by block, into exactly the chat request it stands for */
static void test_anth_translate(void)
{
    const char *in =
        "{\"model\":\"m\",\"max_tokens\":9,\"system\":[{\"type\":\"text\",\"text\":\"S\"}],\"stop_sequences\":[\"x\"],"
        "\"tools\":[{\"name\":\"f\",\"description\":\"d\",\"input_schema\":{\"type\":\"object\"}},"
        "{\"type\":\"custom\",\"name\":\"g\",\"input_schema\":{}}],"
        "\"tool_choice\":{\"type\":\"tool\",\"name\":\"g\",\"disable_parallel_tool_use\":true},"
        "\"thinking\":{\"type\":\"disabled\"},\"metadata\":{\"user_id\":\"u\"},"
        "\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"hm\",\"signature\":\"s\"},"
        "{\"type\":\"redacted_thinking\",\"data\":\"z\"},{\"type\":\"text\",\"text\":\"Let me see.\"},"
        "{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":{\"a\":1}},"
        "{\"type\":\"tool_use\",\"id\":\"t2\",\"name\":\"g\",\"input\":{}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t1\",\"content\":\"r1\"},"
        "{\"type\":\"tool_result\",\"tool_use_id\":\"t2\",\"content\":[{\"type\":\"text\",\"text\":\"r2\"}],"
        "\"is_error\":true},{\"type\":\"text\",\"text\":\"ok?\",\"cache_control\":{\"type\":\"ephemeral\"}}]}]}";
    const char *want =
        "{\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"S\"}]},"
        "{\"role\":\"user\",\"content\":\"q\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Let me see.\"}],\"tool_calls\":["
        "{\"id\":\"t1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}},"
        "{\"id\":\"t2\",\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":{}}}],"
        "\"reasoning_content\":\"hm\"},"
        "{\"role\":\"tool\",\"tool_call_id\":\"t1\",\"content\":\"r1\"},"
        "{\"role\":\"tool\",\"tool_call_id\":\"t2\",\"content\":[{\"type\":\"text\",\"text\":\"r2\"}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"ok?\"}]}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\",\"parameters\":"
        "{\"type\":\"object\"}}},{\"type\":\"function\",\"function\":{\"name\":\"g\",\"parameters\":{}}}],"
        "\"parallel_tool_calls\":false,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}},"
        "\"chat_template_kwargs\":{\"enable_thinking\":false},\"max_tokens\":9,\"stop\":[\"x\"],\"model\":\"m\"}";
    char *out = NULL, *echo = NULL;
    tm_oai_error e;
    CHECKF(tm_api_anthropic.request(in, strlen(in), 0, NULL, &out, &echo, &e) == 0 && !echo, "%s", e.msg);
    CHECK_EQ_STR(out ? out : "", want);
    tm_oai_req r;
    CHECKF(out && tm_oai_parse(&r, TM_OAI_CHAT, out, strlen(out), &e) == 0, "%s", e.msg);
    if (out) tm_oai_req_free(&r);
    free(out);
    /* refusals, by field */
    static const struct {
        const char *body, *param;
    } bad[] = {
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\"}]}]}", "messages[0][0]"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\"}]}]}",
         "messages[0][0]"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":"
         "\"a\",\"content\":[{\"type\":\"image\"}]}]}]}", "messages[0][0].content[0]"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":"
         "[{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"f\",\"input\":[]}]}]}", "messages[1][0]"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\"}]}]}",
         "messages[0][0]"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_result\"}]}]}",
         "messages[0][0]"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":[{\"type\":"
         "\"web_search_20250305\",\"name\":\"web_search\"}]}", "tools[0]"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":[{\"name\":\"f\"}]}",
         "tools[0]"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":{}}", "tools"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tool_choice\":{\"type\":\"tool\"}}",
         "tool_choice"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tool_choice\":\"auto\"}",
         "tool_choice"},
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"thinking\":{\"type\":\"on\"}}",
         "thinking"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        out = NULL;
        int rc = tm_api_anthropic.request(bad[i].body, strlen(bad[i].body), 0, NULL, &out, &echo, &e);
        CHECKF(rc == -1 && e.http == 400 && !strcmp(e.param, bad[i].param) && !out, "bad %zu: rc %d param '%s' (%s)", i,
               rc, e.param, e.msg);
        free(out);
    }
}

/* An Anthropic answer, as JSON or as stream events: its blocks (type, tool name and id, and the text,
 * thinking or input JSON each holds) and stop reason; a stream's events checked for their order */
typedef struct api_out {
    int status, n;
    char type[6][16], name[6][72], id[6][48], body[6][2048];
    char status_[6][16];     /* a Responses item's status (a stream's: its done event's) */
    int pieces[6];           /* a stream's deltas of each block / item */
    char end[16];            /* Anthropic's stop_reason, the Responses API's status */
    char rid[48];            /* the Responses API's response id */
} api_out;
typedef api_out anth;

/* one block / item of an answer into a: its type, name, id (the member id_key), and the first of keys
 * it holds (a string, or an object printed as JSON) */
static void api_item(api_out *a, const cJSON *b, const char *id_key, const char *const keys[3])
{
    int i = a->n++;
    const char *t = jstr(b, "type"), *nm = jstr(b, "name"), *id = jstr(b, id_key);
    snprintf(a->type[i], sizeof a->type[i], "%s", t ? t : "");
    snprintf(a->name[i], sizeof a->name[i], "%s", nm ? nm : "");
    snprintf(a->id[i], sizeof a->id[i], "%s", id ? id : "");
    snprintf(a->status_[i], sizeof a->status_[i], "%s", jstr(b, "status") ? jstr(b, "status") : "");
    a->body[i][0] = 0;
    for (int k = 0; k < 3 && keys[k] && !a->body[i][0]; k++) {
        const cJSON *o = cJSON_GetObjectItem(b, keys[k]);
        char *js = cJSON_IsObject(o) ? cJSON_PrintUnformatted(o) : NULL;
        const char *v = js ? js : jstr(b, keys[k]);
        if (v) snprintf(a->body[i], sizeof a->body[i], "%s", v);
        free(js);
    }
}

static void anth_block(anth *a, const cJSON *b)
{
    static const char *const keys[3] = {"text", "thinking", "input"};
    api_item(a, b, "id", keys);
}

static void ask_anth(int port, const char *body, int stream, anth *a)
{
    memset(a, 0, sizeof *a);
    http_res hr;
    CHECK(http(port, "POST", "/v1/messages", body, NULL, &hr) == 0);
    a->status = hr.status;
    if (!stream || hr.status != 200) {
        cJSON *j = cJSON_Parse(hr.body ? hr.body : "");
        for (const cJSON *b = cJSON_GetObjectItem(j, "content") ? cJSON_GetObjectItem(j, "content")->child : NULL;
             b && a->n < 6; b = b->next)
            anth_block(a, b);
        snprintf(a->end, sizeof a->end, "%s", jstr(j, "stop_reason") ? jstr(j, "stop_reason") : "");
        cJSON_Delete(j);
        http_res_free(&hr);
        return;
    }
    int open = -1, ends = 0, bad = 0; /* the block open; message_stop seen; events out of order */
    for (const char *p = hr.body ? hr.body : "", *e; (e = strstr(p, "\n\n")); p = e + 2) {
        const char *d = strstr(p, "\ndata: ");
        if (strncmp(p, "event: ", 7) || !d || d > e) continue;
        cJSON *ev = cJSON_ParseWithLength(d + 7, (size_t)(e - d - 7));
        const char *t = jstr(ev, "type") ? jstr(ev, "type") : "";
        int idx = (int)jnum(ev, "index");
        bad += strncmp(p + 7, t, strlen(t)) != 0 || ends; /* the event's name is its type; nothing after the stop */
        if (!strcmp(t, "content_block_start")) {
            bad += open != -1 || idx != a->n || a->n >= 6;
            if (a->n < 6) anth_block(a, cJSON_GetObjectItem(ev, "content_block"));
            open = idx;
        } else if (!strcmp(t, "content_block_delta")) {
            bad += open < 0 || idx != open;
            const char *v = jstr(ev, "delta.text") ? jstr(ev, "delta.text")
                            : jstr(ev, "delta.thinking") ? jstr(ev, "delta.thinking") : jstr(ev, "delta.partial_json");
            if (open >= 0 && open < 6 && v) {
                if (!strcmp(a->type[open], "tool_use") && !a->pieces[open]) a->body[open][0] = 0; /* (the start's {}) */
                a->pieces[open]++;
                strncat(a->body[open], v, sizeof a->body[open] - strlen(a->body[open]) - 1);
            }
        } else if (!strcmp(t, "content_block_stop")) {
            bad += idx != open;
            open = -1;
        } else if (!strcmp(t, "message_delta")) {
            bad += open != -1;
            snprintf(a->end, sizeof a->end, "%s", jstr(ev, "delta.stop_reason") ? jstr(ev, "delta.stop_reason") : "");
        } else if (!strcmp(t, "message_stop")) {
            ends = 1;
        }
        cJSON_Delete(ev);
    }
    CHECKF(!bad && ends, "stream events out of order (%d) or no message_stop: %s", bad, hr.body);
    http_res_free(&hr);
}

/* the same JSON object, whatever its spelling */
static int same_json(const char *a, const char *b)
{
    cJSON *x = cJSON_Parse(a), *y = cJSON_Parse(b);
    int same = x && y && cJSON_Compare(x, y, 1);
    cJSON_Delete(x);
    cJSON_Delete(y);
    return same;
}

/* an Anthropic answer's tool_use blocks are the chat answer's calls */
static void same_calls(const anth *a, const reply *r, const char *what, int streamed)
{
    /* (a stream's call that max_tokens cut has gone out as far as it got; the JSON answer drops it) */
    int cut = streamed && !strcmp(r->finish, "length");
    CHECKF(a->status == 200 && (a->n == r->n || (cut && a->n == r->n + 1)), "%s: status %d, %d blocks, %d calls", what,
           a->status, a->n, r->n);
    for (int i = 0; i < a->n && i < r->n; i++) /* (streamed: the input as it was written, in pieces) */
        CHECKF(!strcmp(a->type[i], "tool_use") && !strcmp(a->name[i], r->name[i]) && same_json(a->body[i], r->args[i]) &&
                   strlen(a->id[i]) == strlen(r->id[i]) && (!streamed || a->pieces[i] > 1 || strlen(r->args[i]) <= 2),
               "%s: block %d %s %s(%s), call %s(%s), %d pieces", what, i, a->type[i], a->name[i], a->body[i], r->name[i],
               r->args[i], a->pieces[i]);
    CHECKF(!strcmp(a->end, !strcmp(r->finish, "length") ? "max_tokens" : "tool_use"), "%s: stop %s, finish %s", what,
           a->end, r->finish);
}

static void test_anth_server(int port)
{
    char body[4096], obody[4096];
    const char *U = "\"messages\":[{\"role\":\"user\",\"content\":\"What is the weather in Oslo?\"}],"
                    "\"temperature\":0,\"max_tokens\":160";
    /* any: the calls the chat endpoint makes for required, as JSON and streamed */
    reply r;
    snprintf(obody, sizeof obody, "{%s,\"tools\":%s,\"tool_choice\":\"required\"}", U, TOOLS);
    ask(port, obody, 0, &r);
    anth a, b;
    for (int stream = 0; stream < 2; stream++) {
        snprintf(body, sizeof body, "{%s,\"tools\":%s,\"tool_choice\":{\"type\":\"any\"},\"stream\":%s}", U, ANTH_TOOLS,
                 stream ? "true" : "false");
        ask_anth(port, body, stream, stream ? &b : &a);
        same_calls(stream ? &b : &a, &r, stream ? "any, streamed" : "any", stream);
    }
    /* count_tokens with the tools shown: the message's input tokens */
    snprintf(body, sizeof body, "{%s,\"tools\":%s,\"tool_choice\":{\"type\":\"any\"}}", U, ANTH_TOOLS);
    int status;
    cJSON *cj = http_json(port, "POST", "/v1/messages", body, NULL, &status), *cc;
    double in_tok = jnum(cj, "usage.input_tokens");
    cJSON_Delete(cj);
    cc = http_json(port, "POST", "/v1/messages/count_tokens", body, NULL, &status);
    CHECKF(status == 200 && in_tok > 100 && jnum(cc, "input_tokens") == in_tok, "count_tokens with tools: %g / %g",
           jnum(cc, "input_tokens"), in_tok);
    cJSON_Delete(cc);
    /* one named tool, no parallel calls */
    snprintf(body, sizeof body,
             "{%s,\"tools\":%s,\"tool_choice\":{\"type\":\"tool\",\"name\":\"now\",\"disable_parallel_tool_use\":true}}",
             U, ANTH_TOOLS);
    ask_anth(port, body, 0, &a);
    CHECKF(a.status == 200 && a.n == 1 && !strcmp(a.type[0], "tool_use") && !strcmp(a.name[0], "now") &&
               !strcmp(a.body[0], "{}") && !strcmp(a.end, "tool_use"),
           "tool now: %d %d blocks, %s %s(%s) %s", a.status, a.n, a.type[0], a.name[0], a.body[0], a.end);
    /* a conversation with a call and its result: the answer the chat endpoint gives its OpenAI twin */
    const char *conv =
        "\"messages\":[{\"role\":\"user\",\"content\":\"What is the weather in Oslo?\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Let me look.\"},{\"type\":\"tool_use\","
        "\"id\":\"call_1\",\"name\":\"get_weather\",\"input\":{\"city\":\"Oslo\"}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"call_1\",\"content\":\"Sunny, 21 C\"}]}]";
    const char *oconv =
        "\"messages\":[{\"role\":\"user\",\"content\":\"What is the weather in Oslo?\"},"
        "{\"role\":\"assistant\",\"content\":\"Let me look.\",\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
        "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"Sunny, 21 C\"}]";
    snprintf(obody, sizeof obody, "{%s,\"tools\":%s,\"tool_choice\":\"none\",\"temperature\":0,\"max_tokens\":24}", oconv,
             TOOLS);
    ask(port, obody, 0, &r);
    for (int stream = 0; stream < 2; stream++) {
        snprintf(body, sizeof body,
                 "{%s,\"tools\":%s,\"tool_choice\":{\"type\":\"none\"},\"temperature\":0,\"max_tokens\":24,\"stream\":%s}",
                 conv, ANTH_TOOLS, stream ? "true" : "false");
        ask_anth(port, body, stream, &a);
        CHECKF(r.status == 200 && a.status == 200 && a.n == 1 && !strcmp(a.type[0], "text") &&
                   !strcmp(a.body[0], r.content) && !strcmp(a.end, !strcmp(r.finish, "length") ? "max_tokens" : "end_turn"),
               "tool result%s: %d blocks, '%s' / '%s' (%s)", stream ? ", streamed" : "", a.n, a.body[0], r.content, a.end);
    }
    snprintf(body, sizeof body, "{%s,\"tools\":[{\"type\":\"bash_20250124\",\"name\":\"bash\"}]}", U);
    check_error(port, "POST", "/v1/messages", body, 400, "tools[0]", "a server tool");
}

/* the chat endpoint's greedy answer over the default template, from the library (test_messages' reference) */
typedef struct anth_ref {
    char text[TH_TEXT_CAP];
    tandem_stats st;
} anth_ref;

/* POST /v1/messages: the same greedy answer as the chat endpoint's over the same messages (system
 * apart, content as a string or text blocks), in Anthropic's message shape and stream events; the
 * refusals by field */
static void test_messages(int port, const anth_ref *rc)
{
    const char *sys = "\"system\":\"You tell stories.\",\"max_tokens\":16,\"temperature\":0";
    char body[1024];
    int status;
    for (int blocks = 0; blocks < 2; blocks++) {
        snprintf(body, sizeof body, "{\"model\":\"m\",%s,\"messages\":[{\"role\":\"user\",\"content\":%s}]}", sys,
                 blocks ? "[{\"type\":\"text\",\"text\":\"Tell me about the sea.\"}]" : "\"Tell me about the sea.\"");
        cJSON *j = http_json(port, "POST", "/v1/messages", body, NULL, &status);
        CHECKF(status == 200 && jstr(j, "type") && !strcmp(jstr(j, "type"), "message") && jstr(j, "role") &&
                   !strcmp(jstr(j, "role"), "assistant") && jstr(j, "id") && !strncmp(jstr(j, "id"), "msg_", 4) &&
                   jstr(j, "content.0.type") && !strcmp(jstr(j, "content.0.type"), "text") && jstr(j, "content.0.text") &&
                   !strcmp(jstr(j, "content.0.text"), rc->text) &&
                   jnum(j, "usage.input_tokens") == rc->st.n_prompt && jnum(j, "usage.output_tokens") == rc->st.n_generated &&
                   jstr(j, "stop_reason") &&
                   !strcmp(jstr(j, "stop_reason"), strcmp(rc->st.finish_reason, "length") ? "end_turn" : "max_tokens"),
               "messages (%s): %d '%s'", blocks ? "blocks" : "string", status,
               jstr(j, "content.0.text") ? jstr(j, "content.0.text") : "(none)");
        cJSON_Delete(j);
    }
    /* count_tokens: the prompt's tokens as the message's usage gives them (max_tokens not needed) */
    cJSON *j = http_json(port, "POST", "/v1/messages/count_tokens",
                  "{\"system\":\"You tell stories.\",\"messages\":[{\"role\":\"user\",\"content\":\"Tell me about the sea.\"}]}",
                  NULL, &status);
    CHECKF(status == 200 && jnum(j, "input_tokens") == rc->st.n_prompt, "count_tokens: %d, %g (want %d)", status,
           jnum(j, "input_tokens"), rc->st.n_prompt);
    cJSON_Delete(j);
    check_error(port, "POST", "/v1/messages/count_tokens", "{\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}",
                400, "messages[0]", "count_tokens, a bad role");
    check_error(port, "GET", "/v1/messages/count_tokens", NULL, 405, NULL, "GET count_tokens");
    /* streamed: message_start (the prompt's tokens), content_block_start, text deltas, content_block_stop,
       message_delta (stop reason, output tokens), message_stop; no [DONE] */
    snprintf(body, sizeof body, "{%s,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"Tell me about the sea.\"}]}",
             sys);
    http_res hr;
    CHECK(http(port, "POST", "/v1/messages", body, NULL, &hr) == 0 && hr.status == 200);
    char text[4096] = "", seq[512] = "";
    for (const char *p = hr.body ? hr.body : "", *e; (e = strstr(p, "\n\n")); p = e + 2) {
        const char *d = strstr(p, "\ndata: ");
        if (strncmp(p, "event: ", 7) || !d || d > e) continue;
        snprintf(seq + strlen(seq), sizeof seq - strlen(seq), "%.*s,", (int)(d - p - 7), p + 7);
        cJSON *ev = cJSON_ParseWithLength(d + 7, (size_t)(e - d - 7));
        const char *t = jstr(ev, "delta.text");
        if (t) strncat(text, t, sizeof text - strlen(text) - 1);
        if (jstr(ev, "type") && !strcmp(jstr(ev, "type"), "message_start"))
            CHECK(jnum(ev, "message.usage.input_tokens") == rc->st.n_prompt);
        if (jstr(ev, "type") && !strcmp(jstr(ev, "type"), "message_delta"))
            CHECK(jnum(ev, "usage.output_tokens") == rc->st.n_generated && jstr(ev, "delta.stop_reason"));
        cJSON_Delete(ev);
    }
    CHECKF(!strncmp(seq, "message_start,content_block_start,content_block_delta,", 54) &&
               strstr(seq, ",content_block_stop,message_delta,message_stop,") && !strstr(hr.body, "[DONE]"),
           "messages stream events: %s", seq);
    CHECK_EQ_STR(text, rc->text);
    http_res_free(&hr);
    /* a stop sequence: the text up to it, stop_reason stop_sequence naming it (a second one never met) */
    size_t tl = strlen(rc->text);
    char stop[8];
    snprintf(stop, sizeof stop, "%.4s", rc->text + tl / 2);
    for (int stream = 0; stream < 2 && tl >= 8; stream++) {
        snprintf(body, sizeof body,
                 "{%s,\"stream\":%s,\"stop_sequences\":[\"\\u0001\",\"%s\"],\"messages\":[{\"role\":\"user\","
                 "\"content\":\"Tell me about the sea.\"}]}",
                 sys, stream ? "true" : "false", stop);
        CHECK(http(port, "POST", "/v1/messages", body, NULL, &hr) == 0 && hr.status == 200);
        const char *js = hr.body ? hr.body : "";
        if (stream) js = strstr(js, "event: message_delta\ndata: ") ? strstr(js, "event: message_delta\ndata: ") + 27 : "";
        cJSON *sj = cJSON_Parse(js);
        const char *sr = jstr(sj, stream ? "delta.stop_reason" : "stop_reason");
        const char *ss = jstr(sj, stream ? "delta.stop_sequence" : "stop_sequence");
        size_t at = (size_t)(strstr(rc->text, stop) - rc->text);
        CHECKF(sr && !strcmp(sr, "stop_sequence") && ss && !strcmp(ss, stop) &&
                   (stream || (at == 0 && !jstr(sj, "content.0.text")) ||
                    (jstr(sj, "content.0.text") && strlen(jstr(sj, "content.0.text")) == at &&
                     !strncmp(jstr(sj, "content.0.text"), rc->text, at))),
               "stop sequence '%s'%s: %s", stop, stream ? " (streamed)" : "", hr.body);
        cJSON_Delete(sj);
        http_res_free(&hr);
    }
    check_error(port, "POST", "/v1/messages", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 400, "max_tokens",
                "messages without max_tokens");
    check_error(port, "POST", "/v1/messages",
                "{\"max_tokens\":4,\"tools\":[{\"type\":\"web_search_20250305\",\"name\":\"web_search\"}],"
                "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 400, "tools[0]", "messages with a server tool");
    check_error(port, "POST", "/v1/messages",
                "{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\"}]}]}", 400,
                "messages[0][0]", "an image block");
    check_error(port, "POST", "/v1/messages", "{\"max_tokens\":4,\"messages\":[{\"role\":\"system\",\"content\":\"x\"}]}",
                400, "messages[0]", "a system role in messages");
    check_error(port, "POST", "/v1/messages", "{\"max_tokens\":4,\"messages\":[]}", 400, "messages", "no messages");
    check_error(port, "POST", "/v1/messages", "[1]", 400, NULL, "not an object");
    check_error(port, "GET", "/v1/messages", NULL, 405, NULL, "GET messages");
}

/* the server on a plain template: /v1/messages as the chat endpoint answers */
static void test_messages_server(tandem_model *m, tandem_session *s)
{
    const char *tpl = "{%- for m in messages %}{{ m['role'] | capitalize }}: {{ m['content'] }}\n{% endfor %}"
                      "{%- if add_generation_prompt %}Assistant:{% endif %}";
    const char *msgs = "[{\"role\":\"system\",\"content\":\"You tell stories.\"},"
                       "{\"role\":\"user\",\"content\":\"Tell me about the sea.\"}]";
    char *prompt = NULL;
    tandem_status st;
    CHECKF(tandem_chat_render(m, tpl, msgs, 1, NULL, &prompt, &st) == 0, "%s", st.msg);
    anth_ref rc;
    memset(&rc, 0, sizeof rc);
    tandem_request q;
    tandem_request_default(&q);
    q.prompt = prompt;
    q.no_special = 1;
    q.max_tokens = 16;
    q.temperature = 0;
    CHECKF(prompt && tandem_generate(s, &q, th_collect, rc.text, &rc.st, &st) == 0, "%s", st.msg);
    free(prompt);
    tm_server_opts o;
    tm_server_opts_default(&o);
    o.port = 0;
    o.chat_template = tpl;
    tm_server *srv = NULL;
    tm_err err = {0};
    CHECKF(tm_server_start(&srv, m, s, &o, &err) == TM_OK, "%s", err.msg);
    if (!srv) return;
    test_messages(tm_server_port(srv), &rc);
    tm_server_stop(srv);
}

/* ---- 4b. OpenAI's Responses API ---- */

/* input items, instructions, tools, tool_choice, text.format and reasoning into exactly the chat request
 * they stand for, the fields to echo; refusals by field */
static void test_resp_translate(void)
{
    const char *in =
        "{\"model\":\"m\",\"instructions\":\"Be brief.\",\"max_output_tokens\":9,\"temperature\":0.5,"
        "\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"description\":\"d\",\"parameters\":{\"type\":\"object\"},"
        "\"strict\":false}],\"tool_choice\":\"auto\",\"parallel_tool_calls\":false,"
        "\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"s\",\"schema\":{\"type\":\"object\"},\"strict\":true}},"
        "\"reasoning\":{\"effort\":\"low\"},\"store\":true,\"metadata\":{\"k\":\"v\"},"
        "\"input\":[{\"role\":\"developer\",\"content\":\"Dev.\"},{\"type\":\"message\",\"role\":\"user\",\"content\":"
        "[{\"type\":\"input_text\",\"text\":\"q\"}]},{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[],"
        "\"content\":[{\"type\":\"reasoning_text\",\"text\":\"hm\"}]},"
        "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Let me see.\","
        "\"annotations\":[]}]},{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"},"
        "{\"type\":\"function_call\",\"call_id\":\"c2\",\"name\":\"f\",\"arguments\":\"{}\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"r1\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"c2\",\"output\":[{\"type\":\"input_text\",\"text\":\"r2\"}]},"
        "{\"role\":\"user\",\"content\":\"ok?\"}]}";
    const char *want =
        "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"system\",\"content\":\"Dev.\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"q\"}]},"
        "{\"role\":\"assistant\",\"reasoning_content\":\"hm\",\"content\":[{\"type\":\"text\",\"text\":\"Let me see.\"}],"
        "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}},"
        "{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"r1\"},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":[{\"type\":\"text\",\"text\":\"r2\"}]},"
        "{\"role\":\"user\",\"content\":\"ok?\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\",\"parameters\":"
        "{\"type\":\"object\"},\"strict\":false}}],\"tool_choice\":\"auto\","
        "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"s\",\"schema\":{\"type\":\"object\"},"
        "\"strict\":true}},\"chat_template_kwargs\":{\"reasoning_effort\":\"low\"},\"max_tokens\":9,\"temperature\":0.5,"
        "\"model\":\"m\",\"parallel_tool_calls\":false}";
    char *out = NULL, *echo = NULL;
    tm_oai_error e;
    CHECKF(tm_api_responses.request(in, strlen(in), 0, NULL, &out, &echo, &e) == 0, "%s", e.msg);
    CHECK_EQ_STR(out ? out : "", want);
    cJSON *ej = cJSON_Parse(echo ? echo : "");
    CHECKF(jstr(ej, "instructions") && !strcmp(jstr(ej, "instructions"), "Be brief.") && jnum(ej, "max_output_tokens") == 9 &&
               jstr(ej, "metadata.k") && jstr(ej, "tools.0.name") && jstr(ej, "text.format.type") &&
               !strcmp(jstr(ej, "text.format.type"), "json_schema") && cJSON_IsTrue(cJSON_GetObjectItem(ej, "store")) &&
               cJSON_IsFalse(cJSON_GetObjectItem(ej, "parallel_tool_calls")),
           "echo: %s", echo ? echo : "(none)");
    cJSON_Delete(ej);
    tm_oai_req r;
    CHECKF(out && tm_oai_parse(&r, TM_OAI_CHAT, out, strlen(out), &e) == 0, "%s", e.msg);
    if (out) tm_oai_req_free(&r);
    free(out);
    free(echo);
    const char *named = "{\"input\":\"x\",\"tool_choice\":{\"type\":\"function\",\"name\":\"f\"}}";
    out = echo = NULL;
    CHECK(tm_api_responses.request(named, strlen(named), 0, NULL, &out, &echo, &e) == 0 && out &&
          strstr(out, "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}"));
    free(out);
    free(echo);
    static const struct {
        const char *body, *param;
    } bad[] = {
        {"{\"input\":[]}", "input"},
        {"{}", "input"},
        {"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"x\"}]}]}", "input[0].content"},
        {"{\"input\":[{\"role\":\"robot\",\"content\":\"x\"}]}", "input[0]"},
        {"{\"input\":[{\"type\":\"function_call\",\"name\":\"f\"}]}", "input[0]"},
        {"{\"input\":[{\"type\":\"function_call_output\",\"output\":\"x\"}]}", "input[0]"},
        {"{\"input\":[{\"type\":\"item_reference\",\"id\":\"msg_1\"}]}", "input[0]"},
        {"{\"input\":[{\"type\":\"web_search_call\"}]}", "input[0]"},
        {"{\"input\":\"x\",\"previous_response_id\":\"resp_1\"}", "previous_response_id"},
        {"{\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"}]}", "tools[0]"},
        {"{\"input\":\"x\",\"tool_choice\":{\"type\":\"file_search\"}}", "tool_choice"},
        {"{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"xml\"}}}", "text.format"},
        {"{\"input\":\"x\",\"instructions\":5}", "instructions"},
        {"[1]", ""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        out = echo = NULL;
        int rc = tm_api_responses.request(bad[i].body, strlen(bad[i].body), 0, NULL, &out, &echo, &e);
        CHECKF(rc == -1 && e.http == 400 && !strcmp(e.param, bad[i].param) && !out && !echo, "bad %zu: rc %d param '%s' (%s)",
               i, rc, e.param, e.msg);
        free(out);
        free(echo);
    }
}

/* A Responses answer, as JSON or as stream events: its output items (type, function name and call id;
 * the text, reasoning or arguments each holds) and status; a stream's events checked for their order,
 * numbering and agreement with the final response */
typedef api_out resp;

static void resp_item(resp *a, const cJSON *it)
{
    static const char *const keys[3] = {"arguments", "content.0.text", NULL};
    api_item(a, it, "call_id", keys);
}

static void resp_of(resp *a, const cJSON *r)
{
    const cJSON *out = cJSON_GetObjectItem(r, "output");
    snprintf(a->rid, sizeof a->rid, "%s", jstr(r, "id") ? jstr(r, "id") : "");
    for (const cJSON *it = cJSON_IsArray(out) ? out->child : NULL; it && a->n < 6; it = it->next) resp_item(a, it);
    snprintf(a->end, sizeof a->end, "%s", jstr(r, "status") ? jstr(r, "status") : "");
}

static void ask_resp(int port, const char *body, int stream, resp *a)
{
    memset(a, 0, sizeof *a);
    http_res hr;
    CHECK(http(port, "POST", "/v1/responses", body, NULL, &hr) == 0);
    a->status = hr.status;
    if (!stream || hr.status != 200) {
        cJSON *j = cJSON_Parse(hr.body ? hr.body : "");
        CHECKF(hr.status != 200 || (jstr(j, "object") && !strcmp(jstr(j, "object"), "response") && jstr(j, "id") &&
                                    !strncmp(jstr(j, "id"), "resp_", 5) && cJSON_GetObjectItem(j, "usage")),
               "response object: %s", hr.body);
        resp_of(a, j);
        cJSON_Delete(j);
        http_res_free(&hr);
        return;
    }
    int bad = 0, seq = 0, open = -1, ended = 0;
    resp fin = {0};
    for (const char *p = hr.body ? hr.body : "", *e; (e = strstr(p, "\n\n")); p = e + 2) {
        const char *d = strstr(p, "\ndata: ");
        if (strncmp(p, "event: ", 7) || !d || d > e) continue;
        cJSON *ev = cJSON_ParseWithLength(d + 7, (size_t)(e - d - 7));
        const char *t = jstr(ev, "type") ? jstr(ev, "type") : "";
        int idx = (int)jnum(ev, "output_index");
        bad += strncmp(p + 7, t, strlen(t)) != 0 || jnum(ev, "sequence_number") != seq++ || ended;
        if (!strcmp(t, "response.output_item.added")) {
            bad += open != -1 || idx != a->n || a->n >= 6;
            if (a->n < 6) resp_item(a, cJSON_GetObjectItem(ev, "item"));
            open = idx;
        } else if (strstr(t, ".delta")) {
            bad += idx != open || open < 0;
            const char *v = jstr(ev, "delta");
            if (open >= 0 && open < 6 && v) strncat(a->body[open], v, sizeof a->body[open] - strlen(a->body[open]) - 1);
            if (open >= 0 && open < 6) a->pieces[open]++;
        } else if (!strcmp(t, "response.output_text.done") || !strcmp(t, "response.reasoning_text.done")) {
            bad += idx != open || !jstr(ev, "text") || strcmp(jstr(ev, "text"), a->body[open]);
        } else if (!strcmp(t, "response.function_call_arguments.done")) {
            bad += idx != open || !jstr(ev, "arguments") || strcmp(jstr(ev, "arguments"), a->body[open]);
        } else if (!strcmp(t, "response.output_item.done")) {
            resp one = {0};
            resp_item(&one, cJSON_GetObjectItem(ev, "item"));
            bad += idx != open || strcmp(one.body[0], a->body[open]);
            if (open >= 0 && open < 6) snprintf(a->status_[open], sizeof a->status_[open], "%s", one.status_[0]);
            open = -1;
        } else if (!strcmp(t, "response.completed") || !strcmp(t, "response.incomplete")) {
            resp_of(&fin, cJSON_GetObjectItem(ev, "response"));
            bad += open != -1 || strcmp(fin.end, !strcmp(t, "response.completed") ? "completed" : "incomplete");
            ended = 1;
        }
        cJSON_Delete(ev);
    }
    bad += fin.n != a->n;
    for (int i = 0; i < a->n && i < fin.n; i++) bad += strcmp(fin.body[i], a->body[i]) || strcmp(fin.type[i], a->type[i]);
    snprintf(a->end, sizeof a->end, "%s", fin.end);
    CHECKF(!bad && ended, "responses stream: %d out of order or disagreeing: %s", bad, hr.body);
    http_res_free(&hr);
}

/* the store's bounds: entries and bytes, the least recently used out first */
static void test_resp_store(void)
{
    tm_resp_store *s = NULL;
    CHECK(tm_resp_store_new(&s, 3, 40) == 0 && s);
    if (!s) return;
    static const char *ids[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 3; i++) CHECK(tm_resp_store_put(s, ids[i], strdup("[1]"), strdup("{}")) == 0);
    char *conv = NULL, *rsp = NULL;
    CHECK(tm_resp_store_get(s, "a", &conv, &rsp) == 0 && !strcmp(conv, "[1]") && !strcmp(rsp, "{}"));
    free(conv);
    free(rsp);
    CHECK(tm_resp_store_put(s, "d", strdup("[2]"), strdup("{}")) == 0); /* full: b, the least recently used, goes */
    CHECK(tm_resp_store_get(s, "b", NULL, NULL) == -1 && tm_resp_store_get(s, "a", NULL, NULL) == 0 &&
          tm_resp_store_get(s, "c", NULL, NULL) == 0 && tm_resp_store_get(s, "d", NULL, NULL) == 0);
    /* bytes: 3 entries of 5 bytes stored (a, c, d, in the order last used); one of 30 evicts the least
       recently used until 40 hold it: a alone */
    char big[32];
    memset(big, 'x', 29);
    big[29] = '\0';
    CHECK(tm_resp_store_put(s, "e", strdup(big), strdup("y")) == 0);
    CHECK(tm_resp_store_get(s, "e", NULL, NULL) == 0 && tm_resp_store_get(s, "a", NULL, NULL) == -1 &&
          tm_resp_store_get(s, "c", NULL, NULL) == 0 && tm_resp_store_get(s, "d", NULL, NULL) == 0);
    CHECK(tm_resp_store_put(s, "f", strdup(big), strdup(big)) == -1); /* larger than the store: not kept */
    CHECK(tm_resp_store_put(s, "e", strdup("[3]"), strdup("{}")) == 0 && tm_resp_store_get(s, "e", &conv, NULL) == 0 &&
          !strcmp(conv, "[3]")); /* the same id again: replaced */
    free(conv);
    CHECK(tm_resp_store_del(s, "e") == 0 && tm_resp_store_del(s, "e") == -1 && tm_resp_store_get(s, "e", NULL, NULL) == -1);
    tm_resp_store_free(s);
}

/* GET (del 0) or DELETE /v1/responses/{id}: the status, and the body into out [n] */
static int resp_by_id(int port, const char *id, int del, char *out, size_t n)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/responses/%s", id);
    http_res hr;
    int st = http(port, del ? "DELETE" : "GET", path, NULL, NULL, &hr) == 0 ? hr.status : -1;
    snprintf(out, n, "%s", hr.body ? hr.body : "");
    if (st >= 0) http_res_free(&hr);
    return st;
}

/* stored responses: GET returns the answer, previous_response_id continues its conversation as the
 * same conversation sent whole does (greedy), calls' ids included; store false keeps nothing; DELETE */
static void test_resp_stored(int port, const char *rtools)
{
    char body[4096], got[8192];
    resp a, b, c;
    snprintf(body, sizeof body, "{\"input\":\"Tell me a story.\",\"instructions\":\"Be brief.\",\"temperature\":0,"
             "\"max_output_tokens\":12}");
    ask_resp(port, body, 0, &a);
    CHECK(a.status == 200 && a.n == 1 && a.rid[0]);
    CHECKF(resp_by_id(port, a.rid, 0, got, sizeof got) == 200 && strstr(got, a.rid) && strstr(got, "\"store\":true"),
           "GET %s: %s", a.rid, got);
    cJSON *g = cJSON_Parse(got);
    CHECKF(jstr(g, "output.0.content.0.text") && !strcmp(jstr(g, "output.0.content.0.text"), a.body[0]), "stored: %s", got);
    cJSON_Delete(g);
    /* continued: the instructions not carried (new ones given), the answer as the assistant's turn */
    snprintf(body, sizeof body, "{\"input\":\"And then?\",\"previous_response_id\":\"%s\",\"instructions\":\"Be kind.\","
             "\"temperature\":0,\"max_output_tokens\":12}", a.rid);
    ask_resp(port, body, 0, &b);
    char whole[4096];
    cJSON *t = cJSON_CreateString(a.body[0]);
    char *tq = cJSON_PrintUnformatted(t);
    snprintf(whole, sizeof whole, "{\"input\":[{\"role\":\"user\",\"content\":\"Tell me a story.\"},{\"role\":\"assistant\","
             "\"content\":%s},{\"role\":\"user\",\"content\":\"And then?\"}],\"instructions\":\"Be kind.\",\"temperature\":0,"
             "\"max_output_tokens\":12}", tq ? tq : "\"\"");
    free(tq);
    cJSON_Delete(t);
    ask_resp(port, whole, 0, &c);
    CHECKF(b.status == 200 && c.status == 200 && b.n == 1 && c.n == 1 && !strcmp(b.body[0], c.body[0]),
           "continued '%s' / whole '%s'", b.body[0], c.body[0]);
    /* a forced call, then its output by previous_response_id: as the whole conversation with the call */
    for (int stream = 0; stream < 2; stream++) {
        snprintf(body, sizeof body, "{\"input\":\"Weather in Oslo?\",\"tools\":%s,\"tool_choice\":\"required\","
                 "\"parallel_tool_calls\":false,\"temperature\":0,\"max_output_tokens\":160,\"stream\":%s}", rtools,
                 stream ? "true" : "false");
        ask_resp(port, body, stream, &a);
        CHECKF(a.status == 200 && a.n == 1 && !strcmp(a.type[0], "function_call"), "call%s: %d %s '%s'",
               stream ? " (streamed)" : "", a.n, a.type[0], a.body[0]);
    }
    CHECK(resp_by_id(port, "resp_none", 0, got, sizeof got) == 404 && strstr(got, "not_found"));
    snprintf(body, sizeof body, "{\"input\":\"Weather in Oslo?\",\"tools\":%s,\"tool_choice\":\"required\","
             "\"parallel_tool_calls\":false,\"temperature\":0,\"max_output_tokens\":160}", rtools);
    ask_resp(port, body, 0, &a);
    snprintf(body, sizeof body, "{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"%s\",\"output\":\"Sunny\"}],"
             "\"previous_response_id\":\"%s\",\"tools\":%s,\"tool_choice\":\"none\",\"temperature\":0,"
             "\"max_output_tokens\":12}", a.id[0], a.rid, rtools);
    ask_resp(port, body, 0, &b);
    char args[2200];
    t = cJSON_CreateString(a.body[0]);
    tq = cJSON_PrintUnformatted(t);
    snprintf(args, sizeof args, "%s", tq ? tq : "\"\"");
    free(tq);
    cJSON_Delete(t);
    snprintf(whole, sizeof whole, "{\"input\":[{\"role\":\"user\",\"content\":\"Weather in Oslo?\"},{\"type\":\"function_call\","
             "\"call_id\":\"%s\",\"name\":\"%s\",\"arguments\":%s},{\"type\":\"function_call_output\",\"call_id\":\"%s\","
             "\"output\":\"Sunny\"}],\"tools\":%s,\"tool_choice\":\"none\",\"temperature\":0,\"max_output_tokens\":12}",
             a.id[0], a.name[0], args, a.id[0], rtools);
    ask_resp(port, whole, 0, &c);
    CHECKF(b.status == 200 && c.status == 200 && b.n == 1 && c.n == 1 && !strcmp(b.body[0], c.body[0]),
           "call output continued '%s' / whole '%s' (%d, %d)", b.body[0], c.body[0], b.status, c.status);
    /* the call by an item_reference to the stored response's output item: the same answer */
    CHECK(resp_by_id(port, a.rid, 0, got, sizeof got) == 200);
    g = cJSON_Parse(got);
    const char *fid = jstr(g, "output.0.id");
    CHECKF(fid && !strncmp(fid, "fc_", 3), "stored call item: %s", got);
    snprintf(body, sizeof body, "{\"input\":[{\"role\":\"user\",\"content\":\"Weather in Oslo?\"},{\"type\":"
             "\"item_reference\",\"id\":\"%s\"},{\"type\":\"function_call_output\",\"call_id\":\"%s\","
             "\"output\":\"Sunny\"}],\"tools\":%s,\"tool_choice\":\"none\",\"temperature\":0,\"max_output_tokens\":12}",
             fid ? fid : "", a.id[0], rtools);
    cJSON_Delete(g);
    resp d;
    ask_resp(port, body, 0, &d);
    CHECKF(d.status == 200 && d.n == 1 && !strcmp(d.body[0], c.body[0]), "by reference '%s' / whole '%s' (%d)", d.body[0],
           c.body[0], d.status);
    snprintf(body, sizeof body, "{\"input\":[{\"type\":\"item_reference\",\"id\":\"fc_%s99\"}]}", a.rid + 5);
    check_error(port, "POST", "/v1/responses", body, 400, "input[0]", "a reference to no item of a stored response");
    /* a streamed answer is stored too: GET it by the id its events gave */
    snprintf(body, sizeof body, "{\"input\":\"Hi\",\"temperature\":0,\"max_output_tokens\":8,\"stream\":true}");
    http_res hr;
    CHECK(http(port, "POST", "/v1/responses", body, NULL, &hr) == 0 && hr.status == 200);
    const char *idp = hr.body ? strstr(hr.body, "\"id\":\"resp_") : NULL;
    char sid[48] = "";
    if (idp) sscanf(idp + 6, "%47[^\"]", sid);
    http_res_free(&hr);
    CHECKF(sid[0] && resp_by_id(port, sid, 0, got, sizeof got) == 200 && strstr(got, "\"status\":\"") &&
               strstr(got, "\"output\":[{"),
           "streamed %s: %s", sid, got);
    /* store false: nothing kept */
    snprintf(body, sizeof body, "{\"input\":\"Hi\",\"store\":false,\"temperature\":0,\"max_output_tokens\":4}");
    ask_resp(port, body, 0, &a);
    CHECKF(a.status == 200 && resp_by_id(port, a.rid, 0, got, sizeof got) == 404, "store false: %s", got);
    /* delete: then gone, and previous_response_id no longer finds it */
    CHECKF(resp_by_id(port, sid, 1, got, sizeof got) == 200 && strstr(got, "\"deleted\":true"), "DELETE: %s", got);
    CHECK(resp_by_id(port, sid, 0, got, sizeof got) == 404 && resp_by_id(port, sid, 1, got, sizeof got) == 404);
    snprintf(body, sizeof body, "{\"input\":\"x\",\"previous_response_id\":\"%s\"}", sid);
    check_error(port, "POST", "/v1/responses", body, 400, "previous_response_id", "a deleted previous response");
    check_error(port, "POST", "/v1/responses", "{\"input\":\"x\",\"store\":\"yes\"}", 400, "store", "store a string");
    check_error(port, "POST", "/v1/responses/resp_1", "{}", 405, NULL, "POST to a stored response");
}

static void test_resp_server(int port)
{
    char body[4096], obody[4096];
    const char *U = "\"input\":[{\"role\":\"user\",\"content\":\"What is the weather in Oslo?\"}],\"temperature\":0,"
                    "\"max_output_tokens\":160";
    const char *OU = "\"messages\":[{\"role\":\"user\",\"content\":\"What is the weather in Oslo?\"}],\"temperature\":0,"
                     "\"max_tokens\":160";
    const char *RTOOLS =
        "[{\"type\":\"function\",\"name\":\"get_weather\",\"description\":\"The weather in a city\",\"parameters\":"
        "{\"type\":\"object\",\"properties\":{\"city\":{\"enum\":[\"Paris\",\"Oslo\",\"Rome\"]},\"days\":{\"type\":"
        "\"integer\",\"minimum\":1,\"maximum\":7}},\"required\":[\"city\"],\"additionalProperties\":false}},"
        "{\"type\":\"function\",\"name\":\"now\",\"parameters\":{\"type\":\"object\",\"properties\":{},"
        "\"additionalProperties\":false}}]";
    /* required: the chat endpoint's calls, as function_call items; streamed the same */
    reply r;
    snprintf(obody, sizeof obody, "{%s,\"tools\":%s,\"tool_choice\":\"required\"}", OU, TOOLS);
    ask(port, obody, 0, &r);
    resp a;
    for (int stream = 0; stream < 2; stream++) {
        snprintf(body, sizeof body, "{%s,\"tools\":%s,\"tool_choice\":\"required\",\"stream\":%s}", U, RTOOLS,
                 stream ? "true" : "false");
        ask_resp(port, body, stream, &a);
        /* (a stream's call that max_output_tokens cut stays, incomplete, as far as it went out) */
        int cut = !strcmp(r.finish, "length");
        CHECKF(a.status == 200 && (a.n == r.n || (stream && cut && a.n == r.n + 1 && !strcmp(a.status_[r.n], "incomplete"))) &&
                   !strcmp(a.end, cut ? "incomplete" : "completed"),
               "required%s: %d items / %d calls, %s", stream ? " (streamed)" : "", a.n, r.n, a.end);
        for (int i = 0; i < a.n && i < r.n; i++)
            CHECKF(!strcmp(a.type[i], "function_call") && !strcmp(a.name[i], r.name[i]) && same_json(a.body[i], r.args[i]) &&
                       strlen(a.id[i]) == strlen(r.id[i]) && (!stream || a.pieces[i] > 1 || strlen(r.args[i]) <= 2),
                   "required%s, item %d: %s %s(%s)", stream ? " (streamed)" : "", i, a.type[i], a.name[i], a.body[i]);
    }
    /* a conversation with a call and its output: the chat endpoint's answer to its twin, as a message item */
    const char *conv =
        "\"input\":[{\"role\":\"user\",\"content\":\"What is the weather in Oslo?\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Let me look.\"}]},"
        "{\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"call_1\",\"output\":\"Sunny, 21 C\"}]";
    const char *oconv =
        "\"messages\":[{\"role\":\"user\",\"content\":\"What is the weather in Oslo?\"},"
        "{\"role\":\"assistant\",\"content\":\"Let me look.\",\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
        "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"Sunny, 21 C\"}]";
    snprintf(obody, sizeof obody, "{%s,\"tools\":%s,\"tool_choice\":\"none\",\"temperature\":0,\"max_tokens\":24}", oconv, TOOLS);
    ask(port, obody, 0, &r);
    for (int stream = 0; stream < 2; stream++) {
        snprintf(body, sizeof body, "{%s,\"tools\":%s,\"tool_choice\":\"none\",\"temperature\":0,\"max_output_tokens\":24,"
                 "\"stream\":%s}", conv, RTOOLS, stream ? "true" : "false");
        ask_resp(port, body, stream, &a);
        CHECKF(r.status == 200 && a.status == 200 && a.n == 1 && !strcmp(a.type[0], "message") && !strcmp(a.body[0], r.content) &&
                   !strcmp(a.end, !strcmp(r.finish, "length") ? "incomplete" : "completed"),
               "call output%s: %d items, '%s' / '%s' (%s)", stream ? " (streamed)" : "", a.n, a.body[0], r.content, a.end);
    }
    /* text.format json_schema: the answer one object the schema allows */
    snprintf(body, sizeof body,
             "{\"input\":\"Pick a number.\",\"temperature\":0,\"max_output_tokens\":40,\"text\":{\"format\":{\"type\":"
             "\"json_schema\",\"name\":\"n\",\"schema\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\","
             "\"minimum\":1,\"maximum\":9}},\"required\":[\"n\"],\"additionalProperties\":false}}}}");
    ask_resp(port, body, 0, &a);
    cJSON *o = cJSON_Parse(a.body[0]);
    double nv = jnum(o, "n");
    CHECKF(a.status == 200 && a.n == 1 && cJSON_IsObject(o) && nv >= 1 && nv <= 9 && nv == (int)nv, "json_schema: '%s'", a.body[0]);
    cJSON_Delete(o);
    check_error(port, "POST", "/v1/responses", "{\"input\":\"x\",\"tools\":[{\"type\":\"web_search_preview\"}]}", 400,
                "tools[0]", "a built-in tool");
    check_error(port, "POST", "/v1/responses", "{\"input\":\"x\",\"previous_response_id\":\"resp_0\"}", 400,
                "previous_response_id", "an unknown previous_response_id");
    test_resp_stored(port, RTOOLS);
}

/* ---- 4b. a model with a "tool_use" template ---- */

/* dir := the demo model's files (linked) with tokenizer_config.json's chat_template a list [default D, tool_use
 * T] (layout 0), or D as chat_template.jinja and T as additional_chat_templates/tool_use.jinja (layout 1) */
static void tool_template_dir(const char *dir, int layout, const char *D, const char *T)
{
    static const char *const LINKS[] = {"config.json", "model.safetensors", "tokenizer.json", "special_tokens_map.json",
                                        "generation_config.json"};
    char src[PATH_MAX], from[PATH_MAX + 64], to[PATH_MAX + 64];
    CHECK(realpath("models/tiny-classics-llama", src) != NULL);
    for (size_t i = 0; i < sizeof LINKS / sizeof LINKS[0]; i++) {
        snprintf(from, sizeof from, "%s/%s", src, LINKS[i]);
        snprintf(to, sizeof to, "%s/%s", dir, LINKS[i]);
        CHECK(symlink(from, to) == 0);
    }
    snprintf(from, sizeof from, "%s/tokenizer_config.json", src);
    char *text = th_slurp(from);
    cJSON *tc = text ? cJSON_Parse(text) : NULL;
    free(text);
    CHECK(tc != NULL);
    if (!tc) return;
    if (layout == 0) {
        cJSON *list = cJSON_AddArrayToObject(tc, "chat_template");
        const char *names[] = {"default", "tool_use"}, *srcs[] = {D, T};
        for (int i = 0; i < 2; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "name", names[i]);
            cJSON_AddStringToObject(e, "template", srcs[i]);
            cJSON_AddItemToArray(list, e);
        }
    } else {
        snprintf(to, sizeof to, "%s/chat_template.jinja", dir);
        CHECK(th_write_file(to, D, strlen(D)) == 0);
        snprintf(to, sizeof to, "%s/additional_chat_templates", dir);
        CHECK(mkdir(to, 0755) == 0);
        snprintf(to, sizeof to, "%s/additional_chat_templates/tool_use.jinja", dir);
        CHECK(th_write_file(to, T, strlen(T)) == 0);
    }
    char *js = cJSON_Print(tc);
    snprintf(to, sizeof to, "%s/tokenizer_config.json", dir);
    CHECK(js && th_write_file(to, js, strlen(js)) == 0);
    free(js);
    cJSON_Delete(tc);
}

/* the model's "tool_use" template, as transformers picks it: a request with tools renders it (its call dialect,
 * shown only there, found at the server's start), one without the default; from a model directory in both
 * layouts, and from the package tandem convert makes of it */
static void test_tool_template(void)
{
    const char *D = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:";
    const char *T = "You may call {{ tools | length }} tools, each as <tool_call>\n{\"name\": ..., \"arguments\": "
                    "...}\n</tool_call>.\n{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                    "assistant:";
    for (int layout = 0; layout < 2; layout++) {
        char dir[] = "/tmp/tm_tooltpl_XXXXXX", pkg[64];
        CHECK(mkdtemp(dir) != NULL);
        tool_template_dir(dir, layout, D, T);
        snprintf(pkg, sizeof pkg, "%s.tdm", dir);
        tandem_status st;
        tm_convert_opts co;
        tm_convert_opts_default(&co);
        tm_err cerr = {0};
        CHECKF(tm_convert(dir, pkg, &co, NULL, &cerr) == TM_OK, "layout %d: convert: %s", layout, cerr.msg);
        const char *paths[] = {dir, pkg};
        for (int p = 0; p < 2; p++) {
            tandem_model *m = NULL;
            CHECKF(tandem_model_open(&m, paths[p], &st) == 0, "%s: %s", paths[p], st.msg);
            if (!m) continue;
            const char *dt = tandem_model_chat_template(m), *tt = tandem_model_tool_template(m);
            CHECKF(dt && !strcmp(dt, D) && tt && !strcmp(tt, T), "layout %d %s: default '%s', tool_use '%s'", layout,
                   p ? "package" : "directory", dt ? dt : "(none)", tt ? tt : "(none)");
            tm_serve_tok tk = {m, NULL, 1024};
            CHECK(tm_serve_template_for(&tk, "{\"tools\":[{\"type\":\"function\"}]}") == tt);
            CHECK(tm_serve_template_for(&tk, "{\"tools\":null}") == NULL && tm_serve_template_for(&tk, NULL) == NULL);
            tk.tpl = D; /* an override wins */
            CHECK(tm_serve_template_for(&tk, "{\"tools\":[{\"type\":\"function\"}]}") == D);
            if (p == 1 && layout == 0) { /* through the server: required calls in the dialect only T shows */
                tandem_session_opts so;
                tandem_session_opts_default(&so);
                so.n_threads = 2;
                so.max_ctx = 1024;
                tandem_session *s = NULL;
                CHECKF(tandem_session_new(&s, m, &so, &st) == 0, "%s", st.msg);
                tm_server_opts o;
                tm_server_opts_default(&o);
                o.port = 0;
                tm_server *srv = NULL;
                tm_err err = {0};
                if (s) CHECKF(tm_server_start(&srv, m, s, &o, &err) == TM_OK, "%s", err.msg);
                if (srv) {
                    char body[2048];
                    snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Oslo?\"}],"
                             "\"temperature\":0,\"max_tokens\":400,\"tools\":%s,\"tool_choice\":\"required\","
                             "\"parallel_tool_calls\":false}", TOOLS);
                    reply a;
                    ask(tm_server_port(srv), body, 0, &a);
                    CHECKF(a.status == 200 && a.n == 1 && args_ok(a.name[0], a.args[0]), "tool_use: status %d, %d calls, finish %s, content %s",
                           a.status, a.n, a.finish, a.content);
                    tm_server_stop(srv);
                }
                tandem_session_free(s);
            }
            tandem_model_free(m);
        }
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf %s %s", dir, pkg);
        CHECK(system(cmd) == 0);
    }
}

/* ---- 5. reasoning ---- */

/* a server with template tpl and --reasoning-format fmt (NULL: auto), asked body (*a) and the streamed sbody
 * (*b); NULL (a failed check) if it does not start. The caller stops it. */
static tm_server *reasoning_pair(tandem_model *m, tandem_session *s, const char *tpl, const char *fmt, const char *body,
                                 const char *sbody, reply *a, reply *b)
{
    tm_server_opts o;
    tm_server_opts_default(&o);
    o.port = 0;
    o.chat_template = tpl;
    o.reasoning = fmt;
    tm_server *srv = NULL;
    tm_err err = {0};
    CHECKF(tm_server_start(&srv, m, s, &o, &err) == TM_OK, "%s", err.msg);
    if (!srv) return NULL;
    ask(tm_server_port(srv), body, 0, a);
    ask(tm_server_port(srv), sbody, 1, b);
    return srv;
}

/* a template that opens the think block at the prompt's end (DeepSeek-R1's way): the demo model's
 * reply is all reasoning; "none" leaves it in content; a template without </think> reads none */
static void test_reasoning_server(tandem_model *m, tandem_session *s)
{
    const char *r1 = "{%- for m in messages %}{%- set c = m['content'] %}{%- if '</think>' in c %}"
                     "{%- set c = c.split('</think>')[-1] %}{%- endif %}{{ m['role'] }}: {{ c }}\n{% endfor %}"
                     "assistant:<think>\n";
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story.\"}],\"temperature\":0,"
                       "\"max_tokens\":16}";
    const char *sbody = "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story.\"}],\"temperature\":0,"
                        "\"max_tokens\":16,\"stream\":true}";
    const char *formats[] = {NULL, "none"};
    char thought[4096] = "";
    for (int k = 0; k < 2; k++) {
        reply a, b;
        tm_server *srv = reasoning_pair(m, s, r1, formats[k], body, sbody, &a, &b);
        if (!srv) continue;
        if (k == 0) {
            /* a reply held to a constraint from its start is no thinking, even after an opened block */
            reply jm;
            ask(tm_server_port(srv),
                "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":0,\"max_tokens\":40,"
                "\"json_schema\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":1,"
                "\"maximum\":9}},\"required\":[\"n\"],\"additionalProperties\":false}}",
                0, &jm);
            CHECKF(jm.status == 200 && !jm.has_reasoning && jm.has_content && strstr(jm.content, "\"n\""),
                   "constrained: reasoning %d '%s', content '%s'", jm.has_reasoning, jm.reasoning, jm.content);
            CHECKF(a.status == 200 && a.has_reasoning && strlen(a.reasoning) > 0 && !a.has_content &&
                       !strcmp(a.finish, "length"),
                   "auto: reasoning '%s', content %d '%s'", a.reasoning, a.has_content, a.content);
            CHECKF(b.status == 200 && !strcmp(a.reasoning, b.reasoning) && !b.has_content, "stream: '%s' / '%s'",
                   b.reasoning, a.reasoning);
            snprintf(thought, sizeof thought, "%s", a.reasoning);
            /* Anthropic's: a thinking block, as JSON and streamed */
            for (int stream = 0; stream < 2; stream++) {
                char ab[512];
                snprintf(ab, sizeof ab, "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story.\"}],"
                         "\"temperature\":0,\"max_tokens\":16,\"stream\":%s}", stream ? "true" : "false");
                anth t;
                ask_anth(tm_server_port(srv), ab, stream, &t);
                CHECKF(t.status == 200 && t.n == 1 && !strcmp(t.type[0], "thinking") && !strcmp(t.body[0], a.reasoning) &&
                           !strcmp(t.end, "max_tokens"),
                       "thinking block%s: %d blocks, %s '%s'", stream ? " (streamed)" : "", t.n, t.type[0], t.body[0]);
                /* the Responses API's: a reasoning item */
                snprintf(ab, sizeof ab, "{\"input\":[{\"role\":\"user\",\"content\":\"Tell me a story.\"}],"
                         "\"temperature\":0,\"max_output_tokens\":16,\"stream\":%s}", stream ? "true" : "false");
                resp rr;
                ask_resp(tm_server_port(srv), ab, stream, &rr);
                CHECKF(rr.status == 200 && rr.n == 1 && !strcmp(rr.type[0], "reasoning") && !strcmp(rr.body[0], a.reasoning) &&
                           !strcmp(rr.end, "incomplete"),
                       "reasoning item%s: %d items, %s '%s'", stream ? " (streamed)" : "", rr.n, rr.type[0], rr.body[0]);
            }
        } else {
            CHECKF(a.status == 200 && !a.has_reasoning && !b.has_reasoning && !strcmp(a.content, b.content) &&
                       strstr(a.content, thought),
                   "none: content '%s' / '%s', reasoning before '%s'", a.content, b.content, thought);
        }
        tm_server_stop(srv);
    }
    /* another family's opened block (Command A Reasoning's markers), found with auto and with deepseek */
    const char *r4 = "{%- for m in messages %}<|START_TEXT|>{{ m['content'] }}<|END_TEXT|>\n{% endfor %}"
                     "<|CHATBOT_TOKEN|><|START_THINKING|>";
    const char *r4_formats[] = {NULL, "deepseek"};
    for (int k = 0; k < 2; k++) {
        reply a, b;
        tm_server *srv = reasoning_pair(m, s, r4, r4_formats[k], body, sbody, &a, &b);
        if (!srv) continue;
        CHECKF(a.status == 200 && a.has_reasoning && strlen(a.reasoning) > 0 && !a.has_content &&
                   !strcmp(a.reasoning, b.reasoning) && !b.has_content,
               "command4 (%s): reasoning '%s' / '%s', content %d '%s'", r4_formats[k] ? r4_formats[k] : "auto",
               a.reasoning, b.reasoning, a.has_content, a.content);
        tm_server_stop(srv);
    }
    tm_server_opts o;
    tm_server_opts_default(&o);
    o.reasoning = "sometimes";
    tm_server *srv = NULL;
    tm_err err = {0};
    CHECK(tm_server_start(&srv, m, s, &o, &err) == TM_E_INVALID && !srv && strstr(err.msg, "sometimes"));
    /* an assistant turn's reasoning_content reaches the template (Qwen3 renders it) */
    char *qwen3 = shared_template("Qwen-Qwen3-0.6B.jinja");
    const char *msgs = "{\"messages\":[{\"role\":\"user\",\"content\":\"2+2?\"},{\"role\":\"assistant\","
                       "\"content\":\"4\",\"reasoning_content\":\"Adding.\"}]}";
    tm_oai_req r;
    tm_oai_error e;
    CHECK(tm_oai_parse(&r, TM_OAI_CHAT, msgs, strlen(msgs), &e) == 0);
    char *text = NULL;
    tandem_status st;
    CHECKF(qwen3 && tandem_chat_render(m, qwen3, r.messages_json, 0, NULL, &text, &st) == 0, "%s", st.msg);
    CHECKF(text && strstr(text, "<|im_start|>assistant\n<think>\nAdding.\n</think>\n\n4<|im_end|>"), "%s",
           text ? text : "");
    free(text);
    tm_oai_req_free(&r);
    free(qwen3);
}

/* gpt-oss's template (harmony) on the demo model, whose tokenizer lacks harmony's special tokens: the
 * markers are then plain text, which the reply's parser reads the same */
static void test_harmony_server(tandem_model *m, tandem_session *s)
{
    char *tpl = th_slurp("tests/data/chat_templates/openai-gpt-oss-120b.jinja");
    CHECK(tpl != NULL);
    if (!tpl) return;
    const char *htools =
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"The weather\","
        "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"enum\":[\"Paris\",\"Oslo\",\"Rome\"]},"
        "\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":7}},\"required\":[\"city\"],"
        "\"additionalProperties\":false}}},{\"type\":\"function\",\"function\":{\"name\":\"now\",\"description\":"
        "\"The time\",\"parameters\":{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}}}]";
    const char *U = "\"messages\":[{\"role\":\"user\",\"content\":\"What is the weather in Oslo?\"}],"
                    "\"temperature\":0,\"max_tokens\":64";
    tm_server_opts o;
    tm_server_opts_default(&o);
    o.port = 0;
    o.chat_template = tpl;
    tm_server *srv = NULL;
    tm_err err = {0};
    CHECKF(tm_server_start(&srv, m, s, &o, &err) == TM_OK, "%s", err.msg);
    if (srv) {
        int port = tm_server_port(srv);
        char body[4096];
        reply a, b;
        for (int named = 0; named < 2; named++) { /* forced calls: required, then one named */
            snprintf(body, sizeof body, "{%s,\"tools\":%s,\"tool_choice\":%s}", U, htools,
                     named ? "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}" : "\"required\"");
            ask(port, body, 0, &a);
            body[strlen(body) - 1] = '\0';
            strcat(body, ",\"stream\":true}");
            ask(port, body, 1, &b);
            CHECKF(a.status == 200 && a.n == 1 && args_ok(a.name[0], a.args[0]) && !strcmp(a.finish, "tool_calls") &&
                       (!named || !strcmp(a.name[0], "now")) && !a.has_reasoning,
                   "harmony forced%s: %d %s %s(%s)", named ? " (named)" : "", a.n, a.finish, a.name[0], a.args[0]);
            CHECKF(b.status == 200 && b.n == a.n && a.n == 1 && !strcmp(a.name[0], b.name[0]) && !strcmp(a.args[0], b.args[0]) &&
                       (b.pieces[0] > 1 || strlen(a.args[0]) <= 2),
                   "harmony forced, streamed: %d %s(%s) in %d pieces", b.n, b.name[0], b.args[0], b.pieces[0]);
        }
        /* a schema: the answer in the final channel, JSON */
        snprintf(body, sizeof body, "{%s,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\","
                 "\"schema\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}},\"required\":[\"n\"],"
                 "\"additionalProperties\":false}}}}", U);
        ask(port, body, 0, &a);
        cJSON *j = a.has_content ? cJSON_Parse(a.content) : NULL;
        CHECKF(a.status == 200 && cJSON_IsNumber(cJSON_GetObjectItem(j, "n")) && !a.has_reasoning,
               "harmony schema: %d '%s'", a.status, a.content);
        cJSON_Delete(j);
        /* free text that never uses the format (this model's): all answer, streamed the same */
        snprintf(body, sizeof body, "{%s}", U);
        ask(port, body, 0, &a);
        snprintf(body, sizeof body, "{%s,\"stream\":true}", U);
        ask(port, body, 1, &b);
        CHECKF(a.status == 200 && b.status == 200 && a.has_content && strlen(a.content) > 0 && !a.has_reasoning &&
                   !strcmp(a.content, b.content),
               "harmony text: '%s' / streamed '%s'", a.content, b.content);
        tm_server_stop(srv);
    }
    /* OpenAI's reasoning_effort reaches the template (gpt-oss's system message); kwargs win; a wrong type: 400 */
    static const struct {
        const char *extra, *want;
    } eff[] = {{",\"reasoning_effort\":\"high\"", "Reasoning: high"},
               {",\"reasoning_effort\":\"low\",\"chat_template_kwargs\":{\"reasoning_effort\":\"high\"}", "Reasoning: high"},
               {"", "Reasoning: medium"}};
    for (size_t k = 0; k < sizeof eff / sizeof eff[0]; k++) {
        char b[512];
        snprintf(b, sizeof b, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]%s}", eff[k].extra);
        tm_oai_req r;
        tm_oai_error e;
        CHECK(tm_oai_parse(&r, TM_OAI_CHAT, b, strlen(b), &e) == 0);
        char *text = NULL;
        tandem_status st;
        CHECKF(tandem_chat_render(m, tpl, r.messages_json, 1, r.template_kwargs_json, &text, &st) == 0, "%s", st.msg);
        CHECKF(text && strstr(text, eff[k].want), "%s: %s", b, text ? text : "");
        free(text);
        tm_oai_req_free(&r);
    }
    parse_bad("{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"reasoning_effort\":3}", "reasoning_effort",
              "reasoning_effort a number");
    /* an assistant turn's reasoning_content reaches the template as its thinking */
    const char *msgs = "{\"messages\":[{\"role\":\"user\",\"content\":\"2+2?\"},{\"role\":\"assistant\",\"content\":\"\","
                       "\"reasoning_content\":\"Adding.\",\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
                       "\"function\":{\"name\":\"add\",\"arguments\":\"{\\\"a\\\":2}\"}}]},"
                       "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"4\"}]}";
    tm_oai_req r;
    tm_oai_error e;
    CHECK(tm_oai_parse(&r, TM_OAI_CHAT, msgs, strlen(msgs), &e) == 0);
    char *text = NULL;
    tandem_status st;
    CHECKF(tandem_chat_render(m, tpl, r.messages_json, 1, NULL, &text, &st) == 0, "%s", st.msg);
    CHECKF(text && strstr(text, "<|start|>assistant<|channel|>analysis<|message|>Adding.<|end|><|start|>assistant "
                                "to=functions.add<|channel|>commentary json<|message|>{\"a\": 2}<|call|>"),
           "%s", text ? text : "");
    free(text);
    tm_oai_req_free(&r);
    free(tpl);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    test_parse();
    test_anth_translate();
    test_resp_translate();
    test_resp_store();
    tandem_status st;
    tandem_model *m = NULL;
    CHECKF(tandem_model_open(&m, "models/tiny-classics-llama", &st) == 0, "%s", st.msg);
    if (!m) return th_done("test_serve_tools");
    test_render(m);
    tandem_session_opts so;
    tandem_session_opts_default(&so);
    so.n_threads = 2;
    so.max_ctx = 1024;
    so.route = TANDEM_ROUTE_HYBRID; /* one route: answers compared across requests come from the same numerics */
    tandem_session *s = NULL;
    CHECKF(tandem_session_new(&s, m, &so, &st) == 0, "%s", st.msg);
    if (s) test_server(m, s);
    test_tool_template();
    if (s) test_reasoning_server(m, s);
    if (s) test_messages_server(m, s);
    if (s) test_harmony_server(m, s);
    tandem_session_free(s);
    tandem_model_free(m);
    return th_done("test_serve_tools");
}
