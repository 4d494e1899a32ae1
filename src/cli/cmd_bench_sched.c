/* cli/cmd_bench_sched.c: the scenario parts of `tandem bench` (see bench.h):
 * hand-off cost by context, prompt-length sweep over routes, concurrency
 * with Poisson arrivals, and the decode-stall test. Public API only. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/bench.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

double bench_median(const double *v, int n)
{
    double t[64];
    if (n <= 0) return 0;
    if (n > 64) n = 64;
    memcpy(t, v, sizeof(double) * (size_t)n);
    qsort(t, (size_t)n, sizeof(double), cmp_d);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (s && *s && n < max) {
        out[n++] = atoi(s);
        s = strchr(s, ',');
        if (s) s++;
    }
    return n;
}

static int32_t *random_ids(int n, int V, unsigned *seed)
{
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; ids && i < n; i++) ids[i] = (int32_t)(rand_r(seed) % (unsigned)V);
    return ids;
}

/* ---- hand-off -------------------------------------------------------------------- */

int bench_handoff(tandem_model *m, const char *lens, double pp_rate, FILE *json, FILE *md)
{
    int ns[32], k = parse_list(lens, ns, 32);
    tandem_status st;
    if (json) fprintf(json, "  \"handoff\": [\n");
    if (md)
        fprintf(md, "\n### KV hand-off by context length\n\n| context | bridge copy (all layers) | exposed (overlapped) |"
                    " prefill (est. from pp rate) | exposed / prefill |\n|---|---|---|---|---|\n");
    for (int i = 0; i < k; i++) {
        double copy = 0, exposed = 0;
        if (tandem_handoff_cost(m, ns[i], 3, &copy, &exposed, &st) != 0) {
            fprintf(stderr, "tandem bench: %s\n", st.msg);
            return 1;
        }
        double pre = pp_rate > 0 ? ns[i] / pp_rate : 0;
        fprintf(stderr, "handoff %6d: copy %.3f ms, exposed %.3f ms%s\n", ns[i], copy * 1e3, exposed * 1e3,
                pre > 0 ? "" : " (no pp rate)");
        if (json)
            fprintf(json, "    {\"context\": %d, \"copy_ms\": %.4f, \"exposed_ms\": %.4f, \"prefill_est_s\": %.3f, "
                          "\"exposed_fraction\": %.6f}%s\n",
                    ns[i], copy * 1e3, exposed * 1e3, pre, pre > 0 ? exposed / pre : 0, i + 1 < k ? "," : "");
        if (md)
            fprintf(md, "| %d | %.3f ms | %.3f ms | %.2f s | %.4f%% |\n", ns[i], copy * 1e3, exposed * 1e3, pre,
                    pre > 0 ? 100 * exposed / pre : 0);
    }
    if (json) fprintf(json, "  ],\n");
    return 0;
}

/* ---- prompt-length sweep ---------------------------------------------------------- */

static double e2e_once(tandem_session *s, const int32_t *ids, int P, int G, tandem_stats *stats)
{
    tandem_request r;
    tandem_request_default(&r);
    r.prompt_ids = ids;
    r.n_prompt_ids = (size_t)P;
    r.max_tokens = G;
    r.temperature = 0;
    r.ignore_eos = 1;
    tandem_status st;
    double t0 = now_s();
    if (tandem_generate(s, &r, NULL, NULL, stats, &st) != 0) {
        fprintf(stderr, "tandem bench: %s\n", st.msg);
        return -1;
    }
    return now_s() - t0;
}

