/* serve/serve-impl.h: the server's pieces besides serve.c: the /tokenize and /detokenize bodies
 * (serve/tokenize.c), pure functions of the model and the request body; the /metrics text
 * (serve/metrics.c); other APIs' request and reply shapes (Anthropic's serve/anthropic.c, the
 * Responses API's serve/responses.c, llama.cpp's /infill serve/infill.c); embeddings
 * (serve/embed.c); the listening socket (serve/listen.c). */
#ifndef TM_SERVE_SERVE_IMPL_H
#define TM_SERVE_SERVE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "serve/oai.h"
#include "serve/serve.h"
#include "tandem.h"

typedef struct tm_serve_tok {
    tandem_model *m;
    const char *tpl;     /* the chat template override, or NULL (the model's) */
    int ctx;             /* the session's context: "max_model_len" */
} tm_serve_tok;

/* The template a chat request's prompt is rendered with: the override, else, where the template gets tools
 * (kwargs_json's "tools") and the model has a "tool_use" template, that one, as transformers picks it; NULL:
 * the model's own. */
const char *tm_serve_template_for(const tm_serve_tok *t, const char *kwargs_json);

/* The JSON answer (malloc'd), or NULL with *e set (400 naming the field, 500). tm_serve_count_tokens:
 * Anthropic's POST /v1/messages/count_tokens, {"input_tokens"}: the prompt /v1/messages would feed
 * for the body (the template, the tools, and gen_open where the request forces a call). */
char *tm_serve_tokenize(const tm_serve_tok *t, const char *body, size_t len, tm_oai_error *e);
char *tm_serve_detokenize(const tm_serve_tok *t, const char *body, size_t len, tm_oai_error *e);
char *tm_serve_count_tokens(const tm_serve_tok *t, const char *gen_open, const char *body, size_t len, tm_oai_error *e);

/* The model's fill-in-the-middle tokens (prefix, suffix, middle), as the texts its tokenizer takes as
 * one token each, for the families that have them (Qwen2.5-Coder's <|fim_prefix|>, StarCoder's
 * <fim_prefix>, DeepSeek-Coder's, Code Llama's <PRE>); NULL where none is found. */
const char *const *tm_serve_fim(const tandem_model *m);

/* Is text one special token of model m's vocabulary (tokenized alone, one token that a decode skipping
 * special tokens drops)? 1 or 0. (void *: text/toolcall.h's tm_tool_dialect_kept asks it.) */
int tm_serve_special(void *m, const char *text);

/* A listening socket on host:port (port 0: the kernel picks one): *fd_out, the port it has, whether
 * it is IPv6. TM_OK or TM_E_IO naming host and port. */
int tm_serve_listen(const char *host, int port, int *fd_out, int *port_out, int *ipv6, tm_err *err);

/* A chat request's prompt (malloc'd): its messages through the template (add_gen: with the generation
 * prompt), then prefix (a forced call's opening; NULL: none). NULL with *e set (400 "messages"). */
char *tm_serve_chat_prompt(const tm_serve_tok *t, const tm_oai_req *r, int add_gen, const char *prefix, tm_oai_error *e);

/* Other vendors' APIs over the chat machinery (a small vtable per API, as the engines have): the
 * request translated into an OpenAI chat body (tm_oai_parse then checks it as any chat request), the
 * reply written in the API's own shapes. serve.c runs the chat request and hands the writer the
 * reply's parts; every function returns malloc'd text, NULL when out of memory.
 *   Anthropic's Messages API (serve/anthropic.c: tm_api_anthropic, POST /v1/messages)
 *   OpenAI's Responses API (serve/responses.c: tm_api_responses, POST /v1/responses) */
