/* text/toolcall.h: OpenAI tool calls in a model's own words.
 *
 * A chat model trained to call tools writes each call in its family's dialect:
 *
 *   hermes       <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>   (Qwen2.5, Qwen3, Hermes)
 *   llama3_json  {"name": "f", "parameters": {...}}, alone or after <|python_tag|> (Llama 3.1-3.3)
 *   mistral      [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]             (Mistral, Nemo)
 *   mistral_args [TOOL_CALLS]f[ARGS]{...}[TOOL_CALLS]g[ARGS]{...}              (Mistral Small 3.1+, Devstral,
 *                ([CALL_ID]id before [ARGS] in some)                             Magistral: v11+ templates)
 *   granite      <|tool_call|>[{"name": "f", "arguments": {...}}, ...]            (Granite 3)
 *   qwen3_coder  <tool_call>\n<function=f>\n<parameter=k>\nv\n</parameter>\n</function>\n</tool_call>
 *                                                          (Qwen3-Coder, Qwen3.5, Nemotron 3 Nano, Step 3.5)
 *   glm          <tool_call>f\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>  (GLM-4.5 to 4.7)
 *   seed_oss     <seed:tool_call>\n<function=f>\n<parameter=k>v</parameter>\n</function>\n</seed:tool_call>
 *   minimax      <minimax:tool_call>\n<invoke name="f"><parameter name="k">v</parameter></invoke>\n...</minimax:tool_call>
 *   harmony      <|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}<|call|>       (gpt-oss)
 *   command_r    <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters": {...}}, ...]<|END_ACTION|>
 *                                                                             (Command R7B, Command A)
 *   deepseek_v3  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
 *                                                                             (DeepSeek V3.1, V3.2)
 *                and the older ...<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{...}\n```<｜tool▁call▁end｜>...
 *                                                                (DeepSeek R1, V3-0324, R1's distills)
 *   kimi_k2      <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{...}
 *                <|tool_call_end|>...<|tool_calls_section_end|>   (Kimi K2; "functions.f:0", the call's id, is kept as it)
 *
 * The chat template says which: it shows the model its own past calls in the same form, so
 * tm_tool_dialect_detect finds a dialect by its marker in the template's source.
 *
 *   const tm_tool_dialect *d = tm_tool_dialect_detect(template_src);  // NULL: no tool calls known
 *   // tool_choice "required" or a named function: the reply is held to calls
 *   char *gbnf;
 *   tm_tool_grammar(d, tools_json, NULL, 1, 0, &gbnf, &err); // request.grammar; prompt += d->gen_open
 *   // tool_choice "auto": the same from d->gen_open on (with_open 1), a lazy grammar where d has a trigger
 *   int anchored;
 *   const char *trig = tm_tool_lazy_trigger(d, &anchored);   // request.grammar_trigger (_anchored), or NULL
 *   // streaming: send text[0 .. tm_tool_safe_prefix(d, text, n)) as content, hold the rest
 *   tm_tool_calls c;
 *   tm_tool_parse(d, text, n, tools_json, 0, &c, &err);   // c.n calls, c.content the text around them
 *   tm_tool_calls_free(&c);
 *
 * Design block
 * ------------
 * A dialect is a row of data (open and close markers, whether the calls are one JSON list,
 * whether they may stand bare, the argument key a forced call writes), not code: the parser, the
 * stream's hold-back and the grammar are written once over those fields.
 *
 * A named dialect (mistral_args) writes each call as its name, then the arguments' object, with
 * special tokens between ([ARGS], and [CALL_ID] and an id in some templates) and before ([TOOL_CALLS]).
 * The generated text skips special tokens, and a constrained reply cannot produce them (the
 * vocabulary trie leaves them out), so the parser takes a call with or without each marker: name,
 * optional markers, object, no space between; as a bare reply, "f{...}g{...}" is the whole text. A
 * forced reply's grammar writes the bare form after gen_open.
 *
 * Parsing is all or nothing: every marker must open a well-formed call (a JSON object with a
 * "name" among the declared tools and an object of arguments under "arguments" or "parameters",
 * or a string holding one, as some models write), else the reply holds no calls and is all
 * content, as the model wrote it; except that in a reply cut short (max_tokens) a call the reply
 * ends inside is dropped and the complete ones before it kept. Bare calls (dialects whose marker is a special token, which the
 * text does not show, or optional) count only when they are the whole reply but whitespace.
 *
 * The hold-back is a function of the text so far and is never smaller for a longer text: content
 * goes out up to where a call may begin (a marker, or the start of a possible one at the end; in a
 * bare dialect, a reply still blank or opening with the calls' bracket) and the rest waits for the
 * end, where the parse decides.
 *
 * An XML dialect (qwen3_coder, glm, seed_oss, minimax; tm_tool_xml) writes a call as tags: the name, then each argument
 * as a key and its value as raw text up to the value's closing tag (a string as it is; other
 * values as the template printed them: JSON, or Python's str() of a number or a boolean). The
 * parser gives each value its type from the tool's schema: a property of type "string" (or of no
 * declared type) keeps the text, any other reads it as JSON (also True / False / None), falling
 * back to the text where it is not. Its forced grammar writes the declared properties in the
 * schema's order, the required ones present, a string value any text that does not contain the
 * closing tag, others held to their schema as JSON.
 *
 * harmony (gpt-oss) is a format of channels rather than a call syntax: text/harmony.h reads a reply
 * into reasoning, answer and calls (messages to "functions.NAME"), and tm_tool_harmony_calls holds
 * those calls to the tools (one that is not, its arguments not an object or its tool undeclared,
 * leaves its text to the answer). Its forced grammar writes one call, the name after gen_open,
 * then gen_args, then the arguments; its markers are special tokens the request keeps in its text
 * (tandem_request.keep_special) and a grammar may write. auto's lazy grammar starts at the recipient
 * (open, "to=functions.": a call's header is free up to it, and a reply's first message may lack
 * "<|start|>assistant" and put the recipient before its channel) and holds the rest of the call as
 * the reader takes it (lazy_args):
 *
 *   to=functions. NAME [" "? "<|channel|>commentary"] [" " "<|constrain|>"? "json" | "<|constrain|>json"]
 *       "<|message|>" ARGUMENTS ["<|call|>"]
 *
 * <|call|> is optional: gpt-oss's vocabulary makes it an end-of-sequence token, which a grammar never
 * takes (the request ends there, allowed once the arguments close). The reply's opening analysis
 * message (<|channel|>analysis<|message|> ... <|end|>) is skipped (skip_open / _close): a recipient
 * named in that reasoning starts no grammar; one named in a later analysis or final message does
 * (the text from it on is then held to a call's form, which the reader takes as text, not a call).
 *
 * Bare dialects whose markers are special tokens (mistral, mistral_args, granite) have a second form
 * for a model whose vocabulary has them (tm_tool_dialect_kept): the request keeps the markers in the
 * reply's text, so it is parsed, held back and lazily constrained by them as hermes' is by <tool_call>.
 * llama3_json stays bare (its calls have no marker): its lazy grammar starts at a reply that opens
 * with a call's first bytes ({"name"), an anchored trigger (tandem_request.grammar_trigger_anchored).
 *
 * A forced reply (tool_choice "required" or one function) is a grammar (text/grammar.h): the
 * dialect's form, each call to one declared tool with arguments held to its "parameters" schema
 * (text/json_schema.h, its rules renamed per tool). A schema the converter does not support is
 * refused for a tool marked "strict": true; for the others (OpenAI holds only strict tools to
 * their schemas) the keywords it does not support are ignored (tm_json_schema_gbnf_lenient), and a
 * schema it cannot read at all allows any JSON object. The dialect's gen_open goes at the prompt's end, so the
 * model sees its real marker token, and the parse reads gen_open + the reply. */
