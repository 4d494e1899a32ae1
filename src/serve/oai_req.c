/* serve/oai_req.c: OpenAI request bodies -> tm_oai_req (a pure function; the
 * rules are in serve/oai.h and docs/serve.md). */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "serve/oai.h"
#include "text/grammar.h"
#include "text/json_schema.h"
#include "text/toolcall.h"

void tm_oai_error_set(tm_oai_error *e, int http, const char *type, const char *code, const char *param,
                      const char *fmt, ...)
{
    e->http = http;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
}

/* A 400 naming the field at fault; returns -1. */
static int bad(tm_oai_error *e, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(tm_oai_error *e, const char *param, const char *fmt, ...)
{
    tm_oai_error_set(e, 400, "invalid_request_error", NULL, param, "%s", "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -1;
}

static int nomem(tm_oai_error *e)
{
    tm_oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    return -1;
}

#define BAD(param, ...) bad(e, param, __VA_ARGS__)
#define NOMEM() nomem(e)

static const char *type_name(const cJSON *v)
{
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "null";
}

/* The value of a field, NULL if absent or JSON null ("not given"). */
static const cJSON *field(const cJSON *obj, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* A number field in [lo, hi] (lo_open / hi_open: the bound itself excluded).
 * Returns 1 if given (*out set), 0 if not given, -1 on error. */
static int get_number(const cJSON *obj, const char *name, double lo, int lo_open, double hi, int hi_open, double *out,
                      tm_oai_error *e)
{
    const cJSON *v = field(obj, name);
    if (!v) return 0;
    if (!cJSON_IsNumber(v)) return BAD(name, "'%s' must be a number, not %s", name, type_name(v));
    double x = v->valuedouble;
    if (!isfinite(x) || (lo_open ? x <= lo : x < lo) || (hi_open ? x >= hi : x > hi))
        return BAD(name, "'%s' = %g is out of range %c%g, %g%c", name, x, lo_open ? '(' : '[', lo, hi,
                   hi_open ? ')' : ']');
    *out = x;
    return 1;
}

/* An integer field in [lo, hi]. */
static int get_int(const cJSON *obj, const char *name, double lo, double hi, double *out, tm_oai_error *e)
{
    const cJSON *v = field(obj, name);
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || floor(v->valuedouble) != v->valuedouble)
        return BAD(name, "'%s' must be an integer, not %s", name, cJSON_IsNumber(v) ? "a fraction" : type_name(v));
    if (v->valuedouble < lo || v->valuedouble > hi)
        return BAD(name, "'%s' = %.0f is out of range [%.0f, %.0f]", name, v->valuedouble, lo, hi);
    *out = v->valuedouble;
    return 1;
}

static int get_bool(const cJSON *obj, const char *name, int *out, tm_oai_error *e)
{
    const cJSON *v = field(obj, name);
    if (!v) return 0;
    if (!cJSON_IsBool(v)) return BAD(name, "'%s' must be a boolean, not %s", name, type_name(v));
    *out = cJSON_IsTrue(v);
    return 1;
}

/* Fields tandem does not implement: accepted only at their "off" value. */
static int check_unsupported(const cJSON *root, tm_oai_kind kind, tm_oai_error *e)
{
    const cJSON *v;
    if (kind == TM_OAI_CHAT && (v = field(root, "echo")) && !cJSON_IsFalse(v))
        return BAD("echo", "'echo' is a completions field");
    if ((v = field(root, "functions")) && !(cJSON_IsArray(v) && !v->child))
        return BAD("functions", "functions are not supported");
    (void)kind;
    return 0;
}

static int parse_sampling(tm_oai_req *r, const cJSON *root, tm_oai_kind kind, tm_oai_error *e)
{
    double x;
    int rc, lo = kind == TM_OAI_CHAT ? 1 : 0; /* completions: 0 generates nothing (with echo: the prompt scored) */
    /* max_completion_tokens (the current name) wins over max_tokens */
    if ((rc = get_int(root, "max_completion_tokens", lo, TM_OAI_MAX_TOKENS, &x, e)) < 0) return -1;
    if (!rc && (rc = get_int(root, "max_tokens", lo, TM_OAI_MAX_TOKENS, &x, e)) < 0) return -1;
    if (rc) { r->max_tokens = (int)x; r->set |= TM_OAI_SET_MAX_TOKENS; }
    if ((rc = get_int(root, "n", 1, TM_OAI_MAX_N, &x, e)) < 0) return -1;
    r->n = rc ? (int)x : 1;
    if ((rc = get_int(root, "best_of", 1, TM_OAI_MAX_N, &x, e)) < 0) return -1;
    r->best_of = rc ? (int)x : r->n;
    if (r->best_of < r->n) return BAD("best_of", "'best_of' = %d is less than 'n' = %d", r->best_of, r->n);
#define NUM(name, lo, lo_open, hi, hi_open, dst, bit) \
    if ((rc = get_number(root, name, lo, lo_open, hi, hi_open, &x, e)) < 0) return -1; \
    if (rc) { r->dst = (float)x; r->set |= bit; }
    /* the request keeps floats: a larger finite number would become inf */
    NUM("temperature", 0, 0, FLT_MAX, 0, temperature, TM_OAI_SET_TEMPERATURE)
    NUM("top_p", 0, 1, 1, 0, top_p, TM_OAI_SET_TOP_P)
    NUM("min_p", 0, 0, 1, 0, min_p, TM_OAI_SET_MIN_P)
    NUM("presence_penalty", -2, 0, 2, 0, presence_penalty, TM_OAI_SET_PRESENCE)
    NUM("frequency_penalty", -2, 0, 2, 0, frequency_penalty, TM_OAI_SET_FREQUENCY)
    NUM("repetition_penalty", 0, 1, FLT_MAX, 0, repetition_penalty, TM_OAI_SET_REPETITION)
#undef NUM
    if ((rc = get_int(root, "top_k", -1, 1 << 24, &x, e)) < 0) return -1;
    if (rc) { r->top_k = x > 0 ? (int)x : 0; r->set |= TM_OAI_SET_TOP_K; }
    if ((rc = get_int(root, "seed", -9223372036854775808.0, 18446744073709551615.0, &x, e)) < 0) return -1;
    if (rc) {
        r->seed = x < 0 ? (uint64_t)(int64_t)x : x >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)x;
        r->set |= TM_OAI_SET_SEED;
    }
    if ((rc = get_bool(root, "ignore_eos", &r->ignore_eos, e)) < 0) return -1;
    if (rc) r->set |= TM_OAI_SET_IGNORE_EOS;
    /* llama.cpp's code-completion limits (its /infill's, its /completion's); negative: 400 */
    if ((rc = get_int(root, "n_indent", 0, INT_MAX, &x, e)) < 0) return -1;
    if (rc) r->n_indent = (int)x;
    if ((rc = get_int(root, "t_max_predict_ms", 0, INT_MAX, &x, e)) < 0) return -1;
    if (rc) r->t_max_predict_ms = (int)x;
    /* stop: a string or an array of strings */
    const cJSON *v = field(root, "stop");
    if (v) {
        r->set |= TM_OAI_SET_STOP;
        const cJSON *one = cJSON_IsString(v) ? v : NULL;
        if (!one && !cJSON_IsArray(v))
            return BAD("stop", "'stop' must be a string or an array of strings, not %s", type_name(v));
        int i = 0;
        for (const cJSON *s = one ? one : v->child; s; s = one ? NULL : s->next, i++) {
            char param[32];
            snprintf(param, sizeof param, one ? "stop" : "stop[%d]", i);
            if (!cJSON_IsString(s)) return BAD(param, "'%s' must be a string, not %s", param, type_name(s));
            size_t n = strlen(s->valuestring);
            if (n == 0) continue;
            if (n > TM_OAI_MAX_STOP_LEN) return BAD(param, "'%s' is longer than %d bytes", param, TM_OAI_MAX_STOP_LEN);
            if (r->n_stop == TM_OAI_MAX_STOP) return BAD("stop", "at most %d stop strings", TM_OAI_MAX_STOP);
            if (!(r->stop[r->n_stop++] = strdup(s->valuestring))) return NOMEM();
        }
    }
    return 0;
}

/* check_grammar: text (a JSON Schema if schema, else GBNF) compiles; a 400 naming param if not */
static int check_grammar(const char *text, int schema, const char *param, tm_oai_error *e)
{
    tm_err err = {0};
    char *gbnf = NULL;
    tm_grammar *g = NULL;
    int rc = schema ? tm_json_schema_gbnf(text, strlen(text), &gbnf, &err) : TM_OK;
    if (rc == TM_OK) rc = tm_grammar_parse(&g, schema ? gbnf : text, strlen(schema ? gbnf : text), &err);
    free(gbnf);
    tm_grammar_free(g);
    if (rc == TM_E_NOMEM) return NOMEM();
    return rc ? BAD(param, "%s", err.msg) : 0;
}

/* set_schema: r->json_schema := the schema v (an object, or true), compact; checked now by turning
 * it into a grammar, so that an unsupported schema is a 400 naming its keyword */
static int set_schema(tm_oai_req *r, const cJSON *v, const char *param, tm_oai_error *e)
{
    if (!cJSON_IsObject(v) && !cJSON_IsTrue(v)) return BAD(param, "'%s' must be a JSON Schema object", param);
    if (!(r->json_schema = cJSON_PrintUnformatted(v))) return NOMEM();
    return check_grammar(r->json_schema, 1, param, e);
}

/* "response_format": {"type": "text"}, {"type": "json_object"} (JSON mode) or {"type":
 * "json_schema", "json_schema": {"name", "schema", "strict"}}; also llama.cpp's "json_schema"
 * (a schema) and "grammar" (GBNF) at the top level. At most one of them. */
static int parse_format(tm_oai_req *r, const cJSON *root, tm_oai_error *e)
{
    const cJSON *v = field(root, "response_format");
    int n = 0;
    if (v) {
        const cJSON *t = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "type") : NULL;
        if (!cJSON_IsString(t))
            return BAD("response_format", "'response_format' must be an object with a string 'type'");
        if (!strcmp(t->valuestring, "json_object")) {
            r->json_object = 1;
            n++;
        } else if (!strcmp(t->valuestring, "json_schema")) {
            const cJSON *js = cJSON_GetObjectItemCaseSensitive(v, "json_schema");
            const cJSON *sc = cJSON_IsObject(js) ? cJSON_GetObjectItemCaseSensitive(js, "schema") : NULL;
            if (!sc) return BAD("response_format", "response_format json_schema needs 'json_schema': {\"schema\": {...}}");
            if (set_schema(r, sc, "response_format.json_schema.schema", e)) return -1;
            n++;
        } else if (strcmp(t->valuestring, "text") != 0) {
            return BAD("response_format", "response_format type '%.40s' is not supported (text, json_object and "
                       "json_schema are)", t->valuestring);
        }
    }
    if ((v = field(root, "json_schema")) && !cJSON_IsNull(v)) {
        if (n++) return BAD("json_schema", "'json_schema' and 'response_format' both constrain the output; give one");
        if (set_schema(r, v, "json_schema", e)) return -1;
    }
    if ((v = field(root, "grammar")) && !cJSON_IsNull(v)) {
        if (!cJSON_IsString(v)) return BAD("grammar", "'grammar' must be a string (GBNF)");
        if (n++) return BAD("grammar", "'grammar' and another output constraint both given; give one");
        if (!(r->grammar = strdup(v->valuestring))) return NOMEM();
        if (check_grammar(r->grammar, 0, "grammar", e)) return -1;
    }
    return 0;
}

