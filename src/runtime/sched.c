/* runtime/sched.c: the scheduler. A prefill worker and a decode worker run at
 * the same time on disjoint core sets, so a new prompt never stalls the
 * streams that are already generating.
 *
 * Design block
 * ------------
 *   submit -> [queue] -> prefill worker (prefill cores) -> [join] -> decode worker (decode cores)
 *                        chunked prefill, bridge                    continuous batching: sequences
 *                        hand-off, first token                      join and leave at every step
 *
 * Request lifecycle (req->state):
 *
 *   QUEUED -> ROUTED -> PREFILLING -> HANDOFF -> DECODING -> DONE
 *      \________\___________\____________\___________\-----> CANCELLED | FAILED
 *
 *   | transition              | where                          | function          |
 *   | (new) -> QUEUED         | caller thread                  | tm_session_submit |
 *   | QUEUED -> ROUTED        | prefill worker                 | tm_route_pick     |
 *   | ROUTED -> PREFILLING    | prefill worker (decode worker for decode-only) | tm_prefill_route |
 *   | PREFILLING -> HANDOFF   | bridge thread, layer by layer  | tm_bridge_layer_done |
 *   | HANDOFF -> DECODING     | prefill worker: first token, push to join | req_take_token, join_push |
 *   | HANDOFF -> DONE         | prefill worker (decode worker for decode-only): the prompt's scores and embedding given, nothing to generate (max_tokens none) | req_prefilled |
 *   | DECODING -> DONE        | decode worker: EOS, stop, length (or llama.cpp's n_indent, t_max_predict_ms) | req_take_token |
 *   | any -> CANCELLED        | the worker that holds it sees req->cancel | req_finish |
 *   | any -> FAILED           | an engine error                 | req_finish        |
 *
 * Invariants
 *  1. A request is held by exactly one thread at a time: the queue, the
 *     prefill worker, the join list, or the decode worker. Moves between
 *     them happen under sc->mu (which orders everything the request holds).
 *  2. req_finish releases every KV page of the request, in every state (a
 *     DONE request's whole pages are published first where the session keeps
 *     a prefix cache, below: released, they stay cached while idle).
 *  3. Decode never waits on an unrelated prefill: the two workers share no
 *     lock during compute; the decode worker takes sc->mu only to move
 *     requests in and out of its batch.
 *  4. Idle lending: a side runs on every core only while the other side has
 *     no work. The prefill side raises pre_busy before it starts and waits
 *     for dec_using_all to drop (at most one decode step); the decode side
 *     raises dec_using_all and re-checks pre_busy (Dekker), so the two never
 *     both use the shared cores.
 *  5. The stall bound (tm_sched_lend_policy): the prefill side borrows while
 *     nothing decodes, which slows no one. The decode side borrows only where
 *     handing the cores back when a prompt arrives keeps the running streams'
 *     time per token within opts.max_stall (lend_dec, its calibrated slowdown
 *     on its own cores beside a running prefill, is small enough), or where
 *     no prompt can arrive while it decodes (max_seqs 1: run, chat, bench's
 *     one-request tests), or where both engines share one GPU in two parts
 *     (gpu_split): the "cores" are then the prefill's part of the SMs, which
 *     come back as soon as the borrowing step ends (each step is one call on
 *     one stream), with nothing to migrate.
 *  6. A request that needs every prompt row (its scores: on_row_logits; its
 *     embedding: on_row_hidden) takes nothing from the prefix cache and, where
 *     the router picks, runs on the prefill side (rows_route), so one prompt
 *     gives the same numbers whatever the load.
 */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/threadpool.h"
#include "model/model.h"
#include "runtime/lookup.h"
#include "runtime/session-impl.h"
#include "text/grammar.h"
#include "text/json_gate.h"
#include "text/json_schema.h"
#include "text/sampler.h"
#include "text/tokenizer.h"
#include "text/vocab_trie.h"

_Static_assert(TM_LOGPROBS_MAX == TANDEM_MAX_LOGPROBS, "the sampler reports what the API promises");

enum { REQ_QUEUED, REQ_ROUTED, REQ_PREFILLING, REQ_HANDOFF, REQ_DECODING, REQ_DONE, REQ_CANCELLED, REQ_FAILED };

struct tm_req {
    tm_session *s;
    int32_t *ids;              /* [n_prompt] */
    int n_prompt, max_new;
    tandem_route route;
    tm_router_pred pred;       /* the router's prediction (--explain compares it with the actual) */
    tm_sampler *smp;
    tm_stop *stop;
    tm_indent indent;          /* request.n_indent: where the released text stops (text/sampler.h) */
    double t_max_predict;      /* request.t_max_predict_ms in seconds (0: no limit) */
    tm_detok_stream *ds;
    int32_t keep[TM_DETOK_KEEP]; /* request.keep_special's ids [n_keep]: kept in the text, a grammar may write them */
    int n_keep;
    tandem_text_fn on_text;
    void *ud;
    struct tandem_logprob_cb on_lp;   /* request.on_logprob: NULL or called per token */
    int32_t *bias_ids;         /* [n_bias] request.logit_bias, copied */
    float *bias;
    int n_bias;
    struct tm_vocab_trie *trie;/* constrained output (json_object, json_schema, grammar): the model's trie, or NULL */
    tm_jsm jsm;                /* JSON mode (gram NULL): the automaton after the tokens so far */
    tm_grammar *gram;          /* json_schema, grammar: the compiled grammar, or NULL */
    tm_gmatch *gm;             /* its matcher after the tokens so far */
    char *trig;                /* request.grammar_trigger: the matcher holds only once the output has it */
    size_t trig_len;
    char *tail;                /* while waiting for it: the window of the output's bytes the state
                                  (skip) looks through, the new ones appended (req_trigger) */
    size_t tail_len;
    int waiting;               /* 1: trig not yet written (the output is free); 2: the grammar refused what
                                  followed it, or (anchored) the output starts otherwise (free for good) */
    int anchored;              /* request.grammar_trigger_anchored: trig counts only at the output's start */
    char *skip_open, *skip_close; /* request.grammar_skip_open / _close, or NULL: the block in which trig is not
                                  looked for */
    size_t so_len, sc_len;
    int block;                 /* while waiting, where the output stands about that block (enum trig_block) */
    int lp_n;                  /* alternatives per token */
    float *lp_raw;             /* [V] the step's logits before the sampler's penalties (on_lp only) */
    struct tandem_prompt_logprob_cb on_plp; /* request.on_prompt_logprob: NULL or called per prompt token */
    int plp_n;                 /* its alternatives per token */
    tandem_logprob *plp;       /* [n_prompt - 1]: prompt token i + 1's, from the prefill's row i (plp_row) */
    float *emb;                /* request.embedding [D], written once prefilled (emb_done), or NULL */
    double *emb_acc;           /* [D] the rows pooled so far (emb_row): their sum (mean), or the row picked */
    int emb_pool, emb_norm;    /* TANDEM_POOL_* (not DEFAULT), request.embed_normalize */
    int state;
    atomic_int cancel;
    tm_kv_seq seq, sseq;       /* decode pages, staging pages */
    int pos;                   /* position of next_tok */
    int32_t next_tok;          /* the token the next decode step feeds */
    int32_t *fed;              /* [max_new] the tokens decode steps fed, at positions n_prompt.. (prefix cache,
                                  prompt lookup) */
    int n_drafted, n_accepted; /* prompt lookup: drafted tokens, and those kept (spec_step) */
    int n_cached;              /* prompt positions taken from the prefix cache */
    int n_gen;
    double t_submit, t_first, t_prefill, t_handoff, t_last, t_done;
    double gemm[2];            /* the prefill's GEMM-kernel seconds and operations (tm_prefill_route) */
    double *itl;               /* [max_new] inter-token latencies */
    int n_itl;
    const char *finish;
    tm_err err;
    int done;
    pthread_cond_t done_cv;
    struct tm_req *next;
};

typedef struct tm_sched {
    tm_session *s;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;    /* prefill worker: queue non-empty, or stop */
    pthread_cond_t join_cv;    /* decode worker: join non-empty, or stop */
    pthread_cond_t room_cv;    /* prefill worker: a decode slot freed */
    tm_req *q_head, *q_tail;   /* QUEUED */
    tm_req *join_head, *join_tail; /* handed off, not yet in the batch */
    int n_decoding;            /* in join + active */
    int stop;
    pthread_t pre_thread, dec_thread;
    int threads_started;
    float *batch_logits;       /* [max_batch][V], from the decode engine's host_alloc where it has one */
    void (*logits_free)(void *); /* and its free */
} tm_sched;

static void pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* best effort */
}

/* ---- request helpers ------------------------------------------------------------ */

/* Hand text the stop matcher released to on_text, up to where request.n_indent cuts it (which
 * q->indent.cut then says). */
static void req_emit(tm_req *q, const char *text, size_t len, int32_t tok)
{
    len = tm_indent_scan(&q->indent, text, len);
    if (len && q->on_text && q->on_text(q->ud, text, len, tok)) atomic_store(&q->cancel, 1);
}

