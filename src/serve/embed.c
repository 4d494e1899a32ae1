/* serve/embed.c: POST /v1/embeddings, OpenAI's shape (vLLM's and llama.cpp's too).
 *
 *   {"input": "text" | ["text", ...] | [id, ...] | [[id, ...], ...], "model"?, "encoding_format"?:
 *    "float" | "base64", "dimensions"?: k, "user"?}  + tandem's "pooling"?: "last" | "mean" | "cls",
 *    "normalize"?: bool (default true), "add_special_tokens"?: bool (default true)
 *   -> {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [...] | "base64"}],
 *       "model", "usage": {"prompt_tokens", "total_tokens"}}
 *
 * Each input is a request of the library's (tandem_request.embedding, nothing generated) through the
 * server's session: its scheduler puts it on the prefill side, beside whatever decodes. The vector is
 * the model's pooling of the final hidden states (its sentence-transformers Pooling, else the last
 * token's), cut to "dimensions" (a Matryoshka model's prefix) and then scaled to unit length, as
 * OpenAI's are. base64: the little-endian float32 bytes, as OpenAI's clients decode them.
 * The parser and the writer are pure (fuzz/fuzz_http.c drives them). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/grow.h"
#include "serve/serve-impl.h"

#define BAD(param, ...) (tm_oai_error_set(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__), -1)

static int nomem(tm_oai_error *e)
{
    tm_oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    return -1;
}

void tm_embed_req_free(tm_embed_req *r)
{
    for (int i = 0; i < r->n; i++) {
        free(r->text ? r->text[i] : NULL);
        free(r->ids ? r->ids[i] : NULL);
    }
    free(r->text);
    free(r->ids);
    free(r->n_ids);
    free(r->model);
    memset(r, 0, sizeof *r);
}

/* one input: a string, or an array of token ids (each in [0, vocab)) */
static int take_input(tm_embed_req *r, int i, const cJSON *v, int vocab, tm_oai_error *e)
{
    char param[32];
    snprintf(param, sizeof param, "input[%d]", i);
    if (cJSON_IsString(v)) {
        if (!v->valuestring[0]) return BAD(param, "'input[%d]' is empty", i);
        return (r->text[i] = strdup(v->valuestring)) ? 0 : nomem(e);
    }
    int n = cJSON_GetArraySize(v), k = 0;
    if (!cJSON_IsArray(v) || n == 0)
        return BAD(param, "'input[%d]' must be a non-empty string or array of token ids", i);
    if (!(r->ids[i] = malloc(sizeof(int32_t) * (size_t)n))) return nomem(e);
    for (const cJSON *t = v->child; t; t = t->next, k++) {
        if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 || t->valuedouble >= vocab)
            return BAD(param, "'input[%d]' holds something that is not a token id of the vocabulary", i);
        r->ids[i][k] = (int32_t)t->valuedouble;
    }
    r->n_ids[i] = (size_t)n;
    return 0;
}

