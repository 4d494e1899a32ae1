/* tests/test_serve.c: the OpenAI-compatible server (serve/), in process on an
 * ephemeral port, over real sockets: the model list, greedy completions equal
 * to tandem_generate (JSON and SSE), chat through the model's own template,
 * concurrent requests, every error status with an OpenAI error body, the API
 * key, clients that disconnect (the generation is cancelled), shutdown with a
 * stream in flight; and the request parser and JSON writer directly. */
#include "harness.h"
#include "http_client.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "serve/oai.h"
#include "serve/serve.h"
#include "tandem.h"

/* ---- references from the library ----------------------------------------------------------- */

typedef struct ref {
    char text[TH_TEXT_CAP];
    tandem_stats st;
} ref;

/* a greedy request for n tokens */
static tandem_request greedy(const char *prompt, int no_special, int n)
{
    tandem_request q;
    tandem_request_default(&q);
    q.prompt = prompt;
    q.no_special = no_special;
    q.max_tokens = n;
    q.temperature = 0;
    return q;
}

static void reference(tandem_session *s, const char *prompt, int no_special, int max_tokens, ref *out)
{
    memset(out, 0, sizeof *out);
    tandem_request q = greedy(prompt, no_special, max_tokens);
    tandem_status st;
    CHECKF(tandem_generate(s, &q, th_collect, out->text, &out->st, &st) == 0, "%s", st.msg);
}

/* ---- concurrent clients ---------------------------------------------------------------------- */

typedef struct client {
    int port;
    const char *body;
    int status;
    char text[8192];
} client;

static void *client_main(void *arg)
{
    client *c = arg;
    http_res r;
    c->status = -1;
    if (http(c->port, "POST", "/v1/completions", c->body, NULL, &r) != 0) {
        snprintf(c->text, sizeof c->text, "(no response)");
        return NULL;
    }
    c->status = r.status;
    cJSON *j = cJSON_Parse(r.body);
    const char *t = jstr(j, "choices.0.text");
    /* on a failure the check shows what came back instead */
    snprintf(c->text, sizeof c->text, t ? "%s" : "(no text; body: %.300s)", t ? t : r.body ? r.body : "");
    cJSON_Delete(j);
    http_res_free(&r);
    return NULL;
}

/* A streaming client that reads until the first text event, then signals and keeps reading to the end. */
typedef struct streamer {
    int port, got_first, eof;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} streamer;

static void *streamer_main(void *arg)
{
    streamer *s = arg;
    int fd = connect_to(s->port);
    const char *body = "{\"prompt\":\"Once upon a time\",\"max_tokens\":100000,\"ignore_eos\":true,\"stream\":true}";
    if (fd >= 0 && send_request(fd, "POST", "/v1/completions", body, strlen(body), NULL) == 0) {
        char buf[4096];
        ssize_t k;
        size_t total = 0;
        while ((k = recv(fd, buf, sizeof buf, 0)) > 0) {
            total += (size_t)k;
            if (!s->got_first && total > 200) {
                pthread_mutex_lock(&s->mu);
                s->got_first = 1;
                pthread_cond_signal(&s->cv);
                pthread_mutex_unlock(&s->mu);
            }
        }
    }
    if (fd >= 0) close(fd);
    pthread_mutex_lock(&s->mu);
    s->eof = 1;
    s->got_first = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static int wait_idle(tm_server *srv, long cancelled, double timeout_s)
{
    double t0 = tm_now_s();
    for (;;) {
        tm_server_counts c;
        tm_server_get_counts(srv, &c);
        if (c.active == 0 && c.cancelled >= cancelled) return 1;
        if (tm_now_s() - t0 > timeout_s) return 0;
        usleep(5000);
    }
}

/* ---- the parser and writer alone -------------------------------------------------------------- */

static void test_oai(void)
{
    tm_oai_req r;
    tm_oai_error e;
    const char *ok = "{\"model\":\"x\",\"prompt\":[[5,6,7]],\"max_tokens\":3,\"temperature\":0.5,\"top_k\":-1,"
                     "\"stop\":[\"a\",\"\",\"bc\"],\"seed\":-1,\"n\":1,\"unknown\":{\"deep\":[1]},\"logprobs\":null}";
    CHECKF(tm_oai_parse(&r, TM_OAI_COMPLETION, ok, strlen(ok), &e) == 0, "%s", e.msg);
    CHECK_EQ_INT(r.n_prompt_ids, 3);
    CHECK(r.prompt_ids && r.prompt_ids[2] == 7 && !r.prompt);
    CHECK_EQ_INT(r.max_tokens, 3);
    CHECK_EQ_INT(r.top_k, 0);
    CHECK_EQ_INT(r.n_stop, 2);
    CHECK(r.n_stop == 2 && !strcmp(r.stop[1], "bc") && r.stop[2] == NULL);
    CHECK(r.seed == UINT64_MAX);
    tandem_request q;
    tandem_request_default(&q);
    q.top_p = 0.9f;
    tm_oai_apply(&r, &q);
    CHECK(q.prompt == NULL && q.n_prompt_ids == 3 && q.max_tokens == 3 && q.temperature == 0.5f && q.top_p == 0.9f);
    CHECK(q.stop && !strcmp(q.stop[0], "a"));
    tm_oai_req_free(&r);

    const char *chat =
        "{\"messages\":[{\"role\":\"developer\",\"content\":\"S\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},"
        "{\"role\":\"assistant\",\"content\":null}],\"max_completion_tokens\":9,\"max_tokens\":2,"
        "\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
    CHECKF(tm_oai_parse(&r, TM_OAI_CHAT, chat, strlen(chat), &e) == 0, "%s", e.msg);
    CHECK_EQ_STR(r.messages_json, "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"a\\nb\"},"
                                  "{\"role\":\"assistant\",\"content\":\"\"}]");
    CHECK(r.max_tokens == 9 && r.stream == 1 && r.include_usage == 1);
    tm_oai_req_free(&r);

    /* JSON mode and logit_bias */
    const char *jm = "{\"prompt\":\"a\",\"response_format\":{\"type\":\"json_object\"},\"logit_bias\":{\"5\":10,"
                     "\"70\":-100,\"0\":0.5}}";
    CHECKF(tm_oai_parse(&r, TM_OAI_COMPLETION, jm, strlen(jm), &e) == 0, "%s", e.msg);
    CHECK(r.json_object == 1 && r.n_bias == 3 && r.bias_ids[1] == 70 && r.bias[1] == -100 && r.bias[2] == 0.5f);
    tandem_request_default(&q);
    tm_oai_apply(&r, &q);
    CHECK(q.json_object == 1 && q.n_logit_bias == 3 && q.logit_bias_ids == r.bias_ids && q.logit_bias == r.bias);
    tm_oai_req_free(&r);
    /* json_schema (OpenAI's and llama.cpp's forms) and grammar: kept as given, compact */
    const char *jsf = "{\"prompt\":\"a\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\","
                     "\"strict\":true,\"schema\":{\"type\": \"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}}}}";
    CHECKF(tm_oai_parse(&r, TM_OAI_COMPLETION, jsf, strlen(jsf), &e) == 0, "%s", e.msg);
    CHECK_EQ_STR(r.json_schema, "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}");
    tandem_request_default(&q);
    tm_oai_apply(&r, &q);
    CHECK(q.json_schema == r.json_schema && !q.grammar && !q.json_object);
    tm_oai_req_free(&r);
    const char *ljs = "{\"prompt\":\"a\",\"json_schema\":{\"enum\":[1,2]}}";
    CHECKF(tm_oai_parse(&r, TM_OAI_COMPLETION, ljs, strlen(ljs), &e) == 0, "%s", e.msg);
    CHECK_EQ_STR(r.json_schema, "{\"enum\":[1,2]}");
    tm_oai_req_free(&r);
    const char *gr = "{\"prompt\":\"a\",\"grammar\":\"root ::= [0-9]+\"}";
    CHECKF(tm_oai_parse(&r, TM_OAI_COMPLETION, gr, strlen(gr), &e) == 0, "%s", e.msg);
    CHECK_EQ_STR(r.grammar, "root ::= [0-9]+");
    tandem_request_default(&q);
    tm_oai_apply(&r, &q);
    CHECK(q.grammar == r.grammar && !q.json_schema);
    tm_oai_req_free(&r);
    const char *txt = "{\"prompt\":\"a\",\"response_format\":{\"type\":\"text\"},\"logit_bias\":{}}";
    CHECKF(tm_oai_parse(&r, TM_OAI_COMPLETION, txt, strlen(txt), &e) == 0, "%s", e.msg);
    CHECK(r.json_object == 0 && r.n_bias == 0);
    tm_oai_req_free(&r);

    static const struct { tm_oai_kind k; const char *body, *param;
    } bad[] = {
        {TM_OAI_COMPLETION, "", ""},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\"} x", ""},
        {TM_OAI_COMPLETION, "[1]", ""},
        {TM_OAI_COMPLETION, "{}", "prompt"},
        {TM_OAI_COMPLETION, "{\"prompt\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\",\"k\",\"l\",\"m\",\"n\",\"o\","
                            "\"p\",\"q\"]}", "prompt"},
        {TM_OAI_COMPLETION, "{\"prompt\":[\"a\",5]}", "prompt[1]"},
        {TM_OAI_COMPLETION, "{\"prompt\":[\"a\",[]]}", "prompt[1]"},
        {TM_OAI_COMPLETION, "{\"prompt\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"],\"n\":8}", "prompt"},
        {TM_OAI_COMPLETION, "{\"prompt\":[1,-2]}", "prompt"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"max_tokens\":1.5}", "max_tokens"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"max_tokens\":-1}", "max_tokens"},
        {TM_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":0}", "max_tokens"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"temperature\":\"hot\"}", "temperature"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"temperature\":1e39}", "temperature"}, /* past a float */
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"repetition_penalty\":1e300}", "repetition_penalty"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"top_p\":0}", "top_p"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"presence_penalty\":3}", "presence_penalty"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"repetition_penalty\":0}", "repetition_penalty"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"stop\":[1]}", "stop[0]"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"stream\":1}", "stream"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"n\":9}", "n"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"n\":0}", "n"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"n\":3,\"best_of\":2}", "best_of"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"best_of\":9}", "best_of"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"best_of\":2,\"stream\":true}", "best_of"},
        {TM_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"best_of\":2}", "best_of"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"logprobs\":2.5}", "logprobs"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"logprobs\":-1}", "logprobs"},
        {TM_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":\"yes\"}", "logprobs"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"model\":5}", "model"},
        {TM_OAI_CHAT, "{\"messages\":[]}", "messages"},
        {TM_OAI_CHAT, "{\"messages\":[{\"role\":\"function\",\"content\":\"x\"}]}", "messages[0].role"},
        {TM_OAI_CHAT, "{\"messages\":[{\"role\":\"user\"}]}", "messages[0].content"},
        {TM_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
         "messages[0].content[0]"},
        {TM_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{}]}", "tools"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{}}}",
         "response_format"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
         "{\"schema\":{\"type\":\"string\",\"pattern\":\"a+\",\"format\":\"hostname\"}}}}", "response_format.json_schema.schema"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
         "{\"schema\":3}}}", "response_format.json_schema.schema"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"grammar\":\"root ::= undefined\"}", "grammar"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"grammar\":7}", "grammar"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"grammar\":\"root ::= \\\"a\\\"\",\"json_schema\":{}}", "grammar"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"response_format\":{\"type\":\"json_object\"},\"json_schema\":{}}",
         "json_schema"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"response_format\":\"json_object\"}", "response_format"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"logit_bias\":[1]}", "logit_bias"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"logit_bias\":{\"x\":1}}", "logit_bias"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"logit_bias\":{\"-3\":1}}", "logit_bias"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"logit_bias\":{\"3\":101}}", "logit_bias"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"logit_bias\":{\"3\":\"1\"}}", "logit_bias"},
        {TM_OAI_COMPLETION, "{\"prompt\":\"a\",\"logit_bias\":{\"\":1}}", "logit_bias"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = tm_oai_parse(&r, bad[i].k, bad[i].body, strlen(bad[i].body), &e);
        CHECKF(rc == -1 && e.http == 400 && e.msg[0] && !strcmp(e.param, bad[i].param),
               "body %s: rc %d http %d param '%s' (%s)", bad[i].body, rc, e.http, e.param, e.msg);
        CHECK(r.prompt == NULL && r.messages_json == NULL && r.n_stop == 0);
    }

    /* the writer: control characters, quotes, NUL and invalid UTF-8 give valid JSON */
    const char text[] = "a\"b\\c\n\x01\xff\xc3\xa9\0z";
    tm_oai_meta m = {TM_OAI_COMPLETION, "cmpl-1", "m\"x", 7, 0};
    tm_oai_choice ch = {text, sizeof text - 1, NULL, NULL, "stop", NULL};
    char *js = tm_oai_response_json(&m, &ch, 1, &(tm_oai_usage){3, 4, 1});
    cJSON *j = cJSON_Parse(js);
    CHECKF(j != NULL, "%s", js);
    CHECK_EQ_STR(jstr(j, "model"), "m\"x");
    CHECK(jnum(j, "usage.total_tokens") == 7);
    CHECK(jnum(j, "usage.prompt_tokens_details.cached_tokens") == 1);
    const char *t = jstr(j, "choices.0.text");
    CHECK(t && !memcmp(t, "a\"b\\c\n\x01\xef\xbf\xbd\xc3\xa9", 11)); /* cJSON stops at the escaped NUL */
    cJSON_Delete(j);
    free(js);
}

