/* serve/reply.c: a chat reply's reasoning, answer and tool calls (serve/reply.h has the design
 * block). */
#include "serve/reply.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

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

void tm_reply_stream_calls(tm_reply *r, uint64_t seed)
{
    r->stream_calls = r->d != NULL;
    r->seed = seed;
    /* read after every token: parsed once (unparsable, or out of memory: no call reads until the end, whole) */
    if (r->stream_calls && !r->tools) r->tools = r->tools_json ? cJSON_Parse(r->tools_json) : NULL;
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

/* ---- the calls' pieces ---- */

/* n less a UTF-8 character that s [n] ends inside (a piece goes out whole characters only) */
static size_t utf8_whole(const char *s, size_t n)
{
    size_t k = n;
    while (k > 0 && n - k < 3 && ((unsigned char)s[k - 1] & 0xC0) == 0x80) k--;
    if (k == 0) return n;
    unsigned char c = (unsigned char)s[k - 1];
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > 1 && n - (k - 1) < need ? k - 1 : n;
}

/* is id taken by one of the calls sc [n]? */
static int id_taken(const char *id, const tm_reply_call *sc, int n)
{
    for (int j = 0; j < n; j++)
        if (!strcmp(id, sc[j].id)) return 1;
    return 0;
}

/* The piece that takes what went out of call i to name with arguments args (whole: the call is whole, else
 * its arguments so far) into r->cd, if there is anything new: the call's first piece fixes its id (id, or
 * the one it wrote, text_id, unless an earlier call has that, or the server's from the seed). A reading
 * that disagrees with what went out (the partial reading's invariant says it cannot) adds nothing. -1:
 * out of memory. */
static int call_piece(tm_reply *r, int i, const char *name, const char *args, const char *text_id, const char *id,
                      int whole)
{
    if (i > r->n_sc) return 0;
    int first = i == r->n_sc;
    if (first) {
        char buf[40];
        if (!id && text_id && !id_taken(text_id, r->sc, i)) id = text_id;
        if (!id) tm_tool_call_id(r->d, r->seed + (uint64_t)i * 0x9E3779B97F4A7C15ull, buf, sizeof buf), id = buf;
        if (tm_grow((void **)&r->sc, &r->cap_sc, (size_t)i + 1, sizeof *r->sc)) return -1;
        tm_reply_call *c = &r->sc[i];
        *c = (tm_reply_call){strdup(name), strdup(id), NULL, 0};
        r->n_sc++;
        if (!c->name || !c->id) return -1;
    }
    tm_reply_call *c = &r->sc[i];
    if (strcmp(c->name, name) || strncmp(args, c->args ? c->args : "", c->sent)) return 0;
    size_t k = strlen(args);
    if (!whole) k = utf8_whole(args, k);
    if (k <= c->sent && !first) return 0;
    if (k > c->sent) {
        char *a = realloc(c->args, k + 1);
        if (!a) return -1;
        memcpy(a + c->sent, args + c->sent, k - c->sent);
        a[k] = '\0';
        c->args = a;
    }
    if (tm_grow((void **)&r->cd, &r->cap_cd, (size_t)r->n_cd + 1, sizeof *r->cd)) return -1;
    r->cd[r->n_cd++] = (tm_oai_call_delta){i, first ? c->id : NULL, first ? c->name : NULL,
                                           c->args ? c->args + c->sent : "", k > c->sent ? k - c->sent : 0};
    if (k > c->sent) c->sent = k;
    return 0;
}

/* A stream's step (tm_reply_stream_calls): the answer so far, text [n], read for calls, and the pieces of
 * what that adds into r->cd. -1: out of memory. */
static int stream_pieces(tm_reply *r, const char *text, size_t n)
{
    tm_err err = {0};
    tm_tool_calls_free(&r->pc);
    tm_tool_call_free(&r->pp);
    if (tm_tool_parse_partial(r->d, text, n, r->tools, &r->pc, &r->pp, &err) != TM_OK) return -1;
    for (int i = 0; i < r->pc.n; i++)
        if (call_piece(r, i, r->pc.v[i].name, r->pc.v[i].arguments, r->pc.v[i].id, NULL, 1)) return -1;
    if (r->pp.name && call_piece(r, r->pc.n, r->pp.name, r->pp.arguments, r->pp.id, NULL, 0)) return -1;
    return 0;
}

int tm_reply_delta(tm_reply *r, tm_reply_part *p)
{
    memset(p, 0, sizeof *p);
    p->content = p->reasoning = "";
    r->n_cd = 0;
    if (r->harmony) {
        harmony_delta(r, p);
        if (r->stream_calls && stream_pieces(r, r->acc ? r->acc : "", r->len)) return -1;
        p->cd = r->cd;
        p->n_cd = r->n_cd;
        return 0;
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
    if (r->stream_calls && s.c1 > s.c0 && stream_pieces(r, r->acc + s.c0, s.c1 - s.c0)) return -1;
    p->cd = r->cd;
    p->n_cd = r->n_cd;
    return 0;
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
    if (r->stream_calls) seed = r->seed;
    for (int i = 0; i < r->calls.n; i++) {
        tm_tool_call_id(r->d, seed + (uint64_t)i * 0x9E3779B97F4A7C15ull, r->ids[i], sizeof r->ids[i]);
        const char *id = r->calls.v[i].id; /* the reply's own id (Kimi K2's "functions.f:0") where it is new */
        for (int j = 0; id && j < i; j++)
            if (!strcmp(id, r->tv[j].id)) id = NULL;
        if (i < r->n_sc) id = r->sc[i].id; /* the id its stream's first piece gave it */
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

int tm_reply_rest(tm_reply *r, tm_reply_part *p)
{
    tm_reply_whole(r, p);
    r->n_cd = 0;
    for (int i = 0; i < p->tc.n; i++) /* what the calls have left to send (all of them where none streamed) */
        if (call_piece(r, i, p->tc.v[i].name, p->tc.v[i].arguments, NULL, p->tc.v[i].id, 1)) return -1;
    p->cd = r->cd;
    p->n_cd = r->n_cd;
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
    return 0;
}

void tm_reply_free(tm_reply *r)
{
    free(r->acc);
    if (r->harmony) tm_harmony_free(&r->h);
    tm_tool_calls_free(&r->calls);
    free(r->tv);
    free(r->ids);
    for (int i = 0; i < r->n_sc; i++) free(r->sc[i].name), free(r->sc[i].id), free(r->sc[i].args);
    free(r->sc);
    free(r->cd);
    tm_tool_calls_free(&r->pc);
    tm_tool_call_free(&r->pp);
    cJSON_Delete(r->tools);
    memset(r, 0, sizeof *r);
}
