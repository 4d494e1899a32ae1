/* runtime/router.h: the calibrated router. A cost model per engine and route,
 * fitted from measurements on this machine, cached by machine and package,
 * and the route choice it drives.
 *
 *   // once per machine and model (what `tandem calibrate` does):
 *   tm_router_costs c;
 *   tm_router_calibrate(s, &(tm_router_cal_opts){.quick = 1}, &c, &err);   // measure + fit
 *   tm_router_key k;
 *   tm_router_key_of(s, &k, &err);
 *   char path[4096];
 *   tm_router_cache_path(path, sizeof path, NULL, &k, &err);  // $XDG_CACHE_HOME/tandem/router-<hash>.json
 *   tm_router_write(path, &k, &c, &err);                        // atomic
 *
 *   // every session: tm_session_new calls tm_router_session_init (loads the
 *   // cache if present); the scheduler asks for each request:
 *   tm_router_pred p;
 *   tandem_route r = tm_router_pick(s, n_prompt, n_out, &load, &p);
 *
 * Cost model (all times in seconds; docs/router.md has the derivation)
 * --------------------------------------------------------------------
 * Routes are indexed by tandem_route (HYBRID, PREFILL_ONLY, DECODE_ONLY);
 * index 0 (AUTO) of the per-route arrays is unused.
 *
 *   prefill_r(n) = pf[r][0] + pf[r][1]*chunks + pf[r][2]*n_pad + pf[r][3]*attn
 *       for the chunks the route's prefill engine runs (tm_plan_chunk over
 *       chunk_sizes[r]): chunks = their count, n_pad = their padded token sum,
 *       attn = sum over chunks of T*(pos0 + T/2) (query-key pairs of causal
 *       attention, padding included), in units of 1e6 pairs.
 *   handoff(n)   = handoff[0] + handoff[1]*n        (hybrid, stateless; else 0)
 *   tpot_r(ctx)  = tpot[r][0] + tpot[r][1]*ctx/1000 one sequence's time per
 *       output token at context ctx: the decode engine's step for hybrid and
 *       decode-only, the prefill engine's for prefill-only, sampling included.
 *   step(B, ctx_sum) = step[0] + step[1]*(B-1) + step[2]*ctx_sum/1000
 *       one decode-engine step of B sequences whose contexts sum to ctx_sum:
 *       what each extra sequence in the batch adds.
 * For a request of n prompt and n_out new tokens, ctx = n + n_out/2, with D
 * sequences already decoding and Q requests queued behind it:
 *   TTFT_r = prefill_r(n)*slow + handoff(n) + first[r]
 *   TPOT_r = (tpot_r(ctx) + D*(step[1] + step[2]*ctx/1000))*slow
 *   own_r  = TTFT_r + (n_out - 1)*TPOT_r      (the first token comes at TTFT)
 * where slow is lend_pre / lend_dec when that side runs on its own cores only
 * (the other side is busy), else 1. others_r is the delay the request adds to
 * the requests already in the session (the queue waits for its prefill, or for
 * all of it on prefill-only; the batch waits for a decode-only prefill and
 * carries one more sequence); the pick minimises own_r + others_r, which is
 * own_r when the session is idle. A route whose engines lack a role (a prefill
 * engine without decode, for prefill-only) is absent from `routes`.
 *
 * Every coefficient is fitted by weighted non-negative least squares (relative
 * error), so no prediction falls as n or ctx grows. */
#ifndef TM_RUNTIME_ROUTER_H
#define TM_RUNTIME_ROUTER_H

#include <stddef.h>
#include <stdio.h>

#include "core/status.h"
#include "tandem.h"

struct tm_session;

#define TM_ROUTER_NPF 4       /* prefill features: 1, chunks, n_pad, attn */
#define TM_ROUTER_NSTEP 3     /* step features: 1, B-1, ctx_sum/1000 */

typedef struct tm_router_costs {
    unsigned routes;               /* bit (1 << route) set: the route runs on these engines */
    double pf[4][TM_ROUTER_NPF];   /* [route][feature] prefill coefficients */
    int chunk_sizes[4][8];         /* [route][n_chunks] chunk sizes the route's prefill is planned over
                                      (tm_route_chunk_caps: the prefill engine's; none for decode-only) */
    int n_chunks[4];               /* 0: exact chunks of at most 512 (tm_plan_chunk) */
    double handoff[2];             /* exposed hand-off: [0] + [1]*n */
    double first[4];               /* [route] prefill end -> first token (sampling, queue hops) */
    double tpot[4][2];             /* [route] one sequence's seconds per output token: [0] + [1]*ctx/1000 */
    double step[TM_ROUTER_NSTEP];  /* decode-engine step by batch: [0] + [1]*(B-1) + [2]*ctx_sum/1000 */
    double lend_pre, lend_dec;     /* >= 1: slowdown of that side on its own cores vs every core */
} tm_router_costs;

