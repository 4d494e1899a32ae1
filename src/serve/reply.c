/* serve/reply.c: a chat reply's reasoning, answer and tool calls (serve/reply.h has the design
 * block). */
#include "serve/reply.h"

#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "text/harmony.h"

void tm_reply_init(tm_reply *r, const tm_tool_dialect *d, const char *tools_json, const tm_think_markers *think,
                   int opened, int harmony)
{
    memset(r, 0, sizeof *r);
    r->d = d;
    r->tools_json = tools_json;
    r->think = think;
    r->opened = think && opened;
    r->harmony = harmony;
    if (harmony) tm_harmony_init(&r->h, think != NULL);
}

int tm_reply_add(tm_reply *r, const char *s, size_t n)
{
    if (tm_grow((void **)&r->acc, &r->cap, r->len + n + 1, 1)) return -1;
    if (n) memcpy(r->acc + r->len, s, n);
    r->len += n;
    r->acc[r->len] = '\0';
    return 0;
}

static void spans(const tm_reply *r, int final, tm_think_span *s)
{
    if (r->think) tm_think_split(r->think, r->acc ? r->acc : "", r->len, r->opened, final, s);
    else *s = (tm_think_span){0, 0, 0, r->len};
}

/* harmony: the parser's buffers as the reasoning and answer (their ends only grow) */
static void harmony_delta(tm_reply *r, tm_reply_part *p)
{
    tm_harmony *h = &r->h;
    if (tm_harmony_feed(h, r->acc ? r->acc : "", r->len, 0)) return; /* out of memory: tm_reply_finish says */
    if (h->rlen > r->rsent) {
        p->reasoning = h->reasoning + r->rsent;
        p->reasoning_len = h->rlen - r->rsent;
        r->rsent = h->rlen;
    }
    if (h->clen > r->csent) {
        p->content = h->content + r->csent;
        p->content_len = h->clen - r->csent;
        r->csent = h->clen;
    }
}

void tm_reply_delta(tm_reply *r, tm_reply_part *p)
{
    memset(p, 0, sizeof *p);
    p->content = p->reasoning = "";
    if (r->harmony) {
        harmony_delta(r, p);
        return;
    }
    tm_think_span s;
    spans(r, 0, &s);
    size_t cend = s.c1;
    if (r->d && s.c1 > s.c0) cend = s.c0 + tm_tool_safe_prefix(r->d, r->acc + s.c0, s.c1 - s.c0);
    size_t from = r->rsent > s.r0 ? r->rsent : s.r0;
    if (s.r1 > from) {
        p->reasoning = r->acc + from;
        p->reasoning_len = s.r1 - from;
        r->rsent = s.r1;
    }
    from = r->csent > s.c0 ? r->csent : s.c0;
    if (cend > from) {
        p->content = r->acc + from;
        p->content_len = cend - from;
        r->csent = cend;
    }
}

int tm_reply_finish(tm_reply *r, int cut, uint64_t seed)
{
    if (!r->acc && tm_reply_add(r, "", 0)) return -1;
    tm_err err = {0};
    r->finished = 1;
    if (r->harmony) { /* the reasoning and answer are the parser's; its calls held to the tools */
        if (tm_harmony_feed(&r->h, r->acc, r->len, 1) ||
            tm_tool_harmony_calls(&r->h, r->d ? r->tools_json : NULL, cut, &r->calls, &err) != TM_OK)
            return -1;
        r->r0 = 0, r->r1 = r->h.rlen, r->c0 = 0;
    } else {
        tm_think_span s;
        spans(r, 1, &s);
        r->r0 = s.r0, r->r1 = s.r1, r->c0 = s.c0;
        r->content = r->acc + s.c0;
        r->content_len = s.c1 - s.c0;
        if (!r->d) return 0;
        if (tm_tool_parse(r->d, r->acc + s.c0, s.c1 - s.c0, r->tools_json, cut, &r->calls, &err) != TM_OK) return -1;
    }
    r->content = r->calls.content;
    r->content_len = r->calls.content_len;
    if (!r->calls.n) return 0;
    r->tv = calloc((size_t)r->calls.n, sizeof *r->tv);
    r->ids = calloc((size_t)r->calls.n, sizeof *r->ids);
    if (!r->tv || !r->ids) return -1;
    for (int i = 0; i < r->calls.n; i++) {
        tm_tool_call_id(r->d, seed + (uint64_t)i * 0x9E3779B97F4A7C15ull, r->ids[i], sizeof r->ids[i]);
        const char *id = r->calls.v[i].id; /* the reply's own id (Kimi K2's "functions.f:0") where it is new */
        for (int j = 0; id && j < i; j++)
            if (!strcmp(id, r->tv[j].id)) id = NULL;
        r->tv[i] = (tm_oai_tool_call){id ? id : r->ids[i], r->calls.v[i].name, r->calls.v[i].arguments};
    }
    return 0;
}

/* where the reasoning span [r0, r1) lies: in the reply, or (harmony) the parser's buffer */
static const char *reasoning_base(const tm_reply *r)
{
    return r->harmony ? r->h.reasoning : r->acc;
}

void tm_reply_whole(const tm_reply *r, tm_reply_part *p)
{
    memset(p, 0, sizeof *p);
    p->content = r->content ? r->content : "";
    p->content_len = r->content_len;
    const char *rb = reasoning_base(r);
    p->reasoning = rb ? rb + r->r0 : "";
    p->reasoning_len = r->r1 - r->r0;
    p->tc = (tm_oai_tool_calls){r->tv, r->tv ? r->calls.n : 0};
}

void tm_reply_rest(tm_reply *r, tm_reply_part *p)
{
    tm_reply_whole(r, p);
    size_t from = r->rsent > r->r0 ? r->rsent : r->r0;
    p->reasoning = r->r1 > from ? reasoning_base(r) + from : "";
    p->reasoning_len = r->r1 > from ? r->r1 - from : 0;
    /* the answer streamed so far is its start (the parse keeps the text before a call as it is) */
    size_t done = r->csent > r->c0 ? r->csent - r->c0 : 0;
    if (done > p->content_len) done = p->content_len;
    p->content += done;
    p->content_len -= done;
    r->rsent = r->r1;
    r->csent = r->c0 + r->content_len;
}

void tm_reply_free(tm_reply *r)
{
    free(r->acc);
    if (r->harmony) tm_harmony_free(&r->h);
    tm_tool_calls_free(&r->calls);
    free(r->tv);
    free(r->ids);
    memset(r, 0, sizeof *r);
}
