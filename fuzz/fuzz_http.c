/* fuzz/fuzz_http.c: the server's request-body parser and JSON writer
 * (serve/oai.h) on arbitrary input. Byte 0 picks the endpoint (even:
 * /v1/completions, odd: /v1/chat/completions, 3 mod 4: Anthropic's /v1/messages, whose body is
 * translated into a chat one first: refused with 400 naming the field, or a chat body the rest
 * checks; its writers make valid JSON events; 13 mod 16: OpenAI's /v1/responses, the same way,
 * against a small store holding "resp_0" (previous_response_id), the answer kept there where its
 * echo asks and read back and deleted as JSON; 10 mod 16: llama.cpp's /infill, its prompt built on the
 * demo model (three of its tokens standing in for the FIM ones) into a completions body, its writers'
 * events valid JSON;
 * 6 mod 8: /v1/embeddings, its parser's request within
 * its bounds and its writer's answer valid JSON whatever the floats); the rest is the body.
 * Checked invariants:
 *  - tm_oai_parse returns 0, or -1 with HTTP 400 (500 only for out of
 *    memory), a message, and an empty request;
 *  - an accepted completion has exactly one of a text prompt and token ids
 *    (ids >= 0); an accepted chat has messages_json, a JSON array of objects
 *    with role system/user/assistant and string content, and kwargs (if any)
 *    a JSON object;
 *  - stop strings: at most TM_OAI_MAX_STOP, NULL-terminated, each non-empty
 *    and at most TM_OAI_MAX_STOP_LEN bytes; every sampling field the body set
 *    is within the range the sampler accepts, and tm_oai_apply copies it;
 *  - whatever the text (raw input bytes included), the JSON string, the
 *    response, the stream chunk and the error body the writer makes are
 *    valid JSON. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "serve/oai.h"
#include "serve/serve-impl.h"
#include "tandem.h"
#include "text/toolcall.h"

static void must_parse(const char *js, size_t skip)
{
    if (!js) return; /* out of memory */
    size_t n = strlen(js);
    if (n < skip) abort();
    cJSON *j = cJSON_ParseWithLength(js + skip, n - skip);
    if (!j || !cJSON_IsObject(j)) abort();
    cJSON_Delete(j);
}