int bench_sweep(tandem_model *m, const tandem_session_opts *so, const char *lens, int gen, int reps, FILE *json,
                FILE *md)
{
    int ns[32], k = parse_list(lens, ns, 32);
    tandem_model_info info;
    tandem_model_get_info(m, &info);
    static const tandem_route routes[4] = {TANDEM_ROUTE_HYBRID, TANDEM_ROUTE_PREFILL_ONLY, TANDEM_ROUTE_DECODE_ONLY,
                                           TANDEM_ROUTE_AUTO};
    static const char *names[4] = {"hybrid", "prefill-only", "decode-only", "auto"};
    tandem_session *ss[4] = {0};
    tandem_status st;
    int rc = 0;
    for (int r = 0; r < 4 && rc == 0; r++) {
        tandem_session_opts o = *so;
        o.route = routes[r];
        if (tandem_session_new(&ss[r], m, &o, &st) != 0) {
            fprintf(stderr, "tandem bench: %s\n", st.msg);
            rc = 1;
        }
    }
    if (json && rc == 0) fprintf(json, "  \"sweep\": [\n");
    if (md && rc == 0)
        fprintf(md, "\n### Prompt-length sweep (end to end, %d generated tokens; median of %d)\n\n"
                    "| prompt | hybrid | prefill-only | decode-only | router (auto) | router picked | auto / best |\n"
                    "|---|---|---|---|---|---|---|\n", gen, reps);
    unsigned seed = 99;
    for (int i = 0; i < k && rc == 0; i++) {
        int32_t *ids = random_ids(ns[i], info.vocab, &seed);
        double t[4][16];
        const char *picked = "?";
        for (int rep = 0; rep < reps && rc == 0; rep++)
            for (int r = 0; r < 4; r++) { /* interleaved: A B C D A B C D */
                tandem_stats stats;
                t[r][rep] = e2e_once(ss[r], ids, ns[i], gen, &stats);
                if (t[r][rep] < 0) { rc = 1; break; }
                if (r == 3) picked = stats.route;
            }
        free(ids);
        if (rc) break;
        double med[4], best = 1e30;
        for (int r = 0; r < 4; r++) {
            med[r] = pct(t[r], reps, 0.5);
            if (r < 3 && med[r] < best) best = med[r];
        }
        fprintf(stderr, "sweep %5d: hybrid %.3f s, prefill-only %.3f s, decode-only %.3f s, auto %.3f s (%s) -> %.3f\n",
                ns[i], med[0], med[1], med[2], med[3], picked, med[3] / best);
        if (json)
            fprintf(json, "    {\"prompt\": %d, \"gen\": %d, \"%s_s\": %.4f, \"%s_s\": %.4f, \"%s_s\": %.4f, \"%s_s\": %.4f, "
                          "\"picked\": \"%s\", \"auto_over_best\": %.4f}%s\n",
                    ns[i], gen, names[0], med[0], names[1], med[1], names[2], med[2], names[3], med[3], picked,
                    med[3] / best, i + 1 < k ? "," : "");
        if (md)
            fprintf(md, "| %d | %.3f s | %.3f s | %.3f s | %.3f s | %s | %.3f |\n", ns[i], med[0], med[1], med[2], med[3],
                    picked, med[3] / best);
    }
    if (json && rc == 0) fprintf(json, "  ],\n");
    for (int r = 0; r < 4; r++) tandem_session_free(ss[r]);
    (void)names;
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

int bench_concurrency(tandem_model *m, const tandem_session_opts *so, const char *clients, int P, int G, double gap_s,
                      FILE *json, FILE *md)
{
    int cs[8], k = parse_list(clients, cs, 8);
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
        int n = cs[i] < 1 ? 1 : cs[i] > 8 ? 8 : cs[i];
        client c[8];
        pthread_t th[8];
        double t0 = now_s();
        for (int j = 0; j < n; j++) {
            c[j] = (client){.s = s, .P = P, .G = G, .V = info.vocab, .n_req = 2, .gap_s = gap_s, .seed = 7u + 31u * j};
            pthread_create(&th[j], NULL, client_main, &c[j]);
        }
        for (int j = 0; j < n; j++) pthread_join(th[j], NULL);
        double wall = now_s() - t0;
        double ttft[64], p50[64], p99[64];
        int nr = 0, gen = 0;
        for (int j = 0; j < n; j++) {
            for (int q = 0; q < c[j].done; q++, nr++) {
                ttft[nr] = c[j].ttft[q];
                p50[nr] = c[j].tpot50[q];
                p99[nr] = c[j].tpot99[q];
            }
            gen += c[j].gen;
        }
        double a = pct(ttft, nr, 0.5), b = pct(p50, nr, 0.5), d = pct(p99, nr, 1.0);
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

typedef struct stream_rec {
    double t[4096];
    int n;
} stream_rec;

static int rec_token(void *ud, const char *piece, size_t len, int32_t tok)
{
    (void)piece;
    (void)len;
    stream_rec *r = ud;
    if (tok >= 0 && r->n < 4096) r->t[r->n++] = now_s();
    return 0;
}

int bench_stall(tandem_model *m, const tandem_session_opts *so, int streams, int P, FILE *json, FILE *md)
{
    tandem_model_info info;
    tandem_model_get_info(m, &info);
    tandem_status st;
    tandem_session *s;
    if (tandem_session_new(&s, m, so, &st) != 0) {
        fprintf(stderr, "tandem bench: %s\n", st.msg);
        return 1;
    }
    if (streams < 1) streams = 1;
    if (streams > 7) streams = 7;
    unsigned seed = 5;
    stream_rec *rec = calloc((size_t)streams, sizeof *rec);
    tandem_handle *h[8];
    int32_t *ids[8];
    tandem_request r;
    tandem_request_default(&r);
    r.temperature = 0;
    r.ignore_eos = 1;
    r.max_tokens = 4000;
    for (int i = 0; i < streams; i++) {
        ids[i] = random_ids(64, info.vocab, &seed);
        r.prompt_ids = ids[i];
        r.n_prompt_ids = 64;
        tandem_submit(s, &r, rec_token, &rec[i], &h[i], &st);
    }
    /* let the streams settle, measure a quiet window, then a prompt arrives */
    while (rec[streams - 1].n < 8) usleep(1000);
    double q0 = now_s();
    usleep(1500000);
    double q1 = now_s();
    int32_t *big = random_ids(P, info.vocab, &seed);
    r.prompt_ids = big;
    r.n_prompt_ids = (size_t)P;
    r.max_tokens = 1;
    tandem_stats bs;
    tandem_handle *hb;
    tandem_submit(s, &r, NULL, NULL, &hb, &st);
    tandem_wait(hb, &bs, &st);
    double a1 = now_s();
    for (int i = 0; i < streams; i++) tandem_cancel(h[i]);
    for (int i = 0; i < streams; i++) {
        tandem_stats x;
        tandem_wait(h[i], &x, &st);
        free(ids[i]);
    }
    /* inter-token gaps that end inside each window */
    double *quiet = malloc(sizeof(double) * 4096 * (size_t)streams), *busy = malloc(sizeof(double) * 4096 * (size_t)streams);
    int nq = 0, nb = 0;
    for (int i = 0; i < streams; i++)
        for (int j = 1; j < rec[i].n; j++) {
            double t = rec[i].t[j], g = t - rec[i].t[j - 1];
            if (t >= q0 && t < q1) quiet[nq++] = g;
            else if (t >= q1 && t < a1) busy[nb++] = g;
        }
    double pq = pct(quiet, nq, 0.5), pb = pct(busy, nb, 0.5);
    fprintf(stderr, "stall: %d streams, a %d-token prompt arrives: TPOT p50 %.1f ms quiet, %.1f ms during its prefill "
                    "(%.2fx; prefill %.2f s)\n", streams, P, pq * 1e3, pb * 1e3, pq > 0 ? pb / pq : 0, a1 - q1);
    if (json)
        fprintf(json, "  \"stall\": {\"streams\": %d, \"prompt\": %d, \"tpot_p50_quiet_ms\": %.3f, "
                      "\"tpot_p50_during_prefill_ms\": %.3f, \"ratio\": %.3f, \"prefill_s\": %.3f},\n",
                streams, P, pq * 1e3, pb * 1e3, pq > 0 ? pb / pq : 0, a1 - q1);
    if (md)
        fprintf(md, "\n### Decode stall: %d streams running, a %d-token prompt arrives\n\n"
                    "| TPOT p50 quiet | TPOT p50 during the new prompt's prefill | ratio | prefill time |\n|---|---|---|---|\n"
                    "| %.1f ms | %.1f ms | %.2fx | %.2f s |\n",
                streams, P, pq * 1e3, pb * 1e3, pq > 0 ? pb / pq : 0, a1 - q1);
    free(quiet);
    free(busy);
    free(big);
    free(rec);
    tandem_session_free(s);
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
        double t0 = now_s();
        if (tandem_tokenize(m, text, (size_t)n, 1, &ids, &n_ids, &st) != 0) {
            fprintf(stderr, "tandem bench: %s\n", st.msg);
            free(text);
            return 1;
        }
        t[r] = now_s() - t0;
        free(ids);
    }
    double med = pct(t, 5, 0.5), mbs = n / med / 1e6;
    fprintf(stderr, "tokenizer: %ld bytes -> %zu tokens in %.3f s: %.1f MB/s\n", n, n_ids, med, mbs);
    if (json)
        fprintf(json, "  \"tokenizer\": {\"file\": \"%s\", \"bytes\": %ld, \"tokens\": %zu, \"mb_per_s\": %.2f},\n", path, n,
                n_ids, mbs);
    if (md)
        fprintf(md, "\n### Tokenizer\n\n%s: %ld bytes, %zu tokens, %.1f MB/s (one thread, median of 5)\n", path, n, n_ids, mbs);
    free(text);
    return 0;
}
