/* cli/bench.h: the parts of `tandem bench`, called from cmd_bench.c:
 *   cmd_bench_sched.c  the scenarios (hand-off, sweep, concurrency, stall):
 *                      each writes one JSON member ("name": ...,) to json and
 *                      a markdown section to md (either may be NULL) and fills
 *                      a result struct for the two below
 *   bench_accept.c     issue 6's acceptance points, judged from the results
 *   bench_svg.c        the chart: one SVG file, one panel per part that ran
 * Every time is in seconds unless a name says otherwise. */
#ifndef TM_CLI_BENCH_H
#define TM_CLI_BENCH_H

#include <stdio.h>

#include "tandem.h"

#define BENCH_MAX_REPS 32    /* --reps, --sweep-reps and per-point sweep reps */
#define BENCH_MAX_POINTS 32  /* entries of --sweep and --handoff */
#define BENCH_MAX_CLIENTS 64 /* entries and values of --concurrency (a session runs at most 64 sequences) */
#define BENCH_MAX_STREAMS 7  /* --stall */

/* One test on one route: medians over its reps (cmd_bench.c). */
typedef struct bench_row {
    char name[32];               /* "pp512", "tg128", "e448+64" */
    int kind;                    /* 'p' ppN, 'g' tgN, 'e' eP+G, 'm' embN (an N-token embedding) */
    int P, G;                    /* prompt and generated tokens (pp: G = 0, tg: P = 0) */
    int route;                   /* tandem_route */
    int reps;
    double value;                /* e: total seconds; p, g: tokens/s */
    double ttft, handoff;
    double tpot, tpot_p50, tpot_p99; /* time per output token: mean (decode time / (G - 1)), p50, p99 */
    double peak_mb;              /* peak resident memory of this process during the test, MiB (0: unknown) */
    const char *prefill_engine, *decode_engine;
    int peer_reps;               /* llama.cpp's runs of this test (0: none) */
    int peer_beside;             /* 1: llama.cpp ran interleaved with this row; 0: its figures are the
                                    ones measured beside the test's first route */
    double peer_value, peer_ttft, peer_tpot, peer_peak_mb; /* as value, ttft, tpot (llbench: mean), peak_mb */
    /* pp with --ceilings: the prefill's GEMM kernels (tandem_stats.t_prefill_gemm), medians over the
       reps of their GOP/s and of its share of the matrix unit's peak measured right before and after
       that rep (mean of the two), and the shares' range; gemm_reps 0: not measured */
    int gemm_reps;
    double gemm_gops, gemm_share, gemm_share_lo, gemm_share_hi;
    /* of those, the steady reps (BENCH_STEADY: the two peaks beside within 10% of each other) and their
       shares' median (gemm_steady_reps 0: none was) */
    int gemm_steady_reps;
    double gemm_share_steady;
    /* tg with --ceilings: the decode's weight stream (decode bytes per token x that rep's tokens/s) over
       the read bandwidth measured right before and after the rep (mean of the two): median and range;
       read_reps 0: not measured */
    int read_reps;
    double read_share, read_share_lo, read_share_hi;
    int read_steady_reps; /* as gemm_steady_reps, for the read bandwidths beside */
    double read_share_steady;
} bench_row;

/* A rep's paired measurement (--ceilings: the peak or read bandwidth right before and after it) is
   steady where the two agree within this fraction of the larger: the host did not change under it */
#define BENCH_STEADY 0.10
static inline int bench_steady(double before, double after)
{
    double hi = before > after ? before : after, d = before > after ? before - after : after - before;
    return hi > 0 && d <= BENCH_STEADY * hi;
}

/* One prompt length of the sweep: e2e prompt + gen on every route. */
typedef struct bench_sweep_point {
    int prompt, gen, reps;
    double t[4];                 /* median seconds, indexed by tandem_route ([TANDEM_ROUTE_AUTO]: the router) */
    char picked[16];             /* the route the router took ("hybrid", ...) */
} bench_sweep_point;