/* Emit what the detokenizer and the stop matcher hold back. */
static void req_flush(tm_req *q)
{
    char *piece = NULL;
    size_t plen = 0, elen = 0;
    const char *emit;
    tm_err e = {0};
    if (tm_detok_stream_flush(q->ds, &piece, &plen, &e) == TM_OK && plen) {
        tm_stop_feed(q->stop, piece, plen, &emit, &elen);
        req_emit(q, emit, elen, -1);
    }
    free(piece);
    tm_stop_flush(q->stop, &emit, &elen);
    req_emit(q, emit, elen, -1);
}

/* The state a request that req_take_token finished ends in: cancelled, failed (q->err says why)
 * or done. */
static int req_end_state(tm_req *q)
{
    if (atomic_load(&q->cancel)) return REQ_CANCELLED;
    return q->finish && !strcmp(q->finish, "error") ? REQ_FAILED : REQ_DONE;
}

static int req_fail(tm_req *q, int rc, const char *what)
{
    tm_errf(&q->err, rc, "%s", what);
    req_flush(q);
    q->finish = "error";
    return 1;
}

/* Constrained output (json_object, json_schema, grammar): logits [V] := -inf for every token that
 * would break it. End-of-sequence ids: allowed only where a grammar's text is a whole match (JSON
 * mode's and a schema's requests end as the value closes; a non-special EOS could otherwise end
 * it inside a string). Returns 1 (the request failed) or 0. */
static int req_constrain(tm_req *q, float *logits)
{
    const tm_rt_model *rm = q->s->rm;
    float keep[16];
    int eos_ok = q->gm && tm_gmatch_accepting(q->gm), n_eos = rm->n_eos < 16 ? rm->n_eos : 16;
    for (int i = 0; i < n_eos; i++) {
        int32_t id = rm->eos_ids[i];
        keep[i] = id >= 0 && id < rm->decode->V ? logits[id] : -INFINITY;
    }
    float kept[TM_DETOK_KEEP];
    for (int i = 0; i < q->n_keep; i++) kept[i] = logits[q->keep[i]];
    int rc = q->gm ? tm_gmatch_mask(q->gm, q->trie, logits) : tm_json_mask(q->trie, &q->jsm, logits);
    if (rc) return req_fail(q, rc, rc == TM_E_LIMIT ? "constrained output: the grammar needs more states than "
                                                      "the matcher keeps at this point"
                                                    : "constrained output: out of memory");
    for (int i = 0; q->gm && i < q->n_keep; i++) { /* a kept special token (not in the trie) where its text fits */
        const char *t = tm_tok_id_to_piece(q->s->rm->tok, q->keep[i]);
        if (t && tm_gmatch_would_take(q->gm, t, strlen(t)) > 0) logits[q->keep[i]] = kept[i];
    }
    for (int i = 0; i < n_eos; i++) {
        int32_t id = rm->eos_ids[i];
        if (id >= 0 && id < rm->decode->V) logits[id] = eos_ok ? keep[i] : -INFINITY;
    }
    return 0;
}

/* req_closed: the constrained output is complete: JSON mode's object closed, or a grammar's text a
 * whole match that nothing may extend */
static int req_closed(const tm_req *q)
{
    if (q->waiting) return 0;
    if (q->gm) return tm_gmatch_accepting(q->gm) && !tm_gmatch_can_continue(q->gm);
    return q->trie && tm_jsm_done(&q->jsm);
}

/* the text of tok where it is one of the request's kept special tokens (request.keep_special), else NULL */
static const char *req_kept_text(const tm_req *q, int32_t tok)
{
    for (int i = 0; i < q->n_keep; i++)
        if (q->keep[i] == tok) return tm_tok_id_to_piece(q->s->rm->tok, tok);
    return NULL;
}

/* A lazy grammar (request.grammar_trigger) waits for its trigger, looking through a window of the
 * output (tail). Where the request names a block to skip (grammar_skip_open / _close: a reasoning
 * model's thinking, which may name the trigger), the wait first follows text/reasoning.h's rules:
 * the output opens the block if, past leading whitespace, it starts with skip_open (or at once where
 * skip_open is "": the prompt left it open), and the trigger is looked for only after the first
 * skip_close; an output that does not open it is looked through from its start.
 *
 *   BLOCK_DECIDE --past whitespace, skip_open whole--> BLOCK_IN --skip_close--> BLOCK_PAST
 *        \--------past whitespace, not skip_open's start (the window kept)------^
 *   (skip_open "": BLOCK_IN at submit; no block: BLOCK_PAST)
 *
 *   | skip         | tail holds                                  | looked for           |
 *   | BLOCK_DECIDE | the output so far: whitespace (its last     | skip_open, or where  |
 *   |              | trig_len - 1 bytes) and a piece of skip_open | the text leaves it   |
 *   | BLOCK_IN     | the last sc_len - 1 bytes and the new ones  | skip_close           |
 *   | BLOCK_PAST   | the last trig_len - 1 bytes and the new ones | trig                 |
 *
 * A state that decides hands the next the bytes past the point decided (the whole window where
 * the output leaves skip_open: a trigger may start in its whitespace, or in a piece of skip_open it
 * shares), so one token's text may pass through every state.
 *
 * An anchored trigger (grammar_trigger_anchored: a bare call, which has no marker) counts only
 * where BLOCK_PAST's window, the output from its start or from just past the block's close, starts
 * with it past whitespace (trig_anchored): the window then holds that whitespace, dropped as it
 * comes, and a piece of trig; a byte that leaves trig frees the output for good. */
enum trig_block { BLOCK_PAST, BLOCK_DECIDE, BLOCK_IN };

/* (text/reasoning.c's whitespace) */
static int trig_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* the window loses its first n bytes */
static void tail_drop(tm_req *q, size_t n)
{
    memmove(q->tail, q->tail + n, q->tail_len - n);
    q->tail_len -= n;
    q->tail[q->tail_len] = '\0';
}

/* BLOCK_DECIDE: does the window open the block, leave it, or not tell yet? An undecided window's
 * leading whitespace is cut to the last trig_len - 1 bytes, those a trigger that goes on past it
 * may start in; a trigger all whitespace, already in it, keeps it from its first place. */
static void trig_decide(tm_req *q)
{
    size_t p = 0;
    while (p < q->tail_len && trig_ws(q->tail[p])) p++;
    size_t k = q->tail_len - p < q->so_len ? q->tail_len - p : q->so_len;
    if (memcmp(q->tail + p, q->skip_open, k)) {
        q->block = BLOCK_PAST; /* no block: the whole window is looked through */
    } else if (k == q->so_len) {
        tail_drop(q, p + q->so_len);
        q->block = BLOCK_IN;
    } else { /* blank so far, or a piece of skip_open */
        const char *f = memmem(q->tail, p, q->trig, q->trig_len);
        size_t cut = f ? (size_t)(f - q->tail) : p > q->trig_len - 1 ? p - (q->trig_len - 1) : 0;
        tail_drop(q, cut);
    }
}

/* BLOCK_PAST, anchored: the window past its leading whitespace is a piece of trig (wait), starts with
 * the whole of it (the matcher takes the window and holds from here, or frees the output for good if
 * it refuses those bytes), or leaves it (free for good). Returns TM_OK or TM_E_NOMEM. */
static int trig_anchored(tm_req *q)
{
    size_t p = 0;
    while (p < q->tail_len && trig_ws(q->tail[p])) p++;
    tail_drop(q, p);
    size_t k = q->tail_len < q->trig_len ? q->tail_len : q->trig_len;
    if (memcmp(q->tail, q->trig, k)) {
        q->waiting = 2;
        return TM_OK;
    }
    if (k < q->trig_len) return TM_OK;
    int rc = tm_gmatch_feed(q->gm, q->tail, q->tail_len);
    if (rc < 0) return rc;
    q->waiting = rc == 1 ? 0 : 2;
    return TM_OK;
}

/* A lazy grammar waiting for its trigger takes token tok: its text goes through the states above;
 * where the output now holds the trigger past any block, the matcher takes the text from the
 * trigger's start and holds from here (left free for good if it refuses those bytes). A special
 * token (not in the trie) has no text, unless the request keeps it. Returns TM_OK or TM_E_NOMEM. */
static int req_trigger(tm_req *q, int32_t tok)
{
    uint32_t n = 0;
    const uint8_t *b = tm_vocab_token(q->trie, tok, &n);
    const char *ks = req_kept_text(q, tok);
    if (ks) b = (const uint8_t *)ks, n = (uint32_t)strlen(ks);
    char *t = realloc(q->tail, q->tail_len + n + 1);
    if (!t) return TM_E_NOMEM;
    q->tail = t;
    if (n) memcpy(t + q->tail_len, b, n);
    q->tail_len += n;
    t[q->tail_len] = '\0';
    if (q->block == BLOCK_DECIDE) trig_decide(q);
    if (q->block == BLOCK_DECIDE) return TM_OK;
    if (q->block == BLOCK_IN) {
        const char *c = memmem(t, q->tail_len, q->skip_close, q->sc_len);
        if (!c) {
            if (q->tail_len >= q->sc_len) tail_drop(q, q->tail_len - (q->sc_len - 1));
            return TM_OK;
        }
        tail_drop(q, (size_t)(c - t) + q->sc_len); /* the block closed: what follows is looked through */
        q->block = BLOCK_PAST;
    }
    if (q->anchored) return trig_anchored(q);
    const char *at = memmem(t, q->tail_len, q->trig, q->trig_len);
    if (at) {
        size_t k = q->tail_len - (size_t)(at - t);
        int rc = tm_gmatch_feed(q->gm, at, k);
        if (rc < 0) return rc;
        q->waiting = rc == 1 ? 0 : 2;
        return TM_OK;
    }
    if (q->tail_len >= q->trig_len) tail_drop(q, q->tail_len - (q->trig_len - 1));
    return TM_OK;
}

