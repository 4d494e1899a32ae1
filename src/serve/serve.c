/* serve/serve.c: the HTTP side of `tandem serve` (libmicrohttpd).
 *
 * Design block
 * ------------
 * Threads: libmicrohttpd runs one thread per connection; the session's
 * scheduler runs its prefill and decode workers; a streamed generation has
 * one more thread per choice, its waiter, blocked in tandem_wait.
 *
 * Choices ("n"): a job submits one library request per choice (the same
 * prompt; seeds seed, seed + 1, ...), each with its own text, tokens and
 * reply reader (struct choice); they run side by side in the scheduler's
 * batch. A JSON response waits for each and lists them; a stream sends each
 * choice's chunks under its "index" as its text comes, its finish chunk when
 * it ends, and the usage (completion tokens summed) and [DONE] after the last.
 *
 *   connection thread                  scheduler workers          waiter (stream only)
 *   headers; body (<= max_body)
 *   parse (oai.h); chat template
 *   tandem_submit -------------------> prefill, decode
 *   JSON:   tandem_wait                job_on_text: append to
 *           build the body               the choice's text (job_on_logprob: its lps)
 *   stream: queue a callback response  job_on_text: append,  ---> job_read wakes
 *           job_read: wait for text,     signal                   tandem_wait returns:
 *           one "data:" chunk per wake                            finished = 1, signal
 *           ... finish chunk, usage, "data: [DONE]"
 *
 * A job (one generation):
 *
 *   NEW -> SUBMITTED -> RUNNING (text arrives) -> FINISHED (tandem_wait returned) -> FREED
 *    \          \______________ cancel flag: client gone, shutdown ______/
 *     \--> refused (parse, template, submit: 4xx / 5xx) -> FREED
 *
 *   | transition           | thread                          | function                   |
 *   | NEW -> SUBMITTED     | connection                      | serve_generate             |
 *   | RUNNING              | scheduler worker                | job_on_text                |
 *   | -> FINISHED (JSON)   | connection, in tandem_wait      | serve_generate             |
 *   | -> FINISHED (stream) | waiter                          | job_waiter                 |
 *   | set cancel           | worker or connection (peer      | job_on_text, job_fill,     |
 *   |                      | closed), any (tm_server_stop)   | job_release, tm_server_stop|
 *   | -> FREED (JSON)      | connection                      | job_free                   |
 *   | -> FREED (stream)    | connection, response destroyed  | job_release (joins waiter) |
 *
 * Invariants
 *  1. A cancelled job is stopped through its text callback: job_on_text
 *     returns nonzero once job->cancel is set, which the scheduler handles as
 *     tandem_cancel (the request ends at its next piece of text and releases
 *     its KV pages). No other thread calls tandem_cancel on a handle that
 *     some thread is waiting on: tandem_wait frees the handle when it
 *     returns, so such a call could touch a freed request.
 *  2. Every submitted request is waited for exactly once: by the connection
 *     thread (JSON) or the waiter (stream). A streamed job is freed only
 *     after its waiter is joined, so job_on_text never sees a freed job.
 *  3. Each choice's text, lps, finished and result are guarded by job->mu;
 *     job->cancel is atomic and stops every choice. Lock order: srv->mu
 *     before job->mu.
 *  4. srv->jobs holds every job from before submit until it is freed, so
 *     tm_server_stop can cancel them all; after stopping is set no job is
 *     added (new generations get 503).
 *  5. A body is always read to its end (past max_body it is discarded)
 *     before a response is queued, so a client never loses its error
 *     response to a connection reset.
 *  6. A client that closed its connection is noticed by peeking at the
 *     socket: from job_on_text at every piece, and from the stream reader
 *     every 100 ms while it waits.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "core/clock.h"
#include "core/grow.h"
#include "serve/oai.h"
#include "serve/reply.h"
#include "serve/serve-impl.h"
#include "serve/serve.h"
#include "text/harmony.h"
#include "text/reasoning.h"
#include "text/toolcall.h"

enum { R_NONE, R_MODELS, R_MODEL, R_HEALTH, R_COMPLETIONS, R_CHAT, R_TOKENIZE, R_DETOKENIZE, R_METRICS, R_MESSAGES,
       R_EMBEDDINGS, R_COUNT_TOKENS, R_RESPONSES, R_RESPONSE, R_INFILL };

static const struct {
    const char *path;
    int route, post;           /* post: the route takes POST (else GET / HEAD) */
} routes[] = {
    {"/v1/models", R_MODELS, 0},           {"/models", R_MODELS, 0},
    {"/health", R_HEALTH, 0},              {"/v1/health", R_HEALTH, 0},
    {"/v1/completions", R_COMPLETIONS, 1}, {"/completions", R_COMPLETIONS, 1},
    {"/v1/chat/completions", R_CHAT, 1},   {"/chat/completions", R_CHAT, 1},
    {"/tokenize", R_TOKENIZE, 1},          {"/v1/tokenize", R_TOKENIZE, 1},
    {"/detokenize", R_DETOKENIZE, 1},      {"/v1/detokenize", R_DETOKENIZE, 1},
    {"/metrics", R_METRICS, 0},
    {"/v1/messages", R_MESSAGES, 1},       /* Anthropic's Messages API (serve/anthropic.c) */
    {"/v1/messages/count_tokens", R_COUNT_TOKENS, 1}, /* its prompt counted */
    {"/v1/responses", R_RESPONSES, 1},     /* OpenAI's Responses API (serve/responses.c) */
    {"/infill", R_INFILL, 1},              /* llama.cpp's code completion (serve/infill.c) */
    {"/v1/embeddings", R_EMBEDDINGS, 1},   {"/embeddings", R_EMBEDDINGS, 1}, /* serve/embed.c */
};

typedef struct job job;
#define JOB_KEEP 16 /* special tokens a reply keeps in its text (text/tokenizer.h: TM_DETOK_KEEP) */

struct tm_server {
    struct MHD_Daemon *d;
    tandem_model *m;
    tandem_session *s;
    char *model_name, *tpl, *api_key, *cors;
    tm_resp_store *store;      /* the Responses API's stored responses (serve/resp_store.c) */
    int metrics;               /* GET /metrics answered (tm_server_opts.metrics) */
    size_t max_body;
    int n_predict, seed_set, ctx;
    tandem_request defaults;
    char *def_stop[TM_OAI_MAX_STOP + 1];
    tm_server_log_fn log;
    void *log_ud;
    int port;
    int64_t created;
    uint64_t rand_base;
    atomic_uint_fast64_t rand_ctr;
    const tm_tool_dialect *dialect; /* tool calls in the template's dialect, or NULL (opts.tool_parser) */
    tm_tool_dialect kept;      /* a bare dialect's form with its special-token markers kept (dialect points here) */
    const tm_think_markers *think; /* replies' think blocks (in this family) go to reasoning_content (opts.reasoning) */
    int harmony;               /* the template writes harmony (gpt-oss): chat replies keep its markers and are
                                  read by text/harmony.h, analysis as reasoning_content unless reasoning is "none" */
    int harmony_think;
    const char *const *fim;    /* the tokenizer's fill-in-the-middle tokens (prefix, suffix, middle), or NULL */
    pthread_mutex_t mu;        /* jobs, stopping, counts */
    job *jobs;
    int stopping;
    tm_server_counts counts;
};

/* One HTTP request (MHD's per-request pointer). */
typedef struct http_req {
    int route, post;           /* the route table's route, and whether it takes POST */
    const char *canon;         /* the route table's spelling of the path */
    char *body;
    size_t len, cap;
    int too_large;
    double t0;
} http_req;

enum { PH_START, PH_TEXT, PH_END };

/* One choice of a job: its library request, what it has produced, its reply reader. */
typedef struct choice {
    job *j;
    int index;
    tandem_handle *h;
    char *text;                /* JSON: all text; stream: text not yet sent */
    size_t text_len, text_cap;
    tandem_logprob *lps;       /* JSON: every token's; stream: those not yet sent (req.want_logprobs) */
    size_t n_lps, cap_lps;
    size_t lp_off;             /* stream: the text_offset of the next chunk's first token (completions) */
    size_t n_echo;             /* lps: the echoed prompt's come first (completions echo + logprobs), unranked */
    tandem_logprob *plps;      /* vLLM's prompt_logprobs: the prompt's tokens' scores [n_plps] */
    size_t n_plps, cap_plps;
    int finished, rc;          /* tandem_wait returned, with rc */
    tandem_stats stats;
    tandem_status st;
    pthread_t waiter;
    int has_waiter;
    int ended;                 /* stream: its finish chunk went out */
    tm_reply reply;            /* a chat reply read into parts (serve/reply.h): tool calls, reasoning */
} choice;

