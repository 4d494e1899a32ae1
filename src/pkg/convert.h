/* pkg/convert.h: Hugging Face model directory -> package (.tdm).
 *
 *   tm_convert_opts o;
 *   tm_convert_opts_default(&o);                 // prefill bf16, decode int4g64, chunks 64..512
 *   o.decode_enc = TM_DT_Q4G32;
 *   tm_convert_stats st;
 *   if (tm_convert("models/tiny-classics-llama", "tiny.tdm", &o, &st, &err) != TM_OK)
 *       fprintf(stderr, "%s\n", err.msg);
 *
 * What gets which encoding (docs/package-format.md, "Conversion policy"):
 *   linear weights [N][K] (attention and MLP projections, experts, an untied
 *     lm_head)        the stage's encoding; one shared copy when both stages
 *                     use the same one. A shape the encoding cannot hold
 *                     (int4 needs K % 32 == 0, int4g64 K % 64 == 0) falls back
 *                     int4g64 -> int4g32 -> int8, counted in stats.fallbacks.
 *   embeddings        one shared copy in bf16 (f16 stays f16): rows are
 *                     gathered, and a tied lm_head is the embedding itself
 *                     (the model binder maps it so).
 *   the output head   (lm_head, tied or not) when the decode stage is
 *                     quantized: its decode copy in head_enc (default: int6g64
 *                     behind an int4 or int6 decode stage, int8 per channel
 *                     behind int8: the logits are the most sensitive product,
 *                     and as llama.cpp keeps output.weight at 6 bits, Q6_K, in
 *                     Q4_0; int6g64 has 6.25 bits, and where K % 64 != 0 the
 *                     head falls back to int8); a tied head gets this as its
 *                     own decode-only record, "lm_head.weight". head_enc = the
 *                     decode encoding streams 4-bit heads (fewer bytes per
 *                     token, higher KL).
 *   MoE routers       one shared copy in bf16 (f16 stays f16): routing is
 *                     sensitive to small errors, and the matrix is tiny.
 *   norms and biases  one shared copy in f32.
 * Tensors of the checkpoint the architecture does not use are skipped
 * (counted in stats.skipped).
 *
 * Memory: one tensor at a time from the memory-mapped safetensors (the pages
 * of a finished tensor are released), one scratch buffer the size of the
 * largest encoded tensor, and the writer's records: peak RSS stays near the
 * largest tensor, not the model. The output is written atomically. */
#ifndef TM_PKG_CONVERT_H
#define TM_PKG_CONVERT_H

#include <signal.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"

#define TM_CONVERT_MAX_CHUNKS 16

typedef struct tm_convert_progress {
    int tensors_done, tensors_total;
    uint64_t bytes_done, bytes_total;   /* input (checkpoint) bytes */
    double seconds;                     /* since the start */
    const char *current;                /* the tensor just finished */
} tm_convert_progress;

/* head_enc's default: the head at 6 bits behind a 4- or 6-bit decode stage,
 * 8 behind an 8-bit one (F32 is never a head encoding) */
#define TM_CONVERT_HEAD_AUTO TM_DT_F32

typedef struct tm_convert_opts {
    tm_dtype prefill_enc;               /* Q8PC (default: W8A8 on VNNI/AMX), BF16, F16, Q4PC */
    tm_dtype decode_enc;                /* Q4G64 (default), Q4G32, Q8PC, BF16, F16 */
    tm_dtype head_enc;                  /* the decode stage's lm_head when decode_enc is quantized:
                                           TM_CONVERT_HEAD_AUTO (default: tm_convert_head_enc),
                                           Q8PC, Q6G64, Q4G64, Q4G32 */
    int chunks[TM_CONVERT_MAX_CHUNKS];  /* prefill chunk sizes T, ascending; default 64 128 256 512 */
    int n_chunks;
    int stateful, stateless;            /* which function variants to list (default both) */
    int clip_search;                    /* quantizer's per-group scale search (slower) */
    int threads;                        /* quantization threads (default 2) */
    /* (optional) called after each tensor; default: none */
    void (*progress)(void *ctx, const tm_convert_progress *p);
    void *progress_ctx;
    /* (optional) polled between tensors: nonzero stops the conversion with
     * TM_E_CANCELLED, removing the temporary file; default NULL. A signal
     * handler may set it. */
    const volatile sig_atomic_t *cancel;
} tm_convert_opts;

typedef struct tm_convert_stats {
    int tensors;                        /* checkpoint tensors converted */
    int skipped;                        /* checkpoint tensors the model does not use */
    int records;                        /* tensor records written (shared copies count once) */
    int fallbacks;                      /* matrices stored in a fallback encoding (see above) */
    uint64_t bytes_in, bytes_out;       /* checkpoint bytes read, package bytes written */
    double seconds;
} tm_convert_stats;

void tm_convert_opts_default(tm_convert_opts *o);

/* tm_convert_check_opts: TM_OK, or TM_E_INVALID naming the bad option. */
int tm_convert_check_opts(const tm_convert_opts *o, tm_err *err);

/* tm_convert_head_enc: the output head's decode encoding o asks for
 * (head_enc, or its default by decode_enc), before any fallback by shape */
tm_dtype tm_convert_head_enc(const tm_convert_opts *o);

/* tm_convert: convert hf_dir (config.json, *.safetensors, tokenizer.json, ...)
 * into the package out_path. st (optional) receives the figures. */
int tm_convert(const char *hf_dir, const char *out_path, const tm_convert_opts *o, tm_convert_stats *st,
               tm_err *err);

#endif
