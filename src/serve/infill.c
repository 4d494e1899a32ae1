/* serve/infill.c: llama.cpp's POST /infill, the code completion its editor plugins (llama.vim,
 * llama.vscode) ask for, over the completions path (serve-impl.h: tm_api_fmt).
 *
 * The request: input_prefix and input_suffix (the text around the cursor), prompt (text typed
 * after the prefix), input_extra ([{"filename", "text"}]: other files of the project), and
 * llama.cpp's sampling fields: n_predict (-1 or absent: to the context's end), temperature, top_k,
 * top_p, min_p, seed, stop, repeat_penalty, presence_penalty, frequency_penalty, ignore_eos,
 * stream, and its limits for code completion, n_indent (a line after the first newline indented
 * less ends the answer before its first other character) and t_max_predict_ms (past it, a newline
 * ends the answer): the library's tandem_request fields of those names, which end the answer with
 * stop_type "limit". Others (cache_prompt, samplers, t_max_prompt_ms, id_slot, ...) are accepted
 * and not used.
 *
 * The prompt, token ids laid out as llama.cpp's format_infill lays them (Qwen2.5-Coder's
 * repository-level form where the tokenizer has <|repo_name|> and <|file_sep|>):
 *
 *   [<|repo_name|>myproject\n] (<|file_sep|>FILENAME\n TEXT)... [<|file_sep|>filename\n]
 *   [BOS] <FIM_PRE> PREFIX PROMPT <FIM_SUF> SUFFIX <FIM_MID>
 *
 * (without <|file_sep|>, each extra text follows "\n\n--- snippet ---\n\n"; the extra context goes
 * before the BOS, as llama.cpp puts it). Cut to fit as llama.cpp cuts: the prefix to its last
 * 3 * 2048 / 4 tokens, the suffix to its first 2048 / 4 - 2 - |PROMPT|, the extra context to its
 * last n_ctx - 2048 - 2 * n_predict (2048: llama.cpp's default batch, which those shares come
 * from). The texts are tokenized as the library tokenizes any text (an added token's name in the
 * code is that token, as in transformers); they must be valid UTF-8 (else 400).
 *
 * The answer, llama.cpp's /completion object: content, stop, stop_type (eos, limit, word),
 * stopping_word, tokens_predicted, tokens_evaluated, tokens_cached, truncated, timings (prompt_n,
 * prompt_ms, ..., predicted_per_second), generation_settings, model. Streamed: "data: {content,
 * stop: false}" events as the text comes, then one with stop true and the rest; no [DONE]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <utf8proc.h>

#include "serve/serve-impl.h"

#define INFILL_BATCH 2048 /* llama.cpp's default n_batch: the prefix and suffix shares come from it */

typedef struct ids {
    int32_t *v;
    size_t n, cap;
} ids;

/* the last n ids of a (NULL when n is 0: an empty list's v may be NULL, which takes no offset) */
static const int32_t *ids_tail(const ids *a, size_t n)
{
    return n ? a->v + (a->n - n) : NULL;
}

static int ids_add(ids *a, const int32_t *v, size_t n)
{
    if (a->n + n > a->cap) {
        size_t cap = (a->n + n) * 2 + 16;
        int32_t *nv = realloc(a->v, cap * sizeof *nv);
        if (!nv) return -1;
        a->v = nv, a->cap = cap;
    }
    if (n) memcpy(a->v + a->n, v, n * sizeof *v);
    a->n += n;
    return 0;
}

/* text's tokens appended to a (add_special: the tokenizer's own, BOS) */
static int tok_add(const tandem_model *m, ids *a, const char *text, int add_special)
{
    int32_t *v = NULL;
    size_t n = 0;
    tandem_status st;
    int rc = tandem_tokenize(m, text, strlen(text), add_special, &v, &n, &st) == 0 ? ids_add(a, v, n) : -1;
    free(v);
    return rc;
}

/* the id of text where it is one token of m's, else -1 */
static int32_t one_token(const tandem_model *m, const char *text)
{
    int32_t *v = NULL, id = -1;
    size_t n = 0;
    tandem_status st;
    if (tandem_tokenize(m, text, strlen(text), 0, &v, &n, &st) == 0 && n == 1) id = v[0];
    free(v);
    return id;
}

static int bad(tm_oai_error *e, const char *param, const char *msg)
{
    tm_oai_error_set(e, 400, "invalid_request_error", NULL, param, "%s", msg);
    return -1;
}

static int utf8_ok(const char *s)
{
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s;
    utf8proc_ssize_t n = (utf8proc_ssize_t)strlen(s);
    utf8proc_int32_t cp;
    for (utf8proc_ssize_t i = 0, k; i < n; i += k)
        if ((k = utf8proc_iterate(p + i, n - i, &cp)) < 1) return 0;
    return 1;
}