#ifndef TM_TEXT_TOOLCALL_H
#define TM_TEXT_TOOLCALL_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define TM_TOOL_MAX_TOOLS 128 /* tools per request */
#define TM_TOOL_MAX_NAME 64   /* bytes of a tool's name: letters, digits, '_', '-', '.' */

/* the tags of an XML dialect's call: fn_open NAME fn_close, then per argument key_open KEY key_close
 * val_open VALUE val_close, then fn_end; with trim_nl a newline after key_close and one before
 * val_close belong to the form, not the value */
typedef struct tm_tool_xml {
    const char *fn_open;     /* "<function="; "": the name stands bare, to a newline or '<' */
    const char *fn_close;    /* ">"; "" */
    const char *fn_end;      /* "</function>"; "" (the dialect's close ends the call) */
    const char *key_open, *key_close; /* "<parameter=" ">"; "<arg_key>" "</arg_key>" */
    const char *val_open, *val_close; /* "" "</parameter>"; "<arg_value>" "</arg_value>" */
    int trim_nl;
} tm_tool_xml;

typedef struct tm_tool_dialect {
    const char *name;        /* "hermes", ..., "glm": tm_tool_dialect_names() lists them */
    const char *detect[2];   /* a chat template showing any of these uses this dialect */
    const char *open;        /* the marker before a call (list: before the list) */
    const char *close;       /* after each call ("": none); optional at the reply's end */
    int list;                /* the calls are one JSON array after open */
    int bare;                /* the calls may stand without open, as the whole reply */
    int semicolons;          /* calls one after another separated by ';' (Llama 3) */
    const char *args_key;    /* the key a forced call writes the arguments under */
    const char *name_key;    /* a JSON call's key of the tool's name (NULL: "name", also read where it is absent) */
    const char *id_key;      /* a forced JSON call writes this key first, the call's number as a string (NULL: none) */
    const char *gen_open;    /* a forced reply starts with this (appended to the prompt) */
    const char *gen_close;   /* ... ends each call with this */
    const char *gen_sep;     /* ... puts this between two calls */
    const char *gen_end;     /* ... and this after the last */
    int id_len;              /* 9: call ids of 9 letters and digits (Mistral's templates insist);
                                0: "call_" and 24 */
    const char *args_marker; /* a named dialect: between a call's name and its arguments (optional in the
                                text); NULL: calls are JSON objects with "name" */
    const char *id_marker;   /* ... and, optional, an id after this before args_marker */
    const tm_tool_xml *xml;  /* an XML dialect's tags (NULL: the calls are JSON) */
    const char *gen_args;    /* a named dialect's forced call writes this between name and arguments (NULL: none) */
    int harmony;             /* the reply is harmony (text/harmony.h): its channels, not the markers above */
    const char *call_open;   /* a named dialect: before each call (optional in the text), NULL: none */
    const char *call_close;  /* ... and after each (optional) */
    const char *const *keep; /* the special tokens its replies need in their text (NULL-terminated, for
                                tandem_request.keep_special), or NULL */
    int fenced;              /* a named dialect also read in its older typed form: "function", args_marker,
                                the name, then the object in a ```json fence (DeepSeek R1, V3-0324) */
    const char *name_prefix; /* a named dialect: before the name ("functions."), optional in the text */
    int text_ids;            /* a named call's text from its prefix to its id ("functions.f:0") is the call's id */
    const char *gen_id;      /* a forced named call writes this after the name (a grammar fragment: the id) */
    const char *const *tokens; /* a bare dialect whose markers its models write as special tokens: those markers,
                                open first (NULL-terminated; tm_tool_dialect_kept), or NULL */
    const char *tokens_id;   /* ... a named one's id where its template writes id_marker (a grammar fragment) */
    const char *trigger;     /* auto's lazy grammar: the text that starts the calls where open does not (a bare
                                dialect's), or NULL (tm_tool_lazy_trigger) */
    int anchored;            /* ... and it counts only at the reply's start (tandem_request.grammar_trigger_anchored) */
    const char *lazy_args;   /* ... a named dialect's lazy grammar writes this (a grammar fragment) between name and
                                arguments, where the text may take several forms (NULL: gen_args) */
    const char *lazy_end;    /* ... and this (a grammar fragment) after the last call (NULL: nothing) */
    const char *skip_open, *skip_close; /* ... a block its replies may open with in which the trigger is not looked
                                for (tandem_request.grammar_skip_open / _close), or NULL */
} tm_tool_dialect;

