/* tests/http_client.h: a minimal HTTP/1.1 client for the server's tests (test_serve.c,
 * test_serve_tools.c): one request per connection, chunked bodies, JSON and Server-Sent Events
 * read back; helpers to pick fields out of JSON by "a.b.0.c" paths. */
#ifndef TM_TESTS_HTTP_CLIENT_H
#define TM_TESTS_HTTP_CLIENT_H

#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

/* ---- a minimal HTTP/1.1 client ------------------------------------------------------- */

typedef struct http_res {
    int status;
    char *head;      /* status line + headers */
    char *body;      /* de-chunked */
    size_t body_len;
} http_res;

static inline void http_res_free(http_res *r)
{
    free(r->head);
    free(r->body);
    memset(r, 0, sizeof *r);
}

static inline int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct timeval tv = {20, 0}; /* a hung server fails the test instead of hanging it */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static inline int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static inline int send_request(int fd, const char *method, const char *path, const char *body, size_t body_len,
                        const char *extra_headers)
{
    char head[1024];
    int k = snprintf(head, sizeof head,
                     "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n%s%s"
                     "Content-Length: %zu\r\n\r\n",
                     method, path, body ? "Content-Type: application/json\r\n" : "", extra_headers ? extra_headers : "",
                     body ? body_len : 0);
    if (send_all(fd, head, (size_t)k)) return -1;
    return body && body_len ? send_all(fd, body, body_len) : 0;
}

/* Read to end of file; split head and body; undo chunked encoding. */
static inline int read_response(int fd, http_res *r)
{
    memset(r, 0, sizeof *r);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (n == cap) buf = realloc(buf, (cap *= 2) + 1);
        ssize_t k = recv(fd, buf + n, cap - n, 0);
        if (k <= 0) break;
        n += (size_t)k;
    }
    buf[n] = '\0';
    char *sep = strstr(buf, "\r\n\r\n");
    if (!sep || sscanf(buf, "HTTP/1.%*d %d", &r->status) != 1) {
        free(buf);
        return -1;
    }
    r->head = strndup(buf, (size_t)(sep - buf));
    const char *b = sep + 4, *end = buf + n;
    r->body = malloc((size_t)(end - b) + 1);
    if (strcasestr(r->head, "Transfer-Encoding: chunked")) {
        while (b < end) {
            char *e;
            unsigned long len = strtoul(b, &e, 16);
            const char *data = strstr(e, "\r\n");
            if (!data || len == 0) break;
            data += 2;
            if (data + len > end) len = (unsigned long)(end - data);
            memcpy(r->body + r->body_len, data, len);
            r->body_len += len;
            b = data + len + 2;
        }
    } else {
        memcpy(r->body, b, (size_t)(end - b));
        r->body_len = (size_t)(end - b);
    }
    r->body[r->body_len] = '\0';
    free(buf);
    return 0;
}

static inline int http(int port, const char *method, const char *path, const char *body, const char *headers, http_res *r)
{
    memset(r, 0, sizeof *r);
    int fd = connect_to(port);
    if (fd < 0) return -1;
    int rc = send_request(fd, method, path, body, body ? strlen(body) : 0, headers);
    if (rc == 0) rc = read_response(fd, r);
    close(fd);
    return rc;
}

/* status and JSON body of one exchange; NULL if the body is not JSON */
static inline cJSON *http_json(int port, const char *method, const char *path, const char *body, const char *headers,
                        int *status)
{
    http_res r;
    *status = -1;
    if (http(port, method, path, body, headers, &r) != 0) return NULL;
    *status = r.status;
    cJSON *j = cJSON_Parse(r.body);
    http_res_free(&r);
    return j;
}

