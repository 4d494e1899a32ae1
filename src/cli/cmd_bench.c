/* cli/cmd_bench.c: `tandem bench`: speed, measured through the public API
 * exactly as users get it, side by side with llama.cpp.
 *
 * Tests (llama-bench's definitions):
 *   ppN     prefill N random token ids (BOS first); tokens/s = N / prefill time
 *   tgN     generate N tokens after a 1-token prompt; tokens/s = N / decode time
 *   eP+G    end to end: P prompt + G generated tokens: TTFT, TPOT, total
 * Each test runs on each --routes route: once as a warm-up, then --reps
 * times; medians are reported, with the process's peak resident memory
 * during the test (the high-water mark, reset per test through
 * /proc/self/clear_refs; model pages mapped by earlier tests count).
 * With --peer, llama.cpp's llbench (../shared/peers) runs the same tests
 * with the same thread count, interleaved with the first route's reps (A B A
 * B); the other routes' ratios use those figures.
 * Then the scenarios (cmd_bench_sched.c): hand-off, prompt-length sweep,
 * concurrency, stall, tokenizer; then issue 6's acceptance points, judged
 * from all of it (bench_accept.c). One invocation can run everything:
 * --suite issue6 expands to the whole set.
 * Output: a JSON document on stdout (or --json FILE), plus --md FILE (the
 * markdown tables) and --svg FILE (the chart, bench_svg.c). */
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/bench.h"
#include "cli/cli.h"
#include "core/cpu.h"
#include "tandem.h"

#define MAX_TESTS 32
#define PAIRED_PEAK_S 0.2 /* seconds of each peak measured beside a pp rep (--ceilings) */
#define PAIRED_READ_S 0.25 /* seconds of each read bandwidth measured beside a tg rep (--ceilings) */

typedef struct bench_test {
    char name[32];
    int kind;          /* 'p' pp, 'g' tg, 'e' e2e, 'm' emb (an embedding's prefill) */
    int P, G;
    int route;         /* tandem_route */
    int peer_beside;   /* llama.cpp runs interleaved with this one (the test's first route) */
    const char *engines[2];      /* prefill and decode engine of the last run */
    double tps[BENCH_MAX_REPS];  /* tokens/s (pp, tg) or total seconds (e2e) */
    double ttft[BENCH_MAX_REPS], tpot[BENCH_MAX_REPS], tpot50[BENCH_MAX_REPS], tpot99[BENCH_MAX_REPS];
    double handoff[BENCH_MAX_REPS];
    double gemm_gops[BENCH_MAX_REPS], gemm_share[BENCH_MAX_REPS]; /* pp with --ceilings (bench_row) */
    int n_gemm;
    double read_share[BENCH_MAX_REPS]; /* tg with --ceilings (bench_row) */
    int n_read;
    double gemm_steady[BENCH_MAX_REPS], read_steady[BENCH_MAX_REPS]; /* the steady reps' shares */
    int n_gemm_steady, n_read_steady;
    double last_gemm;            /* the last run's GEMM GOP/s (0: none ran) */
    int n;
    double peak_mb;
    double peer[BENCH_MAX_REPS]; /* the same metric from llama.cpp */
    double peer_ttft[BENCH_MAX_REPS], peer_tpot[BENCH_MAX_REPS], peer_peak_mb;
    int n_peer;
} bench_test;

static const char bench_usage[] =
    "usage: tandem bench MODEL [options]\n\n"
    "  --tests LIST        comma-separated: ppN, tgN, eP+G, embN (an N-token embedding, tokens/s;\n"
          "                      default pp512,tg128,e448+64,e64+448; '' for none)\n"
    "  --routes LIST       hybrid,prefill-only,decode-only,auto (default hybrid)\n"
    "  --reps N            timed repetitions per test and stall (default 3, at most 32)\n"
    "  -t, --threads N, --prefill ENGINE, --decode ENGINE, --stateful, --exact-tail,\n"
    "  --prefill-threads N, --gpu-split F, -c N   as for tandem run (without -c, each scenario's context\n"
    "                      is raised to what it needs, up to the model's positions)\n"
    "  --peer llama.cpp    also run llama.cpp's llbench on --peer-model, interleaved\n"
    "  --peer-model F.gguf the peer's model (same shape; see ../shared/peers)\n"
    "  --peer-bin PATH     llbench (default $HOME/.cache/tandem-peers/llbench)\n"
    "  --json F, --md F, --svg F   write results (JSON goes to stdout by default; the SVG is the chart)\n"
    "  --suite issue6      issue 6's acceptance set in one run (options given as well override it):\n"
    "                      --tests e448+64,e64+448 --routes hybrid,prefill-only,decode-only,auto\n"
    "                      --sweep 16:7,32:7,64:7,128:5,256:5,512:5,1024,2048,4096:3,8192:2 --sweep-gen 16\n"
    "                      --concurrency 1,2,4,8 --conc 448+64 --gap 2 --stall 4 --stall-prompt 448\n"
    "scenarios (after the tests):\n"
    "  --handoff LIST      KV hand-off cost at these context lengths (e.g. 512,2048,8192,32768), against\n"
    "                      that many tokens' prefill: a ppN test of the same length (measured), else\n"
    "                      the nearest shorter ppN's rate, or the shortest's (estimated)\n"
    "  --sweep LIST        prompt-length sweep over every route and the router (e.g. 16,64,256,1024);\n"
    "                      an entry LEN:R runs R reps at that length\n"
    "  --sweep-gen N       tokens generated per sweep point (default 16)\n"
    "  --sweep-reps N      reps per sweep point without :R (default --reps)\n"
    "  --concurrency LIST  client counts, 1..64 (e.g. 1,2,4,8); --conc P+G (default 448+64), --gap S (default 1.0)\n"
    "  --stall N           N running streams (1..7), then a --stall-prompt P (default 448) token prompt arrives\n"
    "                      (--reps runs; with --peer, llama.cpp too: llstall beside --peer-bin, tools/llstall.sh)\n"
    "  --stall-retries N   redo a stall run disturbed by other processes up to N times (default 3)\n"
    "  --no-lend           never lend idle cores to the other side\n"
    "  --max-stall X|off   the stall bound (default 0.25): the decode side borrows idle prefill cores in the\n"
    "                      multi-request scenarios (--concurrency, --stall) only within it; the one-request\n"
    "                      tests and the sweep run one request at a time and always lend\n"
    "  --ceilings          measure the read bandwidth and the matrix units' peaks before the tests and after\n"
    "                      the scenarios, and give each ppN / tgN its fraction of them; for ppN also the\n"
    "                      peak right before and after each rep, and the prefill GEMMs' share of it; for\n"
    "                      tgN the read bandwidth right before and after each rep, and the decode's share\n"
    "  --tok-file F        tokenizer speed: encode F (one thread), MB/s\n"
    "When the routes, the sweep or the stall ran, issue 6's acceptance points are judged from the\n"
    "figures (JSON \"acceptance\", a markdown section, stderr).\n";

