/* cli/cmd_bench_sched.c: the scenario parts of `tandem bench` (see bench.h):
 * hand-off cost by context, prompt-length sweep over routes, concurrency
 * with Poisson arrivals, and the decode-stall test. Public API only. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/bench.h"
#include "cli/bench_clock.h"
#include "core/cpu.h"

double bench_median(const double *v, int n)
{
    double t[64];
    if (n <= 0) return 0;
    if (n > 64) n = 64;
    memcpy(t, v, sizeof(double) * (size_t)n);
    qsort(t, (size_t)n, sizeof(double), bc_cmp_d);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static int32_t *random_ids(int n, int V, unsigned *seed)
{
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; ids && i < n; i++) ids[i] = (int32_t)(rand_r(seed) % (unsigned)V);
    return ids;
}

/* ---- hand-off -------------------------------------------------------------------- */

/* the prefill seconds of n tokens by the run's pp tests (bench.h); *measured: a ppN with N = n ran */
static double prefill_seconds(const bench_row *rows, int nrows, int n, int *measured)
{
    const bench_row *below = NULL, *above = NULL;
    *measured = 0;
    for (int i = 0; i < nrows; i++) {
        const bench_row *r = &rows[i];
        if (r->kind != 'p' || !r->reps || r->value <= 0) continue;
        if (r->P == n) {
            *measured = 1;
            return n / r->value;
        }
        if (r->P < n && (!below || r->P > below->P)) below = r;
        if (r->P > n && (!above || r->P < above->P)) above = r;
    }
    const bench_row *r = below ? below : above;
    return r ? n / r->value : 0;
}

int bench_handoff(tandem_model *m, const int *ns, int k, const bench_row *rows, int nrows, FILE *json, FILE *md)
{
    tandem_status st;
    if (json) fprintf(json, "  \"handoff\": [\n");
    if (md)
        fprintf(md, "\n### KV hand-off by context length\n\n| context | bridge copy (all layers) | exposed (overlapped) |"
                    " prefill | copy / prefill | exposed / prefill |\n|---|---|---|---|---|---|\n");
    for (int i = 0; i < k; i++) {
        double copy = 0, exposed = 0;
        if (tandem_handoff_cost(m, ns[i], 3, &copy, &exposed, &st) != 0) {
            fprintf(stderr, "tandem bench: %s\n", st.msg);
            return 1;
        }
        int measured;
        double pre = prefill_seconds(rows, nrows, ns[i], &measured);
        const char *how = pre <= 0 ? "none" : measured ? "measured" : "estimated";
        fprintf(stderr, "handoff %6d: copy %.3f ms, exposed %.3f ms, prefill %.3f s (%s)\n", ns[i], copy * 1e3,
                exposed * 1e3, pre, how);
        if (json)
            fprintf(json, "    {\"context\": %d, \"copy_ms\": %.4f, \"exposed_ms\": %.4f, \"prefill_s\": %.6f, "
                          "\"prefill\": \"%s\", \"copy_fraction\": %.6f, \"exposed_fraction\": %.6f}%s\n",
                    ns[i], copy * 1e3, exposed * 1e3, pre, how, pre > 0 ? copy / pre : 0, pre > 0 ? exposed / pre : 0,
                    i + 1 < k ? "," : "");
        if (md)
            fprintf(md, "| %d | %.3f ms | %.3f ms | %.3f s (%s) | %.3f%% | %.4f%% |\n", ns[i], copy * 1e3, exposed * 1e3,
                    pre, how, pre > 0 ? 100 * copy / pre : 0, pre > 0 ? 100 * exposed / pre : 0);
    }
    if (json) fprintf(json, "  ],\n");
    return 0;
}

/* ---- prompt-length sweep ---------------------------------------------------------- */

double bench_generate(tandem_session *s, const int32_t *ids, int P, int G, tandem_stats *stats, tandem_status *st)
{
    tandem_request r;
    tandem_request_default(&r);
    r.prompt_ids = ids;
    r.n_prompt_ids = (size_t)P;
    r.max_tokens = G;
    r.temperature = 0;
    r.ignore_eos = 1;
    double t0 = tm_now_s();
    if (tandem_generate(s, &r, NULL, NULL, stats, st) != 0) return -1;
    return tm_now_s() - t0;
}

double bench_embed(tandem_session *s, const int32_t *ids, int P, float *emb, tandem_stats *stats, tandem_status *st)
{
    tandem_request r;
    tandem_request_default(&r);
    r.prompt_ids = ids;
    r.n_prompt_ids = (size_t)P;
    r.max_tokens = TANDEM_MAX_TOKENS_NONE;
    r.embedding = emb;
    double t0 = tm_now_s();
    if (tandem_generate(s, &r, NULL, NULL, stats, st) != 0) return -1;
    return tm_now_s() - t0;
}

