/* serve/oai.h: the OpenAI wire format, as pure functions (no sockets, no
 * model): request bodies of /v1/completions and /v1/chat/completions parsed
 * into a struct, and the JSON of responses, stream chunks, model lists and
 * errors. serve/serve.c puts them on HTTP; fuzz/fuzz_http.c fuzzes them.
 *
 *   tm_oai_req r;
 *   tm_oai_error e;
 *   if (tm_oai_parse(&r, TM_OAI_CHAT, body, len, &e) != 0) {
 *       char *js = tm_oai_error_json(&e);          // {"error":{"message",...}}, status e.http
 *       ...
 *   }
 *   tandem_request q;
 *   tandem_request_default(&q);                    // or the server's defaults
 *   tm_oai_apply(&r, &q);                          // the fields the body gave win
 *   ...
 *   tm_oai_req_free(&r);
 *
 * Parsing rules (docs/serve.md has the table): unknown fields are ignored;
 * JSON null means "not given"; a known field of the wrong type, out of range,
 * or asking for something tandem does not do (n > 1, echo, functions, ...)
 * fails with HTTP 400, the field named in param ("messages[2].role"). Numbers
 * given for integer fields must be integral. The body must be one JSON object
 * (whitespace around it allowed). */
#ifndef TM_SERVE_OAI_H
#define TM_SERVE_OAI_H

#include <stddef.h>
#include <stdint.h>

#include "tandem.h"

#define TM_OAI_MAX_STOP 16          /* stop strings per request */
#define TM_OAI_MAX_N 8              /* choices per request ("n") */
#define TM_OAI_MAX_PROMPTS 16       /* completions: prompts per request (an array of them) */
#define TM_OAI_MAX_CHOICES 64       /* choices generated per request: prompts x best_of (a session's batch) */
#define TM_OAI_MAX_STOP_LEN 1024    /* bytes per stop string (text/sampler.h TM_STOP_MAX_LEN) */
#define TM_OAI_MAX_TOKENS (1 << 30) /* largest max_tokens accepted (the context clips it) */
#define TM_OAI_MAX_BIAS 1024        /* logit_bias entries */

typedef enum tm_oai_kind {
    TM_OAI_COMPLETION = 0,          /* POST /v1/completions: "prompt" */
    TM_OAI_CHAT = 1,                /* POST /v1/chat/completions: "messages" */
} tm_oai_kind;

/* tm_oai_req.set: which sampling fields the body gave (the rest keep the
 * server's defaults). */
enum {
    TM_OAI_SET_MAX_TOKENS = 1u << 0,
    TM_OAI_SET_TEMPERATURE = 1u << 1,
    TM_OAI_SET_TOP_P = 1u << 2,
    TM_OAI_SET_TOP_K = 1u << 3,
    TM_OAI_SET_MIN_P = 1u << 4,
    TM_OAI_SET_SEED = 1u << 5,
    TM_OAI_SET_PRESENCE = 1u << 6,
    TM_OAI_SET_FREQUENCY = 1u << 7,
    TM_OAI_SET_REPETITION = 1u << 8,
    TM_OAI_SET_STOP = 1u << 9,
    TM_OAI_SET_IGNORE_EOS = 1u << 10,
};

/* tm_oai_req.tool_choice */
enum {
    TM_OAI_TOOLS_NONE = 0,          /* no calls: the reply is text (tools still shown to the template) */
    TM_OAI_TOOLS_AUTO,              /* the model may call tools: its reply is parsed for calls */
    TM_OAI_TOOLS_REQUIRED,          /* the reply is calls only (constrained to the dialect's form) */
    TM_OAI_TOOLS_NAMED,             /* the reply is calls to tool_name only */
};

/* One prompt of a completions request: a text, or token ids (text NULL). */
typedef struct tm_oai_prompt {
    char *text;
    int32_t *ids;                   /* [n_ids], each >= 0 (the vocabulary is checked at submit) */
    size_t n_ids;
} tm_oai_prompt;

