/* text/vocab_trie.h: the vocabulary as a byte trie, for constrained output
 * (JSON mode, text/json_gate.h; grammars, text/grammar.h). A constraint is a
 * byte automaton; a mask is the set of tokens whose every byte it takes from
 * its current state.
 *
 *   tm_vocab_trie *t;
 *   tm_vocab_trie_new(&t, tok, V, &err);           // once per tokenizer (0.2 s for 151k tokens)
 *   tm_vocab_mask(t, tag, &state, sizeof state, step, ctx, logits);  // -inf for refused tokens
 *   tm_vocab_take(t, &state, sizeof state, step, ctx, id);           // the drawn token's bytes
 *
 * Design block
 * ------------
 * Every token's bytes as they appear mid-text (tm_tok_token_bytes) are sorted
 * and laid out as a trie; special tokens and tokens with no bytes are not in
 * it, so a mask never allows them. tm_vocab_allowed walks the trie depth
 * first from the automaton's state, copying the state (a value of at most
 * TM_VOCAB_MAX_STATE bytes) at each edge: a subtree whose prefix the
 * automaton refuses is skipped whole, so a step costs the accepted
 * prefixes, not V x token length. tm_vocab_mask keeps the last
 * TM_VOCAB_CACHE masks keyed by (tag, state bytes), least recently used
 * replaced: a step in a state seen before (a long string's inside, say)
 * reuses its mask. The tag tells constraints apart (JSON mode uses 0, each
 * grammar matcher its own serial), so a state's bytes are compared only with
 * the same automaton's.
 *
 * The trie is read-only after tm_vocab_trie_new, except the mask cache, which
 * has its own lock (held through a walk: a step callback need not be
 * thread-safe for other callers of the same trie, only for its own ctx). */
#ifndef TM_TEXT_VOCAB_TRIE_H
#define TM_TEXT_VOCAB_TRIE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct tm_tokenizer;

#define TM_VOCAB_MAX_STATE 32    /* bytes of an automaton's state */
#define TM_VOCAB_MAX_TOKEN 256   /* longer tokens are left out (none in the usual vocabularies) */
#define TM_VOCAB_CACHE 8         /* masks kept */

typedef struct tm_vocab_trie tm_vocab_trie;

/* tm_vocab_step: the automaton takes byte c: 1 and *state advanced, 0 (state unchanged) if it
 * refuses c, a negative status on failure (the walk stops and returns it). */
typedef int (*tm_vocab_step)(void *ctx, void *state, unsigned char c);

/* tm_vocab_trie_new: the trie of tokenizer t's tokens with ids below V (the model's logits). */
int tm_vocab_trie_new(tm_vocab_trie **out, const struct tm_tokenizer *t, int32_t V, tm_err *err);
void tm_vocab_trie_free(tm_vocab_trie *t);
int32_t tm_vocab_trie_V(const tm_vocab_trie *t);

/* tm_vocab_token: token id's bytes (*len of them), or NULL (len 0) for an id not in the trie. */
const uint8_t *tm_vocab_token(const tm_vocab_trie *t, int32_t id, uint32_t *len);

/* tm_vocab_allowed: ok [V] := 1 for every id whose bytes step takes one by one from state, 0 for
 * the others. Returns TM_OK or a step's failure. */
int tm_vocab_allowed(const tm_vocab_trie *t, const void *state, size_t state_size, tm_vocab_step step,
                     void *ctx, uint8_t *ok);

/* tm_vocab_mask: logits [V] := -inf for every id tm_vocab_allowed refuses, through the cache
 * (tag and state's bytes its key). */
int tm_vocab_mask(tm_vocab_trie *t, uint64_t tag, const void *state, size_t state_size, tm_vocab_step step,
                  void *ctx, float *logits);

/* tm_vocab_take: state takes id's bytes: 1 if it took them all (state advanced), 0 if one is
 * refused or id is not in the trie (state unchanged), a step's failure. */
int tm_vocab_take(const tm_vocab_trie *t, void *state, size_t state_size, tm_vocab_step step, void *ctx,
                  int32_t id);

#endif
