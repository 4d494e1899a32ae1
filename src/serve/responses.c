/* serve/responses.c: OpenAI's Responses API (POST /v1/responses, GET and DELETE /v1/responses/{id})
 * over the chat machinery (serve-impl.h: tm_api_fmt). A response is stored unless the request says
 * "store": false (serve/resp_store.c: in memory, bounded): previous_response_id continues the
 * conversation it ends (its messages first, then this request's input; its instructions are not
 * carried over, as OpenAI's are not). Item references are refused.
 *
 * Translation, Responses -> chat:
 *   instructions                                -> a system message, first
 *   input: a string                             -> a user message
 *   input items: message {role, content: a string | input_text / output_text / refusal parts}
 *                                               -> a message (developer as system)
 *                function_call {call_id, name, arguments}
 *                                               -> the assistant message's tool_calls (the one just
 *                                                  before, or a new one)
 *                function_call_output {call_id, output}  -> a tool message
 *                reasoning {content / summary texts}     -> the next assistant message's reasoning_content
 *                item_reference {id}     -> the output item of that id of a stored response (its id names
 *                                           the response), as if given; another's (input items, unknown): 400
 *   tools [{type function, name, description, parameters, strict}] -> chat tools
 *   tool_choice auto | none | required | {type function, name}, parallel_tool_calls -> the same
 *   text.format text | json_object | json_schema {name, schema, strict} -> response_format
 *   reasoning.effort                            -> chat_template_kwargs.reasoning_effort
 *   max_output_tokens, temperature, top_p, stream, model -> max_tokens, ...
 * Images, files, audio, built-in tools (web search, file search, ...): 400 naming the field.
 *
 * The answer: {"id": "resp_...", "object": "response", "status": "completed" | "incomplete", "output":
 * [reasoning item, message item (one output_text part), function_call items], "usage", and the
 * request's fields echoed}. Streamed: response.created, response.in_progress, then each item in turn
 * (output_item.added, content_part.added, its deltas, the .done events with the whole text, ...;
 * a call's arguments in one function_call_arguments.delta), then response.completed (or
 * response.incomplete) with the whole response; every event has its sequence_number. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/grow.h"
#include "serve/serve-impl.h"

#define BAD(param, ...) (tm_oai_error_set(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__), -1)

static int is_type(const cJSON *o, const char *type)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) && !strcmp(t->valuestring, type);
}

/* ---- the request ---- */

typedef struct conv {
    cJSON *msgs;      /* the chat messages so far */
    char *thought;    /* reasoning items' text waiting for the next assistant message */
    size_t tlen;
} conv;

/* a new message {"role"} appended, or NULL */
static cJSON *new_message(conv *cv, const char *role)
{
    cJSON *m = cJSON_CreateObject();
    if (!m || !cJSON_AddItemToArray(cv->msgs, m)) {
        cJSON_Delete(m);
        return NULL;
    }
    if (!cJSON_AddStringToObject(m, "role", role)) return NULL;
    if (!strcmp(role, "assistant") && cv->thought) { /* the reasoning items before it */
        if (!cJSON_AddStringToObject(m, "reasoning_content", cv->thought)) return NULL;
        free(cv->thought);
        cv->thought = NULL;
        cv->tlen = 0;
    }
    return m;
}

/* content: a string, or text parts (input_text, output_text, refusal) as chat text parts */
static int content_of(const cJSON *c, const char *param, cJSON *m, tm_oai_error *e)
{
    if (!c || cJSON_IsNull(c)) return cJSON_AddStringToObject(m, "content", "") ? 0 : -2;
    if (cJSON_IsString(c)) return cJSON_AddStringToObject(m, "content", c->valuestring) ? 0 : -2;
    if (!cJSON_IsArray(c)) return BAD(param, "'%s' must be a string or an array of content parts", param);
    cJSON *parts = cJSON_AddArrayToObject(m, "content");
    if (!parts) return -2;
    int k = 0;
    for (const cJSON *p = c->child; p; p = p->next, k++) {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(p, is_type(p, "refusal") ? "refusal" : "text");
        if (!is_type(p, "input_text") && !is_type(p, "output_text") && !is_type(p, "refusal"))
            return BAD(param, "'%s[%d]': only text parts are supported (input_text, output_text), not images, files "
                       "or audio", param, k);
        if (!cJSON_IsString(text)) return BAD(param, "'%s[%d]': a text part needs a string \"text\"", param, k);
        cJSON *q = cJSON_CreateObject();
        if (!q || !cJSON_AddItemToArray(parts, q) || !cJSON_AddStringToObject(q, "type", "text") ||
            !cJSON_AddStringToObject(q, "text", text->valuestring))
            return -2;
    }
    return 0;
}

/* the texts of a reasoning item (its content, else its summary) kept for the next assistant message */
static int reasoning_item(conv *cv, const cJSON *it)
{
    const cJSON *parts = cJSON_GetObjectItemCaseSensitive(it, "content");
    if (!cJSON_IsArray(parts) || !parts->child) parts = cJSON_GetObjectItemCaseSensitive(it, "summary");
    for (const cJSON *p = cJSON_IsArray(parts) ? parts->child : NULL; p; p = p->next) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "text");
        size_t n = cJSON_IsString(t) ? strlen(t->valuestring) : 0;
        if (!n) continue;
        char *r = realloc(cv->thought, cv->tlen + n + 1);
        if (!r) return -2;
        memcpy(r + cv->tlen, t->valuestring, n + 1);
        cv->thought = r, cv->tlen += n;
    }
    return 0;
}