/* a token's rank by its logit in logits [V]: 1 + the ids whose logit is strictly greater */
static int32_t lp_rank(const float *logits, int V, int32_t tok)
{
    int32_t r = 1;
    for (int i = 0; i < V; i++) r += logits[i] > logits[tok];
    return r;
}

/* The prompt's scores (request.prompt_logprobs): row pos's logits [V] (the prefill's, tm_row_sink) as
 * prompt token pos + 1's log-probability and the most likely tokens there; the last row's is the first
 * generated token's */
static void plp_row(void *ud, int pos, const float *logits)
{
    tm_req *q = ud;
    if (pos < 0 || pos + 1 >= q->n_prompt) return;
    tandem_logprob *lp = &q->plp[pos];
    double lse = 0;
    lp->n_top = tm_logprobs(logits, q->s->rm->decode->V, q->plp_n, lp->top_token, lp->top_logprob, &lse);
    lp->token = q->ids[pos + 1];
    lp->logprob = (float)tm_logprob_value(logits[lp->token], lse);
    lp->rank = lp_rank(logits, q->s->rm->decode->V, lp->token);
}

/* The embedding (request.embedding): prompt position pos's final hidden state h [D] (the prefill's,
 * tm_row_sink) pooled: summed for the mean, kept where it is the row the pooling picks */
static void emb_row(void *ud, int pos, const float *h)
{
    tm_req *q = ud;
    int D = q->s->rm->decode->D;
    if (q->emb_pool == TANDEM_POOL_MEAN)
        for (int d = 0; d < D; d++) q->emb_acc[d] += h[d];
    else if (pos == (q->emb_pool == TANDEM_POOL_CLS ? 0 : q->n_prompt - 1))
        for (int d = 0; d < D; d++) q->emb_acc[d] = h[d];
}

/* the pooled rows into the caller's request.embedding: the mean divided out, scaled to unit length
 * where asked (a zero vector stays zero) */
static void emb_done(tm_req *q)
{
    int D = q->s->rm->decode->D;
    double k = q->emb_pool == TANDEM_POOL_MEAN ? 1.0 / q->n_prompt : 1.0, ss = 0;
    for (int d = 0; d < D; d++) ss += q->emb_acc[d] * k * (q->emb_acc[d] * k);
    if (q->emb_norm && ss > 0) k /= sqrt(ss);
    for (int d = 0; d < D; d++) q->emb[d] = (float)(q->emb_acc[d] * k);
}

/* The prefill is done: the embedding written, the prompt's scores to on_prompt_logprob in order, the
 * first token's without one (a nonzero return cancels).
 * Returns 1 when the request ends here (cancelled, or no token to generate: max_tokens "none"). */
static int req_prefilled(tm_req *q)
{
    if (q->emb) emb_done(q);
    tandem_logprob first = {.token = q->ids[0], .logprob = NAN}; /* nothing predicts it */
    if (q->on_plp.fn && q->on_plp.fn(q->ud, 0, &first)) atomic_store(&q->cancel, 1);
    for (int i = 1; q->on_plp.fn && i < q->n_prompt && !atomic_load(&q->cancel); i++)
        if (q->on_plp.fn(q->ud, i, &q->plp[i - 1])) atomic_store(&q->cancel, 1);
    return atomic_load(&q->cancel) || q->max_new == 0;
}

/* Does q take each token as the plain argmax of the step's logits (no log-probabilities, logit bias,
 * constrained output, temperature or penalty)? Then a decode engine with caps.argmax may pick it
 * (tm_decode_args.argmax) and keep the logits where they are: the CUDA engine's stay on the GPU. */
static int req_greedy_only(const tm_req *q)
{
    return !q->on_lp.fn && q->n_bias == 0 && !q->trie && !q->gm && tm_sampler_is_greedy(q->smp);
}

/* Sample the next token from logits [V] (modified), or take pick, the decode engine's argmax, where
 * logits is NULL (req_greedy_only(q): the same token); stream its text.
 * Returns 1 when the request is finished (q->finish set), 0 to continue. */
static int req_take_token(tm_req *q, float *logits, int32_t pick)
{
    double t = tm_now_s();
    tandem_logprob lp;
    double lse = 0;
    int32_t tok = pick;
    if (logits) {
        if (q->on_lp.fn) { /* before the sampler's penalties change logits */
            int V = q->s->rm->decode->V;
            lp.n_top = tm_logprobs(logits, V, q->lp_n, lp.top_token, lp.top_logprob, &lse);
            memcpy(q->lp_raw, logits, sizeof(float) * (size_t)V);
        }
        for (int i = 0; i < q->n_bias; i++) logits[q->bias_ids[i]] += q->bias[i]; /* after the logprobs too */
        if (q->trie && !q->waiting && req_constrain(q, logits)) return 1; /* after the logprobs: those are the model's */
        tok = tm_sampler_sample(q->smp, logits);
    }
    if (tok < 0) { /* every logit NaN or -inf (or, in JSON mode, every token refused) */
        const char *why = !q->trie ? ""
                          : !q->gm ? " or breaks the JSON object"
                          : tm_gmatch_cut(q->gm) ? " or breaks the grammar (whose bounds cut paths: nesting past 512 "
                                                   "calls or more than 1,024 stacks a state, text/grammar.h)"
                                                 : " or breaks the grammar";
        tm_errf(&q->err, TM_E_INVALID, "no token can be drawn: every logit is NaN or -inf%s", why);
        req_flush(q);
        q->finish = "error";
        return 1;
    }
    if (q->waiting == 1 && !tm_stop_is_eos(q->stop, tok)) {
        int rc = req_trigger(q, tok);
        if (rc < 0) return req_fail(q, rc, "constrained output: out of memory");
    } else if (q->gm && !q->waiting && !tm_stop_is_eos(q->stop, tok)) {
        const char *ks = req_kept_text(q, tok);
        int rc = ks ? tm_gmatch_feed(q->gm, ks, strlen(ks)) : tm_gmatch_advance(q->gm, q->trie, tok);
        if (rc < 0) return req_fail(q, rc, "constrained output: the grammar's tables ran out of memory");
    } else if (q->trie && !q->gm) {
        tm_json_advance(q->trie, &q->jsm, tok);
    }
    tm_sampler_accept(q->smp, tok);
    if (q->on_lp.fn && !tm_stop_is_eos(q->stop, tok)) {
        lp.token = tok;
        lp.logprob = tok >= 0 ? (float)tm_logprob_value(q->lp_raw[tok], lse) : -INFINITY;
        lp.rank = tok >= 0 ? lp_rank(q->lp_raw, q->s->rm->decode->V, tok) : 0;
        if (q->on_lp.fn(q->ud, &lp)) atomic_store(&q->cancel, 1);
    }
    if (q->n_gen == 0) q->t_first = t;
    else if (q->n_itl < q->max_new) q->itl[q->n_itl++] = t - q->t_last;
    q->t_last = t;
    q->n_gen++;
    if (tm_stop_is_eos(q->stop, tok)) {
        req_flush(q);
        q->finish = q->indent.cut ? "length" : "stop"; /* the held text's lines still judged */
        return 1;
    }
    char *piece = NULL;
    size_t plen = 0, elen = 0;
    const char *emit;
    if (tm_detok_stream_push(q->ds, tok, &piece, &plen, &q->err) != TM_OK) {
        q->finish = "error";
        return 1;
    }
    int matched = tm_stop_feed(q->stop, piece ? piece : "", plen, &emit, &elen);
    int newline = elen && memchr(emit, '\n', elen); /* (llama.cpp's test: the text this token released) */
    req_emit(q, emit, elen, tok);
    free(piece); /* emit may point into piece */
    if (matched || req_closed(q)) { /* a stop string, or the constrained output is complete */
        if (!matched) req_flush(q);
        q->finish = q->indent.cut ? "length" : "stop";
        return 1;
    }
    /* the length, a line indented less than n_indent, or t_max_predict_ms run out at a newline */
    if (q->n_gen >= q->max_new || q->indent.cut ||
        (newline && q->t_max_predict > 0 && tm_now_s() - q->t_first > q->t_max_predict)) {
        req_flush(q);
        q->finish = "length";
        return 1;
    }
    q->next_tok = tok;
    return 0;
}