static double e2e_once(tandem_session *s, const int32_t *ids, int P, int G, tandem_stats *stats)
{
    tandem_status st;
    double t = bench_generate(s, ids, P, G, stats, &st);
    if (t < 0) fprintf(stderr, "tandem bench: %s\n", st.msg);
    return t;
}

int bench_sweep(tandem_model *m, const tandem_session_opts *so, const int *ns, const int *reps, int k, int gen,
                FILE *json, FILE *md, bench_sweep_point *out)
{
    tandem_model_info info;
    tandem_model_get_info(m, &info);
    /* run order within a rep: the forced routes, then the router (A B C D A B C D) */
    static const int order[4] = {TANDEM_ROUTE_HYBRID, TANDEM_ROUTE_PREFILL_ONLY, TANDEM_ROUTE_DECODE_ONLY,
                                 TANDEM_ROUTE_AUTO};
    tandem_session *ss[4] = {0}; /* by tandem_route */
    tandem_status st;
    int rc = 0;
    for (int r = 0; r < 4 && rc == 0; r++) {
        tandem_session_opts o = *so;
        o.route = (tandem_route)r;
        if (tandem_session_new(&ss[r], m, &o, &st) != 0) {
            fprintf(stderr, "tandem bench: %s\n", st.msg);
            rc = 1;
        }
    }
    unsigned seed = 99;
    if (rc == 0 && k > 0) { /* one uncounted run per route at the first length */
        int32_t *ids = random_ids(ns[0], info.vocab, &seed);
        for (int r = 0; r < 4 && rc == 0; r++) {
            tandem_stats stats;
            if (!ids || e2e_once(ss[order[r]], ids, ns[0], gen, &stats) < 0) rc = 1;
        }
        free(ids);
    }
    if (json && rc == 0) fprintf(json, "  \"sweep\": [\n");
    if (md && rc == 0)
        fprintf(md, "\n### Prompt-length sweep (end to end, %d generated tokens; medians of interleaved runs)\n\n"
                    "| prompt | reps | hybrid | prefill-only | decode-only | router (auto) | router picked "
                    "| auto / best |\n|---|---|---|---|---|---|---|---|\n", gen);
    for (int i = 0; i < k && rc == 0; i++) {
        int32_t *ids = random_ids(ns[i], info.vocab, &seed);
        double t[4][BENCH_MAX_REPS];
        bench_sweep_point *p = &out[i];
        *p = (bench_sweep_point){.prompt = ns[i], .gen = gen, .reps = reps[i]};
        snprintf(p->picked, sizeof p->picked, "?");
        for (int rep = 0; rep < reps[i] && rc == 0; rep++)
            for (int r = 0; r < 4; r++) {
                tandem_stats stats;
                int q = order[r];
                t[q][rep] = ids ? e2e_once(ss[q], ids, ns[i], gen, &stats) : -1;
                if (t[q][rep] < 0) { rc = 1; break; }
                if (q == TANDEM_ROUTE_AUTO) snprintf(p->picked, sizeof p->picked, "%s", stats.route);
            }
        free(ids);
        if (rc) break;
        double best = 1e30;
        for (int q = 0; q < 4; q++) {
            p->t[q] = bench_median(t[q], reps[i]);
            if (q != TANDEM_ROUTE_AUTO && p->t[q] < best) best = p->t[q];
        }
        const double *v = p->t;
        double ratio = v[TANDEM_ROUTE_AUTO] / best;
        fprintf(stderr, "sweep %5d: hybrid %.3f s, prefill-only %.3f s, decode-only %.3f s, auto %.3f s (%s) -> %.3f\n",
                ns[i], v[1], v[2], v[3], v[0], p->picked, ratio);
        if (json)
            fprintf(json, "    {\"prompt\": %d, \"gen\": %d, \"reps\": %d, \"hybrid_s\": %.4f, "
                          "\"prefill-only_s\": %.4f, \"decode-only_s\": %.4f, \"auto_s\": %.4f, \"picked\": \"%s\", "
                          "\"auto_over_best\": %.4f}%s\n",
                    ns[i], gen, reps[i], v[1], v[2], v[3], v[0], p->picked, ratio, i + 1 < k ? "," : "");
        if (md)
            fprintf(md, "| %d | %d | %.3f s | %.3f s | %.3f s | %.3f s | %s | %.3f |\n", ns[i], reps[i], v[1], v[2],
                    v[3], v[0], p->picked, ratio);
    }
    if (json && rc == 0) fprintf(json, "  ],\n");
    for (int r = 0; r < 4; r++) tandem_session_free(ss[r]);
    return rc;
}