static const char *P0 = "Once upon a time, there was a little girl who";
static const char *P1 = "The old man looked at the sea and said,";
static const char *P2 = "She opened the door";

/* ---- logprobs ------------------------------------------------------------------------------ */

/* One token's log-probability as a response gave it (or as the library did), bytes decoded. */
#define LP_MAX 64
typedef struct lpe {
    char tok[64];
    size_t tok_len;
    float lp;
    int n_top;
    char top[TANDEM_MAX_LOGPROBS][64];
    size_t top_len[TANDEM_MAX_LOGPROBS];
    float top_lp[TANDEM_MAX_LOGPROBS];
    long off;                    /* completions: text_offset */
} lpe;

typedef struct lp_list {
    lpe v[LP_MAX];
    int n, bad;                  /* bad: a malformed entry */
    char text[8192];             /* the generated text alongside */
} lp_list;

static int ref_lp(void *ud, const tandem_logprob *lp)
{
    lp_list *l = ((void **)ud)[0];
    const tandem_model *m = ((void **)ud)[1];
    if (l->n >= LP_MAX) return 0;
    lpe *e = &l->v[l->n++];
    tandem_status st;
    char *b;
    size_t len;
    for (int k = -1; k < lp->n_top; k++) {
        if (tandem_token_bytes(m, k < 0 ? lp->token : lp->top_token[k], &b, &len, &st) != 0 || len >= 64) {
            l->bad++;
            continue;
        }
        memcpy(k < 0 ? e->tok : e->top[k], b, len + 1);
        if (k < 0) e->tok_len = len, e->lp = lp->logprob;
        else e->top_len[k] = len, e->top_lp[k] = lp->top_logprob[k];
        free(b);
    }
    e->n_top = lp->n_top;
    return 0;
}

static int ref_lp_text(void *ud, const char *piece, size_t len, int32_t tok)
{
    (void)tok;
    lp_list *l = ((void **)ud)[0];
    strncat(l->text, piece, len < sizeof l->text - strlen(l->text) - 1 ? len : sizeof l->text - strlen(l->text) - 1);
    return 0;
}

static void ref_logprobs(tandem_session *s, tandem_model *m, const char *prompt, int no_special, int n, int top,
                         lp_list *out)
{
    memset(out, 0, sizeof *out);
    tandem_request q = greedy(prompt, no_special, n);
    q.logprobs = top;
    q.on_logprob.fn = ref_lp;
    void *ud[2] = {out, m};
    tandem_status st;
    tandem_stats stats;
    CHECKF(tandem_generate(s, &q, ref_lp_text, ud, &stats, &st) == 0, "%s", st.msg);
    CHECK_EQ_INT(out->bad, 0);
}

/* a response's (or a chunk's) "logprobs" appended to l */
static void read_logprobs(const cJSON *lp, int chat, lp_list *l)
{
    if (chat) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(lp, "content");
        if (!cJSON_IsArray(c) || !cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(lp, "refusal"))) l->bad++;
        for (const cJSON *e = c ? c->child : NULL; e && l->n < LP_MAX; e = e->next) {
            lpe *x = &l->v[l->n++];
            for (int k = -1; k < TANDEM_MAX_LOGPROBS; k++) {
                const cJSON *t = k < 0 ? e : cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(e, "top_logprobs"), k);
                if (!t) break;
                const cJSON *tok = cJSON_GetObjectItemCaseSensitive(t, "token"),
                            *v = cJSON_GetObjectItemCaseSensitive(t, "logprob"),
                            *by = cJSON_GetObjectItemCaseSensitive(t, "bytes");
                if (!cJSON_IsString(tok) || !cJSON_IsNumber(v) || !cJSON_IsArray(by) || cJSON_GetArraySize(by) >= 64) {
                    l->bad++;
                    break;
                }
                char *dst = k < 0 ? x->tok : x->top[k];
                size_t n = 0;
                for (const cJSON *b = by->child; b; b = b->next) dst[n++] = (char)(int)b->valuedouble;
                dst[n] = 0;
                /* the token string is the bytes where they are UTF-8 */
                if (!(n == strlen(tok->valuestring) && !memcmp(dst, tok->valuestring, n))) {
                    int ascii = 1;
                    for (size_t i = 0; i < n; i++) ascii &= (unsigned char)dst[i] < 0x80;
                    if (ascii) l->bad++;
                }
                if (k < 0) x->tok_len = n, x->lp = (float)v->valuedouble;
                else x->top_len[k] = n, x->top_lp[k] = (float)v->valuedouble, x->n_top = k + 1;
            }
        }
        return;
    }
    const cJSON *toks = cJSON_GetObjectItemCaseSensitive(lp, "tokens"),
                *lps = cJSON_GetObjectItemCaseSensitive(lp, "token_logprobs"),
                *tops = cJSON_GetObjectItemCaseSensitive(lp, "top_logprobs"),
                *offs = cJSON_GetObjectItemCaseSensitive(lp, "text_offset");
    int n = cJSON_GetArraySize(toks);
    if (cJSON_GetArraySize(lps) != n || cJSON_GetArraySize(tops) != n || cJSON_GetArraySize(offs) != n) l->bad++;
    for (int i = 0; i < n && l->n < LP_MAX; i++) {
        lpe *x = &l->v[l->n++];
        const cJSON *t = cJSON_GetArrayItem(toks, i), *v = cJSON_GetArrayItem(lps, i), *o = cJSON_GetArrayItem(offs, i),
                    *top = cJSON_GetArrayItem(tops, i);
        if (!cJSON_IsString(t) || !cJSON_IsNumber(v) || !cJSON_IsNumber(o) || !cJSON_IsObject(top) ||
            strlen(t->valuestring) >= 64) {
            l->bad++;
            continue;
        }
        x->tok_len = strlen(t->valuestring);
        memcpy(x->tok, t->valuestring, x->tok_len + 1);
        x->lp = (float)v->valuedouble;
        x->off = (long)o->valuedouble;
        for (const cJSON *e = top->child; e && x->n_top < TANDEM_MAX_LOGPROBS; e = e->next, x->n_top++) {
            snprintf(x->top[x->n_top], 64, "%s", e->string);
            x->top_len[x->n_top] = strlen(x->top[x->n_top]);
            x->top_lp[x->n_top] = cJSON_IsNumber(e) ? (float)e->valuedouble : 1;
        }
    }
}

/* got (from a response) against want (the library's), exactly: the same tokens, values and
 * alternatives, in order; completions' alternatives as an object (a token string once) */
