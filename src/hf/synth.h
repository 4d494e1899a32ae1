/* hf/synth.h: synthetic Hugging Face model directories with real shapes.
 *
 *   tm_synth_write("llama-3.2-1b", "/tmp/l1b", 1234, &err);
 *
 * Writes DIR/config.json (a real config of that architecture),
 * DIR/model.safetensors (every tensor bf16, seeded N(0, 0.02); norm weights
 * 1), DIR/tokenizer.json (a byte-level BPE with exactly vocab_size entries:
 * 256 byte symbols, special tokens, then unreachable filler pieces: enough to
 * encode any text; benchmarks feed ids), tokenizer_config.json and
 * generation_config.json. Each file is written atomically. Used wherever
 * speed is measured on real shapes, since real weights cannot be
 * downloaded here. */
#ifndef TM_HF_SYNTH_H
#define TM_HF_SYNTH_H

#include <stdint.h>

#include "core/status.h"

/* NULL-terminated preset names ("llama-3.2-1b", "qwen2.5-0.5b", ...). */
const char *const *tm_synth_presets(void);
/* A one-line description of a preset ("Llama 3.2 1B: 1.24 B params, ..."), NULL if unknown. */
const char *tm_synth_describe(const char *preset);

int tm_synth_write(const char *preset, const char *out_dir, uint64_t seed, tm_err *err);
/* the same with the preset's first `layers` layers only (0: all of them; more than the preset has: TM_E_INVALID):
 * a big model's shape at a size a measurement can write and hold, its per-layer figures unchanged */
int tm_synth_write_layers(const char *preset, const char *out_dir, uint64_t seed, int layers, tm_err *err);

#endif
