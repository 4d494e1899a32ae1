/* cli/bench.h: the scenario parts of `tandem bench` (cmd_bench_sched.c),
 * called from cmd_bench.c. Each writes one JSON member ("name": {...}) to
 * json and a markdown section to md (either may be NULL). */
#ifndef TM_CLI_BENCH_H
#define TM_CLI_BENCH_H

#include <stdio.h>

#include "tandem.h"

/* Hand-off cost by context length (comma list of n), against prefill time
 * estimated from pp_rate tokens/s (measured in the same run; 0 = unknown). */
int bench_handoff(tandem_model *m, const char *lens, double pp_rate, FILE *json, FILE *md);

/* Prompt-length sweep: e2e n + gen for each forced route and the router's. */
int bench_sweep(tandem_model *m, const tandem_session_opts *so, const char *lens, int gen, int reps, FILE *json,
                FILE *md);

/* Concurrency sweep: for each client count, Poisson arrivals (mean gap
 * gap_s) of P+G requests; TTFT, TPOT p50/p99, throughput. */
int bench_concurrency(tandem_model *m, const tandem_session_opts *so, const char *clients, int P, int G, double gap_s,
                      FILE *json, FILE *md);

/* The stall test: `streams` decode streams run; a P-token prompt arrives
 * mid-generation; their TPOT p50/p99 before and during its prefill, median of
 * reps. With peer_bin (llbench's path; NULL: no peer), llama.cpp runs the same
 * scenario on peer_model through tools/llstall.c (built beside llbench by
 * tools/llstall.sh), interleaved rep by rep, with llama-server's schedule. */
int bench_stall(tandem_model *m, const tandem_session_opts *so, int streams, int P, int reps, const char *peer_bin,
                const char *peer_model, FILE *json, FILE *md);

/* Run a peer harness (a shell command line; it should send its log to
 * /dev/null) and hand each stdout line that starts with "RESULT" to
 * on_result. 0 when on_result returned 0 for some line and the command
 * exited 0; -1 otherwise. */
int bench_peer_run(const char *cmd, int (*on_result)(const char *line, void *ud), void *ud);

/* Tokenizer speed: encode the file (with special tokens) on one thread, 5 runs, median MB/s. */
int bench_tokenizer(tandem_model *m, const char *path, FILE *json, FILE *md);

/* Median of v[n] (not modified; n <= 64), 0 for n <= 0. */
double bench_median(const double *v, int n);

/* One greedy generation of G tokens from prompt ids[P] (EOS ignored): its
 * wall time in seconds, or -1 with *st filled. */
double bench_generate(tandem_session *s, const int32_t *ids, int P, int G, tandem_stats *stats, tandem_status *st);

#endif