static void same_logprobs(const lp_list *got, const lp_list *want, int chat, int top, const char *what)
{
    CHECKF(got->bad == 0, "%s: %d malformed entries", what, got->bad);
    CHECKF(got->n == want->n && got->n > 0, "%s: %d tokens, want %d", what, got->n, want->n);
    long off = 0;
    for (int i = 0; i < got->n && i < want->n; i++) {
        const lpe *g = &got->v[i], *w = &want->v[i];
        CHECKF(g->tok_len == w->tok_len && !memcmp(g->tok, w->tok, w->tok_len) && g->lp == w->lp,
               "%s: token %d '%s' %.9g, want '%s' %.9g", what, i, g->tok, g->lp, w->tok, w->lp);
        CHECKF(g->lp <= 0 && (top == 0 || g->lp == w->top_lp[0]) && top == w->n_top, "%s: token %d not the greedy first", what, i);
        if (chat) {
            CHECKF(g->n_top == top, "%s: token %d has %d alternatives, want %d", what, i, g->n_top, top);
            for (int k = 0; k < g->n_top && k < w->n_top; k++)
                CHECK(g->top_len[k] == w->top_len[k] && !memcmp(g->top[k], w->top[k], w->top_len[k]) &&
                      g->top_lp[k] == w->top_lp[k]);
        } else {
            CHECKF(g->off == off, "%s: token %d at text_offset %ld, want %ld", what, i, g->off, off);
            off += (long)strlen(g->tok); /* ASCII here: characters are bytes */
            CHECK(g->n_top >= 1 && g->n_top <= top);
            for (int k = 0; k < w->n_top; k++) { /* each alternative's string is there with the first value it had */
                int found = 0;
                for (int q = 0; q < g->n_top && !found; q++)
                    found = !strcmp(g->top[q], w->top[k]) && (g->top_lp[q] == w->top_lp[k] || w->top_lp[k] < g->top_lp[q]);
                CHECKF(found, "%s: token %d: alternative '%s' missing", what, i, w->top[k]);
            }
        }
    }
}

/* the "logprobs" of every event of a stream, in order, and its text */
static void sse_logprobs(const char *body, int chat, lp_list *l)
{
    memset(l, 0, sizeof *l);
    for (const char *p = body, *e; (e = strstr(p, "\n\n")); p = e + 2) {
        if (strncmp(p, "data: {", 7) != 0) continue;
        char *ev = strndup(p + 6, (size_t)(e - p - 6));
        cJSON *j = cJSON_Parse(ev);
        const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
        const cJSON *lp = cJSON_GetObjectItemCaseSensitive(c0, "logprobs");
        if (lp && !cJSON_IsNull(lp)) read_logprobs(lp, chat, l);
        const char *t = jstr(j, chat ? "choices.0.delta.content" : "choices.0.text");
        if (t) strncat(l->text, t, sizeof l->text - strlen(l->text) - 1);
        cJSON_Delete(j);
        free(ev);
    }
}

/* POST /tokenize and /detokenize: vLLM's and llama.cpp's fields, ids as tandem_tokenize gives them */
/* ---- n choices ---- */

/* "n": 3 sampled choices; choice i is what the same request alone gives with seed + i; the usage sums the
 * completions. Streamed (chat, n = 2): each choice's chunks under its index add up to the JSON answer's
 * choice, one finish chunk per choice, the usage after them, [DONE] last. */
static void test_choices(int port)
{
    enum { N = 3 };
    char body[512], single[N][2048];
    int status = 0, singles = 0;
    for (int i = 0; i < N; i++) {
        snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":12,\"temperature\":1.2,\"seed\":%d}", P2, 40 + i);
        cJSON *j = http_json(port, "POST", "/v1/completions", body, NULL, &status);
        CHECK_EQ_INT(status, 200);
        snprintf(single[i], sizeof single[i], "%s", jstr(j, "choices.0.text") ? jstr(j, "choices.0.text") : "?");
        singles += (int)jnum(j, "usage.completion_tokens");
        cJSON_Delete(j);
    }
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":12,\"temperature\":1.2,\"seed\":40,\"n\":%d}", P2, N);
    cJSON *j = http_json(port, "POST", "/v1/completions", body, NULL, &status);
    CHECK_EQ_INT(status, 200);
    const cJSON *chs = cJSON_GetObjectItemCaseSensitive(j, "choices");
    CHECKF(cJSON_GetArraySize(chs) == N, "%d choices", cJSON_GetArraySize(chs));
    int i = 0, distinct = 0;
    for (const cJSON *c = chs ? chs->child : NULL; c; c = c->next, i++) {
        const char *t = jstr(c, "text");
        CHECKF(jnum(c, "index") == i && t && !strcmp(t, single[i < N ? i : 0]), "choice %d: '%s', alone '%s'", i,
               t ? t : "(none)", single[i < N ? i : 0]);
        CHECK(jstr(c, "finish_reason") != NULL);
        distinct += i > 0 && strcmp(single[i], single[0]);
    }
    CHECKF(distinct > 0, "the sampled choices are all the same text: '%s'", single[0]);
    CHECK_EQ_INT((int)jnum(j, "usage.completion_tokens"), singles);
    cJSON_Delete(j);

    /* streamed, chat */
    const char *msgs = "\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story.\"}],\"max_tokens\":10,"
                       "\"temperature\":1.2,\"seed\":7,\"n\":2";
    snprintf(body, sizeof body, "{%s}", msgs);
    j = http_json(port, "POST", "/v1/chat/completions", body, NULL, &status);
    CHECK_EQ_INT(status, 200);
    char want[2][2048];
    for (int k = 0; k < 2; k++) {
        char path[48];
        snprintf(path, sizeof path, "choices.%d.message.content", k);
        snprintf(want[k], sizeof want[k], "%s", jstr(j, path) ? jstr(j, path) : "?");
    }
    int want_usage = (int)jnum(j, "usage.completion_tokens");
    cJSON_Delete(j);
    snprintf(body, sizeof body, "{%s,\"stream\":true,\"stream_options\":{\"include_usage\":true}}", msgs);
    http_res hr;
    CHECK(http(port, "POST", "/v1/chat/completions", body, NULL, &hr) == 0);
    char got[2][2048] = {"", ""};
    int finishes[2] = {0, 0}, roles[2] = {0, 0}, usage = -1, done_last = 0, bad = 0, after_usage = 0;
    for (const char *p = hr.body ? hr.body : ""; *p;) {
        const char *e = strstr(p, "\n\n");
        if (!e || strncmp(p, "data: ", 6)) {
            bad++;
            break;
        }
        char *ev = strndup(p + 6, (size_t)(e - p - 6));
        done_last = !strcmp(ev, "[DONE]");
        cJSON *c = done_last ? NULL : cJSON_Parse(ev);
        if (!done_last && !c) bad++;
        const cJSON *ch0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(c, "choices"), 0);
        if (ch0) {
            int k = (int)jnum(ch0, "index");
            if (k < 0 || k > 1 || usage >= 0) bad++, after_usage += usage >= 0;
            else {
                const char *t = jstr(ch0, "delta.content");
                if (t) strncat(got[k], t, sizeof got[k] - strlen(got[k]) - 1);
                roles[k] += jstr(ch0, "delta.role") != NULL;
                finishes[k] += jstr(ch0, "finish_reason") != NULL;
            }
        } else if (c && cJSON_GetObjectItemCaseSensitive(c, "usage")) {
            usage = (int)jnum(c, "usage.completion_tokens");
        }
        cJSON_Delete(c);
        free(ev);
        p = e + 2;
    }
    http_res_free(&hr);
    for (int k = 0; k < 2; k++) {
        CHECKF(!strcmp(got[k], want[k]), "streamed choice %d: '%s', JSON '%s'", k, got[k], want[k]);
        CHECKF(roles[k] == 1 && finishes[k] == 1, "choice %d: %d role chunks, %d finish chunks", k, roles[k], finishes[k]);
    }
    CHECKF(!bad && done_last && usage == want_usage, "stream of 2 choices: %d bad events (%d after the usage), [DONE] "
           "last %d, usage %d (JSON %d)", bad, after_usage, done_last, usage, want_usage);

    /* best_of 4, n 2: the two of the four candidates (each what a request alone with seed + i gives)
       with the highest mean log-probability per token, best first; the usage counts all four */
    enum { BO = 4 };
    char cand[BO][2048];
    double mean[BO];
    int all = 0;
    for (int k = 0; k < BO; k++) {
        snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":12,\"temperature\":1.2,\"seed\":%d,\"logprobs\":0}",
                 P1, 60 + k);
        j = http_json(port, "POST", "/v1/completions", body, NULL, &status);
        CHECK_EQ_INT(status, 200);
        snprintf(cand[k], sizeof cand[k], "%s", jstr(j, "choices.0.text") ? jstr(j, "choices.0.text") : "?");
        const cJSON *tl = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0), "logprobs"),
            "token_logprobs");
        double sum = 0;
        int nt = 0;
        for (const cJSON *t = tl ? tl->child : NULL; t; t = t->next) sum += t->valuedouble, nt++;
        mean[k] = nt ? sum / nt : -INFINITY;
        all += (int)jnum(j, "usage.completion_tokens");
        cJSON_Delete(j);
    }
    int best = 0, second = -1;
    for (int k = 1; k < BO; k++)
        if (mean[k] > mean[best]) best = k;
    for (int k = 0; k < BO; k++)
        if (k != best && (second < 0 || mean[k] > mean[second])) second = k;
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":12,\"temperature\":1.2,\"seed\":60,\"n\":2,\"best_of\":%d}",
             P1, BO);
    j = http_json(port, "POST", "/v1/completions", body, NULL, &status);
    CHECK_EQ_INT(status, 200);
    const char *t0 = jstr(j, "choices.0.text"), *t1 = jstr(j, "choices.1.text");
    CHECKF(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "choices")) == 2 && t0 && t1 && !strcmp(t0, cand[best]) &&
               !strcmp(t1, cand[second]),
           "best_of: '%s', '%s'; expected '%s' (%.3f), '%s' (%.3f)", t0 ? t0 : "?", t1 ? t1 : "?", cand[best], mean[best],
           cand[second], mean[second]);
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0),
                                                        "logprobs")));
    CHECK_EQ_INT((int)jnum(j, "usage.completion_tokens"), all);
    cJSON_Delete(j);
}

