/* cli/cmd_convert.c: `tandem convert HF_DIR -o MODEL.tdm [options]`. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "pkg/convert.h"

static void convert_usage(FILE *f)
{
    fputs("usage: tandem convert HF_DIR -o MODEL.tdm [--prefill-enc bf16|f16|int8|int4pc]\n"
          "         [--decode-enc int4g64|int4g32|int6g64|int8|bf16|f16] [--head-enc int8|int6g64|int4g64|int4g32]\n"
          "         [--chunks 64,128,256,512]"
" [--functions stateful,stateless] [--clip-search] [--threads N]\n\n"
          "Convert a Hugging Face model directory (config.json, *.safetensors, tokenizer.json,\n"
          "...) into one package file holding both stages' weights. Linear weights get the\n"
          "stage's encoding (one shared copy when the two stages agree); embeddings stay\n"
          "bf16, norms and biases f32. Defaults: prefill int8, decode int4g64, chunks\n"
          "64,128,256,512, stateful and stateless functions, 2 threads. A quantized decode\n"
          "stage keeps the output head (lm_head, tied or not) in --head-enc: by default int6g64\n"
          "behind int4 or int6 (as llama.cpp's Q4_0 keeps it in Q6_K), int8 behind int8.\n"
          "The file appears"
          " only when complete. A progress bar is drawn when stderr is a terminal.\n",
          f);
}

static int parse_enc(const char *s, tm_dtype *out)
{
    int d = tm_dtype_from_name(s);
    if (d < 0) return -1;
    *out = (tm_dtype)d;
    return 0;
}

static int parse_chunks(const char *s, tm_convert_opts *o)
{
    o->n_chunks = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 65536 || o->n_chunks >= TM_CONVERT_MAX_CHUNKS) return -1;
        o->chunks[o->n_chunks++] = (int)v;
        if (*end == ',') end++;
        else if (*end) return -1;
        s = end;
    }
    return o->n_chunks ? 0 : -1;
}

static int parse_functions(const char *s, tm_convert_opts *o)
{
    o->stateful = strstr(s, "stateful") != NULL;
    o->stateless = strstr(s, "stateless") != NULL;
    /* every comma-separated word must be one of the two */
    for (const char *p = s; *p;) {
        size_t n = strcspn(p, ",");
        if (!((n == 8 && !strncmp(p, "stateful", 8)) || (n == 9 && !strncmp(p, "stateless", 9)))) return -1;
        p += n + (p[n] == ',');
    }
    return 0;
}

static volatile sig_atomic_t interrupted;
static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void progress(void *ctx, const tm_convert_progress *p)
{
    (void)ctx;
    double frac = p->bytes_total ? (double)p->bytes_done / (double)p->bytes_total : 1;
    double rate = p->seconds > 0 ? (double)p->bytes_done / p->seconds : 0;
    double eta = rate > 0 ? (double)(p->bytes_total - p->bytes_done) / rate : 0;
    char bar[31];
    int fill = (int)(frac * 30);
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
    bar[30] = '\0';
    fprintf(stderr, "\r[%s] %d/%d tensors  %.2f/%.2f GB  %.0f MB/s  ETA %d:%02d ", bar, p->tensors_done,
            p->tensors_total, (double)p->bytes_done / 1e9, (double)p->bytes_total / 1e9, rate / 1e6,
            (int)eta / 60, (int)eta % 60);
    if (p->tensors_done == p->tensors_total) fputc('\n', stderr);
}

int cmd_convert(int argc, char **argv)
{
    tm_convert_opts o;
    tm_convert_opts_default(&o);
    const char *dir = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            convert_usage(stdout);
            return 0;
        } else if (!strcmp(a, "-o") && v) out = argv[++i];
        else if (!strcmp(a, "--prefill-enc") && v) bad = parse_enc(argv[++i], &o.prefill_enc);
        else if (!strcmp(a, "--decode-enc") && v) bad = parse_enc(argv[++i], &o.decode_enc);
        else if (!strcmp(a, "--head-enc") && v) bad = parse_enc(argv[++i], &o.head_enc);
        else if (!strcmp(a, "--chunks") && v) bad = parse_chunks(argv[++i], &o);
        else if (!strcmp(a, "--functions") && v) bad = parse_functions(argv[++i], &o);
        else if (!strcmp(a, "--threads") && v) o.threads = atoi(argv[++i]);
        else if (!strcmp(a, "--clip-search")) o.clip_search = 1;
        else if (a[0] != '-' && !dir) dir = a;
        else {
            fprintf(stderr, "tandem convert: unexpected argument '%s'\n", a);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "tandem convert: %s: bad value '%s'\n", a, argv[i]);
            return 2;
        }
    }
    if (!dir || !out) {
        convert_usage(stderr);
        return 2;
    }
    tm_err err = {0};
    if (tm_convert_check_opts(&o, &err) != TM_OK) {
        fprintf(stderr, "tandem convert: %s\n", err.msg);
        return 2;
    }
    if (isatty(STDERR_FILENO)) o.progress = progress;
    /* Ctrl-C / SIGTERM: stop between tensors and remove the temporary file */
    o.cancel = &interrupted;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    tm_convert_stats st;
    int rc = tm_convert(dir, out, &o, &st, &err);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (rc != TM_OK) {
        if (o.progress) fputc('\n', stderr);
        fprintf(stderr, "tandem convert: %s\n", err.msg);
        return 1;
    }
    printf("wrote %s: %d tensors (%d records), %.1f MB from %.1f MB in %.2f s (%.0f MB/s of input)\n", out, st.tensors,
           st.records, (double)st.bytes_out / 1e6, (double)st.bytes_in / 1e6, st.seconds,
           st.seconds > 0 ? (double)st.bytes_in / 1e6 / st.seconds : 0);
    if (st.fallbacks)
        printf("note: %d matrices use a fallback encoding (their K does not fit the requested one)\n", st.fallbacks);
    if (st.skipped) printf("note: %d checkpoint tensors are not used by the model and were skipped\n", st.skipped);
    return 0;
}
