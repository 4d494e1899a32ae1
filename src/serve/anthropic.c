/* serve/anthropic.c: Anthropic's Messages API (POST /v1/messages) over the chat machinery. A request
 * is translated into an OpenAI chat request (tm_oai_parse then checks it as any chat request), and
 * the reply is written in Anthropic's shapes: a "message" object, or the stream's events.
 *
 * Translation, Anthropic -> OpenAI:
 *   system (string | text blocks)           -> a system message
 *   user: text blocks                        -> a user message (after the tool results)
 *   user: tool_result {tool_use_id, content} -> a tool message each {tool_call_id, content}
 *   assistant: text blocks                   -> its content
 *   assistant: tool_use {id, name, input}    -> its tool_calls [{id, function {name, arguments: input}}]
 *   assistant: thinking {thinking}           -> its reasoning_content (redacted_thinking dropped)
 *   tools [{name, description, input_schema}]-> [{type function, function {name, description, parameters}}]
 *   tool_choice auto | any | tool {name} | none, disable_parallel_tool_use
 *                                            -> auto | required | {function {name}} | none, parallel_tool_calls
 *   thinking {type enabled | disabled}       -> chat_template_kwargs.enable_thinking (its budget not kept)
 *   stop_sequences, max_tokens, temperature, top_p, top_k, stream, model: as they are
 * Images, documents and Anthropic's server tools (web search, code execution, ...) are refused by
 * field (400).
 *
 * POST /v1/messages/count_tokens: the same request (max_tokens not needed) rendered and tokenized as
 * the reply's prompt would be: {"input_tokens"}.
 *
 * Reply: content blocks in order: thinking (the reasoning the reply reader split off), text, one
 * tool_use per call. Streamed, each block opens when its first piece comes (content_block_start),
 * takes its deltas (thinking_delta, text_delta; a tool_use's input in one input_json_delta) and
 * closes before the next opens (content_block_stop); blocks are numbered from 0 in that order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "serve/serve-impl.h"

static int bad(tm_oai_error *e, const char *param, const char *fmt, const char *arg)
{
    tm_oai_error_set(e, 400, "invalid_request_error", NULL, param, fmt, arg);
    return -1;
}

static int is_type(const cJSON *b, const char *type)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(b, "type");
    return cJSON_IsString(t) && !strcmp(t->valuestring, type);
}

/* {"type": "text", "text"} appended to parts (an OpenAI content parts array) */
static int add_text_part(cJSON *parts, const cJSON *b, const char *param, tm_oai_error *e)
{
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(b, "text");
    if (!cJSON_IsString(text)) return bad(e, param, "'%s': a text block needs a string \"text\"", param);
    cJSON *p = cJSON_CreateObject();
    if (!p || !cJSON_AddItemToArray(parts, p) || !cJSON_AddStringToObject(p, "type", "text") ||
        !cJSON_AddStringToObject(p, "text", text->valuestring))
        return -2;
    return 0;
}

/* a content that may only hold text (a string, or text blocks) as o's "content" */
static int text_content(const cJSON *c, const char *param, cJSON *o, tm_oai_error *e)
{
    if (!c || cJSON_IsNull(c)) return cJSON_AddStringToObject(o, "content", "") ? 0 : -2;
    if (cJSON_IsString(c)) return cJSON_AddStringToObject(o, "content", c->valuestring) ? 0 : -2;
    if (!cJSON_IsArray(c)) return bad(e, param, "'%s' must be a string or an array of content blocks", param);
    cJSON *parts = cJSON_AddArrayToObject(o, "content");
    if (!parts) return -2;
    int k = 0, rc = 0;
    for (const cJSON *b = c->child; b && rc == 0; b = b->next, k++) {
        char pp[64];
        snprintf(pp, sizeof pp, "%s[%d]", param, k);
        rc = is_type(b, "text") ? add_text_part(parts, b, pp, e)
                                : bad(e, pp, "'%s': only text blocks are supported here (not images or documents)", pp);
    }
    return rc;
}

/* a new message {"role"} appended to msgs, or NULL */
static cJSON *new_message(cJSON *msgs, const char *role)
{
    cJSON *m = cJSON_CreateObject();
    if (!m) return NULL;
    if (!cJSON_AddItemToArray(msgs, m)) {
        cJSON_Delete(m);
        return NULL;
    }
    return cJSON_AddStringToObject(m, "role", role) ? m : NULL;
}

