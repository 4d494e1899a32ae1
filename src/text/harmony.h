/* text/harmony.h: OpenAI's harmony replies (gpt-oss): reasoning, answer and tool calls by channel.
 *
 * A gpt-oss reply is a run of messages, each a header, <|message|>, a body and an end marker:
 *
 *   <|channel|>analysis<|message|>The user wants the weather.<|end|>
 *   <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>
 *
 *   <|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>final<|message|>Four.<|return|>
 *
 * The chat template ends the prompt with "<|start|>assistant", so a reply starts inside its first
 * message's header. The header names the channel: analysis is the model's reasoning, final its
 * answer, commentary a tool call where the header names a recipient ("to=functions.NAME", before
 * or after the channel; the template writes it before, the model mostly after) and otherwise a
 * preamble the user sees. A call's header may give its content type (" json", " <|constrain|>json").
 * The model's end-of-sequence tokens are <|return|> and <|call|>, so a generated reply mostly ends
 * without its last marker: the text's end closes the last message. The markers are special tokens;
 * a request keeps them in its text (tandem_request.keep_special = TM_HARMONY_MARKERS).
 *
 *   tm_harmony h;
 *   tm_harmony_init(&h, 1);                      // 1: analysis is reasoning (0: it joins the answer)
 *   while (more) {                               // text: the whole reply so far
 *       tm_harmony_feed(&h, text, len, 0);
 *       // h.reasoning [h.rlen], h.content [h.clen]: grown at their ends only
 *   }
 *   tm_harmony_feed(&h, text, len, 1);           // the reply is complete
 *   // h.calls [h.n_calls]: recipient (functions. taken off), body
 *   tm_harmony_free(&h);
 *
 * Design block
 * ------------
 * The parser is incremental and a function of the text: feeding a longer text of which the last
 * one fed is a prefix parses only the new bytes (pos is where it stopped), and what it has put in
 * reasoning, content and the calls never changes afterwards, so a stream sends each buffer's
 * growth. What may still change is held back: a header until its <|message|> (it decides the
 * channel), and a body's tail that may be the start of a marker ("<|en"). With final set nothing is
 * held: a body runs to the text's end, a header never given its <|message|> is dropped if it shows
 * a marker (a reply cut short inside it), else taken as answer text (a reply that never used the
 * format: nothing is lost). A header longer than TM_HARMONY_MAX_HEADER bytes (decided once no
 * <|message|> can start within the limit: a stream and the whole reply decide alike) is not a
 * header: its text is answer, from its first byte (taken at once, so a marker there does not end
 * it) to the next marker that ends a message, joined to what came before as it stands (no blank
 * line: the answer never holds more bytes than the reply). Two messages of one kind are joined by a blank line. A recipient that is not
 * "functions.NAME" (gpt-oss's built-in browser and python tools) is kept under its whole name. */
#ifndef TM_TEXT_HARMONY_H
#define TM_TEXT_HARMONY_H

#include <stddef.h>

/* the special tokens a harmony reply's text needs (NULL-terminated, for tandem_request.keep_special) */
extern const char *const TM_HARMONY_MARKERS[];

#define TM_HARMONY_MAX_HEADER 512

typedef struct tm_harmony_call {
    char *to;               /* the recipient: "get_weather" for "functions.get_weather" */
    char *body;             /* the message's body as written (the arguments' JSON) [blen] */
    size_t blen, bcap;
    int closed;             /* its end marker (or a later message) was seen */
} tm_harmony_call;

typedef struct tm_harmony {
    int analysis_reasons;   /* analysis messages go to reasoning (else to content) */
    size_t pos;             /* the text is parsed up to here */
    int in_body;            /* 0: in a header (from pos), 1: in a message's body */
    int kind;               /* the body's: 0 reasoning, 1 content, 2 a call (the last of calls) */
    int sep;                /* the body's first bytes need a blank line before them */
    char *reasoning, *content;      /* [rlen], [clen]; NUL-terminated (or NULL while empty) */
    size_t rlen, rcap, clen, ccap;
    tm_harmony_call *calls; /* [n_calls] in the reply's order */
    int n_calls;
    size_t calls_cap;
    int oom;                /* a feed ran out of memory: the parse is incomplete */
} tm_harmony;

/* 1 if a chat template's source writes harmony (gpt-oss's) */
int tm_harmony_detect(const char *template_src);

void tm_harmony_init(tm_harmony *h, int analysis_reasons);
/* tm_harmony_feed: parse text [len], the reply so far (a prefix of it was fed before, or none);
 * final: the reply is complete. 0, or -1 when out of memory. */
int tm_harmony_feed(tm_harmony *h, const char *text, size_t len, int final);
void tm_harmony_free(tm_harmony *h);

#endif