/* a function_call item: a call of the assistant message just before (or of a new one) */
static int call_item(conv *cv, const cJSON *it, const char *param, tm_oai_error *e)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "call_id"), *name = cJSON_GetObjectItemCaseSensitive(it, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(it, "arguments");
    if (!cJSON_IsString(id) || !cJSON_IsString(name) || !cJSON_IsString(args))
        return BAD(param, "'%s': a function_call needs strings \"call_id\", \"name\" and \"arguments\"", param);
    cJSON *last = cJSON_GetArrayItem(cv->msgs, cJSON_GetArraySize(cv->msgs) - 1), *calls, *call, *fn;
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(last, "role");
    if (!last || cv->thought || !cJSON_IsString(role) || strcmp(role->valuestring, "assistant"))
        if (!(last = new_message(cv, "assistant")) || !cJSON_AddStringToObject(last, "content", "")) return -2;
    if (!(calls = cJSON_GetObjectItemCaseSensitive(last, "tool_calls")) && !(calls = cJSON_AddArrayToObject(last, "tool_calls")))
        return -2;
    return (call = cJSON_CreateObject()) && cJSON_AddItemToArray(calls, call) &&
                   cJSON_AddStringToObject(call, "id", id->valuestring) && cJSON_AddStringToObject(call, "type", "function") &&
                   (fn = cJSON_AddObjectToObject(call, "function")) && cJSON_AddStringToObject(fn, "name", name->valuestring) &&
                   cJSON_AddStringToObject(fn, "arguments", args->valuestring)
               ? 0
               : -2;
}

static int item_of(conv *cv, const cJSON *it, const char *param, tm_resp_store *store, int ref, tm_oai_error *e);

/* an item_reference: the output item of a stored response with that id (item ids name their response:
 * msg_, fc_ or rs_, its 16 hex digits, the item's index), taken as if it were given */
static int reference_of(conv *cv, const cJSON *it, const char *param, tm_resp_store *store, tm_oai_error *e)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
    if (!cJSON_IsString(id)) return BAD(param, "'%s': an item_reference needs a string \"id\"", param);
    const char *u = strchr(id->valuestring, '_');
    size_t n = u ? strlen(u + 1) : 0;
    char rid[TM_RESP_ID_MAX], *resp = NULL;
    int rc = u && n > 2 && n - 2 < sizeof rid - 6 ? 0 : -1;
    if (rc == 0) {
        snprintf(rid, sizeof rid, "resp_%.*s", (int)(n - 2), u + 1);
        rc = store ? tm_resp_store_get(store, rid, NULL, &resp) : -1;
    }
    if (rc == -2) return tm_oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory"), -1;
    cJSON *r = rc == 0 ? cJSON_Parse(resp) : NULL;
    free(resp);
    const cJSON *found = NULL;
    for (const cJSON *o = cJSON_GetObjectItemCaseSensitive(r, "output") ? cJSON_GetObjectItemCaseSensitive(r, "output")->child
                                                                          : NULL;
         o && !found; o = o->next) {
        const cJSON *oid = cJSON_GetObjectItemCaseSensitive(o, "id");
        if (cJSON_IsString(oid) && !strcmp(oid->valuestring, id->valuestring)) found = o;
    }
    rc = found ? item_of(cv, found, param, store, 1, e)
               : BAD(param, "'%s': item '%.64s' is not an output item of a stored response", param, id->valuestring);
    cJSON_Delete(r);
    return rc;
}

/* one input item (ref: it came from an item_reference, which may not name another) */
static int item_of(conv *cv, const cJSON *it, const char *param, tm_resp_store *store, int ref, tm_oai_error *e)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(it, "type"), *role = cJSON_GetObjectItemCaseSensitive(it, "role");
    if (!cJSON_IsObject(it)) return BAD(param, "'%s' must be an object", param);
    if (!type || is_type(it, "message")) {
        static const char *const roles[][2] = {
            {"user", "user"}, {"assistant", "assistant"}, {"system", "system"}, {"developer", "system"}};
        const char *r = NULL;
        for (int i = 0; i < 4 && cJSON_IsString(role); i++)
            if (!strcmp(role->valuestring, roles[i][0])) r = roles[i][1];
        cJSON *m = NULL;
        char cp[48];
        snprintf(cp, sizeof cp, "%s.content", param);
        if (!r) return BAD(param, "'%s.role' must be user, assistant, system or developer", param);
        return (m = new_message(cv, r)) ? content_of(cJSON_GetObjectItemCaseSensitive(it, "content"), cp, m, e) : -2;
    }
    if (is_type(it, "function_call")) return call_item(cv, it, param, e);
    if (is_type(it, "function_call_output")) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "call_id"), *out = cJSON_GetObjectItemCaseSensitive(it, "output");
        cJSON *m = NULL;
        char op[48];
        snprintf(op, sizeof op, "%s.output", param);
        if (!cJSON_IsString(id)) return BAD(param, "'%s': a function_call_output needs a string \"call_id\"", param);
        if (!(m = new_message(cv, "tool")) || !cJSON_AddStringToObject(m, "tool_call_id", id->valuestring)) return -2;
        return content_of(out, op, m, e);
    }
    if (is_type(it, "reasoning")) return reasoning_item(cv, it);
    if (is_type(it, "item_reference") && !ref) return reference_of(cv, it, param, store, e);
    return BAD(param, "'%s': items may be message, function_call, function_call_output, reasoning or item_reference "
               "(not built-in tools' calls)", param);
}