/* --suite issue6, parsed before the command line's own options */
static const char *const suite_issue6[] = {
    "--tests", "e448+64,e64+448", "--routes", "hybrid,prefill-only,decode-only,auto",
    "--sweep", "16:7,32:7,64:7,128:5,256:5,512:5,1024,2048,4096:3,8192:2", "--sweep-gen", "16",
    "--concurrency", "1,2,4,8", "--conc", "448+64", "--gap", "2", "--stall", "4", "--stall-prompt", "448", NULL};

typedef struct bench_opts {
    const char *model, *tests, *routes, *peer, *peer_model, *peer_bin, *json, *md, *svg, *tok_file, *suite;
    int reps, sweep_reps, sweep_gen, conc_p, conc_g, stall, stall_p, stall_retries, ceilings;
    int sweep[BENCH_MAX_POINTS], sweep_r[BENCH_MAX_POINTS], n_sweep;  /* sweep_r 0: --sweep-reps */
    int handoff[BENCH_MAX_POINTS], n_handoff;
    int conc[BENCH_MAX_CLIENTS], n_conc;
    double gap;
    cli_gen g;
} bench_opts;

const char *bench_route_name(int r)
{
    static const char *names[] = {"auto", "hybrid", "prefill-only", "decode-only"};
    return r >= 0 && r < 4 ? names[r] : "?";
}

/* ---- options ------------------------------------------------------------------------ */

static int int_arg(const char *opt, const char *v, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "tandem bench: %s: '%s' is not an integer in %d..%d\n", opt, v, lo, hi);
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* A comma list of integers in lo..hi, at most max of them, into out[*n];
 * with reps non-NULL an entry may be N:R (R reps at that point, else 0). */