/* a user message's blocks: each tool_result as a tool message, then the text blocks as one user message */
static int user_message(const cJSON *c, const char *param, cJSON *msgs, tm_oai_error *e)
{
    if (!cJSON_IsArray(c)) {
        cJSON *m = new_message(msgs, "user");
        return m ? text_content(c, param, m, e) : -2;
    }
    cJSON *parts = cJSON_CreateArray();
    if (!parts) return -2;
    int k = 0, rc = 0;
    for (const cJSON *b = c->child; b && rc == 0; b = b->next, k++) {
        char pp[64];
        snprintf(pp, sizeof pp, "%s[%d]", param, k);
        if (is_type(b, "text")) {
            rc = add_text_part(parts, b, pp, e);
        } else if (is_type(b, "tool_result")) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "tool_use_id");
            char cp[80];
            snprintf(cp, sizeof cp, "%s.content", pp);
            cJSON *m = NULL;
            if (!cJSON_IsString(id)) rc = bad(e, pp, "'%s': a tool_result block needs a string \"tool_use_id\"", pp);
            else if (!(m = new_message(msgs, "tool")) || !cJSON_AddStringToObject(m, "tool_call_id", id->valuestring)) rc = -2;
            else rc = text_content(cJSON_GetObjectItemCaseSensitive(b, "content"), cp, m, e);
        } else {
            rc = bad(e, pp, "'%s': a user message's blocks may be text or tool_result (not images or documents)", pp);
        }
    }
    if (rc == 0 && parts->child) { /* the text after the results (Anthropic puts the results first) */
        cJSON *m = new_message(msgs, "user");
        if (!m || !cJSON_AddItemToObject(m, "content", parts)) rc = -2;
        else parts = NULL;
    }
    cJSON_Delete(parts);
    return rc;
}

/* an assistant message's blocks: text as its content, tool_use as its tool_calls, thinking as its
 * reasoning_content (redacted thinking dropped: nothing can read it) */
static int assistant_message(const cJSON *c, const char *param, cJSON *msgs, tm_oai_error *e)
{
    cJSON *m = new_message(msgs, "assistant");
    if (!m) return -2;
    if (!cJSON_IsArray(c)) return text_content(c, param, m, e);
    cJSON *parts = cJSON_AddArrayToObject(m, "content"), *calls = NULL;
    char *thought = NULL;
    size_t tlen = 0;
    int k = 0, rc = parts ? 0 : -2;
    for (const cJSON *b = c ? c->child : NULL; b && rc == 0; b = b->next, k++) {
        char pp[64];
        snprintf(pp, sizeof pp, "%s[%d]", param, k);
        if (is_type(b, "text")) {
            rc = add_text_part(parts, b, pp, e);
        } else if (is_type(b, "tool_use")) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "id"), *name = cJSON_GetObjectItemCaseSensitive(b, "name");
            const cJSON *input = cJSON_GetObjectItemCaseSensitive(b, "input");
            cJSON *call = NULL, *fn = NULL;
            if (!cJSON_IsString(id) || !cJSON_IsString(name) || (input && !cJSON_IsObject(input)))
                rc = bad(e, pp, "'%s': a tool_use block needs a string \"id\" and \"name\" and an object \"input\"", pp);
            else if ((!calls && !(calls = cJSON_AddArrayToObject(m, "tool_calls"))) || !(call = cJSON_CreateObject()) ||
                     !cJSON_AddItemToArray(calls, call) || !cJSON_AddStringToObject(call, "id", id->valuestring) ||
                     !cJSON_AddStringToObject(call, "type", "function") || !(fn = cJSON_AddObjectToObject(call, "function")) ||
                     !cJSON_AddStringToObject(fn, "name", name->valuestring) ||
                     !cJSON_AddItemToObject(fn, "arguments", input ? cJSON_Duplicate(input, 1) : cJSON_CreateObject()))
                rc = -2;
        } else if (is_type(b, "thinking")) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(b, "thinking");
            size_t n = cJSON_IsString(t) ? strlen(t->valuestring) : 0;
            char *r = n ? realloc(thought, tlen + n + 1) : thought;
            if (!cJSON_IsString(t)) rc = bad(e, pp, "'%s': a thinking block needs a string \"thinking\"", pp);
            else if (!r && n) rc = -2;
            else if (n) memcpy(r + tlen, t->valuestring, n + 1), thought = r, tlen += n;
        } else if (!is_type(b, "redacted_thinking")) {
            rc = bad(e, pp, "'%s': an assistant message's blocks may be text, tool_use or thinking", pp);
        }
    }
    if (rc == 0 && thought && !cJSON_AddStringToObject(m, "reasoning_content", thought)) rc = -2;
    free(thought);
    return rc;
}