static int input_of(conv *cv, const cJSON *in, tm_resp_store *store, tm_oai_error *e)
{
    if (cJSON_IsString(in)) {
        cJSON *m = new_message(cv, "user");
        return m && cJSON_AddStringToObject(m, "content", in->valuestring) ? 0 : -2;
    }
    if (!cJSON_IsArray(in) || !in->child) return BAD("input", "'input' must be a string or a non-empty array of items");
    int k = 0, rc = 0;
    for (const cJSON *it = in->child; it && rc == 0; it = it->next, k++) {
        char param[32];
        snprintf(param, sizeof param, "input[%d]", k);
        rc = item_of(cv, it, param, store, 0, e);
    }
    return rc;
}

/* tools: function tools as chat tools */
static int tools_of(const cJSON *tools, cJSON *out, tm_oai_error *e)
{
    if (!cJSON_IsArray(tools)) return BAD("tools", "'tools' must be an array");
    cJSON *arr = cJSON_AddArrayToObject(out, "tools");
    if (!arr) return -2;
    int k = 0;
    for (const cJSON *t = tools->child; t; t = t->next, k++) {
        char pp[32];
        snprintf(pp, sizeof pp, "tools[%d]", k);
        if (!is_type(t, "function"))
            return BAD(pp, "'%s': only function tools are supported, not built-in ones (web search, file search, ...)", pp);
        cJSON *f = cJSON_CreateObject(), *fn = cJSON_CreateObject();
        if (!f || !cJSON_AddItemToArray(arr, f) || !cJSON_AddStringToObject(f, "type", "function") ||
            !cJSON_AddItemToObject(f, "function", fn)) {
            cJSON_Delete(fn);
            return -2;
        }
        static const char *const keys[] = {"name", "description", "parameters", "strict"};
        for (int i = 0; i < 4; i++) { /* tm_oai_parse checks them as any chat tool's */
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(t, keys[i]);
            if (v && !cJSON_IsNull(v) && !cJSON_AddItemToObject(fn, keys[i], cJSON_Duplicate(v, 1))) return -2;
        }
    }
    return 0;
}

/* text.format: the chat's response_format */
static int format_of(const cJSON *text, cJSON *out, tm_oai_error *e)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(text, "format");
    if (!f || cJSON_IsNull(f) || is_type(f, "text")) return 0;
    cJSON *rf = cJSON_AddObjectToObject(out, "response_format"), *js;
    if (!rf) return -2;
    if (is_type(f, "json_object")) return cJSON_AddStringToObject(rf, "type", "json_object") ? 0 : -2;
    if (!is_type(f, "json_schema")) return BAD("text.format", "'text.format' must be text, json_object or json_schema");
    if (!cJSON_AddStringToObject(rf, "type", "json_schema") || !(js = cJSON_AddObjectToObject(rf, "json_schema"))) return -2;
    static const char *const keys[] = {"name", "schema", "strict", "description"};
    for (int i = 0; i < 4; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(f, keys[i]);
        if (v && !cJSON_IsNull(v) && !cJSON_AddItemToObject(js, keys[i], cJSON_Duplicate(v, 1))) return -2;
    }
    return 0;
}

/* the fields the answer repeats: as given, else their defaults */
static char *echo_of(const cJSON *in)
{
    cJSON *o = cJSON_CreateObject();
    static const char *const keys[] = {"instructions", "max_output_tokens", "metadata", "parallel_tool_calls",
                                       "reasoning", "temperature", "text", "tool_choice", "tools", "top_p", "user"};
    static const char *const defaults[] = {"null", "null", "{}", "true", "{\"effort\":null,\"summary\":null}", "null",
                                           "{\"format\":{\"type\":\"text\"}}", "\"auto\"", "[]", "null", "null"};
    for (int i = 0; o && i < 11; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(in, keys[i]);
        cJSON *x = v && !cJSON_IsNull(v) ? cJSON_Duplicate(v, 1) : cJSON_Parse(defaults[i]);
        if (!cJSON_AddItemToObject(o, keys[i], x)) {
            cJSON_Delete(x);
            cJSON_Delete(o);
            o = NULL;
        }
    }
    const cJSON *prev = cJSON_GetObjectItemCaseSensitive(in, "previous_response_id");
    int ok = o && (cJSON_IsString(prev) ? cJSON_AddStringToObject(o, "previous_response_id", prev->valuestring) != NULL
                                        : cJSON_AddNullToObject(o, "previous_response_id") != NULL) &&
             cJSON_AddBoolToObject(o, "store", !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(in, "store"))) &&
             cJSON_AddStringToObject(o, "truncation", "disabled");
    if (!ok) cJSON_Delete(o);
    return ok ? tm_api_print_del(o) : NULL;
}

/* the stored conversation of previous_response_id f appended to cv's messages: 0, or -1 with *e set
 * (400 naming the field: not a string, no such response) */