/* ---- the prefix cache (opts.prefix_cache) ---------------------------------------------------
 *
 *   prefill done (hybrid, prefill-only): the prompt's whole pages are published
 *                    (kvcache.h: keyed by every token up to each page's end)
 *   request DONE:    every whole page of its positions is, the prompt's and those the decode
 *                    steps wrote (the tokens at positions n_prompt.. are the ones fed)
 *   request routed:  its prompt's whole pages are looked up in order, at most (n_prompt - 1) /
 *                    page_size of them (the last prompt token always runs: its logits give the
 *                    first new token, and its page is the request's own); while they are found
 *                    they go into its table, shared, and n_cached = pages x page_size, if that
 *                    is PC_MIN tokens or more (with an int8 KV cache the CPU prefill then attends
 *                    row by row, so a short shared prefix, the BOS token, is not worth it).
 *                    tm_prefill_route then runs positions n_cached.. only, statefully. The
 *                    router prices the remaining tokens as a prompt of their own.
 *
 * A published page no request holds stays in the cache (idle) until a reserve needs the room,
 * oldest first, so the cache costs no capacity. Requests decoding at once share the pages of a
 * common prefix (a system prompt, earlier turns of a chat) read-only. The KV of a finished
 * request's generated tokens is the decode engine's (a fresh prefill would compute it with the
 * prefill engine's weights): the same model to within the stages' quantization. */
#define PC_MIN 16 /* the shortest prefix worth reusing, in tokens */

static int pc_on(const tm_session *s) { return s->o.prefix_cache; }

/* the token at position p of q (the prompt's, then the ones its decode steps fed) */
static int32_t pc_token(const tm_req *q, int p)
{
    return p < q->n_prompt ? q->ids[p] : q->fed[p - q->n_prompt];
}

/* publish q's whole pages below position n */
static void pc_publish(tm_session *s, tm_req *q, int n)
{
    int ps = tm_kv_cache_info(s->kv)->page_size;
    if (n > q->n_prompt + q->max_new || (n > q->n_prompt && !q->fed)) n = q->n_prompt;
    int32_t toks[64];
    if (ps > 64) return;
    uint64_t parent = 0;
    for (int i = 0; (i + 1) * ps <= n && i < q->seq.n_pages; i++) {
        for (int k = 0; k < ps; k++) toks[k] = pc_token(q, i * ps + k);
        uint64_t key = tm_kv_page_key(parent, toks, ps);
        tm_kv_publish(s->kv, q->seq.pages[i], parent, key, toks);
        parent = key;
    }
}

/* before q is routed: its prompt's cached pages into its table */
static void pc_take(tm_sched *sc, tm_req *q)
{
    tm_session *s = sc->s;
    if (!pc_on(s)) return;
    int ps = tm_kv_cache_info(s->kv)->page_size, n = 0;
    uint64_t parent = 0;
    tm_err e = {0};
    for (int i = 0; i < (q->n_prompt - 1) / ps; i++, n += ps) {
        uint64_t key = tm_kv_page_key(parent, q->ids + n, ps);
        if (tm_kv_seq_take_published(s->kv, &q->seq, parent, key, q->ids + n, &e) != 1) break;
        parent = key;
    }
    if (n < PC_MIN) {
        tm_kv_seq_release(s->kv, &q->seq);
        return;
    }
    q->seq.n_tokens = n;
    q->n_cached = n;
}

/* the token the next decode step feeds, remembered for the prefix cache */
static void req_feed(tm_req *q)
{
    int i = q->pos - q->n_prompt;
    if (q->fed && i >= 0 && i < q->max_new) q->fed[i] = q->next_tok;
}

/* Any state -> DONE / CANCELLED / FAILED: release every page (invariant 2). */
static void req_finish(tm_sched *sc, tm_req *q, int state)
{
    tm_session *s = sc->s;
    if (state == REQ_DONE && pc_on(s)) pc_publish(s, q, q->pos);
    tm_kv_seq_release(s->kv, &q->seq);
    tm_kv_seq_release(s->stage, &q->sseq);
    pthread_mutex_lock(&sc->mu);
    q->state = state;
    if (state == REQ_CANCELLED) q->finish = "cancelled";
    q->t_done = tm_now_s();
    if (s->o.explain && q->pred.t_pick > 0) tm_router_explain_done(stderr, &q->pred, q->t_first, q->t_done, q->n_gen);
    q->done = 1;
    pthread_cond_broadcast(&q->done_cv);
    pthread_mutex_unlock(&sc->mu);
}

static void join_push(tm_sched *sc, tm_req *q)
{
    pthread_mutex_lock(&sc->mu);
    q->state = REQ_DECODING;
    q->next = NULL;
    if (sc->join_tail) sc->join_tail->next = q;
    else sc->join_head = q;
    sc->join_tail = q;
    pthread_cond_signal(&sc->join_cv);
    pthread_mutex_unlock(&sc->mu);
}

static void decoding_done(tm_sched *sc)
{
    pthread_mutex_lock(&sc->mu);
    sc->n_decoding--;
    pthread_cond_signal(&sc->room_cv);
    pthread_mutex_unlock(&sc->mu);
}

/* ---- lending ------------------------------------------------------------------------ */

/* Invariant 5: whether the decode side may borrow the idle prefill cores. */
int tm_sched_lend_policy(const tm_session *s)
{
    int own = tm_pool_size(s->pool_dec), all = tm_pool_size(s->pool_all_dec);
    double bound = tandem_stall_bound(&s->o);
    const char *why;
    int yes;
    if (s->o.no_lend) yes = 0, why = "never (no_lend)";
    else if (own >= all) yes = 1, why = "always (no cores to borrow)";
    else if (s->max_seqs == 1) yes = 1, why = "yes (one request at a time: no prompt arrives while it decodes)";
    else if (s->gpu_split) yes = 1, why = "yes (the GPU's parts: the prefill's comes back after one step)";
    else if (bound <= 0) yes = 1, why = "yes (no stall bound)";
    else if (!s->router.calibrated) yes = 0, why = "no (uncalibrated: the cost of handing cores back is unknown)";
    else if (s->router.c.lend_dec <= 1 + bound) yes = 1, why = "yes (calibrated slowdown within the stall bound)";
    else yes = 0, why = "no (calibrated slowdown over the stall bound)";
    if (s->o.explain) {
        char slow[48] = "unknown";
        if (s->router.calibrated) snprintf(slow, sizeof slow, "x%.2f", s->router.c.lend_dec);
        fprintf(stderr, "[route] decode side (%d of %d cores) borrows the idle prefill cores: %s; stall bound %.2f, "
                "calibrated own-core slowdown %s\n", own, all, why, bound, slow);
    }
    return yes;
}

/* ---- the prefill worker ----------------------------------------------------------- */

/* The pool the prefill side runs on now (idle lending, invariant 4). */
static struct tm_pool *pre_pool(tm_sched *sc)
{
    tm_session *s = sc->s;
    atomic_store(&s->pre_busy, 1);
    while (atomic_load(&s->dec_using_all)) sched_yield(); /* at most one decode step */
    pthread_mutex_lock(&sc->mu);
    int idle = sc->n_decoding == 0 && !s->o.no_lend;
    pthread_mutex_unlock(&sc->mu);
    return idle ? s->pool_all_pre : s->pool_pre;
}

/* The prefill-only route: the prefill engine does the whole request here. */
static void run_prefill_only(tm_sched *sc, tm_req *q)
{
    tm_session *s = sc->s;
    int V = s->rm->decode->V;
    for (;;) {
        if (atomic_load(&q->cancel)) { req_finish(sc, q, REQ_CANCELLED); return; }
        if (tm_kv_seq_reserve(s->kv, &q->seq, q->pos + 1, &q->err) != TM_OK) break;
        tm_kv_seq *sp = &q->seq;
        req_feed(q);
        int32_t pick = -1, amax = s->pre.caps.argmax && req_greedy_only(q);
        struct tm_pool *pool = pre_pool(sc);
        tm_decode_args a = {.B = 1, .tokens = &q->next_tok, .pos = &q->pos, .kv = s->kv, .seqs = &sp,
                            .logits = amax ? NULL : s->logits, .pool = pool, .argmax = amax ? &pick : NULL,
                            .alone = tm_session_alone(s, pool)};
        if (s->pre.vt->decode(s->pre.ctx, &a, &q->err) != TM_OK) break;
        q->pos++;
        (void)V;
        if (req_take_token(q, amax ? NULL : s->logits, pick)) {
            req_finish(sc, q, req_end_state(q));
            return;
        }
    }
    req_finish(sc, q, REQ_FAILED);
}

/* does engine e give every row what q needs (the logits for its prompt's scores, the hidden states for
 * its embedding)? */
static int rows_ok(const tm_engine_caps *e, const tm_req *q)
{
    return (!q->plp || e->row_logits) && (!q->emb || e->row_hidden);
}

/* A request that needs every prompt row (its scores, its embedding) goes where the prefilling engine
 * gives them. Routed by the router (no route forced), it goes to the prefill side whatever the load,
 * so that the same prompt gets the same numbers every time (the two sides' weights differ: int8 and
 * int4 by default, embeddings at cosine 0.99 apart): prefill-only where nothing is generated (no
 * hand-off), else hybrid. A forced route is kept if its engine gives the rows, else the other side's
 * is taken; TM_E_UNSUPPORTED (q->err) where neither does. */
