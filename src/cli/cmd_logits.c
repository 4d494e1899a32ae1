/* cli/cmd_logits.c: `tandem logits MODEL --tokens 1,2,3 --out FILE`: the
 * reference engine's float32 logits [T][V] for every position, written
 * little-endian, atomically (for comparing against other engines and HF). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/fileio.h"
#include "engine/ref/ref.h"
#include "hf/hf_model.h"
#include "runtime/rt_model.h"

#define LOGITS_MAX_TOKENS 1000000

static void logits_usage(FILE *f)
{
    fputs("usage: tandem logits MODEL --tokens ID,ID,... --out FILE [--threads N] [--config PATH]\n\n"
          "Run the float32 reference forward pass over the token ids (positions 0..T-1)\n"
          "and write the logits of every position to FILE: float32 little-endian,\n"
          "row-major [T][V], no header. MODEL is a package (the reference runs over its prefill\n"
          "stage's weights) or a Hugging Face directory (config.json +\n"
          "model.safetensors or its sharded index); --config reads another config file\n"
          "for the same weights.\n", f);
}

/* "1,2,3" → ids; returns the count, or -1 with a message */
static int parse_tokens(const char *s, int32_t **out)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    if (cap > LOGITS_MAX_TOKENS) {
        fprintf(stderr, "tandem logits: --tokens: more than %d tokens\n", LOGITS_MAX_TOKENS);
        return -1;
    }
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) return -1;
    int n = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end != ',' && *end != '\0')) {
            fprintf(stderr, "tandem logits: --tokens: '%s' is not a comma-separated list of token ids (at token %d)\n",
                    s, n);
            free(ids);
            return -1;
        }
        ids[n++] = (int32_t)v;
        if (*end == '\0') break;
        p = end + 1;
    }
    *out = ids;
    return n;
}

int cmd_logits(int argc, char **argv)
{
    const char *model = NULL, *tokens = NULL, *out = NULL, *config = NULL;
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    if (threads > 16) threads = 16;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            logits_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) {
            tokens = argv[++i];
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            config = argv[++i];
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            char *end;
            threads = strtol(argv[++i], &end, 10);
            if (*end || threads < 1 || threads > 256) {
                fprintf(stderr, "tandem logits: --threads: '%s' is not a number in [1, 256]\n", argv[i]);
                return 2;
            }
        } else if (argv[i][0] != '-' && !model) {
            model = argv[i];
        } else {
            fprintf(stderr, "tandem logits: unexpected argument '%s'\n", argv[i]);
            logits_usage(stderr);
            return 2;
        }
    }
    if (!model || !tokens || !out) {
        logits_usage(stderr);
        return 2;
    }
    int32_t *ids = NULL;
    int T = parse_tokens(tokens, &ids);
    if (T < 0) return 2;
    tm_err err = {0};
    tm_model *m = NULL;
    tm_ref *r = NULL;
    float *logits = NULL;
    int rc;
    tm_rt_model *rm = NULL;
    const tm_model *mm;
    if (tm_is_dir(model)) {
        if ((rc = tm_hf_model_open(&m, model, config, &err))) goto done;
        mm = m;
    } else {
        /* a package: the fp32 reference over its prefill stage's weights (the
         * checkpoint's own values when that stage is bf16, the default) */
        if ((rc = tm_rt_model_open(&rm, model, &err))) goto done;
        mm = rm->prefill;
    }
    if ((rc = tm_ref_init(&r, mm, T, (int)threads, &err))) goto done;
    logits = malloc((size_t)T * mm->V * sizeof(float));
    if (!logits) {
        rc = tm_errf(&err, TM_E_NOMEM, "out of memory for %d x %d logits", T, mm->V);
        goto done;
    }
    if ((rc = tm_ref_forward(r, ids, T, 0, logits, 1, &err))) goto done;
    tm_afile af;
    if ((rc = tm_afile_open(&af, out, &err))) goto done;
    if (fwrite(logits, sizeof(float), (size_t)T * mm->V, af.f) != (size_t)T * mm->V) {
        tm_afile_abort(&af);
        rc = tm_errf(&err, TM_E_IO, "%s: write failed", out);
        goto done;
    }
    rc = tm_afile_commit(&af, &err);
done:
    if (rc) fprintf(stderr, "tandem logits: %s\n", err.msg);
    free(ids);
    free(logits);
    tm_ref_free(r);
    tm_model_free(m);
    tm_rt_model_free(rm);
    return rc ? 1 : 0;
}