static int previous_of(conv *cv, const cJSON *f, tm_resp_store *store, tm_oai_error *e)
{
    char *prev = NULL;
    if (!cJSON_IsString(f)) return BAD("previous_response_id", "'previous_response_id' must be a string");
    int rc = store ? tm_resp_store_get(store, f->valuestring, &prev, NULL) : -1;
    if (rc == -2) return tm_oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory"), -1;
    cJSON *msgs = rc == 0 ? cJSON_Parse(prev) : NULL, *m;
    free(prev);
    if (!cJSON_IsArray(msgs)) {
        cJSON_Delete(msgs);
        return BAD("previous_response_id", "Previous response with id '%.64s' not found", f->valuestring);
    }
    while ((m = cJSON_DetachItemFromArray(msgs, 0)))
        if (!cJSON_AddItemToArray(cv->msgs, m)) {
            cJSON_Delete(m);
            cJSON_Delete(msgs);
            return tm_oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory"), -1;
        }
    cJSON_Delete(msgs);
    return 0;
}

static int resp_request(const char *body, size_t len, int counting, const tm_api_env *env, char **chat_json, char **echo,
                        tm_oai_error *e)
{
    (void)counting;
    tm_resp_store *store = env ? env->store : NULL;
    *chat_json = *echo = NULL;
    cJSON *in = cJSON_ParseWithLength(body, len), *out = cJSON_CreateObject();
    conv cv = {out ? cJSON_AddArrayToObject(out, "messages") : NULL, NULL, 0};
    int rc = 0;
    const cJSON *f;
    if (!cJSON_IsObject(in)) rc = BAD(NULL, "the request body must be a JSON object");
    else if (!cv.msgs) rc = -2;
    if (rc == 0 && (f = cJSON_GetObjectItemCaseSensitive(in, "store")) && !cJSON_IsNull(f) && !cJSON_IsBool(f))
        rc = BAD("store", "'store' must be a boolean");
    if (rc == 0 && (f = cJSON_GetObjectItemCaseSensitive(in, "instructions")) && !cJSON_IsNull(f)) {
        cJSON *m = NULL;
        if (!cJSON_IsString(f)) rc = BAD("instructions", "'instructions' must be a string");
        else rc = (m = new_message(&cv, "system")) && cJSON_AddStringToObject(m, "content", f->valuestring) ? 0 : -2;
    }
    if (rc == 0 && (f = cJSON_GetObjectItemCaseSensitive(in, "previous_response_id")) && !cJSON_IsNull(f))
        rc = previous_of(&cv, f, store, e);
    if (rc == 0) rc = input_of(&cv, cJSON_GetObjectItemCaseSensitive(in, "input"), store, e);
    if (rc == 0 && cv.thought) { /* reasoning last: an assistant turn to carry it */
        cJSON *m = new_message(&cv, "assistant");
        rc = m && cJSON_AddStringToObject(m, "content", "") ? 0 : -2;
    }
    if (rc == 0 && (f = cJSON_GetObjectItemCaseSensitive(in, "tools")) && !cJSON_IsNull(f)) rc = tools_of(f, out, e);
    if (rc == 0 && (f = cJSON_GetObjectItemCaseSensitive(in, "tool_choice")) && !cJSON_IsNull(f)) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        cJSON *o, *fn;
        if (cJSON_IsString(f)) rc = cJSON_AddItemToObject(out, "tool_choice", cJSON_Duplicate(f, 1)) ? 0 : -2;
        else if (!is_type(f, "function") || !cJSON_IsString(name))
            rc = BAD("tool_choice", "'tool_choice' must be auto, none, required or {\"type\": \"function\", \"name\"}");
        else
            rc = (o = cJSON_AddObjectToObject(out, "tool_choice")) && cJSON_AddStringToObject(o, "type", "function") &&
                         (fn = cJSON_AddObjectToObject(o, "function")) && cJSON_AddStringToObject(fn, "name", name->valuestring)
                     ? 0
                     : -2;
    }
    if (rc == 0 && (f = cJSON_GetObjectItemCaseSensitive(in, "text")) && !cJSON_IsNull(f)) {
        if (!cJSON_IsObject(f)) rc = BAD("text", "'text' must be an object");
        else rc = format_of(f, out, e);
    }
    if (rc == 0 && (f = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(in, "reasoning"), "effort")) &&
        cJSON_IsString(f)) {
        cJSON *kw = cJSON_AddObjectToObject(out, "chat_template_kwargs");
        rc = kw && cJSON_AddStringToObject(kw, "reasoning_effort", f->valuestring) ? 0 : -2;
    }
    static const char *const same[][2] = {{"max_output_tokens", "max_tokens"}, {"temperature", "temperature"},
                                          {"top_p", "top_p"}, {"stream", "stream"}, {"model", "model"},
                                          {"parallel_tool_calls", "parallel_tool_calls"}};
    for (size_t k = 0; rc == 0 && k < sizeof same / sizeof same[0]; k++)
        if ((f = cJSON_GetObjectItemCaseSensitive(in, same[k][0])) && !cJSON_IsNull(f) &&
            !cJSON_AddItemToObject(out, same[k][1], cJSON_Duplicate(f, 1)))
            rc = -2;
    if (rc == 0 && (!(*chat_json = cJSON_PrintUnformatted(out)) || !(*echo = echo_of(in)))) rc = -2;
    if (rc == -2) tm_oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    if (rc) {
        free(*chat_json);
        free(*echo);
        *chat_json = *echo = NULL;
    }
    free(cv.thought);
    cJSON_Delete(in);
    cJSON_Delete(out);
    return rc ? -1 : 0;
}

/* ---- the answer ---- */

enum { ITEM_REASONING = 1, ITEM_MESSAGE = 2, ITEM_CALL = 3 };

