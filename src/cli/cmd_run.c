/* cli/cmd_run.c: `tandem run MODEL -p TEXT`: generate and stream text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "tandem.h"

static const char run_usage[] =
    "usage: tandem run MODEL -p TEXT [options]\n"
    "\n"
    "Generate text from MODEL (a .tdm package or a Hugging Face directory) and stream it\n"
    "to stdout; prompt and generation speed go to stderr at the end.\n"
    "\n"
    "  -p, --prompt TEXT      the prompt (encoded with the model's special tokens)\n"
    "  -f, --file F           read the prompt from a file\n"
    "  -n, --n-predict N      new tokens to generate (default 128)\n"
    "      --temp T           temperature; 0 = greedy (default: the model's, else 1)\n"
    "      --top-k K          keep the K most likely tokens (0 = off)\n"
    "      --top-p P          nucleus sampling (1 = off)\n"
    "      --min-p P          drop tokens below P x the top probability (0 = off)\n"
    "      --repeat-penalty R repetition penalty (1 = off)\n"
    "      --presence-penalty X, --frequency-penalty X\n"
    "      --seed S           sampling seed (default 0)\n"
    "      --stop S           stop string (repeatable)\n"
    "      --ignore-eos       keep generating past end-of-sequence tokens\n"
    "      --prefill ENGINE   prefill engine (see tandem devices; default: the best)\n"
    "      --decode ENGINE    decode engine (default: the best)\n"
    "      --route R          auto | hybrid | prefill-only | decode-only (default auto)\n"
    "      --stateful         prefill writes KV straight into decode pages (default: stateless + bridge)\n"
    "      --explain          log the routing decision\n"
    "  -t, --threads N        threads (default: all cores)\n"
    "  -c, --ctx N            context length (default: the model's, at most 4096)\n";

static int on_text(void *ud, const char *piece, size_t len, int32_t token)
{
    (void)ud;
    (void)token;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    return 0;
}

int cli_parse_route(const char *s, int *route)
{
    if (strcmp(s, "auto") == 0) *route = TANDEM_ROUTE_AUTO;
    else if (strcmp(s, "hybrid") == 0) *route = TANDEM_ROUTE_HYBRID;
    else if (strcmp(s, "prefill-only") == 0 || strcmp(s, "prefill") == 0) *route = TANDEM_ROUTE_PREFILL_ONLY;
    else if (strcmp(s, "decode-only") == 0 || strcmp(s, "decode") == 0) *route = TANDEM_ROUTE_DECODE_ONLY;
    else return -1;
    return 0;
}

int cmd_run(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(run_usage, stdout);
        return 0;
    }
    const char *model = NULL, *prompt = NULL, *file = NULL;
    const char *stops[17] = {0};
    int n_stops = 0;
    tandem_request r;
    tandem_request_default(&r);
    int temp_set = 0;
    tandem_session_opts so;
    tandem_session_opts_default(&so);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDV() do { if (!v) { fprintf(stderr, "tandem run: %s needs a value\n", a); return 2; } i++; } while (0)
        if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { NEEDV(); prompt = v; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { NEEDV(); file = v; }
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) { NEEDV(); r.max_tokens = atoi(v); }
        else if (!strcmp(a, "--temp")) { NEEDV(); r.temperature = strtof(v, NULL); temp_set = 1; }
        else if (!strcmp(a, "--top-k")) { NEEDV(); r.top_k = atoi(v); }
        else if (!strcmp(a, "--top-p")) { NEEDV(); r.top_p = strtof(v, NULL); }
        else if (!strcmp(a, "--min-p")) { NEEDV(); r.min_p = strtof(v, NULL); }
        else if (!strcmp(a, "--repeat-penalty")) { NEEDV(); r.repetition_penalty = strtof(v, NULL); }
        else if (!strcmp(a, "--presence-penalty")) { NEEDV(); r.presence_penalty = strtof(v, NULL); }
        else if (!strcmp(a, "--frequency-penalty")) { NEEDV(); r.frequency_penalty = strtof(v, NULL); }
        else if (!strcmp(a, "--seed")) { NEEDV(); r.seed = strtoull(v, NULL, 10); }
        else if (!strcmp(a, "--stop")) { NEEDV(); if (n_stops < 16) stops[n_stops++] = v; }
        else if (!strcmp(a, "--ignore-eos")) r.ignore_eos = 1;
        else if (!strcmp(a, "--prefill")) { NEEDV(); so.prefill_engine = v; }
        else if (!strcmp(a, "--decode")) { NEEDV(); so.decode_engine = v; }
        else if (!strcmp(a, "--route")) {
            NEEDV();
            int route;
            if (cli_parse_route(v, &route)) { fprintf(stderr, "tandem run: unknown route '%s'\n", v); return 2; }
            so.route = (tandem_route)route;
        }
        else if (!strcmp(a, "--stateful")) so.stateless = 0;
        else if (!strcmp(a, "--explain")) so.explain = 1;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { NEEDV(); so.n_threads = atoi(v); }
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) { NEEDV(); so.max_ctx = atoi(v); }
        else if (a[0] == '-') { fprintf(stderr, "tandem run: unknown option '%s' (see --help)\n", a); return 2; }
        else if (!model) model = a;
        else { fprintf(stderr, "tandem run: unexpected argument '%s'\n", a); return 2; }
#undef NEEDV
    }
    if (!model || (!prompt && !file)) {
        fputs(run_usage, stderr);
        return 2;
    }
    char *fbuf = NULL;
    if (file) {
        FILE *f = fopen(file, "rb");
        if (!f) { fprintf(stderr, "tandem run: %s: cannot open\n", file); return 1; }
        size_t cap = 1 << 16, n = 0;
        fbuf = malloc(cap + 1);
        size_t k;
        while (fbuf && (k = fread(fbuf + n, 1, cap - n, f)) > 0) {
            n += k;
            if (n == cap) { cap *= 2; char *nb = realloc(fbuf, cap + 1); if (!nb) { free(fbuf); fbuf = NULL; } else fbuf = nb; }
        }
        fclose(f);
        if (!fbuf) { fprintf(stderr, "tandem run: out of memory\n"); return 1; }
        fbuf[n] = '\0';
        prompt = fbuf;
    }
    r.prompt = prompt;
    r.stop = stops;
    tandem_status st;
    tandem_model *m;
    if (tandem_model_open(&m, model, &st) != 0) {
        fprintf(stderr, "tandem run: %s\n", st.msg);
        free(fbuf);
        return 1;
    }
    if (!temp_set) {
        tandem_model_info info;
        tandem_model_get_info(m, &info);
        r.temperature = info.temperature >= 0 ? info.temperature : 1.0f;
        if (r.top_p == 1.0f && info.top_p > 0) r.top_p = info.top_p;
        if (r.top_k == 0 && info.top_k > 0) r.top_k = info.top_k;
    }
    tandem_session *s;
    if (tandem_session_new(&s, m, &so, &st) != 0) {
        fprintf(stderr, "tandem run: %s\n", st.msg);
        tandem_model_free(m);
        free(fbuf);
        return 1;
    }
    fputs(prompt, stdout);
    fflush(stdout);
    tandem_stats stats;
    int rc = tandem_generate(s, &r, on_text, NULL, &stats, &st);
    fputc('\n', stdout);
    if (rc != 0) fprintf(stderr, "tandem run: %s\n", st.msg);
    else
        fprintf(stderr,
                "\n[%s route] prompt: %d tokens in %.3f s (%.1f tok/s), hand-off %.3f ms; "
                "generation: %d tokens in %.3f s (%.1f tok/s); finish: %s\n",
                stats.route, stats.n_prompt, stats.t_prefill,
                stats.t_prefill > 0 ? stats.n_prompt / stats.t_prefill : 0.0, stats.t_handoff * 1e3,
                stats.n_generated, stats.t_decode, stats.t_decode > 0 ? stats.n_generated / stats.t_decode : 0.0,
                stats.finish_reason);
    tandem_session_free(s);
    tandem_model_free(m);
    free(fbuf);
    return rc != 0;
}
