/* runtime/lookup.h: prompt lookup, the drafts of speculative decoding without a draft model
 * (tandem_session_opts.lookup; llama.cpp's lookup decoding, vLLM's "ngram" method).
 *
 *   int32_t draft[16];
 *   int k = tm_lookup_draft(hist, n, TM_LOOKUP_NGRAM_MAX, TM_LOOKUP_NGRAM_MIN, draft, kmax);
 *   // feed hist[n - 1], draft[0 .. k) in one engine call; keep the drafts the model's own picks match
 *
 * Design block
 * ------------
 * Text that repeats what came before (code edited in place, a document quoted or summarized, a
 * template filled) lets the tokens so far predict the next few: the last g tokens of the history
 * (prompt and output, g from ngram_max down to ngram_min) are looked up among the earlier ones, and
 * the tokens that followed their latest earlier occurrence are the draft, up to kmax of them, never
 * past the history's end. The scheduler (sched.c, spec_step) feeds the current token and the draft
 * to the decode engine as one exact prefill chunk at the sequence's position, takes every row's
 * logits (caps.row_logits), and keeps the longest run of drafts each equal to the greedy pick of the
 * row before it, plus the pick after that run: 1 to k + 1 tokens for one pass over the weights, which
 * a decode step reads anyway (bandwidth-bound: on the CPU engines' int4 GEMV 8 rows cost about what one
 * does). The KV rows written for rejected drafts lie past the sequence's end and are written again
 * before anything reads them. Greedy requests only (the draft is checked against the argmax); the
 * rows come from the prefill kernels, so the output equals plain decoding's up to their rounding. */
#ifndef TM_RUNTIME_LOOKUP_H
#define TM_RUNTIME_LOOKUP_H

#include <stdint.h>

#define TM_LOOKUP_MAX 15       /* most drafted tokens a step (a chunk of 16 rows) */
#define TM_LOOKUP_NGRAM_MAX 4  /* the longest suffix looked up */
#define TM_LOOKUP_NGRAM_MIN 2  /* the shortest (a single token repeats too often to predict) */

/* the draft for history hist [n] (the last token is the one the next step feeds): draft [0, k) := the
 * tokens that followed the latest earlier occurrence of hist's last g tokens, the longest g in
 * [ngram_min, ngram_max] that occurs; k <= kmax; 0 where none occurs */
int tm_lookup_draft(const int32_t *hist, int n, int ngram_max, int ngram_min, int32_t *draft, int kmax);

#endif
