/* serve/tokenize.c: POST /tokenize and POST /detokenize (serve/serve.h), in both dialects users
 * send: vLLM's ("prompt" or chat "messages", "add_special_tokens" default true; the answer
 * {"tokens", "count", "max_model_len"}; detokenized text as "prompt") and llama.cpp's ("content",
 * "add_special" default false, "with_pieces"; detokenized text as "content"). The answer carries
 * both spellings where they differ. Text goes out through tm_oai_json_string, so bytes that are not
 * UTF-8 (a token holding part of a character) are U+FFFD, never invalid JSON. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/grow.h"
#include "serve/serve-impl.h"

/* s appended to *buf (*n used, *cap allocated); 1, or 0 when out of memory */
static int append(char **buf, size_t *n, size_t *cap, const char *s)
{
    size_t k = strlen(s);
    if (tm_grow((void **)buf, cap, *n + k + 1, 1)) return 0;
    memcpy(*buf + *n, s, k + 1);
    *n += k;
    return 1;
}

static char *bad(tm_oai_error *e, const char *param, const char *msg)
{
    tm_oai_error_set(e, 400, "invalid_request_error", NULL, param, "%s", msg);
    return NULL;
}

static char *nomem(tm_oai_error *e)
{
    tm_oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    return NULL;
}

/* the text to tokenize and whether special tokens are added: a chat's rendered messages, or the
 * prompt / content. *text malloc'd. Returns 0, or -1 with *e set. */
static int source(const tm_serve_tok *t, const cJSON *root, char **text, int *add_special, tm_oai_error *e)
{
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(root, "content");
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(root, "add_special_tokens");
    if (!add) add = cJSON_GetObjectItemCaseSensitive(root, "add_special");
    if (add && !cJSON_IsBool(add)) return bad(e, "add_special_tokens", "'add_special_tokens' must be a boolean"), -1;
    if (msgs) {
        char *body = cJSON_PrintUnformatted(root);
        if (!body) return nomem(e), -1;
        tm_oai_req r;
        int rc = tm_oai_parse(&r, TM_OAI_CHAT, body, strlen(body), e);
        free(body);
        if (rc) return -1;
        const cJSON *gen = cJSON_GetObjectItemCaseSensitive(root, "add_generation_prompt");
        *text = tm_serve_chat_prompt(t, &r, !cJSON_IsFalse(gen), NULL, e);
        tm_oai_req_free(&r);
        *add_special = cJSON_IsTrue(add); /* the template holds the special tokens */
        return *text ? 0 : -1;
    }
    const cJSON *s = prompt ? prompt : content;
    if (!cJSON_IsString(s)) return bad(e, prompt ? "prompt" : "content", "'prompt' (or 'content', or 'messages') must be a string"), -1;
    *add_special = add ? cJSON_IsTrue(add) : prompt != NULL;
    return (*text = strdup(s->valuestring)) ? 0 : (nomem(e), -1);
}

/* does the template get tools (kwargs_json's "tools", not null)? */
static int kwargs_has_tools(const char *kwargs_json)
{
    if (!kwargs_json || !strstr(kwargs_json, "\"tools\"")) return 0;
    cJSON *k = cJSON_Parse(kwargs_json);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(k, "tools");
    int yes = t && !cJSON_IsNull(t);
    cJSON_Delete(k);
    return yes;
}

const char *tm_serve_template_for(const tm_serve_tok *t, const char *kwargs_json)
{
    const char *tool = t->tpl ? NULL : tandem_model_tool_template(t->m);
    return tool && kwargs_has_tools(kwargs_json) ? tool : t->tpl;
}

