/* runtime/session.h: engines bound to a model, the KV caches, and the
 * generation of one request along a route.
 *
 *   tm_session *s;
 *   tm_session_new(&s, rm, &opts, &err);
 *   tm_session_generate(s, &req, on_text, ud, &stats, &err);
 *   tm_session_free(s);
 *
 * Design block: the request lifecycle (one request, as tm_session_generate
 * runs it; the concurrent scheduler drives the same steps per request)
 *
 *   QUEUED -> ROUTED -> PREFILLING (chunk i of n) -> HANDOFF -> DECODING -> DONE
 *      \________\___________\______________________\___________\-> CANCELLED | FAILED
 *
 *   | transition            | function                      |
 *   | QUEUED -> ROUTED      | route_pick (router cost model) |
 *   | ROUTED -> PREFILLING  | seq_reserve + plan_chunks     |
 *   | chunk i -> i+1        | engine->prefill               |
 *   | PREFILLING -> HANDOFF | bridge (stateless) or owner flip (stateful) |
 *   | HANDOFF -> DECODING   | tm_bridge_finish              |
 *   | DECODING -> DONE      | EOS, stop string, max_tokens   |
 *   | any -> CANCELLED      | callback returns nonzero; pages released |
 *   | any -> FAILED         | engine error; pages released   |
 *
 * Invariants
 *  1. A request's KV pages are released on every exit path (DONE, CANCELLED,
 *     FAILED): tm_kv_seq_release is called once, unconditionally, at the end.
 *  2. Decode reads a position only after the hand-off made DECODE its owner.
 *  3. Routes: hybrid = prefill engine (prefill weights) -> bridge -> decode
 *     engine (decode weights); prefill-only = the prefill engine does both
 *     (its weights, its KV written straight into the decode cache);
 *     decode-only = the decode engine does both.
 */
#ifndef TM_RUNTIME_SESSION_H
#define TM_RUNTIME_SESSION_H

#include "core/status.h"
#include "runtime/rt_model.h"
#include "tandem.h"

typedef struct tm_session tm_session;

int tm_session_new(tm_session **out, tm_rt_model *rm, const tandem_session_opts *o, tm_err *err);
void tm_session_free(tm_session *s);

/* Submit a request to the scheduler (sched.c) and return at once; the
 * workers stream its text to on_text (from their threads). tm_req_wait
 * blocks until it ends, fills stats and frees the request. */
typedef struct tm_req tm_req;
int tm_session_submit(tm_session *s, const tandem_request *r, tandem_text_fn on_text, void *ud, tm_req **out,
                      tm_err *err);
void tm_req_cancel(tm_req *q);
int tm_req_wait(tm_req *q, tandem_stats *stats, tm_err *err);

/* submit + wait */
int tm_session_generate(tm_session *s, const tandem_request *r, tandem_text_fn on_text, void *ud,
                        tandem_stats *stats, tm_err *err);

/* Names of the engines the session bound (for reports). */
const char *tm_session_prefill_engine(const tm_session *s);
const char *tm_session_decode_engine(const tm_session *s);

/* tm_session_score: run ids through `route` as a generation would (prefill
 * the first n_prefill ids, hand off, then decode the rest one at a time) and
 * write the logits after every position from n_prefill-1 on:
 * logits [n - n_prefill + 1][V]. For perplexity / KL of a route and tests. */
int tm_session_score(tm_session *s, const int32_t *ids, int n, int n_prefill, tandem_route route,
                     float *logits, tm_err *err);

#endif
