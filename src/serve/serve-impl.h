/* serve/serve-impl.h: the server's pieces besides serve.c: the /tokenize and /detokenize bodies
 * (serve/tokenize.c), pure functions of the model and the request body; the /metrics text
 * (serve/metrics.c); Anthropic's Messages API's request and reply shapes (serve/anthropic.c). */
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

/* The JSON answer (malloc'd), or NULL with *e set (400 naming the field, 500). */
char *tm_serve_tokenize(const tm_serve_tok *t, const char *body, size_t len, tm_oai_error *e);
char *tm_serve_detokenize(const tm_serve_tok *t, const char *body, size_t len, tm_oai_error *e);

/* Anthropic's Messages API (serve/anthropic.c). tm_anth_request: a /v1/messages body as an OpenAI chat
 * body (*chat_json malloc'd; tm_oai_parse checks the rest), or -1 with *e set (400 naming the field:
 * images, documents, server tools; counting, for /v1/messages/count_tokens: max_tokens may be left
 * out). The reply: the "message" object; a stream's events: its start
 * (message_start), a piece of reasoning and text (blocks opened and closed as the kind changes), its
 * end (the open block closed, a tool_use block per call, message_delta with the stop reason and
 * output tokens, message_stop), an error event. Each malloc'd, NULL when out of memory. */
typedef struct tm_anth_end {
    const tm_oai_tool_calls *tc; /* the reply's calls, or NULL */
    const char *finish;          /* the choice's finish reason ("stop", "length", "tool_calls") */
    const char *stop_seq;        /* the stop sequence that ended it, or NULL */
} tm_anth_end;

typedef struct tm_anth_reply {
    const char *reasoning;       /* [reasoning_len]: a thinking block where not empty */
    size_t reasoning_len;
    const char *text;            /* [len]: a text block where not empty */
    size_t len;
    tm_anth_end end;
} tm_anth_reply;

typedef struct tm_anth_stream {
    int next;                    /* blocks started */
    int open;                    /* the kind of the open one (block next - 1), or none */
} tm_anth_stream;

int tm_anth_request(const char *body, size_t len, int counting, char **chat_json, tm_oai_error *e);
char *tm_anth_message_json(const char *id, const char *model, const tm_anth_reply *r, int in_tok, int out_tok);
char *tm_anth_stream_start(const char *id, const char *model, int in_tok, tm_anth_stream *s);
char *tm_anth_stream_part(tm_anth_stream *s, const char *reasoning, size_t rlen, const char *text, size_t len);
char *tm_anth_stream_end(tm_anth_stream *s, const tm_anth_end *r, int out_tok);
char *tm_anth_stream_error(const char *msg);

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
