/* cli/cmd_bench.c: `tandem bench`: speed, measured through the public API
 * exactly as users get it, side by side with llama.cpp.
 *
 * Tests (llama-bench's definitions):
 *   ppN     prefill N random token ids (BOS first); tokens/s = N / prefill time
 *   tgN     generate N tokens after a 1-token prompt; tokens/s = N / decode time
 *   eP+G    end to end: P prompt + G generated tokens: TTFT, TPOT, total
 * Each test runs once as a warm-up, then --reps times; medians are reported.
 * With --peer, llama.cpp's llbench (../shared/peers) runs the same tests
 * with the same thread count, interleaved with ours rep by rep (A B A B),
 * and the ratio tandem / llama.cpp is printed.
 * Output: a JSON document on stdout (or --json FILE), plus --md FILE (a
 * markdown table) and --svg FILE (a bar chart). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/bench.h"
#include "cli/cli.h"
#include "tandem.h"

#define MAX_TESTS 32
#define MAX_REPS 32

typedef struct bench_test {
    char name[32];
    int kind;          /* 'p' pp, 'g' tg, 'e' e2e */
    int P, G;
    int route;         /* tandem_route */
    const char *engines[2];      /* prefill and decode engine of the last run */
    double tps[MAX_REPS];        /* tokens/s (pp, tg) or total seconds (e2e) */
    double ttft[MAX_REPS], tpot[MAX_REPS], handoff[MAX_REPS];
    int n;
    double peer[MAX_REPS];       /* the same metric from llama.cpp */
    double peer_ttft[MAX_REPS];
    int n_peer;
} bench_test;

static const char bench_usage[] =
    "usage: tandem bench MODEL [options]\n\n"
    "  --tests LIST        comma-separated: ppN, tgN, eP+G (default pp512,tg128,e448+64,e64+448)\n"
    "  --routes LIST       hybrid,prefill-only,decode-only,auto (default hybrid)\n"
    "  --reps N            timed repetitions per test (default 3)\n"
    "  -t, --threads N, --prefill ENGINE, --decode ENGINE, --stateful, --exact-tail,\n"
    "  --prefill-threads N   as for tandem run\n"
    "  --peer llama.cpp    also run llama.cpp's llbench on --peer-model, interleaved\n"
    "  --peer-model F.gguf the peer's model (same shape; see ../shared/peers)\n"
    "  --peer-bin PATH     llbench (default $HOME/.cache/tandem-peers/llbench)\n"
    "  --json F, --md F, --svg F   write results (JSON goes to stdout by default)\n"
    "scenarios (after the tests):\n"
    "  --handoff LIST      KV hand-off cost at these context lengths (e.g. 512,2048,8192,32768)\n"
    "  --sweep LIST        prompt-length sweep over every route and the router (e.g. 16,64,256,1024)\n"
    "  --sweep-gen N       tokens generated per sweep point (default 16)\n"
    "  --concurrency LIST  client counts (e.g. 1,2,4,8); --conc P+G (default 448+64), --gap S (default 1.0)\n"
    "  --stall N           N running streams, then a --stall-prompt P (default 448) token prompt arrives\n"
    "                      (--reps runs; with --peer, llama.cpp too: llstall beside --peer-bin, tools/llstall.sh)\n"
    "  --no-lend           never lend idle cores to the other side\n"
    "  --tok-file F        tokenizer speed: encode F (one thread), MB/s\n";

static int parse_test(const char *s, bench_test *t)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", s);
    if (sscanf(s, "pp%d", &t->P) == 1 && t->P > 0) t->kind = 'p';
    else if (sscanf(s, "tg%d", &t->G) == 1 && t->G > 0) t->kind = 'g';
    else if ((sscanf(s, "e%d+%d", &t->P, &t->G) == 2 || sscanf(s, "e2e%d+%d", &t->P, &t->G) == 2) && t->P > 0 && t->G > 0)
        t->kind = 'e';
    else return -1;
    return 0;
}

static const char *route_str(int r)
{
    static const char *names[] = {"auto", "hybrid", "prefill-only", "decode-only"};
    return r >= 0 && r < 4 ? names[r] : "?";
}