typedef struct tm_api_reply {
    const char *reasoning;       /* [reasoning_len]: the reasoning the reply reader split off */
    size_t reasoning_len;
    const char *text;            /* [len]: the answer, its calls taken out */
    size_t len;
    const tm_oai_tool_calls *tc; /* the reply's calls, or NULL */
    const char *finish;          /* the choice's finish reason ("stop", "length", "tool_calls") */
    const char *stop_seq;        /* the stop sequence that ended it, or NULL */
    const tandem_stats *stats;   /* its run's figures (timings, tokens reused), or NULL */
} tm_api_reply;

typedef struct tm_api_meta {
    const char *id;              /* the answer's id ("msg_...", "resp_...") */
    const char *model;
    int64_t created;             /* Unix seconds */
    const char *echo;            /* (Responses) the request's fields the answer repeats, a JSON object, or NULL */
} tm_api_meta;

typedef struct tm_api_stream {   /* a stream's writer state (zeroed by start; stream_free frees what it holds) */
    int next;                    /* output blocks / items started */
    int open;                    /* the kind of the open one (block next - 1), or 0 */
    int seq;                     /* (Responses) the events' sequence_number */
    void *priv;                  /* (Responses) the items' text so far, for their .done events */
} tm_api_stream;

/* The Responses API's stored responses (serve/resp_store.c has the design block): id -> the
 * conversation it ends (chat messages, JSON) and the response object (JSON), in memory, bounded
 * by entries and bytes (least recently used evicted). put takes both texts (freed on failure: -1);
 * get copies them (either pointer may be NULL): 0, -1 not there, -2 out of memory; del: 0 or -1. */
#define TM_RESP_ID_MAX 64
#define TM_RESP_STORE_ITEMS 1024              /* the server's store: responses kept at most */
#define TM_RESP_STORE_BYTES ((size_t)64 << 20) /* ... and their text */
typedef struct tm_resp_store tm_resp_store;
int tm_resp_store_new(tm_resp_store **out, size_t max_items, size_t max_bytes);
void tm_resp_store_free(tm_resp_store *s);
int tm_resp_store_put(tm_resp_store *s, const char *id, char *conv, char *resp);
int tm_resp_store_get(tm_resp_store *s, const char *id, char **conv, char **resp);
int tm_resp_store_del(tm_resp_store *s, const char *id);

/* What an API's request translation may need of the server (any field NULL where there is none). */
typedef struct tm_api_env {
    tm_resp_store *store;        /* the stored responses (the Responses API's previous_response_id, item_reference) */
    const tm_serve_tok *tok;     /* the model (llama.cpp's /infill builds the prompt's token ids) */
    const char *const *fim;      /* the model's fill-in-the-middle tokens (tm_serve_fim) */
} tm_api_env;

typedef struct tm_api_fmt {
    const char *id_prefix;       /* the answer's id: this and 16 hex digits */
    tm_oai_kind kind;            /* the request it makes: a chat (Anthropic's, the Responses API) or a completion */
    /* body -> *json, a request of that kind (and *echo, a JSON object of fields to repeat, or NULL); -1 with
       *e set (400 naming the field). counting: a token count's body (Anthropic's count_tokens: no max_tokens) */
    int (*request)(const char *body, size_t len, int counting, const tm_api_env *env, char **json, char **echo,
                   tm_oai_error *e);
    char *(*json)(const tm_api_meta *m, const tm_api_reply *r, const tm_oai_usage *u);
    char *(*stream_start)(tm_api_stream *s, const tm_api_meta *m, const tm_oai_usage *u); /* u: prompt tokens */
    /* the reply's next parts: reasoning, text, then the calls' pieces cd [ncd] (serve/reply.h: each call's
       first piece names it; stream_end sends no call again) */
    char *(*stream_part)(tm_api_stream *s, const tm_api_meta *m, const char *reasoning, size_t rlen,
                         const char *text, size_t len, const tm_oai_call_delta *cd, int ncd);
    /* r: the whole reply (its text, reasoning and calls, for what the end repeats), u: the final counts */
    char *(*stream_end)(tm_api_stream *s, const tm_api_meta *m, const tm_api_reply *r, const tm_oai_usage *u);
    char *(*stream_error)(tm_api_stream *s, const char *msg);
    void (*stream_free)(tm_api_stream *s);
    /* (optional) the finished answer kept in store where the request asked (m->echo), messages the
       request's chat messages (JSON), r and u as for json */
    void (*keep)(tm_resp_store *store, const tm_api_meta *m, const char *messages, const tm_api_reply *r,
                 const tm_oai_usage *u);
} tm_api_fmt;

