/* cli/cmd_calibrate.c: `tandem calibrate MODEL`: measure this machine's
 * engines along every route, fit the router's cost model and cache it
 * (runtime/router.h) where every later session on this machine and model
 * finds it. Like the other measuring tools it calls the runtime directly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "runtime/router.h"
#include "runtime/rt_model.h"
#include "runtime/session.h"

static const char calibrate_usage[] =
    "usage: tandem calibrate MODEL [options]\n"
    "\n"
    "Measure prefill, hand-off and decode times of every route on this machine (requests\n"
    "with forced routes, decode steps by batch and context, each side on its own cores),\n"
    "fit the router's cost model and cache it in $XDG_CACHE_HOME/tandem/ (default\n"
    "~/.cache/tandem/), keyed by CPU, threads, engines, encodings and the model. Sessions\n"
    "with the same key then route by it (see --explain of tandem run); without a cache\n"
    "the router falls back to a rule by prompt length.\n"
    "\n"
    "  -t, --threads N        threads (default: every cpu this process may use; must match the sessions that use it)\n"
    "      --prefill-threads N  cores for the prefill side (default: half)\n"
    "      --prefill ENGINE, --decode ENGINE   engines (default: the best)\n"
    "      --quick            fewer prompt lengths, one repetition\n"
    "      --reps N           repetitions per point (default 3, quick 1)\n"
    "      --gen N            tokens generated per request, 2..1024 (default 16, quick 8)\n"
    "      --lens LIST        prompt lengths (default 16,64,128,256,384,512,1024,2048)\n"
    "  -o, --out FILE         write the cache file here instead of the cache directory\n";

static void progress(void *ud, const char *line)
{
    (void)ud;
    fprintf(stderr, "calibrate: %s\n", line);
}

static int parse_lens(const char *s, int *out, int max)
{
    int n = 0;
    while (s && *s && n < max) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 1 << 20) return -1;
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

static void print_summary(const tm_router_costs *c, int gen)
{
    static const int ns[] = {16, 64, 256, 1024, 2048};
    static const tandem_route rs[3] = {TANDEM_ROUTE_HYBRID, TANDEM_ROUTE_PREFILL_ONLY, TANDEM_ROUTE_DECODE_ONLY};
    static const char *names[4] = {"auto", "hybrid", "prefill-only", "decode-only"};
    printf("predicted end-to-end seconds (%d new tokens, idle session):\n", gen);
    printf("%8s %12s %12s %12s   %s\n", "prompt", "hybrid", "prefill-only", "decode-only", "pick");
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        tm_router_pred p;
        tm_router_predict(c, ns[i], gen, NULL, &p);
        printf("%8d", ns[i]);
        for (int r = 0; r < 3; r++) {
            if (c->routes & (1u << rs[r])) printf(" %12.4f", p.own[rs[r]]);
            else printf(" %12s", "n/a");
        }
        printf("   %s\n", names[p.pick]);
    }
    for (int r = 0; r < 3; r++)
        if (c->routes & (1u << rs[r]))
            printf("time per token, %-12s %.3f ms + %.4f ms per 1000 context tokens\n", names[rs[r]],
                   c->tpot[rs[r]][0] * 1e3, c->tpot[rs[r]][1] * 1e3);
    printf("decode-engine step by batch: %.3f ms + %.3f ms per extra sequence + %.4f ms per 1000 context tokens\n",
           c->step[0] * 1e3, c->step[1] * 1e3, c->step[2] * 1e3);
    printf("hand-off: %.3f ms + %.3f us per token; own cores only: prefill x%.2f, decode x%.2f\n",
           c->handoff[0] * 1e3, c->handoff[1] * 1e6, c->lend_pre, c->lend_dec);
}

int cmd_calibrate(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(calibrate_usage, stdout);
        return 0;
    }
    const char *model = NULL, *out = NULL;
    tandem_session_opts so;
    tandem_session_opts_default(&so);
    tm_router_cal_opts co = {.progress = progress};
    int lens[32];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDV() do { if (!v) { fprintf(stderr, "tandem calibrate: %s needs a value\n", a); return 2; } i++; } while (0)
        if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { NEEDV(); so.n_threads = atoi(v); }
        else if (!strcmp(a, "--prefill-threads")) { NEEDV(); so.prefill_threads = atoi(v); }
        else if (!strcmp(a, "--prefill")) { NEEDV(); so.prefill_engine = v; }
        else if (!strcmp(a, "--decode")) { NEEDV(); so.decode_engine = v; }
        else if (!strcmp(a, "--quick")) co.quick = 1;
        else if (!strcmp(a, "--reps")) { NEEDV(); co.reps = atoi(v); }
        else if (!strcmp(a, "--gen")) { NEEDV(); co.gen = atoi(v); }
        else if (!strcmp(a, "--lens")) {
            NEEDV();
            if ((co.n_lens = parse_lens(v, lens, 32)) <= 0) {
                fprintf(stderr, "tandem calibrate: --lens: '%s' is not a list of positive lengths\n", v);
                return 2;
            }
            co.lens = lens;
        }
        else if (!strcmp(a, "-o") || !strcmp(a, "--out")) { NEEDV(); out = v; }
        else if (a[0] == '-') { fprintf(stderr, "tandem calibrate: unknown option '%s' (see --help)\n", a); return 2; }
        else if (!model) model = a;
        else { fprintf(stderr, "tandem calibrate: unexpected argument '%s'\n", a); return 2; }
#undef NEEDV
    }
    if (!model) {
        fputs(calibrate_usage, stderr);
        return 2;
    }
    if (co.reps < 0 || co.reps > 16 || co.gen < 0 || co.gen == 1 || co.gen > 1024) {
        fprintf(stderr, "tandem calibrate: --reps must be 1..16 and --gen 2..1024\n");
        return 2;
    }
    tm_err err = {0};
    tm_rt_model *rm = NULL;
    tm_session *s = NULL;
    tm_router_costs c;
    tm_router_key k;
    char path[4096];
    int rc = tm_rt_model_open(&rm, model, &err);
    if (rc == TM_OK) rc = tm_session_new(&s, rm, &so, &err);
    if (rc == TM_OK) rc = tm_router_key_of(s, &k, &err);
    if (rc == TM_OK) {
        if (out) snprintf(path, sizeof path, "%s", out);
        else rc = tm_router_cache_path(path, sizeof path, NULL, &k, &err);
    }
    if (rc == TM_OK) rc = tm_router_calibrate(s, &co, &c, &err);
    if (rc == TM_OK) rc = tm_router_write(path, &k, &c, &err);
    if (rc == TM_OK) {
        print_summary(&c, co.gen > 0 ? co.gen : co.quick ? 8 : 16);
        printf("key: %s, %d threads (%d prefill), %s/%s, %s/%s, %s, build %s\n", k.cpu, k.threads,
               k.prefill_threads, k.prefill_engine, k.decode_engine, k.prefill_enc, k.decode_enc, k.model, k.build);
        printf("wrote %s\n", path);
    }
    tm_session_free(s);
    tm_rt_model_free(rm);
    if (rc != TM_OK) {
        fprintf(stderr, "tandem calibrate: %s\n", err.msg);
        return 1;
    }
    return 0;
}
