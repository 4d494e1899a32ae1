/* tests/test_sched.c: the scheduler: concurrent requests give the same text
 * as alone (continuous batching does not change results), every route, and
 * cancellation in any state returns every KV page. */
#include "harness.h"
#include "toklog_util.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "core/cpu.h"
#include "pkg/convert.h"
#include "model/model.h"
#include "runtime/kvcache.h"
#include "runtime/rt_model.h"
#include "runtime/session-impl.h"
#include "runtime/session.h"
#include "text/grammar.h"
#include "text/json_gate.h"
#include "text/tokenizer.h"
#include "text/vocab_trie.h"

typedef struct sink {
    char buf[4096];
    size_t len;
    int cancel_after; /* cancel once this many pieces arrived (0 = never) */
    int pieces;
} sink;

static int on_text(void *ud, const char *piece, size_t len, int32_t tok)
{
    (void)tok;
    sink *k = ud;
    if (k->len + len < sizeof k->buf) {
        memcpy(k->buf + k->len, piece, len);
        k->len += len;
        k->buf[k->len] = '\0';
    }
    k->pieces++;
    return k->cancel_after && k->pieces >= k->cancel_after;
}

static const char *prompts[] = {
    "Once upon a time, there was a little girl who",
    "The old man looked at the sea and said,",
    "It was a dark and stormy night; the rain fell in torrents, except at occasional intervals, when it was checked by a violent gust of wind which swept up the streets",
    "She opened the door",
};

/* greedy, n tokens whatever the model says (EOS ignored) */
static tandem_request greedy_request(int n)
{
    tandem_request r;
    memset(&r, 0, sizeof r);
    r.max_tokens = n;
    r.temperature = 0;
    r.top_p = 1;
    r.repetition_penalty = 1;
    r.ignore_eos = 1;
    return r;
}

/* a stateless session on 2 threads with a 256-token context */
static tandem_session_opts two_thread_opts(void)
{
    tandem_session_opts o;
    memset(&o, 0, sizeof o);
    o.n_threads = 2;
    o.max_ctx = 256;
    o.stateless = 1;
    return o;
}

/* The model's end-of-sequence ids swapped for {id} (a test's stand-in EOS), and back. */
typedef struct eos_save {
    int ids[16], n;
} eos_save;

static eos_save eos_only(tm_rt_model *rm, int32_t id)
{
    eos_save e;
    memcpy(e.ids, rm->eos_ids, sizeof e.ids);
    e.n = rm->n_eos;
    rm->eos_ids[0] = id;
    rm->n_eos = 1;
    return e;
}

static void eos_restore(tm_rt_model *rm, const eos_save *e)
{
    memcpy(rm->eos_ids, e->ids, sizeof e->ids);
    rm->n_eos = e->n;
}

/* a session on rm with opts o, NULL (a check failed) if it cannot be made */
static tm_session *open_session(tm_rt_model *rm, tandem_session_opts o)
{
    tm_err err = {0};
    tm_session *s = NULL;
    CHECKF(tm_session_new(&s, rm, &o, &err) == TM_OK, "%s", err.msg);
    return s;
}

/* The core plan comes from the cpus this thread may use (taskset, a
 * cpuset): run on only the last of them, both sides share it, whatever
 * n_threads asks. */
/* stop strings end to end: a greedy text cut at the first place any of the stops occurs (the stop
 * dropped), finish "stop" and the index of the stop that matched; a stop that never occurs leaves
 * the text whole, -1 */
static void stop_strings(tm_session *s)
{
    tm_err err = {0};
    tandem_request r = greedy_request(40);
    r.prompt = prompts[1];
    sink whole = {0};
    tandem_stats st;
    CHECKF(tm_session_generate(s, &r, on_text, &whole, &st, &err) == TM_OK, "%s", err.msg);
    CHECK(!strcmp(st.finish_reason, "length") && st.stop_index == -1 && whole.len > 24);
    /* a stop taken from the middle of the text, a few bytes long (it may span tokens) */
    char mid[8];
    snprintf(mid, sizeof mid, "%.5s", whole.buf + whole.len / 2);
    const char *first = strstr(whole.buf, mid);
    for (int order = 0; order < 2; order++) {
        const char *stops[] = {order ? mid : "\x01never", order ? "\x01never" : mid, NULL};
        r.stop = stops;
        sink cut = {0};
        CHECKF(tm_session_generate(s, &r, on_text, &cut, &st, &err) == TM_OK, "%s", err.msg);
        CHECKF(!strcmp(st.finish_reason, "stop") && st.stop_index == (order ? 0 : 1) &&
                   cut.len == (size_t)(first - whole.buf) && !memcmp(cut.buf, whole.buf, cut.len),
               "stop '%s': finish %s index %d, '%s' of '%s'", mid, st.finish_reason, st.stop_index, cut.buf, whole.buf);
    }
    const char *never[] = {"\x01never", NULL};
    r.stop = never;
    sink all = {0};
    CHECKF(tm_session_generate(s, &r, on_text, &all, &st, &err) == TM_OK, "%s", err.msg);
    CHECK(!strcmp(st.finish_reason, "length") && st.stop_index == -1 && !strcmp(all.buf, whole.buf));
}

static void core_plan(tm_rt_model *rm)
{
    tm_err err = {0};
    tandem_session_opts o = two_thread_opts();
    cpu_set_t was, one;
    if (sched_getaffinity(0, sizeof was, &was) != 0) return;
    int last = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &was)) last = c;
    CPU_ZERO(&one);
    CPU_SET(last, &one);
    sched_setaffinity(0, sizeof one, &one);
    tm_session *s = NULL;
    CHECKF(tm_session_new(&s, rm, &o, &err) == TM_OK, "%s", err.msg);
    sched_setaffinity(0, sizeof was, &was);
    if (!s) return;
    CHECK_EQ_INT(s->plan.n_pre, 1);
    CHECK_EQ_INT(s->plan.n_dec, 1);
    CHECK_EQ_INT(s->plan.pre_cpus[0], last);
    CHECK_EQ_INT(s->plan.dec_cpus[0], last);
    tm_session_free(s);
}

/* The prefix cache (sched.c): a second request whose prompt extends the
 * first's prompt and reply reuses that KV and prefills only the rest. On
 * decode-only both turns' KV comes from the same engine and weights (the
 * reply's from decode steps, a fresh session's from one prefill chunk: the
 * same GEMV rows, attention summed in another order), and the greedy text
 * equals a fresh session's; on hybrid and prefill-only a fresh prefill
 * computes the reply's KV with the prefill engine's weights, so the text is
 * only checked to be there. Pages: the cache holds one sequence's, and every
 * page is either free or the cache's once requests are done. */
static void prefix_cache(tm_rt_model *rm)
{
    static const tandem_route routes[] = {TANDEM_ROUTE_DECODE_ONLY, TANDEM_ROUTE_HYBRID, TANDEM_ROUTE_PREFILL_ONLY};
    for (int ri = 0; ri < 3; ri++) {
        tm_err err = {0};
        tandem_session_opts o = two_thread_opts();
        o.max_seqs = 1;
        o.route = routes[ri];
        tm_session *fresh = NULL, *s = NULL;
        CHECKF(tm_session_new(&fresh, rm, &o, &err) == TM_OK, "%s", err.msg);
        o.prefix_cache = 1;
        CHECKF(tm_session_new(&s, rm, &o, &err) == TM_OK, "%s", err.msg);
        if (!s || !fresh) {
            tm_session_free(s);
            tm_session_free(fresh);
            return;
        }
        int total = tm_kv_cache_free_pages(s->kv);
        tandem_request r = greedy_request(16);
        r.prompt = prompts[0];
        sink t1 = {0}, a2 = {0}, b2 = {0}, c3 = {0};
        tandem_stats st;
        CHECKF(tm_session_generate(s, &r, on_text, &t1, &st, &err) == TM_OK, "%s", err.msg);
        CHECK_EQ_INT(st.n_cached, 0);
        int n1 = st.n_prompt;
        CHECKF(tm_kv_cache_idle_pages(s->kv) == (st.n_prompt + 15) / 16 && tm_kv_cache_free_pages(s->kv) == total,
               "route %d: the finished request's %d whole pages are kept idle (%d)", ri, (st.n_prompt + 15) / 16,
               tm_kv_cache_idle_pages(s->kv));
        char p2[4200];
        snprintf(p2, sizeof p2, "%s%s and then", prompts[0], t1.buf);
        r.prompt = p2;
        CHECKF(tm_session_generate(s, &r, on_text, &a2, &st, &err) == TM_OK, "%s", err.msg);
        CHECKF(st.n_cached >= n1 - 16 && st.n_cached < st.n_prompt && st.n_cached % 16 == 0,
               "route %d: %d of %d prompt tokens reused (first prompt %d)", ri, st.n_cached, st.n_prompt, n1);
        CHECKF(tm_session_generate(fresh, &r, on_text, &b2, &st, &err) == TM_OK, "%s", err.msg);
        CHECK_EQ_INT(st.n_cached, 0);
        CHECK_EQ_INT(st.n_generated, 16);
        if (routes[ri] == TANDEM_ROUTE_DECODE_ONLY)
            CHECKF(strcmp(a2.buf, b2.buf) == 0, "decode-only: reused '%s', fresh '%s'", a2.buf, b2.buf);
        else
            CHECK(a2.len > 0);
        r.prompt = prompts[1]; /* nothing in common but the BOS token */
        CHECKF(tm_session_generate(s, &r, on_text, &c3, &st, &err) == TM_OK, "%s", err.msg);
        CHECK(st.n_cached <= 1);
        CHECK_EQ_INT(tm_kv_cache_free_pages(s->kv), total); /* idle cached pages count as free */
        CHECK(tm_kv_cache_idle_pages(s->kv) > 0);
        tm_session_free(s);
        tm_session_free(fresh);
    }
}

/* tandem_request.logprobs: each generated token's log-probability is the log-softmax of the logits
 * its route gave at that step (tm_session_score runs the same route over the same ids), before the
 * penalties and the temperature, which this request sets far from neutral; the alternatives are
 * that step's most likely tokens in order; greedy draws the first of them; an EOS that ends the
 * request is not reported. */