static int list_arg(const char *opt, const char *v, int lo, int hi, int *out, int *reps, int max, int *n)
{
    char buf[1024], *save = NULL;
    if (strlen(v) >= sizeof buf) {
        fprintf(stderr, "tandem bench: %s: list too long\n", opt);
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", v);
    *n = 0;
    for (char *e = strtok_r(buf, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
        if (*n == max) {
            fprintf(stderr, "tandem bench: %s: at most %d entries\n", opt, max);
            return -1;
        }
        char *colon = reps ? strchr(e, ':') : NULL;
        if (colon) *colon = '\0';
        if (int_arg(opt, e, lo, hi, &out[*n])) return -1;
        if (reps) reps[*n] = 0;
        if (colon && int_arg("reps after LEN:", colon + 1, 1, BENCH_MAX_REPS, &reps[*n])) return -1;
        (*n)++;
    }
    return 0;
}

/* Parse argv[first..argc) into o. 0, or 2 (usage error, message printed). */
static int parse_opts(bench_opts *o, int argc, char **argv, int first)
{
    for (int i = first; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int k = cli_gen_parse(&o->g, "bench", argc, argv, &i);
        if (k < 0) return 2;
        if (k > 0) continue;
        static const char *const with_value[] = {
            "--tests", "--routes", "--reps", "--peer", "--peer-model", "--peer-bin", "--json", "--md", "--svg",
            "--handoff", "--sweep", "--sweep-gen", "--sweep-reps", "--concurrency", "--conc", "--gap", "--stall",
            "--stall-prompt", "--stall-retries", "--tok-file", "--suite", NULL};
        int needs = 0;
        for (const char *const *w = with_value; *w; w++) needs |= !strcmp(a, *w);
        if (needs && !v) {
            fprintf(stderr, "tandem bench: %s needs a value\n", a);
            return 2;
        }
        if (needs) i++;
        int bad = 0;
        if (!strcmp(a, "--tests")) o->tests = v;
        else if (!strcmp(a, "--routes")) o->routes = v;
        else if (!strcmp(a, "--reps")) bad = int_arg(a, v, 1, BENCH_MAX_REPS, &o->reps);
        else if (!strcmp(a, "--peer")) o->peer = v;
        else if (!strcmp(a, "--peer-model")) o->peer_model = v;
        else if (!strcmp(a, "--peer-bin")) o->peer_bin = v;
        else if (!strcmp(a, "--json")) o->json = v;
        else if (!strcmp(a, "--md")) o->md = v;
        else if (!strcmp(a, "--svg")) o->svg = v;
        else if (!strcmp(a, "--handoff"))
            bad = list_arg(a, v, 1, 1 << 20, o->handoff, NULL, BENCH_MAX_POINTS, &o->n_handoff);
        else if (!strcmp(a, "--sweep"))
            bad = list_arg(a, v, 1, 1 << 20, o->sweep, o->sweep_r, BENCH_MAX_POINTS, &o->n_sweep);
        else if (!strcmp(a, "--sweep-gen")) bad = int_arg(a, v, 1, 1 << 16, &o->sweep_gen);
        else if (!strcmp(a, "--sweep-reps")) bad = int_arg(a, v, 1, BENCH_MAX_REPS, &o->sweep_reps);
        else if (!strcmp(a, "--concurrency"))
            bad = list_arg(a, v, 1, BENCH_MAX_CLIENTS, o->conc, NULL, BENCH_MAX_CLIENTS, &o->n_conc);
        else if (!strcmp(a, "--conc")) {
            char tail;
            if (sscanf(v, "%d+%d%c", &o->conc_p, &o->conc_g, &tail) != 2 || o->conc_p < 1 || o->conc_g < 1) {
                fprintf(stderr, "tandem bench: --conc: '%s' is not P+G (two positive integers)\n", v);
                bad = 1;
            }
        } else if (!strcmp(a, "--gap")) {
            char *end;
            o->gap = strtod(v, &end);
            if (end == v || *end || !(o->gap > 0 && o->gap <= 3600)) {
                fprintf(stderr, "tandem bench: --gap: '%s' is not a number of seconds in (0, 3600]\n", v);
                bad = 1;
            }
        }
        else if (!strcmp(a, "--stall")) bad = int_arg(a, v, 1, BENCH_MAX_STREAMS, &o->stall);
        else if (!strcmp(a, "--stall-prompt")) bad = int_arg(a, v, 1, 1 << 20, &o->stall_p);
        else if (!strcmp(a, "--stall-retries")) bad = int_arg(a, v, 0, 10, &o->stall_retries);
        else if (!strcmp(a, "--ceilings")) o->ceilings = 1;
        else if (!strcmp(a, "--tok-file")) o->tok_file = v;
        else if (!strcmp(a, "--suite")) {
            if (strcmp(v, "issue6") != 0) {
                fprintf(stderr, "tandem bench: --suite: unknown suite '%s' (known: issue6)\n", v);
                bad = 1;
            }
        } else if (a[0] == '-') {
            fprintf(stderr, "tandem bench: unknown option '%s'\n", a);
            bad = 1;
        } else if (!o->model) o->model = a;
        else {
            fprintf(stderr, "tandem bench: unexpected argument '%s'\n", a);
            bad = 1;
        }
        if (bad) return 2;
    }
    return 0;
}

static int parse_test(const char *s, bench_test *t)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", s);
    char tail;
    if (sscanf(s, "pp%d%c", &t->P, &tail) == 1 && t->P > 0) t->kind = 'p';
    else if (sscanf(s, "tg%d%c", &t->G, &tail) == 1 && t->G > 0) t->kind = 'g';
    else if (sscanf(s, "emb%d%c", &t->P, &tail) == 1 && t->P > 0) t->kind = 'm';
    else if ((sscanf(s, "e%d+%d%c", &t->P, &t->G, &tail) == 2 || sscanf(s, "e2e%d+%d%c", &t->P, &t->G, &tail) == 2) &&
             t->P > 0 && t->G > 0)
        t->kind = 'e';
    else return -1;
    return 0;
}

/* The tests, every route times every test, route by route. -1 on a bad entry. */
static int make_tests(const bench_opts *o, bench_test *ts, int *nt)
{
    char tbuf[1024], rbuf[256], *rsave = NULL;
    snprintf(rbuf, sizeof rbuf, "%s", o->routes);
    *nt = 0;
    int first = 1;
    for (char *rs = strtok_r(rbuf, ",", &rsave); rs; rs = strtok_r(NULL, ",", &rsave), first = 0) {
        int route;
        if (cli_parse_route(rs, &route)) {
            fprintf(stderr, "tandem bench: --routes: unknown route '%s'\n", rs);
            return -1;
        }
        snprintf(tbuf, sizeof tbuf, "%s", o->tests);
        char *save = NULL;
        for (char *tk = strtok_r(tbuf, ",", &save); tk; tk = strtok_r(NULL, ",", &save)) {
            if (*nt == MAX_TESTS) {
                fprintf(stderr, "tandem bench: at most %d tests (--tests times --routes)\n", MAX_TESTS);
                return -1;
            }
            if (parse_test(tk, &ts[*nt])) {
                fprintf(stderr, "tandem bench: --tests: bad test '%s' (ppN, tgN, eP+G or embN)\n", tk);
                return -1;
            }
            ts[*nt].route = route;
            ts[*nt].peer_beside = first && ts[*nt].kind != 'm'; /* llbench has no embedding test */
            (*nt)++;
        }
    }
    return 0;
}

/* The context (max_ctx) for a scenario that needs `need` tokens: -c when
 * given (an error if smaller); else the session's default (tandem.h: the
 * model's, at most 4096), raised to `need` where that is larger, up to the
 * model's positions. 0, or -1 with the message printed. */
static int ctx_for(const char *what, int need, int user_ctx, const tandem_model_info *info, int *max_ctx)
{
    int def = info->max_ctx > 0 && info->max_ctx < 4096 ? info->max_ctx : 4096;
    *max_ctx = user_ctx;
    if (user_ctx > 0 && need > user_ctx) {
        fprintf(stderr, "tandem bench: %s needs a context of %d tokens; -c is %d (raise -c, or leave it out and "
                        "bench sizes each scenario's context)\n", what, need, user_ctx);
        return -1;
    }
    if (user_ctx > 0 || need <= def) return 0;
    if (info->max_ctx > 0 && need > info->max_ctx) {
        fprintf(stderr, "tandem bench: %s needs a context of %d tokens; the model has %d positions\n", what, need,
                info->max_ctx);
        return -1;
    }
    *max_ctx = need;
    return 0;
}

/* ---- peak memory: this process's resident high-water mark, reset per test ---------- */

static void peak_reset(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w"); /* "5": reset the peak RSS (Linux 4.0+) */
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

static double peak_mb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lf kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb / 1024.0;
}

/* ---- the tests ---------------------------------------------------------------------- */

/* One run of test t; returns 0 on success. */
static int run_once(tandem_session *s, const tandem_model_info *info, bench_test *t, int rep, unsigned *seed,
                    tandem_status *st)
{
    int P = t->kind == 'g' ? 1 : t->P;
    int G = t->kind == 'p' ? 1 : t->kind == 'g' ? t->G + 1 : t->G;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)P);
    float *emb = t->kind == 'm' ? malloc(sizeof(float) * (size_t)info->hidden) : NULL;
    if (!ids || (t->kind == 'm' && !emb)) {
        free(ids);
        return -1;
    }
    for (int i = 0; i < P; i++) ids[i] = (int32_t)(rand_r(seed) % (unsigned)info->vocab);
    tandem_stats stats;
    double total = emb ? bench_embed(s, ids, P, emb, &stats, st) : bench_generate(s, ids, P, G, &stats, st);
    free(ids);
    free(emb);
    if (total < 0) return -1;
    t->engines[0] = stats.prefill_engine;
    t->engines[1] = stats.decode_engine;
    t->last_gemm = stats.t_prefill_gemm > 0 ? stats.prefill_gemm_ops / stats.t_prefill_gemm / 1e9 : 0;
    if (rep < 0) return 0;
    if (t->kind == 'p') t->tps[rep] = P / stats.t_prefill;
    else if (t->kind == 'm') t->tps[rep] = P / total; /* the request's whole time: prefill, rows, pooling */
    else if (t->kind == 'g') t->tps[rep] = (stats.n_generated - 1) / stats.t_decode;
    else t->tps[rep] = total;
    t->ttft[rep] = stats.ttft;
    t->tpot[rep] = stats.n_generated > 1 ? stats.t_decode / (stats.n_generated - 1) : 0;
    t->tpot50[rep] = stats.tpot_p50;
    t->tpot99[rep] = stats.tpot_p99;
    t->handoff[rep] = stats.t_handoff;
    t->n = rep + 1;
    return 0;
}