/* tools: Anthropic's custom tools as OpenAI's functions */
static int tools_of(const cJSON *tools, cJSON *out, tm_oai_error *e)
{
    if (!cJSON_IsArray(tools)) return bad(e, "tools", "%s", "'tools' must be an array");
    cJSON *arr = cJSON_AddArrayToObject(out, "tools");
    if (!arr) return -2;
    int k = 0;
    for (const cJSON *t = tools->child; t; t = t->next, k++) {
        char pp[32];
        snprintf(pp, sizeof pp, "tools[%d]", k);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type"), *name = cJSON_GetObjectItemCaseSensitive(t, "name");
        const cJSON *desc = cJSON_GetObjectItemCaseSensitive(t, "description");
        const cJSON *schema = cJSON_GetObjectItemCaseSensitive(t, "input_schema");
        if (type && !cJSON_IsNull(type) && !is_type(t, "custom"))
            return bad(e, pp, "'%s': only custom tools ({\"name\", \"description\", \"input_schema\"}) are supported, not "
                       "Anthropic's server tools", pp);
        if (!cJSON_IsObject(t) || !cJSON_IsString(name) || !cJSON_IsObject(schema) || (desc && !cJSON_IsString(desc)))
            return bad(e, pp, "'%s' must be {\"name\": string, \"description\"?: string, \"input_schema\": object}", pp);
        cJSON *f = cJSON_CreateObject(), *fn;
        if (!f || !cJSON_AddItemToArray(arr, f)) {
            cJSON_Delete(f);
            return -2;
        }
        if (!cJSON_AddStringToObject(f, "type", "function") || !(fn = cJSON_AddObjectToObject(f, "function")) ||
            !cJSON_AddStringToObject(fn, "name", name->valuestring) ||
            (desc && !cJSON_AddStringToObject(fn, "description", desc->valuestring)) ||
            !cJSON_AddItemToObject(fn, "parameters", cJSON_Duplicate(schema, 1)))
            return -2;
    }
    return 0;
}

/* tool_choice {"type": "auto" | "any" | "tool" (+ "name") | "none", "disable_parallel_tool_use"?} */
static int choice_of(const cJSON *c, cJSON *out, tm_oai_error *e)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "name");
    const cJSON *dp = cJSON_GetObjectItemCaseSensitive(c, "disable_parallel_tool_use");
    const char *const msg = "'tool_choice' must be {\"type\": \"auto\" | \"any\" | \"none\"} or {\"type\": \"tool\", "
                            "\"name\"}";
    if (!cJSON_IsObject(c) || (dp && !cJSON_IsBool(dp))) return bad(e, "tool_choice", "%s", msg);
    if (cJSON_IsTrue(dp) && !cJSON_AddFalseToObject(out, "parallel_tool_calls")) return -2;
    static const char *const simple[][2] = {{"auto", "auto"}, {"any", "required"}, {"none", "none"}};
    for (size_t i = 0; i < sizeof simple / sizeof simple[0]; i++)
        if (is_type(c, simple[i][0])) return cJSON_AddStringToObject(out, "tool_choice", simple[i][1]) ? 0 : -2;
    if (!is_type(c, "tool") || !cJSON_IsString(name)) return bad(e, "tool_choice", "%s", msg);
    cJSON *o = cJSON_AddObjectToObject(out, "tool_choice"), *fn;
    return o && cJSON_AddStringToObject(o, "type", "function") && (fn = cJSON_AddObjectToObject(o, "function")) &&
                   cJSON_AddStringToObject(fn, "name", name->valuestring)
               ? 0
               : -2;
}