typedef struct lp_log {
    tandem_logprob v[64];
    int n;
    int32_t toks[64];
    int n_toks;
} lp_log;

static int on_lp(void *ud, const tandem_logprob *lp)
{
    lp_log *g = ud;
    if (g->n < 64) g->v[g->n++] = *lp;
    return 0;
}

static int on_text_tok(void *ud, const char *piece, size_t len, int32_t tok)
{
    (void)piece, (void)len;
    lp_log *g = ud;
    if (tok >= 0 && g->n_toks < 64) g->toks[g->n_toks++] = tok;
    return 0;
}

static void logprobs(tm_rt_model *rm)
{
    static const tandem_route routes[] = {TANDEM_ROUTE_DECODE_ONLY, TANDEM_ROUTE_HYBRID};
    int V = rm->decode->V;
    for (int ri = 0; ri < 2; ri++)
        for (int greedy = 0; greedy < 2; greedy++) {
            tm_err err = {0};
            tandem_session_opts o = two_thread_opts();
            o.route = routes[ri];
            tm_session *s = NULL;
            CHECKF(tm_session_new(&s, rm, &o, &err) == TM_OK, "%s", err.msg);
            if (!s) return;
            tandem_request r = greedy_request(24);
            r.prompt = prompts[1];
            r.logprobs = greedy ? 3 : 7;
            r.on_logprob.fn = on_lp;
            if (!greedy) {
                r.temperature = 0.7f;
                r.top_k = 8;
                r.repetition_penalty = 0.6f; /* < 1 and < 0: seen tokens favoured, so drawn ones are penalized */
                r.presence_penalty = -1.0f;
                r.seed = 11;
            }
            lp_log g = {0};
            tandem_stats st;
            CHECKF(tm_session_generate(s, &r, on_text_tok, &g, &st, &err) == TM_OK, "%s", err.msg);
            CHECK_EQ_INT(g.n, st.n_generated); /* EOS ignored: every token reported */
            int32_t *ids = NULL;
            size_t np = 0;
            tm_tok_encode(rm->tok, r.prompt, strlen(r.prompt), 1, &ids, &np, &err);
            CHECK_EQ_INT((int)np, st.n_prompt);
            int n = (int)np + g.n;
            ids = realloc(ids, sizeof(int32_t) * (size_t)n);
            for (int k = 0; k < g.n; k++) ids[np + (size_t)k] = g.v[k].token;
            float *lg = malloc(sizeof(float) * (size_t)V * (size_t)(g.n + 1));
            CHECKF(tm_session_score(s, ids, n, (int)np, routes[ri], lg, &err) == TM_OK, "%s", err.msg);
            double worst = 0, scaled_gap = 0;
            for (int k = 0; k < g.n; k++) {
                const float *x = lg + (size_t)k * (size_t)V;
                const tandem_logprob *e = &g.v[k];
                double m = -INFINITY, sum = 0, sum_t = 0;
                for (int i = 0; i < V; i++) m = x[i] > m ? x[i] : m;
                for (int i = 0; i < V; i++) sum += exp((double)x[i] - m), sum_t += exp(((double)x[i] - m) / 0.7);
                double lse = m + log(sum);
                double d = fabs(e->logprob - ((double)x[e->token] - lse));
                worst = d > worst ? d : worst;
                /* what the temperature's distribution would have said */
                double lp_t = ((double)x[e->token] - m) / 0.7 - log(sum_t);
                scaled_gap += fabs(lp_t - ((double)x[e->token] - lse));
                CHECK_EQ_INT(e->n_top, r.logprobs);
                for (int j = 0; j < e->n_top; j++) {
                    d = fabs(e->top_logprob[j] - ((double)x[e->top_token[j]] - lse));
                    worst = d > worst ? d : worst;
                    if (j) CHECK(e->top_logprob[j] <= e->top_logprob[j - 1]);
                    /* nothing outside the list beats its last entry */
                    if (j == e->n_top - 1)
                        for (int i = 0; i < V; i++) {
                            int in = 0;
                            for (int q = 0; q < e->n_top; q++) in |= e->top_token[q] == i;
                            if (!in && x[i] > x[e->top_token[j]]) {
                                CHECKF(0, "route %d step %d: token %d (%g) outside the top %d beats %g", ri, k, i, x[i],
                                       e->n_top, x[e->top_token[j]]);
                                break;
                            }
                        }
                }
                if (greedy) CHECK(e->token == e->top_token[0] && e->logprob == e->top_logprob[0] && e->rank == 1);
                int lo = 1, hi = 1; /* 1 + the ids above it, within the recomputation's difference */
                for (int i = 0; i < V; i++) lo += x[i] > x[e->token] + 2e-4f, hi += x[i] > x[e->token] - 2e-4f;
                CHECKF(e->rank >= lo && e->rank <= hi, "route %d step %d: rank %d, want %d..%d", ri, k, e->rank, lo, hi);
                if (k < g.n_toks) CHECK_EQ_INT(g.toks[k], e->token); /* the same tokens as on_text saw */
            }
            CHECKF(worst < 2e-4, "route %d greedy %d: logprobs off the route's logits by %g", ri, greedy, worst);
            if (!greedy) CHECKF(scaled_gap / g.n > 0.05, "the temperature would have moved them by %g", scaled_gap / g.n);
            free(lg);
            free(ids);
            /* out of range */
            r.logprobs = TANDEM_MAX_LOGPROBS + 1;
            tm_req *q = NULL;
            CHECK_EQ_INT(tm_session_submit(s, &r, on_text_tok, &g, &q, &err), TM_E_INVALID);
            CHECK(strstr(err.msg, "logprobs") != NULL);
            tm_session_free(s);
        }
    /* an EOS that ends the request is not reported: the model's 6th greedy token made its EOS */
    tm_err err = {0};
    tm_session *s = open_session(rm, two_thread_opts());
    if (!s) return;
    tandem_request r = greedy_request(24);
    r.prompt = prompts[0];
    r.logprobs = 0;
    r.on_logprob.fn = on_lp;
    r.ignore_eos = 0;
    lp_log g = {0}, h = {0};
    tandem_stats st;
    CHECKF(tm_session_generate(s, &r, on_text_tok, &g, &st, &err) == TM_OK, "%s", err.msg);
    CHECK(g.n == 24 && g.v[0].n_top == 0 && !strcmp(st.finish_reason, "length"));
    int k = 0;
    while (k < 5 && g.v[k].token != g.v[5].token) k++; /* the first time that token comes */
    eos_save saved = eos_only(rm, g.v[5].token);
    CHECKF(tm_session_generate(s, &r, on_text_tok, &h, &st, &err) == TM_OK, "%s", err.msg);
    CHECKF(!strcmp(st.finish_reason, "stop") && st.n_generated == k + 1 && h.n == k, "finish %s, %d generated, %d reported",
           st.finish_reason, st.n_generated, h.n);
    for (int i = 0; i < h.n; i++) CHECK(h.v[i].token == g.v[i].token && h.v[i].logprob == g.v[i].logprob);
    eos_restore(rm, &saved);
    tm_session_free(s);
}

/* The prompt's scores (request.prompt_logprobs, on_prompt_logprob): every prompt token from the second
 * on, in order, before any generated token, each the log-softmax of the route's own engine at that
 * row: against the same session scoring the prompt's prefix up to that token (tm_session_score, the
 * last row's logits) at a few places; the generated text unchanged; max_tokens "none" (scored only);
 * a cancel from the callback; the prefix cache passed by (a scored prompt is prefilled whole); the
 * range check. */
typedef struct plp_log {
    tandem_logprob v[128];
    int idx[128], n, cancel_at;
} plp_log;

static int on_plp(void *ud, int index, const tandem_logprob *lp)
{
    plp_log *g = ud;
    if (g->n < 128) g->idx[g->n] = index, g->v[g->n++] = *lp;
    return g->cancel_at && index >= g->cancel_at;
}

typedef struct plp_ud {
    sink text;
    plp_log lp;
} plp_ud;

static int plp_text(void *ud, const char *piece, size_t len, int32_t tok)
{
    return on_text(&((plp_ud *)ud)->text, piece, len, tok);
}

static int plp_cb(void *ud, int index, const tandem_logprob *lp)
{
    plp_ud *u = ud;
    CHECKF(u->text.len == 0, "prompt score %d after generated text", index);
    return on_plp(&u->lp, index, lp);
}