typedef struct peer_rep {
    bench_test *t;
    int rep;
} peer_rep;

/* Parse one llbench RESULT line into t's metric for this rep. */
static int parse_peer(const char *line, void *ud)
{
    peer_rep *pr = ud;
    bench_test *t = pr->t;
    const char *q;
    if (t->kind == 'e') {
        double ttft, total, tpot = 0;
        if ((q = strstr(line, "TTFT ms: min")) && sscanf(q, "TTFT ms: min %*f median %lf", &ttft) == 1 &&
            (q = strstr(line, "total ms: min")) && sscanf(q, "total ms: min %*f median %lf", &total) == 1) {
            if ((q = strstr(line, "TPOT ms: min"))) sscanf(q, "TPOT ms: min %*f median %lf", &tpot);
            t->peer[pr->rep] = total / 1e3;
            t->peer_ttft[pr->rep] = ttft / 1e3;
            t->peer_tpot[pr->rep] = tpot / 1e3;
            return 0;
        }
    } else if ((q = strstr(line, "t/s: min")) && sscanf(q, "t/s: min %*f median %lf", &t->peer[pr->rep]) == 1) {
        return 0;
    }
    return -1;
}

/* Run llbench for one test, one rep; parse its RESULT line. */
static int run_peer(const char *bin, const char *model, int threads, bench_test *t, int rep)
{
    char name[48];
    if (t->kind == 'e') snprintf(name, sizeof name, "e2e%d+%d", t->P, t->G);
    else snprintf(name, sizeof name, "%.31s", t->name);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' bench '%s' %d 1 %s 2>/dev/null", bin, model, threads, name);
    peer_rep pr = {t, rep};
    double mb = 0;
    int found = bench_peer_run(cmd, threads, parse_peer, &pr, &mb);
    if (found == 0) {
        t->n_peer = rep + 1;
        if (mb > t->peer_peak_mb) t->peer_peak_mb = mb;
    }
    return found;
}

/* the threads --ceilings measures on: the session's, or every cpu this process may use */
static int ceil_threads_of(const tandem_session_opts *so)
{
    return so->n_threads > 0 ? so->n_threads : tm_cpu_allowed(NULL, 256);
}

/* Every test on every route, in two phases.
 *  1. Route by route, one session at a time: each test's warm-up request, and
 *     its peak memory (a session running that test alone).
 *  2. Every route's session open at once, the reps interleaved: rep k of every
 *     test on every route, then rep k + 1, so a drift of the machine (its
 *     memory bandwidth moves by 1.7x within minutes on dev) falls on all
 *     routes alike (order below); llama.cpp runs beside each test's first route.
 * 0, or 1 with the error printed. */
