/* runtime/session.c: see session.h for the request lifecycle. */
#include "runtime/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/cpu.h"
#include "core/threadpool.h"
#include "engine/engine.h"
#include "model/model.h"
#include "runtime/bridge.h"
#include "runtime/kvcache.h"
#include "text/sampler.h"
#include "text/tokenizer.h"

#define DECODE_PAGE 16

typedef struct bound_engine {
    const tm_engine_vt *vt;
    tm_engine_caps caps;
    void *ctx;
} bound_engine;

struct tm_session {
    tm_rt_model *rm;
    tandem_session_opts o;
    int max_ctx;
    tm_pool *pool;
    bound_engine pre;      /* prefill engine, prefill weights */
    bound_engine dec;      /* decode engine, decode weights */
    tm_kv_cache *kv;       /* decode-side paged cache */
    tm_kv_cache *stage;    /* prefill-side staging cache: one page = one whole sequence */
    tm_bridge *bridge;
    float *logits;         /* [V] */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Pick the first engine of the registry (best first) with `role` that probes
 * here, or the named one. */
static int engine_pick(bound_engine *b, const char *name, unsigned role, tm_err *err)
{
    if (name) {
        b->vt = tm_engine_find(name);
        if (!b->vt) return tm_errf(err, TM_E_NOTFOUND, "unknown engine '%s' (see tandem devices)", name);
        return b->vt->probe(&b->caps, err);
    }
    int n;
    const tm_engine_vt *const *all = tm_engines(&n);
    for (int i = 0; i < n; i++) {
        tm_err e2 = {0};
        if (all[i]->probe(&b->caps, &e2) == TM_OK && (b->caps.roles & role)) {
            b->vt = all[i];
            return TM_OK;
        }
    }
    return tm_errf(err, TM_E_UNSUPPORTED, "no engine for the %s role on this machine",
                   role == TM_ROLE_PREFILL ? "prefill" : "decode");
}

static int next_pow2(int n)
{
    int p = 1;
    while (p < n) p <<= 1;
    return p;
}

void tm_session_free(tm_session *s)
{
    if (!s) return;
    if (s->pre.ctx) s->pre.vt->unbind(s->pre.ctx);
    if (s->dec.ctx) s->dec.vt->unbind(s->dec.ctx);
    tm_bridge_free(s->bridge);
    tm_kv_cache_free(s->kv);
    tm_kv_cache_free(s->stage);
    tm_pool_free(s->pool);
    free(s->logits);
    free(s);
}

int tm_session_new(tm_session **out, tm_rt_model *rm, const tandem_session_opts *o, tm_err *err)
{
    *out = NULL;
    tm_session *s = calloc(1, sizeof *s);
    if (!s) return tm_errf(err, TM_E_NOMEM, "session: out of memory");
    s->rm = rm;
    s->o = *o;
    const tm_model *m = rm->decode;
    s->max_ctx = o->max_ctx > 0 ? o->max_ctx : (m->max_pos > 0 && m->max_pos < 4096 ? m->max_pos : 4096);
    int rc;
    int ncpu = tm_cpu_get()->n_cpus;
    int nt = o->n_threads > 0 ? o->n_threads : ncpu;
    int cpus[256];
    for (int i = 0; i < nt && i < 256; i++) cpus[i] = i % ncpu;
    if ((rc = tm_pool_init(&s->pool, nt <= ncpu ? cpus : NULL, nt, 0, err)) != TM_OK) goto fail;
    if ((rc = engine_pick(&s->pre, o->prefill_engine, TM_ROLE_PREFILL, err)) != TM_OK) goto fail;
    if ((rc = engine_pick(&s->dec, o->decode_engine, TM_ROLE_DECODE, err)) != TM_OK) goto fail;
    tm_engine_opts eo = {.weight_enc = rm->prefill_enc, .pool = s->pool, .max_ctx = s->max_ctx};
    if ((rc = s->pre.vt->bind(&s->pre.ctx, rm->prefill, &eo, err)) != TM_OK) goto fail;
    eo.weight_enc = rm->decode_enc;
    if ((rc = s->dec.vt->bind(&s->dec.ctx, rm->decode, &eo, err)) != TM_OK) goto fail;
    int pages = (s->max_ctx + DECODE_PAGE - 1) / DECODE_PAGE + 64;
    if ((rc = tm_kv_cache_init(&s->kv, &(tm_kv_cache_opts){m->L, m->Hk, m->Dh, DECODE_PAGE, pages, TM_DT_BF16}, err)))
        goto fail;
    if ((rc = tm_kv_cache_init(&s->stage, &(tm_kv_cache_opts){m->L, m->Hk, m->Dh, next_pow2(s->max_ctx + 512), 1,
                                                               TM_DT_BF16}, err)))
        goto fail;
    if ((rc = tm_bridge_init(&s->bridge, -1, err)) != TM_OK) goto fail;
    s->logits = malloc(sizeof(float) * (size_t)m->V);
    if (!s->logits) { rc = tm_errf(err, TM_E_NOMEM, "session: out of memory"); goto fail; }
    *out = s;
    return TM_OK;
fail:
    tm_session_free(s);
    return rc;
}

const char *tm_session_prefill_engine(const tm_session *s) { return s->pre.caps.name; }
const char *tm_session_decode_engine(const tm_session *s) { return s->dec.caps.name; }

/* ---- routing and chunking ------------------------------------------------------ */

static const char *route_name(tandem_route r)
{
    switch (r) {
    case TANDEM_ROUTE_PREFILL_ONLY: return "prefill-only";
    case TANDEM_ROUTE_DECODE_ONLY: return "decode-only";
    default: return "hybrid";
    }
}

/* route_pick: the forced route, or the router's choice. Short prompts gain
 * nothing from the matrix engine (a padded chunk costs more than streaming
 * the decode weights a few times), so they go decode-only. */
static tandem_route route_pick(const tm_session *s, int n_prompt)
{
    if (s->o.route != TANDEM_ROUTE_AUTO) return s->o.route;
    return n_prompt < 16 ? TANDEM_ROUTE_DECODE_ONLY : TANDEM_ROUTE_HYBRID;
}

/* Chunk size for `remaining` prompt tokens: the largest built-in chunk that
 * fits, else the smallest that covers the tail (padded). Engines without
 * chunk sizes take exact chunks of up to 512. */
static int plan_chunk(const tm_engine_caps *c, int remaining)
{
    if (c->n_chunks == 0) return remaining < 512 ? remaining : 512;
    int best_fit = 0, cover = 0;
    for (int i = 0; i < c->n_chunks; i++) {
        int t = c->chunk_sizes[i];
        if (t <= remaining && t > best_fit) best_fit = t;
        if (t >= remaining && (!cover || t < cover)) cover = t;
    }
    if (best_fit == remaining || !cover) return best_fit;
    return best_fit >= 256 && remaining > best_fit ? best_fit : cover;
}

typedef struct run_state {
    tm_session *s;
    tandem_route route;
    tm_kv_seq seq;        /* decode pages */
    tm_kv_seq sseq;       /* staging pages (hybrid) */
    double t_prefill, t_handoff;
} run_state;

/* Prefill ids[0..n) along the route; logits of the last one into s->logits. */
static int run_prefill(run_state *st, const int32_t *ids, int n, tm_err *err)
{
    tm_session *s = st->s;
    int hybrid = st->route == TANDEM_ROUTE_HYBRID;
    bound_engine *e = st->route == TANDEM_ROUTE_DECODE_ONLY ? &s->dec : &s->pre;
    int stateless = hybrid && s->o.stateless;
    tm_kv_cache *kv = stateless ? s->stage : s->kv;
    tm_kv_seq *seq = stateless ? &st->sseq : &st->seq;
    int rc, maxchunk = 512;
    if ((rc = tm_kv_seq_reserve(kv, seq, n + maxchunk, err)) != TM_OK) return rc;
    if (stateless && (rc = tm_kv_seq_reserve(s->kv, &st->seq, n + 1, err)) != TM_OK) return rc;
    seq->owner = TM_KV_OWNER_PREFILL;
    int32_t buf[512];
    double t0 = now_s();
    for (int pos = 0; pos < n;) {
        int T = plan_chunk(&e->caps, n - pos);
        int nv = n - pos < T ? n - pos : T;
        memcpy(buf, ids + pos, sizeof(int32_t) * (size_t)nv);
        for (int i = nv; i < T; i++) buf[i] = ids[n - 1]; /* padding: never attended to by real rows */
        int last = pos + nv == n;
        tm_prefill_args a = {.tokens = buf, .T = T, .n_valid = nv, .pos0 = pos, .kv = kv, .seq = seq,
                             .logits = last ? s->logits : NULL};
        if (last && stateless) {
            /* the last chunk: hand each layer's whole prompt KV to the bridge as it completes */
            tm_bridge_begin(s->bridge, s->stage, &st->sseq, s->kv, &st->seq, 0, n);
            st->seq.n_tokens = n;
            a.on_layer = tm_bridge_layer_done;
            a.ud = s->bridge;
        }
        if ((rc = e->vt->prefill(e->ctx, &a, err)) != TM_OK) {
            if (last && stateless) tm_bridge_finish(s->bridge);
            return rc;
        }
        pos += nv;
    }
    seq->n_tokens = n;
    double t1 = now_s();
    if (stateless) {
        st->t_handoff = tm_bridge_finish(s->bridge); /* the part not hidden behind later layers */
        st->seq.n_tokens = n;
    } else {
        st->t_handoff = 0;                            /* stateful: ownership moves, no bytes */
    }
    st->seq.owner = TM_KV_OWNER_DECODE;
    st->t_prefill = t1 - t0;
    return TM_OK;
}

static int run_decode_step(run_state *st, int32_t tok, int pos, tm_err *err)
{
    tm_session *s = st->s;
    bound_engine *e = st->route == TANDEM_ROUTE_PREFILL_ONLY ? &s->pre : &s->dec;
    int rc = tm_kv_seq_reserve(s->kv, &st->seq, pos + 1, err);
    if (rc != TM_OK) return rc;
    tm_kv_seq *sp = &st->seq;
    tm_decode_args a = {.B = 1, .tokens = &tok, .pos = &pos, .kv = s->kv, .seqs = &sp, .logits = s->logits};
    return e->vt->decode(e->ctx, &a, err);
}

static void run_release(run_state *st)
{
    tm_kv_seq_release(st->s->kv, &st->seq);
    tm_kv_seq_release(st->s->stage, &st->sseq);
}

int tm_session_score(tm_session *s, const int32_t *ids, int n, int n_prefill, tandem_route route, float *logits,
                     tm_err *err)
{
    int V = s->rm->decode->V;
    if (n_prefill < 1 || n_prefill > n) return tm_errf(err, TM_E_INVALID, "score: prefill %d of %d tokens", n_prefill, n);
    if (n + 1 > s->max_ctx) return tm_errf(err, TM_E_LIMIT, "score: %d tokens exceed the context of %d", n, s->max_ctx);
    run_state st = {.s = s, .route = route == TANDEM_ROUTE_AUTO ? route_pick(s, n_prefill) : route};
    int rc = run_prefill(&st, ids, n_prefill, err);
    if (rc == TM_OK) memcpy(logits, s->logits, sizeof(float) * (size_t)V);
    for (int p = n_prefill; rc == TM_OK && p < n; p++) {
        rc = run_decode_step(&st, ids[p], p, err);
        if (rc == TM_OK) memcpy(logits + (size_t)(p - n_prefill + 1) * V, s->logits, sizeof(float) * (size_t)V);
    }
    run_release(&st);
    return rc;
}

/* ---- generation ----------------------------------------------------------------- */

int tm_session_generate(tm_session *s, const tandem_request *r, tandem_text_fn on_text, void *ud, tandem_stats *stats,
                        tm_err *err)
{
    tm_rt_model *rm = s->rm;
    double t_submit = now_s();
    memset(stats, 0, sizeof *stats);
    int32_t *ids = NULL;
    size_t n = 0;
    int rc;
    if (r->prompt) {
        if ((rc = tm_tok_encode(rm->tok, r->prompt, strlen(r->prompt), 1, &ids, &n, err)) != TM_OK) return rc;
    } else {
        if (!r->prompt_ids || r->n_prompt_ids == 0) return tm_errf(err, TM_E_INVALID, "request: empty prompt");
        ids = malloc(sizeof(int32_t) * r->n_prompt_ids);
        if (!ids) return tm_errf(err, TM_E_NOMEM, "request: out of memory");
        memcpy(ids, r->prompt_ids, sizeof(int32_t) * r->n_prompt_ids);
        n = r->n_prompt_ids;
    }
    int V = rm->decode->V;
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V) {
            free(ids);
            return tm_errf(err, TM_E_INVALID, "request: prompt token id %d out of range (vocabulary %d)", ids[i], V);
        }
    if (n == 0) {
        free(ids);
        return tm_errf(err, TM_E_INVALID, "request: the prompt encodes to no tokens");
    }
    int max_new = r->max_tokens > 0 ? r->max_tokens : 128;
    if ((int)n + max_new > s->max_ctx) {
        if ((int)n >= s->max_ctx) {
            free(ids);
            return tm_errf(err, TM_E_LIMIT, "prompt of %zu tokens does not fit the context of %d tokens", n, s->max_ctx);
        }
        max_new = s->max_ctx - (int)n;
    }

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
    tm_sampler *smp = tm_sampler_new(&sp, V, err);
    int n_stops = 0;
    while (r->stop && r->stop[n_stops]) n_stops++;
    tm_stop *stop = smp ? tm_stop_new(rm->eos_ids, r->ignore_eos ? 0 : rm->n_eos, r->stop, n_stops, err) : NULL;
    tm_detok_stream *ds = stop ? tm_detok_stream_new(rm->tok, 1) : NULL;
    if (!smp || !stop || !ds) {
        if (smp && stop && !ds) tm_errf(err, TM_E_NOMEM, "request: out of memory");
        tm_sampler_free(smp);
        tm_stop_free(stop);
        free(ids);
        return err ? err->code : TM_E_NOMEM;
    }
    tm_sampler_accept_prompt(smp, ids, (int64_t)n);