char *tm_serve_chat_prompt(const tm_serve_tok *t, const tm_oai_req *r, int add_gen, const char *prefix, tm_oai_error *e)
{
    char *prompt = NULL;
    tandem_status st;
    const char *tpl = tm_serve_template_for(t, r->template_kwargs_json); /* tools: the model's "tool_use" one */
    if (tandem_chat_render(t->m, tpl, r->messages_json, add_gen, r->template_kwargs_json, &prompt, &st) != 0) {
        int oom = st.code == TANDEM_E_NOMEM;
        tm_oai_error_set(e, oom ? 500 : 400, oom ? "server_error" : "invalid_request_error", NULL,
                         st.code == TANDEM_E_TEMPLATE || !oom ? "messages" : NULL, "chat template: %s", st.msg);
        return NULL;
    }
    size_t n = strlen(prompt), k = prefix ? strlen(prefix) : 0;
    char *p2 = k ? realloc(prompt, n + k + 1) : prompt;
    if (!p2) {
        free(prompt);
        nomem(e);
        return NULL;
    }
    if (k) memcpy(p2 + n, prefix, k + 1);
    return p2;
}

char *tm_serve_count_tokens(const tm_serve_tok *t, const char *gen_open, const char *body, size_t len, tm_oai_error *e)
{
    char *chat = NULL, *echo = NULL, *prompt = NULL, *js = NULL;
    tm_oai_req r;
    if (tm_api_anthropic.request(body ? body : "", len, 1, NULL, &chat, &echo, e)) return NULL;
    int rc = tm_oai_parse(&r, TM_OAI_CHAT, chat, strlen(chat), e);
    free(chat);
    free(echo);
    if (rc) return NULL;
    /* a forced call (tool_choice any / tool) starts with the dialect's marker, fed as prompt */
    const char *open = gen_open && r.tool_choice >= TM_OAI_TOOLS_REQUIRED ? gen_open : NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    tandem_status st;
    if ((prompt = tm_serve_chat_prompt(t, &r, 1, open, e))) {
        if (tandem_tokenize(t->m, prompt, strlen(prompt), 0, &ids, &n, &st) != 0)
            tm_oai_error_set(e, 500, "server_error", NULL, NULL, "%s", st.msg);
        else if (!(js = malloc(48)))
            nomem(e);
        else
            snprintf(js, 48, "{\"input_tokens\":%zu}", n);
    }
    free(ids);
    free(prompt);
    tm_oai_req_free(&r);
    return js;
}

int tm_serve_special(void *m, const char *text)
{
    int32_t *ids = NULL;
    size_t n = 0;
    char *skip = NULL, *kept = NULL;
    tandem_status st;
    int one = tandem_tokenize(m, text, strlen(text), 0, &ids, &n, &st) == 0 && n == 1 &&
              tandem_detokenize(m, ids, 1, 1, &skip, &st) == 0 && tandem_detokenize(m, ids, 1, 0, &kept, &st) == 0 &&
              !skip[0] && !strcmp(kept, text);
    free(ids);
    free(skip);
    free(kept);
    return one;
}

const char *const *tm_serve_fim(const tandem_model *m)
{
    /* prefix, suffix, middle, in the order the prompt takes them (prefix-suffix-middle) */
    static const char *const known[][3] = {
        {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"},                /* Qwen2.5-Coder, Qwen3-Coder */
        {"<fim_prefix>", "<fim_suffix>", "<fim_middle>"},                      /* StarCoder, Granite code */
        {"<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>",
         "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>"},                  /* DeepSeek-Coder */
        {"\xe2\x96\x81<PRE>", "\xe2\x96\x81<SUF>", "\xe2\x96\x81<MID>"},                  /* Code Llama */
    };
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
        int found = 1;
        for (int i = 0; i < 3 && found; i++) { /* each one token of its own: a special token of the vocabulary */
            int32_t *ids = NULL;
            size_t n = 0;
            tandem_status st;
            found = tandem_tokenize(m, known[k][i], strlen(known[k][i]), 0, &ids, &n, &st) == 0 && n == 1;
            free(ids);
        }
        if (found) return known[k];
    }
    return NULL;
}