static inline const char *jstr(const cJSON *j, const char *path)
{
    /* path: "a.b.0.c" (strtok_r: client threads call this at once) */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *v = j;
    for (char *sv = NULL, *t = strtok_r(buf, ".", &sv); t && v; t = strtok_r(NULL, ".", &sv))
        v = (*t >= '0' && *t <= '9') ? cJSON_GetArrayItem(v, atoi(t)) : cJSON_GetObjectItemCaseSensitive(v, t);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static inline double jnum(const cJSON *j, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *v = j;
    for (char *sv = NULL, *t = strtok_r(buf, ".", &sv); t && v; t = strtok_r(NULL, ".", &sv))
        v = (*t >= '0' && *t <= '9') ? cJSON_GetArrayItem(v, atoi(t)) : cJSON_GetObjectItemCaseSensitive(v, t);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* An error response: status, and the OpenAI error shape with this type. */
static inline void check_error(int port, const char *method, const char *path, const char *body, int want_status,
                        const char *want_param, const char *what)
{
    int status;
    cJSON *j = http_json(port, method, path, body, NULL, &status);
    CHECKF(status == want_status, "%s: status %d, want %d", what, status, want_status);
    const char *msg = jstr(j, "error.message"), *type = jstr(j, "error.type");
    CHECKF(msg && msg[0] && type && type[0], "%s: no OpenAI error body", what);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    CHECKF(e && cJSON_GetObjectItemCaseSensitive(e, "param") && cJSON_GetObjectItemCaseSensitive(e, "code"),
           "%s: error lacks param / code", what);
    if (want_param)
        CHECKF(jstr(j, "error.param") && !strcmp(jstr(j, "error.param"), want_param), "%s: param %s, want %s", what,
               jstr(j, "error.param") ? jstr(j, "error.param") : "null", want_param);
    cJSON_Delete(j);
}

/* ---- SSE --------------------------------------------------------------------------------- */

typedef struct sse {
    char text[8192];
    int n_events, done_last, role_first, finish_events;
    int n_bad;       /* events that are not "data: " + JSON or [DONE] */
    char finish[16];
    int usage_completion;
} sse;

static inline void parse_sse(const char *body, int chat, sse *s)
{
    memset(s, 0, sizeof *s);
    s->usage_completion = -1;
    const char *p = body;
    while (*p) {
        const char *e = strstr(p, "\n\n");
        if (!e) break;
        if (strncmp(p, "data: ", 6) != 0) {
            s->n_bad++;
            p = e + 2;
            continue;
        }
        char *ev = strndup(p + 6, (size_t)(e - p - 6));
        s->n_events++;
        s->done_last = !strcmp(ev, "[DONE]");
        if (!s->done_last) {
            cJSON *j = cJSON_Parse(ev);
            if (!j) s->n_bad++;
            const char *t = jstr(j, chat ? "choices.0.delta.content" : "choices.0.text");
            if (t) strncat(s->text, t, sizeof s->text - strlen(s->text) - 1);
            if (s->n_events == 1 && chat) s->role_first = jstr(j, "choices.0.delta.role") != NULL;
            const char *f = jstr(j, "choices.0.finish_reason");
            if (f) {
                s->finish_events++;
                snprintf(s->finish, sizeof s->finish, "%s", f);
            }
            if (cJSON_GetObjectItemCaseSensitive(j, "usage"))
                s->usage_completion = (int)jnum(j, "usage.completion_tokens");
            cJSON_Delete(j);
        }
        free(ev);
        p = e + 2;
    }
    if (*p) s->n_bad++; /* a partial event at the end */
}

/* chat_answer: POST body to /v1/chat/completions as JSON (stream 0) or Server-Sent Events; the
 * answer's content and finish_reason copied into content [n] and finish [16] ("" if missing) */
static inline void chat_answer(int port, const char *body, int stream, char *content, size_t n, char *finish)
{
    content[0] = finish[0] = 0;
    if (!stream) {
        int status = 0;
        cJSON *j = http_json(port, "POST", "/v1/chat/completions", body, NULL, &status);
        CHECK_EQ_INT(status, 200);
        const char *c = jstr(j, "choices.0.message.content"), *f = jstr(j, "choices.0.finish_reason");
        snprintf(content, n, "%s", c ? c : "");
        snprintf(finish, 16, "%s", f ? f : "");
        cJSON_Delete(j);
        return;
    }
    http_res hr;
    static sse ev;
    CHECK(http(port, "POST", "/v1/chat/completions", body, NULL, &hr) == 0);
    parse_sse(hr.body ? hr.body : "", 1, &ev);
    snprintf(content, n, "%s", ev.text);
    snprintf(finish, 16, "%s", ev.finish);
    http_res_free(&hr);
}

#endif