static void check_messages(const char *js)
{
    cJSON *a = cJSON_Parse(js);
    if (!a || !cJSON_IsArray(a) || !a->child) abort();
    for (const cJSON *m = a->child; m; m = m->next) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsString(role) || !cJSON_IsString(content)) abort();
        if (strcmp(role->valuestring, "system") && strcmp(role->valuestring, "user") &&
            strcmp(role->valuestring, "assistant") && strcmp(role->valuestring, "tool"))
            abort();
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        if (calls && (strcmp(role->valuestring, "assistant") || !cJSON_IsArray(calls) || !calls->child)) abort();
        for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next) {
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
            if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(fn, "name")) ||
                !cJSON_GetObjectItemCaseSensitive(fn, "arguments"))
                abort();
        }
    }
    cJSON_Delete(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    tm_oai_kind kind = (data[0] & 1) ? TM_OAI_CHAT : TM_OAI_COMPLETION;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    /* raw bytes (NUL, invalid UTF-8, controls) through the string writer */
    char *buf = NULL;
    size_t n = 0, cap = 0;
    if (tm_oai_json_string(&buf, &n, &cap, body, len) == 0) {
        if (n != strlen(buf)) abort(); /* no raw NUL in the output */
        cJSON *s = cJSON_ParseWithLength(buf, n);
        if (!cJSON_IsString(s)) abort();
        cJSON_Delete(s);
    }
    free(buf);

    if ((data[0] & 7) == 6) { /* /v1/embeddings: the parser, then the writer over floats of the body's bytes */
        tm_embed_req er;
        tm_oai_error e;
        if (tm_embed_parse(&er, body, len, 1000, 16, &e) != 0) {
            if (!(e.http == 400 || e.http == 500) || !e.msg[0] || er.n || er.text || er.ids || er.model) abort();
            return 0;
        }
        if (er.n < 1 || er.n > TM_EMBED_MAX_INPUTS || er.dimensions < 0 || er.dimensions > 16 || er.pooling < 0 ||
            er.pooling > TANDEM_POOL_CLS)
            abort();
        for (int i = 0; i < er.n; i++) {
            if (!er.text[i] == !er.ids[i] || (er.text[i] && !er.text[i][0]) || (er.ids[i] && !er.n_ids[i])) abort();
            for (size_t k = 0; er.ids[i] && k < er.n_ids[i]; k++)
                if (er.ids[i][k] < 0 || er.ids[i][k] >= 1000) abort();
        }
        int nv = er.n < 4 ? er.n : 4, dim = er.dimensions ? er.dimensions : 16;
        float v[4 * 16] = {0};
        memcpy(v, body, len < sizeof v ? len : sizeof v); /* any bits: NaN and inf included */
        char *js = tm_embed_response_json(er.model, v, nv, dim, er.base64, (int)len);
        must_parse(js, 0);
        free(js);
        tm_embed_req_free(&er);
        return 0;
    }
    tm_oai_req r;
    tm_oai_error e;
    static char *fbody; /* the last input's translated body (reachable, freed by the next input) */
    free(fbody);
    fbody = NULL;
    const tm_api_fmt *fmt = (data[0] & 3) == 3     ? &tm_api_anthropic
                            : (data[0] & 15) == 13 ? &tm_api_responses
                            : (data[0] & 15) == 10 ? &tm_api_infill
                                                   : NULL;
    /* /infill's: the demo model (where the fuzzer runs from the repository), three of its single tokens
       standing in for FIM tokens, so that the prompt is built and cut for real */
    static tandem_model *demo;
    static int tried;
    static const char *const fim[3] = {"<|begin_of_text|>", "<|end_of_text|>", "\n"};
    if (fmt == &tm_api_infill && !tried) {
        tandem_status st;
        tried = 1;
        if (tandem_model_open(&demo, "models/tiny-classics-llama", &st) != 0) demo = NULL;
    }
    tm_serve_tok tok = {demo, NULL, 2200};
    static tm_resp_store *store; /* the Responses API's: one conversation stored ("resp_0"), small bounds */
    if (!store && tm_resp_store_new(&store, 8, 1 << 16) == 0)
        tm_resp_store_put(store, "resp_0", strdup("[{\"role\":\"user\",\"content\":\"hi\"}]"), strdup("{}"));
    if (fmt) { /* another API: the body translated into a chat one, or refused */
        char *echo = NULL;
        tm_api_env env = {store, demo ? &tok : NULL, demo ? fim : NULL};
        kind = fmt->kind;
        if (fmt->request(body, len, (data[0] & 4) != 0, &env, &fbody, &echo, &e) != 0) {
            if (!(e.http == 400 || e.http == 500) || !e.msg[0] || fbody || echo) abort();
            return 0;
        }
        if (!fbody) abort();
        if (echo) must_parse(echo, 0);
        body = fbody, len = strlen(fbody);
        /* the writers over the translated body's bytes: reasoning, text and two calls cut from it, every
           finish, a stop sequence; each answer a JSON object, each event's data line one */
        size_t h = len / 2;
        char *nm = strndup(body, h < 40 ? h : 40), *args = strndup(body + h, len - h);
        tm_oai_tool_call calls[2] = {{"toolu_1", nm, args}, {"toolu_\"2", "f", "{\"a\":[1,{}]}"}};
        tm_oai_tool_calls tc = {calls, nm && args ? 2 : 0};
        static const char *const fins[] = {"stop", "length", "tool_calls"};
        tandem_stats sts = {.n_prompt = 9, .n_cached = 2, .n_generated = 4, .t_prefill = 0.01, .t_decode = (len & 16) ? 0.02 : 0};
        tm_api_reply ar = {body, h, body + h, len - h, &tc, fins[len % 3], (len & 4) ? body + h : NULL, (len & 2) ? &sts : NULL};
        tm_api_meta am = {fmt == &tm_api_anthropic ? "msg_1" : "resp_\"1", "m\"x", 7, echo};
        tm_oai_usage u = {3, 4, 1};
        tm_api_stream st;
        char *ev[6] = {fmt->json(&am, &ar, &u), fmt->stream_start(&st, &am, &u), NULL, NULL, NULL, NULL};
        /* the calls as a stream's pieces: the first named, then its arguments in two, then the second whole */
        size_t ah = args ? strlen(args) / 2 : 0;
        tm_oai_call_delta cd[3] = {{0, calls[0].id, nm, args, ah}, {0, NULL, NULL, args ? args + ah : "", args ? strlen(args) - ah : 0},
                                   {1, calls[1].id, calls[1].name, calls[1].arguments, strlen(calls[1].arguments)}};
        ev[2] = fmt->stream_part(&st, &am, body, h, body + h, len - h, NULL, 0);
        ev[3] = fmt->stream_part(&st, &am, "", 0, body, h, cd, tc.n ? 3 : 0);
        ev[4] = (len & 8) ? fmt->stream_error(&st, body) : fmt->stream_end(&st, &am, &ar, &u);
        fmt->stream_free(&st);
        if (fmt->keep && store) { /* kept where the echo asks, then read back and deleted: JSON */
            fmt->keep(store, &am, "[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[{\"function\":{\"arguments\":{}}}]}]",
                      &ar, &u);
            for (int del = 0; del < 2; del++) {
                int status = 0;
                char *js = NULL;
                if (tm_resp_lookup(store, del, am.id, &status, &js) == 0) {
                    if (!(status == 200 || status == 404)) abort();
                    must_parse(js, 0);
                }
                free(js);
            }
        }
        if (ev[0]) must_parse(ev[0], 0);
        for (int i = 1; i < 6; i++)
            for (const char *d = ev[i]; d && *d; d = strchr(d, '\n') ? strchr(d, '\n') + 1 : NULL) { /* each line */
                if (strncmp(d, "data: ", 6)) continue;
                const char *nl = strchr(d + 6, '\n');
                cJSON *o = cJSON_ParseWithLength(d + 6, nl ? (size_t)(nl - d - 6) : strlen(d + 6));
                if (!cJSON_IsObject(o)) abort();
                cJSON_Delete(o);
            }
        for (int i = 0; i < 6; i++) free(ev[i]);
        free(nm);
        free(args);
        free(echo);
    }
    int rc = tm_oai_parse(&r, kind, body, len, &e);
    if (rc != 0) {
        if (rc != -1 || !(e.http == 400 || e.http == 500) || !e.msg[0] || !e.type) abort();
        if (r.prompt || r.prompt_ids || r.messages_json || r.n_stop || r.model) abort();
        char *js = tm_oai_error_json(&e);
        must_parse(js, 0);
        free(js);
        return 0;
    }
    if (kind == TM_OAI_COMPLETION) {
        if (!!r.prompt == !!r.prompt_ids || r.messages_json) abort();
        for (size_t i = 0; i < r.n_prompt_ids; i++)
            if (r.prompt_ids[i] < 0) abort();
        if (r.prompt_ids && r.n_prompt_ids == 0) abort();
        /* a batch: 1..TM_OAI_MAX_PROMPTS prompts, each a text or ids, within the choices' bound */
        if (r.n_prompts < 1 || r.n_prompts > TM_OAI_MAX_PROMPTS || r.n_prompts * r.best_of > TM_OAI_MAX_CHOICES) abort();
        for (int p = 1; p < r.n_prompts; p++) {
            tm_oai_prompt q = tm_oai_prompt_at(&r, p);
            if (!!q.text == !!q.ids || (q.ids && q.n_ids == 0)) abort();
        }
    } else {
        if (r.prompt || r.prompt_ids || !r.messages_json) abort();
        check_messages(r.messages_json);
        if (r.template_kwargs_json) {
            cJSON *kw = cJSON_Parse(r.template_kwargs_json);
            if (!cJSON_IsObject(kw)) abort();
            cJSON_Delete(kw);
        }
    }
    /* tools: well-formed when kept, given to the template; a forced call has tools to call */
    tm_err te = {0};
    if (r.tools_json && (tm_tool_check(r.tools_json, &te) != TM_OK || !r.template_kwargs_json)) abort();
    if (r.tool_choice >= TM_OAI_TOOLS_REQUIRED && !r.tools_json) abort();
    if ((r.tool_choice == TM_OAI_TOOLS_NAMED) != !!r.tool_name) abort();
    if (r.n_stop < 0 || r.n_stop > TM_OAI_MAX_STOP || r.stop[r.n_stop]) abort();
    for (int i = 0; i < r.n_stop; i++)
        if (!r.stop[i] || !r.stop[i][0] || strlen(r.stop[i]) > TM_OAI_MAX_STOP_LEN) abort();
    /* completions may ask for nothing generated (max_tokens 0: the prompt scored with echo); echo is theirs */
    if ((r.set & TM_OAI_SET_MAX_TOKENS) && (r.max_tokens < (kind == TM_OAI_CHAT) || r.max_tokens > TM_OAI_MAX_TOKENS))
        abort();
    if (r.echo && kind == TM_OAI_CHAT) abort();
    if (r.suffix && (kind != TM_OAI_COMPLETION || !r.prompt || r.n_prompts > 1 || !r.suffix[0])) abort();
    if (r.prompt_logprobs < -1 || r.prompt_logprobs > TANDEM_MAX_LOGPROBS || (r.prompt_logprobs >= 0 && r.stream)) abort();
    if ((r.set & TM_OAI_SET_TEMPERATURE) && !(r.temperature >= 0 && isfinite(r.temperature))) abort();
    if ((r.set & TM_OAI_SET_TOP_P) && !(r.top_p > 0 && r.top_p <= 1)) abort();
    if ((r.set & TM_OAI_SET_MIN_P) && !(r.min_p >= 0 && r.min_p <= 1)) abort();
    if ((r.set & TM_OAI_SET_TOP_K) && r.top_k < 0) abort();
    if ((r.set & TM_OAI_SET_PRESENCE) && !(r.presence_penalty >= -2 && r.presence_penalty <= 2)) abort();
    if ((r.set & TM_OAI_SET_FREQUENCY) && !(r.frequency_penalty >= -2 && r.frequency_penalty <= 2)) abort();
    if ((r.set & TM_OAI_SET_REPETITION) && !(r.repetition_penalty > 0 && isfinite(r.repetition_penalty))) abort();
    tandem_request q;
    tandem_request_default(&q);
    tm_oai_apply(&r, &q);
    if ((r.set & TM_OAI_SET_TEMPERATURE) && q.temperature != r.temperature) abort();
    if ((r.set & TM_OAI_SET_MAX_TOKENS) && q.max_tokens != (r.max_tokens ? r.max_tokens : TANDEM_MAX_TOKENS_NONE)) abort();
    if (r.prompt && q.prompt != r.prompt) abort();
    if (r.n_stop && (!q.stop || strcmp(q.stop[r.n_stop - 1], r.stop[r.n_stop - 1]))) abort();
    if (r.top_logprobs < 0 || r.top_logprobs > TANDEM_MAX_LOGPROBS || (!r.want_logprobs && r.top_logprobs > 0))
        abort();
    if (q.logprobs != (r.want_logprobs ? r.top_logprobs : -1)) abort();

    /* the writer on whatever text the body held (the prompt, or the messages) */
    const char *text = r.prompt ? r.prompt : r.messages_json ? r.messages_json : "";
    size_t tl = strlen(text);
    tm_oai_meta m = {kind, "id-\"x", r.model, 1, (int)(tl % 8)};
    /* logprobs over the same bytes cut into tokens of 1-4 bytes (characters split among them), the
     * alternatives the request asked for (or 3), a -inf among the values */
    static tm_oai_logprob lv[64];
    size_t nl = 0;
    for (size_t o = 0; o < tl && nl < 64; nl++) {
        size_t k = 1 + (o * 7 + nl) % 4;
        if (k > tl - o) k = tl - o;
        /* an echoed prompt's first token has no value (NaN: null) */
        float v = nl == 0 && r.echo ? NAN : nl % 5 == 3 ? -INFINITY : -(float)nl / 3;
        lv[nl].tok = (tm_oai_lp_tok){text + o, k, v};
        lv[nl].n_top = isnan(v) ? 0 : r.want_logprobs ? r.top_logprobs : 3;
        for (int t = 0; t < lv[nl].n_top; t++) lv[nl].top[t] = (tm_oai_lp_tok){text + (o + (size_t)t) % tl, 1, -(float)t};
        o += k;
    }
    tm_oai_logprobs lp = {lv, nl, 5};
    /* vLLM's prompt_logprobs over the same tokens (ids and ranks made up; the first null) */
    static tandem_logprob ids[64];
    for (size_t i = 0; i < nl; i++) {
        ids[i] = (tandem_logprob){.token = (int32_t)i, .rank = (int32_t)i + 1};
        for (int t = 0; t < lv[i].n_top; t++) ids[i].top_token[t] = (int32_t)(i + (size_t)t) % 5;
    }
    if (nl) lv[0].tok.logprob = NAN, lv[0].n_top = 0; /* as an echoed prompt's first */
    tm_oai_plps pl = {lv, ids, nl};
    tm_oai_choice ch[2] = {{text, tl, NULL, nl ? &lp : NULL, "stop", nl ? &pl : NULL}, {text, tl / 2, NULL, NULL, "length", NULL}};
    char *js = tm_oai_response_json(&m, ch, 1 + (int)(tl & 1), &(tm_oai_usage){1, 2, 0});
    must_parse(js, 0);
    free(js);
    js = tm_oai_chunk_sse(&m, text, tl, 0, NULL, nl ? &lp : NULL, NULL);
    if (js) js[strlen(js) - 2] = '\0';
    must_parse(js, 6);
    free(js);
    js = tm_oai_chunk_sse(&m, text, tl, 1, NULL, NULL, NULL);
    if (js && (strncmp(js, "data: ", 6) || strlen(js) < 8 || strcmp(js + strlen(js) - 2, "\n\n"))) abort();
    if (js) js[strlen(js) - 2] = '\0';
    must_parse(js, 6);
    free(js);
    /* tool calls whose name and arguments are the fuzzed text: still valid JSON */
    char *z = malloc(tl + 1);
    if (z) {
        memcpy(z, text, tl);
        z[tl] = '\0';
        tm_oai_tool_call tv[2] = {{"call_1", z, z}, {NULL, "f", "{}"}};
        tm_oai_tool_calls tc = {tv, 2};
        /* (a stream's pieces: the first call named, then more of its arguments, the second with no id) */
        tm_oai_call_delta cd[3] = {{0, "call_1", z, z, tl / 2}, {0, NULL, NULL, z + tl / 2, tl - tl / 2}, {1, NULL, "f", "{}", 2}};
        tm_oai_extra x = {text + tl / 2, tl - tl / 2, &tc, cd, 3}; /* and the rest of the text as reasoning */
        tm_oai_choice cc = {text, tl / 2, &x, NULL, "tool_calls", NULL};
        js = tm_oai_response_json(&m, &cc, 1, &(tm_oai_usage){1, 2, 0});
        must_parse(js, 0);
        free(js);
        js = tm_oai_chunk_sse(&m, "", 0, 0, &x, NULL, NULL);
        if (js) js[strlen(js) - 2] = '\0';
        must_parse(js, 6);
        free(js);
        x.tc = NULL, x.n_cd = 0;
        js = tm_oai_chunk_sse(&m, "", 0, 0, &x, NULL, NULL);
        if (js) js[strlen(js) - 2] = '\0';
        must_parse(js, 6);
        free(js);
        free(z);
    }
    tm_oai_req_free(&r);
    return 0;
}
