/* serve/serve-impl.h: the server's pieces besides serve.c: the /tokenize and /detokenize bodies
 * (serve/tokenize.c), pure functions of the model and the request body; the /metrics text
 * (serve/metrics.c); Anthropic's Messages API's request and reply shapes (serve/anthropic.c). */
#ifndef TM_SERVE_SERVE_IMPL_H
#define TM_SERVE_SERVE_IMPL_H

#include <stddef.h>

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
 * body (*chat_json malloc'd; tm_oai_parse checks the rest), or -1 with *e set (400 naming the field;
 * tools, images, documents and tool blocks refused). The reply: the "message" object; a stream's
 * first events (message_start, content_block_start), a text delta, the last events (content_block_stop,
 * message_delta with the stop reason and output tokens, message_stop), an error event. finish is the
 * library's ("length": max_tokens; else end_turn). Each malloc'd, NULL when out of memory. */
int tm_anth_request(const char *body, size_t len, char **chat_json, tm_oai_error *e);
char *tm_anth_message_json(const char *id, const char *model, const char *text, size_t len, const char *finish,
                           int in_tok, int out_tok);
char *tm_anth_stream_start(const char *id, const char *model, int in_tok);
char *tm_anth_stream_text(const char *text, size_t len);
char *tm_anth_stream_end(const char *finish, int out_tok);
char *tm_anth_stream_error(const char *msg);

/* GET /metrics: the counts in Prometheus' text exposition format (0.0.4), each series labelled
 * model="..."; malloc'd, NULL when out of memory */
char *tm_serve_metrics(const tm_server_counts *c, const char *model);

#endif
