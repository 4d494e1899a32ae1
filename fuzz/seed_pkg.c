/* fuzz/seed_pkg.c: writes fuzz_pkg's seed packages (fuzz/corpus/pkg/) with
 * the package writer, so they follow the current format version. Not a fuzz
 * target (the Makefile builds fuzz/fuzz_*.c only). Run from the repository
 * root after `make`:
 *   cc -D_GNU_SOURCE -Iinclude -Isrc -o /tmp/seed_pkg fuzz/seed_pkg.c build/libtandem.a \
 *      -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread && /tmp/seed_pkg fuzz/corpus/pkg
 * Three seeds: no tensors; one int8 tensor; bf16, int4g64 and int6g64 copies
 * of small weights per stage, with a document and a function. Alignment 64
 * keeps each near 1 KB. */
#include <stdio.h>
#include <string.h>

#include "pkg/pkg.h"
#include "quant/quant.h"

static int add(tm_pkg_writer *w, const char *name, tm_dtype dt, int N, int K, unsigned stages, tm_err *err)
{
    float src[2 * 64];
    for (int i = 0; i < N * K; i++) src[i] = (float)((i * 7) % 13 - 6) / 8.0f;
    unsigned char data[512];
    union { float f[16]; uint16_t h[32]; } scales; /* f32 (int8) or f16 (int4, int6) */
    if (tm_quant_quantize(dt, src, N, K, data, &scales, NULL, err) != TM_OK) return 1;
    tm_tensor t = {.name = name, .dtype = dt, .ndim = 2, .shape = {N, K}, .data = data,
                   .nbytes = tm_quant_data_bytes(dt, N, K), .scales = tm_quant_is_quantized(dt) ? (void *)&scales : NULL};
    return tm_pkg_writer_add_tensor(w, &t, stages, err) != TM_OK;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: seed_pkg DIR\n");
        return 2;
    }
    const char *names[3] = {"empty.pkg", "int8.pkg", "small.pkg"};
    for (int s = 0; s < 3; s++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", argv[1], names[s]);
        tm_err err = {0};
        tm_pkg_writer *w;
        int bad = tm_pkg_writer_open(&w, path, 64, &err) != TM_OK;
        if (!bad && s == 1) bad = add(w, "w", TM_DT_Q8PC, 2, 8, TM_PKG_PREFILL | TM_PKG_DECODE, &err);
        if (!bad && s == 2) {
            const char *cfg = "{\"model_type\": \"llama\"}";
            bad = add(w, "a", TM_DT_BF16, 2, 32, TM_PKG_PREFILL, &err) || add(w, "a", TM_DT_Q4G64, 2, 64, TM_PKG_DECODE, &err) ||
                  add(w, "h", TM_DT_Q6G64, 1, 64, TM_PKG_DECODE, &err) ||
                  tm_pkg_writer_add_doc(w, "config.json", cfg, strlen(cfg), &err) != TM_OK;
            const tm_pkg_io in = {"tokens", TM_DT_I32, 1, {{"T", 0}}};
            const tm_pkg_io out = {"logits", TM_DT_F32, 2, {{NULL, 1}, {"V", 0}}};
            const tm_pkg_function fn = {"prefill_64", TM_PKG_FN_PREFILL, "matrix", 64, 1, 1, 1, &in, &out};
            if (!bad) bad = tm_pkg_writer_add_function(w, &fn, &err) != TM_OK;
        }
        if (!bad) bad = tm_pkg_writer_set_meta(w, "converter", "{\"name\": \"seed_pkg\"}", &err) != TM_OK;
        if (!bad) bad = tm_pkg_writer_finish(w, &err) != TM_OK;
        if (bad) {
            fprintf(stderr, "seed_pkg: %s: %s\n", path, err.msg);
            return 1;
        }
    }
    return 0;
}