/* ---- concurrency -------------------------------------------------------------------- */

typedef struct client {
    tandem_session *s;
    int P, G, V, n_req;
    double gap_s;
    unsigned seed;
    double ttft[8], tpot50[8], tpot99[8];
    int done, gen;
} client;

static void *client_main(void *arg)
{
    client *c = arg;
    for (int i = 0; i < c->n_req; i++) {
        double u = (rand_r(&c->seed) + 1.0) / ((double)RAND_MAX + 2.0);
        usleep((useconds_t)(-log(u) * c->gap_s * 1e6)); /* exponential gap: Poisson arrivals */
        int32_t *ids = random_ids(c->P, c->V, &c->seed);
        tandem_stats stats;
        if (e2e_once(c->s, ids, c->P, c->G, &stats) >= 0) {
            c->ttft[c->done] = stats.ttft;
            c->tpot50[c->done] = stats.tpot_p50;
            c->tpot99[c->done] = stats.tpot_p99;
            c->gen += stats.n_generated;
            c->done++;
        }
        free(ids);
    }
    return NULL;
}

int bench_concurrency(tandem_model *m, const tandem_session_opts *so, const int *cs, int k, int P, int G,
                      double gap_s, FILE *json, FILE *md, bench_conc_point *out)
{
    tandem_model_info info;
    tandem_model_get_info(m, &info);
    tandem_status st;
    tandem_session *s;
    if (tandem_session_new(&s, m, so, &st) != 0) {
        fprintf(stderr, "tandem bench: %s\n", st.msg);
        return 1;
    }
    if (json) fprintf(json, "  \"concurrency\": [\n");
    if (md)
        fprintf(md, "\n### Concurrency (%d+%d requests, 2 per client, Poisson arrivals, mean gap %.1f s)\n\n"
                    "| clients | TTFT p50 | TPOT p50 | TPOT p99 | output tokens/s |\n|---|---|---|---|---|\n",
                P, G, gap_s);
    for (int i = 0; i < k; i++) {
        int n = cs[i] < 1 ? 1 : cs[i] > BENCH_MAX_CLIENTS ? BENCH_MAX_CLIENTS : cs[i];
        client c[BENCH_MAX_CLIENTS];
        pthread_t th[BENCH_MAX_CLIENTS];
        double t0 = tm_now_s();
        for (int j = 0; j < n; j++) {
            c[j] = (client){.s = s, .P = P, .G = G, .V = info.vocab, .n_req = 2, .gap_s = gap_s, .seed = 7u + 31u * j};
            pthread_create(&th[j], NULL, client_main, &c[j]);
        }
        for (int j = 0; j < n; j++) pthread_join(th[j], NULL);
        double wall = tm_now_s() - t0;
        double ttft[2 * BENCH_MAX_CLIENTS], p50[2 * BENCH_MAX_CLIENTS], p99[2 * BENCH_MAX_CLIENTS];
        int nr = 0, gen = 0;
        for (int j = 0; j < n; j++) {
            for (int q = 0; q < c[j].done; q++, nr++) {
                ttft[nr] = c[j].ttft[q];
                p50[nr] = c[j].tpot50[q];
                p99[nr] = c[j].tpot99[q];
            }
            gen += c[j].gen;
        }
        if (nr < 2 * n) {
            fprintf(stderr, "tandem bench: concurrency %d: %d of %d requests failed\n", n, 2 * n - nr, 2 * n);
            tandem_session_free(s);
            return 1;
        }
        double a = bc_pct(ttft, nr, 0.5), b = bc_pct(p50, nr, 0.5), d = bc_pct(p99, nr, 1.0);
        out[i] = (bench_conc_point){n, nr, a, b, d, gen / wall};
        fprintf(stderr, "concurrency %d: TTFT p50 %.3f s, TPOT p50 %.1f ms, p99 %.1f ms, %.1f tok/s\n", n, a, b * 1e3,
                d * 1e3, gen / wall);
        if (json)
            fprintf(json, "    {\"clients\": %d, \"requests\": %d, \"ttft_p50_s\": %.4f, \"tpot_p50_ms\": %.3f, "
                          "\"tpot_p99_ms\": %.3f, \"output_tokens_per_s\": %.2f}%s\n",
                    n, nr, a, b * 1e3, d * 1e3, gen / wall, i + 1 < k ? "," : "");
        if (md) fprintf(md, "| %d | %.3f s | %.1f ms | %.1f ms | %.1f |\n", n, a, b * 1e3, d * 1e3, gen / wall);
    }
    if (json) fprintf(json, "  ],\n");
    tandem_session_free(s);
    return 0;
}

/* ---- the stall test ------------------------------------------------------------------- */