static void prompt_scores(tm_rt_model *rm)
{
    static const tandem_route routes[] = {TANDEM_ROUTE_HYBRID, TANDEM_ROUTE_DECODE_ONLY, TANDEM_ROUTE_PREFILL_ONLY};
    int V = rm->decode->V;
    tm_err err = {0};
    int32_t *ids = NULL;
    size_t np = 0;
    CHECK(tm_tok_encode(rm->tok, prompts[2], strlen(prompts[2]), 1, &ids, &np, &err) == TM_OK && np > 12 && np < 128);
    float *lg = malloc(sizeof(float) * (size_t)V);
    for (int ri = 0; ri < 3 && ids; ri++) {
        tandem_session_opts o = two_thread_opts();
        o.route = routes[ri];
        tm_session *s = open_session(rm, o);
        if (!s) break;
        int free0 = tm_kv_cache_free_pages(s->kv);
        tandem_request r = greedy_request(12);
        r.prompt = prompts[2];
        sink plain = {0};
        tandem_stats st;
        CHECKF(tm_session_generate(s, &r, on_text, &plain, &st, &err) == TM_OK, "%s", err.msg);
        r.prompt_logprobs = 4;
        r.on_prompt_logprob.fn = plp_cb;
        plp_ud u;
        memset(&u, 0, sizeof u);
        CHECKF(tm_session_generate(s, &r, plp_text, &u, &st, &err) == TM_OK, "%s", err.msg);
        CHECKF(!strcmp(u.text.buf, plain.buf), "%s: the text changed with the prompt's scores:\n%s\n%s",
               tm_route_name(routes[ri]), u.text.buf, plain.buf);
        CHECK_EQ_INT(u.lp.n, (int)np);
        CHECK(!strcmp(st.route, tm_route_name(routes[ri])));
        CHECK(u.lp.idx[0] == 0 && u.lp.v[0].token == ids[0] && isnan(u.lp.v[0].logprob) && u.lp.v[0].n_top == 0);
        double worst = 0;
        for (int i = 1; i < u.lp.n; i++) {
            const tandem_logprob *e = &u.lp.v[i];
            CHECK(u.lp.idx[i] == i && e->token == ids[i] && e->n_top == 4 && e->logprob <= 0 && e->rank >= 1);
            CHECK((e->rank == 1) == (e->logprob == e->top_logprob[0]) || e->top_logprob[0] == e->top_logprob[1]);
            for (int j = 1; j < e->n_top; j++) CHECK(e->top_logprob[j] <= e->top_logprob[j - 1]);
            CHECK(e->logprob <= e->top_logprob[0] + 1e-6f);
        }
        int at[] = {1, 5, (int)np / 2, (int)np - 2};
        for (int k = 0; k < 4; k++) { /* token at[k] + 1 given the prefix [0, at[k]] */
            int t = at[k];
            CHECKF(tm_session_score(s, ids, t + 1, t + 1, routes[ri], lg, &err) == TM_OK, "%s", err.msg);
            double m = -INFINITY, sum = 0;
            for (int i = 0; i < V; i++) m = lg[i] > m ? lg[i] : m;
            for (int i = 0; i < V; i++) sum += exp((double)lg[i] - m);
            double want = (double)lg[ids[t + 1]] - m - log(sum), d = fabs(want - u.lp.v[t + 1].logprob);
            worst = d > worst ? d : worst;
            /* its rank: 1 + the ids above it, within the logits' own difference */
            int lo = 1, hi = 1;
            float x = lg[ids[t + 1]];
            for (int i = 0; i < V; i++) lo += lg[i] > x + 2e-3f, hi += lg[i] > x - 2e-3f;
            CHECKF(u.lp.v[t + 1].rank >= lo && u.lp.v[t + 1].rank <= hi, "%s: prompt token %d rank %d, want %d..%d",
                   tm_route_name(routes[ri]), t + 1, u.lp.v[t + 1].rank, lo, hi);
        }
        CHECKF(worst < 2e-3, "%s: prompt scores off the prefix's own last row by %g", tm_route_name(routes[ri]), worst);
        /* scored only: nothing generated */
        memset(&u, 0, sizeof u);
        r.max_tokens = TANDEM_MAX_TOKENS_NONE;
        CHECKF(tm_session_generate(s, &r, plp_text, &u, &st, &err) == TM_OK, "%s", err.msg);
        CHECK(st.n_generated == 0 && u.text.len == 0 && u.lp.n == (int)np && !strcmp(st.finish_reason, "length"));
        /* cancelled from the callback */
        memset(&u, 0, sizeof u);
        u.lp.cancel_at = 3;
        r.max_tokens = 12;
        CHECK_EQ_INT(tm_session_generate(s, &r, plp_text, &u, &st, &err), TM_E_CANCELLED);
        CHECK(u.lp.n == 4 && u.text.len == 0);
        CHECK_EQ_INT(tm_kv_cache_free_pages(s->kv), free0);
        r.prompt_logprobs = TANDEM_MAX_LOGPROBS + 1;
        tm_req *q = NULL;
        CHECK_EQ_INT(tm_session_submit(s, &r, plp_text, &u, &q, &err), TM_E_INVALID);
        CHECK(strstr(err.msg, "prompt_logprobs") != NULL);
        tm_session_free(s);
    }
    /* with the prefix cache on: a scored prompt takes no cached pages */
    tandem_session_opts o = two_thread_opts();
    o.prefix_cache = 1;
    tm_session *s = open_session(rm, o);
    if (s && ids) {
        tandem_request r = greedy_request(4);
        r.prompt = prompts[2];
        sink t = {0};
        tandem_stats st;
        CHECKF(tm_session_generate(s, &r, on_text, &t, &st, &err) == TM_OK, "%s", err.msg);
        CHECKF(tm_session_generate(s, &r, on_text, &t, &st, &err) == TM_OK && st.n_cached > 0, "cached %d", st.n_cached);
        r.prompt_logprobs = 0;
        r.on_prompt_logprob.fn = plp_cb;
        plp_ud u;
        memset(&u, 0, sizeof u);
        CHECKF(tm_session_generate(s, &r, plp_text, &u, &st, &err) == TM_OK, "%s", err.msg);
        CHECK(st.n_cached == 0 && u.lp.n == (int)np && u.lp.v[1].n_top == 0);
    }
    tm_session_free(s);
    free(lg);
    free(ids);
}

/* The prefix cache with requests at once (sched.c, kvcache.h's shared pages): requests whose
 * prompts start with a finished one's take its pages, shared among them while they decode
 * together, and give the same text as without the cache on the decode-only route (whose KV is
 * the same computation either way); a prompt's pages are published once its prefill is done, so
 * a request that arrives while the first still decodes shares them; every page comes back. */
static void prefix_shared(tm_rt_model *rm)
{
    static const char *tails[] = {" She", " The sea was", " Then a ship came into the harbour and", " He"};
    char pr[4][1024];
    for (int i = 0; i < 4; i++) snprintf(pr[i], sizeof pr[i], "%s%s", prompts[2], tails[i]);
    sink plain[4], cached[4];
    memset(plain, 0, sizeof plain);
    memset(cached, 0, sizeof cached);
    int n_cached[4] = {0};
    for (int with = 0; with < 2; with++) {
        tm_err err = {0};
        tandem_session_opts o = two_thread_opts();
        o.max_seqs = 4;
        o.route = TANDEM_ROUTE_DECODE_ONLY;
        o.prefix_cache = with;
        tm_session *s = NULL;
        CHECKF(tm_session_new(&s, rm, &o, &err) == TM_OK, "%s", err.msg);
        if (!s) return;
        int total = tm_kv_cache_free_pages(s->kv);
        sink *out = with ? cached : plain;
        tandem_request r = greedy_request(24);
        tandem_stats st;
        r.prompt = prompts[2];
        sink first = {0};
        CHECKF(tm_session_generate(s, &r, on_text, &first, &st, &err) == TM_OK, "%s", err.msg);
        tm_req *q[4];
        for (int i = 0; i < 4; i++) {
            r.prompt = pr[i];
            CHECKF(tm_session_submit(s, &r, on_text, &out[i], &q[i], &err) == TM_OK, "%s", err.msg);
        }
        for (int i = 0; i < 4; i++) {
            CHECKF(tm_req_wait(q[i], &st, &err) == TM_OK, "%s", err.msg);
            if (with) n_cached[i] = st.n_cached;
            else CHECK_EQ_INT(st.n_cached, 0);
        }
        CHECK_EQ_INT(tm_kv_cache_free_pages(s->kv), total);
        if (with) CHECK(tm_kv_cache_idle_pages(s->kv) > 0);
        tm_session_free(s);
    }
    for (int i = 0; i < 4; i++) {
        CHECKF(n_cached[i] >= 16 && n_cached[i] % 16 == 0, "request %d: %d prompt tokens from the cache", i, n_cached[i]);
        CHECKF(plain[i].len > 0 && !strcmp(plain[i].buf, cached[i].buf), "request %d: '%s' with the cache, '%s' without",
               i, cached[i].buf, plain[i].buf);
    }

    /* hybrid: the first request's prompt pages are shared while it decodes */
    tm_err err = {0};
    tandem_session_opts o = two_thread_opts();
    o.max_seqs = 2;
    o.route = TANDEM_ROUTE_HYBRID;
    o.prefix_cache = 1;
    tm_session *s = NULL;
    CHECKF(tm_session_new(&s, rm, &o, &err) == TM_OK, "%s", err.msg);
    if (!s) return;
    int total = tm_kv_cache_free_pages(s->kv);
    tandem_request r = greedy_request(200);
    r.prompt = pr[2];
    sink a = {0}, b = {0};
    tm_req *qa, *qb;
    CHECKF(tm_session_submit(s, &r, on_text, &a, &qa, &err) == TM_OK, "%s", err.msg);
    for (int spin = 0; spin < 20000 && !__atomic_load_n(&a.pieces, __ATOMIC_ACQUIRE); spin++) usleep(100);
    r.prompt = pr[1];
    r.max_tokens = 8;
    CHECKF(tm_session_submit(s, &r, on_text, &b, &qb, &err) == TM_OK, "%s", err.msg);
    tandem_stats sa, sb;
    CHECKF(tm_req_wait(qb, &sb, &err) == TM_OK, "%s", err.msg);
    int a_going = __atomic_load_n(&a.pieces, __ATOMIC_ACQUIRE) < 200;
    CHECKF(tm_req_wait(qa, &sa, &err) == TM_OK, "%s", err.msg);
    CHECKF(sb.n_cached >= 16 && a_going && sa.n_generated == 200 && sb.n_generated == 8,
           "cached %d while the first decoded (%s)", sb.n_cached, a_going ? "it was" : "it had finished");
    CHECK_EQ_INT(tm_kv_cache_free_pages(s->kv), total);
    tm_session_free(s);
}

/* ban_whitespace: ids [n..], bias [n..] := -100 for each token whose bytes are all whitespace (the
 * demo model pads every gap of a JSON text with them), up to cap in all; returns the new count */
static int ban_whitespace(tm_rt_model *rm, int32_t *ids, float *bias, int n, int cap)
{
    tm_err err = {0};
    for (int32_t id = 0; id < rm->decode->V && n < cap; id++) {
        char *b = NULL;
        size_t bl = 0, w = 0;
        if (tm_tok_token_bytes(rm->tok, id, &b, &bl, &err) == TM_OK)
            while (w < bl && strchr(" \t\r\n", b[w])) w++;
        if (bl && w == bl) ids[n] = id, bias[n++] = -100;
        free(b);
    }
    return n;
}