/* "logit_bias": {"token id": bias in [-100, 100], ...} (OpenAI's; the ids are checked against the
 * vocabulary at submit) */
static int parse_bias(tm_oai_req *r, const cJSON *root, tm_oai_error *e)
{
    const cJSON *v = field(root, "logit_bias");
    if (!v) return 0;
    if (!cJSON_IsObject(v)) return BAD("logit_bias", "'logit_bias' must be an object, not %s", type_name(v));
    int n = cJSON_GetArraySize(v);
    if (n > TM_OAI_MAX_BIAS) return BAD("logit_bias", "at most %d entries in 'logit_bias'", TM_OAI_MAX_BIAS);
    if (!n) return 0;
    r->bias_ids = malloc(sizeof(int32_t) * (size_t)n);
    r->bias = malloc(sizeof(float) * (size_t)n);
    if (!r->bias_ids || !r->bias) return NOMEM();
    for (const cJSON *b = v->child; b; b = b->next) {
        char *end = NULL;
        long id = strtol(b->string, &end, 10);
        if (!b->string[0] || *end || id < 0 || id > INT32_MAX || b->string[0] == '+' || b->string[0] == ' ')
            return BAD("logit_bias", "logit_bias key '%.40s' is not a token id", b->string);
        if (!cJSON_IsNumber(b) || !(b->valuedouble >= -100 && b->valuedouble <= 100))
            return BAD("logit_bias", "logit_bias['%.40s'] must be a number in [-100, 100]", b->string);
        r->bias_ids[r->n_bias] = (int32_t)id;
        r->bias[r->n_bias++] = (float)b->valuedouble;
    }
    return 0;
}

