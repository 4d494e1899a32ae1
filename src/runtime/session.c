/* runtime/session.c: see session.h for the request lifecycle. */
#include "runtime/session.h"
#include "runtime/session-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/cpu.h"
#include "core/threadpool.h"
#include "engine/engine.h"
#include "model/model.h"
#include "runtime/bridge.h"
#include "runtime/kvcache.h"
#include "runtime/lookup.h"
#include "text/sampler.h"
#include "text/tokenizer.h"

#define DECODE_PAGE 16
#define KV_PREFAULT 4608 /* positions of KV faulted in at session creation: a 4K-token prompt and its padding */

/* Pick the first engine of the registry (best first) with `role` that probes
 * here, or the named one. */
static int engine_pick(tm_bound_engine *b, const char *name, unsigned role, tm_err *err)
{
    if (name) {
        b->vt = tm_engine_find(name);
        if (!b->vt) return tm_errf(err, TM_E_NOTFOUND, "unknown engine '%s' (see tandem devices)", name);
        if (b->vt->version != TM_ENGINE_VERSION)
            return tm_errf(err, TM_E_UNSUPPORTED, "engine '%s' implements interface version %d, this build %d", name,
                           b->vt->version, TM_ENGINE_VERSION);
        return b->vt->probe(&b->caps, err);
    }
    int n;
    const tm_engine_vt *const *all = tm_engines(&n);
    for (int i = 0; i < n; i++) {
        tm_err e2 = {0};
        if (all[i]->version == TM_ENGINE_VERSION && all[i]->probe(&b->caps, &e2) == TM_OK && (b->caps.roles & role)) {
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
    tm_sched_free(s->sched); /* joins the workers first */
    if (s->pre.ctx) s->pre.vt->unbind(s->pre.ctx);
    if (s->dec.ctx) s->dec.vt->unbind(s->dec.ctx);
    tm_bridge_free(s->bridge);
    tm_kv_cache_free(s->kv);
    tm_kv_cache_free(s->stage);
    tm_pool_free(s->pool_pre);
    tm_pool_free(s->pool_dec);
    tm_pool_free(s->pool_all_pre);
    tm_pool_free(s->pool_all_dec);
    free(s->logits);
    free(s);
}

/* Core sets, from the CPUs this thread may run on (tm_cpu_allowed: taskset,
 * a container's cpuset) as tm_cpu_pick gives them (CPU 0 left out where
 * others suffice): prefill takes the first prefill_threads of them (default
 * half), decode the rest; with one CPU both share it. */
static void plan_cores(tm_core_plan *p, const tandem_session_opts *o)
{
    int cpus[64];
    int ncpu = tm_cpu_allowed(NULL, 64);
    int n = o->n_threads > 0 && o->n_threads < ncpu ? o->n_threads : ncpu;
    n = tm_cpu_pick(cpus, n);
    int npre = o->prefill_threads > 0 && o->prefill_threads < n ? o->prefill_threads : (n + 1) / 2;
    if (n == 1) {
        p->pre_cpus[0] = p->dec_cpus[0] = cpus[0];
        p->n_pre = p->n_dec = 1;
        return;
    }
    p->n_pre = npre;
    p->n_dec = n - npre;
    for (int i = 0; i < npre; i++) p->pre_cpus[i] = cpus[i];
    for (int i = 0; i < p->n_dec; i++) p->dec_cpus[i] = cpus[npre + i];
}

/* Four pools: each side's own cores, and every core with worker 0 on that
 * side's first core (used while the other side is idle). */
static int make_pools(tm_session *s, tm_err *err)
{
    tm_core_plan *p = &s->plan;
    int shared = p->n_pre == 1 && p->n_dec == 1 && p->pre_cpus[0] == p->dec_cpus[0];
    int all[128], n = 0, rc;
    if ((rc = tm_pool_init(&s->pool_pre, p->pre_cpus, p->n_pre, 0, err)) != TM_OK) return rc;
    if ((rc = tm_pool_init(&s->pool_dec, p->dec_cpus, p->n_dec, 0, err)) != TM_OK) return rc;
    for (int i = 0; i < p->n_pre; i++) all[n++] = p->pre_cpus[i];
    for (int i = 0; i < p->n_dec && !shared; i++) all[n++] = p->dec_cpus[i];
    if ((rc = tm_pool_init(&s->pool_all_pre, all, n, 0, err)) != TM_OK) return rc;
    n = 0;
    for (int i = 0; i < p->n_dec; i++) all[n++] = p->dec_cpus[i];
    for (int i = 0; i < p->n_pre && !shared; i++) all[n++] = p->pre_cpus[i];
    return tm_pool_init(&s->pool_all_dec, all, n, 0, err);
}

/* The decode cache's dtype for opts' kv_dtype, if both engines take it. */
static int kv_dtype_pick(const tm_session *s, tandem_kv_dtype want, tm_dtype *dt, tm_err *err)
{
    switch (want) {
    case TANDEM_KV_DEFAULT:
    case TANDEM_KV_BF16: *dt = TM_DT_BF16; break;
    case TANDEM_KV_F16: *dt = TM_DT_F16; break;
    case TANDEM_KV_INT8: *dt = TM_DT_Q8PC; break;
    default: return tm_errf(err, TM_E_INVALID, "session: unknown KV cache dtype %d (bf16, f16, int8)", (int)want);
    }
    /* the prefill engine writes this cache too (stateful hand-off, prefill-only route) */
    const tm_engine_caps *caps[2] = {&s->dec.caps, &s->pre.caps};
    for (int e = 0; e < 2; e++) {
        int ok = 0;
        for (int i = 0; i < caps[e]->n_kv_dtypes; i++) ok |= caps[e]->kv_dtypes[i] == *dt;
        if (!ok)
            return tm_errf(err, TM_E_UNSUPPORTED, "session: engine %s has no %s KV cache", caps[e]->name,
                           *dt == TM_DT_Q8PC ? "int8" : tm_dtype_name(*dt));
    }
    return TM_OK;
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
    s->max_seqs = o->max_seqs > 0 ? (o->max_seqs < 64 ? o->max_seqs : 64) : 8;
    int rc;
    if (o->lookup < 0 || o->lookup > TM_LOOKUP_MAX) {
        rc = tm_errf(err, TM_E_INVALID, "session: lookup %d (drafted tokens a step: 0 off, at most %d)", o->lookup,
                     TM_LOOKUP_MAX);
        goto fail;
    }
    plan_cores(&s->plan, o);
    if ((rc = make_pools(s, err)) != TM_OK) goto fail;
    if ((rc = engine_pick(&s->pre, o->prefill_engine, TM_ROLE_PREFILL, err)) != TM_OK) goto fail;
    if ((rc = engine_pick(&s->dec, o->decode_engine, TM_ROLE_DECODE, err)) != TM_OK) goto fail;
    tm_dtype kv_dt = TM_DT_BF16;
    if ((rc = kv_dtype_pick(s, o->kv_dtype, &kv_dt, err)) != TM_OK) goto fail;
    /* engines get room for a padded last chunk past the session's context */
    tm_engine_opts eo = {.weight_enc = rm->prefill_enc, .pool = s->pool_all_pre, .max_ctx = s->max_ctx + 512,
                         .roles = TM_ROLE_PREFILL};
    /* one device for both roles: the decode engine's work first (engine.h's urgent) where the stall bound
       holds, and, where asked and requests may overlap, each engine its own part of it */
    int same = strcmp(s->pre.caps.device, "cpu") && !strcmp(s->pre.caps.device, s->dec.caps.device);
    int split = same && o->gpu_split > 0 && o->gpu_split < 1 && s->max_seqs > 1;
    if (split) eo.part = 1, eo.part_share = o->gpu_split, s->gpu_split = 1;
    if (split && o->explain)
        fprintf(stderr, "[route] %s: the prefill engine takes %.2f of its multiprocessors, the decode engine the rest; "
                "the idle side's lent\n", s->pre.caps.device, eo.part_share);
    if ((rc = s->pre.vt->bind(&s->pre.ctx, rm->prefill, &eo, err)) != TM_OK) goto fail;
    eo.weight_enc = rm->decode_enc;
    if (split) eo.part = 2;
    eo.urgent = same && tandem_stall_bound(o) > 0; /* --max-stall off: no bound to keep, the prompt's TTFT first */
    eo.pool = s->pool_all_dec;
    eo.roles = TM_ROLE_DECODE | TM_ROLE_PREFILL; /* it prefills the decode-only route's prompts (GEMM panels
                                                   where its encoding has them: int8, bf16) */
    if ((rc = s->dec.vt->bind(&s->dec.ctx, rm->decode, &eo, err)) != TM_OK) goto fail;
    /* decode pages for max_seqs full contexts, plus chunk padding */
    int pages = s->max_seqs * ((s->max_ctx + 512 + DECODE_PAGE - 1) / DECODE_PAGE);
    /* both caches fault in a first prompt's storage now rather than in the first request (kvcache.h):
       KV_PREFAULT tokens, at most the session's context */
    int pre = s->max_ctx + 512 < KV_PREFAULT ? s->max_ctx + 512 : KV_PREFAULT;
    if ((rc = tm_kv_cache_init(&s->kv, &(tm_kv_cache_opts){m->L, m->Hk, m->Dh, DECODE_PAGE, pages, kv_dt, pre}, err)))
        goto fail;
    /* staging stays bf16 whatever the decode dtype: the prefill kernel reads it, the bridge converts */
    if ((rc = tm_kv_cache_init(&s->stage, &(tm_kv_cache_opts){m->L, m->Hk, m->Dh, next_pow2(s->max_ctx + 512), 1,
                                                               TM_DT_BF16, pre}, err)))
        goto fail;
    if ((rc = tm_bridge_init(&s->bridge, -1, err)) != TM_OK) goto fail;
    s->logits = malloc(sizeof(float) * (size_t)m->V);
    if (!s->logits) { rc = tm_errf(err, TM_E_NOMEM, "session: out of memory"); goto fail; }
    tm_router_session_init(s);
    if (o->route != TANDEM_ROUTE_AUTO && !(tm_router_routes(s) & (1u << o->route))) {
        rc = tm_errf(err, TM_E_UNSUPPORTED, "session: route %s needs a %s engine with both roles; %s has only %s",
                     tm_route_name(o->route), o->route == TANDEM_ROUTE_PREFILL_ONLY ? "prefill" : "decode",
                     o->route == TANDEM_ROUTE_PREFILL_ONLY ? s->pre.caps.name : s->dec.caps.name,
                     o->route == TANDEM_ROUTE_PREFILL_ONLY ? "prefill" : "decode");
        goto fail;
    }
    s->dec_borrows = tm_sched_lend_policy(s);
    if ((rc = tm_sched_new(&s->sched, s, err)) != TM_OK) goto fail;
    *out = s;
    return TM_OK;
fail:
    tm_session_free(s);
    return rc;
}

const char *tm_session_prefill_engine(const tm_session *s) { return s->pre.caps.name; }

int tm_session_max_batch(const tm_session *s)
{
    int b = s->dec.caps.max_batch > 0 ? s->dec.caps.max_batch : TM_DEFAULT_BATCH;
    b = b < TM_MAX_BATCH ? b : TM_MAX_BATCH;
    return b < s->max_seqs ? b : s->max_seqs;
}
const char *tm_session_decode_engine(const tm_session *s) { return s->dec.caps.name; }

/* ---- routing and chunking ------------------------------------------------------ */

const char *tm_route_name(tandem_route r)
{
    switch (r) {
    case TANDEM_ROUTE_PREFILL_ONLY: return "prefill-only";
    case TANDEM_ROUTE_DECODE_ONLY: return "decode-only";
    default: return "hybrid";
    }
}

/* The router (router.h): the forced route, else the calibrated cost model's
 * cheapest, else (no calibration cached) the rule by prompt length. */
tandem_route tm_route_pick(const tm_session *s, int n_prompt, int n_out, const tm_router_load *load,
                           tm_router_pred *pred)
{
    return tm_router_pick(s, n_prompt, n_out, load, pred);
}

/* The chunk plan: for a prompt longer than the largest built-in chunk, that
 * chunk; for the rest, the plan of least cost, cost = the rows computed
 * (padding included) + TM_CHUNK_OVERHEAD_ROWS per chunk (each chunk streams
 * the prefill weights once and pays its fixed costs). E.g. 448 tokens run as
 * 256 + 128 + 64 (no padding), not 256 + 256 (64 padded rows, 14% more work);
 * 100 run as one 128 (28 padded rows) rather than 64 + 64. Engines without
 * chunk sizes take exact chunks of <= 512. */
int tm_plan_chunk(const tm_engine_caps *c, int remaining)
{
    if (remaining <= 0) return 0;
    if (c->n_chunks == 0) return remaining < 512 ? remaining : 512;
    int tmax = 0;
    for (int i = 0; i < c->n_chunks; i++) tmax = c->chunk_sizes[i] > tmax ? c->chunk_sizes[i] : tmax;
    if (tmax <= 0) return 0;
    if (remaining > tmax) return tmax;
    /* cost[r], first[r]: the cheapest plan for r tokens and its first chunk (r <= tmax) */
    int cost[TM_MAX_CHUNK_PLAN + 1], first[TM_MAX_CHUNK_PLAN + 1];
    if (remaining > TM_MAX_CHUNK_PLAN) return tmax;
    cost[0] = 0;
    for (int r = 1; r <= remaining; r++) {
        cost[r] = -1;
        first[r] = 0;
        for (int i = 0; i < c->n_chunks; i++) {
            int t = c->chunk_sizes[i];
            if (t <= 0) continue;
            int v = t + TM_CHUNK_OVERHEAD_ROWS + (t >= r ? 0 : cost[r - t]);
            /* ties: the larger first chunk (fewer chunks) */
            if (cost[r] < 0 || v < cost[r] || (v == cost[r] && t > first[r])) {
                cost[r] = v;
                first[r] = t;
            }
        }
    }
    return first[remaining];
}

void tm_route_chunk_caps(const tm_session *s, tandem_route r, tm_engine_caps *out)
{
    *out = r == TANDEM_ROUTE_DECODE_ONLY ? s->dec.caps : s->pre.caps;
    if (r == TANDEM_ROUTE_DECODE_ONLY) out->n_chunks = 0;
}

/* a chunk's row t as the prompt's position pos0 + t (tm_prefill_route's rows) */
typedef struct row_at {
    const tm_row_sink *sink;
    int pos0;
} row_at;

static void row_to_sink(void *ud, int t, const float *logits)
{
    const row_at *r = ud;
    r->sink->fn(r->sink->ud, r->pos0 + t, logits);
}

static void hidden_to_sink(void *ud, int t, const float *h)
{
    const row_at *r = ud;
    r->sink->hidden(r->sink->ud, r->pos0 + t, h);
}

int tm_prefill_route(tm_session *s, tandem_route route, const int32_t *ids, int n, tm_kv_seq *seq, tm_kv_seq *sseq,
                     struct tm_pool *pool, float *logits, const tm_row_sink *rows, double *t_prefill, double *t_handoff,
                     double *gemm, tm_err *err)
{
    int hybrid = route == TANDEM_ROUTE_HYBRID;
    tm_bound_engine *e = route == TANDEM_ROUTE_DECODE_ONLY ? &s->dec : &s->pre;
    int pos0 = seq->n_tokens > 0 && seq->n_tokens < n ? seq->n_tokens : 0; /* a reused prefix */
    int stateless = hybrid && s->o.stateless && pos0 == 0;
    tm_kv_cache *kv = stateless ? s->stage : s->kv;
    tm_kv_seq *kseq = stateless ? sseq : seq;
    int rc;
    if ((rc = tm_kv_seq_reserve(kv, kseq, n + 512, err)) != TM_OK) return rc;
    if (stateless && (rc = tm_kv_seq_reserve(s->kv, seq, n + 1, err)) != TM_OK) return rc;
    kseq->owner = seq->owner = TM_KV_OWNER_PREFILL;
    int32_t buf[512];
    tm_engine_caps plan;
    tm_route_chunk_caps(s, route, &plan);
    if (gemm) gemm[0] = gemm[1] = 0;
    double t0 = tm_now_s();
    for (int pos = pos0; pos < n;) {
        int T = tm_plan_chunk(&plan, n - pos);
        int nv = n - pos < T ? n - pos : T;
        if (s->o.exact_tail) T = nv; /* no padding: a shape the engine was not built for */
        memcpy(buf, ids + pos, sizeof(int32_t) * (size_t)nv);
        for (int i = nv; i < T; i++) buf[i] = ids[n - 1]; /* padding: real rows never attend to it */
        int last = pos + nv == n;
        tm_prefill_args a = {.tokens = buf, .T = T, .n_valid = nv, .pos0 = pos, .kv = kv, .seq = kseq,
                             .logits = last ? logits : NULL, .pool = pool, .gemm = gemm,
                             .alone = tm_session_alone(s, pool)};
        row_at at = {rows, pos};
        if (rows) a.row_ud = &at;
        if (rows && rows->fn) a.on_row_logits = row_to_sink;
        if (rows && rows->hidden) a.on_row_hidden = hidden_to_sink;
        if (last && stateless) {
            /* the last chunk: each layer's whole prompt KV goes to the bridge as soon as it completes */
            tm_bridge_begin(s->bridge, s->stage, sseq, s->kv, seq, 0, n);
            a.on_layer = tm_bridge_layer_done;
            a.ud = s->bridge;
        }
        if ((rc = e->vt->prefill(e->ctx, &a, err)) != TM_OK) {
            if (last && stateless) tm_bridge_finish(s->bridge);
            return rc;
        }
        pos += nv;
    }
    double t1 = tm_now_s();
    /* stateless: wait for the copies not hidden behind later layers; stateful: ownership moves, no bytes */
    *t_handoff = stateless ? tm_bridge_finish(s->bridge) : 0.0;
    kseq->n_tokens = seq->n_tokens = n;
    seq->owner = TM_KV_OWNER_DECODE;
    *t_prefill = t1 - t0;
    return TM_OK;
}

/* The synchronous scoring path (tests, perplexity). The session must be idle. */
int tm_session_score(tm_session *s, const int32_t *ids, int n, int n_prefill, tandem_route route, float *logits,
                     tm_err *err)
{
    int V = s->rm->decode->V;
    if (n_prefill < 1 || n_prefill > n) return tm_errf(err, TM_E_INVALID, "score: prefill %d of %d tokens", n_prefill, n);
    if (n + 1 > s->max_ctx) return tm_errf(err, TM_E_LIMIT, "score: %d tokens exceed the context of %d", n, s->max_ctx);
    if (route == TANDEM_ROUTE_AUTO) route = tm_route_pick(s, n_prefill, n - n_prefill + 1, NULL, NULL);
    if (!(tm_router_routes(s) & (1u << route)))
        return tm_errf(err, TM_E_UNSUPPORTED, "score: route %s is not available on engines %s + %s", tm_route_name(route),
                       s->pre.caps.name, s->dec.caps.name);
    tm_kv_seq seq = {0}, sseq = {0};
    double tp, th;
    int rc = tm_prefill_route(s, route, ids, n_prefill, &seq, &sseq, s->pool_all_pre, logits, NULL, &tp, &th, NULL, err);
    tm_bound_engine *e = route == TANDEM_ROUTE_PREFILL_ONLY ? &s->pre : &s->dec;
    for (int p = n_prefill; rc == TM_OK && p < n; p++) {
        if ((rc = tm_kv_seq_reserve(s->kv, &seq, p + 1, err)) != TM_OK) break;
        tm_kv_seq *sp = &seq;
        tm_decode_args a = {.B = 1, .tokens = &ids[p], .pos = &p, .kv = s->kv, .seqs = &sp,
                            .logits = logits + (size_t)(p - n_prefill + 1) * V, .pool = s->pool_all_dec,
                            .alone = 1};
        rc = e->vt->decode(e->ctx, &a, err);
    }
    tm_kv_seq_release(s->kv, &seq);
    tm_kv_seq_release(s->stage, &sseq);
    return rc;
}
