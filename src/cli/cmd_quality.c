/* cli/cmd_quality.c: `tandem perplexity` and `tandem kld`: what each stage's
 * encoding costs, scored the way the hybrid route runs a request, against
 * the float32 reference of the same source weights (runtime/quality.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "core/fileio.h"
#include "runtime/quality.h"

static const char quality_usage[] =
    "usage: tandem %s MODEL --file TEXT [options]\n"
    "\n"
    "%s"
    "The text is tokenized with the model's tokenizer (BOS first) and cut into windows of\n"
    "N tokens, each starting with BOS. In a window the first P tokens are the prompt,\n"
    "prefilled with the prefill-stage weights (they make its KV cache); tokens P..N-1 are\n"
    "then scored one by one by the decode stage, as the hybrid route generates. Every\n"
    "position is compared with the float32 reference forward over the unquantized source\n"
    "weights (a HF directory's safetensors, or a package's bf16 stage).\n"
    "\n"
    "MODEL is a Hugging Face directory (each encoding pair is converted on the fly into a\n"
    "temporary package, deleted afterwards) or a package (.tdm: its own pair only).\n"
    "\n"
    "  --file F            the text to score\n"
    "  --prefill-enc E     bf16 | f16 | int8 | int4pc (default bf16; a package: its own)\n"
    "  --decode-enc E      int4g64 | int4g32 | int6g64 | int8 | bf16 | f16 (default int4g64)\n"
    "  --all               every pair of prefill {bf16, int8, int4pc} x decode {int4g64,\n"
    "                      int4g32, int8, bf16}, plus each encoding everywhere (HF dir only)\n"
    "  --route R           hybrid | prefill-only | decode-only | all (default all: the hybrid,\n"
    "                      then the prefill encoding everywhere (prefill-only route) and the\n"
    "                      decode encoding everywhere (decode-only route, prompt KV made by it))\n"
    "  --ctx N             tokens per window (default 512)\n"
    "  --prefill-len P     prompt tokens per window (default N/2)\n"
    "  --max-tokens M      score at least M tokens, in whole windows (default 2048; 0: the\n"
    "                      whole text)\n"
    "  --engine-path       the fast engines, tm_session_score (default)\n"
    "  --ref-path          the float32 reference forward over the dequantized weights; the\n"
    "                      hybrid moves the prompt's KV from the prefill-stage model to the\n"
    "                      decode-stage model\n"
    "  --prefill-engine E, --decode-engine E   engines (see tandem devices; default: best)\n"
    "  --kv-dtype T        the engines' decode KV cache: bf16 | f16 | int8 (default bf16)\n"
    "  --threads N         threads (default: every cpu this process may use)\n"
    "  --json              one JSON object on stdout instead of a markdown table\n";

static const char ppl_what[] =
    "Perplexity of the text, mean KL divergence from the float32 reference and top-1\n"
    "agreement with it, per (prefill encoding, decode encoding) pair.\n\n";
static const char kld_what[] =
    "Mean KL divergence from the float32 reference and top-1 agreement with it, per\n"
    "(prefill encoding, decode encoding) pair (tandem perplexity also reports perplexity).\n\n";

typedef struct qargs {
    const char *cmd, *model, *file;
    int pre, dec, all, route_all, path, json;
    tandem_route route;
    tm_qual_opts o;
} qargs;

static int parse_int(const char *cmd, const char *opt, const char *v, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "tandem %s: %s: '%s' is not a number in [%ld, %ld]\n", cmd, opt, v, lo, hi);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int parse_enc(const char *cmd, const char *opt, const char *v, int *out)
{
    int d = tm_dtype_from_name(v);
    if (d < 0) {
        fprintf(stderr, "tandem %s: %s: unknown encoding '%s'\n", cmd, opt, v);
        return -1;
    }
    *out = d;
    return 0;
}

/* 0 ok, 1 help printed, 2 usage error */
static int parse_args(qargs *a, int argc, char **argv, const char *what)
{
    tm_qual_opts_default(&a->o);
    a->pre = a->dec = -1;
    a->route_all = 1;
    a->path = TM_QUAL_ENGINE;
    const char *cmd = a->cmd;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            printf(quality_usage, cmd, what);
            return 1;
        }
        if (!strcmp(s, "--all")) a->all = 1;
        else if (!strcmp(s, "--json")) a->json = 1;
        else if (!strcmp(s, "--engine-path")) a->path = TM_QUAL_ENGINE;
        else if (!strcmp(s, "--ref-path")) a->path = TM_QUAL_REF;
        else if (s[0] != '-' && !a->model) a->model = s;
        else if (s[0] == '-' && s[1] == '-' && !v) {
            fprintf(stderr, "tandem %s: %s needs a value\n", cmd, s);
            return 2;
        } else {
            i++;
            if (!strcmp(s, "--file")) a->file = v;
            else if (!strcmp(s, "--prefill-enc")) bad = parse_enc(cmd, s, v, &a->pre);
            else if (!strcmp(s, "--decode-enc")) bad = parse_enc(cmd, s, v, &a->dec);
            else if (!strcmp(s, "--ctx")) bad = parse_int(cmd, s, v, 2, 65536, &a->o.ctx);
            else if (!strcmp(s, "--prefill-len")) bad = parse_int(cmd, s, v, 1, 65535, &a->o.prefill_len);
            else if (!strcmp(s, "--max-tokens")) bad = parse_int(cmd, s, v, 0, INT_MAX, &a->o.max_tokens);
            else if (!strcmp(s, "--threads")) bad = parse_int(cmd, s, v, 1, 256, &a->o.n_threads);
            else if (!strcmp(s, "--prefill-engine")) a->o.prefill_engine = v;
            else if (!strcmp(s, "--decode-engine")) a->o.decode_engine = v;
            else if (!strcmp(s, "--kv-dtype")) {
                int kv;
                if (cli_parse_kv_dtype(v, &kv) == 0) a->o.kv_dtype = (tandem_kv_dtype)kv;
                else {
                    fprintf(stderr, "tandem %s: --kv-dtype: unknown KV cache dtype '%s' (bf16, f16, int8)\n", cmd, v);
                    bad = 1;
                }
            }
            else if (!strcmp(s, "--route")) {
                int r;
                if (!strcmp(v, "all")) a->route_all = 1;
                else if (cli_parse_route(v, &r) == 0 && r != TANDEM_ROUTE_AUTO) a->route_all = 0, a->route = r;
                else {
                    fprintf(stderr, "tandem %s: --route: '%s' is not hybrid, prefill-only, decode-only or all\n",
                            cmd, v);
                    bad = 1;
                }
            } else {
                fprintf(stderr, "tandem %s: unexpected argument '%s'\n", cmd, s);
                bad = 1;
            }
        }
        if (bad) return 2;
    }
    if (!a->model || !a->file) {
        fprintf(stderr, quality_usage, cmd, what);
        return 2;
    }
    if (a->o.prefill_len >= a->o.ctx) {
        fprintf(stderr, "tandem %s: --prefill-len %d must be below --ctx %d\n", cmd, a->o.prefill_len, a->o.ctx);
        return 2;
    }
    if (a->all && (a->pre >= 0 || a->dec >= 0)) {
        fprintf(stderr, "tandem %s: --all runs every pair; drop --prefill-enc / --decode-enc\n", cmd);
        return 2;
    }
    return 0;
}

