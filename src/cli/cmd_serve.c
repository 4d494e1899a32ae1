/* cli/cmd_serve.c: `tandem serve MODEL`: an OpenAI-compatible HTTP server
 * (serve/serve.h, docs/serve.md) until SIGINT or SIGTERM. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "serve/serve.h"
#include "text/toolcall.h"
#include "tandem.h"

static void serve_usage(FILE *f)
{
    fputs("usage: tandem serve MODEL [options]\n"
          "\n"
          "Serve MODEL over HTTP with the OpenAI API: GET /v1/models, GET /health,\n"
          "POST /v1/completions, POST /v1/chat/completions (JSON, or Server-Sent Events\n"
          "with \"stream\": true), POST /v1/responses, POST /v1/embeddings, and Anthropic's\n"
          "POST /v1/messages. Requests run concurrently (continuous batching).\n"
          "SIGINT or SIGTERM stops it. docs/serve.md has the details.\n"
          "\n"
          "      --host H           address to listen on (default 127.0.0.1; 0.0.0.0 or :: for all)\n"
          "      --port P           TCP port (default 8080; 0: any free port)\n"
          "      --alias NAME       model id in /v1/models and responses (default: MODEL's file name)\n"
          "      --template F.jinja chat template (default: the model's)\n"
          "      --tool-parser D    how replies to requests with \"tools\" are read for calls: auto (the\n"
          "                         dialect the chat template shows: default), none, hermes,\n"
          "                         llama3_json, mistral, mistral_args, granite, qwen3_coder, glm,\n"
          "                         seed_oss, minimax, harmony, deepseek_v3, command_r or kimi_k2\n"
          "      --reasoning-format F  where a reply's thinking goes: auto (to \"reasoning_content\"\n"
          "                         when the chat template shows its markers: </think>, </seed:think>,\n"
          "                         <|END_THINKING|>, [/THINK]: default), deepseek (always there),\n"
          "                         none (left in content)\n"
          "      --api-key KEY      require \"Authorization: Bearer KEY\" (or set TANDEM_API_KEY)\n"
          "      --metrics          answer GET /metrics (Prometheus text: requests, tokens, time to first token)\n"
          "      --cors ORIGIN      let browser pages of ORIGIN (\"*\": any) call the server: its responses\n"
          "                         carry Access-Control-Allow-Origin and preflights are answered\n"
          "      --max-body BYTES   largest request body (default 2097152)\n"
          "      --max-conns N      simultaneous connections (default 64)\n"
          "      --parallel N       requests decoding at once (default 8; more wait in the queue). With 1 a\n"
          "                         prompt never arrives while another decodes, so decode may borrow the\n"
          "                         prefill cores whatever --max-stall says\n"
          "      --no-prefix-cache  do not reuse the KV of earlier requests' prompt pages (reused by\n"
          "                         default: a request whose prompt starts as an earlier one's\n"
          "                         prefills only the rest)\n"
          "  -n, --n-predict N      max_tokens when a request gives none (default: 16 for\n"
          "                         completions, the rest of the context for chat)\n"
          "\n"
          "Engine options, and sampling defaults for requests that do not set them:\n", f);
    fputs(cli_gen_usage, f);
}

static char *read_text_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 14, n = 0, k;
    char *s = malloc(cap + 1);
    while (s && (k = fread(s + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            char *t = cap < (1u << 24) ? realloc(s, 2 * cap + 1) : NULL;
            if (!t) { free(s); s = NULL; break; }
            s = t;
            cap *= 2;
        }
    }
    fclose(f);
    if (s) s[n] = '\0';
    return s;
}

static void log_line(void *ud, const char *line)
{
    (void)ud;
    char ts[32];
    time_t t = time(NULL);
    struct tm tm;
    strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", localtime_r(&t, &tm));
    fprintf(stderr, "%s %s\n", ts, line);
}

/* "models/tiny-classics-llama/" -> "tiny-classics-llama"; "x/m.tdm" -> "m" */
static void model_id(const char *path, char *out, size_t n)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    size_t b = len;
    while (b > 0 && path[b - 1] != '/') b--;
    size_t k = len - b;
    if (k > 4 && !strncmp(path + len - 4, ".tdm", 4)) k -= 4;
    snprintf(out, n, "%.*s", (int)k, path + b);
}

