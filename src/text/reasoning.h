/* text/reasoning.h: a reasoning model's thinking apart from its answer.
 *
 * Reasoning models think inside a block, then answer. Each family marks the block its own way:
 *
 *   think    <think> ... </think>                    Qwen3, QwQ, DeepSeek-R1 and its distills, GLM-4.5+,
 *                                                    MiniMax-M2, SmolLM3, ...
 *   seed     <seed:think> ... </seed:think>          Seed-OSS
 *   command  <|START_THINKING|> ... <|END_THINKING|>  Command R7B, Command A (the answer itself wrapped in
 *            <|START_RESPONSE|> ... <|END_RESPONSE|>, which the split drops)
 *   command4 the same, the answer in <|START_TEXT|> ... <|END_TEXT|>     Command A Reasoning (Cohere2MoE)
 *   mistral  [THINK] ... [/THINK]                    Magistral (its v13 templates)
 *
 * Their chat templates show the markers (they strip the thinking from earlier turns, or render
 * "reasoning_content" or a tool plan), so tm_think_detect finds the family there. Some templates open
 * the block themselves at the prompt's end (DeepSeek-R1's "<think>\n"): the reply then starts
 * inside it (tm_think_opened).
 *
 *   const tm_think_markers *m = tm_think_detect(template_src);   // NULL: the replies do not think
 *   int opened = tm_think_opened(m, prompt, strlen(prompt));
 *   tm_think_span s;
 *   tm_think_split(m, reply, n, opened, final, &s);
 *   // reasoning: reply[s.r0 .. s.r1), answer: reply[s.c0 .. s.c1)
 *   // request.keep_special = m->keep: markers that are special tokens stay in the reply's text
 *
 * Design block
 * ------------
 * A family is a row of data (tm_think_markers), and the split is written once over it.
 * tm_think_split is a function of the reply so far: a stream calls it after every piece and sends
 * what lies past what it sent of each span. Its ends never move back as the reply grows (the spans
 * of a prefix are prefixes of the spans of the whole), because what is still ambiguous is held:
 * the start of a possible marker at the end, a reply (or answer) that so far is blank or a piece of
 * an opening marker, and newlines at the reasoning's end (trimmed if the block closes after them).
 * With final set (the reply is complete) nothing is held. Rules:
 *  - the reply thinks if, past leading whitespace, it starts with the opening marker, or opened is
 *    set; its reasoning runs from there (leading newlines skipped) to the closing marker (trailing
 *    newlines trimmed), or to the reply's end if the block never closes (a reply cut short, or
 *    thinking only);
 *  - the answer is what follows the closing marker (leading whitespace skipped), or the whole reply
 *    when it does not think;
 *  - where the family wraps its answer (ans_open), an answer that starts with ans_open (past
 *    whitespace) loses it, and its text ends at the first ans_close (what follows is dropped). */
#ifndef TM_TEXT_REASONING_H
#define TM_TEXT_REASONING_H

#include <stddef.h>

typedef struct tm_think_markers {
    const char *name;              /* "think", "seed", "command", "command4", "mistral" */
    const char *detect;            /* a template showing this uses the family (NULL: the closing marker) */
    const char *open, *close;      /* the reasoning block's markers */
    const char *ans_open;          /* the answer's wrapper, dropped from it (NULL: none) */
    const char *ans_close;
    const char *const *keep;       /* the markers that may be special tokens, for tandem_request.keep_special
                                      (NULL-terminated), or NULL: the text shows them anyway */
} tm_think_markers;

/* <think> ... </think>: what --reasoning-format deepseek reads where the template shows no family */
extern const tm_think_markers tm_think_tags;

/* The family a chat template's source shows (its detect text, else its closing marker, in it), or NULL. */
const tm_think_markers *tm_think_detect(const char *template_src);

/* 1 if a rendered prompt [len] ends inside an open block of m (its last opening marker after its
 * last closing one, followed by whitespace only); 0 where m is NULL. */
int tm_think_opened(const tm_think_markers *m, const char *prompt, size_t len);

typedef struct tm_think_span {
    size_t r0, r1;   /* the reasoning, text[r0..r1) (empty: r0 == r1) */
    size_t c0, c1;   /* the answer, text[c0..c1) */
} tm_think_span;

/* tm_think_split: the spans of a reply so far, text [len], in family m (final: the reply is complete). */
void tm_think_split(const tm_think_markers *m, const char *text, size_t len, int opened, int final, tm_think_span *s);

#endif
