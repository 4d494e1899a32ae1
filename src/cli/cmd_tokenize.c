/* cli/cmd_tokenize.c: `tandem tokenize` and `tandem detokenize`, thin
 * wrappers around text/tokenizer.h for tests and debugging.
 *
 *   tandem tokenize MODEL --text "Hello world"        -> [128000, 9906, 1917]
 *   tandem tokenize MODEL --file prompt.txt --no-special
 *   tandem tokenize MODEL --file big.txt --bench       -> encode speed in MB/s
 *   tandem detokenize MODEL --ids 9906,1917 [--skip-special]   -> Hello world
 *
 * MODEL is a Hugging Face model directory holding tokenizer.json, or a
 * tokenizer.json file itself. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/fileio.h"
#include "pkg/pkg.h"
#include "text/tokenizer.h"

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* load MODEL's tokenizer; prints the error and returns NULL on failure */
static tm_tokenizer *load_model_tokenizer(const char *model)
{
    tm_err err = {0};
    char path[4096];
    if (ends_with(model, ".tdm")) { /* a package: its embedded tokenizer.json */
        tm_pkg *p = NULL;
        tm_tokenizer *t = NULL;
        size_t n = 0;
        const char *doc = NULL;
        if (tm_pkg_open(&p, model, &err) == TM_OK && !(doc = tm_pkg_doc(p, TM_PKG_DOC_TOKENIZER, &n)))
            tm_errf(&err, TM_E_FORMAT, "%s: the package holds no tokenizer.json", model);
        if (doc) {
            snprintf(path, sizeof path, "%s:tokenizer.json", model);
            tm_tok_load_from_string(&t, doc, n, path, &err);
        }
        if (p) tm_pkg_close(p);
        if (!t) fprintf(stderr, "%s\n", err.msg);
        return t;
    }
    if (tm_is_dir(model)) {
        if (tm_path_join(path, sizeof path, model, "tokenizer.json") != TM_OK) {
            fprintf(stderr, "%s: path too long\n", model);
            return NULL;
        }
    } else {
        snprintf(path, sizeof path, "%s", model);
    }
    tm_tokenizer *t = NULL;
    if (tm_tok_load(&t, path, &err) != TM_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    return t;
}

static void tokenize_usage(FILE *f)
{
    fprintf(f, "usage: tandem tokenize MODEL (--text TEXT | --file FILE) [--no-special] [--bench]\n\n"
               "Print the token ids of TEXT as a JSON array on one line, adding special tokens\n"
               "(e.g. BOS) as Hugging Face encode() does by default.\n"
               "  MODEL         a package (.tdm), a model directory holding tokenizer.json, or a tokenizer.json file\n"
               "  --text TEXT   the text to encode\n"
               "  --file FILE   read the text from FILE\n"
               "  --no-special  add_special_tokens=False\n"
               "  --bench       print the encoding speed (MB/s, one core) instead of the ids\n");
}

int cmd_tokenize(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        tokenize_usage(stdout);
        return 0;
    }
    const char *model = NULL, *text = NULL, *file = NULL;
    int special = 1, bench = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--text") && i + 1 < argc) text = argv[++i];
        else if (!strcmp(argv[i], "--file") && i + 1 < argc) file = argv[++i];
        else if (!strcmp(argv[i], "--no-special")) special = 0;
        else if (!strcmp(argv[i], "--bench")) bench = 1;
        else if (argv[i][0] != '-' && !model) model = argv[i];
        else {
            fprintf(stderr, "tokenize: unexpected argument '%s'\n", argv[i]);
            tokenize_usage(stderr);
            return 2;
        }
    }
    if (!model || (!text) == (!file)) {
        tokenize_usage(stderr);
        return 2;
    }
    tm_err err = {0};
    char *buf = NULL;
    size_t len = text ? strlen(text) : 0;
    if (file && tm_read_file(file, &buf, &len, 0, &err) != TM_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    if (file) text = buf;
    tm_tokenizer *t = load_model_tokenizer(model);
    if (!t) {
        free(buf);
        return 1;
    }
    int rc = 0;
    if (bench) {
        int reps = len < (1u << 20) ? (int)((8u << 20) / (len + 1)) + 1 : 1;
        if (reps > 1000) reps = 1000;
        double mbs = tm_tok_bench(t, text, len, reps, &err);
        if (mbs < 0) {
            fprintf(stderr, "%s\n", err.msg);
            rc = 1;
        } else {
            printf("%.1f MB/s (%zu bytes x %d)\n", mbs, len, reps);
        }
    } else {
        int32_t *ids = NULL;
        size_t n = 0;
        if (tm_tok_encode(t, text, len, special, &ids, &n, &err) != TM_OK) {
            fprintf(stderr, "%s\n", err.msg);
            rc = 1;
        } else {
            putchar('[');
            for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
            printf("]\n");
        }
        free(ids);
    }
    tm_tok_free(t);
    free(buf);
    return rc;
}

static void detokenize_usage(FILE *f)
{
    fprintf(f, "usage: tandem detokenize MODEL --ids ID,ID,... [--skip-special]\n\n"
               "Print the text of the token ids (no newline is added), as Hugging Face decode().\n"
               "  MODEL           a model directory holding tokenizer.json, or a tokenizer.json file\n"
               "  --ids LIST      comma-separated token ids (\"[1, 2, 3]\" also accepted)\n"
               "  --skip-special  skip_special_tokens=True\n");
}

/* "1,2, 3" or "[1, 2, 3]" -> ids; returns -1 on a malformed list */
static long parse_ids(const char *s, int32_t **out)
{
    size_t cap = 16, n = 0;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return -1;
    const char *p = s;
    while (*p == ' ' || *p == '[') p++;
    while (*p && *p != ']') {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT32_MAX) {
            free(v);
            return -1;
        }
        if (n == cap) {
            int32_t *nv = realloc(v, (cap *= 2) * sizeof *v);
            if (!nv) {
                free(v);
                return -1;
            }
            v = nv;
        }
        v[n++] = (int32_t)x;
        p = end;
        while (*p == ' ') p++;
        if (*p == ',') p++;
        else if (*p && *p != ']') {
            free(v);
            return -1;
        }
        while (*p == ' ') p++;
    }
    *out = v;
    return (long)n;
}

int cmd_detokenize(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        detokenize_usage(stdout);
        return 0;
    }
    const char *model = NULL, *list = NULL;
    int skip = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ids") && i + 1 < argc) list = argv[++i];
        else if (!strcmp(argv[i], "--skip-special")) skip = 1;
        else if (argv[i][0] != '-' && !model) model = argv[i];
        else {
            fprintf(stderr, "detokenize: unexpected argument '%s'\n", argv[i]);
            detokenize_usage(stderr);
            return 2;
        }
    }
    if (!model || !list) {
        detokenize_usage(stderr);
        return 2;
    }
    int32_t *ids = NULL;
    long n = parse_ids(list, &ids);
    if (n < 0) {
        fprintf(stderr, "detokenize: --ids: '%s' is not a comma-separated list of token ids\n", list);
        return 2;
    }
    tm_tokenizer *t = load_model_tokenizer(model);
    if (!t) {
        free(ids);
        return 1;
    }
    tm_err err = {0};
    char *text = NULL;
    size_t len = 0;
    int rc = 0;
    if (tm_tok_decode(t, ids, (size_t)n, skip, &text, &len, &err) != TM_OK) {
        fprintf(stderr, "%s\n", err.msg);
        rc = 1;
    } else {
        fwrite(text, 1, len, stdout);
    }
    free(text);
    free(ids);
    tm_tok_free(t);
    return rc;
}