/* The cases to run, in order. */
static int plan_cases(const qargs *a, tm_qual_case *c, int cap)
{
    static const int pres[] = {TM_DT_BF16, TM_DT_Q8PC, TM_DT_Q4PC};
    static const int decs[] = {TM_DT_Q4G64, TM_DT_Q4G32, TM_DT_Q8PC, TM_DT_BF16};
    int n = 0;
    int want_h = a->route_all || a->route == TANDEM_ROUTE_HYBRID;
    int want_p = a->route_all || a->route == TANDEM_ROUTE_PREFILL_ONLY;
    int want_d = a->route_all || a->route == TANDEM_ROUTE_DECODE_ONLY;
    if (!a->all) {
        if (want_h) c[n++] = (tm_qual_case){a->pre, a->dec, TANDEM_ROUTE_HYBRID, a->path};
        if (want_p) c[n++] = (tm_qual_case){a->pre, a->dec, TANDEM_ROUTE_PREFILL_ONLY, a->path};
        if (want_d) c[n++] = (tm_qual_case){a->pre, a->dec, TANDEM_ROUTE_DECODE_ONLY, a->path};
        return n;
    }
    /* pairs in conversion order; each package also gives the single-encoding
     * rows it can: prefill-only for its prefill encoding (once per prefill
     * encoding), decode-only for its decode encoding (once per decode encoding) */
    for (size_t i = 0; i < sizeof pres / sizeof pres[0]; i++)
        for (size_t j = 0; j < sizeof decs / sizeof decs[0] && n + 3 <= cap; j++) {
            if (want_h) c[n++] = (tm_qual_case){pres[i], decs[j], TANDEM_ROUTE_HYBRID, a->path};
            if (want_p && j == 0) c[n++] = (tm_qual_case){pres[i], decs[j], TANDEM_ROUTE_PREFILL_ONLY, a->path};
            if (want_d && i == 0) c[n++] = (tm_qual_case){pres[i], decs[j], TANDEM_ROUTE_DECODE_ONLY, a->path};
        }
    return n;
}