struct job {
    tm_server *srv;
    tm_oai_req req;
    tm_oai_meta meta;
    char id[48];
    const char *url;           /* for the log line (a route table string) */
    double t0;
    int fd;                    /* the client's socket, for disconnect checks */
    atomic_int cancel;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int oom;
    int np;                    /* prompts (completions may give several: OpenAI's batch); choice i is prompt i / per's */
    int per, ret;              /* choices generated per prompt (req.best_of, which is req.n unless asked for) and
                                  returned per prompt (req.n): all of them, or the best_of's best */
    int n, n_ret;              /* np x per, np x ret */
    choice *ch;                /* [n] */
    int phase;                 /* stream: PH_* */
    char *out;                 /* stream: formatted bytes not yet handed to MHD */
    size_t out_len, out_off, out_cap;
    /* a chat reply read into parts (serve/reply.h): tool calls, reasoning */
    const tm_tool_dialect *calls; /* tool calls read in this dialect (a request with tools), or NULL */
    char *grammar;             /* tool_choice required / named / auto: the calls' grammar (the request's) */
    const char *prefix;        /* required / named: the dialect's gen_open, at the prompt's end: the reply's start */
    int reads;                 /* the choices' replies are in use: calls or reasoning are read */
    const char *keep[JOB_KEEP + 1]; /* the request's keep_special: the calls' and the thinking's markers */
    const tm_api_fmt *fmt;     /* another API's shapes (serve-impl.h: Anthropic's, Responses; one choice), or NULL */
    char *fmt_echo;            /* its request's fields the answer repeats, or NULL */
    int fmt_in;                /* its prompt's tokens (a stream's first event tells them) */
    tm_api_stream fs;          /* its stream's writer state */
    job *next;
};

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t next_random(tm_server *srv)
{
    return splitmix64(srv->rand_base + atomic_fetch_add(&srv->rand_ctr, 1));
}

static void srv_log(tm_server *srv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void srv_log(tm_server *srv, const char *fmt, ...)
{
    if (!srv->log) return;
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    srv->log(srv->log_ud, line);
}

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
    tm_server *srv = cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\r\n")] = '\0';
    if (srv->log) srv->log(srv->log_ud, line);
}

/* 1 if the peer closed the connection (a peek reads end-of-file or an error). */
static int peer_gone(int fd)
{
    if (fd < 0) return 0;
    char b;
    ssize_t k = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (k > 0) return 0;
    if (k == 0) return 1;
    return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

/* ---- responses --------------------------------------------------------------------- */

static void count_request(tm_server *srv)
{
    pthread_mutex_lock(&srv->mu);
    srv->counts.requests++;
    pthread_mutex_unlock(&srv->mu);
}

/* Cross-origin access (tm_server_opts.cors_origin) on a response being made */
static void cors_headers(const tm_server *srv, struct MHD_Response *r)
{
    if (!srv->cors) return;
    MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, srv->cors);
    if (strcmp(srv->cors, "*")) MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Origin");
}

/* A browser's preflight (OPTIONS on a known path, CORS on): 204, the methods the path takes and the
 * headers a client sends */
static enum MHD_Result reply_preflight(tm_server *srv, struct MHD_Connection *c, const char *methods)
{
    count_request(srv);
    struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    cors_headers(srv, r);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", methods);
    MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
    MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_NO_CONTENT, r);
    MHD_destroy_response(r);
    return rc;
}

/* Queue body (malloc'd; taken) of content type ctype with status. */
static enum MHD_Result reply_as(tm_server *srv, struct MHD_Connection *c, int status, char *body, const char *ctype,
                                const char *allow)
{
    count_request(srv);
    if (!body) return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (allow) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    if (status == MHD_HTTP_UNAUTHORIZED) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    cors_headers(srv, r);
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return rc;
}

/* ... of JSON */
static enum MHD_Result reply(tm_server *srv, struct MHD_Connection *c, int status, char *body, const char *allow)
{
    return reply_as(srv, c, status, body, "application/json", allow);
}

static enum MHD_Result reply_error(tm_server *srv, struct MHD_Connection *c, const tm_oai_error *e, const char *allow)
{
    return reply(srv, c, e->http, tm_oai_error_json(e), allow);
}