/* The scenario, shared with llama.cpp's side (tools/llstall.c gets these on its
 * command line, so both run the same one): `streams` sequences with random
 * prompts of STALL_STREAM_PROMPT ids generate until cancelled; once the last has
 * STALL_SETTLE tokens a quiet window of STALL_QUIET_S seconds starts; at its end
 * a P-token prompt arrives (1 token wanted), and the "during" window lasts until
 * its first token. TPOT = gaps between a running stream's tokens, counted in the
 * window where the later token falls; p50/p99 by nearest rank (bc_pct). */
#define STALL_STREAM_PROMPT 64
#define STALL_SETTLE 8
#define STALL_QUIET_S 1.5
#define STALL_PEER_N_BATCH 2048 /* llama-server's defaults */
#define STALL_PEER_N_UBATCH 512
/* The machine may be shared: a run during which other processes used more than
 * this share of one core's time (over the measured windows) is redone, at most
 * `retries` times per rep and side, after waiting for a quiet machine. */
#define STALL_MAX_FOREIGN 0.05
#define STALL_MAX_TOKENS 4096 /* recorded token times per stream */

/* Wait (at most max_s) until other processes use under a quarter of the machine for 2 s. */
static void wait_quiet(double max_s)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    for (double t = 0; t < max_s; t += 2) {
        double b0 = bc_sys_busy_s(), o0 = bc_own_cpu_s();
        usleep(2000000);
        if ((bc_sys_busy_s() - b0) - (bc_own_cpu_s() - o0) < 0.25 * 2.0 * (double)(ncpu > 0 ? ncpu : 1)) return;
    }
}

typedef struct stream_rec {
    double t[STALL_MAX_TOKENS];
    int n;
} stream_rec;

static int rec_token(void *ud, const char *piece, size_t len, int32_t tok)
{
    (void)piece;
    (void)len;
    stream_rec *r = ud;
    if (tok >= 0 && r->n < STALL_MAX_TOKENS) r->t[r->n++] = tm_now_s();
    return 0;
}

/* gaps of the streams' tokens that fall in [t0, t1) -> p50, p99; returns their count */
static int stall_window(const stream_rec *rec, int streams, double t0, double t1, double *p50, double *p99)
{
    double *g = malloc(sizeof(double) * STALL_MAX_TOKENS * (size_t)streams);
    int n = 0;
    for (int i = 0; g && i < streams; i++)
        for (int j = 1; j < rec[i].n; j++)
            if (rec[i].t[j] >= t0 && rec[i].t[j] < t1) g[n++] = rec[i].t[j] - rec[i].t[j - 1];
    *p50 = bc_pct(g, n, 0.5);
    *p99 = bc_pct(g, n, 0.99);
    free(g);
    return n;
}

/* the same gaps as a timeline, times relative to t_ref (malloc'd; NULL when none) */
static bench_gap *stall_timeline(const stream_rec *rec, int streams, double t0, double t1, double t_ref, int *n)
{
    bench_gap *g = malloc(sizeof *g * STALL_MAX_TOKENS * (size_t)streams);
    *n = 0;
    for (int i = 0; g && i < streams; i++)
        for (int j = 1; j < rec[i].n; j++)
            if (rec[i].t[j] >= t0 && rec[i].t[j] < t1)
                g[(*n)++] = (bench_gap){rec[i].t[j] - t_ref, rec[i].t[j] - rec[i].t[j - 1], i};
    if (g && *n == 0) {
        free(g);
        g = NULL;
    }
    return g;
}

