/* text/reasoning.h: a reasoning model's thinking apart from its answer.
 *
 * Reasoning models (Qwen3, QwQ, DeepSeek-R1 and its distills, ...) think between <think> and
 * </think>, then answer. Their chat templates show the markers (they strip the thinking from
 * earlier turns, or render "reasoning_content"), so tm_think_detect finds them there. Some
 * templates open the block themselves at the prompt's end (DeepSeek-R1's "<think>\n"): the reply
 * then starts inside it (tm_think_opened).
 *
 *   int on = tm_think_detect(template_src);
 *   int opened = tm_think_opened(prompt, strlen(prompt));
 *   tm_think_span s;
 *   tm_think_split(reply, n, opened, final, &s);
 *   // reasoning: reply[s.r0 .. s.r1), answer: reply[s.c0 .. s.c1)
 *
 * Design block
 * ------------
 * tm_think_split is a function of the reply so far: a stream calls it after every piece and sends
 * what lies past what it sent of each span. Its ends never move back as the reply grows (the spans
 * of a prefix are prefixes of the spans of the whole), because what is still ambiguous is held:
 * the start of a possible marker at the end, a reply that so far is blank or a piece of "<think>",
 * and newlines at the reasoning's end (trimmed if the block closes after them). With final set (the
 * reply is complete) nothing is held. Rules:
 *  - the reply thinks if, past leading whitespace, it starts with <think>, or opened is set; its
 *    reasoning runs from there (leading newlines skipped) to </think> (trailing newlines trimmed),
 *    or to the reply's end if the block never closes (a reply cut short, or thinking only);
 *  - the answer is what follows </think> (leading whitespace skipped), or the whole reply when it
 *    does not think. */
#ifndef TM_TEXT_REASONING_H
#define TM_TEXT_REASONING_H

#include <stddef.h>

#define TM_THINK_OPEN "<think>"
#define TM_THINK_CLOSE "</think>"

/* 1 if a chat template's source shows <think> ... </think> reasoning. */
int tm_think_detect(const char *template_src);

/* 1 if a rendered prompt [len] ends inside an open think block (its last "<think>" after its last
 * "</think>", followed by whitespace only). */
int tm_think_opened(const char *prompt, size_t len);

typedef struct tm_think_span {
    size_t r0, r1;   /* the reasoning, text[r0..r1) (empty: r0 == r1) */
    size_t c0, c1;   /* the answer, text[c0..c1) */
} tm_think_span;

/* tm_think_split: the spans of a reply so far, text [len] (final: the reply is complete). */
void tm_think_split(const char *text, size_t len, int opened, int final, tm_think_span *s);

#endif