int cmd_serve(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        serve_usage(stdout);
        return 0;
    }
    const char *model = NULL, *tpl_path = NULL;
    tm_server_opts o;
    tm_server_opts_default(&o);
    o.api_key = getenv("TANDEM_API_KEY");
    cli_gen g;
    cli_gen_init(&g);
    g.so.prefix_cache = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--seed")) o.seed_set = 1;
        int k = cli_gen_parse(&g, "serve", argc, argv, &i);
        if (k < 0) return 2;
        if (k > 0) continue;
        static const char *const with_value[] = {"--host", "--port", "--alias", "--template", "--api-key", "--cors",
                                                 "--max-body", "--max-conns", "-n", "--n-predict", "--tool-parser", "--reasoning-format", NULL};
        for (const char *const *w = with_value; *w; w++)
            if (!strcmp(a, *w) && !v) {
                fprintf(stderr, "tandem serve: %s needs a value\n", a);
                return 2;
            }
        char *end = NULL;
        if (!strcmp(a, "--no-prefix-cache")) g.so.prefix_cache = 0;
        else if (!strcmp(a, "--metrics")) o.metrics = 1;
        else if (!strcmp(a, "--host")) o.host = argv[++i];
        else if (!strcmp(a, "--port")) {
            long p = strtol(argv[++i], &end, 10);
            if (*end || p < 0 || p > 65535) {
                fprintf(stderr, "tandem serve: --port %s: not a port number\n", v);
                return 2;
            }
            o.port = (int)p;
        } else if (!strcmp(a, "--alias")) o.model_name = argv[++i];
        else if (!strcmp(a, "--template")) tpl_path = argv[++i];
        else if (!strcmp(a, "--api-key")) o.api_key = argv[++i];
        else if (!strcmp(a, "--cors")) o.cors_origin = argv[++i];
        else if (!strcmp(a, "--tool-parser")) o.tool_parser = argv[++i];
        else if (!strcmp(a, "--reasoning-format")) o.reasoning = argv[++i];
        else if (!strcmp(a, "--max-body")) {
            unsigned long long b = strtoull(argv[++i], &end, 10);
            if (*end || b < 64) { fprintf(stderr, "tandem serve: --max-body %s: a byte count >= 64\n", v); return 2; }
            o.max_body = (size_t)b;
        } else if (!strcmp(a, "--max-conns")) {
            o.max_conns = atoi(argv[++i]);
            if (o.max_conns < 1) { fprintf(stderr, "tandem serve: --max-conns %s: at least 1\n", v); return 2; }
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) o.n_predict = atoi(argv[++i]);
        else if (a[0] == '-') { fprintf(stderr, "tandem serve: unknown option '%s' (see --help)\n", a); return 2; }
        else if (!model) model = a;
        else { fprintf(stderr, "tandem serve: unexpected argument '%s'\n", a); return 2; }
    }
    if (!model) {
        serve_usage(stderr);
        return 2;
    }
    if (o.tool_parser && strcmp(o.tool_parser, "auto") && strcmp(o.tool_parser, "none") &&
        !tm_tool_dialect_named(o.tool_parser)) {
        fprintf(stderr, "tandem serve: --tool-parser %s: not one of auto, none, %s\n", o.tool_parser,
                tm_tool_dialect_names());
        return 2;
    }
    if (o.reasoning && strcmp(o.reasoning, "auto") && strcmp(o.reasoning, "none") && strcmp(o.reasoning, "deepseek")) {
        fprintf(stderr, "tandem serve: --reasoning-format %s: not one of auto, none, deepseek\n", o.reasoning);
        return 2;
    }
    /* SIGINT / SIGTERM are taken by sigwait below: block them before any thread starts */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    char *tpl = NULL;
    if (tpl_path && !(tpl = read_text_file(tpl_path))) {
        fprintf(stderr, "tandem serve: %s: cannot read the template\n", tpl_path);
        return 1;
    }
    tandem_status st;
    tandem_model *m;
    if (tandem_model_open(&m, model, &st) != 0) {
        fprintf(stderr, "tandem serve: %s\n", st.msg);
        free(tpl);
        return 1;
    }
    cli_gen_model_defaults(&g, m);
    tandem_session *s;
    if (tandem_session_new(&s, m, &g.so, &st) != 0) {
        fprintf(stderr, "tandem serve: %s\n", st.msg);
        tandem_model_free(m);
        free(tpl);
        return 1;
    }
    char probe_msgs[] = "[{\"role\":\"user\",\"content\":\"hi\"}]", *probe = NULL, name[256];
    if (tandem_chat_render(m, tpl, probe_msgs, 1, NULL, &probe, &st) != 0)
        fprintf(stderr, "tandem serve: /v1/chat/completions will fail: %s\n", st.msg);
    free(probe);
    model_id(model, name, sizeof name);
    if (!o.model_name) o.model_name = name;
    o.chat_template = tpl;
    o.defaults = &g.req;
    g.req.stop = g.n_stops ? g.stops : NULL;
    o.log = log_line;
    tm_server *srv;
    tm_err err = {0};
    if (tm_server_start(&srv, m, s, &o, &err) != TM_OK) {
        fprintf(stderr, "tandem serve: %s\n", err.msg);
        tandem_session_free(s);
        tandem_model_free(m);
        free(tpl);
        return 1;
    }
    int v6 = strchr(o.host, ':') != NULL;
    fprintf(stderr, "tandem serve: %s on http://%s%s%s:%d/v1 (context %d tokens%s); Ctrl-C stops\n", o.model_name,
            v6 ? "[" : "", o.host, v6 ? "]" : "", tm_server_port(srv), tandem_session_ctx(s),
            o.api_key && o.api_key[0] ? ", API key required" : "");
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "tandem serve: %s, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    tm_server_stop(srv);
    tandem_session_free(s);
    tandem_model_free(m);
    free(tpl);
    return 0;
}