static int run_tests(tandem_model *m, const bench_opts *o, tandem_session_opts so, bench_test *ts, int nt)
{
    tandem_model_info info;
    tandem_model_get_info(m, &info);
    tandem_session *ss[4] = {NULL, NULL, NULL, NULL}; /* by tandem_route */
    tandem_status st = {0};
    int rc = 0, threads = so.n_threads > 0 ? so.n_threads : 2;
    int ceil_threads = ceil_threads_of(&so);
    unsigned seed = 1234;
    for (int i = 0; i < nt && rc == 0; i++) { /* phase 1: tests are grouped by route */
        bench_test *t = &ts[i];
        if (!ss[t->route]) {
            for (int r = 0; r < 4; r++) {
                tandem_session_free(ss[r]);
                ss[r] = NULL;
            }
            malloc_trim(0); /* so this route's peak memory starts from what is really in use */
            so.route = (tandem_route)t->route;
            if (tandem_session_new(&ss[t->route], m, &so, &st) != 0) {
                rc = 1;
                break;
            }
        }
        peak_reset();
        fprintf(stderr, "bench %s %s: warm-up\n", t->name, bench_route_name(t->route));
        rc = run_once(ss[t->route], &info, t, -1, &seed, &st);
        t->peak_mb = peak_mb();
    }
    for (int i = 0; i < nt && rc == 0; i++) { /* phase 2: every route's session */
        bench_test *t = &ts[i];
        if (ss[t->route]) continue;
        so.route = (tandem_route)t->route;
        if (tandem_session_new(&ss[t->route], m, &so, &st) != 0) rc = 1;
    }
    /* the order of a rep: test by test, that test's routes back to back (the
     * routes of one scenario are compared with each other), and every other
     * rep in reverse, so a steady drift falls on both ends alike */
    int order[MAX_TESTS], n = 0;
    for (int i = 0; i < nt; i++) {
        int seen = 0;
        for (int j = 0; j < n && !seen; j++) seen = !strcmp(ts[order[j]].name, ts[i].name);
        if (seen) continue;
        for (int j = i; j < nt; j++)
            if (!strcmp(ts[j].name, ts[i].name)) order[n++] = j;
    }
    for (int k = 0; k < o->reps && rc == 0; k++)
        for (int x = 0; x < n && rc == 0; x++) {
            bench_test *t = &ts[order[k % 2 ? n - 1 - x : x]];
            /* --ceilings, pp: the matrix unit's peak right before and after the rep, its GEMMs' share */
            int paired = o->ceilings && t->kind == 'p';
            double pk0 = paired ? bench_peak_now(ceil_threads, t->engines[0], info.prefill_encoding, PAIRED_PEAK_S) : 0;
            /* --ceilings, tg: the read bandwidth right before and after the rep, the weight stream's share */
            double bw0 = o->ceilings && t->kind == 'g' ? bench_read_now(ceil_threads, PAIRED_READ_S) : 0;
            if ((rc = run_once(ss[t->route], &info, t, k, &seed, &st))) break;
            double pk1 = pk0 > 0 ? bench_peak_now(ceil_threads, t->engines[0], info.prefill_encoding, PAIRED_PEAK_S) : 0;
            double bw1 = bw0 > 0 ? bench_read_now(ceil_threads, PAIRED_READ_S) : 0;
            fprintf(stderr, "bench rep %d: %s %s: tandem %.2f", k + 1, t->name, bench_route_name(t->route), t->tps[k]);
            if (bw0 > 0 && bw1 > 0 && info.decode_bytes_per_token > 0) {
                double gbps = t->tps[k] * (double)info.decode_bytes_per_token / 1e9;
                double share = 2 * gbps / (bw0 + bw1);
                int steady = bench_steady(bw0, bw1);
                t->read_share[t->n_read++] = share;
                if (steady) t->read_steady[t->n_read_steady++] = share;
                fprintf(stderr, " (%.1f GB/s, %.1f%% of the read bandwidth %.1f / %.1f beside%s)", gbps, 100 * share,
                        bw0, bw1, steady ? "" : ", unsteady");
            }
            if (pk0 > 0 && pk1 > 0 && t->last_gemm > 0) {
                double share = 2 * t->last_gemm / (pk0 + pk1);
                int steady = bench_steady(pk0, pk1);
                t->gemm_gops[t->n_gemm] = t->last_gemm;
                t->gemm_share[t->n_gemm++] = share;
                if (steady) t->gemm_steady[t->n_gemm_steady++] = share;
                fprintf(stderr, " (GEMMs %.0f GOP/s, %.1f%% of the peak %.0f / %.0f beside%s)", t->last_gemm,
                        100 * share, pk0, pk1, steady ? "" : ", unsteady");
            }
            if (o->peer && t->peer_beside) {
                if (run_peer(o->peer_bin, o->peer_model, threads, t, k) == 0)
                    fprintf(stderr, ", llama.cpp %.2f", t->peer[k]);
                else
                    fprintf(stderr, ", llama.cpp failed");
            }
            fprintf(stderr, "\n");
        }
    if (rc) fprintf(stderr, "tandem bench: %s\n", st.msg[0] ? st.msg : "out of memory");
    for (int r = 0; r < 4; r++) tandem_session_free(ss[r]);
    return rc;
}

/* v[n] (n >= 1): its median and range */
static void median_range(const double *v, int n, double *med, double *lo, double *hi)
{
    *med = bench_median(v, n);
    *lo = *hi = v[0];
    for (int k = 1; k < n; k++) {
        if (v[k] < *lo) *lo = v[k];
        if (v[k] > *hi) *hi = v[k];
    }
}

/* Medians of each test into rows; rows of later routes take the llama.cpp
 * figures measured beside the test's first route. */