static const char *route_name(tandem_route r)
{
    return r == TANDEM_ROUTE_HYBRID ? "hybrid" : r == TANDEM_ROUTE_PREFILL_ONLY ? "prefill-only" : "decode-only";
}

static void print_header(int ppl)
{
    if (ppl)
        printf("| route | prompt (KV) | continuation | perplexity | vs fp32 | mean KL | max KL | top-1 | run by |\n"
               "|---|---|---|---:|---:|---:|---:|---:|---|\n");
    else
        printf("| route | prompt (KV) | continuation | mean KL | max KL | top-1 | run by |\n"
               "|---|---|---|---:|---:|---:|---|\n");
}

static int is_int4(tm_dtype d)
{
    return d == TM_DT_Q4PC || d == TM_DT_Q4G64 || d == TM_DT_Q4G32;
}

static void print_row(const tm_qual_case *c, const tm_qual_result *r, const tm_qual_result *ref, int ppl)
{
    char eng[80];
    int two = strcmp(r->prefill_by, r->decode_by) != 0;
    snprintf(eng, sizeof eng, "%s%s%s", r->prefill_by, two ? " -> " : "", two ? r->decode_by : "");
    /* the converter's fallbacks (int4 shapes it could not hold) concern rows that ran an int4 stage */
    char note[48] = "";
    if (r->fallbacks && (is_int4(r->prefill_enc) || is_int4(r->decode_enc)))
        snprintf(note, sizeof note, " (%d fallbacks)", r->fallbacks);
    printf("| %s | %s | %s%s | ", route_name(c->route), tm_dtype_name(r->prefill_enc), tm_dtype_name(r->decode_enc),
           note);
    if (ppl) printf("%.4f | %+.2f%% | ", r->ppl, 100.0 * (r->ppl / ref->ppl - 1));
    printf("%.4g | %.4g | %.2f%% | %s |\n", r->kl, r->kl_max, 100 * r->top1, eng);
    fflush(stdout);
}

static cJSON *row_json(const tm_qual_case *c, const tm_qual_result *r, int ppl)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "route", route_name(c->route));
    cJSON_AddStringToObject(o, "prefill_enc", tm_dtype_name(r->prefill_enc));
    cJSON_AddStringToObject(o, "decode_enc", tm_dtype_name(r->decode_enc));
    if (ppl) {
        cJSON_AddNumberToObject(o, "perplexity", r->ppl);
        cJSON_AddNumberToObject(o, "nll", r->nll);
    }
    cJSON_AddNumberToObject(o, "kl", r->kl);
    cJSON_AddNumberToObject(o, "kl_max", r->kl_max);
    cJSON_AddNumberToObject(o, "top1", r->top1);
    cJSON_AddStringToObject(o, "prefill_by", r->prefill_by);
    cJSON_AddStringToObject(o, "decode_by", r->decode_by);
    cJSON_AddNumberToObject(o, "package_fallbacks", r->fallbacks);
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    return o;
}

/* The run's description: a JSON object (returned, with *rows its row array)
 * or text lines and the table header on stdout (NULL returned). */
