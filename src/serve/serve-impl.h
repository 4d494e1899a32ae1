/* serve/serve-impl.h: the server's pieces besides serve.c: the /tokenize and /detokenize bodies
 * (serve/tokenize.c), pure functions of the model and the request body; the /metrics text
 * (serve/metrics.c). */
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

/* GET /metrics: the counts in Prometheus' text exposition format (0.0.4), each series labelled
 * model="..."; malloc'd, NULL when out of memory */
char *tm_serve_metrics(const tm_server_counts *c, const char *model);

#endif
