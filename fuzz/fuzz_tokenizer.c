/* fuzz/fuzz_tokenizer.c: the input is a tokenizer.json. If it loads, a few
 * fixed strings are encoded, decoded and stream-decoded with it; bytes after a
 * NUL in the input are one more text (so the fuzzer also mutates the text). Loading must
 * reject hostile JSON with an error (no crash, no huge allocation, no
 * super-linear blow-up), and a tokenizer that loads must run.
 *
 *   make fuzz && build-fuzz/bin/fuzz_tokenizer -max_total_time=300 -rss_limit_mb=2048 \
 *       -max_len=8192 fuzz/corpus/tokenizer                                       */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"

static const char *texts[7] = {
    "Hello world! It's 2024, isn't it?",
    "  leading and trailing  ",
    "<s>special</s> <|endoftext|> [CLS]",
    "caf\xc3\xa9 \xef\xac\x81 \xe2\x91\xa0 \xc4\xb0 na\xc3\xafve 123456",
    "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xe4\xb8\xad\xe6\x96\x87 \xed\x95\x9c",
    "",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tm_err err = {0};
    tm_tokenizer *t = NULL;
    const uint8_t *nul = memchr(data, 0, size);
    size_t json_len = nul ? (size_t)(nul - data) : size;
    char *extra = NULL;
    if (nul) {
        size_t n = size - json_len - 1;
        extra = malloc(n + 1);
        if (!extra) return 0;
        memcpy(extra, nul + 1, n);
        extra[n] = 0; /* strlen stops at a further NUL: fine */
    }
    texts[6] = extra ? extra : "";
    if (tm_tok_load_from_string(&t, (const char *)data, json_len, "fuzz.json", &err) != TM_OK) {
        free(extra);
        if (!err.msg[0] || strncmp(err.msg, "fuzz.json", 9) != 0) __builtin_trap(); /* errors name the file */
        return 0;
    }
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (tm_tok_encode(t, texts[i], strlen(texts[i]), (int)(i & 1), &ids, &n, &err) != TM_OK) continue;
        char *text = NULL;
        size_t len = 0;
        if (tm_tok_decode(t, ids, n, (int)(i & 1), &text, &len, &err) == TM_OK) {
            /* the stream must reproduce the full decode of valid text (see tok_stream.c
             * for the one inexact case, an invalid byte-fallback run) */
            int exact = memmem(text, len, "\xEF\xBF\xBD", 3) == NULL;
            tm_detok_stream *s = tm_detok_stream_new(t, (int)(i & 1));
            size_t got = 0;
            int ok = s != NULL;
            for (size_t k = 0; k <= n && ok; k++) {
                char *p;
                size_t pl;
                int rc = k < n ? tm_detok_stream_push(s, ids[k], &p, &pl, &err) : tm_detok_stream_flush(s, &p, &pl, &err);
                if (rc != TM_OK) {
                    ok = 0;
                    break;
                }
                if (exact && (got + pl > len || memcmp(text + got, p, pl) != 0)) __builtin_trap();
                got += pl;
                free(p);
            }
            if (exact && ok && got != len) __builtin_trap();
            tm_detok_stream_free(s);
            free(text);
        }
        /* each token's bytes, and an id past the vocabulary (""): no crash, NUL-terminated */
        for (size_t k = 0; k <= n && k < 16; k++) {
            char *b = NULL;
            size_t bl = 0;
            int32_t id = k < n ? ids[k] : tm_tok_vocab_size(t) + 1;
            if (tm_tok_token_bytes(t, id, &b, &bl, &err) == TM_OK && (!b || b[bl] != 0 || (k == n && bl))) __builtin_trap();
            free(b);
        }
        free(ids);
    }
    tm_tok_free(t);
    free(extra);
    return 0;
}
