/* cli/cmd_chat.c: `tandem chat MODEL`: an interactive, multi-turn chat.
 * Each turn renders the whole conversation with the chat template and
 * streams the reply; /reset starts over, /quit (or end of input) leaves.
 * The reply is read as the server reads it (serve/reply.h): a reasoning
 * model's thinking (<think> blocks, gpt-oss's analysis channel) goes to
 * stderr, dimmed on a terminal, and its answer to stdout; the conversation
 * keeps the answer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "serve/reply.h"
#include "tandem.h"
#include "text/harmony.h"
#include "text/reasoning.h"

static void chat_usage(FILE *f)
{
    fputs("usage: tandem chat MODEL [options]\n"
          "\n"
          "Chat with MODEL: type a message and press enter; /reset forgets the conversation,\n"
          "/quit (or end of input) leaves. The model's chat template formats the turns.\n"
          "\n"
          "  --template F.jinja     use this chat template (needed if the model has none)\n"
          "  --system TEXT          a system message at the start of the conversation\n"
          "  -n, --n-predict N      longest reply in tokens (default 512)\n", f);
    fputs(cli_gen_usage, f);
}

typedef struct turn {
    tm_reply r;
    int dim;      /* stderr is a terminal: the reasoning dimmed */
    int thinking; /* reasoning was printed last (the answer starts on a new line) */
} turn;

static int on_text(void *ud, const char *piece, size_t len, int32_t token)
{
    (void)token;
    turn *t = ud;
    if (tm_reply_add(&t->r, piece, len)) return 1;
    tm_reply_part p;
    tm_reply_delta(&t->r, &p);
    if (p.reasoning_len) {
        fprintf(stderr, "%s%.*s%s", t->dim ? "\033[2m" : "", (int)p.reasoning_len, p.reasoning, t->dim ? "\033[0m" : "");
        t->thinking = 1;
    }
    if (p.content_len) {
        if (t->thinking) fputc('\n', stderr);
        t->thinking = 0;
        fwrite(p.content, 1, p.content_len, stdout);
        fflush(stdout);
    }
    return 0;
}

static void add_message(cJSON *msgs, const char *role, const char *content)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    cJSON_AddItemToArray(msgs, m);
}

static cJSON *fresh(const char *system)
{
    cJSON *msgs = cJSON_CreateArray();
    if (system) add_message(msgs, "system", system);
    return msgs;
}

static char *read_text_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 && n < (1 << 24) ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

