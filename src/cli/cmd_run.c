/* cli/cmd_run.c: `tandem run MODEL -p TEXT`: generate and stream text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <utf8proc.h>

#include "cli/cli.h"
#include "serve/serve-impl.h"
#include "tandem.h"

static void run_usage(FILE *f)
{
    fputs("usage: tandem run MODEL -p TEXT [options]\n"
          "\n"
          "Generate text from MODEL (a .tdm package or a Hugging Face directory) and stream it\n"
          "to stdout; prompt and generation speed go to stderr at the end.\n"
          "\n"
          "  -p, --prompt TEXT      the prompt (encoded with the model's special tokens)\n"
          "  -f, --file F           read the prompt from a file\n"
          "      --suffix TEXT      fill in the middle: generate what goes between the prompt and TEXT, in\n"
          "                         the model's FIM form (Qwen2.5-Coder's <|fim_prefix|>, StarCoder's, ...)\n"
          "  -n, --n-predict N      new tokens to generate (default 128)\n"
          "      --special          print special tokens too (<|end|>, <|channel|>, ...; dropped by default)\n"
          "      --logprobs N       each generated token's log-probability and its N (0-20) most likely\n"
          "                         alternatives, one JSON line a token on stderr\n", f);
    fputs(cli_gen_usage, f);
}

static int on_text(void *ud, const char *piece, size_t len, int32_t token)
{
    (void)ud;
    (void)token;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    return 0;
}

/* b [n] with each byte that is not part of a UTF-8 character as U+FFFD, into a new string */
static char *lossy_utf8(const char *b, size_t n)
{
    char *o = malloc(3 * n + 1), *w = o;
    for (size_t i = 0; o && i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)b + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k > 0 && cp != 0) {
            memcpy(w, b + i, (size_t)k);
            w += k;
            i += (size_t)k;
        } else {
            memcpy(w, "\xEF\xBF\xBD", 3);
            w += 3;
            i++;
        }
    }
    if (o) *w = '\0';
    return o;
}

/* --logprobs: {"token": id, "text": its bytes (U+FFFD where not UTF-8), "logprob": x, "top": [[id, x], ...]} */
static int on_logprob(void *ud, const tandem_logprob *lp)
{
    const tandem_model *m = ud;
    cJSON *o = cJSON_CreateObject();
    char *b = NULL, *js = NULL;
    size_t bl = 0;
    tandem_status st;
    cJSON_AddNumberToObject(o, "token", lp->token);
    char *text = tandem_token_bytes(m, lp->token, &b, &bl, &st) == 0 ? lossy_utf8(b, bl) : NULL;
    if (text) cJSON_AddStringToObject(o, "text", text);
    free(text);
    cJSON_AddNumberToObject(o, "logprob", lp->logprob > -9999.0f ? lp->logprob : -9999.0);
    cJSON *top = cJSON_AddArrayToObject(o, "top");
    for (int k = 0; k < lp->n_top; k++) {
        double v[2] = {lp->top_token[k], lp->top_logprob[k] > -9999.0f ? lp->top_logprob[k] : -9999.0};
        cJSON_AddItemToArray(top, cJSON_CreateDoubleArray(v, 2));
    }
    if ((js = cJSON_PrintUnformatted(o))) fprintf(stderr, "%s\n", js);
    free(js);
    free(b);
    cJSON_Delete(o);
    return 0;
}

int cmd_run(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        run_usage(stdout);
        return 0;
    }
    const char *model = NULL, *prompt = NULL, *file = NULL, *suffix = NULL;
    cli_gen g;
    cli_gen_init(&g);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int k = cli_gen_parse(&g, "run", argc, argv, &i);
        if (k < 0) return 2;
        if (k > 0) continue;
#define NEEDV() do { if (!v) { fprintf(stderr, "tandem run: %s needs a value\n", a); return 2; } i++; } while (0)
        if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { NEEDV(); prompt = v; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { NEEDV(); file = v; }
        else if (!strcmp(a, "--suffix")) { NEEDV(); suffix = v; }
        else if (!strcmp(a, "--special")) g.req.show_special = 1;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) { NEEDV(); g.req.max_tokens = atoi(v); }
        else if (!strcmp(a, "--logprobs")) {
            NEEDV();
            char *end = NULL;
            long n = strtol(v, &end, 10);
            if (*end || n < 0 || n > TANDEM_MAX_LOGPROBS) {
                fprintf(stderr, "tandem run: --logprobs %s: a count from 0 to %d\n", v, TANDEM_MAX_LOGPROBS);
                return 2;
            }
            g.req.logprobs = (int)n;
            g.req.on_logprob.fn = on_logprob;
        }
        else if (a[0] == '-') { fprintf(stderr, "tandem run: unknown option '%s' (see --help)\n", a); return 2; }
        else if (!model) model = a;
        else { fprintf(stderr, "tandem run: unexpected argument '%s'\n", a); return 2; }
#undef NEEDV
    }
    if (!model || (!prompt && !file)) {
        run_usage(stderr);
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
    tandem_request r = g.req;
    r.prompt = prompt;
    tandem_status st;
    tandem_model *m;
    if (tandem_model_open(&m, model, &st) != 0) {
        fprintf(stderr, "tandem run: %s\n", st.msg);
        free(fbuf);
        return 1;
    }
    char *fim = NULL; /* --suffix: the prompt in the model's fill-in-the-middle form */
    const char *const *f = suffix ? tm_serve_fim(m) : NULL;
    if (suffix && !f) {
        fprintf(stderr, "tandem run: --suffix: %s's tokenizer has no fill-in-the-middle tokens (<|fim_prefix|>, "
                "<fim_prefix>, ...)\n", model);
        tandem_model_free(m);
        free(fbuf);
        return 1;
    }
    if (f) {
        size_t n = strlen(f[0]) + strlen(prompt) + strlen(f[1]) + strlen(suffix) + strlen(f[2]) + 1;
        if ((fim = malloc(n))) snprintf(fim, n, "%s%s%s%s%s", f[0], prompt, f[1], suffix, f[2]);
        r.prompt = fim;
    }
    if (!cli_can_generate("run", m, model) || (suffix && !fim)) {
        if (suffix && !fim) fprintf(stderr, "tandem run: out of memory\n");
        tandem_model_free(m);
        free(fbuf);
        free(fim);
        return 1;
    }
    cli_gen_model_defaults(&g, m);
    r.temperature = g.req.temperature;
    r.top_p = g.req.top_p;
    r.top_k = g.req.top_k;
    tandem_session *s;
    g.so.max_seqs = 1; /* one request: nothing can arrive while it decodes, so both sides lend */
    if (tandem_session_new(&s, m, &g.so, &st) != 0) {
        fprintf(stderr, "tandem run: %s\n", st.msg);
        tandem_model_free(m);
        free(fbuf);
        free(fim);
        return 1;
    }
    fputs(prompt, stdout);
    fflush(stdout);
    tandem_stats stats;
    int rc = tandem_generate(s, &r, on_text, m, &stats, &st); /* m: on_logprob's */
    if (suffix) fputs(suffix, stdout); /* the middle between the two */
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
    if (rc == 0 && stats.n_drafted)
        fprintf(stderr, "[lookup] %d tokens drafted, %d confirmed (%.0f%%)\n", stats.n_drafted, stats.n_accepted,
                100.0 * stats.n_accepted / stats.n_drafted);
    tandem_session_free(s);
    tandem_model_free(m);
    free(fbuf);
    free(fim);
    return rc != 0;
}