/* One run of the scenario on tandem. */
static int stall_once(tandem_session *s, int V, int streams, int P, unsigned *seed, bench_stall_side *res)
{
    tandem_status st;
    stream_rec *rec = calloc((size_t)streams, sizeof *rec);
    tandem_handle *h[BENCH_MAX_STREAMS] = {0};
    int32_t *ids[BENCH_MAX_STREAMS] = {0}, *big = NULL;
    int rc = rec ? 0 : 1, n_sub = 0;
    tandem_request r;
    tandem_request_default(&r);
    r.temperature = 0;
    r.ignore_eos = 1;
    r.max_tokens = STALL_MAX_TOKENS - 96;
    for (int i = 0; i < streams && rc == 0; i++, n_sub++) {
        ids[i] = random_ids(STALL_STREAM_PROMPT, V, seed);
        r.prompt_ids = ids[i];
        r.n_prompt_ids = STALL_STREAM_PROMPT;
        rc = tandem_submit(s, &r, rec_token, &rec[i], &h[i], &st);
    }
    double q0 = 0, q1 = 0, a1 = 0, b0 = 0, o0 = 0;
    if (rc == 0) {
        /* let the streams settle, measure a quiet window, then a prompt arrives */
        while (rec[streams - 1].n < STALL_SETTLE) usleep(1000);
        q0 = tm_now_s();
        b0 = bc_sys_busy_s();
        o0 = bc_own_cpu_s();
        usleep((useconds_t)(STALL_QUIET_S * 1e6));
        q1 = tm_now_s();
        big = random_ids(P, V, seed);
        r.prompt_ids = big;
        r.n_prompt_ids = (size_t)P;
        r.max_tokens = 1;
        tandem_stats bs;
        tandem_handle *hb;
        rc = tandem_submit(s, &r, NULL, NULL, &hb, &st) || tandem_wait(hb, &bs, &st);
        a1 = tm_now_s();
        res->foreign = ((bc_sys_busy_s() - b0) - (bc_own_cpu_s() - o0)) / (a1 - q0);
    }
    if (rc) fprintf(stderr, "tandem bench: %s\n", st.msg);
    for (int i = 0; i < n_sub; i++)
        if (h[i]) tandem_cancel(h[i]);
    for (int i = 0; i < n_sub; i++) {
        tandem_stats x;
        if (h[i]) tandem_wait(h[i], &x, &st);
    }
    if (rc == 0) {
        res->n_quiet = stall_window(rec, streams, q0, q1, &res->q50, &res->q99);
        res->n_during = stall_window(rec, streams, q1, a1, &res->d50, &res->d99);
        res->ratio = res->q50 > 0 ? res->d50 / res->q50 : 0;
        res->prefill = a1 - q1;
        res->tl = stall_timeline(rec, streams, q0, a1, q1, &res->n_tl);
    }
    for (int i = 0; i < streams; i++) free(ids[i]);
    free(big);
    free(rec);
    return rc;
}

/* ---- peers -------------------------------------------------------------------------- */

int bench_peer_run(const char *cmd, int threads, int (*on_result)(const char *line, void *ud), void *ud,
                   double *peak_mb)
{
    cpu_set_t set; /* formed before the fork: the child only applies it */
    CPU_ZERO(&set);
    if (threads > 0) {
        int cpus[1024], n = tm_cpu_pick(cpus, threads);
        for (int i = 0; i < n; i++) CPU_SET(cpus[i], &set);
    }
    int fd[2];
    if (pipe(fd) != 0) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) { /* the child: only async-signal-safe calls until exec */
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        if (threads > 0) sched_setaffinity(0, sizeof set, &set); /* a syscall; inherited by the shell's children */
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    FILE *p = fdopen(fd[0], "r");
    char line[2048];
    int found = -1;
    while (p && fgets(line, sizeof line, p))
        if (strncmp(line, "RESULT", 6) == 0 && on_result(line, ud) == 0) found = 0;
    if (p) fclose(p);
    else close(fd[0]);
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &status, 0, &ru) < 0)
        if (errno != EINTR) return -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) found = -1;
    if (peak_mb) *peak_mb = (double)ru.ru_maxrss / 1024.0; /* the largest of the shell and its children, KiB */
    return found;
}

/* the number after " key=" in a RESULT line */
static int result_num(const char *line, const char *key, double *v)
{
    char k[64];
    snprintf(k, sizeof k, " %s=", key);
    const char *q = strstr(line, k);
    return q && sscanf(q + strlen(k), "%lf", v) == 1 ? 0 : -1;
}

/* llstall's output: one RESULT line with the figures, and (from the llstall
 * of this tree) a RESULT_GAP line per gap of the timeline */
typedef struct peer_stall {
    bench_stall_side *r;
    int cap;
} peer_stall;

static int parse_llstall(const char *line, void *ud)
{
    peer_stall *ps = ud;
    bench_stall_side *r = ps->r;
    double q50, q99, d50, d99, ratio, pre, fo, nq, nd, sn, t, ms;
    if (strncmp(line, "RESULT_GAP ", 11) == 0) {
        if (result_num(line, "stream", &sn) || result_num(line, "t", &t) || result_num(line, "ms", &ms)) return 1;
        if (r->n_tl == ps->cap) {
            int cap = ps->cap ? 2 * ps->cap : 256;
            bench_gap *g = realloc(r->tl, sizeof *g * (size_t)cap);
            if (!g) return 1;
            r->tl = g;
            ps->cap = cap;
        }
        r->tl[r->n_tl++] = (bench_gap){t, ms / 1e3, (int)sn};
        return 1; /* not the figures */
    }
    if (result_num(line, "quiet_p50_ms", &q50) || result_num(line, "quiet_p99_ms", &q99) ||
        result_num(line, "during_p50_ms", &d50) || result_num(line, "during_p99_ms", &d99) ||
        result_num(line, "ratio", &ratio) || result_num(line, "prefill_s", &pre) || result_num(line, "foreign", &fo) ||
        result_num(line, "n_quiet", &nq) || result_num(line, "n_during", &nd))
        return -1;
    *r = (bench_stall_side){.q50 = q50 / 1e3, .q99 = q99 / 1e3, .d50 = d50 / 1e3, .d99 = d99 / 1e3, .ratio = ratio,
                            .prefill = pre, .foreign = fo / 100, .n_quiet = (int)nq, .n_during = (int)nd,
                            .tl = r->tl, .n_tl = r->n_tl};
    return 0;
}