static void test_tokenize(int port, tandem_model *m, const char *chat_prompt)
{
    int32_t *ids = NULL;
    size_t n = 0;
    tandem_status st;
    CHECK(tandem_tokenize(m, P0, strlen(P0), 1, &ids, &n, &st) == 0 && n > 3);
    char body[1024];
    snprintf(body, sizeof body, "{\"prompt\":\"%s\"}", P0);
    int status;
    cJSON *j = http_json(port, "POST", "/tokenize", body, NULL, &status);
    const cJSON *t = cJSON_GetObjectItem(j, "tokens");
    int same = status == 200 && cJSON_GetArraySize(t) == (int)n && jnum(j, "count") == (double)n &&
               jnum(j, "max_model_len") == 512;
    for (size_t i = 0; same && i < n; i++) same = cJSON_GetArrayItem(t, (int)i)->valuedouble == ids[i];
    CHECKF(same, "tokenize: status %d", status);
    cJSON_Delete(j);
    /* llama.cpp's: "content", no special tokens by default, pieces */
    snprintf(body, sizeof body, "{\"content\":\"%s\",\"with_pieces\":true}", P0);
    j = http_json(port, "POST", "/tokenize", body, NULL, &status);
    t = cJSON_GetObjectItem(j, "tokens");
    CHECKF(status == 200 && cJSON_GetArraySize(t) == (int)n - 1 && jnum(t, "0.id") == ids[1] && jstr(t, "0.piece") &&
               !strncmp(P0, jstr(t, "0.piece"), strlen(jstr(t, "0.piece"))),
           "tokenize content: status %d", status);
    cJSON_Delete(j);
    /* chat messages: the template's text, tokenized as the chat endpoint does */
    int32_t *cids = NULL;
    size_t cn = 0;
    CHECK(tandem_tokenize(m, chat_prompt, strlen(chat_prompt), 0, &cids, &cn, &st) == 0);
    j = http_json(port, "POST", "/v1/tokenize",
                  "{\"messages\":[{\"role\":\"system\",\"content\":\"You tell stories.\"},"
                  "{\"role\":\"user\",\"content\":\"Tell me about the sea.\"}]}", NULL, &status);
    CHECKF(status == 200 && jnum(j, "count") == (double)cn && jnum(j, "tokens.0") == cids[0], "tokenize messages: %d",
           status);
    cJSON_Delete(j);
    /* detokenize gives the text back (the ids without BOS) */
    char *b = body;
    b += sprintf(b, "{\"tokens\":[");
    for (size_t i = 1; i < n; i++) b += sprintf(b, i > 1 ? ",%d" : "%d", (int)ids[i]);
    sprintf(b, "]}");
    j = http_json(port, "POST", "/detokenize", body, NULL, &status);
    CHECKF(status == 200 && jstr(j, "prompt") && !strcmp(jstr(j, "prompt"), P0) && !strcmp(jstr(j, "content"), P0),
           "detokenize: %d %s", status, jstr(j, "prompt") ? jstr(j, "prompt") : "");
    cJSON_Delete(j);
    check_error(port, "POST", "/detokenize", "{\"tokens\":[1,99999999]}", 400, "tokens[1]", "detokenize id");
    check_error(port, "POST", "/detokenize", "{\"tokens\":[1.5]}", 400, "tokens[0]", "detokenize fraction");
    check_error(port, "POST", "/detokenize", "[1]", 400, "tokens", "detokenize array body");
    check_error(port, "POST", "/tokenize", "{\"prompt\":5}", 400, "prompt", "tokenize number");
    check_error(port, "POST", "/tokenize", "{\"prompt\":\"a\",\"add_special_tokens\":1}", 400, "add_special_tokens",
                "tokenize add_special_tokens");
    check_error(port, "POST", "/tokenize", "not json", 400, NULL, "tokenize garbage");
    check_error(port, "GET", "/tokenize", NULL, 405, NULL, "tokenize GET");
    free(ids);
    free(cids);
}

static void test_logprobs(int port, tandem_session *s, tandem_model *m, const char *chat_prompt)
{
    lp_list want, got;
    char body[2048];
    int status;
    /* completions: "logprobs": 3, JSON and streamed */
    ref_logprobs(s, m, P0, 0, 20, 3, &want);
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":20,\"temperature\":0,\"logprobs\":3}", P0);
    cJSON *j = http_json(port, "POST", "/v1/completions", body, NULL, &status);
    CHECK_EQ_INT(status, 200);
    memset(&got, 0, sizeof got);
    read_logprobs(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0),
                                                   "logprobs"), 0, &got);
    same_logprobs(&got, &want, 0, 3, "completions");
    /* the tokens spell the text (no stop string, no special token in it) */
    char joined[8192] = "";
    for (int i = 0; i < got.n; i++) strncat(joined, got.v[i].tok, sizeof joined - strlen(joined) - 1);
    CHECK(jstr(j, "choices.0.text") && !strcmp(joined, jstr(j, "choices.0.text")) && !strcmp(joined, want.text));
    cJSON_Delete(j);
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":20,\"temperature\":0,\"logprobs\":3,\"stream\":true}", P0);
    http_res hr;
    CHECK(http(port, "POST", "/v1/completions", body, NULL, &hr) == 0);
    sse_logprobs(hr.body ? hr.body : "", 0, &got);
    same_logprobs(&got, &want, 0, 3, "completions, streamed");
    CHECK_EQ_STR(got.text, want.text);
    http_res_free(&hr);

    /* chat: "logprobs": true, "top_logprobs": 2, JSON and streamed; and 0 alternatives */
    for (int top = 2; top >= 0; top -= 2) {
        ref_logprobs(s, m, chat_prompt, 1, 16, top, &want);
        const char *msgs = "[{\"role\":\"system\",\"content\":\"You tell stories.\"},"
                           "{\"role\":\"user\",\"content\":\"Tell me about the sea.\"}]";
        snprintf(body, sizeof body, "{\"messages\":%s,\"max_tokens\":16,\"temperature\":0,\"logprobs\":true,"
                 "\"top_logprobs\":%d}", msgs, top);
        j = http_json(port, "POST", "/v1/chat/completions", body, NULL, &status);
        CHECK_EQ_INT(status, 200);
        memset(&got, 0, sizeof got);
        read_logprobs(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0),
                                                       "logprobs"), 1, &got);
        same_logprobs(&got, &want, 1, top, "chat");
        CHECK_EQ_STR(jstr(j, "choices.0.message.content"), want.text);
        cJSON_Delete(j);
        snprintf(body, sizeof body, "{\"messages\":%s,\"max_tokens\":16,\"temperature\":0,\"logprobs\":true,"
                 "\"top_logprobs\":%d,\"stream\":true}", msgs, top);
        CHECK(http(port, "POST", "/v1/chat/completions", body, NULL, &hr) == 0);
        sse_logprobs(hr.body ? hr.body : "", 1, &got);
        same_logprobs(&got, &want, 1, top, "chat, streamed");
        CHECK_EQ_STR(got.text, want.text);
        http_res_free(&hr);
    }
    /* JSON mode: response_format json_object; with '"' and '}' favoured the demo model closes its
     * object (it would ramble in a string otherwise), and the request stops there */
    int32_t *qt = NULL, *cb = NULL;
    size_t nq = 0, nc = 0;
    tandem_status tst;
    CHECK(tandem_tokenize(m, "\"", 1, 0, &qt, &nq, &tst) == 0 && nq == 1);
    CHECK(tandem_tokenize(m, "}", 1, 0, &cb, &nc, &tst) == 0 && nc == 1);
    for (int stream = 0; stream < 2 && qt && cb; stream++) {
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me about the sea.\"}],"
                 "\"max_tokens\":64,\"temperature\":0,\"response_format\":{\"type\":\"json_object\"},"
                 "\"logit_bias\":{\"%d\":8,\"%d\":20}%s}", qt[0], cb[0], stream ? ",\"stream\":true" : "");
        char content[8192], finish[16];
        chat_answer(port, body, stream, content, sizeof content, finish);
        cJSON *obj = cJSON_Parse(content);
        CHECKF(obj && cJSON_IsObject(obj) && !strcmp(finish, "stop"), "JSON mode%s: '%s' (%s)",
               stream ? ", streamed" : "", content, finish);
        cJSON_Delete(obj);
    }
    free(qt);
    free(cb);
    /* a JSON schema through the server: the value validates and the request stops as it closes
     * (the enum leaves the model no string to ramble in) */
    for (int stream = 0; stream < 2; stream++) {
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me about the sea.\"}],"
                 "\"max_tokens\":64,\"temperature\":0,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
                 "{\"name\":\"t\",\"schema\":{\"type\":\"object\",\"properties\":{\"mood\":{\"enum\":[\"calm\",\"rough\"]},"
                 "\"waves\":{\"type\":\"boolean\"}},\"required\":[\"mood\",\"waves\"],\"additionalProperties\":false}}}%s}",
                 stream ? ",\"stream\":true" : "");
        char content[8192], finish[16];
        chat_answer(port, body, stream, content, sizeof content, finish);
        cJSON *obj = cJSON_Parse(content);
        const cJSON *mood = obj ? cJSON_GetObjectItemCaseSensitive(obj, "mood") : NULL;
        CHECKF(obj && cJSON_GetArraySize(obj) == 2 && cJSON_IsString(mood) &&
                   (!strcmp(mood->valuestring, "calm") || !strcmp(mood->valuestring, "rough")) &&
                   cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(obj, "waves")) && !strcmp(finish, "stop"),
               "json_schema%s: '%s' (%s)", stream ? ", streamed" : "", content, finish);
        cJSON_Delete(obj);
    }
    /* a grammar (llama.cpp's field) on the completions endpoint */
    j = http_json(port, "POST", "/v1/completions",
                  "{\"prompt\":\"The sea\",\"max_tokens\":32,\"temperature\":0,\"grammar\":\"root ::= [a-z]{1,8} \\\"!\\\"\"}",
                  NULL, &status);
    CHECK_EQ_INT(status, 200);
    const char *gtext = jstr(j, "choices.0.text"), *gfin = jstr(j, "choices.0.finish_reason");
    size_t gl = gtext ? strlen(gtext) : 0, letters = 0;
    while (letters < gl && gtext[letters] >= 'a' && gtext[letters] <= 'z') letters++;
    CHECKF(gtext && letters >= 1 && letters <= 8 && letters + 1 == gl && gtext[letters] == '!' && gfin &&
               !strcmp(gfin, "stop"), "grammar: '%s' (%s)", gtext ? gtext : "(none)", gfin ? gfin : "no finish");
    cJSON_Delete(j);
    /* a bias for a token past the vocabulary: 400 naming it */
    check_error(port, "POST", "/v1/completions", "{\"prompt\":\"a\",\"logit_bias\":{\"99999999\":1}}", 400, NULL,
                "logit_bias id past the vocabulary");

    /* not asked for: null */
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":4,\"temperature\":0}", P0);
    j = http_json(port, "POST", "/v1/completions", body, NULL, &status);
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0),
                                                      "logprobs");
    CHECK(lp && cJSON_IsNull(lp));
    cJSON_Delete(j);
    /* out of range or of the wrong type */
    check_error(port, "POST", "/v1/completions", "{\"prompt\":\"a\",\"logprobs\":21}", 400, "logprobs", "logprobs 21");
    check_error(port, "POST", "/v1/completions", "{\"prompt\":\"a\",\"logprobs\":\"3\"}", 400, "logprobs", "logprobs '3'");
    check_error(port, "POST", "/v1/chat/completions",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":1}", 400, "logprobs", "logprobs 1");
    check_error(port, "POST", "/v1/chat/completions",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}", 400, "top_logprobs",
                "top_logprobs without logprobs");
    check_error(port, "POST", "/v1/chat/completions",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,\"top_logprobs\":21}", 400,
                "top_logprobs", "top_logprobs 21");
}