static void make_rows(const bench_test *ts, int nt, bench_row *rows)
{
    for (int i = 0; i < nt; i++) {
        const bench_test *t = &ts[i];
        bench_row *r = &rows[i];
        *r = (bench_row){.kind = t->kind, .P = t->kind == 'g' ? 0 : t->P, .G = t->kind == 'p' ? 0 : t->G,
                         .route = t->route, .reps = t->n, .peak_mb = t->peak_mb,
                         .prefill_engine = t->engines[0] ? t->engines[0] : "?",
                         .decode_engine = t->engines[1] ? t->engines[1] : "?"};
        snprintf(r->name, sizeof r->name, "%.31s", t->name);
        r->value = bench_median(t->tps, t->n);
        r->ttft = bench_median(t->ttft, t->n);
        r->tpot = bench_median(t->tpot, t->n);
        r->tpot_p50 = bench_median(t->tpot50, t->n);
        r->tpot_p99 = bench_median(t->tpot99, t->n);
        r->handoff = bench_median(t->handoff, t->n);
        if ((r->gemm_reps = t->n_gemm) > 0) {
            r->gemm_gops = bench_median(t->gemm_gops, t->n_gemm);
            median_range(t->gemm_share, t->n_gemm, &r->gemm_share, &r->gemm_share_lo, &r->gemm_share_hi);
        }
        if ((r->read_reps = t->n_read) > 0)
            median_range(t->read_share, t->n_read, &r->read_share, &r->read_share_lo, &r->read_share_hi);
        if ((r->gemm_steady_reps = t->n_gemm_steady) > 0)
            r->gemm_share_steady = bench_median(t->gemm_steady, t->n_gemm_steady);
        if ((r->read_steady_reps = t->n_read_steady) > 0)
            r->read_share_steady = bench_median(t->read_steady, t->n_read_steady);
        for (int j = 0; j < nt; j++) {
            const bench_test *p = &ts[j];
            if (!p->peer_beside || !p->n_peer || strcmp(p->name, t->name)) continue;
            r->peer_reps = p->n_peer;
            r->peer_beside = j == i;
            r->peer_value = bench_median(p->peer, p->n_peer);
            r->peer_ttft = bench_median(p->peer_ttft, p->n_peer);
            r->peer_tpot = bench_median(p->peer_tpot, p->n_peer);
            r->peer_peak_mb = p->peer_peak_mb;
        }
    }
}

/* tandem / llama.cpp as a speed ratio (above 1: tandem faster) */
static double row_ratio(const bench_row *r)
{
    if (!r->peer_reps || r->value <= 0 || r->peer_value <= 0) return 0;
    return r->kind == 'e' ? r->peer_value / r->value : r->value / r->peer_value;
}

static void write_rows_json(FILE *f, const bench_row *rows, int n)
{
    fprintf(f, "  \"results\": [\n");
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        fprintf(f, "    {\"test\": \"%s\", \"route\": \"%s\", \"prefill_engine\": \"%s\", \"decode_engine\": \"%s\", "
                   "\"reps\": %d, ", r->name, bench_route_name(r->route), r->prefill_engine, r->decode_engine, r->reps);
        if (r->kind == 'e')
            fprintf(f, "\"total_s\": %.4f, \"ttft_s\": %.4f, \"tpot_ms\": %.3f, \"tpot_p50_ms\": %.3f, "
                       "\"tpot_p99_ms\": %.3f, \"tokens_per_s\": %.3f, \"output_tokens_per_s\": %.3f, ",
                    r->value, r->ttft, 1e3 * r->tpot, 1e3 * r->tpot_p50, 1e3 * r->tpot_p99,
                    r->value > 0 ? (r->P + r->G) / r->value : 0, r->value > 0 ? r->G / r->value : 0);
        else
            fprintf(f, "\"tokens_per_s\": %.3f, ", r->value);
        if (r->kind == 'g')
            fprintf(f, "\"tpot_p50_ms\": %.3f, \"tpot_p99_ms\": %.3f, ", 1e3 * r->tpot_p50, 1e3 * r->tpot_p99);
        fprintf(f, "\"peak_rss_mb\": %.1f, \"handoff_ms\": %.4f", r->peak_mb, 1e3 * r->handoff);
        if (r->peer_reps) {
            fprintf(f, ",\n     \"peer\": \"llama.cpp\", \"peer_reps\": %d, \"peer_beside\": %s, \"peer_%s\": %.4f, ",
                    r->peer_reps, r->peer_beside ? "true" : "false", r->kind == 'e' ? "total_s" : "tokens_per_s",
                    r->peer_value);
            if (r->kind == 'e')
                fprintf(f, "\"peer_ttft_s\": %.4f, \"peer_tpot_ms\": %.3f, ", r->peer_ttft, 1e3 * r->peer_tpot);
            fprintf(f, "\"peer_peak_rss_mb\": %.1f, \"ratio\": %.3f", r->peer_peak_mb, row_ratio(r));
        }
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
    fprintf(f, "  ]\n");
}