/* One run of the scenario on llama.cpp: tools/llstall.c, found beside the
 * peer's llbench (tools/llstall.sh builds it there). */
static int stall_peer_once(const char *bin, const char *model, int threads, int streams, int P, unsigned seed,
                           bench_stall_side *res)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' '%s' %d %d %d stream_prompt=%d settle=%d quiet_s=%g n_batch=%d n_ubatch=%d seed=%u "
                              "timeline=1 2>/dev/null", bin, model, threads, streams, P, STALL_STREAM_PROMPT,
             STALL_SETTLE, STALL_QUIET_S, STALL_PEER_N_BATCH, STALL_PEER_N_UBATCH, seed);
    peer_stall ps = {res, 0};
    return bench_peer_run(cmd, threads, parse_llstall, &ps, NULL);
}

/* per-field medians of n results; the ratio is the median of the per-rep
 * ratios; the timeline is moved from the rep whose ratio is nearest that
 * median (the others' are freed) */
static bench_stall_side stall_median(bench_stall_side *r, int n, int dropped)
{
    double v[7][BENCH_MAX_REPS] = {{0}};
    if (n > BENCH_MAX_REPS) n = BENCH_MAX_REPS;
    for (int i = 0; i < n; i++) {
        v[0][i] = r[i].q50;
        v[1][i] = r[i].q99;
        v[2][i] = r[i].d50;
        v[3][i] = r[i].d99;
        v[4][i] = r[i].ratio;
        v[5][i] = r[i].prefill;
        v[6][i] = r[i].foreign;
    }
    bench_stall_side m = {.reps = n, .dropped = dropped, .q50 = bench_median(v[0], n), .q99 = bench_median(v[1], n),
                          .d50 = bench_median(v[2], n), .d99 = bench_median(v[3], n), .ratio = bench_median(v[4], n),
                          .prefill = bench_median(v[5], n), .foreign = bench_median(v[6], n)};
    int pick = -1;
    for (int i = 0; i < n; i++)
        if (r[i].tl && (pick < 0 || fabs(r[i].ratio - m.ratio) < fabs(r[pick].ratio - m.ratio))) pick = i;
    for (int i = 0; i < n; i++) {
        if (i == pick) {
            m.tl = r[i].tl;
            m.n_tl = r[i].n_tl;
            m.n_quiet = r[i].n_quiet;
            m.n_during = r[i].n_during;
        } else {
            free(r[i].tl);
        }
        r[i].tl = NULL;
    }
    return m;
}

void bench_stall_free(bench_stall_res *r)
{
    free(r->ours.tl);
    free(r->peer.tl);
    r->ours.tl = r->peer.tl = NULL;
}

static void stall_json(FILE *f, const bench_stall_side *r)
{
    fprintf(f, "\"tpot_p50_quiet_ms\": %.3f, \"tpot_p99_quiet_ms\": %.3f, \"tpot_p50_during_prefill_ms\": %.3f, "
               "\"tpot_p99_during_prefill_ms\": %.3f, \"ratio\": %.3f, \"prefill_s\": %.3f, "
               "\"other_processes_pct\": %.1f,\n      \"timeline\": [",
            r->q50 * 1e3, r->q99 * 1e3, r->d50 * 1e3, r->d99 * 1e3, r->ratio, r->prefill, 100 * r->foreign);
    for (int i = 0; i < r->n_tl; i++)
        fprintf(f, "%s[%d, %.4f, %.3f]", i == 0 ? "" : i % 8 ? ", " : ",\n        ", r->tl[i].stream, r->tl[i].t,
                r->tl[i].gap * 1e3);
    fprintf(f, "]");
}

static void stall_md_row(FILE *f, const char *who, const bench_stall_side *r)
{
    fprintf(f, "| %s | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.2fx | %.2f s |\n", who, r->q50 * 1e3, r->q99 * 1e3,
            r->d50 * 1e3, r->d99 * 1e3, r->ratio, r->prefill);
}