/* chat: "logprobs" (a boolean) and "top_logprobs" (0..20, which needs "logprobs": true, as
 * OpenAI's); completions: "logprobs", the alternatives per token (0..20; false: none) */
static int parse_logprobs(tm_oai_req *r, const cJSON *root, tm_oai_kind kind, tm_oai_error *e)
{
    double x;
    int rc;
    if (kind == TM_OAI_CHAT) {
        if (get_bool(root, "logprobs", &r->want_logprobs, e) < 0) return -1;
        if ((rc = get_int(root, "top_logprobs", 0, TANDEM_MAX_LOGPROBS, &x, e)) < 0) return -1;
        if (rc && x > 0 && !r->want_logprobs)
            return BAD("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        r->top_logprobs = rc ? (int)x : 0;
        return 0;
    }
    const cJSON *v = field(root, "logprobs");
    if (!v || cJSON_IsFalse(v)) return 0;
    if ((rc = get_int(root, "logprobs", 0, TANDEM_MAX_LOGPROBS, &x, e)) < 0) return -1;
    r->want_logprobs = 1;
    r->top_logprobs = (int)x;
    return 0;
}

static int parse_stream(tm_oai_req *r, const cJSON *root, tm_oai_error *e)
{
    if (get_bool(root, "stream", &r->stream, e) < 0) return -1;
    const cJSON *so = field(root, "stream_options");
    if (so) {
        if (!cJSON_IsObject(so))
            return BAD("stream_options", "'stream_options' must be an object, not %s", type_name(so));
        if (get_bool(so, "include_usage", &r->include_usage, e) < 0) {
            snprintf(e->param, sizeof e->param, "stream_options.include_usage");
            return -1;
        }
    }
    return 0;
}

/* A token id array [int, ...] -> *ids [*n]. */
static int take_ids(int32_t **ids, size_t *nids, const cJSON *arr, const char *param, tm_oai_error *e)
{
    int n = cJSON_GetArraySize(arr);
    if (n == 0) return BAD(param, "'%s' is empty", param);
    if (!(*ids = malloc(sizeof(int32_t) * (size_t)n))) return NOMEM();
    int i = 0;
    for (const cJSON *t = arr->child; t; t = t->next, i++) {
        if (!cJSON_IsNumber(t) || !(t->valuedouble >= 0 && t->valuedouble <= 2147483647.0) ||
            floor(t->valuedouble) != t->valuedouble)
            return BAD(param, "'%s[%d]' must be a token id (an integer >= 0)", param, i);
        (*ids)[i] = (int32_t)t->valuedouble;
    }
    *nids = (size_t)n;
    return 0;
}

/* "prompt": a string, [int, ...], or an array of prompts, each a string or [int, ...] (OpenAI's batch,
 * up to TM_OAI_MAX_PROMPTS). */
static int parse_prompt(tm_oai_req *r, const cJSON *root, tm_oai_error *e)
{
    const cJSON *p = field(root, "prompt");
    if (!p) return BAD("prompt", "'prompt' is required");
    r->n_prompts = 1;
    if (cJSON_IsString(p)) return (r->prompt = strdup(p->valuestring)) ? 0 : NOMEM();
    if (!cJSON_IsArray(p)) return BAD("prompt", "'prompt' must be a string or an array, not %s", type_name(p));
    const cJSON *first = p->child;
    if (!first) return BAD("prompt", "'prompt' is empty");
    if (cJSON_IsNumber(first)) return take_ids(&r->prompt_ids, &r->n_prompt_ids, p, "prompt", e);
    int n = cJSON_GetArraySize(p), i = 0;
    if (n > TM_OAI_MAX_PROMPTS) return BAD("prompt", "%d prompts in one request (at most %d)", n, TM_OAI_MAX_PROMPTS);
    r->n_prompts = 0;
    for (const cJSON *x = first; x; x = x->next, i++) {
        char param[24];
        snprintf(param, sizeof param, "prompt[%d]", i);
        char **text = i ? &r->more[i - 1].text : &r->prompt;
        int32_t **ids = i ? &r->more[i - 1].ids : &r->prompt_ids;
        size_t *nids = i ? &r->more[i - 1].n_ids : &r->n_prompt_ids;
        r->n_prompts = i + 1; /* owned from here, freed by tm_oai_req_free */
        if (cJSON_IsString(x)) {
            if (!(*text = strdup(x->valuestring))) return NOMEM();
        } else if (cJSON_IsArray(x)) {
            if (take_ids(ids, nids, x, param, e)) return -1;
        } else {
            return BAD(param, "'%s' must be a string or an array of token ids, not %s", param, type_name(x));
        }
    }
    return 0;
}

/* completions' "suffix": fill in the middle of one text prompt (null or "": none) */
static int parse_suffix(tm_oai_req *r, const cJSON *root, tm_oai_kind kind, tm_oai_error *e)
{
    const cJSON *v = field(root, "suffix");
    if (!v || cJSON_IsNull(v) || (cJSON_IsString(v) && !v->valuestring[0])) return 0;
    if (!cJSON_IsString(v)) return BAD("suffix", "'suffix' must be a string, not %s", type_name(v));
    if (kind != TM_OAI_COMPLETION) return BAD("suffix", "'suffix' is a completions field");
    if (!r->prompt || r->n_prompts > 1)
        return BAD("suffix", "'suffix' needs one text prompt (the text before the completion)");
    return (r->suffix = strdup(v->valuestring)) ? 0 : NOMEM();
}

tm_oai_prompt tm_oai_prompt_at(const tm_oai_req *r, int p)
{
    if (p <= 0) return (tm_oai_prompt){r->prompt, r->prompt_ids, r->n_prompt_ids};
    return r->more[p - 1];
}

/* One message's "content": a string, or an array of {"type":"text","text"}
 * parts (joined with "\n"). Returns a malloc'd string, or NULL (*e set). */
static char *message_content(const cJSON *c, int allow_null, const char *param, tm_oai_error *e)
{
    if (!c || cJSON_IsNull(c)) {
        if (allow_null) return strdup("");
        BAD(param, "'%s' is required", param);
        return NULL;
    }
    if (cJSON_IsString(c)) return strdup(c->valuestring);
    if (!cJSON_IsArray(c)) {
        BAD(param, "'%s' must be a string or an array of content parts, not %s", param, type_name(c));
        return NULL;
    }
    size_t total = 1;
    int j = 0;
    for (const cJSON *part = c->child; part; part = part->next, j++) {
        char pp[96];
        snprintf(pp, sizeof pp, "%s[%d]", param, j);
        const cJSON *t = cJSON_IsObject(part) ? cJSON_GetObjectItemCaseSensitive(part, "type") : NULL;
        const cJSON *tx = cJSON_IsObject(part) ? cJSON_GetObjectItemCaseSensitive(part, "text") : NULL;
        if (!cJSON_IsString(t) || strcmp(t->valuestring, "text") != 0) {
            BAD(pp, "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
            return NULL;
        }
        if (!cJSON_IsString(tx)) {
            BAD(pp, "'%s.text' must be a string", pp);
            return NULL;
        }
        total += strlen(tx->valuestring) + 1;
    }
    char *s = malloc(total), *w = s;
    if (!s) {
        NOMEM();
        return NULL;
    }
    for (const cJSON *part = c->child; part; part = part->next) {
        const char *tx = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
        if (w != s) *w++ = '\n';
        size_t n = strlen(tx);
        memcpy(w, tx, n);
        w += n;
    }
    *w = '\0';
    return s;
}

/* An assistant message's "tool_calls" (absent, null or []: none) into o, each call's arguments
 * string as the object it holds (a string that holds no JSON object stays a string). */
static int message_tool_calls(cJSON *o, const cJSON *calls, int i, tm_oai_error *e)
{
    char param[96];
    if (!calls || cJSON_IsNull(calls) || (cJSON_IsArray(calls) && !calls->child)) return 0;
    snprintf(param, sizeof param, "messages[%d].tool_calls", i);
    if (!cJSON_IsArray(calls)) return BAD(param, "'%s' must be an array", param);
    cJSON *arr = cJSON_AddArrayToObject(o, "tool_calls");
    if (!arr) return NOMEM();
    int k = 0;
    for (const cJSON *c = calls->child; c; c = c->next, k++) {
        snprintf(param, sizeof param, "messages[%d].tool_calls[%d]", i, k);
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
        if (!cJSON_IsObject(c) || !cJSON_IsObject(fn) || !cJSON_IsString(name))
            return BAD(param, "'%s' must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}",
                       param);
        if (args && !cJSON_IsNull(args) && !cJSON_IsString(args) && !cJSON_IsObject(args))
            return BAD(param, "'%s.function.arguments' must be a string of JSON", param);
        if (id && !cJSON_IsNull(id) && !cJSON_IsString(id)) return BAD(param, "'%s.id' must be a string", param);
        cJSON *parsed = cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : NULL;
        if (parsed && !cJSON_IsObject(parsed)) {
            cJSON_Delete(parsed);
            parsed = NULL;
        }
        cJSON *call = cJSON_CreateObject(), *f = cJSON_CreateObject();
        cJSON *a = parsed ? parsed
                   : cJSON_IsObject(args) ? cJSON_Duplicate(args, 1)
                   : cJSON_CreateString(cJSON_IsString(args) ? args->valuestring : "{}");
        int ok = call && f && a;
        if (ok) cJSON_AddItemToArray(arr, call);
        ok = ok && (!cJSON_IsString(id) || cJSON_AddStringToObject(call, "id", id->valuestring)) &&
             cJSON_AddStringToObject(call, "type", "function") && cJSON_AddStringToObject(f, "name", name->valuestring);
        if (ok) {
            cJSON_AddItemToObject(f, "arguments", a);
            cJSON_AddItemToObject(call, "function", f);
            a = f = NULL;
        }
        cJSON_Delete(a);
        cJSON_Delete(f);
        if (!ok) return NOMEM();
    }
    return 0;
}

/* A tool message's "tool_call_id" into o. */
static int message_tool_id(cJSON *o, const cJSON *m, int i, tm_oai_error *e)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "tool_call_id");
    if (!id || cJSON_IsNull(id)) return 0;
    char param[64];
    snprintf(param, sizeof param, "messages[%d].tool_call_id", i);
    if (!cJSON_IsString(id)) return BAD(param, "'%s' must be a string", param);
    return cJSON_AddStringToObject(o, "tool_call_id", id->valuestring) ? 0 : NOMEM();
}

