/* cli/cli_opts.c: the generation and engine options shared by run, chat and
 * bench (one parser, so every command spells them the same way). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/fileio.h"

/* texts read for --grammar-file / --json-schema-file: they live as long as the process (a
 * command's request points at them until it exits) */
static char *loaded[2];

/* load: *dst := file path's text (kept in loaded[slot]); -2 with a message on failure */
static int load(const char *cmd, const char *opt, const char *path, int slot, const char **dst)
{
    tm_err err = {0};
    char *text = NULL;
    size_t len = 0;
    if (tm_read_file(path, &text, &len, (size_t)16 << 20, &err) != TM_OK) {
        fprintf(stderr, "tandem %s: %s %s: %s\n", cmd, opt, path, err.msg);
        return -2;
    }
    free(loaded[slot]);
    loaded[slot] = text;
    *dst = text;
    return 0;
}

const char cli_gen_usage[] =
    "      --temp T           temperature; 0 = greedy (default: the model's, else 1)\n"
    "      --top-k K          keep the K most likely tokens (0 = off)\n"
    "      --top-p P          nucleus sampling (1 = off)\n"
    "      --min-p P          drop tokens below P x the top probability (0 = off)\n"
    "      --repeat-penalty R repetition penalty (1 = off)\n"
    "      --presence-penalty X, --frequency-penalty X\n"
    "      --seed S           sampling seed (default 0)\n"
    "      --stop S           stop string (repeatable, up to 16)\n"
    "      --ignore-eos       keep generating past end-of-sequence tokens\n"
    "      --json-mode        the output is one JSON object, constrained token by token\n"
    "                         (serve: each request's response_format decides)\n"
    "      --json-schema S    the output is one JSON value the JSON Schema S (text) allows\n"
    "      --json-schema-file F  the same, the schema read from file F\n"
    "      --grammar-file F   the output is constrained to the GBNF grammar in F (llama.cpp's dialect,\n"
    "                         root rule 'root'; docs/sampling.md); EOS only where the text is a match\n"
    "      --prefill ENGINE   prefill engine (see tandem devices; default: the best)\n"
    "      --decode ENGINE    decode engine (default: the best)\n"
    "      --route R          auto | hybrid | prefill-only | decode-only (default auto)\n"
    "      --stateful         prefill writes KV straight into decode pages (default: stateless + bridge)\n"
    "      --exact-tail       run the prompt's last chunk at its exact length (default: padded)\n"
    "      --kv-dtype T       decode KV cache: bf16 | f16 | int8 (int8: half the bytes; default bf16)\n"
    "      --explain          log the routing decision and the lending policy\n"
    "      --no-lend          neither side borrows the other's idle cores\n"
    "      --max-stall X      how much a new prompt may raise running streams' time per token (default 0.25);\n"
    "                         the decode side borrows idle prefill cores only within it (or 'off': always)\n"
    "      --lookup N         prompt lookup: a greedy request decoding alone drafts up to N (1..15) tokens\n"
    "                         from its earlier text, checked in one pass (speculative decoding, no draft model)\n"
    "      --gpu-split F      with --prefill cuda --decode cuda: the prefill engine's share of the GPU's\n"
    "                         multiprocessors, the decode engine the rest (default off: both on all of it,\n"
    "                         the decode's work first)\n"
    "  -t, --threads N        threads (default: every cpu this process may use, e.g. under taskset;\n"
    "                         fewer than that leave cpu 0 out)\n"
    "      --prefill-threads N  cores for the prefill side (default: half)\n"
    "  -c, --ctx N            context length (default: the model's, at most 4096)\n";