static void write_rows_md(FILE *f, const bench_row *rows, int n)
{
    int peer = 0;
    for (int i = 0; i < n; i++) peer |= rows[i].peer_reps > 0;
    fprintf(f, "| test | route | tandem | TPOT p50 / p99 | tokens/s | peak RSS | hand-off |%s\n"
               "|---|---|---|---|---|---|---|%s\n", peer ? " llama.cpp | ratio |" : "", peer ? "---|---|" : "");
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        char ours[64], tpot[48] = "-", tps[32], pr[96] = "", ratio[16] = "";
        if (r->kind == 'e') {
            snprintf(ours, sizeof ours, "%.2f s (TTFT %.2f s)", r->value, r->ttft);
            snprintf(tps, sizeof tps, "%.1f", r->value > 0 ? (r->P + r->G) / r->value : 0);
        } else {
            snprintf(ours, sizeof ours, "%.1f t/s", r->value);
            snprintf(tps, sizeof tps, "%.1f", r->value);
        }
        if (r->kind != 'p' && r->kind != 'm') snprintf(tpot, sizeof tpot, "%.1f / %.1f ms", 1e3 * r->tpot_p50, 1e3 * r->tpot_p99);
        if (r->peer_reps) {
            if (r->kind == 'e')
                snprintf(pr, sizeof pr, "%.2f s (TTFT %.2f s), %.0f MiB", r->peer_value, r->peer_ttft, r->peer_peak_mb);
            else snprintf(pr, sizeof pr, "%.1f t/s, %.0f MiB", r->peer_value, r->peer_peak_mb);
            snprintf(ratio, sizeof ratio, "%.2fx", row_ratio(r));
        }
        fprintf(f, "| %s | %s | %s | %s | %s | %.0f MiB | %.3f ms |", r->name, bench_route_name(r->route), ours, tpot,
                tps, r->peak_mb, 1e3 * r->handoff);
        if (peer) fprintf(f, " %s%s | %s |", pr, r->peer_reps && !r->peer_beside ? " *" : "", ratio);
        fputc('\n', f);
    }
    if (peer)
        fprintf(f, "\nRatio: tandem / llama.cpp for rates, llama.cpp / tandem for times (above 1: tandem faster). "
                   "* llama.cpp ran beside the test's first route.\n");
}

/* ---- the command -------------------------------------------------------------------- */