static cJSON *print_intro(const qargs *a, size_t n, int bos, const tm_qual *q, const tm_qual_result *ref, int ppl,
                          cJSON **rows)
{
    int W, N, P;
    tm_qual_windows(q, &W, &N, &P);
    if (!a->json) {
        printf("model: %s (%s)\n", a->model,
               tm_is_dir(a->model) ? "HF directory, each pair converted on the fly" : "package");
        printf("text:  %s: %zu tokens; %d window%s of %d (prompt %d%s), %d scored tokens\n", a->file, n, W,
               W == 1 ? "" : "s", N, P, bos >= 0 ? ", BOS first" : "", ref->n_scored);
        printf("path:  %s\n", a->path == TM_QUAL_REF ? "float32 reference over dequantized weights" : "engines");
        if (ppl) printf("fp32 reference perplexity: %.4f\n", ref->ppl);
        printf("\n");
        print_header(ppl);
        return NULL;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "command", a->cmd);
    cJSON_AddStringToObject(root, "model", a->model);
    cJSON_AddStringToObject(root, "file", a->file);
    cJSON_AddNumberToObject(root, "text_tokens", (double)n);
    cJSON_AddNumberToObject(root, "ctx", N);
    cJSON_AddNumberToObject(root, "prefill_len", P);
    cJSON_AddNumberToObject(root, "windows", W);
    cJSON_AddNumberToObject(root, "scored_tokens", ref->n_scored);
    cJSON_AddBoolToObject(root, "bos_per_window", bos >= 0);
    cJSON_AddStringToObject(root, "path", a->path == TM_QUAL_REF ? "reference" : "engine");
    if (ppl) {
        cJSON *r = cJSON_AddObjectToObject(root, "reference");
        cJSON_AddNumberToObject(r, "perplexity", ref->ppl);
        cJSON_AddNumberToObject(r, "nll", ref->nll);
    }
    *rows = cJSON_AddArrayToObject(root, "rows");
    return root;
}

static int quality_main(int argc, char **argv, const char *what, int ppl)
{
    qargs a;
    memset(&a, 0, sizeof a);
    a.cmd = argv[0];
    int prc = parse_args(&a, argc, argv, what);
    if (prc) return prc == 1 ? 0 : 2;
    tm_err err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    int bos = -1, rc;
    tm_qual *q = NULL;
    cJSON *root = NULL, *rows = NULL;
    if (a.all && !tm_is_dir(a.model)) {
        rc = tm_errf(&err, TM_E_INVALID, "%s: --all converts every pair and needs a Hugging Face directory", a.model);
        goto done;
    }
    if ((rc = tm_qual_encode_file(a.model, a.file, &ids, &n, &bos, &err)) != TM_OK) goto done;
    a.o.bos = bos;
    if ((rc = tm_qual_open(&q, a.model, ids, n, &a.o, &err)) != TM_OK) goto done;
    tm_qual_result ref;
    memset(&ref, 0, sizeof ref);
    tm_qual_case cases[48];
    int nc = plan_cases(&a, cases, 48);
    for (int i = 0; i < nc; i++) {
        tm_qual_result r;
        if (isatty(2))
            fprintf(stderr, "[%d/%d] %s %s/%s ...\r", i + 1, nc, route_name(cases[i].route),
                    cases[i].prefill_enc >= 0 ? tm_dtype_name((tm_dtype)cases[i].prefill_enc) : "-",
                    cases[i].decode_enc >= 0 ? tm_dtype_name((tm_dtype)cases[i].decode_enc) : "-");
        /* the first run checks its case, then computes the reference */
        if ((rc = tm_qual_run(q, &cases[i], &r, &err)) != TM_OK) goto done;
        if (i == 0) {
            if ((rc = tm_qual_reference(q, &ref, &err)) != TM_OK) goto done;
            root = print_intro(&a, n, bos, q, &ref, ppl, &rows);
        }
        if (a.json) cJSON_AddItemToArray(rows, row_json(&cases[i], &r, ppl));
        else print_row(&cases[i], &r, &ref, ppl);
    }
    if (isatty(2)) fprintf(stderr, "%40s\r", "");
    if (a.json) {
        char *s = cJSON_Print(root);
        if (s) puts(s);
        free(s);
    }
done:
    if (rc) fprintf(stderr, "tandem %s: %s\n", a.cmd, err.msg);
    cJSON_Delete(root);
    tm_qual_free(q);
    free(ids);
    return rc ? 1 : 0;
}

int cmd_perplexity(int argc, char **argv)
{
    return quality_main(argc, argv, ppl_what, 1);
}

int cmd_kld(int argc, char **argv)
{
    return quality_main(argc, argv, kld_what, 0);
}