/* JSON mode (request.json_object, text/json_gate.h): whatever the model would say, the text is a
 * JSON object's prefix, whole (cJSON reads an object) when the request stops, and it stops as the
 * object closes; with top_k 1 (greedy) and sampled. */
static void json_mode(tm_rt_model *rm)
{
    tm_err err = {0};
    tm_session *s = open_session(rm, two_thread_opts());
    if (!s) return;
    int stopped = 0;
    for (int seed = 0; seed < 12; seed++) {
        tandem_request r = greedy_request(160);
        r.prompt = seed % 2 ? prompts[0] : "{\"name\": \"the old man\", \"age\":";
        r.temperature = seed < 2 ? 0 : 1.0f;
        r.seed = (uint64_t)seed;
        r.ignore_eos = 0;
        r.json_object = 1;
        sink k = {0};
        tandem_stats st;
        CHECKF(tm_session_generate(s, &r, on_text, &k, &st, &err) == TM_OK, "%s", err.msg);
        tm_jsm m;
        tm_jsm_init(&m);
        size_t i = 0;
        while (i < k.len && tm_jsm_feed(&m, (unsigned char)k.buf[i])) i++;
        CHECKF(i == k.len, "seed %d: the automaton refuses byte %zu of '%s'", seed, i, k.buf);
        if (getenv("JSON_SHOW")) fprintf(stderr, "seed %d (%s): %s\n", seed, st.finish_reason, k.buf);
        if (!strcmp(st.finish_reason, "stop")) {
            stopped++;
            cJSON *j = cJSON_Parse(k.buf);
            CHECKF(j && cJSON_IsObject(j) && tm_jsm_done(&m), "seed %d: stopped at '%s'", seed, k.buf);
            cJSON_Delete(j);
        } else {
            CHECK(!strcmp(st.finish_reason, "length") && st.n_generated == 160 && !tm_jsm_done(&m));
        }
    }
    /* the demo model rambles inside strings (no object above closes); with its '"' and '}' tokens
     * favoured (logit_bias) the objects close, and the request stops right there */
    CHECK_EQ_INT(stopped, 0);
    /* (and its whitespace tokens banned, which it would otherwise pad every gap with) */
    int32_t bias_ids[256] = {tm_tok_piece_to_id(rm->tok, "\""), tm_tok_piece_to_id(rm->tok, "}")};
    float bias[256] = {8, 20};
    int nb = 2;
    CHECK(bias_ids[0] >= 0 && bias_ids[1] >= 0);
    nb = ban_whitespace(rm, bias_ids, bias, nb, 256);
    CHECK(nb > 3);
    int nonempty = 0;
    for (int seed = 0; seed < 6; seed++) {
        tandem_request r = greedy_request(160);
        r.prompt = prompts[seed % 4];
        r.temperature = seed < 2 ? 0 : 1.0f;
        r.seed = (uint64_t)seed;
        r.json_object = 1;
        r.logit_bias_ids = bias_ids;
        r.logit_bias = bias;
        r.n_logit_bias = nb;
        sink k = {0};
        tandem_stats st;
        CHECKF(tm_session_generate(s, &r, on_text, &k, &st, &err) == TM_OK, "%s", err.msg);
        if (getenv("JSON_SHOW")) fprintf(stderr, "biased seed %d (%s, %d tokens, %d banned): %s\n", seed, st.finish_reason, st.n_generated, nb, k.buf);
        tm_jsm m;
        tm_jsm_init(&m);
        size_t i = 0;
        while (i < k.len && tm_jsm_feed(&m, (unsigned char)k.buf[i])) i++;
        cJSON *j = cJSON_Parse(k.buf);
        CHECKF(!strcmp(st.finish_reason, "stop") && i == k.len && tm_jsm_done(&m) && j && cJSON_IsObject(j) &&
                   st.n_generated < 160,
               "seed %d: %s after %d tokens: '%s'", seed, st.finish_reason, st.n_generated, k.buf);
        nonempty += j && j->child != NULL;
        cJSON_Delete(j);
    }
    CHECKF(nonempty >= 1, "every object closed empty: the members' path is not exercised");
    /* an end-of-sequence token that is not special (here " the", which the model writes inside its
     * strings all the time) does not end the object early: the request runs to its length */
    eos_save saved = eos_only(rm, tm_tok_piece_to_id(rm->tok, "\xC4\xA0the"));
    CHECK(rm->eos_ids[0] >= 0 && !tm_tok_is_special(rm->tok, rm->eos_ids[0]));
    for (int seed = 2; seed < 5; seed++) {
        tandem_request r = greedy_request(100);
        r.prompt = prompts[seed % 4];
        r.temperature = 1.0f;
        r.seed = (uint64_t)seed;
        r.ignore_eos = 0;
        r.json_object = 1;
        sink k = {0};
        tandem_stats st;
        CHECKF(tm_session_generate(s, &r, on_text, &k, &st, &err) == TM_OK, "%s", err.msg);
        cJSON *j = cJSON_Parse(k.buf);
        CHECKF(!strcmp(st.finish_reason, "length") || (j && cJSON_IsObject(j)), "seed %d: %s at '%s'", seed,
               st.finish_reason, k.buf);
        cJSON_Delete(j);
    }
    eos_restore(rm, &saved);
    tm_session_free(s);
}

/* matches: text[0..n) is a whole string of GBNF src's language */
static int matches(const char *src, const char *text, size_t n)
{
    tm_grammar *g = NULL;
    tm_gmatch *m = NULL;
    tm_err err = {0};
    int ok = tm_grammar_parse(&g, src, strlen(src), &err) == TM_OK && tm_gmatch_new(&m, g, &err) == TM_OK &&
             tm_gmatch_feed(m, text, n) == 1 && tm_gmatch_accepting(m);
    tm_gmatch_free(m);
    tm_grammar_free(g);
    return ok;
}

/* Grammars and JSON schemas (request.grammar, request.json_schema, text/grammar.h): the text is
 * in the grammar's language; a grammar that ends where nothing may follow stops the request
 * there; an end-of-sequence token is drawn only where the text is a whole match; a schema's
 * value validates; bad grammars and two constraints at once are refused at submit. */