/* an item's id: its kind's prefix, the response's digits, its index */
static void item_id(const tm_api_meta *m, int kind, int index, char *buf, size_t n)
{
    const char *digits = strchr(m->id, '_') ? strchr(m->id, '_') + 1 : m->id;
    snprintf(buf, n, "%s_%s%02d", kind == ITEM_REASONING ? "rs" : kind == ITEM_MESSAGE ? "msg" : "fc", digits, index);
}

/* a reasoning or message item holding text [n] (done: completed, its text whole; else in progress, empty) */
static cJSON *text_item(const tm_api_meta *m, int kind, int index, const char *text, size_t n, int done)
{
    char id[64];
    item_id(m, kind, index, id, sizeof id);
    cJSON *it = tm_api_typed(kind == ITEM_REASONING ? "reasoning" : "message"), *parts = NULL, *p = NULL;
    int ok = it && cJSON_AddStringToObject(it, "id", id);
    if (ok && kind == ITEM_REASONING) ok = cJSON_AddArrayToObject(it, "summary") != NULL;
    if (ok && kind == ITEM_MESSAGE)
        ok = cJSON_AddStringToObject(it, "status", done ? "completed" : "in_progress") &&
             cJSON_AddStringToObject(it, "role", "assistant");
    ok = ok && (parts = cJSON_AddArrayToObject(it, "content"));
    if (ok && done) {
        p = tm_api_typed(kind == ITEM_REASONING ? "reasoning_text" : "output_text");
        if (!p || !cJSON_AddItemToArray(parts, p)) {
            cJSON_Delete(p);
            ok = 0;
        } else {
            ok = tm_api_add_strn(p, "text", text, n) && (kind == ITEM_REASONING || cJSON_AddArrayToObject(p, "annotations"));
        }
    }
    if (ok) return it;
    cJSON_Delete(it);
    return NULL;
}

/* a function_call item: done 1 completed, 0 in progress (arguments ""), -1 incomplete (a call max_output_tokens
 * cut, its arguments as far as they went out) */
static cJSON *call_item_json(const tm_api_meta *m, int index, const tm_oai_tool_call *c, int done)
{
    char id[64];
    item_id(m, ITEM_CALL, index, id, sizeof id);
    cJSON *it = tm_api_typed("function_call");
    if (it && cJSON_AddStringToObject(it, "id", id) && cJSON_AddStringToObject(it, "call_id", c->id) &&
        cJSON_AddStringToObject(it, "name", c->name) && cJSON_AddStringToObject(it, "arguments", done ? c->arguments : "") &&
        cJSON_AddStringToObject(it, "status", done > 0 ? "completed" : done < 0 ? "incomplete" : "in_progress"))
        return it;
    cJSON_Delete(it);
    return NULL;
}

/* the response object: status in_progress (r NULL: a stream's start, no output, usage null), else
 * completed or incomplete, with the output items of texts rt [2] (reasoning, answer; [n]) and r's calls,
 * then cut (a stream's call that max_output_tokens cut, as it went out; NULL: none) */
static cJSON *response(const tm_api_meta *m, const tm_api_reply *r, const char *const rt[2], const size_t rn[2],
                       const tm_oai_tool_call *cut_call, const tm_oai_usage *u)
{
    cJSON *o = cJSON_CreateObject(), *echo = m->echo ? cJSON_Parse(m->echo) : NULL, *out = NULL, *us, *d;
    int cut = r && r->finish && !strcmp(r->finish, "length");
    int ok = o && cJSON_AddStringToObject(o, "id", m->id) && cJSON_AddStringToObject(o, "object", "response") &&
             cJSON_AddNumberToObject(o, "created_at", (double)m->created) &&
             cJSON_AddStringToObject(o, "status", !r ? "in_progress" : cut ? "incomplete" : "completed") &&
             cJSON_AddNullToObject(o, "error") && cJSON_AddStringToObject(o, "model", m->model);
    cJSON *inc = cut ? cJSON_CreateObject() : cJSON_CreateNull();
    int iok = inc && (!cut || cJSON_AddStringToObject(inc, "reason", "max_output_tokens"));
    ok = tm_api_attach(o, "incomplete_details", inc) && ok && iok;
    for (cJSON *x = echo ? echo->child : NULL; ok && x; x = x->next) /* the request's fields */
        ok = cJSON_AddItemToObject(o, x->string, cJSON_Duplicate(x, 1));
    ok = ok && (out = cJSON_AddArrayToObject(o, "output"));
    int idx = 0;
    for (int k = 0; ok && r && k < 2; k++)
        if (rn[k]) ok = cJSON_AddItemToArray(out, text_item(m, k ? ITEM_MESSAGE : ITEM_REASONING, idx++, rt[k], rn[k], 1));
    for (int i = 0; ok && r && r->tc && i < r->tc->n; i++) ok = cJSON_AddItemToArray(out, call_item_json(m, idx++, &r->tc->v[i], 1));
    if (ok && r && cut_call) ok = cJSON_AddItemToArray(out, call_item_json(m, idx++, cut_call, -1));
    if (ok && !r) {
        ok = cJSON_AddNullToObject(o, "usage") != NULL;
    } else if (ok) {
        ok = (us = cJSON_AddObjectToObject(o, "usage")) && cJSON_AddNumberToObject(us, "input_tokens", u->prompt) &&
             (d = cJSON_AddObjectToObject(us, "input_tokens_details")) && cJSON_AddNumberToObject(d, "cached_tokens", u->cached) &&
             cJSON_AddNumberToObject(us, "output_tokens", u->completion) &&
             (d = cJSON_AddObjectToObject(us, "output_tokens_details")) && cJSON_AddNumberToObject(d, "reasoning_tokens", 0) &&
             cJSON_AddNumberToObject(us, "total_tokens", u->prompt + u->completion);
    }
    cJSON_Delete(echo);
    if (ok) return o;
    cJSON_Delete(o);
    return NULL;
}