/* One client count of the concurrency sweep. */
typedef struct bench_conc_point {
    int clients, requests;
    double ttft_p50, tpot_p50, tpot_p99;
    double tokens_per_s;         /* output tokens / wall time of the whole point */
} bench_conc_point;

/* One running stream's inter-token gap in the stall scenario. */
typedef struct bench_gap {
    double t;                    /* time of the later token, relative to the new prompt's arrival */
    double gap;                  /* seconds since the stream's previous token */
    int stream;
} bench_gap;

/* The stall scenario on one engine: one rep, or the medians of several. */
typedef struct bench_stall_side {
    int reps, dropped;           /* runs counted; disturbed runs redone */
    double q50, q99, d50, d99;   /* TPOT p50/p99 quiet and during the new prompt's prefill */
    double ratio;                /* the rise: d50 / q50 (medians: the median of the per-rep ratios) */
    double prefill;              /* the new prompt's TTFT */
    double foreign;              /* CPU time of other processes / wall time, over both windows */
    int n_quiet, n_during;       /* gaps counted in each window */
    bench_gap *tl;               /* [n_tl] gaps of the windows [-quiet_s, prefill), the rep whose rise is
                                    the median (NULL: none recorded); owned, bench_stall_free */
    int n_tl;
} bench_stall_side;

typedef struct bench_stall_res {
    int streams, P, lend;        /* lend: the decode side borrowed the idle prefill cores
                                    (tandem_session_lending: the stall bound, --max-stall, --no-lend) */
    const char *lend_mode;       /* that, in words, for the reports */
    double quiet_s;              /* length of the quiet window before the prompt arrives */
    bench_stall_side ours, peer; /* peer.reps == 0: llama.cpp not run */
} bench_stall_res;

void bench_stall_free(bench_stall_res *r);

/* Everything one invocation measured, for the acceptance and the chart. */
typedef struct bench_report {
    const char *model;
    int threads;
    const bench_row *rows;
    int n_rows;
    const bench_sweep_point *sweep;   /* NULL: no sweep */
    int n_sweep;
    const bench_conc_point *conc;     /* NULL: no concurrency sweep */
    int n_conc, conc_P, conc_G;
    double conc_gap;
    const bench_stall_res *stall;     /* NULL: no stall scenario */
} bench_report;

/* Hand-off cost at context lengths ns[n], against the prefill time of that
 * many tokens: the run's ppN where one of its tests has N = the context
 * (measured), else from the rate of its ppN with the largest N below it, or
 * the smallest above (estimated: attention makes longer prompts slower per
 * token, so an estimate from a shorter prompt overstates the fraction).
 * rows[nrows]: the run's tests (make_rows); none of kind 'p': no prefill time. */
int bench_handoff(tandem_model *m, const int *ns, int n, const bench_row *rows, int nrows, FILE *json, FILE *md);

/* Prompt-length sweep: e2e lens[i] + gen for each forced route and the
 * router's, reps[i] interleaved runs each (after one warm-up run per route
 * at lens[0]); out[n]. */
int bench_sweep(tandem_model *m, const tandem_session_opts *so, const int *lens, const int *reps, int n, int gen,
                FILE *json, FILE *md, bench_sweep_point *out);

/* Concurrency sweep: for each client count clients[i], Poisson arrivals
 * (mean gap gap_s) of two P+G requests per client; out[n]. */
int bench_concurrency(tandem_model *m, const tandem_session_opts *so, const int *clients, int n, int P, int G,
                      double gap_s, FILE *json, FILE *md, bench_conc_point *out);

/* The stall test: `streams` decode streams run; a P-token prompt arrives
 * mid-generation; their TPOT p50/p99 before and during its prefill, median of
 * reps. A disturbed run (other processes busy) is redone up to `retries`
 * times. With peer_bin (llbench's path; NULL: no peer), llama.cpp runs the
 * same scenario on peer_model through tools/llstall.c (built beside llbench
 * by tools/llstall.sh), interleaved rep by rep, with llama-server's schedule.
 * out is filled (free with bench_stall_free) when 0 is returned. */
