/* cli/cmd_embed.c: `tandem embed MODEL -p TEXT ...`: the embeddings of texts, answered as POST
 * /v1/embeddings answers (the same request path: serve/embed.c), JSON on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "core/fileio.h"
#include "serve/serve-impl.h"
#include "tandem.h"

static void embed_usage(FILE *f)
{
    fputs("usage: tandem embed MODEL (-p TEXT ... | -f FILE) [options]\n"
          "\n"
          "Embed each text with MODEL and print OpenAI's embeddings answer (the same as POST\n"
          "/v1/embeddings of `tandem serve`): the final hidden states pooled (the model's\n"
          "sentence-transformers pooling, else the last token's) and scaled to unit length.\n"
          "The prompts prefill on the prefill engine; nothing is generated.\n"
          "\n"
          "  -p, --prompt TEXT      a text to embed (repeatable, up to 256)\n"
          "  -f, --file F           one text per line of F (empty lines skipped; - for standard input)\n"
          "      --pooling P        last | mean | cls (default: the model's)\n"
          "      --no-normalize     leave the vectors at their length\n"
          "      --dimensions K     the first K numbers of each vector (a Matryoshka model's), rescaled\n"
          "      --base64           each vector as base64 of its float32 bytes\n", f);
    fputs(cli_gen_usage, f);
}

/* the lines of text (empty ones skipped) appended to arr; -1 when out of memory */
static int add_lines(cJSON *arr, char *text)
{
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        size_t n = strlen(line);
        if (n && line[n - 1] == '\r') line[--n] = 0;
        if (n && !cJSON_AddItemToArray(arr, cJSON_CreateString(line))) return -1;
    }
    return 0;
}

int cmd_embed(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        embed_usage(stdout);
        return 0;
    }
    const char *model = NULL, *file = NULL;
    cli_gen g;
    cli_gen_init(&g);
    cJSON *body = cJSON_CreateObject(), *input = cJSON_AddArrayToObject(body, "input");
    int rc = body && input ? 0 : 1;
    for (int i = 1; rc == 0 && i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int k = cli_gen_parse(&g, "embed", argc, argv, &i);
        if (k < 0) rc = 2;
        if (k) continue;
        int needs = !strcmp(a, "-p") || !strcmp(a, "--prompt") || !strcmp(a, "-f") || !strcmp(a, "--file") ||
                    !strcmp(a, "--pooling") || !strcmp(a, "--dimensions");
        if (needs && !v) {
            fprintf(stderr, "tandem embed: %s needs a value\n", a);
            rc = 2;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            rc = cJSON_AddItemToArray(input, cJSON_CreateString(v)) ? 0 : 1, i++;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            file = v, i++;
        } else if (!strcmp(a, "--pooling")) {
            rc = cJSON_AddStringToObject(body, "pooling", v) ? 0 : 1, i++;
        } else if (!strcmp(a, "--dimensions")) {
            char *end;
            long d = strtol(v, &end, 10);
            if (*end || d < 1 || d > 1 << 20) {
                fprintf(stderr, "tandem embed: --dimensions '%s': a count of numbers\n", v);
                rc = 2;
            } else {
                rc = cJSON_AddNumberToObject(body, "dimensions", (double)d) ? 0 : 1, i++;
            }
        } else if (!strcmp(a, "--no-normalize")) {
            rc = cJSON_AddFalseToObject(body, "normalize") ? 0 : 1;
        } else if (!strcmp(a, "--base64")) {
            rc = cJSON_AddStringToObject(body, "encoding_format", "base64") ? 0 : 1;
        } else if (a[0] == '-') {
            fprintf(stderr, "tandem embed: unknown option '%s' (see --help)\n", a);
            rc = 2;
        } else if (!model) {
            model = a;
        } else {
            fprintf(stderr, "tandem embed: unexpected argument '%s'\n", a);
            rc = 2;
        }
    }
    char *text = NULL;
    size_t n = 0;
    tm_err err = {0};
    if (rc == 0 && file && !strcmp(file, "-")) { /* standard input */
        size_t cap = 0, k;
        char buf[1 << 16];
        while (rc == 0 && (k = fread(buf, 1, sizeof buf, stdin)) > 0) {
            char *r = n + k + 1 > cap ? realloc(text, cap = 2 * (n + k + 1)) : text;
            if (!r) rc = 1;
            else memcpy((text = r) + n, buf, k), n += k, text[n] = 0;
        }
        if (rc) fprintf(stderr, "tandem embed: out of memory reading standard input\n");
    } else if (rc == 0 && file && tm_read_file(file, &text, &n, (size_t)1 << 30, &err) != TM_OK) {
        fprintf(stderr, "tandem embed: %s\n", err.msg);
        rc = 1;
    }
    if (rc == 0 && text && add_lines(input, text)) rc = 1;
    free(text);
    if (rc == 0 && (!model || !input->child)) {
        embed_usage(stderr);
        rc = 2;
    }
    tandem_model *m = NULL;
    tandem_session *s = NULL;
    tandem_status st;
    if (rc == 0 && (tandem_model_open(&m, model, &st) != 0 || tandem_session_new(&s, m, &g.so, &st) != 0)) {
        fprintf(stderr, "tandem embed: %s\n", st.msg);
        rc = 1;
    }
    char *js = rc == 0 ? cJSON_PrintUnformatted(body) : NULL;
    if (rc == 0) {
        const char *slash = strrchr(model, '/');
        tm_serve_embed se = {m, s, slash && slash[1] ? slash + 1 : model};
        tm_oai_error e;
        char *out = js ? tm_serve_embeddings(&se, js, strlen(js), &e) : NULL;
        if (out) {
            puts(out);
        } else {
            fprintf(stderr, "tandem embed: %s%s%s\n", js && e.param[0] ? e.param : "", js && e.param[0] ? ": " : "",
                    js ? e.msg : "out of memory");
            rc = 1;
        }
        free(out);
    }
    free(js);
    tandem_session_free(s);
    tandem_model_free(m);
    cJSON_Delete(body);
    return rc;
}