static char *resp_json(const tm_api_meta *m, const tm_api_reply *r, const tm_oai_usage *u)
{
    const char *rt[2] = {r->reasoning, r->text};
    size_t rn[2] = {r->reasoning_len, r->len};
    return tm_api_print_del(response(m, r, rt, rn, NULL, u));
}

/* ---- the stream ---- */

typedef struct resp_stream {
    char *text[2];     /* the reasoning and the answer as streamed [len] */
    size_t len[2], cap[2];
    int index[2];      /* their items' output index, or -1 */
    tm_oai_tool_call call; /* the open call item's id, name and arguments so far [alen] (malloc'd) */
    size_t alen, acap;
    int call_index;    /* its output index */
    int calls;         /* call items opened */
} resp_stream;

static void call_clear(resp_stream *rs)
{
    free((char *)rs->call.id), free((char *)rs->call.name), free((char *)rs->call.arguments);
    rs->call = (tm_oai_tool_call){0};
    rs->alen = rs->acap = 0;
}

/* part_event without content_index: a call item's events' fields */
static cJSON *call_event(const tm_api_meta *m, const char *type, int index);

/* ev, numbered, into objs [*n] */
static void push(tm_api_stream *s, cJSON **objs, int *n, cJSON *ev)
{
    if (ev && !cJSON_AddNumberToObject(ev, "sequence_number", s->seq)) {
        cJSON_Delete(ev);
        ev = NULL;
    }
    s->seq++;
    objs[(*n)++] = ev;
}

/* {"type", "item_id", "output_index", "content_index": 0} of item kind at index */
static cJSON *part_event(const tm_api_meta *m, const char *type, int kind, int index)
{
    char id[64];
    item_id(m, kind, index, id, sizeof id);
    cJSON *ev = tm_api_typed(type);
    if (ev && cJSON_AddStringToObject(ev, "item_id", id) && cJSON_AddNumberToObject(ev, "output_index", index) &&
        cJSON_AddNumberToObject(ev, "content_index", 0))
        return ev;
    cJSON_Delete(ev);
    return NULL;
}

/* {"type", "output_index", "item"} */
static cJSON *item_event(const char *type, int index, cJSON *item)
{
    cJSON *ev = tm_api_typed(type);
    if (ev && cJSON_AddNumberToObject(ev, "output_index", index)) {
        if (tm_api_attach(ev, "item", item)) return ev;
    } else {
        cJSON_Delete(item);
    }
    cJSON_Delete(ev);
    return NULL;
}

/* part_event + key: s [n] (the part's text delta or whole) */
static cJSON *text_event(const tm_api_meta *m, const char *type, int kind, int index, const char *key, const char *v,
                         size_t n)
{
    cJSON *ev = part_event(m, type, kind, index);
    if (ev && tm_api_add_strn(ev, key, v, n)) return ev;
    cJSON_Delete(ev);
    return NULL;
}

/* the open item's closing events (its text, or a call's arguments, whole) into objs; cut: a call's item was
 * cut by max_output_tokens (status incomplete) */
static void close_item(tm_api_stream *s, const tm_api_meta *m, cJSON **objs, int *n, int cut)
{
    resp_stream *rs = s->priv;
    if (!s->open) return;
    if (s->open == ITEM_CALL) {
        int idx = rs->call_index;
        tm_oai_tool_call c = rs->call;
        if (!c.arguments) c.arguments = "";
        cJSON *ev = call_event(m, "response.function_call_arguments.done", idx);
        push(s, objs, n, ev && cJSON_AddStringToObject(ev, "arguments", c.arguments) ? ev : (cJSON_Delete(ev), NULL));
        push(s, objs, n, item_event("response.output_item.done", idx, call_item_json(m, idx, &c, cut ? -1 : 1)));
        if (!cut) call_clear(rs); /* (a cut one stays for the response's output) */
        s->open = 0;
        return;
    }
    int kind = s->open, k = kind == ITEM_MESSAGE, idx = rs->index[k];
    const char *t = rs->text[k] ? rs->text[k] : "";
    push(s, objs, n, text_event(m, k ? "response.output_text.done" : "response.reasoning_text.done", kind, idx, "text", t,
                                rs->len[k]));
    cJSON *part = tm_api_typed(k ? "output_text" : "reasoning_text"), *ev = part_event(m, "response.content_part.done", kind, idx);
    int ok = part && tm_api_add_strn(part, "text", t, rs->len[k]) && (!k || cJSON_AddArrayToObject(part, "annotations"));
    push(s, objs, n, tm_api_attach(ev, "part", ok ? part : (cJSON_Delete(part), NULL)) ? ev : (cJSON_Delete(ev), NULL));
    push(s, objs, n, item_event("response.output_item.done", idx, text_item(m, kind, idx, t, rs->len[k], 1)));
    s->open = 0;
}