typedef struct tm_oai_req {
    tm_oai_kind kind;
    /* completion: a text prompt, or token ids (prompt NULL): the first prompt; an array of several
     * ("prompt": ["a", "b"], OpenAI's batch) puts the others in more[n_prompts - 1] */
    char *prompt;
    int32_t *prompt_ids;            /* [n_prompt_ids], each >= 0 (the vocabulary is checked at submit) */
    size_t n_prompt_ids;
    int n_prompts;                  /* completions: 1..TM_OAI_MAX_PROMPTS; chat: 0 */
    char *suffix;                   /* completions "suffix" (fill in the middle: the text after the completion;
                                       one text prompt only), or NULL */
    tm_oai_prompt more[TM_OAI_MAX_PROMPTS - 1];
    /* chat: the messages, normalised for tandem_chat_render: a JSON array of
     * {"role": "system"|"user"|"assistant"|"tool", "content": string[, "name": string]
     *  [, "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}]]
     *  [, "tool_call_id": string][, "reasoning_content": string]}
     * (content parts joined with "\n"; role "developer" becomes "system"; an assistant's
     * tool_calls only where it made calls, their "arguments" strings read as the JSON objects they
     * hold, as chat templates expect (transformers and vLLM do the same)) */
    char *messages_json;
    char *template_kwargs_json;     /* "chat_template_kwargs" object, or NULL */
    unsigned set;                   /* TM_OAI_SET_* */
    int max_tokens;                 /* max_completion_tokens, else max_tokens; [1, TM_OAI_MAX_TOKENS] */
    int n;                          /* "n": choices to return, 1..TM_OAI_MAX_N (default 1) */
    int best_of;                    /* completions "best_of": candidates generated, n..TM_OAI_MAX_N (default n);
                                       the n with the highest mean log-probability per token are returned */
    float temperature;              /* [0, inf) */
    float top_p;                    /* (0, 1] */
    int top_k;                      /* 0 = off (-1 and 0 in the body both mean off) */
    float min_p;                    /* [0, 1] */
    float presence_penalty, frequency_penalty; /* [-2, 2] */
    float repetition_penalty;       /* (0, inf) */
    uint64_t seed;                  /* a negative seed is taken modulo 2^64 */
    int ignore_eos;                 /* vLLM's extension */
    int n_indent;                   /* llama.cpp's "n_indent": the least indentation of a line after the first
                                       newline (tandem_request.n_indent); 0: off */
    int t_max_predict_ms;           /* llama.cpp's "t_max_predict_ms": past it, a newline ends the answer
                                       (tandem_request.t_max_predict_ms); 0: off */
    char *stop[TM_OAI_MAX_STOP + 1];/* NULL-terminated; empty strings are dropped */
    int n_stop;
    int want_logprobs;              /* chat "logprobs": true; completions "logprobs": N */
    int prompt_logprobs;            /* vLLM's "prompt_logprobs": the prompt's tokens scored with this many
                                       alternatives (0..20); -1: none (absent or null) */
    int echo;                       /* completions "echo": the prompt's text before the completion's and, with
                                       "logprobs", its tokens' scores first (the first token's null) */
    int json_object;                /* "response_format": {"type": "json_object"} (JSON mode) */
    char *json_schema;              /* response_format json_schema's "schema" (or llama.cpp's "json_schema"),
                                       compact JSON, or NULL */
    char *grammar;                  /* llama.cpp's "grammar" (GBNF), or NULL */
    char *tools_json;               /* chat "tools" (OpenAI's array, compact JSON, checked by tm_tool_check),
                                       or NULL (none, or an empty array); also given to the chat template */
    int tool_choice;                /* TM_OAI_TOOLS_*: "tool_choice" (default auto with tools, none without) */
    char *tool_name;                /* tool_choice {"type": "function", "function": {"name"}}: a declared tool */
    int parallel_tool_calls;        /* "parallel_tool_calls" (default 1) */
    int32_t *bias_ids;              /* [n_bias] "logit_bias" keys (ids checked at submit) */
    float *bias;                    /* [n_bias] their biases, [-100, 100] */
    int n_bias;
    int top_logprobs;               /* alternatives per token: chat "top_logprobs", completions "logprobs" (0..20) */
    int stream;                     /* "stream": true */
    int include_usage;              /* "stream_options": {"include_usage": true} */
    char *model;                    /* as the body gave it, or NULL (any name is accepted) */
} tm_oai_req;

