/* text/sampler.h: next-token sampling (penalties, temperature, top-k, top-p,
 * min-p, a seeded PRNG) and stop conditions (EOS ids, stop strings).
 *
 *   tm_sampler_params p;
 *   tm_sampler_params_default(&p);
 *   p.temperature = 0.8f; p.top_k = 40; p.top_p = 0.95f; p.seed = 42;
 *   tm_err err = {0};
 *   tm_sampler *s = tm_sampler_new(&p, V, &err);          // NULL: err.msg says why
 *   tm_sampler_accept_prompt(s, prompt_ids, n_prompt);    // for repetition_penalty
 *   const int32_t eos[] = {2};
 *   const char *stops[] = {"\nUser:"};
 *   tm_stop *st = tm_stop_new(eos, 1, stops, 1, &err);
 *   for (;;) {
 *       float *logits = ...;                              // [V], modified in place
 *       int32_t id = tm_sampler_sample(s, logits);        // -1: no finite logit
 *       if (id < 0 || tm_stop_is_eos(st, id)) break;
 *       tm_sampler_accept(s, id);
 *       const char *out; size_t n;
 *       int stop = tm_stop_feed(st, piece_of(id), piece_len, &out, &n);
 *       fwrite(out, 1, n, stdout);                        // safe text only
 *       if (stop) break;                                  // the stop text itself is not shown
 *   }
 *   // on EOS / length: show what was held back as a possible stop prefix
 *   const char *out; size_t n;
 *   tm_stop_flush(st, &out, &n); fwrite(out, 1, n, stdout);
 *   tm_stop_free(st); tm_sampler_free(s);
 *
 * Order of application (docs/sampling.md), as in HF transformers / vLLM:
 *   1. repetition penalty (HF): for every token seen in the prompt or the
 *      output, logit > 0 ? logit / rp : logit * rp
 *   2. presence / frequency (OpenAI), output tokens only:
 *      logit -= presence * (count > 0) + frequency * count
 *   3. temperature <= 0: greedy, return the argmax (lowest id on ties); the
 *      filters below and the PRNG are skipped. Otherwise logit / temperature.
 *   4. top-k: keep the k largest (exactly k; ties broken by lower id)
 *   5. top-p: keep the shortest prefix (by probability, descending) whose mass,
 *      renormalised over what top-k kept, reaches top_p
 *   6. min-p: keep p >= min_p * p_max
 *   7. draw from what is left, renormalised, with xoshiro256** (seeded by
 *      splitmix64(seed)); one 53-bit uniform per sampled token.
 * Logits that are NaN or -inf are never chosen. The same seed and logits give
 * the same tokens; the PRNG stream is identical on every platform.
 *
 * Stop strings: tm_stop_feed() takes each newly decoded piece and returns
 * the text that is safe to show now; a suffix that could still begin a stop
 * string is held back until the next piece decides it. When a stop string
 * completes (possibly across many pieces), the text before it is returned and
 * the stop string and anything after it are dropped (OpenAI semantics). The
 * matcher works on bytes; it never splits inside a stop string, so whole
 * UTF-8 characters in give whole characters out. */
#ifndef TM_TEXT_SAMPLER_H
#define TM_TEXT_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* ---- PRNG: xoshiro256** (Blackman & Vigna), seeded through splitmix64 ---- */

typedef struct tm_rng {
    uint64_t s[4];
} tm_rng;

void tm_rng_seed(tm_rng *r, uint64_t seed);   /* s[i] = successive splitmix64 outputs */
uint64_t tm_rng_next(tm_rng *r);              /* next 64 random bits */
double tm_rng_uniform(tm_rng *r);             /* (next >> 11) * 2^-53, in [0, 1) */

/* ---- sampler ---- */

typedef struct tm_sampler_params {
    float temperature;        /* >= 0; 0 = greedy. default 1 */
    int32_t top_k;            /* keep the k most likely; <= 0 = off (default) */
    float top_p;              /* (0, 1]; 1 = off (default) */
    float min_p;              /* [0, 1]; 0 = off (default) */
    float repetition_penalty; /* > 0; 1 = off (default); prompt + output tokens */
    float presence_penalty;   /* [-2, 2]; 0 = off (default); output tokens */
    float frequency_penalty;  /* [-2, 2]; 0 = off (default); output tokens */
    uint64_t seed;            /* PRNG seed; default 0 */
} tm_sampler_params;

typedef struct tm_sampler tm_sampler;   /* opaque */

void tm_sampler_params_default(tm_sampler_params *p);

/* tm_sampler_params_check: TM_OK, or TM_E_INVALID naming the field and its
 * accepted range ("sampler: top_p = 0 is out of range (0, 1]"). */
int tm_sampler_params_check(const tm_sampler_params *p, tm_err *err);

/* tm_sampler_new: a sampler for a vocabulary of V ids (1 <= V <= 2^24).
 * NULL on bad parameters or no memory (err says which). Memory: O(k) for the
 * top-k path, O(V) scratch allocated on first use for the full-vocabulary
 * paths, O(distinct tokens) of history. */
tm_sampler *tm_sampler_new(const tm_sampler_params *p, int32_t V, tm_err *err);
void tm_sampler_free(tm_sampler *s);

/* tm_sampler_reset: forget the history and re-seed the PRNG with p->seed. */
void tm_sampler_reset(tm_sampler *s);

/* tm_sampler_accept_prompt: record prompt tokens ids [n] (repetition penalty
 * only). tm_sampler_accept: record one generated token (all penalties).
 * TM_E_INVALID if an id is outside [0, V); TM_E_NOMEM. */