char *tm_serve_tokenize(const tm_serve_tok *t, const char *body, size_t len, tm_oai_error *e)
{
    memset(e, 0, sizeof *e);
    cJSON *root = body && len ? cJSON_ParseWithLength(body, len) : NULL;
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return bad(e, NULL, "the request body must be a JSON object");
    }
    char *text = NULL, *out = NULL;
    int add_special = 0;
    if (source(t, root, &text, &add_special, e) == 0) {
        int32_t *ids = NULL;
        size_t n = 0;
        tandem_status st;
        if (tandem_tokenize(t->m, text, strlen(text), add_special, &ids, &n, &st) != 0) {
            tm_oai_error_set(e, 500, "server_error", NULL, NULL, "%s", st.msg);
        } else {
            int pieces = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "with_pieces"));
            char *buf = NULL, num[48];
            size_t bn = 0, cap = 0;
            int ok = append(&buf, &bn, &cap, "{\"tokens\":[");
            for (size_t i = 0; i < n && ok; i++) {
                snprintf(num, sizeof num, pieces ? "%s{\"id\":%d,\"piece\":" : "%s%d", i ? "," : "", (int)ids[i]);
                ok = append(&buf, &bn, &cap, num);
                if (ok && pieces) { /* llama.cpp's {"id", "piece"}: the token's text as a JSON string */
                    char *b = NULL;
                    size_t bl = 0;
                    ok = tandem_token_bytes(t->m, ids[i], &b, &bl, &st) == 0 &&
                         tm_oai_json_string(&buf, &bn, &cap, b, bl) == 0 && append(&buf, &bn, &cap, "}");
                    free(b);
                }
            }
            snprintf(num, sizeof num, "],\"count\":%zu,\"max_model_len\":%d}", n, t->ctx);
            ok = ok && append(&buf, &bn, &cap, num);
            if (ok) out = buf;
            else free(buf), nomem(e);
            free(ids);
        }
    }
    free(text);
    cJSON_Delete(root);
    return out;
}

char *tm_serve_detokenize(const tm_serve_tok *t, const char *body, size_t len, tm_oai_error *e)
{
    memset(e, 0, sizeof *e);
    cJSON *root = body && len ? cJSON_ParseWithLength(body, len) : NULL;
    const cJSON *toks = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    char *out = NULL;
    if (!cJSON_IsObject(root) || !cJSON_IsArray(toks)) {
        bad(e, "tokens", "the request body must be a JSON object with 'tokens': an array of token ids");
        goto done;
    }
    tandem_model_info info;
    tandem_model_get_info(t->m, &info);
    int n = cJSON_GetArraySize(toks), i = 0;
    int32_t *ids = malloc(sizeof *ids * (size_t)(n ? n : 1));
    if (!ids) {
        nomem(e);
        goto done;
    }
    for (const cJSON *v = toks->child; v; v = v->next, i++) {
        /* a token id: an integer in the vocabulary (as for logit_bias; what HF skips, we refuse) */
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 ||
            v->valuedouble >= info.vocab) {
            char param[32];
            snprintf(param, sizeof param, "tokens[%d]", i);
            tm_oai_error_set(e, 400, "invalid_request_error", NULL, param, "'%s' is not a token id in [0, %d)", param,
                             info.vocab);
            free(ids);
            goto done;
        }
        ids[i] = (int32_t)v->valuedouble;
    }
    char *text = NULL;
    tandem_status st;
    if (tandem_detokenize(t->m, ids, (size_t)n, 0, &text, &st) != 0) {
        tm_oai_error_set(e, 500, "server_error", NULL, NULL, "%s", st.msg);
    } else { /* {"prompt": text, "content": text}, invalid UTF-8 as U+FFFD (tm_oai_json_string) */
        char *buf = NULL;
        size_t bn = 0, cap = 0, tl = strlen(text);
        int ok = append(&buf, &bn, &cap, "{\"prompt\":") && !tm_oai_json_string(&buf, &bn, &cap, text, tl) &&
                 append(&buf, &bn, &cap, ",\"content\":") && !tm_oai_json_string(&buf, &bn, &cap, text, tl) &&
                 append(&buf, &bn, &cap, "}");
        if (ok) out = buf;
        else free(buf), nomem(e);
    }
    free(text);
    free(ids);
done:
    cJSON_Delete(root);
    return out;
}