typedef struct tm_oai_error {
    int http;                       /* HTTP status: 400, 401, 404, 405, 413, 500, 503 */
    const char *type;               /* "invalid_request_error", "authentication_error", "server_error" */
    const char *code;               /* NULL, or "context_length_exceeded", "invalid_api_key", ... */
    char param[96];                 /* the field at fault, "" if none */
    char msg[512];
} tm_oai_error;

/* tm_oai_parse: body [len] (need not be NUL-terminated) -> *r. Returns 0, or
 * -1 with *e filled (http 400; 500 when out of memory) and *r empty. Call
 * tm_oai_req_free on success. */
int tm_oai_parse(tm_oai_req *r, tm_oai_kind kind, const char *body, size_t len, tm_oai_error *e);
void tm_oai_req_free(tm_oai_req *r);

/* prompt p (0 .. n_prompts - 1) of a completions request, as a view into r */
tm_oai_prompt tm_oai_prompt_at(const tm_oai_req *r, int p);

/* tm_oai_apply: overlay the fields r gave onto q (the defaults). q->prompt,
 * q->prompt_ids and q->stop then point into r: keep r alive while q is used. */
void tm_oai_apply(const tm_oai_req *r, tandem_request *q);

/* tm_oai_error_set: fill *e (param may be NULL). */
void tm_oai_error_set(tm_oai_error *e, int http, const char *type, const char *code, const char *param,
                      const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* ---- responses: each returns a malloc'd NUL-terminated string, NULL when out of memory ---- */

/* Identity of one response: "id" ("cmpl-..." / "chatcmpl-..."), "model", "created". */
typedef struct tm_oai_meta {
    tm_oai_kind kind;
    const char *id;
    const char *model;
    int64_t created;                /* Unix seconds */
    int index;                      /* a stream chunk: the choice it belongs to */
} tm_oai_meta;

/* Log-probabilities of generated tokens, for a response or one stream chunk (serve.c turns the
 * library's tandem_logprob into these, with each token's bytes from tandem_token_bytes). Written
 * as OpenAI's: chat "logprobs": {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}],
 * "refusal": null}; completions "logprobs": {"tokens", "token_logprobs", "top_logprobs": [{token:
 * logprob}], "text_offset"}. A token string is its bytes as JSON text (bytes that are not UTF-8
 * become U+FFFD; "bytes" has them as they are); a logprob of -inf is written -9999.0 (as vLLM). */
typedef struct tm_oai_lp_tok {
    const char *bytes;
    size_t len;
    float logprob;
} tm_oai_lp_tok;

typedef struct tm_oai_logprob {
    tm_oai_lp_tok tok;                      /* the token generated */
    int n_top;                              /* alternatives asked for (the request's top_logprobs) */
    tm_oai_lp_tok top[TANDEM_MAX_LOGPROBS]; /* most likely first */
} tm_oai_logprob;

typedef struct tm_oai_logprobs {
    const tm_oai_logprob *v;
    size_t n;
    size_t text_offset;             /* completions: the first token's offset in the completion's text,
                                       in characters (a stream's chunks continue it) */
} tm_oai_logprobs;

/* The characters a token's bytes [len] count in the JSON text written for them (U+FFFD per byte
 * that is not UTF-8): the step of text_offset. */
size_t tm_oai_lp_chars(const char *bytes, size_t len);

/* {"error":{"message","type","param","code"}} */
char *tm_oai_error_json(const tm_oai_error *e);

/* The usage block: {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details":
 * {"cached_tokens"}} (prompt tokens whose KV came from the prefix cache, as OpenAI reports). */
typedef struct tm_oai_usage {
    int prompt, completion, cached;
} tm_oai_usage;

/* Tool calls of a chat reply: "tool_calls": [{"id", "type": "function", "function": {"name",
 * "arguments"}}] (a stream's delta numbers them with "index"). */
typedef struct tm_oai_tool_call {
    const char *id, *name, *arguments;  /* arguments: JSON text of an object */
} tm_oai_tool_call;

typedef struct tm_oai_tool_calls {
    const tm_oai_tool_call *v;
    int n;
} tm_oai_tool_calls;

/* A stream's piece of a tool call (a chunk's "delta": {"tool_calls": [{"index", "id", "type": "function",
 * "function": {"name", "arguments"}}]}): a call's first piece names it (id and name), every piece carries
 * its arguments' next bytes; the pieces of a call's arguments add up to the whole call's. */
typedef struct tm_oai_call_delta {
    int index;                  /* the call's number in the reply */
    const char *id, *name;      /* its first piece's; NULL in the later ones */
    const char *args;           /* the arguments' next bytes [args_len] */
    size_t args_len;
} tm_oai_call_delta;

/* What a chat reply holds besides its content: the model's reasoning ("reasoning_content", as
 * vLLM and llama.cpp write it; none where reasoning_len is 0) and its tool calls (tc NULL or
 * empty: none). */
typedef struct tm_oai_extra {
    const char *reasoning;
    size_t reasoning_len;
    const tm_oai_tool_calls *tc;    /* (a whole response's) */
    const tm_oai_call_delta *cd;    /* (a stream's chunk) the calls' pieces [n_cd] */
    int n_cd;
} tm_oai_extra;

/* One choice of a response: text [len] (chat: and x's reasoning_content and tool_calls, content
 * null when it is empty beside calls; x may be NULL), logprobs (lp; NULL: JSON null), finish_reason. */
/* vLLM's "prompt_logprobs": per prompt token a map of token id to {"logprob", "rank",
 * "decoded_token"}: the token itself, then its step's most likely ones (ranks 1, 2, ...); the first
 * token's is null (its logprob NaN). v: the tokens' strings and values (as for "logprobs"); ids: the
 * same entries as the library gave them (token, top_token, rank). */
typedef struct tm_oai_plps {
    const tm_oai_logprob *v;
    const tandem_logprob *ids;
    size_t n;
} tm_oai_plps;

typedef struct tm_oai_choice {
    const char *text;
    size_t len;
    const tm_oai_extra *x;
    const tm_oai_logprobs *lp;
    const char *finish;
    const tm_oai_plps *plp;         /* its prompt's "prompt_logprobs" (completions: in the choice; chat: the
                                       first choice's, at the response's top level), or NULL */
} tm_oai_choice;

/* The whole (non-streaming) response: "text_completion" / "chat.completion" with choices[i] = c[i]
 * ("index": i, i < n), and the usage block. */
char *tm_oai_response_json(const tm_oai_meta *m, const tm_oai_choice *c, int n, const tm_oai_usage *u);

/* One Server-Sent Event "data: {...}\n\n" of a stream: choices[0] (its "index" m->index) holds text
 * [len] (a chat chunk's delta also holds "role":"assistant" when role is 1,
 * and x's reasoning_content and call pieces (x->cd) where it has them), the logprobs of
 * the tokens since the last chunk (lp; NULL: JSON null) and finish_reason
 * (NULL: JSON null). x may be NULL. */
char *tm_oai_chunk_sse(const tm_oai_meta *m, const char *text, size_t len, int role, const tm_oai_extra *x,
                       const tm_oai_logprobs *lp, const char *finish);

/* The usage event of a stream ("choices": [] and the usage block). */
char *tm_oai_usage_sse(const tm_oai_meta *m, const tm_oai_usage *u);

/* GET /v1/models: {"object":"list","data":[{"id": model, "object":"model", ...}]} */
char *tm_oai_models_json(const char *model, int64_t created, int max_ctx);
/* GET /v1/models/{model}: that one object */
char *tm_oai_model_json(const char *model, int64_t created, int max_ctx);

/* tm_oai_json_string: append s [len] as a JSON string literal (quotes
 * included) to *buf (malloc'd, *n bytes used, *cap allocated). Control
 * characters are escaped; bytes that are not valid UTF-8 become U+FFFD, so
 * the output is always valid JSON. Returns 0, or -1 when out of memory. */
int tm_oai_json_string(char **buf, size_t *n, size_t *cap, const char *s, size_t len);

#endif