static void grammar_mode(tm_rt_model *rm)
{
    tm_err err = {0};
    tm_session *s = open_session(rm, two_thread_opts());
    if (!s) return;
    const char *gram = "root ::= (\"yes\" | \"no\") \", because \" [a-z ]{1,40} \".\"";
    for (int seed = 0; seed < 6; seed++) {
        tandem_request r = greedy_request(120);
        r.prompt = prompts[seed % 4];
        r.temperature = seed < 2 ? 0 : 1.0f;
        r.seed = (uint64_t)seed;
        r.ignore_eos = 0;
        r.grammar = gram;
        sink k = {0};
        tandem_stats st;
        CHECKF(tm_session_generate(s, &r, on_text, &k, &st, &err) == TM_OK, "%s", err.msg);
        if (getenv("JSON_SHOW")) fprintf(stderr, "grammar seed %d (%s): %s\n", seed, st.finish_reason, k.buf);
        /* at most 40 letters, then '.' is the only way on and nothing may follow it */
        CHECKF(!strcmp(st.finish_reason, "stop") && matches(gram, k.buf, k.len), "seed %d: %s: '%s'", seed,
               st.finish_reason, k.buf);
    }
    /* end-of-sequence only where the text is a whole match: favoured by +100, it cannot come first
     * ([a-z ]+ needs a letter), then it comes at once */
    const char *letters = "root ::= [a-z ]+";
    int32_t eos = rm->eos_ids[0];
    float up = 100;
    for (int seed = 0; seed < 3; seed++) {
        tandem_request r = greedy_request(40);
        r.prompt = prompts[seed];
        r.ignore_eos = 0;
        r.grammar = letters;
        r.logit_bias_ids = &eos;
        r.logit_bias = &up;
        r.n_logit_bias = 1;
        sink k = {0};
        tandem_stats st;
        CHECKF(tm_session_generate(s, &r, on_text, &k, &st, &err) == TM_OK, "%s", err.msg);
        CHECKF(!strcmp(st.finish_reason, "stop") && st.n_generated == 2 && k.len > 0 && matches(letters, k.buf, k.len),
               "seed %d: %s after %d tokens: '%s'", seed, st.finish_reason, st.n_generated, k.buf);
    }
    /* a JSON schema: the value validates (whitespace tokens banned, as the model pads with them) */
    const char *schema = "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 12}, "
                         "\"good\": {\"type\": \"boolean\"}, \"tags\": {\"type\": \"array\", \"items\": {\"enum\": "
                         "[\"sea\", \"old\", \"man\"]}, \"maxItems\": 3}}, \"required\": [\"name\", \"good\", \"tags\"], "
                         "\"additionalProperties\": false}";
    int32_t ban[256];
    float minus[256];
    int nb = ban_whitespace(rm, ban, minus, 0, 256);
    for (int seed = 0; seed < 4; seed++) {
        tandem_request r = greedy_request(200);
        r.prompt = prompts[seed % 4];
        r.temperature = seed < 2 ? 0 : 1.0f;
        r.seed = (uint64_t)seed;
        r.json_schema = schema;
        r.logit_bias_ids = ban;
        r.logit_bias = minus;
        r.n_logit_bias = nb;
        sink k = {0};
        tandem_stats st;
        CHECKF(tm_session_generate(s, &r, on_text, &k, &st, &err) == TM_OK, "%s", err.msg);
        if (getenv("JSON_SHOW")) fprintf(stderr, "schema seed %d (%s): %s\n", seed, st.finish_reason, k.buf);
        cJSON *j = cJSON_Parse(k.buf);
        const cJSON *name = j ? cJSON_GetObjectItemCaseSensitive(j, "name") : NULL;
        const cJSON *good = j ? cJSON_GetObjectItemCaseSensitive(j, "good") : NULL;
        const cJSON *tags = j ? cJSON_GetObjectItemCaseSensitive(j, "tags") : NULL;
        int ok = j && cJSON_GetArraySize(j) == 3 && cJSON_IsString(name) && cJSON_IsBool(good) && cJSON_IsArray(tags) &&
                 cJSON_GetArraySize(tags) <= 3;
        const cJSON *t;
        cJSON_ArrayForEach(t, tags) ok &= cJSON_IsString(t) && (!strcmp(t->valuestring, "sea") ||
                                            !strcmp(t->valuestring, "old") || !strcmp(t->valuestring, "man"));
        CHECKF(!strcmp(st.finish_reason, "stop") && ok, "seed %d: %s: '%s'", seed, st.finish_reason, k.buf);
        cJSON_Delete(j);
    }
    /* a lazy grammar (grammar_trigger): the output is the free one up to the trigger's first place,
     * held to the grammar from the trigger's start on; a trigger never written leaves it free (one
     * route for every run: the router's choice could change the numerics between them) */
    tandem_session_opts lo = two_thread_opts();
    lo.route = TANDEM_ROUTE_HYBRID;
    tm_session *ls = open_session(rm, lo);
    for (int pi = 0; pi < 2 && ls; pi++) {
        tandem_request r = greedy_request(60);
        r.prompt = prompts[pi];
        sink ref = {0};
        tandem_stats st;
        CHECKF(tm_session_generate(ls, &r, on_text, &ref, &st, &err) == TM_OK, "%s", err.msg);
        CHECK(ref.len > 24);
        char trig[8], lit[32], lazy[96];
        memcpy(trig, ref.buf + 12, 4);
        trig[4] = '\0';
        size_t w = 0;
        for (int i = 0; i < 4; i++) {
            if (trig[i] == '"' || trig[i] == '\\') lit[w++] = '\\';
            if (trig[i] == '\n') { lit[w++] = '\\'; lit[w++] = 'n'; continue; }
            lit[w++] = trig[i];
        }
        lit[w] = '\0';
        snprintf(lazy, sizeof lazy, "root ::= \"%s\" [^.]{0,40} \".\"", lit);
        const char *first = strstr(ref.buf, trig);
        size_t before = first ? (size_t)(first - ref.buf) : 0;
        r.grammar = lazy;
        r.grammar_trigger = trig;
        sink k = {0};
        CHECKF(tm_session_generate(ls, &r, on_text, &k, &st, &err) == TM_OK, "%s", err.msg);
        CHECKF(first && k.len >= before + 4 && !memcmp(k.buf, ref.buf, before) && !strcmp(st.finish_reason, "stop") &&
                   matches(lazy, k.buf + before, k.len - before),
               "lazy, trigger '%s': %s: '%s' (free: '%s')", trig, st.finish_reason, k.buf, ref.buf);
        r.grammar_trigger = "@@never@@";
        sink k2 = {0};
        CHECKF(tm_session_generate(ls, &r, on_text, &k2, &st, &err) == TM_OK, "%s", err.msg);
        CHECKF(k2.len == ref.len && !memcmp(k2.buf, ref.buf, ref.len), "untriggered: '%s' / '%s'", k2.buf, ref.buf);
    }
    tm_session_free(ls);
    /* refusals at submit */
    tandem_request r = greedy_request(4);
    r.prompt = prompts[0];
    r.grammar_trigger = "x";
    tm_req *q0 = NULL;
    CHECK(tm_session_submit(s, &r, on_text, NULL, &q0, &err) == TM_E_INVALID && !q0 && strstr(err.msg, "grammar_trigger"));
    r.grammar_trigger = NULL;
    r.grammar = "root ::= \"a\" undefined-rule";
    tm_req *q;
    CHECK_EQ_INT(tm_session_submit(s, &r, on_text, NULL, &q, &err), TM_E_FORMAT);
    CHECKF(strstr(err.msg, "grammar") && strstr(err.msg, "undefined-rule"), "%s", err.msg);
    r.grammar = NULL;
    r.json_schema = "{\"type\": \"string\", \"pattern\": \"^a+$\", \"format\": \"hostname\"}";
    CHECK(tm_session_submit(s, &r, on_text, NULL, &q, &err) != TM_OK && strstr(err.msg, "json_schema"));
    r.json_schema = "{\"type\": \"string\"}";
    r.json_object = 1;
    CHECK_EQ_INT(tm_session_submit(s, &r, on_text, NULL, &q, &err), TM_E_INVALID);
    tm_session_free(s);
}

/* A greedy run's tokens (on_logprob: every one drawn, with text or without) and their bytes as the
 * scheduler's lazy grammar sees them (the vocabulary trie's) */
typedef struct tok_run {
    int32_t ids[160];
    int n;
    int ends[160];  /* [n] where token i's bytes end in b */
    char b[2048];   /* [len] */
    size_t len;
} tok_run;

static int tr_lp(void *ud, const tandem_logprob *lp)
{
    tok_run *g = ud;
    if (g->n < 160) g->ids[g->n++] = lp->token;
    return 0;
}

static void tr_generate(tm_session *s, tandem_request r, const struct tm_vocab_trie *trie, tok_run *g,
                        tandem_stats *st)
{
    tm_err err = {0};
    memset(g, 0, sizeof *g);
    r.on_logprob.fn = tr_lp;
    CHECKF(tm_session_generate(s, &r, NULL, g, st, &err) == TM_OK, "%s", err.msg);
    for (int i = 0; i < g->n; i++) {
        uint32_t n = 0;
        const uint8_t *t = tm_vocab_token(trie, g->ids[i], &n);
        if (g->len + n < sizeof g->b && n) memcpy(g->b + g->len, t, n);
        g->len += g->len + n < sizeof g->b ? n : 0;
        g->ends[i] = (int)g->len;
    }
}

/* a lazy grammar: the trigger's n bytes, then up to 40 bytes but '.', then '.' (where it ends) */
static void lazy_gbnf(const char *trig, size_t n, char *out, size_t cap)
{
    char lit[32];
    size_t w = 0;
    for (size_t i = 0; i < n && w + 3 < sizeof lit; i++) {
        if (trig[i] == '"' || trig[i] == '\\') lit[w++] = '\\';
        if (trig[i] == '\n') { lit[w++] = '\\'; lit[w++] = 'n'; continue; }
        lit[w++] = trig[i];
    }
    lit[w] = '\0';
    snprintf(out, cap, "root ::= \"%s\" [^.]{0,40} \".\"", lit);
}

/* k is the free run f up to byte a, and from there a whole match of gram, where it stopped */
static int held_from(const tok_run *f, const tok_run *k, const tandem_stats *st, size_t a, const char *gram)
{
    return k->len >= a && !memcmp(k->b, f->b, a) && !strcmp(st->finish_reason, "stop") &&
           matches(gram, k->b + a, k->len - a);
}

/* A block and a trigger taken from a free run's bytes f (so that the same greedy run writes them):
 * the block opens with the output's first bytes past whitespace, through 2 bytes of its second
 * token; it closes with 3 or 4 bytes that run over a token boundary, there for the first time, and
 * end inside a token, which goes on with the trigger (2 or 3 bytes) that the block also holds
 * earlier, more than 60 bytes before (where a grammar held from there has ended) */
typedef struct skip_pick {
    char open[24], close[8], trig[8];
    size_t p;       /* the output's first byte past whitespace */
    size_t a1, a2;  /* the trigger's first place, and its first past the close */
} skip_pick;

static int skip_find(const tok_run *f, skip_pick *k)
{
    const char *b = f->b;
    size_t p = 0;
    while (p < f->len && (b[p] == ' ' || b[p] == '\n')) p++;
    int t0 = 0;
    while (t0 < f->n && (size_t)f->ends[t0] <= p) t0++;
    if (t0 + 1 >= f->n || f->ends[t0 + 1] - f->ends[t0] < 2) return 0;
    size_t oend = (size_t)f->ends[t0] + 2;
    if (oend - p >= sizeof k->open) return 0;
    for (int j = t0 + 1; j + 1 < f->n; j++) {
        for (size_t lc = 3; lc <= 4; lc++)
            for (size_t back = 1; back < lc; back++) {
                size_t c = (size_t)f->ends[j] - back, ce = c + lc;
                if (c < oend || ce >= (size_t)f->ends[j + 1] || memmem(b, c + lc - 1, b + c, lc)) continue;
                for (size_t lt = 2; lt <= 3 && ce + lt <= f->len; lt++) {
                    const char *a1 = memmem(b, c, b + ce, lt);
                    if (!a1 || ce - (size_t)(a1 - b) <= 60) continue;
                    memcpy(k->open, b + p, oend - p);
                    k->open[oend - p] = '\0';
                    memcpy(k->close, b + c, lc);
                    k->close[lc] = '\0';
                    memcpy(k->trig, b + ce, lt);
                    k->trig[lt] = '\0';
                    k->p = p, k->a1 = (size_t)(a1 - b), k->a2 = ce;
                    return 1;
                }
            }
    }
    return 0;
}

/* the lazy-trigger tests' session (two threads, one route: the router's choice could change the numerics)
 * and the model's vocabulary trie (*trie); NULL (a failed check) if either cannot be had */
static tm_session *lazy_session(tm_rt_model *rm, struct tm_vocab_trie **trie)
{
    tm_err err = {0};
    CHECKF(tm_rt_model_trie(rm, trie, &err) == TM_OK, "%s", err.msg);
    tandem_session_opts o = two_thread_opts();
    o.route = TANDEM_ROUTE_HYBRID;
    tm_session *s = open_session(rm, o);
    if (!s || !*trie) {
        tm_session_free(s);
        return NULL;
    }
    return s;
}

/* A lazy grammar that skips a leading block (grammar_skip_open / _close, a reasoning model's
 * thinking): the trigger written inside the block leaves the output free, and the grammar holds
 * from its first place past the close; an output that does not open the block (or opens with a
 * piece of the marker, then leaves it) is held from the trigger's first place, as without one; ""
 * opens the block at once. The markers come from free runs, so their bytes fall over token
 * boundaries as the model's do: the opening marker runs from the first token (whitespace and a
 * piece of the marker) into the second, the close over two tokens, and the trigger starts in the
 * token that ends the close. Blocks named wrong are refused at submit. */