int cmd_chat(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        chat_usage(stdout);
        return 0;
    }
    const char *model = NULL, *tpl_path = NULL, *system = NULL;
    cli_gen g;
    cli_gen_init(&g);
    g.req.max_tokens = 512;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int k = cli_gen_parse(&g, "chat", argc, argv, &i);
        if (k < 0) return 2;
        if (k > 0) continue;
        if ((!strcmp(a, "--template") || !strcmp(a, "--system") || !strcmp(a, "-n") || !strcmp(a, "--n-predict")) && !v) {
            fprintf(stderr, "tandem chat: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--template")) tpl_path = argv[++i];
        else if (!strcmp(a, "--system")) system = argv[++i];
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) g.req.max_tokens = atoi(argv[++i]);
        else if (a[0] == '-') { fprintf(stderr, "tandem chat: unknown option '%s' (see --help)\n", a); return 2; }
        else if (!model) model = a;
        else { fprintf(stderr, "tandem chat: unexpected argument '%s'\n", a); return 2; }
    }
    if (!model) {
        chat_usage(stderr);
        return 2;
    }
    char *tpl = NULL;
    if (tpl_path && !(tpl = read_text_file(tpl_path))) {
        fprintf(stderr, "tandem chat: %s: cannot read the template\n", tpl_path);
        return 1;
    }
    tandem_status st;
    tandem_model *m;
    if (tandem_model_open(&m, model, &st) != 0) {
        fprintf(stderr, "tandem chat: %s\n", st.msg);
        free(tpl);
        return 1;
    }
    if (!cli_can_generate("chat", m, model)) {
        tandem_model_free(m);
        free(tpl);
        return 1;
    }
    cli_gen_model_defaults(&g, m);
    tandem_session *s;
    g.so.max_seqs = 1; /* one turn at a time: nothing can arrive while it decodes, so both sides lend */
    g.so.prefix_cache = 1; /* each turn re-renders the conversation: its earlier turns' KV is reused */
    if (tandem_session_new(&s, m, &g.so, &st) != 0) {
        fprintf(stderr, "tandem chat: %s\n", st.msg);
        tandem_model_free(m);
        free(tpl);
        return 1;
    }
    /* fail early if there is no template at all */
    char *probe = NULL;
    if (tandem_chat_render(m, tpl, "[{\"role\":\"user\",\"content\":\"hi\"}]", 1, NULL, &probe, &st) != 0) {
        fprintf(stderr, "tandem chat: %s\n", st.msg);
        tandem_session_free(s);
        tandem_model_free(m);
        free(tpl);
        return 1;
    }
    free(probe);
    const char *tpl_src = tpl ? tpl : tandem_model_chat_template(m);
    const tm_think_markers *think = tm_think_detect(tpl_src);
    int harmony = tm_harmony_detect(tpl_src);
    if (harmony) g.req.keep_special = TM_HARMONY_MARKERS; /* its channels are special tokens */
    else if (think) g.req.keep_special = think->keep; /* its thinking's markers may be */
    int tty = isatty(0);
    if (tty) fprintf(stderr, "tandem chat (%s). /reset to start over, /quit to leave.\n", model);
    cJSON *msgs = fresh(system);
    char line[65536];
    int rc = 0;
    for (;;) {
        if (tty) fputs("\n> ", stderr);
        if (!fgets(line, sizeof line, stdin)) break;
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0]) continue;
        if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) break;
        if (!strcmp(line, "/reset")) {
            cJSON_Delete(msgs);
            msgs = fresh(system);
            fprintf(stderr, "(conversation reset)\n");
            continue;
        }
        add_message(msgs, "user", line);
        char *js = cJSON_PrintUnformatted(msgs), *prompt = NULL;
        int r1 = tandem_chat_render(m, tpl, js, 1, NULL, &prompt, &st);
        free(js);
        if (r1 != 0) {
            fprintf(stderr, "TemplateError: %s\n", st.msg);
            cJSON_DeleteItemFromArray(msgs, cJSON_GetArraySize(msgs) - 1);
            continue;
        }
        tandem_request r = g.req;
        r.prompt = prompt;
        r.no_special = 1; /* the rendered template holds the special tokens */
        turn t = {.dim = isatty(2)};
        tm_reply_init(&t.r, NULL, NULL, think, !harmony && tm_think_opened(think, prompt, strlen(prompt)), harmony);
        tandem_stats stats;
        int r2 = tandem_generate(s, &r, on_text, &t, &stats, &st);
        free(prompt);
        tm_reply_part p;
        if (r2 == 0 && tm_reply_finish(&t.r, 0, 0) == 0) { /* what the stream held back (a harmony header's text) */
            tm_reply_rest(&t.r, &p);
            if (p.reasoning_len) fprintf(stderr, "%.*s", (int)p.reasoning_len, p.reasoning);
            if (p.reasoning_len || t.thinking) fputc('\n', stderr);
            fwrite(p.content, 1, p.content_len, stdout);
        } else if (r2 == 0) {
            r2 = TANDEM_E_NOMEM;
            snprintf(st.msg, sizeof st.msg, "out of memory");
        }
        fputc('\n', stdout);
        fflush(stdout);
        if (r2 != 0) {
            fprintf(stderr, "tandem chat: %s\n", st.msg);
            cJSON_DeleteItemFromArray(msgs, cJSON_GetArraySize(msgs) - 1);
            tm_reply_free(&t.r);
            if (r2 == TANDEM_E_LIMIT) continue; /* context full: the user may /reset */
            rc = 1;
            break;
        }
        tm_reply_whole(&t.r, &p);
        char *answer = strndup(p.content, p.content_len);
        add_message(msgs, "assistant", answer ? answer : "");
        free(answer);
        tm_reply_free(&t.r);
        if (tty)
            fprintf(stderr, "[%d prompt tokens (%d reused), TTFT %.3f s, %.1f tok/s; %s]\n", stats.n_prompt,
                    stats.n_cached, stats.ttft, stats.t_decode > 0 ? stats.n_generated / stats.t_decode : 0.0,
                    stats.route);
    }
    cJSON_Delete(msgs);
    tandem_session_free(s);
    tandem_model_free(m);
    free(tpl);
    return rc;
}