/* ---- echo: the prompt scored ---- */

typedef struct plp_ref {
    int32_t tok[256];
    float lp[256], top_lp[256][TANDEM_MAX_LOGPROBS];
    int32_t top[256][TANDEM_MAX_LOGPROBS], rank[256];
    int n_top[256], n;
} plp_ref;

static int plp_take(void *ud, int index, const tandem_logprob *lp)
{
    plp_ref *r = ud;
    if (index != r->n || r->n >= 256) return 1;
    r->tok[r->n] = lp->token, r->lp[r->n] = lp->logprob, r->n_top[r->n] = lp->n_top, r->rank[r->n] = lp->rank;
    memcpy(r->top[r->n], lp->top_token, sizeof lp->top_token);
    memcpy(r->top_lp[r->n], lp->top_logprob, sizeof lp->top_logprob);
    r->n++;
    return 0;
}

static int no_text(void *ud, const char *piece, size_t len, int32_t tok)
{
    (void)ud, (void)piece, (void)len, (void)tok;
    return 0;
}

/* a token's bytes as text (the demo model's prompt tokens are ASCII) */
static void tok_text(tandem_model *m, int32_t id, char *out, size_t cap)
{
    char *b = NULL;
    size_t n = 0;
    tandem_status st;
    CHECK(tandem_token_bytes(m, id, &b, &n, &st) == 0 && n < cap);
    snprintf(out, cap, "%.*s", (int)n, b ? b : "");
    free(b);
}

/* completions "echo": the prompt's tokens' text, then the completion's; with "logprobs" the prompt's
 * tokens first (the first's value and alternatives null), each exactly what the library's
 * on_prompt_logprob gave, text_offset counting through the prompt; "max_tokens": 0 scores only;
 * JSON and streamed; an id prompt; echo on chat and max_tokens 0 on chat refused */
static void test_echo(int port, tandem_session *s, tandem_model *m)
{
    plp_ref want = {0};
    tandem_request q;
    tandem_request_default(&q);
    q.prompt = P0;
    q.max_tokens = TANDEM_MAX_TOKENS_NONE;
    q.prompt_logprobs = 2;
    q.on_prompt_logprob.fn = plp_take;
    tandem_status st;
    tandem_stats stats;
    CHECKF(tandem_generate(s, &q, no_text, &want, &stats, &st) == 0, "%s", st.msg);
    CHECK(want.n == stats.n_prompt && want.n > 3 && stats.n_generated == 0 && isnan(want.lp[0]));
    char echo[4096] = "", piece[64];
    long off[256];
    for (int i = 0; i < want.n; i++) {
        off[i] = (long)strlen(echo);
        tok_text(m, want.tok[i], piece, sizeof piece);
        strncat(echo, piece, sizeof echo - strlen(echo) - 1);
    }
    lp_list gen;
    ref_logprobs(s, m, P0, 0, 6, 2, &gen); /* the completion's own, greedy */
    char body[1024];
    for (int variant = 0; variant < 3; variant++) { /* max_tokens 0; 6 tokens; 6 tokens streamed */
        int n_gen = variant ? 6 : 0, stream = variant == 2;
        snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":%d,\"temperature\":0,\"echo\":true,\"logprobs\":2%s}",
                 P0, n_gen, stream ? ",\"stream\":true" : "");
        cJSON *lp_all = cJSON_CreateObject(), *toks = cJSON_AddArrayToObject(lp_all, "tokens"),
              *lps = cJSON_AddArrayToObject(lp_all, "token_logprobs"), *tops = cJSON_AddArrayToObject(lp_all, "top_logprobs"),
              *offs = cJSON_AddArrayToObject(lp_all, "text_offset");
        char text[8192] = "", finish[16] = "";
        http_res hr;
        CHECK(http(port, "POST", "/v1/completions", body, NULL, &hr) == 0);
        CHECK_EQ_INT(hr.status, 200);
        /* the events (or the one JSON body): text and logprobs arrays appended in order */
        const char *p = hr.body ? hr.body : "";
        for (;;) {
            const char *e = stream ? strstr(p, "\n\n") : p + strlen(p);
            if (!e || e == p) break;
            const char *js = stream ? (strncmp(p, "data: {", 7) ? NULL : p + 6) : p;
            cJSON *j = js ? cJSON_ParseWithLength(js, (size_t)(e - js)) : NULL;
            const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
            const char *t = jstr(j, "choices.0.text"), *f = jstr(j, "choices.0.finish_reason");
            if (t) strncat(text, t, sizeof text - strlen(text) - 1);
            if (f) snprintf(finish, sizeof finish, "%s", f);
            const cJSON *lp = cJSON_GetObjectItemCaseSensitive(c0, "logprobs");
            const char *names[] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
            cJSON *dst[] = {toks, lps, tops, offs};
            for (int k = 0; k < 4 && lp && !cJSON_IsNull(lp); k++)
                for (const cJSON *x = cJSON_GetObjectItemCaseSensitive(lp, names[k])->child; x; x = x->next)
                    cJSON_AddItemToArray(dst[k], cJSON_Duplicate(x, 1));
            cJSON_Delete(j);
            if (!stream) break;
            p = e + 2;
        }
        http_res_free(&hr);
        char want_text[4096 + 8192];
        snprintf(want_text, sizeof want_text, "%s%s", echo, n_gen ? gen.text : "");
        CHECKF(!strcmp(text, want_text), "echo variant %d: '%s', want '%s'", variant, text, want_text);
        CHECK_EQ_STR(finish, "length");
        int n = cJSON_GetArraySize(toks);
        CHECKF(n == want.n + n_gen && cJSON_GetArraySize(lps) == n && cJSON_GetArraySize(tops) == n &&
                   cJSON_GetArraySize(offs) == n, "echo variant %d: %d tokens, want %d", variant, n, want.n + n_gen);
        long gen_off = (long)strlen(echo);
        for (int i = 0; i < n && i < want.n + n_gen; i++) {
            const cJSON *tk = cJSON_GetArrayItem(toks, i), *v = cJSON_GetArrayItem(lps, i), *tp = cJSON_GetArrayItem(tops, i),
                        *o = cJSON_GetArrayItem(offs, i);
            long want_off = i < want.n ? off[i] : gen_off;
            if (i >= want.n) gen_off += (long)gen.v[i - want.n].tok_len; /* ASCII here: characters are bytes */
            CHECKF(cJSON_IsNumber(o) && (long)o->valuedouble == want_off, "echo variant %d token %d: offset", variant, i);
            if (i >= want.n) { /* the completion's: as without echo */
                CHECK(cJSON_IsString(tk) && !strcmp(tk->valuestring, gen.v[i - want.n].tok) && cJSON_IsNumber(v) &&
                      (float)v->valuedouble == gen.v[i - want.n].lp);
                continue;
            }
            tok_text(m, want.tok[i], piece, sizeof piece);
            CHECK(cJSON_IsString(tk) && !strcmp(tk->valuestring, piece));
            if (i == 0) {
                CHECK(cJSON_IsNull(v) && cJSON_IsNull(tp));
                continue;
            }
            CHECKF(cJSON_IsNumber(v) && (float)v->valuedouble == want.lp[i] && cJSON_IsObject(tp) &&
                       cJSON_GetArraySize(tp) >= 1 && cJSON_GetArraySize(tp) <= 2,
                   "echo variant %d prompt token %d", variant, i);
            for (int k = 0; k < want.n_top[i]; k++) { /* each alternative there, with its value */
                tok_text(m, want.top[i][k], piece, sizeof piece);
                const cJSON *a = cJSON_GetObjectItemCaseSensitive(tp, piece);
                CHECK(cJSON_IsNumber(a) && (float)a->valuedouble >= want.top_lp[i][k]);
            }
        }
        cJSON_Delete(lp_all);
    }
    /* echo without logprobs: the same text, nothing scored; an id prompt echoes its ids' text */
    int status;
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":6,\"temperature\":0,\"echo\":true}", P0);
    cJSON *j = http_json(port, "POST", "/v1/completions", body, NULL, &status);
    char want_text[4096 + 8192];
    snprintf(want_text, sizeof want_text, "%s%s", echo, gen.text);
    CHECKF(status == 200 && jstr(j, "choices.0.text") && !strcmp(jstr(j, "choices.0.text"), want_text) &&
               cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0),
                                                             "logprobs")),
           "echo alone: %d '%s'", status, jstr(j, "choices.0.text") ? jstr(j, "choices.0.text") : "(none)");
    cJSON_Delete(j);
    char ids[512] = "";
    for (int i = 0; i < want.n; i++) snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%d", i ? "," : "", want.tok[i]);
    snprintf(body, sizeof body, "{\"prompt\":[%s],\"max_tokens\":0,\"echo\":true,\"logprobs\":0}", ids);
    j = http_json(port, "POST", "/v1/completions", body, NULL, &status);
    CHECKF(status == 200 && jstr(j, "choices.0.text") && !strcmp(jstr(j, "choices.0.text"), echo) &&
               jnum(j, "usage.completion_tokens") == 0 && jnum(j, "usage.prompt_tokens") == want.n,
           "echo of ids: %d", status);
    cJSON_Delete(j);
    check_error(port, "POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"echo\":true}",
                400, "echo", "echo on chat");
    /* vLLM's prompt_logprobs: in the choice, per prompt token {id: {logprob, rank, decoded_token}}, the
       token's own first, then its step's alternatives; the first null; the library's values */
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":2,\"temperature\":0,\"prompt_logprobs\":2}", P0);
    j = http_json(port, "POST", "/v1/completions", body, NULL, &status);
    const cJSON *pl = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0),
                                                       "prompt_logprobs");
    CHECKF(status == 200 && cJSON_GetArraySize(pl) == want.n && cJSON_IsNull(cJSON_GetArrayItem(pl, 0)),
           "prompt_logprobs: %d, %d entries", status, cJSON_GetArraySize(pl));
    for (int i = 1; i < want.n && i < cJSON_GetArraySize(pl); i++) {
        const cJSON *e = cJSON_GetArrayItem(pl, i);
        char key[16];
        snprintf(key, sizeof key, "%d", want.tok[i]);
        const cJSON *me = e ? e->child : NULL; /* the token's own entry first */
        tok_text(m, want.tok[i], piece, sizeof piece);
        CHECKF(me && !strcmp(me->string, key) && (float)jnum(me, "logprob") == want.lp[i] &&
                   (int)jnum(me, "rank") == want.rank[i] && jstr(me, "decoded_token") &&
                   !strcmp(jstr(me, "decoded_token"), piece),
               "prompt_logprobs[%d]", i);
        for (int k = 0; k < want.n_top[i]; k++) {
            snprintf(key, sizeof key, "%d", want.top[i][k]);
            const cJSON *a = cJSON_GetObjectItemCaseSensitive(e, key);
            CHECKF(a && (float)jnum(a, "logprob") == want.top_lp[i][k] &&
                       (want.top[i][k] == want.tok[i] || (int)jnum(a, "rank") == k + 1),
                   "prompt_logprobs[%d] alternative %d", i, k);
        }
    }
    cJSON_Delete(j);
    check_error(port, "POST", "/v1/completions", "{\"prompt\":\"a\",\"prompt_logprobs\":1,\"stream\":true}", 400,
                "prompt_logprobs", "prompt_logprobs streamed");
    check_error(port, "POST", "/v1/completions", "{\"prompt\":\"a\",\"prompt_logprobs\":21}", 400, "prompt_logprobs",
                "prompt_logprobs 21");
    check_error(port, "POST", "/v1/completions", "{\"prompt\":\"a\",\"echo\":1}", 400, "echo", "echo 1");
    check_error(port, "POST", "/v1/chat/completions",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":0}", 400, "max_tokens",
                "max_tokens 0 on chat");
}

