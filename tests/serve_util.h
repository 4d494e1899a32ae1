/* tests/serve_util.h: what the server's tool-call tests share (test_serve_tools, test_serve_calls): two
 * tools, a conformance chat template by name, and a chat completion asked of a running server, its answer or
 * stream read into a reply (content, reasoning, finish, each call's name, arguments, id and streamed pieces). */
#ifndef TM_TESTS_SERVE_UTIL_H
#define TM_TESTS_SERVE_UTIL_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "harness.h"
#include "http_client.h"

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"The weather in a city\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"enum\":[\"Paris\",\"Oslo\",\"Rome\"]},"
    "\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":7}},\"required\":[\"city\"],"
    "\"additionalProperties\":false}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"now\",\"parameters\":{\"type\":\"object\",\"properties\":{},"
    "\"additionalProperties\":false}}}]";

static inline char *shared_template(const char *name)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/conformance/chat_templates/%s", th_shared(), name);
    char *s = th_slurp(path);
    CHECKF(s != NULL, "%s", path);
    return s;
}

typedef struct reply {
    int status;
    char reasoning[4096];
    int has_reasoning;
    char content[4096];
    int has_content;         /* content not null */
    char finish[16];
    int n;                   /* calls */
    char name[8][72], args[8][512], id[8][48];
    int pieces[8];           /* a stream's pieces of each call */
} reply;

static inline void read_calls(const cJSON *calls, reply *out, int stream)
{
    for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next) {
        int i = stream ? (int)jnum(c, "index") : out->n;
        if (i < 0 || i >= 8) {
            CHECKF(0, "call index %d", i);
            continue;
        }
        const char *nm = jstr(c, "function.name"), *a = jstr(c, "function.arguments"), *id = jstr(c, "id");
        /* a call's first piece names it (id, type, name), the later ones only add to its arguments */
        int first = i >= out->n;
        CHECKF(first ? id && nm && !strcmp(jstr(c, "type") ? jstr(c, "type") : "", "function") : !id && !nm && !jstr(c, "type"),
               "call %d's %s piece", i, first ? "first" : "later");
        CHECK(a != NULL);
        if (first) out->n = i + 1, out->pieces[i] = 0;
        out->pieces[i]++;
        if (nm) snprintf(out->name[i], sizeof out->name[i], "%s", nm);
        if (id) snprintf(out->id[i], sizeof out->id[i], "%s", id);
        if (a) strncat(out->args[i], a, sizeof out->args[i] - strlen(out->args[i]) - 1);
    }
}

static inline void ask(int port, const char *body, int stream, reply *out)
{
    memset(out, 0, sizeof *out);
    http_res hr;
    CHECK(http(port, "POST", "/v1/chat/completions", body, NULL, &hr) == 0);
    out->status = hr.status;
    if (!stream || hr.status != 200) {
        cJSON *j = cJSON_Parse(hr.body ? hr.body : "");
        const cJSON *msg = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "message");
        const cJSON *c = cJSON_GetObjectItem(msg, "content"), *rc = cJSON_GetObjectItem(msg, "reasoning_content");
        out->has_content = cJSON_IsString(c);
        out->has_reasoning = cJSON_IsString(rc);
        if (cJSON_IsString(rc)) snprintf(out->reasoning, sizeof out->reasoning, "%s", rc->valuestring);
        if (cJSON_IsString(c)) snprintf(out->content, sizeof out->content, "%s", c->valuestring);
        const char *f = jstr(j, "choices.0.finish_reason");
        snprintf(out->finish, sizeof out->finish, "%s", f ? f : "");
        read_calls(cJSON_GetObjectItem(msg, "tool_calls"), out, 0);
        cJSON_Delete(j);
        http_res_free(&hr);
        return;
    }
    for (const char *p = hr.body; p && *p;) {
        const char *e = strstr(p, "\n\n");
        if (!e) break;
        if (!strncmp(p, "data: {", 7)) {
            char *ev = strndup(p + 6, (size_t)(e - p - 6));
            cJSON *j = cJSON_Parse(ev);
            CHECKF(j != NULL, "event %s", ev);
            const char *t = jstr(j, "choices.0.delta.content"), *f = jstr(j, "choices.0.finish_reason");
            const char *rs = jstr(j, "choices.0.delta.reasoning_content");
            if (rs) {
                strncat(out->reasoning, rs, sizeof out->reasoning - strlen(out->reasoning) - 1);
                out->has_reasoning = 1;
            }
            if (t) {
                strncat(out->content, t, sizeof out->content - strlen(out->content) - 1);
                out->has_content |= t[0] != 0;
            }
            if (f) snprintf(out->finish, sizeof out->finish, "%s", f);
            read_calls(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0),
                                                               "delta"),
                                           "tool_calls"),
                       out, 1);
            cJSON_Delete(j);
            free(ev);
        }
        p = e + 2;
    }
    http_res_free(&hr);
}

/* a call's arguments hold to its tool's schema */
static inline int args_ok(const char *name, const char *args)
{
    cJSON *a = cJSON_Parse(args);
    int ok = cJSON_IsObject(a);
    if (ok && !strcmp(name, "get_weather")) {
        const cJSON *city = cJSON_GetObjectItem(a, "city"), *days = cJSON_GetObjectItem(a, "days");
        ok = cJSON_IsString(city) && (!strcmp(city->valuestring, "Paris") || !strcmp(city->valuestring, "Oslo") ||
                                      !strcmp(city->valuestring, "Rome"));
        ok = ok && (!days || (cJSON_IsNumber(days) && days->valuedouble == (int)days->valuedouble &&
                              days->valuedouble >= 1 && days->valuedouble <= 7));
        int n = 0;
        for (const cJSON *c = a->child; c; c = c->next) n++;
        ok = ok && n == 1 + (days != NULL);
    } else if (ok) {
        ok = !strcmp(name, "now") && !a->child;
    }
    cJSON_Delete(a);
    return ok;
}

#endif