/* One run of test t; returns 0 on success. */
static int run_once(tandem_session *s, int V, bench_test *t, int rep, unsigned *seed, tandem_status *st)
{
    int P = t->kind == 'g' ? 1 : t->P;
    int G = t->kind == 'p' ? 1 : t->kind == 'g' ? t->G + 1 : t->G;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)P);
    if (!ids) return -1;
    for (int i = 0; i < P; i++) ids[i] = (int32_t)(rand_r(seed) % (unsigned)V);
    tandem_stats stats;
    double total = bench_generate(s, ids, P, G, &stats, st);
    free(ids);
    if (total < 0) return -1;
    if (rep < 0) return 0;
    if (t->kind == 'p') t->tps[rep] = P / stats.t_prefill;
    else if (t->kind == 'g') t->tps[rep] = (stats.n_generated - 1) / stats.t_decode;
    else t->tps[rep] = total;
    t->ttft[rep] = stats.ttft;
    t->tpot[rep] = stats.n_generated > 1 ? stats.t_decode / (stats.n_generated - 1) : 0;
    t->handoff[rep] = stats.t_handoff;
    t->engines[0] = stats.prefill_engine;
    t->engines[1] = stats.decode_engine;
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
        double ttft, total;
        if ((q = strstr(line, "TTFT ms: min")) && sscanf(q, "TTFT ms: min %*f median %lf", &ttft) == 1 &&
            (q = strstr(line, "total ms: min")) && sscanf(q, "total ms: min %*f median %lf", &total) == 1) {
            t->peer[pr->rep] = total / 1e3;
            t->peer_ttft[pr->rep] = ttft / 1e3;
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
    int found = bench_peer_run(cmd, parse_peer, &pr);
    if (found == 0) t->n_peer = rep + 1;
    return found;
}

