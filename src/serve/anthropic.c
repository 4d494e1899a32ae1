/* serve/anthropic.c: Anthropic's Messages API (POST /v1/messages) over the chat machinery. A request
 * is translated into an OpenAI chat request (tm_oai_parse then checks it as any chat request), and
 * the reply is written in Anthropic's shapes: a "message" object, or the stream's events
 * (message_start, content_block_start, content_block_delta ..., content_block_stop, message_delta,
 * message_stop). Text content only: tools, images and documents are refused by name (400). */
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

/* a content (string, or an array of {"type": "text", "text"} blocks) as an OpenAI one, added to o */
static int content_of(const cJSON *c, const char *param, cJSON *o, tm_oai_error *e)
{
    if (cJSON_IsString(c)) return cJSON_AddStringToObject(o, "content", c->valuestring) ? 0 : -2;
    if (!cJSON_IsArray(c)) return bad(e, param, "'%s' must be a string or an array of content blocks", param);
    cJSON *parts = cJSON_AddArrayToObject(o, "content");
    if (!parts) return -2;
    for (const cJSON *b = c->child; b; b = b->next) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type"), *text = cJSON_GetObjectItemCaseSensitive(b, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text"))
            return bad(e, param, "'%s': only text blocks are supported (not images, documents, tool_use or tool_result)",
                       param);
        if (!cJSON_IsString(text)) return bad(e, param, "'%s': a text block needs a string \"text\"", param);
        cJSON *p = cJSON_CreateObject();
        if (!p || !cJSON_AddItemToArray(parts, p) || !cJSON_AddStringToObject(p, "type", "text") ||
            !cJSON_AddStringToObject(p, "text", text->valuestring))
            return -2;
    }
    return 0;
}