static int rows_route(tm_session *s, tm_req *q)
{
    unsigned ok = tm_router_routes(s);
    int pre = rows_ok(&s->pre.caps, q), dec = rows_ok(&s->dec.caps, q) && (s->dec.caps.roles & TM_ROLE_PREFILL);
    if (s->o.route == TANDEM_ROUTE_AUTO && pre) {
        tandem_route want = q->max_new == 0 ? TANDEM_ROUTE_PREFILL_ONLY : TANDEM_ROUTE_HYBRID;
        tandem_route other = want == TANDEM_ROUTE_HYBRID ? TANDEM_ROUTE_PREFILL_ONLY : TANDEM_ROUTE_HYBRID;
        if (ok & (1u << want)) q->route = want;
        else if (ok & (1u << other)) q->route = other;
    }
    if (q->route == TANDEM_ROUTE_DECODE_ONLY ? dec : pre) return TM_OK;
    if (pre && (ok & (1u << TANDEM_ROUTE_HYBRID))) q->route = TANDEM_ROUTE_HYBRID;
    else if (dec && (ok & (1u << TANDEM_ROUTE_DECODE_ONLY))) q->route = TANDEM_ROUTE_DECODE_ONLY;
    else
        return tm_errf(&q->err, TM_E_UNSUPPORTED, "request: %s: neither %s nor %s gives every prompt row's %s",
                       q->emb ? "embedding" : "prompt_logprobs", s->pre.caps.name, s->dec.caps.name,
                       q->emb ? "hidden state" : "logits");
    return TM_OK;
}

/* what a request's prefill hands its rows to (NULL: only the last row's logits are wanted) */
static const tm_row_sink *req_rows(tm_req *q, tm_row_sink *rows)
{
    *rows = (tm_row_sink){q->plp ? plp_row : NULL, q, q->emb ? emb_row : NULL};
    return q->plp || q->emb ? rows : NULL;
}

static void prefill_one(tm_sched *sc, tm_req *q)
{
    tm_session *s = sc->s;
    tm_router_load load = {0};
    pthread_mutex_lock(&sc->mu);
    load.n_decoding = sc->n_decoding;
    for (tm_req *w = sc->q_head; w; w = w->next) load.n_queued++;
    pthread_mutex_unlock(&sc->mu);
    if (atomic_load(&q->cancel)) { req_finish(sc, q, REQ_CANCELLED); return; }
    if (!q->plp && !q->emb) pc_take(sc, q); /* the prompt's scores and embedding need every row prefilled */
    q->route = tm_route_pick(s, q->n_prompt - q->n_cached, q->max_new, &load, &q->pred);
    if ((q->plp || q->emb) && rows_route(s, q) != TM_OK) { req_finish(sc, q, REQ_FAILED); return; }
    q->state = REQ_ROUTED;
    if (s->o.explain) tm_router_explain_pick(stderr, &q->pred);
    if (atomic_load(&q->cancel)) { req_finish(sc, q, REQ_CANCELLED); return; }
    if (q->route == TANDEM_ROUTE_DECODE_ONLY) { /* the decode worker prefills it, on its engine */
        pthread_mutex_lock(&sc->mu);
        sc->n_decoding++;
        pthread_mutex_unlock(&sc->mu);
        join_push(sc, q);
        return;
    }
    q->state = REQ_PREFILLING;
    tm_row_sink rows;
    if (tm_prefill_route(s, q->route, q->ids, q->n_prompt, &q->seq, &q->sseq, pre_pool(sc), s->logits,
                         req_rows(q, &rows), &q->t_prefill, &q->t_handoff, q->gemm, &q->err) != TM_OK) {
        req_finish(sc, q, REQ_FAILED);
        return;
    }
    tm_kv_seq_release(s->stage, &q->sseq); /* staging pages are free once handed off */
    if (pc_on(s)) pc_publish(s, q, q->n_prompt);
    q->state = REQ_HANDOFF;
    q->pos = q->n_prompt;
    if (req_prefilled(q) || req_take_token(q, s->logits, -1)) {
        req_finish(sc, q, req_end_state(q));
        return;
    }
    if (q->route == TANDEM_ROUTE_PREFILL_ONLY) {
        run_prefill_only(sc, q);
        return;
    }
    pthread_mutex_lock(&sc->mu);
    sc->n_decoding++;
    pthread_mutex_unlock(&sc->mu);
    join_push(sc, q);
}

static void *prefill_main(void *arg)
{
    tm_sched *sc = arg;
    tm_session *s = sc->s;
    pin_to(s->plan.pre_cpus[0]);
    pthread_mutex_lock(&sc->mu);
    for (;;) {
        while (!sc->stop && (!sc->q_head || sc->n_decoding >= s->max_seqs)) {
            atomic_store(&s->pre_busy, sc->q_head != NULL);
            pthread_cond_wait(sc->q_head ? &sc->room_cv : &sc->work_cv, &sc->mu);
        }
        if (sc->stop) break;
        tm_req *q = sc->q_head;
        sc->q_head = q->next;
        if (!sc->q_head) sc->q_tail = NULL;
        atomic_store(&s->pre_busy, 1);
        pthread_mutex_unlock(&sc->mu);
        prefill_one(sc, q);
        pthread_mutex_lock(&sc->mu);
        atomic_store(&s->pre_busy, sc->q_head != NULL && sc->n_decoding < s->max_seqs);
    }
    atomic_store(&s->pre_busy, 0);
    pthread_mutex_unlock(&sc->mu);
    return NULL;
}

/* ---- the decode worker ------------------------------------------------------------ */

/* Prompt lookup (runtime/lookup.h): where q decodes alone, greedy, on an engine that gives every row's
 * logits, one call feeds next_tok and up to opts.lookup drafted tokens as an exact prefill chunk at q's
 * position, and q takes the greedy pick of each row while the drafts match them. Returns -1 where no
 * draft was found (the caller runs a plain step), else what the plain step's token taking gives: 0 to
 * continue, or the request's end state. */
typedef struct spec_rows {
    int32_t pick[TM_LOOKUP_MAX + 1]; /* each row's greedy token (tm_argmax_f32, as a plain step's) */
    int V;
} spec_rows;

static void spec_row(void *ud, int t, const float *logits)
{
    spec_rows *r = ud;
    if (t >= 0 && t <= TM_LOOKUP_MAX) r->pick[t] = (int32_t)tm_argmax_f32(logits, r->V);
}

static int spec_step(tm_sched *sc, tm_req *q, struct tm_pool *pool)
{
    tm_session *s = sc->s;
    int kmax = s->o.lookup < TM_LOOKUP_MAX ? s->o.lookup : TM_LOOKUP_MAX;
    int left = q->max_new - q->n_gen - 1, room = s->max_ctx - q->pos - 1;
    kmax = kmax < left ? kmax : left;
    kmax = kmax < room ? kmax : room;
    if (kmax < 1 || !q->fed || !req_greedy_only(q) || !s->dec.vt->prefill || !s->dec.caps.row_logits) return -1;
    int n = q->pos + 1;
    int32_t *hist = malloc(sizeof(int32_t) * (size_t)n), tok[TM_LOOKUP_MAX + 1];
    if (!hist) return -1;
    for (int p = 0; p < q->pos; p++) hist[p] = pc_token(q, p);
    hist[q->pos] = q->next_tok;
    int k = tm_lookup_draft(hist, n, TM_LOOKUP_NGRAM_MAX, TM_LOOKUP_NGRAM_MIN, tok + 1, kmax);
    free(hist);
    tm_err room_err = {0}; /* no room for the drafts: a plain step (which needs one position) instead */
    if (k < 1 || tm_kv_seq_reserve(s->kv, &q->seq, q->pos + k + 1, &room_err) != TM_OK) return -1;
    tok[0] = q->next_tok;
    req_feed(q);
    spec_rows rows = {.V = s->rm->decode->V};
    tm_prefill_args a = {.tokens = tok, .T = k + 1, .n_valid = k + 1, .pos0 = q->pos, .kv = s->kv, .seq = &q->seq,
                         .pool = pool, .on_row_logits = spec_row, .row_ud = &rows, .alone = tm_session_alone(s, pool)};
    if (s->dec.vt->prefill(s->dec.ctx, &a, &q->err) != TM_OK) return REQ_FAILED;
    int m = 0; /* drafts kept: each the pick of the row before it */
    while (m < k && rows.pick[m] == tok[m + 1]) m++;
    q->n_drafted += k, q->n_accepted += m;
    int fin = 0;
    for (int i = 0; i <= m && !fin; i++) {
        if (i > 0) req_feed(q); /* next_tok (the draft kept) was fed at this position by the chunk */
        q->pos++;
        if (req_take_token(q, NULL, rows.pick[i])) fin = atomic_load(&q->cancel) ? REQ_CANCELLED : REQ_DONE;
    }
    if (m < k) q->seq.rewinds++; /* rows past pos were the rejected drafts' (written again before read) */
    q->seq.n_tokens = q->pos;
    return fin;
}

