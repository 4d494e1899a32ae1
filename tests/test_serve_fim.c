/* tests/test_serve_fim.c: fill in the middle (completions' "suffix").
 *
 * The demo model given Qwen2.5-Coder's FIM tokens (three of its vocabulary entries renamed
 * <|fim_prefix|>, <|fim_suffix|>, <|fim_middle|> and made special, their merges dropped): the server
 * finds them, and a completion with a suffix is the library's greedy answer to
 * <|fim_prefix|>PROMPT<|fim_suffix|>SUFFIX<|fim_middle|>, its prompt tokens counted as such. The
 * demo model as it is has none: a suffix is refused by name, as are a suffix beside token ids, a
 * batch, or a chat request. */
#include "harness.h"
#include "http_client.h"

#include <limits.h>
#include <signal.h>
#include <sys/stat.h>

#include "serve/oai.h"
#include "serve/serve-impl.h"
#include "serve/serve.h"
#include "tandem.h"

static const char *DEMO = "models/tiny-classics-llama";
static const char *FIM[3] = {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"};

/* dir := the demo model with three vocabulary entries (ids V-3 .. V-1) renamed to FIM tokens */
static int fim_dir(const char *dir)
{
    char path[PATH_MAX], src[PATH_MAX];
    mkdir(dir, 0755);
    snprintf(src, sizeof src, "%s/tokenizer.json", DEMO);
    char *text = th_slurp(src);
    cJSON *t = text ? cJSON_Parse(text) : NULL, *model = cJSON_GetObjectItem(t, "model");
    cJSON *vocab = cJSON_GetObjectItem(model, "vocab"), *merges = cJSON_GetObjectItem(model, "merges");
    cJSON *added = cJSON_GetObjectItem(t, "added_tokens");
    int ok = cJSON_IsObject(vocab) && cJSON_IsArray(merges) && cJSON_IsArray(added);
    int V = ok ? cJSON_GetArraySize(vocab) : 0;
    for (int k = 0; ok && k < 3; k++) {
        int id = V - 3 + k;
        char old[256] = "";
        for (cJSON *e = vocab->child; e; e = e->next)
            if ((int)e->valuedouble == id) snprintf(old, sizeof old, "%s", e->string);
        ok = old[0] != 0;
        cJSON_DeleteItemFromObject(vocab, old);
        ok = ok && cJSON_AddNumberToObject(vocab, FIM[k], id);
        for (cJSON *mg = merges->child, *next; ok && mg; mg = next) { /* merges that make or use it go */
            next = mg->next;
            const char *a = cJSON_GetArrayItem(mg, 0) ? cJSON_GetArrayItem(mg, 0)->valuestring : "";
            const char *b = cJSON_GetArrayItem(mg, 1) ? cJSON_GetArrayItem(mg, 1)->valuestring : "";
            char ab[512];
            snprintf(ab, sizeof ab, "%s%s", a, b);
            if (!strcmp(a, old) || !strcmp(b, old) || !strcmp(ab, old)) cJSON_Delete(cJSON_DetachItemViaPointer(merges, mg));
        }
        cJSON *at = cJSON_CreateObject();
        ok = ok && at && cJSON_AddItemToArray(added, at) && cJSON_AddNumberToObject(at, "id", id) &&
             cJSON_AddStringToObject(at, "content", FIM[k]) && cJSON_AddFalseToObject(at, "single_word") &&
             cJSON_AddFalseToObject(at, "lstrip") && cJSON_AddFalseToObject(at, "rstrip") &&
             cJSON_AddFalseToObject(at, "normalized") && cJSON_AddTrueToObject(at, "special");
    }
    char *out = ok ? cJSON_PrintUnformatted(t) : NULL;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    ok = out && th_write_file(path, out, strlen(out)) == 0;
    free(out);
    free(text);
    cJSON_Delete(t);
    static const char *files[] = {"config.json", "model.safetensors", "tokenizer_config.json", "special_tokens_map.json"};
    return ok && th_link_files(dir, DEMO, files, sizeof files / sizeof files[0]) == 0 ? 0 : -1;
}

static tm_server *start(tandem_model *m, tandem_session **s)
{
    tandem_session_opts so;
    tandem_session_opts_default(&so);
    so.n_threads = 2;
    so.max_ctx = 512;
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

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const char *dir = "build/test_serve_fim";
    CHECK(fim_dir(dir) == 0);
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
        tm_server_stop(srv);
    }
    tandem_session_free(s);
    tandem_model_free(m);
    tandem_model_free(plain);
    return th_done("test_serve_fim");
}