/* thinking {"type": "enabled" | "disabled", "budget_tokens"?}: the templates' enable_thinking */
static int thinking_of(const cJSON *t, cJSON *out, tm_oai_error *e)
{
    int on = is_type(t, "enabled");
    if (!on && !is_type(t, "disabled"))
        return bad(e, "thinking", "%s", "'thinking' must be {\"type\": \"enabled\" | \"disabled\"}");
    cJSON *kw = cJSON_AddObjectToObject(out, "chat_template_kwargs");
    return kw && cJSON_AddBoolToObject(kw, "enable_thinking", on) ? 0 : -2;
}

static int anth_request(const char *body, size_t len, int counting, const tm_api_env *env, char **chat_json, char **echo,
                        tm_oai_error *e)
{
    (void)env;
    *chat_json = *echo = NULL;
    cJSON *in = cJSON_ParseWithLength(body, len), *out = cJSON_CreateObject(), *msgs = NULL;
    int rc = 0;
    if (!in || !cJSON_IsObject(in)) rc = bad(e, NULL, "%s", "the request body must be a JSON object");
    else if (!out || !(msgs = cJSON_AddArrayToObject(out, "messages"))) rc = -2;
    const cJSON *mt = rc ? NULL : cJSON_GetObjectItemCaseSensitive(in, "max_tokens");
    if (rc == 0 && !mt && !counting) rc = bad(e, "max_tokens", "%s", "'max_tokens' is required");
    const cJSON *sys = rc ? NULL : cJSON_GetObjectItemCaseSensitive(in, "system");
    if (rc == 0 && sys) {
        cJSON *m = new_message(msgs, "system");
        rc = m ? text_content(sys, "system", m, e) : -2;
    }
    const cJSON *ms = rc ? NULL : cJSON_GetObjectItemCaseSensitive(in, "messages");
    if (rc == 0 && (!cJSON_IsArray(ms) || !ms->child)) rc = bad(e, "messages", "%s", "'messages' must be a non-empty array");
    int i = 0;
    for (const cJSON *x = ms ? ms->child : NULL; rc == 0 && x; x = x->next, i++) {
        char param[32];
        snprintf(param, sizeof param, "messages[%d]", i);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(x, "role"), *c = cJSON_GetObjectItemCaseSensitive(x, "content");
        if (cJSON_IsString(role) && !strcmp(role->valuestring, "user")) rc = user_message(c, param, msgs, e);
        else if (cJSON_IsString(role) && !strcmp(role->valuestring, "assistant")) rc = assistant_message(c, param, msgs, e);
        else rc = bad(e, param, "'%s.role' must be \"user\" or \"assistant\"", param);
    }
    const cJSON *f;
    if (rc == 0 && (f = cJSON_GetObjectItemCaseSensitive(in, "tools")) && !cJSON_IsNull(f)) rc = tools_of(f, out, e);
    if (rc == 0 && (f = cJSON_GetObjectItemCaseSensitive(in, "tool_choice")) && !cJSON_IsNull(f)) rc = choice_of(f, out, e);
    if (rc == 0 && (f = cJSON_GetObjectItemCaseSensitive(in, "thinking")) && !cJSON_IsNull(f)) rc = thinking_of(f, out, e);
    /* the sampling fields, as the chat parser will check them */
    static const char *const same[][2] = {{"max_tokens", "max_tokens"}, {"temperature", "temperature"},
                                          {"top_p", "top_p"},           {"top_k", "top_k"},
                                          {"stream", "stream"},         {"stop_sequences", "stop"},
                                          {"model", "model"}};
    for (size_t k = 0; rc == 0 && k < sizeof same / sizeof same[0]; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(in, same[k][0]);
        if (v && !cJSON_AddItemToObject(out, same[k][1], cJSON_Duplicate(v, 1))) rc = -2;
    }
    if (rc == 0 && !(*chat_json = cJSON_PrintUnformatted(out))) rc = -2;
    if (rc == -2) tm_oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    cJSON_Delete(in);
    cJSON_Delete(out);
    return rc ? -1 : 0;
}

/* ---- the reply ---- */

/* Anthropic's stop_reason of a choice's finish ("tool_calls" where it made calls) */
static const char *stop_reason(const tm_api_reply *r)
{
    if (r->finish && !strcmp(r->finish, "length")) return "max_tokens";
    if (r->finish && !strcmp(r->finish, "tool_calls")) return "tool_use";
    return r->stop_seq ? "stop_sequence" : "end_turn";
}