/* o[k]: a string (valid UTF-8), or NULL where absent or null; *ok := 0 where it is something else */
static const cJSON *str_field(const cJSON *o, const char *k, int *ok)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if ((v && !cJSON_IsNull(v) && !cJSON_IsString(v)) || (cJSON_IsString(v) && !utf8_ok(v->valuestring)))
        *ok = 0;
    return cJSON_IsString(v) ? v : NULL;
}

/* the prompt's ids [*n] (malloc'd) for the body's texts; *cut: a text was cut to fit */
static int prompt_ids(const tm_api_env *env, const cJSON *in, int n_predict, ids *out, int *cut, tm_oai_error *e)
{
    const tandem_model *m = env->tok->m;
    int ok = 1;
    const cJSON *pre = str_field(in, "input_prefix", &ok), *suf = str_field(in, "input_suffix", &ok);
    const cJSON *pr = str_field(in, "prompt", &ok), *extra = cJSON_GetObjectItemCaseSensitive(in, "input_extra");
    if (!ok) return bad(e, NULL, "'input_prefix', 'input_suffix' and 'prompt' must be strings of UTF-8");
    if (extra && !cJSON_IsNull(extra) && !cJSON_IsArray(extra))
        return bad(e, "input_extra", "'input_extra' must be an array of {\"filename\", \"text\"}");
    int32_t fim[3], rep = one_token(m, "<|repo_name|>"), sep = one_token(m, "<|file_sep|>");
    for (int k = 0; k < 3; k++)
        if ((fim[k] = one_token(m, env->fim[k])) < 0) return bad(e, NULL, "this model's fill-in-the-middle tokens do not tokenize");
    ids x = {0}, p = {0}, s = {0}, t = {0};
    int rc = 0;
    if (rep >= 0 && sep >= 0) rc = ids_add(&x, &rep, 1) || tok_add(m, &x, "myproject\n", 0);
    int k = 0;
    for (const cJSON *c = cJSON_IsArray(extra) ? extra->child : NULL; c && rc == 0; c = c->next, k++) {
        int cok = cJSON_IsObject(c);
        const cJSON *fn = str_field(c, "filename", &cok), *tx = str_field(c, "text", &cok);
        if (!cok) {
            rc = bad(e, "input_extra", "'input_extra' items must be objects with UTF-8 strings \"filename\", \"text\"");
            break;
        }
        if (sep >= 0) {
            char *line = malloc(strlen(fn ? fn->valuestring : "tmp") + 2);
            rc = !line || ids_add(&x, &sep, 1);
            if (!rc) sprintf(line, "%s\n", fn ? fn->valuestring : "tmp"), rc = tok_add(m, &x, line, 0);
            free(line);
        } else {
            rc = tok_add(m, &x, "\n\n--- snippet ---\n\n", 0);
        }
        if (!rc && tx) rc = tok_add(m, &x, tx->valuestring, 0);
    }
    if (!rc && sep >= 0) rc = ids_add(&x, &sep, 1) || tok_add(m, &x, "filename\n", 0);
    if (!rc) rc = tok_add(m, &p, pre ? pre->valuestring : "", 0) || tok_add(m, &s, suf ? suf->valuestring : "", 0) ||
                  tok_add(m, &t, pr ? pr->valuestring : "", 0);
    /* the shares llama.cpp keeps: the prefix's end, the suffix's start, the extra context's end */
    size_t np = p.n < 3 * (INFILL_BATCH / 4) ? p.n : 3 * (INFILL_BATCH / 4);
    long sroom = INFILL_BATCH / 4 - (2 + (long)t.n), xroom = (long)env->tok->ctx - INFILL_BATCH - 2L * (n_predict > 0 ? n_predict : 0);
    size_t ns = sroom <= 0 ? 0 : s.n < (size_t)sroom ? s.n : (size_t)sroom;
    size_t nx = xroom <= 0 ? 0 : x.n < (size_t)xroom ? x.n : (size_t)xroom;
    *cut = np < p.n || ns < s.n || nx < x.n;
    if (!rc) rc = ids_add(out, ids_tail(&x, nx), nx) || tok_add(m, out, "", 1) || ids_add(out, &fim[0], 1) ||
                  ids_add(out, ids_tail(&p, np), np) || ids_add(out, t.v, t.n) || ids_add(out, &fim[1], 1) ||
                  ids_add(out, s.v, ns) || ids_add(out, &fim[2], 1);
    free(x.v), free(p.v), free(s.v), free(t.v);
    if (rc > 0 || (rc && !e->http)) tm_oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory"), rc = -1;
    return rc;
}