int tm_sampler_accept_prompt(tm_sampler *s, const int32_t *ids, int64_t n);
int tm_sampler_accept(tm_sampler *s, int32_t id);

/* tm_sampler_penalize: steps 1-2 above, in place on logits [V] (only the
 * entries of tokens in the history change). tm_sampler_sample calls it. */
void tm_sampler_penalize(const tm_sampler *s, float *logits /*[V]*/);

/* tm_sampler_is_greedy: 1 where tm_sampler_sample is the argmax of the logits as given whatever the
 * history (temperature 0 or top_k 1, no penalty): a caller may then take tm_argmax_f32's pick
 * (core/tensor.h), or a decode engine's (engine.h, tm_decode_args.argmax), instead. */
int tm_sampler_is_greedy(const tm_sampler *s);

/* tm_sampler_sample: steps 1-7; returns the token id, or -1 if no logit is
 * finite (all NaN / -inf). logits [V] is modified (penalties). It does not
 * record the token: call tm_sampler_accept with the id you keep. */
int32_t tm_sampler_sample(tm_sampler *s, float *logits /*[V]*/);

/* ---- log-probabilities (docs/sampling.md) ---- */

#define TM_LOGPROBS_MAX 20         /* alternatives tm_logprobs reports */

/* tm_logprobs: the log-softmax of raw logits [V] (before penalties and temperature); exp in float,
 * the sum and the log in double (one ulp of float per term, so lse to ~1e-7 relative):
 * *lse = log sum_i exp(logits[i]) over the ids that can be drawn (NaN and -inf cannot; +inf counts
 * as the largest float), -inf if none can. The n_top (at most TM_LOGPROBS_MAX) most
 * likely ids go to top_ids with their log-probabilities in top_lp, most likely first (ties: lower
 * id, as the sampler orders them); returns how many (fewer where fewer ids can be drawn). */
int32_t tm_logprobs(const float *logits, int32_t V, int32_t n_top, int32_t *top_ids, float *top_lp, double *lse);

/* tm_logprob_value: one id's log-probability from its raw logit and tm_logprobs' lse. */
double tm_logprob_value(float logit, double lse);

/* ---- stop conditions ---- */

#define TM_STOP_MAX_STRINGS 64     /* stop strings per request */
#define TM_STOP_MAX_LEN 1024       /* bytes per stop string */
#define TM_STOP_MAX_EOS 1024       /* EOS ids per request */

typedef struct tm_stop tm_stop;    /* opaque */

/* tm_stop_new: eos [n_eos] ids (>= 0) that end generation; stops [n_stops]
 * NUL-terminated, non-empty strings. Either list may be empty. NULL on bad
 * input, naming it ("stop[2]: empty string"), or no memory. */
tm_stop *tm_stop_new(const int32_t *eos, int n_eos, const char *const *stops, int n_stops, tm_err *err);
void tm_stop_free(tm_stop *st);

/* tm_stop_reset: drop held text and the stopped state (same lists). */
void tm_stop_reset(tm_stop *st);

int tm_stop_is_eos(const tm_stop *st, int32_t id);

/* tm_stop_feed: add a decoded piece [len] (need not be NUL-terminated).
 * *emit / *emit_len get the text safe to show now. *emit points into st's
 * buffer or, when there are no stop strings, into piece itself: use it
 * before the next call on st and before freeing piece. Returns 1 if a stop
 * string has matched (emit then ends just before it; later feeds emit
 * nothing and return 1), 0 if not, TM_E_NOMEM. */
int tm_stop_feed(tm_stop *st, const char *piece, size_t len, const char **emit, size_t *emit_len);

/* tm_stop_flush: generation ended otherwise (EOS, length): emit the text held
 * back as a possible stop-string prefix (nothing after a stop matched). */
void tm_stop_flush(tm_stop *st, const char **emit, size_t *emit_len);

/* tm_stop_matched: index of the stop string that matched, -1 if none. */
int tm_stop_matched(const tm_stop *st);

/* ---- the indentation limit (llama.cpp's n_indent, for code completion) ----
 *
 * After the output's first newline, a line indented by fewer than n_indent spaces and tabs ends
 * the output just before the line's first other character (a blank line's newline, or "\r", is
 * one: it ends it too). The newline and the indentation stay, as llama.cpp keeps them. The first
 * line, the one the cursor is on, is never judged. Since the whitespace stays whether the line
 * passes or not, the scanner holds nothing back: it only says where the text it is shown stops.
 * It takes the text the stop matcher lets through, so the stop strings are judged first.
 *
 *   tm_indent in;
 *   tm_indent_init(&in, 4);
 *   size_t ok = tm_indent_scan(&in, out, n);   // show out[0, ok); ok < n: the output ends there
 *
 * State: judging is 1 from a newline until the next line's indentation reaches n_indent (the
 * line passes) or a character other than a space or tab comes first (cut). Bytes are scanned one
 * by one, so any split of the text into pieces gives the same cut; a cut lands before a byte that
 * is not a space or tab, so a whole UTF-8 character in gives whole characters out. */
typedef struct tm_indent {
    int n_indent;       /* the least indentation of a line after the first newline; <= 0: off */
    int judging;        /* 1: at the start of such a line, its indentation not yet decided */
    int width;          /* its spaces and tabs so far (< n_indent while judging) */
    int cut;            /* 1: a line fell short; the output ended (later scans pass nothing) */
} tm_indent;

void tm_indent_init(tm_indent *in, int n_indent);

/* tm_indent_scan: the bytes of text [len] (more output, in order) that stand before the cut: len
 * where no line falls short, else the offset of the short line's first character (in->cut is then
 * set); 0 once the output was cut. */
size_t tm_indent_scan(tm_indent *in, const char *text, size_t len);

#endif