/* ---- prediction and choice (pure functions of the costs) ---- */

typedef struct tm_router_load {
    int n_decoding;   /* sequences in the decode batch or waiting to join it */
    int n_queued;     /* requests waiting for the prefill worker behind this one */
    int no_lend;      /* the session never lends idle cores (opts.no_lend) */
    int no_lend_dec;  /* the decode side never borrows (sched.c, invariant 5) */
    int multi;        /* the session serves several requests at once (max_seqs > 1): the router
                         then never picks prefill-only, which holds the prefill worker for the
                         whole generation (every later prompt would wait behind it) */
    double max_stall; /* > 0: the stall bound (opts.max_stall): a decode-only prefill, which
                         runs on the decode worker and holds its batch, may add at most this
                         share of a step to the running streams; 0: no bound */
    int stateful;     /* the hand-off is an owner flip (opts.stateless == 0) */
} tm_router_load;

enum { TM_ROUTER_STALLS = 1, TM_ROUTER_HOLDS = 2 };

typedef struct tm_router_pred {
    int n_prompt, n_out;
    tm_router_load load;
    int calibrated;         /* 1: the cost model decided; 0: the fallback rule */
    int forced;             /* 1: the route was forced (--route) */
    tandem_route pick;
    double ttft[4], tpot[4];  /* [route] predicted seconds (0 when not calibrated) */
    double own[4];            /* [route] TTFT + (n_out-1)*TPOT */
    double others[4];         /* [route] delay added to requests already in the session */
    int ruled_out[4];         /* [route] TM_ROUTER_STALLS: a decode-only prefill would stall the running
                                 streams past max_stall; TM_ROUTER_HOLDS: prefill-only would hold the
                                 prefill worker in a session that serves several requests */
    double t_pick;            /* CLOCK_MONOTONIC seconds of the decision */
    char note[160];           /* why there is no calibration, when calibrated == 0 */
} tm_router_pred;

/* Features of a prompt of n tokens chunked by tm_plan_chunk over chunk sizes
 * chunks[n_chunks]: f[TM_ROUTER_NPF] = {1, chunks, n_pad, attn (1e6 pairs)}. */
void tm_router_prefill_features(const int *chunks, int n_chunks, int n, double f[TM_ROUTER_NPF]);
double tm_router_prefill_time(const tm_router_costs *c, tandem_route r, int n);
double tm_router_tpot(const tm_router_costs *c, tandem_route r, double ctx);
double tm_router_step_time(const tm_router_costs *c, int B, double ctx_sum);

/* Predict every route for a request of n_prompt tokens and n_out new tokens
 * under `load` (NULL: idle), and pick the cheapest (own + others). */
void tm_router_predict(const tm_router_costs *c, int n_prompt, int n_out, const tm_router_load *load,
                       tm_router_pred *p);

/* The fallback when there is no calibration: prompts shorter than a quarter of
 * the smallest prefill chunk go decode-only, the rest hybrid. */
tandem_route tm_router_rule(const int *chunks, int n_chunks, int n_prompt);

/* ---- fitting ---- */

/* Weighted non-negative least squares: min sum_i w[i]*(X[i].coef - y[i])^2
 * subject to coef >= 0, for X [n][k] row-major, k <= 6 (exact: every subset of
 * the columns is solved and the best feasible one kept). w may be NULL (all 1).
 * Returns TM_OK, or TM_E_INVALID for bad sizes or non-finite input. */
int tm_router_nnls(const double *X, const double *y, const double *w, int n, int k, double *coef);

enum { TM_ROUTER_MEAS_PREFILL = 1, TM_ROUTER_MEAS_TOKEN, TM_ROUTER_MEAS_STEP, TM_ROUTER_MEAS_LEND };

/* One measurement (calibration medians, or synthetic ones in tests). */
typedef struct tm_router_meas {
    int kind;         /* TM_ROUTER_MEAS_* */
    int route;        /* PREFILL, TOKEN: the tandem_route */
    int side;         /* LEND: 0 the prefill side, 1 the decode side */
    int n;            /* PREFILL: prompt tokens */
    int B;            /* STEP: sequences in the step */
    double ctx;       /* STEP: sum of their contexts; TOKEN: the request's mean context */
    double t;         /* PREFILL: prefill seconds; TOKEN: seconds per output token (TPOT)
                         of one request alone; STEP: seconds per decode-engine step;
                         LEND: own-cores time / all-cores time */
    double t_handoff; /* PREFILL: exposed hand-off seconds */
    double t_first;   /* PREFILL: TTFT - prefill - hand-off */
} tm_router_meas;