/* The pool a decode-side call runs on (invariants 4-5): its own cores, or every core where it may borrow
 * and the prefill side is idle; then dec_using_all is raised, and the caller drops it after the call. */
static struct tm_pool *dec_pool(tm_session *s)
{
    if (!s->dec_borrows || atomic_load(&s->pre_busy)) return s->pool_dec;
    atomic_store(&s->dec_using_all, 1);
    if (atomic_load(&s->pre_busy)) {
        atomic_store(&s->dec_using_all, 0);
        return s->pool_dec;
    }
    return s->pool_all_dec;
}

/* Whether prompt lookup pays here: moving averages of the seconds and the tokens of a plain one-sequence
 * step and of a verify call, compared as seconds a token. A verify call costs about one step on the CPU
 * engines (their GEMV reads the weights once for 8 rows) but several on the CUDA engine (its steps are
 * captured graphs, a verify a prefill chunk), so lookup runs while its time a token is the lower, and is
 * tried again after LOOK_RETRY plain steps (the text may have turned repetitive), twice as many after each
 * retry that did not pay, up to LOOK_RETRY_MAX (so an engine whose verify costs many steps pays little for
 * the retries). TANDEM_LOOKUP_PAY=0:
 * a verify whenever there is a draft (tests and measurements: what runs then does not hang on timings). */
#define LOOK_RETRY 16
#define LOOK_RETRY_MAX 1024
typedef struct look_pay {
    double secs[2], toks[2]; /* [plain, verify]: moving averages a call */
    int n[2], since;         /* calls seen; plain steps since the last verify */
    int retry;               /* plain steps before the next try (0: LOOK_RETRY) */
    int always;              /* TANDEM_LOOKUP_PAY=0 */
} look_pay;

static int look_cheaper(const look_pay *l) /* a verify's seconds a token at most a step's */
{
    return l->n[0] < 3 || l->n[1] < 3 || l->secs[1] * l->toks[0] <= l->secs[0] * l->toks[1];
}

static int look_pays(const look_pay *l)
{
    return l->always || look_cheaper(l) || l->since >= (l->retry ? l->retry : LOOK_RETRY);
}

static void look_note(look_pay *l, int spec, double secs, int tokens)
{
    if (tokens < 1) return;
    double w = l->n[spec] ? 0.125 : 1;
    l->secs[spec] += w * (secs - l->secs[spec]);
    l->toks[spec] += w * (tokens - l->toks[spec]);
    l->n[spec]++;
    if (!spec) {
        l->since++;
        return;
    }
    int r = l->retry ? l->retry : LOOK_RETRY;
    l->retry = look_cheaper(l) ? LOOK_RETRY : r < LOOK_RETRY_MAX ? 2 * r : LOOK_RETRY_MAX;
    l->since = 0;
}

static void *decode_main(void *arg)
{
    tm_sched *sc = arg;
    tm_session *s = sc->s;
    pin_to(s->plan.dec_cpus[0]);
    int V = s->rm->decode->V;
    int maxb = tm_session_max_batch(s);
    tm_req *active[64];
    int n_active = 0, rr = 0;
    look_pay look = {.always = getenv("TANDEM_LOOKUP_PAY") && !strcmp(getenv("TANDEM_LOOKUP_PAY"), "0")};
    for (;;) {
        pthread_mutex_lock(&sc->mu);
        while (!sc->stop && n_active == 0 && !sc->join_head) pthread_cond_wait(&sc->join_cv, &sc->mu);
        if (sc->stop && n_active == 0 && !sc->join_head) {
            pthread_mutex_unlock(&sc->mu);
            break;
        }
        tm_req *joined = sc->join_head;
        sc->join_head = sc->join_tail = NULL;
        pthread_mutex_unlock(&sc->mu);
        /* join: decode-only requests prefill here, on the decode engine */
        while (joined) {
            tm_req *q = joined;
            joined = q->next;
            if (q->route == TANDEM_ROUTE_DECODE_ONLY && q->n_gen == 0) {
                q->state = REQ_PREFILLING;
                struct tm_pool *pool = dec_pool(s);
                tm_row_sink rows;
                int prc = tm_prefill_route(s, q->route, q->ids, q->n_prompt, &q->seq, &q->sseq, pool, sc->batch_logits,
                                           req_rows(q, &rows), &q->t_prefill, &q->t_handoff, q->gemm, &q->err);
                atomic_store(&s->dec_using_all, 0);
                if (prc != TM_OK) {
                    req_finish(sc, q, REQ_FAILED);
                    decoding_done(sc);
                    continue;
                }
                q->pos = q->n_prompt;
                q->state = REQ_DECODING;
                if (req_prefilled(q) || req_take_token(q, sc->batch_logits, -1)) {
                    req_finish(sc, q, req_end_state(q));
                    decoding_done(sc);
                    continue;
                }
            }
            active[n_active++] = q;
        }
        /* leave: cancelled requests */
        for (int i = 0; i < n_active;) {
            if (atomic_load(&active[i]->cancel)) {
                req_finish(sc, active[i], REQ_CANCELLED);
                decoding_done(sc);
                active[i] = active[--n_active];
            } else i++;
        }
        if (n_active == 0) continue;
        if (n_active == 1 && s->o.lookup > 0) { /* prompt lookup: a request decoding alone */
            tm_req *q = active[0];
            int fin = -1;
            if (look_pays(&look)) {
                struct tm_pool *pool = dec_pool(s);
                double t0 = tm_now_s();
                int gen0 = q->n_gen;
                fin = spec_step(sc, q, pool);
                atomic_store(&s->dec_using_all, 0);
                if (fin >= 0) look_note(&look, 1, tm_now_s() - t0, q->n_gen - gen0);
            }
            if (fin > 0) {
                req_finish(sc, q, fin);
                decoding_done(sc);
                n_active = 0;
            }
            if (fin >= 0) continue;
        }
        /* one step for up to maxb sequences, round-robin when more are active */
        int B = n_active < maxb ? n_active : maxb;
        tm_req *batch[TM_MAX_BATCH];
        int32_t toks[TM_MAX_BATCH];
        int pos[TM_MAX_BATCH];
        tm_kv_seq *seqs[TM_MAX_BATCH];
        int ok = 1;
        for (int b = 0; b < B; b++) {
            tm_req *q = active[(rr + b) % n_active];
            batch[b] = q;
            toks[b] = q->next_tok;
            req_feed(q);
            pos[b] = q->pos;
            seqs[b] = &q->seq;
            if (tm_kv_seq_reserve(s->kv, &q->seq, q->pos + 1, &q->err) != TM_OK) ok = 0;
        }
        rr = n_active > B ? (rr + B) % n_active : 0;
        struct tm_pool *pool = dec_pool(s);
        double t_step = tm_now_s();
        tm_err e = {0};
        int32_t picks[TM_MAX_BATCH];
        int amax = s->dec.caps.argmax; /* the engine's greedy picks where every request takes those */
        for (int b = 0; b < B && amax; b++) amax = req_greedy_only(batch[b]);
        if (ok) {
            tm_decode_args a = {.B = B, .tokens = toks, .pos = pos, .kv = s->kv, .seqs = seqs,
                                .logits = amax ? NULL : sc->batch_logits, .pool = pool, .argmax = amax ? picks : NULL,
                                .alone = tm_session_alone(s, pool)};
            ok = s->dec.vt->decode(s->dec.ctx, &a, &e) == TM_OK;
        }
        atomic_store(&s->dec_using_all, 0);
        if (ok && B == 1 && s->o.lookup > 0) look_note(&look, 0, tm_now_s() - t_step, 1);
        for (int b = 0; b < B; b++) {
            tm_req *q = batch[b];
            int fin;
            if (!ok) {
                if (q->err.code == TM_OK) q->err = e;
                fin = REQ_FAILED;
            } else {
                q->pos++;
                fin = req_take_token(q, amax ? NULL : sc->batch_logits + (size_t)b * V, amax ? picks[b] : -1)
                          ? (atomic_load(&q->cancel) ? REQ_CANCELLED : REQ_DONE) : 0;
            }
            if (fin) {
                req_finish(sc, q, fin);
                decoding_done(sc);
                for (int i = 0; i < n_active; i++)
                    if (active[i] == q) { active[i] = active[--n_active]; break; }
            }
        }
    }
    return NULL;
}

/* ---- set-up and the API --------------------------------------------------------------- */