int tm_anth_request(const char *body, size_t len, char **chat_json, tm_oai_error *e)
{
    *chat_json = NULL;
    cJSON *in = cJSON_ParseWithLength(body, len), *out = cJSON_CreateObject(), *msgs = NULL;
    int rc = 0;
    if (!in || !cJSON_IsObject(in)) rc = bad(e, NULL, "%s", "the request body must be a JSON object");
    else if (!out || !(msgs = cJSON_AddArrayToObject(out, "messages"))) rc = -2;
    static const char *const refused[] = {"tools", "tool_choice", NULL};
    for (int i = 0; rc == 0 && refused[i]; i++)
        if (cJSON_GetObjectItemCaseSensitive(in, refused[i]))
            rc = bad(e, refused[i], "'%s' is not supported on /v1/messages (use /v1/chat/completions)", refused[i]);
    const cJSON *mt = rc ? NULL : cJSON_GetObjectItemCaseSensitive(in, "max_tokens");
    if (rc == 0 && !mt) rc = bad(e, "max_tokens", "%s", "'max_tokens' is required");
    const cJSON *sys = rc ? NULL : cJSON_GetObjectItemCaseSensitive(in, "system");
    if (rc == 0 && sys) {
        cJSON *m = cJSON_CreateObject();
        if (!m || !cJSON_AddItemToArray(msgs, m) || !cJSON_AddStringToObject(m, "role", "system")) rc = -2;
        else rc = content_of(sys, "system", m, e);
    }
    const cJSON *ms = rc ? NULL : cJSON_GetObjectItemCaseSensitive(in, "messages");
    if (rc == 0 && (!cJSON_IsArray(ms) || !ms->child)) rc = bad(e, "messages", "%s", "'messages' must be a non-empty array");
    int i = 0;
    for (const cJSON *x = ms ? ms->child : NULL; rc == 0 && x; x = x->next, i++) {
        char param[32];
        snprintf(param, sizeof param, "messages[%d]", i);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(x, "role");
        if (!cJSON_IsString(role) || (strcmp(role->valuestring, "user") && strcmp(role->valuestring, "assistant"))) {
            rc = bad(e, param, "'%s.role' must be \"user\" or \"assistant\"", param);
            break;
        }
        cJSON *m = cJSON_CreateObject();
        if (!m || !cJSON_AddItemToArray(msgs, m) || !cJSON_AddStringToObject(m, "role", role->valuestring)) rc = -2;
        else rc = content_of(cJSON_GetObjectItemCaseSensitive(x, "content"), param, m, e);
    }
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

/* OpenAI's finish reason as Anthropic's stop_reason (a stop string is not told apart from the end of
 * the turn: the library reports both as "stop") */
static const char *stop_reason(const char *finish)
{
    return finish && !strcmp(finish, "length") ? "max_tokens" : "end_turn";
}

static char *print_del(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

/* {"id","type":"message","role":"assistant","model","content":[...],"stop_reason","stop_sequence",
 * "usage"}: content the text block (none when the text is empty), or [] for a stream's start */
static cJSON *message(const char *id, const char *model, const char *text, size_t len, const char *finish, int in_tok,
                      int out_tok)
{
    cJSON *m = cJSON_CreateObject(), *content, *u;
    if (!m || !cJSON_AddStringToObject(m, "id", id) || !cJSON_AddStringToObject(m, "type", "message") ||
        !cJSON_AddStringToObject(m, "role", "assistant") || !cJSON_AddStringToObject(m, "model", model) ||
        !(content = cJSON_AddArrayToObject(m, "content"))) {
        cJSON_Delete(m);
        return NULL;
    }
    char *t = text ? strndup(text, len) : NULL;
    cJSON *blk = t && len ? cJSON_CreateObject() : NULL;
    int ok = !text || t;
    if (blk) ok = cJSON_AddItemToArray(content, blk) && cJSON_AddStringToObject(blk, "type", "text") &&
                  cJSON_AddStringToObject(blk, "text", t);
    free(t);
    ok = ok && (finish ? cJSON_AddStringToObject(m, "stop_reason", stop_reason(finish)) != NULL
                       : cJSON_AddNullToObject(m, "stop_reason") != NULL) &&
         cJSON_AddNullToObject(m, "stop_sequence") && (u = cJSON_AddObjectToObject(m, "usage")) &&
         cJSON_AddNumberToObject(u, "input_tokens", in_tok) && cJSON_AddNumberToObject(u, "output_tokens", out_tok);
    if (!ok) {
        cJSON_Delete(m);
        return NULL;
    }
    return m;
}

char *tm_anth_message_json(const char *id, const char *model, const char *text, size_t len, const char *finish,
                           int in_tok, int out_tok)
{
    return print_del(message(id, model, text ? text : "", len, finish, in_tok, out_tok));
}

/* the events "event: NAME\ndata: JSON\n\n" of objs [n] (taken, freed) in one string; NULL when any
 * object is missing or out of memory */
static char *events(int n, const char *const *names, cJSON **objs)
{
    char *acc = NULL;
    size_t len = 0;
    int ok = 1;
    for (int i = 0; i < n; i++) {
        char *js = ok ? print_del(objs[i]) : (cJSON_Delete(objs[i]), NULL);
        size_t k = js ? strlen(names[i]) + strlen(js) + 20 : 0;
        char *r = js ? realloc(acc, len + k) : NULL;
        if (r) acc = r, len += (size_t)snprintf(acc + len, k, "event: %s\ndata: %s\n\n", names[i], js);
        ok = ok && r;
        free(js);
    }
    if (!ok) free(acc);
    return ok ? acc : NULL;
}

/* {"type": type} */
static cJSON *typed(const char *type)
{
    cJSON *o = cJSON_CreateObject();
    if (o && !cJSON_AddStringToObject(o, "type", type)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* child (taken) under key in o; 0 (child freed) when either is missing or out of memory */
static int attach(cJSON *o, const char *key, cJSON *child)
{
    if (o && child && cJSON_AddItemToObject(o, key, child)) return 1;
    cJSON_Delete(child);
    return 0;
}

char *tm_anth_stream_start(const char *id, const char *model, int in_tok)
{
    cJSON *s = typed("message_start"), *b = typed("content_block_start"), *blk = typed("text");
    int ok = attach(s, "message", message(id, model, NULL, 0, NULL, in_tok, 0)) & !!cJSON_AddStringToObject(blk, "text", "");
    ok &= attach(b, "content_block", blk) && cJSON_AddNumberToObject(b, "index", 0);
    static const char *const names[] = {"message_start", "content_block_start"};
    cJSON *objs[] = {ok ? s : (cJSON_Delete(s), NULL), b};
    return events(2, names, objs);
}

char *tm_anth_stream_text(const char *text, size_t len)
{
    cJSON *ev = typed("content_block_delta"), *d = typed("text_delta");
    char *t = strndup(text, len);
    int ok = t && cJSON_AddStringToObject(d, "text", t) && cJSON_AddNumberToObject(ev, "index", 0);
    free(t);
    ok &= attach(ev, "delta", d);
    cJSON *objs[] = {ok ? ev : (cJSON_Delete(ev), NULL)};
    return events(1, (const char *const[]){"content_block_delta"}, objs);
}

char *tm_anth_stream_end(const char *finish, int out_tok)
{
    cJSON *stop = typed("content_block_stop"), *md = typed("message_delta"), *d = cJSON_CreateObject(),
          *u = cJSON_CreateObject();
    int ok = cJSON_AddNumberToObject(stop, "index", 0) && cJSON_AddStringToObject(d, "stop_reason", stop_reason(finish)) &&
             cJSON_AddNullToObject(d, "stop_sequence") && cJSON_AddNumberToObject(u, "output_tokens", out_tok);
    ok &= attach(md, "delta", d);
    ok &= attach(md, "usage", u);
    static const char *const names[] = {"content_block_stop", "message_delta", "message_stop"};
    cJSON *objs[] = {stop, ok ? md : (cJSON_Delete(md), NULL), typed("message_stop")};
    return events(3, names, objs);
}

char *tm_anth_stream_error(const char *msg)
{
    cJSON *ev = typed("error"), *er = typed("api_error");
    int ok = cJSON_AddStringToObject(er, "message", msg) != NULL;
    ok &= attach(ev, "error", er);
    cJSON *objs[] = {ok ? ev : (cJSON_Delete(ev), NULL)};
    return events(1, (const char *const[]){"error"}, objs);
}