static char *resp_stream_start(tm_api_stream *s, const tm_api_meta *m, const tm_oai_usage *u)
{
    (void)u;
    *s = (tm_api_stream){0};
    resp_stream *rs = calloc(1, sizeof *rs);
    if (!rs) return NULL;
    rs->index[0] = rs->index[1] = -1;
    s->priv = rs;
    cJSON *objs[2];
    int n = 0;
    static const char *const names[] = {"response.created", "response.in_progress"};
    for (int i = 0; i < 2; i++) {
        cJSON *ev = tm_api_typed(names[i]);
        push(s, objs, &n, tm_api_attach(ev, "response", response(m, NULL, NULL, NULL, NULL, NULL)) ? ev : (cJSON_Delete(ev), NULL));
    }
    return tm_api_events(n, objs);
}

static cJSON *call_event(const tm_api_meta *m, const char *type, int index)
{
    cJSON *ev = part_event(m, type, ITEM_CALL, index);
    if (ev) cJSON_DeleteItemFromObjectCaseSensitive(ev, "content_index");
    return ev;
}

/* a call's piece: its first opens its item (the open one closed), each adds to its arguments */
static void call_piece(tm_api_stream *s, const tm_api_meta *m, const tm_oai_call_delta *d, cJSON **objs, int *n)
{
    resp_stream *rs = s->priv;
    if (d->name) {
        close_item(s, m, objs, n, 0);
        rs->calls++;
        rs->call_index = s->next++;
        s->open = ITEM_CALL;
        rs->call = (tm_oai_tool_call){strdup(d->id), strdup(d->name), strdup("")};
        push(s, objs, n, item_event("response.output_item.added", rs->call_index,
                                    rs->call.id && rs->call.name && rs->call.arguments ? call_item_json(m, rs->call_index, &rs->call, 0) : NULL));
    }
    if (!d->args_len || s->open != ITEM_CALL) return;
    char *a = (char *)rs->call.arguments;
    if (tm_grow((void **)&a, &rs->acap, rs->alen + d->args_len + 1, 1)) {
        push(s, objs, n, NULL); /* (tm_api_events fails the whole step on a NULL) */
        return;
    }
    memcpy(a + rs->alen, d->args, d->args_len);
    rs->alen += d->args_len;
    a[rs->alen] = '\0';
    rs->call.arguments = a;
    cJSON *ev = call_event(m, "response.function_call_arguments.delta", rs->call_index);
    push(s, objs, n, ev && tm_api_add_strn(ev, "delta", d->args, d->args_len) ? ev : (cJSON_Delete(ev), NULL));
}

static char *resp_stream_part(tm_api_stream *s, const tm_api_meta *m, const char *reasoning, size_t rlen,
                              const char *text, size_t len, const tm_oai_call_delta *cd, int ncd)
{
    resp_stream *rs = s->priv;
    if (!rs) return NULL;
    /* per kind at most: the open item's 3 closing events, 2 opening ones, a delta; per call piece 2 closing, 1
       opening and a delta */
    cJSON **objs = calloc((size_t)(12 + 4 * ncd), sizeof *objs);
    int n = 0;
    if (!objs) return NULL;
    for (int k = 0; k < 2; k++) {
        int kind = k ? ITEM_MESSAGE : ITEM_REASONING;
        const char *v = k ? text : reasoning;
        size_t vn = k ? len : rlen;
        if (!vn) continue;
        if (s->open != kind) { /* a new item: the open one closed, this one added with its (empty) part */
            close_item(s, m, objs, &n, 0);
            int idx = rs->index[k] = s->next++;
            s->open = kind;
            push(s, objs, &n, item_event("response.output_item.added", idx, text_item(m, kind, idx, "", 0, 0)));
            cJSON *part = tm_api_typed(k ? "output_text" : "reasoning_text"), *ev = part_event(m, "response.content_part.added", kind, idx);
            int ok = part && cJSON_AddStringToObject(part, "text", "") && (!k || cJSON_AddArrayToObject(part, "annotations"));
            push(s, objs, &n, tm_api_attach(ev, "part", ok ? part : (cJSON_Delete(part), NULL)) ? ev : (cJSON_Delete(ev), NULL));
        }
        if (tm_grow((void **)&rs->text[k], &rs->cap[k], rs->len[k] + vn + 1, 1)) {
            push(s, objs, &n, NULL); /* (tm_api_events fails the whole step on a NULL) */
            break;
        }
        memcpy(rs->text[k] + rs->len[k], v, vn);
        rs->len[k] += vn;
        push(s, objs, &n, text_event(m, k ? "response.output_text.delta" : "response.reasoning_text.delta", kind,
                                     rs->index[k], "delta", v, vn));
    }
    for (int i = 0; i < ncd; i++) call_piece(s, m, &cd[i], objs, &n);
    char *out = tm_api_events(n, objs);
    free(objs);
    return out;
}

static char *resp_stream_end(tm_api_stream *s, const tm_api_meta *m, const tm_api_reply *r, const tm_oai_usage *u)
{
    resp_stream *rs = s->priv;
    cJSON *objs[4];
    int n = 0;
    if (!rs) return NULL;
    /* the calls went out as pieces (stream_part); one more than the reply's was cut by max_output_tokens */
    int cut_call = s->open == ITEM_CALL && rs->calls > (r->tc ? r->tc->n : 0);
    close_item(s, m, objs, &n, cut_call);
    /* the whole response as streamed: its items' texts as their deltas said, the calls, the cut one */
    const char *rt[2] = {rs->text[0], rs->text[1]};
    size_t rn[2] = {rs->len[0], rs->len[1]};
    int cut = r->finish && !strcmp(r->finish, "length");
    cJSON *ev = tm_api_typed(cut ? "response.incomplete" : "response.completed");
    push(s, objs, &n, tm_api_attach(ev, "response", response(m, r, rt, rn, cut_call ? &rs->call : NULL, u)) ? ev
                                                                                                           : (cJSON_Delete(ev), NULL));
    return tm_api_events(n, objs);
}

