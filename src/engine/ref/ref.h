/* engine/ref/ref.h: the float32 reference forward pass, the oracle every
 * fast engine is tested against. Plain C, no intrinsics; the only
 * concession to speed is that matrix products and attention heads are split
 * over n_threads pthreads (each output element is still computed by one
 * thread in one order, so results do not depend on n_threads).
 *
 *   tm_model *m;  tm_hf_model_open(&m, "models/tiny-classics-llama", NULL, &err);
 *   tm_ref *r;
 *   if (tm_ref_init(&r, m, 1024, 2, &err) != TM_OK) ...;
 *   float *logits = malloc(sizeof(float) * T * m->V);
 *   tm_ref_forward(r, prompt, T, 0, logits, 1, &err);      // [T][V], prefill
 *   tm_ref_forward(r, &next, 1, T, logits, 0, &err);       // [1][V], one decode step
 *   tm_ref_free(r); tm_model_free(m);
 *
 * It computes exactly model.h's op sequence: every weight is converted to
 * f32 at init (from F32, F16, BF16 or the quantized encodings of
 * quant/quant.h), dot products and normalisation sums accumulate in double,
 * and everything stored is f32. It keeps an f32 KV cache [L][Hk][max_ctx][Dh]
 * of post-RoPE keys and values. Every output element is computed by the same
 * arithmetic whatever the chunking, so incremental decoding and a full
 * recompute give bit-identical logits.
 *
 * LongRoPE: like transformers, a forward call whose last position p has
 * p + 1 > original_max_pos uses the long factors for all its tokens (keys
 * already in the cache keep the rotation they were stored with). */
#ifndef TM_ENGINE_REF_REF_H
#define TM_ENGINE_REF_REF_H

#include <stdint.h>

#include "core/status.h"
#include "model/model.h"

typedef struct tm_ref tm_ref;

/* tm_ref_init: convert the bound model's weights (m must outlive r only
 * until init returns: r keeps its own f32 copies) and allocate a KV cache
 * for max_ctx positions. n_threads >= 1. */
int tm_ref_init(tm_ref **out, const tm_model *m, int max_ctx, int n_threads, tm_err *err);

/* tm_ref_forward: run T tokens at positions pos0 .. pos0+T-1. The cache must
 * hold positions [0, pos0) (pos0 <= tm_ref_n_past; a smaller pos0 drops the
 * later entries, i.e. rewinds). logits: [T][V] if all_logits, else [1][V] for
 * the last token; may be NULL. Errors: a token outside [0, V), pos0 past the
 * cache (TM_E_INVALID), pos0 + T > max_ctx (TM_E_LIMIT). */
int tm_ref_forward(tm_ref *r, const int32_t *tokens /*[T]*/, int T, int pos0, float *logits, int all_logits,
                   tm_err *err);

/* tm_ref_n_past: positions held in the cache. */
int tm_ref_n_past(const tm_ref *r);

/* tm_ref_reset: empty the cache. */
void tm_ref_reset(tm_ref *r);

/* tm_ref_trace (debugging): during each later forward call of T tokens, write
 * the residual stream into residual [L+2][T][D]: slot 0 the embeddings (after
 * scaling), slot l+1 the output of layer l, slot L+1 the final norm's output.
 * NULL stops tracing. */
void tm_ref_trace(tm_ref *r, float *residual);

void tm_ref_free(tm_ref *r);

#endif