int cli_parse_kv_dtype(const char *s, int *kv)
{
    if (strcmp(s, "bf16") == 0) *kv = TANDEM_KV_BF16;
    else if (strcmp(s, "f16") == 0) *kv = TANDEM_KV_F16;
    else if (strcmp(s, "int8") == 0) *kv = TANDEM_KV_INT8;
    else return -1;
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

void cli_gen_init(cli_gen *g)
{
    memset(g, 0, sizeof *g);
    tandem_request_default(&g->req);
    tandem_session_opts_default(&g->so);
    g->req.stop = g->stops;
}

int cli_gen_parse(cli_gen *g, const char *cmd, int argc, char **argv, int *i)
{
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    static const char *const with_value[] = {"--temp", "--top-k", "--top-p", "--min-p", "--repeat-penalty",
                                             "--presence-penalty", "--frequency-penalty", "--seed", "--stop",
                                             "--prefill", "--decode", "--route", "-t", "--threads",
                                             "--prefill-threads", "-c", "--ctx", "--kv-dtype", "--max-stall", "--gpu-split", "--lookup", "--parallel",
                                             "--json-schema", "--json-schema-file", "--grammar-file", NULL};
    int needs = 0;
    for (const char *const *w = with_value; *w; w++)
        if (!strcmp(a, *w)) needs = 1;
    if (needs && !v) {
        fprintf(stderr, "tandem %s: %s needs a value\n", cmd, a);
        return -2;
    }
    tandem_request *r = &g->req;
    tandem_session_opts *so = &g->so;
    if (!strcmp(a, "--temp")) { r->temperature = strtof(v, NULL); g->temp_set = 1; }
    else if (!strcmp(a, "--top-k")) { r->top_k = atoi(v); g->top_k_set = 1; }
    else if (!strcmp(a, "--top-p")) { r->top_p = strtof(v, NULL); g->top_p_set = 1; }
    else if (!strcmp(a, "--min-p")) r->min_p = strtof(v, NULL);
    else if (!strcmp(a, "--repeat-penalty")) r->repetition_penalty = strtof(v, NULL);
    else if (!strcmp(a, "--presence-penalty")) r->presence_penalty = strtof(v, NULL);
    else if (!strcmp(a, "--frequency-penalty")) r->frequency_penalty = strtof(v, NULL);
    else if (!strcmp(a, "--seed")) r->seed = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--stop")) { if (g->n_stops < 16) g->stops[g->n_stops++] = v; }
    else if (!strcmp(a, "--ignore-eos")) r->ignore_eos = 1;
    else if (!strcmp(a, "--json-mode")) r->json_object = 1;
    else if (!strcmp(a, "--json-schema")) r->json_schema = v;
    else if (!strcmp(a, "--json-schema-file")) { if (load(cmd, a, v, 0, &r->json_schema)) return -2; }
    else if (!strcmp(a, "--grammar-file")) { if (load(cmd, a, v, 1, &r->grammar)) return -2; }
    else if (!strcmp(a, "--prefill")) so->prefill_engine = v;
    else if (!strcmp(a, "--decode")) so->decode_engine = v;
    else if (!strcmp(a, "--route")) {
        int route;
        if (cli_parse_route(v, &route)) {
            fprintf(stderr, "tandem %s: unknown route '%s'\n", cmd, v);
            return -2;
        }
        so->route = (tandem_route)route;
    }
    else if (!strcmp(a, "--kv-dtype")) {
        int kv;
        if (cli_parse_kv_dtype(v, &kv)) {
            fprintf(stderr, "tandem %s: --kv-dtype: unknown KV cache dtype '%s' (bf16, f16, int8)\n", cmd, v);
            return -2;
        }
        so->kv_dtype = (tandem_kv_dtype)kv;
    }
    else if (!strcmp(a, "--stateful")) so->stateless = 0;
    else if (!strcmp(a, "--exact-tail")) so->exact_tail = 1;
    else if (!strcmp(a, "--explain")) so->explain = 1;
    else if (!strcmp(a, "--no-lend")) so->no_lend = 1;
    else if (!strcmp(a, "--max-stall")) {
        char *end;
        double x = strtod(v, &end);
        if (!strcmp(v, "off")) so->max_stall = -1;
        else if (end != v && !*end && x > 0 && x <= 100) so->max_stall = (float)x;
        else {
            fprintf(stderr, "tandem %s: --max-stall: '%s' is not a fraction in (0, 100] or 'off'\n", cmd, v);
            return -2;
        }
    }
    else if (!strcmp(a, "--lookup")) {
        char *end;
        long n = strtol(v, &end, 10);
        if (end == v || *end || n < 0 || n > 15) {
            fprintf(stderr, "tandem %s: --lookup: '%s' is not a number of drafted tokens in 0..15\n", cmd, v);
            return -2;
        }
        so->lookup = (int)n;
    }
    else if (!strcmp(a, "--gpu-split")) {
        char *end;
        double x = strtod(v, &end);
        if (!strcmp(v, "off")) so->gpu_split = 0;
        else if (end != v && !*end && x > 0 && x < 1) so->gpu_split = (float)x;
        else {
            fprintf(stderr, "tandem %s: --gpu-split: '%s' is not a share in (0, 1) or 'off'\n", cmd, v);
            return -2;
        }
    }
    else if (!strcmp(a, "--parallel")) {
        char *end;
        long n = strtol(v, &end, 10);
        if (end == v || *end || n < 1 || n > 64) {
            fprintf(stderr, "tandem %s: --parallel: '%s' is not a number of requests in 1..64\n", cmd, v);
            return -2;
        }
        so->max_seqs = (int)n;
    }
    else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) so->n_threads = atoi(v);
    else if (!strcmp(a, "--prefill-threads")) so->prefill_threads = atoi(v);
    else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) so->max_ctx = atoi(v);
    else return 0;
    if (needs) (*i)++;
    return 1;
}

void cli_gen_model_defaults(cli_gen *g, const tandem_model *m)
{
    tandem_model_info info;
    tandem_model_get_info(m, &info);
    if (!g->temp_set) g->req.temperature = info.temperature >= 0 ? info.temperature : 1.0f;
    if (!g->top_p_set && info.top_p > 0) g->req.top_p = info.top_p;
    if (!g->top_k_set && info.top_k > 0) g->req.top_k = info.top_k;
}

int cli_can_generate(const char *cmd, const tandem_model *m, const char *path)
{
    tandem_model_info info;
    tandem_model_get_info(m, &info);
    if (!info.headless) return 1;
    fprintf(stderr, "tandem %s: %s has no output head (a base model's checkpoint, as an embedding model's): it "
            "cannot generate; tandem embed takes it\n", cmd, path);
    return 0;
}