/* Fit every coefficient of c from m[n]. c->chunk_sizes / n_chunks must be set
 * (they define the prefill features); the rest is overwritten. A route is
 * fitted (and set in c->routes) when it has PREFILL and TOKEN measurements;
 * STEP measurements are needed when hybrid or decode-only is; LEND ones are
 * optional (default 1). */
int tm_router_fit(tm_router_costs *c, const tm_router_meas *m, int n, tm_err *err);

/* ---- cache: keyed by machine and package ---- */

typedef struct tm_router_key {
    char cpu[64];              /* CPU brand (core/cpu.h) */
    int threads;               /* threads of the session (0 resolved to every core) */
    int prefill_threads;       /* cores of the prefill side */
    char cpus[96];             /* which: the prefill side's cpu ids, then the decode side's ("0,1|2,3";
                                  on hybrid parts P and E cores differ) */
    char prefill_engine[32], decode_engine[32];
    char prefill_enc[16], decode_enc[16];
    char model[64];            /* "pkg:<header hash>-<size>" or "hf:<hash of path, sizes, mtimes>" */
    char build[48];            /* the build measured (TANDEM_BUILD_ID: git revision): faster kernels,
                                  another calibration */
} tm_router_key;

/* The model identity of a package file (its header hash and size) or a HF
 * directory (a hash of its real path and of config.json's and every
 * *.safetensors file's name, size and mtime). */
int tm_router_model_id(const char *path, char *out, size_t n, tm_err *err);
int tm_router_key_of(const struct tm_session *s, tm_router_key *k, tm_err *err);
int tm_router_key_equal(const tm_router_key *a, const tm_router_key *b);

/* dir: NULL for $XDG_CACHE_HOME/tandem, else $HOME/.cache/tandem. */
int tm_router_cache_path(char *buf, size_t n, const char *dir, const tm_router_key *k, tm_err *err);

/* Write the costs as JSON (atomic: temporary file + rename), creating the
 * directory if needed. */
int tm_router_write(const char *path, const tm_router_key *k, const tm_router_costs *c, tm_err *err);

/* Read costs saved for key k. TM_E_NOTFOUND: no file; TM_E_FORMAT: not a valid
 * cache file (names the field); TM_E_INVALID: saved for another key. c is
 * written only on TM_OK. */
int tm_router_read(const char *path, const tm_router_key *k, tm_router_costs *c, tm_err *err);

/* The same over a text in memory (label names it in messages): the key and
 * costs it holds, whatever the key. */
int tm_router_parse(const char *text, size_t len, const char *label, tm_router_key *k, tm_router_costs *c,
                    tm_err *err);

/* ---- the session side ---- */

/* What a session knows: the cached costs, if any (tm_session.router). */
typedef struct tm_router_state {
    int calibrated;
    tm_router_costs c;
    char note[160];            /* one line: where the costs came from, or why there are none */
} tm_router_state;

/* Load the cache for this session's key into s->router (never fails: without
 * a usable cache the rule decides; under opts.explain the reason is logged). */
void tm_router_session_init(struct tm_session *s);

/* tm_router_routes: the routes the session's engines can run at all, bits 1 << tandem_route (hybrid:
 * a prefill and a decode engine; prefill-only: a prefill engine with a decode role too, which the
 * CUDA engine has not; decode-only: a decode engine that also prefills) */
unsigned tm_router_routes(const struct tm_session *s);

/* The route for a request (the forced one, the cost model's, or the rule's),
 * with the prediction behind it in *p (may be NULL). load NULL: idle. */
tandem_route tm_router_pick(const struct tm_session *s, int n_prompt, int n_out, const tm_router_load *load,
                            tm_router_pred *p);

/* --explain lines: the decision, and after the request its actual times
 * (t_first, t_done: CLOCK_MONOTONIC seconds; n_gen tokens generated). */
void tm_router_explain_pick(FILE *f, const tm_router_pred *p);
void tm_router_explain_done(FILE *f, const tm_router_pred *p, double t_first, double t_done, int n_gen);

/* ---- calibration ---- */

typedef struct tm_router_cal_opts {
    int quick;                 /* fewer lengths, one repetition */
    const int *lens;           /* (optional) prompt lengths; default by quick */
    int n_lens;
    int reps;                  /* (optional) repetitions per point; default 3 (quick: 1) */
    int gen;                   /* (optional) tokens per request; default 16 (quick: 8) */
    /* (optional) receives one line per measurement (no newline) */
    void (*progress)(void *ud, const char *line);
    void *ud;
} tm_router_cal_opts;

/* Measure the session's engines along every route (requests through the
 * scheduler with forced routes, decode-engine steps by batch and context,
 * each side on its own cores against every core), then fit c. The session must be
 * idle and stays usable; its options are restored on return. */
int tm_router_calibrate(struct tm_session *s, const tm_router_cal_opts *o, tm_router_costs *c, tm_err *err);

#endif