/* The dialect named name (as above), or NULL. */
const tm_tool_dialect *tm_tool_dialect_named(const char *name);
/* The dialect a chat template's source shows, or NULL. */
const tm_tool_dialect *tm_tool_dialect_detect(const char *template_src);
/* The names of every dialect, comma-separated (for messages). */
const char *tm_tool_dialect_names(void);

/* tm_tool_dialect_kept: where d's markers are special tokens of its models (d->tokens: mistral's,
 * mistral_args' and granite's) and special(ud, text) says the model's vocabulary has each marker a call
 * writes as one, *out := d as a reply that keeps them in its text writes it (tandem_request.keep_special:
 * out->keep), and returns 1: not bare (a call opens with its marker, so auto's lazy grammar starts there,
 * tm_tool_lazy_trigger), and a named dialect's calls written in full, the marker before each, args_marker
 * between name and arguments, and (optional) id_marker and an id where template_src shows id_marker.
 * Else 0, *out untouched: d stays as it is. */
int tm_tool_dialect_kept(const tm_tool_dialect *d, const char *template_src, int (*special)(void *ud, const char *text),
                         void *ud, tm_tool_dialect *out);

/* tm_tool_lazy_trigger: the trigger of auto's lazy grammar in d (tandem_request.grammar_trigger over
 * tm_tool_grammar's with_open form): its open marker where a reply's text shows it (harmony: the recipient,
 * "to=functions."; d->skip_open / _close the block to skip); d->trigger for a bare dialect that has one
 * (llama3_json: {"name", *anchored = 1: only as the reply's start); NULL where there is none (a bare dialect
 * whose marker the text does not show). */
const char *tm_tool_lazy_trigger(const tm_tool_dialect *d, int *anchored);