static void stall_report(const bench_stall_res *o, const tandem_session_opts *so, int threads, FILE *json, FILE *md)
{
    const bench_stall_side *a = &o->ours, *b = &o->peer;
    int np = b->reps;
    fprintf(stderr, "stall: %d streams, a %d-token prompt arrives: TPOT p50 %.1f ms quiet, %.1f ms during its prefill "
                    "(%.2fx; prefill %.2f s; median of %d)\n", o->streams, o->P, a->q50 * 1e3, a->d50 * 1e3, a->ratio,
            a->prefill, a->reps);
    if (np)
        fprintf(stderr, "stall: llama.cpp: %.1f ms quiet, %.1f ms during (%.2fx; prefill %.2f s; median of %d); "
                        "rise tandem / llama.cpp %.3f\n", b->q50 * 1e3, b->d50 * 1e3, b->ratio, b->prefill, np,
                b->ratio > 0 ? a->ratio / b->ratio : 0);
    if (json) {
        fprintf(json, "  \"stall\": {\"streams\": %d, \"prompt\": %d, \"stream_prompt\": %d, \"quiet_s\": %.2f, "
                      "\"reps\": %d, \"dropped\": %d, \"lend\": %s,\n    ", o->streams, o->P, STALL_STREAM_PROMPT,
                o->quiet_s, a->reps, a->dropped, o->lend ? "true" : "false");
        fprintf(json, "\"lend_mode\": \"%s\", \"max_stall\": %.3g, \"gpu_split\": %.3g,\n    ", o->lend_mode,
                so->max_stall < 0 ? -1.0 : (double)tandem_stall_bound(so),
                so->gpu_split > 0 && so->gpu_split < 1 ? (double)so->gpu_split : 0.0);
        stall_json(json, a);
        if (np) {
            fprintf(json, ",\n    \"peer\": \"llama.cpp\", \"peer_stall\": {\"reps\": %d, \"dropped\": %d, "
                          "\"threads\": %d, \"n_batch\": %d, \"n_ubatch\": %d, \"n_seq_max\": %d, "
                          "\"kv_unified\": true,\n      ",
                    np, b->dropped, threads, STALL_PEER_N_BATCH, STALL_PEER_N_UBATCH, o->streams + 1);
            stall_json(json, b);
            fprintf(json, "},\n    \"ratio_over_peer\": %.4f", b->ratio > 0 ? a->ratio / b->ratio : 0);
        }
        fprintf(json, "},\n");
    }
    if (md) {
        fprintf(md, "\n### Decode stall: %d streams running, a %d-token prompt arrives (median of %d)\n\n"
                    "| engine | TPOT p50 quiet | p99 quiet | TPOT p50 during its prefill | p99 during | rise (p50) | "
                    "its TTFT |\n|---|---|---|---|---|---|---|\n", o->streams, o->P, a->reps);
        char who[160];
        snprintf(who, sizeof who, "tandem (%s)", o->lend_mode);
        stall_md_row(md, who, a);
        if (np) {
            snprintf(who, sizeof who, "llama.cpp (server schedule: n_batch %d, n_ubatch %d, %d seqs, unified KV)",
                     STALL_PEER_N_BATCH, STALL_PEER_N_UBATCH, o->streams + 1);
            stall_md_row(md, who, b);
            fprintf(md, "\nRise, tandem / llama.cpp: %.3f (below 1: tandem stalls its streams less).\n",
                    b->ratio > 0 ? a->ratio / b->ratio : 0);
        }
    }
}

