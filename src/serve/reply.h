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
 *   tm_reply_rest(&r, &part);                        // stream: what is left, and the calls' pieces left
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
 * A stream's calls go out as pieces (tm_oai_call_delta: the first names the call, each carries its
 * arguments' next bytes). By default they all go at the end, whole, from tm_reply_rest: a reply read
 * freely may yet turn out not to be calls at all (text/toolcall.h: parsing is all or nothing). A
 * reply held to the calls' form by a grammar (a forced call, or auto's lazy grammar from the marker
 * on) cannot, so with tm_reply_stream_calls each step also reads the answer so far with
 * tm_tool_parse_partial and sends what it adds: a call once its name is read (its id fixed then),
 * then its arguments as their compact text grows. sc holds what went out of each call; the
 * partial reading's invariant (each call's arguments only grow, as a prefix of the whole call's)
 * makes the pieces add up to the JSON answer's calls, whose ids are the ones sent. A call that
 * max_tokens cuts short keeps the pieces it sent (the JSON answer drops it); finish "length".
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

/* what a stream sent of one call */
typedef struct tm_reply_call {
    char *name, *id;
    char *args;                 /* its arguments sent so far [sent] */
    size_t sent;
} tm_reply_call;

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
    int stream_calls;           /* tm_reply_stream_calls: the calls go out as they are written */
    uint64_t seed;              /* ... and their ids' seed */
    struct cJSON *tools;        /* ... and tools_json parsed, once */
    tm_reply_call *sc;          /* [n_sc] the calls the stream has begun */
    int n_sc;
    size_t cap_sc;
    tm_oai_call_delta *cd;      /* [n_cd] the last step's call pieces (views into sc and the reading) */
    int n_cd;
    size_t cap_cd;
    tm_tool_calls pc;           /* the last partial reading: its calls, and the one it ends inside */
    tm_tool_call pp;
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
    const tm_oai_call_delta *cd; /* a stream's call pieces [n_cd] (tm_reply_delta, tm_reply_rest) */
    int n_cd;
} tm_reply_part;

void tm_reply_init(tm_reply *r, const tm_tool_dialect *d, const char *tools_json, const tm_think_markers *think,
                   int opened, int harmony);
/* the calls stream as they are written (only for a reply a grammar holds to their form); seed: their ids' */
void tm_reply_stream_calls(tm_reply *r, uint64_t seed);
int tm_reply_add(tm_reply *r, const char *s, size_t n);          /* -1 when out of memory */
int tm_reply_delta(tm_reply *r, tm_reply_part *p);               /* marks it sent; "" for an empty part; -1 when
                                                                    out of memory */
int tm_reply_finish(tm_reply *r, int cut, uint64_t seed);         /* -1 when out of memory; seed: the calls' ids' (a
                                                                    stream's calls keep tm_reply_stream_calls's) */
int tm_reply_rest(tm_reply *r, tm_reply_part *p);                /* -1 when out of memory */
void tm_reply_whole(const tm_reply *r, tm_reply_part *p);
void tm_reply_free(tm_reply *r);

#endif