/* tm_tool_check: tools_json is OpenAI's "tools" array: [{"type": "function", "function": {"name",
 * "description"?, "parameters"?: an object, "strict"?: a boolean}}], 1 to TM_TOOL_MAX_TOOLS of them,
 * names as TM_TOOL_MAX_NAME says and distinct. TM_OK, or TM_E_FORMAT with err naming the field
 * ("tools[2].function.name"). */
int tm_tool_check(const char *tools_json, tm_err *err);

typedef struct tm_tool_call {
    char *name;
    char *arguments;         /* compact JSON text of an object */
    char *id;                /* the id the reply gave the call (a dialect with text_ids; at most TM_TOOL_MAX_NAME + 32
                                bytes), or NULL */
} tm_tool_call;

typedef struct tm_tool_calls {
    tm_tool_call *v;         /* [n] in the reply's order */
    int n;
    char *content;           /* the reply without its calls (NUL-terminated; [content_len] bytes): all of
                                it when n = 0; else the text around the calls, trailing whitespace trimmed */
    size_t content_len;
} tm_tool_calls;

/* tm_tool_parse: the calls in text [len], a reply in dialect d to a request with tools_json (a
 * name not declared there is not a call). cut: the reply was cut short (max_tokens), so a call it
 * ends inside is dropped, the complete ones before it kept. TM_OK (out->n may be 0) or TM_E_NOMEM. */
int tm_tool_parse(const tm_tool_dialect *d, const char *text, size_t len, const char *tools_json, int cut,
                  tm_tool_calls *out, tm_err *err);
void tm_tool_calls_free(tm_tool_calls *c);

/* tm_tool_parse_partial: a reply still being written, text [len], to a request with tools (the "tools"
 * array parsed once by the caller: a stream reads its reply after every token): out as tm_tool_parse
 * with cut gives it (the whole calls so far), and *part the call the text ends inside, as far as it is
 * read: its name once it is whole and a declared tool (NULL: no call begun), its arguments the start
 * of the compact text the whole call's will have (text/json_compact.h; "" while none is certain: a
 * string holding the object is read whole), its text id (text_ids) once whole, or NULL. Where the
 * text grows into a reply that tm_tool_parse reads as calls, each call here is that reply's call of
 * the same number, and part's name is the next one's and its arguments the start of that one's
 * (tests/test_toolcall.c checks it on every dialect's replies cut at every byte); but for harmony,
 * whose calls are each read alone (not all or nothing), where a call read in part turns out not to
 * be one, its text then the answer's and the next call taking its number. TM_OK or TM_E_NOMEM.
 * Free part with tm_tool_call_free. */
struct cJSON;
int tm_tool_parse_partial(const tm_tool_dialect *d, const char *text, size_t len, const struct cJSON *tools,
                          tm_tool_calls *out, tm_tool_call *part, tm_err *err);
void tm_tool_call_free(tm_tool_call *t);

/* tm_tool_harmony_calls: a harmony reply's calls (h, fed to its end) held to tools_json (NULL: none
 * are calls), and its answer (content) with the text of any message to a recipient that is not a
 * call after it; cut: the reply was cut short, so an unclosed last call is dropped. TM_OK or
 * TM_E_NOMEM. tm_tool_parse with the harmony dialect is this over tm_harmony_feed of the text. */
struct tm_harmony;
int tm_tool_harmony_calls(const struct tm_harmony *h, const char *tools_json, int cut, tm_tool_calls *out,
                          tm_err *err);

/* tm_tool_safe_prefix: of a reply generated so far, text [len], how many leading bytes are
 * content whatever follows (never fewer for a longer text of which text is a prefix). */
size_t tm_tool_safe_prefix(const tm_tool_dialect *d, const char *text, size_t len);

/* tm_tool_grammar: *gbnf (malloc'd) := a grammar whose language is the replies of calls only, in
 * d's form after d->gen_open (with_open: from d->gen_open on, for a lazy grammar that d->open
 * triggers; from d->open on where gen_open holds it later, harmony's recipient, then d->lazy_args
 * and d->lazy_end where set): one call (parallel 0) or one or more, each to a tool of tools_json
 * (only one: the tool named only, which must be declared). TM_E_INVALID: only is not declared; TM_E_UNSUPPORTED:
 * a strict tool's schema the converter refuses (err names "tools[i]"); TM_E_LIMIT, TM_E_NOMEM. */
int tm_tool_grammar(const tm_tool_dialect *d, const char *tools_json, const char *only, int parallel, int with_open,
                    char **gbnf, tm_err *err);

/* tm_tool_call_id: buf := a call id in d's style from seed (distinct seeds, distinct ids). buf
 * holds at least 32 bytes. */
void tm_tool_call_id(const tm_tool_dialect *d, uint64_t seed, char *buf, size_t size);

#endif