static int infill_request(const char *body, size_t len, int counting, const tm_api_env *env, char **json, char **echo,
                          tm_oai_error *e)
{
    (void)counting;
    *json = *echo = NULL;
    memset(e, 0, sizeof *e);
    if (!env || !env->tok || !env->fim)
        return bad(e, NULL, "/infill: this model's tokenizer has no fill-in-the-middle tokens (<|fim_prefix|>, "
                            "<fim_prefix>, ...)");
    cJSON *in = cJSON_ParseWithLength(body, len), *out = cJSON_CreateObject(), *gs = NULL, *ec = NULL;
    ids pi = {0};
    int rc = 0, cut = 0, n_predict = -1;
    const cJSON *np = cJSON_GetObjectItemCaseSensitive(in, "n_predict");
    if (!cJSON_IsObject(in)) rc = bad(e, NULL, "the request body must be a JSON object");
    else if (!out) rc = -2;
    else if (np && !cJSON_IsNull(np) &&
             (!cJSON_IsNumber(np) || np->valuedouble > TM_OAI_MAX_TOKENS || np->valuedouble < -2 ||
              np->valuedouble != (double)(long long)np->valuedouble)) /* (the range first: the cast needs it) */
        rc = bad(e, "n_predict", "'n_predict' must be an integer up to the server's bound (-1: to the end of the context)");
    else if (np && cJSON_IsNumber(np)) n_predict = np->valueint;
    if (rc == 0) rc = prompt_ids(env, in, n_predict, &pi, &cut, e);
    cJSON *arr = rc == 0 ? cJSON_AddArrayToObject(out, "prompt") : NULL;
    for (size_t i = 0; arr && i < pi.n; i++)
        if (!cJSON_AddItemToArray(arr, cJSON_CreateNumber(pi.v[i]))) arr = NULL;
    if (rc == 0 && !arr) rc = -2;
    int maxt = n_predict > 0 ? n_predict : env->tok->ctx;
    if (rc == 0 && !cJSON_AddNumberToObject(out, "max_tokens", maxt)) rc = -2;
    /* llama.cpp's sampling fields under the completions' names (checked there as any completion's) */
    static const char *const keys[][2] = {{"temperature", "temperature"}, {"top_k", "top_k"}, {"top_p", "top_p"},
                                          {"min_p", "min_p"}, {"seed", "seed"}, {"stop", "stop"},
                                          {"repeat_penalty", "repetition_penalty"}, {"presence_penalty", "presence_penalty"},
                                          {"frequency_penalty", "frequency_penalty"}, {"ignore_eos", "ignore_eos"},
                                          {"stream", "stream"}, {"n_indent", "n_indent"},
                                          {"t_max_predict_ms", "t_max_predict_ms"}};
    for (size_t i = 0; rc == 0 && i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(in, keys[i][0]);
        if (v && !cJSON_IsNull(v) && !cJSON_AddItemToObject(out, keys[i][1], cJSON_Duplicate(v, 1))) rc = -2;
    }
    /* what the answer repeats: the settings, whether a text was cut */
    if (rc == 0 && (!(ec = cJSON_CreateObject()) || !(gs = cJSON_AddObjectToObject(ec, "generation_settings")) ||
                    !cJSON_AddNumberToObject(gs, "n_ctx", env->tok->ctx) || !cJSON_AddNumberToObject(gs, "n_predict", n_predict) ||
                    !cJSON_AddBoolToObject(ec, "truncated", cut)))
        rc = -2;
    const cJSON *temp = cJSON_GetObjectItemCaseSensitive(in, "temperature");
    if (rc == 0 && cJSON_IsNumber(temp) && !cJSON_AddNumberToObject(gs, "temperature", temp->valuedouble)) rc = -2;
    if (rc == 0 && (!(*json = cJSON_PrintUnformatted(out)) || !(*echo = cJSON_PrintUnformatted(ec)))) rc = -2;
    if (rc == -2) tm_oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory"), rc = -1;
    if (rc) {
        free(*json), free(*echo);
        *json = *echo = NULL;
    }
    free(pi.v);
    cJSON_Delete(in);
    cJSON_Delete(out);
    cJSON_Delete(ec);
    return rc;
}