/* "tools", "tool_choice", "parallel_tool_calls"; the tools also go to the chat template (its
 * "tools" variable, unless chat_template_kwargs gave one). */
static int parse_tools(tm_oai_req *r, const cJSON *root, tm_oai_kind kind, tm_oai_error *e)
{
    const cJSON *tools = field(root, "tools"), *choice = field(root, "tool_choice");
    if (tools && !cJSON_IsArray(tools)) return BAD("tools", "'tools' must be an array, not %s", type_name(tools));
    if (tools && !tools->child) tools = NULL;
    if (tools && kind != TM_OAI_CHAT) return BAD("tools", "tools are for /v1/chat/completions");
    r->parallel_tool_calls = 1;
    if (get_bool(root, "parallel_tool_calls", &r->parallel_tool_calls, e) < 0) return -1;
    r->tool_choice = tools ? TM_OAI_TOOLS_AUTO : TM_OAI_TOOLS_NONE;
    if (choice && cJSON_IsString(choice)) {
        const char *c = choice->valuestring;
        if (!strcmp(c, "none")) r->tool_choice = TM_OAI_TOOLS_NONE;
        else if (!strcmp(c, "auto")) r->tool_choice = tools ? TM_OAI_TOOLS_AUTO : TM_OAI_TOOLS_NONE;
        else if (!strcmp(c, "required")) r->tool_choice = TM_OAI_TOOLS_REQUIRED;
        else return BAD("tool_choice", "'tool_choice' = '%.40s' is not one of none, auto, required", c);
    } else if (choice) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(choice, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(choice, "type");
        if (!cJSON_IsObject(choice) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") ||
            !cJSON_IsString(name))
            return BAD("tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", "
                       "\"function\": {\"name\": ...}}");
        if (!(r->tool_name = strdup(name->valuestring))) return NOMEM();
        r->tool_choice = TM_OAI_TOOLS_NAMED;
    }
    if (r->tool_choice >= TM_OAI_TOOLS_REQUIRED && !tools)
        return BAD("tool_choice", "'tool_choice' asks for a call but no tools are given");
    if (r->tool_choice >= TM_OAI_TOOLS_REQUIRED && (r->json_object || r->json_schema || r->grammar))
        return BAD("tool_choice", "'tool_choice' %s and an output constraint (response_format, json_schema, grammar) "
                   "both given; give one", r->tool_choice == TM_OAI_TOOLS_NAMED ? "naming a function" : "required");
    if (!tools) return 0;
    if (!(r->tools_json = cJSON_PrintUnformatted(tools))) return NOMEM();
    tm_err err = {0};
    int rc = tm_tool_check(r->tools_json, &err);
    if (rc == TM_E_NOMEM) return NOMEM();
    if (rc) return BAD("tools", "%s", err.msg);
    if (r->tool_name) {
        int found = 0;
        for (const cJSON *t = tools->child; t && !found; t = t->next) {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "name");
            found = !strcmp(n->valuestring, r->tool_name);
        }
        if (!found) return BAD("tool_choice", "'tool_choice' names '%.64s', which is not among the tools", r->tool_name);
    }
    /* the template's "tools" */
    cJSON *kw = r->template_kwargs_json ? cJSON_Parse(r->template_kwargs_json) : cJSON_CreateObject();
    if (!kw) return NOMEM();
    rc = 0;
    if (!cJSON_GetObjectItemCaseSensitive(kw, "tools")) {
        cJSON *copy = cJSON_Duplicate(tools, 1);
        char *js = copy && cJSON_AddItemToObject(kw, "tools", copy) ? cJSON_PrintUnformatted(kw) : NULL;
        if (!js && copy && !cJSON_GetObjectItemCaseSensitive(kw, "tools")) cJSON_Delete(copy);
        if (js) {
            free(r->template_kwargs_json);
            r->template_kwargs_json = js;
        } else {
            rc = NOMEM();
        }
    }
    cJSON_Delete(kw);
    return rc;
}