static void write_json(FILE *f, const char *model, int threads, const char *scen, bench_test *ts, int nt, int has_peer)
{
    fprintf(f, "{\n  \"model\": \"%s\",\n  \"threads\": %d,\n%s  \"results\": [\n", model, threads, scen ? scen : "");
    for (int i = 0; i < nt; i++) {
        bench_test *t = &ts[i];
        double m = bench_median(t->tps, t->n);
        fprintf(f, "    {\"test\": \"%s\", \"route\": \"%s\", \"prefill_engine\": \"%s\", \"decode_engine\": \"%s\", \"reps\": %d, ",
                t->name, route_str(t->route), t->engines[0] ? t->engines[0] : "?", t->engines[1] ? t->engines[1] : "?", t->n);
        if (t->kind == 'e')
            fprintf(f, "\"total_s\": %.4f, \"ttft_s\": %.4f, \"tpot_ms\": %.3f, \"handoff_ms\": %.4f", m,
                    bench_median(t->ttft, t->n), 1e3 * bench_median(t->tpot, t->n), 1e3 * bench_median(t->handoff, t->n));
        else
            fprintf(f, "\"tokens_per_s\": %.3f, \"handoff_ms\": %.4f", m, 1e3 * bench_median(t->handoff, t->n));
        if (has_peer && t->n_peer) {
            double pm = bench_median(t->peer, t->n_peer);
            fprintf(f, ", \"peer\": \"llama.cpp\", \"peer_%s\": %.4f, \"ratio\": %.3f", t->kind == 'e' ? "total_s" : "tokens_per_s",
                    pm, t->kind == 'e' ? pm / m : m / pm);
        }
        fprintf(f, "}%s\n", i + 1 < nt ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
}

static void write_md(FILE *f, bench_test *ts, int nt, int has_peer)
{
    fprintf(f, "| test | route | tandem | %s ratio | hand-off ms |\n|---|---|---|---%s|---|\n",
            has_peer ? "llama.cpp | " : "", has_peer ? "|---" : "");
    for (int i = 0; i < nt; i++) {
        bench_test *t = &ts[i];
        double m = bench_median(t->tps, t->n);
        char ours[64], peer[64] = "", ratio[32] = "";
        if (t->kind == 'e') snprintf(ours, sizeof ours, "%.2f s (TTFT %.2f s)", m, bench_median(t->ttft, t->n));
        else snprintf(ours, sizeof ours, "%.1f t/s", m);
        if (has_peer && t->n_peer) {
            double pm = bench_median(t->peer, t->n_peer);
            if (t->kind == 'e') snprintf(peer, sizeof peer, "%.2f s (TTFT %.2f s)", pm, bench_median(t->peer_ttft, t->n_peer));
            else snprintf(peer, sizeof peer, "%.1f t/s", pm);
            snprintf(ratio, sizeof ratio, "%.2fx", t->kind == 'e' ? pm / m : m / pm);
        }
        if (has_peer)
            fprintf(f, "| %s | %s | %s | %s | %s | %.3f |\n", t->name, route_str(t->route), ours, peer, ratio,
                    1e3 * bench_median(t->handoff, t->n));
        else
            fprintf(f, "| %s | %s | %s | %s | %.3f |\n", t->name, route_str(t->route), ours, ratio,
                    1e3 * bench_median(t->handoff, t->n));
    }
}

/* A horizontal bar chart: for each test, tandem vs llama.cpp (speed: higher is better). */
static void write_svg(FILE *f, bench_test *ts, int nt, int has_peer)
{
    int rowh = has_peer ? 44 : 26, W = 760, H = 40 + rowh * nt + 30;
    double mx = 0;
    for (int i = 0; i < nt; i++) {
        double m = ts[i].kind == 'e' ? (ts[i].P + ts[i].G) / bench_median(ts[i].tps, ts[i].n) : bench_median(ts[i].tps, ts[i].n);
        if (m > mx) mx = m;
        if (has_peer && ts[i].n_peer) {
            double p = ts[i].kind == 'e' ? (ts[i].P + ts[i].G) / bench_median(ts[i].peer, ts[i].n_peer) : bench_median(ts[i].peer, ts[i].n_peer);
            if (p > mx) mx = p;
        }
    }
    if (mx <= 0) mx = 1;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
               "<text x=\"10\" y=\"20\" font-size=\"14\">tokens/s (end-to-end: (P+G)/total) - higher is better</text>\n", W, H);
    for (int i = 0; i < nt; i++) {
        int y = 36 + i * rowh;
        double m = ts[i].kind == 'e' ? (ts[i].P + ts[i].G) / bench_median(ts[i].tps, ts[i].n) : bench_median(ts[i].tps, ts[i].n);
        fprintf(f, "<text x=\"10\" y=\"%d\">%s %s</text>\n", y + 14, ts[i].name, route_str(ts[i].route));
        fprintf(f, "<rect x=\"200\" y=\"%d\" width=\"%.1f\" height=\"18\" fill=\"#2b7bb9\"/><text x=\"%.1f\" y=\"%d\">tandem %.1f</text>\n",
                y, 440 * m / mx, 205 + 440 * m / mx, y + 14, m);
        if (has_peer && ts[i].n_peer) {
            double p = ts[i].kind == 'e' ? (ts[i].P + ts[i].G) / bench_median(ts[i].peer, ts[i].n_peer) : bench_median(ts[i].peer, ts[i].n_peer);
            fprintf(f, "<rect x=\"200\" y=\"%d\" width=\"%.1f\" height=\"18\" fill=\"#d95f02\"/><text x=\"%.1f\" y=\"%d\">llama.cpp %.1f</text>\n",
                    y + 20, 440 * p / mx, 205 + 440 * p / mx, y + 34, p);
        }
    }
    fprintf(f, "</svg>\n");
}

int cmd_bench(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(bench_usage, stdout);
        return 0;
    }
    const char *model = NULL, *tests = "pp512,tg128,e448+64,e64+448", *routes = "hybrid";
    const char *peer = NULL, *peer_model = NULL, *peer_bin = NULL, *json = NULL, *md = NULL, *svg = NULL;
    int reps = 3, sweep_gen = 16, conc_p = 448, conc_g = 64, stall = 0, stall_p = 448;
    const char *handoff = NULL, *sweep = NULL, *conc = NULL, *tok_file = NULL;
    double gap = 1.0;
    cli_gen g;
    cli_gen_init(&g);
    int no_lend = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int k = cli_gen_parse(&g, "bench", argc, argv, &i);
        if (k < 0) return 2;
        if (k > 0) continue;
#define NEEDV() do { if (!v) { fprintf(stderr, "tandem bench: %s needs a value\n", a); return 2; } i++; } while (0)
        if (!strcmp(a, "--tests")) { NEEDV(); tests = v; }
        else if (!strcmp(a, "--routes")) { NEEDV(); routes = v; }
        else if (!strcmp(a, "--reps")) { NEEDV(); reps = atoi(v); }
        else if (!strcmp(a, "--peer")) { NEEDV(); peer = v; }
        else if (!strcmp(a, "--peer-model")) { NEEDV(); peer_model = v; }
        else if (!strcmp(a, "--peer-bin")) { NEEDV(); peer_bin = v; }
        else if (!strcmp(a, "--json")) { NEEDV(); json = v; }
        else if (!strcmp(a, "--md")) { NEEDV(); md = v; }
        else if (!strcmp(a, "--svg")) { NEEDV(); svg = v; }
        else if (!strcmp(a, "--handoff")) { NEEDV(); handoff = v; }
        else if (!strcmp(a, "--sweep")) { NEEDV(); sweep = v; }
        else if (!strcmp(a, "--sweep-gen")) { NEEDV(); sweep_gen = atoi(v); }
        else if (!strcmp(a, "--concurrency")) { NEEDV(); conc = v; }
        else if (!strcmp(a, "--conc")) { NEEDV(); if (sscanf(v, "%d+%d", &conc_p, &conc_g) != 2) return 2; }
        else if (!strcmp(a, "--gap")) { NEEDV(); gap = strtod(v, NULL); }
        else if (!strcmp(a, "--stall")) { NEEDV(); stall = atoi(v); }
        else if (!strcmp(a, "--stall-prompt")) { NEEDV(); stall_p = atoi(v); }
        else if (!strcmp(a, "--no-lend")) no_lend = 1;
        else if (!strcmp(a, "--tok-file")) { NEEDV(); tok_file = v; }
        else if (a[0] == '-') { fprintf(stderr, "tandem bench: unknown option '%s'\n", a); return 2; }
        else if (!model) model = a;
        else { fprintf(stderr, "tandem bench: unexpected argument '%s'\n", a); return 2; }
#undef NEEDV
    }
    if (!model) { fputs(bench_usage, stderr); return 2; }
    tandem_session_opts so = g.so; /* engines, threads, --stateful, --exact-tail (cli_opts.c) */
    so.no_lend = no_lend;
    if (reps < 1 || reps > MAX_REPS) { fprintf(stderr, "tandem bench: --reps must be 1..%d\n", MAX_REPS); return 2; }
    if (peer && strcmp(peer, "llama.cpp") != 0) { fprintf(stderr, "tandem bench: unknown peer '%s'\n", peer); return 2; }
    if (peer && !peer_model) { fprintf(stderr, "tandem bench: --peer needs --peer-model F.gguf\n"); return 2; }
    char pbin[1024];
    if (peer && !peer_bin) {
        snprintf(pbin, sizeof pbin, "%s/.cache/tandem-peers/llbench", getenv("HOME") ? getenv("HOME") : "");
        peer_bin = pbin;
    }
    if (peer && !getenv("LLB_BACKEND_DIR")) {
        char d[1024];
        snprintf(d, sizeof d, "%s/.cache/tandem-peers/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64",
                 getenv("HOME") ? getenv("HOME") : "");
        setenv("LLB_BACKEND_DIR", d, 1);
    }

    bench_test ts[MAX_TESTS];
    int nt = 0;
    char tbuf[1024], rbuf[256];
    snprintf(rbuf, sizeof rbuf, "%s", routes);
    for (char *rs = strtok(rbuf, ","); rs; rs = strtok(NULL, ",")) {
        int route;
        if (cli_parse_route(rs, &route)) { fprintf(stderr, "tandem bench: unknown route '%s'\n", rs); return 2; }
        snprintf(tbuf, sizeof tbuf, "%s", tests);
        char *save = NULL;
        for (char *tk = strtok_r(tbuf, ",", &save); tk; tk = strtok_r(NULL, ",", &save)) {
            if (nt == MAX_TESTS) break;
            if (parse_test(tk, &ts[nt])) { fprintf(stderr, "tandem bench: bad test '%s'\n", tk); return 2; }
            ts[nt++].route = route;
        }
    }

    tandem_status st;
    tandem_model *m;
    if (tandem_model_open(&m, model, &st) != 0) { fprintf(stderr, "tandem bench: %s\n", st.msg); return 1; }
    tandem_model_info info;
    tandem_model_get_info(m, &info);
    int threads = so.n_threads;
    tandem_session *sess[4] = {0};
    int rc = 0;
    unsigned seed = 1234;
    for (int i = 0; i < nt && rc == 0; i++) {
        bench_test *t = &ts[i];
        if (!sess[t->route]) {
            so.route = (tandem_route)t->route;
            if (tandem_session_new(&sess[t->route], m, &so, &st) != 0) {
                fprintf(stderr, "tandem bench: %s\n", st.msg);
                rc = 1;
                break;
            }
        }
        fprintf(stderr, "bench %s %s: warm-up", t->name, route_str(t->route));
        if ((rc = run_once(sess[t->route], info.vocab, t, -1, &seed, &st))) break;
        for (int k = 0; k < reps; k++) {
            if ((rc = run_once(sess[t->route], info.vocab, t, k, &seed, &st))) break;
            fprintf(stderr, " | tandem %.2f", t->tps[k]);
            if (peer) {
                if (run_peer(peer_bin, peer_model, threads > 0 ? threads : 2, t, k) == 0)
                    fprintf(stderr, " llama.cpp %.2f", t->peer[k]);
                else fprintf(stderr, " llama.cpp failed");
            }
        }
        fprintf(stderr, "\n");
    }
    if (rc != 0 && st.msg[0]) fprintf(stderr, "tandem bench: %s\n", st.msg);
    /* scenarios: JSON members into a memory stream, markdown appended below the table */
    char *scen = NULL, *scen_md = NULL;
    size_t scen_len = 0, scen_md_len = 0;
    FILE *sj = open_memstream(&scen, &scen_len), *sm = open_memstream(&scen_md, &scen_md_len);
    double pp_rate = 0;
    for (int i = 0; i < nt; i++)
        if (ts[i].kind == 'p' && ts[i].n) pp_rate = bench_median(ts[i].tps, ts[i].n);
    so.route = TANDEM_ROUTE_AUTO;
    if (rc == 0 && handoff) rc = bench_handoff(m, handoff, pp_rate, sj, sm);
    if (rc == 0 && sweep) rc = bench_sweep(m, &so, sweep, sweep_gen, reps, sj, sm);
    if (rc == 0 && conc) rc = bench_concurrency(m, &so, conc, conc_p, conc_g, gap, sj, sm);
    if (rc == 0 && stall) rc = bench_stall(m, &so, stall, stall_p, reps, peer ? peer_bin : NULL, peer_model, sj, sm);
    if (rc == 0 && tok_file) rc = bench_tokenizer(m, tok_file, sj, sm);
    fclose(sj);
    fclose(sm);
    if (rc == 0) {
        FILE *jf = json ? fopen(json, "w") : stdout;
        if (jf) {
            write_json(jf, model, threads, scen, ts, nt, peer != NULL);
            if (json) fclose(jf);
        }
        FILE *mf = md ? fopen(md, "w") : NULL;
        if (mf) { if (nt) write_md(mf, ts, nt, peer != NULL); fputs(scen_md ? scen_md : "", mf); fclose(mf); }
        FILE *sf = svg ? fopen(svg, "w") : NULL;
        if (sf) { write_svg(sf, ts, nt, peer != NULL); fclose(sf); }
    }
    for (int r = 0; r < 4; r++) tandem_session_free(sess[r]);
    free(scen);
    free(scen_md);
    tandem_model_free(m);
    return rc != 0;
}