int tm_sched_new(tm_sched **out, tm_session *s, tm_err *err)
{
    *out = NULL;
    tm_sched *sc = calloc(1, sizeof *sc);
    if (!sc) return tm_errf(err, TM_E_NOMEM, "scheduler: out of memory");
    sc->s = s;
    pthread_mutex_init(&sc->mu, NULL);
    pthread_cond_init(&sc->work_cv, NULL);
    pthread_cond_init(&sc->join_cv, NULL);
    pthread_cond_init(&sc->room_cv, NULL);
    /* from the decode engine's allocator where it has one (page-locked for the CUDA engine's copies) */
    const tm_engine_vt *dv = s->dec.vt;
    const int own = dv && dv->host_alloc && dv->host_free;
    size_t lbytes = sizeof(float) * (size_t)tm_session_max_batch(s) * (size_t)s->rm->decode->V;
    sc->logits_free = own ? dv->host_free : free;
    sc->batch_logits = own ? dv->host_alloc(lbytes) : malloc(lbytes);
    if (!sc->batch_logits) {
        tm_sched_free(sc);
        return tm_errf(err, TM_E_NOMEM, "scheduler: out of memory");
    }
    if (pthread_create(&sc->pre_thread, NULL, prefill_main, sc) != 0) {
        tm_sched_free(sc);
        return tm_errf(err, TM_E_NOMEM, "scheduler: cannot start the prefill worker");
    }
    if (pthread_create(&sc->dec_thread, NULL, decode_main, sc) != 0) {
        pthread_mutex_lock(&sc->mu);
        sc->stop = 1;
        pthread_cond_broadcast(&sc->work_cv);
        pthread_mutex_unlock(&sc->mu);
        pthread_join(sc->pre_thread, NULL);
        sc->logits_free(sc->batch_logits);
        free(sc);
        return tm_errf(err, TM_E_NOMEM, "scheduler: cannot start the decode worker");
    }
    sc->threads_started = 1;
    *out = sc;
    return TM_OK;
}

void tm_sched_free(tm_sched *sc)
{
    if (!sc) return;
    if (sc->threads_started) {
        pthread_mutex_lock(&sc->mu);
        sc->stop = 1;
        pthread_cond_broadcast(&sc->work_cv);
        pthread_cond_broadcast(&sc->join_cv);
        pthread_cond_broadcast(&sc->room_cv);
        pthread_mutex_unlock(&sc->mu);
        pthread_join(sc->pre_thread, NULL);
        pthread_join(sc->dec_thread, NULL);
    }
    pthread_mutex_destroy(&sc->mu);
    pthread_cond_destroy(&sc->work_cv);
    pthread_cond_destroy(&sc->join_cv);
    pthread_cond_destroy(&sc->room_cv);
    if (sc->batch_logits) sc->logits_free(sc->batch_logits);
    free(sc);
}

static void req_free(tm_req *q)
{
    if (!q) return;
    tm_detok_stream_free(q->ds);
    tm_stop_free(q->stop);
    tm_sampler_free(q->smp);
    free(q->ids);
    free(q->fed);
    free(q->itl);
    free(q->lp_raw);
    free(q->plp);
    free(q->emb_acc);
    free(q->bias_ids);
    free(q->bias);
    tm_gmatch_free(q->gm);
    tm_grammar_free(q->gram);
    free(q->trig);
    free(q->tail);
    free(q->skip_open);
    free(q->skip_close);
    pthread_cond_destroy(&q->done_cv);
    free(q);
}

/* req_constraint: request r's constrained output set up in q (the trie, JSON mode's automaton or
 * the grammar and its matcher) */
static int req_constraint(tm_req *q, const tandem_request *r, tm_err *err)
{
    int n = !!r->json_object + !!r->json_schema + !!r->grammar;
    int trig = r->grammar_trigger && *r->grammar_trigger, skip = r->grammar_skip_close && *r->grammar_skip_close;
    if (trig && !r->grammar && !r->json_schema)
        return tm_errf(err, TM_E_INVALID, "request: grammar_trigger without a grammar");
    if (r->grammar_trigger_anchored && !trig)
        return tm_errf(err, TM_E_INVALID, "request: grammar_trigger_anchored without a grammar_trigger");
    if (r->grammar_trigger_anchored && trig_ws(r->grammar_trigger[0])) /* (the output's whitespace is skipped) */
        return tm_errf(err, TM_E_INVALID, "request: grammar_trigger_anchored: the trigger starts with whitespace");
    /* the skipped block: both markers or neither, with a trigger to skip for */
    if (skip && !trig) return tm_errf(err, TM_E_INVALID, "request: grammar_skip_close without a grammar_trigger");
    if (r->grammar_skip_open && !skip)
        return tm_errf(err, TM_E_INVALID, "request: grammar_skip_open without a grammar_skip_close");
    if (skip && !r->grammar_skip_open)
        return tm_errf(err, TM_E_INVALID, "request: grammar_skip_close without a grammar_skip_open");
    if (n == 0) return TM_OK;
    if (n > 1) return tm_errf(err, TM_E_INVALID, "request: at most one of json_object, json_schema and grammar");
    int rc = TM_OK;
    if (r->json_schema) {
        char *gbnf = NULL;
        if ((rc = tm_json_schema_gbnf(r->json_schema, strlen(r->json_schema), &gbnf, err)) == TM_OK)
            rc = tm_grammar_parse(&q->gram, gbnf, strlen(gbnf), err);
        free(gbnf);
    } else if (r->grammar) {
        rc = tm_grammar_parse(&q->gram, r->grammar, strlen(r->grammar), err);
    }
    if (rc) return tm_err_prefix(err, "request: %s", r->json_schema ? "json_schema" : "grammar");
    if (q->gram && (rc = tm_gmatch_new(&q->gm, q->gram, err)) != TM_OK) return rc;
    if ((rc = tm_rt_model_trie(q->s->rm, &q->trie, err)) != TM_OK) return rc;
    if (trig) {
        if (!(q->trig = strdup(r->grammar_trigger))) return tm_errf(err, TM_E_NOMEM, "out of memory");
        q->trig_len = strlen(q->trig);
        q->waiting = 1;
        q->anchored = r->grammar_trigger_anchored;
    }
    if (skip) { /* (skip_open "": the output starts inside the block) */
        if (!(q->skip_open = strdup(r->grammar_skip_open)) || !(q->skip_close = strdup(r->grammar_skip_close)))
            return tm_errf(err, TM_E_NOMEM, "out of memory");
        q->so_len = strlen(q->skip_open);
        q->sc_len = strlen(q->skip_close);
        q->block = q->so_len ? BLOCK_DECIDE : BLOCK_IN;
    }
    tm_jsm_init(&q->jsm);
    return TM_OK;
}

/* request.embedding: its pooling (the model's where not given) and accumulator; TM_E_INVALID for a
 * pooling out of range, TM_E_UNSUPPORTED where the model's embedding needs a module tandem lacks */
static int req_embedding(tm_req *q, const tandem_request *r, tm_err *err)
{
    const tm_rt_model *rm = q->s->rm;
    if (r->embed_pooling < TANDEM_POOL_DEFAULT || r->embed_pooling > TANDEM_POOL_CLS)
        return tm_errf(err, TM_E_INVALID, "request: embed_pooling = %d is not one of TANDEM_POOL_*", r->embed_pooling);
    if (rm->embed_unsupported[0])
        return tm_errf(err, TM_E_UNSUPPORTED, "request: embedding: %s's embedding needs %s, which tandem does not have",
                       rm->path, rm->embed_unsupported);
    q->emb = r->embedding;
    q->emb_pool = r->embed_pooling ? r->embed_pooling : rm->pooling;
    q->emb_norm = r->embed_normalize != 0;
    if (!(q->emb_acc = calloc((size_t)rm->decode->D, sizeof *q->emb_acc)))
        return tm_errf(err, TM_E_NOMEM, "request: out of memory");
    return TM_OK;
}

/* a request's count of alternatives (logprobs, prompt_logprobs) named field: TM_OK or TM_E_INVALID */
static int lp_range(int n, const char *field, tm_err *err)
{
    if (n <= TANDEM_MAX_LOGPROBS) return TM_OK;
    return tm_errf(err, TM_E_INVALID, "request: %s = %d is out of range [0, %d]", field, n, TANDEM_MAX_LOGPROBS);
}

