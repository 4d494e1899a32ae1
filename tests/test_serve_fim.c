/* tests/test_serve_fim.c: fill in the middle (completions' "suffix").
 *
 * The demo model given Qwen2.5-Coder's FIM tokens (three of its vocabulary entries renamed
 * <|fim_prefix|>, <|fim_suffix|>, <|fim_middle|> and made special, their merges dropped): the server
 * finds them, and a completion with a suffix is the library's greedy answer to
 * <|fim_prefix|>PROMPT<|fim_suffix|>SUFFIX<|fim_middle|>, its prompt tokens counted as such. The
 * demo model as it is has none: a suffix is refused by name, as are a suffix beside token ids, a
 * batch, or a chat request. llama.cpp's /infill: its prompt built as llama.cpp builds it, the answer
 * the library's greedy one, and its n_indent and t_max_predict_ms cutting that answer where
 * llama.cpp's rules say. */
#include "harness.h"
#include "toklog_util.h"
#include "vocab_util.h"
#include "http_client.h"

#include <limits.h>
#include <signal.h>
#include <sys/stat.h>

#include "serve/oai.h"
#include "serve/serve-impl.h"
#include "serve/serve.h"
#include "tandem.h"

static const char *DEMO = "models/tiny-classics-llama";
static const char *FIM[5] = {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|repo_name|>", "<|file_sep|>"};

/* dir := the demo model with nt (3: the FIM tokens; 5: and Qwen2.5-Coder's repository tokens) vocabulary
 * entries (ids V-nt .. V-1) renamed to those tokens */
static int fim_dir(const char *dir, int nt)
{
    return tv_model_dir(dir, DEMO, FIM, NULL, nt);
}

static tm_server *start_ctx(tandem_model *m, tandem_session **s, int ctx)
{
    tandem_session_opts so;
    tandem_session_opts_default(&so);
    so.n_threads = 2;
    so.max_ctx = ctx;
    so.route = TANDEM_ROUTE_HYBRID;
    tandem_status st;
    CHECKF(tandem_session_new(s, m, &so, &st) == 0, "%s", st.msg);
    tm_server_opts o;
    tm_server_opts_default(&o);
    o.port = 0;
    tm_server *srv = NULL;
    tm_err err = {0};
    if (*s) CHECKF(tm_server_start(&srv, m, *s, &o, &err) == TM_OK, "%s", err.msg);
    return srv;
}

static tm_server *start(tandem_model *m, tandem_session **s) { return start_ctx(m, s, 512); }

/* ---- llama.cpp's /infill ---- */

static void add_tok(tandem_model *m, int32_t *v, size_t *n, const char *text, int special)
{
    int32_t *t = NULL;
    size_t k = 0;
    tandem_status st;
    CHECK(tandem_tokenize(m, text, strlen(text), special, &t, &k, &st) == 0);
    for (size_t i = 0; i < k && *n < 4096; i++) v[(*n)++] = t[i];
    free(t);
}

/* the prompt llama.cpp's format_infill makes (nt: the tokenizer's FIM tokens, 5 with the repository
 * ones), extra context kept whole when keep */
static size_t infill_prompt(tandem_model *m, int nt, const char *fn, const char *extra, int keep, const char *pre,
                            const char *pr, const char *suf, int32_t *v)
{
    size_t n = 0;
    if (keep) {
        if (nt == 5) {
            add_tok(m, v, &n, FIM[3], 0), add_tok(m, v, &n, "myproject\n", 0);
            add_tok(m, v, &n, FIM[4], 0);
            char line[128];
            snprintf(line, sizeof line, "%s\n", fn);
            add_tok(m, v, &n, line, 0), add_tok(m, v, &n, extra, 0);
            add_tok(m, v, &n, FIM[4], 0), add_tok(m, v, &n, "filename\n", 0);
        } else {
            add_tok(m, v, &n, "\n\n--- snippet ---\n\n", 0), add_tok(m, v, &n, extra, 0);
        }
    }
    add_tok(m, v, &n, "", 1);
    add_tok(m, v, &n, FIM[0], 0), add_tok(m, v, &n, pre, 0), add_tok(m, v, &n, pr, 0);
    add_tok(m, v, &n, FIM[1], 0), add_tok(m, v, &n, suf, 0), add_tok(m, v, &n, FIM[2], 0);
    return n;
}

/* POST /infill on model dir (nt FIM tokens) at context ctx: the library's greedy answer to llama.cpp's
 * prompt, as JSON and streamed; the extra context kept where the context leaves llama.cpp's room */
static void test_infill(const char *dir, int nt, int ctx)
{
    tandem_model *m = NULL;
    tandem_status st;
    CHECKF(tandem_model_open(&m, dir, &st) == 0, "%s", st.msg);
    tandem_session *s = NULL;
    tm_server *srv = m ? start_ctx(m, &s, ctx) : NULL;
    if (srv) {
        const char *pre = "Once upon a time, there was a little", *pr = " girl", *suf = " and they lived happily ever after.";
        const char *fn = "notes.txt", *extra = "It was a dark and stormy night.";
        static int32_t v[4096];
        int keep = ctx - 2048 - 2 * 12 > 40;
        size_t n = infill_prompt(m, nt, fn, extra, keep, pre, pr, suf, v);
        char want[TH_TEXT_CAP] = "";
        tandem_request q;
        tandem_request_default(&q);
        q.prompt_ids = v;
        q.n_prompt_ids = n;
        q.max_tokens = 12;
        q.temperature = 0;
        tandem_stats stats;
        CHECKF(tandem_generate(s, &q, th_collect, want, &stats, &st) == 0, "%s", st.msg);
        char body[1024];
        int port = tm_server_port(srv), status;
        for (int stream = 0; stream < 2; stream++) {
            snprintf(body, sizeof body, "{\"input_prefix\":\"%s\",\"input_suffix\":\"%s\",\"prompt\":\"%s\","
                     "\"input_extra\":[{\"filename\":\"%s\",\"text\":\"%s\"}],\"n_predict\":12,\"temperature\":0,"
                     "\"cache_prompt\":true,\"samplers\":[\"top_k\"],\"stream\":%s}", pre, suf, pr, fn, extra,
                     stream ? "true" : "false");
            if (!stream) {
                cJSON *j = http_json(port, "POST", "/infill", body, NULL, &status);
                CHECKF(status == 200 && jstr(j, "content") && !strcmp(jstr(j, "content"), want) &&
                           jnum(j, "tokens_evaluated") == (double)n && jnum(j, "tokens_predicted") == 12 &&
                           jstr(j, "stop_type") && !strcmp(jstr(j, "stop_type"), "limit") &&
                           cJSON_IsTrue(cJSON_GetObjectItem(j, "stop")) && jnum(j, "timings.predicted_n") == 12 &&
                           jnum(j, "timings.prompt_ms") >= 0 && jnum(j, "generation_settings.n_ctx") == ctx &&
                           cJSON_IsBool(cJSON_GetObjectItem(j, "truncated")) &&
                           cJSON_IsTrue(cJSON_GetObjectItem(j, "truncated")) == !keep,
                       "/infill (%d tokens, ctx %d): %d '%s' / '%s', %g prompt tokens (want %zu)", nt, ctx, status,
                       jstr(j, "content") ? jstr(j, "content") : "", want, jnum(j, "tokens_evaluated"), n);
                cJSON_Delete(j);
            } else { /* data: events, their contents adding up, the last one stop with the figures */
                http_res hr;
                CHECK(http(port, "POST", "/infill", body, NULL, &hr) == 0 && hr.status == 200);
                char got[TH_TEXT_CAP] = "";
                int events = 0, stops = 0, last_stop = 0, timings = 0;
                for (const char *p = hr.body ? strstr(hr.body, "data: ") : NULL; p; p = strstr(p + 1, "data: ")) {
                    const char *e = strstr(p, "\n\n");
                    cJSON *o = e ? cJSON_ParseWithLength(p + 6, (size_t)(e - p - 6)) : NULL;
                    events++;
                    if (jstr(o, "content") && strlen(got) + strlen(jstr(o, "content")) < sizeof got) strcat(got, jstr(o, "content"));
                    last_stop = cJSON_IsTrue(cJSON_GetObjectItem(o, "stop"));
                    stops += last_stop;
                    timings = cJSON_GetObjectItem(o, "timings") != NULL;
                    cJSON_Delete(o);
                }
                CHECKF(!strcmp(got, want) && events >= 2 && stops == 1 && last_stop && timings && !strstr(hr.body, "[DONE]"),
                       "/infill streamed: '%s' / '%s', %d events, %d stops", got, want, events, stops);
                http_res_free(&hr);
            }
        }
        {   /* no prefix and no extra context (their token lists empty: fuzz_http found the empty lists' tails
               taken at an offset from NULL) */
            cJSON *j = http_json(port, "POST", "/infill", "{\"input_suffix\":\"x\",\"n_predict\":2,\"temperature\":0}", NULL,
                                 &status);
            CHECKF(status == 200 && jstr(j, "content") && jnum(j, "tokens_predicted") == 2, "/infill without a prefix: %d",
                   status);
            cJSON_Delete(j);
        }
        /* refusals by field */
        check_error(port, "POST", "/infill", "{\"input_prefix\":3}", 400, NULL, "a number as the prefix");
        check_error(port, "POST", "/infill", "{\"input_prefix\":\"a\",\"input_extra\":\"x\"}", 400, "input_extra",
                    "input_extra a string");
        check_error(port, "POST", "/infill", "{\"input_extra\":[{\"text\":7}]}", 400, "input_extra", "a number as text");
        check_error(port, "POST", "/infill", "{\"input_prefix\":\"a\",\"n_predict\":\"x\"}", 400, "n_predict",
                    "n_predict a string");
        /* (past long long's range: fuzz_http found the integer test casting it before the range test) */
        check_error(port, "POST", "/infill", "{\"input_prefix\":\"a\",\"n_predict\":-6.6e24}", 400, "n_predict",
                    "n_predict far below -2");
        check_error(port, "POST", "/infill", "{\"input_prefix\":\"a\",\"n_predict\":1e300}", 400, "n_predict",
                    "n_predict far past the bound");
        check_error(port, "POST", "/infill", "{\"input_prefix\":\"a\xff\"}", 400, NULL, "a prefix not UTF-8");
        check_error(port, "POST", "/infill", "[1]", 400, NULL, "not an object");
        check_error(port, "POST", "/infill", "{\"input_prefix\":\"a\",\"temperature\":\"hot\"}", 400, "temperature",
                    "temperature a string");
        tm_server_stop(srv);
    }
    tandem_session_free(s);
    tandem_model_free(m);
}

/* ---- llama.cpp's n_indent and t_max_predict_ms ---- */

/* the library's greedy answer to ids [n] (or text, where ids is NULL), max tokens, token by token */
static void reference(tandem_session *s, const int32_t *ids, size_t n, const char *text, int max, tok_log *g)
{
    memset(g, 0, sizeof *g);
    tandem_request q;
    tandem_request_default(&q);
    q.prompt = text;
    q.prompt_ids = ids;
    q.n_prompt_ids = n;
    q.max_tokens = max;
    q.temperature = 0;
    q.logprobs = 0;
    q.on_logprob.fn = tl_token;
    tandem_stats stats;
    tandem_status st;
    CHECKF(tandem_generate(s, &q, tl_text, g, &stats, &st) == 0, "%s", st.msg);
}

/* POST /infill body, as JSON or streamed: the content (the events' joined), tokens_predicted and stop_type
 * (the last event's; a stream must have exactly one stop event, the last) */
static void infill_answer(int port, const char *body, int stream, char *content, size_t cap, int *predicted,
                          char *stop_type)
{
    content[0] = stop_type[0] = 0;
    *predicted = -1;
    if (!stream) {
        int status;
        cJSON *j = http_json(port, "POST", "/infill", body, NULL, &status);
        CHECKF(status == 200 && jstr(j, "content") && jstr(j, "stop_type"), "/infill %s: %d", body, status);
        snprintf(content, cap, "%s", jstr(j, "content") ? jstr(j, "content") : "");
        snprintf(stop_type, 16, "%s", jstr(j, "stop_type") ? jstr(j, "stop_type") : "");
        *predicted = (int)jnum(j, "tokens_predicted");
        cJSON_Delete(j);
        return;
    }
    http_res hr;
    CHECK(http(port, "POST", "/infill", body, NULL, &hr) == 0 && hr.status == 200);
    int stops = 0, last_stop = 0;
    for (const char *p = hr.body ? strstr(hr.body, "data: ") : NULL; p; p = strstr(p + 1, "data: ")) {
        const char *e = strstr(p, "\n\n");
        cJSON *o = e ? cJSON_ParseWithLength(p + 6, (size_t)(e - p - 6)) : NULL;
        if (jstr(o, "content") && strlen(content) + strlen(jstr(o, "content")) < cap) strcat(content, jstr(o, "content"));
        last_stop = cJSON_IsTrue(cJSON_GetObjectItem(o, "stop"));
        stops += last_stop;
        if (last_stop && jstr(o, "stop_type")) snprintf(stop_type, 16, "%s", jstr(o, "stop_type"));
        if (last_stop) *predicted = (int)jnum(o, "tokens_predicted");
        cJSON_Delete(o);
    }
    CHECKF(stops == 1 && last_stop, "/infill streamed: %d stop events", stops);
    http_res_free(&hr);
}

/* n_indent: the greedy answer cut where llama.cpp's rule cuts it, at the token that shows the short
 * line, stop_type "limit" (streamed: no event holds text past the cut); t_max_predict_ms 1: the answer
 * ends with a token whose text holds a newline, before n_predict (absent: n_predict tokens); on
 * /v1/completions too; negative values refused by name */
static void test_infill_limits(const char *dir)
{
    tandem_model *m = NULL;
    tandem_status st;
    CHECKF(tandem_model_open(&m, dir, &st) == 0, "%s", st.msg);
    tandem_session *s = NULL;
    tm_server *srv = m ? start(m, &s) : NULL;
    if (!srv) {
        tandem_session_free(s);
        tandem_model_free(m);
        return;
    }
    int port = tm_server_port(srv);
    static int32_t v[4096];
    static tok_log whole;
    size_t n = infill_prompt(m, 3, NULL, NULL, 0, "I.\nII.\nIII.\n", "", "\n", v); /* verse: short lines */
    reference(s, v, n, NULL, 64, &whole);
    CHECKF(whole.n == 64, "the greedy answer ended early: %d tokens", whole.n);
    long cut = indent_cut(whole.text, whole.len, 1);
    CHECKF(cut > 0, "no line to judge in the greedy answer '%s'", whole.text);
    int k = 0; /* the token that shows the short line's first character */
    while (cut > 0 && k < whole.n && whole.ends[k] <= (size_t)cut) k++;
    static char got[TH_TEXT_CAP];
    char body[1024], stop_type[16];
    for (int stream = 0; stream < 2 && cut > 0; stream++) {
        const char *limits[] = {"\"n_indent\":1", "\"t_max_predict_ms\":1", "\"n_indent\":0"};
        for (int l = 0; l < 3; l++) {
            snprintf(body, sizeof body, "{\"input_prefix\":\"I.\\nII.\\nIII.\\n\",\"input_suffix\":\"\\n\","
                     "\"n_predict\":64,\"temperature\":0,%s,\"stream\":%s}", limits[l], stream ? "true" : "false");
            int p;
            infill_answer(port, body, stream, got, sizeof got, &p, stop_type);
            size_t want = l == 0 ? (size_t)cut : p >= 1 && p <= whole.n ? whole.ends[p - 1] : (size_t)-1;
            int ok = strlen(got) == want && !memcmp(got, whole.text, want) && !strcmp(stop_type, "limit");
            if (l == 0) ok = ok && p == k + 1;
            if (l == 1) { /* ends with a token whose text holds a newline, before n_predict */
                size_t from = p >= 2 ? whole.ends[p - 2] : 0;
                ok = ok && p < 64 && memchr(whole.text + from, '\n', want - from);
            }
            if (l == 2) ok = ok && p == 64;
            static const char *wants[] = {"the short line's", "< 64, a newline's", "64"};
            CHECKF(ok, "/infill %s%s: %d tokens (want %s: %d), stop_type %s, '%s' of '%s'", limits[l],
                   stream ? ", streamed" : "", p, wants[l], l == 0 ? k + 1 : 64, stop_type, got, whole.text);
        }
    }
    /* /v1/completions takes them too */
    const char *raven = "The Raven\n\nOnce upon a midnight dreary,\n";
    reference(s, NULL, 0, raven, 40, &whole);
    cut = indent_cut(whole.text, whole.len, 1);
    CHECKF(cut > 0, "no line to judge in the greedy completion '%s'", whole.text);
    for (int stream = 0; stream < 2 && cut > 0; stream++) {
        snprintf(body, sizeof body, "{\"prompt\":\"The Raven\\n\\nOnce upon a midnight dreary,\\n\",\"max_tokens\":40,"
                 "\"temperature\":0,\"n_indent\":1,\"stream\":%s}", stream ? "true" : "false");
        int status;
        if (!stream) {
            cJSON *j = http_json(port, "POST", "/v1/completions", body, NULL, &status);
            const char *t = jstr(j, "choices.0.text"), *f = jstr(j, "choices.0.finish_reason");
            CHECKF(status == 200 && t && strlen(t) == (size_t)cut && !memcmp(t, whole.text, (size_t)cut) && f &&
                       !strcmp(f, "length"),
                   "/v1/completions n_indent: %d '%s' of '%s'", status, t ? t : "", whole.text);
            cJSON_Delete(j);
        } else {
            http_res hr;
            sse ev;
            CHECK(http(port, "POST", "/v1/completions", body, NULL, &hr) == 0 && hr.status == 200);
            parse_sse(hr.body ? hr.body : "", 0, &ev);
            CHECKF(strlen(ev.text) == (size_t)cut && !memcmp(ev.text, whole.text, (size_t)cut) &&
                       !strcmp(ev.finish, "length"),
                   "/v1/completions n_indent, streamed: '%s' of '%s'", ev.text, whole.text);
            http_res_free(&hr);
        }
    }
    check_error(port, "POST", "/infill", "{\"input_prefix\":\"a\",\"n_indent\":-1}", 400, "n_indent", "n_indent -1");
    check_error(port, "POST", "/infill", "{\"input_prefix\":\"a\",\"n_indent\":\"4\"}", 400, "n_indent",
                "n_indent a string");
    check_error(port, "POST", "/infill", "{\"input_prefix\":\"a\",\"t_max_predict_ms\":-1}", 400, "t_max_predict_ms",
                "t_max_predict_ms -1");
    check_error(port, "POST", "/v1/completions", "{\"prompt\":\"a\",\"n_indent\":2.5}", 400, "n_indent",
                "n_indent a fraction");
    tm_server_stop(srv);
    tandem_session_free(s);
    tandem_model_free(m);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const char *dir = "build/test_serve_fim", *dir5 = "build/test_serve_fim5";
    CHECK(fim_dir(dir, 3) == 0 && fim_dir(dir5, 5) == 0);
    tandem_model *m = NULL, *plain = NULL;
    tandem_status st;
    CHECKF(tandem_model_open(&m, dir, &st) == 0, "%s", st.msg);
    CHECKF(tandem_model_open(&plain, DEMO, &st) == 0, "%s", st.msg);
    if (!m || !plain) return th_done("test_serve_fim");
    const char *const *f = tm_serve_fim(m);
    CHECK(f && !strcmp(f[0], FIM[0]) && !strcmp(f[1], FIM[1]) && !strcmp(f[2], FIM[2]));
    CHECK(tm_serve_fim(plain) == NULL);

    /* the completion: the library's greedy answer to the FIM prompt */
    const char *pre = "Once upon a time, there was a little", *suf = " and they lived happily ever after.";
    char fp[512];
    snprintf(fp, sizeof fp, "%s%s%s%s%s", FIM[0], pre, FIM[1], suf, FIM[2]);
    tandem_session *s = NULL;
    tm_server *srv = start(m, &s);
    char want[TH_TEXT_CAP] = "";
    tandem_request q;
    tandem_request_default(&q);
    q.prompt = fp;
    q.max_tokens = 12;
    q.temperature = 0;
    tandem_stats stats;
    CHECKF(s && tandem_generate(s, &q, th_collect, want, &stats, &st) == 0, "%s", st.msg);
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(tandem_tokenize(m, fp, strlen(fp), 1, &ids, &n, &st) == 0 && n > 4 && stats.n_prompt == (int)n);
    for (int k = 0; k < 3; k++) { /* each FIM token one id, once in the prompt */
        int32_t *one = NULL;
        size_t n1 = 0, times = 0;
        CHECK(tandem_tokenize(m, FIM[k], strlen(FIM[k]), 0, &one, &n1, &st) == 0 && n1 == 1);
        for (size_t i = 0; one && n1 == 1 && i < n; i++) times += ids[i] == one[0];
        CHECKF(times == 1, "%s: %zu times in the prompt", FIM[k], times);
        free(one);
    }
    free(ids);
    if (srv) {
        int port = tm_server_port(srv), status;
        char body[1024];
        for (int stream = 0; stream < 2; stream++) {
            snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"suffix\":\"%s\",\"max_tokens\":12,\"temperature\":0%s}", pre,
                     suf, stream ? ",\"stream\":true" : "");
            if (!stream) {
                cJSON *j = http_json(port, "POST", "/v1/completions", body, NULL, &status);
                CHECKF(status == 200 && jstr(j, "choices.0.text") && !strcmp(jstr(j, "choices.0.text"), want) &&
                           jnum(j, "usage.prompt_tokens") == (double)n,
                       "suffix: %d '%s' / '%s', %g prompt tokens (want %zu)", status,
                       jstr(j, "choices.0.text") ? jstr(j, "choices.0.text") : "", want, jnum(j, "usage.prompt_tokens"), n);
                cJSON_Delete(j);
            } else {
                http_res hr;
                sse ev;
                CHECK(http(port, "POST", "/v1/completions", body, NULL, &hr) == 0 && hr.status == 200);
                parse_sse(hr.body ? hr.body : "", 0, &ev);
                CHECKF(!strcmp(ev.text, want) && ev.n_bad == 0, "suffix streamed: '%s' / '%s'", ev.text, want);
                http_res_free(&hr);
            }
        }
        /* refusals by field */
        check_error(port, "POST", "/v1/completions", "{\"prompt\":[1,2,3],\"suffix\":\"x\"}", 400, "suffix", "ids");
        check_error(port, "POST", "/v1/completions", "{\"prompt\":[\"a\",\"b\"],\"suffix\":\"x\"}", 400, "suffix", "batch");
        check_error(port, "POST", "/v1/completions", "{\"prompt\":\"a\",\"suffix\":3}", 400, "suffix", "not a string");
        check_error(port, "POST", "/v1/chat/completions",
                    "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"suffix\":\"x\"}", 400, "suffix", "chat");
        /* an empty suffix is no suffix: the plain completion */
        cJSON *j = http_json(port, "POST", "/v1/completions", "{\"prompt\":\"Once\",\"suffix\":\"\",\"max_tokens\":2}",
                             NULL, &status);
        CHECK(status == 200 && jstr(j, "choices.0.text"));
        cJSON_Delete(j);
        tm_server_stop(srv);
    }
    tandem_session_free(s);
    /* a model without FIM tokens: the suffix refused, saying why */
    s = NULL;
    srv = start(plain, &s);
    if (srv) {
        int status;
        cJSON *j = http_json(tm_server_port(srv), "POST", "/v1/completions", "{\"prompt\":\"a\",\"suffix\":\"b\"}", NULL,
                             &status);
        CHECKF(status == 400 && jstr(j, "error.message") && strstr(jstr(j, "error.message"), "fill-in-the-middle"),
               "no FIM tokens: %d", status);
        cJSON_Delete(j);
        j = http_json(tm_server_port(srv), "POST", "/infill", "{\"input_prefix\":\"a\"}", NULL, &status);
        CHECKF(status == 400 && jstr(j, "error.message") && strstr(jstr(j, "error.message"), "fill-in-the-middle"),
               "/infill, no FIM tokens: %d", status);
        cJSON_Delete(j);
        tm_server_stop(srv);
    }
    tandem_session_free(s);
    tandem_model_free(m);
    tandem_model_free(plain);
    test_infill(dir, 3, 512);   /* no room for the extra context at 512: cut, truncated */
    test_infill(dir, 3, 2200);  /* room: the snippet form */
    test_infill(dir5, 5, 2200); /* the repository form */
    test_infill_limits(dir);
    return th_done("test_serve_fim");
}
