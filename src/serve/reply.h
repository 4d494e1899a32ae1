/* serve/reply.h: a chat reply read into its parts as it comes: the model's reasoning (text/
 * reasoning.h), its answer, and its tool calls (text/toolcall.h). The server keeps one per chat
 * request that reads either; a stream asks after each piece what may go out, a JSON answer asks
 * once at the end. A pure object: no model, no sockets (tests/test_serve_tools.c drives it).
 *
 *   tm_reply r;
 *   tm_reply_init(&r, dialect, tools_json, think, opened, harmony);
 *   tm_reply_add(&r, prefix, strlen(prefix));       // a forced call's opening, already in the prompt
 *   while (piece) {
 *       tm_reply_add(&r, piece, n);
 *       tm_reply_delta(&r, &part);                   // stream: reasoning and content not yet sent
 *   }
 *   tm_reply_finish(&r, cut, seed);                  // the reply parsed: calls, ids
 *   tm_reply_rest(&r, &part);                        // stream: what is left, and the calls
 *   tm_reply_whole(&r, &part);                       // JSON: every part
 *   tm_reply_free(&r);
 *
 * Design block
 * ------------
 * The reply so far is kept whole (acc); each question is answered from it: the reasoning and
 * answer spans (tm_think_split), the answer's part that cannot begin a call
 * (tm_tool_safe_prefix, on the answer alone) and, at the end, the calls (tm_tool_parse, on the
 * answer alone, so a model that thinks before it calls has its calls read after the thinking).
 * rsent and csent are where the stream's reasoning and answer have been sent up to; both spans
 * only grow (their functions' invariants), so what a stream sends adds up to what the JSON
 * answer holds, up to the whitespace the tool parser trims before a call.
 *
 * A harmony reply (gpt-oss, text/harmony.h) is read by its own parser instead: its reasoning and
 * answer are the parser's buffers, which also only grow, so rsent and csent count their bytes
 * sent; at the end its calls are held to the tools (tm_tool_harmony_calls). */
#ifndef TM_SERVE_REPLY_H
#define TM_SERVE_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "serve/oai.h"
#include "text/harmony.h"
#include "text/reasoning.h"
#include "text/toolcall.h"

typedef struct tm_reply {
    const tm_tool_dialect *d;   /* tool calls read in this dialect, or NULL */
    const char *tools_json;     /* the request's tools (with d) */
    const tm_think_markers *think; /* reasoning split off in this family (NULL: none) */
    int opened;                 /* the prompt left a think block open */
    int harmony;                /* the reply is harmony: h reads it (think not NULL: analysis is reasoning) */
    tm_harmony h;
    char *acc;                  /* the reply so far [len] */
    size_t len, cap;
    size_t rsent, csent;        /* stream: acc sent up to, as reasoning and as content (harmony: h's buffers) */
    /* after tm_reply_finish */
    int finished;
    size_t r0, r1, c0;          /* the reasoning span, where the answer starts */
    tm_tool_calls calls;        /* the calls (with d), and the answer without them */
    tm_oai_tool_call *tv;       /* [calls.n] as the writer takes them */
    char (*ids)[40];            /* [calls.n] */
    const char *content;        /* the answer (without the calls) [content_len] */
    size_t content_len;
} tm_reply;

/* One step's parts: a view into the reply (valid until the next call) and the calls. */
typedef struct tm_reply_part {
    const char *content;
    size_t content_len;
    const char *reasoning;
    size_t reasoning_len;
    tm_oai_tool_calls tc;       /* none (n 0) but from tm_reply_rest / tm_reply_whole */
} tm_reply_part;

void tm_reply_init(tm_reply *r, const tm_tool_dialect *d, const char *tools_json, const tm_think_markers *think,
                   int opened, int harmony);
int tm_reply_add(tm_reply *r, const char *s, size_t n);          /* -1 when out of memory */
void tm_reply_delta(tm_reply *r, tm_reply_part *p);              /* marks it sent; "" for an empty part */
int tm_reply_finish(tm_reply *r, int cut, uint64_t seed);         /* -1 when out of memory */
void tm_reply_rest(tm_reply *r, tm_reply_part *p);
void tm_reply_whole(const tm_reply *r, tm_reply_part *p);
void tm_reply_free(tm_reply *r);

#endif