int tm_session_submit(tm_session *s, const tandem_request *r, tandem_text_fn on_text, void *ud, tm_req **out,
                      tm_err *err)
{
    *out = NULL;
    tm_rt_model *rm = s->rm;
    int V = rm->decode->V, rc;
    tm_req *q = calloc(1, sizeof *q);
    if (!q) return tm_errf(err, TM_E_NOMEM, "request: out of memory");
    pthread_cond_init(&q->done_cv, NULL);
    q->s = s;
    q->t_submit = tm_now_s();
    q->on_text = on_text;
    q->ud = ud;
    if (r->on_logprob.fn && r->logprobs >= 0) {
        if ((rc = lp_range(r->logprobs, "logprobs", err)) != TM_OK) goto fail;
        q->on_lp = r->on_logprob;
        q->lp_n = r->logprobs;
        if (!(q->lp_raw = malloc(sizeof(float) * (size_t)V))) { rc = tm_errf(err, TM_E_NOMEM, "request: out of memory"); goto fail; }
    }
    if (r->on_prompt_logprob.fn && r->prompt_logprobs >= 0) {
        if ((rc = lp_range(r->prompt_logprobs, "prompt_logprobs", err)) != TM_OK) goto fail;
        q->on_plp = r->on_prompt_logprob;
        q->plp_n = r->prompt_logprobs;
    }
    if (r->n_logit_bias > 0) {
        if (!r->logit_bias_ids || !r->logit_bias) {
            rc = tm_errf(err, TM_E_INVALID, "request: n_logit_bias = %d without the arrays", r->n_logit_bias);
            goto fail;
        }
        q->bias_ids = malloc(sizeof(int32_t) * (size_t)r->n_logit_bias);
        q->bias = malloc(sizeof(float) * (size_t)r->n_logit_bias);
        if (!q->bias_ids || !q->bias) { rc = tm_errf(err, TM_E_NOMEM, "request: out of memory"); goto fail; }
        for (int i = 0; i < r->n_logit_bias; i++) {
            if (r->logit_bias_ids[i] < 0 || r->logit_bias_ids[i] >= V || !isfinite(r->logit_bias[i])) {
                rc = tm_errf(err, TM_E_INVALID, "request: logit_bias token %d (bias %g): the id must be in the vocabulary "
                             "of %d and the bias finite", r->logit_bias_ids[i], (double)r->logit_bias[i], V);
                goto fail;
            }
            q->bias_ids[i] = r->logit_bias_ids[i];
            q->bias[i] = r->logit_bias[i];
        }
        q->n_bias = r->n_logit_bias;
    }
    if ((rc = req_constraint(q, r, err)) != TM_OK) goto fail;
    size_t n = 0;
    if (r->prompt) {
        if ((rc = tm_tok_encode(rm->tok, r->prompt, strlen(r->prompt), !r->no_special, &q->ids, &n, err)) != TM_OK)
            goto fail;
    } else if (r->prompt_ids && r->n_prompt_ids > 0) {
        q->ids = malloc(sizeof(int32_t) * r->n_prompt_ids);
        if (!q->ids) { rc = tm_errf(err, TM_E_NOMEM, "request: out of memory"); goto fail; }
        memcpy(q->ids, r->prompt_ids, sizeof(int32_t) * r->n_prompt_ids);
        n = r->n_prompt_ids;
    }
    if (n == 0) { rc = tm_errf(err, TM_E_INVALID, "request: the prompt is empty"); goto fail; }
    for (size_t i = 0; i < n; i++)
        if (q->ids[i] < 0 || q->ids[i] >= V) {
            rc = tm_errf(err, TM_E_INVALID, "request: prompt token id %d out of range (vocabulary %d)", q->ids[i], V);
            goto fail;
        }
    if ((int)n >= s->max_ctx) {
        rc = tm_errf(err, TM_E_LIMIT, "prompt of %zu tokens does not fit the context of %d tokens", n, s->max_ctx);
        goto fail;
    }
    q->n_prompt = (int)n;
    if (q->on_plp.fn && !(q->plp = calloc(n, sizeof *q->plp))) { rc = tm_errf(err, TM_E_NOMEM, "request: out of memory"); goto fail; }
    if (r->embedding && (rc = req_embedding(q, r, err)) != TM_OK) goto fail;
    q->max_new = r->max_tokens > 0 ? r->max_tokens : r->max_tokens == TANDEM_MAX_TOKENS_NONE ? 0 : 128;
    if (r->n_indent < 0 || r->t_max_predict_ms < 0) {
        int neg = r->n_indent < 0;
        rc = tm_errf(err, TM_E_INVALID, "request: %s = %d is negative (0: off)", neg ? "n_indent" : "t_max_predict_ms",
                     neg ? r->n_indent : r->t_max_predict_ms);
        goto fail;
    }
    tm_indent_init(&q->indent, r->n_indent);
    q->t_max_predict = 1e-3 * r->t_max_predict_ms;
    if (rm->prefill->headless && (q->max_new > 0 || q->on_plp.fn)) {
        rc = tm_errf(err, TM_E_UNSUPPORTED, "request: %s has no output head (its checkpoint holds no lm_head though "
                     "tie_word_embeddings is false: a base model's, as an embedding model's); it embeds "
                     "(max_tokens none, an embedding) but cannot generate or score", rm->path);
        goto fail;
    }
    if (q->n_prompt + q->max_new > s->max_ctx) q->max_new = s->max_ctx - q->n_prompt;
    tm_sampler_params sp;
    tm_sampler_params_default(&sp);
    sp.temperature = r->temperature;
    sp.top_k = r->top_k;
    sp.top_p = r->top_p;
    sp.min_p = r->min_p;
    sp.repetition_penalty = r->repetition_penalty;
    sp.presence_penalty = r->presence_penalty;
    sp.frequency_penalty = r->frequency_penalty;
    sp.seed = r->seed;
    if (!(q->smp = tm_sampler_new(&sp, V, err))) { rc = err ? err->code : TM_E_INVALID; goto fail; }
    tm_sampler_accept_prompt(q->smp, q->ids, (int64_t)n);
    int n_stops = 0;
    while (r->stop && r->stop[n_stops]) n_stops++;
    if (!(q->stop = tm_stop_new(rm->eos_ids, r->ignore_eos ? 0 : rm->n_eos, r->stop, n_stops, err))) {
        rc = err ? err->code : TM_E_INVALID;
        goto fail;
    }
    for (int i = 0; r->keep_special && r->keep_special[i]; i++) {
        int32_t id = tm_tok_piece_to_id(rm->tok, r->keep_special[i]);
        if (i >= TM_DETOK_KEEP) {
            rc = tm_errf(err, TM_E_INVALID, "request: keep_special holds more than %d tokens", TM_DETOK_KEEP);
            goto fail;
        }
        if (id >= 0 && id < V && tm_tok_is_special(rm->tok, id)) q->keep[q->n_keep++] = id;
    }
    q->ds = tm_detok_stream_new(rm->tok, !r->show_special);
    if (q->ds) tm_detok_stream_keep(q->ds, q->keep, q->n_keep);
    q->itl = malloc(sizeof(double) * (size_t)(q->max_new + 1));
    int need_fed = pc_on(s) || s->o.lookup > 0;
    if (need_fed) q->fed = malloc(sizeof(int32_t) * (size_t)(q->max_new + 1));
    if (!q->ds || !q->itl || (need_fed && !q->fed)) { rc = tm_errf(err, TM_E_NOMEM, "request: out of memory"); goto fail; }
    q->finish = "length";
    tm_sched *sc = s->sched;
    pthread_mutex_lock(&sc->mu);
    q->state = REQ_QUEUED;
    if (sc->q_tail) sc->q_tail->next = q;
    else sc->q_head = q;
    sc->q_tail = q;
    atomic_store(&s->pre_busy, 1);
    pthread_cond_signal(&sc->work_cv);
    pthread_mutex_unlock(&sc->mu);
    *out = q;
    return TM_OK;
fail:
    req_free(q);
    return rc;
}

void tm_req_cancel(tm_req *q) { atomic_store(&q->cancel, 1); }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int tm_req_wait(tm_req *q, tandem_stats *st, tm_err *err)
{
    tm_sched *sc = q->s->sched;
    pthread_mutex_lock(&sc->mu);
    while (!q->done) pthread_cond_wait(&q->done_cv, &sc->mu);
    pthread_mutex_unlock(&sc->mu);
    memset(st, 0, sizeof *st);
    st->n_prompt = q->n_prompt;
    st->n_cached = q->n_cached;
    st->n_generated = q->n_gen;
    st->t_prefill = q->t_prefill;
    st->t_prefill_gemm = q->gemm[0];
    st->prefill_gemm_ops = q->gemm[1];
    st->t_handoff = q->t_handoff;
    st->ttft = q->n_gen ? q->t_first - q->t_submit : 0;
    st->t_decode = q->n_gen ? q->t_done - q->t_first : 0;
    st->t_total = q->t_done - q->t_submit;
    st->route = tm_route_name(q->route);
    st->prefill_engine = q->route == TANDEM_ROUTE_DECODE_ONLY ? q->s->dec.caps.name : q->s->pre.caps.name;
    st->decode_engine = q->route == TANDEM_ROUTE_PREFILL_ONLY ? q->s->pre.caps.name : q->s->dec.caps.name;
    st->finish_reason = q->finish;
    st->stop_index = q->stop && q->finish && !strcmp(q->finish, "stop") ? tm_stop_matched(q->stop) : -1;
    st->n_drafted = q->n_drafted;
    st->n_accepted = q->n_accepted;
    if (q->n_itl) {
        qsort(q->itl, (size_t)q->n_itl, sizeof(double), cmp_double);
        st->tpot_p50 = q->itl[q->n_itl / 2];
        st->tpot_p99 = q->itl[(q->n_itl * 99) / 100 < q->n_itl ? (q->n_itl * 99) / 100 : q->n_itl - 1];
    }
    int rc = TM_OK;
    if (q->state == REQ_FAILED) rc = tm_errf(err, q->err.code ? q->err.code : TM_E_INVALID, "%s", q->err.msg);
    else if (q->state == REQ_CANCELLED) rc = tm_errf(err, TM_E_CANCELLED, "request cancelled");
    req_free(q);
    return rc;
}

int tm_session_generate(tm_session *s, const tandem_request *r, tandem_text_fn on_text, void *ud, tandem_stats *st,
                        tm_err *err)
{
    tm_req *q;
    int rc = tm_session_submit(s, r, on_text, ud, &q, err);
    if (rc != TM_OK) return rc;
    return tm_req_wait(q, st, err);
}