/* ---- a batch of prompts (completions "prompt": [...]) ---- */

/* choices prompt by prompt ("index" p * n + k), each what the prompt alone gives (greedy); the usage
 * counts each prompt once; streamed by index; best_of within each prompt; echo of each prompt; an id
 * prompt beside a text one */
static void test_batch(int port, tandem_session *s)
{
    ref a, b;
    reference(s, P1, 0, 10, &a);
    reference(s, P2, 0, 10, &b);
    char body[1024];
    int status;
    snprintf(body, sizeof body, "{\"prompt\":[\"%s\",\"%s\"],\"max_tokens\":10,\"temperature\":0,\"n\":2}", P1, P2);
    cJSON *j = http_json(port, "POST", "/v1/completions", body, NULL, &status);
    CHECK_EQ_INT(status, 200);
    const cJSON *ch = cJSON_GetObjectItemCaseSensitive(j, "choices");
    CHECK_EQ_INT(cJSON_GetArraySize(ch), 4);
    for (int i = 0; i < 4; i++) {
        const cJSON *c = cJSON_GetArrayItem(ch, i);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "text"), *ix = cJSON_GetObjectItemCaseSensitive(c, "index");
        CHECKF(cJSON_IsNumber(ix) && (int)ix->valuedouble == i && cJSON_IsString(t) &&
                   !strcmp(t->valuestring, i < 2 ? a.text : b.text),
               "batch choice %d: '%s'", i, cJSON_IsString(t) ? t->valuestring : "(none)");
    }
    CHECK(jnum(j, "usage.prompt_tokens") == a.st.n_prompt + b.st.n_prompt &&
          jnum(j, "usage.completion_tokens") == 2 * (a.st.n_generated + b.st.n_generated));
    cJSON_Delete(j);
    /* streamed: each prompt's chunks under its index */
    snprintf(body, sizeof body, "{\"prompt\":[\"%s\",\"%s\"],\"max_tokens\":10,\"temperature\":0,\"stream\":true}",
             P1, P2);
    http_res hr;
    CHECK(http(port, "POST", "/v1/completions", body, NULL, &hr) == 0 && hr.status == 200);
    char text[2][4096] = {"", ""};
    int finishes = 0;
    for (const char *p = hr.body ? hr.body : "", *e; (e = strstr(p, "\n\n")); p = e + 2) {
        if (strncmp(p, "data: {", 7)) continue;
        cJSON *ev = cJSON_ParseWithLength(p + 6, (size_t)(e - p - 6));
        const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ev, "choices"), 0);
        const cJSON *ix = cJSON_GetObjectItemCaseSensitive(c0, "index"), *t = cJSON_GetObjectItemCaseSensitive(c0, "text");
        int k = cJSON_IsNumber(ix) ? (int)ix->valuedouble : -1;
        CHECK(k == 0 || k == 1);
        if ((k == 0 || k == 1) && cJSON_IsString(t)) strncat(text[k], t->valuestring, sizeof text[k] - strlen(text[k]) - 1);
        finishes += cJSON_IsString(cJSON_GetObjectItemCaseSensitive(c0, "finish_reason"));
        cJSON_Delete(ev);
    }
    CHECK(!strcmp(text[0], a.text) && !strcmp(text[1], b.text) && finishes == 2 && strstr(hr.body, "[DONE]"));
    http_res_free(&hr);
    /* best_of within each prompt: one choice per prompt, its own */
    snprintf(body, sizeof body, "{\"prompt\":[\"%s\",\"%s\"],\"max_tokens\":10,\"temperature\":0,\"best_of\":2}", P1,
             P2);
    j = http_json(port, "POST", "/v1/completions", body, NULL, &status);
    CHECK(status == 200 && cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "choices")) == 2 &&
          jstr(j, "choices.0.text") && !strcmp(jstr(j, "choices.0.text"), a.text) && jstr(j, "choices.1.text") &&
          !strcmp(jstr(j, "choices.1.text"), b.text) && jnum(j, "usage.completion_tokens") == 2 * (a.st.n_generated + b.st.n_generated));
    cJSON_Delete(j);
    /* echo of each, one prompt as ids: the ids' text first */
    snprintf(body, sizeof body, "{\"prompt\":[\"%s\",[1,2,3]],\"max_tokens\":0,\"echo\":true}", P2);
    j = http_json(port, "POST", "/v1/completions", body, NULL, &status);
    const char *e0 = jstr(j, "choices.0.text"), *e1 = jstr(j, "choices.1.text");
    CHECKF(status == 200 && e0 && strstr(e0, P2) && e1 && strlen(e1) > 0 && !strstr(e1, P2) &&
               jnum(j, "usage.completion_tokens") == 0,
           "batch echo: %d '%s' '%s'", status, e0 ? e0 : "", e1 ? e1 : "");
    cJSON_Delete(j);
}

/* ---- main ------------------------------------------------------------------------------------ */


