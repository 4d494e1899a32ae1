/* serve/serve.h: an OpenAI-compatible HTTP server (libmicrohttpd) over one
 * tandem session: GET /v1/models, GET /health, POST /v1/completions and
 * POST /v1/chat/completions, each as JSON or as Server-Sent Events. Requests
 * run concurrently through the session's scheduler (continuous batching).
 *
 *   tm_server_opts o;
 *   tm_server_opts_default(&o);
 *   o.port = 0;                                  // an ephemeral port
 *   o.model_name = "tiny-classics-llama";
 *   tm_server *srv;
 *   tm_err err = {0};
 *   if (tm_server_start(&srv, model, session, &o, &err) != TM_OK) { ... err.msg ... }
 *   printf("port %d\n", tm_server_port(srv));
 *   ...                                          // serves from its own threads
 *   tm_server_stop(srv);                         // cancels what is running, joins, frees
 *
 * The library never prints: log lines (one per request, and libmicrohttpd's
 * own errors) go to o.log when set. docs/serve.md documents the endpoints,
 * the parameters and the errors; the design block is at the top of serve.c. */
#ifndef TM_SERVE_SERVE_H
#define TM_SERVE_SERVE_H

#include <stddef.h>

#include "core/status.h"
#include "tandem.h"

#define TM_SERVER_DEFAULT_MAX_BODY ((size_t)2 << 20) /* bytes */

typedef struct tm_server tm_server;

typedef void (*tm_server_log_fn)(void *ud, const char *line);

typedef struct tm_server_opts {
    const char *host;              /* address to bind: "127.0.0.1" (default), "0.0.0.0", "::", a name */
    int port;                      /* 8080 (default); 0: an ephemeral port (see tm_server_port) */
    const char *model_name;        /* the id /v1/models lists and responses carry; NULL: "tandem" */
    const char *chat_template;     /* Jinja source overriding the model's template; NULL: the model's */
    const char *api_key;           /* NULL or "": no authentication; else "Authorization: Bearer KEY" */
    int metrics;                   /* 1: GET /metrics answers the counts in Prometheus' text format (behind the
                                      API key, as the /v1 routes); 0: 404 */
    const char *cors_origin;       /* NULL or "": no CORS; else the Access-Control-Allow-Origin every response
                                      carries ("*", or one origin), and browsers' preflight requests
                                      (OPTIONS on a known path, no API key) answered 204 */
    size_t max_body;               /* largest request body in bytes (413 above); 0: the default */
    int n_predict;                 /* max_tokens when a request gives none; 0: OpenAI's defaults
                                      (16 for completions, the rest of the context for chat) */
    int max_conns;                 /* simultaneous connections (one thread each); 0: 64 */
    const tandem_request *defaults;/* sampling defaults (temperature, top_p, stop, ...); NULL:
                                      tandem_request_default. Copied. */
    int seed_set;                  /* 1: a request without "seed" uses defaults->seed; 0: a fresh random seed */
    const char *tool_parser;       /* how replies to requests with tools are read for calls: NULL or "auto":
                                      the dialect the chat template shows (text/toolcall.h); "none": never;
                                      or a dialect's name (hermes, llama3_json, mistral, mistral_args, granite) */
    const char *reasoning;         /* where a reply's <think> block goes: NULL or "auto": to the message's
                                      "reasoning_content" when the chat template shows </think>
                                      (text/reasoning.h); "deepseek": always so; "none": left in content */
    tm_server_log_fn log;          /* (optional) default: silent */
    void *log_ud;
} tm_server_opts;

void tm_server_opts_default(tm_server_opts *o);

/* tm_server_start: bind, listen and serve from libmicrohttpd's threads. m and
 * s must outlive the server. TM_E_IO names the address when it cannot bind. */
int tm_server_start(tm_server **out, tandem_model *m, tandem_session *s, const tm_server_opts *o, tm_err *err);

/* The TCP port the server listens on (the one picked when opts.port was 0). */
int tm_server_port(const tm_server *srv);

typedef struct tm_server_counts {
    long requests;                 /* HTTP requests answered (any status) */
    long generations;              /* completions and chat completions submitted */
    long active;                   /* generations not yet finished */
    long cancelled;                /* generations ended by a disconnect or the shutdown */
    long long prompt_tokens;       /* finished generations' prompt tokens (once per request) */
    long long generated_tokens;    /* ... and their choices' generated tokens */
    double ttft_sum;               /* ... the seconds to their first token, summed, */
    long ttft_count;               /* over this many (those that generated one) */
} tm_server_counts;
void tm_server_get_counts(tm_server *srv, tm_server_counts *c);

/* tm_server_stop: stop accepting, cancel every running generation (each
 * ends at its next token), close the connections, join the threads, free. */
void tm_server_stop(tm_server *srv);

#endif