/* the answer's object (done: the whole, with its figures; else a stream's piece) */
static cJSON *answer(const tm_api_meta *m, const char *text, size_t len, int done, const tm_api_reply *r,
                     const tm_oai_usage *u)
{
    cJSON *o = cJSON_CreateObject();
    int ok = o && cJSON_AddNumberToObject(o, "index", 0) && tm_api_add_strn(o, "content", text, len) &&
             cJSON_AddArrayToObject(o, "tokens") && cJSON_AddBoolToObject(o, "stop", done) &&
             cJSON_AddNumberToObject(o, "id_slot", done ? 0 : -1);
    if (!ok || !done) return ok ? o : (cJSON_Delete(o), NULL);
    cJSON *ec = m->echo ? cJSON_Parse(m->echo) : NULL, *gs = cJSON_DetachItemFromObject(ec, "generation_settings");
    const tandem_stats *st = r->stats;
    int cut = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ec, "truncated"));
    cJSON_Delete(ec);
    const char *stop_type = !strcmp(r->finish ? r->finish : "", "length") ? "limit" : r->stop_seq ? "word" : "eos";
    ok = cJSON_AddStringToObject(o, "model", m->model) && cJSON_AddNumberToObject(o, "tokens_predicted", u->completion) &&
         cJSON_AddNumberToObject(o, "tokens_evaluated", u->prompt) && tm_api_attach(o, "generation_settings", gs ? gs : cJSON_CreateObject()) &&
         cJSON_AddStringToObject(o, "prompt", "") && cJSON_AddBoolToObject(o, "has_new_line", memchr(r->text, '\n', r->len) != NULL) &&
         cJSON_AddBoolToObject(o, "truncated", cut) && cJSON_AddStringToObject(o, "stop_type", stop_type) &&
         cJSON_AddStringToObject(o, "stopping_word", r->stop_seq ? r->stop_seq : "") &&
         cJSON_AddNumberToObject(o, "tokens_cached", u->cached);
    cJSON *tm = ok ? cJSON_AddObjectToObject(o, "timings") : NULL;
    if (tm) {
        double pn = st ? st->n_prompt - st->n_cached : u->prompt, pms = st ? 1e3 * st->t_prefill : 0;
        double gn = st ? st->n_generated : u->completion, gms = st ? 1e3 * st->t_decode : 0;
        ok = cJSON_AddNumberToObject(tm, "prompt_n", pn) && cJSON_AddNumberToObject(tm, "prompt_ms", pms) &&
             cJSON_AddNumberToObject(tm, "prompt_per_token_ms", pn > 0 ? pms / pn : 0) &&
             cJSON_AddNumberToObject(tm, "prompt_per_second", pms > 0 ? 1e3 * pn / pms : 0) &&
             cJSON_AddNumberToObject(tm, "predicted_n", gn) && cJSON_AddNumberToObject(tm, "predicted_ms", gms) &&
             cJSON_AddNumberToObject(tm, "predicted_per_token_ms", gn > 0 ? gms / gn : 0) &&
             cJSON_AddNumberToObject(tm, "predicted_per_second", gms > 0 ? 1e3 * gn / gms : 0);
    }
    if (ok && tm) return o;
    cJSON_Delete(o);
    return NULL;
}

static char *infill_json(const tm_api_meta *m, const tm_api_reply *r, const tm_oai_usage *u)
{
    return tm_api_print_del(answer(m, r->text, r->len, 1, r, u));
}

/* "data: JSON\n\n" of o (taken), or NULL */
static char *event(cJSON *o)
{
    char *js = tm_api_print_del(o), *ev = js ? malloc(strlen(js) + 9) : NULL;
    if (ev) sprintf(ev, "data: %s\n\n", js);
    free(js);
    return ev;
}

static char *infill_stream_start(tm_api_stream *s, const tm_api_meta *m, const tm_oai_usage *u)
{
    (void)m, (void)u;
    memset(s, 0, sizeof *s);
    return calloc(1, 1); /* llama.cpp's stream opens with the first piece */
}

static char *infill_stream_part(tm_api_stream *s, const tm_api_meta *m, const char *reasoning, size_t rlen,
                                const char *text, size_t len, const tm_oai_call_delta *cd, int ncd)
{
    (void)s, (void)reasoning, (void)rlen, (void)cd, (void)ncd; /* (a completion: no reasoning, no calls) */
    return len ? event(answer(m, text, len, 0, NULL, NULL)) : calloc(1, 1);
}

static char *infill_stream_end(tm_api_stream *s, const tm_api_meta *m, const tm_api_reply *r, const tm_oai_usage *u)
{
    (void)s;
    return event(answer(m, "", 0, 1, r, u));
}

static char *infill_stream_error(tm_api_stream *s, const char *msg)
{
    (void)s;
    cJSON *o = cJSON_CreateObject(), *er = cJSON_CreateObject();
    int ok = o && er && cJSON_AddNumberToObject(er, "code", 500) && cJSON_AddStringToObject(er, "message", msg) &&
             cJSON_AddStringToObject(er, "type", "server_error");
    if (!ok) {
        cJSON_Delete(er);
        cJSON_Delete(o);
        return NULL;
    }
    return tm_api_attach(o, "error", er) ? event(o) : (cJSON_Delete(o), NULL);
}

static void infill_stream_free(tm_api_stream *s) { (void)s; }

const tm_api_fmt tm_api_infill = {"cmpl-", TM_OAI_COMPLETION, infill_request, infill_json, infill_stream_start,
                                  infill_stream_part, infill_stream_end, infill_stream_error, infill_stream_free, NULL};