static char *resp_stream_error(tm_api_stream *s, const char *msg)
{
    cJSON *ev = tm_api_typed("error"), *objs[1];
    int n = 0;
    int ok = ev && cJSON_AddStringToObject(ev, "code", "server_error") && cJSON_AddStringToObject(ev, "message", msg) &&
             cJSON_AddNullToObject(ev, "param");
    push(s, objs, &n, ok ? ev : (cJSON_Delete(ev), NULL));
    return tm_api_events(n, objs);
}

static void resp_stream_free(tm_api_stream *s)
{
    resp_stream *rs = s->priv;
    if (rs) free(rs->text[0]), free(rs->text[1]), call_clear(rs);
    free(rs);
    s->priv = NULL;
}

/* ---- stored responses ---- */

/* msgs' tool calls' arguments back to strings of JSON, as a chat request writes them (the parsed
 * request holds them as objects, for the template) */
static int args_as_text(cJSON *msgs)
{
    const cJSON *m, *c;
    cJSON_ArrayForEach(m, msgs)
    {
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(m, "tool_calls"))
        {
            cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
            const cJSON *a = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
            char *t = a && !cJSON_IsString(a) ? cJSON_PrintUnformatted(a) : NULL;
            if (a && !cJSON_IsString(a) && (!t || !cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", cJSON_CreateString(t)))) {
                free(t);
                return 0;
            }
            free(t);
        }
    }
    return 1;
}

/* the answer kept where the request asked ("store" in the echo): the conversation it ends (the
 * request's messages, its instructions left out, then the answer as an assistant message) and the
 * response object */
static void resp_keep(tm_resp_store *store, const tm_api_meta *m, const char *messages, const tm_api_reply *r,
                      const tm_oai_usage *u)
{
    cJSON *echo = m->echo ? cJSON_Parse(m->echo) : NULL;
    int want = store && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(echo, "store"));
    int instructions = cJSON_IsString(cJSON_GetObjectItemCaseSensitive(echo, "instructions"));
    cJSON_Delete(echo);
    if (!want) return;
    cJSON *msgs = cJSON_Parse(messages), *a = NULL, *calls = NULL;
    if (instructions) cJSON_DeleteItemFromArray(msgs, 0);
    int ok = cJSON_IsArray(msgs) && args_as_text(msgs) && (a = cJSON_CreateObject()) && cJSON_AddItemToArray(msgs, a) &&
             cJSON_AddStringToObject(a, "role", "assistant") && tm_api_add_strn(a, "content", r->text, r->len) &&
             (!r->reasoning_len || tm_api_add_strn(a, "reasoning_content", r->reasoning, r->reasoning_len)) &&
             (!r->tc || !r->tc->n || (calls = cJSON_AddArrayToObject(a, "tool_calls")));
    for (int i = 0; ok && calls && i < r->tc->n; i++) {
        const tm_oai_tool_call *c = &r->tc->v[i];
        cJSON *o = cJSON_CreateObject(), *fn;
        ok = o && cJSON_AddItemToArray(calls, o) && cJSON_AddStringToObject(o, "id", c->id) &&
             cJSON_AddStringToObject(o, "type", "function") && (fn = cJSON_AddObjectToObject(o, "function")) &&
             cJSON_AddStringToObject(fn, "name", c->name) && cJSON_AddStringToObject(fn, "arguments", c->arguments);
    }
    char *text = ok ? cJSON_PrintUnformatted(msgs) : NULL, *resp = text ? resp_json(m, r, u) : NULL;
    cJSON_Delete(msgs);
    if (text && resp) tm_resp_store_put(store, m->id, text, resp); /* the store's bounds may refuse it */
    else free(text), free(resp);
}

int tm_resp_lookup(tm_resp_store *store, int del, const char *id, int *status, char **body)
{
    *body = NULL;
    int rc = !store ? -1 : del ? tm_resp_store_del(store, id) : tm_resp_store_get(store, id, NULL, body);
    if (rc == -2) return -1;
    *status = rc ? 404 : 200;
    if (rc == 0 && !del) return 0;
    cJSON *o = cJSON_CreateObject(), *er;
    int ok = o != NULL;
    if (rc == 0)
        ok = ok && cJSON_AddStringToObject(o, "id", id) && cJSON_AddStringToObject(o, "object", "response") &&
             cJSON_AddTrueToObject(o, "deleted");
    else {
        char msg[160];
        snprintf(msg, sizeof msg, "Response with id '%.64s' not found.", id);
        ok = ok && (er = cJSON_AddObjectToObject(o, "error")) && cJSON_AddStringToObject(er, "message", msg) &&
             cJSON_AddStringToObject(er, "type", "invalid_request_error") && cJSON_AddNullToObject(er, "param") &&
             cJSON_AddStringToObject(er, "code", "not_found");
    }
    if (!ok) {
        cJSON_Delete(o);
        return -1;
    }
    return (*body = tm_api_print_del(o)) ? 0 : -1;
}

const tm_api_fmt tm_api_responses = {"resp_", TM_OAI_CHAT, resp_request, resp_json, resp_stream_start, resp_stream_part,
                                     resp_stream_end, resp_stream_error, resp_stream_free, resp_keep};