    run_state st = {.s = s, .route = route_pick(s, (int)n)};
    stats->route = route_name(st.route);
    stats->prefill_engine = st.route == TANDEM_ROUTE_DECODE_ONLY ? s->dec.caps.name : s->pre.caps.name;
    stats->decode_engine = st.route == TANDEM_ROUTE_PREFILL_ONLY ? s->pre.caps.name : s->dec.caps.name;
    stats->n_prompt = (int)n;
    if (s->o.explain)
        fprintf(stderr, "[route] prompt %zu tokens -> %s (prefill %s, decode %s)\n", n, stats->route,
                st.route == TANDEM_ROUTE_DECODE_ONLY ? s->dec.caps.name : s->pre.caps.name,
                st.route == TANDEM_ROUTE_PREFILL_ONLY ? s->pre.caps.name : s->dec.caps.name);
    rc = run_prefill(&st, ids, (int)n, err);
    stats->t_prefill = st.t_prefill;
    stats->t_handoff = st.t_handoff;
    stats->finish_reason = "length";
    double t_dec0 = now_s();
    int pos = (int)n, cancelled = 0, stop_string = 0;
    for (int i = 0; rc == TM_OK && i < max_new; i++) {
        int32_t tok = tm_sampler_sample(smp, s->logits);
        tm_sampler_accept(smp, tok);
        stats->n_generated++;
        if (i == 0) stats->ttft = now_s() - t_submit;
        if (tm_stop_is_eos(stop, tok)) {
            stats->finish_reason = "stop";
            break;
        }
        char *piece = NULL;
        size_t plen = 0;
        if ((rc = tm_detok_stream_push(ds, tok, &piece, &plen, err)) != TM_OK) break;
        const char *emit;
        size_t elen = 0;
        int matched = tm_stop_feed(stop, piece ? piece : "", plen, &emit, &elen);
        int cancel = elen && on_text && on_text(ud, emit, elen, tok);
        free(piece); /* emit may point into piece */
        if (cancel) {
            cancelled = 1;
            break;
        }
        if (matched) {
            stats->finish_reason = "stop";
            stop_string = 1;
            break;
        }
        if (i + 1 == max_new) break;
        rc = run_decode_step(&st, tok, pos++, err);
    }
    if (rc == TM_OK && !cancelled && !stop_string) { /* emit what was held back */
        char *piece = NULL;
        size_t plen = 0;
        const char *emit;
        size_t elen = 0;
        if (tm_detok_stream_flush(ds, &piece, &plen, err) == TM_OK && plen) {
            tm_stop_feed(stop, piece, plen, &emit, &elen);
            if (elen && on_text) on_text(ud, emit, elen, -1);
        }
        free(piece);
        tm_stop_flush(stop, &emit, &elen);
        if (elen && on_text) on_text(ud, emit, elen, -1);
    }
    stats->t_decode = now_s() - t_dec0;
    if (cancelled) {
        stats->finish_reason = "cancelled";
        rc = tm_errf(err, TM_E_CANCELLED, "request cancelled");
    }
    run_release(&st); /* invariant 1: every exit path */
    tm_detok_stream_free(ds);
    tm_stop_free(stop);
    tm_sampler_free(smp);
    free(ids);
    return rc;
}
