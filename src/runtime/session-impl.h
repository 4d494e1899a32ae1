/* runtime/session-impl.h: the session's insides, shared by session.c (set-up,
 * routes, the synchronous scoring path) and sched.c (the concurrent
 * scheduler that every generation goes through). Not a public header. */
#ifndef TM_RUNTIME_SESSION_IMPL_H
#define TM_RUNTIME_SESSION_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "engine/engine.h"
#include "runtime/bridge.h"
#include "runtime/kvcache.h"
#include "runtime/router.h"
#include "runtime/session.h"

struct tm_pool;
struct tm_sched;

typedef struct tm_bound_engine {
    const tm_engine_vt *vt;
    tm_engine_caps caps;
    void *ctx;                 /* used by one thread at a time (see sched.c) */
} tm_bound_engine;

/* Core sets. The prefill side and the decode side each own a disjoint set;
 * when one side is idle the other borrows every core (pool_all_*). */
typedef struct tm_core_plan {
    int pre_cpus[64], n_pre;
    int dec_cpus[64], n_dec;
} tm_core_plan;

struct tm_session {
    tm_rt_model *rm;
    tandem_session_opts o;
    int max_ctx;
    int max_seqs;              /* sequences decoding at once */
    tm_core_plan plan;
    struct tm_pool *pool_pre, *pool_dec;        /* own core sets */
    struct tm_pool *pool_all_pre, *pool_all_dec; /* every core, called from that side's thread */
    tm_bound_engine pre;       /* prefill engine, prefill weights */
    tm_bound_engine dec;       /* decode engine, decode weights */
    tm_kv_cache *kv;           /* decode-side paged cache, all sequences */
    tm_kv_cache *stage;        /* prefill-side staging cache: one page = one whole sequence */
    tm_bridge *bridge;
    float *logits;             /* [V] the prefill side's last logits */
    struct tm_sched *sched;
    tm_router_state router;    /* the calibrated cost model, if cached (router.h) */
    /* idle lending (sched.c): seq_cst flags, Dekker style */
    atomic_int pre_busy;       /* the prefill side has work */
    atomic_int dec_using_all;  /* the decode side is running a step on every core */
    int dec_borrows;           /* the decode side may borrow the idle prefill cores (tm_sched_lend_policy) */
    int gpu_split;             /* the engines share one GPU, each on its own part (tandem_session_opts.gpu_split) */
};

/* The most sequences one decode step takes: the decode engine's caps.max_batch (TM_DEFAULT_BATCH where it
 * gives none), at most TM_MAX_BATCH and the session's max_seqs. The CPU engines take 8 (their GEMV
 * kernels' batch), the CUDA engine 64. */
/* A call on pool runs with the other side idle (pool is an every-core pool): tm_prefill_args.alone, a
 * device-partitioned engine then takes the whole device as a CPU engine takes every core. */
static inline int tm_session_alone(const tm_session *s, const struct tm_pool *pool)
{
    return pool == s->pool_all_pre || pool == s->pool_all_dec;
}

#define TM_MAX_BATCH 64
#define TM_DEFAULT_BATCH 8
int tm_session_max_batch(const tm_session *s);

/* The route name for reports: "hybrid", "prefill-only", "decode-only". */
const char *tm_route_name(tandem_route r);

/* Route for a prompt of n tokens and n_out new ones (the forced one, or the
 * router's choice under `load`, NULL: idle); the prediction into *pred (may be NULL). */
tandem_route tm_route_pick(const tm_session *s, int n_prompt, int n_out, const tm_router_load *load,
                           tm_router_pred *pred);

/* Chunk size for `remaining` prompt tokens on an engine with caps c (the
 * first chunk of the cheapest plan; see session.c). A chunk costs its rows
 * plus TM_CHUNK_OVERHEAD_ROWS: measured about 8 rows' time on Zen 4 with the
 * AVX-512 prefill and about 28 on a Xeon with AMX (a chunk re-streams the
 * weights); 16 between. */
#define TM_CHUNK_OVERHEAD_ROWS 16
#define TM_MAX_CHUNK_PLAN 4096   /* largest chunk size the planner optimizes over */
int tm_plan_chunk(const tm_engine_caps *c, int remaining);

/* The chunk sizes route r's prefill is planned over: the prefill engine's
 * (fixed shapes, the tail padded) for hybrid and prefill-only; none, so
 * exact chunks of at most 512, for decode-only. There the decode engine
 * runs the prompt on its decode-stage weights (int4 GEMV in blocks of up to
 * TM_KGEMV_MAX_B rows), where a padded row costs as much as a real one: a
 * 3-token prompt padded to 64 rows took 160 ms on Zen 4 against 10 ms for a
 * decode step. The router's cost features use the same sizes. */
void tm_route_chunk_caps(const tm_session *s, tandem_route r, tm_engine_caps *out);

/* Prefill ids[0..n) of one sequence along `route` into its decode pages
 * `seq` (via the staging pages `sseq` and the bridge when hybrid+stateless),
 * with threads `pool`; the last position's logits into `logits` [V].
 * *t_prefill and *t_handoff receive seconds; gemm (may be NULL) [2] the
 * seconds and operations of the chunks' GEMM-kernel matmuls
 * (tm_prefill_args.gemm). Where seq already holds positions [0,
 * seq->n_tokens) (a reused prefix, n_tokens < n), only the rest is
 * prefilled, statefully: the prefix's KV is in the decode pages. rows (may be
 * NULL): every prefilled position's logits, fn(ud, pos, logits [V]) in order
 * (the route's prefilling engine must have caps.row_logits), and its final
 * hidden state, hidden(ud, pos, h [D]) (caps.row_hidden); either may be NULL. */
typedef struct tm_row_sink {
    void (*fn)(void *ud, int pos, const float *logits);
    void *ud;
    void (*hidden)(void *ud, int pos, const float *h);
} tm_row_sink;
int tm_prefill_route(tm_session *s, tandem_route route, const int32_t *ids, int n, tm_kv_seq *seq, tm_kv_seq *sseq,
                     struct tm_pool *pool, float *logits, const tm_row_sink *rows, double *t_prefill, double *t_handoff,
                     double *gemm, tm_err *err);

/* The scheduler (sched.c). */
int tm_sched_new(struct tm_sched **out, tm_session *s, tm_err *err);
int tm_sched_lend_policy(const tm_session *s); /* sched.c, invariant 5 */
void tm_sched_free(struct tm_sched *sc);

#endif