/* "messages" -> a normalised JSON array (see oai.h). */
static int parse_messages(tm_oai_req *r, const cJSON *root, tm_oai_error *e)
{
    const cJSON *ms = field(root, "messages");
    if (!ms) return BAD("messages", "'messages' is required");
    if (!cJSON_IsArray(ms)) return BAD("messages", "'messages' must be an array, not %s", type_name(ms));
    if (!ms->child) return BAD("messages", "'messages' is empty");
    cJSON *out = cJSON_CreateArray();
    if (!out) return NOMEM();
    int i = 0, rc = 0;
    for (const cJSON *m = ms->child; m && rc == 0; m = m->next, i++) {
        char param[64];
        snprintf(param, sizeof param, "messages[%d]", i);
        if (!cJSON_IsObject(m)) { rc = BAD(param, "'%s' must be an object, not %s", param, type_name(m)); break; }
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        snprintf(param, sizeof param, "messages[%d].role", i);
        if (!cJSON_IsString(role)) { rc = BAD(param, "'%s' must be a string", param); break; }
        const char *rn = role->valuestring;
        if (!strcmp(rn, "developer")) rn = "system";
        if (strcmp(rn, "system") && strcmp(rn, "user") && strcmp(rn, "assistant") && strcmp(rn, "tool")) {
            rc = BAD(param, "'%s' = '%.40s' is not supported (system, user, assistant, tool)", param,
                     role->valuestring);
            break;
        }
        int assistant = !strcmp(rn, "assistant");
        snprintf(param, sizeof param, "messages[%d].content", i);
        char *content = message_content(cJSON_GetObjectItemCaseSensitive(m, "content"), assistant, param, e);
        if (!content) { rc = -1; break; }
        cJSON *o = cJSON_CreateObject();
        int ok = o && cJSON_AddStringToObject(o, "role", rn) && cJSON_AddStringToObject(o, "content", content);
        free(content);
        if (o) cJSON_AddItemToArray(out, o);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(m, "name");
        if (ok && cJSON_IsString(name)) ok = cJSON_AddStringToObject(o, "name", name->valuestring) != NULL;
        if (!ok) { rc = NOMEM(); break; }
        const cJSON *rsn = assistant ? cJSON_GetObjectItemCaseSensitive(m, "reasoning_content") : NULL;
        /* the reasoning under both names templates read: reasoning_content (Qwen3, GLM), thinking (gpt-oss) */
        if (cJSON_IsString(rsn) && (!cJSON_AddStringToObject(o, "reasoning_content", rsn->valuestring) ||
                                    !cJSON_AddStringToObject(o, "thinking", rsn->valuestring))) {
            rc = NOMEM();
            break;
        }
        if (assistant) rc = message_tool_calls(o, cJSON_GetObjectItemCaseSensitive(m, "tool_calls"), i, e);
        else if (!strcmp(rn, "tool")) rc = message_tool_id(o, m, i, e);
    }
    if (rc == 0 && !(r->messages_json = cJSON_PrintUnformatted(out))) rc = NOMEM();
    cJSON_Delete(out);
    if (rc != 0) return rc;
    const cJSON *kw = field(root, "chat_template_kwargs"), *eff = field(root, "reasoning_effort");
    if (kw && !cJSON_IsObject(kw))
        return BAD("chat_template_kwargs", "'chat_template_kwargs' must be an object, not %s", type_name(kw));
    if (eff && !cJSON_IsNull(eff) && (!cJSON_IsString(eff) || !eff->valuestring[0]))
        return BAD("reasoning_effort", "'reasoning_effort' must be a string (\"low\", \"medium\", \"high\"), not %s",
                   type_name(eff));
    /* OpenAI's reasoning_effort reaches the template as the kwarg its templates read (gpt-oss's) unless the
     * kwargs set it themselves */
    int add_eff = cJSON_IsString(eff) && !(kw && field(kw, "reasoning_effort"));
    if (kw || add_eff) {
        cJSON *k = kw ? cJSON_Duplicate(kw, 1) : cJSON_CreateObject();
        int bad = !k || (add_eff && !cJSON_AddStringToObject(k, "reasoning_effort", eff->valuestring));
        if (!bad) r->template_kwargs_json = cJSON_PrintUnformatted(k);
        cJSON_Delete(k);
        if (bad || !r->template_kwargs_json) return NOMEM();
    }
    return 0;
}

