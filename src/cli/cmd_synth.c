/* cli/cmd_synth.c: `tandem synth --like PRESET -o DIR`: a synthetic HF model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "hf/synth.h"

static void synth_usage(FILE *f)
{
    fputs("usage: tandem synth --like PRESET -o DIR [--seed S] [--layers N]\n"
          "       tandem synth --list\n\n"
          "Write a Hugging Face model directory with the real config of PRESET, random\n"
          "bf16 weights (seeded, N(0, 0.02), norms 1) and a byte-level tokenizer of the\n"
          "right vocabulary size. Used to measure speed on real shapes. --layers N keeps\n"
          "the preset's first N layers (a big model's per-layer shape at a size that fits).\n\npresets:\n", f);
    for (const char *const *p = tm_synth_presets(); *p; p++) fprintf(f, "  %-16s %s\n", *p, tm_synth_describe(*p));
}

int cmd_synth(int argc, char **argv)
{
    const char *like = NULL, *out = NULL;
    unsigned long long seed = 1234;
    int layers = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help") || !strcmp(argv[i], "--list")) {
            synth_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--like") && i + 1 < argc) like = argv[++i];
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 4096) {
                fprintf(stderr, "tandem synth: --layers '%s' is not a layer count\n", argv[i]);
                return 2;
            }
            layers = (int)v;
        }
        else {
            fprintf(stderr, "tandem synth: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!like || !out) {
        synth_usage(stderr);
        return 2;
    }
    tm_err err = {0};
    if (tm_synth_write_layers(like, out, seed, layers, &err) != TM_OK) {
        fprintf(stderr, "tandem synth: %s\n", err.msg);
        return 1;
    }
    printf("wrote %s (%s)\n", out, tm_synth_describe(like));
    return 0;
}