static enum MHD_Result reply_errorf(tm_server *srv, struct MHD_Connection *c, int http, const char *type,
                                    const char *code, const char *allow, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
static enum MHD_Result reply_errorf(tm_server *srv, struct MHD_Connection *c, int http, const char *type,
                                    const char *code, const char *allow, const char *fmt, ...)
{
    tm_oai_error e;
    tm_oai_error_set(&e, http, type, code, NULL, "%s", "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.msg, sizeof e.msg, fmt, ap);
    va_end(ap);
    return reply_error(srv, c, &e, allow);
}

/* ---- jobs ------------------------------------------------------------------------------ */

static int job_on_text(void *ud, const char *piece, size_t len, int32_t token)
{
    (void)token;
    choice *ch = ud;
    job *j = ch->j;
    pthread_mutex_lock(&j->mu);
    if (ch->text_len + len + 1 > ch->text_cap) {
        size_t cap = (ch->text_len + len + 1) * 2;
        char *t = realloc(ch->text, cap);
        if (t) {
            ch->text = t;
            ch->text_cap = cap;
        } else {
            j->oom = 1;
        }
    }
    if (!j->oom) {
        memcpy(ch->text + ch->text_len, piece, len);
        ch->text_len += len;
    }
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (j->oom || peer_gone(j->fd)) atomic_store(&j->cancel, 1);
    return atomic_load(&j->cancel);
}

static int job_on_logprob(void *ud, const tandem_logprob *lp)
{
    choice *ch = ud;
    job *j = ch->j;
    pthread_mutex_lock(&j->mu);
    if (ch->n_lps == ch->cap_lps) {
        size_t cap = ch->cap_lps ? 2 * ch->cap_lps : 64;
        tandem_logprob *v = realloc(ch->lps, cap * sizeof *v);
        if (v) {
            ch->lps = v;
            ch->cap_lps = cap;
        } else {
            j->oom = 1;
        }
    }
    if (!j->oom) ch->lps[ch->n_lps++] = *lp;
    pthread_mutex_unlock(&j->mu);
    if (j->oom) atomic_store(&j->cancel, 1);
    return atomic_load(&j->cancel);
}

/* completions "echo": the prompt as the model read it, its tokens' text (an added BOS token shows),
 * before the completion's; so "text_offset" counts through both. One token's bytes into the choice. */
static int job_echo_token(choice *ch, int32_t id)
{
    char *b = NULL;
    size_t n = 0;
    tandem_status st;
    int rc = tandem_token_bytes(ch->j->srv->m, id, &b, &n, &st) == 0 ? job_on_text(ch, b, n, -1) : 1;
    free(b);
    return rc;
}

/* echo + logprobs: each prompt token's text and score (request.on_prompt_logprob), in order */
static int job_on_prompt_logprob(void *ud, int index, const tandem_logprob *lp)
{
    (void)index;
    choice *ch = ud;
    job *j = ch->j;
    tandem_logprob e = *lp;
    if (j->req.prompt_logprobs >= 0) { /* vLLM's: kept for the response (read once the choice is finished) */
        if (tm_grow((void **)&ch->plps, &ch->cap_plps, ch->n_plps + 1, sizeof *ch->plps)) {
            j->oom = 1;
            return 1;
        }
        if (e.n_top > j->req.prompt_logprobs) e.n_top = j->req.prompt_logprobs;
        ch->plps[ch->n_plps++] = e;
    }
    if (!j->req.echo || !j->req.want_logprobs) return atomic_load(&j->cancel);
    if (job_echo_token(ch, lp->token)) return 1;
    ch->n_echo++; /* read once the choice is finished */
    e = *lp;
    if (e.n_top > j->req.top_logprobs) e.n_top = j->req.top_logprobs;
    return job_on_logprob(ch, &e);
}

/* echo without logprobs: the prompt's tokens' text into every choice now (no scores to wait for) */
static int job_echo(job *j)
{
    int rc = 0;
    for (int p = 0; p < j->np && !rc; p++) {
        tm_oai_prompt pr = tm_oai_prompt_at(&j->req, p);
        int32_t *ids = pr.ids;
        size_t n = pr.n_ids;
        tandem_status st;
        if (pr.text && tandem_tokenize(j->srv->m, pr.text, strlen(pr.text), 1, &ids, &n, &st) != 0) return 1;
        for (int c = p * j->per; c < (p + 1) * j->per; c++) /* the prompt's choices */
            for (size_t i = 0; i < n && !rc; i++) rc = job_echo_token(&j->ch[c], ids[i]);
        if (pr.text) free(ids);
    }
    return rc;
}

/* The library's log-probabilities as the writer's: each token's bytes from the tokenizer.
 * Returns the array (lp_free it), or NULL when out of memory. */
static void lp_free(tm_oai_logprob *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) {
        free((char *)v[i].tok.bytes);
        for (int k = 0; k < v[i].n_top; k++) free((char *)v[i].top[k].bytes);
    }
    free(v);
}

static int lp_tok(tm_server *srv, int32_t id, float logprob, tm_oai_lp_tok *t)
{
    char *b = NULL;
    size_t len = 0;
    tandem_status st;
    if (tandem_token_bytes(srv->m, id, &b, &len, &st) != 0) return -1;
    *t = (tm_oai_lp_tok){b, len, logprob};
    return 0;
}

static tm_oai_logprob *lp_convert(tm_server *srv, const tandem_logprob *in, size_t n)
{
    tm_oai_logprob *v = calloc(n ? n : 1, sizeof *v);
    int bad = !v;
    for (size_t i = 0; i < n && !bad; i++) {
        bad = lp_tok(srv, in[i].token, in[i].logprob, &v[i].tok) != 0;
        for (int k = 0; k < in[i].n_top && !bad; k++, v[i].n_top++)
            bad = lp_tok(srv, in[i].top_token[k], in[i].top_logprob[k], &v[i].top[k]) != 0;
    }
    if (bad) {
        lp_free(v, n);
        return NULL;
    }
    return v;
}

static void job_free(job *j);

static job *job_new(tm_server *srv, struct MHD_Connection *c, tm_oai_req *req, const char *url, double t0)
{
    job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->srv = srv;
    j->req = *req;
    memset(req, 0, sizeof *req);
    pthread_mutex_init(&j->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    int chat = j->req.kind == TM_OAI_CHAT;
    snprintf(j->id, sizeof j->id, "%s-%016" PRIx64, chat ? "chatcmpl" : "cmpl", next_random(srv));
    j->meta = (tm_oai_meta){.kind = j->req.kind, .id = j->id, .model = srv->model_name, .created = (int64_t)time(NULL)};
    j->url = url;
    j->t0 = t0;
    j->np = j->req.n_prompts > 1 ? j->req.n_prompts : 1;
    j->per = j->req.best_of >= 1 && j->req.best_of <= TM_OAI_MAX_N ? j->req.best_of : 1;
    j->ret = j->req.n >= 1 && j->req.n <= j->per ? j->req.n : j->per;
    j->n = j->np * j->per, j->n_ret = j->np * j->ret;
    if (!(j->ch = calloc((size_t)j->n, sizeof *j->ch))) {
        job_free(j);
        return NULL;
    }
    for (int i = 0; i < j->n; i++) j->ch[i].j = j, j->ch[i].index = i;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    j->fd = ci ? ci->connect_fd : -1;
    return j;
}

/* Add to the server's list; -1 if the server is stopping. */
static int job_register(job *j)
{
    tm_server *srv = j->srv;
    pthread_mutex_lock(&srv->mu);
    int ok = !srv->stopping;
    if (ok) {
        j->next = srv->jobs;
        srv->jobs = j;
        srv->counts.generations++;
        srv->counts.active++;
    }
    pthread_mutex_unlock(&srv->mu);
    return ok ? 0 : -1;
}

/* the usage of a job's choices: each prompt once, the completions summed */
static tm_oai_usage job_usage(const job *j)
{
    tm_oai_usage u = {0, 0, 0};
    for (int i = 0; i < j->n; i++) {
        if (i % j->per == 0) u.prompt += j->ch[i].stats.n_prompt, u.cached += j->ch[i].stats.n_cached;
        u.completion += j->ch[i].stats.n_generated;
    }
    return u;
}

static void job_log(job *j, int status)
{
    tm_server *srv = j->srv;
    tm_oai_usage u = job_usage(j);
    const choice *c = &j->ch[0];
    char n[32] = "";
    if (j->n > 1) snprintf(n, sizeof n, " (%d choices)", j->n);
    srv_log(srv, "POST %s %d%s: prompt %d, completion %d tokens%s, finish %s, %.3f s", j->url, status,
            j->req.stream ? " (stream)" : "", u.prompt, u.completion, n,
            c->finished ? (c->stats.finish_reason ? c->stats.finish_reason : "error") : "-", tm_now_s() - j->t0);
}

static void job_free(job *j)
{
    if (!j) return;
    tm_server *srv = j->srv;
    pthread_mutex_lock(&srv->mu);
    for (job **p = &srv->jobs; *p; p = &(*p)->next)
        if (*p == j) {
            *p = j->next;
            srv->counts.active--;
            if (j->ch[0].finished && j->ch[0].rc == TANDEM_E_CANCELLED) srv->counts.cancelled++;
            for (int i = 0; j->ch && i < j->n; i++) { /* the finished choices' tokens (/metrics): each prompt once */
                const choice *ch = &j->ch[i];
                if (!ch->finished || ch->rc != 0) continue;
                int first = i % j->per == 0;
                if (first) srv->counts.prompt_tokens += ch->stats.n_prompt;
                srv->counts.generated_tokens += ch->stats.n_generated;
                if (first && ch->stats.n_generated > 0) srv->counts.ttft_sum += ch->stats.ttft, srv->counts.ttft_count++;
            }
            break;
        }
    pthread_mutex_unlock(&srv->mu);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    tm_oai_req_free(&j->req);
    for (int i = 0; j->ch && i < j->n; i++) {
        free(j->ch[i].text);
        free(j->ch[i].lps);
        free(j->ch[i].plps);
        tm_reply_free(&j->ch[i].reply);
    }
    free(j->ch);
    free(j->fmt_echo);
    if (j->fmt) j->fmt->stream_free(&j->fs);
    free(j->out);
    free(j->grammar);
    free(j);
}

/* A streamed choice's waiter thread. */
static void *job_waiter(void *arg)
{
    choice *ch = arg;
    job *j = ch->j;
    tandem_stats stats;
    tandem_status st;
    int rc = tandem_wait(ch->h, &stats, &st);
    pthread_mutex_lock(&j->mu);
    ch->h = NULL;
    ch->rc = rc;
    ch->stats = stats;
    ch->st = st;
    ch->finished = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

static void out_add(job *j, char *s)
{
    if (!s) {
        j->oom = 1;
        return;
    }
    size_t n = strlen(s);
    if (j->out_len + n + 1 > j->out_cap) {
        size_t cap = (j->out_len + n + 1) * 2;
        char *o = realloc(j->out, cap);
        if (!o) {
            j->oom = 1;
            free(s);
            return;
        }
        j->out = o;
        j->out_cap = cap;
    }
    memcpy(j->out + j->out_len, s, n);
    j->out_len += n;
    free(s);
}

/* ---- the reply's parts (serve/reply.h) ------------------------------------------------------ */

/* A choice's reply parsed at its end (a cut by max_tokens drops an unfinished call); -1: out of memory */
static int job_finish_reply(job *j, choice *ch)
{
    const char *f = ch->stats.finish_reason;
    return tm_reply_finish(&ch->reply, f && !strcmp(f, "length"), next_random(j->srv));
}

/* The finish reason a reply with calls gets: "tool_calls", unless max_tokens cut it */
static const char *calls_finish(const tm_reply_part *p, const char *finish)
{
    return p->tc.n && strcmp(finish ? finish : "", "length") ? "tool_calls" : finish;
}

/* A stream's piece of choice ch through its reply reader into *p: what may go out now, as reasoning
 * and content; at the end (finished, rc 0) what is left, and the calls. -1: out of memory. */
static int reply_step(job *j, choice *ch, const char *text, size_t len, int finished, int rc, tm_reply_part *p)
{
    if (tm_reply_add(&ch->reply, text ? text : "", len)) return -1;
    if (finished && rc == 0) return job_finish_reply(j, ch) || tm_reply_rest(&ch->reply, p) ? -1 : 0;
    return tm_reply_delta(&ch->reply, p);
}

/* That step as OpenAI's chunks: reasoning and content, then the calls' pieces in a chunk of their own. */
static void stream_reply(job *j, choice *ch, const tm_oai_meta *m, const char *text, size_t len, int finished, int rc,
                         const tm_oai_logprobs *lp, const char **finish)
{
    tm_reply_part p;
    if (reply_step(j, ch, text, len, finished, rc, &p)) {
        j->oom = 1;
        return;
    }
    tm_oai_extra x = {p.reasoning, p.reasoning_len, NULL, NULL, 0};
    if (p.content_len || p.reasoning_len || lp) out_add(j, tm_oai_chunk_sse(m, p.content, p.content_len, 0, &x, lp, NULL));
    if (p.n_cd) {
        x = (tm_oai_extra){NULL, 0, NULL, p.cd, p.n_cd};
        out_add(j, tm_oai_chunk_sse(m, "", 0, 0, &x, NULL, NULL));
    }
    if (finished && rc == 0) *finish = calls_finish(&p, *finish);
}

/* Another API's view of choice ch's reply, its parts p: text, reasoning, calls, how it ended (the stop
 * sequence that ended it) */
static tm_api_reply api_reply(const job *j, const choice *ch, const tm_reply_part *p)
{
    int k = ch->stats.stop_index;
    return (tm_api_reply){p->reasoning, p->reasoning_len, p->content, p->content_len, &p->tc,
                          calls_finish(p, ch->stats.finish_reason), k >= 0 && k < j->req.n_stop ? j->req.stop[k] : NULL,
                          &ch->stats};
}

static tm_api_meta api_meta(const job *j)
{
    return (tm_api_meta){j->id, j->srv->model_name, j->meta.created, j->fmt_echo};
}

/* What a choice has produced since the last wake (taken under j->mu) */
typedef struct taken {
    char *text;
    size_t len;
    tandem_logprob *lps;
    size_t n_lps;
    int finished, rc;
} taken;

/* something of a choice to send: text, tokens, or an end not yet reported (j->mu held) */
static int job_pending(const job *j)
{
    for (int i = 0; i < j->n; i++) {
        const choice *c = &j->ch[i];
        if (c->text_len || c->n_lps || (c->finished && !c->ended)) return 1;
    }
    return 0;
}

/* One choice's share of a wake as SSE events: its text (through the reply reader where replies are
 * read), its tokens' logprobs, and at its end its finish chunk. 1: it failed (an error event went
 * out); 0 otherwise. */
static int fill_choice(job *j, choice *ch, taken *t)
{
    if (ch->ended) return 0; /* it said all it had (others of the job still run) */
    tm_oai_meta m = j->meta;
    m.index = ch->index;
    /* the tokens since the last chunk go with this one's text (a token whose text is held back, an
     * incomplete character or a possible stop string, goes with the chunk that has it) */
    tm_oai_logprob *lv = NULL;
    tm_oai_logprobs lp = {0};
    if (t->n_lps && !(lv = lp_convert(j->srv, t->lps, t->n_lps))) j->oom = 1;
    if (lv) lp = (tm_oai_logprobs){lv, t->n_lps, ch->lp_off};
    for (size_t i = 0; lv && i < t->n_lps; i++) ch->lp_off += tm_oai_lp_chars(lv[i].tok.bytes, lv[i].tok.len);
    const char *finish = ch->stats.finish_reason;
    if (j->fmt) { /* another API's events (one choice, its reply read into parts) */
        lp_free(lv, t->n_lps);
        tm_reply_part p;
        if (reply_step(j, ch, t->text, t->len, t->finished, t->rc, &p)) {
            j->oom = 1;
            return 0;
        }
        tm_api_meta am = api_meta(j);
        if (p.content_len || p.reasoning_len || p.n_cd)
            out_add(j, j->fmt->stream_part(&j->fs, &am, p.reasoning, p.reasoning_len, p.content, p.content_len, p.cd, p.n_cd));
        if (!t->finished) return 0;
        ch->ended = 1;
        if (t->rc) {
            out_add(j, j->fmt->stream_error(&j->fs, ch->st.msg));
            return 1;
        }
        tm_reply_whole(&ch->reply, &p);
        tm_api_reply whole = api_reply(j, ch, &p);
        tm_oai_usage u = job_usage(j);
        out_add(j, j->fmt->stream_end(&j->fs, &am, &whole, &u));
        if (j->fmt->keep) j->fmt->keep(j->srv->store, &am, j->req.messages_json, &whole, &u);
        return 0;
    }
    if (j->reads) stream_reply(j, ch, &m, t->text, t->len, t->finished, t->rc, lv ? &lp : NULL, &finish);
    else if (t->len || lv) out_add(j, tm_oai_chunk_sse(&m, t->text ? t->text : "", t->len, 0, NULL, lv ? &lp : NULL, NULL));
    lp_free(lv, t->n_lps);
    if (!t->finished) return 0;
    ch->ended = 1;
    if (t->rc == 0) {
        out_add(j, tm_oai_chunk_sse(&m, "", 0, 0, NULL, NULL, finish));
        return 0;
    }
    tm_oai_error e;
    tm_oai_error_set(&e, 500, "server_error", NULL, NULL, "%s", ch->st.msg);
    char *js = tm_oai_error_json(&e);
    size_t n = js ? strlen(js) + 16 : 0;
    char *ev = js ? malloc(n) : NULL;
    if (ev) snprintf(ev, n, "data: %s\n\n", js);
    free(js);
    out_add(j, ev);
    return 1;
}

/* Wait for text or an end, and format what came as SSE events into j->out.
 * -1: the stream must end now (client gone, shutdown, out of memory). */
static int job_fill(job *j)
{
    taken t[TM_OAI_MAX_CHOICES];
    pthread_mutex_lock(&j->mu);
    while (!job_pending(j) && !atomic_load(&j->cancel)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 100 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (!job_pending(j) && peer_gone(j->fd)) atomic_store(&j->cancel, 1);
    }
    int cancelled = atomic_load(&j->cancel);
    for (int i = 0; i < j->n; i++) {
        choice *c = &j->ch[i];
        t[i] = (taken){c->text, c->text_len, c->lps, c->n_lps, c->finished, c->rc};
        c->text = NULL;
        c->text_len = c->text_cap = 0;
        c->lps = NULL;
        c->n_lps = c->cap_lps = 0;
        cancelled |= c->finished && c->rc == TANDEM_E_CANCELLED;
    }
    pthread_mutex_unlock(&j->mu);
    j->out_len = j->out_off = 0;
    int failed = 0, ended = 0;
    if (!cancelled && j->phase == PH_START && j->fmt) {
        tm_api_meta am = api_meta(j);
        tm_oai_usage u = {j->fmt_in, 0, 0};
        out_add(j, j->fmt->stream_start(&j->fs, &am, &u));
        j->phase = PH_TEXT;
    } else if (!cancelled && j->phase == PH_START) {
        for (int i = 0; i < j->n && j->req.kind == TM_OAI_CHAT; i++) {
            tm_oai_meta m = j->meta;
            m.index = i;
            out_add(j, tm_oai_chunk_sse(&m, "", 0, 1, NULL, NULL, NULL));
        }
        j->phase = PH_TEXT;
    }
    for (int i = 0; i < j->n; i++) {
        if (!cancelled && !failed) failed = fill_choice(j, &j->ch[i], &t[i]);
        ended += j->ch[i].ended;
        free(t[i].text);
        free(t[i].lps);
    }
    if (cancelled) return -1;
    if (failed) atomic_store(&j->cancel, 1); /* the others stop at their next piece */
    if (failed || ended == j->n) {
        tm_oai_usage u = job_usage(j);
        if (!failed && j->req.include_usage) out_add(j, tm_oai_usage_sse(&j->meta, &u));
        if (!j->fmt) out_add(j, strdup("data: [DONE]\n\n")); /* the others' streams end with their own events */
        j->phase = PH_END;
    }
    return j->oom ? -1 : 0;
}

/* MHD's content reader for a stream. */
static ssize_t job_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    job *j = cls;
    while (j->out_off == j->out_len) {
        if (j->phase == PH_END) return MHD_CONTENT_READER_END_OF_STREAM;
        if (job_fill(j) < 0) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = j->out_len - j->out_off;
    if (n > max) n = max;
    memcpy(buf, j->out + j->out_off, n);
    j->out_off += n;
    return (ssize_t)n;
}

/* MHD destroys a stream's response (sent, or the client left). */
static void job_release(void *cls)
{
    job *j = cls;
    atomic_store(&j->cancel, 1);
    for (int i = 0; i < j->n; i++)
        if (j->ch[i].has_waiter) pthread_join(j->ch[i].waiter, NULL);
    job_log(j, 200);
    job_free(j);
}

/* ---- generation --------------------------------------------------------------------------- */

/* The choices returned, in order (order[n_ret]): prompt by prompt, its candidates as generated, or
 * (best_of > n) by their mean log-probability per token, highest first (a choice without tokens last;
 * ties keep the generated order), the first ret of them */
static void rank_choices(const job *j, int *order)
{
    for (int p = 0; p < j->np; p++) {
        double score[TM_OAI_MAX_N];
        int o[TM_OAI_MAX_N];
        for (int k = 0; k < j->per; k++) {
            const choice *c = &j->ch[p * j->per + k];
            double sum = 0;
            size_t n = c->n_lps - c->n_echo; /* the completion's tokens, not the echoed prompt's */
            for (size_t q = c->n_echo; q < c->n_lps; q++) sum += c->lps[q].logprob;
            score[k] = j->per > j->ret ? (n ? sum / (double)n : -INFINITY) : 0;
            o[k] = k;
        }
        for (int i = 1; i < j->per; i++) /* insertion sort: stable, per <= 8 */
            for (int k = i; k > 0 && score[o[k]] > score[o[k - 1]]; k--) {
                int t = o[k];
                o[k] = o[k - 1];
                o[k - 1] = t;
            }
        for (int k = 0; k < j->ret; k++) order[p * j->ret + k] = p * j->per + o[k];
    }
}

static enum MHD_Result submit_error(tm_server *srv, struct MHD_Connection *c, job *j, const tandem_status *st)
{
    const char *param = j->req.kind == TM_OAI_CHAT ? "messages" : "prompt";
    tm_oai_error e;
    if (st->code == TANDEM_E_LIMIT)
        tm_oai_error_set(&e, 400, "invalid_request_error", "context_length_exceeded", param, "%s", st->msg);
    else if (st->code == TANDEM_E_INVALID || st->code == TANDEM_E_UNSUPPORTED) /* the request, or this model, can't */
        tm_oai_error_set(&e, 400, "invalid_request_error", NULL, NULL, "%s", st->msg);
    else
        tm_oai_error_set(&e, 500, "server_error", NULL, NULL, "%s", st->msg);
    job_free(j);
    return reply_error(srv, c, &e, NULL);
}

/* keep (NULL-terminated, JOB_KEEP at most) += the texts of add not in it yet */
static void keep_add(const char **keep, const char *const *add)
{
    int n = 0;
    while (keep[n]) n++;
    for (int i = 0; add && add[i] && n < JOB_KEEP; i++) {
        int have = 0;
        for (int k = 0; k < n && !have; k++) have = !strcmp(keep[k], add[i]);
        if (!have) keep[n++] = add[i];
    }
    keep[n] = NULL;
}

/* A chat request with tools: its reply is read for calls in the server's dialect; tool_choice
 * required or naming a function holds it to calls by a grammar, the dialect's gen_open at the
 * prompt's end; auto holds the calls to the same grammar from the dialect's marker on, where the
 * model writes one (a lazy grammar). -1 with *e (400) when that cannot be done. */
static int tools_setup(tm_server *srv, job *j, tandem_request *q, tm_oai_error *e)
{
    const tm_oai_req *r = &j->req;
    if (!r->tools_json || r->tool_choice == TM_OAI_TOOLS_NONE) return 0;
    if (!srv->dialect) {
        if (r->tool_choice == TM_OAI_TOOLS_AUTO) return 0; /* the tools are shown; the reply is text */
        tm_oai_error_set(e, 400, "invalid_request_error", NULL, "tool_choice",
                         "this server does not know how its chat template writes tool calls (start it with "
                         "--tool-parser NAME: %s)", tm_tool_dialect_names());
        return -1;
    }
    j->calls = srv->dialect;
    /* auto: a lazy grammar where no other constraint holds the reply (nor harmony's reader another dialect's calls),
     * triggered by the dialect's marker (none where the text lacks it) or a bare call's start; a block the reply opens
     * with is left free: the dialect's (harmony's analysis), else the template's thinking ("" open: serve_generate) */
    int lazy = r->tool_choice == TM_OAI_TOOLS_AUTO, anchored = 0;
    const char *trigger = tm_tool_lazy_trigger(srv->dialect, &anchored);
    if (lazy && (!trigger || srv->harmony != srv->dialect->harmony || q->grammar || q->json_schema || q->json_object))
        return 0;
    tm_err err = {0};
    int rc = tm_tool_grammar(srv->dialect, r->tools_json, r->tool_choice == TM_OAI_TOOLS_NAMED ? r->tool_name : NULL,
                             r->parallel_tool_calls, lazy, &j->grammar, &err);
    if (rc != TM_OK) {
        tm_oai_error_set(e, rc == TM_E_NOMEM ? 500 : 400, rc == TM_E_NOMEM ? "server_error" : "invalid_request_error",
                         NULL, "tools", "%s", err.msg);
        return -1;
    }
    q->grammar = j->grammar;
    if (lazy) {
        q->grammar_trigger = trigger, q->grammar_trigger_anchored = anchored;
        const tm_tool_dialect *d = srv->dialect;
        if (d->skip_close) q->grammar_skip_open = d->skip_open, q->grammar_skip_close = d->skip_close;
        else if (srv->think) q->grammar_skip_open = srv->think->open, q->grammar_skip_close = srv->think->close;
        return 0;
    }
    j->prefix = srv->dialect->gen_open;
    return 0;
}

static enum MHD_Result serve_generate(tm_server *srv, struct MHD_Connection *c, http_req *hr, const char *url)
{
    const tm_api_fmt *fmt = hr->route == R_MESSAGES    ? &tm_api_anthropic
                            : hr->route == R_RESPONSES ? &tm_api_responses
                            : hr->route == R_INFILL    ? &tm_api_infill
                                                       : NULL;
    tm_oai_kind kind = fmt ? fmt->kind : hr->route == R_CHAT ? TM_OAI_CHAT : TM_OAI_COMPLETION;
    tm_serve_tok tok = {srv->m, srv->tpl, srv->ctx};
    tm_api_env env = {srv->store, &tok, srv->fim};
    tm_oai_req req;
    tm_oai_error e;
    char *fbody = NULL, *echo = NULL; /* another API's: the body as a chat request, the fields to repeat */
    if (fmt && fmt->request(hr->body ? hr->body : "", hr->len, 0, &env, &fbody, &echo, &e) != 0) return reply_error(srv, c, &e, NULL);
    int prc = tm_oai_parse(&req, kind, fmt ? fbody : hr->body, fmt ? strlen(fbody) : hr->len, &e);
    free(fbody);
    if (prc != 0) {
        free(echo);
        return reply_error(srv, c, &e, NULL);
    }
    job *j = job_new(srv, c, &req, url, hr->t0);
    if (!j) {
        tm_oai_req_free(&req);
        free(echo);
        return MHD_NO;
    }
    j->fmt = fmt;
    j->fmt_echo = echo;
    if (fmt) snprintf(j->id, sizeof j->id, "%s%016" PRIx64, fmt->id_prefix, next_random(srv));
    if (job_register(j) != 0) {
        job_free(j);
        return reply_errorf(srv, c, 503, "server_error", NULL, NULL, "the server is shutting down");
    }
    tandem_request q = srv->defaults;
    q.max_tokens = srv->n_predict > 0 ? srv->n_predict : kind == TM_OAI_CHAT ? srv->ctx : 16;
    if (!srv->seed_set) q.seed = next_random(srv);
    tm_oai_apply(&j->req, &q);
    tandem_status st;
    char *prompt = NULL;
    if (kind == TM_OAI_CHAT && tools_setup(srv, j, &q, &e) != 0) {
        job_free(j);
        return reply_error(srv, c, &e, NULL);
    }
    /* the reply read into parts: calls (a dialect for this request), reasoning (a template that shows
     * it, unless a constraint holds the reply from its start: a forced call, a grammar but a lazy one,
     * a schema, JSON mode); the markers it is read by stay in its text where they are special tokens */
    const tm_think_markers *think =
        kind != TM_OAI_CHAT ? NULL
        : srv->harmony      ? (srv->harmony_think ? &tm_think_tags : NULL)
        : !j->prefix && (!q.grammar || q.grammar_trigger) && !q.json_schema && !q.json_object ? srv->think : NULL;
    keep_add(j->keep, j->calls ? j->calls->keep : NULL);
    if (think && !srv->harmony) keep_add(j->keep, think->keep);
    if (j->keep[0]) q.keep_special = j->keep;
    if (kind == TM_OAI_CHAT && srv->harmony) { /* a constrained answer goes straight to the final channel */
        q.keep_special = TM_HARMONY_MARKERS;
        if (!j->prefix && ((q.grammar && !q.grammar_trigger) || q.json_schema || q.json_object))
            j->prefix = "<|channel|>final<|message|>";
    }
    if (kind == TM_OAI_CHAT) {
        if (!(prompt = tm_serve_chat_prompt(&tok, &j->req, 1, j->prefix, &e))) {
            job_free(j);
            return reply_error(srv, c, &e, NULL);
        }
        if (j->calls || think || j->fmt || srv->harmony) { /* (another API's writer takes the reply in parts) */
            j->reads = 1;
            int opened = !srv->harmony && tm_think_opened(think, prompt, strlen(prompt)), bad = 0;
            if (opened && q.grammar_skip_open) q.grammar_skip_open = ""; /* the reply starts inside the block */
            for (int i = 0; i < j->n; i++) {
                tm_reply_init(&j->ch[i].reply, j->calls, j->req.tools_json, think, opened, srv->harmony);
                if (j->calls && j->grammar) /* held to the calls' form: they stream as they are written */
                    tm_reply_stream_calls(&j->ch[i].reply, next_random(srv));
                bad |= j->prefix && tm_reply_add(&j->ch[i].reply, j->prefix, strlen(j->prefix));
            }
            if (bad) {
                free(prompt);
                job_free(j);
                return reply_errorf(srv, c, 500, "server_error", NULL, NULL, "out of memory");
            }
        }
        q.prompt = prompt;
        q.prompt_ids = NULL;
        q.no_special = 1; /* the rendered template holds the special tokens */
        if (j->fmt && j->req.stream) { /* a stream's first event tells the prompt's tokens (JSON: the stats) */
            int32_t *ids = NULL;
            size_t n = 0;
            if (tandem_tokenize(srv->m, prompt, strlen(prompt), 0, &ids, &n, &st) == 0) j->fmt_in = (int)n;
            free(ids);
        }
    }
    if (kind == TM_OAI_COMPLETION && j->fmt) { /* (llama.cpp's /infill: its writer takes the text in parts) */
        j->reads = 1;
        j->fmt_in = (int)tm_oai_prompt_at(&j->req, 0).n_ids;
        for (int i = 0; i < j->n; i++) tm_reply_init(&j->ch[i].reply, NULL, NULL, NULL, 0, 0);
    }
    if (j->req.suffix) { /* fill in the middle: the model's prefix, suffix and middle tokens around the texts */
        const char *const *f = srv->fim;
        size_t n = f ? strlen(f[0]) + strlen(j->req.prompt) + strlen(f[1]) + strlen(j->req.suffix) + strlen(f[2]) + 1 : 0;
        if (!f || !(prompt = malloc(n))) {
            job_free(j);
            if (!f)
                return reply_errorf(srv, c, 400, "invalid_request_error", NULL, NULL, "'suffix': this model's tokenizer has "
                                    "no fill-in-the-middle tokens (<|fim_prefix|>, <fim_prefix>, ...)");
            return reply_errorf(srv, c, 500, "server_error", NULL, NULL, "out of memory");
        }
        snprintf(prompt, n, "%s%s%s%s%s", f[0], j->req.prompt, f[1], j->req.suffix, f[2]);
        q.prompt = prompt;
    }
    if (j->req.want_logprobs || j->per > j->ret) q.on_logprob.fn = job_on_logprob;
    if (!j->req.want_logprobs && j->per > j->ret) q.logprobs = 0; /* best_of ranks by the tokens' logprobs */
    /* the prompt's scores: echo + logprobs (its text comes with them), vLLM's prompt_logprobs */
    int k_echo = j->req.echo && j->req.want_logprobs ? j->req.top_logprobs : -1;
    int k_plp = k_echo > j->req.prompt_logprobs ? k_echo : j->req.prompt_logprobs;
    if (k_plp >= 0) {
        q.prompt_logprobs = k_plp;
        q.on_prompt_logprob.fn = job_on_prompt_logprob;
    }
    if (j->req.echo && !j->req.want_logprobs && job_echo(j)) j->oom = 1;
    int rc = 0, n_sub = 0;
    for (; n_sub < j->n && rc == 0; n_sub++) { /* one request per choice: a prompt's at seeds seed, seed + 1, ... */
        tandem_request qi = q;
        qi.seed = q.seed + (uint64_t)(n_sub % j->per);
        if (j->np > 1) { /* OpenAI's batch: this choice's prompt */
            tm_oai_prompt pr = tm_oai_prompt_at(&j->req, n_sub / j->per);
            qi.prompt = pr.text, qi.prompt_ids = pr.ids, qi.n_prompt_ids = pr.n_ids;
        }
        rc = tandem_submit(srv->s, &qi, job_on_text, &j->ch[n_sub], &j->ch[n_sub].h, &st);
    }
    free(prompt); /* submit tokenized it */
    if (rc != 0) { /* the choices before the one refused: cancelled (nobody else waits on them) */
        for (int i = 0; i < n_sub - 1; i++) {
            tandem_stats stats;
            tandem_status s2;
            tandem_cancel(j->ch[i].h);
            tandem_wait(j->ch[i].h, &stats, &s2);
            j->ch[i].h = NULL;
        }
        return submit_error(srv, c, j, &st);
    }

    if (!j->req.stream) {
        int bad = -1; /* the first choice that failed */
        for (int i = 0; i < j->n; i++) {
            choice *ch = &j->ch[i];
            tandem_stats stats;
            tandem_status s2;
            int r = tandem_wait(ch->h, &stats, &s2);
            pthread_mutex_lock(&j->mu);
            ch->h = NULL;
            ch->finished = 1;
            ch->rc = r;
            ch->stats = stats;
            ch->st = s2;
            pthread_mutex_unlock(&j->mu);
            if (r != 0 && bad < 0) {
                bad = i;
                atomic_store(&j->cancel, 1); /* the others stop at their next piece */
            }
        }
        rc = bad < 0 ? 0 : j->ch[bad].rc;
        enum MHD_Result mr;
        tm_oai_logprob *lv[TM_OAI_MAX_CHOICES] = {0}, *pv[TM_OAI_MAX_CHOICES] = {0};
        tm_oai_plps plps[TM_OAI_MAX_CHOICES];
        tm_oai_logprobs lp[TM_OAI_MAX_CHOICES];
        tm_reply_part part[TM_OAI_MAX_CHOICES];
        tm_oai_extra x[TM_OAI_MAX_CHOICES];
        tm_oai_choice cv[TM_OAI_MAX_CHOICES];
        int order[TM_OAI_MAX_CHOICES];
        rank_choices(j, order);
        for (int i = 0; rc == 0 && i < j->n_ret && !j->oom; i++) {
            choice *ch = &j->ch[order[i]];
            if (j->req.want_logprobs && !(lv[i] = lp_convert(srv, ch->lps, ch->n_lps))) j->oom = 1;
            part[i] = (tm_reply_part){.content = ch->text ? ch->text : "", .content_len = ch->text_len};
            if (!j->oom && j->reads) {
                if (tm_reply_add(&ch->reply, ch->text ? ch->text : "", ch->text_len) || job_finish_reply(j, ch)) j->oom = 1;
                else tm_reply_whole(&ch->reply, &part[i]);
            }
            lp[i] = (tm_oai_logprobs){lv[i], ch->n_lps, 0};
            x[i] = (tm_oai_extra){part[i].reasoning, part[i].reasoning_len, &part[i].tc, NULL, 0};
            cv[i] = (tm_oai_choice){part[i].content, part[i].content_len, &x[i], j->req.want_logprobs ? &lp[i] : NULL,
                                    calls_finish(&part[i], ch->stats.finish_reason), NULL};
            if (j->req.prompt_logprobs >= 0 && !j->oom) { /* vLLM's */
                if (!(pv[i] = lp_convert(srv, ch->plps, ch->n_plps))) j->oom = 1;
                plps[i] = (tm_oai_plps){pv[i], ch->plps, ch->n_plps};
                cv[i].plp = &plps[i];
            }
        }
        if (rc == 0 && !j->oom) {
            tm_oai_usage u = job_usage(j);
            tm_api_reply ar = api_reply(j, &j->ch[order[0]], &part[0]);
            tm_api_meta am = api_meta(j);
            mr = reply(srv, c, 200, j->fmt ? j->fmt->json(&am, &ar, &u) : tm_oai_response_json(&j->meta, cv, j->n_ret, &u),
                       NULL);
            if (j->fmt && j->fmt->keep) j->fmt->keep(srv->store, &am, j->req.messages_json, &ar, &u);
            job_log(j, 200);
        } else if (rc == TANDEM_E_CANCELLED) {
            int stopping;
            pthread_mutex_lock(&srv->mu);
            stopping = srv->stopping;
            pthread_mutex_unlock(&srv->mu);
            job_log(j, stopping ? 503 : 499);
            mr = stopping ? reply_errorf(srv, c, 503, "server_error", NULL, NULL, "the server is shutting down")
                          : MHD_NO; /* the client is gone */
        } else {
            mr = reply_errorf(srv, c, 500, "server_error", NULL, NULL, "%s",
                              j->oom ? "out of memory" : j->ch[bad].st.msg);
            job_log(j, 500);
        }
        for (int i = 0; i < j->n_ret; i++) {
            lp_free(lv[i], j->ch[order[i]].n_lps);
            lp_free(pv[i], j->ch[order[i]].n_plps);
        }
        job_free(j);
        return mr;
    }

    /* stream: a waiter thread per choice ends it; MHD pulls the events through job_read */
    for (int i = 0; i < j->n; i++) {
        if (pthread_create(&j->ch[i].waiter, NULL, job_waiter, &j->ch[i]) == 0) {
            j->ch[i].has_waiter = 1;
            continue;
        }
        atomic_store(&j->cancel, 1); /* the choices with waiters stop at their next piece */
        for (int k = i; k < j->n; k++) { /* nobody else waits on these: safe here */
            tandem_stats stats;
            tandem_cancel(j->ch[k].h);
            tandem_wait(j->ch[k].h, &stats, &st);
            j->ch[k].h = NULL;
        }
        for (int k = 0; k < i; k++) pthread_join(j->ch[k].waiter, NULL);
        job_free(j);
        return reply_errorf(srv, c, 500, "server_error", NULL, NULL, "cannot start a thread");
    }
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, job_read, j, job_release);
    if (!r) {
        job_release(j);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    cors_headers(srv, r);
    count_request(srv);
    enum MHD_Result mr = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r); /* job_release runs when MHD is done with it */
    return mr;
}

/* ---- the request handler ------------------------------------------------------------------- */

static int route_of(const char *url, const char **canon, int *post)
{
    *post = 0;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (!strcmp(url, routes[i].path)) {
            *canon = routes[i].path;
            *post = routes[i].post;
            return routes[i].route;
        }
    if (!strncmp(url, "/v1/models/", 11) && url[11]) { /* GET /v1/models/{id} */
        *canon = "/v1/models/";
        return R_MODEL;
    }
    if (!strncmp(url, "/v1/responses/", 14) && url[14]) { /* GET or DELETE /v1/responses/{id} */
        *canon = "/v1/responses/";
        return R_RESPONSE;
    }
    *canon = NULL;
    return R_NONE;
}

/* Constant-time check of "Authorization: Bearer KEY", or Anthropic's "x-api-key: KEY". */
static int authorized(const tm_server *srv, struct MHD_Connection *c)
{
    if (!srv->api_key) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (h && strncasecmp(h, "Bearer ", 7) == 0) {
        h += 7;
    } else if (!(h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key"))) {
        return 0;
    }
    while (*h == ' ') h++;
    size_t n = strlen(h), k = strlen(srv->api_key);
    unsigned diff = n != k;
    for (size_t i = 0; i < k; i++) diff |= (unsigned char)srv->api_key[i] ^ (unsigned char)(i < n ? h[i] : 0);
    return diff == 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    tm_server *srv = cls;
    http_req *hr = *con_cls;
    if (!hr) { /* headers are in: set up, read the body in the next calls */
        if (!(hr = calloc(1, sizeof *hr))) return MHD_NO;
        hr->route = route_of(url, &hr->canon, &hr->post);
        if (hr->route == R_METRICS && !srv->metrics) hr->route = R_NONE, hr->canon = NULL;
        hr->t0 = tm_now_s();
        *con_cls = hr;
        return MHD_YES;
    }
    int is_post = !strcmp(method, MHD_HTTP_METHOD_POST);
    int wants_post = hr->post;
    if (*upload_size) { /* a piece of the body: keep it if it may be used (invariant 5) */
        if (wants_post && is_post && !hr->too_large) {
            if (hr->len + *upload_size > srv->max_body) {
                hr->too_large = 1;
                free(hr->body);
                hr->body = NULL;
                hr->len = hr->cap = 0;
            } else {
                if (hr->len + *upload_size + 1 > hr->cap) {
                    size_t cap = hr->cap ? hr->cap : 4096;
                    while (cap < hr->len + *upload_size + 1) cap *= 2;
                    char *b = realloc(hr->body, cap);
                    if (!b) return MHD_NO;
                    hr->body = b;
                    hr->cap = cap;
                }
                memcpy(hr->body + hr->len, upload, *upload_size);
                hr->len += *upload_size;
                hr->body[hr->len] = '\0';
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (hr->route == R_NONE) {
        srv_log(srv, "%s %s 404", method, url);
        return reply_errorf(srv, c, 404, "invalid_request_error", "unknown_url", NULL, "Invalid URL (%s %s)", method,
                            url);
    }
    int del = hr->route == R_RESPONSE && !strcmp(method, MHD_HTTP_METHOD_DELETE);
    int is_get = !strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD) || del;
    if (srv->cors && !strcmp(method, MHD_HTTP_METHOD_OPTIONS)) {
        srv_log(srv, "%s %s 204", method, url);
        return reply_preflight(srv, c, wants_post                 ? "POST, OPTIONS"
                                       : hr->route == R_RESPONSE ? "GET, HEAD, DELETE, OPTIONS"
                                                                 : "GET, HEAD, OPTIONS");
    }
    if (wants_post ? !is_post : !is_get) {
        const char *allow = wants_post ? "POST" : hr->route == R_RESPONSE ? "GET, HEAD, DELETE" : "GET, HEAD";
        srv_log(srv, "%s %s 405", method, url);
        return reply_errorf(srv, c, 405, "invalid_request_error", "method_not_allowed", allow,
                            "Method %s is not allowed for %s (use %s)", method, url, allow);
    }
    if (hr->route != R_HEALTH && !authorized(srv, c)) {
        srv_log(srv, "%s %s 401", method, url);
        return reply_errorf(srv, c, 401, "authentication_error", "invalid_api_key", NULL,
                            "Incorrect or missing API key (send \"Authorization: Bearer KEY\")");
    }
    if (hr->too_large) {
        srv_log(srv, "%s %s 413", method, url);
        return reply_errorf(srv, c, 413, "invalid_request_error", "request_too_large", NULL,
                            "the request body is larger than %zu bytes (the server's --max-body)", srv->max_body);
    }
    switch (hr->route) {
    case R_HEALTH:
        return reply(srv, c, 200, strdup("{\"status\":\"ok\"}"), NULL);
    case R_METRICS: {
        tm_server_counts k;
        tm_server_get_counts(srv, &k);
        return reply_as(srv, c, 200, tm_serve_metrics(&k, srv->model_name), "text/plain; version=0.0.4", NULL);
    }
    case R_MODELS:
        return reply(srv, c, 200, tm_oai_models_json(srv->model_name, srv->created, srv->ctx), NULL);
    case R_RESPONSE: { /* a stored response, or its deletion */
        int st = 500;
        char *js = NULL;
        if (tm_resp_lookup(srv->store, del, url + 14, &st, &js)) return MHD_NO;
        srv_log(srv, "%s %s %d", method, hr->canon, st);
        return reply(srv, c, st, js, NULL);
    }
    case R_MODEL: /* this server's one model, by its id */
        if (strcmp(url + 11, srv->model_name))
            return reply_errorf(srv, c, 404, "invalid_request_error", "model_not_found", NULL,
                                "The model '%.200s' does not exist (this server has '%s')", url + 11, srv->model_name);
        return reply(srv, c, 200, tm_oai_model_json(srv->model_name, srv->created, srv->ctx), NULL);
    case R_TOKENIZE:
    case R_DETOKENIZE:
    case R_COUNT_TOKENS: {
        tm_serve_tok t = {srv->m, srv->tpl, srv->ctx};
        tm_oai_error e;
        char *js = hr->route == R_TOKENIZE     ? tm_serve_tokenize(&t, hr->body, hr->len, &e)
                   : hr->route == R_DETOKENIZE ? tm_serve_detokenize(&t, hr->body, hr->len, &e)
                                               : tm_serve_count_tokens(&t, srv->dialect ? srv->dialect->gen_open : NULL,
                                                                       hr->body, hr->len, &e);
        srv_log(srv, "POST %s %d", hr->canon, js ? 200 : e.http);
        return js ? reply(srv, c, 200, js, NULL) : reply_error(srv, c, &e, NULL);
    }
    case R_EMBEDDINGS: {
        tm_serve_embed se = {srv->m, srv->s, srv->model_name};
        tm_oai_error e;
        char *js = tm_serve_embeddings(&se, hr->body, hr->len, &e);
        srv_log(srv, "POST %s %d", hr->canon, js ? 200 : e.http);
        return js ? reply(srv, c, 200, js, NULL) : reply_error(srv, c, &e, NULL);
    }
    default:
        return serve_generate(srv, c, hr, hr->canon);
    }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    http_req *hr = *con_cls;
    if (!hr) return;
    free(hr->body);
    free(hr);
    *con_cls = NULL;
}

/* ---- set-up ---------------------------------------------------------------------------------- */

void tm_server_opts_default(tm_server_opts *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
}

static void srv_free(tm_server *srv)
{
    tm_resp_store_free(srv->store);
    free(srv->model_name);
    free(srv->tpl);
    free(srv->api_key);
    free(srv->cors);
    for (int i = 0; srv->def_stop[i]; i++) free(srv->def_stop[i]);
    pthread_mutex_destroy(&srv->mu);
    free(srv);
}

int tm_server_start(tm_server **out, tandem_model *m, tandem_session *s, const tm_server_opts *o, tm_err *err)
{
    *out = NULL;
    if (o->port < 0 || o->port > 65535)
        return tm_errf(err, TM_E_INVALID, "serve: --port %d is out of range [0, 65535]", o->port);
    tm_server *srv = calloc(1, sizeof *srv);
    if (!srv) return tm_errf(err, TM_E_NOMEM, "serve: out of memory");
    pthread_mutex_init(&srv->mu, NULL);
    srv->m = m;
    srv->s = s;
    srv->max_body = o->max_body ? o->max_body : TM_SERVER_DEFAULT_MAX_BODY;
    srv->n_predict = o->n_predict;
    srv->seed_set = o->seed_set;
    srv->ctx = tandem_session_ctx(s);
    srv->log = o->log;
    srv->log_ud = o->log_ud;
    srv->created = (int64_t)time(NULL);
    if (o->defaults) srv->defaults = *o->defaults;
    else tandem_request_default(&srv->defaults);
    srv->defaults.prompt = NULL;
    srv->defaults.prompt_ids = NULL;
    srv->defaults.n_prompt_ids = 0;
    int oom = 0, n_stop = 0;
    for (int i = 0; o->defaults && o->defaults->stop && o->defaults->stop[i] && n_stop < TM_OAI_MAX_STOP; i++)
        if (!(srv->def_stop[n_stop++] = strdup(o->defaults->stop[i]))) oom = 1;
    srv->defaults.stop = n_stop ? (const char *const *)srv->def_stop : NULL;
    srv->model_name = strdup(o->model_name ? o->model_name : "tandem");
    if (!srv->model_name) oom = 1;
    if (o->chat_template && !(srv->tpl = strdup(o->chat_template))) oom = 1;
    if (o->api_key && o->api_key[0] && !(srv->api_key = strdup(o->api_key))) oom = 1;
    if (o->cors_origin && o->cors_origin[0] && !(srv->cors = strdup(o->cors_origin))) oom = 1;
    if (tm_resp_store_new(&srv->store, TM_RESP_STORE_ITEMS, TM_RESP_STORE_BYTES)) oom = 1;
    srv->metrics = o->metrics;
    const char *tpl_src = srv->tpl ? srv->tpl : tandem_model_chat_template(m);
    /* requests with tools render the model's "tool_use" template where it has one (tm_serve_template_for): the
       calls' dialect is the one it shows, the thinking the family either shows */
    const char *tool_src = srv->tpl ? NULL : tandem_model_tool_template(m);
    srv->fim = tm_serve_fim(m);
    const tm_think_markers *shown = tm_think_detect(tpl_src);
    if (!shown) shown = tm_think_detect(tool_src);
    if (!o->reasoning || !strcmp(o->reasoning, "auto")) {
        srv->think = shown;
    } else if (!strcmp(o->reasoning, "deepseek") || !strcmp(o->reasoning, "none")) {
        /* deepseek: the family the template shows, else <think> */
        srv->think = !strcmp(o->reasoning, "none") ? NULL : shown;
        if (!strcmp(o->reasoning, "deepseek") && !srv->think) srv->think = &tm_think_tags;
    } else {
        srv_free(srv);
        return tm_errf(err, TM_E_INVALID, "serve: --reasoning-format '%s' is not one of auto, none, deepseek",
                       o->reasoning);
    }
    if (!o->tool_parser || !strcmp(o->tool_parser, "auto")) {
        srv->dialect = tm_tool_dialect_detect(tool_src);
        if (!srv->dialect) srv->dialect = tm_tool_dialect_detect(tpl_src);
    } else if (strcmp(o->tool_parser, "none") != 0 && !(srv->dialect = tm_tool_dialect_named(o->tool_parser))) {
        srv_free(srv);
        return tm_errf(err, TM_E_INVALID, "serve: --tool-parser '%s' is not one of auto, none, %s", o->tool_parser,
                       tm_tool_dialect_names());
    }
    if (tm_tool_dialect_kept(srv->dialect, tool_src ? tool_src : tpl_src, tm_serve_special, m, &srv->kept))
        srv->dialect = &srv->kept; /* its markers are the vocabulary's special tokens: kept in the replies */
    srv->harmony = tm_harmony_detect(tpl_src) || (srv->dialect && srv->dialect->harmony);
    srv->harmony_think = !o->reasoning || strcmp(o->reasoning, "none") != 0;
    uint64_t seed = 0;
    if (getentropy(&seed, sizeof seed) != 0) seed = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)srv;
    srv->rand_base = seed;
    if (oom) {
        srv_free(srv);
        return tm_errf(err, TM_E_NOMEM, "serve: out of memory");
    }
    int fd = -1, ipv6 = 0;
    int rc = tm_serve_listen(o->host ? o->host : "127.0.0.1", o->port, &fd, &srv->port, &ipv6, err);
    if (rc != TM_OK) {
        srv_free(srv);
        return rc;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ITC;
    if (ipv6) flags |= MHD_USE_IPv6;
    if (srv->log) flags |= MHD_USE_ERROR_LOG;
    srv->d = MHD_start_daemon(flags, (uint16_t)srv->port, NULL, NULL, on_request, srv,
                              MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, srv, /* first, so it gets every message */
                              MHD_OPTION_LISTEN_SOCKET, fd,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)(o->max_conns > 0 ? o->max_conns : 64),
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600,
                              MHD_OPTION_END);
    if (!srv->d) {
        close(fd);
        srv_free(srv);
        return tm_errf(err, TM_E_IO, "serve: libmicrohttpd could not start on port %d", srv->port);
    }
    *out = srv;
    return TM_OK;
}

int tm_server_port(const tm_server *srv) { return srv->port; }

void tm_server_get_counts(tm_server *srv, tm_server_counts *c)
{
    pthread_mutex_lock(&srv->mu);
    *c = srv->counts;
    pthread_mutex_unlock(&srv->mu);
}

void tm_server_stop(tm_server *srv)
{
    if (!srv) return;
    MHD_socket lfd = MHD_quiesce_daemon(srv->d); /* no new connections */
    pthread_mutex_lock(&srv->mu);
    srv->stopping = 1;
    for (job *j = srv->jobs; j; j = j->next) {
        atomic_store(&j->cancel, 1);
        pthread_mutex_lock(&j->mu);
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
    }
    pthread_mutex_unlock(&srv->mu);
    MHD_stop_daemon(srv->d); /* closes the connections, joins their threads */
    if (lfd != MHD_INVALID_SOCKET) close(lfd);
    srv_free(srv);
}