/* GET or DELETE /v1/responses/{id} (serve/responses.c): *status and *body (malloc'd JSON: the stored
 * response, the deletion's answer, or a 404's error); -1 out of memory */
int tm_resp_lookup(tm_resp_store *store, int del, const char *id, int *status, char **body);

extern const tm_api_fmt tm_api_anthropic, tm_api_responses;
/* llama.cpp's POST /infill (serve/infill.c): code completion in the model's fill-in-the-middle form, with
 * repository context; its answers in llama.cpp's /completion shapes */
extern const tm_api_fmt tm_api_infill;

/* The writers' cJSON helpers (serve/api_util.c). tm_api_events: the events "event: TYPE\ndata:
 * JSON\n\n" of objs [n] (taken, freed; each named by its "type" member) in one string, NULL when any
 * object is missing or out of memory; tm_api_typed: {"type": type}; tm_api_attach: child (taken) as
 * o[key], 0 (child freed) when either is missing or out of memory; tm_api_add_strn: o[key] := s [n]
 * (not NUL-terminated); tm_api_print_del: o printed, then freed. */
struct cJSON;
char *tm_api_events(int n, struct cJSON **objs);
struct cJSON *tm_api_typed(const char *type);
int tm_api_attach(struct cJSON *o, const char *key, struct cJSON *child);
int tm_api_add_strn(struct cJSON *o, const char *key, const char *s, size_t n);
char *tm_api_print_del(struct cJSON *o);

/* POST /v1/embeddings (serve/embed.c). tm_embed_parse: the body, checked (input ids against vocab,
 * dimensions against dim), or -1 with *e set (400 naming the field). tm_embed_response_json: the
 * answer for n vectors v [n][dim] (malloc'd; NULL when out of memory). tm_serve_embeddings: parse,
 * run each input through the session (TM_EMBED_WAVE at a time), answer; NULL with *e set. */
#define TM_EMBED_MAX_INPUTS 256
#define TM_EMBED_WAVE 16

typedef struct tm_embed_req {
    int n;                       /* inputs */
    char **text;                 /* [n]: input i's text, or NULL where it is token ids */
    int32_t **ids;               /* [n]: its ids [n_ids[i]], or NULL */
    size_t *n_ids;
    int base64;                  /* "encoding_format": "base64" */
    int dimensions;              /* the vector's first this many (0: all) */
    int pooling;                 /* TANDEM_POOL_* (0: the model's) */
    int normalize, add_special;  /* unit length; the tokenizer's special tokens (both default 1) */
    char *model;
} tm_embed_req;

typedef struct tm_serve_embed {
    tandem_model *m;
    tandem_session *s;
    const char *model_name;      /* "model" in the answer */
} tm_serve_embed;

int tm_embed_parse(tm_embed_req *r, const char *body, size_t len, int vocab, int dim, tm_oai_error *e);
void tm_embed_req_free(tm_embed_req *r);
char *tm_embed_response_json(const char *model, const float *v, int n, int dim, int base64, int prompt_tokens);
char *tm_serve_embeddings(const tm_serve_embed *se, const char *body, size_t len, tm_oai_error *e);

/* GET /metrics: the counts in Prometheus' text exposition format (0.0.4), each series labelled
 * model="..."; malloc'd, NULL when out of memory */
char *tm_serve_metrics(const tm_server_counts *c, const char *model);

#endif