int tm_oai_parse(tm_oai_req *r, tm_oai_kind kind, const char *body, size_t len, tm_oai_error *e)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    memset(e, 0, sizeof *e);
    const char *end = NULL;
    cJSON *root = body && len ? cJSON_ParseWithLengthOpts(body, len, &end, 0) : NULL;
    if (!root) {
        size_t at = end && end >= body && end <= body + len ? (size_t)(end - body) : 0;
        if (!len) return BAD(NULL, "the request body is empty (expected a JSON object)");
        return BAD(NULL, "the request body is not valid JSON (error near byte %zu)", at);
    }
    int rc = 0;
    if (end) /* only whitespace may follow the value */
        for (const char *p = end; p < body + len && rc == 0; p++)
            if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n' && *p != '\0')
                rc = BAD(NULL, "the request body is not valid JSON (extra data at byte %zu)", (size_t)(p - body));
    if (rc == 0 && !cJSON_IsObject(root))
        rc = BAD(NULL, "the request body must be a JSON object, not %s", type_name(root));
    if (rc == 0) {
        const cJSON *model = field(root, "model");
        if (model && !cJSON_IsString(model)) rc = BAD("model", "'model' must be a string, not %s", type_name(model));
        else if (model && !(r->model = strdup(model->valuestring))) rc = NOMEM();
    }
    if (rc == 0) rc = kind == TM_OAI_CHAT ? parse_messages(r, root, e) : parse_prompt(r, root, e);
    if (rc == 0) rc = check_unsupported(root, kind, e);
    if (rc == 0) rc = parse_suffix(r, root, kind, e);
    if (rc == 0) rc = parse_sampling(r, root, kind, e);
    if (rc == 0 && kind == TM_OAI_COMPLETION && get_bool(root, "echo", &r->echo, e) < 0) rc = -1;
    r->prompt_logprobs = -1;
    if (rc == 0) {
        const cJSON *v = field(root, "prompt_logprobs");
        double x;
        int got = v && !cJSON_IsNull(v) ? get_int(root, "prompt_logprobs", 0, TANDEM_MAX_LOGPROBS, &x, e) : 0;
        if (got < 0) rc = -1;
        else if (got) r->prompt_logprobs = (int)x;
    }
    if (rc == 0) rc = parse_stream(r, root, e);
    if (rc == 0 && r->prompt_logprobs >= 0 && r->stream)
        rc = BAD("prompt_logprobs", "'prompt_logprobs' cannot be streamed");
    if (rc == 0 && r->n_prompts * r->best_of > TM_OAI_MAX_CHOICES)
        rc = BAD("prompt", "%d prompts x %d choices: at most %d choices a request", r->n_prompts, r->best_of,
                 TM_OAI_MAX_CHOICES);
    if (rc == 0 && r->best_of > r->n && (kind == TM_OAI_CHAT || r->stream))
        rc = BAD("best_of", kind == TM_OAI_CHAT ? "'best_of' is a completions field" : "'best_of' > 'n' cannot be streamed");
    if (rc == 0) rc = parse_logprobs(r, root, kind, e);
    if (rc == 0) rc = parse_format(r, root, e);
    if (rc == 0) rc = parse_bias(r, root, e);
    if (rc == 0) rc = parse_tools(r, root, kind, e);
    cJSON_Delete(root);
    if (rc != 0) {
        tm_oai_req_free(r);
        r->kind = kind;
    }
    return rc;
}