static void lazy_skip(tm_rt_model *rm)
{
    tm_err err = {0};
    struct tm_vocab_trie *trie = NULL;
    tm_session *s = lazy_session(rm, &trie);
    if (!s) return;
    static tok_run f, k; /* (large) */
    int found = 0;
    for (int pi = 0; pi < 4; pi++) {
        tandem_request r = greedy_request(120);
        r.prompt = prompts[pi];
        tandem_stats st;
        tr_generate(s, r, trie, &f, &st);
        skip_pick sp;
        if (!skip_find(&f, &sp)) continue;
        found++;
        if (getenv("LAZY_SHOW"))
            fprintf(stderr, "prompt %d: open '%s' close '%s' trigger '%s' at %zu, %zu (first token '%.*s'): '%s'\n", pi,
                    sp.open, sp.close, sp.trig, sp.a1, sp.a2, f.ends[0], f.b, f.b);
        char gram[128];
        lazy_gbnf(sp.trig, strlen(sp.trig), gram, sizeof gram);
        r.grammar = gram;
        r.grammar_trigger = sp.trig;
        /* no block; one the output opens; one the prompt opened; one the output does not open */
        const char *opens[4] = {NULL, sp.open, "", "#@#"}, *whats[4] = {"no block", "thinks", "opened", "no thinking"};
        for (int ci = 0; ci < 4; ci++) {
            r.grammar_skip_open = opens[ci];
            r.grammar_skip_close = opens[ci] ? sp.close : NULL;
            tr_generate(s, r, trie, &k, &st);
            size_t a = ci == 1 || ci == 2 ? sp.a2 : sp.a1;
            CHECKF(held_from(&f, &k, &st, a, gram), "prompt %d, %s: close '%s' trigger '%s' from %zu: %s: '%.*s'", pi,
                   whats[ci], sp.close, sp.trig, a, st.finish_reason, (int)k.len, k.b);
        }
        /* an output that starts with a piece of the opening marker and leaves it, in its first token or
         * its second: those bytes are looked through, for a trigger that shares them with the marker
         * (whole, in the second case, before the output leaves the marker) */
        size_t ol = strlen(sp.open); /* (3 or more) */
        for (size_t piece = 2; piece < ol; piece = piece < ol - 1 ? ol - 1 : ol) {
            char open[32], trig[4];
            memcpy(open, sp.open, piece);
            memcpy(open + piece, "#@", 3);
            memcpy(trig, sp.open, 3);
            trig[3] = '\0';
            lazy_gbnf(trig, 3, gram, sizeof gram);
            r.grammar_trigger = trig;
            r.grammar_skip_open = open;
            tr_generate(s, r, trie, &k, &st);
            CHECKF(sp.open[piece] != '#' && held_from(&f, &k, &st, sp.p, gram),
                   "prompt %d, leaves '%s': trigger '%s': %s: '%.*s'", pi, open, trig, st.finish_reason, (int)k.len,
                   k.b);
        }
    }
    CHECKF(found >= 2, "%d of 4 free runs give a block and trigger", found);
    /* refusals at submit: the block's markers go together, with a trigger */
    static const struct {
        const char *trig, *open, *close, *field;
    } bad[] = {
        {NULL, NULL, "</b>", "grammar_skip_close"}, {"a", "<b>", NULL, "grammar_skip_open"},
        {"a", "", NULL, "grammar_skip_open"},      {"a", NULL, "</b>", "grammar_skip_close"},
    };
    for (int i = 0; i < 4; i++) {
        tandem_request r = greedy_request(4);
        r.prompt = prompts[0];
        r.grammar = "root ::= \"a\"";
        r.grammar_trigger = bad[i].trig;
        r.grammar_skip_open = bad[i].open;
        r.grammar_skip_close = bad[i].close;
        tm_req *q = NULL;
        CHECKF(tm_session_submit(s, &r, on_text, NULL, &q, &err) == TM_E_INVALID && !q && strstr(err.msg, bad[i].field),
               "%d: %s", i, err.msg);
    }
    tm_session_free(s);
}

/* k is the free run f byte for byte: the lazy grammar never took hold */
static int stayed_free(const tok_run *f, const tok_run *k)
{
    return k->len == f->len && !memcmp(k->b, f->b, f->len);
}

/* An anchored lazy grammar (grammar_trigger_anchored: a bare call, Llama 3's {"name": ...}) counts its
 * trigger only as the output's start past whitespace, or past a skipped block. Triggers from free runs'
 * bytes, so the same greedy run writes them: the output's first bytes (inside the first token, or over it
 * and into the second; past the whitespace it starts with, where it does) hold the grammar from there; a
 * trigger the run writes only later, or one that starts as the output does and then leaves it (in the first
 * token, or in the second after waiting on a piece), leaves the output free for good, byte for byte, where
 * the same trigger unanchored holds it from its first place; with a block (skip_open / _close from the run),
 * the bytes past the close and its whitespace hold it, and others leave it free. Refused at submit: anchored
 * without a trigger, a trigger that starts with whitespace. */
static void lazy_anchored(tm_rt_model *rm)
{
    tm_err err = {0};
    struct tm_vocab_trie *trie = NULL;
    tm_session *s = lazy_session(rm, &trie);
    if (!s) return;
    static tok_run f, k; /* (large) */
    int ws_start = 0, blocks = 0;
    for (int pi = 0; pi < 4; pi++) {
        tandem_request r = greedy_request(120);
        r.prompt = prompts[pi];
        tandem_stats st;
        tr_generate(s, r, trie, &f, &st);
        size_t p = 0;
        while (p < f.len && (f.b[p] == ' ' || f.b[p] == '\n')) p++;
        int t0 = 0; /* the token the output's first byte past whitespace is in */
        while (t0 < f.n && (size_t)f.ends[t0] <= p) t0++;
        if (t0 + 2 >= f.n || f.len < p + 40) {
            CHECKF(0, "prompt %d: a free run too short: '%.*s'", pi, (int)f.len, f.b);
            continue;
        }
        ws_start += p > 0;
        size_t e0 = (size_t)f.ends[t0], e1 = (size_t)f.ends[t0 + 1];
        if (getenv("LAZY_SHOW"))
            fprintf(stderr, "prompt %d: start %zu, first token '%.*s', second '%.*s': '%.*s'\n", pi, p, (int)(e0 - p),
                    f.b + p, (int)(e1 - e0), f.b + e0, (int)f.len, f.b);
        char trig[32], gram[128];
        r.grammar = gram;
        r.grammar_trigger = trig;
        r.grammar_trigger_anchored = 1;
        /* the output's start: within its first token, and over it into the second */
        size_t lens[2] = {e0 - p < 6 ? e0 - p : 6, e0 - p + (e1 - e0 < 2 ? e1 - e0 : 2)};
        for (int c = 0; c < 2; c++) {
            if (lens[c] >= sizeof trig) continue;
            memcpy(trig, f.b + p, lens[c]);
            trig[lens[c]] = '\0';
            lazy_gbnf(trig, lens[c], gram, sizeof gram);
            tr_generate(s, r, trie, &k, &st);
            CHECKF(held_from(&f, &k, &st, p, gram), "prompt %d, anchored '%s' at the start: %s: '%.*s'", pi, trig,
                   st.finish_reason, (int)k.len, k.b);
        }
        /* the output starts as the trigger does, then leaves it: in the first token, or in the second after
           the first token's bytes waited as a piece of it */
        size_t cut[2] = {1, e0 - p};
        for (int c = 0; c < 2; c++) {
            if (cut[c] + 3 >= sizeof trig || (c == 1 && f.b[e0] == '#')) continue;
            memcpy(trig, f.b + p, cut[c]);
            memcpy(trig + cut[c], "#@", 3);
            lazy_gbnf(trig, strlen(trig), gram, sizeof gram);
            tr_generate(s, r, trie, &k, &st);
            CHECKF(stayed_free(&f, &k), "prompt %d, anchored '%s', the output leaves it: '%.*s'", pi, trig, (int)k.len,
                   k.b);
        }
        /* a trigger the run writes only later (3 bytes first found past byte p + 12): free for good anchored,
           held from there unanchored */
        size_t a = 0;
        for (size_t i = p + 12; i + 3 <= f.len && !a; i++)
            if (f.b[i] != ' ' && f.b[i] != '\n' && memmem(f.b, i + 3, f.b + i, 3) == f.b + i && i + 50 < f.len) a = i;
        CHECKF(a, "prompt %d: no later trigger", pi);
        if (a) {
            memcpy(trig, f.b + a, 3);
            trig[3] = '\0';
            lazy_gbnf(trig, 3, gram, sizeof gram);
            tr_generate(s, r, trie, &k, &st);
            CHECKF(stayed_free(&f, &k), "prompt %d, anchored '%s' written later: '%.*s'", pi, trig, (int)k.len, k.b);
            r.grammar_trigger_anchored = 0;
            tr_generate(s, r, trie, &k, &st);
            CHECKF(held_from(&f, &k, &st, a, gram), "prompt %d, unanchored '%s' at %zu: %s: '%.*s'", pi, trig, a,
                   st.finish_reason, (int)k.len, k.b);
            r.grammar_trigger_anchored = 1;
        }
        /* past a block: the bytes after the close and its whitespace; not at the output's start any more */
        skip_pick sp;
        if (!skip_find(&f, &sp)) continue;
        blocks++;
        size_t q = sp.a2;
        while (q < f.len && (f.b[q] == ' ' || f.b[q] == '\n')) q++;
        if (q + 3 > f.len) continue;
        memcpy(trig, f.b + q, 3);
        trig[3] = '\0';
        lazy_gbnf(trig, 3, gram, sizeof gram);
        r.grammar_skip_open = sp.open;
        r.grammar_skip_close = sp.close;
        tr_generate(s, r, trie, &k, &st);
        CHECKF(held_from(&f, &k, &st, q, gram), "prompt %d, block '%s'..'%s', anchored '%s' at %zu: %s: '%.*s'", pi,
               sp.open, sp.close, trig, q, st.finish_reason, (int)k.len, k.b);
        r.grammar_skip_open = ""; /* the prompt opened the block: the same */
        tr_generate(s, r, trie, &k, &st);
        CHECKF(held_from(&f, &k, &st, q, gram), "prompt %d, opened block, anchored '%s': %s: '%.*s'", pi, trig,
               st.finish_reason, (int)k.len, k.b);
        memcpy(trig, f.b + p, 3); /* the output's start, inside the block: free */
        lazy_gbnf(trig, 3, gram, sizeof gram);
        r.grammar_skip_open = sp.open;
        tr_generate(s, r, trie, &k, &st);
        CHECKF(!memcmp(f.b + q, trig, 3) ? held_from(&f, &k, &st, q, gram) : stayed_free(&f, &k),
               "prompt %d, block, anchored '%s' inside it: '%.*s'", pi, trig, (int)k.len, k.b);
        r.grammar_skip_open = "#@#"; /* a block the output does not open: the start counts */
        tr_generate(s, r, trie, &k, &st);
        CHECKF(held_from(&f, &k, &st, p, gram), "prompt %d, no block, anchored '%s': %s: '%.*s'", pi, trig,
               st.finish_reason, (int)k.len, k.b);
    }
    CHECKF(ws_start > 0 && blocks >= 2, "%d runs start with whitespace, %d give a block", ws_start, blocks);
    /* refusals at submit */
    static const struct {
        const char *trig, *why;
    } bad[] = {{NULL, "without a grammar_trigger"}, {"", "without a grammar_trigger"}, {" {", "whitespace"},
               {"\n{", "whitespace"}};
    for (int i = 0; i < 4; i++) {
        tandem_request r = greedy_request(4);
        r.prompt = prompts[0];
        r.grammar = "root ::= \"a\"";
        r.grammar_trigger = bad[i].trig;
        r.grammar_trigger_anchored = 1;
        tm_req *q = NULL;
        CHECKF(tm_session_submit(s, &r, on_text, NULL, &q, &err) == TM_E_INVALID && !q &&
                   strstr(err.msg, "grammar_trigger_anchored") && strstr(err.msg, bad[i].why),
               "%d: %s", i, err.msg);
    }
    tm_session_free(s);
}