int tm_embed_parse(tm_embed_req *r, const char *body, size_t len, int vocab, int dim, tm_oai_error *e)
{
    memset(r, 0, sizeof *r);
    memset(e, 0, sizeof *e);
    cJSON *root = body && len ? cJSON_ParseWithLength(body, len) : NULL;
    int rc = 0;
    if (!cJSON_IsObject(root)) rc = BAD(NULL, "the request body must be a JSON object");
    const cJSON *in = rc ? NULL : cJSON_GetObjectItemCaseSensitive(root, "input");
    /* one input (a string, or one array of ids), or an array of them */
    int many = cJSON_IsArray(in) && in->child && (cJSON_IsString(in->child) || cJSON_IsArray(in->child));
    int n = rc ? 0 : many ? cJSON_GetArraySize(in) : 1;
    if (rc == 0 && (!in || (cJSON_IsArray(in) && !in->child) || (!cJSON_IsString(in) && !cJSON_IsArray(in))))
        rc = BAD("input", "'input' must be a string, an array of strings, or token ids (one array, or several)");
    else if (rc == 0 && n > TM_EMBED_MAX_INPUTS)
        rc = BAD("input", "'input' holds more than %d inputs", TM_EMBED_MAX_INPUTS);
    if (rc == 0) {
        r->text = calloc((size_t)n, sizeof *r->text);
        r->ids = calloc((size_t)n, sizeof *r->ids);
        r->n_ids = calloc((size_t)n, sizeof *r->n_ids);
        r->n = n;
        if (!r->text || !r->ids || !r->n_ids) rc = nomem(e);
    }
    int i = 0;
    for (const cJSON *v = many ? in->child : in; rc == 0 && v && i < n; v = many ? v->next : NULL, i++)
        rc = take_input(r, i, v, vocab, e);
    const cJSON *f;
    r->normalize = 1;
    r->add_special = 1;
    if (rc == 0 && (f = cJSON_GetObjectItemCaseSensitive(root, "encoding_format")) && !cJSON_IsNull(f)) {
        if (!cJSON_IsString(f) || (strcmp(f->valuestring, "float") && strcmp(f->valuestring, "base64")))
            rc = BAD("encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
        else r->base64 = !strcmp(f->valuestring, "base64");
    }
    if (rc == 0 && (f = cJSON_GetObjectItemCaseSensitive(root, "dimensions")) && !cJSON_IsNull(f)) {
        if (!cJSON_IsNumber(f) || f->valuedouble != floor(f->valuedouble) || f->valuedouble < 1 || f->valuedouble > dim)
            rc = BAD("dimensions", "'dimensions' must be an integer in [1, %d] (the model's hidden size)", dim);
        else r->dimensions = (int)f->valuedouble;
    }
    if (rc == 0 && (f = cJSON_GetObjectItemCaseSensitive(root, "pooling")) && !cJSON_IsNull(f)) {
        static const char *const names[] = {"last", "mean", "cls"};
        static const int pools[] = {TANDEM_POOL_LAST, TANDEM_POOL_MEAN, TANDEM_POOL_CLS};
        for (int k = 0; k < 3 && cJSON_IsString(f); k++)
            if (!strcmp(f->valuestring, names[k])) r->pooling = pools[k];
        if (!r->pooling) rc = BAD("pooling", "'pooling' must be \"last\", \"mean\" or \"cls\"");
    }
    static const struct {
        const char *key;
        size_t off;
    } flags[] = {{"normalize", offsetof(tm_embed_req, normalize)}, {"add_special_tokens", offsetof(tm_embed_req, add_special)}};
    for (size_t k = 0; rc == 0 && k < 2; k++)
        if ((f = cJSON_GetObjectItemCaseSensitive(root, flags[k].key)) && !cJSON_IsNull(f)) {
            if (!cJSON_IsBool(f)) rc = BAD(flags[k].key, "this field must be a boolean");
            else *(int *)((char *)r + flags[k].off) = cJSON_IsTrue(f);
        }
    if (rc == 0 && cJSON_IsString(f = cJSON_GetObjectItemCaseSensitive(root, "model")) && !(r->model = strdup(f->valuestring)))
        rc = nomem(e);
    cJSON_Delete(root);
    if (rc) tm_embed_req_free(r);
    return rc;
}

/* ---- the answer ---- */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* v [n] as the base64 of its little-endian float32 bytes, into out (4 * ceil(4n / 3) + 1 bytes) */
static void base64_floats(const float *v, int n, char *out)
{
    const unsigned char *b = (const unsigned char *)v; /* x86-64 and aarch64: little-endian already */
    size_t len = (size_t)n * 4, o = 0;
    for (size_t i = 0; i < len; i += 3) {
        unsigned x = (unsigned)b[i] << 16 | (i + 1 < len ? (unsigned)b[i + 1] << 8 : 0) | (i + 2 < len ? b[i + 2] : 0);
        out[o++] = B64[x >> 18 & 63];
        out[o++] = B64[x >> 12 & 63];
        out[o++] = i + 1 < len ? B64[x >> 6 & 63] : '=';
        out[o++] = i + 2 < len ? B64[x & 63] : '=';
    }
    out[o] = 0;
}

char *tm_embed_response_json(const char *model, const float *v, int n, int dim, int base64, int prompt_tokens)
{
    char *m = NULL, *buf = NULL;
    size_t mlen = 0, mcap = 0, len = 0, cap = 0;
    if (tm_oai_json_string(&m, &mlen, &mcap, model ? model : "", model ? strlen(model) : 0)) {
        free(m);
        m = NULL;
    }
    /* per float at most 16 bytes ("-1.23456789e-38,"), or 4/3 of 4 in base64 */
    size_t per = base64 ? ((size_t)dim * 4 + 2) / 3 * 4 + 80 : (size_t)dim * 16 + 80;
    int ok = m && !tm_grow((void **)&buf, &cap, per * (size_t)n + strlen(m) + 128, 1);
    if (ok) len = (size_t)sprintf(buf, "{\"object\":\"list\",\"data\":[");
    for (int i = 0; ok && i < n; i++) {
        const float *x = v + (size_t)i * dim;
        len += (size_t)sprintf(buf + len, "%s{\"object\":\"embedding\",\"index\":%d,\"embedding\":", i ? "," : "", i);
        if (base64) {
            buf[len++] = '"';
            base64_floats(x, dim, buf + len);
            len += strlen(buf + len);
            buf[len++] = '"';
        } else {
            buf[len++] = '[';
            for (int d = 0; d < dim; d++) /* 9 digits: the float back exactly; a NaN or inf (none expected) as 0 */
                len += (size_t)sprintf(buf + len, "%s%.9g", d ? "," : "", isfinite(x[d]) ? (double)x[d] : 0.0);
            buf[len++] = ']';
        }
        buf[len++] = '}';
    }
    if (ok)
        sprintf(buf + len, "],\"model\":%s,\"usage\":{\"prompt_tokens\":%d,\"total_tokens\":%d}}", m, prompt_tokens,
                prompt_tokens);
    free(m);
    if (!ok) free(buf);
    return ok ? buf : NULL;
}

/* ---- running it ---- */

/* x [D] cut to its first k and (normalize) scaled to unit length, into y [k] */
static void finish_vector(const float *x, float *y, int k, int normalize)
{
    double ss = 0;
    for (int d = 0; d < k; d++) ss += (double)x[d] * x[d];
    double s = normalize && ss > 0 ? 1.0 / sqrt(ss) : 1.0;
    for (int d = 0; d < k; d++) y[d] = (float)(x[d] * s);
}

char *tm_serve_embeddings(const tm_serve_embed *se, const char *body, size_t len, tm_oai_error *e)
{
    tandem_model_info info;
    tandem_model_get_info(se->m, &info);
    tm_embed_req r;
    if (tm_embed_parse(&r, body, len, info.vocab, info.hidden, e)) return NULL;
    int D = info.hidden, k = r.dimensions ? r.dimensions : D, tokens = 0, rc = 0;
    float *raw = malloc(sizeof(float) * (size_t)D * TM_EMBED_WAVE), *out = malloc(sizeof(float) * (size_t)k * r.n);
    if (!raw || !out) rc = nomem(e);
    /* in waves (the KV pages of a wave's prompts at once), each input a request of its own */
    for (int w0 = 0; rc == 0 && w0 < r.n; w0 += TM_EMBED_WAVE) {
        int nw = r.n - w0 < TM_EMBED_WAVE ? r.n - w0 : TM_EMBED_WAVE, sub = 0;
        tandem_handle *h[TM_EMBED_WAVE];
        tandem_status st = {0};
        for (; sub < nw; sub++) {
            tandem_request q;
            tandem_request_default(&q);
            q.prompt = r.text[w0 + sub];
            q.prompt_ids = r.ids[w0 + sub];
            q.n_prompt_ids = r.n_ids[w0 + sub];
            q.no_special = !r.add_special;
            q.max_tokens = TANDEM_MAX_TOKENS_NONE;
            q.embedding = raw + (size_t)sub * D;
            q.embed_pooling = r.pooling;
            if (tandem_submit(se->s, &q, NULL, NULL, &h[sub], &st) != 0) break;
        }
        int failed = sub < nw ? st.code : 0, at = w0 + sub; /* the input that failed */
        tandem_status fst = st;
        for (int i = 0; i < sub; i++) {
            tandem_stats stats;
            tandem_status s2;
            if (failed) tandem_cancel(h[i]);
            int wr = tandem_wait(h[i], &stats, &s2);
            if (wr && !failed) failed = wr, fst = s2, at = w0 + i;
            tokens += stats.n_prompt;
            if (!wr) finish_vector(raw + (size_t)i * D, out + (size_t)(w0 + i) * k, k, r.normalize);
        }
        if (failed) {
            char param[32];
            if (r.n > 1) snprintf(param, sizeof param, "input[%d]", at);
            else snprintf(param, sizeof param, "input");
            int client = failed == TANDEM_E_LIMIT || failed == TANDEM_E_INVALID || failed == TANDEM_E_UNSUPPORTED;
            tm_oai_error_set(e, client ? 400 : 500, client ? "invalid_request_error" : "server_error",
                             failed == TANDEM_E_LIMIT ? "context_length_exceeded" : NULL, client ? param : NULL, "%s",
                             fst.msg);
            rc = -1;
        }
    }
    char *js = rc ? NULL : tm_embed_response_json(se->model_name, out, r.n, k, r.base64, tokens);
    if (!rc && !js) nomem(e);
    free(raw);
    free(out);
    tm_embed_req_free(&r);
    return js;
}