int bench_stall(tandem_model *m, const tandem_session_opts *so, int streams, int P, int reps, int retries,
                const char *peer_bin, const char *peer_model, FILE *json, FILE *md, bench_stall_res *out);

/* Run a peer harness (a shell command line; it should send its log to
 * /dev/null) and hand each stdout line that starts with "RESULT" to
 * on_result. 0 when on_result returned 0 for some line and the command
 * exited 0; -1 otherwise. threads > 0: the command runs pinned to the CPUs
 * a session of that many threads takes (tm_cpu_pick), so both sides of a
 * comparison use the same cores. peak_mb (may be NULL): the command's peak
 * resident memory (its largest process), MiB. */
int bench_peer_run(const char *cmd, int threads, int (*on_result)(const char *line, void *ud), void *ud,
                   double *peak_mb);

/* Tokenizer speed: encode the file (with special tokens) on one thread, 5 runs, median MB/s. */
int bench_tokenizer(tandem_model *m, const char *path, FILE *json, FILE *md);

/* Median of v[n] (not modified; n <= 64), 0 for n <= 0. */
double bench_median(const double *v, int n);

/* One greedy generation of G tokens from prompt ids[P] (EOS ignored): its
 * wall time in seconds, or -1 with *st filled. */
double bench_generate(tandem_session *s, const int32_t *ids, int P, int G, tandem_stats *stats, tandem_status *st);
/* bench_embed: ids [P] embedded (the model's pooling, nothing generated) into emb [hidden]; the seconds
 * the request took, or -1 with *st set */
double bench_embed(tandem_session *s, const int32_t *ids, int P, float *emb, tandem_stats *stats, tandem_status *st);

/* Issue 6's acceptance points judged from r's figures: the JSON member
 * "acceptance": {...}, (json), a markdown section (md), one line per point
 * on stderr. Returns 1 when every point is met on the scenarios, 0
 * when one is not, -1 when some figure is missing. */
int bench_acceptance(const bench_report *r, FILE *json, FILE *md);

/* --ceilings (bench_ceil.c): the machine's limits, measured before the tests
 * ([0]) and after the scenarios ([1]), and each test's fraction of them. */
typedef struct bench_ceil {
    int threads;
    double read_gbps[2];
    double peak_gops[4][2][2];   /* [amx, avx512, amx-loaded, avx2][bf16, int8][before, after]; 0: not on this CPU */
    int64_t decode_bytes;        /* tandem_model_info.decode_bytes_per_token */
    double prefill_ops;          /* tandem_model_info.prefill_ops_per_token */
} bench_ceil;
int bench_ceilings_measure(bench_ceil *c, int threads, int which);
/* The peak GOP/s of the matrix unit prefill_engine runs its GEMMs on ("cpu-amx": AMX, "cpu-avx512":
 * AVX-512) at prefill encoding enc ("int8", "bf16"), measured now for secs on the CPUs a session of
 * `threads` takes; 0 where none applies or it cannot run here. */
double bench_peak_now(int threads, const char *prefill_engine, const char *enc, double secs);
/* The read bandwidth in GB/s (tm_kmeasure_memread over 256 MB), measured now for secs on the CPUs a
 * session of `threads` takes; 0 where it cannot be measured. */
double bench_read_now(int threads, double secs);
void bench_ceilings_json(FILE *f, const bench_ceil *c, const bench_row *rows, int n, const char *prefill_enc);
void bench_ceilings_md(FILE *f, const bench_ceil *c, const bench_row *rows, int n, const char *prefill_enc);

/* The chart: an SVG document with a panel for each part of r that ran. */
void bench_svg(FILE *f, const bench_report *r);

/* "hybrid", "prefill-only", "decode-only", "auto" for a tandem_route. */
const char *bench_route_name(int route);

#endif