int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    test_oai();

    /* the demo model with a chat template of its own (chat_template.jinja beside the weights) */
    char dir[] = "/tmp/tandem-test-serve.XXXXXX", path[PATH_MAX], src[PATH_MAX];
    CHECK(mkdtemp(dir) != NULL);
    static const char *files[] = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                                  "tokenizer_config.json", "special_tokens_map.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(src, sizeof src, "models/tiny-classics-llama/%s", files[i]);
        char *abs = realpath(src, NULL);
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        CHECKF(abs && symlink(abs, path) == 0, "%s", src);
        free(abs);
    }
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    FILE *f = fopen(path, "w");
    fputs("{%- for m in messages %}{{ m['role'] | capitalize }}: {{ m['content'] }}\n{% endfor %}"
          "{%- if add_generation_prompt %}Assistant:{% endif %}", f);
    fclose(f);

    tandem_status st;
    tandem_model *m = NULL;
    CHECKF(tandem_model_open(&m, dir, &st) == 0, "%s", st.msg);
    if (!m) return th_done("test_serve");
    tandem_session_opts so;
    tandem_session_opts_default(&so);
    so.n_threads = 2;
    so.max_ctx = 512;
    so.route = TANDEM_ROUTE_HYBRID;
    tandem_session *s = NULL;
    CHECKF(tandem_session_new(&s, m, &so, &st) == 0, "%s", st.msg);
    if (!s) return th_done("test_serve");
    CHECK_EQ_INT(tandem_session_ctx(s), 512);

    ref r0, r1, r2, rc;
    reference(s, P0, 0, 24, &r0);
    reference(s, P1, 0, 20, &r1);
    reference(s, P2, 0, 20, &r2);
    CHECK(strlen(r0.text) > 20);
    const char *msgs = "[{\"role\":\"system\",\"content\":\"You tell stories.\"},"
                       "{\"role\":\"user\",\"content\":\"Tell me about the sea.\"}]";
    char *chat_prompt = NULL;
    CHECKF(tandem_chat_render(m, NULL, msgs, 1, NULL, &chat_prompt, &st) == 0, "%s", st.msg);
    CHECK_EQ_STR(chat_prompt, "System: You tell stories.\nUser: Tell me about the sea.\nAssistant:");
    reference(s, chat_prompt, 1, 16, &rc);

    tm_server_opts o;
    tm_server_opts_default(&o);
    o.port = 0;
    o.model_name = "test-model";
    o.max_body = 64 << 10;
    tm_server *srv = NULL;
    tm_err err = {0};
    CHECKF(tm_server_start(&srv, m, s, &o, &err) == TM_OK, "%s", err.msg);
    if (!srv) return th_done("test_serve");
    int port = tm_server_port(srv);
    CHECK(port > 0 && port < 65536);

    /* GET /v1/models, /health */
    int status;
    cJSON *j = http_json(port, "GET", "/v1/models", NULL, NULL, &status);
    CHECK_EQ_INT(status, 200);
    CHECK_EQ_STR(jstr(j, "object"), "list");
    CHECK_EQ_STR(jstr(j, "data.0.id"), "test-model");
    CHECK(jnum(j, "data.0.max_model_len") == 512);
    cJSON_Delete(j);
    j = http_json(port, "GET", "/health", NULL, NULL, &status);
    CHECK_EQ_INT(status, 200);
    CHECK_EQ_STR(jstr(j, "status"), "ok");
    cJSON_Delete(j);
    j = http_json(port, "GET", "/v1/models/test-model", NULL, NULL, &status);
    CHECKF(status == 200 && jstr(j, "id") && !strcmp(jstr(j, "id"), "test-model") && !strcmp(jstr(j, "object"), "model") &&
               jnum(j, "max_model_len") == 512,
           "GET /v1/models/test-model: %d", status);
    cJSON_Delete(j);
    check_error(port, "GET", "/v1/models/other", NULL, 404, NULL, "an unknown model");
    check_error(port, "POST", "/v1/models/test-model", "{}", 405, NULL, "POST a model");

    /* a greedy completion is exactly tandem_generate's text */
    char body[4096];
    snprintf(body, sizeof body, "{\"model\":\"test-model\",\"prompt\":\"%s\",\"max_tokens\":24,\"temperature\":0}", P0);
    j = http_json(port, "POST", "/v1/completions", body, NULL, &status);
    CHECK_EQ_INT(status, 200);
    CHECK_EQ_STR(jstr(j, "object"), "text_completion");
    CHECK_EQ_STR(jstr(j, "choices.0.text"), r0.text);
    CHECK_EQ_STR(jstr(j, "choices.0.finish_reason"), r0.st.finish_reason);
    CHECK(jstr(j, "id") && !strncmp(jstr(j, "id"), "cmpl-", 5));
    CHECK_EQ_INT(jnum(j, "usage.prompt_tokens"), r0.st.n_prompt);
    CHECK_EQ_INT(jnum(j, "usage.completion_tokens"), r0.st.n_generated);
    CHECK_EQ_INT(jnum(j, "usage.total_tokens"), r0.st.n_prompt + r0.st.n_generated);
    CHECK_EQ_INT(jnum(j, "usage.prompt_tokens_details.cached_tokens"), 0); /* this session keeps no prefix cache */
    cJSON_Delete(j);

    /* streamed: the same text across the chunks, then [DONE] */
    snprintf(body, sizeof body,
             "{\"prompt\":\"%s\",\"max_tokens\":24,\"temperature\":0,\"stream\":true,\"stream_options\":{\"include_"
             "usage\":true}}",
             P0);
    http_res hr;
    CHECK(http(port, "POST", "/v1/completions", body, NULL, &hr) == 0);
    CHECK_EQ_INT(hr.status, 200);
    CHECK(hr.head && strcasestr(hr.head, "Content-Type: text/event-stream"));
    sse ev;
    parse_sse(hr.body ? hr.body : "", 0, &ev);
    CHECK_EQ_STR(ev.text, r0.text);
    CHECK(ev.n_events >= 4 && ev.done_last && ev.n_bad == 0); /* text..., finish, usage, [DONE] */
    CHECK_EQ_INT(ev.finish_events, 1);
    CHECK_EQ_STR(ev.finish, r0.st.finish_reason);
    CHECK_EQ_INT(ev.usage_completion, r0.st.n_generated);
    http_res_free(&hr);

    /* chat: the model's own template, JSON and streamed */
    const char *chat_body =
        "{\"messages\":[{\"role\":\"system\",\"content\":\"You tell stories.\"},"
        "{\"role\":\"user\",\"content\":\"Tell me about the sea.\"}],\"max_tokens\":16,\"temperature\":0%s}";
    snprintf(body, sizeof body, chat_body, "");
    j = http_json(port, "POST", "/v1/chat/completions", body, NULL, &status);
    CHECK_EQ_INT(status, 200);
    CHECK_EQ_STR(jstr(j, "object"), "chat.completion");
    CHECK_EQ_STR(jstr(j, "choices.0.message.role"), "assistant");
    CHECK_EQ_STR(jstr(j, "choices.0.message.content"), rc.text);
    CHECK_EQ_INT(jnum(j, "usage.prompt_tokens"), rc.st.n_prompt);
    cJSON_Delete(j);
    snprintf(body, sizeof body, chat_body, ",\"stream\":true");
    CHECK(http(port, "POST", "/v1/chat/completions", body, NULL, &hr) == 0);
    CHECK_EQ_INT(hr.status, 200);
    parse_sse(hr.body ? hr.body : "", 1, &ev);
    CHECK_EQ_STR(ev.text, rc.text);
    CHECK(ev.role_first && ev.done_last && ev.n_bad == 0 && ev.usage_completion == -1);
    http_res_free(&hr);

    test_logprobs(port, s, m, chat_prompt);
    test_echo(port, s, m);
    test_batch(port, s);
    test_tokenize(port, m, chat_prompt);
    free(chat_prompt);
    test_choices(port);

    /* two requests at once: both complete, each with its own text */
    char b1[512], b2[512];
    snprintf(b1, sizeof b1, "{\"prompt\":\"%s\",\"max_tokens\":20,\"temperature\":0}", P1);
    snprintf(b2, sizeof b2, "{\"prompt\":\"%s\",\"max_tokens\":20,\"temperature\":0}", P2);
    client c1 = {.port = port, .body = b1}, c2 = {.port = port, .body = b2};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, client_main, &c1);
    pthread_create(&t2, NULL, client_main, &c2);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    CHECK(c1.status == 200 && c2.status == 200);
    CHECK_EQ_STR(c1.text, r1.text);
    CHECK_EQ_STR(c2.text, r2.text);

    /* errors: status and an OpenAI error body */
    check_error(port, "POST", "/v1/completions", "{\"prompt\": \"a\",", 400, NULL, "malformed JSON");
    check_error(port, "POST", "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":\"many\"}", 400, "max_tokens",
                "bad type");
    check_error(port, "POST", "/v1/chat/completions", "{\"messages\":\"hi\"}", 400, "messages", "bad messages");
    check_error(port, "POST", "/v1/completions", "{\"prompt\":\"a\",\"n\":9}", 400, "n", "n = 9");
    check_error(port, "POST", "/v1/completions", "{\"prompt\":[999999]}", 400, NULL, "token id out of the vocabulary");
    check_error(port, "POST", "/v1/nope", "{}", 404, NULL, "unknown route");
    check_error(port, "GET", "/v1/completions", NULL, 405, NULL, "GET on a POST route");
    check_error(port, "POST", "/v1/models", "{}", 405, NULL, "POST on a GET route");
    {
        size_t n = 100 << 10;
        char *big = malloc(n + 1);
        memset(big, ' ', n);
        memcpy(big, "{\"prompt\":\"", 11);
        memcpy(big + n - 3, "\"} ", 3);
        big[n] = '\0';
        check_error(port, "POST", "/v1/completions", big, 413, NULL, "oversized body");
        /* fits the body limit, not the context: 400 context_length_exceeded */
        size_t k = 0;
        k += (size_t)snprintf(big + k, n - k, "{\"prompt\":\"");
        while (k < 8000) k += (size_t)snprintf(big + k, n - k, "the sea and the ship ");
        snprintf(big + k, n - k, "\"}");
        j = http_json(port, "POST", "/v1/completions", big, NULL, &status);
        CHECK_EQ_INT(status, 400);
        CHECK_EQ_STR(jstr(j, "error.code"), "context_length_exceeded");
        cJSON_Delete(j);
        free(big);
    }
    /* malformed HTTP: the server answers or closes, and keeps serving */
    static const char *junk[] = {
        "GARBAGE\r\n\r\n", "POST /v1/completions HTTP/1.1\r\nContent-Length: zz\r\n\r\n{}", "\x01\x02\x03\xff\r\n\r\n",
        "GET /health HTTP/9.9\r\n\r\n",
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"};
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        int fd = connect_to(port);
        CHECK(fd >= 0);
        send_all(fd, junk[i], strlen(junk[i]));
        shutdown(fd, SHUT_WR);
        char buf[1024];
        while (recv(fd, buf, sizeof buf, 0) > 0) {}
        close(fd);
    }
    j = http_json(port, "GET", "/health", NULL, NULL, &status);
    CHECK_EQ_INT(status, 200);
    cJSON_Delete(j);

    /* a client that leaves mid-stream: its generation is cancelled, nothing hangs */
    tm_server_counts cnt;
    tm_server_get_counts(srv, &cnt);
    long cancelled0 = cnt.cancelled;
    {
        int fd = connect_to(port);
        const char *sb = "{\"prompt\":\"Once upon a time\",\"max_tokens\":100000,\"ignore_eos\":true,\"stream\":true}";
        CHECK(send_request(fd, "POST", "/v1/completions", sb, strlen(sb), NULL) == 0);
        char buf[512];
        size_t got = 0;
        ssize_t k;
        while (got < 300 && (k = recv(fd, buf, sizeof buf, 0)) > 0) got += (size_t)k;
        CHECK(got >= 300);
        close(fd);
    }
    CHECKF(wait_idle(srv, cancelled0 + 1, 20), "the abandoned stream was not cancelled");
    /* and one that leaves while waiting for a JSON response */
    {
        int fd = connect_to(port);
        const char *sb = "{\"prompt\":\"Once upon a time\",\"max_tokens\":100000,\"ignore_eos\":true}";
        CHECK(send_request(fd, "POST", "/v1/completions", sb, strlen(sb), NULL) == 0);
        usleep(50000);
        close(fd);
    }
    CHECKF(wait_idle(srv, cancelled0 + 2, 20), "the abandoned request was not cancelled");
    tm_server_get_counts(srv, &cnt);
    CHECK_EQ_INT(cnt.cancelled, cancelled0 + 2);
    CHECK_EQ_INT(cnt.active, 0);
    /* the session still generates the same text afterwards (its KV pages came back) */
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":24,\"temperature\":0}", P0);
    j = http_json(port, "POST", "/v1/completions", body, NULL, &status);
    CHECK_EQ_STR(jstr(j, "choices.0.text"), r0.text);
    cJSON_Delete(j);

    /* shutdown with a stream in flight: stop returns, the client sees the end */
    streamer sm = {.port = port};
    pthread_mutex_init(&sm.mu, NULL);
    pthread_cond_init(&sm.cv, NULL);
    pthread_t ts;
    pthread_create(&ts, NULL, streamer_main, &sm);
    pthread_mutex_lock(&sm.mu);
    while (!sm.got_first) pthread_cond_wait(&sm.cv, &sm.mu);
    pthread_mutex_unlock(&sm.mu);
    tm_server_stop(srv);
    pthread_join(ts, NULL);
    CHECK(sm.eof);
    pthread_mutex_destroy(&sm.mu);
    pthread_cond_destroy(&sm.cv);

    /* an API key: the /v1 routes need it, /health does not */
    o.api_key = "sekrit";
    srv = NULL;
    CHECKF(tm_server_start(&srv, m, s, &o, &err) == TM_OK, "%s", err.msg);
    if (srv) {
        port = tm_server_port(srv);
        check_error(port, "GET", "/v1/models", NULL, 401, NULL, "no API key");
        j = http_json(port, "GET", "/v1/models", NULL, "Authorization: Bearer wrong\r\n", &status);
        CHECK_EQ_INT(status, 401);
        CHECK_EQ_STR(jstr(j, "error.code"), "invalid_api_key");
        cJSON_Delete(j);
        j = http_json(port, "GET", "/v1/models", NULL, "Authorization: Bearer sekrit\r\n", &status);
        CHECK_EQ_INT(status, 200);
        cJSON_Delete(j);
        j = http_json(port, "GET", "/v1/models", NULL, "x-api-key: sekrit\r\n", &status); /* Anthropic's header */
        CHECK_EQ_INT(status, 200);
        cJSON_Delete(j);
        j = http_json(port, "GET", "/v1/models", NULL, "x-api-key: wrong\r\n", &status);
        CHECK_EQ_INT(status, 401);
        cJSON_Delete(j);
        j = http_json(port, "GET", "/health", NULL, NULL, &status);
        CHECK_EQ_INT(status, 200);
        cJSON_Delete(j);
        /* the port is taken: a clear error */
        tm_server *srv2 = NULL;
        o.port = port;
        CHECK_EQ_INT(tm_server_start(&srv2, m, s, &o, &err), TM_E_IO);
        CHECKF(strstr(err.msg, "cannot listen") != NULL, "%s", err.msg);
        /* no CORS by default: no header, and OPTIONS is a method the paths do not take */
        http_res cr;
        CHECK(http(port, "GET", "/health", NULL, NULL, &cr) == 0 && cr.status == 200 && cr.head &&
              !strcasestr(cr.head, "Access-Control-Allow-Origin"));
        http_res_free(&cr);
        CHECK(http(port, "OPTIONS", "/v1/models", NULL, NULL, &cr) == 0 && cr.status == 405);
        http_res_free(&cr);
        CHECK(http(port, "GET", "/metrics", NULL, "Authorization: Bearer sekrit\r\n", &cr) == 0 && cr.status == 404);
        http_res_free(&cr);
        tm_server_stop(srv);
    }

    /* CORS (--cors ORIGIN): every response carries the origin (errors too, so a page can read them),
     * preflights are answered without the API key, an unknown path is still 404 */
    o.port = 0;
    o.cors_origin = "https://app.example";
    o.metrics = 1;
    srv = NULL;
    CHECKF(tm_server_start(&srv, m, s, &o, &err) == TM_OK, "%s", err.msg);
    if (srv) {
        port = tm_server_port(srv);
        http_res cr;
        CHECK(http(port, "OPTIONS", "/v1/chat/completions", NULL, "Origin: https://app.example\r\n"
                   "Access-Control-Request-Method: POST\r\n", &cr) == 0);
        CHECKF(cr.status == 204 && cr.head && strcasestr(cr.head, "Access-Control-Allow-Origin: https://app.example") &&
                   strcasestr(cr.head, "Access-Control-Allow-Methods: POST, OPTIONS") &&
                   strcasestr(cr.head, "Access-Control-Allow-Headers: Authorization, Content-Type") &&
                   strcasestr(cr.head, "Vary: Origin"),
               "preflight: %d\n%s", cr.status, cr.head ? cr.head : "");
        http_res_free(&cr);
        CHECK(http(port, "OPTIONS", "/v1/models", NULL, NULL, &cr) == 0 && cr.status == 204 && cr.head &&
              strcasestr(cr.head, "Access-Control-Allow-Methods: GET, HEAD, OPTIONS"));
        http_res_free(&cr);
        /* a stored response (the Responses API) is also deleted */
        CHECK(http(port, "OPTIONS", "/v1/responses/resp_1", NULL, NULL, &cr) == 0 && cr.status == 204 && cr.head &&
              strcasestr(cr.head, "Access-Control-Allow-Methods: GET, HEAD, DELETE, OPTIONS"));
        http_res_free(&cr);
        CHECK(http(port, "OPTIONS", "/v1/nowhere", NULL, NULL, &cr) == 0 && cr.status == 404);
        http_res_free(&cr);
        CHECK(http(port, "GET", "/v1/models", NULL, NULL, &cr) == 0 && cr.status == 401 && cr.head &&
              strcasestr(cr.head, "Access-Control-Allow-Origin: https://app.example"));
        http_res_free(&cr);
        CHECK(http(port, "POST", "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":2,\"stream\":true}",
                   "Authorization: Bearer sekrit\r\n", &cr) == 0 && cr.status == 200 && cr.head &&
              strcasestr(cr.head, "Access-Control-Allow-Origin: https://app.example") && strstr(cr.body, "[DONE]"));
        http_res_free(&cr);
        /* --metrics: GET /metrics (behind the key) in Prometheus' text; a completion moves the
           counts by its usage */
        double before[3], after[3];
        const char *names[3] = {"tandem_generations_total", "tandem_prompt_tokens_total", "tandem_generated_tokens_total"};
        for (int pass = 0, polls = 0; pass < 2; pass++) {
            CHECK(http(port, "GET", "/metrics", NULL, "Authorization: Bearer sekrit\r\n", &cr) == 0 && cr.status == 200 &&
                  cr.head && strcasestr(cr.head, "Content-Type: text/plain; version=0.0.4"));
            /* the stream above is counted once its response is let go, just after its last byte: wait */
            if (!pass && cr.body && !strstr(cr.body, "\ntandem_generations_running{model=\"test-model\"} 0\n") &&
                polls++ < 200) {
                http_res_free(&cr);
                usleep(10000);
                pass--;
                continue;
            }
            for (int k = 0; k < 3; k++) {
                char key[96];
                snprintf(key, sizeof key, "\n%s{model=\"test-model\"} ", names[k]);
                const char *at = cr.body ? strstr(cr.body, key) : NULL;
                CHECKF(at != NULL, "/metrics has no %s", names[k]);
                (pass ? after : before)[k] = at ? atof(at + strlen(key)) : -1;
            }
            http_res_free(&cr);
            if (pass) break;
            j = http_json(port, "POST", "/v1/completions", "{\"prompt\":\"The sea\",\"max_tokens\":3,\"temperature\":0}",
                          "Authorization: Bearer sekrit\r\n", &status);
            CHECK_EQ_INT(status, 200);
            after[1] = jnum(j, "usage.prompt_tokens"), after[2] = jnum(j, "usage.completion_tokens");
            cJSON_Delete(j);
            before[1] += after[1], before[2] += after[2], before[0] += 1; /* what the counts should be now */
        }
        for (int k = 0; k < 3; k++) CHECKF(after[k] == before[k], "%s: %g, want %g", names[k], after[k], before[k]);
        CHECK(http(port, "GET", "/metrics", NULL, NULL, &cr) == 0 && cr.status == 401);
        http_res_free(&cr);
        tm_server_stop(srv);
    }
    o.cors_origin = NULL;
    o.metrics = 0;

    /* a session with the prefix cache (tandem serve's default): a chat's second turn reports the
     * prompt tokens it took from the first (whole pages), in usage and in the stream's usage */
    tandem_session_free(s);
    so.prefix_cache = 1;
    s = NULL;
    CHECKF(tandem_session_new(&s, m, &so, &st) == 0, "%s", st.msg);
    o.api_key = NULL;
    o.port = 0;
    srv = NULL;
    if (s) CHECKF(tm_server_start(&srv, m, s, &o, &err) == TM_OK, "%s", err.msg);
    if (srv) {
        port = tm_server_port(srv);
        const char *turn1 = "{\"messages\":[{\"role\":\"system\",\"content\":\"You tell long stories about the sea, "
                            "ships, sailors and the old harbour town.\"},{\"role\":\"user\",\"content\":\"Tell me about "
                            "the sea.\"}],\"max_tokens\":8,\"temperature\":0}";
        j = http_json(port, "POST", "/v1/chat/completions", turn1, NULL, &status);
        CHECK_EQ_INT(status, 200);
        CHECK_EQ_INT(jnum(j, "usage.prompt_tokens_details.cached_tokens"), 0);
        int n1 = (int)jnum(j, "usage.prompt_tokens");
        cJSON_Delete(j);
        const char *turn2 = "{\"messages\":[{\"role\":\"system\",\"content\":\"You tell long stories about the sea, "
                            "ships, sailors and the old harbour town.\"},{\"role\":\"user\",\"content\":\"Tell me about "
                            "a ship.\"}],\"max_tokens\":8,\"temperature\":0,\"stream\":true,\"stream_options\":"
                            "{\"include_usage\":true}}";
        CHECK(http(port, "POST", "/v1/chat/completions", turn2, NULL, &hr) == 0);
        CHECK_EQ_INT(hr.status, 200);
        const char *u = hr.body ? strstr(hr.body, "\"cached_tokens\":") : NULL;
        int cached = u ? atoi(u + 16) : -1;
        CHECKF(cached >= 16 && cached % 16 == 0 && cached < n1, "second turn: %d cached of a %d-token first prompt",
               cached, n1);
        http_res_free(&hr);
        tm_server_stop(srv);
    }
    tandem_session_free(s);
    tandem_model_free(m);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    unlink(path);
    rmdir(dir);
    return th_done("test_serve");
}