void tm_oai_req_free(tm_oai_req *r)
{
    free(r->prompt);
    free(r->suffix);
    free(r->prompt_ids);
    for (int i = 0; i + 1 < r->n_prompts; i++) {
        free(r->more[i].text);
        free(r->more[i].ids);
    }
    free(r->messages_json);
    free(r->template_kwargs_json);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->model);
    free(r->bias_ids);
    free(r->bias);
    free(r->json_schema);
    free(r->grammar);
    free(r->tools_json);
    free(r->tool_name);
    memset(r, 0, sizeof *r);
}

void tm_oai_apply(const tm_oai_req *r, tandem_request *q)
{
    if (r->prompt) {
        q->prompt = r->prompt;
    } else if (r->prompt_ids) {
        q->prompt = NULL;
        q->prompt_ids = r->prompt_ids;
        q->n_prompt_ids = r->n_prompt_ids;
    }
    if (r->set & TM_OAI_SET_MAX_TOKENS) q->max_tokens = r->max_tokens ? r->max_tokens : TANDEM_MAX_TOKENS_NONE;
    if (r->set & TM_OAI_SET_TEMPERATURE) q->temperature = r->temperature;
    if (r->set & TM_OAI_SET_TOP_P) q->top_p = r->top_p;
    if (r->set & TM_OAI_SET_TOP_K) q->top_k = r->top_k;
    if (r->set & TM_OAI_SET_MIN_P) q->min_p = r->min_p;
    if (r->set & TM_OAI_SET_SEED) q->seed = r->seed;
    if (r->set & TM_OAI_SET_PRESENCE) q->presence_penalty = r->presence_penalty;
    if (r->set & TM_OAI_SET_FREQUENCY) q->frequency_penalty = r->frequency_penalty;
    if (r->set & TM_OAI_SET_REPETITION) q->repetition_penalty = r->repetition_penalty;
    if (r->set & TM_OAI_SET_IGNORE_EOS) q->ignore_eos = r->ignore_eos;
    if (r->set & TM_OAI_SET_STOP) q->stop = r->n_stop ? (const char *const *)r->stop : NULL;
    q->logprobs = r->want_logprobs ? r->top_logprobs : -1; /* the caller sets q->on_logprob */
    q->json_object = r->json_object;
    q->json_schema = r->json_schema;
    q->grammar = r->grammar;
    q->n_indent = r->n_indent;
    q->t_max_predict_ms = r->t_max_predict_ms;
    q->logit_bias_ids = r->bias_ids;
    q->logit_bias = r->bias;
    q->n_logit_bias = r->n_bias;
}