/* logit_bias: -100 keeps the greedy token out, +100 brings any token in; the log-probabilities
 * reported stay the model's; ids outside the vocabulary are refused */
static void logit_bias(tm_rt_model *rm)
{
    tm_err err = {0};
    tm_session *s = open_session(rm, two_thread_opts());
    if (!s) return;
    tandem_request r = greedy_request(4);
    r.prompt = prompts[3];
    r.logprobs = 2;
    r.on_logprob.fn = on_lp;
    lp_log plain = {0}, ban = {0}, force = {0};
    tandem_stats st;
    CHECKF(tm_session_generate(s, &r, on_text_tok, &plain, &st, &err) == TM_OK, "%s", err.msg);
    int32_t id = plain.v[0].token, other = plain.v[0].top_token[1] == id ? plain.v[0].top_token[0] : plain.v[0].top_token[1];
    float b = -100;
    r.logit_bias_ids = &id;
    r.logit_bias = &b;
    r.n_logit_bias = 1;
    CHECKF(tm_session_generate(s, &r, on_text_tok, &ban, &st, &err) == TM_OK, "%s", err.msg);
    CHECK(ban.v[0].token != id && ban.v[0].token == other); /* the runner-up instead */
    CHECKF(ban.v[0].top_token[0] == id && ban.v[0].top_logprob[0] == plain.v[0].top_logprob[0], /* the model's */
           "banned run: top %d %.9g, plain %d %.9g", ban.v[0].top_token[0], ban.v[0].top_logprob[0], id,
           plain.v[0].top_logprob[0]);
    int32_t rare = 1234 % rm->decode->V;
    b = 100;
    r.logit_bias_ids = &rare;
    CHECKF(tm_session_generate(s, &r, on_text_tok, &force, &st, &err) == TM_OK, "%s", err.msg);
    CHECK(force.n == 4);
    for (int i = 0; i < force.n; i++) CHECK(force.v[i].token == rare && force.v[i].logprob < force.v[i].top_logprob[0]);
    int32_t out_of_range = rm->decode->V;
    r.logit_bias_ids = &out_of_range;
    tm_req *q = NULL;
    CHECK_EQ_INT(tm_session_submit(s, &r, on_text_tok, &force, &q, &err), TM_E_INVALID);
    CHECK(strstr(err.msg, "logit_bias") != NULL);
    tm_session_free(s);
}

/* Greedy requests take the decode engine's own argmax (tm_decode_args.argmax, no logits handed over;
 * the CPU engines have it): on every route, alone and batched, the text is the one the sampler's path
 * gives, which a logit bias of 0 (nothing changed but the path) forces; a batch that mixes the two
 * takes the logits for all */
static void engine_argmax(tm_rt_model *rm)
{
    tm_err err = {0};
    tm_session *s = open_session(rm, two_thread_opts());
    if (!s) return;
    CHECK(s->dec.caps.argmax && s->pre.caps.argmax); /* else this test would not reach the path */
    static const tandem_route routes[] = {TANDEM_ROUTE_HYBRID, TANDEM_ROUTE_DECODE_ONLY, TANDEM_ROUTE_PREFILL_ONLY};
    int32_t id = 7;
    float zero = 0;
    for (int ri = 0; ri < 3; ri++) {
        s->o.route = routes[ri];
        for (int i = 0; i < 3; i++) {
            sink k[4];
            memset(k, 0, sizeof k);
            tm_req *q[4];
            for (int j = 0; j < 4; j++) { /* j even: greedy only; odd: the same with the zero bias */
                tandem_request r = greedy_request(24);
                r.prompt = prompts[i];
                if (j & 1) r.logit_bias_ids = &id, r.logit_bias = &zero, r.n_logit_bias = 1;
                if (j < 2) { /* alone */
                    tandem_stats st;
                    CHECKF(tm_session_generate(s, &r, on_text, &k[j], &st, &err) == TM_OK, "%s", err.msg);
                    CHECK_EQ_INT(st.n_generated, 24);
                } else { /* the two at once (a batch of both kinds) */
                    CHECKF(tm_session_submit(s, &r, on_text, &k[j], &q[j], &err) == TM_OK, "%s", err.msg);
                }
            }
            for (int j = 2; j < 4; j++) {
                tandem_stats st;
                CHECKF(tm_req_wait(q[j], &st, &err) == TM_OK, "%s", err.msg);
            }
            CHECK(k[0].len > 10);
            for (int j = 1; j < 4; j++)
                CHECKF(strcmp(k[j].buf, k[0].buf) == 0, "%s, prompt %d, request %d:\n%s\nengine's argmax:\n%s",
                       tm_route_name(routes[ri]), i, j, k[j].buf, k[0].buf);
        }
    }
    tm_session_free(s);
}

/* ---- llama.cpp's code-completion limits: n_indent, t_max_predict_ms ---- */

/* n_indent cuts the greedy text where llama.cpp's rule says, at the token that shows the short line
 * (on_text never sees what is cut, stop strings or not); t_max_predict_ms ends the text at the first
 * token whose text holds a newline once the time is gone, and not before; negative values refused */
static void code_limits(tm_rt_model *rm)
{
    tm_err err = {0};
    tm_session *s = open_session(rm, two_thread_opts());
    if (!s) return;
    tandem_request r = greedy_request(60);
    r.prompt = "The Raven\n\nOnce upon a midnight dreary,\n"; /* verse: short lines */
    r.logprobs = 0;
    r.on_logprob.fn = tl_token;
    static tok_log whole, got;
    memset(&whole, 0, sizeof whole);
    tandem_stats st;
    CHECKF(tm_session_generate(s, &r, tl_text, &whole, &st, &err) == TM_OK, "%s", err.msg);
    CHECK(whole.n == 60 && !strcmp(st.finish_reason, "length"));
    for (int n = 1; n <= 8; n *= 8) {
        long cut = indent_cut(whole.text, whole.len, n);
        CHECKF(cut > 0, "n_indent %d: the greedy text has no line to judge: '%s'", n, whole.text);
        if (cut <= 0) break;
        int k = 0; /* the token that shows the short line's first character */
        while (k < whole.n && whole.ends[k] <= (size_t)cut) k++;
        const char *never[] = {"\n\x01", NULL}; /* holds each newline back a token: judged once released */
        for (int stops = 0; stops < 2; stops++) {
            memset(&got, 0, sizeof got);
            r.n_indent = n;
            r.stop = stops ? never : NULL;
            CHECKF(tm_session_generate(s, &r, tl_text, &got, &st, &err) == TM_OK, "%s", err.msg);
            CHECKF(got.len == (size_t)cut && !memcmp(got.text, whole.text, (size_t)cut) &&
                       !strcmp(st.finish_reason, "length") && st.stop_index == -1 &&
                       (stops || st.n_generated == k + 1),
                   "n_indent %d%s: %d tokens (want %d), finish %s, '%s' of '%s'", n, stops ? " with a stop" : "",
                   st.n_generated, k + 1, st.finish_reason, got.text, whole.text);
        }
        r.stop = NULL;
    }
    /* t_max_predict_ms: each token takes more than 1 ms (on_logprob naps) */
    int k = 0;
    while (k < whole.n && !memchr(whole.text + (k ? whole.ends[k - 1] : 0), '\n', whole.ends[k] - (k ? whole.ends[k - 1] : 0))) k++;
    CHECKF(k < whole.n - 1, "no newline in the greedy text before its end: '%s'", whole.text);
    r.n_indent = 0;
    int limits[] = {1, 0, 60000};
    for (int i = 0; i < 3 && k < whole.n - 1; i++) {
        memset(&got, 0, sizeof got);
        got.nap = 1;
        r.t_max_predict_ms = limits[i];
        CHECKF(tm_session_generate(s, &r, tl_text, &got, &st, &err) == TM_OK, "%s", err.msg);
        int want = i == 0 ? k + 1 : 60;
        CHECKF(st.n_generated == want && got.len == whole.ends[want - 1] && !memcmp(got.text, whole.text, got.len) &&
                   !strcmp(st.finish_reason, "length"),
               "t_max_predict_ms %d: %d tokens (want %d), '%s'", limits[i], st.n_generated, want, got.text);
    }
    /* negative: refused, naming the field */
    r.t_max_predict_ms = 0;
    r.n_indent = -1;
    tm_req *q = NULL;
    CHECK(tm_session_submit(s, &r, tl_text, &got, &q, &err) == TM_E_INVALID && strstr(err.msg, "n_indent"));
    r.n_indent = 0;
    r.t_max_predict_ms = -5;
    CHECK(tm_session_submit(s, &r, tl_text, &got, &q, &err) == TM_E_INVALID && strstr(err.msg, "t_max_predict_ms"));
    tm_session_free(s);
}