/* a thinking or text block holding s [n]; signature "" (nothing here signs thoughts) */
static cJSON *text_block(int thinking, const char *s, size_t n)
{
    cJSON *b = tm_api_typed(thinking ? "thinking" : "text");
    if (b && tm_api_add_strn(b, thinking ? "thinking" : "text", s, n) && (!thinking || cJSON_AddStringToObject(b, "signature", "")))
        return b;
    cJSON_Delete(b);
    return NULL;
}

/* {"type": "tool_use", "id", "name", "input"}; input {} where not whole (a stream sends it as deltas) */
static cJSON *tool_block(const tm_oai_tool_call *c, int whole)
{
    cJSON *b = tm_api_typed("tool_use"), *in = whole ? cJSON_Parse(c->arguments) : cJSON_CreateObject();
    if (in && !cJSON_IsObject(in)) { /* the reply reader gives objects; a guard all the same */
        cJSON_Delete(in);
        in = cJSON_CreateObject();
    }
    if (b && cJSON_AddStringToObject(b, "id", c->id) && cJSON_AddStringToObject(b, "name", c->name) && tm_api_attach(b, "input", in))
        return b;
    cJSON_Delete(b);
    return NULL;
}

/* the stop fields and usage, into o ("stop_reason" null while running) */
static int add_end(cJSON *o, const tm_api_reply *r, int in_tok, int out_tok)
{
    cJSON *u;
    return (r ? cJSON_AddStringToObject(o, "stop_reason", stop_reason(r)) != NULL
              : cJSON_AddNullToObject(o, "stop_reason") != NULL) &&
           (r && r->stop_seq ? cJSON_AddStringToObject(o, "stop_sequence", r->stop_seq) != NULL
                             : cJSON_AddNullToObject(o, "stop_sequence") != NULL) &&
           (u = cJSON_AddObjectToObject(o, "usage")) && (in_tok < 0 || cJSON_AddNumberToObject(u, "input_tokens", in_tok)) &&
           cJSON_AddNumberToObject(u, "output_tokens", out_tok);
}

/* {"id","type":"message","role":"assistant","model","content":[...],"stop_reason","stop_sequence","usage"};
 * content [] and stop_reason null for a stream's start (r NULL) */
static cJSON *message(const tm_api_meta *mt, const tm_api_reply *r, int in_tok, int out_tok)
{
    cJSON *m = cJSON_CreateObject(), *content = NULL;
    int ok = m && cJSON_AddStringToObject(m, "id", mt->id) && cJSON_AddStringToObject(m, "type", "message") &&
             cJSON_AddStringToObject(m, "role", "assistant") && cJSON_AddStringToObject(m, "model", mt->model) &&
             (content = cJSON_AddArrayToObject(m, "content"));
    if (ok && r && r->reasoning_len) ok = cJSON_AddItemToArray(content, text_block(1, r->reasoning, r->reasoning_len));
    if (ok && r && r->len) ok = cJSON_AddItemToArray(content, text_block(0, r->text, r->len));
    for (int i = 0; ok && r && r->tc && i < r->tc->n; i++) ok = cJSON_AddItemToArray(content, tool_block(&r->tc->v[i], 1));
    ok = ok && add_end(m, r, in_tok, out_tok);
    if (!ok) {
        cJSON_Delete(m);
        return NULL;
    }
    return m;
}

static char *anth_json(const tm_api_meta *m, const tm_api_reply *r, const tm_oai_usage *u)
{
    return tm_api_print_del(message(m, r, u->prompt, u->completion));
}

/* ---- the stream's events ---- */

/* {"type": type, "index": i} */
static cJSON *indexed(const char *type, int i)
{
    cJSON *o = tm_api_typed(type);
    if (o && cJSON_AddNumberToObject(o, "index", i)) return o;
    cJSON_Delete(o);
    return NULL;
}

/* content_block_start of block (taken) as the stream's next, opened as kind */
static cJSON *block_start(tm_api_stream *s, cJSON *block, int kind)
{
    cJSON *ev = indexed("content_block_start", s->next);
    s->open = kind;
    s->next++;
    return tm_api_attach(ev, "content_block", block) ? ev : (cJSON_Delete(ev), NULL);
}

/* content_block_delta {"type": type, key: s [n]} of the open block */
static cJSON *block_delta(const tm_api_stream *s, const char *type, const char *key, const char *v, size_t n)
{
    cJSON *ev = indexed("content_block_delta", s->next - 1), *d = tm_api_typed(type);
    int ok = d && tm_api_add_strn(d, key, v, n);
    return tm_api_attach(ev, "delta", ok ? d : (cJSON_Delete(d), NULL)) ? ev : (cJSON_Delete(ev), NULL);
}

