/* text/json_gate.h: JSON mode. The output is constrained, token by token, to
 * one JSON object (RFC 8259 text whose top-level value is an object, as
 * OpenAI's response_format {"type": "json_object"} promises).
 *
 *   tm_vocab_trie *t;                           // once per tokenizer (text/vocab_trie.h)
 *   tm_vocab_trie_new(&t, tok, V, &err);
 *   tm_jsm m;
 *   tm_jsm_init(&m);
 *   for (;;) {
 *       if (tm_jsm_done(&m)) break;             // the object is closed: stop
 *       tm_json_mask(t, &m, logits);            // -inf for every token that would break it
 *       id = sample(logits);
 *       tm_json_advance(t, &m, id);             // the automaton takes the token's bytes
 *   }
 *   tm_vocab_trie_free(t);
 *
 * Design block
 * ------------
 * The automaton (tm_jsm) reads bytes: a stack of up to TM_JSM_MAX_DEPTH
 * containers (one bit each: object or array), what the grammar expects next
 * (a value, a key, ':', ',' or a closing bracket), and inside a token of the
 * grammar where it is (a string with its escapes, \u escapes' four hex digits and UTF-8
 * continuation bytes checked: overlong forms, surrogates and code points
 * past U+10FFFF refused as RFC 3629 does; a number by JSON's syntax, which a
 * delimiter ends; true / false / null by their letters). Whitespace between
 * tokens is allowed up to TM_JSM_MAX_WS bytes in a row with one line break
 * among them (pretty-printing's newline and indent, as llama.cpp's JSON
 * grammar allows), so the model cannot pad forever. It is a small value
 * type: a copy is a checkpoint.
 *
 * Masks walk the vocabulary trie (text/vocab_trie.h) from the automaton's
 * state, which is a value: the trie copies it at each edge and keeps the
 * last masks by its bytes (tag 0), so a step in the same state (a long
 * string's inside, say) reuses one.
 *
 * Invariants
 *  1. tm_json_mask allows a token only if the automaton accepts every byte
 *     of it from the current state (tests/test_json_gate.c checks the masks
 *     against feeding each token's bytes one by one).
 *  2. Any text the automaton accepts is a prefix of a JSON object, and when
 *     tm_jsm_done says so, it is one (checked against cJSON).
 *  3. From any accepted state some byte continues it (the automaton never
 *     paints itself into a corner: closing brackets are always reachable,
 *     the depth limit refuses new containers, not closings).
 *  4. The automaton is a plain value: no allocation, no shared state. */
#ifndef TM_TEXT_JSON_GATE_H
#define TM_TEXT_JSON_GATE_H

#include <stdint.h>

#include "core/status.h"

#define TM_JSM_MAX_DEPTH 64  /* nested objects and arrays */
#define TM_JSM_MAX_WS 24     /* whitespace bytes in a row (with at most one line break) */

typedef struct tm_jsm {
    uint64_t stack;          /* bit i: container i is an object (1) or an array (0) */
    uint8_t depth;           /* containers open */
    uint8_t mode;            /* what comes next (json_gate.c's J_*) */
    uint8_t sub;             /* inside a token: literal letter index, \u digits left, ... */
    uint8_t u8_need;         /* UTF-8 continuation bytes still to come in a string */
    uint8_t u8_lo, u8_hi;    /* the range of the next continuation byte */
    uint8_t ws;              /* whitespace bytes in a row */
    uint8_t flags;           /* JSM_KEY: the string being read is a key; JSM_LF, JSM_CR: the
                                whitespace run has had its line break ("\n", "\r" or "\r\n") */
} tm_jsm;

void tm_jsm_init(tm_jsm *m);
/* tm_jsm_feed: 1 and m advanced if byte c may come next, 0 (m unchanged) if not. */
int tm_jsm_feed(tm_jsm *m, unsigned char c);
/* tm_jsm_done: the text so far is one whole JSON object. */
int tm_jsm_done(const tm_jsm *m);

struct tm_vocab_trie;

/* tm_json_mask: logits [V] := -inf for every id the automaton in state m
 * refuses (invariant 1), and for ids not in the trie. Returns TM_OK or
 * TM_E_NOMEM. */
int tm_json_mask(struct tm_vocab_trie *t, const tm_jsm *m, float *logits);

/* tm_json_advance: m takes token id's bytes; 0 if it refuses one (m then
 * unchanged), 1 if it took them all. */
int tm_json_advance(const struct tm_vocab_trie *t, tm_jsm *m, int32_t id);

#endif