/* Invariant 5 (sched.c): which sessions let the decode side borrow the idle
 * prefill cores. The router state is set by hand so the answer does not
 * depend on a calibration cached on this machine. */
static void lend_policy(tm_rt_model *rm)
{
    tm_err err = {0};
    tandem_session_opts o = two_thread_opts();
    int one_cpu = tm_cpu_allowed(NULL, 2) < 2; /* both sides on it: nothing to borrow, lent unless --no-lend */
    struct { int max_seqs; float max_stall; int no_lend, calibrated; double lend_dec; int want; } cases[] = {
        {1, 0, 0, 0, 0, 1},     /* one request at a time: nothing to stall */
        {1, 0, 1, 0, 0, 0},     /* --no-lend wins */
        {8, 0, 0, 0, 0, 0},     /* uncalibrated: the cost of handing back is unknown */
        {8, 0, 0, 1, 1.9, 0},   /* 2 cores: x1.9 when handed back > 1.25 */
        {8, 0, 0, 1, 1.2, 1},   /* within the default bound */
        {8, 1.0f, 0, 1, 1.9, 1},/* a looser bound */
        {8, -1, 0, 0, 0, 1},    /* no bound */
        {0, 0, 0, 1, 1.26, 0},  /* 0: the default 8 sequences and bound 0.25 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        o.max_seqs = cases[i].max_seqs;
        o.max_stall = cases[i].max_stall;
        o.no_lend = cases[i].no_lend;
        tm_session *s = NULL;
        CHECKF(tm_session_new(&s, rm, &o, &err) == TM_OK, "%s", err.msg);
        if (!s) continue;
        CHECK_EQ_INT(s->max_seqs, cases[i].max_seqs > 0 ? cases[i].max_seqs : 8);
        s->router.calibrated = cases[i].calibrated;
        s->router.c.lend_dec = cases[i].lend_dec;
        int want = one_cpu ? !cases[i].no_lend : cases[i].want;
        CHECKF(tm_sched_lend_policy(s) == want, "case %zu%s", i, one_cpu ? " (one cpu)" : "");
        tm_session_free(s);
    }
    /* one core: the two sides share it, there is nothing to borrow */
    o.n_threads = 1;
    o.max_seqs = 8;
    o.max_stall = 0;
    o.no_lend = 0;
    tm_session *s = NULL;
    CHECKF(tm_session_new(&s, rm, &o, &err) == TM_OK, "%s", err.msg);
    if (s) {
        s->router.calibrated = 0;
        CHECK_EQ_INT(tm_sched_lend_policy(s), 1);
        tm_session_free(s);
    }
}

int main(void)
{
    tm_err err = {0};
    tm_rt_model *rm;
    CHECKF(tm_rt_model_open(&rm, "models/tiny-classics-llama", &err) == TM_OK, "%s", err.msg);
    if (!rm) return th_done("test_sched");
    tandem_session_opts o;
    memset(&o, 0, sizeof o);
    o.n_threads = 2;
    o.max_ctx = 512;
    o.stateless = 1;
    tm_session *s;
    CHECKF(tm_session_new(&s, rm, &o, &err) == TM_OK, "%s", err.msg);
    if (!s) return th_done("test_sched");
    int free0 = tm_kv_cache_free_pages(s->kv);
    enum { NP = 4 };
    tandem_request r = greedy_request(40);

    /* every route, forced (the router chooses by load, and the route decides
     * which weights make the KV): alone, then all at once */
    static const tandem_route routes[] = {TANDEM_ROUTE_HYBRID, TANDEM_ROUTE_DECODE_ONLY, TANDEM_ROUTE_PREFILL_ONLY};
    for (int ri = 0; ri < 3; ri++) {
        s->o.route = routes[ri];
        sink alone[NP];
        memset(alone, 0, sizeof alone);
        for (int i = 0; i < NP; i++) {
            r.prompt = prompts[i];
            tandem_stats st;
            CHECKF(tm_session_generate(s, &r, on_text, &alone[i], &st, &err) == TM_OK, "%s", err.msg);
            CHECK_EQ_INT(st.n_generated, 40);
            CHECK(alone[i].len > 20);
        }
        /* all at once: prefill of later prompts overlaps decode of earlier ones */
        sink both[NP];
        memset(both, 0, sizeof both);
        tm_req *q[NP];
        for (int i = 0; i < NP; i++) {
            r.prompt = prompts[i];
            CHECKF(tm_session_submit(s, &r, on_text, &both[i], &q[i], &err) == TM_OK, "%s", err.msg);
        }
        for (int i = 0; i < NP; i++) {
            tandem_stats st;
            CHECKF(tm_req_wait(q[i], &st, &err) == TM_OK, "%s", err.msg);
            CHECKF(strcmp(both[i].buf, alone[i].buf) == 0, "%s, prompt %d concurrent:\n%s\nalone:\n%s",
                   tm_route_name(routes[ri]), i, both[i].buf, alone[i].buf);
            CHECK(st.tpot_p50 > 0 && st.tpot_p99 >= st.tpot_p50);
        }
    }
    s->o.route = TANDEM_ROUTE_AUTO;
    CHECK_EQ_INT(tm_kv_cache_free_pages(s->kv), free0);
    stop_strings(s);

    /* cancellation: by the callback mid-decode, and before it starts (queued) */
    sink c1 = {.cancel_after = 3}, c2 = {0}, c3 = {0};
    r.prompt = prompts[2];
    r.max_tokens = 200;
    tm_req *a, *b, *c;
    CHECK(tm_session_submit(s, &r, on_text, &c1, &a, &err) == TM_OK);
    CHECK(tm_session_submit(s, &r, on_text, &c2, &b, &err) == TM_OK);
    CHECK(tm_session_submit(s, &r, on_text, &c3, &c, &err) == TM_OK);
    tm_req_cancel(c); /* most likely still queued */
    tm_req_cancel(b);
    tandem_stats st;
    CHECK_EQ_INT(tm_req_wait(a, &st, &err), TM_E_CANCELLED);
    CHECK(c1.pieces == 3);
    CHECK_EQ_INT(tm_req_wait(b, &st, &err), TM_E_CANCELLED);
    CHECK_EQ_INT(tm_req_wait(c, &st, &err), TM_E_CANCELLED);
    CHECK_EQ_INT(tm_kv_cache_free_pages(s->kv), free0);
    CHECK_EQ_INT(tm_kv_cache_free_pages(s->stage), 1);

    /* a prompt longer than the context is refused with a clear error */
    int32_t *big = calloc(600, sizeof(int32_t));
    r.prompt = NULL;
    r.prompt_ids = big;
    r.n_prompt_ids = 600;
    tm_req *d;
    CHECK_EQ_INT(tm_session_submit(s, &r, on_text, &c3, &d, &err), TM_E_LIMIT);
    CHECK(strstr(err.msg, "does not fit") != NULL);
    free(big);
    tm_session_free(s);
    TH_PART(lend_policy(rm));
    TH_PART(core_plan(rm));
    TH_PART(prefix_cache(rm));
    TH_PART(prefix_shared(rm));
    TH_PART(logprobs(rm));
    TH_PART(prompt_scores(rm));
    TH_PART(json_mode(rm));
    TH_PART(grammar_mode(rm));
    TH_PART(lazy_skip(rm));
    TH_PART(lazy_anchored(rm));
    TH_PART(logit_bias(rm));
    TH_PART(engine_argmax(rm));
    TH_PART(code_limits(rm));
    tm_rt_model_free(rm);

    /* a package converted with the default encodings generates exactly what the
     * HF directory does (which is converted on the fly with the same defaults) */
    tm_convert_opts co;
    tm_convert_opts_default(&co);
    tm_convert_stats cst;
    const char *pkg = "build/test_sched_demo.tdm";
    CHECKF(tm_convert("models/tiny-classics-llama", pkg, &co, &cst, &err) == TM_OK, "%s", err.msg);
    sink from[2];
    memset(from, 0, sizeof from);
    const char *paths[2] = {"models/tiny-classics-llama", pkg};
    o.route = TANDEM_ROUTE_HYBRID; /* the route decides which weights make the KV: fix it */
    for (int i = 0; i < 2; i++) {
        tm_rt_model *m2 = NULL;
        tm_session *s2 = NULL;
        CHECKF(tm_rt_model_open(&m2, paths[i], &err) == TM_OK, "%s", err.msg);
        if (m2) CHECKF(tm_session_new(&s2, m2, &o, &err) == TM_OK, "%s", err.msg);
        memset(&r, 0, sizeof r);
        r.prompt = prompts[0];
        r.max_tokens = 48;
        r.temperature = 0;
        r.top_p = 1;
        r.repetition_penalty = 1;
        r.ignore_eos = 1;
        tandem_stats st2;
        if (s2) CHECKF(tm_session_generate(s2, &r, on_text, &from[i], &st2, &err) == TM_OK, "%s", err.msg);
        tm_session_free(s2);
        tm_rt_model_free(m2);
    }
    CHECK(from[0].len > 40);
    CHECKF(strcmp(from[0].buf, from[1].buf) == 0, "HF dir:\n%s\npackage:\n%s", from[0].buf, from[1].buf);
    unlink(pkg);
    return th_done("test_sched");
}