int cmd_bench(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(bench_usage, stdout);
        return 0;
    }
    static bench_opts o;
    memset(&o, 0, sizeof o);
    o.tests = "pp512,tg128,e448+64,e64+448";
    o.routes = "hybrid";
    o.reps = 3;
    o.sweep_gen = 16;
    o.conc_p = 448;
    o.conc_g = 64;
    o.stall_p = 448;
    o.stall_retries = 3;
    o.gap = 1.0;
    cli_gen_init(&o.g);
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--suite")) o.suite = argv[i + 1];
    if (o.suite && !strcmp(o.suite, "issue6")) {
        int n = 0;
        while (suite_issue6[n]) n++;
        if (parse_opts(&o, n, (char **)suite_issue6, 0)) return 2;
    }
    if (parse_opts(&o, argc, argv, 1)) return 2;
    if (!o.model) {
        fputs(bench_usage, stderr);
        return 2;
    }
    if (!o.sweep_reps) o.sweep_reps = o.reps;
    for (int i = 0; i < o.n_sweep; i++)
        if (!o.sweep_r[i]) o.sweep_r[i] = o.sweep_reps;
    tandem_session_opts so = o.g.so; /* engines, threads, --stateful, --exact-tail, -c (cli_opts.c) */
    if (o.peer && strcmp(o.peer, "llama.cpp") != 0) {
        fprintf(stderr, "tandem bench: unknown peer '%s' (known: llama.cpp)\n", o.peer);
        return 2;
    }
    if (o.peer && !o.peer_model) {
        fprintf(stderr, "tandem bench: --peer needs --peer-model F.gguf\n");
        return 2;
    }
    const char *home = getenv("HOME") ? getenv("HOME") : "";
    char pbin[1024];
    if (o.peer && !o.peer_bin) {
        snprintf(pbin, sizeof pbin, "%s/.cache/tandem-peers/llbench", home);
        o.peer_bin = pbin;
    }
    if (o.peer && !getenv("LLB_BACKEND_DIR")) {
        char d[1024];
        snprintf(d, sizeof d, "%s/.cache/tandem-peers/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64", home);
        setenv("LLB_BACKEND_DIR", d, 1);
    }
    static bench_test ts[MAX_TESTS];
    int nt = 0;
    if (make_tests(&o, ts, &nt)) return 2;

    tandem_status st;
    tandem_model *m;
    if (tandem_model_open(&m, o.model, &st) != 0) {
        fprintf(stderr, "tandem bench: %s\n", st.msg);
        return 1;
    }
    tandem_model_info info;
    tandem_model_get_info(m, &info);
    /* every scenario's context, checked before anything runs */
    tandem_session_opts so_tests = so, so_sweep = so, so_conc = so, so_stall = so;
    /* one request at a time in the tests and the sweep (as tandem run); the stall's
     * streams plus its prompt, and the largest client count, decode at once */
    so_tests.max_seqs = so_sweep.max_seqs = 1;
    for (int i = 0; i < o.n_conc && !so.max_seqs; i++)
        if (o.conc[i] > so_conc.max_seqs) so_conc.max_seqs = o.conc[i];
    if (!so.max_seqs) so_stall.max_seqs = o.stall + 1;
    char what[96];
    int need = 0, bad = 0;
    for (int i = 0; i < nt; i++) {
        int n = ts[i].kind == 'p' ? ts[i].P + 1 : ts[i].kind == 'g' ? ts[i].G + 2 : ts[i].P + ts[i].G;
        if (n > need) {
            need = n;
            snprintf(what, sizeof what, "test %.31s", ts[i].name);
        }
    }
    bad |= need && ctx_for(what, need, so.max_ctx, &info, &so_tests.max_ctx);
    for (int i = 0, mx = 0; i < o.n_sweep; i++)
        if (o.sweep[i] > mx) {
            mx = o.sweep[i];
            snprintf(what, sizeof what, "--sweep %d (with --sweep-gen %d)", mx, o.sweep_gen);
            need = mx + o.sweep_gen;
        }
    bad |= o.n_sweep && ctx_for(what, need, so.max_ctx, &info, &so_sweep.max_ctx);
    snprintf(what, sizeof what, "--conc %d+%d", o.conc_p, o.conc_g);
    bad |= o.n_conc && ctx_for(what, o.conc_p + o.conc_g, so.max_ctx, &info, &so_conc.max_ctx);
    snprintf(what, sizeof what, "--stall-prompt %d", o.stall_p);
    bad |= o.stall && ctx_for(what, o.stall_p + 1, so.max_ctx, &info, &so_stall.max_ctx);
    if (bad) {
        tandem_model_free(m);
        return 2;
    }

    static bench_row rows[MAX_TESTS];
    static bench_sweep_point sweep[BENCH_MAX_POINTS];
    bench_conc_point conc[BENCH_MAX_CLIENTS];
    bench_stall_res stall = {0};
    static bench_ceil ceil;
    ceil.decode_bytes = info.decode_bytes_per_token;
    ceil.prefill_ops = info.prefill_ops_per_token;
    int ceil_threads = ceil_threads_of(&so);
    if (o.ceilings && bench_ceilings_measure(&ceil, ceil_threads, 0)) {
        tandem_model_free(m);
        return 1;
    }
    int rc = run_tests(m, &o, so_tests, ts, nt);
    make_rows(ts, nt, rows);
    /* scenarios: JSON members into a memory stream, markdown appended below the table */
    char *scen = NULL, *scen_md = NULL, *acc = NULL, *acc_md = NULL;
    size_t scen_len = 0, scen_md_len = 0, acc_len = 0, acc_md_len = 0;
    FILE *sj = open_memstream(&scen, &scen_len), *sm = open_memstream(&scen_md, &scen_md_len);
    so_sweep.route = so_conc.route = so_stall.route = TANDEM_ROUTE_AUTO;
    if (rc == 0 && o.n_handoff) rc = bench_handoff(m, o.handoff, o.n_handoff, rows, nt, sj, sm);
    if (rc == 0 && o.n_sweep) rc = bench_sweep(m, &so_sweep, o.sweep, o.sweep_r, o.n_sweep, o.sweep_gen, sj, sm, sweep);
    if (rc == 0 && o.n_conc)
        rc = bench_concurrency(m, &so_conc, o.conc, o.n_conc, o.conc_p, o.conc_g, o.gap, sj, sm, conc);
    if (rc == 0 && o.stall)
        rc = bench_stall(m, &so_stall, o.stall, o.stall_p, o.reps, o.stall_retries, o.peer ? o.peer_bin : NULL,
                         o.peer_model, sj, sm, &stall);
    if (rc == 0 && o.tok_file) rc = bench_tokenizer(m, o.tok_file, sj, sm);
    if (rc == 0 && o.ceilings) {
        rc = bench_ceilings_measure(&ceil, ceil_threads, 1);
        bench_ceilings_json(sj, &ceil, rows, nt, info.prefill_encoding);
        if (nt) bench_ceilings_md(sm, &ceil, rows, nt, info.prefill_encoding);
    }
    fclose(sj);
    fclose(sm);
    int threads = so.n_threads;
    bench_report rep = {.model = o.model, .threads = threads, .rows = rows, .n_rows = nt,
                        .sweep = o.n_sweep ? sweep : NULL, .n_sweep = o.n_sweep, .conc = o.n_conc ? conc : NULL,
                        .n_conc = o.n_conc, .conc_P = o.conc_p, .conc_G = o.conc_g, .conc_gap = o.gap,
                        .stall = o.stall ? &stall : NULL};
    int multi_route = 0;
    for (int i = 1; i < nt; i++) multi_route |= rows[i].route != rows[0].route;
    if (rc == 0 && (multi_route || o.n_sweep || o.stall || o.suite)) {
        FILE *aj = open_memstream(&acc, &acc_len), *am = open_memstream(&acc_md, &acc_md_len);
        bench_acceptance(&rep, aj, am);
        fclose(aj);
        fclose(am);
    }
    if (rc == 0) {
        FILE *jf = o.json ? fopen(o.json, "w") : stdout;
        FILE *mf = o.md ? fopen(o.md, "w") : NULL;
        FILE *sf = o.svg ? fopen(o.svg, "w") : NULL;
        if (!jf || (o.md && !mf) || (o.svg && !sf)) {
            fprintf(stderr, "tandem bench: %s: cannot write\n", !jf ? o.json : o.md && !mf ? o.md : o.svg);
            rc = 1;
        }
        if (jf) {
            fprintf(jf, "{\n  \"model\": \"%s\",\n  \"threads\": %d,\n", o.model, threads);
            if (so.lookup) fprintf(jf, "  \"lookup\": %d,\n", so.lookup); /* prompt lookup's drafts a step */
            fprintf(jf, "%s%s", scen ? scen : "", acc ? acc : "");
            write_rows_json(jf, rows, nt);
            fprintf(jf, "}\n");
            if (o.json) fclose(jf);
        }
        if (mf) {
            if (nt) write_rows_md(mf, rows, nt);
            fputs(scen_md ? scen_md : "", mf);
            fputs(acc_md ? acc_md : "", mf);
            fclose(mf);
        }
        if (sf) {
            bench_svg(sf, &rep);
            fclose(sf);
        }
    }
    bench_stall_free(&stall);
    free(scen);
    free(scen_md);
    free(acc);
    free(acc_md);
    tandem_model_free(m);
    return rc != 0;
}