enum { OPEN_NONE, OPEN_THINKING, OPEN_TEXT, OPEN_TOOL };

static char *anth_stream_start(tm_api_stream *s, const tm_api_meta *m, const tm_oai_usage *u)
{
    *s = (tm_api_stream){0};
    cJSON *ev = tm_api_typed("message_start");
    return tm_api_events(1, (cJSON *[]){tm_api_attach(ev, "message", message(m, NULL, u->prompt, 0)) ? ev : NULL});
}

/* the events that close the open block (0 or 1 of them) into objs */
static int close_open(tm_api_stream *s, cJSON **objs)
{
    if (s->open == OPEN_NONE) return 0;
    s->open = OPEN_NONE;
    objs[0] = indexed("content_block_stop", s->next - 1);
    return 1;
}

static char *anth_stream_part(tm_api_stream *s, const tm_api_meta *m, const char *reasoning, size_t rlen,
                              const char *text, size_t len, const tm_oai_call_delta *cd, int ncd)
{
    (void)m;
    cJSON **objs = calloc((size_t)(6 + 3 * ncd), sizeof *objs);
    int n = 0;
    if (!objs) return NULL;
    for (int kind = OPEN_THINKING; kind <= OPEN_TEXT; kind++) {
        const char *v = kind == OPEN_THINKING ? reasoning : text;
        size_t vn = kind == OPEN_THINKING ? rlen : len;
        if (!vn) continue;
        if (s->open != kind) {
            n += close_open(s, objs + n);
            objs[n++] = block_start(s, text_block(kind == OPEN_THINKING, "", 0), kind);
        }
        objs[n++] = kind == OPEN_THINKING ? block_delta(s, "thinking_delta", "thinking", v, vn)
                                          : block_delta(s, "text_delta", "text", v, vn);
    }
    for (int i = 0; i < ncd; i++) { /* a call's first piece opens its tool_use block; each adds input */
        if (cd[i].name) {
            n += close_open(s, objs + n);
            objs[n++] = block_start(s, tool_block(&(tm_oai_tool_call){cd[i].id, cd[i].name, "{}"}, 0), OPEN_TOOL);
        }
        if (cd[i].args_len) objs[n++] = block_delta(s, "input_json_delta", "partial_json", cd[i].args, cd[i].args_len);
    }
    char *out = n ? tm_api_events(n, objs) : strdup("");
    free(objs);
    return out;
}

static char *anth_stream_end(tm_api_stream *s, const tm_api_meta *m, const tm_api_reply *r, const tm_oai_usage *u)
{
    (void)m;
    int out_tok = u->completion, n = 0;
    cJSON *objs[3];
    n += close_open(s, objs); /* (the calls went out as pieces, stream_part) */
    cJSON *md = tm_api_typed("message_delta"), *d = cJSON_CreateObject();
    int ok = d && add_end(d, r, -1, out_tok);
    /* add_end put usage inside the delta: Anthropic has it beside it */
    cJSON *use = ok ? cJSON_DetachItemFromObjectCaseSensitive(d, "usage") : NULL;
    ok = tm_api_attach(md, "delta", ok ? d : (cJSON_Delete(d), NULL)) & tm_api_attach(md, "usage", use);
    objs[n++] = ok ? md : (cJSON_Delete(md), NULL);
    objs[n++] = tm_api_typed("message_stop");
    return tm_api_events(n, objs);
}

static char *anth_stream_error(tm_api_stream *s, const char *msg)
{
    (void)s;
    cJSON *ev = tm_api_typed("error"), *er = tm_api_typed("api_error");
    int ok = cJSON_AddStringToObject(er, "message", msg) != NULL;
    ok &= tm_api_attach(ev, "error", er);
    return tm_api_events(1, (cJSON *[]){ok ? ev : (cJSON_Delete(ev), NULL)});
}

static void anth_stream_free(tm_api_stream *s) { (void)s; }

const tm_api_fmt tm_api_anthropic = {"msg_", TM_OAI_CHAT, anth_request, anth_json, anth_stream_start,
                                     anth_stream_part, anth_stream_end, anth_stream_error, anth_stream_free, NULL};