int bench_stall(tandem_model *m, const tandem_session_opts *so, int streams, int P, int reps, int retries,
                const char *peer_bin, const char *peer_model, FILE *json, FILE *md, bench_stall_res *out)
{
    tandem_model_info info;
    tandem_model_get_info(m, &info);
    if (streams < 1) streams = 1;
    if (streams > BENCH_MAX_STREAMS) streams = BENCH_MAX_STREAMS;
    if (reps < 1) reps = 1;
    if (reps > BENCH_MAX_REPS) reps = BENCH_MAX_REPS;
    if (retries < 0) retries = 0;
    int threads = so->n_threads > 0 ? so->n_threads : 2; /* as the tests' peer runs (cmd_bench.c) */
    char lbin[1024] = "";
    if (peer_bin) {
        const char *sl = strrchr(peer_bin, '/');
        snprintf(lbin, sizeof lbin, "%.*sllstall", sl ? (int)(sl - peer_bin + 1) : 0, peer_bin);
        if (access(lbin, X_OK) != 0) {
            fprintf(stderr, "tandem bench: %s: not found (tools/llstall.sh builds llama.cpp's stall harness)\n", lbin);
            return 1;
        }
    }
    tandem_status st;
    tandem_session *s;
    if (tandem_session_new(&s, m, so, &st) != 0) {
        fprintf(stderr, "tandem bench: %s\n", st.msg);
        return 1;
    }
    int lend = (tandem_session_lending(s) & TANDEM_LEND_DECODE) != 0;
    bench_stall_side ours[BENCH_MAX_REPS] = {0}, peer[BENCH_MAX_REPS] = {0};
    int n_ours = 0, n_peer = 0, rc = 0, dropped[2] = {0, 0};
    unsigned seed = 5;
    for (int k = 0; k < reps && rc == 0; k++) { /* interleaved: tandem, llama.cpp, tandem, ... */
        for (int side = 0; side < (peer_bin ? 2 : 1) && rc == 0; side++) {
            bench_stall_side *x = side ? &peer[n_peer] : &ours[n_ours];
            int ok = 0;
            for (int a = 0; a <= retries && !ok; a++) {
                if (a) wait_quiet(120);
                free(x->tl);
                *x = (bench_stall_side){0};
                if (side == 0 && (rc = stall_once(s, info.vocab, streams, P, &seed, x))) break;
                if (side == 1 && stall_peer_once(lbin, peer_model, threads, streams, P, 5u + (unsigned)k, x)) {
                    fprintf(stderr, "stall rep %d: llama.cpp failed (%s)\n", k + 1, lbin);
                    break;
                }
                /* a disturbed run is redone; the last attempt is kept whatever it shows */
                int gaps = x->n_quiet > 0 && x->n_during > 0, last = a == retries;
                ok = gaps && (x->foreign <= STALL_MAX_FOREIGN || last);
                if (!ok) dropped[side]++;
                fprintf(stderr, "stall rep %d: %s TPOT p50 %.1f -> %.1f ms (%.2fx), other processes %.1f%%%s%s\n",
                        k + 1, side ? "llama.cpp" : "tandem", x->q50 * 1e3, x->d50 * 1e3, x->ratio, 100 * x->foreign,
                        ok ? "" : gaps ? ": disturbed" : ": a window without gaps (streams ended? raise -c)",
                        ok ? "" : last ? ", dropped" : ", redone");
            }
            if (ok) side ? n_peer++ : n_ours++;
            else {
                free(x->tl);
                x->tl = NULL;
            }
        }
    }
    tandem_session_free(s);
    if (rc == 0 && n_ours == 0) {
        fprintf(stderr, "tandem bench: stall: no run counted gaps in both windows (model too fast for them?)\n");
        rc = 1;
    }
    *out = (bench_stall_res){.streams = streams, .P = P, .lend = lend, .quiet_s = STALL_QUIET_S,
                             .lend_mode = so->no_lend ? "--no-lend"
                                          : lend ? "decode borrows idle cores" : "decode on its own cores: stall bound"};
    out->ours = stall_median(ours, n_ours, dropped[0]);
    out->peer = stall_median(peer, n_peer, dropped[1]);
    if (rc) {
        bench_stall_free(out);
        return 1;
    }
    stall_report(out, so, threads, json, md);
    return 0;
}

/* ---- tokenizer speed ------------------------------------------------------------------- */

int bench_tokenizer(tandem_model *m, const char *path, FILE *json, FILE *md)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tandem bench: %s: cannot open\n", path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = n > 0 && n < (1L << 30) ? malloc((size_t)n + 1) : NULL;
    size_t got = text ? fread(text, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!text || got != (size_t)n) {
        free(text);
        fprintf(stderr, "tandem bench: %s: cannot read\n", path);
        return 1;
    }
    text[n] = '\0';
    double t[5];
    size_t n_ids = 0;
    tandem_status st;
    for (int r = 0; r < 5; r++) {
        int32_t *ids = NULL;
        double t0 = tm_now_s();
        if (tandem_tokenize(m, text, (size_t)n, 1, &ids, &n_ids, &st) != 0) {
            fprintf(stderr, "tandem bench: %s\n", st.msg);
            free(text);
            return 1;
        }
        t[r] = tm_now_s() - t0;
        free(ids);
    }
    double med = bc_pct(t, 5, 0.5), mbs = n / med / 1e6;
    fprintf(stderr, "tokenizer: %ld bytes -> %zu tokens in %.3f s: %.1f MB/s\n", n, n_ids, med, mbs);
    if (json)
        fprintf(json, "  \"tokenizer\": {\"file\": \"%s\", \"bytes\": %ld, \"tokens\": %zu, \"mb_per_s\": %.2f},\n", path, n,
                n_ids, mbs);
    if (md)
        fprintf(md, "\n### Tokenizer\n\n%s: %ld bytes, %zu tokens, %.1f MB/s (one thread, median of 5)\n", path, n, n_ids, mbs);
    free(text);
    return 0;
}
